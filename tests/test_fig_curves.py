"""enginelab.chart (scales, ticks, axes) and the two curve figures: offload-curve and decode-curve.

Expected numbers come from perf_model / inference_trace called here, never from the figure modules' own
arithmetic, so a test fails if a figure draws anything the course modules would not compute.
"""

from __future__ import annotations

import math
import re

import pytest
from goldens import golden  # noqa: E402  tests/golden/<name>.svg, byte for byte

import inference_trace as it
import perf_model as pm
from enginelab import chart
from enginelab.figures import REGISTRY
from enginelab.figures import decode_curve as dc
from enginelab.figures import offload_curve as oc


def svg_of(html: str, chart_id: str) -> str:
    m = re.search(rf'<svg [^>]*id="{chart_id}".*?</svg>', html, re.S)
    assert m, f"no {chart_id}"
    return m.group(0)


# ---------------------------------------------------------------------------------------------------------
# chart: scales and ticks
# ---------------------------------------------------------------------------------------------------------
def test_linear_scale_maps_ends_and_middle_and_may_run_downwards():
    x = chart.LinearScale(0, 49, 60, 620)
    assert x(0) == 60 and x(49) == 620 and x(24.5) == pytest.approx(340)
    y = chart.LinearScale(0, 30, 300, 20)  # SVG y grows down
    assert y(0) == 300 and y(30) == 20 and y(15) == pytest.approx(160)


def test_log_scale_puts_each_decade_the_same_distance_apart():
    y = chart.LogScale(1e9, 1e15, 320, 20)
    assert y(1e9) == pytest.approx(320) and y(1e15) == pytest.approx(20)
    assert y(1e10) - y(1e11) == pytest.approx(50) and y(1e13) - y(1e14) == pytest.approx(50)
    with pytest.raises(ValueError, match="domain must be > 0"):
        chart.LogScale(0, 10, 0, 1)


def test_nice_ticks_are_round_and_inside_the_range():
    assert chart.nice_ticks(0, 30, 5) == [0, 10, 20, 30]
    assert chart.nice_ticks(0, 30, 10) == [0, 5, 10, 15, 20, 25, 30]
    assert chart.nice_ticks(0, 49, 8) == [0, 10, 20, 30, 40]
    assert chart.nice_ticks(0.3, 1.1, 4) == [0.4, 0.6, 0.8, 1.0]
    # token counts: power-of-two multiples of 1024
    assert chart.nice_ticks(0, 65536, 8, base=1024) == [i * 8192 for i in range(9)]
    assert chart.nice_ticks(0, 8192, 8, base=1024) == [i * 1024 for i in range(9)]
    assert chart.nice_ticks(0, 2000, 8, base=1024) == [0, 1024]  # never a fraction of the unit
    with pytest.raises(ValueError):
        chart.nice_ticks(0, math.inf)


def test_log_ticks_are_decades_or_1_2_5_for_short_ranges():
    assert chart.log_ticks(1, 1e6) == [1, 10, 100, 1000, 1e4, 1e5, 1e6]
    assert chart.log_ticks(0.5, 50) == [0.5, 1, 2, 5, 10, 20, 50]
    assert chart.LogScale.decades(3.3, 450) == (1, 1000)


def test_si_labels():
    assert [chart.si(v) for v in (0, 0.25, 3, 1500, 2e6, 1.65e14, 1e15)] == [
        "0",
        "0.25",
        "3",
        "1.5k",
        "2M",
        "165T",
        "1P",
    ]


def test_axis_draws_one_tick_and_label_per_tick_and_escapes_text():
    x = chart.LinearScale(0, 10, 50, 550)
    g = chart.axis(x, at=300, side="bottom", ticks=[0, 5, 10], fmt=str, label="a < b")
    assert g.count('class="tick"') == 3 and g.count('class="tick-label"') == 3
    assert ">a &lt; b</text>" in g
    assert 'x1="300"' in chart.axis(chart.LinearScale(0, 1, 300, 20), at=300, side="left", ticks=[0, 1])
    with pytest.raises(ValueError):
        chart.axis(x, at=0, side="top")


def test_readout_is_the_data_readout_contract():
    r = chart.readout("tok_s", 41.25, "41.2", "Decode", "tok/s")
    assert r == (
        '<div class="readout readout-tok_s"><dt>Decode</dt><dd><output data-readout="tok_s" data-value="41.25">41.2'
        '</output><span class="unit">tok/s</span></dd></div>'
    )
    # ids for a figure whose frame patches rewrite the number and its unit; nothing else changes
    r = chart.readout("n", 3, "3", "N", "of 5", output_id="o", unit_id="u")
    assert '<output id="o" data-readout="n" data-value="3">3</output><span class="unit" id="u">of 5</span>' in r
    assert chart.readout_attrs("fits", False) == {"data_readout": "fits", "data_value": "false"}
    assert chart.readout_attrs("none", None) == {"data_readout": "none", "data_value": ""}


