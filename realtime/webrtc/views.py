"""The offerUrl of WebRTC sessions (docs/webrtc.md): `/realtime/webrtc/agents/{agentId}/session?token=...`.

No API key: the session token is the credential (it is in the URL the client was given), so any origin may
call it (CORS `*`, no cookies). Async views: the peer connection an offer creates lives in this process's
event loop after the answer, so PATCH and DELETE must reach the same process (docs/webrtc.md, "Several
processes").

- POST, an SDP offer (`application/sdp`, or JSON `{"type": "offer", "sdp"}`): 201 with the answer in the
  same form and `Location: <offerUrl>`. The token is checked first (401 invalid or expired, 403 another
  agent's), then the offer (415 another body type, 413 too large, 400 unreadable, no audio m-line, nothing
  in common with the server), and only then spent (409 already used or the agent not active, 404 agent gone),
  as the socket spends it.
- PATCH, trickle ICE (`application/trickle-ice-sdpfrag`, RFC 8840, or JSON `{"candidate", "sdpMid",
  "sdpMLineIndex"}` or a list of them; an empty candidate ends the client's candidates): 204; 404 when no
  session of the token lives in this process. ICE restarts are not supported.
- DELETE: ends the session (the call ends completed, caller-hung-up): 204; 404 as for PATCH.
A spent token keeps naming its session for PATCH and DELETE after its 60 s: only its signature and agent
are checked then.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from calls.models import CallStatus, EndedReason
from kit.errors import ApiError
from realtime import tokens
from realtime.services import webrtc_offer_url

if TYPE_CHECKING:
    from aiortc import RTCIceCandidate

    from realtime.webrtc.peer import PeerSession

MAX_BODY_BYTES = 64 * 1024
SDP = "application/sdp"
JSON = "application/json"
SDPFRAG = "application/trickle-ice-sdpfrag"
METHODS = "POST, PATCH, DELETE, OPTIONS"
CORS = {"Access-Control-Allow-Origin": "*", "Access-Control-Expose-Headers": "Location"}
PREFLIGHT = {
    **CORS,
    "Access-Control-Allow-Methods": METHODS,
    "Access-Control-Allow-Headers": "Content-Type",
    "Access-Control-Max-Age": "600",
}
# A refused token: the status and code of each of the socket's close codes.
TOKEN_ERRORS = {
    tokens.CLOSE_INVALID_TOKEN: (401, "INVALID_TOKEN"),
    tokens.CLOSE_WRONG_AGENT: (403, "WRONG_AGENT"),
    tokens.CLOSE_NOT_FOUND: (404, "AGENT_NOT_FOUND"),
    tokens.CLOSE_CONFLICT: (409, "CONFLICT"),
    tokens.CLOSE_NOT_CONFIGURED: (503, "NOT_CONFIGURED"),
}


class Refused(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _error(status: int, code: str, message: str) -> JsonResponse:
    response = JsonResponse({"error": message, "code": code}, status=status)
    for name, value in CORS.items():
        response[name] = value
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="webrtc"'
    if status == 405:
        response["Allow"] = METHODS
    return response


def _with_cors(response: HttpResponse) -> HttpResponse:
    for name, value in CORS.items():
        response[name] = value
    return response


@csrf_exempt
async def session(request: HttpRequest, agent_id: str) -> HttpResponse:
    if request.method == "OPTIONS":
        preflight = HttpResponse(status=204)
        for name, value in PREFLIGHT.items():
            preflight[name] = value
        return preflight
    token = request.GET.get("token") or None
    try:
        if request.method == "POST":
            return await _offer(request, agent_id, token)
        if request.method == "PATCH":
            return await _trickle(request, agent_id, token)
        if request.method == "DELETE":
            peer = _live(agent_id, token)
            await asyncio.shield(peer.end(CallStatus.COMPLETED, EndedReason.CALLER_HUNG_UP))
            return _with_cors(HttpResponse(status=204))
    except Refused as refused:
        return _error(refused.status, refused.code, refused.message)
    except tokens.TokenError as exc:
        status, code = TOKEN_ERRORS[exc.close_code]
        return _error(status, code, exc.message)
    return _error(405, "METHOD_NOT_ALLOWED", f"Use {METHODS} on a session's offerUrl")


def _body(request: HttpRequest, allowed: tuple[str, ...]) -> tuple[str, str]:
    """(the media type, the body as text) of a request whose type is one of `allowed`."""
    kind = (request.content_type or "").lower()
    if kind not in allowed:
        raise Refused(415, "UNSUPPORTED_MEDIA_TYPE", f"Send the body as {' or '.join(allowed)}")
    if len(request.body) > MAX_BODY_BYTES:
        raise Refused(413, "TOO_LARGE", f"The body is limited to {MAX_BODY_BYTES} bytes")
    try:
        return kind, request.body.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(400, "BAD_REQUEST", "The body is not UTF-8 text") from None


async def _offer(request: HttpRequest, agent_id: str, token: str | None) -> HttpResponse:
    claims = tokens.verify_token(token, agent_id=agent_id)
    assert token is not None
    kind, text = _body(request, (SDP, JSON))
    offer = text
    if kind == JSON:
        try:
            body: Any = json.loads(text)
        except ValueError:
            raise Refused(400, "BAD_SDP", "The body is not JSON") from None
        if not isinstance(body, dict) or body.get("type") != "offer" or not isinstance(body.get("sdp"), str):
            raise Refused(400, "BAD_SDP", 'The JSON body must be {"type": "offer", "sdp": "<the SDP offer>"}')
        offer = body["sdp"]
    from realtime.webrtc import peer  # aiortc is imported with the first offer

    problem = peer.offer_problem(offer)
    if problem is not None:
        raise Refused(400, "BAD_SDP", problem)
    try:
        answered = await peer.answer(token=token, token_id=claims.token_id, agent_id=agent_id, offer=offer)
    except peer.BadOffer as exc:
        raise Refused(400, "BAD_SDP", exc.message) from None
    local = answered.pc.localDescription
    assert local is not None
    if kind == JSON:
        response: HttpResponse = JsonResponse({"type": "answer", "sdp": local.sdp}, status=201)
    else:
        response = HttpResponse(local.sdp, status=201, content_type=SDP)
    try:
        response["Location"] = webrtc_offer_url(agent_id, token)
    except ApiError:  # REALTIME_WS_URL unset: the path the client used
        response["Location"] = request.get_full_path()
    return _with_cors(response)


def _live(agent_id: str, token: str | None) -> PeerSession:
    """The live session of this process that the token opened (the token's signature and agent checked,
    not its expiry)."""
    claims = tokens.verify_token(token, agent_id=agent_id, now=0.0)
    from realtime.webrtc import peer

    found = peer.find(claims.token_id)
    if found is None:
        raise Refused(404, "SESSION_NOT_FOUND", "No live WebRTC session of this token in this process")
    return found


async def _trickle(request: HttpRequest, agent_id: str, token: str | None) -> HttpResponse:
    live = _live(agent_id, token)
    kind, text = _body(request, (SDPFRAG, JSON))
    candidates = _sdpfrag_candidates(text) if kind == SDPFRAG else _json_candidates(text)
    for candidate in candidates:
        try:
            await live.add_candidate(candidate)
        except (ValueError, TypeError) as exc:
            raise Refused(400, "BAD_CANDIDATE", f"The candidate cannot be added: {exc}") from None
    return _with_cors(HttpResponse(status=204))


def _candidate(line: str, mid: str | None, index: int | None) -> RTCIceCandidate:
    from aiortc.sdp import candidate_from_sdp

    value = line.removeprefix("a=").removeprefix("candidate:")
    try:
        candidate = candidate_from_sdp(value)
    except (AssertionError, ValueError, IndexError):
        raise Refused(400, "BAD_CANDIDATE", f"Not an ICE candidate: {line[:200]!r}") from None
    candidate.sdpMid, candidate.sdpMLineIndex = mid, index
    return candidate


def _json_candidates(text: str) -> list[RTCIceCandidate | None]:
    try:
        body: Any = json.loads(text)
    except ValueError:
        raise Refused(400, "BAD_CANDIDATE", "The body is not JSON") from None
    items = body if isinstance(body, list) else [body]
    candidates: list[RTCIceCandidate | None] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("candidate", ""), str):
            raise Refused(400, "BAD_CANDIDATE", 'Send {"candidate": "candidate:...", "sdpMid", "sdpMLineIndex"}')
        line = item.get("candidate") or ""
        if not line:
            candidates.append(None)  # the end of the client's candidates
            continue
        mid, index = item.get("sdpMid"), item.get("sdpMLineIndex")
        if (mid is not None and not isinstance(mid, str)) or (index is not None and not isinstance(index, int)):
            raise Refused(400, "BAD_CANDIDATE", "sdpMid must be a string and sdpMLineIndex an integer")
        if mid is None and index is None:
            mid, index = None, 0
        candidates.append(_candidate(line, mid, index))
    return candidates


def _sdpfrag_candidates(text: str) -> list[RTCIceCandidate | None]:
    """The candidates of an RFC 8840 SDP fragment: each `a=candidate` of the m-line (`a=mid`) it follows,
    and `a=end-of-candidates`."""
    candidates: list[RTCIceCandidate | None] = []
    mid: str | None = None
    index = -1
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("m="):
            index, mid = index + 1, None
        elif line.startswith("a=mid:"):
            mid = line[len("a=mid:") :]
        elif line.startswith("a=candidate:"):
            candidates.append(_candidate(line, mid, max(index, 0)))
        elif line == "a=end-of-candidates":
            candidates.append(None)
    return candidates
