"""Widget keys' rules (docs/widget.md): what an allowed origin is (`origin_normalize`), creating and deleting
keys (at most MAX_KEYS_PER_AGENT an agent), and opening a session from a page (`widget_session_create`:
the page's Origin, the key's and the address's rate limits, then the same rules as every realtime session:
realtime_session_create, with the live-call cap and the budgets)."""

from __future__ import annotations

import logging
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from agents.selectors import agent_get
from kit import metrics
from kit.errors import ApiError, validation_error
from kit.throttling import rate_limit_take
from realtime.models import WidgetKey, WidgetKeyOrigin
from realtime.services import RealtimeSession, realtime_session_create
from realtime.widget.selectors import widget_key_get, widget_key_lookup

logger = logging.getLogger(__name__)

KEY_PREFIX = "pk_"
MAX_KEYS_PER_AGENT = 10
MAX_ORIGINS_PER_KEY = 20
MAX_ORIGIN_CHARS = 300
TOO_MANY_WIDGET_KEYS = "TOO_MANY_WIDGET_KEYS"
ORIGIN_NOT_ALLOWED = "ORIGIN_NOT_ALLOWED"
INVALID_WIDGET_KEY = "INVALID_WIDGET_KEY"
RATE_LIMITED = "RATE_LIMITED"  # the code of every rate limit of the API (kit.api)
# What a page may ask for in POST /widget/sessions. The rest of a realtime session's body (variables,
# metadata, events) is the customer backend's to give: a page is public, anyone can change what it sends.
SESSION_FIELDS = ("key", "transport", "modality")
REFUSED_FIELDS = ("variables", "metadata", "events")
_DEFAULT_PORTS = {"http": 80, "https": 443}


# --- allowed origins --------------------------------------------------------------------------------


# An origin as the API takes it (the OpenAPI schema states the same pattern): http or https, a domain name
# (ASCII: punycode for an internationalized one) or an IPv4 address, and a port of 1 to 65535 without
# leading zeros. IPv6 literals are not taken.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_PORT = r"(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
ORIGIN = re.compile(rf"^(https?)://({_LABEL}(?:\.{_LABEL})*)(?::({_PORT}))?$")


def origin_normalize(value: Any) -> tuple[str | None, str | None]:
    """(the origin as a browser sends it in its Origin header, None) or (None, the problem): ORIGIN, in lower
    case, without the scheme's default port (https://Shop.Example.com:443 -> https://shop.example.com).
    Surrounding white space is dropped."""
    if not isinstance(value, str):
        return None, "Must be a string such as https://shop.example.com."
    text = value.strip()
    if not text:
        return None, "Must not be empty: an origin such as https://shop.example.com."
    if len(text) > MAX_ORIGIN_CHARS:
        return None, f"At most {MAX_ORIGIN_CHARS} characters."
    shown = repr(text[:80])
    found = ORIGIN.match(text)
    if found is None:
        return None, _origin_problem(text, shown)
    scheme, host, port = found.group(1), found.group(2).lower(), found.group(3)
    origin = f"{scheme}://{host}"
    if port is not None and int(port) != _DEFAULT_PORTS[scheme]:
        origin += f":{port}"
    return origin, None


def _origin_problem(text: str, shown: str) -> str:
    """Why `text` is not an origin, in the words of its most likely mistake."""
    if "*" in text:
        return "Wildcards are not allowed: list each origin (https://shop.example.com, https://www.example.com)."
    if not text.startswith(("https://", "http://")):
        return f"{shown} is not an origin: it must start with https:// (or http://, in lower case)."
    rest = text.split("://", 1)[1]
    if "@" in rest.split("/", 1)[0]:
        return f"{shown} is not an origin: no user name or password."
    if any(mark in rest for mark in "/?#"):
        base = text[: len(text) - len(rest)] + re.split(r"[/?#]", rest, maxsplit=1)[0]
        return f"{shown} is not an origin: no path, query or fragment (only {base[:80]})."
    if ":" in rest and not rest.startswith("["):
        return f"{shown} is not an origin: its port must be a number from 1 to 65535 (no leading zero)."
    return (
        f"{shown} is not an origin: its host must be a domain name (punycode, xn--..., for non-ASCII letters) "
        "or an IPv4 address."
    )


