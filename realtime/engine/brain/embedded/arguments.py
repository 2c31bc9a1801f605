"""Tool arguments from the caller's words, property by property of the tool's JSON Schema.

Each property gets a kind from its schema, then its name's words, then its description's first
words: `enum` (a listed value said: multi-word, case-insensitive, "next day" for NEXT_DAY, "model
three" for "Model 3"), `boolean`, `integer`/`number`, `date` (format date; "date"/"day"), `time`
(format time; "time"/"hour"), `datetime`, `email`, `phone`, `digits` (identifiers: "number", "id",
"code", "zip", "reference"... or a digits-only pattern; a pattern's literal prefix is added, "INV-"),
`name` (a person's name), `address`, `location` (city, destination...), `text` (anything else),
`list` (an array of enum values).

Kinds are filled in a fixed order (e-mail, dates, times, digit strings, enums, numbers, booleans,
names, places, free text) and each value claims its words, so that "a table for four at seven
thirty tomorrow" gives the time 19:30, tomorrow's date and 4 for the party size. When several values
fit, the one next to the property's own words wins ("four people": the number before "people" goes
to `party_size`; "from chicago" to an origin, "to boston" to a destination); numbers said without
such words go to the number properties left, required ones first. Every value is checked against
the property's `type`, `enum`, `format`, `minimum`/`maximum`, `minLength`/`maxLength` and `pattern`.

Free text: when the tool is chosen, a required free-text property named like a message (query,
question, message, summary, notes...; the only one of its tool) takes the whole turn, leading filler
words removed; other free-text properties wait to be asked. When the brain has asked for one
property (the focus), the reply is read more loosely: a lone hour is a time, a lone ordinal a day,
a part of a multi-word enum value that names one value only is that value, and the whole reply is a
name, place, address or text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

from num2words import num2words

from kit.patterns import PatternError, pattern_search
from realtime.engine.brain.embedded import spoken
from realtime.engine.brain.embedded.spoken import Span, Utterance
from realtime.engine.brain.embedded.understanding import (
    FILLERS,
    NO_WORDS,
    STOP_WORDS,
    YES_WORDS,
    split_identifier,
    stem,
    words_of,
)

ORDER: tuple[str, ...] = (
    "email",
    "datetime",
    "date",
    "time",
    "phone",
    "digits",
    "enum",
    "list",
    "integer",
    "number",
    "boolean",
)
ORDER += ("name", "address", "location", "text")
# Free-text properties that may take the caller's whole turn when their tool is chosen.
FREE_TEXT_WORDS = frozenset(
    "query question message text summary description notes note request issue problem topic content body "
    "comment comments details feedback search keywords term prompt input subject".split()
)
ID_WORDS = frozenset("number id code zip postal pin reference ref confirmation tracking account digits ssn".split())
PHONE_WORDS = frozenset("phone telephone mobile cell".split())
PLACE_WORDS = frozenset("city location place address destination origin country town region area".split())
NOT_PERSON = frozenset("product item file company business restaurant city street dish service doctor".split())
HINT_GROUPS = (
    frozenset("party guests guest people persons person size seats covers diners adults attendees travelers".split()),
    frozenset("quantity count amount items units pieces copies tickets".split()),
    frozenset("phone number call mobile cell".split()),
    frozenset("age years old".split()),
    frozenset("price amount dollars euros pounds cost budget".split()),
)
LEADING_FILLERS = ("so", "well", "okay", "ok", "yes", "yeah", "please", "and", "um", "uh", "oh", "it's", "its")
NAME_CUES: tuple[tuple[str, ...], ...] = (
    ("my", "name", "is"),
    ("the", "name", "is"),
    ("name", "is"),
    ("this", "is"),
    ("i'm",),
    ("i", "am"),
)
NAME_CUES += (("it's",), ("under",), ("call", "me"), ("name",))
PLACE_PREPOSITIONS = ("in", "at", "for", "near", "to", "from", "of")


@dataclass(frozen=True)
class Parameter:
    name: str
    schema: dict[str, Any]
    kind: str
    required: bool
    label: str  # how the property is named in a question: "party size"
    hints: frozenset[str]  # stems next to which its value is said
    enum_forms: tuple[tuple[tuple[str, ...], Any], ...] = ()
    lead_ins: frozenset[str] = frozenset()  # words said just before its value: "from" for an origin

    @property
    def options(self) -> list[Any]:
        enum = self.schema.get("enum") or (self.schema.get("items") or {}).get("enum") or []
        return list(enum)


def parameters_of(schema: dict[str, Any] | None) -> tuple[Parameter, ...]:
    schema = schema or {}
    required = set(schema.get("required") or ())
    properties = schema.get("properties") or {}
    return tuple(_parameter(name, prop or {}, name in required) for name, prop in properties.items())


def _parameter(name: str, schema: dict[str, Any], required: bool) -> Parameter:
    name_words = split_identifier(name)
    description = str(schema.get("description") or "")
    described = words_of(description)
    kind = _kind(name_words, described, schema)
    hints = {stem(w) for w in name_words + described if w not in STOP_WORDS}
    for group in HINT_GROUPS:
        if group & set(name_words + described):
            hints |= {stem(w) for w in group}
    lead_ins = set()
    if {"origin", "departure", "source", "from", "pickup"} & set(name_words):
        lead_ins.add("from")
    if {"destination", "arrival", "to", "dropoff"} & set(name_words):
        lead_ins.add("to")
    forms: list[tuple[tuple[str, ...], Any]] = []
    for value in schema.get("enum") or (schema.get("items") or {}).get("enum") or ():
        spoken_words = tuple(split_identifier(str(value)))
        forms.append((spoken_words, value))
        said = tuple(
            w
            for part in spoken_words
            for w in (num2words(int(part)).replace("-", " ").split() if part.isdigit() else [part])
        )
        if said != spoken_words:
            forms.append((said, value))
    label = " ".join(name_words) or name
    return Parameter(name, schema, kind, required, label, frozenset(hints), tuple(forms), frozenset(lead_ins))


def _type(schema: dict[str, Any]) -> str:
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    return str(kind)


def _kind(name_words: list[str], described: list[str], schema: dict[str, Any]) -> str:
    kind, fmt = _type(schema), str(schema.get("format") or "")
    if schema.get("enum"):
        return "enum"
    if kind in ("boolean", "integer", "number"):
        return kind
    if kind == "array":
        return "list" if (schema.get("items") or {}).get("enum") else "unsupported"
    if kind != "string":
        return "unsupported"
    formats = {"date-time": "datetime", "date": "date", "time": "time", "email": "email", "phone": "phone"}
    if fmt in formats:
        return formats[fmt]
    pattern = str(schema.get("pattern") or "")
    if pattern and re.fullmatch(r"\^?(\\d|\[0-9\])[^a-zA-Z]*\$?", pattern):
        return "digits"
    # The name says what the value is; failing that, the description's first words do.
    return _kind_from_words(set(name_words), name_words) or _kind_from_words(set(described[:5]), []) or "text"


def _kind_from_words(words: set[str], name_words: list[str]) -> str:
    if {"datetime", "timestamp"} & words or {"date", "time"} <= words:
        return "datetime"
    if {"date", "day", "birthday", "dob"} & words:
        return "date"
    if {"time", "hour"} & words:
        return "time"
    if {"email", "mail"} & words:
        return "email"
    if PHONE_WORDS & words:
        return "phone"
    if "name" in words and not NOT_PERSON & words:
        return "name"
    if ID_WORDS & words:
        return "digits"
    if "address" in words:
        return "address"
    if PLACE_WORDS & words:
        return "location"
    return ""


def valid(parameter: Parameter, value: Any) -> Any:
    """The value as the schema wants it, or None when the schema rejects it."""
    schema, kind = parameter.schema, _type(parameter.schema)
    if kind == "integer":
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            return None
    elif kind == "number":
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int | float) or isinstance(value, bool):
            return None
    elif kind == "string":
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or not value:
            return None
    elif kind == "boolean" and not isinstance(value, bool):
        return None
    if "enum" in schema and value not in schema["enum"]:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return None
        if "maximum" in schema and value > schema["maximum"]:
            return None
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            return None
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            return None
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", 10_000):
            return None
        pattern = schema.get("pattern")
        if pattern:
            try:
                if not pattern_search(str(pattern), value):
                    return None
            except PatternError:
                pass
    return value


class Extraction:
    """One pass over one caller turn: which words each value used."""

    def __init__(self, utterance: Utterance, today: date, parameters: tuple[Parameter, ...] = ()) -> None:
        self.utterance = utterance
        self.lead_ins = frozenset(word for parameter in parameters for word in parameter.lead_ins)
        self.today = today
        self.used: set[int] = set()
        self.found: dict[str, Any] = {}

    def free(self, span: Span) -> bool:
        return not any(i in self.used for i in range(span.start, span.end))

    def claim(self, span: Span) -> None:
        self.used.update(range(span.start, span.end))

    def pick(self, parameter: Parameter, spans: list[Span], *, convert: Callable[[Any], Any] = lambda v: v) -> Any:
        """The free span whose value the schema accepts, nearest to the property's words."""
        best: tuple[float, int, Span, Any] | None = None
        for span in spans:
            if not self.free(span):
                continue
            value = valid(parameter, convert(span.value))
            if value is None:
                continue
            score = self.closeness(parameter, span)
            if score >= 0 and (best is None or score > best[0]):
                best = (score, span.start, span, value)
        if best is None:
            return None
        self.claim(best[2])
        return best[3]

    def closeness(self, parameter: Parameter, span: Span) -> float:
        """How near the value is to the property's words: 2 for a word right after it ("four
        people"), 1.5 right before ("party of four"), less further away; -1 when another property's
        lead-in word comes right before it ("to chicago" is not the origin)."""
        tokens = self.utterance.tokens
        previous = tokens[span.start - 1] if span.start > 0 else ""
        if previous in parameter.lead_ins:
            return 2.0
        if previous in self.lead_ins:
            return -1.0
        score = 0.0
        for offset in (1, 2):
            after = span.end + offset - 1
            if after < len(tokens) and after not in self.used and stem(tokens[after]) in parameter.hints:
                score = max(score, 2.5 - offset * 0.5)
            before = span.start - offset
            if before >= 0 and before not in self.used and stem(tokens[before]) in parameter.hints:
                score = max(score, 2.0 - offset * 0.5)
        before3 = span.start - 3
        if before3 >= 0 and stem(tokens[before3]) in parameter.hints:
            score = max(score, 0.5)
        return score


