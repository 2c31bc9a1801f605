"""An agent's `interruption`: what the caller's speech does while the agent is speaking (docs/guides/conversation.md).

`{mode, minWords, backchannels, resumeAfterMs}` (default `{"mode": "adaptive", "minWords": 1,
"backchannels": null, "resumeAfterMs": 400}`):
- `mode`: "adaptive" (default: the agent goes on speaking until the caller's words are a real interruption:
  at least `minWords` words that are not a backchannel; a cough, noise or "okay" does not cut it), "vad"
  (any speech cuts the agent; when what cut it held no words, the agent resumes the sentence it was cut in
  after `resumeAfterMs`) or "off" (the caller cannot cut the agent; what they say is the next turn);
- `minWords`: 0 to 5, the words outside backchannels that make a real interruption (0 and 1: one word);
- `backchannels`: the phrases that acknowledge without taking the turn ("okay", "mm-hmm", "I see"); null
  (default) is the default list of the agent's language (BACKCHANNELS), [] none;
- `resumeAfterMs`: 0 to 5000, how long after a false interruption the agent resumes (vad).

A key left out takes its default; the setting is stored normalized (every key, phrases trimmed and without
repeats), so readers need no defaults. The engine reads it through `interruption_for(agent)`.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from agents.models import DEFAULT_INTERRUPTION, default_interruption

MODE_ADAPTIVE = "adaptive"
MODE_VAD = "vad"
MODE_OFF = "off"
MODES = (MODE_ADAPTIVE, MODE_VAD, MODE_OFF)
MIN_WORDS_RANGE = (0, 5)
RESUME_AFTER_MS_RANGE = (0, 5000)
MAX_BACKCHANNELS = 50
MAX_BACKCHANNEL_CHARS = 40
KEYS = tuple(DEFAULT_INTERRUPTION)
DEFAULT = DEFAULT_INTERRUPTION

# What the recognizer heard while the agent spoke.
KIND_BACKCHANNEL = "backchannel"
KIND_NOISE = "noise"
KIND_REAL = "real"

# The default backchannels per language (by the primary subtag of the agent's language; others: English).
BACKCHANNELS: dict[str, tuple[str, ...]] = {
    "en": (
        "okay",
        "ok",
        "yeah",
        "yes",
        "yep",
        "yup",
        "uh-huh",
        "mm-hmm",
        "mhm",
        "right",
        "I see",
        "sure",
        "got it",
        "alright",
        "all right",
        "oh",
        "hmm",
        "oh okay",
        "cool",
        "great",
        "perfect",
        "exactly",
        "of course",
    ),
    "es": (
        "vale",
        "sí",
        "claro",
        "ajá",
        "ya",
        "bueno",
        "okey",
        "ok",
        "de acuerdo",
        "entiendo",
        "ah",
        "mhm",
        "perfecto",
        "exacto",
        "ya veo",
        "órale",
    ),
    "it": (
        "sì",
        "ok",
        "okay",
        "va bene",
        "certo",
        "capisco",
        "esatto",
        "giusto",
        "già",
        "d'accordo",
        "ah",
        "mhm",
        "perfetto",
        "ho capito",
    ),
    "fr": ("oui", "d'accord", "ok", "ouais", "hum", "ah", "je vois", "bien sûr", "exactement", "parfait", "voilà"),
    "de": ("ja", "okay", "ok", "genau", "richtig", "stimmt", "aha", "mhm", "klar", "alles klar", "verstehe"),
    "pt": ("sim", "ok", "tá", "certo", "claro", "entendi", "aham", "uhum", "perfeito", "exato", "beleza"),
}
FALLBACK_LANGUAGE = "en"

# Sounds that are not words: a cough or breath the recognizer wrote down, a hesitation.
_FILLER = re.compile(r"^(u+m+|u+h+|e+r+m*|h+m+|m+|a+h+|h+u+h+|e+h+|e+m+)$")
_SPACES = re.compile(r"\s+")
# Everything but letters, digits, apostrophes and white space goes (hyphens and dashes become spaces first).
_NOT_WORD = re.compile(r"[^\w\s']|_")
_DASHES = re.compile(r"[-\u2010-\u2015\u2212]")
# One spelling of a word written several ways ("ok" == "okay", "mhmm" == "mhm").
_SPELLINGS = {
    "ok": "okay",
    "okey": "okay",
    "okie": "okay",
    "k": "okay",
    "uhhuh": "uh-huh",
    "unhuh": "uh-huh",
    "mmhmm": "mm-hmm",
    "mmhm": "mm-hmm",
    "mhmm": "mhm",
    "alright": "all right",
}
# Two words the recognizer writes apart that are one ("uh huh" == "uh-huh", "mm hmm" == "mm-hmm").
_PAIRS = re.compile(r"(?<![\w'])(?:(u+h*|u+n+) (h+u+h+)|(m+) (h+m+)|(all) (right))(?![\w'])")


class InterruptionError(ValueError):
    """An invalid setting: `key` is the key inside it ("mode", "backchannels.2"), or "" for the whole."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}" if key else message)
        self.key = key
        self.message = message


def normalize_text(text: str) -> str:
    """Words only, in lower case and one spelling: "Mm hmm, OK!" -> "mm-hmm okay"."""
    text = unicodedata.normalize("NFKD", text.lower().replace("\u2019", "'"))
    text = "".join(c for c in text if not unicodedata.combining(c))
    text = _NOT_WORD.sub(" ", _DASHES.sub(" ", text))
    text = _SPACES.sub(" ", text).strip(" '")
    text = _PAIRS.sub(_joined, text)
    return " ".join(_SPELLINGS.get(word.strip("'"), word.strip("'")) for word in text.split())


