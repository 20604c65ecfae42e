"""A real HTTP server speaking the OpenAI embeddings protocol (``POST /v1/embeddings``) with scripted answers:
each known text gets its scripted vector; ``fail_with`` makes every answer that HTTP status; ``trickle`` sends
each answer's body a byte every that many seconds."""

import json
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.helpers import SERVE_POLL_SECONDS


@dataclass
class Script:
    vectors: dict[str, list[float]]
    fail_with: int | None = None
    trickle: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""
    # A request holding a text that contains ``hang_on`` never gets an answer (until the server stops);
    # ``hung`` is set when one arrives, so a test can act while a client waits on it.
    hang_on: str | None = None
    hung: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)


class JsonHandler(BaseHTTPRequestHandler):
    """A scripted server's handler: JSON answers, and no request log."""

    def _answer(self, status: int, payload: Any, *, trickle: float = 0.0) -> None:
        self._answer_raw(status, json.dumps(payload).encode(), trickle=trickle)

    def _answer_raw(self, status: int, raw: bytes, *, trickle: float = 0.0) -> None:
        """Answer ``raw``; with ``trickle``, its body one byte every ``trickle`` seconds (each read of the
        client's gets a byte within its read timeout, the whole body takes ``trickle * len(raw)``)."""
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            if not trickle:
                self.wfile.write(raw)
                return
            self.wfile.flush()
            for byte in range(len(raw)):
                time.sleep(trickle)
                self.wfile.write(raw[byte : byte + 1])
        except (BrokenPipeError, ConnectionResetError):  # the client gave up and left
            pass

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def embedding_server(script: Script) -> Iterator[Script]:
    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            script.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
            if script.hang_on is not None and any(script.hang_on in text for text in body.get("input", [])):
                script.hung.set()
                script.released.wait()
                return
            if script.fail_with or self.path != "/v1/embeddings":
                self._answer(script.fail_with or 404, {"error": {"message": "scripted failure"}})
                return
            data = [
                {"object": "embedding", "index": i, "embedding": script.vectors[text]}
                for i, text in enumerate(body["input"])
            ]
            answer = {"object": "list", "data": data[::-1], "model": body["model"]}
            self._answer(200, answer, trickle=script.trickle)

    try:
        with serving(Handler) as script.url:
            yield script
    finally:
        script.released.set()


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A threading HTTP server of ``handler`` on a free local port, its URL while the block runs."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": SERVE_POLL_SECONDS}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def scripted_embedder(vector: tuple[float, ...] = (0.6, 0.8, 0.0), *, timeout: float = 5) -> Iterator[Script]:
    """This process's embedder is a scripted server (``EMBEDDINGS_PROVIDER=openai``, ``EMBEDDINGS_TIMEOUT``
    ``timeout``) that answers every text with ``vector``; ``script.requests`` holds what it was sent (each
    request's ``input``: texts)."""
    from django.test import override_settings

    from memoryplatform.embeddings import get_embedder

    script = Script(vectors=defaultdict(lambda: list(vector)))
    with embedding_server(script):
        remote = {"EMBEDDINGS_PROVIDER": "openai", "EMBEDDINGS_MODEL": "tiny", "EMBEDDINGS_DIMENSIONS": 0}
        get_embedder.cache_clear()
        try:
            with override_settings(**remote, EMBEDDINGS_URL=script.url, EMBEDDINGS_TIMEOUT=timeout):
                yield script
        finally:
            get_embedder.cache_clear()


def inputs(script: Script) -> list[str]:
    """Every text the scripted server was asked to embed, in order."""
    return [text for request in script.requests for text in request.get("input", [])]