def extract(
    parameters: tuple[Parameter, ...], utterance: Utterance, today: date, *, focus: str = "", fill_text: bool = False
) -> dict[str, Any]:
    """The values said in this turn. `focus` names the property the caller was just asked for;
    `fill_text` lets the only required free-text property take the whole turn."""
    run = Extraction(utterance, today, parameters)
    ordered = sorted(parameters, key=lambda p: (ORDER.index(p.kind) if p.kind in ORDER else 99, p.name != focus))
    unplaced: list[Parameter] = []
    for parameter in ordered:
        value = _extract_one(run, parameter, focused=parameter.name == focus)
        if value is not None:
            run.found[parameter.name] = value
        elif parameter.kind in ("integer", "number"):
            unplaced.append(parameter)
    # Numbers said without words of their own go to the number properties left, required first.
    for parameter in sorted(unplaced, key=lambda p: not p.required):
        spans = [span for span in spoken.quantities(utterance) if run.free(span)]
        value = run.pick(parameter, spans[:1])
        if value is not None:
            run.found[parameter.name] = value
    texts = [
        p for p in parameters if p.kind == "text" and p.required and FREE_TEXT_WORDS & set(split_identifier(p.name))
    ]
    if fill_text and len(texts) == 1 and texts[0].name not in run.found:
        value = valid(texts[0], cleaned(utterance))
        if value is not None:
            run.found[texts[0].name] = value
    return run.found


