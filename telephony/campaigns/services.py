"""Call batches (campaigns): one agent calls a list of people from one of the organization's numbers,
inside a calling window, a few at a time, with retries (docs/guides/campaigns.md, docs/guides/campaigns.md).

The rules live here: what a batch may be made of (`batch_create`), the scheduler (`batch_tick`), what a
recipient's ended call means (`batch_call_ended`, on calls.signals.call_ended) and the client's
pause/resume/cancel. The scheduler pauses a batch whose next call a spent `block` budget holds
(calls/budgets; the reason in the agent's log). REST, the dashboard and the Celery task call these.

At most once: the scheduler takes a recipient (pending -> calling, attempts + 1) and creates its call
through telephony.outbound.services.outbound_call_create in ONE transaction, under the batch's row lock
(PostgreSQL; SQLite's IMMEDIATE transactions serialize whole transactions), so a second scheduler or a
restarted one sees the recipient `calling` and the batch's open calls, never places it twice and never
goes above the batch's concurrency.
"""

from __future__ import annotations

import csv
import io
import logging
import re
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from accounts.models import Organization
from agents.models import Agent, AgentStatus
from agents.time_zones import time_zone_problem
from calls.budgets.services import budget_refusal
from calls.logging import LogSession, agent_log, new_session_id
from calls.models import OPEN_STATUSES, Call, CallStatus, EndedReason
from calls.variables import MAX_NAME_LENGTH, MAX_VARIABLES, metadata_clean, variables_clean
from calls.variables import NAME as VARIABLE_NAME
from kit import background
from kit.errors import ApiError
from kit.validation import e164_problem
from telephony.models import (
    CallBatch,
    CallBatchRecipient,
    CallBatchStatus,
    OutboundCall,
    PhoneNumberStatus,
    RecipientOutcome,
    RecipientState,
)
from telephony.outbound import services as outbound

logger = logging.getLogger(__name__)

MAX_RECIPIENTS = 10_000
# A batch's concurrency never exceeds this, whatever the plan (the plan's max_outbound_calls when lower).
MAX_CONCURRENCY = 100
MAX_ATTEMPTS = 5
MAX_BACKOFF_MINUTES = 7 * 24 * 60
MAX_CSV_BYTES = 10 * 1024 * 1024
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
RETRYABLE = (RecipientOutcome.NO_ANSWER, RecipientOutcome.BUSY, RecipientOutcome.FAILED, RecipientOutcome.VOICEMAIL)
DEFAULT_RETRY: dict[str, Any] = {"maxAttempts": 1, "backoffMinutes": 10, "retryOn": ["no-answer", "busy"]}
# `+`, then digits with optional spaces, dots, dashes and brackets between them.
FORMATTED_NUMBER = re.compile(r"^\+[0-9 ().-]{2,30}$")
# Invalid rows listed by number in one 400 (all of them in `issues`, the first few in the message).
ROWS_IN_MESSAGE = 10
DUPLICATE_RECIPIENTS = "DUPLICATE_RECIPIENTS"
BATCH_STATUS_CONFLICT = "BATCH_STATUS_CONFLICT"
TELEPHONY_NOT_CONFIGURED = "TELEPHONY_NOT_CONFIGURED"  # outbound.outbound_origin's 503: no calls can be placed


# --- validation ----------------------------------------------------------------------------------


def e164_normalize(value: Any, *, destinations: outbound.Destinations | None = None) -> tuple[str | None, str | None]:
    """(the number in E.164, None) or (None, why not). Spaces, dots, dashes and brackets are allowed
    around the digits (a spreadsheet's formatting); the leading + and country code are required. The digits
    then meet the checks of every number the API takes (kit.validation.e164_problem) and of every number
    an agent calls (outbound.outbound_number_problem: the blocklist, the toll-fraud ranges; with an
    organization's `destinations`, its own numbers and its countries)."""
    if not isinstance(value, str) or not value.strip():
        return None, "A phone number in E.164 format is required, for example +14155550123."
    text = value.strip()
    if not FORMATTED_NUMBER.match(text):
        return None, f"{text[:40]!r} is not in E.164 format (+ and the country code, for example +14155550123)."
    number = "+" + re.sub(r"[^0-9]", "", text)
    if e164_problem(number):
        return None, f"{text[:40]!r} is not a valid phone number."
    refused = outbound.outbound_number_problem(number, destinations=destinations)
    return (None, refused) if refused else (number, None)


