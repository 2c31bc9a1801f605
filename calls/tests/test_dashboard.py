"""Dashboard pages as staff see them: the call record (conversation, tool calls, turn timeline, usage and
billing), the calls list's filters, and the minutes-per-day usage chart."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone

from accounts.models import Organization
from calls import services
from calls.logging import LogSession, agent_log, flush_agent_logs
from calls.models import Call


class Clock:
    """Controllable time for the services and the agent log (both read django.utils.timezone.now)."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def at(self, origin: datetime, seconds: float) -> datetime:
        self.now = origin + timedelta(seconds=seconds)
        return self.now


@pytest.fixture
def clock(monkeypatch: Any) -> Clock:
    controlled = Clock(timezone.now() - timedelta(minutes=10))
    monkeypatch.setattr(timezone, "now", lambda: controlled.now)
    return controlled


@pytest.fixture
def superuser_client(client: Any, db: Any) -> Any:
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


@pytest.fixture
def viewer_client(client: Any, db: Any) -> Any:
    """Staff who may see calls but not what was said in them."""
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_call"))
    client.force_login(user)
    return client


@pytest.fixture
def established(owner: Any) -> Organization:
    """The owner's organization, billed since 40 days ago (so calls of the last days fall in a period)."""
    Organization.objects.filter(pk=owner.organization.pk).update(
        billing_period_start=timezone.now() - timedelta(days=40)
    )
    return owner.organization


@pytest.fixture
def recorded_call(established: Organization, agent: Any, clock: Clock, monkeypatch: Any) -> Call:
    """A phone call as the engine records it: greeting, a question answered after a tool call, an answer
    the caller cuts off, a transfer request; two model requests; its agent log session."""
    t0 = clock.now
    call = services.call_start(agent=agent, channel="phone", from_number="+14155550100")
    session = LogSession(agent.organization_id, agent.pk, "sess01")
    clock.at(t0, 0.2)
    agent_log(session, "info", "session started", callId=str(call.pk))

    def agent_says(at: float, text: str, **fields: Any) -> None:
        clock.at(t0, at)
        agent_log(session, "info", "assistant turn cut" if "heardWords" in fields else "assistant turn", **fields)
        services.call_message_add(call=call, role="assistant", content=text)

    def caller_says(at: float, text: str) -> None:
        clock.at(t0, at)
        services.call_message_add(call=call, role="user", content=text)
        agent_log(session, "info", "user turn", words=len(text.split()))

    agent_says(3.0, "Hi, I'm Support, an AI agent. How can I help?", words=10)
    caller_says(7.0, "Where is my order 4417?")
    clock.at(t0, 8.5)
    services.call_tool_invocation_add(
        call=call,
        tool_name="lookup_order",
        request={"orderId": "4417"},
        response='{"status": "shipped", "eta": "Friday"}',
        status="success",
        duration_ms=900,
    )
    services.call_llm_usage_add(call=call, provider="openai", model="gpt-4o-mini", input_tokens=420, output_tokens=31)
    agent_says(11.0, "Your order 4417 has shipped and arrives on Friday.", words=9, latencyMs=640)
    caller_says(14.0, "Can you change the address?")
    clock.at(t0, 16.9)
    agent_log(session, "info", "barge-in", speechMs=320)
    agent_says(17.0, "I can't change", heardWords=3, plannedSentences=2)
    caller_says(19.5, "Then transfer me please.")
    services.call_llm_usage_add(call=call, provider="openai", model="gpt-4o-mini", input_tokens=510, output_tokens=12)
    agent_says(22.0, "Transferring you now.", words=3, latencyMs=480)
    clock.at(t0, 25.0)
    services.call_finish(call=call, status="completed")
    flush_agent_logs()
    monkeypatch.undo()  # the pages are read at the real time
    return call


