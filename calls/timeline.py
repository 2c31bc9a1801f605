"""The turn timeline of one call, drawn as a small server-side SVG for the dashboard's call page.

What the record holds: a message's `occurred_at` is when the engine committed the turn, which is the
END of it (a caller turn when it was recognised, an agent turn when it had played out or was cut); a
tool invocation is written when it finished, with its duration. So a turn's start is derived:

- an agent turn answering a caller turn starts `answerStartMs` after that caller turn when the agent log's
  "assistant turn" line of the call's session measured it (a measured latency, labelled with the line's
  `latencyMs`: the caller's last speech until the answer's first audio, the call's `totalMs`; an older
  line without `answerStartMs` is placed by its `latencyMs`);
- otherwise a turn is taken to last as long as its words take to say (150 words a minute, at least half
  a second), and not to start before the previous turn of the same speaker ended (an estimate, shown
  with "~" where it yields a latency).

Interruptions come from the log's "interruption" lines (the engine writes one per stretch of caller speech
over the agent, with `kind` and `speechMs`): each is a mark on the caller row at the line's time, with the
speech it held drawn before it, shaped and coloured by kind (real: the caller's words cut the agent; false:
speech cut the agent but held no words; backchannel: an "okay" that did not cut it; ignored: a noise that did
not), and counted per kind in the legend.

A handoff (the call passing from one agent to another) is a purple line across the caller and agent rows,
titled with the two agents' names.

Barge-ins come from the log's "assistant turn cut" lines; when the session has no log lines (they are
purged after AGENT_LOG_RETENTION_HOURS) an agent turn counts as cut (inferred) when the next caller turn
ended sooner after it than even fast speech (200 words a minute) could have said it, i.e. the caller was
already speaking before the agent stopped.

The SVG carries no message text (only roles, times, tool names and latencies), so it can be shown to
staff who may not read transcripts. The markup is a template (calls/templates/calls/timeline.svg), which
escapes every text and attribute; this module computes the geometry. The same record always gives the same
bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.template.loader import render_to_string
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
COLOURS = {
    "caller": "#2f6fb3",
    "agent": "#2e8b57",
    "tool": "#d98c1f",
    "tool-failed": "#b23a2e",
    "tool-cancelled": "#9e9e9e",
    "cut": "#b23a2e",
    "handoff": "#6a3d9a",
}
# The kinds of the agent log's "interruption" lines, in legend order, with their colour and what they mean.
INTERRUPTION_KINDS = ("real", "false", "backchannel", "ignored")
INTERRUPTION_COLOURS = {"real": "#b23a2e", "false": "#e07b00", "backchannel": "#2e8b57", "ignored": "#8a8a8a"}
INTERRUPTION_NOTES = {
    "real": "the caller's words cut the agent",
    "false": "cut the agent but held no words",
    "backchannel": "a backchannel: the agent went on",
    "ignored": "a noise: the agent went on",
}
LEGEND_ROW = 16
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
class InterruptionMark:
    """Caller speech over the agent, as the engine judged it (an "interruption" line of the agent log)."""

    kind: str  # one of INTERRUPTION_KINDS
    at: float  # when the line was written
    speech_ms: int | None


@dataclass(frozen=True)
class HandoffMark:
    """The call passed from one agent to another (a CallHandoff): a mark across the agent row."""

    at: float
    from_agent: str  # names
    to_agent: str


@dataclass(frozen=True)
class Timeline:
    turns: tuple[Turn, ...]
    tools: tuple[ToolSpan, ...]
    lone_cuts: tuple[CutMark, ...]
    total: float  # seconds shown on the axis
    interruptions: tuple[InterruptionMark, ...] = ()
    handoffs: tuple[HandoffMark, ...] = ()

    @property
    def cut_turns(self) -> int:
        return sum(1 for turn in self.turns if turn.cut) + len(self.lone_cuts)

    @property
    def interruption_counts(self) -> dict[str, int]:
        """Interruptions per kind, every kind listed (INTERRUPTION_KINDS order)."""
        return {kind: sum(1 for mark in self.interruptions if mark.kind == kind) for kind in INTERRUPTION_KINDS}


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
    handoffs: Iterable[tuple[datetime, str, str]] = (),
) -> Timeline:
    """Turns from CallMessage-like rows (role, content, occurred_at), tool spans from ToolInvocation-like
    rows (tool_name, status, duration_ms, created_at), barge-ins and latencies from AgentLog-like rows
    (timestamp, content) of the call's session, handoff marks from (at, from agent's name, to agent's name)."""
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
        logged_start = line.content.get("answerStartMs", logged_latency) if line is not None else None
        if (
            role == "agent"
            and answering
            and previous is not None
            and isinstance(logged_latency, int | float)
            and isinstance(logged_start, int | float)
        ):
            start = min(end, previous.end + logged_start / 1000)
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
    interruptions = tuple(_interruptions(log_lines, started_at))
    passes = tuple(HandoffMark(_seconds(at, started_at), before, after) for at, before, after in handoffs)
    ends = [0.0, *(t.end for t in turns), *(s.end for s in spans), *(c.at for c in cuts)]
    ends.extend(mark.at for mark in interruptions)
    ends.extend(mark.at for mark in passes)
    if ended_at is not None:
        ends.append(_seconds(ended_at, started_at))
    return Timeline(tuple(turns), tuple(spans), cuts, max(1.0, max(ends)), interruptions, passes)


