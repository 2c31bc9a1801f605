"""Wire shapes of agents: request parsing (strict types, camelCase) and the list item."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agents.analysis_plan import SCALES, PlanError, normalize_plan
from agents.flows import FlowError, normalize_flow
from agents.handoffs import CONTEXTS, HandoffsError, normalize_handoffs
from agents.interruption import MODES, InterruptionError, normalize_interruption
from agents.keypad import KeypadError, normalize_keypad
from agents.models import (
    BUILTIN_VOICES,
    MAX_DURATION_RANGE,
    AgentStatus,
    AgentType,
    BackgroundSound,
    DisclosureTemplate,
    GreetingType,
    PromptType,
)
from agents.time_zones import time_zone_problem
from agents.transfer import BRIEFINGS, TransferError, normalize_transfer
from agents.transfer import MODES as TRANSFER_MODES
from agents.voicemail import ACTIONS, DETECTIONS, VoicemailError, normalize_voicemail
from kit import redaction
from kit.fields import (
    E164Field,
    HeadersField,
    OutboundUrlField,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictFloatField,
    StrictIntegerField,
    StrictUUIDField,
)

LANGUAGE_PATTERN = r"^[a-z]{2,3}(-[A-Z][a-z]{3})?(-([A-Z]{2}|[0-9]{3}))?$"
AMBIENT_CHOICES = ("none", "office1", "office2", "office")  # "office" is legacy for office2


REDACT_PII_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {"type": "string", "enum": [redaction.OFF, redaction.ALL]},
        {"type": "array", "items": {"type": "string", "enum": list(redaction.ALLOWED_LIST)}, "minItems": 1},
    ],
    "description": 'Personal data replaced by placeholders in everything stored of the agent\'s calls: "off" '
    '(default), "all", or a list of categories. The live call and the tools get the real values.',
}


@extend_schema_field(REDACT_PII_SCHEMA)
class RedactPiiField(serializers.JSONField):
    """The API value of redactPii: "off", "all" or a non-empty list of categories (kit/redaction.py),
    stored normalized (known order, no repeats)."""

    def to_internal_value(self, data: Any) -> Any:
        try:
            return redaction.parse_setting(data)
        except ValueError as error:
            raise serializers.ValidationError(str(error)) from None


class AnalysisPlanField(serializers.JSONField):
    """analysisPlan: validated and normalized by agents/analysis_plan.py (a bad plan is a 400 naming the key)."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        try:
            return normalize_plan(data)
        except PlanError as exc:
            raise serializers.ValidationError(str(exc)) from None


class KeypadField(serializers.JSONField):
    """keypad: validated and normalized by agents/keypad.py (a bad value is a 400 naming the key)."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        try:
            return normalize_keypad(data)
        except KeypadError as exc:
            raise serializers.ValidationError(str(exc)) from None


class VoicemailField(serializers.JSONField):
    """voicemail: validated and normalized by agents/voicemail.py (a bad setting is a 400 naming the key)."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        try:
            return normalize_voicemail(data)
        except VoicemailError as exc:
            raise serializers.ValidationError(str(exc)) from None


class InterruptionField(serializers.JSONField):
    """interruption: validated and normalized by agents/interruption.py (a bad setting is a 400 naming the key
    inside it: `interruption.mode`)."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        try:
            return normalize_interruption(data)
        except InterruptionError as exc:
            detail: Any = {exc.key: [exc.message]} if exc.key else exc.message
            raise serializers.ValidationError(detail) from None


class TransferField(serializers.JSONField):
    """transfer: validated and normalized by agents/transfer.py (a bad setting is a 400 naming the key inside
    it: `transfer.ringTimeoutSeconds`)."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        try:
            return normalize_transfer(data)
        except TransferError as exc:
            detail: Any = {exc.key: [exc.message]} if exc.key else exc.message
            raise serializers.ValidationError(detail) from None


