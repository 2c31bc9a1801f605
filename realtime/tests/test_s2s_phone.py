"""A phone call with VOICE_ENGINE=speech-to-speech: Twilio's side of the Media Stream played by a script
(testing/twilio_stream.py, mu-law 8 kHz both ways), the project's ASGI application in the test's
process (testing/inprocess.py), the scripted
speech-to-speech provider on loopback; barge-in truncation uses what the phone really played (marks)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from telephony import audio
from telephony.services.accounts import telephony_account_set
from telephony.services.numbers import phone_number_assign, phone_number_claim
from telephony.streams import stream_token_issue
from testing.calls import wait_call
from testing.inprocess import InProcessServer, serving
from testing.speech_to_speech_provider import ProviderServer, Say, eventually
from testing.twilio_stream import TwilioStream, from_phone, is_event, played_out
from testing.voice import rms
from testing.webhooks import LoopbackReceiver, Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

MODEL = "gpt-realtime-phone"
GREETING = "Hello, this is Ava from Acme."
DISCLOSURE = "Just so you know, you are speaking with an AI, not a person."
ANSWER = "Sure, a table for four tomorrow evening."
LONG = "Let me read you our whole menu, starting with the soups, then the salads, the pasta, and the desserts."
NUMBER = "+14155550100"
CALLER = "+14155550199"


@pytest.fixture(scope="module")
def provider() -> Iterator[ProviderServer]:
    with ProviderServer(speech=True) as server:
        yield server


@pytest.fixture
def server(settings: Any, provider: ProviderServer) -> Iterator[InProcessServer]:
    with LoopbackReceiver(default=Reply(json={"sid": "CA" + "0" * 32})) as twilio_api:
        values = {
            "TWILIO_API_BASE_URL": twilio_api.base,
            "VOICE_ENGINE": "speech-to-speech",
            "REALTIME_PROVIDER_URL": provider.url,
            "REALTIME_PROVIDER_MODEL": MODEL,
        }
        with serving(settings, values, public=True) as started:
            yield started


@pytest.fixture
def ava(owner: Any, make_agent: Any, realtime_settings: Any) -> Any:
    agent = make_agent(
        owner.organization,
        name="Ava",
        status="active",
        identity="Ava, the reservation assistant of Acme",
        instructions="You take table reservations.",
        greeting_type="static",
        static_greeting=GREETING,
    )
    telephony_account_set(organization=owner.organization, account_sid="AC" + "3" * 32, auth_token="f" * 32)
    number = phone_number_claim(organization=owner.organization, number=NUMBER)
    phone_number_assign(organization=owner.organization, agent=agent, phone_number_id=number.pk)
    agent.number_id = number.pk
    return agent


async def test_a_phone_call_through_the_speech_to_speech_provider(server, provider, ava):
    call_sid = "CA" + "5" * 32
    token = await sync_to_async(stream_token_issue)(
        organization_id=ava.organization_id,
        agent_id=ava.pk,
        phone_number_id=ava.number_id,
        call_sid=call_sid,
        from_number=CALLER,
        to_number=NUMBER,
    )
    async with TwilioStream(f"{server.ws_url}/telephony/twilio/stream", token, call_sid=call_sid) as twilio:
        await twilio.start()
        done = asyncio.Event()
        line = asyncio.create_task(twilio.stream(bytes([audio.SILENCE_BYTE]) * 8000 * 60, stop_when=done.is_set))
        try:
            await twilio.wait_for(is_event("media"), timeout=60)
            connection = provider.last
            assert DISCLOSURE in connection.session["instructions"]
            # The caller's line reaches the provider as 24 kHz PCM.
            await eventually(lambda: connection.appended_bytes > 48_000, timeout=20, what="phone audio at the provider")
            await played_out(twilio)
            greeting_audio = from_phone(bytes(twilio.played))
            assert rms(greeting_audio) > 300

            before = len(twilio.messages)
            await provider.run(lambda: connection.caller_turn("A table for four tomorrow evening.", Say(ANSWER)))
            await twilio.wait_for(is_event("media"), after=before, timeout=20)
            await played_out(twilio)

            before = len(twilio.messages)
            await provider.run(lambda: connection.caller_turn("What is on the menu?", Say(LONG, pace=0.05)))
            await twilio.wait_for(is_event("media"), after=before, timeout=20)
            heard = len(twilio.played)
            # The caller hears about a second of it (a second of its audio has played on the line).
            await twilio.playback.until(
                lambda: len(twilio.played) - heard >= 8000, what="a second of the answer played", timeout=20
            )
            await provider.run(connection.speech_started)
            await twilio.wait_for(is_event("clear"), after=before, timeout=10)
            await eventually(lambda: connection.events("conversation.item.truncate"), what="the truncation")
            truncate = connection.events("conversation.item.truncate")[-1]
            assert 300 <= truncate["audio_end_ms"] <= 1500
        finally:
            done.set()
            await line
        await twilio.stop()
        await twilio.wait_closed()
        # The phone line gets Twilio's own messages only: no captions (agent_speech) or tool events.
        assert {item.message["event"] for item in twilio.messages} <= {"media", "mark", "clear"}
    call = await wait_call(call_sid, status="completed")
    rows = await sync_to_async(
        lambda: list(call.messages.order_by("occurred_at", "sequence").values_list("role", "content"))
    )()
    assert [role for role, _ in rows] == ["assistant", "user", "assistant", "user", "assistant"]
    assert rows[0][1] == f"{DISCLOSURE} {GREETING}" and rows[2][1] == ANSWER
    assert LONG.startswith(rows[4][1]) and rows[4][1] != LONG
    assert call.channel == "phone"
