"""The SIP endpoint where it runs for real, reached from Debian's `baresip` (testing/baresip.py) and through
the REST API of a real server process (testing/daphne.py):

- on the embedded default (no Redis: the embedded suite), the web server started with SIP_BIND serves SIP
  itself, as `make run` does;
- with Redis (the PostgreSQL suite), `manage.py sipserver` is a process of its own beside the web server,
  which hands it the calls to place through the channel layer.

Either way a caller's call is answered and greeted, and a call placed through POST /public/v1/calls rings
a phone, which hears the agent.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from calls.models import Call
from telephony.services.accounts import telephony_account_set
from telephony.services.numbers import phone_number_assign, phone_number_claim
from testing.baresip import BARESIP, Phone, baresip_call, caller_wav, free_udp_port, heard, silence_wav
from testing.chat_server import ChatServer, Text
from testing.daphne import DaphneServer, shared_test_server, sipserver_process
from testing.voice import rms
from testing.waiting import polled

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.processes,
    pytest.mark.usefixtures("close_db_threads"),
]

NUMBER = "+14155550100"  # the agent's
PERSON = "+14155550177"  # whom the agent calls
GREETING = "Thanks for calling Acme, how can I help?"


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with ChatServer(fallback=Text("We open at nine.")) as scripted:
        yield scripted


@pytest.fixture(scope="module")
def servers(django_db_blocker: Any, tmp_path_factory: Any, chat: ChatServer) -> Iterator[tuple[DaphneServer, int]]:
    """The web server and the SIP port of whichever process serves SIP."""
    if not Path(BARESIP).exists():
        pytest.skip("baresip is not installed (make setup installs it as root; .ci/run does)")
    sip_port, rtp_ports = free_udp_port(), "32000-32199"
    brain = {"LLM_PROVIDER": "openai", "LLM_BASE_URL": chat.base_url, "LLM_MODEL": "scripted", "LLM_API_KEY": "x"}
    web_env = {**brain, "OUTBOUND_POLL_SECONDS": "1"}  # its dispatcher places queued calls
    if not settings.REDIS_URL:
        web_env |= {"SIP_BIND": f"127.0.0.1:{sip_port}", "SIP_RTP_PORTS": rtp_ports}
    logs = tmp_path_factory.mktemp("servers")
    with ExitStack() as stack:
        web = stack.enter_context(shared_test_server(django_db_blocker, logs, "web", web_env))
        if settings.REDIS_URL:
            with django_db_blocker.unblock():
                stack.enter_context(sipserver_process(logs, f"127.0.0.1:{sip_port}", rtp_ports, brain))
        yield web, sip_port


def agent_on_sip(owner: Any, make_agent: Any, domain: str) -> Any:
    agent = make_agent(
        owner.organization, name="Ava", status="active", greeting_type="static", static_greeting=GREETING
    )
    telephony_account_set(
        organization=owner.organization, provider="sip", account_sid=domain, allowed_networks="127.0.0.0/8"
    )
    agent.number = phone_number_claim(organization=owner.organization, number=NUMBER)
    phone_number_assign(organization=owner.organization, agent=agent, phone_number_id=agent.number.pk)
    return agent


async def ended(**filters: Any) -> Call:
    async def done() -> Call | None:
        return await sync_to_async(Call.objects.filter(ended_at__isnull=False, **filters).first)()

    return await polled(done, what=f"the call {filters} ended", timeout=60)


async def test_a_caller_is_answered_and_a_call_placed_through_the_api_rings_a_phone(
    servers, owner, make_agent, chat, tmp_path
):
    web, sip_port = servers
    (tmp_path / "person").mkdir()
    (tmp_path / "caller").mkdir()
    person = tmp_path / "person"
    async with Phone(person, silence_wav(person, 30.0), user=PERSON, hang_up_after=8.0) as phone:
        agent = await sync_to_async(agent_on_sip)(owner, make_agent, f"127.0.0.1:{phone.port}")

        # In: a caller asks a question after the greeting, and hangs up.
        wav = caller_wav(tmp_path / "caller", "When do you open tomorrow?", lead=11.0, tail=6.0)
        dumps = await baresip_call(sip_port, tmp_path / "caller", wav, to=NUMBER)
        inbound = await ended(to_number=NUMBER, direction="inbound")
        assert (inbound.status, inbound.ended_reason) == ("completed", "caller-hung-up")
        audio, rate = heard(dumps)
        assert rms(audio[: rate * 2 * 4]) > 500, "the caller heard no greeting"
        assert len(chat.requests) >= 1, "the caller's question never reached the brain"

        # Out: the API queues the call, the web server's dispatcher places it, the SIP endpoint rings the phone.
        async with httpx.AsyncClient(base_url=web.http_url, timeout=30) as client:
            response = await client.post(
                "/public/v1/calls",
                headers={"Authorization": f"Bearer {owner.api_key}"},
                json={"agentId": str(agent.pk), "phoneNumberId": str(agent.number.pk), "to": PERSON},
            )
        assert response.status_code == 201, response.text
        log = await phone.ended()
    outbound = await ended(pk=response.json()["id"])
    assert (outbound.status, outbound.ended_reason, outbound.direction) == ("completed", "caller-hung-up", "outbound")
    assert f"from:  sip:{NUMBER}@127.0.0.1" in log or NUMBER in log
    audio, rate = heard(phone.dumps)
    assert rms(audio[: rate * 2 * 6]) > 500, "the phone heard no greeting"
