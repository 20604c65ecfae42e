"""The ``http`` reranker: the rerank protocol of Cohere, Jina and Hugging Face's TEI.

``POST {RERANK_URL}/rerank`` with ``query`` and the documents. Cohere and Jina read ``documents`` (and a
``model``) and answer ``{"results": [{"index", "relevance_score"}]}``; TEI reads ``texts`` and answers
``[{"index", "score"}]``. One body carries both names, and either answer is read. Cohere's and Jina's scores
are probabilities; TEI's are too unless it was started to answer raw scores, which this client does not ask
for. A score outside [0, 1], a missing index, or any failure is a RerankerError."""

from typing import Any

import httpx

from memoryplatform.httpjson import post_json
from memoryplatform.rerank import RerankerError


class HttpReranker:
    def __init__(self, *, url: str, model: str = "", api_key: str = "", timeout: float) -> None:
        if not url:
            raise RerankerError("RERANK_URL is required with RERANK_PROVIDER=http.")
        base = url.rstrip("/")
        self._endpoint = base if base.endswith("/rerank") else base + "/rerank"
        self._model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout, headers=headers)

    @property
    def model_id(self) -> str:
        return f"http/{self._model or self._endpoint}"

    def scores(self, query: str, documents: list[str]) -> list[float]:
        if not documents:
            return []
        body: dict[str, Any] = {"query": query, "documents": documents, "texts": documents}
        if self._model:
            body["model"] = self._model
        answer = post_json(self._client, self._endpoint, body, error=RerankerError)
        try:
            payload = answer.json()
            results = payload["results"] if isinstance(payload, dict) else payload
            by_index = {
                int(item["index"]): float(item.get("relevance_score", item.get("score"))) for item in results
            }
        except (ValueError, KeyError, TypeError) as exc:
            raise RerankerError(f"{self._endpoint}: not a rerank answer: {exc}") from exc
        if sorted(by_index) != list(range(len(documents))):
            raise RerankerError(
                f"{self._endpoint}: answered {len(by_index)} scores for {len(documents)} documents."
            )
        scores = [by_index[i] for i in range(len(documents))]
        if any(not 0.0 <= score <= 1.0 for score in scores):
            raise RerankerError(f"{self._endpoint}: a score outside [0, 1]; start TEI without raw scores.")
        return scores
