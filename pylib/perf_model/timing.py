"""Time: decode steps and prefill, in the course profile or the measured one."""

from __future__ import annotations

from enginelab import measured as _measured  # the measured profile's parameters
from enginelab.checks import brief, check_bool, is_int
from enginelab.engine_io import N_BATCH_DEFAULT, N_UBATCH_DEFAULT, OP_OFFLOAD_MIN_BATCH

from .devices import Device, Machine, device_backend, get_machine, side_device
from .models import MAX_BATCH, MAX_CONTEXT
from .multigpu import _gpu_side, link_seconds
from .placement import Placement
from .units import DECODE_OVERHEAD_S, ETA_DECODE, ETA_PREFILL, _check, _check_profile
from .work import Work, _decode_work, _head_work, _link_traffic, _prefill_work, _with_head, _work_multi

# Both profiles time the same work: what each device moves and computes in one
# forward pass (_decode_work, _prefill_work).  They differ in how fast the
# hardware does it:
#
#   profile="course"    the module's assumptions, and the default of every
#                       function here, so the module's listings print its
#                       numbers: ETA_DECODE of peak bandwidth, ETA_PREFILL of
#                       peak FP16 FLOP/s, a fixed DECODE_OVERHEAD_S per step.
#   profile="measured"  the practitioner's estimate: a few physical parameters
#                       per backend (CUDA, ROCm, Vulkan, Metal, SYCL, CPU),
#                       fitted on published llama-bench runs; see
#                       enginelab.measured for each parameter and its reason.
#
# Decode (one token per sequence per pass): every device streams the weights it
# holds plus its blocks' KV cache; the devices run one after the other (layer by
# layer), so their times add.  In the course profile
#   t_token = sum_d max(B_d / (ETA_DECODE * beta_d), F_d / (ETA_PREFILL * P_d)) + DECODE_OVERHEAD_S
# An MoE block reads only the experts a token is routed to (num_experts_per_tok
# of num_local_experts).  With a batch of B sequences, the weights are read once
# per pass, each sequence's KV once, and the matmul FLOPs grow with B: a device
# takes the longer of its memory time and its compute time (the roofline).
# The output head is read every step too; with tied embeddings (no
# output.weight) it is token_embd itself, all of it.
#
# Several GPUs
# ------------
# Layer split: one token (or micro-batch) goes through the GPUs one after the other, each running its own
# layers, so their times add, and at every boundary between two GPUs the activations hop over the link:
# n_embd x 4 bytes (f32) per token.  Row split: each matrix's rows are spread over the GPUs, which multiply
# their slices at the same time (the step waits for the slowest), but every split matrix is a
# synchronisation: its input is copied to the other GPUs (k_in x 4 bytes per token each) and their slices of
# the result come back (their rows x 4 bytes per token).  Norms, attention over the KV cache and the expert
# matmuls run on the layer's own GPU, one layer after the other.
#
# Each transfer costs the link's latency plus bytes / bandwidth (Interconnect; PCIe through the host counts
# two trips).  Over RPC the host is on the network too: the input embeddings go out to the first GPU, the
# logits (n_vocab x 4 bytes per token) come back, and every host/GPU boundary is a round trip.
# Both profiles time each device's share with their own rules (course: ETA_DECODE / ETA_PREFILL of the
# device's peaks; measured: enginelab.measured per backend); the link costs are the same in both.


def _device_for(p: Placement, side: str) -> Device:
    if side == "gpu":
        return p.machine.gpu
    return p.machine.ram


def _logits_bytes(p: Placement, machine: Machine) -> float:
    """Bytes of one token's logits (n_vocab F32 values) that cross the PCIe link back to the host after each decode
    pass (measured profile): none when the output head runs on the CPU or the GPU shares the host's memory."""
    return 4.0 * p.model.vocab_size if p.output_on_gpu and not machine.unified else 0.0


