"""Dashboard: agents (read-only), and through agents/tools/admin.py MCP servers, custom tools and MCP
tool selections. Django's admin autodiscovery imports only `agents.admin`, so this module imports the
tools pages: without it they are not registered."""

from django.contrib import admin

import agents.tools.admin  # noqa: F401 - registers the MCP server, custom tool and tool selection pages
from agents.models import Agent


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ("name", "organization", "status", "agent_type", "language", "voice_name", "updated_at")
    list_filter = ("status", "agent_type", "language", "prompt_type", "ambient_sound", "organization__plan")
    search_fields = ("name", "id", "organization__name", "organization__id")
    readonly_fields = ("id", "created_at", "updated_at")
    exclude = ("server_secret",)
    list_select_related = ("organization",)

    def has_add_permission(self, request) -> bool:
        return False  # agents are created through the public API, where every rule is enforced

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # read-only in the dashboard: edits go through the API's rules
