from memoryplatform.routing import api_path
from usermemory.api import tool_views

urlpatterns = [
    api_path("v1/tools", tool_views.ToolListView.as_view(), name="tool-list"),
    api_path("v1/tools/<name>/invoke", tool_views.ToolInvokeView.as_view(), name="tool-invoke"),
]
