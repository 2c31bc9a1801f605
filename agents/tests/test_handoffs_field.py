"""Agent.handoffs through the public API and the dashboard form: the default, a list set by POST, PUT and
PATCH and read back normalized, 400s naming the entry (its shape, and a target that is not an active agent
of the organization, the agent itself, or twice) with nothing stored, and the engine's read of the targets
(agents.selectors.handoff_targets)."""

from __future__ import annotations

import json
import uuid

import pytest

from agents.models import Agent
from agents.selectors import handoff_targets
from testing import agent_api
from testing.dashboard import NEW_AGENT, edit_form, errors, page_form

BASE = {"name": "Reception", "instructions": "Greet callers and find out what they need."}
NO_AGENT = "No active agent with this id in the organization."
TARGET = "<target>"  # a parameter's stand-in for the active target's id


def create(persona, **fields):
    return agent_api.created(persona, {**BASE, **fields})


detail = agent_api.read


patch = agent_api.patched


def active_agent(persona, name="Billing"):
    agent_id = create(persona, name=name, instructions="Answer questions about bills.")
    response = patch(persona, agent_id, status="active")
    assert response.status_code == 200, response.json()
    return agent_id


def entry(agent_id, description="The caller asks about a bill.", context="all", last_n=None):
    return {"agentId": agent_id, "description": description, "context": context, "lastN": last_n}


def refused(response, key, message, *, prefix="Invalid agent"):
    """A 400 naming `key` with `message` (the whole message when the prefix is the services')."""
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["error"].startswith(f"{prefix}: {key}: "), body
    assert message in body["issues"][key][0], body
    if prefix == "Invalid agent":
        assert body == {"error": f"Invalid agent: {key}: {message}", "issues": {key: [message]}}
    return body


def test_a_new_agent_has_no_handoffs(owner):
    agent_id = create(owner)
    assert detail(owner, agent_id)["handoffs"] == []
    listed = {item["id"]: item for item in owner.client.get("/public/v1/agents").json()}
    assert listed[agent_id]["handoffs"] == []
    assert Agent.objects.get(pk=agent_id).handoffs == []


def test_handoffs_set_by_post_put_and_patch_are_read_back_normalized(owner):
    billing = active_agent(owner, "Billing")
    support = active_agent(owner, "Support")

    # POST: an id in capitals, a description with white space around it, context left out.
    reception = create(
        owner, handoffs=[{"agentId": billing.upper(), "description": "  The caller asks about a bill.\n"}]
    )
    assert detail(owner, reception)["handoffs"] == [entry(billing)]
    assert Agent.objects.get(pk=reception).handoffs == [entry(billing)]

    # PUT: replaced as a whole; a whole float is a whole number.
    response = owner.client.put(
        f"/public/v1/agents/{reception}",
        {
            **BASE,
            "handoffs": [
                {"agentId": support, "description": "Something is broken.", "context": "lastN", "lastN": 6.0},
                {"agentId": billing, "description": "A bill.", "context": "summary", "lastN": None},
            ],
        },
        format="json",
    )
    assert response.status_code == 200, response.json()
    expected = [entry(support, "Something is broken.", "lastN", 6), entry(billing, "A bill.", "summary")]
    assert detail(owner, reception)["handoffs"] == expected
    # The list shows the change at once (the agent list is kept until its triggers count a change).
    listed = {item["id"]: item for item in owner.client.get("/public/v1/agents").json()}
    assert listed[reception]["handoffs"] == expected

    # PATCH: the list is replaced; a PATCH of another field keeps it.
    response = patch(owner, reception, handoffs=[entry(billing, context="none")])
    assert response.status_code == 200, response.json()
    assert detail(owner, reception)["handoffs"] == [entry(billing, context="none")]
    response = patch(owner, reception, name="Front desk")
    assert response.status_code == 200, response.json()
    assert detail(owner, reception)["handoffs"] == [entry(billing, context="none")]
    listed = {item["id"]: item for item in owner.client.get("/public/v1/agents").json()}
    assert listed[reception]["handoffs"] == [entry(billing, context="none")]

    # A list item sent back as a PUT body keeps the list; a PUT without it puts the default back.
    item = detail(owner, reception)
    response = owner.client.put(f"/public/v1/agents/{reception}", item, format="json")
    assert response.status_code == 200, response.json()
    assert detail(owner, reception)["handoffs"] == [entry(billing, context="none")]
    response = owner.client.put(f"/public/v1/agents/{reception}", BASE, format="json")
    assert response.status_code == 200, response.json()
    assert detail(owner, reception)["handoffs"] == []


