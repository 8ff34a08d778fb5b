"""Figures 1-3 (tiers, load, phases) and the generic step-through transport, in a real Chromium, offline.

Expected numbers come from inference_trace / perf_model run here in CPython, never from the page.
The `guard` fixture (conftest.py) fails a test on any console error, page error or off-site request.
"""

from __future__ import annotations

import re

import pytest

import inference_trace as it
import perf_model as pm

from .harness import DIST, readouts, same_readouts, url_query

TIERS, LOAD, PHASES = "figures/tiers.html", "figures/load.html", "figures/phases.html"


def query(page) -> dict:
    return url_query(page)


def wait_step(page, n: int, timeout: int = 5000):
    page.wait_for_function(f"document.querySelector('#figure [data-step]')?.dataset.step === '{n}'", timeout=timeout)


def assert_accessible(page, chart_id: str):
    assert page.locator(f"svg#{chart_id}.chart[role=img] > title").count() == 1
    assert page.locator(f"svg#{chart_id} > desc").count() == 1
    assert page.locator("#figure details.data-table table").count() == 1
    assert page.locator("#status").is_hidden()


@pytest.mark.parametrize("path, chart", [(TIERS, "tiers-chart"), (LOAD, "load-chart"), (PHASES, "phases-chart")])
def test_ready_accessible_and_live_render_equals_prerender(page_at, path, chart):
    page = page_at(path)
    assert_accessible(page, chart)
    assert query(page) == {}
    pre = dict(re.findall(r'data-readout="([a-z_]+)" data-value="([^"]*)"', (DIST / path).read_text()))
    assert pre and same_readouts(readouts(page), pre)
    animated = path != TIERS
    assert page.locator(".transport button").count() == (3 if animated else 0)
    assert page.locator("#f-step[type=range]").count() == (1 if animated else 0)
    if path == TIERS:
        tiers_machine_change_updates_figure_and_url(page)


def tiers_machine_change_updates_figure_and_url(page):
    page.select_option("#f-machine", "m4pro")
    page.wait_for_function("new URLSearchParams(location.search).get('machine') === 'm4pro'")
    r = readouts(page)
    assert "token_s_vram" not in r and "token_s_pcie" not in r
    p = pm.place("llama-3.1-8b", "m4pro", "Q4_K_M", n_ctx=4096)
    d = pm.decode_step_time(p, p.machine, context=0)
    nbytes = d["gpu_weight_bytes"] + d["cpu_weight_bytes"]
    assert float(r["weights_read_bytes"]) == pytest.approx(nbytes, rel=1e-12)
    assert float(r["token_s_unified"]) == pytest.approx(nbytes / (0.7 * 273e9), rel=1e-12)
    assert page.locator("svg#tiers-chart > title").text_content().startswith("Memory tiers of MacBook Pro M4 Pro")


def test_load_url_state_reproduces_the_frame_and_play_stops_at_the_end(page_at):
    page = page_at(LOAD + "?scenario=cpu-only&warm=1&step=4")
    steps = it.load_scenario("cpu-only", warm=True)
    r = readouts(page)
    assert r["step_index"] == "4" and r["step_tier"] == steps[4]["tier"]
    assert float(r["elapsed_s"]) == pytest.approx(steps[4]["elapsed_s"], rel=1e-12)
    assert float(r["total_s"]) == pytest.approx(steps[-1]["elapsed_s"], rel=1e-12)
    assert float(r["total_s"]) < it.load_scenario("cpu-only")[-1]["elapsed_s"]  # warm beats cold
    assert page.input_value("#f-step") == "4" and page.get_attribute("#f-step", "max") == str(len(steps) - 1)
    assert page.is_checked("#f-warm") and page.input_value("#f-scenario") == "cpu-only"
    lit = page.locator("#load-chart g.tier.lit")
    assert lit.count() == 1 and lit.get_attribute("data-tier") == steps[4]["tier"]
    assert query(page) == {"scenario": "cpu-only", "warm": "1", "step": "4"}
    # Play shows the last frame and stops there; Play at the end starts over
    page.click("[data-step-action=play]")
    wait_step(page, 5)
    page.wait_for_function("document.querySelector('.transport').dataset.playing === 'false'", timeout=3000)
    assert page.text_content("[data-step-action=play]") == "Play"
    page.click("[data-step-action=play]")
    wait_step(page, 0)
    page.click("[data-step-action=play]")
    assert page.get_attribute(".transport", "data-playing") == "false"
    # the cold/warm toggle changes the figure and the URL
    page.uncheck("#f-warm")
    page.wait_for_function("new URLSearchParams(location.search).get('warm') === null")
    assert float(readouts(page)["total_s"]) == pytest.approx(it.load_scenario("cpu-only")[-1]["elapsed_s"], rel=1e-12)


