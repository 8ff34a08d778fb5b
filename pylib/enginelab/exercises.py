"""The module's four exercises: task, starter code, a checker per exercise, and the runner the page uses.

A learner's cell is run by `run_cell(n, code)`: the code runs in a fresh namespace, its output, charts and
any traceback are collected, and then the exercise's checker reads the names the code left behind and says
"correct" or "not yet" with a hint (never the expected number). The same runner and checkers run in CPython
in the tests (tests/test_exercises.py) and in the browser's Python worker (site/py/exercises_worker.py).

Names each checker reads, and its tolerances:

  1  file_gb, kv_gb, decode_upper_bound_tok_s, fits_f16, fits_q8_0
       file_gb within 2% of the Q5_K_M tensor bytes (weight_bytes) or the whole file (file_bytes), in GB = 1e9 B;
       kv_gb within 3% of the f16 cache for 16,384 tokens (16,000 tokens is also inside 3%);
       decode_upper_bound_tok_s within 5% of bandwidth / bytes per token for any of the readings listed in
       `_ex1_reference` (peak or 70% of peak; the weights, the file, or the weights + KV; or
       decode_step_time's estimate at context 0 or 16k);
       fits_f16 / fits_q8_0 exactly the bool place(..., n_gpu_layers=65).fits gives.
  2  ngl_values, tok_s (and n_ctx, context if defined: defaults 8192 and 0)
       ngl_values is 0..49 in order; every tok_s value within 1% of place(..., n_gpu_layers=n) +
       decode_step_time(..., context=context); and a plot.line chart of them was drawn.
  3  workload, capacity_tokens, schedule_policy (default "fcfs", SGLang's)
       simulate(RadixManager(capacity_tokens, schedule_policy=...), workload) must report a larger
       summary["prefill_computed"] than simulate(PagedManager(capacity_tokens), workload), with no request
       rejected by either. Limits: at most 500 requests, 50,000 tokens in all, capacity 16..100,000.
  4  knee_batch (and context, n_ctx if defined: defaults 0 and 8192)
       within max(2, 5%) of the first batch b at which decode_step_time(p, context, batch=b + 1,
       profile="measured") gives less than 1% more tok/s than batch b, for Llama 3.1 8B Q4_K_M placed on the
       RTX 4060 Ti with the measured profile (llama.cpp's batched kernels); and a plot.line chart was drawn.
"""

from __future__ import annotations

import builtins
import io
import linecache
import math
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

# Bound here, at import: a learner who reassigns perf_model.decode_step_time in a cell does not change the
# reference the checkers compute.
from perf_model import (
    DDR5_DUAL,
    GB,
    MACHINES,
    MODELS,
    Device,
    Machine,
    Placement,
    decode_step_time,
    file_bytes,
    kv_cache_bytes,
    place,
    ridge_batch,
    weight_bytes,
)

from . import plot

CORRECT, NOT_YET = "correct", "not yet"
SOLUTIONS = Path(__file__).resolve().parent / "solutions"
MAX_OUTPUT_CHARS = 100_000


@dataclass(frozen=True)
class Exercise:
    number: int
    title: str
    task: tuple  # paragraphs of plain text
    names: tuple  # (name, what it must hold) the checker reads
    tolerance: str
    starter: str
    wants_plot: bool
    check: Callable  # check(namespace, plots) -> (CORRECT | NOT_YET, hint)

    @property
    def solution(self) -> str:
        return (SOLUTIONS / f"ex{self.number}.py").read_text()


# ---------------------------------------------------------------------------------------------------------
# Reading the learner's names
# ---------------------------------------------------------------------------------------------------------
class _Missing(Exception):
    """A name is absent or has the wrong type; the message is the hint."""


def _number(ns: dict, name: str) -> float:
    if name not in ns:
        raise _Missing(f"{name} is not defined: the checker reads it after your code runs.")
    v = ns[name]
    if v is None:
        raise _Missing(f"{name} is still None: compute it.")
    if isinstance(v, (bool, str, bytes)) or not hasattr(v, "__float__"):
        raise _Missing(f"{name} should be a number, but it is a {type(v).__name__}.")
    if not isinstance(v, (int, float)):
        try:
            v = float(v)  # e.g. a numpy-like scalar
        except (TypeError, ValueError):
            raise _Missing(f"{name} should be a number, but it is a {type(v).__name__}.") from None
    v = float(v)
    if not math.isfinite(v):
        raise _Missing(f"{name} is {v}; it should be a finite number.")
    return v


def _bool(ns: dict, name: str) -> bool:
    if name not in ns:
        raise _Missing(f"{name} is not defined: the checker reads it after your code runs.")
    v = ns[name]
    if v is None:
        raise _Missing(f"{name} is still None: set it to True or False.")
    if isinstance(v, Placement):
        raise _Missing(f"{name} is a Placement; the checker wants True or False (a Placement has .fits).")
    if not isinstance(v, bool):
        raise _Missing(f"{name} should be True or False, but it is a {type(v).__name__}.")
    return v


