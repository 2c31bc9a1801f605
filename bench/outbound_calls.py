"""Outbound call placing benchmark (not a test): how fast the dispatcher of telephony/outbound/dispatcher.py hands
queued calls to the carrier, and how long a call waits between `POST /public/v1/calls` and the carrier's
REST request, against a loopback stand-in for Twilio's REST API (TWILIO_API_BASE_URL) that answers every
`Calls.json` create like Twilio (201, a new CallSid, `queued`) and records when it arrived.

Two runs on one organization whose plan has no outbound or live-call cap (the bench measures the
dispatcher, not the plan):
1. throughput: `--calls` calls queued first (POST /calls with the dispatcher stopped), then one dispatcher
   started: calls placed per second until every call rings (claim, stream token, REST request with its
   TwiML, `ringing` stored);
2. latency: `--calls` POST /calls one after another with the in-process dispatcher running (woken by each
   commit, as in the embedded default): the time from the POST to the carrier's request, p50 and p95.

Its own database (bench/calls_bench.py's own_database: var/bench-outboundbench.sqlite3, or
`<database>_outboundbench` on PostgreSQL when DATABASE_URL names it).

Usage: .venv/bin/python bench/outbound_calls.py [--calls 200] [--threads 8]
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ACCOUNT_SID = "AC" + "b" * 32
AUTH_TOKEN = "c" * 32
NUMBER = "+14155550100"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--threads", type=int, default=8, help="OUTBOUND_PLACE_THREADS")
    args = parser.parse_args()

    from bench.calls_bench import own_database

    own_database("outboundbench")
    os.environ.update(
        BACKGROUND_WORK="off",  # no dispatcher woken while the calls are queued; started by hand below
        OUTBOUND_PLACE_THREADS=str(args.threads),
        OUTBOUND_POLL_SECONDS="5",
        PUBLIC_BASE_URL="https://voice.example.test",
        REALTIME_TOKEN_SECRET="outbound-bench-secret-0123456789abcdef",
        LIVENESS_HEARTBEAT_SECONDS="0",
        CALLS_MAINTENANCE_SECONDS="0",
        API_RATE_LIMITS="false",
        EVENTS_POLL_SECONDS="0",  # no event delivery
        ALLOWED_HOSTS="testserver",
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")
    import django

    django.setup()
    from aiohttp import web
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone
    from rest_framework.test import APIClient

    from accounts.models import Plan
    from accounts.services import organization_create
    from agents.models import Agent
    from calls.models import Call
    from telephony.outbound import dispatcher as outbound
    from telephony.services.accounts import telephony_account_set
    from telephony.services.numbers import phone_number_claim
    from testing.twilio_rest import call_resource
    from testing.webhooks import LoopbackReceiver

    class Twilio(LoopbackReceiver):
        """Answers each call create with a new CallSid and notes when the request for `To` arrived."""

        def __init__(self) -> None:
            super().__init__()
            self.arrived: dict[str, float] = {}

        async def _handle(self, request: web.Request) -> web.StreamResponse:
            body = await request.read()
            to = parse_qs(body.decode()).get("To", [""])[0]
            self.arrived[to] = time.perf_counter()
            sid = "CA" + secrets.token_hex(16)
            return web.json_response(call_resource(sid=sid, to=to, from_=NUMBER, account_sid=ACCOUNT_SID), status=201)

    call_command("migrate", verbosity=0, interactive=False)
    organization, issued = organization_create(name="Outbound bench", plan_code="agency")
    Plan.objects.filter(pk=organization.plan_id).update(max_outbound_calls=None, max_concurrent_calls=None)
    agent = Agent.objects.create(
        organization=organization, name="Bench", status="active", instructions="Hello.", updated_at=timezone.now()
    )
    telephony_account_set(organization=organization, account_sid=ACCOUNT_SID, auth_token=AUTH_TOKEN)
    number = phone_number_claim(organization=organization, number=NUMBER)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.raw_key}")

    def post(to: str) -> None:
        response = client.post(
            "/public/v1/calls",
            {"agentId": str(agent.pk), "phoneNumberId": str(number.pk), "to": to},
            format="json",
        )
        assert response.status_code == 201, response.content

    def ringing() -> int:
        return Call.objects.filter(status="ringing").count()

    with Twilio() as twilio:
        settings.TWILIO_API_BASE_URL = twilio.base

        # 1. Throughput: all queued first, then one dispatcher places them.
        numbers = [f"+1212555{2000 + n:04d}" for n in range(args.calls)]
        for to in numbers:
            post(to)
        claiming = [0.0]
        claim = outbound._claim

        def timed_claim(*args: object, **kwargs: object) -> list[object]:
            started = time.perf_counter()
            try:
                return claim(*args, **kwargs)  # type: ignore[arg-type]
            finally:
                claiming[0] += time.perf_counter() - started

        outbound._claim = timed_claim  # type: ignore[assignment]
        clock = time.perf_counter()
        while outbound.outbound_dispatch():
            pass
        placed_in = time.perf_counter() - clock
        outbound._claim = claim  # type: ignore[assignment]
        assert ringing() == args.calls and len(twilio.arrived) == args.calls, (ringing(), len(twilio.arrived))
        Call.objects.all().delete()

        # 2. Latency: POST one after another, the in-process dispatcher woken by each commit.
        settings.BACKGROUND_WORK = "inprocess"
        twilio.arrived.clear()
        numbers = [f"+1212555{4000 + n:04d}" for n in range(args.calls)]
        posted: dict[str, float] = {}
        outbound.start_worker()
        clock = time.perf_counter()
        for to in numbers:
            posted[to] = time.perf_counter()
            post(to)
        posting = time.perf_counter() - clock
        deadline = time.monotonic() + 60
        while len(twilio.arrived) < args.calls and time.monotonic() < deadline:
            time.sleep(0.01)
        waits = sorted((twilio.arrived[to] - posted[to]) * 1000 for to in numbers if to in twilio.arrived)

    p50 = statistics.median(waits)
    p95 = waits[max(0, int(len(waits) * 0.95) - 1)]
    print(
        f"outbound calls ({connection.vendor}, {args.threads} placing threads): {args.calls} queued calls placed "
        f"against a loopback Twilio in {placed_in:.2f} s = {args.calls / placed_in:.0f} calls placed/s "
        f"(claiming them {claiming[0]:.2f} s); "
        f"POST /calls -> carrier request p50 {p50:.1f} ms, p95 {p95:.1f} ms over {len(waits)} calls "
        f"(POSTed at {args.calls / posting:.0f}/s)"
    )


if __name__ == "__main__":
    main()
