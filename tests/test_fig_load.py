"""The model-load figure in CPython: every frame is a row of the step list (one inference_trace.load_trace step,
or a run of layer uploads), lit on its tier; goldens."""

from __future__ import annotations

import re

import pytest
from goldens import golden  # tests/golden/<name>.svg, byte for byte

import inference_trace as it
from enginelab import page
from enginelab.figures import REGISTRY, load


def state(q=""):
    s, msgs = load.SPEC.from_query(q)
    assert msgs == []
    return s


def test_registered_as_a_step_through_figure():
    assert REGISTRY["load"] is load
    assert load.STEP_FIELD == "step"
    f = load.SPEC.by_key["step"]
    assert f.kind == "int" and f.widget == "range"
    assert set(load.SPEC.by_key["scenario"].options_for({})) == {(k, v["label"]) for k, v in it.LOAD_SCENARIOS.items()}
    controls = page.prerender(load)["controls"]
    assert 'type="range"' in controls and 'id="f-step"' in controls and 'max="8"' in controls  # 52 trace steps
    for action in ("back", "play", "next"):
        assert f'data-step-action="{action}"' in controls


@pytest.mark.parametrize("scenario", list(it.LOAD_SCENARIOS))
@pytest.mark.parametrize("warm", [False, True])
def test_every_frame_lights_the_trace_steps_tier(scenario, warm):
    steps = it.load_scenario(scenario, warm=warm)
    s = state(f"?scenario={scenario}&warm={int(warm)}")
    rows = load.compute(s).groups
    assert load.SPEC.by_key["step"].bounds(s.as_dict()) == (0, len(rows) - 1)
    # the rows cover the trace in order, each step once; only runs of uploads are merged
    assert [i for g in rows for i in range(g.first, g.last + 1)] == list(range(len(steps)))
    assert all(g.first == g.last or g.kind == "upload-run" for g in rows)
    for i, g in enumerate(rows):
        want = steps[g.last]
        d = load.compute(s.replace(step=i))
        assert d.group == g and d.step == load.LoadStep.of(want) and d.lit == want["tier"]
        html = load.render(d)
        wide = html.split('class="layout-narrow"')[0]  # the narrow layout (for a phone) lights the same boxes
        assert re.findall(r'class="tier tier-(\w+) lit', wide) == re.findall(
            r'class="tier tier-(\w+) lit', html.split('class="layout-narrow"')[1]
        )
        lit = re.findall(r'class="tier tier-(\w+) lit', wide)
        if "gpu_read_bytes" in want:  # the first token reads every memory that holds weights
            assert set(lit) == set(d.reads) and sum(d.reads.values()) == pytest.approx(want["bytes"])
        else:
            assert lit == [want["tier"]]
        assert f'data-readout="elapsed_s" data-value="{want["elapsed_s"]!r}"' in html
        assert f'data-readout="step_bytes" data-value="{g.bytes!r}"' in html


def test_elapsed_is_the_running_sum_and_warm_is_faster():
    for key in it.LOAD_SCENARIOS:
        cold = load.compute(state(f"?scenario={key}"))
        warm = load.compute(state(f"?scenario={key}&warm=1"))
        assert cold.total_s == pytest.approx(sum(x.seconds for x in cold.steps))
        assert warm.total_s < cold.total_s
        assert warm.cold_total_s == cold.total_s and cold.warm_total_s == warm.total_s
        # warm: nothing comes from the drive
        assert all(x.tier != "drive" for x in warm.steps)


def test_split_scenario_by_hand():
    # Qwen2.5 32B Q4_K_M on the 4060 Ti: --fit puts 44 blocks on the GPU; each upload crosses PCIe 4.0 x8.
    steps = it.load_scenario("split-16gb")
    ups = [x for x in steps if x["what"].startswith("Upload block")]
    assert len(ups) == 44
    d = load.compute(state("?step=2"))  # the third row: the 44 uploads, one frame
    assert d.group.kind == "upload-run" and d.step.index == ups[-1]["index"]
    assert d.resident["vram"] == pytest.approx(sum(x["bytes"] for x in ups))
    html = load.render(d)
    assert 'role="progressbar"' in html and 'aria-valuenow="44"' in html and "44 blocks ×" in html
    # cold: each upload is bounded by the drive (5 GB/s), slower than the link (15.75 GB/s)
    assert ups[0]["seconds"] == pytest.approx(ups[0]["bytes"] / 5e9)
    assert d.path == ("drive", "ram", "pcie", "vram")
    # the upload steps are one row of the list
    g = [x for x in d.groups if x.kind == "upload-run"]
    assert len(g) == 1 and (g[0].first, g[0].last) == (ups[0]["index"], ups[-1]["index"])
    assert "Upload blocks 0-43" in g[0].what


def test_the_first_token_reads_vram_and_ram_each_with_its_own_bytes():
    steps = it.load_scenario("split-16gb")
    first = steps[-1]
    d = load.compute(state("?step=8"))
    assert d.step.index == first["index"] and d.kind == "first-token"
    assert d.reads == {"vram": first["gpu_read_bytes"], "ram": first["cpu_read_bytes"]}
    # VRAM holds the 44 blocks it reads (12.8 GB), RAM the rest: no longer "19.4 GB in RAM"
    assert d.reads["vram"] > d.reads["ram"] and d.reads["vram"] <= d.resident["vram"]
    html = load.render(d)
    assert f"{load.fmt.bytes_auto(first['gpu_read_bytes'])} read" in html
    assert f"{load.fmt.bytes_auto(first['bytes'])}<" not in html.split('id="load-boxes"')[1].split("</g>")[0]