def _int(ns: dict, name: str, default=None, lo: int = 0, hi: int = 10**9) -> int:
    if name not in ns:
        if default is None:
            raise _Missing(f"{name} is not defined: the checker reads it after your code runs.")
        return default
    v = ns[name]
    if v is None:
        raise _Missing(f"{name} is still None: set it to a whole number.")
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise _Missing(f"{name} should be a whole number, but it is {v!r}.")
    if not lo <= v <= hi:
        raise _Missing(f"{name} is {v}; allowed here: {lo:,} to {hi:,}.")
    return v


def _seq(ns: dict, name: str, max_len: int = 10_000) -> list:
    if name not in ns:
        raise _Missing(f"{name} is not defined: the checker reads it after your code runs.")
    v = ns[name]
    if v is None or isinstance(v, (str, bytes, dict)) or not hasattr(v, "__iter__"):
        raise _Missing(f"{name} should be a list, but it is {type(v).__name__}.")
    out = list(v)
    if len(out) > max_len:
        raise _Missing(f"{name} has {len(out):,} items; at most {max_len:,} are checked.")
    return out


def _close(got: float, want: float, rel: float) -> bool:
    return abs(got - want) <= rel * abs(want)


def _plotted(plots, n_points: int = 0) -> bool:
    return any(getattr(p, "kind", "") == "line" and len(p.rows) >= n_points for p in plots)


# ---------------------------------------------------------------------------------------------------------
# Exercise 1: size a deployment
# ---------------------------------------------------------------------------------------------------------
EX1_MODEL, EX1_QUANT, EX1_CTX = "qwen2.5-32b", "Q5_K_M", 16 * 1024
GIB_PER_GB = 1e9 / 2**30


def ex1_machine() -> Machine:
    """The module's RTX 5090 machine (32 GB, 1,792 GB/s), built the way its starter code builds it."""
    return Machine("RTX 5090 32 GB + DDR5", Device("RTX 5090", 32, 1792, 209.5), DDR5_DUAL, 63.0)


@cache
def _ex1_reference() -> dict:
    m, mc = MODELS[EX1_MODEL], ex1_machine()
    weights = weight_bytes(m, EX1_QUANT)["total"]
    whole = file_bytes(m, EX1_QUANT)
    kv = {t: kv_cache_bytes(m, EX1_CTX, t) for t in ("f16", "q8_0")}
    full = m.n_layers + 1
    fits = {t: place(m, mc, EX1_QUANT, n_ctx=EX1_CTX, kv_type=t, n_gpu_layers=full).fits for t in ("f16", "q8_0")}
    p = place(m, mc, EX1_QUANT, n_ctx=EX1_CTX, kv_type="f16")
    bw = mc.gpu.bandwidth
    d0 = decode_step_time(p, context=0)
    d16 = decode_step_time(p, context=EX1_CTX)
    read0 = d0["gpu_bytes"] + d0["cpu_bytes"]
    read16 = d16["gpu_bytes"] + d16["cpu_bytes"]
    bounds = [d0["tok_per_s"], d16["tok_per_s"]]
    for b in (weights, whole, read0, read16, weights + kv["f16"]):
        for eta in (1.0, 0.7):
            bounds.append(eta * bw / b)
    others = {q: weight_bytes(m, q)["total"] / GB for q in ("Q4_K_M", "Q5_K_S", "Q6_K", "Q8_0", "F16")}
    return {
        "file_gb": (weights / GB, whole / GB),
        "kv_gb": kv["f16"] / GB,
        "kv_q8_gb": kv["q8_0"] / GB,
        "bounds": bounds,
        "fits": fits,
        "other_quants_gb": others,
    }