def recipients_clean(
    rows: Any, *, from_csv: bool = False, organization: Organization | None = None
) -> list[dict[str, Any]]:
    """The recipients given, checked and normalized ({to, variables, metadata}); every invalid row is
    listed in one 400 (`issues` keyed `recipients.<index>.<field>`; the message counts CSV rows from 1
    after the header), duplicates in another."""
    if not isinstance(rows, list):
        raise ApiError.field("recipients", "Must be a list of objects with `to`.")
    if not rows:
        raise ApiError.field("recipients", "At least one recipient is required.")
    if len(rows) > MAX_RECIPIENTS:
        raise ApiError.field("recipients", f"At most {MAX_RECIPIENTS:,} recipients per batch, not {len(rows):,}.")
    destinations = outbound.outbound_destinations(organization=organization) if organization else None
    issues: dict[str, list[str]] = {}
    cleaned: list[dict[str, Any]] = []
    for index, row in enumerate(rows):
        prefix = f"recipients.{index}"
        if not isinstance(row, dict):
            issues[prefix] = ["Must be an object with `to`."]
            continue
        unknown = sorted(set(row) - {"to", "variables", "metadata"})
        if unknown:
            issues[prefix] = [f"Unknown field(s): {', '.join(map(str, unknown))}."]
        number, problem = e164_normalize(row.get("to"), destinations=destinations)
        if problem:
            issues[f"{prefix}.to"] = [problem]
        item: dict[str, Any] = {"to": number}
        for name, clean in (("variables", variables_clean), ("metadata", metadata_clean)):
            try:
                item[name] = clean(row.get(name), field=f"{prefix}.{name}")
            except ApiError as error:
                for field, messages in (error.issues or {}).items():
                    issues.setdefault(field, []).extend(messages)
        cleaned.append(item)
    if issues:
        bad = sorted({int(field.split(".")[1]) for field in issues})
        shown = ", ".join(str(i + 1 if from_csv else i) for i in bad[:ROWS_IN_MESSAGE])
        more = f" and {len(bad) - ROWS_IN_MESSAGE} more" if len(bad) > ROWS_IN_MESSAGE else ""
        what = "CSV row(s)" if from_csv else "recipient(s) at index"
        first_field = next(iter(issues))
        raise ApiError.invalid(
            f"{len(bad)} invalid {what} {shown}{more}: {first_field}: {issues[first_field][0]}", issues
        )
    seen: set[str] = set()
    duplicates: list[str] = []
    for item in cleaned:
        if item["to"] in seen and item["to"] not in duplicates:
            duplicates.append(item["to"])
        seen.add(item["to"])
    if duplicates:
        shown = ", ".join(duplicates[:ROWS_IN_MESSAGE]) + (" ..." if len(duplicates) > ROWS_IN_MESSAGE else "")
        raise ApiError(
            f"Each number may appear once in a batch; {len(duplicates)} appear more than once: {shown}",
            code=DUPLICATE_RECIPIENTS,
            issues={"recipients": [f"Duplicate numbers: {', '.join(duplicates)}"]},
            extra={"duplicates": duplicates},
        )
    return cleaned


