"""EDDI's REST paths, served as written. A view parses input, calls one service or selector, renders."""

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikeys import services as agent_services
from apikeys.api.serializers import AgentOutputSerializer, AgentUpdateInputSerializer
from apikeys.models import Agent
from apikeys.permissions import IsAdminCaller, ReadAnyWriteAgentOrAdmin, request_caller
from apikeys.selectors import agent_list
from memoryplatform import publicids
from memoryplatform.api.headers import FALLBACK_HEADER, TURN_HEADER, fallback_headers, turn_id_of
from memoryplatform.api.serializers import refuse_unknown_fields, validated_item, validator
from memoryplatform.errors import BadRequest, NotFound
from memoryplatform.replica import replica_door
from usermemory import selectors, services
from usermemory.api.policy import (
    AgentDetailOutputSerializer,
    flatten_policy_changes,
    memory_policy_serializer,
)
from usermemory.api.serializers import (
    CountOutputSerializer,
    EraseOutputSerializer,
    GroupQuerySerializer,
    ListQuerySerializer,
    MemoryEntryOutputSerializer,
    MemoryEventOutputSerializer,
    MemoryUpsertInputSerializer,
    MemoryUpsertOutputSerializer,
    ScoredMemoryEntryOutputSerializer,
    SearchAllQuerySerializer,
    SearchQuerySerializer,
    TtlRefreshInputSerializer,
    TtlRefreshOutputSerializer,
    UserListQuerySerializer,
    VisibleQuerySerializer,
    to_filters,
    validate_upsert,
)
from usermemory.embedding import embeddings_waiting
from usermemory.ranking import RankedSearch

ENTRY_PARAM = OpenApiParameter("entry_id", int, OpenApiParameter.PATH)
VECTORS_PENDING_HEADER = OpenApiParameter(
    "X-Vectors-Pending",
    int,
    OpenApiParameter.HEADER,
    response=True,
    description="How many of the batch's entries still wait for their vector (the vector consumer embeds "
    "them after the commit; meanwhile they are found by their words)",
)


