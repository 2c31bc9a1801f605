"""Settings, read only from the environment (django-environ).

With nothing set, the service runs on its embedded default: a SQLite file under var/, an in-memory
channel layer and Celery tasks run in-process. Every variable is documented in docs/configuration.md
(voiceagent/tests/test_docs.py fails on one that is not).
"""

import secrets
import ssl
import sys
from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from kit.client_address import parse_networks
from kit.storage import storage_from_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"
VAR_DIR.mkdir(exist_ok=True)

env = environ.Env()


def _secret_key() -> str:
    """SECRET_KEY from the environment; the embedded default keeps a random one in var/ (git-ignored)."""
    value = env.str("SECRET_KEY", default="")
    if value:
        return value
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


def _choice(name: str, default: str, allowed: tuple[str, ...]) -> str:
    value = env.str(name, default=default)
    if value not in allowed:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    return value


SECRET_KEY = _secret_key()
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",
    "voiceagent.apps.DashboardAdminConfig",  # django.contrib.admin with the dashboard's site
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "accounts",
    "agents",
    "telephony",
    "knowledge",
    "calls",
    "realtime",
    # Deployment security (docs/operations/security.md): the secret checks, and admin login throttling.
    "voiceagent.apps.VoiceagentConfig",
    "axes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "kit.errors.JsonErrorMiddleware",
    # Deployment security: the Content-Security-Policy header, and admin login lockouts (axes: last).
    "kit.csp.ContentSecurityPolicyMiddleware",
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "voiceagent.urls"
ASGI_APPLICATION = "voiceagent.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "voiceagent" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- database -------------------------------------------------------------------------------
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}")}
_db = DATABASES["default"]
if _db["ENGINE"] == "django.db.backends.sqlite3":
    # IMMEDIATE transactions take the write lock at BEGIN, so read-check-write sequences (plan
    # allowance, optimistic concurrency) are serialized on SQLite as row locks do on PostgreSQL.
    _db.setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
    # Connections are kept (per thread) instead of opened for every request and every database call of
    # a live call: opening one (with the PRAGMAs above) was 6 % of a loaded voice server's CPU.
    _db["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=300)
    # A file (not shared-cache memory) so that tests with threads see real locking.
    _db.setdefault("TEST", {})["NAME"] = str(VAR_DIR / f"test-{env.str('PYTEST_XDIST_WORKER', default='main')}.sqlite3")
elif _db["ENGINE"] == "django.db.backends.postgresql":
    # No JIT compilation: it pays off only for long analytic queries. Once the calls table is large, the
    # planner costs the agent list's per-agent count subqueries high enough to JIT-compile the query, and
    # compiling took ~320 ms for a query that runs in ~7 ms (bench/api_load.py: 1,000 agents, 101,000
    # calls). An `options` parameter in DATABASE_URL comes after this one, so it can turn JIT back on.
    _options = _db.setdefault("OPTIONS", {})
    _options["options"] = f"-c jit=off {_options.get('options', '')}".strip()
    if env.bool("DATABASE_POOL", default=True):
        _db.setdefault("OPTIONS", {})["pool"] = {"min_size": 1, "max_size": env.int("DATABASE_POOL_SIZE", default=20)}
        # PostgreSQL restarts (bench/faults/postgres_restart.py): every pooled connection is dead then.
        # Each is checked before it is lent (one empty round trip), so the first request after a restart
        # does not get a dead one, and a request waits DATABASE_POOL_TIMEOUT seconds at most (psycopg's
        # default is 30) for a connection during an outage before it fails.
        _db["CONN_HEALTH_CHECKS"] = True  # Django passes psycopg_pool's check_connection to the pool
        # While the server is down the pool retries with a doubling delay (1, 2, 4, 8... s until
        # reconnect_timeout, 5 min), so it could keep failing for as long as the outage lasted after the
        # server is back. A try every second (with psycopg's 10% jitter) instead: one connection attempt
        # per second per process.
        import psycopg_pool.base

        psycopg_pool.base.AttemptWithBackoff.DELAY_BACKOFF = 1.0
        _db["OPTIONS"]["pool"]["timeout"] = env.float("DATABASE_POOL_TIMEOUT", default=5.0)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- redis, channels, celery -----------------------------------------------------------------
REDIS_URL = env.str("REDIS_URL", default="")
if REDIS_URL:
    # Reads must outlast channels-redis's 5-second blocking pop: with the client's 5-second read timeout
    # every socket consumer idle on the layer for 5 s crashed (redis TimeoutError, close 1011).
    _layer_host = {"address": REDIS_URL, "socket_timeout": 30}
    # --- sockets: a Redis restart (issue 17) ---
    # After a restart every pooled connection is dead; without a retry the first command on each
    # (a status callback's group_send) failed. One immediate retry reconnects.
    from redis.exceptions import ConnectionError as _RedisConnectionError

    _layer_host["retry_on_error"] = [_RedisConnectionError]
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [_layer_host]}}
    }
    CELERY_BROKER_URL = REDIS_URL
    CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    # Tasks run in-process. Celery's eager path still takes a producer from the pool (to round-trip the
    # arguments through the serializer), so a connection object is made: the in-process memory transport,
    # which opens no socket. Its host is named because kombu warns "No hostname was supplied" otherwise.
    CELERY_BROKER_URL = "memory://localhost/"
    CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BEAT_SCHEDULE: dict = {}

# --- background work (kit/background.py, docs/operations/upkeep.md) ------------------------------------
# Where this process's background work runs: "inprocess" (threads of each serving process: the upkeep
# sweep, event delivery, the batch scheduler, the outbound dispatcher, and a pool for ingestion, analyses
# and test runs; the default without a broker), "celery" (with REDIS_URL: Celery workers and beat; the
# default there), "inline" (tests: queued jobs in the caller's thread, no loop) or "off" (this process runs
# no shared loop: another process, worker or cron job does). The process's own heartbeat and agent-log
# writer run in every mode but "inline".
BACKGROUND_WORK = _choice(
    "BACKGROUND_WORK",
    "celery" if REDIS_URL and not CELERY_TASK_ALWAYS_EAGER else "inprocess",
    ("inprocess", "celery", "inline", "off"),
)


# Deprecated (read for one release, with a warning at start-up, kit/background.py): per-feature switches
# that, when set, decide for their feature instead of BACKGROUND_WORK. Unset: None.
def _deprecated_worker(name: str) -> str | None:
    value = env.str(name, default="") or None
    if value not in (None, "inprocess", "celery", "off"):
        raise ImproperlyConfigured(f"{name} (deprecated: use BACKGROUND_WORK) must be inprocess, celery or off")
    return value


OUTBOUND_WORKER = _deprecated_worker("OUTBOUND_WORKER")
EVENTS_WORKER = _deprecated_worker("EVENTS_WORKER")
BATCH_SCHEDULER = _deprecated_worker("BATCH_SCHEDULER")
TEST_RUNS_WORKER = _deprecated_worker("TEST_RUNS_WORKER")
CALL_ANALYSIS_WORKER = _deprecated_worker("CALL_ANALYSIS_WORKER")
KNOWLEDGE_INGEST_INLINE = env.bool("KNOWLEDGE_INGEST_INLINE", default=None)
TEST_RUNS_INLINE = env.bool("TEST_RUNS_INLINE", default=None)
CALL_ANALYSIS_INLINE = env.bool("CALL_ANALYSIS_INLINE", default=None)

