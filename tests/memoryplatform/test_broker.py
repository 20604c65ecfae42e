"""Celery's broker: which one the settings choose, and the PostgreSQL broker's housekeeping (kombu's
SQLAlchemy transport keeps every message it delivered)."""

import pytest
from django.db import connection
from django.test import override_settings

from memoryplatform.broker import broker_kind, broker_url
from memoryplatform.tasks import housekeeping_prune_broker, vectors_drain
from tests.helpers import database_broker, publishing_to


def test_redis_when_redis_url_names_one_else_the_same_postgresql():
    assert broker_url(redis_url="redis://r:6379/0", database_url="postgres://u@h/db", database={}) == (
        "redis://r:6379/0"
    )
    assert broker_url(redis_url="", database_url="postgres://u:p@h:5433/db", database={}) == (
        "sqla+postgresql+psycopg://u:p@h:5433/db"
    )
    embedded = {"USER": "postgres", "PASSWORD": "", "HOST": "/srv/var/pg", "PORT": "5432", "NAME": "mp"}
    assert broker_url(redis_url="", database_url="", database=embedded) == (
        "sqla+postgresql+psycopg://postgres@/mp?host=%2Fsrv%2Fvar%2Fpg&port=5432"
    )
    assert [
        broker_kind(u) for u in ("redis://r", "rediss://r", "sqla+postgresql+psycopg://x", "memory://")
    ] == [
        "redis",
        "redis",
        "postgresql",
        "memory",
    ]


@pytest.mark.django_db(transaction=True)
def test_the_hourly_prune_deletes_the_postgresql_brokers_old_delivered_messages_only():
    broker = database_broker()
    with publishing_to(broker):
        for _ in range(3):
            vectors_drain.apply_async()
    # Two of them delivered two hours ago (a fetch marks a message so, and stamps the time).
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE kombu_message SET visible = false, \"timestamp\" = now() - interval '2 hours' "
            "WHERE id IN (SELECT id FROM kombu_message ORDER BY id LIMIT 2)"
        )

    with override_settings(CELERY_BROKER_URL=broker.url):
        assert housekeeping_prune_broker.apply().get() == 2

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM kombu_message WHERE visible")
        assert cursor.fetchone()[0] == 1  # the one waiting is kept
    with override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0"):
        assert housekeeping_prune_broker.apply().get() == 0  # Redis deletes what it delivers
