"""Call batches (campaigns): one agent calls a list of people, inside a calling window, a few at a time,
with retries (docs/guides/campaigns.md).

services.py holds the rules and the scheduler, selectors.py the reads, serializers.py the wire shapes,
apis.py the REST views (`/public/v1/call-batches`) and admin.py the dashboard pages (registered by
telephony/admin.py)."""