def allowed_origins_clean(value: Any) -> list[str]:
    """`allowedOrigins`: 1 to MAX_ORIGINS_PER_KEY origins, normalized, each once (an origin given twice, in
    whatever spelling, is kept once); a 400 whose `issues` name each bad one (`allowedOrigins.2`)."""
    field = "allowedOrigins"
    if value is None:
        raise validation_error(
            {field: ['Required: the origins of the pages that may use the key, such as ["https://shop.example.com"].']}
        )
    if not isinstance(value, list):
        raise validation_error({field: ['Must be a list of origins, such as ["https://shop.example.com"].']})
    if not value:
        raise validation_error({field: ["At least one origin: a key no page may use would be of no use."]})
    if len(value) > MAX_ORIGINS_PER_KEY:
        raise validation_error({field: [f"At most {MAX_ORIGINS_PER_KEY} origins a key."]})
    issues: dict[str, list[str]] = {}
    origins: list[str] = []
    for index, item in enumerate(value):
        origin, problem = origin_normalize(item)
        if problem is not None:
            issues[f"{field}.{index}"] = [problem]
        elif origin is not None and origin not in origins:
            origins.append(origin)
    if issues:
        raise validation_error(issues)
    return origins


# --- keys ---------------------------------------------------------------------------------------------


def widget_key_create(*, organization: Organization, agent_id: str, body: Any) -> WidgetKey:
    """A new key of the organization's agent from a POST .../widget-keys body ({allowedOrigins}): 404 for an
    agent not of the organization, 400 naming the bad origin, 409 TOO_MANY_WIDGET_KEYS at MAX_KEYS_PER_AGENT."""
    agent = agent_get(organization=organization, agent_id=agent_id)  # 404 before the body's rules
    if not isinstance(body, dict):
        raise ApiError.invalid("The request body must be a JSON object.")
    origins = allowed_origins_clean(body.get("allowedOrigins"))
    with transaction.atomic():
        agent_get(organization=organization, agent_id=agent_id, for_update=True)  # serializes the count
        if WidgetKey.objects.filter(agent=agent).count() >= MAX_KEYS_PER_AGENT:
            raise ApiError.conflict(
                f"An agent has at most {MAX_KEYS_PER_AGENT} widget keys: delete one first.", code=TOO_MANY_WIDGET_KEYS
            )
        key = WidgetKey.objects.create(
            organization=organization,
            agent=agent,
            key=KEY_PREFIX + secrets.token_urlsafe(24),
            created_at=timezone.now(),
        )
        WidgetKeyOrigin.objects.bulk_create(
            [WidgetKeyOrigin(widget_key=key, origin=origin, position=index) for index, origin in enumerate(origins)]
        )
    return key


def widget_key_delete(*, organization: Organization, agent_id: str, key_id: str) -> Any:
    """Deletes the key (its pages can open no new session; live calls go on); its id."""
    key = widget_key_get(organization=organization, agent_id=agent_id, key_id=key_id)
    pk = key.pk
    key.delete()
    return pk


# --- sessions from a page -----------------------------------------------------------------------------


@dataclass(frozen=True)
class WidgetSession:
    key: WidgetKey
    session: RealtimeSession


REFUSAL_LOG_INTERVAL_SECONDS = 60.0
_refusals_logged: dict[str, float] = {}  # bucket -> when this process last logged a refusal of it


