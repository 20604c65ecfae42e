from typing import Any

from django.core.management.base import BaseCommand

from apikeys.selectors import apikey_list


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value else "-"


class Command(BaseCommand):
    help = "List API keys: prefix, role, agent, label and dates. Secrets are never stored, so never shown."

    def handle(self, *args: Any, **options: Any) -> None:
        columns = ("PREFIX", "ROLE", "AGENT", "CREATED", "LAST USED", "EXPIRES", "REVOKED")
        widths = (10, 7, 20, 16, 16, 16, 16)
        self.stdout.write(" ".join(f"{c:{w}}" for c, w in zip(columns, widths, strict=True)) + " LABEL")
        for key in apikey_list():
            values = (
                key.prefix,
                key.role,
                key.agent_id or "-",
                _when(key.created_at),
                _when(key.last_used_at),
                _when(key.expires_at),
                _when(key.revoked_at),
            )
            self.stdout.write(
                " ".join(f"{v:{w}}" for v, w in zip(values, widths, strict=True)) + f" {key.label}"
            )
