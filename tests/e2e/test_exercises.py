"""The exercises page in a real Chromium, offline (every request outside the local site is aborted), served by a
plain static server without COOP/COEP headers.

For each exercise: type a solution into the py-editor (CodeMirror), run it, see "correct" (and a chart where the
exercise asks for one); type a wrong answer and see "not yet" with a hint. The expected verdict and hint come from
enginelab.exercises.run_cell run here in CPython on the same code. An exception shows a traceback under its cell,
and the page (and the other cells) keep working.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from enginelab import exercises as ex

from .harness import Guard, wait_ready

PAGE = "exercises.html"
SOLUTIONS = Path(ex.__file__).parent / "solutions"


def solution(n: int) -> str:
    return (SOLUTIONS / f"ex{n}.py").read_text().strip()


WRONG = {
    1: (solution(1) + "\nkv_gb = kv_gb / 2", "both K and V"),
    2: (solution(2) + "\ntok_s = [t / 0.7 for t in tok_s]", "70%"),
    3: (ex.EXERCISES[3].starter.strip(), "lpm"),
    4: (solution(4) + "\nknee_batch = round(ridge)", "ridge_batch"),
}


@pytest.fixture(scope="module")
def lab(browser, site):
    """One exercises page for the module (Python boots once); no browser problems allowed at the end."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    guard = Guard(ctx, site.origin)
    page = ctx.new_page()
    page.goto(site.url(PAGE))
    wait_ready(page)
    yield page
    problems = guard.problems()
    ctx.close()
    assert not problems, f"browser problems: {problems}"


def editor_code(page, n: int) -> str:
    return page.evaluate("(n) => document.getElementById(`ex${n}-editor`).code", n)


def type_code(page, n: int, code: str):
    """Replace the editor's text the way a user would: click, select all, delete, type (paste-like insert)."""
    content = page.locator(f"#ex{n} .cm-content")
    content.click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(code)
    assert editor_code(page, n) == code


def run(page, n: int, via: str = "button") -> dict:
    before = int(page.evaluate("(n) => document.getElementById(`ex${n}`).dataset.runs || '0'", n))
    if via == "button":
        page.click(f"#ex{n} button[data-action=run]")
    else:
        page.locator(f"#ex{n} .cm-content").click()
        page.keyboard.press(via)
    page.wait_for_function(
        "([n, k]) => Number(document.getElementById(`ex${n}`).dataset.runs || 0) > k", arg=[n, before], timeout=30_000
    )
    return page.evaluate(
        """(n) => {
        const s = document.getElementById(`ex${n}`);
        const v = s.querySelector('.ex-verdict');
        const q = (sel) => s.querySelector(sel)?.textContent ?? null;
        return {verdict: v.dataset.verdict, text: v.textContent, hint: q('.ex-hint').trim(),
                stdout: q('.ex-stdout'), error: q('.ex-traceback'),
                plots: s.querySelectorAll('.ex-plots svg[role=img]').length,
                plot_titles: [...s.querySelectorAll('.ex-plots svg > title')].map(t => t.textContent),
                run_ms: Number(s.dataset.runMs)};
    }""",
        n,
    )


def test_page_is_ready_offline_without_cross_origin_isolation(lab):
    assert lab.evaluate("crossOriginIsolated") is False  # no SharedArrayBuffer: a plain static server suffices
    assert lab.locator(".cm-content").count() == 4
    for n in range(1, 5):
        for action in ("run", "reset", "solution"):
            assert lab.locator(f"#ex{n} button[data-action={action}]").is_enabled()
        assert editor_code(lab, n) == ex.EXERCISES[n].starter.strip()
    assert lab.locator("#status").is_hidden()
    assert lab.evaluate("scrollY") == 0  # py-editor's focus on each new editor did not scroll the page


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_solution_is_correct_and_wrong_answer_is_not_yet(lab, n):
    code = solution(n)
    type_code(lab, n, code)
    got = run(lab, n)
    want = ex.run_cell(n, code)
    assert got["error"] is None, got["error"]
    assert got["verdict"] == "correct", got
    assert got["hint"] == want["hint"]
    if ex.EXERCISES[n].wants_plot:
        assert got["plots"] == 1 and got["plot_titles"][0], got
    else:
        assert got["plots"] == 0

    code, needle = WRONG[n]
    type_code(lab, n, code)
    got = run(lab, n)
    want = ex.run_cell(n, code)
    assert want["verdict"] == "not yet"
    assert got["verdict"] == "not-yet" and got["text"].startswith("Not yet.")
    assert got["hint"] == want["hint"] and needle in got["hint"]


