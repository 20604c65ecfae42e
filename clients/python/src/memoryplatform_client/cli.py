"""``memoryplatform-client mcp-config``: an MCP client's configuration for this platform, checked before it is
printed.

- ``--transport http`` (the default): the streamable HTTP server at ``<url>/mcp/``, the key in a header.
- ``--transport stdio``: ``manage.py mcp`` of a server checkout (``--checkout``), the key in the environment;
  it runs on the machine holding the platform (it talks to the database directly).
- ``--client`` picks the file's format: ``claude-code`` (``.mcp.json``, the default), ``cursor``
  (``.cursor/mcp.json``), ``vscode`` (``.vscode/mcp.json``, under ``servers``) or ``claude-desktop``
  (``claude_desktop_config.json``, stdio only).

Checks: the key has the platform's shape; for stdio, the checkout holds ``manage.py`` and ``.venv`` (and no
server is asked anything: stdio needs none, and ``--url`` is not used); for http, when the server at ``--url``
answers, it accepts the key. A failed check exits 1 with the reason; a server that
does not answer is a note on stderr, not an error (it may just not be running yet).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

# (where the file goes, the key its servers sit under, whether it takes HTTP servers)
CLIENTS: dict[str, tuple[str, str, bool]] = {
    "claude-code": (".mcp.json at the project's root", "mcpServers", True),
    "cursor": (".cursor/mcp.json in the project, or ~/.cursor/mcp.json", "mcpServers", True),
    "vscode": (".vscode/mcp.json in the workspace", "servers", True),
    "claude-desktop": (
        "claude_desktop_config.json (Settings > Developer > Edit Config)",
        "mcpServers",
        False,
    ),
}
KEY_SHAPE = re.compile(r"mp_[0-9a-f]{8}_[A-Za-z0-9_-]{20,}")


class ConfigError(Exception):
    """A check failed: the message says what and how to fix it."""


def mcp_config(
    *,
    url: str,
    key: str,
    transport: str = "http",
    name: str = "memoryplatform",
    checkout: str = ".",
    client: str = "claude-code",
) -> dict[str, Any]:
    """The configuration document for one client and transport (no checks: :func:`check`)."""
    if client not in CLIENTS:
        raise ValueError(f"Unknown client {client!r}: one of {', '.join(CLIENTS)}.")
    _, servers_key, takes_http = CLIENTS[client]
    if transport == "http":
        if not takes_http:
            raise ValueError(f"{client} runs MCP servers over stdio only: use --transport stdio.")
        server: dict[str, Any] = {
            "url": f"{url.rstrip('/')}/mcp/",
            "headers": {"Authorization": f"Bearer {key}"},
        }
        if client != "cursor":  # Cursor reads a server with a url as HTTP; the others are told
            server = {"type": "http", **server}
    elif transport == "stdio":
        root = Path(checkout).resolve()
        server = {
            "command": str(root / ".venv" / "bin" / "python"),
            "args": [str(root / "manage.py"), "mcp"],
            "env": {"MEMORYPLATFORM_API_KEY": key},
        }
        if client == "vscode":
            server = {"type": "stdio", **server}
    else:
        raise ValueError(f"Unknown transport {transport!r}: http or stdio.")
    return {servers_key: {name: server}}


def check(*, url: str, key: str, transport: str, checkout: str, timeout: float = 5.0) -> list[str]:
    """Raise :class:`ConfigError` for a configuration that cannot work; return notes on what was not
    checked."""
    if not KEY_SHAPE.fullmatch(key):
        raise ConfigError(
            "The key does not look like a platform key (mp_<8 hex digits>_<secret>). Make one with "
            "`manage.py createapikey --role agent --agent <id>`; it is printed once, on the last line."
        )
    if transport == "stdio":
        root = Path(checkout).resolve()
        if not (root / "manage.py").is_file():
            raise ConfigError(
                f"{root} is not a platform checkout (no manage.py): pass --checkout <its path>."
            )
        if not (root / ".venv" / "bin" / "python").is_file():
            raise ConfigError(f"{root} has no .venv/bin/python: run `make run` there once first.")
        return []  # stdio runs the checkout's manage.py: no server to ask (--url is not used)
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"--url must be an http:// or https:// URL, not {url!r}.")
    probe = f"{url.rstrip('/')}/v1/agents?limit=1"  # any key may list the directory
    request = urllib.request.Request(probe, headers={"Authorization": f"Bearer {key}"})  # noqa: S310 (http(s) only)
    try:
        with urllib.request.urlopen(request, timeout=timeout):  # noqa: S310 (http(s) only, checked above)
            return []
    except urllib.error.HTTPError as refused:
        if refused.code == 401:
            raise ConfigError(
                f"The server at {url} refused the key (401): revoked, expired or mistyped."
            ) from None
        raise ConfigError(f"The server at {url} answered {refused.code} to the key's check.") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return [f"Note: {url} did not answer ({reason}), so the key was not tried against it."]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memoryplatform-client")
    commands = parser.add_subparsers(dest="command", required=True)
    config = commands.add_parser("mcp-config", help="print an MCP client's configuration (JSON), checked")
    config.add_argument("--url", default="http://127.0.0.1:8000", help="the platform's base URL")
    config.add_argument("--key", required=True, help="the API key the MCP client acts with")
    config.add_argument("--transport", choices=["http", "stdio"], default="http")
    config.add_argument("--client", choices=list(CLIENTS), default="claude-code", help="the file's format")
    config.add_argument("--name", default="memoryplatform", help="the server's name in the configuration")
    config.add_argument("--checkout", default=".", help="stdio: the platform's checkout (manage.py, .venv)")
    args = parser.parse_args(argv)
    try:
        document = mcp_config(
            url=args.url,
            key=args.key,
            transport=args.transport,
            name=args.name,
            checkout=args.checkout,
            client=args.client,
        )
        notes = check(url=args.url, key=args.key, transport=args.transport, checkout=args.checkout)
    except (ValueError, ConfigError) as problem:
        sys.stderr.write(f"mcp-config: {problem}\n")
        return 1
    for note in notes:
        sys.stderr.write(note + "\n")
    sys.stderr.write(f"For {args.client}: put this in {CLIENTS[args.client][0]}.\n")
    json.dump(document, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
