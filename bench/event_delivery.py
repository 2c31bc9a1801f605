"""Call-event delivery benchmark (not a test): events per second the delivery worker sends to a receiver
on loopback.

Seeds one organization with a webhook subscribed to every event type and `--calls` calls started and
ended (3 events each: call.started, call.ended, call.analyzed, written to the outbox with the calls, as
the engine does), then starts the in-process delivery worker of calls/webhooks/events.py (BACKGROUND_WORK=inprocess,
EVENTS_WORKER_THREADS senders) and times until the loopback receiver (testing/webhooks.py) has every
event: each one claimed, signed, POSTed through the egress guard and its attempt recorded.

Its own database (bench/calls_bench.py's own_database: var/bench-eventbench.sqlite3, or `<database>_eventbench`
on PostgreSQL when DATABASE_URL names it).

Usage: .venv/bin/python bench/event_delivery.py [--calls 300] [--threads 4]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()

    from bench.calls_bench import own_database

    own_database("eventbench")
    os.environ.update(
        BACKGROUND_WORK="inprocess",
        EVENTS_WORKER_THREADS=str(args.threads),
        OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8",
        LIVENESS_HEARTBEAT_SECONDS="0",
        CALLS_MAINTENANCE_SECONDS="0",
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from accounts.services import organization_create
    from agents.models import Agent
    from calls import services
    from calls.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint
    from calls.webhooks import events
    from testing.webhooks import LoopbackReceiver

    call_command("migrate", verbosity=0, interactive=False)
    organization, _ = organization_create(name="Event bench", plan_code="agency")
    now = timezone.now()
    agent = Agent.objects.create(
        organization=organization, name="Bench", status="active", agent_type="static", updated_at=now
    )
    with LoopbackReceiver() as receiver:
        WebhookEndpoint.objects.create(
            organization=organization,
            url=receiver.url("/events"),
            events=["call.started", "call.ended", "call.analyzed"],
            secret="whsec_bench",
            created_at=now,
            updated_at=now,
        )
        clock = time.perf_counter()
        for _ in range(args.calls):
            call = services.call_start(agent=agent, channel="web")
            services.call_finish(call=call, status="completed")
        recorded = time.perf_counter() - clock
        expected = args.calls * 3

        clock = time.perf_counter()
        events.start_worker()
        while len(receiver.requests) < expected:
            time.sleep(0.01)
        while WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING).exists():
            time.sleep(0.01)
        delivered = time.perf_counter() - clock
    succeeded = WebhookDelivery.objects.filter(status=DeliveryStatus.SUCCEEDED).count()
    print(
        f"call events ({connection.vendor}, {args.threads} sender threads): {expected} events of {args.calls} calls "
        f"delivered to a loopback receiver in {delivered:.2f} s = {expected / delivered:.0f} events/s "
        f"({succeeded} succeeded; recording them with the calls took {recorded:.2f} s)"
    )


if __name__ == "__main__":
    main()
