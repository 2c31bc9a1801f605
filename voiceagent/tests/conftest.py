"""A dashboard with something on every page, made the way the product makes it: the world the dashboard's
browser tests look at (long names and messages included, so that a page that overflows shows it)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import transaction
from django.test import Client, override_settings
from django.utils import timezone

from agents.models import Agent
from calls import services as calls_services
from calls.logging import LogSession, agent_log, flush_agent_logs
from calls.models import AgentLog, Call, LlmUsage, ToolInvocation
from calls.webhooks.events import event_record
from knowledge import services as knowledge_services
from realtime.models import UsedSessionToken
from telephony.services.accounts import telephony_account_set
from telephony.services.numbers import phone_number_assign, phone_number_claim
from testing.dashboard import STAFF_PASSWORD, DashboardWorld

CONVERSATION = (
    ("assistant", "Thanks for calling Northwind Dental, this is Ava. How can I help you today?"),
    ("user", "Hi, I'd like to move my cleaning appointment to next Thursday afternoon if possible."),
    ("assistant", "Of course. I have 2:30 pm or 4:15 pm next Thursday. Which one suits you better?"),
    ("user", "The 4:15 works. Also, can you tell me whether my insurance covers the fluoride treatment?"),
    ("assistant", "You're booked for 4:15 pm. Fluoride is covered once a year on your plan; you had none yet."),
)


def _finished_call(agent: Agent, *, ago: timedelta, seconds: int, status: str, channel: str) -> Call:
    """A call of `seconds` that started `ago`: billed as the engine bills it (call_finish measures up to now),
    then moved back in time."""
    phone = channel == "phone"
    call = calls_services.call_start(
        agent=agent,
        channel=channel,
        from_number="+14155550100" if phone else None,
        to_number="+14155550123" if phone else None,
    )
    started = timezone.now() - ago
    for number, (role, text) in enumerate(CONVERSATION):
        at = started + timedelta(seconds=2 + number * seconds / len(CONVERSATION))
        calls_services.call_message_add(call=call, role=role, content=text, occurred_at=at)
    calls_services.call_tool_invocation_add(
        call=call,
        tool_name="reschedule_appointment",
        request={"patientId": "p-1024", "slot": "thursday-16:15"},
        response='{"ok": true, "confirmation": "NW-88213"}',
        status="success",
        duration_ms=184,
    )
    calls_services.call_llm_usage_add(call=call, provider="embedded", model="rule-based", input_tokens=220)
    Call.objects.filter(pk=call.pk).update(started_at=timezone.now() - timedelta(seconds=seconds))
    call.refresh_from_db()
    calls_services.call_finish(call=call, status=status)
    Call.objects.filter(pk=call.pk).update(started_at=started, ended_at=started + timedelta(seconds=seconds))
    middle = started + timedelta(seconds=seconds / 2)
    ToolInvocation.objects.filter(call=call).update(created_at=middle)
    LlmUsage.objects.filter(call=call).update(created_at=middle)
    return Call.objects.get(pk=call.pk)


@pytest.fixture
def dashboard_world(make_persona: Any, make_agent: Any, django_user_model: Any) -> DashboardWorld:
    """Two organizations with long names, agents, finished and live calls with transcripts and tool calls,
    agent log lines, phone numbers, a telephony account, a knowledge document, a used session token, a
    group, and a superuser `staff` (password STAFF_PASSWORD) who logged in once after a wrong password."""
    dentist = make_persona("Northwind Dental Clinics of the Greater San Francisco Bay Area", "studio")
    dental = dentist.organization
    plumbing = make_persona("Acme Plumbing & Heating Emergency Services", "launch").organization
    ava = make_agent(dental, name="Ava, front desk and appointment scheduling (after hours)", status="active")
    make_agent(dental, name="Billing questions and insurance pre-authorization", status="draft")
    max_agent = make_agent(
        plumbing, name="Max, emergency dispatch for burst pipes and boiler failures", status="active"
    )
    calls = []
    for index in range(14):
        agent = ava if index % 3 else max_agent
        calls.append(
            _finished_call(
                agent,
                ago=timedelta(hours=index * 3, minutes=7),
                seconds=40 + index * 23,
                status="failed" if index % 5 == 4 else "completed",
                channel="phone" if index % 2 else "web",
            )
        )
    for agent in (ava, max_agent):
        live = calls_services.call_start(agent=agent, channel="phone", from_number="+14155550177")
        calls_services.call_message_add(call=live, role="user", content="Hello, is anyone there?")
    session = LogSession(dental.pk, ava.pk, "k2v9q1")
    agent_log(session, "info", "session started", callId=str(calls[1].pk))
    agent_log(
        session,
        "warn",
        "The caller's audio arrived late: 1,240 ms of jitter on the media stream from the carrier; "
        "the recognizer waited for the end of the turn before answering, which may have sounded slow.",
        jitterMs=1240,
    )
    agent_log(session, "error", "Tool reschedule_appointment answered 502 Bad Gateway from https://booking.example.com")
    flush_agent_logs()
    AgentLog.objects.filter(session_id=session.session_id).update(timestamp=calls[1].started_at + timedelta(seconds=1))
    telephony_account_set(organization=dental, account_sid="AC" + "1f" * 16, auth_token="twilio-auth-token-1234")
    main_line = phone_number_claim(organization=dental, number="+14155550123", friendly_name="Main line")
    phone_number_claim(organization=plumbing, number="+442071838750", friendly_name="London emergency line")
    phone_number_assign(organization=dental, agent=ava, phone_number_id=main_line.pk)
    knowledge_services.document_create(
        organization=dental,
        agent_id=str(ava.pk),
        name="Opening hours and insurance FAQ",
        content="# Opening hours\n\nWe open at eight and close at six on weekdays.\n\n"
        "## Insurance\n\nFluoride treatment is covered once a year on every plan we accept.",
        description="When the clinics are open, and what insurance covers.",
    )
    now = timezone.now()
    UsedSessionToken.objects.create(
        token_id="0" * 32,
        organization_id=dental.pk,
        agent_id=ava.pk,
        used_at=now,
        expires_at=now + timedelta(minutes=1),
    )
    # A call batch (campaign) of two recipients, not started (this service can place calls: its public URL
    # and stream secret are set).
    with override_settings(
        PUBLIC_BASE_URL="https://voice.example.test", REALTIME_TOKEN_SECRET="dashboard-world-0123456789"
    ):
        response = dentist.client.post(
            "/public/v1/call-batches",
            {
                "name": "Recall reminders for patients due a check-up this spring",
                "agentId": str(ava.pk),
                "phoneNumberId": str(main_line.pk),
                "recipients": [{"to": "+14155550188", "variables": {"firstName": "Ana"}}, {"to": "+14155550189"}],
            },
            format="json",
        )
    assert response.status_code == 201, response.content
    # A call-event webhook, and a delivery to it (a call.started, recorded as the call's start would).
    response = dentist.client.post(
        "/public/v1/webhooks", {"url": "https://crm.example.com/events", "events": ["call.started"]}, format="json"
    )
    assert response.status_code == 201, response.content
    with transaction.atomic():
        event_record(call=calls[1], event_type="call.started")
    # A budget (calls/budgets): the front desk's calls, at most 25 a day.
    response = dentist.client.post(
        "/public/v1/budgets",
        {
            "name": "Front desk, daily",
            "scope": {"agentId": str(ava.pk)},
            "period": "day",
            "limit": 25,
            "action": "alert",
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    # A price book of the organization's own (calls/costs): its carrier per minute.
    response = dentist.client.put(
        "/public/v1/pricing",
        {
            "currency": "USD",
            "items": [{"product": "telephony", "provider": "twilio", "unit": "minute", "unitPrice": 0.0085}],
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    Group.objects.create(name="Support staff")
    django_user_model.objects.create_superuser("staff", "staff@example.com", STAFF_PASSWORD)
    # The login form, which django-axes records: a wrong password of an unknown user, then staff logs in.
    login = Client()
    assert login.post("/admin/login/", {"username": "nobody", "password": "wrong"}).status_code == 200
    assert login.post("/admin/login/", {"username": "staff", "password": STAFF_PASSWORD}).status_code == 302
    return DashboardWorld(
        organization=dental,
        agent=ava,
        call=calls[1],
        other_organization=plumbing,
        other_agent=max_agent,
        api=dentist.client,
        calls=calls,
    )
