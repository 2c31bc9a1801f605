"""A browser caller's conversation with an agent of a real server (the embedded brain's end-to-end tests):
the caller waits for the greeting, then speaks recorded sentences one by one, each time waiting for the
agent's whole answer (`Exchange`: what the server heard, what the agent said, the events in between)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from realtime import tokens
from testing.clients import VoiceClient, is_type
from testing.daphne import DaphneServer


def agent_for(owner: Any, make_agent: Any, *, name: str, instructions: str, **fields: Any) -> Any:
    """An active agent that introduces itself briefly ("Hi, I'm <name>, an AI agent.")."""
    values = {
        "status": "active",
        "identity": "",
        "ai_identity_disclosure_template_id": "named_agent",
        "greeting_type": "none",
        **fields,
    }
    return make_agent(owner.organization, name=name, instructions=instructions, **values)


def silence(ms: int) -> bytes:
    return b"\x00\x00" * (16 * ms)


def issue(agent: Any) -> str:
    return tokens.issue_token(agent_id=agent.pk, organization_id=agent.organization_id)[0]


def socket_url(server: DaphneServer, agent: Any, token: str) -> str:
    return f"{server.ws_url}/ws/agents/{agent.pk}/realtime?token={token}"


@dataclass
class Exchange:
    heard: str  # what the server recognized
    said: str  # the agent's answer, as the client was told it was heard in full
    events: list[dict[str, Any]]  # the messages in between, other than audio


class Caller:
    """One browser conversation: waits for the greeting, then speaks sentence by sentence, each time
    waiting for the agent's whole answer."""

    def __init__(self, client: VoiceClient, voice: dict[str, bytes]) -> None:
        self.client = client
        self.voice = voice
        self.call_id = ""
        self.greeting = ""

    async def answered(self) -> Caller:
        started = await self.client.wait_for(is_type("session.started"), timeout=60)
        self.call_id = self.client.messages[started].message["callId"]
        greeting = await self.client.wait_for(is_type("transcript", role="assistant"), after=started, timeout=60)
        self.greeting = self.client.messages[greeting].message["text"]
        return self

    async def say(self, sentence: str) -> Exchange:
        before = len(self.client.messages)
        await self.client.stream(self.voice[sentence] + silence(1000))
        user = await self.client.wait_for(is_type("transcript", role="user"), after=before)
        answer = await self.client.wait_for(is_type("transcript", role="assistant"), after=user, timeout=45)
        between = [m.message for m in self.client.messages[user + 1 : answer] if m.message["type"] != "output_audio"]
        return Exchange(
            heard=self.client.messages[user].message["text"],
            said=self.client.messages[answer].message["text"],
            events=between,
        )

    async def hang_up(self) -> None:
        await self.client.send({"type": "stop"})
        assert await self.client.wait_closed() == 1000


async def conversation(
    server: DaphneServer,
    agent: Any,
    voice: dict[str, bytes],
    talk: Callable[[Caller], Awaitable[Any]],
    *,
    token: str | None = None,
) -> Any:
    async with VoiceClient(socket_url(server, agent, token or issue(agent))) as client:
        return await talk(await Caller(client, voice).answered())


def tool_events(exchange: Exchange) -> list[tuple[str, str]]:
    return [(e["type"], e["name"]) for e in exchange.events if e["type"].startswith("tool.")]
