"""Outbound calls through the public API, the dispatcher and Twilio's side: POST /public/v1/calls queues a
call, the dispatcher places it with Twilio's REST API (a loopback stand-in recording the form bodies),
signed status callbacks move it to `ringing` and end a call never answered with its reason, hang-up
cancels it at the carrier, the plan's outbound concurrency keeps extra calls queued until a slot frees,
and bad input is a clear 4xx with nothing placed."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from xml.etree import ElementTree

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import Plan
from agents.models import AgentStatus
from calls.models import Call, CallDirection, CallEvent, CallStatus, EventType, WebhookEndpoint
from calls.services import call_start
from calls.signals import call_ended
from telephony.models import OutboundCall
from telephony.outbound.dispatcher import outbound_close_stuck, outbound_dispatch
from telephony.services.numbers import phone_number_claim
from telephony.streams import stream_token_redeem
from telephony.tasks import dispatch_outbound
from testing.twilio_rest import call_created, call_updates, created_calls, twilio_error
from testing.twilio_webhooks import (
    ACCOUNT_SID,
    PUBLIC_BASE_URL,
    make_account,
    public_settings,  # noqa: F401 - fixture
    sign,
    status_params,
)
from testing.waiting import polled_sync
from testing.webhooks import LoopbackReceiver, Reply

NUMBER = "+14155550123"
CALLEE = "+14155550142"
STATUS = "/telephony/twilio/status"
CALLS_JSON = f"/2010-04-01/Accounts/{ACCOUNT_SID}/Calls.json"

pytestmark = pytest.mark.usefixtures("public_settings")


@pytest.fixture
def twilio_api(settings: Any) -> Iterator[LoopbackReceiver]:
    with LoopbackReceiver(default=Reply(status=500, json={"message": "unscripted"})) as api:
        settings.TWILIO_API_BASE_URL = api.base
        settings.BACKGROUND_WORK = "inline"  # the suite's: no dispatcher; the tests place calls (outbound_dispatch)
        settings.OUTBOUND_PLACE_THREADS = 1  # in the test's transaction
        settings.TELEPHONY_CALL_END_GRACE_SECONDS = 0.2
        yield api


@pytest.fixture
def ava(owner: Any, make_agent: Any) -> Any:
    make_account(owner.organization)
    agent = make_agent(owner.organization, name="Ava", status=AgentStatus.ACTIVE)
    agent.number = phone_number_claim(organization=owner.organization, number=NUMBER)
    return agent


@pytest.fixture
def ended() -> Iterator[list[Any]]:
    """The ids call_ended was sent for, in order."""
    seen: list[Any] = []

    def receiver(*, call_id: Any, **kwargs: Any) -> None:
        seen.append(call_id)

    call_ended.connect(receiver, dispatch_uid="test-outbound-ended")
    yield seen
    call_ended.disconnect(dispatch_uid="test-outbound-ended")


def _place(owner: Any, ava: Any, to: str = CALLEE, **body: Any) -> Any:
    return owner.client.post(
        "/public/v1/calls",
        {"agentId": str(ava.pk), "phoneNumberId": str(ava.number.pk), "to": to, **body},
        format="json",
    )


def _callback(client: Client, call: Call, status: str) -> Any:
    """A signed status callback of the call, to the URL it was placed with (it names the call)."""
    path = f"{STATUS}?callId={call.pk}"
    params = status_params(sid=call.provider_call_id or "", status=status, to=call.to_number)
    params["Direction"] = "outbound-api"
    return client.post(path, params, headers={"X-Twilio-Signature": sign(PUBLIC_BASE_URL + path, params)})


# --- placing a call --------------------------------------------------------------------------------


def test_a_call_is_queued_then_placed_with_a_media_stream_and_status_callbacks(
    owner: Any, ava: Any, twilio_api: LoopbackReceiver
) -> None:
    response = _place(owner, ava, variables={"name": "Ada"}, metadata={"crm": 7})

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "queued" and body["agentId"] == str(ava.pk)
    call = Call.objects.get(pk=body["id"])
    assert (call.direction, call.channel, call.from_number, call.to_number) == ("outbound", "phone", NUMBER, CALLEE)
    assert (call.variables, call.metadata) == ({"name": "Ada"}, {"crm": 7})
    assert OutboundCall.objects.get(pk=call.pk).placed_at is None
    assert not twilio_api.requests  # placing is the dispatcher's

    twilio_api.reply(call_created("CA" + "5" * 32))
    assert outbound_dispatch() == 1

    [created] = created_calls(twilio_api.requests)
    assert created.request.path == CALLS_JSON
    assert created.fields["To"] == CALLEE and created.fields["From"] == NUMBER
    assert created.fields["StatusCallback"] == f"{PUBLIC_BASE_URL}{STATUS}?callId={call.pk}"
    assert created.fields["StatusCallbackMethod"] == "POST"
    assert created.status_callback_events == ["initiated", "ringing", "answered", "completed"]
    assert created.stream_url == "ws://voice.example.test/telephony/twilio/stream"
    root = ElementTree.fromstring(created.fields["Twiml"])  # noqa: S314 - the service's own TwiML
    assert [child.tag for child in root] == ["Connect"]
    # The single-use token names the call record the stream opens.
    grant = stream_token_redeem(created.token)
    assert (grant.call_id, grant.agent_id, grant.from_number, grant.to_number) == (call.pk, ava.pk, NUMBER, CALLEE)
    call.refresh_from_db()
    assert (call.status, call.provider_call_id) == ("ringing", "CA" + "5" * 32)
    assert OutboundCall.objects.get(pk=call.pk).placed_at is not None
    # Placed once: another round (or a second dispatcher) has nothing to place.
    assert outbound_dispatch() == 0 and dispatch_outbound.apply().get() == 0
    assert len(created_calls(twilio_api.requests)) == 1


def test_an_agent_with_voicemail_detection_places_calls_with_asynchronous_detection(
    owner: Any, ava: Any, twilio_api: LoopbackReceiver
) -> None:
    """The agent's voicemail setting reaches Twilio's Calls.json: asynchronous answering-machine detection
    (waiting for the beep when it leaves a message), its verdict POSTed to the service's AMD webhook."""
    ava.voicemail = {"detection": "provider", "action": "leave-message", "message": "Please call back."}
    ava.save(update_fields=["voicemail"])
    plain = _place(owner, ava).json()
    twilio_api.reply(call_created("CA" + "6" * 32))
    assert outbound_dispatch() == 1

    [created] = created_calls(twilio_api.requests)
    assert created.fields["MachineDetection"] == "DetectMessageEnd"
    assert created.fields["AsyncAmd"] == "true"
    assert created.fields["AsyncAmdStatusCallback"] == f"{PUBLIC_BASE_URL}/telephony/twilio/amd"
    assert created.fields["AsyncAmdStatusCallbackMethod"] == "POST"
    assert Call.objects.get(pk=plain["id"]).status == "ringing"

    ava.voicemail = {"detection": "off", "action": "hang-up", "message": ""}
    ava.save(update_fields=["voicemail"])
    _place(owner, ava, to="+14155550198")
    twilio_api.reply(call_created("CA" + "7" * 32))
    assert outbound_dispatch() == 1
    assert "MachineDetection" not in created_calls(twilio_api.requests)[1].fields


