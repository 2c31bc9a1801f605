"""The offline speech modules: eSpeak NG synthesis, Silero VAD, per-agent language models and the
PocketSphinx recognizer, plus the vocabulary the recognizer takes from an agent's tools and knowledge.

Audio is synthesized once per module; the VAD and the recognizer are fed that real speech."""

from __future__ import annotations

import difflib
import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from realtime.engine.audio import OUT_RATE
from realtime.engine.speech import espeak, language_model, pocketsphinx, silero_vad
from realtime.engine.speech.silero_vad import Event, VoiceActivityDetector
from testing.factories import AgentToolFactory, KnowledgeDocumentFactory
from testing.voice import rms, to_16k

SENTENCE = "I would like to book a table for four people tomorrow evening."
SECOND = "Please book it for dinner at seven."
VOICES = ("eve", "ara", "rex", "sal", "leo")
LANGUAGES = ("en-US", "es-ES", "es-US", "it-IT")
SPANISH = "Hola, quisiera reservar una mesa para cuatro personas mañana por la noche."
BYTES_PER_MS_16K = 32
LEAD_MS, TAIL_MS = 1000, 1500  # silence around the speech fed to the VAD


def silence(ms: int) -> bytes:
    return b"\x00\x00" * (16 * ms)


def duration_s(pcm16: bytes, rate: int) -> float:
    return len(pcm16) / 2 / rate


