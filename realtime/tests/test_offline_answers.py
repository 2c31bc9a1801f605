"""The rules behind offline answers (issue 37): Q&A passages in their usual forms answered without labels
and with their figures, numbers read aloud as callers expect, topics named when nothing answers, and the
post-call summary without a language model. End to end: test_offline_answers_e2e.py."""

from __future__ import annotations

import pytest

from knowledge import faq
from knowledge.suggest import suggest_description
from realtime.analysis.summary import ToolUse, summarize_call
from realtime.engine.brain.embedded.answers import answer_from_prompt, passage_topics, prompt_facts, speak_passage
from realtime.engine.speech.reading import spoken_form

FORMS = {
    "labels": "Q: What if I have an emergency?\nA: A dentist is on call 24 hours a day. Call 555 0199.",
    "words": "Question: What if I have an emergency?\nAnswer: A dentist is on call 24 hours a day. Call 555 0199.",
    "numbered": "Q1. What if I have an emergency? A1. A dentist is on call 24 hours a day. Call 555 0199.",
    "bold labels": "**Q:** What if I have an emergency?\n**A:** A dentist is on call 24 hours a day. Call 555 0199.",
    "heading": "## What if I have an emergency?\n\nA dentist is on call 24 hours a day. Call 555 0199.",
    "bullet": "- **What if I have an emergency?** A dentist is on call 24 hours a day. Call 555 0199.",
    "plain": "What if I have an emergency?\nA dentist is on call 24 hours a day. Call 555 0199.",
}
OTHER = "\n\nQ: Where can I park?\nA: Free parking is behind the building on Elm Street.\n"


@pytest.mark.parametrize("form", FORMS)
def test_a_qa_passage_in_any_usual_form_is_answered_with_its_answer_and_its_phone_number(form: str) -> None:
    answer = speak_passage(FORMS[form] + OTHER, "i have a dental emergency")
    assert answer == "A dentist is on call 24 hours a day. Call 555 0199.", answer


def test_prose_keeps_the_figure_of_the_sentence_after_the_best_one_and_never_a_heading() -> None:
    passage = (
        "# Emergencies\n\nOur dentists see emergencies every day. A dentist is on call around the clock for emergencies. "
        "Ring 555 0199 to reach them.\n\nParking is free behind the building."
    )
    answer = speak_passage(passage, "who do I call in an emergency", document="Clinic guide")
    assert "555 0199" in answer and "Emergencies" not in answer.split(".")[0] and "#" not in answer, answer


def test_a_long_answer_keeps_its_best_sentences_whole() -> None:
    passage = "Q: When are you open?\nA: " + " ".join(
        [
            "We are a family practice founded long ago by two brothers from the valley.",
            "Our team includes four dentists and two hygienists who love their work.",
            "We are open on weekdays from 8:30 am to 5:30 pm and on Saturday from 9 am to 1 pm.",
            "We speak English, Spanish and Italian with every patient who asks for it.",
        ]
    )
    answer = speak_passage(passage, "are you open on saturday")
    assert "8:30 am to 5:30 pm" in answer and "9 am to 1 pm" in answer and "A:" not in answer, answer
    assert not answer.endswith("..."), answer


def test_the_facts_of_a_prompt_answer_and_its_directives_do_not() -> None:
    prompt = "Answer questions about opening hours. We are open on Saturday from 10 am to 2 pm. Be brief."
    assert prompt_facts(prompt) == ["We are open on Saturday from 10 am to 2 pm."]
    assert answer_from_prompt([prompt], "what are you open on saturday") == prompt_facts(prompt)[0]
    assert answer_from_prompt([prompt], "can i bring my dog") == ""


def test_topics_are_named_from_questions_and_sections_never_the_title() -> None:
    assert faq.topic_of("What are your opening hours?") == "opening hours"
    assert faq.topic_of("Where can I park my car?") == "parking"
    assert faq.topic_of("Do you take insurance?") == "insurance"
    text = "Bright Smile FAQ\n\n" + FORMS["labels"] + OTHER
    assert passage_topics([(text, "Bright Smile FAQ", "")]) == ["emergency", "parking"]
    sections = "# Clinic\n\n## Parking\n\nFree parking behind the building.\n\n## Opening hours\n\nWe open at 8."
    assert passage_topics([(sections, "Clinic", "")]) == ["parking", "opening hours"]


def test_the_description_suggested_for_a_qa_file_names_its_topics() -> None:
    text = "# Bright Smile FAQ\n\n" + FORMS["labels"] + OTHER + "\nQ: Do you take insurance?\nA: Most PPO plans.\n"
    assert suggest_description(text) == "Answers to questions about emergency, parking and insurance."
    sections = "# Clinic\n\n## Parking\n\nFree parking behind the building.\n\n## Opening hours\n\nWe open at 8."
    assert suggest_description(sections) == "About parking and opening hours."


@pytest.mark.parametrize(
    ("written", "spoken"),
    [
        ("Call 555 0199 now.", "Call five five five, zero one nine nine now."),
        ("Call +1 (415) 555-0123.", "Call plus one, four one five, five five five, zero one two three."),
        ("From 8:30 am to 5 pm.", "From eight thirty a m to five p m."),
        ("Breakfast is at 7:05, lunch at 12:00.", "Breakfast is at seven oh five, lunch at twelve o'clock."),
        (
            "A cleaning costs $120, a check-up €4.50.",
            "A cleaning costs one hundred and twenty dollars, a check-up four euros fifty.",
        ),
        ("Save 15% on the 1st visit.", "Save fifteen percent on the first visit."),
        ("Order 3561 shipped.", "Order 3561 shipped."),
        ("No figures here.", "No figures here."),
    ],
)
def test_numbers_are_read_as_a_caller_expects(written: str, spoken: str) -> None:
    assert spoken_form(written, "en-US") == spoken


def test_a_phone_number_is_read_digit_by_digit_in_other_languages_too() -> None:
    assert spoken_form("Llame al 555 0199.", "es-US") == "Llame al cinco cinco cinco, cero uno nueve nueve."


def test_the_offline_summary_is_what_the_caller_wanted_and_what_happened() -> None:
    messages = [
        ("assistant", "Hi, I'm Ava. How can I help?"),
        ("user", "Hello."),
        ("user", "I need a table for four people tonight."),
        ("assistant", "You are booked."),
        ("user", "Thanks, bye."),
    ]
    tools = [
        ToolUse("book_table", "success", '{"message": "Table for 4 booked at 8 pm, reference AB12."}'),
        ToolUse("send_sms", "error", '{"error": "The SMS gateway is down"}'),
        ToolUse("search_knowledge", "success", '{"passages": []}'),
        ToolUse("transfer_call", "success", '{"transferred": true}'),
    ]
    summary = summarize_call(messages, tools, ended_reason="transferred")
    assert summary == (
        "Caller: I need a table for four people tonight. Book table: Table for 4 booked at 8 pm, reference AB12. "
        "Send sms failed (error: The SMS gateway is down). Transferred to a person."
    )
    assert summarize_call([("user", "I would like to book a table.")], ended_reason="caller-hung-up") == (
        "Caller: I would like to book a table."
    )
    assert summarize_call([("user", "Hi!")]) == ""
