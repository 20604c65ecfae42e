import pytest
from django.core.management import call_command
from django.test import Client, override_settings

from tests.helpers import assert_envelope


def test_healthz_needs_no_database(client):
    # No db fixture: any database access would fail this test.
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_checks_the_database(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"] == {"database": "ok"}


@pytest.mark.django_db
def test_metrics_is_not_public(client):
    assert_envelope(client.get("/metrics", REMOTE_ADDR="203.0.113.9"), 403, "forbidden")
    with override_settings(METRICS_TOKEN="s3cret"):
        assert_envelope(
            client.get("/metrics", REMOTE_ADDR="203.0.113.9", HTTP_AUTHORIZATION="Bearer wrong"),
            403,
            "forbidden",
        )
        ok = client.get("/metrics", REMOTE_ADDR="203.0.113.9", HTTP_AUTHORIZATION="Bearer s3cret")
        assert ok.status_code == 200
        assert b"django_http_requests_total" in ok.content
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200


@pytest.mark.django_db
def test_api_docs_and_schema_are_served_offline(client):
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger-ui" in docs.content
    assert b"//cdn" not in docs.content and b"unpkg" not in docs.content
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    assert "/v1/agents/me" in schema.json()["paths"]


@pytest.mark.django_db
def test_schema_validates_without_warnings(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml"))
    assert (tmp_path / "schema.yml").stat().st_size > 1000


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path", ["/v1/nope", "/usermemorystore/whatever", "/nothing/here", "/v1/agents/me/extra"]
)
def test_unknown_paths_get_the_envelope(client, path):
    assert_envelope(client.get(path), 404, "not_found")


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_writes_to_unknown_paths_get_the_envelope_not_a_csrf_page(method):
    """A client with a key has no CSRF cookie; a write to a path that does not exist is still a JSON 404."""
    client = Client(enforce_csrf_checks=True)
    response = getattr(client, method)("/v1/agents/x/secrets", data="{}", content_type="application/json")
    assert_envelope(response, 404, "not_found")


def test_method_not_allowed_is_405_envelope(admin_api):
    assert_envelope(admin_api.delete("/v1/agents"), 405, "method_not_allowed")


def test_bad_json_is_400_envelope(admin_api):
    body = assert_envelope(
        admin_api.post("/v1/agents", data="{oops", content_type="application/json"), 400, "bad_request"
    )
    assert "JSON" in body["error"]


def test_wrong_types_are_400_naming_the_field(admin_api):
    body = assert_envelope(admin_api.post("/v1/agents", {"id": ["x"]}, format="json"), 400, "bad_request")
    assert body["error"].startswith("id:")
    assert "id" in body["details"]["fields"]


def test_oversize_body_is_413_envelope(admin_api):
    big = '{"id": "' + "x" * (1024 * 1024) + '"}'
    assert_envelope(
        admin_api.post("/v1/agents", data=big, content_type="application/json"), 413, "payload_too_large"
    )


def test_unhandled_error_is_500_envelope(admin_api, monkeypatch):
    from apikeys import selectors

    def boom(**kwargs):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(selectors, "agent_list", boom)
    admin_api.raise_request_exception = False
    body = assert_envelope(admin_api.get("/v1/agents"), 500, "server_error")
    assert "kaboom" not in body["error"]


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
def test_operations_paths_answer_other_methods_in_the_envelope(path):
    """GET and HEAD are read (a probe may send either); any other method is a 405 in the error envelope,
    with Allow, before any check of who asks, CSRF's included (a served POST without a key meets it)."""
    client = Client(enforce_csrf_checks=True)
    for method in ("post", "put", "patch", "delete", "options"):
        response = getattr(client, method)(path)
        body = assert_envelope(response, 405, "method_not_allowed")
        assert method.upper() in body["error"] and response["Allow"] == "GET, HEAD"
    assert client.head("/healthz").status_code == 200
    assert client.head(path, REMOTE_ADDR="203.0.113.9").status_code == (403 if path == "/metrics" else 200)
