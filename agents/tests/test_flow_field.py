"""Agent.flow through the public API and the dashboard's agent form: the default (null), a flow set by PUT and
PATCH and read back normalized (every key, defaults filled, texts trimmed) in the detail and the list, null
clearing it; 400s naming the place inside the flow for its shape and its graph (a step that does not exist,
one not reachable, a branch on a field nothing collects, a loop that never waits for the caller), and for
what the database decides (a tool step's enabled custom tool, a handoff step's active agent), with nothing
stored; the OpenAPI document; the dashboard's JSON box and the table of steps on the agent's page."""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

import pytest

from agents.models import Agent
from testing import agent_api
from testing.dashboard import NEW_AGENT, edit_form, errors, page_form

BASE = {"name": "Luigi", "instructions": "Take table bookings for Luigi's."}
HOOK = "https://hooks.example.com/agent"
TOOL = {"name": "book_table", "description": "Book a table", "parameterSchema": {"type": "object"}}
BILLING = "<billing>"  # a stand-in for the active billing agent's id


def flow_of_steps(**nodes: Any) -> dict[str, Any]:
    """A flow starting at `a`, with a final step `z` (an end) that steps may go to."""
    return {"start": "a", "nodes": {**nodes, "z": {"type": "end"}}}


# A flow with a step of every type, keys left to their defaults where they have one.
FULL: dict[str, Any] = {
    "start": "welcome",
    "nodes": {
        "welcome": {"type": "say", "text": "  Welcome to Luigi's, {{customer_name}}.\n", "next": "details"},
        "details": {
            "type": "collect",
            "fields": [
                {"name": "name", "type": "string", "prompt": " What name should the booking be under? "},
                {"name": "party_size", "type": "number", "min": 1, "max": 12.5, "prompt": "For how many people?"},
                {
                    "name": "seating",
                    "type": "enum",
                    "values": [" inside ", "terrace"],
                    "prompt": "Inside or on the terrace?",
                    "required": False,
                },
                {"name": "day", "type": "date", "prompt": "For which day?", "values": None, "min": None},
            ],
            "next": "book",
        },
        "book": {
            "type": "tool",
            "tool": "book_table",
            "arguments": {"name": "{{collected.name}}", "size": "{{collected.party_size}}", "vip": False},
            "next": "route",
            "onError": "sorry",
        },
        "route": {
            "type": "branch",
            "rules": [
                {"when": {"field": "party_size", "op": "gt", "value": 8}, "next": "manager"},
                {"when": {"field": "seating", "op": "in", "value": ["terrace", 3, True]}, "next": "terrace"},
                {"when": {"field": "seating", "op": "exists"}, "next": "bye"},
                {"when": {"field": "name", "op": "eq", "value": "Mario"}, "next": "billing"},
            ],
            "else": "bye",
        },
        "terrace": {
            "type": "conversation",
            "instructions": " Answer questions about the terrace. ",
            "exits": [
                {"description": "The caller is done.", "next": "bye"},
                {"description": " The caller wants to book again. ", "next": "details"},
            ],
        },
        "manager": {"type": "transfer", "phoneNumber": "+14155550123"},
        "billing": {"type": "handoff", "agentId": BILLING.upper()},
        "sorry": {"type": "end", "text": "Sorry, the booking did not go through."},
        "bye": {"type": "end"},
    },
}


def normalized_full(billing: str) -> dict[str, Any]:
    field = {"values": None, "min": None, "max": None, "required": True}
    return {
        "start": "welcome",
        "nodes": {
            "welcome": {"type": "say", "text": "Welcome to Luigi's, {{customer_name}}.", "next": "details"},
            "details": {
                "type": "collect",
                "fields": [
                    {**field, "name": "name", "type": "string", "prompt": "What name should the booking be under?"},
                    {
                        **field,
                        "name": "party_size",
                        "type": "number",
                        "min": 1,
                        "max": 12.5,
                        "prompt": "For how many people?",
                    },
                    {
                        **field,
                        "name": "seating",
                        "type": "enum",
                        "values": ["inside", "terrace"],
                        "prompt": "Inside or on the terrace?",
                        "required": False,
                    },
                    {**field, "name": "day", "type": "date", "prompt": "For which day?"},
                ],
                "next": "book",
            },
            "book": {
                "type": "tool",
                "tool": "book_table",
                "arguments": {"name": "{{collected.name}}", "size": "{{collected.party_size}}", "vip": False},
                "next": "route",
                "onError": "sorry",
            },
            "route": {
                "type": "branch",
                "rules": [
                    {"when": {"field": "party_size", "op": "gt", "value": 8}, "next": "manager"},
                    {"when": {"field": "seating", "op": "in", "value": ["terrace", 3, True]}, "next": "terrace"},
                    {"when": {"field": "seating", "op": "exists", "value": None}, "next": "bye"},
                    {"when": {"field": "name", "op": "eq", "value": "Mario"}, "next": "billing"},
                ],
                "else": "bye",
            },
            "terrace": {
                "type": "conversation",
                "instructions": "Answer questions about the terrace.",
                "exits": [
                    {"description": "The caller is done.", "next": "bye"},
                    {"description": "The caller wants to book again.", "next": "details"},
                ],
            },
            "manager": {"type": "transfer", "phoneNumber": "+14155550123", "mode": "cold"},
            "billing": {"type": "handoff", "agentId": billing},
            "sorry": {"type": "end", "text": "Sorry, the booking did not go through."},
            "bye": {"type": "end", "text": ""},
        },
    }