def test_resident_bytes_never_exceed_capacity_and_grow():
    for key in it.LOAD_SCENARIOS:
        s = state(f"?scenario={key}")
        prev = None
        for i in range(len(load.compute(s).groups)):
            d = load.compute(s.replace(step=i))
            for t, held in d.resident.items():
                cap = d.caps[t]
                assert cap is None or held <= cap
                if prev is not None:
                    assert held >= prev[t]
            prev = d.resident


def test_boxes_follow_the_machine():
    assert load.compute(state("?scenario=fits-24gb")).tiers == ("drive", "ram", "pcie", "vram")
    assert load.compute(state("?scenario=apple-unified")).tiers == ("drive", "ram", "unified")
    assert load.compute(state("?scenario=cpu-only")).tiers == ("drive", "ram")


def test_bad_query_gives_messages_and_defaults():
    s, msgs = load.SPEC.from_query("?scenario=nope&warm=maybe&step=-4")
    assert (s.scenario, s.warm, s.step) == ("split-16gb", False, 0)
    assert len(msgs) == 3 and "Scenario" in msgs[0] and "Warm" in msgs[1] and "below the minimum 0" in msgs[2]
    s, msgs = load.SPEC.from_query("?scenario=cpu-only&step=40")
    assert s.step == 5 and msgs == ["Step: 40 is above the maximum 5; using 5."]


def test_accessible_chart_list_and_table():
    html = load.render(load.compute(state("?step=3")))
    assert html.count('role="img"') == 2 and '<desc id="load-chart-desc">' in html  # wide + drawn for a phone
    assert '<desc id="load-chart-n-desc">' in html and 'viewBox="0 0 340 ' in html
    assert '<title id="load-chart-title">Loading Qwen2.5 32B on RTX 4060 Ti 16 GB + DDR5 (cold), step 4 of 9' in html
    assert '<details class="data-table"><summary>Data table (52 steps)</summary>' in html
    assert html.count('aria-current="step"') == 1


def test_render_is_pure():
    """The same state renders the same bytes, whatever was rendered between (its speed is bench.py's to time)."""
    s = state("?step=2")
    first = load.render(load.compute(s))
    for i in range(9):
        load.render(load.compute(s.replace(step=i)))
    assert load.render(load.compute(s)) == first


@pytest.mark.parametrize(
    "name, q",
    [
        ("load", ""),
        ("load-upload", "?step=2"),
        ("load-first-token", "?step=8"),
        ("load-warm-pagein", "?warm=1&step=7"),
        ("load-unified", "?scenario=apple-unified&step=2"),
    ],
)
def test_golden_svg(name, q):
    svg = load._chart(load.compute(state(q)))
    golden(name, svg, newline=True)


# ---------------------------------------------------------------------------------------------------------
# Frame patches: the glue applies frame_patch(data) instead of a full render when the key matches
# ---------------------------------------------------------------------------------------------------------
def _element_span(html: str, id_: str) -> tuple[int, int, int, int]:
    """(start of the start tag, start of the content, end of the content, end of the element) for id_."""
    i = html.index(f' id="{id_}"')
    lt = html.rindex("<", 0, i)
    tag = re.match(r"<([a-zA-Z]+)", html[lt:]).group(1)
    content = html.index(">", i) + 1
    depth, pos = 1, content
    opener = re.compile(rf"<{tag}[\s>/]|</{tag}>")
    while depth:
        m = opener.search(html, pos)
        if m.group(0).startswith("</"):
            depth -= 1
        elif not html[m.start() : html.index(">", m.start()) + 1].endswith("/>"):
            depth += 1
        pos = m.end()
    return lt, content, m.start(), m.end()


def apply_patch(html: str, patch: dict) -> str:
    """What site/assets/patch.js's applyPatch does to the DOM, on the HTML text."""
    from html import escape

    assert re.search(rf'data-patch-key="{re.escape(patch["key"])}"', html)
    for id_, inner in list(patch.get("html", {}).items()) + [
        (k, escape(v, quote=True)) for k, v in patch.get("text", {}).items()
    ]:
        _, a, b, _ = _element_span(html, id_)
        html = html[:a] + inner + html[b:]
    for id_, attrs in patch.get("attrs", {}).items():
        lt, a, _, _ = _element_span(html, id_)
        start = html[lt:a]
        for k, v in attrs.items():
            start, n = re.subn(rf' {k}="[^"]*"', f' {k}="{escape(v, quote=True)}"', start)
            assert n == 1, (id_, k)
        html = html[:lt] + start + html[a:]
    return html


@pytest.mark.parametrize(
    "q", ["", "?warm=1", "?scenario=fits-24gb", "?scenario=apple-unified&warm=1", "?scenario=cpu-only"]
)
def test_a_frame_patch_turns_any_frame_into_the_full_render_of_another(q):
    s = state(q)
    n = len(load.compute(s).groups)
    frames = sorted({0, 1, 2, n // 2, n - 2, n - 1})
    renders = {i: load.render(load.compute(s.replace(step=i))) for i in frames}
    for a in frames:
        for b in frames:
            patch = load.frame_patch(load.compute(s.replace(step=b)))
            assert apply_patch(renders[a], patch) == renders[b], (q, a, b)


def test_patch_keys_separate_scenarios_and_launches():
    keys = {load.patch_key(load.compute(state(f"?scenario={k}&warm={w}"))) for k in it.LOAD_SCENARIOS for w in (0, 1)}
    assert len(keys) == 2 * len(it.LOAD_SCENARIOS)
    assert page.patch_view(load, state("?step=4"))["patch"].startswith('{"key":"load|split-16gb|0"')
