"""Ops: connect an organization's MCP tool server (initialize + tools/list) and print the result."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from accounts.commands import organization_from_option
from agents.models import McpAuthType, McpServerStatus
from agents.tools.serializers import parse_header_lines
from agents.tools.services import mcp_server_connect
from kit.commands import JsonCommand


class Command(JsonCommand):
    _failed = False
    help = (
        "Connect (or reconnect) the organization's MCP server of that name over Streamable HTTP, cache its "
        'tools and print {"id", "status", "tools", "error"?}. Exits 1 when the server could not be reached '
        "(it is then saved with status error)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", required=True, help="Organization ID")
        parser.add_argument("--name", required=True, help="Integration name (unique in the organization)")
        parser.add_argument("--url", required=True, help="Streamable HTTP endpoint of the MCP server")
        parser.add_argument(
            "--header",
            action="append",
            default=[],
            metavar='"Name: value"',
            help="Secret header sent to the server (repeatable); stored encrypted",
        )
        parser.add_argument(
            "--status", choices=[McpServerStatus.ACTIVE, McpServerStatus.INACTIVE], default=McpServerStatus.ACTIVE
        )

    def handle(self, *args: Any, **options: Any) -> None:
        super().handle(*args, **options)
        if self._failed:
            raise CommandError("The MCP server could not be reached; saved with status error.")

    def run(self, **options: Any) -> dict[str, Any]:
        organization = organization_from_option(options["org"])
        headers = parse_header_lines(options["header"])
        server = mcp_server_connect(
            organization=organization,
            name=options["name"],
            url=options["url"],
            auth_type=McpAuthType.HEADERS if headers else McpAuthType.NONE,
            credentials={"headers": headers} if headers else None,
            status=options["status"],
        )
        self._failed = server.status == McpServerStatus.ERROR
        result: dict[str, Any] = {
            "id": str(server.id),
            "status": server.status,
            "tools": [tool["name"] for tool in server.tools],
        }
        if self._failed:
            result["error"] = server.last_error
        return result
