"""Dashboard: connect MCP tool servers (the form really connects) and refresh them; create and change
custom tools (through the tool services); a read-only list of MCP tool selections (chosen on the agent
page). Loaded by agents/admin.py (`import agents.tools.admin`). A tool's test call runs through the
conversation's tool dispatcher, a floor up: realtime/admin.py extends the tool page with it."""

from __future__ import annotations

import json
from functools import partial
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from agents.dashboard import ServiceModelForm, header_lines, warn_destination, wire_sources
from agents.models import AgentTool, McpAuthType, McpServer, McpServerStatus, McpToolSelection
from agents.tools import services
from agents.tools.serializers import ToolWriteSerializer, parse_header_lines
from kit import egress
from kit.admin_forms import StorableJSONField
from kit.errors import ApiError
from kit.fields import parse
from kit.validation import url_problem

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldsetSpec

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
        assert data is not None  # ModelForm.clean returns cleaned_data (the stubs allow None for overrides)
        auth_type = data.get("auth_type")
        url = data.get("url") or ""
        problem = url and (url_problem(url) or egress.destination_problem(url))
        if problem:
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

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        server = self.get_object(request, unquote(object_id))
        if server is not None:
            warn_destination(request, server.url)
        return super().change_view(request, object_id, form_url, extra_context)

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


