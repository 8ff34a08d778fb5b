"""The three-KV-managers figure in a real Chromium, offline: frames, counters, URL state, the frame-patch path.

Expected values come from the figure module and kv_managers run here in CPython, never from the page.
The `guard` fixture (conftest.py) fails a test on any console error, page error or off-site request.
"""

from __future__ import annotations

import re

import pytest

import kv_managers as kv
from enginelab.figures import kv_managers as fig

from .harness import DIST, readouts, same_readouts, url_query

PATH = "figures/kv-managers.html"
CELL_CLASSES = (
    """(name) => [...document.querySelectorAll(`#kv-cells-${name} > rect`)].map(r => r.getAttribute('class'))"""
)


def query(page) -> dict:
    return url_query(page)


def wait_step(page, n: int, timeout: int = 5000):
    page.wait_for_function(f"document.getElementById('kv-fig')?.dataset.step === '{n}'", timeout=timeout)


def expected(q: str):
    s, msgs = fig.SPEC.from_query(q)
    assert msgs == []
    return fig.compute(s)


def assert_frame(page, d):
    """The page shows exactly the frame `d`: every cell's class and every counter."""
    r = readouts(page)
    for name in fig.MANAGERS:
        p = d.panels[name]
        assert page.evaluate(CELL_CLASSES, name) == fig.cell_classes(p.codes, p.owner, d.sim.hue)
        assert r[f"{name}_computed"] == str(p.computed) and r[f"{name}_reused"] == str(p.reused)
        assert r[f"{name}_concurrency"] == str(p.concurrency) and r[f"{name}_peak"] == str(p.peak)
        assert r[f"{name}_preemptions"] == str(p.preemptions)


def test_ready_then_step_and_play_advance_frames_by_patching_the_grids_in_place(page_at):
    page = page_at(PATH)
    assert page.locator("#status").is_hidden() and query(page) == {}
    for name in fig.MANAGERS:
        svg = page.locator(f"svg#kv-grid-{name}.chart[role=img]")
        assert svg.locator("> title").count() == 1 and svg.locator("> desc").count() == 1
        assert page.locator(f"#kv-cells-{name} > rect").count() == 384
    assert page.locator("#figure details.data-table table").count() == 1
    assert page.locator(".transport button").count() == 3 and page.get_attribute("#f-step", "max") == "62"
    pre = dict(re.findall(r'data-readout="([a-z_]+)" data-value="([^"]*)"', (DIST / PATH).read_text()))
    assert pre and same_readouts(readouts(page), pre)
    assert_frame(page, expected(""))
    # the wide layout puts the three grids side by side
    boxes = [page.locator(f"#kv-grid-{n}").bounding_box() for n in fig.MANAGERS]
    assert boxes[0]["y"] == boxes[1]["y"] == boxes[2]["y"] and boxes[0]["x"] < boxes[1]["x"] < boxes[2]["x"]
    # mark the cells now in the page: a frame patch keeps these very elements, a full render would replace them
    page.evaluate("() => { for (const r of document.querySelectorAll('#figure rect[data-i]')) r.__kept = true; }")
    before = readouts(page)
    stops = expected("").sim.stops  # Step / Back / Play jump over the quiet steps: 0, 1, 4, 5, 13, 14, ...
    assert page.get_attribute("#kv-fig", "data-stops") == ",".join(map(str, stops))
    page.click("[data-step-action=next]")
    wait_step(page, 1)
    assert query(page) == {"step": "1"} and page.input_value("#f-step") == "1"
    assert_frame(page, expected("?step=1"))
    for _ in range(3):
        page.click("[data-step-action=next]")
    wait_step(page, stops[4])  # 13: the run of quiet steps 6-13 is one stop, told as one
    assert readouts(page) != before
    assert_frame(page, expected(f"?step={stops[4]}"))
    assert page.text_content("#kv-caption-step") == "Steps 6–13"
    assert "8 steps of decoding" in page.text_content("#kv-paged-events")
    page.click("[data-step-action=back]")
    wait_step(page, stops[3])
    assert "#4 and #6 arrived" in page.text_content("#kv-slots-events")
    page.click("[data-step-action=play]")
    assert page.text_content("[data-step-action=play]") == "Pause"
    wait_step(page, stops[6], timeout=4000)
    page.click("[data-step-action=play]")
    assert page.get_attribute(".transport", "data-playing") == "false"
    n = int(page.get_attribute("#kv-fig", "data-step"))
    assert n in stops and n >= stops[6] and query(page) == {"step": str(n)}
    assert_frame(page, expected(f"?step={n}"))
    assert page.evaluate("() => [...document.querySelectorAll('#figure rect[data-i]')].every(r => r.__kept)")
    # the patched page is the page a full render of the same state gives
    patched = page.inner_html("#figure")
    page.goto(page.url)
    page.wait_for_function("document.documentElement.dataset.ready === 'true'")
    assert page.inner_html("#figure") == patched
    # the last frame: the module's compare(capacity_tokens=384) numbers
    page.focus("#f-step")
    page.keyboard.press("End")
    wait_step(page, 62)
    r = readouts(page)
    assert [r[f"{n}_computed"] for n in fig.MANAGERS] == ["376", "268", "208"]
    assert [r[f"{n}_peak"] for n in fig.MANAGERS] == ["4", "5", "5"]


