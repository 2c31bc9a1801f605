"""What the call record keeps of an agent's flow (issue 39): the engine's write
(`calls.services.call_flow_update`) seen through the public API (the call detail's `flow`, and so every call
event's body), the collected values redacted like the transcript, nothing written once the call has ended,
and the dashboard's call page showing the path to every reader and the collected values only to staff who
may read transcripts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User

from calls import services
from calls.models import Call, CallEvent

pytestmark = pytest.mark.django_db

BOOKING_PATH = ["greet", "ask_details", "book", "confirm"]
BOOKING = {"name": "Ann Lee", "party_size": 4, "time": "19:30", "vip": False}


@pytest.fixture
def host(owner: Any, make_agent: Any) -> Any:
    return make_agent(owner.organization, name="Host", status="active", agent_type="static", server_url=None)


def detail(owner: Any, call: Call) -> dict[str, Any]:
    response = owner.client.get(f"/public/v1/calls/{call.pk}")
    assert response.status_code == 200, response.json()
    return response.json()


def booked_call(agent: Any) -> Call:
    """A call as the flow runtime records it: the state after each node, the last one replacing the others."""
    call = services.call_start(agent=agent, channel="web")
    services.call_flow_update(call=call, path=["greet"], collected={})
    services.call_flow_update(call=call, path=["greet", "ask_details"], collected={"name": "Ann Lee"})
    services.call_flow_update(call=call, path=BOOKING_PATH, collected=BOOKING)
    return call


# --- the call detail -------------------------------------------------------------------------------------


def test_the_call_detail_shows_the_path_and_the_collected_values_as_last_stored(owner, host):
    call = booked_call(host)

    body = detail(owner, call)

    assert body["flow"] == {"path": BOOKING_PATH, "collected": BOOKING}
    assert call.flow == body["flow"]  # the engine's call object follows the stored state
    # The list of calls stays a summary.
    [item] = owner.client.get("/public/v1/calls").json()
    assert "flow" not in item


def test_a_call_without_a_flow_shows_null(owner, host):
    call = services.call_start(agent=host, channel="web")
    services.call_message_add(call=call, role="assistant", content="Hello.")
    assert detail(owner, call)["flow"] is None
    services.call_finish(call=call, status="completed")
    assert detail(owner, call)["flow"] is None


def test_a_node_entered_again_is_listed_again_and_the_last_500_entries_are_kept(owner, host):
    call = services.call_start(agent=host, channel="web")
    loop = ["start", *(["ask", "check"] * 300), "done"]

    services.call_flow_update(call=call, path=loop, collected={"attempts": 300})

    path = detail(owner, call)["flow"]["path"]
    assert len(path) == 500
    assert path == loop[-500:] and path[-1] == "done"


def test_the_call_events_carry_the_flow_as_it_was_when_recorded(owner, host):
    created = owner.client.post(
        "/public/v1/webhooks",
        {"url": "https://crm.example.com/calls", "events": ["call.started", "call.ended"]},
        format="json",
    )
    assert created.status_code == 201, created.json()
    call = booked_call(host)
    services.call_finish(call=call, status="completed")

    bodies = {
        event.event_type: json.loads(event.body)["message"]["call"] for event in CallEvent.objects.filter(call=call)
    }
    assert bodies["call.started"]["flow"] is None  # recorded before the flow began
    assert bodies["call.ended"]["flow"] == {"path": BOOKING_PATH, "collected": BOOKING}


# --- the write's rules -----------------------------------------------------------------------------------


def test_the_collected_values_are_redacted_by_the_agents_settings(owner, make_agent):
    careful = make_agent(
        owner.organization,
        name="Careful",
        status="active",
        agent_type="static",
        server_url=None,
        redact_pii=["phone_number", "email"],
    )
    call = services.call_start(agent=careful, channel="web")

    services.call_flow_update(
        call=call,
        path=["ask_contact"],
        collected={
            "name": "Ann Lee",
            "phone": "+1 415 555 0100",
            "email": "ann.lee@example.com",
            "note": "call me at four one five five five five zero one zero zero",
            "party_size": 4,
            "vip": True,
        },
    )

    assert detail(owner, call)["flow"]["collected"] == {
        "name": "Ann Lee",
        "phone": "[PHONE_NUMBER]",
        "email": "[EMAIL]",
        "note": "call me at [PHONE_NUMBER]",
        "party_size": 4,  # numbers and booleans that are no personal data stay as they are
        "vip": True,
    }
    stored = json.dumps(Call.objects.get(pk=call.pk).flow)
    assert "555" not in stored and "example.com" not in stored


def test_without_redaction_the_values_are_stored_as_collected_and_long_texts_are_cut(owner, host):
    call = services.call_start(agent=host, channel="web")

    services.call_flow_update(
        call=call, path=["ask"], collected={"phone": "+1 415 555 0100", "story": "x" * 1500, "nul": "a\x00b"}
    )

    collected = detail(owner, call)["flow"]["collected"]
    assert collected["phone"] == "+1 415 555 0100"
    assert collected["story"] == "x" * 1000
    assert collected["nul"] == "ab"  # what the database cannot hold is mended


def test_a_finished_call_keeps_the_flow_it_ended_with(owner, host):
    call = booked_call(host)
    services.call_finish(call=call, status="completed")

    services.call_flow_update(call=call, path=[*BOOKING_PATH, "late"], collected={"name": "Someone else"})

    assert detail(owner, call)["flow"] == {"path": BOOKING_PATH, "collected": BOOKING}
    assert call.flow == {"path": BOOKING_PATH, "collected": BOOKING}
    # A call that ended before its flow wrote anything stays without one.
    plain = services.call_start(agent=host, channel="web")
    services.call_finish(call=plain, status="completed")
    services.call_flow_update(call=plain, path=["greet"], collected={})
    assert detail(owner, plain)["flow"] is None


@pytest.mark.parametrize(
    ("path", "collected", "says"),
    [
        ("greet", {}, "path must be a list"),
        (["greet", ""], {}, "node id of 1 to 64"),
        (["x" * 65], {}, "node id of 1 to 64"),
        (["greet", 3], {}, "node id of 1 to 64"),
        (["greet"], [("name", "Ann")], "collected must be a dict"),
    ],
)
def test_arguments_that_are_no_flow_state_are_refused(owner, host, path, collected, says):
    call = services.call_start(agent=host, channel="web")
    with pytest.raises(ValueError, match=says):
        services.call_flow_update(call=call, path=path, collected=collected)
    assert Call.objects.get(pk=call.pk).flow is None


# --- the dashboard's call page ---------------------------------------------------------------------------


@pytest.fixture
def superuser_client(client: Any) -> Any:
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


@pytest.fixture
def viewer_client(client: Any) -> Any:
    """Staff who may see calls but not what was said in them."""
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_call"))
    client.force_login(user)
    return client


def page(client: Any, call: Call) -> str:
    response = client.get(f"/admin/calls/call/{call.pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


def section(shown: str) -> str:
    start = shown.index('<fieldset class="module flow">')
    return shown[start : shown.index("</fieldset>", start)]


def test_the_call_page_shows_the_path_and_the_collected_values(superuser_client, host):
    call = booked_call(host)
    services.call_flow_update(call=call, path=BOOKING_PATH, collected={**BOOKING, "note": "<b>window</b> seat"})
    services.call_finish(call=call, status="completed")

    flow = section(page(superuser_client, call))

    assert "Flow (4 steps)" in flow
    assert '<p class="path">greet → ask_details → book → confirm</p>' in flow
    assert '<tr><td>name</td><td class="value">Ann Lee</td></tr>' in flow
    assert '<tr><td>party_size</td><td class="value">4</td></tr>' in flow
    assert '<tr><td>vip</td><td class="value">false</td></tr>' in flow
    assert "&lt;b&gt;window&lt;/b&gt; seat" in flow and "<b>window" not in flow  # escaped


def test_without_the_transcript_permission_the_page_shows_the_path_but_not_the_values(viewer_client, host):
    call = booked_call(host)

    flow = section(page(viewer_client, call))

    assert "greet → ask_details → book → confirm" in flow
    assert "Ann Lee" not in flow and "19:30" not in flow
    assert 'only to staff with the "view call message" permission' in flow


def test_a_call_without_a_flow_has_no_flow_section(superuser_client, host):
    call = services.call_start(agent=host, channel="web")
    services.call_message_add(call=call, role="assistant", content="Hello.")

    shown = page(superuser_client, call)

    assert 'class="module flow"' not in shown and "Flow (" not in shown
