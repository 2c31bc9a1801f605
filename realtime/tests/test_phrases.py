"""The session's fixed sentences: every language has every one, and a tag falls back to its language."""

from __future__ import annotations

import pytest

from realtime.engine.phrases import _PHRASES, phrase

LANGUAGES = ("en-US", "es-ES", "es-US", "it-IT")


@pytest.mark.parametrize("key", sorted(_PHRASES["en"]))
def test_every_language_says_every_phrase_in_its_own_words(key):
    said = {language: phrase(key, language) for language in LANGUAGES}
    assert all(text.strip() for text in said.values())
    assert said["es-ES"] != said["en-US"] and said["it-IT"] != said["en-US"]
    assert phrase(key, "fr-FR") == said["en-US"]  # a language without a table speaks English


def test_a_slow_answer_apologizes_and_asks_again_and_a_long_wait_is_announced():
    assert (
        phrase("slow_answer", "en-US") == "I'm sorry, this is taking longer than it should. Could you say that again?"
    )
    assert phrase("still_working", "es-US") == "Disculpe la espera, todavía estoy en eso."