def _page(client: Any, call: Call) -> str:
    response = client.get(f"/admin/calls/call/{call.pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


def test_the_call_page_shows_the_conversation_with_times_from_the_start(superuser_client, recorded_call):
    page = _page(superuser_client, recorded_call)

    assert "Transcript (7 messages)" in page
    bubbles = re.findall(r'<div class="bubble (\w+)"><span class="meta">(\w+) · (\+[\d:.]+)', page)
    assert bubbles[:3] == [
        ("agent", "Agent", "+0:03.0"),
        ("caller", "Caller", "+0:07.0"),
        ("agent", "Agent", "+0:11.0"),
    ]
    assert "Where is my order 4417?" in page
    assert "Hi, I&#x27;m Support, an AI agent. How can I help?" in page
    assert len(bubbles) == 7
    assert 'Agent · +0:11.0 · <span class="remark">answered 640 ms after the caller stopped speaking</span>' in page
    assert (
        'Agent · +0:17.0 · <span class="remark">answered ~1.8 s after the caller stopped speaking, cut off by the caller</span>'
        in page
    )


def test_the_call_page_shows_tool_requests_and_responses_pretty_printed(superuser_client, recorded_call):
    page = _page(superuser_client, recorded_call)

    assert "Tool invocations (1)" in page
    assert "<strong>lookup_order</strong>" in page
    assert '<span class="status-success">success</span> · 900 ms · finished at +0:08.5' in page
    assert "{\n  &quot;orderId&quot;: &quot;4417&quot;\n}" in page
    assert "{\n  &quot;eta&quot;: &quot;Friday&quot;,\n  &quot;status&quot;: &quot;shipped&quot;\n}" in page


def test_the_timeline_draws_one_bar_per_turn_the_tool_the_cut_and_the_latencies(superuser_client, recorded_call):
    page = _page(superuser_client, recorded_call)
    svg = page[page.index('<svg class="call-timeline"') : page.index("</svg>", page.index("call-timeline"))]

    assert svg.count('class="turn caller"') == 3
    assert svg.count('class="turn agent"') == 4
    assert svg.count('class="tool ok"') == 1
    assert svg.count('class="cut-marker log"') == 1
    assert "Agent turn 3: 0:15.8 to 0:17.0, cut by the caller (barge-in)" in svg
    assert "lookup_order (success): 0:07.6 to 0:08.5, 900 ms" in svg
    # Measured latencies from the log; the agent's first answer starts 640 ms after the caller's turn.
    assert ">640 ms</text>" in svg and ">480 ms</text>" in svg
    assert "Agent turn 2: 0:07.6 to 0:11.0" in svg
    assert "Where is my order" not in svg  # no message text in the picture
    assert "Barge-ins and latencies from this call's agent log session, " in page
    log_link = f'<a href="/admin/calls/agentlog/?call={recorded_call.pk}">sess01</a>'
    assert log_link in page


def test_the_timeline_marks_each_interruption_by_kind_and_counts_them(superuser_client, agent, clock, monkeypatch):
    """The engine's "interruption" lines (kind, speechMs): a mark per line on the caller row, a legend with
    the count per kind; the barge-in of the "assistant turn cut" line is still drawn."""
    t0 = clock.now
    call = services.call_start(agent=agent, channel="web")
    session = LogSession(agent.organization_id, agent.pk, "sess02")
    clock.at(t0, 0.1)
    agent_log(session, "info", "session started", callId=str(call.pk))
    clock.at(t0, 2.0)
    services.call_message_add(call=call, role="user", content="What are your opening hours?")
    for at, kind, speech_ms in ((4.0, "backchannel", 420), (5.0, "ignored", 300), (6.5, "false", 250)):
        clock.at(t0, at)
        agent_log(session, "info", "interruption", kind=kind, speechMs=speech_ms)
    clock.at(t0, 8.0)
    agent_log(session, "info", "interruption", kind="real", speechMs=610)
    agent_log(session, "info", "assistant turn cut", heardWords=12, plannedSentences=3)
    services.call_message_add(call=call, role="assistant", content="We open at nine and close at six on weekdays")
    clock.at(t0, 8.1)
    agent_log(session, "info", "interruption", kind="sneeze", speechMs=100)  # a kind this page does not know
    clock.at(t0, 10.0)
    services.call_message_add(call=call, role="user", content="Stop. What time do you open on Sunday?")
    services.call_finish(call=call, status="completed")
    flush_agent_logs()
    monkeypatch.undo()

    page = _page(superuser_client, call)
    svg = page[page.index('<svg class="call-timeline"') : page.index("</svg>", page.index("call-timeline"))]

    for kind in ("real", "false", "backchannel", "ignored"):
        assert svg.count(f'class="interruption {kind}"') == 1, kind
    assert "sneeze" not in svg
    assert "Interruption (backchannel) at 0:04.0, 420 ms of speech: a backchannel: the agent went on" in svg
    assert "Interruption (false) at 0:06.5, 250 ms of speech: cut the agent but held no words" in svg
    assert "Interruption (real) at 0:08.0, 610 ms of speech: the caller&#x27;s words cut the agent" in svg
    assert "4 interruptions (1 real, 1 false, 1 backchannel, 1 ignored)" in svg
    legend = svg[svg.index('class="interruption-legend"') :]
    assert [
        re.search(rf'class="legend-{kind}".*?>(\d+ {kind})</text>', legend).group(1)
        for kind in ("real", "false", "backchannel", "ignored")
    ] == [
        "1 real",
        "1 false",
        "1 backchannel",
        "1 ignored",
    ]
    assert svg.count('class="cut-marker log"') == 1  # the barge-in, as before
    assert "1 barge-in" in svg
    assert "Caller speech over the agent: 1 real, 1 false, 1 backchannel, 1 ignored" in page


def test_a_call_without_interruption_lines_has_no_interruption_legend(superuser_client, recorded_call):
    page = _page(superuser_client, recorded_call)
    assert 'class="interruption' not in page and "Caller speech over the agent" not in page


def test_the_timeline_is_the_same_every_time(superuser_client, recorded_call):
    first = _page(superuser_client, recorded_call)
    second = _page(superuser_client, recorded_call)

    def svg(page: str) -> str:
        return page[page.index('<svg class="call-timeline"') : page.index("</svg>", page.index("call-timeline"))]

    assert svg(first) == svg(second)


def test_the_call_page_shows_model_usage_and_billing(superuser_client, recorded_call):
    page = _page(superuser_client, recorded_call)

    assert "Total (2 requests)</th><th>930</th><th>43</th>" in page
    assert "gpt-4o-mini" in page
    billing = re.sub(r"\s+", " ", page[page.index('class="fieldset-heading">Billing') : page.index("Turn timeline")])
    # 25 s rounds up to 30 s: half a minute, all of it from the plan's allowance.
    assert '<label>Usage classification:</label> <div class="readonly">Included</div>' in billing
    assert '<label>Billable min:</label> <div class="readonly">0.50</div>' in billing
    assert '<label>Included min:</label> <div class="readonly">0.50</div>' in billing
    assert '<label>Overage min:</label> <div class="readonly">0.00</div>' in billing


def test_staff_without_the_message_permission_see_the_timeline_but_no_transcript_or_tool_data(
    viewer_client, recorded_call
):
    page = _page(viewer_client, recorded_call)

    assert 'class="turn caller"' in page
    assert "Where is my order" not in page
    assert "orderId" not in page and "shipped" not in page
    assert "<h2>Summary</h2>" not in page
    assert "Hidden: transcripts, summaries and tool requests and responses are personal data" in page


def test_without_log_lines_a_barge_in_is_inferred_from_the_messages(superuser_client, agent, clock, monkeypatch):
    t0 = clock.now
    call = services.call_start(agent=agent, channel="web")
    clock.at(t0, 2.0)
    services.call_message_add(call=call, role="user", content="Hello there")
    clock.at(t0, 6.0)
    services.call_message_add(call=call, role="assistant", content="Hello! Our opening hours are nine to five on")
    clock.at(t0, 6.6)  # six words said in 0.6 s after the agent stopped: the caller spoke over it
    services.call_message_add(call=call, role="user", content="Sorry, I only need the address")
    clock.at(t0, 8.0)
    services.call_finish(call=call, status="completed")
    monkeypatch.undo()

    page = _page(superuser_client, call)

    assert page.count('class="cut-marker inferred"') == 1
    assert page.count('class="turn caller"') == 2
    assert ">~400 ms</text>" in page  # estimated: 9 words take 3.6 s, so it started 0.4 s after the caller
    assert "barge-ins are inferred and latencies estimated" in page
    assert "answered ~400 ms after the caller stopped speaking, cut off by the caller (inferred)" in page


def test_text_in_the_record_is_escaped_in_the_page_and_the_svg(superuser_client, agent):
    call = services.call_start(agent=agent, channel="web")
    services.call_message_add(call=call, role="user", content="<script>alert(1)</script>")
    services.call_tool_invocation_add(
        call=call,
        tool_name='x"><img src=y onerror=alert(2)>',
        request={},
        response="<b>",
        status="error",
        duration_ms=5,
    )
    services.call_finish(call=call, status="failed")

    page = _page(superuser_client, call)

    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=y" not in page and "x&quot;&gt;&lt;img src=y onerror=alert(2)&gt; (error)" in page
    assert 'class="tool failed"' in page


def test_an_active_call_without_messages_has_an_empty_timeline(superuser_client, agent):
    call = services.call_start(agent=agent, channel="web")

    page = _page(superuser_client, call)

    assert '<svg class="call-timeline"' in page and 'class="turn ' not in page
    assert "Transcript (0 messages)" in page and "No messages." in page
    assert "No model usage recorded." in page


def test_the_call_page_reads_the_record_in_a_few_queries(
    superuser_client, recorded_call, django_assert_max_num_queries
):
    with django_assert_max_num_queries(12):
        _page(superuser_client, recorded_call)


# --- the calls list ----------------------------------------------------------------------------


@pytest.fixture
def listed_calls(owner, agent, make_agent, call_lasting):
    billing = make_agent(owner.organization, name="Billing", status="active")
    web = services.call_finish(call=services.call_start(agent=billing, channel="web"), status="failed")
    old = call_lasting(30)
    Call.objects.filter(pk=old.pk).update(started_at=timezone.now() - timedelta(days=3))
    return {"support_phone": call_lasting(12), "support_old": old, "billing_web": web, "billing": billing}


def _listed(client: Any, query: str) -> set:
    response = client.get(f"/admin/calls/call/?{query}")
    assert response.status_code == 200
    return {call.pk for call in response.context["cl"].result_list}


def test_the_calls_list_filters_by_agent_status_channel_date_and_classification(superuser_client, listed_calls, agent):
    everything = {listed_calls[k].pk for k in ("support_phone", "support_old", "billing_web")}
    assert _listed(superuser_client, "") == everything
    assert _listed(superuser_client, f"agent={agent.pk}") == {
        listed_calls["support_phone"].pk,
        listed_calls["support_old"].pk,
    }
    assert _listed(superuser_client, "status__exact=failed") == {listed_calls["billing_web"].pk}
    assert _listed(superuser_client, "channel__exact=web") == {listed_calls["billing_web"].pk}
    today = timezone.localdate()
    assert _listed(
        superuser_client, f"started_at__year={today.year}&started_at__month={today.month}&started_at__day={today.day}"
    ) == {listed_calls["support_phone"].pk, listed_calls["billing_web"].pk}
    midnight = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    since_today = urlencode({"started_at__gte": str(midnight), "started_at__lt": str(midnight + timedelta(days=1))})
    assert _listed(superuser_client, since_today) == {listed_calls["support_phone"].pk, listed_calls["billing_web"].pk}
    assert _listed(superuser_client, "usage_classification__exact=included") == everything
    assert _listed(superuser_client, "usage_classification__exact=overage") == set()
    assert _listed(superuser_client, "agent=not-a-uuid") == set()


def test_the_calls_list_offers_the_filters(superuser_client, listed_calls):
    page = superuser_client.get("/admin/calls/call/").content.decode()

    for title in ("By agent", "By status", "By channel", "By usage classification", "By started at"):
        assert title in page
    assert "Billing (Acme)" in page and "Support (Acme)" in page


# --- the usage chart ---------------------------------------------------------------------------


@pytest.fixture
def two_days_of_calls(established, agent, clock, monkeypatch):
    """A 90-second call three days ago (included) and a 60-second call yesterday that crosses the plan's
    two included minutes (30 s included, 30 s overage)."""
    plan = established.plan
    plan.included_minutes = 2
    plan.save(update_fields=["included_minutes"])
    days = []
    for days_ago, seconds in ((3, 90), (1, 60)):
        start = timezone.localtime(clock.now).replace(hour=10, minute=0) - timedelta(days=days_ago)
        clock.now = start
        call = services.call_start(agent=agent, channel="phone")
        clock.at(start, seconds)
        services.call_finish(call=call, status="completed")
        days.append(start.date())
    monkeypatch.undo()
    return days


def test_the_organization_page_charts_included_and_overage_minutes_per_day(superuser_client, owner, two_days_of_calls):
    response = superuser_client.get(f"/admin/accounts/organization/{owner.organization.pk}/change/")
    page = response.content.decode()
    three_days_ago, yesterday = (day.isoformat() for day in two_days_of_calls)

    assert response.status_code == 200
    assert f'class="usage-included" data-day="{three_days_ago}"' in page
    assert f'class="usage-included" data-day="{yesterday}"' in page
    assert f'class="usage-overage" data-day="{yesterday}"' in page
    assert page.count('class="usage-included"') == 2 and page.count('class="usage-overage"') == 1
    assert f"<title>{three_days_ago}: 1.5 included + 0 overage minutes</title>" in page
    assert f"<title>{yesterday}: 0.5 included + 0.5 overage minutes</title>" in page
    assert "2.0 included + 0.5 overage minutes in these 30 days" in page
    day = two_days_of_calls[1]
    link = (
        f"/admin/calls/call/?organization__id__exact={owner.organization.pk}&amp;started_at__year={day.year}"
        f"&amp;started_at__month={day.month}&amp;started_at__day={day.day}"
    )
    assert link in page
    listed = superuser_client.get(link.replace("&amp;", "&"))
    assert listed.status_code == 200 and len(listed.context["cl"].result_list) == 1


def test_the_usage_page_shows_each_organizations_chart(superuser_client, owner, outsider, two_days_of_calls):
    response = superuser_client.get("/admin/calls/call/usage/")
    page = response.content.decode()

    assert response.status_code == 200
    assert page.count('<svg class="usage-chart"') == 2  # one per organization, the outsider's empty
    assert page.count('class="usage-included"') == 2 and page.count('class="usage-overage"') == 1
    assert f'href="/admin/accounts/organization/{owner.organization.pk}/change/"' in page


def test_staff_with_only_the_call_permission_can_open_the_usage_page(viewer_client, two_days_of_calls):
    response = viewer_client.get("/admin/calls/call/usage/")
    assert response.status_code == 200
    assert 'class="usage-overage"' in response.content.decode()
