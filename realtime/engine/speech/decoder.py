"""One conversation's PocketSphinx decoder (`Recognizer`), fed while the caller speaks: used in the
server process (pocketsphinx.py, `ASR_WORKERS=0`) and in the worker processes (pocketsphinx_workers.py).
"""

from __future__ import annotations

import os
from typing import Any

from realtime.engine.audio import IN_BYTES_PER_MS, LISTEN_BYTES
from realtime.engine.speech import language_model
from realtime.engine.speech.language_model import LanguageModel

# PocketSphinx normalizes features with a running cepstral mean that starts from a generic value and
# is updated at the end of an utterance: the first words of a conversation are decoded with a mean
# that fits nobody (about half the words wrong, against a third once adapted). So the first audio of
# a conversation is decoded twice: once up to 2.5 s (or the first pause of the quick end of turn, or
# the end of the first utterance), which adapts the mean to this caller, then again from the start of
# the utterance. (1.0 s recognized worse, 61% word errors against 46% on 50 eSpeak NG turns in five
# voices; 1.5 s about as well, 48%, but changed which words were misheard in later turns.)
WARMUP_BYTES = 2500 * IN_BYTES_PER_MS  # 2.5 s


def _acoustic_model() -> str:
    # PocketSphinx (a model library) is imported by the first decoder, not with the engine.
    from pocketsphinx import get_model_path

    return os.path.join(get_model_path(), "en-us", "en-us")


def _decoder(model: LanguageModel | None) -> Any:
    # As above: the model library is imported by the first decoder.
    from pocketsphinx import Decoder

    options: dict[str, Any] = {"hmm": _acoustic_model(), "loglevel": "FATAL", "fwdflat": False}
    if model is not None:
        options.update(lm=model.lm, dict=model.dict)
    # fwdflat=False: the second pass costs ~50 ms at the end of every utterance for no gain here.
    return Decoder(**options)


class Recognizer:
    """One conversation's recognizer: start(), feed() while the caller speaks, finish() -> text."""

    def __init__(self, model: LanguageModel | None) -> None:
        self.model = model
        self._decoder = _decoder(model)
        self._pending = b""
        self._active = False
        self._warm = False  # the cepstral mean has adapted to this caller
        self._cold_audio: list[bytes] = []  # the current utterance, while not warm
        self._cold_bytes = 0

    def start(self) -> None:
        if self._active:
            self._decoder.end_utt()
        self._decoder.start_utt()
        self._pending = b""
        self._cold_audio, self._cold_bytes = [], 0
        self._active = True

    def _decode(self, pcm: bytes) -> None:
        # In the listener's frames (LISTEN_BYTES, what it gives at once): the words so far (peek) hold all of it.
        for offset in range(0, len(pcm), LISTEN_BYTES):
            self._decoder.process_raw(pcm[offset : offset + LISTEN_BYTES], False, False)

    def _redecode(self) -> None:
        """End the utterance (which updates the cepstral mean) and decode it again from its start."""
        self._decoder.end_utt()
        self._decoder.start_utt()
        self._decode(b"".join(self._cold_audio))
        self._cold_audio, self._cold_bytes = [], 0
        self._warm = True

    def feed(self, pcm16_16k: bytes) -> None:
        if not self._active:
            self.start()
        self._pending += pcm16_16k
        whole = len(self._pending) - len(self._pending) % LISTEN_BYTES
        if whole:
            self._take(self._pending[:whole])
            self._pending = self._pending[whole:]

    def _take(self, data: bytes) -> None:
        """Decode audio in slices counted from the utterance's start (PocketSphinx makes other words of the
        same sound decoded in other slices) and adapt the mean at exactly WARMUP_BYTES: the words follow
        from the audio, however it came in pieces."""
        if not self._warm:
            cold = data[: WARMUP_BYTES - self._cold_bytes]
            data = data[len(cold) :]
            self._decode(cold)
            self._cold_audio.append(cold)
            self._cold_bytes += len(cold)
            if self._cold_bytes >= WARMUP_BYTES:
                self._redecode()
        self._decode(data)

    def known_word_pairs(self) -> frozenset[tuple[str, str]] | None:
        """The word pairs of this recognizer's language model (None: the general model)."""
        return language_model.word_pairs(self.model)

    def peek(self) -> str:
        """The words so far, the utterance going on (a caller's pause: has the turn ended?)."""
        if not self._active:
            return ""
        if not self._warm and self._cold_bytes:
            self._redecode()
        return self._words()

    def finish(self) -> str:
        """The words of the utterance ('' when nothing was recognized)."""
        if not self._active:
            return ""
        rest, self._pending = self._pending[: len(self._pending) // 2 * 2], b""
        if rest:  # the last slice, shorter
            self._take(rest)
        if not self._warm and self._cold_bytes:
            self._redecode()
        self._active = False
        self._decoder.end_utt()
        return self._words()

    def _words(self) -> str:
        hypothesis = self._decoder.hyp()
        text = hypothesis.hypstr if hypothesis is not None else ""
        return " ".join(word for word in text.split() if not word.startswith(("<", "[", "++")))
