"""Browser tests: Playwright drives Debian's Chromium against a live server.

Screenshots of each page go to ``$ADMIN_SCREENSHOTS`` (default: ``memoryplatform-admin`` in the system's temp
directory), one per width where a test takes them at 1366x768 and 1920x1080."""

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("ADMIN_SCREENSHOTS") or Path(tempfile.gettempdir()) / "memoryplatform-admin")
# The screens staff use: a laptop's and a desktop's.
SCREENS = {"1366": {"width": 1366, "height": 768}, "1920": {"width": 1920, "height": 1080}}
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
    """A signed-in admin page at 1366x768; ``page.shot(name)`` saves a screenshot in ARTIFACTS,
    ``page.shots(name)`` one per screen width."""
    context = chromium.new_context(viewport=SCREENS["1366"])
    page = context.new_page()
    page.set_default_timeout(15_000)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def shot(name: str) -> None:
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}-{name}.png"), full_page=True)

    def shots(name: str) -> None:
        """A screenshot at each of SCREENS, then back to the first (1366x768)."""
        for width, size in reversed(SCREENS.items()):
            page.set_viewport_size(size)
            page.screenshot(path=str(ARTIFACTS / f"{request.node.name}-{name}-{width}.png"), full_page=True)

    page.shot = shot
    page.shots = shots
    page.base = live_server.url
    page.staff = staff
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "staff")
    page.fill("#id_password", "correct-horse-9")
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")
    yield page
    context.close()
