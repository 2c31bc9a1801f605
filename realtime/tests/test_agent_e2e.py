"""End to end through the project's ASGI application in the test's process (testing/inprocess.py): what an agent does in a spoken conversation (issue 10).

A caller speaks (eSpeak NG speech streamed in real time over the browser socket); the server hears it
(Silero VAD + PocketSphinx with the agent's own language model), the brain acts, and the test checks
what reached the outside world (a signed webhook, an http tool, an MCP server, a Chat Completions
server, all real servers on loopback), what the caller heard, and the call record.

Recognition of synthesized speech is good but not perfect, and it depends on the words of each
agent's language model (name, instructions, tools, knowledge) and on eSpeak NG's random breath noise.
The caller's voice is therefore a recording (support.record_voice: the same audio in every run), and
every agent here keeps the exact configuration its sentences were checked with: offline, each
recorded sentence went through the server's listener (realtime.engine.cascade.listener.Listener with the
agent's recognizer, pocketsphinx.recognizer_for_agent), fed in chunks of varying sizes as the server's listen
stage takes them, and the embedded brain understood it as the test expects every time. Changing an
agent's words or a sentence needs that check again. Order numbers are said as "three five six one":
"four" and "seven" are often misheard ("seven" as "human", which asks for a person).

Conversations that do not depend on each other run at the same time on one server to keep the
wall time down; each still waits for the agent's answer to finish playing before speaking again.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agents.models import AgentTool, McpToolSelection
from agents.tools.services import mcp_server_connect
from calls.logging import flush_agent_logs
from calls.models import AgentLog, Call
from realtime.engine.phrases import phrase
from testing.chat_server import Call as ScriptedCall
from testing.chat_server import ChatServer, Error, Text, Tools
from testing.clients import VoiceClient, is_type
from testing.conversations import Caller, Exchange, agent_for, conversation, issue, silence, socket_url, tool_events
from testing.inprocess import LOOPBACK, InProcessServer, serving
from testing.mcp import LoopbackMcp
from testing.voice import record_voice
from testing.waiting import polled
from testing.webhooks import LoopbackReceiver, Reply, receivers_fixture  # noqa: F401 - the receivers fixture

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

HOOK_SECRET = "whsec-e2e-7Qk2pLx9"
HOOK_HEADERS = {"X-Api-Key": "acme-tools-key", "X-Tenant": "acme"}
LLM_MODEL = "scripted-model"
HANDOFF = "+15557654321"

# The agents' answers the caller must hear.
TOOL_ERROR = "Sorry, I could not complete that right now."  # onError return_error
DONE = "Done."  # onError return_empty: the embedded brain's neutral acknowledgement
SHIPPED = "Order 3561 shipped yesterday and arrives on Friday."

ORDER_NUMBER = {
    "type": "object",
    "properties": {"order_number": {"type": "string", "description": "The order number"}},
    "required": ["order_number"],
}
NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
CLINIC = """# Riverside Clinic

## Parking

Patients park for free in the car park behind the clinic, on Mill Street.

## Opening hours

The clinic is open from Monday to Friday, from eight in the morning to six in the evening.
"""


# --- servers -------------------------------------------------------------------------------------


@pytest.fixture
def server(settings: Any) -> Iterator[InProcessServer]:
    """The embedded brain's application; it may reach loopback tool servers."""
    with serving(settings, LOOPBACK) as started:
        yield started


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with ChatServer() as scripted:
        yield scripted


@pytest.fixture
def openai_server(settings: Any, chat: ChatServer) -> Iterator[InProcessServer]:
    """The application whose brain is the scripted Chat Completions server."""
    values = {
        **LOOPBACK,
        "LLM_PROVIDER": "openai",
        "LLM_BASE_URL": chat.base_url,
        "LLM_MODEL": LLM_MODEL,
        "LLM_API_KEY": "sk-e2e-test-key",
    }
    with serving(settings, values) as started:
        yield started


@pytest.fixture
def loopback(settings: Any) -> Any:
    """This process may reach loopback servers too (connecting the MCP server)."""
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    return settings


