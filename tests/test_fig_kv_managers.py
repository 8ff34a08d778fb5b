"""The three-KV-managers figure in CPython: cells drawn from simulate's frames, counters summed from their events,
the module's compare() numbers as the chat preset's final counters, frame patches equal to full renders; goldens."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from html import escape as html_escape

import pytest
from goldens import golden  # tests/golden/<name>.svg, byte for byte

import kv_managers as kv
from enginelab import chart, page
from enginelab.figures import REGISTRY
from enginelab.figures import kv_managers as fig

RECT = re.compile(r'<rect x="(\d+)" y="(\d+)" width="9" height="9" data-i="(\d+)" class="([^"]*)"/>')


def state(q=""):
    s, msgs = fig.SPEC.from_query(q)
    assert msgs == []
    return s


def grid_cells(html: str, name: str) -> list[tuple[int, int, int, str]]:
    """(x, y, i, class) of every cell of one manager's grid, in document order."""
    m = re.search(rf'<g id="kv-cells-{name}" class="cells">(.*?)</g>', html)
    assert m, name
    return [(int(x), int(y), int(i), c) for x, y, i, c in RECT.findall(m.group(1))]


def readouts(html: str) -> dict:
    return dict(re.findall(r'data-readout="([a-z_]+)" data-value="([^"]*)"', html))


def simulate_all(workload: str, cap: int, pol: str) -> dict:
    """The module's three runs of a workload, straight from kv_managers.simulate."""
    reqs = fig.workload_requests(workload)
    return {
        "slots": kv.simulate(kv.SlotManager(cap), reqs),
        "paged": kv.simulate(kv.PagedManager(cap), reqs),
        "radix": kv.simulate(kv.RadixManager(cap, schedule_policy=pol), reqs),
    }


def test_registered_as_a_step_through_figure():
    assert REGISTRY["kv-managers"] is fig and fig.ID == "kv-managers"
    assert fig.STEP_FIELD == "step"
    assert [f.key for f in fig.SPEC.fields] == ["workload", "capacity", "policy", "step"]
    f = fig.SPEC.by_key["step"]
    assert f.kind == "int" and f.widget == "range"
    controls = page.prerender(fig)["controls"]
    # chat on 384 cells runs steps 0..62 (63 steps, simulate's summary)
    assert 'id="f-step"' in controls and 'min="0"' in controls and 'max="62"' in controls
    for action in ("back", "play", "next"):
        assert f'data-step-action="{action}"' in controls
    # the companion's and the engines table's links are valid states
    for q in ("?workload=radix-loses", "?workload=agent", "?policy=lpm"):
        state(q)


def test_the_modules_compare_numbers_are_the_chat_presets_final_counters():
    # The module's "same workload, three KV managers" output for compare(capacity_tokens=384):
    #   slots 376 / 652 computed, peak 4; paged 268 / 652, peak 5; radix 208 / 652, peak 5; no preemptions.
    want = {"slots": (376, 4), "paged": (268, 5), "radix": (208, 5)}
    runs = kv.compare(capacity_tokens=384)
    d = fig.compute(state("?step=62"))
    assert d.step == 62 == d.sim.last_step and d.capacity == 384
    r = readouts(fig.render(d))
    for name, (computed, peak) in want.items():
        s = runs[name]["summary"]
        assert (s["prefill_computed"], s["peak_concurrency"], s["prompt_tokens"]) == (computed, peak, 652)
        assert r[f"{name}_computed"] == str(computed) and r[f"{name}_final_computed"] == str(computed)
        assert r[f"{name}_peak"] == str(peak) and r[f"{name}_final_peak"] == str(peak)
        assert r[f"{name}_preemptions"] == "0"
        assert int(r[f"{name}_reused"]) == s["cache_hit_tokens"]
    # the default (first) frame has computed nothing but the first arrival's prompt
    r0 = readouts(fig.render(fig.compute(fig.default_state())))
    assert {r0[f"{n}_computed"] for n in want} == {"58"}  # 48-token system prompt + user 0's 10-token message


