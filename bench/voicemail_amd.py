"""Answering-machine detection benchmark (not a test): how long the greeting is held, and how fast a real
server acts on Twilio's AMD verdict.

A Daphne server (testing/daphne.py) with the real offline engine; each call is an outbound call made with
telephony.outbound (its variables with it), its media stream played by Twilio's side
(testing/twilio_stream.py) with silence on the line, and the verdict POSTed signed to
/telephony/twilio/amd (Twilio's AsyncAmdStatusCallback) at the moment the scenario says:

- `hold`: no verdict: the time from the stream's start to the agent's first audio (the 1.5 s hold and the
  greeting's first sentence);
- `human`: a `human` verdict 0.5 s after the start: first audio after the verdict's POST;
- `beep`: `machine_end_beep` once the greeting plays: the greeting cut (`clear`) and the message's first
  audio after the POST;
- `hang-up`: `machine_start` 0.3 s after the start, agent with action hang-up: the stream closed after
  the POST;
- `inbound`: an inbound call to the same agent, for comparison (no hold).

Its own database (bench/calls_bench.py's own_database: var/bench-voicemailbench.sqlite3, or
`<database>_voicemailbench` on PostgreSQL when DATABASE_URL names it).

Usage: .venv/bin/python bench/voicemail_amd.py [--calls 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from testing.figures import percentile  # noqa: E402 - after the repository root is put on sys.path

MESSAGE = "Hello {{first_name}}, this is Acme Dental. Your cleaning is on {{day}} morning. Please call us back."
NUMBER = "+14155550100"
CALLEE = "+14155550177"
ACCOUNT_SID = "AC" + "7" * 32
AUTH_TOKEN = "e" * 32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=10, help="calls per scenario")
    args = parser.parse_args()

    from bench.calls_bench import own_database
    from testing.daphne import SECRET

    own_database("voicemailbench")
    os.environ.update(REALTIME_TOKEN_SECRET=SECRET, CALLS_MAINTENANCE_SECONDS="0")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    from testing.daphne import start_test_server, stop_test_server

    agents = _world()
    with tempfile.TemporaryDirectory() as folder:
        server = start_test_server(Path(folder), "voicemail", {"TELEPHONY_CALL_END_GRACE_SECONDS": "10"}, public=True)
        try:
            results = asyncio.run(_run(server, agents, args.calls))
        finally:
            stop_test_server(server)
    print(f"{'measure':58} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}  n")
    for name, values in results.items():
        ms = [v * 1000 for v in values]
        print(
            f"{name:58} {statistics.median(ms):8.0f} {percentile(ms, 95):8.0f} {max(ms):8.0f}  {len(ms)}",
        )


def _world() -> dict[str, Any]:
    from accounts.services import organization_create
    from agents.models import Agent
    from telephony.services.accounts import telephony_account_set
    from telephony.services.numbers import phone_number_assign, phone_number_claim
    from testing.factories import AgentFactory

    organization, _ = organization_create(name="Voicemail bench", plan_code="agency")
    telephony_account_set(organization=organization, account_sid=ACCOUNT_SID, auth_token=AUTH_TOKEN)
    made: dict[str, Agent] = {}
    for index, (name, setting) in enumerate(
        (
            ("leave", {"detection": "provider", "action": "leave-message", "message": MESSAGE}),
            ("hang-up", {"detection": "provider", "action": "hang-up", "message": ""}),
        )
    ):
        agent = AgentFactory.create(
            organization=organization,
            name="Ava",
            status="active",
            instructions="You remind patients of their dental appointments.",
            greeting_type="static",
            static_greeting="Hello, this is Ava from Acme Dental about your appointment.",
            voicemail=setting,
        )
        number = phone_number_claim(organization=organization, number=f"+1415555010{index}")
        phone_number_assign(organization=organization, agent=agent, phone_number_id=number.pk)
        agent.number = number  # type: ignore[attr-defined]
        made[name] = agent
    return made


def _outbound(agent: Any, call_sid: str) -> str:
    from telephony.outbound.services import outbound_call_create
    from telephony.streams import stream_token_issue

    call = outbound_call_create(
        agent=agent, phone_number=agent.number, to=CALLEE, variables={"first_name": "Robert", "day": "Tuesday"}
    )
    call.provider_call_id = call_sid
    call.save(update_fields=["provider_call_id"])
    return stream_token_issue(
        organization_id=agent.organization_id,
        agent_id=agent.pk,
        phone_number_id=agent.number.pk,
        call_sid=call_sid,
        from_number=agent.number.phone_number,
        to_number=CALLEE,
        call_id=call.pk,
    )


def _inbound(agent: Any, call_sid: str) -> str:
    from telephony.streams import stream_token_issue

    return stream_token_issue(
        organization_id=agent.organization_id,
        agent_id=agent.pk,
        phone_number_id=agent.number.pk,
        call_sid=call_sid,
        from_number=CALLEE,
        to_number=agent.number.phone_number,
    )


def _verdict(server: Any, call_sid: str, answered_by: str) -> None:
    from twilio.request_validator import RequestValidator

    from telephony.voicemail import AMD_PATH
    from testing.twilio_webhooks import amd_params

    params = amd_params(sid=call_sid, answered_by=answered_by, account_sid=ACCOUNT_SID)
    url = server.http_url + AMD_PATH
    signature = RequestValidator(AUTH_TOKEN).compute_signature(url, params)
    request = urllib.request.Request(
        url, data=urllib.parse.urlencode(params).encode(), headers={"X-Twilio-Signature": signature}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 204


async def _run(server: Any, agents: dict[str, Any], calls: int) -> dict[str, list[float]]:
    import secrets

    from asgiref.sync import sync_to_async

    from telephony import audio
    from testing.twilio_stream import TwilioStream, is_event

    url = f"{server.ws_url}/telephony/twilio/stream"
    loop = asyncio.get_running_loop()
    results: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        results.setdefault(name, []).append(value)

    async def one(scenario: str) -> None:
        call_sid = "CA" + secrets.token_hex(16)
        agent = agents["hang-up" if scenario == "hang-up" else "leave"]
        make = _inbound if scenario == "inbound" else _outbound
        token = await sync_to_async(make)(agent, call_sid)
        async with TwilioStream(url, token, call_sid=call_sid) as twilio:
            started = loop.time()
            await twilio.start()
            done = asyncio.Event()
            line = asyncio.create_task(twilio.stream(bytes([audio.SILENCE_BYTE]) * 8000 * 90, stop_when=done.is_set))
            try:
                if scenario in ("hold", "inbound"):
                    first = await twilio.wait_for(is_event("media"), timeout=30)
                    what = "no verdict" if scenario == "hold" else "inbound call (no hold)"
                    add(f"{what}: first agent audio after the stream's start", twilio.messages[first].at - started)
                elif scenario == "human":
                    await asyncio.sleep(0.5)
                    posted = loop.time()
                    await sync_to_async(_verdict)(server, call_sid, "human")
                    first = await twilio.wait_for(is_event("media"), timeout=30)
                    add("human at 0.5 s: first agent audio after the POST", twilio.messages[first].at - posted)
                elif scenario == "beep":
                    await twilio.wait_for(is_event("media"), timeout=30)
                    await asyncio.sleep(0.5)
                    before = len(twilio.messages)
                    posted = loop.time()
                    await sync_to_async(_verdict)(server, call_sid, "machine_end_beep")
                    cleared = await twilio.wait_for(is_event("clear"), after=before, timeout=10)
                    first = await twilio.wait_for(is_event("media"), after=cleared, timeout=30)
                    add(
                        "machine_end_beep in the greeting: greeting cut after the POST",
                        twilio.messages[cleared].at - posted,
                    )
                    add(
                        "machine_end_beep in the greeting: message audio after the POST",
                        twilio.messages[first].at - posted,
                    )
                    await twilio.wait_closed(timeout=90)
                elif scenario == "hang-up":
                    await asyncio.sleep(0.3)
                    posted = loop.time()
                    await sync_to_async(_verdict)(server, call_sid, "machine_start")
                    await twilio.wait_closed(timeout=10)
                    add("machine_start with hang-up: stream closed after the POST", loop.time() - posted)
                if not twilio.closed:
                    await twilio.stop()
                    await twilio.wait_closed(timeout=10)
            finally:
                done.set()
                await asyncio.gather(line, return_exceptions=True)

    await one("inbound")  # warms the engine up (not counted)
    results.clear()
    for _ in range(calls):
        for scenario in ("inbound", "hold", "human", "beep", "hang-up"):
            await one(scenario)
    return results


if __name__ == "__main__":
    main()