def test_path_d_and_label_spreading():
    assert chart.path_d([(0, 1), (2.5, 3.333)]) == "M0,1L2.5,3.33"
    assert chart.path_d([]) == ""
    ys = chart.spread_labels([100, 104, 106, 300], 14, 20, 320)
    s = sorted(ys)
    assert all(b - a >= 14 - 1e-9 for a, b in zip(s, s[1:]))
    assert ys[3] == 300 and ys[0] == 100  # labels with room stay where they were wanted
    # a stack that would run past the bottom is pushed back up inside [lo, hi]
    ys = chart.spread_labels([310, 312, 315], 14, 20, 320)
    assert max(ys) <= 320 and min(ys) >= 20 and sorted(ys) == [292, 306, 320]


# ---------------------------------------------------------------------------------------------------------
# offload-curve
# ---------------------------------------------------------------------------------------------------------
def ostate(q=""):
    s, msgs = oc.SPEC.from_query(q)
    assert msgs == [], msgs
    return s


def test_offload_registered_and_defaults():
    assert REGISTRY["offload-curve"] is oc
    s = oc.default_state()
    assert (s.model, s.machine, s.quant, s.kv, s.ctx, s.tokens) == (
        "qwen2.5-14b",
        "rtx3060",
        "Q4_K_M",
        "f16",
        16384,
        2000,
    )


@pytest.mark.parametrize(
    "q",
    [
        "",
        "?ctx=8192",
        "?ctx=32768&kv=q8_0&tokens=30000",
        "?model=llama-3.1-70b&machine=rtx4090&ctx=8192",
        "?model=qwen3-30b-a3b&machine=m4pro",
    ],
)
def test_offload_points_are_decode_step_time_of_each_placement(q):
    s = ostate(q)
    d = oc.compute(s)
    m, mc = pm.MODELS[s.model], pm.MACHINES[s.machine]
    assert [p.ngl for p in d.points] == list(range(m.n_layers + 2))  # 0 .. n_layers + 1
    fitting = []
    for pt in d.points:
        p = pm.place(m, mc, s.quant, n_ctx=s.ctx, kv_type=s.kv, n_gpu_layers=pt.ngl)
        assert pt.tok_s == pm.decode_step_time(p, mc, context=s.tokens)["tok_per_s"]
        assert pt.fits == p.fits
        if p.fits:
            fitting.append(pt.ngl)
    auto = pm.place(m, mc, s.quant, n_ctx=s.ctx, kv_type=s.kv)
    assert d.readouts.auto_ngl == auto.n_gpu_layers
    assert d.readouts.fit_limit == max(fitting)
    svg = svg_of(oc.render(d), "offload-chart")
    # the auto marker sits at place(...).n_gpu_layers; the points past the fit limit are drawn as failures
    assert f'data-auto-ngl="{auto.n_gpu_layers}"' in svg
    for pt in d.points:
        mark = re.search(rf'<circle[^>]*data-ngl="{pt.ngl}"[^>]*>', svg).group(0)
        assert ("pt-fail" in mark) == (not pt.fits) and f'data-fits="{str(pt.fits).lower()}"' in mark
    if max(fitting) < m.n_layers + 1:
        assert f'data-fit-limit="{max(fitting)}"' in svg and "would fail to allocate" in svg
    else:
        assert "data-fit-limit" not in svg


def test_offload_module_facts():
    # Module listing: Qwen2.5 14B on the RTX 3060 at n_ctx 8192, -ngl 49/49, decode 28.2 tok/s at 2,000 tokens
    d = oc.compute(ostate("?ctx=8192"))
    assert d.readouts.auto_ngl == 49 == d.readouts.fit_limit
    assert f"{d.readouts.full_tok_s:.1f}" == "28.2"
    # the curve rises slowly at first and steeply near full offload
    t = [p.tok_s for p in d.points]
    assert all(b > a for a, b in zip(t, t[1:]))
    assert (t[10] - t[0]) < (t[49] - t[39]) / 4
    # a longer context leaves room for fewer layers
    assert oc.compute(ostate("?ctx=32768")).readouts.fit_limit < 45 == oc.compute(ostate()).readouts.fit_limit


def test_offload_without_gpu_is_one_point_and_says_why():
    d = oc.compute(ostate("?machine=cpu-ddr5"))
    assert [p.ngl for p in d.points] == [0]
    assert "no GPU" in oc.render(d)


def test_offload_bad_query():
    s, msgs = oc.SPEC.from_query("?ctx=abc&tokens=-5&kv=f8")
    assert (s.ctx, s.tokens, s.kv) == (16384, 0, "f16") and len(msgs) == 3
    assert oc.SPEC.from_query("?model=phi-3-mini&ctx=16384")[0].ctx == 4096  # clamped to the model's length


@pytest.mark.parametrize(
    "name,q", [("offload-curve", ""), ("offload-curve-70b", "?model=llama-3.1-70b&machine=rtx4090&ctx=8192")]
)
def test_offload_golden(name, q):
    golden(name, svg_of(oc.render(oc.compute(ostate(q))), "offload-chart"))


