"""Issue 16, contract: every path answers with and without a trailing slash, and a path value (userId, key,
category) holding "/", spaces or any unicode round-trips through every read, percent-encoded, whichever way
the server passes the path on (decoded only, gunicorn's RAW_URI, REQUEST_URI, the ASGI scope's raw_path)."""

import asyncio
import json
import uuid
from typing import Any
from urllib.parse import quote, unquote

import pytest
from asgiref.sync import async_to_sync
from django.core.asgi import get_asgi_application
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from tests.helpers import public_id
from usermemory.models import MemoryEntry

BASE = "/usermemorystore/memories"
USER = "org/u8 é ü"
CATEGORY = "likes/food items"
KEY = "a/b c ✓"
NO_SUCH_PATH = "No such path"


def _enc(value: str) -> str:
    return quote(value, safe="")


# --- Trailing slashes -------------------------------------------------------------------------------------


def test_put_with_a_trailing_slash_upserts(agent_a_api):
    """EDDI's table writes PUT / under /usermemorystore/memories."""
    body = {"userId": "u1", "key": "lang", "value": "German", "visibility": "self"}
    created = agent_a_api.put(f"{BASE}/", body, format="json")
    assert created.status_code == 201, created.content
    updated = agent_a_api.put(BASE, {**body, "value": "French"}, format="json")
    assert updated.status_code == 200, updated.content
    assert updated.json()["id"] == created.json()["id"]
    assert MemoryEntry.objects.get().value == "French"


def _filled(path: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        path = path.replace("{" + name + "}", _enc(value))
    assert "{" not in path, path
    return path


def test_every_documented_operation_answers_with_and_without_a_trailing_slash(admin_api, agent_a):
    """Each operation of the OpenAPI schema is routed in both forms, writes too (no redirect), and a read
    gives the same answer in both."""
    schema = admin_api.get("/api/schema/?format=json")
    assert schema.status_code == 200
    values = {
        "user_id": "nobody",
        "category": "fact",
        "key": "k",
        "entry_id": public_id(987654),  # public ids: legacy ones are refused by default (issue 44, 10a)
        "agent_id": agent_a.id,
        "group_id": "team",
        "conversation_id": str(uuid.uuid4()),
        "prefix": "00000000",
        "name": "rememberFact",
        "task_id": public_id(987654, "task"),
        "subscription_id": str(uuid.uuid4()),
    }
    checked = 0
    for path, operations in schema.json()["paths"].items():
        assert not path.endswith("/"), f"{path}: documented with a trailing slash"
        url = _filled(path, values)
        for method in operations:
            if method not in {"get", "put", "post", "patch", "delete"}:
                continue
            call = getattr(admin_api, method)
            slashed = call(f"{url}/", {}, format="json") if method != "get" else call(f"{url}/")
            assert slashed.status_code not in {301, 302, 308, 405}, (method, url, slashed.status_code)
            if slashed.status_code == 404:
                assert NO_SUCH_PATH not in slashed.json()["error"], (method, url)
            if method == "get":
                plain = call(url)
                assert plain.status_code == slashed.status_code, (url, plain.content, slashed.content)
            checked += 1
    assert checked >= 30


def test_operations_paths_answer_with_a_trailing_slash_too(client, db):
    for path in ("/healthz", "/readyz", "/metrics"):
        assert client.get(f"{path}/").status_code == client.get(path).status_code == 200, path


def test_v1_writes_with_a_trailing_slash(agent_a_api, admin_api):
    created = agent_a_api.post("/v1/conversations/", {"userId": "u1"}, format="json")
    assert created.status_code == 201, created.content
    conversation = created.json()["id"]
    message = {"role": "user", "sessionId": "s1", "content": [{"type": "text", "text": "hi"}]}
    posted = agent_a_api.post(f"/v1/conversations/{conversation}/messages/", message, format="json")
    assert posted.status_code == 201, posted.content
    group = admin_api.post("/v1/groups/", {"id": "g2"}, format="json")
    assert group.status_code == 201, group.content
    members = admin_api.post("/v1/groups/g2/members/", {"agentIds": ["agent-a"]}, format="json")
    assert members.status_code == 200, members.content
    assert admin_api.delete("/v1/groups/g2/members/agent-a/").status_code == 204


def test_a_path_with_extra_segments_is_still_unknown(agent_a_api):
    conversation = agent_a_api.post("/v1/conversations", {"userId": "u1"}, format="json").json()["id"]
    response = agent_a_api.delete(f"/v1/conversations/{conversation}/messages/whatever")
    assert response.status_code == 404
    assert NO_SUCH_PATH in response.json()["error"]
    for bad_id in ("abc", "١", str(2**63), "1.5"):
        assert agent_a_api.get(f"{BASE}/entry/{_enc(bad_id)}/history").status_code == 404


# --- Path values ------------------------------------------------------------------------------------------


def _asgi_get(path: str, raw_key: str) -> tuple[int, Any]:
    """GET through Django's ASGI handler with the scope a server such as uvicorn builds: ``path`` decoded,
    ``raw_path`` as sent."""
    route, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": unquote(route),
        "raw_path": route.encode("ascii"),
        "query_string": query.encode("ascii"),
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"authorization", f"Bearer {raw_key}".encode())],
        "client": ("127.0.0.1", 1234),
        "server": ("testserver", 80),
    }
    messages: list[dict[str, Any]] = []
    requests = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict[str, Any]:
        if requests:
            return requests.pop()
        await asyncio.Event().wait()  # the client stays connected until the answer is sent
        raise AssertionError("unreachable")

    async def send(message: Any) -> None:
        messages.append(message)

    # As Django's test client does: keep the test's connection (and its transaction) across the request.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        async_to_sync(get_asgi_application())(scope, receive, send)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    start = next(m for m in messages if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    return start["status"], json.loads(body) if body else None


