"""Warm transfers over Twilio (issue 39, docs/guides/phone-calls.md#warm-transfers), end to end through the
project's ASGI application in the test's process: Twilio's side of the caller's Media Stream played by a
script (testing/twilio_stream.py), its REST API by a loopback stand-in, and the person's answers (a key
press after the briefing, or their call's status) as Twilio's signed webhooks.

The agent's flow says one line and transfers warm: the person is called with a briefing while the caller
hears hold audio; "1" joins both in a conference (the caller's call is moved there, the agent is gone, the
call ends `transferred`); another key or no answer brings the caller back to the agent, which says so."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import urllib.parse
from collections.abc import Iterator
from typing import Any
from xml.etree import ElementTree

import pytest
from asgiref.sync import sync_to_async
from twilio.request_validator import RequestValidator

from calls.tasks import deliver_due_events
from realtime.engine.phrases import phrase
from telephony import audio
from telephony.services.accounts import telephony_account_set
from telephony.services.numbers import phone_number_assign, phone_number_claim
from telephony.streams import stream_token_issue
from testing.calls import wait_call
from testing.inprocess import InProcessServer, serving
from testing.twilio_rest import call_updates, created_calls
from testing.twilio_stream import TwilioStream, is_event
from testing.twilio_webhooks import twilio_api_fixture
from testing.waiting import polled, polled_sync
from testing.webhooks import LoopbackReceiver, Reply, allow_loopback_fixture, receivers_fixture

__all__ = ["allow_loopback_fixture", "receivers_fixture", "twilio_api_fixture"]  # fixtures

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

NUMBER = "+14155550100"
CALLER = "+14155550199"
DESK = "+14155550142"
ACCOUNT_SID = "AC" + "4" * 32
AUTH_TOKEN = "e" * 32
SILENCE = bytes([audio.SILENCE_BYTE]) * 8000
SECRET = "whsec-warm-transfer-8Lr"
FLOW = {
    "start": "connect",
    "nodes": {
        "connect": {"type": "say", "text": "Let me get a colleague for you.", "next": "desk"},
        "desk": {"type": "transfer", "phoneNumber": DESK, "mode": "warm"},
    },
}


@pytest.fixture
def server(realtime_settings: Any, settings: Any, twilio_api: Any, tmp_path: Any) -> Iterator[InProcessServer]:
    values = {"TWILIO_API_BASE_URL": twilio_api.base, "TELEPHONY_CALL_END_GRACE_SECONDS": 10}
    with serving(settings, values, public=True, folder=tmp_path) as started:
        yield started


@pytest.fixture
def hook(receivers: Any, allow_loopback: Any) -> LoopbackReceiver:
    """The agent's serverUrl: it receives the call's events."""
    receiver: LoopbackReceiver = receivers()
    return receiver


@pytest.fixture
def rosa(owner: Any, make_agent: Any, realtime_settings: Any, hook: LoopbackReceiver) -> Any:
    """An agent whose flow transfers every call warm to the desk."""
    agent = make_agent(
        owner.organization,
        name="Rosa",
        status="active",
        agent_type="webhook",
        server_url=hook.url("/hooks/rosa"),
        server_secret=SECRET,
        instructions="You connect callers of Acme to the desk.",
        greeting_type="static",
        static_greeting="Hello, this is Rosa from Acme.",
        flow=FLOW,
        transfer={
            "mode": "cold",  # the flow's step says warm
            "briefing": "static",
            "message": "A caller from {{call.from}} needs the desk.",
            "ringTimeoutSeconds": 20,
        },
    )
    telephony_account_set(organization=owner.organization, account_sid=ACCOUNT_SID, auth_token=AUTH_TOKEN)
    number = phone_number_claim(organization=owner.organization, number=NUMBER)
    phone_number_assign(organization=owner.organization, agent=agent, phone_number_id=number.pk)
    agent.number_id = number.pk
    return agent


async def signed_post(server: InProcessServer, url: str, params: dict[str, str]) -> tuple[int, str]:
    """A webhook as Twilio sends it to `url` (the service's PUBLIC_BASE_URL form): form-encoded and signed."""
    headers = {"X-Twilio-Signature": RequestValidator(AUTH_TOKEN).compute_signature(url, params)}
    path = urllib.parse.urlsplit(url).path
    async with server.ahttp() as client:
        response = await client.post(path, data=params, headers=headers)
    return response.status_code, response.text


class Transfer:
    """One caller's call, up to the moment the desk is called with its briefing."""

    def __init__(self, server: InProcessServer, agent: Any, twilio_api: Any) -> None:
        self.server, self.agent, self.twilio_api = server, agent, twilio_api
        self.call_sid = "CA" + "7" * 32
        self.twiml: ElementTree.Element | None = None
        self.leg = ""

    async def open(self, twilio: TwilioStream) -> None:
        await twilio.start()
        self.line = asyncio.create_task(twilio.stream(SILENCE * 120))  # a phone line always carries audio

        def dialled() -> Any:
            return next(iter(created_calls(self.twilio_api.requests)), None)

        created = await polled(dialled, what="the call to the desk", timeout=60, every=0.1)
        self.leg = "CA" + "0" * 32  # the stand-in's answer to every request
        assert (created.fields["To"], created.fields["From"]) == (DESK, NUMBER)
        self.twiml = ElementTree.fromstring(created.fields["Twiml"])  # noqa: S314 - the service's own TwiML
        self.status_url = created.fields["StatusCallback"]
        self.timeout = created.fields["Timeout"]

    @property
    def gather(self) -> ElementTree.Element:
        assert self.twiml is not None
        gather = self.twiml.find("Gather")
        assert gather is not None
        return gather

    async def person(self, **params: str) -> tuple[int, str]:
        """The desk's answer: a key press after the briefing (Digits), or its call's status (CallStatus)."""
        url = self.status_url if "CallStatus" in params else str(self.gather.get("action"))
        return await signed_post(self.server, url, {"AccountSid": ACCOUNT_SID, "CallSid": self.leg, **params})

    async def close(self, twilio: TwilioStream) -> None:
        self.line.cancel()
        await twilio.stop()
        await twilio.wait_closed()


def token_for(agent: Any, call_sid: str) -> str:
    return stream_token_issue(
        organization_id=agent.organization_id,
        agent_id=agent.pk,
        phone_number_id=agent.number_id,
        call_sid=call_sid,
        from_number=CALLER,
        to_number=NUMBER,
    )


async def delivered(hook: LoopbackReceiver, count: int) -> list[dict[str, Any]]:
    """The call's events the agent's serverUrl received, once `count` have come (Celery beat's delivery
    task, eager here, sends what is due), each signed with the agent's secret."""

    def events() -> list[dict[str, Any]] | None:
        deliver_due_events.delay().get()
        messages = [request.json()["message"] for request in hook.requests]
        # call.analyzed follows call.ended: the analysis is not what these tests look at
        messages = [message for message in messages if message["type"] != "call.analyzed"]
        return messages if len(messages) >= count else None

    messages = await sync_to_async(polled_sync)(events, what=f"{count} call events", timeout=30)
    for request in hook.requests:
        expected = "sha256=" + hmac.new(SECRET.encode(), request.body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(request.headers.get("x-service-signature", ""), expected)
    return messages


async def said(call_sid: str, text: str) -> None:
    async def spoken() -> bool:
        call = await wait_call(call_sid)
        return await sync_to_async(call.messages.filter(role="assistant", content=text).exists)()

    await polled(spoken, what=f"the agent saying {text!r}", timeout=30, every=0.1)


async def test_the_person_presses_1_the_caller_joins_their_conference_and_the_agent_leaves(
    server, rosa, hook, twilio_api, settings
):
    twilio_api.requests.clear()
    transfer = Transfer(server, rosa, twilio_api)
    token = await sync_to_async(token_for)(rosa, transfer.call_sid)
    async with TwilioStream(f"{server.ws_url}/telephony/twilio/stream", token, call_sid=transfer.call_sid) as twilio:
        await transfer.open(twilio)
        # The briefing: who calls and why, then the one-key menu at the service's signed URL.
        briefing = transfer.gather.findtext("Say") or ""
        assert briefing == (
            f"You have a call from {CALLER}, transferred by Rosa. A caller from {CALLER} needs the desk. "
            "Press 1 to take the call."
        )
        assert transfer.timeout == "20"  # the agent's ringTimeoutSeconds
        assert str(transfer.gather.get("action")).startswith(f"{settings.PUBLIC_BASE_URL}/telephony/twilio/transfer/")
        # The caller holds: audio keeps coming while the desk's phone rings.
        media = sum(1 for item in twilio.messages if item.message["event"] == "media")
        await twilio.wait_for(is_event("media"), after=len(twilio.messages), timeout=10)
        assert sum(1 for item in twilio.messages if item.message["event"] == "media") > media

        status, document = await transfer.person(Digits="1")
        assert status == 200
        conference = ElementTree.fromstring(document).find("Dial/Conference")  # noqa: S314 - our own answer
        assert conference is not None and conference.text and conference.text.startswith("transfer-")

        def moved() -> Any:
            return next((f for sid, f in call_updates(twilio_api.requests) if sid == transfer.call_sid), None)

        update = await polled(moved, what="the caller moved to the conference", timeout=20, every=0.1)
        joined = ElementTree.fromstring(update["Twiml"]).find("Dial/Conference")  # noqa: S314
        assert joined is not None and joined.text == conference.text
        await transfer.close(twilio)  # Twilio stops the stream once the caller's TwiML is replaced

    call = await wait_call(transfer.call_sid, status="completed")
    assert call.ended_reason == "transferred"
    assert (call.transfer["mode"], call.transfer["destination"], call.transfer["status"]) == ("warm", DESK, "accepted")
    messages = await delivered(hook, 4)
    assert [m["type"] for m in messages] == [
        "call.started",
        "call.transfer.started",
        "call.transfer.ended",
        "call.ended",
    ]
    assert [m["transfer"]["status"] for m in messages[1:3]] == ["ringing", "accepted"]


@pytest.mark.parametrize(
    ("answer", "outcome", "words"),
    [
        ({"Digits": "2"}, "declined", "transfer_declined"),
        ({"CallStatus": "no-answer"}, "no-answer", "transfer_unanswered"),
    ],
)
async def test_a_person_who_declines_or_does_not_answer_leaves_the_caller_with_the_agent_who_says_so(
    server, rosa, hook, twilio_api, answer, outcome, words
):
    twilio_api.requests.clear()
    transfer = Transfer(server, rosa, twilio_api)
    token = await sync_to_async(token_for)(rosa, transfer.call_sid)
    async with TwilioStream(f"{server.ws_url}/telephony/twilio/stream", token, call_sid=transfer.call_sid) as twilio:
        await transfer.open(twilio)
        status, _ = await transfer.person(**answer)
        assert status in (200, 204)
        await said(transfer.call_sid, phrase(words, "en-US"))
        assert not [sid for sid, _ in call_updates(twilio_api.requests) if sid == transfer.call_sid]
        call = await wait_call(transfer.call_sid)
        assert call.status == "active"  # the caller is still with the agent
        await transfer.close(twilio)

    call = await wait_call(transfer.call_sid, status="completed")
    assert call.ended_reason == "caller-hung-up"
    assert (call.transfer["mode"], call.transfer["status"]) == ("warm", outcome)
    messages = await delivered(hook, 4)
    assert [m["type"] for m in messages] == [
        "call.started",
        "call.transfer.started",
        "call.transfer.ended",
        "call.ended",
    ]
    assert messages[2]["transfer"]["status"] == outcome


async def test_the_callers_stream_stopping_while_they_are_moved_to_the_person_is_the_transfer(
    server, rosa, hook, twilio_api
):
    """Twilio stops the caller's stream as soon as its TwiML is replaced, maybe before the service has
    its answer to that request: the call is transferred all the same, and the person's call left alone."""
    twilio_api.requests.clear()
    leg = "CA" + "0" * 32
    twilio_api.reply(Reply(json={"sid": leg, "status": "queued"}), Reply(json={"sid": leg}, hold=True))
    transfer = Transfer(server, rosa, twilio_api)
    token = await sync_to_async(token_for)(rosa, transfer.call_sid)
    try:
        async with TwilioStream(
            f"{server.ws_url}/telephony/twilio/stream", token, call_sid=transfer.call_sid
        ) as twilio:
            await transfer.open(twilio)
            status, _ = await transfer.person(Digits="1")
            assert status == 200

            def moving() -> Any:
                return next((f for sid, f in call_updates(twilio_api.requests) if sid == transfer.call_sid), None)

            await polled(moving, what="the caller being moved", timeout=20, every=0.1)
            transfer.line.cancel()
            await twilio.stop()  # the stream stops before the service has Twilio's answer
            twilio_api.release()
            await twilio.wait_closed()
    finally:
        twilio_api.release()

    call = await wait_call(transfer.call_sid, status="completed")
    assert call.ended_reason == "transferred"
    assert call.transfer["status"] == "accepted"
    assert [sid for sid, _ in call_updates(twilio_api.requests)] == [transfer.call_sid]  # the person's call stays
