"""Agent rules: creation, full replacement (PUT), partial update (PATCH), activation, ambient sound.

Every write validates the whole resulting agent (the merged state), checks plan allowances under a
row lock, and applies phone assignments in the same transaction: all or nothing. These are the only agent
writes: the public API (api/agents/apis.py) and the dashboard (agents/admin.py) both call them. Phone numbers
belong to the telephony app, a floor up: it registers its steps here when it starts (register_phone_steps,
telephony/apps.py and telephony/services/agents.py), as realtime registers the analysis queue (calls/analysis.py). A serverUrl sent in the
body is first checked as the egress guard checks every request to it (outside the transaction: its
host is resolved), and refused when every call would be refused. The agents named in `handoffs` must be
active agents of the same organization, other than the agent itself (checked when the list is written).
A `flow` (agents/flows.py) is checked against the database when it is written: each tool step names an
enabled custom tool of the agent (none on a POST: the tools are added after the agent), each handoff step
an active agent of the organization other than the agent itself.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from agents import flows
from agents.handoffs import issue_key
from agents.models import (
    DEFAULT_ANALYSIS_PLAN,
    DEFAULT_INTERRUPTION,
    DEFAULT_KEYPAD,
    DEFAULT_TRANSFER,
    DEFAULT_VOICEMAIL,
    MAX_DURATION_DEFAULT,
    Agent,
    AgentStatus,
    AgentTool,
    AgentType,
    AmbientSound,
    GreetingType,
    PromptType,
)
from agents.selectors import agent_get
from agents.tools.selectors import enabled_tools_problem
from kit import egress
from kit.errors import ApiError
from kit.fields import iso

# Model field -> value for a field that a create or a PUT does not supply.
DEFAULTS: dict[str, Any] = {
    "agent_type": AgentType.WEBHOOK,
    "language": "en-US",
    "ai_identity_disclosure_template_id": "standard",
    "voice_name": "eve",
    "server_url": None,
    "server_headers": {},
    "server_secret": None,
    "handoff_phone_number": None,
    "background_sound": "none",
    "ambient_sound": AmbientSound.NONE,
    "ambient_sound_volume": 0.25,
    "ambient_sound_ducking": True,
    "prompt_type": PromptType.STATIC,
    "identity": "",
    "instructions": "",
    "greeting_type": GreetingType.NONE,
    "static_greeting": None,
    "redact_pii": "off",
    "analysis_plan": DEFAULT_ANALYSIS_PLAN,
    "end_call_enabled": True,
    "max_duration_seconds": MAX_DURATION_DEFAULT,
    "recording_enabled": False,
    "time_zone": "UTC",
    "keypad": DEFAULT_KEYPAD,
    "voicemail": DEFAULT_VOICEMAIL,
    "interruption": DEFAULT_INTERRUPTION,
    "transfer": DEFAULT_TRANSFER,
    "handoffs": [],
    "flow": None,
}
EDITABLE_FIELDS = ("name", *DEFAULTS)
LEGACY_AMBIENT = {"office": AmbientSound.OFFICE2}

# camelCase names for error messages, so that issues name the field the caller sent.
WIRE_NAMES = {
    "name": "name",
    "agent_type": "agentType",
    "server_url": "serverUrl",
    "prompt_type": "promptType",
    "instructions": "instructions",
    "greeting_type": "greetingType",
    "static_greeting": "staticGreeting",
    "ambient_sound": "ambientSound",
    "phone_number_assignments": "phoneNumberAssignments",
    "redact_pii": "redactPii",
    "analysis_plan": "analysisPlan",
    "time_zone": "timeZone",
    "keypad": "keypad",
    "voicemail": "voicemail",
    "interruption": "interruption",
    "transfer": "transfer",
    "handoffs": "handoffs",
    "flow": "flow",
}


def ambient_sound_playable(agent: Agent) -> bool:
    """Whether the agent's saved ambient sound plays now: selected, and allowed by the current plan.

    After a downgrade the selection stays saved (agent rule 7) but this answers False until an upgrade.
    """
    return agent.ambient_sound != AmbientSound.NONE and agent.organization.plan.ambient_sounds_allowed


def _problems(state: dict[str, Any]) -> dict[str, list[str]]:
    """The agent rules that concern a single agent, checked on the merged state."""
    issues: dict[str, list[str]] = {}

    def add(field: str, message: str) -> None:
        issues.setdefault(WIRE_NAMES.get(field, field), []).append(message)

    if not state.get("name"):
        add("name", "This field is required.")
    if state["prompt_type"] == PromptType.DYNAMIC:
        if state["agent_type"] != AgentType.WEBHOOK:
            add("prompt_type", "A dynamic prompt requires agentType webhook.")
        if not state["server_url"]:
            add("server_url", "A dynamic prompt requires serverUrl.")
    elif not (state["instructions"] or "").strip():
        add("instructions", "Required when promptType is static.")
    if state["greeting_type"] == GreetingType.DYNAMIC and state["prompt_type"] != PromptType.DYNAMIC:
        add("greeting_type", "greetingType dynamic requires promptType dynamic.")
    if state["greeting_type"] == GreetingType.STATIC and not (state["static_greeting"] or "").strip():
        add("static_greeting", "Required when greetingType is static.")
    if state["agent_type"] != AgentType.WEBHOOK and state["server_url"]:
        add("server_url", f"serverUrl must be null for {state['agent_type']} agents; only webhook agents call it.")
    return issues


def _check_ambient(*, organization: Organization, new: str, saved: str) -> None:
    """Agent rule 6: selecting a new non-none ambient sound needs a plan with ambient sounds."""
    if new != AmbientSound.NONE and new != saved and not organization.plan.ambient_sounds_allowed:
        raise ApiError.forbidden(
            f"Ambient sounds are available on the Studio and Agency plans; the {organization.plan.name} plan "
            "does not include them.",
            code="FEATURE_NOT_AVAILABLE",
        )


def _check_activation(*, organization: Organization, agent_id: Any) -> None:
    """Operation rule 3: activation counts against the plan allowance (caller holds the org row lock)."""
    cap = organization.plan.max_active_agents
    if cap is None:
        return
    active = Agent.objects.filter(organization=organization, status=AgentStatus.ACTIVE).exclude(pk=agent_id).count()
    if active >= cap:
        raise ApiError.conflict(
            f"Activating this agent would exceed the {organization.plan.name} plan's allowance of {cap} active "
            f"agent{'s' if cap != 1 else ''}.",
            code="AGENT_LIMIT_EXCEEDED",
            maxAgents=cap,
        )


def _check_handoffs(*, organization: Organization, agent: Agent | None, handoffs: list[dict[str, Any]]) -> None:
    """Every handoff target an active agent of the organization, never the agent itself (one query for the
    whole list). The shape was checked with the body (agents/handoffs.py). An agent of another organization
    gets the answer of an id no agent has: nothing is told of other organizations."""
    if not handoffs:
        return
    active = {
        str(pk)
        for pk in Agent.objects.filter(
            organization=organization, status=AgentStatus.ACTIVE, pk__in=[entry["agentId"] for entry in handoffs]
        ).values_list("pk", flat=True)
    }
    for index, entry in enumerate(handoffs):
        if agent is not None and entry["agentId"] == str(agent.pk):
            message = "An agent cannot hand off to itself."
        elif entry["agentId"] not in active:
            message = "No active agent with this id in the organization."
        else:
            continue
        key = issue_key(f"{index}.agentId")
        raise ApiError.invalid(f"Invalid agent: {key}: {message}", {key: [message]})


def _check_flow(*, organization: Organization, agent: Agent | None, flow: dict[str, Any] | None) -> None:
    """Each tool step's tool an enabled custom tool of the agent (a new agent has none), each handoff step's
    agent an active agent of the organization other than the agent itself (as in `handoffs`); one query for
    each kind. The shape and the graph were checked with the body (agents/flows.py). Whatever changes later
    (a tool disabled, renamed or deleted, a target deactivated) does not touch the stored flow: on a call
    the tool step then gets the unknown tool's error and takes its onError way, and a handoff step to an
    agent that is not active fails and the call goes on with this agent."""
    tools = list(flows.tool_steps(flow))
    if tools:
        enabled = (
            set()
            if agent is None
            else set(
                AgentTool.objects.filter(agent=agent, enabled=True, name__in={name for _, name in tools}).values_list(
                    "name", flat=True
                )
            )
        )
        for node_id, name in tools:
            if name not in enabled:
                key = flows.issue_key(f"nodes.{node_id}.tool")
                message = f"The agent has no enabled custom tool named '{name}'."
                raise ApiError.invalid(f"Invalid agent: {key}: {message}", {key: [message]})
    targets = list(flows.handoff_steps(flow))
    if targets:
        active = {
            str(pk)
            for pk in Agent.objects.filter(
                organization=organization, status=AgentStatus.ACTIVE, pk__in={target for _, target in targets}
            ).values_list("pk", flat=True)
        }
        for node_id, target in targets:
            if agent is not None and target == str(agent.pk):
                message = "An agent cannot hand off to itself."
            elif target not in active:
                message = "No active agent with this id in the organization."
            else:
                continue
            key = flows.issue_key(f"nodes.{node_id}.agentId")
            raise ApiError.invalid(f"Invalid agent: {key}: {message}", {key: [message]})


def _lock_organization(organization: Organization) -> Organization:
    return Organization.objects.select_for_update().select_related("plan").get(pk=organization.pk)


# (phone number id, its handoff number or None): one assignment of the body.
NumberPair = tuple[uuid.UUID, str | None]
# The telephony rule that gives the agent exactly these numbers (none: unassign them all); it runs inside
# the write's transaction, after the agent is saved.
AssignNumbers = Callable[[Organization, Agent, list[NumberPair]], None]
# The telephony step of an agent's deletion, inside its transaction before the agent goes: its numbers
# unassigned, what else of telephony's the agent has released (it may refuse the deletion: ApiError).
ReleaseAgent = Callable[[Organization, Agent], None]


@dataclass(frozen=True)
class PhoneSteps:
    assign: AssignNumbers
    release: ReleaseAgent


_phone_steps: PhoneSteps | None = None


def register_phone_steps(*, assign: AssignNumbers, release: ReleaseAgent) -> None:
    """Set telephony's steps of the agent writes (telephony/apps.py, when it starts)."""
    global _phone_steps
    _phone_steps = PhoneSteps(assign=assign, release=release)


