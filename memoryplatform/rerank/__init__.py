"""The second stage of a ranked read: a cross-encoder that reads the query with each candidate and answers the
probability that the candidate is relevant, chosen by the ``RERANK_*`` settings.

``RERANK_PROVIDER``: ``none`` (the default: the first stage's calibrated score answers,
:mod:`memoryplatform.relevance`), ``http`` (the rerank protocol of TEI, Jina and Cohere:
:mod:`memoryplatform.rerank.http`), for a cross-encoder served where there is the compute for it, or ``llm``
(the LLM of ``LLM_*`` reads the question and the candidates, paid from the reading agent's LLM budget:
:mod:`memoryplatform.rerank.llm`). There is no
``local`` provider: no PyPI package ships a cross-encoder's weights inside its wheel (surveyed in session 11,
bench/RESULTS.md), and a model is never downloaded at run time. The first
``RERANK_DEPTH`` candidates of the first stage are reranked; the rest follow in the first stage's order, with
its scores. Every failure is a :class:`RerankerError`; a read then answers with the first stage alone and says
so (``X-Search-Fallback: unreranked``)."""

from functools import cache
from typing import Protocol

from django.conf import settings


class RerankerError(Exception):
    """A reranker could not score: unreachable, timed out, refused, or answered something unusable."""


class Reranker(Protocol):
    """Scores documents against a query: one probability of relevance in [0, 1] per document, in order.
    ``agent_id``: the agent reading, who pays for a call that costs (the ``llm`` reranker's)."""

    @property
    def model_id(self) -> str: ...

    def scores(self, query: str, documents: list[str], *, agent_id: str | None = None) -> list[float]: ...


PROVIDERS = ("none", "http", "llm")


@cache
def get_reranker() -> Reranker | None:
    """The process's reranker (``None`` for provider ``none``), built once from settings.

    Tests that change the ``RERANK_*`` settings call ``get_reranker.cache_clear()``."""
    return build_reranker()


def build_reranker() -> Reranker | None:
    """A reranker as the settings describe it (loading no model, calling no server); RerankerError when they
    are wrong (the system check memoryplatform.E011 says so at start)."""
    provider = settings.RERANK_PROVIDER
    if provider == "none":
        return None
    if not 1 <= settings.RERANK_DEPTH <= 200:
        raise RerankerError(f"RERANK_DEPTH must be between 1 and 200; got {settings.RERANK_DEPTH}.")
    if provider == "local":
        raise RerankerError(
            "RERANK_PROVIDER=local is not available: no PyPI package ships a cross-encoder's weights in its "
            "wheel, and models are never downloaded at run time. Serve one (TEI, Jina) and use http."
        )
    if provider == "http":
        from memoryplatform.rerank.http import HttpReranker

        return HttpReranker(
            url=settings.RERANK_URL,
            model=settings.RERANK_MODEL,
            api_key=settings.RERANK_API_KEY,
            timeout=settings.RERANK_TIMEOUT,
        )
    if provider == "llm":
        return _llm_reranker()
    raise RerankerError(f"RERANK_PROVIDER must be one of {', '.join(PROVIDERS)}; got {provider!r}.")


def _llm_reranker() -> Reranker:
    from memoryplatform.llm import LLMError, build_llm
    from memoryplatform.rerank.llm import LlmReranker

    try:
        llm = build_llm(timeout=settings.RERANK_TIMEOUT)
    except LLMError as exc:
        raise RerankerError(f"RERANK_PROVIDER=llm: {exc}") from exc
    if llm is None:
        raise RerankerError("RERANK_PROVIDER=llm needs an LLM: set LLM_PROVIDER and LLM_MODEL.")
    return LlmReranker(llm=llm)
