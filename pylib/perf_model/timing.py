"""Time: decode steps and prefill, in the course profile or the measured one."""

from __future__ import annotations

from enginelab.checks import brief, check_bool, is_int
from enginelab.engine_io import N_BATCH_DEFAULT, N_UBATCH_DEFAULT, OP_OFFLOAD_MIN_BATCH

from .devices import Machine, device_backend, get_machine, side_device
from .models import MAX_BATCH, MAX_CONTEXT
from .multigpu import _gpu_side, link_seconds
from .placement import Placement
from .profiles import get_profile
from .units import _check, _check_profile
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


_NO_WORK = Work()


def _logits_bytes(p: Placement, machine: Machine) -> float:
    """Bytes of one token's logits (n_vocab F32 values) that cross the PCIe link back to the host after each decode
    pass (measured profile): none when the output head runs on the CPU or the GPU shares the host's memory."""
    return 4.0 * p.model.vocab_size if p.output_on_gpu and not machine.unified else 0.0


def _sides(p: Placement, tokens: int, context: int | None, start: int = 0, with_head: bool = True) -> tuple:
    """(local, split): per side ("gpu" and "cpu" on a machine with one GPU; "gpu0", "gpu1", ... and "cpu" on
    several) the Work each device does on its own, and the row-split matrices' share it runs at the same time
    as the other GPUs. context None: a prefill micro-batch of `tokens` tokens after `start`."""
    if p.machine.multi_gpu:
        return _work_multi(p, tokens, context, start=start, with_head=with_head)
    if context is not None:
        return _decode_work(p, context, tokens), {}
    work = _prefill_work(p, start, tokens)
    if with_head:
        head_side, head_work = _head_work(p)
        work = dict(work)
        work[head_side] = _with_head(work[head_side], head_work, tokens)
    return work, {}


def _side_seconds(prof, p: Placement, machine: Machine, side: str, w: Work, n_threads, batch: int) -> tuple:
    """(seconds, memory seconds, compute seconds, basis) of one device's decode work."""
    if w.bytes == 0 and w.flops == 0:
        return 0.0, 0.0, 0.0, None
    dev = side_device(p.machine, side)
    return prof.decode_seconds(w, dev, device_backend(machine, side), n_threads, batch)