def decode_step_time(
    placement: Placement, machine=None, context: int = 0, batch: int = 1, profile=None, n_threads=None
) -> dict:
    """Time of one decode pass at `context` tokens of KV per sequence, for `batch` sequences.

    profile: "course" (the module's assumptions) or "measured" (fitted on published llama-bench runs);
    None uses the placement's (place's default is "course").  n_threads: llama.cpp's -t for the CPU
    side (measured profile; None = all the CPU's cores).

    Returns gpu_s, cpu_s, overhead_s, total_s, tok_per_s (all sequences), per-device bytes and FLOPs,
    whether each device is memory- or compute-bound, and for the measured profile `range_tok_s`
    (the typical spread of published runs around the estimate) and `basis` (the parameters used).
    On a machine with several GPUs (timing.py's 'Several GPUs') the gpu_* numbers are over all GPUs, total_s also holds
    link_s (the hops or synchronisations over the GPU link), and `devices` breaks the step down per device."""
    p = placement
    if not (isinstance(p, Placement)):
        _check(False, "placement", f"must be a Placement (from place()), got {brief(p)}")
    machine = p.machine if machine is None else get_machine(machine)
    if not (is_int(context) and 0 <= context <= MAX_CONTEXT):
        _check(False, "context", f"must be an integer from 0 to {MAX_CONTEXT:,}, got {brief(context)}")
    if not (is_int(batch) and 1 <= batch <= MAX_BATCH):
        _check(False, "batch", f"must be an integer from 1 to {MAX_BATCH:,}, got {brief(batch)}")
    context, batch = int(context), int(batch)
    profile = _check_profile(profile, p)
    n_threads = _check_threads(n_threads)
    if p.machine.multi_gpu:
        return _decode_step_time_multi(p, context, batch, profile, n_threads)
    work = _decode_work(p, context, batch)
    res = {"context": context, "batch": batch, "profile": profile}
    basis = {}
    for side in ("gpu", "cpu"):
        w = work[side]
        if w.bytes == 0 and w.flops == 0:
            t_mem = t_cmp = t = 0.0
        elif profile == "course":
            dev = _device_for(p, side)
            t_mem = w.bytes / (ETA_DECODE * dev.bandwidth)
            t_cmp = w.flops / (ETA_PREFILL * dev.flops)
            t = max(t_mem, t_cmp)
        else:
            dev = _device_for(p, side)
            backend = device_backend(machine, side)
            t, t_mem, t_cmp, basis[side] = _measured.decode_seconds(w, dev, backend, n_threads, batch)
        res[side + "_bytes"] = w.bytes
        res[side + "_weight_bytes"] = w.weight_bytes
        res[side + "_kv_bytes"] = w.kv_bytes
        res[side + "_flops"] = w.flops
        res[side + "_mem_s"] = t_mem
        res[side + "_compute_s"] = t_cmp
        res[side + "_s"] = t
        res[side + "_bound"] = "compute" if t_cmp > t_mem else "memory"
    if profile == "course":
        overhead = DECODE_OVERHEAD_S
    else:
        overhead = _measured.step_overhead_seconds(
            {s: work[s].layers for s in work},
            {s: device_backend(machine, s) for s in work},
            p.output_on_gpu,
            logits_bytes=_logits_bytes(p, machine),
            link_bytes_per_s=machine.pcie,
        )
        res["basis"] = basis
    res["overhead_s"] = overhead
    res["total_s"] = res["gpu_s"] + res["cpu_s"] + overhead
    res["tok_per_s"] = batch / res["total_s"]
    res["seq_tok_per_s"] = 1.0 / res["total_s"]
    res["cpu_share"] = res["cpu_s"] / res["total_s"]
    if profile == "measured":
        side = "gpu" if work["gpu"].bytes > work["cpu"].bytes else "cpu"
        main, dev = device_backend(machine, side), side_device(machine, side)
        res["backend"] = main
        res["range_tok_s"] = _measured.typical_range(res["tok_per_s"], main, "decode", dev)
        res["range_vendor"] = _measured.range_basis(main, "decode", dev)
    return res


