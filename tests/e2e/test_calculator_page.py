"""The calculator page in a real Chromium, offline: every request outside the local site is aborted.

Expected numbers come from perf_model run here in CPython, never from the page or from enginelab, so a
test fails if the browser computes anything different from the course module.
"""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qsl, urlsplit

import pytest

import perf_model as pm
from enginelab import scenario

from .harness import DIST, readouts, same_readouts, url_query, wait_ready

PAGE = "figures/calculator.html"


def expected(
    model="qwen2.5-32b",
    machine="rtx4060ti",
    quant="Q4_K_M",
    kv="f16",
    ctx=8192,
    ngl="auto",
    tokens=2000,
    n_cpu_moe=0,
    profile="measured",
    threads="auto",
) -> dict:
    """The readouts perf_model gives in CPython for a state, as the strings data-value must hold (the page's
    default profile is measured; beside it, the module's course numbers and the typical range)."""
    mc = pm.MACHINES[machine]
    n_threads = None if threads == "auto" else threads

    def placed(prof):
        return pm.place(
            pm.MODELS[model],
            mc,
            quant,
            n_ctx=ctx,
            kv_type=kv,
            n_gpu_layers=None if ngl == "auto" else ngl,
            n_cpu_moe=n_cpu_moe,
            profile=prof,
        )

    p = placed(profile)
    out = {
        "n_gpu_layers": p.n_gpu_layers,
        "vram_gb": p.gpu_total / pm.GB,
        "ram_gb": p.cpu_total / pm.GB,
        "decode_tok_s": None,
        "prefill_tok_s": None,
        "cpu_share": None,
        "fits": p.fits,
        "verdict": scenario.verdict(p),
    }
    if p.fits:
        d = pm.decode_step_time(p, mc, context=tokens, n_threads=n_threads)
        f = pm.prefill_time(p, mc, tokens, n_threads=n_threads)
        out |= {"decode_tok_s": d["tok_per_s"], "prefill_tok_s": f["tok_per_s"], "cpu_share": d["cpu_s"] / d["total_s"]}
        if profile == "measured":
            out |= {
                "decode_low_tok_s": d["range_tok_s"][0],
                "decode_high_tok_s": d["range_tok_s"][1],
                "prefill_low_tok_s": f["range_tok_s"][0],
                "prefill_high_tok_s": f["range_tok_s"][1],
            }
            c = placed("course")
            if c.fits:
                out |= {
                    "course_decode_tok_s": pm.decode_step_time(c, mc, context=tokens)["tok_per_s"],
                    "course_prefill_tok_s": pm.prefill_time(c, mc, tokens)["tok_per_s"],
                }
    return out


def assert_readouts(page, **state):
    got = readouts(page)
    want = expected(**state)
    assert set(got) == set(want), got
    for k, v in want.items():
        g = got[k]
        if v is None:
            assert g == "", (k, g)
        elif isinstance(v, str):
            assert g == v, (k, g, v)
        elif isinstance(v, bool):
            assert g == ("true" if v else "false"), (k, g)
        elif isinstance(v, int):
            assert int(g) == v, (k, g, v)
        else:
            # Same code, same IEEE doubles; but Pyodide runs Python 3.14, whose sum() of floats is compensated
            # (since 3.12) while CPython here may be 3.11: allow a few ulps, nothing a reader could see.
            assert float(g) == pytest.approx(v, rel=1e-12, abs=0), f"{k}: browser {g}, CPython {v!r} for {state}"
    return got


def query(page) -> dict:
    return url_query(page)


def test_ready_default_state_matches_cpython_and_prerender(page_at):
    page = page_at(PAGE)
    live = assert_readouts(page)
    assert query(page) == {}  # the default state writes no keys
    # The pre-rendered page (before Python) carries the same numbers as the live render.
    html = (DIST / PAGE).read_text()
    pre = dict(re.findall(r'data-readout="([a-z_]+)" data-value="([^"]*)"', html))
    assert set(pre) == set(live)
    for k, v in pre.items():  # the same doubles, up to Pyodide's compensated float sum (see assert_readouts)
        assert v == live[k] or float(v) == pytest.approx(float(live[k]), rel=1e-12, abs=0), (k, v, live[k])
    assert page.locator("#status").is_hidden()
    # the bars drawn twice (wide, and for a phone: chart.responsive), each titled and described
    assert page.locator("svg.chart[role=img] > title").count() == 2
    assert page.locator("svg.chart > desc").count() == 2 and page.locator("#calculator-chart").is_visible()
    assert page.locator("details.data-table table").count() == 1


