"""Fault: one organization sends text that cannot be stored (a lone surrogate `\\ud800`, NUL) to every
endpoint, and holds an old poisoned row, while another organization's unanswered outbound call waits.

Starts one server (the outbound dispatcher and the upkeep sweep in-process, Twilio's REST API a loopback
stand-in that records every call placed). Organization A holds a stuck outbound call stored before the
edge refused such text (its variables hold a lone surrogate, and a webhook endpoint wants its
`call.ended` event, which cannot be written: the upkeep job used to raise on it and stop), then sends a
poisoned body to each endpoint (calls, agents, tests, realtime sessions, batches in JSON and CSV,
webhooks, tools, a query string). Organization B places one call that nobody answers and no status
callback ever reports on. Prints what A's requests got, whether anything of A's was placed at Twilio,
what happened to B's call (it must be ended by upkeep soon after OUTBOUND_STUCK_AFTER_SECONDS) and that
both organizations' lists still answer 200.

Usage: .venv/bin/python bench/faults/surrogate.py [--stuck 10] [--sweep 2]
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import timedelta
from typing import Any

from common import ROOT, bench_env, make_agent, setup

SURROGATE = "\ud800"
NUL = "\x00"
OTHER_SID = "AC" + "8" * 32
OTHER_NUMBER = "+14155550101"
LISTS = ("/public/v1/calls", "/public/v1/agents", "/public/v1/call-batches", "/public/v1/webhooks")


def other_organization() -> tuple[Any, str, Any]:
    """Organization B: its own Twilio account, number and active agent; returns it, its API key, its agent."""
    from accounts.services import organization_create
    from telephony.services.accounts import telephony_account_set
    from telephony.services.numbers import phone_number_claim

    organization, issued = organization_create(name="Bystander", plan_code="agency")
    telephony_account_set(organization=organization, account_sid=OTHER_SID, auth_token="e" * 32)
    organization.bench_number = phone_number_claim(organization=organization, number=OTHER_NUMBER)
    return organization, issued.raw_key, make_agent(organization, "Bystander agent")


def old_poisoned_call(organization: Any, agent: Any) -> Any:
    """A's outbound call as a row stored before the fix could hold it: ringing for an hour, a lone surrogate
    in its variables, and a webhook endpoint that wants its `call.ended` event. None on a database that
    cannot hold it (PostgreSQL)."""
    from django.db import DatabaseError, transaction
    from django.utils import timezone

    from calls.models import Call, WebhookEndpoint
    from telephony.models import OutboundCall

    now = timezone.now()
    try:
        with transaction.atomic():
            call = Call.objects.create(
                organization=organization,
                agent=agent,
                agent_name=agent.name,
                channel="phone",
                direction="outbound",
                status="ringing",
                from_number=organization.bench_number.phone_number,
                to_number="+14155550142",
                started_at=now - timedelta(hours=1),
                variables={"name": f"Ada{SURROGATE}"},
            )
            OutboundCall.objects.create(
                call=call, phone_number=organization.bench_number, placed_at=now - timedelta(hours=1)
            )
            WebhookEndpoint.objects.create(
                organization=organization,
                url="https://hooks.example.test/a",
                events=["call.ended"],
                secret="s" * 32,
                created_at=now,
                updated_at=now,
            )
    except (DatabaseError, UnicodeEncodeError) as error:
        print(f"  (the database refuses the poisoned row itself: {type(error).__name__}; no old row)")
        return None
    return call


def poisoned_requests(http: Any, agent: Any) -> list[tuple[str, Any]]:
    """(what, response) for a poisoned body to each endpoint."""
    number = str(agent.organization.bench_number.pk)
    origin = {"agentId": str(agent.pk), "phoneNumberId": number}

    def post(path: str, body: Any, method: str = "POST") -> Any:
        return http.request(
            method, path, content=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )

    schema = {"type": "object", "properties": {"id": {"type": "string", "description": NUL}}}
    csv = f"to,day\n+14155551000,Mon{NUL}\n".encode()
    return [
        (
            "POST /calls variables",
            post("/public/v1/calls", {**origin, "to": "+14155550142", "variables": {"n": SURROGATE}}),
        ),
        (
            "POST /agents analysisPlan",
            post("/public/v1/agents", {"name": "X", "analysisPlan": {"summary": {"prompt": NUL}}}),
        ),
        ("PATCH /agents redactPii key", post(f"/public/v1/agents/{agent.pk}", {"redactPii": {SURROGATE: 1}}, "PATCH")),
        (
            "POST tests turns",
            post(f"/public/v1/agents/{agent.pk}/tests", {"name": "T", "turns": [{"user": SURROGATE}]}),
        ),
        (
            "POST realtime-sessions metadata",
            post(f"/public/v1/agents/{agent.pk}/realtime-sessions", {"metadata": {"a": NUL}}),
        ),
        (
            "POST call-batches variables",
            post(
                "/public/v1/call-batches",
                {**origin, "name": "B", "recipients": [{"to": "+14155551000", "variables": {"d": SURROGATE}}]},
            ),
        ),
        (
            "POST call-batches CSV cell",
            http.post(
                "/public/v1/call-batches", data={**origin, "name": "C"}, files={"file": ("l.csv", csv, "text/csv")}
            ),
        ),
        (
            "POST webhooks key",
            post("/public/v1/webhooks", {"url": "https://hooks.example.test/b", "events": ["call.ended"], NUL: 1}),
        ),
        (
            "POST tools parameterSchema",
            post(f"/public/v1/agents/{agent.pk}/tools", {"name": "t", "parameterSchema": schema}),
        ),
        ("GET /calls?q=%00", http.get("/public/v1/calls?q=%00")),
    ]


def mend_stored_rows() -> int:
    """What `migrate` runs once on an existing database (calls/migrations/0012)."""
    import importlib
    from types import SimpleNamespace

    from django.apps import apps
    from django.db import connection

    migration = importlib.import_module("calls.migrations.0013_mend_unstorable_text")
    return int(migration.mend(apps, SimpleNamespace(connection=connection)))


def lists(http: Any) -> str:
    return ", ".join(f"{path.rsplit('/', 1)[1]} {http.get(path).status_code}" for path in LISTS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stuck", type=int, default=10, help="OUTBOUND_STUCK_AFTER_SECONDS of the server")
    parser.add_argument("--sweep", type=int, default=2, help="CALLS_MAINTENANCE_SECONDS of the server")
    args = parser.parse_args()

    env = bench_env("surrogate")
    organization = setup(env)
    import httpx

    from accounts.services import apikey_create
    from calls.models import Call
    from telephony.models import OutboundCall
    from testing.daphne import DaphneServer
    from testing.servers import free_port
    from testing.twilio_rest import call_created, created_calls
    from testing.webhooks import LoopbackReceiver, Reply

    key_a = apikey_create(organization=organization, name="poisoner").raw_key
    agent_a = make_agent(organization, "Poisoned agent")
    other, key_b, agent_b = other_organization()
    print("organization A: an old poisoned row")
    poisoned = old_poisoned_call(organization, agent_a)

    port = free_port()
    with LoopbackReceiver(default=Reply(status=500, json={"message": "unscripted"})) as twilio:
        twilio.reply(*(call_created() for _ in range(5)))
        server_env = {
            **env,
            "LOG_LEVEL": "INFO",
            "REALTIME_WS_URL": f"ws://127.0.0.1:{port}",
            "PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
            "TWILIO_API_BASE_URL": twilio.base,
            "BACKGROUND_WORK": "inprocess",
            "OUTBOUND_POLL_SECONDS": "1",
            "OUTBOUND_RING_TIMEOUT_SECONDS": "5",
            "OUTBOUND_STUCK_AFTER_SECONDS": str(args.stuck),
            "CALLS_MAINTENANCE_SECONDS": str(args.sweep),
            "EVENTS_POLL_SECONDS": "0",  # no event delivery
        }
        server = DaphneServer(env=server_env, port=port, log_path=ROOT / "var" / "bench-faults-surrogate-daphne.log")
        server.start()
        try:
            a = httpx.Client(base_url=server.http_url, headers={"Authorization": f"Bearer {key_a}"}, timeout=30)
            b = httpx.Client(base_url=server.http_url, headers={"Authorization": f"Bearer {key_b}"}, timeout=30)
            print("organization A sends a poisoned body to each endpoint:")
            for what, response in poisoned_requests(a, agent_a):
                issues = list(response.json().get("issues", {})) if response.status_code < 500 else []
                print(f"  {what}: {response.status_code} {issues}")
            body = {"agentId": str(agent_b.pk), "phoneNumberId": str(other.bench_number.pk), "to": "+14155550177"}
            queued = b.post("/public/v1/calls", json=body)
            call_id = queued.json()["id"]
            print(f"organization B places a call nobody answers: {queued.status_code}")
            deadline = time.monotonic() + args.stuck + 10 * args.sweep + 30
            while time.monotonic() < deadline and Call.objects.get(pk=call_id).status in ("queued", "ringing"):
                time.sleep(0.5)
            call = Call.objects.get(pk=call_id)
            placed_at = OutboundCall.objects.get(pk=call_id).placed_at
            if call.ended_at is not None and placed_at is not None:
                rang = f"ended {(call.ended_at - placed_at).total_seconds():.1f} s after it was placed"
            else:
                rang = "not ended"
            print(f"  B's call: {call.status} ({call.ended_reason or '-'}), {rang}; stuck limit {args.stuck} s")
            placed = created_calls(twilio.requests)
            print(f"  calls placed at Twilio: {len(placed)} (to {', '.join(c.fields['To'] for c in placed) or '-'})")
            if poisoned is not None:
                print(
                    f"  A's old poisoned call: {Call.objects.get(pk=poisoned.pk).status} (skipped by upkeep, one line a sweep)"
                )
            print(f"  lists of A: {lists(a)}")
            print(f"  lists of B: {lists(b)}")
            if poisoned is not None:
                mended = mend_stored_rows()
                print(f"  the data migration's pass (calls/0012) mends {mended} row(s); lists of A: {lists(a)}")
            log = (ROOT / "var" / "bench-faults-surrogate-daphne.log").read_text(errors="replace")
            print(f"  upkeep lines logged for a bad row: {log.count('upkeep job failedOutboundCalls: row')}")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
