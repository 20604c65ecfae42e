"""The system checks on the database: DATABASE_URL names PostgreSQL, and the server is PostgreSQL 15 or later
with the vector extension 0.7.0 or later (halfvec) available; every failure is a check error with a hint,
never a traceback."""

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.checks import Error, run_checks
from django.test import override_settings

from memoryplatform.checks import server_problems


def _ids(messages: list) -> set[str]:
    return {message.id for message in messages if isinstance(message, Error)}


@pytest.mark.django_db
def test_the_embedded_server_passes_the_database_checks():
    assert not _ids(run_checks(databases=["default"])) & {f"memoryplatform.E00{n}" for n in range(1, 5)}


@pytest.mark.django_db
def test_the_database_checks_ask_the_server_only_when_asked_for_the_database(django_assert_num_queries):
    with django_assert_num_queries(0):
        run_checks(tags=["database"])  # no databases: as `manage.py check` without --database


@pytest.mark.parametrize("url", ["sqlite:////tmp/db.sqlite3", "mysql://u@h/db", "just-a-name"])
def test_a_database_url_that_is_not_postgresql_is_an_error_with_a_hint(url):
    with override_settings(DATABASE_URL=url):
        errors = [m for m in run_checks(databases=["default"]) if m.id == "memoryplatform.E001"]
    assert len(errors) == 1
    assert "postgres://" in errors[0].msg
    assert "unset DATABASE_URL" in errors[0].hint


def test_a_current_server_with_vector_has_no_problem():
    assert server_problems(version_num=180001, version="18.1", vector_available="0.8.6") == []
    assert server_problems(version_num=150000, version="15.0", vector_available="0.7.0") == []
    assert (
        server_problems(
            version_num=150000, version="15.0", vector_available="0.7.0", vector_installed="0.7.0"
        )
        == []
    )


def test_a_server_older_than_15_is_an_error_naming_its_version():
    (error,) = server_problems(version_num=140011, version="14.11", vector_available="0.8.0")
    assert error.id == "memoryplatform.E002"
    assert "14.11" in error.msg and "15 or later" in error.msg
    assert "unset DATABASE_URL" in error.hint


def test_a_server_without_vector_is_an_error_saying_to_install_pgvector():
    (error,) = server_problems(version_num=150020, version="15.20", vector_available=None)
    assert error.id == "memoryplatform.E003"
    assert "'vector'" in error.msg and "15.20" in error.msg
    assert "pgvector" in error.hint


def test_an_old_server_without_vector_gets_both_errors():
    problems = server_problems(version_num=130000, version="13.0", vector_available=None)
    assert _ids(problems) == {"memoryplatform.E002", "memoryplatform.E003"}


def test_a_pgvector_without_halfvec_is_an_error_saying_to_upgrade_it():
    (error,) = server_problems(version_num=160004, version="16.4", vector_available="0.6.2")
    assert error.id == "memoryplatform.E013"
    assert "pgvector 0.6.2" in error.msg and "16.4" in error.msg and "0.7.0 or later" in error.msg
    assert "Upgrade pgvector" in error.hint


def test_an_old_pgvector_created_in_the_database_is_an_error_saying_to_update_the_extension():
    # The server has 0.8 but this database still has the 0.5 it was created with: halfvec is missing here.
    (error,) = server_problems(
        version_num=160004, version="16.4", vector_available="0.8.0", vector_installed="0.5.1"
    )
    assert error.id == "memoryplatform.E013"
    assert "pgvector 0.5.1 is installed in this database" in error.msg
    assert "ALTER EXTENSION vector UPDATE" in error.hint
    # Nothing newer on the server: the extension cannot be updated in place.
    (error,) = server_problems(
        version_num=160004, version="16.4", vector_available="0.6.0", vector_installed="0.6.0"
    )
    assert "Upgrade pgvector" in error.hint


def test_a_development_pgvector_is_read_by_its_numbers():
    assert server_problems(version_num=170000, version="17.0", vector_available="0.7.0-dev") == []
    (error,) = server_problems(version_num=170000, version="17.0", vector_available="0.6.10")
    assert error.id == "memoryplatform.E013"


@pytest.mark.parametrize(
    ("url", "error_id"),
    [
        ("postgres://nobody@127.0.0.1:1/nothing", "memoryplatform.E004"),  # nothing listens on port 1
        ("sqlite:///db.sqlite3", "memoryplatform.E001"),
    ],
)
def test_migrate_against_a_wrong_database_says_so_without_a_traceback(tmp_path, url, error_id):
    env = {**os.environ, "SECRET_KEY": "test", "DATABASE_URL": url, "DATA_DIR": str(tmp_path)}
    result = subprocess.run(  # noqa: S603 (our own interpreter, fixed arguments)
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert error_id in result.stderr
    assert "Traceback" not in result.stderr


def test_an_embedded_server_that_cannot_start_is_a_check_error(monkeypatch):
    from memoryplatform import store
    from memoryplatform.embedded_db.server import EmbeddedServerError

    def cannot_start(**kwargs: object) -> None:
        raise EmbeddedServerError("initdb failed: no space left on device")

    monkeypatch.setattr(store, "server_facts", cannot_start)
    with override_settings(DATABASE_URL=""):
        errors = [m for m in run_checks(databases=["default"]) if m.id == "memoryplatform.E004"]
    assert len(errors) == 1
    assert "the embedded PostgreSQL" in errors[0].msg and "no space left" in errors[0].msg


@pytest.mark.django_db
@pytest.mark.parametrize("language", ["memory_simple", "simple", "english", "pg_catalog.german"])
def test_a_search_language_the_server_has_passes(language):
    with override_settings(SEARCH_LANGUAGE=language):
        assert "memoryplatform.E005" not in _ids(run_checks(databases=["default"]))


@pytest.mark.django_db
def test_a_search_language_the_server_lacks_is_an_error_naming_it():
    with override_settings(SEARCH_LANGUAGE="klingon"):
        (error,) = [m for m in run_checks(databases=["default"]) if m.id == "memoryplatform.E005"]
    assert "'klingon'" in error.msg and "pg_ts_config" in error.hint
