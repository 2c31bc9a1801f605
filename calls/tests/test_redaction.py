"""Redaction (an agent's redactPii, kit/redaction.py): the detectors through the public function
`redact_for_agent`, and what the call record and the agent log store (calls.services, calls.logging)."""

from __future__ import annotations

import json
import time

import pytest

from calls import services
from calls.logging import LogSession, agent_log, flush_agent_logs, new_session_id
from calls.models import AgentLog
from kit.redaction import redact_for_agent

ALL = "all"

# (category, text, expected): positives and negatives of each detector, redacting every category.
CASES = [
    # e-mail: written, and said aloud as a transcript spells it
    ("email", "write to john.smith+news@mail.example.co.uk today", "write to [EMAIL] today"),
    ("email", "it is john dot smith at example dot com thanks", "it is [EMAIL] thanks"),
    ("email", "j underscore doe at mail dot example dot org", "[EMAIL]"),
    ("email", "meet me at the office dot", "meet me at the office dot"),
    ("email", "see you at five dot thirty", "see you at five dot thirty"),  # not a domain
    ("email", "name@localhost is not an address with a domain", "name@localhost is not an address with a domain"),
    # internationalised addresses, and addresses written out to dodge harvesters
    ("email", "write to maria@exämple.de today", "write to [EMAIL] today"),
    ("email", "maría.garcía@correo.es", "[EMAIL]"),
    ("email", "mail maria (at) example (dot) com now", "mail [EMAIL] now"),
    ("email", "maria[at]example[dot]com", "[EMAIL]"),
    ("email", "maria {AT} mail (dot) example (dot) co (dot) uk ok", "[EMAIL] ok"),
    ("email", "maria [at] exämple.de", "[EMAIL]"),
    ("email", "maria @ example . org", "[EMAIL]"),
    ("email", "call me at home. It is late", "call me at home. It is late"),
    ("email", "prices (at) cost (dot)", "prices (at) cost (dot)"),
    # phone numbers: national and international, grouped or not, and said digit by digit
    ("phone_number", "call 555 123 4567 now", "call [PHONE_NUMBER] now"),
    ("phone_number", "my cell is +1 415 555 0100.", "my cell is [PHONE_NUMBER]."),
    ("phone_number", "it's (415) 555-0100", "it's [PHONE_NUMBER]"),
    ("phone_number", "London: +44 20 7946 0958", "London: [PHONE_NUMBER]"),
    ("phone_number", "four one five, five five five, zero one zero zero", "[PHONE_NUMBER]"),
    ("phone_number", "four one five 555 double oh one oh", "[PHONE_NUMBER]"),
    ("phone_number", "we opened in 2024", "we opened in 2024"),  # a year is not a phone number
    ("phone_number", "order three five six one", "order three five six one"),  # four digits said
    ("phone_number", "at 10:30 on 12/05/2025", "at 10:30 on 12/05/2025"),
    ("phone_number", "id 9725882f-a5b3-4f8b-95dd-d70813bab30e", "id 9725882f-a5b3-4f8b-95dd-d70813bab30e"),
    ("phone_number", "token abc4155550100", "token abc4155550100"),  # digits inside a word
    ("phone_number", "I have two kids and one dog", "I have two kids and one dog"),
    # cards: Luhn-valid numbers with a card issuer's prefix
    ("credit_card", "card 4111 1111 1111 1111 exp 12/29", "card [CREDIT_CARD] exp 12/29"),
    ("credit_card", "amex 3782-822463-10005", "amex [CREDIT_CARD]"),
    ("credit_card", "5555555555554444", "[CREDIT_CARD]"),
    ("credit_card", "four one one one one one one one one one one one one one one one", "[CREDIT_CARD]"),
    ("credit_card", "card 4111 1111 1111 1112", "card 4111 1111 1111 1112"),  # fails Luhn
    ("credit_card", "ref 1234 5678 9012 3456", "ref 1234 5678 9012 3456"),  # a random 16-digit number
    ("credit_card", "tracking 0000000000000000", "tracking 0000000000000000"),  # Luhn-valid, no issuer
    # US social security numbers
    ("ssn", "ssn 536-90-4399 on file", "ssn [SSN] on file"),
    ("ssn", "my social security number is 536904399", "my social security number is [SSN]"),
    ("ssn", "order 536904399", "order 536904399"),  # nine digits without a cue
    ("ssn", "ssn 666-12-3456", "ssn 666-12-3456"),  # never issued
    # IBANs: country format and check digits
    ("iban", "IBAN DE89 3704 0044 0532 0130 00 please", "IBAN [IBAN] please"),
    ("iban", "GB82WEST12345698765432", "[IBAN]"),
    ("iban", "DE89 3704 0044 0532 0130 01", "DE89 3704 0044 0532 0130 01"),  # wrong check digits
    # IP addresses
    ("ip_address", "from 203.0.113.7, port 22", "from [IP_ADDRESS], port 22"),
    ("ip_address", "v6 2001:db8::1 works", "v6 [IP_ADDRESS] works"),
    ("ip_address", "version 1.2.3.4.5", "version 1.2.3.4.5"),
    ("ip_address", "999.1.1.1 is not one", "999.1.1.1 is not one"),
    # dates of birth: a date after "born", "birth", "birthday" or "DOB"
    ("date_of_birth", "I was born on March 3, 1990.", "I was born on [DATE_OF_BIRTH]."),
    ("date_of_birth", "date of birth 1985-07-14", "date of birth [DATE_OF_BIRTH]"),
    ("date_of_birth", "DOB: 03/04/1990", "DOB: [DATE_OF_BIRTH]"),
    ("date_of_birth", "my birthday is the 5th of June 2001", "my birthday is the [DATE_OF_BIRTH]"),
    ("date_of_birth", "the meeting is on March 3, 2026", "the meeting is on March 3, 2026"),  # no cue
    ("date_of_birth", "born 31/02/1990", "born 31/02/1990"),  # not a date
]


