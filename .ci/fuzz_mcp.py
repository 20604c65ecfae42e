"""Fuzz the MCP tools' arguments (``/mcp/``) with the strategies schemathesis fuzzes the REST bodies with;
fail on any internal error. Run by .ci/fuzz.py against its server, once per role.

Each tool's ``inputSchema`` (from ``tools/list``, as that role's key sees the tools) becomes the JSON body of
one operation of a small OpenAPI 3.1 document; schemathesis's public Python API (``from_dict`` and
``as_strategy``) then draws arguments from it, valid ones (``positive``) and invalid ones (``negative``), as
``schemathesis run`` draws the REST bodies. Each valid case is also sent once more with one argument
set to an edge value of its kind (:data:`EDGES`), one a schema lets through or a parser trips on: a float
equal to an integer (JSON Schema 2020-12 counts ``1.0`` as an integer), a time of the right shape but not a
time, one before year 1 in UTC. Each case is one ``tools/call`` (the endpoint is stateless and answers
JSON). A failure is an HTTP 5xx, a JSON-RPC internal error, or the tool's "internal error" answer; a refusal
in words (``isError`` with the reason) is the door working.
"""

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

# Values a schema lets through or a parser trips on, by the kind of property they go in.
EDGES: dict[str, list[Any]] = {
    "time": [
        "0001-01-01T00:00:00+00:01",  # 1 BC in UTC
        "9999-12-31T23:59:59-23:59",  # past year 9999 in UTC
        "2026-13-45T00:00:00Z",  # the shape of a time, not one
        "2026-01-01T00:00:00+24:00",
    ],
    "integer": [1.0, 0.0, 1e300, -0.0],  # JSON Schema 2020-12 counts 1.0 as an integer
    "other": [1.0, True, "", [], {}, None, "\u0000"],
}


def _kind(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "other"
    types = schema.get("type")
    if schema.get("format") == "date-time":
        return "time"
    return "integer" if types == "integer" or (isinstance(types, list) and "integer" in types) else "other"


INTERNAL_ERROR = "internal error"  # agenttools.mcp_server.INTERNAL_ERROR says it; no refusal does
JSONRPC_INTERNAL = -32603


@dataclass
class Mcp:
    """One role's MCP endpoint: JSON-RPC requests over HTTP POST with its key."""

    url: str
    key: str
    calls: int = 0

    def rpc(self, method: str, params: dict[str, Any]) -> tuple[int, Any]:
        self.calls += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.calls, "method": method, "params": params}).encode()
        request = urllib.request.Request(self.url, data=body, method="POST")  # noqa: S310 (the test server)
        request.add_header("Authorization", f"Bearer {self.key}")
        request.add_header("Content-Type", "application/json")
        request.add_header("Accept", "application/json, text/event-stream")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()[:500]


def problem_of(status: int, answer: Any) -> str | None:
    """Why one ``tools/call`` answer is a failure, or ``None``."""
    if status >= 500:
        return f"HTTP {status}: {answer!r}"[:500]
    if not isinstance(answer, dict):
        return None  # a 4xx of the transport (a bad request, a refused key): not a server error
    error = answer.get("error")
    if isinstance(error, dict) and error.get("code") == JSONRPC_INTERNAL:
        return f"JSON-RPC internal error: {error}"[:500]
    result = answer.get("result") or {}
    texts = [c.get("text", "") for c in result.get("content") or [] if isinstance(c, dict)]
    if result.get("isError") and any(INTERNAL_ERROR in text for text in texts):
        return f"the tool's internal error: {texts}"[:500]
    return None


def document(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """An OpenAPI 3.1 document with one POST operation per tool, its body the tool's ``inputSchema``."""
    paths = {
        f"/{tool['name']}": {
            "post": {
                "operationId": tool["name"],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": tool["inputSchema"]}},
                },
                "responses": {"200": {"description": "the tool's answer"}},
            }
        }
        for tool in tools
    }
    return {"openapi": "3.1.0", "info": {"title": "MCP tools", "version": "1"}, "paths": paths}


@dataclass
class Findings:
    failures: list[str] = field(default_factory=list)
    cases: int = 0


def _fuzz_tool(
    mcp: Mcp, operation: Any, tool: dict[str, Any], mode: GenerationMode, max_examples: int
) -> str | None:
    """Draw ``max_examples`` argument sets for a tool in one mode; the first failure, shrunk, or ``None``."""
    findings = Findings()
    name = tool["name"]
    properties = tool["inputSchema"].get("properties") or {}

    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
    )
    @given(case=operation.as_strategy(generation_mode=mode), data=st.data())
    def check(case: Any, data: st.DataObject) -> None:
        arguments = case.body
        if not isinstance(arguments, dict):
            return  # MCP's arguments are an object by the protocol; the SDK refuses anything else
        sent = [arguments]
        if mode == GenerationMode.POSITIVE and properties:
            swapped = data.draw(st.sampled_from(sorted(properties)), label="swapped")
            edge = data.draw(st.sampled_from(EDGES[_kind(properties[swapped])]), label="edge")
            sent.append({**arguments, swapped: edge})
        for given_arguments in sent:
            findings.cases += 1
            status, answer = mcp.rpc("tools/call", {"name": name, "arguments": given_arguments})
            problem = problem_of(status, answer)
            if problem:
                shown = json.dumps(given_arguments)[:300]
                raise AssertionError(f"{name} ({mode.value}) with {shown}: {problem}")

    try:
        check()
    except AssertionError as exc:
        return str(exc)
    return None


def fuzz_role(*, url: str, key: str, max_examples: int) -> tuple[int, list[str]]:
    """Fuzz every tool the key lists, in both modes. Returns (the calls made, the failures)."""
    mcp = Mcp(url, key)
    status, listed = mcp.rpc("tools/list", {})
    if status != 200 or not isinstance(listed, dict) or "result" not in listed:
        return mcp.calls, [f"tools/list answered {status}: {listed!r}"[:500]]
    tools = listed["result"]["tools"]
    schema = schemathesis.openapi.from_dict(document(tools))
    failures = []
    for tool in tools:
        operation = schema[f"/{tool['name']}"]["POST"]
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            failure = _fuzz_tool(mcp, operation, tool, mode, max_examples)
            if failure:
                failures.append(failure)
    return mcp.calls, failures