# --- limits: cache, API rate limits, uploads (docs/operations/limits.md) ---------------------------------
# The cache holds the per-API-key rate-limit buckets: Redis (shared by every server process) with
# REDIS_URL, this process's memory otherwise. Short socket timeouts: when Redis is unreachable the rate
# limit lets requests through (with a warning) instead of holding them.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "kit.cache.SharedRedisCache",  # one Redis client per process (kit/cache.py)
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "va",
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "voiceagent"}}
# Per-API-key rate limits from the organization's plan (api_requests_per_second, api_burst); false: off.
API_RATE_LIMITS = env.bool("API_RATE_LIMITS", default=True)
API_RATE_LIMIT_CACHE = "default"
# Widget sessions (POST /public/v1/widget/sessions, docs/widget.md): token buckets per widget key and per
# client address (kit/client_address.py), in the same cache; 0 a minute: no limit. API_RATE_LIMITS=false
# turns them off too.
WIDGET_KEY_SESSIONS_PER_MINUTE = env.int("WIDGET_KEY_SESSIONS_PER_MINUTE", default=60)
WIDGET_KEY_SESSIONS_BURST = env.int("WIDGET_KEY_SESSIONS_BURST", default=20)
WIDGET_ADDRESS_SESSIONS_PER_MINUTE = env.int("WIDGET_ADDRESS_SESSIONS_PER_MINUTE", default=10)
WIDGET_ADDRESS_SESSIONS_BURST = env.int("WIDGET_ADDRESS_SESSIONS_BURST", default=5)
if min(WIDGET_KEY_SESSIONS_PER_MINUTE, WIDGET_ADDRESS_SESSIONS_PER_MINUTE) < 0:
    raise ImproperlyConfigured(
        "WIDGET_KEY_SESSIONS_PER_MINUTE and WIDGET_ADDRESS_SESSIONS_PER_MINUTE must be 0 or more"
    )
if min(WIDGET_KEY_SESSIONS_BURST, WIDGET_ADDRESS_SESSIONS_BURST) < 1:
    raise ImproperlyConfigured("WIDGET_KEY_SESSIONS_BURST and WIDGET_ADDRESS_SESSIONS_BURST must be at least 1")
# Knowledge documents one server process handles at once: uploads being received plus documents queued or
# indexing on its background worker; more are answered 429 with Retry-After, before their body is read
# when the process is already at the bound (knowledge/admission.py).
KNOWLEDGE_MAX_CONCURRENT_UPLOADS = env.int("KNOWLEDGE_MAX_CONCURRENT_UPLOADS", default=3)
if KNOWLEDGE_MAX_CONCURRENT_UPLOADS < 1:
    raise ImproperlyConfigured("KNOWLEDGE_MAX_CONCURRENT_UPLOADS must be at least 1")
# Knowledge documents an organization may have being processed (`processing`, every process and worker,
# plus its uploads being received); one more upload is answered 429 with Retry-After. Below the process's
# bound, so that one organization never holds every slot of a process for long.
KNOWLEDGE_MAX_PROCESSING_PER_ORGANIZATION = env.int("KNOWLEDGE_MAX_PROCESSING_PER_ORGANIZATION", default=2)
if KNOWLEDGE_MAX_PROCESSING_PER_ORGANIZATION < 1:
    raise ImproperlyConfigured("KNOWLEDGE_MAX_PROCESSING_PER_ORGANIZATION must be at least 1")

# --- REST framework and OpenAPI ---------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["accounts.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["kit.renderers.JsonRenderer"],
    # JSON only: any other Content-Type is a 415. The knowledge upload adds multipart on its own view. A
    # string that cannot be stored (a lone surrogate, NUL) is a 400 naming its field (kit/parsers.py).
    "DEFAULT_PARSER_CLASSES": ["kit.parsers.JsonParser"],
    "EXCEPTION_HANDLER": "kit.errors.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_PAGINATION_CLASS": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Voice Agent Service API",
    "DESCRIPTION": "Public REST API of the voice agent service. Authenticate with `Authorization: Bearer <API key>`. "
    "Request bodies are JSON (`Content-Type: application/json`) except the knowledge upload, which also "
    'accepts multipart/form-data. Every error answers `{"error": "<message>"}`, with `code`, `issues` and '
    "other fields where the operation documents them.",
    "VERSION": "1.0.0",
    # 3.1: request bodies are described with full JSON Schema (propertyNames, if/then, const), so that the rules
    # the server checks before looking at stored data are all in the schema.
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/public/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "AgentStatusEnum": "agents.models.AgentStatus",
        "PhoneNumberStatusEnum": "telephony.models.PhoneNumberStatus",
        "CallStatusEnum": "calls.models.CallStatus",
        "DocumentStatusEnum": "knowledge.models.DocumentStatus",
        "DocumentTypeEnum": "knowledge.models.DocumentType",
        "ToolInvocationStatusEnum": "calls.models.ToolInvocationStatus",
        "McpServerStatusEnum": "agents.models.McpServerStatus",
        "McpAuthTypeEnum": "agents.models.McpAuthType",
        "CallChannelEnum": "calls.models.CallChannel",
        "CallModalityEnum": "calls.models.CallModality",
        "MessageRoleEnum": "calls.models.MessageRole",
        "AudioEncodingEnum": ["pcm16"],
        "EventTypeEnum": "calls.models.EventType",
        "DeliveryStatusEnum": "calls.models.DeliveryStatus",
        "BudgetPeriodEnum": "calls.models.BudgetPeriod",
        "BudgetActionEnum": "calls.models.BudgetAction",
        "CostProductEnum": "calls.models.CostProduct",
        "CostUnitEnum": "calls.models.CostUnit",
        "LlmUsageProductEnum": ["llm", "speech_to_speech"],
        "AgentTestKindEnum": ["reply", "tool_call", "conversation"],  # realtime.models.AgentTestKind
    },
    "TAGS": [
        {"name": "Agents", "description": "Voice agents: prompt, voice, greeting, sounds and phone routing."},
        {"name": "Tools", "description": "Custom tools of an agent, called through its serverUrl or their toolUrl."},
        {"name": "MCP", "description": "Connected tool servers and each agent's selection of their tools."},
        {"name": "Knowledge", "description": "Documents an agent searches with search_knowledge."},
        {"name": "Phone numbers", "description": "The organization's numbers and their assignment to agents."},
        {"name": "Organization", "description": "The organization of the API key and its outbound destinations."},
        {"name": "Calls", "description": "Call history with transcripts, tool invocations and usage."},
        {"name": "Logs", "description": "Agents' runtime logs of the last 24 hours."},
        {
            "name": "Webhooks",
            "description": "Call events (call.started, call.handoff, call.transfer.*, call.ended, call.analyzed) and "
            "budget.threshold: endpoints, deliveries.",
        },
        {"name": "Realtime", "description": "Short-lived tokens for browser and app voice sessions."},
        {
            "name": "Widget",
            "description": "Publishable widget keys of an agent, and the sessions a web page opens with one.",
        },
        {"name": "Call batches", "description": "Campaigns: an agent calls a list of people within a window."},
        {
            "name": "Costs",
            "description": "The price book that turns each call's measured quantities into its cost ledger.",
        },
        {
            "name": "Budgets",
            "description": "Spending limits per UTC day or month: threshold events, and new calls refused once spent.",
        },
        {
            "name": "Agent tests",
            "description": "Tests of an agent: scripted or simulated callers, mocked tools, expectations; their runs.",
        },
    ],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "kit.schema.complete_public_api",
    ],
    # The docs page uses the bundled Swagger UI: nothing is fetched from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- security and secrets ---------------------------------------------------------------------
