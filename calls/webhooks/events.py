"""Call events leaving the service: the outbox, its delivery, retries, redelivery and the endpoints'
auto-disable (docs/reference/webhooks.md).

`event_record` writes the event (`call.started`, `call.handoff`, `call.transfer.started`,
`call.transfer.ended`, `call.ended`, `call.analyzed`) in the transaction that changes the call: one
`CallEvent` row whose body is serialized once (the envelope `{"message": {"type", "id", "createdAt", "call":
<the call detail of GET /public/v1/calls/{id}>, "callUrl", "messagesTruncated"}}`, with call.handoff's
`handoff` or the transfer events' `transfer` beside them: the transcript's `messages` carry at most
EVENTS_MAX_TRANSCRIPT_CHARS characters of content, the rest is read at `callUrl`) and one
`WebhookDelivery` per target (the agent's serverUrl for webhook agents; every enabled organization
endpoint that subscribes to the type and whose agent filter matches). Delivery is queued with
`transaction.on_commit`: an event whose transaction rolls back is never sent.

Who sends (settings.BACKGROUND_WORK, kit/background.py): `inprocess`, a worker loop of each serving process
(started by voiceagent/asgi.py with the upkeep, so at start-up it resumes the pending rows a stopped process
left), woken by each commit and by its own timer for retries (EVENTS_POLL_SECONDS; 0: no worker, as in the
servers the tests start unless a test asks for delivery); `celery`, a `calls.deliver_event` task per new
delivery and Celery beat's `calls.deliver_due_events` for retries; `off` or `inline`, nobody in this process. Several senders never send one attempt
twice: a delivery is claimed by a conditional UPDATE before it is sent.

Every attempt POSTs the frozen body with `x-service-signature` (kit/signing.py, as tool calls),
`x-service-event-id` (the same on every retry) and `x-service-attempt` (1, 2, ...), through the egress
guard, within EVENTS_TIMEOUT_SECONDS. Redirects: a 307/308 to the same origin is followed with the same
method, body and headers; any other redirect (301/302/303, which would drop the body, or one to another
origin) is not followed and is a failed attempt naming its Location. Connection errors, timeouts,
redirects, 408, 429 and 5xx are retried after EVENTS_RETRY_BASE_SECONDS * 2**(n-1), up to
EVENTS_MAX_ATTEMPTS attempts; other answers are final, and so is a URL that cannot be sent (refused by the
guard, or one the HTTP client cannot encode, saved before saving checked it). Staff may cancel a pending
delivery (the dashboard's action): it is never sent, and the call's later events go on.
Order: one call's later event reaches a target only once the earlier ones to that target have been
delivered, have finally failed or were cancelled (later: of a higher EVENT_RANK, or of the same rank and
recorded later, as a call's successive call.handoff and call.transfer.* events).

`webhook_test_send` sends a webhook one `webhook.test` event the same way (the dashboard's "Send a test
event"), answered at once and not recorded.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import Exists, Max, Min, OuterRef, Q
from django.utils import timezone

from accounts.models import Organization
from agents.models import Agent, AgentType
from calls.maintenance import rows_one_by_one
from calls.models import (
    EVENT_RANK,
    Call,
    CallEvent,
    DeliveryStatus,
    EventType,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
)
from calls.selectors import call_get
from calls.serializers import call_detail
from kit import background, egress
from kit.errors import ApiError
from kit.fields import iso
from kit.redaction import redact_for_agent
from kit.signing import SIGNATURE_HEADER, json_body, merged_headers, signature
from kit.text import storable

logger = logging.getLogger(__name__)

EVENT_ID_HEADER = "x-service-event-id"
ATTEMPT_HEADER = "x-service-attempt"
MAX_RESPONSE_BYTES = 64 * 1024
SNIPPET_CHARS = 500
# A claimed delivery is left alone this long past the send timeout (a crashed sender's claim expires).
CLAIM_MARGIN = timedelta(seconds=30)
# An endpoint all of whose deliveries failed for this long is disabled (the upkeep job below).
DISABLE_AFTER = timedelta(days=3)
RETRIED_STATUSES = frozenset({408, 429})


# --- recording ------------------------------------------------------------------------------------


def event_record(*, call: Call, event_type: str, message_fields: dict[str, Any] | None = None) -> CallEvent | None:
    """Write the event and its deliveries; call it inside the transaction that changes the call (the
    body is the call as that transaction sees it; `message_fields`: what the message carries beside the
    call for this type, such as call.handoff's `handoff` or the transfer events' `transfer`). Delivery
    starts once the transaction commits. An event nobody receives (no serverUrl, no matching webhook) is
    not stored: None."""
    if event_type not in EventType.values:
        raise ValueError(f"event_type must be one of {', '.join(EventType.values)}, not {event_type!r}")
    if not transaction.get_connection().in_atomic_block:
        raise ValueError("event_record must be called inside the transaction that changes the call")
    targets = _targets(call, event_type)
    if not targets:
        return None
    now = timezone.now()
    event_id = uuid.uuid4()
    detail = call_detail(call_get(organization=Organization(pk=call.organization_id), call_id=str(call.pk)))
    truncated = _bounded_transcript(detail)
    envelope = {
        "message": {
            "type": event_type,
            "id": str(event_id),
            "createdAt": iso(now),
            "call": detail,
            "callUrl": f"{settings.PUBLIC_BASE_URL}/public/v1/calls/{call.pk}",
            "messagesTruncated": truncated,
            **(message_fields or {}),
        }
    }
    event = CallEvent.objects.create(
        id=event_id,
        organization_id=call.organization_id,
        call_id=call.pk,
        event_type=event_type,
        created_at=now,
        body=json_body(envelope).decode(),
    )
    rows = [
        WebhookDelivery(
            organization_id=call.organization_id,
            event=event,
            call_id=call.pk,
            event_type=event_type,
            rank=EVENT_RANK[EventType(event_type)],
            endpoint=endpoint,
            agent_id=agent_id,
            target_key=key,
            url=url,
            max_attempts=settings.EVENTS_MAX_ATTEMPTS,
            next_attempt_at=now,
            created_at=now,
            updated_at=now,
        )
        for endpoint, agent_id, key, url in targets
    ]
    WebhookDelivery.objects.bulk_create(rows)
    ids = [row.pk for row in rows]
    transaction.on_commit(lambda: _queue(ids))
    return event


def _bounded_transcript(detail: dict[str, Any]) -> bool:
    """Cut the call's `messages` to EVENTS_MAX_TRANSCRIPT_CHARS characters of content, in order (the message
    that crosses the bound keeps its start; later ones are left out); True when something was cut. The
    whole transcript stays readable at the event's `callUrl`."""
    budget = settings.EVENTS_MAX_TRANSCRIPT_CHARS
    kept: list[dict[str, Any]] = []
    for message in detail["messages"]:
        content = message["content"] or ""
        if len(content) > budget:
            if budget:
                kept.append({**message, "content": content[:budget]})
            detail["messages"] = kept
            return True
        budget -= len(content)
        kept.append(message)
    return False


