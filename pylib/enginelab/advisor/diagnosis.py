"""Diagnoses: one per row of the module's "Where Bottlenecks Happen" table, each with its evidence and the
changes that fix it (computed by running perf_model again), and advise(), which runs them all."""

from __future__ import annotations

from dataclasses import replace

import perf_model as pm

from ..checks import brief, check
from .setup import (
    THREAD_CONTENTION,
    Change,
    Finding,
    Outcome,
    Setup,
    ctx_flags,
    decode_setup,
    evaluate,
    gb_text,
    kv_flags,
    place_setup,
    rate_text,
    setup_from_placement,
    setup_from_state,
    thread_factor,
    try_change,
    with_ngl,
)

# ---------------------------------------------------------------------------
# Thresholds: when a symptom counts as a bottleneck (choices, not measurements)
# ---------------------------------------------------------------------------
KV_LONG_CONTEXT_SHARE = 0.25  # KV bytes read per token >= 25% of the weight bytes read
PCIE_PREFILL_SHARE = 0.15  # PCIe weight copies >= 15% of the prompt's processing time
PREFILL_SLOW_S = 1.0  # ...and the prompt takes at least a second
QUALITY_FLOOR_BPW = 3.0  # smaller quants (and the Q2_K mixes) are not suggested: quality drops steeply
CTX_LADDER = (4096, 8192, 16384, 32768, 65536, 131072)

CAUSES = (
    "over_ask",
    "sysmem_spill",
    "uneven_split",
    "partial_offload",
    "kv_competes",
    "kv_overflow_long_context",
    "pp_bound_by_pcie",
    "too_many_threads",
    "too_few_threads",
    "concurrency_cap",
    "throughput_flat",
)

# ---------------------------------------------------------------------------
# The diagnoses
# ---------------------------------------------------------------------------


def quant_ladder(s: Setup) -> list:
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
        edits, apply = with_ngl(s, {"kv": kv2}, {"kv": kv2})
        note = (
            "a quantized V cache needs flash attention (-fa on); q8_0 keeps quality close to f16"
            if kv2 == "q8_0"
            else "q4_0 K/V costs some accuracy; try q8_0 first"
        )
        c = try_change(s, o, f"-ctk {kv2} -ctv {kv2} -fa on", kv_flags(kv2), apply, edits, note=note)
        if c:
            out.append(c)
    tgt = _ctx_target(s)
    if tgt:
        edits, apply = with_ngl(s, {"ctx": tgt}, {"ctx": tgt})
        c = try_change(
            s,
            o,
            f"-c {tgt}",
            ctx_flags(tgt),
            apply,
            edits,
            note=f"holds {tgt:,} tokens: enough for {max(s.tokens, s.prompt):,} in this conversation",
        )
        if c:
            out.append(c)
    return out


def _quant_changes(s: Setup, o: Outcome, ngl=None) -> list:
    """The next smaller preset, the first one at least 3/4 of a bit per weight smaller (one quality
    class down, e.g. Q4_K_M -> Q3_K_M), and the largest one that fits entirely (each if different)."""
    ladder = quant_ladder(s)
    if not ladder:
        return []
    picks = [ladder[0]]
    cur_bpw = (
        8.0
        * pm.weight_bytes(s.model, s.quant)["total"]
        / sum(r["n_elements"] for r in pm.quantize_plan(s.model, s.quant))
    )
    step = next((x for x in ladder if x[2] <= cur_bpw - 0.75), None)
    if step and step not in picks:
        picks.append(step)
    full = s.model.n_layers + 1
    for q, b, bpw in ladder:
        try:
            p = place_setup(s.changed(quant=q, ngl=None if ngl is None else ngl))
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
            edits, apply = with_ngl(s, edits, apply)
        c = try_change(
            s,
            o,
            f"{pm.quant_short(s.quant)} → {pm.quant_short(q)}",
            {
                "llama.cpp": f"-m {pm.gguf_filename(s.model, q)} (llama-quantize ... {q})",
                "vLLM": "a smaller AWQ/GPTQ checkpoint (vLLM does not take llama.cpp presets)",
                "SGLang": "a smaller AWQ/GPTQ checkpoint",
            },
            apply,
            edits,
            note=f"{bpw:.2f} bits per weight, {gb_text(b)} of weights: a smaller file, some loss of quality",
        )
        if c:
            out.append(c)
    return out


