"""The Twilio adapter's REST calls against a loopback stand-in for api.twilio.com (TWILIO_API_BASE_URL):
the dashboard action that points numbers at this service, and live-call transfer and hang-up. The
stand-in records what Twilio would receive: Basic credentials, paths and form bodies."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qs
from xml.etree import ElementTree

import pytest
from django.test import Client

from kit.providers import ProviderError
from telephony.models import PhoneNumber, SetupStatus, TelephonyAccount
from telephony.providers import provider_for
from telephony.services.numbers import phone_number_claim
from testing.servers import closed_port_url
from testing.twilio_webhooks import ACCOUNT_SID, AUTH_TOKEN, make_account, public_settings  # noqa: F401
from testing.webhooks import LoopbackReceiver, Received, Reply

NUMBER = "+14155550123"
NUMBER_SID = "PN" + "4c" * 16
API_KEY_SID, API_KEY_SECRET = "SK" + "7a" * 16, "api-key-secret-0123456789abcdef"
ACCOUNT_PATH = f"/2010-04-01/Accounts/{ACCOUNT_SID}"

pytestmark = pytest.mark.usefixtures("public_settings")


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _form(request: Received) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(request.body.decode(), keep_blank_values=True).items()}


def _number_page(*numbers: str) -> Reply:
    records = [{"sid": NUMBER_SID, "account_sid": ACCOUNT_SID, "phone_number": n} for n in numbers]
    return Reply(
        json={
            "incoming_phone_numbers": records,
            "page": 0,
            "page_size": 1,
            "first_page_uri": f"{ACCOUNT_PATH}/IncomingPhoneNumbers.json?PageSize=1&Page=0",
            "next_page_uri": None,
            "previous_page_uri": None,
            "uri": f"{ACCOUNT_PATH}/IncomingPhoneNumbers.json?PageSize=1&Page=0",
            "start": 0,
            "end": len(records) - 1,
        }
    )


def _twilio_error(status: int, code: int, message: str) -> Reply:
    return Reply(status=status, json={"code": code, "message": message, "more_info": "", "status": status})


@pytest.fixture
def twilio_api(settings: Any) -> Any:
    with LoopbackReceiver() as api:
        settings.TWILIO_API_BASE_URL = api.base
        yield api


@pytest.fixture
def pending_number(owner: Any) -> PhoneNumber:
    make_account(owner.organization)
    return phone_number_claim(organization=owner.organization, number=NUMBER, setup_status=SetupStatus.PENDING)


def _point(dashboard: Client, *numbers: PhoneNumber) -> Any:
    return dashboard.post(
        "/admin/telephony/phonenumber/",
        {"action": "point_at_this_service", "_selected_action": [str(n.pk) for n in numbers]},
        follow=True,
    )


def test_point_at_this_service_sets_the_voice_url_and_status_callback_and_makes_the_number_ready(
    dashboard: Client, pending_number: PhoneNumber, twilio_api: Any
) -> None:
    twilio_api.reply(_number_page(NUMBER), Reply(json={"sid": NUMBER_SID, "phone_number": NUMBER}))

    response = _point(dashboard, pending_number)

    assert response.status_code == 200
    assert f"{NUMBER}: ready" in response.content.decode()
    pending_number.refresh_from_db()
    assert (pending_number.setup_status, pending_number.setup_error) == (SetupStatus.READY, "")
    lookup, update = twilio_api.requests
    assert (lookup.method, lookup.path) == ("GET", f"{ACCOUNT_PATH}/IncomingPhoneNumbers.json")
    assert lookup.query["PhoneNumber"] == NUMBER
    assert (update.method, update.path) == ("POST", f"{ACCOUNT_PATH}/IncomingPhoneNumbers/{NUMBER_SID}.json")
    assert _form(update) == {
        "VoiceUrl": "http://voice.example.test/telephony/twilio/voice",
        "VoiceMethod": "POST",
        "StatusCallback": "http://voice.example.test/telephony/twilio/status",
        "StatusCallbackMethod": "POST",
    }
    for request in twilio_api.requests:
        assert request.headers["authorization"] == _basic(ACCOUNT_SID, AUTH_TOKEN)


def test_with_an_api_key_the_rest_calls_authenticate_with_it(
    dashboard: Client, pending_number: PhoneNumber, twilio_api: Any, owner: Any
) -> None:
    make_account(owner.organization, api_key_sid=API_KEY_SID, api_key_secret=API_KEY_SECRET)
    twilio_api.reply(_number_page(NUMBER), Reply(json={"sid": NUMBER_SID}))
    _point(dashboard, pending_number)
    assert [r.headers["authorization"] for r in twilio_api.requests] == [_basic(API_KEY_SID, API_KEY_SECRET)] * 2
    assert all(r.path.startswith(ACCOUNT_PATH) for r in twilio_api.requests)


def test_a_twilio_error_sets_error_with_the_reason_and_no_secret(
    dashboard: Client, pending_number: PhoneNumber, twilio_api: Any
) -> None:
    twilio_api.reply(
        _number_page(NUMBER),
        _twilio_error(403, 20003, f"Permission denied for {ACCOUNT_PATH}/IncomingPhoneNumbers/{NUMBER_SID}.json"),
    )

    response = _point(dashboard, pending_number)

    pending_number.refresh_from_db()
    assert pending_number.setup_status == SetupStatus.ERROR
    assert pending_number.setup_error.startswith("Twilio refused to update the number (HTTP 403, error 20003)")
    assert ACCOUNT_SID not in pending_number.setup_error and AUTH_TOKEN not in pending_number.setup_error
    assert f"{NUMBER}: error: Twilio refused" in response.content.decode()


def test_a_number_the_account_does_not_hold_is_an_error(
    dashboard: Client, pending_number: PhoneNumber, twilio_api: Any
) -> None:
    twilio_api.reply(_number_page())
    _point(dashboard, pending_number)
    pending_number.refresh_from_db()
    assert pending_number.setup_status == SetupStatus.ERROR
    assert pending_number.setup_error == f"{NUMBER} is not a number of Twilio account {ACCOUNT_SID}"
    assert len(twilio_api.requests) == 1


def test_bad_credentials_say_so(dashboard: Client, pending_number: PhoneNumber, twilio_api: Any) -> None:
    twilio_api.reply(_twilio_error(401, 20003, "Authenticate"))
    _point(dashboard, pending_number)
    pending_number.refresh_from_db()
    assert pending_number.setup_error == (
        "Twilio refused to look up the number (HTTP 401, error 20003): Authenticate. Check the account's credentials."
    )


def test_an_unreachable_api_and_a_missing_public_base_url_are_errors(
    dashboard: Client, pending_number: PhoneNumber, settings: Any
) -> None:
    settings.TWILIO_API_BASE_URL = closed_port_url("").rstrip("/")
    _point(dashboard, pending_number)
    pending_number.refresh_from_db()
    assert pending_number.setup_status == SetupStatus.ERROR
    assert pending_number.setup_error.startswith("Could not reach Twilio to look up the number")

    settings.PUBLIC_BASE_URL = ""
    _point(dashboard, pending_number)
    pending_number.refresh_from_db()
    assert pending_number.setup_error.startswith("PUBLIC_BASE_URL is not set")


def test_a_number_of_an_organization_without_an_account_is_an_error(dashboard: Client, outsider: Any) -> None:
    number = phone_number_claim(organization=outsider.organization, number="+14155550124", setup_status="pending")
    _point(dashboard, number)
    number.refresh_from_db()
    assert number.setup_status == SetupStatus.ERROR
    assert "no telephony account" in number.setup_error


# --- live calls -----------------------------------------------------------------------------------


@pytest.fixture
def account(owner: Any) -> TelephonyAccount:
    return make_account(owner.organization)


@pytest.fixture
async def twilio_api_in_loop(settings: Any) -> Any:
    async with LoopbackReceiver(default=Reply(json={"sid": "CA" + "0" * 32, "status": "in-progress"})) as api:
        settings.TWILIO_API_BASE_URL = api.base
        yield api


async def test_transfer_replaces_the_calls_twiml_with_a_dial_to_the_handoff_number(
    account: TelephonyAccount, twilio_api_in_loop: Any
) -> None:
    sid = "CA" + "9e" * 16
    await provider_for(account).transfer(
        call_sid=sid, destination="+14155550100", caller_id=NUMBER, announcement="Connecting you now."
    )

    (request,) = twilio_api_in_loop.requests
    assert (request.method, request.path) == ("POST", f"{ACCOUNT_PATH}/Calls/{sid}.json")
    assert request.headers["authorization"] == _basic(ACCOUNT_SID, AUTH_TOKEN)
    form = _form(request)
    assert set(form) == {"Twiml"}
    root = ElementTree.fromstring(form["Twiml"])  # noqa: S314 - what our adapter sent
    assert [child.tag for child in root] == ["Say", "Dial"]
    assert root.find("Say").text == "Connecting you now."
    dial = root.find("Dial")
    assert dial.get("callerId") == NUMBER
    assert [(n.tag, n.text) for n in dial] == [("Number", "+14155550100")]


async def test_transfer_without_an_announcement_only_dials(account: TelephonyAccount, twilio_api_in_loop: Any) -> None:
    await provider_for(account).transfer(call_sid="CA" + "1" * 32, destination="+14155550100", caller_id=NUMBER)
    twiml = _form(twilio_api_in_loop.requests[0])["Twiml"]
    assert twiml.endswith('<Response><Dial callerId="+14155550123"><Number>+14155550100</Number></Dial></Response>')


async def test_hang_up_completes_the_call(account: TelephonyAccount, twilio_api_in_loop: Any) -> None:
    sid = "CA" + "2" * 32
    await provider_for(account).hang_up(call_sid=sid)
    (request,) = twilio_api_in_loop.requests
    assert request.path == f"{ACCOUNT_PATH}/Calls/{sid}.json"
    assert _form(request) == {"Status": "completed"}
    assert request.headers["authorization"] == _basic(ACCOUNT_SID, AUTH_TOKEN)


async def test_a_refused_transfer_raises_a_permanent_provider_error_without_secrets(
    account: TelephonyAccount, twilio_api_in_loop: Any
) -> None:
    sid = "CA" + "3" * 32
    twilio_api_in_loop.reply(
        _twilio_error(400, 21220, f"Unable to update record: Call is not in-progress. {ACCOUNT_PATH}/Calls/{sid}.json")
    )
    with pytest.raises(ProviderError) as caught:
        await provider_for(account).transfer(call_sid=sid, destination="+14155550100", caller_id=NUMBER)
    assert caught.value.permanent is True
    assert caught.value.message.startswith("Twilio refused to transfer the call (HTTP 400, error 21220)")
    assert ACCOUNT_SID not in caught.value.message and AUTH_TOKEN not in caught.value.message


async def test_a_server_error_or_an_unreachable_api_is_a_temporary_provider_error(
    account: TelephonyAccount, twilio_api_in_loop: Any, settings: Any
) -> None:
    twilio_api_in_loop.reply(_twilio_error(503, 20500, "Service unavailable"))
    with pytest.raises(ProviderError) as caught:
        await provider_for(account).hang_up(call_sid="CA" + "4" * 32)
    assert caught.value.permanent is False

    settings.TWILIO_API_BASE_URL = closed_port_url("").rstrip("/")
    with pytest.raises(ProviderError, match="Could not reach Twilio to hang up the call") as caught:
        await provider_for(account).hang_up(call_sid="CA" + "4" * 32)
    assert caught.value.permanent is False