def test_url_state_reproduces_the_radix_loses_frame(page_at):
    page = page_at(PATH + "?workload=radix-loses&step=10")
    d = expected("?workload=radix-loses&step=10")
    assert page.input_value("#f-workload") == "radix-loses" and page.input_value("#f-step") == "10"
    assert page.input_value("#f-capacity") == "preset" and page.input_value("#f-policy") == "preset"
    assert page.get_attribute("#f-step", "max") == "40"
    assert page.locator("#kv-cells-radix > rect").count() == kv.RADIX_LOSES_CAPACITY
    assert_frame(page, d)
    assert query(page) == {"workload": "radix-loses", "step": "10"}
    assert page.get_attribute("#kv-fig", "data-step") == "10"


def test_bad_query_values_fall_back_then_controls_change_the_figure_and_the_url(page_at):
    page = page_at(PATH + "?workload=mars&capacity=300&step=abc")
    msgs = page.locator("#messages li").all_text_contents()
    assert len(msgs) == 3 and page.locator("#messages").is_visible()
    assert any("'mars'" in m for m in msgs) and any("'300'" in m for m in msgs)
    assert_frame(page, expected(""))
    page.evaluate(
        "() => { const e = document.getElementById('f-step'); e.value = '20';"
        " e.dispatchEvent(new Event('input', { bubbles: true })); }"
    )
    wait_step(page, 20)
    assert page.locator("#messages").is_hidden()
    page.evaluate("() => { for (const r of document.querySelectorAll('#figure rect[data-i]')) r.__kept = true; }")
    page.select_option("#f-workload", "agent")
    page.wait_for_function("new URLSearchParams(location.search).get('workload') === 'agent'")
    assert page.get_attribute("#f-step", "min") == "9" and page.get_attribute("#f-step", "max") == "79"
    assert_frame(page, expected(f"?workload=agent&step={query(page).get('step', 9)}"))
    # another simulation on as many cells: a base patch kept the cells, and once its data table is filled in
    # (deferred) the page is the page a full render of the new state gives
    assert page.evaluate("() => [...document.querySelectorAll('#figure rect[data-i]')].every(r => r.__kept)")
    page.wait_for_function("!document.querySelector('#figure [data-deferred]')")
    assert "Agent" in page.text_content("#kv-table table caption")
    patched = page.inner_html("#figure")
    query(page)  # the URL written
    page.goto(page.evaluate("location.href"))
    page.wait_for_function("document.documentElement.dataset.ready === 'true'")
    page.wait_for_function("!document.querySelector('#figure [data-deferred]')")
    assert page.inner_html("#figure") == patched
    page.select_option("#f-capacity", "256")
    page.wait_for_function("new URLSearchParams(location.search).get('capacity') === '256'")
    assert page.locator("#kv-cells-paged > rect").count() == 256
    page.select_option("#f-policy", "lpm")
    page.wait_for_function("new URLSearchParams(location.search).get('policy') === 'lpm'")
    q = query(page)
    assert q["workload"] == "agent" and q["capacity"] == "256"
    assert_frame(page, expected("?" + "&".join(f"{k}={v}" for k, v in q.items())))
    assert "schedule_policy lpm" in page.text_content(".kv-radix .kv-sub")