def median_pitch_hz(pcm16: bytes, rate: int = OUT_RATE) -> float:
    """Median fundamental frequency of the voiced 40 ms frames (autocorrelation, 60-400 Hz)."""
    samples = np.frombuffer(pcm16, dtype="<i2").astype(np.float64)
    size, pitches = int(rate * 0.04), []
    low, high = rate // 400, rate // 60
    for start in range(0, samples.size - size, size // 2):
        frame = samples[start : start + size] - samples[start : start + size].mean()
        if np.sqrt(np.mean(frame**2)) < 1000:
            continue
        correlation = np.correlate(frame, frame, "full")[size - 1 :]
        lag = low + int(np.argmax(correlation[low:high]))
        if correlation[lag] > 0.3 * correlation[0]:
            pitches.append(rate / lag)
    assert len(pitches) >= 20, "too few voiced frames to measure the pitch"
    return float(np.median(pitches))


def speech_bounds_ms(pcm16_16k: bytes, threshold: int = 500) -> tuple[float, float]:
    """Where the audible part of 16 kHz audio starts and ends."""
    loud = np.flatnonzero(np.abs(np.frombuffer(pcm16_16k, dtype="<i2").astype(np.int32)) > threshold)
    return loud[0] / 16, loud[-1] / 16


def words_right(expected: str, heard: str) -> float:
    """Share of the expected words that the transcript has, in order."""
    want = [w.strip(".,!?").lower() for w in expected.split()]
    got = heard.lower().split()
    matcher = difflib.SequenceMatcher(a=want, b=got, autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks()) / len(want)


# --- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def voices_audio() -> dict[str, bytes]:
    """SENTENCE in each voice, 24 kHz."""
    return {voice: espeak.synthesize(SENTENCE, language="en-US", voice_name=voice) for voice in VOICES}


@pytest.fixture(scope="module")
def speech_16k(voices_audio: dict[str, bytes]) -> bytes:
    return to_16k(voices_audio["leo"])


@pytest.fixture(scope="module")
def second_16k() -> bytes:
    return to_16k(espeak.synthesize(SECOND, language="en-US", voice_name="leo"))


@pytest.fixture(scope="module")
def padded_speech(speech_16k: bytes) -> bytes:
    """LEAD_MS of silence, the sentence, TAIL_MS of silence."""
    return silence(LEAD_MS) + speech_16k + silence(TAIL_MS)


@pytest.fixture(scope="module")
def speech_span_ms(speech_16k: bytes) -> tuple[float, float]:
    start, end = speech_bounds_ms(speech_16k)
    return LEAD_MS + start, LEAD_MS + end


@pytest.fixture(scope="module")
def module_lm_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("lm-module")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VOICEAGENT_LM_CACHE", str(folder))
        language_model.reset_cache()
        yield folder
        language_model.reset_cache()


@pytest.fixture
def lm_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh model cache: an empty folder and an empty in-memory cache."""
    monkeypatch.setenv("VOICEAGENT_LM_CACHE", str(tmp_path))
    language_model.reset_cache()
    yield tmp_path
    language_model.reset_cache()


@dataclass
class AgentStandIn:
    name: str = "Ava"
    language: str = "en-US"
    identity: str = "Ava, the reservation assistant of Acme"
    instructions: str = (
        "You take table reservations for the Acme restaurant. Callers book a table for a number of people, "
        "for a date and a time, for lunch or dinner, for example tomorrow evening."
    )
    static_greeting: str | None = "Hello, this is Ava from Acme. How can I help you today?"


@pytest.fixture(scope="module")
def recognizer(module_lm_cache: Path) -> pocketsphinx.Recognizer:
    built = pocketsphinx.recognizer_for_agent(AgentStandIn())
    assert built is not None
    return built


def recognize(recognizer: pocketsphinx.Recognizer, speech: bytes, chunk_bytes: int = 640) -> str:
    """One utterance as a caller says it: 400 ms of silence, the speech, 500 ms of silence, in chunks."""
    audio = silence(400) + speech + silence(500)
    recognizer.start()
    for offset in range(0, len(audio), chunk_bytes):
        recognizer.feed(audio[offset : offset + chunk_bytes])
    return recognizer.finish()


# --- text to speech --------------------------------------------------------------------------------


def test_synthesize_gives_audible_24khz_pcm16_of_plausible_length(voices_audio: dict[str, bytes]) -> None:
    audio = voices_audio["eve"]
    assert len(audio) % 2 == 0
    assert rms(audio) > 1000
    words = len(SENTENCE.split())
    assert 0.15 * words < duration_s(audio, OUT_RATE) < 0.6 * words
    # eSpeak's own 22,050 Hz output resampled to 24 kHz keeps the duration (no chipmunk or slow audio).
    engine = espeak._espeak()
    base, profile = espeak.voice_for("en-US", "eve")
    with engine.lock:
        raw = engine.synthesize(SENTENCE, base, profile)
    assert engine.sample_rate != OUT_RATE
    assert duration_s(audio, OUT_RATE) == pytest.approx(duration_s(raw, engine.sample_rate), abs=0.01)
    # A longer text takes longer to say.
    short = espeak.synthesize("Hello.", language="en-US", voice_name="eve")
    assert 0.1 < duration_s(short, OUT_RATE) < duration_s(audio, OUT_RATE) / 3


@pytest.mark.parametrize("text", ["", "   ", "\n\t \n", "\x00\x07 \x1b"])
def test_nothing_to_say_gives_no_audio(text: str) -> None:
    assert espeak.synthesize(text, language="en-US", voice_name="eve") == b""


@pytest.fixture(scope="module")
def voice_pitch(voices_audio: dict[str, bytes]) -> dict[str, float]:
    return {voice: median_pitch_hz(audio) for voice, audio in voices_audio.items()}


def test_the_five_voices_sound_different(voice_pitch: dict[str, float]) -> None:
    # eSpeak adds a little noise to each synthesis (neither bytes nor lengths repeat exactly), but the
    # pitch of a voice does: about 227, 210, 95, 106 and 81 Hz.
    female, male = ("eve", "ara"), ("rex", "sal", "leo")
    assert all(170 < voice_pitch[v] < 300 for v in female), voice_pitch
    assert all(60 < voice_pitch[v] < 140 for v in male), voice_pitch
    for first, second in itertools.combinations(VOICES, 2):
        low, high = sorted((voice_pitch[first], voice_pitch[second]))
        assert high > 1.04 * low, (first, second, voice_pitch)


def test_each_language_has_its_own_espeak_voice() -> None:
    bases = {language: espeak.voice_for(language, "eve")[0] for language in LANGUAGES}
    assert len(set(bases.values())) == len(LANGUAGES)
    assert bases["es-US"] == "es-419"
    assert bases["en-US"].startswith("en")
    assert bases["es-ES"].startswith("es") and bases["it-IT"].startswith("it")
    # A language without an eSpeak voice is spoken with the English one.
    assert espeak.voice_for("fr-FR", "eve")[0] == bases["en-US"]
    audio = {language: espeak.synthesize(SPANISH, language=language, voice_name="rex") for language in LANGUAGES}
    assert all(rms(pcm) > 1000 for pcm in audio.values())
    # Each language reads the same text its own way (about 4.78, 4.30, 4.73 and 4.52 s).
    durations = {language: duration_s(pcm, OUT_RATE) for language, pcm in audio.items()}
    for first, second in itertools.combinations(LANGUAGES, 2):
        assert abs(durations[first] - durations[second]) > 0.02, (first, second, durations)
    assert abs(durations["es-ES"] - durations["es-US"]) > 0.1, durations


def test_unknown_voice_name_falls_back_to_the_default_voice(
    voices_audio: dict[str, bytes], voice_pitch: dict[str, float]
) -> None:
    assert espeak.voice_for("en-US", "nobody")[1] == espeak.VOICE_PROFILES[espeak.DEFAULT_VOICE]
    fallback = espeak.synthesize(SENTENCE, language="en-US", voice_name="nobody")
    default = voices_audio[espeak.DEFAULT_VOICE]
    assert duration_s(fallback, OUT_RATE) == pytest.approx(duration_s(default, OUT_RATE), abs=0.01)
    pitch = median_pitch_hz(fallback)
    assert pitch == pytest.approx(voice_pitch[espeak.DEFAULT_VOICE], rel=0.015)
    assert all(abs(pitch - voice_pitch[v]) > 0.03 * pitch for v in VOICES if v != espeak.DEFAULT_VOICE)


def test_split_sentences_on_sentence_ends_and_newlines() -> None:
    text = "Hello there. How are you today?  Great!\nNext line without a stop\n\n  And the last one… ok"
    assert espeak.split_sentences(text) == [
        "Hello there.",
        "How are you today?",
        "Great!",
        "Next line without a stop",
        "And the last one…",
        "ok",
    ]
    assert espeak.split_sentences("It costs 3.50 dollars, or 4.20 with tax.") == [
        "It costs 3.50 dollars, or 4.20 with tax."
    ]
    assert espeak.split_sentences("  \n ") == []


def test_split_sentences_cuts_a_long_sentence_at_clause_breaks_without_losing_words() -> None:
    clauses = [
        "Your table for four is booked for tomorrow evening at half past seven",
        "the terrace is heated in case the weather turns cold",
        "parking is free after six in the lot behind the restaurant",
        "and if anything changes you can call us at any time before noon",
        "we look forward to seeing you",
    ]
    sentence = ", ".join(clauses) + "."
    assert len(sentence) > espeak.LONG_SENTENCE_CHARS
    text = f"Thank you. {sentence} Goodbye!"
    parts = espeak.split_sentences(text)
    assert parts[0] == "Thank you." and parts[-1] == "Goodbye!"
    middle = parts[1:-1]
    assert len(middle) >= 2
    assert all(len(part) < len(sentence) for part in middle)
    assert all(part.endswith((",", ".")) for part in middle)  # cut at clause breaks only
    assert " ".join(parts).split() == text.split()
    # Without a clause break, a long sentence stays whole.
    unbroken = " ".join(["word"] * 60) + "."
    assert espeak.split_sentences(unbroken) == [unbroken]


# --- voice activity detection ----------------------------------------------------------------------


def test_no_events_on_silence_or_low_noise() -> None:
    detector = VoiceActivityDetector(end_silence_ms=500)
    assert detector.feed(silence(3000)) == []
    noise = np.random.default_rng(3).normal(0, 150, 16000 * 3).astype("<i2").tobytes()
    assert detector.feed(noise) == []
    assert not detector.speaking
    assert detector.current_speech_ms == 0


def test_speech_gives_one_start_and_one_end_where_the_speech_is(
    padded_speech: bytes, speech_span_ms: tuple[float, float]
) -> None:
    detector = VoiceActivityDetector(end_silence_ms=500)
    events = detector.feed(padded_speech)
    assert [event.kind for event in events] == ["speech_start", "speech_end"]
    spoken_from, spoken_to = speech_span_ms
    assert abs(events[0].at_ms - spoken_from) <= 300
    assert 500 <= events[1].at_ms - spoken_to <= 500 + 300
    assert not detector.speaking
    assert detector.current_speech_ms == 0


def test_speaking_and_current_speech_ms_while_the_caller_speaks(
    padded_speech: bytes, speech_span_ms: tuple[float, float]
) -> None:
    detector = VoiceActivityDetector(end_silence_ms=500)
    middle_ms = int(sum(speech_span_ms) / 2)
    events = detector.feed(padded_speech[: middle_ms * BYTES_PER_MS_16K])
    assert [event.kind for event in events] == ["speech_start"]
    assert detector.speaking
    # The utterance has lasted from its start to the audio fed so far (whole 32 ms windows).
    assert abs(detector.current_speech_ms - (middle_ms - events[0].at_ms)) <= silero_vad.WINDOW_MS
    before = detector.current_speech_ms
    detector.feed(padded_speech[middle_ms * BYTES_PER_MS_16K : (middle_ms + 320) * BYTES_PER_MS_16K])
    assert detector.speaking
    assert detector.current_speech_ms == before + 320
    rest = detector.feed(padded_speech[(middle_ms + 320) * BYTES_PER_MS_16K :])
    assert [event.kind for event in rest] == ["speech_end"]
    assert not detector.speaking and detector.current_speech_ms == 0


def test_small_uneven_chunks_give_the_same_events_as_one_feed(padded_speech: bytes) -> None:
    whole = VoiceActivityDetector(end_silence_ms=500).feed(padded_speech)
    detector = VoiceActivityDetector(end_silence_ms=500)
    events: list[Event] = []
    sizes = itertools.cycle((334, 2, 1000, 4096, 640, 58, 1026))
    offset = 0
    while offset < len(padded_speech):
        size = next(sizes)
        events += detector.feed(padded_speech[offset : offset + size])
        offset += size
    assert len(whole) == 2
    assert events == whole


def test_end_silence_window_follows_the_argument_and_the_setting(padded_speech: bytes, settings: Any) -> None:
    short = VoiceActivityDetector(end_silence_ms=300).feed(padded_speech)
    long = VoiceActivityDetector(end_silence_ms=1000).feed(padded_speech)
    assert [e.kind for e in short] == [e.kind for e in long] == ["speech_start", "speech_end"]
    assert short[0] == long[0]
    assert long[1].at_ms - short[1].at_ms == pytest.approx(700, abs=silero_vad.WINDOW_MS)

    settings.VAD_END_SILENCE_MS = 1000
    from_setting = VoiceActivityDetector()
    assert from_setting.end_silence_ms == 1000
    assert from_setting.feed(padded_speech) == long
    settings.VAD_END_SILENCE_MS = 300
    assert VoiceActivityDetector().feed(padded_speech) == short
    assert VoiceActivityDetector(end_silence_ms=1000).end_silence_ms == 1000  # the argument wins


def test_an_utterance_splits_at_a_pause_the_caller_has_spoken_after(
    speech_16k: bytes, second_16k: bytes, settings: Any
) -> None:
    """The quick end of turn's late case: the words at a pause read finished only once the caller has
    spoken again. The utterance then ends at that pause, and what came after it is a new one."""
    settings.VAD_QUICK_END_SILENCE_MS, settings.VAD_UNFINISHED_SILENCE_MS = 300, 700
    detector = VoiceActivityDetector()
    assert detector.use_quick_end()
    events = detector.feed(silence(LEAD_MS) + speech_16k + silence(400))
    assert events[0].kind == "speech_start" and events[-1].kind == "pause"
    pause = detector.pauses
    assert detector.split_at_pause(pause) is None  # still silent in it: that is end_pause's case
    second_from, _ = speech_bounds_ms(second_16k)
    detector.feed(second_16k[: 600 * BYTES_PER_MS_16K])
    assert detector.split_at_pause(pause, after_ms=2000) is None  # the pause was shorter than that
    since_ms = detector.split_at_pause(pause)
    _, first_to = speech_bounds_ms(speech_16k)
    fed_after_speech_ms = len(speech_16k) / BYTES_PER_MS_16K - first_to + 400 + 600
    assert since_ms is not None and abs(since_ms - fed_after_speech_ms) <= 3 * silero_vad.WINDOW_MS
    assert detector.speaking
    assert abs(detector.current_speech_ms - (600 - second_from)) <= 3 * silero_vad.WINDOW_MS  # the new utterance
    assert detector.split_at_pause(pause) is None  # once
    rest = detector.feed(second_16k[600 * BYTES_PER_MS_16K :] + silence(TAIL_MS))
    assert [event.kind for event in rest if event.kind != "pause"] == ["speech_end"]
    assert detector.split_at_pause(detector.pauses) is None  # an ended utterance is not split


# --- language models -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("book_table", ["book table"]),
        ("checkAvailability", ["check availability"]),
        ("HTTPServer", ["http server"]),
        ("Dinner at 7:30", ["dinner at seven thirty"]),
        ("Lunch at 12:00", ["lunch at twelve o'clock"]),
        ("At 9:05", ["at nine oh five"]),
        ("On the 2nd of May", ["on the second of may"]),
        ("The 21st", ["the twenty first"]),
        ("A table for 4 people", ["a table for four people"]),
        ("Opened in 1998", ["opened in nineteen ninety eight"]),
        ("Code 04521", ["code zero four five two one"]),
        ("The hall seats 1,200 guests", ["the hall seats one thousand two hundred guests"]),
        ("50% off & free", ["fifty percent off and free"]),
        (
            "Tickets cost $20, or $1,250 for a box",
            ["tickets cost twenty dollars or one thousand two hundred and fifty dollars for a box"],
        ),
        ("Only €4.50 or $1.01", ["only four euros fifty cents or one dollar one cent"]),
        ("£3.99 each", ["three pounds ninety nine pence each"]),
        ("Hello there. How are you?\nFine: thanks", ["hello there", "how are you", "fine", "thanks"]),
    ],
)
def test_word_lines_spell_out_what_a_caller_would_say(text: str, expected: list[str]) -> None:
    assert language_model.word_lines(text) == expected


def _dictionary_words(model: language_model.LanguageModel) -> set[str]:
    lines = Path(model.dict).read_text(encoding="utf-8").splitlines()
    return {line.split()[0].split("(", 1)[0] for line in lines if line.strip()}


def _arpa_unigrams(model: language_model.LanguageModel) -> set[str]:
    text = Path(model.lm).read_text(encoding="utf-8")
    assert "\\data\\\n" in text and text.rstrip().endswith("\\end\\")
    section = text.split("\\1-grams:", 1)[1].split("\\2-grams:", 1)[0]
    return {line.split()[1] for line in section.splitlines() if len(line.split()) >= 2}


def test_the_model_holds_the_agents_words_and_only_sayable_ones(lm_cache: Path) -> None:
    agent_texts = [
        "Ava",
        "Recommend the risotto and the paella to every guest, and call the sommelier.",
        "Never say supercalifragilisticexpialidocious.",
    ]
    vocabulary = ["order_dessert", "The tiramisu is made fresh every day."]
    model = language_model.language_model(agent_texts, vocabulary)
    assert Path(model.lm).parent == lm_cache and Path(model.dict).parent == lm_cache
    words = _dictionary_words(model)
    unigrams = _arpa_unigrams(model)
    for word in ("risotto", "tiramisu", "dessert", "recommend", "book", "tomorrow", "seven"):
        assert word in words and word in unigrams, word
    # Words the CMU dictionary lacks get eSpeak NG's pronunciation, in the acoustic model's phones.
    for word in ("paella", "sommelier"):
        assert word in words and word in unigrams, word
    dictionary = Path(model.dict).read_text(encoding="utf-8").splitlines()
    assert "paella P AY EY AH" in dictionary
    assert "risotto R IY S AO T OW" in dictionary  # a word the CMU dictionary has keeps its entry
    # A word no pronunciation is made for (over 30 letters) is left out: the recognizer could not say it.
    assert "supercalifragilisticexpialidocious" not in words | unigrams
    assert model.words == len(words) == len(unigrams - {"<s>", "</s>"})

    plain = language_model.language_model(["Ava", "Help callers with their orders."], [])
    plain_words = _dictionary_words(plain)
    assert "risotto" not in plain_words and "tiramisu" not in plain_words
    assert "calamari" not in words  # an unusual word only gets in through the agent's texts
    only_vocabulary = language_model.language_model(["Ava"], ["Calamari"])
    assert "calamari" in _dictionary_words(only_vocabulary)


def test_the_same_inputs_reuse_the_model_and_changed_inputs_get_a_new_one(
    lm_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = language_model.language_model(["Ava", "We serve risotto."], ["book_table"])
    assert language_model.language_model(["Ava", "We serve risotto."], ["book_table"]) is first

    # A new process (empty memory cache) finds the files on disk and does not build again.
    language_model.reset_cache()

    def no_build(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model was built again")

    with monkeypatch.context() as patch:
        patch.setattr(language_model, "build_texts", no_build)
        again = language_model.language_model(["Ava", "We serve risotto."], ["book_table"])
    assert again == first

    changed_agent = language_model.language_model(["Ava", "We serve tiramisu."], ["book_table"])
    changed_vocabulary = language_model.language_model(["Ava", "We serve risotto."], ["order_dessert"])
    assert len({first.lm, changed_agent.lm, changed_vocabulary.lm}) == 3
    assert len({first.dict, changed_agent.dict, changed_vocabulary.dict}) == 3
    assert "tiramisu" in _dictionary_words(changed_agent) and "tiramisu" not in _dictionary_words(first)
    assert "dessert" in _dictionary_words(changed_vocabulary)
    assert Path(first.lm).exists() and Path(first.dict).exists()


# --- recognition -----------------------------------------------------------------------------------


@pytest.mark.parametrize("language", ["es-ES", "es-US", "it-IT"])
def test_no_offline_recognizer_for_other_languages(language: str) -> None:
    assert pocketsphinx.recognizer_for_agent(AgentStandIn(language=language)) is None


def test_english_agent_gets_a_recognizer_with_its_own_model(recognizer: pocketsphinx.Recognizer) -> None:
    # By default the decoder runs in a worker process (PocketSphinx holds the GIL).
    assert isinstance(recognizer, pocketsphinx.RemoteRecognizer)
    assert recognizer.model is not None
    assert "reservations" in _dictionary_words(recognizer.model)


def test_recognizes_a_booking_request_and_a_second_utterance(
    recognizer: pocketsphinx.Recognizer, speech_16k: bytes, second_16k: bytes
) -> None:
    first = recognize(recognizer, speech_16k)
    assert words_right(SENTENCE, first) >= 0.5, first
    assert {"book", "table"} <= set(first.split()), first
    second = recognize(recognizer, second_16k)
    assert words_right(SECOND, second) >= 0.5, second
    assert "dinner" in second.split(), second


def test_odd_sized_chunks_are_decoded_as_well(recognizer: pocketsphinx.Recognizer, speech_16k: bytes) -> None:
    heard = recognize(recognizer, speech_16k, chunk_bytes=641)
    assert words_right(SENTENCE, heard) >= 0.5, heard


def test_the_same_sound_gives_the_same_words_however_it_comes_in_pieces(module_lm_cache: Path) -> None:
    """A conversation's first utterances (decoded before and after the recognizer adapts to the caller, at
    2.5 s) in 20 ms frames, in 250 ms pieces (a loaded server takes waiting audio together) and in odd
    pieces: the same words each time. PocketSphinx makes other words of the same sound cut otherwise."""
    long_first = to_16k(espeak.synthesize(f"{SENTENCE} {SECOND}", language="en-US", voice_name="leo"))
    then = to_16k(
        espeak.synthesize("And can we sit outside near the window please.", language="en-US", voice_name="leo")
    )
    heard = {}
    for chunk_bytes in (640, 8000, 9664):
        fresh = pocketsphinx.recognizer_for_agent(AgentStandIn())
        assert fresh is not None
        heard[chunk_bytes] = [recognize(fresh, long_first, chunk_bytes), recognize(fresh, then, chunk_bytes)]
    assert heard[8000] == heard[640] and heard[9664] == heard[640], heard


def test_without_workers_the_recognizer_decodes_in_process(module_lm_cache: Path, speech_16k: bytes) -> None:
    local = pocketsphinx.recognizer_for_agent(AgentStandIn(), workers=0)
    assert isinstance(local, pocketsphinx.Recognizer)
    heard = recognize(local, speech_16k)
    assert words_right(SENTENCE, heard) >= 0.5, heard


def test_a_dead_worker_fails_only_its_turn_and_is_replaced(module_lm_cache: Path, speech_16k: bytes) -> None:
    from realtime.engine.speech import pocketsphinx_workers

    pool = pocketsphinx_workers.Pool(1)
    try:
        doomed = pocketsphinx_workers.RemoteRecognizer(pool, None)
        doomed.start()
        doomed.worker.process.kill()
        doomed.worker.process.wait(5)
        doomed.feed(silence(100))
        assert doomed.finish() == ""  # no crash, no hang: the turn is simply not understood
        model = pocketsphinx.language_model.language_model(pocketsphinx.agent_texts(AgentStandIn()))
        replacement = pocketsphinx_workers.RemoteRecognizer(pool, model)
        assert replacement.worker is not doomed.worker
        heard = recognize(replacement, speech_16k)
        assert words_right(SENTENCE, heard) >= 0.5, heard
    finally:
        pool.stop()


def test_a_recognizer_collected_while_its_worker_is_sent_to_does_not_deadlock(
    module_lm_cache: Path, speech_16k: bytes
) -> None:
    """A recognizer's finalizer runs wherever the garbage collector does, also inside a send to the same
    worker from this thread (pickling allocates): it must not wait for the send lock this thread holds
    (a CI run hung there: every session of the process then waited on that worker)."""
    from realtime.engine.speech import pocketsphinx_workers

    pool = pocketsphinx_workers.Pool(1)
    try:
        gone = pocketsphinx_workers.RemoteRecognizer(pool, None)
        worker = gone.worker
        released = threading.Event()

        def collect_while_sending() -> None:
            with worker._send_lock:  # as inside Worker._send when the collector runs
                pocketsphinx_workers._release(worker, 1)
            released.set()

        thread = threading.Thread(target=collect_while_sending, daemon=True)
        thread.start()
        assert released.wait(10), "the finalizer waited for the send lock its own thread held"
        # The session's close goes out with the worker's next message, and the worker still decodes.
        del gone
        model = pocketsphinx.language_model.language_model(pocketsphinx.agent_texts(AgentStandIn()))
        following = pocketsphinx_workers.RemoteRecognizer(pool, model)
        assert following.worker is worker and not worker._closing
        heard = recognize(following, speech_16k)
        assert words_right(SENTENCE, heard) >= 0.5, heard
    finally:
        pool.stop()


def test_a_dish_from_the_agents_vocabulary_is_recognized(module_lm_cache: Path) -> None:
    """The general English model hears "risotto" as "it's our goal": the agent's tools teach it."""
    vocabulary = ["order_dish", "Orders a dish from the menu.", "dishName", "risotto", "tiramisu", "calamari"]
    with_menu = pocketsphinx.recognizer_for_agent(AgentStandIn(), vocabulary_texts=vocabulary)
    assert with_menu is not None
    speech = to_16k(espeak.synthesize("I would like the mushroom risotto.", language="en-US", voice_name="leo"))
    heard = recognize(with_menu, speech)
    assert "risotto" in heard.split(), heard


