"""What the dashboard's call and usage pages show, prepared for their templates: the call record (the
conversation with times relative to the call's start, tool invocations with pretty-printed request and
response, model usage and billing, the cost ledger, the turn timeline) and the usage page's charts (minutes
per day, included versus overage, and cost per day, as stacked bars in a server-side SVG).

The SVGs' markup is in templates (calls/templates/calls/*.svg, autoescaped); the Python computes their
geometry. Both are deterministic.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from agents.models import Agent
from calls.analytics.selectors import OrganizationCosts
from calls.models import Call, CallDirection, CallHandoff, CallStatus, TransferMode, TransferStatus
from calls.recordings import recording_path
from calls.selectors import call_session_log
from calls.serializers import analysis_item, flow_item, message_agent_id, transfer_item
from calls.timeline import Turn, build_timeline, clock, latency_label, timeline_svg

MAX_SHOWN_CHARS = 20_000  # a tool response can be a whole web page; the page stays readable


@dataclass(frozen=True)
class Bubble:
    role: str
    side: str  # "caller", "agent" or "note" (system and tool messages)
    at: str  # "+0:07.4" from the call's start
    content: str
    remark: str = ""  # what the timeline knows of an agent turn: its latency, a barge-in
    seek: str = ""  # where the turn starts in the recording, seconds ("12.34"): the page's player seeks there
    speaker: str = ""  # the agent's name, on a call that passed between agents (who spoke)


@dataclass(frozen=True)
class HandoffEntry:
    """One handoff of the call as its page shows it: when, from and to whom (names), why."""

    at: str  # "+0:12.3" from the call's start
    from_agent: str
    to_agent: str
    reason: str


@dataclass(frozen=True)
class ToolEntry:
    name: str
    status: str
    at: str
    duration_ms: int
    request: str
    response: str
    truncated: bool


# The stored latency stages as the call page names them (keys of calls.latency.STAGE_KEYS values).
LATENCY_LABELS = (
    ("End of turn (caller silent until the turn is taken)", "endOfTurnMs"),
    ("Recognition", "recognitionMs"),
    ("First model token", "firstTokenMs"),
    ("First audio byte (after the first token)", "firstAudioMs"),
    ("End of speech to first audio (the figure each turn shows)", "totalMs"),
)


def _relative(call: Call, at: Any) -> str:
    return "+" + clock(max(0.0, (at - call.started_at).total_seconds()), tenths=True)


def _pretty(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _remark(turn: Turn | None) -> str:
    if turn is None or turn.role != "agent":
        return ""
    notes = []
    if turn.latency_ms is not None:
        notes.append(f"answered {latency_label(turn)} after the caller stopped speaking")
    if turn.cut:
        notes.append("cut off by the caller" + (" (inferred)" if turn.cut == "inferred" else ""))
    return ", ".join(notes)


def conversation(
    call: Call, messages: Iterable[Any], turns: tuple[Turn, ...] = (), speakers: dict[str, str] | None = None
) -> list[Bubble]:
    """The messages in order; caller and agent turns take their timeline turn's remark (the timeline
    holds one turn per caller or agent message, in the same order). `speakers`: the agents' names by id,
    given when the call passed between agents: each agent message then names who spoke it."""
    side = {"user": "caller", "assistant": "agent"}
    remaining = iter(turns)
    bubbles = []
    for message in messages:
        turn = next(remaining, None) if message.role in side else None
        speaker = ""
        if speakers is not None and message.role == "assistant":
            spoken_by = message_agent_id(message, call.agent_id)
            speaker = _name(speakers, spoken_by) if spoken_by is not None else call.agent_name
        bubbles.append(
            Bubble(
                message.role,
                side.get(message.role, "note"),
                _relative(call, message.occurred_at),
                message.content,
                _remark(turn),
                f"{turn.start:.2f}" if turn is not None else "",
                speaker,
            )
        )
    return bubbles


def agent_names(call: Call, messages: Iterable[Any], handoffs: list[CallHandoff]) -> dict[str, str]:
    """The names of the agents a call's messages and handoffs name, by id (one query). A deleted agent that
    answered the call keeps the name it had when the call started (the call's agent_name; once deleted the
    call no longer names it, its first handoff does); another deleted agent is missing."""
    ids = {str(call.agent_id)} if call.agent_id else set()
    ids |= {str(message.agent_id) for message in messages if message.agent_id}
    for handoff in handoffs:
        ids |= {str(agent_id) for agent_id in (handoff.from_agent_id, handoff.to_agent_id) if agent_id}
    names = {str(pk): name for pk, name in Agent.objects.filter(pk__in=ids).values_list("pk", "name")} if ids else {}
    answered_by = call.agent_id or (handoffs[0].from_agent_id if handoffs else None)
    if answered_by is not None:
        names.setdefault(str(answered_by), call.agent_name)
    return names


def _name(names: dict[str, str], agent_id: Any) -> str:
    if agent_id is None:
        return "unknown agent"
    return names.get(str(agent_id), f"deleted agent {str(agent_id)[:8]}")


def handoff_entries(call: Call, handoffs: Iterable[CallHandoff], names: dict[str, str]) -> list[HandoffEntry]:
    return [
        HandoffEntry(
            at=_relative(call, handoff.at),
            from_agent=_name(names, handoff.from_agent_id),
            to_agent=_name(names, handoff.to_agent_id),
            reason=handoff.reason,
        )
        for handoff in handoffs
    ]


@dataclass(frozen=True)
class FlowView:
    """The call's flow as its page shows it: the path (node ids joined by arrows) and the collected values."""

    path: str
    steps: int
    collected: list[tuple[str, str]]  # (name, value as shown)


