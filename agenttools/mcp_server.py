"""EDDI's 8 MCP tools over the user memory services, and 3 task tools over the activity app's, with the
official ``mcp`` SDK's low-level ``Server``.

The key's role decides which tools are listed and callable:

============================ ========== ========== ==========
tool                         viewer     agent      admin
============================ ========== ========== ==========
``list_user_memories``       yes        yes        yes
``get_visible_memories``     yes        yes        yes
``search_user_memories``     yes        yes        yes
``get_memory_by_key``        yes        yes        yes
``count_user_memories``      yes        yes        yes
``upsert_user_memory``       no         yes        yes
``delete_user_memory``       no         yes        yes
``delete_all_user_memories`` no         no         yes
``create_task``              no         yes        no
``complete_task``            no         yes        no
``list_my_tasks``            no         yes        no
============================ ========== ========== ==========

The task tools act as the key's agent (a task's creator and assignee are agents): agent keys only.
Every tool call made with an agent key is logged in that agent's tool-call log (``activity``).

An agent key reads only what its agent may see and writes as its agent, under its guardrails, deleting only
entries it owns: the services hold those rules, as for every other door. GDPR erasure is admin only.

Arguments and results are EDDI's (``McpMemoryTools``): ``upsert_user_memory(userId, key, value, agentId,
category, visibility)`` returns ``{id, key, status: "upserted"}``, ``list_user_memories`` ``{userId, count,
memories}``, ``delete_user_memory`` ``{entryId, status: "deleted"}``, ``delete_all_user_memories``
``{userId, entriesDeleted, status: "deleted"}``; ``groupIds`` is a comma-separated string (a list works too).
This server's older argument ``sourceAgentId`` is still taken for ``agentId``. Entries are REST's JSON.
A result is one text block of JSON; a result with a note (:class:`agenttools.mcp_tools.Noted`: a search that
full text answered alone) has the note in a second text block.
Errors are ``{"error": "<message>"}`` with ``isError``: a domain error's message, or a generic one for
anything unexpected (logged), never an exception's text.

Transports:
- stdio: ``manage.py mcp`` authenticates ``MEMORYPLATFORM_API_KEY`` at start and calls :func:`serve_stdio`,
  which checks the key again at every tool call (a revoked key stops working mid-session, and the agent's
  policy is the current one).
- streamable HTTP: :class:`McpHttpApp` (mounted at ``/mcp/`` by ``config/asgi.py``) takes POST only, each
  body within the REST API's limit, and
  authenticates the ``Authorization: Bearer`` / ``X-API-Key`` header of every request.
Either way the caller lives in :data:`current_caller` while the SDK runs the tool handlers.
"""

import asyncio
import contextvars
import json
import logging
import time
import weakref
from typing import Any

import mcp_types as types
from asgiref.sync import sync_to_async
from django.db import close_old_connections
from jsonschema import ValidationError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from prometheus_client import Histogram
from rest_framework.utils.encoders import JSONEncoder

from activity import services as activity
from activity.models import ToolCall
from agenttools.mcp_tools import TOOLS, VALIDATORS, McpTool, Noted, tools_for
from apikeys.authentication import presented_key
from apikeys.caller import Caller
from apikeys.services import KeyRefused, apikey_authenticate
from memoryplatform import asgi_http, providercalls
from memoryplatform.errors import ServiceError
from memoryplatform.logsafe import safe_traceback
from memoryplatform.text import json_problem, json_refusal

logger = logging.getLogger(__name__)
request_log = logging.getLogger("memoryplatform.requests")  # the request log REST requests are written to

tool_call_seconds = Histogram(
    "mcp_tool_call_seconds",
    "MCP tool calls by tool and outcome (ok, refused), and how long each took.",
    ["tool", "outcome"],
)

SERVER_NAME = "memoryplatform"

current_caller: contextvars.ContextVar[Caller | None] = contextvars.ContextVar(
    "memoryplatform_mcp_caller", default=None
)
"""The authenticated caller of the current MCP session (stdio) or request (HTTP)."""
stdio_key: contextvars.ContextVar[str | None] = contextvars.ContextVar("memoryplatform_mcp_key", default=None)
"""stdio only: the raw key, authenticated again at each tool call."""


# --- Calling a tool (sync: Django's ORM) -----------------------------------------------------------------


def _error(message: str) -> tuple[dict[str, Any], bool]:
    return {"error": message}, True


INTERNAL_ERROR = "The tool failed with an internal error (logged on the server)."
_NAMES_PROPERTIES = frozenset({"required", "additionalProperties"})


def _invalid(problem: ValidationError) -> str:
    """A schema violation in words, without echoing the value (it may be megabytes, or any object's repr)."""
    where = ".".join(str(p) for p in problem.path)
    if problem.validator in _NAMES_PROPERTIES:  # these messages quote property names only
        what = problem.message
    else:
        what = f"must satisfy {problem.validator} {json.dumps(problem.validator_value)}"
    return f"Invalid arguments: {where + ': ' if where else ''}{what}"