@pytest.mark.parametrize(
    "q",
    [
        "",
        "?workload=radix-loses",
        "?workload=agent",
        "?workload=radix-loses&policy=fcfs",
        "?capacity=128",
        "?workload=agent&capacity=192&policy=lpm",
    ],
)
def test_counters_at_the_last_step_match_simulates_summary(q):
    s = state(q)
    d0 = fig.compute(s)
    runs = simulate_all(s.workload, d0.capacity, d0.policy)
    last = max(r["frames"][-1]["step"] for r in runs.values())
    assert d0.sim.last_step == last
    d = fig.compute(s.replace(step=last))
    r = readouts(fig.render(d))
    for name, run in runs.items():
        sm = run["summary"]
        assert int(r[f"{name}_computed"]) == sm["prefill_computed"]
        assert int(r[f"{name}_reused"]) == sm["cache_hit_tokens"]
        assert int(r[f"{name}_peak"]) == sm["peak_concurrency"]
        assert int(r[f"{name}_preemptions"]) == sm["preemptions"]


@pytest.mark.parametrize("workload", list(fig.WORKLOADS))
def test_peak_concurrency_is_simulates_own(workload):
    """Once a manager has finished, its live "Peak so far" is simulate's summary["peak_concurrency"], the same
    number as the "At the end" line; the running peak shown before that ends exactly there, for every pool size
    and schedule_policy the figure offers (so the counter never jumps on the last frame)."""
    for cap in sorted({fig._preset_capacity(workload), *fig.CAPACITIES}):
        for pol in ("fcfs", "lpm"):
            runs = simulate_all(workload, cap, pol)
            sim = fig.simulation(workload, cap, pol)
            for name, run in runs.items():
                want = run["summary"]["peak_concurrency"]
                assert sim.runs[name].summary.peak_concurrency == want
                assert sim.runs[name].live[-1].peak == want, (workload, cap, pol, name)
    s = state(f"?workload={workload}")
    d = fig.compute(s.replace(step=fig.compute(s).sim.last_step))
    r = readouts(fig.render(d))
    for name in fig.MANAGERS:
        assert d.panels[name].done
        assert r[f"{name}_peak"] == r[f"{name}_final_peak"] == str(d.panels[name].summary.peak_concurrency)


def test_a_finished_panels_peak_is_read_from_the_summary(monkeypatch):
    # a simulation whose summary says 99: a finished manager shows 99, a running one its frames' peak so far
    s = state()
    sim = fig.compute(s).sim
    runs = {n: replace(r, summary=replace(r.summary, peak_concurrency=99)) for n, r in sim.runs.items()}
    monkeypatch.setitem(fig._SIM_CACHE, sim.key, replace(sim, runs=runs, cache={}))
    end = fig.compute(s.replace(step=sim.last_step))
    assert [end.panels[n].peak for n in fig.MANAGERS] == [99, 99, 99]
    start = fig.compute(s)
    assert [start.panels[n].peak for n in fig.MANAGERS] == [1, 1, 1]  # user 0's first turn alone


def test_counters_are_chart_readouts():
    # every number on the page carries the one data-readout markup (enginelab.chart), with the ids frame patches use
    d = fig.compute(state("?step=31"))
    html = fig.render(d)
    for n in fig.MANAGERS:
        p = d.panels[n]
        peak = chart.readout(f"{n}_peak", p.peak, str(p.peak), "Peak so far", "requests", output_id=f"kv-{n}-peak")
        used = chart.readout(
            f"{n}_cells_used",
            p.cells_used,
            f"{p.cells_used}/384",
            "Cells in use",
            f"{p.cells_cached} cached",
            output_id=f"kv-{n}-cells_used",
            unit_id=f"kv-{n}-cached",
        )
        assert peak in html and used in html
    assert html.count('<div class="readout readout-') == 3 * len(fig.COUNTERS)


