"""Reads of call history and agent logs. Every query is scoped to the caller's organization."""

from __future__ import annotations

import functools
import operator
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import connection
from django.db.models import (
    Count,
    Q,
    QuerySet,
    Sum,
)
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from accounts.models import Organization
from agents.models import Agent
from calls.billing import period_bounds
from calls.models import AgentLog, AnalysisStatus, Call, CallMessage, CallStatus
from kit.db import row_get, uuid_text

# successRate: completed calls / finished (completed + failed) calls started in the last 7 days,
# as a percentage 0-100; 0 when the agent has no finished call in the window.
SUCCESS_RATE_WINDOW = timedelta(days=7)
LOG_WINDOW = timedelta(hours=24)
# The dashboard's home page counts failed calls started in this window.
FAILURE_WINDOW = timedelta(hours=24)


def day_start(at: datetime | None = None) -> datetime:
    """00:00 today in the server's TIME_ZONE: where "today" starts for every count of today's calls."""
    local = timezone.localtime(at or timezone.now())
    return local.replace(hour=0, minute=0, second=0, microsecond=0)


def agent_call_stats(*, organization: Organization, agent_id: Any = None) -> dict[str, tuple[int, float]]:
    """What the agent list shows of calls, per agent id (text) that has any: the calls started since 00:00
    today (server TIME_ZONE, any status), and the success rate in percent of the calls finished over the
    last 7 days (SUCCESS_RATE_WINDOW; 0.0 with none). One grouped query over the window's calls, read for
    every list (the list's hot path: written as SQL, the ORM took as long to build it as it takes to run)."""
    now = timezone.now()
    today, window = day_start(now), now - SUCCESS_RATE_WINDOW
    at, uuid = connection.ops.adapt_datetimefield_value, Call._meta.get_field("organization").get_db_prep_value
    params = [at(today), at(window), CallStatus.COMPLETED, CallStatus.FAILED, at(window), CallStatus.COMPLETED]
    params += [uuid(organization.pk, connection), at(min(today, window))]
    if agent_id is not None:
        where, index = "AND agent_id = %s", ""
        params.append(uuid(agent_id, connection))
    else:
        # The organization's calls of the window, in its (organization, started_at) index. Once ANALYZE has
        # run, SQLite's planner prefers the (agent, started_at) index for the GROUP BY and skip-scans it
        # over every agent of every organization (40 ms beside an agent of another organization with
        # 100,000 calls, against 1 ms); naming the index keeps the plan. PostgreSQL plans it by itself.
        # (A deleted agent's calls keep no agent: they count for none.)
        where, index = (
            "AND agent_id IS NOT NULL",
            "INDEXED BY call_org_started" if connection.vendor == "sqlite" else "",
        )
    with connection.cursor() as cursor:
        cursor.execute(_AGENT_CALL_STATS.format(index=index, where=where), params)
        rows = cursor.fetchall()
    return {
        uuid_text(agent): (int(today_count), float(completed) * 100.0 / float(finished) if finished else 0.0)
        for agent, today_count, finished, completed in rows
    }


_AGENT_CALL_STATS = """
SELECT agent_id,
    SUM(CASE WHEN started_at >= %s THEN 1 ELSE 0 END),
    SUM(CASE WHEN started_at >= %s AND status IN (%s, %s) THEN 1 ELSE 0 END),
    SUM(CASE WHEN started_at >= %s AND status = %s THEN 1 ELSE 0 END)
FROM calls_call {index}
WHERE organization_id = %s AND started_at >= %s {where}
GROUP BY agent_id"""


CALL_SUMMARY_COLUMNS = (
    "id",
    "agent_id",
    "agent_name",
    "channel",
    "from_number",
    "to_number",
    "status",
    "duration_seconds",
    "started_at",
    "ended_at",
    "tool_invocation_count",
    "billable_seconds",
    "included_seconds",
    "overage_seconds",
    "usage_classification",
    "ended_reason",
    "ended_message",
    "direction",
    "variables",
    "metadata",
    "modality",
)


def call_list(*, organization: Organization, agent_id: Any = None, limit: int = 25) -> list[dict[str, Any]]:
    """Newest first. An agent id of another organization simply matches nothing."""
    calls = Call.objects.filter(organization=organization)
    if agent_id is not None:
        calls = calls.filter(agent_id=agent_id)
    return list(calls.order_by("-started_at", "-id").values(*CALL_SUMMARY_COLUMNS)[:limit])


