"""apikeys' hand-written statement: the key lookup, which reads a key, its agent and the agent's memory policy
in one round trip (the ORM's compilation of this join cost more than running it; ``bench/RESULTS.md``).

One function per statement, keyword arguments, ``%(name)s`` placeholders filled here, identifiers from the
models composed with ``psycopg.sql.Identifier``, and a typed result: each model's column values, in the
model's field order, as the database returned them (``memoryplatform.store.instances_from_rows`` makes the
instances)."""

from functools import cache
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import Model
from psycopg import sql

from apikeys.models import Agent, ApiKey


class ModelColumns(NamedTuple):
    model: type[Model]
    alias: str
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
        columns=tuple(str(f.column) for f in fields),
    )


@cache
def lookup_columns() -> tuple[ModelColumns, ModelColumns, ModelColumns]:
    """The key's, the agent's and the policy's columns (built on first use, when every app is loaded)."""
    policy_model = Agent._meta.get_field("memory_policy").related_model
    if not isinstance(policy_model, type):  # a reverse one-to-one names its model class
        raise TypeError("Agent.memory_policy does not name a model class")
    return _columns(ApiKey, "k"), _columns(Agent, "a"), _columns(policy_model, "p")


# The key, its agent and the agent's policy: {columns} are each table's concrete columns, in field order.
_LOOKUP = """SELECT {columns} FROM {key} k
LEFT JOIN {agent} a ON a.id = k.agent_id
LEFT JOIN {policy} p ON p.{policy_agent} = a.id
WHERE k.prefix = %(prefix)s"""


@cache
def _lookup_sql() -> sql.Composed:
    key, agent, policy = lookup_columns()
    return sql.SQL(_LOOKUP).format(
        columns=sql.SQL(", ").join(
            sql.Identifier(part.alias, column) for part in (key, agent, policy) for column in part.columns
        ),
        key=sql.Identifier(ApiKey._meta.db_table),
        agent=sql.Identifier(Agent._meta.db_table),
        policy=sql.Identifier(policy.model._meta.db_table),
        policy_agent=sql.Identifier(Agent._meta.get_field("memory_policy").field.column),
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
