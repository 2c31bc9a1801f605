"""The dashboard's home page (/admin/) as staff see it: today's figures, the live calls and the JSON they
refresh from, minutes of the billing period against the plan, the newest calls; a navigation without the
service's internal tables, which stay reachable; the favicon."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils import timezone

from accounts.models import Organization
from agents.models import Agent
from calls import services as calls_services
from calls.models import Call

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)


@pytest.fixture
def clock(monkeypatch: Any) -> dict[str, datetime]:
    """Time stands at whatever clock["now"] says (services, selectors and pages read timezone.now)."""
    state = {"now": NOW}
    monkeypatch.setattr(timezone, "now", lambda: state["now"])
    return state


def _call(clock: dict[str, datetime], agent: Agent, *, started: datetime, seconds: int, status: str | None) -> Call:
    """A call that started at `started` and, unless `status` is None (still live), ended after `seconds`."""
    now = clock["now"]
    clock["now"] = started
    call = calls_services.call_start(agent=agent, channel="phone", from_number="+14155550100")
    calls_services.call_message_add(call=call, role="user", content="I would like a refund for my order.")
    if status is not None:
        clock["now"] = started + timedelta(seconds=seconds)
        calls_services.call_finish(call=call, status=status)
    clock["now"] = now
    return call


@pytest.fixture
def day_of_calls(clock: dict[str, datetime], owner: Any, outsider: Any, make_agent: Any) -> dict[str, Any]:
    """At 09:00 UTC: two calls today (one failed), one failed last night, one failed two days ago, and two
    live calls (one of another organization). The owner's plan includes 2,000 minutes."""
    Organization.objects.update(billing_period_start=NOW - timedelta(days=40))
    ava = make_agent(owner.organization, name="Ava", status="active")
    max_agent = make_agent(outsider.organization, name="Max", status="active")
    calls = {
        "today": _call(clock, ava, started=NOW - timedelta(hours=1), seconds=125, status="completed"),
        "failed today": _call(clock, ava, started=NOW - timedelta(hours=2), seconds=30, status="failed"),
        "failed last night": _call(clock, ava, started=NOW - timedelta(hours=13), seconds=61, status="failed"),
        "failed two days ago": _call(clock, ava, started=NOW - timedelta(days=2), seconds=20, status="failed"),
        "live": _call(clock, ava, started=NOW - timedelta(seconds=95), seconds=0, status=None),
        "live elsewhere": _call(clock, max_agent, started=NOW - timedelta(seconds=20), seconds=0, status=None),
    }
    return calls


