"""Tests for enginelab.serving.sim: the scheduler's timing derived by hand from the batched step, flags, workloads
and metrics."""

import math
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "pylib"))

import perf_model as pm  # noqa: E402
from enginelab.serving import sim  # noqa: E402
from perf_model import batched as step  # noqa: E402


@pytest.fixture(scope="module")
def p8b():
    return pm.place("llama-3.1-8b", "rtx4090", "Q4_K_M", n_ctx=8192)


def t_step(p, engine, contexts=(), chunks=()):
    return step.batched_step(p, list(contexts), list(chunks), profile="course", engine=engine)["total_s"]


@pytest.mark.parametrize("engine", ["llama.cpp", "vllm", "sglang"])
def test_a_single_request_is_its_prefill_then_its_decodes(p8b, engine):
    # 32 prompt tokens, 8 output tokens: the prefill pass makes token 1 (TTFT); token g + 1 is a decode pass over
    # the prompt and the g tokens so far (KV of 32 + g tokens)
    res = sim.simulate(engine, p8b, [(0.0, 32, 8)], profile="course", record_tokens=True)
    ttft = t_step(p8b, engine, chunks=[(0, 32, True)])
    decodes = [t_step(p8b, engine, contexts=[32 + g]) for g in range(1, 8)]
    rec = res.requests[0]
    lag = sim.CLIENT_TTFT_S.get(engine, 0.0)  # the client's HTTP path (vLLM: 10.8 ms, vllm#54628)
    assert lag == (pytest.approx(0.0108) if engine == "vllm" else 0.0)
    assert rec["ttft_s"] == pytest.approx(ttft + lag, rel=1e-12)
    assert rec["e2el_s"] == pytest.approx(ttft + sum(decodes) + lag, rel=1e-12)
    m = res.metrics
    assert m["mean_ttft_ms"] == pytest.approx((ttft + lag) * 1e3)
    assert m["mean_tpot_ms"] == pytest.approx(sum(decodes) / 7 * 1e3)  # every token later by the same lag
    assert m["output_throughput"] == pytest.approx(8 / (ttft + sum(decodes) + lag))  # until the client has read it
    assert m["completed"] == 1 and res.preemptions == 0


def test_a_client_concurrency_cap_queues_requests(p8b):
    # vllm bench serve --max-concurrency 1: three requests sent at once run one after the other; each one's
    # clock starts when the client sends it, so all three see the single request's TTFT and E2EL
    one = sim.simulate("vllm", p8b, [(0.0, 32, 8)], profile="course").requests[0]
    w = sim.Workload(num_prompts=3, input_len=32, output_len=8, max_concurrency=1)
    res = sim.simulate("vllm", p8b, w, profile="course")
    for r in res.requests:
        assert r["ttft_s"] == pytest.approx(one["ttft_s"], rel=1e-9)
        assert r["e2el_s"] == pytest.approx(one["e2el_s"], rel=1e-9)
    assert res.metrics["duration_s"] == pytest.approx(3 * one["e2el_s"], rel=1e-9)


def test_llama_server_slots_queue_requests_at_the_server(p8b):
    # -np 1: the second request waits for the slot; it is prefilled in the step after the first finishes
    res = sim.simulate("llama.cpp", p8b, [(0.0, 32, 8), (0.0, 32, 8)], profile="course", n_parallel=1)
    a, b = res.requests
    ttft = t_step(p8b, "llama.cpp", chunks=[(0, 32, True)])
    assert b["ttft_s"] == pytest.approx(a["e2el_s"] + ttft, rel=1e-9)
    # -np 2: both prefill in one pass (64 prompt tokens), then decode together
    res2 = sim.simulate("llama.cpp", p8b, [(0.0, 32, 8), (0.0, 32, 8)], profile="course", n_parallel=2)
    assert res2.requests[1]["ttft_s"] == pytest.approx(res2.requests[0]["ttft_s"])
    assert res2.requests[0]["ttft_s"] > ttft


