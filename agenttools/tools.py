"""The LLM tools: EDDI's four, ``rememberFact``, ``recallMemories``, ``searchMemory`` and ``forgetFact``, and
the task tools, ``createTask``, ``completeTask`` and ``listMyTasks`` (the activity app's services).

Each tool translates the LLM's arguments into one service or selector call and renders EDDI's text result.
Only agent keys use them: the agent is the key's, never an argument. Every rule (guardrails, writes per turn,
caps, visibility, ownership) is the services', so it holds here exactly as it does over REST.

A refused write (a guardrail, the writes-per-turn limit, the cap) is not an HTTP error: the tool returns the
refusal as its text, as EDDI does, because the LLM must read why. So do arguments the LLM got wrong. Context
the calling framework supplies (a tool name, the ``groupIds``) raises :class:`ServiceError` instead.
"""

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from activity import selectors as activity_selectors
from activity import services as activity
from activity.models import Task, ToolCall
from apikeys.caller import Caller
from memoryplatform import publicids
from memoryplatform.errors import Forbidden, NotFound, ServiceError
from memoryplatform.text import MAX_QUERY_CHARS, query_problem
from usermemory import ranking, selectors, services
from usermemory.models import (
    MAX_KEY_CHARS,
    MAX_SOURCE_CHARS,
    AgentMemoryPolicy,
    MemoryEntry,
    Visibility,
)
from usermemory.sql.base import AnyEntry

REMEMBER = "rememberFact"
RECALL = "recallMemories"
SEARCH = "searchMemory"
FORGET = "forgetFact"
CREATE_TASK = "createTask"
COMPLETE_TASK = "completeTask"
LIST_MY_TASKS = "listMyTasks"
TOOL_NAMES = (REMEMBER, RECALL, SEARCH, FORGET, CREATE_TASK, COMPLETE_TASK, LIST_MY_TASKS)
MY_TASKS_LIMIT = 50
CATEGORY_MAX = MemoryEntry._meta.get_field("category").max_length
TASK_TITLE_MAX = Task._meta.get_field("title").max_length
AGENT_ID_MAX = 64
SEARCH_DEFAULT_MODE = "hybrid"  # searchMemory's mode when the LLM names none
TaskStatus = Task.Status


@dataclass(frozen=True)
class ToolContext:
    """What the calling framework knows about the turn, beside the LLM's arguments."""

    caller: Caller
    user_id: str
    turn_id: str | None = None
    conversation_id: str | None = None
    group_ids: list[str] | None = None


class InvalidArguments(Exception):
    """The LLM's arguments do not fit the tool's parameters; the message goes back to the LLM."""


# --- Definitions (OpenAI function-calling format) -----------------------------------------------------


def tool_definitions(*, caller: Caller) -> list[dict[str, Any]]:
    """The four tools as ``[{"type": "function", "function": {name, description, parameters}}]``.

    ``rememberFact``'s category enum is the calling agent's ``allowedCategories``, and its key's and value's
    ``maxLength`` the agent's ``maxKeyLength`` and ``maxValueLength``, so the LLM is offered only what its
    guardrails accept. ``searchMemory``'s query states the one query limit, MAX_QUERY_CHARS.
    """
    _require_agent(caller)
    policy = selectors.policy_for_caller(caller=caller, agent_id=caller.agent_id)
    functions = [_remember_function(policy), *_MEMORY_FUNCTIONS, *_TASK_FUNCTIONS]
    return [{"type": "function", "function": function} for function in functions]