def test_every_input_changes_readouts_to_cpython_values(page_at):
    page = page_at(PAGE)
    state = {}
    previous = readouts(page)

    def change(key, value, how="select"):
        sel = f"#f-{key}"
        if how == "select":
            page.select_option(sel, str(value))
        else:
            page.fill(sel, str(value))
        state[key] = value
        got = assert_readouts(page, **state)
        nonlocal previous
        assert got != previous, f"changing {key} to {value} changed no readout"
        previous = got
        # the URL holds exactly the non-default keys
        q = query(page)
        assert q.get(key) == str(value)

    change("model", "qwen2.5-14b")
    change("machine", "rtx3060")
    change("ctx", 32768, how="fill")
    change("kv", "q8_0")
    change("quant", "Q5_K_M")
    change("tokens", 8000, how="fill")
    change("ngl", 20)
    change("model", "qwen3-30b-a3b")  # MoE: the --n-cpu-moe control appears
    assert page.locator("#f-n_cpu_moe").is_visible()
    change("n_cpu_moe", 12, how="fill")
    change("machine", "cpu-ddr5")  # no GPU: -ngl can only be 0, clamped with a message
    assert readouts(page)["n_gpu_layers"] == "0"
    cmd = page.locator("#llama-command").text_content()
    assert cmd.startswith("llama-server ") and "-ctk q8_0 -ctv q8_0" in cmd and "--n-cpu-moe 12" in cmd


def test_url_round_trips(page_at):
    q = "?model=llama-3.1-8b&machine=rtx3090&quant=Q8_0&kv=q4_0&ctx=16384&ngl=20&tokens=500"
    page = page_at(PAGE + q)
    assert_readouts(
        page, model="llama-3.1-8b", machine="rtx3090", quant="Q8_0", kv="q4_0", ctx=16384, ngl=20, tokens=500
    )
    assert urlsplit(page.url).query == q[1:]
    for key, value in parse_qsl(q[1:]):
        assert page.input_value(f"#f-{key}") == value
    assert page.locator("#messages").is_hidden()
    before = readouts(page)
    page.reload()
    wait_ready(page)
    assert same_readouts(readouts(page), before)


def test_bad_query_values_are_explained_and_fall_back(page_at):
    evil = "<img src=x onerror=window.pwned=1>"
    page = page_at(PAGE + "?model=" + evil.replace(" ", "%20") + "&ctx=abc&ngl=999&tokens=-5&kv=Q8_0&zzz=1")
    msgs = page.locator("#messages li").all_text_contents()
    text = " | ".join(msgs)
    assert "<img src=x" in text and "not one of" in text  # named, shown as text
    assert "'abc' is not a whole number" in text
    assert "999 is above 65, the most the other settings allow" in text
    assert "-5 is below the minimum 1" in text
    assert "'zzz'" in text
    assert page.locator("#messages img, #figure img").count() == 0
    assert page.evaluate("window.pwned") is None
    # fallbacks: default model and ctx, kv forgiven its case; ngl is used clamped to this model's 65 while the
    # reader's 999 (a bound from another field: the model) stays in the control and the URL
    assert page.input_value("#f-model") == "qwen2.5-32b"
    assert page.input_value("#f-kv") == "q8_0"
    assert_readouts(page, kv="q8_0", ngl=65, tokens=1)
    assert page.input_value("#f-ngl") == "999"
    assert query(page) == {"kv": "q8_0", "ngl": "999", "tokens": "1"}


def test_overask_says_it_would_fail_to_allocate(page_at):
    page = page_at(PAGE + "?ngl=65&profile=course")
    alert = page.locator("[data-overask]")
    assert alert.is_visible()
    text = alert.text_content()
    assert "Would fail to allocate" in text and "GB is free" in text and "needs" in text and "over by 7.1 GB" in text
    assert page.locator(".readout-verdict output").text_content() == "Fails to allocate"
    r = assert_readouts(page, ngl=65, profile="course")
    assert r["fits"] == "false" and r["decode_tok_s"] == "" and r["prefill_tok_s"] == ""
    assert page.locator(".readout-decode_tok_s output").text_content() == "—"
    assert page.locator("#calculator-chart .overflow").count() == 1


