"""What a caller turn asks for, by word matching (English: the offline recognizer is English-only).

Words are lower-cased, stemmed (Snowball English) and stop words dropped. Intents are checked on
the stems: a request for a person, greetings, thanks, goodbyes, "never mind", "what can you do".

A tool is chosen by weighted word overlap between the caller's words and each offered tool's
words: name words (snake_case, camelCase and kebab-case split) weigh 2, description words 1, enum
values 1, parameter names 0.5. Generic verbs ("get", "check", "find"...) count half outside tool
names; a tool named for a change ("cancel_...", "update_...") counts 0.4 unless that action is
said. A few synonym groups ("book"/"reserve", "weather"/"forecast"...) match at 0.8, and so do word
forms where one stem starts the other ("medic"/"medicin", five letters at least).

A tool is a candidate when its score reaches `MIN_TOOL_SCORE` (a name word or its synonym, or a
description word and one more). Among candidates, each word is also scaled by how specific it is to
the offered tools (1 for a word of one tool, down to 0.5 for a word of every tool): the best
candidate is chosen when it leads the next one by `TOOL_MARGIN`, else the close candidates are
ambiguous (the brain asks which one is meant).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import snowballstemmer

from realtime.engine.brain.embedded.spoken import NUMBER_WORDS, ORDINALS, Utterance
from realtime.engine.contracts import ToolSpec

NATIVE_TOOLS = ("search_knowledge", "transfer_call", "end_call", "send_digits")
MIN_TOOL_SCORE = 1.5
TOOL_MARGIN = 1.0
NAME_WEIGHT = 2.0
DESCRIPTION_WEIGHT = 1.0
ENUM_WEIGHT = 1.0
PARAMETER_WEIGHT = 0.5
SYNONYM_FACTOR = 0.8
PREFIX_LETTERS = 5  # stems that start one another from this length on are related ("medic", "medicin")
GENERIC_FACTOR = 0.5

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are aren't as at be because been before being
    below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down
    during each few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here
    here's hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself
    let's me more most mustn't my myself no nor not of off on once only or other ought our ours ourselves
    out over own same shan't she she'd she'll she's should shouldn't so some such than that that's the
    their theirs them themselves then there there's these they they'd they'll they're they've this those
    through to too under until up very was wasn't we we'd we'll we're we've were weren't what what's when
    when's where where's which while who who's whom why why's will with won't would wouldn't you you'd
    you'll you're you've your yours yourself yourselves
    um uh uhm hmm er ah oh okay ok yeah yes yep please just also like want wanna need needs gonna
    could would may might must shall get got go going know think see tell let make
    hi hello hey thanks thank bye goodbye well right sure really actually maybe something anything
    given specified provided using use used via e g eg etc""".split()
)
# Verbs that name no task by themselves: they count half in descriptions and parameters.
GENERIC_WORDS = (
    "get set check find look lookup fetch retrieve list show return give provide create update make request "
    "information info data details tool api call record current specific"
)
# A tool named for one of these actions ("cancel_reservation") needs the action said: without it its
# score counts 0.4, so that "make a reservation" does not cancel one.
ACTION_WORDS = "cancel delete remove update change modify reschedule refund unsubscribe"
ACTION_FACTOR = 0.4
SYNONYMS = (
    "book reserve reservation appointment schedule visit",
    "cancel delete remove",
    "weather forecast temperature rain raining sunny snow wind hot cold warm humid cloudy",
    "order purchase shipment delivery package parcel track",
    "price cost quote fee rate",
    "refund reimburse reimbursement",
    "balance money funds",
    "doctor physician clinic dentist dental medical",
)

TRANSFER_WORDS = frozenset(
    "human person representative operator agent manager supervisor someone somebody anyone staff "
    "receptionist employee transfer".split()
)
TRANSFER_STRONG = frozenset("human representative operator transfer manager supervisor receptionist".split())
CONTACT_VERBS = frozenset("speak talk connect put transfer reach chat".split())

