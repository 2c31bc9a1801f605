"""The tool dispatcher of one conversation: which tools are offered, and running one call.

Offered, in this order (names are unique; the first tool with a name wins):
1. the agent's enabled custom tools: webhook agents deliver them to serverUrl, http agents to each
   tool's toolUrl, static agents have none. A custom tool with a reserved name (search_knowledge,
   transfer_call; the API refuses them) or without a destination (a webhook agent without serverUrl,
   an http tool without toolUrl) is skipped with a warn line in the agent log.
2. its enabled MCP selections of active servers that still advertise the tool, with their cached
   schemas. The brain knows such a tool by its name with every character outside [A-Za-z0-9_-]
   replaced by "_" (cut to 64 characters, what model APIs accept); the server is called with its own
   name. An MCP tool whose name is reserved or already taken (by a custom tool or an earlier
   selection, ordered by server name then tool name), or whose inputSchema is not a valid JSON
   Schema, is skipped with a warn line.
3. a handoff tool per entry of the agent's `handoffs` whose target is still an active agent of the
   organization (realtime/engine/tools/handoff.py), unless the call has had its last allowed handoff;
4. `search_knowledge` when the agent has a ready knowledge document; `transfer_call` when a handoff
   destination exists (realtime.selectors.handoff_destination); `send_digits` on phone calls (the
   recorder's channel); `end_call` unless the agent turns it off (endCallEnabled).

A call: an unknown name or arguments that do not match the tool's schema (checked with jsonschema,
the draft its $schema names, else 2020-12; formats are not checked) give the brain an error result
at once, nothing is contacted. Otherwise the tool runs under its time limit: timeoutMs for custom
tools, DEFAULT_TIMEOUT_SECONDS for MCP and native tools (which also answer failures with
`return_error`). A failure (error status, timeout, connection failure, refused destination, a reply
that is not JSON or does not match the tool's responseSchema, an MCP error result) follows onError:
`return_error` gives the brain {"error": "<what happened, in plain words>"}, `return_empty` gives {}.
Every call writes one ToolInvocation (queued by the recorder) and one "tool call" line in the agent
log (tool, kind, status, durationMs, and a short reason for failures; never arguments, results,
secrets or URLs).

Speed: load() reads the database once and compiles every schema; run() does no database query.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import jsonschema
from channels.db import database_sync_to_async
from jsonschema.exceptions import ValidationError, best_match

from agents.models import Agent, AgentType, ToolOnError
from agents.tools.mcp import Connection, McpSession
from calls.models import CallChannel, ToolInvocationStatus
from kit import metrics
from kit.patterns import linear_validator
from kit.providers import ProviderError, Registry
from realtime.engine.brain.flow import END_TOOL, flow_tools, handoff_tool_name, transfer_tool_name
from realtime.engine.contracts import Handoff, Recorder, ToolCall, ToolOutcome, ToolSpec
from realtime.engine.tools import end_call, handoff, search_knowledge, send_digits, transfer_call
from realtime.engine.tools.base import CallContext, ToolError, ToolKind, ToolTimeout, seconds_words
from realtime.engine.tools.delivery import ServerEndpoint
from realtime.engine.tools.transfer_call import transfer_mode_of
from realtime.selectors import SessionTools, session_tools_get

logger = logging.getLogger(__name__)

KINDS = Registry(
    "tool kind",
    {
        "webhook": "realtime.engine.tools.webhook:WebhookTool",
        "http": "realtime.engine.tools.http_tool:HttpTool",
        "mcp": "realtime.engine.tools.mcp_tool:McpTool",
        "search_knowledge": "realtime.engine.tools.search_knowledge:SearchKnowledgeTool",
        "transfer_call": "realtime.engine.tools.transfer_call:TransferCallTool",
        "end_call": "realtime.engine.tools.end_call:EndCallTool",
        "send_digits": "realtime.engine.tools.send_digits:SendDigitsTool",
        "handoff": "realtime.engine.tools.handoff:HandoffTool",
    },
)

WEBHOOK_KINDS = frozenset({"webhook", "http"})
RESERVED_NAMES = frozenset({"search_knowledge", "transfer_call", "end_call", "send_digits"})
# Time limit of tools without timeoutMs: MCP selections and the native tools.
DEFAULT_TIMEOUT_SECONDS = 10.0
# The kinds bound their own requests by the time limit; this backstop only catches a kind that overruns.
TIMEOUT_GRACE_SECONDS = 0.5
# The logged response of a request whose result was no longer needed (status cancelled).
CANCELLED_RESULT: dict[str, Any] = {"cancelled": True}
_UNSAFE_NAME_CHARACTERS = re.compile(r"[^A-Za-z0-9_-]")
EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True, eq=False)
class _Offered:
    spec: ToolSpec
    adapter: ToolKind
    arguments: Any  # a compiled jsonschema validator
    response: Any | None
    timeout_s: float
    on_error: str
    agent_tool_id: Any = None


def _validator(schema: dict[str, Any], *, check: bool = False) -> Any:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    if check:
        cls.check_schema(schema)
    return linear_validator(cls)(schema)  # the schema's patterns matched in linear time


def _matches(validator: Any, value: Any) -> bool:
    try:
        valid: bool = validator.is_valid(value)
        return valid
    except Exception as exc:  # an unresolvable $ref: the reply cannot be vouched for
        raise ToolError("The tool's response schema cannot be checked.", permanent=True) from exc


def _where(error: ValidationError) -> str:
    return ".".join(str(part) for part in error.absolute_path)


def _arguments_problem(validator: Any, arguments: Any) -> tuple[str, str] | None:
    """None when the arguments match the tool's schema, else (what the brain is told, what the agent
    log says: the place and the rule, never the value)."""
    if not isinstance(arguments, dict):
        return "The arguments must be a JSON object.", "invalid arguments (not an object)"
    try:
        if validator.is_valid(arguments):
            return None
        error = best_match(validator.iter_errors(arguments))
    except Exception:  # a schema that cannot be applied (an unresolvable $ref): the tool cannot be used
        logger.warning("a tool's parameter schema cannot be applied", exc_info=True)
        return "The tool's parameter schema cannot be checked.", "parameter schema cannot be applied"
    where = _where(error)
    if error.validator == "required" and isinstance(error.validator_value, list):
        instance = error.instance if isinstance(error.instance, dict) else {}
        missing = next((name for name in error.validator_value if name not in instance), None)
        if missing is not None:
            name = f"{where}.{missing}" if where else str(missing)
            return f"The argument '{name}' is missing.", f"invalid arguments: '{name}' is missing"
    if where:
        return (
            f"The argument '{where}' is invalid: {error.message}.",
            f"invalid arguments: '{where}' ({error.validator})",
        )
    return f"The arguments are invalid: {error.message}.", f"invalid arguments ({error.validator})"


class ToolDispatcher:
    def __init__(
        self, *, agent: Agent, recorder: Recorder, to_number: str | None = None, handoffs: bool = True
    ) -> None:
        self.agent = agent
        self.handoffs = handoffs  # False: no handoff tool is offered (the call had its last allowed handoff)
        self.recorder = recorder
        self.to_number = to_number
        self._agent_id = str(agent.pk)
        self._offered: dict[str, _Offered] = {}
        self._specs: tuple[ToolSpec, ...] = ()
        self._sessions: list[McpSession] = []
        self._loaded = False

    async def load(self) -> tuple[ToolSpec, ...]:
        """Read the agent's tools (once; at session start, after the call record exists)."""
        if not self._loaded:
            setup = await database_sync_to_async(session_tools_get)(
                agent=self.agent,
                to_number=self.to_number,
                handoffs=self.handoffs,
                flow_handoffs=flow_tools(self.agent.flow)[0] if self.agent.flow else (),
            )
            self._build(setup)
            self._loaded = True
        return self._specs

    def specs(self) -> tuple[ToolSpec, ...]:
        return self._specs

    async def aclose(self) -> None:
        """End of the conversation: close the MCP sessions (idempotent, bounded in time)."""
        if self._sessions:
            await asyncio.gather(*(session.aclose() for session in self._sessions), return_exceptions=True)

    async def run(self, call: ToolCall) -> ToolOutcome:
        started = time.perf_counter()
        arguments = call.arguments
        offered = self._offered.get(call.name)
        if offered is None:
            return self._done(
                call,
                None,
                {"error": f"There is no tool named '{call.name[:64]}' in this call."},
                ToolInvocationStatus.ERROR,
                started,
                reason="unknown tool",
            )
        problem = _arguments_problem(offered.arguments, arguments)
        if problem is not None:
            message, reason = problem
            return self._done(call, offered, {"error": message}, ToolInvocationStatus.ERROR, started, reason=reason)

        failure: ProviderError
        try:
            # Deliveries to the agent's own servers count as the webhook queue while they are out.
            outgoing = metrics.pending("webhooks") if offered.adapter.kind in WEBHOOK_KINDS else nullcontext()
            with outgoing:
                async with asyncio.timeout(offered.timeout_s + TIMEOUT_GRACE_SECONDS):
                    result = await offered.adapter.invoke(arguments, tool_call_id=call.id, context=self._context())
            if offered.response is not None and not _matches(offered.response, result):
                where = _where(best_match(offered.response.iter_errors(result)))
                raise ToolError(
                    "The tool's reply does not match its response schema" + (f" (at '{where}')" if where else "") + ".",
                    permanent=True,
                )
        except asyncio.CancelledError:
            # The brain's response was cancelled (barge-in, the caller went on speaking, hang-up) while the
            # tool ran: its result is no longer needed. Not a failure of the tool (docs/guides/voice-sessions.md).
            self._done(call, offered, CANCELLED_RESULT, ToolInvocationStatus.CANCELLED, started, "cancelled")
            raise
        except TimeoutError:
            failure = ToolTimeout(f"The tool did not answer within {seconds_words(offered.timeout_s)}")
        except ProviderError as exc:
            failure = exc
        except Exception:  # a bug in one kind must not break the conversation
            logger.exception("tool %s (%s) failed", call.name, offered.adapter.kind)
            failure = ToolError("The tool failed because of an internal error.")
        else:
            return self._done(
                call,
                offered,
                result,
                ToolInvocationStatus.SUCCESS,
                started,
                transfer_to=offered.adapter.transfer_to,
                transfer_mode=offered.adapter.transfer_mode,
                handoff_to=offered.adapter.handoff_for(arguments),
                end_call=offered.adapter.ends_call,
                digits=offered.adapter.digits_to_send(result),
            )
        status = ToolInvocationStatus.TIMEOUT if isinstance(failure, ToolTimeout) else ToolInvocationStatus.ERROR
        result = {"error": failure.message} if offered.on_error == ToolOnError.RETURN_ERROR else {}
        reason = getattr(failure, "log_reason", None) or failure.message
        return self._done(call, offered, result, status, started, reason=reason)

    # --- internals -----------------------------------------------------------------------------

    def _context(self) -> CallContext:
        call = self.recorder.call
        return CallContext(call_id=str(call.pk) if call is not None else None, agent_id=self._agent_id)

    def _done(
        self,
        call: ToolCall,
        offered: _Offered | None,
        result: dict[str, Any],
        status: str,
        started: float,
        reason: str | None = None,
        transfer_to: str | None = None,
        transfer_mode: str = "cold",
        handoff_to: Handoff | None = None,
        end_call: bool = False,
        digits: str | None = None,
    ) -> ToolOutcome:
        text = json.dumps(result, ensure_ascii=False, separators=(",", ":"), default=str)
        elapsed_ms = (time.perf_counter() - started) * 1000
        duration_ms = round(elapsed_ms)
        request = call.arguments if isinstance(call.arguments, dict) else {}
        self.recorder.tool_invocation(
            tool_name=call.name[:128],
            request=request,
            response=text,
            status=str(status),
            duration_ms=duration_ms,
            agent_tool_id=offered.agent_tool_id if offered else None,
        )
        kind = offered.adapter.kind if offered else "unknown"
        metrics.record_tool_call(kind=kind, outcome=str(status), seconds=elapsed_ms / 1000)
        fields: dict[str, Any] = {
            "tool": call.name[:64],
            "kind": kind,
            "status": str(status),
            "durationMs": round(elapsed_ms, 2),
        }
        if reason:
            fields["reason"] = reason[:300]
        self.recorder.log("info" if status == ToolInvocationStatus.SUCCESS else "warn", "tool call", **fields)
        return ToolOutcome(
            result=text,
            status=str(status),
            transfer_to=transfer_to,
            transfer_mode=transfer_mode,
            handoff_to=handoff_to,
            end_call=end_call,
            reason=fields.get("reason"),
            digits=digits,
        )

    def _skip(self, name: str, reason: str) -> None:
        self.recorder.log("warn", "tool not offered", tool=name[:64], reason=reason)

    def _offer(self, offered: _Offered) -> None:
        self._offered[offered.spec.name] = offered

    def _build(self, setup: SessionTools) -> None:
        agent = self.agent
        endpoint = ServerEndpoint.of(agent)
        for tool in setup.custom_tools:
            if tool.name in RESERVED_NAMES or tool.name in self._offered:
                self._skip(tool.name, "the name is reserved or already used")
                continue
            timeout_s = tool.timeout_ms / 1000
            if agent.agent_type == AgentType.WEBHOOK:
                if endpoint is None:
                    self._skip(tool.name, "the agent has no serverUrl")
                    continue
                adapter = KINDS.get("webhook")(name=tool.name, endpoint=endpoint, timeout_s=timeout_s)
            elif agent.agent_type == AgentType.HTTP:
                if not tool.tool_url:
                    self._skip(tool.name, "the tool has no toolUrl")
                    continue
                adapter = KINDS.get("http")(
                    url=tool.tool_url, method=tool.tool_method, headers=tool.tool_headers or {}, timeout_s=timeout_s
                )
            else:
                continue
            parameters = tool.parameter_schema or dict(EMPTY_PARAMETERS)
            try:
                arguments = _validator(parameters, check=True)
                response = _validator(tool.response_schema, check=True) if tool.response_schema else None
            except (jsonschema.SchemaError, TypeError, ValueError, RecursionError):
                self._skip(tool.name, "its schema is not a valid JSON Schema")
                continue
            self._offer(
                _Offered(
                    spec=ToolSpec(name=tool.name, description=tool.description, parameters=parameters),
                    adapter=adapter,
                    arguments=arguments,
                    response=response,
                    timeout_s=timeout_s,
                    on_error=tool.on_error,
                    agent_tool_id=tool.pk,
                )
            )

        sessions: dict[Any, McpSession] = {}
        for server, definition in setup.mcp_tools:
            actual = str(definition.get("name") or "")
            name = _UNSAFE_NAME_CHARACTERS.sub("_", actual)[:64]
            if not name or name in RESERVED_NAMES or name in self._offered:
                self._skip(name or "(unnamed)", "the name is reserved or already used")
                continue
            schema = definition.get("inputSchema") or dict(EMPTY_PARAMETERS)
            try:
                arguments = _validator(schema, check=True)
            except (jsonschema.SchemaError, TypeError, ValueError, RecursionError):
                self._skip(name, "its inputSchema is not a valid JSON Schema")
                continue
            session = sessions.get(server.pk)
            if session is None:
                connection = Connection(url=server.url, auth_type=server.auth_type, credentials=server.credentials)
                session = sessions[server.pk] = McpSession(connection)
            adapter = KINDS.get("mcp")(session=session, tool_name=actual, timeout_s=DEFAULT_TIMEOUT_SECONDS)
            self._offer(
                _Offered(
                    spec=ToolSpec(name=name, description=str(definition.get("description") or ""), parameters=schema),
                    adapter=adapter,
                    arguments=arguments,
                    response=None,
                    timeout_s=DEFAULT_TIMEOUT_SECONDS,
                    on_error=ToolOnError.RETURN_ERROR,
                )
            )
        self._sessions = list(sessions.values())

        for entry, target in setup.handoffs:
            name = handoff.handoff_name(target.name, self._offered.keys() | RESERVED_NAMES)
            self._offer_native(
                name,
                handoff.handoff_description(target.name, entry["description"]),
                handoff.PARAMETERS,
                KINDS.get("handoff")(
                    agent_name=target.name,
                    handoff=Handoff(agent_id=str(target.pk), context=entry["context"], last_n=entry.get("lastN")),
                ),
            )
        if agent.flow:
            self._offer_flow_tools(agent.flow, setup.flow_handoffs)
        if setup.has_knowledge:
            self._offer_native(
                "search_knowledge",
                search_knowledge.DESCRIPTION,
                search_knowledge.PARAMETERS,
                KINDS.get("search_knowledge")(agent_id=agent.pk),
            )
        if setup.handoff_phone_number:
            self._offer_native(
                "transfer_call",
                transfer_call.DESCRIPTION,
                transfer_call.PARAMETERS,
                KINDS.get("transfer_call")(destination=setup.handoff_phone_number, mode=transfer_mode_of(agent)),
            )
        if self.recorder.channel == CallChannel.PHONE:
            self._offer_native(
                "send_digits", send_digits.DESCRIPTION, send_digits.PARAMETERS, KINDS.get("send_digits")()
            )
        if agent.end_call_enabled:
            self._offer_native("end_call", end_call.DESCRIPTION, end_call.PARAMETERS, KINDS.get("end_call")())
        self._specs = tuple(offered.spec for offered in self._offered.values())

    def _offer_flow_tools(self, flow: dict[str, Any], targets: list[Agent]) -> None:
        """The tools of the flow's own steps (realtime/engine/brain/flow.py), which only the flow calls."""
        for target in targets:
            self._offer_native(
                handoff_tool_name(str(target.pk)),
                f"The flow hands the call to {target.name}.",
                handoff.PARAMETERS,
                KINDS.get("handoff")(agent_name=target.name, handoff=Handoff(agent_id=str(target.pk))),
            )
        _, transfers, has_end = flow_tools(flow)
        for number, mode in transfers:
            self._offer_native(
                transfer_tool_name(number),
                "The flow transfers the call to a person.",
                transfer_call.PARAMETERS,
                KINDS.get("transfer_call")(destination=number, mode=mode),
            )
        if has_end:
            self._offer_native(END_TOOL, "The flow ends the call.", end_call.PARAMETERS, KINDS.get("end_call")())

    def _offer_native(self, name: str, description: str, parameters: dict[str, Any], adapter: ToolKind) -> None:
        self._offer(
            _Offered(
                spec=ToolSpec(name=name, description=description, parameters=parameters),
                adapter=adapter,
                arguments=_validator(parameters),
                response=None,
                timeout_s=DEFAULT_TIMEOUT_SECONDS,
                on_error=ToolOnError.RETURN_ERROR,
            )
        )
