"""Speech through an OpenAI-compatible audio API (OpenAI, faster-whisper-server/Speaches,
Kokoro-FastAPI, LocalAI, vLLM): ASR_PROVIDER=openai and TTS_PROVIDER=openai.

Recognition: the recognizer collects a caller turn's audio while the caller speaks (`feed`) and at
`finish()` posts it as a 16 kHz mono WAV file to `POST {ASR_BASE_URL}/audio/transcriptions`
(multipart: `file`, `model`, `language` from the agent's language, `response_format=json`, and a
`prompt` made of the agent's own words, tool names and such, capped at ASR_PROMPT_CHARS, which
biases the recognizer towards them), and returns the answer's `text`.

Synthesis: `POST {TTS_BASE_URL}/audio/speech` with `{"model", "input", "voice", "response_format":
"pcm"}`; the raw PCM16 mono body (24 kHz at OpenAI; TTS_SAMPLE_RATE for servers that differ, then
resampled with soxr) is read as it streams in, within TTS_TIMEOUT_SECONDS for the whole sentence. A
server that answers a WAV file anyway is understood too. Agent voices map to the server's voices
through TTS_VOICE_MAP.

Both are blocking (httpx, one pooled client per process): the cascade calls them off the event loop.
Every failure is a `ProviderError` whose message names the server by host and port only and never
holds the key; `permanent` is set for 401, 403 and 404 (the configuration is wrong: retrying cannot
help), not for a refusal of one request's content (400, 413, 422), a timeout or a 5xx.

The requests go straight to the configured URL, not through kit.egress: the address is the
operator's deployment setting (often a loopback server), not a tenant-supplied URL.
"""

from __future__ import annotations

import io
import json
import logging
import re
import threading
import time
import wave
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np
import soxr
from django.conf import settings

from kit.providers import ProviderError
from realtime.engine.audio import IN_RATE, OUT_RATE
from realtime.engine.speech.providers import TurnAudio

logger = logging.getLogger(__name__)

PERMANENT_STATUSES = frozenset({401, 403, 404})
ERROR_DETAIL_CHARS = 200
# The agent's voices -> OpenAI's (tts-1, gpt-4o-mini-tts); TTS_VOICE_MAP overrides them per name.
DEFAULT_VOICES = {"eve": "alloy", "ara": "nova", "rex": "onyx", "sal": "echo", "leo": "fable"}
AGENT_VOICES = tuple(DEFAULT_VOICES)
_WHAT = {"ASR": "speech recognition", "TTS": "speech synthesis"}


# --- settings ------------------------------------------------------------------------------------
def parse_voice_map(text: str) -> dict[str, str]:
    """TTS_VOICE_MAP ("eve=alloy,ara=nova", "*=af_bella" for every name not listed) over the
    defaults; ValueError for an entry that is not name=voice or names no agent voice."""
    given: dict[str, str] = {}
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        name, sep, voice = (piece.strip() for piece in entry.partition("="))
        if not sep or not name or not voice:
            raise ValueError(f"TTS_VOICE_MAP entry {entry!r} is not name=voice")
        if name != "*" and name not in AGENT_VOICES:
            raise ValueError(f"TTS_VOICE_MAP names {name!r}, not one of the agent voices {', '.join(AGENT_VOICES)}")
        given[name] = voice
    every = given.pop("*", None)
    return {name: given.get(name) or every or default for name, default in DEFAULT_VOICES.items()}


def configuration_problems(kind: str) -> list[str]:
    """What is missing or invalid in the ASR_* (kind "ASR") or TTS_* ("TTS") settings."""
    problems = []
    base_url = getattr(settings, f"{kind}_BASE_URL")
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        problems.append(f"{kind}_BASE_URL must be an http(s) URL such as https://api.openai.com/v1")
    example = "whisper-1" if kind == "ASR" else "tts-1"
    if not getattr(settings, f"{kind}_MODEL").strip():
        problems.append(f"{kind}_MODEL is not set (the model name the server knows, e.g. {example})")
    if parts.hostname == "api.openai.com" and not getattr(settings, f"{kind}_API_KEY"):
        problems.append(f"{kind}_API_KEY is not set (api.openai.com requires one)")
    if not getattr(settings, f"{kind}_TIMEOUT_SECONDS") > 0:
        problems.append(f"{kind}_TIMEOUT_SECONDS must be more than 0")
    if kind == "ASR" and settings.ASR_PROMPT_CHARS < 0:
        problems.append("ASR_PROMPT_CHARS must be 0 (no prompt) or more")
    if kind == "TTS":
        if not 8000 <= settings.TTS_SAMPLE_RATE <= 48000:
            problems.append("TTS_SAMPLE_RATE must be the server's PCM sample rate, between 8000 and 48000")
        try:
            parse_voice_map(settings.TTS_VOICE_MAP)
        except ValueError as exc:
            problems.append(str(exc))
    return problems