@pytest.mark.parametrize(
    "context", [{"reduced_motion": "reduce", "viewport": {"width": 390, "height": 800}}], indirect=True
)
def test_no_autoplay_under_reduced_motion_and_grids_stack_on_a_phone(page_at):
    page = page_at(PATH)
    page.wait_for_timeout(1500)
    assert page.get_attribute("#kv-fig", "data-step") == "0" and query(page) == {}
    assert page.get_attribute(".transport", "data-playing") == "false"
    boxes = [page.locator(f"#kv-grid-{n}").bounding_box() for n in fig.MANAGERS]
    assert boxes[0]["y"] + boxes[0]["height"] < boxes[1]["y"] < boxes[1]["y"] + boxes[1]["height"] < boxes[2]["y"]
    assert all(b["width"] >= 300 for b in boxes)  # 16 cells across the phone: about 20 px per cell
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


@pytest.mark.parametrize("context", [{"color_scheme": "dark"}], indirect=True)
def test_free_and_cached_cells_are_told_apart_in_dark_mode(page_at):
    page = page_at(PATH + "?step=62")  # the end: cached cells of every user beside free ones
    look = page.evaluate(
        """() => { const pick = (sel) => { const r = document.querySelector(`#kv-cells-paged > rect${sel}`);
          const s = getComputedStyle(r); return [s.fill, s.fillOpacity, s.stroke, s.strokeDasharray]; };
          return { free: pick('.k-free'), cached: pick('.k-cached') }; }"""
    )
    free, cached = look["free"], look["cached"]
    assert free != cached
    lum = lambda rgb: sum(int(c) for c in rgb[rgb.index("(") + 1 : rgb.index(")")].split(",")[:3])  # noqa: E731
    # a free cell is darker than the page's panels; a cached one is tinted with its owner's colour and dotted
    assert lum(free[0]) < 120 and float(cached[1]) >= 0.5 and cached[3] not in ("none", "")


def test_embedded_figure_keeps_its_state_steps_and_reports_height(page, site, context):
    host = f"""<!doctype html><html><body><iframe id=f src="{site.url(PATH)}?workload=agent&step=30"
    style="width:700px"></iframe><script>window.heights=[];addEventListener('message',e=>{{if(e.data&&
    e.data.type==='enginelab:height')window.heights.push(e.data)}});</script></body></html>"""
    context.route(site.url("__host.html"), lambda r: r.fulfill(body=host, content_type="text/html"))
    page.goto(site.url("__host.html"))
    frame = page.frame_locator("#f")
    frame.locator("html[data-ready=true]").wait_for(timeout=60_000)
    page.wait_for_function("window.heights.length > 0")
    h = page.evaluate("window.heights[window.heights.length-1]")
    assert h["figure"] == "kv-managers" and h["height"] > 900  # 700 px wide: the grids stack
    nxt = next(t for t in expected("?workload=agent").sim.stops if t > 30)
    frame.locator("[data-step-action=next]").click()
    frame.locator(f"#kv-fig[data-step='{nxt}']").wait_for(timeout=5000)
    inner = next(f for f in page.frames if "figures/kv-managers.html" in f.url)
    code = inner.evaluate("window.enginelab.embedSnippet()")
    assert code.startswith("<iframe ") and f"figures/kv-managers.html?workload=agent&step={nxt}" in code
