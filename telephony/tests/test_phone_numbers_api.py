import json
import uuid
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from telephony.models import PhoneNumber
from telephony.services.numbers import phone_number_claim

BASE = {"name": "Support", "instructions": "Help callers."}


@pytest.fixture
def numbers(owner):
    return [
        phone_number_claim(organization=owner.organization, number=f"+1415555{n:04d}", friendly_name=f"Line {n}")
        for n in range(100, 103)
    ]


@pytest.fixture
def agent(owner):
    return owner.client.post("/public/v1/agents", {**BASE, "name": "Front desk"}, format="json").json()["id"]


@pytest.fixture
def other_agent(owner):
    return owner.client.post("/public/v1/agents", {**BASE, "name": "Back office"}, format="json").json()["id"]


def assign(persona, agent_id, number_id, **extra):
    return persona.client.post(
        f"/public/v1/agents/{agent_id}/phone-numbers", {"phoneNumberId": str(number_id), **extra}, format="json"
    )


def agent_numbers(persona, agent_id):
    response = persona.client.get(f"/public/v1/agents/{agent_id}/phone-numbers")
    assert response.status_code == 200
    return response.json()


def listed_agent(persona, agent_id):
    return next(a for a in persona.client.get("/public/v1/agents").json() if a["id"] == agent_id)


def test_list_phone_numbers_shows_every_field(owner, numbers, agent):
    assert assign(owner, agent, numbers[0].id).status_code == 201
    items = owner.client.get("/public/v1/phone-numbers").json()
    assert len(items) == 3
    first = items[0]
    assert first == {
        "id": str(numbers[0].id),
        "phoneNumber": "+14155550100",
        "friendlyName": "Line 100",
        "status": "claimed",
        "source": "purchased",
        "provider": "twilio",
        "setupStatus": "ready",
        "assignedAgentId": agent,
        "assignedAgentName": "Front desk",
        "countryCode": "US",
    }
    assert items[1]["assignedAgentId"] is None and items[1]["assignedAgentName"] is None


def test_assign_is_201_and_lists_on_the_agent_with_its_handoff(owner, numbers, agent):
    response = assign(owner, agent, numbers[0].id, handoffPhoneNumber="+14155550999")
    assert response.status_code == 201
    assert response.json() == {"phoneNumberId": str(numbers[0].id)}
    assert agent_numbers(owner, agent) == [
        {
            "phoneNumberId": str(numbers[0].id),
            "phoneNumber": "+14155550100",
            "friendlyName": "Line 100",
            "handoffPhoneNumber": "+14155550999",
        }
    ]
    assert listed_agent(owner, agent)["phoneNumber"] == "+14155550100"


def test_assigning_a_number_of_another_agent_moves_it(owner, numbers, agent, other_agent):
    assign(owner, agent, numbers[0].id)
    assert assign(owner, other_agent, numbers[0].id).status_code == 201
    assert agent_numbers(owner, agent) == []
    assert [n["phoneNumberId"] for n in agent_numbers(owner, other_agent)] == [str(numbers[0].id)]


def test_assign_errors(owner, outsider, numbers, agent):
    response = assign(owner, agent, uuid.uuid4())
    assert response.status_code == 404 and response.json()["code"] == "PHONE_NUMBER_NOT_FOUND"
    foreign = phone_number_claim(organization=outsider.organization, number="+14155550200")
    response = assign(owner, agent, foreign.id)
    assert response.status_code == 404 and response.json()["code"] == "PHONE_NUMBER_NOT_FOUND"
    for status in ("available", "released", "suspended"):
        PhoneNumber.objects.filter(pk=numbers[1].pk).update(status=status)
        response = assign(owner, agent, numbers[1].id)
        assert response.status_code == 409 and response.json()["code"] == "PHONE_NUMBER_NOT_CLAIMED"
    assert assign(owner, agent, "not-a-uuid").status_code == 400
    assert assign(owner, agent, numbers[0].id, handoffPhoneNumber="12345").status_code == 400
    assert owner.client.post(f"/public/v1/agents/{agent}/phone-numbers", {}, format="json").status_code == 400
    assert assign(owner, str(uuid.uuid4()), numbers[0].id).status_code == 404
    assert assign(owner, "bad", numbers[0].id).status_code == 400
    assert agent_numbers(owner, agent) == []