def with_billing(flow: dict[str, Any], billing: str) -> dict[str, Any]:
    return json.loads(json.dumps(flow).replace(BILLING.upper(), billing.upper()).replace(BILLING, billing))


def create(persona, **fields):
    return agent_api.created(persona, {**BASE, **fields})


detail = agent_api.read


listed = agent_api.listed


patch = agent_api.patched


def active_agent(persona, name="Billing"):
    agent_id = create(persona, name=name, instructions="Answer questions about bills.")
    response = patch(persona, agent_id, status="active")
    assert response.status_code == 200, response.json()
    return agent_id


def with_tool(persona, make_agent, name="book_table", **tool):
    """A webhook agent with one custom tool added through the API."""
    agent = make_agent(persona.organization, name="Luigi", agent_type="webhook", server_url=HOOK)
    response = persona.client.post(f"/public/v1/agents/{agent.pk}/tools", {**TOOL, "name": name, **tool}, format="json")
    assert response.status_code == 201, response.json()
    return str(agent.pk), response.json()["id"]


def refused(response, key, message, *, prefix="Invalid request"):
    """A 400 naming `key`, its message starting with `message` (the whole message for the services' checks)."""
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["error"].startswith(f"{prefix}: {key}: "), body
    assert body["issues"][key][0].startswith(message), body
    if prefix == "Invalid agent":
        assert body == {"error": f"Invalid agent: {key}: {message}", "issues": {key: [message]}}
    return body


# --- defaults and round trips -----------------------------------------------------------------------------


def test_a_new_agent_has_no_flow(owner):
    agent_id = create(owner)
    assert detail(owner, agent_id)["flow"] is None
    assert listed(owner, agent_id)["flow"] is None
    assert Agent.objects.get(pk=agent_id).flow is None


