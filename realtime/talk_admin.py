"""The agent page's "Talk to this agent" panel in the dashboard: staff open a voice session from the
browser with their admin login (a staff-only POST with CSRF; no API key in the page), through the same
service as the public API (realtime_session_create: inactive agents and missing realtime settings are
refused with its messages), and talk through the browser client (/static/voice-client/v1/).

The panel is the template admin/agents/agent/change_form.html (the admin finds it by name, so AgentAdmin
needs no change); its endpoint is mounted by voiceagent/urls.py under the admin's URL prefix. It lives
in realtime, the package whose session service it calls: the agents app sits a floor below realtime."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from django.views.decorators.http import require_POST

from agents.models import Agent
from kit.errors import ApiError
from realtime.demo import page_session_body, session_error_response, session_options
from realtime.services import realtime_session_create


@require_POST
def talk_session(request: HttpRequest, object_id: str) -> HttpResponse:
    """A realtime session for the agent, for staff who may view it; answers only its websocketUrl (and its
    webrtc part, asked for). The body may ask for a modality, events and a transport (`{"modality": "text",
    "events": ["tool"]}`, `{"transport": "webrtc"}`: realtime.demo.session_options)."""
    model_admin = admin.site.get_model_admin(Agent)
    agent = model_admin.get_object(request, object_id)
    if agent is None:
        return JsonResponse({"error": "Agent not found"}, status=404)
    if not model_admin.has_view_permission(request, agent):
        return JsonResponse({"error": "You may not view this agent"}, status=403)
    try:
        options = session_options(request)
        session = realtime_session_create(organization=agent.organization, agent_id=str(agent.pk), **options)
    except ApiError as error:
        return session_error_response(request, error)
    return JsonResponse(page_session_body(session))


# admin_view: staff login required (else a redirect to the login page), CSRF checked, never cached.
urlpatterns = [
    path("agents/agent/<path:object_id>/talk/session", admin.site.admin_view(talk_session), name="agent-talk-session")
]
