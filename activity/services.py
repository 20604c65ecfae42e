"""Writes of agent activity. The tool-call log: agents log their calls (REST), our LLM and MCP tools log
theirs, Dream prunes. Tasks: created by an agent, worked and completed by their assignee.

The agent is always the key's. A call logged over REST whose ``args`` or ``result`` is longer than
``ACTIVITY_MAX_CHARS`` (as compact JSON) is refused with its whole batch; our own tools cut a long result
short instead, since the call has already happened. A task's ``context`` and ``result`` have the same limit,
refused (rows stored before it were cut short by migration 0003).
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import DateTimeField, DurationField, ExpressionWrapper, F, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from activity.models import ActivityPolicy, Task, ToolCall
from apikeys.caller import Caller
from apikeys.models import Agent
from apikeys.selectors import agent_group_ids
from apikeys.services import caller_require_writer
from memoryplatform import publicids
from memoryplatform.batches import delete_in_batches
from memoryplatform.errors import BadRequest, Conflict, Forbidden, NotFound
from memoryplatform.text import storable_json, storable_text
from usermemory.models import MemoryEntry, Visibility
from usermemory.services import MemoryWrite, memory_upsert
from usermemory.writerules import checked_time

MAX_BATCH = 100
FUTURE_SLACK = timedelta(minutes=5)  # a client's clock may run a little ahead; further is a mistake
DEFAULT_RETENTION_DAYS = ActivityPolicy._meta.get_field("tool_call_retention_days").get_default()
CUT_MARK = "… [cut: {total} characters as JSON]"


@dataclass(frozen=True)
class ToolCallWrite:
    """One tool call as an agent reports it. ``created_at`` defaults to the time it is recorded."""

    tool: str
    args: Any = None
    result: Any = None
    success: bool = True
    duration_ms: int | None = None
    error: str = ""
    task_id: str = ""
    conversation_id: str = ""
    session_id: str = ""
    created_at: datetime | None = None


def json_chars(value: Any) -> int:
    """A value's length as compact JSON, the measure of ``ACTIVITY_MAX_CHARS``."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str))


def tool_calls_record(*, caller: Caller, calls: Sequence[ToolCallWrite]) -> list[ToolCall]:
    """Record a batch of 1 to :data:`MAX_BATCH` calls made by the caller's agent: all of them, or (a refusal
    naming the failing index) none."""
    caller_require_writer(caller)
    if not caller.is_agent:
        raise Forbidden("Only an agent key logs tool calls: the agent is the key's.")
    if not 1 <= len(calls) <= MAX_BATCH:
        raise BadRequest(f"A batch holds 1 to {MAX_BATCH} calls, not {len(calls)}.")
    limit = settings.ACTIVITY_MAX_CHARS
    now = timezone.now()
    rows = []
    for index, call in enumerate(calls):
        for name, value in (("args", call.args), ("result", call.result)):
            if value is not None and json_chars(value) > limit:
                raise BadRequest(
                    f"calls[{index}].{name} is longer than {limit} characters as JSON; nothing was recorded.",
                    details={"index": index, "field": name, "limit": limit},
                )
        if call.created_at is not None:
            created_at = checked_time(f"calls[{index}].createdAt", call.created_at)
            if created_at > now + FUTURE_SLACK:
                raise BadRequest(
                    f"calls[{index}].createdAt is in the future; nothing was recorded.",
                    details={"index": index},
                )
            call = replace(call, created_at=created_at)
        rows.append(_row(caller=caller, call=call, via=ToolCall.Via.REST, now=now))
    return ToolCall.objects.bulk_create(rows)


def _row(*, caller: Caller, call: ToolCallWrite, via: str, now: datetime) -> ToolCall:
    return ToolCall(
        agent_id=caller.acting_agent_id,
        tool=call.tool,
        args=call.args,
        result=call.result,
        success=call.success,
        duration_ms=call.duration_ms,
        error=call.error,
        task_id=call.task_id,
        conversation_id=call.conversation_id,
        session_id=call.session_id,
        via=via,
        created_at=call.created_at or now,
    )


def clip_result(value: Any, limit: int | None = None) -> Any:
    """A result within ``limit`` (``ACTIVITY_MAX_CHARS``): itself, or its JSON text cut short with a mark
    saying so."""
    limit = settings.ACTIVITY_MAX_CHARS if limit is None else limit
    total = json_chars(value)
    if total <= limit:
        return value
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    mark = CUT_MARK.format(total=total)
    keep = limit - len(mark) - 2  # - 2: the quotes of the stored JSON string
    while True:
        cut = text[: max(0, keep)] + mark
        over = json_chars(cut) - limit  # what escaping the kept text (its quotes, say) added
        if over <= 0 or keep <= 0:
            return cut
        keep -= over


