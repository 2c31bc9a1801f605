"""The turn timeline of one call, drawn as a small server-side SVG for the dashboard's call page.

What the record holds: a message's `occurred_at` is when the engine committed the turn, which is the
END of it (a caller turn when it was recognised, an agent turn when it had played out or was cut); a
tool invocation is written when it finished, with its duration. So a turn's start is derived:

- an agent turn answering a caller turn starts `latencyMs` after that caller turn when the agent log's
  "assistant turn" line of the call's session measured it (a measured latency);
- otherwise a turn is taken to last as long as its words take to say (150 words a minute, at least half
  a second), and not to start before the previous turn of the same speaker ended (an estimate, shown
  with "~" where it yields a latency).

Barge-ins come from the log's "assistant turn cut" lines; when the session has no log lines (they are
purged after AGENT_LOG_RETENTION_HOURS) an agent turn counts as cut (inferred) when the next caller turn
ended sooner after it than even fast speech (200 words a minute) could have said it, i.e. the caller was
already speaking before the agent stopped.

The SVG carries no message text (only roles, times, tool names and latencies), so it can be shown to
staff who may not read transcripts. Every text and attribute goes through `format_html` (escaped), and
the same record always gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

SPEAKING_SECONDS_PER_WORD = 0.4  # 150 words a minute
MIN_TURN_SECONDS = 0.5
FAST_SECONDS_PER_WORD = 0.3  # 200 words a minute: a caller turn cannot have been said faster
LOG_MATCH_SECONDS = 2.0  # an assistant message and its log line are written in the same instant

WIDTH = 960
LEFT = 64  # the row labels
RIGHT = 16
ROW_HEIGHT = 18
ROW_GAP = 14
TOP = 22  # room for the latency labels above the agent row
ROWS = ("caller", "agent", "tools")
ROW_TITLES = {"caller": "Caller", "agent": "Agent", "tools": "Tools"}
COLOURS = {"caller": "#2f6fb3", "agent": "#2e8b57", "tool": "#d98c1f", "tool-failed": "#b23a2e", "cut": "#b23a2e"}
TICK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)
MAX_TICKS = 12


@dataclass(frozen=True)
class Turn:
    index: int  # 1-based position among the turns of its row
    role: str  # "caller" or "agent"
    start: float  # seconds from the call's start
    end: float
    cut: str = ""  # "" (played out), "log" (the agent log says it was cut) or "inferred"
    latency_ms: int | None = None  # agent turns answering a caller turn
    latency_measured: bool = False


@dataclass(frozen=True)
class ToolSpan:
    name: str
    status: str
    start: float
    end: float


@dataclass(frozen=True)
class CutMark:
    """A barge-in that left no agent message (the caller cut in before a word was heard)."""

    at: float


@dataclass(frozen=True)
class Timeline:
    turns: tuple[Turn, ...]
    tools: tuple[ToolSpan, ...]
    lone_cuts: tuple[CutMark, ...]
    total: float  # seconds shown on the axis

    @property
    def cut_turns(self) -> int:
        return sum(1 for turn in self.turns if turn.cut) + len(self.lone_cuts)


def _seconds(at: datetime, origin: datetime) -> float:
    return max(0.0, (at - origin).total_seconds())


def _speaking(text: str, per_word: float = SPEAKING_SECONDS_PER_WORD) -> float:
    return max(MIN_TURN_SECONDS, len(text.split()) * per_word)


def _match_log_lines(assistant: Sequence[Any], lines: Sequence[Any]) -> tuple[dict[int, Any], list[Any]]:
    """Pair assistant messages with their "assistant turn" / "assistant turn cut" lines by time.

    Returns {message position: line} and the cut lines that match no message (nothing was heard)."""
    turn_lines = [line for line in lines if line.content.get("message") in ("assistant turn", "assistant turn cut")]
    used: set[int] = set()
    pairs: dict[int, Any] = {}
    for position, message in enumerate(assistant):
        best, best_gap = None, LOG_MATCH_SECONDS
        for number, line in enumerate(turn_lines):
            gap = abs((message.occurred_at - line.timestamp).total_seconds())
            if number not in used and gap <= best_gap:
                best, best_gap = number, gap
        if best is not None:
            used.add(best)
            pairs[position] = turn_lines[best]
    lone = [
        line
        for number, line in enumerate(turn_lines)
        if number not in used and line.content.get("message") == "assistant turn cut"
    ]
    return pairs, lone


def build_timeline(
    *,
    started_at: datetime,
    ended_at: datetime | None,
    messages: Iterable[Any],
    tools: Iterable[Any],
    log_lines: Sequence[Any] = (),
) -> Timeline:
    """Turns from CallMessage-like rows (role, content, occurred_at), tool spans from ToolInvocation-like
    rows (tool_name, status, duration_ms, created_at), barge-ins and latencies from AgentLog-like rows
    (timestamp, content) of the call's session."""
    spoken = [m for m in messages if m.role in ("user", "assistant")]
    assistant = [m for m in spoken if m.role == "assistant"]
    pairs, lone = _match_log_lines(assistant, log_lines)
    line_of = {id(assistant[position]): line for position, line in pairs.items()}

    turns: list[Turn] = []
    row_end = {"caller": 0.0, "agent": 0.0}
    counts = {"caller": 0, "agent": 0}
    previous: Turn | None = None
    for position, message in enumerate(spoken):
        role = "caller" if message.role == "user" else "agent"
        end = _seconds(message.occurred_at, started_at)
        line = line_of.get(id(message))
        latency: int | None = None
        measured = False
        answering = previous is not None and previous.role == "caller"
        logged_latency = line.content.get("latencyMs") if line is not None else None
        if role == "agent" and answering and previous is not None and isinstance(logged_latency, int | float):
            start = min(end, previous.end + logged_latency / 1000)
            latency, measured = round(logged_latency), True
        else:
            start = max(row_end[role], end - _speaking(message.content))
            start = min(start, end)
            if role == "agent" and answering and previous is not None:
                latency = max(0, round((start - previous.end) * 1000))
        cut = ""
        if role == "agent":
            if line is not None and line.content.get("message") == "assistant turn cut":
                cut = "log"
            elif not log_lines and position + 1 < len(spoken) and spoken[position + 1].role == "user":
                reply = spoken[position + 1]
                gap = (reply.occurred_at - message.occurred_at).total_seconds()
                if gap < _speaking(reply.content, FAST_SECONDS_PER_WORD):
                    cut = "inferred"
        counts[role] += 1
        turn = Turn(counts[role], role, start, end, cut, latency, measured)
        turns.append(turn)
        row_end[role] = end
        previous = turn

    spans = []
    for invocation in tools:
        end = _seconds(invocation.created_at, started_at)
        spans.append(
            ToolSpan(invocation.tool_name, invocation.status, max(0.0, end - invocation.duration_ms / 1000), end)
        )
    cuts = tuple(CutMark(_seconds(line.timestamp, started_at)) for line in lone)
    ends = [0.0, *(t.end for t in turns), *(s.end for s in spans), *(c.at for c in cuts)]
    if ended_at is not None:
        ends.append(_seconds(ended_at, started_at))
    return Timeline(tuple(turns), tuple(spans), cuts, max(1.0, max(ends)))


