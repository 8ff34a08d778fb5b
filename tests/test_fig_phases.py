"""The prefill/decode figure in CPython: each frame is a phase_trace stage; the running total ends at perf_model's."""

from __future__ import annotations

import re

import pytest
from goldens import golden  # tests/golden/<name>.svg, byte for byte

import inference_trace as it
import perf_model as pm
from enginelab import page
from enginelab.figures import REGISTRY, phases


def state(q=""):
    s, msgs = phases.SPEC.from_query(q)
    assert msgs == []
    return s


def perf_model_total(scenario: str, phase: str) -> float:
    """Straight from perf_model, as the module's listing calls it."""
    sc = it.PHASE_SCENARIOS[scenario]
    p = pm.place(sc["model"], sc["machine"], sc["quant"], sc["n_ctx"])
    if phase == "decode":
        return pm.decode_step_time(p, p.machine, context=sc["context"])["total_s"]
    return pm.prefill_time(p, p.machine, sc["n_tokens"])["total_s"]


def test_registered_as_a_step_through_figure():
    assert REGISTRY["phases"] is phases
    assert phases.STEP_FIELD == "step" and phases.SPEC.by_key["step"].widget == "range"
    s = phases.default_state()
    assert (s.scenario, s.phase, s.step) == ("partial", "decode", 0)
    assert 'data-step-action="play"' in page.prerender(phases)["controls"]


@pytest.mark.parametrize("scenario", list(it.PHASE_SCENARIOS))
@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_running_total_ends_at_perf_models_total(scenario, phase):
    steps = it.phase_scenario(scenario, phase)
    s = state(f"?scenario={scenario}&phase={phase}")
    assert phases.SPEC.by_key["step"].bounds(s.as_dict()) == (0, len(steps) - 1)
    want = perf_model_total(scenario, phase)
    running = 0.0
    for i, st in enumerate(steps):
        d = phases.compute(s.replace(step=i))
        running += st["seconds"]
        assert d.step == phases.Stage.of(st) and d.elapsed_s == pytest.approx(running, rel=1e-12)
        assert d.model_total_s == want
        html = phases.render(d)
        # the lit box is the stage's device (the host overhead runs on the CPU side)
        lit = re.findall(r'<g class="dev dev-(\w+) lit"', html.split('class="layout-narrow"')[0])
        assert lit == re.findall(r'<g class="dev dev-(\w+) lit"', html.split('class="layout-narrow"')[1])
        assert lit == [{"host": "cpu"}.get(st["device"], st["device"])]
        assert f'data-readout="model_total_s" data-value="{want!r}"' in html
    last = phases.compute(s.replace(step=len(steps) - 1))
    assert last.elapsed_s == pytest.approx(want, rel=1e-12)
    assert last.trace_total_s == pytest.approx(want, rel=1e-12)


def test_decode_is_memory_bound_and_prefill_compute_bound():
    for sc in it.PHASE_SCENARIOS:
        dec = phases.compute(state(f"?scenario={sc}")).steps
        pre = phases.compute(state(f"?scenario={sc}&phase=prefill")).steps
        for st in dec:
            if st.flops:
                assert st.bound == "memory" and st.intensity < 10  # ~2 FLOPs per ~0.6 byte
        gpu_pre = [st for st in pre if st.stage == "gpu"]
        assert gpu_pre and all(st.bound == "compute" and st.intensity > 500 for st in gpu_pre)


def test_partial_decode_by_hand():
    # 32B on a 16 GB card: 44 blocks on the GPU, the rest (and the output head) on the CPU; the CPU's stages
    # take most of the token (the module's "CPU share 62%").
    d = phases.compute(state())
    cpu_s = sum(st.seconds for st in d.steps if st.device == "cpu")
    assert cpu_s / d.model_total_s == pytest.approx(0.62, abs=0.01)
    first = d.steps[0]
    assert first.what == "attention blocks 0-43" and first.device == "gpu"
    ridge_4060 = 51.75e12 / 288e9
    assert d.devices[0].ridge == pytest.approx(ridge_4060)
    assert f"{ridge_4060:,.0f}" in phases.render(d)


def test_prefill_partial_shows_the_pcie_copy():
    d = phases.compute(state("?phase=prefill&step=1"))
    st = d.step
    assert st.device == "pcie" and st.bound == "transfer" and d.lit == "pcie"
    assert st.seconds == pytest.approx(st.bytes / (pm.ETA_PCIE * 15.75e9))
    assert "no arithmetic" in phases.render(d)


def test_bad_query_gives_messages_and_defaults():
    s, msgs = phases.SPEC.from_query("?scenario=huge&phase=train&step=x")
    assert s == phases.default_state()
    assert len(msgs) == 3 and "Phase" in msgs[1] and "not a whole number" in msgs[2]
    s, msgs = phases.SPEC.from_query("?scenario=fits&step=9")
    assert s.step == 3 and "above the maximum 3" in msgs[0]


def test_accessible_chart_list_and_table():
    html = phases.render(phases.compute(state("?step=2")))
    assert html.count('role="img"') == 2 and '<desc id="phases-chart-desc">' in html  # wide + drawn for a phone
    assert '<desc id="phases-chart-n-desc">' in html
    assert '<title id="phases-chart-title">Decode: 32B model, partial offload, stage 3 of 6</title>' in html
    assert "perf_model.decode_step_time total" in html and "<details" in html
    assert html.count('aria-current="step"') == 1


def test_render_is_pure():
    s = state("?phase=prefill&step=4")
    assert phases.render(phases.compute(s)) == phases.render(phases.compute(s))
    assert page.prerender(phases)["figure"] == phases.render(phases.compute(phases.default_state()))


@pytest.mark.parametrize(
    "name, q",
    [
        ("phases", ""),
        ("phases-decode-cpu", "?step=3"),
        ("phases-decode-last", "?step=5"),
        ("phases-prefill-pcie", "?phase=prefill&step=1"),
        ("phases-prefill-fits", "?scenario=fits&phase=prefill&step=3"),
    ],
)
def test_golden_svg(name, q):
    svg = phases._chart(phases.compute(state(q)))
    golden(name, svg, newline=True)


@pytest.mark.parametrize("scenario", list(it.PHASE_SCENARIOS))
@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_a_frame_patch_turns_any_frame_into_the_full_render_of_another(scenario, phase):
    from test_fig_load import apply_patch

    s = state(f"?scenario={scenario}&phase={phase}")
    n = len(phases.trace(scenario, phase))
    renders = {i: phases.render(phases.compute(s.replace(step=i))) for i in range(n)}
    for a in range(n):
        for b in range(n):
            patch = phases.frame_patch(phases.compute(s.replace(step=b)))
            assert apply_patch(renders[a], patch) == renders[b], (scenario, phase, a, b)
    keys = {
        phases.patch_key(phases.compute(state(f"?scenario={k}&phase={p}")))
        for k in it.PHASE_SCENARIOS
        for p in ("prefill", "decode")
    }
    assert len(keys) == 4