def clip_args(args: Any) -> Any:
    """A tool call's ``args`` within ``ACTIVITY_MAX_CHARS``. An object keeps its keys, its longest values cut
    short first, so that a call about a user still names its ``userId`` (GDPR erasure finds the call by it);
    anything else is cut as a result is."""
    limit = settings.ACTIVITY_MAX_CHARS
    if not isinstance(args, dict) or json_chars(args) <= limit:
        return clip_result(args)
    clipped = dict(args)
    for key in sorted(clipped, key=lambda k: json_chars(clipped[k]), reverse=True):
        over = json_chars(clipped) - limit
        if over <= 0:
            break
        clipped[key] = clip_result(clipped[key], max(0, json_chars(clipped[key]) - over))
    return clipped if json_chars(clipped) <= limit else clip_result(clipped)


def tool_call_log(*, caller: Caller, via: str, call: ToolCallWrite) -> ToolCall | None:
    """Log one call of our own tools (LLM or MCP) made with an agent key; other keys act as no agent, so
    nothing is logged for them. Unlike a REST batch, a long result or args is cut short, not refused, text
    the database cannot store (a NUL, a lone surrogate) is logged escaped (:func:`storable_json`), and an
    ``unavailable`` agent's calls are logged too: they are what it did."""
    if not caller.is_agent:
        return None
    clipped = replace(
        call,
        tool=storable_text(call.tool),
        args=clip_args(storable_json(call.args)),
        result=clip_result(storable_json(call.result)),
        error=storable_text(call.error),
    )
    row = _row(caller=caller, call=clipped, via=via, now=timezone.now())
    row.save(force_insert=True)
    return row


def tool_calls_prune(*, now: datetime, batch_size: int, agent_id: str | None = None) -> int:
    """Delete the tool calls older than their agent's ``tool_call_retention_days`` (an agent without a
    policy: the default; 0 keeps them forever), in transactions of at most ``batch_size`` rows. Returns how
    many were deleted."""
    retention = Coalesce(
        Subquery(
            ActivityPolicy.objects.filter(agent_id=OuterRef("agent_id")).values("tool_call_retention_days")[
                :1
            ]
        ),
        Value(DEFAULT_RETENTION_DAYS),
    )
    kept_for = ExpressionWrapper(F("retention") * Value(timedelta(days=1)), output_field=DurationField())
    cutoff = ExpressionWrapper(Value(now) - kept_for, output_field=DateTimeField())
    expired = ToolCall.objects.alias(retention=retention).filter(retention__gt=0, created_at__lt=cutoff)
    if agent_id is not None:
        expired = expired.filter(agent_id=agent_id)
    return delete_in_batches(expired, batch_size=batch_size)


# --- Tasks ------------------------------------------------------------------------------------------------

TASK_RESULT_CATEGORY = "task_result"
FINAL_STATUSES = frozenset({Task.Status.DONE, Task.Status.FAILED, Task.Status.CANCELLED})
MAX_TASK_GROUPS = 50
UNSET: Any = object()  # "leave the result as it is", distinct from a JSON null


@transaction.atomic
def task_create(
    *,
    caller: Caller,
    title: str,
    assignee_id: str | None = None,
    user_id: str = "",
    context: Any = None,
    visibility: str = Visibility.SELF,
    group_ids: list[str] | None = None,
) -> Task:
    """A task created by the caller's agent, assigned to ``assignee_id`` (itself by default), ``pending``.
    The agent must be in every group it names (else 403), and ``context`` fit ``ACTIVITY_MAX_CHARS`` (else
    400): every door (REST, the LLM tool, MCP) creates through here, so the rules hold at each."""
    caller_require_writer(caller)
    if not caller.is_agent:
        raise Forbidden("Only an agent key creates tasks: the creator is the key's agent.")
    if not title.strip():
        raise BadRequest("title must not be empty.")
    if visibility not in Visibility.values:
        raise BadRequest(f"visibility must be one of {', '.join(Visibility.values)}.")
    groups = list(dict.fromkeys(group_ids or []))
    if len(groups) > MAX_TASK_GROUPS:
        raise BadRequest(f"groupIds: at most {MAX_TASK_GROUPS}.")
    _require_within_limit("context", context)
    _require_member(agent_id=caller.acting_agent_id, group_ids=groups)
    assignee = assignee_id or caller.acting_agent_id
    # The assignee's row stays locked (FOR NO KEY UPDATE) until the task is in: an agent deleted meanwhile
    # waits for it, so the foreign key never fails at commit.
    if Agent.objects.select_for_update(no_key=True).filter(id=assignee).values_list("id").first() is None:
        raise BadRequest(f"No agent '{assignee}' to assign the task to.", details={"assigneeId": assignee})
    now = timezone.now()
    return Task.objects.create(
        creator_id=caller.acting_agent_id,
        assignee_id=assignee,
        title=title,
        user_id=user_id,
        context={} if context is None else context,
        visibility=visibility,
        group_ids=groups,
        created_at=now,
        updated_at=now,
    )


