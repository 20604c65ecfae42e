"""The HTTP door: ``manage.py serve`` (uvicorn, 2 workers of 4 threads, as ``make run`` runs it) on loopback,
started and stopped by the run, on the bench's database; clients are threads with ``http.client``."""

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.measure import RUN_TAG, SEQ, Door, log
from bench.target import ROOT


class Server:
    def __init__(self, url: str, logfile: Path, env: dict[str, str] | None = None) -> None:
        self.url = url
        self.logfile = logfile
        self.env = env or {}  # settings of this server only (e.g. EMBEDDINGS_PROVIDER)
        self.port = 0
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        env = os.environ | {"DATABASE_URL": self.url, "DEBUG": "false"} | self.env
        cmd = [
            sys.executable, "manage.py", "serve", "--port", str(self.port),
            "--workers", "2", "--threads", "4", "--no-background",
        ]  # fmt: skip
        self.logfile.parent.mkdir(parents=True, exist_ok=True)
        out = self.logfile.open("ab")
        self.proc = subprocess.Popen(  # noqa: S603 (our own interpreter, fixed arguments)
            cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        out.close()
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited with {self.proc.returncode}; see {self.logfile}")
            with contextlib.suppress(OSError):
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    conn.close()
                    log(f"serve (uvicorn, 2 workers x 4 threads) up on port {self.port}, pid {self.proc.pid}")
                    return
            time.sleep(0.3)
        raise RuntimeError(f"serve did not answer /healthz; see {self.logfile}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)  # the group we started (start_new_session): master + workers
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        log("serve stopped")

    def door(self, key: str, request: Callable[[], tuple[str, str, Any, set[int]]]) -> Door:
        """``request()`` gives (method, path, json body or None, accepted statuses)."""
        headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }

        def call(conn: http.client.HTTPConnection) -> None:
            method, path, body, accepted = request()
            extra = {"X-Turn-Id": f"turn-{RUN_TAG}-{next(SEQ)}"} if method == "PUT" else {}
            payload = None if body is None else json.dumps(body)
            try:
                conn.request(method, path, payload, headers | extra)
                response = conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                conn.close()  # the server closed a kept-alive connection: one retry on a new one
                conn.request(method, path, payload, headers | extra)
                response = conn.getresponse()
            content = response.read()
            if response.status not in accepted:
                raise RuntimeError(f"{method} {path}: {response.status} {content[:200]!r}")

        return Door(
            call=call,
            setup=lambda: http.client.HTTPConnection("127.0.0.1", self.port, timeout=120),
            teardown=lambda conn: conn.close(),
        )
