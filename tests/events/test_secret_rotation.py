"""Rotating a webhook's signing secret (``POST /v1/webhooks/{id}/rotate-secret``, admin keys): the new secret
is shown once; the replaced one goes on signing beside it for the time asked, so a receiver on either secret
accepts every delivery meanwhile; with 0 it stops at once; bad input is a 400, another role a 403."""

from datetime import timedelta

import pytest
from django.utils import timezone
from memoryplatform_client import WebhookVerificationError, verify_webhook

from events.models import WebhookSubscription
from tests.events.conftest import deliver
from tests.events.receiver import receiving
from tests.helpers import assert_envelope

pytestmark = pytest.mark.django_db(transaction=True)


def _rotate(admin_api, subscription_id: str, **body):  # type: ignore[no-untyped-def]
    return admin_api.post(f"/v1/webhooks/{subscription_id}/rotate-secret", body, format="json")


def _verified_by(secret: str, delivery) -> bool:  # type: ignore[no-untyped-def]
    try:
        verify_webhook(secret=secret, body=delivery.body, headers=delivery.headers)
    except WebhookVerificationError:
        return False
    return True


def test_both_secrets_sign_until_the_previous_one_ends(admin_api, agent_a, agent_a_api, subscribe, put):
    with receiving() as receiver:
        old = subscribe(receiver.url, agent_a.id)
        rotated = _rotate(admin_api, old["id"], previousSecretValidSeconds=3600)
        assert rotated.status_code == 200, rotated.content
        new = rotated.json()
        assert new["secret"].startswith("whsec_") and new["secret"] != old["secret"]
        assert new["previousSecretExpiresAt"] is not None
        assert "secret" not in admin_api.get(f"/v1/webhooks/{old['id']}").json()

        put(agent_a_api, userId="u1", key="city", value="Lisbon")
        deliver()
        during = receiver.wait_for(1)[-1]
        assert _verified_by(new["secret"], during) and _verified_by(old["secret"], during)
        assert len(during.headers["webhook-signature"].split(",")) == 2

        # The previous secret's time is over: only the new one signs.
        WebhookSubscription.objects.filter(pk=old["id"]).update(
            previous_secret_until=timezone.now() - timedelta(seconds=1)
        )
        put(agent_a_api, userId="u1", key="city", value="Porto")
        deliver()
        after = receiver.wait_for(2)[-1]
    assert _verified_by(new["secret"], after) and not _verified_by(old["secret"], after)
    assert "," not in after.headers["webhook-signature"]


def test_a_rotation_with_no_grace_stops_the_previous_secret_at_once(
    admin_api, agent_a, agent_a_api, subscribe, put
):
    with receiving() as receiver:
        old = subscribe(receiver.url, agent_a.id)
        new = _rotate(admin_api, old["id"], previousSecretValidSeconds=0).json()
        assert new["previousSecretExpiresAt"] is None
        put(agent_a_api, userId="u1", key="city", value="Lisbon")
        deliver()
        delivery = receiver.wait_for(1)[-1]
    assert _verified_by(new["secret"], delivery) and not _verified_by(old["secret"], delivery)


@pytest.mark.parametrize(
    "body", [{"previousSecretValidSeconds": -1}, {"previousSecretValidSeconds": 604801}, {"grace": 5}]
)
def test_bad_rotations_are_a_400_and_change_nothing(admin_api, agent_a, subscribe, body):
    created = subscribe("http://127.0.0.1:9/hook", agent_a.id)
    assert_envelope(_rotate(admin_api, created["id"], **body), 400, "bad_request")
    assert WebhookSubscription.objects.get(pk=created["id"]).secret == created["secret"]


def test_only_an_admin_rotates_and_an_unknown_id_is_a_404(
    admin_api, agent_a_api, viewer_api, anon_api, agent_a, subscribe
):
    created = subscribe("http://127.0.0.1:9/hook", agent_a.id)
    assert_envelope(_rotate(agent_a_api, created["id"]), 403, "forbidden")
    assert_envelope(_rotate(viewer_api, created["id"]), 403, "forbidden")
    assert _rotate(anon_api, created["id"]).status_code == 401
    assert WebhookSubscription.objects.get(pk=created["id"]).secret == created["secret"]
    assert_envelope(_rotate(admin_api, "7d0b5a9e-0000-4000-8000-000000000000"), 404, "not_found")
    assert_envelope(_rotate(admin_api, "not-a-uuid"), 404, "not_found")


def test_by_default_the_previous_secret_signs_for_a_day(admin_api, agent_a, subscribe):
    created = subscribe("http://127.0.0.1:9/hook", agent_a.id)
    before = timezone.now()
    rotated = _rotate(admin_api, created["id"])
    assert rotated.status_code == 200, rotated.content
    row = WebhookSubscription.objects.get(pk=created["id"])
    assert row.previous_secret == created["secret"] and row.secret == rotated.json()["secret"]
    assert (
        timedelta(hours=23, minutes=59) < row.previous_secret_until - before <= timedelta(days=1, seconds=5)
    )
