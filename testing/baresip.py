"""Real SIP phones: Debian's `baresip` on loopback, playing a WAV file as its user's voice (`aufile`),
recording what it hears (`sndfile`), pressing keys as RFC 4733 events and hanging up through its control
socket (`ctrl_tcp`), and stopped once its call has ended. `baresip_call` dials the endpoint (a caller);
`Phone` waits for calls (a person the agent calls, or a transfer target). Used by the SIP tests."""

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
    """A port free for UDP and TCP, with the next one free for TCP: baresip listens for SIP on both, and
    for SIP over TLS on the next port (a port taken for any of them makes it exit at start)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
            if port >= 65535:
                continue
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as stream:
                    stream.bind(("127.0.0.1", port))
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tls:
                    tls.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port


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
    port: int,
    folder: Path,
    wav: Path,
    *,
    to: str,
    seconds: int = 40,
    codec: str = "PCMU",
    credentials: str = "",
    keys: tuple[float, str] | None = None,
    calls: int = 1,
) -> Path:
    """baresip dials `to` at the SIP endpoint on loopback `port` and plays `wav` (and presses `keys`: (seconds after the call starts, the keys), as RFC 4733 events); the
    folder of what it recorded. It is stopped once `calls` calls have ended (2: a call it was transferred
    to, which plays `wav` again, after the first)."""
    config = folder / "baresip"
    dumps = folder / "heard"
    config.mkdir()
    dumps.mkdir()
    control = free_tcp_port()
    _configure(config, dumps, wav, control, f"<sip:caller@127.0.0.1>{auth(credentials)};regint=0;audio_codecs={codec}")
    target = f"sip:{to}@127.0.0.1:{port}"
    process = await asyncio.create_subprocess_exec(
        BARESIP, "-n", "127.0.0.1", "-f", str(config), "-e", f"/dial {target}", "-t", str(seconds),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    pressing = asyncio.create_task(_press(control, *keys)) if keys else None
    output = await asyncio.wait_for(_until_the_call_ends(process, calls), seconds + 20)
    if pressing is not None:
        await pressing
    (folder / "baresip.log").write_bytes(output)
    return dumps


def auth(credentials: str) -> str:
    """An account's digest credentials ("user:password") as baresip's account parameters."""
    if not credentials:
        return ""
    user, _, password = credentials.partition(":")
    return f";auth_user={user};auth_pass={password}"


def _configure(config: Path, dumps: Path, wav: Path, control: int, account: str) -> int:
    """baresip's configuration folder: a free SIP port, its voice, recorder, codecs, control socket and one
    account. Returns the SIP port."""
    sip_port = free_udp_port()
    (config / "config").write_text(
        f"sip_listen\t127.0.0.1:{sip_port}\naudio_source\taufile,{wav}\naudio_player\taufile,{config}/unused.wav\n"
        f"audio_alert\taufile,{wav}\nmodule_path\t/usr/lib/baresip/modules\nmodule\tg711.so\nmodule\tg722.so\n"
        f"module\taufile.so\nmodule\tsndfile.so\nmodule_app\taccount.so\nmodule_app\tmenu.so\nsnd_path\t{dumps}\n"
        f"module_app\tctrl_tcp.so\nctrl_tcp_listen\t127.0.0.1:{control}\n"
    )
    (config / "accounts").write_text(account + "\n")
    return sip_port


async def _command(control: int, *commands: tuple[str, str], pause: float = 0.4) -> None:
    """Commands to baresip's control socket (netstring JSON: `sndcode` presses a key as RFC 4733 telephone
    events on the call, `hangup` ends or refuses the call)."""
    _, writer = await asyncio.open_connection("127.0.0.1", control)
    for command, params in commands:
        body = json.dumps({"command": command, "params": params, "token": command}).encode()
        writer.write(str(len(body)).encode() + b":" + body + b",")
        await writer.drain()
        await asyncio.sleep(pause)
    writer.close()
    await writer.wait_closed()


async def _press(control: int, after: float, keys: str) -> None:
    """Keys pressed on baresip's keypad `after` seconds into the call."""
    await asyncio.sleep(after)
    await _command(control, *(("sndcode", key) for key in keys))


