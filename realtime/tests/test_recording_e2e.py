"""End to end through the project's ASGI application in the test's process (testing/inprocess.py): a browser
call with recording on is stored as stereo Ogg/Opus (the caller on the left while they speak, the agent on
the right while it speaks, on the call's clock), its recordingUrl works, answers Range requests and stops
working once expired; a recording that cannot be stored leaves a complete call with an `error` agent log
line and no recordingUrl; recordings go to an S3-compatible store when one is configured.

The recordings storage is the server's setting (RECORDINGS_STORAGE_URL makes settings.STORAGES's
`recordings` entry: the same entry is set here). A recordingUrl's expiry is read on the service's clock
(calls/recordings.py's `time`), moved past it here rather than waited for. Call events go out as the
event worker sends them (`deliver_due`, run by the test: the tests' settings start no worker thread)."""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import av
import httpx
import numpy as np
import pytest
from asgiref.sync import sync_to_async

from calls import recordings
from calls.logging import flush_agent_logs
from calls.models import AgentLog, Call
from calls.webhooks.events import deliver_due
from kit.storage import storage_from_url
from testing.agents import AVA_GREETING, ava_agent
from testing.clients import VoiceClient, is_type
from testing.conversations import issue, silence, socket_url
from testing.inprocess import InProcessServer, serving
from testing.stores import LocalS3
from testing.voice import record_voice
from testing.waiting import polled
from testing.webhooks import LoopbackReceiver

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.usefixtures("close_db_threads"),
]

GREETING = AVA_GREETING
INSTRUCTIONS = (
    "You take table reservations for the Acme restaurant. Callers book a table for a number of people, "
    "for a date and a time, for lunch or dinner."
)
SENTENCE = "I would like to book a table for four people tomorrow evening."
TTL = 8  # seconds a recordingUrl works on this test's server


def stored_in(settings: Any, url: str, **credentials: str) -> None:
    """The recordings storage RECORDINGS_STORAGE_URL=`url` configures (voiceagent/settings.py)."""
    entry = storage_from_url(url, default_location="", name="RECORDINGS_STORAGE_URL", **credentials)
    settings.STORAGES = {**settings.STORAGES, "recordings": entry}


@pytest.fixture
def server(settings: Any, realtime_settings: Any, tmp_path: Any) -> Iterator[InProcessServer]:
    stored_in(settings, f"file://{tmp_path / 'media'}")
    # call.ended goes to an organization webhook on loopback.
    values = {"RECORDING_URL_TTL_SECONDS": TTL, "OUTBOUND_ALLOWED_NETWORKS": ["127.0.0.0/8"]}
    with serving(settings, values) as started:
        yield started


