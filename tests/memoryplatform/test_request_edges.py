"""The edges of a request that issue 33 found open (findings 11, 12, 13, and "only a real outage is reported
as one"), through the REST doors with the role fixtures and through the ASGI entry point ``manage.py serve``
runs. The same requests through a real uvicorn are in tests/agenttools/test_served_edges.py."""

import json
import logging
from typing import Any

import psycopg
import pytest
from asgiref.sync import async_to_sync
from django.db import InterfaceError, OperationalError, connection

from conversations.models import Conversation, Message
from memoryplatform.api.errors import database_unreachable
from memoryplatform.text import MAX_REQUEST_TARGET
from tests.helpers import assert_envelope, url_of_the_test_database
from usermemory.models import MemoryEntry, MemoryEvent

MEMORIES = "/usermemorystore/memories"


def _asgi(path: str, *, method: str = "GET", query: str = "") -> tuple[int, dict[str, Any], dict[str, str]]:
    """One request to ``config.asgi.application`` with the scope uvicorn builds: ``path`` as sent
    (``raw_path``), and decoded as uvicorn decodes it (undecodable bytes as U+FFFD)."""
    from urllib.parse import unquote

    from config.asgi import application

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": unquote(path),
        "raw_path": path.encode("ascii"),
        "query_string": query.encode("ascii"),
        "root_path": "",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 1234),
        "server": ("testserver", 80),
    }
    messages: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    async_to_sync(application)(scope, receive, send)
    start = next(m for m in messages if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], json.loads(body), headers


# --- Finding 11: a path that is not UTF-8 once percent-decoded is a 400 ------------------------------------

UNDECODABLE = [
    f"{MEMORIES}/%FF/count",
    f"{MEMORIES}/%ED%A0%80",  # an encoded surrogate
    f"{MEMORIES}/u/key/%C3",  # a truncated sequence
    f"{MEMORIES}/u/category/%80x",
    f"{MEMORIES}/entry/1%FF/history",
    "/propertiesstore/properties/%FE",
    "/v1/conversations/%FF",
    "/v1/agents/%FF",
    "/v1/tools/%FF/invoke",
    "/admin/%FF/",
    "/static/%FF.css",
    "/no/such/%FF",
]


@pytest.mark.parametrize("path", UNDECODABLE)
def test_an_undecodable_path_is_a_400_at_every_route(admin_api, agent_a_api, path):
    for client in (admin_api, agent_a_api):
        refused = assert_envelope(client.get(path), 400, "bad_request")
        assert "UTF-8" in refused["error"]
        # Served by gunicorn (RAW_URI) or a server that sets REQUEST_URI: the same.
        assert_envelope(client.get(path, RAW_URI=path), 400, "bad_request")
        assert_envelope(client.get(path, REQUEST_URI=path), 400, "bad_request")


@pytest.mark.parametrize("path", UNDECODABLE)
def test_an_undecodable_path_is_a_400_through_the_asgi_entry_point(db, path):
    status, refused, headers = _asgi(path)
    assert status == 400 and refused["code"] == "bad_request" and "UTF-8" in refused["error"], refused
    assert headers["content-type"] == "application/json"


def test_undecodable_paths_write_nothing_and_name_no_user(agent_a_api, admin_api):
    for user in ("%FF", "%FE", "%ED%A0%80"):
        body = {"key": "k", "value": 1}
        assert_envelope(
            agent_a_api.post(f"/propertiesstore/properties/{user}", body, format="json"), 400, "bad_request"
        )
        assert_envelope(admin_api.delete(f"{MEMORIES}/{user}"), 400, "bad_request")
        assert_envelope(agent_a_api.delete(f"{MEMORIES}/{user}/key/k"), 400, "bad_request")
    assert not MemoryEntry.objects.exists() and not MemoryEvent.objects.exists()
    # Valid UTF-8, percent-encoded, still names its user.
    assert (
        agent_a_api.put(MEMORIES, {"userId": "é", "key": "k", "value": 1}, format="json").status_code == 201
    )
    assert agent_a_api.get(f"{MEMORIES}/%C3%A9/count").json() == {"userId": "é", "count": 1}
    # "%25FF" is the text "%FF": a user like any other where the server passes the raw path. Where it passes
    # only the decoded path (the test client, runserver), Django has re-escaped "%FF" to the same text, so
    # the two cannot be told apart there, and both are refused.
    assert (
        agent_a_api.put(MEMORIES, {"userId": "%FF", "key": "k", "value": 1}, format="json").status_code == 201
    )
    path = f"{MEMORIES}/%25FF/count"
    assert agent_a_api.get(path, RAW_URI=path).json() == {"userId": "%FF", "count": 1}
    assert_envelope(agent_a_api.get(path), 400, "bad_request")


