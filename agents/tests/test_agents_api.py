import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.services import organization_set_plan
from agents.models import Agent
from agents.services import ambient_sound_playable

BASE = {"name": "Support", "instructions": "Help callers with their orders."}


def create(persona, **fields):
    response = persona.client.post("/public/v1/agents", {**BASE, **fields}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()["id"]


def listed(persona, agent_id):
    items = {item["id"]: item for item in persona.client.get("/public/v1/agents").json()}
    return items[agent_id]


def patch(persona, agent_id, **fields):
    expected = listed(persona, agent_id)["updatedAt"]
    return persona.client.patch(
        f"/public/v1/agents/{agent_id}", {"expectedUpdatedAt": expected, **fields}, format="json"
    )


def put(persona, agent_id, **fields):
    return persona.client.put(f"/public/v1/agents/{agent_id}", fields, format="json")


# --- create and list -------------------------------------------------------------------------


def test_create_applies_the_documented_defaults_and_lists_every_field(owner):
    agent_id = create(owner)
    item = listed(owner, agent_id)
    assert item == {
        "id": agent_id,
        "name": "Support",
        "status": "draft",
        "agentType": "webhook",
        "language": "en-US",
        "voiceName": "eve",
        "serverUrl": None,
        "serverHeaders": {},
        "serverSecret": None,
        "handoffPhoneNumber": None,
        "phoneNumber": None,
        "toolCount": 0,
        "knowledgeDocumentCount": 0,
        "callsToday": 0,
        "successRate": item["successRate"],
        "updatedAt": item["updatedAt"],
        "aiIdentityDisclosureTemplateId": "standard",
        "backgroundSound": "none",
        "ambientSound": "none",
        "ambientSoundVolume": 0.25,
        "ambientSoundDucking": True,
        "promptType": "static",
        "identity": "",
        "instructions": "Help callers with their orders.",
        "greetingType": "none",
        "staticGreeting": None,
        "createdAt": item["createdAt"],
        "redactPii": "off",
        "analysisPlan": {
            "summary": {"enabled": True, "prompt": None},
            "structuredData": {"enabled": False, "schema": None, "prompt": None},
            "successEvaluation": {"enabled": False, "rubric": None, "scale": "pass-fail"},
        },
        "endCallEnabled": True,
        "maxDurationSeconds": 1800,
        "recordingEnabled": False,
        "timeZone": "UTC",
        "keypad": {"enabled": True, "timeoutMs": 2000, "terminator": "#"},
        "voicemail": {"detection": "off", "action": "hang-up", "message": ""},
        "interruption": {"mode": "adaptive", "minWords": 1, "backchannels": None, "resumeAfterMs": 400},
        "transfer": {"mode": "cold", "briefing": "summary", "message": "", "ringTimeoutSeconds": 30},
        "handoffs": [],
        "flow": None,
    }
    assert isinstance(item["successRate"], (int, float))


def test_a_new_agent_is_always_a_draft(owner):
    agent_id = create(owner, status="active")
    assert listed(owner, agent_id)["status"] == "draft"


def test_create_stores_every_supplied_field(owner):
    agent_id = create(
        owner,
        agentType="webhook",
        language="es-US",
        aiIdentityDisclosureTemplateId="named_agent",
        voiceName="rex",
        serverUrl="https://hooks.example.com/agent",
        serverHeaders={"X-Tenant": "acme"},
        serverSecret="s3cret",
        handoffPhoneNumber="+14155550123",
        backgroundSound="keyboard",
        ambientSound="office1",
        ambientSoundVolume=0.5,
        ambientSoundDucking=False,
        identity="You are Rex from Acme.",
        greetingType="static",
        staticGreeting="Hello!",
    )
    item = listed(owner, agent_id)
    assert item["language"] == "es-US"
    assert item["voiceName"] == "rex"
    assert item["serverUrl"] == "https://hooks.example.com/agent"
    assert item["serverHeaders"] == {"X-Tenant": "acme"}
    assert item["serverSecret"] == "s3cret"
    assert item["handoffPhoneNumber"] == "+14155550123"
    assert (item["backgroundSound"], item["ambientSound"]) == ("keyboard", "office1")
    assert (item["ambientSoundVolume"], item["ambientSoundDucking"]) == (0.5, False)
    assert (item["greetingType"], item["staticGreeting"]) == ("static", "Hello!")


def test_server_secret_is_encrypted_at_rest(owner):
    agent_id = create(owner, serverUrl="https://hooks.example.com/a", serverSecret="very-secret-value")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT server_secret FROM agents_agent WHERE id = %s",
            [uuid.UUID(agent_id).hex if connection.vendor == "sqlite" else agent_id],
        )
        stored = cursor.fetchone()[0]
    assert stored and "very-secret-value" not in stored