# Fernet keys (comma-separated, newest first) for secrets stored in the database. Unset: derived
# from SECRET_KEY, so changing SECRET_KEY then makes stored secrets unreadable.
FIELD_ENCRYPTION_KEYS = env.list("FIELD_ENCRYPTION_KEYS", default=[])
# Networks (CIDR) that outbound requests (webhooks, http tools, MCP) may reach even though they are
# loopback, private or link-local. Empty: only public addresses.
OUTBOUND_ALLOWED_NETWORKS = env.list("OUTBOUND_ALLOWED_NETWORKS", default=[])
# A PEM file of certificate authorities that outbound HTTPS trusts besides the system's bundle (a company CA
# in front of internal tool servers). Checked here: a missing or unreadable file stops the start, not a call.
OUTBOUND_CA_FILE = env.str("OUTBOUND_CA_FILE", default="")
if OUTBOUND_CA_FILE:
    try:
        ssl.create_default_context(cafile=OUTBOUND_CA_FILE)
    except (OSError, ssl.SSLError) as error:
        raise ImproperlyConfigured(f"OUTBOUND_CA_FILE must name a readable PEM file of certificates: {error}") from None

# --- deployment security: TLS, HSTS, cookies, CSP, admin login throttle ----------------------------
# docs/operations/security.md. Behind a TLS-terminating proxy (BEHIND_TLS_PROXY=true, as deploy/env.example
# sets) every HTTPS setting is on unless its own variable turns it off. Without it (`make run`, the test
# suite: plain http on 127.0.0.1) they are off, so the embedded default keeps working over http.
BEHIND_TLS_PROXY = env.bool("BEHIND_TLS_PROXY", default=False)
# The proxy says which scheme the client used; nginx (deploy/nginx.conf) passes an upstream balancer's on.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if BEHIND_TLS_PROXY else None
# The proxies whose X-Forwarded-For is believed (CIDRs, comma-separated; kit/client_address.py): the client
# is the right-most hop that is not one of them. Empty (the default): forwarded headers are ignored and the
# connection's address is the client. docker-compose: the network nginx reaches `web` from.
TRUSTED_PROXIES = env.list("TRUSTED_PROXIES", default=[])
try:
    parse_networks(TRUSTED_PROXIES, name="TRUSTED_PROXIES")
except ValueError as error:
    raise ImproperlyConfigured(str(error)) from None
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=BEHIND_TLS_PROXY)
# Load balancers probe over plain http: their health checks are answered, never redirected.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^livez$", *env.list("SECURE_REDIRECT_EXEMPT", default=[])]
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000 if BEHIND_TLS_PROXY else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=BEHIND_TLS_PROXY)
# Preloading is a commitment browsers remember for months (hstspreload.org): only when asked for.
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=BEHIND_TLS_PROXY)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=BEHIND_TLS_PROXY)
# Content-Security-Policy of every HTML page (kit/csp.py); "report-only" sends it as
# Content-Security-Policy-Report-Only (browsers report violations without blocking), "off" sends none.
CSP_MODE = _choice("CSP_MODE", "enforce", ("enforce", "report-only", "off"))
# Admin login throttle (django-axes): after ADMIN_LOGIN_FAILURE_LIMIT wrong passwords for one username
# from one address, that pair is locked out for ADMIN_LOGIN_COOLOFF_MINUTES (also the right password).
AUTHENTICATION_BACKENDS = [
    "voiceagent.login_throttle.AdminLoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.int("ADMIN_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.float("ADMIN_LOGIN_COOLOFF_MINUTES", default=15.0))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = True  # lockouts are logged (WARNING "AXES: Locking out {username, ip_address...}")
AXES_SENSITIVE_PARAMETERS = ["password"]
# Failed logins are kept (dashboard: Access failures), at most 1,000 per username.
AXES_ENABLE_ACCESS_FAILURE_LOG = True
# The address a lockout is keyed on: the one rule of kit/client_address.py (TRUSTED_PROXIES), not axes' own.
AXES_CLIENT_IP_CALLABLE = "kit.client_address.client_ip"


# --- telephony ---------------------------------------------------------------------------------
def _base_url(name: str, default: str) -> str:
    """An absolute http(s) URL without query or fragment, kept without a trailing slash."""
    from urllib.parse import urlsplit

    value = env.str(name, default=default).strip().rstrip("/")
    if value:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
            raise ImproperlyConfigured(
                f"{name} must be an http(s) URL such as https://voice.example.com, not {value!r}"
            )
    return value


# The address callers' carriers reach this service at (e.g. https://voice.example.com). Voice webhook
# signatures are checked against it and media-stream URLs (wss:// for https) are built from it, never
# from the request's Host. Empty: phone calls are refused.
PUBLIC_BASE_URL = _base_url("PUBLIC_BASE_URL", "")
# Twilio's REST API (number configuration, live-call transfer and hang-up); tests point it elsewhere.
TWILIO_API_BASE_URL = _base_url("TWILIO_API_BASE_URL", "https://api.twilio.com")
TWILIO_API_TIMEOUT_SECONDS = env.float("TWILIO_API_TIMEOUT_SECONDS", default=10.0)
# Telnyx's Call Control API (accounts of provider telnyx).
TELNYX_API_BASE_URL = _base_url("TELNYX_API_BASE_URL", "https://api.telnyx.com/v2")
TELNYX_API_TIMEOUT_SECONDS = env.float("TELNYX_API_TIMEOUT_SECONDS", default=10.0)
# The SIP endpoint (manage.py sipserver): HOST:PORT to bind (empty: none), the RTP port range, and the
# address to advertise behind NAT (empty: the bound one).
SIP_BIND = env.str("SIP_BIND", default="")
SIP_RTP_PORTS = env.str("SIP_RTP_PORTS", default="10000-20000")
SIP_PUBLIC_ADDRESS = env.str("SIP_PUBLIC_ADDRESS", default="")
# A call the carrier reports ended is left this long to the process holding its media stream; still
# open after that (the process died), the status callback finishes the call record itself.
TELEPHONY_CALL_END_GRACE_SECONDS = env.float("TELEPHONY_CALL_END_GRACE_SECONDS", default=3.0)

