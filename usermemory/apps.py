from django.apps import AppConfig


class UsermemoryConfig(AppConfig):
    name = "usermemory"
    verbose_name = "User memory"

    def ready(self) -> None:
        from usermemory import lookups  # noqa: F401  (registers the literal substring lookup)
