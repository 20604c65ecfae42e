from django.apps import AppConfig


class AgenttoolsConfig(AppConfig):
    """The doors that speak an agent protocol: the LLM tools (``/v1/tools``) and the MCP server (``/mcp``,
    ``manage.py mcp``). They translate a tool's arguments and call the domain apps' services and selectors;
    no domain app imports them."""

    name = "agenttools"
    verbose_name = "Agent tools"
