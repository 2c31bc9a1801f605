"""GET and DELETE /public/v1/agents/{id}, and what PUT and PATCH answer."""

import uuid

import pytest

from agents.models import Agent, AgentTool, McpServer, McpToolSelection
from calls import services as calls
from calls.models import AgentLog
from knowledge.models import AgentKnowledgeIndex, KnowledgeChunk, KnowledgeDocument
from telephony.models import PhoneNumber
from telephony.services.numbers import phone_number_assign, phone_number_claim
from testing.factories import AgentToolFactory, KnowledgeDocumentFactory, McpServerFactory

BASE = {"name": "Support", "instructions": "Help callers with their orders."}


def create(persona, **fields):
    response = persona.client.post("/public/v1/agents", {**BASE, **fields}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()["id"]


def url(agent_id):
    return f"/public/v1/agents/{agent_id}"


def listed(persona, agent_id):
    return next(item for item in persona.client.get("/public/v1/agents").json() if item["id"] == agent_id)


# --- GET ----------------------------------------------------------------------------------------


def test_get_answers_the_agent_exactly_as_the_list_does(owner):
    create(owner, name="Other")
    agent_id = create(owner, voiceName="rex", serverUrl="https://hooks.example.com/a", serverHeaders={"X-A": "1"})
    response = owner.client.get(url(agent_id))
    assert response.status_code == 200
    assert response.json() == listed(owner, agent_id)


def test_get_is_404_for_another_organizations_or_an_unknown_agent_and_400_for_a_bad_id(owner, outsider):
    agent_id = create(owner)
    assert outsider.client.get(url(agent_id)).status_code == 404
    assert owner.client.get(url(uuid.uuid4())).json() == {"error": "Agent not found"}
    response = owner.client.get(url("not-a-uuid"))
    assert response.status_code == 400
    assert "agent" in response.json()["issues"]


def test_get_needs_an_api_key(anonymous, owner):
    assert anonymous.get(url(create(owner))).status_code == 401


# --- PUT and PATCH answers ----------------------------------------------------------------------


def test_put_and_patch_answer_the_id_and_the_new_updated_at_as_the_list_shows_it(owner):
    agent_id = create(owner)
    response = owner.client.put(url(agent_id), {**BASE, "name": "Sales"}, format="json")
    assert response.status_code == 200
    assert response.json() == {"id": agent_id, "updatedAt": listed(owner, agent_id)["updatedAt"]}
    response = owner.client.patch(
        url(agent_id), {"expectedUpdatedAt": response.json()["updatedAt"], "name": "Renamed"}, format="json"
    )
    assert response.status_code == 200
    assert response.json() == {"id": agent_id, "updatedAt": listed(owner, agent_id)["updatedAt"]}


def test_patches_can_be_chained_on_the_updated_at_each_one_answers(owner):
    agent_id = create(owner)
    stamp = listed(owner, agent_id)["updatedAt"]
    for n in range(3):
        response = owner.client.patch(url(agent_id), {"expectedUpdatedAt": stamp, "name": f"N{n}"}, format="json")
        assert response.status_code == 200, response.json()
        assert response.json()["updatedAt"] != stamp
        stamp = response.json()["updatedAt"]
    assert owner.client.get(url(agent_id)).json()["name"] == "N2"


# --- DELETE -------------------------------------------------------------------------------------


@pytest.fixture
def furnished_agent(owner):
    """An agent with a tool, an MCP selection, a document with chunks, a number, a call and logs."""
    agent_id = create(owner, serverUrl="https://hooks.example.com/a")
    agent = Agent.objects.get(pk=agent_id)
    AgentToolFactory(agent=agent, name="lookup_order")
    server = McpServerFactory(organization=owner.organization)
    McpToolSelection.objects.create(agent=agent, server=server, tool_name="cancel_order")
    document = KnowledgeDocumentFactory(agent=agent)
    KnowledgeChunk.objects.create(
        document=document, agent=agent, position=0, text="Returns in 30 days.", token_count=4, embedding=b"\0" * 1536
    )
    AgentKnowledgeIndex.objects.create(agent=agent)
    number = phone_number_claim(organization=owner.organization, number="+14155550100")
    phone_number_assign(
        organization=owner.organization, agent=agent, phone_number_id=number.pk, handoff_phone_number="+14155552671"
    )
    call = calls.call_start(agent=agent, channel="phone", from_number="+14155552671", to_number="+14155550100")
    calls.call_finish(call=call, status="completed")
    AgentLog.objects.create(
        organization=owner.organization,
        agent=agent,
        session_id="abc123",
        timestamp=call.started_at,
        severity="info",
        content={"message": "hello"},
        sequence=1,
    )
    return agent, number, call, server


def test_delete_removes_the_agent_and_what_belongs_to_it(owner, furnished_agent):
    agent, _, _, server = furnished_agent
    response = owner.client.delete(url(agent.pk))
    assert response.status_code == 200
    assert response.json() == {"id": str(agent.pk)}
    assert owner.client.get(url(agent.pk)).status_code == 404
    assert owner.client.get("/public/v1/agents").json() == []
    assert not Agent.objects.filter(pk=agent.pk).exists()
    assert not AgentTool.objects.exists()
    assert not McpToolSelection.objects.exists()
    assert not KnowledgeDocument.objects.exists() and not KnowledgeChunk.objects.exists()
    assert not AgentKnowledgeIndex.objects.exists()
    assert not AgentLog.objects.exists()
    # The organization's tool server is not the agent's: it stays.
    assert McpServer.objects.filter(pk=server.pk).exists()


def test_a_deleted_agents_numbers_stay_claimed_and_unassigned(owner, furnished_agent):
    agent, number, _, _ = furnished_agent
    assert owner.client.delete(url(agent.pk)).status_code == 200
    number.refresh_from_db()
    assert (number.status, number.assigned_agent_id) == ("claimed", None)
    assert (number.handoff_phone_number, number.assigned_at) == (None, None)
    listed_number = owner.client.get("/public/v1/phone-numbers").json()[0]
    assert listed_number["assignedAgentId"] is None and listed_number["status"] == "claimed"
    # Free to assign to another agent.
    other = create(owner)
    response = owner.client.post(f"{url(other)}/phone-numbers", {"phoneNumberId": str(number.pk)}, format="json")
    assert response.status_code == 201


def test_a_deleted_agents_calls_stay_in_the_history_without_an_agent(owner, furnished_agent):
    agent, _, call, _ = furnished_agent
    assert owner.client.delete(url(agent.pk)).status_code == 200
    detail = owner.client.get(f"/public/v1/calls/{call.pk}").json()
    assert detail["agentId"] is None
    assert detail["agentName"] == "Support"
    assert [item["id"] for item in owner.client.get("/public/v1/calls").json()] == [str(call.pk)]


def test_delete_is_404_for_another_organizations_or_an_unknown_agent(owner, outsider, furnished_agent):
    agent, number, _, _ = furnished_agent
    response = outsider.client.delete(url(agent.pk))
    assert response.status_code == 404
    assert response.json() == {"error": "Agent not found"}
    assert owner.client.delete(url(uuid.uuid4())).status_code == 404
    assert owner.client.delete(url("not-a-uuid")).status_code == 400
    assert Agent.objects.filter(pk=agent.pk).exists()
    assert PhoneNumber.objects.get(pk=number.pk).assigned_agent_id == agent.pk
    assert AgentTool.objects.filter(agent=agent).exists()


def test_a_second_delete_is_404(owner):
    agent_id = create(owner)
    assert owner.client.delete(url(agent_id)).status_code == 200
    assert owner.client.delete(url(agent_id)).status_code == 404


def test_deleting_an_active_agent_frees_its_place_in_the_plan_allowance(make_persona):
    persona = make_persona("Capped", "trial")
    first, second = create(persona), create(persona)
    stamp = listed(persona, first)["updatedAt"]
    response = persona.client.patch(url(first), {"expectedUpdatedAt": stamp, "status": "active"}, format="json")
    assert response.status_code == 200
    stamp = listed(persona, second)["updatedAt"]
    body = {"expectedUpdatedAt": stamp, "status": "active"}
    assert persona.client.patch(url(second), body, format="json").status_code == 409
    assert persona.client.delete(url(first)).status_code == 200
    assert persona.client.patch(url(second), body, format="json").status_code == 200