def _check_ex1(ns: dict, plots) -> tuple:
    ref = _ex1_reference()
    problems = []
    try:
        f = _number(ns, "file_gb")
        if not any(_close(f, w, 0.02) for w in ref["file_gb"]):
            if any(_close(f, w, 0.02) for w in ref["other_quants_gb"].values()):
                q = next(q for q, w in ref["other_quants_gb"].items() if _close(f, w, 0.02))
                problems.append(f"file_gb matches the {q} file; the exercise asks about Q5_K_M.")
            elif any(_close(f, w * GIB_PER_GB, 0.02) for w in ref["file_gb"]):
                # the number GiB gives, but a bits-per-weight estimate can land there too: say both
                problems.append(
                    "file_gb is about 0.93 of the Q5_K_M size. Dividing bytes by a GiB (2**30) gives that; the "
                    "course uses GB = 1e9 bytes. If you divided by 1e9, your byte count is short: llama-quantize "
                    "keeps some tensors in larger types (weight_bytes adds up every tensor)."
                )
            elif any(_close(f, w * 1e9, 0.02) or _close(f, w / 1e3, 0.02) for w in ref["file_gb"]):
                problems.append("file_gb is off by a power of 1000: check bytes vs GB.")
            else:
                problems.append(
                    "file_gb is not the Q5_K_M size: add up the bytes of every tensor in the type "
                    "llama-quantize gives it (weight_bytes does this) and divide by GB."
                )
    except _Missing as e:
        problems.append(str(e))
    try:
        k = _number(ns, "kv_gb")
        if not _close(k, ref["kv_gb"], 0.03):
            if _close(k, ref["kv_q8_gb"], 0.03):
                problems.append("kv_gb matches a q8_0 cache; kv_gb asks for the f16 cache (2 bytes per element).")
            elif _close(k, ref["kv_gb"] / 2, 0.03):
                problems.append("kv_gb is half of it: the cache holds both K and V.")
            elif _close(k, ref["kv_gb"] * GIB_PER_GB, 0.03):
                problems.append(
                    "kv_gb is about 0.93 of the f16 cache's size: what dividing bytes by a GiB (2**30) gives; the "
                    "course uses GB = 1e9 bytes."
                )
            else:
                problems.append(
                    "kv_gb is not the f16 cache at 16k: 2 (K and V) x layers x KV heads x head size "
                    "x tokens x 2 bytes, with the model's config values."
                )
    except _Missing as e:
        problems.append(str(e))
    try:
        d = _number(ns, "decode_upper_bound_tok_s")
        if not any(_close(d, b, 0.05) for b in ref["bounds"]):
            if any(_close(d, b * 1e9, 0.05) or _close(d, b / 1e9, 0.05) for b in ref["bounds"]):
                problems.append("decode_upper_bound_tok_s is off by a factor of 1e9: bandwidth_gbs is in GB/s.")
            else:
                problems.append(
                    "decode_upper_bound_tok_s: each token reads every weight once, so the bound is "
                    "bandwidth (bytes/s) / bytes read per token."
                )
    except _Missing as e:
        problems.append(str(e))
    for name, kv in (("fits_f16", "f16"), ("fits_q8_0", "q8_0")):
        try:
            if _bool(ns, name) != ref["fits"][kv]:
                problems.append(
                    f"{name}: check again with place(..., kv_type={kv!r}, n_gpu_layers=65): "
                    f"65 = 64 blocks + the output head, all on the GPU; look at .fits."
                )
        except _Missing as e:
            problems.append(str(e))
    if problems:
        return NOT_YET, "\n".join(problems)
    return CORRECT, (
        "All five answers check out. Compare your bound with decode_step_time's estimate at a "
        "16k context: what does the KV cache cost per token?"
    )


# ---------------------------------------------------------------------------------------------------------
# Exercise 2: the offload break-even
# ---------------------------------------------------------------------------------------------------------
EX2_MODEL, EX2_MACHINE, EX2_QUANT = "qwen2.5-14b", "rtx3060", "Q4_K_M"


@lru_cache(maxsize=16)
def ex2_reference(n_ctx: int = 8192, context: int = 0) -> tuple:
    m, mc = MODELS[EX2_MODEL], MACHINES[EX2_MACHINE]
    return tuple(
        decode_step_time(place(m, mc, EX2_QUANT, n_ctx=n_ctx, n_gpu_layers=n), context=context)["tok_per_s"]
        for n in range(m.n_layers + 2)
    )


def _check_ex2(ns: dict, plots) -> tuple:
    n_top = MODELS[EX2_MODEL].n_layers + 1
    try:
        n_ctx = _int(ns, "n_ctx", 8192, 1, 131072)
        context = _int(ns, "context", 0, 0, n_ctx)
        ngl = _seq(ns, "ngl_values")
        ys = _seq(ns, "tok_s")
    except _Missing as e:
        return NOT_YET, str(e)
    if [v for v in ngl] != list(range(n_top + 1)):
        return NOT_YET, (
            f"ngl_values should hold every -ngl from 0 to {n_top}, in order "
            f"({n_top - 1} blocks plus the output head), {n_top + 1} values."
        )
    if len(ys) != len(ngl):
        return NOT_YET, f"tok_s has {len(ys)} values but ngl_values has {len(ngl)}: one speed per -ngl."
    try:
        ys = [_number({"tok_s": y}, "tok_s") for y in ys]
    except _Missing as e:
        return NOT_YET, f"Every item of tok_s must be a number: {e}"
    ref = ex2_reference(n_ctx, context)
    bad = [i for i, (y, r) in enumerate(zip(ys, ref)) if not _close(y, r, 0.01)]
    if bad:
        i = bad[0]
        ratio = ys[i] / ref[i] if ref[i] else float("inf")
        extra = ""
        if all(_close(y / r, 1 / 0.7, 0.02) for y, r in zip(ys, ref)):
            extra = " Every value is about 1.43x too high: the model assumes decode reaches 70% of peak bandwidth."
        elif len(ys) > 1 and all(_close(ys[j], ref[j + 1], 0.01) for j in range(len(ys) - 1)):
            extra = " Your curve looks shifted by one: tok_s[i] must be the speed at ngl_values[i]."
        elif len(ys) > 1 and all(_close(ys[j + 1], ref[j], 0.01) for j in range(len(ys) - 1)):
            extra = " Your curve looks shifted by one: tok_s[i] must be the speed at ngl_values[i]."
        return NOT_YET, (
            f"{len(bad)} of {len(ys)} points differ by more than 1%. The first is -ngl {ngl[i]}: "
            f"your {ys[i]:.3g} tok/s is {abs(ratio - 1):.0%} {'high' if ratio > 1 else 'low'}. "
            f'Use place(model, machine, "Q4_K_M", n_ctx=n_ctx, n_gpu_layers=n) and '
            f'decode_step_time(p, context=context)["tok_per_s"].{extra}'
        )
    if not _plotted(plots, len(ngl)):
        return NOT_YET, (
            "Your numbers are right. Now draw them: plot.line(ngl_values, tok_s, title=..., xlabel=..., ylabel=...)."
        )
    return CORRECT, (
        "Every point matches. Now explain the shape: why do the first layers moved to the GPU buy "
        "so little, the last ones so much, and why is the final step (the output head) so large?"
    )