def tool_call(*, caller: Caller, name: str, arguments: dict[str, Any] | None) -> tuple[Any, bool]:
    """Run one MCP tool as the caller. Returns ``(payload, is_error)``; errors are ``{"error": message}``:
    a domain error's own message, or for anything unexpected a generic one (the exception is logged)."""
    tool = TOOLS.get(name)
    if tool is None:
        return _error(f"Unknown tool '{name}'.")
    if caller.role not in tool.roles:
        return _error(f"The tool '{name}' is not available to {caller.role} keys.")
    arguments = dict(arguments or {})
    started = time.monotonic()
    with providercalls.calling_as(caller.provider_share):  # its provider calls count against its share
        payload, is_error = _run(caller=caller, tool=tool, arguments=arguments)
    # Every call that ran is logged with an agent key (the activity app), refusals as failures; arguments the
    # database cannot store (a NUL) are logged escaped.
    activity.tool_call_log(
        caller=caller,
        via=ToolCall.Via.MCP,
        call=activity.ToolCallWrite(
            tool=name,
            args=arguments,
            result=payload.payload if isinstance(payload, Noted) else payload,
            success=not is_error,
            duration_ms=round((time.monotonic() - started) * 1000),
            error=payload["error"] if is_error else "",
        ),
    )
    return payload, is_error


def _run(*, caller: Caller, tool: McpTool, arguments: dict[str, Any]) -> tuple[Any, bool]:
    # What no database stores (a NUL, a lone surrogate, anywhere in the arguments): refused in the words REST
    # and the LLM tools answer with, before the tool runs.
    unstorable = json_problem(arguments)
    if unstorable:
        return _error(json_refusal(unstorable))
    problems = VALIDATORS[tool.name].iter_errors(arguments)
    problem = next(iter(sorted(problems, key=lambda e: list(e.path))), None)
    if problem is not None:
        return _error(_invalid(problem))
    try:
        return tool.handler(caller, arguments), False
    except ServiceError as exc:
        return _error(exc.message)
    except Exception as exc:
        logger.error("MCP tool %s by %s failed\n%s", tool.name, caller.log_label(), safe_traceback(exc))
        return _error(INTERNAL_ERROR)


def _tool_call_in_thread(
    *, caller: Caller, raw_key: str | None, name: str, arguments: dict[str, Any] | None
) -> tuple[list[str], bool]:
    """One tool call on a worker thread, with the connection hygiene a request would get.
    With ``raw_key`` (stdio), the key is authenticated again first, as each HTTP request is.
    Returns the result's text blocks: its JSON, then its note if it has one (:class:`Noted`)."""
    close_old_connections()
    try:
        try:
            if raw_key is not None:
                caller = Caller.for_key(apikey_authenticate(raw_key=raw_key))
        except KeyRefused as exc:
            payload, is_error = _error(str(exc))
        else:
            payload, is_error = tool_call(caller=caller, name=name, arguments=arguments)
        notes: list[str] = []
        if isinstance(payload, Noted):
            payload, notes = payload.payload, [payload.note]
        texts = [json.dumps(payload, cls=JSONEncoder, ensure_ascii=False), *notes]
    except Exception as exc:
        logger.error("MCP tool %s failed\n%s", name if name in TOOLS else "unknown", safe_traceback(exc))
        payload, is_error = _error(INTERNAL_ERROR)
        texts = [json.dumps(payload)]
    finally:
        close_old_connections()
    return texts, is_error


# --- The SDK server ---------------------------------------------------------------------------------------


def _caller() -> Caller:
    caller = current_caller.get()
    if caller is None:  # a transport that forgot to authenticate: refuse rather than guess
        raise RuntimeError("No authenticated caller for this MCP request.")
    return caller


async def _on_list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[tool.as_mcp() for tool in tools_for(_caller())])


async def _on_call_tool(
    ctx: ServerRequestContext, params: types.CallToolRequestParams
) -> types.CallToolResult:
    caller = _caller()
    started = time.perf_counter()
    # On the loop's pool of worker threads: each call opens and closes its database work on one of them, and
    # a slow call does not queue the others behind it (thread_sensitive would put every call on one thread).
    texts, is_error = await sync_to_async(_tool_call_in_thread, thread_sensitive=False)(
        caller=caller, raw_key=stdio_key.get(), name=params.name, arguments=params.arguments
    )
    seconds = time.perf_counter() - started
    outcome = "refused" if is_error else "ok"
    tool = params.name if params.name in TOOLS else "unknown"  # a bounded label: any name may be sent
    tool_call_seconds.labels(tool=tool, outcome=outcome).observe(seconds)
    request_log.info("MCP %s %s %.1fms caller=%s", tool, outcome, seconds * 1000, caller.log_label())
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=text) for text in texts]
    return types.CallToolResult(content=content, is_error=is_error)


def _input_schema(name: str) -> dict[str, Any] | None:
    tool = TOOLS.get(name)
    return tool.input_schema if tool else None