def _check_threads(n_threads):
    _check(
        n_threads is None
        or (isinstance(n_threads, int) and not isinstance(n_threads, bool) and 1 <= n_threads <= 1024),
        "n_threads",
        f"must be None (all cores) or an integer from 1 to 1024, got {n_threads!r}",
    )
    return n_threads


# Prefill (prompt processing) runs in micro-batches of n_ubatch tokens.  In one
# micro-batch of u tokens:
#   * every matmul does 2*u FLOPs per weight it multiplies: an MoE token
#     multiplies only its k routed experts (plus any shared expert), and the
#     output head runs for the last token of the sequence only (llama.cpp
#     computes logits where the batch asks for them: the last prompt token);
#   * causal attention compares the token at position q with its q keys (QK^T and
#     AV: 4 * n_head * head_dim FLOPs per pair; a sliding-window layer stops at
#     its window);
#   * each micro-batch streams the weights it touches once: every dense weight,
#     and the experts that any of its u tokens is routed to;
#   * course profile: the device computes at ETA_PREFILL of its peak FLOP/s and,
#     one after the other, streams its weights at ETA_PREFILL of its bandwidth;
#     measured profile: enginelab.measured.prefill_seconds;
#   * with a partial offload and u >= 32, llama.cpp's op offload runs the CPU
#     blocks' matmuls on the GPU too, copying their weights over PCIe.  The course
#     profile charges the copy once per logical batch (-b, 2048 tokens) at
#     ETA_PCIE of the link; the measured profile charges it for every micro-batch
#     (ggml's scheduler copies the weights each time the graph runs);
#   * without a GPU the CPU does all of it at its own (much lower) FLOP/s.
# Fitted to the module's prefill column (0.924-0.935 reproduces it): the share of the PCIe link the weight
# copies of op offload reach.
ETA_PCIE = 0.93
PREFILL_GROUP_MAX = 64  # more micro-batches than this are timed in groups (the steps list stays short)


