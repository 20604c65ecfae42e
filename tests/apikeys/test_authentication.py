import logging
import threading
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from apikeys.models import ApiKey
from apikeys.services import apikey_revoke
from tests.helpers import assert_envelope

ME = "/v1/agents/me"


def test_bearer_and_x_api_key_both_authenticate(agent_a_api, anon_api):
    assert agent_a_api.get(ME).json()["id"] == "agent-a"
    anon_api.credentials(HTTP_X_API_KEY=agent_a_api.raw_key)
    assert anon_api.get(ME).json()["id"] == "agent-a"


@pytest.mark.parametrize("scheme", ["Token", "token", "Bearer"])
def test_drf_token_scheme_authenticates_like_bearer(agent_a_api, anon_api, scheme):
    anon_api.credentials(HTTP_AUTHORIZATION=f"{scheme} {agent_a_api.raw_key}")
    response = anon_api.get(ME)
    assert response.status_code == 200, response.content
    assert response.json()["id"] == "agent-a"
    anon_api.credentials(HTTP_AUTHORIZATION=f"{scheme} mp_deadbeef_not-a-real-secret")
    assert_envelope(anon_api.get(ME), 401, "unauthorized")


def test_missing_key_is_401_with_challenge(anon_api, db):
    response = anon_api.get(ME)
    assert_envelope(response, 401, "unauthorized")
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "raw",
    ["nonsense", "mp_deadbeef_not-a-real-secret", "Bearer", "mp__x", "mp_zzzzzzzz"],
)
def test_bad_key_is_401(anon_api, agent_a_api, raw):
    anon_api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert_envelope(anon_api.get(ME), 401, "unauthorized")


def test_right_prefix_wrong_secret_is_401(anon_api, agent_a_api):
    forged = agent_a_api.raw_key[:-4] + ("AAAA" if not agent_a_api.raw_key.endswith("AAAA") else "BBBB")
    anon_api.credentials(HTTP_AUTHORIZATION=f"Bearer {forged}")
    body = assert_envelope(anon_api.get(ME), 401, "unauthorized")
    assert body["error"] == "Invalid API key."


def test_revoked_key_is_401(agent_a_api):
    assert agent_a_api.get(ME).status_code == 200
    apikey_revoke(prefix=agent_a_api.key.prefix)
    body = assert_envelope(agent_a_api.get(ME), 401, "unauthorized")
    assert "revoked" in body["error"]


def test_expired_key_is_401(make_api_client, agent_a):
    client = make_api_client("agent", agent_a, expires_at=timezone.now() + timedelta(seconds=30))
    assert client.get(ME).status_code == 200
    ApiKey.objects.filter(pk=client.key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    body = assert_envelope(client.get(ME), 401, "unauthorized")
    assert "expired" in body["error"]


@pytest.mark.parametrize("client_name", ["viewer_api", "admin_api"])
def test_me_needs_an_agent_key(request, client_name):
    body = assert_envelope(request.getfixturevalue(client_name).get(ME), 403, "forbidden")
    assert "agent key" in body["error"]


def test_last_used_is_written_once_per_window(agent_a_api):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as first:
        agent_a_api.get(ME)
    assert any(q["sql"].startswith("UPDATE") for q in first.captured_queries)
    key = ApiKey.objects.get(pk=agent_a_api.key.pk)
    assert key.last_used_at is not None
    assert key.agent.last_active_at is not None
    # Inside the window a request costs no write at all.
    with CaptureQueriesContext(connection) as second:
        agent_a_api.get(ME)
    assert not [q["sql"] for q in second.captured_queries if not q["sql"].startswith("SELECT")]
    assert ApiKey.objects.get(pk=key.pk).last_used_at == key.last_used_at


def test_raw_key_is_nowhere_in_database_or_logs(agent_a_api, caplog, capsys, tmp_path):
    caplog.set_level(logging.DEBUG)
    agent_a_api.get(ME)
    agent_a_api.get("/v1/agents")  # a 403, logged as a warning
    agent_a_api.post(ME, data="{not json", content_type="application/json")
    dump = tmp_path / "dump.json"
    call_command("dumpdata", output=str(dump))
    call_command("listapikeys")
    secret = agent_a_api.raw_key
    assert secret not in dump.read_text()
    assert secret not in caplog.text
    assert secret.split("_", 2)[2] not in caplog.text
    out = capsys.readouterr()
    assert secret not in out.out + out.err
    # The request log names the agent and the key's prefix instead.
    assert f"agent:agent-a key={agent_a_api.key.prefix}" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_many_concurrent_requests_with_one_key_all_succeed(live_server, agent_a):
    from apikeys.services import apikey_create

    _, raw_key = apikey_create(role="agent", agent_id=agent_a.id)
    statuses: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(5):
            req = urllib.request.Request(
                f"{live_server.url}{ME}", headers={"Authorization": f"Bearer {raw_key}"}
            )
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    code = resp.status
            except urllib.error.HTTPError as exc:
                code = exc.code
            with lock:
                statuses.append(code)

    threads = [threading.Thread(target=worker) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [200] * 60
