from events.api import views
from memoryplatform.routing import api_path

urlpatterns = [
    api_path("v1/events", views.EventFeedView.as_view(), name="event-feed"),
    api_path("v1/webhooks", views.WebhookListCreateView.as_view(), name="webhook-list"),
    api_path("v1/webhooks/<subscription_id>", views.WebhookDetailView.as_view(), name="webhook-detail"),
    api_path(
        "v1/webhooks/<subscription_id>/rotate-secret",
        views.WebhookRotateSecretView.as_view(),
        name="webhook-rotate-secret",
    ),
]