# ---------------------------------------------------------------------------------------------------------
# Exercise 3: make the radix cache lose
# ---------------------------------------------------------------------------------------------------------
EX3_MAX_REQUESTS, EX3_MAX_TOKENS = 500, 50_000


def _check_ex3(ns: dict, plots) -> tuple:
    import kv_managers as kvm  # imported here: the other exercises do not need the simulator

    try:
        cap = _int(ns, "capacity_tokens", None, 16, 100_000)
        reqs = _seq(ns, "workload", EX3_MAX_REQUESTS)
    except _Missing as e:
        return NOT_YET, str(e)
    policy = ns.get("schedule_policy", "fcfs")
    if policy not in ("fcfs", "lpm"):
        return NOT_YET, f'schedule_policy is {policy!r}; RadixManager knows "fcfs" and "lpm".'
    if not reqs:
        return NOT_YET, "workload is empty: add some Request(rid, arrival, prompt, reply) objects."
    for i, r in enumerate(reqs):
        if not isinstance(r, kvm.Request):
            return NOT_YET, f"workload[{i}] is a {type(r).__name__}, not a Request."
    total = 0
    for r in reqs:
        try:
            total += len(r.prompt) + (r.reply if isinstance(r.reply, int) else len(r.reply))
        except TypeError:
            return NOT_YET, f"Request {r.rid}: prompt must be a list of token ids, reply a list or a length."
    if total > EX3_MAX_TOKENS:
        return NOT_YET, f"The workload has {total:,} tokens; keep it under {EX3_MAX_TOKENS:,} so it runs quickly."
    runs = {}
    for name, mgr in (
        ("RadixManager", lambda: kvm.RadixManager(cap, schedule_policy=policy)),
        ("PagedManager", lambda: kvm.PagedManager(cap)),
    ):
        try:
            runs[name] = kvm.simulate(mgr(), reqs, record_frames=False)["summary"]
        except Exception as e:  # bad requests: duplicate ids, unknown `follows`, ...
            return NOT_YET, f"The simulator refused the workload ({name}): {type(e).__name__}: {e}"
    for name, s in runs.items():
        if s["rejected"]:
            rid, why = next(iter(s["rejected"].items()))
            return NOT_YET, (
                f"{name} rejected request {rid} ({why}). Every request must run under both managers, "
                "or the comparison is not fair."
            )
    radix, paged = runs["RadixManager"]["prefill_computed"], runs["PagedManager"]["prefill_computed"]
    if radix > paged:
        return CORRECT, (
            f"RadixManager computed {radix} prefill tokens, PagedManager {paged}. Can you say which "
            "cached prefix the radix tree gave up, and why paged still had it?"
        )
    hint = (
        f"RadixManager computed {radix} prefill tokens and PagedManager {paged}: radix still wins or ties. "
        "Token-granular reuse only loses when radix evicts a prefix that paged still holds when it is needed. "
    )
    if policy == "fcfs":
        hint += 'Both managers now admit in arrival order; try schedule_policy = "lpm", which reorders the queue. '
    if cap >= total:
        hint += "The pool holds the whole workload at once, so nothing is ever evicted: make it smaller. "
    return NOT_YET, hint.strip()


# ---------------------------------------------------------------------------------------------------------
# Exercise 4: batch size and the ridge
# ---------------------------------------------------------------------------------------------------------
EX4_MODEL, EX4_MACHINE, EX4_QUANT = "llama-3.1-8b", "rtx4060ti", "Q4_K_M"
EX4_MAX_BATCH = 512


@lru_cache(maxsize=16)
def ex4_reference(context: int = 0, n_ctx: int = 8192, profile: str = "measured") -> dict:
    """The knee of decode throughput vs batch with the batched step of `profile` ("measured": llama.cpp's
    kernels, calibrated on llama-batched-bench runs), the first compute-bound batch, and ridge_batch."""
    m, mc = MODELS[EX4_MODEL], MACHINES[EX4_MACHINE]
    p = place(m, mc, EX4_QUANT, n_ctx=n_ctx, profile=profile)
    knee = first_compute = None
    prev = decode_step_time(p, context=context, batch=1, profile=profile)
    for b in range(1, EX4_MAX_BATCH + 1):
        if first_compute is None and prev["gpu_bound"] == "compute":
            first_compute = b
        nxt = decode_step_time(p, context=context, batch=b + 1, profile=profile)
        if knee is None and nxt["tok_per_s"] < 1.01 * prev["tok_per_s"]:
            knee = b
        if knee is not None:
            break
        prev = nxt
    return {
        "knee": knee,
        "first_compute": first_compute,
        "ridge": ridge_batch(mc.gpu, EX4_QUANT, m),
        "ridge_q4k": ridge_batch(mc.gpu, EX4_QUANT),
    }