def recipients_from_csv(content: bytes) -> list[dict[str, Any]]:
    """Rows of a CSV upload as recipients: a header row with `to` and any other columns, which become
    each recipient's variables (an empty cell: the variable is left out). UTF-8, a BOM allowed."""
    if len(content) > MAX_CSV_BYTES:
        raise ApiError("The CSV file is too large.", status_code=413, extra={"maxBytes": MAX_CSV_BYTES})
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ApiError.field("file", "The CSV file must be UTF-8 text.") from None
    if not text.strip():
        raise ApiError.field(
            "file", "The CSV file is empty: a header row with a `to` column and one row per recipient."
        )
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as error:
        raise ApiError.field("file", f"The CSV file could not be read: {error}.") from None
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    header = [cell.strip() for cell in rows[0]]
    if "to" not in header:
        raise ApiError.field("file", f"The CSV header needs a `to` column (found: {', '.join(header)[:200]}).")
    if len(set(header)) != len(header) or "" in header:
        raise ApiError.field("file", "Every CSV column needs a name of its own.")
    names = [name for name in header if name != "to"]
    bad = [name for name in names if not VARIABLE_NAME.fullmatch(name) or len(name) > MAX_NAME_LENGTH]
    if bad:
        raise ApiError.field(
            "file",
            f"CSV columns other than `to` are variables; not valid variable names: {', '.join(bad)[:200]} (a letter "
            "or underscore, then letters, digits, underscores or dots).",
        )
    if len(names) > MAX_VARIABLES:
        raise ApiError.field("file", f"At most {MAX_VARIABLES} variable columns besides `to`, not {len(names)}.")
    if len(rows) == 1:
        raise ApiError.field("file", "The CSV file has a header but no recipients.")
    recipients: list[dict[str, Any]] = []
    for row in rows[1:]:
        cells = dict(zip(header, [*row, *[""] * (len(header) - len(row))], strict=False))
        variables = {name: value for name, value in cells.items() if name != "to" and value != ""}
        recipients.append({"to": cells["to"], "variables": variables})
    return recipients


def window_clean(value: Any) -> dict[str, Any] | None:
    """A calling window {days, start, end, timeZone}, normalized; timeZone None when it is left out (the
    agent's, filled in by `window_zone_fill` once the agent is known)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ApiError.field("window", "Must be an object {days, start, end, timeZone}.")
    unknown = sorted(set(value) - {"days", "start", "end", "timeZone"})
    if unknown:
        raise ApiError.field("window", f"Unknown field(s): {', '.join(map(str, unknown))}.")
    days = value.get("days", list(DAYS))
    if not isinstance(days, list) or not days or any(day not in DAYS for day in days):
        raise ApiError.field("window.days", f"Must be a non-empty list of {', '.join(DAYS)}.")
    start, end = _clock(value.get("start"), "window.start"), _clock(value.get("end"), "window.end")
    if end <= start:
        raise ApiError.field("window.end", "end must be after start (the same day, in the window's time zone).")
    zone = _zone(value["timeZone"]) if "timeZone" in value else None
    return {
        "days": [day for day in DAYS if day in days],
        "start": start.strftime("%H:%M"),
        "end": end.strftime("%H:%M"),
        "timeZone": zone,
    }


def window_zone_fill(window: dict[str, Any] | None, *, agent: Agent) -> dict[str, Any] | None:
    """A window without a timeZone takes the agent's (UTC when the agent has none)."""
    if window is None or window["timeZone"] is not None:
        return window
    return {**window, "timeZone": _zone(agent.time_zone or "UTC")}


def _zone(value: Any) -> Any:
    problem = time_zone_problem(value)
    if problem:
        raise ApiError.field("window.timeZone", problem)
    return value


def _clock(value: Any, field: str) -> time:
    if not isinstance(value, str) or len(value) != 5 or value[2] != ":":
        raise ApiError.field(field, 'Must be a time of day "HH:MM" (24-hour), for example "09:00".')
    try:
        return time(int(value[:2]), int(value[3:]))
    except ValueError:
        raise ApiError.field(field, 'Must be a time of day "HH:MM" (24-hour), for example "09:00".') from None