def test_exception_shows_a_traceback_and_the_page_keeps_working(lab):
    type_code(lab, 2, "import perf_model\n\ndef speed(n):\n    return 1 / n\n\nspeed(0)")
    got = run(lab, 2)
    assert got["verdict"] == "not-yet"
    tb = got["error"]
    assert tb.startswith("Traceback (most recent call last):")
    assert 'File "<exercise 2>", line 6, in <module>' in tb and "return 1 / n" in tb
    assert tb.rstrip().endswith("ZeroDivisionError: division by zero")
    assert "exercises.py" not in tb and "_pyodide" not in tb
    # a syntax error too
    type_code(lab, 4, "knee_batch = (")
    got = run(lab, 4)
    assert "SyntaxError" in got["error"] and got["verdict"] == "not-yet"
    # the other cells, and the same cell once fixed, still run
    type_code(lab, 1, solution(1))
    assert run(lab, 1)["verdict"] == "correct"
    # while the next run of a cell is under way, the last run's traceback is not shown beside "Running…"
    type_code(lab, 2, "import time\ntime.sleep(1.5)\n" + solution(2))
    lab.click("#ex2 button[data-action=run]")
    lab.wait_for_function("document.getElementById('ex2').dataset.running === 'true'")
    assert lab.locator("#ex2 .ex-traceback").count() == 0
    assert lab.locator("#ex2 .ex-running").text_content() == "Running…"
    lab.wait_for_function("document.getElementById('ex2').dataset.running === 'false'", timeout=30_000)
    type_code(lab, 2, solution(2))
    assert run(lab, 2)["verdict"] == "correct"


def test_keyboard_run_reset_and_show_a_solution(lab):
    type_code(lab, 3, solution(3))
    assert run(lab, 3, via="Control+Enter")["verdict"] == "correct"
    mine = "workload = []"
    type_code(lab, 3, mine)
    assert run(lab, 3, via="Shift+Enter")["verdict"] == "not-yet"
    lab.click("#ex3 button[data-action=solution]")
    assert editor_code(lab, 3) == solution(3)
    assert lab.locator("#ex3 button[data-action=solution]").inner_text() == "Back to my code"
    lab.click("#ex3 button[data-action=solution]")
    assert editor_code(lab, 3) == mine
    # Tab indents inside the editor; Esc then Tab moves on to the Run button
    lab.locator("#ex3 .cm-content").click()
    lab.keyboard.press("Escape")
    lab.keyboard.press("Tab")
    assert lab.evaluate("document.activeElement.closest('#ex3') && document.activeElement.dataset.action") == "run"
    lab.click("#ex3 button[data-action=reset]")
    assert editor_code(lab, 3) == ex.EXERCISES[3].starter.strip()
    assert lab.locator("#ex3 .ex-output").inner_html() == ""


def test_print_output_and_plot_bars_show_under_the_cell(lab):
    code = (
        "from enginelab import plot\nprint('hello <b>')\n"
        "plot.bars(['F16', 'Q4_K_M'], [16.1, 4.9], title='Size <i>', ylabel='GB')"
    )
    type_code(lab, 1, code)
    got = run(lab, 1)
    assert got["stdout"] == "hello <b>\n"  # as text, not markup
    assert got["plots"] == 1 and got["plot_titles"] == ["Size <i>"]
    assert lab.locator("#ex1 .ex-plots i").count() == 0


HOSTILE_CELL = """
from enginelab import plot
# markup of its own, handed to the display hook: never shown
plot._show(plot.SVG('<img src=x onerror="window.pwned = 1; document.title = 1">'))
# a real chart whose title is markup, and whose data was then swapped for more: drawn from data, text stays text
c = plot.line([1, 2], [3, 4], title='<img src=x onerror="window.pwned = 2">', xlabel='x', ylabel='y')
c.spec = ("line", dict(c.spec[1], title="<script>window.pwned = 3</script>"))
# the page's DOM is not reachable from the worker
for how in ("js", "pyscript"):
    try:
        if how == "js":
            import js
            js.document.title = "pwned"
        else:
            from pyscript import document
            document.title = "pwned"
        print(how, "reached a document")
    except Exception as e:
        print(how, "no DOM here:", type(e).__name__)
"""


