"""``memoryplatform-client mcp-config``: the JSON that Claude Desktop, Cursor and similar MCP clients take.

- ``--transport http`` (the default): the streamable HTTP server at ``<url>/mcp/``, the key in a header.
- ``--transport stdio``: ``manage.py mcp`` of a server checkout (``--checkout``), the key in the environment;
  it runs on the machine holding the platform (it talks to the database directly).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def mcp_config(
    *, url: str, key: str, transport: str = "http", name: str = "memoryplatform", checkout: str = "."
) -> dict[str, Any]:
    """The ``{"mcpServers": {name: ...}}`` object for one transport."""
    if transport == "http":
        server: dict[str, Any] = {
            "type": "http",
            "url": f"{url.rstrip('/')}/mcp/",
            "headers": {"Authorization": f"Bearer {key}"},
        }
    elif transport == "stdio":
        root = Path(checkout).resolve()
        server = {
            "command": str(root / ".venv" / "bin" / "python"),
            "args": [str(root / "manage.py"), "mcp"],
            "env": {"MEMORYPLATFORM_API_KEY": key},
        }
    else:
        raise ValueError(f"Unknown transport {transport!r}: http or stdio.")
    return {"mcpServers": {name: server}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memoryplatform-client")
    commands = parser.add_subparsers(dest="command", required=True)
    config = commands.add_parser("mcp-config", help="print the MCP client configuration (JSON)")
    config.add_argument("--url", default="http://127.0.0.1:8000", help="the platform's base URL")
    config.add_argument("--key", required=True, help="the API key the MCP client acts with")
    config.add_argument("--transport", choices=["http", "stdio"], default="http")
    config.add_argument("--name", default="memoryplatform", help="the server's name in the configuration")
    config.add_argument("--checkout", default=".", help="stdio: the platform's checkout (manage.py, .venv)")
    args = parser.parse_args(argv)
    document = mcp_config(
        url=args.url, key=args.key, transport=args.transport, name=args.name, checkout=args.checkout
    )
    json.dump(document, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
