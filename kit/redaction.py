"""Personal data redaction (an agent's `redactPii`): detected values become placeholders such as
`[EMAIL]` in what the service stores. Offline, no model: well-kept libraries on candidates found by
patterns (`phonenumbers`' matcher for phone numbers, python-stdnum's Luhn, IBAN and US SSN checks, the
standard library's `ipaddress`), plus two rules for speech transcripts: digits said as words ("four
one five ...") are read as digits, and e-mail addresses said as "john dot smith at example dot com"
are found. The docs/guides/redaction.md section lists exactly what is and is not detected.

    redact_for_agent(agent, value)       # the agent's setting (and language); str or any JSON value
    redact_value(value, categories)      # explicit categories
    parse_setting(value)                 # the API field: "off", "all" or a list of categories

The kit knows no domain: an agent is anything with `redact_pii` (and optionally `language`)
attributes, or a mapping with those keys, or the setting itself.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
from collections.abc import Iterable, Mapping
from typing import Any

import phonenumbers
from stdnum import iban as stdnum_iban
from stdnum import luhn
from stdnum.us import ssn as stdnum_ssn

# In the order of precedence when two detections overlap (the first wins).
CATEGORIES = ("email", "credit_card", "iban", "ssn", "ip_address", "date_of_birth", "phone_number")
# Offered by similar services but not detectable offline without a language model.
UNAVAILABLE = {"person_name": "person_name needs a named-entity model and is not available offline"}
PLACEHOLDERS = {category: f"[{category.upper()}]" for category in CATEGORIES}
OFF, ALL = "off", "all"
# The order shown in messages and docs.
ALLOWED_LIST = ("email", "phone_number", "credit_card", "ssn", "iban", "ip_address", "date_of_birth")

# A language without a region: the region whose national phone formats are recognized.
_DEFAULT_REGIONS = {"en": "US", "es": "ES", "it": "IT", "fr": "FR", "de": "DE", "pt": "BR", "nl": "NL"}


# --- the setting ---------------------------------------------------------------------------------


def parse_setting(value: Any) -> str | list[str]:
    """The API value of `redactPii`, normalized: "off", "all" or a sorted list of known categories.
    ValueError with a message naming the allowed values otherwise."""
    allowed = f'"off", "all" or a non-empty list of: {", ".join(ALLOWED_LIST)}'
    if value is None or value == OFF:
        return OFF
    if value == ALL:
        return ALL
    if isinstance(value, str) or not isinstance(value, list) or not value:
        raise ValueError(f"Must be {allowed}.")
    chosen: set[str] = set()
    for item in value:
        if not isinstance(item, str):
            raise ValueError(f"Must be {allowed}.")
        if item in UNAVAILABLE:
            raise ValueError(f"{UNAVAILABLE[item]}; allowed: {', '.join(ALLOWED_LIST)}.")
        if item not in CATEGORIES:
            raise ValueError(f"Unknown category {item[:40]!r}; allowed: {', '.join(ALLOWED_LIST)}.")
        chosen.add(item)
    return [c for c in ALLOWED_LIST if c in chosen]


def categories_of(setting: Any) -> frozenset[str]:
    """The categories a stored setting turns on (none for "off" or anything unreadable)."""
    if setting == ALL:
        return frozenset(CATEGORIES)
    if isinstance(setting, list | tuple | set | frozenset):
        return frozenset(c for c in setting if c in CATEGORIES)
    return frozenset()


def region_of(language: str | None) -> str | None:
    """The phone region of a language tag: en-GB -> GB, it -> IT, es-419 -> ES (the language's default)."""
    parts = (language or "").split("-")
    for part in parts[1:]:
        if len(part) == 2 and part.isalpha():
            return part.upper()
    return _DEFAULT_REGIONS.get(parts[0].lower()) if parts[0] else None


def redact_for_agent(agent_or_settings: Any, value: Any) -> Any:
    """`value` (a string, or any JSON value: strings are redacted at any depth) with the PII of the
    agent's `redactPii` categories replaced by placeholders; unchanged when redaction is off.
    `agent_or_settings`: an agent (attributes `redact_pii`, `language`), a mapping with those keys, or
    the setting itself ("off", "all", a list of categories). Phone numbers without a country code are
    read in the language's region (en-GB: British numbers; en-US, or no language: American)."""
    if isinstance(agent_or_settings, Mapping):
        setting, language = agent_or_settings.get("redact_pii"), agent_or_settings.get("language")
    elif hasattr(agent_or_settings, "redact_pii"):
        setting, language = agent_or_settings.redact_pii, getattr(agent_or_settings, "language", None)
    else:
        setting, language = agent_or_settings, None
    categories = categories_of(setting)
    if not categories:
        return value
    # Without a language (the setting alone), national numbers are read as in the US.
    return redact_value(value, categories, region=region_of(language) if language else "US")


def redact_value(value: Any, categories: Iterable[str], *, region: str | None = "US") -> Any:
    """Strings redacted at any depth of lists and dicts (keys kept); a number that is PII on its own
    (a card number sent as a JSON number) becomes its placeholder string; anything else unchanged."""
    chosen = frozenset(categories)
    if not chosen:
        return value
    if isinstance(value, str):
        return redact_text(value, chosen, region=region)
    if isinstance(value, dict):
        return {key: redact_value(item, chosen, region=region) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(item, chosen, region=region) for item in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        text = str(value)
        redacted = redact_text(text, chosen, region=region)
        return value if redacted == text else redacted
    return value


# --- text ----------------------------------------------------------------------------------------

Span = tuple[int, int, str]  # start, end, category


def redact_text(text: str, categories: Iterable[str], *, region: str | None = "US") -> str:
    """`text` with every detected value of `categories` replaced by its placeholder."""
    chosen = frozenset(categories) & frozenset(CATEGORIES)
    if not chosen or not text:
        return text
    spans = _select(detect(text, chosen, region=region))
    for start, end, category in sorted(spans, reverse=True):
        text = text[:start] + PLACEHOLDERS[category] + text[end:]
    return text


def detect(text: str, categories: frozenset[str], *, region: str | None = "US") -> list[Span]:
    """Every detection of `categories` in `text`, overlapping ones included (spans of the original)."""
    spans: list[Span] = []
    if "email" in categories:
        spans += [(m.start(), m.end(), "email") for m in _EMAIL.finditer(text)]
        spans += _spoken_emails(text)
    numeric = categories - {"email"}
    if numeric:
        normal, origin = _digits_from_words(text)
        # Identifiers are not personal data: no number is taken from inside a UUID or a word.
        ids = [(m.start(), m.end()) for m in _UUID.finditer(text)]
        for start, end, category in _detect_numeric(normal, numeric, region):
            start, end = origin[start][0], origin[end - 1][1]
            if _inside_word(text, start, end) or any(start < b and end > a for a, b in ids):
                continue
            spans.append((start, end, category))
    return spans


def _select(spans: list[Span]) -> list[Span]:
    """Non-overlapping spans: by category precedence, then the longest, then the first."""
    rank = {category: i for i, category in enumerate(CATEGORIES)}
    chosen: list[Span] = []
    for span in sorted(spans, key=lambda s: (rank[s[2]], -(s[1] - s[0]), s[0])):
        if all(span[1] <= other[0] or span[0] >= other[1] for other in chosen):
            chosen.append(span)
    return chosen


_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE)
# E-mail: the WHATWG HTML "valid e-mail address" grammar, widened to internationalised addresses
# (RFC 6530: letters and digits of any script in the user part and the domain, "maría@exämple.de"), found
# inside text (its domain needs a dot). `[^\W_]` is a letter or digit of any script.
_LABEL = r"[^\W_](?:(?:[^\W_]|-){0,61}[^\W_])?"
_EMAIL = re.compile(rf"(?<![\w.!#$%&'*+/=?^`{{|}}~-])[\w.!#$%&'*+/=?^`{{|}}~-]+[@\uff20]{_LABEL}(?:\.{_LABEL})+")
# Written out to dodge harvesters or said aloud: "maria (at) example (dot) com", "maria [at] example.com",
# "maria @ example . com", "john dot smith at example dot com", "j smith underscore 2 at mail dot co dot uk".
# Spaces around the markers are bounded ({0,3}): a long run of spaces costs no backtracking.
_MARKED_DOT = r"\s{0,3}[(\[{<]\s{0,3}(?:dot|period|point)\s{0,3}[)\]}>]\s{0,3}"
_WORD_DOT = r"\s{1,3}(?:dot|period|point)\s{1,3}"
_SPOKEN_SEPARATOR = rf"(?:\s{{1,3}}(?:dot|period|point|underscore|dash|hyphen|minus)\s{{1,3}}|{_MARKED_DOT}|[._+-])"
_TLDS = (
    "com|org|net|edu|gov|mil|int|info|biz|io|ai|co|me|us|uk|ca|au|de|fr|es|it|nl|be|ch|at|se|no|dk|fi|ie|pt|br|"
    "mx|ar|in|jp|cn|ru|pl|eu|app|dev|xyz|online|email"
)
# Found from each "at": the user part in the 64 characters before it, the domain in the 128 after it
# (bounded windows, so that no text makes the search slow). After a marked "at" ("(at)", "[at]", "{at}", a
# spaced "@") the domain may end in any top-level domain and its dots may be spaced ("example . com"); after
# a bare spoken " at " only in a common one, with a spoken or written dot ("meet me at the office dot").
_SPOKEN_AT = re.compile(
    r"\s{0,3}[(\[{<]\s{0,3}at\s{0,3}[)\]}>]\s{0,3}|\s{0,3}[@\uff20]\s{0,3}|\s{1,3}at\s{1,3}", re.IGNORECASE
)
_SPOKEN_USER = re.compile(rf"(?<![\w.+-])[^\W_]+(?:{_SPOKEN_SEPARATOR}[^\W_]+)*\Z", re.IGNORECASE)
_SPOKEN_DOMAIN = re.compile(
    rf"[^\W_]+(?:{_SPOKEN_SEPARATOR}[^\W_]+)*(?:{_WORD_DOT}|{_MARKED_DOT}|\.)(?:{_TLDS})\b", re.IGNORECASE
)
_MARKED_DOMAIN = re.compile(
    rf"[^\W_]+(?:(?:{_SPOKEN_SEPARATOR}|\s{{0,3}}\.\s{{0,3}})[^\W_]+)*"
    rf"(?:{_WORD_DOT}|{_MARKED_DOT}|\s{{0,3}}\.\s{{0,3}})[^\W\d_]{{2,24}}\b",
    re.IGNORECASE,
)


def _spoken_emails(text: str) -> list[Span]:
    spans: list[Span] = []
    for at in _SPOKEN_AT.finditer(text):
        window = max(0, at.start() - 64)
        user = _SPOKEN_USER.search(text, window, at.start())
        pattern = _SPOKEN_DOMAIN if at.group().strip().lower() == "at" else _MARKED_DOMAIN
        domain = pattern.match(text, at.end(), min(len(text), at.end() + 128))
        if user is not None and domain is not None:
            spans.append((user.start(), domain.end(), "email"))
    return spans


# Digits said as words. A run of at least _MIN_SPOKEN_DIGITS digits with at least one said as a word
# ("four one five 555 zero one zero zero") is read as the digits without separators; "double five" and
# "triple oh" repeat a digit. "oh" counts as zero only inside such a run.
_MIN_SPOKEN_DIGITS = 4
_DIGIT_WORDS = {
    "zero": "0",
    "oh": "0",
    "o": "0",
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
}
_REPEATS = {"double": 2, "triple": 3}
_DIGIT_WORD = r"(?:zero|oh|one|two|three|four|five|six|seven|eight|nine|o|\d+)"
_DIGIT_RUN = re.compile(
    rf"\b(?:(?:double|triple)\s+)?{_DIGIT_WORD}(?:[\s,.-]+(?:(?:double|triple)\s+)?{_DIGIT_WORD})*\b",
    re.IGNORECASE,
)


def _digits_from_words(text: str) -> tuple[str, list[tuple[int, int]]]:
    """`text` with spoken digit runs replaced by digits, and for each character of the result the
    span of the original it came from (a converted run maps every digit to the whole run)."""
    parts: list[str] = []
    origin: list[tuple[int, int]] = []
    last = 0
    for match in _DIGIT_RUN.finditer(text):
        tokens = re.findall(rf"\b(?:double|triple|{_DIGIT_WORD})\b", match.group(0), re.IGNORECASE)
        if all(token.isdigit() for token in tokens):
            continue
        digits, repeat = [], 1
        for token in tokens:
            lower = token.lower()
            if lower in _REPEATS:
                repeat = _REPEATS[lower]
                continue
            digits.append((token if token.isdigit() else _DIGIT_WORDS[lower]) * repeat)
            repeat = 1
        joined = "".join(digits)
        if len(joined) < _MIN_SPOKEN_DIGITS:
            continue
        parts.append(text[last : match.start()])
        origin.extend((i, i + 1) for i in range(last, match.start()))
        parts.append(joined)
        origin.extend([(match.start(), match.end())] * len(joined))
        last = match.end()
    parts.append(text[last:])
    origin.extend((i, i + 1) for i in range(last, len(text)))
    return "".join(parts), origin


# Card numbers: 13 to 19 digits, optionally grouped by spaces or dashes, Luhn-valid, with a known
# issuer prefix (Visa, Mastercard, American Express, Discover, Diners Club, JCB, UnionPay, Maestro).
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_CARD_PREFIX = re.compile(r"^(?:2[2-7]|3[0-8]|4|5[0-8]|6)")
# US social security numbers: 3-2-4 digits with dashes or spaces anywhere; nine digits in a row only
# after "social security" or "SSN" (an order number is nine digits too).
_SSN_GROUPED = re.compile(r"(?<![\d-])\d{3}([- ])\d{2}\1\d{4}(?![\d-])")
_SSN_PLAIN = re.compile(r"(?<![\d-])\d{9}(?![\d-])")
_SSN_CUE = re.compile(r"\b(?:social\s+security|ssn|s\s*s\s*n)\b", re.IGNORECASE)
# IBANs: a country code, two check digits and up to 30 letters or digits, optionally in groups of four.
_IBAN = re.compile(r"\b[A-Za-z]{2}\d{2}(?:[ ]?[A-Za-z0-9]){10,30}\b")
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?:%\w+)?(?![\w:])")
# Dates of birth: a date after a cue ("born", "birth", "birthday", "DOB") within 40 characters.
_DOB_CUE = re.compile(r"\b(?:born|birth|birthday|d\.?o\.?b\.?)\b", re.IGNORECASE)
_MONTHS = {
    name: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for name in names
}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_DATES = (
    (re.compile(r"\b(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\b"), ("y", "m", "d")),
    (re.compile(r"\b(\d{1,2})[-/.](\d{1,2})[-/.](\d{4}|\d{2})\b"), ("a", "b", "y")),
    (re.compile(rf"\b({_MONTH})\.?\s+{_DAY},?\s+(\d{{4}})\b", re.IGNORECASE), ("M", "d", "y")),
    (re.compile(rf"\b{_DAY}\s+(?:of\s+)?({_MONTH})\.?,?\s+(\d{{4}})\b", re.IGNORECASE), ("d", "M", "y")),
)