def test_a_flow_set_by_patch_and_put_is_read_back_normalized_and_null_clears_it(owner, make_agent):
    billing = active_agent(owner)
    agent_id, _ = with_tool(owner, make_agent)
    expected = normalized_full(billing)

    response = patch(owner, agent_id, flow=with_billing(FULL, billing))
    assert response.status_code == 200, response.json()
    assert detail(owner, agent_id)["flow"] == expected
    assert listed(owner, agent_id)["flow"] == expected  # the kept list shows the change at once
    assert Agent.objects.get(pk=agent_id).flow == expected

    # Stored normalized: sent again as it is read, it is the same; a PATCH of another field keeps it.
    response = patch(owner, agent_id, flow=expected)
    assert response.status_code == 200, response.json()
    response = patch(owner, agent_id, name="Luigi's")
    assert response.status_code == 200, response.json()
    assert detail(owner, agent_id)["flow"] == expected

    # A list item sent back as a PUT body keeps the flow; null clears it; a PUT without it puts null back.
    item = detail(owner, agent_id)
    response = owner.client.put(f"/public/v1/agents/{agent_id}", item, format="json")
    assert response.status_code == 200, response.json()
    assert detail(owner, agent_id)["flow"] == expected
    response = patch(owner, agent_id, flow=None)
    assert response.status_code == 200, response.json()
    assert detail(owner, agent_id)["flow"] is None
    assert listed(owner, agent_id)["flow"] is None
    response = owner.client.put(
        f"/public/v1/agents/{agent_id}",
        {**BASE, "agentType": "webhook", "serverUrl": HOOK, "flow": expected},
        format="json",
    )
    assert response.status_code == 200, response.json()
    assert detail(owner, agent_id)["flow"] == expected
    response = owner.client.put(
        f"/public/v1/agents/{agent_id}", {**BASE, "agentType": "webhook", "serverUrl": HOOK}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert detail(owner, agent_id)["flow"] is None


def test_a_post_takes_a_flow_without_tool_steps(owner):
    billing = active_agent(owner)
    flow = {
        "start": "hello",
        "nodes": {
            "hello": {"type": "say", "text": "Hello.", "next": "ask"},
            "ask": {
                "type": "collect",
                "fields": [{"name": "topic", "type": "enum", "values": ["bill", "other"], "prompt": "Bill or other?"}],
                "next": "route",
            },
            "route": {
                "type": "branch",
                "rules": [{"when": {"field": "topic", "op": "eq", "value": "bill"}, "next": "billing"}],
                "else": "hello",  # a loop through a collect step waits for the caller: allowed
            },
            "billing": {"type": "handoff", "agentId": billing},
        },
    }
    agent_id = create(owner, flow=flow)
    stored = detail(owner, agent_id)["flow"]
    assert stored["nodes"]["ask"]["fields"][0] == {
        "name": "topic",
        "type": "enum",
        "values": ["bill", "other"],
        "min": None,
        "max": None,
        "prompt": "Bill or other?",
        "required": True,
    }
    assert stored["nodes"]["route"]["rules"][0]["when"] == {"field": "topic", "op": "eq", "value": "bill"}


def test_a_loop_through_a_conversation_step_is_allowed(owner):
    flow = {
        "start": "hello",
        "nodes": {
            "hello": {"type": "say", "text": "Hello.", "next": "talk"},
            "talk": {
                "type": "conversation",
                "instructions": "Chat.",
                "exits": [{"description": "Again.", "next": "hello"}, {"description": "Done.", "next": "bye"}],
            },
            "bye": {"type": "end", "text": "Bye."},
        },
    }
    assert detail(owner, create(owner, flow=flow))["flow"]["nodes"]["talk"]["exits"][0] == {
        "description": "Again.",
        "next": "hello",
    }


# --- the shape ------------------------------------------------------------------------------------------

SAY = {"type": "say", "text": "Hi.", "next": "z"}
NUMBER = {"name": "size", "type": "number", "prompt": "How many?"}


def collect(*fields: Any) -> dict[str, Any]:
    return {"type": "collect", "fields": list(fields), "next": "z"}


def branch(*whens: Any) -> dict[str, Any]:
    return {"type": "branch", "rules": [{"when": when, "next": "z"} for when in whens], "else": "z"}


def asked_and(step: dict[str, Any]) -> dict[str, Any]:
    """A flow that collects `size` and then runs `step`."""
    return {"start": "a", "nodes": {"a": {**collect(NUMBER), "next": "b"}, "b": step, "z": {"type": "end"}}}


SHAPES = [
    ("billing", "flow", 'Must be a JSON object {"start": "<node id>", "nodes"'),
    ([], "flow", "Must be a JSON object"),
    ({**flow_of_steps(a=SAY), "version": 2}, "flow.version", "Unknown key; the keys are start and nodes."),
    ({"start": "a"}, "flow.nodes", "Required: the steps by id"),
    ({"start": "a", "nodes": {}}, "flow.nodes", "Must be a JSON object of at least one step by id"),
    ({"start": "a", "nodes": []}, "flow.nodes", "Must be a JSON object of at least one step by id"),
    (
        {"start": "s0", "nodes": {f"s{n}": {"type": "end"} for n in range(101)}},
        "flow.nodes",
        "At most 100 steps (this flow has 101).",
    ),
    ({"start": "a", "nodes": {"a b": SAY}}, "flow.nodes.a b", "A step id is 1 to 64 letters, digits, _ or -"),
    ({"start": "a", "nodes": {"a.b": SAY}}, "flow.nodes.a.b", "A step id is 1 to 64 letters"),
    ({"nodes": {"a": {"type": "end"}}}, "flow.start", "Required: the id of the first step."),
    ({"start": 3, "nodes": {"a": {"type": "end"}}}, "flow.start", "Must be the id of a step of the flow, not 3."),
    (flow_of_steps(a="hi"), "flow.nodes.a", "Must be a JSON object with a type: say, collect, tool, branch"),
    (flow_of_steps(a={"text": "Hi."}), "flow.nodes.a.type", "Required: one of say, collect, tool, branch,"),
    (
        flow_of_steps(a={"type": "wait"}),
        "flow.nodes.a.type",
        "Must be one of say, collect, tool, branch, conversation, handoff, transfer, end, not 'wait'.",
    ),
    (
        flow_of_steps(a={**SAY, "prompt": "x"}),
        "flow.nodes.a.prompt",
        "Unknown key; the keys are those of a say step: type, text, next.",
    ),
    (flow_of_steps(a={"type": "say", "next": "z"}), "flow.nodes.a.text", "Required: a text of at most 1000"),
    (flow_of_steps(a={**SAY, "text": " \n "}), "flow.nodes.a.text", "May not be blank."),
    (flow_of_steps(a={**SAY, "text": None}), "flow.nodes.a.text", "Must be a string of at most 1000 characters"),
    (flow_of_steps(a={**SAY, "text": "x" * 1001}), "flow.nodes.a.text", "At most 1000 characters (this one has 1001)."),
    (flow_of_steps(a={"type": "say", "text": "Hi."}), "flow.nodes.a.next", "Required: the id of the step to go to."),
    (flow_of_steps(a={**SAY, "next": 5}), "flow.nodes.a.next", "Must be the id of a step of the flow, not 5."),
    # collect
    (flow_of_steps(a={"type": "collect", "next": "z"}), "flow.nodes.a.fields", "Required: the values to ask for"),
    (flow_of_steps(a=collect()), "flow.nodes.a.fields", "Must be a list of 1 to 20"),
    (
        flow_of_steps(a=collect(*({**NUMBER, "name": f"f{n}"} for n in range(21)))),
        "flow.nodes.a.fields",
        "At most 20 fields (this list has 21).",
    ),
    (flow_of_steps(a=collect("size")), "flow.nodes.a.fields.0", "Must be a JSON object with name, type and prompt."),
    (
        flow_of_steps(a=collect({**NUMBER, "label": "x"})),
        "flow.nodes.a.fields.0.label",
        "Unknown key; the keys are name,",
    ),
    (flow_of_steps(a=collect({"type": "string", "prompt": "?"})), "flow.nodes.a.fields.0.name", "Required: the name"),
    (
        flow_of_steps(a=collect({**NUMBER, "name": "Party"})),
        "flow.nodes.a.fields.0.name",
        "Must be a lower-case letter then up to 39 lower-case letters, digits or _ (party_size), not 'Party'.",
    ),
    (flow_of_steps(a=collect({**NUMBER, "name": "a" * 41})), "flow.nodes.a.fields.0.name", "Must be a lower-case"),
    (
        flow_of_steps(a=collect({"name": "size", "prompt": "?"})),
        "flow.nodes.a.fields.0.type",
        "Required: one of string,",
    ),
    (
        flow_of_steps(a=collect({**NUMBER, "type": "color"})),
        "flow.nodes.a.fields.0.type",
        "Must be one of string, number, date, time, phone, email, enum, not 'color'.",
    ),
    (
        flow_of_steps(a=collect({**NUMBER, "type": "enum"})),
        "flow.nodes.a.fields.0.values",
        'Required with type "enum": the 1 to 50 values the caller may give.',
    ),
    (
        flow_of_steps(a=collect({**NUMBER, "type": "enum", "values": []})),
        "flow.nodes.a.fields.0.values",
        "Must be a list of 1 to 50 strings.",
    ),
    (
        flow_of_steps(a=collect({**NUMBER, "type": "enum", "values": [str(n) for n in range(51)]})),
        "flow.nodes.a.fields.0.values",
        "At most 50 values (this list has 51).",
    ),
    (
        flow_of_steps(a=collect({**NUMBER, "type": "enum", "values": ["a", " "]})),
        "flow.nodes.a.fields.0.values.1",
        "May not be blank.",
    ),
    (
        flow_of_steps(a=collect({**NUMBER, "type": "enum", "values": ["a", 2]})),
        "flow.nodes.a.fields.0.values.1",
        "Must be a string",
    ),
    (
        flow_of_steps(a=collect({**NUMBER, "type": "string", "values": ["a"]})),
        "flow.nodes.a.fields.0.values",
        'Only with type "enum" (this field\'s type is "string").',
    ),
    (
        flow_of_steps(a=collect({**NUMBER, "type": "date", "min": 1})),
        "flow.nodes.a.fields.0.min",
        'Only with type "number" (this field\'s type is "date").',
    ),
    (
        flow_of_steps(a=collect({**NUMBER, "min": "1"})),
        "flow.nodes.a.fields.0.min",
        "Must be a number or null, not '1'.",
    ),
    (
        flow_of_steps(a=collect({**NUMBER, "max": True})),
        "flow.nodes.a.fields.0.max",
        "Must be a number or null, not True.",
    ),
    (
        flow_of_steps(a=collect({**NUMBER, "min": 5, "max": 1})),
        "flow.nodes.a.fields.0.max",
        "Must be at least min (5), not 1.",
    ),
    (flow_of_steps(a=collect({"name": "size", "type": "number"})), "flow.nodes.a.fields.0.prompt", "Required: a text"),
    (
        flow_of_steps(a=collect({**NUMBER, "prompt": "x" * 501})),
        "flow.nodes.a.fields.0.prompt",
        "At most 500 characters",
    ),
    (
        flow_of_steps(a=collect({**NUMBER, "required": "yes"})),
        "flow.nodes.a.fields.0.required",
        "Must be true or false",
    ),
    (
        flow_of_steps(a=collect(NUMBER, {**NUMBER, "type": "string"})),
        "flow.nodes.a.fields.1.name",
        "Another field of this step has this name (flow.nodes.a.fields.0).",
    ),
    # tool
    (
        flow_of_steps(a={"type": "tool", "next": "z", "onError": "z"}),
        "flow.nodes.a.tool",
        "Required: the name of one of the agent's custom tools.",
    ),
    (
        flow_of_steps(a={"type": "tool", "tool": "book table", "next": "z", "onError": "z"}),
        "flow.nodes.a.tool",
        "Must be a custom tool's name (1 to 64 letters, digits, _ or -), not 'book table'.",
    ),
    (
        flow_of_steps(a={"type": "tool", "tool": "book", "arguments": [], "next": "z", "onError": "z"}),
        "flow.nodes.a.arguments",
        "Must be a JSON object of the tool's arguments by name.",
    ),
    (
        flow_of_steps(a={"type": "tool", "tool": "book", "next": "z"}),
        "flow.nodes.a.onError",
        "Required: the id of the step to go to.",
    ),
    # branch
    ({**asked_and({"type": "branch", "rules": [], "else": "z"})}, "flow.nodes.b.rules", "Must be a list of 1 to 20"),
    (
        asked_and(branch(*[{"field": "size", "op": "exists"}] * 21)),
        "flow.nodes.b.rules",
        "At most 20 rules (this list has 21).",
    ),
    (
        asked_and({"type": "branch", "rules": [{"when": {"field": "size", "op": "exists"}, "next": "z"}]}),
        "flow.nodes.b.else",
        "Required",
    ),
    (asked_and({"type": "branch", "rules": [{"next": "z"}], "else": "z"}), "flow.nodes.b.rules.0.when", "Required"),
    (
        asked_and({"type": "branch", "rules": ["size"], "else": "z"}),
        "flow.nodes.b.rules.0",
        "Must be a JSON object with when and next.",
    ),
    (
        asked_and(branch({"field": "size", "op": "like", "value": 1})),
        "flow.nodes.b.rules.0.when.op",
        "Must be one of eq, ne, lt, gt, in, exists",
    ),
    (asked_and(branch({"field": "size", "value": 1})), "flow.nodes.b.rules.0.when.op", "Required: one of eq,"),
    (
        asked_and(branch({"op": "exists"})),
        "flow.nodes.b.rules.0.when.field",
        "Required: the name of a collected field.",
    ),
    (asked_and(branch({"field": "size", "op": "exists", "also": 1})), "flow.nodes.b.rules.0.when.also", "Unknown key"),
    (
        asked_and(branch({"field": "size", "op": "gt", "value": "8"})),
        "flow.nodes.b.rules.0.when.value",
        'Must be a number with op "gt"',
    ),
    (asked_and(branch({"field": "size", "op": "lt"})), "flow.nodes.b.rules.0.when.value", 'Required with op "lt".'),
    (
        asked_and(branch({"field": "size", "op": "in", "value": 3})),
        "flow.nodes.b.rules.0.when.value",
        'Must be a list of 1 to 50 values with op "in".',
    ),
    (
        asked_and(branch({"field": "size", "op": "in", "value": [1, [2]]})),
        "flow.nodes.b.rules.0.when.value.1",
        "Must be a string, a number",
    ),
    (
        asked_and(branch({"field": "size", "op": "exists", "value": 1})),
        "flow.nodes.b.rules.0.when.value",
        'Must be null or left out with op "exists".',
    ),
    (
        asked_and(branch({"field": "size", "op": "eq", "value": {"a": 1}})),
        "flow.nodes.b.rules.0.when.value",
        "Must be a string, a number, true or false",
    ),
    (asked_and(branch({"field": "size", "op": "ne"})), "flow.nodes.b.rules.0.when.value", 'Required with op "ne".'),
    # conversation
    (
        flow_of_steps(a={"type": "conversation", "exits": [{"description": "Done.", "next": "z"}]}),
        "flow.nodes.a.instructions",
        "Required: a text of at most 4000 characters.",
    ),
    (
        flow_of_steps(
            a={"type": "conversation", "instructions": "x" * 4001, "exits": [{"description": "Done.", "next": "z"}]}
        ),
        "flow.nodes.a.instructions",
        "At most 4000 characters (this one has 4001).",
    ),
    (
        flow_of_steps(a={"type": "conversation", "instructions": "Chat.", "exits": []}),
        "flow.nodes.a.exits",
        "Must be a list of 1 to 10",
    ),
    (
        flow_of_steps(
            a={"type": "conversation", "instructions": "Chat.", "exits": [{"description": "x", "next": "z"}] * 11}
        ),
        "flow.nodes.a.exits",
        "At most 10 exits (this list has 11).",
    ),
    (
        flow_of_steps(a={"type": "conversation", "instructions": "Chat.", "exits": [{"next": "z"}]}),
        "flow.nodes.a.exits.0.description",
        "Required",
    ),
    (
        flow_of_steps(a={"type": "conversation", "instructions": "Chat.", "exits": [{"description": "Done."}]}),
        "flow.nodes.a.exits.0.next",
        "Required",
    ),
    # handoff, transfer, end
    (
        flow_of_steps(a={"type": "handoff"}),
        "flow.nodes.a.agentId",
        "Required: the id of the agent to hand the call to.",
    ),
    (
        flow_of_steps(a={"type": "handoff", "agentId": "billing"}),
        "flow.nodes.a.agentId",
        "Must be an agent's id (a UUID), not 'billing'.",
    ),
    (flow_of_steps(a={"type": "transfer"}), "flow.nodes.a.phoneNumber", "Required: the E.164 number"),
    (
        flow_of_steps(a={"type": "transfer", "phoneNumber": "555 0123"}),
        "flow.nodes.a.phoneNumber",
        "Must be a phone number in E.164 format",
    ),
    (
        flow_of_steps(a={"type": "transfer", "phoneNumber": "+15555550100"}),
        "flow.nodes.a.phoneNumber",
        "Not a valid phone number.",
    ),
    (
        flow_of_steps(a={"type": "transfer", "phoneNumber": "+14155550123", "mode": "hot"}),
        "flow.nodes.a.mode",
        "Must be one of cold, warm, not 'hot'.",
    ),
    (
        flow_of_steps(a={"type": "end", "text": None}),
        "flow.nodes.a.text",
        "Must be a string of at most 1000 characters",
    ),
    (flow_of_steps(a={"type": "end", "text": "x" * 1001}), "flow.nodes.a.text", "At most 1000 characters"),
    (flow_of_steps(a={"type": "end", "next": "z"}), "flow.nodes.a.next", "Unknown key; the keys are those of an end"),
]


@pytest.mark.parametrize(("flow", "key", "says"), SHAPES, ids=[f"{n}-{case[1]}" for n, case in enumerate(SHAPES)])
def test_a_flow_of_a_bad_shape_is_a_400_naming_the_place(owner, flow, key, says):
    before = Agent.objects.count()
    response = owner.client.post("/public/v1/agents", {**BASE, "flow": flow}, format="json")
    refused(response, key, says)
    assert Agent.objects.count() == before


# --- the graph ------------------------------------------------------------------------------------------

LOOP = "This step is in a loop with no collect or conversation step: the call would never wait for the caller."
GRAPHS = [
    ({"start": "nowhere", "nodes": {"a": {"type": "end"}}}, "flow.start", "No node 'nowhere' in the flow."),
    (flow_of_steps(a={**SAY, "next": "b"}), "flow.nodes.a.next", "No node 'b' in the flow."),
    (
        flow_of_steps(a={"type": "tool", "tool": "book", "next": "z", "onError": "oops"}),
        "flow.nodes.a.onError",
        "No node 'oops' in the flow.",
    ),
    (
        asked_and({**branch({"field": "size", "op": "exists"}), "else": "other"}),
        "flow.nodes.b.else",
        "No node 'other' in the flow.",
    ),
    (
        asked_and(
            {"type": "branch", "rules": [{"when": {"field": "size", "op": "exists"}, "next": "big"}], "else": "z"}
        ),
        "flow.nodes.b.rules.0.next",
        "No node 'big' in the flow.",
    ),
    (
        flow_of_steps(
            a={
                "type": "conversation",
                "instructions": "Chat.",
                "exits": [{"description": "Done.", "next": "z"}, {"description": "Help.", "next": "help"}],
            }
        ),
        "flow.nodes.a.exits.1.next",
        "No node 'help' in the flow.",
    ),
    (flow_of_steps(a=SAY, orphan={**SAY}), "flow.nodes.orphan", "Not reachable from the start node 'a'."),
    (
        {"start": "a", "nodes": {"a": {"type": "end"}, "b": {"type": "say", "text": "x", "next": "a"}}},
        "flow.nodes.b",
        "Not reachable from the start node 'a'.",
    ),
    (
        flow_of_steps(a=branch({"field": "party_size", "op": "gt", "value": 8})),
        "flow.nodes.a.rules.0.when.field",
        "No collect step collects 'party_size'.",
    ),
    (
        asked_and(branch({"field": "size", "op": "exists"}, {"field": "name", "op": "eq", "value": "x"})),
        "flow.nodes.b.rules.1.when.field",
        "No collect step collects 'name'.",
    ),
    ({"start": "a", "nodes": {"a": {**SAY, "next": "a"}}}, "flow.nodes.a", LOOP),
    (
        {
            "start": "hello",
            "nodes": {
                "hello": {"type": "say", "text": "Hello.", "next": "check"},
                "check": {"type": "tool", "tool": "status", "next": "ask", "onError": "sorry"},
                "sorry": {"type": "say", "text": "Let me try again.", "next": "route"},
                "route": branch({"field": "size", "op": "exists"}) | {"else": "check"},
                "ask": collect(NUMBER) | {"next": "route"},
                "z": {"type": "end"},
            },
        },
        "flow.nodes.check",
        LOOP,
    ),
]


@pytest.mark.parametrize(("flow", "key", "says"), GRAPHS, ids=[f"{n}-{case[1]}" for n, case in enumerate(GRAPHS)])
def test_a_flow_whose_graph_is_wrong_is_a_400_naming_the_step(owner, flow, key, says):
    before = Agent.objects.count()
    response = owner.client.post("/public/v1/agents", {**BASE, "flow": flow}, format="json")
    refused(response, key, says)
    assert response.json() == {"error": f"Invalid request: {key}: {says}", "issues": {key: [says]}}
    assert Agent.objects.count() == before


# --- the agent's tools and the handoff targets -------------------------------------------------------------

TOOL_FLOW = {
    "start": "book",
    "nodes": {
        "book": {"type": "tool", "tool": "book_table", "next": "done", "onError": "done"},
        "done": {"type": "end", "text": "Done."},
    },
}


def no_tool(name):
    return f"The agent has no enabled custom tool named '{name}'."


def test_a_tool_step_names_an_enabled_custom_tool_of_the_agent(owner, make_agent):
    # A new agent has no tools yet: a POST with a tool step is refused (the flow is set once the tools exist).
    before = Agent.objects.count()
    response = owner.client.post("/public/v1/agents", {**BASE, "flow": TOOL_FLOW}, format="json")
    refused(response, "flow.nodes.book.tool", no_tool("book_table"), prefix="Invalid agent")
    assert Agent.objects.count() == before

    agent_id, _ = with_tool(owner, make_agent, name="lookup")
    response = patch(owner, agent_id, flow=TOOL_FLOW)
    refused(response, "flow.nodes.book.tool", no_tool("book_table"), prefix="Invalid agent")
    # Another agent's tool of that name is not this agent's.
    with_tool(owner, make_agent, name="book_table")
    response = patch(owner, agent_id, flow=TOOL_FLOW)
    refused(response, "flow.nodes.book.tool", no_tool("book_table"), prefix="Invalid agent")
    assert detail(owner, agent_id)["flow"] is None

    # A disabled tool is refused; enabled, it is taken.
    tools = f"/public/v1/agents/{agent_id}/tools"
    response = owner.client.post(tools, {**TOOL, "enabled": False}, format="json")
    assert response.status_code == 201, response.json()
    book = response.json()["id"]
    refused(
        patch(owner, agent_id, flow=TOOL_FLOW), "flow.nodes.book.tool", no_tool("book_table"), prefix="Invalid agent"
    )
    assert owner.client.put(f"{tools}/{book}", {**TOOL, "enabled": True}, format="json").status_code == 200
    response = patch(owner, agent_id, flow=TOOL_FLOW)
    assert response.status_code == 200, response.json()
    assert detail(owner, agent_id)["flow"]["nodes"]["book"] == {
        "type": "tool",
        "tool": "book_table",
        "arguments": {},
        "next": "done",
        "onError": "done",
    }

    # Disabling or deleting the tool later is allowed and leaves the flow as it is (on a call the step gets
    # the unknown tool's error and takes its onError way); other writes go through; the flow written anew
    # is checked again.
    assert owner.client.put(f"{tools}/{book}", {**TOOL, "enabled": False}, format="json").status_code == 200
    assert patch(owner, agent_id, name="Luigi's").status_code == 200
    assert owner.client.delete(f"{tools}/{book}").status_code in (200, 204)
    item = detail(owner, agent_id)
    assert item["flow"]["nodes"]["book"]["tool"] == "book_table"
    assert owner.client.put(f"/public/v1/agents/{agent_id}", item, format="json").status_code == 200
    flow = copy.deepcopy(item["flow"])
    flow["nodes"]["done"]["text"] = "All done."
    refused(patch(owner, agent_id, flow=flow), "flow.nodes.book.tool", no_tool("book_table"), prefix="Invalid agent")


NO_AGENT = "No active agent with this id in the organization."


def handoff_flow(agent_id):
    return {
        "start": "hello",
        "nodes": {
            "hello": {"type": "say", "text": "One moment.", "next": "billing"},
            "billing": {"type": "handoff", "agentId": agent_id},
        },
    }


def test_a_handoff_step_names_an_active_agent_of_the_organization_other_than_itself(owner, outsider):
    billing = active_agent(owner, "Billing")
    draft = create(owner, name="Draft")
    retired = active_agent(owner, "Retired")
    assert patch(owner, retired, status="inactive").status_code == 200
    elsewhere = active_agent(outsider, "Their billing")
    before = Agent.objects.count()

    answers = {}
    for name, target in (
        ("missing", str(uuid.uuid4())),
        ("other organization", elsewhere),
        ("draft", draft),
        ("inactive", retired),
    ):
        response = owner.client.post("/public/v1/agents", {**BASE, "flow": handoff_flow(target)}, format="json")
        answers[name] = refused(response, "flow.nodes.billing.agentId", NO_AGENT, prefix="Invalid agent")
    assert answers["other organization"] == answers["missing"]  # nothing is told of other organizations
    assert Agent.objects.count() == before

    reception = create(owner, flow=handoff_flow(billing.upper()))
    assert detail(owner, reception)["flow"]["nodes"]["billing"] == {"type": "handoff", "agentId": billing}
    response = patch(owner, reception, flow=handoff_flow(reception))
    refused(response, "flow.nodes.billing.agentId", "An agent cannot hand off to itself.", prefix="Invalid agent")
    # A target deactivated later does not block other writes; the flow written anew is checked again.
    assert patch(owner, billing, status="inactive").status_code == 200
    assert patch(owner, reception, name="Front desk").status_code == 200
    flow = handoff_flow(billing)
    flow["nodes"]["hello"]["text"] = "Please hold."
    refused(patch(owner, reception, flow=flow), "flow.nodes.billing.agentId", NO_AGENT, prefix="Invalid agent")
    assert detail(owner, reception)["flow"] == handoff_flow(billing)


def test_the_openapi_document_describes_the_flow(owner):
    document = owner.client.get("/public/v1/openapi.json").json()
    schemas = document["components"]["schemas"]
    for schema in ("AgentWriteRequest", "PatchedAgentPatchRequest", "AgentListItem"):
        flow = schemas[schema]["properties"]["flow"]
        assert flow["type"] == ["object", "null"]
        assert flow["required"] == ["start", "nodes"] and flow["additionalProperties"] is False
        nodes = flow["properties"]["nodes"]
        assert (nodes["minProperties"], nodes["maxProperties"]) == (1, 100)
        assert nodes["propertyNames"]["pattern"] == "^[A-Za-z0-9_-]{1,64}$"
        kinds = {node["properties"]["type"]["const"]: node for node in nodes["additionalProperties"]["oneOf"]}
        assert list(kinds) == ["say", "collect", "tool", "branch", "conversation", "handoff", "transfer", "end"]
        assert all(node["additionalProperties"] is False for node in kinds.values())
        assert kinds["say"]["properties"]["text"]["maxLength"] == 1000
        assert kinds["transfer"]["properties"]["phoneNumber"]["format"] == "e164"
        assert kinds["handoff"]["properties"]["agentId"]["format"] == "uuid"
        if schema == "AgentListItem":  # stored normalized: every key is there
            assert kinds["tool"]["required"] == ["type", "tool", "arguments", "next", "onError"]
            assert kinds["end"]["required"] == ["type", "text"]
        else:
            assert kinds["tool"]["required"] == ["type", "tool", "next", "onError"]
            assert kinds["end"]["required"] == ["type"]
            assert kinds["collect"]["properties"]["fields"]["items"]["required"] == ["name", "type", "prompt"]


# --- the dashboard's agent form ----------------------------------------------------------------------


def test_the_agent_form_sets_the_flow_shows_its_steps_and_a_refusal_naming_the_place(staff_client, owner, make_agent):
    client = staff_client
    billing = make_agent(owner.organization, name="Billing", status="active")
    agent = make_agent(owner.organization, name="Luigi", agent_type="webhook", server_url=HOOK)
    make_tool = owner.client.post(f"/public/v1/agents/{agent.pk}/tools", TOOL, format="json")
    assert make_tool.status_code == 201
    url = f"/admin/agents/agent/{agent.pk}/change/"
    page = client.get(url).content.decode()
    assert "Flow (JSON)" in page and "No flow: the agent&#x27;s prompt and tools run the conversation." in page
    assert json.loads(page_form(page)["flow"]) is None

    wanted = with_billing(FULL, str(billing.pk))
    response = client.post(url, edit_form(agent, flow=json.dumps(wanted)))
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.flow == normalized_full(str(billing.pk))

    # The page shows the flow as JSON, posts it back as it is, and lists its steps from the start.
    page = client.get(url).content.decode()
    form = page_form(page)
    assert json.loads(form["flow"]) == normalized_full(str(billing.pk))
    table = page[page.index('<table class="flow-steps">') :]
    table = table[: table.index("</table>")]
    steps = [row.split("<td>")[1].split("</td>")[0] for row in table.split("<tr>")[2:]]
    assert steps == [
        "welcome (start)",
        "details",
        "book",
        "route",
        "sorry",
        "manager",
        "terrace",
        "bye",
        "billing",
    ]
    assert (
        "<td>book</td><td>tool</td><td>calls the tool book_table</td><td>next → route; on error → sorry</td>" in table
    )
    assert "party_size (number 1 to 12.5)" in table and "seating (enum: inside, terrace, optional)" in table
    assert (
        "party_size gt 8 → manager; seating in [&quot;terrace&quot;, 3, true] → terrace; seating exists → bye; "
        "name eq &quot;Mario&quot; → billing; else → bye"
    ) in table
    assert "exit: The caller wants to book again. → details" in table
    assert "{{customer_name}}" in table and "<script" not in table
    response = client.post(url, form)
    assert response.status_code == 302, errors(response.content.decode())

    bad_tool = copy.deepcopy(wanted)
    bad_tool["nodes"]["book"]["tool"] = "reserve"
    unreachable = copy.deepcopy(wanted)
    unreachable["nodes"]["orphan"] = {"type": "end"}
    refusals = [
        (bad_tool, "nodes.book.tool: The agent has no enabled custom tool named 'reserve'."),
        (unreachable, "nodes.orphan: Not reachable from the start node 'welcome'."),
        ({**wanted, "start": "nowhere"}, "start: No node 'nowhere' in the flow."),
        ({"start": "a"}, "nodes: Required: the steps by id"),
        ([], "Must be a JSON object"),
    ]
    for flow, says in refusals:
        agent.refresh_from_db()
        response = client.post(url, edit_form(agent, flow=json.dumps(flow)))
        assert response.status_code == 200
        shown = errors(response.content.decode())
        assert any(error.startswith(says) for error in shown), shown
        assert "errors field-flow" in response.content.decode()  # on the flow's own box
    response = client.post(url, edit_form(agent, flow='{"start": '))
    assert response.status_code == 200
    assert "Enter a valid JSON." in errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.flow == normalized_full(str(billing.pk))

    # Left blank, the stored flow stays; null clears it.
    response = client.post(url, edit_form(agent, flow=""))
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.flow == normalized_full(str(billing.pk))
    response = client.post(url, edit_form(agent, flow="null"))
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.flow is None


def test_a_new_agent_from_the_dashboard_can_have_a_flow_without_tool_steps(staff_client, owner):
    flow = {"start": "hi", "nodes": {"hi": {"type": "end", "text": " Closed today. "}}}
    response = staff_client.post(
        "/admin/agents/agent/add/",
        {**NEW_AGENT, "organization": str(owner.organization.pk), "flow": json.dumps(flow)},
    )
    assert response.status_code == 302, errors(response.content.decode())
    assert Agent.objects.get(name="Ava").flow == {
        "start": "hi",
        "nodes": {"hi": {"type": "end", "text": "Closed today."}},
    }
