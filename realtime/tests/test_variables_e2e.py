"""Per-call variables end to end through the project's ASGI application in the test's process
(testing/inprocess.py; docs/guides/variables.md): an API client
starts a browser session with `variables` and `metadata`, the browser connects with the token alone, the
agent greets with the variable filled in ("Hello {{firstName}}, ..."), the call detail and its events carry
`direction`, `variables` and `metadata`, the one unknown placeholder is one `warn` line of the agent log,
and bad variables are refused with a 400 by the application itself."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from calls.logging import flush_agent_logs
from calls.models import Call, CallEvent
from realtime.models import SessionVariables
from telephony.services.numbers import phone_number_assign, phone_number_claim
from telephony.streams import stream_token_issue
from testing.clients import VoiceClient
from testing.conversations import Caller, agent_for
from testing.inprocess import InProcessServer, serving
from testing.twilio_stream import TwilioStream, is_event
from testing.twilio_webhooks import (
    CALLER,
    PUBLIC_BASE_URL,
    call_sid,
    make_account,
    twilio_api_fixture,  # noqa: F401 - the fixture
)
from testing.waiting import polled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

GREETING = "Hello {{firstName}}, this is a reminder from {{company}} about order {{orderId}}{{ loyaltyTier }}."
VARIABLES = {"firstName": "Ada", "company": "Acme", "orderId": "A-17"}
METADATA = {"crmId": 4242, "campaign": "november-reminders", "tags": ["vip"]}


@pytest.fixture
def server(settings: Any, twilio_api: Any) -> Iterator[InProcessServer]:
    values = {"PUBLIC_BASE_URL": PUBLIC_BASE_URL, "TWILIO_API_BASE_URL": twilio_api.base}
    with serving(settings, values) as started:
        yield started


async def api(server: InProcessServer, owner: Any, path: str, body: Any = None, method: str = "GET") -> Any:
    """The public API of the application, with the owner's API key: the status and the JSON answer."""
    await sync_to_async(flush_agent_logs)()  # the agent log as a writer thread would have written it by now
    response = await server.arequest(method, path, api_key=owner.api_key, body=body)
    return response.status_code, response.json()


async def eventually(check: Any, timeout: float = 30) -> Any:
    return await polled(check, what=str(check), timeout=timeout, every=0.2)


