"""The end-of-turn detectors (TURN_END_DETECTOR): Smart Turn v3 deciding a pause through the engine (the
hand-moved clock), its model loading from the file `make setup` extracts with no network, and a missing
model refused at `manage.py check`."""

from __future__ import annotations

import socket
from functools import partial
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from realtime.engine.cascade import end_of_turn
from testing.fakes import FakeDetector, silence, speech
from testing.pipeline import Harness
from testing.recording import MemoryRecorder

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

SENTENCE = "my number is four five six"


@pytest.fixture
def agent(greeting_agent):
    return greeting_agent


class ScriptedModel:
    """Stands in for Smart Turn: answers `probability` and keeps the audio it was given."""

    def __init__(self, probability: float) -> None:
        self.probability = probability
        self.heard: list[int] = []

    def complete(self, pcm16_16k: bytes) -> float:
        self.heard.append(len(pcm16_16k))
        return self.probability


async def paused_caller(agent, monkeypatch, *, words_at_pause: str, probability: float | None):
    """A caller who says 600 ms, pauses 400 ms and says 300 ms more, on a detector with the quick end
    of turn (a pause after 300 ms; turns that do not read finished end after 700 ms). The user turns
    heard, and the stand-in model (None: TURN_END_DETECTOR=words)."""
    model = None
    if probability is not None:
        model = ScriptedModel(probability)
        monkeypatch.setattr(end_of_turn, "smart_turn", lambda: model)
    h = Harness(
        agent,
        recorder=MemoryRecorder(),
        texts=["my number is", "four five six"] if probability is not None and probability > 0.5 else [SENTENCE],
        detector=partial(FakeDetector, pause_ms=300, end_ms=700),
    )
    h.parts["recognizer"].peek = lambda: words_at_pause
    await h.start()
    await h.feed(silence(2300))  # the disclosure and the greeting
    await h.feed(speech(600) + silence(400) + speech(300) + silence(2500))
    users = [text for role, text in h.transport.transcripts() if role == "user"]
    await h.stop()
    return users, model


async def test_smart_turn_ends_the_turn_at_a_pause_the_words_would_wait_in(agent, settings, monkeypatch):
    """The words at the pause ("my number is") announce more; with TURN_END_DETECTOR=words the turn
    stays whole, with smart-turn the model's answer (finished) ends it in the pause."""
    settings.TURN_END_DETECTOR = "words"
    users, _ = await paused_caller(agent, monkeypatch, words_at_pause="my number is", probability=None)
    assert users == [SENTENCE]
    settings.TURN_END_DETECTOR = "smart-turn"
    users, model = await paused_caller(agent, monkeypatch, words_at_pause="my number is", probability=0.9)
    assert users == ["my number is", "four five six"]
    # Asked at each pause (in the sentence, and after its end) on the utterance's audio so far.
    assert len(model.heard) == 2
    assert (600 + 300) * 32 <= model.heard[0] <= (400 + 600 + 300 + 20) * 32


async def test_smart_turn_keeps_the_turn_open_where_the_words_read_finished(agent, settings, monkeypatch):
    settings.TURN_END_DETECTOR = "smart-turn"
    users, model = await paused_caller(agent, monkeypatch, words_at_pause="thank you very much", probability=0.1)
    assert users == [SENTENCE]
    assert len(model.heard) == 2  # in the sentence, and after its end (the turn then ends after 700 ms)


def no_network(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError(f"a network connection was attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.mark.slow
def test_the_model_loads_from_the_extracted_file_with_no_network(settings, monkeypatch):
    path = Path(settings.SMART_TURN_MODEL_PATH)
    assert path.is_file(), f"no Smart Turn model at {path}: `make setup` extracts it"
    assert (path.parent / "LICENSE").read_text().startswith("BSD 2-Clause License")
    no_network(monkeypatch)
    model = end_of_turn.SmartTurn(path)  # a model of its own: loaded here, under the refusing sockets
    silent = model.complete(bytes(32000))
    assert 0.0 <= silent <= 1.0
    assert model.complete(bytes(6400) + speech(1500) + bytes(9600)) != silent  # it hears the audio


@pytest.mark.slow
def test_smart_turn_reads_a_spoken_sentence_as_finished(settings, tmp_path):
    from testing.voice import record_voice

    (audio,) = record_voice(("Please transfer me to a human.",), tmp_path).values()
    probability = end_of_turn.SmartTurn(Path(settings.SMART_TURN_MODEL_PATH)).complete(
        bytes(6400) + audio + bytes(9600)
    )
    assert probability > 0.9


def test_the_loader_refuses_a_missing_file_and_fetches_nothing(tmp_path, monkeypatch):
    no_network(monkeypatch)
    with pytest.raises(FileNotFoundError, match="never downloaded"):
        end_of_turn.SmartTurn(tmp_path / "absent.onnx").complete(bytes(3200))


def test_a_missing_model_fails_the_system_check(settings, tmp_path):
    settings.SMART_TURN_MODEL_PATH = str(tmp_path / "absent.onnx")
    settings.TURN_END_DETECTOR = "words"
    call_command("check")  # not chosen: no problem
    settings.TURN_END_DETECTOR = "smart-turn"
    with pytest.raises(SystemCheckError, match=r"TURN_END_DETECTOR=smart-turn needs the Smart Turn model"):
        call_command("check")