def _targets(call: Call, event_type: str) -> list[tuple[WebhookEndpoint | None, Any, str, str]]:
    targets: list[tuple[WebhookEndpoint | None, Any, str, str]] = []
    if call.agent_id is not None:
        agent = Agent.objects.filter(pk=call.agent_id).values("agent_type", "server_url").first()
        if agent and agent["agent_type"] == AgentType.WEBHOOK and agent["server_url"]:
            targets.append((None, call.agent_id, f"agent:{call.agent_id}", agent["server_url"]))
    endpoints = WebhookEndpoint.objects.filter(organization_id=call.organization_id, enabled=True).filter(
        Q(agent__isnull=True) | Q(agent_id=call.agent_id)
    )
    for endpoint in endpoints:
        if event_type in (endpoint.events or []):
            targets.append((endpoint, None, f"endpoint:{endpoint.pk}", endpoint.url))
    return targets


def _queue(ids: list[Any]) -> None:
    """After the commit: hand the new deliveries to whoever sends them. Never raises (the rows are
    stored; the retry sweep sends what could not be queued)."""
    if background.mode("events") == "celery":
        if not background.celery_broker():
            return  # no broker (the test process): the rows wait for a worker or for beat's sweep
        try:
            for pk in ids:
                background.send_task("calls.deliver_event", str(pk))  # calls/tasks.py
        except Exception:
            logger.warning("could not queue %d event deliveries; the retry sweep sends them", len(ids), exc_info=True)
    else:
        wake()


