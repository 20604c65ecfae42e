"""The agent directory (admin) and ``/v1/agents/me`` (agent keys). Views translate; services decide."""

from django.db import transaction
from django.db.models import QuerySet
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_view
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikeys import selectors, services
from apikeys.api.serializers import (
    AgentCreateInputSerializer,
    AgentOutputSerializer,
    AgentPublicOutputSerializer,
    ApiKeyCreatedOutputSerializer,
    ApiKeyCreateInputSerializer,
    ApiKeyOutputSerializer,
    GroupCreateInputSerializer,
    GroupMembersInputSerializer,
    GroupOutputSerializer,
)
from apikeys.filters import AgentFilter
from apikeys.models import Agent, AgentGroup, ApiKey
from apikeys.permissions import IsAdminCaller, IsAgentCaller, ReadAnyWriteAdmin, request_caller
from memoryplatform.errors import NotFound


class AgentMeView(APIView):
    permission_classes = [IsAgentCaller]

    @extend_schema(responses=AgentOutputSerializer, summary="The calling agent's directory entry")
    def get(self, request: Request) -> Response:
        agent = selectors.agent_list().get(id=request_caller(request).agent_id)
        return Response(AgentOutputSerializer(agent).data)


class AgentListCreateView(generics.ListAPIView):
    """The directory: every key lists it (agents find each other by status and capability); an admin key sees
    each agent whole, any other key only its public fields. Only admin keys add agents."""

    permission_classes = [ReadAnyWriteAdmin]
    serializer_class = AgentOutputSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = AgentFilter

    def _public(self) -> bool:
        if getattr(self, "swagger_fake_view", False):  # the schema documents the admin's view
            return False
        return not request_caller(self.request).is_admin

    def get_queryset(self) -> QuerySet[Agent]:
        return selectors.agent_directory() if self._public() else selectors.agent_list()

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:
        return AgentPublicOutputSerializer if self._public() else AgentOutputSerializer

    @extend_schema(
        summary="The agent directory, by status and capability: admin keys see agents whole; agent and "
        "viewer keys only id, displayName, capabilities, model, status and lastActiveAt"
    )
    def get(self, request: Request, *args: str, **kwargs: str) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        request=AgentCreateInputSerializer,
        responses={201: AgentOutputSerializer},
        summary="Add an agent to the directory (admin); then make its key: POST /v1/agents/{id}/keys",
        examples=[
            OpenApiExample(
                "A support agent",
                value={
                    "id": "support-bot",
                    "displayName": "Support bot",
                    "capabilities": ["answer_tickets", "refunds"],
                    "model": "gpt-4o-mini",
                    "groups": ["helpdesk"],
                },
                request_only=True,
            )
        ],
    )
    def post(self, request: Request) -> Response:
        data = AgentCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        agent = services.agent_create(
            agent_id=values["id"],
            display_name=values["displayName"],
            capabilities=values["capabilities"],
            model=values["model"],
            status=values["status"],
            group_ids=values["groups"],
        )
        return Response(AgentOutputSerializer(selectors.agent_list().get(id=agent.id)).data, status=201)


@extend_schema_view(get=extend_schema(summary="Every agent group, with its members (admin)"))
class GroupListCreateView(generics.ListAPIView):
    permission_classes = [IsAdminCaller]
    serializer_class = GroupOutputSerializer

    def get_queryset(self) -> QuerySet[AgentGroup]:
        return selectors.group_list()

    @extend_schema(
        request=GroupCreateInputSerializer,
        responses={201: GroupOutputSerializer},
        summary="Make a group, or add to it: its name and first members (admin)",
    )
    def post(self, request: Request) -> Response:
        data = GroupCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        with transaction.atomic():
            group = services.group_ensure(group_id=values["id"], name=values["name"])
            if values["members"]:
                services.group_add_members(group_id=group.id, agent_ids=values["members"])
        return Response(GroupOutputSerializer(selectors.group_list().get(id=group.id)).data, status=201)


class GroupMembersView(APIView):
    permission_classes = [IsAdminCaller]

    @staticmethod
    def _get(group_id: str) -> AgentGroup:
        group = selectors.group_list().filter(id=group_id).first()
        if group is None:
            raise NotFound(f"No group '{group_id}'.")
        return group

    @extend_schema(responses=GroupOutputSerializer, summary="A group and its members (admin)")
    def get(self, request: Request, group_id: str) -> Response:
        return Response(GroupOutputSerializer(self._get(group_id)).data)

    @extend_schema(
        request=GroupMembersInputSerializer,
        responses=GroupOutputSerializer,
        summary="Add agents to a group, keeping its members (admin)",
    )
    def post(self, request: Request, group_id: str) -> Response:
        data = GroupMembersInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.group_add_members(group_id=group_id, agent_ids=data.validated_data["agentIds"])
        return Response(GroupOutputSerializer(self._get(group_id)).data)


class GroupMemberDeleteView(APIView):
    permission_classes = [IsAdminCaller]

    @extend_schema(responses={204: None}, summary="Take an agent out of a group (admin)")
    def delete(self, request: Request, group_id: str, agent_id: str) -> Response:
        services.group_remove_member(group_id=group_id, agent_id=agent_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AgentKeysView(generics.ListAPIView):
    """An agent's keys: list them, or make one (an ``agent`` key for this agent). The same services as the
    admin and the ``createapikey`` / ``listapikeys`` commands."""

    permission_classes = [IsAdminCaller]
    serializer_class = ApiKeyOutputSerializer

    def get_queryset(self) -> QuerySet[ApiKey]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator calls without a path value
            return ApiKey.objects.none()
        return selectors.apikey_list(agent_id=self.kwargs["agent_id"])

    @extend_schema(summary="An agent's keys: prefixes, labels, expiry and last use (admin)")
    def get(self, request: Request, *args: str, **kwargs: str) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        request=ApiKeyCreateInputSerializer,
        responses={201: ApiKeyCreatedOutputSerializer},
        summary="Make a key for the agent; the raw key is in this answer only (admin)",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        data = ApiKeyCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        key, raw_key = services.apikey_create(
            role=ApiKey.Role.AGENT,
            agent_id=agent_id,
            label=data.validated_data["label"],
            expires_at=data.validated_data["expiresAt"],
            created_by=request_caller(request).user,
        )
        return Response({**ApiKeyOutputSerializer(key).data, "key": raw_key}, status=status.HTTP_201_CREATED)


class KeyRevokeView(APIView):
    permission_classes = [IsAdminCaller]

    @extend_schema(responses={204: None}, summary="Revoke a key by its prefix (admin); it gets 401 at once")
    def delete(self, request: Request, prefix: str) -> Response:
        services.apikey_revoke(prefix=prefix)
        return Response(status=status.HTTP_204_NO_CONTENT)
