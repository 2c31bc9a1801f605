"""The loopback MCP server (testing/mcp.py) with text-only order tools, for the whole test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testing import servers
from testing.mcp import LoopbackMcp, build_text_order_tools
from testing.webhooks import allow_loopback_fixture  # noqa: F401 (a fixture of these tests)


@pytest.fixture(scope="session")
def mcp_server() -> Iterator[LoopbackMcp]:
    with LoopbackMcp(build_text_order_tools()) as server:
        yield server


@pytest.fixture
def closed_port_url() -> str:
    """A loopback URL nothing listens on."""
    return servers.closed_port_url("/mcp")
