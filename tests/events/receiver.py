"""A webhook receiver on loopback: a real HTTP server that records each delivery (headers and body) in order,
answers with a status the test sets, can trickle its answer, be down and come back on its port, or run a
hook on each delivery before it answers."""

import contextlib
import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.helpers import SERVE_POLL_SECONDS

HANG_GUARD = 120.0  # ends only a wait that would never end, never a timing assertion


@dataclass
class Delivery:
    headers: dict[str, str]
    body: bytes

    @property
    def event(self) -> dict[str, Any]:
        return json.loads(self.body)


@dataclass
class Receiver:
    port: int = 0
    status: int = 200
    trickle: bool = False
    answer: bytes = b"ok"
    location: str = ""
    on_delivery: Callable[["Delivery"], None] | None = None
    deliveries: list[Delivery] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)
    server: http.server.ThreadingHTTPServer | None = None
    thread: threading.Thread | None = None
    stop_trickling: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def up(self) -> None:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                delivery = Delivery({k.lower(): v for k, v in self.headers.items()}, body)
                if receiver.on_delivery is not None:
                    receiver.on_delivery(delivery)
                with receiver.changed:
                    receiver.deliveries.append(delivery)
                    receiver.changed.notify_all()
                self.send_response(receiver.status)
                if receiver.location:
                    self.send_header("Location", receiver.location)
                self.send_header(
                    "Content-Length", "100000" if receiver.trickle else str(len(receiver.answer))
                )
                self.end_headers()
                if not receiver.trickle:
                    with contextlib.suppress(OSError):  # the deliverer stops reading a long answer
                        self.wfile.write(receiver.answer)
                    return
                while not receiver.stop_trickling.wait(0.2):  # a byte every 0.2 s, for ever
                    with contextlib.suppress(OSError):
                        self.wfile.write(b".")
                        self.wfile.flush()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": SERVE_POLL_SECONDS}, daemon=True
        )
        self.thread.start()

    def down(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def wait_for(self, count: int) -> list[Delivery]:
        """Block until ``count`` deliveries arrived (a hang guard only)."""
        deadline = time.monotonic() + HANG_GUARD
        with self.changed:
            while len(self.deliveries) < count:
                assert self.changed.wait(timeout=deadline - time.monotonic()), len(self.deliveries)
            return list(self.deliveries)

    def events(self) -> list[dict[str, Any]]:
        with self.changed:
            return [d.event for d in self.deliveries]


@contextlib.contextmanager
def receiving(**options: Any) -> Iterator[Receiver]:
    receiver = Receiver(**options)
    receiver.up()
    try:
        yield receiver
    finally:
        receiver.stop_trickling.set()
        receiver.down()
