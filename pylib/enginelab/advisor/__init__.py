"""advisor: diagnose a local inference setup and say which flags fix it.

The course library's bottleneck advisor, built only on perf_model's public
functions (place, decode_step_time, prefill_time, kv_cache_bytes, weight_bytes,
quantize_plan, the MODELS / MACHINES / QUANT_PRESETS / KV_TYPES catalogs).
Every predicted effect is computed by changing the setup and running the model
again, never by a rule of thumb.  Read it top to bottom:

  1. Setups: a placement plus the knobs perf_model does not hold (threads, slots, users)
  2. Outcomes: what perf_model predicts for a setup
  3. CPU threads: a small contention model (the one thing perf_model does not time)
  4. Changes: one edit of the setup, re-run, before/after
  5. The diagnoses, one per row of the module's "Where Bottlenecks Happen" table
  6. advise(): run them all, rank by gain
  7. Tuning recipes: recipe(goal, model, machine)
  8. Fine-tuned models: lora_cost()
  9. Speculative decoding: speculative()

Vocabulary is the engines' own: n_ctx (-c), n_gpu_layers (-ngl), n_cpu_moe,
type_k/type_v (-ctk/-ctv), n_parallel (-np), n_threads (-t), n_ubatch (-ub).

A "state" is the calculator's URL state as a dict: model, machine, quant, kv,
ctx, ngl ("auto" or a number), tokens, n_cpu_moe; the advisor adds threads,
np (slots), users, ub (-ub) and b (-b).  Every change carries an `apply` dict in those keys, so
the app can apply it with one click.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import perf_model as pm

# ---------------------------------------------------------------------------
# Thresholds: when a symptom counts as a bottleneck (choices, not measurements)
# ---------------------------------------------------------------------------
KV_LONG_CONTEXT_SHARE = 0.25   # KV bytes read per token >= 25% of the weight bytes read
PCIE_PREFILL_SHARE = 0.15      # PCIe weight copies >= 15% of the prompt's processing time
PREFILL_SLOW_S = 1.0           # ...and the prompt takes at least a second
MIN_GAIN = 1.01                # a change must buy at least 1% to be suggested
QUALITY_FLOOR_BPW = 3.0        # smaller quants (and the Q2_K mixes) are not suggested: quality drops steeply
CTX_LADDER = (4096, 8192, 16384, 32768, 65536, 131072)

CAUSES = ("over_ask", "partial_offload", "kv_competes", "kv_overflow_long_context",
          "pp_bound_by_pcie", "too_many_threads", "concurrency_cap")

# ---------------------------------------------------------------------------
# 3 (constants). CPU threads
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


def cpu_cores(machine) -> tuple:
    """(performance cores, logical threads) assumed for a machine."""
    mc = pm.get_machine(machine)
    return CPU_CORES.get(mc.key, CPU_CORES_DEFAULT)


def thread_factor(n_threads, perf_cores: int) -> float:
    """How much longer the CPU part of a decode step takes with n_threads (1.0 = llama.cpp's default)."""
    if n_threads is None:
        return 1.0
    _check(isinstance(n_threads, int) and not isinstance(n_threads, bool) and n_threads >= 1, "n_threads",
           f"must be a positive integer, got {n_threads!r}")
    sat = max(1, int(perf_cores * BUS_SATURATION))
    if n_threads < sat:
        return sat / n_threads
    if n_threads <= perf_cores:
        return 1.0
    return 1.0 + THREAD_CONTENTION * (n_threads - perf_cores) / perf_cores


def _check(cond: bool, arg: str, msg: str) -> None:
    if not cond:
        raise ValueError(f"{arg}: {msg}")


# ---------------------------------------------------------------------------
# 1. Setups
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Setup:
    """Everything the advisor varies: perf_model's placement inputs plus the workload."""
    model: pm.Model
    machine: pm.Machine
    quant: str | None
    kv: str = "f16"
    ctx: int = 8192
    ngl: int | None = None          # None: --fit chooses (-ngl auto)
    n_cpu_moe: int = 0
    n_ubatch: int = pm.N_UBATCH_DEFAULT
    n_batch: int = pm.N_BATCH_DEFAULT
    tokens: int = 2000              # context at which decode is timed
    prompt: int = 2000              # prompt length for prefill
    threads: int | None = None      # None: llama.cpp's default (physical cores)
    perf_cores: int = 8
    n_parallel: int = 1             # llama.cpp -np slots
    users: int = 1                  # concurrent requests the workload makes
    op_offload: bool = True

    def changed(self, **kw) -> "Setup":
        return replace(self, **kw)

    def state(self) -> dict:
        """The calculator/advisor URL state for this setup."""
        return {"model": self.model.key, "machine": self.machine.key, "quant": self.quant, "kv": self.kv,
                "ctx": self.ctx, "ngl": "auto" if self.ngl is None else self.ngl, "tokens": self.tokens,
                "n_cpu_moe": self.n_cpu_moe, "threads": "auto" if self.threads is None else self.threads,
                "np": self.n_parallel, "users": self.users, "ub": self.n_ubatch, "b": self.n_batch}


def setup_from_state(state) -> Setup:
    """A Setup from a state dict (or an object with those attributes); unknown keys are ignored."""
    get = (lambda k, d=None: state.get(k, d)) if isinstance(state, dict) else \
        (lambda k, d=None: getattr(state, k, d))
    model, machine = pm.get_model(get("model")), pm.get_machine(get("machine"))
    ngl = get("ngl", "auto")
    threads = get("threads", "auto")
    tokens = int(get("tokens", 2000))
    return Setup(model=model, machine=machine, quant=get("quant", "Q4_K_M"), kv=get("kv", "f16"),
                 ctx=int(get("ctx", 8192)), ngl=None if ngl in (None, "auto") else int(ngl),
                 n_cpu_moe=int(get("n_cpu_moe", 0) or 0), n_ubatch=int(get("ub", pm.N_UBATCH_DEFAULT)),
                 n_batch=int(get("b", pm.N_BATCH_DEFAULT)), tokens=tokens, prompt=int(get("prompt", tokens)),
                 threads=None if threads in (None, "auto") else int(threads), perf_cores=cpu_cores(machine)[0],
                 n_parallel=int(get("np", 1) or 1), users=int(get("users", 1) or 1))


def setup_from_placement(placement, machine=None, context: int = 2000, prompt_tokens=None, n_parallel: int = 1,
                         n_threads=None, concurrent_users=None, perf_cores=None, op_offload: bool = True) -> Setup:
    _check(isinstance(placement, pm.Placement), "placement", "must be a perf_model.Placement (from place())")
    mc = placement.machine if machine is None else pm.get_machine(machine)
    _check(isinstance(context, int) and context >= 0, "context", f"must be an integer >= 0, got {context!r}")
    _check(isinstance(n_parallel, int) and n_parallel >= 1, "n_parallel", f"must be >= 1, got {n_parallel!r}")
    users = n_parallel if concurrent_users is None else concurrent_users
    _check(isinstance(users, int) and users >= 1, "concurrent_users", f"must be >= 1, got {users!r}")
    return Setup(model=placement.model, machine=mc, quant=placement.quant, kv=placement.kv_type,
                 ctx=placement.n_ctx, ngl=None if placement.auto else placement.n_gpu_layers,
                 n_cpu_moe=placement.n_cpu_moe, n_ubatch=placement.n_ubatch, tokens=context,
                 prompt=max(1, context if prompt_tokens is None else prompt_tokens), threads=n_threads,
                 perf_cores=perf_cores or cpu_cores(mc)[0], n_parallel=n_parallel, users=users,
                 op_offload=op_offload)


# ---------------------------------------------------------------------------
# 2. Outcomes
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    placement: pm.Placement
    fits: bool
    ngl: int
    gpu_layers: int
    vram: float                 # bytes on the GPU (weights + KV + compute)
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
        return {"fits": self.fits, "n_gpu_layers": self.ngl, "gpu_layers": self.gpu_layers,
                "vram_gb": self.vram / pm.GB, "ram_gb": self.ram / pm.GB, "decode_tok_s": self.decode_tok_s,
                "prefill_tok_s": self.prefill_tok_s, "cpu_share": self.cpu_share,
                "aggregate_tok_s": self.aggregate_tok_s, "active": self.active}


def _place(s: Setup) -> pm.Placement:
    return pm.place(s.model, s.machine, s.quant, n_ctx=s.ctx, kv_type=s.kv, n_gpu_layers=s.ngl,
                    n_cpu_moe=s.n_cpu_moe, n_ubatch=s.n_ubatch)


def _decode(p: pm.Placement, s: Setup, context: int, batch: int = 1) -> dict:
    """perf_model's decode step with the CPU part scaled by the thread model."""
    d = pm.decode_step_time(p, s.machine, context=context, batch=batch)
    f = thread_factor(s.threads, s.perf_cores)
    if f != 1.0 and d["cpu_s"] > 0:
        d = dict(d)
        d["cpu_s"] *= f
        d["total_s"] = d["gpu_s"] + d["cpu_s"] + d["overhead_s"]
        d["tok_per_s"] = batch / d["total_s"]
        d["seq_tok_per_s"] = 1.0 / d["total_s"]
        d["cpu_share"] = d["cpu_s"] / d["total_s"]
    return d


def slots_active(s: Setup) -> int:
    """Sequences decoding together: the users, capped by the slots and by what the KV pool holds."""
    by_pool = max(1, s.ctx // max(1, s.tokens))     # -c is shared by all slots (unified KV)
    return max(1, min(s.users, s.n_parallel, by_pool))


def evaluate(s: Setup, prefill: bool = True) -> Outcome:
    """perf_model's prediction for a setup (None speeds where it would not load).

    prefill=False skips the prompt timing (the slowest part to compute) when only decode matters."""
    p = _place(s)
    base = dict(placement=p, fits=p.fits, ngl=p.n_gpu_layers, gpu_layers=p.gpu_layers, vram=p.gpu_total,
                ram=p.cpu_total)
    if not p.fits:
        return Outcome(decode_tok_s=None, prefill_tok_s=None, prefill_s=None, cpu_share=None,
                       aggregate_tok_s=None, active=0, **base)
    d = _decode(p, s, s.tokens)
    f = {"tok_per_s": None, "total_s": None}
    if prefill:
        # unified memory has no PCIe link to copy over (pcie_gbs = 0): no op offload to time
        f = pm.prefill_time(p, s.machine, n_tokens=max(1, s.prompt), n_batch=max(s.n_batch, s.n_ubatch),
                            op_offload=s.op_offload and s.machine.pcie_gbs > 0)
    active = slots_active(s)
    agg = _decode(p, s, s.tokens, batch=active)["tok_per_s"] if active > 1 else d["tok_per_s"]
    return Outcome(decode_tok_s=d["tok_per_s"], prefill_tok_s=f["tok_per_s"], prefill_s=f["total_s"],
                   cpu_share=d["cpu_share"], aggregate_tok_s=agg, active=active, decode=d, prefill=f, **base)


# ---------------------------------------------------------------------------
# 4. Changes
# ---------------------------------------------------------------------------

@dataclass
class Change:
    title: str                  # short: "-ctk q8_0 -ctv q8_0 -fa on"
    flags: dict                 # engine -> exact flags: {"llama.cpp": ..., "vLLM": ..., "SGLang": ...}
    apply: dict                 # state keys to set (the calculator's URL state)
    before: dict
    after: dict
    metric: str = "decode_tok_s"  # what the gain is measured in
    gain: float = 0.0           # after - before in `metric` (before = 0 when it did not load)
    effect: str = ""            # "+2 layers on GPU, 5.8 → 6.1 tok/s"
    note: str = ""              # the trade-off

    def as_dict(self) -> dict:
        return {"title": self.title, "flags": dict(self.flags), "apply": dict(self.apply),
                "before": dict(self.before), "after": dict(self.after), "metric": self.metric,
                "gain": self.gain, "effect": self.effect, "note": self.note}


@dataclass
class Finding:
    cause: str                  # one of CAUSES
    title: str
    evidence: dict              # numbers (raw, SI units) behind the diagnosis
    evidence_text: list         # the same numbers, as sentences
    changes: list = field(default_factory=list)
    severity: float = 0.0       # for ranking findings: the best change's relative gain

    def as_dict(self) -> dict:
        return {"cause": self.cause, "title": self.title, "evidence": dict(self.evidence),
                "evidence_text": list(self.evidence_text), "changes": [c.as_dict() for c in self.changes],
                "severity": self.severity}


def _rate(v) -> str:
    if v is None:
        return "does not load"
    if v >= 100:
        return f"{v:,.0f} tok/s"
    return f"{v:.1f} tok/s" if v >= 1 else f"{v:.2f} tok/s"


def _pct(v) -> str:
    return "—" if v is None else f"{v:.0%}"


def _gb(b: float) -> str:
    return f"{b / pm.GB:.1f} GB"


def _effect(before: Outcome, after: Outcome, metric: str) -> str:
    parts = []
    dl = after.gpu_layers - before.gpu_layers
    if after.fits and before.fits and dl:
        parts.append(f"{dl:+d} layers on GPU")
    if not before.fits and after.fits:
        return (f"does not load → loads with -ngl {after.ngl} ({_gb(after.vram)} VRAM), "
                f"{_rate(_metric(after, metric))}" + (" in all" if metric == "aggregate_tok_s" else "")
                + (" prompt" if metric == "prefill_tok_s" else ""))
    if metric == "prefill_tok_s":
        parts.append(f"prompt {_rate(before.prefill_tok_s)} → {_rate(after.prefill_tok_s)}")
        if before.decode_tok_s and after.decode_tok_s and _rate(before.decode_tok_s) != _rate(after.decode_tok_s):
            parts.append(f"decode {_rate(before.decode_tok_s)} → {_rate(after.decode_tok_s)}")
    elif metric == "aggregate_tok_s":
        parts.append(f"{before.active} → {after.active} sequences at once, "
                     f"{_rate(before.aggregate_tok_s)} → {_rate(after.aggregate_tok_s)} in all")
    else:
        parts.append(f"{_rate(before.decode_tok_s)} → {_rate(after.decode_tok_s)}")
    if after.fits and after.placement.gpu_layers == after.placement.n_layers and \
            after.placement.output_on_gpu and not (before.fits and before.placement.full_offload):
        parts.append("fits entirely on the GPU")
    return ", ".join(parts)


def _metric(o: Outcome, metric: str) -> float:
    v = getattr(o, metric)
    return 0.0 if v is None else v


def try_change(base: Setup, base_out: Outcome, title: str, flags: dict, apply: dict, edits: dict,
               metric: str = "decode_tok_s", note: str = "") -> Change | None:
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
    return Change(title=title, flags=flags, apply=apply, before=base_out.summary(), after=out.summary(),
                  metric=metric, gain=a - b, effect=_effect(base_out, out, metric), note=note)


# Flags per change kind --------------------------------------------------------

def _kv_flags(kv: str) -> dict:
    vllm = {"q8_0": "--kv-cache-dtype fp8", "q4_0": "--kv-cache-dtype fp8 (vLLM has no 4-bit KV cache)"}
    sgl = {"q8_0": "--kv-cache-dtype fp8_e4m3", "q4_0": "--kv-cache-dtype fp8_e4m3"}
    return {"llama.cpp": f"-ctk {kv} -ctv {kv} -fa on", "vLLM": vllm.get(kv, "--kv-cache-dtype auto"),
            "SGLang": sgl.get(kv, "--kv-cache-dtype auto")}


def _ctx_flags(n: int) -> dict:
    return {"llama.cpp": f"-c {n}", "vLLM": f"--max-model-len {n}", "SGLang": f"--context-length {n}"}


def _with_ngl(s: Setup, edits: dict, apply: dict) -> tuple:
    """Keep -ngl auto when the user has it; otherwise let --fit re-choose and write the number out."""
    if s.ngl is None:
        return edits, apply
    return {**edits, "ngl": None}, {**apply, "ngl": "auto"}


# ---------------------------------------------------------------------------
# 5. Diagnoses
# ---------------------------------------------------------------------------

def _quant_ladder(s: Setup) -> list:
    """Presets smaller than the current one, largest first, with their weight bytes and bpw."""
    if s.quant is None:
        return []
    cur = pm.weight_bytes(s.model, s.quant)["total"]
    n_el = sum(r["n_elements"] for r in pm.quantize_plan(s.model, s.quant))
    out = []
    for q in pm.QUANT_PRESETS:
        b = pm.weight_bytes(s.model, q)["total"]
        bpw = 8.0 * b / n_el
        if b < cur * 0.995 and bpw >= QUALITY_FLOOR_BPW and not q.startswith("Q2"):
            out.append((b, q, bpw))
    return [(q, b, bpw) for b, q, bpw in sorted(out, reverse=True)]


def _smaller_kv(kv: str):
    return {"f16": "q8_0", "bf16": "q8_0", "q8_0": "q4_0"}.get(kv)


def _ctx_target(s: Setup):
    need = max(s.tokens, s.prompt) * max(1, min(s.users, s.n_parallel))
    for c in CTX_LADDER:
        if c >= need:
            return c if c < s.ctx else None
    return None


def _kv_changes(s: Setup, o: Outcome) -> list:
    out = []
    kv2 = _smaller_kv(s.kv)
    if kv2:
        edits, apply = _with_ngl(s, {"kv": kv2}, {"kv": kv2})
        note = ("a quantized V cache needs flash attention (-fa on); q8_0 keeps quality close to f16"
                if kv2 == "q8_0" else "q4_0 K/V costs some accuracy; try q8_0 first")
        c = try_change(s, o, f"-ctk {kv2} -ctv {kv2} -fa on", _kv_flags(kv2), apply, edits, note=note)
        if c:
            out.append(c)
    tgt = _ctx_target(s)
    if tgt:
        edits, apply = _with_ngl(s, {"ctx": tgt}, {"ctx": tgt})
        c = try_change(s, o, f"-c {tgt}", _ctx_flags(tgt), apply, edits,
                       note=f"holds {tgt:,} tokens: enough for {max(s.tokens, s.prompt):,} in this conversation")
        if c:
            out.append(c)
    return out


def _quant_changes(s: Setup, o: Outcome, ngl=None) -> list:
    """The next smaller preset, the first one at least 3/4 of a bit per weight smaller (one quality
    class down, e.g. Q4_K_M -> Q3_K_M), and the largest one that fits entirely (each if different)."""
    ladder = _quant_ladder(s)
    if not ladder:
        return []
    picks = [ladder[0]]
    cur_bpw = 8.0 * pm.weight_bytes(s.model, s.quant)["total"] / sum(
        r["n_elements"] for r in pm.quantize_plan(s.model, s.quant))
    step = next((x for x in ladder if x[2] <= cur_bpw - 0.75), None)
    if step and step not in picks:
        picks.append(step)
    full = s.model.n_layers + 1
    for q, b, bpw in ladder:
        try:
            p = _place(s.changed(quant=q, ngl=None if ngl is None else ngl))
        except ValueError:
            continue
        if p.fits and (ngl is not None or p.n_gpu_layers == full):
            if (q, b, bpw) not in picks:
                picks.append((q, b, bpw))
            break
    out = []
    for q, b, bpw in picks:
        edits = {"quant": q}
        apply = {"quant": q}
        if ngl is None:
            edits, apply = _with_ngl(s, edits, apply)
        c = try_change(s, o, f"{s.quant} → {q}", {
            "llama.cpp": f"-m {pm.gguf_filename(s.model, q)} (llama-quantize ... {q})",
            "vLLM": "a smaller AWQ/GPTQ checkpoint (vLLM does not take llama.cpp presets)",
            "SGLang": "a smaller AWQ/GPTQ checkpoint"}, apply, edits,
            note=f"{bpw:.2f} bits per weight, {_gb(b)} of weights: a smaller file, some loss of quality")
        if c:
            out.append(c)
    return out


def _moe_change(s: Setup, o: Outcome) -> list:
    m = s.model
    if not m.is_moe or s.machine.gpu is None:
        return []
    full = m.n_layers + 1
    best = None
    for n in range(0, m.n_layers + 1):
        try:
            p = _place(s.changed(ngl=full, n_cpu_moe=n))
        except ValueError:
            return []
        if p.fits:
            best = n
            break
    if best is None or (best == s.n_cpu_moe and s.ngl == full):
        return []
    c = try_change(s, o, f"-ngl {full} --n-cpu-moe {best}", {
        "llama.cpp": f"-ngl {full} --n-cpu-moe {best}",
        "vLLM": "no per-expert offload; --cpu-offload-gb streams weights over PCIe every pass",
        "SGLang": "no per-expert offload; --cpu-offload-gb"},
        {"ngl": full, "n_cpu_moe": best}, {"ngl": full, "n_cpu_moe": best},
        note=f"attention and shared weights of all {m.n_layers} layers on the GPU; the experts of the first "
             f"{best} layers in RAM, where a token reads only {m.num_experts_per_tok} of {m.n_expert}")
    return [c] if c else []


def _ngl_change(s: Setup, o: Outcome) -> list:
    if s.ngl is None or s.machine.gpu is None:
        return []
    c = try_change(s, o, "-ngl auto", {"llama.cpp": "-ngl auto (or leave it out: --fit chooses)",
                                       "vLLM": "--gpu-memory-utilization 0.85",
                                       "SGLang": "--mem-fraction-static 0.8"},
                   {"ngl": "auto"}, {"ngl": None})
    return [c] if c else []


def _rank(changes: list) -> list:
    seen, out = set(), []
    for c in sorted(changes, key=lambda c: -c.gain):
        key = tuple(sorted(c.apply.items()))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def _severity(changes: list, metric_before: float) -> float:
    if not changes:
        return 0.0
    best = max(c.gain for c in changes)
    return best / metric_before if metric_before else float("inf")


def diagnose_over_ask(s: Setup, o: Outcome) -> Finding | None:
    p = o.placement
    if p.fits:
        return None
    ev = {"failing_device": p.failing_device, "requested_bytes": p.requested_bytes, "free_bytes": p.free_bytes,
          "overflow_bytes": p.overflow_bytes, "n_gpu_layers": p.n_gpu_layers, "n_ctx": s.ctx,
          "kv_bytes": pm.kv_cache_bytes(s.model, s.ctx, s.kv),
          "weight_bytes": pm.weight_bytes(s.model, s.quant)["total"] if s.quant else p.gpu_weights + p.cpu_weights}
    text = [f"{p.failing_device} needs {_gb(p.requested_bytes)} but has {_gb(p.free_bytes)} free "
            f"(over by {_gb(p.overflow_bytes)}): llama.cpp stops at load with an allocation error.",
            f"At -c {s.ctx:,} the KV cache alone is {_gb(ev['kv_bytes'])} ({s.kv}); "
            f"the weights are {_gb(ev['weight_bytes'])}."]
    if p.failing_device == "GPU":
        text.append("On Windows the NVIDIA driver (536.40 and later) may instead spill the excess into shared system "
                    "memory: no error, but everything runs at PCIe speed. The fallback can be turned off per "
                    "application in the NVIDIA Control Panel (driver 546.01+).")
    elif p.failing_device in ("RAM", "unified memory"):
        text.append("With mmap the load may even start, but then the OS pages weights from the drive on every "
                    "token: the machine stutters and the disk is busy. --mlock only helps if it fits.")
    changes = _ngl_change(s, o)
    # keep the user's -ngl where possible: what else would make it load?
    pinned = s.ngl
    changes += _kv_changes(s, o)        # with -ngl auto: --fit re-chooses
    if pinned is not None:
        # the same -ngl with a shorter context or a smaller KV type
        for ctx in sorted((c for c in CTX_LADDER if max(s.tokens, s.prompt) <= c < s.ctx), reverse=True):
            c = try_change(s, o, f"-c {ctx} (keeping -ngl {pinned})", _ctx_flags(ctx), {"ctx": ctx}, {"ctx": ctx},
                           note="the longest context that loads with this -ngl")
            if c:
                changes.append(c)
                break
        kv2 = _smaller_kv(s.kv)
        if kv2:
            c = try_change(s, o, f"-ctk {kv2} -ctv {kv2} -fa on (keeping -ngl {pinned})", _kv_flags(kv2),
                           {"kv": kv2}, {"kv": kv2})
            if c:
                changes.append(c)
    changes += _quant_changes(s, o, ngl=pinned)
    changes += _moe_change(s, o)
    changes = _rank(changes)
    for c in changes:
        if "vLLM" in c.flags and c.title.startswith("-c "):
            c.flags["vLLM"] += " (or lower --gpu-memory-utilization next to a desktop)"
    return Finding("over_ask", f"Asks for more memory than the {p.failing_device} has", ev, text, changes,
                   severity=float("inf"))


def diagnose_partial_offload(s: Setup, o: Outcome) -> Finding | None:
    p = o.placement
    if not o.fits or s.machine.gpu is None or p.full_offload or s.machine.unified:
        return None
    d = o.decode
    n = s.model.n_layers
    full = _place(s.changed(ngl=n + 1))
    d_full = _decode(full, s, s.tokens)
    ev = {"cpu_share": d["cpu_share"], "gpu_layers": p.gpu_layers, "cpu_layers": n - p.gpu_layers,
          "n_layers": n, "output_on_gpu": p.output_on_gpu, "cpu_bytes_per_token": d["cpu_bytes"],
          "gpu_bytes_per_token": d["gpu_bytes"], "ram_bandwidth": s.machine.ram.bandwidth,
          "gpu_bandwidth": s.machine.gpu.bandwidth, "decode_tok_s": o.decode_tok_s,
          "all_on_gpu_tok_s": d_full["tok_per_s"]}
    text = [f"{n - p.gpu_layers} of {n} layers" + ("" if p.output_on_gpu else " and the output head")
            + f" run from system RAM: {d['cpu_share']:.0%} of each decode step is spent on the CPU side.",
            f"The CPU reads {_gb(d['cpu_bytes'])} per token at {s.machine.ram.bandwidth_gbs:g} GB/s; "
            f"the GPU reads {_gb(d['gpu_bytes'])} at {s.machine.gpu.bandwidth_gbs:g} GB/s.",
            f"Decode {_rate(o.decode_tok_s)}; if everything fit on the GPU it would be {_rate(d_full['tok_per_s'])}."]
    changes = _kv_changes(s, o) + _quant_changes(s, o) + _moe_change(s, o) + _ngl_change(s, o)
    changes = _rank(changes)
    return Finding("partial_offload", "Partial offload: layers in system RAM set the speed", ev, text, changes,
                   severity=_severity(changes, o.decode_tok_s))


def diagnose_kv_competes(s: Setup, o: Outcome) -> Finding | None:
    p = o.placement
    if not o.fits or s.machine.gpu is None or p.full_offload or s.machine.unified:
        return None
    changes = [c for c in _kv_changes(s, o) if c.after["gpu_layers"] > o.gpu_layers]
    if not changes:
        return None
    kv_all = pm.kv_cache_bytes(s.model, s.ctx, s.kv)
    w = pm.weight_bytes(s.model, s.quant)["total"] if s.quant else p.gpu_weights + p.cpu_weights
    per_layer = w / s.model.n_layers
    ev = {"kv_bytes": kv_all, "weight_bytes": w, "kv_to_weights": kv_all / w, "gpu_kv_bytes": p.gpu_kv,
          "gpu_capacity": p.gpu_capacity, "layers_worth": p.gpu_kv / per_layer, "n_ctx": s.ctx,
          "tokens_used": max(s.tokens, s.prompt)}
    text = [f"-c {s.ctx:,} reserves {_gb(kv_all)} of {s.kv} KV cache at load, {kv_all / w:.0%} of the weights' "
            f"{_gb(w)}; {_gb(p.gpu_kv)} of it sits in VRAM, the room of about {ev['layers_worth']:.0f} layers.",
            f"This conversation uses {max(s.tokens, s.prompt):,} of the {s.ctx:,} tokens reserved."]
    changes = _rank(changes)
    return Finding("kv_competes", "The KV cache takes VRAM that layers could use", ev, text, changes,
                   severity=_severity(changes, o.decode_tok_s))


def _fewer_kv_heads_models(s: Setup) -> list:
    """Catalog models of about the same size whose KV cache per token is at most 3/4 of this one's."""
    m = s.model
    size = m.total_params()
    kv = pm.kv_bytes_per_token(m, s.kv)
    out = []
    for key, other in pm.MODELS.items():
        if key == m.key or other.is_moe != m.is_moe:
            continue
        if 0.7 <= other.total_params() / size <= 1.3 and pm.kv_bytes_per_token(other, s.kv) <= 0.75 * kv:
            out.append(key)
    return out


def diagnose_kv_long_context(s: Setup, o: Outcome) -> Finding | None:
    if not o.fits:
        return None
    d = o.decode
    kv_read = d["gpu_kv_bytes"] + d["cpu_kv_bytes"]
    w_read = d["gpu_weight_bytes"] + d["cpu_weight_bytes"]
    if kv_read < KV_LONG_CONTEXT_SHARE * w_read:
        return None
    d0 = _decode(o.placement, s, 0)
    ev = {"context": s.tokens, "kv_bytes_per_token_read": kv_read, "weight_bytes_per_token_read": w_read,
          "kv_to_weights": kv_read / w_read, "tok_s_at_0": d0["tok_per_s"], "tok_s_now": o.decode_tok_s,
          "kv_bytes_per_context_token": pm.kv_bytes_per_token(s.model, s.kv)}
    text = [f"At {s.tokens:,} tokens every new token reads {_gb(kv_read)} of KV cache besides {_gb(w_read)} of "
            f"weights ({kv_read / w_read:.0%} as much).",
            f"Decode has fallen from {_rate(d0['tok_per_s'])} on an empty context to {_rate(o.decode_tok_s)}; "
            f"each 1,000 tokens of {s.kv} context add {_gb(1000 * ev['kv_bytes_per_context_token'])}."]
    changes = []
    kv2 = _smaller_kv(s.kv)
    if kv2:
        edits, apply = _with_ngl(s, {"kv": kv2}, {"kv": kv2})
        c = try_change(s, o, f"-ctk {kv2} -ctv {kv2} -fa on", _kv_flags(kv2), apply, edits,
                       note="halves the KV bytes read per token" if kv2 == "q8_0" else "costs some accuracy")
        if c:
            changes.append(c)
    for key in _fewer_kv_heads_models(s):
        other = pm.MODELS[key]
        edits, apply = _with_ngl(s, {"model": other}, {"model": key})
        if s.ctx > other.max_position_embeddings:
            continue
        c = try_change(s, o, f"{s.model.name} → {other.name}", {
            "llama.cpp": f"-m {pm.gguf_filename(other, s.quant)}", "vLLM": f"a {other.name} checkpoint",
            "SGLang": f"a {other.name} checkpoint"}, apply, edits,
            note=f"{other.num_key_value_heads} KV heads x {other.num_hidden_layers} layers: "
                 f"{pm.kv_bytes_per_token(other, s.kv) / 1024:.0f} KiB per token instead of "
                 f"{ev['kv_bytes_per_context_token'] / 1024:.0f} KiB (a different model: check its quality)")
        if c:
            changes.append(c)
    for cap in sorted((c for c in CTX_LADDER if c < s.tokens), reverse=True)[:1]:
        edits = {"ctx": cap, "tokens": cap, "prompt": min(s.prompt, cap)}
        if s.ngl is not None:
            edits["ngl"] = None
        apply = {"ctx": cap, "tokens": cap, **({"ngl": "auto"} if s.ngl is not None else {})}
        c = try_change(s, o, f"-c {cap}", _ctx_flags(cap), apply, edits,
                       note=f"caps the conversation at {cap:,} tokens: older turns fall out (or summarise them)")
        if c:
            changes.append(c)
    changes = _rank(changes)
    return Finding("kv_overflow_long_context", "Long context: the KV cache rivals the weights", ev, text, changes,
                   severity=_severity(changes, o.decode_tok_s))


def diagnose_pp_pcie(s: Setup, o: Outcome) -> Finding | None:
    if not o.fits or s.machine.gpu is None or s.machine.unified or o.placement.full_offload:
        return None
    f = o.prefill
    pcie = f["parts_s"].get("pcie", 0.0)
    share = pcie / f["total_s"]
    if s.op_offload and (share < PCIE_PREFILL_SHARE or f["total_s"] < PREFILL_SLOW_S):
        return None
    if not s.op_offload and o.prefill_s < PREFILL_SLOW_S:
        return None
    cpu_w = sum(st["bytes"] for st in f["steps"] if st["kind"] == "pcie")
    n_copies = sum(1 for st in f["steps"] if st["kind"] == "pcie")
    ev = {"prompt_tokens": s.prompt, "prefill_s": f["total_s"], "pcie_s": pcie, "pcie_share": share,
          "pcie_bytes": cpu_w, "pcie_copies": n_copies, "pcie_gbs": s.machine.pcie_gbs,
          "prefill_tok_s": f["tok_per_s"], "op_offload": s.op_offload}
    if s.op_offload:
        text = [f"A prompt of {s.prompt:,} tokens takes {f['total_s']:.1f} s; {pcie:.1f} s of it ({share:.0%}) is "
                f"copying the RAM layers' weights ({_gb(cpu_w)} in {n_copies} cop{'y' if n_copies == 1 else 'ies'}) "
                f"over PCIe at {s.machine.pcie_gbs:g} GB/s so the GPU can do their matmuls (op offload)."]
        off = pm.prefill_time(o.placement, s.machine, n_tokens=s.prompt, op_offload=False)
        ev["no_op_offload_tok_s"] = off["tok_per_s"]
        text.append(f"Keep op offload on: without it the CPU would do that arithmetic at "
                    f"{_rate(off['tok_per_s'])} instead of {_rate(f['tok_per_s'])}.")
    else:
        text = [f"--no-op-offload: the CPU computes its layers' prompt matmuls itself; the prompt runs at "
                f"{_rate(f['tok_per_s'])} ({f['total_s']:.1f} s)."]
    changes = []
    if not s.op_offload:
        c = try_change(s, o, "--op-offload (default on)", {"llama.cpp": "drop --no-op-offload"}, {},
                       {"op_offload": True}, metric="prefill_tok_s")
        if c:
            changes.append(c)
    for ub in (1024, 2048):
        if ub <= s.n_ubatch:
            continue
        b = max(s.n_batch, ub, min(8192, 1 << max(0, (s.prompt - 1)).bit_length()))
        edits = {"n_ubatch": ub, "n_batch": b}
        if s.ngl is not None:
            edits["ngl"] = None
        c = try_change(s, o, f"-b {b} -ub {ub}", {"llama.cpp": f"-b {b} -ub {ub}",
                                                  "vLLM": f"--max-num-batched-tokens {b}",
                                                  "SGLang": f"--chunked-prefill-size {b}"},
                       {"ub": ub, "b": b, **({"ngl": "auto"} if s.ngl is not None else {})}, edits,
                       metric="prefill_tok_s",
                       note=f"a {ub}-token micro-batch reads each weight once per {ub} tokens, but its compute "
                            f"buffer takes VRAM")
        if c:
            changes.append(c)
    for c in _quant_changes(s, o):
        c2 = try_change(s, o, c.title, c.flags, c.apply, {"quant": c.apply["quant"],
                                                           **({"ngl": None} if s.ngl is not None else {})},
                        metric="prefill_tok_s", note=c.note + "; fewer bytes cross PCIe")
        if c2:
            changes.append(c2)
    changes = _rank(changes)
    for c in changes:
        c.flags.setdefault("prefix caching", "llama.cpp --cache-prompt (on) --cache-reuse 256; vLLM "
                                             "--enable-prefix-caching; SGLang --schedule-policy lpm")
    return Finding("pp_bound_by_pcie", "Prompt processing is bound by PCIe copies", ev, text, changes,
                   severity=_severity(changes, f["tok_per_s"]))


def diagnose_threads(s: Setup, o: Outcome) -> Finding | None:
    if not o.fits or s.threads is None or s.threads <= s.perf_cores:
        return None
    if o.decode["cpu_s"] <= 0:
        return None
    f = thread_factor(s.threads, s.perf_cores)
    ev = {"n_threads": s.threads, "perf_cores": s.perf_cores, "cpu_time_factor": f,
          "cpu_s": o.decode["cpu_s"], "cpu_share": o.cpu_share, "contention": THREAD_CONTENTION}
    text = [f"-t {s.threads} on {s.perf_cores} physical performance cores: decode on the CPU is memory-bound, so "
            f"the {s.threads - s.perf_cores} extra threads add contention, not bandwidth.",
            f"Model: the CPU part of each step takes {f:.2f}x as long "
            f"({o.decode['cpu_s'] * 1e3:.1f} ms, {o.cpu_share:.0%} of the step)."]
    c = try_change(s, o, f"-t {s.perf_cores}", {"llama.cpp": f"-t {s.perf_cores} (or leave -t out: the default "
                                                            f"counts physical cores)"},
                   {"threads": s.perf_cores}, {"threads": s.perf_cores})
    changes = [c] if c else []
    return Finding("too_many_threads", "Too many CPU threads", ev, text, changes,
                   severity=_severity(changes, o.decode_tok_s))


def diagnose_concurrency(s: Setup, o: Outcome) -> Finding | None:
    if not o.fits or (s.users <= 1 and s.n_parallel <= 1):
        return None
    per_req = max(s.tokens, s.prompt)
    pool_seqs = s.ctx // max(1, per_req)
    capped_by_slots = s.users > s.n_parallel
    capped_by_pool = pool_seqs < min(s.users, s.n_parallel)
    if not (capped_by_slots or capped_by_pool):
        return None
    ev = {"users": s.users, "n_parallel": s.n_parallel, "n_ctx": s.ctx, "tokens_per_request": per_req,
          "pool_sequences": pool_seqs, "active": o.active, "aggregate_tok_s": o.aggregate_tok_s,
          "per_user_tok_s": o.aggregate_tok_s * o.active / s.users / max(1, o.active)}
    text = []
    if capped_by_slots:
        text.append(f"{s.users} concurrent requests but -np {s.n_parallel}: {s.users - s.n_parallel} wait in the "
                    f"queue while {o.active} decode{'s' if o.active == 1 else ''}.")
    if capped_by_pool:
        text.append(f"The KV pool (-c {s.ctx:,}, shared by the slots) holds {pool_seqs} request"
                    f"{'' if pool_seqs == 1 else 's'} of {per_req:,} tokens: the rest wait or are preempted.")
    verb = "sequence at once gives" if o.active == 1 else "sequences at once give"
    text.append(f"{o.active} {verb} {_rate(o.aggregate_tok_s)} in all; decode is memory-bound, so a batch of "
                f"{s.users} reads the weights once for all of them.")
    changes = []
    want = s.users
    for kv in (s.kv, _smaller_kv(s.kv)):
        if kv is None:
            continue
        ctx = max(s.ctx, want * per_req)
        ctx = -(-ctx // 256) * 256
        edits = {"n_parallel": want, "ctx": ctx, "kv": kv}
        if s.ngl is not None:
            edits["ngl"] = None
        apply = {"np": want, "ctx": ctx, "kv": kv, **({"ngl": "auto"} if s.ngl is not None else {})}
        kvf = f" -ctk {kv} -ctv {kv} -fa on" if kv != s.kv else ""
        vkv = " --kv-cache-dtype fp8" if kv != s.kv else ""
        c = try_change(s, o, f"-np {want} -c {ctx}" + kvf, {
            "llama.cpp": f"-np {want} -c {ctx}{kvf}",
            "vLLM": f"--max-num-seqs {max(want, 8)} --max-model-len {per_req}{vkv} (paged KV: the pool is what "
                    f"--gpu-memory-utilization leaves)",
            "SGLang": f"--max-running-requests {want} --context-length {per_req}"
                      + (" --kv-cache-dtype fp8_e4m3" if kv != s.kv else "")},
            apply, edits, metric="aggregate_tok_s",
            note=f"each of the {want} slots gets {ctx // want:,} tokens of the shared pool")
        if c:
            changes.append(c)
    changes = _rank(changes)
    return Finding("concurrency_cap", "Concurrency is capped: throughput flat as users are added", ev, text,
                   changes, severity=_severity(changes, o.aggregate_tok_s))


DIAGNOSES = (diagnose_over_ask, diagnose_partial_offload, diagnose_kv_competes, diagnose_kv_long_context,
             diagnose_pp_pcie, diagnose_threads, diagnose_concurrency)


# ---------------------------------------------------------------------------
# 6. advise()
# ---------------------------------------------------------------------------

def advise_setup(s: Setup, outcome: Outcome | None = None) -> list:
    """Findings for a Setup, most severe first (a setup that does not load comes first).

    outcome: evaluate(s), if the caller has it already."""
    o = evaluate(s) if outcome is None else outcome
    out = []
    for diag in DIAGNOSES:
        f = diag(s, o)
        if f is not None:
            out.append(f)
    return sorted(out, key=lambda f: (f.cause != "over_ask", -f.severity, CAUSES.index(f.cause)))


def advise(placement, machine=None, context: int = 2000, n_parallel: int = 1, n_threads=None,
           concurrent_users=None, prompt_tokens=None, perf_cores=None, op_offload: bool = True) -> list:
    """The bottlenecks of a placement, each with evidence and ranked changes.

    placement: from perf_model.place().  context: tokens of conversation at which decode is
    judged.  n_parallel: llama.cpp -np slots.  concurrent_users: requests the workload makes at
    once (default n_parallel).  n_threads: -t (None: llama.cpp's default, the physical cores).
    prompt_tokens: prompt length for prefill (default `context`).  perf_cores: physical
    performance cores (default: CPU_CORES for the machine).  Returns a list of Finding."""
    s = setup_from_placement(placement, machine, context, prompt_tokens, n_parallel, n_threads,
                             concurrent_users, perf_cores, op_offload)
    return advise_setup(s)


def advise_state(state) -> list:
    """Findings for the calculator's state dict (see the module docstring)."""
    return advise_setup(setup_from_state(state))


def apply_change(state: dict, change) -> dict:
    """The state after a change (what the app's apply button does)."""
    a = change.apply if isinstance(change, Change) else change["apply"]
    return {**state, **a}


# ---------------------------------------------------------------------------
# 7. Tuning recipes
# ---------------------------------------------------------------------------
GOALS = {
    "one_user_fits": "One user, the model fits in VRAM",
    "one_user_too_big": "One user, the model is larger than VRAM",
    "apple": "Apple silicon",
    "cpu_only": "CPU only",
    "several_users": "Several users or an agent making parallel calls",
}
DRAFTS = {"llama": "llama-3.2-1b", "qwen2": "qwen2.5-0.5b"}   # the small catalog model of each family


@dataclass
class Recipe:
    goal: str
    engine: str
    state: dict
    command: str
    explanations: list
    outcome: dict

    def as_dict(self) -> dict:
        return {"goal": self.goal, "engine": self.engine, "state": dict(self.state), "command": self.command,
                "explanations": list(self.explanations), "outcome": dict(self.outcome)}


def _bound_tok_s(s: Setup, p) -> float:
    """Decode with zero context and no fixed overhead: bytes read over effective bandwidth (the module's bound)."""
    d = pm.decode_step_time(p, s.machine, context=0)
    return 1.0 / (d["gpu_s"] + d["cpu_s"])


def _which_goal(m, mc, quant, ctx) -> str:
    """The recipe that applies to a single user on this machine."""
    if mc.gpu is None:
        return "cpu_only"
    if mc.unified:
        return "apple"
    p = pm.place(m, mc, quant, n_ctx=ctx)
    return "one_user_fits" if p.full_offload else "one_user_too_big"


def recipe(goal: str, model, machine, quant: str = "Q4_K_M", context: int = 4096, users: int = 4,
           tokens=None) -> Recipe:
    """A recommended configuration for a goal, with the numbers behind each choice.

    goal: one of GOALS.  context: the longest conversation (tokens) a request needs.  users:
    concurrent requests (several_users).  When the goal does not match the machine (an Apple
    recipe on a PC, "fits" for a model that does not), the matching recipe is used and the first
    explanation says why."""
    _check(goal in GOALS, "goal", f"unknown goal {goal!r}; allowed: {', '.join(GOALS)}")
    m, mc = pm.get_model(model), pm.get_machine(machine)
    _check(isinstance(context, int) and context >= 256, "context", f"must be an integer >= 256, got {context!r}")
    _check(isinstance(users, int) and users >= 1, "users", f"must be a positive integer, got {users!r}")
    tokens = min(context, tokens or min(2000, context))
    ctx = next((c for c in CTX_LADDER if c >= context), context)
    ex = []
    used = goal
    single = _which_goal(m, mc, quant, ctx)
    if goal in ("one_user_fits", "one_user_too_big", "apple") and goal != single:
        why = {"cpu_only": f"{mc.name} has no GPU",
               "apple": f"{mc.name} has unified memory",
               "one_user_fits": f"{m.name} {quant} fits entirely in {mc.gpu.name if mc.gpu else ''} VRAM at -c {ctx:,}",
               "one_user_too_big": f"{m.name} {quant} does not fit entirely in "
                                   f"{mc.gpu.name if mc.gpu else ''} VRAM at -c {ctx:,}"}[single]
        ex.append(f"{why}: the '{GOALS[single]}' recipe applies.")
        used = single
    engine = "llama.cpp"
    s = Setup(m, mc, quant, "f16", ctx, None, 0, tokens=tokens, prompt=tokens, perf_cores=cpu_cores(mc)[0])
    if not evaluate(s, prefill=False).fits:
        # not even --fit can load it (RAM or unified memory is too small): the largest quant that loads
        fitting = [q for q, b, bpw in _quant_ladder(s) if evaluate(s.changed(quant=q), prefill=False).fits]
        if not fitting:
            o = evaluate(s, prefill=False)
            ex.append(f"{m.name} does not load on {mc.name} at any quant of {QUALITY_FLOOR_BPW:g} bits or more: "
                      f"{o.placement.error}. Pick a smaller model.")
            state = {**s.state(), "engine": engine, "goal": goal}
            return Recipe(used, engine, state, pm.llama_server_command(o.placement), ex, o.summary())
        err = evaluate(s, prefill=False).placement.error
        ex.append(f"{m.name} {quant} does not load on {mc.name} even with --fit ({err}); "
                  f"{fitting[0]} is the largest quant that does.")
        quant = fitting[0]
        s = s.changed(quant=quant)
    if used == "one_user_fits":
        s = s.changed(ngl=m.n_layers + 1)
        o = evaluate(s, prefill=False)
        maxpos = m.max_position_embeddings
        ex.append(f"Everything on the GPU (-ngl {m.n_layers + 1}): {_gb(o.vram)} of VRAM, decode "
                  f"{_rate(o.decode_tok_s)} at {tokens:,} tokens; the ceiling, bandwidth / bytes, is "
                  f"{_rate(_bound_tok_s(s, o.placement))}.")
        ex.append(f"-c {ctx:,} (what the conversation needs) instead of the trained {maxpos:,}: the f16 KV cache "
                  f"is {_gb(pm.kv_cache_bytes(m, ctx, 'f16'))} instead of {_gb(pm.kv_cache_bytes(m, maxpos, 'f16'))}.")
        ex.append("Flash attention on (-fa on).")
        lad = _quant_ladder(s)
        if lad:
            q2 = lad[0][0]
            o2 = evaluate(s.changed(quant=q2), prefill=False)
            if o2.fits:
                ex.append(f"Faster still: {q2} reads {_gb(lad[0][1])} of weights per token instead of "
                          f"{_gb(pm.weight_bytes(m, quant)['total'])}: {_rate(o.decode_tok_s)} → "
                          f"{_rate(o2.decode_tok_s)}, at some cost in quality.")
        draft = DRAFTS.get(m.model_type)
        if draft and draft != m.key and o.fits:
            sp = speculative(o.placement, draft, 0.7, n_draft=3, context=tokens)
            if sp["fits"]:
                be = sp["break_even_acceptance"]
                ex.append(f"Or speculative decoding with {pm.MODELS[draft].name} ({sp['flags']['llama.cpp']}): at "
                          f"70% acceptance {_rate(sp['baseline_tok_s'])} → {_rate(sp['tok_s'])}"
                          + (f"; it pays above {be:.0%} acceptance." if be is not None else "; it never pays here."))
    elif used == "one_user_too_big":
        o = evaluate(s, prefill=False)
        ex.append(f"--fit picks -ngl {o.ngl}: {o.gpu_layers} of {m.n_layers} layers in VRAM, decode "
                  f"{_rate(o.decode_tok_s)} with {_pct(o.cpu_share)} of each step on the CPU.")
        s8 = s.changed(kv="q8_0")
        o8 = evaluate(s8, prefill=False)
        if o8.fits and o8.gpu_layers > o.gpu_layers:
            ex.append(f"-ctk q8_0 -ctv q8_0 -fa on: the KV cache shrinks from {_gb(pm.kv_cache_bytes(m, ctx, 'f16'))} "
                      f"to {_gb(pm.kv_cache_bytes(m, ctx, 'q8_0'))}, {o8.gpu_layers - o.gpu_layers:+d} layers on the "
                      f"GPU, {_rate(o.decode_tok_s)} → {_rate(o8.decode_tok_s)}.")
            s, o = s8, o8
        if m.is_moe:
            for c in _moe_change(s, o):
                s = s.changed(ngl=c.apply["ngl"], n_cpu_moe=c.apply["n_cpu_moe"])
                o2 = evaluate(s, prefill=False)
                ex.append(f"MoE: {c.title}: {c.note}; {_rate(o.decode_tok_s)} → {_rate(o2.decode_tok_s)}.")
                o = o2
        ex.append(f"Decode speed is set by system RAM ({mc.ram.bandwidth_gbs:g} GB/s against "
                  f"{mc.gpu.bandwidth_gbs:g} GB/s of VRAM): {_pct(o.cpu_share)} of each step is spent there.")
    elif used == "apple":
        o = evaluate(s, prefill=False)
        cap = mc.gpu.mem_bytes * mc.gpu_share
        ex.append(f"Metal uses unified memory: no offload decision (-ngl {o.ngl}). The GPU may use "
                  f"{mc.gpu_share:.0%} of {mc.gpu.mem_gb:g} GB = {_gb(cap)}; this setup needs {_gb(o.vram)}.")
        ex.append(f"Decode follows the chip's memory bandwidth, {mc.gpu.bandwidth_gbs:g} GB/s: "
                  f"{_rate(o.decode_tok_s)} (ceiling {_rate(_bound_tok_s(s, o.placement))}).")
        ex.append("vLLM and SGLang reach Apple silicon only through experimental or MLX-based paths.")
    elif used == "cpu_only":
        s = s.changed(ngl=0, threads=cpu_cores(mc)[0])
        o = evaluate(s)
        ex.append(f"-ngl 0 -t {s.threads}: physical performance cores only. Decode is RAM bandwidth / model bytes: "
                  f"{_rate(o.decode_tok_s)} at {tokens:,} tokens (ceiling {_rate(_bound_tok_s(s, o.placement))}).")
        oh = evaluate(s.changed(threads=cpu_cores(mc)[1]), prefill=False)
        ex.append(f"All {cpu_cores(mc)[1]} logical threads would give {_rate(oh.decode_tok_s)} "
                  f"(the advisor's contention model).")
        ex.append(f"Prompt processing is compute-bound and slow on a CPU: {_rate(o.prefill_tok_s)} for a "
                  f"{tokens:,}-token prompt.")
        lad = _quant_ladder(s)
        if lad:
            q2 = lad[0][0]
            o2 = evaluate(s.changed(quant=q2), prefill=False)
            ex.append(f"Prefer the smallest quant whose quality is acceptable: {q2} gives {_rate(o2.decode_tok_s)}.")
    elif used == "several_users":
        per_req = tokens
        ctx_all = -(-max(ctx, users * per_req) // 256) * 256
        s = s.changed(n_parallel=users, users=users, ctx=ctx_all)
        o = evaluate(s, prefill=False)
        if mc.gpu is not None and not mc.unified and o.placement.full_offload:
            engine = "vLLM"
        else:
            ex.append(f"{m.name} {quant} does not fit entirely in VRAM here (or there is no discrete GPU): "
                      f"vLLM and SGLang want the model in VRAM, so this uses llama.cpp slots (-np {users}).")
        if not o.placement.full_offload and mc.gpu is not None:
            s8 = s.changed(kv="q8_0")
            o8 = evaluate(s8, prefill=False)
            if o8.fits and o8.gpu_layers > o.gpu_layers:
                ex.append(f"An 8-bit KV cache (llama.cpp -ctk q8_0 -ctv q8_0; vLLM --kv-cache-dtype fp8) puts "
                          f"{o8.gpu_layers - o.gpu_layers:+d} layers on the GPU.")
                s, o = s8, o8
        one = evaluate(s.changed(users=1), prefill=False)
        ex.append(f"Decode is memory-bound, so {users} requests in one batch read the weights once: "
                  f"{_rate(one.aggregate_tok_s)} for one stream, {_rate(o.aggregate_tok_s)} in all for {users}.")
        ex.append(f"Context per request = what the workload needs (--max-model-len {per_req} / --context-length "
                  f"{per_req}; llama.cpp -c {s.ctx} shared by {users} slots) so more requests fit in the KV pool.")
        ex.append("On a GPU that also drives displays, lower --gpu-memory-utilization (vLLM, default 0.92) or "
                  "--mem-fraction-static (SGLang). Requests sharing long prefixes: SGLang --schedule-policy lpm.")
    o = evaluate(s)
    state = s.state()
    state["engine"] = engine
    state["goal"] = goal
    cmd = pm.llama_server_command(o.placement, n_parallel=s.n_parallel if s.n_parallel > 1 else None)
    if s.threads is not None:
        cmd += f" -t {s.threads}"
    if engine == "vLLM":
        cmd = (f"vllm serve <{m.name} AWQ/GPTQ checkpoint> --max-model-len {tokens} --max-num-seqs {users}"
               + (" --kv-cache-dtype fp8" if s.kv != "f16" else ""))
    return Recipe(used, engine, state, cmd, ex, o.summary())


# ---------------------------------------------------------------------------
# 8. Fine-tuned models: a runtime LoRA adapter
# ---------------------------------------------------------------------------
# LoRA (Hu et al. 2021) adds dW = B A to a projection W (out x in): A is r x in,
# B is out x r, so one adapted projection stores r * (in + out) numbers.  At
# inference, unmerged, each token does x -> A x -> B (A x): 2 r (in + out) FLOPs
# per projection, and every pass reads all of A and B once, like the weights.
# Merged (W + B A saved as one checkpoint) it costs exactly the base model.

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "qkv_proj",
                "gate_up_proj")
VLLM_MAX_LORA_RANK_DEFAULT = 16
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)   # values --max-lora-rank accepts


def lora_shapes(model) -> dict:
    """(in_features, out_features) of each LoRA target module, in Hugging Face names."""
    m = pm.get_model(model)
    h, d = m.hidden_size, m.d_head
    q, kv = m.num_attention_heads * d, m.num_key_value_heads * d
    f = m.intermediate_size
    return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
            "gate_proj": (h, f), "up_proj": (h, f), "down_proj": (f, h),
            "qkv_proj": (h, q + 2 * kv), "gate_up_proj": (h, 2 * f)}


def lora_cost(model, rank: int, target_modules=("q_proj", "k_proj", "v_proj", "o_proj"), dtype_bytes: int = 2,
              placement=None, context: int = 2000, prompt_tokens: int = 2000, n_adapters: int = 1) -> dict:
    """Memory, bytes and FLOPs a runtime LoRA adapter adds, and whether merging wins.

    With a placement (of the base model), the extra decode time is the adapter's bytes at the
    effective bandwidth perf_model gives the device the adapted layers run on (its bytes over
    its memory time), a lower bound: the extra small matmuls also cost kernel launches."""
    m = pm.get_model(model)
    _check(isinstance(rank, int) and not isinstance(rank, bool) and rank >= 1, "rank",
           f"must be a positive integer, got {rank!r}")
    _check(dtype_bytes in (1, 2, 4), "dtype_bytes", f"must be 1, 2 or 4, got {dtype_bytes!r}")
    _check(isinstance(n_adapters, int) and n_adapters >= 1, "n_adapters", f"must be >= 1, got {n_adapters!r}")
    shapes = lora_shapes(m)
    targets = tuple(target_modules)
    _check(len(targets) > 0, "target_modules", "name at least one module")
    for t in targets:
        _check(t in shapes, "target_modules", f"unknown module {t!r}; allowed: {', '.join(LORA_TARGETS)}")
    if m.model_type == "phi3":
        _check(not any(t in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj") for t in targets),
               "target_modules", "Phi-3 fuses them: use qkv_proj and gate_up_proj")
    mlp = {"gate_proj", "up_proj", "down_proj", "gate_up_proj"}
    per_layer = {}
    for t in targets:
        i, o = shapes[t]
        n = rank * (i + o)                      # A: r x in, B: out x r
        if t in mlp and m.is_moe:
            n *= m.n_expert                      # one adapter per expert
        per_layer[t] = {"in": i, "out": o, "A": (rank, i), "B": (o, rank), "params": n}
    layer_params = sum(v["params"] for v in per_layer.values())
    params = layer_params * m.n_layers
    # a token reads / multiplies only the experts it is routed to
    active = 0.0
    for t, v in per_layer.items():
        frac = m.num_experts_per_tok / m.n_expert if (t in mlp and m.is_moe) else 1.0
        active += v["params"] * frac
    active *= m.n_layers
    nbytes = params * dtype_bytes
    out = {"model": m.name, "rank": rank, "target_modules": targets, "dtype_bytes": dtype_bytes,
           "per_layer": per_layer, "params_per_layer": layer_params, "params": params, "bytes": nbytes,
           "decode_bytes_per_token": active * dtype_bytes,
           "decode_flops_per_token": 2.0 * active, "prefill_flops_per_token": 2.0 * active,
           "prefill_flops": 2.0 * active * prompt_tokens, "prompt_tokens": prompt_tokens,
           "merged_extra_bytes": 0, "merged_extra_s": 0.0}
    if placement is not None:
        p = placement
        d = pm.decode_step_time(p, p.machine, context=context)
        # adapters follow their layers: split by the share of layers on each device
        g = p.gpu_layers / m.n_layers
        t = 0.0
        for side, share in (("gpu", g), ("cpu", 1.0 - g)):
            if share <= 0 or d[side + "_bytes"] <= 0:
                continue
            t += active * dtype_bytes * share * d[side + "_mem_s"] / d[side + "_bytes"]
        base_tok_s = d["tok_per_s"]
        out.update({"base_tok_s": base_tok_s, "extra_decode_s": t, "lora_tok_s": 1.0 / (d["total_s"] + t),
                    "slowdown": t / d["total_s"], "vram_extra_bytes": nbytes * g})
        w = p.gpu_weights + p.cpu_weights
        out["base_weight_bytes"] = w
    else:
        w = pm.weight_bytes(m, "Q4_K_M")["total"]
        out["base_weight_bytes"] = w
    # merging: one fine-tune -> merge (no cost at all); k fine-tunes of one base -> adapters
    # cost k x adapter instead of k x the whole model
    out["n_adapters"] = n_adapters
    out["separate_models_bytes"] = n_adapters * w
    out["adapters_bytes"] = w + n_adapters * nbytes
    out["merge_wins"] = n_adapters == 1
    why = (f"One fine-tune: merge it (W + BA in full precision, then quantize) and it runs at exactly the base "
           f"model's speed; the adapter would add {nbytes / 1e6:.1f} MB and "
           f"{2.0 * active / 1e6:.1f} MFLOP per token." if n_adapters == 1 else
           f"{n_adapters} fine-tunes of one base: adapters need {_gb(w + n_adapters * nbytes)} "
           f"against {_gb(n_adapters * w)} for {n_adapters} merged models.")
    if "slowdown" in out:
        why += f" Unmerged decode: {_rate(out['base_tok_s'])} → {_rate(out['lora_tok_s'])} (at least)."
    out["advice"] = why
    r_up = next((r for r in VLLM_LORA_RANKS if r >= rank), rank)
    out["flags"] = {
        "llama.cpp": "--lora adapter.gguf (or --lora-scaled adapter.gguf 0.8); convert with "
                     "convert_lora_to_gguf.py; merge with llama-export-lora",
        "vLLM": f"--enable-lora --max-loras {n_adapters} --max-lora-rank {max(r_up, VLLM_MAX_LORA_RANK_DEFAULT)}"
                f" --lora-modules name=path"
                + (f" (rank {rank} > the default limit {VLLM_MAX_LORA_RANK_DEFAULT}: --max-lora-rank is required)"
                   if rank > VLLM_MAX_LORA_RANK_DEFAULT else ""),
        "SGLang": f"--lora-paths name=path --max-loras-per-batch {max(1, n_adapters)}",
    }
    out["vllm_needs_max_lora_rank"] = rank > VLLM_MAX_LORA_RANK_DEFAULT
    return out


# ---------------------------------------------------------------------------
# 9. Speculative decoding
# ---------------------------------------------------------------------------
# A draft model proposes n tokens one at a time; the target checks all n (plus
# one of its own) in a single pass.  With a per-token acceptance rate a,
# independent per position, the expected tokens per target pass are
#   E = 1 + a + a^2 + ... + a^n = (1 - a^(n+1)) / (1 - a)
# (Leviathan, Kalman and Matias, ICML 2023, eq. 1).  a = 0 gives 1 (only the
# target's own token), a = 1 gives n + 1.  One round costs n draft steps plus
# one target pass over n + 1 tokens:  t_round = n * t_draft + t_verify, timed
# by perf_model (the verify pass with batch = n + 1, which reads the weights
# once; it charges the KV once per token, slightly pessimistic).

def expected_tokens(acceptance: float, n_draft: int) -> float:
    _check(isinstance(acceptance, (int, float)) and 0.0 <= acceptance <= 1.0, "acceptance",
           f"must be between 0 and 1, got {acceptance!r}")
    _check(isinstance(n_draft, int) and n_draft >= 1, "n_draft", f"must be an integer >= 1, got {n_draft!r}")
    a = float(acceptance)
    if a == 1.0:
        return float(n_draft + 1)
    return (1.0 - a ** (n_draft + 1)) / (1.0 - a)


def _draft_placement(target: pm.Placement, draft, quant):
    """Place the draft on the GPU first (it runs every step), then the target in what is left."""
    mc = target.machine
    dm = pm.get_model(draft)
    dq = quant or (target.quant if target.quant else "Q8_0")
    dp = pm.place(dm, mc, dq, n_ctx=target.n_ctx, kv_type=target.kv_type)
    tp = target
    if mc.gpu is not None and not mc.unified and target.auto and dp.gpu_total > 0:
        # the draft's VRAM comes out of the target's: re-fit the target on a smaller GPU
        left = replace(mc.gpu, mem_gb=max(0.0, (mc.gpu.mem_bytes - dp.gpu_total) / pm.GB))
        tp = pm.place(target.model, replace(mc, gpu=left), target.quant, n_ctx=target.n_ctx,
                      kv_type=target.kv_type, n_cpu_moe=target.n_cpu_moe, n_ubatch=target.n_ubatch)
    return dp, tp


def speculative(target_placement, draft_model_key, acceptance: float, n_draft: int = 3, context: int = 2000,
                draft_quant=None) -> dict:
    """Tokens per target pass and tok/s with a draft model, and where drafting stops paying."""
    _check(isinstance(target_placement, pm.Placement), "target_placement", "must be a perf_model.Placement")
    E = expected_tokens(acceptance, n_draft)
    target = target_placement
    _check(draft_model_key in pm.MODELS, "draft", f"unknown model {draft_model_key!r}; allowed: {', '.join(pm.MODELS)}")
    dp, tp = _draft_placement(target, draft_model_key, draft_quant)
    base = pm.decode_step_time(target, target.machine, context=context)
    out = {"acceptance": acceptance, "n_draft": n_draft, "expected_tokens": E,
           "baseline_tok_s": base["tok_per_s"], "draft": pm.MODELS[draft_model_key].name,
           "draft_vram_bytes": dp.gpu_total, "target_gpu_layers_before": target.gpu_layers,
           "target_gpu_layers_with_draft": tp.gpu_layers, "fits": dp.fits and tp.fits}
    if not out["fits"]:
        out.update({"tok_s": None, "speedup": None, "break_even_acceptance": None, "best_n_draft": None,
                    "error": (dp.error or tp.error)})
        return out
    t_draft = pm.decode_step_time(dp, dp.machine, context=context)["total_s"]
    t1 = pm.decode_step_time(tp, tp.machine, context=context)["total_s"]

    def rate(a, n):
        t_verify = pm.decode_step_time(tp, tp.machine, context=context, batch=n + 1)["total_s"]
        return expected_tokens(a, n) / (n * t_draft + t_verify), t_verify

    tok_s, t_verify = rate(acceptance, n_draft)
    # break-even: the acceptance at which drafting matches plain decoding (bisection; E grows with a)
    lo, hi = 0.0, 1.0
    if rate(1.0, n_draft)[0] < base["tok_per_s"]:
        be = None          # even perfect acceptance does not pay: the draft is too slow
    elif rate(0.0, n_draft)[0] >= base["tok_per_s"]:
        be = 0.0
    else:
        for _ in range(50):
            mid = (lo + hi) / 2
            if rate(mid, n_draft)[0] < base["tok_per_s"]:
                lo = mid
            else:
                hi = mid
        be = hi
    best = max(range(1, 9), key=lambda n: rate(acceptance, n)[0])
    curve = [{"acceptance": a / 20, "tok_s": rate(a / 20, n_draft)[0]} for a in range(0, 21)]
    out.update({"t_draft_s": t_draft, "t_verify_s": t_verify, "t_target_s": t1, "round_s": n_draft * t_draft + t_verify,
                "tok_s": tok_s, "speedup": tok_s / base["tok_per_s"], "break_even_acceptance": be,
                "draft_cost_ratio": t_draft / base["total_s"], "best_n_draft": best,
                "best_tok_s": rate(acceptance, best)[0], "pays": tok_s > base["tok_per_s"], "curve": curve})
    out["flags"] = {
        "llama.cpp": f"-md {pm.gguf_filename(pm.MODELS[draft_model_key], dp.quant)} --spec-draft-n-max {n_draft}",
        "vLLM": "--speculative-config '{\"model\": \"<draft HF repo>\", \"num_speculative_tokens\": "
                f"{n_draft}, \"method\": \"draft_model\"}}'",
        "SGLang": f"--speculative-algorithm STANDALONE --speculative-draft-model-path <draft> "
                  f"--speculative-num-draft-tokens {n_draft + 1}",
    }
    return out
