from agenttools.api import views
from memoryplatform.routing import api_path

urlpatterns = [
    api_path("v1/tools", views.ToolListView.as_view(), name="tool-list"),
    api_path("v1/tools/<name>/invoke", views.ToolInvokeView.as_view(), name="tool-invoke"),
]
