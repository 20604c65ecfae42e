"""Events fixtures: every test commits (the feed reads committed transactions only), a receiver on
loopback, and a subscription made over REST by an admin key."""

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from tests.events.receiver import HANG_GUARD, Receiver, receiving
from tests.extraction.conftest import openai_llm  # noqa: F401 (a fixture: the scripted LLM)

BASE = "/usermemorystore/memories"


@pytest.fixture(autouse=True)
def _webhook_settings(settings):  # type: ignore[no-untyped-def]
    settings.WEBHOOK_ALLOW_PRIVATE = True  # the receivers are on loopback
    settings.WEBHOOK_RETRY_BASE_SECONDS = 0  # a failed try is due again at once: no test waits on a clock
    settings.WEBHOOK_TIMEOUT = 10.0


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as running:
        yield running


@pytest.fixture
def subscribe(admin_api: Any) -> Callable[..., dict[str, Any]]:
    """``subscribe(url, agent_id, **more)``: a subscription made over REST; its answer (with the secret)."""

    def _subscribe(url: str, agent_id: str, **more: Any) -> dict[str, Any]:
        response = admin_api.post("/v1/webhooks", {"url": url, "agentId": agent_id, **more}, format="json")
        assert response.status_code == 201, response.content
        return response.json()

    return _subscribe


@pytest.fixture
def put() -> Callable[..., dict[str, Any]]:
    def _put(client: Any, **body: Any) -> dict[str, Any]:
        response = client.put(BASE, body, format="json")
        assert response.status_code in (200, 201), response.content
        return response.json()

    return _put


def settled() -> None:
    """Wait until the feed's horizon has passed every event written so far. The horizon is the server's oldest
    running transaction, in any database (events/store.py), so another xdist worker's open test transaction
    holds it back for a moment; a read right after a write would find nothing yet."""
    deadline = time.monotonic() + HANG_GUARD
    with connection.cursor() as cursor:
        while True:
            cursor.execute(
                "SELECT coalesce(max(txid), 0) < pg_snapshot_xmin(pg_current_snapshot())::text::bigint "
                "FROM events_event"
            )
            if cursor.fetchone()[0]:
                return
            assert time.monotonic() < deadline, "the feed's horizon never passed the events written"
            time.sleep(0.05)


def deliver() -> None:
    """Every due subscription's events, as the delivery command delivers them, once they are readable."""
    settled()
    call_command("deliver_webhooks")


@pytest.fixture
def worker_env(settings: Any) -> dict[str, str]:  # type: ignore[misc]
    """What a real worker needs to deliver to this test's receivers: loopback allowed, and this process's
    keys (so its events' public ids are the ones this process shows)."""
    return {
        "WEBHOOK_ALLOW_PRIVATE": "true",
        "SECRET_KEY": settings.SECRET_KEY,
        "PUBLIC_ID_KEY": settings.PUBLIC_ID_KEY,
    }