def test_an_agent_holds_at_most_25_numbers(owner, agent):
    many = [phone_number_claim(organization=owner.organization, number=f"+1415555{n:04d}") for n in range(300, 326)]
    for number in many[:25]:
        assert assign(owner, agent, number.id).status_code == 201
    response = assign(owner, agent, many[25].id)
    assert response.status_code == 409
    assert response.json()["code"] == "PHONE_NUMBER_LIMIT_EXCEEDED"
    assert assign(owner, agent, many[0].id, handoffPhoneNumber="+14155550999").status_code == 201
    assert len(agent_numbers(owner, agent)) == 25


def test_unassign(owner, numbers, agent, other_agent):
    assign(owner, agent, numbers[0].id)
    response = owner.client.delete(f"/public/v1/agents/{agent}/phone-numbers/{numbers[0].id}")
    assert response.status_code == 200
    assert response.json() == {"phoneNumberId": str(numbers[0].id)}
    assert agent_numbers(owner, agent) == []
    numbers[0].refresh_from_db()
    assert numbers[0].status == "claimed" and numbers[0].assigned_agent is None
    response = owner.client.delete(f"/public/v1/agents/{agent}/phone-numbers/{numbers[0].id}")
    assert response.status_code == 404
    assign(owner, other_agent, numbers[1].id)
    assert owner.client.delete(f"/public/v1/agents/{agent}/phone-numbers/{numbers[1].id}").status_code == 404
    assert owner.client.delete(f"/public/v1/agents/{agent}/phone-numbers/xyz").status_code == 400
    assert len(agent_numbers(owner, other_agent)) == 1


def test_other_organizations_cannot_see_or_touch_numbers(owner, outsider, numbers, agent):
    assign(owner, agent, numbers[0].id)
    assert outsider.client.get("/public/v1/phone-numbers").json() == []
    assert outsider.client.get(f"/public/v1/agents/{agent}/phone-numbers").status_code == 404
    assert outsider.client.delete(f"/public/v1/agents/{agent}/phone-numbers/{numbers[0].id}").status_code == 404
    outsider_agent = outsider.client.post("/public/v1/agents", BASE, format="json").json()["id"]
    assert assign(outsider, outsider_agent, numbers[0].id).status_code == 404


# --- bulk replacement on PUT and PATCH ----------------------------------------------------------


def patch(persona, agent_id, **fields):
    expected = listed_agent(persona, agent_id)["updatedAt"]
    return persona.client.patch(
        f"/public/v1/agents/{agent_id}", {"expectedUpdatedAt": expected, **fields}, format="json"
    )


def test_patch_replaces_assignments_in_bulk(owner, numbers, agent, other_agent):
    assign(owner, agent, numbers[0].id)
    assign(owner, other_agent, numbers[2].id)
    response = patch(
        owner,
        agent,
        phoneNumberAssignments=[
            {"phoneNumberId": str(numbers[1].id), "handoffPhoneNumber": "+14155550999"},
            {"phoneNumberId": str(numbers[2].id)},
        ],
    )
    assert response.status_code == 200
    held = {n["phoneNumberId"]: n["handoffPhoneNumber"] for n in agent_numbers(owner, agent)}
    assert held == {str(numbers[1].id): "+14155550999", str(numbers[2].id): None}
    assert agent_numbers(owner, other_agent) == []
    assert patch(owner, agent, name="Renamed").status_code == 200
    assert len(agent_numbers(owner, agent)) == 2
    assert patch(owner, agent, phoneNumberAssignments=[]).status_code == 200
    assert agent_numbers(owner, agent) == []