def moe_changes(s: Setup, o: Outcome) -> list:
    m = s.model
    if not m.is_moe or s.machine.gpu is None:
        return []
    full = m.n_layers + 1
    best = None
    for n in range(0, m.n_layers + 1):
        try:
            p = place_setup(s.changed(ngl=full, n_cpu_moe=n))
        except ValueError:
            return []
        if p.fits:
            best = n
            break
    if best is None or (best == s.n_cpu_moe and s.ngl == full):
        return []
    c = try_change(
        s,
        o,
        f"-ngl {full} --n-cpu-moe {best}",
        {
            "llama.cpp": f"-ngl {full} --n-cpu-moe {best}",
            "vLLM": "no per-expert offload; --cpu-offload-gb streams weights over PCIe every pass",
            "SGLang": "no per-expert offload; --cpu-offload-gb",
        },
        {"ngl": full, "n_cpu_moe": best},
        {"ngl": full, "n_cpu_moe": best},
        note=f"attention and shared weights of all {m.n_layers} layers on the GPU; the experts of the first "
        f"{best} layers in RAM, where a token reads only {m.num_experts_per_tok} of {m.n_expert}",
    )
    return [c] if c else []


def _ngl_change(s: Setup, o: Outcome) -> list:
    if s.ngl is None or s.machine.gpu is None:
        return []
    c = try_change(
        s,
        o,
        "-ngl auto",
        {
            "llama.cpp": "-ngl auto (or leave it out: --fit chooses)",
            "vLLM": "--gpu-memory-utilization 0.85",
            "SGLang": "--mem-fraction-static 0.8",
        },
        {"ngl": "auto"},
        {"ngl": None},
    )
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
    ev = {
        "failing_device": p.failing_device,
        "requested_bytes": p.requested_bytes,
        "free_bytes": p.free_bytes,
        "overflow_bytes": p.overflow_bytes,
        "n_gpu_layers": p.n_gpu_layers,
        "n_ctx": s.ctx,
        "kv_bytes": pm.kv_cache_bytes(s.model, s.ctx, s.kv),
        "weight_bytes": pm.weight_bytes(s.model, s.quant)["total"] if s.quant else p.gpu_weights + p.cpu_weights,
    }
    text = [
        f"{p.failing_device} needs {gb_text(p.requested_bytes)} but has {gb_text(p.free_bytes)} free "
        f"(over by {gb_text(p.overflow_bytes)}): llama.cpp stops at load with an allocation error.",
        f"At -c {s.ctx:,} the KV cache alone is {gb_text(ev['kv_bytes'])} ({s.kv}); "
        f"the weights are {gb_text(ev['weight_bytes'])}.",
    ]
    if p.failing_device.startswith("GPU"):
        text.append(
            "On Windows the NVIDIA driver (536.40 and later) may instead spill the excess into shared system "
            "memory: no error, but everything runs at PCIe speed. The fallback can be turned off per "
            "application in the NVIDIA Control Panel (driver 546.01+)."
        )
    elif p.failing_device in ("RAM", "unified memory"):
        text.append(
            "With mmap the load may even start, but then the OS pages weights from the drive on every "
            "token: the machine stutters and the disk is busy. --mlock only helps if it fits."
        )
    changes = _ngl_change(s, o)
    # keep the user's -ngl where possible: what else would make it load?
    pinned = s.ngl
    changes += _kv_changes(s, o)  # with -ngl auto: --fit re-chooses
    if pinned is not None:
        # the same -ngl with a shorter context or a smaller KV type
        for ctx in sorted((c for c in CTX_LADDER if max(s.tokens, s.prompt) <= c < s.ctx), reverse=True):
            c = try_change(
                s,
                o,
                f"-c {ctx} (keeping -ngl {pinned})",
                ctx_flags(ctx),
                {"ctx": ctx},
                {"ctx": ctx},
                note="the longest context that loads with this -ngl",
            )
            if c:
                changes.append(c)
                break
        kv2 = _smaller_kv(s.kv)
        if kv2:
            c = try_change(
                s, o, f"-ctk {kv2} -ctv {kv2} -fa on (keeping -ngl {pinned})", kv_flags(kv2), {"kv": kv2}, {"kv": kv2}
            )
            if c:
                changes.append(c)
    changes += _quant_changes(s, o, ngl=pinned)
    changes += moe_changes(s, o)
    changes += split_changes(s, o)  # several GPUs: move layers to the card with room
    changes = _rank(changes)
    for c in changes:
        if "vLLM" in c.flags and c.title.startswith("-c "):
            c.flags["vLLM"] += " (or lower --gpu-memory-utilization next to a desktop)"
    return Finding(
        "over_ask", f"Asks for more memory than the {p.failing_device} has", ev, text, changes, severity=float("inf")
    )


# The drivers that back a GPU allocation that does not fit with shared system memory instead of failing it: NVIDIA's
# Windows driver from 536.40 ("CUDA - Sysmem Fallback Policy", on by default; "Prefer No Sysmem Fallback" turns it
# off per application from 546.01). ggml-cuda allocates with cudaMalloc, so a CUDA build on Windows loads an -ngl that
# over-asks and then reads the part that did not fit across PCIe on every token. On Linux the same load fails.
SYSMEM_FALLBACK_BACKENDS = ("cuda",)