def retry_clean(value: Any) -> dict[str, Any]:
    """The retry rule {maxAttempts 1-5, backoffMinutes, retryOn}, with defaults for what is left out."""
    if value is None:
        return dict(DEFAULT_RETRY)
    if not isinstance(value, dict):
        raise ApiError.field("retry", "Must be an object {maxAttempts, backoffMinutes, retryOn}.")
    unknown = sorted(set(value) - set(DEFAULT_RETRY))
    if unknown:
        raise ApiError.field("retry", f"Unknown field(s): {', '.join(map(str, unknown))}.")
    attempts = value.get("maxAttempts", DEFAULT_RETRY["maxAttempts"])
    if not _int(attempts) or not 1 <= attempts <= MAX_ATTEMPTS:
        raise ApiError.field("retry.maxAttempts", f"Must be an integer from 1 to {MAX_ATTEMPTS} (attempts in all).")
    backoff = value.get("backoffMinutes", DEFAULT_RETRY["backoffMinutes"])
    if not _int(backoff) or not 0 <= backoff <= MAX_BACKOFF_MINUTES:
        raise ApiError.field("retry.backoffMinutes", f"Must be an integer from 0 to {MAX_BACKOFF_MINUTES}.")
    retry_on = value.get("retryOn", DEFAULT_RETRY["retryOn"])
    if not isinstance(retry_on, list) or any(item not in RETRYABLE for item in retry_on):
        raise ApiError.field("retry.retryOn", f"Must be a list of {', '.join(RETRYABLE)}.")
    return {"maxAttempts": attempts, "backoffMinutes": backoff, "retryOn": [o for o in RETRYABLE if o in retry_on]}


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def concurrency_clean(value: Any, *, organization: Organization) -> int:
    limit = organization.plan.max_outbound_calls
    top = min(MAX_CONCURRENCY, limit) if limit is not None else MAX_CONCURRENCY
    if value is None:
        return 1
    if not _int(value) or not 1 <= value <= top:
        why = f" (your plan places at most {limit} outbound calls at once)" if limit is not None and limit < 100 else ""
        raise ApiError.field("concurrency", f"Must be an integer from 1 to {top}{why}.")
    return int(value)


# --- create, pause, resume, cancel ----------------------------------------------------------------


def batch_create(*, organization: Organization, data: dict[str, Any], from_csv: bool = False) -> CallBatch:
    """A new batch (`scheduled`) with its recipients, all or nothing. `data`: the request's fields
    (name, agentId, phoneNumberId, recipients, startAt?, window?, concurrency?, retry?); `from_csv`:
    the recipients are the rows of an uploaded CSV (errors name rows).

    A malformed body is a 400 whatever this service's configuration: the window and the retry rule are
    checked first, then who places the calls (outbound_origin: the plan, this service's configuration,
    the telephony account, the agent, the number), then what depends on them (the plan's concurrency, the
    agent's time zone, the recipients against the organization's own numbers and destination countries,
    so that a number that is not the organization's is named as such). When this service cannot place
    calls (503 TELEPHONY_NOT_CONFIGURED), the recipients are checked before that answer."""
    window = window_clean(data.get("window"))
    retry = retry_clean(data.get("retry"))
    try:
        agent, number = outbound.outbound_origin(
            organization=organization, agent_id=str(data["agentId"]), phone_number_id=str(data["phoneNumberId"])
        )
    except ApiError as error:
        if error.code == TELEPHONY_NOT_CONFIGURED:
            recipients_clean(data.get("recipients"), from_csv=from_csv, organization=organization)
        raise
    concurrency = concurrency_clean(data.get("concurrency"), organization=organization)
    window = window_zone_fill(window, agent=agent)
    recipients = recipients_clean(data.get("recipients"), from_csv=from_csv, organization=organization)
    with transaction.atomic():
        batch = CallBatch.objects.create(
            organization=organization,
            name=data["name"],
            agent=agent,
            phone_number=number,
            start_at=data.get("startAt"),
            window=window,
            concurrency=concurrency,
            retry=retry,
        )
        CallBatchRecipient.objects.bulk_create(
            [
                CallBatchRecipient(
                    batch=batch,
                    position=position,
                    to_number=item["to"],
                    variables=item["variables"],
                    metadata=item["metadata"],
                )
                for position, item in enumerate(recipients)
            ],
            batch_size=1000,
        )
    transaction.on_commit(ensure_scheduler)
    return batch


def _change_status(*, batch_id: Any, allowed: tuple[str, ...], action: str) -> CallBatch:
    batch = CallBatch.objects.select_for_update().get(pk=batch_id)
    if batch.status not in allowed:
        raise ApiError.conflict(
            f"A {batch.status} batch cannot be {action}; only a {' or '.join(allowed)} one.",
            code=BATCH_STATUS_CONFLICT,
            status=batch.status,
        )
    return batch