def call_get(*, organization: Organization, call_id: str) -> Call:
    """The organization's call with its transcript, handoffs, tool log and model usage (five queries)."""
    calls = Call.objects.filter(organization=organization).prefetch_related(
        "messages", "handoffs", "tool_invocations", "llm_usage"
    )
    return row_get(calls, call_id, what="call", missing="Call not found")


def call_with_recording(*, call_id: str) -> Call:
    """A call that has a recording, whatever its organization (a signed recording URL names only the call)."""
    recorded = Call.objects.exclude(recording_key="")
    return row_get(recorded, call_id, what="call", missing="Recording not found", code="RECORDING_NOT_FOUND")


def agent_log_page(
    *, agent: Agent, limit: int, offset: int, severity: str | None = None, session_id: str | None = None
) -> tuple[list[AgentLog], bool]:
    """One page of the agent's logs of the last 24 hours, newest first, and whether more follow."""
    logs = AgentLog.objects.filter(agent=agent, timestamp__gte=timezone.now() - LOG_WINDOW)
    if severity:
        logs = logs.filter(severity=severity)
    if session_id:
        logs = logs.filter(session_id=session_id)
    rows = list(logs.order_by("-timestamp", "-sequence")[offset : offset + limit + 1])
    return rows[:limit], len(rows) > limit


def usage_by_organization(*, at: Any = None) -> list[dict[str, Any]]:
    """Per organization, the current billing period and what its calls used of it (two queries)."""
    at = at or timezone.now()
    organizations = list(Organization.objects.select_related("plan").order_by("name", "id"))
    periods = {org.pk: period_bounds(org.billing_period_start, at) for org in organizations}
    starts = {bounds[0] for bounds in periods.values() if bounds}
    totals = {
        (row["organization_id"], row["billing_period_start"]): row
        for row in Call.objects.filter(billing_period_start__in=starts)
        .order_by()
        .values("organization_id", "billing_period_start")
        .annotate(
            calls=Count("pk"),
            billable=Coalesce(Sum("billable_seconds"), 0),
            included=Coalesce(Sum("included_seconds"), 0),
            overage=Coalesce(Sum("overage_seconds"), 0),
        )
    }
    usage = []
    for org in organizations:
        bounds = periods[org.pk]
        row = totals.get((org.pk, bounds[0]), {}) if bounds else {}
        allowance = org.plan.included_minutes * 60
        usage.append(
            {
                "organization": org,
                "plan": org.plan,
                "on_trial": org.on_trial,
                "period_start": bounds[0] if bounds else None,
                "period_end": bounds[1] if bounds else None,
                "calls": row.get("calls", 0),
                "included_minutes": org.plan.included_minutes,
                "included_used_minutes": row.get("included", 0) / 60,
                "remaining_minutes": max(0, allowance - row.get("included", 0)) / 60,
                "overage_minutes": row.get("overage", 0) / 60,
                "billable_minutes": row.get("billable", 0) / 60,
            }
        )
    return usage


def call_log_lines(*, call: Call) -> QuerySet[AgentLog]:
    """The agent log lines of the session that carried the call, oldest first (none once purged, or when
    the agent was deleted). The session is the one whose "session started" or "session ended" line names
    the call; only lines between the call's start and end (a minute either side) are read."""
    if call.agent_id is None:
        return AgentLog.objects.none()
    window_end = (call.ended_at or timezone.now()) + timedelta(minutes=1)
    lines = AgentLog.objects.filter(
        agent_id=call.agent_id, timestamp__gte=call.started_at - timedelta(minutes=1), timestamp__lte=window_end
    )
    session_id = lines.filter(content__callId=str(call.pk)).values_list("session_id", flat=True).first()
    if session_id is None:
        return AgentLog.objects.none()
    return lines.filter(session_id=session_id).order_by("timestamp", "sequence")


def call_session_log(*, call: Call) -> list[AgentLog]:
    return list(call_log_lines(call=call))


def daily_minutes(*, organization_ids: Any = None, days: int = 30, at: Any = None) -> dict[Any, list[dict[str, Any]]]:
    """Per organization, the included and overage seconds of its calls by the day they started (in the
    server's TIME_ZONE), for the `days` days ending today: every day listed, zeros included (one query).
    A call counts on the day it started even when it was billed after midnight."""
    today = timezone.localdate(at or timezone.now())
    first = today - timedelta(days=days - 1)
    calls = Call.objects.filter(started_at__date__gte=first, started_at__date__lte=today)
    if organization_ids is not None:
        calls = calls.filter(organization_id__in=list(organization_ids))
    rows = (
        calls.order_by()
        .annotate(day=TruncDate("started_at"))
        .values("organization_id", "day")
        .annotate(included=Coalesce(Sum("included_seconds"), 0), overage=Coalesce(Sum("overage_seconds"), 0))
    )
    found = {(row["organization_id"], row["day"]): row for row in rows}
    wanted = list(organization_ids) if organization_ids is not None else sorted({key[0] for key in found}, key=str)
    result: dict[Any, list[dict[str, Any]]] = {}
    for organization_id in wanted:
        result[organization_id] = [
            {
                "day": day,
                "included_seconds": found.get((organization_id, day), {}).get("included", 0),
                "overage_seconds": found.get((organization_id, day), {}).get("overage", 0),
            }
            for day in (first + timedelta(days=n) for n in range(days))
        ]
    return result


