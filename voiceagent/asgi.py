"""ASGI entry point: HTTP to Django, WebSockets to the Channels consumers (Daphne serves both)."""

import gc
import os
import sys

# The event loop carries live audio. A worker thread doing Python work (a database write of the call
# record, an agent-log batch, a model load) otherwise keeps the GIL for up to 5 ms at a time, and every
# await of the loop (the next audio frame, a tool call's reply) waits behind it.
sys.setswitchinterval(0.0005)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")

import django  # noqa: E402 - imported after the settings module is set (and the ASGI app made)

django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application

from voiceagent.routing import make_application  # noqa: E402 - imported after the settings module is set (and the ASGI app made)

# Django's ASGI handler (each request's thread taken from a pool: voiceagent/http.py) and the consumers.
application = make_application()

# Background work starts with the serving process, where BACKGROUND_WORK says (kit/background.py; Daphne
# imports this module once per process at start-up, its ASGI lifespan events are not relied on).
# Upkeep: one sweep now, so calls and documents a crashed process left behind are closed without waiting
# for a new call, then (inprocess) one every CALLS_MAINTENANCE_SECONDS.
from calls.maintenance import start_upkeep  # noqa: E402 - imported after the settings module is set (and the ASGI app made)

start_upkeep()

# Call events (calls/webhooks/events.py): with BACKGROUND_WORK=inprocess (the embedded default) this process
# delivers them; its worker starts now and first sends what a stopped process left pending.
from calls.webhooks.events import start_worker  # noqa: E402 - imported after the settings module is set (and the ASGI app made)

start_worker()

# Call batches (telephony/campaigns/services.py): with BACKGROUND_WORK=inprocess this process places their due
# calls every BATCH_TICK_SECONDS.
from telephony.campaigns.services import ensure_scheduler  # noqa: E402 - imported after the settings module is set (and the ASGI app made)

ensure_scheduler()

# Outbound calls (telephony/outbound/dispatcher.py): with BACKGROUND_WORK=inprocess this process places queued
# calls; its dispatcher starts now and first places what a stopped process left queued.
from telephony.outbound.dispatcher import start_worker as start_outbound_worker  # noqa: E402 - imported after the settings module is set (and the ASGI app made)

start_outbound_worker()

# SIP (telephony/sip/endpoint.py): on the embedded default (no Redis) a web server started with SIP_BIND serves
# SIP itself, so that hang-ups and outbound calls reach its calls; with Redis, `manage.py sipserver` does.
from telephony.sip.endpoint import start_in_web_server  # noqa: E402 - imported after the settings module is set (and the ASGI app made)

start_in_web_server()

# What is loaded by now (modules, classes, settings, URL patterns, admin) lives as long as the process: out of
# the cyclic collector's sight from here on. A full collection walked all of it (about 170,000 objects, 0.45 s
# of CPU; 300,000 and 0.5 s once the speech models are loaded, realtime/apps.py freezes those too) while the
# event loop and its calls' audio waited, and once more as the process exited (0.7 s of CPU; a stopped
# server took 2.4-2.8 s to exit, 0.4 s with these frozen).
gc.freeze()