@pytest.fixture
def broken_storage_server(settings: Any, realtime_settings: Any, tmp_path: Any) -> Iterator[InProcessServer]:
    """An application whose recordings storage cannot be written: its folder is below a regular file."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    stored_in(settings, f"file://{blocker}/recordings")
    with serving(settings) as started:
        yield started


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3]:
    with LocalS3(bucket="call-recordings", prefix="voice") as store:
        yield store


@pytest.fixture
def s3_server(settings: Any, realtime_settings: Any, s3: LocalS3) -> Iterator[InProcessServer]:
    """An application storing recordings in the S3-compatible stand-in (RECORDINGS_STORAGE_URL=s3://...)."""
    stored_in(settings, s3.storage_url, access_key=s3.ACCESS_KEY, secret_key=s3.SECRET_KEY)
    with serving(settings) as started:
        yield started


@pytest.fixture(scope="module")
def speech_16k(tmp_path_factory: Any) -> dict[str, bytes]:
    return record_voice((SENTENCE,), tmp_path_factory.mktemp("voice"))


@pytest.fixture
def ava(owner: Any, make_agent: Any, realtime_settings: Any) -> Any:
    return ava_agent(owner, make_agent, instructions=INSTRUCTIONS, recording_enabled=True)


async def http(
    server: InProcessServer,
    url: str,
    *,
    api_key: str | None = None,
    headers: dict[str, str] | None = None,
    method: str = "GET",
    body: Any = None,
) -> tuple[int, httpx.Headers, bytes]:
    """One request to the application (`url`: a path, or an absolute URL it handed out)."""
    sent = {**(headers or {}), **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    async with server.ahttp() as client:
        response = await client.request(method, url, headers=sent, json=body)
    return response.status_code, response.headers, response.content


async def call_detail_when(server: InProcessServer, api_key: str, call_id: str, ready: Any, timeout: float = 60) -> Any:
    async def read() -> Any:
        status, _, body = await http(server, f"/public/v1/calls/{call_id}", api_key=api_key)
        assert status == 200, body
        detail = json.loads(body)
        return detail if ready(detail) else None

    return await polled(read, what=f"the detail of call {call_id}", timeout=timeout, every=0.3)


def energy(audio: np.ndarray, rate: int, start: float, end: float) -> tuple[float, float]:
    part = audio[:, max(0, int(start * rate)) : int(end * rate)]
    left, right = np.sqrt(np.mean(part**2, axis=1))
    return float(left), float(right)


async def recording_when_stored(server: InProcessServer, url: str, timeout: float = 60) -> tuple[int, Any, bytes]:
    """GET a recordingUrl handed out at the end of the call: 404 RECORDING_NOT_READY (with Retry-After)
    while the recording is being stored, then the recording."""

    async def read() -> tuple[int, Any, bytes] | None:
        status, headers, body = await http(server, url)  # no API key: the URL is the credential
        if status != 404:
            return status, headers, body
        assert json.loads(body)["code"] == "RECORDING_NOT_READY" and int(headers["Retry-After"]) > 0, body
        return None

    return await polled(read, what="the stored recording", timeout=timeout, every=0.2)


async def recorded_call(server: InProcessServer, ava: Any, speech_16k: dict[str, bytes]) -> tuple[Any, ...]:
    """A browser call: the greeting, the caller's sentence, the answer, then the caller hangs up. Returns the
    call id, the client's time of the call's start, and the client times of the agent's and caller's audio."""
    loop = asyncio.get_running_loop()
    async with VoiceClient(socket_url(server, ava, issue(ava))) as client:
        first = await client.wait_for(is_type("session.started"), timeout=60)
        call_id = client.messages[first].message["callId"]
        origin = client.messages[first].at  # about the call's time 0 (the call record opened just before)
        greeted = asyncio.Event()
        mic = asyncio.create_task(client.stream(silence(30_000), stop_when=greeted.is_set))
        greeting = await client.wait_for(is_type("transcript", role="assistant"), timeout=60)
        greeting_audio = [m.at for m in client.messages[:greeting] if m.message["type"] == "output_audio"]
        await client.wait_for(is_type("agent_speech.ended"), timeout=60)  # the greeting has played out
        greeted.set()
        await mic

        speech = speech_16k[SENTENCE]
        spoke_at = loop.time()
        await client.stream(speech + silence(1500))
        user = await client.wait_for(is_type("transcript", role="user"), after=greeting + 1, timeout=60)
        answer = await client.wait_for(is_type("transcript", role="assistant"), after=user + 1, timeout=60)
        answer_audio = [m.at for m in client.messages[user:answer] if m.message["type"] == "output_audio"]
        await client.wait_for(is_type("agent_speech.ended"), after=user + 1, timeout=60)  # the answer has played out
        await client.send({"type": "stop"})
        assert await client.wait_closed() == 1000
    return call_id, origin, greeting_audio, spoke_at, speech, answer_audio


async def ended_event(receiver: LoopbackReceiver) -> dict[str, Any]:
    """call.ended as the organization's webhook received it (each look sends what is due, as a round of
    the event worker does)."""

    async def sent() -> list[Any]:
        await sync_to_async(deliver_due)()
        return receiver.requests

    requests: list[Any] = await polled(sent, what="call.ended", timeout=30, every=0.1)
    message: dict[str, Any] = requests[0].json()["message"]
    return message


async def test_a_recorded_browser_call_is_stereo_with_each_side_on_its_channel(
    server, ava, owner, speech_16k, monkeypatch
):
    with LoopbackReceiver() as receiver:
        hook = {"url": receiver.url("/events"), "events": ["call.ended"]}
        status, _, body = await http(server, "/public/v1/webhooks", api_key=owner.api_key, method="POST", body=hook)
        assert status == 201, body
        before_call = time.time()
        call_id, origin, greeting_audio, spoke_at, speech, answer_audio = await recorded_call(server, ava, speech_16k)
        # The call ends at once, and call.ended links to its recording, which is stored a moment later.
        ended = await ended_event(receiver)
    assert ended["type"] == "call.ended" and ended["call"]["id"] == call_id
    assert ended["call"]["status"] == "completed" and ended["call"]["endedReason"] == "caller-hung-up"
    url = ended["call"]["recordingUrl"]
    assert url.startswith(f"{server.http_url}/public/v1/recordings/{call_id}?expires=")
    # It works for RECORDING_URL_TTL_SECONDS from when it was handed out (at the call's end).
    expires = int(url.rsplit("expires=", 1)[1].split("&")[0])
    assert int(before_call) <= expires - TTL <= time.time(), (before_call, expires, time.time())
    status, headers, data = await recording_when_stored(server, url)
    assert status == 200 and headers["Content-Type"] == "audio/ogg" and data[:4] == b"OggS"
    detail = await call_detail_when(server, owner.api_key, call_id, lambda d: True)
    assert detail["recordingUrl"].split("?")[0] == url.split("?")[0]

    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        assert stream.codec_context.name == "opus"
        rate = stream.rate
        audio = np.concatenate([frame.to_ndarray() for frame in container.decode(audio=0)], axis=1)
    assert audio.shape[0] == 2  # stereo

    def window(start_at: float, end_at: float) -> tuple[float, float]:
        return energy(audio, rate, start_at - origin, end_at - origin)

    # The greeting: the agent on the right, the caller's channel silent. (Audio arrives up to 200 ms before
    # it plays; the window keeps away from both ends.)
    left, right = window(greeting_audio[0] + 0.6, greeting_audio[-1] - 0.2)
    assert right > 0.02 and left < right / 20, (left, right)
    # The caller's sentence: on the left, the agent's channel silent meanwhile.
    spoken = len(speech) / 32000
    left, right = window(spoke_at + 0.25 * spoken, spoke_at + 0.75 * spoken)
    assert left > 0.02 and right < left / 20, (left, right)
    # The answer: on the right again, on the call's clock (after the caller's turn).
    left, right = window(answer_audio[0] + 0.6, answer_audio[-1] - 0.2)
    assert right > 0.02 and left < right / 20, (left, right)
    length = audio.shape[1] / rate
    assert abs(length - (answer_audio[-1] - origin)) < 1.5, length

    # Range requests through the application (streamed by the ASGI handler).
    key = {"api_key": owner.api_key}
    recording = f"/public/v1/calls/{call_id}/recording"
    status, headers, body = await http(server, recording, headers={"Range": "bytes=100-1099"}, **key)
    assert status == 206 and body == data[100:1100]
    assert headers["Content-Range"] == f"bytes 100-1099/{len(data)}"
    status, headers, body = await http(server, url, headers={"Range": f"bytes={len(data)}-"})
    assert status == 416 and json.loads(body)["code"] == "RANGE_NOT_SATISFIABLE"

    # The URL stops working once expired: the service's clock (calls/recordings.py reads time.time())
    # passes its expiry.
    monkeypatch.setattr(recordings, "time", SimpleNamespace(time=lambda: expires + 1.0))
    status, _, body = await http(server, url)
    assert status == 403 and json.loads(body)["code"] == "RECORDING_LINK_INVALID"
    fresh = (await call_detail_when(server, owner.api_key, call_id, lambda d: True))["recordingUrl"]
    assert fresh != url and (await http(server, fresh))[0] == 200


async def test_a_recording_that_cannot_be_stored_leaves_a_complete_call(broken_storage_server, ava, owner):
    server = broken_storage_server
    async with VoiceClient(socket_url(server, ava, issue(ava))) as client:
        first = await client.wait_for(is_type("session.started"), timeout=60)
        call_id = client.messages[first].message["callId"]
        await client.wait_for(is_type("transcript", role="assistant"), timeout=60)
        await client.send({"type": "stop"})
        assert await client.wait_closed() == 1000

    detail = await call_detail_when(server, owner.api_key, call_id, lambda d: d["status"] == "completed")
    assert detail["messages"] and detail["endedAt"]

    def failure() -> AgentLog | None:
        flush_agent_logs()  # the lines buffered so far (a server's writer thread writes them every second)
        return AgentLog.objects.filter(agent=ava, content__message="recording failed").first()

    line = await polled(sync_to_async(failure), what="the recording failure logged", timeout=30, every=0.3)
    assert line.severity == "error" and line.content["callId"] == call_id
    call = await sync_to_async(Call.objects.get)(pk=call_id)
    assert call.status == "completed" and call.recording_key == ""
    detail = await call_detail_when(server, owner.api_key, call_id, lambda d: True)
    assert detail["recordingUrl"] is None
    status, _, _ = await http(server, f"/public/v1/calls/{call_id}/recording", api_key=owner.api_key)
    assert status == 404


async def test_recordings_go_to_an_s3_compatible_store_when_configured(s3_server, s3, ava, owner):
    server = s3_server
    async with VoiceClient(socket_url(server, ava, issue(ava))) as client:
        first = await client.wait_for(is_type("session.started"), timeout=60)
        call_id = client.messages[first].message["callId"]
        await client.wait_for(is_type("transcript", role="assistant"), timeout=60)
        await client.send({"type": "stop"})
        assert await client.wait_closed() == 1000

    detail = await call_detail_when(server, owner.api_key, call_id, lambda d: d["recordingUrl"] is not None)
    status, _, served = await recording_when_stored(server, detail["recordingUrl"])
    call = await sync_to_async(Call.objects.get)(pk=call_id)
    key = f"voice/{call.recording_key}"
    assert await asyncio.to_thread(s3.keys) == [key]
    stored = await asyncio.to_thread(lambda: s3.client().get_object(Bucket=s3.bucket, Key=key)["Body"].read())
    assert status == 200 and served == stored and stored[:4] == b"OggS"
    recording = f"/public/v1/calls/{call_id}/recording"
    status, _, part = await http(server, recording, api_key=owner.api_key, headers={"Range": "bytes=-64"})
    assert status == 206 and part == stored[-64:]
    status, _, _ = await http(server, recording, api_key=owner.api_key, method="DELETE")
    assert status == 204
    assert await asyncio.to_thread(s3.keys) == []
