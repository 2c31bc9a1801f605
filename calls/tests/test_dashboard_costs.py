"""The dashboard's cost figures: a call page's ledger (its lines and total, or "not priced yet" while the
call is open) and the usage page's cost per day (a chart) and cost by agent of each organization."""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from calls.models import Call
from testing.factories import CallFactory

LEDGER = [
    {
        "product": "telephony",
        "provider": "twilio",
        "model": None,
        "quantity": 1.5,
        "unit": "minute",
        "unitPrice": 0.0085,
        "amount": 0.01275,
    },
    {
        "product": "llm",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "quantity": 930,
        "unit": "input_token",
        "unitPrice": 1.5e-07,
        "amount": 0.00014,
    },
]


@pytest.fixture
def superuser_client(client: Any, db: Any) -> Any:
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


@pytest.fixture
def viewer_client(db: Any) -> Any:
    """Staff who may see calls but not what was said in them."""
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_call"))
    client = Client()
    client.force_login(user)
    return client


def _priced(agent: Any, at: datetime, cost: str, *, currency: str = "USD", **fields: Any) -> Call:
    return CallFactory(
        agent=agent,
        started_at=at,
        ended_at=at + timedelta(seconds=90),
        status="completed",
        duration_seconds=90,
        costs=fields.pop("costs", []),
        cost_total=Decimal(cost),
        cost_currency=currency,
        **fields,
    )


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def _cost_section(client: Any, call: Call) -> str:
    response = client.get(f"/admin/calls/call/{call.pk}/change/")
    assert response.status_code == 200
    page = response.content.decode()
    start = page.index('<fieldset class="module cost">')
    return page[start : page.index("</fieldset>", start)]


# --- the call page ------------------------------------------------------------------------------------


def test_the_call_page_shows_the_ledger_lines_and_the_total(superuser_client, agent):
    call = _priced(agent, timezone.now() - timedelta(minutes=5), "0.012890", costs=LEDGER)

    section = _cost_section(superuser_client, call)

    assert "Product Provider Model Quantity Unit Unit price Amount" in _text(section)
    assert "telephony twilio - 1.5 minute 0.0085 0.012750" in _text(section)
    assert "llm openai gpt-4o-mini 930 input_token 0.00000015 0.000140" in _text(section)
    assert "Total 0.012890 USD" in _text(section)
    assert "Not priced" not in section


def test_an_open_call_is_not_priced_yet(superuser_client, agent):
    call = CallFactory(agent=agent, status="active")

    section = _cost_section(superuser_client, call)

    assert "Not priced yet: the call is priced when it ends." in section
    assert "cost-ledger" not in section and "Total" not in section


def test_staff_who_may_not_read_transcripts_still_see_the_cost(viewer_client, agent):
    call = _priced(agent, timezone.now() - timedelta(minutes=5), "0.012890", costs=LEDGER)

    section = _cost_section(viewer_client, call)

    assert "Total 0.012890 USD" in _text(section)


def test_an_ended_call_without_a_cost_says_so(superuser_client, agent):
    call = CallFactory(agent=agent, status="completed", ended_at=timezone.now())

    assert "Not priced: no cost was recorded for this call." in _cost_section(superuser_client, call)


# --- the usage page -----------------------------------------------------------------------------------


def _days_ago(days: int) -> datetime:
    today = timezone.now().astimezone(UTC).date()
    return datetime.combine(today - timedelta(days=days), time(10), UTC)


def _usage_row(page: str, organization_name: str) -> str:
    """The organization's row of the usage page's cost table (below the minutes table)."""
    table = page.index('class="usage-table usage-cost-table"')
    start = page.index(f">{organization_name}</a>", table)
    return page[start : page.index("</tr>", start)]


def test_the_usage_page_shows_cost_per_day_and_by_agent(superuser_client, owner, outsider, agent, make_agent):
    sales = make_agent(owner.organization, name="Sales", status="active")
    _priced(agent, _days_ago(3), "1.25")
    _priced(agent, _days_ago(3), "0.25")
    _priced(sales, _days_ago(1), "4")
    _priced(agent, _days_ago(31), "100")  # before the days shown
    _priced(agent, _days_ago(2), "2", currency="EUR")  # priced in another currency: apart
    CallFactory(agent=agent, started_at=_days_ago(0))  # open: not priced yet

    response = superuser_client.get("/admin/calls/call/usage/")
    page = response.content.decode()

    assert response.status_code == 200
    assert "Cost, last 30 days" in page and "Cost per day" in page and "Cost by agent" in page
    row = _usage_row(page, "Acme")
    three_days_ago, yesterday = _days_ago(3).date().isoformat(), _days_ago(1).date().isoformat()
    assert "5.50 USD" in _text(row) and "+ 2.00 EUR" in _text(row)
    assert row.count('class="usage-cost"') == 2
    assert f'<title>{three_days_ago}: 1.50 USD</title><rect class="usage-cost" data-day="{three_days_ago}"' in row
    assert f'<title>{yesterday}: 4.00 USD</title><rect class="usage-cost" data-day="{yesterday}"' in row
    assert "Sales : 4.00 (1 call) Support : 1.50 (2 calls)" in _text(row)
    assert f'href="/admin/calls/call/?agent={sales.pk}"' in row
    outsider_row = _usage_row(page, "Outsider Inc")
    assert "none priced" in _text(outsider_row) and 'class="usage-cost"' not in outsider_row
    assert page.count('<svg class="cost-chart"') == 2 and page.count('<svg class="usage-chart"') == 2


def test_the_usage_page_names_the_agents_of_the_highest_cost_and_how_many_more(superuser_client, owner, make_agent):
    for number in range(7):
        _priced(make_agent(owner.organization, name=f"Agent {number}"), _days_ago(1), f"{number + 1}")

    row = _usage_row(superuser_client.get("/admin/calls/call/usage/").content.decode(), "Acme")

    assert "Agent 6 : 7.00 (1 call) Agent 5 : 6.00" in _text(row) and "Agent 1" not in _text(row)
    assert "and 2 more agents" in _text(row)


def test_the_usage_pages_cost_figures_take_the_same_queries_for_more_organizations(
    superuser_client, owner, agent, make_persona, make_agent
):
    _priced(agent, _days_ago(1), "1")
    superuser_client.get("/admin/calls/call/usage/")  # warm-up (sessions, content types)
    with CaptureQueriesContext(connection) as few:
        superuser_client.get("/admin/calls/call/usage/")
    for name in ("Second", "Third", "Fourth"):
        _priced(make_agent(make_persona(name, "studio").organization, name=name), _days_ago(1), "1")

    with CaptureQueriesContext(connection) as more:
        page = superuser_client.get("/admin/calls/call/usage/").content.decode()

    assert page.count('class="usage-cost"') == 4
    assert len(more.captured_queries) == len(few.captured_queries)
