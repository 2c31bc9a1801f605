"""What the fault scripts share: a bench database (recreated per script: testing/stores.py's
bench_database_url, SQLite under var/ or PostgreSQL when DATABASE_URL names it), an
organization with agents (browser and phone), sockets opened through the test kit, and the report
of every call (status, duration, billed seconds, against the socket's lifetime as the client saw it).
"""

from __future__ import annotations

import asyncio
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.api_load import bench_organization  # noqa: E402 - after the repository root is put on sys.path
from testing.stores import bench_database_url  # noqa: E402 - after the repository root is put on sys.path

SECRET = "faults-bench-secret-0123456789abcdef"
ACCOUNT_SID = "AC" + "9" * 32
AUTH_TOKEN = "d" * 32
NUMBER = "+14155550100"
CALLER = "+14155550199"


def bench_env(name: str) -> dict[str, str]:
    return {
        "LOG_LEVEL": "WARNING",
        "REALTIME_TOKEN_SECRET": SECRET,
        "DATABASE_URL": bench_database_url(f"faults_{name}", ROOT / "var"),
        "DATABASE_POOL": "false",
    }


def setup(env: dict[str, str]) -> Any:
    """Migrate the bench database (in this process, which then reads the calls) and create an
    organization with a telephony account and one number."""
    organization, _ = bench_organization(env, "Faults bench", lift_limits=False)
    from telephony.services.accounts import telephony_account_set
    from telephony.services.numbers import phone_number_claim

    telephony_account_set(organization=organization, account_sid=ACCOUNT_SID, auth_token=AUTH_TOKEN)
    organization.bench_number = phone_number_claim(organization=organization, number=NUMBER)
    return organization


def two_organizations(env: dict[str, str]) -> tuple[Any, str, Any, str]:
    """setup(env), and a second organization beside it (the one whose live work a fault must not touch),
    with an API key of each: (the first, its key, the other, its key)."""
    organization = setup(env)
    from accounts.services import apikey_create, organization_create

    other, issued = organization_create(name="Other organization", plan_code="agency")
    return organization, apikey_create(organization=organization, name="bench").raw_key, other, issued.raw_key


def webhook_agent(organization: Any, server_url: str, **fields: Any) -> Any:
    """Olive, a webhook agent whose server is `server_url`."""
    return make_agent(
        organization, "Olive", agent_type="webhook", server_url=server_url, server_secret="whsec-faults-bench", **fields
    )


def start_server(env: dict[str, str], name: str, **settings: str) -> Any:
    """One Daphne process on the bench database, its log var/bench-faults-NAME-daphne.log."""
    from testing.daphne import DaphneServer
    from testing.servers import free_port

    port = free_port()
    return DaphneServer(
        env={**env, "REALTIME_WS_URL": f"ws://127.0.0.1:{port}", **settings},
        port=port,
        log_path=ROOT / "var" / f"bench-faults-{name}-daphne.log",
    ).start()


def make_agent(organization: Any, name: str, *, phone: bool = False, **fields: Any) -> Any:
    from django.utils import timezone

    from agents.models import Agent
    from telephony.services.numbers import phone_number_assign

    values: dict[str, Any] = {
        "name": name,
        "status": "active",
        "agent_type": "static",
        "instructions": "Help callers with their orders.",
        "greeting_type": "static",
        "static_greeting": "Hello.",
        "updated_at": timezone.now(),
        **fields,
    }
    agent = Agent.objects.create(organization=organization, **values)
    if phone:
        phone_number_assign(organization=organization, agent=agent, phone_number_id=organization.bench_number.pk)
    return agent


def browser_url(ws_url: str, agent: Any) -> str:
    from realtime import tokens

    token = tokens.issue_token(agent_id=agent.pk, organization_id=agent.organization_id)[0]
    return f"{ws_url}/ws/agents/{agent.pk}/realtime?token={token}"


def phone_stream(ws_url: str, agent: Any, call_sid: str) -> Any:
    from telephony.streams import stream_token_issue
    from testing.twilio_stream import TwilioStream

    token = stream_token_issue(
        organization_id=agent.organization_id,
        agent_id=agent.pk,
        phone_number_id=agent.organization.bench_number.pk,
        call_sid=call_sid,
        from_number=CALLER,
        to_number=NUMBER,
    )
    return TwilioStream(f"{ws_url}/telephony/twilio/stream", token, call_sid=call_sid)


def status_callback(http_url: str, call_sid: str, status: str = "completed") -> int:
    """Twilio's signed call status callback (the server's PUBLIC_BASE_URL must be http_url)."""
    from twilio.request_validator import RequestValidator

    url = f"{http_url}/telephony/twilio/status"
    params = {"CallSid": call_sid, "AccountSid": ACCOUNT_SID, "From": CALLER, "To": NUMBER, "CallStatus": status}
    signature = RequestValidator(AUTH_TOKEN).compute_signature(url, params)
    request = urllib.request.Request(
        url, data=urllib.parse.urlencode(params).encode(), headers={"X-Twilio-Signature": signature}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.status


@dataclass
class Socket:
    """One call as its client saw it."""

    label: str
    opened: float = 0.0
    closed: float | None = None
    close_code: int | None = None
    call_sid: str | None = None
    agent_id: Any = None

    @property
    def lifetime(self) -> float | None:
        return None if self.closed is None else self.closed - self.opened


def call_of(socket: Socket) -> Any:
    from calls.models import Call

    if socket.call_sid:
        return Call.objects.filter(provider_call_id=socket.call_sid).first()
    return Call.objects.filter(agent_id=socket.agent_id).order_by("started_at").first()


def report(sockets: list[Socket]) -> list[str]:
    """One line per call: what the client saw and what the call record says."""
    lines = []
    for socket in sockets:
        call = call_of(socket)
        lived = "still open" if socket.lifetime is None else f"{socket.lifetime:.1f} s"
        if call is None:
            lines.append(f"{socket.label}: socket {lived}; no call record")
            continue
        billed = "-" if call.status == "active" else f"{call.billable_seconds} s"
        duration = "-" if call.status == "active" else f"{call.duration_seconds} s"
        lines.append(
            f"{socket.label}: socket lived {lived} (close {socket.close_code}); call {call.status}, "
            f"duration {duration}, billed {billed}"
        )
    for line in lines:
        print("  " + line)
    return lines


async def wait_until(predicate: Any, timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(interval)
    return predicate()
