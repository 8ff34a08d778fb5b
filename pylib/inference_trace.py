"""inference_trace: what the hardware does, step by step, when a model loads and runs.

The data behind the course's step-through figures.  Every byte count and every
time here comes from perf_model's accounting (quantize_plan, place,
decode_step_time, prefill_steps): this module only orders those numbers into
steps and names the memory tier each step touches.  It adds no formula of its
own beyond dividing a device's time among the stages that share it.

    load_trace(model, machine, quant, n_ctx, ...)   launching llama.cpp: header, mmap,
                                                    layer uploads, KV cache, buffers, first token
    phase_trace(placement, machine, "prefill"|"decode", n_tokens=, context=)
                                                    one forward pass, stage by stage per device
    decode_curve(placement, machine, contexts)      decode tok/s as the context grows

Tiers: "drive" (NVMe), "ram" (system RAM, also the OS page cache), "pcie"
(the host <-> GPU link), "vram" (GPU memory) and "unified" (Apple unified memory).

Pure Python, standard library only.
"""

from __future__ import annotations

import perf_model as pm
from enginelab.checks import brief, check_int

TIERS = ("drive", "ram", "pcie", "vram", "unified")

# The module's four loading scenarios and its two phase scenarios, as presets.
LOAD_SCENARIOS = {
    "fits-24gb": {
        "label": "8B model, fits on a 24 GB GPU",
        "model": "llama-3.1-8b",
        "machine": "rtx4090",
        "quant": "Q4_K_M",
        "n_ctx": 8192,
    },
    "split-16gb": {
        "label": "32B model split between a 16 GB GPU and RAM",
        "model": "qwen2.5-32b",
        "machine": "rtx4060ti",
        "quant": "Q4_K_M",
        "n_ctx": 8192,
    },
    "apple-unified": {
        "label": "8B model on Apple unified memory",
        "model": "llama-3.1-8b",
        "machine": "m4pro",
        "quant": "Q4_K_M",
        "n_ctx": 8192,
    },
    "cpu-only": {
        "label": "8B model, CPU only",
        "model": "llama-3.1-8b",
        "machine": "cpu-ddr5",
        "quant": "Q4_K_M",
        "n_ctx": 8192,
    },
}
PHASE_SCENARIOS = {
    "fits": {
        "label": "8B model that fits on the GPU",
        "model": "llama-3.1-8b",
        "machine": "rtx4060ti",
        "quant": "Q4_K_M",
        "n_ctx": 8192,
        "n_tokens": 2000,
        "context": 2000,
    },
    "partial": {
        "label": "32B model, partial offload",
        "model": "qwen2.5-32b",
        "machine": "rtx4060ti",
        "quant": "Q4_K_M",
        "n_ctx": 8192,
        "n_tokens": 2000,
        "context": 2000,
    },
}


def _err(arg: str, msg: str) -> ValueError:
    return ValueError(f"{arg}: {msg}")


def _step(what: str, tier: str, nbytes: float, seconds: float, **extra) -> dict:
    d = {"what": what, "tier": tier, "bytes": float(nbytes), "seconds": float(seconds)}
    d.update(extra)
    return d


# ---------------------------------------------------------------------------
# Loading a model
# ---------------------------------------------------------------------------


def _block_bytes(p: pm.Placement) -> tuple:
    """Bytes per block on the GPU and in RAM, and the head/embedding bytes (from quantize_plan)."""
    m = p.model
    gpu = [0.0] * m.n_layers
    cpu = [0.0] * m.n_layers
    head = embd = 0.0
    for r in pm.quantize_plan(m, p.quant):
        il = r["layer"]
        if r["cls"] == "token_embd":
            embd += r["bytes"]
        elif il < 0:
            head += r["bytes"]
        elif r["cls"].endswith("_exps") and il < p.n_cpu_moe:
            cpu[il] += r["bytes"]
        elif p.layer_device[il] == "gpu":
            gpu[il] += r["bytes"]
        else:
            cpu[il] += r["bytes"]
    return gpu, cpu, head, embd


