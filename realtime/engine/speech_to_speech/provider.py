"""The speech-to-speech provider as this service configures it: the REALTIME_PROVIDER_* settings (which
are required, which values are invalid), the socket URL, the provider's name in llmUsage, the voices,
and the session instructions (through the one instructions builder, realtime/engine/instructions.py).
The pipeline that speaks the protocol is pipeline.py beside it.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.conf import settings

from realtime.engine.contracts import Conversation
from realtime.engine.instructions import agent_instructions, language_name

# Agent voice -> provider voice when REALTIME_PROVIDER_VOICES does not say (xAI knows our names).
OPENAI_VOICES = {"eve": "marin", "ara": "coral", "rex": "cedar", "sal": "alloy", "leo": "ash"}


# Without these, sessions are refused before a call record is opened (realtime/engine/registry.py).
REQUIRED_SETTINGS = ("REALTIME_PROVIDER_URL", "REALTIME_PROVIDER_MODEL")


def configuration_problems() -> list[str]:
    """What is invalid in the REALTIME_PROVIDER_* settings (missing REQUIRED_SETTINGS are named by the
    engine registry)."""
    problems = []
    url = settings.REALTIME_PROVIDER_URL.strip()
    if url:
        parts = urlsplit(url)
        if parts.scheme not in ("ws", "wss", "http", "https") or not parts.hostname:
            problems.append("REALTIME_PROVIDER_URL must be a ws(s) URL such as wss://api.openai.com/v1/realtime")
        hosted = parts.hostname in ("api.openai.com", "api.x.ai") or (parts.hostname or "").endswith(".azure.com")
        if hosted and not settings.REALTIME_PROVIDER_API_KEY:
            problems.append(f"REALTIME_PROVIDER_API_KEY is not set ({parts.hostname} requires one)")
    return problems


def provider_url(base: str, model: str) -> str:
    """The socket URL: `model` added to the query (an Azure api-version already there is kept)."""
    parts = urlsplit(base.strip())
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    query = [(key, value) for key, value in parse_qsl(parts.query) if key != "model"]
    query.append(("model", model))
    return urlunsplit((scheme, parts.netloc, parts.path, urlencode(query), ""))


def provider_name(host: str) -> str:
    """The provider as recorded in llmUsage."""
    if host == "api.x.ai":
        return "xai"
    if host.endswith(".azure.com"):
        return "azure-openai"
    if host == "api.openai.com":
        return "openai"
    return "realtime"


def instructions_for(session: Conversation) -> str:
    """The session instructions: who the agent is, what it does, how it speaks, and what it said first."""
    context = session.context
    words = language_name(context.language or session.agent.language)
    opening = " ".join(text.strip() for text in (context.disclosure, context.greeting) if text.strip())
    return agent_instructions(
        context,
        call="a call",
        speaking=(
            f"Always speak {words}.",
            f'The call opens with you saying exactly, word for word: "{opening}" (the first sentence tells the '
            "caller they are talking with an AI; never deny being an AI). Do not greet or introduce yourself again "
            "unless the caller asks who you are.",
            "Keep each answer brief, one to three short sentences, in plain spoken words.",
        ),
        tool_use="Use your tools when they help the caller. Never invent a tool result: call the tool and wait for "
        "its result; if a tool fails, say so briefly.",
    )
