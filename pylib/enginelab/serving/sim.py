"""A time-based serving simulation: llama-server, vLLM and SGLang under a `vllm bench serve`-shaped load.

The pool of KV cells is one of kv_managers' three managers (SlotManager for llama-server, PagedManager for vLLM,
RadixManager for SGLang), so admission, prefix reuse and preemption follow their rules; each scheduler step is a
forward pass timed by perf_model.batched_step. The clock advances by the step's time, so the metrics are vLLM's
(`vllm bench serve`'s result names, milliseconds).

Each engine's step (its scheduler, simplified to what decides the timing):
  llama.cpp  n_parallel slots (llama-server, tools/server/server.cpp update_slots): every generating slot adds
             one token to the batch, then slots still processing their prompt add prompt tokens until the batch
             holds n_batch tokens; the batch runs in micro-batches of n_ubatch tokens (llama_decode).
  vllm       v1 scheduler (vllm/v1/core/sched/scheduler.py): a budget of max_num_batched_tokens per step; running
             requests first (a decode is 1 token, a partly prefilled prompt takes what is left of the budget),
             then waiting requests FCFS while fewer than max_num_seqs run; without chunked prefill a prompt that
             does not fit the budget waits. A decode that needs a new block when none is free preempts the most
             recently admitted request (recompute: its prompt and the tokens it generated are prefilled again).
  sglang     scheduler.py get_next_batch_to_run: a prefill batch (new requests, at most chunked_prefill_size
             prompt tokens, the policy's order) runs on its own when one can be formed, otherwise one decode
             step of every running request; at most max_running_requests run. Admission reserves only
             new_token_ratio of the running requests' remaining replies (SGLANG_* below); a decode step that
             finds no room retracts requests (their decoded tokens are computed again when readmitted).

Simplified: a request's prompt cells are taken when it is admitted (vLLM allocates each chunk's blocks as the
chunk is scheduled); a step's time is that of a batch of the same size at the batch's mean context (the pass is
affine in the KV read); the engine loop's host time per request is batched_step's (waited for in vLLM, hidden
in SGLang); a vLLM client sees TTFT and end-to-end latency CLIENT_TTFT_S later (the HTTP path); the
client's next request under --max-concurrency goes out that much after the server finished a reply; the API
server's own time inside the server's TTFT (chat template, tokenising) is left out.
"""

from __future__ import annotations

import gc
import math
import random
from collections import deque
from dataclasses import dataclass

import kv_managers as kvm
import perf_model as pm
from enginelab import serving_plan as sp
from enginelab.checks import brief, check_bool, check_int, check_number, is_int
from enginelab.checks import check as _check

DATASETS = ("random", "sharegpt")
ENGINES = ("llama.cpp", "vllm", "sglang")
MAX_PROMPTS = 100_000
MAX_LEN = 1 << 20
MAX_WORKLOAD_TOKENS = 1 << 25  # prompt + output tokens over a workload
KV_SAMPLES = 256  # KV-use samples kept over a run (every k-th step)
# SGLang's admission reserves new_token_ratio x the running requests' remaining replies (schedule_policy.py
# PrefillAdder), a ratio its scheduler moves (scheduler.py, global_config.py): 0.7 at start and whenever it idles,
# down by (0.7 - 0.7 x 0.14) / 600 on each decode step; a decode step with no cell for every running request
# retracts requests (schedule_batch.py retract_decode: fewest reply tokens first, then the longest prompt, until
# 20 decode steps of the rest fit) and sets the ratio to (their decoded tokens + 20 each) / their max_new_tokens
SGLANG_INIT_NEW_TOKEN_RATIO = 0.7
# What a `vllm bench serve` client measures beyond vLLM's own TTFT: the HTTP request and the streamed first chunk
# between the client and vLLM's OpenAI-compatible server. vllm#54628 scraped vLLM's vllm:time_to_first_token_seconds
# around bench runs (Qwen2.5-0.5B, 512 in / 128 out, 8 users, one RTX 4070 Laptop): the client's TTFT came out 8.4-12.2
# ms above it over five runs of the openai, openai-chat and responses backends, 10.8 ms on average. No such
# measurement was found for SGLang's or llama-server's HTTP servers: they keep the server's view.
CLIENT_TTFT_S = {"vllm": 0.0108}
SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR = 0.14
SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS = 600
SGLANG_RETRACT_DECODE_STEPS = 20

# ShareGPT lengths (vLLM paper, Kwon et al., SOSP 2023, section 6.1 / Figure 11a: ShareGPT prompts average
# 161.31 tokens and outputs 337.99). vLLM's benchmark keeps conversations with prompt <= 1024 and prompt + output
# <= 2048 tokens, and at least 4 of each (benchmarks/datasets.py is_valid_sequence). The spread is a lognormal of
# sigma SHAREGPT_SIGMA (an assumption: the paper plots the histograms but prints only the means); mu is set so the
# untruncated mean is the paper's.
SHAREGPT_MEAN_INPUT = 161.31
SHAREGPT_MEAN_OUTPUT = 337.99
SHAREGPT_SIGMA = 1.0
SHAREGPT_MAX_PROMPT, SHAREGPT_MAX_TOTAL, SHAREGPT_MIN = 1024, 2048, 4


