"""The measured profile's time of a forward pass on one device, from the work it does (a perf_model.Work: bytes of
weights and KV read, FLOPs, blocks, weights per ggml type) and the parameters of enginelab.measured.params.

Decode, one device (a GPU, or the CPU with n_threads threads):

    t = t_mem + t_cmp - overlap * min(t_mem, t_cmp)
    t_mem = sum_class bytes_class / (eta_class * bw_eff) + the active rows counted per kernel or block (terms)
        GPU: bw_eff = eta_bw * bandwidth (x the vendor's share), bending into bw_sat on an HBM part
        CPU: bw_eff = soft_min(cores' share * thread_bw, eta_bw * bandwidth) with CPU_BW_KNEE
    t_cmp = sum_type weights * dq_class * kernel factor / vector rate (the GPU's FP32 ALUs, the CPU's cores in use)

Per step (step_overhead_seconds): layer_us per block, step_us, a device switch, the logits copied back over PCIe.

Prefill, one micro-batch: the matmul FLOPs at the rate of the weights' type class (class_rates), the weights streamed
once, and the active rows counted per block or expert call and micro-batch:
    GPU, quantized (MMQ): 1 / rate = 1 / (pp_eff_q * mma) + pp_dq_class / (pp_eff_c * fp32), bending into pp_sat
    GPU, F16 (BLAS) and GPUs without int8 units: rate = pp_eff_f * f16
    CPU: rate = cores' FMA rate * pp_eff_q / pp_dq_class (/ dq_emul without int8 dot products), x pp_gemm if tiled

`build` everywhere: a feature set, a build string (enginelab.measured.builds), or "" / None for today's llama.cpp.
"""

from __future__ import annotations

from ..ggml import GGML_TYPES
from . import recurrent
from .classes import CLASSES, type_class
from .devices import (
    READ_TEST_SHARE,
    VEC_DOT_CYCLES,
    VEC_DOT_REF,
    cpu_core_family,
    cpu_cores,
    cpu_has_int8_dot,
    cpu_read_gbs,
    is_apple_cpu,
    is_arm_cpu,
    is_soc_cpu,
    rates,
    vector_tflops,
)
from .features import (
    cpu_repacked,
    cpu_tiled,
    cuda_graphs,
    expert_kernels,
    feature_set,
    hip_graphs,
    sycl_f16_build,
    sycl_reordered,
    vulkan_float_legacy,
    vulkan_node_sync,
)
from .params import PRIORS, ROWS, TABLE, params_for


# ---------------------------------------------------------------------------------------------------------
# Rates
# ---------------------------------------------------------------------------------------------------------
def _threads(device, n_threads) -> int:
    cores = cpu_cores(device)
    return cores if n_threads is None else max(1, min(n_threads, 4 * cores))


def cpu_thread_share(device, n_threads, prm) -> float:
    """The cores' worth of work n_threads threads do: one per physical core, smt_gain for a core's second
    hardware thread (it shares the core's FMA pipes and load ports), nothing past two per core."""
    cores = cpu_cores(device)
    t = _threads(device, n_threads)
    return min(t, cores) + prm.smt_gain * max(0, min(t, 2 * cores) - cores)


def _cpu_rate(device, n_threads, prm=None) -> float:
    """FLOP/s of the threads in use (physical cores count once; SMT siblings add smt_gain)."""
    cores = cpu_cores(device)
    share = cpu_thread_share(device, n_threads, prm or PRIORS["cpu"])
    return device.fp16_tflops * 1e12 * share / cores


def cpu_bandwidth(device, prm) -> float:
    """The bandwidth a CPU's cores can pull at most, GB/s, before eta_bw: an SoC's CPU cores' measured read
    bandwidth over READ_TEST_SHARE where a source gives one, else their share of the SoC's, else the platform's."""
    read = cpu_read_gbs(device)
    if read:
        return read / READ_TEST_SHARE
    return device.bandwidth_gbs * (prm.soc_cpu_share if is_soc_cpu(device) else 1.0)


