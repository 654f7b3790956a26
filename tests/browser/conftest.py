"""A headless Chromium (Debian's package) driven by Playwright; the browser tests skip without it."""

import shutil

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser")  # Debian's package, and Ubuntu's name for it
VIEWPORT = {"width": 1280, "height": 720}


def chromium_path() -> str | None:
    return next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)


@pytest.fixture(scope="session")
def browser():
    """One Chromium for the whole session; skips, in one line, when it cannot start."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="the browser tests need playwright (`make test` installs it)")
    executable = chromium_path()
    if executable is None:
        pytest.skip("the browser tests need Debian's chromium package (`make test` installs it as root)")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A fresh 1280 x 720 page of its own browser context."""
    context = browser.new_context(viewport=VIEWPORT)
    yield context.new_page()
    context.close()
