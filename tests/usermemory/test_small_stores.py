"""Recall on the stores most users have: a handful of facts, asked in other words (issue 45). Through REST,
with the local model (real vectors) and the platform's own defaults.

- The user's own name lifts nothing, and "she" or "he" reads as "the user": a question that names the user
  ranks and scores the user's facts exactly as the same question saying "the user" does, so values that name
  the user no longer outrank the fact that answers.
- Opaque keys (numbers, ``memories/1``, uuids) rank by value as descriptive keys do.
- The same fact and question in stores of 1, 8 and 100 entries: the score moves by at most 0.1 and the
  default recall by relevance (the best five) keeps it.
"""

from typing import Any

import pytest
from django.core.management import call_command

BASE = "/usermemorystore/memories"

# Ana's facts; three name her, as an agent's notes often do.
ANA = {
    "car": "Ana drives a red Fiat Panda",
    "colour": "Ana's favourite colour is green",
    "job": "works as a nurse on the night shift at the city hospital",
    "home_city": "Ana lives in Porto",
    "pet": "a grey cat called Moritz",
    "diet": "vegetarian, no mushrooms",
}
# Questions worded apart from the fact that answers them.
ASKED = {
    "what does ana do for work": "job",
    "where does ana live": "home_city",
    "does ana have any animals": "pet",
    "can I book ana a steakhouse": "diet",
}


def _write(client: Any, user: str, facts: dict[str, str]) -> None:
    entries = [{"userId": user, "key": key, "value": value} for key, value in facts.items()]
    for start in range(0, len(entries), 100):
        response = client.put(f"{BASE}/batch", {"entries": entries[start : start + 100]}, format="json")
        assert response.status_code == 200, response.content
    call_command("embed", "--drain")


@pytest.fixture(autouse=True)
def _room_for_a_hundred(agent_a, set_policy):  # type: ignore[no-untyped-def]
    set_policy(agent_a, max_writes_per_turn=1000, max_entries_per_user=1000)


def _search(client: Any, user: str, q: str) -> list[dict[str, Any]]:
    response = client.get(f"{BASE}/{user}/search", {"q": q, "mode": "hybrid", "minScore": 0})
    assert response.status_code == 200 and "X-Search-Fallback" not in response.headers, response.content
    return response.json()


@pytest.mark.django_db(transaction=True)
def test_the_users_own_name_lifts_nothing(agent_a_api):
    _write(agent_a_api, "ana", ANA)
    for question, key in ASKED.items():
        named = _search(agent_a_api, "ana", question)
        plain = _search(agent_a_api, "ana", question.replace("ana", "the user"))
        assert [(e["key"], e["score"]) for e in named] == [(e["key"], e["score"]) for e in plain], question
        assert named[0]["key"] == key, (question, [e["key"] for e in named])


@pytest.mark.django_db(transaction=True)
def test_a_name_is_only_the_users_own(agent_a_api):
    """Another user's name in a question is a word like any other: "porto" of Ana's home is not her name."""
    _write(agent_a_api, "bruno", {"friend": "his best friend is Ana from Porto", "job": "a carpenter"})
    found = _search(agent_a_api, "bruno", "who is ana")
    assert found[0]["key"] == "friend"


@pytest.mark.parametrize(
    "style",
    [
        lambda n, key: key,
        lambda n, key: str(n + 1),
        lambda n, key: f"memories/{n + 1}",
        lambda n, key: f"{n * 7919 + 4099:08x}",
    ],
)
@pytest.mark.django_db(transaction=True)
def test_opaque_keys_rank_by_value_as_descriptive_keys_do(agent_a_api, style):
    """Each question finds its fact first or second whatever the keys, and first for at least three of four
    (as with descriptive keys: the key is part of the text embedded, and an opaque one says nothing)."""
    keys = {fact: style(n, fact) for n, fact in enumerate(ANA)}
    _write(agent_a_api, "ana", {keys[fact]: value for fact, value in ANA.items()})
    ranks = []
    for question, fact in ASKED.items():
        ranked = [e["key"] for e in _search(agent_a_api, "ana", question)]
        ranks.append(ranked.index(keys[fact]))
    assert max(ranks) <= 1 and ranks.count(0) >= 3, ranks


FILLER_WORDS = [
    ("bike", "rides a blue road bike on Sundays"),
    ("tea", "drinks green tea without sugar"),
    ("sister", "has an older sister who teaches music"),
    ("phone", "uses an old Android phone"),
    ("music", "listens to jazz while cooking"),
    ("trip", "went hiking in the Alps last summer"),
    ("book", "is reading a novel about sailors"),
    ("garden", "grows tomatoes on the balcony"),
    ("sport", "plays tennis with colleagues on Thursdays"),
    ("film", "likes old black and white films"),
]


def _fillers(count: int) -> dict[str, str]:
    return {f"{key}_{n}": f"{text} ({n})" for n in range(count) for key, text in [FILLER_WORDS[n % 10]]}


@pytest.mark.django_db(transaction=True)
def test_a_facts_score_holds_from_one_entry_to_a_hundred_and_the_default_keeps_it_in_a_small_store(
    agent_a_api,
):
    """The score moves by at most 0.1 from 1 to 100 entries; the default recall by relevance (the best five,
    no cut) keeps it in the small stores; among a hundred it keeps it when the question shares its word."""
    home = {"home_city": "Hamburg"}
    scores: dict[str, list[float]] = {"where does the user live": [], "which city is home to the user": []}
    for size in (1, 8, 100):
        user = f"store-{size}"
        _write(agent_a_api, user, home | _fillers(size - 1))
        for question, seen in scores.items():
            kept = agent_a_api.get(f"{BASE}/{user}/visible", {"q": question})
            assert kept.status_code == 200, kept.content
            if size <= 8 or "home" in question:
                assert "home_city" in [e["key"] for e in kept.json()], (size, question)
            seen.append(
                next(e["score"] for e in _search(agent_a_api, user, question) if e["key"] == "home_city")
            )
    for question, seen in scores.items():
        assert max(seen) - min(seen) <= 0.1, (question, seen)