def test_every_cell_class_is_its_frames_state_code_and_owner_hue():
    for q in ("", "?workload=radix-loses", "?workload=agent"):
        s = state(q)
        sim = fig.compute(s).sim
        runs = simulate_all(s.workload, sim.capacity, sim.policy)  # the module's own frames, not the figure's copy
        frames = {name: {f["step"]: f for f in runs[name]["frames"]} for name in fig.MANAGERS}
        checked = 0
        for t in range(sim.first_step, sim.last_step + 1):
            html = fig.render(fig.compute(s.replace(step=t)))
            for name in fig.MANAGERS:
                f = frames[name].get(t)
                if f is None:
                    continue
                cells = grid_cells(html, name)
                assert len(cells) == sim.capacity
                for (x, y, i, cls), code, owner in zip(cells, f["state"], f["owner"]):
                    assert (x, y) == (1 + 10 * (i % 16), 1 + 10 * (i // 16))
                    words = cls.split()
                    hue = [w for w in words if re.fullmatch(r"h\d", w)]
                    assert fig.CLASS_CODE[" ".join(w for w in words if w not in hue)] == code
                    if owner < 0:
                        assert hue == [] and code == "."
                    else:
                        assert hue == [f"h{sim.hue[owner]}"]
                checked += 1
        assert checked == sum(len(runs[n]["frames"]) for n in fig.MANAGERS)


def test_hues_follow_sessions_and_turn_two_reuses_turn_ones_colour():
    d = fig.compute(state())
    hue = d.sim.hue
    assert [hue[r] for r in range(8)] == [0, 0, 1, 1, 2, 2, 3, 3]  # user u: requests 2u and 2u+1
    assert d.sim.sessions == ("user0", "user1", "user2", "user3")


def test_live_counters_are_running_sums_of_the_events():
    s = state("?workload=agent")
    sim = fig.compute(s).sim
    for name in fig.MANAGERS:
        run = sim.runs[name]
        computed = reused = pre = peak = 0
        for f in run.frames:
            ev = f.events
            computed += sum(e.computed for e in ev if e.type == "admit")
            reused += sum(e.reused for e in ev if e.type == "admit")
            pre += sum(1 for e in ev if e.type == "preempt")
            now = len(f.running) + sum(1 for e in ev if e.type == "finish")
            peak = max(peak, now)
            p = fig.compute(s.replace(step=f.step)).panels[name]
            assert (p.computed, p.reused, p.preemptions, p.concurrency, p.peak) == (
                computed,
                reused,
                pre,
                now,
                peak,
            )
            assert p.cells_used == sum(1 for c in f.state if c not in ".EX")
    # the agent preset: vLLM preempts once (AGENT_FIGURE_PRESET's comment), the others never
    assert [sim.runs[n].live[-1].preemptions for n in fig.MANAGERS] == [0, 1, 0]


def test_idle_gaps_and_finished_managers_show_their_last_frame_settled():
    s = state()
    sim = fig.compute(s).sim
    paged = sim.runs["paged"]
    gap = next(a for a, b in zip(paged.steps, paged.steps[1:]) if b - a > 1)  # paged skips idle steps
    f = paged.frames[paged.steps.index(gap)]
    p = fig.compute(s.replace(step=gap + 1)).panels["paged"]
    assert not p.exact and p.concurrency == 0
    assert p.codes == f.state.replace("P", "p").replace("R", "r").replace("D", "d").replace("E", ".").replace("X", ".")
    assert all(c.islower() or c == "." for c in p.codes)
    # radix-loses: radix and paged finish at 24, slots runs to 40; at 40 the first two show their step-24 frame
    s2 = state("?workload=radix-loses&step=40")
    d = fig.compute(s2)
    assert d.sim.last_step == 40
    for n, last in (("paged", 24), ("radix", 24), ("slots", 40)):
        assert d.panels[n].last_step == last and d.panels[n].done
    html = fig.render(d)
    assert "finished at step 24" in html
    assert readouts(html)["radix_computed"] == "336" and readouts(html)["paged_computed"] == "272"


def test_radix_loses_preset_is_exercise_3_at_its_capacity():
    s = state("?workload=radix-loses")
    d = fig.compute(s.replace(step=24))
    assert d.capacity == kv.RADIX_LOSES_CAPACITY == 192 and d.policy == "lpm"
    assert fig.SPEC.to_query(s) == "?workload=radix-loses"  # preset capacity and policy stay out of the URL
    # 336 vs 272 prefill tokens (kv_managers.radix_loses_workload's docstring); fcfs makes it a tie
    assert (d.panels["radix"].computed, d.panels["paged"].computed) == (336, 272)
    tie = fig.compute(state("?workload=radix-loses&policy=fcfs&step=24"))
    assert tie.panels["radix"].computed == 272
    # 192 cells = 12 rows of 16
    assert len(grid_cells(fig.render(d), "radix")) == 192
    assert 'viewBox="0 0 161 121"' in fig.render(d)


def test_bad_query_values_are_explained_and_fall_back():
    s, msgs = fig.SPEC.from_query("?workload=mars&capacity=300&policy=random&step=abc&x=1")
    assert s == fig.default_state()
    assert len(msgs) == 5
    assert any("Workload" in m and "'mars'" in m for m in msgs)
    assert any("capacity_tokens" in m and "'300'" in m for m in msgs)
    assert any("schedule_policy" in m and "'random'" in m for m in msgs)
    assert any(m.startswith("Step: 'abc' is not a whole number; allowed: 0 to 62") for m in msgs)
    for raw in ("inf", "1e400", "nan", "1.5"):
        s, msgs = fig.SPEC.from_query(f"?workload=radix-loses&step={raw}")
        assert s.step == 0 and len(msgs) == 1 and msgs[0].startswith("Step: ")
    s, msgs = fig.SPEC.from_query("?step=-3")
    assert s.step == 0 and msgs == ["Step: -3 is below the minimum 0; using 0."]
    # past the end: the last frame, without a message (every manager has finished by then)
    s, msgs = fig.SPEC.from_query("?workload=radix-loses&step=62")
    assert s.step == 40 and msgs == []


def test_a_tiny_pool_rejects_and_still_renders():
    d = fig.compute(state("?capacity=64"))
    for n in fig.MANAGERS:
        assert d.panels[n].summary.rejected  # the 97..154-token second turns do not fit in 64 cells
    html = fig.render(d)
    assert "rejected" in html and len(grid_cells(html, "paged")) == 64


def apply_patch(html: str, patch: dict) -> str:
    """What site/assets/patch.js does, on the HTML text: the key (or a base patch's base) must match; then the
    cells' classes, the html parts, the text parts and the attributes, in that order."""
    if "base" in patch:
        root = re.search(r'data-patch-base="([^"]*)"', html)
        assert root and root.group(1) == patch["base"]
    else:
        root = re.search(r'data-patch-key="([^"]*)"', html)
        assert root and root.group(1) == patch["key"]
    for gid, text in patch["classes"].items():
        classes = iter(text.split("|"))
        m = re.search(rf'(<g id="{gid}" class="cells">)(.*?)(</g>)', html)
        body = RECT.sub(
            lambda r, cs=classes: r.group(0).replace(f'class="{r.group(4)}"', f'class="{next(cs)}"'), m.group(2)
        )
        assert next(classes, None) is None
        html = html[: m.start(2)] + body + html[m.end(2) :]
    parts = list(patch.get("html", {}).items()) + [(eid, html_escape(t)) for eid, t in patch.get("text", {}).items()]
    for eid, inner in parts:
        m = re.search(rf'(<(\w+)[^>]* id="{eid}"[^>]*>)', html)
        tag = m.group(2)
        start = m.end(1)
        depth, i = 1, start
        pat = re.compile(rf"<{tag}\b[^>]*>|</{tag}>")
        while depth:
            t = pat.search(html, i)
            depth += -1 if t.group(0).startswith("</") else 1
            i = t.end()
        html = html[:start] + inner + html[t.start() :]
    for eid, attrs in patch["attrs"].items():
        for k, v in attrs.items():
            html = re.sub(rf'(id="{eid}"[^>]*? {k}=")[^"]*"', lambda m, v=v: m.group(1) + v + '"', html, count=1)
    return html


@pytest.mark.parametrize("q", ["", "?workload=agent"])
def test_a_frame_patch_turns_any_frame_into_a_full_render_of_another(q):
    s = state(q)
    sim = fig.compute(s).sim
    steps = range(sim.first_step, sim.last_step + 1)
    prev = fig.render(fig.compute(s))
    for t in list(steps)[1::3] + [sim.first_step]:
        d = fig.compute(s.replace(step=t))
        pv = page.patch_view(fig, s.replace(step=t))
        patch = json.loads(pv["patch"])
        assert patch == json.loads(json.dumps(fig.frame_patch(d)))
        assert apply_patch(prev, patch) == fig.render(d)
        assert pv["summary"] == fig.describe(d) and pv["query"] == fig.SPEC.to_query(s.replace(step=t))
        prev = fig.render(d)
    # another simulation has another key: the page then renders in full
    other = fig.frame_patch(fig.compute(state("?capacity=256")))
    assert other["key"] != fig.frame_patch(fig.compute(s))["key"]


@pytest.mark.parametrize(
    "a, b",
    [
        ("?step=9", "?workload=agent&step=30"),  # another workload on as many cells (384)
        ("?workload=agent&step=12", "?step=3"),
        ("?capacity=192&step=7", "?workload=radix-loses&policy=lpm&step=21"),  # 192 cells: the other's preset
        ("?workload=radix-loses&policy=fcfs&step=40", "?workload=radix-loses&policy=lpm&step=40"),
    ],
)
def test_a_base_patch_turns_one_simulation_into_a_full_render_of_another_on_the_same_grids(a, b):
    sa, sb = state(a), state(b)
    da, db = fig.compute(sa), fig.compute(sb)
    shown = fig.render(da)
    key = re.search(r'data-patch-key="([^"]*)"', shown).group(1)
    base = re.search(r'data-patch-base="([^"]*)"', shown).group(1)
    assert key != fig.frame_patch(db)["key"] and base == fig.base_patch(db)["base"]
    pv = page.patch_view(fig, sb, key, base)  # what the glue asks: the frame's key and base
    patch = json.loads(pv["patch"])
    assert patch == json.loads(json.dumps(fig.base_patch(db)))
    assert apply_patch(shown, patch) == fig.render(db)
    # the same simulation takes a frame patch; other grids take neither (the glue renders in full)
    assert "key" in json.loads(page.patch_view(fig, sa.replace(step=sa.step + 1), key, base)["patch"])
    assert page.patch_view(fig, state("?capacity=256"), key, base) is None
    assert page.patch_view(fig, sb, key, "") is None


def test_render_is_pure_and_stepping_is_cheap(monkeypatch):
    s = state()
    a = fig.render(fig.compute(s.replace(step=20)))
    fig.render(fig.compute(s.replace(step=40)))
    assert fig.render(fig.compute(s.replace(step=20))) == a
    assert a.count('class="chart kv-grid"') == 3 and a.count('role="img"') == 3
    assert a.count("<title") == 3 and a.count("<desc") == 3 and '<details class="data-table" id="kv-table">' in a
    assert a.count("<rect ") == 3 * 384 + len(fig.LEGEND) + 4  # cells, legend swatches, one swatch per user
    # the simulation is cached: a new frame costs the patch only (bench.py times it: kv_frame_p50_ms)
    fig._SIM_CACHE.clear()
    calls = []
    real = fig.kvm.simulate
    monkeypatch.setattr(fig.kvm, "simulate", lambda *a, **k: calls.append(a[0].name) or real(*a, **k))
    fig.compute(s)
    assert sorted(calls) == ["paged", "radix", "slots"]
    for t in range(63):
        page.patch_view(fig, s.replace(step=t))
    assert len(fig._SIM_CACHE) == 1 and len(calls) == 3


@pytest.mark.parametrize(
    "name, q",
    [
        ("kv-managers", ""),
        ("kv-managers-middle", "?step=31"),
        ("kv-managers-last", "?step=62"),
        ("kv-managers-radix-loses", "?workload=radix-loses&step=10"),
        ("kv-managers-agent", "?workload=agent&step=40"),
    ],
)
def test_golden_svg(name, q):
    svg = fig.sheet_svg(fig.compute(state(q)))
    golden(name, svg, newline=True)


# ---------------------------------------------------------------------------------------------------------
# What the figure teaches: a caption per step (what each manager did and why), the radix tree, folded steps
# ---------------------------------------------------------------------------------------------------------
def test_the_caption_says_what_each_manager_did_and_why():
    d = fig.compute(state("?step=1"))  # user 1's first turn: the system prompt is cached
    assert "#2 took a slot with nothing of its prompt cached" in fig.story("slots", d)
    assert "#2's first 3 full blocks matched cached blocks by block_hash: 48 tokens reused, 6 computed" in fig.story(
        "paged", d
    )
    assert "match_prefix found the first 48 tokens of #2 in the tree" in fig.story("radix", d)
    # a finish, and a slot that keeps its KV
    d = fig.compute(state("?step=14"))
    assert fig.story("slots", d).startswith("#0 finished: its slot keeps the KV")
    assert "free_block_queue" in fig.story("paged", d) and "lock_ref -1" in fig.story("radix", d)
    # exercise 3's workload: lpm runs the P questions first and the tree evicts Q (#0's cells) to make room
    d = fig.compute(state("?workload=radix-loses&step=8"))
    radix = fig.story("radix", d)
    assert "evicted 76 cells of #0" in radix and "lpm ran the longest cached prefixes first" in radix
    assert "#2 waits" in radix
    # the agent workload: vLLM's one preemption, with its reason
    sim = fig.compute(state("?workload=agent")).sim
    t = next(f.step for f in sim.runs["paged"].frames if any(e.type == "preempt" for e in f.events))
    assert "none was free; it will be recomputed" in fig.story("paged", fig.compute(state(f"?workload=agent&step={t}")))
    # every caption is in the page, once per manager, and follows the frame (a patch rewrites it)
    html = fig.render(d)
    for n in fig.MANAGERS:
        assert f'<span id="kv-{n}-events">{html_escape(fig.story(n, d), quote=True)}</span>' in html


def test_quiet_steps_are_folded_into_one_stop():
    s = state()
    sim = fig.compute(s).sim
    eventful = {f.step for r in sim.runs.values() for f in r.frames if f.events}
    assert set(sim.stops) >= eventful and sim.stops[0] == sim.first_step and sim.stops[-1] == sim.last_step
    assert len(sim.stops) < (sim.last_step - sim.first_step + 1) / 2  # 27 stops for 63 steps
    # steps 6..13 only decode: one stop, at 13, whose caption tells the whole run
    assert all(sim.quiet[t] == (6, 13) for t in range(6, 14)) and 13 in sim.stops
    assert not any(t in sim.stops for t in range(6, 13))
    d = fig.compute(s.replace(step=13))
    assert fig._step_title(d) == "Steps 6–13"
    assert fig.story("paged", d) == (
        "8 steps of decoding: each of its 4 running requests wrote 8 reply tokens; nothing arrived, was admitted, "
        "finished or was evicted."
    )
    mid = fig.compute(s.replace(step=8))  # the scrubber can still stop inside the run
    assert fig._step_title(mid) == "Step 8" and "(step 3 of the 8 quiet steps 6–13)" in fig.story("paged", mid)
    assert f'data-stops="{",".join(map(str, sim.stops))}"' in fig.render(d)


def test_the_radix_column_draws_the_tree_with_shared_prefixes_and_lock_refs():
    d = fig.compute(state("?step=6"))  # four first turns running, all on the 48-token system prompt
    rows = d.panels["radix"].tree
    system = [r for r in rows if r.parent == 0]
    assert len(system) == 1 and system[0].tokens == 48 and system[0].lock_ref == 4
    kids = [r for r in rows if r.parent == system[0].id]
    assert len(kids) == 4 and all(r.lock_ref == 1 for r in kids)
    html = fig.render(d)
    tree = html.split('id="kv-radix-tree"')[1].split("</figure>")[0]
    assert "48 tokens" in tree and "lock_ref 4" in tree and "shared by 4 branches" in tree
    # once every turn has finished, nothing is locked: the whole tree is evictable
    end = fig.compute(state("?step=62"))
    assert all(r.lock_ref == 0 for r in end.panels["radix"].tree)
    assert "lock_ref 0 · evictable" in fig.render(end)
    # the tree is kv_managers' own: the frames' rows, typed
    run = kv.simulate(kv.RadixManager(384), kv.chat_workload())
    f6 = next(f for f in run["frames"] if f["step"] == 6)
    assert [list(vars(r).values()) for r in rows] == f6["tree"]
    # a patch carries the tree
    assert fig.frame_patch(d)["html"]["kv-radix-tree"] == str(fig._tree_html(d))


def test_the_downloaded_sheet_has_a_title_line_with_the_state_and_the_legend():
    d = fig.compute(state("?workload=radix-loses&step=10"))
    svg = fig.sheet_svg(d)
    assert ">Three KV managers, one workload</text>" in svg
    assert "192 KV cells per manager · SGLang schedule_policy lpm · Step 10 (steps 0–40)" in svg
    for _cls, label in fig.LEGEND:
        assert f">{html_escape(label, quote=True)}</text>" in svg
    for s_ in d.sim.sessions:
        assert f">user {s_}</text>" in svg
    assert fig.download_svg(d) == svg


def test_the_exercise_3_preset_does_not_hand_out_the_answer():
    label = fig.WORKLOADS["radix-loses"][0]
    assert "192" not in label and "lpm" not in label and "try it first" in label


def test_the_simulation_cache_keeps_the_most_recently_used_and_stays_bounded(monkeypatch):
    monkeypatch.setattr(fig, "SIM_CACHE_MAX", 3)
    monkeypatch.setattr(fig, "_SIM_CACHE", {})
    sims = [fig.simulation("chat", c, "fcfs") for c in (64, 96, 128)]
    assert fig.simulation("chat", 64, "fcfs") is sims[0]  # a hit: now the most recent
    fig.simulation("chat", 192, "fcfs")  # a fourth: the least recently used (96) goes
    assert list(fig._SIM_CACHE) == [("chat", 128, "fcfs"), ("chat", 64, "fcfs"), ("chat", 192, "fcfs")]
    assert fig.simulation("chat", 96, "fcfs") is not sims[1]  # simulated again, the same result
    assert fig.simulation("chat", 96, "fcfs").runs["paged"].live == sims[1].runs["paged"].live
