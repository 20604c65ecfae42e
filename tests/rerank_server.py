"""A real HTTP server speaking the rerank protocol of Cohere and Jina (``POST /rerank``: ``query`` and
``documents``, answering ``{"results": [{"index", "relevance_score"}]}``) or TEI's (a list of
``{"index", "score"}``), with scripted scores: a document holding a scripted word scores that word's score,
any other 0.01. ``fail_with`` makes every answer that HTTP status; ``raw`` makes every answer a 200 of these
bytes (a malformed body); ``trickle`` sends each answer's body a byte every that many seconds."""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.embedding_server import JsonHandler, serving


@dataclass
class RerankScript:
    scores: dict[str, float]
    tei: bool = False
    fail_with: int | None = None
    raw: bytes | None = None
    trickle: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def score(self, document: str) -> float:
        return max((s for word, s in self.scores.items() if word in document), default=0.01)


@contextmanager
def rerank_server(script: RerankScript) -> Iterator[RerankScript]:
    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            script.requests.append({"path": self.path, **body})
            if script.fail_with or self.path != "/rerank":
                self._answer(script.fail_with or 404, {"message": "scripted failure"})
                return
            if script.raw is not None:
                self._answer_raw(200, script.raw, trickle=script.trickle)
                return
            documents = body["texts"] if script.tei else body["documents"]
            scored = sorted(
                ((i, script.score(d)) for i, d in enumerate(documents)), key=lambda pair: -pair[1]
            )
            if script.tei:
                self._answer(200, [{"index": i, "score": s} for i, s in scored], trickle=script.trickle)
            else:
                results = [{"index": i, "relevance_score": s} for i, s in scored]
                self._answer(200, {"results": results}, trickle=script.trickle)

    with serving(Handler) as script.url:
        yield script


@contextmanager
def scripted_reranker(*, timeout: float = 5, **scores: float) -> Iterator[RerankScript]:
    """This process's reranker is a scripted server (``RERANK_PROVIDER=http``, with ``RERANK_TIMEOUT``
    ``timeout``)."""
    from django.test import override_settings

    from memoryplatform.rerank import get_reranker

    script = RerankScript(scores=scores)
    with rerank_server(script):
        get_reranker.cache_clear()
        try:
            with override_settings(RERANK_PROVIDER="http", RERANK_URL=script.url, RERANK_TIMEOUT=timeout):
                yield script
        finally:
            get_reranker.cache_clear()
