"""apikeys' hand-written statement: the key lookup, which reads a key, its agent and the agent's memory policy
in one round trip (the ORM's compilation of this join cost more than running it; ``bench/RESULTS.md``).

One function per statement, keyword arguments, ``%(name)s`` placeholders filled here, identifiers from the
models, and a typed result: each model's column values by attribute name, in the model's field order, ready
for the documented ``Model.from_db``.
"""

from functools import cache
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import Model

from apikeys.models import Agent, ApiKey


class ModelColumns(NamedTuple):
    model: type[Model]
    alias: str
    attnames: tuple[str, ...]
    columns: tuple[str, ...]


class KeyLookupRow(NamedTuple):
    """The values of the key's columns, and of its agent's and the agent's policy's (``None`` when absent),
    in the order of :func:`lookup_columns`, as the database returned them (before ``from_db_value``)."""

    key: tuple[Any, ...]
    agent: tuple[Any, ...] | None
    policy: tuple[Any, ...] | None


def _columns(model: type[Model], alias: str) -> ModelColumns:
    fields = model._meta.concrete_fields
    return ModelColumns(
        model=model,
        alias=alias,
        attnames=tuple(f.attname for f in fields),
        columns=tuple(str(f.column) for f in fields),
    )


@cache
def lookup_columns() -> tuple[ModelColumns, ModelColumns, ModelColumns]:
    """The key's, the agent's and the policy's columns (built on first use, when every app is loaded)."""
    policy_model = Agent._meta.get_field("memory_policy").related_model
    assert isinstance(policy_model, type)  # noqa: S101  (a reverse one-to-one names its model class)
    return _columns(ApiKey, "k"), _columns(Agent, "a"), _columns(policy_model, "p")


@cache
def _lookup_sql() -> str:
    qn = connection.ops.quote_name
    key, agent, policy = lookup_columns()
    policy_fk = Agent._meta.get_field("memory_policy").field.column
    select = ", ".join(
        f"{part.alias}.{qn(column)}" for part in (key, agent, policy) for column in part.columns
    )
    return (
        f"SELECT {select} "  # noqa: S608 (identifiers from model metadata; the prefix is bound)
        f"FROM {qn(ApiKey._meta.db_table)} k "
        f"LEFT JOIN {qn(Agent._meta.db_table)} a ON a.{qn('id')} = k.{qn('agent_id')} "
        f"LEFT JOIN {qn(policy.model._meta.db_table)} p ON p.{qn(policy_fk)} = a.{qn('id')} "
        f"WHERE k.{qn('prefix')} = %(prefix)s"
    )


def key_lookup(*, prefix: str) -> KeyLookupRow | None:
    """The key with this prefix, its agent and the agent's memory policy (one query); ``None``: no key."""
    with connection.cursor() as cursor:
        cursor.execute(_lookup_sql(), {"prefix": prefix})
        row = cursor.fetchone()
    if row is None:
        return None
    key, agent, policy = lookup_columns()
    agent_at, policy_at = len(key.columns), len(key.columns) + len(agent.columns)
    agent_values = tuple(row[agent_at:policy_at])
    policy_values = tuple(row[policy_at:])
    return KeyLookupRow(
        key=tuple(row[:agent_at]),
        agent=agent_values if agent_values[0] is not None else None,
        policy=policy_values if policy_values[0] is not None else None,
    )
