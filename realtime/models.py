"""Realtime session state that must hold across server processes."""

import uuid

from django.db import models

from accounts.models import Organization
from agents.models import Agent


class UsedSessionToken(models.Model):
    """One row per session token that opened a socket. The primary key makes a token single-use for
    every process sharing the database: a second insert of the same id fails."""

    token_id = models.CharField(primary_key=True, max_length=32)
    organization_id = models.UUIDField()
    agent_id = models.UUIDField()
    used_at = models.DateTimeField()
    # After this moment the token is refused as expired anyway, so the row may be purged.
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-used_at"]

    def __str__(self) -> str:
        return self.token_id


class SessionVariables(models.Model):
    """The per-call `variables` and `metadata` given when a session token was issued (docs/guides/variables.md), and the session's `modality` and `events` (docs/guides/typed-sessions.md), kept here under
    the token's id, never in the token or its URL: the socket that spends the token takes them (and
    deletes the row) for its call. A row of a token never spent is purged once the token has expired."""

    token_id = models.CharField(primary_key=True, max_length=32)
    variables = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(null=True, blank=True)
    # "audio" (spoken) or "text" (typed: no audio either way); calls.models.CallModality values.
    modality = models.CharField(max_length=5, default="audio")
    # Extra event kinds the socket sends: ["tool"] for tool.call / tool.result.
    events = models.JSONField(default=list, blank=True)
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return self.token_id


# --- Agent tests (docs/guides/agent-tests.md) ---------------------------------------------------------------


class AgentTestKind(models.TextChoices):
    REPLY = "reply"  # scripted caller turns; expectations on the replies
    TOOL_CALL = "tool_call"  # scripted caller turns; expectations on the tool calls
    CONVERSATION = "conversation"  # a simulated caller (persona, goal, maxTurns) driven by the model


class AgentTest(models.Model):
    """One test of an agent: what the caller says (or who the simulated caller is), the tools' mocked
    results, and what is expected. Stored as validated by realtime/agent_tests (camelCase JSON parts)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="agent_tests")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="tests")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=12, choices=AgentTestKind.choices)
    # reply / tool_call: [{"user": text}, ...]; conversation: may be empty (then `caller` drives it).
    turns = models.JSONField(default=list, blank=True)
    # conversation: {"persona": str, "goal": str, "maxTurns": int}; null otherwise.
    caller = models.JSONField(null=True, blank=True)
    variables = models.JSONField(default=dict, blank=True)
    # [{"tool": name, "when": {"argumentsInclude": {...}} | null, "result": any | absent, "error": str | absent}]
    tool_mocks = models.JSONField(default=list, blank=True)
    # {"toolCalls", "noToolCalls", "replyContains", "replyMatches", "transferred", "ended", "criteria"}
    expect = models.JSONField(default=dict, blank=True)
    tags = models.JSONField(default=list, blank=True)
    # Unmocked tools may reach the network (otherwise an unmocked tool call is an `error` verdict).
    allow_real_tools = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["agent", "created_at"], name="agenttest_agent_created")]

    def __str__(self) -> str:
        return self.name


class TestRunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"  # every attempt has a verdict (pass, fail or error)
    FAILED = "failed"  # the run itself could not be carried out (see `error`)
    CANCELLED = "cancelled"  # stopped by POST /test-runs/{id}/cancel (attempts stored before it are kept)


UNFINISHED_TEST_RUN = (TestRunStatus.QUEUED, TestRunStatus.RUNNING)


class TestRun(models.Model):
    """A run of some of an agent's tests, each `repeat` times, in the background (realtime/agent_tests)."""

    __test__ = False  # not a pytest test class

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="test_runs")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="test_runs")
    status = models.CharField(max_length=10, choices=TestRunStatus.choices, default=TestRunStatus.QUEUED)
    # The tests it runs (ids, in order) as chosen at creation (testIds, a tag, or all).
    test_ids = models.JSONField(default=list)
    tag = models.CharField(max_length=64, blank=True, default="")
    repeat = models.PositiveSmallIntegerField(default=1)
    # Counts of the attempts stored (TestAttempt rows, one per attempt: a run's rows are only ever added).
    passed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    errored = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A worker's lease on a queued or running run (another may take it over once expired).
    claimed_at = models.DateTimeField(null=True, blank=True, editable=False)
    # When a worker last took an attempt of it: the worker serves the organization served longest ago first.
    served_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["agent", "-created_at"], name="testrun_agent_created"),
            models.Index(fields=["status"], name="testrun_status"),
        ]

    def __str__(self) -> str:
        return f"test run {self.id} ({self.status})"


class TestAttempt(models.Model):
    """One attempt of one test in a run (its result as the API shows it), written once when the attempt is
    over. The `number`-th attempt (from 0) of the test at `position` in the run's test_ids."""

    __test__ = False  # not a pytest test class

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(TestRun, on_delete=models.CASCADE, related_name="attempts")
    position = models.PositiveIntegerField()
    number = models.PositiveSmallIntegerField()
    # The test as it was when attempted (it may be changed or deleted since).
    test_id = models.UUIDField()
    name = models.CharField(max_length=200, blank=True, default="")
    kind = models.CharField(max_length=20, blank=True, default="")
    verdict = models.CharField(max_length=10)
    # {"verdict", "reasons", "transcript", "toolCalls", "latencyMs", "criteria", "transferred", "ended", "durationMs"}
    result = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "position", "number"]
        constraints = [
            models.UniqueConstraint(fields=["run", "position", "number"], name="testattempt_once"),
        ]

    def __str__(self) -> str:
        return f"attempt {self.number} of test {self.position} in run {self.run_id} ({self.verdict})"


# --- Widget keys (docs/widget.md; their rules and views: realtime/widget/) ----------------------------------


class WidgetKey(models.Model):
    """A publishable key (`pk_...`) that opens realtime sessions with one agent, from the pages whose origins
    it lists (WidgetKeyOrigin). Public by design: it goes in a page's <script> tag. Deleting it (the row is
    gone) refuses it at once."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="widget_keys")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="widget_keys")
    key = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["agent", "created_at"], name="widgetkey_agent_created")]

    def __str__(self) -> str:
        return self.key


class WidgetKeyOrigin(models.Model):
    """One origin (scheme://host[:port], lower case, no default port) a widget key may be used from; a row
    each, so that a CORS preflight (which carries no key) finds whether any key lists an origin by index."""

    widget_key = models.ForeignKey(WidgetKey, on_delete=models.CASCADE, related_name="origins")
    origin = models.CharField(max_length=300, db_index=True)
    position = models.PositiveSmallIntegerField()

    class Meta:
        ordering = ["widget_key", "position"]
        constraints = [
            models.UniqueConstraint(fields=["widget_key", "origin"], name="widgetkeyorigin_unique_origin"),
        ]

    def __str__(self) -> str:
        return self.origin
