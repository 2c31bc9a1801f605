"""Values said aloud, as an offline recognizer writes them (lower case, no punctuation, numbers as
words): numbers, digit strings, e-mail addresses, dates and times, each found as a `Span` of word
positions so that one word serves one value only.

Digits typed in the text ("7:30", "4567", "john@example.com") are understood too, so that typed
chat input and tests read the same.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

UNITS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
}
TEENS = {
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
}
TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fourty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80}
TENS["ninety"] = 90
SCALES = {"thousand": 1000, "million": 1_000_000}
ORDINALS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
    "eleventh": 11,
    "twelfth": 12,
    "thirteenth": 13,
    "fourteenth": 14,
    "fifteenth": 15,
    "sixteenth": 16,
    "seventeenth": 17,
    "eighteenth": 18,
    "nineteenth": 19,
    "twentieth": 20,
    "thirtieth": 30,
}
ZERO_LETTERS = {"oh", "o"}  # "four oh six": a zero only inside a run of digits
REPEATS = {"double": 2, "triple": 3}
NUMBER_WORDS = frozenset(UNITS) | frozenset(TEENS) | frozenset(TENS) | frozenset(SCALES) | {"hundred", "point"}

MONTHS = {name.lower(): index for index, name in enumerate(calendar.month_name) if name}
MONTHS.update({"sept": 9})
WEEKDAYS = {name.lower(): index for index, name in enumerate(calendar.day_name)}
TIME_CUES = frozenset({"at", "around", "by", "about", "from", "until", "till", "before", "after", "for"})
MORNING = frozenset({"am", "morning"})
EVENING = frozenset({"pm", "afternoon", "evening", "tonight", "night"})
DATE_WORDS = (
    frozenset(MONTHS)
    | frozenset(WEEKDAYS)
    | {"today", "tonight", "tomorrow", "yesterday", "week", "weekend", "day", "days", "weeks", "next", "this"}
)
TIME_WORDS = frozenset({"am", "pm", "oclock", "noon", "midday", "midnight", "morning", "afternoon", "evening"})

_TYPED_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_TOKEN = re.compile(r"\d+(?:\.\d+)?(?:st|nd|rd|th)?|[a-z]+(?:'[a-z]+)*")


@dataclass(frozen=True)
class Span:
    start: int
    end: int  # exclusive
    value: Any


@dataclass(frozen=True)
class Number:
    """One number as said: `digits` keeps the spoken digit string ("oh five" -> "05")."""

    start: int
    end: int
    value: int | float
    digits: str
    single_digit: bool = False  # one word 0-9 (or "double five"): a piece of a spelled digit string
    ordinal: bool = False
    weak: bool = False  # "oh": a number only next to other digits


def tokenize(text: str) -> list[str]:
    text = text.lower().replace("\u2019", "'")
    text = re.sub(r"(\d+):(\d\d)", r"\1 \2", text)
    text = re.sub(r"(\d)\s*([ap])\.?\s?m\b\.?", r"\1 \2m", text)
    text = re.sub(r"\b([ap])\.\s?m\.", r"\1m", text)
    tokens = _TOKEN.findall(text)
    merged: list[str] = []
    for word in tokens:
        if word == "m" and merged and merged[-1] in ("a", "p") and len(merged) > 1 and _is_numberish(merged[-2]):
            merged[-1] += "m"  # "seven p m"
        elif word == "clock" and merged and merged[-1] in ("o", "oh"):
            merged[-1] = "oclock"
        elif word == "o'clock":
            merged.append("oclock")
        else:
            merged.append(word)
    return merged


def _is_numberish(word: str) -> bool:
    return word[0].isdigit() or word in NUMBER_WORDS or word in ZERO_LETTERS or word == "oclock"


class Utterance:
    """The tokens of one caller turn and the numbers in them (parsed once, used by every extractor)."""

    def __init__(self, text: str) -> None:
        self.text = text.strip()
        self.typed_emails = [match.group(0).lower() for match in _TYPED_EMAIL.finditer(self.text)]
        self.tokens = tokenize(_TYPED_EMAIL.sub(" ", self.text))
        self.numbers = _numbers(self.tokens)
        self.words = frozenset(self.tokens)

    def phrase_at(self, index: int, phrase: tuple[str, ...]) -> bool:
        return tuple(self.tokens[index : index + len(phrase)]) == phrase

    def has_phrase(self, phrase: tuple[str, ...]) -> bool:
        return any(self.phrase_at(i, phrase) for i in range(len(self.tokens) - len(phrase) + 1))


# Numbers ------------------------------------------------------------------------------------------


def _numbers(tokens: list[str]) -> list[Number]:
    found: list[Number] = []
    i = 0
    while i < len(tokens):
        number = _number_at(tokens, i)
        if number is None:
            i += 1
            continue
        found.append(number)
        i = number.end
    # "oh" is a zero only beside other digits ("four oh six"), never the interjection.
    kept = []
    for index, number in enumerate(found):
        if number.weak:
            before = index > 0 and found[index - 1].end == number.start
            after = index + 1 < len(found) and found[index + 1].start == number.end
            if not (before or after):
                continue
        kept.append(number)
    return kept


def _number_at(tokens: list[str], start: int) -> Number | None:
    word = tokens[start]
    if word[0].isdigit():
        ordinal = word[-2:] in ("st", "nd", "rd", "th")
        raw = word[:-2] if ordinal else word
        value: int | float = float(raw) if "." in raw else int(raw)
        return Number(start, start + 1, value, raw, single_digit=len(raw) == 1, ordinal=ordinal)
    if word in ZERO_LETTERS:
        return Number(start, start + 1, 0, "0", single_digit=True, weak=True)
    if word in REPEATS and start + 1 < len(tokens) and tokens[start + 1] in UNITS:
        digit = str(UNITS[tokens[start + 1]])
        repeated = digit * REPEATS[word]
        return Number(start, start + 2, int(repeated), repeated, single_digit=True)
    if word in ORDINALS:
        return Number(start, start + 1, ORDINALS[word], str(ORDINALS[word]), ordinal=True)
    if word == "a" and start + 1 < len(tokens) and tokens[start + 1] in ("hundred", "thousand", "million"):
        return _cardinal(tokens, start + 1, start, preset=1)
    if word in UNITS or word in TEENS or word in TENS:
        return _cardinal(tokens, start, start)
    if word == "point" and start + 1 < len(tokens) and tokens[start + 1] in UNITS:
        return _decimal(tokens, start + 1, start, 0)
    return None


def _cardinal(tokens: list[str], index: int, start: int, preset: int = 0) -> Number:
    total, chunk, last = 0, preset, "unit" if preset else ""
    end = index
    while end < len(tokens):
        word = tokens[end]
        if word in UNITS and last in ("", "tens", "hundred", "scale"):
            if word == "zero" and last:
                break
            chunk += UNITS[word]
            last = "unit"
        elif word in TEENS and last in ("", "hundred", "scale"):
            chunk += TEENS[word]
            last = "teen"
        elif word in TENS and last in ("", "hundred", "scale"):
            chunk += TENS[word]
            last = "tens"
        elif word in ORDINALS and ORDINALS[word] < 10 and last == "tens":
            chunk += ORDINALS[word]  # "twenty first"
            end += 1
            return Number(start, end, total + chunk, str(total + chunk), ordinal=True)
        elif word == "hundred" and last in ("unit", "teen") and chunk < 100:
            chunk *= 100
            last = "hundred"
        elif word in SCALES and last in ("unit", "teen", "tens", "hundred"):
            total += chunk * SCALES[word]
            chunk, last = 0, "scale"
        elif word == "and" and last in ("hundred", "scale") and end + 1 < len(tokens):
            following = tokens[end + 1]
            if following not in UNITS and following not in TEENS and following not in TENS:
                break
        elif word == "point" and last and end + 1 < len(tokens) and tokens[end + 1] in UNITS:
            return _decimal(tokens, end + 1, start, total + chunk)
        else:
            break
        end += 1
    value = total + chunk
    single = end - start == 1 and tokens[start] in UNITS
    return Number(start, end, value, str(value), single_digit=single)


def _decimal(tokens: list[str], index: int, start: int, whole: int) -> Number:
    digits = ""
    end = index
    while end < len(tokens) and tokens[end] in UNITS:
        digits += str(UNITS[tokens[end]])
        end += 1
    value = float(f"{whole}.{digits}")
    return Number(start, end, value, f"{whole}.{digits}")


def runs(utterance: Utterance) -> list[list[Number]]:
    """Numbers said one right after the other ("four five six seven", "twenty twenty six")."""
    grouped: list[list[Number]] = []
    for number in utterance.numbers:
        if number.ordinal:
            continue
        if grouped and grouped[-1][-1].end == number.start and "." not in number.digits:
            grouped[-1].append(number)
        else:
            grouped.append([number])
    return grouped


def digit_strings(utterance: Utterance) -> list[Span]:
    """Spelled identifiers: each run of numbers read as the digits said ("four five six seven" ->
    "4567", "five five five one two one two" -> "5551212", "twenty twenty six" -> "2026")."""
    spans = []
    for run in runs(utterance):
        if any("." in number.digits for number in run):
            continue
        spans.append(Span(run[0].start, run[-1].end, "".join(number.digits for number in run)))
    return spans


def quantities(utterance: Utterance) -> list[Span]:
    """Amounts: each number on its own, except that a run of single digits ("four five six") or a
    year read in pairs ("twenty twenty six") is one number."""
    spans = []
    for run in runs(utterance):
        if len(run) > 1 and (all(n.single_digit for n in run) or _is_paired_year(run)):
            spans.append(Span(run[0].start, run[-1].end, int("".join(n.digits for n in run))))
        else:
            spans.extend(Span(n.start, n.end, n.value) for n in run if not n.weak)
    return spans


def _is_paired_year(run: list[Number]) -> bool:
    return (
        len(run) == 2
        and isinstance(run[0].value, int)
        and 10 <= run[0].value <= 99
        and isinstance(run[1].value, int)
        and 0 <= run[1].value <= 99
    )


# E-mail addresses ---------------------------------------------------------------------------------

_EMAIL_SYMBOLS = {"dot": ".", "period": ".", "underscore": "_", "dash": "-", "hyphen": "-", "plus": "+"}
_EMAIL_CUES = frozenset({"is", "email", "mail", "address", "it's", "its", "to", "me", "as", "use", "send"})


def emails(utterance: Utterance) -> list[Span]:
    """'john dot smith at example dot com' -> john.smith@example.com. The local part starts after a
    cue word ("my email is ...") or is the single word before "at" with its dotted parts."""
    tokens = utterance.tokens
    spans = [Span(-1, -1, email) for email in utterance.typed_emails]
    for at, word in enumerate(tokens):
        if word != "at" or at == 0:
            continue
        domain_end, domain = _email_domain(tokens, at + 1)
        if not domain:
            continue
        start = at
        while start > 0 and tokens[start - 1] not in _EMAIL_CUES and start > at - 8:
            start -= 1
        local = _email_part(tokens[start:at])
        if not local:
            continue
        spans.append(Span(start, domain_end, f"{local}@{domain}"))
    return spans


def _email_domain(tokens: list[str], index: int) -> tuple[int, str]:
    parts: list[str] = []
    end = index
    while end < len(tokens) and tokens[end] not in _EMAIL_SYMBOLS:
        word = [tokens[end]]
        end += 1
        parts.append(_email_part(word))
        if end + 1 < len(tokens) and tokens[end] in ("dot", "period"):
            end += 1
            continue
        break
    if len(parts) < 2 or not all(parts) or not parts[-1].isalpha():
        return index, ""
    return end, ".".join(parts)


def _email_part(words: list[str]) -> str:
    text = ""
    for word in words:
        if word in _EMAIL_SYMBOLS:
            text += _EMAIL_SYMBOLS[word]
        elif word in UNITS:
            text += str(UNITS[word])
        elif word in ZERO_LETTERS and text[-1:].isdigit():
            text += "0"
        elif word.isalnum():
            text += word
        else:
            return ""
    return text.strip(".-+_")


# Times --------------------------------------------------------------------------------------------


def times(utterance: Utterance, *, bare: bool = False) -> list[Span]:
    """Clock times as "HH:MM". A number is a time when it has a marker ("pm", "o'clock", "half past"),
    follows a cue ("at seven"), or is an hour with minutes ("seven thirty"); with `bare` (the caller
    was asked for a time) a lone hour counts too. Without am/pm, a part of the day said anywhere in the
    turn decides ("tonight at eight" is 20:00, "morning"/"breakfast" keep the hour); without one, hours
    1-7 are afternoon/evening (business hours: "at seven" is 19:00) and 8-11 morning."""
    tokens = utterance.tokens
    spans: list[Span] = []
    for index, word in enumerate(tokens):
        if word in ("noon", "midday"):
            spans.append(Span(index, index + 1, "12:00"))
        elif word == "midnight":
            spans.append(Span(index, index + 1, "00:00"))
    numbers = [n for n in utterance.numbers if not n.ordinal and isinstance(n.value, int)]
    by_start = {n.start: n for n in numbers}
    used_until = -1
    for position, number in enumerate(numbers):
        if number.start < used_until:
            continue
        span = _relative_time(tokens, number, by_start) or _clock_time(tokens, numbers, position, bare=bare)
        if span and span.value is not None:
            spans.append(span)
            used_until = span.end
    return sorted(spans, key=lambda span: span.start)


def _relative_time(tokens: list[str], number: Number, by_start: dict[int, Number]) -> Span | None:
    # "twenty past six", "ten to nine"
    end = number.end
    if end < len(tokens) and tokens[end] == "minutes":
        end += 1
    if end < len(tokens) and tokens[end] in ("past", "after", "to") and end + 1 in by_start:
        hour = by_start[end + 1]
        assert isinstance(number.value, int) and isinstance(hour.value, int)  # times() passes whole numbers only
        if 1 <= number.value <= 30 and 1 <= hour.value <= 12:
            minutes = number.value if tokens[end] != "to" else 60 - number.value
            hour_value = hour.value if tokens[end] != "to" else hour.value - 1 or 12
            return _finish_time(tokens, number.start, hour.end, hour_value, minutes)
    return None


def _clock_time(tokens: list[str], numbers: list[Number], position: int, *, bare: bool) -> Span | None:
    number = numbers[position]
    assert isinstance(number.value, int)  # times() passes whole numbers only
    start, end, hour, minutes = number.start, number.end, number.value, 0
    quarter = _quarter_before(tokens, start)
    if quarter:
        if not 1 <= hour <= 12:
            return None
        back, minutes, to = quarter
        return _finish_time(tokens, back, end, (hour - 1 or 12) if to else hour, minutes)
    has_minutes = False
    following = numbers[position + 1 : position + 3]
    if following and following[0].start == end:
        first = following[0]
        if first.digits == "0" and len(following) > 1 and following[1].start == first.end and following[1].single_digit:
            assert isinstance(following[1].value, int)  # times() passes whole numbers only
            minutes, end, has_minutes = following[1].value, following[1].end, True  # "seven oh five"
        elif 10 <= first.value <= 59 and not first.single_digit:
            assert isinstance(first.value, int)  # times() passes whole numbers only
            minutes, end, has_minutes = first.value, first.end, True  # "seven thirty", "7 30"
        elif first.digits in ("00",):
            end, has_minutes = first.end, True
    if end < len(tokens) and tokens[end] == "hundred" and 0 <= hour <= 23:
        end, has_minutes = end + 1, True  # "nineteen hundred"
    marker = end < len(tokens) and tokens[end] in ("am", "pm", "oclock")
    cue = start > 0 and tokens[start - 1] in TIME_CUES and tokens[start - 1] != "for"
    if not (0 <= hour <= 23 and (marker or cue or has_minutes or bare)):
        return None
    if hour > 12 and not (has_minutes and (cue or marker)):
        return None  # "twenty twenty six" is a year, "at nineteen thirty" a time
    inside_digits = any(n.end == start or n.start == end for n in numbers)
    if inside_digits and not marker:
        return None  # "five five five oh one two three" is a phone number
    return _finish_time(tokens, start, end, hour, minutes)


def _quarter_before(tokens: list[str], start: int) -> tuple[int, int, bool] | None:
    # "half past six", "quarter past seven", "a quarter to eight"
    if start >= 2 and tokens[start - 1] in ("past", "after", "to"):
        word = tokens[start - 2]
        back = start - 2
        if word in ("half", "quarter"):
            if back > 0 and tokens[back - 1] == "a":
                back -= 1
            minutes = 30 if word == "half" else 15
            if tokens[start - 1] == "to":
                return back, 60 - minutes, True
            return back, minutes, False
    return None


def _finish_time(tokens: list[str], start: int, end: int, hour: int, minutes: int) -> Span:
    following = tokens[end : end + 4]
    if following[:1] == ["oclock"]:
        end += 1
        following = tokens[end : end + 4]
    suffix = following[0] if following else ""
    if suffix in ("am", "pm"):
        end += 1
    elif following[:3] in (["in", "the", "morning"], ["in", "the", "afternoon"], ["in", "the", "evening"]):
        suffix = following[2]
        end += 3
    elif following[:2] == ["at", "night"] or following[:1] == ["tonight"]:
        suffix = "night"
    elif following[:1] == ["this"] and following[1:2] in (["morning"], ["afternoon"], ["evening"]):
        suffix = following[1]
    if suffix not in MORNING and suffix not in EVENING:
        suffix = _daypart(tokens)
    if hour <= 12:
        if suffix in MORNING:
            hour = 0 if hour == 12 else hour
        elif suffix in EVENING:
            hour = hour if hour == 12 else hour + 12
        elif 1 <= hour <= 7:
            hour += 12  # business hours: "at seven" is 19:00
    if hour > 23 or minutes > 59:
        return Span(start, end, None)
    return Span(start, end, f"{hour:02d}:{minutes:02d}")


def _daypart(tokens: list[str]) -> str:
    """A part of the day said anywhere in the turn ("tonight at eight", "breakfast at nine")."""
    words = set(tokens)
    evening, morning = bool(words & (EVENING | {"dinner"})), bool(words & (MORNING | {"breakfast"}))
    return "pm" if evening and not morning else "am" if morning and not evening else ""


# Dates --------------------------------------------------------------------------------------------


def dates(utterance: Utterance, today: date, *, bare: bool = False) -> list[Span]:
    """Calendar dates: "today", "tomorrow", "the day after tomorrow", "in three days", "next week",
    weekdays ("friday" is the next Friday on or after today, "next friday" the next one after today),
    "march third", "the fifth of june", "june 5 twenty twenty six"; a month day without a year is the
    next such day on or after today; "on the fifth" (or a lone day when asked) is in this month or the next."""
    tokens = utterance.tokens
    ordinals = {n.start: n for n in utterance.numbers}
    spans: list[Span] = []
    index = 0
    while index < len(tokens):
        span = _date_at(tokens, index, today, ordinals, bare=bare)
        if span and span.value is not None:
            spans.append(span)
            index = span.end
        else:
            index += 1
    return spans


def _date_at(tokens: list[str], i: int, today: date, numbers: dict[int, Number], *, bare: bool) -> Span | None:
    word = tokens[i]
    if tokens[i : i + 4] == ["the", "day", "after", "tomorrow"]:
        return Span(i, i + 4, today + timedelta(days=2))
    if tokens[i : i + 3] == ["day", "after", "tomorrow"]:
        return Span(i, i + 3, today + timedelta(days=2))
    if word in ("today", "tonight"):
        return Span(i, i + 1, today)
    if word == "tomorrow":
        return Span(i, i + 1, today + timedelta(days=1))
    if word == "yesterday":
        return Span(i, i + 1, today - timedelta(days=1))
    if word == "in" and i + 2 < len(tokens):
        amount = numbers.get(i + 1)
        if amount is not None and isinstance(amount.value, int) and not amount.ordinal:
            count, unit_at = amount.value, amount.end
        else:
            count, unit_at = (1, i + 2) if tokens[i + 1] == "a" else (0, 0)
        unit = tokens[unit_at] if count and unit_at < len(tokens) else ""
        if unit in ("day", "days", "week", "weeks"):
            days = count * (7 if unit.startswith("week") else 1)
            return Span(i, unit_at + 1, today + timedelta(days=days))
    if tokens[i : i + 2] == ["next", "week"]:
        return Span(i, i + 2, today + timedelta(days=7))
    if word == "weekend" or tokens[i : i + 2] in (["this", "weekend"], ["next", "weekend"]):
        end = i + 1 if word == "weekend" else i + 2
        saturday = today + timedelta(days=(5 - today.weekday()) % 7)
        return Span(i, end, saturday + timedelta(days=7) if word == "next" else saturday)
    if word in ("next", "this", "coming") and i + 1 < len(tokens) and tokens[i + 1] in WEEKDAYS:
        ahead = (WEEKDAYS[tokens[i + 1]] - today.weekday()) % 7
        if word == "next" or (word == "coming" and ahead == 0):
            ahead = ahead or 7
        return Span(i, i + 2, today + timedelta(days=ahead))
    if word in WEEKDAYS:
        return Span(i, i + 1, today + timedelta(days=(WEEKDAYS[word] - today.weekday()) % 7))
    if word in MONTHS:
        day = numbers.get(i + 1) or (numbers.get(i + 2) if tokens[i + 1 : i + 2] == ["the"] else None)
        if day and isinstance(day.value, int) and 1 <= day.value <= 31:
            return _with_year(tokens, i, day.end, MONTHS[word], day.value, today, numbers)
        return None
    start = i + 1 if word == "the" else i
    day = numbers.get(start)
    if day is None or not isinstance(day.value, int) or not 1 <= day.value <= 31:
        return None
    if tokens[day.end : day.end + 1] == ["of"] and day.end + 1 < len(tokens) and tokens[day.end + 1] in MONTHS:
        return _with_year(tokens, i, day.end + 2, MONTHS[tokens[day.end + 1]], day.value, today, numbers)
    if day.end < len(tokens) and tokens[day.end] in MONTHS and (day.ordinal or word == "the"):
        return _with_year(tokens, i, day.end + 1, MONTHS[tokens[day.end]], day.value, today, numbers)
    said_on = i > 0 and tokens[i - 1] == "on" and word == "the"
    if day.ordinal and (said_on or (bare and word == "the") or (bare and i == 0)):
        return _day_of_month(i, day.end, day.value, today)
    return None


def _with_year(
    tokens: list[str], start: int, end: int, month: int, day: int, today: date, numbers: dict[int, Number]
) -> Span:
    year: int | None = None
    following = numbers.get(end)
    if following is not None:
        second = numbers.get(following.end)
        if 1900 <= following.value <= 2100 and isinstance(following.value, int):
            year, end = following.value, following.end
        elif (
            second is not None
            and isinstance(following.value, int)
            and 19 <= following.value <= 21
            and isinstance(second.value, int)
            and second.value < 100
        ):
            # "nineteen ninety" as a year; a decimal first number ("19.5 26") is no year.
            year, end = following.value * 100 + second.value, second.end
    try:
        if year is not None:
            return Span(start, end, date(year, month, day))
        found = date(today.year, month, day)
        if found < today:
            found = date(today.year + 1, month, day)
        return Span(start, end, found)
    except ValueError:
        return Span(start, end, None)


def _day_of_month(start: int, end: int, day: int, today: date) -> Span:
    year, month = today.year, today.month
    if day < today.day:
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    try:
        return Span(start, end, date(year, month, day))
    except ValueError:
        return Span(start, end, None)
