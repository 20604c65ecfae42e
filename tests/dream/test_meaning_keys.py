"""Contradictions by meaning only where keys carry meaning (issue 46): entries written over REST, `manage.py
dream` with the local embedder, the flags read back over REST. Every pair below reaches the default threshold
(0.96) on the local model when compared (bench.meaning_sets), so each test fails without its rule."""

import pytest

from dream.models import DreamRun, KeyVector
from tests.dream.test_commands import run_dream
from tests.dream.test_meaning import flags, put
from usermemory.keynames import key_carries_meaning, numbered_apart

UUID_A = "3f2a9c4e-1b7d-4e8a-9c3f-2a1b7d4e8a9c"
UUID_B = "8d4b2e1f-6a3c-4b9d-8e2f-1a6c3b9d8e2f"


@pytest.mark.parametrize(
    "key",
    [
        "1",
        "0042",
        "memories/1",
        "memories/10",
        "notes%2F2",
        UUID_A,
        UUID_A.replace("-", ""),
        f"memories/{UUID_B}",
        "m-7f3a",
        "k-09",
        "a1b2c3d4",
        "D1:3",
        "01HZX3K9QW8E7R6T5Y4U3I2O1P",
        "",
    ],
)
def test_numbers_ids_and_paths_to_them_carry_no_meaning(key):
    assert not key_carries_meaning(key)


@pytest.mark.parametrize(
    "key",
    ["city", "home_city", "memories/food", "profile/city", "user.profile.city", "phone2", "Città", "名前"],
)
def test_keys_with_a_word_carry_meaning(key):
    assert key_carries_meaning(key)


def test_keys_that_differ_only_in_their_numbers_are_apart():
    assert numbered_apart("phone_1", "phone_2") and numbered_apart("phone", "phone2")
    assert numbered_apart("mem_01HZX3K9QW8E7R6T5Y4U3I2O1P", "mem_01HZX3KB7N6M5L4K3J2H1G0F9D")
    assert not numbered_apart("city", "City") and not numbered_apart("home_city", "city")


def test_numbered_uuid_and_path_keys_never_form_a_meaning_set(agent_a, agent_a_api, dream_policy):
    """LangGraph's item keys: "I love pizza" under 1 and "I am a plumber" under 2 are two facts."""
    opaque = {
        "1": "I love pizza",
        "2": "I am a plumber",
        "memories/1": "My sister lives in Lyon",
        "memories/2": "I am allergic to cats",
        f"memories/{UUID_A}": "Works night shifts at a bakery",
        f"memories/{UUID_B}": "Has two cats named Miso and Tofu",
        "k-09": "Is learning Japanese",
        "k-10": "Lives near the harbour",
    }
    for key, value in opaque.items():
        put(agent_a_api, key, value)
    dream_policy(agent_a, prune_stale_after_days=0)

    run_dream("--no-progress")

    assert flags(agent_a_api) == dict.fromkeys(opaque, False)
    assert DreamRun.objects.get().details["meaning"]["pairCount"] == 0
    assert not KeyVector.objects.exists()  # not even embedded


def test_a_true_synonym_pair_still_forms_beside_opaque_keys(agent_a, agent_a_api, dream_policy):
    put(agent_a_api, "memories/1", "I live in Berlin")
    put(agent_a_api, "memories/2", "I am a nurse")
    put(agent_a_api, "home_city", "Munich")
    put(agent_a_api, "city_of_residence", "Hamburg")
    dream_policy(agent_a, prune_stale_after_days=0)

    run_dream("--no-progress")

    assert flags(agent_a_api) == {
        "memories/1": False,
        "memories/2": False,
        "home_city": True,
        "city_of_residence": True,
    }
    assert set(KeyVector.objects.values_list("key", flat=True)) == {"home_city", "city_of_residence"}


def test_numbered_items_and_keys_that_only_share_a_word_are_not_one_meaning(
    agent_a, agent_a_api, dream_policy
):
    """phone_1/phone_2 are two phones (0.962); open_ticket/ticket two tickets (0.969, under the threshold
    plus the shared-word margin); city/home_city still mean the same (0.981)."""
    for key, value in {
        "phone_1": "+49 30 1111 000",
        "phone_2": "+49 30 2222 000",
        "open_ticket": "#4411 printer jam",
        "ticket": "#3980 password reset",
        "city": "Hamburg",
        "home_city": "Berlin",
    }.items():
        put(agent_a_api, key, value)
    dream_policy(agent_a, prune_stale_after_days=0)

    run_dream("--no-progress")

    assert flags(agent_a_api) == {
        "phone_1": False,
        "phone_2": False,
        "open_ticket": False,
        "ticket": False,
        "city": True,
        "home_city": True,
    }


def test_the_conflict_page_preselects_no_action_and_a_form_without_one_changes_nothing(
    agent_a, agent_a_api, dream_policy, admin_client
):
    """A meaning set on the admin's conflict page: picking the value to keep and pressing Settle must not
    copy it over the other value unless staff chose that action."""
    from django.contrib.messages import get_messages

    from usermemory.models import MemoryEntry

    put(agent_a_api, "city", "Berlin")
    put(agent_a_api, "home_town", "Munich")
    dream_policy(agent_a, prune_stale_after_days=0)
    run_dream("--no-progress")
    url = "/admin/usermemory/memoryconflict/"
    page = admin_client.get(url).content.decode()
    assert 'data-keys="city home_town"' in page
    modes = [line for line in page.splitlines() if 'name="mode"' in line]
    assert len(modes) == 3 and not any("checked" in line for line in modes)

    city, home = MemoryEntry.objects.filter(key__in=["city", "home_town"]).order_by("key")
    form = {"user_id": city.user_id, "keys": "city / home_town", "entry": [city.id, home.id], "keep": city.id}
    response = admin_client.post(url, form)
    assert response.status_code == 302
    assert [m.level_tag for m in get_messages(response.wsgi_request)] == ["error"]
    home.refresh_from_db()
    assert (home.value, home.conflicted) == ("Munich", True)

    admin_client.post(url, {**form, "mode": "update"})  # chosen: the other entry takes the kept value
    home.refresh_from_db()
    assert (home.value, home.conflicted) == ("Berlin", False)
