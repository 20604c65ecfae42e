"""Django's WSGI entry point (``WSGI_APPLICATION``: ``runserver``). It serves Django alone: ``manage.py
serve`` runs ``config.asgi``, which adds the MCP server under ``/mcp`` and reads every body within the API's
limits before Django sees it."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

application = get_wsgi_application()
