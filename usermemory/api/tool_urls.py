from django.urls import path

from usermemory.api import tool_views

urlpatterns = [
    path("v1/tools", tool_views.ToolListView.as_view(), name="tool-list"),
    path("v1/tools/<str:name>/invoke", tool_views.ToolInvokeView.as_view(), name="tool-invoke"),
]