def _joined(match: re.Match[str]) -> str:
    if match.group(1) is not None:
        return "uh-huh"
    if match.group(3) is not None:
        return "mm-hmm"
    return "all right"


def _is_filler(word: str) -> bool:
    # A lone letter is a fragment of a word or a sound the recognizer caught ("a", "m").
    return (len(word) == 1 and word.isalpha()) or bool(_FILLER.match(word))


@dataclass(frozen=True)
class Interruption:
    """An agent's interruption setting as the engine uses it."""

    mode: str  # "adaptive" | "vad" | "off"
    min_words: int
    backchannels: frozenset[str]  # normalized phrases (normalize_text)
    resume_after_ms: int

    def kind_of(self, text: str) -> str:
        """What the words the recognizer heard while the agent spoke are: "noise" (no words, or only
        fillers: um, uh, hmm, a lone letter), "backchannel" (only backchannel phrases and fillers, or fewer
        than max(min_words, 1) other words) or "real" (an interruption that takes the turn)."""
        words = normalize_text(text).split()
        if all(_is_filler(word) for word in words):
            return KIND_NOISE
        longest = max((phrase.count(" ") + 1 for phrase in self.backchannels), default=0)
        others = 0
        at = 0
        while at < len(words):
            span = next(
                (
                    n
                    for n in range(min(longest, len(words) - at), 0, -1)
                    if " ".join(words[at : at + n]) in self.backchannels
                ),
                0,
            )
            if span:
                at += span
                continue
            if not _is_filler(words[at]):
                others += 1
            at += 1
        return KIND_REAL if others >= max(self.min_words, 1) else KIND_BACKCHANNEL


def default_backchannels(language: str) -> tuple[str, ...]:
    """The default backchannels of a language tag ("es-US" -> Spanish's), English for one without a list."""
    return BACKCHANNELS.get(language.split("-")[0].lower()) or BACKCHANNELS[FALLBACK_LANGUAGE]


def normalize_interruption(value: Any) -> dict[str, Any]:
    """The setting as stored, from a request body's `interruption`; InterruptionError when it is not valid."""
    if not isinstance(value, dict):
        raise InterruptionError("", "Must be a JSON object with mode, minWords, backchannels and resumeAfterMs.")
    unknown = sorted(str(key) for key in value if key not in KEYS)
    if unknown:
        raise InterruptionError(unknown[0], "Unknown key; the keys are mode, minWords, backchannels and resumeAfterMs.")
    setting = default_interruption()
    if "mode" in value:
        mode = value["mode"]
        if not isinstance(mode, str) or mode not in MODES:
            raise InterruptionError("mode", f"Must be one of {', '.join(MODES)}, not {_shown(mode)}.")
        setting["mode"] = mode
    if "minWords" in value:
        setting["minWords"] = _whole(value["minWords"], "minWords", MIN_WORDS_RANGE, "words")
    if "resumeAfterMs" in value:
        setting["resumeAfterMs"] = _whole(
            value["resumeAfterMs"], "resumeAfterMs", RESUME_AFTER_MS_RANGE, "milliseconds"
        )
    if "backchannels" in value:
        setting["backchannels"] = _backchannels(value["backchannels"])
    return setting


def interruption_of(stored: Any) -> dict[str, Any]:
    """An agent's stored setting as used on a call: a value that is not valid (written around the API)
    falls back to the defaults rather than failing the call."""
    try:
        return normalize_interruption(stored)
    except InterruptionError:
        return default_interruption()


def interruption_for(agent: Any) -> Interruption:
    """The engine's view of an agent's setting (its language's backchannels when it names none)."""
    setting = interruption_of(getattr(agent, "interruption", None))
    phrases = setting["backchannels"]
    if phrases is None:
        phrases = default_backchannels(getattr(agent, "language", "") or FALLBACK_LANGUAGE)
    normalized = frozenset(filter(None, (normalize_text(phrase) for phrase in phrases)))
    return Interruption(
        mode=setting["mode"],
        min_words=setting["minWords"],
        backchannels=normalized,
        resume_after_ms=setting["resumeAfterMs"],
    )


def _whole(value: Any, key: str, bounds: tuple[int, int], unit: str) -> int:
    low, high = bounds
    # A whole float (2.0) is a whole number, as JSON Schema's integer has it.
    whole = (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and value.is_integer()
    )
    if not whole or not low <= value <= high:
        raise InterruptionError(key, f"Must be a whole number of {unit} from {low} to {high}, not {_shown(value)}.")
    return int(value)


def _backchannels(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise InterruptionError("backchannels", "Must be a list of phrases, or null for the language's default list.")
    if len(value) > MAX_BACKCHANNELS:
        raise InterruptionError("backchannels", f"At most {MAX_BACKCHANNELS} phrases (this list has {len(value)}).")
    phrases: list[str] = []
    seen: set[str] = set()
    for index, phrase in enumerate(value):
        key = f"backchannels.{index}"
        if not isinstance(phrase, str):
            raise InterruptionError(key, "Must be a string.")
        if len(phrase) > MAX_BACKCHANNEL_CHARS:
            raise InterruptionError(key, f"At most {MAX_BACKCHANNEL_CHARS} characters (this one has {len(phrase)}).")
        if any(0xD800 <= ord(c) <= 0xDFFF or c == "\x00" for c in phrase):
            raise InterruptionError(key, "May not contain NUL or surrogate characters.")
        phrase = _SPACES.sub(" ", phrase).strip()
        words = normalize_text(phrase)
        if not words:
            raise InterruptionError(key, "Must hold at least one word.")
        if words not in seen:
            seen.add(words)
            phrases.append(phrase)
    return phrases


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
