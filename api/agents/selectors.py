"""The agent as the public API lists it: its settings with its first phone number, its tool and document
counts and today's calls. It joins the agents, telephony, knowledge and calls apps, so it lives on the api
floor, above all four (api/__init__.py; the agents app sits below the three others).

The list is the hot read of the dashboard and of integrations (docs/internals/performance.md: 1,000 agents). What it
shows of the agents themselves is rendered once and kept, per organization, for as long as the triggers of
telephony/agent_list.py count no change; what it shows of calls is read for each request (one grouped
query) and written into the kept rendering."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import orjson
from django.db.models import OuterRef, Subquery

from accounts.models import Organization
from agents.models import Agent
from agents.tools.selectors import tool_count_subquery
from calls.selectors import agent_call_stats
from kit.crypto import decrypt
from kit.db import IsoUtc, json_column, raw_rows, uuid_text
from kit.errors import ApiError
from kit.renderers import RenderedJson, dumps
from kit.validation import parse_uuid
from knowledge.selectors import document_count_subquery
from telephony.agent_list import list_version
from telephony.models import PhoneNumber

# Renderings kept in this process: the most recently used organizations' lists, up to this many bytes.
KEPT_LIST_BYTES = 64 * 1024 * 1024


def _agent_items(*, organization: Organization, agent_id: Any = None) -> list[dict[str, Any]]:
    """The organization's agents (or the one with `agent_id`) as list items without their call figures
    (callsToday 0, successRate 0.0), in one SQL query whatever the number of agents: the counts and the
    first phone number are correlated subqueries."""
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
            updated_at_iso=IsoUtc("updated_at"),
            created_at_iso=IsoUtc("created_at"),
        )
        .order_by("created_at", "id")
        .values(*LIST_COLUMNS)
    )
    # Raw rows, not model instances nor Django's converted values (a third of the time of a list).
    return [agent_item(row) for row in raw_rows(rows, LIST_COLUMNS)]


@dataclass
class _KeptList:
    version: int
    ids: list[str]
    # The list's JSON cut where each agent's call figures go: pieces[i] ends with agent i's '"callsToday":',
    # pieces[i + 1] goes on after its successRate.
    pieces: list[bytes]
    plain: RenderedJson  # the whole list with no call figures (every agent 0 and 0.0)
    # The last list made with call figures, and those figures: sent again while they are the same.
    figured: tuple[dict[str, tuple[int, float]], RenderedJson] | None = None

    @property
    def size(self) -> int:
        return 3 * len(self.plain.body)


_kept: OrderedDict[Any, _KeptList] = OrderedDict()  # organization id -> its rendered list, least recent first
_kept_lock = threading.Lock()

# Where an item's call figures go while the list is rendered: orjson writes a Fragment as it is, and writes
# no other NUL byte (it escapes control characters in strings), so the cut is exact whatever the agents hold.
_FIGURES = orjson.Fragment(b"\x00")
_CUT = b'\x00,"successRate":\x00'
_NO_FIGURES = b'0,"successRate":0.0'


def _render_kept(items: list[dict[str, Any]], version: int) -> _KeptList:
    for item in items:
        item["callsToday"] = item["successRate"] = _FIGURES
    pieces = dumps(items).split(_CUT)
    plain = RenderedJson(_NO_FIGURES.join(pieces), level=6)
    return _KeptList(version, [item["id"] for item in items], pieces, plain)


def _kept_list(organization: Organization) -> _KeptList:
    """The organization's rendered list, rendered again only when the triggers counted a change."""
    version = list_version(organization.pk)
    with _kept_lock:
        kept = _kept.get(organization.pk)
        if kept is not None and version is not None and kept.version == version:
            _kept.move_to_end(organization.pk)
            return kept
    fresh = _render_kept(_agent_items(organization=organization), -1 if version is None else version)
    if version is not None:
        with _kept_lock:
            _kept[organization.pk] = fresh
            _kept.move_to_end(organization.pk)
            total = sum(k.size for k in _kept.values())
            while total > KEPT_LIST_BYTES and len(_kept) > 1:
                total -= _kept.popitem(last=False)[1].size
    return fresh


def agent_list(*, organization: Organization) -> RenderedJson:
    """Every agent of the organization as list items, rendered (kit.renderers.dumps)."""
    kept = _kept_list(organization)
    stats = agent_call_stats(organization=organization)
    if not stats:
        return kept.plain
    figured = kept.figured
    if figured is not None and figured[0] == stats:
        return figured[1]
    parts = [kept.pieces[0]]
    for agent_id, piece in zip(kept.ids, kept.pieces[1:], strict=True):
        figures = stats.get(agent_id)
        parts.append(_NO_FIGURES if figures is None else b'%d,"successRate":%s' % (figures[0], dumps(figures[1])))
        parts.append(piece)
    rendered = RenderedJson(b"".join(parts), level=1)
    kept.figured = (stats, rendered)
    return rendered


def agent_detail(*, organization: Organization, agent_id: str) -> dict[str, Any]:
    """One agent as its list item; a non-UUID id is a 400, another organization's agent a 404."""
    parsed = parse_uuid(agent_id, "agent")
    items = _agent_items(organization=organization, agent_id=parsed)
    if not items:
        raise ApiError.not_found("Agent not found")
    item = items[0]
    item["callsToday"], item["successRate"] = agent_call_stats(organization=organization, agent_id=parsed).get(
        item["id"], (0, 0.0)
    )
    return item


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
    "interruption",
    "transfer",
    "handoffs",
    "flow",
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
        interruption,
        transfer,
        handoffs,
        flow,
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
        "callsToday": 0,
        "successRate": 0.0,
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
        "interruption": json_column(interruption),
        "transfer": json_column(transfer),
        "handoffs": json_column(handoffs),
        "flow": json_column(flow),
    }
