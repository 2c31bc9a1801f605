"""Telnyx's side of a call, scripted after its documented protocol (developers.telnyx.com: Call Control
webhooks and commands, "Stream call media over WebSocket"):

- Call Control events as Telnyx POSTs them (`{"data": {"event_type", "payload"}, "meta"}`), signed with an
  Ed25519 key of the tests' own (`telnyx-signature-ed25519` over `timestamp|body`, `telnyx-timestamp`);
- the REST API's answers for the loopback stand-in (testing/webhooks.py LoopbackReceiver at
  TELNYX_API_BASE_URL) and readers of the commands the service sent;
- `TelnyxStream`: the media stream with Telnyx's field names (`stream_id`, `sequence_number`, the stream
  token back in `start.client_state`), playing the agent's audio as `TwilioStream` does.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from accounts.models import Organization
from telephony.models import TelephonyAccount
from telephony.services.accounts import telephony_account_set
from testing.twilio_stream import TwilioStream
from testing.webhooks import Received, Reply

SIGNING_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
PUBLIC_KEY = base64.b64encode(SIGNING_KEY.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()
CONNECTION_ID = "2811212257810187875"
API_KEY = "KEY0197A3C5E2B84F6D9A1C3E5F7B9D1F3A_Tx9pLm2QvR8sW4yZ6uB0nE"
CALLER = "+14155550199"


def control_id() -> str:
    """A call control ID as Telnyx makes them."""
    return "v3:" + secrets.token_urlsafe(36)


def make_telnyx_account(organization: Organization, **fields: Any) -> TelephonyAccount:
    values = {
        "provider": "telnyx",
        "account_sid": CONNECTION_ID,
        "auth_token": API_KEY,
        "webhook_public_key": PUBLIC_KEY,
        **fields,
    }
    return telephony_account_set(organization=organization, **values)


# --- Call Control events --------------------------------------------------------------------------


def event(event_type: str, call_control_id: str, **payload: Any) -> dict[str, Any]:
    """A Call Control webhook body."""
    return {
        "data": {
            "event_type": event_type,
            "id": str(uuid.uuid4()),
            "occurred_at": "2026-11-29T22:30:00.076316Z",
            "payload": {
                "call_control_id": call_control_id,
                "call_leg_id": str(uuid.uuid4()),
                "call_session_id": str(uuid.uuid4()),
                "client_state": None,
                "connection_id": CONNECTION_ID,
                **payload,
            },
            "record_type": "event",
        },
        "meta": {"attempt": 1, "delivered_to": "https://voice.example.test/telephony/telnyx/events"},
    }


def incoming(call_control_id: str, *, to: str, from_: str = CALLER) -> dict[str, Any]:
    return event(
        "call.initiated",
        call_control_id,
        direction="incoming",
        state="parked",
        to=to,
        **{"from": from_},
        offered_codecs="PCMU,PCMA",
    )


def hangup(call_control_id: str, cause: str = "normal_clearing", source: str = "caller") -> dict[str, Any]:
    return event("call.hangup", call_control_id, hangup_cause=cause, hangup_source=source, sip_hangup_cause="200")


def signed(
    body: dict[str, Any], *, timestamp: int | None = None, key: Ed25519PrivateKey = SIGNING_KEY
) -> tuple[bytes, dict[str, str]]:
    """The body as Telnyx sends it, and its signature headers."""
    raw = json.dumps(body).encode()
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    signature = base64.b64encode(key.sign(stamp.encode() + b"|" + raw)).decode()
    return raw, {
        "telnyx-signature-ed25519": signature,
        "telnyx-timestamp": stamp,
        "content-type": "application/json",
    }


# --- the REST API ---------------------------------------------------------------------------------


def command_done() -> Reply:
    return Reply(json={"data": {"result": "ok"}})


def dialed(call_control_id: str) -> Reply:
    """Telnyx's answer to `POST /calls`: the new call, not answered yet."""
    return Reply(
        json={
            "data": {
                "call_control_id": call_control_id,
                "call_leg_id": str(uuid.uuid4()),
                "call_session_id": str(uuid.uuid4()),
                "is_alive": False,
                "record_type": "call",
            }
        }
    )


def telnyx_error(status: int, code: str, title: str, detail: str = "") -> Reply:
    return Reply(status=status, json={"errors": [{"code": code, "title": title, "detail": detail or title}]})


@dataclass(frozen=True)
class Command:
    call_control_id: str
    action: str
    body: dict[str, Any]
    request: Received


def commands(requests: list[Received]) -> list[Command]:
    """The call commands the service sent (`POST .../calls/{call_control_id}/actions/{action}`), in order."""
    found = []
    for request in requests:
        parts = request.path.split("/calls/", 1)[-1].split("/actions/")
        if request.method == "POST" and len(parts) == 2:
            found.append(Command(parts[0], parts[1], request.json(), request))
    return found


def stream_token(body: dict[str, Any]) -> str:
    """The stream token the service sent as the call's client_state."""
    return base64.b64decode(body["client_state"]).decode()


# --- the media stream -----------------------------------------------------------------------------


@dataclass
class TelnyxStream(TwilioStream):
    """Telnyx's side of a bidirectional media stream (`call_sid`: the call control ID; `token`: the
    client_state the service gave the call, decoded)."""

    stream_sid: str = field(default_factory=lambda: str(uuid.uuid4()))
    encoding: str = "PCMU"

    def _frame(self, event: str, **fields: Any) -> dict[str, Any]:
        return {"event": event, "sequence_number": self._next(), "stream_id": self.stream_sid, **fields}

    def _stop_fields(self) -> dict[str, Any]:
        return {"call_control_id": self.call_sid}

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._started_at = loop.time()
        await self.send({"event": "connected", "version": "1.0.0"})
        state = base64.b64encode((self.token or "").encode()).decode()
        start = {
            "user_id": str(uuid.uuid4()),
            "call_control_id": self.call_sid,
            "client_state": state,
            "from": CALLER,
            "to": "+14155550100",
            "media_format": {"encoding": self.encoding, "sample_rate": 8000, "channels": 1},
        }
        await self.send(self._frame("start", start=start))