def test_legacy_office_ambient_is_stored_as_office2(owner):
    agent_id = create(owner, ambientSound="office")
    assert listed(owner, agent_id)["ambientSound"] == "office2"


# --- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "issue"),
    [
        ({"name": 123}, "name"),
        ({"name": ""}, "name"),
        ({"agentType": "robot"}, "agentType"),
        ({"voiceName": "zed"}, "voiceName"),
        ({"language": "english"}, "language"),
        ({"aiIdentityDisclosureTemplateId": "custom"}, "aiIdentityDisclosureTemplateId"),
        ({"ambientSoundVolume": 1.5}, "ambientSoundVolume"),
        ({"ambientSoundVolume": -0.1}, "ambientSoundVolume"),
        ({"ambientSoundVolume": "0.3"}, "ambientSoundVolume"),
        ({"ambientSoundDucking": "yes"}, "ambientSoundDucking"),
        ({"ambientSound": "rain"}, "ambientSound"),
        ({"backgroundSound": "music"}, "backgroundSound"),
        ({"serverUrl": "ftp://example.com/x"}, "serverUrl"),
        ({"serverUrl": "https://user:pw@example.com/x"}, "serverUrl"),
        ({"serverHeaders": {"X-A": 1}}, "serverHeaders"),
        ({"serverHeaders": ["x"]}, "serverHeaders"),
        ({"serverHeaders": {"Bad Header": "x"}}, "serverHeaders"),
        ({"handoffPhoneNumber": "555-1234"}, "handoffPhoneNumber"),
        ({"handoffPhoneNumber": "+1415555012"}, "handoffPhoneNumber"),
        ({"phoneNumberIds": ["nope"]}, "phoneNumberIds.0"),
        (
            {"phoneNumberAssignments": [{"handoffPhoneNumber": "+14155550123"}]},
            "phoneNumberAssignments.0.phoneNumberId",
        ),
        ({"promptType": "dynamic"}, "serverUrl"),
        ({"promptType": "dynamic", "agentType": "http"}, "promptType"),
        ({"greetingType": "dynamic"}, "greetingType"),
        ({"greetingType": "static"}, "staticGreeting"),
        ({"instructions": "  "}, "instructions"),
        ({"agentType": "static", "serverUrl": "https://hooks.example.com/x"}, "serverUrl"),
        ({"status": "paused"}, "status"),
    ],
)
def test_invalid_agents_are_400_with_the_field_named(owner, fields, issue):
    response = owner.client.post("/public/v1/agents", {**BASE, **fields}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["error"]
    assert issue in body["issues"], body
    assert not Agent.objects.exists()


def test_name_is_required(owner):
    response = owner.client.post("/public/v1/agents", {"instructions": "x"}, format="json")
    assert response.status_code == 400
    assert "name" in response.json()["issues"]


def test_dynamic_prompt_on_a_webhook_agent_with_server_url_is_valid(owner):
    agent_id = create(
        owner, instructions="", promptType="dynamic", greetingType="dynamic", serverUrl="https://hooks.example.com/a"
    )
    assert listed(owner, agent_id)["promptType"] == "dynamic"


@pytest.mark.parametrize("body", ["{not json", "[]", '"text"', "null", "42"])
def test_malformed_or_non_object_bodies_are_400(owner, body):
    response = owner.client.post("/public/v1/agents", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]


JSON_ONLY_WRITES = [
    ("post", "/public/v1/agents"),
    ("put", "/public/v1/agents/{agent}"),
    ("patch", "/public/v1/agents/{agent}"),
    ("post", "/public/v1/agents/{agent}/tools"),
    ("put", "/public/v1/agents/{agent}/mcp-tools"),
    ("post", "/public/v1/agents/{agent}/phone-numbers"),
]


@pytest.mark.parametrize(("method", "path"), JSON_ONLY_WRITES)
@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/x-www-form-urlencoded", "name=Support&instructions=Help"),
        (
            "multipart/form-data; boundary=xyz",
            '--xyz\r\nContent-Disposition: form-data; name="name"\r\n\r\nS\r\n--xyz--\r\n',
        ),
        ("text/plain", '{"name": "Support"}'),
    ],
)
def test_json_endpoints_refuse_other_bodies_with_415(owner, method, path, content_type, body):
    agent_id = create(owner)
    response = getattr(owner.client, method)(path.format(agent=agent_id), body, content_type=content_type)
    assert response.status_code == 415
    assert set(response.json()) == {"error"}
    assert "application/json" in response.json()["error"]
    assert Agent.objects.count() == 1