# --- agents --------------------------------------------------------------------------------------


def tool_for(agent: Any, name: str, description: str, parameters: dict[str, Any], **fields: Any) -> AgentTool:
    return AgentTool.objects.create(
        agent=agent, name=name, description=description, parameter_schema=parameters, **fields
    )


def webhook_agent(owner: Any, make_agent: Any, hook: LoopbackReceiver, **fields: Any) -> Any:
    return agent_for(
        owner,
        make_agent,
        agent_type="webhook",
        server_url=hook.url("/hooks/voice"),
        server_secret=HOOK_SECRET,
        server_headers=HOOK_HEADERS,
        **fields,
    )


def olive(owner: Any, make_agent: Any, hook: LoopbackReceiver) -> tuple[Any, AgentTool]:
    """The order desk: a webhook agent with one signed tool."""
    agent = webhook_agent(
        owner, make_agent, hook, name="Olive", instructions="You help callers with the status of their orders."
    )
    tool = tool_for(
        agent, "check_order_status", "Look up the delivery status of an order by its order number", ORDER_NUMBER
    )
    return agent, tool


# --- the caller ----------------------------------------------------------------------------------


# What the callers say. Sentences are recognized well but not perfectly, and how well depends on
# the agent's words: each was checked against its agent (see the module docstring).
ASK_ORDER = "What is the status of order three five six one?"
TRACK_PARCEL = "Please track my parcel."
BOOK_TABLE = "Please book a table for dinner."
BOOK_TAXI = "Please book a taxi to the airport."
ORDER_PIZZA = "I would like a large pizza please."
WHERE_PARCEL = "Where is my parcel three five six one?"
TAXI_FOR_THREE = "Please book a taxi to the airport for three passengers."
LOOK_UP_ORDER = "Please look up order three five six one."
CLINIC_HOURS = "When is the clinic open?"
REAL_PERSON = "Can I speak to a real person please?"
CAPABILITIES = "What can you do?"
SENTENCES = (ASK_ORDER, TRACK_PARCEL, BOOK_TABLE, BOOK_TAXI, ORDER_PIZZA, WHERE_PARCEL, TAXI_FOR_THREE)
SENTENCES += (LOOK_UP_ORDER, CLINIC_HOURS, REAL_PERSON, CAPABILITIES)


@pytest.fixture(scope="module")
def voice(tmp_path_factory: Any) -> dict[str, bytes]:
    return record_voice(SENTENCES, tmp_path_factory.mktemp("voice"))


# --- records -------------------------------------------------------------------------------------


async def call_detail(owner: Any, call_id: str) -> dict[str, Any]:
    response = await sync_to_async(owner.client.get)(f"/public/v1/calls/{call_id}")
    assert response.status_code == 200, response.content
    return response.json()


def invocations(detail: dict[str, Any]) -> list[tuple[str, dict[str, Any], str, str]]:
    return [(t["toolName"], t["request"], t["status"], t["response"]) for t in detail["toolInvocationsLog"]]


async def logged(agent: Any, message: str, *, severity: str = "error", timeout: float = 15) -> dict[str, Any]:
    """The agent log line with this message (each look writes the lines buffered so far: the tests'
    settings run no log writer thread)."""

    def find() -> dict[str, Any] | None:
        flush_agent_logs()
        rows = AgentLog.objects.filter(agent=agent, severity=severity).values_list("content", flat=True)
        return next((content for content in rows if content.get("message") == message), None)

    content: dict[str, Any] = await polled(
        sync_to_async(find), what=f"the {severity} log line {message!r}", timeout=timeout, every=0.1
    )
    return content


