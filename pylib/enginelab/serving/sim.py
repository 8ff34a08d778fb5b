"""A time-based serving simulation: llama-server, vLLM and SGLang under a `vllm bench serve`-shaped load.

The pool of KV cells is one of kv_managers' three managers (SlotManager for llama-server, PagedManager for vLLM,
RadixManager for SGLang), so admission, prefix reuse and preemption follow their rules; each scheduler step is a
forward pass timed by step.batched_step. The clock advances by the step's time, so the metrics are vLLM's
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
             step of every running request; at most max_running_requests run.

Simplified: a request's prompt cells are taken when it is admitted (vLLM allocates each chunk's blocks as the
chunk is scheduled); a step's time is that of a batch of the same size at the batch's mean context (the pass is
affine in the KV read); detokenisation, sampling and HTTP costs are left out.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass

import kv_managers as kvm
import perf_model as pm
from enginelab import serving_plan as sp
from enginelab.checks import brief, check_bool, check_int, check_number, is_int
from enginelab.checks import check as _check

from . import step as st

DATASETS = ("random", "sharegpt")
ENGINES = ("llama.cpp", "vllm", "sglang")
MAX_PROMPTS = 100_000
MAX_LEN = 1 << 20
MAX_WORKLOAD_TOKENS = 1 << 25  # prompt + output tokens over a workload
KV_SAMPLES = 256  # KV-use samples kept over a run (every k-th step)

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
                i = rng.randint(max(1, math.floor(self.input_len * (1 - r))), math.ceil(self.input_len * (1 + r)))
                o = rng.randint(max(1, math.floor(self.output_len * (1 - r))), math.ceil(self.output_len * (1 + r)))
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
        "max_num_seqs": sp.VLLM_MAX_NUM_SEQS,
        "max_num_batched_tokens": None,
        "enable_chunked_prefill": True,
        "enable_prefix_caching": True,
        "gpu_memory_utilization": sp.VLLM_GPU_MEMORY_UTILIZATION,
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
        check_int(f["max_num_seqs"], "max_num_seqs", 1, sp.MAX_SEQS)
        if f["max_num_batched_tokens"] is not None:
            check_int(f["max_num_batched_tokens"], "max_num_batched_tokens", 1, pm.MAX_CONTEXT)
        check_bool(f["enable_chunked_prefill"], "enable_chunked_prefill")
        check_bool(f["enable_prefix_caching"], "enable_prefix_caching")
        check_number(f["gpu_memory_utilization"], "gpu_memory_utilization", 0.0, 1.0, lo_open=True)
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


def pool_tokens(engine: str, p, flags: dict) -> int:
    """KV cells the engine's pool holds on this placement (vLLM / SGLang: serving_plan's start-up plans, their
    context capped at the placement's n_ctx; llama.cpp: the placement's n_ctx)."""
    if engine == "llama.cpp":
        return p.n_ctx
    if engine == "vllm":
        plan = sp.vllm_plan(
            p.model, p.machine, _weight_dtype(p), gpu_memory_utilization=flags["gpu_memory_utilization"],
            max_model_len=min(p.n_ctx, p.model.max_position_embeddings), max_num_seqs=flags["max_num_seqs"],
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
class StepTimer:
    """batched_step for a batch of n_decode sequences at a mean context and a prompt chunk of n_prefill tokens
    at a mean start, memoised on (n_decode, n_prefill, contexts rounded to CTX_ROUND)."""

    CTX_ROUND = 64
    CACHE_MAX = 20_000

    def __init__(self, p, engine: str, profile, max_num_seqs: int = 256):
        self.p, self.engine, self.profile, self.max_num_seqs = p, engine, profile, max_num_seqs
        self.cache: dict = {}
        self.calls = 0

    def seconds(self, n_decode: int, ctx_sum: int, n_prefill: int, prefill_start: int, last: bool) -> float:
        q = self.CTX_ROUND
        c = (ctx_sum // max(1, n_decode) + q // 2) // q * q if n_decode else 0
        s = (prefill_start + q // 2) // q * q
        key = (n_decode, c, n_prefill, s if n_prefill else 0)
        t = self.cache.get(key)
        if t is None:
            self.calls += 1
            chunks = [(s, n_prefill, last)] if n_prefill else []
            t = st.batched_step(
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
                 "t_last", "t_done", "preempted", "reused", "admitted")  # fmt: skip

    def __init__(self, rid, arrival, n_prompt, n_out, prompt):
        self.rid, self.arrival, self.n_prompt, self.n_out = rid, arrival, n_prompt, n_out
        self.live = kvm._Live(kvm.Request(rid, 0, prompt, n_out))
        self.done_prompt = 0  # prompt (or recompute) tokens prefilled so far
        self.to_prefill = 0  # tokens this admission must compute
        self.gen = 0
        self.t_first = self.t_last = self.t_done = -1.0
        self.preempted = 0
        self.reused = 0
        self.admitted = False


def _percentile(xs: list, q: float) -> float:
    """numpy.percentile's default (linear interpolation), which vllm bench serve uses."""
    if not xs:
        return 0.0
    s = sorted(xs)
    k = (len(s) - 1) * q / 100.0
    f = math.floor(k)
    c = min(f + 1, len(s) - 1)
    return s[f] + (s[c] - s[f]) * (k - f)


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