def _interruptions(lines: Sequence[Any], started_at: datetime) -> Iterable[InterruptionMark]:
    """The "interruption" lines of a known kind (a line of another kind, written by a later engine, is left out)."""
    for line in lines:
        content = line.content
        if content.get("message") != "interruption" or content.get("kind") not in INTERRUPTION_KINDS:
            continue
        speech = content.get("speechMs")
        speech_ms = round(speech) if isinstance(speech, int | float) and not isinstance(speech, bool) else None
        yield InterruptionMark(content["kind"], _seconds(line.timestamp, started_at), speech_ms)


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
    """The timeline drawn by calls/templates/calls/timeline.svg; this function lays it out (every
    position, colour and text), the template holds the markup and escapes every text and attribute."""
    span = WIDTH - LEFT - RIGHT
    scale = span / timeline.total

    def x(seconds: float) -> str:
        return f"{LEFT + seconds * scale:.1f}"

    def w(start: float, end: float) -> str:
        return f"{max(2.0, (end - start) * scale):.1f}"  # a zero-length turn is still visible

    def row_y(row: str) -> int:
        return TOP + ROWS.index(row) * (ROW_HEIGHT + ROW_GAP)

    axis_y = row_y("tools") + ROW_HEIGHT + 10
    turns = []
    for turn in timeline.turns:
        y = row_y(turn.role)
        turns.append(
            {
                "role": turn.role,
                "index": turn.index,
                "x": x(turn.start),
                "y": y,
                "width": w(turn.start, turn.end),
                "height": ROW_HEIGHT,
                "fill": COLOURS[turn.role],
                "row_title": ROW_TITLES[turn.role],
                "start": clock(turn.start, tenths=True),
                "end": clock(turn.end, tenths=True),
                "seek": f"{turn.start:.2f}",
                "cut_note": _CUT_NOTES[turn.cut] if turn.cut else "",
                "latency": latency_label(turn),
                "latency_y": y - 3,
                "cut": _cut_marker(x(turn.end), y, "inferred" if turn.cut == "inferred" else "log")
                if turn.cut
                else None,
            }
        )
    tools = []
    for number, tool in enumerate(timeline.tools, start=1):
        # A cancelled request (its result no longer needed) is not a failure of the tool.
        outcome = {"success": "ok", "cancelled": "cancelled"}.get(tool.status, "failed")
        tools.append(
            {
                "outcome": outcome,
                "number": number,
                "x": x(tool.start),
                "y": row_y("tools"),
                "width": w(tool.start, tool.end),
                "height": ROW_HEIGHT,
                "fill": COLOURS[{"ok": "tool", "cancelled": "tool-cancelled"}.get(outcome, "tool-failed")],
                "name": tool.name,
                "status": tool.status,
                "start": clock(tool.start, tenths=True),
                "end": clock(tool.end, tenths=True),
                "duration_ms": round((tool.end - tool.start) * 1000),
            }
        )
    interruptions = [_interruption_mark(mark, x, row_y("caller"), scale) for mark in timeline.interruptions]
    counts = timeline.interruption_counts
    legend_y = axis_y + 30
    interruption_legend = None
    if timeline.interruptions:
        interruption_legend = {
            "y": legend_y + LEGEND_ROW,
            "x": LEFT,
            "items": [
                {
                    "kind": kind,
                    "count": counts[kind],
                    "x": LEFT + 90 + slot * 150,
                    "colour": INTERRUPTION_COLOURS[kind],
                    "label": f"{counts[kind]} {kind}",
                    "symbol": _symbol(kind, LEFT + 90 + slot * 150 + 5, legend_y + LEGEND_ROW - 4),
                }
                for slot, kind in enumerate(INTERRUPTION_KINDS)
            ],
        }
    step = next((s for s in TICK_STEPS if timeline.total / s <= MAX_TICKS), TICK_STEPS[-1])
    ticks = []
    tick = 0
    while tick <= timeline.total + 1e-9:
        ticks.append({"x": x(tick), "label": clock(tick)})
        tick += step
    title = [
        _count(sum(1 for t in timeline.turns if t.role == "caller"), "caller turn"),
        _count(sum(1 for t in timeline.turns if t.role == "agent"), "agent turn"),
        _count(len(timeline.tools), "tool call"),
        _count(timeline.cut_turns, "barge-in"),
    ]
    if timeline.handoffs:
        title.append(_count(len(timeline.handoffs), "handoff"))
    if timeline.interruptions:
        kinds = ", ".join(f"{counts[kind]} {kind}" for kind in INTERRUPTION_KINDS)
        title.append(f"{_count(len(timeline.interruptions), 'interruption')} ({kinds})")
    context = {
        "width": WIDTH,
        "height": axis_y + 34 + (LEGEND_ROW if timeline.interruptions else 0),
        "title": ", ".join(title),
        "rows": [
            {
                "x": LEFT,
                "y": row_y(row),
                "width": span,
                "height": ROW_HEIGHT,
                "label_x": 6,
                "label_y": row_y(row) + 13,
                "title": ROW_TITLES[row],
            }
            for row in ROWS
        ],
        "turns": turns,
        "lone_cuts": [_cut_marker(x(mark.at), row_y("agent"), "log") for mark in timeline.lone_cuts],
        "tools": tools,
        "interruptions": interruptions,
        "interruption_legend": interruption_legend,
        "handoffs": [
            {
                "x": x(mark.at),
                "top": row_y("caller") - 4,
                "bottom": row_y("agent") + ROW_HEIGHT + 4,
                "colour": COLOURS["handoff"],
                "note": f"Handoff at {clock(mark.at, tenths=True)}: {mark.from_agent} to {mark.to_agent}",
            }
            for mark in timeline.handoffs
        ],
        "axis": {
            "x1": LEFT,
            "x2": LEFT + span,
            "y": axis_y,
            "tick_y": axis_y + 4,
            "label_y": axis_y + 16,
            "legend_y": legend_y,
        },
        "ticks": ticks,
    }
    # The template's own whitespace is dropped ({% spaceless %} and the strip): the same record gives the
    # same bytes, with no text nodes between the SVG's elements.
    return mark_safe(render_to_string("calls/timeline.svg", context).strip())  # noqa: S308 - autoescaped