def test_status_callbacks_ring_then_end_an_unanswered_call_with_its_reason_once(
    client: Client,
    owner: Any,
    ava: Any,
    twilio_api: LoopbackReceiver,
    ended: list[Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    now = timezone.now()
    WebhookEndpoint.objects.create(
        organization=owner.organization,
        url="https://hooks.example.test/x",
        events=["call.started", "call.ended"],
        secret="s" * 32,
        created_at=now,
        updated_at=now,
    )
    outcomes = {}
    for twilio_status, (status, reason) in {
        "no-answer": ("no-answer", "no-answer"),
        "busy": ("busy", "busy"),
        "failed": ("failed", "provider-error"),
        "canceled": ("canceled", "canceled"),
    }.items():
        call = Call.objects.get(pk=_place(owner, ava).json()["id"])
        twilio_api.reply(call_created())
        outbound_dispatch()
        call.refresh_from_db()
        assert _callback(client, call, "initiated").status_code == 204
        assert _callback(client, call, "ringing").status_code == 204
        call.refresh_from_db()
        assert call.status == "ringing"
        with django_capture_on_commit_callbacks(execute=True):
            assert _callback(client, call, twilio_status).status_code == 204
            assert _callback(client, call, twilio_status).status_code == 204  # Twilio retries: nothing more
        call.refresh_from_db()
        outcomes[twilio_status] = (call.status, call.ended_reason)
        assert call.ended_at is not None and call.duration_seconds == 0 and call.billable_seconds == 0
        assert ended.count(call.pk) == 1
        assert list(CallEvent.objects.filter(call=call).values_list("event_type", flat=True)) == [EventType.CALL_ENDED]
        assert outcomes[twilio_status] == (status, reason)


def test_a_provider_failure_ends_the_call_failed_with_provider_error(
    owner: Any, ava: Any, twilio_api: LoopbackReceiver, ended: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    call_id = _place(owner, ava).json()["id"]
    twilio_api.reply(twilio_error(400, 21215, "Geo permission configuration is not permitting call"))
    with django_capture_on_commit_callbacks(execute=True):
        outbound_dispatch()
    call = Call.objects.get(pk=call_id)
    assert (call.status, call.ended_reason, call.provider_call_id) == ("failed", "provider-error", None)
    assert ended == [call.pk]
    assert outbound_dispatch() == 0  # not retried: placed at most once


def test_the_answered_stream_attaches_to_the_ringing_call(owner: Any, ava: Any, twilio_api: LoopbackReceiver) -> None:
    from calls.services import call_activate

    call = Call.objects.get(pk=_place(owner, ava).json()["id"])
    twilio_api.reply(call_created("CA" + "6" * 32))
    outbound_dispatch()
    assert call_activate(call_id=call.pk, provider_call_id="CA" + "7" * 32) is None  # another carrier call
    active = call_activate(call_id=call.pk, provider_call_id="CA" + "6" * 32)
    assert active is not None and active.status == "active" and active.provider_call_id == "CA" + "6" * 32
    assert call_activate(call_id=call.pk) is None  # once
    assert Call.objects.filter(organization=owner.organization).count() == 1


# --- limits ----------------------------------------------------------------------------------------


def test_over_the_plan_concurrency_calls_wait_queued_and_are_placed_when_one_ends(
    client: Client, owner: Any, ava: Any, twilio_api: LoopbackReceiver
) -> None:
    Plan.objects.filter(pk=owner.organization.plan_id).update(max_outbound_calls=2)
    ids = [_place(owner, ava, to=f"+1415555014{n}").json()["id"] for n in range(4)]
    twilio_api.reply(call_created(), call_created())

    assert outbound_dispatch() == 2

    calls = {str(c.pk): c for c in Call.objects.filter(pk__in=ids)}
    assert [calls[i].status for i in ids] == ["ringing", "ringing", "queued", "queued"]  # oldest first
    assert [c.fields["To"] for c in created_calls(twilio_api.requests)] == ["+14155550140", "+14155550141"]
    assert outbound_dispatch() == 0  # still full

    _callback(client, calls[ids[0]], "busy")
    twilio_api.reply(call_created())
    assert outbound_dispatch() == 1
    assert Call.objects.get(pk=ids[2]).status == "ringing" and Call.objects.get(pk=ids[3]).status == "queued"
    assert [c.fields["To"] for c in created_calls(twilio_api.requests)][2] == "+14155550142"


def test_the_live_call_cap_also_holds_outbound_calls_queued(owner: Any, ava: Any, twilio_api: LoopbackReceiver) -> None:
    Plan.objects.filter(pk=owner.organization.plan_id).update(max_concurrent_calls=1, max_outbound_calls=5)
    call_start(agent=ava, channel="web")  # one live browser session takes the only slot
    call_id = _place(owner, ava).json()["id"]
    assert outbound_dispatch() == 0
    assert Call.objects.get(pk=call_id).status == "queued" and not twilio_api.requests


@pytest.mark.parametrize(
    ("to", "message"),
    [
        ("4155550142", "E.164"),
        ("+1415555014", "Not a valid phone number"),
        ("+19005551234", "premium-rate"),
        ("+441234567890x", "E.164"),
        ("+15555550100", "Not a valid phone number"),
        (12, "E.164"),
        (None, "Required"),
    ],
)
def test_a_bad_destination_is_a_400_and_nothing_is_placed(
    owner: Any, ava: Any, twilio_api: LoopbackReceiver, to: Any, message: str
) -> None:
    response = _place(owner, ava, to=to)
    assert response.status_code == 400, response.json()
    assert message in response.json()["error"] and "to" in response.json()["issues"]
    assert not Call.objects.exists() and outbound_dispatch() == 0 and not twilio_api.requests


def test_blocked_numbers_and_prefixes_are_refused(
    owner: Any, ava: Any, twilio_api: LoopbackReceiver, settings: Any
) -> None:
    settings.OUTBOUND_CALL_BLOCKLIST = ["+1415555019", "+14155550142"]
    for to in ("+14155550142", "+14155550199"):
        response = _place(owner, ava, to=to)
        assert response.status_code == 400 and "blocklist" in response.json()["error"]
    assert _place(owner, ava, to="+14155550143").status_code == 201


@pytest.mark.parametrize(
    ("to", "kind"),
    [
        ("+447012345678", "a personal number (a forwarding range such as the UK's +4470)"),
        ("+447640123456", "a pager number"),
        ("+881612345678", "a satellite phone number (+881)"),
        ("+870773111632", "an Inmarsat satellite number (+870)"),
        ("+878101234567890", "a Universal Personal Telecommunications number (+878)"),
        ("+8823421234", "an international network number (+882)"),
        ("+883510012345", "an international network number (+883)"),
    ],
)
def test_personal_satellite_and_upt_ranges_are_refused_as_toll_fraud(
    owner: Any, ava: Any, twilio_api: LoopbackReceiver, to: str, kind: str
) -> None:
    owner.client.patch("/public/v1/organization", {"outboundCountries": ["GB", "US"]}, format="json")
    response = _place(owner, ava, to=to)
    assert response.status_code == 400, response.json()
    assert response.json()["issues"]["to"] == [
        f"{to} is {kind}; outbound calls to premium, shared-cost, personal, satellite and other non-geographic "
        "ranges are not allowed."
    ]
    assert not Call.objects.exists() and outbound_dispatch() == 0 and not twilio_api.requests


def test_a_call_to_one_of_the_organizations_own_numbers_is_refused(
    owner: Any, ava: Any, twilio_api: LoopbackReceiver
) -> None:
    other_line = phone_number_claim(organization=owner.organization, number="+14155550177")
    for to in (NUMBER, other_line.phone_number):
        response = _place(owner, ava, to=to)
        assert response.status_code == 400, response.json()
        assert "is one of the organization's own numbers" in response.json()["issues"]["to"][0]
    assert not Call.objects.exists() and outbound_dispatch() == 0 and not twilio_api.requests


def test_a_country_outside_the_organizations_list_is_refused_until_it_is_added(
    owner: Any, outsider: Any, ava: Any, twilio_api: LoopbackReceiver
) -> None:
    london = "+442071838750"
    response = _place(owner, ava, to=london)
    assert response.status_code == 400, response.json()
    assert response.json()["issues"]["to"] == [
        f"{london} is in GB, outside the organization's destination countries (US); add GB to outboundCountries "
        "(PATCH /organization) to call it."
    ]
    assert not Call.objects.exists()

    assert (
        outsider.client.patch("/public/v1/organization", {"outboundCountries": ["GB"]}, format="json").status_code
        == 200
    )
    assert _place(owner, ava, to=london).status_code == 400  # another organization's list is its own

    allowed = owner.client.patch("/public/v1/organization", {"outboundCountries": ["gb", "US"]}, format="json")
    assert allowed.status_code == 200, allowed.json()
    assert allowed.json()["outboundCountries"] == allowed.json()["outboundCountriesInEffect"] == ["GB", "US"]
    assert _place(owner, ava, to=london).status_code == 201
    assert _place(owner, ava, to="+33142685300").status_code == 400  # France is still outside


def test_the_organization_shows_and_sets_its_destination_countries(owner: Any, ava: Any) -> None:
    body = owner.client.get("/public/v1/organization").json()
    assert body["id"] == str(owner.organization.pk) and body["name"] == owner.organization.name
    assert (body["outboundCountries"], body["outboundCountriesInEffect"]) == (None, ["US"])  # its number's

    for bad in ([], ["ZZ"], "US", [1], ["United Kingdom"]):
        response = owner.client.patch("/public/v1/organization", {"outboundCountries": bad}, format="json")
        assert response.status_code == 400, (bad, response.json())
        assert list(response.json()["issues"]) == ["outboundCountries"]
    unknown = owner.client.patch("/public/v1/organization", {"name": "Mine now"}, format="json")
    assert unknown.status_code == 400 and "name" in unknown.json()["issues"]
    assert owner.client.patch("/public/v1/organization", [1], format="json").status_code == 400

    owner.client.patch("/public/v1/organization", {"outboundCountries": ["CA"]}, format="json")
    reset = owner.client.patch("/public/v1/organization", {"outboundCountries": None}, format="json").json()
    assert (reset["outboundCountries"], reset["outboundCountriesInEffect"]) == (None, ["US"])


def test_bad_requests_are_clear_4xx_and_nothing_is_placed(
    owner: Any, outsider: Any, ava: Any, make_agent: Any, twilio_api: LoopbackReceiver
) -> None:
    theirs = phone_number_claim(organization=outsider.organization, number="+14155550177")
    paused = make_agent(owner.organization, name="Paused", status=AgentStatus.INACTIVE)
    base = {"agentId": str(ava.pk), "phoneNumberId": str(ava.number.pk), "to": CALLEE}
    cases = [
        ({**base, "phoneNumberId": str(theirs.pk)}, 400, "PHONE_NUMBER_NOT_CLAIMED"),
        ({**base, "agentId": str(paused.pk)}, 400, "AGENT_NOT_ACTIVE"),
        ({**base, "agentId": str(make_agent(outsider.organization, status="active").pk)}, 404, None),
        ({**base, "agentId": "not-a-uuid"}, 400, None),
        ({**base, "phoneNumberId": "nope"}, 400, None),
        ({**base, "variables": {"name": 3}}, 400, None),
        ({**base, "variables": "x"}, 400, None),
        ({**base, "metadata": {"blob": "x" * 20000}}, 400, None),
        ({k: v for k, v in base.items() if k != "agentId"}, 400, None),
    ]
    for body, status, code in cases:
        response = owner.client.post("/public/v1/calls", body, format="json")
        assert response.status_code == status, (body, response.json())
        assert response.json()["error"]
        if code:
            assert response.json()["code"] == code
    assert owner.client.post("/public/v1/calls", [1], format="json").status_code == 400
    assert not Call.objects.exists() and outbound_dispatch() == 0 and not twilio_api.requests


def test_a_plan_without_outbound_calls_is_refused_with_403(owner: Any, ava: Any, twilio_api: LoopbackReceiver) -> None:
    Plan.objects.filter(pk=owner.organization.plan_id).update(max_outbound_calls=0)
    response = _place(owner, ava)
    assert response.status_code == 403
    assert response.json()["code"] == "OUTBOUND_NOT_ALLOWED" and "outbound" in response.json()["error"]
    assert not Call.objects.exists() and not twilio_api.requests


def test_without_a_telephony_account_the_call_is_refused(owner: Any, ava: Any, twilio_api: LoopbackReceiver) -> None:
    owner.organization.telephony_account.delete()
    response = _place(owner, ava)
    assert response.status_code == 400 and response.json()["code"] == "TELEPHONY_ACCOUNT_MISSING"
    assert not Call.objects.exists()


def test_get_calls_still_lists_and_includes_outbound_ones(owner: Any, ava: Any, twilio_api: LoopbackReceiver) -> None:
    call_id = _place(owner, ava).json()["id"]
    listed = owner.client.get("/public/v1/calls")
    assert listed.status_code == 200 and [c["id"] for c in listed.json()] == [call_id]


# --- hang-up and cancel ----------------------------------------------------------------------------


def test_hang_up_cancels_a_queued_call_at_once_and_a_ringing_one_at_the_carrier(
    owner: Any, ava: Any, twilio_api: LoopbackReceiver, ended: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    queued = _place(owner, ava).json()["id"]
    with django_capture_on_commit_callbacks(execute=True):
        response = owner.client.post(f"/public/v1/calls/{queued}/hang-up")
    assert response.status_code == 200 and response.json()["status"] == "canceled"
    assert response.json()["endedReason"] == "canceled" and ended == [Call.objects.get(pk=queued).pk]
    assert outbound_dispatch() == 0 and not twilio_api.requests  # never placed

    ringing = _place(owner, ava).json()["id"]
    sid = "CA" + "8" * 32
    twilio_api.reply(call_created(sid), Reply(json={"sid": sid, "status": "canceled"}))
    outbound_dispatch()
    response = owner.client.post(f"/public/v1/calls/{ringing}/hang-up")
    assert response.status_code == 200 and response.json()["status"] == "canceled"
    assert call_updates(twilio_api.requests) == [(sid, {"Status": "canceled"})]

    again = owner.client.post(f"/public/v1/calls/{ringing}/hang-up")
    assert again.status_code == 409 and again.json()["code"] == "CALL_ENDED"


def test_hang_up_of_a_live_phone_call_reaches_the_carrier(owner: Any, ava: Any, twilio_api: LoopbackReceiver) -> None:
    sid = "CA" + "9" * 32
    call = call_start(agent=ava, channel="phone", from_number=CALLEE, to_number=NUMBER, provider_call_id=sid)
    twilio_api.reply(Reply(json={"sid": sid, "status": "completed"}))
    response = owner.client.post(f"/public/v1/calls/{call.pk}/hang-up")
    assert response.status_code == 200 and response.json()["status"] == "active"  # its session ends it
    assert call_updates(twilio_api.requests) == [(sid, {"Status": "completed"})]


def test_hang_up_of_another_organizations_call_is_a_404(
    owner: Any, outsider: Any, ava: Any, twilio_api: LoopbackReceiver
) -> None:
    call_id = _place(owner, ava).json()["id"]
    assert outsider.client.post(f"/public/v1/calls/{call_id}/hang-up").status_code == 404
    assert outsider.client.post("/public/v1/calls/not-a-uuid/hang-up").status_code == 400
    assert Call.objects.get(pk=call_id).status == "queued"


# --- the sweep -------------------------------------------------------------------------------------


def test_calls_placed_without_news_from_the_carrier_are_failed_by_the_sweep(
    owner: Any, ava: Any, twilio_api: LoopbackReceiver
) -> None:
    twilio_api.reply(call_created(), call_created())
    ids = [_place(owner, ava).json()["id"] for _ in range(2)]
    outbound_dispatch()
    OutboundCall.objects.filter(pk=ids[0]).update(placed_at=timezone.now() - timedelta(hours=1))
    waiting = _place(owner, ava).json()["id"]  # queued, never placed: not the sweep's

    assert outbound_close_stuck() == 1
    statuses = dict(Call.objects.values_list("pk", "status"))
    assert statuses[Call.objects.get(pk=ids[0]).pk] == CallStatus.FAILED
    assert Call.objects.get(pk=ids[0]).ended_reason == "provider-error"
    assert statuses[Call.objects.get(pk=ids[1]).pk] == "ringing"
    assert (
        Call.objects.get(pk=waiting).direction == CallDirection.OUTBOUND
        and statuses[Call.objects.get(pk=waiting).pk] == "queued"
    )


def test_a_call_whose_agent_stopped_while_it_waited_is_never_placed(
    owner: Any, ava: Any, twilio_api: LoopbackReceiver
) -> None:
    call_id = _place(owner, ava).json()["id"]
    type(ava).objects.filter(pk=ava.pk).update(status=AgentStatus.INACTIVE)
    assert outbound_dispatch() == 1
    call = Call.objects.get(pk=call_id)
    assert (call.status, call.ended_reason) == ("failed", "error") and not twilio_api.requests


def test_without_public_base_url_the_service_cannot_place_calls(
    owner: Any, ava: Any, twilio_api: LoopbackReceiver, settings: Any
) -> None:
    settings.PUBLIC_BASE_URL = ""
    response = _place(owner, ava)
    assert response.status_code == 503 and response.json()["code"] == "TELEPHONY_NOT_CONFIGURED"
    assert not Call.objects.exists()


def test_a_malformed_body_is_a_400_before_the_configuration_is_checked(
    owner: Any, ava: Any, twilio_api: LoopbackReceiver, settings: Any
) -> None:
    """Schemathesis found a malformed body answered 503 TELEPHONY_NOT_CONFIGURED: the body is checked first
    (400, with the contract's error shape), the service's configuration after."""
    settings.PUBLIC_BASE_URL = ""
    base = {"agentId": str(ava.pk), "phoneNumberId": str(ava.number.pk), "to": CALLEE}
    cases = [
        ({}, "agentId"),
        ({**base, "agentId": 5}, "agentId"),
        ({**base, "agentId": "not-a-uuid"}, "agent"),
        ({k: v for k, v in base.items() if k != "phoneNumberId"}, "phoneNumberId"),
        ({**base, "phoneNumberId": "nope"}, "phoneNumber"),
        ({**base, "to": None}, "to"),
        ({**base, "to": "0041 44 668 18 00"}, "to"),
        ({**base, "variables": "x"}, "variables"),
        ({**base, "metadata": {"blob": "x" * 20000}}, "metadata"),
    ]
    for body, field in cases:
        response = owner.client.post("/public/v1/calls", body, format="json")
        assert response.status_code == 400, (body, response.json())
        answer = response.json()
        assert isinstance(answer["error"], str) and answer["error"], body
        assert set(answer) <= {"error", "code", "issues"} and list(answer["issues"]) == [field], (body, answer)
    # The same on a plan without outbound calls: the body first, then the plan.
    Plan.objects.filter(pk=owner.organization.plan_id).update(max_outbound_calls=0)
    assert owner.client.post("/public/v1/calls", {}, format="json").status_code == 400
    assert _place(owner, ava).status_code == 403
    Plan.objects.filter(pk=owner.organization.plan_id).update(max_outbound_calls=None)
    # A well-formed body: then the configuration.
    response = _place(owner, ava)
    assert response.status_code == 503 and response.json()["code"] == "TELEPHONY_NOT_CONFIGURED"
    assert not Call.objects.exists() and not twilio_api.requests


@pytest.mark.django_db(transaction=True)
def test_with_celery_a_worker_places_the_call_queued_on_commit(
    owner: Any, ava: Any, twilio_api: LoopbackReceiver, settings: Any
) -> None:
    """BACKGROUND_WORK=celery: the commit of POST /calls sends telephony.dispatch_outbound to the broker
    (Redis with REDIS_URL, Celery's in-memory transport otherwise) and a real worker places the call."""
    from celery.contrib.testing.worker import start_worker

    from voiceagent.celery import app

    assert settings.CELERY_BEAT_SCHEDULE["telephony-dispatch-outbound"]["task"] == "telephony.dispatch_outbound"
    settings.BACKGROUND_WORK = "celery"
    app.conf.task_always_eager = False
    try:
        twilio_api.reply(call_created("CA" + "c" * 32))
        call_id = _place(owner, ava).json()["id"]
        assert Call.objects.get(pk=call_id).status == "queued"  # on the broker: no worker yet
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
            polled_sync(
                lambda: Call.objects.get(pk=call_id).status == "ringing", what="the worker placing the call", timeout=60
            )
    finally:
        app.conf.task_always_eager = True
    assert len(created_calls(twilio_api.requests)) == 1
    assert Call.objects.get(pk=call_id).provider_call_id == "CA" + "c" * 32
