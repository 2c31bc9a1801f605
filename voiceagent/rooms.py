"""Rooms: every REST resource is served from the package its URL names (`make lint` runs this check:
`manage.py check --tag rooms`; registered in voiceagent/apps.py).

The resource of a /public/v1 route is named by its path: its first segment (/agents, /calls,
/call-batches), or a collection nested under another resource's item when ROOMS names it with its parent
(`agents/knowledge`: /agents/{agentId}/knowledge is the knowledge resource, in the knowledge app). Any other
segment after an item is an action on it or a part of it, and belongs to its resource
(/calls/{callId}/hang-up, /calls/{callId}/recording and /call-batches/{batchId}/calls are the calls and
call batches resources').

ROOMS is the rule, one line per resource: the package its views live in. That is the app of its name, or,
when what it shows joins apps above that one, the api floor under its name (api/__init__.py): the agent
resource lives in api/agents, never in telephony, though its body carries phone numbers. A resource missing
from ROOMS, a view outside its resource's package and a route served twice (the second view is never
reached) are errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from django.core import checks
from django.urls import URLPattern, URLResolver, get_resolver

PUBLIC_PREFIX = "public/v1/"

# resource (its path's segments without the ids) -> the package its views live in.
ROOMS: dict[str, str] = {
    "agents": "api.agents",
    "agents/tools": "agents.tools",
    "agents/mcp-tools": "agents.tools",
    "mcp": "agents.tools",
    "agents/knowledge": "knowledge",
    "agents/phone-numbers": "telephony",
    "agents/logs": "calls",
    "agents/realtime-sessions": "realtime",
    "agents/widget-keys": "realtime.widget",
    "widget": "realtime.widget",
    "agents/tests": "realtime.agent_tests",
    "agents/test-runs": "realtime.agent_tests",
    "organization": "api.organization",
    "analytics": "calls.analytics",
    "budgets": "calls.budgets",
    "phone-numbers": "telephony",
    "call-batches": "telephony.campaigns",
    "calls": "calls",
    "calls/tests": "realtime.agent_tests",
    "recordings": "calls",
    "pricing": "calls.costs",
    "webhooks": "calls.webhooks",
    "webhook-deliveries": "calls.webhooks",
    "test-runs": "realtime.agent_tests",
    # The OpenAPI schema of them all (voiceagent/urls.py).
    "openapi.json": "drf_spectacular",
}

_PARAMETER = re.compile(r"<(?:[^>:]+:)?([^>]+)>")


def _routes(patterns: Iterable[Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    """(full route, view callback) of every URL pattern, through the includes."""
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern):
            yield route, pattern.callback


def _view_module(callback: Any) -> str:
    """The module of the view behind a callback (a class-based view's class, through wrappers)."""
    view = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
    while view is None and hasattr(callback, "__wrapped__"):
        callback = callback.__wrapped__
        view = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
    return str((view or callback).__module__)


def resource_of(path: str) -> str:
    """The resource a /public/v1 path (without the prefix) names: the longest run of its literal segments
    that ROOMS declares, else its first segment (`agents/<str:agent_id>/knowledge` -> agents/knowledge,
    `calls/<str:call_id>/hang-up` -> calls)."""
    literals = [segment for segment in path.split("/") if segment and not segment.startswith("<")]
    resource = literals[0] if literals else ""
    for end in range(2, len(literals) + 1):
        if "/".join(literals[:end]) in ROOMS:
            resource = "/".join(literals[:end])
    return resource


def rooms_problems(patterns: Sequence[Any] | None = None) -> list[str]:
    """What breaks the rule among the /public/v1 routes of `patterns` (the project's URLconf by default)."""
    problems: list[str] = []
    seen: dict[str, str] = {}
    routes = _routes(get_resolver().url_patterns if patterns is None else patterns)
    for route, callback in routes:
        if not route.startswith(PUBLIC_PREFIX):
            continue
        path = route[len(PUBLIC_PREFIX) :]
        module = _view_module(callback)
        shape = _PARAMETER.sub("<>", path)
        if shape in seen:
            problems.append(
                f"/{route} is served twice ({seen[shape]} and {module}): the second view is never reached; "
                "one view per route"
            )
            continue
        seen[shape] = module
        resource = resource_of(path)
        if resource not in ROOMS:
            problems.append(f"/{route} names the resource {resource!r}, which has no room: add it to ROOMS")
            continue
        package = ROOMS[resource]
        if module != package and not module.startswith(package + "."):
            problems.append(
                f"/{route} is the {resource} resource's, served from {module}: its views live in {package} (ROOMS)"
            )
    return problems


def check_rooms(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The system check (tag `rooms`): every /public/v1 view in the package of its resource."""
    return [checks.Error(problem, id="voiceagent.E010") for problem in rooms_problems()]
