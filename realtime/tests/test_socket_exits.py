"""Every exit of a voice socket ends its call exactly once, over real Daphne processes: a deeply
nested JSON frame is a bad message (no crash, no traceback) and a socket dropped after it ends its
call at once as `failed`, billed for the time it lived; a Redis outage (the test's own redis-server,
stopped and started again) leaves live and new browser sessions alone, and a phone stream keeps its
call, joins its call group again and is still ended by Twilio's status callback, once."""

from __future__ import annotations

import asyncio
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from twilio.request_validator import RequestValidator

from calls.models import AgentLog, Call
from realtime import tokens
from telephony import audio
from telephony.groups import call_group
from telephony.services.accounts import telephony_account_set
from telephony.services.numbers import phone_number_assign, phone_number_claim
from telephony.streams import stream_token_issue
from testing.clients import VoiceClient, is_type, slow_client_close_code
from testing.daphne import DaphneServer, shared_test_server, start_test_server, stop_test_server
from testing.stores import RedisServer
from testing.twilio_stream import TwilioStream, is_event
from testing.twilio_webhooks import twilio_api_fixture  # noqa: F401 - the fixture
from testing.waiting import polled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

NUMBER = "+14155550100"
CALLER = "+14155550199"
ACCOUNT_SID = "AC" + "5" * 32
AUTH_TOKEN = "e" * 32
NESTED = "[" * 20_000 + "]" * 20_000  # 40 KB: deeper than the JSON decoder's recursion limit


PUBLIC_BASE_URL = "http://voice.example.test"  # what Twilio signs its callbacks over


def phone_env(twilio_api: str, **env: str) -> dict[str, str]:
    """A server's settings for Twilio: its REST API at a loopback stand-in."""
    base = {
        "PUBLIC_BASE_URL": PUBLIC_BASE_URL,
        "TWILIO_API_BASE_URL": twilio_api,
        # The status callback could finish a call on its own after this grace; long here, so that a
        # call it ends was ended by its live stream (through the channel layer).
        "TELEPHONY_CALL_END_GRACE_SECONDS": "30",
    }
    return {**base, **env}


@pytest.fixture(scope="module")
def server(django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: Any, twilio_api: Any) -> Iterator[Any]:
    with shared_test_server(django_db_blocker, tmp_path_factory, "exits", phone_env(twilio_api.base)) as started:
        yield started


@pytest.fixture
def ava(owner: Any, make_agent: Any, realtime_settings: Any) -> Any:
    agent = make_agent(owner.organization, name="Ava", status="active", greeting_type="static", static_greeting="Hi.")
    telephony_account_set(organization=owner.organization, account_sid=ACCOUNT_SID, auth_token=AUTH_TOKEN)
    number = phone_number_claim(organization=owner.organization, number=NUMBER)
    phone_number_assign(organization=owner.organization, agent=agent, phone_number_id=number.pk)
    agent.number_id = number.pk
    return agent