# --- outbound calls (telephony/outbound/, docs/guides/outbound-calls.md) ---------------------------------------
# Numbers or prefixes (E.164, comma-separated) outbound calls may never be placed to (400 at POST /calls).
OUTBOUND_CALL_BLOCKLIST = [
    item.strip() for item in env.str("OUTBOUND_CALL_BLOCKLIST", default="").split(",") if item.strip()
]
# BACKGROUND_WORK=inprocess: how often the dispatcher looks for queued calls when nothing wakes it (a
# commit or an ended call does); 0: no dispatcher in this process. With celery: the task
# telephony.dispatch_outbound, kicked on commit and every few seconds by beat.
OUTBOUND_POLL_SECONDS = env.float("OUTBOUND_POLL_SECONDS", default=5.0)
# Calls one dispatcher round asks the carrier for at once (each is one REST request).
OUTBOUND_PLACE_THREADS = max(1, env.int("OUTBOUND_PLACE_THREADS", default=8))
# How long the callee's phone rings before the carrier gives up (Twilio's Timeout, 5-600 s).
OUTBOUND_RING_TIMEOUT_SECONDS = env.int("OUTBOUND_RING_TIMEOUT_SECONDS", default=60)
# A placed call with no news from the carrier (still queued or ringing) this long is failed by the upkeep.
OUTBOUND_STUCK_AFTER_SECONDS = env.int("OUTBOUND_STUCK_AFTER_SECONDS", default=600)
if not 5 <= OUTBOUND_RING_TIMEOUT_SECONDS <= 600 or OUTBOUND_STUCK_AFTER_SECONDS < OUTBOUND_RING_TIMEOUT_SECONDS:
    raise ImproperlyConfigured(
        "OUTBOUND_RING_TIMEOUT_SECONDS must be 5-600 and OUTBOUND_STUCK_AFTER_SECONDS at least as long"
    )
CELERY_BEAT_SCHEDULE["telephony-dispatch-outbound"] = {"task": "telephony.dispatch_outbound", "schedule": 5.0}

# --- realtime and providers -------------------------------------------------------------------
REALTIME_WS_URL = env.str("REALTIME_WS_URL", default="")
REALTIME_TOKEN_SECRET = env.str("REALTIME_TOKEN_SECRET", default="")
# Caller speech over the agent longer than this interrupts it (barge-in); shorter is a backchannel.
REALTIME_BARGE_IN_MS = env.int("REALTIME_BARGE_IN_MS", default=300)
# Caller speech that starts while the answer to their last turn is being prepared, or before it has
# played this long, goes on with that turn: the answer is dropped and the whole turn answered once.
REALTIME_CONTINUE_TURN_MS = env.int("REALTIME_CONTINUE_TURN_MS", default=500)
# How far agent audio may run ahead of real time at the listener (what a barge-in can still cut).
REALTIME_OUTPUT_LEAD_MS = env.int("REALTIME_OUTPUT_LEAD_MS", default=200)
# Every caller turn the engine takes ends in an answer, an action or a spoken apology within this bound:
# when no answer has begun by then, the agent says it is still working while a tool runs (`still_working`),
# or apologizes (`slow_answer`) when the model hangs; the call goes on (voiceagent_response_timeouts_total).
RESPONSE_TIMEOUT_SECONDS = env.float("RESPONSE_TIMEOUT_SECONDS", default=10.0)
if not 1 <= RESPONSE_TIMEOUT_SECONDS <= 120:
    raise ImproperlyConfigured(f"RESPONSE_TIMEOUT_SECONDS must be 1-120 seconds, not {RESPONSE_TIMEOUT_SECONDS:g}")
# Load the speech models when the ASGI app starts (off: on the first session).
REALTIME_PRELOAD = env.bool("REALTIME_PRELOAD", default=True)
# A session whose client sends no audio for this long is ended (close code 4408), its call completed.
REALTIME_INPUT_IDLE_SECONDS = env.int("REALTIME_INPUT_IDLE_SECONDS", default=60)
# Typed input on a browser socket (`input_text`, docs/reference/realtime-protocol.md "Typed input budget"): a turn has at
# most REALTIME_TEXT_MAX_CHARS characters; a socket sends REALTIME_TEXT_PER_SECOND turns a second after a
# burst of REALTIME_TEXT_BURST (a token bucket on the session's clock); a call takes at most
# REALTIME_TEXT_MAX_MESSAGES_PER_CALL typed turns and REALTIME_TEXT_MAX_BYTES_PER_CALL bytes of them (UTF-8).
# Past these a turn is refused with an `error` and the call goes on; a client whose refused input_text
# messages reach REALTIME_TEXT_FLOOD_CLOSE within 10 s is flooding: its socket is closed (4429).
REALTIME_TEXT_MAX_CHARS = env.int("REALTIME_TEXT_MAX_CHARS", default=2000)
REALTIME_TEXT_PER_SECOND = env.float("REALTIME_TEXT_PER_SECOND", default=1.0)
REALTIME_TEXT_BURST = env.int("REALTIME_TEXT_BURST", default=5)
REALTIME_TEXT_MAX_MESSAGES_PER_CALL = env.int("REALTIME_TEXT_MAX_MESSAGES_PER_CALL", default=200)
REALTIME_TEXT_MAX_BYTES_PER_CALL = env.int("REALTIME_TEXT_MAX_BYTES_PER_CALL", default=100_000)
REALTIME_TEXT_FLOOD_CLOSE = env.int("REALTIME_TEXT_FLOOD_CLOSE", default=50)
if (
    min(REALTIME_TEXT_MAX_CHARS, REALTIME_TEXT_BURST, REALTIME_TEXT_MAX_MESSAGES_PER_CALL, REALTIME_TEXT_FLOOD_CLOSE)
    < 1
    or REALTIME_TEXT_PER_SECOND <= 0
    or REALTIME_TEXT_MAX_BYTES_PER_CALL < REALTIME_TEXT_MAX_CHARS
):
    raise ImproperlyConfigured(
        "REALTIME_TEXT_* must be positive, and REALTIME_TEXT_MAX_BYTES_PER_CALL at least REALTIME_TEXT_MAX_CHARS"
    )

# --- WebRTC sessions (realtime/webrtc/, docs/webrtc.md) -----------------------------------------
# The addresses this process offers as its ICE host candidates (comma-separated IPs); empty: the machine's
# own non-loopback addresses (aioice's rule). The tests set 127.0.0.1.
WEBRTC_HOST_ADDRESSES = env.list("WEBRTC_HOST_ADDRESSES", default=[])
# STUN and TURN servers (stun:, turn:, turns: URLs) given to clients with each session and used by the server.
WEBRTC_ICE_SERVERS = env.list("WEBRTC_ICE_SERVERS", default=[])
# coturn's use-auth-secret (static-auth-secret): each session's TURN credentials are made from it, valid
# WEBRTC_TURN_TTL_SECONDS.
WEBRTC_TURN_SECRET = env.str("WEBRTC_TURN_SECRET", default="")
WEBRTC_TURN_TTL_SECONDS = env.int("WEBRTC_TURN_TTL_SECONDS", default=3600)