# --- one HTTP client per process and server ------------------------------------------------------
class _Endpoint:
    """One configured server (ASR_* or TTS_*): requests with the key, errors without it."""

    def __init__(self, kind: str) -> None:
        problems = configuration_problems(kind)
        if problems:
            raise ProviderError("; ".join(problems), permanent=True)
        self.kind = kind
        self.what = _WHAT[kind]
        self.base_url = getattr(settings, f"{kind}_BASE_URL").rstrip("/")
        self.model = getattr(settings, f"{kind}_MODEL").strip()
        self.timeout = float(getattr(settings, f"{kind}_TIMEOUT_SECONDS"))
        parts = urlsplit(self.base_url)
        self.server = parts.hostname + (f":{parts.port}" if parts.port else "")  # never the userinfo
        self._api_key = getattr(settings, f"{kind}_API_KEY")
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        # Shared by the sessions' worker threads (httpx.Client is thread-safe); kept-alive connections
        # spare each turn a TCP and TLS handshake.
        self._client = httpx.Client(headers=headers, timeout=self.timeout, follow_redirects=False)

    def post(self, path: str, **request: Any) -> tuple[bytes, str]:
        """The body and content type of a 2xx answer, read within the timeout (the whole answer)."""
        deadline = time.monotonic() + self.timeout
        try:
            with self._client.stream("POST", f"{self.base_url}{path}", **request) as response:
                chunks = []
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    if time.monotonic() > deadline:
                        raise httpx.ReadTimeout("the answer took too long")
                body = b"".join(chunks)
                if response.status_code >= 300:
                    raise self._status_error(response.status_code, body)
                return body, response.headers.get("content-type", "")
        except httpx.TimeoutException:
            raise ProviderError(f"The {self.what} server did not answer within {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise ProviderError(f"Cannot reach the {self.what} server ({self.server}): {type(exc).__name__}") from None
        except ProviderError:
            raise
        except Exception as exc:  # noqa: BLE001 - the cascade expects ProviderError only
            logger.warning("Unexpected failure of the %s request: %s", self.what, type(exc).__name__)
            raise ProviderError(f"Unexpected failure of the {self.what} request ({type(exc).__name__})") from None

    def _status_error(self, status: int, body: bytes) -> ProviderError:
        hint = {
            401: f" (check {self.kind}_API_KEY)",
            403: f" (check {self.kind}_API_KEY)",
            404: f" (check {self.kind}_BASE_URL and {self.kind}_MODEL)",
            429: " (rate limited)",
        }.get(status, "")
        detail = _detail(body, self._api_key)
        message = f"The {self.what} server answered HTTP {status}{hint}" + (f": {detail}" if detail else "")
        return ProviderError(message, permanent=status in PERMANENT_STATUSES)

    def close(self) -> None:
        self._client.close()


_endpoints: dict[tuple[Any, ...], _Endpoint] = {}
_endpoints_lock = threading.Lock()


def _endpoint(kind: str) -> _Endpoint:
    """The process's client for the server the settings name now."""
    key = (kind, *(getattr(settings, f"{kind}_{name}") for name in ("BASE_URL", "API_KEY", "MODEL", "TIMEOUT_SECONDS")))
    with _endpoints_lock:
        if key not in _endpoints:
            _endpoints[key] = _Endpoint(kind)
        return _endpoints[key]


def reset() -> None:
    """Forget the clients (tests that change the settings)."""
    with _endpoints_lock:
        for endpoint in _endpoints.values():
            endpoint.close()
        _endpoints.clear()


# --- recognition ---------------------------------------------------------------------------------
def wav_file(pcm16: bytes, rate: int = IN_RATE) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm16)
    return buffer.getvalue()


def api_language(language: str) -> str:
    """The agent's language tag as the ISO 639-1 code the transcription API takes ("es-US" -> "es")."""
    return language.split("-", 1)[0].lower()


def vocabulary_prompt(agent: Any, vocabulary_texts: Iterable[str], limit: int) -> str:
    """Words the caller is likely to say that a general model may miss: the agent's name, then short
    vocabulary entries (tool names as words, parameter and enum values), up to `limit` characters."""
    if limit <= 0:
        return ""
    terms: list[str] = []
    seen: set[str] = set()
    for text in (agent.name, *vocabulary_texts):
        term = " ".join(re.sub(r"[_\W]+", " ", str(text)).split())
        if not term or len(term.split()) > 4 or term.lower() in seen:
            continue  # long texts (descriptions, knowledge) bias little and crowd out names
        seen.add(term.lower())
        terms.append(term)
    prompt = ""
    for term in terms:
        candidate = f"{prompt}, {term}" if prompt else term
        if len(candidate) > limit:
            break
        prompt = candidate
    return prompt