# --- Finding 12: an over-long request line is a 414 in the envelope ----------------------------------------


def test_an_over_long_path_or_query_is_a_414_in_the_envelope(agent_a_api, admin_api):
    long_user = "u" * (MAX_REQUEST_TARGET + 1)
    for response in (
        agent_a_api.get(f"{MEMORIES}/{long_user}/count"),
        agent_a_api.get(f"{MEMORIES}/u/search", {"q": "q" * MAX_REQUEST_TARGET}),
        admin_api.put(f"{MEMORIES}/{long_user}", {"key": "k", "value": 1}, format="json"),
        admin_api.get("/admin/" + "a" * MAX_REQUEST_TARGET),
        agent_a_api.get(f"/v1/agents?pad={'x' * MAX_REQUEST_TARGET}"),
    ):
        refused = assert_envelope(response, 414, "uri_too_long")
        assert str(MAX_REQUEST_TARGET) in refused["error"]
    # Measured as sent: 2,000 "é" are 12,000 bytes percent-encoded, under the limit; 3,000 are over it.
    ok = agent_a_api.get(f"{MEMORIES}/{'é' * 2000}/count")
    assert ok.status_code == 200, ok.content[:300]
    assert_envelope(agent_a_api.get(f"{MEMORIES}/{'é' * 3000}/count"), 414, "uri_too_long")
    assert not MemoryEntry.objects.exists()


def test_an_over_long_request_line_is_a_414_through_the_asgi_entry_point(db):
    for path, query in (
        (f"{MEMORIES}/{'u' * MAX_REQUEST_TARGET}", ""),
        ("/mcp/", "x=" + "y" * MAX_REQUEST_TARGET),
    ):
        status, refused, headers = _asgi(path, method="POST", query=query)
        assert (status, refused["code"]) == (414, "uri_too_long"), refused
        assert headers["connection"] == "close"


# --- Finding 13: a key given twice in one JSON object is a 400 naming it -----------------------------------


def _raw(client: Any, method: str, path: str, text: str) -> Any:
    return getattr(client, method)(path, data=text, content_type="application/json")


@pytest.mark.parametrize(
    ("method", "path", "body", "key"),
    [
        ("put", MEMORIES, '{"userId": "u1", "key": "k", "value": 1, "userId": "u2"}', "userId"),
        ("put", MEMORIES, '{"userId": "u", "key": "k", "value": {"a": 1, "b": [{"a": 2, "a": 3}]}}', "a"),
        ("put", f"{MEMORIES}/batch", '[{"userId": "u", "key": "k", "value": 1, "key": "k2"}]', "key"),
        ("put", f"{MEMORIES}/batch", '{"entries": [], "entries": [{"userId": "u"}]}', "entries"),
        ("post", "/propertiesstore/properties/u", '{"name": "a", "name": "b"}', "name"),
        ("post", "/v1/conversations", '{"userId": "u", "userId": "v"}', "userId"),
        (
            "post",
            "/v1/tools/rememberFact/invoke",
            '{"userId": "u", "arguments": {"key": "k", "key": "x"}}',
            "key",
        ),
        ("put", MEMORIES, '{"userId": "u", "key": "k", "value": {"\\ud800": 1, "\\ud800": 2}}', "\\ud800"),
    ],
    ids=["top", "nested", "batch-item", "batch", "properties", "conversation", "tool", "surrogate-key"],
)
def test_a_duplicate_json_key_is_a_400_naming_it(agent_a_api, method, path, body, key):
    refused = assert_envelope(_raw(agent_a_api, method, path, body), 400, "bad_request")
    assert f'the key "{key}" appears more than once' in refused["error"], refused
    assert not MemoryEntry.objects.exists() and not Conversation.objects.exists()