# ---------------------------------------------------------------------------------------------------------
# decode-curve
# ---------------------------------------------------------------------------------------------------------
def dstate(q=""):
    s, msgs = dc.SPEC.from_query(q)
    assert msgs == [], msgs
    return s


def test_decode_registered_and_defaults():
    assert REGISTRY["decode-curve"] is dc
    s = dc.default_state()
    assert (s.model, s.machine, s.quant, s.ctx) == ("llama-3.1-8b", "rtx4090", "Q4_K_M", 65536)
    assert [k for k in pm.KV_TYPES if getattr(s, "kv_" + k)] == ["f16", "q8_0", "q4_0"]


@pytest.mark.parametrize(
    "q",
    [
        "",
        "?model=gemma-2-9b&ctx=8192&kv_bf16=1&kv_q5_1=1",
        "?model=qwen2.5-14b&machine=rtx3060&ctx=32768",
        "?model=qwen3-30b-a3b&machine=m4max",
    ],
)
def test_decode_lines_are_decode_curve_of_a_placement_per_kv_type(q):
    s = dstate(q)
    d = dc.compute(s)
    m, mc = pm.MODELS[s.model], pm.MACHINES[s.machine]
    kvs = [k for k in pm.KV_TYPES if getattr(s, "kv_" + k)]
    assert [ln.kv for ln in d.lines] == kvs
    ctxs = list(d.contexts)
    assert ctxs[0] == 0 and ctxs[-1] == s.ctx and len(ctxs) == dc.N_SAMPLES + 1
    svg = svg_of(dc.render(d), "decode-curve-chart")
    for ln in d.lines:
        p = pm.place(m, mc, s.quant, n_ctx=s.ctx, kv_type=ln.kv)
        assert ln.ngl == p.n_gpu_layers
        assert ln.curve == tuple(dc.CurvePoint.of(c) for c in it.decode_curve(p, mc, ctxs))
        # the marker: the first context whose KV bytes per token reach the weight bytes per token
        w = it.decode_curve(p, mc, [0])[0]["weight_bytes"]
        c = ln.cross
        assert pm.kv_cache_bytes(m, c, ln.kv) >= w > pm.kv_cache_bytes(m, c - 1, ln.kv)
        if c <= s.ctx:
            at = it.decode_curve(p, mc, [c - 1, c])
            assert at[0]["kv_bytes"] < at[0]["weight_bytes"] and at[1]["kv_bytes"] >= at[1]["weight_bytes"]
            assert f'data-kv="{ln.kv}" data-cross="{c}"' in svg
        else:
            assert f'data-kv="{ln.kv}" data-cross=' not in svg


def test_decode_module_listing():
    # Module: Llama 3.1 8B Q4_K_M on the RTX 4090, n_ctx 65536:
    #   f16 : 0k 151.6, 4k 136.0, 16k 103.8, 32k 78.9, 64k 53.3 tok/s
    #   q8_0: 0k 151.6, 4k 142.9, 16k 121.8, 32k 101.7, 64k 76.6 tok/s
    d = dc.compute(dstate())
    want = {"f16": [151.6, 136.0, 103.8, 78.9, 53.3], "q8_0": [151.6, 142.9, 121.8, 101.7, 76.6]}
    for ln in d.lines:
        if ln.kv in want:
            by = {c.context: c.tok_s for c in ln.curve}
            assert [round(by[c], 1) for c in (0, 4096, 16384, 32768, 65536)] == want[ln.kv]
    # "at 32k tokens [the f16 cache] is almost as large as the weights": by hand, weights read per token over
    # 2*32*8*128*2 = 131072 bytes per token of f16 cache
    f16 = d.lines[0]
    assert f16.cross == -(-int(f16.weight_bytes) // 131072) and 32768 < f16.cross < 40000


def test_decode_sliding_window_and_empty_selection():
    # Gemma 2: half the layers keep a 4096-token window, so past it the cache grows at half the rate
    m = pm.MODELS["gemma-2-9b"]
    per = pm.kv_bytes_per_token(m, "f16")
    assert pm.kv_cache_bytes(m, 8192, "f16") == per / 2 * 8192 + per / 2 * 4096
    d = dc.compute(dstate("?kv_f16=0&kv_q8_0=0&kv_q4_0=0"))
    assert d.lines == () and "Choose at least one KV cache type" in dc.render(d)
    assert dc.kv_equals_weights_context(m, "f16", 1e30) is None


def test_decode_bad_query():
    s, msgs = dc.SPEC.from_query("?ctx=999999999&kv_f16=perhaps")
    assert s.ctx == 131072 and s.kv_f16 is True and len(msgs) == 2


@pytest.mark.parametrize("name,q", [("decode-curve", ""), ("decode-curve-gemma", "?model=gemma-2-9b&ctx=8192")])
def test_decode_golden(name, q):
    golden(name, svg_of(dc.render(dc.compute(dstate(q))), "decode-curve-chart"))
