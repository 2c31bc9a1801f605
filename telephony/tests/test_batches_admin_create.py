"""Dashboard: adding a campaign (a call batch) with its recipients as a CSV upload, through the API's request
serializer and service: the same campaign as POST /call-batches makes, the API's refusals on the form's
fields with nothing written; and the dashboard's one word for the feature, "campaigns"."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile

from telephony.models import CallBatch, CallBatchRecipient
from telephony.services.numbers import phone_number_claim
from testing.dashboard import errors

ADD = "/admin/telephony/callbatch/add/"
CSV = "to,firstName,appointment\n+1 (415) 555-0123,Ana,Monday 9:00\n+14155550124,Bo,\n"


@pytest.fixture
def staff(client, db):
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


@pytest.fixture
def origin(outbound_ready, make_agent):
    agent = make_agent(outbound_ready.organization, name="Ava", status="active", time_zone="Europe/Madrid")
    number = phone_number_claim(organization=outbound_ready.organization, number="+14155550100")
    return outbound_ready, agent, number


def add_form(origin, csv=CSV, **changes):
    owner, agent, number = origin
    form = {
        "organization": str(owner.organization.pk),
        "name": "Reminders",
        "agent": str(agent.pk),
        "phone_number": str(number.pk),
        "recipients_file": SimpleUploadedFile("list.csv", csv.encode(), content_type="text/csv"),
        "start_at_0": "",
        "start_at_1": "",
        "window_days": ["mon", "tue", "wed", "thu", "fri"],
        "window_start": "09:00",
        "window_end": "18:00",
        "window_time_zone": "",
        "concurrency": "3",
        "retry_max_attempts": "2",
        "retry_backoff_minutes": "60",
        "retry_on": ["busy", "no-answer"],
    }
    form.update(changes)
    return {name: value for name, value in form.items() if value is not None}


def nothing_written() -> bool:
    return not CallBatch.objects.exists() and not CallBatchRecipient.objects.exists()


def test_the_list_has_an_add_button_and_the_dashboard_says_campaigns(staff):
    listing = staff.get("/admin/telephony/callbatch/").content.decode()
    assert f'href="{ADD}"' in listing and "Add campaign" in listing
    assert "<h1>Select campaign to change</h1>" in listing or "Campaigns" in listing
    home = staff.get("/admin/").content.decode()
    assert ">Campaigns<" in home and "atchs" not in home and "Call batch" not in home
    page = staff.get(ADD)
    assert page.status_code == 200 and 'enctype="multipart/form-data"' in page.content.decode()
    html = page.content.decode()
    assert "Add campaign" in html
    for name in (
        "organization",
        "name",
        "agent",
        "phone_number",
        "recipients_file",
        "window_days",
        "window_start",
        "window_end",
        "window_time_zone",
        "start_at_0",
        "concurrency",
        "retry_max_attempts",
        "retry_backoff_minutes",
        "retry_on",
    ):
        assert f'name="{name}"' in html, name


def test_a_campaign_made_from_a_csv_is_the_one_the_api_makes(staff, origin):
    owner, agent, number = origin
    response = staff.post(ADD, add_form(origin), follow=True)
    assert response.status_code == 200
    page = response.content.decode()
    made = CallBatch.objects.get()
    assert response.redirect_chain[-1][0] == f"/admin/telephony/callbatch/{made.pk}/change/"
    assert "The campaign “Reminders” was added with 2 recipients; it is scheduled." in page
    assert "+14155550123" in page and "firstName=Ana" in page

    # The same fields through the API's multipart form.
    api = owner.client.post(
        "/public/v1/call-batches",
        {
            "name": "Reminders",
            "agentId": str(agent.pk),
            "phoneNumberId": str(number.pk),
            "concurrency": "3",
            "window": '{"days":["mon","tue","wed","thu","fri"],"start":"09:00","end":"18:00"}',
            "retry": '{"maxAttempts":2,"backoffMinutes":60,"retryOn":["busy","no-answer"]}',
            "file": SimpleUploadedFile("list.csv", CSV.encode(), content_type="text/csv"),
        },
        format="multipart",
    )
    assert api.status_code == 201, api.json()
    ours = owner.client.get(f"/public/v1/call-batches/{made.pk}").json()
    theirs = dict(api.json())
    for varying in ("id", "createdAt"):
        ours.pop(varying), theirs.pop(varying)
    assert ours == theirs
    assert ours["window"]["timeZone"] == "Europe/Madrid" and ours["status"] == "scheduled"

    def rows(batch_id):
        listed = owner.client.get(f"/public/v1/call-batches/{batch_id}/recipients").json()
        return [(r["position"], r["to"], r["variables"], r["state"]) for r in listed]

    assert (
        rows(made.pk)
        == rows(api.json()["id"])
        == [
            (0, "+14155550123", {"firstName": "Ana", "appointment": "Monday 9:00"}, "pending"),
            (1, "+14155550124", {"firstName": "Bo"}, "pending"),
        ]
    )


def test_defaults_any_time_one_at_a_time_no_retry(staff, origin):
    owner, _, _ = origin
    form = add_form(
        origin,
        window_days=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        window_start="",
        window_end="",
        concurrency="",
        retry_max_attempts="",
        retry_backoff_minutes="",
        retry_on=["no-answer", "busy"],
    )
    assert staff.post(ADD, form).status_code == 302
    made = owner.client.get("/public/v1/call-batches").json()[0]
    assert made["window"] is None and made["concurrency"] == 1
    assert made["retry"] == {"maxAttempts": 1, "backoffMinutes": 10, "retryOn": ["no-answer", "busy"]}


def field_errors(page: str, field: str) -> list[str]:
    block = re.search(
        rf'<div class="form-row[^"]*errors[^"]*field-{field}">\s*<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', page, re.S
    )
    assert block, f"no error on {field}: {errors(page)}"
    return [
        html.unescape(re.sub(r"<[^>]+>", "", item)).strip()
        for item in re.findall(r"<li>(.*?)</li>", block.group(1), re.S)
    ]


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        (
            {"csv": "to,firstName\n+14155550123,Ana\n12345,Bo\n"},
            "recipients_file",
            "1 invalid CSV row(s) 2: recipients.1.to",
        ),
        ({"csv": "to\n+14155550123\n+1 415 555 0123\n"}, "recipients_file", "Duplicate numbers: +14155550123"),
        ({"csv": "phone\n+14155550123\n"}, "recipients_file", "The CSV header needs a `to` column"),
        ({"csv": " \n"}, "recipients_file", "The CSV file is empty"),
        ({"window_end": "08:00"}, "window_end", "end must be after start"),
        ({"window_start": "9am"}, "window_start", 'Must be a time of day "HH:MM"'),
        ({"window_time_zone": "Mars/Base"}, "window_time_zone", ""),
        ({"window_days": None}, "window_days", "Must be a non-empty list"),
        ({"concurrency": "500"}, "concurrency", ""),
        ({"retry_max_attempts": "9"}, "retry_max_attempts", "Must be an integer from 1 to 5"),
        ({"retry_backoff_minutes": "-1"}, "retry_backoff_minutes", "Must be an integer from 0 to"),
        ({"name": ""}, "name", ""),
    ],
)
def test_the_apis_refusal_is_shown_on_its_field_and_nothing_is_written(staff, origin, changes, field, message):
    csv = changes.pop("csv", CSV)
    response = staff.post(ADD, add_form(origin, csv=csv, **changes))
    assert response.status_code == 200
    shown = field_errors(response.content.decode(), field)
    assert any(message in line for line in shown), shown
    assert nothing_written()


def test_a_bad_row_names_its_csv_row(staff, origin):
    page = staff.post(ADD, add_form(origin, csv="to,firstName\n+14155550123,Ana\n12345,Bo\n")).content.decode()
    shown = field_errors(page, "recipients_file")
    assert any(line.startswith("Row 2, to: ") and "12345" in line for line in shown), shown


def test_the_agent_and_number_are_checked_as_the_api_checks_them(staff, origin, outsider, make_agent):
    owner, _, _ = origin
    draft = make_agent(owner.organization, name="Draft", status="draft")
    page = staff.post(ADD, add_form(origin, agent=str(draft.pk))).content.decode()
    assert any("not active" in line for line in field_errors(page, "agent"))

    theirs = make_agent(outsider.organization, name="Theirs", status="active")
    page = staff.post(ADD, add_form(origin, agent=str(theirs.pk))).content.decode()
    assert any("not found" in line.lower() for line in field_errors(page, "agent"))

    other_number = phone_number_claim(organization=outsider.organization, number="+14155550199")
    page = staff.post(ADD, add_form(origin, phone_number=str(other_number.pk))).content.decode()
    assert field_errors(page, "phone_number") == ["Not a claimed number of this organization."]
    assert nothing_written()


def test_a_plan_without_outbound_calls_is_refused_on_the_form(staff, origin):
    owner, _, _ = origin
    plan = owner.organization.plan
    plan.max_outbound_calls = 0
    plan.save()
    page = staff.post(ADD, add_form(origin)).content.decode()
    assert any("does not include outbound calls" in line for line in field_errors(page, "organization"))
    assert nothing_written()
