"""Loopback ports for the scripted servers the tests and bench/ run."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def closed_port_url(path: str = "/") -> str:
    """A loopback URL nothing listens on."""
    return f"http://127.0.0.1:{free_port()}{path}"
