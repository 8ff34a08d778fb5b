"""The memory-tiers figure in CPython: bytes per token from perf_model, times by hand, tiers per machine, goldens."""

from __future__ import annotations

import re

import pytest
from goldens import golden  # tests/golden/<name>.svg, byte for byte

import perf_model as pm
from enginelab import page
from enginelab.figures import REGISTRY, tiers


def state(q=""):
    s, msgs = tiers.SPEC.from_query(q)
    assert msgs == []
    return s


def test_registered_with_the_contract():
    assert REGISTRY["tiers"] is tiers
    for name in ("ID", "TITLE", "SPEC", "default_state", "compute", "describe", "render"):
        assert hasattr(tiers, name)
    s = tiers.default_state()
    assert (s.machine, s.model, s.quant) == ("rtx4090", "llama-3.1-8b", "Q4_K_M")


def test_bytes_per_token_are_the_weights_without_token_embd():
    # Dense model: decode reads every tensor once except token_embd.
    plan = pm.quantize_plan(pm.MODELS["llama-3.1-8b"], "Q4_K_M")
    by_hand = sum(r["bytes"] for r in plan if r["cls"] != "token_embd")
    d = tiers.compute(state())
    assert d.weights_read_bytes == by_hand
    # 8B at ~4.9 bpw minus the 128256 x 4096 embedding: about 4.6 GB
    assert 4.5e9 < d.weights_read_bytes < 4.7e9


def test_moe_reads_only_the_routed_share():
    d = tiers.compute(state("?model=qwen3-30b-a3b"))
    plan = pm.quantize_plan(pm.MODELS["qwen3-30b-a3b"], "Q4_K_M")
    all_but_embd = sum(r["bytes"] for r in plan if r["cls"] != "token_embd")
    assert d.weights_read_bytes < 0.2 * all_but_embd  # 8 of 128 experts per token


def test_token_time_is_bytes_over_seventy_percent_of_bandwidth():
    d = tiers.compute(state())
    b = d.weights_read_bytes
    t = {x.key: x for x in d.tiers}
    assert d.eta == 0.7 == pm.ETA_DECODE
    assert t["vram"].token_s == pytest.approx(b / (0.7 * 1008e9))  # RTX 4090
    assert t["ram"].token_s == pytest.approx(b / (0.7 * 89.6e9))  # DDR5-5600 dual channel
    assert t["pcie"].token_s == pytest.approx(b / (0.7 * 31.5e9))  # PCIe 4.0 x16
    assert t["drive"].token_s == pytest.approx(b / (0.7 * 5e9))  # NVMe
    assert f"{t['vram'].token_s * 1e3:.2f}" == "6.54"  # 4.617 GB / 705.6 GB/s
    assert t["vram"].token_s < t["ram"].token_s < t["pcie"].token_s < t["drive"].token_s
    assert t["unified"].token_s is None and not t["unified"].present


@pytest.mark.parametrize(
    "machine, present",
    [
        ("rtx4090", {"drive", "ram", "pcie", "vram"}),
        ("m4pro", {"drive", "unified"}),
        ("cpu-ddr5", {"drive", "ram"}),
    ],
)
def test_tiers_present_follow_the_machine(machine, present):
    d = tiers.compute(state(f"?machine={machine}"))
    assert {t.key for t in d.tiers if t.present} == present
    assert [t.key for t in d.tiers] == list(tiers.TIER_ORDER)  # every tier is drawn, absent ones muted
    html = tiers.render(d)
    for t in d.tiers:
        if t.present:
            m = re.search(rf'data-readout="token_s_{t.key}" data-value="([^"]+)"', html)
            assert m and float(m.group(1)) == t.token_s
        else:
            assert f'data-readout="token_s_{t.key}"' not in html


def test_unified_memory_capacity_and_gpu_share():
    d = tiers.compute(state("?machine=m4pro&model=qwen2.5-32b"))
    u = next(t for t in d.tiers if t.key == "unified")
    assert u.capacity == 48e9 and u.bandwidth == 273e9 and u.gpu_share == 0.75
    assert u.holds_file is True  # a 19.9 GB file in 36 GB the GPU may use
    v = tiers.compute(state("?machine=rtx4060ti&model=qwen2.5-32b"))
    assert next(t for t in v.tiers if t.key == "vram").holds_file is False  # 19.9 GB > 16 GB


def test_bad_query_gives_messages_and_defaults():
    s, msgs = tiers.SPEC.from_query("?machine=cray&quant=Q9&x=1")
    assert s == tiers.default_state()
    assert len(msgs) == 3 and any("Machine" in m and "'cray'" in m for m in msgs)
    assert any("Unknown setting 'x'" in m for m in msgs)


def test_accessible_chart_and_table():
    html = tiers.render(tiers.compute(state()))
    assert html.count('role="img"') == 2  # the wide layout and the one drawn for a phone (chart.responsive)
    assert '<title id="tiers-chart-n-title">' in html and 'viewBox="0 0 340 ' in html
    assert re.search(r'<svg [^>]*role="img"[^>]*><title id="tiers-chart-title">Memory tiers of RTX 4090', html)
    assert '<desc id="tiers-chart-desc">' in html
    assert '<details class="data-table"><summary>Data table</summary><table' in html
    assert "log scale" in html and "(assumed)" in html
    assert 'class="chart tiers-chart"' in html


def test_every_machine_model_and_quant_renders():
    for mc in pm.MACHINES:
        for mk in pm.MODELS:
            d = tiers.compute(state(f"?machine={mc}&model={mk}"))
            assert tiers.render(d).startswith('<div class="fig-tiers">')


def test_render_is_pure_and_prerendered():
    s = tiers.default_state()
    assert tiers.render(tiers.compute(s)) == tiers.render(tiers.compute(s))
    assert page.prerender(tiers)["figure"] == tiers.render(tiers.compute(s))
    assert "transport" not in page.prerender(tiers)["controls"]  # not an animated figure


@pytest.mark.parametrize(
    "name, q",
    [("tiers", ""), ("tiers-m4pro", "?machine=m4pro&model=qwen2.5-32b"), ("tiers-cpu", "?machine=cpu-ddr5&quant=Q8_0")],
)
def test_golden_svg(name, q):
    svg = tiers._chart(tiers.compute(state(q)))
    golden(name, svg, newline=True)