def _phone() -> PhoneSteps:
    if _phone_steps is None:
        raise RuntimeError("no phone steps: the telephony app registers them when it starts (telephony/apps.py)")
    return _phone_steps


def _assignments(data: dict[str, Any]) -> list[NumberPair] | None:
    """phoneNumberAssignments, or the legacy phoneNumberIds, or None when neither was sent."""
    if "phone_number_assignments" in data and "phone_number_ids" in data:
        raise ApiError.invalid(
            "Send phoneNumberAssignments or the legacy phoneNumberIds, not both.",
            {"phoneNumberIds": ["Not allowed together with phoneNumberAssignments."]},
        )
    if "phone_number_assignments" in data:
        return [(a["phone_number_id"], a["handoff_phone_number"]) for a in data["phone_number_assignments"]]
    if "phone_number_ids" in data:
        return [(pk, None) for pk in data["phone_number_ids"]]
    return None


def _next_updated_at(previous: datetime | None) -> datetime:
    now = timezone.now()
    if previous is not None and now <= previous:  # keep updatedAt strictly increasing
        now = previous + timedelta(microseconds=1)
    return now


def _write(
    *,
    organization: Organization,
    agent: Agent | None,
    state: dict[str, Any],
    status: str,
    assignments: list[NumberPair] | None,
) -> Agent:
    """Validate the final state against every rule, then save it (inside the caller's transaction)."""
    state = {**state, "ambient_sound": LEGACY_AMBIENT.get(state["ambient_sound"], state["ambient_sound"])}
    issues = _problems(state)
    if issues:
        field, messages = next(iter(issues.items()))
        raise ApiError.invalid(f"Invalid agent: {field}: {messages[0]}", issues)
    _check_ambient(
        organization=organization,
        new=state["ambient_sound"],
        saved=agent.ambient_sound if agent else AmbientSound.NONE,
    )
    if agent is not None:
        problem = enabled_tools_problem(agent=agent, agent_type=state["agent_type"], server_url=state["server_url"])
        if problem:
            raise ApiError.invalid(problem, {"agentType": [problem]})
    # The targets are checked when the list is written: a write that keeps the stored list as it is (a PATCH
    # of another field, the dashboard form saved with the list untouched) does not fail on a target that
    # was deactivated or deleted since (the engine leaves such a target out: handoff_targets).
    if agent is None or state["handoffs"] != agent.handoffs:
        _check_handoffs(organization=organization, agent=agent, handoffs=state["handoffs"])
    # The same for the flow's tools and handoff targets.
    if agent is None or state["flow"] != agent.flow:
        _check_flow(organization=organization, agent=agent, flow=state["flow"])
    if status == AgentStatus.ACTIVE and (agent is None or agent.status != AgentStatus.ACTIVE):
        _check_activation(organization=organization, agent_id=agent.pk if agent else None)

    if agent is None:
        agent = Agent(organization=organization)
    for field, value in state.items():
        setattr(agent, field, value)
    agent.status = status
    agent.updated_at = _next_updated_at(agent.updated_at)
    agent.save()
    if assignments is not None:
        _phone().assign(organization, agent, assignments)
    return agent


