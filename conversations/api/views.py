"""memory-service's conversation paths. A view parses input, calls one service or selector, renders."""

from typing import Any

from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikeys.permissions import ReadAnyWriteAgentOrAdmin, request_caller
from conversations import selectors, services
from conversations.api.serializers import (
    CheckpointInputSerializer,
    CheckpointOutputSerializer,
    ContextOutputSerializer,
    ContextQuerySerializer,
    ConversationCreateInputSerializer,
    ConversationListQuerySerializer,
    ConversationOutputSerializer,
    ConversationPageSerializer,
    MessageBatchInputSerializer,
    MessageBatchOutputSerializer,
    MessageInputSerializer,
    MessageListQuerySerializer,
    MessageOutputSerializer,
    MessagePageSerializer,
    MessageSearchPageSerializer,
    MessageSearchQuerySerializer,
    MessageSearchResultSerializer,
    SyncInputSerializer,
    SyncOutputSerializer,
    validate_message,
)
from memoryplatform.api.headers import FALLBACK_HEADER, fallback_headers
from memoryplatform.api.serializers import refuse_unknown_fields, validated_item
from memoryplatform.errors import BadRequest
from usermemory.api.serializers import to_filters

TAGS = ["conversations"]
AGENT_PARAM = OpenApiParameter(
    "agentId", str, description="Viewer and admin keys: the agent to read for (required). Agent keys: itself."
)


