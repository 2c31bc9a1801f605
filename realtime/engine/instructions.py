"""The agent's instructions to a language model, written once for both prompt builders: the chat
brain's system prompt (realtime/engine/brain/openai_chat.py) and the speech-to-speech provider's
session instructions (realtime/engine/speech_to_speech/pipeline.py). Each builder says what differs
(the call, how its model's words reach the caller, how it uses tools); who the agent is, its
instructions and the shared speaking rules are written here.
"""

from __future__ import annotations

from collections.abc import Sequence

from realtime.engine.contracts import BrainContext

ONE_QUESTION = "Ask one question at a time, then let the caller answer."
NO_TOOLS = "You have no tools: never pretend to look something up or to take an action."

_LANGUAGES = {
    "en": "English",
    "es": "Spanish",
    "it": "Italian",
    "fr": "French",
    "de": "German",
    "pt": "Portuguese",
    "nl": "Dutch",
    "ca": "Catalan",
    "gl": "Galician",
    "eu": "Basque",
    "pl": "Polish",
    "ro": "Romanian",
    "sv": "Swedish",
    "da": "Danish",
    "nb": "Norwegian",
    "fi": "Finnish",
    "el": "Greek",
    "tr": "Turkish",
    "ru": "Russian",
    "uk": "Ukrainian",
    "ar": "Arabic",
    "he": "Hebrew",
    "hi": "Hindi",
    "ja": "Japanese",
    "ko": "Korean",
    "zh": "Chinese",
}
_VARIANTS = {
    "en-US": "American English",
    "en-GB": "British English",
    "en-AU": "Australian English",
    "es-ES": "Spanish as spoken in Spain",
    "es-US": "Latin American Spanish as spoken in the United States",
    "es-MX": "Mexican Spanish",
    "es-419": "Latin American Spanish",
    "it-IT": "Italian",
    "fr-FR": "French as spoken in France",
    "fr-CA": "Canadian French",
    "pt-BR": "Brazilian Portuguese",
    "pt-PT": "European Portuguese",
    "de-DE": "German",
}


def language_name(tag: str) -> str:
    """A language tag in words for the model: "es-US" -> "Latin American Spanish as spoken in ..."."""
    if tag in _VARIANTS:
        return _VARIANTS[tag]
    base = _LANGUAGES.get(tag.split("-")[0].lower())
    if base is None:
        return f"the language with the tag {tag}"
    return base if "-" not in tag else f"{base} ({tag})"


def agent_instructions(context: BrainContext, *, call: str, speaking: Sequence[str], tool_use: str) -> str:
    """Who the agent is and what it does (from `context`), then how it speaks: the builder's `speaking`
    rules, one question at a time, and `tool_use` when it has tools (or that it has none)."""
    name = context.agent_name.strip() or "the agent"
    parts = [f"You are {name}, an AI voice agent talking with a caller on {call}."]
    if context.identity.strip():
        parts.append(f"# Who you are\n{context.identity.strip()}")
    if context.instructions.strip():
        parts.append(f"# Instructions\n{context.instructions.strip()}")
    rules = [*speaking, ONE_QUESTION, tool_use if context.tools else NO_TOOLS]
    parts.append("# How to speak\n" + "\n".join(f"- {rule}" for rule in rules))
    return "\n\n".join(parts)