def test_a_cell_cannot_reach_the_pages_dom(lab):
    title = lab.title()
    type_code(lab, 1, HOSTILE_CELL.strip())
    got = run(lab, 1)
    lab.wait_for_timeout(300)  # an image error handler would have run by now
    assert lab.evaluate("window.pwned") is None and lab.title() == title
    out = "#ex1 .ex-output"
    assert lab.locator(f"{out} img, {out} script, {out} foreignObject").count() == 0
    assert got["plots"] == 1 and got["plot_titles"] == ["<script>window.pwned = 3</script>"]  # as text
    assert "reached a document" not in (got["stdout"] or "")
    # even markup straight from a compromised worker is rebuilt from the allow-list, not inserted
    kept = lab.evaluate(
        """() => {
        const bad = '<figure class="plot-figure"><svg class="chart plot" viewBox="0 0 10 10" onload="window.pwned=4">' +
          '<title id="plot-0123456789-title">ok</title><foreignObject><img src=x onerror="window.pwned=5"></foreignObject>' +
          '<a href="javascript:window.pwned=6"><text x="1" y="2" onclick="window.pwned=7" style="fill:red">hi</text></a>' +
          '<script>window.pwned=8</script><text id="controls" x="1">x</text></svg></figure><img src=x onerror="window.pwned=9">';
        const box = document.createElement('div');
        box.id = 'sanitised';
        box.append(window.enginelabExercises.safeChart(bad));
        document.body.append(box);
        return box.innerHTML;
    }"""
    )
    lab.wait_for_timeout(300)
    assert lab.evaluate("window.pwned") is None
    for needle in (
        "onload",
        "onerror",
        "onclick",
        "<img",
        "<script",
        "foreignObject",
        "href",
        "style=",
        'id="controls"',
    ):
        assert needle not in kept, (needle, kept)
    assert '<title id="plot-0123456789-title">ok</title>' in kept and ">hi</text>" not in kept  # <a> dropped whole
    lab.evaluate("document.getElementById('sanitised').remove()")


def test_a_cell_that_closes_the_worker_is_reported_and_python_restarts(lab):
    restarts = int(lab.evaluate("document.documentElement.dataset.pythonRestarts || '0'"))
    type_code(lab, 3, "import js\nprint('closing the worker')\njs.close()")
    got = run(lab, 3)
    assert got["verdict"] == "not-yet"
    assert "stopped responding" in got["error"] and "js.close()" in got["error"]
    assert got["stdout"] == "closing the worker\n"  # the cell's own output is kept above the message
    assert int(lab.evaluate("document.documentElement.dataset.pythonRestarts")) == restarts + 1
    lab.wait_for_function("() => !document.querySelector('#ex3 button[data-action=run]').disabled", timeout=90_000)
    type_code(lab, 3, solution(3))
    assert run(lab, 3)["verdict"] == "correct"


def test_stop_reports_only_on_the_running_cell(lab):
    type_code(lab, 4, "while True:\n    pass")
    type_code(lab, 1, solution(1))
    runs1 = int(lab.evaluate("document.getElementById('ex1').dataset.runs || '0'"))
    runs4 = int(lab.evaluate("document.getElementById('ex4').dataset.runs || '0'"))
    lab.click("#ex4 button[data-action=run]")
    lab.locator("#ex4 button[data-action=stop]").wait_for(state="visible", timeout=10_000)
    lab.click("#ex1 button[data-action=run]")  # queued behind the runaway cell
    assert "Waiting for exercise 4" in lab.locator("#ex1 .ex-state").inner_text()
    assert lab.locator("#ex1 button[data-action=stop]").is_hidden()
    lab.click("#ex4 button[data-action=stop]")
    lab.wait_for_function("(k) => Number(document.getElementById('ex4').dataset.runs || 0) > k", arg=runs4)
    assert lab.locator("#ex4 .ex-traceback").inner_text().startswith("Stopped")
    # the queued cell is not told it was stopped: it runs on the new worker
    lab.wait_for_function(
        "(k) => Number(document.getElementById('ex1').dataset.runs || 0) > k", arg=runs1, timeout=90_000
    )
    assert lab.locator("#ex1 .ex-verdict").get_attribute("data-verdict") == "correct"
    assert lab.locator("#ex1 .ex-traceback").count() == 0


def test_stop_ends_a_runaway_cell_and_python_comes_back(lab):
    type_code(lab, 4, "while True:\n    pass")
    before = int(lab.evaluate("document.getElementById('ex4').dataset.runs || '0'"))
    lab.click("#ex4 button[data-action=run]")
    stop = lab.locator("#ex4 button[data-action=stop]")
    stop.wait_for(state="visible", timeout=10_000)
    assert lab.locator("#ex4 button[data-action=run]").is_disabled()
    stop.click()
    lab.wait_for_function("(k) => Number(document.getElementById('ex4').dataset.runs || 0) > k", arg=before)
    assert lab.locator("#ex4 .ex-traceback").inner_text().startswith("Stopped")
    assert lab.locator("#ex4 .ex-verdict").get_attribute("data-verdict") == "not-yet"
    assert stop.is_hidden()
    # a new worker starts; every cell runs again
    lab.wait_for_function("() => !document.querySelector('#ex1 button[data-action=run]').disabled", timeout=90_000)
    type_code(lab, 4, solution(4))
    assert run(lab, 4)["verdict"] == "correct"
    type_code(lab, 1, solution(1))
    assert run(lab, 1)["verdict"] == "correct"
