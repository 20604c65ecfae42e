"""``field__literal_icontains=text``: a case-insensitive substring match where ``%``, ``_`` and ``\\`` are
plain characters, run as ``ILIKE``."""

from typing import Any

from django.db.models import CharField, Lookup, TextField


def like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class LiteralIContains(Lookup):
    lookup_name = "literal_icontains"

    def get_db_prep_lookup(self, value: Any, connection: Any) -> Any:
        return ("%s", [f"%{like_escape(str(value))}%"])

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, tuple[Any, ...]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} ILIKE {rhs}", (*lhs_params, *rhs_params)


CharField.register_lookup(LiteralIContains)
TextField.register_lookup(LiteralIContains)
