"""End to end through the project's ASGI application in the test's process (testing/inprocess.py):
offline answers that sound right (issue 37, docs/guides/brains.md, docs/guides/post-call-analysis.md).

Typed sessions over the browser socket with the embedded brain: a Q&A file uploaded through the API is
answered without its `Q:`/`A:` labels and with its phone number and times; a question the documents do
not answer gets an answer that names topics of the documents; the README's example agent answers its own
question from the facts of its instructions; the post-call summary without a language model names what
the caller wanted and the outcome of the tool the agent used, not the transcript; and the description
suggested for the Q&A file describes it instead of quoting its first question.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from testing.agents import with_order_tool
from testing.clients import VoiceClient, is_type
from testing.conversations import agent_for, session_token, socket_url
from testing.waiting import polled
from testing.webhooks import LoopbackReceiver, Reply, receivers_fixture  # noqa: F401 - the receivers fixture

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

# A Q&A file as people write them: a title, labels, a phone number, times and a price.
DENTAL_FAQ = """Bright Smile Dental - Frequently Asked Questions

Q: When are you open?
A: We are open Monday to Friday from 8:30 am to 5:30 pm, and on Saturday from 9 am to 1 pm.

Q: What should I do in a dental emergency?
A: A dentist is on call 24 hours a day. Call our emergency line at 555 0199 and leave your name.

Q: Do you take insurance?
A: We accept most PPO plans. A cleaning without insurance costs $120.
"""
TOPICS = ("opening hours", "dental emergency", "insurance")
SHIPPED = "Order 3561 shipped yesterday and arrives on Friday."
# The README's (docs/getting-started.md) example agent.
README_INSTRUCTIONS = (
    "Answer questions about opening hours. We are open Monday to Friday from 9 am to 6 pm, "
    "and on Saturday from 10 am to 2 pm."
)


async def answer(client: VoiceClient, text: str) -> str:
    """Type `text`; the agent's answer."""
    before = len(client.messages)
    await client.send_text(text)
    said = await client.wait_for(is_type("transcript", role="user"), after=before, timeout=30)
    answered = await client.wait_for(is_type("transcript", role="assistant"), after=said, timeout=30)
    return str(client.messages[answered].message["text"])


async def test_a_qa_file_is_answered_without_labels_keeping_its_phone_number_and_times_and_named_when_it_cannot(
    loopback_server, owner, make_agent, realtime_settings
):
    agent = await sync_to_async(agent_for)(
        owner, make_agent, name="Mia", instructions="You answer the questions of Bright Smile Dental's patients."
    )
    upload = await sync_to_async(owner.client.post)(
        f"/public/v1/agents/{agent.pk}/knowledge", {"content": DENTAL_FAQ}, format="json"
    )
    assert upload.status_code == 200, upload.content
    # The suggested description describes the file; it is not its first question or answer.
    description = upload.json()["description"]
    assert description.startswith("Answers to questions about "), description
    assert all(topic in description for topic in TOPICS), description
    assert "?" not in description and "A:" not in description

    async with VoiceClient(
        socket_url(loopback_server, agent, await session_token(owner, agent, {"modality": "text"}))
    ) as client:
        await client.wait_for(is_type("session.started"), timeout=60)
        emergency = await answer(client, "What should I do in a dental emergency?")
        saturday = await answer(client, "Are you open on Saturday?")
        price = await answer(client, "How much is a cleaning without insurance?")
        unknown = await answer(client, "Do you sell electric toothbrushes?")

    for said in (emergency, saturday, price):
        assert "A:" not in said and "Q:" not in said and "?" not in said, said
        assert "Bright Smile" not in said and "Frequently" not in said, said
    assert emergency == "A dentist is on call 24 hours a day. Call our emergency line at 555 0199 and leave your name."
    assert "8:30 am to 5:30 pm" in saturday and "Saturday from 9 am to 1 pm" in saturday, saturday
    assert "$120" in price, price
    # Nothing about toothbrushes: it says so and names topics of its documents, not only who it is.
    assert unknown.startswith("Sorry, I don't know that."), unknown
    assert "I can help with questions about " in unknown and any(topic in unknown for topic in TOPICS), unknown
    assert "Mia" not in unknown


async def test_the_readme_example_agent_answers_its_question_from_its_instructions(
    loopback_server, owner, make_agent, realtime_settings
):
    agent = await sync_to_async(agent_for)(owner, make_agent, name="Front desk", instructions=README_INSTRUCTIONS)
    async with VoiceClient(
        socket_url(loopback_server, agent, await session_token(owner, agent, {"modality": "text"}))
    ) as client:
        await client.wait_for(is_type("session.started"), timeout=60)
        # The question as the offline recognizer hears docs/examples/question.wav.
        saturday = await answer(client, "what are you open on saturday")
        who = await answer(client, "who are you")
    assert saturday == ("We are open Monday to Friday from 9 am to 6 pm, and on Saturday from 10 am to 2 pm."), saturday
    assert who.startswith("I'm Front desk."), who


async def test_the_offline_summary_of_a_call_names_what_the_caller_wanted_and_the_tools_outcome(
    loopback_server, owner, make_agent, realtime_settings, receivers
):
    hook = receivers(Reply(json={"message": SHIPPED}))

    def build() -> Any:
        agent = agent_for(
            owner,
            make_agent,
            name="Olive",
            instructions="You answer questions about orders.",
            agent_type="webhook",
            server_url=hook.url("/hooks/voice"),
            server_secret="whsec-summary-8Jd1",
        )
        return with_order_tool(agent)

    agent = await sync_to_async(build)()
    async with VoiceClient(
        socket_url(loopback_server, agent, await session_token(owner, agent, {"modality": "text"}))
    ) as client:
        started = await client.wait_for(is_type("session.started"), timeout=60)
        call_id = client.messages[started].message["callId"]
        await answer(client, "Hello there.")
        assert await answer(client, "What is the status of order 3561?") == SHIPPED
        await answer(client, "Thank you, that is all.")

    async def analysed() -> dict[str, Any] | None:
        detail = await sync_to_async(owner.client.get)(f"/public/v1/calls/{call_id}")
        analysis = detail.json()["analysis"]
        return analysis if analysis and analysis["status"] != "pending" else None

    analysis = await polled(analysed, what=f"the analysis of call {call_id}", timeout=60)
    assert analysis["status"] == "completed" and analysis["model"] == "embedded", analysis
    summary = analysis["summary"]
    # "that is all" ended the call (end_call): the way it ended is said too.
    expected = f"Caller: What is the status of order 3561? Check order status: {SHIPPED} The agent ended the call."
    assert summary == expected, summary
    # Not the transcript: no greeting, no thanks, no agent lines.
    assert "Hello" not in summary and "Thank you" not in summary and "Agent:" not in summary