def test_chunked_prefill_stalls_a_decode_by_the_step_it_shares(p8b):
    # A (16-token prompt) decodes alone; B's 3072-token prompt arrives, and a budget of 2049 tokens per step puts
    # A's decode beside a 2048-token chunk of it: A waits for that whole step, then for the rest (1024 tokens).
    # (Shapes on the step timer's grid, so its memo is exact here.)
    first = sim.simulate("vllm", p8b, [(0.0, 16, 40)], profile="course", record_tokens=True).requests[0]
    t1 = first["token_times_s"]
    trace = [(0.0, 16, 40), (t1[9] + 1e-9, 3072, 4)]  # B is sent just after A's 10th token
    res = sim.simulate("vllm", p8b, trace, profile="course", record_tokens=True, max_num_batched_tokens=2049)
    times = res.requests[0]["token_times_s"]
    gaps = [b - a for a, b in zip(times, times[1:])]
    stall = t_step(p8b, "vllm", contexts=[16 + 11], chunks=[(0, 2048, False)])
    rest = t_step(p8b, "vllm", contexts=[16 + 12], chunks=[(2048, 1024, True)])
    assert gaps[:9] == pytest.approx([b - a for a, b in zip(t1[:9], t1[1:10])], rel=1e-12)
    assert gaps[10] == pytest.approx(stall, rel=1e-12)
    assert gaps[11] == pytest.approx(rest, rel=1e-12)
    assert stall > 5 * gaps[9]
    # token_times_s are the server's; the client reads each CLIENT_TTFT_S later
    assert res.requests[1]["ttft_s"] == pytest.approx(times[12] - trace[1][0] + sim.CLIENT_TTFT_S["vllm"], rel=1e-9)
    # without chunked prefill, B's whole prompt runs in one step (max_num_batched_tokens grows to max_model_len)
    whole = sim.simulate("vllm", p8b, trace, profile="course", record_tokens=True, enable_chunked_prefill=False)
    t2 = whole.requests[0]["token_times_s"]
    assert t2[11] - t2[10] == pytest.approx(t_step(p8b, "vllm", [16 + 11], [(0, 3072, True)]), rel=1e-12)


def test_preemption_happens_exactly_when_blocks_run_out(p8b):
    # 4 blocks of 16 tokens. A and B (16-token prompts) take one block each; their 1st tokens (position 16)
    # take a block each: none left. A's 17th token (position 32) needs a 5th block: B, the newest, is preempted
    # and recomputed; nothing is admitted in the step after the preemption.
    trace = [(0.0, 16, 40), (0.0, 16, 40)]
    res = sim.simulate("vllm", p8b, trace, profile="course", record_tokens=True, num_gpu_blocks_override=4)
    a, b = res.requests
    assert res.preemptions == 1
    assert (a["preempted"], b["preempted"]) == (0, 1)
    assert len(a["token_times_s"]) == 40 and len(b["token_times_s"]) == 40
    # B made 16 tokens before it was preempted at A's 17th
    assert b["token_times_s"][15] <= a["token_times_s"][16] < b["token_times_s"][16]
    # each request ends holding 56 tokens (positions 0..55): 4 blocks. 8 blocks hold both; with 7, B's 33rd token
    # (position 48) finds none free and B, the newest, preempts itself; each recompute of B (3 blocks) runs into
    # the same wall until A has finished
    roomy = sim.simulate("vllm", p8b, trace, profile="course", num_gpu_blocks_override=8)
    assert roomy.preemptions == 0
    tight = sim.simulate("vllm", p8b, trace, profile="course", record_tokens=True, num_gpu_blocks_override=7)
    assert tight.preemptions >= 1 and tight.requests[0]["preempted"] == 0
    assert tight.requests[1]["preempted"] == tight.preemptions
    ta, tb = tight.requests[0]["token_times_s"], tight.requests[1]["token_times_s"]
    assert tb[31] < ta[32] and tb[32] > ta[-1]  # B's 33rd token only after A has finished
    assert res.metrics["mean_e2el_ms"] > roomy.metrics["mean_e2el_ms"]


def test_prefix_caching_reuses_a_shared_prefix(p8b):
    w = sim.Workload(num_prompts=8, input_len=64, output_len=4, prefix_len=512, request_rate=2.0)
    on = sim.simulate("vllm", p8b, w, profile="course")
    off = sim.simulate("vllm", p8b, w, profile="course", enable_prefix_caching=False)
    assert off.prefix_hit_tokens == 0
    assert on.prefix_hit_tokens == 7 * 512  # every request after the first hits the 32 full blocks of the prefix
    assert on.metrics["mean_ttft_ms"] < off.metrics["mean_ttft_ms"]
    radix = sim.simulate("sglang", p8b, w, profile="course")
    assert radix.prefix_hit_tokens == 7 * 512


