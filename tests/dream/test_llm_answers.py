"""Dream and a terse or hostile LLM (issue 33, findings 4, 7 and 9), through `manage.py dream` against the
scripted LLM server: answers valid under the schema but not storable fail their own group only; summary
keys stay unique whatever the LLM answers; every LLM use has call caps per cycle and per user, whatever the
price; a group is sent at most once a cycle."""

from typing import Any

import pytest
from django.test import override_settings

from dream.models import DreamRun
from dream.records import MAX_RECORDED_FAILURES
from tests.dream.test_commands import run_dream
from tests.dream.test_summaries import BASE, U, _groups, _one_summary
from tests.factories import AgentFactory
from tests.helpers import internal_id
from tests.llm_server import Answer, LLMScript
from usermemory.models import MemoryEntry


def _summaries(llm: LLMScript, groups: dict[str, list[str]], key: str = "summary") -> None:
    llm.answers = [_one_summary(groups[c], key) for c in ("context", "fact", "preference")]


def test_every_summary_named_summary_gets_a_key_of_its_own(llm, agent_a, agent_a_api, dream_policy):
    groups = _groups(agent_a_api)
    dream_policy(agent_a, prune_stale_after_days=0, summarize_interactions=True, summarize_min_entries=3)
    _summaries(llm, groups)

    run_dream("--no-progress")  # on main: the third summary's fallback key clashes, and the cycle fails

    run = DreamRun.objects.get()
    assert (run.status, run.summaries_written, run.summarization_failures) == ("succeeded", 3, 0)
    keys = sorted(e["key"] for e in agent_a_api.get(f"{BASE}/{U}").json())
    assert len(keys) == len(set(keys)) == 3 and keys[0] == "summary"
    # Issue 44, finding 10 (c): the fallback key names its first source by the public id an agent reads, no
    # row number (and no run number).
    firsts = {groups[c][0] for c in ("fact", "preference")}
    assert {k.removeprefix("summary (dream ").removesuffix(")") for k in keys[1:]} == firsts
    rows = {str(internal_id(i)) for i in firsts} | {str(run.pk)}
    assert not any(row in k.split() or f"({row}." in k for k in keys for row in rows)


BAD = {
    "nul": {"key": "ctx", "value": "all of it\u0000"},
    "surrogate": {"key": "ctx", "value": "all of it \ud800"},
    "blank key": {"key": "   ", "value": "all of it"},
    "fallback-shaped key": {"key": "x (dream 4503599627370497)", "value": "all of it"},
    "old fallback-shaped key": {"key": "x (dream 1.2)", "value": "all of it"},
}


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD.keys())
def test_an_unstorable_answer_fails_its_group_and_the_cycle_goes_on(
    llm, bad, agent_a, agent_b, agent_a_api, dream_policy, memory
):
    groups = _groups(agent_a_api)
    memory(agent_a, "lang", "English", user="other")  # a contradiction, found before the summaries
    memory(agent_b, "lang", "German", user="other")
    dream_policy(agent_a, prune_stale_after_days=0, summarize_interactions=True, summarize_min_entries=3)
    first = {"summaries": [{**bad, "sources": [internal_id(i) for i in groups["context"]]}]}
    llm.answers = [
        Answer(first),
        _one_summary(groups["fact"], "facts"),
        _one_summary(groups["preference"], "p"),
    ]

    run_dream("--no-progress")  # on main: DataError, UnicodeEncodeError, or a key stored as ""

    run = DreamRun.objects.get()
    assert (run.status, run.summarization_failures, run.summaries_written) == ("succeeded", 1, 2)
    (failure,) = run.details["summaries"]["failures"]
    assert "refused" in failure["error"] and run.details["summaries"]["failureCount"] == 1
    # The other passes ran: contradictions (agent-a's "lang" disagrees), retention.
    assert MemoryEntry.objects.get(user_id="other", source_agent=agent_a).conflicted
    assert "toolCallsDeleted" in run.details
    keys = {e["key"] for e in agent_a_api.get(f"{BASE}/{U}").json()}
    assert keys == {"facts", "p", *(f"context/{n}" for n in range(4))}
    assert not MemoryEntry.objects.filter(key="").exists()


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_group_is_sent_once_a_cycle_whatever_number_of_policies_reach_it(
    llm, dry_run, agent_a, agent_b, agent_a_api, dream_policy
):
    _groups(agent_a_api)
    agent_c = AgentFactory(id="agent-c")
    for agent in (agent_a, agent_b, agent_c):
        dream_policy(
            agent,
            prune_stale_after_days=0,
            summarize_interactions=True,
            summarize_min_entries=3,
            cross_agent_maintenance=True,
        )
    llm.answers = [Answer("{not json")]

    run_dream("--no-progress", *(["--dry-run"] if dry_run else []))

    assert len(llm.requests) == 3  # on main: 9, each group once per policy
    assert DreamRun.objects.get().summarization_failures == 3