def _check_server_url(data: dict[str, Any]) -> None:
    """A serverUrl in the body to which every webhook request would be refused is a 400 now."""
    egress.validate_destination(data.get("server_url"), field=WIRE_NAMES["server_url"])


def _state_of(data: dict[str, Any]) -> dict[str, Any]:
    """An agent's fields from a POST or PUT body: what it sends, the defaults for the rest (copies:
    the JSON defaults are dicts, and an agent's value must never be the module's)."""
    return {**copy.deepcopy(DEFAULTS), **{k: v for k, v in data.items() if k in EDITABLE_FIELDS}}


def agent_create(*, organization: Organization, data: dict[str, Any]) -> Agent:
    """POST: a new agent is always a draft, whatever `status` says (it consumes no allowance)."""
    _check_server_url(data)
    state = _state_of(data)
    with transaction.atomic():
        return _write(
            organization=organization,
            agent=None,
            state=state,
            status=AgentStatus.DRAFT,
            assignments=_assignments(data),
        )


def agent_replace(*, organization: Organization, agent_id: str, data: dict[str, Any]) -> Agent:
    """PUT: replaces the agent. Omitted fields take their defaults; omitted status and phone
    assignments are kept (they have their own operations)."""
    _check_server_url(data)
    state = _state_of(data)
    with transaction.atomic():
        if data.get("status") == AgentStatus.ACTIVE:
            organization = _lock_organization(organization)
        agent = agent_get(organization=organization, agent_id=agent_id, for_update=True)
        return _write(
            organization=organization,
            agent=agent,
            state=state,
            status=data.get("status", agent.status),
            assignments=_assignments(data),
        )


