"""Reads of agent activity: an agent reads its own tool calls and the tasks it created or is assigned;
viewer and admin keys read any."""

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Q, QuerySet

from activity.models import Task, ToolCall
from apikeys.caller import Caller
from memoryplatform import publicids
from memoryplatform.errors import BadRequest, Forbidden, NotFound


@dataclass(frozen=True)
class ToolCallPage:
    """One page, newest first, and the cursor of the next (``None`` on the last page)."""

    calls: list[ToolCall]
    next: str | None


def cursor_of(call: ToolCall) -> str:
    """An opaque cursor after ``call`` in the newest-first order: its time and its public id (the row's own
    number would count every agent's calls)."""
    public_id = publicids.to_public(publicids.TOOL_CALL, call.pk)
    return base64.urlsafe_b64encode(f"{call.created_at.isoformat()}|{public_id}".encode()).decode()


def _position(cursor: str) -> tuple[datetime, int]:
    """A cursor's time and internal id; a cursor given before public ids holds a legacy id."""
    try:
        created_at, _, given = base64.urlsafe_b64decode(cursor.encode("ascii")).decode().partition("|")
        moment, pk = datetime.fromisoformat(created_at), publicids.parse(publicids.TOOL_CALL, given)
    except (ValueError, UnicodeError, binascii.Error):
        raise BadRequest("after is not a cursor this list gave.") from None
    if moment.tzinfo is None or pk is None:
        raise BadRequest("after is not a cursor this list gave.")
    return moment, pk


def tool_call_filter(
    *,
    agent_id: str | None = None,
    tool: str | None = None,
    task_id: str | None = None,
    success: bool | None = None,
    since: datetime | None = None,
) -> QuerySet[ToolCall]:
    """Tool calls matching the filters, newest first, with no rule of who may read them (the admin's and
    :func:`tool_call_list`'s base)."""
    qs = ToolCall.objects.all()
    if agent_id is not None:
        qs = qs.filter(agent_id=agent_id)
    if tool is not None:
        qs = qs.filter(tool=tool)
    if task_id is not None:
        qs = qs.filter(task_id=task_id)
    if success is not None:
        qs = qs.filter(success=success)
    if since is not None:
        qs = qs.filter(created_at__gte=since)
    return qs.order_by("-created_at", "-id")


def tool_call_list(
    *,
    caller: Caller,
    agent_id: str | None = None,
    tool: str | None = None,
    task_id: str | None = None,
    success: bool | None = None,
    since: datetime | None = None,
    after: str | None = None,
    limit: int = 50,
) -> ToolCallPage:
    """A page of tool calls the caller may read: an agent key its own agent's only (another agent's is a
    403), viewer and admin keys any agent's, or every agent's when ``agent_id`` is left out."""
    if caller.is_agent:
        if agent_id is not None and agent_id != caller.agent_id:
            raise Forbidden("An agent reads only its own tool calls.", details={"agentId": agent_id})
        agent_id = caller.acting_agent_id
    qs = tool_call_filter(agent_id=agent_id, tool=tool, task_id=task_id, success=success, since=since)
    if after is not None:
        created_at, pk = _position(after)
        qs = qs.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=pk))
    calls = list(qs[: limit + 1])
    more = len(calls) > limit
    calls = calls[:limit]
    return ToolCallPage(calls=calls, next=cursor_of(calls[-1]) if more else None)


OPEN_STATUSES = (Task.Status.PENDING, Task.Status.IN_PROGRESS)
# The most tasks one page answers, at every door. A task is at most ``ACTIVITY_MAX_CHARS`` of context and as
# much of result (the service refuses more; migration 0003 cut older rows), so a page is bounded whatever
# other agents assign: at the default 16,384, about 3.4 MB at 100 tasks, and 1.7 MB at the default 50.
MAX_TASK_PAGE = 100
DEFAULT_TASK_PAGE = 50


def task_list(
    *,
    caller: Caller,
    assignee_id: str | None = None,
    creator_id: str | None = None,
    status: str | None = None,
    open_only: bool = False,
) -> QuerySet[Task]:
    """Tasks, newest first: an agent key those it created or is assigned, viewer and admin keys all; each
    filter narrows (``open_only``: pending or in progress)."""
    qs = Task.objects.all()
    if caller.is_agent:
        qs = qs.filter(Q(assignee_id=caller.agent_id) | Q(creator_id=caller.agent_id))
    if assignee_id is not None:
        qs = qs.filter(assignee_id=assignee_id)
    if creator_id is not None:
        qs = qs.filter(creator_id=creator_id)
    if status is not None:
        qs = qs.filter(status=status)
    if open_only:
        qs = qs.filter(status__in=OPEN_STATUSES)
    return qs.order_by("-created_at", "-id")


def task_get(*, caller: Caller, task_id: int) -> Task:
    task = task_list(caller=caller).filter(pk=task_id).first()
    if task is None:
        raise NotFound(f"No task {publicids.to_public(publicids.TASK, task_id)}.")
    return task


def task_page(
    *,
    caller: Caller,
    assignee_id: str | None = None,
    creator_id: str | None = None,
    status: str | None = None,
    open_only: bool = False,
    limit: int = DEFAULT_TASK_PAGE,
    offset: int = 0,
) -> list[Task]:
    """One page of :func:`task_list`: at most :data:`MAX_TASK_PAGE` tasks whatever ``limit`` asks, from
    ``offset``. The list for the agent doors (the LLM tool, MCP), bounded here as REST's is by its
    paginator."""
    limit = max(1, min(limit, MAX_TASK_PAGE))
    offset = max(0, offset)
    qs = task_list(
        caller=caller, assignee_id=assignee_id, creator_id=creator_id, status=status, open_only=open_only
    )
    return list(qs[offset : offset + limit])


def tool_call_busiest(*, since: datetime, limit: int = 5) -> list[dict[str, Any]]:
    """The agents with the most tool calls since ``since``, with their failures: one grouped scan of the
    period's rows (``toolcall_recent_idx``)."""
    rows = (
        ToolCall.objects.filter(created_at__gte=since)
        .values("agent_id")
        .annotate(calls=Count("id"), failed=Count("id", filter=Q(success=False)))
        .order_by("-calls", "agent_id")[:limit]
    )
    return [dict(row) for row in rows]


def tool_call_failures_since(*, since: datetime) -> int:
    return ToolCall.objects.filter(created_at__gte=since, success=False).count()