def _load_rows(scenario: str) -> list:
    """The load figure's frames: one per row of its step list (a run of uploads is one)."""
    from enginelab.figures import load

    return list(load.compute(load.SPEC.from_query(f"?scenario={scenario}")[0]).groups)


def test_load_step_back_play_pause(page_at):
    page = page_at(LOAD)
    steps = _load_rows("split-16gb")
    page.evaluate("document.getElementById('load-chart').__skeleton = true")
    page.click("[data-step-action=next]")
    wait_step(page, 1)
    # the frame was patched into the same skeleton (frame_patch), not re-rendered
    assert page.evaluate("document.getElementById('load-chart').__skeleton === true")
    assert query(page) == {"step": "1"} and page.input_value("#f-step") == "1"
    assert page.locator("#load-chart g.tier.lit").get_attribute("data-tier") == steps[1].tier
    page.click("[data-step-action=back]")
    wait_step(page, 0)
    assert query(page) == {}
    page.click("[data-step-action=back]")  # clamped at the first frame
    page.wait_for_timeout(100)
    assert query(page) == {} and readouts(page)["step_index"] == "0"
    # play: a frame at once, then one every ~700 ms, through the same path (URL included)
    page.click("[data-step-action=play]")
    assert page.text_content("[data-step-action=play]") == "Pause"
    wait_step(page, 3, timeout=4000)
    page.click("[data-step-action=play]")
    assert page.text_content("[data-step-action=play]") == "Play"
    assert page.get_attribute(".transport", "data-playing") == "false"
    n = int(readouts(page)["step_index"])
    assert n >= 3 and query(page) == {"step": str(n)}
    page.wait_for_timeout(900)
    assert int(readouts(page)["step_index"]) == n  # paused means paused
    assert readouts(page)["step_tier"] == steps[n].tier


def test_play_is_suspended_off_screen_and_by_the_readers_own_input(page_at):
    page = page_at(LOAD)
    page.evaluate("""() => { const d = document.createElement('div'); d.id = 'spacer'; d.style.height = '4000px';
                             document.getElementById('figure').before(d); window.scrollTo(0, 0); }""")
    page.click("[data-step-action=play]")
    page.wait_for_function("document.querySelector('.transport').dataset.ticking === 'false'", timeout=3000)
    n = int(readouts(page)["step_index"])
    page.wait_for_timeout(1600)
    assert int(readouts(page)["step_index"]) == n  # off screen: no frames
    assert page.get_attribute(".transport", "data-playing") == "true"
    page.locator("#figure").scroll_into_view_if_needed()
    wait_step(page, n + 1, timeout=3000)  # back on screen: it resumes
    # the reader moving the scrubber themselves stops playback
    page.focus("#f-step")
    page.keyboard.press("End")
    page.wait_for_function("document.querySelector('.transport').dataset.playing === 'false'", timeout=3000)
    last = len(_load_rows("split-16gb")) - 1
    wait_step(page, last)
    assert query(page) == {"step": str(last)}


@pytest.mark.parametrize("context", [{"reduced_motion": "reduce"}], indirect=True)
def test_nothing_autoplays_under_reduced_motion(page_at):
    page = page_at(PHASES)
    page.wait_for_timeout(1600)
    assert readouts(page)["stage_index"] == "0" and query(page) == {}
    assert page.get_attribute(".transport", "data-playing") == "false"


