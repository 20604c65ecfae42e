"""The MCP tool table: each tool's input schema, the roles that may list and call it, and its handler, which
translates the arguments, calls one service or selector and returns JSON-able data (see
:mod:`agenttools.mcp_server` for the server, its transports and the table of tools by role).

An entry or a task is REST's JSON of it, by contract: the REST output serializers (``usermemory.api``,
``activity.api``) are the one definition of those shapes, so this door renders with them rather than keep a
second copy. A door may lean on another door's representation; no domain module imports either."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from activity import selectors as activity_selectors
from activity import services as activity
from activity.api.serializers import TaskOutputSerializer
from activity.models import Task
from agenttools.mcp_args import (
    AGENT_ID,
    DEFAULT_LIST,
    GROUP_IDS,
    KEY,
    LIMIT,
    OBSERVED_AT,
    OFFSET,
    USER_ID,
    given_agent_id,
    given_entry_id,
    given_group_ids,
    given_time,
    object_schema,
)
from apikeys.caller import Caller
from apikeys.models import ApiKey
from extraction.extract import MAX_CONTENT_CHARS, ROLES, GivenMessage, memory_extract, outcome_as_json
from extraction.services import MAX_MESSAGES
from memoryplatform import publicids
from memoryplatform.errors import BadRequest
from memoryplatform.jsonschemas import StrictValidator
from memoryplatform.text import MAX_QUERY_CHARS, check_query
from usermemory import ranking, selectors, services
from usermemory.api.serializers import (
    MemoryEntryOutputSerializer,
    ScoredMemoryEntryOutputSerializer,
    skipped_json,
)
from usermemory.models import MAX_KEY_CHARS, MAX_SOURCE_CHARS, RecallOrder, Visibility
from usermemory.sql.search import Filters

CONFIRMATION = "CONFIRM"
# --- Handlers: translate arguments, call one service or selector, return JSON-able data ------------------


def _entries(entries: Any) -> list[dict[str, Any]]:
    return list(MemoryEntryOutputSerializer(entries, many=True).data)


def _page(qs: Any, args: dict[str, Any]) -> list[dict[str, Any]]:
    offset = args.get("offset", 0)
    return _entries(qs[offset : offset + args.get("limit", DEFAULT_LIST)])


def _list(caller: Caller, args: dict[str, Any]) -> Any:
    qs = selectors.memory_list(caller=caller, user_id=args["userId"], group_ids=given_group_ids(args))
    memories = _page(qs, args)
    return {"userId": args["userId"], "count": len(memories), "memories": memories}


def _visible(caller: Caller, args: dict[str, Any]) -> Any:
    entries = services.memory_recall(
        caller=caller,
        user_id=args["userId"],
        agent_id=args.get("agentId"),
        group_ids=given_group_ids(args),
        order=args.get("order"),
        limit=args.get("limit"),
    )
    return _entries(entries)


@dataclass(frozen=True)
class Noted:
    """A tool's JSON result and a note beside it, sent as a second text block: what the JSON does not say."""

    payload: Any
    note: str


SEARCH_DEFAULT_MODE = "hybrid"
FULLTEXT_NOTE = "Matched by words only (full text): search by meaning is unavailable right now."
UNRERANKED_NOTE = "Ranked without the reranker, unavailable right now: the order may be less precise."
# What each fallback of a ranked search (usermemory.ranking.fallback_of) adds as a note, as the LLM tools say
# it: the embedder down leaves words only; the reranker down leaves the first stage's order, still by meaning.
FALLBACK_NOTES = {"fulltext": FULLTEXT_NOTE, "unreranked": UNRERANKED_NOTE}


