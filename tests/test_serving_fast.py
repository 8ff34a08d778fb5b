"""Tests for the serving simulation's fast path (enginelab.serving.sim): skipping admissions that are known to
fail and coasting through pure-decode steps give the same Result as running every step in full (fast=False)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "pylib"))

import kv_managers as kvm  # noqa: E402
import perf_model as pm  # noqa: E402
from enginelab.serving import sim  # noqa: E402


@pytest.fixture(scope="module")
def p8b():
    return pm.place("llama-3.1-8b", "rtx4090", "Q4_K_M", n_ctx=8192)


WORKLOADS = {
    # a closed loop, the pools below too small for all 8 users at once
    "closed": sim.Workload(num_prompts=24, max_concurrency=8, input_len=800, output_len=300, range_ratio=0.5),
    # Poisson arrivals: requests arrive while others decode
    "poisson": sim.Workload(num_prompts=40, request_rate=20.0, dataset="sharegpt", seed=1),
    # a shared 512-token prefix: prefix caching, the radix tree's lpm order
    "prefix": sim.Workload(num_prompts=16, max_concurrency=16, input_len=1000, output_len=200, prefix_len=512, seed=2),
    # most of each prompt shared: a request that does not fit beside the prompts admitted in its step fits once
    # they are in the radix tree (the next step)
    "long_prefix": sim.Workload(num_prompts=12, max_concurrency=12, input_len=300, output_len=100, prefix_len=1024),
}
SETUPS = [
    ("llama.cpp", {"n_parallel": 4}),  # 4 slots of 2,048 cells
    ("llama.cpp", {"n_parallel": 8, "kv_unified": True}),  # 8 slots share 8,192 cells: admissions wait for room
    ("llama.cpp", {"n_parallel": 8, "kv_unified": True, "n_ubatch": 4}),  # decodes split into micro-batches
    ("vllm", {}),
    ("vllm", {"num_gpu_blocks_override": 120}),  # preemption
    ("vllm", {"enable_chunked_prefill": False, "num_gpu_blocks_override": 300}),
    ("vllm", {"max_num_batched_tokens": 256, "num_gpu_blocks_override": 200}),  # chunked prefill beside decodes
    ("vllm", {"enable_prefix_caching": False, "num_gpu_blocks_override": 150}),
    ("sglang", {}),
    ("sglang", {"mem_fraction_static": 0.25}),  # a pool of ~4,500 tokens: admissions wait for room
    ("sglang", {"schedule_policy": "lpm", "chunked_prefill_size": 256, "mem_fraction_static": 0.25}),
    ("sglang", {"mem_fraction_static": 0.245, "chunked_prefill_size": 8192}),  # ~3,500 tokens, prompts in one step
]


def _outcome(res) -> tuple:
    return (res.metrics, res.requests, res.kv_use, res.preemptions, res.prefix_hit_tokens, res.steps, res.pool_tokens)


@pytest.mark.parametrize("workload", list(WORKLOADS))
@pytest.mark.parametrize(("engine", "flags"), SETUPS, ids=[f"{e}-{'-'.join(f) or 'default'}" for e, f in SETUPS])
def test_the_fast_path_gives_the_step_by_step_result(p8b, engine, flags, workload):
    w = WORKLOADS[workload]
    slow = sim.simulate(engine, p8b, w, profile="course", fast=False, record_tokens=True, **flags)
    fast = sim.simulate(engine, p8b, w, profile="course", record_tokens=True, **flags)
    assert _outcome(fast) == _outcome(slow)  # every float to the bit, every token's time included


def test_the_setups_reach_what_the_fast_path_must_get_right(p8b):
    # the comparison above covers KV-bound admissions, preemption, prefix hits and chunked prefill
    w = WORKLOADS["closed"]
    tight = sim.simulate("vllm", p8b, w, profile="course", num_gpu_blocks_override=120)
    assert tight.preemptions > 0
    radix = sim.simulate("sglang", p8b, w, profile="course", mem_fraction_static=0.25)
    assert max(used for _t, used in radix.kv_use) > 0.8 * radix.pool_tokens
    assert radix.pool_tokens < 8 * (800 + 300)  # fewer than the 8 users' requests at their longest
    shared = sim.simulate("vllm", p8b, WORKLOADS["prefix"], profile="course", num_gpu_blocks_override=120)
    assert shared.prefix_hit_tokens >= 15 * 512


class _Count:
    """Counts calls to a method for the duration of a test (monkeypatch undoes it)."""

    def __init__(self, monkeypatch, cls, name):
        self.n = 0
        orig = getattr(cls, name)

        def counted(*a, **k):
            self.n += 1
            return orig(*a, **k)

        monkeypatch.setattr(cls, name, counted)


@pytest.mark.parametrize(
    ("engine", "manager", "flags"),
    [
        ("llama.cpp", kvm.SlotManager, {"n_parallel": 8, "kv_unified": True}),
        ("vllm", kvm.PagedManager, {"num_gpu_blocks_override": 120}),
        ("sglang", kvm.RadixManager, {"mem_fraction_static": 0.25}),
    ],
)
def test_the_fast_path_skips_repeated_admissions_and_times_runs_of_decodes_once(
    p8b, monkeypatch, engine, manager, flags
):
    # 8 users, 300-token replies: most steps are decodes only while a request waits for room
    w = WORKLOADS["closed"]
    admits = _Count(monkeypatch, manager, "admit")
    timed = _Count(monkeypatch, sim.StepTimer, "seconds")
    slow = sim.simulate(engine, p8b, w, profile="course", fast=False, **flags)
    slow_admits, slow_timed = admits.n, timed.n
    admits.n = timed.n = 0
    fast = sim.simulate(engine, p8b, w, profile="course", **flags)
    assert fast.steps == slow.steps
    assert slow_timed >= slow.steps  # step by step: at least one step time looked up per step
    assert timed.n < slow_timed / 4
    assert admits.n < slow_admits / 2
    assert admits.n >= len(w.requests())  # each request is still admitted once at least


def test_decode_run_keeps_the_step_time_for_the_steps_it_says(p8b):
    # a run of decode steps: n sequences, each context one longer per step; the timer rounds the mean context
    # into bins, and decode_run says how many steps stay in the bin the first one is in
    timer = sim.StepTimer(p8b, "vllm", pm._check_profile("course", p8b))
    for n in (1, 3, 16, 64):
        for mean in (1, 63, 64, 65, 100, 127, 128, 129, 1000, 4095, 4096, 70_000):
            ctx_sum = n * mean + n // 2
            dt, same = timer.decode_run(n, ctx_sum)
            assert same >= 1
            assert dt == timer.seconds(n, ctx_sum, 0, 0, False)
            for i in range(same):
                assert timer.seconds(n, ctx_sum + i * n, 0, 0, False) == dt
            c = ctx_sum // n
            if c > 64:  # (up to 64 a run is one step) the next step is in another bin, or past a power of two
                nxt = c + same
                assert sim._round(nxt, 4) != sim._round(c, 4) or nxt & (nxt - 1) == 0


def test_inter_token_latencies_are_kept_per_value_not_per_step(p8b, monkeypatch):
    # a long decode-only run (one request, 4,000 tokens): its ITLs are a few step times, whatever the step count
    seen = {}
    orig = sim._wstats

    def keep(name, pairs, out):
        seen[name] = list(pairs)
        return orig(name, pairs, out)

    monkeypatch.setattr(sim, "_wstats", keep)
    for fast in (True, False):
        res = sim.simulate("vllm", p8b, [(0.0, 64, 4000)], profile="course", fast=fast)
        pairs = seen["itl"]
        assert sum(k for _v, k in pairs) == 3999
        assert len(pairs) == len({v for v, _k in pairs}) < 100
        assert len(res.kv_use) <= 2 * sim.KV_SAMPLES