def diagnose_sysmem_spill(s: Setup, o: Outcome) -> Finding | None:
    """A forced -ngl that does not fit one NVIDIA GPU: what Windows' sysmem fallback makes of it (a load that
    succeeds, then decodes at PCIe speed), and that the fix is the placement, not the card."""
    p = o.placement
    if p.fits or s.ngl is None or not p.failing_device.startswith("GPU") or len(s.machine.gpus) != 1:
        return None
    if pm.device_backend(s.machine, "gpu") not in SYSMEM_FALLBACK_BACKENDS or s.machine.unified:
        return None
    gpu = s.machine.gpus[0]
    # the same -ngl on this card with room for all of it: the speed the spill takes away
    try:
        room = replace(gpu, mem_gb=gpu.mem_gb + p.overflow_bytes / 1e9 + 2.0 * pm.DRIVER_RESERVE_MIB / 1024)
        roomy = evaluate(s.changed(machine=replace(s.machine, gpu=room)), prefill=False)
    except ValueError:  # a card as large as that is beyond the catalog's bounds: no estimate to give
        return None
    if not roomy.fits or not roomy.decode_tok_s or s.machine.pcie_gbs <= 0:
        return None
    link_s = p.overflow_bytes / (s.machine.pcie_gbs * 1e9)
    spilled = 1.0 / (1.0 / roomy.decode_tok_s + link_s)
    ev = {
        "overflow_bytes": p.overflow_bytes,
        "pcie_gbs": s.machine.pcie_gbs,
        "n_gpu_layers": p.n_gpu_layers,
        "fit_decode_tok_s": roomy.decode_tok_s,
        "spilled_decode_tok_s": spilled,
    }
    asked = "every layer" if p.n_gpu_layers > s.model.n_layers else f"{p.n_gpu_layers} layers"
    text = [
        f"On Windows, NVIDIA's driver (536.40 and later) does not refuse -ngl {s.ngl}: it puts the "
        f"{gb_text(p.overflow_bytes)} that do not fit in shared system memory (its sysmem fallback), and the load "
        "succeeds. On Linux the same load fails.",
        f"Every token then reads that part across PCIe ({s.machine.pcie_gbs:g} GB/s, at most): decode about "
        f"{rate_text(spilled)} instead of the {rate_text(roomy.decode_tok_s)} {asked} would give on a card with room.",
        "This is a placement question, not the card's speed: leave -ngl to --fit (it keeps a margin free), or set "
        '"CUDA - Sysmem Fallback Policy" to "Prefer No Sysmem Fallback" in the NVIDIA Control Panel '
        "(driver 546.01+) so that an over-ask fails loudly.",
    ]
    changes = _rank(_ngl_change(s, o))
    return Finding(
        "sysmem_spill",
        "On Windows this over-ask loads, then spills into system memory",
        ev,
        text,
        changes,
        severity=_severity(changes, spilled),
    )


def _ts_text(weights) -> str:
    return ",".join(f"{w:g}" for w in weights)


def split_changes(s: Setup, o: Outcome) -> list:
    """Several GPUs with -sm layer or row: a -ts that moves layers to the card with room. Tried: the layers per
    GPU --fit would choose (it fills the cards back to front), and each card's capacity less its margin."""
    mc = s.machine
    if not mc.multi_gpu or s.split_mode == "none":
        return []
    p = o.placement
    candidates = []  # (tensor_split, -ngl to pin with it or None)
    try:
        auto = place_setup(s.changed(tensor_split=None, ngl=None))
        if auto.fits:
            ngl = None if auto.n_gpu_layers == s.model.n_layers + 1 and s.ngl is None else auto.n_gpu_layers
            candidates.append((tuple(float(len(u.layers)) for u in auto.per_gpu), ngl))
    except ValueError:
        pass
    room = tuple(round(max(0.0, u.capacity - u.margin) / pm.GB, 1) for u in p.per_gpu)
    if any(room):
        candidates.append((room, None))
    out, seen = [], {s.tensor_split}
    for ts, ngl in candidates:
        if ts in seen or not any(ts):
            continue
        seen.add(ts)
        text = _ts_text(ts)
        edits, apply, title = {"tensor_split": ts}, {"ts": text}, f"-ts {text}"
        if ngl is not None:
            edits["ngl"], apply["ngl"], title = ngl, ngl, f"-ngl {ngl} -ts {text}"
        c = try_change(
            s,
            o,
            title,
            {"llama.cpp": title, "vLLM": "tensor parallelism splits every layer evenly: no per-GPU shares"},
            apply,
            edits,
            note="moves whole layers between the GPUs (llama.cpp splits them in proportion to -ts)",
        )
        if c:
            out.append(c)
    return out