def _bw_eff(device, backend: str, prm, n_threads) -> float:
    if backend == "cpu":
        cap = prm.eta_bw * cpu_bandwidth(device, prm) * 1e9
        return soft_min(cpu_thread_share(device, n_threads, prm) * prm.thread_bw_gbs * 1e9, cap, CPU_BW_KNEE)
    bw = prm.eta_bw * device.bandwidth_gbs * 1e9
    r = rates(device, backend)
    if prm.vendor_bw:
        bw *= prm.vendor_bw.get(r["vendor"], 1.0)
    return soft_min(bw, prm.bw_sat_gbs * 1e9) if r["hbm"] else bw


SATURATION_SHARPNESS = 6.0  # how sharply a rate bends into its ceiling (a p-norm; 6 is close to a hard minimum)
# A CPU's threads bend into the memory controller's cap more softly (queueing: every miss waits longer as the
# controller nears saturation): a Ryzen 9 7950X decodes F16 at 35, 58 and 67 GB/s on 1, 2 and 4 threads.
CPU_BW_KNEE = 4.0


def soft_min(x: float, cap: float, p: float = SATURATION_SHARPNESS) -> float:
    """x below the ceiling `cap`, bending smoothly into it: (x^-p + cap^-p)^(-1/p)."""
    return (x**-p + cap**-p) ** (-1.0 / p)


def _vector_rate(device, backend: str, prm, n_threads) -> float:
    return _cpu_rate(device, n_threads, prm) if backend == "cpu" else rates(device, backend)["fp32"]


def pp_gemm_for(device, prm) -> float:
    """How many times faster ggml-cpu's tiled GEMMs run a type's prompt matmuls than its plain path, on this CPU."""
    return prm.pp_gemm_arm if prm.pp_gemm_arm >= 0 and is_arm_cpu(device) else prm.pp_gemm


def overlap_for(device, backend: str, prm) -> float:
    """The share of the smaller of a decode pass's memory and compute times that hides under the other."""
    if backend == "cpu" and prm.apple_overlap >= 0 and is_apple_cpu(device):
        return prm.apple_overlap
    return prm.overlap


# ---------------------------------------------------------------------------------------------------------
# Dequantization and dot products
# ---------------------------------------------------------------------------------------------------------
# ggml-cpu's F16 dot product on an Arm core with FP16 vector arithmetic (FEAT_FP16; every Arm core here with dot
# products has it) multiplies and accumulates eight FP16 lanes a 128-bit FMA (vfmaq_f16), where x86 converts each
# half to FP32 first: half of x86's FLOP-equivalents per weight.
ARM_F16_ARITH = 0.5


def _vec_dot_share(ggml_type: str, cls: str, device) -> float:
    """A plain (not repacked) type's vec_dot cost relative to its class's reference type on this CPU's cores."""
    ref = VEC_DOT_REF.get(cls)
    table = VEC_DOT_CYCLES[cpu_core_family(device)]
    if not ref or ggml_type not in table:
        return 1.0
    return table[ggml_type] / table[ref]


def _dq_seconds(work, device, backend: str, prm, n_threads, batch: int = 1, build=None) -> float:
    """Dequantization and dot-product work of the weights streamed, at the device's vector rate.

    CPU: a plain (not repacked) type is multiplied a row at a time, a vec_dot call per row and token that sets up its
    loop and reduces its accumulators whatever the row's length: dq_row FLOP-equivalents per row. A repacked type's
    GEMV (cpu_repacked) shares that over its 4-8 interleaved rows; it is left out."""
    f = feature_set(build)
    emul = 1.0
    arm = prm.dq_arm if backend == "cpu" and prm.dq_arm and is_arm_cpu(device) else {}
    if backend == "cpu" and not cpu_has_int8_dot(device):
        emul = prm.dq_emul  # int8 products from multiply-add pairs (vpmaddubsw + vpmaddwd) instead of one VNNI op
    if prm.vendor_dq and backend != "cpu":
        emul = prm.vendor_dq.get(rates(device, backend)["vendor"], 1.0)
    if backend != "cpu" and not rates(device, backend)["dp4a"]:
        emul *= prm.dq_emul  # ggml emulates __dp4a with byte extracts and multiply-adds
        if rates(device, backend)["kepler"]:
            emul *= prm.dq_emul_kepler  # ... whose integer multiply-adds Kepler issues at a sixth of its FP32 rate
    n = 0.0
    for t, w in work.weights_by_type:
        c = type_class(t, backend)
        kernel = 1.0  # the kernel ggml-cpu runs for this type, relative to its class's plain vec_dot
        if backend == "cpu":
            packed = cpu_repacked(t, device, f)
            if t == "Q4_K" and not packed:
                c = "kquant"  # the plain K-quant vec_dot; repacked, its GEMV costs what Q4_0's does (CPU_CLASS)
            kernel = prm.dq_repack if packed else _vec_dot_share(t, c, device)
        if t == "F16" and arm and cpu_has_int8_dot(device):
            kernel = ARM_F16_ARITH  # FP16 vector arithmetic: twice the lanes an FMA, no conversion
        n += w * prm.dq.get(c, 1.0) * arm.get(c, 1.0) * kernel * (emul if c != "f16" else 1.0)
    if backend == "cpu" and prm.dq_row:
        n += prm.dq_row * sum(r for t, r in work.rows_by_type if not cpu_repacked(t, device, f))
    return n * batch / _vector_rate(device, backend, prm, n_threads)