def agent_patch(*, organization: Organization, agent_id: str, data: dict[str, Any]) -> Agent:
    """PATCH: optimistic concurrency on expectedUpdatedAt; unsent fields are kept; the merged agent
    must be valid as a whole."""
    expected = data["expected_updated_at"]
    _check_server_url(data)
    with transaction.atomic():
        if data.get("status") == AgentStatus.ACTIVE:
            organization = _lock_organization(organization)
        agent = agent_get(organization=organization, agent_id=agent_id, for_update=True)
        if agent.updated_at != expected:
            raise ApiError.conflict(
                "The agent changed after expectedUpdatedAt; read it again and retry with its current updatedAt.",
                updatedAt=iso(agent.updated_at),
            )
        state = {field: getattr(agent, field) for field in EDITABLE_FIELDS}
        state.update({k: v for k, v in data.items() if k in EDITABLE_FIELDS})
        return _write(
            organization=organization,
            agent=agent,
            state=state,
            status=data.get("status", agent.status),
            assignments=_assignments(data),
        )


def agent_delete(*, organization: Organization, agent_id: str) -> uuid.UUID:
    """DELETE: the agent goes with its custom tools, MCP tool selections, knowledge documents (with their
    chunks) and runtime logs; its phone numbers are unassigned and stay claimed by the organization; its
    calls stay in the history with no agent. All or nothing."""
    with transaction.atomic():
        agent = agent_get(organization=organization, agent_id=agent_id, for_update=True)
        pk = agent.pk
        # The telephony step: numbers unassigned (handoff number and assignment time cleared too), its
        # finished call batches deleted (an unfinished one refuses the deletion).
        _phone().release(organization, agent)
        # Tools, selections, documents, chunks, the knowledge index and logs cascade; Call.agent is SET_NULL.
        agent.delete()
    return pk