@pytest.fixture
def staff(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw-root-1234"))
    return client


def _figure(page: str, name: str) -> str:
    return re.search(rf'data-count="{name}">(\d+)<', page).group(1)


def test_the_home_page_shows_todays_calls_the_failures_of_the_last_day_and_the_live_calls(staff, day_of_calls):
    page = staff.get("/admin/").content.decode()

    assert _figure(page, "calls_today") == "4"  # the two of today and the two live ones
    assert _figure(page, "failures") == "2"  # today's and last night's, not the one of two days ago
    assert _figure(page, "live") == "2"
    live = page[page.index('id="live-calls"') : page.index("</table>", page.index('id="live-calls"'))]
    assert f'href="/admin/calls/call/{day_of_calls["live"].pk}/change/"' in live
    assert "1:35" in live and "0:20" in live  # how long each has been going
    assert "Ava" in live and "Max" in live


def test_each_figure_opens_the_calls_it_counts(staff, day_of_calls):
    page = staff.get("/admin/").content.decode()
    links = dict(
        re.findall(
            r'<a class="home-figure[^"]*" href="([^"]+)"[^>]*><span class="home-figure-value" data-count="(\w+)"', page
        )
    )
    by_figure = {name: url.replace("&amp;", "&") for url, name in links.items()}

    for name, expected in (("calls_today", 4), ("failures", 2), ("live", 2)):
        listed = staff.get(by_figure[name]).context["cl"].result_count
        assert listed == expected, name


def test_the_home_page_shows_minutes_used_against_the_plan_and_the_newest_calls(staff, owner, day_of_calls):
    page = staff.get("/admin/").content.decode()

    usage = page[page.index("Minutes this billing period") : page.index("Newest calls")]
    assert owner.organization.name in usage and "Studio" in usage
    # 125 s + 30 s + 61 s + 20 s billed in 10-second steps: 130 + 30 + 70 + 20 = 250 s = 4.2 of 2,000 minutes.
    assert "4.2 of 2000" in usage
    assert '<meter min="0" max="2000" value="4.17"' in usage
    assert 'href="/admin/calls/call/usage/"' in usage

    newest = page[page.index("Newest calls") :]
    rows = re.findall(r'href="/admin/calls/call/([0-9a-f-]{36})/change/"', newest)
    assert rows[:2] == [str(day_of_calls["live elsewhere"].pk), str(day_of_calls["live"].pk)]


def test_live_calls_json_is_what_the_page_refreshes_from(staff, day_of_calls, clock):
    response = staff.get("/admin/live-calls.json")

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    body = response.json()
    assert body["counts"] == {"calls_today": 4, "failures": 2, "live": 2}
    assert [call["agentName"] for call in body["live"]] == ["Max", "Ava"]
    assert body["live"][1]["duration"] == "1:35"
    assert body["live"][1]["url"] == f"/admin/calls/call/{day_of_calls['live'].pk}/change/"

    # A call ends: the next refresh has one live call fewer.
    clock["now"] = NOW + timedelta(seconds=5)
    calls_services.call_finish(call=day_of_calls["live"], status="completed")
    assert staff.get("/admin/live-calls.json").json()["counts"]["live"] == 1


def test_only_staff_who_may_see_calls_get_the_figures(client, day_of_calls):
    assert client.get("/admin/live-calls.json").status_code == 302  # to the login page

    user = User.objects.create_user("support", password="pw-support-1234", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_organization"))
    client.force_login(user)
    assert client.get("/admin/live-calls.json").status_code == 403
    page = client.get("/admin/").content.decode()
    assert "data-count" not in page and "Organizations" in page


def test_the_refresh_script_runs_under_the_pages_csp_nonce(staff, day_of_calls):
    response = staff.get("/admin/")
    nonce = re.search(r"'nonce-([^']+)'", response["Content-Security-Policy"]).group(1)
    page = response.content.decode()

    scripts = re.findall(r"<script([^>]*)>", page)
    inline = [attributes for attributes in scripts if "src=" not in attributes and "application/json" not in attributes]
    assert inline == [f' nonce="{nonce}"']
    assert '"url": "/admin/live-calls.json"' in page and '"refreshMs": 5000' in page


def test_internal_tables_are_out_of_the_navigation_but_reachable(staff, day_of_calls):
    index = staff.get("/admin/").content.decode()
    navigation = staff.get("/admin/calls/call/").content.decode()
    start = navigation.index('id="nav-sidebar"')
    navigation = navigation[start : navigation.index("</nav>", start)]
    tables = index[index.index('class="app-list"') : index.index('class="home-internal"')]

    internal = {
        "/admin/knowledge/knowledgechunk/": "Knowledge chunks",
        "/admin/knowledge/agentknowledgeindex/": "Agent knowledge indexes",
        "/admin/realtime/usedsessiontoken/": "Used session tokens",
    }
    for url, name in internal.items():
        assert url not in navigation and url not in tables
        assert f'<a href="{url}">{name}</a>' in index[index.index('class="home-internal"') :]
        assert staff.get(url).status_code == 200
    assert "/admin/knowledge/knowledgedocument/" in navigation and "/admin/calls/call/" in navigation
    assert "MCP tool selections" in navigation


def test_the_favicon_is_a_small_file_served_without_internet(client, staff):
    page = staff.get("/admin/").content.decode()
    icons = re.findall(r'<link rel="icon" href="([^"]+)"', page)
    assert icons == ["/static/voiceagent/favicon.svg", "/static/voiceagent/favicon.png"]
    redirect = client.get("/favicon.ico")
    assert redirect.status_code == 301 and redirect["Location"] == "/static/voiceagent/favicon.png"
    for url in icons:
        response = client.get(url)
        assert response.status_code == 200
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert 0 < len(body) < 4096
