"""What the call record keeps of handoffs between agents (issue 39): the engine's writes
(`calls.services.call_handoff_add`, `call_message_add(agent_id=...)`) seen through the public API (the call's
`handoffs` and each message's `agentId`), the `call.handoff` event delivered to webhooks and the agent's
serverUrl in its place between call.started and call.ended, the reason redacted like the transcript, the
call counted once for the agent that answered it, and the dashboard's call page naming who spoke when.

Deliveries are sent by Celery beat's task (calls.deliver_due_events, eager in the tests), as often as it
takes, to receivers on loopback (testing/webhooks.py); retries come after EVENTS_RETRY_BASE_SECONDS (20 ms
here), waited for with `polled_sync`, never a sleep."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from calls import services
from calls.models import Call, CallEvent, CallHandoff, CallMessage
from calls.tasks import deliver_due_events
from kit.fields import iso
from testing.waiting import polled_sync
from testing.webhooks import LoopbackReceiver, Received, Reply, allow_loopback_fixture, receivers_fixture

__all__ = ["allow_loopback_fixture", "receivers_fixture"]  # fixtures

ALL_EVENTS = ["call.started", "call.handoff", "call.ended", "call.analyzed"]
AGENT_SECRET = "whsec-handoff-agent-7Qz"


@pytest.fixture
def reception(owner: Any, make_agent: Any) -> Any:
    return make_agent(owner.organization, name="Reception", status="active", agent_type="static", server_url=None)


@pytest.fixture
def billing(owner: Any, make_agent: Any) -> Any:
    return make_agent(owner.organization, name="Billing", status="active", agent_type="static", server_url=None)


@pytest.fixture
def quick_retries(settings: Any) -> Any:
    """Retries after 20 ms, 40 ms... (EVENTS_RETRY_BASE_SECONDS; 30 s by default)."""
    settings.EVENTS_RETRY_BASE_SECONDS = 0.02
    return settings


def handed_call(first: Any, second: Any, *, reason: str = "The caller asks about a bill.") -> tuple[Call, Any]:
    """A call as the engine records a handoff: the first agent greets, the caller asks, the call passes to
    the second agent, which answers. Returns the call and the handoff's time."""
    call = services.call_start(agent=first, channel="web")
    services.call_message_add(call=call, role="assistant", content="Hello, reception here.", agent_id=first.pk)
    services.call_message_add(call=call, role="user", content="I have a question about my bill.")
    at = timezone.now()
    services.call_handoff_add(call=call, from_agent_id=first.pk, to_agent_id=second.pk, reason=reason, at=at)
    services.call_message_add(call=call, role="assistant", content="Billing here, how can I help?", agent_id=second.pk)
    return call, at


def detail(owner: Any, call: Call) -> dict[str, Any]:
    response = owner.client.get(f"/public/v1/calls/{call.pk}")
    assert response.status_code == 200, response.json()
    return response.json()


# --- the call detail -------------------------------------------------------------------------------------


def test_the_call_detail_lists_the_handoffs_and_the_agent_of_each_message(owner, reception, billing):
    call, at = handed_call(reception, billing)
    # A message stored without an agent (as before handoffs existed), and a system note.
    services.call_message_add(call=call, role="assistant", content="Anything else?")
    services.call_message_add(call=call, role="system", content="The caller was put on hold.")

    body = detail(owner, call)

    assert body["agentId"] == str(reception.pk) and body["agentName"] == "Reception"  # the answering agent
    assert body["handoffs"] == [
        {
            "fromAgentId": str(reception.pk),
            "toAgentId": str(billing.pk),
            "at": iso(at),
            "reason": "The caller asks about a bill.",
        }
    ]
    assert [(m["role"], m["agentId"]) for m in body["messages"]] == [
        ("assistant", str(reception.pk)),
        ("user", None),
        ("assistant", str(billing.pk)),
        ("assistant", str(reception.pk)),  # none stored: the call's agent
        ("system", None),
    ]


