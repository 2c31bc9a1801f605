"""The agent page's widget keys in the dashboard: the snippet of each key with its allowed origins (the
template realtime/widget_keys.html, included by the agent page's template; the keys come with the page's
lists, telephony/admin.py), and the staff-only POSTs that add and delete keys through the same services as
the public API (realtime/widget/services.py). Mounted by voiceagent/urls.py under the admin's URL prefix,
like the talk panel (realtime/talk_admin.py)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from agents.models import Agent
from kit.errors import ApiError
from realtime.widget.services import widget_key_create, widget_key_delete


def _agent(request: HttpRequest, object_id: str) -> Agent:
    """The agent, for staff who may change it."""
    model_admin = admin.site.get_model_admin(Agent)
    agent = model_admin.get_object(request, object_id)
    if agent is None:
        raise Http404("Agent not found")
    if not model_admin.has_change_permission(request, agent):
        raise PermissionDenied
    return agent


def _back(agent: Agent) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("admin:agents_agent_change", args=[agent.pk]) + "#agent-widget-keys")


def _refusal(error: ApiError) -> str:
    details = "; ".join(f"{field}: {' '.join(problems)}" for field, problems in (error.issues or {}).items())
    return f"{error.message} ({details})" if details and details not in error.message else error.message


@require_POST
def widget_key_add(request: HttpRequest, object_id: str) -> HttpResponse:
    """A new widget key for the origins typed one a line (or separated by commas or spaces)."""
    agent = _agent(request, object_id)
    origins = request.POST.get("allowed_origins", "").replace(",", " ").split()
    try:
        key = widget_key_create(
            organization=agent.organization, agent_id=str(agent.pk), body={"allowedOrigins": origins}
        )
    except ApiError as error:
        messages.error(request, f"No widget key added: {_refusal(error)}")
    else:
        messages.success(request, f"Widget key {key.key} added: paste its snippet into the pages of its origins.")
    return _back(agent)


@require_POST
def widget_key_remove(request: HttpRequest, object_id: str, key_id: str) -> HttpResponse:
    agent = _agent(request, object_id)
    try:
        widget_key_delete(organization=agent.organization, agent_id=str(agent.pk), key_id=key_id)
    except ApiError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, "Widget key deleted: pages that use it can start no new call.")
    return _back(agent)


# admin_view: staff login required (else a redirect to the login page), CSRF checked, never cached.
urlpatterns = [
    path(
        "agents/agent/<path:object_id>/widget-keys/add",
        admin.site.admin_view(widget_key_add),
        name="agent-widget-key-add",
    ),
    path(
        "agents/agent/<path:object_id>/widget-keys/<str:key_id>/delete",
        admin.site.admin_view(widget_key_remove),
        name="agent-widget-key-delete",
    ),
]