async def test_a_browser_call_greets_with_its_variables_and_keeps_them(server, owner, make_agent):
    agent = await sync_to_async(agent_for)(
        owner,
        make_agent,
        name="Vera",
        instructions="You remind {{firstName}} of the order {{orderId}}.",
        greeting_type="static",
        static_greeting=GREETING,
        # A webhook agent with a serverUrl: the call's events are recorded (the test server does not send them).
        agent_type="webhook",
        server_url="https://hooks.example.com/voice",
    )
    status, session = await api(
        server,
        owner,
        f"/public/v1/agents/{agent.pk}/realtime-sessions",
        {"variables": VARIABLES, "metadata": METADATA},
        "POST",
    )
    assert status == 200, session
    assert "Ada" not in session["websocketUrl"] and "crmId" not in session["websocketUrl"]

    async with VoiceClient(session["websocketUrl"]) as client:
        caller = await Caller(client, {}).answered()
        assert caller.greeting == "Hi, I'm Vera, an AI agent. Hello Ada, this is a reminder from Acme about order A-17."
        assert client.audio(), "the greeting was spoken"
        await caller.hang_up()
    assert not await sync_to_async(SessionVariables.objects.exists)()

    async def ended() -> Any:
        status, detail = await api(server, owner, f"/public/v1/calls/{caller.call_id}")
        assert status == 200, detail
        return detail if detail["status"] == "completed" else None

    detail = await eventually(ended)
    assert (detail["direction"], detail["variables"], detail["metadata"]) == ("inbound", VARIABLES, METADATA)
    assert detail["messages"][0]["content"].endswith("Hello Ada, this is a reminder from Acme about order A-17.")
    status, listed = await api(server, owner, "/public/v1/calls")
    assert [(c["id"], c["variables"], c["metadata"]) for c in listed] == [(caller.call_id, VARIABLES, METADATA)]

    bodies = await sync_to_async(
        lambda: {e.event_type: json.loads(e.body) for e in CallEvent.objects.filter(call_id=caller.call_id)}
    )()
    assert {"call.started", "call.ended"} <= set(bodies)  # call.analyzed too, once the analysis ran
    for body in bodies.values():
        call = body["message"]["call"]
        assert (call["direction"], call["variables"], call["metadata"]) == ("inbound", VARIABLES, METADATA)

    async def logged() -> Any:
        status, page = await api(server, owner, f"/public/v1/agents/{agent.pk}/logs?limit=100")
        assert status == 200, page
        lines = page["logs"]
        return lines if any(line["content"].get("message") == "session ended" for line in lines) else None

    lines = await eventually(logged)
    warnings = [line["content"] for line in lines if line["severity"] == "warn"]
    assert warnings == [{"message": "unknown placeholders left empty: loyaltyTier", "placeholders": ["loyaltyTier"]}]


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"variables": {"firstName": 7}}, "variables", "must be a string"),
        ({"variables": {f"name{n}": "x" for n in range(51)}}, "variables", "At most 50 variables"),
        ({"variables": {"firstName": "A" * 1001}}, "variables", "longer than 1000 characters"),
        ({"metadata": {"notes": "n" * 17_000}}, "metadata", "at most 16384 bytes"),
    ],
)
async def test_bad_variables_are_refused_by_the_server(server, owner, make_agent, body, field, words):
    agent = await sync_to_async(agent_for)(owner, make_agent, name="Vera", instructions="You help callers.")
    status, error = await api(server, owner, f"/public/v1/agents/{agent.pk}/realtime-sessions", body, "POST")
    assert status == 400, error
    assert words in " ".join(error["issues"][field]), error
    assert not await sync_to_async(SessionVariables.objects.exists)()


NUMBER = "+14155550100"


async def test_a_phone_call_fills_the_built_ins_from_its_own_record(server, owner, make_agent, realtime_settings):
    """An inbound phone call has no variables, but {{call.from}}, {{call.to}} and {{agent.name}} come from its
    call record, in the same place as a browser call's."""

    def phone_agent() -> Any:
        agent = agent_for(
            owner,
            make_agent,
            name="Pia",
            instructions="You help callers.",
            greeting_type="static",
            static_greeting="This is {{agent.name}} at {{call.to}}; I see you call from {{call.from}}.",
        )
        make_account(owner.organization)
        number = phone_number_claim(organization=owner.organization, number=NUMBER)
        phone_number_assign(organization=owner.organization, agent=agent, phone_number_id=number.pk)
        return agent, number

    agent, number = await sync_to_async(phone_agent)()
    sid = call_sid()
    token = await sync_to_async(stream_token_issue)(
        organization_id=agent.organization_id,
        agent_id=agent.pk,
        phone_number_id=number.pk,
        call_sid=sid,
        from_number=CALLER,
        to_number=NUMBER,
    )
    async with TwilioStream(f"{server.ws_url}/telephony/twilio/stream", token, call_sid=sid) as twilio:
        await twilio.start()
        await twilio.wait_for(is_event("media"), timeout=60)
        call = await sync_to_async(Call.objects.get)(provider_call_id=sid)

        async def greeted() -> Any:
            status, detail = await api(server, owner, f"/public/v1/calls/{call.pk}")
            assert status == 200, detail
            return detail if detail["messages"] else None

        detail = await eventually(greeted)
        await twilio.stop()
        await twilio.wait_closed()
    assert detail["messages"][0]["content"].endswith(f"This is Pia at {NUMBER}; I see you call from {CALLER}.")
    assert (detail["direction"], detail["variables"], detail["metadata"]) == ("inbound", {}, None)