class ProviderRecognizer(TurnAudio):
    """One conversation's recognizer: the turn's audio is kept while the caller speaks and posted
    when the turn ends (finish)."""

    def __init__(self, endpoint: _Endpoint, *, language: str, prompt: str = "") -> None:
        super().__init__()
        self.endpoint = endpoint
        self.language = api_language(language)
        self.prompt = prompt

    def finish(self) -> str:
        """The caller's words ('' when the turn had no audio or the server heard none);
        ProviderError when the server fails (the audio is dropped either way)."""
        audio = self.take()
        if not audio:
            return ""
        data = {"model": self.endpoint.model, "language": self.language, "response_format": "json"}
        if self.prompt:
            data["prompt"] = self.prompt
        body, _ = self.endpoint.post(
            "/audio/transcriptions", data=data, files={"file": ("speech.wav", wav_file(audio), "audio/wav")}
        )
        try:
            answer = json.loads(body)
        except ValueError:
            raise ProviderError(f"The {self.endpoint.what} server did not answer JSON") from None
        text = answer.get("text") if isinstance(answer, dict) else None
        if not isinstance(text, str):
            raise ProviderError(f"The {self.endpoint.what} server's answer has no text")
        return " ".join(text.split())


class OpenAITranscription:
    """ASR_PROVIDER=openai (the settings are read for each conversation)."""

    def __init__(self) -> None:
        _endpoint("ASR")  # incomplete settings fail here, at the first session

    def recognizer(self, agent: Any, vocabulary_texts: Iterable[str]) -> ProviderRecognizer:
        prompt = vocabulary_prompt(agent, vocabulary_texts, settings.ASR_PROMPT_CHARS)
        return ProviderRecognizer(_endpoint("ASR"), language=agent.language, prompt=prompt)


# --- synthesis -----------------------------------------------------------------------------------
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class OpenAISpeech:
    """TTS_PROVIDER=openai (the settings are read for each sentence)."""

    def __init__(self) -> None:
        _endpoint("TTS")  # incomplete settings fail here, at the first session

    @staticmethod
    def voice(voice_name: str) -> str:
        try:
            voices = parse_voice_map(settings.TTS_VOICE_MAP)
        except ValueError as exc:
            raise ProviderError(str(exc), permanent=True) from None
        return voices.get(voice_name) or voices["eve"]

    def synthesize(self, text: str, language: str, voice_name: str) -> bytes:
        """Speech for `text` as PCM16 LE mono 24 kHz (empty for text with nothing to say)."""
        text = _CONTROL.sub(" ", text).strip()
        if not text:
            return b""
        endpoint = _endpoint("TTS")
        request = {
            "model": endpoint.model,
            "input": text,
            "voice": self.voice(voice_name),
            "response_format": "pcm",
        }
        body, content_type = endpoint.post("/audio/speech", json=request)
        if content_type.startswith(("application/json", "text/")):
            raise ProviderError(f"The {endpoint.what} server answered {content_type.split(';')[0]}, not audio")
        pcm, rate = _pcm(body, settings.TTS_SAMPLE_RATE)
        if not pcm:
            raise ProviderError(f"The {endpoint.what} server answered no audio")
        if rate == OUT_RATE:
            return pcm
        samples = np.frombuffer(pcm, dtype="<i2")
        resampled = soxr.resample(samples, rate, OUT_RATE, quality="HQ")
        audio: bytes = np.clip(resampled, -32768, 32767).astype("<i2").tobytes()
        return audio


def _pcm(body: bytes, rate: int) -> tuple[bytes, int]:
    """Raw PCM16 mono at `rate`; a WAV file (some servers send one whatever was asked) is unpacked."""
    if body[:4] == b"RIFF" and body[8:12] == b"WAVE":
        try:
            with wave.open(io.BytesIO(body), "rb") as source:
                if source.getsampwidth() != 2:
                    raise ProviderError("The speech synthesis server answered a WAV file that is not 16-bit")
                frames = source.readframes(source.getnframes())
                channels, rate = source.getnchannels(), source.getframerate()
        except (wave.Error, EOFError):
            raise ProviderError("The speech synthesis server answered an unreadable WAV file") from None
        if channels > 1:
            frames = np.frombuffer(frames, dtype="<i2").reshape(-1, channels).mean(axis=1).astype("<i2").tobytes()
        return frames, rate
    return body[: len(body) - len(body) % 2], rate


# --- small helpers -------------------------------------------------------------------------------
_SECRETISH = re.compile(r"\b(?:sk|gsk|xai|pk|rk)[-_][\w\-*.]{4,}|\S*\*{3,}\S*|\b[\w\-]{32,}\b")


def _detail(body: bytes, api_key: str) -> str:
    """The server's short error message, without anything that looks like a key."""
    text = body.decode("utf-8", "replace")
    message: object = text if not text.lstrip().startswith(("<", "{")) else None
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        message = parsed.get("message") or parsed.get("error") or parsed.get("detail")
        if isinstance(message, dict):
            message = message.get("message")
    if not isinstance(message, str):
        return ""
    if api_key:
        message = message.replace(api_key, "[redacted]")
    message = " ".join(_SECRETISH.sub("[redacted]", message).split())
    return message if len(message) <= ERROR_DETAIL_CHARS else message[: ERROR_DETAIL_CHARS - 1] + "…"
