"""Fixed sentences the session itself speaks (not the brain's), per language."""

from __future__ import annotations

_PHRASES: dict[str, dict[str, str]] = {
    "en": {
        "apology": "Sorry, I am having trouble answering right now. Could you say that again?",
        "handoff": "One moment please, I am transferring you to a person.",
        "unavailable": "Sorry, this agent is not available right now. Please try again later. Goodbye.",
        "goodbye": "Thank you for calling. Goodbye!",
        "max_duration": "I'm sorry, we have reached the time limit for this call. Thank you for calling. Goodbye!",
        "slow_answer": "I'm sorry, this is taking longer than it should. Could you say that again?",
        "still_working": "Sorry for the wait, I'm still working on it.",
    },
    "es-ES": {
        "apology": "Lo siento, ahora mismo tengo problemas para responder. ¿Puede repetirlo?",
        "handoff": "Un momento, por favor, le paso con una persona.",
        "unavailable": "Lo siento, este agente no está disponible ahora. Inténtelo más tarde. Adiós.",
        "goodbye": "Gracias por llamar. ¡Adiós!",
        "max_duration": "Lo siento, hemos llegado al tiempo máximo de esta llamada. Gracias por llamar. ¡Adiós!",
        "slow_answer": "Lo siento, esto está tardando más de la cuenta. ¿Puede repetirlo?",
        "still_working": "Perdone la espera, sigo con ello.",
    },
    "es": {
        "apology": "Disculpe, ahora mismo tengo problemas para responder. ¿Puede repetirlo?",
        "handoff": "Un momento, por favor, lo comunico con una persona.",
        "unavailable": "Disculpe, este agente no está disponible ahora. Intente más tarde. Adiós.",
        "goodbye": "Gracias por llamar. ¡Adiós!",
        "max_duration": "Disculpe, llegamos al tiempo máximo de esta llamada. Gracias por llamar. ¡Adiós!",
        "slow_answer": "Disculpe, esto está tardando más de lo normal. ¿Puede repetirlo?",
        "still_working": "Disculpe la espera, todavía estoy en eso.",
    },
    "it": {
        "apology": "Mi scusi, al momento ho difficoltà a rispondere. Può ripetere?",
        "handoff": "Un momento, la passo a una persona.",
        "unavailable": "Mi scusi, questo agente non è disponibile al momento. Riprovi più tardi. Arrivederci.",
        "goodbye": "Grazie per aver chiamato. Arrivederci!",
        "max_duration": "Mi scusi, abbiamo raggiunto il tempo massimo per questa chiamata. Grazie e arrivederci!",
        "slow_answer": "Mi scusi, ci sto mettendo più del previsto. Può ripetere?",
        "still_working": "Mi scusi per l'attesa, ci sto ancora lavorando.",
    },
}


def phrase(key: str, language: str) -> str:
    table = _PHRASES.get(language) or _PHRASES.get(language.split("-")[0]) or _PHRASES["en"]
    return table[key]