def batch_pause(*, batch: CallBatch) -> CallBatch:
    """Nothing new is placed until it is resumed; calls already placed go on."""
    with transaction.atomic():
        row = _change_status(
            batch_id=batch.pk, allowed=(CallBatchStatus.SCHEDULED, CallBatchStatus.RUNNING), action="paused"
        )
        row.status = CallBatchStatus.PAUSED
        row.save(update_fields=["status"])
    return row


def batch_resume(*, batch: CallBatch) -> CallBatch:
    with transaction.atomic():
        row = _change_status(batch_id=batch.pk, allowed=(CallBatchStatus.PAUSED,), action="resumed")
        started = CallBatchRecipient.objects.filter(batch=row, attempts__gt=0).exists()
        row.status = CallBatchStatus.RUNNING if started else CallBatchStatus.SCHEDULED
        row.save(update_fields=["status"])
        _complete_if_done(row, timezone.now())
    return row


def batch_cancel(*, batch: CallBatch) -> CallBatch:
    """Recipients not called yet (or waiting for a retry) end `canceled`; calls queued or ringing are
    canceled at the carrier (telephony.outbound.services.outbound_call_cancel, after the commit), and their
    recipients take the outcome their call ends with; live calls go on to their end, no retry follows."""
    with transaction.atomic():
        row = _change_status(
            batch_id=batch.pk,
            allowed=(CallBatchStatus.SCHEDULED, CallBatchStatus.RUNNING, CallBatchStatus.PAUSED),
            action="canceled",
        )
        row.status = CallBatchStatus.CANCELED
        row.save(update_fields=["status"])
        CallBatchRecipient.objects.filter(batch=row, state=RecipientState.PENDING).update(
            state=RecipientState.DONE, outcome=RecipientOutcome.CANCELED, next_attempt_at=None
        )
        _complete_if_done(row, timezone.now())
        to_cancel = list(
            OutboundCall.objects.filter(
                recipient__batch=row, call__status__in=(CallStatus.QUEUED, CallStatus.RINGING)
            ).values_list("call_id", flat=True)
        )
        transaction.on_commit(lambda: _cancel_calls(to_cancel))
    return row


def _cancel_calls(call_ids: list[Any]) -> None:
    for call in Call.objects.filter(pk__in=call_ids, status__in=(CallStatus.QUEUED, CallStatus.RINGING)):
        try:
            outbound.outbound_call_cancel(call=call)
        except Exception:
            logger.warning("call %s of a canceled batch could not be canceled", call.pk, exc_info=True)


def _complete_if_done(batch: CallBatch, now: datetime) -> bool:
    """Every recipient has its final outcome: the batch is over (`completed`, or it stays `canceled`)."""
    if batch.completed_at is not None:
        return False
    if CallBatchRecipient.objects.filter(batch=batch).exclude(state=RecipientState.DONE).exists():
        return False
    if batch.status != CallBatchStatus.CANCELED:
        batch.status = CallBatchStatus.COMPLETED
    batch.completed_at = now
    batch.save(update_fields=["status", "completed_at"])
    return True


# --- the scheduler -------------------------------------------------------------------------------


def window_open(window: dict[str, Any] | None, now: datetime) -> bool:
    """Whether `now` is inside the window (its days, from start until end, in its time zone)."""
    if not window:
        return True
    local = now.astimezone(ZoneInfo(window["timeZone"]))
    if DAYS[local.weekday()] not in window["days"]:
        return False
    clock = local.strftime("%H:%M")
    return bool(window["start"] <= clock < window["end"])


def batch_tick(now: datetime | None = None) -> int:
    """Place the calls that are due now in every scheduled or running batch; returns how many were
    placed (queued through telephony.outbound.services). Safe to run from several processes at once."""
    now = now or timezone.now()
    _settle_lost(now)
    due = CallBatch.objects.filter(status__in=(CallBatchStatus.SCHEDULED, CallBatchStatus.RUNNING)).filter(
        Q(start_at__isnull=True) | Q(start_at__lte=now)
    )
    placed = 0
    for batch_id, window in due.values_list("id", "window"):
        if not window_open(window, now):
            continue
        try:
            placed += _tick_batch(batch_id, now)
        except Exception:
            logger.exception("call batch %s: the scheduler failed", batch_id)
    return placed