def _webrtc_settings_problem() -> str | None:
    import ipaddress
    import re

    for address in WEBRTC_HOST_ADDRESSES:
        try:
            ipaddress.ip_address(address)
        except ValueError:
            return f"WEBRTC_HOST_ADDRESSES: {address!r} is not an IP address"
    for url in WEBRTC_ICE_SERVERS:
        if not re.fullmatch(r"(stun|turns?):[^\s?]+(\?transport=(udp|tcp))?", url):
            return f"WEBRTC_ICE_SERVERS: {url!r} is not a stun:, turn: or turns: URL (turn:host:3478?transport=udp)"
    if any(url.startswith("turn") for url in WEBRTC_ICE_SERVERS) and not WEBRTC_TURN_SECRET:
        return "WEBRTC_ICE_SERVERS names a TURN server: set WEBRTC_TURN_SECRET (coturn's static-auth-secret)"
    if not 60 <= WEBRTC_TURN_TTL_SECONDS <= 86400:
        return "WEBRTC_TURN_TTL_SECONDS must be 60-86400 seconds"
    return None


if (_webrtc_problem := _webrtc_settings_problem()) is not None:
    raise ImproperlyConfigured(_webrtc_problem)
# Caller silence that ends a turn (the end-of-turn window of the voice activity detector).
VAD_END_SILENCE_MS = env.int("VAD_END_SILENCE_MS", default=500)
# Quick end of turn (the offline recognizer, which can tell the words so far): after this much silence
# the words heard so far are read; when they read as a finished sentence the turn ends at once, and
# when they do not ("my number is", "four five six", "and") it ends after VAD_UNFINISHED_SILENCE_MS
# (instead of VAD_END_SILENCE_MS). 0 turns it off: every turn ends after VAD_END_SILENCE_MS.
VAD_QUICK_END_SILENCE_MS = env.int("VAD_QUICK_END_SILENCE_MS", default=300)
VAD_UNFINISHED_SILENCE_MS = env.int("VAD_UNFINISHED_SILENCE_MS", default=700)
# ... and when the words read finished but were probably misheard (their last two words are not a pair of
# the agent's language model): the turn ends after this much silence. The default (as VAD_QUICK_END_SILENCE_MS)
# trusts every ending that reads finished; 500 waits as long as without the quick end for those: fewer
# callers cut off at a pause inside a sentence, but most turns of the offline recognizer (which mishears
# about a third of the words) then take 500 ms (bench/voice_latency.py --scenario pauses; docs/internals/performance.md).
VAD_UNSURE_SILENCE_MS = env.int("VAD_UNSURE_SILENCE_MS", default=300)
# How a pause is read (docs/guides/conversation.md "How turns end"; bench/end_of_turn.py): `words`, the words
# recognized at the pause (realtime/engine/cascade/turn_taking.py), or `smart-turn`, the Smart Turn v3 model
# of the audio (realtime/engine/cascade/end_of_turn.py), whose file `make setup` extracts from the pinned
# pipecat-ai wheel into SMART_TURN_MODEL_PATH (the virtualenv's share/smart-turn/ by default; never
# downloaded at run time: a missing file fails `manage.py check`).
TURN_END_DETECTOR = _choice("TURN_END_DETECTOR", "words", ("words", "smart-turn"))
SMART_TURN_MODEL_PATH = env.str(
    "SMART_TURN_MODEL_PATH", default=str(Path(sys.prefix) / "share" / "smart-turn" / "smart-turn-v3.2-cpu.onnx")
)
# Speech recognition worker processes per server process (PocketSphinx holds the GIL: decoding in the
# server process would starve its event loop). 0 decodes in the server process.
ASR_WORKERS = env.int("ASR_WORKERS", default=2)
# The voice engine: `cascade` (voice activity detection -> speech recognition -> brain -> speech synthesis,
# realtime/engine/cascade/; offline unless providers are configured) or `speech-to-speech` (one provider
# speaking the OpenAI Realtime protocol listens, thinks and speaks, realtime/engine/speech_to_speech/).
# The former names are still accepted and read as the new ones: embedded = cascade, realtime = speech-to-speech.
_VOICE_ENGINE_ALIASES = {"embedded": "cascade", "realtime": "speech-to-speech"}
VOICE_ENGINE = _choice("VOICE_ENGINE", "cascade", ("cascade", "speech-to-speech", *_VOICE_ENGINE_ALIASES))
VOICE_ENGINE = _VOICE_ENGINE_ALIASES.get(VOICE_ENGINE, VOICE_ENGINE)
LLM_PROVIDER = _choice("LLM_PROVIDER", "embedded", ("embedded", "openai"))
# LLM_PROVIDER=openai: any OpenAI-compatible Chat Completions server (OpenAI, Groq, vLLM, llama.cpp, Ollama).
LLM_BASE_URL = env.str("LLM_BASE_URL", default="https://api.openai.com/v1")
LLM_API_KEY = env.str("LLM_API_KEY", default="")  # empty for local servers that need none
LLM_MODEL = env.str("LLM_MODEL", default="")  # required with LLM_PROVIDER=openai
# The whole model request, streamed answer included (time waiting on the server).
LLM_TIMEOUT_SECONDS = env.float("LLM_TIMEOUT_SECONDS", default=15.0)
# A cap on the tokens of one answer (0: none); spoken answers are short.
LLM_MAX_TOKENS = env.int("LLM_MAX_TOKENS", default=300)
LLM_TEMPERATURE = env.float("LLM_TEMPERATURE", default=None)  # unset: the server's default
# VOICE_ENGINE=speech-to-speech: a server speaking the OpenAI Realtime WebSocket protocol
# (OpenAI, Azure OpenAI, xAI, compatible self-hosted servers); the operator's own configuration.
REALTIME_PROVIDER_URL = env.str("REALTIME_PROVIDER_URL", default="")  # e.g. wss://api.openai.com/v1/realtime
REALTIME_PROVIDER_API_KEY = env.str("REALTIME_PROVIDER_API_KEY", default="")  # empty for servers that need none
REALTIME_PROVIDER_MODEL = env.str("REALTIME_PROVIDER_MODEL", default="")  # sent as ?model=, e.g. gpt-realtime
# Where the server puts voice and turn detection: openai (under session.audio), xai (session top
# level); auto: xai for api.x.ai, openai otherwise.
REALTIME_PROVIDER_DIALECT = _choice("REALTIME_PROVIDER_DIALECT", "auto", ("auto", "openai", "xai"))
# Agent voice -> provider voice, "eve=marin,rex=cedar"; voices not listed keep the built-in mapping
# (openai: eve=marin ara=coral rex=cedar sal=alloy leo=ash; xai: the same names as ours).
REALTIME_PROVIDER_VOICES = env.dict("REALTIME_PROVIDER_VOICES", default={})
# The model that transcribes the caller for the call record (openai dialect; empty: none asked for).
# Caller audio is sent to the provider in appends of this many milliseconds (20 = every browser chunk
# at once; more = fewer provider messages, at the cost of up to this much added delay).
REALTIME_PROVIDER_APPEND_MS = env.int("REALTIME_PROVIDER_APPEND_MS", default=100)
if not 20 <= REALTIME_PROVIDER_APPEND_MS <= 1000:
    raise ImproperlyConfigured("REALTIME_PROVIDER_APPEND_MS must be between 20 and 1000")
