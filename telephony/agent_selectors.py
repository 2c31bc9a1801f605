"""The agent as the public API lists it: its settings with its first phone number, its tool and document
counts and today's calls, in one SQL query. It joins the agents, telephony, knowledge and calls apps, so it
lives in telephony, the highest of them (the agents app sits below all three)."""

from __future__ import annotations

from typing import Any

from django.db.models import OuterRef, Subquery

from accounts.models import Organization
from agents.models import Agent
from agents.tools.selectors import tool_count_subquery
from calls.selectors import calls_today_subquery, success_rate_subquery
from kit.crypto import decrypt
from kit.db import IsoUtc, json_column, raw_rows, uuid_text
from kit.errors import ApiError
from kit.validation import parse_uuid
from knowledge.selectors import document_count_subquery
from telephony.models import PhoneNumber


def _agent_items(*, organization: Organization, agent_id: Any = None) -> list[dict[str, Any]]:
    """The organization's agents (or the one with `agent_id`) as list items, in one SQL query whatever
    the number of agents: the counts and the first phone number are correlated subqueries."""
    first_number = (
        PhoneNumber.objects.filter(assigned_agent=OuterRef("pk"))
        .order_by("assigned_at", "phone_number")
        .values("phone_number")[:1]
    )
    agents = Agent.objects.filter(organization=organization)
    if agent_id is not None:
        agents = agents.filter(pk=agent_id)
    rows = (
        agents.annotate(
            first_phone_number=Subquery(first_number),
            tool_count=tool_count_subquery(),
            knowledge_document_count=document_count_subquery(),
            calls_today=calls_today_subquery(),
            success_rate=success_rate_subquery(),
            updated_at_iso=IsoUtc("updated_at"),
            created_at_iso=IsoUtc("created_at"),
        )
        .order_by("created_at", "id")
        .values(*LIST_COLUMNS)
    )
    # Raw rows, not model instances nor Django's converted values: the list is the hot read of the
    # dashboard and of integrations (docs/performance: 1,000 agents).
    return [agent_item(row) for row in raw_rows(rows, LIST_COLUMNS)]


def agent_list(*, organization: Organization) -> list[dict[str, Any]]:
    """Every agent of the organization as list items."""
    return _agent_items(organization=organization)


def agent_detail(*, organization: Organization, agent_id: str) -> dict[str, Any]:
    """One agent as its list item; a non-UUID id is a 400, another organization's agent a 404."""
    items = _agent_items(organization=organization, agent_id=parse_uuid(agent_id, "agent"))
    if not items:
        raise ApiError.not_found("Agent not found")
    return items[0]


LIST_COLUMNS = (
    "id",
    "name",
    "status",
    "agent_type",
    "language",
    "voice_name",
    "server_url",
    "server_headers",
    "server_secret",
    "handoff_phone_number",
    "first_phone_number",
    "tool_count",
    "knowledge_document_count",
    "calls_today",
    "success_rate",
    "updated_at_iso",
    "ai_identity_disclosure_template_id",
    "background_sound",
    "ambient_sound",
    "ambient_sound_volume",
    "ambient_sound_ducking",
    "prompt_type",
    "identity",
    "instructions",
    "greeting_type",
    "static_greeting",
    "created_at_iso",
    "redact_pii",
    "analysis_plan",
    "end_call_enabled",
    "max_duration_seconds",
    "recording_enabled",
    "time_zone",
    "keypad",
    "voicemail",
)


def agent_item(row: tuple[Any, ...]) -> dict[str, Any]:
    """One list item from a raw row of LIST_COLUMNS (kit.db.raw_rows: values as the driver returns them;
    JSON columns are written into the response as they are stored)."""
    (
        id_,
        name,
        status,
        agent_type,
        language,
        voice_name,
        server_url,
        server_headers,
        server_secret,
        handoff_phone_number,
        first_phone_number,
        tool_count,
        knowledge_document_count,
        calls_today,
        success_rate,
        updated_at_iso,
        ai_identity_disclosure_template_id,
        background_sound,
        ambient_sound,
        ambient_sound_volume,
        ambient_sound_ducking,
        prompt_type,
        identity,
        instructions,
        greeting_type,
        static_greeting,
        created_at_iso,
        redact_pii,
        analysis_plan,
        end_call_enabled,
        max_duration_seconds,
        recording_enabled,
        time_zone,
        keypad,
        voicemail,
    ) = row
    return {
        "id": uuid_text(id_),
        "name": name,
        "status": status,
        "agentType": agent_type,
        "language": language,
        "voiceName": voice_name,
        "serverUrl": server_url,
        "serverHeaders": json_column(server_headers),
        "serverSecret": None if server_secret is None else decrypt(server_secret),
        "handoffPhoneNumber": handoff_phone_number,
        "phoneNumber": first_phone_number,
        "toolCount": tool_count,
        "knowledgeDocumentCount": knowledge_document_count,
        "callsToday": calls_today,
        "successRate": success_rate,
        "updatedAt": updated_at_iso,
        "aiIdentityDisclosureTemplateId": ai_identity_disclosure_template_id,
        "backgroundSound": background_sound,
        "ambientSound": ambient_sound,
        "ambientSoundVolume": ambient_sound_volume,
        "ambientSoundDucking": bool(ambient_sound_ducking),
        "promptType": prompt_type,
        "identity": identity,
        "instructions": instructions,
        "greetingType": greeting_type,
        "staticGreeting": static_greeting,
        "createdAt": created_at_iso,
        "redactPii": json_column(redact_pii),
        "analysisPlan": json_column(analysis_plan),
        "endCallEnabled": bool(end_call_enabled),
        "maxDurationSeconds": max_duration_seconds,
        "recordingEnabled": bool(recording_enabled),
        "timeZone": time_zone,
        "keypad": json_column(keypad),
        "voicemail": json_column(voicemail),
    }