@pytest.mark.parametrize(
    ("handoffs", "key", "says"),
    [
        ("billing", "handoffs", "Must be a list of {agentId, description, context, lastN} objects."),
        ({"agentId": TARGET}, "handoffs", "Must be a list of"),
        ([{"agentId": TARGET, "description": "x"}] * 21, "handoffs", "At most 20 handoffs (this list has 21)."),
        (["billing"], "handoffs.0", "Must be a JSON object with agentId, description, context and lastN."),
        (
            [{"agentId": TARGET, "description": "A bill.", "priority": 1}],
            "handoffs.0.priority",
            "Unknown key; the keys are agentId, description, context and lastN.",
        ),
        ([{"description": "A bill."}], "handoffs.0.agentId", "Required: the id of the agent to hand off to."),
        ([{"agentId": "billing", "description": "A bill."}], "handoffs.0.agentId", "Must be an agent's id (a UUID)"),
        ([{"agentId": 7, "description": "A bill."}], "handoffs.0.agentId", "Must be an agent's id (a UUID), not 7."),
        ([{"agentId": TARGET}], "handoffs.0.description", "Required: when to hand off to this agent."),
        ([{"agentId": TARGET, "description": " \n "}], "handoffs.0.description", "May not be blank"),
        ([{"agentId": TARGET, "description": None}], "handoffs.0.description", "Must be a string"),
        (
            [{"agentId": TARGET, "description": "x" * 501}],
            "handoffs.0.description",
            "At most 500 characters (this one has 501).",
        ),
        (
            [{"agentId": TARGET, "description": "A bill.", "context": "recent"}],
            "handoffs.0.context",
            "Must be one of all, lastN, summary, none, not 'recent'.",
        ),
        (
            [{"agentId": TARGET, "description": "A bill.", "context": "lastN"}],
            "handoffs.0.lastN",
            'Required with context "lastN": how many turns go along (1 to 50).',
        ),
        (
            [{"agentId": TARGET, "description": "A bill.", "context": "lastN", "lastN": None}],
            "handoffs.0.lastN",
            'Required with context "lastN"',
        ),
        (
            [{"agentId": TARGET, "description": "A bill.", "context": "lastN", "lastN": 0}],
            "handoffs.0.lastN",
            "Must be a whole number of turns from 1 to 50, not 0.",
        ),
        (
            [{"agentId": TARGET, "description": "A bill.", "context": "lastN", "lastN": 51}],
            "handoffs.0.lastN",
            "Must be a whole number of turns from 1 to 50, not 51.",
        ),
        (
            [{"agentId": TARGET, "description": "A bill.", "context": "lastN", "lastN": 2.5}],
            "handoffs.0.lastN",
            "Must be a whole number of turns from 1 to 50, not 2.5.",
        ),
        (
            [{"agentId": TARGET, "description": "A bill.", "context": "lastN", "lastN": "5"}],
            "handoffs.0.lastN",
            "Must be a whole number of turns from 1 to 50, not '5'.",
        ),
        (
            [{"agentId": TARGET, "description": "A bill.", "context": "summary", "lastN": 5}],
            "handoffs.0.lastN",
            'Only with context "lastN" (this entry\'s context is "summary").',
        ),
        (
            [{"agentId": TARGET, "description": "A bill.", "lastN": 5}],
            "handoffs.0.lastN",
            'Only with context "lastN" (this entry\'s context is "all").',
        ),
        (
            [{"agentId": TARGET, "description": "A bill."}, {"agentId": TARGET.upper(), "description": "Again."}],
            "handoffs.1.agentId",
            "This agent is already a handoff target (handoffs.0).",
        ),
    ],
)
def test_a_list_of_a_bad_shape_is_a_400_naming_the_entry(owner, handoffs, key, says):
    target = active_agent(owner)
    body = json.loads(json.dumps(handoffs).replace(TARGET.upper(), target.upper()).replace(TARGET, target))
    before = Agent.objects.count()
    response = owner.client.post("/public/v1/agents", {**BASE, "handoffs": body}, format="json")
    refused(response, key, says, prefix="Invalid request")
    assert Agent.objects.count() == before


