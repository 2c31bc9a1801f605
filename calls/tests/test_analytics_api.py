"""GET /public/v1/analytics/calls: calls, minutes and cost grouped by agent, day, direction, a variable or a
metadata key, over a range of the calls' start, for the API key's organization only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from calls.analytics import selectors
from calls.models import Call, PriceBook
from testing.factories import CallFactory

URL = "/public/v1/analytics/calls"
# A range in the past, whole UTC days: 2 days from a Monday's 00:00.
MONDAY = datetime(2025, 3, 3, tzinfo=UTC)
RANGE = "from=2025-03-03&to=2025-03-05"


def _call(agent: Any, at: datetime, *, seconds: int = 60, cost: str | None = "0.5", **fields: Any) -> Call:
    """A call of `agent` that started at `at`: ended and priced (`cost` in USD unless told), or open (`cost`
    None: no seconds yet, no cost)."""
    if cost is None:
        return CallFactory(agent=agent, started_at=at, status="active", **fields)
    fields.setdefault("cost_currency", "USD")
    return CallFactory(
        agent=agent,
        started_at=at,
        ended_at=at + timedelta(seconds=seconds),
        status="completed",
        duration_seconds=seconds,
        cost_total=Decimal(cost),
        **fields,
    )


def _get(persona: Any, query: str) -> dict[str, Any]:
    response = persona.client.get(f"{URL}?{query}")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def sales(owner: Any, make_agent: Any) -> Any:
    return make_agent(owner.organization, name="Sales", status="active")


def test_grouped_by_agent_each_agent_has_its_calls_minutes_and_cost(owner, agent, sales):
    _call(agent, MONDAY + timedelta(hours=9), seconds=90, cost="0.25")
    _call(agent, MONDAY + timedelta(hours=10), seconds=30, cost="0.125001")
    _call(agent, MONDAY + timedelta(hours=11), cost=None)  # open: counted, no minutes or cost yet
    _call(sales, MONDAY + timedelta(days=1, hours=8), seconds=200, cost="1.5")

    body = _get(owner, f"{RANGE}&groupBy=agent")

    assert body["from"] == "2025-03-03T00:00:00.000000Z" and body["to"] == "2025-03-05T00:00:00.000000Z"
    assert body["groupBy"] == "agent" and body["currency"] == "USD" and body["truncated"] is False
    assert body["rows"] == [  # highest cost first
        {"group": str(sales.pk), "label": "Sales", "calls": 1, "minutes": 3.33, "cost": 1.5},
        {"group": str(agent.pk), "label": "Support", "calls": 3, "minutes": 2.0, "cost": 0.375001},
    ]
    assert body["total"] == {"calls": 4, "minutes": 5.33, "cost": 1.875001, "otherCurrencies": {}}


def test_agent_is_the_default_grouping_and_deleted_agents_calls_group_as_null(owner, agent, sales):
    _call(agent, MONDAY, cost="1")
    _call(sales, MONDAY, cost="2")
    sales.delete()  # its calls stay, with agent = NULL

    body = _get(owner, RANGE)

    assert body["groupBy"] == "agent"
    assert body["rows"] == [
        {"group": None, "label": None, "calls": 1, "minutes": 1.0, "cost": 2.0},
        {"group": str(agent.pk), "label": "Support", "calls": 1, "minutes": 1.0, "cost": 1.0},
    ]


def test_grouped_by_day_the_utc_days_in_order(owner, agent):
    _call(agent, MONDAY, cost="0.1")  # the range's first moment: counted
    _call(agent, MONDAY + timedelta(hours=23, minutes=59, seconds=59), cost="0.2")
    _call(agent, MONDAY + timedelta(days=1), seconds=120, cost="0.3")
    _call(agent, MONDAY + timedelta(days=2), cost="5")  # the range's end is excluded
    _call(agent, MONDAY - timedelta(microseconds=1), cost="5")  # before it

    body = _get(owner, f"{RANGE}&groupBy=day")

    assert body["rows"] == [
        {"group": "2025-03-03", "calls": 2, "minutes": 2.0, "cost": 0.3},
        {"group": "2025-03-04", "calls": 1, "minutes": 2.0, "cost": 0.3},
    ]
    assert body["total"]["calls"] == 3 and body["total"]["cost"] == 0.6


def test_grouped_by_direction(owner, agent):
    _call(agent, MONDAY, cost="0.5")
    _call(agent, MONDAY, cost="0.5", direction="inbound")
    _call(agent, MONDAY, seconds=600, cost="3", direction="outbound")

    body = _get(owner, f"{RANGE}&groupBy=direction")

    assert body["rows"] == [
        {"group": "outbound", "calls": 1, "minutes": 10.0, "cost": 3.0},
        {"group": "inbound", "calls": 2, "minutes": 2.0, "cost": 1.0},
    ]


def test_grouped_by_a_variable_across_customers(owner, agent, sales):
    for customer, costs in {"c-1": ["1", "2"], "c-2": ["0.5"], "c-3": ["0.25", "0.25", "0.25"]}.items():
        for cost in costs:
            _call(sales if customer == "c-2" else agent, MONDAY, cost=cost, variables={"customerId": customer})
    _call(agent, MONDAY, cost="0.1", variables={"other": "x"})  # without the variable
    _call(agent, MONDAY, cost="0.2")

    body = _get(owner, f"{RANGE}&groupBy=variable.customerId")

    assert body["groupBy"] == "variable.customerId"
    assert body["rows"] == [
        {"group": "c-1", "calls": 2, "minutes": 2.0, "cost": 3.0},
        {"group": "c-3", "calls": 3, "minutes": 3.0, "cost": 0.75},
        {"group": "c-2", "calls": 1, "minutes": 1.0, "cost": 0.5},
        {"group": None, "calls": 2, "minutes": 2.0, "cost": 0.3},
    ]
    assert body["total"] == {"calls": 8, "minutes": 8.0, "cost": 4.55, "otherCurrencies": {}}


def test_grouped_by_a_metadata_key_its_value_as_text(owner, agent):
    _call(agent, MONDAY, cost="2", metadata={"plan": "gold", "seats": 3})
    _call(agent, MONDAY, cost="1", metadata={"plan": "gold"})
    _call(agent, MONDAY, cost="0.5", metadata={"plan": "basic"})
    _call(agent, MONDAY, cost="0.1", metadata={"plan": None})  # a JSON null: as without the key
    _call(agent, MONDAY, cost="0.1", metadata=["plan"])  # not an object
    _call(agent, MONDAY, cost="0.1")  # no metadata

    assert _get(owner, f"{RANGE}&groupBy=metadata.plan")["rows"] == [
        {"group": "gold", "calls": 2, "minutes": 2.0, "cost": 3.0},
        {"group": "basic", "calls": 1, "minutes": 1.0, "cost": 0.5},
        {"group": None, "calls": 3, "minutes": 3.0, "cost": 0.3},
    ]
    assert [row["group"] for row in _get(owner, f"{RANGE}&groupBy=metadata.seats")["rows"]] == ["3", None]


def test_the_agent_filter_counts_only_that_agents_calls(owner, agent, sales):
    _call(agent, MONDAY, cost="1", variables={"customerId": "c-1"})
    _call(sales, MONDAY, cost="2", variables={"customerId": "c-1"})

    body = _get(owner, f"{RANGE}&groupBy=variable.customerId&agentId={sales.pk}")

    assert body["rows"] == [{"group": "c-1", "calls": 1, "minutes": 1.0, "cost": 2.0}]
    assert body["total"]["calls"] == 1


def test_another_organizations_calls_are_never_counted(owner, outsider, agent, make_agent):
    theirs = make_agent(outsider.organization, name="Theirs", status="active")
    _call(agent, MONDAY, cost="1", variables={"customerId": "c-1"})
    _call(theirs, MONDAY, cost="7", variables={"customerId": "c-1"})

    for grouping in ("agent", "day", "direction", "variable.customerId"):
        body = _get(owner, f"{RANGE}&groupBy={grouping}")
        assert body["total"] == {"calls": 1, "minutes": 1.0, "cost": 1.0, "otherCurrencies": {}}, grouping
    assert _get(outsider, f"{RANGE}&agentId={agent.pk}")["rows"] == []
    assert _get(outsider, RANGE)["rows"] == [
        {"group": str(theirs.pk), "label": "Theirs", "calls": 1, "minutes": 1.0, "cost": 7.0}
    ]


def test_the_default_range_is_the_last_30_days(owner, agent):
    now = timezone.now()
    _call(agent, now - timedelta(days=29, hours=23), cost="1")
    _call(agent, now - timedelta(days=30, minutes=1), cost="2")

    body = _get(owner, "groupBy=direction")

    assert body["total"]["calls"] == 1 and body["total"]["cost"] == 1.0
    start, end = (datetime.fromisoformat(body[key]) for key in ("from", "to"))
    assert end - start == timedelta(days=30) and abs(end - now) < timedelta(minutes=5)
    only_to = _get(owner, "to=2025-03-05")
    assert only_to["from"] == "2025-02-03T00:00:00.000000Z"


def test_times_with_an_offset_are_read_in_utc(owner, agent):
    _call(agent, MONDAY + timedelta(hours=7), cost="1")
    _call(agent, MONDAY + timedelta(hours=9), cost="2")

    body = _get(owner, "from=2025-03-03T09:00%2B01:00&to=2025-03-03T09:30:00.5Z&groupBy=day")

    assert body["from"] == "2025-03-03T08:00:00.000000Z" and body["to"] == "2025-03-03T09:30:00.500000Z"
    assert body["rows"] == [{"group": "2025-03-03", "calls": 1, "minutes": 1.0, "cost": 2.0}]


def test_calls_priced_in_another_currency_are_given_apart(owner, agent):
    PriceBook.objects.create(
        organization=owner.organization,
        currency="EUR",
        items=[],
        effective_from=MONDAY + timedelta(days=1),
        created_at=MONDAY,
    )
    _call(agent, MONDAY, cost="1.5")  # priced in dollars before the euro book took effect
    _call(agent, MONDAY + timedelta(days=1), cost="2", cost_currency="EUR")

    body = _get(owner, RANGE)

    assert body["currency"] == "EUR"
    assert body["rows"][0]["calls"] == 2 and body["rows"][0]["cost"] == 2.0
    assert body["total"] == {"calls": 2, "minutes": 2.0, "cost": 2.0, "otherCurrencies": {"USD": 1.5}}


def test_beyond_the_most_rows_the_highest_cost_groups_are_listed(owner, agent, monkeypatch):
    monkeypatch.setattr(selectors, "MAX_ROWS", 2)
    for customer, cost in (("c-1", "1"), ("c-2", "3"), ("c-3", "2")):
        _call(agent, MONDAY, cost=cost, variables={"customerId": customer})

    body = _get(owner, f"{RANGE}&groupBy=variable.customerId")

    assert body["truncated"] is True
    assert [row["group"] for row in body["rows"]] == ["c-2", "c-3"]
    assert body["total"]["calls"] == 3 and body["total"]["cost"] == 6.0


def test_one_query_reads_the_calls(owner, agent):
    for index in range(20):
        _call(agent, MONDAY + timedelta(hours=index), variables={"customerId": f"c-{index % 4}"})

    with CaptureQueriesContext(connection) as queries:
        body = _get(owner, f"{RANGE}&groupBy=variable.customerId")

    assert len(body["rows"]) == 4
    assert len([q for q in queries.captured_queries if '"calls_call"' in q["sql"]]) == 1


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("groupBy=agents", "groupBy"),
        ("groupBy=variable", "groupBy"),
        ("groupBy=variable.", "groupBy"),
        ("groupBy=variable.1customer", "groupBy"),
        ("groupBy=variable.customer-id", "groupBy"),
        (f"groupBy=variable.{'x' * 65}", "groupBy"),
        ("groupBy=metadata.a%20b", "groupBy"),
        ("groupBy=metadata.9", "groupBy"),
        ("groupBy=", "groupBy"),
        ("from=yesterday", "from"),
        ("from=2025-02-30", "from"),
        ("from=2025-13-01", "from"),
        ("to=2025-03-01T24:00", "to"),
        ("to=2025-03-01%2000:00", "to"),
        ("to=", "to"),
        ("from=2025-03-05&to=2025-03-05", "from"),
        ("from=2025-03-06&to=2025-03-05", "from"),
        ("from=2099-01-01", "from"),  # after now, the default end
        ("from=2024-01-01&to=2025-01-02", "from"),  # 367 days
        ("agentId=not-a-uuid", "agentId"),
    ],
)
def test_invalid_query_parameters_are_a_400_listing_the_issue(owner, query, field):
    response = owner.client.get(f"{URL}?{query}")

    assert response.status_code == 400
    body = response.json()
    assert field in body["issues"] and body["error"]


def test_a_range_of_366_days_is_allowed(owner, agent):
    _call(agent, datetime(2024, 6, 1, tzinfo=UTC), cost="1")
    assert _get(owner, "from=2024-01-01&to=2025-01-01")["total"]["calls"] == 1


def test_every_invalid_parameter_is_listed_at_once(owner):
    body = owner.client.get(f"{URL}?from=x&to=y&groupBy=z&agentId=w").json()
    assert set(body["issues"]) == {"from", "to", "groupBy", "agentId"}


def test_analytics_need_an_api_key(anonymous):
    assert anonymous.get(URL).status_code == 401