def test_a_call_without_handoffs_has_an_empty_list_and_the_list_of_calls_is_unchanged(owner, reception):
    call = services.call_start(agent=reception, channel="web")
    services.call_message_add(call=call, role="assistant", content="Hello.", agent_id=reception.pk)

    body = detail(owner, call)
    assert body["handoffs"] == []
    assert body["messages"][0]["agentId"] == str(reception.pk)
    [item] = owner.client.get("/public/v1/calls").json()
    assert "handoffs" not in item and "messages" not in item


def test_handoffs_keep_their_order_and_outlive_a_deleted_agent(owner, reception, billing, make_agent):
    call, first_at = handed_call(reception, billing)
    payments = make_agent(owner.organization, name="Payments", status="active")
    later = first_at + timedelta(seconds=30)
    services.call_handoff_add(call=call, from_agent_id=billing.pk, to_agent_id=payments.pk, reason="", at=later)
    services.call_message_add(call=call, role="assistant", content="Payments speaking.", agent_id=payments.pk)
    payments_id = str(payments.pk)
    payments.delete()

    body = detail(owner, call)

    assert [(h["fromAgentId"], h["toAgentId"], h["at"]) for h in body["handoffs"]] == [
        (str(reception.pk), str(billing.pk), iso(first_at)),
        (str(billing.pk), payments_id, iso(later)),  # the id stays once the agent is deleted
    ]
    assert body["handoffs"][1]["reason"] == ""
    assert body["messages"][-1]["agentId"] == payments_id  # never taken for the call's agent


def test_the_call_detail_reads_a_fixed_number_of_queries_whatever_the_handoffs(owner, reception, billing):
    call, at = handed_call(reception, billing)
    detail(owner, call)  # the key's first use of the test also records last_used_at
    with CaptureQueriesContext(connection) as few:
        detail(owner, call)
    for number in range(1, 6):
        services.call_handoff_add(
            call=call, from_agent_id=billing.pk, to_agent_id=reception.pk, reason="back", at=at + timedelta(number)
        )
        services.call_message_add(call=call, role="assistant", content=f"Turn {number}", agent_id=reception.pk)
    with CaptureQueriesContext(connection) as many:
        body = detail(owner, call)

    assert len(body["handoffs"]) == 6 and len(body["messages"]) == 8
    assert len(many) == len(few)


# --- the writes' rules ---------------------------------------------------------------------------------


def test_a_handoff_after_the_end_of_the_call_is_not_recorded(owner, reception, billing):
    call = services.call_start(agent=reception, channel="web")
    services.call_finish(call=call, status="completed")

    handoff = services.call_handoff_add(
        call=call, from_agent_id=reception.pk, to_agent_id=billing.pk, reason="too late", at=timezone.now()
    )

    assert handoff is None
    assert not CallHandoff.objects.filter(call=call).exists()
    assert detail(owner, call)["handoffs"] == []


def test_a_handoff_to_an_agent_of_another_organization_is_refused(owner, outsider, reception, make_agent):
    stranger = make_agent(outsider.organization, name="Elsewhere", status="active")
    call = services.call_start(agent=reception, channel="web")

    with pytest.raises(ValueError, match="organization"):
        services.call_handoff_add(
            call=call, from_agent_id=reception.pk, to_agent_id=stranger.pk, reason="", at=timezone.now()
        )
    with pytest.raises(ValueError, match="agent_id"):
        services.call_message_add(call=call, role="user", content="Hi", agent_id=reception.pk)
    with pytest.raises(ValueError, match="agent's id"):
        services.call_handoff_add(
            call=call, from_agent_id=reception.pk, to_agent_id="billing", reason="", at=timezone.now()
        )
    assert not CallHandoff.objects.exists()


def test_the_reason_is_redacted_like_the_transcript_and_cut_to_500_characters(owner, make_agent, billing):
    careful = make_agent(
        owner.organization,
        name="Careful",
        status="active",
        agent_type="static",
        server_url=None,
        redact_pii=["phone_number"],
    )
    call, _ = handed_call(careful, billing, reason="The caller at +1 415 555 0100 asks about a bill.")
    services.call_handoff_add(
        call=call, from_agent_id=billing.pk, to_agent_id=careful.pk, reason="x" * 600, at=timezone.now()
    )

    first, second = detail(owner, call)["handoffs"]
    assert first["reason"] == "The caller at [PHONE_NUMBER] asks about a bill."
    assert second["reason"] == "x" * 500
    assert CallMessage.objects.filter(call=call, content__contains="555").count() == 0