def _remember_function(policy: AgentMemoryPolicy) -> dict[str, Any]:
    """``rememberFact``, offering what the agent's guardrails accept."""
    max_key = min(policy.max_key_length, MAX_KEY_CHARS)
    max_value = min(policy.max_value_length, settings.MEMORY_MAX_VALUE_CHARS)
    category: dict[str, Any] = {
        "type": "string",
        "minLength": 1,
        "maxLength": CATEGORY_MAX,
        "description": "The kind of memory.",
    }
    if policy.allowed_categories:
        category["enum"] = list(policy.allowed_categories)
        category["description"] = f"One of: {', '.join(policy.allowed_categories)}."
    return {
        "name": REMEMBER,
        "description": (
            "Store a fact about the user so it is remembered across conversations. Storing the same key "
            "again updates it."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "key": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": max_key,
                    "description": 'Short key name, e.g. "favorite_color" or "dietary_restriction".',
                },
                "value": {
                    "type": "string",
                    "maxLength": max_value,
                    "description": "The value to remember.",
                },
                "category": category,
                "visibility": {
                    "type": "string",
                    "enum": list(Visibility.values),
                    "default": Visibility.SELF,
                    "description": (
                        "Who may see it: self (only this agent, the default), group (the agents of this "
                        "conversation's groups) or global (every agent serving this user)."
                    ),
                },
                "confidence": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                    "description": "How sure you are, from 0 to 1 (optional).",
                },
                "source": {
                    "type": "string",
                    "maxLength": MAX_SOURCE_CHARS,
                    "description": "Where it came from: user_correction, observed_pattern, task_outcome, "
                    "or your own words (optional).",
                },
                "ttlSeconds": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": services.MAX_TTL_SECONDS,
                    "description": "Forget it after this many seconds, e.g. 86400 for a day (optional; "
                    "without it the memory holds until changed).",
                },
            },
            "required": ["key", "value", "category"],
            "additionalProperties": False,
        },
    }


_MEMORY_FUNCTIONS: list[dict[str, Any]] = [
    {
        "name": RECALL,
        "description": "Retrieve all memories visible to this agent for the current user.",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    },
    {
        "name": SEARCH,
        "description": (
            "Search the user's memories, best match first, by meaning and words: a question such as "
            '"what does the user eat?" can find "diet = vegetarian". Says so when only words could be '
            "matched."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_QUERY_CHARS,
                    "description": 'What to look for, e.g. "color" or "what does the user eat?" '
                    f"(at most {MAX_QUERY_CHARS} characters).",
                },
                "mode": {
                    "type": "string",
                    "enum": list(ranking.SEARCH_MODES),
                    "default": SEARCH_DEFAULT_MODE,
                    "description": (
                        "hybrid (meaning and words, the default), semantic (meaning only) or keyword "
                        "(the query as a literal piece of a key or value, newest first)."
                    ),
                },
                "minScore": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                    "description": (
                        "hybrid and semantic: only memories at least this likely to be relevant (0 to 1). "
                        "Leave it out for the platform's default, which drops what is off the subject."
                    ),
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
    {
        "name": FORGET,
        "description": "Delete a specific memory of this agent by key.",
        "parameters": {
            "type": "object",
            "properties": {
                "key": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_KEY_CHARS,
                    "description": 'The key name to forget, e.g. "favorite_color".',
                }
            },
            "required": ["key"],
            "additionalProperties": False,
        },
    },
]


_TASK_STATUS = {"type": "string", "enum": list(TaskStatus.values)}
_TASK_FUNCTIONS: list[dict[str, Any]] = [
    {
        "name": CREATE_TASK,
        "description": (
            "Create a task about the current user for another agent (assigneeId) or for yourself. When it is "
            "done, its result is remembered for the user."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "title": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": TASK_TITLE_MAX,
                    "description": "What is to be done.",
                },
                "assigneeId": {
                    "type": "string",
                    "maxLength": AGENT_ID_MAX,
                    "description": "The agent to do it (default: you).",
                },
                "context": {"type": "object", "description": "Anything the assignee needs to know."},
                "visibility": {
                    "type": "string",
                    "enum": list(Visibility.values),
                    "default": Visibility.SELF,
                    "description": "Who may see the remembered result: self (the assignee), group or global.",
                },
            },
            "required": ["title"],
            "additionalProperties": False,
        },
    },
    {
        "name": COMPLETE_TASK,
        "description": "Finish a task assigned to you, with its result (done) or why it failed (failed).",
        "parameters": {
            "type": "object",
            "properties": {
                "taskId": {"type": "string", "description": "The task's id."},
                "result": {"type": "string", "description": "The outcome, in words."},
                "status": {"type": "string", "enum": ["done", "failed"], "default": "done"},
            },
            "required": ["taskId", "result"],
            "additionalProperties": False,
        },
    },
    {
        "name": LIST_MY_TASKS,
        "description": "List the tasks assigned to you, newest first: the open ones (pending, in progress) "
        "unless a status is given.",
        "parameters": {
            "type": "object",
            "properties": {"status": _TASK_STATUS},
            "additionalProperties": False,
        },
    },
]