def diagnose_uneven_split(s: Setup, o: Outcome) -> Finding | None:
    """Several GPUs: one card overflows, or layers run from RAM, while another card has room."""
    mc, p = s.machine, o.placement
    if not mc.multi_gpu or s.split_mode == "none" or (o.fits and p.full_offload):
        return None
    per_layer = (p.gpu_weights + p.cpu_weights) / (s.model.n_layers + 1)
    roomy = [u for u in p.per_gpu if u.free >= per_layer]
    over = [u for u in p.per_gpu if not u.fits]
    if not roomy or not (over or not p.full_offload):
        return None
    changes = _rank(split_changes(s, o))
    if not changes:
        return None
    best = max(roomy, key=lambda u: u.free)
    ev = {
        "free_bytes_by_gpu": tuple(u.free for u in p.per_gpu),
        "layers_by_gpu": tuple(len(u.layers) for u in p.per_gpu),
        "tensor_split": s.tensor_split,
    }
    where = f"GPU {best.index} ({best.name}) has {gb_text(best.free)} free"
    if over:
        title = f"GPU {over[0].index} ({over[0].name}) overflows while {where}"
    else:
        title = f"{s.model.n_layers + 1 - p.n_gpu_layers} layers run from RAM while {where}"
    text = [
        "Layers per GPU: "
        + ", ".join(
            f"GPU {u.index} ({u.name}) {len(u.layers)}, "
            + (f"{gb_text(u.free)} free" if u.free >= 0 else f"over by {gb_text(-u.free)}")
            for u in p.per_gpu
        )
        + (f" (-ts {_ts_text(s.tensor_split)})." if s.tensor_split else " (split by free memory)."),
        "llama.cpp gives each GPU a share of the layers in proportion to -ts (or to free memory), whatever each "
        "layer's KV cache and the output layer's compute buffer add; a -ts moves whole layers between the cards.",
    ]
    return Finding("uneven_split", title, ev, text, changes, severity=_severity(changes, o.decode_tok_s or 0.0))