def test_phases_keyboard_steps_and_the_running_total_matches_perf_model(page_at):
    page = page_at(PHASES + "?phase=prefill")
    steps = it.phase_scenario("partial", "prefill")
    sc = it.PHASE_SCENARIOS["partial"]
    p = pm.place(sc["model"], sc["machine"], sc["quant"], sc["n_ctx"])
    total = pm.prefill_time(p, p.machine, sc["n_tokens"])["total_s"]
    page.evaluate("document.getElementById('phases-chart').__skeleton = true")
    page.focus("#f-step")
    page.keyboard.press("ArrowRight")
    wait_step(page, 1)
    assert page.evaluate("document.getElementById('phases-chart').__skeleton === true")  # patched in place
    r = readouts(page)
    assert query(page) == {"phase": "prefill", "step": "1"}
    assert r["stage_device"] == steps[1]["device"] == "pcie" and r["bound"] == "transfer"
    assert page.locator("#phases-chart g.dev.lit").get_attribute("data-device") == "pcie"
    page.keyboard.press("End")
    wait_step(page, len(steps) - 1)
    r = readouts(page)
    assert float(r["model_total_s"]) == pytest.approx(total, rel=1e-12)
    assert float(r["elapsed_s"]) == pytest.approx(total, rel=1e-12)  # the running total ends at perf_model's
    # Tab reaches the transport; Enter/Space press the native buttons
    page.focus("[data-step-action=back]")
    page.keyboard.press("Enter")
    wait_step(page, len(steps) - 2)
    # Download SVG saves this frame's chart with the figure's own rules (colours with light fallbacks)
    with page.expect_download() as dl:
        page.click("[data-action=download-svg]")
    svg = open(dl.value.path(), encoding="utf-8").read()
    assert svg.startswith("<?xml") and 'id="phases-chart"' in svg and 'role="img"' in svg
    assert ".chart.phases-chart .dev.lit .box" in svg and f"stage {len(steps) - 1} of {len(steps)}" in svg
    # switching phase keeps the page consistent (the stage is re-validated against the new trace)
    page.select_option("#f-phase", "decode")
    page.wait_for_function("new URLSearchParams(location.search).get('phase') === null")
    dec = it.phase_scenario("partial", "decode")
    assert page.get_attribute("#f-step", "max") == str(len(dec) - 1)
    assert readouts(page)["stage_index"] == str(len(dec) - 1)  # the frame is clamped to the shorter trace...
    assert page.locator("#messages").is_hidden()  # ...quietly: the reader did nothing wrong


def test_bad_query_values_are_explained_and_fall_back(page_at):
    page = page_at(LOAD + "?scenario=mars&step=999&warm=perhaps")
    msgs = page.locator("#messages li").all_text_contents()
    assert len(msgs) == 3 and any("Scenario" in m and "'mars'" in m for m in msgs)
    assert any("Step: 999 is above the maximum 8" in m for m in msgs)
    assert readouts(page)["step_index"] == "8" and page.locator("#messages").is_visible()


def test_embedded_load_figure_keeps_its_state_and_reports_height(page, site, context):
    host = f"""<!doctype html><html><body><iframe id=f src="{site.url(LOAD)}?step=3" style="width:600px"></iframe>
    <script>window.heights=[];addEventListener('message',e=>{{if(e.data&&e.data.type==='enginelab:height')
    window.heights.push(e.data)}});</script></body></html>"""
    context.route(site.url("__host.html"), lambda r: r.fulfill(body=host, content_type="text/html"))
    page.goto(site.url("__host.html"))
    frame = page.frame_locator("#f")
    frame.locator("html[data-ready=true]").wait_for(timeout=60_000)
    page.wait_for_function("window.heights.length > 0")
    h = page.evaluate("window.heights[window.heights.length-1]")
    assert h["figure"] == "load" and h["height"] > 300
    assert frame.locator("#figure [data-step]").get_attribute("data-step") == "3"
    # stepping inside the iframe works too, and the embed snippet carries the state
    frame.locator("[data-step-action=next]").click()
    frame.locator("#figure [data-step='4']").wait_for(timeout=5000)
    inner = next(f for f in page.frames if "figures/load.html" in f.url)
    code = inner.evaluate("window.enginelab.embedSnippet()")
    assert code.startswith("<iframe ") and "figures/load.html?step=4" in code
