"""Budgets (issue 40, calls/budgets/): /public/v1/budgets through the REST API, what a budget has spent in its
UTC period, the `budget.threshold` events at 80% and 100% (once each per period, delivered signed to a
webhook), and what a spent `block` budget refuses: a realtime session and an outbound call (402
BUDGET_EXCEEDED naming it), a phone call to its agent (a spoken sorry), the next call of a campaign (the
campaign pauses) and a queued call whose turn comes (not placed). A live call is never cut.

The calls here are rows with their cost set (testing/factories.py) and the thresholds are recorded as the
ledger records them, in the transaction that sets a call's cost (calls/costs/services.py); the ledger's
own path from a finished call is the last tests' (call_finish, and a typed session in-process)."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, transaction
from django.test import Client
from django.utils import timezone

from calls import services
from calls.budgets.selectors import period_bounds
from calls.budgets.services import MAX_BUDGETS, budget_thresholds_record
from calls.logging import flush_agent_logs
from calls.models import AgentLog, Budget, Call, CallEvent
from calls.tasks import deliver_due_events
from kit.signing import signature
from telephony.campaigns.services import batch_tick
from telephony.models import CallBatch, CallBatchRecipient
from telephony.outbound.dispatcher import outbound_dispatch
from telephony.services.accounts import telephony_account_set
from telephony.services.numbers import phone_number_assign, phone_number_claim
from telephony.sip.admission import Admitted, Refused, sip_call_admit
from testing.clients import VoiceClient, is_type
from testing.conversations import agent_for, session_token, socket_url
from testing.factories import CallFactory
from testing.fixtures import close_db_threads, realtime_settings
from testing.inprocess import LOOPBACK, serving
from testing.twilio_webhooks import make_account, parse_twiml, post_signed, public_settings, voice_params
from testing.waiting import polled_sync
from testing.webhooks import LoopbackReceiver, allow_loopback_fixture

__all__ = ["allow_loopback_fixture", "close_db_threads", "public_settings", "realtime_settings"]  # fixtures

URL = "/public/v1/budgets"
LINE = "+14155560100"


def create(persona: Any, **fields: Any) -> Any:
    body = {"scope": {"organization": True}, "period": "day", "limit": 10, "action": "alert", **fields}
    return persona.client.post(URL, body, format="json")


def created(persona: Any, **fields: Any) -> dict[str, Any]:
    response = create(persona, **fields)
    assert response.status_code == 201, response.json()
    return response.json()


def ended_call(agent: Any, cost: str, *, at: Any = None, variables: dict[str, str] | None = None) -> Call:
    """An ended call of the agent that cost `cost` USD, started at `at` (now by default)."""
    started = at or timezone.now()
    return CallFactory(
        agent=agent,
        status="completed",
        started_at=started,
        ended_at=started + timedelta(seconds=30),
        duration_seconds=30,
        variables=variables or {},
        cost_total=Decimal(cost),
        cost_currency="USD",
    )


def costed(agent: Any, cost: str, **fields: Any) -> Call:
    """A call whose cost the ledger sets now: recorded with its budget thresholds, in one transaction."""
    with transaction.atomic():
        call = ended_call(agent, cost, **fields)
        budget_thresholds_record(call=call)
    return call


def thresholds() -> list[tuple[str, int]]:
    """(budget name, threshold) of every budget.threshold event recorded, oldest first."""
    events = CallEvent.objects.filter(event_type="budget.threshold").order_by("created_at")
    return [(m["budget"]["name"], m["threshold"]) for m in (json.loads(e.body)["message"] for e in events)]


@pytest.fixture
def agent(owner: Any, make_agent: Any) -> Any:
    return make_agent(owner.organization, name="Ava", status="active", agent_type="static", server_url=None)


# --- the resource -------------------------------------------------------------------------------------


def test_budgets_are_created_listed_read_and_deleted(owner, agent):
    day, month = period_bounds("day", timezone.now()), period_bounds("month", timezone.now())
    by_agent = created(owner, name="  Ava daily  ", scope={"agentId": str(agent.pk)}, limit=12.5, action="block")
    assert by_agent == {
        "id": by_agent["id"],
        "name": "Ava daily",
        "scope": {"agentId": str(agent.pk)},
        "period": "day",
        "limit": 12.5,
        "action": "block",
        "currency": "USD",
        "spent": 0.0,
        "periodStart": day[0].isoformat(timespec="microseconds").replace("+00:00", "Z"),
        "periodEnd": day[1].isoformat(timespec="microseconds").replace("+00:00", "Z"),
        "status": "ok",
        "createdAt": by_agent["createdAt"],
    }
    by_variable = created(owner, scope={"variable": {"name": "campaign.id", "value": "spring"}}, period="month")
    assert by_variable["scope"] == {"variable": {"name": "campaign.id", "value": "spring"}}
    assert by_variable["name"] is None and by_variable["action"] == "alert"
    assert by_variable["periodStart"].startswith(month[0].strftime("%Y-%m-01T00:00:00"))
    everything = created(owner, scope={"organization": True}, limit=0.0000014)
    assert everything["scope"] == {"organization": True} and everything["limit"] == 0.000001

    listed = owner.client.get(URL)
    assert listed.status_code == 200
    assert [b["id"] for b in listed.json()] == [everything["id"], by_variable["id"], by_agent["id"]]  # newest first
    assert owner.client.get(f"{URL}/{by_agent['id']}").json() == by_agent

    deleted = owner.client.delete(f"{URL}/{by_agent['id']}")
    assert deleted.status_code == 200 and deleted.json() == {"id": by_agent["id"]}
    assert owner.client.get(f"{URL}/{by_agent['id']}").status_code == 404
    assert owner.client.delete(f"{URL}/{by_agent['id']}").status_code == 404
    assert [b["id"] for b in owner.client.get(URL).json()] == [everything["id"], by_variable["id"]]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"scope": None}, "scope"),
        ({"scope": {}}, "scope"),
        ({"scope": "organization"}, "scope"),
        ({"scope": {"team": "sales"}}, "scope"),
        ({"scope": {"organization": True, "agentId": str(uuid.uuid4())}}, "scope"),
        ({"scope": {"organization": False}}, "scope.organization"),
        ({"scope": {"agentId": "ava"}}, "scope.agentId"),
        ({"scope": {"agentId": str(uuid.uuid4())}}, "scope.agentId"),
        ({"scope": {"variable": "campaign"}}, "scope.variable"),
        ({"scope": {"variable": {"name": "first name", "value": "x"}}}, "scope.variable.name"),
        ({"scope": {"variable": {"name": "campaign"}}}, "scope.variable.value"),
        ({"scope": {"variable": {"name": "campaign", "value": 7}}}, "scope.variable.value"),
        ({"scope": {"variable": {"name": "campaign", "value": "x" * 501}}}, "scope.variable.value"),
        ({"period": "week"}, "period"),
        ({"period": None}, "period"),
        ({"action": "warn"}, "action"),
        ({"action": ["block"]}, "action"),
        ({"limit": -5}, "limit"),
        ({"limit": 0}, "limit"),
        ({"limit": "10"}, "limit"),
        ({"limit": True}, "limit"),
        ({"limit": None}, "limit"),
        ({"limit": 10**13}, "limit"),
        ({"name": 12}, "name"),
        ({"name": "x" * 201}, "name"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(owner, fields, field):
    response = create(owner, **fields)
    assert response.status_code == 400, response.json()
    body = response.json()
    assert field in body["issues"], body
    assert body["error"].startswith(f"Invalid request: {next(iter(body['issues']))}: ")
    assert not Budget.objects.exists()


def test_another_organizations_agent_is_no_scope_and_its_budgets_are_not_found(owner, outsider, make_agent):
    theirs = make_agent(outsider.organization, name="Theirs")
    refused = create(owner, scope={"agentId": str(theirs.pk)})
    assert refused.status_code == 400 and refused.json()["issues"] == {
        "scope.agentId": ["No agent with this id in your organization."]
    }
    mine = created(owner)
    assert outsider.client.get(f"{URL}/{mine['id']}").status_code == 404
    assert outsider.client.delete(f"{URL}/{mine['id']}").status_code == 404
    assert outsider.client.get(URL).json() == []
    assert owner.client.get(f"{URL}/not-a-uuid").status_code == 400
    assert owner.client.get(f"{URL}/{uuid.uuid4()}").status_code == 404
    assert Budget.objects.filter(pk=mine["id"]).exists()


def test_an_organization_has_at_most_100_budgets(owner, outsider):
    Budget.objects.bulk_create(
        Budget(organization=owner.organization, period="day", limit=1, action="alert", created_at=timezone.now())
        for _ in range(MAX_BUDGETS)
    )
    refused = create(owner)
    assert refused.status_code == 409 and refused.json()["code"] == "TOO_MANY_BUDGETS"
    assert Budget.objects.filter(organization=owner.organization).count() == MAX_BUDGETS
    assert create(outsider).status_code == 201  # another organization's count


def test_spent_counts_the_ended_calls_in_scope_that_started_in_the_period(owner, outsider, agent, make_agent):
    other = make_agent(owner.organization, name="Max", status="active")
    start = period_bounds("day", timezone.now())[0]
    ended_call(agent, "3.25", variables={"campaign": "spring"})
    ended_call(agent, "1.5")
    ended_call(other, "2", variables={"campaign": "spring"})
    ended_call(other, "7", variables={"campaign": "autumn"})
    ended_call(agent, "100", at=start - timedelta(seconds=1))  # the day before
    CallFactory(agent=agent, status="active")  # live: no cost yet
    ended_call(make_agent(outsider.organization), "50")  # another organization's

    ava = created(owner, scope={"agentId": str(agent.pk)}, limit=5.5)
    spring = created(owner, scope={"variable": {"name": "campaign", "value": "spring"}}, limit=5.25)
    everyone = created(owner, limit=20)
    spent = {b["id"]: (b["spent"], b["status"]) for b in owner.client.get(URL).json()}
    assert spent[ava["id"]] == (4.75, "warning")  # 86%
    assert spent[spring["id"]] == (5.25, "exceeded")  # the whole limit
    assert spent[everyone["id"]] == (13.75, "ok")


# --- thresholds ---------------------------------------------------------------------------------------


def test_thresholds_are_announced_once_each_per_period_signed_to_subscribed_webhooks(owner, agent, allow_loopback):
    with LoopbackReceiver() as hook, LoopbackReceiver() as other_hook:
        subscribed = owner.client.post(
            "/public/v1/webhooks", {"url": hook.url(), "events": ["budget.threshold"]}, format="json"
        ).json()
        owner.client.post("/public/v1/webhooks", {"url": other_hook.url(), "events": ["call.ended"]}, format="json")
        budget = created(owner, name="Ava daily", scope={"agentId": str(agent.pk)}, limit=10)

        costed(agent, "5")
        assert thresholds() == []  # 50%
        crossing = costed(agent, "3.5")
        assert thresholds() == [("Ava daily", 80)]  # 85%
        costed(agent, "1")
        assert thresholds() == [("Ava daily", 80)]  # 95%: 80 was announced
        costed(agent, "1")
        costed(agent, "4")
        assert thresholds() == [("Ava daily", 80), ("Ava daily", 100)]  # 105%, then 145%: once

        while deliver_due_events.delay().get():
            pass
        assert [r.json()["message"]["type"] for r in hook.requests] == ["budget.threshold", "budget.threshold"]
        assert other_hook.requests == []  # not subscribed to budget.threshold
        first, second = (r.json()["message"] for r in hook.requests)
        for received in hook.requests:
            assert received.headers["x-service-signature"] == signature(subscribed["secret"], received.body)
        assert (first["threshold"], first["spent"], first["limit"], first["currency"]) == (80, 8.5, 10.0, "USD")
        assert first["budget"] == {**budget, "spent": 8.5, "status": "warning"}
        assert first["call"]["id"] == str(crossing.pk)
        assert (second["threshold"], second["spent"], second["budget"]["status"]) == (100, 10.5, "exceeded")
        assert {d["eventType"] for d in owner.client.get("/public/v1/webhook-deliveries").json()} == {
            "budget.threshold"
        }

    # The next period announces again (as if the last announcement was yesterday's).
    yesterday = period_bounds("day", timezone.now() - timedelta(days=1))[0]
    Budget.objects.filter(pk=budget["id"]).update(alerted_period_start=yesterday)
    costed(agent, "0.5")
    assert thresholds()[-1] == ("Ava daily", 100)


def test_a_call_that_crosses_both_thresholds_announces_100_and_other_scopes_stay_quiet(owner, agent, make_agent):
    other = make_agent(owner.organization, name="Max", status="active")
    owner.client.post(
        "/public/v1/webhooks", {"url": "https://hooks.example.com/b", "events": ["budget.threshold"]}, format="json"
    )
    created(owner, name="Ava", scope={"agentId": str(agent.pk)}, limit=10)
    created(owner, name="Spring", scope={"variable": {"name": "campaign", "value": "spring"}}, limit=10)
    created(owner, name="Everyone", scope={"organization": True}, period="month", limit=100)

    costed(other, "12", variables={"campaign": "autumn"})
    assert thresholds() == []  # Max's autumn call: neither Ava's nor spring's; 12% of the organization's
    costed(agent, "11", variables={"campaign": "spring"})
    assert sorted(thresholds()) == [("Ava", 100), ("Spring", 100)]


def test_a_call_of_a_period_that_is_over_announces_nothing(owner, agent):
    owner.client.post(
        "/public/v1/webhooks", {"url": "https://hooks.example.com/b", "events": ["budget.threshold"]}, format="json"
    )
    created(owner, scope={"agentId": str(agent.pk)}, limit=1)
    costed(agent, "5", at=period_bounds("day", timezone.now())[0] - timedelta(minutes=1))  # started yesterday
    assert thresholds() == []
    assert Budget.objects.get().alerted_percent == 0


@pytest.mark.django_db(transaction=True)
def test_calls_whose_cost_is_set_at_once_announce_a_threshold_once(owner, agent):
    """Two calls' costs set in two transactions at once, each 50% of the limit: the budget's row lock makes
    the second see the first, so 100% is announced, once (without it, both could see 50%)."""
    owner.client.post(
        "/public/v1/webhooks", {"url": "https://hooks.example.com/b", "events": ["budget.threshold"]}, format="json"
    )
    created(owner, name="Ava", scope={"agentId": str(agent.pk)}, limit=10)
    calls = [CallFactory(agent=agent, status="active") for _ in range(2)]
    barrier = threading.Barrier(2)
    failures: list[BaseException] = []

    def end(call: Call) -> None:
        try:
            connection.ensure_connection()
            barrier.wait(timeout=30)
            with transaction.atomic():
                Call.objects.filter(pk=call.pk).update(status="completed", cost_total=Decimal(5), cost_currency="USD")
                call.refresh_from_db()
                budget_thresholds_record(call=call)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=end, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures and not any(thread.is_alive() for thread in threads)
    assert thresholds() == [("Ava", 100)]


# --- blocking -----------------------------------------------------------------------------------------


def sessions(agent: Any) -> str:
    return f"/public/v1/agents/{agent.pk}/realtime-sessions"


def test_a_spent_block_budget_refuses_a_realtime_session_with_402_naming_it(owner, agent, realtime_settings):
    start = period_bounds("day", timezone.now())[1]
    ended_call(agent, "10")
    budget = created(owner, name="Ava daily", scope={"agentId": str(agent.pk)}, limit=10, action="block")

    refused = owner.client.post(sessions(agent), {}, format="json")
    assert refused.status_code == 402
    body = refused.json()
    assert body == {
        "error": body["error"],
        "code": "BUDGET_EXCEEDED",
        "budgetId": budget["id"],
        "limit": 10.0,
        "spent": 10.0,
        "currency": "USD",
        "period": "day",
        "periodEnd": start.isoformat(timespec="microseconds").replace("+00:00", "Z"),
    }
    assert "'Ava daily'" in body["error"] and "10 USD per UTC day" in body["error"]

    # Raised above what was spent, the budget allows sessions again at once; so does deleting it.
    Budget.objects.filter(pk=budget["id"]).update(limit=Decimal("10.5"))
    assert owner.client.post(sessions(agent), {}, format="json").status_code == 200
    Budget.objects.filter(pk=budget["id"]).update(limit=Decimal(1))
    assert owner.client.post(sessions(agent), {}, format="json").status_code == 402
    owner.client.delete(f"{URL}/{budget['id']}")
    assert owner.client.post(sessions(agent), {}, format="json").status_code == 200


def test_only_block_budgets_whose_scope_holds_the_session_refuse_it(owner, agent, make_agent, realtime_settings):
    other = make_agent(owner.organization, name="Max", status="active")
    ended_call(agent, "10", variables={"campaign": "spring"})
    created(owner, scope={"agentId": str(agent.pk)}, limit=1, action="alert")  # alerts never refuse
    created(owner, scope={"variable": {"name": "campaign", "value": "spring"}}, limit=1, action="block")

    assert owner.client.post(sessions(agent), {}, format="json").status_code == 200
    assert owner.client.post(sessions(other), {"variables": {"campaign": "autumn"}}, format="json").status_code == 200
    spring = owner.client.post(sessions(other), {"variables": {"campaign": "spring"}}, format="json")
    assert spring.status_code == 402 and spring.json()["code"] == "BUDGET_EXCEEDED"

    created(owner, name="Everyone", scope={"organization": True}, limit=10, action="block")
    refused = owner.client.post(sessions(other), {}, format="json")
    assert refused.status_code == 402 and "'Everyone'" in refused.json()["error"]


def test_a_live_call_is_never_cut(owner, agent, realtime_settings):
    live = CallFactory(agent=agent, status="active")
    created(owner, scope={"agentId": str(agent.pk)}, limit=1, action="block")
    costed(agent, "5")
    assert owner.client.post(sessions(agent), {}, format="json").status_code == 402
    live.refresh_from_db()
    assert live.status == "active" and live.ended_at is None


@pytest.fixture
def line(owner: Any, agent: Any, public_settings: Any) -> Any:
    """The owner can place calls (a Twilio account, this service's public URL) from LINE, which rings Ava."""
    make_account(owner.organization)
    number = phone_number_claim(organization=owner.organization, number=LINE)
    return phone_number_assign(organization=owner.organization, agent=agent, phone_number_id=number.pk)


def test_a_spent_block_budget_refuses_an_outbound_call(owner, agent, line):
    ended_call(agent, "10")
    budget = created(owner, scope={"agentId": str(agent.pk)}, limit=10, action="block")
    body = {"agentId": str(agent.pk), "phoneNumberId": str(line.pk), "to": "+14155550142"}
    refused = owner.client.post("/public/v1/calls", body, format="json")
    assert refused.status_code == 402
    assert refused.json()["code"] == "BUDGET_EXCEEDED" and refused.json()["budgetId"] == budget["id"]
    assert not Call.objects.filter(direction="outbound").exists()

    Budget.objects.filter(pk=budget["id"]).update(action="alert")
    assert owner.client.post("/public/v1/calls", body, format="json").status_code == 201


def test_a_phone_call_to_a_blocked_agent_is_refused_with_a_sorry_and_the_reason_logged(owner, agent, line):
    ended_call(agent, "10")
    created(owner, name="Ava daily", scope={"agentId": str(agent.pk)}, limit=10, action="block")
    response = post_signed(Client(), "/telephony/twilio/voice", voice_params(to=LINE))
    root = parse_twiml(response.content)
    assert [child.tag for child in root] == ["Say", "Hangup"]
    assert root[0].text == "Sorry, this number cannot take your call right now. Goodbye."
    flush_agent_logs()
    [line_logged] = AgentLog.objects.filter(agent=agent, severity="warn")
    assert line_logged.content["message"].startswith("Phone call refused: the budget 'Ava daily' (10 USD per UTC day)")


def test_a_sip_call_to_a_blocked_agent_is_refused_with_480(owner, agent):
    telephony_account_set(
        organization=owner.organization, provider="sip", account_sid="pbx.example.test", allowed_networks="127.0.0.0/8"
    )
    number = phone_number_claim(organization=owner.organization, number=LINE)
    phone_number_assign(organization=owner.organization, agent=agent, phone_number_id=number.pk)

    def invite() -> Any:
        return sip_call_admit(called=LINE, caller="+14155550199", address="127.0.0.1", call_id=uuid.uuid4().hex)

    assert isinstance(invite(), Admitted)
    ended_call(agent, "10")
    created(owner, name="Everyone", limit=10, action="block")
    assert invite() == Refused(480, "Budget Exceeded")
    flush_agent_logs()
    [logged] = AgentLog.objects.filter(agent=agent, severity="warn")
    assert logged.content["message"].startswith("Phone call refused: the budget 'Everyone' (10 USD per UTC day)")


def campaign(owner: Any, agent: Any, line: Any, **fields: Any) -> dict[str, Any]:
    response = owner.client.post(
        "/public/v1/call-batches",
        {
            "name": "Spring reminders",
            "agentId": str(agent.pk),
            "phoneNumberId": str(line.pk),
            "recipients": [{"to": "+14155551000", "variables": {"campaign": "spring"}}, {"to": "+14155551001"}],
            **fields,
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    return response.json()


def test_a_campaign_whose_next_call_a_spent_block_budget_holds_pauses(owner, agent, line):
    batch = campaign(owner, agent, line)
    ended_call(agent, "3", variables={"campaign": "spring"})
    spring = created(
        owner, name="Spring", scope={"variable": {"name": "campaign", "value": "spring"}}, limit=3, action="block"
    )

    assert batch_tick() == 0
    assert owner.client.get(f"/public/v1/call-batches/{batch['id']}").json()["status"] == "paused"
    assert not Call.objects.filter(direction="outbound").exists()
    flush_agent_logs()
    [logged] = AgentLog.objects.filter(agent=agent, severity="warn")
    assert logged.content["message"].startswith("Campaign 'Spring reminders' paused: the budget 'Spring'")
    assert logged.content["batchId"] == batch["id"]

    # Once the budget allows calls again, the resumed campaign calls on.
    owner.client.delete(f"{URL}/{spring['id']}")
    assert owner.client.post(f"/public/v1/call-batches/{batch['id']}/resume").status_code == 200
    assert batch_tick() == 1


def test_a_queued_call_a_budget_holds_when_its_turn_comes_is_not_placed(owner, agent, line, settings):
    settings.BACKGROUND_WORK = "inline"
    settings.OUTBOUND_PLACE_THREADS = 1
    with LoopbackReceiver() as twilio:
        settings.TWILIO_API_BASE_URL = twilio.base
        batch = campaign(owner, agent, line)
        assert batch_tick() == 1
        queued = Call.objects.get(direction="outbound", status="queued")
        single = owner.client.post(
            "/public/v1/calls",
            {"agentId": str(agent.pk), "phoneNumberId": str(line.pk), "to": "+14155550142"},
            format="json",
        ).json()
        ended_call(agent, "10")
        created(owner, name="Ava daily", scope={"agentId": str(agent.pk)}, limit=10, action="block")

        outbound_dispatch()

        assert twilio.requests == []  # nothing placed
    for call_id in (queued.pk, single["id"]):
        call = owner.client.get(f"/public/v1/calls/{call_id}").json()
        assert call["status"] == "canceled" and call["endedReason"] == "canceled"
        assert call["endedMessage"].startswith("The call was not placed: the budget 'Ava daily'")
    # The campaign's call paused it and gave its recipient back for the resume.
    assert CallBatch.objects.get(pk=batch["id"]).status == "paused"
    recipient = CallBatchRecipient.objects.get(to_number="+14155551000")
    assert (recipient.state, recipient.outcome) == ("pending", "")


# --- the dashboard --------------------------------------------------------------------------------------


def test_the_dashboard_lists_budgets_with_what_they_spent(owner, agent, admin_client: Client):
    ended_call(agent, "4")
    budget = created(owner, name="Ava daily", scope={"agentId": str(agent.pk)}, limit=5)
    page = admin_client.get("/admin/calls/budget/").content.decode()
    assert "Ava daily" in page and "agent Ava" in page and "4 USD" in page and "warning" in page
    detail = admin_client.get(f"/admin/calls/budget/{budget['id']}/change/")
    assert detail.status_code == 200 and "Ava daily" in detail.content.decode()
    assert admin_client.get("/admin/calls/budget/add/").status_code == 403


# --- through the ledger ---------------------------------------------------------------------------------


def test_a_finished_call_priced_by_the_ledger_announces_its_threshold(owner, agent):
    """call_finish prices the call by the organization's price book (calls/costs/) and announces, in the
    transaction that ends it, the threshold its cost reaches: the event carries the ended call."""
    book = {
        "currency": "EUR",
        "items": [{"product": "llm", "provider": "*", "unit": "output_token", "unitPrice": 0.01}],
    }
    assert owner.client.put("/public/v1/pricing", book, format="json").status_code == 200
    owner.client.post(
        "/public/v1/webhooks", {"url": "https://hooks.example.com/b", "events": ["budget.threshold"]}, format="json"
    )
    budget = created(owner, name="Ava", scope={"agentId": str(agent.pk)}, limit=10)
    assert budget["currency"] == "EUR"

    call = services.call_start(agent=agent, channel="web")
    services.call_llm_usage_add(call=call, provider="openai", model="gpt-4o-mini", output_tokens=900)
    services.call_finish(call=call, status="completed")

    [event] = CallEvent.objects.filter(event_type="budget.threshold")
    message = json.loads(event.body)["message"]
    assert (message["threshold"], message["spent"], message["limit"], message["currency"]) == (80, 9.0, 10.0, "EUR")
    assert message["call"]["id"] == str(call.pk) and message["call"]["status"] == "completed"
    assert message["call"]["cost"] == {"total": 9.0, "currency": "EUR"}
    assert owner.client.get(f"{URL}/{budget['id']}").json()["spent"] == 9.0


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_db_threads")
async def test_a_voice_session_spends_the_budget_is_announced_signed_and_the_next_session_is_refused(
    owner, make_agent, settings, tmp_path, realtime_settings, allow_loopback
):
    """Through the application in the test's loop (testing/inprocess.py): a browser session whose agent
    introduces itself, its voice priced per character by the organization's price book; when it ends, the
    ledger's cost takes the agent's `block` budget past its limit: `budget.threshold` (100) reaches the
    subscribed webhook signed, and the next session is refused with 402 BUDGET_EXCEEDED."""
    settings.EVENTS_RETRY_BASE_SECONDS = 0.02
    book = {
        "currency": "USD",
        "items": [{"product": "tts", "provider": "*", "unit": "character", "unitPrice": 0.01}],
    }
    assert (await sync_to_async(owner.client.put)("/public/v1/pricing", book, format="json")).status_code == 200
    agent = await sync_to_async(agent_for)(owner, make_agent, name="Olive", instructions="You answer questions.")
    with LoopbackReceiver() as hook, serving(settings, LOOPBACK, folder=tmp_path) as server:
        subscribed = await sync_to_async(owner.client.post)(
            "/public/v1/webhooks", {"url": hook.url(), "events": ["budget.threshold"]}, format="json"
        )
        budget = await sync_to_async(created)(
            owner, name="Olive daily", scope={"agentId": str(agent.pk)}, limit=0.05, action="block"
        )
        token = await session_token(owner, agent)
        async with VoiceClient(socket_url(server, agent, token)) as client:
            started = await client.wait_for(is_type("session.started"), timeout=60)
            call_id = client.messages[started].message["callId"]
            await client.wait_for(is_type("transcript", role="assistant"), after=started, timeout=60)
            await client.send({"type": "stop"})
            assert await client.wait_closed() == 1000

        def announced() -> Any:
            deliver_due_events.delay().get()
            return hook.requests

        [received] = await sync_to_async(polled_sync)(announced, what="the budget.threshold event")
        detail = (await sync_to_async(owner.client.get)(f"/public/v1/calls/{call_id}")).json()
        refused = await sync_to_async(owner.client.post)(sessions(agent), {}, format="json")

    assert received.headers["x-service-signature"] == signature(subscribed.json()["secret"], received.body)
    message = received.json()["message"]
    assert message["type"] == "budget.threshold" and message["threshold"] == 100
    assert message["call"]["id"] == call_id and message["budget"]["id"] == budget["id"]
    assert message["call"]["status"] == "completed"  # the call as it ended
    assert detail["cost"]["total"] > 0.05 and message["spent"] == detail["cost"]["total"]
    assert refused.status_code == 402
    assert refused.json()["code"] == "BUDGET_EXCEEDED" and refused.json()["budgetId"] == budget["id"]
