"""OpenTelemetry traces per call and per turn, only when OTEL_EXPORTER_OTLP_ENDPOINT is set
(docs/operations/metrics.md). Off otherwise: the SDK is not imported, no exporter thread runs, and the calls
below do nothing.

One span per voice session ("voice.call": channel, engine, call id, final status) and one child span
per answered caller turn ("voice.turn", from the caller's last speech to the answer's first audio,
with each latency stage in ms as an attribute). Spans go through the official SDK's batch processor
and the OTLP/HTTP (protobuf) exporter, which reads the standard OTEL_* variables (endpoint, headers,
timeout); OTEL_SERVICE_NAME names the service (default "voiceagent").
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import Any

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"

_lock = threading.Lock()
_tracer: Any = None
_provider: Any = None


def enabled() -> bool:
    return bool(os.environ.get(ENDPOINT_ENV))


def tracer() -> Any:
    """The process's tracer, set up on first use (None when tracing is off)."""
    global _tracer, _provider
    if not enabled():
        return None
    with _lock:
        if _tracer is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or "voiceagent"})
            _provider = TracerProvider(resource=resource)
            # Spans leave in batches from the SDK's own thread: the audio path never waits on the collector.
            _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
            _tracer = _provider.get_tracer("voiceagent")
    return _tracer


def flush(timeout_millis: int = 5000) -> None:
    """Send the spans still queued (at shutdown, and in tests)."""
    if _provider is not None:
        _provider.force_flush(timeout_millis)


class CallTrace:
    """The spans of one voice session; every method is a no-op when tracing is off."""

    def __init__(self, span: Any) -> None:
        self._span = span

    @classmethod
    def start(cls, *, channel: str) -> CallTrace:
        active = tracer()
        if active is None:
            return cls(None)
        return cls(active.start_span("voice.call", attributes={"voiceagent.channel": channel}))

    def turn(self, stages_ms: Mapping[str, float | None], *, started_ago: float, engine: str) -> None:
        """One answered caller turn, which began `started_ago` seconds before now."""
        if self._span is None:
            return
        from opentelemetry import trace

        now = time.time_ns()
        attributes: dict[str, Any] = {"voiceagent.engine": engine}
        attributes.update(
            {f"voiceagent.latency.{stage}_ms": round(ms, 1) for stage, ms in stages_ms.items() if ms is not None}
        )
        span = tracer().start_span(
            "voice.turn",
            context=trace.set_span_in_context(self._span),
            start_time=now - int(max(0.0, started_ago) * 1e9),
            attributes=attributes,
        )
        span.end(end_time=now)

    def end(self, *, call_id: str | None, status: str, engine: str | None = None) -> None:
        if self._span is None:
            return
        span, self._span = self._span, None
        if call_id:
            span.set_attribute("voiceagent.call_id", call_id)
        if engine:
            span.set_attribute("voiceagent.engine", engine)
        span.set_attribute("voiceagent.status", status)
        span.end()