def status_callback(server: DaphneServer, call_sid: str, status: str) -> int:
    """Twilio's call status callback, signed over PUBLIC_BASE_URL + path (the URL Twilio requested)."""
    path = "/telephony/twilio/status"
    params = {"CallSid": call_sid, "AccountSid": ACCOUNT_SID, "From": CALLER, "To": NUMBER, "CallStatus": status}
    signature = RequestValidator(AUTH_TOKEN).compute_signature(PUBLIC_BASE_URL + path, params)
    request = urllib.request.Request(
        server.http_url + path,
        data=urllib.parse.urlencode(params).encode(),
        headers={"X-Twilio-Signature": signature},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.status


def browser_url(server: DaphneServer, agent: Any) -> str:
    token = tokens.issue_token(agent_id=agent.pk, organization_id=agent.organization_id)[0]
    return f"{server.ws_url}/ws/agents/{agent.pk}/realtime?token={token}"


async def phone_stream(server: DaphneServer, agent: Any, call_sid: str) -> TwilioStream:
    token = await sync_to_async(stream_token_issue)(
        organization_id=agent.organization_id,
        agent_id=agent.pk,
        phone_number_id=agent.number_id,
        call_sid=call_sid,
        from_number=CALLER,
        to_number=NUMBER,
    )
    return TwilioStream(f"{server.ws_url}/telephony/twilio/stream", token, call_sid=call_sid)


async def ended_call(*, timeout: float = 15, **lookup: Any) -> Call:
    """The call once it has left `active` (AssertionError when it is still active after `timeout`)."""

    async def left_active() -> Call | None:
        call = await sync_to_async(Call.objects.filter(**lookup).first)()
        return call if call is not None and call.status != "active" else None

    return await polled(left_active, what=f"call {lookup} leaving active", timeout=timeout)


async def endings_logged(call: Call, *, timeout: float = 10) -> int:
    """How many "session ended" lines the agent log holds for the call (written by the server's
    log writer: waits for the first)."""
    count: int = await polled(
        sync_to_async(AgentLog.objects.filter(content__message="session ended", content__callId=str(call.pk)).count),
        what=f"the session ended line of call {call.pk}",
        timeout=timeout,
        every=0.1,
    )
    return count


async def wait_logged(log: Path, text: str, *, after: int = 0, timeout: float = 20) -> int:
    """Wait until the server log holds `text` past offset `after`; returns the log's size then."""

    def found() -> int:
        content = log.read_text(errors="replace")
        return len(content) if text in content[after:] else 0

    return await polled(found, what=f"{text!r} in the server log", timeout=timeout)


def line(stream: TwilioStream, seconds: float = 60) -> asyncio.Task[None]:
    """A phone line always carries audio."""
    return asyncio.create_task(stream.stream(bytes([audio.SILENCE_BYTE]) * int(8000 * seconds)))


async def stopped(task: asyncio.Task[Any]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


# --- a client that answers the closing handshake late ------------------------------------------


async def test_a_slow_client_still_reads_the_close_code_the_service_sent(server, owner, make_agent, realtime_settings):
    # The server waits WEBSOCKET_CLOSE_TIMEOUT_SECONDS (5) for the client's close reply before it drops
    # the connection. With Daphne's own 1 s the connection was reset while the audio the client had
    # not read yet and the close frame behind it were still on their way: the client saw 1006.
    talker = await sync_to_async(make_agent)(
        owner.organization,
        name="Talker",
        status="active",
        greeting_type="static",
        static_greeting="Welcome to the harbour office. " * 6,
    )
    code = await asyncio.to_thread(slow_client_close_code, browser_url(server, talker), unread_seconds=2.5)
    assert code == 1000
    call = await ended_call(agent=talker)
    assert call.status == "completed"
    assert call.ended_reason == "caller-hung-up"


# --- a nested frame, then the socket drops -------------------------------------------------------


async def test_a_nested_frame_on_the_browser_socket_is_a_bad_message_and_a_drop_ends_the_call_failed(server, ava):
    async with VoiceClient(browser_url(server, ava)) as client:
        started = await client.wait_for(is_type("session.started"), timeout=60)
        opened = time.monotonic()
        await client.send_raw(NESTED)
        error = await client.wait_for(is_type("error"), after=started)
        assert client.messages[error].message["code"] == "bad_message"
        # The session goes on: it still answers.
        await client.send_audio(b"\x00\x00" * 320)
        await client.send({"type": "dance"})
        await client.wait_for(is_type("error"), after=error + 1)
        await client.drop()
        lived = time.monotonic() - opened

    call = await ended_call(agent=ava)
    assert call.status == "failed"
    assert call.ended_reason == "connection-lost"
    assert call.duration_seconds <= lived + 2  # the seconds the socket lived, not the idle watchdog's 60
    assert await endings_logged(call) == 1
    assert "Traceback" not in server.log_path.read_text(errors="replace")


async def test_a_nested_frame_on_the_phone_stream_is_ignored_and_a_drop_ends_the_call_failed(server, ava):
    # Before a valid start (no token needed to send it): ignored, no traceback.
    async with TwilioStream(f"{server.ws_url}/telephony/twilio/stream", None) as stranger:
        await stranger.send_raw(NESTED)
        await stranger.send_raw(NESTED)

    call_sid = "CA" + "7" * 32
    async with await phone_stream(server, ava, call_sid) as twilio:
        await twilio.start()
        await twilio.wait_for(is_event("media"), timeout=60)
        opened = time.monotonic()
        audio_line = line(twilio)
        await twilio.send_raw(NESTED)
        # The call goes on: a key pressed is taken and logged by the live session.
        await twilio.dtmf("5")
        keys = await polled(
            sync_to_async(AgentLog.objects.filter(content__message="caller pressed a key").count),
            what="the key logged",
            timeout=10,
        )
        assert keys == 1 and not twilio.closed
        await stopped(audio_line)
        await twilio.drop()
        lived = time.monotonic() - opened

    call = await ended_call(provider_call_id=call_sid)
    assert call.status == "failed"
    assert call.ended_reason == "connection-lost"
    assert call.duration_seconds <= lived + 2
    assert await endings_logged(call) == 1
    log = server.log_path.read_text(errors="replace")
    assert "ignored a bad message: not JSON" in log
    assert "Traceback" not in log


# --- Redis stopped and started under live sessions -----------------------------------------------


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    redis = RedisServer().start()
    yield redis
    redis.kill()


async def test_a_redis_outage_leaves_browser_sessions_alone_and_phone_calls_live(
    ava, redis_server, twilio_api, tmp_path_factory
):
    env = phone_env(twilio_api.base, REDIS_URL=f"redis://127.0.0.1:{redis_server.port}/0")
    server = await sync_to_async(start_test_server)(tmp_path_factory, "redis", env)
    log = server.log_path
    call_sid = "CA" + "8" * 32
    try:
        async with VoiceClient(browser_url(server, ava)) as browser:
            await browser.wait_for(is_type("session.started"), timeout=60)
            browser_opened = time.monotonic()
            async with await phone_stream(server, ava, call_sid) as phone:
                await phone.start()
                await phone.wait_for(is_event("media"), timeout=60)
                phone_opened = time.monotonic()
                audio_line = line(phone)

                killed_at = len(log.read_text(errors="replace"))
                await sync_to_async(redis_server.kill)()
                # A new browser session opens, talks and ends normally; the live one still answers.
                async with VoiceClient(browser_url(server, ava)) as during:
                    started = await during.wait_for(is_type("session.started"), timeout=60)
                    await during.send({"type": "dance"})
                    await during.wait_for(is_type("error"), after=started)
                    await during.send({"type": "stop"})
                    assert await during.wait_closed() == 1000
                before = len(browser.messages)
                await browser.send({"type": "dance"})
                await browser.wait_for(is_type("error"), after=before)
                # The phone stream saw the outage and keeps its call.
                await wait_logged(log, "channel layer unavailable")
                assert not phone.closed and not browser.closed

                await sync_to_async(redis_server.start)()
                # The phone stream joins its call's group again (a message sent to the group before is lost).
                await wait_logged(log, call_group(call_sid), after=killed_at)  # its "available again" line
                # Twilio's status callback reaches the stream through Redis again: the stream ends the call.
                assert await sync_to_async(status_callback)(server, call_sid, "completed") == 204
                assert await phone.wait_closed(timeout=10) == 1000
                phone_lived = time.monotonic() - phone_opened
                await stopped(audio_line)
            await browser.send({"type": "stop"})
            assert await browser.wait_closed() == 1000
            browser_lived = time.monotonic() - browser_opened

        calls = await sync_to_async(lambda: list(Call.objects.filter(agent=ava).order_by("started_at")))()
        assert [(c.channel, c.status, c.ended_reason) for c in calls] == [
            ("web", "completed", "caller-hung-up"),
            ("phone", "completed", "caller-hung-up"),  # Twilio's status callback: completed
            ("web", "completed", "caller-hung-up"),
        ]
        browser_call, phone_call, _ = calls
        assert browser_lived - 2 <= browser_call.duration_seconds <= browser_lived + 1
        assert phone_lived - 2 <= phone_call.duration_seconds <= phone_lived + 1
        assert phone_call.provider_call_id == call_sid
        for call in calls:
            assert await endings_logged(call) == 1
        assert "Traceback" not in log.read_text(errors="replace")
    finally:
        await sync_to_async(stop_test_server)(server)


# --- the server stops (moved from test_endings_e2e.py, which runs in-process) ------------------------


async def test_a_server_stopped_under_a_live_call_ends_it_with_server_shutdown(
    owner, make_agent, realtime_settings, tmp_path_factory
):
    from testing.conversations import Caller, agent_for, issue, socket_url

    agent = await sync_to_async(agent_for)(owner, make_agent, name="Sid", instructions="You help callers.")
    stopping = await sync_to_async(start_test_server)(tmp_path_factory, "endings-shutdown")
    try:
        async with VoiceClient(socket_url(stopping, agent, issue(agent))) as client:
            caller = await Caller(client, {}).answered()
            await sync_to_async(stopping.stop)()  # SIGTERM
            await client.wait_closed()
    finally:
        await sync_to_async(stop_test_server)(stopping)
    # GET /public/v1/calls/{id} once the call has left `active`.

    async def ended() -> dict[str, Any] | None:
        response = await sync_to_async(owner.client.get)(f"/public/v1/calls/{caller.call_id}")
        assert response.status_code == 200, response.content
        body: dict[str, Any] = response.json()
        return body if body["status"] != "active" else None

    detail = await polled(ended, what=f"call {caller.call_id} to leave active", timeout=5)
    assert (detail["status"], detail["endedReason"]) == ("failed", "server-shutdown")


async def test_a_server_stopped_under_a_live_webrtc_call_ends_it_with_server_shutdown(
    owner, make_agent, realtime_settings, settings, tmp_path_factory
):
    """A WebRTC session is no connection of Daphne's: the offer is answered by the async view, the peer
    lives in the server's loop after it, and stopping the server (SIGTERM) still ends its call failed,
    server-shutdown (kit.shutdown's closers)."""
    import httpx

    from testing.conversations import agent_for, issue
    from testing.webrtc import WebRtcClient

    settings.WEBRTC_HOST_ADDRESSES = ["127.0.0.1"]  # the client's candidates, as the server's: loopback only
    agent = await sync_to_async(agent_for)(owner, make_agent, name="Wes", instructions="You help callers.")
    stopping = await sync_to_async(start_test_server)(
        tmp_path_factory, "webrtc-shutdown", {"WEBRTC_HOST_ADDRESSES": "127.0.0.1"}
    )
    try:
        token = urllib.parse.quote(issue(agent))
        url = f"{stopping.http_url}/realtime/webrtc/agents/{agent.pk}/session?token={token}"
        async with httpx.AsyncClient(timeout=60) as http, WebRtcClient(url, http) as client:
            assert (await client.offer()).status_code == 201
            started = await client.wait_for(is_type("session.started"), timeout=60)
            call_id = client.messages[started].message["callId"]
            await client.wait_for(is_type("transcript", role="assistant"), timeout=60)  # the greeting
            await sync_to_async(stopping.stop)()  # SIGTERM
            await client.wait_closed()
    finally:
        await sync_to_async(stop_test_server)(stopping)

    async def ended() -> dict[str, Any] | None:
        response = await sync_to_async(owner.client.get)(f"/public/v1/calls/{call_id}")
        assert response.status_code == 200, response.content
        body: dict[str, Any] = response.json()
        return body if body["status"] != "active" else None

    detail = await polled(ended, what=f"call {call_id} to leave active", timeout=5)
    assert (detail["status"], detail["endedReason"]) == ("failed", "server-shutdown")
    assert stopping.log_path is not None and "Traceback" not in stopping.log_path.read_text(errors="replace")
