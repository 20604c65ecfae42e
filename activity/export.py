"""The GDPR export's part of the activity app: a user's tasks and the tool calls that name them, in the
export's own versioned format (``usermemory.export``), not the API's shapes."""

from typing import Any

from activity.models import Task, ToolCall
from memoryplatform import publicids
from usermemory.export import iso


def activity_export_user(user_id: str) -> dict[str, Any]:
    tasks = Task.objects.filter(user_id=user_id).order_by("created_at", "id")
    calls = ToolCall.objects.filter(args__userId=user_id).order_by("created_at", "id")
    return {
        "tasks": [
            {
                "id": publicids.to_public(publicids.TASK, task.id),
                "title": task.title,
                "creatorAgentId": task.creator_id,
                "assigneeAgentId": task.assignee_id,
                "context": task.context,
                "status": task.status,
                "result": task.result,
                "createdAt": iso(task.created_at),
                "finishedAt": iso(task.finished_at),
            }
            for task in tasks
        ],
        "toolCalls": [
            {
                "id": publicids.to_public(publicids.TOOL_CALL, call.id),
                "agentId": call.agent_id,
                "tool": call.tool,
                "args": call.args,
                "result": call.result,
                "success": call.success,
                "at": iso(call.created_at),
            }
            for call in calls
        ],
    }
