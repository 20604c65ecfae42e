"""Summaries that consolidate, never bury (issue 56), through the doors: entries written over REST by two
agents, embedded by the local model, the cycle run by `manage.py dream` (dry, then real) against the scripted
LLM, the results read back over REST."""

from typing import Any

from django.core.management import call_command

from dream.models import DreamRun
from tests.dream.test_commands import run_dream
from tests.helpers import internal_id
from tests.llm_server import Answer

BASE = "/usermemorystore/memories"
U = "ada"

# A store like the one a new user found buried: ten facts about one user that have nothing to do with each
# other, most under descriptive keys, and one of them contradicted by another agent's global fact.
UNRELATED = [
    ("home_city", "Leeds"),
    ("partner_name", "Sam"),
    ("memories/1", "Has a dog called Biscuit"),
    ("memories/2", "Takes metformin for diabetes every morning"),
    ("memories/3", "Works as a nurse at the children's hospital"),
    ("favourite_food", "ramen"),
    ("birthday", "12 March"),
    ("mem0:3f9a1c2e-77b0-4d1e-9a55-0c2b8f4e6d11", "Plays the cello in an amateur orchestra"),
    ("memories/4", "Is learning Japanese for a trip next spring"),
    ("allergy", "penicillin"),
]


def write(client: Any, facts: list[tuple[str, str]], **more: Any) -> dict[str, str]:
    ids = {}
    for key, value in facts:  # one turn each: the guardrail allows 10 writes a turn
        body = {"userId": U, "key": key, "value": value, **more}
        response = client.put(BASE, body, format="json", headers={"X-Turn-Id": f"{key}-turn"})
        assert response.status_code == 201, response.content
        ids[key] = response.json()["id"]
    call_command("embed", "--drain")
    return ids


def by_key(client: Any, key: str) -> dict[str, Any]:
    response = client.get(f"{BASE}/{U}/key/{key}")
    assert response.status_code == 200, response.content
    return response.json()


def test_unrelated_keyed_facts_stay_and_the_contradiction_is_found_by_the_dry_run_and_the_real_one(
    llm, agent_a, agent_a_api, agent_b_api, dream_policy
):
    write(agent_a_api, UNRELATED)
    write(agent_b_api, [("home_city", "York, UK")], visibility="global")
    # summaries on, every other setting at its default (at least 10 entries, at most 3 summaries)
    dream_policy(agent_a, summarize_interactions=True)
    llm.answers = [Answer({"summaries": [{"key": "summary_fact", "value": "everything", "sources": [1]}]})]

    dry, _ = run_dream("--dry-run", "--no-progress")
    real, _ = run_dream("--no-progress")

    assert "contradictions found: 1" in dry and "contradictions found: 1" in real
    dry_run, real_run = DreamRun.objects.order_by("id")
    assert dry_run.contradictions_found == real_run.contradictions_found == 1
    assert llm.requests == []  # no two of the ten are related: nothing to consolidate
    assert real_run.entries_summarized == 0
    home = by_key(agent_a_api, "home_city")
    assert (home["value"], home["conflicted"]) == ("Leeds", True)  # readable by its key, and flagged
    current = {
        e["key"]: e["value"] for e in agent_a_api.get(f"{BASE}/{U}").json() if e["visibility"] == "self"
    }
    assert current == dict(UNRELATED)
    found = agent_a_api.get(f"{BASE}/{U}/search", {"q": "does she have any pets?", "mode": "hybrid"}).json()
    assert found[0]["key"] == "memories/1"


def test_a_summary_takes_only_related_opaque_entries(llm, agent_a, agent_a_api, dream_policy):
    ids = write(
        agent_a_api,
        [
            ("memories/1", "Allergic to peanuts"),
            ("memories/2", "Has a severe peanut allergy"),
            ("memories/3", "Carries an EpiPen because of her peanut allergy"),
            ("memories/4", "Plays the cello"),
            ("memories/5", "Drives a blue Toyota"),
            ("peanut_allergy", "Peanuts give her anaphylaxis"),  # related, but addressed by its key
        ],
    )
    related = sorted(internal_id(ids[f"memories/{n}"]) for n in (1, 2, 3))
    dream_policy(agent_a, summarize_interactions=True, summarize_min_entries=3, summarize_target_entries=1)
    summary = {
        "key": "memories/allergy",
        "value": "Severe peanut allergy; carries an EpiPen",
        "sources": related,
    }
    llm.answers = [Answer({"summaries": [summary]})]

    run_dream("--no-progress")

    assert len(llm.requests) == 1  # one related set; the cello and the car are in none
    prompt = llm.requests[0]["messages"][-1]["content"]
    assert "These 3 entries" in prompt and "cello" not in prompt and "Toyota" not in prompt
    assert "anaphylaxis" not in prompt
    current = {e["key"]: e["value"] for e in agent_a_api.get(f"{BASE}/{U}").json()}
    assert current == {
        "memories/allergy": "Severe peanut allergy; carries an EpiPen",
        "memories/4": "Plays the cello",
        "memories/5": "Drives a blue Toyota",
        "peanut_allergy": "Peanuts give her anaphylaxis",
    }