def test_a_dish_the_pronunciation_dictionary_lacks_is_recognized(module_lm_cache: Path) -> None:
    """ "paella" is not in the CMU dictionary: its pronunciation comes from eSpeak NG's rules."""
    assert "paella" not in language_model.known_words()
    vocabulary = ["order_dish", "Orders a dish from the menu.", "dishName", "paella", "risotto", "calamari"]
    with_menu = pocketsphinx.recognizer_for_agent(AgentStandIn(), vocabulary_texts=vocabulary)
    assert with_menu is not None
    # eSpeak NG does not say a sentence the same way twice and synthetic speech is hard for the acoustic
    # model (measured: "paella" heard in 5-7 of 8 tries of each sentence with this voice), so six tries.
    sentences = ["I would like the seafood paella.", "I would like the paella.", "One paella, please."] * 2
    heard = [recognize(with_menu, to_16k(espeak.synthesize(s, language="en-US", voice_name="eve"))) for s in sentences]
    assert sum("paella" in text.split() for text in heard) >= 2, heard


def test_finish_without_start_and_silence_give_no_words(module_lm_cache: Path) -> None:
    fresh = pocketsphinx.recognizer_for_agent(AgentStandIn())
    assert fresh is not None
    assert fresh.finish() == ""
    fresh.start()
    fresh.feed(b"\x00")
    fresh.feed(b"\x00\x00\x00")
    fresh.feed(silence(300))
    assert fresh.finish() == ""
    assert fresh.finish() == ""  # finishing twice is harmless