# ---------------------------------------------------------------------------------------------------------
# Bytes by class
# ---------------------------------------------------------------------------------------------------------
def _type_bytes(work) -> list:
    """Bytes streamed per entry of work.weights_by_type: each type's bits per weight, scaled so that they add up to
    the weights' bytes as perf_model counted them (rows padded to whole blocks)."""
    raw = [w * (GGML_TYPES[t].bpw / 8.0 if t in GGML_TYPES else 2.0) for t, w in work.weights_by_type]
    scale = work.weight_bytes / max(1.0, sum(raw))
    return [b * scale for b in raw]


def _class_bytes(work) -> dict:
    """Bytes streamed per type class (weights), plus the KV cache as f16."""
    out = {"kv": work.kv_bytes}
    for (t, _w), b in zip(work.weights_by_type, _type_bytes(work)):
        out[type_class(t)] = out.get(type_class(t), 0.0) + b
    return out


def _sycl_plain_bytes(work, build=None) -> dict:
    """Bytes per type class of the quantized weights ggml-sycl multiplies without a reordered kernel in this build
    (F16/F32 weights have no blocks to reorder)."""
    f = feature_set(build)
    experts = dict(work.expert_weights_by_type)
    out: dict = {}
    for (t, w), b in zip(work.weights_by_type, _type_bytes(work)):
        c = type_class(t)
        if c == "f16" or w <= 0:
            continue
        e = min(experts.get(t, 0.0), w)
        plain = (0.0 if sycl_reordered(t, f) else w - e) + (0.0 if sycl_reordered(t, f, True) else e)
        if plain > 0:
            out[c] = out.get(c, 0.0) + b * plain / w
    return out


def _vulkan_float_legacy_bytes(work, build=None) -> dict:
    """Bytes per type class of the weights ggml-vulkan streams with its float legacy-quant shader on Intel GPUs."""
    f = feature_set(build)
    out: dict = {}
    for (t, _w), b in zip(work.weights_by_type, _type_bytes(work)):
        if vulkan_float_legacy(t, f):
            out[type_class(t)] = out.get(type_class(t), 0.0) + b
    return out


# ---------------------------------------------------------------------------------------------------------
# The rows counted per kernel or block: when each applies, and its count in a pass's work
# ---------------------------------------------------------------------------------------------------------
CONDITIONS = {
    "always": lambda device, backend, f: True,
    "hbm": lambda device, backend, f: backend != "cpu" and rates(device, backend)["hbm"],
    "no graphs": lambda device, backend, f: (
        (backend == "cuda" and not cuda_graphs(device, f)) or (backend == "rocm" and not hip_graphs(f))
    ),
    "barrier per node": lambda device, backend, f: backend == "vulkan" and vulkan_node_sync(f),
}
COUNTS = {
    "expert kernel": lambda work, backend, f: expert_kernels(work, backend, f),
    "MoE block": lambda work, backend, f: work.moe_layers,
    "block": lambda work, backend, f: work.layers,
}
# decode's rows summed into t_mem: the MoE kernels (counted per expert kernel or MoE block), then the per-block costs
_MOE_COUNTS = ("expert kernel", "MoE block")
DECODE_ROWS = tuple(r for r in TABLE if r.per in COUNTS and r.applies in CONDITIONS)
DECODE_ROWS = tuple(r for r in DECODE_ROWS if r.per in _MOE_COUNTS) + tuple(
    r for r in DECODE_ROWS if r.per not in _MOE_COUNTS
)


