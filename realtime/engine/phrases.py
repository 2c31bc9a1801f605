"""Fixed sentences the session itself speaks (not the brain's), per language."""

from __future__ import annotations

_PHRASES: dict[str, dict[str, str]] = {
    "en": {
        "transfer_declined": "I'm sorry, they could not take your call right now. I'm still here to help you.",
        "transfer_unanswered": "I'm sorry, nobody could take your call right now. I'm still here to help you.",
        "handoff": "One moment please, I am passing you to a colleague.",
        "taken_over": "Hello, this is {name}. How can I help you?",
        "apology": "Sorry, I am having trouble answering right now. Could you say that again?",
        "transfer": "One moment please, I am transferring you to a person.",
        "unavailable": "Sorry, this agent is not available right now. Please try again later. Goodbye.",
        "goodbye": "Thank you for calling. Goodbye!",
        "max_duration": "I'm sorry, we have reached the time limit for this call. Thank you for calling. Goodbye!",
        "slow_answer": "I'm sorry, this is taking longer than it should. Could you say that again?",
        "still_working": "Sorry for the wait, I'm still working on it.",
    },
    "es-ES": {
        "transfer_declined": "Lo siento, ahora no pueden atender su llamada. Sigo aquí para ayudarle.",
        "transfer_unanswered": "Lo siento, nadie ha podido atender su llamada ahora. Sigo aquí para ayudarle.",
        "handoff": "Un momento, por favor, le paso con un compañero.",
        "taken_over": "Hola, soy {name}. ¿En qué puedo ayudarle?",
        "apology": "Lo siento, ahora mismo tengo problemas para responder. ¿Puede repetirlo?",
        "transfer": "Un momento, por favor, le paso con una persona.",
        "unavailable": "Lo siento, este agente no está disponible ahora. Inténtelo más tarde. Adiós.",
        "goodbye": "Gracias por llamar. ¡Adiós!",
        "max_duration": "Lo siento, hemos llegado al tiempo máximo de esta llamada. Gracias por llamar. ¡Adiós!",
        "slow_answer": "Lo siento, esto está tardando más de la cuenta. ¿Puede repetirlo?",
        "still_working": "Perdone la espera, sigo con ello.",
    },
    "es": {
        "transfer_declined": "Disculpe, ahora no pueden atender su llamada. Sigo aquí para ayudarle.",
        "transfer_unanswered": "Disculpe, nadie pudo atender su llamada ahora. Sigo aquí para ayudarle.",
        "handoff": "Un momento, por favor, lo comunico con un colega.",
        "taken_over": "Hola, habla {name}. ¿En qué puedo ayudarle?",
        "apology": "Disculpe, ahora mismo tengo problemas para responder. ¿Puede repetirlo?",
        "transfer": "Un momento, por favor, lo comunico con una persona.",
        "unavailable": "Disculpe, este agente no está disponible ahora. Intente más tarde. Adiós.",
        "goodbye": "Gracias por llamar. ¡Adiós!",
        "max_duration": "Disculpe, llegamos al tiempo máximo de esta llamada. Gracias por llamar. ¡Adiós!",
        "slow_answer": "Disculpe, esto está tardando más de lo normal. ¿Puede repetirlo?",
        "still_working": "Disculpe la espera, todavía estoy en eso.",
    },
    "it": {
        "transfer_declined": "Mi dispiace, ora non possono rispondere. Sono ancora qui per aiutarla.",
        "transfer_unanswered": "Mi dispiace, nessuno ha potuto rispondere ora. Sono ancora qui per aiutarla.",
        "handoff": "Un momento, la passo a un collega.",
        "taken_over": "Salve, sono {name}. Come posso aiutarla?",
        "apology": "Mi scusi, al momento ho difficoltà a rispondere. Può ripetere?",
        "transfer": "Un momento, la passo a una persona.",
        "unavailable": "Mi scusi, questo agente non è disponibile al momento. Riprovi più tardi. Arrivederci.",
        "goodbye": "Grazie per aver chiamato. Arrivederci!",
        "max_duration": "Mi scusi, abbiamo raggiunto il tempo massimo per questa chiamata. Grazie e arrivederci!",
        "slow_answer": "Mi scusi, ci sto mettendo più del previsto. Può ripetere?",
        "still_working": "Mi scusi per l'attesa, ci sto ancora lavorando.",
    },
}


def phrase(key: str, language: str, **values: str) -> str:
    """The sentence `key` in the language (its primary subtag, else English), with its {name} filled."""
    table = _PHRASES.get(language) or _PHRASES.get(language.split("-")[0]) or _PHRASES["en"]
    return table[key].format(**values) if values else table[key]
