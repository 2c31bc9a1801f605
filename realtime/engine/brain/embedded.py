"""The offline `embedded` responder of this release: it acknowledges each user turn by repeating what
it understood. It is a deterministic stand-in so that the product runs and is tested offline, not an
LLM; tools and language models arrive with the next release behind the same interface."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from realtime.engine.brain import BrainOutput, TextPiece, Turn

_ACK = {
    "en": ("You said: {text}.", "Sorry, I did not catch that. Could you say it again?"),
    "es-ES": ("Ha dicho: {text}.", "Perdone, no le he entendido. ¿Puede repetirlo?"),
    "es": ("Usted dijo: {text}.", "Disculpe, no le entendí. ¿Puede repetirlo?"),
    "it": ("Ha detto: {text}.", "Mi scusi, non ho capito. Può ripetere?"),
}


def _phrases(language: str) -> tuple[str, str]:
    return _ACK.get(language) or _ACK.get(language.split("-")[0]) or _ACK["en"]


class EmbeddedBrain:
    def __init__(self, *, language: str) -> None:
        self.language = language

    async def respond(self, conversation: Sequence[Turn]) -> AsyncIterator[BrainOutput]:
        heard = next((turn.text for turn in reversed(conversation) if turn.role == "user"), "")
        said, missed = _phrases(self.language)
        yield TextPiece(said.format(text=heard.strip()) if heard.strip() else missed)