def test_a_target_that_is_not_an_active_agent_of_the_organization_is_a_400_naming_the_entry(owner, outsider):
    billing = active_agent(owner, "Billing")
    draft = create(owner, name="Draft")
    inactive = active_agent(owner, "Retired")
    assert patch(owner, inactive, status="inactive").status_code == 200
    elsewhere = active_agent(outsider, "Their billing")
    before = Agent.objects.count()

    answers = {}
    for name, target in (
        ("missing", str(uuid.uuid4())),
        ("other organization", elsewhere),
        ("draft", draft),
        ("inactive", inactive),
    ):
        handoffs = [entry(billing), entry(target, "Anything else.")]
        response = owner.client.post("/public/v1/agents", {**BASE, "handoffs": handoffs}, format="json")
        answers[name] = refused(response, "handoffs.1.agentId", NO_AGENT)
    # Another organization's agent is answered as an id no agent has.
    assert answers["other organization"] == answers["missing"]
    assert Agent.objects.count() == before


def test_put_and_patch_refuse_a_bad_target_and_change_nothing(owner, outsider):
    billing = active_agent(owner, "Billing")
    draft = create(owner, name="Draft")
    elsewhere = active_agent(outsider, "Their billing")
    reception = create(owner, handoffs=[entry(billing)])

    response = owner.client.put(
        f"/public/v1/agents/{reception}", {**BASE, "handoffs": [entry(billing), entry(draft)]}, format="json"
    )
    refused(response, "handoffs.1.agentId", NO_AGENT)
    response = patch(owner, reception, handoffs=[entry(elsewhere)])
    refused(response, "handoffs.0.agentId", NO_AGENT)
    response = patch(owner, reception, handoffs=[entry(billing, context="lastN")])
    refused(response, "handoffs.0.lastN", 'Required with context "lastN"', prefix="Invalid request")
    assert detail(owner, reception)["handoffs"] == [entry(billing)]


def test_an_agent_cannot_hand_off_to_itself(owner):
    billing = active_agent(owner, "Billing")
    reception = active_agent(owner, "Reception")
    response = patch(owner, reception, handoffs=[entry(billing), entry(reception, "Never.")])
    refused(response, "handoffs.1.agentId", "An agent cannot hand off to itself.")
    response = owner.client.put(
        f"/public/v1/agents/{reception}", {**BASE, "handoffs": [entry(reception)]}, format="json"
    )
    refused(response, "handoffs.0.agentId", "An agent cannot hand off to itself.")
    assert detail(owner, reception)["handoffs"] == []


def test_a_target_deactivated_later_does_not_block_other_edits_and_is_left_out_on_calls(
    owner, django_assert_num_queries
):
    billing = active_agent(owner, "Billing")
    support = active_agent(owner, "Support")
    sales = active_agent(owner, "Sales")
    reception = create(
        owner,
        handoffs=[
            entry(support, "Something is broken.", "lastN", 4),
            entry(billing),
            entry(sales, "The caller wants to buy.", "none"),
        ],
    )
    agent = Agent.objects.get(pk=reception)
    with django_assert_num_queries(1):
        targets = handoff_targets(agent=agent)
    assert [(item, target.name) for item, target in targets] == [
        (entry(support, "Something is broken.", "lastN", 4), "Support"),
        (entry(billing), "Billing"),
        (entry(sales, "The caller wants to buy.", "none"), "Sales"),
    ]

    assert patch(owner, support, status="inactive").status_code == 200
    assert owner.client.delete(f"/public/v1/agents/{sales}").status_code == 200
    # The stored list stays as it was written; a write that leaves it as it is goes through.
    response = patch(owner, reception, name="Front desk", status="active")
    assert response.status_code == 200, response.json()
    assert len(detail(owner, reception)["handoffs"]) == 3
    # A list written anew is checked again, naming the entry whose target is gone.
    response = patch(owner, reception, handoffs=[*detail(owner, reception)["handoffs"], entry(str(uuid.uuid4()))])
    refused(response, "handoffs.0.agentId", NO_AGENT)

    agent.refresh_from_db()
    with django_assert_num_queries(1):
        targets = handoff_targets(agent=agent)
    assert [(item, target.name) for item, target in targets] == [(entry(billing), "Billing")]
    assert targets[0][1].organization == owner.organization


def test_handoff_targets_leave_out_what_was_written_around_the_api(owner, make_agent, django_assert_num_queries):
    billing = make_agent(owner.organization, name="Billing", status="active")
    agent = make_agent(
        owner.organization,
        handoffs=[
            {"agentId": "not an id", "description": "x"},
            {"agentId": str(billing.pk).upper(), "description": " A bill. "},
            {"agentId": str(billing.pk), "description": "Twice."},
            "junk",
        ],
    )
    with django_assert_num_queries(1):
        targets = handoff_targets(agent=agent)
    assert targets == [(entry(str(billing.pk), "A bill."), billing)]

    itself = make_agent(owner.organization, name="Itself", status="active")
    itself.handoffs = [{"agentId": str(itself.pk), "description": "Itself."}]
    with django_assert_num_queries(0):
        assert handoff_targets(agent=itself) == []
        assert handoff_targets(agent=Agent(organization=owner.organization)) == []  # none: no query