class HandoffsField(serializers.JSONField):
    """handoffs: its shape validated and normalized by agents/handoffs.py (a bad entry is a 400 naming the key
    inside the list: `handoffs.1.agentId`); the targets are checked by the agent services."""

    def to_internal_value(self, data: Any) -> list[dict[str, Any]]:
        try:
            return normalize_handoffs(data)
        except HandoffsError as exc:
            detail: Any = {exc.key: [exc.message]} if exc.key else exc.message
            raise serializers.ValidationError(detail) from None


class FlowField(serializers.JSONField):
    """flow: its shape and graph validated and normalized by agents/flows.py (a 400 naming the place inside the
    flow: `flow.nodes.book.next`); its tools and handoff targets are checked by the agent services. null: no
    flow."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        try:
            return normalize_flow(data)
        except FlowError as exc:
            detail: Any = {exc.key: [exc.message]} if exc.key else exc.message
            raise serializers.ValidationError(detail) from None


class PhoneAssignmentSerializer(serializers.Serializer):
    phoneNumberId = StrictUUIDField(source="phone_number_id")
    handoffPhoneNumber = E164Field(source="handoff_phone_number", required=False, allow_null=True, default=None)


class AgentWriteSerializer(serializers.Serializer):
    """Every agent field of the contract (POST and PUT). Rules across fields are the services'."""

    name = StrictCharField(max_length=200, allow_blank=False, trim_whitespace=True)
    agentType = StrictChoiceField(AgentType.choices, source="agent_type", required=False)
    language = StrictCharField(max_length=16, required=False)
    aiIdentityDisclosureTemplateId = StrictChoiceField(
        DisclosureTemplate.choices, source="ai_identity_disclosure_template_id", required=False
    )
    voiceName = StrictChoiceField([(v, v) for v in BUILTIN_VOICES], source="voice_name", required=False)
    phoneNumberAssignments = PhoneAssignmentSerializer(
        many=True, source="phone_number_assignments", required=False, max_length=1000
    )  # type: ignore[call-arg]  # many=True hands max_length to the ListSerializer; the stubs omit it
    phoneNumberIds = serializers.ListField(
        child=StrictUUIDField(), source="phone_number_ids", required=False, max_length=1000
    )
    serverUrl = OutboundUrlField(source="server_url", required=False, allow_null=True)
    serverHeaders = HeadersField(source="server_headers", required=False)
    serverSecret = StrictCharField(source="server_secret", required=False, allow_null=True, max_length=512)
    handoffPhoneNumber = E164Field(source="handoff_phone_number", required=False, allow_null=True)
    backgroundSound = StrictChoiceField(BackgroundSound.choices, source="background_sound", required=False)
    ambientSound = StrictChoiceField([(v, v) for v in AMBIENT_CHOICES], source="ambient_sound", required=False)
    ambientSoundVolume = StrictFloatField(source="ambient_sound_volume", required=False, min_value=0, max_value=1)
    ambientSoundDucking = StrictBooleanField(source="ambient_sound_ducking", required=False)
    promptType = StrictChoiceField(PromptType.choices, source="prompt_type", required=False)
    identity = StrictCharField(required=False, allow_blank=True, max_length=20000, trim_whitespace=False)
    instructions = StrictCharField(required=False, allow_blank=True, max_length=100000, trim_whitespace=False)
    greetingType = StrictChoiceField(GreetingType.choices, source="greeting_type", required=False)
    staticGreeting = StrictCharField(
        source="static_greeting", required=False, allow_null=True, allow_blank=True, max_length=2000
    )
    status = StrictChoiceField(AgentStatus.choices, required=False)
    redactPii = RedactPiiField(source="redact_pii", required=False)
    analysisPlan = AnalysisPlanField(
        source="analysis_plan",
        required=False,
        help_text="What is worked out of each call after it ends (docs/guides/post-call-analysis.md). The whole plan is "
        "replaced; a part left out takes its default (summary on, the others off), a part sent without "
        "`enabled` is on.",
    )
    endCallEnabled = StrictBooleanField(
        source="end_call_enabled",
        required=False,
        help_text="Offer the end_call system tool: the agent may end the call after saying goodbye (default true).",
    )
    maxDurationSeconds = StrictIntegerField(
        source="max_duration_seconds",
        required=False,
        min_value=MAX_DURATION_RANGE[0],
        max_value=MAX_DURATION_RANGE[1],
        help_text="Longest call in seconds (30 to 14400, default 1800): the agent then says a short closing "
        "line and ends the call (endedReason max-duration-reached).",
    )
    recordingEnabled = StrictBooleanField(source="recording_enabled", required=False)
    timeZone = StrictCharField(
        source="time_zone",
        required=False,
        max_length=64,
        allow_blank=True,  # refused by validate_timeZone, as any name zoneinfo does not know
        trim_whitespace=False,
        help_text='The IANA time zone of {{now}} in the prompt and greeting, for example "Europe/Madrid" '
        '(default "UTC").',
    )
    keypad = KeypadField(
        required=False,
        help_text="Caller keypad input on phone calls (docs/guides/keypad.md): enabled gathers keys into "
        'one turn until timeoutMs without a key or the terminator ("#", "*" or "" for none); disabled makes each '
        'key a turn of its own. Default {"enabled": true, "timeoutMs": 2000, "terminator": "#"}.',
    )
    voicemail = VoicemailField(
        required=False,
        help_text="Outbound calls: answering-machine detection and what to do on a machine (docs/guides/voicemail.md). "
        "A key left out takes its default (detection off, action hang-up, message empty).",
    )
    interruption = InterruptionField(
        required=False,
        help_text="What the caller's speech does while the agent speaks (docs/guides/conversation.md). A key left out "
        'takes its default {"mode": "adaptive", "minWords": 1, "backchannels": null, "resumeAfterMs": 400}; '
        "backchannels null is the agent language's default list.",
    )
    transfer = TransferField(
        required=False,
        help_text="How transfer_call passes the caller to a person (docs/guides/phone-calls.md#warm-transfers): "
        'cold, or warm with a briefing. A key left out takes its default {"mode": "cold", "briefing": "summary", '
        '"message": "", "ringTimeoutSeconds": 30}; message is required with briefing static.',
    )
    handoffs = HandoffsField(
        required=False,
        help_text="The other agents of the organization this agent may hand a call to, and when: at most 20 "
        '{"agentId", "description", "context", "lastN"}; each target an active agent of the organization, once, '
        "not the agent itself. Default [].",
    )
    # Documented by agents/schema.py (FlowFieldSchema).
    flow = FlowField(required=False, allow_null=True)

    def validate_language(self, value: str) -> str:
        import re

        if not re.match(LANGUAGE_PATTERN, value):
            raise serializers.ValidationError("Must be a language tag such as en-US, es-ES, es-US or it-IT.")
        return value

    def validate_timeZone(self, value: str) -> str:
        problem = time_zone_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value

    def validate_serverSecret(self, value: str | None) -> str | None:
        if value is not None and (not value or any(c in value for c in "\r\n\0")):
            raise serializers.ValidationError("Must be a non-empty single-line string, or null.")
        return value