def signed(request: Any) -> bool:
    expected = "sha256=" + hmac.new(HOOK_SECRET.encode(), request.body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(request.headers.get("x-service-signature", ""), expected)


# --- tests ---------------------------------------------------------------------------------------


async def test_a_signed_webhook_tool_is_called_with_the_spoken_order_number_and_its_answer_spoken(
    server, voice, owner, make_agent, realtime_settings, receivers
):
    hook = receivers(Reply(json={"message": SHIPPED}))
    agent, tool = await sync_to_async(olive)(owner, make_agent, hook)
    # The browser's way in: a session token from the public API.
    response = await sync_to_async(owner.client.post)(f"/public/v1/agents/{agent.pk}/realtime-sessions")
    assert response.status_code == 200, response.content

    async def talk(caller: Caller) -> Exchange:
        assert caller.greeting == "Hi, I'm Olive, an AI agent."
        exchange = await caller.say(ASK_ORDER)
        await caller.hang_up()
        return exchange

    exchange = await conversation(server, agent, voice, talk, token=response.json()["token"])
    assert exchange.said == SHIPPED, exchange.heard
    assert tool_events(exchange) == [("tool.started", "check_order_status"), ("tool.finished", "check_order_status")]

    (request,) = hook.requests
    assert (request.method, request.path) == ("POST", "/hooks/voice")
    body = request.json()
    call_id = body["message"]["call"]["id"]
    tool_call_id = body["message"]["toolCall"]["id"]
    assert isinstance(tool_call_id, str) and tool_call_id
    assert body == {
        "message": {
            "type": "agent:tool-call",
            "call": {"id": call_id, "agentId": str(agent.pk)},
            "toolCall": {"id": tool_call_id, "name": "check_order_status", "arguments": {"order_number": "3561"}},
        }
    }, exchange.heard
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-api-key"] == "acme-tools-key" and request.headers["x-tenant"] == "acme"
    assert signed(request)

    detail = await call_detail(owner, call_id)
    assert detail["status"] == "completed" and detail["toolInvocations"] == 1
    (invocation,) = detail["toolInvocationsLog"]
    assert invocation["toolName"] == "check_order_status"
    assert invocation["request"] == {"order_number": "3561"}
    assert invocation["status"] == "success" and invocation["agentToolId"] == str(tool.pk)
    assert json.loads(invocation["response"]) == {"message": SHIPPED}
    assert [(m["role"], m["content"]) for m in detail["messages"]] == [
        ("assistant", "Hi, I'm Olive, an AI agent."),
        ("user", exchange.heard),
        ("assistant", SHIPPED),
    ]


async def test_failing_webhook_tools_follow_their_on_error_setting(
    server, voice, owner, make_agent, realtime_settings, receivers
):
    # Fern's server answers 500; Gus's never answers in time (timeoutMs 1000, the minimum).
    failing = receivers(Reply(status=500, json={"error": "database unavailable"}))
    silent = receivers(Reply(hold=True, json={"message": "too late"}))

    def agents() -> tuple[Any, Any]:
        fern = webhook_agent(
            owner,
            make_agent,
            failing,
            name="Fern",
            instructions="You help callers with their parcels and restaurant tables.",
        )
        tool_for(fern, "track_parcel", "Track a parcel on its way to you", NO_PARAMETERS, on_error="return_empty")
        tool_for(fern, "book_table", "Book a table at the restaurant", NO_PARAMETERS, on_error="return_error")
        gus = webhook_agent(
            owner, make_agent, silent, name="Gus", instructions="You help callers with taxis and pizza."
        )
        tool_for(
            gus, "book_taxi", "Book a taxi to the airport", NO_PARAMETERS, timeout_ms=1000, on_error="return_error"
        )
        tool_for(
            gus, "order_pizza", "Order a pizza for delivery", NO_PARAMETERS, timeout_ms=1000, on_error="return_empty"
        )
        return fern, gus

    fern, gus = await sync_to_async(agents)()

    async def talk_to_fern(caller: Caller) -> tuple[str, list[Exchange]]:
        parcel = await caller.say(TRACK_PARCEL)
        table = await caller.say(BOOK_TABLE)
        await caller.hang_up()
        return caller.call_id, [parcel, table]

    async def talk_to_gus(caller: Caller) -> tuple[str, list[Exchange]]:
        taxi = await caller.say(BOOK_TAXI)
        pizza = await caller.say(ORDER_PIZZA)
        await caller.hang_up()
        return caller.call_id, [taxi, pizza]

    (fern_call, (parcel, table)), (gus_call, (taxi, pizza)) = await asyncio.gather(
        conversation(server, fern, voice, talk_to_fern), conversation(server, gus, voice, talk_to_gus)
    )

    # return_empty: the brain gets {} and acknowledges; return_error: it gets the error and apologizes.
    assert (parcel.said, table.said) == (DONE, TOOL_ERROR), (parcel.heard, table.heard)
    assert (taxi.said, pizza.said) == (TOOL_ERROR, DONE), (taxi.heard, pizza.heard)
    assert tool_events(parcel) == [("tool.started", "track_parcel"), ("tool.finished", "track_parcel")]
    assert tool_events(taxi) == [("tool.started", "book_taxi"), ("tool.finished", "book_taxi")]
    assert [r.json()["message"]["toolCall"]["name"] for r in failing.requests] == ["track_parcel", "book_table"]
    assert [r.json()["message"]["toolCall"]["name"] for r in silent.requests] == ["book_taxi", "order_pizza"]

    assert invocations(await call_detail(owner, fern_call)) == [
        ("track_parcel", {}, "error", "{}"),
        ("book_table", {}, "error", '{"error":"The tool answered HTTP 500"}'),
    ]
    gus_detail = await call_detail(owner, gus_call)
    assert all(1000 <= t["durationMs"] < 3000 for t in gus_detail["toolInvocationsLog"])
    assert invocations(gus_detail) == [
        ("book_taxi", {}, "timeout", '{"error":"The tool did not answer within 1 second"}'),
        ("order_pizza", {}, "timeout", "{}"),
    ]
    content = await logged(gus, "tool call", severity="warn")
    assert content["status"] == "timeout" and content["kind"] == "webhook"


async def test_http_tools_send_get_arguments_in_the_query_and_post_arguments_as_json(
    server, voice, owner, make_agent, realtime_settings, receivers
):
    api = receivers()
    api.reply(
        Reply(json={"message": "Parcel 3561 is out for delivery and arrives today."}),
        Reply(json={"result": "A taxi for three passengers is on its way to you."}),
    )

    def agent() -> Any:
        hana = agent_for(
            owner, make_agent, name="Hana", agent_type="http", instructions="You track parcels and book taxis."
        )
        tracking = {
            "type": "object",
            "properties": {"tracking_number": {"type": "string", "description": "The tracking number of the parcel"}},
            "required": ["tracking_number"],
        }
        passengers = {
            "type": "object",
            "properties": {"passengers": {"type": "integer", "description": "Number of passengers"}},
            "required": ["passengers"],
        }
        tool_for(
            hana,
            "track_parcel",
            "Track a parcel by its tracking number",
            tracking,
            tool_url=api.url("/parcels?carrier=acme"),
            tool_method="GET",
            tool_headers={"Authorization": "Bearer parcels-key"},
        )
        tool_for(
            hana, "book_taxi", "Book a taxi to the airport", passengers, tool_url=api.url("/taxis"), tool_method="POST"
        )
        return hana

    hana = await sync_to_async(agent)()

    async def talk(caller: Caller) -> tuple[str, Exchange, Exchange]:
        parcel = await caller.say(WHERE_PARCEL)
        taxi = await caller.say(TAXI_FOR_THREE)
        await caller.hang_up()
        return caller.call_id, parcel, taxi

    call_id, parcel, taxi = await conversation(server, hana, voice, talk)
    assert parcel.said == "Parcel 3561 is out for delivery and arrives today.", parcel.heard
    assert taxi.said == "A taxi for three passengers is on its way to you.", taxi.heard

    get, post = api.requests
    assert (get.method, get.path, get.query, get.body) == (
        "GET",
        "/parcels",
        {"carrier": "acme", "tracking_number": "3561"},
        b"",
    )
    assert get.headers["authorization"] == "Bearer parcels-key"
    assert (post.method, post.path, post.headers["content-type"]) == ("POST", "/taxis", "application/json")
    assert post.json() == {"passengers": 3}
    statuses = [(name, request, status) for name, request, status, _ in invocations(await call_detail(owner, call_id))]
    assert statuses == [
        ("track_parcel", {"tracking_number": "3561"}, "success"),
        ("book_taxi", {"passengers": 3}, "success"),
    ]


async def test_a_tool_of_a_connected_mcp_server_is_called_and_the_session_closed_with_the_call(
    server, voice, owner, make_agent, realtime_settings, loopback
):
    mcp = await sync_to_async(LoopbackMcp().start)()
    try:

        def agent() -> Any:
            connected = mcp_server_connect(organization=owner.organization, name="Orders", url=mcp.url)
            assert connected.status == "active"
            max_ = agent_for(
                owner, make_agent, name="Max", instructions="Callers ask you to look up an order by its order id."
            )
            McpToolSelection.objects.create(agent=max_, server=connected, tool_name="lookup_order")
            return max_

        max_ = await sync_to_async(agent)()
        opened_before = len(mcp.sessions_opened)

        async def talk(caller: Caller) -> tuple[str, Exchange]:
            exchange = await caller.say(LOOK_UP_ORDER)
            await caller.hang_up()
            return caller.call_id, exchange

        call_id, exchange = await conversation(server, max_, voice, talk)
        # The tool's structured result {"orderId": "3561", "status": "shipped"}, read out.
        assert exchange.said == "Order id: 3561, status: shipped.", exchange.heard
        assert tool_events(exchange) == [("tool.started", "lookup_order"), ("tool.finished", "lookup_order")]
        (session,) = mcp.sessions_opened[opened_before:]
        assert mcp.requests_in(session) >= 2  # initialized, tools/call
        assert session in mcp.sessions_closed  # closed when the call ended, before the socket closed
        assert invocations(await call_detail(owner, call_id)) == [
            ("lookup_order", {"order_id": "3561"}, "success", '{"orderId":"3561","status":"shipped"}')
        ]
    finally:
        await sync_to_async(mcp.stop)()


async def test_search_knowledge_answers_from_an_uploaded_document(server, voice, owner, make_agent, realtime_settings):
    clara = await sync_to_async(agent_for)(
        owner, make_agent, name="Clara", instructions="You answer questions about the Riverside Clinic."
    )
    upload = await sync_to_async(owner.client.post)(
        f"/public/v1/agents/{clara.pk}/knowledge", {"content": CLINIC}, format="json"
    )
    assert upload.status_code == 200, upload.content
    listed = await sync_to_async(owner.client.get)(f"/public/v1/agents/{clara.pk}/knowledge")
    assert [item["status"] for item in listed.json()] == ["ready"]

    async def talk(caller: Caller) -> tuple[str, Exchange]:
        exchange = await caller.say(CLINIC_HOURS)
        await caller.hang_up()
        return caller.call_id, exchange

    call_id, exchange = await conversation(server, clara, voice, talk)
    assert "open from Monday to Friday, from eight in the morning to six in the evening" in exchange.said, (
        exchange.heard
    )
    assert tool_events(exchange) == [("tool.started", "search_knowledge"), ("tool.finished", "search_knowledge")]
    ((name, request, status, _),) = invocations(await call_detail(owner, call_id))
    assert (name, status) == ("search_knowledge", "success") and request == {"query": exchange.heard}


async def test_asking_for_a_person_transfers_a_browser_session(server, voice, owner, make_agent, realtime_settings):
    tess = await sync_to_async(agent_for)(
        owner, make_agent, name="Tess", instructions="You help callers.", handoff_phone_number=HANDOFF
    )
    async with VoiceClient(socket_url(server, tess, issue(tess))) as client:
        caller = await Caller(client, voice).answered()
        before = len(client.messages)
        await client.stream(voice[REAL_PERSON] + silence(1000))
        handoff = await client.wait_for(is_type("transcript", role="assistant"), after=before, timeout=45)
        assert client.messages[handoff].message["text"] == phrase("transfer", "en-US")
        transfer = await client.wait_for(is_type("transfer"), after=handoff)
        assert client.messages[transfer].message == {"type": "transfer", "phoneNumber": HANDOFF}
        assert await client.wait_closed() == 1000
        kinds = [m.message["type"] for m in client.messages[before:handoff]]
        assert kinds.index("tool.started") < kinds.index("tool.finished")

    call = await sync_to_async(Call.objects.get)(pk=caller.call_id)
    assert call.status == "completed"
    assert call.ended_reason == "transferred"
    rows = await sync_to_async(lambda: list(call.messages.order_by("sequence").values_list("role", "content")))()
    assert rows[-1] == ("system", f"Call transferred to {HANDOFF}")
    assert [role for role, _ in rows] == ["assistant", "user", "assistant", "system"]


async def test_a_dynamic_prompt_and_greeting_come_from_the_signed_assistant_request(
    server, voice, owner, make_agent, realtime_settings, receivers
):
    hook = receivers(
        Reply(
            json={
                "instructions": "You answer questions about the dynamic desk.",
                "greeting": "Welcome to the dynamic desk.",
            }
        )
    )
    dina = await sync_to_async(webhook_agent)(
        owner, make_agent, hook, name="Dina", instructions="", prompt_type="dynamic", greeting_type="dynamic"
    )

    async def talk(caller: Caller) -> Caller:
        await caller.hang_up()
        return caller

    caller = await conversation(server, dina, voice, talk)
    assert caller.greeting == "Hi, I'm Dina, an AI agent. Welcome to the dynamic desk."
    (request,) = hook.requests
    assert request.json() == {
        "message": {
            "type": "agent:assistant-request",
            "call": {
                "id": caller.call_id,
                "agentId": str(dina.pk),
                "channel": "web",
                "from": "web-client",
                "to": "web-agent",
                "variables": {},
            },
        }
    }
    assert request.headers["content-type"] == "application/json" and request.headers["x-api-key"] == "acme-tools-key"
    assert signed(request)


async def test_a_failed_assistant_request_ends_a_call_without_a_saved_prompt_and_falls_back_otherwise(
    server, voice, owner, make_agent, realtime_settings, receivers
):
    hook = receivers(Reply(status=500, json={"error": "down"}))

    def agents() -> tuple[Any, Any]:
        dynamic = {"prompt_type": "dynamic", "greeting_type": "dynamic"}
        nora = webhook_agent(owner, make_agent, hook, name="Nora", instructions="", **dynamic)
        rita = webhook_agent(
            owner, make_agent, hook, name="Rita", instructions="Help callers book a taxi to the airport.", **dynamic
        )
        return nora, rita

    nora, rita = await sync_to_async(agents)()

    async def unavailable() -> tuple[str, str, dict[str, Any], int | None]:
        async with VoiceClient(socket_url(server, nora, issue(nora))) as client:
            caller = await Caller(client, voice).answered()
            error = await client.wait_for(is_type("error"))
            return caller.call_id, caller.greeting, client.messages[error].message, await client.wait_closed()

    async def fallback(caller: Caller) -> tuple[str, Exchange]:
        exchange = await caller.say(CAPABILITIES)
        await caller.hang_up()
        return caller.call_id, exchange

    (nora_call, goodbye, error, code), (rita_call, exchange) = await asyncio.gather(
        unavailable(), conversation(server, rita, voice, fallback)
    )

    assert goodbye == f"Hi, I'm Nora, an AI agent. {phrase('unavailable', 'en-US')}"
    assert error == {"type": "error", "code": "engine_error", "message": "The agent's prompt could not be fetched"}
    assert code == 4500
    nora_record = await sync_to_async(Call.objects.get)(pk=nora_call)
    assert nora_record.status == "failed"
    assert nora_record.ended_reason == "assistant-request-failed"
    content = await logged(nora, "dynamic prompt request failed; the call is ended")
    assert content["reason"] == "Assistant request failed: serverUrl answered HTTP 500"

    # Rita has saved instructions: her call goes on with them.
    assert exchange.said == "I can help callers book a taxi to the airport. What would you like to do?", exchange.heard
    assert (await sync_to_async(Call.objects.get)(pk=rita_call)).status == "completed"
    await logged(rita, "dynamic prompt request failed; the saved prompt is used")
    assert len(hook.requests) == 2 and all(signed(request) for request in hook.requests)


async def test_the_openai_brain_calls_a_webhook_tool_and_speaks_its_final_answer(
    openai_server, voice, chat, owner, make_agent, realtime_settings, receivers
):
    hook = receivers(Reply(json={"message": SHIPPED}))
    agent, _ = await sync_to_async(olive)(owner, make_agent, hook)
    first = len(chat.requests)
    final = "Good news: your order 3561 shipped yesterday and arrives on Friday."
    chat.script(
        Tools(ScriptedCall("check_order_status", {"order_number": "3561"}, id="call_e2e_1")),
        Text(final),
    )

    async def talk(caller: Caller) -> tuple[str, Exchange]:
        exchange = await caller.say(ASK_ORDER)
        await caller.hang_up()
        return caller.call_id, exchange

    call_id, exchange = await conversation(openai_server, agent, voice, talk)
    assert exchange.said == final
    assert tool_events(exchange) == [("tool.started", "check_order_status"), ("tool.finished", "check_order_status")]

    asked, answered = chat.requests[first:]
    assert chat.remaining == 0
    assert asked.body["model"] == LLM_MODEL and asked.headers["Authorization"] == "Bearer sk-e2e-test-key"
    assert asked.messages[0]["role"] == "system" and "status of their orders" in asked.messages[0]["content"]
    assert [tool["function"]["name"] for tool in asked.tools] == ["check_order_status", "end_call"]
    assert asked.messages[-1] == {"role": "user", "content": exchange.heard}
    (request,) = hook.requests
    assert request.json()["message"]["toolCall"] == {
        "id": "call_e2e_1",
        "name": "check_order_status",
        "arguments": {"order_number": "3561"},
    }
    assert signed(request)
    assert answered.messages[-2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_e2e_1",
                    "type": "function",
                    "function": {"name": "check_order_status", "arguments": '{"order_number": "3561"}'},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_e2e_1",
            "content": json.dumps({"message": SHIPPED}, separators=(",", ":")),
        },
    ]

    detail = await call_detail(owner, call_id)
    # One item per model request, with the figures the server reported.
    assert [(u["provider"], u["model"], u["inputTokens"], u["outputTokens"]) for u in detail["llmUsage"]] == [
        ("openai", LLM_MODEL, 40, 12),
        ("openai", LLM_MODEL, 25, 7),
    ]
    assert invocations(detail)[0][:3] == ("check_order_status", {"order_number": "3561"}, "success")


async def test_a_failing_language_model_gets_an_apology_and_the_call_goes_on(
    openai_server, voice, chat, owner, make_agent, realtime_settings, receivers
):
    hook = receivers(Reply(json={"message": SHIPPED}))
    agent, _ = await sync_to_async(olive)(owner, make_agent, hook)
    chat.script(Error(500, "The model is overloaded"), Text("I am back. How can I help?"))

    async def talk(caller: Caller) -> tuple[str, Exchange, Exchange]:
        failed = await caller.say(ASK_ORDER)
        later = await caller.say(ASK_ORDER)
        await caller.hang_up()
        return caller.call_id, failed, later

    call_id, failed, later = await conversation(openai_server, agent, voice, talk)
    assert failed.said == phrase("apology", "en-US")
    assert later.said == "I am back. How can I help?"
    assert chat.remaining == 0
    content = await logged(agent, "language model request failed")
    assert content["reason"].startswith("The language model server answered HTTP 500")
    assert "sk-e2e-test-key" not in json.dumps(content)
    call = await sync_to_async(Call.objects.get)(pk=call_id)
    assert call.status == "completed"