def test_keyboard_only(page_at):
    page = page_at(PAGE)
    page.keyboard.press("Tab")  # first focusable: the model select
    for _ in range(10):
        if page.evaluate("document.activeElement.id") == "f-model":
            break
        page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "f-model"
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("", "none"), "no visible focus indicator"
    before = readouts(page)
    page.keyboard.press("ArrowDown")  # a focused closed <select> changes value with the arrow keys
    assert readouts(page) != before
    assert page.evaluate("document.activeElement.id") == "f-model"  # focus survives the re-render
    new_model = page.input_value("#f-model")
    assert_readouts(page, model=new_model)
    # Tab on to the -ngl select (its options were rebuilt for the new model) and pick a value by key
    for _ in range(10):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "f-ngl":
            break
    assert page.evaluate("document.activeElement.id") == "f-ngl"
    page.keyboard.press("ArrowDown")  # auto -> 0
    assert page.input_value("#f-ngl") == "0"
    assert_readouts(page, model=new_model, ngl=0)
    # the chrome buttons are reachable and work from the keyboard
    page.focus("[data-action=embed]")
    page.keyboard.press("Enter")
    assert page.locator("#embed-box").is_visible()
    snippet = page.input_value("#embed-code")
    assert "figures/calculator.html?" in snippet and "ngl=0" in snippet and snippet.startswith("<iframe ")


@pytest.mark.parametrize("context", [{"permissions": ["clipboard-read", "clipboard-write"]}], indirect=True)
def test_share_download_and_copy(page_at):
    page = page_at(PAGE + "?ctx=4096")
    page.click("[data-action=share]")
    page.wait_for_function("document.querySelector('#chrome-status').textContent.includes('copied')")
    assert page.evaluate("navigator.clipboard.readText()") == page.url
    page.click("button[data-copy-target='#llama-command']")
    page.wait_for_timeout(100)
    assert page.evaluate("navigator.clipboard.readText()").startswith("llama-server -m ")
    with page.expect_download() as dl:
        page.click("[data-action=download-svg]")
    path = dl.value.path()
    svg = open(path, encoding="utf-8").read()
    assert svg.startswith("<?xml") and "<svg" in svg and 'role="img"' in svg and ".seg-weights" in svg
    assert "var(--" not in svg


def test_embedded_iframe_reports_height(page, site, context):
    host = f"""<!doctype html><html><body><iframe id=f src="{site.url(PAGE)}?kv=q8_0" style="width:600px"></iframe>
    <script>window.heights=[];addEventListener('message',e=>{{if(e.data&&e.data.type==='enginelab:height')
    window.heights.push(e.data)}});</script></body></html>"""
    context.route(site.url("__host.html"), lambda r: r.fulfill(body=host, content_type="text/html"))
    page.goto(site.url("__host.html"))
    frame = page.frame_locator("#f")
    frame.locator("html[data-ready=true]").wait_for(timeout=60_000)
    page.wait_for_function("window.heights.length > 0")
    h = page.evaluate("window.heights[window.heights.length-1]")
    assert h["figure"] == "calculator" and h["height"] > 300


def test_dark_theme(page, site):
    page.emulate_media(color_scheme="dark")
    page.goto(site.url(PAGE))
    wait_ready(page)
    bg = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
    r, g, b = map(int, re.findall(r"\d+", bg)[:3])
    assert r + g + b < 150, bg


def test_without_javascript_the_prerendered_figure_shows(browser, site):
    ctx = browser.new_context(java_script_enabled=False)
    try:
        page = ctx.new_page()
        page.goto(site.url("calculator.html"))
        assert page.locator("[data-readout=decode_tok_s]").text_content().strip() not in ("", "—")
        assert page.locator("#calculator-chart").is_visible()
        assert page.locator("#status").is_hidden()
    finally:
        ctx.close()


def test_load_failure_sets_error_and_keeps_the_figure(page, site, context, guard):
    guard.allow_problems = True  # this test breaks the page on purpose
    context.route("**/*.whl", lambda r: r.fulfill(status=404, body="gone"))
    page.goto(site.url(PAGE))
    page.wait_for_function("document.documentElement.dataset.ready !== 'false'", timeout=60_000)
    assert page.evaluate("document.documentElement.dataset.ready") == "error"
    assert page.locator("#status").is_visible()
    assert "could not start" in page.locator("#status").text_content()
    assert page.locator("#calculator-chart").is_visible()


def test_micropip_and_packaging_load_offline_from_the_rewritten_lock(page_at):
    page = page_at("_bare.html?micropip=1")
    assert page.locator("#out").text_content().endswith("enginelab")


def test_all_pages_share_the_shell(page_at):
    for path in ("figures/calculator.html", "calculator.html"):
        page = page_at(path)
        assert page.evaluate("document.documentElement.dataset.figure") == "calculator"
        assert_readouts(page)
    manifest = json.loads((DIST / "manifest.json").read_text())
    assert "figures/calculator.html" in manifest["pages"]