EX4_WHY = (
    "ridge_batch is the roofline's corner: peak FLOP/s over peak bandwidth. The measured step is llama.cpp's "
    "kernels: up to 8 tokens a mat-vec kernel streams the weights once and each extra sequence costs a little "
    "more; from 9 on, mat-mat tiles do the arithmetic at the prefill rate but stream the weights more slowly, and "
    "memory and compute only partly overlap, so the curve bends gradually instead of at a corner. On an MoE "
    "model the experts a step touches also grow with the batch."
)


def _check_ex4(ns: dict, plots) -> tuple:
    try:
        n_ctx = _int(ns, "n_ctx", 8192, 1, 131072)
        context = _int(ns, "context", 0, 0, n_ctx)
        knee = _number(ns, "knee_batch")
    except _Missing as e:
        return NOT_YET, str(e)
    ref = ex4_reference(context, n_ctx)
    if ref["knee"] is None:
        return NOT_YET, (
            f"At context={context} the KV reads keep every batch up to {EX4_MAX_BATCH} gaining more "
            "than 1% per sequence; use a shorter context to find the knee."
        )
    target = ref["knee"]
    if abs(knee - target) <= max(2, 0.05 * target):
        if not _plotted(plots, 10):
            return NOT_YET, (
                "Your knee_batch is right. Now draw the curve: plot.line(batches, tok_s, ...) "
                '(marks={"knee": knee_batch} draws a line at it).'
            )
        return CORRECT, (
            f"Throughput flattens at batch {knee:g}; ridge_batch says {ref['ridge']:.1f}. Why are they "
            f"different? {EX4_WHY} Look at your curve around batch 8."
        )
    if any(_close(knee, r, 0.04) for r in (ref["ridge"], ref["ridge_q4k"])):
        return NOT_YET, (
            "That is ridge_batch: the roofline with peak FLOP/s and peak bandwidth. decode_step_time's measured "
            "step times llama.cpp's real kernels, so find where its tok/s actually stops rising."
        )
    course = ex4_reference(context, n_ctx, "course")["knee"]
    if course is not None and abs(knee - course) <= max(2, 0.05 * course) and abs(course - target) > 2:
        return NOT_YET, (
            "That is the course profile's knee (70% of peak bandwidth, 50% of peak FLOP/s). Time the batched "
            'step llama.cpp really runs: place(..., profile="measured") and decode_step_time(..., '
            'profile="measured").'
        )
    side = "early" if knee < target else "late"
    return NOT_YET, (
        f"knee_batch = {knee:g} is too {side}. Compute tok_s for batch = 1, 2, 3, ... with "
        f'decode_step_time(p, context=context, batch=b, profile="measured")["tok_per_s"] and take the first b '
        "where b + 1 adds less than 1%."
    )


# ---------------------------------------------------------------------------------------------------------
# The four exercises
# ---------------------------------------------------------------------------------------------------------
_STARTER_1 = """\
from perf_model import MODELS, GB, Device, Machine, DDR5_DUAL, weight_bytes, kv_cache_bytes, place

rtx5090 = Machine("RTX 5090 32 GB + DDR5", Device("RTX 5090", 32, 1792, 209.5), DDR5_DUAL, 63.0)
qwen32 = MODELS["qwen2.5-32b"]
n_ctx = 16 * 1024

# The checker reads these five names when your code has run:
file_gb = None                   # the Q5_K_M file, in GB (1 GB = 1e9 bytes)
kv_gb = None                     # the f16 KV cache for n_ctx tokens, in GB
decode_upper_bound_tok_s = None  # the fastest decode could possibly be, tokens/s
fits_f16 = None                  # True or False: all 65 layers (64 blocks + head) in VRAM, f16 cache
fits_q8_0 = None                 # ... and with a q8_0 cache

print(file_gb, kv_gb, decode_upper_bound_tok_s, fits_f16, fits_q8_0)
"""

_STARTER_2 = """\
from perf_model import MODELS, MACHINES, place, decode_step_time
from enginelab import plot

model, machine = MODELS["qwen2.5-14b"], MACHINES["rtx3060"]
n_ctx = 8192    # the context llama.cpp allocates KV for
context = 0     # tokens already in the conversation when a decode step is timed

ngl_values = list(range(0, 50))   # -ngl 0 .. 49
tok_s = []                        # decode tok/s at each value of ngl_values
# Your implementation here

# plot.line(ngl_values, tok_s, title="...", xlabel="-ngl", ylabel="decode tok/s")
"""