class JsonTextField(StorableJSONField):
    """JSON in a text box, shown indented."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, forms.fields.InvalidJSONInput) or value is None:
            return value
        return json.dumps(value, ensure_ascii=False, indent=2)


# Wire name of an issue -> form field.
TOOL_FORM_FIELD_OF = {
    **wire_sources(ToolWriteSerializer),
    "toolHeaders": "new_tool_headers",
    "headers": "new_tool_headers",
}


class AgentToolForm(ServiceModelForm):
    """A custom tool, saved through tool_create / tool_replace after the API's request serializer: a valid
    form is a saved tool, an invalid one changed nothing. toolHeaders are write-only."""

    parameter_schema = JsonTextField(
        label="Parameter schema",
        required=False,
        widget=forms.Textarea(attrs={"rows": 10, "class": "vLargeTextField"}),
        help_text='JSON Schema of the arguments object, for example {"type": "object", "properties": {"order_id": '
        '{"type": "string"}}, "required": ["order_id"]}. Blank: no arguments.',
    )
    response_schema = JsonTextField(
        label="Response schema",
        required=False,
        widget=forms.Textarea(attrs={"rows": 5, "class": "vLargeTextField"}),
        help_text="Optional JSON Schema the reply must match (a reply that does not is a failure).",
    )
    new_tool_headers = forms.CharField(
        label="New tool headers",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="http agents: one 'Name: value' per line, sent with each request to the tool URL. Values are "
        "never shown again; leave blank to keep the stored headers.",
    )
    clear_tool_headers = forms.BooleanField(label="Remove the stored tool headers", required=False)
    issue_fields = TOOL_FORM_FIELD_OF

    class Meta:
        model = AgentTool
        fields = ("agent", *(name for name in services.TOOL_FIELDS if name != "tool_headers"))
        labels = {
            "timeout_ms": "Timeout (ms)",
            "on_error": "On error",
            "tool_url": "Tool URL",
            "tool_method": "Tool method",
        }
        help_texts = {
            "name": "The function name the model calls: 1 to 64 letters, digits, _ or -.",
            "description": "Tells the model when to call the tool.",
            "timeout_ms": "1000 to 30000.",
            "on_error": "return_error: the model hears what went wrong; return_empty: it gets {}.",
            "tool_url": "http agents only (webhook agents' tools go to the agent's server URL).",
        }
        widgets = {"tool_url": forms.URLInput(attrs={"size": 60}), "description": forms.Textarea(attrs={"rows": 3})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "tool_url" in self.fields:
            self.fields["tool_url"].required = False

    def _wire(self) -> dict[str, Any]:
        data = self.cleaned_data
        body = {wire: data[source] for wire, source in wire_sources(ToolWriteSerializer).items() if source in data}
        if body.get("parameterSchema") is None:
            body.pop("parameterSchema", None)  # the API's default: no arguments
        body["description"] = body.get("description") or ""
        if data.get("clear_tool_headers"):
            body["toolHeaders"] = {}
        elif data.get("new_tool_headers", "").strip():
            body["toolHeaders"] = parse_header_lines(data["new_tool_headers"].splitlines())
        elif not self.instance._state.adding:
            body["toolHeaders"] = AgentTool.objects.get(pk=self.instance.pk).tool_headers  # kept as they are
        return body

    def save_through_service(self) -> AgentTool:
        data = parse(ToolWriteSerializer, self._wire())
        if self.instance._state.adding:
            agent = self.cleaned_data["agent"]
            return services.tool_create(organization=agent.organization, agent_id=str(agent.pk), data=data)
        agent = self.instance.agent
        return services.tool_replace(
            organization=agent.organization, agent_id=str(agent.pk), tool_id=str(self.instance.pk), data=data
        )


@admin.register(AgentTool)
class AgentToolAdmin(admin.ModelAdmin):
    """Custom tools, created and changed through the tool services (the API's rules), and tested from the
    page with sample arguments through the conversation's own tool dispatcher."""

    form = AgentToolForm
    list_display = ("name", "agent", "enabled", "timeout_ms", "tool_method", "tool_url")
    list_filter = ("enabled", "on_error", "tool_method")
    search_fields = ("name", "id", "agent__name", "agent__id")
    list_select_related = ("agent",)
    autocomplete_fields = ("agent",)
    readonly_fields = ("agent", "tool_header_names", "created_at", "updated_at")

    def get_readonly_fields(self, request: HttpRequest, obj: AgentTool | None = None) -> tuple[str, ...]:
        # The agent is chosen when the tool is created; a tool never moves to another agent.
        return ("tool_header_names",) if obj is None else self.readonly_fields

    def get_fieldsets(self, request: HttpRequest, obj: AgentTool | None = None) -> _FieldsetSpec:
        headers = (
            ["new_tool_headers", "clear_tool_headers"]
            if obj is None
            else ["tool_header_names", "new_tool_headers", "clear_tool_headers"]
        )
        record: _FieldsetSpec = [] if obj is None else [("Record", {"fields": ["created_at", "updated_at"]})]
        return [
            (None, {"fields": ["agent", "name", "description", "enabled"]}),
            ("Arguments and reply", {"fields": ["parameter_schema", "response_schema", "timeout_ms", "on_error"]}),
            ("http agents", {"fields": ["tool_url", "tool_method", *headers]}),
            *record,
        ]

    @admin.display(description="Tool headers")
    def tool_header_names(self, obj: AgentTool) -> str:
        return header_lines(obj.tool_headers)  # may hold API keys of the tool's service: names only

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        tool = self.get_object(request, unquote(object_id))
        if tool is not None:
            warn_destination(request, tool.tool_url)
        return super().change_view(request, object_id, form_url, extra_context)

    def save_model(self, request: HttpRequest, obj: AgentTool, form: AgentToolForm, change: bool) -> None:
        """Nothing left to do: the form's validation saved the tool through the service."""

    def delete_model(self, request: HttpRequest, obj: AgentTool) -> None:
        agent = obj.agent
        services.tool_delete(organization=agent.organization, agent_id=str(agent.pk), tool_id=str(obj.pk))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[AgentTool]) -> None:
        for tool in queryset.select_related("agent__organization"):
            self.delete_model(request, tool)


@admin.register(McpToolSelection)
class McpToolSelectionAdmin(admin.ModelAdmin):
    """Read-only: selections are chosen on the agent page (Choose MCP tools) or with PUT
    /public/v1/agents/{id}/mcp-tools."""

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