def _tick_batch(batch_id: Any, now: datetime) -> int:
    with transaction.atomic():
        # The batch's lock serializes every scheduler on this batch (another one busy with it: skip).
        batch = (
            CallBatch.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("agent", "phone_number")
            .filter(pk=batch_id, status__in=(CallBatchStatus.SCHEDULED, CallBatchStatus.RUNNING))
            .first()
        )
        if batch is None or (batch.start_at and batch.start_at > now) or not window_open(batch.window, now):
            return 0
        if batch.agent.status != AgentStatus.ACTIVE or batch.phone_number.status != PhoneNumberStatus.CLAIMED:
            return 0  # deactivated or released since: nothing new is placed until it is active (claimed) again
        open_calls = OutboundCall.objects.filter(recipient__batch=batch, call__status__in=OPEN_STATUSES).count()
        free = batch.concurrency - open_calls
        if free <= 0:
            return 0
        recipients = list(
            CallBatchRecipient.objects.select_for_update(skip_locked=True)
            .filter(batch=batch, state=RecipientState.PENDING)
            .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
            .order_by("position")[:free]
        )
        placed = 0
        for recipient in recipients:
            refusal = budget_refusal(
                organization=batch.organization_id, agent_id=batch.agent_id, variables=recipient.variables
            )
            if refusal is not None:  # a spent `block` budget holds the next call: the campaign pauses
                _budget_pause(batch, refusal.reason)
                break
            taken = CallBatchRecipient.objects.filter(pk=recipient.pk, state=RecipientState.PENDING).update(
                state=RecipientState.CALLING, attempts=F("attempts") + 1, next_attempt_at=None
            )
            if not taken:
                continue
            outbound.outbound_call_create(
                agent=batch.agent,
                phone_number=batch.phone_number,
                to=recipient.to_number,
                variables=recipient.variables,
                metadata=recipient.metadata,
                recipient=recipient,
                attempt=recipient.attempts + 1,
            )
            placed += 1
        if placed and batch.status == CallBatchStatus.SCHEDULED:
            batch.status = CallBatchStatus.RUNNING
            batch.save(update_fields=["status"])
        return placed


def _budget_pause(batch: CallBatch, reason: str) -> None:
    """Pause the batch (locked by the scheduler) because a spent `block` budget holds its next call (calls/budgets):
    as the client's pause, nothing new is placed and live calls go on; the reason goes to the agent's log. Once
    the budget allows calls again (its next period, a higher limit, deleted), resume it."""
    batch.status = CallBatchStatus.PAUSED
    batch.save(update_fields=["status"])
    logger.info("call batch %s paused: %s", batch.pk, reason)
    session = LogSession(organization_id=batch.organization_id, agent_id=batch.agent_id, session_id=new_session_id())
    agent_log(session, "warn", f"Campaign '{batch.name}' paused: {reason}", batchId=str(batch.pk))


def _settle_lost(now: datetime) -> None:
    """Every unfinished batch (whatever its window) with a recipient still `calling` whose calls have all
    ended: settled under the batch's lock (one busy elsewhere is left for the next tick)."""
    stuck = (
        CallBatchRecipient.objects.filter(batch__completed_at__isnull=True, state=RecipientState.CALLING)
        .exclude(calls__call__status__in=OPEN_STATUSES)
        .values_list("batch_id", flat=True)
        .distinct()
    )
    for batch_id in list(stuck):
        try:
            with transaction.atomic():
                batch = CallBatch.objects.select_for_update(skip_locked=True).filter(pk=batch_id).first()
                if batch is not None:
                    _settle_lost_endings(batch, now)
        except Exception:
            logger.exception("call batch %s: settling ended calls failed", batch_id)


