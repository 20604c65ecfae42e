"""`/v1/tools`: the LLM tools for the calling agent. The views parse input and call `agenttools.tools`."""

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agenttools import tools
from apikeys.permissions import IsAgentCaller, request_caller
from memoryplatform.api.serializers import StrictCharField, StrictInput


class ToolFunctionSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    parameters = serializers.DictField(help_text="The JSON Schema of the tool's arguments.")


class ToolDefinitionSerializer(serializers.Serializer):
    type = serializers.CharField(help_text='Always "function".')
    function = ToolFunctionSerializer()


class ToolInvokeInputSerializer(StrictInput):
    userId = StrictCharField(max_length=255)
    turnId = StrictCharField(max_length=128, required=False, allow_null=True, default=None)
    conversationId = StrictCharField(max_length=255, required=False, allow_null=True, default=None)
    groupIds = serializers.ListField(
        child=StrictCharField(max_length=64), required=False, allow_null=True, default=None, max_length=50
    )
    arguments = serializers.DictField(required=False, default=dict, help_text="The tool's arguments.")


class ToolInvokeOutputSerializer(serializers.Serializer):
    result = serializers.CharField(help_text="The tool's text, for the LLM to read (refusals included).")


class ToolListView(APIView):
    permission_classes = [IsAgentCaller]

    @extend_schema(
        responses=ToolDefinitionSerializer(many=True),
        summary="The LLM tools for the calling agent, as OpenAI function-calling schemas",
        tags=["tools"],
    )
    def get(self, request: Request) -> Response:
        return Response(tools.tool_definitions(caller=request_caller(request)))


class ToolInvokeView(APIView):
    permission_classes = [IsAgentCaller]

    @extend_schema(
        request=ToolInvokeInputSerializer,
        responses=ToolInvokeOutputSerializer,
        parameters=[
            OpenApiParameter("name", str, OpenApiParameter.PATH, enum=list(tools.TOOL_NAMES)),
            OpenApiParameter("X-Turn-Id", str, OpenApiParameter.HEADER, description="Overrides turnId"),
        ],
        examples=[
            OpenApiExample(
                "rememberFact",
                request_only=True,
                value={
                    "userId": "user-123",
                    "turnId": "turn-1",
                    "arguments": {"key": "favorite_color", "value": "blue", "category": "preference"},
                },
            ),
            OpenApiExample(
                "result",
                response_only=True,
                value={"result": "✅ Remembered: favorite_color = blue [preference, self]"},
            ),
        ],
        summary="Run one LLM tool as the calling agent; a refusal is a 200 with the refusal text",
        tags=["tools"],
    )
    def post(self, request: Request, name: str) -> Response:
        data = ToolInvokeInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        body = data.validated_data
        result = tools.tool_invoke(
            caller=request_caller(request),
            name=name,
            user_id=body["userId"],
            arguments=body["arguments"],
            turn_id=request.headers.get("X-Turn-Id", "")[:128] or body["turnId"],
            conversation_id=body["conversationId"],
            group_ids=body["groupIds"],
        )
        return Response({"result": result})
