"""Call events that cannot simply be POSTed where they were addressed (issue 34), through a real server
delivering to scripted receivers on loopback (testing/webhooks.py): a receiver that redirects, a URL the HTTP
client cannot encode (an old row, saved before saving checked it), and a transcript too long for one body."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from calls import services
from calls.models import CallEvent, WebhookEndpoint
from calls.tests.test_events_e2e import (  # the module's server, with quick retries, and its helpers
    deliveries,
    kinds,
    loopback,
    receivers,
    server,
    signed,
    static_agent,
    wait_for,
    webhook,
)
from testing.daphne import DaphneServer
from testing.webhooks import Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
__all__ = ["loopback", "receivers", "server", "static_agent"]  # fixtures


# --- redirects -------------------------------------------------------------------------------------


@pytest.mark.usefixtures("loopback")
@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_origin_is_a_failed_attempt_naming_its_location(
    server: DaphneServer, owner: Any, static_agent: Any, receivers: Any, status: int
) -> None:
    elsewhere = receivers()  # another origin (its own port), which would answer 200
    moved = elsewhere.url("/moved")
    hook = receivers()
    hook.default = Reply(status=status, headers={"Location": moved})
    org = webhook(owner, hook.url(), ["call.started"])
    services.call_start(agent=static_agent, channel="web")

    [delivery] = wait_for(lambda: [d for d in deliveries(owner) if d["attempts"] >= 2], what="a retried redirect")
    assert delivery["status"] == "pending"  # never "succeeded": retried like any failed attempt
    assert delivery["lastStatusCode"] == status
    assert delivery["lastError"] == (
        f"HTTP {status} redirect to {moved} not followed (events follow only 307/308 within the same origin)"
    )
    assert delivery["attemptLog"][0]["nextAttemptAt"] is not None
    assert elsewhere.requests == []  # neither a GET without the body nor the body without its signature
    assert all(r.method == "POST" and r.path == "/hook" and signed(r, org["secret"]) for r in hook.requests)


@pytest.mark.usefixtures("loopback")
@pytest.mark.parametrize("status", [307, 308])
def test_a_307_or_308_within_the_origin_delivers_the_same_signed_body(
    server: DaphneServer, owner: Any, static_agent: Any, receivers: Any, status: int
) -> None:
    hook = receivers()
    hook.reply(Reply(status=status, headers={"Location": hook.url("/moved")}))
    org = webhook(owner, hook.url(), ["call.started"])
    call = services.call_start(agent=static_agent, channel="web")

    [delivery] = wait_for(lambda: deliveries(owner, status="succeeded"), what="the delivery")
    assert delivery["attempts"] == 1 and delivery["lastStatusCode"] == 200
    first, second = hook.requests
    assert (first.method, first.path, second.method, second.path) == ("POST", "/hook", "POST", "/moved")
    event = CallEvent.objects.get(call=call)
    assert first.body == second.body == event.body.encode()
    assert signed(second, org["secret"]) and second.headers["x-service-event-id"] == str(event.id)


# --- a URL the HTTP client cannot encode -----------------------------------------------------------


@pytest.mark.usefixtures("loopback")
def test_an_old_unencodable_url_fails_finally_and_the_calls_next_event_is_delivered(
    server: DaphneServer, owner: Any, static_agent: Any, receivers: Any
) -> None:
    hook = receivers()
    created = webhook(owner, hook.url(), ["call.started", "call.ended"])
    # Saved before saving checked the encoding (the API refuses it now: test_unencodable_urls.py).
    WebhookEndpoint.objects.filter(pk=created["id"]).update(url="http://a\u200b.example/hook")
    call = services.call_start(agent=static_agent, channel="web")

    [failed] = wait_for(lambda: deliveries(owner, status="failed"), what="the final failure")
    assert failed["attempts"] == 1 and failed["nextAttemptAt"] is None
    assert failed["lastError"].startswith("Refused outbound URL: The HTTP client cannot encode this URL")
    assert "\n" not in failed["lastError"]

    fixed = owner.client.patch(f"/public/v1/webhooks/{created['id']}", {"url": hook.url()}, format="json")
    assert fixed.status_code == 200
    services.call_finish(call=call, status="completed")
    wait_for(lambda: hook.requests, what="the call's next event")
    assert kinds(hook.requests) == [("call.ended", "1")]
    # The receiver has the request a moment before the worker records the answer.
    wait_for(
        lambda: [d for d in deliveries(owner) if d["eventType"] == "call.ended" and d["status"] == "succeeded"],
        what="call.ended recorded as succeeded",
    )


# --- a long transcript ------------------------------------------------------------------------------


@pytest.mark.usefixtures("loopback")
def test_a_long_transcript_is_cut_in_the_event_with_a_flag_and_the_calls_url(
    server: DaphneServer, owner: Any, static_agent: Any, receivers: Any, settings: Any
) -> None:
    settings.EVENTS_MAX_TRANSCRIPT_CHARS = 2000
    settings.PUBLIC_BASE_URL = server.http_url
    hook = receivers()
    webhook(owner, hook.url(), ["call.started", "call.ended"])
    call = services.call_start(agent=static_agent, channel="web")
    for n in range(300):  # 30,000 characters
        services.call_message_add(call=call, role="user" if n % 2 else "assistant", content=f"{n:04d} " + "x" * 95)
    services.call_finish(call=call, status="completed")

    wait_for(lambda: len(hook.requests) == 2, what="both events")
    started, ended = (r.json()["message"] for r in hook.requests)
    assert started["messagesTruncated"] is False
    assert ended["messagesTruncated"] is True
    kept = ended["call"]["messages"]
    assert sum(len(m["content"]) for m in kept) == 2000 and len(kept) == 20
    assert [m["content"][:4] for m in kept] == [f"{n:04d}" for n in range(20)]  # the start, in order
    assert len(hook.requests[1].body) < 12_000
    assert ended["callUrl"] == f"{server.http_url}/public/v1/calls/{call.pk}"

    request = urllib.request.Request(ended["callUrl"], headers={"Authorization": f"Bearer {owner.api_key}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        whole = json.loads(response.read())
    assert len(whole["messages"]) == 300
