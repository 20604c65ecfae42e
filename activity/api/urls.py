from activity.api import views
from memoryplatform.routing import api_path

urlpatterns = [
    api_path("v1/activity/tool-calls", views.ToolCallsView.as_view(), name="tool-calls"),
]
