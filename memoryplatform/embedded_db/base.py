"""Django's PostgreSQL backend, starting the embedded server (or joining it) before the first connection."""

from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.backends.postgresql import base

from memoryplatform.embedded_db import server


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        server.ensure_running(Path(settings.DATA_DIR))
        return super().get_new_connection(conn_params)
