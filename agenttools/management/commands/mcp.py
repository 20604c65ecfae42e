import os
from typing import Any

import anyio
from django.core.management.base import BaseCommand, CommandError

from apikeys.caller import Caller
from apikeys.services import KeyRefused, apikey_authenticate

KEY_VARIABLE = "MEMORYPLATFORM_API_KEY"


class Command(BaseCommand):
    help = (
        f"Serve the 8 MCP user-memory tools over stdio, as the API key in ${KEY_VARIABLE}. "
        "The key's role decides which tools are listed."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        raw_key = os.environ.get(KEY_VARIABLE, "").strip()
        if not raw_key:
            raise CommandError(
                f"{KEY_VARIABLE} is not set. Make a key with `manage.py createapikey --role viewer` "
                f"(or agent/admin) and pass it in the environment."
            )
        try:
            key = apikey_authenticate(raw_key=raw_key)
        except KeyRefused as exc:
            raise CommandError(f"{KEY_VARIABLE} was refused: {exc}") from None
        caller = Caller.for_key(key)
        from agenttools.mcp_server import serve_stdio  # the SDK loads only once there is a key to serve

        # stdout is the protocol's wire: anything human goes to stderr.
        self.stderr.write(f"memoryplatform MCP server on stdio as {caller.log_label()}")
        anyio.run(serve_stdio, caller, raw_key)