def simulate(engine: str, placement, workload: Workload, profile=None, max_steps: int = 2_000_000, **flags):
    """Serve `workload` with `engine` ("llama.cpp", "vllm", "sglang") on `placement`; flags in the engine's own
    names (FLAGS). Returns a Result."""
    if engine not in ENGINES:
        _check(False, "engine", f"must be one of {', '.join(ENGINES)}, got {brief(engine)}")
    if not isinstance(placement, pm.Placement):
        _check(False, "placement", f"must be a Placement (from place()), got {brief(placement)}")
    if not isinstance(workload, Workload):
        _check(False, "workload", f"must be a Workload, got {brief(workload)}")
    check_int(max_steps, "max_steps", 1, 1 << 40)
    f = _flags(engine, flags)
    p = placement
    profile = pm._check_profile(profile, p)
    pool = pool_tokens(engine, p, f)
    _check(pool > 0, "placement", f"{engine} has no room for a KV cache on this machine")
    if engine == "llama.cpp":
        n_par = f["n_parallel"]
        unified = f["kv_unified"] if f["kv_unified"] is not None else n_par is None
        mgr = kvm.SlotManager(pool, None if unified else n_par, track_cells=False)
        if unified and n_par is not None:
            mgr = kvm.SlotManager(pool, None, track_cells=False)
            mgr.n_parallel = n_par
            mgr.slots = [kvm._Slot(i) for i in range(n_par)]
        cap = mgr.n_parallel
        budget = f["n_batch"]
        timer = StepTimer(p, engine, profile)
    elif engine == "vllm":
        mgr = kvm.PagedManager(pool, sp.VLLM_BLOCK_SIZE, f["enable_prefix_caching"], track_cells=False)
        cap = f["max_num_seqs"]
        budget = f["max_num_batched_tokens"]
        if budget is None:  # the server's default by GPU memory (serving_plan.VLLM_MAX_NUM_BATCHED_TOKENS)
            budget = 8192 if sp.gpu_total_bytes(p.machine) >= 70 * 2**30 else sp.VLLM_MAX_NUM_BATCHED_TOKENS
        timer = StepTimer(p, engine, profile, cap)
    else:
        mgr = kvm.RadixManager(pool, f["schedule_policy"], track_cells=False)
        d = sp.sglang_gpu_defaults(sp.gpu_total_bytes(p.machine))
        cap = f["max_running_requests"] or sp.sglang_plan(
            p.model, p.machine, _weight_dtype(p), mem_fraction_static=f["mem_fraction_static"],
            context_length=min(p.n_ctx, p.model.max_position_embeddings),
        )["max_running_requests"]  # fmt: skip
        budget = f["chunked_prefill_size"] or d["chunked_prefill_size"]
        timer = StepTimer(p, engine, profile, min(cap, d["cuda_graph_max_bs"]))
    limit = mgr.max_request_tokens()

    # requests: a shared prefix (ids 0..prefix_len-1), then tokens unique to each request
    shared = list(range(workload.prefix_len))
    raw = workload.requests()
    reqs = []
    base = 1 << 40
    for rid, (t, n_p, n_o) in enumerate(raw):
        uniq = range(base + rid * (MAX_LEN * 2), base + rid * (MAX_LEN * 2) + n_p - len(shared))
        reqs.append(_Req(rid, t, n_p, n_o, shared + list(uniq)))
    max_conc = workload.max_concurrency or len(reqs)
    pending = deque(reqs)  # not yet sent by the client
    waiting: deque = deque()
    running: list = []
    rejected = []
    now = 0.0
    in_flight = 0
    steps = 0
    preemptions = 0
    hits = 0
    kv_use = []
    itls: list = []
    sample_every = 1
    order = 0
    preempted_at = -1

    def send():
        nonlocal in_flight
        while pending and in_flight < max_conc and pending[0].arrival <= now:
            r = pending.popleft()
            if r.n_prompt + r.n_out > limit:
                rejected.append(r.rid)
                continue
            in_flight += 1
            r.arrival = max(r.arrival, now)  # the client's clock starts when its semaphore lets it through
            waiting.append(r)

    def finish(r):
        nonlocal in_flight
        live = r.live
        if engine != "vllm":  # slots and radix cells: the reply's cells, reserved at admission, taken now
            n_before = len(live.tokens) - r.n_prompt
            live.n_generated = n_before
            sync(r)
            live.n_generated = n_before
            mgr.decode_many(live, r.gen - n_before)
            live.n_generated = r.gen
        else:
            sync(r)
        mgr.finish(live, steps)
        running.remove(r)
        r.t_done = now
        in_flight -= 1

    def sync(r):
        """live.tokens = prompt + the tokens generated so far (appended lazily)."""
        live = r.live
        want = r.n_prompt + r.gen
        have = len(live.tokens)
        if have < want:
            live.tokens.extend(live.reply[have - r.n_prompt : r.gen])
        live.n_generated = r.gen

    def admit(r) -> bool:
        nonlocal order, hits
        if preempted_at == steps:  # vLLM admits nothing in a step that had to preempt
            return False
        sync(r)
        got = mgr.admit(r.live, steps)
        if got is None:
            return False
        reused, computed = got
        order += 1
        r.live.order = order
        r.to_prefill = computed
        r.done_prompt = 0
        r.reused += reused
        hits += reused
        r.admitted = True
        running.append(r)
        return True

    while pending or waiting or running:
        _check(steps < max_steps, "max_steps", f"the simulation did not finish within max_steps={max_steps:,}")
        if not waiting and not running:
            nxt = pending[0].arrival
            if in_flight < max_conc and nxt > now:
                now = nxt
        send()
        n_dec = ctx_sum = 0
        chunk_tok = chunk_start = 0
        chunk_last = False
        emit = []  # requests that produce a token at the end of this step
        if engine == "vllm":
            left = budget
            decoders = [r for r in running if r.done_prompt >= r.to_prefill]
            for r in decoders:
                if left <= 0:
                    break
                n_dec += 1
                ctx_sum += r.n_prompt + r.gen
                emit.append(r)
                left -= 1
            for r in running:
                if left <= 0:
                    break
                if r.done_prompt < r.to_prefill:
                    n = min(r.to_prefill - r.done_prompt, left)
                    if not f["enable_chunked_prefill"] and n < r.to_prefill - r.done_prompt:
                        continue
                    chunk_start += (r.reused + r.done_prompt) * n
                    chunk_tok += n
                    r.done_prompt += n
                    left -= n
                    if r.done_prompt >= r.to_prefill:
                        emit.append(r)
                        chunk_last = True
            if not preemptions or True:
                while waiting and left > 0 and len(running) < cap:
                    r = waiting[0]
                    if not admit(r):
                        break
                    waiting.popleft()
                    n = min(r.to_prefill, left)
                    if not f["enable_chunked_prefill"] and n < r.to_prefill:
                        if left < budget:  # waits for a step with room for the whole prompt
                            break
                    chunk_start += r.reused * n
                    chunk_tok += n
                    r.done_prompt = n
                    left -= n
                    if r.done_prompt >= r.to_prefill:
                        emit.append(r)
                        chunk_last = True
        elif engine == "sglang":
            # a prefill batch when new requests can be admitted, else a decode step
            left = budget
            for r in running:  # a chunked prompt continues first
                if r.done_prompt < r.to_prefill and left > 0:
                    n = min(r.to_prefill - r.done_prompt, left)
                    chunk_start += (r.reused + r.done_prompt) * n
                    chunk_tok += n
                    r.done_prompt += n
                    left -= n
                    if r.done_prompt >= r.to_prefill:
                        emit.append(r)
                        chunk_last = True
            if waiting and left > 0 and len(running) < cap:
                order_w = list(mgr.schedule([r.live for r in waiting], steps))
                by_live = {id(r.live): r for r in waiting}
                for lv in order_w:
                    if left <= 0 or len(running) >= cap:
                        break
                    r = by_live[id(lv)]
                    if not admit(r):
                        break
                    waiting.remove(r)
                    n = min(r.to_prefill, left)
                    chunk_start += r.reused * n
                    chunk_tok += n
                    r.done_prompt = n
                    left -= n
                    if r.done_prompt >= r.to_prefill:
                        emit.append(r)
                        chunk_last = True
            if not chunk_tok:
                for r in running:
                    n_dec += 1
                    ctx_sum += r.n_prompt + r.gen
                    emit.append(r)
        else:  # llama-server
            left = budget
            for r in running:
                if r.done_prompt >= r.to_prefill:
                    n_dec += 1
                    ctx_sum += r.n_prompt + r.gen
                    emit.append(r)
                    left -= 1
            while waiting:
                if not admit(waiting[0]):
                    break
                waiting.popleft()
            for r in running:
                if r.done_prompt < r.to_prefill and left > 0:
                    n = min(r.to_prefill - r.done_prompt, left)
                    chunk_start += (r.reused + r.done_prompt) * n
                    chunk_tok += n
                    r.done_prompt += n
                    left -= n
                    if r.done_prompt >= r.to_prefill:
                        emit.append(r)
                        chunk_last = True
        if not emit and not chunk_tok:
            if not running and waiting and not pending and in_flight == len(waiting):
                # nothing runs and the head of the queue does not fit an empty pool
                r = waiting.popleft()
                rejected.append(r.rid)
                in_flight -= 1
                continue
            if pending:
                now = max(now, pending[0].arrival)
            continue
        mean_start = chunk_start // chunk_tok if chunk_tok else 0
        if engine == "llama.cpp" and n_dec + chunk_tok > f["n_ubatch"]:
            # llama_decode splits the batch into micro-batches of n_ubatch tokens: decodes ride in the first
            dt = 0.0
            rest = chunk_tok
            first = max(0, f["n_ubatch"] - n_dec)
            nd = n_dec
            while nd or rest:
                take = min(rest, first if nd else f["n_ubatch"])
                dt += timer.seconds(nd, ctx_sum if nd else 0, take, mean_start, chunk_last and rest == take)
                rest -= take
                nd = 0
        else:
            dt = timer.seconds(n_dec, ctx_sum, chunk_tok, mean_start, chunk_last)
        now += dt
        steps += 1
        bs = mgr.block_size if engine == "vllm" else 0
        for r in emit:
            if not r.admitted:
                continue  # preempted by an earlier request of this step
            if bs and (r.n_prompt + r.gen) % bs == 0:
                # the token needs a new block (allocate_slots); none free: preempt the newest request
                sync(r)
                r.live.tokens.append(r.live.reply[r.gen])
                victims = mgr.decode(r.live, [x.live for x in running] if not mgr.free_block_queue else [])
                for v in victims:
                    preempted_at = steps + 1
                    vr = next(x for x in running if x.live is v)
                    running.remove(vr)
                    preemptions += 1
                    vr.preempted += 1
                    vr.admitted = False
                    vr.live.tokens = list(vr.live.req.prompt) + list(vr.live.reply[: vr.gen])
                    waiting.appendleft(vr)
                if not r.admitted:
                    continue  # it preempted itself: this token is recomputed later
                r.live.tokens.pop()
            if r.t_first < 0:
                r.t_first = now
            else:
                itls.append(now - r.t_last)
            r.t_last = now
            r.gen += 1
            if r.gen >= r.n_out:
                finish(r)
        if steps % sample_every == 0:
            pending_cells = 0 if engine == "vllm" else sum(r.gen for r in running)  # reply cells not applied yet
            kv_use.append((now, mgr.cells_used() + pending_cells))
            if len(kv_use) >= 2 * KV_SAMPLES:
                kv_use = kv_use[::2]
                sample_every *= 2
    done = [r for r in reqs if r.t_done >= 0]
    dur = max((r.t_done for r in done), default=0.0)
    ttft = [r.t_first - r.arrival for r in done]
    tpot = [(r.t_done - r.t_first) / (r.n_out - 1) for r in done if r.n_out > 1]
    e2el = [r.t_done - r.arrival for r in done]
    m = {"completed": len(done), "failed": len(rejected), "duration_s": dur}
    m["total_input_tokens"] = sum(r.n_prompt for r in done)
    m["total_output_tokens"] = sum(r.n_out for r in done)
    m["request_throughput"] = len(done) / dur if dur else 0.0
    m["output_throughput"] = m["total_output_tokens"] / dur if dur else 0.0
    m["total_token_throughput"] = (m["total_input_tokens"] + m["total_output_tokens"]) / dur if dur else 0.0
    _stats("ttft", ttft, m)
    _stats("tpot", tpot, m)
    _stats("itl", itls, m)
    _stats("e2el", e2el, m)
    recs = [
        {"rid": r.rid, "arrival_s": r.arrival, "prompt_len": r.n_prompt, "output_len": r.n_out,
         "ttft_s": r.t_first - r.arrival if r.t_first >= 0 else None,
         "e2el_s": r.t_done - r.arrival if r.t_done >= 0 else None, "preempted": r.preempted,
         "prefix_hit_tokens": r.reused}
        for r in reqs
    ]  # fmt: skip
    return Result(m, recs, kv_use, preemptions, hits, steps, pool)
