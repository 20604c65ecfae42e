"""System checks for configuration that is wrong but would otherwise fail late."""

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register


@register(Tags.security, deploy=True)
def check_metrics_exposure(app_configs: Any, **kwargs: Any) -> list[Warning]:
    if not settings.METRICS_TOKEN and any(
        ip not in {"127.0.0.1", "::1"} for ip in settings.METRICS_ALLOWED_IPS
    ):
        return [
            Warning(
                "/metrics is open to non-loopback addresses without a METRICS_TOKEN.",
                hint="Set METRICS_TOKEN and have Prometheus send it as a bearer token.",
                id="memoryplatform.W001",
            )
        ]
    return []


@register(Tags.database)
def check_database_vendor(app_configs: Any, **kwargs: Any) -> list[Error]:
    engine = settings.DATABASES["default"]["ENGINE"]
    if not engine.endswith(("sqlite3", "postgresql", "embedded_db")):
        return [
            Error(
                f"Unsupported database engine {engine!r}.",
                hint="DATABASE_URL: a postgres:// or sqlite:// URL, or unset for the embedded PostgreSQL.",
                id="memoryplatform.E001",
            )
        ]
    return []
