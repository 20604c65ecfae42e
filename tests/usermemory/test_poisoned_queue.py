"""A text that kills the process embedding it (issue 44, finding 1): the next consumer is not killed too, the
text is parked with why, and the background process beside ``serve`` comes back when it dies.

The consumers here are real processes (``manage.py embed --follow``; ``manage.py dream_scheduler
--supervise``, what ``serve`` starts) on the test database, with a scripted embedding server that never
answers a request holding the poisoned text: the test kills the consumer while it waits on that answer, as
an abort in native code would, at the moment the server says the text arrived (its own signal, not a clock).
"""

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import override_settings

from memoryplatform.embeddings import get_embedder
from tests.embedding_server import Script, embedding_server
from tests.helpers import internal_id, url_of_the_test_database
from usermemory.models import EntryEmbedding, PendingEntryVector

U = "user-poison"
POISON = "POISON"
ROOT = Path(django_settings.BASE_DIR)
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def script() -> Iterator[Script]:
    """The scripted embedder, for this process (so no text is embedded in its request) and its children."""
    script = Script(vectors=defaultdict(lambda: [0.6, 0.8, 0.0]), hang_on=POISON)
    with embedding_server(script):
        get_embedder.cache_clear()
        try:
            remote = {
                "EMBEDDINGS_PROVIDER": "openai",
                "EMBEDDINGS_MODEL": "tiny",
                "EMBEDDINGS_URL": script.url,
            }
            with override_settings(**remote):
                yield script
        finally:
            get_embedder.cache_clear()


def _env(script: Script) -> dict[str, str]:
    env = {
        **os.environ,
        "DATABASE_URL": url_of_the_test_database(),
        "SECRET_KEY": "poison-test",
        "EMBEDDINGS_PROVIDER": "openai",
        "EMBEDDINGS_MODEL": "tiny",
        "EMBEDDINGS_URL": script.url,
        "EMBEDDINGS_TIMEOUT": "600",  # the poisoned request never ends: only the process's death does
        "EMBEDDINGS_LEASE_SECONDS": "1",
        "EMBEDDINGS_MAX_ATTEMPTS": "2",
        "EMBEDDINGS_POLL_SECONDS": "0.2",
        "EXTRACTION_INTERVAL": "0",
        "EMBEDDINGS_REEMBED_INTERVAL": "0",
    }
    return env


def _wait(what: str, condition, process: subprocess.Popen, log: Path, seconds: float = 90) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, f"the process ended while waiting for {what}:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"no {what} in {seconds:.0f} s:\n{log.read_text()}"
        time.sleep(0.1)


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("a") as out:
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)  # noqa: S603


def _kill_when_it_embeds_the_poison(script: Script, process: subprocess.Popen, log: Path) -> None:
    _wait("request with the poisoned text", script.hung.is_set, process, log)
    process.send_signal(signal.SIGKILL)  # as an abort in native code would end it
    process.wait(timeout=30)
    script.hung.clear()


def test_a_text_that_kills_its_consumers_is_parked_and_the_others_get_their_vectors(
    agent_a_api, put, script, tmp_path
):
    ids = [internal_id(put(agent_a_api, userId=U, key="poisoned", value=f"{POISON} text").json()["id"])]
    for key in ("city", "drink", "pet"):
        response = put(agent_a_api, userId=U, key=key, value=f"the {key} of the user")
        assert response.status_code == 201, response.content
        ids.append(internal_id(response.json()["id"]))
    poisoned, others = ids[0], ids[1:]
    env, log = _env(script), tmp_path / "embed.log"
    argv = [sys.executable, "manage.py", "embed", "--follow"]

    # Two consumers die on it: the first with its whole batch claimed, the second with the text alone (the
    # oldest suspect), its batch-mates still waiting.
    for _ in range(2):
        _kill_when_it_embeds_the_poison(script, _start(argv, env, log), log)
    assert PendingEntryVector.objects.get(entry_id=poisoned).attempts == 2
    assert [len(r["input"]) for r in script.requests] == [4, 1]

    # The third parks it, embeds the others one by one (suspects too), and lives on.
    third = _start(argv, env, log)
    try:
        _wait(
            "parked text and the others' vectors",
            lambda: (
                PendingEntryVector.objects.filter(parked_at__isnull=False).exists()
                and EntryEmbedding.objects.count() == len(others)
            ),
            third,
            log,
        )
        assert third.poll() is None
    finally:
        third.terminate()
        third.wait(timeout=30)
    row = PendingEntryVector.objects.get(entry_id=poisoned)
    assert row.parked_at is not None and "Claimed 2 times and never answered" in row.last_error
    assert f"Parked 1 queued {PendingEntryVector._meta.db_table}" in log.read_text()
    assert set(EntryEmbedding.objects.values_list("entry_id", flat=True)) == set(others)
    assert [len(r["input"]) for r in script.requests] == [4, 1, 1, 1, 1]

    # Written anew, the text is a new try: out of the parking, its claims forgotten.
    assert put(agent_a_api, userId=U, key="poisoned", value="a harmless text").status_code == 200
    row = PendingEntryVector.objects.get(entry_id=poisoned)
    assert (row.attempts, row.parked_at, row.last_error) == (0, None, "")


def _children(pid: int) -> set[int]:
    """The live processes whose parent is ``pid`` (Linux's /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


def test_the_background_process_beside_serve_is_started_again_when_it_dies(
    agent_a_api, put, script, tmp_path
):
    env, log = _env(script), tmp_path / "scheduler.log"
    script.hang_on = None
    argv = [sys.executable, "manage.py", "dream_scheduler", "--supervise", "--parent-pid", str(os.getpid())]
    supervisor = _start(argv, env, log)
    try:
        first = put(agent_a_api, userId=U, key="city", value="Porto").json()
        _wait(
            "vector from the first process",
            lambda: EntryEmbedding.objects.filter(entry_id=internal_id(first["id"])).exists(),
            supervisor,
            log,
        )
        (child,) = _children(supervisor.pid)
        os.kill(child, signal.SIGKILL)
        _wait("process started again", lambda: _children(supervisor.pid) - {child}, supervisor, log)
        second = put(agent_a_api, userId=U, key="drink", value="green tea").json()
        _wait(
            "vector from the process started again",
            lambda: EntryEmbedding.objects.filter(entry_id=internal_id(second["id"])).exists(),
            supervisor,
            log,
        )
        assert "ended with signal SIGKILL" in log.read_text()
        (restarted,) = _children(supervisor.pid)
    finally:
        supervisor.terminate()
        supervisor.wait(timeout=60)
    assert supervisor.returncode == 0, log.read_text()
    assert not Path(f"/proc/{restarted}").exists()  # stopped with it