# --- the dashboard's home page ------------------------------------------------------------------------


def call_counts(*, at: datetime | None = None) -> dict[str, int]:
    """Across organizations: calls started today (server TIME_ZONE), failed calls started in the last
    FAILURE_WINDOW, and live (active) calls."""
    at = at or timezone.now()
    today = day_start(at)
    recent = Call.objects.filter(started_at__gte=min(today, at - FAILURE_WINDOW)).order_by()
    counts = recent.aggregate(
        calls_today=Count("pk", filter=Q(started_at__gte=today)),
        failures=Count("pk", filter=Q(status=CallStatus.FAILED, started_at__gte=at - FAILURE_WINDOW)),
    )
    counts["live"] = Call.objects.filter(status=CallStatus.ACTIVE).order_by().count()
    return counts


def live_calls(*, limit: int = 20) -> list[Mapping[str, Any]]:
    """The newest live (active) calls of every organization, newest first."""
    return list(
        Call.objects.filter(status=CallStatus.ACTIVE)
        .order_by("-started_at", "-id")
        .values("id", "agent_name", "organization__name", "channel", "from_number", "started_at")[:limit]
    )


def busiest_organizations(*, at: datetime | None = None, limit: int = 8) -> list[dict[str, Any]]:
    """The organizations that used the most minutes in their current billing period (usage_by_organization's
    rows), most first."""
    rows = usage_by_organization(at=at)
    return sorted(rows, key=lambda row: (-row["billable_minutes"], row["organization"].name))[:limit]


def newest_calls(*, limit: int = 10) -> list[Call]:
    return list(Call.objects.select_related("organization").order_by("-started_at", "-id")[:limit])


# --- search -------------------------------------------------------------------------------------------

# The start of a call id: hexadecimal digits (dashes allowed), at least this many of them; shorter ones
# would match calls at random.
CALL_ID_START_MIN = 6
_ID_START = re.compile(r"[0-9a-f]+(-[0-9a-f]+)*-?")
_WORD = re.compile(r"\w+")
MAX_SEARCH_WORDS = 8


# SQLite's trigram index (calls/migrations/0005) finds substrings of three characters or more.
_TRIGRAM_MIN = 3
_SQLITE_TRIGRAM_CALLS = (
    "SELECT call_id FROM calls_callmessage WHERE rowid IN "
    "(SELECT rowid FROM calls_callmessage_fts WHERE calls_callmessage_fts MATCH %s)"
)
# A part of a search that matches at most this many rows goes to the database as a list of ids, which the
# indexes of the calls table serve even inside OR; a larger one as a subquery (the table is read anyway).
ID_LIST_MAX = 2000
# What may be part of a phone number as people write it: +1 (415) 555-0100.
_PHONE_TERM = re.compile(r"\+?[\d\s().-]*\d[\d\s().-]*")


def _ids(values: QuerySet) -> list[Any] | QuerySet:
    ids = list(values[: ID_LIST_MAX + 1])
    return list(dict.fromkeys(ids)) if len(ids) <= ID_LIST_MAX else values


def _said(word: str) -> Q:
    """Calls in whose transcript `word` (letters, digits, underscores) was said, read through the
    database's index of message text (calls/migrations/0005). PostgreSQL: full-text search in the `simple`
    configuration (any language), the word also as a prefix ("refund" finds "refunds"). SQLite: the word
    anywhere in a message, case-insensitive, through the FTS5 trigram index (shorter words: a scan)."""
    messages = CallMessage.objects.order_by()
    if connection.vendor == "postgresql":
        # The word is only \w characters: safe as a raw tsquery term.
        query = SearchQuery(f"'{word}':*", search_type="raw", config="simple")
        messages = messages.annotate(words=SearchVector("content", config="simple")).filter(words=query)
        return Q(pk__in=_ids(messages.values_list("call_id", flat=True)))
    if connection.vendor == "sqlite" and len(word) >= _TRIGRAM_MIN:
        match = f'"{word}"'  # one FTS5 string: the word holds no quote
        with connection.cursor() as cursor:
            cursor.execute(f"{_SQLITE_TRIGRAM_CALLS} LIMIT %s", [match, ID_LIST_MAX + 1])
            ids = [row[0] for row in cursor.fetchall()]
        if len(ids) <= ID_LIST_MAX:
            return Q(pk__in=list(dict.fromkeys(ids)))
        return Q(pk__in=RawSQL(_SQLITE_TRIGRAM_CALLS, [match]))  # noqa: S611 - constant SQL, the word a parameter
    return Q(pk__in=_ids(messages.filter(content__icontains=word).values_list("call_id", flat=True)))


