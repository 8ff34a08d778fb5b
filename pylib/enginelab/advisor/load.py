"""Load sweeps: an engine's throughput and latency against concurrency (enginelab.serving.sim), and what stops
its throughput from growing as users are added.

    pts = sweep("vllm", placement, (1, 2, 4, 8), input_len=512, output_len=128)
    flat = first_flat(pts)                  # the first point where doubling the users adds < FLAT_GAIN throughput
    cause_of("vllm", placement, pts[flat - 1], pts[flat], 512, 128, pool)  # "cap", "kv" or "compute"

The load is closed-loop, like `vllm bench serve --max-concurrency C --request-rate inf`: 2C + 8 prompts, C of them
in flight. The cause is read off the simulation at that point:
  cap      the engine runs fewer requests than the users send: llama-server's n_parallel slots, vLLM's
           max_num_seqs, SGLang's max_running_requests; the rest wait in its queue;
  kv       the KV pool ran out: requests were preempted (vLLM recomputes them), or the pool holds fewer whole
           requests (prompt + reply) than the users, so admissions wait for cells;
  compute  neither binds: more requests run as the users double, but each step costs more as the batch grows
           (past the batched pass's knee the GPU's arithmetic, not its bandwidth, sets the step time; prompt
           chunks share the steps).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import perf_model as pm

from .. import serving_plan as sp
from ..serving import sim

FLAT_GAIN = 0.25  # doubling the users adds less than 25% output throughput: flat (a choice, not a measurement)
CAUSES = ("cap", "kv", "compute")


@dataclass(frozen=True)
class LoadPoint:
    concurrency: int
    output_throughput: float  # tok/s, all users
    mean_ttft_ms: float
    mean_tpot_ms: float
    preemptions: int
    kv_peak: float  # peak KV cells in use / the pool (cached prefix cells included)
    completed: int
    failed: int


def workload(concurrency: int, input_len: int, output_len: int) -> sim.Workload:
    return sim.Workload(
        num_prompts=2 * concurrency + 8, max_concurrency=concurrency, input_len=input_len, output_len=output_len
    )


def run(engine: str, placement, concurrency: int, input_len: int, output_len: int, **flags):
    """(LoadPoint, sim.Result) for `concurrency` users (flags in the engine's names, as sim.simulate takes)."""
    res = sim.simulate(engine, placement, workload(concurrency, input_len, output_len), **flags)
    m = res.metrics
    peak = max((u for _t, u in res.kv_use), default=0) / res.pool_tokens
    pt = LoadPoint(
        concurrency,
        m["output_throughput"],
        m["mean_ttft_ms"],
        m["mean_tpot_ms"],
        res.preemptions,
        peak,
        m["completed"],
        m["failed"],
    )
    return pt, res


def sweep(engine: str, placement, concurrencies, input_len: int, output_len: int, **flags) -> tuple:
    return tuple(run(engine, placement, c, input_len, output_len, **flags)[0] for c in concurrencies)


def running_cap(engine: str, placement, **flags) -> int:
    """How many requests the engine runs at once: n_parallel (llama-server's slots; its automatic count is 4),
    max_num_seqs (vLLM; its default on the GPU when not given), max_running_requests (SGLang; its start-up plan's when not given)."""
    if engine == "llama.cpp":
        return flags.get("n_parallel") or 4
    if engine == "vllm":  # vLLM's default by GPU (serving_plan.vllm_gpu_defaults)
        return (
            flags.get("max_num_seqs")
            or sp.vllm_gpu_defaults(placement.machine, max_num_batched_tokens=flags.get("max_num_batched_tokens"))[
                "max_num_seqs"
            ]
        )
    if flags.get("max_running_requests"):
        return flags["max_running_requests"]
    m, mc = placement.model, placement.machine
    if m.key in pm.MODELS and mc.key in pm.MACHINES:  # catalog ones: kept by key
        return _sglang_cap(m.key, mc.key, placement.quant, placement.n_ctx)
    return _sglang_cap_of(m, mc, placement.quant, placement.n_ctx)


@lru_cache(maxsize=32)
def _sglang_cap(model: str, machine: str, quant: str, n_ctx: int) -> int:
    return _sglang_cap_of(pm.MODELS[model], pm.MACHINES[machine], quant, n_ctx)


def _sglang_cap_of(model, machine, quant: str, n_ctx: int) -> int:
    """SGLang's max_running_requests from its start-up memory plan for this model, machine, quant and context."""
    p = pm.place(model, machine, quant, n_ctx=n_ctx)
    plan = sp.sglang_plan(
        p.model, p.machine, sim._weight_dtype(p), context_length=min(n_ctx, p.model.max_position_embeddings)
    )
    return max(1, int(plan["max_running_requests"]))


def gain(lo: LoadPoint, hi: LoadPoint) -> float:
    """Relative throughput gained from lo to hi."""
    return hi.output_throughput / lo.output_throughput - 1 if lo.output_throughput > 0 else 0.0


def first_flat(points) -> int | None:
    """The index of the first point whose throughput is less than (1 + FLAT_GAIN) x the point before it (points
    at doubling concurrencies), or None."""
    for i in range(1, len(points)):
        if gain(points[i - 1], points[i]) < FLAT_GAIN:
            return i
    return None


def running(engine: str, placement, concurrency: int, request_tokens: int, pool: int, **flags) -> int:
    """Requests that can run at once: the users, the engine's cap, or the whole requests its pool holds."""
    return max(1, min(concurrency, running_cap(engine, placement, **flags), pool // max(1, request_tokens)))


def cause_of(
    engine: str, placement, lo: LoadPoint, hi: LoadPoint, input_len: int, output_len: int, pool: int, **flags
) -> str:
    """Why throughput from lo to hi (twice the users) does not grow: "cap", "kv" or "compute" (see the module
    docstring). pool: the KV pool in tokens (sim.Result.pool_tokens). A cap or the pool is the cause when it
    binds: when hi preempts, or when the requests that can run grow by less than half as the users double
    (the smaller of the cap and the pool's whole requests names which); otherwise the step's cost is."""
    if hi.preemptions > 0:
        return "kv"
    req = input_len + output_len
    r_lo = running(engine, placement, lo.concurrency, req, pool, **flags)
    r_hi = running(engine, placement, hi.concurrency, req, pool, **flags)
    if 2 * r_hi < 3 * r_lo:
        return "cap" if running_cap(engine, placement, **flags) <= pool // max(1, req) else "kv"
    return "compute"


CAP_FLAG = {"llama.cpp": "-np (n_parallel)", "vllm": "--max-num-seqs", "sglang": "--max-running-requests"}


def cause_text(engine: str, cause: str, pt: LoadPoint, cap: int, pool: int, request_tokens: int) -> str:
    """The cause, with the simulation's numbers: a clause to follow its name (a concurrency cap, the KV pool,
    compute) and a colon."""
    if cause == "cap":
        what = f"{cap} slot{'s' if cap != 1 else ''}" if engine == "llama.cpp" else f"{cap} running requests"
        return (
            f"{CAP_FLAG[engine]} allows {what}, so of {pt.concurrency} users "
            f"{pt.concurrency - cap} wait in the queue; their TTFT grows, and throughput does not."
        )
    if cause == "kv":
        held = pool // max(1, request_tokens)
        text = (
            f"its {pool:,} tokens hold {held} request{'s' if held != 1 else ''} of {request_tokens:,} "
            f"tokens, not {pt.concurrency}; the others wait for cells"
        )
        if pt.preemptions:
            n = pt.preemptions
            text += f", and {n} preemption{'s' if n != 1 else ''} threw away work that was computed again"
        return text + "."
    return (
        "more of the users' requests run at once as they double, but each step costs more as the batch grows "
        "(its arithmetic, and the prompt chunks that share the steps), so the step time rises with the users and "
        "TPOT with it."
    )