def _detect_numeric(text: str, categories: frozenset[str], region: str | None) -> list[Span]:
    spans: list[Span] = []
    if "credit_card" in categories:
        for m in _CARD.finditer(text):
            digits = re.sub(r"\D", "", m.group(0))
            if 13 <= len(digits) <= 19 and _CARD_PREFIX.match(digits) and luhn.is_valid(digits):
                spans.append((m.start(), m.end(), "credit_card"))
    if "ssn" in categories:
        for m in _SSN_GROUPED.finditer(text):
            if stdnum_ssn.is_valid(m.group(0).replace(" ", "-")):
                spans.append((m.start(), m.end(), "ssn"))
        for m in _SSN_PLAIN.finditer(text):
            if _SSN_CUE.search(text, max(0, m.start() - 60), m.start()) and stdnum_ssn.is_valid(m.group(0)):
                spans.append((m.start(), m.end(), "ssn"))
    if "iban" in categories:
        spans += _ibans(text)
    if "ip_address" in categories:
        for pattern in (_IPV4, _IPV6):
            for m in pattern.finditer(text):
                try:
                    ipaddress.ip_address(m.group(0))
                except ValueError:
                    continue
                spans.append((m.start(), m.end(), "ip_address"))
    if "date_of_birth" in categories:
        spans += _dates_of_birth(text)
    if "phone_number" in categories:
        leniency = phonenumbers.Leniency.POSSIBLE  # also fictional and not yet allocated numbers
        for match in phonenumbers.PhoneNumberMatcher(text, region, leniency=leniency):
            spans.append((match.start, match.end, "phone_number"))
    return spans