def clock(seconds: float, *, tenths: bool = False) -> str:
    """0:07, 1:05, 1:02:03 (with tenths: 0:07.4)."""
    whole, tenth = divmod(round(seconds * 10), 10) if tenths else (int(seconds), 0)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
    return f"{text}.{tenth}" if tenths else text


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}{'' if number == 1 else 's'}"


def latency_label(turn: Turn) -> str:
    if turn.latency_ms is None:
        return ""
    text = f"{turn.latency_ms} ms" if turn.latency_ms < 1000 else f"{turn.latency_ms / 1000:.1f} s"
    return text if turn.latency_measured else "~" + text


def timeline_svg(timeline: Timeline) -> SafeString:
    span = WIDTH - LEFT - RIGHT
    scale = span / timeline.total

    def x(seconds: float) -> str:
        return f"{LEFT + seconds * scale:.1f}"

    def w(start: float, end: float) -> str:
        return f"{max(2.0, (end - start) * scale):.1f}"  # a zero-length turn is still visible

    def row_y(row: str) -> int:
        return TOP + ROWS.index(row) * (ROW_HEIGHT + ROW_GAP)

    axis_y = row_y("tools") + ROW_HEIGHT + 10
    height = axis_y + 34
    parts: list[SafeString] = [
        format_html(
            '<svg class="call-timeline" xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" '
            'viewBox="0 0 {} {}" role="img" aria-labelledby="call-timeline-title" font-family="sans-serif" '
            'font-size="12">',
            WIDTH,
            height,
            WIDTH,
            height,
        ),
        format_html(
            '<title id="call-timeline-title">Turn timeline: {}, {}, {}, {}</title>',
            _count(sum(1 for t in timeline.turns if t.role == "caller"), "caller turn"),
            _count(sum(1 for t in timeline.turns if t.role == "agent"), "agent turn"),
            _count(len(timeline.tools), "tool call"),
            _count(timeline.cut_turns, "barge-in"),
        ),
    ]
    for row in ROWS:
        y = row_y(row)
        parts.append(
            format_html(
                '<rect x="{}" y="{}" width="{}" height="{}" fill="#f2f2f2"/><text x="{}" y="{}" fill="#333">{}</text>',
                LEFT,
                y,
                span,
                ROW_HEIGHT,
                6,
                y + 13,
                ROW_TITLES[row],
            )
        )
    for turn in timeline.turns:
        y = row_y(turn.role)
        cut_note = (
            {"log": ", cut by the caller (barge-in)", "inferred": ", cut by the caller (inferred)"}[turn.cut]
            if (turn.cut)
            else ""
        )
        parts.append(
            format_html(
                '<rect class="turn {}" data-turn="{}" x="{}" y="{}" width="{}" height="{}" rx="2" fill="{}">'
                "<title>{} turn {}: {} to {}{}</title></rect>",
                turn.role,
                turn.index,
                x(turn.start),
                y,
                w(turn.start, turn.end),
                ROW_HEIGHT,
                COLOURS[turn.role],
                ROW_TITLES[turn.role],
                turn.index,
                clock(turn.start, tenths=True),
                clock(turn.end, tenths=True),
                cut_note,
            )
        )
        label = latency_label(turn)
        if label:
            parts.append(
                format_html(
                    '<text class="latency" x="{}" y="{}" fill="#444" font-size="11">{}</text>',
                    x(turn.start),
                    y - 3,
                    label,
                )
            )
        if turn.cut:
            parts.append(_cut_marker(x(turn.end), y, "inferred" if turn.cut == "inferred" else "log"))
    for mark in timeline.lone_cuts:
        parts.append(_cut_marker(x(mark.at), row_y("agent"), "log"))
    tool_y = row_y("tools")
    for number, tool in enumerate(timeline.tools, start=1):
        failed = tool.status != "success"
        parts.append(
            format_html(
                '<rect class="tool {}" data-tool="{}" x="{}" y="{}" width="{}" height="{}" rx="2" fill="{}">'
                "<title>{} ({}): {} to {}, {} ms</title></rect>",
                "failed" if failed else "ok",
                number,
                x(tool.start),
                tool_y,
                w(tool.start, tool.end),
                ROW_HEIGHT,
                COLOURS["tool-failed" if failed else "tool"],
                tool.name,
                tool.status,
                clock(tool.start, tenths=True),
                clock(tool.end, tenths=True),
                round((tool.end - tool.start) * 1000),
            )
        )
    parts.append(
        format_html('<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#999"/>', LEFT, axis_y, LEFT + span, axis_y)
    )
    step = next((s for s in TICK_STEPS if timeline.total / s <= MAX_TICKS), TICK_STEPS[-1])
    tick = 0
    while tick <= timeline.total + 1e-9:
        parts.append(
            format_html(
                '<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#999"/>'
                '<text x="{}" y="{}" fill="#555" text-anchor="middle">{}</text>',
                x(tick),
                axis_y,
                x(tick),
                axis_y + 4,
                x(tick),
                axis_y + 16,
                clock(tick),
            )
        )
        tick += step
    parts.append(
        format_html(
            '<text x="{}" y="{}" fill="#555">{}</text>',
            LEFT,
            axis_y + 30,
            "Bars end when the record says the turn ended; starts are measured (latency in ms) or estimated "
            "(~). Red mark: the caller cut the agent off (barge-in); dashed: inferred.",
        )
    )
    parts.append(mark_safe("</svg>"))
    # Every part is a SafeString built by format_html, which escaped its arguments.
    return mark_safe("".join(parts))  # noqa: S308 - every part built by format_html (comment above)


def _cut_marker(x: str, y: int, kind: str) -> SafeString:
    dash = ' stroke-dasharray="3,2"' if kind == "inferred" else ""
    title = "Barge-in: the caller cut the agent off" + (
        " (inferred from the message times)" if kind == "inferred" else ""
    )
    return format_html(
        '<g class="cut-marker {}"><line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="2"{}/>'
        '<path d="M{} {} l-4 -6 h8 z" fill="{}"/><title>{}</title></g>',
        kind,
        x,
        y - 4,
        x,
        y + ROW_HEIGHT + 4,
        COLOURS["cut"],
        mark_safe(dash),  # noqa: S308 - one of two constants
        x,
        y - 2,
        COLOURS["cut"],
        title,
    )
