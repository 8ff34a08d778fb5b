"""The model-load figure in CPython: every frame is inference_trace.load_trace's step, lit on its tier; goldens."""
from __future__ import annotations

import os
import re
from pathlib import Path

import inference_trace as it
import pytest

from enginelab import page
from enginelab.figures import REGISTRY, load

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("ENGINELAB_UPDATE_GOLDEN") == "1"  # set by hand, review the diff; never in CI


def state(q=""):
    s, msgs = load.SPEC.from_query(q)
    assert msgs == []
    return s


def test_registered_as_a_step_through_figure():
    assert REGISTRY["load"] is load
    assert load.STEP_FIELD == "step"
    f = load.SPEC.by_key["step"]
    assert f.kind == "int" and f.widget == "range"
    assert set(load.SPEC.by_key["scenario"].options_for({})) == {(k, v["label"]) for k, v in
                                                                 it.LOAD_SCENARIOS.items()}
    controls = page.prerender(load)["controls"]
    assert 'type="range"' in controls and 'id="f-step"' in controls and 'max="51"' in controls
    for action in ("back", "play", "next"):
        assert f'data-step-action="{action}"' in controls


@pytest.mark.parametrize("scenario", list(it.LOAD_SCENARIOS))
@pytest.mark.parametrize("warm", [False, True])
def test_every_frame_lights_the_trace_steps_tier(scenario, warm):
    steps = it.load_scenario(scenario, warm=warm)
    s = state(f"?scenario={scenario}&warm={int(warm)}")
    assert load.SPEC.by_key["step"].bounds(s.as_dict()) == (0, len(steps) - 1)
    for i, want in enumerate(steps):
        d = load.compute(s.replace(step=i))
        assert d["step"] == want and d["lit"] == want["tier"]
        html = load.render(d)
        assert re.search(rf'<g class="tier tier-{want["tier"]} lit', html)
        assert len(re.findall(r'class="tier tier-\w+ lit', html)) == 1
        assert f'data-readout="elapsed_s" data-value="{want["elapsed_s"]!r}"' in html
        assert f'data-readout="step_bytes" data-value="{want["bytes"]!r}"' in html


def test_elapsed_is_the_running_sum_and_warm_is_faster():
    for key in it.LOAD_SCENARIOS:
        cold = load.compute(state(f"?scenario={key}"))
        warm = load.compute(state(f"?scenario={key}&warm=1"))
        assert cold["total_s"] == pytest.approx(sum(x["seconds"] for x in cold["steps"]))
        assert warm["total_s"] < cold["total_s"]
        assert warm["cold_total_s"] == cold["total_s"] and cold["warm_total_s"] == warm["total_s"]
        # warm: nothing comes from the drive
        assert all(x["tier"] != "drive" for x in warm["steps"])


def test_split_scenario_by_hand():
    # Qwen2.5 32B Q4_K_M on the 4060 Ti: --fit puts 44 blocks on the GPU; each upload crosses PCIe 4.0 x8.
    steps = it.load_scenario("split-16gb")
    ups = [x for x in steps if x["what"].startswith("Upload block")]
    assert len(ups) == 44
    d = load.compute(state(f"?step={ups[-1]['index']}"))
    assert d["resident"]["vram"] == pytest.approx(sum(x["bytes"] for x in ups))
    # cold: each upload is bounded by the drive (5 GB/s), slower than the link (15.75 GB/s)
    assert ups[0]["seconds"] == pytest.approx(ups[0]["bytes"] / 5e9)
    assert d["path"] == ["drive", "ram", "pcie", "vram"]
    # the upload steps are one row of the list
    g = [x for x in d["groups"] if x["kind"] == "upload-run"]
    assert len(g) == 1 and (g[0]["first"], g[0]["last"]) == (ups[0]["index"], ups[-1]["index"])
    assert "Upload blocks 0-43" in g[0]["what"]


def test_resident_bytes_never_exceed_capacity_and_grow():
    for key in it.LOAD_SCENARIOS:
        s = state(f"?scenario={key}")
        prev = None
        for i in range(len(load.trace(key, False))):
            d = load.compute(s.replace(step=i))
            for t, held in d["resident"].items():
                cap = d["caps"][t]
                assert cap is None or held <= cap
                if prev is not None:
                    assert held >= prev[t]
            prev = d["resident"]


def test_boxes_follow_the_machine():
    assert load.compute(state("?scenario=fits-24gb"))["tiers"] == ["drive", "ram", "pcie", "vram"]
    assert load.compute(state("?scenario=apple-unified"))["tiers"] == ["drive", "ram", "unified"]
    assert load.compute(state("?scenario=cpu-only"))["tiers"] == ["drive", "ram"]


def test_bad_query_gives_messages_and_defaults():
    s, msgs = load.SPEC.from_query("?scenario=nope&warm=maybe&step=-4")
    assert (s.scenario, s.warm, s.step) == ("split-16gb", False, 0)
    assert len(msgs) == 3 and "Scenario" in msgs[0] and "Warm" in msgs[1] and "below the minimum 0" in msgs[2]
    s, msgs = load.SPEC.from_query("?scenario=cpu-only&step=40")
    assert s.step == 5 and msgs == ["Step: 40 is above the maximum 5; using 5."]


def test_accessible_chart_list_and_table():
    html = load.render(load.compute(state("?step=3")))
    assert html.count('role="img"') == 1 and '<desc id="load-chart-desc">' in html
    assert '<title id="load-chart-title">Loading Qwen2.5 32B on RTX 4060 Ti 16 GB + DDR5 (cold), step 4 of 52' in html
    assert '<details class="data-table"><summary>Data table (52 steps)</summary>' in html
    assert html.count('aria-current="step"') == 1


def test_render_is_pure_and_fast():
    import statistics
    import time
    s = state("?step=20")
    assert load.render(load.compute(s)) == load.render(load.compute(s))
    times = []
    for _ in range(3):
        for i in range(52):
            t0 = time.perf_counter()
            load.render(load.compute(s.replace(step=i)))
            times.append(time.perf_counter() - t0)
    # the median frame (a loaded CI machine has outliers); the browser re-renders every frame in full
    assert statistics.median(times) < 0.016, f"{statistics.median(times) * 1e3:.1f} ms per frame"


@pytest.mark.parametrize("name, q", [("load", ""), ("load-upload", "?step=20"), ("load-first-token", "?step=51"),
                                     ("load-warm-pagein", "?warm=1&step=50"),
                                     ("load-unified", "?scenario=apple-unified&step=2")])
def test_golden_svg(name, q):
    svg = load._chart(load.compute(state(q)))
    path = GOLDEN / f"{name}.svg"
    if UPDATE:
        path.write_text(svg + "\n")
    assert path.exists(), f"missing golden {path}: run ENGINELAB_UPDATE_GOLDEN=1 pytest {__file__} and review it"
    assert svg + "\n" == path.read_text(), f"{name}.svg changed: review, then regenerate with ENGINELAB_UPDATE_GOLDEN=1"