# --- Texts --------------------------------------------------------------------------------------------


def format_entry(entry: AnyEntry) -> str:
    """``name = Alice [fact, self]``."""
    return f"{entry.key} = {services.value_as_text(entry.value)} [{entry.category}, {entry.visibility}]"


def format_entries(entries: Iterable[AnyEntry]) -> str:
    """EDDI's bullet list: one ``  • key = value [category, visibility]`` line per entry."""
    return "\n".join(f"  • {format_entry(entry)}" for entry in entries)


# --- Invocation ---------------------------------------------------------------------------------------


def tool_invoke(
    *,
    caller: Caller,
    name: str,
    user_id: str,
    arguments: dict[str, Any] | None = None,
    turn_id: str | None = None,
    conversation_id: str | None = None,
    group_ids: list[str] | None = None,
) -> str:
    """Run one LLM tool for the caller's agent and return its text result.

    Raises :class:`Forbidden` for a key that is not an agent's or a group the agent is not in, and
    :class:`NotFound` for an unknown tool. Everything the tool itself refuses comes back as text.
    """
    _require_agent(caller)
    tool = _TOOLS.get(name)
    if tool is None:
        raise NotFound(f"No tool '{name}'. The tools are: {', '.join(TOOL_NAMES)}.")
    # The group context is the framework's, not the LLM's: checked up front, so a bad one is a 403.
    selectors.resolve_read_scope(caller=caller, agent_id=None, group_ids=group_ids, require_agent=True)
    context = ToolContext(
        caller=caller,
        user_id=user_id,
        turn_id=turn_id,
        conversation_id=conversation_id,
        group_ids=group_ids or None,
    )
    # Every call that ran is logged (the activity app), refusals as failures: also one that raised.
    started = time.monotonic()
    text, error = "", "The tool failed with an internal error."
    try:
        text, error = _run(tool, name, context, dict(arguments or {}))
        return text
    finally:
        activity.tool_call_log(
            caller=caller,
            via=ToolCall.Via.LLM_TOOL,
            call=activity.ToolCallWrite(
                tool=name,
                args={"userId": user_id, "arguments": arguments or {}},
                result=text or None,
                success=not error,
                duration_ms=round((time.monotonic() - started) * 1000),
                error=error,
                conversation_id=conversation_id or "",
            ),
        )


Tool = Callable[[ToolContext, dict[str, Any]], str]


def _run(tool: Tool, name: str, context: ToolContext, arguments: dict[str, Any]) -> tuple[str, str]:
    """The tool's text and, for a refusal, its reason (empty on success)."""
    try:
        return tool(context, arguments), ""
    except InvalidArguments as exc:
        return f"❌ Invalid arguments for {name}: {exc}", str(exc)
    except ServiceError as exc:
        return f"❌ {_FAILURE_VERB[name]}: {exc.message}", exc.message


_FAILURE_VERB = {
    REMEMBER: "Not remembered",
    RECALL: "Could not recall memories",
    SEARCH: "Could not search memories",
    FORGET: "Not forgotten",
    CREATE_TASK: "Task not created",
    COMPLETE_TASK: "Task not completed",
    LIST_MY_TASKS: "Could not list tasks",
}


def _require_agent(caller: Caller) -> None:
    if not caller.is_agent:
        raise Forbidden("The LLM tools need an agent key: the agent is the key's.")