# --- counted once, for the agent that answered ------------------------------------------------------------


def test_the_call_counts_once_for_the_agent_that_answered_it(owner, reception, billing):
    call, _ = handed_call(reception, billing)
    services.call_finish(call=call, status="completed")

    agents = {item["name"]: item for item in owner.client.get("/public/v1/agents").json()}
    assert agents["Reception"]["callsToday"] == 1 and agents["Reception"]["successRate"] == 100.0
    assert agents["Billing"]["callsToday"] == 0 and agents["Billing"]["successRate"] == 0.0
    assert [c["id"] for c in owner.client.get("/public/v1/calls").json()] == [str(call.pk)]
    assert owner.client.get(f"/public/v1/calls?agentId={billing.pk}").json() == []
    [listed] = owner.client.get(f"/public/v1/calls?agentId={reception.pk}").json()
    assert listed["agentId"] == str(reception.pk)
    assert Call.objects.filter(organization=owner.organization).count() == 1  # one record, billed once


# --- the call.handoff event ------------------------------------------------------------------------------


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
def test_call_handoff_events_arrive_signed_between_started_and_ended_in_order(
    owner, make_agent, billing, receivers: Callable[..., LoopbackReceiver]
):
    agent_hook, ends_hook = receivers(), receivers()
    # The webhook's first handoff meets a 503: the second handoff and the end wait for its retry.
    org_hook = receivers().reply(Reply(status=200), Reply(status=503, body="busy"))
    front = make_agent(
        owner.organization,
        name="Front",
        status="active",
        agent_type="webhook",
        server_url=agent_hook.url(),
        server_secret=AGENT_SECRET,
    )
    org = subscribe(owner, org_hook.url(), ALL_EVENTS)
    assert org["events"] == ALL_EVENTS
    subscribe(owner, ends_hook.url(), ["call.started", "call.ended"])

    call, at = handed_call(front, billing, reason="Billing question")
    back_at = at + timedelta(seconds=20)
    services.call_handoff_add(call=call, from_agent_id=billing.pk, to_agent_id=front.pk, reason="Done", at=back_at)
    services.call_finish(call=call, status="completed")

    deliver_until(
        lambda: len(agent_hook.requests) == 5 and len(org_hook.requests) == 6 and len(ends_hook.requests) == 2,
        what="every event at each target",
    )

    def sent(hook: LoopbackReceiver) -> list[tuple[str, str]]:
        return [(r.json()["message"]["type"], r.headers["x-service-attempt"]) for r in hook.requests]

    assert sent(org_hook) == [
        ("call.started", "1"),
        ("call.handoff", "1"),
        ("call.handoff", "2"),  # the same event again, before anything later
        ("call.handoff", "1"),
        ("call.ended", "1"),
        ("call.analyzed", "1"),
    ]
    assert org_hook.requests[1].body == org_hook.requests[2].body
    assert sent(agent_hook) == [
        ("call.started", "1"),
        ("call.handoff", "1"),
        ("call.handoff", "1"),
        ("call.ended", "1"),
        ("call.analyzed", "1"),
    ]
    # A webhook that did not subscribe to call.handoff gets none.
    assert sent(ends_hook) == [("call.started", "1"), ("call.ended", "1")]

    for hook, secret in ((agent_hook, AGENT_SECRET), (org_hook, org["secret"])):
        messages = [r.json()["message"] for r in hook.requests]
        for received, message in zip(hook.requests, messages, strict=True):
            assert signed(received, secret)
            assert received.headers["x-service-event-id"] == message["id"]
        handoffs = list({m["id"]: m for m in messages if m["type"] == "call.handoff"}.values())
        assert [m["handoff"] for m in handoffs] == [
            {"fromAgentId": str(front.pk), "toAgentId": str(billing.pk), "at": iso(at), "reason": "Billing question"},
            {"fromAgentId": str(billing.pk), "toAgentId": str(front.pk), "at": iso(back_at), "reason": "Done"},
        ]
        # The call as GET /public/v1/calls/{id} showed it then: active, still the answering agent's, with the
        # handoffs so far and the transcript up to the handoff.
        assert [len(m["call"]["handoffs"]) for m in handoffs] == [1, 2]
        assert {(m["call"]["status"], m["call"]["agentId"]) for m in handoffs} == {("active", str(front.pk))}
        assert handoffs[0]["call"]["messages"][-1]["content"] == "I have a question about my bill."
        assert handoffs[1]["call"]["messages"][-1]["agentId"] == str(billing.pk)
        [ended] = [m for m in messages if m["type"] == "call.ended"]
        assert [h["toAgentId"] for h in ended["call"]["handoffs"]] == [str(billing.pk), str(front.pk)]
        assert "handoff" not in ended
    stored = CallEvent.objects.filter(call=call).order_by("created_at").values_list("event_type", flat=True)
    assert list(stored) == ["call.started", "call.handoff", "call.handoff", "call.ended", "call.analyzed"]