def decode_step_time(
    placement: Placement, machine=None, context: int = 0, batch: int = 1, profile=None, n_threads=None, build=None
) -> dict:
    """Time of one decode pass at `context` tokens of KV per sequence, for `batch` sequences.

    profile: "course" (the module's assumptions) or "measured" (fitted on published llama-bench runs);
    None uses the placement's (place's default is "course").  n_threads: llama.cpp's -t for the CPU
    side (measured profile; None = all the CPU's cores). build: the llama.cpp build the measured profile
    estimates (None: today's; "YYYY-MM-DD" or "YYYY-MM": a build of that day, without the changes made since).

    Returns gpu_s, cpu_s, overhead_s, total_s, tok_per_s (all sequences), per-device bytes and FLOPs,
    whether each device is memory- or compute-bound, and for the measured profile `range_tok_s`
    (the typical spread of published runs around the estimate) and `basis` (the parameters used).
    On a machine with several GPUs the gpu_* numbers are over all GPUs, total_s also holds link_s (the hops
    or synchronisations over the GPU link), and `devices` breaks the step down per device."""
    p = placement
    if not (isinstance(p, Placement)):
        _check(False, "placement", f"must be a Placement (from place()), got {brief(p)}")
    machine = p.machine if machine is None else get_machine(machine)
    if not (is_int(context) and 0 <= context <= MAX_CONTEXT):
        _check(False, "context", f"must be an integer from 0 to {MAX_CONTEXT:,}, got {brief(context)}")
    if not (is_int(batch) and 1 <= batch <= MAX_BATCH):
        _check(False, "batch", f"must be an integer from 1 to {MAX_BATCH:,}, got {brief(batch)}")
    context, batch = int(context), int(batch)
    prof = get_profile(profile, p, build)
    n_threads = _check_threads(n_threads)
    multi = p.machine.multi_gpu
    local, split = _sides(p, batch, context)
    res = {"context": context, "batch": batch, "profile": prof.name}
    devices, basis = [], {}
    gpu_local = gpu_split = 0.0
    g = dict(bytes=0.0, weight_bytes=0.0, kv_bytes=0.0, flops=0.0, mem_s=0.0, compute_s=0.0)
    for side, wl in local.items():
        ws = split.get(side, _NO_WORK)
        t_l, m_l, c_l, b_l = _side_seconds(prof, p, machine, side, wl, n_threads, batch)
        t_s, m_s, c_s, b_s = _side_seconds(prof, p, machine, side, ws, n_threads, batch)
        if b_l or b_s:
            basis[side] = b_l or b_s
        entry = {
            "side": side,
            "name": getattr(side_device(p.machine, side), "name", ""),
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
            for k in g:
                res["cpu_" + k] = entry[k]
            res["cpu_s"] = entry["busy_s"]
            res["cpu_bound"] = entry["bound"]
        else:
            gpu_local += t_l
            gpu_split = max(gpu_split, t_s)
            for k in g:
                g[k] += entry[k]
    res.update({"gpu_" + k: v for k, v in g.items()})
    res["gpu_s"] = gpu_local + gpu_split
    res["gpu_bound"] = "compute" if g["compute_s"] > g["mem_s"] else "memory"
    traffic = _link_traffic(p, batch) if multi else {"transfers": 0}
    link_s = link_seconds(p.machine, traffic["bytes"], traffic["transfers"]) if traffic["transfers"] else 0.0
    if multi:
        res.update(split_mode=p.split_mode, link=traffic, link_s=link_s, devices=devices)
    layers = {e["side"]: e["layers"] for e in devices}
    overhead = prof.step_overhead_seconds(
        layers,
        {s: device_backend(machine, s) for s in layers},
        p.output_on_gpu,
        _logits_bytes(p, machine),
        machine.pcie,
    )
    res["overhead_s"] = overhead
    res["total_s"] = res["gpu_s"] + res["cpu_s"] + link_s + overhead
    res["tok_per_s"] = batch / res["total_s"]
    res["seq_tok_per_s"] = 1.0 / res["total_s"]
    res["cpu_share"] = res["cpu_s"] / res["total_s"]
    heavy = max(devices, key=lambda e: e["bytes"])["side"]
    prof.annotate(res, "decode", device_backend(machine, heavy), side_device(machine, heavy), basis)
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
    build=None,
) -> dict:
    """Time to process a prompt of n_tokens; returns total_s, tok_per_s and its parts.

    profile, n_threads and build as for decode_step_time (for the CPU, n_threads is llama.cpp's -tb)."""
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
    steps = prefill_steps(p, n_tokens, ub, n_batch, op_offload, profile=profile, n_threads=n_threads, build=build)
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
    heavy = max(("gpu", "cpu"), key=lambda s: parts.get(s, 0.0) + (parts.get("gpu_offload", 0.0) if s == "gpu" else 0))
    get_profile(profile, build=build).annotate(
        res, "prefill", device_backend(machine, heavy), side_device(machine, heavy)
    )
    return res


