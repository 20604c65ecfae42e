"""The ``http`` reranker: the rerank protocol of Cohere, Jina and Hugging Face's TEI.

``POST {RERANK_URL}/rerank`` with ``query`` and the documents. Cohere and Jina read ``documents`` (and a
``model``) and answer ``{"results": [{"index", "relevance_score"}]}``; TEI reads ``texts`` and answers
``[{"index", "score"}]``. One body carries both names, and either answer is read. Cohere's and Jina's scores
are probabilities; TEI's are too unless it was started to answer raw scores, which this client does not ask
for. A score outside [0, 1], a missing index, an answer that is not usable JSON (nested too deep,
``NaN``), or any other failure is a RerankerError."""

from typing import Any

from memoryplatform.httpjson import ProviderClient
from memoryplatform.rerank import RerankerError


class HttpReranker:
    def __init__(self, *, url: str, model: str = "", api_key: str = "", timeout: float) -> None:
        if not url:
            raise RerankerError("RERANK_URL is required with RERANK_PROVIDER=http.")
        base = url.rstrip("/")
        self._endpoint = base if base.endswith("/rerank") else base + "/rerank"
        self._model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = ProviderClient(timeout=timeout, headers=headers, error=RerankerError)

    @property
    def model_id(self) -> str:
        return f"http/{self._model or self._endpoint}"

    def scores(self, query: str, documents: list[str], *, agent_id: str | None = None) -> list[float]:
        if not documents:
            return []
        body: dict[str, Any] = {"query": query, "documents": documents, "texts": documents}
        if self._model:
            body["model"] = self._model
        payload = self._http.post_json(self._endpoint, body)
        return self._scores_of(payload, len(documents))

    def _scores_of(self, payload: Any, count: int) -> list[float]:
        """The ``count`` scores of a rerank answer (Cohere's and Jina's object or TEI's list), in the
        documents' order; RerankerError for any other shape."""
        results = payload.get("results") if isinstance(payload, dict) else payload
        if not isinstance(results, list) or len(results) != count:
            raise RerankerError(f"{self._endpoint}: not a rerank answer of {count} scores.")
        by_index: dict[int, float] = {}
        for item in results:
            index, score = _pair(item)
            if index is None or score is None:
                raise RerankerError(
                    f"{self._endpoint}: not a rerank answer: an item without index and score."
                )
            by_index[index] = score
        if sorted(by_index) != list(range(count)):
            raise RerankerError(f"{self._endpoint}: answered {len(by_index)} scores for {count} documents.")
        scores = [by_index[i] for i in range(count)]
        if any(not 0.0 <= score <= 1.0 for score in scores):
            raise RerankerError(f"{self._endpoint}: a score outside [0, 1]; start TEI without raw scores.")
        return scores


def _pair(item: Any) -> tuple[int | None, float | None]:
    """An answer item's index (a JSON integer) and score (a JSON number, ``true`` is not one), each ``None``
    when it is not one (a score too large for a float is not one either)."""
    if not isinstance(item, dict):
        return None, None
    index, score = item.get("index"), item.get("relevance_score", item.get("score"))
    if isinstance(index, bool) or not isinstance(index, int):
        index = None
    if isinstance(score, int) and not isinstance(score, bool) and abs(score) <= 1e6:
        score = float(score)
    return index, score if isinstance(score, float) else None
