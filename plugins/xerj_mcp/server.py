"""The MCPServer xerj serves: its tools bound to a backend, the instructions an agent reads, argument checks."""

from __future__ import annotations

import functools
from typing import Any

import orjson
from jsonschema import Draft202012Validator
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from xerj_mcp.backend import BackendUnavailable, answer_text
from xerj_mcp.results import wire_form
from xerj_mcp.tools import READ_ONLY, REVIEW_TOOLS, TOOL_NAMES, Refused, Tools

INSTRUCTIONS = (
    "xerj is a local second brain and agent memory. Memory tools (xerj_memory_*) store and recall what you "
    "learn in a namespace; brain tools (xerj_brain_*) read and write a brain's evidence-carrying edges "
    "between notes (ego walks at most 2 hops); xerj_search, xerj_get_document and xerj_list_indices read "
    "documents. Start with xerj_list_indices or xerj_brain_overview when you do not know what is there. "
    "A refusal comes back as a tool error with the server's reason; read it and fix the call."
)
OPEN_MODE = (" This server runs in OPEN MODE: no credential is checked, so every namespace and every brain is "
             "reachable from this connection; the namespace you pass is the only thing that keeps them apart.")
SCOPED = (" Your key reaches only the namespaces and brains it was minted for; any other one is refused, "
          "with the reason.")


class CheckArguments:
    """Context-tier middleware: a tools/call whose arguments do not fit the tool's input schema is a tool error.

    The SDK's argument models drop unknown keys and word type errors for
    Python readers; an agent that misspells an argument must hear about it,
    and in the schema's own terms (jsonschema, which the SDK already uses).
    """

    def __init__(self) -> None:
        self.validators: dict[str, Any] = {}

    def learn(self, name: str, schema: dict[str, Any]) -> None:
        self.validators[name] = (set(schema.get("properties", {})), Draft202012Validator(schema))

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call" or not isinstance(ctx.params, dict):
            return await call_next(ctx)
        name = ctx.params.get("name")
        known = self.validators.get(name) if isinstance(name, str) else None
        if known is None:
            return await call_next(ctx)
        arguments = ctx.params.get("arguments") or {}
        allowed, validator = known
        if not isinstance(arguments, dict) or set(arguments) - allowed:
            return self.refusal(self.problem(name, arguments, allowed, validator))
        result = await call_next(ctx)
        # The schema is consulted only once the SDK's own validation refused: the happy path pays nothing.
        if _is_argument_error(result, name):
            problem = self.problem(name, arguments, allowed, validator)
            if problem:
                return self.refusal(problem)
        return result

    @staticmethod
    def refusal(text: str | None) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=text or "invalid arguments")], is_error=True)

    @staticmethod
    def problem(name: str, arguments: Any, allowed: set[str], validator: Any) -> str | None:
        if not isinstance(arguments, dict):
            return f"the arguments of tool [{name}] must be an object"
        unknown = sorted(set(arguments) - allowed)
        if unknown:
            takes = ", ".join(sorted(allowed)) or "no arguments"
            return f"unknown argument(s) [{', '.join(unknown)}] for tool [{name}]; it takes: {takes}"
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(map(str, e.absolute_path)))
        if errors:
            said = "; ".join(f"{'.'.join(map(str, e.absolute_path)) or 'arguments'}: {e.message}" for e in errors[:5])
            return f"invalid arguments for tool [{name}]: {said}"
        return None


def _is_argument_error(result: Any, name: str) -> bool:
    """Whether ``result`` (a model, or the dict the runner made of it) is the SDK's argument refusal."""
    if isinstance(result, CallToolResult):
        failed, content = result.is_error, [getattr(c, "text", "") for c in result.content]
    elif isinstance(result, dict):
        failed, content = result.get("isError"), [c.get("text", "") for c in result.get("content") or []]
    else:
        return False
    return bool(failed and content and content[0].startswith(f"Error executing tool {name}: ")
                and "validation error" in content[0])


