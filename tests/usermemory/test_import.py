"""``manage.py import``: JSON Lines of memories through the upsert service, each as the agent it names."""

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apikeys.models import Agent
from tests.factories import AgentFactory, AgentGroupFactory
from usermemory.models import EntryEmbedding, MemoryEntry, MemoryEvent

BASE = "/usermemorystore/memories"


def _file(tmp_path: Path, lines: list[Any], name: str = "memories.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def _import(path: Path, *options: str) -> str:
    out = StringIO()
    call_command("import", str(path), "--no-progress", *options, stdout=out, stderr=StringIO())
    return out.getvalue()


def _line(n: int, **fields: Any) -> dict[str, Any]:
    return {
        "userId": f"user-{n % 7}",
        "key": f"fact-{n}",
        "value": f"value {n}",
        "sourceAgentId": "agent-a",
    } | fields


def test_a_malformed_line_stops_the_import_after_the_lines_before_it_and_a_rerun_loses_nothing(
    tmp_path, agent_a, admin_api
):
    lines: list[Any] = [_line(n) for n in range(1, 501)]
    lines[316] = '{"userId": "user-1", "key": "fact-317", "value": '  # line 317: cut short
    path = _file(tmp_path, lines)

    with pytest.raises(CommandError, match=r"line 317 is malformed: not JSON"):
        _import(path)
    assert MemoryEntry.objects.count() == 316
    assert not MemoryEntry.objects.filter(key__in=[f"fact-{n}" for n in range(317, 501)]).exists()

    lines[316] = _line(317)
    out = _import(_file(tmp_path, lines))
    assert "500 lines read: 184 written (184 new, 0 updated), 316 skipped" in out
    assert MemoryEntry.objects.count() == 500
    assert MemoryEvent.objects.filter(action="created").count() == 500  # none written twice
    assert not MemoryEvent.objects.exclude(action="created").exists()
    counts = [admin_api.get(f"{BASE}/user-{u}/count").json()["count"] for u in range(7)]
    assert sum(counts) == 500

    out = _import(path.with_name("memories.jsonl"))
    assert "500 lines read: 0 written (0 new, 0 updated), 500 skipped" in out


def test_the_malformed_lines(tmp_path, agent_a):
    cases = {
        "[1, 2]": "not a JSON object",
        '{"userId": "u", "key": "k"}': "value: This field is required",
        '{"userId": "u", "key": "k", "value": null}': "value: This field may not be null",
        '{"userId": 7, "key": "k", "value": 1}': "userId: Not a valid string",
        '{"userId": "u", "key": "k", "value": 1, "visiblity": "global"}': "did you mean visibility",
        '{"userId": "u", "key": "k", "value": 1, "value": 2}': "not JSON",
        '{"userId": "u", "key": "k", "value": NaN}': "not JSON",
        '{"userId": "u", "key": "k", "value": 1, "groupIds": "team"}': "groupIds",
    }
    for number, (line, reason) in enumerate(cases.items()):
        path = _file(tmp_path, [_line(0, userId="u"), "", line], name=f"bad-{number}.jsonl")
        with pytest.raises(CommandError, match="line 3 is malformed") as raised:
            _import(path, "--agent", "agent-a")
        assert reason in str(raised.value), (line, str(raised.value))
    assert MemoryEntry.objects.count() == 1  # the first line of each file; written once, then skipped


def test_refused_lines_are_reported_with_their_number_and_the_import_goes_on(tmp_path, agent_a, set_policy):
    set_policy(agent_a, max_value_length=50, allowed_categories=["fact", "preference"])
    lines = [
        _line(1),
        _line(2, value="x" * 51),
        _line(3, category="hobby"),
        _line(4, key="k" * 300),
        _line(5, visibility="everyone"),
        _line(6, confidence=1.5),
        _line(7),
        _line(8, userId="nul\u0000user"),
        _line(9, value={"note": "nul\u0000inside"}),
    ]
    out = _import(_file(tmp_path, lines))
    assert "line 2: refused (bad_request): value is 51 characters; the limit (maxValueLength) is 50." in out
    assert "line 3: refused (bad_request): category 'hobby' is not allowed" in out
    assert "line 4: refused (bad_request): key: Ensure this field has no more than 255 characters." in out
    assert "line 5: refused (bad_request): visibility:" in out
    assert "line 6: refused (bad_request): confidence:" in out
    assert "line 8: refused (bad_request): userId: Null characters are not allowed." in out
    assert "line 9: refused (bad_request): value: a string contains a NUL character" in out
    assert (
        "9 lines read: 2 written (2 new, 0 updated), 0 skipped (already stored as given), 7 refused." in out
    )
    assert set(MemoryEntry.objects.values_list("key", flat=True)) == {"fact-1", "fact-7"}


def test_each_line_is_its_own_turn_and_a_changed_value_is_an_update(tmp_path, agent_a, set_policy):
    set_policy(agent_a, max_writes_per_turn=2)
    lines = [_line(n, userId="one-user") for n in range(1, 13)]
    assert "12 written (12 new" in _import(_file(tmp_path, lines))
    lines[4] = _line(5, userId="one-user", value="changed")
    out = _import(_file(tmp_path, lines))
    assert "12 lines read: 1 written (0 new, 1 updated), 11 skipped" in out
    assert MemoryEntry.objects.get(key="fact-5").value == "changed"
    assert MemoryEvent.objects.filter(action="updated").count() == 1


def test_a_second_line_on_the_same_upsert_key_is_refused_so_a_rerun_writes_nothing(
    tmp_path, agent_a, agent_b
):
    lines = [
        _line(1, userId="u", key="k", value="first"),
        _line(2, userId="u", key="k", value="second"),  # the same key, agent and (non-global) visibility
        _line(3, userId="u", key="k", value="b's own", sourceAgentId="agent-b"),  # another agent's key
        _line(4, userId="u", key="g", value="shared", visibility="global"),
        _line(5, userId="u", key="g", value="shared too", visibility="global", sourceAgentId="agent-b"),
    ]
    out = _import(_file(tmp_path, lines))
    assert (
        "line 2: refused (conflict): line 1 of this file already sets this user, key and agent 'agent-a'."
        in out
    )
    assert (
        "line 5: refused (conflict): line 4 of this file already sets this user and key (a global memory)."
        in out
    )
    assert "3 written" in out
    assert (
        "5 lines read: 0 written (0 new, 0 updated), 3 skipped (already stored as given), 2 refused."
        in _import(_file(tmp_path, lines))
    )
    assert MemoryEntry.objects.get(key="k", source_agent_id="agent-a").value == "first"


def test_agents_by_id_or_name_and_an_unknown_one_is_refused_not_created(tmp_path, agent_a, agent_b):
    lines = [
        _line(1, sourceAgentId="ghost"),
        _line(2, sourceAgentId="Agent B"),  # agent-b's display name
        {"userId": "u", "key": "no-agent", "value": 1},
    ]
    out = _import(_file(tmp_path, lines))
    assert "line 1: refused (not_found): no agent 'ghost' (by id or name): an import creates no agent." in out
    assert "line 3: refused (bad_request): names no agent (sourceAgentId), and --agent is not given." in out
    assert not Agent.objects.filter(id="ghost").exists()
    assert MemoryEntry.objects.get(key="fact-2").source_agent_id == "agent-b"

    out = _import(_file(tmp_path, lines), "--agent", "Agent A")
    assert "1 written" in out and "1 skipped" in out
    assert MemoryEntry.objects.get(key="no-agent").source_agent_id == "agent-a"


def test_an_unavailable_agent_writes_nothing(tmp_path, agent_a):
    Agent.objects.filter(id="agent-a").update(status=Agent.Status.UNAVAILABLE)
    out = _import(_file(tmp_path, [_line(1)]))
    assert "line 1: refused (forbidden): Agent 'agent-a' is unavailable" in out
    assert not MemoryEntry.objects.exists()


def test_visibility_rules_hold_through_the_import(tmp_path, agent_a, agent_b, agent_a_api, agent_b_api):
    AgentGroupFactory(id="b-team", members=[agent_b])
    lines = [
        _line(1, userId="u", key="b-private", sourceAgentId="agent-b"),  # self (the default), agent B's
        _line(
            2, userId="u", key="into-a-team", sourceAgentId="agent-b", visibility="group", groupIds=["team"]
        ),
        _line(3, userId="u", key="a-team", visibility="group"),  # agent A's groups: team
        _line(4, userId="u", key="for-all", sourceAgentId="agent-b", visibility="global"),
    ]
    out = _import(_file(tmp_path, lines))
    assert "line 2: refused (forbidden): Agent 'agent-b' is not a member of group(s): team." in out
    assert agent_a_api.get(f"{BASE}/u/key/b-private").status_code == 404
    assert agent_b_api.get(f"{BASE}/u/key/b-private").status_code == 200
    assert agent_a_api.get(f"{BASE}/u/key/a-team").json()["groupIds"] == ["team"]
    assert agent_b_api.get(f"{BASE}/u/key/a-team").status_code == 404
    assert agent_a_api.get(f"{BASE}/u/key/for-all").json()["sourceAgentId"] == "agent-b"


def test_a_dry_run_checks_every_line_and_writes_nothing(tmp_path, agent_a, set_policy):
    set_policy(agent_a, max_value_length=10)
    path = _file(tmp_path, [_line(1), _line(2, value="far too long a value"), _line(3)])
    out = _import(path, "--dry-run")
    assert "line 2: refused (bad_request): value is 20 characters" in out
    assert "Dry run, nothing was written. 3 lines read: 2 would be written (2 new, 0 updated)" in out
    assert not MemoryEntry.objects.exists() and not MemoryEvent.objects.exists()

    bad = _file(tmp_path, [_line(1), "not json"], name="bad.jsonl")
    with pytest.raises(CommandError, match="line 2 is malformed.*the lines before it are checked"):
        _import(bad, "--dry-run")
    assert not MemoryEntry.objects.exists()


MEM0 = [
    {
        "id": "f38b689d-6b24-45b7-bced-17fbb4d8bac7",
        "memory": "Travelling to Paris in May",
        "user_id": "alex",
        "agent_id": "agent-a",
        "hash": "62bc074f56d1f909f1b4c2b639f56f6a",
        "metadata": {"topic": "travel"},
        "categories": ["travel"],
        "created_at": "2024-02-25T23:57:00.108347-07:00",
        "updated_at": "2024-07-25T23:57:00.108367-07:00",
        "score": None,
    },
    {
        "id": "0b1d9a6e-2f3c-4a5b-8c7d-9e0f1a2b3c4d",
        "memory": "Is vegetarian",
        "user_id": "alex",
        "hash": "a1b2",
        "metadata": None,
        "created_at": "2024-03-01T10:00:00Z",
    },
]


def test_mem0s_get_all_records(tmp_path, agent_a, agent_b, agent_a_api, agent_b_api):
    path = _file(tmp_path, MEM0, name="mem0.jsonl")
    out = _import(path, "--format", "mem0", "--agent", "agent-b")
    assert "2 lines read: 2 written (2 new, 0 updated)" in out
    travel = agent_a_api.get(f"{BASE}/alex/key/mem0:f38b689d-6b24-45b7-bced-17fbb4d8bac7").json()
    assert (travel["value"], travel["visibility"], travel["sourceAgentId"]) == (
        "Travelling to Paris in May",
        "self",
        "agent-a",
    )
    assert (travel["category"], travel["source"]) == ("fact", "mem0")
    assert agent_b_api.get(f"{BASE}/alex/key/mem0:f38b689d-6b24-45b7-bced-17fbb4d8bac7").status_code == 404
    veg = agent_a_api.get(f"{BASE}/alex/key/mem0:0b1d9a6e-2f3c-4a5b-8c7d-9e0f1a2b3c4d").json()
    assert (veg["visibility"], veg["sourceAgentId"]) == ("global", "agent-b")

    history = agent_a_api.get(f"{BASE}/entry/{travel['id']}/history").json()
    assert history[0]["provenance"] == {
        "source": "import",
        "format": "mem0",
        "line": 1,
        "mem0": {
            name: MEM0[0][name]
            for name in ("id", "hash", "categories", "metadata", "created_at", "updated_at")
        },
    }
    assert "2 skipped" in _import(path, "--format", "mem0", "--agent", "agent-b")


def test_a_mem0_record_without_its_memory_is_malformed(tmp_path, agent_a):
    lines = [MEM0[0], {"id": "x", "user_id": "alex", "agent_id": "agent-a"}]
    with pytest.raises(CommandError, match="line 2 is malformed: memory: a mem0 memory's memory is required"):
        _import(_file(tmp_path, lines), "--format", "mem0")
    assert MemoryEntry.objects.count() == 1


def test_small_batches_commit_the_same(tmp_path, agent_a):
    AgentFactory(id="agent-z", display_name="Agent Z")
    lines = [_line(n, sourceAgentId="agent-z" if n % 2 else "agent-a") for n in range(1, 8)]
    assert "7 written" in _import(_file(tmp_path, lines), "--batch-size", "3")
    with pytest.raises(CommandError, match="--batch-size must be from 1"):
        _import(_file(tmp_path, lines), "--batch-size", "0")


def test_imported_entries_get_their_vectors_after_each_batch_commits(
    tmp_path, agent_a, django_capture_on_commit_callbacks
):
    lines = [_line(n, value=f"likes {food}") for n, food in enumerate(["ramen", "tea", "figs"], start=1)]
    path = _file(tmp_path, lines)
    with django_capture_on_commit_callbacks(execute=True):
        _import(path, "--dry-run")
    assert not EntryEmbedding.objects.exists()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        _import(path, "--batch-size", "2")
    assert not EntryEmbedding.objects.exists()  # nothing computed inside a batch's transaction
    for callback in callbacks:
        callback()
    assert EntryEmbedding.objects.count() == 3


def test_the_report_says_how_many_entries_wait_for_their_vectors(tmp_path, agent_a, settings):
    settings.EMBEDDINGS_INLINE_MAX_CHARS = 0  # the default: every vector from the consumer
    out = _import(_file(tmp_path, [_line(n) for n in range(3)]))
    assert "3 written" in out and "3 of the entries written wait for their vectors" in out
    call_command("embed", "--drain")
    out = _import(_file(tmp_path, [_line(n) for n in range(4)], name="more.jsonl"))
    assert "1 of the entries written wait for their vectors" in out  # the first three: skipped