def diagnose_partial_offload(s: Setup, o: Outcome) -> Finding | None:
    p = o.placement
    if not o.fits or s.machine.gpu is None or p.full_offload or s.machine.unified:
        return None
    d = o.decode
    n = s.model.n_layers
    full = place_setup(s.changed(ngl=n + 1))
    d_full = decode_setup(full, s, s.tokens)
    ev = {
        "cpu_share": d["cpu_share"],
        "gpu_layers": p.gpu_layers,
        "cpu_layers": n - p.gpu_layers,
        "n_layers": n,
        "output_on_gpu": p.output_on_gpu,
        "cpu_bytes_per_token": d["cpu_bytes"],
        "gpu_bytes_per_token": d["gpu_bytes"],
        "ram_bandwidth": s.machine.ram.bandwidth,
        "gpu_bandwidth": min(g.bandwidth for g in s.machine.gpus),  # the slowest card, with several
        "decode_tok_s": o.decode_tok_s,
        "all_on_gpu_tok_s": d_full["tok_per_s"],
    }
    text = [
        f"{n - p.gpu_layers} of {n} layers"
        + ("" if p.output_on_gpu else " and the output head")
        + f" run from system RAM: {d['cpu_share']:.0%} of each decode step is spent on the CPU side.",
        f"The CPU reads {gb_text(d['cpu_bytes'])} per token at {s.machine.ram.bandwidth_gbs:g} GB/s; "
        f"the GPU{'s read' if s.machine.multi_gpu else ' reads'} {gb_text(d['gpu_bytes'])} at "
        f"{' / '.join(f'{g.bandwidth_gbs:g}' for g in s.machine.gpus)} GB/s.",
        f"Decode {rate_text(o.decode_tok_s)}; if everything fit on the GPU it would be {rate_text(d_full['tok_per_s'])}.",
    ]
    changes = _kv_changes(s, o) + _quant_changes(s, o) + moe_changes(s, o) + _ngl_change(s, o)
    changes = _rank(changes)
    return Finding(
        "partial_offload",
        "Partial offload: layers in system RAM set the speed",
        ev,
        text,
        changes,
        severity=_severity(changes, o.decode_tok_s),
    )


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
    ev = {
        "kv_bytes": kv_all,
        "weight_bytes": w,
        "kv_to_weights": kv_all / w,
        "gpu_kv_bytes": p.gpu_kv,
        "gpu_capacity": p.gpu_capacity,
        "layers_worth": p.gpu_kv / per_layer,
        "n_ctx": s.ctx,
        "tokens_used": max(s.tokens, s.prompt),
    }
    text = [
        f"-c {s.ctx:,} reserves {gb_text(kv_all)} of {s.kv} KV cache at load, {kv_all / w:.0%} of the weights' "
        f"{gb_text(w)}; {gb_text(p.gpu_kv)} of it sits in VRAM, the room of about {ev['layers_worth']:.0f} layers.",
        f"This conversation uses {max(s.tokens, s.prompt):,} of the {s.ctx:,} tokens reserved.",
    ]
    changes = _rank(changes)
    return Finding(
        "kv_competes",
        "The KV cache takes VRAM that layers could use",
        ev,
        text,
        changes,
        severity=_severity(changes, o.decode_tok_s),
    )


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
    d0 = decode_setup(o.placement, s, 0)
    ev = {
        "context": s.tokens,
        "kv_bytes_per_token_read": kv_read,
        "weight_bytes_per_token_read": w_read,
        "kv_to_weights": kv_read / w_read,
        "tok_s_at_0": d0["tok_per_s"],
        "tok_s_now": o.decode_tok_s,
        "kv_bytes_per_context_token": pm.kv_bytes_per_token(s.model, s.kv),
    }
    text = [
        f"At {s.tokens:,} tokens every new token reads {gb_text(kv_read)} of KV cache besides {gb_text(w_read)} of "
        f"weights ({kv_read / w_read:.0%} as much).",
        f"Decode has fallen from {rate_text(d0['tok_per_s'])} on an empty context to {rate_text(o.decode_tok_s)}; "
        f"each 1,000 tokens of {s.kv} context add {gb_text(1000 * ev['kv_bytes_per_context_token'])}.",
    ]
    changes = []
    kv2 = _smaller_kv(s.kv)
    if kv2:
        edits, apply = with_ngl(s, {"kv": kv2}, {"kv": kv2})
        c = try_change(
            s,
            o,
            f"-ctk {kv2} -ctv {kv2} -fa on",
            kv_flags(kv2),
            apply,
            edits,
            note="halves the KV bytes read per token" if kv2 == "q8_0" else "costs some accuracy",
        )
        if c:
            changes.append(c)
    for key in _fewer_kv_heads_models(s):
        other = pm.MODELS[key]
        edits, apply = with_ngl(s, {"model": other}, {"model": key})
        if s.ctx > other.max_position_embeddings:
            continue
        c = try_change(
            s,
            o,
            f"{s.model.name} → {other.name}",
            {
                "llama.cpp": f"-m {pm.gguf_filename(other, s.quant)}",
                "vLLM": f"a {other.name} checkpoint",
                "SGLang": f"a {other.name} checkpoint",
            },
            apply,
            edits,
            note=f"{other.num_key_value_heads} KV heads x {other.num_hidden_layers} layers: "
            f"{pm.kv_bytes_per_token(other, s.kv) / 1024:.0f} KiB per token instead of "
            f"{ev['kv_bytes_per_context_token'] / 1024:.0f} KiB (a different model: check its quality)",
        )
        if c:
            changes.append(c)
    for cap in sorted((c for c in CTX_LADDER if c < s.tokens), reverse=True)[:1]:
        edits = {"ctx": cap, "tokens": cap, "prompt": min(s.prompt, cap)}
        if s.ngl is not None:
            edits["ngl"] = None
        apply = {"ctx": cap, "tokens": cap, **({"ngl": "auto"} if s.ngl is not None else {})}
        c = try_change(
            s,
            o,
            f"-c {cap}",
            ctx_flags(cap),
            apply,
            edits,
            note=f"caps the conversation at {cap:,} tokens: older turns fall out (or summarise them)",
        )
        if c:
            changes.append(c)
    changes = _rank(changes)
    return Finding(
        "kv_overflow_long_context",
        "Long context: the KV cache rivals the weights",
        ev,
        text,
        changes,
        severity=_severity(changes, o.decode_tok_s),
    )


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
    ev = {
        "prompt_tokens": s.prompt,
        "prefill_s": f["total_s"],
        "pcie_s": pcie,
        "pcie_share": share,
        "pcie_bytes": cpu_w,
        "pcie_copies": n_copies,
        "pcie_gbs": s.machine.pcie_gbs,
        "prefill_tok_s": f["tok_per_s"],
        "op_offload": s.op_offload,
    }
    if s.op_offload:
        text = [
            f"A prompt of {s.prompt:,} tokens takes {f['total_s']:.1f} s; {pcie:.1f} s of it ({share:.0%}) is "
            f"copying the RAM layers' weights ({gb_text(cpu_w)} in {n_copies} cop{'y' if n_copies == 1 else 'ies'}) "
            f"over PCIe at {s.machine.pcie_gbs:g} GB/s so the GPU can do their matmuls (op offload)."
        ]
        off = pm.prefill_time(o.placement, s.machine, n_tokens=s.prompt, op_offload=False)
        ev["no_op_offload_tok_s"] = off["tok_per_s"]
        text.append(
            f"Keep op offload on: without it the CPU would do that arithmetic at "
            f"{rate_text(off['tok_per_s'])} instead of {rate_text(f['tok_per_s'])}."
        )
    else:
        text = [
            f"--no-op-offload: the CPU computes its layers' prompt matmuls itself; the prompt runs at "
            f"{rate_text(f['tok_per_s'])} ({f['total_s']:.1f} s)."
        ]
    changes = []
    if not s.op_offload:
        c = try_change(
            s,
            o,
            "--op-offload (default on)",
            {"llama.cpp": "drop --no-op-offload"},
            {},
            {"op_offload": True},
            metric="prefill_tok_s",
        )
        if c:
            changes.append(c)
    for ub in (1024, 2048):
        if ub <= s.n_ubatch:
            continue
        b = max(s.n_batch, ub, min(8192, 1 << max(0, (s.prompt - 1)).bit_length()))
        edits = {"n_ubatch": ub, "n_batch": b}
        if s.ngl is not None:
            edits["ngl"] = None
        c = try_change(
            s,
            o,
            f"-b {b} -ub {ub}",
            {
                "llama.cpp": f"-b {b} -ub {ub}",
                "vLLM": f"--max-num-batched-tokens {b}",
                "SGLang": f"--chunked-prefill-size {b}",
            },
            {"ub": ub, "b": b, **({"ngl": "auto"} if s.ngl is not None else {})},
            edits,
            metric="prefill_tok_s",
            note=f"a {ub}-token micro-batch reads each weight once per {ub} tokens, but its compute buffer takes VRAM",
        )
        if c:
            changes.append(c)
    for c in _quant_changes(s, o):
        c2 = try_change(
            s,
            o,
            c.title,
            c.flags,
            c.apply,
            {"quant": c.apply["quant"], **({"ngl": None} if s.ngl is not None else {})},
            metric="prefill_tok_s",
            note=c.note + "; fewer bytes cross PCIe",
        )
        if c2:
            changes.append(c2)
    changes = _rank(changes)
    for c in changes:
        c.flags.setdefault(
            "prefix caching",
            "llama.cpp --cache-prompt (on) --cache-reuse 256; vLLM "
            "--enable-prefix-caching; SGLang --schedule-policy lpm",
        )
    return Finding(
        "pp_bound_by_pcie",
        "Prompt processing is bound by PCIe copies",
        ev,
        text,
        changes,
        severity=_severity(changes, f["tok_per_s"]),
    )


