"""``/v1/events``: the change feed, every role (an agent key sees what it may read). ``/v1/webhooks``: webhook
subscriptions, admin keys only; a signing secret is shown once, in the answer that made it (the create's, a
rotation's)."""

from uuid import UUID

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikeys.permissions import IsAdminCaller, IsAuthenticatedCaller, request_caller
from events import selectors, services
from events.api.serializers import (
    EventPageOutputSerializer,
    EventQuerySerializer,
    WebhookCreatedOutputSerializer,
    WebhookCreateInputSerializer,
    WebhookOutputSerializer,
    WebhookRotatedOutputSerializer,
    WebhookRotateInputSerializer,
    WebhookUpdateInputSerializer,
)
from memoryplatform.errors import NotFound


def _uuid(text: str) -> UUID:
    """A subscription's id from the path: anything but a UUID names no subscription (404)."""
    try:
        return UUID(text)
    except ValueError as exc:
        raise NotFound("No such webhook.") from exc


class EventFeedView(APIView):
    permission_classes = [IsAuthenticatedCaller]

    @extend_schema(
        parameters=[EventQuerySerializer],
        responses=EventPageOutputSerializer,
        summary="Memory events after a cursor, oldest first: an agent key those about entries it may read, "
        "viewer and admin keys all; a cursor never skips an event",
        tags=["events"],
    )
    def get(self, request: Request) -> Response:
        query = EventQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        page = selectors.event_feed(
            caller=request_caller(request),
            after=params.get("after"),
            types=params.get("types") or [],
            limit=params["limit"],
        )
        return Response(EventPageOutputSerializer({"results": page.events, "next": page.next}).data)


class WebhookListCreateView(APIView):
    permission_classes = [IsAdminCaller]

    @extend_schema(
        responses=WebhookOutputSerializer(many=True), summary="Webhook subscriptions", tags=["events"]
    )
    def get(self, request: Request) -> Response:
        subscriptions = selectors.webhook_list(caller=request_caller(request))
        return Response(WebhookOutputSerializer(subscriptions, many=True).data)

    @extend_schema(
        request=WebhookCreateInputSerializer,
        responses={201: WebhookCreatedOutputSerializer},
        summary="Subscribe a URL to the events an agent may read, from now on; the answer holds the signing "
        "secret, shown once",
        tags=["events"],
    )
    def post(self, request: Request) -> Response:
        data = WebhookCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        body = data.validated_data
        created = services.webhook_create(
            caller=request_caller(request),
            url=body["url"],
            agent_id=body["agentId"],
            event_types=body["eventTypes"],
            description=body["description"],
        )
        answer = WebhookCreatedOutputSerializer(created.subscription, context={"secret": created.secret})
        return Response(answer.data, status=status.HTTP_201_CREATED)


class WebhookDetailView(APIView):
    permission_classes = [IsAdminCaller]

    @extend_schema(responses=WebhookOutputSerializer, summary="One webhook subscription", tags=["events"])
    def get(self, request: Request, subscription_id: str) -> Response:
        subscription = selectors.webhook_get(
            caller=request_caller(request), subscription_id=_uuid(subscription_id)
        )
        return Response(WebhookOutputSerializer(subscription).data)

    @extend_schema(
        request=WebhookUpdateInputSerializer,
        responses=WebhookOutputSerializer,
        summary="Change a subscription; enabled: true again clears its failures and it resumes",
        tags=["events"],
    )
    def patch(self, request: Request, subscription_id: str) -> Response:
        data = WebhookUpdateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        body = data.validated_data
        subscription = services.webhook_update(
            caller=request_caller(request),
            subscription_id=_uuid(subscription_id),
            url=body.get("url"),
            event_types=body.get("eventTypes"),
            description=body.get("description"),
            enabled=body.get("enabled"),
        )
        return Response(WebhookOutputSerializer(subscription).data)

    @extend_schema(responses={204: None}, summary="Delete a subscription", tags=["events"])
    def delete(self, request: Request, subscription_id: str) -> Response:
        services.webhook_delete(caller=request_caller(request), subscription_id=_uuid(subscription_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookRotateSecretView(APIView):
    permission_classes = [IsAdminCaller]

    @extend_schema(
        request=WebhookRotateInputSerializer,
        responses=WebhookRotatedOutputSerializer,
        summary="A new signing secret, shown once; the previous one goes on signing beside it for "
        "previousSecretValidSeconds",
        tags=["events"],
    )
    def post(self, request: Request, subscription_id: str) -> Response:
        data = WebhookRotateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        rotated = services.webhook_rotate_secret(
            caller=request_caller(request),
            subscription_id=_uuid(subscription_id),
            previous_valid_seconds=data.validated_data["previousSecretValidSeconds"],
        )
        answer = WebhookRotatedOutputSerializer(rotated.subscription, context={"secret": rotated.secret})
        return Response(answer.data)
