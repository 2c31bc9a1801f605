"""Metrics an operator can watch: every Prometheus metric of the service in one module, and the
`GET /metrics` endpoint that exposes them (docs/operations/metrics.md).

A kit module: it imports no domain app; the engine, the limits and the task code call the small
functions below at a few points. Metric names start with `voiceagent_`.

Several Daphne processes on one host share one scrape through prometheus-client's multi-process
mode: with PROMETHEUS_MULTIPROC_DIR set (before the process starts; the directory emptied before the
first process starts, and `mark_process_dead(pid)` called when one exits), every process writes its
samples there and the endpoint collects them all with MultiProcessCollector. Without it, the
process's own registry is served.

Protection: with METRICS_TOKEN set, a scrape needs `Authorization: Bearer <token>` (401 otherwise);
without it, only loopback clients are answered (403 otherwise; the client's address as
kit/client_address.py resolves it), and behind a TLS proxy (BEHIND_TLS_PROXY) nobody is (401).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hmac
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

from django.conf import settings
from django.core import checks
from django.http import HttpRequest, HttpResponse, JsonResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily

from kit.client_address import client_address, is_loopback
from kit.secret_strength import secret_weakness

logger = logging.getLogger(__name__)

MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"  # prometheus-client's own variable
MIN_TOKEN_CHARS = 16
# Tokens that appear in the documentation and examples: never accepted in production.
EXAMPLE_TOKENS = frozenset({"change-me", "changeme", "metrics-token", "example-metrics-token", "secret-token"})
LOOP_LAG_INTERVAL_SECONDS = 0.5

# What a caller perceives spans ~0.1-3 s; the buckets are finest where turn-taking is tuned.
LATENCY_BUCKETS = (0.025, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0)
TOOL_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

# The turn latency stages, in the order a turn goes through them (names used as the `stage` label and,
# in camelCase with "Ms", in a call's stored `latency`).
TURN_STAGES = ("end_of_turn", "recognition", "first_token", "first_audio", "total")

LIVE_SESSIONS = Gauge(
    "voiceagent_live_sessions",
    "Voice sessions running in the process (a socket with its conversation engine), by channel and engine.",
    ["channel", "engine"],
    multiprocess_mode="livesum",
)
LIVE_CALLS = Gauge(
    "voiceagent_live_calls",
    "Calls open (an `active` call record held by a running session), by channel and engine.",
    ["channel", "engine"],
    multiprocess_mode="livesum",
)
TURN_LATENCY = Histogram(
    "voiceagent_turn_latency_seconds",
    "Caller turn to agent answer, by stage: end_of_turn (caller silent until the turn is taken), recognition "
    "(turn taken until its words are known), first_token (words known until the model's first output), "
    "first_audio (first output until the first audio byte goes to the caller), total (caller silent, or "
    "the turn taken when that is unknown, until the first audio byte).",
    ["stage", "engine"],
    buckets=LATENCY_BUCKETS,
)
TOOL_CALLS = Histogram(
    "voiceagent_tool_call_duration_seconds",
    "Tool calls by kind (webhook, http, mcp, search_knowledge, transfer_call, end_call, unknown) and outcome "
    "(success, error, timeout, cancelled: the result was no longer needed).",
    ["kind", "outcome"],
    buckets=TOOL_BUCKETS,
)
PROVIDER_ERRORS = Counter(
    "voiceagent_provider_errors_total",
    "Provider failures during conversations, by provider role (llm, asr, tts, speech_to_speech, prompt) and "
    "whether retrying can help (permanent=false) or not (permanent=true).",
    ["provider", "permanent"],
)
LOOP_LAG = Histogram(
    "voiceagent_event_loop_lag_seconds",
    f"How late the serving event loop runs a timer, sampled every {LOOP_LAG_INTERVAL_SECONDS} s while sessions run.",
    buckets=LAG_BUCKETS,
)
RATE_LIMIT_REFUSALS = Counter(
    "voiceagent_rate_limit_refusals_total",
    "Requests and sessions refused by a limit, by limit name.",
    ["limit"],
)
# What the caller's speech over the agent was (agents/interruption.py; docs/guides/conversation.md).
INTERRUPTION_KINDS = ("real", "false", "backchannel", "ignored")
INTERRUPTIONS = Counter(
    "voiceagent_interruptions_total",
    "Caller speech over the agent, by kind: real (words that cut the agent), false (cut the agent but held no "
    "words), backchannel (an acknowledgement that did not cut it), ignored (noise that did not cut it); and engine.",
    ["kind", "engine"],
)
RESPONSE_TIMEOUTS = Counter(
    "voiceagent_response_timeouts_total",
    "Caller turns whose answer did not begin within RESPONSE_TIMEOUT_SECONDS (the agent said it was still "
    "working, or apologized), by engine.",
    ["engine"],
)
QUEUE_DEPTH = Gauge(
    "voiceagent_queue_depth",
    "Work waiting or running in the process's own queues (webhooks: tool deliveries in flight; tasks: "
    "background work run in-process when no broker is configured).",
    ["queue"],
    multiprocess_mode="livesum",
)


def multiprocess() -> bool:
    return bool(os.environ.get(MULTIPROCESS_DIR_ENV))


def _forget_this_process() -> None:
    from prometheus_client import multiprocess as mp

    mp.mark_process_dead(os.getpid())


if multiprocess():
    # A process that exits leaves the live gauges (livesum): its sessions no longer count. A process
    # that is killed cannot do this; the directory is emptied before the processes start (docs/operations/metrics.md).
    atexit.register(_forget_this_process)


# --- what the rest of the service calls ------------------------------------------------------------


def record_rate_limit_refusal(limit: str) -> None:
    """One request or session refused by the limit named `limit` (e.g. "api_key", "sessions")."""
    RATE_LIMIT_REFUSALS.labels(limit=limit).inc()


def record_provider_error(provider: str, *, permanent: bool) -> None:
    PROVIDER_ERRORS.labels(provider=provider, permanent="true" if permanent else "false").inc()


def record_interruption(kind: str, engine: str) -> None:
    """One stretch of caller speech over the agent, by `kind` (INTERRUPTION_KINDS)."""
    if kind not in INTERRUPTION_KINDS:
        raise ValueError(f"Unknown interruption kind {kind!r}; the kinds are {', '.join(INTERRUPTION_KINDS)}.")
    INTERRUPTIONS.labels(kind=kind, engine=engine).inc()


def record_response_timeout(engine: str) -> None:
    """One caller turn that met RESPONSE_TIMEOUT_SECONDS without an answer begun."""
    RESPONSE_TIMEOUTS.labels(engine=engine).inc()


def record_tool_call(*, kind: str, outcome: str, seconds: float) -> None:
    TOOL_CALLS.labels(kind=kind, outcome=outcome).observe(max(0.0, seconds))


def record_turn(stages_ms: Mapping[str, float | None], *, engine: str) -> None:
    """One caller turn's latency stages (milliseconds, None: not measured for this engine or turn)."""
    for stage in TURN_STAGES:
        value = stages_ms.get(stage)
        if value is not None:
            TURN_LATENCY.labels(stage=stage, engine=engine).observe(max(0.0, value) / 1000)


