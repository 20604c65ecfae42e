"""The LLM provider (memoryplatform.llm) against a real HTTP server speaking chat completions and Anthropic's
Messages API with scripted answers and usage; one opt-in test against a live endpoint (LLM_TEST_URL)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import override_settings

from memoryplatform.llm import LLMError, build_llm
from tests.llm_server import Answer, LLMScript, llm_server

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


def _llm(script: LLMScript, **more: object):  # type: ignore[no-untyped-def]
    options = {
        "LLM_PROVIDER": "openai",
        "LLM_URL": script.url,
        "LLM_MODEL": "test-model",
        "LLM_API_KEY": "sk-test",
        "LLM_PRICES": {"test-model": [2.0, 10.0]},
        **more,
    }
    with override_settings(**options):
        return build_llm()


def test_openai_chat_completions_cost_from_usage():
    with llm_server(LLMScript([Answer({"answer": "ok"}, input_tokens=1500, output_tokens=300)])) as script:
        llm = _llm(script)
        done = llm.complete_json(system="You answer.", prompt="Say ok.", schema=SCHEMA)
    assert done.data == {"answer": "ok"}
    assert (done.input_tokens, done.output_tokens) == (1500, 300)
    assert done.cost == pytest.approx((1500 * 2.0 + 300 * 10.0) / 1_000_000)
    (sent,) = script.requests
    assert sent["path"] == "/v1/chat/completions" and sent["model"] == "test-model"
    assert sent["headers"]["authorization"] == "Bearer sk-test"
    assert [m["role"] for m in sent["messages"]] == ["system", "user"]


def test_anthropic_messages():
    with llm_server(LLMScript([Answer({"answer": "hi"}, input_tokens=100, output_tokens=20)])) as script:
        llm = _llm(script, LLM_PROVIDER="anthropic", LLM_URL=script.url + "/v1")
        done = llm.complete_json(system="You answer.", prompt="Say hi.", schema=SCHEMA)
    assert done.data == {"answer": "hi"} and done.cost == pytest.approx((100 * 2 + 20 * 10) / 1_000_000)
    (sent,) = script.requests
    assert sent["path"] == "/v1/messages" and sent["system"] == "You answer."
    assert sent["headers"]["x-api-key"] == "sk-test" and sent["headers"]["anthropic-version"]


def test_a_fenced_answer_is_read_and_default_prices_apply():
    fenced = '```json\n{"answer": "fenced"}\n```'
    with llm_server(LLMScript([Answer(fenced, input_tokens=1_000_000, output_tokens=0)])) as script:
        llm = _llm(script, LLM_MODEL="gpt-4o-mini", LLM_PRICES={})
        done = llm.complete_json(system="s", prompt="p", schema=SCHEMA)
    assert done.data == {"answer": "fenced"} and done.cost == pytest.approx(0.15)


@pytest.mark.parametrize(
    ("answer", "paid"),
    [
        (Answer("this is not json"), True),
        (Answer({"answer": 42}), True),  # JSON, but not the schema's
        (Answer({"other": "x"}), True),
        (Answer(status=500), False),
        (Answer(status=429), False),
    ],
)
def test_every_failure_is_an_llm_error_with_what_it_cost(answer, paid):
    with llm_server(LLMScript([answer])) as script:
        llm = _llm(script)
        with pytest.raises(LLMError) as raised:
            llm.complete_json(system="s", prompt="p", schema=SCHEMA)
    assert (raised.value.cost > 0) is paid


def test_a_timeout_is_an_llm_error():
    with llm_server(LLMScript([Answer({"answer": "late"}, delay=2.0)])) as script:
        llm = _llm(script, LLM_TIMEOUT=0.2)
        with pytest.raises(LLMError, match="Timeout"):
            llm.complete_json(system="s", prompt="p", schema=SCHEMA)


def test_no_provider_is_no_llm_and_a_wrong_one_is_an_error():
    with override_settings(LLM_PROVIDER=""):
        assert build_llm() is None
    with override_settings(LLM_PROVIDER="bard", LLM_MODEL="m"), pytest.raises(LLMError, match="LLM_PROVIDER"):
        build_llm()
    with override_settings(LLM_PROVIDER="openai", LLM_MODEL=""), pytest.raises(LLMError, match="LLM_MODEL"):
        build_llm()


def test_the_estimate_counts_the_prompt():
    with llm_server(LLMScript([Answer()])) as script:
        llm = _llm(script)
    assert llm.estimate_cost(system="", prompt="x" * 4000) == pytest.approx(1000 * 2.0 / 1_000_000)


@pytest.mark.parametrize("prices", ['{"m": [-1, 4]}', '{"m": [1, Infinity]}', '{"m": [true, 4]}'])
def test_a_negative_or_endless_price_stops_the_start(prices):  # type: ignore[no-untyped-def]
    """A negative price would make every call raise what is left of a budget (issue 44, finding 15)."""
    env = {**os.environ, "SECRET_KEY": "test", "LLM_PRICES": prices}
    result = subprocess.run(  # noqa: S603 (our own interpreter, fixed arguments)
        [sys.executable, "-c", "import config.settings"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0 and "LLM_PRICES must be" in result.stderr


@pytest.mark.skipif(
    not os.environ.get("LLM_TEST_URL"), reason="opt-in: set LLM_TEST_URL (and LLM_TEST_MODEL)"
)
def test_a_live_openai_compatible_endpoint():
    """LLM_TEST_URL (e.g. http://127.0.0.1:11434 for Ollama), LLM_TEST_MODEL, LLM_TEST_API_KEY."""
    options = {
        "LLM_PROVIDER": os.environ.get("LLM_TEST_PROVIDER", "openai"),
        "LLM_URL": os.environ["LLM_TEST_URL"],
        "LLM_MODEL": os.environ.get("LLM_TEST_MODEL", "gpt-4o-mini"),
        "LLM_API_KEY": os.environ.get("LLM_TEST_API_KEY", ""),
    }
    with override_settings(**options):
        llm = build_llm()
    assert llm is not None
    done = llm.complete_json(
        system='Answer with a JSON object {"answer": "<one word>"} and nothing else.',
        prompt="What colour is the sky on a clear day?",
        schema=SCHEMA,
    )
    assert isinstance(done.data["answer"], str) and done.input_tokens > 0
