"""The advisor's setups and outcomes: what it varies, what perf_model predicts for it, and one change re-run.

A Setup is perf_model's placement inputs plus the workload (threads, slots, users); evaluate() places and
times it; try_change() edits one knob, evaluates again and keeps the edit when it gains. Every diagnosis
(enginelab.advisor.diagnosis) and recipe (enginelab.advisor.recipes) is built from these.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import perf_model as pm

from .. import gpus as gpu_keys
from ..checks import brief, check_bool, check_int

MIN_GAIN = 1.01  # a change must buy at least 1% to be suggested


def check(cond: bool, arg: str, msg: str) -> None:
    """ValueError naming the argument, as every course function does."""
    if not cond:
        raise ValueError(f"{arg}: {msg}")


# ---------------------------------------------------------------------------
# CPU threads
# ---------------------------------------------------------------------------
# perf_model times the CPU part of decode at ETA_DECODE of the RAM bandwidth,
# which is what llama.cpp reaches with its default -t (the physical cores).
# The advisor models the thread count around that default:
#   * below BUS_SATURATION of the performance cores the bus is under-used:
#     time x (saturating threads / t);
#   * between that and the performance cores: no change (memory-bound);
#   * every thread beyond the performance cores (an SMT sibling or an
#     efficiency core) adds contention: ggml splits each matmul evenly and
#     waits at a barrier for the slowest thread, and the extra threads evict
#     each other's cache lines.  Time x (1 + THREAD_CONTENTION * extra / P).
# THREAD_CONTENTION = 0.4 is an assumption in the range users report for
# "-t = all logical threads" (10-50% slower generation), not a measurement.
THREAD_CONTENTION = 0.4
BUS_SATURATION = 0.5
# Assumed cores per machine: (performance cores, logical threads).  Desktop x86
# hosts: an 8-core SMT CPU (16 threads).  M4 Pro 14-core CPU: 10 performance +
# 4 efficiency cores; M4 Max 16-core CPU: 12 + 4 (apple.com/macbook-pro/specs).
CPU_CORES = {"m4pro": (10, 14), "m4max": (12, 16)}
CPU_CORES_DEFAULT = (8, 16)
MAX_THREADS = 1024  # -t, performance cores
MAX_USERS = 1 << 16  # -np slots, concurrent users


def cpu_cores(machine) -> tuple:
    """(performance cores, logical threads) assumed for a machine."""
    mc = pm.get_machine(machine)
    return CPU_CORES.get(mc.key, CPU_CORES_DEFAULT)


def thread_factor(n_threads, perf_cores: int) -> float:
    """How much longer the CPU part of a decode step takes with n_threads (1.0 = llama.cpp's default)."""
    if n_threads is None:
        return 1.0
    check_int(n_threads, "n_threads", 1, MAX_THREADS)
    check_int(perf_cores, "perf_cores", 1, MAX_THREADS)
    sat = max(1, int(perf_cores * BUS_SATURATION))
    if n_threads < sat:
        return sat / n_threads
    if n_threads <= perf_cores:
        return 1.0
    return 1.0 + THREAD_CONTENTION * (n_threads - perf_cores) / perf_cores


# ---------------------------------------------------------------------------
# Setups
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    """Everything the advisor varies: perf_model's placement inputs plus the workload."""

    model: pm.Model
    machine: pm.Machine
    quant: str | None
    kv: str = "f16"
    ctx: int = 8192
    ngl: int | None = None  # None: --fit chooses (-ngl auto)
    n_cpu_moe: int = 0
    n_ubatch: int = pm.N_UBATCH_DEFAULT
    n_batch: int = pm.N_BATCH_DEFAULT
    tokens: int = 2000  # context at which decode is timed
    prompt: int = 2000  # prompt length for prefill
    threads: int | None = None  # None: llama.cpp's default (physical cores)
    perf_cores: int = 8
    n_parallel: int = 1  # llama.cpp -np slots
    users: int = 1  # concurrent requests the workload makes
    op_offload: bool = True
    profile: str = "course"  # perf_model's speed profile ("measured": fitted on llama-bench runs, threads modelled)
    # several GPUs (perf_model section 6b): llama.cpp's -ts, -sm, -mg
    tensor_split: tuple | None = None
    split_mode: str = "layer"
    main_gpu: int = 0

    def changed(self, **kw) -> Setup:
        return replace(self, **kw)

    def split(self) -> dict:
        """place()'s multi-GPU arguments (none on a machine with one GPU)."""
        if not self.machine.multi_gpu:
            return {}
        return {"tensor_split": self.tensor_split, "split_mode": self.split_mode, "main_gpu": self.main_gpu}

    def state(self) -> dict:
        """The calculator/advisor URL state for this setup."""
        host = pm.MACHINES.get(self.machine.key, self.machine)
        return {
            **gpu_keys.state_values(self.machine, host, self.split()),
            "model": self.model.key,
            "machine": self.machine.key,
            "quant": self.quant,
            "kv": self.kv,
            "ctx": self.ctx,
            "ngl": "auto" if self.ngl is None else self.ngl,
            "tokens": self.tokens,
            "n_cpu_moe": self.n_cpu_moe,
            "threads": "auto" if self.threads is None else self.threads,
            "np": self.n_parallel,
            "users": self.users,
            "ub": self.n_ubatch,
            "b": self.n_batch,
            "profile": self.profile,
        }


def _state_int(get, key: str, default, lo: int, hi: int, auto: bool = False):
    """An integer from a state: an int, or a string of digits (URL values); "auto"/None where allowed."""
    v = get(key, default)
    if auto and v in (None, "auto"):
        return None
    if isinstance(v, str) and v.strip().isdigit() and len(v.strip()) <= 12:
        v = int(v.strip())
    return check_int(v, key, lo, hi)


def _state_profile(get) -> str:
    v = get("profile", "course")
    check(v in ("course", "measured"), "profile", f"must be 'course' or 'measured', got {brief(v)}")
    return v


def setup_from_state(state) -> Setup:
    """A Setup from a state dict (or an object with those attributes); unknown keys are ignored."""
    check(
        isinstance(state, dict) or hasattr(state, "model"),
        "state",
        f"must be a state dict (model, machine, quant, ...), got {brief(state)}",
    )
    get = (lambda k, d=None: state.get(k, d)) if isinstance(state, dict) else (lambda k, d=None: getattr(state, k, d))
    model = pm.get_model(get("model"))
    host = pm.get_machine(get("machine"))
    values = {k: get(k, d) for k, d in gpu_keys.DEFAULTS.items()}
    machine = gpu_keys.machine_with_gpus(host, values)  # the state's GPUs (enginelab.gpus), if it lists some
    split = gpu_keys.split_args(values, machine)
    mx = pm.MAX_CONTEXT
    tokens = _state_int(get, "tokens", 2000, 0, mx)
    return Setup(
        model=model,
        machine=machine,
        quant=get("quant", "Q4_K_M"),
        kv=get("kv", "f16"),
        ctx=_state_int(get, "ctx", 8192, 0, mx) or model.max_position_embeddings,  # -c 0: the trained context
        ngl=_state_int(get, "ngl", "auto", 0, model.n_layers + 1, auto=True),
        n_cpu_moe=_state_int(get, "n_cpu_moe", 0, 0, model.n_layers) if get("n_cpu_moe", 0) else 0,
        n_ubatch=_state_int(get, "ub", pm.N_UBATCH_DEFAULT, 1, mx),
        n_batch=_state_int(get, "b", pm.N_BATCH_DEFAULT, 1, mx),
        tokens=tokens,
        prompt=_state_int(get, "prompt", tokens, 0, mx),
        threads=_state_int(get, "threads", "auto", 1, MAX_THREADS, auto=True),
        perf_cores=cpu_cores(machine)[0],
        n_parallel=_state_int(get, "np", 1, 1, MAX_USERS) if get("np", 1) else 1,
        users=_state_int(get, "users", 1, 1, MAX_USERS) if get("users", 1) else 1,
        profile=_state_profile(get),
        tensor_split=split.get("tensor_split"),
        split_mode=split.get("split_mode", "layer"),
        main_gpu=split.get("main_gpu", 0),
    )


def setup_from_placement(
    placement,
    machine=None,
    context: int = 2000,
    prompt_tokens=None,
    n_parallel: int = 1,
    n_threads=None,
    concurrent_users=None,
    perf_cores=None,
    op_offload: bool = True,
) -> Setup:
    check(isinstance(placement, pm.Placement), "placement", "must be a perf_model.Placement (from place())")
    mc = placement.machine if machine is None else pm.get_machine(machine)
    check_int(context, "context", 0, pm.MAX_CONTEXT)
    check_int(n_parallel, "n_parallel", 1, MAX_USERS)
    users = n_parallel if concurrent_users is None else concurrent_users
    check_int(users, "concurrent_users", 1, MAX_USERS)
    if prompt_tokens is not None:
        check_int(prompt_tokens, "prompt_tokens", 1, pm.MAX_CONTEXT)
    if n_threads is not None:
        check_int(n_threads, "n_threads", 1, MAX_THREADS)
    if perf_cores is not None:
        check_int(perf_cores, "perf_cores", 1, MAX_THREADS)
    check_bool(op_offload, "op_offload")
    return Setup(
        model=placement.model,
        machine=mc,
        quant=placement.quant,
        kv=placement.kv_type,
        ctx=placement.n_ctx,
        ngl=None if placement.auto else placement.n_gpu_layers,
        n_cpu_moe=placement.n_cpu_moe,
        n_ubatch=placement.n_ubatch,
        tokens=context,
        prompt=max(1, context if prompt_tokens is None else prompt_tokens),
        threads=n_threads,
        perf_cores=perf_cores or cpu_cores(mc)[0],
        n_parallel=n_parallel,
        users=users,
        op_offload=op_offload,
        profile=placement.profile,
        tensor_split=None if placement.fit_wrote_split else (placement.tensor_split or None),
        split_mode=placement.split_mode,
        main_gpu=placement.main_gpu,
    )


# ---------------------------------------------------------------------------
# Outcomes
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    placement: pm.Placement
    fits: bool
    ngl: int
    gpu_layers: int
    vram: float  # bytes on the GPU (weights + KV + compute)
    ram: float
    decode_tok_s: float | None  # one sequence at `tokens` of context, threads applied
    prefill_tok_s: float | None
    prefill_s: float | None
    cpu_share: float | None
    aggregate_tok_s: float | None  # all active sequences (min(users, slots, what the KV pool holds))
    active: int = 1
    decode: dict | None = None
    prefill: dict | None = None

    def summary(self) -> dict:
        return {
            "fits": self.fits,
            "n_gpu_layers": self.ngl,
            "gpu_layers": self.gpu_layers,
            "vram_gb": self.vram / pm.GB,
            "ram_gb": self.ram / pm.GB,
            "decode_tok_s": self.decode_tok_s,
            "prefill_tok_s": self.prefill_tok_s,
            "cpu_share": self.cpu_share,
            "aggregate_tok_s": self.aggregate_tok_s,
            "active": self.active,
        }


def place_setup(s: Setup) -> pm.Placement:
    return pm.place(
        s.model,
        s.machine,
        s.quant,
        n_ctx=s.ctx,
        kv_type=s.kv,
        n_gpu_layers=s.ngl,
        n_cpu_moe=s.n_cpu_moe,
        n_ubatch=s.n_ubatch,
        profile=s.profile,
        **s.split(),
    )


def decode_setup(p: pm.Placement, s: Setup, context: int, batch: int = 1) -> dict:
    """perf_model's decode step with the CPU part scaled by the thread model. The measured profile models
    threads itself (bandwidth per thread, dequantization per core): it gets -t as n_threads instead."""
    if s.profile == "measured":
        return pm.decode_step_time(p, s.machine, context=context, batch=batch, n_threads=s.threads)
    d = pm.decode_step_time(p, s.machine, context=context, batch=batch)
    f = thread_factor(s.threads, s.perf_cores)
    if f != 1.0 and d["cpu_s"] > 0:
        d = dict(d)
        d["cpu_s"] *= f
        d["total_s"] = d["gpu_s"] + d["cpu_s"] + d.get("link_s", 0.0) + d["overhead_s"]
        d["tok_per_s"] = batch / d["total_s"]
        d["seq_tok_per_s"] = 1.0 / d["total_s"]
        d["cpu_share"] = d["cpu_s"] / d["total_s"]
    return d


def slots_active(s: Setup) -> int:
    """Sequences decoding together: the users, capped by the slots and by what the KV pool holds."""
    by_pool = max(1, s.ctx // max(1, s.tokens))  # -c is shared by all slots (unified KV)
    return max(1, min(s.users, s.n_parallel, by_pool))


def evaluate(s: Setup, prefill: bool = True, known=None) -> Outcome:
    """perf_model's prediction for a setup (None speeds where it would not load).

    prefill=False skips the prompt timing (the slowest part to compute) when only decode matters.
    known: (placement, decode, prefill) that the caller already computed for this very setup (the
    calculator's Scenario), so the setup is placed and timed once; the decode is reused only when the thread
    model leaves it unchanged."""
    check(isinstance(s, Setup), "s", f"must be an advisor Setup, got {brief(s)}")
    check_bool(prefill, "prefill")
    k_place, k_decode, k_prefill = known if known is not None else (None, None, None)
    p = k_place if k_place is not None else place_setup(s)
    base = dict(
        placement=p, fits=p.fits, ngl=p.n_gpu_layers, gpu_layers=p.gpu_layers, vram=p.gpu_total, ram=p.cpu_total
    )
    if not p.fits:
        return Outcome(
            decode_tok_s=None,
            prefill_tok_s=None,
            prefill_s=None,
            cpu_share=None,
            aggregate_tok_s=None,
            active=0,
            **base,
        )
    same_threads = s.profile == "measured" or thread_factor(s.threads, s.perf_cores) == 1.0
    d = k_decode if (k_decode is not None and same_threads) else decode_setup(p, s, s.tokens)
    f = {"tok_per_s": None, "total_s": None}
    if prefill and k_prefill is not None:
        f = k_prefill
    elif prefill:
        # unified memory has no PCIe link to copy over (pcie_gbs = 0): no op offload to time
        f = pm.prefill_time(
            p,
            s.machine,
            n_tokens=max(1, s.prompt),
            n_batch=max(s.n_batch, s.n_ubatch),
            op_offload=s.op_offload and s.machine.pcie_gbs > 0,
            n_threads=s.threads if s.profile == "measured" else None,
        )
    active = slots_active(s)
    agg = decode_setup(p, s, s.tokens, batch=active)["tok_per_s"] if active > 1 else d["tok_per_s"]
    return Outcome(
        decode_tok_s=d["tok_per_s"],
        prefill_tok_s=f["tok_per_s"],
        prefill_s=f["total_s"],
        cpu_share=d["cpu_share"],
        aggregate_tok_s=agg,
        active=active,
        decode=d,
        prefill=f,
        **base,
    )


# ---------------------------------------------------------------------------
# Changes
# ---------------------------------------------------------------------------


@dataclass
class Change:
    title: str  # short: "-ctk q8_0 -ctv q8_0 -fa on"
    flags: dict  # engine -> exact flags: {"llama.cpp": ..., "vLLM": ..., "SGLang": ...}
    apply: dict  # state keys to set (the calculator's URL state)
    before: dict
    after: dict
    metric: str = "decode_tok_s"  # what the gain is measured in
    gain: float = 0.0  # after - before in `metric` (before = 0 when it did not load)
    effect: str = ""  # "+2 layers on GPU, 5.8 → 6.1 tok/s"
    note: str = ""  # the trade-off

    def as_dict(self) -> dict:
        return {
            "title": self.title,
            "flags": dict(self.flags),
            "apply": dict(self.apply),
            "before": dict(self.before),
            "after": dict(self.after),
            "metric": self.metric,
            "gain": self.gain,
            "effect": self.effect,
            "note": self.note,
        }


@dataclass
class Finding:
    cause: str  # one of CAUSES
    title: str
    evidence: dict  # numbers (raw, SI units) behind the diagnosis
    evidence_text: list  # the same numbers, as sentences
    changes: list = field(default_factory=list)
    severity: float = 0.0  # for ranking findings: the best change's relative gain

    def as_dict(self) -> dict:
        return {
            "cause": self.cause,
            "title": self.title,
            "evidence": dict(self.evidence),
            "evidence_text": list(self.evidence_text),
            "changes": [c.as_dict() for c in self.changes],
            "severity": self.severity,
        }


def rate_text(v) -> str:
    if v is None:
        return "does not load"
    if v >= 100:
        return f"{v:,.0f} tok/s"
    return f"{v:.1f} tok/s" if v >= 1 else f"{v:.2f} tok/s"


def pct_text(v) -> str:
    return "—" if v is None else f"{v:.0%}"


def gb_text(b: float) -> str:
    return f"{b / pm.GB:.1f} GB"


def _effect(before: Outcome, after: Outcome, metric: str) -> str:
    parts = []
    dl = after.gpu_layers - before.gpu_layers
    if after.fits and before.fits and dl:
        parts.append(f"{dl:+d} layers on GPU")
    if not before.fits and after.fits:
        return (
            f"does not load → loads with -ngl {after.ngl} ({gb_text(after.vram)} VRAM), "
            f"{rate_text(_metric(after, metric))}"
            + (" in all" if metric == "aggregate_tok_s" else "")
            + (" prompt" if metric == "prefill_tok_s" else "")
        )
    if metric == "prefill_tok_s":
        parts.append(f"prompt {rate_text(before.prefill_tok_s)} → {rate_text(after.prefill_tok_s)}")
        if (
            before.decode_tok_s
            and after.decode_tok_s
            and rate_text(before.decode_tok_s) != rate_text(after.decode_tok_s)
        ):
            parts.append(f"decode {rate_text(before.decode_tok_s)} → {rate_text(after.decode_tok_s)}")
    elif metric == "aggregate_tok_s":
        parts.append(
            f"{before.active} → {after.active} sequences at once, "
            f"{rate_text(before.aggregate_tok_s)} → {rate_text(after.aggregate_tok_s)} in all"
        )
    else:
        parts.append(f"{rate_text(before.decode_tok_s)} → {rate_text(after.decode_tok_s)}")
    if (
        after.fits
        and after.placement.gpu_layers == after.placement.n_layers
        and after.placement.output_on_gpu
        and not (before.fits and before.placement.full_offload)
    ):
        parts.append("fits entirely on the GPU")
    return ", ".join(parts)


def _metric(o: Outcome, metric: str) -> float:
    v = getattr(o, metric)
    return 0.0 if v is None else v


def try_change(
    base: Setup,
    base_out: Outcome,
    title: str,
    flags: dict,
    apply: dict,
    edits: dict,
    metric: str = "decode_tok_s",
    note: str = "",
) -> Change | None:
    """Apply `edits` to the setup, re-run perf_model, and keep the change if it fits and gains."""
    try:
        new = base.changed(**edits)
        out = evaluate(new, prefill=metric == "prefill_tok_s")
    except ValueError:
        return None
    if not out.fits:
        return None
    if apply.get("ngl") == "auto" and "-ngl" not in title:
        title += " -ngl auto"
        flags = {**flags, "llama.cpp": flags.get("llama.cpp", "") + " -ngl auto"}
    b, a = _metric(base_out, metric), _metric(out, metric)
    if base_out.fits and a < b * MIN_GAIN:
        return None
    return Change(
        title=title,
        flags=flags,
        apply=apply,
        before=base_out.summary(),
        after=out.summary(),
        metric=metric,
        gain=a - b,
        effect=_effect(base_out, out, metric),
        note=note,
    )


# Flags per change kind --------------------------------------------------------


def kv_flags(kv: str) -> dict:
    vllm = {"q8_0": "--kv-cache-dtype fp8", "q4_0": "--kv-cache-dtype fp8 (vLLM has no 4-bit KV cache)"}
    sgl = {"q8_0": "--kv-cache-dtype fp8_e4m3", "q4_0": "--kv-cache-dtype fp8_e4m3"}
    return {
        "llama.cpp": f"-ctk {kv} -ctv {kv} -fa on",
        "vLLM": vllm.get(kv, "--kv-cache-dtype auto"),
        "SGLang": sgl.get(kv, "--kv-cache-dtype auto"),
    }


def ctx_flags(n: int) -> dict:
    return {"llama.cpp": f"-c {n}", "vLLM": f"--max-model-len {n}", "SGLang": f"--context-length {n}"}


def with_ngl(s: Setup, edits: dict, apply: dict) -> tuple:
    """Keep -ngl auto when the user has it; otherwise let --fit re-choose and write the number out."""
    if s.ngl is None:
        return edits, apply
    return {**edits, "ngl": None}, {**apply, "ngl": "auto"}