def load_trace(
    model,
    machine,
    quant: str = "Q4_K_M",
    n_ctx: int = 8192,
    kv_type: str = "f16",
    n_gpu_layers=None,
    warm: bool = False,
    n_cpu_moe: int = 0,
) -> list:
    """The steps of a llama.cpp launch, in order (see the module docstring).

    Cold: the file comes from the drive.  Warm (a second launch): the OS page
    cache still holds it, so every read that went to the drive is served from
    RAM instead; nothing else changes.  Each step: what, tier, bytes, seconds,
    and `source` ('drive' or 'page cache') for steps that read the file; the
    first token also splits its bytes into gpu_read_bytes and cpu_read_bytes
    (its `tier` is the device that takes longer)."""
    if not isinstance(warm, bool):
        raise _err("warm", f"must be True or False, got {brief(warm)}")
    p = pm.place(model, machine, quant, n_ctx, kv_type, n_gpu_layers=n_gpu_layers, n_cpu_moe=n_cpu_moe)
    m, mc = p.model, p.machine
    ram_bw = mc.ram.bandwidth
    file_bw = ram_bw if warm else mc.drive_gbs * pm.GB  # page cache or NVMe
    src = "page cache" if warm else "drive"
    file_tier = "ram" if warm else "drive"
    steps = []
    head_bytes = pm.gguf_metadata_bytes(m)
    steps.append(
        _step(
            "Read the GGUF header: metadata, tokenizer, tensor table",
            file_tier,
            head_bytes,
            head_bytes / file_bw,
            source=src,
            reads_file=True,
        )
    )
    total_file = pm.file_bytes(m, quant)
    steps.append(
        _step(
            "mmap the whole file: addressable, nothing read yet",
            "ram",
            0.0,
            0.0,
            mapped_bytes=total_file,
            reads_file=False,
        )
    )
    gpu, cpu, head, embd = _block_bytes(p)
    if mc.gpu is not None and not mc.unified:
        link = mc.pcie
        for il in range(m.n_layers):
            if gpu[il] <= 0:
                continue
            # read from the file and copy to VRAM: bounded by the slower of the two
            t = gpu[il] / min(file_bw, link)
            steps.append(
                _step(
                    f"Upload block {il} to VRAM ({src} -> PCIe -> VRAM)",
                    "pcie",
                    gpu[il],
                    t,
                    source=src,
                    reads_file=True,
                    layer=il,
                    via=file_tier,
                    file_read_s=gpu[il] / file_bw,
                    link_s=gpu[il] / link,
                )
            )
        if p.output_on_gpu:
            t = head / min(file_bw, link)
            steps.append(
                _step(
                    "Upload the output head to VRAM",
                    "pcie",
                    head,
                    t,
                    source=src,
                    reads_file=True,
                    layer=m.n_layers,
                    via=file_tier,
                    file_read_s=head / file_bw,
                    link_s=head / link,
                )
            )
    kv_tier = "unified" if mc.unified else "vram"
    if p.gpu_kv > 0:
        # llama.cpp allocates the cache for all n_ctx cells and clears it (a memset)
        dev = mc.gpu
        steps.append(
            _step(
                f"Allocate and clear the KV cache of the GPU blocks ({n_ctx} cells, {kv_type})",
                kv_tier,
                p.gpu_kv,
                p.gpu_kv / dev.bandwidth,
                reads_file=False,
            )
        )
    if p.cpu_kv > 0:
        steps.append(
            _step(
                f"Allocate and clear the KV cache of the CPU blocks ({n_ctx} cells, {kv_type})",
                "unified" if mc.unified else "ram",
                p.cpu_kv,
                p.cpu_kv / ram_bw,
                reads_file=False,
            )
        )
    if p.gpu_compute > 0:
        steps.append(
            _step(
                "Reserve the GPU compute buffer (one -ub micro-batch of activations)",
                kv_tier,
                p.gpu_compute,
                0.0,
                reads_file=False,
            )
        )
    steps.append(
        _step(
            "Reserve the host compute buffer", "unified" if mc.unified else "ram", p.cpu_compute, 0.0, reads_file=False
        )
    )
    # First token: the pages the CPU (or the Metal GPU, which uses the mapping in
    # place) touches are read on first use: lazily, from the drive when cold.
    lazy = sum(cpu) + embd + (0.0 if (p.output_on_gpu and not mc.unified) else head)
    if mc.unified:
        lazy += sum(gpu)
    lazy_tier = "unified" if mc.unified else "ram"
    if lazy > 0:
        steps.append(
            _step(
                f"Page in the weights used in place on first touch ({src})",
                file_tier,
                lazy,
                lazy / file_bw,
                source=src,
                reads_file=True,
                lands_in=lazy_tier,
            )
        )
    d = pm.decode_step_time(p, mc, context=0)
    first_tier = "unified" if mc.unified else ("vram" if p.gpu_layers and d["gpu_s"] >= d["cpu_s"] else "ram")
    steps.append(
        _step(
            "First token: one forward pass over every weight",
            first_tier,
            d["gpu_bytes"] + d["cpu_bytes"],
            d["total_s"],
            reads_file=False,
            gpu_read_bytes=d["gpu_bytes"],  # of those, read by the GPU (from VRAM, or unified memory)
            cpu_read_bytes=d["cpu_bytes"],  # and by the CPU, from system RAM
        )
    )
    t = 0.0
    for i, s in enumerate(steps):
        s["index"] = i
        t += s["seconds"]
        s["elapsed_s"] = t
    return steps


