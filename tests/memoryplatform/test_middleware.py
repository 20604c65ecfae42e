"""Browser-only middleware: API-key calls skip sessions, CSRF, the admin's sign-in and messages; people in a
browser (the admin, the browsable API with a staff session) keep all of them."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

UPSERT = "/usermemorystore/memories"
BODY = {"userId": "u1", "key": "tz", "value": "Europe/Vienna", "visibility": "self"}


@pytest.fixture
def staff_browser(db: None) -> Client:
    """A signed-in staff user's browser, with CSRF checked as a browser's would be."""
    user = get_user_model().objects.create_user("staff", password="pw-for-tests-only", is_staff=True)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    return browser


def test_an_api_key_call_builds_no_session(agent_a_api):
    response = agent_a_api.put(UPSERT, BODY, format="json")
    assert response.status_code == 201
    request = response.wsgi_request
    assert not hasattr(request, "session")
    assert not hasattr(request, "_messages")
    assert "Set-Cookie" not in response.headers
    assert request.user.log_label().startswith("agent:")  # DRF's caller, as the request log reads it


def test_an_api_key_call_with_a_session_cookie_is_the_keys_caller(agent_a_api, staff_browser):
    """A staff session cookie sent beside an agent key changes nothing: the key decides, and no CSRF token is
    asked for, as before."""
    agent_a_api.cookies = staff_browser.cookies
    response = agent_a_api.put(UPSERT, BODY, format="json")
    assert response.status_code == 201
    assert response.json()["sourceAgentId"] == agent_a_api.agent.id


def test_staff_in_a_browser_keep_their_session_and_csrf(staff_browser):
    listed = staff_browser.get("/usermemorystore/memories/u1", HTTP_ACCEPT="application/json")
    assert listed.status_code == 200
    assert hasattr(listed.wsgi_request, "session")
    refused = staff_browser.put(UPSERT, BODY, content_type="application/json")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["error"]


def test_the_admin_keeps_its_middleware_when_a_key_is_sent(agent_a_api):
    response = agent_a_api.get("/admin/")
    assert response.status_code == 302
    assert response.headers["Location"].startswith("/admin/login/")
    assert hasattr(response.wsgi_request, "session")


def test_a_post_to_the_admin_with_a_key_still_needs_csrf(agent_a_api):
    agent_a_api.enforce_csrf_checks = True
    agent_a_api.handler.enforce_csrf_checks = True
    response = agent_a_api.post("/admin/login/", {"username": "x", "password": "y"})
    assert response.status_code == 403
