"""The application's log holds no user id and no query text (issue 44, finding 16), so a GDPR erasure leaves
nothing of the user in it: requests are logged by route, exceptions by type and frames, users by a keyed
hash. Through REST with the role keys, the log captured whole (every logger, every level)."""

import logging

import psycopg
import pytest
from django.db import connection

from memoryplatform.locks import LockId
from memoryplatform.logsafe import exception_summary, safe_traceback, user_ref
from tests.helpers import assert_envelope, url_of_the_test_database

U = "erase-me-7c1f@example.com"
QUERY = "quixotic marmalade zeppelin"


def _everything(caplog: pytest.LogCaptureFixture) -> str:
    """Every captured line as a handler writes it: message, and traceback where there is one."""
    return "\n".join(caplog.handler.format(record) for record in caplog.records)


@pytest.mark.django_db(transaction=True)
def test_a_failed_request_and_a_search_leave_no_user_id_nor_query_in_the_log(agent_a_api, caplog):
    caplog.set_level(logging.DEBUG)
    written = agent_a_api.put(
        "/usermemorystore/memories",
        {"userId": U, "key": "snack", "value": f"{QUERY} on toast", "visibility": "global"},
        format="json",
    )
    assert written.status_code == 201, written.content
    # A write that fails in a logged way: another session holds the user's lock past the lock timeout.
    with psycopg.connect(url_of_the_test_database()) as holder, connection.cursor() as cursor:
        holder.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", [LockId.USER_MEMORY, U])
        cursor.execute("SET lock_timeout = '100ms'")
        try:
            failed = agent_a_api.post(f"/propertiesstore/properties/{U}", {"snack": "jam"}, format="json")
        finally:
            cursor.execute("RESET lock_timeout")
    request_id = assert_envelope(failed, 500, "server_error")["details"]["requestId"]
    for mode in ("keyword", "semantic", "hybrid"):
        found = agent_a_api.get(f"/usermemorystore/memories/{U}/search", {"q": QUERY, "mode": mode})
        assert found.status_code == 200 and [e["key"] for e in found.json()] == ["snack"], mode
    recalled = agent_a_api.get(f"/usermemorystore/memories/{U}/visible", {"q": QUERY})
    assert recalled.status_code == 200

    logged = _everything(caplog)
    assert U not in logged and U.split("@")[0] not in logged
    assert not any(word in logged for word in QUERY.split())
    # What an operator needs is still there: the route, the request id, the error's type and frames.
    assert "POST /propertiesstore/properties/<text:user_id> 500" in logged
    assert "GET /usermemorystore/memories/<text:user_id>/search 200" in logged
    (failure,) = [r.getMessage() for r in caplog.records if r.name == "memoryplatform.api"]
    assert request_id in failure and "lock timeout" in failure and "Traceback" in failure
    assert "Internal Server Error: /propertiesstore/properties/<text:user_id>" in logged


@pytest.mark.django_db
def test_an_exception_is_logged_by_type_and_frames_never_by_its_message():
    """A data error's message quotes the value (``invalid input syntax for type integer: "<user>"``); a
    plain exception's message may hold anything. Neither reaches the log; the SQLSTATE and the frames do."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT %s::int", [U])
    except Exception as exc:  # Django's DataError, caused by psycopg's InvalidTextRepresentation
        data_error = exc
    try:
        raise RuntimeError(f"no memory for {U}") from data_error
    except RuntimeError as exc:
        plain = exc
    summary, trace = exception_summary(plain), safe_traceback(plain)
    assert U not in summary and U not in trace
    assert summary == "RuntimeError <- DataError [22P02] <- InvalidTextRepresentation [22P02]"
    assert "test_an_exception_is_logged_by_type_and_frames_never_by_its_message" in trace
    assert user_ref(U) == user_ref(U) != user_ref(U + "x") and U not in user_ref(U)
