"""Metrics an operator can watch, end to end: the project's ASGI application in the test's process
(testing/inprocess.py; VOICE_ENGINE=speech-to-speech against the scripted speech-to-speech provider, a
webhook tool on loopback, METRICS_TOKEN set and traces sent to a scripted OTLP/HTTP receiver) takes a call
with a caller turn that calls a tool; then /metrics is scraped through the application, the call detail
read, the dashboard's call page opened (Django's test client, a staff login) and the received spans
decoded.

The metrics are this process's (prometheus-client's registry, as a server's are its process's): what the
call adds is read as the difference between a scrape before it and the scrapes during and after it.
Traces are on while OTEL_EXPORTER_OTLP_ENDPOINT is set (kit/tracing.py reads the environment, as a
server's process does): the test sets it and gets a tracer of its own."""

from __future__ import annotations

import asyncio
import gzip
import os
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.test import Client
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client.parser import text_string_to_metric_families

from calls.logging import flush_agent_logs
from calls.models import AgentLog
from kit import tracing
from realtime import tokens
from testing.agents import with_order_tool
from testing.clients import VoiceClient, is_type
from testing.inprocess import InProcessServer, serving
from testing.speech_to_speech_provider import CallTool, ProviderServer, Say, eventually
from testing.waiting import polled
from testing.webhooks import LoopbackReceiver, Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

METRICS_TOKEN = "scrape-7Qv2-mK9d-Xw4p-Lr8n"
ANSWER = "Order 3561 shipped yesterday."


@pytest.fixture(scope="module")
def provider() -> Iterator[ProviderServer]:
    with ProviderServer() as server:
        yield server


@pytest.fixture(scope="module")
def collector() -> Iterator[LoopbackReceiver]:
    """A scripted OpenTelemetry collector: accepts OTLP/HTTP protobuf exports on /v1/traces."""
    with LoopbackReceiver(Reply(status=200, body=b"", content_type="application/x-protobuf")) as receiver:
        yield receiver


@pytest.fixture
def traced(monkeypatch: Any, collector: LoopbackReceiver) -> Iterator[None]:
    """Traces on for the test, to the scripted collector: the environment kit/tracing.py reads, and a
    tracer made afresh from it (shut down after the test)."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.base)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")  # export spans within 0.1 s (the SDK's default is 5 s)
    monkeypatch.setattr(tracing, "_tracer", None)
    monkeypatch.setattr(tracing, "_provider", None)
    yield
    if tracing._provider is not None:
        tracing._provider.shutdown()


@pytest.fixture
def server(settings: Any, realtime_settings: Any, provider: ProviderServer, traced: None) -> Iterator[InProcessServer]:
    values = {
        "OUTBOUND_ALLOWED_NETWORKS": ["127.0.0.0/8"],
        "VOICE_ENGINE": "speech-to-speech",
        "REALTIME_PROVIDER_URL": provider.url,
        "REALTIME_PROVIDER_MODEL": "gpt-realtime-metrics",
        "REALTIME_PROVIDER_API_KEY": "sk-metrics-e2e",
        "METRICS_TOKEN": METRICS_TOKEN,
    }
    with serving(settings, values) as started:
        yield started


@pytest.fixture
def hook() -> Iterator[LoopbackReceiver]:
    with LoopbackReceiver(Reply(json={"message": ANSWER})) as receiver:
        yield receiver


def order_desk(owner: Any, make_agent: Any, hook: LoopbackReceiver) -> Any:
    agent = make_agent(
        owner.organization,
        name="Olive",
        status="active",
        instructions="You help callers with their orders.",
        greeting_type="static",
        static_greeting="Thanks for calling.",
        agent_type="webhook",
        server_url=hook.url("/hooks/voice"),
        server_secret="whsec-metrics-e2e",
    )
    return with_order_tool(agent)


async def scrape(server: InProcessServer, token: str | None = METRICS_TOKEN) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with server.ahttp(headers=headers) as http:
        response = await http.get("/metrics")
    return response.status_code, response.text


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample of the exposition (0 when absent)."""
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and all(found.labels.get(key) == value for key, value in labels.items()):
                return found.value
    return 0.0


def spans(collector: LoopbackReceiver) -> list[Any]:
    found = []
    for request in list(collector.requests):
        if request.path != "/v1/traces":
            continue
        body = gzip.decompress(request.body) if request.headers.get("content-encoding") == "gzip" else request.body
        export = ExportTraceServiceRequest.FromString(body)
        for resource in export.resource_spans:
            for scope in resource.scope_spans:
                found.extend(scope.spans)
    return found


