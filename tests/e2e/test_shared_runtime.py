"""Many figures, one Python (site/assets/runtime.js, live.js, site/py/main.py, sw.js), in Chromium.

- A course page on another site embeds four figures in view and a fifth far below: the four go live by
  themselves on one runtime (one frame leads, three follow), each showing CPython's numbers for its own state,
  and stay correct when changed; the fifth does not start, and says so, until it is scrolled to, then joins.
- The leader's frame is removed: the others elect a new leader and keep working.
- The service worker: after a first visit the site works with the server gone, pages never opened included;
  a new build replaces the cache whole once the old build's pages are closed.
"""

from __future__ import annotations

import html
import re
import shutil
import sys
import time
from urllib.parse import urlsplit

import pytest

from enginelab import page as pg
from enginelab.figures import REGISTRY

from .harness import DIST, ROOT, Guard, Site, _build_module, readouts, url_search, wait_ready

READOUT = re.compile(r'data-readout="([^"]+)"[^>]*?data-value="([^"]*)"')


def cpython_readouts(figure_id: str, query: str) -> dict:
    """{name: data-value} of the figure rendered by CPython for the state in query (as the frames render it)."""
    fig = REGISTRY[figure_id]
    state, _ = fig.SPEC.from_query(query)
    view = pg.view(fig, state, defer=True)
    return {k: html.unescape(v) for k, v in READOUT.findall(str(view["figure"]))}


def same_numbers(got: dict, want: dict, what: str):
    assert set(got) == set(want), (what, sorted(set(got) ^ set(want)))
    for k, v in want.items():
        try:
            # the same code on the same IEEE doubles, but Pyodide's 3.14 sums floats compensated: a few ulps
            assert float(got[k]) == pytest.approx(float(v), rel=1e-12, abs=1e-300), (what, k, got[k], v)
        except ValueError:
            assert got[k] == v, (what, k, got[k], v)


def live_query(frame) -> str:
    return url_search(frame)


FIGURES = [
    ("calculator", "machine=rtx3060&ctx=16384"),
    ("roofline", ""),
    ("decode-curve", ""),
    ("kv-managers", "step=5"),
]


def _host(site, host_dir, extra=""):
    frames = "".join(
        f'<iframe id="f{i}" src="{site.url(f"figures/{fid}.html")}{"?" + q if q else ""}" title="{fid}" '
        'style="width:620px;height:560px;border:0"></iframe>'
        for i, (fid, q) in enumerate(FIGURES)
    )
    (host_dir / "course.html").write_text(
        '<!doctype html><html><head><meta charset="utf-8"><title>Course</title><link rel="icon" href="data:,">'
        f"</head><body><h1>Week 3</h1>{frames}{extra}</body></html>"  # no embed.js: frames keep their size, in view
    )


def _frame(page, i):
    return page.locator(f"#f{i}").element_handle().content_frame()


@pytest.fixture
def course(browser, site, tmp_path):
    """A course page served from another site (localhost, against the site's 127.0.0.1) in a 1280 x 1300 px
    window, with the four figures in view (2 x 2); yields (page, guard, make(extra_html))."""
    host = Site(tmp_path, check_built=False)
    origin = f"http://localhost:{host.port}"
    ctx = browser.new_context(viewport={"width": 1280, "height": 1300})
    guard = Guard(ctx, site.origin, also=(origin,))
    page = ctx.new_page()

    def make(extra=""):
        _host(site, tmp_path, extra)
        page.goto(f"{origin}/course.html")
        return page

    try:
        yield page, guard, make, site
        assert not guard.problems(), guard.problems()
    finally:
        ctx.close()
        host.close()