class AgentPatchSerializer(AgentWriteSerializer):
    """PATCH: any agent field, and the optimistic-concurrency stamp."""

    name = StrictCharField(max_length=200, required=False, allow_blank=False, trim_whitespace=True)
    expectedUpdatedAt = serializers.DateTimeField(source="expected_updated_at", required=True)

    def to_internal_value(self, data: Any) -> Any:
        value = data.get("expectedUpdatedAt") if isinstance(data, dict) else None
        if value is not None and not isinstance(value, str):
            raise serializers.ValidationError({"expectedUpdatedAt": ["Must be an ISO 8601 timestamp string."]})
        return super().to_internal_value(data)


class AgentIdSerializer(serializers.Serializer):
    id = serializers.UUIDField()


class AgentUpdatedSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    updatedAt = serializers.DateTimeField(help_text="The agent's new updatedAt: the next PATCH's expectedUpdatedAt.")


class SummaryPartSchema(serializers.Serializer):
    enabled = serializers.BooleanField()
    prompt = serializers.CharField(allow_null=True, help_text="Extra instructions for the summary (openai brain).")


class StructuredDataPartSchema(serializers.Serializer):
    enabled = serializers.BooleanField()
    schema = serializers.DictField(
        allow_null=True,
        help_text='A JSON Schema of "type": "object" whose every property has a description: the fields to extract.',
    )
    prompt = serializers.CharField(allow_null=True, help_text="Extra instructions for the extraction (openai brain).")


