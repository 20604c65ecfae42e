from activity.api import views
from memoryplatform.routing import api_path

urlpatterns = [
    api_path("v1/activity/tool-calls", views.ToolCallsView.as_view(), name="tool-calls"),
    api_path("v1/tasks", views.TaskListCreateView.as_view(), name="task-list"),
    api_path("v1/tasks/<task:task_id>", views.TaskDetailView.as_view(), name="task-detail"),
]
