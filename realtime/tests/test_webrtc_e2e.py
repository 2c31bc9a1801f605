"""WebRTC sessions end to end (docs/webrtc.md), through the project's ASGI application in the test's process
(testing/inprocess.py) and a real WebRTC client: aiortc's peer connection (testing/webrtc.py), whose
microphone plays recorded eSpeak NG speech and whose `events` data channel carries the JSON messages.

The session comes from POST /public/v1/agents/{id}/realtime-sessions with `"transport": "webrtc"`; its
offerUrl takes the SDP offer (raw or JSON) and answers; the conversation runs on the real offline speech
parts (Silero VAD + PocketSphinx in, eSpeak NG out) and is read back from GET /public/v1/calls/{id}. Every
packet stays on loopback: the server and the client gather host candidates on WEBRTC_HOST_ADDRESSES
(127.0.0.1) only, with no STUN server.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from asgiref.sync import sync_to_async

from calls.models import Call
from realtime import tokens
from realtime.webrtc import peer as webrtc_peer
from testing.agents import AVA_GREETING, ava_agent
from testing.clients import VoiceClient, is_type
from testing.inprocess import InProcessServer, serving
from testing.voice import record_voice
from testing.waiting import polled
from testing.webrtc import WebRtcClient, rms

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

GREETING = AVA_GREETING
INSTRUCTIONS = (
    "You take table reservations for the Acme restaurant. Callers book a table for a number of people, "
    "for a date and a time, for lunch or dinner."
)
SENTENCE = "I would like to book a table for four people tomorrow evening."
# Ava has no tools and no knowledge: the embedded brain answers any request with what she does.
ANSWER = "I take table reservations for the Acme restaurant. What would you like to do?"
SECOND = "Please book it for dinner at seven."
LOOPBACK = {"WEBRTC_HOST_ADDRESSES": ["127.0.0.1"], "WEBRTC_ICE_SERVERS": []}


@pytest.fixture
def server(settings: Any) -> Iterator[InProcessServer]:
    with serving(settings, LOOPBACK) as started:
        yield started


@pytest.fixture
def ava(owner: Any, make_agent: Any) -> Any:
    return ava_agent(owner, make_agent, instructions=INSTRUCTIONS)


@pytest.fixture(scope="module")
def speech(tmp_path_factory: Any) -> dict[str, bytes]:
    return record_voice((SENTENCE, SECOND), tmp_path_factory.mktemp("voice"))


def silence(ms: int) -> bytes:
    return b"\x00\x00" * (16 * ms)


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z']+", text.lower()))


async def webrtc_session(owner: Any, agent: Any, **body: Any) -> dict[str, Any]:
    """POST realtime-sessions with transport webrtc (and `body`), with the owner's API key: the answer."""
    response = await sync_to_async(owner.client.post)(
        f"/public/v1/agents/{agent.pk}/realtime-sessions", {"transport": "webrtc", **body}, format="json"
    )
    assert response.status_code == 200, response.content
    return dict(response.json())


async def call_detail(owner: Any, call_id: str) -> dict[str, Any]:
    """GET /public/v1/calls/{id}, once the call has ended."""

    async def ended() -> dict[str, Any] | None:
        response = await sync_to_async(owner.client.get)(f"/public/v1/calls/{call_id}")
        assert response.status_code == 200, response.content
        detail = dict(response.json())
        return detail if detail["status"] != "active" else None

    return await polled(ended, what=f"call {call_id} ended", timeout=30, every=0.1)