def prefill_steps(
    p: Placement,
    n_tokens: int,
    n_ubatch: int = N_UBATCH_DEFAULT,
    n_batch: int = N_BATCH_DEFAULT,
    op_offload: bool = True,
    profile=None,
    n_threads=None,
    build=None,
) -> list:
    """The prefill as a list of timed steps (one per micro-batch and device, plus PCIe copies).

    Each step: kind ('gpu', 'cpu', 'gpu_offload', 'pcie'), ubatch index, tokens, n_ubatches, bytes,
    flops, time_s.  Past PREFILL_GROUP_MAX micro-batches, consecutive ones are timed together (a step's
    n_ubatches says how many), so a million-token prompt costs no more to time than a short one.
    On a machine with several GPUs a device's step also names its "gpu" index, the row-split matrices are
    one step run in parallel ('gpu' with "parallel": each GPU's seconds), and the link has its own ('link')."""
    if not (isinstance(p, Placement)):
        _check(False, "p", f"must be a Placement (from place()), got {brief(p)}")
    for arg, v in (("n_tokens", n_tokens), ("n_ubatch", n_ubatch), ("n_batch", n_batch)):
        if not (is_int(v) and 1 <= v <= MAX_CONTEXT):
            _check(False, arg, f"must be a positive integer up to {MAX_CONTEXT:,}, got {brief(v)}")
    check_bool(op_offload, "op_offload")
    prof = get_profile(profile, p, build)
    mc = p.machine
    multi = mc.multi_gpu
    steps = []
    n_ub = -(-n_tokens // n_ubatch)
    group = max(1, -(-n_ub // PREFILL_GROUP_MAX))
    if multi:
        first = next((i for i in range(len(mc.gpus)) if p.per_gpu[i].total > 0), 0)
        offload_side, has_gpu = _gpu_side(first), p.gpu_total > 0
    else:
        offload_side = "gpu"
        has_gpu = mc.gpu is not None and p.gpu_layers + (1 if p.output_on_gpu else 0) > 0
    head_side, head_work = _head_work(p)
    if multi:
        head_side = "cpu" if p.output_gpu is None else _gpu_side(p.output_gpu)
    i = start = 0
    while start < n_tokens:
        # `group` micro-batches of n_ubatch tokens (the last group may be shorter), timed at their middle:
        # each micro-batch sees its own prefix; the middle one stands for all
        k = min(group, -(-(n_tokens - start) // n_ubatch))
        toks = min(k * n_ubatch, n_tokens - start)
        u = min(n_ubatch, toks)
        mid = start + (toks - u) // 2
        local, split = _sides(p, u, None, start=mid, with_head=prof.head_every_ubatch)
        scale = toks / u
        # op offload needs a discrete GPU behind a PCIe link (unified memory has no copy to make:
        # the CPU blocks simply run on the CPU)
        offload = op_offload and has_gpu and not mc.unified and mc.pcie > 0 and u >= OP_OFFLOAD_MIN_BATCH
        for side, w in local.items():
            flops = w.flops * scale
            if flops == 0:
                continue
            if side == "cpu" and offload:
                # op offload: the CPU blocks' weights cross PCIe, then the GPU does their arithmetic
                n_copies = prof.weight_copies(start, k, n_ubatch, n_batch)
                if n_copies:
                    t_x = prof.pcie_seconds(w.weight_bytes, n_copies, mc.pcie)
                    steps.append(_step("pcie", i, toks, k, w.weight_bytes * n_copies, 0.0, t_x, "PCIe"))
                dev = side_device(mc, offload_side)
                t = prof.offloaded_seconds(w, dev, device_backend(mc, offload_side), u, k, scale)
                steps.append(_step("gpu_offload", i, toks, k, 0.0, flops, t, dev.name))
                continue
            dev = side_device(mc, side)
            t_c, t_m = prof.prefill_seconds(w, dev, device_backend(mc, side), u, k, n_threads, scale)
            s = _step(side[:3], i, toks, k, w.weight_bytes * k, flops, t_c + t_m, dev.name, t_c, t_m)
            if multi and side != "cpu":
                s["gpu"] = int(side[3:])
            steps.append(s)
        if split:
            per = {}
            fl = by = 0.0
            for side, w in split.items():
                if w.flops == 0:
                    continue
                t_c, t_m = prof.prefill_seconds(
                    w, side_device(mc, side), device_backend(mc, side), u, k, n_threads, scale
                )
                per[int(side[3:])] = t_c + t_m
                fl += w.flops * scale
                by += w.weight_bytes * k
            if per:
                s = _step("gpu", i, toks, k, by, fl, max(per.values()), "GPUs in parallel (row split)")
                s["parallel"] = per
                steps.append(s)
        if multi:
            traffic = _link_traffic(p, u)
            if traffic["transfers"]:
                t = k * link_seconds(mc, traffic["bytes"], traffic["transfers"])
                s = _step("link", i, toks, k, traffic["bytes"] * k, 0.0, t, mc.link.name or mc.link.kind)
                s["transfers"] = traffic["transfers"] * k
                steps.append(s)
        if not prof.head_every_ubatch and start + toks >= n_tokens:
            # the sequence's last token: the output head computes its logits (one token: never offloaded;
            # a row split spreads them too, timed here on the output's GPU)
            dev = side_device(mc, head_side)
            w = head_work
            t_c, t_m = prof.prefill_seconds(w, dev, device_backend(mc, head_side), 1, 1, n_threads, 1.0)
            s = _step(head_side[:3], i + k - 1, 1, 0, w.weight_bytes, w.flops, t_c + t_m, dev.name, t_c, t_m)
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
