"""Signals of the accounts app: apps above it react without accounts importing them."""

from django.dispatch import Signal

# Sent once by `manage.py bootstrapdemo` with `organization`, the new demo organization: the agents app
# adds the demo agent (agents/demo.py). A receiver may return a line to print.
demo_organization_created = Signal()
