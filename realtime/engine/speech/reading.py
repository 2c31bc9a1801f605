"""Numbers as a caller expects to hear them: what the voice is given to say (the spoken form), never
what is stored or shown (the transcript keeps the text as written: "555 0199", "8:30 am", "$120").

- Phone numbers (found by the `phonenumbers` library, in the region of the agent's language; any
  number written with its +country code) are read digit by digit, group by group: "555 0199" ->
  "five five five, zero one nine nine"; "+1 (415) 555-0123" -> "plus one, four one five, five five
  five, zero one two three". In every language (num2words' digits).
- In English, also: times ("8:30 am" -> "eight thirty a m", "9:05" -> "nine oh five", "5 pm" -> "five p
  m", "10:00" -> "ten o'clock"), prices ("$120" -> "one hundred and twenty dollars", "€4.50" -> "four
  euros fifty"), percentages ("15%" -> "fifteen percent") and ordinals ("1st" -> "first"). Other
  numbers are left to the voice, which reads them as numbers.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import phonenumbers
from num2words import num2words

# The region whose national phone formats are looked for, from the language's own region.
_DEFAULT_REGION = "US"
_CURRENCIES = {"$": ("dollar", "dollars"), "€": ("euro", "euros"), "£": ("pound", "pounds")}
_HALF = r"([ap])(?:\.\s?m\.|\s?m\b)"  # am, a m, a.m.
_TIME = re.compile(r"(?<![\d:])([01]?\d|2[0-3]):([0-5]\d)(?:\s*" + _HALF + r")?(?![\d:])", re.IGNORECASE)
_HOUR = re.compile(r"(?<![\d:.,])(1[0-2]|0?[1-9])\s*" + _HALF, re.IGNORECASE)
_PRICE = re.compile(r"([$€£])\s?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d{2}))?(?!\d)")
_PERCENT = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s?%")
_ORDINAL = re.compile(r"\b(\d+)(st|nd|rd|th)\b", re.IGNORECASE)


def _words(number: int | float, lang: str, **options: str) -> str:
    try:
        return str(num2words(number, lang=lang, **options))
    except (NotImplementedError, OverflowError):
        return str(num2words(number, lang="en", **options))


def _lang(language: str) -> str:
    return (language or "en").split("-")[0].lower() or "en"


def _region(language: str) -> str:
    parts = (language or "").replace("_", "-").split("-")
    return parts[1].upper() if len(parts) > 1 and len(parts[1]) == 2 else _DEFAULT_REGION


def digits_aloud(raw: str, language: str = "en-US") -> str:
    """A phone number read digit by digit, its written groups apart: "555 0199" -> "five five five,
    zero one nine nine"."""
    lang = _lang(language)
    plus = "plus " if raw.strip().startswith("+") and lang == "en" else ""
    groups = [group for group in re.split(r"\D+", raw) if group]
    spoken = [" ".join(_words(int(digit), lang) for digit in group) for group in groups]
    return plus + ", ".join(spoken)


def _phones(text: str, language: str) -> str:
    try:
        found = list(phonenumbers.PhoneNumberMatcher(text, _region(language), leniency=phonenumbers.Leniency.POSSIBLE))
    except Exception:  # noqa: BLE001 - the library refuses odd input: the text stays as it is
        return text
    for match in reversed(found):
        text = text[: match.start] + digits_aloud(match.raw_string, language) + text[match.end :]
    return text


def _time(match: re.Match[str]) -> str:
    hour, minute, half = int(match.group(1)), int(match.group(2)), match.group(3)
    words = _words(hour, "en")
    if minute == 0:
        words += "" if half else " o'clock"
    elif minute < 10:
        words += f" oh {_words(minute, 'en')}"
    else:
        words += f" {_words(minute, 'en')}"
    return words + (f" {half.lower()} m{_sentence_end(match)}" if half else "")


def _sentence_end(match: re.Match[str]) -> str:
    """The period of "p.m." that also ends the sentence."""
    after = match.string[match.end() :]
    return "." if match.group(0).endswith(".") and (not after.strip() or after[:2].strip()[:1].isupper()) else ""


def _hour(match: re.Match[str]) -> str:
    return f"{_words(int(match.group(1)), 'en')} {match.group(2).lower()} m{_sentence_end(match)}"


def _price(match: re.Match[str]) -> str:
    one, many = _CURRENCIES[match.group(1)]
    whole = int(match.group(2).replace(",", ""))
    spoken = f"{_words(whole, 'en')} {one if whole == 1 else many}"
    cents = int(match.group(3) or 0)
    if cents:
        spoken += f" {_words(cents, 'en')}"
    return spoken


def _percent(match: re.Match[str]) -> str:
    value = match.group(1)
    return f"{_words(float(value) if '.' in value else int(value), 'en')} percent"


def _ordinal(match: re.Match[str]) -> str:
    return _words(int(match.group(1)), "en", to="ordinal")


_ENGLISH: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (_PRICE, _price),
    (_TIME, _time),
    (_HOUR, _hour),
    (_PERCENT, _percent),
    (_ORDINAL, _ordinal),
)


def spoken_form(text: str, language: str = "en-US") -> str:
    """`text` as the voice should say it (see the module's docstring); unchanged when it has no digit."""
    if not any(character.isdigit() for character in text):
        return text
    text = _phones(text, language)
    if _lang(language) == "en":
        for pattern, read in _ENGLISH:
            text = pattern.sub(read, text)
    return text
