# The MCP harness's fixtures (a database and servers of this package's own), for test_mcp_tasks.py.
from tests.agenttools.mcp_harness import connect, http_url, mcp_env, transport  # noqa: F401 (fixtures)