# --- sending --------------------------------------------------------------------------------------


def _earlier_pending() -> Exists:
    """An earlier event of the same call to the same target is still pending (this one waits): one of a
    lower rank (EVENT_RANK), or of the same rank recorded before it (a call's call.handoff and call.transfer.*
    events)."""
    earlier = Q(rank__lt=OuterRef("rank")) | Q(rank=OuterRef("rank"), created_at__lt=OuterRef("created_at"))
    return Exists(
        WebhookDelivery.objects.filter(
            earlier,
            call_id=OuterRef("call_id"),
            target_key=OuterRef("target_key"),
            status=DeliveryStatus.PENDING,
        )
    )


def _due(now: Any) -> Any:
    return (
        WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .filter(~_earlier_pending())
    )


def due_ids(*, limit: int = 100) -> list[Any]:
    """Deliveries whose next attempt is due (oldest first)."""
    return list(_due(timezone.now()).order_by("next_attempt_at", "created_at").values_list("pk", flat=True)[:limit])


def next_due_in() -> float | None:
    """Seconds until the next pending attempt is due (0: now), or None when nothing is pending."""
    now = timezone.now()
    waiting = (
        WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING)
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .filter(~_earlier_pending())
    )
    soonest = waiting.aggregate(t=Min("next_attempt_at"))["t"]
    if soonest is None:
        return None
    return max(0.0, (soonest - now).total_seconds())


def deliver_one(delivery_id: Any) -> bool:
    """Claim the delivery if it is due and send one attempt; False when it was not due or taken."""
    now = timezone.now()
    claim = now + timedelta(seconds=settings.EVENTS_TIMEOUT_SECONDS) + CLAIM_MARGIN
    # The claim: a conditional UPDATE, so two senders never send the same attempt. Its conditions are on the
    # updated row itself: PostgreSQL checks them again on the row a concurrent claim has just committed (a
    # `pk IN (subquery)` form was checked against the statement's snapshot, and both claims won).
    if not _due(now).filter(pk=delivery_id).update(claimed_until=claim):
        return False
    delivery = WebhookDelivery.objects.select_related("event", "endpoint", "agent").get(pk=delivery_id)
    _attempt(delivery)
    return True


def deliver_due(*, limit: int = 500) -> int:
    """Send every due delivery once (up to `limit`), oldest first; returns how many were attempted.
    Rounds repeat while deliveries come due (a later event of a call waits for the earlier one)."""
    sent = 0
    while sent < limit:
        ids = due_ids(limit=min(100, limit - sent))
        if not ids:
            break
        done = sum(deliver_one(pk) for pk in ids)
        if not done:
            break
        sent += done
    return sent


def _secret_and_headers(delivery: WebhookDelivery) -> tuple[str | None, dict[str, str]]:
    if delivery.endpoint is not None:
        return delivery.endpoint.secret, {}
    agent = delivery.agent
    if agent is None:
        return None, {}
    return agent.server_secret or None, {str(k): str(v) for k, v in (agent.server_headers or {}).items()}


def _refusal(delivery: WebhookDelivery) -> str | None:
    """Why the target may not be sent to any more (deleted agent, disabled endpoint), or None."""
    if delivery.endpoint is not None and not delivery.endpoint.enabled:
        return "The webhook is disabled."
    if delivery.endpoint is None and delivery.agent is None:
        return "The agent was deleted."
    return None


