"""Malformed answers of the model (issue 44, finding 6): JSON nested far deeper than any answer needs, and
numbers JSON does not have (``NaN``, ``Infinity``, ``1e400``), through the extract door (one 502 in the
envelope, recorded, nothing changed) and a background run (one counted failure, recorded; the run goes on
with the next conversation). Every other shape a model can send (issue 53, finding 3: a float where the
schema says integer, ``"sources": [0.0]``, was a 500 and aborted the background run) is the same. And the
provider's usage (finding 15): token counts that are not integers from
0 to 10^9 are a malformed answer charged at the call's most; a cost past its column is stored as the most
it holds."""

import json
import math

import pytest

from extraction.models import Extraction, ExtractionWatermark
from extraction.prompts import SYSTEM
from memoryplatform.llm import MAX_STORED_COST
from tests.extraction.conftest import fact, facts
from tests.extraction.test_api import extract
from tests.extraction.test_background import conversation, run, say
from tests.helpers import assert_envelope
from tests.llm_server import Answer
from usermemory.models import MemoryEntry


def _with_confidence(number: str) -> str:
    """An answer whose one fact has ``number`` (as written) for its confidence."""
    text = json.dumps({"facts": [fact("diet", "vegan", confidence=0.5)]})
    return text.replace("0.5", number)


MALFORMED = {
    # 2 KB of JSON nested 1,000 levels deep: json.loads raises RecursionError, not ValueError.
    "nested 1,000 levels": '{"facts": ' + "[" * 1000 + "]" * 1000 + "}",
    "nested 100 levels in a value": json.dumps(
        {"facts": [fact("diet", "vegan", userId=json.loads("[" * 100 + "]" * 100))]}
    ),
    "NaN": _with_confidence("NaN"),
    "Infinity": _with_confidence("Infinity"),
    "-Infinity": _with_confidence("-Infinity"),
    "1e400": _with_confidence("1e400"),
    # Shapes: JSON Schema 2020-12 counts 0.0 and 1e0 as integers; a source is a message's number.
    "a float source": json.dumps({"facts": [fact("diet", "vegan", sources=[0.0])]}),
    "a source in exponent form": '{"facts": ['
    + json.dumps(fact("diet", "vegan")).replace("[0]", "[1e0]")
    + "]}",
    "a boolean source": json.dumps({"facts": [fact("diet", "vegan", sources=[True])]}),
    "a source as text": json.dumps({"facts": [fact("diet", "vegan", sources=["0"])]}),
    "a boolean confidence": json.dumps({"facts": [fact("diet", "vegan", confidence=True)]}),
    "a number for a key": json.dumps({"facts": [fact("diet", "vegan") | {"key": 7}]}),
    "facts as an object": json.dumps({"facts": {"diet": "vegan"}}),
    "a fact as a list": json.dumps({"facts": [["diet", "vegan"]]}),
    "a list, not an object": json.dumps([fact("diet", "vegan")]),
    "a bare number": "0.0",
    "null": "null",
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_answer_is_a_502_recorded_and_nothing_changes(llm, agent_a, agent_a_api, case):
    llm.answers = [Answer(MALFORMED[case])]

    response = extract(agent_a_api)

    body = assert_envelope(response, 502, "upstream_failed")
    assert "nothing changed" in body["error"]
    assert not MemoryEntry.objects.exists()
    record = Extraction.objects.get()
    assert record.status == "failed" and record.error
    assert float(record.cost) == pytest.approx(0.12)  # the answer was paid for: counted with its cost


@pytest.mark.parametrize("case", ["a float source", "a boolean source", "facts as an object"])
def test_a_malformed_answer_to_a_dry_run_is_a_502_too(llm, agent_a, agent_a_api, case):
    llm.answers = [Answer(MALFORMED[case])]

    body = assert_envelope(extract(agent_a_api, dryRun=True), 502, "upstream_failed")

    assert "nothing changed" in body["error"]
    assert Extraction.objects.get().status == "failed"


@pytest.mark.parametrize("case", ["nested 1,000 levels", "NaN", "a float source"])
def test_a_malformed_answer_in_a_background_run_is_one_counted_failure(
    openai_llm, agent_a, admin_api, agent_a_api, set_policy, case
):
    set_policy(agent_a, extract_from_conversations=True)
    first, second = conversation(admin_api), conversation(admin_api)
    say(agent_a_api, first, "I am vegan.")
    say(agent_a_api, second, "I live in Lisbon.")
    openai_llm.answers = [Answer(MALFORMED[case]), facts(fact("home_city", "Lisbon"))]

    done = run("agent-a")["agents"]["agent-a"]  # on main: RecursionError or DataError, the command exits 1

    assert (done["failures"], done["extractions"], done["added"]) == (1, 1, 1)
    assert done["cost"] == pytest.approx(0.24)
    failed = Extraction.objects.get(status="failed")
    assert (failed.conversation_id, failed.trigger) == (first, "background") and failed.error
    assert ExtractionWatermark.objects.get(conversation_id=first).last_seq == 0  # read again next run
    assert ExtractionWatermark.objects.get(conversation_id=second).last_seq > 0
    assert list(MemoryEntry.objects.values_list("key", flat=True)) == ["home_city"]


USAGE = {
    "10^13 prompt tokens": (10**13, 200),
    "10^9 + 1 output tokens": (1000, 10**9 + 1),
    "negative prompt tokens": (-1000, 200),
    "negative output tokens": (1000, -(10**6)),
    "a string": ("1000", 200),
    "a fraction": (1000, 1.5),
    "a boolean": (True, 200),
    "an object": ({"n": 1}, 200),
}


@pytest.mark.parametrize("case", sorted(USAGE))
def test_a_usage_that_is_not_token_counts_is_a_502_charged_at_the_calls_most(llm, agent_a, agent_a_api, case):
    given_input, given_output = USAGE[case]
    llm.answers = [
        Answer({"facts": [fact("diet", "vegan")]}, input_tokens=given_input, output_tokens=given_output)
    ]

    response = extract(agent_a_api)  # on main: 10^13 overflows the cost column, a negative count... a 500

    body = assert_envelope(response, 502, "upstream_failed")
    assert "usage" in body["error"]
    assert not MemoryEntry.objects.exists()
    record = Extraction.objects.get()
    prompt = llm.requests[0]["messages"][-1]["content"]
    estimated = math.ceil((len(SYSTEM) + len(prompt)) / 4)
    most = (estimated + 1024) * 100 / 1_000_000  # $100 per million tokens; LLM_MAX_TOKENS out
    assert record.status == "failed" and float(record.cost) == pytest.approx(most, abs=1e-6)


def test_the_most_usage_allowed_is_stored_and_a_cost_past_its_column_is_its_most(
    llm, agent_a, agent_a_api, settings
):
    settings.LLM_BUDGET_PER_AGENT = 999_999  # the agent's LLM budget would refuse the second call
    llm.answers = [facts(fact("diet", "vegan"))]
    llm.answers[0].input_tokens = llm.answers[0].output_tokens = 10**9

    body = extract(agent_a_api).json()
    assert body["cost"] == pytest.approx(200_000)  # 2 * 10^9 tokens at $100 per million

    settings.LLM_PRICES = {"test-model": [1000.0, 1000.0]}  # $2,000,000: past what the column holds
    response = extract(agent_a_api)
    assert response.status_code == 200, response.content
    assert response.json()["cost"] == float(MAX_STORED_COST)
    assert [r.cost for r in Extraction.objects.order_by("id")] == [200_000, MAX_STORED_COST]