def test_four_embeds_share_one_runtime_and_show_cpythons_numbers(course):
    page, guard, make, site = course
    # a fifth figure far below the fold (not lazy: it loads at once, and must still wait to be seen)
    make(
        f'<div style="height:2600px"></div><iframe id="f4" src="{site.url("figures/tiers.html")}" title="tiers"'
        ' style="width:620px;height:500px;border:0"></iframe>'
    )
    for i in range(len(FIGURES)):
        _frame(page, i).wait_for_selector("html[data-ready=true]", state="attached", timeout=120_000)
    modes = [_frame(page, i).evaluate("document.documentElement.dataset.runtime") for i in range(len(FIGURES))]
    assert sorted(modes) == ["follower", "follower", "follower", "leader"], modes
    booted = [_frame(page, i).evaluate("'boot_start' in window.enginelab_timing") for i in range(len(FIGURES))]
    assert booted.count(True) == 1, booted  # one Pyodide on the page
    # the followers reach the leader's window (same origin on one host page) and call it directly
    direct = [_frame(page, i).evaluate("!!(window.enginelab_runtime.direct)") for i in range(len(FIGURES))]
    assert [d for d, m in zip(direct, modes) if m == "follower"] == [True] * 3, (direct, modes)
    for i, (fid, q) in enumerate(FIGURES):
        frame = _frame(page, i)
        same_numbers(readouts(frame), cpython_readouts(fid, q), fid)
        assert frame.locator("#status").is_hidden()
    # the frame below the fold has not started, and says why; scrolled to, it joins the runtime there is
    off = _frame(page, 4)
    off.wait_for_load_state()
    assert off.evaluate("document.documentElement.dataset.ready") == "false"
    assert "scroll" in off.locator("#status-text").text_content()
    assert off.evaluate("window.enginelab_timing.in_view") is None
    page.locator("#f4").scroll_into_view_if_needed()
    off.wait_for_selector("html[data-ready=true]", state="attached", timeout=60_000)
    assert off.evaluate("document.documentElement.dataset.runtime") == "follower"
    same_numbers(readouts(off), cpython_readouts("tiers", ""), "tiers")
    # every follower answers its own changes with CPython's numbers for its new state
    page.locator("#f0").scroll_into_view_if_needed()
    for i, (fid, _q) in enumerate(FIGURES):
        frame = _frame(page, i)
        if frame.evaluate("document.documentElement.dataset.runtime") == "leader":
            continue
        before = live_query(frame)
        sel = frame.locator("#controls select:not([disabled])").first
        options = sel.evaluate("s => [...s.options].map(o => o.value)")
        current = sel.input_value()
        calls = frame.evaluate("window.enginelab_runtime.seq")  # requests that went over the channel
        sel.select_option(next(o for o in options if o != current))
        frame.wait_for_function(f"location.search.slice(1) !== {before!r}", timeout=30_000)
        assert frame.evaluate("window.enginelab_runtime.seq") == calls  # the change took the direct path
        same_numbers(readouts(frame), cpython_readouts(fid, live_query(frame)), f"{fid} changed")


def test_the_leader_leaves_and_the_others_keep_working(course):
    page, guard, make, _site = course
    make()
    for i in range(len(FIGURES)):
        _frame(page, i).wait_for_selector("html[data-ready=true]", state="attached", timeout=120_000)
    lead = next(
        i
        for i in range(len(FIGURES))
        if _frame(page, i).evaluate("document.documentElement.dataset.runtime") == "leader"
    )
    page.evaluate(f"document.getElementById('f{lead}').remove()")
    rest = [i for i in range(len(FIGURES)) if i != lead]
    # a follower changes its state: a new leader is elected, boots, opens the session again and answers
    i = rest[0]
    fid = FIGURES[i][0]
    frame = _frame(page, i)
    before = live_query(frame)
    sel = frame.locator("#controls select:not([disabled])").first
    options = sel.evaluate("s => [...s.options].map(o => o.value)")
    sel.select_option(next(o for o in options if o != sel.input_value()))
    frame.wait_for_function(f"location.search.slice(1) !== {before!r}", timeout=120_000)
    same_numbers(readouts(frame), cpython_readouts(fid, live_query(frame)), f"{fid} after the leader left")
    modes = [_frame(page, j).evaluate("document.documentElement.dataset.runtime") for j in rest]
    assert modes.count("leader") == 1, modes
    for j in rest:  # and every other one still answers
        other = _frame(page, j)
        before = live_query(other)
        sel = other.locator("#controls select:not([disabled])").first
        options = sel.evaluate("s => [...s.options].map(o => o.value)")
        sel.select_option(next(o for o in options if o != sel.input_value()))
        other.wait_for_function(f"location.search.slice(1) !== {before!r}", timeout=60_000)
        same_numbers(readouts(other), cpython_readouts(FIGURES[j][0], live_query(other)), FIGURES[j][0])