REALTIME_PROVIDER_TRANSCRIPTION_MODEL = env.str(
    "REALTIME_PROVIDER_TRANSCRIPTION_MODEL", default="gpt-4o-mini-transcribe"
)
# The cascade's speech: embedded (PocketSphinx, eSpeak NG), openai (any OpenAI-compatible audio API:
# OpenAI, faster-whisper-server/Speaches, Kokoro-FastAPI, LocalAI, vLLM; keys are empty for local servers),
# or the offline neural models in this process: whisper (ASR) and piper (TTS), docs/guides/neural-speech.md.
ASR_PROVIDER = _choice("ASR_PROVIDER", "embedded", ("embedded", "openai", "whisper"))
ASR_BASE_URL = env.str("ASR_BASE_URL", default="https://api.openai.com/v1")  # POST {it}/audio/transcriptions
ASR_API_KEY = env.str("ASR_API_KEY", default="")
ASR_MODEL = env.str("ASR_MODEL", default="")  # required with openai (e.g. whisper-1, Systran/faster-whisper-small)
ASR_TIMEOUT_SECONDS = env.float("ASR_TIMEOUT_SECONDS", default=10.0)  # one caller turn's transcription
ASR_PROMPT_CHARS = env.int("ASR_PROMPT_CHARS", default=400)  # the agent's words sent as `prompt`; 0: none
TTS_PROVIDER = _choice("TTS_PROVIDER", "embedded", ("embedded", "openai", "piper"))
TTS_BASE_URL = env.str("TTS_BASE_URL", default="https://api.openai.com/v1")  # POST {it}/audio/speech
TTS_API_KEY = env.str("TTS_API_KEY", default="")
TTS_MODEL = env.str("TTS_MODEL", default="")  # required with openai (e.g. tts-1, gpt-4o-mini-tts, kokoro)
TTS_TIMEOUT_SECONDS = env.float("TTS_TIMEOUT_SECONDS", default=10.0)  # one sentence, streamed audio included
TTS_SAMPLE_RATE = env.int("TTS_SAMPLE_RATE", default=24000)  # of the server's raw PCM (OpenAI: 24000)
# Agent voices -> the server's voices, e.g. "eve=af_bella,ara=af_nova" ("*=voice" for the names not
# listed); unset names keep the OpenAI defaults eve=alloy, ara=nova, rex=onyx, sal=echo, leo=fable.
TTS_VOICE_MAP = env.str("TTS_VOICE_MAP", default="")
# ASR_PROVIDER=whisper: faster-whisper (CTranslate2, int8) in this process, the model loaded once at start.
WHISPER_MODEL_PATH = env.str("WHISPER_MODEL_PATH", default="")  # a CTranslate2 Whisper model directory
WHISPER_MODEL_SHA256 = env.str("WHISPER_MODEL_SHA256", default="")  # of its model.bin; checked at load when set
WHISPER_CPU_THREADS = env.int("WHISPER_CPU_THREADS", default=2)  # threads of one transcription (one at a time)
# Beams of Whisper's decoding; 1 is greedy. 5 halved the word errors of 1 on eSpeak NG speech for 6% more
# CPU (the 30 s encoder window costs the most): bench/neural_speech.py, docs/guides/neural-speech.md.
WHISPER_BEAM_SIZE = env.int("WHISPER_BEAM_SIZE", default=5)
# The agent's words as Whisper's initial prompt, up to this many characters; 0 (none) by default: with it
# Whisper base dropped the prompt's words from what callers said (docs/guides/neural-speech.md).
WHISPER_PROMPT_CHARS = env.int("WHISPER_PROMPT_CHARS", default=0)
# TTS_PROVIDER=piper: a Piper voice (VITS on onnxruntime) in this process, loaded once at start.
PIPER_MODEL_PATH = env.str("PIPER_MODEL_PATH", default="")  # the voice's .onnx file, its .onnx.json beside it
PIPER_MODEL_SHA256 = env.str("PIPER_MODEL_SHA256", default="")  # of the .onnx file; checked at load when set
# A multi-speaker voice: agent voice -> speaker name or number, "eve=p225,ara=3,*=p226"; unset names speak
# with the voice's default speaker. A single-speaker voice speaks for every agent voice.
PIPER_SPEAKER_MAP = env.str("PIPER_SPEAKER_MAP", default="")

# The browser demo at /demo/ (realtime/demo.py) opens voice sessions for the demo organization's agents
# without an API key. On by default only for development: with DEBUG, or on the embedded default (no
# DATABASE_URL, as `make run` serves). DEMO_ORGANIZATION_ID empty: the organization `manage.py
# bootstrapdemo` recorded in var/demo.json.
DEMO_PAGES = env.bool("DEMO_PAGES", default=DEBUG or not env.str("DATABASE_URL", default=""))
DEMO_ORGANIZATION_ID = env.str("DEMO_ORGANIZATION_ID", default="")

# --- calls: history, billing, agent runtime logs (calls/) -------------------------------------
# An active call with no message, tool call or model turn for this long is closed as failed.
CALLS_STALE_AFTER_SECONDS = env.int("CALLS_STALE_AFTER_SECONDS", default=3600)
# Agent logs are kept this long (the API shows the last 24 hours); at least 24.
AGENT_LOG_RETENTION_HOURS = env.int("AGENT_LOG_RETENTION_HOURS", default=72)
if AGENT_LOG_RETENTION_HOURS < 24 or CALLS_STALE_AFTER_SECONDS < 60:
    raise ImproperlyConfigured("AGENT_LOG_RETENTION_HOURS must be >= 24 and CALLS_STALE_AFTER_SECONDS >= 60")
# Buffered agent logs are written every AGENT_LOG_FLUSH_SECONDS or per AGENT_LOG_BATCH_SIZE lines.
AGENT_LOG_FLUSH_SECONDS = env.float("AGENT_LOG_FLUSH_SECONDS", default=1.0)
AGENT_LOG_BATCH_SIZE = env.int("AGENT_LOG_BATCH_SIZE", default=200)
AGENT_LOG_MAX_BUFFER = env.int("AGENT_LOG_MAX_BUFFER", default=10000)
# BACKGROUND_WORK=inprocess: the upkeep sweep's in-process timer (with celery, beat runs it); 0 = off.
CALLS_MAINTENANCE_SECONDS = env.int("CALLS_MAINTENANCE_SECONDS", default=300)
# The whole upkeep sweep (stale calls, stuck documents, spent tokens, old logs): calls/maintenance.py.
CELERY_BEAT_SCHEDULE["calls-upkeep"] = {"task": "calls.run_upkeep", "schedule": 300.0}
CELERY_BEAT_SCHEDULE["calls-purge-agent-logs"] = {"task": "calls.purge_agent_logs", "schedule": 3600.0}