def diagnose_threads(s: Setup, o: Outcome) -> Finding | None:
    if not o.fits or s.threads is None or s.threads == s.perf_cores:
        return None
    if o.decode["cpu_s"] <= 0:
        return None
    if s.threads < s.perf_cores:
        return _too_few_threads(s, o)
    f = thread_factor(s.threads, s.perf_cores)
    ev = {
        "n_threads": s.threads,
        "perf_cores": s.perf_cores,
        "cpu_time_factor": f,
        "cpu_s": o.decode["cpu_s"],
        "cpu_share": o.cpu_share,
        "contention": THREAD_CONTENTION,
    }
    text = [
        f"-t {s.threads} on {s.perf_cores} physical performance cores: decode on the CPU is memory-bound, so "
        f"the {s.threads - s.perf_cores} extra threads add contention, not bandwidth.",
        f"Model: the CPU part of each step takes {f:.2f}x as long "
        f"({o.decode['cpu_s'] * 1e3:.1f} ms, {o.cpu_share:.0%} of the step).",
    ]
    c = try_change(
        s,
        o,
        f"-t {s.perf_cores}",
        {"llama.cpp": f"-t {s.perf_cores} (or leave -t out: the default counts physical cores)"},
        {"threads": s.perf_cores},
        {"threads": s.perf_cores},
    )
    changes = [c] if c else []
    return Finding(
        "too_many_threads", "Too many CPU threads", ev, text, changes, severity=_severity(changes, o.decode_tok_s)
    )


def _too_few_threads(s: Setup, o: Outcome) -> Finding | None:
    """-t below the physical performance cores while the CPU works: a core's dequantization and dot products
    (and its share of the memory bandwidth) set the pace, so more threads are faster up to the cores. Reported
    only when the model, run again with -t at the cores, gains (MIN_GAIN)."""
    ev = {
        "n_threads": s.threads,
        "perf_cores": s.perf_cores,
        "cpu_s": o.decode["cpu_s"],
        "cpu_share": o.cpu_share,
    }
    c = try_change(
        s,
        o,
        f"-t {s.perf_cores}",
        {"llama.cpp": f"-t {s.perf_cores} (or leave -t out: the default counts physical cores)"},
        {"threads": s.perf_cores},
        {"threads": s.perf_cores},
    )
    if c is None:
        return None
    text = [
        f"-t {s.threads} on {s.perf_cores} physical performance cores, while the CPU does {o.cpu_share:.0%} of "
        f"each decode step ({o.decode['cpu_s'] * 1e3:.1f} ms): on few threads a core's dequantization and dot "
        "products, and its own share of the memory bandwidth, set the pace.",
        f"With -t {s.perf_cores} the model gives {c.after['decode_tok_s']:.1f} tok/s "
        f"instead of {c.before['decode_tok_s']:.1f}.",
    ]
    return Finding("too_few_threads", "Too few CPU threads", ev, text, [c], severity=_severity([c], o.decode_tok_s))


