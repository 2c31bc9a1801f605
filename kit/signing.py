"""The signature of everything the service sends to customers (contract, Authentication 4): the payload is
serialized once (`json_body`), those exact bytes are signed
(`x-service-signature: sha256=<lowercase hex HMAC-SHA256 of the raw body>`) and those same bytes are sent,
so a receiver verifying the raw body always agrees. Tool calls and the assistant request
(realtime/engine/tools/delivery.py) and call events (calls/webhooks/events.py) share it."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

SIGNATURE_HEADER = "x-service-signature"


def json_body(payload: Any) -> bytes:
    """The one serialization of a signed JSON payload (compact, UTF-8)."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def merged_headers(configured: dict[str, str], ours: dict[str, str]) -> dict[str, str]:
    """The configured headers, with ours replacing any of the same name (names are case-insensitive)."""
    taken = {name.lower() for name in ours}
    return {**{k: v for k, v in configured.items() if k.lower() not in taken}, **ours}