def test_a_duplicate_key_in_a_message_is_refused_and_equal_keys_in_two_objects_are_not(agent_a_api):
    conversation = agent_a_api.post("/v1/conversations", {"userId": "u"}, format="json").json()["id"]
    body = '{"role": "user", "content": [{"type": "text", "text": "a", "text": "b"}]}'
    refused = assert_envelope(
        _raw(agent_a_api, "post", f"/v1/conversations/{conversation}/messages", body), 400, "bad_request"
    )
    assert 'the key "text"' in refused["error"]
    assert not Message.objects.exists()
    stored = _raw(
        agent_a_api, "put", MEMORIES, '{"userId": "u", "key": "k", "value": {"key": 1, "v": {"key": 2}}}'
    )
    assert stored.status_code == 201, stored.content
    assert stored.json()["value"] == {"key": 1, "v": {"key": 2}}


# --- Only a real outage is a 503 ---------------------------------------------------------------------------


def _wrapped(error: Exception) -> OperationalError:
    """A psycopg error as Django raises it: its own class, the driver's error as the cause."""
    wrapped = OperationalError(str(error))
    wrapped.__cause__ = error
    return wrapped


@pytest.mark.parametrize(
    ("error", "unreachable"),
    [
        (_wrapped(psycopg.OperationalError("server closed the connection unexpectedly")), True),
        (_wrapped(psycopg.errors.AdminShutdown("terminating connection")), True),
        (_wrapped(psycopg.errors.CannotConnectNow("the database system is starting up")), True),
        (_wrapped(psycopg.errors.TooManyConnections("too many clients")), True),
        (_wrapped(psycopg.errors.ConnectionFailure("connection failure")), True),
        (InterfaceError("connection already closed"), True),
        (_wrapped(psycopg.errors.ProgramLimitExceeded("string is too long for tsvector")), False),
        (_wrapped(psycopg.errors.LockNotAvailable("canceling statement due to lock timeout")), False),
        (_wrapped(psycopg.errors.QueryCanceled("canceling statement due to statement timeout")), False),
        (_wrapped(psycopg.errors.DeadlockDetected("deadlock detected")), False),
        (_wrapped(psycopg.errors.OutOfMemory("out of memory")), False),
        # The prepared writes' own psycopg cursor raises the driver's errors unwrapped.
        (psycopg.OperationalError("server closed the connection unexpectedly"), True),
        (psycopg.errors.AdminShutdown("terminating connection"), True),
        (psycopg.InterfaceError("the connection is closed"), True),
        (psycopg.errors.LockNotAvailable("canceling statement due to lock timeout"), False),
        (psycopg.errors.UniqueViolation("duplicate key value"), False),
    ],
)
def test_only_an_unreachable_database_counts_as_an_outage(error, unreachable):
    assert database_unreachable(error) is unreachable


@pytest.mark.django_db(transaction=True)
def test_a_database_error_that_is_no_outage_is_a_500_with_a_request_id(agent_a_api, caplog):
    """A statement the database refuses (here a lock timeout: another session holds the conversation's row)
    is a 500 in the envelope, not a 503 with Retry-After (it was, before issue 33), logged with the id the
    answer gives."""
    conversation = agent_a_api.post("/v1/conversations", {"userId": "u"}, format="json").json()["id"]
    message = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    with psycopg.connect(url_of_the_test_database()) as holder, connection.cursor() as cursor:
        table = Conversation._meta.db_table
        holder.execute(f"SELECT 1 FROM {table} WHERE id = %s FOR UPDATE", [conversation])  # noqa: S608
        cursor.execute("SET lock_timeout = '100ms'")
        try:
            with caplog.at_level(logging.ERROR, logger="memoryplatform.api"):
                failed = agent_a_api.post(
                    f"/v1/conversations/{conversation}/messages", message, format="json"
                )
        finally:
            cursor.execute("RESET lock_timeout")
    refused = assert_envelope(failed, 500, "server_error")
    assert "Retry-After" not in failed
    request_id = refused["details"]["requestId"]
    assert failed["X-Request-Id"] == request_id
    (record,) = [r for r in caplog.records if request_id in r.getMessage()]
    # The exception by its type, SQLSTATE, primary message and frames (memoryplatform.logsafe).
    assert "lock timeout" in record.getMessage() and "[55P03]" in record.getMessage()
    # The lock gone, the next request goes through.
    assert (
        agent_a_api.post(f"/v1/conversations/{conversation}/messages", message, format="json").status_code
        == 201
    )
