"""Twilio-compatible providers (SignalWire's compatibility API, for example): an account that names its
provider's REST API base URL sends every REST request there (its own path prefix, its project ID as the
account, Basic credentials), never to Twilio's; the organization chose that URL, so it passes the egress
guard when it is saved and on every request; the provider's webhooks are signed as Twilio's, also under
the X-SignalWire-Signature header. The stand-ins record what the providers would receive."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs

import pytest
from django.core.management import CommandError
from django.test import Client

from agents.models import AgentStatus
from kit.providers import ProviderError
from telephony.models import PhoneNumber, SetupStatus, TelephonyAccount
from telephony.outbound.dispatcher import outbound_dispatch
from telephony.providers import provider_for
from telephony.services.numbers import phone_number_assign, phone_number_claim
from testing.commands import settelephony
from testing.twilio_rest import call_created, created_calls
from testing.twilio_webhooks import parse_twiml, public_settings, sign, voice_params  # noqa: F401 - fixture
from testing.webhooks import LoopbackReceiver, Reply

PROJECT = "5f0c2a9e-7d41-4b8a-9c3e-2a6f1d0b8e47"  # a SignalWire project ID
API_TOKEN = "PTc0ffee1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f60718293a4"
NUMBER, CALLEE = "+14155550123", "+14155550142"
NUMBER_SID = "PN" + "6d" * 16
LOOPBACK = ["127.0.0.0/8"]

pytestmark = pytest.mark.usefixtures("public_settings")


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _form(body: bytes) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(body.decode(), keep_blank_values=True).items()}


@pytest.fixture
def twilio(settings: Any) -> Iterator[LoopbackReceiver]:
    """Twilio's own API: nothing of a compatible provider's account may reach it."""
    with LoopbackReceiver(default=Reply(status=500, json={"message": "not Twilio's"})) as api:
        settings.TWILIO_API_BASE_URL = api.base
        yield api


@pytest.fixture
def space(settings: Any, twilio: LoopbackReceiver) -> Iterator[LoopbackReceiver]:
    """The compatible provider's API on loopback (allowed to the service, as its own network would be)."""
    settings.OUTBOUND_ALLOWED_NETWORKS = LOOPBACK
    with LoopbackReceiver(default=Reply(json={"sid": "CA" + "0" * 32, "status": "in-progress"})) as api:
        yield api


def _base(space: LoopbackReceiver) -> str:
    return space.base + "/api/laml"


def _account_path(space: LoopbackReceiver) -> str:
    return f"/api/laml/2010-04-01/Accounts/{PROJECT}"


@pytest.fixture
def account(owner: Any, space: LoopbackReceiver) -> TelephonyAccount:
    org = str(owner.organization.pk)
    settelephony("--org", org, "--account-sid", PROJECT, "--auth-token", API_TOKEN, "--api-base-url", _base(space))
    return TelephonyAccount.objects.get(organization=owner.organization)


def _point(dashboard: Client, number: PhoneNumber) -> PhoneNumber:
    dashboard.post(
        "/admin/telephony/phonenumber/",
        {"action": "point_at_this_service", "_selected_action": [str(number.pk)]},
        follow=True,
    )
    number.refresh_from_db()
    return number


def test_pointing_a_number_asks_the_compatible_api_with_the_project_and_never_twilio(
    dashboard: Client, owner: Any, account: TelephonyAccount, space: LoopbackReceiver, twilio: LoopbackReceiver
) -> None:
    assert account.api_base_url == _base(space)
    number = phone_number_claim(organization=owner.organization, number=NUMBER, setup_status=SetupStatus.PENDING)
    page = {"incoming_phone_numbers": [{"sid": NUMBER_SID, "phone_number": NUMBER}], "next_page_uri": None}
    space.reply(Reply(json=page), Reply(json={"sid": NUMBER_SID, "phone_number": NUMBER}))

    number = _point(dashboard, number)

    assert (number.setup_status, number.setup_error) == (SetupStatus.READY, "")
    lookup, update = space.requests
    assert (lookup.method, lookup.path) == ("GET", f"{_account_path(space)}/IncomingPhoneNumbers.json")
    assert lookup.query["PhoneNumber"] == NUMBER
    assert (update.method, update.path) == ("POST", f"{_account_path(space)}/IncomingPhoneNumbers/{NUMBER_SID}.json")
    assert _form(update.body)["VoiceUrl"] == "http://voice.example.test/telephony/twilio/voice"
    assert all(r.headers["authorization"] == _basic(PROJECT, API_TOKEN) for r in space.requests)
    assert not twilio.requests


def test_an_outbound_call_is_placed_through_the_compatible_api(
    owner: Any,
    make_agent: Any,
    account: TelephonyAccount,
    space: LoopbackReceiver,
    twilio: LoopbackReceiver,
    settings: Any,
) -> None:
    settings.OUTBOUND_PLACE_THREADS = 1  # in the test's transaction
    agent = make_agent(owner.organization, name="Ava", status=AgentStatus.ACTIVE)
    number = phone_number_claim(organization=owner.organization, number=NUMBER)
    placed = owner.client.post(
        "/public/v1/calls", {"agentId": str(agent.pk), "phoneNumberId": str(number.pk), "to": CALLEE}, format="json"
    )
    assert placed.status_code == 201, placed.content
    space.reply(call_created("CA" + "5" * 32, account_sid=PROJECT))

    assert outbound_dispatch() == 1

    [created] = created_calls(space.requests)
    assert created.request.path == f"{_account_path(space)}/Calls.json"
    assert created.request.headers["authorization"] == _basic(PROJECT, API_TOKEN)
    assert (created.fields["To"], created.fields["From"]) == (CALLEE, NUMBER)
    assert created.status_callback_events == ["initiated", "ringing", "answered", "completed"]
    assert not twilio.requests
    assert owner.client.get(f"/public/v1/calls/{placed.json()['id']}").json()["status"] == "ringing"