@dataclass(frozen=True)
class Workload:
    """What `vllm bench serve` sends: --num-prompts, --request-rate (inf = all at once), --burstiness (gamma
    arrivals; 1 = Poisson), --max-concurrency (the client's cap on requests in flight), --dataset-name
    random | sharegpt, --random-input-len / --random-output-len / --random-range-ratio / --random-prefix-len
    (a prefix shared by every prompt), --seed."""

    num_prompts: int = 100
    request_rate: float = math.inf
    max_concurrency: int | None = None
    dataset: str = "random"
    input_len: int = 1024
    output_len: int = 128
    prefix_len: int = 0
    seed: int = 0
    range_ratio: float = 0.0
    burstiness: float = 1.0
    output_range_ratio: float | None = None  # ours: the output lengths' own spread (None = range_ratio)
    # ours, dataset "sharegpt" only: (input, output) mean lengths the draws are scaled to (a run's published totals
    # / requests: its model's tokenizer and replies); None keeps the published ShareGPT statistics' lengths
    sharegpt_means: tuple | None = None

    def __post_init__(self):
        check_int(self.num_prompts, "num_prompts", 1, MAX_PROMPTS)
        if not (isinstance(self.request_rate, (int, float)) and not isinstance(self.request_rate, bool)):
            _check(False, "request_rate", f"must be a number > 0 or inf, got {brief(self.request_rate)}")
        if not (self.request_rate == math.inf or 0 < self.request_rate <= 1e6):
            _check(False, "request_rate", f"must be > 0 and at most 1e6, or inf, got {brief(self.request_rate)}")
        if self.max_concurrency is not None:
            check_int(self.max_concurrency, "max_concurrency", 1, MAX_PROMPTS)
        if self.dataset not in DATASETS:
            _check(False, "dataset", f"must be one of {', '.join(DATASETS)}, got {brief(self.dataset)}")
        check_int(self.input_len, "input_len", 1, MAX_LEN)
        check_int(self.output_len, "output_len", 1, MAX_LEN)
        check_int(self.prefix_len, "prefix_len", 0, MAX_LEN)
        if not is_int(self.seed):
            _check(False, "seed", f"must be an integer, got {brief(self.seed)}")
        check_number(self.range_ratio, "range_ratio", 0.0, 1.0)
        if self.range_ratio >= 1.0:
            _check(False, "range_ratio", "must be below 1")
        check_number(self.burstiness, "burstiness", 0.0, 1e3, lo_open=True)
        if self.output_range_ratio is not None:
            check_number(self.output_range_ratio, "output_range_ratio", 0.0, 1.0)
            if self.output_range_ratio >= 1.0:
                _check(False, "output_range_ratio", "must be below 1")
        if self.sharegpt_means is not None:
            if not (isinstance(self.sharegpt_means, tuple) and len(self.sharegpt_means) == 2):
                _check(
                    False, "sharegpt_means", f"must be (input, output) mean lengths, got {brief(self.sharegpt_means)}"
                )
            for k, v in zip(("input", "output"), self.sharegpt_means):
                check_number(v, f"sharegpt_means {k}", 1.0, MAX_LEN)

    def requests(self) -> list:
        """[(arrival_s, prompt_len, output_len)], in arrival order (vllm/benchmarks: get_request's gamma intervals,
        RandomDataset's uniform lengths in [len * (1 - r), len * (1 + r)])."""
        rng = random.Random(self.seed)
        out = []
        t = 0.0
        total = 0
        for _ in range(self.num_prompts):
            if self.dataset == "random":
                r = self.range_ratio
                ro = r if self.output_range_ratio is None else self.output_range_ratio
                i = rng.randint(max(1, math.floor(self.input_len * (1 - r))), math.ceil(self.input_len * (1 + r)))
                o = rng.randint(max(1, math.floor(self.output_len * (1 - ro))), math.ceil(self.output_len * (1 + ro)))
            else:
                i, o = _sharegpt_lengths(rng)
            p = self.prefix_len + i
            total += p + o
            if total > MAX_WORKLOAD_TOKENS:
                _check(False, "num_prompts", f"the workload holds more than {MAX_WORKLOAD_TOKENS:,} tokens")
            out.append((t, p, o))
            if self.request_rate != math.inf:
                theta = 1.0 / (self.request_rate * self.burstiness)
                t += rng.gammavariate(self.burstiness, theta)
        if self.dataset == "sharegpt" and self.sharegpt_means is not None:
            # each length times the ratio of the wanted mean to this draw's (the arrivals are not touched)
            n = len(out)
            fi = self.sharegpt_means[0] * n / sum(p - self.prefix_len for _t, p, _o in out)
            fo = self.sharegpt_means[1] * n / sum(o for _t, _p, o in out)
            out = [(t, self.prefix_len + max(1, round((p - self.prefix_len) * fi)), max(1, round(o * fo)))
                   for t, p, o in out]  # fmt: skip
            if sum(p + o for _t, p, o in out) > MAX_WORKLOAD_TOKENS:
                _check(False, "num_prompts", f"the workload holds more than {MAX_WORKLOAD_TOKENS:,} tokens")
        return out


def _sharegpt_lengths(rng: random.Random) -> tuple:
    s = SHAREGPT_SIGMA
    mu_i = math.log(SHAREGPT_MEAN_INPUT) - s * s / 2
    mu_o = math.log(SHAREGPT_MEAN_OUTPUT) - s * s / 2
    while True:
        i = int(round(rng.lognormvariate(mu_i, s)))
        o = int(round(rng.lognormvariate(mu_o, s)))
        if SHAREGPT_MIN <= i <= SHAREGPT_MAX_PROMPT and o >= SHAREGPT_MIN and i + o <= SHAREGPT_MAX_TOTAL:
            return i, o


# ---------------------------------------------------------------------------------------------------------
# Engine flags, in each engine's own names
# ---------------------------------------------------------------------------------------------------------
FLAGS = {
    "llama.cpp": {"n_parallel": None, "n_batch": 2048, "n_ubatch": 512, "kv_unified": None},
    "vllm": {
        "max_num_seqs": None,  # None: vLLM's default on the GPU (serving_plan.vllm_gpu_defaults)
        "max_num_batched_tokens": None,
        "enable_chunked_prefill": True,
        "enable_prefix_caching": True,
        "gpu_memory_utilization": sp.VLLM_GPU_MEMORY_UTILIZATION,
        "num_gpu_blocks_override": None,
    },
    "sglang": {
        "max_running_requests": None,
        "chunked_prefill_size": None,
        "schedule_policy": "fcfs",
        "mem_fraction_static": None,
    },
}


