from extraction.api import views
from memoryplatform.routing import api_path

urlpatterns = [
    api_path(
        "usermemorystore/memories/<text:user_id>/extract",
        views.MemoryExtractView.as_view(),
        name="memory-extract",
    ),
]