def prefill_time(
    placement: Placement,
    machine=None,
    n_tokens: int = 512,
    n_ubatch=None,
    n_batch: int = N_BATCH_DEFAULT,
    op_offload: bool = True,
    profile=None,
    n_threads=None,
) -> dict:
    """Time to process a prompt of n_tokens; returns total_s, tok_per_s and its parts.

    profile and n_threads as for decode_step_time (for the CPU, n_threads is llama.cpp's -tb)."""
    p = placement
    if not (isinstance(p, Placement)):
        _check(False, "placement", f"must be a Placement (from place()), got {brief(p)}")
    machine = p.machine if machine is None else get_machine(machine)
    if not (is_int(n_tokens) and 0 < n_tokens <= MAX_CONTEXT):
        _check(False, "n_tokens", f"must be a positive integer up to {MAX_CONTEXT:,}, got {brief(n_tokens)}")
    ub = p.n_ubatch if n_ubatch is None else n_ubatch
    if not (is_int(ub) and 1 <= ub <= MAX_CONTEXT):
        _check(False, "n_ubatch", f"must be a positive integer up to {MAX_CONTEXT:,}, got {brief(ub)}")
    if not (is_int(n_batch) and 1 <= n_batch <= MAX_CONTEXT):
        _check(False, "n_batch", f"must be a positive integer up to {MAX_CONTEXT:,}, got {brief(n_batch)}")
    check_bool(op_offload, "op_offload")
    n_tokens, ub, n_batch = int(n_tokens), int(ub), int(n_batch)
    profile = _check_profile(profile, p)
    n_threads = _check_threads(n_threads)
    steps = prefill_steps(p, n_tokens, ub, n_batch, op_offload, profile=profile, n_threads=n_threads)
    total = sum(s["time_s"] for s in steps)
    parts: dict = {}
    for s in steps:
        parts[s["kind"]] = parts.get(s["kind"], 0.0) + s["time_s"]
    res = {
        "n_tokens": n_tokens,
        "n_ubatch": ub,
        "total_s": total,
        "tok_per_s": n_tokens / total,
        "parts_s": parts,
        "n_micro_batches": -(-n_tokens // ub),
        "flops": sum(s["flops"] for s in steps),
        "steps": steps,
        "profile": profile,
    }
    if profile == "measured":
        heavy = max(
            ("gpu", "cpu"), key=lambda s: parts.get(s, 0.0) + (parts.get("gpu_offload", 0.0) if s == "gpu" else 0)
        )
        res["backend"] = device_backend(machine, heavy)
        dev = side_device(machine, heavy)
        res["range_tok_s"] = _measured.typical_range(res["tok_per_s"], res["backend"], "prefill", dev)
        res["range_vendor"] = _measured.range_basis(res["backend"], "prefill", dev)
    return res


def prefill_steps(
    p: Placement,
    n_tokens: int,
    n_ubatch: int = N_UBATCH_DEFAULT,
    n_batch: int = N_BATCH_DEFAULT,
    op_offload: bool = True,
    profile=None,
    n_threads=None,
) -> list:
    """The prefill as a list of timed steps (one per micro-batch and device, plus PCIe copies).

    Each step: kind ('gpu', 'cpu', 'gpu_offload', 'pcie'), ubatch index, tokens, n_ubatches, bytes,
    flops, time_s.  Past PREFILL_GROUP_MAX micro-batches, consecutive ones are timed together (a step's
    n_ubatches says how many), so a million-token prompt costs no more to time than a short one."""
    if not (isinstance(p, Placement)):
        _check(False, "p", f"must be a Placement (from place()), got {brief(p)}")
    for arg, v in (("n_tokens", n_tokens), ("n_ubatch", n_ubatch), ("n_batch", n_batch)):
        if not (is_int(v) and 1 <= v <= MAX_CONTEXT):
            _check(False, arg, f"must be a positive integer up to {MAX_CONTEXT:,}, got {brief(v)}")
    check_bool(op_offload, "op_offload")
    profile = _check_profile(profile, p)
    if p.machine.multi_gpu:
        return _prefill_steps_multi(p, n_tokens, n_ubatch, n_batch, op_offload, profile, n_threads)
    mc = p.machine
    steps = []
    n_ub = -(-n_tokens // n_ubatch)
    group = max(1, -(-n_ub // PREFILL_GROUP_MAX))
    has_gpu = mc.gpu is not None and p.gpu_layers + (1 if p.output_on_gpu else 0) > 0
    head_side, head_work = _head_work(p)
    i = 0
    start = 0
    while start < n_tokens:
        # `group` micro-batches of n_ubatch tokens (the last group may be shorter), timed at their middle
        k = min(group, -(-(n_tokens - start) // n_ubatch))
        toks = min(k * n_ubatch, n_tokens - start)
        u = min(n_ubatch, toks)
        # the group's attention: each micro-batch sees its own prefix; the middle one stands for all
        mid = start + (toks - u) // 2
        work = _prefill_work(p, mid, u)
        if profile == "course":
            # The course profile keeps the module's simplification: logits for every prompt token, the head's
            # weights streamed with each micro-batch. Its fitted constants (RTX 3060 / 4060 Ti FP16, ETA_PCIE)
            # were fitted under it, and no values of them reproduce the module's four prefill numbers once the
            # head runs for the last token only (the 32B partial offload then reaches at most 329 tok/s
            # against the module's 342). The measured profile computes the last token's logits only.
            work = dict(work)
            work[head_side] = _with_head(work[head_side], head_work, u)
        scale = toks / u
        # op offload needs a discrete GPU behind a PCIe link (unified memory has no copy to make:
        # the CPU blocks simply run on the CPU)
        offload = op_offload and has_gpu and not mc.unified and mc.pcie > 0 and u >= OP_OFFLOAD_MIN_BATCH
        for side in ("gpu", "cpu"):
            w = work[side]
            flops = w.flops * scale
            if flops == 0:
                continue
            if side == "cpu" and offload:
                # op offload: the CPU blocks' weights cross PCIe, then the GPU does their arithmetic
                if profile == "course":
                    n_copies = sum(1 for j in range(k) if (start + j * n_ubatch) % n_batch == 0)
                    t_x = w.weight_bytes * n_copies / (ETA_PCIE * mc.pcie)
                else:
                    n_copies = k
                    t_x = _measured.pcie_seconds(w.weight_bytes * k, mc.pcie)
                if n_copies:
                    steps.append(_step("pcie", i, toks, k, w.weight_bytes * n_copies, 0.0, t_x, "PCIe"))
                dev = mc.gpu
                if profile == "course":
                    t = flops / (ETA_PREFILL * dev.flops)
                else:
                    t = _measured.prefill_seconds(
                        w, dev, device_backend(mc, "gpu"), u, k, None, offloaded=True, scale=scale
                    )[0]
                steps.append(_step("gpu_offload", i, toks, k, 0.0, flops, t, dev.name))
                continue
            dev = _device_for(p, side)
            t_c, t_m = _prefill_device_seconds(w, dev, mc, side, u, k, scale, profile, n_threads)
            steps.append(_step(side, i, toks, k, w.weight_bytes * k, flops, t_c + t_m, dev.name, t_c, t_m))
        if profile != "course" and start + toks >= n_tokens:
            # the sequence's last token: the output head computes its logits (one token: never offloaded)
            dev = _device_for(p, head_side)
            w = head_work
            t_c, t_m = _prefill_device_seconds(w, dev, mc, head_side, 1, 1, 1.0, profile, n_threads)
            s = _step(head_side, i + k - 1, 1, 0, w.weight_bytes, w.flops, t_c + t_m, dev.name, t_c, t_m)
            s["head"] = True
            steps.append(s)
        start += toks
        i += k
    return steps


def _step(kind, i, toks, k, byts, flops, t, device, t_c=None, t_m=None) -> dict:
    s = {
        "kind": kind,
        "ubatch": i,
        "tokens": toks,
        "n_ubatches": k,
        "bytes": byts,
        "flops": flops,
        "time_s": t,
        "device": device,
    }
    if t_c is not None:
        s["compute_s"], s["mem_s"] = t_c, t_m
    return s


def _prefill_device_seconds(
    w: Work, dev: Device, mc: Machine, side: str, u: int, k: int, scale: float, profile: str, n_threads
) -> tuple:
    """(compute seconds, memory seconds) of k micro-batches of u tokens doing `w` each on `dev` (their FLOPs
    are `scale` times w's: the last micro-batch of a group may be shorter)."""
    if profile == "course":
        return w.flops * scale / (ETA_PREFILL * dev.flops), w.weight_bytes * k / (ETA_PREFILL * dev.bandwidth)
    return _measured.prefill_seconds(w, dev, device_backend(mc, side), u, k, n_threads, scale=scale)


def _side_device(p: Placement, side: str) -> Device:
    return p.machine.ram if side == "cpu" else p.machine.gpus[int(side[3:])]


def _decode_side_seconds(p: Placement, side: str, w: Work, profile: str, n_threads, batch: int) -> tuple:
    """(seconds, memory seconds, compute seconds, basis) of one device's decode work."""
    if w.bytes == 0 and w.flops == 0:
        return 0.0, 0.0, 0.0, None
    dev = _side_device(p, side)
    if profile == "course":
        t_mem = w.bytes / (ETA_DECODE * dev.bandwidth)
        t_cmp = w.flops / (ETA_PREFILL * dev.flops)
        return max(t_mem, t_cmp), t_mem, t_cmp, None
    return _measured.decode_seconds(w, dev, device_backend(p.machine, side), n_threads, batch)


def _decode_step_time_multi(p: Placement, context: int, batch: int, profile: str, n_threads) -> dict:
    """decode_step_time on a machine with several GPUs (see timing.py's 'Several GPUs'); the result has the single-GPU keys
    (gpu_* summed over the GPUs) plus `devices` (one entry per GPU and the CPU), `link_s` and `link`."""
    mc = p.machine
    local, split = _work_multi(p, batch, context)
    res = {"context": context, "batch": batch, "profile": profile, "split_mode": p.split_mode}
    devices, basis = [], {}
    gpu_local = gpu_split = 0.0
    tot = {"gpu": dict(bytes=0.0, w=0.0, kv=0.0, f=0.0, mem=0.0, cmp=0.0), "cpu": None}
    for side in local:
        wl, ws = local[side], split[side]
        t_l, m_l, c_l, b_l = _decode_side_seconds(p, side, wl, profile, n_threads, batch)
        t_s, m_s, c_s, b_s = _decode_side_seconds(p, side, ws, profile, n_threads, batch)
        if b_l or b_s:
            basis[side] = b_l or b_s
        entry = {
            "side": side,
            "name": _side_device(p, side).name,
            "bytes": wl.bytes + ws.bytes,
            "weight_bytes": wl.weight_bytes + ws.weight_bytes,
            "kv_bytes": wl.kv_bytes + ws.kv_bytes,
            "flops": wl.flops + ws.flops,
            "layers": wl.layers,
            "mem_s": m_l + m_s,
            "compute_s": c_l + c_s,
            "busy_s": t_l + t_s,  # this device's own time for the pass
            "parallel_s": t_s,  # of which row-split matrices, run at the same time as the other GPUs
        }
        entry["bound"] = "compute" if entry["compute_s"] > entry["mem_s"] else "memory"
        devices.append(entry)
        if side == "cpu":
            for k in ("bytes", "weight_bytes", "kv_bytes", "flops", "mem_s", "compute_s"):
                res["cpu_" + k] = entry[k]
            res["cpu_s"] = entry["busy_s"]
            res["cpu_bound"] = entry["bound"]
        else:
            gpu_local += t_l
            gpu_split = max(gpu_split, t_s)
            for k, v in (("bytes", "bytes"), ("w", "weight_bytes"), ("kv", "kv_bytes"), ("f", "flops")):
                tot["gpu"][k] += entry[v]
            tot["gpu"]["mem"] += entry["mem_s"]
            tot["gpu"]["cmp"] += entry["compute_s"]
    g = tot["gpu"]
    res.update(
        gpu_bytes=g["bytes"],
        gpu_weight_bytes=g["w"],
        gpu_kv_bytes=g["kv"],
        gpu_flops=g["f"],
        gpu_mem_s=g["mem"],
        gpu_compute_s=g["cmp"],
        gpu_s=gpu_local + gpu_split,
        gpu_bound="compute" if g["cmp"] > g["mem"] else "memory",
    )
    traffic = _link_traffic(p, batch)
    res["link"] = traffic
    res["link_s"] = link_seconds(mc, traffic["bytes"], traffic["transfers"]) if traffic["transfers"] else 0.0
    res["devices"] = devices
    if profile == "course":
        overhead = DECODE_OVERHEAD_S
    else:
        layers = {e["side"]: e["layers"] for e in devices}
        overhead = _measured.step_overhead_seconds(
            layers,
            {s: device_backend(mc, s) for s in layers},
            p.output_on_gpu,
            logits_bytes=_logits_bytes(p, mc),
            link_bytes_per_s=mc.pcie,
        )
        res["basis"] = basis
    res["overhead_s"] = overhead
    res["total_s"] = res["gpu_s"] + res["cpu_s"] + res["link_s"] + overhead
    res["tok_per_s"] = batch / res["total_s"]
    res["seq_tok_per_s"] = 1.0 / res["total_s"]
    res["cpu_share"] = res["cpu_s"] / res["total_s"]
    if profile == "measured":
        heavy = max(devices, key=lambda e: e["bytes"])["side"]
        res["backend"] = device_backend(mc, heavy)
        dev = side_device(mc, heavy)
        res["range_tok_s"] = _measured.typical_range(res["tok_per_s"], res["backend"], "decode", dev)
        res["range_vendor"] = _measured.range_basis(res["backend"], "decode", dev)
    return res


def _prefill_steps_multi(
    p: Placement, n_tokens: int, n_ubatch: int, n_batch: int, op_offload: bool, profile: str, n_threads
) -> list:
    """prefill_steps on a machine with several GPUs: per micro-batch group, one step per device (kind 'gpu'
    with its "gpu" index, or 'cpu'), the row-split matrices as one step run in parallel ('gpu', "parallel"
    with each GPU's seconds), op offload ('pcie', 'gpu_offload' on the first GPU) and the link ('link')."""
    mc = p.machine
    steps = []
    n_ub = -(-n_tokens // n_ubatch)
    group = max(1, -(-n_ub // PREFILL_GROUP_MAX))
    first = next((i for i in range(len(mc.gpus)) if p.per_gpu[i].total > 0), 0)
    head_side = "cpu" if p.output_gpu is None else _gpu_side(p.output_gpu)
    i = start = 0
    while start < n_tokens:
        k = min(group, -(-(n_tokens - start) // n_ubatch))
        toks = min(k * n_ubatch, n_tokens - start)
        u = min(n_ubatch, toks)
        mid = start + (toks - u) // 2
        # the course profile runs the head for every token of the micro-batch (see prefill_steps)
        local, split = _work_multi(p, u, None, start=mid, with_head=profile == "course")
        scale = toks / u
        offload = op_offload and p.gpu_total > 0 and mc.pcie > 0 and u >= OP_OFFLOAD_MIN_BATCH
        for side, w in local.items():
            flops = w.flops * scale
            if flops == 0:
                continue
            if side == "cpu" and offload:
                if profile == "course":
                    n_copies = sum(1 for j in range(k) if (start + j * n_ubatch) % n_batch == 0)
                    t_x = w.weight_bytes * n_copies / (ETA_PCIE * mc.pcie)
                else:
                    n_copies = k
                    t_x = _measured.pcie_seconds(w.weight_bytes * k, mc.pcie)
                if n_copies:
                    steps.append(_step("pcie", i, toks, k, w.weight_bytes * n_copies, 0.0, t_x, "PCIe"))
                dev = mc.gpus[first]
                if profile == "course":
                    t = flops / (ETA_PREFILL * dev.flops)
                else:
                    t = _measured.prefill_seconds(
                        w, dev, device_backend(mc, _gpu_side(first)), u, k, None, offloaded=True, scale=scale
                    )[0]
                steps.append(_step("gpu_offload", i, toks, k, 0.0, flops, t, dev.name))
                continue
            dev = _side_device(p, side)
            t_c, t_m = _prefill_device_seconds(w, dev, mc, side, u, k, scale, profile, n_threads)
            s = _step(side[:3], i, toks, k, w.weight_bytes * k, flops, t_c + t_m, dev.name, t_c, t_m)
            if side != "cpu":
                s["gpu"] = int(side[3:])
            steps.append(s)
        if p.row_split:
            per = {}
            fl = by = 0.0
            for side, w in split.items():
                if w.flops == 0:
                    continue
                t_c, t_m = _prefill_device_seconds(w, _side_device(p, side), mc, side, u, k, scale, profile, n_threads)
                per[int(side[3:])] = t_c + t_m
                fl += w.flops * scale
                by += w.weight_bytes * k
            if per:
                s = _step("gpu", i, toks, k, by, fl, max(per.values()), "GPUs in parallel (row split)")
                s["parallel"] = per
                steps.append(s)
        traffic = _link_traffic(p, u)
        if traffic["transfers"]:
            t = k * link_seconds(mc, traffic["bytes"], traffic["transfers"])
            s = _step("link", i, toks, k, traffic["bytes"] * k, 0.0, t, mc.link.name or mc.link.kind)
            s["transfers"] = traffic["transfers"] * k
            steps.append(s)
        if profile != "course" and start + toks >= n_tokens:
            # the last token's logits (a row split spreads them too; timed here on the output's GPU)
            _side, head_work = _head_work(p)
            dev = _side_device(p, head_side)
            t_c, t_m = _prefill_device_seconds(head_work, dev, mc, head_side, 1, 1, 1.0, profile, n_threads)
            s = _step(
                head_side[:3], i + k - 1, 1, 0, head_work.weight_bytes, head_work.flops, t_c + t_m, dev.name, t_c, t_m
            )
            s["head"] = True
            steps.append(s)
        start += toks
        i += k
    return steps