def _string(
    arguments: dict[str, Any], name: str, *, required: bool = True, default: str | None = None
) -> Any:
    value = arguments.get(name, default)
    if value is None:
        if required:
            raise InvalidArguments(f"{name} is required.")
        return None
    if not isinstance(value, str):
        raise InvalidArguments(f"{name} must be a string.")
    if required and not value.strip():
        raise InvalidArguments(f"{name} must not be empty.")
    return value


def _only(arguments: dict[str, Any], allowed: Iterable[str]) -> None:
    unknown = sorted(set(arguments) - set(allowed))
    if unknown:
        raise InvalidArguments(f"unknown parameter(s): {', '.join(unknown)}.")


def _remember(context: ToolContext, arguments: dict[str, Any]) -> str:
    _only(arguments, ("key", "value", "category", "visibility", "confidence", "source", "ttlSeconds"))
    key = _string(arguments, "key")
    if "value" not in arguments or arguments["value"] is None:
        raise InvalidArguments("value is required.")
    value = arguments["value"]
    category = _string(arguments, "category", required=False) or "fact"
    visibility = _string(arguments, "visibility", required=False) or Visibility.SELF
    result = services.memory_upsert(
        caller=context.caller,
        write=services.MemoryWrite(
            user_id=context.user_id,
            key=key,
            value=value,
            category=category,
            visibility=visibility,
            group_ids=context.group_ids,
            source_conversation_id=context.conversation_id,
            confidence=arguments.get("confidence"),
            source=_string(arguments, "source", required=False),
            ttl_seconds=arguments.get("ttlSeconds"),
        ),
        turn_id=context.turn_id,
    )
    if result.skipped is not None:  # time order: what is stored was observed later
        return f"⏭ Not written: {key} keeps its stored value, {result.skipped.reason}."
    return f"✅ Remembered: {format_entry(result.entry)}"


def _recall(context: ToolContext, arguments: dict[str, Any]) -> str:
    _only(arguments, ())
    entries = services.memory_recall(
        caller=context.caller, user_id=context.user_id, group_ids=context.group_ids
    )
    return format_entries(entries) if entries else "No memories stored for this user yet."


FULLTEXT_NOTE = "(Matched by words only: search by meaning is unavailable right now.)"
UNRERANKED_NOTE = "(Ranked without the reranker, unavailable right now: the order may be less precise.)"
# What each fallback of a ranked search (usermemory.ranking.fallback_of) tells the LLM: the embedder down
# ("fulltext") leaves words only; the reranker down ("unreranked") leaves the first stage's order, by meaning
# (and words, in hybrid mode), which is still a search by meaning.
FALLBACK_NOTES = {"fulltext": FULLTEXT_NOTE, "unreranked": UNRERANKED_NOTE}


def _search(context: ToolContext, arguments: dict[str, Any]) -> str:
    _only(arguments, ("query", "mode", "minScore"))
    query = _string(arguments, "query")
    problem = query_problem(query, name="query")
    if problem:  # refused before anything embeds or parses it, as every door does
        raise InvalidArguments(problem)
    mode = _string(arguments, "mode", required=False) or SEARCH_DEFAULT_MODE
    if mode not in ranking.SEARCH_MODES:
        raise InvalidArguments(f"mode must be one of {', '.join(ranking.SEARCH_MODES)}.")
    # As long a list as a recall by relevance gives: the best recallTopK (keyword: maxRecallEntries, newest
    # first), no score cut unless the model asks one (minScore).
    policy = selectors.policy_for_caller(caller=context.caller, agent_id=context.caller.agent_id)
    top_k = selectors.recall_top_k_for(caller=context.caller)
    limit = policy.max_recall_entries if mode == "keyword" else top_k
    scope: dict[str, Any] = {
        "caller": context.caller,
        "user_id": context.user_id,
        "query": query,
        "group_ids": context.group_ids,
        "limit": limit,
    }
    fallback = None
    min_score = arguments.get("minScore")
    if min_score is not None and (
        isinstance(min_score, bool) or not isinstance(min_score, int | float) or not 0 <= min_score <= 1
    ):
        raise InvalidArguments("minScore must be a number from 0 to 1.")
    if mode == "keyword":
        if min_score is not None:
            raise InvalidArguments("keyword search does not score: use mode hybrid.")
        entries = selectors.memory_search(**scope)
    else:
        ranked = selectors.memory_search_ranked(mode=mode, min_score=min_score, **scope)
        entries, fallback = [scored.entry for scored in ranked.entries], ranked.fallback
    text = format_entries(entries) if entries else f"No memories found matching '{query}'."
    notes = [FALLBACK_NOTES[part] for part in fallback.split(",")] if fallback else []
    return "\n".join([*notes, text])