def build_server() -> Server:
    return Server(
        SERVER_NAME,
        version="0.1.0",
        instructions=(
            "User memory for AI agents (EDDI's contract). The tools listed depend on the API key's role: "
            "viewer keys read, agent keys read and write as their agent, admin keys also erase a user."
        ),
        on_list_tools=_on_list_tools,
        on_call_tool=_on_call_tool,
        get_tool_input_schema=_input_schema,
    )


server = build_server()


async def serve_stdio(caller: Caller, raw_key: str) -> None:
    """Serve the tools over stdin/stdout as one key, until the client closes the stream. ``caller`` is the
    key as authenticated at start (it decides the listed tools); each tool call authenticates it again."""
    current_caller.set(caller)
    stdio_key.set(raw_key)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


# --- Streamable HTTP (ASGI) ---------------------------------------------------------------------------------

_MCP_PATHS = frozenset({"/mcp", "/mcp/"})
_ALLOW_POST = [(b"allow", b"POST")]


def _authenticate(raw_key: str) -> Caller:
    close_old_connections()
    try:
        return Caller.for_key(apikey_authenticate(raw_key=raw_key))
    finally:
        close_old_connections()


class McpHttpApp:
    """ASGI app for ``/mcp/``: take only POST, read its body within the REST API's limit, authenticate its
    key, then let the SDK's session manager answer.

    The manager is stateless with JSON responses: each POST gets one JSON answer and no request depends on
    another, so any worker can serve any request. There is no stream to hold open: GET (the server-to-client
    SSE stream) and DELETE (ending a session) are 405, which the MCP spec allows, before the SDK sees them.

    The manager's ``run()`` (the task group the SDK serves requests in) starts on the first request of each
    event loop, in a background task that lives as long as the loop; the ASGI server's lifespan shutdown
    calls :meth:`aclose`.
    """

    def __init__(self, mcp_server: Server | None = None) -> None:
        self.server = mcp_server or server
        self._managers: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[StreamableHTTPSessionManager, asyncio.Event, asyncio.Event]
        ] = weakref.WeakKeyDictionary()
        self._runners: set[asyncio.Task] = set()

    async def manager(self) -> StreamableHTTPSessionManager:
        """The running session manager of this event loop, started on first use."""
        loop = asyncio.get_running_loop()
        if loop not in self._managers:  # no await between the test and the insert: one start per loop
            manager = StreamableHTTPSessionManager(app=self.server, stateless=True, json_response=True)
            started, stop = asyncio.Event(), asyncio.Event()
            self._managers[loop] = (manager, started, stop)

            async def run() -> None:
                async with manager.run():
                    started.set()
                    await stop.wait()

            # A fresh context: the runner must not carry the first request's caller.
            runner = loop.create_task(run(), context=contextvars.Context())
            self._runners.add(runner)
            runner.add_done_callback(self._runners.discard)
        manager, started, _ = self._managers[loop]
        await started.wait()
        return manager

    async def aclose(self) -> None:
        """Stop this event loop's session manager, if it started (ASGI lifespan shutdown)."""
        entry = self._managers.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            entry[2].set()
            await asyncio.gather(*self._runners, return_exceptions=True)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":  # when served alone by an ASGI server
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await self.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        if scope["path"] not in _MCP_PATHS:
            await asgi_http.send_error(send, 404, f"No such path: {scope['path']}", "not_found")
            return
        if scope["method"] != "POST":
            await asgi_http.send_error(
                send,
                405,
                f"Method {scope['method']} is not allowed: this MCP server answers each POST with JSON and "
                f"opens no stream.",
                "method_not_allowed",
                _ALLOW_POST,
            )
            return
        body = await asgi_http.read_body_or_refuse(scope, receive, send)
        if body is None or await asgi_http.refuse_duplicate_keys(body, send):
            return
        await self._answer(scope, asgi_http.replay(body, receive), send)

    async def _answer(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        raw_key = presented_key(_HeaderLookup(headers))
        refusal = "An API key is required (Authorization: Bearer <key> or X-API-Key)."
        caller = None
        if raw_key is not None:
            try:
                caller = await sync_to_async(_authenticate, thread_sensitive=False)(raw_key)
            except KeyRefused as exc:
                refusal = str(exc)
        if caller is None:
            await asgi_http.send_error(
                send, 401, refusal, "unauthorized", [(b"www-authenticate", b'Bearer realm="memoryplatform"')]
            )
            return
        token = current_caller.set(caller)
        try:
            manager = await self.manager()
            await manager.handle_request(scope, receive, send)
        finally:
            current_caller.reset(token)


class _HeaderLookup:
    """Case-insensitive ``get`` over ASGI headers, the shape :func:`presented_key` reads."""

    def __init__(self, headers: dict[str, str]) -> None:
        self._headers = headers

    def get(self, name: str, default: str = "") -> str:
        return self._headers.get(name.lower(), default)