def test_workload_follows_vllm_bench_serve():
    w = sim.Workload(num_prompts=2000, request_rate=4.0, input_len=100, output_len=50, range_ratio=0.5, seed=3)
    reqs = w.requests()
    gaps = [b[0] - a[0] for a, b in zip(reqs, reqs[1:])]
    assert sum(gaps) / len(gaps) == pytest.approx(0.25, rel=0.08)  # Poisson: mean gap 1 / rate
    assert all(50 <= p <= 150 and 25 <= o <= 75 for _t, p, o in reqs)
    assert [r[0] for r in sim.Workload(num_prompts=5).requests()] == [0.0] * 5  # rate inf: all at once
    g = sim.Workload(num_prompts=3000, dataset="sharegpt", seed=1).requests()
    assert all(4 <= p <= 1024 and o >= 4 and p + o <= 2048 for _t, p, o in g)
    mean_in = sum(p for _t, p, _o in g) / len(g)
    assert 100 < mean_in < sim.SHAREGPT_MEAN_INPUT * 1.1  # the paper's mean, less the long prompts dropped
    assert w.requests() == reqs  # seeded


def test_metrics_carry_vllm_result_names(p8b):
    res = sim.simulate("sglang", p8b, sim.Workload(num_prompts=20, input_len=128, output_len=16, request_rate=5))
    for stat in ("mean", "median", "p99"):
        for name in ("ttft", "tpot", "itl", "e2el"):
            assert math.isfinite(res.metrics[f"{stat}_{name}_ms"])
    for key in ("request_throughput", "output_throughput", "total_token_throughput", "completed", "duration_s"):
        assert res.metrics[key] > 0
    assert res.metrics["total_output_tokens"] == 20 * 16
    assert 0 < len(res.kv_use) <= 2 * sim.KV_SAMPLES
    assert all(0 <= cells <= res.pool_tokens for _t, cells in res.kv_use)


def test_flags_and_arguments_are_checked(p8b):
    w = sim.Workload(num_prompts=2)
    with pytest.raises(ValueError, match="^max_num_seqs: is not a llama.cpp flag"):
        sim.simulate("llama.cpp", p8b, w, max_num_seqs=4)
    for engine, flag, value in (
        ("llama.cpp", "n_parallel", 0),
        ("llama.cpp", "kv_unified", "yes"),
        ("vllm", "gpu_memory_utilization", 1.5),
        ("vllm", "enable_chunked_prefill", 1),
        ("sglang", "schedule_policy", "random"),
        ("sglang", "chunked_prefill_size", -1),
    ):
        with pytest.raises(ValueError, match=f"^{flag}"):
            sim.simulate(engine, p8b, w, **{flag: value})
    with pytest.raises(ValueError, match="^engine"):
        sim.simulate("tgi", p8b, w)
    with pytest.raises(ValueError, match="^workload"):
        sim.simulate("vllm", p8b, "100 prompts")
    for kwargs, name in (
        ({"num_prompts": 0}, "num_prompts"),
        ({"request_rate": -1}, "request_rate"),
        ({"dataset": "alpaca"}, "dataset"),
        ({"input_len": 0}, "input_len"),
        ({"max_concurrency": 0}, "max_concurrency"),
    ):
        with pytest.raises(ValueError, match=f"^{name}"):
            sim.Workload(**kwargs)


def test_a_request_larger_than_a_slot_fails(p8b):
    # -np 4 without --kv-unified: each slot has n_ctx / 4 = 2048 cells
    res = sim.simulate("llama.cpp", p8b, [(0.0, 3000, 8), (0.0, 100, 8)], profile="course", n_parallel=4)
    assert res.metrics["failed"] == 1 and res.metrics["completed"] == 1
    unified = sim.simulate("llama.cpp", p8b, [(0.0, 3000, 8)], profile="course", n_parallel=4, kv_unified=True)
    assert unified.metrics["completed"] == 1


def test_serving_runs_carry_their_setup_and_source():
    from enginelab.serving import validate

    rows = validate.runs()
    assert len(rows) >= 5
    for r in rows:
        assert r["source"].startswith("https://")
        # every run's GPU and model resolve: a catalog model and a catalog or calibration device with its memory
        assert validate._machine(r["gpu"]).gpu is not None, r["gpu"]
        assert validate.run_model(r["model"]).name, r["model"]
        for col in (
            "engine",
            "gpu",
            "model",
            "dtype",
            "dataset",
            "input_len",
            "output_len",
            "num_prompts",
            "ignore_eos",
        ):
            assert r[col], col