def diagnose_concurrency(s: Setup, o: Outcome) -> Finding | None:
    if not o.fits or (s.users <= 1 and s.n_parallel <= 1):
        return None
    per_req = max(s.tokens, s.prompt)
    pool_seqs = s.ctx // max(1, per_req)
    capped_by_slots = s.users > s.n_parallel
    capped_by_pool = pool_seqs < min(s.users, s.n_parallel)
    if not (capped_by_slots or capped_by_pool):
        return None
    ev = {
        "users": s.users,
        "n_parallel": s.n_parallel,
        "n_ctx": s.ctx,
        "tokens_per_request": per_req,
        "pool_sequences": pool_seqs,
        "active": o.active,
        "aggregate_tok_s": o.aggregate_tok_s,
        "per_user_tok_s": o.aggregate_tok_s * o.active / s.users / max(1, o.active),
    }
    text = []
    if capped_by_slots:
        text.append(
            f"{s.users} concurrent requests but -np {s.n_parallel}: {s.users - s.n_parallel} wait in the "
            f"queue while {o.active} decode{'s' if o.active == 1 else ''}."
        )
    if capped_by_pool:
        text.append(
            f"The KV pool (-c {s.ctx:,}, shared by the slots) holds {pool_seqs} request"
            f"{'' if pool_seqs == 1 else 's'} of {per_req:,} tokens: the rest wait or are preempted."
        )
    verb = "sequence at once gives" if o.active == 1 else "sequences at once give"
    text.append(
        f"{o.active} {verb} {rate_text(o.aggregate_tok_s)} in all; decode is memory-bound, so a batch of "
        f"{s.users} reads the weights once for all of them."
    )
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
        c = try_change(
            s,
            o,
            f"-np {want} -c {ctx}" + kvf,
            {
                "llama.cpp": f"-np {want} -c {ctx}{kvf}",
                "vLLM": f"--max-num-seqs {max(want, 8)} --max-model-len {per_req}{vkv} (paged KV: the pool is what "
                f"--gpu-memory-utilization leaves)",
                "SGLang": f"--max-running-requests {want} --context-length {per_req}"
                + (" --kv-cache-dtype fp8_e4m3" if kv != s.kv else ""),
            },
            apply,
            edits,
            metric="aggregate_tok_s",
            note=f"each of the {want} slots gets {ctx // want:,} tokens of the shared pool",
        )
        if c:
            changes.append(c)
    changes = _rank(changes)
    return Finding(
        "concurrency_cap",
        "Concurrency is capped: throughput flat as users are added",
        ev,
        text,
        changes,
        severity=_severity(changes, o.aggregate_tok_s),
    )


SIM_MAX_USERS = 64  # the flat-throughput check simulates up to this many users (its cost grows with them)
REPLY_TOKENS = 128  # the reply simulated when the conversation is no longer than the prompt


def _sim_point(p, users: int, n_parallel: int, prompt: int, reply: int):
    from . import load  # the serving simulation and the KV managers: imported only when users > 1

    return load.run("llama.cpp", p, users, prompt, reply, n_parallel=n_parallel, kv_unified=True)


