"""A recorded phone call end to end (the project's ASGI application in the test's process,
testing/inprocess.py; Twilio's Media Stream played by testing/twilio_stream.py): the recording is stereo
with the caller on the left and the agent on the right, on the call's clock, and the agent's side stops
where the caller barged in (the listener's position from Twilio's marks), not where the server had sent
audio to."""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Iterator
from typing import Any

import av
import numpy as np
import pytest
from asgiref.sync import sync_to_async

from telephony import audio
from telephony.services.accounts import telephony_account_set
from telephony.services.numbers import phone_number_assign, phone_number_claim
from telephony.tests.test_media_stream_e2e import (
    ACCOUNT_SID,
    AUTH_TOKEN,
    GREETING,
    INSTRUCTIONS,
    NUMBER,
    SECOND,
    SENTENCE,
    server_values,
    stream_url,
    token_for,
)
from testing.calls import wait_call
from testing.inprocess import InProcessServer, serving
from testing.twilio_stream import TwilioStream, greeted, is_event, to_phone
from testing.twilio_webhooks import twilio_api_fixture  # noqa: F401 - the fixture
from testing.voice import record_voice
from testing.waiting import polled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]


@pytest.fixture
def server(
    engine_loaded: None, realtime_settings: Any, settings: Any, twilio_api: Any, tmp_path: Any
) -> Iterator[InProcessServer]:
    """The application, its recordings stored under the test's temporary folder (after realtime_settings,
    which the agent's fixture uses: its REALTIME_WS_URL wins)."""
    with serving(settings, server_values(twilio_api.base), public=True, folder=tmp_path) as started:
        yield started


@pytest.fixture(scope="module")
def voice(tmp_path_factory: Any) -> dict[str, bytes]:
    recorded = record_voice((SENTENCE, SECOND), tmp_path_factory.mktemp("voice"))
    return {text: to_phone(pcm) for text, pcm in recorded.items()}


@pytest.fixture
def ava(owner: Any, make_agent: Any, realtime_settings: Any) -> Any:
    agent = make_agent(
        owner.organization,
        name="Ava",
        status="active",
        identity="Ava, the reservation assistant of Acme",
        instructions=INSTRUCTIONS,
        greeting_type="static",
        static_greeting=GREETING,
        recording_enabled=True,
    )
    telephony_account_set(organization=owner.organization, account_sid=ACCOUNT_SID, auth_token=AUTH_TOKEN)
    number = phone_number_claim(organization=owner.organization, number=NUMBER)
    phone_number_assign(organization=owner.organization, agent=agent, phone_number_id=number.pk)
    agent.number_id = number.pk
    return agent


async def get(server: InProcessServer, path: str, api_key: str) -> tuple[int, bytes]:
    response = await server.arequest("GET", path, api_key=api_key)
    return response.status_code, response.content


async def test_a_recorded_phone_call_has_each_side_on_its_channel_and_the_agent_cut_at_barge_in(
    server, ava, voice, owner
):
    loop = asyncio.get_running_loop()
    wall = time.time() - loop.time()  # loop time -> wall-clock time (the call's startedAt is wall-clock)
    call_sid = "CA" + "b" * 32
    token = await sync_to_async(token_for)(ava, call_sid)
    async with TwilioStream(stream_url(server), token, call_sid=call_sid) as twilio:
        await twilio.start()
        after_greeting = await greeted(twilio)
        greeting_media = [m.at for m in twilio.messages[:after_greeting] if m.message["event"] == "media"]
        spoke_at = loop.time()
        await twilio.stream(voice[SENTENCE] + bytes([audio.SILENCE_BYTE]) * 8000)
        answer = await twilio.wait_for(is_event("media"), after=after_greeting + 1, timeout=30)
        while len(twilio.audio(answer)) < 8000:  # a second of the answer has arrived
            await twilio.wait_for(is_event("media"), after=len(twilio.messages), timeout=30)
        barged_at = loop.time()
        barge_in = asyncio.create_task(twilio.stream(voice[SECOND] + bytes([audio.SILENCE_BYTE]) * 4000))
        cleared = await twilio.wait_for(is_event("clear"), after=answer, timeout=30)
        cleared_at = twilio.messages[cleared].at
        await barge_in
        await twilio.stop()
        assert await twilio.wait_closed() == 1000

    call = await wait_call(call_sid, status="completed")
    origin = call.started_at.timestamp()
    detail = json.loads((await get(server, f"/public/v1/calls/{call.pk}", owner.api_key))[1])
    assert detail["recordingUrl"], detail  # from the end of the call on
    path = f"/public/v1/calls/{call.pk}/recording"

    async def stored() -> tuple[int, bytes] | None:  # 404 RECORDING_NOT_READY until it is stored, a moment later
        status, data = await get(server, path, owner.api_key)
        if status == 404:
            assert json.loads(data)["code"] == "RECORDING_NOT_READY"
            return None
        return status, data

    status, data = await polled(stored, what="the stored recording", timeout=60, every=0.3)
    assert status == 200
    with av.open(io.BytesIO(data)) as container:
        rate = container.streams.audio[0].rate
        recording = np.concatenate([frame.to_ndarray() for frame in container.decode(audio=0)], axis=1)
    assert recording.shape[0] == 2

    def energy(start: float, end: float) -> tuple[float, float]:
        """RMS of (left, right) between two loop times of this test."""
        part = recording[:, int((start + wall - origin) * rate) : int((end + wall - origin) * rate)]
        left, right = np.sqrt(np.mean(part**2, axis=1))
        return float(left), float(right)

    left, right = energy(greeting_media[0] + 0.6, greeting_media[-1] - 0.3)  # the greeting
    assert right > 0.02 and left < right / 10, (left, right)
    spoken = len(voice[SENTENCE]) / 8000
    left, right = energy(spoke_at + 0.25 * spoken, spoke_at + 0.75 * spoken)  # the caller's sentence
    assert left > 0.02 and right < left / 10, (left, right)
    # The answer until the barge-in; silence on the agent's side from the moment it was cleared until the
    # caller's second sentence ends (the answer to it comes after).
    left, right = energy(barged_at - 0.8, barged_at - 0.1)
    assert right > 0.02, (left, right)
    second = len(voice[SECOND]) / 8000
    assert cleared_at + 0.1 < barged_at + second, (
        f"cleared {cleared_at - barged_at:.2f} s into a {second:.2f} s sentence"
    )
    left, right = energy(cleared_at + 0.1, barged_at + second)
    assert right < 0.002 and left > 0.02, (left, right)