def decode_terms(work, device, backend: str, prm, build=None) -> tuple:
    """(name, count, value, seconds) of every row counted per kernel or block whose condition holds here."""
    f = feature_set(build)
    out = []
    for r in DECODE_ROWS:
        if CONDITIONS[r.applies](device, backend, f):
            n, v = COUNTS[r.per](work, backend, f), getattr(prm, r.name)
            out.append((r.name, n, v, n * v * 1e-6))
    return tuple(out)


# ---------------------------------------------------------------------------------------------------------
# Decode
# ---------------------------------------------------------------------------------------------------------
def decode_seconds(work, device, backend: str, n_threads=None, batch: int = 1, params=None, build=None) -> tuple:
    """(seconds, memory seconds, compute seconds, basis) of one decode pass's work on one device. basis["terms"]:
    the active rows, (name, count or bytes, value, seconds), the explanation's list."""
    prm = params_for(backend, params)
    f = feature_set(build)
    terms = []
    # mat-vec kernels reach eta of the (saturating) bandwidth, lower for types that dequantize as they read
    bw = _bw_eff(device, backend, prm, n_threads) / prm.eta_bw
    eta = {
        "kv": prm.eta_bw, "f16": prm.eta_bw, "q8": prm.eta_legacy, "legacy": prm.eta_legacy, "q5": prm.eta_legacy,
        "kquant": prm.eta_q, "iquant": prm.eta_iq,
    }  # fmt: skip
    if backend == "cpu":  # the cores' streaming share is the same for every type; dq carries the difference
        eta = dict.fromkeys(eta, prm.eta_bw)
    t_mem = sum(b / (eta[c] * bw) for c, b in _class_bytes(work).items())
    # byte-share rows: the bytes of the types a backend streams with another kernel, at another share
    if backend == "sycl":  # the types without a reordered kernel in this build
        plain = _sycl_plain_bytes(work, f)
        extra = sum(b / (eta[c] * bw) for c, b in plain.items()) * (1 / prm.sycl_plain - 1)
        terms.append(("sycl_plain", sum(plain.values()), prm.sycl_plain, extra))
        t_mem += extra
    legacy = prm.vendor_legacy.get(rates(device, backend)["vendor"], 1.0) if backend == "vulkan" else 1.0
    if legacy != 1.0:  # a vendor whose float legacy-quant shader outruns its others (Intel)
        held = _vulkan_float_legacy_bytes(work, f)
        extra = sum(b / (eta[c] * bw) for c, b in held.items()) * (1 / legacy - 1)
        terms.append(("vendor_legacy", sum(held.values()), legacy, extra))
        t_mem += extra
    bw_used = work.bytes / t_mem if t_mem else bw
    t_cmp = _dq_seconds(work, device, backend, prm, n_threads, batch, f)
    counted = decode_terms(work, device, backend, prm, f)
    t_mem += sum(s for name, _n, _v, s in counted if ROWS[name].per in _MOE_COUNTS)
    for name, _n, _v, s in counted:
        if ROWS[name].per not in _MOE_COUNTS:
            t_mem += s
    terms += counted
    # batched decode: the matmul FLOPs themselves (2 per weight per sequence) at the prefill rate
    if batch > 1:
        t_cmp = max(t_cmp, _matmul_seconds(work.flops, work, device, backend, prm, n_threads))
    overlap = overlap_for(device, backend, prm)
    t = t_mem + t_cmp - overlap * min(t_mem, t_cmp)
    basis = {"backend": backend, "bw_eff_gbs": bw_used / 1e9, "eta_bw": prm.eta_bw, "overlap": overlap}
    basis["terms"] = tuple(terms)
    if backend == "cpu":
        basis.update(
            n_threads=_threads(device, n_threads),
            thread_bw_gbs=prm.thread_bw_gbs,
            cpu_read_gbs=cpu_read_gbs(device),
            soc_cpu=is_soc_cpu(device),
            core_family=cpu_core_family(device),
        )
    else:
        basis.update(bw_sat_gbs=prm.bw_sat_gbs, eta_q=prm.eta_q, fp32_tflops=vector_tflops(device, backend))
    return t, t_mem, t_cmp, basis