@pytest.mark.parametrize(("category", "text", "expected"), CASES)
def test_each_detector_finds_its_values_and_leaves_lookalikes(category, text, expected):
    assert redact_for_agent({"redact_pii": ALL, "language": "en-US"}, text) == expected
    # Only the chosen categories: with just this one, the same result; with every other one, nothing.
    assert redact_for_agent([category], text) == expected
    others = [c for c, _, _ in CASES if c != category]
    assert redact_for_agent(sorted(set(others)), text) == text


def test_off_and_unknown_settings_change_nothing():
    text = "john@example.com 4111 1111 1111 1111"
    for setting in ("off", None, [], ["person_name"], 7):
        assert redact_for_agent(setting, text) == text


def test_json_values_are_redacted_at_any_depth_and_keys_kept():
    value = {
        "contact": {"email": "ann@example.com", "phones": ["+1 415 555 0100", {"work": "415 555 0199"}]},
        "card": 4111111111111111,
        "count": 3,
        "ok": True,
        "note": None,
        "ann@example.com": "key kept",
    }
    assert redact_for_agent("all", value) == {
        "contact": {"email": "[EMAIL]", "phones": ["[PHONE_NUMBER]", {"work": "[PHONE_NUMBER]"}]},
        "card": "[CREDIT_CARD]",
        "count": 3,
        "ok": True,
        "note": None,
        "ann@example.com": "key kept",
    }


@pytest.mark.parametrize(
    "text",
    ["a." * 5000 + "@", " dot ".join(["a"] * 2000), "x at " * 2500, "1 " * 5000, "1-" * 5000, "born 1990 " * 1000],
)
def test_no_text_makes_redaction_slow(text):
    started = time.perf_counter()
    redact_for_agent("all", text)
    assert time.perf_counter() - started < 2  # each under 0.25 s on the 2-core development machine


def test_the_agents_language_picks_the_national_phone_format(make_agent, owner):
    british = make_agent(owner.organization, name="Bea", language="en-GB", redact_pii=["phone_number"])
    american = make_agent(owner.organization, name="Al", language="en-US", redact_pii=["phone_number"])
    assert redact_for_agent(british, "ring 020 7946 0958") == "ring [PHONE_NUMBER]"
    assert redact_for_agent(american, "ring 020 7946 0958") == "ring 020 7946 0958"


# --- what is stored --------------------------------------------------------------------------------


def test_the_call_record_stores_placeholders_and_off_stores_the_values(make_agent, owner):
    said = "Reach me at ann@example.com or 415 555 0100."
    for setting, expected in (
        (["email", "phone_number"], "Reach me at [EMAIL] or [PHONE_NUMBER]."),
        ("off", said),
    ):
        agent = make_agent(owner.organization, name=f"Agent {setting}", status="active", redact_pii=setting)
        call = services.call_start(agent=agent, channel="web")
        services.call_message_add(call=call, role="user", content=said)
        services.call_tool_invocation_add(
            call=call,
            tool_name="save",
            request={"email": "ann@example.com", "nested": [{"phone": "415 555 0100"}]},
            response=json.dumps({"saved": "ann@example.com"}),
            status="success",
            duration_ms=12,
        )
        services.call_tool_invocation_add(
            call=call, tool_name="echo", request={}, response="plain ann@example.com", status="success", duration_ms=1
        )
        services.call_finish(call=call, status="completed")
        detail = owner.client.get(f"/public/v1/calls/{call.pk}").json()
        assert [m["content"] for m in detail["messages"]] == [expected]
        assert expected in detail["summary"]
        first, second = detail["toolInvocationsLog"]
        if setting == "off":
            assert first["request"] == {"email": "ann@example.com", "nested": [{"phone": "415 555 0100"}]}
            assert json.loads(first["response"]) == {"saved": "ann@example.com"}
            assert second["response"] == "plain ann@example.com"
        else:
            assert first["request"] == {"email": "[EMAIL]", "nested": [{"phone": "[PHONE_NUMBER]"}]}
            assert json.loads(first["response"]) == {"saved": "[EMAIL]"}
            assert second["response"] == "plain [EMAIL]"