def load_scenario(key: str, warm: bool = False) -> list:
    if not isinstance(key, str) or key not in LOAD_SCENARIOS:
        raise _err("scenario", f"unknown {brief(key)}; allowed: {', '.join(LOAD_SCENARIOS)}")
    s = LOAD_SCENARIOS[key]
    return load_trace(s["model"], s["machine"], s["quant"], s["n_ctx"], warm=warm)


# ---------------------------------------------------------------------------
# Prefill and decode, stage by stage
# ---------------------------------------------------------------------------


def _runs(p: pm.Placement) -> list:
    """Contiguous runs of blocks on one device: [(device, first, last), ...]."""
    out = []
    for il, dev in enumerate(p.layer_device):
        if out and out[-1][0] == dev and out[-1][2] == il - 1:
            out[-1] = (dev, out[-1][1], il)
        else:
            out.append((dev, il, il))
    return out


def _decode_stages(p: pm.Placement, context: int, batch: int) -> list:
    """Decode stages with their bytes and FLOPs, from quantize_plan and the KV accounting."""
    m = p.model
    plan = pm.quantize_plan(m, p.quant)
    frac = 1.0
    if m.is_moe:
        e, k = m.n_expert, m.num_experts_per_tok
        frac = 1.0 - (1.0 - k / e) ** batch
    per_attn = 4.0 * m.num_attention_heads * m.d_head
    kv_layer = pm.kv_bytes_per_token_layer(m, p.kv_type)
    attn_w = [0.0] * m.n_layers
    ffn_w = [0.0] * m.n_layers
    attn_p = [0.0] * m.n_layers
    ffn_p = [0.0] * m.n_layers
    exp_w = [0.0] * m.n_layers
    exp_p = [0.0] * m.n_layers
    head_b = head_p = 0.0
    for r in plan:
        il, cls = r["layer"], r["cls"]
        if cls == "token_embd":
            continue
        if il < 0:
            head_b += r["bytes"]
            head_p += r["n_elements"]
        elif cls.endswith("_exps"):
            exp_w[il] += r["bytes"] * frac
            exp_p[il] += r["n_elements"] * m.num_experts_per_tok / max(1, m.n_expert)
        elif cls.startswith("attn") or cls in ("bias",) and ".attn_" in r["name"]:
            attn_w[il] += r["bytes"]
            attn_p[il] += r["n_elements"]
        else:
            ffn_w[il] += r["bytes"]
            ffn_p[il] += r["n_elements"]
    stages = []
    for dev, a, b in _runs(p):
        rng = range(a, b + 1)
        kvb = sum(kv_layer * pm.kv_layer_tokens(m, il, context) for il in rng) * batch
        stages.append(
            {
                "stage": "attention",
                "device": dev,
                "layers": (a, b),
                "weight_bytes": sum(attn_w[il] for il in rng),
                "kv_bytes": kvb,
                "flops": 2.0 * sum(attn_p[il] for il in rng) * batch
                + per_attn * sum(pm.kv_layer_tokens(m, il, context) for il in rng) * batch,
            }
        )
        dense_dev, exp_dev = dev, dev
        ffn = {
            "stage": "ffn",
            "device": dev,
            "layers": (a, b),
            "weight_bytes": sum(ffn_w[il] for il in rng),
            "kv_bytes": 0.0,
            "flops": 2.0 * sum(ffn_p[il] for il in rng) * batch,
        }
        moe_gpu = sum(exp_w[il] for il in rng if il >= p.n_cpu_moe)
        moe_cpu = sum(exp_w[il] for il in rng if il < p.n_cpu_moe)
        pg = sum(exp_p[il] for il in rng if il >= p.n_cpu_moe)
        pc = sum(exp_p[il] for il in rng if il < p.n_cpu_moe)
        if dev == "gpu":
            ffn["weight_bytes"] += moe_gpu
            ffn["flops"] += 2.0 * pg * batch
            stages.append(ffn)
            if moe_cpu:
                stages.append(
                    {
                        "stage": "experts (--n-cpu-moe)",
                        "device": "cpu",
                        "layers": (a, b),
                        "weight_bytes": moe_cpu,
                        "kv_bytes": 0.0,
                        "flops": 2.0 * pc * batch,
                    }
                )
        else:
            ffn["weight_bytes"] += moe_gpu + moe_cpu
            ffn["flops"] += 2.0 * (pg + pc) * batch
            stages.append(ffn)
        del dense_dev, exp_dev
    stages.append(
        {
            "stage": "output head",
            "device": "gpu" if p.output_on_gpu else "cpu",
            "layers": None,
            "weight_bytes": head_b,
            "kv_bytes": 0.0,
            "flops": 2.0 * head_p * batch,
        }
    )
    return stages