def step_overhead_seconds(
    layers: dict,
    backends: dict,
    output_on_gpu: bool = False,
    params: dict | None = None,
    logits_bytes: float = 0.0,
    link_bytes_per_s: float = 0.0,
) -> float:
    """Per decode step: every block's launch/sync cost on its device's backend (layer_us), the step cost of the
    backend that runs most of the graph (step_us) and a device switch where layers are split, and, when the output
    head runs on a discrete GPU, the copy of the token's logits (logits_bytes: n_vocab F32 values) back to the host
    over its link (link_bytes_per_s: the machine's PCIe bandwidth; a Raspberry Pi 5's one PCIe 2.0 lane, HOST_LINKS,
    waits over a millisecond for a 128k vocabulary's half a megabyte)."""
    t = 0.0
    if output_on_gpu and logits_bytes > 0 and link_bytes_per_s > 0:
        t += pcie_seconds(logits_bytes, link_bytes_per_s, params)
    main = max(layers, key=lambda s: layers[s]) if layers else "cpu"
    for side, n in layers.items():
        if n:
            t += n * params_for(backends[side], params).layer_us * 1e-6
    t += params_for(backends.get(main, "cpu"), params).step_us * 1e-6
    if sum(1 for n in layers.values() if n) > 1:
        t += SWITCH_US * 1e-6
    return t


SWITCH_US = 30.0  # a hand-over between devices in one pass: a host sync and a small activation copy


# ---------------------------------------------------------------------------------------------------------
# Prefill
# ---------------------------------------------------------------------------------------------------------
def class_rates(device, backend: str, prm, n_threads=None) -> dict:
    """FLOP/s of a micro-batch's matmuls per type class (before the pp_sat ceiling)."""
    if backend == "cpu":
        base = _cpu_rate(device, n_threads, prm) * prm.pp_eff_q
        emul = 1.0 if cpu_has_int8_dot(device) else prm.dq_emul
        return {c: base / prm.pp_dq.get(c, 1.0) / (1.0 if c == "f16" else emul) for c in CLASSES}
    r = rates(device, backend)
    f16 = prm.pp_eff_f * r["f16"]
    out = {"f16": f16}
    if backend == "metal":
        mma = r["fp32"]  # simdgroup matrices run on the same ALUs
    elif backend in ("vulkan", "sycl"):
        mma = r["f16"]  # tiles dequantized to FP16 for the cooperative matrices / XMX
    else:
        mma = r["int8"]  # MMQ: int8 tensor cores, MFMA/WMMA, or dp4a
    for c in CLASSES[1:]:
        if mma <= 0:  # no int8 units (V100, Maxwell): dequantize to FP16/FP32 once, then a BLAS GEMM
            out[c] = f16
        else:
            out[c] = 1.0 / (1.0 / (prm.pp_eff_q * mma) + prm.pp_dq.get(c, 1.0) / (prm.pp_eff_c * r["fp32"]))
    v = prm.vendor_pp.get(r["vendor"], 1.0) if prm.vendor_pp else 1.0
    return {c: x * v for c, x in out.items()}


_PER_FLOP: dict = {}
_PER_FLOP_MAX = 4096  # (weights by type, device, backend, params, threads, build) kept; then it starts over


def _matmul_seconds(flops: float, work, device, backend: str, prm, n_threads, build=None, w16: bool = False) -> float:
    """Seconds for `flops` of matmuls over this work's weights (time adds up per ggml type class).

    CPU: each type at its class's rate, times pp_gemm where ggml-cpu runs it as a tiled GEMM (cpu_tiled). The prompt
    matmuls keep one K-quant class (Q4_K and the khigh types count as kquant).
    w16: every weight multiplied at the 16-bit (f16 class) rate, whatever its type: kernels that dequantize a
    weight tile in registers and run BF16 tensor-core math on it (perf_model.kernels.batched_seconds, GEMM engines).
    The factor applied to flops depends on the rest only, and a prompt's micro-batches ask for it with the same
    weights again and again: kept (the device and parameter objects held with it, so their ids stay theirs)."""
    f = feature_set(build)
    key = (work.weights_by_type, id(device), backend, id(prm), n_threads, f, w16)
    hit = _PER_FLOP.get(key)
    if hit is None or hit[0] is not device or hit[1] is not prm:
        if len(_PER_FLOP) >= _PER_FLOP_MAX:
            _PER_FLOP.clear()
        hit = _PER_FLOP[key] = (device, prm, _matmul_factor(work, device, backend, prm, n_threads, f, w16))
    divide, x = hit[2]
    return flops / x if divide else flops * x