def test_the_serving_runs_models_outside_the_catalog_have_their_published_sizes():
    # validate.CONFIGS: Qwen3-14B and Qwen3-32B, 14.8 B and 32.8 B parameters on their model cards
    from enginelab.serving import validate

    assert validate.run_model("qwen3-14b").total_params() / 1e9 == pytest.approx(14.8, abs=0.05)
    assert validate.run_model("qwen3-32b").total_params() / 1e9 == pytest.approx(32.8, abs=0.05)
    assert validate.run_model("qwen3-8b") is pm.MODELS["qwen3-8b"]


def test_sglang_admits_on_a_discounted_reservation_and_retracts_when_cells_run_out(p8b, monkeypatch):
    # a 2,000-cell pool. a: 10 prompt + 1,200 reply tokens; b: 10 + 1,000, both at t=0. In the prefill batch that
    # takes a, b needs 1,010 cells and has 1,990 - 1,200 = 790: refused. At the next step a's remaining reply counts
    # at new_token_ratio 0.7: 1,990 - 1 decoded - 0.7 x 1,199 = 1,150 >= 1,010, so b is admitted while a decodes.
    # Both replies need 2,220 cells in all: when a decode step finds fewer free cells than running requests, b (the
    # fewest tokens decoded) is retracted, queued again and readmitted once a has finished.
    monkeypatch.setattr(sim, "pool_tokens", lambda engine, p, flags: 2000)
    trace = [(0.0, 10, 1200), (0.0, 10, 1000)]
    res = sim.simulate("sglang", p8b, trace, profile="course")
    a, b = res.requests
    assert res.preemptions == 1 and (a["preempted"], b["preempted"]) == (0, 1)
    t_b_first = b["arrival_s"] + b["ttft_s"]
    t_a_done = a["arrival_s"] + a["e2el_s"]
    assert t_b_first < t_a_done < b["arrival_s"] + b["e2el_s"]
    assert max(used for _t, used in res.kv_use) <= 2000
    slow = sim.simulate("sglang", p8b, trace, profile="course", fast=False)  # step by step: the same run
    assert slow.requests == res.requests and slow.steps == res.steps
    # with the exact reservation (ratio 1, as the manager figures run it) b waits for a: nothing is retracted
    monkeypatch.setattr(sim, "SGLANG_INIT_NEW_TOKEN_RATIO", 1.0)
    monkeypatch.setattr(sim, "SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR", 1.0)
    res = sim.simulate("sglang", p8b, trace, profile="course")
    a, b = res.requests
    assert res.preemptions == 0 and b["arrival_s"] + b["ttft_s"] > a["arrival_s"] + a["e2el_s"]


def test_sharegpt_draws_scale_to_a_runs_mean_lengths(monkeypatch):
    plain = sim.Workload(num_prompts=400, request_rate=5.0, dataset="sharegpt", seed=3).requests()
    scaled = sim.Workload(
        num_prompts=400, request_rate=5.0, dataset="sharegpt", seed=3, sharegpt_means=(217.0, 202.0)
    ).requests()
    assert [t for t, _, _ in scaled] == [t for t, _, _ in plain]  # the same arrivals
    assert sum(p for _, p, _ in scaled) / 400 == pytest.approx(217, abs=0.5)  # each length rounded
    assert sum(o for _, _, o in scaled) / 400 == pytest.approx(202, abs=0.5)
    fi = 217 * 400 / sum(p for _, p, _ in plain)
    assert all(p2 == max(1, round(p1 * fi)) for (_, p1, _), (_, p2, _) in zip(plain, scaled))
    # validate passes a ShareGPT row's own means, and nothing for a random row
    from enginelab.serving import validate

    seen = []
    monkeypatch.setattr(validate.sim, "simulate", lambda e, p, w, profile=None, **f: seen.append(w) or sim.Result(
        {}, [], [], 0, 0, 0, 0))  # fmt: skip
    share = next(r for r in validate.runs() if r["dataset"] == "sharegpt")
    rand = next(r for r in validate.runs() if r["dataset"] == "random")
    validate.predict(share)
    validate.predict(rand)
    assert seen[0].sharegpt_means == (float(share["input_len"]), float(share["output_len"]))
    assert seen[1].sharegpt_means is None