def _query(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    return validator(serializer_class)(request.query_params)


def _page(qs: QuerySet, query: dict[str, Any]) -> Response:
    entries = qs[query["offset"] : query["offset"] + query["limit"]]
    return Response(MemoryEntryOutputSerializer(entries, many=True).data)


class MemoryView(APIView):
    permission_classes = [ReadAnyWriteAgentOrAdmin]


class MemoryUpsertView(MemoryView):
    @extend_schema(
        request=MemoryUpsertInputSerializer,
        responses={200: MemoryUpsertOutputSerializer, 201: MemoryUpsertOutputSerializer},
        parameters=[TURN_HEADER],
        summary="Upsert one memory entry",
        description="201 created, 200 updated. Time order: when the stored value on the upsert key was "
        "observed after this write's observedAt (default: now), nothing is written and the answer is 200 "
        "with the stored entry unchanged and skipped (why, and both times).",
        examples=[
            OpenApiExample(
                "A preference every agent may read",
                value={
                    "userId": "user-123",
                    "key": "preferred_language",
                    "value": "German",
                    "category": "preference",
                    "visibility": "global",
                },
                request_only=True,
            )
        ],
    )
    def put(self, request: Request) -> Response:
        write = MemoryUpsertInputSerializer.write_of(validate_upsert(request.data))
        result = services.memory_upsert(
            caller=request_caller(request), write=write, turn_id=turn_id_of(request, request.data)
        )
        return Response(
            MemoryUpsertOutputSerializer(result).data,
            status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK,
        )


class MemoryBatchView(MemoryView):
    @extend_schema(
        request=MemoryUpsertInputSerializer(many=True),
        responses=MemoryUpsertOutputSerializer(many=True),
        parameters=[TURN_HEADER, VECTORS_PENDING_HEADER],
        summary="Upsert up to 100 entries, all or nothing",
        description="A refusal names the failing index and writes nothing. Time order, per entry: one whose "
        "stored value was observed after its observedAt is not written, and is answered with the stored "
        "entry and skipped; the others are written.",
    )
    def put(self, request: Request) -> Response:
        body = request.data
        if isinstance(body, dict):
            refuse_unknown_fields(body, accepted=("entries", "turnId"))
        items = body.get("entries") if isinstance(body, dict) else body
        if not isinstance(items, list):
            raise BadRequest('A batch is a JSON list of entries (or {"entries": [...]}).')
        services.memory_batch_check(count=len(items))
        writes = []
        for index, item in enumerate(items):
            valid = validated_item(validate_upsert, item, items="entries", index=index)
            writes.append(MemoryUpsertInputSerializer.write_of(valid))
        results = services.memory_upsert_batch(
            caller=request_caller(request), writes=writes, turn_id=turn_id_of(request, body)
        )
        waiting = embeddings_waiting(entry_ids=[r.entry.id for r in results if r.skipped is None])
        return Response(
            MemoryUpsertOutputSerializer(results, many=True).data,
            headers={VECTORS_PENDING_HEADER.name: str(waiting)},
        )


class MemoryUserView(MemoryView):
    def get_permissions(self) -> Sequence[Any]:
        return [IsAdminCaller()] if self.request.method == "DELETE" else super().get_permissions()

    @extend_schema(
        parameters=[UserListQuerySerializer],
        responses=MemoryEntryOutputSerializer(many=True),
        summary="All memories of a user that the caller may read, newest first (asOf: as history knew them; "
        "agentId: that agent's, its insights)",
    )
    def get(self, request: Request, user_id: str) -> Response:
        query = _query(UserListQuerySerializer, request)
        caller = request_caller(request)
        if "asOf" in query:
            past = selectors.memory_as_of(
                caller=caller,
                user_id=user_id,
                as_of=query["asOf"],
                limit=query["limit"],
                offset=query["offset"],
            )
            return Response(MemoryEntryOutputSerializer(past, many=True).data)
        qs = selectors.memory_list(
            caller=caller,
            user_id=user_id,
            group_ids=query.get("groupId"),
            include_superseded=query["includeSuperseded"],
            agent_id=query.get("agentId"),
            min_confidence=query.get("minConfidence"),
            filters=to_filters(query),
            key_patterns=query.get("keyPattern"),
        )
        return _page(qs, query)

    @extend_schema(
        responses={200: EraseOutputSerializer}, summary="GDPR erasure of every trace of the user (admin)"
    )
    def delete(self, request: Request, user_id: str) -> Response:
        return Response(services.memory_erase_user(caller=request_caller(request), user_id=user_id))


# A list of entries, each with a score when the read ranked them by relevance.
RANKED_OR_NOT = ScoredMemoryEntryOutputSerializer(many=True)


def ranked_response(ranked: RankedSearch) -> Response:
    """Entries best first, each with its score, and the fallback header when full text answered alone."""
    data = ScoredMemoryEntryOutputSerializer(ranked.entries, many=True).data
    return Response(data, headers=fallback_headers(ranked))


class MemoryVisibleView(MemoryView):
    @extend_schema(
        parameters=[VisibleQuerySerializer, FALLBACK_HEADER],
        responses=RANKED_OR_NOT,
        summary="Recall: the memories visible to an agent, in its recall order, or with q by relevance",
        description="Without q: the agent's recall order and limit. With q: the entries visible to the agent "
        "ranked by relevance to q (hybrid or semantic, as the per-user search ranks them), best first, each "
        "with a score, at most the agent's maxRecallEntries; their access is counted as a recall counts it. "
        "X-Search-Fallback: fulltext when the embedder is down.",
    )
    def get(self, request: Request, user_id: str) -> Response:
        query = _query(VisibleQuerySerializer, request)
        args: dict[str, Any] = {
            "caller": request_caller(request),
            "user_id": user_id,
            "agent_id": query.get("agentId"),
            "group_ids": query.get("groupId"),
            "order": query.get("order"),
            "limit": query.get("limit"),
            "min_confidence": query.get("minConfidence"),
        }
        if "q" in query:
            if "mode" in query:
                args["mode"] = query["mode"]
            ranked = services.memory_recall_ranked(
                query=query["q"],
                min_score=query.get("minScore"),
                filters=to_filters(query, author=query.get("sourceAgentId")),
                **args,
            )
            return ranked_response(ranked)
        if "asOf" in query:
            past = services.memory_recall_as_of(as_of=query["asOf"], **args)
            return Response(MemoryEntryOutputSerializer(past, many=True).data)
        return Response(MemoryEntryOutputSerializer(services.memory_recall(**args), many=True).data)


class MemorySearchView(MemoryView):
    @extend_schema(
        parameters=[SearchQuerySerializer, FALLBACK_HEADER],
        responses=RANKED_OR_NOT,
        summary="Search in keys and values: literal (keyword, the default), by meaning (semantic) or both "
        "(hybrid, each entry with a score; X-Search-Fallback: fulltext when the embedder is down)",
    )
    def get(self, request: Request, user_id: str) -> Response:
        query = _query(SearchQuerySerializer, request)
        args: dict[str, Any] = {
            "caller": request_caller(request),
            "user_id": user_id,
            "query": query["q"],
            "group_ids": query.get("groupId"),
            "limit": query["limit"],
            "offset": query["offset"],
            "include_superseded": query["includeSuperseded"],
            "min_confidence": query.get("minConfidence"),
            "filters": to_filters(query, author=query.get("agentId")),
        }
        if query["mode"] == "keyword":
            return Response(MemoryEntryOutputSerializer(selectors.memory_search(**args), many=True).data)
        ranked = selectors.memory_search_ranked(mode=query["mode"], min_score=query.get("minScore"), **args)
        return ranked_response(ranked)


class MemoryCategoryView(MemoryView):
    @extend_schema(
        parameters=[ListQuerySerializer],
        responses=MemoryEntryOutputSerializer(many=True),
        summary="A user's memories in one category that the caller may read, newest first",
    )
    def get(self, request: Request, user_id: str, category: str) -> Response:
        query = _query(ListQuerySerializer, request)
        qs = selectors.memory_by_category(
            caller=request_caller(request),
            user_id=user_id,
            category=category,
            group_ids=query.get("groupId"),
            include_superseded=query["includeSuperseded"],
        )
        return _page(qs, query)


class MemoryKeyView(MemoryView):
    @extend_schema(
        parameters=[GroupQuerySerializer],
        responses=MemoryEntryOutputSerializer,
        summary="A user's memory by its key, as the caller may read it",
    )
    def get(self, request: Request, user_id: str, key: str) -> Response:
        query = _query(GroupQuerySerializer, request)
        entry = selectors.memory_by_key(
            caller=request_caller(request),
            user_id=user_id,
            key=key,
            group_ids=query.get("groupId"),
            include_superseded=query["includeSuperseded"],
        )
        return Response(MemoryEntryOutputSerializer(entry).data)


class MemoryCountView(MemoryView):
    @extend_schema(
        parameters=[GroupQuerySerializer],
        responses=CountOutputSerializer,
        summary="How many of a user's memories the caller may read",
    )
    def get(self, request: Request, user_id: str) -> Response:
        query = _query(GroupQuerySerializer, request)
        count = selectors.memory_count(
            caller=request_caller(request),
            user_id=user_id,
            group_ids=query.get("groupId"),
            include_superseded=query["includeSuperseded"],
        )
        return Response({"userId": user_id, "count": count})


class MemoryTtlRefreshView(MemoryView):
    @extend_schema(
        request=TtlRefreshInputSerializer,
        responses=TtlRefreshOutputSerializer,
        summary="Renew the TTL of entries the caller reads: validTo becomes now plus the TTL of their write",
    )
    def post(self, request: Request, user_id: str) -> Response:
        data = TtlRefreshInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        ids = [publicids.parse(publicids.ENTRY, given) for given in data.validated_data["ids"]]
        refreshed = services.memory_ttl_refresh(
            caller=request_caller(request),
            user_id=user_id,
            entry_ids=[i for i in ids if i is not None],
            group_ids=data.validated_data["groupIds"],
        )
        return Response({"userId": user_id, "refreshed": refreshed})


@replica_door
class MemoryExportView(APIView):
    permission_classes = [IsAdminCaller]

    @extend_schema(responses=OpenApiTypes.OBJECT, summary="GDPR export of all of a user's data (admin)")
    def get(self, request: Request, user_id: str) -> Response:
        return Response(services.memory_export_user(caller=request_caller(request), user_id=user_id))


class MemoryEntryView(MemoryView):
    @extend_schema(
        parameters=[ENTRY_PARAM], responses={204: None}, summary="Delete one entry (an agent: only its own)"
    )
    def delete(self, request: Request, entry_id: int) -> Response:
        services.memory_delete(caller=request_caller(request), entry_id=entry_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemoryHistoryView(MemoryView):
    @extend_schema(
        parameters=[ENTRY_PARAM],
        responses=MemoryEventOutputSerializer(many=True),
        summary="The entry's change history",
    )
    def get(self, request: Request, entry_id: int) -> Response:
        events = selectors.memory_history(caller=request_caller(request), entry_id=entry_id, limit=1000)
        return Response(MemoryEventOutputSerializer(events, many=True).data)


@replica_door
class MemorySearchAllView(APIView):
    """Staff search across every user (viewer and admin)."""

    def get_permissions(self) -> Sequence[Any]:
        return [ReadAnyWriteAgentOrAdmin()]

    @extend_schema(
        parameters=[SearchAllQuerySerializer],
        responses=MemoryEntryOutputSerializer(many=True),
        summary="Search every user's memories by words (viewer and admin keys)",
    )
    def get(self, request: Request) -> Response:
        query = _query(SearchAllQuerySerializer, request)
        qs = selectors.memory_search_all_users(
            caller=request_caller(request), query=query["q"], category=query.get("category")
        )
        return _page(qs, query)


class PropertiesView(MemoryView):
    """Legacy ``/propertiesstore/properties/{userId}``: a flat map over the user's global entries."""

    @extend_schema(
        responses={200: OpenApiTypes.OBJECT, 204: None},
        summary="Legacy: the user's global entries as one flat map (EDDI's properties)",
    )
    def get(self, request: Request, user_id: str) -> Response:
        properties = selectors.properties_for_user(caller=request_caller(request), user_id=user_id)
        if not properties:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(properties)

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses=OpenApiTypes.OBJECT,
        summary="Legacy: merge a flat map into the user's global entries",
    )
    def post(self, request: Request, user_id: str) -> Response:
        if not isinstance(request.data, dict):
            raise BadRequest("The body is a JSON object of property names to values.")
        services.properties_merge(
            caller=request_caller(request),
            user_id=user_id,
            properties=request.data,
            turn_id=turn_id_of(request, None),
        )
        return Response(selectors.properties_for_user(caller=request_caller(request), user_id=user_id))

    @extend_schema(responses={204: None}, summary="Legacy: delete the user's global entries")
    def delete(self, request: Request, user_id: str) -> Response:
        services.properties_delete(caller=request_caller(request), user_id=user_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AgentDetailView(APIView):
    """``GET/PATCH /v1/agents/{id}``: the directory entry and its memory policy (admin)."""

    permission_classes = [IsAdminCaller]

    @staticmethod
    def _render(agent_id: str) -> dict[str, Any]:
        agent = agent_list().filter(id=agent_id).first()
        if agent is None:
            raise NotFound(f"No agent '{agent_id}'.")
        data = dict(AgentOutputSerializer(agent).data)
        data["memoryPolicy"] = memory_policy_serializer()(selectors.policy_values(agent_id=agent_id)).data
        return data

    @extend_schema(
        responses=AgentDetailOutputSerializer, summary="An agent's directory entry and memory policy"
    )
    def get(self, request: Request, agent_id: str) -> Response:
        return Response(self._render(agent_id))

    @extend_schema(
        request=inline_serializer(
            "AgentPatch",
            fields={
                "displayName": serializers.CharField(required=False),
                "capabilities": serializers.ListField(child=serializers.CharField(), required=False),
                "model": serializers.CharField(required=False),
                "status": serializers.ChoiceField(
                    choices=Agent.Status.choices,
                    required=False,
                    help_text="unavailable: the agent's keys still read, and every write is a 403",
                ),
                "memoryPolicy": memory_policy_serializer()(required=False, partial=True),
            },
        ),
        responses=AgentDetailOutputSerializer,
        summary="Change an agent's profile and memory policy (admin); what GET returned may be sent back",
        examples=[
            OpenApiExample(
                "Rename, and recall at most 20",
                value={"displayName": "Support bot", "memoryPolicy": {"maxRecallEntries": 20}},
                request_only=True,
            )
        ],
    )
    def patch(self, request: Request, agent_id: str) -> Response:
        body = request.data if isinstance(request.data, dict) else None
        if body is None:
            raise BadRequest("The body is a JSON object.")
        profile = AgentUpdateInputSerializer(
            data={k: v for k, v in body.items() if k != "memoryPolicy"}, partial=True
        )
        profile.is_valid(raise_exception=True)
        policy_changes: dict[str, Any] = {}
        if "memoryPolicy" in body:
            policy = memory_policy_serializer()(data=body["memoryPolicy"], partial=True)
            policy.is_valid(raise_exception=True)
            policy_changes = flatten_policy_changes(policy.validated_data)
        with transaction.atomic():
            if profile.validated_data:
                agent_services.agent_update(agent_id=agent_id, **profile.validated_data)
            if policy_changes:
                services.policy_update(agent_id=agent_id, **policy_changes)
        return Response(self._render(agent_id))
