from django.contrib import admin

from realtime.models import UsedSessionToken


@admin.register(UsedSessionToken)
class UsedSessionTokenAdmin(admin.ModelAdmin):
    """Read-only trace of realtime session tokens that opened a socket (kept a few minutes)."""

    list_display = ("token_id", "agent_id", "organization_id", "used_at", "expires_at")
    search_fields = ("=token_id", "=agent_id")

    def has_add_permission(self, request: object) -> bool:
        return False

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False
