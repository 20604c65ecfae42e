"""The JSON Schema validator of what comes from outside as JSON and is checked against a schema: a model's
answer (:mod:`memoryplatform.llm`) and an MCP tool's arguments (``agenttools``).

Draft 2020-12 says any number with a zero fractional part is an ``integer``: ``0.0`` passes, then indexes a
list or slices a query as a float, and fails far from the check. Here an ``integer`` is a JSON integer only
(``0``, never ``0.0``, ``1e0`` nor ``true``), as Python reads it: an ``int`` that is not a ``bool``."""

from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.protocols import Validator


def _is_integer(_checker: Any, instance: object) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


StrictValidator: type[Validator] = validators.extend(
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)
