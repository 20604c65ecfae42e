"""GDPR erasure and export cover Dream (issue 33, finding 3): after `DELETE
/usermemorystore/memories/{userId}` (or the admin's erase) no run record holds the user's entries
(proposals with their sources' keys and values, failures, pairs of their entries by meaning, an error naming
them), the admin's run page shows none of it, and a `pg_dump --data-only` of the database holds nothing of
the user's entries. The export lists what Dream holds."""

import os
import subprocess
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from dream.models import DreamRun
from memoryplatform.embedded_db.server import bin_dir
from tests.dream.test_commands import run_dream
from tests.helpers import internal_id
from tests.llm_server import Answer, LLMScript

BASE = "/usermemorystore/memories"
U = "erased-traveller"
KEEPER = "kept-traveller"


TOPICS = ["hotel", "flight", "train", "museum"]  # not numbers: trip.zqa1/trip.zqa2 are two items of a list


def write(client: Any, user: str, prefix: str) -> list[int]:
    """Eight context entries of ``user``, their keys and values marked with ``prefix``: four under
    descriptive keys (Dream's pairs by meaning), and four notes under numbered keys, related, which a summary
    may take (issue 56: never an entry in conflict, never a descriptive key). Returns the notes' ids."""
    ids = []
    facts = [(f"trip.{prefix}.{topic}", f"{prefix}-value-{n}") for n, topic in enumerate(TOPICS)]
    notes = [(f"trip/{prefix}/{n}", f"{prefix} trip note {n}") for n in range(4)]
    for key, value in facts + notes:
        body = {"userId": user, "key": key, "value": value, "category": "context"}
        response = client.put(BASE, body, format="json")
        assert response.status_code == 201, response.content
        ids.append(internal_id(response.json()["id"]))  # the scripted model sees row ids
    call_command("embed", "--drain")
    return ids[len(facts) :]


def summary(ids: list[int], value: str) -> Answer:
    return Answer({"summaries": [{"key": "trip", "value": value, "sources": ids}]})


@pytest.fixture
def dreamt(llm: LLMScript, agent_a, agent_b, agent_a_api, agent_b_api, dream_policy) -> dict[str, Any]:
    """A dry run that kept a proposal for each user (agent-b's `self` entries of U included in the group
    agent-a's cross-agent policy saw) and a failure for U, and an older failed run whose error names U."""
    keeper = write(agent_a_api, KEEPER, "keepme")
    mine_a = write(agent_a_api, U, "zqa")
    write(agent_b_api, U, "zqb")
    dream_policy(
        agent_a,
        prune_stale_after_days=0,
        summarize_interactions=True,
        summarize_min_entries=3,
        summarize_target_entries=2,
        cross_agent_maintenance=True,
        semantic_contradiction_threshold=0.5,  # every pair of a user's keys means the same
    )
    # Groups by user, label, owner: U's of agent-a, U's of agent-b, the keeper's.
    llm.answers = [summary(mine_a, "zqs summary"), Answer("{not json"), summary(keeper, "keepme summary")]
    DreamRun.objects.create(
        status=DreamRun.Status.FAILED,
        started_at="2025-01-01T00:00Z",
        heartbeat_at="2025-01-01T00:00Z",
        error=f"IntegrityError: duplicate key value; DETAIL: Key (user_id, key)=({U}, summary (dream 1.1))",
    )
    run_dream("--no-progress", "--dry-run")
    run = DreamRun.objects.get(dry_run=True)
    assert run.summarization_failures == 1 and len(run.details["summaries"]["proposals"]) == 2
    return {"run": run}


@pytest.fixture
def staff_client(client):  # type: ignore[no-untyped-def]
    client.force_login(User.objects.create_superuser("boss", "boss@example.com", "pw-for-tests-only"))
    return client


def pg_dump() -> str:
    """The test database's data, dumped by the embedded wheel's pg_dump (which reads older servers too)."""
    db = connection.settings_dict
    command = [str(bin_dir() / "pg_dump"), "--data-only", "--no-owner", "--dbname", db["NAME"]]
    command += [
        "--host",
        db["HOST"] or "localhost",
        "--port",
        str(db["PORT"] or 5432),
        "--username",
        db["USER"],
    ]
    env = {**os.environ, "PGPASSWORD": db["PASSWORD"] or ""}
    return subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout  # noqa: S603


@pytest.mark.django_db(transaction=True)
def test_after_an_erasure_a_dump_of_the_database_holds_nothing_of_the_users_entries(
    dreamt, admin_api, staff_client
):
    page_url = reverse("admin:dream_dreamrun_change", args=[dreamt["run"].pk])
    before = pg_dump()
    assert "zqa-value-0" in before and "zqb-value-0" in before and "zqs summary" in before  # the control
    assert "zqa trip note 0" in staff_client.get(page_url).content.decode()  # the proposal's source

    erased = admin_api.delete(f"{BASE}/{U}").json()

    assert erased["dream"] == {
        "runsScrubbed": 2,
        "proposalsRemoved": 1,
        "failuresRemoved": 1,
        "pairsRemoved": 28,
        "keyVectorsRemoved": 8,  # the vectors of U's 8 keys, which no other user holds (the dump below)
    }
    after = pg_dump()
    assert "zqa" not in after and "zqb" not in after and "zqs" not in after
    # The lines naming the user are the `erased` history event the erasure leaves (no key, no value) and its
    # `user.erased` event for subscribers (events/, the user's id only).
    naming = sorted(line for line in after.splitlines() if U in line)
    assert len(naming) == 2, naming
    assert sum("\terased\t" in line for line in naming) == 1
    assert sum("\tuser.erased\t" in line for line in naming) == 1
    assert "keepme-value-0" in after and "keepme summary" in after  # another user's records stay
    page = staff_client.get(page_url).content.decode()
    assert U not in page and "zqa" not in page and "keepme summary" in page
    run = DreamRun.objects.get(dry_run=True)
    # U's 8 entries made 28 pairs by meaning (keys alike, values not); the keeper's 6 stay.
    assert run.details["erased"] == {"proposals": 1, "failures": 1, "pairs": 28}
    assert len(run.details["meaning"]["pairs"]) == 6
    failed = DreamRun.objects.get(status=DreamRun.Status.FAILED)
    assert failed.error.startswith("IntegrityError: ") and U not in failed.error


def test_the_export_lists_what_dream_holds_and_the_admins_erase_removes_it(dreamt, admin_api, admin_client):
    export = admin_api.get(f"{BASE}/{U}/export").json()

    runs = {r["runId"]: r for r in export["dream"]["runs"]}
    dry = runs[dreamt["run"].pk]
    (proposal,) = dry["proposals"]
    assert proposal["userId"] == U and proposal["summaries"][0]["value"] == "zqs summary"
    assert {s["value"] for s in proposal["sources"].values()} == {f"zqa trip note {n}" for n in range(4)}
    assert dry["failures"][0]["userId"] == U
    assert any(r["error"] and U in r["error"] for r in runs.values())
    assert (
        admin_api.get(f"{BASE}/{KEEPER}/export").json()["dream"]["runs"][0]["proposals"][0]["userId"]
        == KEEPER
    )

    page = admin_client.post("/admin/usermemory/userdatarequest/", {"user_id": U, "confirmation": "CONFIRM"})

    assert page.status_code == 200 and '"proposalsRemoved": 1' in page.context["report"]
    assert admin_api.get(f"{BASE}/{U}/export").json()["dream"] == {"runs": []}
    assert U not in str(DreamRun.objects.values_list("details", "error"))
