"""``POST /usermemorystore/memories/{userId}/extract``: parse, call :func:`extraction.extract.memory_extract`,
render."""

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikeys.permissions import ReadAnyWriteAgentOrAdmin, request_caller
from extraction.api.serializers import ExtractInputSerializer, ExtractOutputSerializer
from extraction.extract import memory_extract, outcome_as_json
from memoryplatform.api.headers import TURN_HEADER, turn_id_of


class MemoryExtractView(APIView):
    permission_classes = [ReadAnyWriteAgentOrAdmin]

    @extend_schema(
        request=ExtractInputSerializer,
        responses=ExtractOutputSerializer,
        parameters=[TURN_HEADER],
        summary="Extract facts about the user from messages (an LLM): ADD, UPDATE or NOOP, decided in code",
        description="The messages are sent, or read from the stored conversation (conversationId alone, or "
        "with afterMessageId or messageIds). A message this agent extracted before, by any door, is not "
        "extracted again; the stored messages read move the background extraction's watermark. A fact "
        "observed before the stored value on its key was is SKIPPED (time order).",
    )
    def post(self, request: Request, user_id: str) -> Response:
        data = ExtractInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        body = data.validated_data
        outcome = memory_extract(
            caller=request_caller(request),
            user_id=user_id,
            messages=data.given_messages(),
            agent_id=body["agentId"],
            visibility=body["visibility"],
            group_ids=body["groupIds"],
            category=body["category"],
            conversation_id=body["conversationId"],
            after_message_id=body["afterMessageId"],
            message_ids=body["messageIds"],
            dry_run=body["dryRun"],
            turn_id=turn_id_of(request, request.data),
            key_prefix=body["keyPrefix"],
        )
        return Response(outcome_as_json(outcome))