def _valid(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class ConversationView(APIView):
    """Every role reads (agents only where their group lets them); agent and admin keys write."""

    permission_classes = [ReadAnyWriteAgentOrAdmin]


class ConversationListCreateView(ConversationView):
    @extend_schema(
        tags=TAGS,
        operation_id="v1_conversations_list",
        parameters=[ConversationListQuerySerializer],
        responses=ConversationPageSerializer,
        summary="List the conversations the caller may take part in, newest first, in pages",
        description=(
            "An agent key sees the conversations without a group and those of its groups; viewer and admin "
            "keys see all. `nextCursor` is set when more may follow: pass it as `after`."
        ),
    )
    def get(self, request: Request) -> Response:
        query = _valid(ConversationListQuerySerializer, request.query_params)
        qs = selectors.conversation_list_for(
            caller=request_caller(request), user_id=query.get("userId"), after=query.get("after")
        )
        page = selectors.page_of(qs, limit=query["limit"])
        return Response(
            {"data": ConversationOutputSerializer(page.items, many=True).data, "nextCursor": page.next_cursor}
        )

    @extend_schema(
        tags=TAGS,
        request=ConversationCreateInputSerializer,
        responses={201: ConversationOutputSerializer},
        summary="Create a conversation with a user, optionally gated by an agent group",
    )
    def post(self, request: Request) -> Response:
        data = _valid(ConversationCreateInputSerializer, request.data)
        conversation = services.conversation_create(
            caller=request_caller(request),
            user_id=data["userId"],
            title=data["title"],
            group_id=data["groupId"],
        )
        return Response(ConversationOutputSerializer(conversation).data, status=status.HTTP_201_CREATED)


class MessageSearchView(ConversationView):
    @extend_schema(
        tags=TAGS,
        parameters=[MessageSearchQuerySerializer, FALLBACK_HEADER],
        responses=MessageSearchPageSerializer,
        summary="Search the messages the caller may see, across conversations, by words or by meaning",
        description=(
            "An agent key searches the conversations it may take part in: their history and case log, and of "
            "the memory channel only its own stream. Viewer and admin keys search every message. `agentId` "
            "keeps one agent's messages (their author); `userId`, one user's conversations; `channel`, one "
            "channel. Best first, each with its `score`.\n\n"
            "`mode=keyword` (the default): the words and phrases of a web search, ranked by full-text rank; "
            "a message is found by the words of its first 100,000 characters of text. `semantic` (by "
            "meaning) and `hybrid` (meaning and words): each history and case-log message has a vector of "
            "its text with the turn before it; the score is the probability of relevance (0 to 1), the same "
            "contract as memory search, and `minScore` leaves out what scores under it. Visibility is "
            "applied before ranking, and the full-text statistics are computed over the caller's messages "
            "only. The memory channel has no vectors: it is found by its words (hybrid). X-Search-Fallback: "
            "fulltext when the embedder is down."
        ),
    )
    def get(self, request: Request) -> Response:
        query = _valid(MessageSearchQuerySerializer, request.query_params)
        found = selectors.message_search(
            caller=request_caller(request),
            query=query["q"],
            user_id=query.get("userId"),
            agent_id=query.get("agentId"),
            channel=query.get("channel"),
            limit=query["limit"],
            offset=query["offset"],
            mode=query["mode"],
            min_score=query.get("minScore"),
        )
        data = MessageSearchResultSerializer(found.messages, many=True).data
        headers = fallback_headers(found)
        return Response({"data": data}, headers=headers)


class ConversationDetailView(ConversationView):
    @extend_schema(tags=TAGS, responses=ConversationOutputSerializer, summary="Get a conversation")
    def get(self, request: Request, conversation_id: str) -> Response:
        conversation = selectors.conversation_get_for(
            caller=request_caller(request), conversation_id=conversation_id
        )
        return Response(ConversationOutputSerializer(conversation).data)


class MessagesView(ConversationView):
    @extend_schema(
        tags=TAGS,
        parameters=[MessageListQuerySerializer],
        responses=MessagePageSerializer,
        summary="List a channel's messages in sequence order, after a cursor",
        description=(
            "`memory` is always one agent's own stream (the caller's). `history` with `view=agent` holds "
            "every user message and only the agent's own replies. `nextCursor` is set when more may follow."
        ),
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        query = _valid(MessageListQuerySerializer, request.query_params)
        conversation = selectors.conversation_get_for(
            caller=request_caller(request), conversation_id=conversation_id
        )
        qs = selectors.message_list(
            caller=request_caller(request),
            conversation=conversation,
            channel=query["channel"],
            after=query.get("after"),
            epoch=query.get("epoch"),
            view=query.get("view"),
            agent_id=query.get("agentId"),
        )
        page = selectors.page_of(qs, limit=query["limit"])
        return Response(
            {"data": MessageOutputSerializer(page.items, many=True).data, "nextCursor": page.next_cursor}
        )

    @extend_schema(
        tags=TAGS,
        request=PolymorphicProxySerializer(
            component_name="MessageAppend",
            serializers=[MessageInputSerializer, MessageBatchInputSerializer],
            resource_type_field_name=None,
        ),
        responses={
            201: PolymorphicProxySerializer(
                component_name="MessageAppended",
                serializers=[MessageOutputSerializer, MessageBatchOutputSerializer],
                resource_type_field_name=None,
            )
        },
        summary="Append one message, or a batch of at most 20 (all or nothing)",
        description=(
            "The agent is the key's, never the body's. A single message answers with the message; a batch "
            '(`{"messages": [...]}`) with `{"data": [...]}`.'
        ),
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        body = request.data
        batch_body = body if isinstance(body, dict) and "messages" in body else None
        batch = batch_body is not None
        if batch_body is not None:
            refuse_unknown_fields(batch_body, accepted=("messages", "sessionId"))
        items = batch_body["messages"] if batch_body is not None else [body]
        if not isinstance(items, list):
            raise BadRequest('A batch is {"messages": [...]}.')
        services.message_batch_check(count=len(items))
        default_session = batch_body.get("sessionId") if batch_body is not None else None
        writes = []
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                raise BadRequest(f"messages[{index}]: a message is a JSON object.", details={"index": index})
            if default_session is not None and "sessionId" not in item:
                item = {**item, "sessionId": default_session}
            if batch:
                valid = validated_item(validate_message, item, items="messages", index=index)
            else:
                valid = validate_message(item)
            writes.append(MessageInputSerializer.write_of(valid))
        messages = services.message_append(
            caller=request_caller(request), conversation_id=conversation_id, writes=writes
        )
        if batch:
            payload: Any = {"data": MessageOutputSerializer(messages, many=True).data}
        else:
            payload = MessageOutputSerializer(messages[0]).data
        return Response(payload, status=status.HTTP_201_CREATED)


class MemorySyncView(ConversationView):
    @extend_schema(
        tags=TAGS,
        request=SyncInputSerializer,
        responses=SyncOutputSerializer,
        summary="Sync the caller's memory stream with its full ChatMemory",
        description=(
            "The same messages as the latest epoch are a no-op; when the stored messages are a prefix of the "
            "incoming ones only the delta is appended; otherwise a new epoch starts. Agent keys only."
        ),
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        data = SyncInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = services.memory_sync(
            caller=request_caller(request),
            conversation_id=conversation_id,
            messages=data.to_messages(),
            session_id=data.validated_data["sessionId"],
        )
        return Response(SyncOutputSerializer(result).data)


class CheckpointView(ConversationView):
    @extend_schema(
        tags=TAGS,
        parameters=[AGENT_PARAM],
        responses=CheckpointOutputSerializer,
        summary="The caller's last read case-log entry (lastEntryId null when none)",
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        conversation = selectors.conversation_get_for(
            caller=request_caller(request), conversation_id=conversation_id
        )
        agent_id = selectors.reading_agent_id(
            caller=request_caller(request), agent_id=request.query_params.get("agentId"), required=True
        )
        checkpoint = selectors.checkpoint_get(conversation=conversation, agent_id=agent_id)
        return Response(
            CheckpointOutputSerializer.shape(
                conversation_id=conversation.id,
                agent_id=agent_id,
                checkpoint=checkpoint,
            )
        )

    @extend_schema(
        tags=TAGS,
        request=CheckpointInputSerializer,
        responses=CheckpointOutputSerializer,
        summary="Store the caller's last read case-log entry (agent keys)",
    )
    def put(self, request: Request, conversation_id: str) -> Response:
        data = _valid(CheckpointInputSerializer, request.data)
        checkpoint = services.checkpoint_set(
            caller=request_caller(request), conversation_id=conversation_id, last_entry_id=data["lastEntryId"]
        )
        return Response(
            CheckpointOutputSerializer.shape(
                conversation_id=checkpoint.conversation_id,
                agent_id=checkpoint.agent_id,
                checkpoint=checkpoint,
            )
        )


class ContextView(ConversationView):
    @extend_schema(
        tags=TAGS,
        parameters=[AGENT_PARAM, ContextQuerySerializer, FALLBACK_HEADER],
        responses=ContextOutputSerializer,
        summary="The caller's agent context in one call",
        description=(
            "Its latest memory epoch, the case log after its checkpoint, its isolated history (the latest "
            f"{services.CONTEXT_HISTORY} messages) and the user memories visible to it, recalled with its "
            "policy's order and limit in the conversation's group. With `q`, the user memories are recalled "
            "by relevance to it (hybrid), best first, each with a score, within the same limit; and "
            f"`relevantMessages` adds at most {services.CONTEXT_RELEVANT} messages of the conversation that "
            "the agent may read and the context does not hold (earlier history as the agent sees it, older "
            "case log), most relevant first, each with its score (the probability of relevance). `minScore` "
            "leaves out memories and messages that score under it (no cut when absent). "
            "X-Search-Fallback: fulltext when the embedder is down."
        ),
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        query = _valid(ContextQuerySerializer, request.query_params)
        context = services.conversation_context(
            caller=request_caller(request),
            conversation_id=conversation_id,
            agent_id=request.query_params.get("agentId"),
            query=query.get("q"),
            min_score=query.get("minScore"),
            filters=to_filters(query),
        )
        headers = fallback_headers(context.ranked_memories)
        return Response(ContextOutputSerializer(context).data, headers=headers)