def diagnose_flat_throughput(s: Setup, o: Outcome) -> Finding | None:
    """Throughput flat as users are added, from llama-server's serving simulation (enginelab.serving): the
    setup's users against half as many, each sending a prompt of `prompt` tokens and a reply of the rest of
    `tokens` (REPLY_TOKENS if none is left); flat when the second half adds less than load.FLAT_GAIN. The cause
    (advisor.load): the -np slots, the KV pool (-c, shared by the slots: --kv-unified) or compute. The change
    for a cap or the pool is simulated too."""
    if not o.fits or s.users < 2 or s.users > SIM_MAX_USERS or s.machine.multi_gpu:
        return None
    from . import load

    prompt = s.prompt
    reply = s.tokens - s.prompt if s.tokens > s.prompt else REPLY_TOKENS
    p = o.placement
    np_ = max(1, s.n_parallel)
    try:
        lo, _ = _sim_point(p, s.users // 2, np_, prompt, reply)
        hi, res = _sim_point(p, s.users, np_, prompt, reply)
    except ValueError:
        return None  # a request longer than the context: the other diagnoses say so
    g = load.gain(lo, hi)
    if hi.completed == 0 or g >= load.FLAT_GAIN:
        return None
    pool = res.pool_tokens
    cause = load.cause_of("llama.cpp", p, lo, hi, prompt, reply, pool, n_parallel=np_)
    per_req = prompt + reply
    ev = {
        "users": s.users,
        "half_users": lo.concurrency,
        "tok_s_half": lo.output_throughput,
        "tok_s": hi.output_throughput,
        "gain": g,
        "cause": cause,
        "n_parallel": np_,
        "kv_pool_tokens": pool,
        "request_tokens": per_req,
        "mean_ttft_ms": hi.mean_ttft_ms,
        "mean_tpot_ms": hi.mean_tpot_ms,
        "preemptions": hi.preemptions,
    }
    label = {"cap": "a concurrency cap", "kv": "the KV pool", "compute": "compute"}[cause]
    text = [
        f"Simulated llama-server with {lo.concurrency} and then {s.users} users, each sending {prompt:,} prompt "
        f"tokens and reading {reply:,}: {rate_text(lo.output_throughput)} and {rate_text(hi.output_throughput)} "
        f"in all ({round(g * 100) or 0:+d}% for twice the users). Mean TTFT at {s.users} users: {hi.mean_ttft_ms:,.0f} ms.",
        f"The cause is {label}: " + load.cause_text("llama.cpp", cause, hi, np_, pool, per_req),
    ]
    if cause == "compute":
        text.append(
            "No flag adds arithmetic: fewer users per server, a smaller quant (less to read leaves more of the "
            "step to compute only on a bandwidth-bound GPU) or a faster GPU."
        )
    changes = []
    if cause in ("cap", "kv"):
        want_np = max(np_, s.users) if cause == "cap" else np_
        ctx = max(s.ctx, -(-min(s.users, want_np) * per_req // 256) * 256)
        edits, apply = {"n_parallel": want_np, "ctx": ctx}, {"np": want_np, "ctx": ctx}
        try:
            p2 = place_setup(s.changed(**edits))
            if p2.fits:
                after, _ = _sim_point(p2, s.users, want_np, prompt, reply)
                gain_abs = after.output_throughput - hi.output_throughput
                if gain_abs > 0:
                    changes.append(
                        Change(
                            f"-np {want_np} -c {ctx} -kvu",
                            {"llama.cpp": f"-np {want_np} -c {ctx} --kv-unified"},
                            apply,
                            {"aggregate_tok_s": hi.output_throughput, "mean_ttft_ms": hi.mean_ttft_ms},
                            {"aggregate_tok_s": after.output_throughput, "mean_ttft_ms": after.mean_ttft_ms},
                            metric="aggregate_tok_s",
                            gain=gain_abs,
                            effect=f"{rate_text(hi.output_throughput)} → {rate_text(after.output_throughput)} "
                            f"for {s.users} users (simulated)",
                            note=f"{want_np} slots share {ctx:,} cells: {ctx // max(1, min(s.users, want_np)):,} "
                            "per request",
                        )
                    )
        except ValueError:
            pass
    return Finding(
        "throughput_flat",
        f"Throughput flat as users are added: {label}",
        ev,
        text,
        changes,
        severity=_severity(changes, hi.output_throughput),
    )


DIAGNOSES = (
    diagnose_over_ask,
    diagnose_sysmem_spill,
    diagnose_uneven_split,
    diagnose_partial_offload,
    diagnose_kv_competes,
    diagnose_kv_long_context,
    diagnose_pp_pcie,
    diagnose_threads,
    diagnose_concurrency,
    diagnose_flat_throughput,
)


# ---------------------------------------------------------------------------
# advise()
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


def advise(
    placement,
    machine=None,
    context: int = 2000,
    n_parallel: int = 1,
    n_threads=None,
    concurrent_users=None,
    prompt_tokens=None,
    perf_cores=None,
    op_offload: bool = True,
) -> list:
    """The bottlenecks of a placement, each with evidence and ranked changes.

    placement: from perf_model.place().  context: tokens of conversation at which decode is
    judged.  n_parallel: llama.cpp -np slots.  concurrent_users: requests the workload makes at
    once (default n_parallel).  n_threads: -t (None: llama.cpp's default, the physical cores).
    prompt_tokens: prompt length for prefill (default `context`).  perf_cores: physical
    performance cores (default: CPU_CORES for the machine).  Returns a list of Finding."""
    s = setup_from_placement(
        placement, machine, context, prompt_tokens, n_parallel, n_threads, concurrent_users, perf_cores, op_offload
    )
    return advise_setup(s)


def advise_state(state) -> list:
    """Findings for the calculator's state dict (see the module docstring)."""
    return advise_setup(setup_from_state(state))


def apply_change(state: dict, change) -> dict:
    """The state after a change (what the app's apply button does)."""
    check(isinstance(state, dict), "state", f"must be a dict, got {brief(state)}")
    a = change.apply if isinstance(change, Change) else change.get("apply") if isinstance(change, dict) else None
    check(isinstance(a, dict), "change", f"must be a Change or a dict with an 'apply' dict, got {brief(change)}")
    return {**state, **a}
