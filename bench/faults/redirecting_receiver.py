"""Fault: organization A's webhooks redirect (301, 302, 303, 307 and 308 to another origin, and a 307 within
its own origin) while organization B's webhook answers 200.

One Daphne process delivering events (BACKGROUND_WORK=inprocess, OUTBOUND_ALLOWED_NETWORKS on loopback) to
scripted receivers (LoopbackReceiver of testing/webhooks.py, in threads). This process records the calls
(`call_start`, `call_finish`: call.started and call.ended for each) of both organizations at once; the
server sends them. Prints what happened to A's deliveries (status, attempts, lastError, whether anything
reached the other origin) and to B's (delivered, and how long after the event was made).

`--baseline`: the same run with A's webhooks answering 200 (B's delivery times without the fault).

Usage: .venv/bin/python bench/faults/redirecting_receiver.py [--calls 10] [--retry-base 1] [--baseline]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from typing import Any

from aiohttp import web
from common import ROOT, bench_env, make_agent, setup

from testing.servers import ScriptedServer, free_port

EVENTS = ["call.started", "call.ended"]
REDIRECTS = (301, 302, 303, 307, 308)


def endpoint(organization: Any, url: str) -> Any:
    from django.utils import timezone

    from calls.models import WebhookEndpoint

    now = timezone.now()
    return WebhookEndpoint.objects.create(
        organization=organization,
        url=url,
        events=EVENTS,
        enabled=True,
        secret="whsec-faults-redirects",
        created_at=now,
        updated_at=now,
    )


class MovedWithinItsOrigin(ScriptedServer):
    """POST /hook answers 307 to /moved on the same origin; /moved answers 200. Counts what arrived where."""

    thread_name = "moved-within-origin"

    def __init__(self) -> None:
        super().__init__(port=free_port())
        self.arrived: list[tuple[str, str, int]] = []  # method, path, body length

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{tail:.*}", self._handle)

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.arrived.append((request.method, request.path, len(body)))
        if request.path == "/hook":
            return web.Response(status=307, headers={"Location": self.url("/moved")})
        return web.json_response({"ok": True})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10, help="calls per organization")
    parser.add_argument("--retry-base", type=float, default=1.0, help="EVENTS_RETRY_BASE_SECONDS of the server")
    parser.add_argument("--baseline", action="store_true", help="A's webhooks answer 200 (no fault)")
    args = parser.parse_args()

    from testing.daphne import DaphneServer
    from testing.webhooks import LoopbackReceiver, Reply

    env = bench_env("redirects")
    org_a = setup(env)
    from accounts.services import organization_create  # after setup: Django is configured there
    from calls import services
    from calls.models import WebhookAttempt, WebhookDelivery

    org_b, _ = organization_create(name="Faults bench B", plan_code="agency")
    elsewhere = LoopbackReceiver()  # another origin: nothing should ever arrive here
    redirecting = {
        status: LoopbackReceiver(
            None if args.baseline else Reply(status=status, headers={"Location": elsewhere.url(f"/moved-{status}")})
        )
        for status in REDIRECTS
    }
    same_origin = MovedWithinItsOrigin()
    honest = LoopbackReceiver()
    targets = {f"A {status} to another origin": hook for status, hook in redirecting.items()}
    targets["A 307 within its origin"] = same_origin
    ends = {label: endpoint(org_a, hook.url()) for label, hook in targets.items()}
    ends["B (answers 200)"] = endpoint(org_b, honest.url())
    agent_a = make_agent(org_a, "Desk A")
    agent_b = make_agent(org_b, "Desk B")

    with contextlib.ExitStack() as stack:
        for hook in (elsewhere, *redirecting.values(), same_origin, honest):
            stack.enter_context(hook)
        server = DaphneServer(
            env={
                **env,
                "OUTBOUND_ALLOWED_NETWORKS": "127.0.0.0/8",
                "BACKGROUND_WORK": "inprocess",
                "EVENTS_RETRY_BASE_SECONDS": str(args.retry_base),
                "EVENTS_POLL_SECONDS": "0.5",
            },
            log_path=ROOT / "var" / "bench-faults-redirects-daphne.log",
        ).start()
        stack.callback(server.stop)

        began = time.monotonic()
        for _ in range(args.calls):
            for agent in (agent_a, agent_b):
                call = services.call_start(agent=agent, channel="web")
                services.call_finish(call=call, status="completed")
        recorded = time.monotonic() - began
        expected = 2 * args.calls

        def settled() -> bool:
            b_done = WebhookDelivery.objects.filter(endpoint=ends["B (answers 200)"], status="succeeded").count()
            a_tried = WebhookDelivery.objects.filter(
                organization=org_a, attempts__gte=1 if args.baseline else 2
            ).count()
            a_same = WebhookDelivery.objects.filter(endpoint=ends["A 307 within its origin"], status="succeeded")
            return b_done == expected and a_same.count() == expected and a_tried >= len(REDIRECTS) * args.calls

        deadline = time.monotonic() + 120
        while not settled() and time.monotonic() < deadline:
            time.sleep(0.2)
        done = settled()
        print(
            f"{'baseline (no fault): ' if args.baseline else ''}{args.calls} calls per organization ({expected} events each per webhook), recorded in {recorded:.1f} s;"
            f" EVENTS_RETRY_BASE_SECONDS {args.retry_base:g}; settled: {done}"
        )
        for label, end in ends.items():
            rows = list(WebhookDelivery.objects.filter(endpoint=end))
            by_status: dict[str, int] = {}
            for row in rows:
                by_status[row.status] = by_status.get(row.status, 0) + 1
            attempts = sum(row.attempts for row in rows)
            line = f"  {label}: {len(rows)} deliveries {by_status}, {attempts} attempts"
            errors = {row.last_error for row in rows if row.last_error}
            if errors:
                line += f"; lastError {sorted(errors)[0]!r}"
            delays = []
            for row in rows:
                first = (
                    WebhookAttempt.objects.filter(delivery=row, succeeded=True)
                    .order_by("number")
                    .values_list("started_at", flat=True)
                ).first()
                if first is not None:
                    delays.append((first - row.created_at).total_seconds())
            if delays:
                line += (
                    f"; delivered {statistics.median(delays) * 1000:.0f} ms (median),"
                    f" {max(delays) * 1000:.0f} ms (max) after the event was made"
                )
            print(line)
        moved = [length for method, path, length in same_origin.arrived if path == "/moved" and method == "POST"]
        print(
            f"  A 307 within its origin: {len(moved)} POSTs with the body arrived at /moved (empty: {moved.count(0)})"
        )
        print(f"  the other origin (Location of A's redirects) received {len(elsewhere.requests)} requests")


if __name__ == "__main__":
    main()
