"""The "How many users?" figure (enginelab/figures/users.py): its numbers are the serving simulation's, the knee
is the largest concurrency within the SLO, both layouts are drawn, and the chart is pinned by a golden."""

from __future__ import annotations

import re

import pytest
from goldens import golden

import perf_model as pm
from enginelab import chart, page
from enginelab.figures import REGISTRY
from enginelab.figures import users as fig
from enginelab.serving import sim


@pytest.fixture(scope="module")
def data():
    return fig.compute(fig.default_state())


def svg_of(html: str, chart_id: str) -> str:
    m = re.search(rf'<svg [^>]*id="{chart_id}".*?</svg>', html, re.S)
    assert m, f"no {chart_id}"
    return m.group(0)


def test_registered():
    assert REGISTRY["users"] is fig and fig.ID == "users"


def test_points_are_the_simulation_and_the_knee_follows_the_slo(data):
    s = data.state
    vllm = next(ln for ln in data.lines if ln.engine == "vllm")
    p = pm.place(s.model, s.machine, "BF16", n_ctx=32768, profile="measured")
    w = sim.Workload(num_prompts=2 * 8 + 8, max_concurrency=8, input_len=s.input_len, output_len=s.output_len)
    m = sim.simulate("vllm", p, w).metrics
    pt = next(q for q in vllm.points if q.concurrency == 8)
    assert pt.output_throughput == pytest.approx(m["output_throughput"])
    assert pt.mean_tpot_ms == pytest.approx(m["mean_tpot_ms"])
    for ln in data.lines:
        ok = [q.concurrency for q in ln.points if q.mean_tpot_ms <= s.slo_tpot and q.mean_ttft_ms <= s.slo_ttft]
        assert ln.users == max(ok, default=0)
        assert data.readouts[f"users_{ln.engine.replace('.', '')}"] == ln.users
    # throughput grows with users until the knee (batching); each engine's single user is its slowest point
    for ln in data.lines:
        tput = [q.output_throughput for q in ln.points]
        assert tput[0] == min(tput)


def test_a_tighter_slo_serves_fewer_users():
    loose = fig.compute(fig.SPEC.from_query("?slo_tpot=1000&slo_ttft=60000")[0])
    tight = fig.compute(fig.SPEC.from_query("?slo_tpot=5")[0])
    assert all(ln.users == 64 for ln in loose.lines)
    assert all(t.users <= lo.users for t, lo in zip(tight.lines, loose.lines))


def test_engines_that_cannot_run_say_why():
    d = fig.compute(fig.SPEC.from_query("?machine=m4max")[0])  # vLLM and SGLang need a discrete NVIDIA GPU
    errs = {ln.engine: ln.error for ln in d.lines}
    assert errs["llama.cpp"] is None and errs["vllm"] and errs["sglang"]
    assert "cannot run" in fig.describe(d)
    html = fig.render(d)
    assert 'role="alert"' in html and "users-tok" in html


def test_both_layouts_and_a_phone_width(data):
    html = page.prerender(fig)["figure"]
    assert '<div class="layout-wide">' in html and '<div class="layout-narrow">' in html
    narrow = html.split('<div class="layout-narrow">', 1)[1]
    first = re.search(r'<svg [^>]*viewBox="0 0 ([\d.]+) [\d.]+"[^>]*id="([^"]+)"', narrow)
    assert first and float(first.group(1)) == chart.NARROW_W and first.group(2).endswith("-n")
    ids = re.findall(r' id="([^"]+)"', html)
    assert len(ids) == len(set(ids))


def test_golden(data):
    golden("users", svg_of(fig.render(data), "users-tpot"))