def _extract_one(run: Extraction, parameter: Parameter, *, focused: bool) -> Any:
    utterance, kind = run.utterance, parameter.kind
    if kind == "email":
        return run.pick(parameter, spoken.emails(utterance))
    if kind == "date":
        return run.pick(parameter, spoken.dates(utterance, run.today, bare=focused), convert=date.isoformat)
    if kind == "time":
        return run.pick(parameter, spoken.times(utterance, bare=focused))
    if kind == "datetime":
        return _datetime(run, parameter, focused=focused)
    if kind in ("phone", "digits"):
        spans = spoken.digit_strings(utterance)
        if kind == "phone":
            spans = [Span(s.start - 1, s.end, "+" + s.value) if _said_plus(utterance, s) else s for s in spans]
        if not focused:
            spans = [s for s in spans if len(s.value.lstrip("+")) >= 2 or run.closeness(parameter, s) > 0]
        return run.pick(parameter, spans, convert=lambda digits: _fit_pattern(parameter, digits))
    if kind == "enum":
        return _enum(run, parameter, focused=focused)
    if kind == "list":
        values = []
        for words, value in parameter.enum_forms:
            if utterance.has_phrase(words) and value not in values:
                values.append(value)
        return values or None
    if kind in ("integer", "number"):
        spans = spoken.quantities(utterance)
        if not focused:  # a number without the property's words waits for the leftover pass
            spans = [span for span in spans if run.closeness(parameter, span) > 0]
        return run.pick(parameter, spans)
    if kind == "boolean":
        return _boolean(utterance, parameter, focused=focused)
    if kind == "name":
        return _name(run, parameter, focused=focused)
    if kind == "location":
        return _location(run, parameter, focused=focused)
    if kind == "address" and focused:
        return valid(parameter, _address(run.utterance))
    if kind == "text" and focused:
        return valid(parameter, cleaned(utterance))
    return None