def _matmul_factor(work, device, backend: str, prm, n_threads, f, w16: bool = False) -> tuple:
    """(divide, x): _matmul_seconds is flops / x or flops * x."""
    cr = class_rates(device, backend, prm, n_threads)
    if w16 and backend != "cpu":
        return False, 1.0 / soft_min(cr["f16"], prm.pp_sat_tflops * 1e12)
    if backend == "sycl" and not sycl_f16_build(f):  # an FP32 build: every matmul an SGEMM on the vector ALUs
        cr = dict.fromkeys(cr, prm.pp_eff_v * rates(device, backend)["fp32"])
    total = sum(w for _t, w in work.weights_by_type)
    if backend == "cpu":
        if total <= 0:
            return True, cr["f16"]
        t = 0.0
        for typ, w in work.weights_by_type:
            c = type_class(typ, backend)
            if typ == "Q4_K" or c == "khigh":
                c = "kquant"
            gain = pp_gemm_for(device, prm) if cpu_tiled(typ, device, f) else 1.0
            t += w / total / (cr[c] * gain)
        return False, t
    if total <= 0:
        shares = {"f16": 1.0}
    else:
        shares = {}
        for t, w in work.weights_by_type:
            c = type_class(t, backend)
            shares[c] = shares.get(c, 0.0) + w / total
    sat = prm.pp_sat_tflops * 1e12
    return False, sum(s / soft_min(cr[c], sat) for c, s in shares.items())


# prefill's rows counted per block or expert call, each micro-batch (an offloaded pass runs only the CPU blocks' matmuls)
PREFILL_COUNTS = {
    "block x micro-batch": lambda work: work.layers,
    "expert call x micro-batch": lambda w: w.expert_calls,
    **recurrent.PREFILL_COUNTS,
}
PREFILL_CONDITIONS = {
    "always": lambda offloaded: True,
    "not offloaded": lambda offloaded: not offloaded,
    **recurrent.PREFILL_CONDITIONS,
}
PREFILL_ROWS = tuple(r for r in TABLE if r.per in PREFILL_COUNTS and r.applies in PREFILL_CONDITIONS)


def prefill_terms(work, prm, k: int, offloaded: bool = False) -> tuple:
    """(name, count per micro-batch, value, seconds over k micro-batches) of prefill's active counted rows."""
    out = []
    for r in PREFILL_ROWS:
        if PREFILL_CONDITIONS[r.applies](offloaded):
            n, v = PREFILL_COUNTS[r.per](work), getattr(prm, r.name)
            out.append((r.name, n, v, n * v * 1e-6 * k))
    return tuple(out)


def prefill_seconds(
    work,
    device,
    backend: str,
    u: int,
    k: int,
    n_threads=None,
    params: dict | None = None,
    offloaded: bool = False,
    scale: float | None = None,
    build=None,
) -> tuple:
    """(compute seconds, memory seconds) of k micro-batches of u tokens, each doing `work` on one device.

    offloaded: the matmuls of CPU blocks run on this GPU (op offload): no per-block graph cost here."""
    prm = params_for(backend, params)
    f = feature_set(build)
    scale = k if scale is None else scale
    t_c = _matmul_seconds(work.flops * scale, work, device, backend, prm, n_threads, f)
    xf = getattr(work, "expert_flops", 0.0)
    if xf and prm.pp_moe_eff != 1.0:  # MoE: tokens gathered per expert, short GEMMs in part-filled tiles
        t_c += (1.0 / prm.pp_moe_eff - 1.0) * _matmul_seconds(xf * scale, work, device, backend, prm, n_threads, f)
    for _name, _n, _v, seconds in prefill_terms(work, prm, k, offloaded):
        t_c += seconds
    t_m = 0.0 if offloaded else work.weight_bytes * k / _bw_eff(device, backend, prm, n_threads)
    return t_c, t_m


def pcie_seconds(n_bytes: float, link_bytes_per_s: float, params: dict | None = None) -> float:
    return n_bytes / (params_for("cuda", params).pcie_eff * link_bytes_per_s)