GREETING_PHRASES: tuple[str, ...] = (
    "hello",
    "hi",
    "hey",
    "howdy",
    "greetings",
    "good morning",
    "good afternoon",
    "good evening",
)
GREETING_PHRASES += ("how are you", "how are you doing", "how's it going")
THANKS_PHRASES: tuple[str, ...] = (
    "thank you",
    "thanks",
    "thank you very much",
    "thanks a lot",
    "i appreciate it",
    "appreciate it",
)
THANKS_PHRASES += ("great", "perfect", "awesome", "cool", "wonderful", "excellent")
GOODBYE_PHRASES: tuple[str, ...] = (
    "bye",
    "goodbye",
    "bye bye",
    "see you",
    "see ya",
    "that's all",
    "that is all",
    "that's it",
)
GOODBYE_PHRASES += ("that will be all", "nothing else", "no thanks", "no thank you", "i'm done", "i'm all set")
GOODBYE_PHRASES += ("all set", "have a good day", "have a nice day", "no", "nope", "nothing", "take care")
CANCEL_PHRASES: tuple[str, ...] = (
    "never mind",
    "nevermind",
    "cancel",
    "cancel that",
    "cancel it",
    "forget it",
    "forget about it",
)
CANCEL_PHRASES += ("stop", "no", "nope", "don't", "don't bother", "leave it", "scratch that", "no thanks", "not now")
CAPABILITY_PHRASES: tuple[str, ...] = (
    "what can you do",
    "what do you do",
    "how can you help",
    "what can you help",
    "help",
)
IDENTITY_PHRASES = ("what are you", "who are you", "what is this")
CAPABILITY_PHRASES += (*IDENTITY_PHRASES, "what services", "what options", "options")
CAPABILITY_PHRASES += ("what can i do", "what can i ask", "what do you offer", "menu", "what are my options")
REPEAT_PHRASES: tuple[str, ...] = (
    "repeat",
    "say that again",
    "say again",
    "come again",
    "pardon",
    "what did you say",
    "sorry what",
)
YES_WORDS = frozenset(
    "yes yeah yep yup sure correct right ok okay affirmative absolutely definitely true please".split()
)
NO_WORDS = frozenset("no nope nah not don't negative false without never".split())
FILLERS = frozenset("um uh uhm hmm er ah oh mm huh".split())

_stemmer = snowballstemmer.stemmer("english")


@lru_cache(maxsize=8192)
def stem(word: str) -> str:
    stemmed: str = _stemmer.stemWord(word.replace("'", ""))
    return stemmed


def split_identifier(name: str) -> list[str]:
    """'checkOrderStatus' / 'book_table' / 'get-weather' -> lower-case words."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", spaced)
    return [word for word in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if word]


def words_of(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())


def content_stems(words: Iterable[str]) -> list[str]:
    """Stems of the meaningful words (no stop words, numbers or fillers), in order, without repeats."""
    seen: dict[str, None] = {}
    for word in words:
        if word in STOP_WORDS or word in NUMBER_WORDS or word in ORDINALS or word.isdigit() or len(word) < 2:
            continue
        seen.setdefault(stem(word), None)
    return list(seen)


ACTION_STEMS = frozenset(stem(word) for word in ACTION_WORDS.split())
GENERIC_STEMS = frozenset(stem(word) for word in GENERIC_WORDS.split())
_SYNONYM_OF = {
    member: frozenset(group) - {member}
    for group in ({stem(word) for word in line.split()} for line in SYNONYMS)
    for member in group
}


def _matches_phrase(utterance: Utterance, phrases: Iterable[str]) -> bool:
    return any(utterance.has_phrase(tuple(phrase.split())) for phrase in phrases)


def _without(utterance: Utterance, phrases: Iterable[str]) -> list[str]:
    """The utterance's words left after removing the phrases, fillers and stop words."""
    tokens = list(utterance.tokens)
    for phrase in sorted(phrases, key=len, reverse=True):
        words = phrase.split()
        i = 0
        while i <= len(tokens) - len(words):
            if tokens[i : i + len(words)] == words:
                del tokens[i : i + len(words)]
            else:
                i += 1
    return [token for token in tokens if token not in STOP_WORDS and token not in FILLERS]


READ_WORDS = frozenset(
    "get check find search look lookup list show track fetch retrieve query quote estimate calculate view read".split()
)


def reads(tool_name: str) -> bool:
    """A tool named for reading ("get_forecast", "checkOrderStatus"), safe to ask again."""
    words = split_identifier(tool_name)
    return bool(words) and words[0] in READ_WORDS


def is_unintelligible(utterance: Utterance) -> bool:
    return not any(token not in FILLERS for token in utterance.tokens)


