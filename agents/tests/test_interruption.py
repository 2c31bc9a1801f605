"""agents.interruption: what the words heard while the agent speaks are (kind_of), and the engine's view of
an agent's setting (interruption_for)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agents.interruption import Interruption, default_backchannels, interruption_for, normalize_text


def english(min_words: int = 1) -> Interruption:
    return interruption_for(SimpleNamespace(language="en-US", interruption={"mode": "adaptive", "minWords": min_words}))


@pytest.mark.parametrize(
    ("heard", "one_word", "two_words"),
    [
        ("", "noise", "noise"),
        ("uh", "noise", "noise"),
        ("Um... hmm.", "noise", "noise"),
        ("a", "noise", "noise"),
        ("okay", "backchannel", "backchannel"),
        ("OK.", "backchannel", "backchannel"),
        ("yeah, right", "backchannel", "backchannel"),
        ("I see", "backchannel", "backchannel"),
        ("uh okay", "backchannel", "backchannel"),
        ("Mm hmm.", "backchannel", "backchannel"),
        ("mm-hmm, right", "backchannel", "backchannel"),
        ("uh huh", "backchannel", "backchannel"),
        ("Uh-huh!", "backchannel", "backchannel"),
        ("wait", "real", "backchannel"),
        ("Stop.", "real", "backchannel"),
        ("okay wait", "real", "backchannel"),
        ("Stop. What time do you open?", "real", "real"),
        ("Yeah, but what about Sunday?", "real", "real"),
        ("No, not that one", "real", "real"),
    ],
)
def test_what_the_caller_said_while_the_agent_spoke(heard, one_word, two_words):
    assert english(1).kind_of(heard) == one_word
    assert english(2).kind_of(heard) == two_words
    # minWords 0 is one word, as 1.
    assert english(0).kind_of(heard) == one_word


def test_an_agent_without_its_own_backchannels_has_its_languages():
    spanish = interruption_for(SimpleNamespace(language="es-US", interruption=None))
    assert spanish.kind_of("Vale, sí.") == "backchannel"
    assert spanish.kind_of("Ajá") == "backchannel"
    assert spanish.kind_of("Espere, ¿a qué hora abren?") == "real"
    italian = interruption_for(SimpleNamespace(language="it-IT", interruption=None))
    assert italian.kind_of("Va bene, d'accordo.") == "backchannel"
    # A stored value that is not valid (written around the API) is the default, not a failed call.
    assert interruption_for(SimpleNamespace(language="en-US", interruption="loud")) == english(1)
    assert default_backchannels("xx-YY") == default_backchannels("en")


def test_an_agents_own_list_replaces_its_languages():
    setting = {"mode": "vad", "minWords": 3, "backchannels": ["Sounds good", "ok"], "resumeAfterMs": 250}
    own = interruption_for(SimpleNamespace(language="en-US", interruption=setting))
    assert (own.mode, own.min_words, own.resume_after_ms) == ("vad", 3, 250)
    assert own.backchannels == frozenset({"sounds good", "okay"})
    assert own.kind_of("sounds good, okay") == "backchannel"
    assert own.kind_of("yeah") == "backchannel"  # fewer than three other words
    assert own.kind_of("yeah I see that") == "real"
    none = interruption_for(SimpleNamespace(language="en-US", interruption={"backchannels": []}))
    assert none.kind_of("okay") == "real"
    assert none.kind_of("hmm") == "noise"


def test_text_is_compared_without_case_punctuation_or_hyphens():
    assert normalize_text("Mm hmm, OK!") == "mm-hmm okay"
    assert normalize_text("uh\u2011huh \u2014 alright") == "uh-huh all right"
    assert normalize_text("I'm  here") == "i'm here"
    assert normalize_text("¡Sí!") == "si"
