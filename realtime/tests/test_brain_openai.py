"""The `openai` brain against a scripted OpenAI-compatible server on a loopback port."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kit.providers import ProviderError
from realtime.engine.brain.openai_chat import OpenAIChatBrain, configuration_problems
from realtime.engine.contracts import BrainContext, BrainOutput, TextPiece, ToolCall, ToolSpec, Turn, Usage
from testing.chat_server import Call, ChatServer, Error, Gate, Text, Tools, chat_server  # noqa: F401

API_KEY = "sk-test-0123456789abcdefSECRET"
MODEL = "test-model"

ORDER_TOOL = ToolSpec(
    name="lookup_order",
    description="Find an order by its number.",
    parameters={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
)
CONTEXT = BrainContext(
    agent_name="Ava",
    language="en-US",
    identity="A friendly assistant of Acme Bikes.",
    instructions="Help callers track their orders.",
    disclosure="Just so you know, you are speaking with an AI, not a person.",
    greeting="Hi, this is Ava from Acme Bikes.",
    tools=(ORDER_TOOL,),
)
HISTORY = (Turn(role="user", text="Where is my order A-17?"),)


@pytest.fixture
def llm_settings(settings: Any, chat_server: ChatServer) -> Any:  # noqa: F811 - the chat_server fixture
    settings.LLM_PROVIDER = "openai"
    settings.LLM_BASE_URL = chat_server.base_url
    settings.LLM_API_KEY = API_KEY
    settings.LLM_MODEL = MODEL
    settings.LLM_TIMEOUT_SECONDS = 5.0
    settings.LLM_MAX_TOKENS = 300
    settings.LLM_TEMPERATURE = None
    return settings


@pytest.fixture
async def brain(llm_settings: Any) -> AsyncIterator[OpenAIChatBrain]:
    brain = OpenAIChatBrain(language="en-US")
    yield brain
    await brain.aclose()


async def collect(outputs: AsyncIterator[BrainOutput]) -> list[BrainOutput]:
    return [output async for output in outputs]


async def failure(brain: OpenAIChatBrain, context: BrainContext = CONTEXT) -> ProviderError:
    with pytest.raises(ProviderError) as raised:
        await collect(brain.respond(context, HISTORY))
    assert API_KEY not in str(raised.value)
    return raised.value


# --- streaming ----------------------------------------------------------------------------------------
async def test_it_yields_text_as_it_arrives(brain: OpenAIChatBrain, chat_server: ChatServer) -> None:  # noqa: F811 - the chat_server fixture
    release, holding = Gate(), Gate()
    pieces = ["Your order", " is on its way.", " It arrives", " tomorrow."]
    chat_server.script(Text(pieces, hold=release, hold_after=1, holding=holding, model="test-model-0613"))

    outputs = brain.respond(CONTEXT, HISTORY)
    first = await anext(outputs)

    assert first == TextPiece("Your order")
    assert holding.opened and not release.opened  # the server has not sent the rest yet
    release.open()
    rest = await collect(outputs)
    assert rest == [
        TextPiece(" is on its way."),
        TextPiece(" It arrives"),
        TextPiece(" tomorrow."),
        Usage(provider="openai", model="test-model-0613", input_tokens=25, output_tokens=7),
    ]


async def test_closing_the_answer_closes_its_request(brain: OpenAIChatBrain, chat_server: ChatServer) -> None:  # noqa: F811 - the chat_server fixture
    chat_server.script(Text(["Your order", " is on its way."], hold=Gate(), hold_after=1))
    outputs = brain.respond(CONTEXT, HISTORY)
    assert await anext(outputs) == TextPiece("Your order")

    await outputs.aclose()  # the caller barged in

    async with asyncio.timeout(5):
        await chat_server.client_left.wait()
    assert chat_server.disconnects == 1


async def test_it_reports_the_usage_of_each_request(brain: OpenAIChatBrain, chat_server: ChatServer) -> None:  # noqa: F811 - the chat_server fixture
    chat_server.script(Text("Sure.", usage=(31, 9)), Text("Okay.", usage=None))

    first = await collect(brain.respond(CONTEXT, HISTORY))
    second = await collect(brain.respond(CONTEXT, HISTORY))

    assert first[-1] == Usage(provider="openai", model=MODEL, input_tokens=31, output_tokens=9)
    assert second == [TextPiece("Okay."), Usage(provider="openai", model=MODEL, input_tokens=0, output_tokens=0)]


async def test_it_does_not_speak_a_leading_think_block(brain: OpenAIChatBrain, chat_server: ChatServer) -> None:  # noqa: F811 - the chat_server fixture
    chat_server.script(Text(["<thi", "nk>The caller wants", " the order.</th", "ink>\n\nLet me", " check."]))

    outputs = await collect(brain.respond(CONTEXT, HISTORY))

    assert "".join(o.text for o in outputs if isinstance(o, TextPiece)) == "Let me check."


# --- tool calls -----------------------------------------------------------------------------------
async def test_it_puts_tool_call_fragments_together(brain: OpenAIChatBrain, chat_server: ChatServer) -> None:  # noqa: F811 - the chat_server fixture
    arguments = {"order_id": "A-17", "note": 'caller said "quickly", please'}
    chat_server.script(Tools(Call("lookup_order", arguments, id="call_abc123"), text="Let me check.", usage=(40, 12)))

    outputs = await collect(brain.respond(CONTEXT, HISTORY))

    assert outputs == [
        TextPiece("Let me"),
        TextPiece(" check."),
        ToolCall(id="call_abc123", name="lookup_order", arguments=arguments),
        Usage(provider="openai", model=MODEL, input_tokens=40, output_tokens=12),
    ]


async def test_it_yields_several_calls_in_index_order(brain: OpenAIChatBrain, chat_server: ChatServer) -> None:  # noqa: F811 - the chat_server fixture
    chat_server.script(Tools([Call("lookup_order", {"order_id": "A-17"}, id="c1"), Call("lookup_order", {}, id="c2")]))

    outputs = await collect(brain.respond(CONTEXT, HISTORY))

    assert [o for o in outputs if isinstance(o, ToolCall)] == [
        ToolCall(id="c1", name="lookup_order", arguments={"order_id": "A-17"}),
        ToolCall(id="c2", name="lookup_order", arguments={}),
    ]


async def test_it_accepts_whole_calls_with_object_arguments_and_no_id(
    brain: OpenAIChatBrain,
    chat_server: ChatServer,  # noqa: F811 - the chat_server fixture
) -> None:
    chat_server.script(Tools(Call("lookup_order", {"order_id": "B-2"}, id=None, as_object=True), whole=True))

    call = next(o for o in await collect(brain.respond(CONTEXT, HISTORY)) if isinstance(o, ToolCall))

    assert call.name == "lookup_order" and call.arguments == {"order_id": "B-2"}
    assert call.id.startswith("call_") and len(call.id) > 10


async def test_it_calls_with_no_arguments_when_they_are_not_json(
    brain: OpenAIChatBrain,
    chat_server: ChatServer,  # noqa: F811 - the chat_server fixture
) -> None:
    chat_server.script(Tools(Call("lookup_order", '{"order_id": "A-', id="call_bad")))

    outputs = await collect(brain.respond(CONTEXT, HISTORY))

    assert ToolCall(id="call_bad", name="lookup_order", arguments={}) in outputs


async def test_the_follow_up_request_carries_the_calls_and_their_results(
    brain: OpenAIChatBrain,
    chat_server: ChatServer,  # noqa: F811 - the chat_server fixture
) -> None:
    chat_server.script(Tools(Call("lookup_order", {"order_id": "A-17"}, id="call_abc"), text="Let me check."))
    chat_server.script(Text("It ships tomorrow."))
    outputs = await collect(brain.respond(CONTEXT, HISTORY))
    call = next(o for o in outputs if isinstance(o, ToolCall))
    history = (
        *HISTORY,
        Turn(role="assistant", text="Let me check.", tool_calls=(call,)),
        Turn(role="tool", text='{"status": "shipped"}', tool_call_id="call_abc", name="lookup_order"),
    )

    follow_up = await collect(brain.respond(CONTEXT, history))

    assert follow_up[0] == TextPiece("It")
    assert chat_server.last.messages[1:] == [
        {"role": "user", "content": "Where is my order A-17?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "call_abc",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": json.dumps({"order_id": "A-17"})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_abc", "content": '{"status": "shipped"}'},
    ]


async def test_a_cut_history_is_still_a_valid_request(brain: OpenAIChatBrain, chat_server: ChatServer) -> None:  # noqa: F811 - the chat_server fixture
    answered = ToolCall(id="c1", name="lookup_order", arguments={"order_id": "A-17"})
    unanswered = ToolCall(id="c2", name="lookup_order", arguments={"order_id": "B-2"})
    interrupted = ToolCall(id="c3", name="lookup_order", arguments={})
    history = (
        Turn(role="tool", text='{"status": "lost"}', tool_call_id="c0", name="lookup_order"),  # its call was cut
        Turn(role="user", text="Check A-17 and B-2."),
        Turn(role="assistant", text="", tool_calls=(answered, unanswered)),
        Turn(role="tool", text='{"status": "shipped"}', tool_call_id="c1", name="lookup_order"),
        Turn(role="tool", text='{"status": "stray"}', tool_call_id="c9", name="lookup_order"),
        Turn(role="assistant", text=""),
        Turn(role="assistant", text="One moment.", tool_calls=(interrupted,)),  # barge-in before the result
        Turn(role="user", text="Never mind."),
    )
    chat_server.script(Text("Okay."))

    await collect(brain.respond(CONTEXT, history))

    assert chat_server.last.messages[1:] == [
        {"role": "user", "content": "Check A-17 and B-2."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"order_id": "A-17"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}'},
        {"role": "assistant", "content": "One moment."},
        {"role": "user", "content": "Never mind."},
    ]


# --- the request ----------------------------------------------------------------------------------
async def test_the_request_carries_the_agent_and_its_tools(brain: OpenAIChatBrain, chat_server: ChatServer) -> None:  # noqa: F811 - the chat_server fixture
    chat_server.script(Text("Sure."))
    context = BrainContext(**{**CONTEXT.__dict__, "language": "es-US"})

    await collect(brain.respond(context, HISTORY))

    body = chat_server.last.body
    system = body["messages"][0]
    assert system["role"] == "system"
    for expected in (
        "Ava",
        "A friendly assistant of Acme Bikes.",
        "Help callers track their orders.",
        "Latin American Spanish",
        "markdown",
        "one to three short sentences",
        CONTEXT.disclosure,
        CONTEXT.greeting,
        "Never invent a tool result",
    ):
        assert expected in system["content"]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "lookup_order",
                "description": "Find an order by its number.",
                "parameters": ORDER_TOOL.parameters,
            },
        }
    ]
    assert body["tool_choice"] == "auto"
    assert body["model"] == MODEL
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 300 and "temperature" not in body


async def test_a_request_without_tools_offers_none(llm_settings: Any, chat_server: ChatServer) -> None:  # noqa: F811 - the chat_server fixture
    llm_settings.LLM_TEMPERATURE = 0.4
    llm_settings.LLM_MAX_TOKENS = 0
    chat_server.script(Text("Sure."))
    brain = OpenAIChatBrain(language="it-IT")

    await collect(brain.respond(BrainContext(agent_name="Ava", language="it-IT"), HISTORY))
    await brain.aclose()

    body = chat_server.last.body
    assert "tools" not in body and "tool_choice" not in body and "max_tokens" not in body
    assert body["temperature"] == 0.4
    assert "Italian" in body["messages"][0]["content"]


async def test_it_sends_the_api_key_as_a_bearer_token(brain: OpenAIChatBrain, chat_server: ChatServer) -> None:  # noqa: F811 - the chat_server fixture
    chat_server.script(Text("Sure."))

    await collect(brain.respond(CONTEXT, HISTORY))

    assert chat_server.last.headers["Authorization"] == f"Bearer {API_KEY}"


async def test_it_works_without_an_api_key(llm_settings: Any, chat_server: ChatServer) -> None:  # noqa: F811 - the chat_server fixture
    llm_settings.LLM_API_KEY = ""
    chat_server.script(Text("Sure."))
    brain = OpenAIChatBrain(language="en-US")

    outputs = await collect(brain.respond(CONTEXT, HISTORY))
    await brain.aclose()

    assert outputs[0] == TextPiece("Sure.")
    assert chat_server.last.headers["Authorization"] == "Bearer not-needed"


async def test_it_asks_openai_for_max_completion_tokens(llm_settings: Any) -> None:
    llm_settings.LLM_BASE_URL = "https://api.openai.com/v1"
    brain = OpenAIChatBrain(language="en-US")

    request = brain.request(CONTEXT, HISTORY)
    await brain.aclose()

    assert request["max_completion_tokens"] == 300 and "max_tokens" not in request


async def test_it_runs_against_a_server_on_its_own_thread(llm_settings: Any) -> None:
    with ChatServer(Text("From a thread.")) as server:
        llm_settings.LLM_BASE_URL = server.base_url
        brain = OpenAIChatBrain(language="en-US")
        outputs = await collect(brain.respond(CONTEXT, HISTORY))
        await brain.aclose()

    assert "".join(o.text for o in outputs if isinstance(o, TextPiece)) == "From a thread."
    assert server.requests[0].body["model"] == MODEL


# --- failures ----------------------------------------------------------------------------------------
async def test_a_server_error_is_a_temporary_provider_error(brain: OpenAIChatBrain, chat_server: ChatServer) -> None:  # noqa: F811 - the chat_server fixture
    chat_server.script(Error(500, "The server had an error while processing your request."))

    error = await failure(brain)

    assert "HTTP 500" in error.message and "had an error while processing" in error.message
    assert error.permanent is False
    assert len(chat_server.requests) == 1  # no retry of an answered request


async def test_a_refused_key_is_a_permanent_error_without_the_key(
    brain: OpenAIChatBrain,
    chat_server: ChatServer,  # noqa: F811 - the chat_server fixture
) -> None:
    chat_server.script(
        Error(401, f"Incorrect API key provided: sk-test-***CRET. Yours was {API_KEY}.", type="invalid_request_error")
    )

    error = await failure(brain)

    assert "HTTP 401" in error.message and "LLM_API_KEY" in error.message
    assert "***" not in error.message and "CRET" not in error.message
    assert error.permanent is True


async def test_a_slow_server_is_a_timeout(llm_settings: Any, chat_server: ChatServer) -> None:  # noqa: F811 - the chat_server fixture
    llm_settings.LLM_TIMEOUT_SECONDS = 0.3
    brain = OpenAIChatBrain(language="en-US")
    chat_server.script(Text("Too late.", delay=30))

    error = await failure(brain)
    await brain.aclose()

    assert error.message == "The language model did not answer within 0.3 s"
    assert error.permanent is False


async def test_a_stream_that_stalls_is_a_timeout_after_what_was_said(
    llm_settings: Any,
    chat_server: ChatServer,  # noqa: F811 - the chat_server fixture
) -> None:
    # The whole request's bound: long enough for the first piece to arrive on a busy machine (0.3 s was
    # not, beside the other suite's workers), which then holds the rest.
    llm_settings.LLM_TIMEOUT_SECONDS = 2
    brain = OpenAIChatBrain(language="en-US")
    chat_server.script(Text(["Let me see.", " Hmm."], hold=Gate(), hold_after=1))
    received: list[BrainOutput] = []

    with pytest.raises(ProviderError, match=r"did not answer within 2 s"):
        async for output in brain.respond(CONTEXT, HISTORY):
            received.append(output)
    await brain.aclose()

    assert received == [TextPiece("Let me see.")]


async def test_an_unreachable_server_is_a_provider_error(llm_settings: Any) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    llm_settings.LLM_BASE_URL = f"http://user:pw@127.0.0.1:{port}/v1"
    brain = OpenAIChatBrain(language="en-US")

    error = await failure(brain)
    await brain.aclose()

    assert error.message == f"Cannot reach the language model server (127.0.0.1:{port})"
    assert error.permanent is False


# --- configuration ----------------------------------------------------------------------------------
def test_configuration_problems_name_a_missing_model(llm_settings: Any) -> None:
    llm_settings.LLM_MODEL = ""

    assert any("LLM_MODEL is not set" in problem for problem in configuration_problems())
    with pytest.raises(ProviderError, match="LLM_MODEL is not set") as raised:
        OpenAIChatBrain(language="en-US")
    assert raised.value.permanent is True


def test_a_complete_configuration_has_no_problems(llm_settings: Any) -> None:
    assert configuration_problems() == []


def test_configuration_problems_name_invalid_values(llm_settings: Any) -> None:
    llm_settings.LLM_BASE_URL = "api.openai.com/v1"
    llm_settings.LLM_TIMEOUT_SECONDS = 0
    llm_settings.LLM_TEMPERATURE = 3.0

    assert len(configuration_problems()) == 3