def _fit_pattern(parameter: Parameter, digits: str) -> str:
    """Digits with the literal prefix the property's pattern asks for ("^INV-?[0-9]+$": "INV-1234")."""
    pattern = str(parameter.schema.get("pattern") or "")
    prefix = re.match(r"\^([A-Za-z]+)(-?)", pattern)
    if not prefix or valid(parameter, digits) is not None:
        return digits
    for candidate in (f"{prefix.group(1)}-{digits}", f"{prefix.group(1)}{digits}"):
        if valid(parameter, candidate) is not None:
            return candidate
    return digits


def _address(utterance: Utterance) -> str:
    """A street address as said, numbers as digits ("one two three main street" -> "123 Main Street")."""
    tokens = utterance.tokens
    starts = {span.start: span for span in spoken.digit_strings(utterance)}
    words: list[str] = []
    index = 0
    while index < len(tokens):
        if index in starts:
            words.append(starts[index].value)
            index = starts[index].end
            continue
        words.append(tokens[index])
        index += 1
    while words and words[0] in (*LEADING_FILLERS, "it", "is", "my", "address", "the", "to", "at", "deliver", "send"):
        words.pop(0)
    return " ".join(word.title() if word.isalpha() else word for word in words)


def _said_plus(utterance: Utterance, span: Span) -> bool:
    return span.start > 0 and utterance.tokens[span.start - 1] == "plus"


def _datetime(run: Extraction, parameter: Parameter, *, focused: bool) -> Any:
    day = next((s for s in spoken.dates(run.utterance, run.today, bare=focused) if run.free(s)), None)
    clock = next((s for s in spoken.times(run.utterance, bare=focused) if run.free(s)), None)
    if clock is None or clock.value is None:
        return None
    value = valid(parameter, f"{(day.value if day else run.today).isoformat()}T{clock.value}:00")
    if value is not None:
        run.claim(clock)
        if day:
            run.claim(day)
    return value


def _enum(run: Extraction, parameter: Parameter, *, focused: bool) -> Any:
    tokens = run.utterance.tokens
    stems = [stem(t) for t in tokens]
    best: tuple[tuple[float, int, int], Span] | None = None
    for words, value in parameter.enum_forms:
        size = len(words)
        wanted = [stem(w) for w in words]
        for start in range(len(tokens) - size + 1):
            if stems[start : start + size] == wanted:
                span = Span(start, start + size, value)
                # Next to the property's words first ("from chicago" for the origin), then the
                # longest value ("new york" over "york"), then the first said.
                rank = (run.closeness(parameter, span), size, -start)
                if run.free(span) and rank[0] >= 0 and (best is None or rank > best[0]):
                    best = (rank, span)
    if best is None and focused:
        # A part of a multi-word value ("york" for "New York") when it names one value only.
        partial = {
            value
            for words, value in parameter.enum_forms
            if {stem(w) for w in words if w not in STOP_WORDS} & set(stems)
        }
        if len(partial) == 1:
            return valid(parameter, partial.pop())
        return None
    if best is None:
        return None
    run.claim(best[1])
    return valid(parameter, best[1].value)