def _about(term: str) -> Q:
    """Calls whose agent's or organization's name holds `term` (for a call whose agent was deleted, the
    name the agent had), or, when `term` is written like (part of) a phone number, one of its numbers."""
    agents = Agent.objects.filter(name__icontains=term).values_list("pk", flat=True)
    organizations = Organization.objects.filter(name__icontains=term).values_list("pk", flat=True)
    about = (
        Q(agent_id__in=_ids(agents))
        | Q(agent__isnull=True, agent_name__icontains=term)
        | Q(organization_id__in=_ids(organizations))
    )
    if _PHONE_TERM.fullmatch(term):
        digits = "".join(character for character in term if character.isdigit())
        about |= Q(from_number__contains=digits) | Q(to_number__contains=digits)
    return about


def call_search(*, calls: QuerySet[Call], text: str, transcripts: bool) -> QuerySet[Call]:
    """The calls of `calls` that match `text`, for the dashboard's calls list: a call matches when every
    word is in its agent's or organization's name or its phone numbers; or when `text` is the start of its
    id (at least CALL_ID_START_MIN hexadecimal digits, dashes ignored; a range of the primary key) or its
    organization's id; or, with `transcripts` (the reader may see what was said), when every word was said
    in the call."""
    text = text.strip()
    if not text:
        return calls
    found = functools.reduce(operator.and_, (_about(term) for term in text.split()[:MAX_SEARCH_WORDS]))
    words = list(dict.fromkeys(_WORD.findall(text.lower())))[:MAX_SEARCH_WORDS]
    if transcripts and words:
        found |= functools.reduce(operator.and_, (_said(word) for word in words))
    start = text.lower()
    digits = start.replace("-", "")
    if _ID_START.fullmatch(start) and CALL_ID_START_MIN <= len(digits) <= 32:
        lowest, highest = (uuid.UUID(int=int(digits.ljust(32, fill), 16)) for fill in "0f")
        found |= Q(pk__gte=lowest, pk__lte=highest)
        if len(digits) == 32:
            found |= Q(organization_id=uuid.UUID(digits))
    return calls.filter(found)


# --- post-call analysis (realtime/analysis/ runs it; calls only stores it) -----------------------


@dataclass(frozen=True)
class AnalysisInput:
    """What a call's analysis reads: its agent's plan and language, and its transcript in order."""

    call_id: uuid.UUID
    plan: dict[str, Any] | None  # None: the agent was deleted
    language: str
    messages: list[tuple[str, str]]  # (role, content)
    started_at: datetime


def call_analysis_input(*, call_id: Any) -> AnalysisInput | None:
    """The input of a pending analysis (None when the call is gone or its analysis is not pending)."""
    call = (
        Call.objects.filter(pk=call_id, analysis_status=AnalysisStatus.PENDING)
        .select_related("agent")
        .only("id", "started_at", "agent__analysis_plan", "agent__language")
        .first()
    )
    if call is None:
        return None
    messages = list(
        CallMessage.objects.filter(call_id=call.pk).order_by("occurred_at", "sequence").values_list("role", "content")
    )
    agent = call.agent
    return AnalysisInput(
        call_id=call.pk,
        plan=agent.analysis_plan if agent is not None else None,
        language=agent.language if agent is not None else "en-US",
        messages=messages,
        started_at=call.started_at,
    )


def calls_analysis_pending(*, lease: timedelta, limit: int = 200) -> list[uuid.UUID]:
    """Ids of the pending analyses no worker holds (never taken, or taken longer than `lease` ago: that
    worker died), oldest first: what the upkeep sweep resumes."""
    free = Q(analysis_claimed_at__isnull=True) | Q(analysis_claimed_at__lt=timezone.now() - lease)
    pending = Call.objects.filter(free, analysis_status=AnalysisStatus.PENDING).order_by("ended_at", "id")
    return list(pending.values_list("pk", flat=True)[:limit])
