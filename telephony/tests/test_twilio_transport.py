"""The Twilio transport as the engine drives it, with a hand-driven clock: what goes on the wire for
agent audio, barge-in, marks and endings, and how late the caller really hears the agent."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import pytest

from kit.providers import ProviderError
from realtime.engine.clock import ManualClock
from realtime.engine.contracts import Ending
from telephony import audio
from telephony.consumers import MediaStreamTransport

FRAME_24K = 960  # bytes of PCM16 24 kHz in 20 ms


class FakeStream:
    """Stands in for the consumer: records what would go on the socket."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.closed: tuple[int, str] | None = None
        self.stopped_waits: list[float] = []

    async def send_message(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    async def close_once(self, code: int, reason: str = "") -> None:
        self.closed = (code, reason)

    async def wait_stopped(self, timeout: float) -> None:
        self.stopped_waits.append(timeout)

    def call_over(self) -> bool:
        return False


class FakeProvider:
    stream_ends_call = True  # Twilio's

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, dict[str, str]]] = []
        self.fail = fail

    async def transfer(self, **kwargs: str) -> None:
        self.calls.append(("transfer", kwargs))
        if self.fail:
            raise ProviderError("Twilio refused the transfer", permanent=True)

    async def hang_up(self, **kwargs: str) -> None:
        self.calls.append(("hang_up", kwargs))
        if self.fail:
            raise ProviderError("Twilio is unreachable")


def speech(frames: int) -> bytes:
    t = np.arange(frames * 480) / 24000
    return (8000 * np.sin(2 * np.pi * 300 * t)).astype("<i2").tobytes()


def make(provider: FakeProvider | None = None) -> tuple[MediaStreamTransport, FakeStream, ManualClock]:
    stream, clock = FakeStream(), ManualClock()
    transport = MediaStreamTransport(
        stream,  # type: ignore[arg-type]  # a fake with the interface the transport uses
        stream_sid="MZ1",
        call_sid="CA1",
        caller_id="+14155550100",
        provider=provider,  # type: ignore[arg-type]  # a fake with the interface the transport uses
        clock=clock,
    )
    return transport, stream, clock


def events(stream: FakeStream) -> list[str]:
    return [message["event"] for message in stream.sent]


async def test_agent_audio_goes_out_as_20_ms_mu_law_frames_then_a_mark() -> None:
    transport, stream, _ = make()
    await transport.send_audio(speech(3))
    await transport.send_audio(speech(3))
    assert events(stream) == ["media"] * 3 + ["mark"] + ["media"] * 3 + ["mark"]
    media = [m for m in stream.sent if m["event"] == "media"]
    assert {m["streamSid"] for m in stream.sent} == {"MZ1"}
    assert {len(base64.b64decode(m["media"]["payload"])) for m in media} == {audio.FRAME_BYTES}
    assert [m["mark"]["name"] for m in stream.sent if m["event"] == "mark"] == ["a1", "a2"]


async def test_barge_in_sends_clear_and_ignores_the_echoes_of_dropped_marks() -> None:
    transport, stream, clock = make()
    await transport.send_audio(speech(3))
    await transport.clear()
    assert stream.sent[-1] == {"event": "clear", "streamSid": "MZ1"}
    transport.mark_played("a1")  # Twilio returns the marks a clear discards
    assert transport.marks_echoed == 0 and transport.playback_lag(clock.now() + 5) == 0.0


async def test_mark_echoes_measure_how_late_the_caller_hears_the_agent() -> None:
    transport, _, clock = make()
    await transport.send_audio(speech(3))  # the session expects it played by now + 60 ms
    await transport.send_audio(speech(3))  # ... and this by now + 120 ms
    await clock.advance(0.150)  # network and Twilio's buffer: 90 ms late
    transport.mark_played("a1")
    assert transport.playback_lag(clock.now()) == pytest.approx(0.090, abs=0.006)
    # The second echo is overdue: the caller is at least that far behind.
    await clock.advance(0.150)
    assert transport.playback_lag(clock.now()) == pytest.approx(0.180, abs=0.006)
    transport.mark_played("a2")
    assert transport.playback_lag(clock.now()) == pytest.approx(0.180, abs=0.006)


async def test_a_transfer_dials_from_the_number_called() -> None:
    provider = FakeProvider()
    transport, stream, _ = make(provider)
    await transport.transfer("+14155550142")
    assert provider.calls == [
        ("transfer", {"call_sid": "CA1", "destination": "+14155550142", "caller_id": "+14155550100"})
    ]
    await transport.hang_up(Ending.TRANSFERRED)
    assert stream.stopped_waits and stream.closed == (1000, "transferred")


async def test_a_transfer_without_a_telephony_account_is_a_provider_error() -> None:
    transport, _, _ = make(None)
    with pytest.raises(ProviderError):
        await transport.transfer("+14155550142")


async def test_a_failed_session_also_hangs_up_the_call() -> None:
    provider = FakeProvider(fail=True)
    transport, stream, _ = make(provider)
    await transport.hang_up(Ending.FAILED, "engine error")
    assert provider.calls == [("hang_up", {"call_sid": "CA1"})] and stream.closed == (1000, "failed")


async def test_other_endings_only_close_the_stream() -> None:
    provider = FakeProvider()
    transport, stream, _ = make(provider)
    await transport.hang_up(Ending.COMPLETED)
    assert provider.calls == [] and stream.closed == (1000, "completed")