def _forget(context: ToolContext, arguments: dict[str, Any]) -> str:
    _only(arguments, ("key",))
    key = _string(arguments, "key")
    deleted = services.memory_forget_key(caller=context.caller, user_id=context.user_id, key=key)
    return f"✅ Forgotten: {key}" if deleted else f"No memory with key '{key}' to forget."


def format_task(task: Task) -> str:
    """``#4503599627370508 [pending] Call the user back (from agent-a, for agent-b)``: the public id."""
    task_id = publicids.to_public(publicids.TASK, task.pk)
    return f"#{task_id} [{task.status}] {task.title} (from {task.creator_id}, for {task.assignee_id})"


def _create_task(context: ToolContext, arguments: dict[str, Any]) -> str:
    _only(arguments, ("title", "assigneeId", "context", "visibility"))
    task_context = arguments.get("context")
    if task_context is not None and not isinstance(task_context, dict):
        raise InvalidArguments("context must be an object.")
    task = activity.task_create(
        caller=context.caller,
        title=_string(arguments, "title"),
        assignee_id=_string(arguments, "assigneeId", required=False),
        user_id=context.user_id,
        context=task_context,
        visibility=_string(arguments, "visibility", required=False) or Visibility.SELF,
        group_ids=context.group_ids,
    )
    return f"✅ Task created: {format_task(task)}"


def _complete_task(context: ToolContext, arguments: dict[str, Any]) -> str:
    _only(arguments, ("taskId", "result", "status"))
    task_id = publicids.parse(publicids.TASK, arguments.get("taskId"))
    if task_id is None:
        raise InvalidArguments("taskId must be a task's id, digits 0-9.")
    if "result" not in arguments or arguments["result"] is None:
        raise InvalidArguments("result is required.")
    status = _string(arguments, "status", required=False) or TaskStatus.DONE
    if status not in (TaskStatus.DONE, TaskStatus.FAILED):
        raise InvalidArguments("status must be done or failed.")
    task = activity.task_update(
        caller=context.caller, task_id=task_id, status=status, result=arguments["result"]
    )
    key = activity.task_memory_key(task)
    remembered = f" Its result is remembered as '{key}'." if task.memory_entry_id else ""
    return f"✅ Task {status}: {format_task(task)}.{remembered}"


def _list_my_tasks(context: ToolContext, arguments: dict[str, Any]) -> str:
    _only(arguments, ("status",))
    status = _string(arguments, "status", required=False)
    if status is not None and status not in TaskStatus.values:
        raise InvalidArguments(f"status must be one of {', '.join(TaskStatus.values)}.")
    listed = activity_selectors.task_page(
        caller=context.caller,
        assignee_id=context.caller.agent_id,
        status=status,
        open_only=status is None,
        limit=MY_TASKS_LIMIT,
    )
    return "\n".join(f"  • {format_task(task)}" for task in listed) if listed else "No tasks assigned to you."


_TOOLS: dict[str, Tool] = {
    REMEMBER: _remember,
    RECALL: _recall,
    SEARCH: _search,
    FORGET: _forget,
    CREATE_TASK: _create_task,
    COMPLETE_TASK: _complete_task,
    LIST_MY_TASKS: _list_my_tasks,
}