@contextlib.contextmanager
def pending(queue: str) -> Iterator[None]:
    """Count one piece of work in `voiceagent_queue_depth{queue}` while it waits or runs."""
    gauge = QUEUE_DEPTH.labels(queue=queue)
    gauge.inc()
    try:
        yield
    finally:
        gauge.dec()


class Live:
    """A session (and its call once open) counted in the live gauges; `close` is idempotent. The
    first live session of an event loop starts its lag sampler, the last one stops it. Not `counted`
    (an agent test's session: no socket, no call record), it counts nowhere."""

    def __init__(self, *, channel: str, engine: str, counted: bool = True) -> None:
        self.channel, self.engine, self.counted = channel, engine, counted
        self._session = False
        self._call = False

    def session_started(self) -> None:
        if self.counted and not self._session:
            self._session = True
            LIVE_SESSIONS.labels(channel=self.channel, engine=self.engine).inc()
            _loop_watch(+1)

    def call_opened(self) -> None:
        if self.counted and not self._call:
            self._call = True
            LIVE_CALLS.labels(channel=self.channel, engine=self.engine).inc()

    def close(self) -> None:
        if self._call:
            self._call = False
            LIVE_CALLS.labels(channel=self.channel, engine=self.engine).dec()
        if self._session:
            self._session = False
            LIVE_SESSIONS.labels(channel=self.channel, engine=self.engine).dec()
            _loop_watch(-1)


# --- event-loop lag ----------------------------------------------------------------------------------

# Per event loop: the running sessions and the sampler task (referenced here until it ends).
_watchers: dict[asyncio.AbstractEventLoop, tuple[int, asyncio.Task[None] | None]] = {}


def _loop_watch(change: int) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    for closed in [known for known in _watchers if known.is_closed()]:
        del _watchers[closed]
    count, task = _watchers.get(loop, (0, None))
    count = max(0, count + change)
    if count and (task is None or task.done()):
        task = loop.create_task(_sample_lag(loop), name="metrics-event-loop-lag")
    elif not count and task is not None:
        task.cancel()  # no session left: a test's loop (or an idle process) keeps no task behind
        task = None
    _watchers[loop] = (count, task)


