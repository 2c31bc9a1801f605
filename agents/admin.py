"""Dashboard: agents (read-only), and through agents/tools/admin.py MCP servers, custom tools and MCP
tool selections. Django's admin autodiscovery imports only `agents.admin`, so this module imports the
tools pages: without it they are not registered."""

from django.contrib import admin

import agents.tools.admin  # noqa: F401 - registers the MCP server, custom tool and tool selection pages
from agents.disclosure import disclosure_for
from agents.models import Agent, AmbientSound
from agents.services import ambient_sound_playable


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ("name", "organization", "status", "agent_type", "language", "voice_name", "updated_at")
    list_filter = ("status", "agent_type", "language", "prompt_type", "ambient_sound", "organization__plan")
    search_fields = ("name", "id", "organization__name", "organization__id")
    readonly_fields = (
        "id",
        "created_at",
        "updated_at",
        "ambient_sound_now",
        "disclosure_spoken",
        "server_header_names",
    )
    # serverHeaders hold credentials of the customer's server (API keys, basic auth), as tool headers do
    # (agents/tools/admin.py): staff see which headers are sent, never their values.
    exclude = ("server_secret", "server_headers")
    list_select_related = ("organization",)

    def has_add_permission(self, request) -> bool:
        return False  # agents are created through the public API, where every rule is enforced

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # read-only in the dashboard: edits go through the API's rules

    def get_fields(self, request, obj=None) -> list[str]:
        # Each effective setting right below the saved setting it explains.
        after = {
            "ambient_sound_now": "ambient_sound_ducking",
            "disclosure_spoken": "ai_identity_disclosure_template_id",
            "server_header_names": "server_url",
        }
        fields = [field for field in super().get_fields(request, obj) if field not in after]
        for field, anchor in after.items():
            fields.insert(fields.index(anchor) + 1 if anchor in fields else len(fields), field)
        return fields

    @admin.display(description="Ambient sound now")
    def ambient_sound_now(self, obj: Agent) -> str:
        """What a call hears with the current plan (a downgrade keeps the selection saved but silent)."""
        if obj.ambient_sound == AmbientSound.NONE:
            return "none"
        if not ambient_sound_playable(obj):
            return f"{obj.ambient_sound} saved but not played: the plan ({obj.organization.plan.name}) has no ambient sounds"
        ducking = "ducked" if obj.ambient_sound_ducking else "not ducked"
        return f"{obj.ambient_sound} at {round(obj.ambient_sound_volume * 100)} %, {ducking}"

    @admin.display(description="Server headers")
    def server_header_names(self, obj: Agent) -> str:
        names = sorted(str(name) for name in (obj.server_headers or {}))
        return ", ".join(f"{name}: (hidden)" for name in names) if names else "none"

    @admin.display(description="AI-identity disclosure spoken")
    def disclosure_spoken(self, obj: Agent) -> str:
        disclosure = disclosure_for(
            template_id=obj.ai_identity_disclosure_template_id, language=obj.language, agent_name=obj.name
        )
        fallback = "" if disclosure.language == obj.language else f"; no {obj.language} templates, English is spoken"
        return f"\u201c{disclosure.text}\u201d (version {disclosure.version}{fallback})"