@pytest.mark.slow
async def test_a_spoken_conversation_over_webrtc(server, ava, owner, speech):
    """SDP exchange through offerUrl, session.started on the data channel, the greeting's audio on the track,
    the caller's question transcribed and answered, a barge-in that sends `clear` and silences the track,
    and `stop` ending the call completed."""
    session = await webrtc_session(owner, ava)
    offer_url = session["webrtc"]["offerUrl"]
    assert offer_url == f"{server.http_url}/realtime/webrtc/agents/{ava.pk}/session?token={quote(session['token'])}"
    assert session["webrtc"]["iceServers"] == [] and session["websocketUrl"].startswith(server.ws_url)
    async with server.ahttp() as http, WebRtcClient(offer_url, http) as client:
        answered = await client.offer()
        assert answered.status_code == 201, answered.text
        assert answered.headers["content-type"] == "application/sdp" and answered.text.startswith("v=0")
        assert answered.headers["location"] == offer_url and answered.headers["access-control-allow-origin"] == "*"
        # Every candidate the server offers is on loopback.
        candidates = [line for line in answered.text.splitlines() if line.startswith("a=candidate:")]
        assert candidates and all(line.split()[4] == "127.0.0.1" for line in candidates), candidates

        started = await client.wait_for(is_type("session.started"), timeout=60)
        call_id = client.messages[started].message["callId"]
        opened = client.messages[started].at
        greeting = await client.wait_for(is_type("transcript", role="assistant"), after=started, timeout=60)
        greeting_text = client.messages[greeting].message["text"]
        assert greeting_text.startswith("Just so you know, you are speaking with an AI") and greeting_text.endswith(
            GREETING
        )
        await client.wait_for(is_type("agent_speech.ended", interrupted=False), after=started, timeout=30)
        # The greeting was heard on the track: seconds of speech, loud.
        greeting_audio = client.audio_between(opened, client.messages[greeting].at + 0.5)
        loud = [at for at, pcm in client.heard if opened <= at and rms(pcm) > 300]
        assert rms(greeting_audio) > 300 and len(loud) * 0.02 > 3, (rms(greeting_audio), len(loud))
        assert not [m for m in client.messages if m.message["type"] == "output_audio"]  # audio is on the track

        # The caller asks; the server hears it and answers, in words and on the track.
        before = len(client.messages)
        await client.say(speech[SENTENCE] + silence(1500))
        user = await client.wait_for(is_type("transcript", role="user"), after=before, timeout=30)
        heard = client.messages[user].message["text"]
        assert len(words(heard) & words(SENTENCE)) >= len(words(SENTENCE)) // 2, heard
        spoken = await client.wait_for(is_type("agent_speech"), after=user, timeout=30)
        await client.heard_seconds(1.0, since=client.messages[spoken].at)

        # The caller speaks over the answer: `clear` on the channel, and the track goes quiet at once.
        speaking = asyncio.create_task(client.say(speech[SECOND] + silence(1500)))
        clear = await client.wait_for(is_type("clear"), after=user, timeout=30)
        cleared_at = client.messages[clear].at
        await client.listen_until(cleared_at + 1.2)
        assert rms(client.audio_between(cleared_at - 0.6, cleared_at)) > 300  # the answer was playing
        after_clear = client.audio_between(cleared_at + 0.3, cleared_at + 1.2)
        assert after_clear and rms(after_clear) < 50, rms(after_clear)  # silence while the caller speaks on
        cut = await client.wait_for(is_type("transcript", role="assistant"), after=user, timeout=30)
        cut_text = client.messages[cut].message["text"]
        assert cut > clear and ANSWER.startswith(cut_text) and cut_text != ANSWER, cut_text
        await speaking
        second = await client.wait_for(is_type("transcript", role="user"), after=clear, timeout=30)
        assert words(client.messages[second].message["text"]) & words(SECOND)
        answer = await client.wait_for(is_type("transcript", role="assistant"), after=second, timeout=40)
        assert client.messages[answer].message["text"] == ANSWER

        await client.send({"type": "stop"})
        await client.wait_closed()

    detail = await call_detail(owner, call_id)
    assert (detail["status"], detail["endedReason"], detail["channel"]) == ("completed", "caller-hung-up", "web")
    rows = await sync_to_async(
        lambda: list(
            Call.objects.get(pk=call_id).messages.order_by("occurred_at", "sequence").values_list("role", flat=True)
        )
    )()
    assert list(rows) == ["assistant", "user", "assistant", "user", "assistant"]
    await polled(lambda: webrtc_peer.live_count() == 0, what="the peer gone from the registry", timeout=10)