BLOG_4090 = (
    "https://mushfiqrahman.dev/benchmarking-mistral-7b-on-rtx-4090-vllm-concurrency-latency-and-capacity-planning/"
)


def test_held_out_serving_error():
    # Nothing of the simulation is fitted to these runs. On the RTX 4090 blog's five runs output throughput meets
    # the 25% target (measured 9.1%); mean TTFT does not (measured 50.0% with the client's HTTP path: the
    # simulated TTFT stays near one step while the runs' median TTFT grows from 53 to 840 ms with concurrency; the
    # API server's own time is not modelled). This gate keeps both from getting worse than today. The table's other runs (A100 / H100, see
    # data/serving/README.md) are gated below.
    from enginelab.serving import validate

    blog = [r for r in validate.runs() if r["source"] == BLOG_4090]
    s = validate.summary(validate.errors("measured", blog))
    assert s["output_throughput"][0] == 5 and s["output_throughput"][1] <= 0.11
    assert s["mean_ttft_ms"][0] == 5 and s["mean_ttft_ms"][1] <= 0.52


@pytest.mark.parametrize(("gpu", "chunks"), [("A100 SXM4 80GB", [2048, 2048]), ("H100 SXM5 80GB", [4096])])
def test_vllm_prefills_in_the_gpus_default_budget(gpu, chunks):
    # vLLM v0.11's server default: 2048 tokens a step on an A100 80GB (the A100 exception), 8192 on an H100: a
    # 4,096-token prompt is two chunks on the A100 (the first one ends no prompt) and one on the H100
    from enginelab.serving import validate

    p = pm.place(pm.MODELS["qwen3-8b"], validate._machine(gpu), "BF16", n_ctx=8192)
    res = sim.simulate("vllm", p, [(0.0, 4096, 2)], profile="course")
    starts = [sum(chunks[:i]) for i in range(len(chunks))]
    ttft = sum(t_step(p, "vllm", chunks=[(s, u, i == len(chunks) - 1)]) for i, (s, u) in enumerate(zip(starts, chunks)))
    assert res.requests[0]["ttft_s"] == pytest.approx(ttft + sim.CLIENT_TTFT_S["vllm"], rel=1e-12)


def test_a_runs_engine_flags_reach_the_simulation(monkeypatch):
    # the CSV's engine_flags column, in the engine's own names: a context flag sets the placement's n_ctx, the
    # simulation's flags are passed on, untimed ones are dropped, and anything else is refused
    from enginelab.serving import validate

    run = dict(validate.runs()[5])
    assert run["gpu"] == "A100 SXM4 80GB" and run["engine"] == "vllm"
    run["engine_flags"] = "max_model_len=16384; max_num_seqs=64;tokenizer_mode=auto; enable_prefix_caching=false"
    seen = {}

    def spy(engine, placement, workload, profile=None, **flags):
        seen.update(engine=engine, n_ctx=placement.n_ctx, flags=flags)
        return sim.Result({}, [], [], 0, 0, 0, 0)

    monkeypatch.setattr(validate.sim, "simulate", spy)
    validate.predict(run)
    # vLLM v0.11.0's own default gpu_memory_utilization (0.9; sim takes main's 0.92) comes with the run's version
    want = {"max_num_seqs": 64, "enable_prefix_caching": False, "gpu_memory_utilization": 0.9}
    assert run["engine_version"] == "0.11.0" and sim.FLAGS["vllm"]["gpu_memory_utilization"] == 0.92
    assert seen == {"engine": "vllm", "n_ctx": 16384, "flags": want}
    run["engine_flags"], run["engine_version"] = "gpu_memory_utilization=0.8", "0.11.0"
    validate.predict(run)
    assert seen["flags"] == {"gpu_memory_utilization": 0.8}  # a flag given wins over the version's default
    run["engine_flags"], run["engine_version"] = "", ""
    validate.predict(run)
    assert seen["flags"] == {} and seen["n_ctx"] == validate.run_model(run["model"]).max_position_embeddings
    for bad, msg in (("n_parallel=4", "not a vllm flag"), ("max_num_seqs", "not name=value")):
        run["engine_flags"] = bad
        with pytest.raises(ValueError, match=f"^engine_flags: .*{msg}"):
            validate.predict(run)
    # every published run's flags parse; the A100 Qwen3-32B ShareGPT server ran with --max-model-len 32768
    parsed = [validate.engine_flags(r) for r in validate.runs()]
    assert ({"gpu_memory_utilization": 0.9}, 32768) in parsed


