"""GET/PUT /public/v1/pricing: the organization's price book and the service's default (PRICE_BOOK), the
rules a bad book meets, and the ledger a call gets from the book in force when it started (docs/costs.md)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from calls import services
from calls.models import Call, PriceBook
from kit.fields import iso
from testing.commands import documented_production_env, manage
from testing.dashboard import errors

PRICES = [
    {"product": "telephony", "provider": "twilio", "model": "inbound", "unit": "minute", "unitPrice": 0.0085},
    {"product": "telephony", "provider": "*", "unit": "second", "unitPrice": 0.0002},
    {"product": "llm", "provider": "openai", "model": "gpt-4o-mini", "unit": "input_token", "unitPrice": 1.5e-7},
]


def put(persona: Any, body: Any) -> Any:
    return persona.client.put("/public/v1/pricing", body, format="json")


def test_without_a_book_of_its_own_an_organization_sees_the_services_default(owner, settings):
    answer = owner.client.get("/public/v1/pricing").json()
    assert answer == {"currency": "USD", "items": [], "effectiveFrom": None, "source": "service", "scheduled": None}

    settings.PRICE_BOOK = json.dumps({"currency": "GBP", "items": PRICES[:1]})
    answer = owner.client.get("/public/v1/pricing").json()
    assert (answer["currency"], answer["source"], answer["items"]) == ("GBP", "service", PRICES[:1])


def test_a_book_put_is_in_force_for_that_organization_only(owner, outsider):
    response = put(owner, {"currency": "EUR", "items": PRICES})
    assert response.status_code == 200, response.json()
    answer = response.json()
    assert answer["source"] == "organization" and answer["currency"] == "EUR"
    assert answer["items"] == [{**PRICES[0]}, {**PRICES[1], "model": None}, PRICES[2]]  # model null: any
    assert owner.client.get("/public/v1/pricing").json() == answer
    assert outsider.client.get("/public/v1/pricing").json()["source"] == "service"


def test_a_book_may_be_scheduled_and_takes_effect_then(owner):
    put(owner, {"currency": "EUR", "items": PRICES[:1]})
    later = timezone.now() + timedelta(days=3)
    answer = put(owner, {"currency": "EUR", "items": PRICES, "effectiveFrom": iso(later)}).json()
    assert answer["items"] == PRICES[:1]  # still the book in force
    assert answer["scheduled"]["effectiveFrom"] == iso(later) and len(answer["scheduled"]["items"]) == 3


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"currency": "usd", "items": []}, "currency"),
        ({"currency": "EURO", "items": []}, "currency"),
        ({"items": []}, "currency"),
        ({"currency": "USD"}, "items"),
        ({"currency": "USD", "items": {"product": "tts"}}, "items"),
        ({"currency": "USD", "items": [{**PRICES[0], "product": "fax"}]}, "items.0.product"),
        ({"currency": "USD", "items": [PRICES[2], {**PRICES[0], "unit": "hour"}]}, "items.1.unit"),
        ({"currency": "USD", "items": [{**PRICES[0], "unit": "character"}]}, "items.0.unit"),  # not per character
        ({"currency": "USD", "items": [{**PRICES[0], "unitPrice": -0.01}]}, "items.0.unitPrice"),
        ({"currency": "USD", "items": [{**PRICES[0], "unitPrice": "0.01"}]}, "items.0.unitPrice"),
        ({"currency": "USD", "items": [{**PRICES[0], "unitPrice": True}]}, "items.0.unitPrice"),
        ({"currency": "USD", "items": [{**PRICES[0], "unitPrice": None}]}, "items.0.unitPrice"),
        ({"currency": "USD", "items": [{**PRICES[0], "provider": ""}]}, "items.0.provider"),
        ({"currency": "USD", "items": [{**PRICES[0], "model": 4}]}, "items.0.model"),
        ({"currency": "USD", "items": [PRICES[0], PRICES[0]]}, "items.1"),
        ({"currency": "USD", "items": ["telephony"]}, "items.0"),
        ({"currency": "USD", "items": [], "effectiveFrom": "2020-01-01T00:00:00Z"}, "effectiveFrom"),
        ({"currency": "USD", "items": [], "effectiveFrom": "tomorrow"}, "effectiveFrom"),
        ({"currency": "USD", "items": [], "effectiveFrom": "9999-12-31T23:59:59-05:00"}, "effectiveFrom"),
        ({"currency": "USD", "items": [], "effectiveFrom": "2030-02-30T00:00:00Z"}, "effectiveFrom"),
        ({"currency": "USD", "items": [], "effectiveFrom": "2030-01-01T00:00:00"}, "effectiveFrom"),  # no offset
        (["USD"], "body"),
    ],
)
def test_a_bad_book_is_a_400_naming_the_field_and_nothing_changes(owner, body, field):
    response = put(owner, body)
    assert response.status_code == 400, response.json()
    assert field in response.json()["issues"], response.json()
    assert owner.client.get("/public/v1/pricing").json()["source"] == "service"


def test_a_call_is_priced_by_the_book_in_force_when_it_started(owner, make_agent, settings):
    settings.PRICE_BOOK = json.dumps({"currency": "USD", "items": PRICES[1:2]})
    agent = make_agent(owner.organization, status="active")

    def phone_call(seconds: int) -> Call:
        call = services.call_start(agent=agent, channel="phone", from_number="+14155550100", carrier="telnyx")
        Call.objects.filter(pk=call.pk).update(started_at=timezone.now() - timedelta(seconds=seconds, milliseconds=300))
        call.refresh_from_db()
        return call

    put(owner, {"currency": "EUR", "items": [{**PRICES[1], "unitPrice": 0.0003}]})
    PriceBook.objects.update(effective_from=timezone.now() - timedelta(seconds=60))  # a minute ago
    before, after = phone_call(90), phone_call(30)
    for call in (before, after):
        services.call_finish(call=call, status="completed")
    first, second = (owner.client.get(f"/public/v1/calls/{c.pk}").json() for c in (before, after))
    assert first["costs"] == [
        {
            "product": "telephony",
            "provider": "telnyx",
            "model": "inbound",
            "quantity": 90.0,
            "unit": "second",
            "unitPrice": 0.0002,
            "amount": 0.018,
        }
    ]
    assert first["cost"] == {"total": 0.018, "currency": "USD"}  # the service's book: the call began before
    assert second["cost"] == {"total": 0.009, "currency": "EUR"}  # 30 s at 0.0003


def test_an_open_call_has_no_cost_yet(owner, make_agent):
    call = services.call_start(agent=make_agent(owner.organization, status="active"), channel="web")
    detail = owner.client.get(f"/public/v1/calls/{call.pk}").json()
    assert (detail["costs"], detail["cost"]) == ([], {"total": None, "currency": None})


def test_a_bad_service_book_stops_the_start_naming_the_field():
    env = {**documented_production_env(), "PRICE_BOOK": json.dumps({"currency": "USD", "items": [{"product": "fax"}]})}
    result = manage("check", env=env)
    assert result.returncode != 0
    assert "PRICE_BOOK" in result.stderr and "items.0.product" in result.stderr, result.stderr


# --- the dashboard --------------------------------------------------------------------------------------

ADD = "/admin/calls/pricebook/add/"


@pytest.fixture
def staff(client, db):
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


def test_the_dashboard_adds_a_book_through_the_apis_rules_and_shows_its_prices(staff, owner):
    form = {"organization": str(owner.organization.pk), "currency": "eur", "items": json.dumps(PRICES)}
    refused = staff.post(ADD, form)
    assert refused.status_code == 200 and "three-letter ISO 4217 code" in " ".join(errors(refused.content.decode()))
    assert not PriceBook.objects.exists()

    refused = staff.post(ADD, {**form, "currency": "EUR", "items": json.dumps([{**PRICES[0], "unitPrice": -1}])})
    assert "unitPrice must not be negative" in " ".join(errors(refused.content.decode()))

    added = staff.post(ADD, {**form, "currency": "EUR"})
    assert added.status_code == 302, errors(added.content.decode())
    (book,) = PriceBook.objects.all()
    assert owner.client.get("/public/v1/pricing").json()["items"][0] == PRICES[0]
    page = staff.get(f"/admin/calls/pricebook/{book.pk}/change/").content.decode()
    assert "gpt-4o-mini" in page and "0.0085" in page
    # In force: calls are priced by it, so it cannot be deleted.
    assert staff.get(f"/admin/calls/pricebook/{book.pk}/delete/").status_code == 403
