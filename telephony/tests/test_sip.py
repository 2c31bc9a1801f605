"""Calls over SIP from a real SIP phone, Debian's `baresip` (its `aufile` source plays the caller's eSpeak
speech, its `sndfile` filter records what the caller hears), to the service's SIP endpoint
(telephony/sip/) running in the test's process on loopback, talking to the engine with a scripted brain.

- an INVITE from an allowed network is answered in G.722, PCMU or PCMA: the caller hears the disclosure
  and the greeting (energy in what baresip recorded, and its words recognized), the caller's question is
  answered with what the agent's knowledge search found, and the caller's hang-up (BYE) ends the call
  `completed` / `caller-hung-up`;
- an INVITE from outside the account's allowed networks is challenged (401): with the account's digest
  credentials it is answered, with wrong ones or none it is refused and never becomes a call;
- keys pressed on the phone (RFC 4733) reach the agent as one keypad turn, and the agent's `send_digits`
  keys reach the phone as tones;
- the agent ending the call, and POST /calls/{id}/hang-up, send a BYE.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soxr
from asgiref.sync import sync_to_async
from django.core.management import CommandError

from calls.logging import flush_agent_logs
from calls.models import AgentLog, Call
from telephony.models import TelephonyAccount
from telephony.services.accounts import telephony_account_set
from telephony.services.numbers import phone_number_assign, phone_number_claim
from telephony.sip.endpoint import SipEndpoint
from testing.baresip import baresip_call, caller_wav, heard, on_the_line, silence_wav
from testing.chat_server import Call as ScriptedCall
from testing.chat_server import ChatServer, Text, Tools
from testing.commands import settelephony
from testing.dtmf import dtmf_decode
from testing.inprocess import serving
from testing.voice import recognize, rms, words
from testing.waiting import polled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

NUMBER = "+14155550100"
GREETING = "Thanks for calling Acme, how can I help?"
QUESTION = "When do you open tomorrow?"
GOODBYE = "Please end the call now."
FAQ = """Q: When are you open?
A: We are open Monday to Friday from 8:30 am to 5:30 pm.