def social_kind(utterance: Utterance) -> str:
    """ "greeting", "thanks", "goodbye", "yes" or "" when the turn is only social words."""
    if _without(utterance, GREETING_PHRASES + THANKS_PHRASES + GOODBYE_PHRASES + tuple(YES_WORDS)):
        return ""
    if _matches_phrase(utterance, GOODBYE_PHRASES):
        return "goodbye"
    if _matches_phrase(utterance, THANKS_PHRASES):
        return "thanks"
    if _matches_phrase(utterance, GREETING_PHRASES):
        return "greeting"
    if utterance.words & YES_WORDS:
        return "yes"
    return ""


# Words that close a conversation on their own. "no", "nothing" or "no thanks" are not among them:
# they answer a question ("would you like a reminder?") as often as they take leave.
FAREWELL_PHRASES: tuple[str, ...] = (
    "bye",
    "goodbye",
    "bye bye",
    "see you",
    "see ya",
    "that's all",
    "that is all",
    "that's it",
    "that will be all",
    "nothing else",
    "i'm done",
    "i'm all set",
    "have a good day",
    "have a nice day",
    "take care",
)


def is_farewell(utterance: Utterance) -> bool:
    """A clear farewell: the turn is only social words ("that's all, thanks, goodbye") and takes leave
    in so many words. A "bye" inside a request ("book a table and then bye") is not one."""
    return social_kind(utterance) == "goodbye" and _matches_phrase(utterance, FAREWELL_PHRASES)


def is_cancel(utterance: Utterance) -> bool:
    """Only words of cancelling ("never mind", "cancel that", "no forget it")."""
    return _matches_phrase(utterance, CANCEL_PHRASES) and not _without(utterance, CANCEL_PHRASES + GOODBYE_PHRASES)


QUESTION_WORDS = frozenset(
    "what what's when where where's which who why how how's do does is are can could will".split()
)


def is_question(utterance: Utterance) -> bool:
    """A question of its own ("what are your opening hours"), not a value."""
    return (
        bool(utterance.tokens) and utterance.tokens[0] in QUESTION_WORDS and len(content_stems(utterance.tokens)) >= 2
    )


def asks_capabilities(utterance: Utterance) -> bool:
    """ "What can you do?", "who are you?"; not a question that starts like one ("what are you open on
    saturday": "what are you", "who are you" and "what is this" only with nothing else said)."""
    others = [phrase for phrase in CAPABILITY_PHRASES if phrase not in IDENTITY_PHRASES]
    if _matches_phrase(utterance, others) and len(_without(utterance, CAPABILITY_PHRASES)) <= 2:
        return True
    return _matches_phrase(utterance, IDENTITY_PHRASES) and not _without(utterance, IDENTITY_PHRASES)


def asks_repeat(utterance: Utterance) -> bool:
    return _matches_phrase(utterance, REPEAT_PHRASES) and not _without(utterance, (*REPEAT_PHRASES, "sorry", "that"))


def wants_person(utterance: Utterance, reserved: frozenset[str] = frozenset()) -> bool:
    """A request for a person: a strong word ("human", "operator", "transfer", "manager"...), a
    contact verb with a person word ("speak to someone", "talk to a real person"), or a turn made of
    person words only ("agent please"). `reserved` are stems of custom tool names (a
    `transfer_funds` tool keeps "transfer" for itself)."""
    tokens = utterance.tokens
    person = set()
    for index, token in enumerate(tokens):
        word = stem(token)
        if word not in _TRANSFER_STEMS or word in reserved:
            continue
        before = tokens[index - 1] if index else ""
        if word == "person" and (before == "per" or before in NUMBER_WORDS or before.isdigit()):
            continue  # "per person", "a table for one person"
        person.add(word)
    if not person:
        return False
    if person & _STRONG_STEMS:
        return True
    if {stem(token) for token in tokens} & _CONTACT_STEMS:
        return True
    return not _without(utterance, ("real", "live", "actual", *TRANSFER_WORDS))


_TRANSFER_STEMS = frozenset(stem(word) for word in TRANSFER_WORDS)
_STRONG_STEMS = frozenset(stem(word) for word in TRANSFER_STRONG)
_CONTACT_STEMS = frozenset(stem(word) for word in CONTACT_VERBS)


# Tool choice --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolMatch:
    tool: ToolSpec | None  # the clear winner, if any
    ambiguous: tuple[ToolSpec, ...] = ()  # two close candidates: ask which one
    score: float = 0.0