def flow_view(call: Call) -> FlowView | None:
    """What the call page shows of the agent's flow; None for a call that ran no flow."""
    flow = flow_item(call)
    if flow is None:
        return None
    collected = [
        (str(name), value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
        for name, value in flow["collected"].items()
    ]
    return FlowView(" → ".join(str(node) for node in flow["path"]), len(flow["path"]), collected)


@dataclass(frozen=True)
class TransferView:
    """The call's last transfer to a person as its page shows it: one line."""

    mode: str
    destination: str
    status: str
    at: str  # "+0:42.1" from the call's start
    meaning: str  # what the status means for this mode, in words


# What each status of a transfer means, by mode (docs/reference/api.md, the call's `transfer`).
TRANSFER_MEANINGS: dict[tuple[str, str], str] = {
    (TransferMode.COLD, TransferStatus.ACCEPTED): "the carrier took the request to dial the destination",
    (TransferMode.COLD, TransferStatus.FAILED): "the carrier refused the request; the call stayed with the agent",
    (TransferMode.WARM, TransferStatus.RINGING): "the person's phone is ringing with the briefing",
    (TransferMode.WARM, TransferStatus.ACCEPTED): "the person pressed 1 and was joined with the caller",
    (TransferMode.WARM, TransferStatus.DECLINED): "the person declined; the caller was back with the agent",
    (TransferMode.WARM, TransferStatus.NO_ANSWER): "the person did not answer; the caller was back with the agent",
    (TransferMode.WARM, TransferStatus.FAILED): "the call to the person failed; the caller was back with the agent",
}


def transfer_view(call: Call) -> TransferView | None:
    """What the call page shows of the call's transfer to a person; None for a call never transferred."""
    transfer = transfer_item(call)
    if transfer is None:
        return None
    at = str(transfer["at"] or "")
    try:
        shown_at = _relative(call, datetime.fromisoformat(at))
    except (TypeError, ValueError):
        shown_at = at
    mode, status = str(transfer["mode"] or ""), str(transfer["status"] or "")
    return TransferView(
        mode=mode,
        destination=str(transfer["destination"] or ""),
        status=status,
        at=shown_at,
        meaning=TRANSFER_MEANINGS.get((mode, status), ""),
    )


def tool_entries(call: Call, invocations: Iterable[Any]) -> list[ToolEntry]:
    entries = []
    for invocation in invocations:
        request = _pretty(invocation.request)
        response = _pretty(invocation.response) if invocation.response else ""
        entries.append(
            ToolEntry(
                name=invocation.tool_name,
                status=invocation.status,
                at=_relative(call, invocation.created_at),
                duration_ms=invocation.duration_ms,
                request=request[:MAX_SHOWN_CHARS],
                response=response[:MAX_SHOWN_CHARS],
                truncated=max(len(request), len(response)) > MAX_SHOWN_CHARS,
            )
        )
    return entries


def usage_totals(call: Call) -> dict[str, Any]:
    rows = list(call.llm_usage.all())
    return {
        "rows": rows,
        "input_tokens": sum(r.input_tokens for r in rows),
        "output_tokens": sum(r.output_tokens for r in rows),
        "input_audio_seconds": sum(r.input_audio_seconds for r in rows),
        "output_audio_seconds": sum(r.output_audio_seconds for r in rows),
    }


def latency_rows(call: Call) -> list[dict[str, Any]]:
    """The call's stored per-turn latency (calls/latency.py) as table rows: stage, p50, p95 (ms)."""
    latency = call.latency or {}
    rows = []
    for label, key in LATENCY_LABELS:
        figures = latency.get(key)
        if isinstance(figures, dict):
            rows.append({"stage": label, "p50": figures.get("p50"), "p95": figures.get("p95")})
    return rows


def call_record(call: Call, *, with_transcript: bool) -> dict[str, Any]:
    """The template context of the call page. Without the transcript permission the messages and the tool
    requests and responses are not passed to the page (the timeline uses only their times, word counts and
    tool names, and is always shown)."""
    log_lines = call_session_log(call=call)
    messages = list(call.messages.all())
    tools = list(call.tool_invocations.all())
    handoffs = list(call.handoffs.all())
    # Who spoke: named only on a call that passed between agents (otherwise the call's agent said it all).
    passed = bool(handoffs) or any(m.agent_id and m.agent_id != call.agent_id for m in messages)
    names = agent_names(call, messages, handoffs) if passed else {}
    entries = handoff_entries(call, handoffs, names)
    timeline = build_timeline(
        started_at=call.started_at,
        ended_at=call.ended_at,
        messages=messages,
        tools=tools,
        log_lines=log_lines,
        handoffs=[(h.at, entry.from_agent, entry.to_agent) for h, entry in zip(handoffs, entries, strict=True)],
    )
    return {
        "with_transcript": with_transcript,
        "conversation": conversation(call, messages, timeline.turns, names if passed else None)
        if with_transcript
        else [],
        # When and between whom (not personal data: shown to every reader of the call; the reason only with
        # the transcript).
        "handoffs": entries,
        # The flow's path (node ids: shown to every reader of the call) and what it collected (what the caller
        # said: only with the transcript).
        "flow": flow_view(call),
        # The last transfer to a person (its number and outcome, not what was said: shown to every reader).
        "transfer": transfer_view(call),
        "tool_entries": tool_entries(call, tools) if with_transcript else [],
        "timeline": timeline,
        "timeline_svg": timeline_svg(timeline),
        "timeline_from_log": bool(log_lines),
        "log_session": log_lines[0].session_id if log_lines else "",
        "usage": usage_totals(call),
        "latency_turns": (call.latency or {}).get("turns", 0),
        "latency_rows": latency_rows(call),
        # The player's source: the signed URL, on this host (the page's media-src is 'self').
        "recording_path": recording_path(call) if with_transcript else None,
        "no_recording": no_recording(call),
        "analysis": analysis_view(call),
        "cost": cost_view(call),
    }


def cost_view(call: Call) -> dict[str, Any]:
    """The call's cost ledger as its page shows it (docs/costs.md): one row per line, numbers written out in
    full, and the total in the call's currency; `priced` false while the call is open (or when it was never
    priced), with why."""
    lines = [
        {
            "product": str(line.get("product", "")),
            "provider": str(line.get("provider", "")),
            "model": line.get("model") or "-",
            "quantity": plain_number(line.get("quantity", 0)),
            "unit": str(line.get("unit", "")),
            "unit_price": plain_number(line.get("unitPrice", 0)),
            "amount": f"{Decimal(str(line.get('amount', 0))):.6f}",
        }
        for line in (call.costs if isinstance(call.costs, list) else [])
        if isinstance(line, dict)
    ]
    if call.cost_total is None:
        why = (
            "Not priced yet: the call is priced when it ends."
            if call.ended_at is None
            else "Not priced: no cost was recorded for this call."
        )
        return {"priced": False, "lines": lines, "why": why}
    return {"priced": True, "lines": lines, "total": f"{call.cost_total:.6f}", "currency": call.cost_currency}


def no_recording(call: Call) -> str:
    """Why the call page has no recording to play, as far as the call tells."""
    unanswered = (CallStatus.NO_ANSWER, CallStatus.BUSY, CallStatus.CANCELED, CallStatus.FAILED)
    if call.direction == CallDirection.OUTBOUND and call.status in unanswered and not call.duration_seconds:
        return "No recording: the call was never answered."
    if call.agent is not None and not call.agent.recording_enabled and not call.recording_key:
        return 'No recording: the agent does not record calls ("Record calls").'
    if call.recording_key and call.recording_saved_at is None:
        return "No recording: it is being stored, or could not be stored (see the agent log)."
    return (
        "No recording: it was deleted, purged after the retention period, or could not be stored (see the agent log)."
    )


def analysis_view(call: Call) -> dict[str, Any] | None:
    """The call's post-call analysis as the call page shows it (None: the call is still active)."""
    analysis = analysis_item(call)
    if analysis is None:
        return None
    data = analysis["structuredData"]
    evaluation = analysis["successEvaluation"]
    result = None
    if evaluation is not None:
        value = evaluation.get("result")
        result = ("pass" if value else "fail") if isinstance(value, bool) else f"{value} / 10"
    return {
        **analysis,
        "fields": [
            {"name": name, "value": value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}
            for name, value in (data or {}).items()
        ],
        "evaluation_result": result,
        "part_statuses": list(analysis["parts"].items()),
    }


# --- the usage and cost charts -------------------------------------------------------------------

CHART_COLOURS = {"included": "#2f6fb3", "overage": "#d98c1f", "cost": "#3b8a57"}
NICE_MAXIMA = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 3000, 6000, 12000, 30000, 60000)


