"""The embedded server's log keeps no row values: a constraint error logs its primary message only, not the
failing statement (whose text holds the values) nor its DETAIL line (``Key (...)=(...)``), so a user's data
does not outlive a GDPR erasure in ``DATA_DIR/pg.log`` (issue 33, finding 3)."""

from pathlib import Path

import pytest
from django.conf import settings
from django.db import IntegrityError, connection, transaction

from tests.factories import MemoryEntryFactory

pytestmark = pytest.mark.skipif(
    bool(settings.DATABASE_URL), reason="DATABASE_URL: the server and its log are not the embedded ones"
)


def test_the_embedded_server_logs_errors_without_statements_or_details(db):
    with connection.cursor() as cursor:
        cursor.execute("SHOW log_min_error_statement")
        assert cursor.fetchone()[0] == "panic"
        cursor.execute("SHOW log_error_verbosity")
        assert cursor.fetchone()[0] == "terse"


def test_a_constraint_error_leaves_no_value_in_the_log(db):
    log = Path(settings.DATA_DIR) / "pg.log"
    start = log.stat().st_size
    MemoryEntryFactory(user_id="log-probe-user", key="log-probe-key-5b1f", value="v", visibility="global")
    with pytest.raises(IntegrityError), transaction.atomic():
        MemoryEntryFactory(
            user_id="log-probe-user", key="log-probe-key-5b1f", value="secret-value-93c2", visibility="global"
        )
    with log.open("rb") as out:
        out.seek(start)
        written = out.read().decode(errors="replace")
    assert "memory_global_upsert_key" in written  # the error is logged ...
    assert "log-probe" not in written and "secret-value-93c2" not in written  # ... without the row's values