def test_internationalised_and_written_out_emails_are_kept_out_of_the_call_record_and_its_analysis(
    make_agent, owner, django_capture_on_commit_callbacks
):
    from agents.analysis_plan import normalize_plan

    schema = {
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email", "description": "The caller's e-mail address"},
            "backup_email": {"type": "string", "format": "email", "description": "Another e-mail address"},
        },
    }
    agent = make_agent(
        owner.organization,
        status="active",
        redact_pii=["email"],
        analysis_plan=normalize_plan({"structuredData": {"schema": schema}}),
    )
    call = services.call_start(agent=agent, channel="web")
    services.call_message_add(call=call, role="user", content="My e-mail is maria@exämple.de.")
    services.call_message_add(call=call, role="user", content="Or write to maria (at) example (dot) com.")
    with django_capture_on_commit_callbacks(execute=True):
        services.call_finish(call=call, status="completed")

    detail = owner.client.get(f"/public/v1/calls/{call.pk}").json()
    assert [m["content"] for m in detail["messages"]] == ["My e-mail is [EMAIL].", "Or write to [EMAIL]."]
    assert "maria" not in json.dumps(detail, ensure_ascii=False)
    assert detail["analysis"]["status"] == "completed" and "structuredData" in detail["analysis"]["parts"]


def test_the_analysis_reads_the_transcript_redacted_when_redaction_was_turned_on_during_the_call(
    make_agent, owner, django_capture_on_commit_callbacks
):
    from agents.analysis_plan import normalize_plan

    schema = {
        "type": "object",
        "properties": {"birth_date": {"type": "string", "format": "date", "description": "The caller's birth date"}},
    }
    agent = make_agent(
        owner.organization, status="active", analysis_plan=normalize_plan({"structuredData": {"schema": schema}})
    )
    call = services.call_start(agent=agent, channel="web")
    services.call_message_add(call=call, role="user", content="I was born on March 3, 1990.")
    url = f"/public/v1/agents/{agent.pk}"
    stamp = owner.client.get(url).json()["updatedAt"]
    turned_on = owner.client.patch(url, {"expectedUpdatedAt": stamp, "redactPii": "all"}, format="json")
    assert turned_on.status_code == 200, turned_on.json()
    with django_capture_on_commit_callbacks(execute=True):
        services.call_finish(call=call, status="completed")

    detail = owner.client.get(f"/public/v1/calls/{call.pk}").json()
    assert detail["analysis"]["status"] == "completed"
    assert detail["analysis"]["structuredData"] == {}  # not the bare date "1990-03-03", which no rule would catch
    assert "1990" not in detail["summary"]


def test_agent_log_lines_are_redacted_at_any_depth_when_written(make_agent, owner):
    redacting = make_agent(owner.organization, name="Private", redact_pii="all")
    plain = make_agent(owner.organization, name="Plain")
    for agent in (redacting, plain):
        session = LogSession(organization_id=agent.organization_id, agent_id=agent.pk, session_id=new_session_id())
        agent_log(
            session,
            "warn",
            "caller said ann@example.com",
            reason="card 4111 1111 1111 1111 refused",
            detail={"phones": ["+1 415 555 0100"], "attempts": 2},
        )
    flush_agent_logs()
    stored = AgentLog.objects.get(agent=redacting).content
    assert stored == {
        "message": "caller said [EMAIL]",
        "reason": "card [CREDIT_CARD] refused",
        "detail": {"phones": ["[PHONE_NUMBER]"], "attempts": 2},
    }
    listed = owner.client.get(f"/public/v1/agents/{redacting.pk}/logs").json()["logs"]
    assert listed[0]["content"] == stored
    assert AgentLog.objects.get(agent=plain).content["reason"] == "card 4111 1111 1111 1111 refused"