def _chart_max(minutes: float) -> float:
    return next((m for m in NICE_MAXIMA if m >= minutes), minutes)


def _money_max(amount: float) -> float:
    """The chart's top for a peak cost: 1, 2 or 5 times a power of ten (1 for nothing)."""
    if amount <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(amount))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= amount * (1 - 1e-12))


def _minutes(seconds: int) -> str:
    return f"{seconds / 60:.1f}".removesuffix(".0")


def plain_number(value: Any) -> str:
    """A number as written out in full, without exponent or trailing zeros (2.5e-07 -> 0.00000025)."""
    number = Decimal(str(value)).normalize()
    return format(number, "f") if number != 0 else "0"


def money(value: Any) -> str:
    """An amount as the dashboard shows it: to the cent, or in full when below a cent (but not nothing)."""
    amount = Decimal(str(value))
    return f"{amount:.2f}" if amount == 0 or abs(amount) >= Decimal("0.01") else plain_number(amount)


def _calls_on(organization_id: Any, day: date) -> str:
    query = urlencode(
        {
            "organization__id__exact": str(organization_id),
            "started_at__year": day.year,
            "started_at__month": day.month,
            "started_at__day": day.day,
        }
    )
    return f"{reverse('admin:calls_call_changelist')}?{query}"


@dataclass(frozen=True)
class ChartDay:
    """One day of a bar chart: its stacked values (bottom first, in the chart's unit), the tooltip, the link."""

    day: date
    values: tuple[tuple[str, float], ...]  # (kind, value): the kind names the bar's class and colour
    tip: str
    href: str


