"""Brains: given the agent's prompt, its offered tools and the conversation so far, produce the
agent's next words and tool calls (the types are in realtime/engine/contracts.py).

Chosen per deployment by settings.LLM_PROVIDER, in one registry: `embedded` (an offline, rule-based
responder, embedded/; the default) and `openai` (any OpenAI-compatible Chat Completions server). An
agent with a flow gets its flow around that brain (flow.py: fixed steps without a model).
"""

from __future__ import annotations

import sys
from typing import Any

from django.conf import settings

from kit.providers import Registry
from realtime.engine.brain.flow import FlowBrain
from realtime.engine.contracts import Brain

BRAINS = Registry(
    "language model provider",
    {
        "embedded": "realtime.engine.brain.embedded.responder:EmbeddedBrain",
        "openai": "realtime.engine.brain.openai_chat:OpenAIChatBrain",
    },
)


def brain_for(agent: Any) -> Brain:
    """A new brain for one conversation of `agent` (ProviderError when it cannot be made)."""
    brain: Brain = BRAINS.get(settings.LLM_PROVIDER)(language=agent.language)
    flow = getattr(agent, "flow", None)
    if flow:  # the agent's flow runs the conversation, with this brain for its free steps
        brain = FlowBrain(flow, inner=brain)
    return brain


def brain_preload() -> None:
    """Load what the configured brain needs before its first conversation (realtime/apps.py's preload thread):
    the module's own `preload()`, when it has one."""
    brain_class = BRAINS.get(settings.LLM_PROVIDER)
    preload = getattr(sys.modules[brain_class.__module__], "preload", None)
    if preload is not None:
        preload()


def brain_problems() -> list[str]:
    """Why the configured brain cannot run (for the system check), empty when fine."""
    provider = settings.LLM_PROVIDER
    if provider not in BRAINS:
        return [f"LLM_PROVIDER={provider} is unknown; use embedded or openai"]
    try:
        brain_class = BRAINS.get(provider)
    except ImportError as exc:
        return [f"LLM_PROVIDER={provider} cannot be imported: {exc}"]
    check = getattr(sys.modules[brain_class.__module__], "configuration_problems", None)
    return list(check()) if check is not None else []
