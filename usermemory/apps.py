from django.apps import AppConfig


class UsermemoryConfig(AppConfig):
    name = "usermemory"
    verbose_name = "User memory"
