"""The dashboard (Django admin) tests' shared pieces: the staff password, the agent form as the page posts
it, readers of a page's errors and hidden values, and the shape of the voiceagent tests' dashboard world."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

from accounts.models import Organization
from agents.models import Agent
from calls.models import Call
from kit.fields import iso

STAFF_PASSWORD = "pw-staff-Xq4Lm8Tz"

# Every field of the new-agent form, as the browser posts it.
NEW_AGENT = {
    "name": "Ava",
    "agent_type": "webhook",
    "prompt_type": "static",
    "identity": "",
    "instructions": "You take table reservations for the Acme restaurant.",
    "greeting_type": "none",
    "static_greeting": "",
    "language": "en-US",
    "voice_name": "eve",
    "ai_identity_disclosure_template_id": "standard",
    "background_sound": "none",
    "ambient_sound": "none",
    "ambient_sound_volume": "0.25",
    "ambient_sound_ducking": "on",
    "server_url": "",
    "new_server_headers": "",
    "new_server_secret": "",
    "handoff_phone_number": "",
    "end_call_enabled": "on",
    "max_duration_seconds": "1800",
    "time_zone": "UTC",
    "expected_updated_at": "",
}
SETTINGS = [name for name in NEW_AGENT if name in {f.name for f in Agent._meta.fields}]


@dataclass
class DashboardWorld:
    organization: Organization  # with a telephony account, and its number +14155550123 assigned to `agent`
    agent: Agent
    call: Call  # finished, with a transcript and its agent log session
    other_organization: Organization  # no telephony account; the number +442071838750, unassigned
    other_agent: Agent
    api: Any  # the public API as `organization` (its API key)
    calls: list[Call] = field(default_factory=list)


def edit_form(agent: Agent, **changes: Any) -> dict[str, Any]:
    """The agent's edit form as the page shows it (with its updatedAt), with `changes` typed in."""
    data: dict[str, Any] = {name: getattr(agent, name) for name in SETTINGS}
    data = {name: "" if value is None else value for name, value in data.items()}
    data.update(
        status=agent.status, new_server_headers="", new_server_secret="", expected_updated_at=iso(agent.updated_at)
    )
    data.update(changes)
    for checkbox in ("ambient_sound_ducking", "end_call_enabled"):
        if data.pop(checkbox) is True:
            data[checkbox] = "on"
    return {name: value for name, value in data.items() if value is not False}


def hidden_value(page: str, name: str) -> str:
    match = re.search(rf'name="{name}" value="([^"]*)"', page)
    assert match, f"no {name} on the page"
    return match.group(1)


def errors(page: str) -> list[str]:
    """The error messages the form shows (field errors and the errors on top), as text."""
    found = re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', page, re.S)
    return [
        html.unescape(re.sub(r"<[^>]+>", "", item)).strip()
        for block in found
        for item in re.findall(r"<li>(.*?)</li>", block, re.S)
    ]


class PageForm(HTMLParser):
    """The values a browser posts from a page's form `form_id` (inputs, checked boxes, selects, text
    areas; not what a <template> holds)."""

    def __init__(self, form_id: str = "agent_form") -> None:
        super().__init__()
        self.form_id = form_id
        self.data: dict[str, Any] = {}
        self._select: str | None = None
        self._textarea: str | None = None
        self._inside = False
        self._in_template = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {key: value or "" for key, value in attrs}
        if tag == "form" and a.get("id") == self.form_id:
            self._inside = True
        if tag == "template":
            self._in_template = True
        if not self._inside or self._in_template or "name" not in a:
            if tag == "option" and self._select and "selected" in a:
                self.data[self._select] = a.get("value", "")
            return
        name = a["name"]
        if tag == "input":
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    self.data[name] = a.get("value", "on")
            elif kind not in ("submit", "button", "file"):
                self.data[name] = a.get("value", "")
        elif tag == "select":
            self._select = name
            self.data.setdefault(name, "")
        elif tag == "textarea":
            self._textarea = name
            self.data[name] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None
        elif tag == "template":
            self._in_template = False
        elif tag == "form":
            self._inside = False

    def handle_data(self, data: str) -> None:
        if self._textarea:
            text = data[1:] if not self.data[self._textarea] and data.startswith("\n") else data
            self.data[self._textarea] += text


def page_form(page: str, form_id: str = "agent_form") -> dict[str, Any]:
    """What the browser would post from the page's form `form_id` (without the "save and add another")."""
    parser = PageForm(form_id)
    parser.feed(page)
    parser.data.pop("_addanother", None)
    return parser.data
