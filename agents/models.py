import copy
import uuid
from typing import Any

from django.db import models

from accounts.models import Organization
from kit.crypto import EncryptedJSONField, EncryptedTextField

BUILTIN_VOICES = ("eve", "ara", "rex", "sal", "leo")


class AgentType(models.TextChoices):
    STATIC = "static"
    WEBHOOK = "webhook"
    HTTP = "http"


class AgentStatus(models.TextChoices):
    DRAFT = "draft"
    ACTIVE = "active"
    INACTIVE = "inactive"


class DisclosureTemplate(models.TextChoices):
    STANDARD = "standard"
    ASSISTANT_OF = "assistant_of"
    NAMED_AGENT = "named_agent"
    VIRTUAL_ASSISTANT = "virtual_assistant"
    NAMED_VIRTUAL_ASSISTANT = "named_virtual_assistant"


class BackgroundSound(models.TextChoices):
    NONE = "none"
    KEYBOARD = "keyboard"


class AmbientSound(models.TextChoices):
    NONE = "none"
    OFFICE1 = "office1"
    OFFICE2 = "office2"


class PromptType(models.TextChoices):
    STATIC = "static"
    DYNAMIC = "dynamic"


class GreetingType(models.TextChoices):
    STATIC = "static"
    DYNAMIC = "dynamic"
    NONE = "none"


def redact_pii_off() -> str:
    """The default of Agent.redact_pii: nothing redacted."""
    return "off"


# An agent's analysisPlan when none is given (agents/analysis_plan.py validates and normalizes plans).
DEFAULT_ANALYSIS_PLAN: dict[str, Any] = {
    "summary": {"enabled": True, "prompt": None},
    "structuredData": {"enabled": False, "schema": None, "prompt": None},
    "successEvaluation": {"enabled": False, "rubric": None, "scale": "pass-fail"},
}


def default_analysis_plan() -> dict[str, Any]:
    return copy.deepcopy(DEFAULT_ANALYSIS_PLAN)


# An agent's voicemail handling on outbound calls (answering-machine detection) when none is given.
DEFAULT_VOICEMAIL: dict[str, Any] = {"detection": "off", "action": "hang-up", "message": ""}
# Caller keypad input: consecutive key presses within timeoutMs (or up to the terminator) form one turn.
DEFAULT_KEYPAD: dict[str, Any] = {"enabled": True, "timeoutMs": 2000, "terminator": "#"}


# How the caller's speech while the agent speaks is told apart (agents/interruption.py): adaptive waits for
# words that are not a backchannel; backchannels None is the agent language's default list.
DEFAULT_INTERRUPTION: dict[str, Any] = {"mode": "adaptive", "minWords": 1, "backchannels": None, "resumeAfterMs": 400}
# How transfer_call passes the caller to a person (agents/transfer.py): cold hands the call over at once;
# warm calls the person first and briefs them (a summary by the brain, or the static message).
DEFAULT_TRANSFER: dict[str, Any] = {"mode": "cold", "briefing": "summary", "message": "", "ringTimeoutSeconds": 30}


def default_voicemail() -> dict[str, Any]:
    return copy.deepcopy(DEFAULT_VOICEMAIL)


def default_keypad() -> dict[str, Any]:
    return copy.deepcopy(DEFAULT_KEYPAD)


def default_interruption() -> dict[str, Any]:
    return copy.deepcopy(DEFAULT_INTERRUPTION)


def default_transfer() -> dict[str, Any]:
    return copy.deepcopy(DEFAULT_TRANSFER)


# The range of an agent's maxDurationSeconds (30 s to 4 h; default 30 minutes).
MAX_DURATION_RANGE = (30, 14400)
MAX_DURATION_DEFAULT = 1800


