"""Issue 16: keys over REST, for automation. POST /v1/agents/{id}/keys (admin) returns the new key once;
GET lists prefixes, labels, expiry and last use; DELETE /v1/keys/{prefix} revokes. The same services as the
admin and the management commands."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from apikeys.models import ApiKey
from tests.helpers import assert_envelope

KEYS = "/v1/agents/agent-a/keys"


def _client(raw_key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    return client


def test_an_admin_makes_lists_and_revokes_an_agents_key(admin_api, agent_a_api):
    expires = (timezone.now() + timedelta(days=30)).replace(microsecond=0)
    made = admin_api.post(KEYS, {"label": "ci", "expiresAt": expires.isoformat()}, format="json")
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["role"] == "agent" and body["agentId"] == "agent-a" and body["label"] == "ci"
    raw_key, prefix = body["key"], body["prefix"]
    assert raw_key.startswith(f"mp_{prefix}_")
    assert ApiKey.objects.get(prefix=prefix).digest != raw_key  # only the digest is stored

    new_client = _client(raw_key)
    assert new_client.get("/v1/agents/me").json()["id"] == "agent-a"

    listed = admin_api.get(KEYS)
    assert listed.status_code == 200, listed.content
    rows = {row["prefix"]: row for row in listed.json()["results"]}
    assert set(rows) == {prefix, agent_a_api.key.prefix}
    assert rows[prefix]["label"] == "ci"
    assert rows[prefix]["expiresAt"].startswith(expires.strftime("%Y-%m-%dT%H:%M"))
    assert rows[prefix]["lastUsedAt"] is not None and rows[prefix]["revokedAt"] is None
    assert all("key" not in row and "digest" not in row for row in rows.values())
    assert raw_key not in listed.content.decode()

    assert admin_api.delete(f"/v1/keys/{prefix}").status_code == 204
    assert_envelope(new_client.get("/v1/agents/me"), 401, "unauthorized")
    assert agent_a_api.get("/v1/agents/me").status_code == 200  # the agent's other key still works
    assert admin_api.get(KEYS).json()["results"][0]["revokedAt"] is not None
    assert_envelope(admin_api.delete(f"/v1/keys/{prefix}"), 409, "conflict")
    assert_envelope(admin_api.delete("/v1/keys/00000000"), 404, "not_found")


def test_the_commands_see_the_keys_rest_makes(admin_api, agent_a):
    prefix = admin_api.post(KEYS, {"label": "from-rest"}, format="json").json()["prefix"]
    out = StringIO()
    call_command("listapikeys", stdout=out)
    assert any(prefix in line and "from-rest" in line for line in out.getvalue().splitlines())
    call_command("revokeapikey", prefix, stdout=StringIO())
    revoked = {row["prefix"]: row for row in admin_api.get(KEYS).json()["results"]}[prefix]
    assert revoked["revokedAt"] is not None


@pytest.mark.parametrize("role_client", ["agent_a_api", "viewer_api"])
def test_only_admin_keys_manage_keys(request, role_client, agent_a):
    client = request.getfixturevalue(role_client)
    count = ApiKey.objects.count()
    assert_envelope(client.post(KEYS, {}, format="json"), 403, "forbidden")
    assert_envelope(client.get(KEYS), 403, "forbidden")
    prefix = ApiKey.objects.first().prefix
    assert_envelope(client.delete(f"/v1/keys/{prefix}"), 403, "forbidden")
    assert ApiKey.objects.count() == count and not ApiKey.objects.filter(revoked_at__isnull=False).exists()


def test_bad_key_requests(admin_api, anon_api, agent_a):
    assert_envelope(admin_api.post("/v1/agents/nobody/keys", {}, format="json"), 404, "not_found")
    assert_envelope(admin_api.get("/v1/agents/nobody/keys"), 404, "not_found")
    past = (timezone.now() - timedelta(days=1)).isoformat()
    assert_envelope(admin_api.post(KEYS, {"expiresAt": past}, format="json"), 400, "bad_request")
    assert_envelope(admin_api.post(KEYS, {"expiresAt": "soon"}, format="json"), 400, "bad_request")
    assert_envelope(admin_api.post(KEYS, {"label": 5 * "x" * 100}, format="json"), 400, "bad_request")
    assert_envelope(anon_api.post(KEYS, {}, format="json"), 401, "unauthorized")
    assert not ApiKey.objects.filter(agent_id="agent-a").exists()