SERVERS = ["decoded", "RAW_URI", "REQUEST_URI", "asgi"]


def _get(client: Any, path: str, server: str) -> tuple[int, Any]:
    if server == "asgi":
        return _asgi_get(path, client.raw_key)
    extra = {} if server == "decoded" else {server: path}
    response = client.get(path, **extra)
    return response.status_code, response.json() if response.content else None


@pytest.mark.parametrize("server", SERVERS)
def test_path_values_round_trip_through_every_read(agent_a_api, admin_api, server):
    entry = {"userId": USER, "key": KEY, "value": "pizza", "category": CATEGORY, "visibility": "global"}
    written = admin_api.put(BASE, entry, format="json")
    assert written.status_code == 201, written.content
    entry_id = written.json()["id"]
    user = f"{BASE}/{_enc(USER)}"

    def ok(client: Any, path: str) -> Any:
        status, body = _get(client, path, server)
        assert status == 200, (path, body)
        return body

    assert [e["key"] for e in ok(agent_a_api, user)] == [KEY]
    assert [e["key"] for e in ok(agent_a_api, f"{user}/")] == [KEY]
    assert [e["key"] for e in ok(agent_a_api, f"{user}/visible?order=most_recent")] == [KEY]
    assert [e["key"] for e in ok(agent_a_api, f"{user}/search?q=pizz")] == [KEY]
    assert [e["key"] for e in ok(agent_a_api, f"{user}/category/{_enc(CATEGORY)}")] == [KEY]
    assert ok(agent_a_api, f"{user}/key/{_enc(KEY)}")["userId"] == USER
    assert ok(agent_a_api, f"{user}/count") == {"userId": USER, "count": 1}
    assert ok(admin_api, f"{user}/export")["userId"] == USER
    assert [e["action"] for e in ok(agent_a_api, f"{BASE}/entry/{entry_id}/history")] == ["created"]
    assert ok(agent_a_api, f"/propertiesstore/properties/{_enc(USER)}") == {KEY: "pizza"}
    if server != "asgi":  # and a write: GDPR erasure of that user, found by the same path
        extra = {} if server == "decoded" else {server: user}
        erased = admin_api.delete(user, **extra)
        assert erased.status_code == 200, erased.content
        assert not MemoryEntry.objects.filter(user_id=USER).exists()


@pytest.mark.parametrize("server", ["RAW_URI", "REQUEST_URI", "asgi"])
def test_an_encoded_slash_is_exact_when_the_server_passes_the_raw_path(agent_a_api, server):
    """A userId that ends in a fixed suffix ("x/count") is ambiguous once decoded; the raw path keeps it."""
    for user_id in ("x/count", "x"):
        body = {"userId": user_id, "key": "k", "value": user_id, "visibility": "self"}
        assert agent_a_api.put(BASE, body, format="json").status_code == 201
    status, listed = _get(agent_a_api, f"{BASE}/{_enc('x/count')}", server)
    assert status == 200, listed
    assert [e["value"] for e in listed] == ["x/count"]
    status, entry = _get(agent_a_api, f"{BASE}/{_enc('x/count')}/key/{_enc('k')}", server)
    assert (status, entry["userId"]) == (200, "x/count")
    # "%25" is a literal "%", decoded once: never a second time.
    body = {"userId": "100%2F", "key": "k", "value": 1, "visibility": "self"}
    assert agent_a_api.put(BASE, body, format="json").status_code == 201
    status, counted = _get(agent_a_api, f"{BASE}/{_enc('100%2F')}/count", server)
    assert (status, counted) == (200, {"userId": "100%2F", "count": 1})