def _attempt(delivery: WebhookDelivery) -> None:
    number = delivery.attempts + 1
    started = timezone.now()
    clock = time.monotonic()
    answer = _Answer(error=_refusal(delivery) or "")
    if not answer.error:
        secret, configured = _secret_and_headers(delivery)
        answer = _post_signed(
            delivery.url,
            delivery.event.body.encode(),
            secret=secret,
            configured=configured,
            event_id=str(delivery.event_id),
            attempt=number,
        )
        # What the receiver answered may repeat the caller's data: stored under the agent's redactPii.
        if answer.snippet:
            answer.snippet = redact_for_agent(
                Agent.objects.filter(calls=delivery.call_id).values("redact_pii", "language").first() or {},
                answer.snippet,
            )
    _record(delivery, number, started, clock, answer.status_code, answer.snippet, answer.error, answer.retry)


@dataclass
class _Answer:
    """One POST's outcome: the status code (None: no HTTP answer), the start of the answer's body, the
    error ("" when it succeeded) and whether a retry may succeed."""

    status_code: int | None = None
    snippet: str = ""
    error: str = ""
    retry: bool = False


def _post_signed(
    url: str, body: bytes, *, secret: str | None, configured: dict[str, str], event_id: str, attempt: int
) -> _Answer:
    """POST `body` to `url` as every event is sent: signed with `secret`, with the event id and attempt
    headers, through the egress guard within EVENTS_TIMEOUT_SECONDS; its outcome, never raising."""
    ours = {"Content-Type": "application/json", EVENT_ID_HEADER: event_id, ATTEMPT_HEADER: str(attempt)}
    if secret:
        ours[SIGNATURE_HEADER] = signature(secret, body)
    try:
        response = egress.send_sync(
            "POST",
            url,
            headers=merged_headers(configured, ours),
            content=body,
            timeout_s=settings.EVENTS_TIMEOUT_SECONDS,
            max_response_bytes=MAX_RESPONSE_BYTES,
            redirects="same_request",
        )
    except egress.EgressUnresolved as exc:
        return _Answer(error=exc.message, retry=True)
    except egress.EgressBlocked as exc:
        return _Answer(error=exc.message)
    except egress.EgressTimeout:
        return _Answer(error=f"No answer within {settings.EVENTS_TIMEOUT_SECONDS:g} s", retry=True)
    except egress.EgressTooLarge:
        return _Answer(error=f"The answer was larger than {MAX_RESPONSE_BYTES // 1024} KB")
    except httpx.TooManyRedirects:
        return _Answer(error="Too many redirects")
    except httpx.HTTPError as exc:
        return _Answer(error=f"Could not connect ({type(exc).__name__})", retry=True)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        # A URL saved before saving checked its encoding (or a header): no attempt can ever be made.
        return _Answer(
            error=f"Invalid URL or header ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
        )
    status_code = response.status_code
    snippet = response.content[:SNIPPET_CHARS].decode("utf-8", "replace")[:SNIPPET_CHARS]
    if 300 <= status_code < 400 and "location" in response.headers:
        return _Answer(status_code, snippet, _redirect_error(status_code, response.headers["location"]), True)
    if not 200 <= status_code < 300:
        return _Answer(
            status_code, snippet, f"HTTP {status_code}", status_code in RETRIED_STATUSES or status_code >= 500
        )
    return _Answer(status_code, snippet)


def _redirect_error(status_code: int, location: str) -> str:
    """lastError of a redirect the guard did not follow (redirects="same_request")."""
    why = "events follow only 307/308 within the same origin"
    return storable(f"HTTP {status_code} redirect to {location[:300]} not followed ({why})")


def backoff(number: int) -> timedelta:
    """The wait after failed attempt `number` (1-based): base, 2 x base, 4 x base..."""
    return timedelta(seconds=settings.EVENTS_RETRY_BASE_SECONDS * 2 ** (number - 1))


