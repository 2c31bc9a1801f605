"""The per-agent language model of the offline recognizer.

PocketSphinx's general English model gets about half the words of clean speech wrong; a small
trigram model of what callers of *this* agent are likely to say does far better. It is built from a
general conversational corpus (corpus/en.txt, plus numbers, dates, times and spelled letters
generated here) and the agent's own words: name, identity, instructions, greeting, tool names and
descriptions, parameter names and enum values, and its knowledge text. The pronunciation dictionary
is the shipped CMU dictionary restricted to the model's words (words it does not know are left out:
the recognizer could not say them anyway).

Building takes well under a second for a typical agent; results are cached by the hash of their
inputs, in memory and as files, so an unchanged agent reuses its model and a changed one gets a new
one on its next session.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import random
import re
import tempfile
import threading
from collections import ChainMap, OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from num2words import num2words

from realtime.engine.speech import espeak

CORPUS = Path(__file__).with_name("corpus") / "en.txt"
MAX_VOCABULARY_CHARS = 300_000  # of knowledge and tool text; beyond it, more text adds little
AGENT_WEIGHT = 3  # the agent's own sentences count this many times against the general corpus
CACHE_SIZE = 32
DISCOUNT_MASS = 0.5  # probability mass kept for unseen word sequences (Witten-Bell-like back-off)


@dataclass(frozen=True)
class LanguageModel:
    """Paths of an ARPA model and its dictionary, ready for a PocketSphinx decoder."""

    lm: str
    dict: str
    words: int


# --- text to speakable word lines ----------------------------------------------------------------

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SENTENCES = re.compile(r"[.!?;:\n\r]+(?:\s|$)|\n")
_ORDINAL = re.compile(r"\b(\d+)(?:st|nd|rd|th)\b", re.IGNORECASE)
_TIME = re.compile(r"\b(\d{1,2}):(\d{2})\b")
_AMOUNT = r"\d{1,3}(?:,\d{3})+|\d+"  # 1,500 is one number
_NUMBER = re.compile(rf"(?:{_AMOUNT})(?:\.\d+)?")
_SYMBOLS = {"%": " percent ", "&": " and ", "@": " at ", "+": " plus ", "$": " dollars ", "€": " euros "}
# "$20" is said "twenty dollars", "€4.50" "four euros fifty": the unit follows the amount.
_CURRENCIES = {  # symbol: (unit, units, fraction, fractions)
    "$": ("dollar", "dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
}
_MONEY = re.compile(rf"([$€£])\s?({_AMOUNT})(?:\.(\d{{2}}))?(?!\d)")
_NOT_WORD = re.compile(r"[^a-z' ]+")


def _number_words(match: re.Match[str]) -> str:
    grouped = "," in match.group(0)  # thousands separators: an amount, never a code or a year
    text = match.group(0).replace(",", "")
    if "." in text:
        return f" {num2words(float(text))} "
    if not grouped and (len(text) >= 5 or (len(text) > 1 and text.startswith("0"))):
        return " " + " ".join(num2words(int(digit)) for digit in text) + " "  # codes and phone numbers
    value = int(text)
    if not grouped and len(text) == 4 and 1100 <= value <= 2099:
        return f" {num2words(value, to='year')} "
    return f" {num2words(value)} "


def _money_words(match: re.Match[str]) -> str:
    unit, units, fraction, fractions = _CURRENCIES[match.group(1)]
    amount = int(match.group(2).replace(",", ""))
    words = f"{num2words(amount)} {unit if amount == 1 else units}"
    if cents := int(match.group(3) or 0):
        words += f" {num2words(cents)} {fraction if cents == 1 else fractions}"
    return f" {words} "


def _time_words(match: re.Match[str]) -> str:
    hour, minute = int(match.group(1)), int(match.group(2))
    if minute == 0:
        return f" {num2words(hour)} o'clock "
    return f" {num2words(hour)} {num2words(minute) if minute >= 10 else 'oh ' + num2words(minute)} "


def word_lines(text: str) -> list[str]:
    """Lower-case word sequences, one per sentence or line, with numbers and symbols spelled out and
    identifiers (snake_case, kebab-case, camelCase) split into words."""
    text = _CAMEL.sub(" ", text.replace("_", " "))
    lines = []
    for sentence in _SENTENCES.split(text):
        sentence = _TIME.sub(_time_words, sentence)
        sentence = _ORDINAL.sub(lambda m: " " + num2words(int(m.group(1)), to="ordinal") + " ", sentence)
        sentence = _MONEY.sub(_money_words, sentence)
        sentence = _NUMBER.sub(_number_words, sentence)
        for symbol, spoken in _SYMBOLS.items():
            sentence = sentence.replace(symbol, spoken)
        sentence = _NOT_WORD.sub(" ", sentence.lower().replace("\u2019", "'").replace("-", " "))
        words = [word.strip("'") for word in sentence.split()]
        if words := [word for word in words if word]:
            lines.append(" ".join(words))
    return lines


# --- the general corpus ------------------------------------------------------------------------

_MONTHS = "january february march april may june july august september october november december".split()
_DAYS = "monday tuesday wednesday thursday friday saturday sunday".split()


@functools.cache
def _corpus_text() -> str:
    """corpus/en.txt, read once per process (it is part of every model's cache key)."""
    return CORPUS.read_text(encoding="utf-8")


@functools.cache
def general_lines() -> tuple[str, ...]:
    """corpus/en.txt and the generated numbers, dates, times and spellings (deterministic)."""
    lines = [line.strip().lower() for line in _corpus_text().splitlines() if line.strip() and not line.startswith("#")]
    generated = [num2words(n) for n in range(0, 101)]
    generated += [num2words(n) for n in (*range(200, 1001, 100), 1500, 2000, 5000, 10000, 100000, 1000000)]
    generated += [num2words(n, to="ordinal") for n in range(1, 32)]
    generated += [num2words(year, to="year") for year in range(1930, 2036)]
    rng = random.Random(7)
    for month in _MONTHS:
        generated.append(f"{month} {num2words(rng.randint(1, 31), to='ordinal')}")
        generated.append(f"on {month} {num2words(rng.randint(1, 31), to='ordinal')}")
        generated.append(f"the {num2words(rng.randint(1, 31), to='ordinal')} of {month}")
        generated.append(f"{month} {num2words(rng.randint(1, 28))} {num2words(rng.randint(1940, 2030), to='year')}")
    for day in _DAYS:
        generated += [day, f"on {day}", f"next {day}", f"this {day}", f"{day} morning", f"{day} afternoon"]
        generated.append(f"on {day} at {num2words(rng.randint(1, 12))}")
    for hour in range(1, 13):
        name = num2words(hour)
        generated += [f"at {name}", f"at {name} o'clock", f"{name} thirty", f"at {name} fifteen"]
        generated += [f"at {name} p m", f"at {name} a m", f"half past {name}", f"quarter past {name}"]
        generated += [f"quarter to {name}", f"around {name}", f"{name} {num2words(rng.choice((15, 30, 45)))} p m"]
    digits = ["oh", *(num2words(n) for n in range(10))]
    for _ in range(60):
        generated.append(" ".join(rng.choice(digits) for _ in range(rng.randint(3, 10))))
    letters = list("abcdefghijklmnopqrstuvwxyz")
    for _ in range(40):
        generated.append(" ".join(rng.choice(letters) for _ in range(rng.randint(2, 8))))
    generated += [f"{letter} as in" for letter in letters]
    generated += [f"{num2words(n)} people" for n in range(1, 13)]
    generated += [f"for {num2words(n)}" for n in range(1, 13)]
    generated += [f"{num2words(n)} dollars" for n in (5, 10, 15, 20, 25, 50, 100)]
    generated += [f"{num2words(n)} minutes" for n in (5, 10, 15, 20, 30, 45)]
    generated += [f"{num2words(n)} hours" for n in (1, 2, 3, 24)]
    return tuple(line for text in lines + generated for line in word_lines(text))


# --- the pronunciation dictionary ------------------------------------------------------------------


@functools.cache
def _pronunciations() -> dict[str, list[str]]:
    """The shipped CMU dictionary: word -> its entry lines (alternates included)."""
    from pocketsphinx import get_model_path  # the recognizer library loads when a model is first needed

    entries: dict[str, list[str]] = {}
    with open(os.path.join(get_model_path(), "en-us", "cmudict-en-us.dict"), encoding="utf-8") as handle:
        for line in handle:
            head, _, phones = line.strip().partition(" ")
            if not phones:
                continue
            word = head.split("(", 1)[0]
            entries.setdefault(word, []).append(f"{head} {phones.strip()}")
    return entries


def known_words() -> set[str]:
    return set(_pronunciations())


# eSpeak NG's English phoneme names (stress marks removed) as the CMU phones of the acoustic model.
_ESPEAK_TO_CMU = {
    **{p: p.upper() for p in "b d f g k l m n p r s t v w z".split()},
    "h": "HH", "j": "Y", "N": "NG", "T": "TH", "D": "DH", "S": "SH", "Z": "ZH", "tS": "CH", "dZ": "JH",
    "t#": "T", "t2": "T", "x": "K", "n-": "AH N", "r-": "ER", "@L": "AH L", "l/": "L", "m-": "AH M",
    "a": "AE", "aa": "AE", "a#": "AH", "A:": "AA", "A@": "AA R", "A~": "AA N", "0": "AA", "V": "AH",
    "@": "AH", "@-": "AH", "@2": "AH", "@5": "AH", "3": "ER", "3:": "ER", "E": "EH", "e": "EH", "e@": "EH R",
    "eI": "EY", "I": "IH", "I2": "IH", "I#": "IH", "i": "IY", "i:": "IY", "i@": "IY AH", "i@3": "IH R",
    "O": "AO", "O:": "AO", "O2": "AO", "O@": "AO R", "o@": "AO R", "OI": "OY", "oU": "OW", "o": "OW",
    "U": "UH", "U@": "UH R", "u": "UW", "u:": "UW", "aI": "AY", "aI@": "AY ER", "aI3": "AY ER", "aU": "AW",
}  # fmt: skip
_SILENT_PHONEMES = {";", "?", "_", "_:", "||", "|"}
MAX_GUESSED_WORDS = 2000
_GUESSABLE = re.compile(r"[a-z]{2,30}")


def guessed_pronunciations(words: Iterable[str]) -> dict[str, list[str]]:
    """Dictionary entries for words the CMU dictionary lacks, from eSpeak NG's English rules ("paella"
    -> "paella P AY EY AH"), so that an agent's own names and terms can be recognized. A word with a
    phoneme that has no CMU counterpart is left out."""
    wanted = [word for word in dict.fromkeys(words) if _GUESSABLE.fullmatch(word)][:MAX_GUESSED_WORDS]
    entries: dict[str, list[str]] = {}
    for word, spoken in espeak.phonemes(wanted).items():
        phones: list[str] = []
        for name in spoken.split():
            name = name.lstrip("',%=")
            if name in _SILENT_PHONEMES or not name:
                continue
            if name not in _ESPEAK_TO_CMU:
                phones = []
                break
            for phone in _ESPEAK_TO_CMU[name].split():
                if not (phone == "R" and phones and phones[-1] == "R"):  # "o@ r" is one R
                    phones.append(phone)
        if phones:
            entries[word] = [f"{word} {' '.join(phones)}"]
    return entries


# --- building ------------------------------------------------------------------------------------


def _in_vocabulary(lines: Iterable[str], known: Mapping[str, list[str]]) -> list[str]:
    """Each line split into runs of known words (an unknown word breaks the line: no n-gram spans it)."""
    kept = []
    for line in lines:
        run: list[str] = []
        for word in line.split():
            if word in known:
                run.append(word)
            elif run:
                kept.append(" ".join(run))
                run = []
        if run:
            kept.append(" ".join(run))
    return kept


def build_texts(agent_texts: Iterable[str], vocabulary_texts: Iterable[str]) -> tuple[str, str, int]:
    """(ARPA text, dictionary text, word count) for an agent's texts and its vocabulary texts."""
    from pocketsphinx.lm import ArpaBoLM  # as above: loaded when a model is first built

    agent_lines = [line for text in agent_texts for line in word_lines(text)]
    budget, vocabulary_lines = MAX_VOCABULARY_CHARS, []
    for text in vocabulary_texts:
        if budget <= 0:
            break
        text = text[:budget]
        budget -= len(text)
        vocabulary_lines += word_lines(text)
    dictionary_entries = _pronunciations()
    unknown = (word for line in [*agent_lines, *vocabulary_lines] for word in line.split())
    known = ChainMap(guessed_pronunciations(w for w in unknown if w not in dictionary_entries), dictionary_entries)
    agent_lines = _in_vocabulary(agent_lines, known)
    vocabulary_lines = _in_vocabulary(vocabulary_lines, known)
    corpus = "\n".join([*general_lines(), *agent_lines * AGENT_WEIGHT, *vocabulary_lines])
    model = ArpaBoLM(text=corpus, add_start=True, discount_mass=DISCOUNT_MASS)
    model.compute()
    arpa = io.StringIO()
    model.write(arpa)
    words = sorted(word for word in model.grams_1 if word not in ("<s>", "</s>"))
    dictionary = "\n".join(line for word in words for line in known[word]) + "\n"
    return arpa.getvalue(), dictionary, len(words)


_cache: OrderedDict[str, LanguageModel] = OrderedDict()
_cache_lock = threading.Lock()
_build_locks: dict[str, threading.Lock] = {}


def reset_cache() -> None:
    """Forget the models held in memory (as a new process would: the files on disk stay)."""
    with _cache_lock:
        _cache.clear()


def cache_dir() -> Path:
    path = Path(os.environ.get("VOICEAGENT_LM_CACHE") or Path(tempfile.gettempdir()) / "voiceagent-lm")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _atomic_write(path: Path, text: str) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(temporary, path)


def language_model(agent_texts: Iterable[str], vocabulary_texts: Iterable[str] = ()) -> LanguageModel:
    """The model for these texts, built once and then served from the cache (memory, then disk)."""
    agent_texts, vocabulary_texts = list(agent_texts), list(vocabulary_texts)
    digest = hashlib.sha256()
    for text in [
        "v4",  # bump when word_lines or the way models are built changes
        str(DISCOUNT_MASS),
        str(AGENT_WEIGHT),
        _corpus_text(),
        *agent_texts,
        "\x00",
        *vocabulary_texts,
    ]:
        digest.update(text.encode("utf-8", "replace") + b"\x1e")
    key = digest.hexdigest()[:32]
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
        lock = _build_locks.setdefault(key, threading.Lock())
    with lock:  # one build per key, even when several sessions of the agent start at once
        with _cache_lock:
            if key in _cache:
                return _cache[key]
        folder = cache_dir()
        lm_path, dict_path, count_path = (folder / f"{key}.{suffix}" for suffix in ("lm", "dict", "words"))
        if lm_path.exists() and dict_path.exists() and count_path.exists():
            words = int(count_path.read_text() or 0)
        else:
            arpa, dictionary, words = build_texts(agent_texts, vocabulary_texts)
            _atomic_write(lm_path, arpa)
            _atomic_write(dict_path, dictionary)
            _atomic_write(count_path, str(words))
        model = LanguageModel(lm=str(lm_path), dict=str(dict_path), words=words)
        with _cache_lock:
            _cache[key] = model
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
            _build_locks.pop(key, None)
        return model


@functools.lru_cache(maxsize=64)
def _word_pairs(path: str) -> frozenset[tuple[str, str]]:
    pairs: set[tuple[str, str]] = set()
    with open(path, encoding="utf-8") as arpa:
        section = ""
        for line in arpa:
            if line.startswith("\\"):
                section = line.strip()
                continue
            fields = line.split()
            if section == "\\2-grams:" and len(fields) >= 3:
                pairs.add((fields[1], fields[2]))
    return frozenset(pairs)


def word_pairs(model: LanguageModel | None) -> frozenset[tuple[str, str]] | None:
    """The word pairs (bigrams) of the model: what its texts say, one word after another (None for
    the general model). A caller's last two words that are not among them were more likely misheard
    (the recognizer backed off to single words)."""
    return _word_pairs(model.lm) if model is not None else None