def _inside_word(text: str, start: int, end: int) -> bool:
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    return before.isalnum() or after.isalnum() or before == "_" or after == "_"


def _ibans(text: str) -> list[Span]:
    spans: list[Span] = []
    for m in _IBAN.finditer(text):
        # The pattern may run on into the next word ("... 00 and"): the longest valid prefix of groups.
        groups = m.group(0).split(" ")
        for count in range(len(groups), 0, -1):
            candidate = " ".join(groups[:count])
            if stdnum_iban.is_valid(candidate):
                spans.append((m.start(), m.start() + len(candidate), "iban"))
                break
    return spans


def _dates_of_birth(text: str) -> list[Span]:
    spans: list[Span] = []
    for cue in _DOB_CUE.finditer(text):
        window_end = min(len(text), cue.end() + 40)
        for pattern, order in _DATES:
            for m in pattern.finditer(text, cue.end(), window_end):
                if _is_date(m.groups(), order):
                    spans.append((m.start(), m.end(), "date_of_birth"))
    return spans


def _is_date(groups: tuple[str | Any, ...], order: tuple[str, ...]) -> bool:
    values = dict(zip(order, groups, strict=True))
    year = int(values["y"])
    if year < 100:
        year += 1900 if year > datetime.date.today().year % 100 else 2000
    if "M" in values:
        month, days = _MONTHS[values["M"].lower()], [int(values["d"])]
        candidates = [(month, days[0])]
    elif "m" in values:
        candidates = [(int(values["m"]), int(values["d"]))]
    else:  # day and month in either order (03/04/1990 is a date whichever convention)
        a, b = int(values["a"]), int(values["b"])
        candidates = [(a, b), (b, a)]
    for month, day in candidates:
        try:
            date = datetime.date(year, month, day)
        except ValueError:
            continue
        if date <= datetime.date.today() and year >= 1900:
            return True
    return False
