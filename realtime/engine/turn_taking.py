"""Has the caller finished? The quick end of turn of the offline engine.

The voice activity detector ends a turn after VAD_END_SILENCE_MS of silence. Most turns end long
before that window has passed: after VAD_QUICK_END_SILENCE_MS of silence the listener reads the words
recognized so far, and when they read as a finished sentence the turn ends at once. Words that
announce more to come keep the full window, so that a caller who pauses to think or to read a
number ("My number is ... four five six ... seven", "I would like to ... book a table") is not cut
off:
  - a last word that cannot end a sentence: an article or possessive, a preposition, a conjunction,
    an auxiliary or modal verb, a subject pronoun, a filler ("um", "so", "like");
  - a number, or a spelled letter (dictation goes on in groups);
  - a single word that is not a one-word answer ("yes", "thanks", "hello"): most likely the first
    word of a sentence, or a sound misheard as a word;
  - nothing recognized yet.

The words are the offline recognizer's first pass, and it mishears; a misheard last word that reads
as an ending ("a table bot" for "a table for") still ends the turn early. Measured with
`bench/voice_latency.py --scenario pauses`; VAD_QUICK_END_SILENCE_MS=0 turns the quick end off.

Only languages with an offline recognizer have word lists (English); elsewhere every turn keeps the
full window.
"""

from __future__ import annotations

import re

_ENGLISH_CONTINUATIONS = frozenset(
    """
    a an the my your our their his her its this these those some any every each another which whose
    to for of with without at in on from by about into onto near after before between under over than
    as via per until till through during against toward towards around across behind beside
    and or but so because if when while although though whereas unless nor plus also then
    is are was were be been being am i'm you're we're they're he's she's it's that's there's what's
    have has had do does did will would can could should shall may might must
    need needs want wants wanna gonna going gotta like i'd i'll i've we'd we'll
    i we they he she
    um uh er erm uhm hmm ah eh well mean
    what who where how why whether
    dot dash hyphen underscore slash point double triple
    """.split()
)
_ENGLISH_NUMBERS = frozenset(
    """
    zero oh one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
    sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred
    thousand million
    """.split()
)
_ENGLISH_ONE_WORD_ANSWERS = frozenset(
    """
    yes yeah yep yup no nope okay ok sure right correct exactly fine great perfect please thanks
    hello hi hey goodbye bye done nothing cancel stop help
    """.split()
)
_WORD = re.compile(r"[a-z0-9']+")


def reads_finished(text: str, language: str) -> bool:
    """Whether `text` (the caller's words so far) reads as a finished turn in `language`."""
    if language.split("-", 1)[0].lower() != "en":
        return False
    words = _WORD.findall(text.lower())
    if not words:
        return False
    last = words[-1]
    if len(words) == 1:
        return last in _ENGLISH_ONE_WORD_ANSWERS
    if last in _ENGLISH_CONTINUATIONS or last in _ENGLISH_NUMBERS or last.isdigit():
        return False
    return not (len(last) == 1 and len(words[-2]) == 1)  # letters spelled one by one


__all__ = ["reads_finished"]
