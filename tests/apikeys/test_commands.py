from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from apikeys.models import Agent, AgentGroup, ApiKey


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_createagent_makes_missing_groups():
    AgentGroup.objects.create(id="existing")
    out = run("createagent", "support-bot", "--name", "Support", "--group", "existing", "--group", "new-one")
    assert "support-bot" in out
    agent = Agent.objects.get(id="support-bot")
    assert agent.display_name == "Support"
    assert sorted(agent.groups.values_list("id", flat=True)) == ["existing", "new-one"]
    with pytest.raises(CommandError, match="already exists"):
        run("createagent", "support-bot")


@pytest.mark.django_db
def test_createapikey_prints_a_working_key_alone_on_the_last_line():
    run("createagent", "support-bot")
    raw_key = run("createapikey", "--role", "agent", "--agent", "support-bot", "--label", "ci").splitlines()[
        -1
    ]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    response = client.get("/v1/agents/me")
    assert response.status_code == 200
    assert response.json()["id"] == "support-bot"
    key = ApiKey.objects.get()
    assert raw_key.startswith(f"mp_{key.prefix}_")
    assert key.digest != raw_key and raw_key not in key.digest


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--role", "agent"], "needs an agent"),
        (["--role", "viewer", "--agent", "x"], "not bound"),
        (["--role", "agent", "--agent", "ghost"], "No agent"),
        (["--role", "admin", "--expires-days", "0"], "positive"),
    ],
)
def test_createapikey_refuses_bad_combinations(args, message):
    with pytest.raises(CommandError, match=message):
        run("createapikey", *args)
    assert ApiKey.objects.count() == 0


@pytest.mark.django_db
def test_expires_days_sets_expiry_and_revoke_and_list():
    raw_key = run("createapikey", "--role", "viewer", "--expires-days", "7").splitlines()[-1]
    key = ApiKey.objects.get()
    assert key.expires_at is not None
    listing = run("listapikeys")
    assert key.prefix in listing and raw_key not in listing
    assert "Revoked" in run("revokeapikey", key.prefix)
    with pytest.raises(CommandError, match="already revoked"):
        run("revokeapikey", key.prefix)
    with pytest.raises(CommandError, match="No API key"):
        run("revokeapikey", "ffffffff")


@pytest.mark.django_db
def test_the_first_bootstrap_ends_with_the_next_two_commands():
    lines = run("bootstrap").splitlines()
    assert lines[-1].startswith("=====")
    assert [line.strip() for line in lines[-3:-1]] == [
        '.venv/bin/python manage.py createagent my-agent --name "My agent"',
        ".venv/bin/python manage.py createapikey --role agent --agent my-agent",
    ]


@pytest.mark.django_db
def test_bootstrap_is_idempotent():
    first = run("bootstrap")
    assert "password:" in first
    raw_key = [line.strip() for line in first.splitlines() if line.strip().startswith("mp_")][0]
    second = run("bootstrap")
    assert "mp_" not in second and "changepassword" in second
    assert get_user_model().objects.filter(is_superuser=True).count() == 1
    assert ApiKey.objects.filter(role="admin").count() == 1
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    assert client.get("/v1/agents").status_code == 200
    assert client.get("/v1/agents/me").status_code == 403