def _search(caller: Caller, args: dict[str, Any]) -> Any:
    check_query(args["query"], name="query")  # the selectors check it too; here it is named as MCP names it
    category = args.get("category")
    filters = Filters(
        categories=[category] if isinstance(category, str) else category,
        source=args.get("source"),
        author=args.get("sourceAgentId"),
        updated_after=given_time(args, "updatedAfter"),
        key_prefix=args.get("keyPrefix"),
    )
    search: dict[str, Any] = {
        "caller": caller,
        "user_id": args["userId"],
        "query": args["query"],
        "group_ids": given_group_ids(args),
        "offset": args.get("offset", 0),
        "filters": filters,
    }
    mode = args.get("mode", SEARCH_DEFAULT_MODE)
    # by relevance, the best recallTopK (what an agent's context takes) unless a limit is given
    default_limit = DEFAULT_LIST if mode == "keyword" else selectors.recall_top_k_for(caller=caller)
    search["limit"] = args.get("limit", default_limit)
    if mode == "keyword":
        if "minScore" in args:
            raise BadRequest("keyword search does not score: use mode hybrid.")
        return _entries(selectors.memory_search(**search))
    ranked = selectors.memory_search_ranked(mode=mode, min_score=args.get("minScore"), **search)
    entries = list(ScoredMemoryEntryOutputSerializer(ranked.entries, many=True).data)
    if not ranked.fallback:
        return entries
    return Noted(entries, " ".join(FALLBACK_NOTES[part] for part in ranked.fallback.split(",")))


def _by_key(caller: Caller, args: dict[str, Any]) -> Any:
    entry = selectors.memory_by_key(
        caller=caller, user_id=args["userId"], key=args["key"], group_ids=given_group_ids(args)
    )
    return MemoryEntryOutputSerializer(entry).data


def _count(caller: Caller, args: dict[str, Any]) -> Any:
    count = selectors.memory_count(caller=caller, user_id=args["userId"], group_ids=given_group_ids(args))
    return {"userId": args["userId"], "count": count}


def _upsert(caller: Caller, args: dict[str, Any]) -> Any:
    result = services.memory_upsert(
        caller=caller,
        write=services.MemoryWrite(
            user_id=args["userId"],
            key=args["key"],
            value=args["value"],
            category=args.get("category", "fact"),
            visibility=args.get("visibility", Visibility.SELF),
            source_agent_id=given_agent_id(args),
            group_ids=given_group_ids(args),
            source_conversation_id=args.get("sourceConversationId"),
            confidence=args.get("confidence"),
            source=args.get("source"),
            ttl_seconds=args.get("ttlSeconds"),
            observed_at=given_time(args, "observedAt"),
        ),
        turn_id=args.get("turnId"),
    )
    entry_id = publicids.public_str(publicids.ENTRY, result.entry.pk)
    if result.skipped is not None:  # time order: the stored value was observed later, and stays
        return {"id": entry_id, "key": result.entry.key, "status": "skipped", **skipped_json(result.skipped)}
    return {"id": entry_id, "key": result.entry.key, "status": "upserted"}


def _extract(caller: Caller, args: dict[str, Any]) -> Any:
    given = args.get("messages")
    messages = None if given is None else [GivenMessage(m["role"], m["content"], m.get("id")) for m in given]
    outcome = memory_extract(
        caller=caller,
        user_id=args["userId"],
        messages=messages,
        agent_id=given_agent_id(args),
        visibility=args.get("visibility"),
        group_ids=given_group_ids(args),
        category=args.get("category"),
        conversation_id=args.get("conversationId"),
        after_message_id=args.get("afterMessageId"),
        message_ids=args.get("messageIds"),
        dry_run=args.get("dryRun", False),
        turn_id=args.get("turnId"),
        key_prefix=args.get("keyPrefix"),
    )
    return outcome_as_json(outcome)


def _delete(caller: Caller, args: dict[str, Any]) -> Any:
    entry_id = given_entry_id(args)
    services.memory_delete(caller=caller, entry_id=entry_id)
    return {"entryId": publicids.public_str(publicids.ENTRY, entry_id), "status": "deleted"}


def _delete_all(caller: Caller, args: dict[str, Any]) -> Any:
    if args.get("confirmation") != CONFIRMATION:
        raise BadRequest(
            f'Nothing was deleted: delete_all_user_memories needs confirmation="{CONFIRMATION}" to erase '
            f"every memory of user '{args['userId']}'."
        )
    report = services.memory_erase_user(caller=caller, user_id=args["userId"])
    return {"userId": report["userId"], "entriesDeleted": report["entriesDeleted"], "status": "deleted"}


def _tasks(tasks: Any) -> list[dict[str, Any]]:
    return list(TaskOutputSerializer(tasks, many=True).data)


