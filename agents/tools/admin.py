"""Dashboard: connect MCP tool servers (the form really connects), refresh them, and read-only views of
custom tools and MCP tool selections. Loaded by agents/admin.py (`import agents.tools.admin`)."""

from __future__ import annotations

from functools import partial
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest

from agents.models import AgentTool, McpAuthType, McpServer, McpServerStatus, McpToolSelection
from agents.tools import services
from agents.tools.serializers import parse_header_lines
from voiceagent.errors import ApiError
from voiceagent.validation import url_problem

SECRET_FIELDS = ("bearer_token", "secret_headers", "token_url", "client_id", "client_secret", "scope")


class McpServerForm(forms.ModelForm):
    """Secrets are write-only: never rendered back; left blank on an edit, the stored ones are kept."""

    connect_as = forms.ChoiceField(
        choices=[(McpServerStatus.ACTIVE, "active"), (McpServerStatus.INACTIVE, "inactive")],
        initial=McpServerStatus.ACTIVE,
        label="Status after a successful connection",
        help_text="If the server cannot be reached, the status becomes error with the reason.",
    )
    bearer_token = forms.CharField(required=False, widget=forms.PasswordInput, help_text="Auth type bearer")
    secret_headers = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Auth type headers: one 'Name: value' per line (not shown again after saving)",
    )
    token_url = forms.CharField(required=False, help_text="Auth type oauth_client_credentials: token endpoint")
    client_id = forms.CharField(required=False, widget=forms.PasswordInput)
    client_secret = forms.CharField(required=False, widget=forms.PasswordInput)
    scope = forms.CharField(required=False)

    class Meta:
        model = McpServer
        fields = ("organization", "name", "url", "auth_type")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.instance._state.adding and self.instance.status == McpServerStatus.INACTIVE:
            self.fields["connect_as"].initial = McpServerStatus.INACTIVE

    def _entered_credentials(self, auth_type: str) -> dict[str, Any] | None:
        data = self.cleaned_data
        if auth_type == McpAuthType.BEARER and data.get("bearer_token"):
            return {"token": data["bearer_token"]}
        if auth_type == McpAuthType.HEADERS and data.get("secret_headers", "").strip():
            return {"headers": parse_header_lines(data["secret_headers"].splitlines())}
        if auth_type == McpAuthType.OAUTH_CLIENT_CREDENTIALS and any(
            data.get(f) for f in ("token_url", "client_id", "client_secret")
        ):
            return {
                "tokenUrl": data.get("token_url"),
                "clientId": data.get("client_id"),
                "clientSecret": data.get("client_secret"),
                "scope": data.get("scope") or None,
            }
        return None

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        auth_type = data.get("auth_type")
        problem = url_problem(data.get("url") or "")
        if data.get("url") and problem:
            self.add_error("url", problem)
        if not auth_type:
            return data
        try:
            credentials = self._entered_credentials(auth_type)
            stored = not self.instance._state.adding and self.instance.auth_type == auth_type
            if credentials is None and stored:
                credentials = McpServer.objects.get(pk=self.instance.pk).credentials
            data["credentials"] = services.mcp_credentials_clean(auth_type=auth_type, credentials=credentials)
        except ApiError as error:
            raise forms.ValidationError(error.message) from None
        return data


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):
    form = McpServerForm
    list_display = ("name", "organization", "status", "auth_type", "tool_count", "last_synced_at")
    list_filter = ("status", "auth_type")
    search_fields = ("name", "id", "organization__name", "organization__id")
    list_select_related = ("organization",)
    readonly_fields = ("status", "tool_names", "last_synced_at", "last_error", "created_at", "updated_at")
    actions = ("connect_and_refresh",)
    fieldsets = (
        (None, {"fields": ("organization", "name", "url", "auth_type", "connect_as")}),
        ("Credentials (encrypted; never shown)", {"fields": SECRET_FIELDS}),
        ("Connection", {"fields": readonly_fields}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[McpServer]:
        return super().get_queryset(request).defer("credentials")

    @admin.display(description="Tools")
    def tool_count(self, obj: McpServer) -> int:
        return len(obj.tools)

    @admin.display(description="Cached tools")
    def tool_names(self, obj: McpServer) -> str:
        return ", ".join(tool.get("name", "?") for tool in obj.tools) or "-"

    def save_model(self, request: HttpRequest, obj: McpServer, form: McpServerForm, change: bool) -> None:
        data = form.cleaned_data
        services.mcp_server_configure(
            server=obj,
            organization=data["organization"],
            name=data["name"],
            url=data["url"],
            auth_type=data["auth_type"],
            credentials=data["credentials"],
        )
        # Connect once the admin's transaction has committed: no database lock is held over the network.
        transaction.on_commit(partial(self._connect, request, obj, data["connect_as"]))

    def _connect(self, request: HttpRequest, server: McpServer, status: str | None) -> None:
        services.mcp_server_sync(server=server, status=status)
        if server.status == McpServerStatus.ERROR:
            self.message_user(request, f"{server.name}: could not connect: {server.last_error}", messages.ERROR)
        else:
            names = ", ".join(tool["name"] for tool in server.tools) or "no tools"
            self.message_user(request, f"{server.name}: connected ({server.status}); tools: {names}", messages.SUCCESS)

    @admin.action(description="Connect and refresh tools")
    def connect_and_refresh(self, request: HttpRequest, queryset: QuerySet[McpServer]) -> None:
        for server in McpServer.objects.filter(pk__in=queryset.values("pk")):
            self._connect(request, server, None)


@admin.register(AgentTool)
class AgentToolAdmin(admin.ModelAdmin):
    """Read-only: tools are managed through the public API, where every rule is enforced."""

    list_display = ("name", "agent", "enabled", "timeout_ms", "tool_method", "tool_url")
    list_filter = ("enabled", "on_error", "tool_method")
    search_fields = ("name", "id", "agent__name", "agent__id")
    exclude = ("tool_headers",)  # may hold API keys of the tool's service
    list_select_related = ("agent",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(McpToolSelection)
class McpToolSelectionAdmin(admin.ModelAdmin):
    """Read-only: selections are managed with PUT /public/v1/agents/{id}/mcp-tools."""

    list_display = ("tool_name", "server", "agent", "enabled")
    list_filter = ("enabled",)
    search_fields = ("tool_name", "agent__name", "server__name")
    list_select_related = ("agent", "server")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[McpToolSelection]:
        return super().get_queryset(request).defer("server__credentials")
