"""Browser tests: Playwright drives Debian's Chromium against a live server.

Screenshots of each page go to tests/artifacts/ (ignored by git)."""

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    """One browser per test module. Playwright's sync API runs an event loop in this thread while it is open,
    so it is closed before other modules (which may run asyncio themselves) start."""
    if not shutil.which(CHROMIUM):
        if os.environ.get("REQUIRE_BROWSER"):
            pytest.fail(f"REQUIRE_BROWSER is set but {CHROMIUM} is missing (apt-get install chromium)")
        pytest.skip(f"needs Chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls the tests make are still
    # synchronous and on their own connection.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def staff(transactional_db, django_user_model):
    return django_user_model.objects.create_superuser("staff", "staff@example.com", "correct-horse-9")


@pytest.fixture
def page(chromium, live_server, staff, request):
    """A signed-in admin page; ``page.shot(name)`` saves a screenshot under tests/artifacts/."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    ARTIFACTS.mkdir(exist_ok=True)

    def shot(name: str) -> None:
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}-{name}.png"), full_page=True)

    page.shot = shot
    page.base = live_server.url
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "staff")
    page.fill("#id_password", "correct-horse-9")
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")
    yield page
    context.close()
