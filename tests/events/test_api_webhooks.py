"""/v1/webhooks: admin keys manage subscriptions; the secret is in the create's answer only; a private or
loopback URL is refused unless the operator allows it; bad input is a 400, another role a 403."""

import pytest

from events.models import WebhookSubscription
from tests.helpers import assert_envelope

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_admin_creates_reads_changes_and_deletes_a_subscription(admin_api, agent_a, receiver):
    created = admin_api.post(
        "/v1/webhooks",
        {"url": receiver.url, "agentId": agent_a.id, "eventTypes": ["memory.created"], "description": "crm"},
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["secret"].startswith("whsec_") and len(body["secret"]) > 40
    assert (body["agentId"], body["eventTypes"], body["enabled"]) == (agent_a.id, ["memory.created"], True)

    shown = admin_api.get(f"/v1/webhooks/{body['id']}").json()
    assert "secret" not in shown and shown["url"] == receiver.url
    assert [s["id"] for s in admin_api.get("/v1/webhooks").json()] == [body["id"]]
    assert all("secret" not in s for s in admin_api.get("/v1/webhooks").json())

    changed = admin_api.patch(
        f"/v1/webhooks/{body['id']}", {"enabled": False, "eventTypes": []}, format="json"
    )
    assert changed.status_code == 200, changed.content
    assert (changed.json()["enabled"], changed.json()["eventTypes"]) == (False, [])
    assert admin_api.delete(f"/v1/webhooks/{body['id']}").status_code == 204
    assert_envelope(admin_api.get(f"/v1/webhooks/{body['id']}"), 404, "not_found")


def test_other_roles_may_not_manage_webhooks(agent_a_api, viewer_api, anon_api, agent_a, receiver):
    body = {"url": receiver.url, "agentId": agent_a.id}
    assert_envelope(agent_a_api.post("/v1/webhooks", body, format="json"), 403, "forbidden")
    assert_envelope(viewer_api.get("/v1/webhooks"), 403, "forbidden")
    assert anon_api.get("/v1/webhooks").status_code == 401
    assert not WebhookSubscription.objects.exists()


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/hook",
        "http://localhost/hook",
        "http://[::1]/hook",
        "http://10.1.2.3/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::ffff:192.168.0.1]/hook",
        "http://100.64.0.1/hook",
    ],
)
def test_a_private_or_loopback_url_is_refused(settings, admin_api, agent_a, url):
    settings.WEBHOOK_ALLOW_PRIVATE = False
    answer = admin_api.post("/v1/webhooks", {"url": url, "agentId": agent_a.id}, format="json")
    body = assert_envelope(answer, 400, "bad_request")
    assert "WEBHOOK_ALLOW_PRIVATE" in body["error"]
    assert not WebhookSubscription.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "ftp://example.com/x"}, "url"),
        ({"url": "http://user:pw@127.0.0.1/x"}, "url"),
        ({"eventTypes": ["memory.creatd"]}, "eventTypes"),
        ({"agentId": "nobody"}, "agentId"),
        ({"secret": "mine", "colour": "red"}, "colour"),
    ],
)
def test_bad_input_is_a_400(admin_api, agent_a, receiver, body, field):
    answer = admin_api.post(
        "/v1/webhooks", {"url": receiver.url, "agentId": agent_a.id, **body}, format="json"
    )
    error = assert_envelope(answer, 400, "bad_request")
    assert field in str(error), error
    assert not WebhookSubscription.objects.exists()


def test_a_subscription_of_an_unknown_id_is_a_404(admin_api):
    missing = "/v1/webhooks/8d7f2d3c-1111-4c7e-9b1e-0123456789ab"
    assert_envelope(admin_api.get(missing), 404, "not_found")
    assert_envelope(admin_api.patch(missing, {"enabled": True}, format="json"), 404, "not_found")
    assert_envelope(admin_api.delete(missing), 404, "not_found")


def test_a_path_that_is_no_subscription_id_is_a_404(admin_api):
    assert_envelope(admin_api.get("/v1/webhooks/not-a-uuid"), 404, "not_found")