def test_the_openapi_document_describes_the_list(owner):
    document = owner.client.get("/public/v1/openapi.json").json()
    schemas = document["components"]["schemas"]
    for schema in ("AgentWriteRequest", "PatchedAgentPatchRequest"):
        handoffs = schemas[schema]["properties"]["handoffs"]
        assert handoffs["type"] == "array" and handoffs["maxItems"] == 20
        item = handoffs["items"]
        assert item["additionalProperties"] is False
        assert item["required"] == ["agentId", "description"]
        assert item["properties"]["agentId"]["format"] == "uuid"
        assert item["properties"]["description"]["maxLength"] == 500
        assert item["properties"]["context"]["enum"] == ["all", "lastN", "summary", "none"]
        last_n = item["properties"]["lastN"]
        assert (last_n["minimum"], last_n["maximum"]) == (1, 50)
        assert item["then"]["required"] == ["lastN"]
    listed = document["paths"]["/public/v1/agents"]["get"]["responses"]["200"]["content"]["application/json"]
    item_schema = listed["schema"]["items"]
    while "$ref" in item_schema:
        item_schema = schemas[item_schema["$ref"].rsplit("/", 1)[1]]
    assert "handoffs" in item_schema["properties"]


# --- the dashboard's agent form ----------------------------------------------------------------------


def test_the_agent_form_sets_the_list_and_shows_a_refusal_naming_the_entry(staff_client, owner, make_agent):
    client = staff_client
    billing = make_agent(owner.organization, name="Billing", status="active")
    draft = make_agent(owner.organization, name="Draft")
    agent = make_agent(owner.organization, name="Reception")
    url = f"/admin/agents/agent/{agent.pk}/change/"
    page = client.get(url).content.decode()
    assert "Handoffs to other agents" in page
    assert f"Billing: {billing.pk}" in page and f"Draft: {draft.pk}" not in page

    wanted = [{"agentId": str(billing.pk), "description": "The caller asks about a bill."}]
    response = client.post(url, edit_form(agent, handoffs=json.dumps(wanted)))
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.handoffs == [entry(str(billing.pk))]

    # The page shows the list as JSON and posts it back as it is.
    form = page_form(client.get(url).content.decode())
    assert json.loads(form["handoffs"]) == [entry(str(billing.pk))]
    response = client.post(url, form)
    assert response.status_code == 302, errors(response.content.decode())

    refusals = [
        ([*wanted, {"agentId": str(draft.pk), "description": "Drafts."}], f"1.agentId: {NO_AGENT}"),
        ([{"agentId": str(agent.pk), "description": "Itself."}], "0.agentId: An agent cannot hand off to itself."),
        ([{**wanted[0], "context": "lastN"}], '0.lastN: Required with context "lastN"'),
        ({"agentId": str(billing.pk)}, "Must be a list of {agentId, description, context, lastN} objects."),
    ]
    for handoffs, says in refusals:
        agent.refresh_from_db()
        response = client.post(url, edit_form(agent, handoffs=json.dumps(handoffs)))
        assert response.status_code == 200
        shown = errors(response.content.decode())
        assert any(says in error for error in shown), shown
        assert "errors field-handoffs" in response.content.decode()  # on the list's own box
    response = client.post(url, edit_form(agent, handoffs="[{"))
    assert response.status_code == 200
    assert "Enter a valid JSON." in errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.handoffs == [entry(str(billing.pk))]

    # Left blank, the stored list stays; [] empties it.
    response = client.post(url, edit_form(agent, handoffs=""))
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.handoffs == [entry(str(billing.pk))]
    response = client.post(url, edit_form(agent, handoffs="[]"))
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.handoffs == []


def test_a_new_agent_from_the_dashboard_can_hand_off(staff_client, owner, make_agent):
    client = staff_client
    billing = make_agent(owner.organization, name="Billing", status="active")
    handoffs = [{"agentId": str(billing.pk), "description": "Bills.", "context": "summary"}]
    response = client.post(
        "/admin/agents/agent/add/",
        {**NEW_AGENT, "organization": str(owner.organization.pk), "handoffs": json.dumps(handoffs)},
    )
    assert response.status_code == 302, errors(response.content.decode())
    assert Agent.objects.get(name="Ava").handoffs == [entry(str(billing.pk), "Bills.", "summary")]
