from django.apps import AppConfig


class MemoryplatformConfig(AppConfig):
    name = "memoryplatform"
    verbose_name = "memoryplatform"

    def ready(self) -> None:
        from memoryplatform import checks  # noqa: F401  (registers the system checks)