def test_a_form_with_more_fields_than_django_reads_is_415_not_500(owner):
    body = "&".join(f"phoneNumberIds={n}" for n in range(2000))
    for method in ("post", "put", "patch"):
        path = "/public/v1/agents" if method == "post" else f"/public/v1/agents/{uuid.uuid4()}"
        response = getattr(owner.client, method)(path, body, content_type="application/x-www-form-urlencoded")
        assert response.status_code == 415, method


def test_a_body_larger_than_the_limit_is_413_before_it_is_read(owner, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = owner.client.post("/public/v1/agents", {**BASE, "identity": "x" * 2000}, format="json")
    assert response.status_code == 413
    assert response.json() == {"error": "The request body is too large.", "maxBytes": 1000}
    assert not Agent.objects.exists()


def test_json_nested_deeper_than_the_parser_goes_is_400(owner):
    response = owner.client.post("/public/v1/agents", "[" * 100_000, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"].startswith("Malformed request body")


def test_a_body_that_is_not_utf8_is_400(owner):
    response = owner.client.post("/public/v1/agents", b'{"name": "\xff"}', content_type="application/json")
    assert response.status_code == 400


def test_undocumented_methods_are_405_json(owner):
    response = owner.client.post(f"/public/v1/agents/{create(owner)}", BASE, format="json")
    assert response.status_code == 405
    assert response.json()["error"]
    assert "DELETE" in response["Allow"]


def test_non_uuid_agent_id_is_400_and_unknown_is_404(owner):
    assert put(owner, "not-a-uuid", **BASE).status_code == 400
    assert owner.client.patch("/public/v1/agents/123", {}, format="json").status_code == 400
    response = put(owner, str(uuid.uuid4()), **BASE)
    assert response.status_code == 404
    assert response.json() == {"error": "Agent not found"}


def test_another_organizations_agent_is_not_found(owner, outsider):
    agent_id = create(owner)
    assert put(outsider, agent_id, **BASE).status_code == 404
    response = outsider.client.patch(
        f"/public/v1/agents/{agent_id}", {"expectedUpdatedAt": listed(owner, agent_id)["updatedAt"]}, format="json"
    )
    assert response.status_code == 404
    assert outsider.client.get("/public/v1/agents").json() == []
    assert Agent.objects.get(pk=agent_id).name == "Support"


# --- PUT ---------------------------------------------------------------------------------------


def test_put_replaces_the_agent_and_resets_omitted_fields(owner):
    agent_id = create(owner, voiceName="rex", backgroundSound="keyboard", identity="I am Rex")
    assert put(owner, agent_id, name="Sales", instructions="Sell things").status_code == 200
    item = listed(owner, agent_id)
    assert (item["name"], item["instructions"]) == ("Sales", "Sell things")
    assert (item["voiceName"], item["backgroundSound"], item["identity"]) == ("eve", "none", "")


def test_put_validates_like_create(owner):
    agent_id = create(owner)
    response = put(owner, agent_id, name="X", greetingType="static")
    assert response.status_code == 400
    assert "staticGreeting" in response.json()["issues"]
    assert listed(owner, agent_id)["name"] == "Support"


def test_put_moves_status_between_draft_active_and_inactive(owner):
    agent_id = create(owner)
    for status in ("active", "inactive", "active", "draft"):
        assert put(owner, agent_id, **BASE, status=status).status_code == 200
        assert listed(owner, agent_id)["status"] == status


# --- PATCH -------------------------------------------------------------------------------------


def test_patch_keeps_every_field_not_supplied(owner):
    agent_id = create(
        owner,
        voiceName="leo",
        serverUrl="https://hooks.example.com/a",
        serverHeaders={"X-A": "1"},
        serverSecret="abc",
        greetingType="static",
        staticGreeting="Hi there",
        backgroundSound="keyboard",
        ambientSound="office1",
    )
    before = listed(owner, agent_id)
    response = patch(owner, agent_id, name="Renamed")
    assert response.status_code == 200
    after = listed(owner, agent_id)
    assert after["name"] == "Renamed"
    for field in before:
        if field not in ("name", "updatedAt"):
            assert after[field] == before[field], field
    assert after["updatedAt"] != before["updatedAt"]


def test_patch_requires_expected_updated_at(owner):
    agent_id = create(owner)
    response = owner.client.patch(f"/public/v1/agents/{agent_id}", {"name": "X"}, format="json")
    assert response.status_code == 400
    assert "expectedUpdatedAt" in response.json()["issues"]
    for bad in ("yesterday", 12345):
        response = owner.client.patch(
            f"/public/v1/agents/{agent_id}", {"name": "X", "expectedUpdatedAt": bad}, format="json"
        )
        assert response.status_code == 400


def test_patch_with_a_stale_updated_at_is_409_and_changes_nothing(owner):
    agent_id = create(owner)
    stale = listed(owner, agent_id)["updatedAt"]
    assert patch(owner, agent_id, name="First").status_code == 200
    response = owner.client.patch(
        f"/public/v1/agents/{agent_id}", {"expectedUpdatedAt": stale, "name": "Second"}, format="json"
    )
    assert response.status_code == 409
    assert response.json()["updatedAt"] == listed(owner, agent_id)["updatedAt"]
    assert listed(owner, agent_id)["name"] == "First"


def test_updated_at_from_the_list_round_trips_exactly(owner):
    agent_id = create(owner)
    for n in range(5):
        assert patch(owner, agent_id, name=f"N{n}").status_code == 200


def test_patch_validates_the_merged_result(owner):
    agent_id = create(owner)
    response = patch(owner, agent_id, promptType="dynamic")
    assert response.status_code == 400
    assert "serverUrl" in response.json()["issues"]
    assert patch(owner, agent_id, serverUrl="https://hooks.example.com/a").status_code == 200
    assert patch(owner, agent_id, promptType="dynamic").status_code == 200
    response = patch(owner, agent_id, serverUrl=None)
    assert response.status_code == 400
    assert listed(owner, agent_id)["serverUrl"] == "https://hooks.example.com/a"


def test_server_secret_can_be_sent_alone(owner):
    agent_id = create(owner, serverUrl="https://hooks.example.com/a")
    assert patch(owner, agent_id, serverSecret="rotated").status_code == 200
    assert listed(owner, agent_id)["serverSecret"] == "rotated"
    assert patch(owner, agent_id, serverSecret=None).status_code == 200
    assert listed(owner, agent_id)["serverSecret"] is None


# --- serverUrl destinations -------------------------------------------------------------------


def test_a_server_url_every_call_would_refuse_is_a_400_with_the_reason_and_nothing_is_saved(owner, refused_url):
    response = owner.client.post("/public/v1/agents", {**BASE, "serverUrl": refused_url.url}, format="json")
    reason = refused_url.reason_in(response, "serverUrl")
    assert not Agent.objects.exists()

    agent_id = create(owner, serverUrl="https://hooks.example.com/a")
    before = listed(owner, agent_id)
    url = refused_url.url
    for response in (put(owner, agent_id, **BASE, serverUrl=url), patch(owner, agent_id, serverUrl=url)):
        assert refused_url.reason_in(response, "serverUrl") == reason
    assert listed(owner, agent_id) == before


def test_loopback_server_urls_are_saved_when_the_operator_allows_loopback(owner, settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8", "::1/128"]  # what `make run` sets
    agent_id = create(owner, serverUrl="http://127.0.0.1:9/hook")
    assert put(owner, agent_id, **BASE, serverUrl="http://localhost:9/hook").status_code == 200
    assert patch(owner, agent_id, serverUrl="http://[::1]:9/hook").status_code == 200
    assert listed(owner, agent_id)["serverUrl"] == "http://[::1]:9/hook"
    # Only loopback: the cloud metadata address stays refused.
    response = patch(owner, agent_id, serverUrl="http://169.254.169.254/")
    assert response.status_code == 400 and "link-local" in response.json()["issues"]["serverUrl"][0]


def test_a_server_url_whose_host_does_not_resolve_yet_is_saved(owner):
    # DNS failures are refused call by call (the name may resolve later), never when saving.
    agent_id = create(owner, serverUrl="https://no-such-host.invalid/hook")
    assert listed(owner, agent_id)["serverUrl"] == "https://no-such-host.invalid/hook"


# --- activation allowance ----------------------------------------------------------------------


@pytest.mark.parametrize(("plan", "cap"), [("trial", 1), ("launch", 2), ("studio", 10)])
def test_activation_is_capped_by_the_plan(make_persona, plan, cap):
    persona = make_persona("Capped", plan)
    ids = [create(persona, name=f"A{i}") for i in range(cap + 1)]
    for agent_id in ids[:cap]:
        assert put(persona, agent_id, **BASE, status="active").status_code == 200
    response = put(persona, ids[cap], **{**BASE, "name": "Changed"}, status="active")
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "AGENT_LIMIT_EXCEEDED"
    assert body["maxAgents"] == cap
    assert body["error"]
    item = listed(persona, ids[cap])
    assert (item["status"], item["name"]) == ("draft", f"A{cap}")
    response = patch(persona, ids[cap], status="active")
    assert response.status_code == 409 and response.json()["maxAgents"] == cap


def test_agency_plan_is_unlimited(make_persona):
    persona = make_persona("Big", "agency")
    for i in range(12):
        agent_id = create(persona, name=f"A{i}")
        assert patch(persona, agent_id, status="active").status_code == 200


def test_drafts_and_inactive_agents_use_no_allowance_and_deactivation_frees_it(make_persona):
    persona = make_persona("Small", "trial")
    first, second = create(persona), create(persona)
    assert patch(persona, first, status="active").status_code == 200
    assert patch(persona, second, name="edited while draft").status_code == 200
    assert patch(persona, second, status="active").status_code == 409
    assert patch(persona, first, status="inactive").status_code == 200
    assert patch(persona, second, status="active").status_code == 200


def test_an_active_agent_can_be_edited_after_a_downgrade(make_persona):
    persona = make_persona("Shrink", "studio")
    ids = [create(persona, name=f"A{i}") for i in range(3)]
    for agent_id in ids:
        assert patch(persona, agent_id, status="active").status_code == 200
    organization_set_plan(organization=persona.organization, plan_code="launch")
    assert patch(persona, ids[0], name="still fine").status_code == 200
    assert put(persona, ids[1], **BASE, status="active").status_code == 200


# --- ambient sound and plans -------------------------------------------------------------------


@pytest.mark.parametrize("plan", ["trial", "launch"])
def test_new_ambient_sound_without_the_feature_is_403(make_persona, plan):
    persona = make_persona("Basic", plan)
    response = persona.client.post("/public/v1/agents", {**BASE, "ambientSound": "office1"}, format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "FEATURE_NOT_AVAILABLE"
    agent_id = create(persona, ambientSound="none", backgroundSound="keyboard")
    response = patch(persona, agent_id, ambientSound="office2")
    assert response.status_code == 403
    assert response.json()["code"] == "FEATURE_NOT_AVAILABLE"
    assert listed(persona, agent_id)["ambientSound"] == "none"


def test_after_a_downgrade_the_selection_stays_is_not_played_and_upgrade_restores(owner):
    agent_id = create(owner, ambientSound="office1", ambientSoundVolume=0.4)
    organization_set_plan(organization=owner.organization, plan_code="launch")
    assert patch(owner, agent_id, name="Unrelated edit").status_code == 200
    assert put(owner, agent_id, **BASE, ambientSound="office1", ambientSoundVolume=0.4).status_code == 200
    assert listed(owner, agent_id)["ambientSound"] == "office1"
    agent = Agent.objects.select_related("organization__plan").get(pk=agent_id)
    assert not ambient_sound_playable(agent)
    assert patch(owner, agent_id, ambientSound="office2").status_code == 403
    assert patch(owner, agent_id, ambientSound="none").status_code == 200
    organization_set_plan(organization=owner.organization, plan_code="agency")
    assert patch(owner, agent_id, ambientSound="office1").status_code == 200
    agent = Agent.objects.select_related("organization__plan").get(pk=agent_id)
    assert ambient_sound_playable(agent)


def test_background_and_ambient_sounds_are_independent(owner):
    agent_id = create(owner, ambientSound="office2", backgroundSound="keyboard")
    item = listed(owner, agent_id)
    assert (item["ambientSound"], item["backgroundSound"]) == ("office2", "keyboard")


# --- list performance shape --------------------------------------------------------------------


def test_list_uses_a_constant_number_of_queries(owner, make_agent):
    for i in range(3):
        make_agent(owner.organization, name=f"A{i}")
    owner.client.get("/public/v1/agents")  # the first use of a key also records last_used_at
    with CaptureQueriesContext(connection) as few:
        assert len(owner.client.get("/public/v1/agents").json()) == 3
    for i in range(30):
        make_agent(owner.organization, name=f"B{i}")
    with CaptureQueriesContext(connection) as many:
        assert len(owner.client.get("/public/v1/agents").json()) == 33
    assert len(many) == len(few) <= 5
