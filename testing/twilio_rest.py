"""Twilio's REST API for calls, scripted for the loopback stand-in (testing/webhooks.py LoopbackReceiver,
TWILIO_API_BASE_URL): the answers of `POST /2010-04-01/Accounts/{AccountSid}/Calls.json` (create: 201
with the call resource, status `queued`) and `POST .../Calls/{CallSid}.json` (update: cancel, hang-up,
transfer), and readers of what the service sent (form bodies, the TwiML's stream URL and token).
Field names follow twilio.com/docs/voice/api/call-resource."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs
from xml.etree import ElementTree

from testing.webhooks import Received, Reply

# Under the API's base path (a Twilio-compatible provider's has a prefix, e.g. SignalWire's /api/laml), of
# any account ID (a compatible provider's may be a UUID).
_CREATE = re.compile(r"^(?:/[\w.-]+)*/2010-04-01/Accounts/([\w-]+)/Calls\.json$")
_UPDATE = re.compile(r"^(?:/[\w.-]+)*/2010-04-01/Accounts/([\w-]+)/Calls/(CA\w+)\.json$")


def call_sid() -> str:
    return "CA" + secrets.token_hex(16)


def call_resource(*, sid: str, status: str = "queued", to: str = "", from_: str = "", account_sid: str = "") -> dict:
    return {
        "sid": sid,
        "account_sid": account_sid,
        "to": to,
        "from": from_,
        "status": status,
        "direction": "outbound-api",
        "api_version": "2010-04-01",
        "uri": f"/2010-04-01/Accounts/{account_sid}/Calls/{sid}.json",
    }


def call_created(sid: str | None = None, **fields: Any) -> Reply:
    """Twilio's answer to a call created: 201 with the call resource, `queued`."""
    return Reply(status=201, json=call_resource(sid=sid or call_sid(), **fields))


def call_updated(sid: str, status: str) -> Reply:
    return Reply(json=call_resource(sid=sid, status=status))


def twilio_error(status: int, code: int, message: str) -> Reply:
    return Reply(status=status, json={"code": code, "message": message, "more_info": "", "status": status})


def form(request: Received) -> dict[str, list[str]]:
    """A form-encoded body, every value of every name."""
    return parse_qs(request.body.decode(), keep_blank_values=True)


@dataclass(frozen=True)
class CreatedCall:
    """One `calls.create` the service sent: the form's single values, the StatusCallbackEvent list, and
    the TwiML's stream URL and token parameter."""

    request: Received
    fields: dict[str, str]
    status_callback_events: list[str]
    stream_url: str
    token: str


def created_calls(requests: list[Received]) -> list[CreatedCall]:
    """The call creations among the stand-in's requests, in order."""
    created = []
    for request in requests:
        if request.method != "POST" or not _CREATE.match(request.path):
            continue
        values = form(request)
        fields = {name: items[0] for name, items in values.items()}
        root = ElementTree.fromstring(fields.get("Twiml", "<Response/>"))  # noqa: S314 - the service's own TwiML
        stream = root.find("Connect/Stream")
        parameters = {
            p.get("name"): p.get("value") for p in (stream.findall("Parameter") if stream is not None else [])
        }
        created.append(
            CreatedCall(
                request=request,
                fields=fields,
                status_callback_events=values.get("StatusCallbackEvent", []),
                stream_url=stream.get("url", "") if stream is not None else "",
                token=parameters.get("token") or "",
            )
        )
    return created


def call_updates(requests: list[Received]) -> list[tuple[str, dict[str, str]]]:
    """The call updates among the stand-in's requests: (CallSid, form fields), in order."""
    updates = []
    for request in requests:
        match = _UPDATE.match(request.path)
        if request.method == "POST" and match:
            updates.append((match.group(2), {name: items[0] for name, items in form(request).items()}))
    return updates
