"""Per-call variables in the session shell (docs/guides/variables.md): the call's variables and the
built-ins ({{call.from}}, {{call.to}}, {{now}} in the agent's time zone, {{agent.name}}) fill the identity,
instructions, static greeting and dynamic-prompt reply in the one place the brain's context is built; an
unknown placeholder is left empty and logged once for the call as one `warn` line naming it; the
assistant request carries the variables."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from asgiref.sync import sync_to_async

from realtime.engine.session.shell import placeholder_values
from testing.fakes import silence
from testing.pipeline import Harness
from testing.recording import MemoryRecorder, RecordedCall
from testing.webhooks import (
    LoopbackReceiver,
    Reply,
    allow_loopback_fixture,  # noqa: F401 - fixture
    receiver_fixture,  # noqa: F401 - fixture
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

NOW = re.compile(r"^(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday) \d{1,2} [A-Z][a-z]+ \d{4}, \d\d:\d\d$")


def now_in(zone: str) -> str:
    local = datetime.now(ZoneInfo(zone))
    return f"{local:%A} {local.day} {local:%B %Y, %H:%M}"


def recorder(**variables: str) -> MemoryRecorder:
    return MemoryRecorder(from_number="+14155550111", to_number="+14155550142", variables=variables)


def warnings(recorded: MemoryRecorder) -> list[tuple[str, dict[str, Any]]]:
    return [(message, fields) for severity, message, fields in recorded.logs if severity == "warn"]


async def test_the_static_prompt_and_greeting_are_filled_and_an_unknown_name_is_logged_once(owner, make_agent):
    agent = await sync_to_async(make_agent)(
        owner.organization,
        name="Ava",
        status="active",
        time_zone="Asia/Tokyo",
        identity="You are {{agent.name}} of {{company}}.",
        instructions="The caller {{call.from}} called {{call.to}} on {{now}} about order {{ orderId }}. {{secret}}"
        "{{secret}}",
        greeting_type="static",
        static_greeting="Hello {{firstName}}, {{nickname}}welcome to {{company}}.",
    )
    before = now_in("Asia/Tokyo")
    h = Harness(agent, recorder=recorder(firstName="Ada", company="Acme", orderId="A-17"))
    await h.start()
    after = now_in("Asia/Tokyo")
    context = h.conversation.context
    assert context.identity == "You are Ava of Acme."
    now = context.instructions.split(" on ")[1].split(" about ")[0]
    assert NOW.match(now) and now in (before, after), now
    assert context.instructions == f"The caller +14155550111 called +14155550142 on {now} about order A-17. "
    assert context.greeting == "Hello Ada, welcome to Acme."
    await h.feed(silence(4000))
    assert h.transport.transcripts()[0][1].endswith("Hello Ada, welcome to Acme.")
    assert warnings(h.recorder) == [
        ("unknown placeholders left empty: secret, nickname", {"placeholders": ["secret", "nickname"]})
    ]
    call = await h.stop()
    assert call.messages[0][1].endswith("Hello Ada, welcome to Acme.")
    assert len(warnings(h.recorder)) == 1  # once per call, whatever happens next


async def test_without_placeholders_nothing_changes_and_nothing_is_logged(owner, make_agent):
    agent = await sync_to_async(make_agent)(
        owner.organization, name="Ava", status="active", instructions="Help callers {with} braces."
    )
    h = Harness(agent, recorder=recorder(firstName="Ada"))
    await h.start()
    assert h.conversation.context.instructions == "Help callers {with} braces."
    assert h.conversation.placeholder_values["firstName"] == "Ada"
    await h.stop()
    assert warnings(h.recorder) == []


def test_now_is_the_agents_local_time_and_the_built_ins_win_over_variables(owner, make_agent):
    agent = make_agent(owner.organization, name="Ava", time_zone="Europe/Madrid")
    call = RecordedCall(from_number="+14155550111", to_number="+14155550142", variables={"now": "x", "plan": "gold"})
    values = placeholder_values(agent, call, now=datetime(2026, 11, 27, 13, 5, tzinfo=UTC))
    assert values == {
        "plan": "gold",
        "now": "Friday 27 November 2026, 14:05",
        "call.from": "+14155550111",
        "call.to": "+14155550142",
        "agent.name": "Ava",
    }
    agent.time_zone = "Not/AZone"  # never through the API (it refuses it), but a bad row must not break calls
    assert placeholder_values(agent, call, now=datetime(2026, 11, 27, 13, 5, tzinfo=UTC))["now"] == (
        "Friday 27 November 2026, 13:05"
    )


async def test_the_dynamic_prompt_request_carries_the_variables_and_its_reply_is_filled(
    owner, make_agent, receiver: LoopbackReceiver, allow_loopback
):
    receiver.reply(
        Reply(
            json={
                "identity": "You are {{agent.name}}, {{firstName}}'s assistant.",
                "instructions": "Remind {{firstName}} of the appointment on {{date}}. {{unknownOne}}",
                "greeting": "Hi {{firstName}}{{unknownTwo}}!",
            }
        )
    )
    agent = await sync_to_async(make_agent)(
        owner.organization,
        name="Ava",
        status="active",
        agent_type="webhook",
        prompt_type="dynamic",
        greeting_type="dynamic",
        instructions="",
        server_url=receiver.url("/assistant"),
    )
    h = Harness(agent, recorder=recorder(firstName="Ada", date="Monday"))
    await h.start()
    (request,) = receiver.requests
    assert request.json()["message"]["call"]["variables"] == {"firstName": "Ada", "date": "Monday"}
    context = h.conversation.context
    assert (context.identity, context.instructions, context.greeting) == (
        "You are Ava, Ada's assistant.",
        "Remind Ada of the appointment on Monday. ",
        "Hi Ada!",
    )
    await h.stop()
    assert [fields for _, fields in warnings(h.recorder)] == [{"placeholders": ["unknownOne", "unknownTwo"]}]
