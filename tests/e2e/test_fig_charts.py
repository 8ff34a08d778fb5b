"""Figures roofline, offload-curve, decode-curve and engines in a real Chromium, offline (every request outside
the local site is aborted, and the `guard` fixture fails a test on any console error, page error or failed
request). Expected numbers come from perf_model / inference_trace run here in CPython."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest

import inference_trace as it
import perf_model as pm

from .harness import readouts, url_query


def query(page) -> dict:
    return url_query(page, keep_blank_values=True)


def wait_query(page, **want):
    """Wait until the URL holds these keys (values as strings)."""
    items = [(k, str(v)) for k, v in want.items()]
    page.wait_for_function(
        """(items) => { const q = new URLSearchParams(location.search);
                         return items.every(([k, v]) => q.get(k) === v); }""",
        arg=items,
        timeout=30_000,
    )


def assert_contract(page, chart_id):
    svg = page.locator(f"#figure svg#{chart_id}")
    assert svg.get_attribute("role") == "img"
    assert page.locator(f"#figure svg#{chart_id} > title").count() == 1
    assert page.locator(f"#figure svg#{chart_id} > desc").count() == 1
    assert page.locator("#figure details.data-table table").count() == 1
    assert page.locator("#status").is_hidden()


def click_preset(page, text):
    """Click a preset button (data-set-state: the whole state); wait until the URL holds exactly its query."""
    btn = page.locator("button[data-set-state]", has_text=text)
    want = dict(parse_qsl(btn.get_attribute("data-query").lstrip("?")))
    btn.click()
    page.wait_for_function(
        """(want) => { const q = new URLSearchParams(location.search);
        return Object.entries(want).every(([k, v]) => q.get(k) === v) && [...q.keys()].length ===
               Object.keys(want).length; }""",
        arg=want,
        timeout=30_000,
    )
    assert page.evaluate("document.documentElement.dataset.ready") == "true"  # applied in place, no reload
    return want


# ---------------------------------------------------------------------------------------------------------
# roofline
# ---------------------------------------------------------------------------------------------------------
LLAMA8 = pm.MODELS["llama-3.1-8b"]


def test_roofline(page_at):
    # a URL with state reproduces it
    page = page_at("figures/roofline.html?machine=m4max&also_rtx4090=1&batch=8&model=none")
    assert_contract(page, "roofline-chart")
    assert sorted(
        page.locator("#roofline-chart path[data-device]").evaluate_all("els => els.map(e => e.dataset.device)")
    ) == ["m4max", "rtx4090"]
    want = pm.roofline(pm.M4_MAX, pm.quant_bpw("Q4_K_M"), 8)
    assert float(readouts(page)["intensity"]) == want["intensity"]
    assert page.is_checked("#f-also_rtx4090") and page.input_value("#f-model") == "none"
    assert page.locator("#roofline-chart .ridge-batch").text_content() == str(round(want["ridge_batch"]))
    # a control changes the figure and the URL
    page.select_option("#f-machine", "rtx3060")
    page.select_option("#f-model", "llama-3.1-8b")
    wait_query(page, machine="rtx3060", also_rtx4090="1", batch="8")
    rb = pm.ridge_batch(pm.RTX_3060, "Q4_K_M", LLAMA8)
    page.wait_for_function(f"document.querySelector('#roofline-chart .ridge-batch').textContent === '{round(rb)}'")
    assert float(readouts(page)["ridge_batch"]) == pytest.approx(rb, rel=1e-12)
    assert page.locator("[data-readout=ridge_batch]").text_content() == str(round(rb)) == "24"
    page.fill("#f-batch", "64")
    wait_query(page, batch="64")
    assert readouts(page)["bound"] == "compute"
    # keyboard: Space on an overlay checkbox adds a device, and the URL says so
    page.focus("#f-also_m4max")
    page.keyboard.press("Space")
    wait_query(page, also_m4max="1")
    assert page.locator("#roofline-chart path[data-device]").count() == 3
    # Download SVG carries the figure's own chart rules
    with page.expect_download() as dl:
        page.click("[data-action=download-svg]")
    svg = open(dl.value.path(), encoding="utf-8").read()
    assert 'id="roofline-chart"' in svg and ".chart path.roof" in svg and ".chart .dev-m4max" in svg
    # preset 2 (F16 -> Q4_K_M at batch 1) is a whole state: the machine and overlays go back to the defaults
    click_preset(page, "F16")
    assert query(page) == {"vs": "F16"} and page.input_value("#f-machine") == "rtx4090"
    ratio = pm.quant_bpw("F16", LLAMA8) / pm.quant_bpw("Q4_K_M", LLAMA8)
    assert float(readouts(page)["intensity_ratio"]) == pytest.approx(ratio, rel=1e-12)
    assert page.locator("#roofline-chart path[data-device]").count() == 1
    click_preset(page, "RTX 3060")
    assert query(page) == {"machine": "rtx3060", "batch": "24"} and page.input_value("#f-batch") == "24"
    click_preset(page, "M4 Max")
    assert page.locator("#roofline-chart path[data-device]").count() == 2 and page.is_checked("#f-also_rtx4090")


# ---------------------------------------------------------------------------------------------------------
# offload-curve
# ---------------------------------------------------------------------------------------------------------
def offload_expected(model="qwen2.5-14b", machine="rtx3060", quant="Q4_K_M", kv="f16", ctx=16384, tokens=2000):
    m, mc = pm.MODELS[model], pm.MACHINES[machine]
    auto = pm.place(m, mc, quant, n_ctx=ctx, kv_type=kv)
    pts = []
    for n in range(m.n_layers + 2):
        p = pm.place(m, mc, quant, n_ctx=ctx, kv_type=kv, n_gpu_layers=n)
        pts.append((n, pm.decode_step_time(p, mc, context=tokens)["tok_per_s"], p.fits))
    return auto.n_gpu_layers, max(n for n, _, f in pts if f), pts


def chart_points(page):
    return page.locator("#offload-chart circle[data-ngl]").evaluate_all(
        "els => els.map(e => [Number(e.dataset.ngl), Number(e.dataset.tokS), e.dataset.fits === 'true'])"
    )


def test_offload_curve(page_at):
    page = page_at("figures/offload-curve.html?model=llama-3.1-70b&machine=rtx4090&ctx=8192")
    assert_contract(page, "offload-chart")
    auto, limit, pts = offload_expected(model="llama-3.1-70b", machine="rtx4090", ctx=8192)
    assert [tuple(p) for p in chart_points(page)] == pts and readouts(page)["auto_ngl"] == str(auto)
    assert page.locator("#offload-chart [data-auto-ngl]").get_attribute("data-auto-ngl") == str(auto)
    assert page.locator("#offload-chart [data-fit-limit]").get_attribute("data-fit-limit") == str(limit)
    # controls: exercise 2's model and machine at the default context
    page.select_option("#f-model", "qwen2.5-14b")
    page.select_option("#f-machine", "rtx3060")
    page.fill("#f-ctx", "16384")
    page.wait_for_function("location.search === ''")
    auto, limit, pts = offload_expected()
    page.wait_for_function(f"document.querySelector('[data-readout=auto_ngl]').dataset.value === '{auto}'")
    assert [tuple(p) for p in chart_points(page)] == pts
    page.select_option("#f-kv", "q8_0")
    wait_query(page, kv="q8_0")
    auto2, _, pts2 = offload_expected(kv="q8_0")
    page.wait_for_function(f"document.querySelector('[data-readout=auto_ngl]').dataset.value === '{auto2}'")
    assert auto2 > auto and [tuple(p) for p in chart_points(page)] == pts2
    # a preset: exercise 2 at 8k, where every -ngl fits
    click_preset(page, "Exercise 2 at 8k")
    assert query(page) == {"ctx": "8192"} and page.input_value("#f-kv") == "f16"
    assert page.locator("#offload-chart [data-fit-limit]").count() == 0
    assert readouts(page)["auto_ngl"] == "49"


# ---------------------------------------------------------------------------------------------------------
# decode-curve
# ---------------------------------------------------------------------------------------------------------
def test_decode_curve(page_at):
    page = page_at("figures/decode-curve.html?model=qwen3-30b-a3b&kv_q4_0=0")
    assert_contract(page, "decode-curve-chart")
    assert page.locator("#decode-curve-chart path.curve").count() == 2
    assert page.locator("#decode-curve-chart path.cross").count() == 2  # MoE: crosses inside 40k
    # back to the module's example, by controls
    page.select_option("#f-model", "llama-3.1-8b")
    page.check("#f-kv_q4_0")
    wait_query(page, ctx="40960")  # the form keeps the context it had: 40,960 tokens
    page.fill("#f-ctx", "65536")
    page.wait_for_function("location.search === ''")
    m, mc = LLAMA8, pm.MACHINES["rtx4090"]
    page.wait_for_selector("#decode-curve-chart path.curve[data-kv=q4_0]")
    for kv in ("f16", "q8_0", "q4_0"):
        p = pm.place(m, mc, "Q4_K_M", n_ctx=65536, kv_type=kv)
        end = it.decode_curve(p, mc, [65536])[0]["tok_s"]
        assert float(readouts(page)[f"tok_s_{kv}"]) == pytest.approx(end, rel=1e-12)
    w = it.decode_curve(pm.place(m, mc, "Q4_K_M", n_ctx=65536), mc, [0])[0]["weight_bytes"]
    cross = page.locator("#decode-curve-chart path.cross[data-kv=f16]").get_attribute("data-cross")
    assert pm.kv_cache_bytes(m, int(cross), "f16") >= w > pm.kv_cache_bytes(m, int(cross) - 1, "f16")
    # checkboxes: add bf16, drop q4_0; nothing chosen says so
    page.check("#f-kv_bf16")
    wait_query(page, kv_bf16="1")
    page.uncheck("#f-kv_q4_0")
    wait_query(page, kv_bf16="1", kv_q4_0="0")
    kvs = page.locator("#decode-curve-chart path.curve").evaluate_all("els => els.map(e => e.dataset.kv)")
    assert kvs == ["f16", "bf16", "q8_0"]
    for kv in ("f16", "bf16", "q8_0"):
        page.uncheck(f"#f-kv_{kv}")
    wait_query(page, kv_f16="0", kv_q8_0="0")
    page.wait_for_selector("text=Choose at least one KV cache type")
    page.fill("#f-ctx", "16384")
    wait_query(page, ctx="16384")
    click_preset(page, "Module example")
    assert query(page) == {"kv_q4_0": "0"} and page.input_value("#f-ctx") == "65536"
    assert page.locator("#decode-curve-chart path.cross").count() == 1  # f16 at 35k; q8_0's 66k is past 64k


# ---------------------------------------------------------------------------------------------------------
# engines
# ---------------------------------------------------------------------------------------------------------
def shown_params(page):
    return page.locator("#figure tr[data-param]").evaluate_all("els => els.map(e => e.dataset.param)")


def test_engines(page_at):
    from enginelab.figures import engines as eg

    def expected(q):
        d = eg.compute(eg.SPEC.from_query(q)[0])
        return [r.param for k in d.engines for r in d.config[k]]

    # a URL with state reproduces it
    page = page_at("figures/engines.html?q=cache%20ram&vllm=0&sglang=0")
    assert_contract(page, "engines-map")
    assert page.input_value("#f-q") == "cache ram"
    assert not page.is_checked("#f-vllm") and page.is_checked("#f-llama")
    assert shown_params(page) == expected("?q=cache%20ram&vllm=0&sglang=0") != []
    assert page.locator("#figure mark").count() >= 2
    # typing filters, keeps the focus, and goes into the URL
    page.fill("#f-q", "")
    page.check("#f-vllm")
    page.check("#f-sglang")
    page.wait_for_function("location.search === ''")
    assert len(shown_params(page)) == 40
    page.click("#f-q")
    page.keyboard.type("lpm")
    wait_query(page, q="lpm")
    page.wait_for_function("document.querySelectorAll('#figure tr[data-param]').length === 1")
    assert shown_params(page) == ["--schedule-policy"] == expected("?q=lpm")
    assert page.evaluate("document.activeElement.id") == "f-q"
    link = page.locator("#figure tr[data-param='--schedule-policy'] a.fig-link")
    assert link.get_attribute("href") == "kv-managers.html?policy=lpm"
    # an engine checkbox, from the keyboard
    page.fill("#f-q", "")
    page.wait_for_function("!new URLSearchParams(location.search).has('q')")
    page.focus("#f-vllm")
    page.keyboard.press("Space")
    wait_query(page, vllm="0")
    assert page.locator("#config-vllm").count() == 0 and page.locator("#config-sglang").count() == 1
    assert shown_params(page) == expected("?vllm=0")
    ngl = page.locator("#figure tr[data-param='-ngl, --n-gpu-layers'] a.fig-link", has_text="calculator")
    assert ngl.get_attribute("href") == "calculator.html?ngl=40"


def test_embedded_with_bad_values_explains_and_reports_its_height(page, site, context):
    """In a host page's iframe: bad query values are explained in the figure and fall back to the defaults,
    the height message reaches the parent, and the embed snippet points at the figure's own state."""
    src = site.url("figures/roofline.html") + "?batch=zero&machine=%3Cb%3Eh100%3C/b%3E&vs=F16"
    host = f"""<!doctype html><html><body><iframe id=f src="{src}" style="width:700px"></iframe>
    <script>window.heights=[];addEventListener('message',e=>{{
    if(e.data&&e.data.type==='enginelab:height')window.heights.push(e.data)}});</script></body></html>"""
    context.route(site.url("__host_charts.html"), lambda r: r.fulfill(body=host, content_type="text/html"))
    page.goto(site.url("__host_charts.html"))
    frame = page.frame_locator("#f")
    frame.locator("html[data-ready=true]").wait_for(timeout=60_000)
    msgs = frame.locator("#messages").text_content()
    assert "Batch" in msgs and "'zero'" in msgs and "Device" in msgs and "<b>h100</b>" in msgs
    assert frame.locator("#messages b").count() == 0 and frame.locator("#messages").is_visible()
    assert frame.locator("#f-batch").input_value() == "1" and frame.locator("#f-machine").input_value() == "rtx4090"
    # a 700 px frame shows the phone layout, the only one drawn for it live (chart.layout_for)
    assert frame.locator("#roofline-chart-n").is_visible() and frame.locator("#roofline-chart").count() == 0
    page.wait_for_function("window.heights.length > 0")
    h = page.evaluate("window.heights[window.heights.length-1]")
    assert h["figure"] == "roofline" and h["height"] > 300
    # after the bad values were dropped the URL holds the valid state only, and so does the embed snippet
    snippet = frame.locator("html").evaluate("() => window.enginelab.embedSnippet()")
    assert "figures/roofline.html?vs=F16" in snippet and "zero" not in snippet