def _record(
    delivery: WebhookDelivery,
    number: int,
    started: Any,
    clock: float,
    status_code: int | None,
    snippet: str,
    error: str,
    retry: bool,
) -> None:
    now = timezone.now()
    succeeded = not error
    next_at = now + backoff(number) if (not succeeded and retry and number < delivery.max_attempts) else None
    with transaction.atomic():
        WebhookAttempt.objects.create(
            delivery=delivery,
            number=number,
            started_at=started,
            duration_ms=max(0, int((time.monotonic() - clock) * 1000)),
            status_code=status_code,
            succeeded=succeeded,
            error=error[:500],
            response_snippet=snippet,
            next_attempt_at=next_at,
        )
        if succeeded:
            status = DeliveryStatus.SUCCEEDED
        elif next_at is not None:
            status = DeliveryStatus.PENDING
        else:
            status = DeliveryStatus.FAILED
        recorded = {"attempts": number, "claimed_until": None, "last_status_code": status_code, "updated_at": now}
        row = WebhookDelivery.objects.filter(pk=delivery.pk)
        if not row.exclude(status=DeliveryStatus.CANCELLED).update(
            status=status, next_attempt_at=next_at, last_error=error[:500], **recorded
        ):
            row.update(**recorded)  # cancelled while this attempt was on its way: it stays cancelled
    if status != DeliveryStatus.PENDING:
        wake()  # a later event of the call to this target may be waiting for this one


def delivery_redeliver(*, delivery: WebhookDelivery) -> WebhookDelivery:
    """Send the delivery again now, with a fresh budget of EVENTS_MAX_ATTEMPTS attempts (same event id and
    body; attempts go on counting). A 409 when its webhook is disabled."""

    if (
        delivery.endpoint_id is not None
        and not WebhookEndpoint.objects.filter(pk=delivery.endpoint_id, enabled=True).exists()
    ):
        raise ApiError.conflict("The webhook is disabled; enable it first.", code="WEBHOOK_DISABLED")
    now = timezone.now()
    with transaction.atomic():
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            status=DeliveryStatus.PENDING,
            next_attempt_at=now,
            max_attempts=delivery.attempts + settings.EVENTS_MAX_ATTEMPTS,
            updated_at=now,
        )
        transaction.on_commit(lambda: _queue([delivery.pk]))
    delivery.refresh_from_db()
    return delivery


def delivery_cancel(*, delivery: WebhookDelivery, by: str) -> bool:
    """Cancel a pending delivery: it is never sent (again), and the call's later events to its target go on.
    False when it was no longer pending (delivered, failed or already cancelled)."""
    now = timezone.now()
    cancelled = WebhookDelivery.objects.filter(pk=delivery.pk, status=DeliveryStatus.PENDING).update(
        status=DeliveryStatus.CANCELLED,
        next_attempt_at=None,
        last_error=f"Cancelled by {by} on {now:%Y-%m-%d %H:%M} UTC"[:500],
        updated_at=now,
    )
    if cancelled:
        transaction.on_commit(wake)  # a later event of the call to this target may be waiting for this one
    return bool(cancelled)


# --- the test event -------------------------------------------------------------------------------

TEST_EVENT_TYPE = "webhook.test"


@dataclass(frozen=True)
class WebhookTestOutcome:
    """What one test event to a webhook met: its event id, the receiver's status code (None: no HTTP
    answer), the error ("" when it was accepted with a 2xx) and how long it took."""

    event_id: str
    status_code: int | None
    error: str
    duration_ms: int

    @property
    def succeeded(self) -> bool:
        return not self.error


def webhook_test_send(*, endpoint: WebhookEndpoint) -> WebhookTestOutcome:
    """Send the webhook one test event now, `{"message": {"type": "webhook.test", "id", "createdAt",
    "webhookId", "events"}}`, exactly as a call event is sent (signed with its current secret, the event id
    and attempt headers, through the egress guard, within EVENTS_TIMEOUT_SECONDS; one attempt, no retry),
    also when the webhook is disabled. Nothing is recorded: the outcome is answered."""
    event_id = str(uuid.uuid4())
    envelope = {
        "message": {
            "type": TEST_EVENT_TYPE,
            "id": event_id,
            "createdAt": iso(timezone.now()),
            "webhookId": str(endpoint.pk),
            "events": list(endpoint.events or []),
        }
    }
    clock = time.monotonic()
    answer = _post_signed(
        endpoint.url, json_body(envelope), secret=endpoint.secret, configured={}, event_id=event_id, attempt=1
    )
    return WebhookTestOutcome(
        event_id=event_id,
        status_code=answer.status_code,
        error=answer.error[:500],
        duration_ms=max(0, int((time.monotonic() - clock) * 1000)),
    )


