"""A failed load names the file that could not be fetched and what to do about it (issue 12), on a figure page
(Python in the page) and on the exercises page (Python in a worker the page cannot watch); the pre-rendered
content stays."""

from __future__ import annotations

import pytest

CASES = [
    # (page, a file the page needs, how it fails, what the message must say)
    ("figures/calculator.html", "pyodide/python_stdlib.zip", 404, "copy the whole dist/ folder"),
    ("figures/calculator.html", "wheels/enginelab-", 404, "copy the whole dist/ folder"),
    ("figures/calculator.html", "pyodide/pyodide.asm.wasm", "abort", "the server did not answer"),
    ("figures/calculator.html", "py/main.py", 500, "HTTP 500"),
    ("exercises.html", "pyodide/pyodide.asm.wasm", 404, "copy the whole dist/ folder"),
    ("exercises.html", "py/exercises_worker.py", 404, "copy the whole dist/ folder"),
]


@pytest.mark.parametrize("path, file, how, says", CASES)
def test_a_failed_load_names_the_file(page, guard, site, path, file, how, says):
    guard.allow_problems = True  # the failed request is the point of the test

    def fail(route):
        if file in route.request.url:
            if how == "abort":
                route.abort("connectionreset")
            else:
                route.fulfill(status=how, body="no")
        else:
            route.fallback()  # the offline guard's handler

    page.route("**/*", fail)
    page.goto(site.url(path))
    page.wait_for_function("() => document.documentElement.dataset.ready === 'error'", timeout=60_000)
    status = page.locator("#status").inner_text()
    name = file.rstrip("-")
    assert f"Could not fetch {name}" in status, status
    assert says in status, status
    assert page.evaluate("document.documentElement.dataset.failedFile").startswith(name)
    if path.startswith("figures/"):
        assert page.locator("#figure svg").count() >= 1  # the pre-rendered figure stays
        assert "The figure below shows the default settings." in status
    else:
        assert page.locator("section.exercise").count() == 4
        assert "The tasks and the starter code below stay readable." in status
    assert not guard.blocked  # nothing left the site