async def test_a_call_shows_in_the_metrics_the_call_detail_the_dashboard_and_the_traces(
    server, provider, collector, owner, make_agent, realtime_settings, hook
):
    agent = await sync_to_async(order_desk)(owner, make_agent, hook)
    status, before = await scrape(server)
    assert status == 200, before[:200]
    token = tokens.issue_token(agent_id=agent.pk, organization_id=agent.organization_id)[0]
    async with VoiceClient(f"{server.ws_url}/ws/agents/{agent.pk}/realtime?token={token}") as client:
        first = await client.wait_for(is_type("session.started"), timeout=60)
        call_id = client.messages[first].message["callId"]
        await client.send_audio(b"\x00\x00" * 3200)
        await client.wait_for(is_type("transcript", role="assistant"), timeout=30)  # the greeting
        _, during = await scrape(server)
        live = {"channel": "web", "engine": "speech-to-speech"}
        for gauge in ("voiceagent_live_calls", "voiceagent_live_sessions"):
            assert sample(during, gauge, **live) - sample(before, gauge, **live) == 1, gauge

        # One caller turn: the provider calls the tool, then speaks the answer.
        connection = provider.last
        provider.script(Say(ANSWER))
        mark = len(client.messages)
        call = CallTool("check_order_status", {"order_number": "3561"}, call_id="call_metrics_1")
        await provider.run(lambda: connection.caller_turn("Where is order 3561?", call))
        await client.wait_for(is_type("transcript", role="assistant"), after=mark, timeout=30)
        await client.send({"type": "stop"})
        assert await client.wait_closed() == 1000

    status, after = await scrape(server)
    assert status == 200

    def counted(name: str, **labels: str) -> float:
        return sample(after, name, **labels) - sample(before, name, **labels)

    # The caller's turn (not the greeting) in each stage the speech-to-speech engine measures.
    for stage in ("first_token", "first_audio", "total"):
        assert counted("voiceagent_turn_latency_seconds_count", stage=stage, engine="speech-to-speech") == 1, stage
    assert counted("voiceagent_turn_latency_seconds_count", stage="recognition", engine="speech-to-speech") == 0
    assert counted("voiceagent_turn_latency_seconds_sum", stage="total", engine="speech-to-speech") > 0
    assert counted("voiceagent_tool_call_duration_seconds_count", kind="webhook", outcome="success") == 1
    assert counted("voiceagent_live_calls", **live) == 0
    assert counted("voiceagent_live_sessions", **live) == 0
    assert counted("voiceagent_event_loop_lag_seconds_count") >= 1  # sampled while the call was live
    assert "voiceagent_rate_limit_refusals_total" in after and "voiceagent_provider_errors_total" in after
    if os.environ.get("REDIS_URL"):  # the Celery queue's length, read from Redis at scrape time
        assert sample(after, "voiceagent_task_queue_length", queue="celery") >= 0
        assert "voiceagent_task_queue_length{" in after

    # The call's last agent-log lines are written after the socket closed (a server's writer thread does it
    # every second; each look here writes the lines buffered so far): wait for them.
    def session_ended() -> bool:
        flush_agent_logs()
        return AgentLog.objects.filter(content__message="session ended", content__callId=str(call_id)).exists()

    await polled(sync_to_async(session_ended), what="the 'session ended' agent log", timeout=15, every=0.2)

    # The same turn on the call record: p50/p95 per stage in the call detail.
    response = await sync_to_async(owner.client.get)(f"/public/v1/calls/{call_id}")
    latency = response.json()["latency"]
    assert latency["turns"] == 1
    assert latency["endOfTurnMs"] is None and latency["recognitionMs"] is None  # inside the provider
    for key in ("firstTokenMs", "firstAudioMs", "totalMs"):
        assert set(latency[key]) == {"p50", "p95"} and latency[key]["p50"] == latency[key]["p95"] >= 0
    assert latency["totalMs"]["p50"] >= latency["firstAudioMs"]["p50"]

    # ... and on the dashboard's call page.
    def call_page() -> str:
        browser = Client()
        browser.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
        return browser.get(f"/admin/calls/call/{call_id}/change/").content.decode()

    page = await sync_to_async(call_page)()
    assert "Turn latency" in page and "1 answered turn" in page
    assert f"<td>{latency['totalMs']['p50']}</td><td>{latency['totalMs']['p95']}</td>" in page

    # A trace per call with a span per answered turn.
    await asyncio.to_thread(tracing.flush)
    await eventually(lambda: any(span.name == "voice.call" for span in spans(collector)), what="the call's span")
    received = spans(collector)
    (call_span,) = [span for span in received if span.name == "voice.call"]
    turn_spans = [span for span in received if span.name == "voice.turn"]
    assert len(turn_spans) == 1 and turn_spans[0].parent_span_id == call_span.span_id
    attributes = {attribute.key: attribute.value for attribute in call_span.attributes}
    assert attributes["voiceagent.call_id"].string_value == call_id
    assert attributes["voiceagent.status"].string_value == "completed"


async def test_the_metrics_endpoint_refuses_a_missing_or_wrong_token(server):
    assert (await scrape(server, token=None))[0] == 401
    assert (await scrape(server, token="scrape-7Qv2-mK9d-Xw4p-Lr8X"))[0] == 401
    status, body = await scrape(server)
    assert status == 200 and "# TYPE voiceagent_turn_latency_seconds histogram" in body
