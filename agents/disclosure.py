"""The mandatory AI-identity sentence an agent speaks first, maintained and versioned by the service.

Callers pick a template id; they cannot supply their own wording. Each text carries a version id so
that a call record can say exactly which approved sentence was spoken. Languages without their own
templates use English (spec, agent rule 8).
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.models import DisclosureTemplate

FALLBACK_LANGUAGE = "en-US"

# (version, text); "{name}" is the agent's name in the named templates.
TEMPLATES: dict[str, dict[str, tuple[str, str]]] = {
    "en-US": {
        DisclosureTemplate.STANDARD: (
            "en-US.standard.1",
            "Just so you know, you are speaking with an AI, not a person.",
        ),
        DisclosureTemplate.ASSISTANT_OF: (
            "en-US.assistant_of.1",
            "You are speaking with an AI assistant answering on behalf of our team.",
        ),
        DisclosureTemplate.NAMED_AGENT: ("en-US.named_agent.1", "Hi, I'm {name}, an AI agent."),
        DisclosureTemplate.VIRTUAL_ASSISTANT: (
            "en-US.virtual_assistant.1",
            "You are speaking with a virtual assistant powered by AI.",
        ),
        DisclosureTemplate.NAMED_VIRTUAL_ASSISTANT: (
            "en-US.named_virtual_assistant.1",
            "Hi, I'm {name}, a virtual assistant powered by AI.",
        ),
    },
    "es-ES": {
        DisclosureTemplate.STANDARD: (
            "es-ES.standard.1",
            "Le informo de que está hablando con una inteligencia artificial, no con una persona.",
        ),
        DisclosureTemplate.ASSISTANT_OF: (
            "es-ES.assistant_of.1",
            "Está hablando con un asistente de inteligencia artificial que atiende en nombre de nuestro equipo.",
        ),
        DisclosureTemplate.NAMED_AGENT: (
            "es-ES.named_agent.1",
            "Hola, soy {name}, un agente de inteligencia artificial.",
        ),
        DisclosureTemplate.VIRTUAL_ASSISTANT: (
            "es-ES.virtual_assistant.1",
            "Está hablando con un asistente virtual con inteligencia artificial.",
        ),
        DisclosureTemplate.NAMED_VIRTUAL_ASSISTANT: (
            "es-ES.named_virtual_assistant.1",
            "Hola, soy {name}, un asistente virtual con inteligencia artificial.",
        ),
    },
    "es-US": {
        DisclosureTemplate.STANDARD: (
            "es-US.standard.1",
            "Le comento que está hablando con una inteligencia artificial, no con una persona.",
        ),
        DisclosureTemplate.ASSISTANT_OF: (
            "es-US.assistant_of.1",
            "Está hablando con un asistente de inteligencia artificial que atiende de parte de nuestro equipo.",
        ),
        DisclosureTemplate.NAMED_AGENT: (
            "es-US.named_agent.1",
            "Hola, soy {name}, un agente de inteligencia artificial.",
        ),
        DisclosureTemplate.VIRTUAL_ASSISTANT: (
            "es-US.virtual_assistant.1",
            "Está hablando con un asistente virtual de inteligencia artificial.",
        ),
        DisclosureTemplate.NAMED_VIRTUAL_ASSISTANT: (
            "es-US.named_virtual_assistant.1",
            "Hola, soy {name}, un asistente virtual de inteligencia artificial.",
        ),
    },
    "it-IT": {
        DisclosureTemplate.STANDARD: (
            "it-IT.standard.1",
            "La informo che sta parlando con un'intelligenza artificiale, non con una persona.",
        ),
        DisclosureTemplate.ASSISTANT_OF: (
            "it-IT.assistant_of.1",
            "Sta parlando con un assistente di intelligenza artificiale che risponde per conto del nostro team.",
        ),
        DisclosureTemplate.NAMED_AGENT: (
            "it-IT.named_agent.1",
            "Salve, sono {name}, un agente di intelligenza artificiale.",
        ),
        DisclosureTemplate.VIRTUAL_ASSISTANT: (
            "it-IT.virtual_assistant.1",
            "Sta parlando con un assistente virtuale basato sull'intelligenza artificiale.",
        ),
        DisclosureTemplate.NAMED_VIRTUAL_ASSISTANT: (
            "it-IT.named_virtual_assistant.1",
            "Salve, sono {name}, un assistente virtuale basato sull'intelligenza artificiale.",
        ),
    },
}


@dataclass(frozen=True)
class Disclosure:
    text: str
    version: str
    language: str  # the template language actually used (after fallback)


def disclosure_for(*, template_id: str, language: str, agent_name: str) -> Disclosure:
    template_language = language if language in TEMPLATES else FALLBACK_LANGUAGE
    version, text = TEMPLATES[template_language][DisclosureTemplate(template_id)]
    name = " ".join(agent_name.split()) or "your assistant"
    return Disclosure(text=text.replace("{name}", name), version=version, language=template_language)
