"""The client contract (``clients/scenario/contract.json``), run by the Python client against the live server:
every public call of the contract, in order, with the answers and refusals the scenario expects. The
TypeScript client runs the same file (``clients/typescript/test/contract.test.mjs``), so the two cannot
drift: a call one client lacks, or has beyond the contract, fails here or there."""

import inspect
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from memoryplatform_client import APIError, AsyncMemoryPlatform, MemoryPlatform

from apikeys.models import ApiKey
from tests.llm_server import Answer

SCENARIO = json.loads(
    (Path(__file__).resolve().parents[2] / "clients" / "scenario" / "contract.json").read_text()
)
TRANSPORT = {"send", "close"}  # how a client sends, not a call of the API


def public_calls(client_class: type) -> set[str]:
    return {
        name
        for name, member in inspect.getmembers(client_class, inspect.isfunction)
        if not name.startswith("_") and name not in TRANSPORT
    }


def test_the_contract_names_every_call_of_both_python_clients_and_no_other():
    contract = set(SCENARIO["contract"])
    stepped = {step["call"] for step in SCENARIO["steps"] if "call" in step}
    assert contract - stepped == set(), "calls of the contract that no step runs"
    assert stepped - contract == set(), "steps that call outside the contract"
    for client_class in (MemoryPlatform, AsyncMemoryPlatform):
        calls = public_calls(client_class)
        assert contract - calls == set(), f"{client_class.__name__} lacks calls of the contract"
        assert calls - contract == set(), f"{client_class.__name__} has calls outside the contract"


class Scenario:
    """The scenario's state: its clients by name, the answers saved, and the run's unique suffix."""

    def __init__(self, url: str, admin_key: str) -> None:
        self.url = url
        self.run = uuid.uuid4().hex[:8]
        self.saved: dict[str, Any] = {}
        self.clients: dict[str, MemoryPlatform] = {}
        self.open("admin", admin_key)

    def open(self, name: str, key: str) -> None:
        self.clients[name] = MemoryPlatform(self.url, key, max_retries=0)

    def resolve(self, value: Any) -> Any:
        """``{run}`` in strings, ``$name.field`` strings as the saved field's value, recursively."""
        if isinstance(value, str):
            if value.startswith("$"):
                name, *path = value[1:].split(".")
                found = self.saved[name]
                for field in path:
                    found = found[field]
                return found
            return value.replace("{run}", self.run)
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        if isinstance(value, dict):
            return {name: self.resolve(item) for name, item in value.items()}
        return value

    def call(self, step: dict[str, Any]) -> Any:
        client = self.clients[step["as"]]
        method = getattr(client, step["call"], None)
        if method is None:
            pytest.fail(f"the Python client lacks {step['call']}, which the scenario calls")
        answer = method(*self.resolve(step.get("args", [])), **self.resolve(step.get("options", {})))
        return list(answer) if isinstance(answer, Iterator) else answer

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


def matches(expected: Any, actual: Any) -> bool:
    """The scenario's partial match: an object's named fields (``{}`` only an empty object), a list item by
    item, anything else equal."""
    if isinstance(expected, dict):
        if not expected:
            return actual == {}
        return isinstance(actual, dict) and all(
            name in actual and matches(value, actual[name]) for name, value in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(matches(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual)


def lengths(expected: int | dict[str, int], actual: Any) -> list[tuple[int, int]]:
    if isinstance(expected, int):
        return [(expected, len(actual))]
    return [(number, len(actual[field])) for field, number in expected.items()]


def check(scenario: Scenario, step: dict[str, Any], answer: Any) -> None:
    """Every expectation of the step, each with the step in its message."""
    said = f"step {json.dumps(step)} answered {json.dumps(answer, default=str)[:1500]}"
    if "expect" in step:
        assert matches(scenario.resolve(step["expect"]), answer), said
    if "expect_first" in step:
        assert answer and matches(scenario.resolve(step["expect_first"]), answer[0]), said
    for wanted, got in lengths(step.get("expect_length", {}), answer):
        assert got == wanted, said
    for wanted, got in lengths(step.get("expect_min_length", {}), answer):
        assert got >= wanted, said
    if {"expect_keys", "expect_keys_include", "expect_keys_exclude"} & set(step):
        keys = [entry["key"] for entry in answer]
        assert keys == step.get("expect_keys", keys), said
        assert set(step.get("expect_keys_include", [])) <= set(keys), said
        assert not set(step.get("expect_keys_exclude", [])) & set(keys), said
    for field, text in scenario.resolve(step.get("expect_match", {})).items():
        value = answer if field == "" else answer[field]
        assert text in (value if isinstance(value, str) else json.dumps(value)), said


def test_the_shared_scenario_passes_through_the_python_client(
    openai_llm, server_url: str, key_for: Callable[..., str]
):
    openai_llm.answers = [Answer(content) for content in SCENARIO["llm"]["answers"]]
    scenario = Scenario(server_url, key_for(role=ApiKey.Role.ADMIN))
    try:
        for step in SCENARIO["steps"]:
            if "open" in step:
                scenario.open(step["open"], scenario.resolve(step["key"]))
                continue
            refusal = step.get("expect_error")
            if refusal is None:
                answer = scenario.call(step)
            else:
                with pytest.raises(APIError) as raised:
                    scenario.call(step)
                assert (raised.value.status, raised.value.code) == (refusal["status"], refusal["code"]), step
                continue
            check(scenario, step, answer)
            if "save" in step:
                scenario.saved[step["save"]] = answer
    finally:
        scenario.close()