# --- upkeep jobs: old events, failing endpoints -----------------------------------------------------


def call_events_purge(*, older_than: timedelta | None = None) -> int:
    """Delete events (with their deliveries and attempts) older than EVENTS_RETENTION_DAYS that are no
    longer pending anywhere. Returns how many events were deleted."""
    older_than = older_than or timedelta(days=settings.EVENTS_RETENTION_DAYS)
    pending = WebhookDelivery.objects.filter(event=OuterRef("pk"), status=DeliveryStatus.PENDING)
    old = CallEvent.objects.filter(created_at__lt=timezone.now() - older_than).filter(~Exists(pending))
    deleted = 0
    while True:
        batch = list(old.values_list("pk", flat=True)[:1000])
        if not batch:
            break
        CallEvent.objects.filter(pk__in=batch).delete()
        deleted += len(batch)
    if deleted:
        logger.info("purged %d call event(s) past retention", deleted)
    return deleted


def webhook_endpoints_disable_failing(*, after: timedelta = DISABLE_AFTER) -> int:
    """Disable every enabled endpoint whose every delivery attempt has failed for `after` (3 days): its
    first failure since its last success is older than that. Returns how many were disabled."""
    now = timezone.now()
    cutoff = now - after
    candidates = WebhookEndpoint.objects.filter(
        enabled=True, deliveries__attempt_log__succeeded=False, deliveries__attempt_log__started_at__lte=cutoff
    ).distinct()

    def disable(endpoint: WebhookEndpoint) -> int:
        attempts = WebhookAttempt.objects.filter(delivery__endpoint=endpoint)
        last_success = attempts.filter(succeeded=True).aggregate(t=Max("started_at"))["t"]
        failures = attempts.filter(succeeded=False)
        if last_success is not None:
            failures = failures.filter(started_at__gt=last_success)
        first_failure = failures.aggregate(t=Min("started_at"))["t"]
        if first_failure is None or first_failure > cutoff:
            return 0
        last = failures.order_by("-started_at").values_list("error", flat=True).first() or ""
        reason = (
            f"Disabled on {now:%Y-%m-%d %H:%M} UTC: every delivery failed since {first_failure:%Y-%m-%d %H:%M} UTC"
            f" (last error: {storable(last)})"
        )[:300]
        return WebhookEndpoint.objects.filter(pk=endpoint.pk, enabled=True).update(
            enabled=False, disabled_reason=reason, updated_at=now
        )

    disabled = rows_one_by_one("disabledWebhooks", list(candidates), disable, row_id=lambda endpoint: endpoint.pk)
    if disabled:
        logger.info("disabled %d webhook endpoint(s) that failed every delivery for %s", disabled, after)
    return disabled


# --- the in-process worker (BACKGROUND_WORK=inprocess) --------------------------------------------


def wake() -> None:
    """Tell this process's worker that deliveries may be due (no-op when it does not run here)."""
    _worker.wake()


def start_worker() -> None:
    """Start this process's delivery worker once (BACKGROUND_WORK=inprocess; never raises). It first sends
    what is pending (a restart resumes where the last process stopped), then waits for commits and
    for the next due retry (at most EVENTS_POLL_SECONDS; 0: no worker)."""
    _worker.start()


def _send(pk: Any) -> bool:
    try:
        return deliver_one(pk)
    except Exception:
        logger.warning("event delivery %s failed", pk, exc_info=True)
        return False


def _deliver_round() -> float | None:
    """Send what is due, in batches over EVENTS_WORKER_THREADS threads; seconds until the next retry."""
    threads = int(settings.EVENTS_WORKER_THREADS)
    while True:
        ids = due_ids(limit=threads * 8)
        if not ids or not sum(background.fan_out(_send, ids, threads=threads, name="event-send")):
            break
    return next_due_in()


_worker = background.Loop(
    "event-delivery",
    _deliver_round,
    every=lambda: float(settings.EVENTS_POLL_SECONDS),
    feature="events",
    paced=True,
    failure="event delivery sweep failed",
)