def _create_task(caller: Caller, args: dict[str, Any]) -> Any:
    task = activity.task_create(
        caller=caller,
        title=args["title"],
        assignee_id=args.get("assigneeId"),
        user_id=args.get("userId") or "",
        context=args.get("context"),
        visibility=args.get("visibility", Visibility.SELF),
        group_ids=given_group_ids(args),
    )
    return TaskOutputSerializer(task).data


def _complete_task(caller: Caller, args: dict[str, Any]) -> Any:
    task_id = publicids.parse(publicids.TASK, args["taskId"])
    if task_id is None:
        raise BadRequest("taskId must be a task's id as this server gave it, in digits 0-9.")
    task = activity.task_update(
        caller=caller, task_id=task_id, status=args.get("status", Task.Status.DONE), result=args["result"]
    )
    return TaskOutputSerializer(task).data


def _list_my_tasks(caller: Caller, args: dict[str, Any]) -> Any:
    status = args.get("status")
    tasks = activity_selectors.task_page(
        caller=caller,
        assignee_id=caller.agent_id,
        status=status,
        open_only=status is None,
        limit=args.get("limit", activity_selectors.MAX_TASK_PAGE),
        offset=args.get("offset", 0),
    )
    return _tasks(tasks)


# --- The tools -------------------------------------------------------------------------------------------

VIEWER, AGENT, ADMIN = ApiKey.Role.VIEWER, ApiKey.Role.AGENT, ApiKey.Role.ADMIN
_EVERY_ROLE = frozenset({VIEWER, AGENT, ADMIN})


@dataclass(frozen=True)
class McpTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    roles: frozenset[str]
    handler: Callable[[Caller, dict[str, Any]], Any]
    read_only: bool = True
    destructive: bool = False

    def as_mcp(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=self.input_schema,
            annotations=types.ToolAnnotations(
                read_only_hint=self.read_only, destructive_hint=self.destructive, idempotent_hint=True
            ),
        )


