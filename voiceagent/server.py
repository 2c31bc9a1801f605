"""The service's ASGI server: Daphne, with a WebSocket closing handshake that waits for slow clients.

`python -m voiceagent.server` takes Daphne's own command line (`-b`, `-p`, ...,
`voiceagent.asgi:application`); `make run`, the Docker image and the tests' servers start it.

Why not `daphne` itself: Daphne leaves autobahn's closing-handshake timeout at its default of 1 s.
When the service closes a socket (1000 after the client's `stop`, 4408 on an idle session, ...) and
the client's close reply takes longer than that (a phone on a poor mobile network, a browser tab whose
page is busy, a client process handling many sockets), autobahn aborts the TCP connection with a
reset, and the client, whose socket is reset before it has read the close frame, reports 1006 (an
abnormal closure) instead of the code the service sent. Here the server waits
WEBSOCKET_CLOSE_TIMEOUT_SECONDS (5 unless set; 1 to 60) for the reply before it drops the connection.

Two more differences (docs/operations/security.md):
- The access log writes each request's path without its query string: a signed recording link
  (`?expires=...&signature=...`), a socket's `?token=...` or any other credential a client puts in a
  query would be in the log whole, and usable by whoever reads it.
- `--proxy-headers` is refused: Daphne would take the client's address from the first (left-most)
  `X-Forwarded-For` entry, which the client writes itself. The service resolves the address from the
  proxies it trusts instead (TRUSTED_PROXIES, kit/client_address.py).
"""

from __future__ import annotations

import asyncio
import os
import sys
from functools import partial
from typing import Any

from daphne.cli import CommandLineInterface  # type: ignore[import-untyped]  # Daphne ships no types
from daphne.server import Server  # type: ignore[import-untyped]  # Daphne ships no types
from twisted.internet import defer

from kit import memory, shutdown
from voiceagent.bodies import BoundedBodyRequest, FileBody

CLOSE_TIMEOUT_ENV = "WEBSOCKET_CLOSE_TIMEOUT_SECONDS"
CLOSE_TIMEOUT_DEFAULT = 5.0
CLOSE_TIMEOUT_RANGE = (1.0, 60.0)


def close_timeout_seconds(environ: dict[str, str] | os._Environ[str] = os.environ) -> float:
    """WEBSOCKET_CLOSE_TIMEOUT_SECONDS as a number of seconds; SystemExit with the reason when invalid."""
    raw = environ.get(CLOSE_TIMEOUT_ENV, "").strip()
    if not raw:
        return CLOSE_TIMEOUT_DEFAULT
    low, high = CLOSE_TIMEOUT_RANGE
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not low <= seconds <= high:
        raise SystemExit(f"{CLOSE_TIMEOUT_ENV} must be a number of seconds from {low:g} to {high:g}, got {raw!r}")
    return seconds


PROXY_HEADERS_REFUSED = (
    "--proxy-headers is not supported: Daphne would believe the first X-Forwarded-For entry, which the client "
    "writes. Set TRUSTED_PROXIES to your proxy's network instead (docs/operations/security.md)."
)


def path_without_query(path: str) -> str:
    """The path of a request target, without its query string (nor a fragment)."""
    return path.split("?", 1)[0].split("#", 1)[0]


class QuerylessAccessLog:
    """Daphne's access log (the action logger it is handed), each path written without its query string."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __call__(self, protocol: str, action: str, details: dict[str, Any]) -> None:
        path = details.get("path")
        if isinstance(path, str):
            details = {**details, "path": path_without_query(path)}
        self.inner(protocol, action, details)


class VoiceServer(Server):
    """Daphne's server; once its WebSocket factory exists, and before it accepts a connection, the
    closing handshake gets its timeout (protocol options are copied to each connection when it opens)."""

    close_timeout = CLOSE_TIMEOUT_DEFAULT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        ready = kwargs.pop("ready_callable", None)
        if kwargs.get("proxy_forwarded_address_header"):
            raise SystemExit(PROXY_HEADERS_REFUSED)
        if kwargs.get("action_logger") is not None:
            kwargs["action_logger"] = QuerylessAccessLog(kwargs["action_logger"])

        def configure_then_ready() -> None:
            self.ws_factory.setProtocolOptions(closeHandshakeTimeout=self.close_timeout)
            build = self.http_factory.buildProtocol

            def build_protocol(addr: Any) -> Any:
                protocol = build(addr)
                if protocol is not None:
                    protocol.requestFactory = BoundedBodyRequest  # large bodies stay on disk (voiceagent/bodies.py)
                return protocol

            self.http_factory.buildProtocol = build_protocol
            if ready is not None:
                ready()

        super().__init__(*args, ready_callable=configure_then_ready, **kwargs)

    def create_application(self, protocol: Any, scope: dict[str, Any]) -> Any:
        """Daphne's, except that a body kept in a file (BoundedBodyRequest) is read from it as the
        application asks (FileBody), not queued whole, and that an upload's slot goes in the scope."""
        ticket = getattr(protocol, "upload_ticket", None)
        if ticket is not None:
            from knowledge.admission import SCOPE_KEY  # here: this module is imported before Django is set up

            scope[SCOPE_KEY] = ticket
        body = getattr(protocol, "body_file", None)
        if body is None:
            return super().create_application(protocol, scope)
        assert "application_instance" not in self.connections[protocol]
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        scope.setdefault("asgi", {"version": "3.0"})
        instance = self.application(
            scope=scope, receive=FileBody(body, queue).receive, send=partial(self.handle_reply, protocol)
        )
        if protocol not in self.connections:
            return None
        self.connections[protocol]["application_instance"] = asyncio.ensure_future(instance)
        return queue

    def kill_all_applications(self) -> Any:
        # Daphne cancels every live connection before the reactor exits (SIGTERM, SIGINT): the calls
        # they carry end with the ended reason server-shutdown (realtime.sockets). WebRTC sessions are
        # no connection of Daphne's: they end through the closers registered with kit.shutdown, waited for too.
        shutdown.begin()
        connections = super().kill_all_applications()
        others = defer.Deferred.fromFuture(asyncio.ensure_future(shutdown.close_registered()))
        return defer.DeferredList([connections, others])


class VoiceServerCommand(CommandLineInterface):
    server_class = VoiceServer


def main(argv: list[str] | None = None) -> None:
    VoiceServer.close_timeout = close_timeout_seconds()
    memory.map_large_blocks()  # an upload's large buffers go back to the system when freed
    VoiceServerCommand().run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
