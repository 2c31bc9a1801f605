"""Strict DRF fields: the wire types of the contract, without DRF's silent coercions.

DRF's CharField turns 123 into "123" and BooleanField accepts "yes"; the contract says wrong types
are a 400, so request serializers use these.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rest_framework import serializers

from kit.errors import ApiError
from kit.validation import e164_problem, headers_problem, url_problem


def iso(value: datetime | None) -> str | None:
    """ISO 8601 in UTC with full (microsecond) precision, so a timestamp read back round-trips exactly."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class StrictCharField(serializers.CharField):
    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class StrictFloatField(serializers.FloatField):
    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, (int, float)) or int(data) != data:
            self.fail("invalid")
        return super().to_internal_value(int(data))


class StrictChoiceField(serializers.ChoiceField):
    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid_choice", input=data)
        return super().to_internal_value(data)


class StrictUUIDField(serializers.UUIDField):
    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid", value=data)
        return super().to_internal_value(data)


class E164Field(StrictCharField):
    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        problem = e164_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value


class OutboundUrlField(StrictCharField):
    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        problem = url_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value


class HeadersField(serializers.JSONField):
    def to_internal_value(self, data: Any) -> dict[str, str]:
        problem = headers_problem(data)
        if problem:
            raise serializers.ValidationError(problem)
        return dict(data)


class JsonObjectField(serializers.JSONField):
    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise serializers.ValidationError("Must be a JSON object.")
        return data


def parse(serializer_class: type[serializers.Serializer[Any]], data: Any, **kwargs: Any) -> dict[str, Any]:
    """Validate a request body with a serializer; a non-object body is a 400, never a 500."""
    if not isinstance(data, dict):
        raise ApiError.invalid("The request body must be a JSON object.")
    serializer = serializer_class(data=data, **kwargs)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)
