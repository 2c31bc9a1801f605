"""Failures that say why (issue 37): an outbound call the carrier could not be asked to place ends `failed`
with its cause in the call detail (`endedMessage`), on the call page and in its signed `call.ended`, and it
gets its `call.analyzed` (status `skipped`, with the reason) like every call; the 503 of a service that
cannot place calls names exactly the setting that is missing.

Through the public API (the Django test client on the URLs), the dispatcher's and the event sender's Celery
tasks (run here in the test's process), Twilio's REST API unreachable (a closed loopback port) and a signed
receiver on loopback (testing/webhooks.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents.models import AgentStatus
from calls.tasks import deliver_due_events
from telephony.services.numbers import phone_number_claim
from telephony.tasks import dispatch_outbound
from testing.servers import closed_port_url
from testing.twilio_webhooks import make_account, public_settings  # noqa: F401 - fixture
from testing.webhooks import LoopbackReceiver

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("public_settings")]

NUMBER = "+14155550177"
CALLEE = "+14155550178"


@pytest.fixture
def receiver(settings: Any) -> Any:
    with LoopbackReceiver() as hooks:
        settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
        yield hooks


@pytest.fixture
def nova(owner: Any, make_agent: Any, receiver: LoopbackReceiver) -> Any:
    make_account(owner.organization)
    agent = make_agent(owner.organization, name="Nova", status=AgentStatus.ACTIVE, server_url=receiver.url("/events"))
    agent.number = phone_number_claim(organization=owner.organization, number=NUMBER)
    return agent


def place(owner: Any, agent: Any) -> Any:
    return owner.client.post(
        "/public/v1/calls",
        {"agentId": str(agent.pk), "phoneNumberId": str(agent.number.pk), "to": CALLEE},
        format="json",
    )


def test_a_call_the_carrier_could_not_be_asked_for_says_why_and_is_analyzed_skipped(
    owner: Any, nova: Any, receiver: LoopbackReceiver, settings: Any, admin_client: Any
) -> None:
    settings.TWILIO_API_BASE_URL = closed_port_url()  # Twilio unreachable: a refused connection
    created = place(owner, nova)
    assert created.status_code == 201, created.json()
    assert dispatch_outbound() == 1

    call = owner.client.get(f"/public/v1/calls/{created.json()['id']}").json()
    assert (call["status"], call["endedReason"]) == ("failed", "provider-error")
    assert "Twilio" in call["endedMessage"] and "could not be placed" in call["endedMessage"], call["endedMessage"]
    assert call["analysis"]["status"] == "skipped" and "never answered" in call["analysis"]["error"]

    deliver_due_events()
    events = [json.loads(request.body)["message"] for request in receiver.requests]
    kinds = [event["type"] for event in events]
    assert kinds[-2:] == ["call.ended", "call.analyzed"], kinds
    ended, analyzed = events[-2:]
    assert ended["call"]["endedMessage"] == call["endedMessage"]
    assert analyzed["call"]["analysis"]["status"] == "skipped"

    page = admin_client.get(f"/admin/calls/call/{call['id']}/change/")
    text = page.content.decode()
    assert call["endedMessage"] in text
    assert "never answered" in text and "does not record calls" not in text


def test_a_canceled_call_has_its_reasons_sentence_and_a_skipped_analysis(owner: Any, nova: Any) -> None:
    call_id = place(owner, nova).json()["id"]
    assert owner.client.get(f"/public/v1/calls/{call_id}").json()["endedMessage"] is None  # queued: not ended
    assert owner.client.post(f"/public/v1/calls/{call_id}/hang-up").status_code in (200, 202)
    call = owner.client.get(f"/public/v1/calls/{call_id}").json()
    assert (call["status"], call["endedReason"]) == ("canceled", "canceled")
    assert call["endedMessage"] == "The call was canceled before it was answered."
    assert call["analysis"]["status"] == "skipped"


@pytest.mark.parametrize(
    ("public_base_url", "token_secret", "named", "unnamed"),
    [
        ("", "a-secret-long-enough-to-be-accepted-by-the-service", "PUBLIC_BASE_URL", "REALTIME_TOKEN_SECRET"),
        ("https://voice.example.com", "", "REALTIME_TOKEN_SECRET", "PUBLIC_BASE_URL"),
    ],
)
def test_the_503_names_only_the_missing_setting(
    owner: Any, nova: Any, settings: Any, public_base_url: str, token_secret: str, named: str, unnamed: str
) -> None:
    settings.PUBLIC_BASE_URL = public_base_url
    settings.REALTIME_TOKEN_SECRET = token_secret
    response = place(owner, nova)
    assert response.status_code == 503 and response.json()["code"] == "TELEPHONY_NOT_CONFIGURED"
    assert named in response.json()["error"] and unnamed not in response.json()["error"]
