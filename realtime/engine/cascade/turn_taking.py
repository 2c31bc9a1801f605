"""Has the caller finished? The quick end of turn of the offline engine.

The voice activity detector ends a turn after VAD_END_SILENCE_MS of silence. Most turns end long
before that window has passed: after VAD_QUICK_END_SILENCE_MS of silence the listener reads the words
recognized so far, and when they read as a finished sentence the turn ends at once. Words that
announce more to come keep the full window, so that a caller who pauses to think or to read a
number ("My number is ... four five six ... seven", "I would like to ... book a table") is not cut
off:
  - a last word that cannot end a sentence: an article or possessive, a preposition, a conjunction,
    an auxiliary or modal verb, a subject pronoun, a filler ("um", "so", "like");
  - a number, or a letter (dictation goes on in groups; and a lone letter at the end is more often a
    short word misheard than a finished sentence);
  - "you" after an auxiliary or modal verb, "me" after a verb that asks for something ("can you ...",
    "could you tell me ...");
  - a single word that is not a one-word answer ("yes", "thanks", "hello"): most likely the first
    word of a sentence, or a sound misheard as a word;
  - nothing recognized yet.
Words that read finished but end in a pair of words that the recognizer's language model has never
seen one after the other ("a table bot", for "a table for") were most likely misheard: the turn
then ends after VAD_UNSURE_SILENCE_MS. Its default (300 ms) trusts them as any finished reading;
500 ms waits as long as without the quick end, so that a misheard pause is not cut shorter than
before, at the price of most turns of the offline recognizer taking 500 ms. A misheard ending that is a pair the model knows still ends the turn early. Measured with
`bench/voice_latency.py --scenario pauses`; VAD_QUICK_END_SILENCE_MS=0 turns the quick end off.

Only languages with an offline recognizer have word lists (English); elsewhere every turn keeps the
full window.

The words at a pause may come only after the caller has spoken again (a recognizer that lags behind
the audio on a busy machine): when they read as finished, the turn ends at that pause all the same, and
what the caller said since goes on with it (realtime/engine/cascade/pipeline.py, `_paused`), so that
where a turn ends depends on the audio and not on the machine's load.

A turn ended too early is mended afterwards: a caller who goes on before hearing the answer (it is
still being prepared, or has played less than REALTIME_CONTINUE_TURN_MS) continues the same turn, and
the answer is dropped for one to the whole turn (realtime/engine/cascade/pipeline.py).
"""

from __future__ import annotations

import re
from collections.abc import Container

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
# Two last words that open a question or a request whose object is still to come ("can you ...", "tell
# me ..."): "you" after an auxiliary or modal verb, "me" after a verb that asks for something.
_ENGLISH_OPENING_PAIRS = frozenset(
    [(verb, "you") for verb in "do does did can could will would are were have has should if".split()]
    + [(verb, "me") for verb in "tell give show let send get help".split()]
)
_WORD = re.compile(r"[a-z0-9']+")


FINISHED, UNSURE, UNFINISHED = "finished", "unsure", "unfinished"


def reading(text: str, language: str, known_pairs: Container[tuple[str, str]] | None = None) -> str:
    """How `text` (the caller's words so far) reads in `language`: FINISHED, UNFINISHED, or UNSURE
    (it reads finished, but its last two words are not a pair of `known_pairs`, the recognizer's
    language model: they were probably misheard)."""
    if language.split("-", 1)[0].lower() != "en":
        return UNFINISHED
    words = _WORD.findall(text.lower())
    if not words:
        return UNFINISHED
    last = words[-1]
    if len(words) == 1:
        return FINISHED if last in _ENGLISH_ONE_WORD_ANSWERS else UNFINISHED
    if last in _ENGLISH_CONTINUATIONS or last in _ENGLISH_NUMBERS or last.isdigit() or len(last) == 1:
        return UNFINISHED
    if (words[-2], last) in _ENGLISH_OPENING_PAIRS:
        return UNFINISHED
    return FINISHED if known_pairs is None or (words[-2], last) in known_pairs else UNSURE


__all__ = ["FINISHED", "UNFINISHED", "UNSURE", "reading"]
