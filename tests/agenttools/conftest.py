from tests.agenttools.mcp_harness import connect, http_url, mcp_env, transport, wsgi_url  # noqa: F401 (fixtures)
