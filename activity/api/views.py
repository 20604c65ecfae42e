"""``/v1/activity/tool-calls``: agents log their tool calls; agents read their own, viewers and admins any.
``/v1/tasks``: agents create tasks, their assignees work them, their creators may cancel them."""

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from activity import selectors, services
from activity.api.serializers import (
    TaskCreateInputSerializer,
    TaskOutputSerializer,
    TaskQuerySerializer,
    TaskUpdateInputSerializer,
    ToolCallBatchInputSerializer,
    ToolCallBatchOutputSerializer,
    ToolCallPageOutputSerializer,
    ToolCallQuerySerializer,
)
from activity.models import Task
from apikeys.permissions import IsAuthenticatedCaller, request_caller
from memoryplatform.api.pagination import LimitOffsetPagination
from memoryplatform.replica import replica_door


class TaskPagination(LimitOffsetPagination):
    """``limit`` 1 to :data:`activity.selectors.MAX_TASK_PAGE`: a page of tasks stays bounded in size."""

    default_limit = selectors.DEFAULT_TASK_PAGE
    max_limit = selectors.MAX_TASK_PAGE


@replica_door
class ToolCallsView(APIView):
    permission_classes = [IsAuthenticatedCaller]

    @extend_schema(
        parameters=[ToolCallQuerySerializer],
        responses=ToolCallPageOutputSerializer,
        summary="Tool calls, newest first: an agent key its own, viewer and admin keys any agent's",
        tags=["activity"],
    )
    def get(self, request: Request) -> Response:
        query = ToolCallQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        page = selectors.tool_call_list(
            caller=request_caller(request),
            agent_id=params.get("agentId"),
            tool=params.get("tool"),
            task_id=params.get("taskId"),
            success=params["success"],
            since=params.get("since"),
            after=params.get("after"),
            limit=params["limit"],
        )
        return Response(ToolCallPageOutputSerializer({"results": page.calls, "next": page.next}).data)

    @extend_schema(
        request=ToolCallBatchInputSerializer,
        responses={201: ToolCallBatchOutputSerializer},
        summary="Log 1 to 100 tool calls of the key's agent: all of them or none",
        tags=["activity"],
    )
    def post(self, request: Request) -> Response:
        data = ToolCallBatchInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        calls = services.tool_calls_record(caller=request_caller(request), calls=data.to_writes())
        return Response(ToolCallBatchOutputSerializer({"calls": calls}).data, status=status.HTTP_201_CREATED)


class TaskListCreateView(generics.ListAPIView):
    permission_classes = [IsAuthenticatedCaller]
    serializer_class = TaskOutputSerializer
    pagination_class = TaskPagination

    def get_queryset(self) -> QuerySet[Task]:
        if getattr(self, "swagger_fake_view", False):
            return Task.objects.none()
        query = TaskQuerySerializer(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        return selectors.task_list(
            caller=request_caller(self.request),
            assignee_id=params.get("assigneeId"),
            creator_id=params.get("creatorId"),
            status=params.get("status"),
        )

    @extend_schema(
        parameters=[TaskQuerySerializer],
        summary="Tasks, newest first: an agent key those it created or is assigned; viewer, admin keys all",
        tags=["tasks"],
    )
    def get(self, request: Request, *args: str, **kwargs: str) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        request=TaskCreateInputSerializer,
        responses={201: TaskOutputSerializer},
        summary="Create a task as the key's agent, assigned to assigneeId (itself by default)",
        tags=["tasks"],
    )
    def post(self, request: Request) -> Response:
        data = TaskCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        body = data.validated_data
        task = services.task_create(
            caller=request_caller(request),
            title=body["title"],
            assignee_id=body["assigneeId"],
            user_id=body["userId"] or "",
            context=body["context"],
            visibility=body["visibility"],
            group_ids=body["groupIds"],
        )
        return Response(TaskOutputSerializer(task).data, status=status.HTTP_201_CREATED)


class TaskDetailView(APIView):
    permission_classes = [IsAuthenticatedCaller]

    @extend_schema(responses=TaskOutputSerializer, summary="One task the caller may read", tags=["tasks"])
    def get(self, request: Request, task_id: int) -> Response:
        return Response(
            TaskOutputSerializer(selectors.task_get(caller=request_caller(request), task_id=task_id)).data
        )

    @extend_schema(
        request=TaskUpdateInputSerializer,
        responses=TaskOutputSerializer,
        summary="The assignee changes the status and result (done with a user: the result becomes a memory); "
        "the creator may cancel",
        tags=["tasks"],
    )
    def patch(self, request: Request, task_id: int) -> Response:
        data = TaskUpdateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        body = data.validated_data
        task = services.task_update(
            caller=request_caller(request),
            task_id=task_id,
            status=body.get("status"),
            result=body.get("result", services.UNSET),
        )
        return Response(TaskOutputSerializer(task).data)