# --- call events: outbox and delivery (calls/webhooks/events.py, docs/reference/webhooks.md) ----------------
# Who delivers is BACKGROUND_WORK's: "inprocess", a worker loop in every serving process; "celery", a task
# per new delivery and Celery beat's `calls.deliver_due_events` for the retries; "off", nobody here.
# Retries: the n-th retry waits EVENTS_RETRY_BASE_SECONDS * 2**(n-1); at most EVENTS_MAX_ATTEMPTS attempts.
EVENTS_RETRY_BASE_SECONDS = env.float("EVENTS_RETRY_BASE_SECONDS", default=30.0)
EVENTS_MAX_ATTEMPTS = env.int("EVENTS_MAX_ATTEMPTS", default=8)
EVENTS_TIMEOUT_SECONDS = env.float("EVENTS_TIMEOUT_SECONDS", default=10.0)
# Deliveries the in-process worker sends at once, and how often it looks for due retries when idle (0: no
# worker in this process).
EVENTS_WORKER_THREADS = max(1, env.int("EVENTS_WORKER_THREADS", default=4))
EVENTS_POLL_SECONDS = env.float("EVENTS_POLL_SECONDS", default=5.0)
if EVENTS_RETRY_BASE_SECONDS <= 0 or EVENTS_MAX_ATTEMPTS < 1 or EVENTS_TIMEOUT_SECONDS <= 0:
    raise ImproperlyConfigured(
        "EVENTS_RETRY_BASE_SECONDS and EVENTS_TIMEOUT_SECONDS must be > 0, EVENTS_MAX_ATTEMPTS >= 1"
    )
# Events and their delivery records are kept this long (the upkeep deletes older ones no longer pending).
EVENTS_RETENTION_DAYS = env.int("EVENTS_RETENTION_DAYS", default=30)
if EVENTS_RETENTION_DAYS < 1:
    raise ImproperlyConfigured("EVENTS_RETENTION_DAYS must be >= 1")
# An event's body carries at most this many characters of transcript (the content of `messages`); the rest
# is left out, `messagesTruncated` says so, and `callUrl` has the whole call (docs/reference/webhooks.md).
EVENTS_MAX_TRANSCRIPT_CHARS = env.int("EVENTS_MAX_TRANSCRIPT_CHARS", default=100_000)
if EVENTS_MAX_TRANSCRIPT_CHARS < 0:
    raise ImproperlyConfigured("EVENTS_MAX_TRANSCRIPT_CHARS must be >= 0")
CELERY_BEAT_SCHEDULE["calls-deliver-events"] = {"task": "calls.deliver_due_events", "schedule": 10.0}

# --- call recordings (calls/recordings.py, docs/guides/recordings.md) -------------------------------------
# Where recordings are stored: empty, or file:///a/folder, the local filesystem (default var/media/recordings);
# s3://bucket/optional/prefix?endpoint_url=https://...&region_name=... any S3-compatible store
# (django-storages), with RECORDINGS_STORAGE_ACCESS_KEY_ID / _SECRET_ACCESS_KEY (empty: boto3's usual chain).
RECORDINGS_STORAGE_URL = env.str("RECORDINGS_STORAGE_URL", default="")
RECORDINGS_STORAGE_ACCESS_KEY_ID = env.str("RECORDINGS_STORAGE_ACCESS_KEY_ID", default="")
RECORDINGS_STORAGE_SECRET_ACCESS_KEY = env.str("RECORDINGS_STORAGE_SECRET_ACCESS_KEY", default="")
MEDIA_ROOT = VAR_DIR / "media"


STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(MEDIA_ROOT)}},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "recordings": storage_from_url(
        RECORDINGS_STORAGE_URL,
        default_location=str(MEDIA_ROOT / "recordings"),
        access_key=RECORDINGS_STORAGE_ACCESS_KEY_ID,
        secret_key=RECORDINGS_STORAGE_SECRET_ACCESS_KEY,
        name="RECORDINGS_STORAGE_URL",
    ),
}
# A recording's signed URL (recordingUrl) works for this long: anyone holding it plays the recording without
# an API key, so an hour (the API gives a fresh one with every read of the call).
RECORDING_URL_TTL_SECONDS = env.int("RECORDING_URL_TTL_SECONDS", default=3600)
# Recordings older than this many days are deleted by the upkeep sweep; 0 keeps them until deleted.
RECORDING_RETENTION_DAYS = env.int("RECORDING_RETENTION_DAYS", default=90)
if RECORDING_URL_TTL_SECONDS < 1 or RECORDING_RETENTION_DAYS < 0:
    raise ImproperlyConfigured("RECORDING_URL_TTL_SECONDS must be >= 1 and RECORDING_RETENTION_DAYS >= 0")
# Longest recording kept in memory per call (longer calls keep their first RECORDING_MAX_SECONDS).
RECORDING_MAX_SECONDS = env.int("RECORDING_MAX_SECONDS", default=7200)
CELERY_BEAT_SCHEDULE["calls-purge-recordings"] = {"task": "calls.purge_recordings", "schedule": 3600.0}

# --- costs (calls/costs/, docs/costs.md) -----------------------------------------------------------
# The service's price book, for organizations without their own: the JSON of {currency, items: [{product,
# provider, model?, unit, unitPrice}]}; empty: USD with nothing priced (every ledger line costs 0). Checked
# when the calls app starts (calls/apps.py).
PRICE_BOOK = env.str("PRICE_BOOK", default="")

# --- knowledge base ---------------------------------------------------------------------------
# Largest knowledge upload (file, or JSON content as UTF-8); beyond it the API answers 413.
KNOWLEDGE_MAX_UPLOAD_BYTES = env.int("KNOWLEDGE_MAX_UPLOAD_BYTES", default=20 * 1024 * 1024)
# Django refuses larger non-file bodies before DRF parses them; JSON knowledge `content` may be as large
# as a file upload (plus room for JSON quoting and the other fields).
DATA_UPLOAD_MAX_MEMORY_SIZE = KNOWLEDGE_MAX_UPLOAD_BYTES + 1024 * 1024
# Most chunks one document is cut into; a document that makes more is marked `failed` (before anything
# is embedded) with an error that asks for smaller documents. 2,000 chunks is about 1.5 MB of prose.
KNOWLEDGE_MAX_CHUNKS_PER_DOCUMENT = env.int("KNOWLEDGE_MAX_CHUNKS_PER_DOCUMENT", default=2000)
if KNOWLEDGE_MAX_CHUNKS_PER_DOCUMENT < 1:
    raise ImproperlyConfigured("KNOWLEDGE_MAX_CHUNKS_PER_DOCUMENT must be at least 1")
# Agents whose vectors each process keeps in memory for search (least recently used dropped first).
KNOWLEDGE_SEARCH_CACHE_AGENTS = env.int("KNOWLEDGE_SEARCH_CACHE_AGENTS", default=32)
# Folder of the embedding model exported to ONNX (made on first use); empty: <temp dir>/voiceagent-embeddings.
KNOWLEDGE_MODEL_CACHE = env.str("KNOWLEDGE_MODEL_CACHE", default="")

# --- upkeep and background ingestion (calls/maintenance.py, knowledge/tasks.py) -------------------
# Liveness (kit/liveness.py): every process writes a heartbeat on the calls and ingestions it
# holds; a call or document whose heartbeat is older than the expiry belongs to a dead process and the
# upkeep sweep closes it (a call `failed` at its last activity). 0 turns the heartbeat off.
LIVENESS_HEARTBEAT_SECONDS = env.float("LIVENESS_HEARTBEAT_SECONDS", default=15.0)
LIVENESS_EXPIRY_SECONDS = env.float("LIVENESS_EXPIRY_SECONDS", default=60.0)
if LIVENESS_HEARTBEAT_SECONDS < 0 or (
    LIVENESS_HEARTBEAT_SECONDS > 0 and LIVENESS_EXPIRY_SECONDS < 2 * LIVENESS_HEARTBEAT_SECONDS
):
    raise ImproperlyConfigured(
        "LIVENESS_HEARTBEAT_SECONDS must be >= 0 and LIVENESS_EXPIRY_SECONDS at least twice the heartbeat"
    )
