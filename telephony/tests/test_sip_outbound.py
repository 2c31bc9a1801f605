"""Outbound SIP calls and transfers, between the service's SIP endpoint (telephony/sip/, in the test's
process on loopback) and real SIP phones, Debian's `baresip` (testing/baresip.py), with a scripted brain.

- a call placed through POST /public/v1/calls from a number of a SIP account is an INVITE to
  `sip:<to>@<the account's domain>`; the phone answers, hears the greeting with the call's variables, and
  its hang-up ends the call `completed` / `caller-hung-up`;
- a phone that refuses the call (486) ends it `busy`, one that lets it ring past the ring timeout ends it
  `no-answer` (the endpoint cancels the INVITE);
- the agent's transfer is a REFER: the caller's phone calls the transfer target (a second baresip) and the
  agent's leg is hung up once that call is answered: `completed` / `transferred`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from calls.models import Call
from telephony.outbound.dispatcher import outbound_dispatch
from telephony.services.accounts import telephony_account_set
from telephony.services.numbers import phone_number_assign, phone_number_claim
from telephony.sip.endpoint import SipEndpoint
from testing.baresip import Phone, baresip_call, caller_wav, heard, silence_wav
from testing.chat_server import Call as ScriptedCall
from testing.chat_server import ChatServer, Text, Tools
from testing.inprocess import serving
from testing.voice import rms
from testing.waiting import polled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

NUMBER = "+14155550100"  # the agent's
PERSON = "+14155550177"  # whom the agent calls
DESK = "+14155550188"  # where the agent transfers callers


def answers(body: dict[str, Any]) -> Any:
    """The brain: whatever the caller asks (the phones of the outbound tests say nothing), a transfer."""
    if body["messages"][-1]["role"] == "tool":
        return Text("Connecting you now.")
    return Tools(ScriptedCall("transfer_call", {"reason": "asked for a person"}))


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with ChatServer(fallback=answers) as scripted:
        yield scripted


@pytest.fixture
def server(engine_loaded: None, settings: Any, chat: ChatServer, realtime_settings: Any, sip_endpoint: SipEndpoint):
    values = {"LLM_PROVIDER": "openai", "LLM_BASE_URL": chat.base_url, "LLM_MODEL": "scripted", "LLM_API_KEY": "x"}
    with serving(settings, values):
        yield sip_endpoint


def agent_on_sip(owner: Any, make_agent: Any, domain: str, **fields: Any) -> Any:
    """Ava, answering NUMBER of the organization's SIP account, whose trunk is `domain` (a baresip)."""
    agent = make_agent(owner.organization, name="Ava", status="active", greeting_type="static", **fields)
    telephony_account_set(
        organization=owner.organization, provider="sip", account_sid=domain, allowed_networks="127.0.0.0/8"
    )
    agent.number = phone_number_claim(organization=owner.organization, number=NUMBER)
    phone_number_assign(
        organization=owner.organization, agent=agent, phone_number_id=agent.number.pk, handoff_phone_number=DESK
    )
    return agent


async def place(endpoint: SipEndpoint, owner: Any, agent: Any, **body: Any) -> str:
    """POST /public/v1/calls from Ava's number to PERSON, placed by the dispatcher; the call's id."""
    endpoint.loop = asyncio.get_running_loop()
    request = {"agentId": str(agent.pk), "phoneNumberId": str(agent.number.pk), "to": PERSON, **body}
    response = await sync_to_async(owner.client.post)("/public/v1/calls", request, content_type="application/json")
    assert response.status_code == 201, response.content
    assert await sync_to_async(outbound_dispatch)() == 1
    return str(response.json()["id"])


async def ended(call_id: str) -> Call:
    async def done() -> Call | None:
        call = await sync_to_async(Call.objects.get)(pk=call_id)
        return call if call.ended_at is not None else None

    return await polled(done, what=f"call {call_id} ended", timeout=40)


async def test_an_outbound_call_rings_the_phone_and_greets_with_the_calls_variables(
    server, owner, make_agent, tmp_path
):
    async with Phone(tmp_path, silence_wav(tmp_path, 30.0), user=PERSON, hang_up_after=8.0) as phone:
        agent = await sync_to_async(agent_on_sip)(
            owner, make_agent, f"127.0.0.1:{phone.port}", static_greeting="Hello {{name}}, this is Acme calling."
        )
        call_id = await place(server, owner, agent, variables={"name": "Dana"})
        log = await phone.ended()

    call = await ended(call_id)
    assert (call.status, call.ended_reason, call.direction) == ("completed", "caller-hung-up", "outbound")
    assert (call.provider_call_id or "").endswith("@127.0.0.1")  # the INVITE's Call-ID
    assert f"Incoming call from: {NUMBER}" in log or NUMBER in log  # our number as the caller id
    messages = await sync_to_async(lambda: list(call.messages.values_list("role", "content")))()
    assert messages[0][0] == "assistant" and messages[0][1].endswith("Hello Dana, this is Acme calling.")
    audio, rate = heard(phone.dumps)
    assert rms(audio[: rate * 2 * 6]) > 500, "the phone heard no greeting"


@pytest.mark.parametrize(("answer", "status"), [("busy", "busy"), ("never", "no-answer")])
async def test_an_outbound_call_refused_or_not_answered_ends_with_its_reason(
    server, owner, make_agent, tmp_path, settings, answer, status
):
    settings.OUTBOUND_RING_TIMEOUT_SECONDS = 5
    async with Phone(tmp_path, silence_wav(tmp_path, 5.0), user=PERSON, answer=answer) as phone:
        agent = await sync_to_async(agent_on_sip)(owner, make_agent, f"127.0.0.1:{phone.port}", static_greeting="Hi.")
        call_id = await place(server, owner, agent)
        log = await phone.ended()

    call = await ended(call_id)
    assert (call.status, call.ended_reason) == (status, status)
    assert call.duration_seconds in (0, None) and not await sync_to_async(lambda: call.messages.exists())()
    assert "Incoming call" in log  # it rang


async def test_the_agent_transfers_a_caller_with_a_refer_to_the_desk(server, owner, make_agent, tmp_path):
    desk_folder = tmp_path / "desk"
    desk_folder.mkdir()
    async with Phone(desk_folder, silence_wav(desk_folder, 30.0), user=DESK, hang_up_after=3.0) as desk:
        await sync_to_async(agent_on_sip)(
            owner, make_agent, f"127.0.0.1:{desk.port}", static_greeting="Acme, how can I help?"
        )
        caller = tmp_path / "caller"
        caller.mkdir()
        wav = caller_wav(caller, "I want to speak to a person.", lead=10.0, tail=14.0)
        server.loop = asyncio.get_running_loop()
        await baresip_call(server.address.port, caller, wav, to=NUMBER, calls=2, seconds=60)
        desk_log = await desk.ended()

    call = await sync_to_async(Call.objects.get)(to_number=NUMBER)
    assert (call.status, call.ended_reason) == ("completed", "transferred")
    caller_log = (caller / "baresip.log").read_text()
    assert f"sip:{DESK}@127.0.0.1:{desk.port}" in caller_log, caller_log[-3000:]  # the REFER's target
    # The caller's phone itself called the desk, which answered: the agent's leg was hung up after that.
    assert "answering call on line 1 from sip:caller@127.0.0.1" in desk_log, desk_log[-3000:]
    assert f"{DESK}@127.0.0.1: Call established: sip:caller@127.0.0.1" in desk_log, desk_log[-3000:]