def test_put_accepts_legacy_phone_number_ids_and_keeps_assignments_when_omitted(owner, numbers, agent):
    response = owner.client.put(
        f"/public/v1/agents/{agent}", {**BASE, "phoneNumberIds": [str(numbers[0].id)]}, format="json"
    )
    assert response.status_code == 200
    assert [n["phoneNumberId"] for n in agent_numbers(owner, agent)] == [str(numbers[0].id)]
    assert owner.client.put(f"/public/v1/agents/{agent}", BASE, format="json").status_code == 200
    assert len(agent_numbers(owner, agent)) == 1


@pytest.mark.parametrize(
    ("problem", "status", "code"),
    [
        ("missing", 404, "PHONE_NUMBER_NOT_FOUND"),
        ("unclaimed", 409, "PHONE_NUMBER_NOT_CLAIMED"),
        ("duplicate", 400, None),
        ("both_forms", 400, None),
    ],
)
def test_bulk_replacement_is_all_or_nothing(owner, numbers, agent, problem, status, code):
    assign(owner, agent, numbers[0].id)
    items = [{"phoneNumberId": str(numbers[1].id)}]
    extra = {}
    if problem == "missing":
        items.append({"phoneNumberId": str(uuid.uuid4())})
    elif problem == "unclaimed":
        PhoneNumber.objects.filter(pk=numbers[2].pk).update(status="suspended")
        items.append({"phoneNumberId": str(numbers[2].id)})
    elif problem == "duplicate":
        items.append({"phoneNumberId": str(numbers[1].id)})
    else:
        extra = {"phoneNumberIds": [str(numbers[2].id)]}
    response = patch(owner, agent, name="Should not stick", phoneNumberAssignments=items, **extra)
    assert response.status_code == status
    assert response.json().get("code") == code
    assert [n["phoneNumberId"] for n in agent_numbers(owner, agent)] == [str(numbers[0].id)]
    assert listed_agent(owner, agent)["name"] == "Front desk"


def test_bulk_replacement_over_the_limit_is_409(owner, agent):
    many = [phone_number_claim(organization=owner.organization, number=f"+1415555{n:04d}") for n in range(400, 426)]
    response = patch(owner, agent, phoneNumberIds=[str(n.id) for n in many])
    assert response.status_code == 409
    assert response.json()["code"] == "PHONE_NUMBER_LIMIT_EXCEEDED"
    assert agent_numbers(owner, agent) == []


def test_create_can_assign_numbers(owner, numbers):
    response = owner.client.post(
        "/public/v1/agents",
        {**BASE, "phoneNumberAssignments": [{"phoneNumberId": str(numbers[0].id)}]},
        format="json",
    )
    assert response.status_code == 200
    assert len(agent_numbers(owner, response.json()["id"])) == 1


def test_assignment_changes_move_updated_at(owner, numbers, agent):
    before = listed_agent(owner, agent)["updatedAt"]
    assign(owner, agent, numbers[0].id)
    assert listed_agent(owner, agent)["updatedAt"] != before


# --- claimnumber -------------------------------------------------------------------------------


def claim(*args):
    out = StringIO()
    call_command("claimnumber", *args, stdout=out)
    return json.loads(out.getvalue())


def test_claimnumber_prints_the_id_and_derives_the_country(owner):
    result = claim("--org", str(owner.organization.id), "--number", "+442071838750", "--friendly-name", "London")
    number = PhoneNumber.objects.get(pk=result["id"])
    assert (number.country_code, number.friendly_name, number.status) == ("GB", "London", "claimed")
    result = claim("--org", str(owner.organization.id), "--number", "+14155550150", "--status", "available")
    assert PhoneNumber.objects.get(pk=result["id"]).status == "available"


@pytest.mark.parametrize("number", ["4155550150", "+1415555", "+1 415 555 0150", "+99912345678"])
def test_claimnumber_rejects_non_e164_numbers(owner, number):
    with pytest.raises(CommandError):
        claim("--org", str(owner.organization.id), "--number", number)


def test_claimnumber_rejects_a_number_claimed_twice(owner, outsider):
    claim("--org", str(owner.organization.id), "--number", "+14155550160")
    with pytest.raises(CommandError):
        claim("--org", str(outsider.organization.id), "--number", "+14155550160")
