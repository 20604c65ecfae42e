"""What the tests of ranked reads share (search by meaning, recall with ``q``, the tools, context): the role
matrix's entries and who sees which, the embedder taken down, and the fallback counter."""

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from django.test import override_settings
from prometheus_client import REGISTRY

from memoryplatform.embeddings import get_embedder

BASE = "/usermemorystore/memories"
U = "user-rank"
QUESTION = "what does the user eat?"

ENTRIES = {  # key: (writer, visibility, group, value)
    "food_a": ("a", "self", None, "loves spicy ramen"),
    "food_b": ("b", "self", None, "eats sushi daily"),
    "food_team": ("a", "group", "team", "team lunch: pizza"),
    "food_bteam": ("b", "group", "bteam", "eats tacos weekly"),
    "food_global": ("a", "global", None, "vegetarian diet"),
    "car_global": ("b", "global", None, "drives a Volvo"),
    "pet_a": ("a", "self", None, "has a cat"),
    "job_b": ("b", "self", None, "works as a nurse"),
}
SEEN = {
    "a": {"food_a", "food_team", "food_global", "car_global", "pet_a"},
    "b": {"food_b", "food_bteam", "food_global", "car_global", "job_b"},
    "c": {"food_team", "food_global", "car_global"},  # a member of team, who wrote nothing
}
LIMITS = [1, 2, 3, 5, 1000]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def embedder_down(provider: str = "openai") -> Iterator[None]:
    """The embedder down: ``openai`` at a port nobody listens on, or ``none`` (no embedder configured)."""
    down = {"EMBEDDINGS_PROVIDER": provider, "EMBEDDINGS_MODEL": "tiny", "EMBEDDINGS_TIMEOUT": 2}
    get_embedder.cache_clear()
    try:
        with override_settings(**down, EMBEDDINGS_URL=f"http://127.0.0.1:{closed_port()}"):
            yield
    finally:
        get_embedder.cache_clear()


def fallbacks(mode: str) -> float:
    return REGISTRY.get_sample_value("memory_search_fallbacks_total", {"mode": mode}) or 0.0
