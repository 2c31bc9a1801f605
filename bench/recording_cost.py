"""Recording cost benchmark (not a test): what recording a call costs, per call minute.

A call of MINUTES minutes is played into the engine's recorder (realtime/engine/session/recording.py,
CallAudio) as a live call feeds it: the caller's audio in 20 ms chunks at 16 kHz, the agent's in 60 ms
playout chunks at 24 kHz, taking turns (about 6 s each, with pauses, one barge-in cut per minute). The
audio is speech-like (a voiced source with a moving pitch and a syllable envelope, plus breath noise), so
Opus works as it does on speech. Then the recording is encoded (Ogg/Opus, PyAV) and stored through the
recordings storage (the local filesystem, a temporary folder), as at the end of a call.

Printed per call length: CPU seconds of the live part (on the event loop, during the call), CPU seconds
of encoding and storing (in a worker thread, after the call), both per call minute, and the stored bytes
per call minute.

Usage: .venv/bin/python bench/recording_cost.py [--minutes 1 5 30]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")


def speech_like(seconds: float, rate: int, seed: int) -> bytes:
    """Voiced speech-like PCM16: a pitch gliding around 120-220 Hz with harmonics, syllables at ~4 Hz."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    pitch = 160 + 50 * np.sin(2 * np.pi * 0.7 * t + rng.uniform(0, 6))
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    voiced = sum(np.sin(k * phase) / k for k in range(1, 12))
    envelope = np.clip(np.sin(2 * np.pi * 4 * t + rng.uniform(0, 6)), 0, None) ** 0.7
    signal = voiced * envelope + 0.05 * rng.standard_normal(t.size)
    return (signal / np.max(np.abs(signal)) * 9000).astype("<i2").tobytes()


def run(minutes: float, folder: Path) -> dict[str, float]:
    from django.conf import settings

    from realtime.engine.session.recording import CallAudio

    settings.RECORDING_MAX_SECONDS = int(minutes * 60) + 60
    caller_voice = speech_like(6.0, 16000, 1)
    agent_voice = speech_like(6.0, 24000, 2)
    audio = CallAudio(0.0)
    total = minutes * 60
    live = time.process_time()
    at = 0.0
    turn = 0
    while at < total:
        if turn % 2 == 0:  # the caller speaks 6 s in 20 ms chunks (640 bytes), then 1 s of silence
            for offset in range(0, len(caller_voice), 640):
                at += 0.02
                audio.caller_audio(at, caller_voice[offset : offset + 640])
            for _ in range(50):
                at += 0.02
                audio.caller_audio(at, b"\x00\x00" * 320)
        else:  # the agent answers in 60 ms playout chunks (2,880 bytes); every 10th answer is cut
            start = at
            for offset in range(0, len(agent_voice), 2880):
                audio.agent_audio(start + offset / 48000, agent_voice[offset : offset + 2880])
            at += len(agent_voice) / 48000
            if turn % 10 == 1:
                audio.cut(at - 2.0)
        turn += 1
    live = time.process_time() - live

    from calls.recordings import encode_stereo_ogg

    encode = time.process_time()
    stored = folder / f"call-{minutes:g}.ogg"
    with tempfile.SpooledTemporaryFile(max_size=4 * 1024 * 1024) as encoded:
        encode_stereo_ogg(
            left=audio.caller.file, left_rate=16000, right=audio.agent.file, right_rate=24000, out=encoded
        )
        encoded.seek(0)
        from django.core.files import File
        from django.core.files.storage import FileSystemStorage

        FileSystemStorage(location=str(folder)).save(stored.name, File(encoded, name=stored.name))
    encode = time.process_time() - encode
    audio.close()
    size = stored.stat().st_size
    length = at / 60
    return {
        "minutes": length,
        "live_cpu_per_minute": live / length,
        "encode_cpu_per_minute": encode / length,
        "bytes_per_minute": size / length,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, nargs="+", default=[1, 5, 30])
    arguments = parser.parse_args()
    import django

    django.setup()
    print(f"{'call':>8} {'live CPU s/min':>15} {'encode+store CPU s/min':>23} {'bytes/min':>10}")
    with tempfile.TemporaryDirectory() as folder:
        for minutes in arguments.minutes:
            result = run(minutes, Path(folder))
            print(
                f"{result['minutes']:>6.1f} m {result['live_cpu_per_minute']:>15.4f} "
                f"{result['encode_cpu_per_minute']:>23.3f} {result['bytes_per_minute']:>10.0f}"
            )


if __name__ == "__main__":
    main()