class ToolIndex:
    """The offered custom tools' words and weights, built once per tools tuple."""

    def __init__(self, tools: Iterable[ToolSpec]) -> None:
        self.tools = tuple(tool for tool in tools if tool.name not in NATIVE_TOOLS)
        per_tool = [self._weights(tool) for tool in self.tools]
        frequency: dict[str, int] = {}
        for weights in per_tool:
            for word in weights:
                frequency[word] = frequency.get(word, 0) + 1
        count = len(self.tools)
        self.weights: list[dict[str, float]] = []  # what a word says of a tool (generic verbs halved)
        self.specificity: dict[str, float] = {}  # 1 for a word of one tool only, 0.5 for a word of all
        for weights in per_tool:  # a generic verb counts in full as a name word ("return_item")
            self.weights.append(
                {w: v * (GENERIC_FACTOR if w in GENERIC_STEMS and v < NAME_WEIGHT else 1.0) for w, v in weights.items()}
            )
        for word, seen in frequency.items():
            self.specificity[word] = 1.0 if count < 2 else 0.5 + 0.5 * math.log(count / seen) / math.log(count)
        self.prefixes: dict[str, set[str]] = {}  # "medic" -> {"medic", "medicin"}: related word forms
        for weights in per_tool:
            for word in weights:
                if len(word) >= PREFIX_LETTERS:
                    self.prefixes.setdefault(word[:PREFIX_LETTERS], set()).add(word)
        self.actions = []
        for tool in self.tools:
            first = stem(split_identifier(tool.name)[0]) if split_identifier(tool.name) else ""
            self.actions.append(first if first in ACTION_STEMS else "")
        self.name_stems = frozenset(stem(w) for tool in self.tools for w in split_identifier(tool.name))

    @staticmethod
    def _weights(tool: ToolSpec) -> dict[str, float]:
        weights: dict[str, float] = {}

        def add(stems: Iterable[str], weight: float) -> None:
            for word in stems:
                weights[word] = max(weights.get(word, 0.0), weight)

        add(content_stems(split_identifier(tool.name)), NAME_WEIGHT)
        add(content_stems(words_of(tool.description)), DESCRIPTION_WEIGHT)
        properties = (tool.parameters or {}).get("properties") or {}
        for name, schema in properties.items():
            add(content_stems(split_identifier(name)), PARAMETER_WEIGHT)
            for value in (schema or {}).get("enum") or ():
                add(content_stems(split_identifier(str(value))), ENUM_WEIGHT)
        return weights

    def score(self, position: int, stems: list[str]) -> tuple[float, float]:
        """How much the words say of this tool, plain and with each word scaled by its specificity."""
        weights = self.weights[position]
        plain = specific = 0.0
        for word in stems:
            weight, source = weights.get(word, 0.0), word
            if not weight:
                for other in sorted(_SYNONYM_OF.get(word, frozenset()) | self._forms(word)):
                    if weights.get(other, 0.0) * SYNONYM_FACTOR > weight:
                        weight, source = weights[other] * SYNONYM_FACTOR, other
            plain += weight
            specific += weight * self.specificity.get(source, 1.0)
        action = self.actions[position]
        if action and action not in stems and not (_SYNONYM_OF.get(action, frozenset()) & set(stems)):
            plain, specific = plain * ACTION_FACTOR, specific * ACTION_FACTOR
        return plain, specific

    def _forms(self, word: str) -> set[str]:
        if len(word) < PREFIX_LETTERS:
            return set()
        return {w for w in self.prefixes.get(word[:PREFIX_LETTERS], ()) if w.startswith(word) or word.startswith(w)}

    def match(
        self, utterance: Utterance, among: Iterable[str] | None = None, minimum: float = MIN_TOOL_SCORE
    ) -> ToolMatch:
        """The tool meant: candidates are the tools whose plain score reaches `minimum`; the one
        with the best specific score is chosen when it leads the next candidate by `TOOL_MARGIN`,
        else the close candidates are returned as ambiguous."""
        stems = content_stems(utterance.tokens)
        candidates = []
        for position, tool in enumerate(self.tools):
            if among is not None and tool.name not in among:
                continue
            plain, specific = self.score(position, stems)
            if plain >= minimum:
                candidates.append((specific, plain, -position, tool))
        if not candidates:
            return ToolMatch(None)
        candidates.sort(key=lambda item: item[:3], reverse=True)
        best = candidates[0]
        if len(candidates) == 1 or best[0] - candidates[1][0] >= TOOL_MARGIN:
            return ToolMatch(best[3], score=best[0])
        close = tuple(item[3] for item in candidates if best[0] - item[0] < TOOL_MARGIN)
        return ToolMatch(None, ambiguous=close[:3], score=best[0])
