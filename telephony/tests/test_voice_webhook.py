"""The voice webhook as Twilio calls it: signed requests answered with <Connect><Stream> for a number
whose agent can take the call, a sorry and a hang-up otherwise, and nothing at all for requests that
are not genuinely Twilio's."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from agents.models import Agent, AgentStatus
from calls.logging import flush_agent_logs
from calls.models import AgentLog, Call
from realtime.models import UsedSessionToken
from realtime.tokens import TokenError
from telephony.models import PhoneNumber, PhoneNumberStatus
from telephony.services.numbers import phone_number_assign, phone_number_claim
from telephony.streams import stream_token_redeem
from testing.twilio_webhooks import (
    ACCOUNT_SID,
    AUTH_TOKEN,
    CALLER,
    PUBLIC_BASE_URL,
    call_sid,
    make_account,
    parse_twiml,
    post_signed,
    public_settings,  # noqa: F401 - fixture
    sign,
    voice_params,
)

VOICE = "/telephony/twilio/voice"
NUMBER = "+14155550123"
SORRY_EN = "Sorry, this number cannot take your call right now. Goodbye."

pytestmark = pytest.mark.usefixtures("public_settings")


@pytest.fixture
def line(owner: Any, make_agent: Any) -> PhoneNumber:
    """The owner's claimed number, assigned to an active agent, on the owner's Twilio account."""
    make_account(owner.organization)
    agent = make_agent(owner.organization, status=AgentStatus.ACTIVE, language="en-US")
    number = phone_number_claim(organization=owner.organization, number=NUMBER)
    return phone_number_assign(organization=owner.organization, agent=agent, phone_number_id=number.pk)


def _warn_lines(agent_id: Any) -> list[AgentLog]:
    flush_agent_logs()
    return list(AgentLog.objects.filter(agent_id=agent_id, severity="warn"))


def _assert_refused_with_sorry(response: Any, *, language: str = "en-US", sentence: str = SORRY_EN) -> None:
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/xml")
    root = parse_twiml(response.content)
    assert [child.tag for child in root] == ["Say", "Hangup"]
    assert root[0].text == sentence
    assert root[0].get("language") == language


def test_it_connects_the_call_to_the_numbers_agent_with_a_single_use_stream_token(
    client: Client, line: PhoneNumber
) -> None:
    sid = call_sid()
    response = post_signed(client, VOICE, voice_params(to=NUMBER, sid=sid))

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/xml")
    root = parse_twiml(response.content)
    assert [child.tag for child in root] == ["Connect"]
    (stream,) = list(root[0])
    assert stream.tag == "Stream"
    assert stream.get("url") == "ws://voice.example.test/telephony/twilio/stream"
    (parameter,) = list(stream)
    assert parameter.tag == "Parameter" and parameter.get("name") == "token"

    grant = stream_token_redeem(parameter.get("value"))
    assert grant.organization_id == line.organization_id
    assert grant.agent_id == line.assigned_agent_id
    assert grant.phone_number_id == line.pk
    assert (grant.call_sid, grant.from_number, grant.to_number) == (sid, CALLER, NUMBER)
    with pytest.raises(TokenError, match="already used"):
        stream_token_redeem(parameter.get("value"))
    assert Call.objects.count() == 0  # the call record starts with the stream, not with the webhook


def test_an_https_public_base_gives_a_wss_stream_url(client: Client, line: PhoneNumber, settings: Any) -> None:
    settings.PUBLIC_BASE_URL = "https://voice.example.com"
    params = voice_params(to=NUMBER)
    response = post_signed(client, VOICE, params, base="https://voice.example.com")

    stream = parse_twiml(response.content)[0][0]
    assert stream.get("url") == "wss://voice.example.com/telephony/twilio/stream"


def test_the_signature_covers_the_public_url_with_its_query_string(client: Client, line: PhoneNumber) -> None:
    params = voice_params(to=NUMBER)
    response = post_signed(client, VOICE + "?source=pbx&x=1", params)
    assert response.status_code == 200
    assert parse_twiml(response.content)[0].tag == "Connect"


@pytest.mark.parametrize(
    "signature",
    [
        pytest.param("", id="unsigned"),
        pytest.param("bm90IGEgc2lnbmF0dXJl", id="garbage"),
        pytest.param(None, id="signed-with-another-token"),
        pytest.param("host-url", id="signed-over-the-request-host-not-the-public-url"),
    ],
)
def test_it_refuses_requests_not_genuinely_signed_and_writes_nothing(
    client: Client, line: PhoneNumber, signature: str | None
) -> None:
    agent_id = line.assigned_agent_id
    Agent.objects.filter(pk=agent_id).update(status=AgentStatus.INACTIVE)  # a path that would log a warning
    params = voice_params(to=NUMBER)
    if signature is None:
        signature = sign(PUBLIC_BASE_URL + VOICE, params, token="f" * 32)
    elif signature == "host-url":
        signature = sign("http://testserver" + VOICE, params)
    headers = {"X-Twilio-Signature": signature} if signature else {}

    response = client.post(VOICE, params, headers=headers)

    assert response.status_code == 403
    assert b"<Response" not in response.content
    assert _warn_lines(agent_id) == []
    assert UsedSessionToken.objects.count() == 0 and Call.objects.count() == 0


def test_it_refuses_a_request_of_an_unknown_account(client: Client, line: PhoneNumber) -> None:
    params = voice_params(to=NUMBER, account_sid="AC" + "0" * 32)
    response = post_signed(client, VOICE, params)
    assert response.status_code == 403


def test_a_valid_signature_for_one_account_cannot_reach_another_organizations_number(
    client: Client, line: PhoneNumber, outsider: Any, make_agent: Any
) -> None:
    other_sid, other_token = "AC" + "2e" * 16, "b" * 32
    make_account(outsider.organization, account_sid=other_sid, auth_token=other_token)
    params = voice_params(to=NUMBER, account_sid=other_sid)
    response = post_signed(client, VOICE, params, signature=sign(PUBLIC_BASE_URL + VOICE, params, token=other_token))
    _assert_refused_with_sorry(response)


def test_an_unknown_number_hears_a_sorry_and_the_call_hangs_up(client: Client, line: PhoneNumber) -> None:
    response = post_signed(client, VOICE, voice_params(to="+14155550777"))
    _assert_refused_with_sorry(response)


def test_an_unassigned_number_hears_a_sorry(client: Client, line: PhoneNumber) -> None:
    PhoneNumber.objects.filter(pk=line.pk).update(assigned_agent=None)
    response = post_signed(client, VOICE, voice_params(to=NUMBER))
    _assert_refused_with_sorry(response)


def test_a_number_that_is_not_claimed_hears_a_sorry_and_its_agent_logs_a_warning(
    client: Client, line: PhoneNumber
) -> None:
    PhoneNumber.objects.filter(pk=line.pk).update(status=PhoneNumberStatus.SUSPENDED)
    response = post_signed(client, VOICE, voice_params(to=NUMBER))
    _assert_refused_with_sorry(response)
    (warning,) = _warn_lines(line.assigned_agent_id)
    assert warning.content["message"] == "Phone call refused: the number is suspended, not claimed"


@pytest.mark.parametrize("status", [AgentStatus.DRAFT, AgentStatus.INACTIVE])
def test_an_agent_that_is_not_active_refuses_in_its_language_and_logs_a_warning(
    client: Client, line: PhoneNumber, status: str
) -> None:
    Agent.objects.filter(pk=line.assigned_agent_id).update(status=status, language="es-US")
    sid = call_sid()
    response = post_signed(client, VOICE, voice_params(to=NUMBER, sid=sid))

    _assert_refused_with_sorry(
        response,
        language="es-US",
        sentence="Lo sentimos, este número no puede atender su llamada en este momento. Adiós.",
    )
    (warning,) = _warn_lines(line.assigned_agent_id)
    assert warning.content == {
        "message": f"Phone call refused: the agent is {status}, not active",
        "callSid": sid,
        "from": CALLER,
        "to": NUMBER,
    }


def test_an_agent_language_without_a_sentence_hears_english(client: Client, line: PhoneNumber) -> None:
    Agent.objects.filter(pk=line.assigned_agent_id).update(status=AgentStatus.DRAFT, language="ja-JP")
    _assert_refused_with_sorry(post_signed(client, VOICE, voice_params(to=NUMBER)))


def test_without_public_base_url_it_refuses_with_a_clear_error(
    client: Client, line: PhoneNumber, settings: Any
) -> None:
    settings.PUBLIC_BASE_URL = ""
    response = post_signed(client, VOICE, voice_params(to=NUMBER))
    assert response.status_code == 503
    assert b"PUBLIC_BASE_URL is not set" in response.content


def test_it_answers_only_post(client: Client, line: PhoneNumber) -> None:
    assert client.get(VOICE).status_code == 405


def test_the_auth_token_is_not_in_the_answer(client: Client, line: PhoneNumber) -> None:
    response = post_signed(client, VOICE, voice_params(to=NUMBER))
    assert AUTH_TOKEN.encode() not in response.content
    assert ACCOUNT_SID.encode() not in response.content


def test_twilio_needs_no_csrf_token(line: PhoneNumber) -> None:
    strict = Client(enforce_csrf_checks=True)
    assert post_signed(strict, VOICE, voice_params(to=NUMBER)).status_code == 200
    params = voice_params(to=NUMBER, CallStatus="completed")
    assert post_signed(strict, "/telephony/twilio/status", params).status_code == 204