def _take(*, bucket: str, per_minute: int, burst: int, what: str, scope: str, label: str) -> None:
    """One session from the bucket, or 429 RATE_LIMITED with Retry-After."""
    decision = rate_limit_take(bucket=bucket, per_second=per_minute / 60, burst=burst)
    if decision.allowed:
        return
    metrics.record_rate_limit_refusal(scope)
    now = time.monotonic()
    if now - _refusals_logged.get(bucket, -REFUSAL_LOG_INTERVAL_SECONDS) >= REFUSAL_LOG_INTERVAL_SECONDS:
        if len(_refusals_logged) > 10_000:
            _refusals_logged.clear()
        _refusals_logged[bucket] = now
        logger.warning(
            "widget sessions of %s are over their rate limit (%s a minute): refusing with 429", label, per_minute
        )
    raise ApiError.too_many(
        f"Too many widget sessions {what}: at most {per_minute} a minute (bursts of {burst}). "
        f"Retry after {decision.retry_after} s.",
        code=RATE_LIMITED,
        retry_after=decision.retry_after,
        limit=round(per_minute / 60, 6),
        burst=burst,
        limitedBy=scope,
    )


def widget_address_limit_take(*, address: str) -> None:
    """The client address's share of widget sessions (WIDGET_ADDRESS_SESSIONS_PER_MINUTE, every key)."""
    _take(
        bucket=f"widget-address:{address}",
        per_minute=settings.WIDGET_ADDRESS_SESSIONS_PER_MINUTE,
        burst=settings.WIDGET_ADDRESS_SESSIONS_BURST,
        what="from this address",
        scope="widget_address",
        label=f"address {address}",
    )


def widget_session_create(*, body: Any, origin: str | None, address: str) -> WidgetSession:
    """A realtime session for a page: POST /widget/sessions {key, transport?, modality?} with the page's
    Origin header. In order: the address's rate limit (429), the body (400), the key (401 unknown or deleted),
    the Origin among the key's (403 ORIGIN_NOT_ALLOWED), the key's rate limit (429), then
    realtime_session_create for the key's agent: 409 agent not active, 402 BUDGET_EXCEEDED, 429
    CONCURRENT_CALL_LIMIT_EXCEEDED, a 400 naming `transport` or `modality`. The call's metadata says which key
    and origin opened it ({"widget": {"keyId", "origin"}})."""
    widget_address_limit_take(address=address)
    if not isinstance(body, dict):
        raise ApiError.invalid("The request body must be a JSON object.")
    value = body.get("key")
    if value is None:
        raise ApiError.field("key", 'Required: the widget key ("pk_...").')
    if not isinstance(value, str):
        raise ApiError.field("key", 'Must be a string: the widget key ("pk_...").')
    for field in REFUSED_FIELDS:
        if field in body:
            raise ApiError.field(
                field,
                "Not taken from a widget: a page is public and anyone can change what it sends. Open the session "
                "from your backend with an API key (POST /agents/{id}/realtime-sessions) to pass it.",
            )
    key = widget_key_lookup(key=value)
    if key is None:
        raise ApiError(
            "Unknown widget key: it does not exist or was deleted.", status_code=401, code=INVALID_WIDGET_KEY
        )
    origins = [row.origin for row in key.origins.all()]
    if not origin:
        raise ApiError.forbidden(
            "This request has no Origin header: a widget session is opened from a web page whose origin the widget "
            "key lists.",
            code=ORIGIN_NOT_ALLOWED,
        )
    if origin_normalize(origin)[0] not in origins:
        raise ApiError.forbidden(
            f"This widget key may not be used from {origin[:100]}: it allows {', '.join(origins)}. Add the origin to "
            "the key's allowedOrigins to embed the widget on this site.",
            code=ORIGIN_NOT_ALLOWED,
        )
    _take(
        bucket=f"widget-key:{key.pk}",
        per_minute=settings.WIDGET_KEY_SESSIONS_PER_MINUTE,
        burst=settings.WIDGET_KEY_SESSIONS_BURST,
        what="with this widget key",
        scope="widget_key",
        label=f"key {key.key[:10]}… of organization {key.organization_id}",
    )
    options = {name: body[name] for name in ("transport", "modality") if name in body}
    session = realtime_session_create(
        organization=key.organization,
        agent_id=str(key.agent_id),
        metadata={"widget": {"keyId": str(key.pk), "origin": origin_normalize(origin)[0]}},
        **options,
    )
    return WidgetSession(key=key, session=session)
