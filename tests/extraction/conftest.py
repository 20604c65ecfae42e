"""Extraction fixtures: the scripted LLM (both protocols) and helpers to script its facts."""

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from tests.llm_server import Answer, LLMScript, llm_server

PRICES = {"test-model": [100.0, 100.0]}  # $100 per million tokens: 1,000 in and 200 out cost $0.12


@pytest.fixture(params=["openai", "anthropic"])
def llm(request: pytest.FixtureRequest) -> Iterator[LLMScript]:
    """The scripted LLM over each protocol, answers set by each test, and the LLM_* settings pointing at
    it."""
    script = LLMScript([])
    with llm_server(script):
        options = {
            "LLM_PROVIDER": request.param,
            "LLM_URL": script.url,
            "LLM_MODEL": "test-model",
            "LLM_PRICES": PRICES,
        }
        with override_settings(**options):
            yield script


@pytest.fixture
def openai_llm() -> Iterator[LLMScript]:
    """The scripted LLM over the OpenAI-compatible protocol only (for tests where the protocol is not the
    point)."""
    script = LLMScript([])
    with (
        llm_server(script),
        override_settings(
            LLM_PROVIDER="openai", LLM_URL=script.url, LLM_MODEL="test-model", LLM_PRICES=PRICES
        ),
    ):
        yield script


def fact(key: str, value: str, *, sources: list[int] | None = None, **more: Any) -> dict[str, Any]:
    return {
        "key": key,
        "value": value,
        "category": more.pop("category", "fact"),
        "confidence": more.pop("confidence", 0.9),
        "sources": sources if sources is not None else [0],
        **more,
    }


def facts(*items: dict[str, Any]) -> Answer:
    return Answer({"facts": list(items)})
