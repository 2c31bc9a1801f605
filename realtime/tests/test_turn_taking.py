"""How the quick end of turn reads a caller's words so far (realtime/engine/cascade/turn_taking.py); the
behaviour through a real server is tested in test_socket_e2e.py (a finished question is answered in a
400 ms pause, "My number is ... four five six ... seven" stays one turn, a caller who goes on before
hearing the answer is one turn answered once), and a caller who goes on in test_pipeline.py."""

from __future__ import annotations

import pytest

from realtime.engine.cascade.turn_taking import FINISHED, UNFINISHED, UNSURE, reading

PAIRS = {("on", "saturday"), ("table", "please"), ("thank", "you"), ("opening", "hours"), ("a", "bot")}


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("what time do you open on saturday", FINISHED),
        ("a table please", FINISHED),
        ("thank you", FINISHED),
        ("yes", FINISHED),
        ("goodbye", FINISHED),
        ("my number is", UNFINISHED),  # an auxiliary verb
        ("four five six", UNFINISHED),  # dictation goes on in groups
        ("call me at 555", UNFINISHED),
        ("i would like to", UNFINISHED),  # a preposition
        ("can i book a table and", UNFINISHED),  # a conjunction
        ("i need a table for", UNFINISHED),
        ("the code is x", UNFINISHED),  # a letter
        ("um", UNFINISHED),
        ("maybe", UNFINISHED),  # a single word that is not a one-word answer
        ("", UNFINISHED),
        ("what are your opening hours", FINISHED),
        ("i need a table bot", UNSURE),  # reads finished, but the model never saw "table bot"
        ("are you a bot", FINISHED),
        ("can you", UNFINISHED),  # a question whose verb is still to come
        ("could you tell me", UNFINISHED),
        ("do you", UNFINISHED),
    ],
)
def test_words_read_as_finished_unfinished_or_unsure(words, expected):
    assert reading(words, "en-US", PAIRS) == expected


def test_without_a_language_model_every_ending_that_reads_finished_is_trusted():
    assert reading("i need a table bot", "en-US") == FINISHED


def test_languages_without_word_lists_keep_the_full_window():
    assert reading("gracias", "es-ES", PAIRS) == UNFINISHED