_STARTER_3 = """\
from kv_managers import Request, RadixManager, PagedManager, simulate

capacity_tokens = 384        # KV cells each manager gets
schedule_policy = "fcfs"     # RadixManager's queue order: "fcfs" (arrival) or "lpm" (longest cached prefix)

# Request(rid, arrival_step, prompt_token_ids, reply_length)
workload = [
    Request(0, 0, list(range(1, 41)), 8),
    Request(1, 2, list(range(1, 41)) + [900, 901], 8),
]

radix = simulate(RadixManager(capacity_tokens, schedule_policy=schedule_policy), workload)["summary"]
paged = simulate(PagedManager(capacity_tokens), workload)["summary"]
print("prefill computed: radix", radix["prefill_computed"], " paged", paged["prefill_computed"])
"""

_STARTER_4 = """\
from perf_model import MODELS, MACHINES, place, decode_step_time, ridge_batch
from enginelab import plot

model, machine = MODELS["llama-3.1-8b"], MACHINES["rtx4060ti"]
p = place(model, machine, "Q4_K_M", n_ctx=8192, profile="measured")
context = 0     # KV tokens per sequence

# decode_step_time(p, context=context, batch=b, profile="measured") times one step that decodes b sequences at
# once with llama.cpp's batched kernels (calibrated on published llama-batched-bench runs).
batches = list(range(1, 129))
tok_s = []          # total tok/s (all sequences) at each batch size
knee_batch = None   # the first b where going to b + 1 adds less than 1% throughput
# Your implementation here

# plot.line(batches, tok_s, title="...", xlabel="batch", ylabel="tok/s", marks={"knee": knee_batch})
print("knee:", knee_batch, " ridge_batch:", ridge_batch(machine.gpu, "Q4_K_M", model))
"""

EXERCISES = {
    e.number: e
    for e in [
        Exercise(
            1,
            "Size a deployment",
            (
                "Take Qwen2.5 32B quantized with llama-quantize's Q5_K_M preset and an RTX 5090 (32 GB of VRAM read at "
                "1,792 GB/s). Work out, in code rather than with the calculator, four things: how large the GGUF file "
                "is; how much memory an f16 KV cache for a 16,384-token context takes; the highest decode speed the "
                "card's bandwidth allows; and whether every layer fits in VRAM with an f16 cache, and with a q8_0 cache.",
                "perf_model gives you weight_bytes, kv_cache_bytes and place; the machine is built the same way as in "
                "the module.",
            ),
            (
                ("file_gb", "size of the Q5_K_M file in GB (1e9 bytes)"),
                ("kv_gb", "f16 KV cache for 16,384 tokens, in GB"),
                ("decode_upper_bound_tok_s", "bandwidth-limited decode speed, tokens/s"),
                ("fits_f16", "True or False: all 65 layers on the GPU with an f16 cache"),
                ("fits_q8_0", "True or False: the same with a q8_0 cache"),
            ),
            "file_gb within 2%, kv_gb within 3%, the bound within 5% (at peak or at the module's 70% efficiency, "
            "weights alone or with the KV cache); the two fits exactly.",
            _STARTER_1,
            False,
            _check_ex1,
        ),
        Exercise(
            2,
            "The offload break-even",
            (
                "On an RTX 3060 (12 GB), -ngl decides how many of Qwen2.5 14B's layers (at Q4_K_M) live in VRAM and "
                "how many stay in system RAM. For every -ngl from 0 (all in system RAM) to 49 (all 48 blocks and the output "
                "head on the GPU), place the model with that n_gpu_layers and time one decode step. Draw tok/s "
                "against -ngl.",
                "Then explain what you see: why does the curve climb slowly at first and steeply at the end?",
            ),
            (
                ("ngl_values", "the -ngl values 0 to 49, in order"),
                ("tok_s", "decode tok/s at each of them"),
                ("n_ctx, context", "optional: the checker uses yours (defaults 8192 and 0)"),
            ),
            "every point within 1% of place + decode_step_time at your n_ctx and context; a plot.line chart drawn.",
            _STARTER_2,
            True,
            _check_ex2,
        ),
        Exercise(
            3,
            "Make the radix cache lose",
            (
                "SGLang's radix tree usually reuses more of a prompt than vLLM's 16-token blocks, because it matches "
                "prefixes token by token. Build a workload, a list of Request objects, on which RadixManager ends up "
                "computing more prefill tokens than PagedManager (with prefix caching) given the same number of KV cells.",
                "A nudge: think about what a small pool has to throw away, and what happens when the scheduler runs "
                "requests in a different order from the one they arrived in.",
            ),
            (
                ("workload", "a list of Request"),
                ("capacity_tokens", "KV cells for each manager (16 to 100,000)"),
                ("schedule_policy", '"fcfs" or "lpm" for RadixManager (default "fcfs")'),
            ),
            "the checker runs both managers on your workload with simulate(); radix's prefill_computed must be "
            "larger than paged's, with no request rejected.",
            _STARTER_3,
            False,
            _check_ex3,
        ),
        Exercise(
            4,
            "Batch size and the ridge",
            (
                "A serving engine decodes many sequences in one forward pass. decode_step_time(..., batch=b, "
                'profile="measured") times that pass as llama.cpp runs it, calibrated on published '
                "llama-batched-bench runs: the weights are read once per step, each sequence's KV cache once, and the "
                "arithmetic grows with the batch. For Llama 3.1 8B at Q4_K_M on an RTX 4060 Ti, find the batch size "
                "after which adding sequences stops paying: the first batch b where b + 1 sequences give less than 1% "
                "more tokens per second.",
                "Plot throughput against batch size and compare your answer with ridge_batch, the roofline's corner. "
                "The real knee differs from it: llama.cpp's kernels switch from mat-vec to mat-mat at 8 tokens, the "
                "mat-mat tiles stream the weights more slowly than the mat-vec kernels do, memory and compute only "
                "partly overlap, and on an MoE model the experts a step touches grow with the batch. Where on your "
                "curve do you see each?",
            ),
            (
                ("knee_batch", "the first b where b + 1 adds less than 1% throughput"),
                ("context, n_ctx", "optional: the checker uses yours (defaults 0 and 8192)"),
            ),
            "within 2 batches (or 5%) of the knee of decode_step_time's measured curve; a plot.line chart drawn.",
            _STARTER_4,
            True,
            _check_ex4,
        ),
    ]
}


