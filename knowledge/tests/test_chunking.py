"""Chunking and extraction rules, on text written here."""

from __future__ import annotations

from knowledge.chunking import (
    MAX_TOKENS,
    MIN_TOKENS,
    OVERLAP_TOKENS,
    TARGET_TOKENS,
    chunk_pages,
    split_sentences,
)
from knowledge.embeddings import count_tokens
from knowledge.suggest import suggest_description, suggest_name


def test_sections_follow_headings_and_code_fences_are_not_headings():
    text = "# A\nIntro.\n\n## B\nBody of B.\n\n```\n# not a heading\n```\n\n### C\nBody of C.\n\n# D\nBody of D."
    chunks = chunk_pages([text], markdown=True, paged=False)
    assert [c.heading_path for c in chunks] == [["A"], ["A", "B"], ["A", "B", "C"], ["D"]]
    assert "# not a heading" in chunks[1].text


def test_plain_text_has_no_headings():
    chunks = chunk_pages(["# not markdown here\nJust text."], markdown=False, paged=False)
    assert chunks[0].heading_path == [] and chunks[0].text.startswith("# not markdown")


def test_long_sections_are_split_with_overlap_and_within_the_model_window():
    sentences = [f"Fact number {i} says that parcel {i} travels to city {i}." for i in range(80)]
    chunks = chunk_pages(["## Facts\n" + " ".join(sentences) + " " + "word " * 700], markdown=True, paged=False)
    assert len(chunks) > 4
    for chunk in chunks:
        assert chunk.token_count <= MAX_TOKENS
        assert count_tokens([chunk.text])[0] <= MAX_TOKENS + 5
        assert chunk.heading_path == ["Facts"]
    assert chunks[0].token_count > TARGET_TOKENS * 0.8
    # The second chunk starts with the last sentences of the first one, up to OVERLAP_TOKENS.
    first, second = split_sentences(chunks[0].text), split_sentences(chunks[1].text)
    shared = [s for s in second if s in first]
    assert shared and second[: len(shared)] == first[-len(shared) :]
    assert sum(count_tokens(shared)) <= OVERLAP_TOKENS
    # Every sentence is somewhere.
    joined = " ".join(c.text for c in chunks)
    assert all(s in joined for s in sentences)


def test_the_overlap_never_pushes_a_chunk_past_the_maximum():
    # A sentence just under MAX_TOKENS after a chunk whose last sentence would be its overlap.
    opening = " ".join(["alpha"] * 95) + "."
    short = "Beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau."
    long_sentence = "Long " + " ".join(f"word{i}" for i in range(99)) + "."
    assert OVERLAP_TOKENS >= count_tokens([short])[0]
    assert TARGET_TOKENS < count_tokens([long_sentence])[0] <= MAX_TOKENS

    chunks = chunk_pages([f"{opening} {short} {long_sentence}"], markdown=True, paged=False)

    assert all(count_tokens([chunk.text])[0] <= MAX_TOKENS for chunk in chunks)
    assert all(chunk.token_count <= MAX_TOKENS for chunk in chunks)
    joined = " ".join(chunk.text for chunk in chunks)
    assert all(sentence in joined for sentence in (opening, short, long_sentence))


def test_pages_are_numbered_when_paged():
    chunks = chunk_pages(["First page text.", "", "Third page text."], markdown=False, paged=True)
    assert [c.page for c in chunks] == [1, 3]


def test_list_items_keep_their_lines():
    chunks = chunk_pages(["Steps:\n\n- unplug it\n- wait ten seconds\n- plug it in"], markdown=True, paged=False)
    assert chunks[0].text == "Steps:\n\n- unplug it\n- wait ten seconds\n- plug it in"


def test_plain_text_heading_lines_become_the_heading_path():
    text = (
        "Seaview Hotel\n\n"
        "Parking\nGuests park for free in the garage under the hotel, the entrance is on Harbour Street.\n\n"
        "Swimming pool\nThe heated indoor pool is open every day from eight in the morning until nine at night."
    )
    chunks = chunk_pages([text], markdown=False, paged=False)
    assert [(c.heading_path, c.text[:12]) for c in chunks] == [
        (["Seaview Hotel", "Parking"], "Guests park "),
        (["Seaview Hotel", "Swimming pool"], "The heated i"),
    ]