def issue(agent: Any, **kwargs: Any) -> str:
    return tokens.issue_token(agent_id=agent.pk, organization_id=agent.organization_id, **kwargs)[0]


def offer_url(server: InProcessServer, agent_id: Any, token: str) -> str:
    return f"{server.http_url}/realtime/webrtc/agents/{agent_id}/session?token={quote(token)}"


async def started_call(client: WebRtcClient) -> str:
    """The call id of the session.started message, once the client has connected."""
    started = await client.wait_for(is_type("session.started"), timeout=60)
    return str(client.messages[started].message["callId"])


@pytest.mark.slow
async def test_a_json_offer_trickled_candidates_and_delete(server, ava, owner):
    """The JSON form both ways; the client's candidates left out of its offer and sent by PATCH (JSON, then
    the end of candidates); DELETE ends the call completed, and the session is gone (404 after)."""
    token = issue(ava)
    url = offer_url(server, ava.pk, token)
    async with server.ahttp() as http, WebRtcClient(url, http, form="json", trickle="json") as client:
        answered = await client.offer()
        assert answered.status_code == 201, answered.text
        assert answered.headers["content-type"] == "application/json" and answered.json()["type"] == "answer"
        assert answered.headers["location"] == url
        call_id = await started_call(client)
        # The trickled candidates reached the server's ICE agent (which the connection may also have found
        # by the client's checks, as peer-reflexive candidates).
        live = webrtc_peer.find(tokens.verify_token(token, agent_id=str(ava.pk)).token_id)
        assert live is not None
        transport = live.pc.getTransceivers()[0].receiver.transport.transport
        assert {c.port for c in transport.getRemoteCandidates()} >= {
            int(line.split()[5]) for line in client.pc.localDescription.sdp.splitlines() if line.startswith("a=cand")
        }
        # A malformed candidate is refused; the session goes on.
        refused = await http.patch(url, json={"candidate": "candidate:nonsense", "sdpMid": "0"})
        assert (refused.status_code, refused.json()["code"]) == (400, "BAD_CANDIDATE")
        ended = await http.delete(url)
        assert ended.status_code == 204 and ended.headers["access-control-allow-origin"] == "*"
        await client.wait_closed()
        assert (await http.delete(url)).status_code == 404
        assert (await http.patch(url, json={"candidate": ""})).status_code == 404
    detail = await call_detail(owner, call_id)
    assert (detail["status"], detail["endedReason"]) == ("completed", "caller-hung-up")


@pytest.mark.slow
async def test_trickle_as_an_sdp_fragment_and_a_client_that_closes_its_connection(server, ava, owner):
    url = offer_url(server, ava.pk, issue(ava))
    async with server.ahttp() as http, WebRtcClient(url, http, trickle="sdpfrag") as client:
        assert (await client.offer()).status_code == 201
        call_id = await started_call(client)
        await client.pc.close()  # the browser tab goes away cleanly (DTLS close)
    detail = await call_detail(owner, call_id)
    assert (detail["status"], detail["endedReason"]) == ("completed", "caller-hung-up")


