"""A caller on a real SIP phone: Debian's `baresip` dialling an endpoint on loopback, playing a WAV file as
the caller's voice (`aufile`), recording what it hears (`sndfile`), pressing keys as RFC 4733 events
through its control socket (`ctrl_tcp`), and stopped once its call has ended. Used by the SIP tests."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import wave
from pathlib import Path
from typing import Any

import numpy as np

from testing.voice import record_voice_24k

BARESIP = shutil.which("baresip") or "/usr/bin/baresip"


def free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def caller_wav(folder: Path, sentence: str, *, lead: float, tail: float, rate: int = 8000) -> Path:
    """What the caller says into the phone (at the codec's rate): silence, the sentence, silence; baresip
    hangs up when the file ends."""
    import soxr

    (speech,) = record_voice_24k((sentence,), folder, voice_name="leo").values()
    samples = soxr.resample(np.frombuffer(speech, dtype="<i2"), 24000, rate).astype("<i2")
    audio = np.concatenate([np.zeros(int(lead * rate), "<i2"), samples, np.zeros(int(tail * rate), "<i2")])
    path = folder / "caller.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(audio.tobytes())
    return path


def silence_wav(folder: Path, seconds: float, rate: int = 8000) -> Path:
    """A caller who says nothing for `seconds` (and presses keys)."""
    path = folder / "silence.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(np.zeros(int(seconds * rate), "<i2").tobytes())
    return path


async def baresip_call(
    endpoint: Any,
    folder: Path,
    wav: Path,
    *,
    to: str,
    seconds: int = 40,
    codec: str = "PCMU",
    credentials: str = "",
    keys: tuple[float, str] | None = None,
) -> Path:
    """baresip dials `to` at the endpoint (telephony.sip.endpoint.SipEndpoint, whose loop becomes this one)
    and plays `wav` (and presses `keys`: (seconds after the call starts, the keys), as RFC 4733 events); the
    folder of what it recorded."""
    endpoint.loop = asyncio.get_running_loop()
    config = folder / "baresip"
    dumps = folder / "heard"
    config.mkdir()
    dumps.mkdir()
    sip_port = free_udp_port()
    (config / "config").write_text(
        f"sip_listen\t127.0.0.1:{sip_port}\naudio_source\taufile,{wav}\naudio_player\taufile,{folder}/unused.wav\n"
        f"audio_alert\taufile,{wav}\nmodule_path\t/usr/lib/baresip/modules\nmodule\tg711.so\nmodule\tg722.so\nmodule\taufile.so\n"
        f"module\tsndfile.so\nmodule_app\taccount.so\nmodule_app\tmenu.so\nsnd_path\t{dumps}\n"
        f"module_app\tctrl_tcp.so\nctrl_tcp_listen\t127.0.0.1:{(control := free_tcp_port())}\n"
    )
    auth = f";auth_user={credentials.split(':')[0]};auth_pass={credentials.split(':')[1]}" if credentials else ""
    (config / "accounts").write_text(f"<sip:caller@127.0.0.1>{auth};regint=0;audio_codecs={codec}\n")
    target = f"sip:{to}@127.0.0.1:{endpoint.address.port}"
    process = await asyncio.create_subprocess_exec(
        BARESIP, "-n", "127.0.0.1", "-f", str(config), "-e", f"/dial {target}", "-t", str(seconds),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    pressing = asyncio.create_task(_press(control, *keys)) if keys else None
    output = await asyncio.wait_for(_until_the_call_ends(process), seconds + 20)
    if pressing is not None:
        await pressing
    (folder / "baresip.log").write_bytes(output)
    return dumps


async def _press(control: int, after: float, keys: str) -> None:
    """Keys pressed on baresip's keypad `after` seconds into the call, through its control socket (netstring
    JSON, the `sndcode` command: RFC 4733 telephone events on the call)."""
    await asyncio.sleep(after)
    _, writer = await asyncio.open_connection("127.0.0.1", control)
    for key in keys:
        body = json.dumps({"command": "sndcode", "params": key, "token": key}).encode()
        writer.write(str(len(body)).encode() + b":" + body + b",")
        await writer.drain()
        await asyncio.sleep(0.4)
    writer.close()
    await writer.wait_closed()


# What baresip prints when a call ends (its BYE, ours, or a refusal): it then stays up until `-t` runs out.
_CALL_ENDED = (b"terminated (duration", b"session closed")


async def _until_the_call_ends(process: asyncio.subprocess.Process) -> bytes:
    """baresip's output until its call has ended; then baresip is stopped (its files are written by then)."""
    assert process.stdout is not None
    output = bytearray()
    while chunk := await process.stdout.read(4096):
        output.extend(chunk)
        if any(marker in output for marker in _CALL_ENDED):
            process.terminate()
            output.extend(await process.stdout.read())
            break
    await process.wait()
    return bytes(output)


def heard(dumps: Path) -> tuple[bytes, int]:
    """What the caller heard (PCM16) and its sample rate, from baresip's recording of the decoded audio."""
    (path,) = dumps.glob("*-dec.wav")
    with wave.open(str(path)) as recording:
        return recording.readframes(recording.getnframes()), recording.getframerate()


def on_the_line(dumps: Path) -> float:
    """How long the caller was on the call, in seconds: baresip records what it decodes until the call ends."""
    audio, rate = heard(dumps)
    return len(audio) / 2 / rate
