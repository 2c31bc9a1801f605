"""Outbound calls end to end through the project's ASGI application in the test's process
(testing/inprocess.py): POST /public/v1/calls, the dispatcher asking a loopback stand-in for Twilio's
REST API to place the call, Twilio's signed status callbacks, and the answered call's media stream
(testing/twilio_stream.py) opened with the token the TwiML carries, talking to the real offline engine on
the EXISTING call record.

In-process no dispatcher loop runs (BACKGROUND_WORK=inline, the tests' settings): the test plays the
serving process's dispatcher (`Dispatcher`). It counts every wake the product asks for (a queued call's
commit, an ended call: telephony.outbound.dispatcher.outbound_wake) and, once woken, runs what the woken
loop runs, the dispatcher's entry point (the task telephony.dispatch_outbound: outbound_dispatch until it
places nothing). No round runs without a wake: a call placed here was placed because the product asked."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from twilio.request_validator import RequestValidator

from accounts.models import Plan
from calls.models import Call
from telephony.outbound import dispatcher as outbound_dispatcher
from telephony.outbound import services as outbound_services
from telephony.services.accounts import telephony_account_set
from telephony.services.numbers import phone_number_claim
from telephony.tasks import dispatch_outbound
from testing.clients import VoiceClient, is_type
from testing.inprocess import InProcessServer, serving
from testing.twilio_rest import CreatedCall, call_created, call_updates, created_calls
from testing.twilio_stream import TwilioStream, greeted, is_event
from testing.twilio_webhooks import twilio_api_fixture  # noqa: F401 - the fixture
from testing.waiting import Signal, polled
from testing.webhooks import LoopbackReceiver

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

GREETING = "Hello {{firstName}}, this is {{agent.name}} from Acme, calling about your appointment on {{day}}."
NUMBER = "+14155550100"
CALLEE = "+14155550199"
ACCOUNT_SID = "AC" + "4" * 32
OTHER_ACCOUNT_SID = "AC" + "8" * 32  # another organization's
OTHER_NUMBER = "+14155550111"
OTHER_CALLEE = "+14155550133"
AUTH_TOKEN = "e" * 32


@pytest.fixture
def server(
    engine_loaded: None, realtime_settings: Any, settings: Any, twilio_api: Any, tmp_path: Any
) -> Iterator[InProcessServer]:
    """The application (after realtime_settings, which the agents' fixtures use: its REALTIME_WS_URL wins)."""
    values = {"TWILIO_API_BASE_URL": twilio_api.base, "TELEPHONY_CALL_END_GRACE_SECONDS": 10}
    with serving(settings, values, public=True, folder=tmp_path) as started:
        yield started


class Dispatcher:
    """The serving process's outbound dispatcher, played by the test (see the module's docstring): `wake`
    is what the product calls (counted), `round` what the woken loop runs."""

    def __init__(self) -> None:
        self.wakes = 0
        self.rounds = 0
        self.woke = Signal()

    def wake(self) -> None:
        self.wakes += 1
        self.woke.notify()

    async def round(self) -> int:
        """Once a wake has come since the last round: one dispatcher round; how many calls it placed."""
        await self.woke.until(lambda: self.wakes > self.rounds, what="a wake of the outbound dispatcher", timeout=15)
        self.rounds = self.wakes
        placed: int = await sync_to_async(lambda: dispatch_outbound.apply().get())()
        return placed


@pytest.fixture
def dispatcher(monkeypatch: Any) -> Dispatcher:
    """Every wake of the outbound dispatcher (after the commit of a queued call: outbound/services.py; when
    a call ends: dispatcher.call_ended_received) is counted, then goes on to the product's own wake (which
    does nothing here: no loop runs)."""
    played = Dispatcher()
    wake = outbound_dispatcher.outbound_wake

    def counted() -> None:
        played.wake()
        wake()

    monkeypatch.setattr(outbound_dispatcher, "outbound_wake", counted)
    monkeypatch.setattr(outbound_services, "outbound_wake", counted)
    return played


@pytest.fixture
def ava(owner: Any, make_agent: Any, realtime_settings: Any) -> Any:
    agent = make_agent(
        owner.organization,
        name="Ava",
        status="active",
        instructions="You remind people of their appointments.",
        greeting_type="static",
        static_greeting=GREETING,
    )
    telephony_account_set(organization=owner.organization, account_sid=ACCOUNT_SID, auth_token=AUTH_TOKEN)
    agent.number = phone_number_claim(organization=owner.organization, number=NUMBER)
    return agent


async def api(server: InProcessServer, key: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    response = await server.arequest(method, path, api_key=key, body=body)
    return response.status_code, response.json() if response.content else None


async def callback(server: InProcessServer, created: CreatedCall, sid: str, status: str) -> int:
    """Twilio's status callback to the URL the call was created with (PUBLIC_BASE_URL + path + query)."""
    url = created.fields["StatusCallback"]
    params = {
        "AccountSid": ACCOUNT_SID,
        "ApiVersion": "2010-04-01",
        "CallSid": sid,
        "CallStatus": status,
        "Direction": "outbound-api",
        "From": NUMBER,
        "To": CALLEE,
        "CallbackSource": "call-progress-events",
        "SequenceNumber": "0",
    }
    assert url.startswith(server.http_url + "/"), url  # PUBLIC_BASE_URL: this application
    async with server.ahttp() as client:
        response = await client.post(
            url,
            data=params,
            headers={"X-Twilio-Signature": RequestValidator(AUTH_TOKEN).compute_signature(url, params)},
        )
    return response.status_code


async def place_call(server: InProcessServer, owner: Any, ava: Any, to: str = CALLEE, **fields: Any) -> tuple[int, Any]:
    """POST /public/v1/calls: Ava calls `to` from her number; `fields` adds variables, metadata..."""
    body = {"agentId": str(ava.pk), "phoneNumberId": str(ava.number.pk), "to": to, **fields}
    return await api(server, owner.api_key, "POST", "/public/v1/calls", body)


async def placed(twilio_api: LoopbackReceiver, count: int, timeout: float = 15) -> list[CreatedCall]:
    await twilio_api.until(
        lambda: len(created_calls(twilio_api.requests)) >= count, what=f"{count} calls placed", timeout=timeout
    )
    return created_calls(twilio_api.requests)


async def status_of(call_id: str, wanted: str, timeout: float = 15) -> Call:
    async def reached() -> Call | None:
        call = await sync_to_async(Call.objects.get)(pk=call_id)
        return call if call.status == wanted else None

    return await polled(reached, what=f"call {call_id} {wanted}", timeout=timeout)


async def test_an_outbound_call_rings_is_answered_by_the_agent_and_completes(
    server, owner, ava, twilio_api, dispatcher
):
    twilio_api.requests.clear()
    sid = "CA" + "e1" * 16
    twilio_api.reply(call_created(sid))
    status, body = await place_call(
        server, owner, ava, variables={"firstName": "Marguerite", "day": "Tuesday"}, metadata={"crmId": 31}
    )
    assert status == 201 and body["status"] == "queued", body
    assert (body["direction"], body["variables"], body["metadata"]) == (
        "outbound",
        {"firstName": "Marguerite", "day": "Tuesday"},
        {"crmId": 31},
    )
    call_id = body["id"]

    # The dispatcher places it at once (woken by the commit).
    assert await dispatcher.round() == 1
    [created] = await placed(twilio_api, 1)
    assert created.fields["To"] == CALLEE and created.fields["From"] == NUMBER
    assert created.stream_url == f"{server.ws_url}/telephony/twilio/stream" and created.token
    assert created.status_callback_events == ["initiated", "ringing", "answered", "completed"]
    assert (await status_of(call_id, "ringing")).provider_call_id == sid

    for progress in ("initiated", "ringing", "in-progress"):
        assert await callback(server, created, sid, progress) == 204
    assert (await sync_to_async(Call.objects.get)(pk=call_id)).status == "ringing"  # the stream makes it live

    async with TwilioStream(created.stream_url, created.token, call_sid=sid) as twilio:
        await twilio.start()
        await greeted(twilio)  # the agent's greeting has played
        call = await status_of(call_id, "active")
        assert call.provider_call_id == sid and call.direction == "outbound"
        await twilio.stop()
        assert await twilio.wait_closed() == 1000
    call = await status_of(call_id, "completed")
    assert call.ended_reason == "caller-hung-up"
    assert await sync_to_async(Call.objects.filter(organization=owner.organization).count)() == 1
    rows = await sync_to_async(lambda: list(call.messages.values_list("role", "content")))()
    # The greeting the callee heard carries the call's variables (and the built-in agent.name).
    greeting = "Hello Marguerite, this is Ava from Acme, calling about your appointment on Tuesday."
    assert rows and rows[0][0] == "assistant" and rows[0][1].endswith(greeting), rows[0]
    # Twilio's final callback after the stream ended changes nothing.
    assert await callback(server, created, sid, "completed") == 204
    assert (await sync_to_async(Call.objects.get)(pk=call_id)).ended_reason == "caller-hung-up"


async def test_hang_up_ends_a_live_outbound_call_at_the_carrier_and_its_stream(
    server, owner, ava, twilio_api, dispatcher
):
    twilio_api.requests.clear()
    sid = "CA" + "e2" * 16
    twilio_api.reply(call_created(sid))
    _, body = await place_call(server, owner, ava)
    assert await dispatcher.round() == 1
    [created] = await placed(twilio_api, 1)
    async with TwilioStream(created.stream_url, created.token, call_sid=sid) as twilio:
        await twilio.start()
        line = asyncio.create_task(twilio.silence(30))
        await twilio.wait_for(is_event("media"), timeout=60)
        await status_of(body["id"], "active")
        status, hung = await api(server, owner.api_key, "POST", f"/public/v1/calls/{body['id']}/hang-up")
        assert status == 200 and hung["id"] == body["id"]
        assert await twilio.wait_closed(timeout=10) == 1000
        line.cancel()
        await asyncio.gather(line, return_exceptions=True)
    call = await status_of(body["id"], "completed")
    assert call.ended_reason == "agent-ended-call"
    assert call_updates(twilio_api.requests) == [(sid, {"Status": "completed"})]
    status, again = await api(server, owner.api_key, "POST", f"/public/v1/calls/{body['id']}/hang-up")
    assert status == 409 and again["code"] == "CALL_ENDED"


def other_agent(outsider: Any, make_agent: Any) -> Any:
    """An agent of another organization, with a number and a Twilio account of its own."""
    agent = make_agent(outsider.organization, name="Olive", status="active", greeting_type="static")
    telephony_account_set(organization=outsider.organization, account_sid=OTHER_ACCOUNT_SID, auth_token=AUTH_TOKEN)
    agent.number = phone_number_claim(organization=outsider.organization, number=OTHER_NUMBER)
    return agent


async def test_extra_calls_wait_queued_and_are_placed_when_a_call_ends(
    server, owner, ava, twilio_api, outsider, make_agent, dispatcher
):
    """Plan concurrency 1: the second call waits `queued`; the first ends unanswered (busy) and the
    dispatcher, woken by its end (call_ended), places the second at once, without a poll."""
    twilio_api.requests.clear()
    await sync_to_async(Plan.objects.filter(pk=owner.organization.plan_id).update)(max_outbound_calls=1)
    first_sid, other_sid, second_sid = "CA" + "e3" * 16, "CA" + "e5" * 16, "CA" + "e4" * 16
    twilio_api.reply(call_created(first_sid), call_created(other_sid), call_created(second_sid))
    ids = []
    for to in (CALLEE, "+14155550198"):
        status, body = await place_call(server, owner, ava, to)
        assert status == 201
        ids.append(body["id"])
    assert await dispatcher.round() == 1  # woken by the commits: the first only
    [first] = await placed(twilio_api, 1)
    # Another organization's call, queued after the second: the dispatcher round that places it went over
    # the queue oldest first, so past this organization's second call, and left that one queued.
    olive = await sync_to_async(other_agent)(outsider, make_agent)
    status, _ = await place_call(server, outsider, olive, OTHER_CALLEE)
    assert status == 201
    assert await dispatcher.round() == 1  # Olive's, not the second
    _, other = await placed(twilio_api, 2)
    assert other.fields["To"] == OTHER_CALLEE
    assert len(created_calls(twilio_api.requests)) == 2
    assert (await sync_to_async(Call.objects.get)(pk=ids[1])).status == "queued"

    assert await callback(server, first, first_sid, "busy") == 204
    call = await status_of(ids[0], "busy")
    assert call.ended_reason == "busy" and call.billable_seconds == 0
    assert await dispatcher.round() == 1  # woken by the first call's end
    second = (await placed(twilio_api, 3, timeout=5))[2]
    assert second.fields["To"] == "+14155550198"
    assert (await status_of(ids[1], "ringing")).provider_call_id == second_sid
    assert await callback(server, second, second_sid, "no-answer") == 204
    assert (await status_of(ids[1], "no-answer")).ended_reason == "no-answer"


async def test_hang_up_ends_a_live_browser_session(server, owner, ava):
    status, session = await api(server, owner.api_key, "POST", f"/public/v1/agents/{ava.pk}/realtime-sessions")
    assert status == 200, session
    async with VoiceClient(session["websocketUrl"]) as browser:
        started = await browser.wait_for(is_type("session.started"), timeout=60)
        call_id = browser.messages[started].message["callId"]
        line = asyncio.create_task(browser.stream(bytes(32000 * 30)))
        status, hung = await api(server, owner.api_key, "POST", f"/public/v1/calls/{call_id}/hang-up")
        assert status == 200 and hung["id"] == call_id
        assert await browser.wait_closed(timeout=10) == 1000
        line.cancel()
        await asyncio.gather(line, return_exceptions=True)
    call = await status_of(call_id, "completed")
    assert call.ended_reason == "agent-ended-call" and call.channel == "web" and call.direction == "inbound"


async def test_a_call_canceled_while_ringing_opens_no_conversation_when_answered(
    server, owner, ava, twilio_api, dispatcher
):
    twilio_api.requests.clear()
    sid = "CA" + "e5" * 16
    twilio_api.reply(call_created(sid))
    _, body = await place_call(server, owner, ava)
    assert await dispatcher.round() == 1
    [created] = await placed(twilio_api, 1)
    await status_of(body["id"], "ringing")
    status, canceled = await api(server, owner.api_key, "POST", f"/public/v1/calls/{body['id']}/hang-up")
    assert status == 200 and canceled["status"] == "canceled" and canceled["endedReason"] == "canceled"
    # The person answered just as it was canceled: the stream is refused and the line hung up.
    async with TwilioStream(created.stream_url, created.token, call_sid=sid) as twilio:
        await twilio.start()
        assert await twilio.wait_closed(timeout=10) == 4409
        assert not twilio.messages
    assert call_updates(twilio_api.requests) == [(sid, {"Status": "canceled"}), (sid, {"Status": "completed"})]
    call = await sync_to_async(Call.objects.get)(pk=body["id"])
    assert (call.status, call.ended_reason, call.duration_seconds) == ("canceled", "canceled", 0)