async def test_live_call_transfer_and_hang_up_go_to_the_compatible_api(
    account: TelephonyAccount, space: LoopbackReceiver, twilio: LoopbackReceiver
) -> None:
    provider = provider_for(account)
    sid = "CA" + "9e" * 16
    await provider.transfer(call_sid=sid, destination="+14155550100", caller_id=NUMBER)
    await provider.hang_up(call_sid=sid)

    transfer, hang_up = space.requests
    assert {transfer.path, hang_up.path} == {f"{_account_path(space)}/Calls/{sid}.json"}
    assert parse_twiml(_form(transfer.body)["Twiml"].encode()).find("Dial/Number").text == "+14155550100"
    assert _form(hang_up.body) == {"Status": "completed"}
    assert {r.headers["authorization"] for r in space.requests} == {_basic(PROJECT, API_TOKEN)}
    assert not twilio.requests


async def test_the_providers_refusal_names_its_host_without_the_project(
    account: TelephonyAccount, space: LoopbackReceiver
) -> None:
    space.reply(Reply(status=404, json={"code": 20404, "message": f"Not found: /api/laml/Accounts/{PROJECT}/Calls"}))
    with pytest.raises(ProviderError) as caught:
        await provider_for(account).hang_up(call_sid="CA" + "4" * 32)
    assert caught.value.permanent is True
    assert caught.value.message.startswith("127.0.0.1 refused to hang up the call (HTTP 404, error 20404)")
    assert PROJECT not in caught.value.message and API_TOKEN not in caught.value.message


def test_a_destination_the_guard_refuses_is_refused_when_saved_and_on_every_request(
    dashboard: Client, owner: Any, account: TelephonyAccount, space: LoopbackReceiver, settings: Any
) -> None:
    org = str(owner.organization.pk)
    for url, reason in [
        ("https://169.254.169.254/api", "169.254.169.254"),  # cloud metadata: link-local
        ("https://10.20.30.40", "10.20.30.40"),
        ("http://voice-provider.example.com", "Must be an https URL"),
        ("https://example.signalwire.com/api?x=1", "without a query"),
        ("ftp://example.signalwire.com", "Only http and https URLs are allowed."),
    ]:
        with pytest.raises(CommandError, match="apiBaseUrl") as caught:
            settelephony("--org", org, "--account-sid", PROJECT, "--api-base-url", url)
        assert reason in str(caught.value)
    form = dashboard.post(
        f"/admin/telephony/telephonyaccount/{account.pk}/change/",
        {"provider": "twilio", "account_sid": PROJECT, "api_base_url": "https://10.20.30.40"},
    )
    assert form.status_code == 200 and "10.20.30.40" in form.content.decode()
    account.refresh_from_db()
    assert account.api_base_url == _base(space)  # nothing was saved

    # Saved while the network was allowed; refused once it is not, before anything is sent.
    settings.OUTBOUND_ALLOWED_NETWORKS = []
    number = phone_number_claim(organization=owner.organization, number=NUMBER, setup_status=SetupStatus.PENDING)
    number = _point(dashboard, number)
    assert number.setup_status == SetupStatus.ERROR
    assert number.setup_error.startswith("Could not reach 127.0.0.1 to look up the number: Refused outbound request")
    assert not space.requests


def test_an_account_of_a_compatible_provider_takes_its_own_ids_and_twilio_keeps_its_rules(
    owner: Any, space: LoopbackReceiver
) -> None:
    org = str(owner.organization.pk)
    with pytest.raises(CommandError, match="Must be a Twilio Account SID"):
        settelephony("--org", org, "--account-sid", PROJECT, "--auth-token", API_TOKEN)
    with pytest.raises(CommandError, match="letters, digits and hyphens"):
        settelephony(
            "--org", org, "--account-sid", "my project", "--auth-token", API_TOKEN, "--api-base-url", _base(space)
        )
    printed = settelephony(
        "--org", org, "--account-sid", PROJECT, "--auth-token", API_TOKEN, "--api-base-url", _base(space)
    )
    assert printed == {"organizationId": org, "provider": "twilio"}
    assert TelephonyAccount.objects.get().api_base_url == _base(space)


def test_its_webhooks_are_accepted_signed_as_twilios_under_either_header(
    client: Client, owner: Any, make_agent: Any, account: TelephonyAccount
) -> None:
    agent = make_agent(owner.organization, status=AgentStatus.ACTIVE, language="en-US")
    number = phone_number_claim(organization=owner.organization, number=NUMBER)
    phone_number_assign(organization=owner.organization, agent=agent, phone_number_id=number.pk)
    url = "http://voice.example.test/telephony/twilio/voice"

    for header in ("X-SignalWire-Signature", "X-Twilio-Signature"):
        params = voice_params(to=NUMBER, account_sid=PROJECT)
        response = client.post("/telephony/twilio/voice", params, headers={header: sign(url, params, API_TOKEN)})
        assert response.status_code == 200
        assert [child.tag for child in parse_twiml(response.content)] == ["Connect"]

    params = voice_params(to=NUMBER, account_sid=PROJECT)
    forged = client.post(
        "/telephony/twilio/voice", params, headers={"X-SignalWire-Signature": sign(url, params, "x" * 32)}
    )
    assert forged.status_code == 403
