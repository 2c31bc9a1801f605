"""The `embedded` brain: an offline, deterministic, rule-based responder (not a language model).

It understands English caller turns by word matching (understanding.py), fills tool arguments from
the spoken words (arguments.py, spoken.py) and answers from a phrase table and the agent's own
configuration (replies.py). Each caller turn is handled by the first rule that applies:

1. nothing intelligible -> "Sorry, I did not catch that...";
2. a request for a person -> `transfer_call` when offered (with `reason` when its schema has one),
   else a polite "I can't transfer you" and an offer to help;
3. "say that again" -> the last answer repeated (a pending question stays pending);
4. an answer to the question asked for a pending call's missing argument -> the argument is filled
   and the next missing one asked, or the call made; "never mind"/"cancel" drops the pending call,
   and so does a turn that asks for another tool, a question ("what are your opening hours?") or a
   second reply without the value;
5. the answer to "would you like to A or B?";
5a. keys asked for ("press 1", "enter 1 2 3 4 pound"; keys.py) with `send_digits` offered (phone
   calls) -> `send_digits`, then "Done." once the keys are sent;
6. only greetings, thanks, goodbyes or "yes" -> a short polite answer; a clear farewell ("that's all,
   goodbye"; understanding.is_farewell) with `end_call` offered -> the goodbye, then `end_call`;
7. a custom tool whose words clearly match -> called with the arguments said, or the first missing
   required argument asked for (one at a time);
8. new values for the last lookup ("what about tomorrow?" after a forecast) -> that tool again with
   them, for tools named for reading (get, check, find...) only;
9. "what can you do", "who are you" (the whole question) -> the self-description;
10. a question (not a request) the facts of the agent's instructions answer -> those sentences (answers.answer_from_prompt);
11. `search_knowledge` offered -> called with the turn as query; when the best passage's score reaches
    `KNOWLEDGE_MIN_SCORE`, what it says in answer is spoken (answers.speak_passage: a Q&A passage's
    matching answer without labels, else its best sentences with their figures; never a heading, the
    title or a question; about 35 words), else "Sorry, I don't know that", one or two topics of the
    documents (answers.passage_topics) and what the tools do;
12. otherwise what the agent can do, from its tools and instructions.

A trailing tool turn in the history is a result to speak (replies.speak_result); a transfer result is
left to the session shell, which speaks the handoff. State kept between turns: the pending call
(tool, arguments found, property asked), the tools offered in a "which one" question and the last
custom call (for follow-ups).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from realtime.engine.brain.embedded import answers, replies
from realtime.engine.brain.embedded.arguments import Parameter, extract, parameters_of
from realtime.engine.brain.embedded.keys import keys_asked
from realtime.engine.brain.embedded.replies import phrase
from realtime.engine.brain.embedded.spoken import Utterance
from realtime.engine.brain.embedded.understanding import (
    NATIVE_TOOLS,
    ToolIndex,
    asks_capabilities,
    asks_repeat,
    content_stems,
    is_cancel,
    is_farewell,
    is_question,
    is_unintelligible,
    reads,
    social_kind,
    wants_person,
)
from realtime.engine.contracts import (
    HANDOFF_TOOL_PREFIX,
    BrainContext,
    BrainOutput,
    TextPiece,
    ToolCall,
    ToolSpec,
    Turn,
)

# Knowledge scores are cosine similarity + 0.25 x keyword score (all-MiniLM-L6-v2): relevant passages
# score above about 0.45, unrelated ones below about 0.3.
KNOWLEDGE_MIN_SCORE = 0.4
# Values that change a lookup on a follow-up turn ("what about tomorrow?", "in celsius?"); places and
# amounts only after "what about", "how about", "and", "in"... ("what about in london?").
FOLLOW_UP_KINDS = frozenset("enum list date time datetime digits email phone".split())
CUED_FOLLOW_UP_KINDS = frozenset("location integer number".split())
FOLLOW_UP_CUES = (["what", "about"], ["how", "about"], ["and", "in"], ["and", "for"], ["what", "if"])
MAX_REASKS = 1  # an unanswerable reply to a question is met with the question once more, then dropped


@dataclass
class PendingCall:
    tool: str
    arguments: dict[str, Any]
    asking: str  # the property just asked for
    attempts: int = 0


@dataclass
class Choice:
    tools: tuple[str, ...]
    text: str  # the turn that matched them, for its arguments


@dataclass
class _Catalog:
    tools: tuple[ToolSpec, ...]
    index: ToolIndex
    parameters: dict[str, tuple[Parameter, ...]] = field(default_factory=dict)


SUMMARY_WORDS = 60


def _utc_today() -> date:
    return datetime.now(UTC).date()


class EmbeddedBrain:
    def __init__(self, *, language: str = "en-US", today: Callable[[], date] | None = None) -> None:
        self.language = language
        self._today = today or _utc_today
        self._calls = 0
        self._pending: PendingCall | None = None
        self._choice: Choice | None = None
        self._catalog: _Catalog | None = None
        self._called: dict[str, str] = {}  # call id -> tool name, for a tool turn that lacks the name
        self._last: tuple[str, dict[str, Any]] | None = None  # the last custom call, for follow-ups
        self._topics: list[str] = []  # topics of the agent's documents seen in a search, for "I can help with"

    async def respond(self, context: BrainContext, history: Sequence[Turn]) -> AsyncIterator[BrainOutput]:
        if history and history[-1].role == "tool" and self._tool_name(history[-1]) == "search_knowledge":
            # Ranking the passage's sentences runs the embedding model (a few ms): off the event loop.
            outputs = await asyncio.to_thread(self.answer, context, history)
        else:
            outputs = self.answer(context, history)
        for output in outputs:
            yield output

    def answer(self, context: BrainContext, history: Sequence[Turn]) -> list[BrainOutput]:
        """The whole answer at once (well under a millisecond, but for a knowledge passage to speak,
        whose sentences are embedded)."""
        language = context.language or self.language
        if not history:
            return []
        last = history[-1]
        if last.role == "tool":
            return self._speak_result(context, history, language)
        if last.role != "user":
            return []
        return self._understand(context, Utterance(last.text), language, history)

    def summarize(self, turns: Sequence[Turn]) -> str:
        """Handover notes for the next agent (docs/guides/handoffs.md, `context: summary`): this brain
        writes no free text, so the notes are the caller's last words, at most SUMMARY_WORDS words."""
        words = " ".join(turn.text for turn in turns if turn.role == "user").split()[-SUMMARY_WORDS:]
        return f"The caller said: {' '.join(words)}" if words else ""

    # Results --------------------------------------------------------------------------------------

    def _tool_name(self, turn: Turn) -> str:
        return turn.name or self._called.get(turn.tool_call_id, "")

    def _speak_result(self, context: BrainContext, history: Sequence[Turn], language: str) -> list[BrainOutput]:
        turn = history[-1]
        name = self._tool_name(turn)
        if name == "transfer_call":
            return [] if not _is_error(turn.text) else [TextPiece(phrase("transfer_failed", language))]
        if name == "end_call":
            return []  # the goodbye was said before the call; the session ends the call
        if name == "send_digits":
            return [TextPiece(phrase("tool_error" if _is_error(turn.text) else "done", language))]
        if name == "search_knowledge":
            return [TextPiece(self._speak_knowledge(context, history, language))]
        return [TextPiece(replies.speak_result(turn.text, language))]

    def _speak_knowledge(self, context: BrainContext, history: Sequence[Turn], language: str) -> str:
        try:
            result = json.loads(history[-1].text)
        except ValueError:
            result = {}
        if not isinstance(result, dict) or result.get("error"):
            return phrase("tool_error", language)
        passages = [p for p in result.get("passages") or () if isinstance(p, dict) and str(p.get("text", "")).strip()]
        best = max(passages, key=lambda p: _score(p), default=None)
        if best is not None and _score(best) >= KNOWLEDGE_MIN_SCORE:
            question = _query_of(history)
            answer = answers.speak_passage(str(best["text"]), question, document=str(best.get("document") or ""))
            if answer:
                return answer
        return self._no_answer(context, language, passages)

    def _no_answer(self, context: BrainContext, language: str, passages: Sequence[dict[str, Any]] = ()) -> str:
        """No answer found: what the agent can help with, naming topics of its documents (the passages
        the search did find) and its tools, then an open question."""
        topics = answers.passage_topics(
            [(str(p.get("text") or ""), str(p.get("document") or ""), str(p.get("section") or "")) for p in passages]
        )
        self._topics = topics or self._topics
        parts = [phrase("dont_know", language)]
        if self._topics:
            parts.append(phrase("help_topics", language).format(items=replies.join(self._topics, language)))
        can_do = replies.capabilities(context, language, knowledge=False)
        if can_do:
            parts.append(can_do)
        parts.append(phrase("what_next" if len(parts) > 1 else "anything_else", language))
        return " ".join(parts)

    # Caller turns ---------------------------------------------------------------------------------

    def _understand(
        self, context: BrainContext, utterance: Utterance, language: str, history: Sequence[Turn]
    ) -> list[BrainOutput]:
        if is_unintelligible(utterance):
            return [TextPiece(phrase("not_caught", language))]
        catalog = self._catalog_for(context)
        if wants_person(utterance, reserved=catalog.index.name_stems):
            self._pending = self._choice = None
            colleague = catalog.index.match(utterance).tool  # "someone in billing": the billing agent, if one is
            if colleague is not None and colleague.name.startswith(HANDOFF_TOOL_PREFIX):
                return self._start_call(context, catalog, colleague, utterance, language)
            return self._transfer(context, utterance, language)
        if asks_repeat(utterance):
            said = next((turn.text for turn in reversed(history[:-1]) if turn.role == "assistant" and turn.text), "")
            return [TextPiece(said or phrase("not_caught", language))]
        if self._pending is not None:
            outputs = self._continue_pending(context, catalog, utterance, language)
            if outputs is not None:
                return outputs
        if self._choice is not None:
            outputs = self._continue_choice(context, catalog, utterance, language)
            if outputs is not None:
                return outputs
        keys = keys_asked(utterance.text) if context.tool("send_digits") is not None else None
        if keys:
            return [self._call("send_digits", {"digits": keys})]
        social = social_kind(utterance)
        if social == "goodbye" and context.tool("end_call") is not None and is_farewell(utterance):
            # A clear farewell: the goodbye is said, then the call ends (end_call).
            return [TextPiece(phrase("goodbye", language)), self._call("end_call", {})]
        if social:
            return [TextPiece(phrase(social, language))]
        match = catalog.index.match(utterance)
        if match.tool is not None:
            return self._start_call(context, catalog, match.tool, utterance, language)
        if match.ambiguous:
            self._choice = Choice(tuple(tool.name for tool in match.ambiguous), utterance.text)
            return [TextPiece(replies.which_tool(match.ambiguous, language))]
        follow_up = self._follow_up(context, catalog, utterance, language)
        if follow_up:
            return follow_up
        if asks_capabilities(utterance):
            introduce = "who" in utterance.words or utterance.has_phrase(("what", "are", "you"))
            return [TextPiece(replies.describe(context, language, introduce=introduce, topics=self._topics))]
        if content_stems(utterance.tokens):
            # Facts written in the agent's prompt answer a question first ("We are open on Saturday from 10
            # to 2."); a request ("I would like to book a table") is not answered with the prompt's words.
            asked = is_question(utterance) or utterance.text.rstrip().endswith("?")
            said = answers.answer_from_prompt((context.instructions, context.identity), utterance.text) if asked else ""
            if said:
                return [TextPiece(said)]
            if context.tool("search_knowledge"):
                return [self._call("search_knowledge", {"query": utterance.text})]
        return [TextPiece(replies.describe(context, language, topics=self._topics))]

    def _transfer(self, context: BrainContext, utterance: Utterance, language: str) -> list[BrainOutput]:
        tool = context.tool("transfer_call")
        if tool is None:
            return [TextPiece(phrase("no_transfer", language))]
        properties = (tool.parameters or {}).get("properties") or {}
        return [self._call(tool.name, {"reason": utterance.text} if "reason" in properties else {})]

    def _start_call(
        self, context: BrainContext, catalog: _Catalog, tool: ToolSpec, utterance: Utterance, language: str
    ) -> list[BrainOutput]:
        self._choice = None
        parameters = self._parameters(catalog, tool)
        arguments = extract(parameters, utterance, self._today(), fill_text=True)
        return self._ask_or_call(tool, parameters, arguments, language)

    def _ask_or_call(
        self, tool: ToolSpec, parameters: tuple[Parameter, ...], arguments: dict[str, Any], language: str
    ) -> list[BrainOutput]:
        missing = next(
            (p for p in parameters if p.required and p.name not in arguments and p.kind != "unsupported"), None
        )
        if missing is None:
            return [self._call(tool.name, arguments)]
        self._pending = PendingCall(tool.name, arguments, missing.name)
        return [TextPiece(replies.question(missing, language))]

    def _continue_pending(
        self, context: BrainContext, catalog: _Catalog, utterance: Utterance, language: str
    ) -> list[BrainOutput] | None:
        """The caller's reply to a question for a missing argument (None: handle the turn afresh)."""
        pending = self._pending
        assert pending is not None
        tool = context.tool(pending.tool)
        parameters = self._parameters(catalog, tool) if tool else ()
        asked = next((p for p in parameters if p.name == pending.asking), None)
        if tool is None or asked is None:
            self._pending = None
            return None
        if asked.kind != "boolean" and is_cancel(utterance):
            self._pending = None
            return [TextPiece(phrase("cancelled", language))]
        asked_question = is_question(utterance)
        if asked_question and asked.kind in ("name", "location", "address"):
            found = {}  # "what are your opening hours" is not a name
        else:
            found = extract(parameters, utterance, self._today(), focus=pending.asking)
        if pending.asking in found:
            # Values already given stay: this turn answers the question and fills what is still missing.
            arguments = {**found, **pending.arguments, pending.asking: found[pending.asking]}
            return self._ask_or_call(tool, parameters, arguments, language)
        if is_cancel(utterance):
            self._pending = None
            return [TextPiece(phrase("cancelled", language))]
        other = catalog.index.match(utterance)
        moved_on = (other.tool is not None and other.tool.name != pending.tool) or asked_question
        if moved_on or social_kind(utterance) == "goodbye":
            self._pending = None
            return None
        if pending.attempts >= MAX_REASKS:
            self._pending = None
            return None
        pending.attempts += 1
        pending.arguments = {**found, **pending.arguments}
        return [TextPiece(f"{phrase('reask', language)} {replies.question(asked, language)}")]

    def _follow_up(
        self, context: BrainContext, catalog: _Catalog, utterance: Utterance, language: str
    ) -> list[BrainOutput]:
        """ "What about tomorrow?" after a forecast: the last lookup again with the new values said.
        Only for tools named for reading (get, check, find...), never for one that changes things."""
        if self._last is None:
            return []
        name, previous = self._last
        tool = context.tool(name)
        if tool is None or not reads(tool.name):
            return []
        parameters = self._parameters(catalog, tool)
        kinds = {p.name: p.kind for p in parameters}
        found = extract(parameters, utterance, self._today())
        cued = utterance.tokens[:1] in (["and"], ["in"], ["for"], ["at"]) or utterance.tokens[:2] in FOLLOW_UP_CUES
        allowed = FOLLOW_UP_KINDS | (CUED_FOLLOW_UP_KINDS if cued else frozenset())
        changed = {k: v for k, v in found.items() if kinds[k] in allowed and previous.get(k) != v}
        if not changed:
            return []
        return self._ask_or_call(tool, parameters, {**previous, **changed}, language)

    def _continue_choice(
        self, context: BrainContext, catalog: _Catalog, utterance: Utterance, language: str
    ) -> list[BrainOutput] | None:
        choice = self._choice
        assert choice is not None
        self._choice = None
        if is_cancel(utterance):
            return [TextPiece(phrase("cancelled", language))]
        named = None
        for word, position in (("first", 0), ("second", 1), ("third", 2), ("last", -1), ("latter", -1)):
            if word in utterance.words and -len(choice.tools) <= position < len(choice.tools):
                named = choice.tools[position]
                break
        if named is None:
            match = catalog.index.match(utterance, among=choice.tools, minimum=0.5)
            named = match.tool.name if match.tool else None
        tool = context.tool(named) if named else None
        if tool is None:
            return None
        return self._start_call(context, catalog, tool, Utterance(f"{choice.text} {utterance.text}"), language)

    # Helpers --------------------------------------------------------------------------------------

    def _call(self, name: str, arguments: dict[str, Any]) -> ToolCall:
        self._calls += 1
        self._pending = None
        call = ToolCall(id=f"call_{self._calls}", name=name, arguments=arguments)
        if name not in NATIVE_TOOLS:
            self._last = (name, arguments)
        self._called[call.id] = name
        return call

    def _catalog_for(self, context: BrainContext) -> _Catalog:
        catalog = self._catalog
        if catalog is None or not (catalog.tools is context.tools or catalog.tools == context.tools):
            catalog = self._catalog = _Catalog(context.tools, ToolIndex(context.tools))
        return catalog

    @staticmethod
    def _parameters(catalog: _Catalog, tool: ToolSpec) -> tuple[Parameter, ...]:
        if tool.name not in catalog.parameters:
            catalog.parameters[tool.name] = parameters_of(tool.parameters)
        return catalog.parameters[tool.name]


def _is_error(text: str) -> bool:
    try:
        result = json.loads(text)
    except ValueError:
        return True
    return isinstance(result, dict) and bool(result.get("error"))


def _query_of(history: Sequence[Turn]) -> str:
    """The query of the search whose result ends `history` (else the caller's last words)."""
    answered = history[-1].tool_call_id
    for turn in reversed(history):
        for call in turn.tool_calls:
            if call.id == answered and str(call.arguments.get("query") or "").strip():
                return str(call.arguments["query"])
    return next((turn.text for turn in reversed(history) if turn.role == "user"), "")


def _score(passage: dict[str, Any]) -> float:
    try:
        return float(passage.get("score") or 0.0)
    except (TypeError, ValueError):
        return 0.0
