from tests.agenttools.mcp_harness import connect, http_url, mcp_env, transport  # noqa: F401 (fixtures)