def test_two_heading_lines_in_a_row_are_a_title_and_a_section_and_carry_over_pages():
    pages = [
        "Guest Policy\nCancellation\nBookings can be cancelled for free until two days before the day of arrival.",
        "Children stay free of charge in their parents' room, and cots are available at the reception.",
    ]
    chunks = chunk_pages(pages, markdown=False, paged=True)
    assert [(c.heading_path, c.page) for c in chunks] == [
        (["Guest Policy", "Cancellation"], 1),
        (["Guest Policy", "Cancellation"], 2),
    ]


def test_short_lines_that_are_not_headings_keep_their_lines():
    # A wrapped sentence goes on in lower case; three short lines in a row are a list (a menu).
    text = (
        "Desserts of the House\nTiramisu 7 euros\nPanna cotta 6 euros\nAffogato 5 euros\n\n"
        "Every dessert is made in our own kitchen.\nThe Seaview Hotel\nserves them at the bar until midnight."
    )
    chunks = chunk_pages([text], markdown=False, paged=False)
    assert [c.heading_path for c in chunks] == [[], []]
    assert chunks[0].text == "Desserts of the House\nTiramisu 7 euros\nPanna cotta 6 euros\nAffogato 5 euros"
    assert chunks[1].text == (
        "Every dessert is made in our own kitchen.\nThe Seaview Hotel serves them at the bar until midnight."
    )


def test_each_paragraph_is_a_chunk_and_a_question_stays_with_its_answer():
    text = (
        "Where can I park?\n\nGuests park for free in the garage under the hotel; the entrance is on Harbour Street.\n\n"
        "Breakfast is served in the Harbour Restaurant from seven to ten o'clock in the morning, every day.\n\n"
        "Note:\n\n- Towels are provided at the pool\n- Bathrobes are in every room\n\n"
        "Thank you!"
    )
    chunks = chunk_pages([text], markdown=True, paged=False)
    assert [c.text for c in chunks] == [
        "Where can I park?\n\nGuests park for free in the garage under the hotel; the entrance is on Harbour Street.",
        "Breakfast is served in the Harbour Restaurant from seven to ten o'clock in the morning, every day.",
        # A lead-in stays with its list, a short last paragraph joins the chunk before it.
        "Note:\n\n- Towels are provided at the pool\n- Bathrobes are in every room\n\nThank you!",
    ]
    assert count_tokens(["Thank you!"])[0] < MIN_TOKENS


def test_a_short_paragraph_stays_with_the_next_one():
    text = "Parking.\n\nGuests park for free in the garage under the hotel; the entrance is on Harbour Street."
    (chunk,) = chunk_pages([text], markdown=False, paged=False)
    assert chunk.text.startswith("Parking.\n\nGuests park")


def test_name_suggestion():
    assert suggest_name("Intro\n# The Title *here*\n", markdown=True) == "The Title here"
    assert suggest_name("\n---\n\n**Opening hours:**\nText", markdown=True) == "Opening hours"
    assert suggest_name("12345\n", markdown=False, fallback="file") == "file"
    assert len(suggest_name("word " * 100, markdown=False)) <= 200


def test_description_is_one_representative_sentence_of_at_most_200_characters():
    text = (
        "# Shipping\n\nWe ship parcels to Spain, Portugal and France within three days. "
        "Parcels to Spain and Portugal are tracked from the warehouse to your door. "
        "Bananas are yellow. "
        "Shipping to France costs five euros per parcel and is tracked too."
    )
    description = suggest_description(text)
    assert description in text and description != "Bananas are yellow."
    long = suggest_description("This sentence goes on " + "and on " * 80 + "until it ends.")
    assert long.endswith("…") and len(long) <= 200
    assert suggest_description("# Heading\n\n1 2 3") is None