_CUT_NOTES = {"log": ", cut by the caller (barge-in)", "inferred": ", cut by the caller (inferred)"}


def _cut_marker(x: str, y: int, kind: str) -> dict[str, Any]:
    """A barge-in mark (calls/templates/calls/timeline_cut.svg): a line across the agent row at `x`,
    dashed when inferred."""
    return {"kind": kind, "x": x, "top": y - 4, "bottom": y + ROW_HEIGHT + 4, "tip": y - 2, "colour": COLOURS["cut"]}


def _symbol(kind: str, cx: float, cy: float) -> dict[str, Any]:
    """An interruption's shape: real a filled diamond, false a hollow diamond, backchannel a filled circle,
    ignored a small hollow circle (told apart without colour too)."""
    colour = INTERRUPTION_COLOURS[kind]
    if kind in ("real", "false"):
        path = f"M{cx:.1f} {cy - 5:.1f} l5 5 l-5 5 l-5 -5 z"
        return {"shape": "path", "d": path, "fill": colour if kind == "real" else "#fff", "stroke": colour}
    radius = 4 if kind == "backchannel" else 3
    return {
        "shape": "circle",
        "cx": f"{cx:.1f}",
        "cy": f"{cy:.1f}",
        "r": radius,
        "fill": colour if kind == "backchannel" else "#fff",
        "stroke": colour,
    }


def _interruption_mark(mark: InterruptionMark, x: Any, caller_y: int, scale: float) -> dict[str, Any]:
    """An interruption on the caller row (calls/templates/calls/timeline.svg): the speech it held as a thin
    band ending at the mark, and the kind's symbol above the row."""
    speech_s = (mark.speech_ms or 0) / 1000
    start = max(0.0, mark.at - speech_s)
    at_x = float(x(mark.at))
    speech = f", {mark.speech_ms} ms of speech" if mark.speech_ms is not None else ""
    return {
        "kind": mark.kind,
        "band_x": x(start),
        "band_y": caller_y + ROW_HEIGHT - 4,
        "band_width": f"{max(2.0, (mark.at - start) * scale):.1f}",
        "colour": INTERRUPTION_COLOURS[mark.kind],
        "symbol": _symbol(mark.kind, at_x, caller_y - 1),
        "note": f"Interruption ({mark.kind}) at {clock(mark.at, tenths=True)}{speech}: {INTERRUPTION_NOTES[mark.kind]}",
    }
