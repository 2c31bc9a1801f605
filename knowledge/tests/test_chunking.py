"""Chunking and extraction rules, on text written here."""

from __future__ import annotations

from knowledge.chunking import MAX_TOKENS, OVERLAP_TOKENS, TARGET_TOKENS, chunk_pages, split_sentences
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