def bar_chart_svg(
    days: list[ChartDay],
    *,
    chart_class: str,
    title: str,
    legend: str,
    top: Callable[[float], float],
    grid_label: Callable[[float], str],
    width: int = 720,
    height: int = 200,
    labels: bool = True,
) -> SafeString:
    """Stacked bars, one day each, each linking to that day's calls; a day without a value has no bar.
    `top` rounds the highest day up to the chart's top, `grid_label` writes a value of the grid (at 0, half
    and the top). `labels=False` draws a compact chart for tables. The markup is
    calls/templates/calls/usage_chart.svg; this function lays it out."""
    left, bottom, top_margin = (40, 34, 14) if labels else (2, 2, 2)
    plot_w, plot_h = width - left - 6, height - top_margin - bottom
    slot = plot_w / max(1, len(days))
    peak = top(max((sum(value for _, value in d.values) for d in days), default=0)) or 1
    scale = plot_h / peak
    base = top_margin + plot_h
    grid = []
    if labels:
        for fraction in (0, 0.5, 1):
            grid_y = f"{base - plot_h * fraction:.1f}"
            grid.append(
                {
                    "x1": left,
                    "x2": left + plot_w,
                    "y": grid_y,
                    "label_x": left - 4,
                    "label": grid_label(peak * fraction),
                }
            )
    shown = []
    for number, day in enumerate(days):
        x = left + number * slot + slot * 0.15
        label = None
        if labels and (number % 5 == 0 or number == len(days) - 1):
            label = {"x": f"{x + slot * 0.35:.1f}", "y": base + 12, "text": day.day.strftime("%b %d")}
        bars = []
        y: float = base
        for kind, value in day.values:
            if value == 0:
                continue
            h = value * scale
            y -= h
            bars.append(
                {
                    "kind": kind,
                    "x": f"{x:.1f}",
                    "y": f"{y:.1f}",
                    "width": f"{slot * 0.7:.1f}",
                    "height": f"{max(h, 1.0):.1f}",
                    "fill": CHART_COLOURS[kind],
                }
            )
        shown.append(
            {
                "label": label,
                "bars": bars,  # none on a day without a value
                "date": day.day.isoformat(),
                "href": day.href if bars else "",
                "tip": day.tip,
            }
        )
    context = {
        "chart_class": chart_class,
        "width": width,
        "height": height,
        "title": title,
        "grid": grid,
        "legend": {"x": left, "y": height - 4, "text": legend} if labels else None,
        "days": shown,
        "base": {"x1": left, "x2": left + plot_w, "y": base},
    }
    # No whitespace between the elements ({% spaceless %} and the strip): deterministic bytes.
    return mark_safe(render_to_string("calls/usage_chart.svg", context).strip())  # noqa: S308 - autoescaped


