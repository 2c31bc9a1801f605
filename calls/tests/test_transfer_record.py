"""What the call record keeps of a transfer to a person (issue 39): the engine's write
(`calls.services.call_transfer_update`) seen through the public API (the call detail's `transfer`, and so every
call event's body), the `call.transfer.started` and `call.transfer.ended` events delivered to webhooks and the
agent's serverUrl in their place between call.started and call.ended, the values the write refuses, nothing
written once the call has ended, and the dashboard's call page showing the transfer's line.

Deliveries are sent by Celery beat's task (calls.deliver_due_events, eager in the tests), as often as it
takes, to receivers on loopback (testing/webhooks.py); retries come after EVENTS_RETRY_BASE_SECONDS (20 ms
here), waited for with `polled_sync`, never a sleep."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone

from calls import services
from calls.models import Call, CallEvent
from calls.tasks import deliver_due_events
from kit.fields import iso
from testing.waiting import polled_sync
from testing.webhooks import LoopbackReceiver, Received, Reply, allow_loopback_fixture, receivers_fixture

__all__ = ["allow_loopback_fixture", "receivers_fixture"]  # fixtures

pytestmark = pytest.mark.django_db

PERSON = "+14155550142"
TRANSFER_EVENTS = ["call.started", "call.transfer.started", "call.transfer.ended", "call.ended"]
AGENT_SECRET = "whsec-transfer-agent-4Kp"


@pytest.fixture
def desk(owner: Any, make_agent: Any) -> Any:
    return make_agent(owner.organization, name="Front desk", status="active", agent_type="static", server_url=None)


@pytest.fixture
def quick_retries(settings: Any) -> Any:
    """Retries after 20 ms, 40 ms... (EVENTS_RETRY_BASE_SECONDS; 30 s by default)."""
    settings.EVENTS_RETRY_BASE_SECONDS = 0.02
    return settings


def detail(owner: Any, call: Call) -> dict[str, Any]:
    response = owner.client.get(f"/public/v1/calls/{call.pk}")
    assert response.status_code == 200, response.json()
    return response.json()


def phone_call(agent: Any) -> Call:
    return services.call_start(
        agent=agent, channel="phone", from_number="+14155550100", to_number="+14155550199", provider_call_id="CA1"
    )


def warm_transfer(agent: Any, outcome: str) -> tuple[Call, datetime, datetime]:
    """A call as the engine records a warm transfer: the caller asks for a person, the person's phone rings
    with the briefing, then the outcome. Returns the call and the times of the two states."""
    call = phone_call(agent)
    services.call_message_add(call=call, role="user", content="Can I speak to a person, please?")
    services.call_message_add(call=call, role="assistant", content="Of course, let me get someone for you.")
    rang = timezone.now()
    services.call_transfer_update(call=call, mode="warm", destination=PERSON, status="ringing", at=rang)
    ended = rang + timedelta(seconds=12)
    services.call_transfer_update(call=call, mode="warm", destination=PERSON, status=outcome, at=ended)
    return call, rang, ended


# --- the call detail -------------------------------------------------------------------------------------


def test_the_call_detail_shows_the_transfer_as_it_stands(owner, desk):
    call = phone_call(desk)
    rang = timezone.now()
    services.call_transfer_update(call=call, mode="warm", destination=PERSON, status="ringing", at=rang)

    ringing = {"mode": "warm", "destination": PERSON, "status": "ringing", "at": iso(rang)}
    assert detail(owner, call)["transfer"] == ringing
    assert call.transfer == ringing  # the engine's call object follows the stored state

    declined_at = rang + timedelta(seconds=20)
    services.call_transfer_update(call=call, mode="warm", destination=PERSON, status="declined", at=declined_at)

    body = detail(owner, call)
    assert body["transfer"] == {"mode": "warm", "destination": PERSON, "status": "declined", "at": iso(declined_at)}
    assert body["status"] == "active"  # the caller is back with the agent
    # The list of calls stays a summary.
    [item] = owner.client.get("/public/v1/calls").json()
    assert "transfer" not in item


def test_a_call_never_transferred_shows_null(owner, desk):
    call = services.call_start(agent=desk, channel="web")
    services.call_message_add(call=call, role="assistant", content="Hello.")
    assert detail(owner, call)["transfer"] is None
    services.call_finish(call=call, status="completed")
    assert detail(owner, call)["transfer"] is None


def test_a_cold_transfer_taken_by_the_carrier_ends_the_call_transferred_with_its_record(owner, desk):
    call = phone_call(desk)
    at = timezone.now()

    services.call_transfer_update(call=call, mode="cold", destination=PERSON, status="accepted", at=at)
    services.call_finish(call=call, status="completed", ended_reason="transferred")

    body = detail(owner, call)
    assert body["transfer"] == {"mode": "cold", "destination": PERSON, "status": "accepted", "at": iso(at)}
    assert body["endedReason"] == "transferred"


def test_a_later_attempt_replaces_the_earlier_one(owner, desk):
    call, _, _ = warm_transfer(desk, "no-answer")
    second = timezone.now() + timedelta(minutes=1)

    services.call_transfer_update(call=call, mode="warm", destination="+442071838750", status="ringing", at=second)

    assert detail(owner, call)["transfer"] == {
        "mode": "warm",
        "destination": "+442071838750",
        "status": "ringing",
        "at": iso(second),
    }


# --- the write's rules -----------------------------------------------------------------------------------


def test_a_finished_call_keeps_the_transfer_it_ended_with_and_sends_nothing_more(owner, desk):
    subscribe(owner, "https://crm.example.com/transfers", TRANSFER_EVENTS)
    call, _, ended = warm_transfer(desk, "accepted")
    services.call_finish(call=call, status="completed", ended_reason="transferred")
    recorded = list(CallEvent.objects.filter(call=call).order_by("created_at").values_list("event_type", flat=True))
    assert recorded == TRANSFER_EVENTS

    services.call_transfer_update(call=call, mode="warm", destination=PERSON, status="failed", at=timezone.now())

    accepted = {"mode": "warm", "destination": PERSON, "status": "accepted", "at": iso(ended)}
    assert detail(owner, call)["transfer"] == accepted
    assert call.transfer == accepted
    assert CallEvent.objects.filter(call=call).count() == len(recorded)
    # A call that ended before any transfer stays without one.
    plain = phone_call(desk)
    services.call_finish(call=plain, status="completed")
    services.call_transfer_update(call=plain, mode="cold", destination=PERSON, status="accepted", at=timezone.now())
    assert detail(owner, plain)["transfer"] is None
    assert list(CallEvent.objects.filter(call=plain).values_list("event_type", flat=True)) == [
        "call.started",
        "call.ended",
    ]


NOW = datetime(2026, 11, 30, 5, 14, 2, tzinfo=timezone.get_fixed_timezone(0))


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"mode": "blind"}, "mode must be one of cold, warm"),
        ({"mode": None}, "mode must be one of"),
        ({"status": "busy"}, "status must be one of ringing, accepted, declined, no-answer, failed"),
        ({"mode": "cold", "status": "ringing"}, "a cold transfer's status is one of accepted, failed"),
        ({"mode": "cold", "status": "declined"}, "a cold transfer's status is one of accepted, failed"),
        ({"mode": "cold", "status": "no-answer"}, "a cold transfer's status is one of accepted, failed"),
        ({"destination": "4155550142"}, "E.164"),
        ({"destination": "+1 415 555 0142"}, "E.164"),
        ({"destination": "+04155550142"}, "E.164"),
        ({"destination": "+1415555014212345"}, "E.164"),
        ({"destination": "sip:desk@pbx.example.com"}, "E.164"),
        ({"destination": None}, "E.164"),
        ({"at": "2026-11-30T05:14:02Z"}, "timezone-aware datetime"),
        ({"at": datetime(2026, 11, 30, 5, 14, 2)}, "timezone-aware datetime"),  # naive
    ],
)
def test_values_that_are_no_transfer_are_refused(owner, desk, changes, says):
    call = phone_call(desk)
    arguments = {"mode": "warm", "destination": PERSON, "status": "ringing", "at": NOW, **changes}

    with pytest.raises(ValueError, match=says):
        services.call_transfer_update(call=call, **arguments)

    assert Call.objects.get(pk=call.pk).transfer is None
    assert detail(owner, call)["transfer"] is None


def test_each_mode_takes_its_own_statuses(owner, desk):
    call = phone_call(desk)
    for status in ("accepted", "failed"):
        services.call_transfer_update(call=call, mode="cold", destination=PERSON, status=status, at=NOW)
        assert detail(owner, call)["transfer"]["status"] == status
    for status in ("ringing", "accepted", "declined", "no-answer", "failed"):
        services.call_transfer_update(call=call, mode="warm", destination=PERSON, status=status, at=NOW)
        assert detail(owner, call)["transfer"] == {
            "mode": "warm",
            "destination": PERSON,
            "status": status,
            "at": iso(NOW),
        }


# --- the call.transfer.* events ---------------------------------------------------------------------------


def deliver_until(predicate: Callable[[], Any], *, what: str) -> Any:
    """Send what is due (Celery beat's task, eager here) until `predicate()` holds: its value."""

    def check() -> Any:
        deliver_due_events.delay().get()
        return predicate()

    return polled_sync(check, what=what, timeout=30)


def signed(received: Received, secret: str) -> bool:
    expected = "sha256=" + hmac.new(secret.encode(), received.body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(received.headers.get("x-service-signature", ""), expected)


def subscribe(owner: Any, url: str, events: list[str]) -> dict[str, Any]:
    response = owner.client.post("/public/v1/webhooks", {"url": url, "events": events}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


@pytest.mark.django_db(transaction=True)  # the end's analysis and its call.analyzed come after the commit
@pytest.mark.usefixtures("allow_loopback", "quick_retries")
def test_transfer_events_arrive_signed_between_started_and_ended_in_order(
    owner, make_agent, receivers: Callable[..., LoopbackReceiver]
):
    agent_hook, outcomes_hook = receivers(), receivers()
    # The webhook's call.transfer.started meets a 503 first: the outcome and the end wait for its retry.
    org_hook = receivers().reply(Reply(status=200), Reply(status=503, body="busy"))
    front = make_agent(
        owner.organization,
        name="Front",
        status="active",
        agent_type="webhook",
        server_url=agent_hook.url(),
        server_secret=AGENT_SECRET,
    )
    org = subscribe(owner, org_hook.url(), TRANSFER_EVENTS)
    assert org["events"] == TRANSFER_EVENTS
    subscribe(owner, outcomes_hook.url(), ["call.transfer.ended"])

    call, rang, accepted_at = warm_transfer(front, "accepted")
    services.call_finish(call=call, status="completed", ended_reason="transferred")

    deliver_until(
        lambda: len(agent_hook.requests) == 5 and len(org_hook.requests) == 5 and len(outcomes_hook.requests) == 1,
        what="every event at each target",
    )

    def sent(hook: LoopbackReceiver) -> list[tuple[str, str]]:
        return [(r.json()["message"]["type"], r.headers["x-service-attempt"]) for r in hook.requests]

    assert sent(org_hook) == [
        ("call.started", "1"),
        ("call.transfer.started", "1"),
        ("call.transfer.started", "2"),  # the same event again, before anything later
        ("call.transfer.ended", "1"),
        ("call.ended", "1"),
    ]
    assert org_hook.requests[1].body == org_hook.requests[2].body
    assert sent(agent_hook) == [
        ("call.started", "1"),
        ("call.transfer.started", "1"),
        ("call.transfer.ended", "1"),
        ("call.ended", "1"),
        ("call.analyzed", "1"),
    ]
    # A webhook that subscribed to the outcome alone gets it alone.
    assert sent(outcomes_hook) == [("call.transfer.ended", "1")]

    ringing = {"mode": "warm", "destination": PERSON, "status": "ringing", "at": iso(rang)}
    accepted = {"mode": "warm", "destination": PERSON, "status": "accepted", "at": iso(accepted_at)}
    for hook, secret in ((agent_hook, AGENT_SECRET), (org_hook, org["secret"])):
        messages = [r.json()["message"] for r in hook.requests]
        for received, message in zip(hook.requests, messages, strict=True):
            assert signed(received, secret)
            assert received.headers["x-service-event-id"] == message["id"]
        by_type = {m["type"]: m for m in messages}
        started, ended = by_type["call.transfer.started"], by_type["call.transfer.ended"]
        # The message's transfer, and the call as GET /public/v1/calls/{id} showed it then: still active.
        assert started["transfer"] == started["call"]["transfer"] == ringing
        assert ended["transfer"] == ended["call"]["transfer"] == accepted
        assert {started["call"]["status"], ended["call"]["status"]} == {"active"}
        assert started["call"]["messages"][-1]["content"] == "Of course, let me get someone for you."
        assert by_type["call.started"]["call"]["transfer"] is None
        assert by_type["call.ended"]["call"]["transfer"] == accepted
        assert by_type["call.ended"]["call"]["endedReason"] == "transferred"
        assert "transfer" not in by_type["call.ended"] and "transfer" not in by_type["call.started"]
    outcome = outcomes_hook.requests[0].json()["message"]
    assert outcome["transfer"] == accepted
    stored = CallEvent.objects.filter(call=call).order_by("created_at").values_list("event_type", flat=True)
    assert list(stored) == [*TRANSFER_EVENTS, "call.analyzed"]
    assert (
        json.loads(CallEvent.objects.get(call=call, event_type="call.transfer.ended").body)["message"]["transfer"]
        == accepted
    )


def test_a_webhook_may_subscribe_to_the_transfer_events_and_the_schema_lists_them(owner):
    created = subscribe(owner, "https://crm.example.com/transfers", ["call.transfer.ended"])
    assert created["events"] == ["call.transfer.ended"]
    changed = owner.client.patch(
        f"/public/v1/webhooks/{created['id']}",
        {"events": ["call.ended", "call.transfer.ended", "call.transfer.started", "call.handoff"]},
        format="json",
    )
    assert changed.status_code == 200, changed.json()
    assert changed.json()["events"] == ["call.handoff", "call.transfer.started", "call.transfer.ended", "call.ended"]
    refused = owner.client.patch(f"/public/v1/webhooks/{created['id']}", {"events": ["call.transfer"]}, format="json")
    assert refused.status_code == 400

    schema = owner.client.get("/public/v1/openapi.json").json()["components"]["schemas"]
    assert schema["EventTypeEnum"]["enum"] == [
        "call.started",
        "call.handoff",
        "call.transfer.started",
        "call.transfer.ended",
        "call.ended",
        "call.analyzed",
        "budget.threshold",
    ]
    detail_schema = schema["CallDetailSchema"]
    assert "transfer" in detail_schema["required"]
    assert detail_schema["properties"]["transfer"]["oneOf"] == [
        {"$ref": "#/components/schemas/CallTransferSchema"},
        {"type": "null"},
    ]
    shape = schema["CallTransferSchema"]
    assert sorted(shape["required"]) == ["at", "destination", "mode", "status"]
    enum = {name: schema[f"CallTransferSchema{name.capitalize()}Enum"]["enum"] for name in ("mode", "status")}
    assert enum == {"mode": ["cold", "warm"], "status": ["ringing", "accepted", "declined", "no-answer", "failed"]}
    assert "transfer" not in schema["CallSummarySchema"]["properties"]


# --- the dashboard's call page ---------------------------------------------------------------------------


@pytest.fixture
def superuser_client(client: Any) -> Any:
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


@pytest.fixture
def viewer_client(client: Any) -> Any:
    """Staff who may see calls but not what was said in them."""
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_call"))
    client.force_login(user)
    return client


def page(client: Any, call: Call) -> str:
    response = client.get(f"/admin/calls/call/{call.pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


def section(shown: str) -> str:
    start = shown.index('<fieldset class="module transfer">')
    return shown[start : shown.index("</fieldset>", start)]


def test_the_call_page_shows_the_transfer_line(superuser_client, desk):
    call = phone_call(desk)
    at = call.started_at + timedelta(seconds=42.1)
    services.call_transfer_update(call=call, mode="warm", destination=PERSON, status="accepted", at=at)
    services.call_finish(call=call, status="completed", ended_reason="transferred")

    transfer = section(page(superuser_client, call))

    assert "<h2>Transfer</h2>" in transfer
    assert (
        f'<p class="transfer-line">Warm transfer to {PERSON}: <span class="status-accepted">accepted</span> at '
        "+0:42.1 (the person pressed 1 and was joined with the caller)</p>"
    ) in transfer


def test_staff_without_the_transcript_permission_see_the_line_too(viewer_client, desk):
    call = phone_call(desk)
    services.call_transfer_update(
        call=call, mode="cold", destination=PERSON, status="failed", at=call.started_at + timedelta(seconds=5)
    )

    transfer = section(page(viewer_client, call))

    assert f"Cold transfer to {PERSON}: " in transfer
    assert '<span class="status-failed">failed</span> at +0:05.0 (the carrier refused the request' in transfer


def test_a_call_never_transferred_has_no_transfer_section(superuser_client, desk):
    call = phone_call(desk)
    services.call_message_add(call=call, role="assistant", content="Hello.")

    shown = page(superuser_client, call)

    assert 'class="module transfer"' not in shown and "<h2>Transfer</h2>" not in shown