def _require_within_limit(field: str, value: Any) -> None:
    """A task's ``context`` or ``result`` is at most ``ACTIVITY_MAX_CHARS`` characters as compact JSON, the
    limit of a tool call's ``args`` and ``result``: what one agent gives another stays a bounded read."""
    limit = settings.ACTIVITY_MAX_CHARS
    if value is not None and json_chars(value) > limit:
        raise BadRequest(
            f"{field} is longer than {limit} characters as JSON.", details={"field": field, "limit": limit}
        )


def _require_member(*, agent_id: str, group_ids: list[str]) -> None:
    """The agent a task is created as is a member of every group it names: the groups are those of the
    result's memory, which the assignee writes on completion, so a task is no way into a group its creator
    is not in. Only an agent key creates tasks; an admin door acting for an agent would pass that agent."""
    if not group_ids:
        return
    outside = sorted(set(group_ids) - set(agent_group_ids(agent_id=agent_id)))
    if outside:
        raise Forbidden(
            f"Agent '{agent_id}' is not a member of group(s): {', '.join(outside)}.",
            details={"groups": outside},
        )


def _task_for_update(*, caller: Caller, task_id: int) -> Task:
    task = Task.objects.select_for_update().filter(pk=task_id).first()
    if task is None or (caller.is_agent and caller.agent_id not in {task.creator_id, task.assignee_id}):
        # an agent outside the task learns nothing of it
        raise NotFound(f"No task {publicids.to_public(publicids.TASK, task_id)}.")
    return task


@transaction.atomic
def task_update(*, caller: Caller, task_id: int, status: str | None = None, result: Any = UNSET) -> Task:
    """Change a task's status and result: its assignee (and admins) any status and the result; its creator
    only cancels it. A task that is done, failed or cancelled is final (409). Done with a user, its result is
    stored as a memory of that user through :func:`usermemory.services.memory_upsert`, in this transaction,
    so a refused memory (a guardrail, the cap) refuses the change and nothing is written."""
    caller_require_writer(caller)
    task = _task_for_update(caller=caller, task_id=task_id)
    if status is not None and status not in Task.Status.values:
        raise BadRequest(f"status must be one of {', '.join(Task.Status.values)}.")
    may_work = caller.is_admin or task.assignee_id == caller.agent_id
    if not may_work and (result is not UNSET or status not in {None, Task.Status.CANCELLED}):
        raise Forbidden(
            "Only the task's assignee changes its status and result; its creator may only cancel it.",
            details={"assigneeId": task.assignee_id},
        )
    if task.status in FINAL_STATUSES:
        message = f"Task {publicids.to_public(publicids.TASK, task.pk)} is {task.status}: it changes no more."
        raise Conflict(message, details={"status": task.status})
    now = timezone.now()
    if result is not UNSET:
        _require_within_limit("result", result)
        task.result = result
    if status is not None:
        task.status = status
        if status in FINAL_STATUSES:
            task.finished_at = now
    if task.status == Task.Status.DONE and task.user_id:
        task.memory_entry_id = _store_result(caller=caller, task=task).id
    task.updated_at = now
    task.save()
    return task


def task_memory_key(task: Task) -> str:
    """The key of a done task's result memory: ``task:`` and the task's public id (the id its creator was
    given; the row's own number would count every agent's tasks)."""
    return f"task:{publicids.to_public(publicids.TASK, task.pk)}"


def _store_result(*, caller: Caller, task: Task) -> MemoryEntry:
    """The done task's result as a memory of its user, owned by the assignee: ``task:<public id>`` =
    ``{title, result}``, category ``task_result``, the task's visibility and groups."""
    written = memory_upsert(
        caller=caller,
        write=MemoryWrite(
            user_id=task.user_id,
            key=task_memory_key(task),
            value={"title": task.title, "result": task.result},
            category=TASK_RESULT_CATEGORY,
            visibility=task.visibility,
            source_agent_id=task.assignee_id,
            group_ids=task.group_ids or None,
        ),
        system_category=True,
    )
    return written.entry


# --- GDPR ---------------------------------------------------------------------------------------------------


def activity_erase_user(user_id: str) -> dict[str, int]:
    """GDPR erasure's part here: the user's tasks, and the tool calls whose ``args`` name the user
    (``userId``: every call of our own LLM and MCP tools about them). A call an agent logged over REST with
    the user elsewhere in it cannot be told apart. No index serves the tool-call match: erasure is rare."""
    tasks_deleted, _ = Task.objects.filter(user_id=user_id).delete()
    calls_deleted, _ = ToolCall.objects.filter(args__userId=user_id).delete()
    return {"tasksDeleted": tasks_deleted, "toolCallsDeleted": calls_deleted}