def test_held_out_error_on_the_a100_and_h100_runs():
    # gpustack's 40 runs (vLLM v0.11.0 and SGLang v0.5.x on one A100 / H100, data/serving/README.md), nothing fitted
    # to them: with vLLM's batch defaults by GPU, v0.11's gpu_memory_utilization, each run's engine flags, the GPU
    # samplers' token-id copy, vLLM's host time per request, SGLang's new_token_ratio admission with retraction,
    # the GEMM engines' wave utilization over llama-bench's pp512 and the ShareGPT rows at their own mean lengths,
    # the client's HTTP path on vLLM's TTFT (vllm#54628, 10.8 ms) and the GEMM engines' weight-only quantized
    # matmuls at the 16-bit rate (gpt-oss's MXFP4 experts on Marlin / triton_kernels), median |error| is 22.9% for
    # mean TTFT, 20.5% for mean TPOT and 12.9% for output throughput (before these seven: 48.8%, 32.9%, 23.5%). All
    # 45 runs together meet the 25% on all three: 23.5%, 20.5%, 12.0%. The gates keep them there.
    from enginelab.serving import validate

    rows = [r for r in validate.runs() if "gpustack" in r["source"]]
    s = validate.summary(validate.errors("measured", rows))
    assert s["output_throughput"][0] == 40 and s["output_throughput"][1] <= 0.15
    assert s["mean_tpot_ms"][0] == 40 and s["mean_tpot_ms"][1] <= 0.22
    assert s["mean_ttft_ms"][0] == 40 and s["mean_ttft_ms"][1] <= 0.24
    every = validate.summary(validate.errors("measured"))
    assert all(n >= 40 and err <= 0.25 for n, err in every.values())


def test_runs_that_stop_at_eos_spread_their_replies():
    # every run of the table stopped replies at EOS (ignore_eos 0): all are simulated with spread reply lengths,
    # so requests do not finish, and the client's next ones do not start, in lockstep
    from enginelab.serving import validate

    rows = validate.runs()
    assert {r["ignore_eos"] for r in rows} == {"0"}
    got = validate.predict(rows[1])  # max concurrency 8: lockstep would put every TTFT at the first wave's 8 prompts
    assert got["median_ttft_ms"] < 0.5 * got["p99_ttft_ms"]


def test_simulate_restores_the_cyclic_collector(p8b):
    # simulate() turns the cyclic GC off while it runs; afterwards it is as the caller left it
    import gc

    assert gc.isenabled()
    sim.simulate("vllm", p8b, [(0.0, 8, 4)])
    assert gc.isenabled()
    gc.disable()
    try:
        sim.simulate("vllm", p8b, [(0.0, 8, 4)])
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_hostile_arguments_raise_value_errors_naming_them(p8b):
    for kwargs, name in (
        ({"request_rate": float("nan")}, "request_rate"),
        ({"request_rate": True}, "request_rate"),
        ({"num_prompts": 10**9}, "num_prompts"),
        ({"input_len": 1.5}, "input_len"),
        ({"range_ratio": 1.0}, "range_ratio"),
        ({"burstiness": 0}, "burstiness"),
        ({"seed": "x"}, "seed"),
        ({"output_range_ratio": -0.1}, "output_range_ratio"),
    ):
        with pytest.raises(ValueError, match=f"^{name}"):
            sim.Workload(**kwargs)
    with pytest.raises(ValueError, match="^num_prompts"):  # more tokens than one simulation holds
        sim.Workload(num_prompts=100_000, input_len=1 << 20, output_len=8).requests()
    for trace, name in (
        ([(0.0, 0, 8)], "workload\\[0\\].prompt_len"),
        ([(0.0, 8)], "workload\\[0\\]"),
        ([], "workload"),
    ):
        with pytest.raises(ValueError, match=f"^{name}"):
            sim.simulate("vllm", p8b, trace)
    with pytest.raises(ValueError, match="^record_tokens"):
        sim.simulate("vllm", p8b, [(0.0, 8, 1 << 20), (0.0, 8, 1 << 20)], record_tokens=True)
    with pytest.raises(ValueError, match="^max_steps"):
        sim.simulate("vllm", p8b, [(0.0, 8, 100)], max_steps=10)