def test_summaries_stop_at_the_call_caps_whatever_the_price(
    llm, agent_a, agent_a_api, admin_api, dream_policy
):
    groups = _groups(agent_a_api)
    dream_policy(
        agent_a,
        prune_stale_after_days=0,
        summarize_interactions=True,
        summarize_min_entries=3,
        summarize_target_entries=2,
    )
    patch = {"memoryPolicy": {"dreamConfig": {"maxLlmCallsPerUser": 2, "maxCostPerRun": 0}}}
    config = admin_api.patch("/v1/agents/agent-a", patch, format="json").json()["memoryPolicy"]["dreamConfig"]
    assert config["maxLlmCallsPerUser"] == 2 and config["maxLlmCallsPerRun"] == 100
    _summaries(llm, groups, "s")

    with override_settings(LLM_MODEL="free-model", LLM_PRICES={}):  # priced nowhere: costs 0
        run_dream("--no-progress")

    run = DreamRun.objects.get()
    assert len(llm.requests) == 2 and run.summaries_written == 2
    assert run.details["llmCalls"] == {
        "calls": 2,
        "usersCalledFor": 1,
        "refusedByPerUserCap": 1,
        "stoppedByCallCap": [],
    }


def put(client: Any, user: str, key: str, value: str) -> None:
    response = client.put(BASE, {"userId": user, "key": key, "value": value}, format="json")
    assert response.status_code == 201, response.content


SIMILAR_KEYS = ["city", "town", "village", "region", "country", "district"]  # no shared word, no number


def _similar_keys(client: Any, users: list[str], n: int = 6) -> None:
    """``n`` keys per user, each with another value: at a threshold of 0.1 every pair means the same."""
    for user in users:
        for i, key in enumerate(SIMILAR_KEYS[:n]):
            put(client, user, key, f"value {i}")


@pytest.mark.parametrize(
    ("per_run", "per_user", "expected"),
    [(100, 4, 8), (6, 4, 6), (100, 0, 0)],
)
def test_confirmations_stop_at_the_call_caps_whatever_the_price(
    llm, per_run, per_user, expected, agent_a, agent_a_api, dream_policy
):
    _similar_keys(agent_a_api, ["u1", "u2"])  # 15 pairs per user
    dream_policy(
        agent_a,
        prune_stale_after_days=0,
        semantic_contradiction_threshold=0.1,
        confirm_contradictions_with_llm=True,
        max_llm_calls_per_run=per_run,
        max_llm_calls_per_user=per_user,
    )
    llm.answers = [Answer({"contradiction": True})]

    with override_settings(LLM_MODEL="free-model", LLM_PRICES={}):
        run_dream("--no-progress")

    run = DreamRun.objects.get()
    assert len(llm.requests) == expected  # on main: 30
    meaning = run.details["meaning"]
    assert meaning["pairCount"] == expected and meaning["notAskedByCap"] == 30 - expected


def test_a_run_keeps_the_first_few_failures_and_counts_them_all(llm, agent_a, agent_a_api, dream_policy):
    _similar_keys(agent_a_api, ["u1"])
    dream_policy(
        agent_a,
        prune_stale_after_days=0,
        semantic_contradiction_threshold=0.1,
        confirm_contradictions_with_llm=True,
        max_llm_calls_per_user=100,
    )
    llm.answers = [Answer(status=500)]

    with override_settings(LLM_MODEL="free-model", LLM_PRICES={}):
        run_dream("--no-progress")

    meaning = DreamRun.objects.get().details["meaning"]
    assert meaning["failureCount"] == 15 and len(meaning["failures"]) == MAX_RECORDED_FAILURES


DEEP = '{"summaries": ' + "[" * 1000 + "]" * 1000 + "}"  # 2 KB of JSON nested 1,000 levels deep
MALFORMED = {"nested 1,000 levels": DEEP, "NaN": '{"summaries": NaN}', "1e400": '{"contradiction": 1e400}'}


@pytest.mark.parametrize("answer", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_summary_answer_fails_its_group_and_the_cycle_goes_on(
    llm, answer, agent_a, agent_a_api, dream_policy
):
    groups = _groups(agent_a_api)
    dream_policy(agent_a, prune_stale_after_days=0, summarize_interactions=True, summarize_min_entries=3)
    llm.answers = [
        Answer(answer),
        _one_summary(groups["fact"], "facts"),
        _one_summary(groups["preference"], "p"),
    ]

    run_dream("--no-progress")  # on main (deep): RecursionError, and the whole cycle fails

    run = DreamRun.objects.get()
    assert (run.status, run.summarization_failures, run.summaries_written) == ("succeeded", 1, 2)
    (failure,) = run.details["summaries"]["failures"]
    assert "the model's answer" in failure["error"]
    assert "toolCallsDeleted" in run.details  # the passes after the summaries ran


@pytest.mark.parametrize("answer", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_confirmation_is_one_counted_failure(llm, answer, agent_a, agent_a_api, dream_policy):
    _similar_keys(agent_a_api, ["u1"], n=3)  # 3 pairs
    dream_policy(
        agent_a,
        prune_stale_after_days=0,
        semantic_contradiction_threshold=0.1,
        confirm_contradictions_with_llm=True,
    )
    llm.answers = [Answer(answer), Answer({"contradiction": True})]

    run_dream("--no-progress")  # on main (deep): RecursionError, and the whole cycle fails

    run = DreamRun.objects.get()
    meaning = run.details["meaning"]
    assert run.status == "succeeded" and len(llm.requests) == 3
    assert (meaning["failureCount"], meaning["pairCount"]) == (1, 2)
    assert meaning["llmCost"] == pytest.approx(0.36)  # the malformed answer was paid for, and counted
