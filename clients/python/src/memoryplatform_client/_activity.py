"""The activity calls (tool calls an agent reports, tasks, and the change feed of memory events), built as
:mod:`memoryplatform_client._calls` builds the others: each function returns the :class:`Call` that the sync
and the async client send."""

from __future__ import annotations

from typing import Any

from memoryplatform_client._core import Call, body, iso_time, query, segment
from memoryplatform_client._options import (
    EventListOptions,
    TaskCreateOptions,
    TaskListOptions,
    TaskUpdate,
    ToolCallListOptions,
)
from memoryplatform_client.types import (
    ChangeEventPage,
    OffsetPage,
    Task,
    ToolCall,
    ToolCallInput,
    ToolCallPage,
)


def record_tool_calls(tool_calls: list[ToolCallInput]) -> Call[list[ToolCall]]:
    return Call(
        "POST",
        "/v1/activity/tool-calls",
        json={"calls": tool_calls},
        decode=lambda response: list(response.json()["calls"]),
    )


def list_tool_calls(options: ToolCallListOptions) -> Call[ToolCallPage]:
    params = query(
        after=options.get("after"),
        agentId=options.get("agent_id"),
        limit=options.get("limit"),
        since=iso_time(options.get("since")),
        success=options.get("success"),
        taskId=options.get("task_id"),
        tool=options.get("tool"),
    )
    return Call("GET", "/v1/activity/tool-calls", params=params)


def create_task(title: str, options: TaskCreateOptions) -> Call[Task]:
    payload = body(
        title=title,
        assigneeId=options.get("assignee_id"),
        userId=options.get("user_id"),
        context=options.get("context"),
        visibility=options.get("visibility"),
        groupIds=options.get("group_ids"),
    )
    return Call("POST", "/v1/tasks", json=payload)


def list_tasks(options: TaskListOptions) -> Call[OffsetPage]:
    params = query(
        assigneeId=options.get("assignee_id"),
        creatorId=options.get("creator_id"),
        status=options.get("status"),
        limit=options.get("limit"),
        offset=options.get("offset"),
    )
    return Call("GET", "/v1/tasks", params=params)


def get_task(task_id: str) -> Call[Task]:
    return Call("GET", f"/v1/tasks/{segment(task_id)}")


def update_task(task_id: str, update: TaskUpdate) -> Call[Task]:
    """A PATCH: never retried. ``result`` is sent as given, ``None`` included, when it is named."""
    payload: dict[str, Any] = body(status=update.get("status"))
    if "result" in update:
        payload["result"] = update["result"]
    return Call("PATCH", f"/v1/tasks/{segment(task_id)}", json=payload)


def list_events(options: EventListOptions) -> Call[ChangeEventPage]:
    types = options.get("types")
    params = query(
        after=options.get("after"),
        types=",".join(types) if types else None,
        limit=options.get("limit"),
    )
    return Call("GET", "/v1/events", params=params)
