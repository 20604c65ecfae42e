"""Chunked request bodies (no Content-Length) reach the REST API whole and limited under WSGI too (issue 16).

Called at the WSGI layer a server such as gunicorn calls: it hands a chunked body to the app as a
``wsgi.input`` to read to its end, without ``CONTENT_LENGTH``. (Under ``manage.py serve``, the ASGI front does
the same: tests/memoryplatform/test_serve.py.)
"""

import io
import json
from collections.abc import Iterator
from wsgiref.util import setup_testing_defaults

import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from apikeys.models import ApiKey
from apikeys.services import apikey_create
from config.wsgi import application as wsgi_application
from usermemory.models import MemoryEntry

MEMORIES = "/usermemorystore/memories"
LIMIT = 1024 * 1024 - 1  # DATA_UPLOAD_MAX_MEMORY_SIZE


class CountingStream(io.BytesIO):
    """A ``wsgi.input`` that records how much of the body was read."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.bytes_read = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.bytes_read += len(data)
        return data


@pytest.fixture
def admin_key(db) -> str:
    return apikey_create(role=ApiKey.Role.ADMIN)[1]


@pytest.fixture
def in_request_transaction() -> Iterator[None]:
    """Keep the test's transaction open across the request, as Django's test client does."""
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


def _wsgi_put(key: str, stream: CountingStream) -> tuple[str, dict]:
    environ: dict = {}
    setup_testing_defaults(environ)
    environ.update(
        {
            "REQUEST_METHOD": "PUT",
            "PATH_INFO": MEMORIES,
            "CONTENT_TYPE": "application/json",
            "HTTP_TRANSFER_ENCODING": "chunked",
            "HTTP_AUTHORIZATION": f"Bearer {key}",
            "wsgi.input": stream,
        }
    )
    environ.pop("CONTENT_LENGTH", None)
    answer = {}

    def start_response(status, headers, exc_info=None):
        answer["status"] = status

    body = b"".join(wsgi_application(environ, start_response))
    return answer["status"], json.loads(body)


def _entry(value: object) -> bytes:
    return json.dumps({"userId": "chunked", "key": "k", "value": value, "visibility": "global"}).encode()


def test_wsgi_reads_a_chunked_body(admin_key, in_request_transaction):
    status, body = _wsgi_put(admin_key, CountingStream(_entry("from a chunked body")))
    assert status.startswith("201"), body
    assert MemoryEntry.objects.get(user_id="chunked").value == "from a chunked body"


def test_wsgi_refuses_a_chunked_body_over_the_limit_without_reading_it_all(admin_key, in_request_transaction):
    stream = CountingStream(_entry("v" * (2 * LIMIT)))
    status, body = _wsgi_put(admin_key, stream)
    assert status.startswith("413"), body
    assert body == {"error": "Request body is too large.", "code": "payload_too_large", "details": {}}
    assert stream.bytes_read <= LIMIT + 1
    assert not MemoryEntry.objects.exists()
