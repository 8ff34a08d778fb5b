"""Browser-test fixtures: one server and one Chromium for the whole session, one guarded context per test.

    def test_something(page_at):
        page = page_at("figures/calculator.html?ctx=4096")   # waits for <html data-ready="true">
        ...
    # after the test, the `guard` fixture asserts: no off-site request, no console/page error, no failed request.

Tests that expect an error themselves can call `guard.clear()` or `guard.expect_problems()`.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import sync_playwright

from .harness import Guard, Site, launch, wait_ready


def pytest_collection_modifyitems(items):
    for item in items:
        if "/e2e/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def site():
    s = Site()
    yield s
    s.close()


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as pw:
        b = launch(pw)
        yield b
        b.close()


@pytest.fixture
def context(browser, site, request):
    kw = getattr(request, "param", None) or {}
    ctx = browser.new_context(**kw)
    yield ctx
    ctx.close()


@pytest.fixture
def guard(context, site):
    g = Guard(context, site.origin)
    g.allow_problems = False
    yield g
    if not g.allow_problems:
        problems = g.problems()
        assert not problems, f"browser problems: {problems}"


@pytest.fixture
def page(context, guard):
    return context.new_page()


@pytest.fixture
def page_at(page, site):
    """Open a path (with query) on the local site and wait for data-ready="true"; returns the page."""

    def go(path_and_query: str, ready: bool = True):
        page.goto(site.url(path_and_query))
        if ready:
            wait_ready(page)
        return page

    return go