class SuccessEvaluationPartSchema(serializers.Serializer):
    enabled = serializers.BooleanField()
    rubric = serializers.CharField(allow_null=True, help_text="What a successful call is (required when enabled).")
    scale = serializers.ChoiceField([(s, s) for s in SCALES])


class AnalysisPlanSchema(serializers.Serializer):
    summary = SummaryPartSchema()
    structuredData = StructuredDataPartSchema()
    successEvaluation = SuccessEvaluationPartSchema()


class VoicemailSchema(serializers.Serializer):
    detection = serializers.ChoiceField([(d, d) for d in DETECTIONS])
    action = serializers.ChoiceField([(a, a) for a in ACTIONS])
    message = serializers.CharField(help_text="Spoken after the beep with leave-message ({{variables}} filled).")


class InterruptionSchema(serializers.Serializer):
    mode = serializers.ChoiceField([(m, m) for m in MODES])
    minWords = serializers.IntegerField()
    backchannels = serializers.ListField(child=serializers.CharField(), allow_null=True)
    resumeAfterMs = serializers.IntegerField()


class TransferSchema(serializers.Serializer):
    mode = serializers.ChoiceField([(m, m) for m in TRANSFER_MODES])
    briefing = serializers.ChoiceField([(b, b) for b in BRIEFINGS])
    message = serializers.CharField(
        allow_blank=True, help_text='The briefing with briefing "static" ({{variables}} filled).'
    )
    ringTimeoutSeconds = serializers.IntegerField()


class HandoffSchema(serializers.Serializer):
    agentId = serializers.UUIDField()
    description = serializers.CharField(help_text="When to hand off to this agent (the brain reads it).")
    # A declared field: the serializer's metaclass takes it off the class (Serializer.context stays).
    context = serializers.ChoiceField([(c, c) for c in CONTEXTS])  # type: ignore[assignment]
    lastN = serializers.IntegerField(allow_null=True, help_text='With context "lastN": the turns that go along.')


class AgentListItemSerializer(serializers.Serializer):
    """Documentation of the list item (the list itself is rendered by api.agents.selectors for speed)."""

    id = serializers.UUIDField()
    name = serializers.CharField()
    status = serializers.ChoiceField(AgentStatus.choices)
    agentType = serializers.ChoiceField(AgentType.choices)
    language = serializers.CharField()
    voiceName = serializers.CharField()
    serverUrl = serializers.CharField(allow_null=True)
    serverHeaders = serializers.DictField(child=serializers.CharField())
    serverSecret = serializers.CharField(allow_null=True)
    handoffPhoneNumber = serializers.CharField(allow_null=True)
    phoneNumber = serializers.CharField(allow_null=True)
    toolCount = serializers.IntegerField()
    knowledgeDocumentCount = serializers.IntegerField()
    callsToday = serializers.IntegerField()
    successRate = serializers.FloatField()
    updatedAt = serializers.DateTimeField()
    aiIdentityDisclosureTemplateId = serializers.CharField()
    backgroundSound = serializers.CharField()
    ambientSound = serializers.CharField()
    ambientSoundVolume = serializers.FloatField()
    ambientSoundDucking = serializers.BooleanField()
    promptType = serializers.CharField()
    identity = serializers.CharField()
    instructions = serializers.CharField()
    greetingType = serializers.CharField()
    staticGreeting = serializers.CharField(allow_null=True)
    createdAt = serializers.DateTimeField()
    redactPii = RedactPiiField()
    analysisPlan = AnalysisPlanSchema()
    endCallEnabled = serializers.BooleanField()
    maxDurationSeconds = serializers.IntegerField()
    recordingEnabled = serializers.BooleanField()
    timeZone = serializers.CharField()
    keypad = KeypadField()
    voicemail = VoicemailSchema()
    interruption = InterruptionSchema()
    transfer = TransferSchema()
    handoffs = HandoffSchema(many=True)
    flow = FlowField(allow_null=True)