def _flags(engine: str, given: dict) -> dict:
    allowed = FLAGS[engine]
    for k in given:
        if k not in allowed:
            _check(False, k, f"is not a {engine} flag; {engine} takes {', '.join(allowed)}")
    f = dict(allowed, **given)
    if engine == "llama.cpp":
        if f["n_parallel"] is not None:
            check_int(f["n_parallel"], "n_parallel", 1, kvm.MAX_SLOTS)
        check_int(f["n_batch"], "n_batch", 1, pm.MAX_CONTEXT)
        check_int(f["n_ubatch"], "n_ubatch", 1, pm.MAX_CONTEXT)
        if f["kv_unified"] is not None:
            check_bool(f["kv_unified"], "kv_unified")
    elif engine == "vllm":
        if f["max_num_seqs"] is not None:
            check_int(f["max_num_seqs"], "max_num_seqs", 1, sp.MAX_SEQS)
        if f["max_num_batched_tokens"] is not None:
            check_int(f["max_num_batched_tokens"], "max_num_batched_tokens", 1, pm.MAX_CONTEXT)
        check_bool(f["enable_chunked_prefill"], "enable_chunked_prefill")
        check_bool(f["enable_prefix_caching"], "enable_prefix_caching")
        check_number(f["gpu_memory_utilization"], "gpu_memory_utilization", 0.0, 1.0, lo_open=True)
        if f["num_gpu_blocks_override"] is not None:
            check_int(f["num_gpu_blocks_override"], "num_gpu_blocks_override", 1, kvm.MAX_CAPACITY_TOKENS // 16)
    else:
        if f["max_running_requests"] is not None:
            check_int(f["max_running_requests"], "max_running_requests", 1, sp.MAX_SEQS)
        if f["chunked_prefill_size"] is not None:
            check_int(f["chunked_prefill_size"], "chunked_prefill_size", 1, pm.MAX_CONTEXT)
        if f["schedule_policy"] not in ("fcfs", "lpm"):
            _check(False, "schedule_policy", f"must be fcfs or lpm, got {brief(f['schedule_policy'])}")
        if f["mem_fraction_static"] is not None:
            check_number(f["mem_fraction_static"], "mem_fraction_static", 0.0, 1.0, lo_open=True)
    return f


def _weight_dtype(p) -> str:
    return "bf16" if p.quant in ("F16", "BF16", "F32") else "awq" if "4" in p.quant else "fp8"


def vllm_defaults(p, flags: dict) -> dict:
    """vLLM's flags with max_num_batched_tokens and max_num_seqs, where unset, at vLLM's defaults on the
    placement's GPU (serving_plan.vllm_gpu_defaults)."""
    d = sp.vllm_gpu_defaults(p.machine, max_num_batched_tokens=flags["max_num_batched_tokens"])
    return dict(
        flags,
        max_num_batched_tokens=d["max_num_batched_tokens"],
        max_num_seqs=flags["max_num_seqs"] or d["max_num_seqs"],
    )


def pool_tokens(engine: str, p, flags: dict) -> int:
    """KV cells the engine's pool holds on this placement (vLLM / SGLang: serving_plan's start-up plans, their
    context capped at the placement's n_ctx; llama.cpp: the placement's n_ctx)."""
    if engine == "llama.cpp":
        return p.n_ctx
    if engine == "vllm":
        if flags["num_gpu_blocks_override"] is not None:
            return flags["num_gpu_blocks_override"] * sp.VLLM_BLOCK_SIZE
        flags = vllm_defaults(p, flags)
        plan = sp.vllm_plan(
            p.model, p.machine, _weight_dtype(p), gpu_memory_utilization=flags["gpu_memory_utilization"],
            max_model_len=min(p.n_ctx, p.model.max_position_embeddings), max_num_seqs=flags["max_num_seqs"],
            max_num_batched_tokens=flags["max_num_batched_tokens"],
        )  # fmt: skip
        return int(plan["gpu_kv_cache_tokens"])
    plan = sp.sglang_plan(
        p.model, p.machine, _weight_dtype(p), mem_fraction_static=flags["mem_fraction_static"],
        context_length=min(p.n_ctx, p.model.max_position_embeddings),
        max_running_requests=flags["max_running_requests"],
    )  # fmt: skip
    return int(plan["max_total_num_tokens"])


# ---------------------------------------------------------------------------------------------------------
# Step times, memoised per batch shape
# ---------------------------------------------------------------------------------------------------------
def _round(n: int, bits: int = 5) -> int:
    """n itself up to 64, else the nearest of 2^(bits - 1) steps per octave (bits=5: 16 steps, within 2.2%;
    bits=4: 8 steps, within 4.4%): the step shapes the timer keys on."""
    if n <= 64:
        return n
    q = 1 << (n.bit_length() - bits)
    return (n + q // 2) // q * q


class StepTimer:
    """batched_step for n_decode sequences at their mean context beside a prompt chunk of n_prefill tokens at a
    mean start, memoised on the shape with each number _round-ed (a run of 1,000 requests times a few hundred
    distinct shapes instead of thousands of steps)."""

    CACHE_MAX = 20_000

    def __init__(self, p, engine: str, profile, max_num_seqs: int = 256):
        self.p, self.engine, self.profile, self.max_num_seqs = p, engine, profile, max_num_seqs
        self.cache: dict = {}
        self.raw: dict = {}  # the same, keyed on the unrounded shape
        self.calls = 0

    def seconds(self, n_decode: int, ctx_sum: int, n_prefill: int, prefill_start: int, last: bool) -> float:
        raw = (n_decode, ctx_sum, n_prefill, prefill_start, last)
        t = self.raw.get(raw)
        if t is None:
            t = self.raw[raw] = self._seconds(n_decode, ctx_sum, n_prefill, prefill_start, last)
            if len(self.raw) >= self.CACHE_MAX:
                self.raw.clear()
        return t

    def decode_run(self, n_decode: int, ctx_sum: int) -> tuple:
        """(seconds(n_decode, ctx_sum, 0, 0, False), steps): and for how many steps from this one the time stays
        the same while every context grows by one a step (the mean context stays in one of _round's bins)."""
        c = ctx_sum // n_decode
        same = 1
        if c > 64:
            q = 1 << (c.bit_length() - 4)
            # the bin's upper edge, or the next power of two (where the bins widen)
            same = min((c + q // 2) // q * q + q - q // 2, 1 << c.bit_length()) - c
        return self.seconds(n_decode, ctx_sum, 0, 0, False), same

    def _seconds(self, n_decode: int, ctx_sum: int, n_prefill: int, prefill_start: int, last: bool) -> float:
        # token counts on 16 steps per octave; contexts and a chunk's start (the attention terms) on 8
        c = _round(ctx_sum // n_decode, 4) if n_decode else 0
        key = (n_decode, c, _round(n_prefill), _round(prefill_start, 4) if n_prefill else 0, last and n_prefill > 0)
        t = self.cache.get(key)
        if t is None:
            self.calls += 1
            chunks = [(key[3], key[2], key[4])] if n_prefill else []
            t = pm.batched_step(
                self.p, [c] * n_decode, chunks, self.profile, self.engine, max_num_seqs=self.max_num_seqs
            )["total_s"]
            if len(self.cache) >= self.CACHE_MAX:
                self.cache.clear()
            self.cache[key] = t
        return t


# ---------------------------------------------------------------------------------------------------------
# The simulation
# ---------------------------------------------------------------------------------------------------------
class _Req:
    __slots__ = ("rid", "arrival", "n_prompt", "n_out", "live", "done_prompt", "to_prefill", "gen", "t_first",
                 "t_last", "t_done", "preempted", "times", "reused", "admitted")  # fmt: skip

    def __init__(self, rid, arrival, n_prompt, n_out):
        self.rid, self.arrival, self.n_prompt, self.n_out = rid, arrival, n_prompt, n_out
        self.live = None  # the managers' view of it (its tokens), from when it is sent until it finishes
        self.done_prompt = 0  # prompt (or recompute) tokens prefilled so far
        self.to_prefill = 0  # tokens this admission must compute
        self.gen = 0
        self.t_first = self.t_last = self.t_done = -1.0
        self.preempted = 0
        self.reused = 0
        self.admitted = False
        self.times = []


def _percentile(xs: list, q: float) -> float:
    """numpy.percentile's default (linear interpolation), which vllm bench serve uses."""
    if not xs:
        return 0.0
    s = sorted(xs)
    k = (len(s) - 1) * q / 100.0
    f = math.floor(k)
    c = min(f + 1, len(s) - 1)
    return s[f] + (s[c] - s[f]) * (k - f)


def _wpercentile(pairs: list, q: float) -> float:
    """_percentile of the values repeated their counts ([(value, count)]), without expanding them."""
    s = sorted(pairs)
    n = sum(k for _v, k in s)
    if not n:
        return 0.0
    pos = (n - 1) * q / 100.0
    lo, frac = math.floor(pos), pos - math.floor(pos)

    def nth(i):
        acc = 0
        for v, k in s:
            acc += k
            if i < acc:
                return v
        return s[-1][0]

    a = nth(lo)
    return a + (nth(min(lo + 1, n - 1)) - a) * frac


def _wstats(name: str, pairs: list, out: dict) -> None:
    n = sum(k for _v, k in pairs)
    out[f"mean_{name}_ms"] = sum(v * k for v, k in pairs) / n * 1e3 if n else 0.0
    out[f"median_{name}_ms"] = _wpercentile(pairs, 50) * 1e3
    out[f"p99_{name}_ms"] = _wpercentile(pairs, 99) * 1e3


def _stats(name: str, xs: list, out: dict) -> None:
    out[f"mean_{name}_ms"] = sum(xs) / len(xs) * 1e3 if xs else 0.0
    out[f"median_{name}_ms"] = _percentile(xs, 50) * 1e3
    out[f"p99_{name}_ms"] = _percentile(xs, 99) * 1e3


class Result:
    """A simulation's outcome: .metrics (vLLM's names), .requests (per request), .kv_use ((time_s, cells used)
    samples), .preemptions, .prefix_hit_tokens, .steps."""

    def __init__(self, metrics, requests, kv_use, preemptions, prefix_hit_tokens, steps, pool):
        self.metrics, self.requests, self.kv_use = metrics, requests, kv_use
        self.preemptions, self.prefix_hit_tokens, self.steps, self.pool_tokens = (
            preemptions, prefix_hit_tokens, steps, pool,
        )  # fmt: skip


def _trace(workload) -> list:
    """[(arrival_s, prompt_len, output_len)] of a Workload, or of a trace given as such a list."""
    if isinstance(workload, Workload):
        return workload.requests()
    if not isinstance(workload, (list, tuple)) or not 1 <= len(workload) <= MAX_PROMPTS:
        _check(
            False,
            "workload",
            f"must be a Workload or a list of (arrival_s, prompt_len, output_len), got {brief(workload)}",
        )
    out = []
    for i, r in enumerate(workload):
        ok = isinstance(r, (list, tuple)) and len(r) == 3
        if ok:
            check_number(r[0], f"workload[{i}].arrival_s", 0.0, 1e9)
            check_int(r[1], f"workload[{i}].prompt_len", 1, MAX_LEN)
            check_int(r[2], f"workload[{i}].output_len", 1, MAX_LEN)
        else:
            _check(False, f"workload[{i}]", f"must be (arrival_s, prompt_len, output_len), got {brief(r)}")
        out.append((float(r[0]), int(r[1]), int(r[2])))
    if sum(p + o for _t, p, o in out) > MAX_WORKLOAD_TOKENS:
        _check(False, "workload", f"holds more than {MAX_WORKLOAD_TOKENS:,} tokens")
    return sorted(out, key=lambda r: r[0])


def simulate(
    engine: str,
    placement,
    workload,
    profile=None,
    max_steps: int = 2_000_000,
    record_tokens: bool = False,
    fast: bool = True,
    **flags,
):
    """Serve `workload` (a Workload, or a trace: [(arrival_s, prompt_len, output_len)]) with `engine`
    ("llama.cpp", "vllm", "sglang") on `placement`; flags in the engine's own names (FLAGS; an unknown flag or a
    bad value: ValueError naming it). profile: the batched step's ("course" or "measured"; None = the
    placement's). record_tokens: each request's record also lists the times its tokens came out (token_times_s).
    fast=False runs every step in full, the reference the default's shortcuts are tested against (they give the
    same Result: see _simulate). Returns a Result."""
    # the run allocates many small objects and frees them without cycles: the cyclic collector only costs time
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _simulate(engine, placement, workload, profile, max_steps, record_tokens, fast, flags)
    finally:
        if was_enabled:
            gc.enable()


def _simulate(engine, placement, workload, profile, max_steps, record_tokens, fast, flags):
    if engine not in ENGINES:
        _check(False, "engine", f"must be one of {', '.join(ENGINES)}, got {brief(engine)}")
    if not isinstance(placement, pm.Placement):
        _check(False, "placement", f"must be a Placement (from place()), got {brief(placement)}")
    trace = _trace(workload)
    check_int(max_steps, "max_steps", 1, 1 << 40)
    check_bool(record_tokens, "record_tokens")
    check_bool(fast, "fast")
    if record_tokens and sum(o for _t, _p, o in trace) > kvm.MAX_REPLY_TOKENS:
        _check(False, "record_tokens", f"records at most {kvm.MAX_REPLY_TOKENS:,} token times; this workload has more")
    f = _flags(engine, flags)
    p = placement
    if p.machine.multi_gpu:
        _check(False, "placement", "the serving simulation runs on one GPU (or the CPU); several GPUs are not modelled")
    profile = pm._check_profile(profile, p)
    if engine == "vllm":  # the flags left unset take vLLM's defaults on this GPU
        f = vllm_defaults(p, f)
    pool = pool_tokens(engine, p, f)
    _check(pool > 0, "placement", f"{engine} has no room for a KV cache on this machine")
    _check(
        pool <= kvm.MAX_CAPACITY_TOKENS,
        "placement",
        f"a KV pool of {pool:,} tokens is more than the simulation holds ({kvm.MAX_CAPACITY_TOKENS:,})",
    )
    chunked = True
    if engine == "llama.cpp":
        mgr = kvm.SlotManager(pool, f["n_parallel"], track_cells=False, kv_unified=f["kv_unified"])
        cap = mgr.n_parallel
        budget = f["n_batch"]
        timer = StepTimer(p, engine, profile)
    elif engine == "vllm":
        mgr = kvm.PagedManager(pool, sp.VLLM_BLOCK_SIZE, f["enable_prefix_caching"], track_cells=False)
        mgr.record_events = False  # the simulation reads no events
        cap = f["max_num_seqs"]
        budget = f["max_num_batched_tokens"]
        chunked = f["enable_chunked_prefill"]
        if not chunked:  # vLLM then needs max_num_batched_tokens >= max_model_len: a whole prompt fits a step
            budget = max(budget, min(p.n_ctx, p.model.max_position_embeddings))
        timer = StepTimer(p, engine, profile, cap)
    else:
        mgr = kvm.RadixManager(pool, f["schedule_policy"], track_cells=False)
        d = sp.sglang_gpu_defaults(sp.gpu_total_bytes(p.machine))
        cap = f["max_running_requests"] or max(1, sp.sglang_plan(
            p.model, p.machine, _weight_dtype(p), mem_fraction_static=f["mem_fraction_static"],
            context_length=min(p.n_ctx, p.model.max_position_embeddings),
        )["max_running_requests"])  # fmt: skip
        budget = f["chunked_prefill_size"] or d["chunked_prefill_size"]
        # SGLang captures graphs up to cuda_graph_max_bs (the ladder's top is 2 x StepTimer's max_num_seqs)
        timer = StepTimer(p, engine, profile, max(1, min(cap, d["cuda_graph_max_bs"]) // 2))
        mgr.new_token_ratio = SGLANG_INIT_NEW_TOKEN_RATIO
    ratio_min = SGLANG_INIT_NEW_TOKEN_RATIO * SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR
    ratio_decay = (SGLANG_INIT_NEW_TOKEN_RATIO - ratio_min) / SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS
    limit = mgr.max_request_tokens()
    if engine != "llama.cpp":  # vLLM and SGLang refuse a request longer than max_model_len / context_length
        limit = min(limit, p.n_ctx, p.model.max_position_embeddings)
    is_vllm, is_sglang = engine == "vllm", engine == "sglang"
    bs = mgr.block_size if is_vllm else 0
    n_ubatch = f["n_ubatch"] if engine == "llama.cpp" else 0
    lpm = is_sglang and f["schedule_policy"] == "lpm"

    # requests: a shared prefix (token ids 0 .. prefix_len - 1), then a token of their own (id 2^40 + rid) and
    # zeros: the caches match prompts up to that token and no further, and a prompt costs a pointer per token
    # (positive, apart from the replies' synthetic ids, which are negative)
    shared = list(range(workload.prefix_len if isinstance(workload, Workload) else 0))
    reqs = [_Req(rid, t, n_p, n_o) for rid, (t, n_p, n_o) in enumerate(trace)]
    by_live: dict = {}  # id(r.live) -> r, for the requests sent and not finished

    def make_live(r):
        """The request's tokens, made when it is sent and dropped when it finishes (a prompt costs a pointer
        per token: only the requests in the server hold theirs). The reply's ids: one per request, repeated
        (its blocks still hash apart: they chain from its own prompt)."""
        own = r.n_prompt - len(shared)
        prompt = shared + [(1 << 40) + r.rid] if own > 0 else shared[:]
        prompt += [0] * (own - 1)
        r.live = kvm._Live(kvm.Request(r.rid, 0, prompt, (-1 - r.rid,) * r.n_out))
        by_live[id(r.live)] = r

    max_conc = (workload.max_concurrency if isinstance(workload, Workload) else None) or len(reqs)
    pending = deque(reqs)  # not sent by the client yet
    waiting: deque = deque()  # sent, not admitted
    prefilling: list = []  # admitted, prompt (or recompute) not finished, in admission order
    decoding: list = []  # generating, in admission order
    rejected = []
    itls: dict = {}  # inter-token latency (s) -> tokens
    kv_use: list = []
    st_ = {"now": 0.0, "order": 0, "hits": 0, "preempted_at": -1, "preemptions": 0}
    # Fast path, part 1: an admission that failed fails again until something frees room or adds to the caches.
    # `version` counts those events (an admission, a finish, a preemption or retraction, the step after an
    # admission, when SGLang's tree inserts the new prompts, and a drop in SGLang's new_token_ratio that covers
    # the refused head's shortfall: set_ratio); a request that did not fit at the current version is not offered
    # to the manager again. (Meanwhile decodes only take room: vLLM's blocks, never slot cells, which are
    # reserved at admission, and a radix cell each, which frees at most new_token_ratio of one from the
    # reservation; and a decoded block chains from its own request's prompt, so it cannot lengthen another
    # request's prefix hit. SGLang's failed match_prefix marks the matched path as used; repeating it with no
    # other use of the tree in between leaves the least-recently-used order as it was.)
    st_.update(version=0, fail_head=None, fail_version=-1, admitted_at=-1, fail_ratio=1.0, fail_short=0, fail_running=0)
    # the client's semaphore (--max-concurrency): when each of its free places became free, first in first out
    free_since = deque([0.0] * min(max_conc, len(reqs)))
    lag = CLIENT_TTFT_S.get(engine, 0.0)  # the client sees each token, and each reply's end, this much later

    def next_send() -> float:
        """When the client can send the next request: when it is due and (under the cap) a place is free."""
        return max(pending[0].arrival, free_since[0]) if free_since else pending[0].arrival

    ctx_sum = 0  # the decoding requests' contexts, summed
    reset_ctx = False
    steps = 0
    sample_every = 1

    def sync(r):
        """live.tokens = prompt + the tokens generated so far (appended lazily), live.n_generated = r.gen."""
        live = r.live
        have = len(live.tokens) - r.n_prompt
        if have < r.gen:
            live.tokens.extend(live.reply[have : r.gen])
        live.n_generated = r.gen

    def arrive(now):
        """The client sends every request due by `now` while it has a free place (--max-concurrency)."""
        while pending and free_since and next_send() <= now:
            r = pending.popleft()
            if r.n_prompt + r.n_out > limit:
                rejected.append(r.rid)
                continue
            sent = free_since.popleft()  # the client's clock starts when it sends: on time, or when a place frees
            r.arrival = max(r.arrival, sent)
            make_live(r)
            waiting.append(r)

    def known_to_fail(r) -> bool:
        return fast and r is st_["fail_head"] and st_["fail_version"] == st_["version"]

    def admit(r) -> bool:
        if st_["preempted_at"] == steps:  # vLLM admits nothing in a step that had to preempt
            return False
        if known_to_fail(r):
            return False
        sync(r)
        got = mgr.admit(r.live, steps)
        if got is None:
            st_["fail_head"], st_["fail_version"] = r, st_["version"]
            if is_sglang:
                st_["fail_ratio"], (st_["fail_short"], st_["fail_running"]) = mgr.new_token_ratio, mgr.shortfall
            return False
        st_["version"] += 1
        st_["admitted_at"] = steps
        reused, computed = got
        st_["order"] += 1
        r.live.order = st_["order"]
        r.to_prefill, r.done_prompt = computed, 0
        r.reused += reused
        st_["hits"] += reused
        r.admitted = True
        prefilling.append(r)
        return True

    def preempt(victims):
        st_["preempted_at"] = steps + 1
        st_["version"] += 1
        for v in victims:
            vr = by_live[id(v)]
            if vr in decoding:
                decoding.remove(vr)
            else:
                prefilling.remove(vr)
            st_["preemptions"] += 1
            vr.preempted += 1
            vr.admitted = False
            vr.live.tokens = list(vr.live.req.prompt) + list(vr.live.reply[: vr.gen])
        for v in sorted(victims, key=lambda v: -v.order):  # back to the front of the queue, oldest first
            waiting.appendleft(by_live[id(v)])

    def finish(r):
        live = r.live
        if not is_vllm:  # slot and radix cells: the reply's cells (reserved at admission, SGLang's in part) taken now
            n_before = len(live.tokens) - r.n_prompt
            sync(r)
            live.n_generated = n_before
            if is_sglang:
                mgr.decoded -= r.gen - n_before
            mgr.decode_many(live, r.gen - n_before)
        sync(r)
        mgr.finish(live, steps)
        del by_live[id(live)]
        r.live = None
        st_["version"] += 1
        decoding.remove(r)
        r.t_done = st_["now"]
        free_since.append(st_["now"] + lag)  # the client's place frees when it has read the reply's end

    def queue_order():
        """The waiting requests in the order the scheduler offers them for admission."""
        if lpm and len(waiting) <= mgr.LPM_MAX_WAITING:
            # lpm: longest cached prefix first (RadixManager.schedule; fcfs past LPM_MAX_WAITING waiting)
            by = {id(r.live): r for r in waiting}
            return [by[id(lv)] for lv in mgr.schedule([r.live for r in waiting], steps)]
        return waiting

    def set_ratio(ratio):
        """SGLang's new_token_ratio. A lower one admits the refused head only once it discounts the running
        replies by its shortfall (until then the decodes only shrink the room: each takes a cell and frees at
        most a ratio of one from the reservation)."""
        if ratio < mgr.new_token_ratio and st_["fail_version"] == st_["version"]:
            if (st_["fail_ratio"] - ratio) * st_["fail_running"] >= st_["fail_short"]:
                st_["version"] += 1
        mgr.new_token_ratio = ratio

    def retract():
        """SGLang's retract_decode: requests leave the running batch, fewest reply tokens (then the longest
        prompt) first, until 20 decode steps of the rest fit; their prompts stay in the tree, their decoded
        cells are freed, and they queue again (readmitted, they prefill the decoded tokens too)."""
        order = sorted(decoding, key=lambda r: (r.gen, -r.n_prompt), reverse=True)
        first = True
        while first or mgr.available() < SGLANG_RETRACT_DECODE_STEPS * len(order):
            if len(order) == 1:
                break
            first = False
            r = order.pop()
            live = r.live
            n_before = len(live.tokens) - r.n_prompt
            mgr.decoded -= r.gen - n_before
            live.n_generated = n_before
            mgr.retract(live)
            decoding.remove(r)
            r.admitted = False
            r.preempted += 1
            st_["preemptions"] += 1
            waiting.append(r)
        st_["version"] += 1
        new = sum(r.gen for r in order) + SGLANG_RETRACT_DECODE_STEPS * len(order)
        mgr.new_token_ratio = min(1.0, new / max(1, sum(r.n_out for r in order)))

    def step_seconds(n_dec, ctx_dec, chunk_tok, mean_start, chunk_last) -> float:
        if n_ubatch and n_dec + chunk_tok > n_ubatch:
            # llama_decode splits the batch into micro-batches of n_ubatch tokens, the decodes first
            dt = 0.0
            rest, nd = chunk_tok, n_dec
            while nd or rest:
                d = min(nd, n_ubatch)
                take = min(rest, n_ubatch - d)
                dt += timer.seconds(d, ctx_dec * d // max(1, n_dec), take, mean_start, chunk_last and rest == take)
                rest -= take
                nd -= d
            return dt
        return timer.seconds(n_dec, ctx_dec, chunk_tok, mean_start, chunk_last)

    def sample(now, pending_gen):
        """A KV-use sample (every sample_every steps); pending_gen: tokens decoded but not yet in any r.gen."""
        nonlocal kv_use, sample_every
        # reply cells not handed over yet
        unapplied = 0 if is_vllm else (mgr.decoded if is_sglang else sum(r.gen for r in decoding)) + pending_gen
        # decoded cells beyond the free ones evict cached prefixes (SGLang's admission counts them as room)
        kv_use.append((now, min(pool, mgr.cells_used() + unapplied)))
        if len(kv_use) >= 2 * KV_SAMPLES:
            kv_use = kv_use[::2]
            sample_every *= 2

    def coast() -> bool:
        """Fast path, part 2: run the steps in which every running request decodes one token and nothing else
        happens (no prompt to prefill, nobody admitted, nobody finishing, no block running out) without the
        scheduler: the same step times, ITLs and KV samples as step by step, each request updated once at the
        end, vLLM's blocks taken only at the steps where a request starts one. False: this step runs in full."""
        nonlocal steps, ctx_sum
        n = len(decoding)
        now = st_["now"]
        if not is_sglang and n > budget:
            return False  # not every running request decodes in a step
        left = budget if is_sglang else budget - n
        if waiting and left > 0 and n < cap:  # the scheduler offers the queue's head a place: is it refused?
            head = queue_order()[0]
            if (chunked or head.n_prompt + head.gen <= left) and not known_to_fail(head):
                return False
        k = max_steps - steps  # steps to run: none may finish a request
        for r in decoding:
            if r.t_last != now:
                return False  # it did not decode in the last step: its ITL is not this step's time
            k = min(k, r.n_out - r.gen - 1)
        if is_sglang:  # every step takes a cell per request (SGLang retracts when they run out)
            k = min(k, mgr.available() // n)
            if waiting and st_["fail_version"] == st_["version"]:
                # the refused head is offered again in the step after the one whose ratio decay covers its
                # shortfall (set_ratio): that step runs in full
                ratio = mgr.new_token_ratio
                for i in range(k):
                    ratio = max(ratio - ratio_decay, ratio_min)
                    if (st_["fail_ratio"] - ratio) * st_["fail_running"] >= st_["fail_short"]:
                        k = i + 1
                        break
        if k < 1:
            return False
        at: dict = {}  # vLLM: step -> the requests that start a block in it
        if bs:  # stop before the step whose blocks run out (it preempts); each request starts one per bs steps
            free = len(mgr.free_block_queue)
            k = min(k, bs * (free // n + 1))
            for r in decoding:
                for j in range(-(r.n_prompt + r.gen) % bs, k, bs):
                    at.setdefault(j, []).append(r)
            need = 0
            for j in sorted(at):
                need += len(at[j])
                if need > free:
                    k = j
                    break
            if k < 1:
                return False
        # begin_step once: nothing is admitted in these steps and the simulation tracks no cells, so later
        # steps' begin_step would do nothing (vLLM's step number is read only when it preempts)
        mgr.begin_step(steps)
        times = [] if record_tokens else None
        j = 0
        while j < k:
            # a run of steps of one time: the mean context grows by one a step and the timer rounds it
            dt, same = (
                timer.decode_run(n, ctx_sum)
                if not n_ubatch or n <= n_ubatch
                else (step_seconds(n, ctx_sum, 0, 0, False), 1)
            )
            j0 = j
            for _ in range(min(same, k - j)):
                if j and pending and free_since and next_send() <= now:
                    if not waiting or lpm:
                        k = j  # a request arrives that the scheduler may take: that step runs in full
                        break
                    arrive(now)  # it queues behind a head that does not fit
                if j in at:  # as the full step does
                    mgr.start_blocks([r.live for r in at[j]])
                now += dt
                j += 1
                steps += 1
                if times is not None:
                    times.append(now)
                if steps % sample_every == 0:
                    sample(now, j * n)
            itls[dt] = itls.get(dt, 0) + n * (j - j0)
            ctx_sum += n * (j - j0)
        st_["now"] = now
        for r in decoding:
            r.gen += j
            r.t_last = now
            if times:
                r.times.extend(times)
        if is_sglang:
            mgr.decoded += j * n
            ratio = mgr.new_token_ratio
            for _ in range(j):  # step by step, as the full steps decay it (the same float)
                ratio = max(ratio - ratio_decay, ratio_min)
            set_ratio(ratio)
        return j > 0

    while pending or waiting or prefilling or decoding:
        _check(steps < max_steps, "max_steps", f"the simulation did not finish within max_steps={max_steps:,}")
        now = st_["now"]
        if not waiting and not prefilling and not decoding and next_send() > now:
            now = st_["now"] = next_send()  # idle until the client sends the next request
        arrive(now)
        if st_["admitted_at"] == steps - 1:
            st_["version"] += 1  # SGLang's tree takes last step's prompts now (RadixManager.begin_step)
        if fast and decoding and not prefilling and coast():
            continue
        mgr.begin_step(steps)
        # --- schedule one step: decode tokens, prompt chunks (tokens, summed start), who emits a token ---
        left = budget
        n_dec = 0
        chunk_tok = chunk_start = 0
        chunk_last = False
        done_prefill = []
        if not is_sglang:  # llama-server and vLLM: every generating request first, one token each
            n_dec = min(len(decoding), left)
            left -= n_dec
        for r in prefilling:  # prompts already admitted continue first
            if left <= 0:
                break
            n = min(r.to_prefill - r.done_prompt, left)
            chunk_start += (r.reused + r.done_prompt) * n
            chunk_tok += n
            r.done_prompt += n
            left -= n
            if r.done_prompt >= r.to_prefill:
                done_prefill.append(r)
        if waiting and left > 0:
            queue = queue_order()
            taken = []
            for r in queue:
                if left <= 0 or len(prefilling) + len(decoding) >= cap:
                    break
                if not chunked and r.n_prompt + r.gen > left:
                    break  # without chunked prefill a whole prompt must fit the step's budget
                if not admit(r):
                    break
                taken.append(r)
                n = min(r.to_prefill, left)
                chunk_start += r.reused * n
                chunk_tok += n
                r.done_prompt = n
                left -= n
                if r.done_prompt >= r.to_prefill:
                    done_prefill.append(r)
            for r in taken:
                if waiting[0] is r:
                    waiting.popleft()
                else:
                    waiting.remove(r)
        if is_sglang and not chunk_tok:
            # SGLang runs a prefill batch on its own when it can form one, else a decode step of every running
            # request (update_running_batch: retract when they do not all find a cell, else decay the ratio)
            if decoding and mgr.available() < len(decoding):
                retract()
                ctx_sum = sum(r.n_prompt + r.gen for r in decoding)
            elif decoding:
                set_ratio(max(mgr.new_token_ratio - ratio_decay, ratio_min))
            n_dec = len(decoding)
        if not n_dec and not chunk_tok:
            if is_sglang:  # an idle scheduler starts the ratio over
                set_ratio(SGLANG_INIT_NEW_TOKEN_RATIO)
            if pending and not waiting and not prefilling and not decoding:
                continue
            if not prefilling and not decoding and waiting:
                if pending and free_since and next_send() > now:
                    st_["now"] = next_send()
                    continue
                # nothing runs and the head of the queue does not fit an empty pool: it never will
                r = waiting.popleft()
                rejected.append(r.rid)
                del by_live[id(r.live)]
                r.live = None
                free_since.append(now)
                continue
            if pending:
                st_["now"] = max(now, next_send())
            continue
        chunk_last = bool(done_prefill)
        mean_start = chunk_start // chunk_tok if chunk_tok else 0
        ctx_dec = ctx_sum * n_dec // max(1, len(decoding))  # the contexts of the n_dec that decode
        dt = step_seconds(n_dec, ctx_dec, chunk_tok, mean_start, chunk_last)
        prev = now  # the previous step's end: most decodes emitted then (now + dt - dt may differ from it)
        now = st_["now"] = now + dt
        # --- the step's tokens: decodes (in admission order), then prompts that finished ---
        for r in done_prefill:
            prefilling.remove(r)
        emit = decoding[:n_dec] + done_prefill
        for r in done_prefill:
            decoding.append(r)
            ctx_sum += r.n_prompt + r.gen
        n_prev = 0
        older: dict = {}
        emitted = 0
        ended = []
        lean = not record_tokens
        if bs and lean:
            # vLLM: each token that starts a block takes one (allocate_slots), in this order; with a free block
            # for each, nobody is preempted in this step
            starts = [r for r in emit if (r.n_prompt + r.gen) % bs == 0]
            if len(starts) <= len(mgr.free_block_queue):
                mgr.start_blocks([r.live for r in starts])
            else:
                lean = False
        if lean:  # nobody is preempted mid-step, every block taken
            for r in emit:
                tl = r.t_last
                if tl == prev:
                    n_prev += 1
                elif tl < 0:
                    r.t_first = now
                else:
                    older[tl] = older.get(tl, 0) + 1
                r.t_last = now
                r.gen = g = r.gen + 1
                if g >= r.n_out:
                    ended.append(r)
            emitted = len(emit)
            emit = ()
        for r in emit:
            if not r.admitted:
                continue  # preempted by an earlier request of this step
            if bs and (r.n_prompt + r.gen) % bs == 0:
                # the token needs a new block (allocate_slots); none free: the newest request is preempted
                sync(r)
                r.live.tokens.append(r.live.reply[r.gen])
                running = [x.live for x in prefilling + decoding] if not mgr.free_block_queue else []
                victims = mgr.decode(r.live, running)
                if victims:
                    preempt(victims)
                    reset_ctx = True
                if not r.admitted:
                    continue  # it preempted itself: this token is recomputed later
                r.live.tokens.pop()
            tl = r.t_last
            if tl == prev:
                n_prev += 1
            elif tl < 0:
                r.t_first = now
            else:
                older[tl] = older.get(tl, 0) + 1
            r.t_last = now
            r.gen += 1
            emitted += 1
            if record_tokens:
                r.times.append(now)
            if r.gen >= r.n_out:
                ended.append(r)
        if n_prev:
            itls[dt] = itls.get(dt, 0) + n_prev
        for tl, k in older.items():
            itl = now - tl
            itls[itl] = itls.get(itl, 0) + k
        ctx_sum += emitted
        if is_sglang:
            mgr.decoded += emitted
        for r in ended:
            ctx_sum -= r.n_prompt + r.gen
            finish(r)
        if reset_ctx:
            ctx_sum = sum(r.n_prompt + r.gen for r in decoding)
            reset_ctx = False
        mgr.events.clear()
        steps += 1
        if steps % sample_every == 0:
            sample(now, 0)
    done = [r for r in reqs if r.t_done >= 0]
    dur = max((r.t_done for r in done), default=-lag) + lag  # until the client has read the last reply
    m = {"completed": len(done), "failed": len(rejected), "duration_s": dur}
    m["total_input_tokens"] = sum(r.n_prompt for r in done)
    m["total_output_tokens"] = sum(r.n_out for r in done)
    m["request_throughput"] = len(done) / dur if dur else 0.0
    m["output_throughput"] = m["total_output_tokens"] / dur if dur else 0.0
    m["total_token_throughput"] = (m["total_input_tokens"] + m["total_output_tokens"]) / dur if dur else 0.0
    _stats("ttft", [r.t_first - r.arrival + lag for r in done], m)
    _stats("tpot", [(r.t_done - r.t_first) / (r.n_out - 1) for r in done if r.n_out > 1], m)
    _wstats("itl", list(itls.items()), m)
    _stats("e2el", [r.t_done - r.arrival + lag for r in done], m)
    recs = [
        {"rid": r.rid, "arrival_s": r.arrival, "prompt_len": r.n_prompt, "output_len": r.n_out,
         "ttft_s": r.t_first - r.arrival + lag if r.t_first >= 0 else None,
         "e2el_s": r.t_done - r.arrival + lag if r.t_done >= 0 else None, "preempted": r.preempted,
         "prefix_hit_tokens": r.reused}
        for r in reqs
    ]  # fmt: skip
    if record_tokens:
        for rec, r in zip(recs, reqs):
            rec["token_times_s"] = list(r.times)
    return Result(m, recs, kv_use, st_["preemptions"], st_["hits"], steps, pool)