def _settle_lost_endings(batch: CallBatch, now: datetime) -> None:
    """Recipients still `calling` whose call has ended: its call_ended was lost (the process stopped
    between the ending's commit and the signal). Settled as the signal would have."""
    stuck = CallBatchRecipient.objects.filter(batch=batch, state=RecipientState.CALLING).exclude(
        calls__call__status__in=OPEN_STATUSES
    )
    for recipient in stuck:
        latest = recipient.calls.select_related("call").order_by("-attempt").first()
        if latest is not None and latest.attempt == recipient.attempts:
            _settle(batch, recipient, latest.call, now)


# --- endings ------------------------------------------------------------------------------------


def outcome_of(call: Call) -> str:
    """A recipient's outcome from its ended call."""
    if call.ended_reason == EndedReason.VOICEMAIL:
        return RecipientOutcome.VOICEMAIL
    outcomes: dict[str, str] = {
        CallStatus.COMPLETED: RecipientOutcome.COMPLETED,
        CallStatus.NO_ANSWER: RecipientOutcome.NO_ANSWER,
        CallStatus.BUSY: RecipientOutcome.BUSY,
        CallStatus.CANCELED: RecipientOutcome.CANCELED,
    }
    return outcomes.get(call.status, RecipientOutcome.FAILED)


def batch_call_ended(*, call_id: Any, now: datetime | None = None) -> None:
    """A call ended: when it is a batch recipient's current attempt, the recipient gets its outcome or a
    retry after the backoff, and the batch completes with its last recipient. Idempotent: an ending
    already settled (or an older attempt's) changes nothing."""
    link = (
        OutboundCall.objects.filter(call_id=call_id, recipient__isnull=False)
        .values("recipient_id", "recipient__batch_id")
        .first()
    )
    if link is None:
        return
    now = now or timezone.now()
    with transaction.atomic():
        # Lock order as the scheduler's: the batch, then the recipient.
        batch = CallBatch.objects.select_for_update().get(pk=link["recipient__batch_id"])
        outbound_call = OutboundCall.objects.select_related("call").get(call_id=call_id)
        recipient = CallBatchRecipient.objects.select_for_update().get(pk=link["recipient_id"])
        _settle(batch, recipient, outbound_call.call, now, attempt=outbound_call.attempt)


def _settle(
    batch: CallBatch, recipient: CallBatchRecipient, call: Call, now: datetime, attempt: int | None = None
) -> None:
    if call.status in OPEN_STATUSES or recipient.state != RecipientState.CALLING:
        return
    if attempt is not None and attempt != recipient.attempts:
        return  # an older attempt's call
    outcome = outcome_of(call)
    retry = {**DEFAULT_RETRY, **(batch.retry or {})}
    retrying = (
        outcome in retry["retryOn"]
        and recipient.attempts < retry["maxAttempts"]
        and batch.status not in (CallBatchStatus.CANCELED, CallBatchStatus.COMPLETED)
    )
    if retrying:
        recipient.state, recipient.outcome = RecipientState.PENDING, ""
        # The backoff counts from the call's end (as the carrier reported it).
        recipient.next_attempt_at = (call.ended_at or now) + timedelta(minutes=retry["backoffMinutes"])
    else:
        recipient.state, recipient.outcome, recipient.next_attempt_at = RecipientState.DONE, outcome, None
    recipient.save(update_fields=["state", "outcome", "next_attempt_at"])
    _complete_if_done(batch, now)


def on_call_ended(sender: Any, call_id: Any, **kwargs: Any) -> None:
    """calls.signals.call_ended receiver (connected in telephony/apps.py)."""
    batch_call_ended(call_id=call_id)


# --- running the scheduler -------------------------------------------------------------------------


def ensure_scheduler() -> None:
    """Start this process's scheduler loop once (BACKGROUND_WORK=inprocess, the embedded default): a tick
    every BATCH_TICK_SECONDS (0: none). With Celery, beat runs `telephony.batch_tick` instead. Never raises."""
    _scheduler.start()


_scheduler = background.Loop(
    "batch-scheduler",
    lambda: batch_tick(),
    every=lambda: float(settings.BATCH_TICK_SECONDS),
    feature="batches",
    failure="call batch tick failed",
)