def _boolean(utterance: Utterance, parameter: Parameter, *, focused: bool) -> bool | None:
    tokens = utterance.tokens
    if focused:
        yes, no = bool(utterance.words & YES_WORDS), bool(utterance.words & NO_WORDS)
        return yes if yes != no else None
    own = {
        stem(w) for w in split_identifier(parameter.name) if w not in STOP_WORDS and w not in ("is", "has", "include")
    }
    for index, token in enumerate(tokens):
        if stem(token) in own:
            negated = any(t in NO_WORDS or t.endswith("n't") for t in tokens[max(0, index - 3) : index])
            return not negated
    return None


def _name(run: Extraction, parameter: Parameter, *, focused: bool) -> Any:
    tokens = run.utterance.tokens
    for cue in NAME_CUES:
        for start in range(len(tokens) - len(cue) + 1):
            if tuple(tokens[start : start + len(cue)]) != cue:
                continue
            words = _plain_words(run, start + len(cue), limit=3)
            if words and not words[0].endswith("ing"):
                run.claim(Span(start, start + len(cue) + len(words), None))
                return valid(parameter, _name_part(parameter, words))
    if focused:
        text = cleaned(run.utterance, strip=("my", "name", "is", "it's", "this", "i'm", "i", "am", "the"))
        return valid(parameter, _name_part(parameter, text.split()[:4])) if text else None
    return None


def _name_part(parameter: Parameter, words: list[str]) -> str:
    """The words of a name as the property wants them: all, or the first or last one."""
    own = set(split_identifier(parameter.name))
    if own & {"first", "given"} and len(words) > 1:
        words = words[:1]
    elif own & {"last", "surname", "family"} and len(words) > 1:
        words = words[-1:]
    return " ".join(words).title()


def _plain_words(run: Extraction, start: int, *, limit: int) -> list[str]:
    words: list[str] = []
    tokens = run.utterance.tokens
    for index in range(start, min(len(tokens), start + limit)):
        token = tokens[index]
        if index in run.used or token in STOP_WORDS or token in FILLERS or token in spoken.NUMBER_WORDS:
            break
        if token in spoken.DATE_WORDS or token in spoken.TIME_WORDS or token[0].isdigit():
            break
        words.append(token)
    return words


def _location(run: Extraction, parameter: Parameter, *, focused: bool) -> Any:
    tokens = run.utterance.tokens
    preferred = parameter.lead_ins
    candidates: list[tuple[int, int, list[str]]] = []
    for index, token in enumerate(tokens):
        if token not in PLACE_PREPOSITIONS or (token in run.lead_ins and token not in preferred):
            continue
        start = index + 1
        while start < len(tokens) and tokens[start] in ("the", "city", "of", "town"):
            start += 1
        words = _plain_words(run, start, limit=3)
        if words:
            rank = 2 if token in preferred else 1 if not preferred and token in ("in", "at", "near", "for") else 0
            candidates.append((rank, index, words))
    if candidates:
        rank, index, words = max(candidates, key=lambda c: (c[0], c[1]))
        value = valid(parameter, " ".join(words).title())
        if value is not None:
            run.claim(Span(index, index + 1 + len(words), None))
            return value
    if focused:
        text = cleaned(run.utterance, strip=("in", "it's", "i'm", "the", "city", "of", "is", "to", "from"))
        return valid(parameter, " ".join(text.split()[:4]).title()) if text else None
    return None


def cleaned(utterance: Utterance, strip: tuple[str, ...] = ()) -> str:
    """The turn without filler words at its start and end ("um so", "please")."""
    tokens = list(utterance.tokens)
    drop = set(LEADING_FILLERS) | set(strip) | FILLERS
    while tokens and tokens[0] in drop:
        tokens.pop(0)
    while tokens and tokens[-1] in ("please", "thanks"):
        tokens.pop()
    if tokens[-2:] == ["thank", "you"]:
        del tokens[-2:]
    return " ".join(tokens)
