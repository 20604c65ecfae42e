"""The OpenAPI document's areas: one tag per area, in the order a newcomer needs them (the memory API first,
EDDI's legacy properties last), every operation under the tag of its path, and the MCP endpoint, which is
not a REST operation, described in the document's introduction (drf-spectacular postprocessing hook)."""

from typing import Any

# (tag, description, path prefixes), in the order the docs show them.
AREAS: list[tuple[str, str, tuple[str, ...]]] = [
    (
        "memories",
        "A user's memories: upsert, recall (in order or by relevance), search, history, GDPR export and "
        "erasure (EDDI's usermemorystore contract), and staff search across users.",
        ("/usermemorystore/", "/v1/memories"),
    ),
    (
        "conversations",
        "Conversations: messages on the history, memory (per agent, with epochs and sync) and summary (the "
        "shared case log) channels, checkpoints, an agent's context in one call, and search.",
        ("/v1/conversations",),
    ),
    (
        "keys",
        "API keys of an agent: make one (shown once), list, revoke.",
        ("/v1/agents/{agent_id}/keys", "/v1/keys"),
    ),
    (
        "agents",
        "The agent directory (every key reads it), an agent's profile and memory policy (admin keys).",
        ("/v1/agents",),
    ),
    ("groups", "Agent groups, which group memories are shared with.", ("/v1/groups",)),
    ("tasks", "Tasks between agents; a done task's result may become the assignee's memory.", ("/v1/tasks",)),
    ("activity", "The tool-call log: what each agent's tools did.", ("/v1/activity",)),
    (
        "events",
        "Memory events: the change feed (what a key may read, oldest first), signed webhooks (admin keys).",
        ("/v1/events", "/v1/webhooks"),
    ),
    ("tools", "The LLM tools, as OpenAI function-calling schemas, and invoking them.", ("/v1/tools",)),
    (
        "propertiesstore (legacy)",
        "EDDI's legacy flat map over a user's global entries. New clients use the memories above.",
        ("/propertiesstore/",),
    ),
]

MCP = """

## MCP

The same tools, for MCP clients, at **`POST /mcp`** (Streamable HTTP, stateless: each JSON-RPC request is
answered with JSON, no stream), with the key in `Authorization: Bearer <key>` or `X-API-Key`. `tools/list`
names the tools the key's role may call (viewer keys read; agent keys read and write as their agent; admin
keys also erase a user); `tools/call` runs one through the same services as this API, with the same rules.
Arguments are checked against each tool's input schema, unknown ones refused. Over stdio:
`MEMORYPLATFORM_API_KEY=<key> manage.py mcp`; `memoryplatform-client mcp-config` (the Python client) prints
and checks an MCP client's configuration.
"""


def _area(path: str) -> int:
    for index, (_, _, prefixes) in enumerate(AREAS):
        if any(path.startswith(prefix) for prefix in prefixes):
            return index
    return len(AREAS)


def tag_areas(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Tag each operation with its area's tag, order the paths and the tags by area, describe MCP."""
    paths = result.get("paths", {})
    for path, operations in paths.items():
        area = _area(path)
        if area == len(AREAS):
            continue
        for operation in operations.values():
            if isinstance(operation, dict) and "responses" in operation:
                operation["tags"] = [AREAS[area][0]]
    result["paths"] = dict(sorted(paths.items(), key=lambda item: _area(item[0])))
    result["tags"] = [{"name": name, "description": description} for name, description, _ in AREAS]
    info = result.setdefault("info", {})
    info["description"] = info.get("description", "") + MCP
    return result
