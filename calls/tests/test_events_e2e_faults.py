"""Call events that cannot simply be POSTed where they were addressed (issue 34), delivered to scripted
receivers on loopback (testing/webhooks.py) by the task that sends what is due (test_events_e2e.py's
`delivered`, quick retries): a receiver that redirects, a URL the HTTP client cannot encode (an old row, saved
before saving checked it), and a transcript too long for one body, whose call URL the application (in the
test's loop, testing/inprocess.py) serves whole."""

from __future__ import annotations

from typing import Any

import pytest

from calls import services
from calls.models import CallEvent, WebhookEndpoint
from calls.tests.test_events_e2e import (  # its fixtures (quick retries) and helpers
    delivered,
    deliveries,
    kinds,
    loopback,
    quick_retries,
    receivers,
    signed,
    static_agent,
    webhook,
)
from testing.inprocess import serving
from testing.waiting import polled_sync
from testing.webhooks import Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback", "quick_retries")]
__all__ = ["loopback", "quick_retries", "receivers", "static_agent"]  # fixtures


# --- redirects -------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_origin_is_a_failed_attempt_naming_its_location(
    owner: Any, static_agent: Any, receivers: Any, status: int
) -> None:
    elsewhere = receivers()  # another origin (its own port), which would answer 200
    moved = elsewhere.url("/moved")
    hook = receivers()
    hook.default = Reply(status=status, headers={"Location": moved})
    org = webhook(owner, hook.url(), ["call.started"])
    services.call_start(agent=static_agent, channel="web")

    [delivery] = delivered(lambda: [d for d in deliveries(owner) if d["attempts"] >= 2], what="a retried redirect")
    assert delivery["status"] == "pending"  # never "succeeded": retried like any failed attempt
    assert delivery["lastStatusCode"] == status
    assert delivery["lastError"] == (
        f"HTTP {status} redirect to {moved} not followed (events follow only 307/308 within the same origin)"
    )
    assert delivery["attemptLog"][0]["nextAttemptAt"] is not None
    assert elsewhere.requests == []  # neither a GET without the body nor the body without its signature
    assert all(r.method == "POST" and r.path == "/hook" and signed(r, org["secret"]) for r in hook.requests)


@pytest.mark.parametrize("status", [307, 308])
def test_a_307_or_308_within_the_origin_delivers_the_same_signed_body(
    owner: Any, static_agent: Any, receivers: Any, status: int
) -> None:
    hook = receivers()
    hook.reply(Reply(status=status, headers={"Location": hook.url("/moved")}))
    org = webhook(owner, hook.url(), ["call.started"])
    call = services.call_start(agent=static_agent, channel="web")

    [delivery] = delivered(lambda: deliveries(owner, status="succeeded"), what="the delivery")
    assert delivery["attempts"] == 1 and delivery["lastStatusCode"] == 200
    first, second = hook.requests
    assert (first.method, first.path, second.method, second.path) == ("POST", "/hook", "POST", "/moved")
    event = CallEvent.objects.get(call=call)
    assert first.body == second.body == event.body.encode()
    assert signed(second, org["secret"]) and second.headers["x-service-event-id"] == str(event.id)


# --- a URL the HTTP client cannot encode -----------------------------------------------------------


def test_an_old_unencodable_url_fails_finally_and_the_calls_next_event_is_delivered(
    owner: Any, static_agent: Any, receivers: Any
) -> None:
    hook = receivers()
    created = webhook(owner, hook.url(), ["call.started", "call.ended"])
    # Saved before saving checked the encoding (the API refuses it now: test_unencodable_urls.py).
    WebhookEndpoint.objects.filter(pk=created["id"]).update(url="http://a\u200b.example/hook")
    call = services.call_start(agent=static_agent, channel="web")

    [failed] = delivered(lambda: deliveries(owner, status="failed"), what="the final failure")
    assert failed["attempts"] == 1 and failed["nextAttemptAt"] is None
    assert failed["lastError"].startswith("Refused outbound URL: The HTTP client cannot encode this URL")
    assert "\n" not in failed["lastError"]

    fixed = owner.client.patch(f"/public/v1/webhooks/{created['id']}", {"url": hook.url()}, format="json")
    assert fixed.status_code == 200
    services.call_finish(call=call, status="completed")
    delivered(lambda: hook.requests, what="the call's next event")
    assert kinds(hook.requests) == [("call.ended", "1")]
    # The answer is recorded once the receiver's answer is read.
    polled_sync(
        lambda: [d for d in deliveries(owner) if d["eventType"] == "call.ended" and d["status"] == "succeeded"],
        what="call.ended recorded as succeeded",
    )


# --- a long transcript ------------------------------------------------------------------------------


def test_a_long_transcript_is_cut_in_the_event_with_a_flag_and_the_calls_url(
    owner: Any, static_agent: Any, receivers: Any, settings: Any
) -> None:
    hook = receivers()
    webhook(owner, hook.url(), ["call.started", "call.ended"])
    # The application (its own address is PUBLIC_BASE_URL, which the events' callUrl names).
    with serving(settings, {"EVENTS_MAX_TRANSCRIPT_CHARS": 2000}, public=True) as server:
        call = services.call_start(agent=static_agent, channel="web")
        for n in range(300):  # 30,000 characters
            role = "user" if n % 2 else "assistant"
            services.call_message_add(call=call, role=role, content=f"{n:04d} " + "x" * 95)
        services.call_finish(call=call, status="completed")

        delivered(lambda: len(hook.requests) == 2, what="both events")
        started, ended = (r.json()["message"] for r in hook.requests)
        assert started["messagesTruncated"] is False
        assert ended["messagesTruncated"] is True
        kept = ended["call"]["messages"]
        assert sum(len(m["content"]) for m in kept) == 2000 and len(kept) == 20
        assert [m["content"][:4] for m in kept] == [f"{n:04d}" for n in range(20)]  # the start, in order
        assert len(hook.requests[1].body) < 12_000
        assert ended["callUrl"] == f"{server.http_url}/public/v1/calls/{call.pk}"

        with server.http(headers={"Authorization": f"Bearer {owner.api_key}"}) as client:
            answer = client.get(ended["callUrl"])  # the call's URL, served by the application
        assert answer.status_code == 200, answer.text
        whole = answer.json()
        assert len(whole["messages"]) == 300
