"""Usage billing: 10-second intervals, the plan allowance of the period, trial and unallocated."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from accounts.services import organization_set_plan
from calls.billing import period_bounds
from calls.models import Call


@pytest.mark.parametrize(
    ("seconds", "billable_seconds"),
    [(0, 0), (1, 10), (9, 10), (10, 10), (11, 20), (59, 60), (60, 60), (61, 70)],
)
def test_a_call_is_billed_in_started_10_second_intervals(owner, call_lasting, seconds, billable_seconds):
    call = call_lasting(seconds)

    body = owner.client.get(f"/public/v1/calls/{call.id}").json()
    assert body["durationSeconds"] == seconds
    assert body["billableMinutes"] == pytest.approx(billable_seconds / 60)
    assert body["billableMinutes"] == math.ceil(seconds / 10) * 10 / 60
    assert body["includedMinutes"] + body["overageMinutes"] == pytest.approx(body["billableMinutes"])
    assert body["usageClassification"] == "included"


def _set_allowance(organization, minutes: int) -> None:
    organization.plan.included_minutes = minutes
    organization.plan.save(update_fields=["included_minutes"])


def test_a_call_that_crosses_the_allowance_is_split(owner, call_lasting):
    _set_allowance(owner.organization, 1)  # 60 included seconds in the period
    first = call_lasting(41)  # bills 50 s, all included
    second = call_lasting(25)  # bills 30 s: 10 s left, 20 s overage
    third = call_lasting(5)  # nothing left

    assert (first.usage_classification, first.included_seconds, first.overage_seconds) == ("included", 50, 0)
    assert (second.usage_classification, second.included_seconds, second.overage_seconds) == ("split", 10, 20)
    assert (third.usage_classification, third.included_seconds, third.overage_seconds) == ("overage", 0, 10)
    body = owner.client.get(f"/public/v1/calls/{second.id}").json()
    assert body["includedMinutes"] == pytest.approx(10 / 60)
    assert body["overageMinutes"] == pytest.approx(20 / 60)
    assert body["billableMinutes"] == pytest.approx(30 / 60)


def test_exactly_using_up_the_allowance_is_included_and_the_next_call_is_overage(owner, call_lasting):
    _set_allowance(owner.organization, 1)
    assert call_lasting(60).usage_classification == "included"
    assert call_lasting(1).usage_classification == "overage"
    assert call_lasting(0).usage_classification == "included"  # a 0-second call bills nothing


def test_allowance_is_counted_per_organization(owner, outsider, make_agent, call_lasting):
    _set_allowance(owner.organization, 1)
    outsider_agent = make_agent(outsider.organization, status="active")
    call_lasting(60)

    other = call_lasting(30, the_agent=outsider_agent)
    assert other.usage_classification == "included"


def test_calls_of_a_previous_period_do_not_use_the_current_allowance(owner, call_lasting):
    _set_allowance(owner.organization, 1)
    old = call_lasting(60)
    Call.objects.filter(pk=old.pk).update(billing_period_start=old.billing_period_start - timedelta(days=31))

    assert call_lasting(60).usage_classification == "included"


def test_a_call_on_trial_is_classed_trial_and_still_adds_up(owner, call_lasting):
    organization_set_plan(organization=owner.organization, plan_code="trial")  # 60 included minutes
    _set_allowance(owner.organization, 1)
    first = call_lasting(50)
    second = call_lasting(30)

    assert first.usage_classification == second.usage_classification == "trial"
    assert (first.included_seconds, first.overage_seconds) == (50, 0)
    assert (second.included_seconds, second.overage_seconds) == (10, 20)
    body = owner.client.get(f"/public/v1/calls/{second.id}").json()
    assert body["usageClassification"] == "trial"
    assert body["includedMinutes"] + body["overageMinutes"] == pytest.approx(body["billableMinutes"])


def test_a_call_before_the_billing_period_starts_is_unallocated(owner, call_lasting):
    owner.organization.billing_period_start = timezone.now() + timedelta(days=3)
    owner.organization.save(update_fields=["billing_period_start"])

    call = call_lasting(15)

    assert call.usage_classification == "unallocated"
    assert (call.billable_seconds, call.included_seconds, call.overage_seconds) == (20, 0, 20)
    assert call.billing_period_start is None


def test_billing_periods_are_monthly_from_the_anchor():
    anchor = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)
    assert period_bounds(anchor, datetime(2026, 2, 15, tzinfo=UTC)) == (anchor, datetime(2026, 2, 28, 12, tzinfo=UTC))
    assert period_bounds(anchor, datetime(2026, 3, 1, tzinfo=UTC)) == (
        datetime(2026, 2, 28, 12, tzinfo=UTC),
        datetime(2026, 3, 31, 12, tzinfo=UTC),
    )
    assert period_bounds(anchor, datetime(2026, 3, 31, 12, tzinfo=UTC))[0] == datetime(2026, 3, 31, 12, tzinfo=UTC)
    assert period_bounds(anchor, datetime(2027, 1, 31, 11, 59, tzinfo=UTC))[0] == datetime(2026, 12, 31, 12, tzinfo=UTC)
    assert period_bounds(anchor, datetime(2026, 1, 31, 11, tzinfo=UTC)) is None
