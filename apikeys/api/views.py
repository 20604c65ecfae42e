"""The agent directory (admin) and ``/v1/agents/me`` (agent keys). Views translate; services decide."""

from django.db import transaction
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikeys import selectors, services
from apikeys.api.serializers import (
    AgentCreateInputSerializer,
    AgentOutputSerializer,
    GroupCreateInputSerializer,
    GroupMembersInputSerializer,
    GroupOutputSerializer,
)
from apikeys.filters import AgentFilter
from apikeys.permissions import IsAdminCaller, IsAgentCaller
from memoryplatform.api.errors import NotFound


class AgentMeView(APIView):
    permission_classes = [IsAgentCaller]

    @extend_schema(responses=AgentOutputSerializer, summary="The calling agent's directory entry")
    def get(self, request: Request) -> Response:
        agent = selectors.agent_list().get(id=request.user.agent_id)
        return Response(AgentOutputSerializer(agent).data)


class AgentListCreateView(generics.ListAPIView):
    permission_classes = [IsAdminCaller]
    serializer_class = AgentOutputSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = AgentFilter

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return selectors.agent_list()

    @extend_schema(request=AgentCreateInputSerializer, responses={201: AgentOutputSerializer})
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


class GroupListCreateView(generics.ListAPIView):
    permission_classes = [IsAdminCaller]
    serializer_class = GroupOutputSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return selectors.group_list()

    @extend_schema(request=GroupCreateInputSerializer, responses={201: GroupOutputSerializer})
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
    def _get(group_id: str):  # type: ignore[no-untyped-def]
        group = selectors.group_list().filter(id=group_id).first()
        if group is None:
            raise NotFound(f"No group '{group_id}'.")
        return group

    @extend_schema(responses=GroupOutputSerializer)
    def get(self, request: Request, group_id: str) -> Response:
        return Response(GroupOutputSerializer(self._get(group_id)).data)

    @extend_schema(request=GroupMembersInputSerializer, responses=GroupOutputSerializer)
    def post(self, request: Request, group_id: str) -> Response:
        data = GroupMembersInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.group_add_members(group_id=group_id, agent_ids=data.validated_data["agentIds"])
        return Response(GroupOutputSerializer(self._get(group_id)).data)


class GroupMemberDeleteView(APIView):
    permission_classes = [IsAdminCaller]

    @extend_schema(responses={204: None})
    def delete(self, request: Request, group_id: str, agent_id: str) -> Response:
        services.group_remove_member(group_id=group_id, agent_id=agent_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
