"""``/v1/activity/tool-calls``: agents log their tool calls; agents read their own, viewers and admins any."""

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from activity import selectors, services
from activity.api.serializers import (
    ToolCallBatchInputSerializer,
    ToolCallBatchOutputSerializer,
    ToolCallPageOutputSerializer,
    ToolCallQuerySerializer,
)
from apikeys.permissions import IsAuthenticatedCaller, request_caller


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
