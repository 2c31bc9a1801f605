"""The browser demo at /demo/: the demo organization's agents, and a voice session with one of them
through the browser client (/static/voice-client/v1/). The page never holds an API key: its own
endpoint here opens the session server-side, as a customer's backend does with its key
(docs/examples/session_backend.py), and hands the page only the `websocketUrl`.

Served only while `DEMO_PAGES` is on (development: DEBUG, or the embedded default without
DATABASE_URL); anyone who reaches the page can talk to the demo organization's active agents."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_POST, require_safe

from accounts.models import Organization
from accounts.selectors import organization_get
from agents.models import Agent
from kit.errors import ApiError
from realtime.apis import realtime_session_body
from realtime.services import RealtimeSession, realtime_session_create

logger = logging.getLogger(__name__)


def session_error_response(request: HttpRequest, error: ApiError) -> JsonResponse:
    """The service's refusal as JSON for the page. A 5xx here is the operator's configuration (no
    REALTIME_WS_URL...): one WARNING line that names it, as for the public API, not an error with a
    traceback."""
    response = JsonResponse(error.body(), status=error.status_code)
    if error.status_code >= 500:
        logger.warning(
            "%s %s answered %s (server side): %s",
            request.method,
            request.path,
            error.status_code,
            error.message,
        )
        response._has_been_logged = True  # type: ignore[attr-defined]  # Django's private flag (not in the stubs): its request logger would log it again as an error
    return response


# What a page's session request may ask for, passed on to realtime_session_create as the public API's
# POST /agents/{id}/realtime-sessions does (which checks them: a 400 naming what is wrong).
SESSION_OPTIONS = ("modality", "events", "transport")


def session_options(request: HttpRequest) -> dict[str, Any]:
    """The session request's JSON body: `{"modality": "audio"|"text", "events": ["tool"], "transport":
    "websocket"|"webrtc"}` (all optional; a request without a JSON body asks for the defaults). ApiError 400
    when it is not a JSON object."""
    if request.content_type != "application/json":
        return {}
    try:
        body = json.loads(request.body)
    except ValueError:
        raise ApiError.invalid("The session request must be a JSON object") from None
    if not isinstance(body, dict):
        raise ApiError.invalid("The session request must be a JSON object")
    return {name: body[name] for name in SESSION_OPTIONS if name in body}


def page_session_body(session: RealtimeSession) -> dict[str, Any]:
    """What a page's own session endpoint answers: the session's `websocketUrl`, and its `webrtc` part
    (offerUrl, iceServers) when it was asked for; the browser client takes either."""
    body = realtime_session_body(session)
    return {name: body[name] for name in ("websocketUrl", "webrtc") if name in body}


def demo_organization_get() -> Organization | None:
    """The organization the demo talks as: DEMO_ORGANIZATION_ID, else the one `manage.py bootstrapdemo`
    recorded in var/demo.json; None when neither names an existing organization."""
    organization_id = settings.DEMO_ORGANIZATION_ID
    if not organization_id:
        try:
            organization_id = json.loads((settings.VAR_DIR / "demo.json").read_text())["organizationId"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
    try:
        uuid.UUID(str(organization_id))
    except ValueError:
        return None
    return organization_get(organization_id=str(organization_id))


def _demo_organization() -> Organization | None:
    if not settings.DEMO_PAGES:
        raise Http404("Demo pages are turned off (DEMO_PAGES)")
    return demo_organization_get()


@require_safe
def demo_page(request: HttpRequest) -> HttpResponse:
    organization = _demo_organization()
    agents = list(Agent.objects.filter(organization=organization).order_by("name", "id")) if organization else []
    return render(request, "realtime/demo.html", {"organization": organization, "agents": agents})


@require_POST
def demo_session(request: HttpRequest, agent_id: uuid.UUID) -> JsonResponse:
    """Opens a realtime session for one of the demo organization's agents; answers only its websocketUrl
    (and its webrtc part, asked for). The body may ask for a modality, events and a transport
    (session_options)."""
    organization = _demo_organization()
    if organization is None:
        return JsonResponse({"error": "No demo organization: run manage.py bootstrapdemo"}, status=404)
    try:
        options = session_options(request)
        session = realtime_session_create(organization=organization, agent_id=str(agent_id), **options)
    except ApiError as error:
        return session_error_response(request, error)
    return JsonResponse(page_session_body(session))


urlpatterns = [
    path("demo/", demo_page, name="demo"),
    path("demo/agents/<uuid:agent_id>/session", demo_session, name="demo-session"),
]
