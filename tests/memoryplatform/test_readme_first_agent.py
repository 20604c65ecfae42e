"""The README's "Your first agent in five commands" runs as written: its bash block, against a live server
on the test database (the one change: the server's address)."""

import os
import re
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from tests.helpers import url_of_the_test_database

README = Path(settings.BASE_DIR) / "README.md"


def _first_agent_block() -> str:
    text = README.read_text()
    section = text[text.index("## Your first agent in five commands") :]
    return re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1)


@pytest.mark.django_db(transaction=True)
def test_the_first_agent_walkthrough_runs_as_written(live_server, settings):
    block = _first_agent_block()
    commands = [line for line in block.splitlines() if line and not line.startswith("  ")]
    assert len(commands) == 5, block
    env = {
        **os.environ,
        "DATABASE_URL": url_of_the_test_database(),
        "SECRET_KEY": settings.SECRET_KEY,
        "PUBLIC_ID_KEY": settings.PUBLIC_ID_KEY or "",
    }
    script = "set -euo pipefail\n" + block.replace("http://127.0.0.1:8000", live_server.url)
    done = subprocess.run(  # noqa: S603
        ["bash", "-c", script],  # noqa: S607
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answers = done.stdout
    assert answers.count('"value":"Hamburg"') == 3, answers  # the upsert, the recall, the recall by relevance
    assert '"sourceAgentId":"my-agent"' in answers
