"""The "How many users?" figure (enginelab/figures/users.py): its numbers are the serving simulation's, the knee
is the largest concurrency within the SLO, both layouts are drawn, and the chart is pinned by a golden."""

from __future__ import annotations

import re

import pytest
from goldens import golden

import perf_model as pm
from enginelab import chart, page
from enginelab.advisor import load
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


def test_ttft_panel_has_the_slo_line_and_the_knees(data):
    html = fig.render(data)
    ttft = svg_of(html, "users-ttft")
    assert "SLO 2,000 ms" in ttft and 'class="slo"' in ttft
    # one knee per engine that serves at least one user, drawn on every panel
    knees = sum(1 for ln in data.lines if ln.users)
    assert ttft.count('class="knee ') == knees == svg_of(html, "users-tok").count('class="knee ')


def test_llama_server_slots_cap_it_and_the_why_says_so():
    # -np 4: from 4 users on, llama-server runs 4 requests and queues the rest; its throughput at 8 users is
    # that of 4 (same batch), so doubling the users adds nothing and the cause is the cap
    d = fig.compute(fig.SPEC.from_query("?np=4")[0])
    ln = next(x for x in d.lines if x.engine == "llama.cpp")
    t4, t8 = (next(p for p in ln.points if p.concurrency == c).output_throughput for c in (4, 8))
    assert t8 < 1.25 * t4
    assert ln.flat_at == 8 and ln.cause == "cap" and ln.cap == 4
    assert "-np (n_parallel) allows 4 slots" in ln.why and "4 wait in the queue" in ln.why
    html = fig.render(d)
    assert 'data-cause="cap"' in html
    # TTFT grows with the queue: at 64 users most requests wait for a slot
    ttft = {p.concurrency: p.mean_ttft_ms for p in ln.points}
    assert ttft[64] > 8 * ttft[4]


def test_long_prompts_run_out_of_kv_pool():
    # 4,096 + 512 tokens per request. vLLM's pool (its start-up plan) holds pool // 4,608 = 10 of them and
    # SGLang's 8: from 8 to 16 users the requests that can run grow from 8 to 10 (vLLM, which also preempts) and
    # not at all (SGLang): the KV pool. llama-server's 32,768 cells hold 7: from 4 to 8 users 4 -> 7 run, more
    # than half as many again, so what flattens it there is the step's cost (compute), not the pool.
    d = fig.compute(fig.SPEC.from_query("?input_len=4096&output_len=512")[0])
    by = {ln.engine: ln for ln in d.lines}
    assert by["vllm"].pool // 4608 == 10 and by["sglang"].pool // 4608 == 8
    for e in ("vllm", "sglang"):
        assert by[e].flat_at == 16 and by[e].cause == "kv", (e, by[e].flat_at, by[e].cause)
        assert f"hold {by[e].pool // 4608} requests of 4,608 tokens, not 16" in by[e].why
    assert by["vllm"].points[4].preemptions > 0 and "preemption" in by["vllm"].why
    assert by["llama.cpp"].flat_at == 8 and by["llama.cpp"].cause == "compute"
    vllm = by["vllm"]
    assert vllm.pool == sim.pool_tokens("vllm", fig.placement(d.state, "vllm"), sim.FLAGS["vllm"])


def test_the_default_is_bent_by_compute_on_vllm(data):
    # 64 requests of 640 tokens fit vLLM's pool and its 256 max_num_seqs: nothing but the step's cost bends it
    vllm = next(x for x in data.lines if x.engine == "vllm")
    assert vllm.pool >= 64 * 640 and vllm.cap == 256
    assert vllm.cause == "compute" and vllm.flat_at == 0


def test_timelapse_frames_are_the_simulation_samples(data):
    tl = data.timelapse
    assert (tl.engine, tl.users) == ("vllm", 64) and len(tl.frames) == fig.FRAMES
    _pt, kv_use, pool, dur = fig.run(data.state, "vllm", 64)
    assert tl.pool == pool and tl.frames[-1] == kv_use[-1]
    assert all(f in kv_use for f in tl.frames)
    assert [f[0] for f in tl.frames] == sorted(f[0] for f in tl.frames)
    html = fig.render(data)
    grid = svg_of(html, "users-kv")
    # each frame: 128 cells, the used share of them filled
    assert grid.count("<rect") == fig.FRAMES * 128
    used = sum(round(min(1.0, u / pool) * 128) for _t, u in tl.frames)
    assert grid.count('class="k-used') == used