async def _sample_lag(loop: asyncio.AbstractEventLoop) -> None:
    while True:
        asked = loop.time()
        await asyncio.sleep(LOOP_LAG_INTERVAL_SECONDS)
        LOOP_LAG.observe(max(0.0, loop.time() - asked - LOOP_LAG_INTERVAL_SECONDS))


# --- collection at scrape time -----------------------------------------------------------------------


class _TaskQueueCollector:
    """`voiceagent_task_queue_length{queue}`: the Celery queues' length in Redis, read at scrape time
    (only when REDIS_URL names the broker; a Redis failure leaves the metric out of that scrape)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        url = getattr(settings, "REDIS_URL", "")
        if not url:
            return
        family = GaugeMetricFamily(
            "voiceagent_task_queue_length", "Tasks waiting in the Celery broker (Redis), by queue.", labels=["queue"]
        )
        queue = str(getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "celery"))
        try:
            import redis

            client = redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)
            try:
                family.add_metric([queue], float(client.llen(queue)))
            finally:
                client.close()
        except Exception as exc:  # noqa: BLE001 - a scrape must not fail because Redis is away
            logger.warning("metrics: the task queue length could not be read (%s)", type(exc).__name__)
            return
        yield family


_task_queue_collector = _TaskQueueCollector()


def exposition() -> bytes:
    """The text exposition of every metric (all processes' in multi-process mode)."""
    if multiprocess():
        from prometheus_client import multiprocess as mp

        registry = CollectorRegistry()
        mp.MultiProcessCollector(registry)
    else:
        registry = CollectorRegistry()
        registry.register(_DefaultRegistry())
    registry.register(_task_queue_collector)
    return generate_latest(registry)


class _DefaultRegistry:
    """The process's own registry as one collector (so that scrape-time collectors join per scrape)."""

    def collect(self) -> Iterator[Any]:
        yield from REGISTRY.collect()


# --- the endpoint ------------------------------------------------------------------------------------


def _refused(status: int, message: str, code: str) -> JsonResponse:
    response = JsonResponse({"error": message, "code": code}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


def metrics_view(request: HttpRequest) -> HttpResponse:
    """GET /metrics: the Prometheus text exposition, for METRICS_TOKEN's bearer or a loopback client."""
    if request.method not in ("GET", "HEAD"):
        return _refused(405, "Method not allowed", "method_not_allowed")
    token = str(getattr(settings, "METRICS_TOKEN", "") or "")
    if token:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        # Constant-time: the comparison does not tell how much of a guess was right.
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
            return _refused(401, "A valid metrics token is required", "unauthorized")
    elif getattr(settings, "BEHIND_TLS_PROXY", False):
        # Every request comes through the proxy: no client is "loopback" there.
        return _refused(401, "Behind a TLS proxy /metrics needs METRICS_TOKEN", "unauthorized")
    elif not is_loopback(client_address(request)):
        return _refused(403, "Metrics are served to loopback clients only (or set METRICS_TOKEN)", "forbidden")
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)


def check_metrics_token(app_configs: object = None, **kwargs: object) -> list[checks.CheckMessage]:
    """With DEBUG off, a weak METRICS_TOKEN is refused (kit/secret_strength.py, at least MIN_TOKEN_CHARS),
    and an empty one behind a TLS proxy is warned about (/metrics then answers 401 to everyone)."""
    token = str(getattr(settings, "METRICS_TOKEN", "") or "")
    if settings.DEBUG:
        return []
    if not token:
        if not getattr(settings, "BEHIND_TLS_PROXY", False):
            return []
        return [
            checks.Warning(
                "METRICS_TOKEN is empty behind a TLS proxy: /metrics answers 401 to every scrape.",
                hint='Set one: python -c "import secrets; print(secrets.token_urlsafe(32))" (docs/operations/metrics.md).',
                id="voiceagent.W101",
            )
        ]
    problem = secret_weakness(token, min_bytes=MIN_TOKEN_CHARS, examples=EXAMPLE_TOKENS)
    if problem:
        return [
            checks.Error(
                f"METRICS_TOKEN {problem}: use at least {MIN_TOKEN_CHARS} random characters "
                '(python -c "import secrets; print(secrets.token_urlsafe(32))"), or leave it empty to serve '
                "/metrics to loopback clients only.",
                id="voiceagent.E101",
            )
        ]
    return []
