"""Talk to a voice agent from Python: send a WAV file as the caller's microphone, save what the agent
says to a WAV file and print the transcripts.

    python docs/examples/python_client.py --agent-id AGENT_ID --input question.wav --output answer.wav

The API key comes from --api-key or the VOICE_AGENT_API_KEY environment variable, the service's address
from --base-url or VOICE_AGENT_BASE_URL (default http://127.0.0.1:8000, where `make run` serves unless
given another PORT). The agent must be `active`. Needs Python 3.10+ and aiohttp
(`pip install aiohttp`; the service's own virtualenv has it). The session request uses only the
standard library.

What it does, as a browser client would (docs/reference/realtime-protocol.md has the protocol):
1. POST /public/v1/agents/{id}/realtime-sessions with the API key: a token and `websocketUrl`.
2. Connects to `websocketUrl` and waits for `session.started`.
3. Streams 16 kHz mono PCM16 in 20 ms chunks at real time, like a microphone: silence while the agent
   greets, then the file, then silence until the agent has answered (the server ends a turn on silence).
4. Sends `stop`; the server closes with 1000. Writes the agent's audio (24 kHz mono PCM16), chunks back
   to back, to --output.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import sys
import urllib.error
import urllib.request
import wave
from array import array

import aiohttp

IN_RATE = 16_000  # what the server expects: mono PCM16 little-endian
OUT_RATE = 24_000  # what the server sends
CHUNK_MS = 20


def create_session(base_url: str, api_key: str, agent_id: str) -> dict:
    """Your backend does this, never the browser: the API key must stay on the server side."""
    if not base_url.startswith(("http://", "https://")):
        sys.exit("--base-url must be an http:// or https:// URL")
    request = urllib.request.Request(  # noqa: S310 - the scheme is checked above
        f"{base_url.rstrip('/')}/public/v1/agents/{agent_id}/realtime-sessions",
        method="POST",
        headers={"Authorization": f"Bearer {api_key}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - checked above
            return json.load(response)
    except urllib.error.HTTPError as error:
        sys.exit(f"Could not create a session: {error.code} {error.read().decode(errors='replace')}")
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        sys.exit(
            f"Cannot reach the service at {base_url} ({reason}): is it running there? "
            "Give its address with --base-url or VOICE_AGENT_BASE_URL."
        )


def read_wav_as_16k_mono(path: str) -> bytes:
    """A 16-bit PCM WAV file as 16 kHz mono PCM16 (channels averaged, linear resampling)."""
    with wave.open(path, "rb") as wav:
        if wav.getsampwidth() != 2:
            sys.exit(f"{path}: expected 16-bit PCM samples")
        channels, rate = wav.getnchannels(), wav.getframerate()
        samples = array("h", wav.readframes(wav.getnframes()))
    if sys.byteorder == "big":
        samples.byteswap()
    if channels > 1:
        samples = array("h", (sum(samples[i : i + channels]) // channels for i in range(0, len(samples), channels)))
    if rate != IN_RATE and len(samples) > 1:
        count = int(len(samples) * IN_RATE / rate)
        step = (len(samples) - 1) / max(1, count - 1)
        resampled = array("h")
        for n in range(count):
            position = n * step
            i = int(position)
            following = samples[min(i + 1, len(samples) - 1)]
            resampled.append(int(samples[i] + (following - samples[i]) * (position - i)))
        samples = resampled
    if sys.byteorder == "big":
        samples.byteswap()
    return samples.tobytes()


def write_wav(path: str, pcm16: bytes, rate: int) -> None:
    with wave.open(path, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(pcm16)


class Call:
    """One conversation: a reader that keeps the agent's audio and a microphone that sends ours."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.agent_audio = bytearray()
        self.started = asyncio.Event()
        self.greeted = asyncio.Event()  # the agent's first turn (disclosure and greeting) was played
        self.answered = asyncio.Event()  # the agent finished a turn after hearing us
        self.heard_us = False

    async def read(self) -> None:
        async for raw in self.ws:
            if raw.type != aiohttp.WSMsgType.TEXT:
                continue
            message = json.loads(raw.data)
            kind = message.get("type")
            if kind == "session.started":
                print(f"session started, call {message['callId']}")
                self.started.set()
            elif kind == "output_audio":
                # base64 PCM16, mono, message["sampleRate"] (24000) Hz. A player would queue it for playback.
                self.agent_audio += base64.b64decode(message["audio"])
            elif kind == "clear":
                # Barge-in: a player must drop the audio it has queued but not played yet, at once.
                print("[clear: the agent was interrupted]")
            elif kind == "transcript":
                print(f"{message['role']}: {message['text']}")
                if message["role"] == "user":
                    self.heard_us = True
                elif message["role"] == "assistant":
                    (self.answered if self.heard_us else self.greeted).set()
            elif kind in ("tool.started", "tool.finished"):
                print(f"[{kind} {message['name']}]")
            elif kind == "transfer":
                # The agent hands the caller to a human at this number; the server closes the socket next.
                print(f"[transfer to {message['phoneNumber']}]")
            elif kind == "error":
                print(f"[error {message['code']}: {message['message']}]")
        print(f"socket closed: {self.ws.close_code}")

    async def microphone(self, speech: bytes, wait_seconds: float) -> None:
        """Send audio in real time: silence until greeted, the speech, then silence until answered."""
        loop = asyncio.get_running_loop()
        chunk_bytes = IN_RATE * 2 * CHUNK_MS // 1000
        silence = bytes(chunk_bytes)
        next_at = loop.time()

        async def send(chunk: bytes) -> None:
            nonlocal next_at
            if self.ws.closed:
                return
            await asyncio.sleep(max(0.0, next_at - loop.time()))  # a microphone cannot run ahead of time
            await self.ws.send_str(json.dumps({"type": "input_audio", "audio": base64.b64encode(chunk).decode()}))
            next_at += CHUNK_MS / 1000

        async def silence_until(event: asyncio.Event) -> None:
            deadline = loop.time() + wait_seconds
            while not event.is_set() and loop.time() < deadline and not self.ws.closed:
                await send(silence)

        await silence_until(self.greeted)
        for offset in range(0, len(speech), chunk_bytes):
            await send(speech[offset : offset + chunk_bytes])
        await silence_until(self.answered)