def test_frames_of_picks_the_last_sample_before_each_slice_end():
    samples = [(0.5, 10), (1.0, 20), (2.5, 30), (4.0, 40)]
    assert fig.frames_of(samples, 4.0, 4) == ((1.0, 20), (1.0, 20), (2.5, 30), (4.0, 40))
    assert fig.frames_of([], 1.0, 8) == ()


def test_ctx_zero_is_the_trained_context_and_ctx_is_llama_servers_pool():
    s, _ = fig.SPEC.from_query("?ctx=0")
    assert fig.n_ctx(s) == pm.MODELS["llama-3.1-8b"].max_position_embeddings
    d = fig.compute(fig.SPEC.from_query("?ctx=5120")[0])
    ln = next(x for x in d.lines if x.engine == "llama.cpp")
    # 5,120 cells hold 8 requests of 640 tokens: from 8 to 16 users no more of them run
    assert ln.pool == 5120 and ln.flat_at == 16 and ln.cause == "kv"
    assert "hold 8 requests of 640 tokens, not 16" in ln.why


def test_timelapse_engine_that_cannot_run_says_why():
    d = fig.compute(fig.SPEC.from_query("?machine=m4max&kv_engine=sglang")[0])
    assert d.timelapse.error and not d.timelapse.frames
    assert "SGLang cannot run here" in fig.render(d)


def test_links_carry_the_calculators_model_machine_quant_and_ctx():
    from enginelab import links
    from enginelab.figures import calculator, engines, serving_plan

    cs, msgs = calculator.SPEC.from_query("?model=qwen2.5-14b&machine=rtx3060&quant=Q5_K_M&ctx=16384")
    assert not msgs
    q = links.users_query(cs)
    us, msgs = fig.SPEC.from_query(q)
    assert not msgs
    assert (us.model, us.machine, us.quant, us.ctx) == ("qwen2.5-14b", "rtx3060", "Q5_K_M", 16384)
    calc_html = str(calculator.findings_slot(calculator.compute(cs), defer=True))
    assert 'href="users.html?model=qwen2.5-14b&amp;machine=rtx3060&amp;quant=Q5_K_M&amp;ctx=16384"' in calc_html
    # what the users figure does not know stays out: an own model, several GPUs, a quant it has no preset for
    assert links.users_query({"model": "custom", "machine": "rtx3090", "gpus": "rtx3090,rtx3060"}) == ""
    assert links.users_query({"model": "llama-3.1-8b", "quant": "IQ9_Z", "ctx": 100}) == "?model=llama-3.1-8b"
    # the serving plan carries its model, GPU and --max-model-len
    sp_html = serving_plan.render(serving_plan.compute(serving_plan.SPEC.from_query("?model=qwen2.5-14b&ctx=4096")[0]))
    assert 'href="users.html?model=qwen2.5-14b&amp;machine=rtx4090&amp;ctx=4096"' in sp_html
    # the engines figure: each engine's concurrency cap links here
    rows = [r for rows in engines.CONFIG.values() for r in rows if any(f == "users" for f, _q in r[3])]
    assert {r[0].split(",")[0].split(" /")[0] for r in rows} == {"-np", "--max-num-seqs", "--max-running-requests"}
    for r in rows:
        for f, q in r[3]:
            if f == "users":
                assert not fig.SPEC.from_query(q)[1]


def test_the_serving_runs_datacenter_gpus_are_offered():
    # a team sizing a server picks the A100 or H100 of the published runs, simulated on the very machines the
    # held-out validation uses (enginelab.serving.validate)
    from enginelab.serving import validate

    options = dict(fig.SPEC.by_key["machine"].options_for({}))
    assert options["h100"] == "H100 SXM5 80GB" and options["a100"] == "A100 SXM4 80GB"
    s, msgs = fig.SPEC.from_query("?model=qwen3-8b&machine=h100")
    assert not msgs
    d = fig.compute(s)
    assert d.machine == validate._machine("H100 SXM5 80GB")
    assert all(ln.error is None for ln in d.lines)
    # against the RTX 4090 (a quarter of the memory, a third of the bandwidth) vLLM and SGLang serve more users
    # at more tokens per second: the BF16 weights leave the H100 a larger pool and each step reads them faster
    d4 = fig.compute(fig.SPEC.from_query("?model=qwen3-8b&machine=rtx4090")[0])
    for key in ("vllm", "sglang"):
        assert d.readouts[f"tok_s_{key}"] > 1.5 * d4.readouts[f"tok_s_{key}"]
        assert d.readouts[f"users_{key}"] >= d4.readouts[f"users_{key}"]
    # SGLang's running cap comes from its start-up plan on that machine (not a catalog key)
    sg = next(ln for ln in d.lines if ln.engine == "sglang")
    assert sg.cap == load.running_cap("sglang", fig.placement(s, "sglang"))