@pytest.mark.slow
async def test_the_offer_url_refuses_tokens_as_the_socket_does(server, ava, owner, make_agent):
    """Expired (the token code's clock, 61 s back), tampered, missing and another agent's tokens are refused
    before anything is spent; a used token (by an offer, or by the socket) is 409; an agent deactivated
    since is 409; each with the code the socket's close codes map to. Bad offers cost nothing."""
    other = await sync_to_async(make_agent)(owner.organization, name="Other", status="active")
    async with server.ahttp() as http:

        async def post(url: str, offer: str = "v=0\r\n", kind: str = "application/sdp") -> tuple[int, str]:
            response = await http.post(url, content=offer, headers={"Content-Type": kind})
            assert response.headers["access-control-allow-origin"] == "*"
            return response.status_code, response.json()["code"]

        expired = issue(ava, now=time.time() - 61)
        assert await post(offer_url(server, ava.pk, expired)) == (401, "INVALID_TOKEN")
        good = issue(ava)
        assert await post(offer_url(server, ava.pk, good[:-3] + ("xyz" if not good.endswith("xyz") else "abc"))) == (
            401,
            "INVALID_TOKEN",
        )
        assert await post(f"{server.http_url}/realtime/webrtc/agents/{ava.pk}/session") == (401, "INVALID_TOKEN")
        assert await post(offer_url(server, other.pk, good)) == (403, "WRONG_AGENT")
        url = offer_url(server, ava.pk, good)
        # Offers that cannot be answered: 400/415, and the token is still good.
        assert await post(url, "hello") == (400, "BAD_SDP")
        assert await post(url, "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n") == (400, "BAD_SDP")
        assert await post(url, '{"type": "answer", "sdp": "v=0"}', "application/json") == (400, "BAD_SDP")
        assert await post(url, "v=0", "text/plain") == (415, "UNSUPPORTED_MEDIA_TYPE")
        async with WebRtcClient(url, http) as first:
            assert (await first.offer()).status_code == 201
            await started_call(first)
            # The token is spent: a second offer, and the socket, are refused as a used token.
            async with WebRtcClient(url, http) as second:
                refused = await second.offer()
                assert (refused.status_code, refused.json()["code"]) == (409, "CONFLICT")
                assert "already used" in refused.json()["error"]
            async with VoiceClient(f"{server.ws_url}/ws/agents/{ava.pk}/realtime?token={good}") as socket:
                assert await socket.wait_closed() == 4409
            await first.send({"type": "stop"})
            await first.wait_closed()
        # The other way round: a token the socket spent is refused at the offerUrl.
        spent = issue(ava)
        async with VoiceClient(f"{server.ws_url}/ws/agents/{ava.pk}/realtime?token={spent}") as socket:
            await socket.wait_for(is_type("session.started"), timeout=60)
            async with WebRtcClient(offer_url(server, ava.pk, spent), http) as late:
                refused = await late.offer()
                assert (refused.status_code, refused.json()["code"]) == (409, "CONFLICT")
            await socket.send({"type": "stop"})
            await socket.wait_closed()
        # An agent deactivated after the token was issued.
        waiting = issue(ava)
        ava.status = "inactive"
        await sync_to_async(ava.save)(update_fields=["status"])
        async with WebRtcClient(offer_url(server, ava.pk, waiting), http) as client:
            refused = await client.offer()
            assert (refused.status_code, refused.json()["code"]) == (409, "CONFLICT")
        # The preflight of a page on any origin.
        preflight = await http.options(url, headers={"Origin": "https://shop.example.com"})
        assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == "*"
        assert set(preflight.headers["access-control-allow-methods"].split(", ")) >= {"POST", "PATCH", "DELETE"}
        assert "content-type" in preflight.headers["access-control-allow-headers"].lower()
        # PATCH and DELETE of a token with no session in this process.
        nobody = offer_url(server, ava.pk, issue(ava))
        assert (await http.delete(nobody)).status_code == 404
    calls = await sync_to_async(lambda: sorted(Call.objects.values_list("status", flat=True)))()
    assert calls == ["completed", "completed"]  # the one offer and the one socket that were answered