async def talk(websocket_url: str, speech: bytes, wait_seconds: float) -> bytes:
    async with aiohttp.ClientSession() as http, http.ws_connect(websocket_url, max_msg_size=0) as ws:
        call = Call(ws)
        reader = asyncio.create_task(call.read())
        try:
            # The first session after a server start may wait for the speech models to load.
            started = asyncio.create_task(call.started.wait())
            await asyncio.wait({started, reader}, timeout=120, return_when=asyncio.FIRST_COMPLETED)
            started.cancel()
            if not call.started.is_set():
                sys.exit("The session did not start (see the error above)")
            await call.microphone(speech, wait_seconds)
            if not ws.closed:  # the server may have ended the call itself (a transfer, an error)
                await ws.send_str(json.dumps({"type": "stop"}))
            await asyncio.wait_for(reader, timeout=15)  # the server closes with 1000 after `stop`
        finally:
            reader.cancel()
        return bytes(call.agent_audio)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent-id", required=True)
    parser.add_argument("--input", required=True, help="WAV file (16-bit PCM, any rate, mono or stereo)")
    parser.add_argument("--output", default="agent.wav", help="where to save the agent's audio")
    parser.add_argument("--base-url", default=os.environ.get("VOICE_AGENT_BASE_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--api-key", default=os.environ.get("VOICE_AGENT_API_KEY"))
    parser.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the greeting, then the answer")
    args = parser.parse_args()
    if not args.api_key:
        parser.error("give --api-key or set VOICE_AGENT_API_KEY")

    speech = read_wav_as_16k_mono(args.input)
    session = create_session(args.base_url, args.api_key, args.agent_id)
    audio = asyncio.run(talk(session["websocketUrl"], speech, args.wait))
    write_wav(args.output, audio, OUT_RATE)
    print(f"saved {len(audio) / 2 / OUT_RATE:.1f} s of agent audio to {args.output}")


if __name__ == "__main__":
    main()