Q: Where are you?
A: Our shop is at 12 Harbour Street, next to the ferry terminal.
"""
HOURS = "We are open Monday to Friday from 8:30 am to 5:30 pm."


def answers(body: dict[str, Any]) -> Any:
    """The brain: a caller's question is looked up in the agent's knowledge (the service's own search) and
    answered with the passage found; "end" ends the call."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        found = HOURS in (last.get("content") or "")
        return Text(HOURS if found else "Goodbye.")
    if "end" in (last.get("content") or "").lower():
        return Tools(ScriptedCall("end_call", {}))
    return Tools(ScriptedCall("search_knowledge", {"query": "opening hours"}))


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with ChatServer(fallback=answers) as scripted:
        yield scripted


@pytest.fixture
def server(
    engine_loaded: None, settings: Any, chat: ChatServer, realtime_settings: Any, sip_endpoint: SipEndpoint
) -> Iterator[SipEndpoint]:
    values = {"LLM_PROVIDER": "openai", "LLM_BASE_URL": chat.base_url, "LLM_MODEL": "scripted", "LLM_API_KEY": "x"}
    with serving(settings, values):
        yield sip_endpoint


@pytest.fixture
def ava(owner: Any, make_agent: Any, realtime_settings: Any) -> Any:
    agent = make_agent(
        owner.organization,
        name="Ava",
        status="active",
        instructions="You answer the callers of Acme.",
        greeting_type="static",
        static_greeting=GREETING,
        keypad={"enabled": True, "timeoutMs": 3000, "terminator": "#"},
    )
    telephony_account_set(
        organization=owner.organization, provider="sip", account_sid="pbx.example.test", allowed_networks="127.0.0.0/8"
    )
    number = phone_number_claim(organization=owner.organization, number=NUMBER)
    phone_number_assign(organization=owner.organization, agent=agent, phone_number_id=number.pk)
    upload = owner.client.post(f"/public/v1/agents/{agent.pk}/knowledge", {"content": FAQ}, format="json")
    assert upload.status_code == 200, upload.content
    return agent


async def call(endpoint: SipEndpoint, folder: Path, wav: Path, **options: Any) -> Path:
    """baresip calls Ava's number (testing/baresip.py); the folder of what the caller heard."""
    endpoint.loop = asyncio.get_running_loop()  # the in-process endpoint's calls run on the test's loop
    return await baresip_call(endpoint.address.port, folder, wav, to=NUMBER, **options)


async def the_call(to_number: str, status: str = "completed") -> Call:
    async def found() -> Call | None:
        return await sync_to_async(Call.objects.filter(to_number=to_number, status=status).first)()

    return await polled(found, what=f"the {status} call", timeout=20)


@pytest.mark.parametrize(("codec", "rate"), [("PCMU", 8000), ("PCMA", 8000), ("G722", 16000)])
async def test_a_call_from_an_allowed_network_is_answered_greets_and_ends_with_the_callers_bye(
    server, ava, chat, tmp_path, codec, rate
):
    first = len(chat.requests)
    wav = caller_wav(tmp_path, QUESTION, lead=11.0, tail=7.0, rate=rate)  # after the disclosure and greeting
    dumps = await call(server, tmp_path, wav, codec=codec)

    call_record = await the_call(NUMBER)
    assert (call_record.channel, call_record.direction, call_record.ended_reason) == (
        "phone",
        "inbound",
        "caller-hung-up",
    )
    assert call_record.from_number == "caller"  # the caller's SIP user
    audio, heard_rate = heard(dumps)
    assert heard_rate == rate  # G.722 when offered: wideband to the caller
    greeting = audio[: rate * 2 * 10]  # the first ten seconds: the disclosure and the greeting
    assert rms(greeting[: rate * 2 * 4]) > 500, "the caller heard no greeting"
    wideband = greeting if rate == 16000 else soxr.resample(np.frombuffer(greeting, "<i2"), rate, 16000).astype("<i2")
    recognized = await sync_to_async(recognize)(ava, bytes(wideband))
    assert len(words(recognized) & words(GREETING)) >= 3, recognized  # the words, not only sound
    assert len(chat.requests) > first, "the caller's question never reached the brain"
    messages = await sync_to_async(lambda: list(call_record.messages.values_list("role", "content")))()
    assert messages[0][0] == "assistant" and messages[0][1].endswith(GREETING)  # heard whole, after the disclosure
    assert ("assistant", HOURS) in messages  # found by the knowledge search, said to the caller


async def test_keys_pressed_on_the_phone_reach_the_agent_as_one_turn(server, ava, chat, tmp_path):
    first = len(chat.requests)
    wav = silence_wav(tmp_path, 16.0)
    await call(server, tmp_path, wav, keys=(10.0, "461#"))

    call_record = await the_call(NUMBER)
    messages = await sync_to_async(lambda: list(call_record.messages.values_list("role", "content")))()
    # The keypad (enabled, "#" ends the keys): one turn, the terminator not among the digits.
    assert ("user", "the caller entered 4 6 1") in messages, messages
    assert len(chat.requests) > first

    def keys_logged() -> list[str]:
        flush_agent_logs()  # the tests' settings run no log writer thread
        entries = AgentLog.objects.filter(content__message="caller pressed a key").order_by("timestamp", "sequence")
        return [entry.content["digit"] for entry in entries]

    assert await sync_to_async(keys_logged)() == list("461#")


async def test_the_agents_keys_go_out_as_tones_a_phone_menu_can_read(server, ava, chat, tmp_path):
    chat.script(Tools(ScriptedCall("send_digits", {"digits": "12#"}, id="call_keys_sip")), Text("I pressed them."))
    await call(server, tmp_path, silence_wav(tmp_path, 24.0), keys=(10.0, "9#"))  # the menu asks

    call_record = await the_call(NUMBER)
    invocations = await sync_to_async(lambda: list(call_record.tool_invocations.values_list("tool_name", "status")))()
    assert ("send_digits", "success") in invocations
    audio, rate = heard(tmp_path / "heard")
    assert dtmf_decode(audio, rate) == "12#"  # in-band, in order, as a menu on the far side hears them


async def test_the_agent_ending_the_call_sends_a_bye(server, ava, chat, tmp_path):
    chat.script(Tools(ScriptedCall("end_call", {}, id="call_end_sip")), Text("Goodbye."))
    wav = caller_wav(tmp_path, GOODBYE, lead=11.0, tail=25.0)  # the caller would stay on the line 25 s more
    dumps = await call(server, tmp_path, wav)

    call_record = await the_call(NUMBER)
    assert call_record.ended_reason == "agent-ended-call"
    assert on_the_line(dumps) < 11 + 3 + 15  # the BYE ended the call long before the caller's file did


async def test_hang_up_through_the_api_sends_a_bye(server, ava, owner, tmp_path):
    wav = caller_wav(tmp_path, QUESTION, lead=30.0, tail=1.0)
    caller = asyncio.create_task(call(server, tmp_path, wav))

    live = await the_call(NUMBER, status="active")
    response = await sync_to_async(owner.client.post)(f"/public/v1/calls/{live.pk}/hang-up")
    assert response.status_code == 200, response.content
    dumps = await caller
    call_record = await the_call(NUMBER)
    assert call_record.ended_reason == "agent-ended-call"
    assert on_the_line(dumps) < 25  # the BYE ended the call long before the caller's 31 s file did


async def test_an_invite_from_elsewhere_is_challenged_and_answered_only_with_the_accounts_credentials(
    server, ava, owner, tmp_path
):
    await sync_to_async(telephony_account_set)(
        organization=owner.organization,
        provider="sip",
        account_sid="pbx.example.test",
        allowed_networks="10.0.0.0/8",  # not loopback: baresip must authenticate
        sip_username="acme-pbx",
        auth_token="s3cret-Digest-Passw0rd",
    )
    for attempt, credentials in enumerate(["", "acme-pbx:wrong-password"]):
        folder = tmp_path / f"refused{attempt}"
        folder.mkdir()
        wav = caller_wav(folder, QUESTION, lead=1.0, tail=1.0)
        await call(server, folder, wav, seconds=6, credentials=credentials)
        log = (folder / "baresip.log").read_text()
        # Challenged (401), baresip answers with what it has (nothing, or the wrong password): refused.
        assert "session closed: 403 Forbidden" in log, log[-2000:]
    assert await sync_to_async(Call.objects.count)() == 0

    wav = caller_wav(tmp_path, QUESTION, lead=1.0, tail=6.0)
    await call(server, tmp_path, wav, credentials="acme-pbx:s3cret-Digest-Passw0rd")
    call_record = await the_call(NUMBER)
    assert call_record.ended_reason == "caller-hung-up"


def test_a_sip_account_is_its_domain_and_allowed_networks_and_organizations_may_share_a_trunk(
    owner: Any, outsider: Any, dashboard: Any
) -> None:
    org = str(owner.organization.pk)
    base = ["--org", org, "--provider", "sip", "--sip-domain", "sip.trunk.example"]
    for extra, message in [
        ([], "networks \\(CIDR\\) calls come from"),
        (["--allowed-networks", "198.51.100.0/24,not-a-network"], "'not-a-network' is not a network"),
        (["--allowed-networks", "198.51.100.0/24", "--sip-password", "x" * 32], "A SIP password needs its username"),
        (["--sip-username", "acme-pbx"], "A SIP username needs its password"),
        (["--allowed-networks", "198.51.100.0/24", "--api-key-sid", "SK" + "1" * 32], "Not used by SIP accounts"),
    ]:
        with pytest.raises(CommandError, match=message):
            settelephony(*base, *extra)
    with pytest.raises(CommandError, match="HOST or HOST:PORT"):
        settelephony("--org", org, "--provider", "sip", "--sip-domain", "sip:bad", "--allowed-networks", "10.0.0.0/8")
    assert settelephony(*base, "--allowed-networks", "198.51.100.7/24, 2001:db8::/32")["provider"] == "sip"
    other = ["--org", str(outsider.organization.pk), "--provider", "sip", "--sip-domain", "sip.trunk.example"]
    assert settelephony(*other, "--allowed-networks", "203.0.113.0/24")["provider"] == "sip"
    account = TelephonyAccount.objects.get(organization=owner.organization)
    assert account.allowed_networks == ["198.51.100.0/24", "2001:db8::/32"] and account.auth_token == ""
    page = dashboard.get(f"/admin/telephony/telephonyaccount/{account.pk}/change/").content.decode()
    assert "198.51.100.0/24, 2001:db8::/32" in page
    with pytest.raises(CommandError, match="Only for SIP accounts"):
        settelephony(
            "--org", org, "--account-sid", "AC" + "1" * 32, "--auth-token", "t" * 32, "--allowed-networks", "10.0.0.0/8"
        )
