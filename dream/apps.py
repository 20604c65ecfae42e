from django.apps import AppConfig


class DreamConfig(AppConfig):
    name = "dream"
    verbose_name = "Dream (consolidation)"