def usage_chart_svg(
    days: list[dict[str, Any]], *, organization_id: Any, width: int = 720, height: int = 200, labels: bool = True
) -> SafeString:
    """Minutes per day as stacked bars (included at the bottom, overage on top), each linking to that day's
    calls of the organization."""
    chart_days = [
        ChartDay(
            day["day"],
            (("included", day["included_seconds"] / 60), ("overage", day["overage_seconds"] / 60)),
            f"{day['day'].isoformat()}: {_minutes(day['included_seconds'])} included + "
            f"{_minutes(day['overage_seconds'])} overage minutes",
            _calls_on(organization_id, day["day"]),
        )
        for day in days
    ]
    included = _minutes(sum(d["included_seconds"] for d in days))
    overage = _minutes(sum(d["overage_seconds"] for d in days))
    return bar_chart_svg(
        chart_days,
        chart_class="usage-chart",
        title=f"Minutes per day, last {len(days)} days: {included} included, {overage} overage",
        legend=f"Minutes per day by the day calls started ({settings.TIME_ZONE}); blue: included, orange: overage.",
        top=_chart_max,
        grid_label=lambda minutes: _minutes(round(minutes * 60)),
        width=width,
        height=height,
        labels=labels,
    )


def cost_chart_svg(
    days: list[dict[str, Any]],
    *,
    currency: str,
    organization_id: Any,
    width: int = 720,
    height: int = 200,
    labels: bool = True,
) -> SafeString:
    """The cost of the calls priced so far per UTC day they started (calls.analytics.selectors
    organization_costs: {"day", "cost"}), in `currency`, each bar linking to that day's calls."""
    chart_days = [
        ChartDay(
            day["day"],
            (("cost", float(day["cost"])),),
            f"{day['day'].isoformat()}: {money(day['cost'])} {currency}",
            _calls_on(organization_id, day["day"]),
        )
        for day in days
    ]
    total = money(sum((day["cost"] for day in days), Decimal(0)))
    return bar_chart_svg(
        chart_days,
        chart_class="cost-chart",
        title=f"Cost per day, last {len(days)} days: {total} {currency}".rstrip(),
        legend=f"Cost per day ({currency or 'no call priced'}) of the calls priced so far, by the UTC day they started.",
        top=_money_max,
        grid_label=plain_number,
        width=width,
        height=height,
        labels=labels,
    )


AGENTS_SHOWN = 5  # the usage page lists the agents of the highest cost, and how many more


def usage_cost(costs: OrganizationCosts, *, organization_id: Any) -> dict[str, Any]:
    """What the usage page shows of an organization's cost over the chart's days: the total, a small chart of
    cost per day, the agents of the highest cost (each linking to its calls), the other currencies' totals."""
    calls = reverse("admin:calls_call_changelist")
    agents = [
        {
            "name": agent.name,
            "href": f"{calls}?{urlencode({'agent': str(agent.agent_id)})}" if agent.agent_id is not None else "",
            "cost": money(agent.cost),
            "calls": agent.calls,
        }
        for agent in costs.agents[:AGENTS_SHOWN]
    ]
    return {
        "currency": costs.currency,
        "total": money(costs.total),
        "chart": cost_chart_svg(
            costs.days, currency=costs.currency, organization_id=organization_id, width=180, height=36, labels=False
        ),
        "agents": agents,
        "more_agents": max(0, len(costs.agents) - AGENTS_SHOWN),
        "other_currencies": [f"{money(amount)} {name}" for name, amount in costs.other_currencies.items()],
    }
