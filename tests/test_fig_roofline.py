"""The roofline figure in CPython: every number against perf_model.roofline / ridge_batch / quant_bpw called
here, the module's "Try this" presets, overlays, bad input, and golden SVGs."""

from __future__ import annotations

import html as htmllib
import re

import pytest
from goldens import golden  # noqa: E402  tests/golden/<name>.svg, byte for byte

import perf_model as pm
from enginelab import page
from enginelab.figures import REGISTRY
from enginelab.figures import roofline as rf


def chart_svg(html: str) -> str:
    m = re.search(r'<svg [^>]*id="roofline-chart".*?</svg>', html, re.S)
    assert m, "no roofline chart"
    return m.group(0)


def state(q=""):
    s, msgs = rf.SPEC.from_query(q)
    assert msgs == [], msgs
    return s


def readout(html: str, name: str) -> tuple[str, str]:
    m = re.search(rf'<output data-readout="{name}" data-value="([^"]*)">([^<]*)</output>', html)
    assert m, f"no readout {name}"
    return m.group(1), m.group(2)


def test_registered_and_contract():
    assert REGISTRY["roofline"] is rf
    for name in ("ID", "TITLE", "SPEC", "default_state", "compute", "describe", "render"):
        assert hasattr(rf, name)
    s = rf.default_state()
    assert (s.machine, s.quant, s.model, s.batch, s.vs) == ("rtx4090", "Q4_K_M", "llama-3.1-8b", 1, "none")
    assert rf.SPEC.to_query(s) == ""


@pytest.mark.parametrize(
    "q",
    [
        "",
        "?batch=64",
        "?machine=rtx3060&batch=24",
        "?quant=F16",
        "?model=none",
        "?machine=cpu-ddr5&quant=Q8_0&batch=3",
        "?machine=m4max&model=qwen2.5-32b&batch=4096",
    ],
)
def test_readouts_are_perf_models_roofline(q):
    s = state(q)
    d = rf.compute(s)
    mc = pm.MACHINES[s.machine]
    dev = mc.gpu if mc.gpu is not None else mc.ram
    model = None if s.model == "none" else pm.MODELS[s.model]
    bpw = pm.quant_bpw(s.quant, model)
    r = pm.roofline(dev, bpw, s.batch)
    rb = pm.ridge_batch(dev, s.quant, model)
    assert d.readouts == rf.Readouts(
        bpw=bpw,
        intensity=r["intensity"],
        attainable_tflops=r["attainable_flops"] / 1e12,
        utilization=r["utilization"],
        bound=r["bound"],
        ridge_intensity=r["ridge_intensity"],
        ridge_batch=rb,
        intensity_ratio=None,
    )
    html = rf.render(d)
    # the ridge batch shown, in the readout and on the chart, is round(ridge_batch(...))
    assert readout(html, "ridge_batch")[1] == str(round(rb))
    assert f'data-ridge-batch="{round(rb)}"' in chart_svg(html)
    assert float(readout(html, "intensity")[0]) == r["intensity"] == 16 * s.batch / bpw


def test_module_numbers_rtx4090():
    # Module: RTX 4090, 165 TFLOP/s and 1,008 GB/s, at 4.5 bpw -> ridge batch about 46; batch 1 has
    # intensity 3.6 and uses roughly 2% of the arithmetic.
    d = rf.compute(state("?model=none"))
    r = d.readouts
    assert r.bpw == 4.5 and round(r.ridge_batch) == 46
    assert f"{r.intensity:.1f}" == "3.6" and round(r.utilization * 100) == 2 and r.bound == "memory"


def test_operating_point_moves_up_the_slope_with_the_batch_and_stops_at_the_roof():
    xs, ys = [], []
    for b in (1, 8, 50, 51, 400):
        svg = chart_svg(rf.render(rf.compute(state(f"?batch={b}" if b != 1 else ""))))
        m = re.search(r'<circle[^>]*class="op"', svg)
        cx = float(re.search(r'cx="([\d.]+)"', m.group(0)).group(1))
        cy = float(re.search(r'cy="([\d.]+)"', m.group(0)).group(1))
        xs.append(cx), ys.append(cy)
    assert xs == sorted(xs) and len(set(xs)) == 5  # further right with every batch
    assert ys[0] > ys[1] > ys[2]  # climbing the slope (SVG y grows down)
    assert rf.compute(state("?batch=49")).readouts.bound == "memory"
    assert rf.compute(state("?batch=51")).readouts.bound == "compute"