TOOLS: dict[str, McpTool] = {
    tool.name: tool
    for tool in (
        McpTool(
            "list_user_memories",
            "List all memory entries of a user that this key may read, newest first.",
            object_schema(
                {"userId": USER_ID, "groupIds": GROUP_IDS, "limit": LIMIT, "offset": OFFSET}, ["userId"]
            ),
            _EVERY_ROLE,
            _list,
        ),
        McpTool(
            "get_visible_memories",
            "Recall the entries visible to an agent for a user, in the agent's recall order and limit "
            "(global, the agent's own self entries, and group entries of the given groups).",
            object_schema(
                {
                    "userId": USER_ID,
                    "agentId": {
                        **AGENT_ID,
                        "description": "The agent to recall for: required with viewer and admin keys; "
                        "with an agent key, that agent or left out.",
                    },
                    "groupIds": GROUP_IDS,
                    "order": {"type": "string", "enum": list(RecallOrder.values)},
                    "limit": LIMIT,
                },
                ["userId"],
            ),
            _EVERY_ROLE,
            _visible,
        ),
        McpTool(
            "search_user_memories",
            "Search a user's memories, best match first, by meaning and words (mode hybrid, the default), "
            "by meaning only (semantic), each entry with a score; or keyword: a case-insensitive, literal "
            "substring match on keys and values, newest first. When the embedder is down, hybrid and "
            "semantic match words only and say so in a second text block.",
            object_schema(
                {
                    "userId": USER_ID,
                    "query": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_QUERY_CHARS,
                        "description": f"What to look for (at most {MAX_QUERY_CHARS} characters).",
                    },
                    "mode": {
                        "type": "string",
                        "enum": list(ranking.SEARCH_MODES),
                        "default": SEARCH_DEFAULT_MODE,
                    },
                    "category": {
                        "anyOf": [
                            {"type": "string", "maxLength": 64},
                            {"type": "array", "items": {"type": "string", "maxLength": 64}, "maxItems": 50},
                        ],
                        "description": "Only entries of this category, or of any of these.",
                    },
                    "source": {
                        "type": "string",
                        "maxLength": MAX_SOURCE_CHARS,
                        "description": "Only entries of this source.",
                    },
                    "sourceAgentId": {
                        "type": "string",
                        "maxLength": 64,
                        "description": "Only the entries this agent wrote.",
                    },
                    "updatedAfter": {
                        "type": "string",
                        "format": "date-time",
                        "description": "Only entries updated after this ISO 8601 time.",
                    },
                    "keyPrefix": {"type": "string", "maxLength": MAX_KEY_CHARS},
                    "minScore": {
                        "type": "number",
                        "minimum": 0,
                        "maximum": 1,
                        "description": "hybrid and semantic: only results at least this relevant (the score "
                        "is the probability of relevance). Default: no cut, the best limit.",
                    },
                    "groupIds": GROUP_IDS,
                    "limit": {
                        **LIMIT,
                        "description": "At most this many (default: hybrid and semantic, the agent's "
                        f"recallTopK, the best 5 unless its policy says otherwise; keyword {DEFAULT_LIST}).",
                    },
                    "offset": OFFSET,
                },
                ["userId", "query"],
            ),
            _EVERY_ROLE,
            _search,
        ),
        McpTool(
            "get_memory_by_key",
            "Look up a user's memory by key name.",
            object_schema(
                {"userId": USER_ID, "key": KEY, "groupIds": GROUP_IDS},
                ["userId", "key"],
            ),
            _EVERY_ROLE,
            _by_key,
        ),
        McpTool(
            "count_user_memories",
            "Count the memory entries of a user that this key may read.",
            object_schema({"userId": USER_ID, "groupIds": GROUP_IDS}, ["userId"]),
            _EVERY_ROLE,
            _count,
        ),
        McpTool(
            "upsert_user_memory",
            "Insert or update a memory entry on its upsert key: (userId, key) for global entries, "
            "(userId, key, agentId) for self and group entries.",
            object_schema(
                {
                    "userId": USER_ID,
                    "key": KEY,
                    "value": {"description": "Any JSON value."},
                    "category": {"type": "string", "minLength": 1, "maxLength": 64, "default": "fact"},
                    "visibility": {
                        "type": "string",
                        "enum": list(Visibility.values),
                        "default": Visibility.SELF,
                    },
                    "agentId": {
                        **AGENT_ID,
                        "description": "The owning agent. With an agent key: that agent, or left out.",
                    },
                    "sourceAgentId": {**AGENT_ID, "description": "An older name for agentId."},
                    "groupIds": GROUP_IDS,
                    "sourceConversationId": {"type": ["string", "null"], "maxLength": 255},
                    "confidence": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
                    "source": {
                        "type": ["string", "null"],
                        "maxLength": 200,
                        "description": "user_correction, observed_pattern, task_outcome, or free text.",
                    },
                    "ttlSeconds": {
                        "type": ["integer", "null"],
                        "minimum": 1,
                        "maximum": services.MAX_TTL_SECONDS,
                        "description": "The memory holds this many seconds from the write (validTo).",
                    },
                    "observedAt": OBSERVED_AT,
                    "turnId": {
                        "type": ["string", "null"],
                        "maxLength": 128,
                        "description": "Counts writes per turn.",
                    },
                },
                ["userId", "key", "value"],
            ),
            frozenset({AGENT, ADMIN}),
            _upsert,
            read_only=False,
        ),
        McpTool(
            "extract_memories",
            "Extract facts about the user from up to 50 messages with the server's LLM: the messages given, "
            "or a stored conversation's (conversationId alone, or with afterMessageId or messageIds). Each "
            "fact is added, updated (the old value stays in history) or left as it is, decided by the "
            "server, never deleted; each says where it came from; one older than the stored value is "
            "SKIPPED. A message extracted before is not extracted again. dryRun writes nothing.",
            object_schema(
                {
                    "userId": USER_ID,
                    "messages": {
                        "type": ["array", "null"],
                        "minItems": 1,
                        "maxItems": MAX_MESSAGES,
                        "items": object_schema(
                            {
                                "role": {"type": "string", "enum": list(ROLES)},
                                "content": {"type": "string", "minLength": 1, "maxLength": MAX_CONTENT_CHARS},
                                "id": {"type": ["string", "null"], "maxLength": 64},
                            },
                            ["role", "content"],
                        ),
                    },
                    "agentId": {**AGENT_ID, "description": "Admin keys: the agent to write as."},
                    "visibility": {"type": "string", "enum": list(Visibility.values)},
                    "groupIds": GROUP_IDS,
                    "category": {"type": "string", "minLength": 1, "maxLength": 64},
                    "conversationId": {
                        "type": ["string", "null"],
                        "maxLength": 255,
                        "description": "The stored conversation; without messages, its messages are read.",
                    },
                    "afterMessageId": {
                        "type": ["string", "null"],
                        "maxLength": 64,
                        "description": "With conversationId and no messages: read after this message.",
                    },
                    "messageIds": {
                        "type": ["array", "null"],
                        "items": {"type": "string", "maxLength": 64},
                        "minItems": 1,
                        "maxItems": MAX_MESSAGES,
                        "description": "With conversationId and no messages: read these messages.",
                    },
                    "dryRun": {"type": "boolean", "default": False},
                    "turnId": {"type": ["string", "null"], "maxLength": 128},
                    "keyPrefix": {
                        "type": ["string", "null"],
                        "maxLength": MAX_KEY_CHARS - 1,
                        "description": "The facts' place, a key's start ending with '/': each fact's key "
                        "goes under it, compared only with the entries under it in the new facts' scope.",
                    },
                },
                ["userId"],
            ),
            frozenset({AGENT, ADMIN}),
            _extract,
            read_only=False,
        ),
        McpTool(
            "delete_user_memory",
            "Delete one memory entry by id (an agent key: only entries its agent owns).",
            object_schema(
                {"entryId": {"type": ["string", "integer"], "description": "The entry's id."}},
                ["entryId"],
            ),
            frozenset({AGENT, ADMIN}),
            _delete,
            read_only=False,
            destructive=True,
        ),
        McpTool(
            "delete_all_user_memories",
            f"GDPR erasure: permanently delete every memory and history event of a user. Requires "
            f'confirmation="{CONFIRMATION}".',
            object_schema(
                {
                    "userId": USER_ID,
                    "confirmation": {"type": "string", "description": f'Must be exactly "{CONFIRMATION}".'},
                },
                ["userId", "confirmation"],
            ),
            frozenset({ADMIN}),
            _delete_all,
            read_only=False,
            destructive=True,
        ),
        McpTool(
            "create_task",
            "Create a task as this agent, for another agent (assigneeId) or itself. Done with a userId, its "
            "result is stored as a memory of that user (category task_result, the task's visibility).",
            object_schema(
                {
                    "title": {"type": "string", "minLength": 1, "maxLength": 500},
                    "assigneeId": {**AGENT_ID, "description": "The agent to do it (default: this one)."},
                    "userId": {**USER_ID, "description": "The end user the task is about, if any."},
                    "context": {"type": "object", "description": "Anything the assignee needs."},
                    "visibility": {"type": "string", "enum": list(Visibility.values), "default": "self"},
                    "groupIds": GROUP_IDS,
                },
                ["title"],
            ),
            frozenset({AGENT}),
            _create_task,
            read_only=False,
        ),
        McpTool(
            "complete_task",
            "Finish a task assigned to this agent: done with its result, or failed.",
            object_schema(
                {
                    "taskId": {"type": ["string", "integer"], "description": "The task's id."},
                    "result": {"description": "Any JSON: the outcome."},
                    "status": {"type": "string", "enum": ["done", "failed"], "default": "done"},
                },
                ["taskId", "result"],
            ),
            frozenset({AGENT}),
            _complete_task,
            read_only=False,
        ),
        McpTool(
            "list_my_tasks",
            "The tasks assigned to this agent, newest first: the open ones (pending, in progress) unless a "
            "status is given.",
            object_schema(
                {
                    "status": {"type": "string", "enum": list(Task.Status.values)},
                    "limit": {"type": "integer", "minimum": 1, "maximum": activity_selectors.MAX_TASK_PAGE},
                    "offset": OFFSET,
                },
                [],
            ),
            frozenset({AGENT}),
            _list_my_tasks,
        ),
    )
}

VALIDATORS = {name: StrictValidator(tool.input_schema) for name, tool in TOOLS.items()}


def tools_for(caller: Caller) -> list[McpTool]:
    return [tool for tool in TOOLS.values() if caller.role in tool.roles]