def check(n: int, namespace: dict, plots=()) -> tuple:
    """(CORRECT | NOT_YET, hint) for exercise n, from the names a run left in `namespace`."""
    ex = EXERCISES[n]
    try:
        return ex.check(namespace, list(plots))
    except Exception as e:  # the checker must never take the page down with it
        return NOT_YET, f"The checker could not read your answer ({type(e).__name__}: {e})."


# ---------------------------------------------------------------------------------------------------------
# Running a cell
# ---------------------------------------------------------------------------------------------------------
class _Capped(io.StringIO):
    """Captured stdout/stderr, cut off (with a note) after MAX_OUTPUT_CHARS."""

    def __init__(self):
        super().__init__()
        self.n = 0
        self.cut = False

    def write(self, s) -> int:
        s = str(s)
        if self.cut:
            return len(s)
        room = MAX_OUTPUT_CHARS - self.n
        if len(s) > room:
            super().write(s[:room] + f"\n… output cut at {MAX_OUTPUT_CHARS:,} characters\n")
            self.cut = True
        else:
            super().write(s)
        self.n += len(s)
        return len(s)


def cell_filename(n: int) -> str:
    return f"<exercise {n}>"


def format_error(exc: BaseException, filename: str) -> str:
    """A traceback that starts at the learner's code (the runner's own frames are left out)."""
    if isinstance(exc, SyntaxError):
        return "".join(traceback.format_exception_only(type(exc), exc))
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    if tb is None:
        tb = exc.__traceback__
    return "".join(traceback.format_exception(type(exc), exc, tb))


# A cell may rebind or mutate the course modules (perf_model.decode_step_time = ..., MODELS[...] = ...). The
# worker keeps one interpreter for every cell and run, so after each run these modules' globals are put back
# as they were: a rebound or deleted name is restored, and so is a changed or deleted entry of a module-level
# dict or list (entries added since, such as cache fills, are kept).
# enginelab.svg and enginelab.chart draw the charts: restored too, so the charts are drawn again (plot.rebuild)
# by the library's own code, whatever the cell did to it.
COURSE_MODULES = ("perf_model", "inference_trace", "kv_managers", "enginelab.plot", "enginelab.svg", "enginelab.chart")


@cache
def _pristine() -> dict:
    import importlib
    import sys

    for name in COURSE_MODULES:
        importlib.import_module(name)
    # a course module that is a package (perf_model) is restored with every submodule it loaded
    names = [n for n in sys.modules if n in COURSE_MODULES or n.split(".")[0] in ("perf_model", "kv_managers")]
    snap = {}
    for name in sorted(names):
        mod = sys.modules[name]
        g = dict(vars(mod))
        inner = {
            k: (dict(v) if isinstance(v, dict) else list(v))
            for k, v in g.items()
            if type(v) in (dict, list) and not k.startswith("__")
        }
        snap[name] = (mod, g, inner)
    return snap


def restore_course_modules() -> None:
    """Undo what a cell did to the course modules' globals (see COURSE_MODULES)."""
    for mod, g, inner in _pristine().values():
        live = vars(mod)
        for k in [k for k in live if k not in g]:
            del live[k]
        for k, v in g.items():
            if live.get(k, _SENTINEL) is not v:
                live[k] = v
        for k, saved in inner.items():
            cur = live[k]
            if isinstance(saved, dict):
                for kk, vv in saved.items():
                    if cur.get(kk, _SENTINEL) is not vv:
                        cur[kk] = vv
            elif cur != saved:
                cur[:] = saved


_SENTINEL = object()


