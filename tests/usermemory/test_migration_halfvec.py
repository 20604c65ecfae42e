"""Migrations usermemory 0020 and conversations 0005 convert the stored vectors to ``halfvec`` in place: a
vector written as float4 before them is kept, rounded to 16 bits, and search by meaning finds its entry
afterwards as before (issue 31)."""

from collections.abc import Iterator

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import override_settings

from memoryplatform.embeddings import get_embedder, jobs
from tests.embedding_server import Script, embedding_server

BEFORE = [("usermemory", "0021_group_unique_holds_user"), ("conversations", "0005_vector_queue")]
U = "user-halves"
QUESTION = "which pet does the user have?"
FACTS = {"pet: a cat called Miso": [0.1, -0.2, 1 / 3, 0.9], "car: a red Volvo estate": [0.9, 0.3, -0.1, 0.0]}
TYPES = """SELECT format_type(atttypid, atttypmod) FROM pg_attribute
    WHERE attrelid IN ('usermemory_entryembedding'::regclass, 'conversations_messageembedding'::regclass)
    AND attname = 'embedding'"""
STORED = "SELECT embedding::text FROM usermemory_entryembedding WHERE model = 'openai/halves'"


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets or executor.loader.graph.leaf_nodes())


def _column_types() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(TYPES)
        return {row[0] for row in cursor.fetchall()}


def _stored() -> list[list[float]]:
    """The stored vectors, as the database prints them, in order of their first component."""
    with connection.cursor() as cursor:
        cursor.execute(STORED)
        return sorted([float(x) for x in row[0].strip("[]").split(",")] for row in cursor.fetchall())


def _rounded(dtype: type[np.floating]) -> list[list[float]]:
    """The scripted vectors as float4 held them, then as ``dtype`` holds those."""
    return sorted([float(dtype(np.float32(x))) for x in vector] for vector in FACTS.values())


@pytest.fixture
def halves() -> Iterator[Script]:
    script = Script(vectors=FACTS | {QUESTION: [0.1, -0.2, 0.3, 0.9]})
    remote = {"EMBEDDINGS_PROVIDER": "openai", "EMBEDDINGS_MODEL": "halves", "EMBEDDINGS_DIMENSIONS": 0}
    get_embedder.cache_clear()
    with embedding_server(script), override_settings(**remote, EMBEDDINGS_URL=script.url):
        yield script
    get_embedder.cache_clear()


@pytest.mark.django_db(transaction=True)
def test_float4_vectors_are_converted_to_halves_in_place_and_still_found(
    agent_a_api, put, halves, monkeypatch
):
    for text in FACTS:  # written by today's doors (the code reads today's columns), embedded after, as before
        key, value = text.split(": ", 1)
        assert put(agent_a_api, userId=U, key=key, value=value).status_code == 201
    migrate(BEFORE)
    try:
        assert _column_types() == {"vector"}
        with monkeypatch.context() as before:  # the release before kept no record of its passes (0023)
            before.setattr(jobs, "sweep_done", lambda **_: None)
            before.setattr(jobs, "queue_parked_among", lambda **_: set())  # nor parked any text (0024)
            call_command("embed", "--missing", "--no-progress")  # written as the release before wrote them
        assert all(
            v == pytest.approx(w, rel=1e-7) for v, w in zip(_stored(), _rounded(np.float32), strict=True)
        )
    finally:
        migrate(None)
    assert _column_types() == {"halfvec"}
    assert all(v == pytest.approx(w, rel=1e-7) for v, w in zip(_stored(), _rounded(np.float16), strict=True))
    response = agent_a_api.get(f"/usermemorystore/memories/{U}/search", {"q": QUESTION, "mode": "semantic"})
    assert response.status_code == 200, response.content
    assert [e["key"] for e in response.json()] == ["pet", "car"]
