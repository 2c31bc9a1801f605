"""Wire shapes of agent tests for the OpenAPI document. The body is checked by validation.py (so that every
refusal names its exact place); these serializers only carry the description, completed by schema.py."""

from __future__ import annotations

from rest_framework import serializers

from realtime.models import AgentTestKind


class AgentTestWriteSerializer(serializers.Serializer):
    """POST body (schema.py gives its JSON parts)."""

    name = serializers.CharField()
    kind = serializers.ChoiceField(AgentTestKind.choices)


class AgentTestPatchSerializer(serializers.Serializer):
    """PATCH body: any of the POST fields (schema.py)."""

    name = serializers.CharField(required=False)


class AgentTestSchema(serializers.Serializer):
    """A test as answered (schema.py gives its JSON parts)."""

    id = serializers.UUIDField()


class AgentTestListQuery(serializers.Serializer):
    tag = serializers.RegexField(r"^[A-Za-z0-9_.:-]{1,64}$", required=False, help_text="Only the tests with this tag.")
    limit = serializers.IntegerField(
        required=False, default=50, min_value=1, max_value=500, help_text="How many tests, 1 to 500."
    )
    offset = serializers.IntegerField(
        required=False, default=0, min_value=0, max_value=1_000_000, help_text="How many tests to skip."
    )


class AgentTestDeletedSchema(serializers.Serializer):
    id = serializers.UUIDField()