def phase_trace(
    placement: pm.Placement, machine=None, phase: str = "decode", n_tokens: int = 512, context: int = 0, batch: int = 1
) -> list:
    """One phase as steps, each one stage on one device.

    Each step: what, device, tier, bytes, flops, intensity (FLOP/byte), bound
    ('memory' or 'compute'), seconds, elapsed_s.  The steps' seconds add up to
    perf_model's decode_step_time(...)['total_s'] or prefill_time(...)['total_s']."""
    if not isinstance(placement, pm.Placement):
        raise _err("placement", "must be a perf_model.Placement (from perf_model.place)")
    p = placement
    mc = p.machine if machine is None else pm.get_machine(machine)
    if not isinstance(phase, str) or phase not in ("decode", "prefill"):
        raise _err("phase", f"must be 'decode' or 'prefill', got {brief(phase)}")
    check_int(batch, "batch", 1, pm.MAX_BATCH)
    if phase == "decode":
        if not isinstance(context, int) or isinstance(context, bool) or context < 0 or context > p.n_ctx:
            raise _err("context", f"must be an integer from 0 to n_ctx={p.n_ctx}, got {brief(context)}")
        steps = _decode_trace(p, mc, context, batch)
    else:
        if not isinstance(n_tokens, int) or isinstance(n_tokens, bool) or n_tokens <= 0 or n_tokens > p.n_ctx:
            raise _err("n_tokens", f"must be an integer from 1 to n_ctx={p.n_ctx}, got {brief(n_tokens)}")
        steps = _prefill_trace(p, mc, n_tokens)
    t = 0.0
    for i, s in enumerate(steps):
        s["index"] = i
        t += s["seconds"]
        s["elapsed_s"] = t
        s["intensity"] = s["flops"] / s["bytes"] if s["bytes"] else float("inf") if s["flops"] else 0.0
    return steps


def _tier(mc: pm.Machine, dev: str) -> str:
    if mc.unified:
        return "unified"
    return "vram" if dev == "gpu" else "ram"


def _decode_trace(p: pm.Placement, mc: pm.Machine, context: int, batch: int) -> list:
    d = pm.decode_step_time(p, mc, context=context, batch=batch)
    stages = _decode_stages(p, context, batch)
    steps = []
    for dev in ("gpu", "cpu"):
        mine = [s for s in stages if s["device"] == dev]
        if not mine:
            continue
        dev_s = d[dev + "_s"]
        bound = d[dev + "_bound"]
        key = (lambda s: s["weight_bytes"] + s["kv_bytes"]) if bound == "memory" else (lambda s: s["flops"])
        tot = sum(key(s) for s in mine)
        for s in mine:
            share = key(s) / tot if tot else 0.0
            layers = s["layers"]
            where = f"blocks {layers[0]}-{layers[1]}" if layers else ""
            name = mc.gpu.name if dev == "gpu" else mc.ram.name
            steps.append(
                {
                    "what": f"{s['stage']} {where}".strip(),
                    "stage": s["stage"],
                    "device": dev,
                    "device_name": name,
                    "tier": _tier(mc, dev),
                    "layers": layers,
                    "bytes": s["weight_bytes"] + s["kv_bytes"],
                    "weight_bytes": s["weight_bytes"],
                    "kv_bytes": s["kv_bytes"],
                    "flops": s["flops"],
                    "bound": bound,
                    "seconds": dev_s * share,
                }
            )
    # keep the forward order: stages by first layer, output head last
    steps.sort(key=lambda s: (s["layers"][0] if s["layers"] else 10**9, 0 if s["stage"] == "attention" else 1))
    steps.append(
        {
            "what": "launch, sync and sampling overhead",
            "stage": "overhead",
            "device": "host",
            "device_name": "",
            "tier": "ram" if not mc.unified else "unified",
            "layers": None,
            "bytes": 0.0,
            "weight_bytes": 0.0,
            "kv_bytes": 0.0,
            "flops": 0.0,
            "bound": "latency",
            "seconds": d["overhead_s"],
        }
    )
    return steps


