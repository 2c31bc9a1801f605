"""Reads of call history and agent logs. Every query is scoped to the caller's organization."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Count, Expression, FloatField, IntegerField, OuterRef, Q, Subquery, Sum, Value
from django.db.models.functions import Cast, Coalesce, TruncDate
from django.utils import timezone

from accounts.models import Organization
from agents.models import Agent
from calls.billing import period_bounds
from calls.models import AgentLog, Call, CallStatus
from voiceagent.errors import ApiError
from voiceagent.validation import parse_uuid

# successRate: completed calls / finished (completed + failed) calls started in the last 7 days,
# as a percentage 0-100; 0 when the agent has no finished call in the window.
SUCCESS_RATE_WINDOW = timedelta(days=7)
LOG_WINDOW = timedelta(hours=24)


def calls_today_subquery() -> Expression:
    """Per-agent number of calls started since 00:00 UTC today (any status), for the agent list."""
    today = (
        timezone.now().astimezone(timezone.get_default_timezone()).replace(hour=0, minute=0, second=0, microsecond=0)
    )
    counts = (
        Call.objects.filter(agent=OuterRef("pk"), started_at__gte=today)
        .order_by()
        .values("agent")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counts, output_field=IntegerField()), Value(0))


def success_rate_subquery() -> Expression:
    """Per-agent success rate in percent over the last 7 days (see SUCCESS_RATE_WINDOW), for the agent list."""
    finished = (
        Call.objects.filter(
            agent=OuterRef("pk"),
            started_at__gte=timezone.now() - SUCCESS_RATE_WINDOW,
            status__in=(CallStatus.COMPLETED, CallStatus.FAILED),
        )
        .order_by()
        .values("agent")
        .annotate(
            rate=Cast(Count("pk", filter=Q(status=CallStatus.COMPLETED)), FloatField())
            * Value(100.0)
            / Cast(Count("pk"), FloatField())
        )
        .values("rate")
    )
    return Coalesce(Subquery(finished, output_field=FloatField()), Value(0.0))


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
)


def call_list(*, organization: Organization, agent_id: Any = None, limit: int = 25) -> list[dict[str, Any]]:
    """Newest first. An agent id of another organization simply matches nothing."""
    calls = Call.objects.filter(organization=organization)
    if agent_id is not None:
        calls = calls.filter(agent_id=agent_id)
    return list(calls.order_by("-started_at", "-id").values(*CALL_SUMMARY_COLUMNS)[:limit])


def call_get(*, organization: Organization, call_id: str) -> Call:
    """The organization's call with its transcript, tool log and model usage (four queries)."""
    pk = parse_uuid(call_id, "call")
    call = (
        Call.objects.filter(pk=pk, organization=organization)
        .prefetch_related("messages", "tool_invocations", "llm_usage")
        .first()
    )
    if call is None:
        raise ApiError.not_found("Call not found")
    return call


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


def call_session_log(*, call: Call) -> list[AgentLog]:
    """The agent log lines of the session that carried the call, oldest first (empty once purged, or when
    the agent was deleted). The session is the one whose "session started" or "session ended" line names
    the call; only lines between the call's start and end (a minute either side) are read."""
    if call.agent_id is None:
        return []
    window_end = (call.ended_at or timezone.now()) + timedelta(minutes=1)
    lines = AgentLog.objects.filter(
        agent_id=call.agent_id, timestamp__gte=call.started_at - timedelta(minutes=1), timestamp__lte=window_end
    )
    session_id = lines.filter(content__callId=str(call.pk)).values_list("session_id", flat=True).first()
    if session_id is None:
        return []
    return list(lines.filter(session_id=session_id).order_by("timestamp", "sequence"))


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