def run_cell(n: int, code: str) -> dict:
    """Run a learner's cell for exercise n and check it.

    Returns {"exercise", "stdout", "stderr", "error" (traceback text or None), "plots" (HTML strings),
    "verdict" ("correct" | "not yet"), "hint", "run_ms", "check_ms"}."""
    import contextlib

    if n not in EXERCISES:
        raise KeyError(f"unknown exercise {n!r}; there are {', '.join(map(str, EXERCISES))}")
    filename = cell_filename(n)
    code = str(code)
    lines = code.splitlines(keepends=True)
    linecache.cache[filename] = (len(code), None, lines, filename)  # source lines in the traceback
    _pristine()  # the course modules as they are before any cell ran
    out, err = _Capped(), _Capped()
    ns = {"__name__": "__main__", "__builtins__": builtins}
    error = None
    t0 = time.perf_counter()
    with plot.capture() as shown:
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                exec(compile(code, filename, "exec"), ns)
        except BaseException as e:  # SystemExit and KeyboardInterrupt too: the page must keep working
            error = format_error(e, filename)
        finally:
            restore_course_modules()
    # the charts, drawn again from their data by the restored library: no markup the cell made is shown
    charts = [c for c in map(plot.rebuild, shown) if c is not None]
    t1 = time.perf_counter()
    if error is not None:
        verdict, hint = NOT_YET, "Your code stopped with an error (above); fix it and run again."
    else:
        verdict, hint = check(n, ns, charts)
    t2 = time.perf_counter()
    return {
        "exercise": n,
        "stdout": out.getvalue(),
        "stderr": err.getvalue(),
        "error": error,
        "plots": [c.html() for c in charts],
        "verdict": verdict,
        "hint": hint,
        "run_ms": (t1 - t0) * 1e3,
        "check_ms": (t2 - t1) * 1e3,
    }


def warm() -> None:
    """Compute what the checkers compare against (and the placement plans they share) ahead of a first run."""
    import kv_managers  # noqa: F401  (exercise 3's import, done ahead)

    _ex1_reference()
    ex2_reference(8192, 0)  # the arguments as the checkers pass them (lru_cache keys on them)
    ex4_reference(0, 8192)


# ---------------------------------------------------------------------------------------------------------
# The page's cells (build time)
# ---------------------------------------------------------------------------------------------------------
def _script_text(code: str, what: str) -> str:
    """Code placed verbatim inside a <script> element: it must not be able to close the element."""
    if "</script" in code.lower() or "<!--" in code:
        raise ValueError(f"{what} contains '</script' or '<!--', which cannot sit inside a <script> element")
    return code


def render_cells(env: str = "lab") -> str:
    """The HTML of every exercise: task, names, the py-editor cell, its buttons and its output area."""
    from .svg import Raw, el

    out = []
    for n, ex in EXERCISES.items():
        starter = _script_text(ex.starter, f"exercise {n}'s starter")
        solution = _script_text(ex.solution, f"exercise {n}'s solution")
        names = el("ul", [el("li", [el("code", name), ": ", what]) for name, what in ex.names])
        out.append(
            el(
                "section",
                [
                    el("h2", f"Exercise {n}: {ex.title}", id_=f"ex{n}-title"),
                    el("div", [el("p", para) for para in ex.task], class_="ex-task"),
                    el(
                        "details",
                        [
                            el("summary", "What the checker reads"),
                            names,
                            el("p", [el("strong", "Tolerance: "), ex.tolerance]),
                        ],
                        class_="ex-names",
                    ),
                    Raw(
                        f'<script type="py-editor" env="{env}" id="ex{n}-editor" data-exercise="{n}">\n{starter}</script>'
                    ),
                    el("noscript", el("pre", el("code", ex.starter), class_="ex-static")),
                    el(
                        "div",
                        [
                            el(
                                "button",
                                "Run",
                                type="button",
                                data_action="run",
                                disabled=True,
                                aria_describedby=f"ex{n}-keys",
                            ),
                            el("button", "Reset", type="button", data_action="reset", disabled=True),
                            el("button", "Show a solution", type="button", data_action="solution", disabled=True),
                            el("button", "Stop", type="button", data_action="stop", hidden=True),
                            el(
                                "span",
                                "In the editor: Ctrl+Enter or Shift+Enter runs the cell; Esc, then Tab, leaves it.",
                                id_=f"ex{n}-keys",
                                class_="ex-keys",
                            ),
                            el("span", "", class_="ex-state", role="status", aria_live="polite"),
                        ],
                        class_="ex-toolbar",
                        role="group",
                        aria_label=f"Exercise {n}",
                    ),
                    el("div", "", class_="ex-output", id_=f"ex{n}-output"),
                    Raw(f'<script type="text/x-python" id="ex{n}-starter">\n{starter}</script>'),
                    Raw(f'<script type="text/x-python" id="ex{n}-solution">\n{solution}</script>'),
                ],
                class_="exercise",
                id_=f"ex{n}",
                data_exercise=n,
                data_wants_plot="true" if ex.wants_plot else "false",
                aria_labelledby=f"ex{n}-title",
            )
        )
    return "\n".join(out)
