from django.contrib import admin
from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from config.overview import overview_view
from memoryplatform import views
from memoryplatform.api import errors
from memoryplatform.logsafe import UNROUTED
from memoryplatform.routing import api_path

admin.site.site_header = "memoryplatform"
admin.site.site_title = "memoryplatform admin"
admin.site.index_title = "Agents, keys, memories and Dream"
# The app list beside every page takes a quarter of a 1366 px screen from the lists; the breadcrumbs and
# the index lead everywhere instead.
admin.site.enable_nav_sidebar = False

# Anything else outside the admin and static files is an unknown API path: JSON 404, even with DEBUG on, and
# for writes too (exempt from CSRF: it changes nothing, and an API client has no CSRF cookie). The log names
# no path of it: a path may hold a user id (memoryplatform.logsafe).
unknown_path = csrf_exempt(errors.handler404)
unknown_path.log_route = UNROUTED  # type: ignore[attr-defined]

urlpatterns = [
    path("", RedirectView.as_view(url="/api/docs/", permanent=False)),
    api_path("healthz", views.healthz, name="healthz"),
    api_path("readyz", views.readyz, name="readyz"),
    api_path("metrics", views.metrics, name="metrics"),
    path("admin/overview/", admin.site.admin_view(overview_view), name="admin-overview"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="api-redoc"),
    path("", include("apikeys.api.urls")),
    path("", include("extraction.api.urls")),  # before usermemory's: a user id may hold "/"
    path("", include("usermemory.api.urls")),
    path("", include("agenttools.api.urls")),
    path("", include("dream.api.urls")),
    path("", include("conversations.api.urls")),
    path("", include("activity.api.urls")),
    path("", include("events.api.urls")),
    re_path(r"^(?!admin/|static/).*$", unknown_path),
]

handler400 = errors.handler400
handler403 = errors.handler403
handler404 = errors.handler404
handler500 = errors.handler500