def _prefill_trace(p: pm.Placement, mc: pm.Machine, n_tokens: int) -> list:
    steps = []
    for s in pm.prefill_steps(p, n_tokens, p.n_ubatch):
        kind = s["kind"]
        if kind == "pcie":
            what = f"micro-batch {s['ubatch']}: copy the CPU blocks' weights to the GPU (op offload)"
            tier, dev, bound = "pcie", "pcie", "transfer"
        elif kind == "gpu_offload":
            what = f"micro-batch {s['ubatch']}: CPU blocks' matmuls run on the GPU ({s['tokens']} tokens)"
            tier, dev, bound = _tier(mc, "gpu"), "gpu", "compute"
        else:
            what = f"micro-batch {s['ubatch']}: {'GPU' if kind == 'gpu' else 'CPU'} blocks ({s['tokens']} tokens)"
            tier, dev = _tier(mc, kind), kind
            bound = "compute" if s.get("compute_s", 0) >= s.get("mem_s", 0) else "memory"
        steps.append(
            {
                "what": what,
                "stage": kind,
                "device": dev,
                "tier": tier,
                "ubatch": s["ubatch"],
                "tokens": s["tokens"],
                "bytes": s["bytes"],
                "weight_bytes": s["bytes"],
                "kv_bytes": 0.0,
                "flops": s["flops"],
                "bound": bound,
                "seconds": s["time_s"],
                "layers": None,
            }
        )
    return steps


def phase_scenario(key: str, phase: str) -> list:
    if not isinstance(key, str) or key not in PHASE_SCENARIOS:
        raise _err("scenario", f"unknown {brief(key)}; allowed: {', '.join(PHASE_SCENARIOS)}")
    s = PHASE_SCENARIOS[key]
    p = pm.place(s["model"], s["machine"], s["quant"], s["n_ctx"])
    return phase_trace(p, p.machine, phase, n_tokens=s["n_tokens"], context=s["context"])


# ---------------------------------------------------------------------------
# Decode speed against context
# ---------------------------------------------------------------------------


MAX_CURVE_POINTS = 10_000  # contexts in one decode_curve


def decode_curve(placement: pm.Placement, machine=None, contexts=(0, 4096, 16384, 32768)) -> list:
    """Decode tok/s at each context length: [{'context', 'tok_s', 'kv_bytes', 'weight_bytes', ...}]."""
    if not isinstance(placement, pm.Placement):
        raise _err("placement", "must be a perf_model.Placement (from perf_model.place)")
    mc = placement.machine if machine is None else pm.get_machine(machine)
    if isinstance(contexts, (str, bytes)) or not isinstance(contexts, (list, tuple, range)):
        raise _err("contexts", f"must be a list of integers, got {brief(contexts)}")
    if len(contexts) > MAX_CURVE_POINTS:
        raise _err("contexts", f"at most {MAX_CURVE_POINTS:,} contexts, got {len(contexts):,}")
    ctxs = list(contexts)
    out = []
    for c in ctxs:
        if not isinstance(c, int) or isinstance(c, bool) or c < 0 or c > placement.n_ctx:
            raise _err("contexts", f"each context must be an integer from 0 to n_ctx={placement.n_ctx}, got {brief(c)}")
        d = pm.decode_step_time(placement, mc, context=c)
        out.append(
            {
                "context": c,
                "tok_s": d["tok_per_s"],
                "total_s": d["total_s"],
                "cpu_share": d["cpu_share"],
                "kv_bytes": d["gpu_kv_bytes"] + d["cpu_kv_bytes"],
                "weight_bytes": d["gpu_weight_bytes"] + d["cpu_weight_bytes"],
            }
        )
    return out
