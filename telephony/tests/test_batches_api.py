"""Call batches through the REST API: creation (JSON and CSV), refusals that create nothing, reads with
counts, and pause/resume/cancel."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from calls.models import Call
from kit.schema import ERROR_SCHEMA
from telephony.campaigns.services import batch_tick
from telephony.models import CallBatch, CallBatchRecipient
from telephony.services.numbers import phone_number_claim

URL = "/public/v1/call-batches"
# The line the calls are placed from: outside the recipients' range (numbers()), its own number is refused.
LINE = "+14155560100"


@pytest.fixture
def agent(owner, make_agent):
    return make_agent(owner.organization, name="Ava", status="active", time_zone="Europe/Paris")


@pytest.fixture
def number(owner, outbound_ready):
    return phone_number_claim(organization=owner.organization, number=LINE, friendly_name="Line")


def numbers(count: int, start: int = 1000) -> list[str]:
    return [f"+1415555{n:04d}" for n in range(start, start + count)]


def payload(agent, number, **fields: Any) -> dict[str, Any]:
    return {
        "name": "Reminders",
        "agentId": str(agent.id),
        "phoneNumberId": str(number.id),
        "recipients": [{"to": to} for to in numbers(3)],
        **fields,
    }


def create(persona, data: dict[str, Any]):
    return persona.client.post(URL, data, format="json")


def assert_refused(response, status: int = 400) -> dict[str, Any]:
    assert response.status_code == status, response.json()
    assert not CallBatch.objects.exists()
    assert not CallBatchRecipient.objects.exists()
    return response.json()


def test_it_creates_a_batch_with_its_recipients(owner, agent, number):
    data = payload(
        agent,
        number,
        recipients=[
            {"to": "+1 (415) 555-1000", "variables": {"firstName": "Ana"}, "metadata": {"crm": 7}},
            {"to": "+14155551001"},
        ],
        startAt="2026-12-01T08:00:00Z",
        window={"days": ["fri", "mon"], "start": "09:00", "end": "17:30"},
        concurrency=3,
        retry={"maxAttempts": 3, "backoffMinutes": 30, "retryOn": ["busy", "no-answer"]},
    )

    response = create(owner, data)

    assert response.status_code == 201, response.json()
    batch = response.json()
    assert batch == {
        "id": batch["id"],
        "name": "Reminders",
        "agentId": str(agent.id),
        "phoneNumberId": str(number.id),
        "status": "scheduled",
        "startAt": "2026-12-01T08:00:00.000000Z",
        # Days in week order; the time zone is the agent's when not given.
        "window": {"days": ["mon", "fri"], "start": "09:00", "end": "17:30", "timeZone": "Europe/Paris"},
        "concurrency": 3,
        "retry": {"maxAttempts": 3, "backoffMinutes": 30, "retryOn": ["no-answer", "busy"]},
        "counts": {
            "total": 2,
            "done": 0,
            "pending": 2,
            "calling": 0,
            "completed": 0,
            "voicemail": 0,
            "noAnswer": 0,
            "busy": 0,
            "failed": 0,
            "canceled": 0,
        },
        "createdAt": batch["createdAt"],
        "completedAt": None,
    }
    rows = list(CallBatchRecipient.objects.filter(batch_id=batch["id"]).order_by("position"))
    assert [(r.to_number, r.variables, r.metadata) for r in rows] == [
        ("+14155551000", {"firstName": "Ana"}, {"crm": 7}),
        ("+14155551001", {}, None),
    ]
    assert owner.client.get(f"{URL}/{batch['id']}").json() == batch
    assert owner.client.get(URL).json() == [batch]


def test_defaults_are_concurrency_1_no_retry_and_any_time(owner, agent, number):
    batch = create(owner, payload(agent, number)).json()
    assert (batch["concurrency"], batch["window"], batch["startAt"]) == (1, None, None)
    assert batch["retry"] == {"maxAttempts": 1, "backoffMinutes": 10, "retryOn": ["no-answer", "busy"]}


def test_it_creates_a_batch_from_a_csv_upload(owner, agent, number):
    csv = "to,firstName,appointment\n+14155551000,Ana,Monday 9:00\n\n+1 415 555 1001,Bo,\n"
    response = owner.client.post(
        URL,
        {
            "name": "From CSV",
            "agentId": str(agent.id),
            "phoneNumberId": str(number.id),
            "concurrency": "2",
            "window": '{"start": "09:00", "end": "18:00", "timeZone": "America/New_York"}',
            "file": SimpleUploadedFile("list.csv", csv.encode(), content_type="text/csv"),
        },
        format="multipart",
    )

    assert response.status_code == 201, response.json()
    batch = response.json()
    assert batch["concurrency"] == 2 and batch["counts"]["total"] == 2
    assert batch["window"]["timeZone"] == "America/New_York" and len(batch["window"]["days"]) == 7
    rows = list(CallBatchRecipient.objects.filter(batch_id=batch["id"]).order_by("position"))
    assert [(r.to_number, r.variables) for r in rows] == [
        ("+14155551000", {"firstName": "Ana", "appointment": "Monday 9:00"}),
        ("+14155551001", {"firstName": "Bo"}),
    ]


def csv_upload(owner, agent, number, content: bytes):
    return owner.client.post(
        URL,
        {
            "name": "From CSV",
            "agentId": str(agent.id),
            "phoneNumberId": str(number.id),
            "file": SimpleUploadedFile("list.csv", content, content_type="text/csv"),
        },
        format="multipart",
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "The CSV file is empty"),
        (b"\n \n", "The CSV file is empty"),
        (b"phone,name\n+14155551000,Ana\n", "The CSV header needs a `to` column"),
        (b"to,name\n", "The CSV file has a header but no recipients"),
    ],
    ids=["empty", "blank-lines", "no-to-column", "header-only"],
)
def test_an_empty_csv_or_one_without_a_to_column_is_refused(owner, agent, number, content, message):
    body = assert_refused(csv_upload(owner, agent, number, content))
    assert message in body["error"] and message in body["issues"]["file"][0]


def test_invalid_csv_rows_are_all_listed_by_row(owner, agent, number):
    content = b"to,name\n+14155551000,Ana\n12345,Bo\n+14155551002,Cy\n+1415555,Di\n"
    body = assert_refused(csv_upload(owner, agent, number, content))
    assert body["error"].startswith("2 invalid CSV row(s) 2, 4: recipients.1.to:")
    assert set(body["issues"]) == {"recipients.1.to", "recipients.3.to"}


def test_invalid_numbers_are_all_listed_in_one_answer(owner, agent, number):
    recipients = [{"to": "+14155551000"}, {"to": "4155551001"}, {"to": "+1415555"}, {"to": 14155551003}]
    body = assert_refused(create(owner, body_of(agent, number, recipients)))
    assert set(body["issues"]) == {"recipients.1.to", "recipients.2.to", "recipients.3.to"}
    assert "E.164" in body["issues"]["recipients.1.to"][0]
    assert "not a valid phone number" in body["issues"]["recipients.2.to"][0]
    assert body["error"].startswith("3 invalid recipient(s) at index 1, 2, 3")


def body_of(agent, number, recipients):
    return payload(agent, number, recipients=recipients)


def test_rows_to_toll_fraud_ranges_own_numbers_and_other_countries_are_refused_by_row(owner, agent, number):
    recipients = [
        {"to": "+14155551000"},
        {"to": "+44 70 1234 5678"},  # a UK personal number
        {"to": "+881612345678"},  # a satellite phone
        {"to": LINE},  # the line the batch calls from
        {"to": "+44 20 7183 8750"},  # London: the organization's numbers are all American
    ]
    body = assert_refused(create(owner, body_of(agent, number, recipients)))
    assert set(body["issues"]) == {f"recipients.{i}.to" for i in (1, 2, 3, 4)}
    assert "a personal number" in body["issues"]["recipients.1.to"][0]
    assert "a satellite phone number (+881)" in body["issues"]["recipients.2.to"][0]
    assert "one of the organization's own numbers" in body["issues"]["recipients.3.to"][0]
    assert (
        "+442071838750 is in GB, outside the organization's destination countries (US)"
        in (body["issues"]["recipients.4.to"][0])
    )

    owner.client.patch("/public/v1/organization", {"outboundCountries": ["US", "GB"]}, format="json")
    accepted = create(owner, body_of(agent, number, [recipients[0], recipients[4]]))
    assert accepted.status_code == 201, accepted.json()


def test_bad_variables_are_named_with_their_row(owner, agent, number):
    recipients = [{"to": "+14155551000", "variables": {"n": 1}}, {"to": "+14155551001", "extra": True}]
    body = assert_refused(create(owner, body_of(agent, number, recipients)))
    assert body["issues"]["recipients.0.variables"] == ["The value of 'n' must be a string."]
    assert body["issues"]["recipients.1"] == ["Unknown field(s): extra."]


def test_duplicate_numbers_are_refused_with_the_list(owner, agent, number):
    recipients = [{"to": "+14155551000"}, {"to": "+1 415 555 1000"}, {"to": "+14155551001"}, {"to": "+14155551001"}]
    body = assert_refused(create(owner, body_of(agent, number, recipients)))
    assert body["code"] == "DUPLICATE_RECIPIENTS"
    assert body["duplicates"] == ["+14155551000", "+14155551001"]
    assert "+14155551000, +14155551001" in body["error"]


def test_more_than_10000_recipients_are_refused(owner, agent, number):
    recipients = [{"to": to} for to in numbers(10_001, start=0)]
    body = assert_refused(create(owner, body_of(agent, number, recipients)))
    assert body["issues"]["recipients"] == ["At most 10,000 recipients per batch, not 10,001."]


def test_no_recipients_is_refused(owner, agent, number):
    assert_refused(create(owner, body_of(agent, number, [])))


def test_a_number_of_another_organization_is_refused(owner, outsider, agent, outbound_ready):
    theirs = phone_number_claim(organization=outsider.organization, number="+14155550199")
    body = assert_refused(create(owner, payload(agent, theirs)))
    assert body["code"] == "PHONE_NUMBER_NOT_CLAIMED"
    assert "not one of the organization's claimed numbers" in body["error"]
    assert body["issues"] == {"phoneNumberId": ["Not a claimed number of this organization."]}


def test_a_released_number_is_refused(owner, agent, outbound_ready):
    released = phone_number_claim(organization=owner.organization, number="+14155550101", status="released")
    assert assert_refused(create(owner, payload(agent, released)))["code"] == "PHONE_NUMBER_NOT_CLAIMED"


def test_an_inactive_agent_is_refused(owner, make_agent, number):
    inactive = make_agent(owner.organization, name="Off", status="inactive")
    body = assert_refused(create(owner, payload(inactive, number)))
    assert body["code"] == "AGENT_NOT_ACTIVE"
    assert body["error"] == "The agent is inactive, not active: only an active agent can place calls."


def test_an_agent_of_another_organization_is_not_found(owner, outsider, make_agent, number):
    theirs = make_agent(outsider.organization, status="active")
    assert assert_refused(create(owner, payload(theirs, number)), 404)["error"] == "Agent not found"


@pytest.mark.parametrize(
    ("window", "field", "message"),
    [
        ({"start": "17:00", "end": "09:00"}, "window.end", "end must be after start"),
        ({"start": "09:00", "end": "09:00"}, "window.end", "end must be after start"),
        ({"start": "9:00", "end": "17:00"}, "window.start", 'Must be a time of day "HH:MM"'),
        ({"start": "09:00", "end": "25:00"}, "window.end", 'Must be a time of day "HH:MM"'),
        ({"days": ["monday"], "start": "09:00", "end": "17:00"}, "window.days", "Must be a non-empty list"),
        ({"days": [], "start": "09:00", "end": "17:00"}, "window.days", "Must be a non-empty list"),
        ({"start": "09:00", "end": "17:00", "timeZone": "Mars/Olympus"}, "window.timeZone", "IANA time zone"),
        ({"start": "09:00", "end": "17:00", "timeZone": "localtime"}, "window.timeZone", "Unknown time zone"),
        ({"start": "09:00", "end": "17:00", "timeZone": "US/Pacific"}, "window.timeZone", "use America/Los_Angeles"),
    ],
    ids=["end-before-start", "end-at-start", "bad-start", "bad-end", "bad-day", "no-day", "bad-zone", "local", "alias"],
)
def test_a_bad_window_is_refused(owner, agent, number, window, field, message):
    body = assert_refused(create(owner, payload(agent, number, window=window)))
    assert message in body["issues"][field][0]
    assert body["error"].startswith(f"Invalid {field}: ")


@pytest.mark.parametrize(
    ("retry", "field"),
    [
        ({"maxAttempts": 6}, "retry.maxAttempts"),
        ({"maxAttempts": 0}, "retry.maxAttempts"),
        ({"backoffMinutes": -1}, "retry.backoffMinutes"),
        ({"retryOn": ["completed"]}, "retry.retryOn"),
        ({"tries": 2}, "retry"),
    ],
)
def test_a_bad_retry_is_refused(owner, agent, number, retry, field):
    assert field in assert_refused(create(owner, payload(agent, number, retry=retry)))["issues"]


def test_concurrency_is_capped_by_the_plan(owner, agent, number):
    owner.organization.plan.max_outbound_calls = 5
    owner.organization.plan.save()
    body = assert_refused(create(owner, payload(agent, number, concurrency=6)))
    assert body["issues"]["concurrency"] == [
        "Must be an integer from 1 to 5 (your plan places at most 5 outbound calls at once)."
    ]
    assert create(owner, payload(agent, number, concurrency=5)).status_code == 201


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"window": {"start": "17:00", "end": "09:00"}}, "window.end"),
        ({"window": {"start": "09:00", "end": "17:00", "timeZone": "Mars/Olympus"}}, "window.timeZone"),
        ({"window": {"start": "09:00", "end": "17:00", "shift": 1}}, "window"),
        ({"retry": {"maxAttempts": 6}}, "retry.maxAttempts"),
        ({"recipients": [{"to": "+1415555"}]}, "recipients.0.to"),
        ({"recipients": [{"to": "+14155551000", "name": "Ana"}]}, "recipients.0"),
        ({"recipients": [{"to": "+14155551000"}, {"to": "+14155551000"}]}, "recipients"),
    ],
    ids=["window-end", "window-zone", "window-field", "retry", "recipient-number", "recipient-field", "duplicates"],
)
def test_a_malformed_body_is_refused_before_the_service_configuration_is_checked(
    owner, agent, number, settings, fields, field
):
    # Schemathesis: a malformed body was answered 503 TELEPHONY_NOT_CONFIGURED on a service that cannot
    # place calls. The body is checked first: a 400 in the contract's error shape.
    settings.PUBLIC_BASE_URL = ""
    body = assert_refused(create(owner, payload(agent, number, **fields)))
    assert body.get("code") != "TELEPHONY_NOT_CONFIGURED"
    assert set(body) <= set(ERROR_SCHEMA["properties"]) and isinstance(body["error"], str)
    assert field in body["issues"]
    assert all(isinstance(m, str) for messages in body["issues"].values() for m in messages)
    # A well-formed body on this service: its configuration is what is refused.
    assert assert_refused(create(owner, payload(agent, number)), 503)["code"] == "TELEPHONY_NOT_CONFIGURED"


def test_a_plan_without_outbound_calls_is_refused(owner, agent, number):
    owner.organization.plan.max_outbound_calls = 0
    owner.organization.plan.save()
    assert assert_refused(create(owner, payload(agent, number)), 403)["code"] == "OUTBOUND_NOT_ALLOWED"


def test_another_organization_sees_no_batch(owner, outsider, agent, number):
    batch = create(owner, payload(agent, number)).json()
    assert outsider.client.get(URL).json() == []
    for path in ("", "/calls"):
        assert outsider.client.get(f"{URL}/{batch['id']}{path}").status_code == 404
    assert outsider.client.post(f"{URL}/{batch['id']}/cancel").status_code == 404
    assert owner.client.get(f"{URL}/not-a-uuid").status_code == 400


def test_the_list_pages_and_filters_by_status(owner, agent, number):
    ids = [create(owner, payload(agent, number, name=f"B{i}")).json()["id"] for i in range(3)]
    owner.client.post(f"{URL}/{ids[0]}/pause")
    assert [b["id"] for b in owner.client.get(URL, {"limit": 2}).json()] == ids[:0:-1]
    assert [b["id"] for b in owner.client.get(URL, {"limit": 2, "offset": 2}).json()] == [ids[0]]
    assert [b["id"] for b in owner.client.get(URL, {"status": "paused"}).json()] == [ids[0]]
    assert owner.client.get(URL, {"limit": 0}).status_code == 400


def test_pause_resume_cancel_follow_the_status(owner, agent, number):
    batch_id = create(owner, payload(agent, number)).json()["id"]

    def act(action: str):
        return owner.client.post(f"{URL}/{batch_id}/{action}")

    assert act("resume").status_code == 409
    assert act("pause").json()["status"] == "paused"
    assert batch_tick() == 0  # paused: nothing is placed
    conflict = act("pause")
    assert conflict.status_code == 409
    assert conflict.json() == {
        "error": "A paused batch cannot be paused; only a scheduled or running one.",
        "code": "BATCH_STATUS_CONFLICT",
        "status": "paused",
    }
    assert act("resume").json()["status"] == "scheduled"  # nothing placed yet
    canceled = act("cancel").json()
    assert canceled["status"] == "canceled"
    assert canceled["counts"]["canceled"] == canceled["counts"]["done"] == 3
    assert canceled["completedAt"] is not None
    assert act("cancel").status_code == 409 and act("pause").status_code == 409
    assert batch_tick() == 0 and not Call.objects.exists()


def test_the_batch_calls_are_listed_as_call_summaries(owner, agent, number):
    batch_id = create(owner, payload(agent, number, concurrency=2)).json()["id"]
    assert batch_tick() == 2
    calls = owner.client.get(f"{URL}/{batch_id}/calls").json()
    assert sorted(c["toNumber"] for c in calls) == numbers(2)
    assert {(c["status"], c["fromNumber"], c["agentId"], c["channel"]) for c in calls} == {
        ("queued", LINE, str(agent.id), "phone")
    }
    running = owner.client.get(f"{URL}/{batch_id}").json()
    assert running["status"] == "running"
    assert (running["counts"]["calling"], running["counts"]["pending"]) == (2, 1)


def test_an_agent_with_an_unfinished_batch_is_not_deleted_and_a_finished_one_goes_with_it(owner, agent, number):
    batch_id = create(owner, payload(agent, number)).json()["id"]
    assert batch_tick() == 1
    refused = owner.client.delete(f"/public/v1/agents/{agent.id}")
    assert refused.status_code == 409
    assert refused.json()["code"] == "AGENT_HAS_CALL_BATCHES" and "Reminders" in refused.json()["error"]
    owner.client.post(f"{URL}/{batch_id}/cancel")
    assert owner.client.delete(f"/public/v1/agents/{agent.id}").status_code == 200
    assert not CallBatch.objects.exists()
    assert Call.objects.get().agent_id is None  # the call stays in the history


def test_csv_columns_must_be_variable_names(owner, agent, number):
    body = assert_refused(csv_upload(owner, agent, number, b"to,first name\n+14155551000,Ana\n"))
    assert "not valid variable names: first name" in body["issues"]["file"][0]


def test_nothing_is_placed_while_the_agent_is_not_active(owner, agent, number):
    create(owner, payload(agent, number))
    agent.status = "inactive"
    agent.save(update_fields=["status"])
    assert batch_tick() == 0
    agent.status = "active"
    agent.save(update_fields=["status"])
    assert batch_tick() == 1


def test_the_recipients_are_listed_with_their_state_and_latest_call(owner, agent, number):
    batch_id = create(
        owner, payload(agent, number, recipients=[{"to": "+14155551000", "variables": {"a": "1"}, "metadata": [1]}])
    ).json()["id"]
    [pending] = owner.client.get(f"{URL}/{batch_id}/recipients").json()
    assert pending == {
        "id": pending["id"],
        "position": 0,
        "to": "+14155551000",
        "variables": {"a": "1"},
        "metadata": [1],
        "state": "pending",
        "outcome": None,
        "attempts": 0,
        "nextAttemptAt": None,
        "lastCallId": None,
    }
    batch_tick()
    [calling] = owner.client.get(f"{URL}/{batch_id}/recipients", {"state": "calling"}).json()
    assert calling["attempts"] == 1 and calling["lastCallId"] == str(Call.objects.get().pk)
    assert owner.client.get(f"{URL}/{batch_id}/recipients", {"outcome": "busy"}).json() == []
    assert owner.client.get(f"{URL}/{batch_id}/recipients", {"state": "nope"}).status_code == 400


def test_10000_recipients_are_accepted(owner, agent, number):
    recipients = [{"to": to, "variables": {"n": str(i)}} for i, to in enumerate(numbers(10_000, start=0))]
    response = create(owner, body_of(agent, number, recipients))
    assert response.status_code == 201, response.json()
    assert response.json()["counts"]["total"] == CallBatchRecipient.objects.count() == 10_000