class Phone:
    """A SIP phone on loopback waiting for calls to `user` (an E.164 number), as `async with`:
    - `answer="auto"` answers at once and plays `wav`, hanging up `hang_up_after` seconds after the answer
      (or when `wav` ends);
    - `answer="busy"` refuses the call (486 Busy Here);
    - `answer="never"` lets it ring.
    `port` is its SIP port; after the block, `log` is what it printed and `dumps` what it heard."""

    def __init__(
        self, folder: Path, wav: Path, *, user: str, answer: str = "auto", hang_up_after: float | None = None
    ) -> None:
        self.folder, self.wav, self.user, self.answer, self.hang_up_after = folder, wav, user, answer, hang_up_after
        self.dumps = folder / "heard"
        self.log = ""
        self.port = 0
        self._process: asyncio.subprocess.Process | None = None
        self._watching: asyncio.Task[bytes] | None = None
        self._output = bytearray()

    async def __aenter__(self) -> Phone:
        config = self.folder / "baresip"
        config.mkdir(parents=True)
        self.dumps.mkdir()
        self.control = free_tcp_port()
        answermode = "auto" if self.answer == "auto" else "manual"
        account = f"<sip:{self.user}@127.0.0.1>;regint=0;answermode={answermode};audio_codecs=PCMU"
        self.port = _configure(config, self.dumps, self.wav, self.control, account)
        self._process = await asyncio.create_subprocess_exec(
            BARESIP, "-n", "127.0.0.1", "-f", str(config), "-t", "120",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        self._watching = asyncio.create_task(self._watch())
        return self

    async def _watch(self) -> bytes:
        """What baresip prints until its call has ended (then it is stopped); it refuses or hangs up the
        call as told on the way."""
        process = self._process
        assert process is not None and process.stdout is not None
        output = self._output
        acted = False
        while chunk := await process.stdout.read(4096):
            output.extend(chunk)
            if not acted and self.answer == "busy" and b"Incoming call" in output:
                acted = True
                await _command(self.control, ("hangup", ""))
            if not acted and self.hang_up_after is not None and b"Call established" in output:
                acted = True
                await asyncio.sleep(self.hang_up_after)
                await _command(self.control, ("hangup", ""))
            if any(marker in output for marker in _CALL_ENDED):
                break
        return bytes(output)

    async def ended(self, timeout: float = 60) -> str:
        """What baresip printed, once its call has ended."""
        assert self._watching is not None
        try:
            output = await asyncio.wait_for(asyncio.shield(self._watching), timeout)
        except TimeoutError:
            raise AssertionError(
                f"the phone's call did not end: {self._output[-3000:].decode(errors='replace')}"
            ) from None
        self.log = output.decode(errors="replace")
        return self.log

    async def __aexit__(self, *exc: Any) -> None:
        process = self._process
        if process is not None and process.returncode is None:
            process.terminate()
            await process.wait()
        if self._watching is not None:
            if self._watching.done():
                self.log = self._watching.result().decode(errors="replace")
            else:
                self._watching.cancel()
                await asyncio.gather(self._watching, return_exceptions=True)


# What baresip prints when a call ends (its BYE, ours, or a refusal): it then stays up until `-t` runs out.
_CALL_ENDED = (b"terminated (duration", b"session closed", b"rejecting incoming call")


async def _until_the_call_ends(process: asyncio.subprocess.Process, calls: int = 1) -> bytes:
    """baresip's output until `calls` calls have ended; then baresip is stopped (its files are written by
    then)."""
    assert process.stdout is not None
    output = bytearray()
    while chunk := await process.stdout.read(4096):
        output.extend(chunk)
        if sum(output.count(marker) for marker in _CALL_ENDED) >= calls:
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
