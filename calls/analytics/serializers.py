"""The analytics query's rules and the wire shapes of GET /public/v1/analytics/calls (docs/costs.md)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from django.utils import timezone as django_timezone
from rest_framework import serializers

from calls.analytics.selectors import AGENT, DAY, Analytics, Group, Grouping
from kit.fields import iso

DEFAULT_RANGE = timedelta(days=30)
MAX_RANGE_DAYS = 366
MAX_RANGE = timedelta(days=MAX_RANGE_DAYS)
MAX_KEY_LENGTH = 64  # a metadata key, as a variable's name (calls.variables.MAX_NAME_LENGTH)

# ISO 8601: a date, or a date and time (minutes, seconds and up to six decimals of a second), UTC unless an
# offset (`Z`, `+02:00`) says otherwise. Years 0001 to 9999; a day the month does not have is refused
# after the pattern (the pattern cannot count a month's days).
_YEAR = "(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
MOMENT = (
    f"({_YEAR})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    "(?:T([01][0-9]|2[0-3]):([0-5][0-9])(?::([0-5][0-9])(?:\\.([0-9]{1,6}))?)?(Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])?)?"
)
_MOMENT = re.compile(MOMENT)
# agent, day, direction, variable.<a variable's name> (calls.variables.NAME, at most 64 characters) or
# metadata.<a key of the metadata object: a letter or underscore, then letters, digits, underscores or hyphens>.
GROUP_BY = "^(?:agent|day|direction|variable\\.[A-Za-z_][A-Za-z0-9_.]{0,63}|metadata\\.[A-Za-z_][A-Za-z0-9_-]{0,63})$"
NOT_A_MOMENT = "Must be an ISO 8601 date (2025-03-01) or date and time (2025-03-01T08:00Z, 2025-03-01T09:00+01:00)."
# Messages of the rules the pattern cannot state (testing/schema_fuzzing.py knows them by these starts).
NOT_A_DATE = "Not a valid date"
NOT_BEFORE_TO = "Must be earlier than to"
TOO_LONG = f"Must be at most {MAX_RANGE_DAYS} days before to"


def moment_parse(text: str) -> datetime:
    """A `from` or `to` as a moment in UTC (a date is its 00:00 UTC)."""
    match = _MOMENT.fullmatch(text)
    if match is None:
        raise serializers.ValidationError(NOT_A_MOMENT)
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        offset = UTC
        if zone and zone != "Z":
            sign = -1 if zone[0] == "-" else 1
            offset = timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
        moment = datetime(
            int(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            int((fraction or "0").ljust(6, "0")),
            tzinfo=offset,
        )
        return moment.astimezone(UTC)
    except (ValueError, OverflowError) as error:
        raise serializers.ValidationError(f"{NOT_A_DATE}: {error}.") from None


class MomentField(serializers.RegexField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(f"^(?:{MOMENT})$", error_messages={"invalid": NOT_A_MOMENT}, **kwargs)

    def run_validation(self, data: Any = serializers.empty) -> Any:
        """The text checked (the pattern, as DRF's RegexField: validators see the text), then read."""
        text = super().run_validation(data)
        return text if text is None else moment_parse(text)


def grouping_of(text: str) -> Grouping:
    kind, _, name = text.partition(".")
    return Grouping(kind, name)


# `from` is a Python keyword: the field is declared through the class namespace (created first: listed first).
_FROM = MomentField(
    required=False,
    help_text="The start of the range (included): an ISO 8601 date (00:00 UTC) or date and time (UTC unless "
    "an offset is given). Default: 30 days before `to`.",
)


class CallAnalyticsQuery(serializers.Serializer):
    locals()["from"] = _FROM
    to = MomentField(
        required=False,
        help_text="The end of the range (excluded), as `from`. Default: now. At most 366 days after `from`.",
    )
    groupBy = serializers.RegexField(
        GROUP_BY,
        required=False,
        default=AGENT,
        error_messages={"invalid": "Must be agent, day, direction, variable.<name> or metadata.<key>."},
        help_text="What the calls are grouped by: `agent`, `day` (UTC), `direction`, `variable.<name>` (a per-call "
        "variable's value) or `metadata.<key>` (the value of a key of the call's metadata object). Default: agent.",
    )
    agentId = serializers.UUIDField(required=False, help_text="Only the calls of this agent.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        end = attrs.get("to") or django_timezone.now()
        start = attrs.get("from")
        if start is None:
            try:
                start = end - DEFAULT_RANGE
            except OverflowError:
                start = datetime.min.replace(tzinfo=UTC)
        if start >= end:
            raise serializers.ValidationError(
                {"from": [f"{NOT_BEFORE_TO} ({'now' if 'to' not in attrs else iso(end)})."]}
            )
        if end - start > MAX_RANGE:
            raise serializers.ValidationError({"from": [f"{TOO_LONG}."]})
        return {"start": start, "end": end, "grouping": grouping_of(attrs["groupBy"]), "agent_id": attrs.get("agentId")}


def _group_value(grouping: Grouping, key: Any) -> str | None:
    if key is None:
        return None
    if grouping.kind == DAY:
        return str(key.isoformat())
    return str(key)


def _minutes(seconds: int) -> float:
    return round(seconds / 60, 2)


def _row(grouping: Grouping, group: Group) -> dict[str, Any]:
    row: dict[str, Any] = {"group": _group_value(grouping, group.key)}
    if grouping.kind == AGENT:
        row["label"] = group.label
    row.update(calls=group.calls, minutes=_minutes(group.seconds), cost=float(group.cost))
    return row


def analytics_body(analytics: Analytics, *, start: datetime, end: datetime, grouping: Grouping) -> dict[str, Any]:
    return {
        "from": iso(start),
        "to": iso(end),
        "groupBy": str(grouping),
        "currency": analytics.currency,
        "rows": [_row(grouping, group) for group in analytics.rows],
        "truncated": analytics.truncated,
        "total": {
            "calls": analytics.total.calls,
            "minutes": _minutes(analytics.total.seconds),
            "cost": float(analytics.total.cost),
            "otherCurrencies": {name: float(cost) for name, cost in analytics.other_currencies.items()},
        },
    }


# --- the response's shape (OpenAPI) ------------------------------------------------------------------


class AnalyticsRowSchema(serializers.Serializer):
    group = serializers.CharField(
        allow_null=True,
        help_text="The agent's ID, the UTC day (YYYY-MM-DD), inbound or outbound, or the variable's or metadata "
        "key's value as text; null for the calls without one (of deleted agents, without the variable or key).",
    )
    label = serializers.CharField(  # type: ignore[assignment]  # the API field "label" shadows Field.label in the stubs (DRF pops declared fields)
        required=False,
        allow_null=True,
        help_text="Grouped by agent only: the agent's name on its calls (null for the calls of deleted agents).",
    )
    calls = serializers.IntegerField(help_text="The calls that started in the range, open ones included.")
    minutes = serializers.FloatField(help_text="Their duration in minutes, to 2 decimal places.")
    cost = serializers.FloatField(help_text="The cost of those priced so far (ended), in `currency`, to 6 places.")


class AnalyticsTotalSchema(serializers.Serializer):
    calls = serializers.IntegerField(help_text="Every call of the range, whatever the rows listed.")
    minutes = serializers.FloatField()
    cost = serializers.FloatField(help_text="In `currency`.")
    otherCurrencies = serializers.DictField(
        child=serializers.FloatField(),
        help_text="The cost of calls priced in another currency (the price book's currency changed within the "
        "range), by currency; not in `cost`. Usually empty.",
    )


_FROM_OUT = serializers.DateTimeField(help_text="The start of the range (included), in UTC.")


class CallAnalyticsSchema(serializers.Serializer):
    locals()["from"] = _FROM_OUT
    to = serializers.DateTimeField(help_text="The end of the range (excluded), in UTC.")
    groupBy = serializers.CharField()
    currency = serializers.CharField(help_text="The organization's currency (its price book in force today).")
    rows = AnalyticsRowSchema(many=True)
    truncated = serializers.BooleanField(
        help_text="More groups than the 1000 rows listed: the rows are those of the highest cost."
    )
    total = AnalyticsTotalSchema()