def test_a_webhook_may_subscribe_to_call_handoff_alone(owner):
    created = subscribe(owner, "https://crm.example.com/handoffs", ["call.handoff"])
    assert created["events"] == ["call.handoff"]
    changed = owner.client.patch(
        f"/public/v1/webhooks/{created['id']}", {"events": ["call.ended", "call.handoff"]}, format="json"
    )
    assert changed.status_code == 200 and changed.json()["events"] == ["call.handoff", "call.ended"]


# --- the dashboard's call page ---------------------------------------------------------------------------


@pytest.fixture
def superuser_client(client: Any, db: Any) -> Any:
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


@pytest.fixture
def viewer_client(client: Any, db: Any) -> Any:
    """Staff who may see calls but not what was said in them."""
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_call"))
    client.force_login(user)
    return client


def page(client: Any, call: Call) -> str:
    response = client.get(f"/admin/calls/call/{call.pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


def test_the_call_page_names_who_spoke_and_lists_the_handoffs(superuser_client, reception, billing):
    call, _ = handed_call(reception, billing, reason="Billing <question>")
    services.call_finish(call=call, status="completed")

    shown = page(superuser_client, call)

    assert '<span class="meta">Agent · <span class="speaker">Reception</span> · +' in shown
    assert '<span class="meta">Agent · <span class="speaker">Billing</span> · +' in shown
    assert shown.index("Hello, reception here.") < shown.index("Billing here, how can I help?")
    assert "Handoffs (1)" in shown
    row = shown[shown.index("Handoffs (1)") : shown.index("</table>", shown.index("Handoffs (1)"))]
    assert "<td>Reception</td><td>Billing</td>" in row
    assert '<td class="reason">Billing &lt;question&gt;</td>' in row  # escaped
    svg = shown[shown.index('<svg class="call-timeline"') : shown.index("</svg>", shown.index("call-timeline"))]
    assert svg.count('<g class="handoff">') == 1 and ": Reception to Billing</title>" in svg
    assert "1 handoff" in svg


def test_without_the_transcript_permission_the_handoffs_show_without_their_reason(viewer_client, reception, billing):
    call, _ = handed_call(reception, billing, reason="The caller's bill is wrong")

    shown = page(viewer_client, call)

    assert "Handoffs (1)" in shown and "<td>Reception</td><td>Billing</td>" in shown
    assert "bill is wrong" not in shown and "Billing here" not in shown


def test_a_call_without_handoffs_keeps_its_page(superuser_client, reception):
    call = services.call_start(agent=reception, channel="web")
    services.call_message_add(call=call, role="assistant", content="Hello.", agent_id=reception.pk)

    shown = page(superuser_client, call)

    assert "Handoffs (" not in shown and 'class="speaker"' not in shown
    assert '<span class="meta">Agent · +' in shown