# ---------------------------------------------------------------------------------------------------------
# The service worker
# ---------------------------------------------------------------------------------------------------------
def test_service_worker_offline_after_a_first_visit_and_a_clean_update(browser, tmp_path):
    copy = tmp_path / "site"
    shutil.copytree(DIST, copy, ignore=shutil.ignore_patterns("bench.json"))
    served = Site(copy)
    port = served.port
    ctx = browser.new_context()
    guard = Guard(ctx, served.origin)
    try:
        page = ctx.new_page()
        page.goto(served.url("figures/calculator.html"))
        wait_ready(page)
        page.wait_for_function("navigator.serviceWorker.controller !== null", timeout=60_000)
        version = page.evaluate("document.documentElement.dataset.build")
        assert page.evaluate("caches.keys()") == [f"enginelab-{version}"]
        page.close()

        # the network gone: the server stops; pages load from the cache, one never opened before included
        served.close()
        for path, fid in (
            ("figures/calculator.html?machine=rtx3060", "calculator"),
            ("figures/roofline.html", "roofline"),
        ):
            p = ctx.new_page()
            p.goto(f"http://127.0.0.1:{port}/{path}")
            wait_ready(p)
            same_numbers(readouts(p), cpython_readouts(fid, urlsplit(path).query), f"{fid} offline")
            p.close()

        # a new build on the server: a changed page and its service worker
        served = Site(copy, port=port)
        build = _build_module()
        page_file = copy / "figures" / "roofline.html"
        page_file.write_text(page_file.read_text().replace("<h1>", "<h1>New build: ", 1))
        build.write_service_worker(copy, "0123456789abcdef")
        p = ctx.new_page()
        p.goto(served.url("figures/roofline.html"))  # still the old build (its worker controls this page) ...
        wait_ready(p)
        assert "New build" not in p.locator("h1").text_content()
        p.wait_for_function(  # ... while the new one installs beside it, and waits
            "navigator.serviceWorker.getRegistration().then(r => !!(r && r.waiting))", timeout=60_000
        )
        p.close()  # the old build's last page closes: the new build takes over (once the browser notices)
        for _attempt in range(20):
            p = ctx.new_page()
            p.goto(served.url("figures/roofline.html"))
            wait_ready(p)
            if "New build" in p.locator("h1").text_content():
                break
            p.close()  # this navigation raced the hand-over, and kept the old build: leave and come back
            time.sleep(0.5)
        assert "New build" in p.locator("h1").text_content()
        assert p.evaluate("caches.keys()") == ["enginelab-0123456789abcdef"]  # the old build's cache is gone
        assert not guard.problems(), guard.problems()
    finally:
        ctx.close()
        served.close()


def test_the_service_worker_waits_for_the_reader_to_pause(browser, site):
    """live.js registers sw.js only after SW_QUIET_MS (3 s) without a change: its install (every file of the build
    fetched and hashed) never runs beside a reader's changes."""
    ctx = browser.new_context()
    guard = Guard(ctx, site.origin)
    registered = "navigator.serviceWorker.getRegistration().then(r => !!r)"
    try:
        page = ctx.new_page()
        page.goto(site.url("figures/calculator.html"))
        wait_ready(page)
        t0 = time.monotonic()
        tokens = ["2000", "3000"]
        for i in range(10):  # a change every half second for five seconds: the wait starts again each time
            page.fill("#f-tokens", tokens[i % 2])
            time.sleep(0.5)
            assert not page.evaluate(registered), f"registered {time.monotonic() - t0:.1f} s after ready, mid-changes"
        page.wait_for_function(registered, timeout=30_000)  # then, left alone, the page registers it
        page.wait_for_function("navigator.serviceWorker.controller !== null", timeout=60_000)
        assert not guard.problems(), guard.problems()
    finally:
        ctx.close()


def test_the_warm_up_grows_the_python_heap_once_ahead_of_need(browser, site):
    """site/py/main.py reserve_heap: the first warm-up grows the WebAssembly heap to HEAP_RESERVE_BYTES, so a
    change never waits for the heap to grow (and the collection V8 starts when it does)."""
    sys.path.insert(0, str(ROOT / "site" / "py"))
    try:
        import main
    finally:
        sys.path.pop(0)
    ctx = browser.new_context()
    try:
        page = ctx.new_page()
        page.goto(site.url("figures/calculator.html"))
        wait_ready(page)
        heap = "window.enginelab_runtime.rt.heapBytes()"
        page.wait_for_function(f"{heap} >= {main.HEAP_RESERVE_BYTES}", timeout=30_000)
        size = page.evaluate(heap)
        for model in ("llama-3.1-70b", "qwen3-30b-a3b", "qwen2.5-14b"):  # changes that allocate: no growth
            page.select_option("#f-model", model)
        assert page.evaluate(heap) == size == main.HEAP_RESERVE_BYTES
    finally:
        ctx.close()