class PlainJsonResult(CallToolResult):
    """A tool result whose structured content is plain JSON already: the server's answer, or a model's JSON dump.

    The SDK dumps a handler's result for the wire with pydantic, which walks
    every edge of a 2-hop ego answer only to copy JSON into equal JSON (0.1 ms
    of CPU, measured). This dump leaves the structured content out of the walk
    and puts it back as it is; the envelope (content blocks, isError,
    resultType, _meta) is still pydantic's, and the SDK's own checks of the
    result (the output schema, its per-version sieve) still run on it. A dump
    asked for in any other way is pydantic's throughout.
    """

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        if kwargs.get("mode") != "json" or self.structured_content is None or kwargs.keys() - _WIRE_DUMP:
            return super().model_dump(**kwargs)
        out = CallToolResult.model_dump(self.model_copy(update={"structured_content": {}}), **kwargs)
        out["structuredContent" if kwargs.get("by_alias") else "structured_content"] = self.structured_content
        return out


_WIRE_DUMP = {"mode", "by_alias", "exclude_none"}  # what the SDK's runner passes when it shapes a result


def as_tool_result(tool: Any) -> Any:
    """``tool`` answering a ``CallToolResult`` itself.

    A refusal becomes a tool error whose text is the reason alone (the SDK
    would prefix it). A result goes out in its wire form (the server's answer
    itself when it was made from one), and its text twin is compact JSON (the
    SDK indents it, which on a 2-hop ego is a third of the bytes on the
    wire); the SDK still checks the structured part against the schema.
    """

    @functools.wraps(tool)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            result = await tool(*args, **kwargs)
        except Refused as exc:
            return CallToolResult(content=[TextContent(type="text", text=exc.reason)], is_error=True)
        data = wire_form(result)
        # The server's answer text is that JSON already (xerj serve writes compact JSON): no second dump.
        text = answer_text(data)
        return PlainJsonResult(content=[TextContent(type="text", text=text if text is not None
                                                    else orjson.dumps(data).decode())],
                               structured_content=data)

    return call


def tracing_configured() -> bool:
    """Whether this process installed an OpenTelemetry tracer provider (by code or ``opentelemetry-instrument``)."""
    from opentelemetry import trace

    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


async def server_mode(backend: Any) -> str:
    """``open``, ``secured`` or ``unknown`` (unreachable, or a server that does not say) from ``GET /``."""
    try:
        status, body = await backend.request("GET", "/")
    except BackendUnavailable:
        return "unknown"
    if status == 200 and isinstance(body, dict) and body.get("xerj_mode") in ("open", "secured"):
        return body["xerj_mode"]
    return "secured" if status in (401, 403) else "unknown"


async def review_routes_served(backend: Any) -> bool:
    """Whether the server has the review routes (trust and review): a route it lacks is 'no handler found'."""
    try:
        status, body = await backend.request("GET", "/_graph/xerj-mcp-probe/_review")
    except BackendUnavailable:
        return True  # cannot tell; offer the tools and let a call say what is wrong
    error = body.get("error") if isinstance(body, dict) else None
    error_type = error.get("type") if isinstance(error, dict) else None
    return not (status in (404, 405) and error_type in ("resource_not_found_exception", "method_not_allowed_exception"))


async def build_server(backend: Any, *, open_mode: bool | None = None, review: bool | None = None) -> MCPServer:
    """An MCPServer whose tools call ``backend``; ``open_mode``/``review`` are asked of the backend when None."""
    if open_mode is None:
        open_mode = await server_mode(backend) == "open"
    if review is None:
        review = await review_routes_served(backend)
    tools = Tools(backend)
    names = [n for n in TOOL_NAMES if review or n not in REVIEW_TOOLS]
    checks = CheckArguments()
    server = MCPServer("xerj", instructions=INSTRUCTIONS + (OPEN_MODE if open_mode else SCOPED),
                       middleware=[checks], log_level="WARNING")
    if not tracing_configured():
        # The SDK's per-message span middleware is a no-op without a tracer provider, yet it costs each call
        # a span's set-up and tear-down; the SDK documents dropping it from the chain as the way to opt out.
        server.middleware[:] = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]
    for name in names:
        server.add_tool(as_tool_result(getattr(tools, name)), name=name, structured_output=True,
                        annotations=ToolAnnotations(readOnlyHint=name in READ_ONLY,
                                                    destructiveHint=name in ("xerj_memory_forget",
                                                                             "xerj_brain_unlink")))
    for tool in await server.list_tools():
        checks.learn(tool.name, tool.input_schema or {})
    return server