# Every serving process sweeps once when it starts (stale calls, stuck documents...), then on its timer.
CALLS_MAINTENANCE_AT_START = env.bool("CALLS_MAINTENANCE_AT_START", default=True)
# A document still `processing` this long after ingestion last started (or after the upload, when it
# never started) is marked `failed`: its process died. The largest upload (20 MiB of text, about
# 28,000 chunks at about 40 chunks/s) takes some 12 minutes on one core, so an hour leaves room.
KNOWLEDGE_PROCESSING_TIMEOUT_SECONDS = env.int("KNOWLEDGE_PROCESSING_TIMEOUT_SECONDS", default=3600)
if KNOWLEDGE_PROCESSING_TIMEOUT_SECONDS < 1:
    raise ImproperlyConfigured("KNOWLEDGE_PROCESSING_TIMEOUT_SECONDS must be >= 1")
# BACKGROUND_WORK=inprocess (or no broker): ingestion runs on this many background threads of the serving
# process, never inside the upload request (BACKGROUND_WORK=inline: inside it, in the tests).
KNOWLEDGE_INGEST_WORKERS = max(1, env.int("KNOWLEDGE_INGEST_WORKERS", default=1))

# --- agent test runs (docs/guides/agent-test-runs.md) --------------------------------------------------
# Where test runs are carried out is BACKGROUND_WORK's (celery: the task realtime.run_agent_tests).
# Attempts one server process carries out at once (BACKGROUND_WORK=inprocess), taken fairly across
# organizations (round-robin, one attempt at a time).
TEST_RUNS_WORKERS = env.int("TEST_RUNS_WORKERS", default=1)
if TEST_RUNS_WORKERS < 1:
    raise ImproperlyConfigured("TEST_RUNS_WORKERS must be at least 1")
# How long a worker holds a run without storing an attempt before another may take it over.
TEST_RUNS_LEASE_SECONDS = env.int("TEST_RUNS_LEASE_SECONDS", default=600)
if TEST_RUNS_LEASE_SECONDS < 1:
    raise ImproperlyConfigured("TEST_RUNS_LEASE_SECONDS must be at least 1")
# The most attempts one run may make (tests x repeat): a bigger run is refused with a 400.
TEST_RUNS_MAX_ATTEMPTS = env.int("TEST_RUNS_MAX_ATTEMPTS", default=100)
if TEST_RUNS_MAX_ATTEMPTS < 1:
    raise ImproperlyConfigured("TEST_RUNS_MAX_ATTEMPTS must be at least 1")
# The most runs an organization may have queued or running at once: another is a 429 with Retry-After.
TEST_RUNS_MAX_UNFINISHED_PER_ORGANIZATION = env.int("TEST_RUNS_MAX_UNFINISHED_PER_ORGANIZATION", default=3)
if TEST_RUNS_MAX_UNFINISHED_PER_ORGANIZATION < 1:
    raise ImproperlyConfigured("TEST_RUNS_MAX_UNFINISHED_PER_ORGANIZATION must be at least 1")

# --- post-call analysis (docs/guides/post-call-analysis.md) --------------------------------------------
# Where analyses run is BACKGROUND_WORK's (celery: the task realtime.analyze_call on a Celery worker).
# Analyses one server process runs at once in its background threads (BACKGROUND_WORK=inprocess).
CALL_ANALYSIS_WORKERS = env.int("CALL_ANALYSIS_WORKERS", default=1)
if CALL_ANALYSIS_WORKERS < 1:
    raise ImproperlyConfigured("CALL_ANALYSIS_WORKERS must be at least 1")
# LLM_PROVIDER=openai: one analysis request, at most (LLM_TIMEOUT_SECONDS is for the spoken answers).
CALL_ANALYSIS_TIMEOUT_SECONDS = env.float("CALL_ANALYSIS_TIMEOUT_SECONDS", default=60.0)
if not CALL_ANALYSIS_TIMEOUT_SECONDS > 0:
    raise ImproperlyConfigured("CALL_ANALYSIS_TIMEOUT_SECONDS must be more than 0")
# How long a worker holds an analysis it took: after this another worker (the upkeep sweep) may take it
# again, for a worker that died with it. Longer than the analysis can take: three parts of two requests.
CALL_ANALYSIS_LEASE_SECONDS = env.int(
    "CALL_ANALYSIS_LEASE_SECONDS", default=int(6 * CALL_ANALYSIS_TIMEOUT_SECONDS) + 30
)

# --- i18n, static -----------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
FORMAT_MODULE_PATH = ["voiceagent.formats"]  # the dashboard's short ISO-like dates
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
# Daphne does not serve static files; WhiteNoise does (from the app folders when not collected).
WHITENOISE_USE_FINDERS = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    # 401s: at most one line per client address per UNAUTHORIZED_LOG_INTERVAL_SECONDS, with the count left
    # out (an unauthenticated flood must not grow the log by a line per request). docs/operations/security.md
    "filters": {
        "unauthorized_throttle": {
            "()": "kit.log_filters.UnauthorizedLogThrottle",
            "interval_seconds": env.float("UNAUTHORIZED_LOG_INTERVAL_SECONDS", default=60.0),
        }
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        "django.request": {"filters": ["unauthorized_throttle"]},
        "axes.apps": {"level": "WARNING"},  # its start-up banner, on every command
        "django.db.backends": {"level": "WARNING"},
        # httpx/httpx2 log every request URL at INFO; tool and MCP URLs can embed access keys.
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        "mcp": {"level": "WARNING"},
    },
}

# --- metrics (docs/operations/metrics.md) -----------------------------------------------------------------
# GET /metrics (Prometheus): with a token, scrapes need "Authorization: Bearer <token>"; without one,
# only loopback clients are answered. PROMETHEUS_MULTIPROC_DIR (read by prometheus-client itself) turns
# on multi-process collection; OTEL_EXPORTER_OTLP_ENDPOINT (read by kit/tracing.py) turns on traces.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
# Behind a TLS proxy every request reaches the service through the proxy, so "a loopback client" means
# nothing there: without METRICS_TOKEN, /metrics then answers 401 to everyone (and check --deploy warns).

# --- call batches (campaigns, telephony/campaigns/services.py, docs/guides/campaigns.md) -------------------------
# Who runs the batch scheduler is BACKGROUND_WORK's: "inprocess", a loop of every serving process; "celery",
# Celery beat runs `telephony.batch_tick`; "off", another process does (or cron: manage.py batch_tick).
# How often the scheduler looks for calls to place (seconds; in-process 0 = off).
BATCH_TICK_SECONDS = env.float("BATCH_TICK_SECONDS", default=5.0)
if BATCH_TICK_SECONDS < 0:
    raise ImproperlyConfigured("BATCH_TICK_SECONDS must be >= 0")
CELERY_BEAT_SCHEDULE["telephony-batch-tick"] = {"task": "telephony.batch_tick", "schedule": BATCH_TICK_SECONDS or 5.0}
