"""Each endpoint's query count for a small and a large result: the count must not grow with the result."""

import json
from typing import Any

from bench.measure import RUN_TAG, SEQ, log


def query_counts(*, agent_key: str, admin_key: str, typical: str, heavy: str, term: str) -> dict[str, Any]:
    """Each endpoint's query count, in process (``django.test.Client``), for a small and a large result."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    agent: dict[str, Any] = {
        "HTTP_AUTHORIZATION": f"Bearer {agent_key}",
        "HTTP_HOST": "127.0.0.1",
    }
    admin: dict[str, Any] = {
        "HTTP_AUTHORIZATION": f"Bearer {admin_key}",
        "HTTP_HOST": "127.0.0.1",
    }
    u, h, qkey = typical, heavy, f"bench.q.{RUN_TAG}"
    batch = "/usermemorystore/memories/batch"
    checks: dict[str, list[tuple[Any, ...]]] = {
        "recall limit 5 / 50 (heaviest)": [
            ("get", f"/usermemorystore/memories/{h}/visible?order=most_accessed&limit=5", agent),
            ("get", f"/usermemorystore/memories/{h}/visible?order=most_accessed&limit=50", agent),
        ],
        "search per user, limit 5 / 1000": [
            ("get", f"/usermemorystore/memories/{h}/search?q=a&limit=5", agent),
            ("get", f"/usermemorystore/memories/{h}/search?q=a&limit=1000", agent),
        ],
        "admin search, limit 5 / 1000": [
            ("get", f"/v1/memories/search?q={term}&limit=5", admin),
            ("get", f"/v1/memories/search?q={term}&limit=1000", admin),
        ],
        "list user, limit 5 / 1000 (heaviest)": [
            ("get", f"/usermemorystore/memories/{h}?limit=5", agent),
            ("get", f"/usermemorystore/memories/{h}?limit=1000", agent),
        ],
        "upsert new / existing": [
            ("put", "/usermemorystore/memories", agent, {"userId": u, "key": qkey, "value": "x" * 120}),
            ("put", "/usermemorystore/memories", agent, {"userId": u, "key": qkey, "value": "y" * 120}),
        ],
        "batch of 1 / 20": [
            ("put", batch, agent, [{"userId": u, "key": qkey + "b", "value": "z"}]),
            ("put", batch, agent, [{"userId": u, "key": f"{qkey}.{j}", "value": "z"} for j in range(20)]),
        ],
    }  # fmt: skip
    # The first request of a key records its last use (once a minute) and so drops the key from the
    # process's key cache; the second reads it back into the cache. Make both before counting, so every
    # count below is a steady-state request.
    for headers in (agent, admin):
        for _ in range(2):
            client.get("/v1/agents/me", **headers)
    # Each read once more, uncounted: the first read of a path fills the process's caches (the agent's groups,
    # public ids), which would count as one more statement for whichever size came first.
    for calls in checks.values():
        for method, path, headers, *_body in calls:
            if method == "get":
                client.get(path, **headers)
    results: dict[str, Any] = {}
    for name, calls in checks.items():
        counts = []
        for method, path, headers, *body in calls:
            kwargs: dict[str, Any] = dict(headers)
            if body:
                kwargs |= {"data": json.dumps(body[0]), "content_type": "application/json",
                           "HTTP_X_TURN_ID": f"turn-q-{next(SEQ)}"}  # fmt: skip
            with CaptureQueriesContext(connection) as captured:
                response = getattr(client, method)(path, **kwargs)
            sizes = (
                len(response.json())
                if response.status_code == 200 and isinstance(response.json(), list)
                else "-"
            )
            counts.append({"status": response.status_code, "queries": len(captured), "items": sizes})
        results[name] = counts
    log(f"query counts: {json.dumps(results)}")
    return results