# --- the agent's vocabulary ------------------------------------------------------------------------


@pytest.mark.django_db
def test_agent_vocabulary_texts_has_enabled_tools_and_knowledge(owner: Any, make_agent: Any, lm_cache: Path) -> None:
    from knowledge.models import DocumentStatus, KnowledgeChunk
    from realtime.selectors import agent_vocabulary_texts

    agent = make_agent(owner.organization, name="Ava", language="en-US")
    other = make_agent(owner.organization, name="Other")
    AgentToolFactory(
        agent=agent,
        name="order_dessert",
        description="Orders a dessert for the table.",
        parameter_schema={
            "type": "object",
            "properties": {
                "dessertName": {"type": "string", "enum": ["tiramisu", "gelato"]},
                "guestCount": {"type": "integer", "description": "How many guests share it."},
            },
        },
    )
    AgentToolFactory(
        agent=agent,
        name="cancel_banquet",
        description="Cancels a banquet.",
        parameter_schema={"type": "object", "properties": {"banquetHall": {"enum": ["lasagna"]}}},
        enabled=False,
    )
    AgentToolFactory(agent=other, name="fetch_calamari", description="Another agent's tool.")

    def document(owner_agent: Any, status: str, texts: list[str]) -> None:
        doc = KnowledgeDocumentFactory(agent=owner_agent, name="Menu", type="text", size_bytes=100, status=status)
        for position, text in enumerate(texts):
            KnowledgeChunk.objects.create(
                document=doc,
                agent=owner_agent,
                position=position,
                text=text,
                token_count=10,
                embedding=b"\x00" * 4 * 384,
            )

    document(agent, DocumentStatus.READY, ["Our risotto uses arborio rice.", "Espresso comes after dinner."])
    document(agent, DocumentStatus.PROCESSING, ["The gnocchi are still being written up."])
    document(other, DocumentStatus.READY, ["Sushi is served upstairs."])

    texts = agent_vocabulary_texts(agent_id=agent.id)
    for expected in (
        "order_dessert",
        "Orders a dessert for the table.",
        "dessertName",
        "guestCount",
        "tiramisu",
        "gelato",
        "How many guests share it.",
        "Our risotto uses arborio rice.",
        "Espresso comes after dinner.",
    ):
        assert expected in texts, expected
    joined = " ".join(texts)
    for absent in ("cancel_banquet", "banquetHall", "lasagna", "calamari", "gnocchi", "Sushi"):
        assert absent not in joined, absent

    # The recognizer's model for this agent can then say its tool and knowledge words.
    model = language_model.language_model(pocketsphinx.agent_texts(agent), texts)
    words = _dictionary_words(model)
    assert {"tiramisu", "dessert", "risotto", "espresso"} <= words
    assert not {"lasagna", "calamari", "gnocchi", "sushi"} & words