class Agent(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=200)
    status = models.CharField(max_length=10, choices=AgentStatus.choices, default=AgentStatus.DRAFT)
    agent_type = models.CharField(max_length=10, choices=AgentType.choices, default=AgentType.WEBHOOK)
    language = models.CharField(max_length=16, default="en-US")
    ai_identity_disclosure_template_id = models.CharField(
        max_length=32, choices=DisclosureTemplate.choices, default=DisclosureTemplate.STANDARD
    )
    voice_name = models.CharField(max_length=32, default="eve")
    server_url = models.CharField(max_length=2048, null=True, blank=True)
    server_headers = models.JSONField(default=dict, blank=True)
    server_secret = EncryptedTextField(null=True, blank=True)
    handoff_phone_number = models.CharField(max_length=16, null=True, blank=True)
    background_sound = models.CharField(max_length=10, choices=BackgroundSound.choices, default=BackgroundSound.NONE)
    ambient_sound = models.CharField(max_length=10, choices=AmbientSound.choices, default=AmbientSound.NONE)
    ambient_sound_volume = models.FloatField(default=0.25)
    ambient_sound_ducking = models.BooleanField(default=True)
    prompt_type = models.CharField(max_length=10, choices=PromptType.choices, default=PromptType.STATIC)
    identity = models.TextField(blank=True, default="")
    instructions = models.TextField(blank=True, default="")
    greeting_type = models.CharField(max_length=10, choices=GreetingType.choices, default=GreetingType.NONE)
    static_greeting = models.TextField(null=True, blank=True)
    # Endings: the end_call system tool is offered unless turned off; calls end politely at maxDurationSeconds.
    end_call_enabled = models.BooleanField(default=True)
    max_duration_seconds = models.PositiveIntegerField(default=MAX_DURATION_DEFAULT)
    # Calls are recorded in stereo (caller left, agent right) and stored (calls/recordings.py).
    recording_enabled = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # Set by the services on every change (optimistic concurrency); never auto_now.
    updated_at = models.DateTimeField()
    # What is stored of its calls with personal data replaced by placeholders (kit/redaction.py):
    # "off", "all" or a list of categories.
    redact_pii = models.JSONField(default=redact_pii_off, blank=True)
    # What is worked out of each call once it has ended (agents/analysis_plan.py; stored normalized).
    analysis_plan = models.JSONField(default=default_analysis_plan, blank=True)
    # The IANA time zone of {{now}} in prompts (and the default of a call batch's window).
    time_zone = models.CharField(max_length=64, default="UTC")
    # Outbound calls: answering-machine detection and what to do on a machine (stored normalized).
    voicemail = models.JSONField(default=default_voicemail, blank=True)
    # Caller keypad (DTMF) gathering (stored normalized).
    keypad = models.JSONField(default=default_keypad, blank=True)
    # What the caller's speech does while the agent speaks: cut it, or not (stored normalized).
    interruption = models.JSONField(default=default_interruption, blank=True)
    # How transfer_call passes the caller to a person: cold or warm, and the warm briefing (stored normalized).
    transfer = models.JSONField(default=default_transfer, blank=True)
    # The other agents of the organization a call may be handed to, and when (agents/handoffs.py; stored
    # normalized: [{agentId, description, context, lastN}]).
    handoffs = models.JSONField(default=list, blank=True)
    # The fixed steps that run the conversation, or null (agents/flows.py; stored normalized:
    # {start, nodes: {<id>: node}} with every key of each node).
    flow = models.JSONField(null=True, blank=True, default=None)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["organization", "status"]), models.Index(fields=["organization", "created_at"])]

    def __str__(self) -> str:
        return self.name


class HttpMethod(models.TextChoices):
    GET = "GET"
    POST = "POST"
    PUT = "PUT"
    DELETE = "DELETE"
    PATCH = "PATCH"
    HEAD = "HEAD"
    OPTIONS = "OPTIONS"


class ToolOnError(models.TextChoices):
    RETURN_ERROR = "return_error"
    RETURN_EMPTY = "return_empty"


class AgentTool(models.Model):
    """A custom tool of an agent: delivered to the agent's serverUrl (webhook) or its own toolUrl (http)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=64)
    description = models.TextField(blank=True, default="")
    parameter_schema = models.JSONField(default=dict)
    response_schema = models.JSONField(null=True, blank=True)
    timeout_ms = models.PositiveIntegerField(default=10000)
    on_error = models.CharField(max_length=16, choices=ToolOnError.choices, default=ToolOnError.RETURN_ERROR)
    enabled = models.BooleanField(default=True)
    tool_url = models.CharField(max_length=2048, null=True, blank=True)
    tool_method = models.CharField(max_length=8, choices=HttpMethod.choices, default=HttpMethod.POST)
    tool_headers = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = "custom tool"
        constraints = [models.UniqueConstraint(fields=["agent", "name"], name="agent_tool_name_unique")]

    def __str__(self) -> str:
        return self.name


class McpServerStatus(models.TextChoices):
    ACTIVE = "active"
    INACTIVE = "inactive"
    ERROR = "error"


class McpAuthType(models.TextChoices):
    NONE = "none"
    BEARER = "bearer"
    HEADERS = "headers"
    OAUTH_CLIENT_CREDENTIALS = "oauth_client_credentials"


class McpServer(models.Model):
    """A tool server an organization connected in the dashboard (MCP, Streamable HTTP transport)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="mcp_servers")
    name = models.CharField(max_length=200, help_text="Integration name")
    url = models.CharField(max_length=2048)
    status = models.CharField(max_length=10, choices=McpServerStatus.choices, default=McpServerStatus.INACTIVE)
    auth_type = models.CharField(max_length=32, choices=McpAuthType.choices, default=McpAuthType.NONE)
    # Secret headers, bearer token or OAuth client credentials; encrypted, never returned by the API.
    credentials = EncryptedJSONField(null=True, blank=True)
    tools = models.JSONField(
        default=list, blank=True, help_text="Cached tool definitions: name, description, inputSchema"
    )
    last_synced_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        verbose_name = "MCP server"
        constraints = [models.UniqueConstraint(fields=["organization", "name"], name="mcp_server_name_unique")]

    def __str__(self) -> str:
        return self.name


class McpToolSelection(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="mcp_tool_selections")
    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="selections")
    tool_name = models.CharField(max_length=128)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = "MCP tool selection"
        constraints = [models.UniqueConstraint(fields=["agent", "server", "tool_name"], name="mcp_selection_unique")]

    def __str__(self) -> str:
        return self.tool_name