@pytest.mark.slow
async def test_messages_on_the_data_channel_are_the_socket_s(server, ava, owner):
    """Bad messages get the socket's `error`s and the session goes on; input_text is a typed turn, answered."""
    async with server.ahttp() as http, WebRtcClient(offer_url(server, ava.pk, issue(ava)), http) as client:
        assert (await client.offer()).status_code == 201
        await started_call(client)
        await client.wait_for(is_type("transcript", role="assistant"), timeout=60)  # the greeting
        for raw, code, says in (
            ("not json", "bad_message", "Messages must be JSON objects"),
            ('{"type": "dance"}', "bad_message", "expected input_text or stop"),
            ('{"type": "input_audio", "audio": "AAAA"}', "bad_message", "audio is on the track"),
            (b"\x00\x01", "bad_message", "Binary messages are not supported"),
            ('{"type": "input_text", "text": 12}', "bad_text", ""),
        ):
            before = len(client.messages)
            await client.send_raw(raw)
            index = await client.wait_for(is_type("error"), after=before)
            assert client.messages[index].message["code"] == code and says in client.messages[index].message["message"]
        before = len(client.messages)
        await client.send({"type": "input_text", "text": SENTENCE})
        user = await client.wait_for(is_type("transcript", role="user"), after=before, timeout=30)
        assert client.messages[user].message["text"] == SENTENCE
        answer = await client.wait_for(is_type("transcript", role="assistant"), after=user, timeout=40)
        assert client.messages[answer].message["text"] == ANSWER
        await client.send({"type": "stop"})
        await client.wait_closed()


async def test_a_client_that_never_connects_ends_the_call_failed(server, ava, owner, monkeypatch):
    """The answer is made but the client never connects (its ICE never starts): within the bound the call
    ends failed, connection-lost, and the session is gone."""
    monkeypatch.setattr(webrtc_peer, "CONNECT_TIMEOUT_SECONDS", 2.0)
    url = offer_url(server, ava.pk, issue(ava))
    async with server.ahttp() as http, WebRtcClient(url, http, apply_answer=False) as client:
        assert (await client.offer()).status_code == 201
        ended = sync_to_async(lambda: Call.objects.filter(agent=ava).exclude(status="active").first())
        call = await polled(ended, what="the call ended", timeout=30)
    assert (call.status, call.ended_reason) == ("failed", "connection-lost")
    assert "did not connect" in call.ended_message
    await polled(lambda: webrtc_peer.live_count() == 0, what="the peer gone from the registry", timeout=10)


@pytest.mark.slow
async def test_an_api_hang_up_ends_a_webrtc_call(server, ava, owner):
    async with server.ahttp() as http, WebRtcClient(offer_url(server, ava.pk, issue(ava)), http) as client:
        assert (await client.offer()).status_code == 201
        call_id = await started_call(client)
        response = await sync_to_async(owner.client.post)(f"/public/v1/calls/{call_id}/hang-up")
        assert response.status_code in (200, 202, 204), response.content
        await client.wait_closed()
    detail = await call_detail(owner, call_id)
    assert (detail["status"], detail["endedReason"]) == ("completed", "agent-ended-call")


async def test_realtime_sessions_offer_webrtc_only_when_asked(server, ava, owner, settings):
    url = f"/public/v1/agents/{ava.pk}/realtime-sessions"
    plain = await sync_to_async(owner.client.post)(url, {}, format="json")
    assert plain.status_code == 200 and "webrtc" not in plain.json()
    for body in ({"transport": "carrier-pigeon"}, {"transport": 3}, {"transport": "webrtc", "modality": "text"}):
        refused = await sync_to_async(owner.client.post)(url, body, format="json")
        assert refused.status_code == 400 and "transport" in refused.json()["issues"], refused.content
    settings.WEBRTC_ICE_SERVERS = ["stun:stun.example.com:3478", "turn:turn.example.com:3478?transport=udp"]
    settings.WEBRTC_TURN_SECRET = "turn-shared-secret-0123456789abcdef-XYZ"
    session = await webrtc_session(owner, ava)
    stun, turn = session["webrtc"]["iceServers"]
    assert stun == {"urls": ["stun:stun.example.com:3478"]}
    assert turn["urls"] == ["turn:turn.example.com:3478?transport=udp"]
    expiry, _ = turn["username"].split(":")
    assert 3500 < int(expiry) - time.time() <= 3600