def test_try_this_presets():
    p1, p2, p3 = rf.presets()
    llama8 = pm.MODELS["llama-3.1-8b"]
    # 1: RTX 3060 + Q4_K_M at its ridge batch (24 for Llama 3.1 8B's 4.89 effective bpw)
    d = rf.compute(state(p1[1]))
    rb = pm.ridge_batch(pm.RTX_3060, "Q4_K_M", llama8)
    assert d.state.machine == "rtx3060" and d.state.batch == round(rb) == 24
    assert d.op.intensity == pytest.approx(d.op.ridge_intensity, rel=0.01)
    # 2: F16 -> Q4_K_M at batch 1: intensity x3.3
    d = rf.compute(state(p2[1]))
    ratio = pm.quant_bpw("F16", llama8) / pm.quant_bpw("Q4_K_M", llama8)
    assert d.readouts.intensity_ratio == pytest.approx(ratio) and f"{ratio:.1f}" == "3.3"
    assert readout(rf.render(d), "intensity_ratio")[1] == "×3.27"
    # 3: M4 Max against the RTX 4090: both drawn, Apple's ridge batch the smaller
    d = rf.compute(state(p3[1]))
    by = {x.key: x for x in d.devices}
    assert set(by) == {"m4max", "rtx4090"} and by["m4max"].primary
    assert by["m4max"].ridge_batch == pm.ridge_batch(pm.M4_MAX, "Q4_K_M", llama8)
    assert round(by["m4max"].ridge_batch) == 10 < round(by["rtx4090"].ridge_batch) == 50
    # each preset is a button carrying the whole state (every field) for the page's set-state glue
    html = rf.render(rf.compute(rf.default_state()))
    import json

    found = {
        htmllib.unescape(q): json.loads(htmllib.unescape(v))
        for v, q in re.findall(r'<button[^>]*data-set-state="([^"]+)" data-query="([^"]+)"', html)
    }
    for _label, q, _ in (p1, p2, p3):
        s = state(q)
        assert found[q] == {f.key: f.encode(getattr(s, f.key)) for f in rf.SPEC.fields}
        assert rf.SPEC.from_form(found[q]) == (s, [])


def test_overlays_draw_one_roof_per_device():
    keys = [k for k in pm.MACHINES if k != "rtx4090"]
    q = "?" + "&".join(f"{rf._also_key(k)}=1" for k in keys)
    svg = chart_svg(rf.render(rf.compute(state(q))))
    drawn = re.findall(r'<path[^>]*data-device="([^"]+)"', svg)
    assert sorted(drawn) == sorted(pm.MACHINES) and len(drawn) == len(pm.MACHINES)
    assert svg.count('class="ridge-dot') == len(pm.MACHINES)
    # an overlay of the primary device itself is not drawn twice
    svg = chart_svg(rf.render(rf.compute(state("?also_rtx4090=1"))))
    assert len(re.findall(r"data-device=", svg)) == 1


def test_bad_query_values_explain_and_fall_back():
    s, msgs = rf.SPEC.from_query("?machine=h100&batch=0&quant=Q9&vs=zz&also_m4max=maybe")
    assert (s.machine, s.batch, s.quant, s.vs, s.also_m4max) == ("rtx4090", 1, "Q4_K_M", "none", False)
    text = " ".join(msgs)
    for word in ("Device", "Batch", "Quantization", "Compare", "M4 Max"):
        assert word in text, (word, msgs)
    assert rf.SPEC.from_query("?batch=100000")[0].batch == rf.MAX_BATCH


def test_controls_group_the_overlay_checkboxes():
    html = page.controls_html(rf, rf.default_state())
    assert html.count('type="checkbox"') == len(pm.MACHINES)
    # the chosen device's own overlay box is hidden (it is always drawn)
    assert re.search(r'<div class="field field-bool" data-field="also_rtx4090" data-sig="[^"]+" hidden>', html)
    assert html.count(" hidden>") == 1
    assert "<legend>Overlay devices</legend>" in html
    for f in rf.SPEC.fields:
        assert f'data-field="{f.key}"' in html


def test_accessible_chart_and_data_table():
    html = rf.render(rf.compute(state("?vs=F16&also_m4max=1")))
    svg = chart_svg(html)
    assert 'role="img"' in svg and "<title" in svg and "<desc" in svg
    assert '<details class="data-table">' in html
    rows = re.findall(r"<tr><th scope=\"row\">([^<]+)</th>", html)
    assert rows[:2] == ["RTX 4090", "M4 Max 40-core (128 GB) (approx.)"] and rows[2].startswith("RTX 4090 with F16")


@pytest.mark.parametrize(
    "name,q", [("roofline", ""), ("roofline-presets", "?machine=m4max&also_rtx4090=1&vs=F16&batch=8")]
)
def test_golden(name, q):
    golden(name, chart_svg(rf.render(rf.compute(state(q)))))
