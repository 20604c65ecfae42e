from django.apps import AppConfig


class ApikeysConfig(AppConfig):
    name = "apikeys"
    verbose_name = "Agents and API keys"

    def ready(self) -> None:
        from apikeys import keycache, schema  # noqa: F401  (connection listener; OpenAPI authentication)
