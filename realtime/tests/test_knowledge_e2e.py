"""End to end through the project's ASGI application in the test's process (testing/inprocess.py): a caller asks five questions about an uploaded plain-text FAQ
and each is answered with its own fact (issue 18: one chunk of the whole FAQ answered every question
with its first paragraph, title included).

The FAQ is uploaded as a .txt file through the public API of the application, which indexes it (inline
in the tests, BACKGROUND_WORK=inline; the serving process's background worker is proven through real
servers in voiceagent/tests/test_restarts.py); the caller speaks recorded eSpeak NG sentences
over the browser socket (see test_agent_e2e.py on recognition of synthesized speech). The questions
are close to the FAQ's own, which the agent's language model holds, in the `leo` voice, which the
recognizer hears best: each was heard right in repeated runs through the server, in one call, in this
order. Other wordings tried were misheard into other facts or none ("Where can I park my car?" as "on
dog" in the `eve` voice; "Is there a swimming pool?" as "zero two two" in `leo`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from testing.conversations import Caller, Exchange, agent_for, conversation, tool_events
from testing.daphne import wait_until_indexed
from testing.documents import HOTEL_FAQ, HOTEL_TITLE
from testing.inprocess import InProcessServer, serving
from testing.voice import record_voice

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

# Typed in the same call, not spoken: on a loaded machine (CI's two suites at once) the offline recognizer
# heard "Do you have a swimming pool?" as "do you have what's two" in both suites, while it hears it right
# on a quiet one (issue 35: the recognizer at its limits). What this test proves, each question answered
# with its own fact, is the same for a typed turn.
TYPED = {"Do you have a swimming pool?"}
# What the caller asks -> words of the one fact that answers it (the FAQ's five facts share none).
QUESTIONS = {
    "Where can I park my car?": ("underground garage",),
    "When is the restaurant open?": ("breakfast", "dinner"),
    "Do you have a swimming pool?": ("heated indoor pool",),
    "When is check out?": ("check-out is at 11 am",),
    "Can I bring my dog?": ("dogs and cats are welcome",),
}


@pytest.fixture
def server(settings: Any) -> Iterator[InProcessServer]:
    with serving(settings) as started:
        yield started


@pytest.fixture(scope="module")
def voice(tmp_path_factory: Any) -> dict[str, bytes]:
    return record_voice(tuple(QUESTIONS), tmp_path_factory.mktemp("voice"), voice_name="leo")


def upload_faq(server: InProcessServer, api_key: str, agent_id: str) -> dict[str, Any]:
    """Upload the FAQ as a file through the application's API and wait until it is indexed; its list item."""
    path = f"/public/v1/agents/{agent_id}/knowledge"
    headers = {"Authorization": f"Bearer {api_key}"}
    with server.http(headers=headers) as http:
        response = http.post(path, files={"file": ("hotel-faq.txt", HOTEL_FAQ.encode(), "text/plain")})
        assert response.status_code == 200, response.text

        def listed() -> list[dict[str, Any]]:
            answer = http.get(path)
            assert answer.status_code == 200, answer.text
            return answer.json()

        return wait_until_indexed(listed, response.json()["id"])


async def test_each_question_about_an_uploaded_faq_is_answered_with_its_own_fact(
    server, voice, owner, make_agent, realtime_settings
):
    sandy = await sync_to_async(agent_for)(
        owner, make_agent, name="Sandy", instructions="You answer questions about the Seaview Hotel."
    )
    item = await asyncio.to_thread(upload_faq, server, owner.api_key, str(sandy.pk))
    assert (item["status"], item["name"], item["chunkCount"]) == ("ready", HOTEL_TITLE, 5)

    async def talk(caller: Caller) -> list[Exchange]:
        exchanges = [await caller.say(question, typed=question in TYPED) for question in QUESTIONS]
        await caller.hang_up()
        return exchanges

    exchanges = await conversation(server, sandy, voice, talk)
    for (question, words), exchange in zip(QUESTIONS.items(), exchanges, strict=True):
        said = exchange.said.lower()
        assert all(word in said for word in words), (question, exchange.heard, exchange.said)
        others = [word for other in QUESTIONS.values() if other != words for word in other if word in said]
        assert others == [], (question, exchange.heard, exchange.said)
        assert "seaview hotel" not in said and "frequently asked" not in said, exchange.said
        assert len(exchange.said.split()) <= 35, exchange.said
        assert tool_events(exchange) == [("tool.started", "search_knowledge"), ("tool.finished", "search_knowledge")]
