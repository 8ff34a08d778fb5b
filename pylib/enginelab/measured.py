"""The measured profile: how fast llama.cpp's kernels really move and multiply, per backend.

perf_model times each forward pass from the work it does on each device (a perf_model.Work: bytes of
weights and KV read, FLOPs, blocks, and weights per ggml type). The course profile divides that work by
the module's flat efficiencies. This profile uses a few physical parameters per backend (not per device),
fitted on published llama-bench runs (data/calibration/) by enginelab.calibration; their values, the runs
they were fitted on and their leave-one-device-out errors are in enginelab/data/measured_params.json.

Decode, one device (a GPU, or the CPU with n_threads threads):

    t = t_mem + t_cmp - overlap * min(t_mem, t_cmp)
    t_mem = bytes / bw_eff,   1 / bw_eff = 1 / (eta_bw * bandwidth) + 1 / bw_sat          (GPU)
                              bw_eff = min(eta_bw * bandwidth, n_threads * thread_bw)      (CPU)
    t_cmp = sum_type weights_type * dq_type / (rate)   (dequantization and dot products per weight)

and per step, for the whole graph: layer_us for every block (kernel launches and synchronisation; a CPU
synchronises its threads after every op) plus step_us (sampling, building and launching the graph).

Prefill, one micro-batch of u tokens: matmul FLOPs at pp_eff of the device's FP16 peak (quantized weights:
pp_eff_q; F16/BF16: pp_eff_f), with the kernels saturating at pp_sat_tflops (1/P = 1/(pp_eff * peak) +
1/pp_sat); attention at the same rate; the weights streamed once per micro-batch at eta_bw; and pp_layer_us
per block. On a CPU the matmul rate is per thread and per ggml type (pp_eff by type class).

Why each parameter exists (the reasons are physics; the values are fitted):
  eta_bw       streaming kernels never reach the datasheet bandwidth: refresh, page misses, the tail of each
               kernel. GDDR and LPDDR parts reach 80-90% with large F16 mat-vecs.
  eta_q/eta_iq quantized mat-vec kernels dequantize as they read (more instructions per byte, smaller loads):
               they reach a lower share than F16, the IQ lattices (table lookups) lower still.
  bw_sat       a single sequence issues one mat-vec per weight matrix; to saturate HBM (2-5 TB/s) a kernel
               must keep megabytes in flight, and llama.cpp's batch-1 kernels do not: H100s, RTX 5090s and
               Instinct cards decode far below their bandwidth ("batch-1 behaviour of HBM parts"). The
               achieved bandwidth bends into this ceiling (soft_min).
  expert_us    an MoE block multiplies each routed expert separately (a gather of its rows, a short mat-vec on
               a small matrix): a fixed cost per routed expert, so MoE decode runs well below its bytes.
  layer_us     every block is a dozen kernels (norms, rope, matmuls, attention, adds); each launch and sync
               costs microseconds whatever its size, so small models and fast cards are launch-bound.
  step_us      sampling, the host round trip and graph setup, once per token.
  overlap      how much of the dequantization work hides under the memory stream (1: fully).
  dq           FLOP-equivalents of dequantization and dot product per weight, by type class: cheap for
               Q8_0/Q4_0, more for K-quants, most for the IQ lattices. On a GPU it only matters where
               bandwidth is huge; on a CPU with few cores it bounds decode (the issue's 2-core Zen 4:
               Q4_K_M decode implies 19.6 GB/s, F16 28.7 GB/s on the same machine).
  thread_bw    one core can only pull so much from DRAM (its outstanding-miss limit): bandwidth grows
               with threads until the memory controller saturates.
  pp_eff_q     llama.cpp's quantized matmuls (MMQ on int8 tensor cores on NVIDIA/AMD, dequantize-then-
               simdgroup-matrix on Metal, Vulkan cooperative matrices, VNNI/AVX-512/NEON dot products on a
               CPU) reach this share of the FP16 figure the device is described by; on GeForce cards it
               exceeds 1, since int8 and FP16-accumulate tensor rates are 2-4x the FP32-accumulate figure.
  pp_eff_c     a quantized matmul also dequantizes its weight tiles and converts its activations on the
               ordinary (non-tensor) ALUs: that work runs at the device's FP32 rate. So a GPU with huge tensor
               cores and few CUDA cores (A100, H100, A30, V100) reaches a small share of its tensor peak
               (0.1-0.25 in llama.cpp), while a GeForce card, whose FP32 rate is half its tensor figure,
               reaches most of it: 1/rate = 1/(pp_eff_q * tensor) + 1/(pp_eff_c * fp32).
  pp_eff_f     the same for F16/BF16 weights (cuBLAS/hipBLAS/Metal GEMMs).
  pp_sat       the largest sustained rate the kernels reach on the biggest parts (A100/H100 reach only
               0.13-0.21 of their peak in llama.cpp: tile shapes and launch counts, not the datasheet).
  pp_layer_us  per block and micro-batch: the non-matmul ops (norms, rope, softmax, copies).
  pp_expert_us an MoE micro-batch sorts its tokens by expert and runs one small GEMM per expert touched
               (mul_mat_id): a cost per expert, so MoE prompts run well below the dense rate per FLOP.
  pcie_eff     op offload's weight copies reach this share of the PCIe link (pinned host memory).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, fields, replace
from pkgutil import get_data

from .ggml import GGML_TYPES

BACKENDS = ("cuda", "rocm", "vulkan", "metal", "sycl", "cpu")
GPU_BACKENDS = BACKENDS[:-1]

# ggml types by the work their dot products do per weight (see "dq" above)
TYPE_CLASS = {
    "F32": "f16", "F16": "f16", "BF16": "f16",
    "Q8_0": "legacy", "Q4_0": "legacy", "Q4_1": "legacy", "Q5_0": "legacy", "Q5_1": "legacy",
    "IQ4_NL": "legacy", "MXFP4": "legacy", "NVFP4": "legacy", "Q1_0": "legacy", "Q2_0": "legacy",
    "Q2_K": "kquant", "Q3_K": "kquant", "Q4_K": "kquant", "Q5_K": "kquant", "Q6_K": "kquant",
    "IQ4_XS": "iquant", "IQ3_S": "iquant", "IQ3_XXS": "iquant", "IQ2_S": "iquant", "IQ2_XS": "iquant",
    "IQ2_XXS": "iquant", "IQ1_S": "iquant", "IQ1_M": "iquant", "TQ1_0": "iquant", "TQ2_0": "iquant",
}  # fmt: skip
CLASSES = ("f16", "legacy", "kquant", "iquant")


def type_class(ggml_type: str) -> str:
    return TYPE_CLASS.get(ggml_type, "kquant")


@dataclass(frozen=True)
class Params:
    """One backend's parameters (see the module docstring for the reason behind each)."""

    eta_bw: float = 0.85  # F16/BF16/F32 weights and the KV cache
    eta_legacy: float = 0.8  # Q8_0, Q4_0, MXFP4...: simple blocks, mat-vec kernels that dequantize as they read
    eta_q: float = 0.7  # the K-quants (super-blocks with sub-block scales)
    eta_iq: float = 0.6  # the IQ lattices (table lookups per weight)
    bw_sat_gbs: float = 1e6  # GPU: saturation bandwidth of batch-1 kernels (GB/s); huge = none
    thread_bw_gbs: float = 1e6  # CPU: bandwidth one thread pulls (GB/s); huge = none
    layer_us: float = 20.0
    expert_us: float = 3.0  # decode: per routed expert multiplied in a block (MoE)
    step_us: float = 200.0
    overlap: float = 0.5
    dq: dict = field(
        default_factory=lambda: {"f16": 1.0, "legacy": 2.0, "kquant": 3.0, "iquant": 5.0}
    )  # FLOP-eq/weight
    pp_eff_q: float = 0.5
    pp_eff_c: float = 1e6  # GPU: the quantized matmul's work outside the tensor cores, per FP32 FLOP/s; huge = none
    pp_eff_f: float = 0.5
    pp_sat_tflops: float = 1e6
    pp_layer_us: float = 50.0
    pp_expert_us: float = 20.0  # prefill: per expert touched in a block, per micro-batch (MoE)
    pp_dq: dict = field(
        default_factory=lambda: {"f16": 1.0, "legacy": 1.0, "kquant": 1.0, "iquant": 1.0}
    )  # CPU: per class
    pcie_eff: float = 0.8

    def with_values(self, values: dict) -> Params:
        """A copy with some values replaced; dict-valued ones by key ("dq.kquant": 4.0)."""
        plain = {k: v for k, v in values.items() if "." not in k}
        out = replace(self, **plain)
        for k, v in values.items():
            if "." in k:
                name, sub = k.split(".", 1)
                out = replace(out, **{name: {**getattr(out, name), sub: v}})
        return out


# Before any fit (and for a backend without data) these physical priors apply.
_GPU_DQ = {"f16": 0.5, "legacy": 1.0, "kquant": 1.5, "iquant": 2.5}
PRIORS = {
    # NVIDIA: mat-vec kernels with CUDA graphs reach ~90% of GDDR bandwidth on F16, less on quantized types,
    # and single-stream decode stalls near 1.2 TB/s (RTX 5090, H100); MMQ prompt processing near half the
    # FP16-accumulate tensor rate, bending into ~250 TFLOP/s on the biggest parts.
    "cuda": Params(eta_bw=0.9, eta_legacy=0.85, eta_q=0.75, eta_iq=0.65, bw_sat_gbs=1200.0, layer_us=8.0,
                   step_us=120.0, expert_us=3.0, pp_eff_q=0.8, pp_eff_c=5.0, pp_eff_f=0.7, pp_sat_tflops=250.0, pp_layer_us=30.0,
                   pp_expert_us=30.0, overlap=0.8, dq=_GPU_DQ),
    # AMD via HIP: the CUDA kernels ported; HBM Instinct parts stall earlier, matrix cores are used less
    "rocm": Params(eta_bw=0.85, eta_legacy=0.75, eta_q=0.65, eta_iq=0.55, bw_sat_gbs=900.0, layer_us=15.0,
                   step_us=200.0, expert_us=3.0, pp_eff_q=0.4, pp_eff_c=3.0, pp_eff_f=0.3, pp_sat_tflops=100.0, pp_layer_us=60.0,
                   pp_expert_us=40.0, overlap=0.8, dq=_GPU_DQ),
    # Vulkan: portable shaders (cooperative matrices where the driver has them)
    "vulkan": Params(eta_bw=0.85, eta_legacy=0.75, eta_q=0.65, eta_iq=0.55, bw_sat_gbs=1200.0, layer_us=12.0,
                     step_us=200.0, expert_us=3.0, pp_eff_q=0.4, pp_eff_c=3.0, pp_eff_f=0.3, pp_sat_tflops=100.0, pp_layer_us=40.0,
                     pp_expert_us=40.0, overlap=0.8, dq=_GPU_DQ),
    # Apple: unified LPDDR5/5X; simdgroup-matrix GEMMs near the GPU's FP32 rate
    "metal": Params(eta_bw=0.85, eta_legacy=0.8, eta_q=0.7, eta_iq=0.6, bw_sat_gbs=2000.0, layer_us=12.0,
                    step_us=200.0, expert_us=3.0, pp_eff_q=0.7, pp_eff_f=0.75, pp_sat_tflops=40.0, pp_layer_us=30.0,
                    pp_expert_us=30.0, overlap=0.8, dq=_GPU_DQ),
    "sycl": Params(eta_bw=0.7, eta_legacy=0.65, eta_q=0.6, eta_iq=0.5, bw_sat_gbs=1000.0, layer_us=20.0,
                   step_us=300.0, expert_us=5.0, pp_eff_q=0.3, pp_eff_c=3.0, pp_eff_f=0.1, pp_sat_tflops=40.0, pp_layer_us=50.0,
                   pp_expert_us=50.0, overlap=0.8, dq=_GPU_DQ),
    # CPU: bandwidth grows with threads until the memory controller saturates; dequantization per weight
    # (FLOP-equivalents at the cores' FMA rate) bounds decode on few cores
    "cpu": Params(eta_bw=0.75, thread_bw_gbs=15.0, layer_us=15.0, step_us=300.0, overlap=0.5,
                  dq={"f16": 2.0, "legacy": 3.0, "kquant": 4.0, "iquant": 8.0}, pp_eff_q=0.5, pp_eff_f=0.5,
                  pp_layer_us=100.0, pp_expert_us=30.0, pp_dq={"f16": 1.0, "legacy": 1.0, "kquant": 0.7, "iquant": 0.3}),
}  # fmt: skip

TYPICAL = {"decode": (0.85, 1.15), "prefill": (0.8, 1.2)}  # before a fit: a spread of +-15/20 %


def _load_fitted() -> tuple:
    try:
        text = get_data("enginelab", "data/measured_params.json").decode("utf-8")
    except (FileNotFoundError, OSError):
        return dict(PRIORS), {}, {}
    data = json.loads(text)
    params = dict(PRIORS)
    for backend, values in data.get("params", {}).items():
        params[backend] = PRIORS[backend].with_values(values)
    return params, data.get("ranges", {}), data


PARAMS, RANGES, FIT = _load_fitted()


def params_for(backend: str, params: dict | None = None) -> Params:
    table = PARAMS if params is None else params
    if backend not in table:
        raise ValueError(f"backend: unknown {backend!r}; allowed: {', '.join(BACKENDS)}")
    return table[backend]


# ---------------------------------------------------------------------------------------------------------
# Rates of a device
# ---------------------------------------------------------------------------------------------------------
CPU_CORE_FLOPS = 100e9  # a core's FP32 FMA peak when a CPU Device does not say how many cores it has


def cpu_cores(device) -> int:
    """Cores of a CPU Device: its `cores`, else its FP32 peak over a typical core's (about 100 GFLOP/s:
    2 FMA pipes x 8 lanes x 2 FLOPs x ~3 GHz)."""
    c = getattr(device, "cores", 0) or 0
    return c if c > 0 else max(1, round(device.fp16_tflops * 1e12 / CPU_CORE_FLOPS))


def _threads(device, n_threads) -> int:
    cores = cpu_cores(device)
    return cores if n_threads is None else max(1, min(n_threads, 4 * cores))


def _cpu_rate(device, n_threads) -> float:
    """FLOP/s of the threads in use: physical cores only count once (SMT siblings share the FMA pipes)."""
    cores = cpu_cores(device)
    t = _threads(device, n_threads)
    return device.fp16_tflops * 1e12 * min(t, cores) / cores


_GEFORCE = re.compile(r"geforce|titan|\b(rtx|gtx)\s?\d{3,4}\b(?!.*\b(ada|pro|blackwell)\b)", re.I)


def tensor_tflops(device, backend: str) -> float:
    """The FP16 tensor rate llama.cpp's GEMMs run at, TFLOP/s. A Device gives the datasheet's FP16 figure with
    FP32 accumulate; NVIDIA's GeForce cards run FP32 accumulation at half their FP16-accumulate (and a quarter
    of their int8) tensor rate, while workstation and datacenter parts run it at the full rate, and llama.cpp's
    kernels accumulate in FP16/int32 (MMQ, cuBLAS with FP16 compute). So a GeForce's figure counts twice."""
    tf = getattr(device, "spec_tflops", 0.0) or device.fp16_tflops  # the datasheet's, where the course fitted it
    if backend in ("cuda", "vulkan") and _GEFORCE.search(getattr(device, "name", "") or ""):
        return 2.0 * tf
    return tf


def vector_tflops(device, backend: str) -> float:
    """A GPU's non-tensor FP32 rate, TFLOP/s: the Device's fp32_tflops, else an estimate. Apple's and a CPU's
    figure already is their FP32 rate; a discrete GPU's datasheet tensor figure (FP32 accumulate) is about
    twice its FP32 rate on consumer parts (RTX 3090: 71 and 35.6; RX 7900 XTX: 122.8 and 61.4)."""
    fp32 = getattr(device, "fp32_tflops", 0.0) or 0.0
    if fp32 > 0:
        return fp32
    tf = getattr(device, "spec_tflops", 0.0) or device.fp16_tflops
    return tf if backend in ("metal", "cpu") else tf / 2.0


def _bw_eff(device, backend: str, prm: Params, n_threads) -> float:
    bw = prm.eta_bw * device.bandwidth_gbs * 1e9
    if backend == "cpu":
        return min(bw, _threads(device, n_threads) * prm.thread_bw_gbs * 1e9)
    return soft_min(bw, prm.bw_sat_gbs * 1e9)


SATURATION_SHARPNESS = 6.0  # how sharply a rate bends into its ceiling (a p-norm; 6 is close to a hard minimum)


def soft_min(x: float, cap: float) -> float:
    """x below the ceiling `cap`, bending smoothly into it: (x^-p + cap^-p)^(-1/p)."""
    p = SATURATION_SHARPNESS
    return (x**-p + cap**-p) ** (-1.0 / p)


def _dq_seconds(work, device, backend: str, prm: Params, n_threads, batch: int = 1) -> float:
    """Dequantization and dot-product work of the weights streamed, at the device's compute rate."""
    rate = (
        _cpu_rate(device, n_threads)
        if backend == "cpu"
        else (getattr(device, "spec_tflops", 0.0) or device.fp16_tflops) * 1e12
    )
    n = sum(w * prm.dq.get(type_class(t), 1.0) for t, w in work.weights_by_type)
    return n * batch / rate


# ---------------------------------------------------------------------------------------------------------
# Decode
# ---------------------------------------------------------------------------------------------------------
def _class_bytes(work) -> dict:
    """Bytes streamed per type class (weights), plus the KV cache as f16."""
    out = {"kv": work.kv_bytes}
    for t, w in work.weights_by_type:
        g = GGML_TYPES.get(t)
        out[type_class(t)] = out.get(type_class(t), 0.0) + w * (g.bpw / 8.0 if g else 2.0)
    scale = work.weight_bytes / max(1.0, sum(v for k, v in out.items() if k != "kv"))
    for k in CLASSES:  # the weights' bytes as perf_model counted them (rows padded to whole blocks)
        if k in out:
            out[k] *= scale
    return out


def decode_seconds(work, device, backend: str, n_threads=None, batch: int = 1, params: dict | None = None) -> tuple:
    """(seconds, memory seconds, compute seconds, basis) of one decode pass's work on one device."""
    prm = params_for(backend, params)
    if backend == "cpu":
        bw = _bw_eff(device, backend, prm, n_threads)
        t_mem = work.bytes / bw
        t_cmp = _dq_seconds(work, device, backend, prm, n_threads, batch)
    else:
        # mat-vec kernels reach eta of the (saturating) bandwidth, lower for types that dequantize as they read
        bw = _bw_eff(device, backend, prm, n_threads) / prm.eta_bw
        eta = {"kv": prm.eta_bw, "f16": prm.eta_bw, "legacy": prm.eta_legacy, "kquant": prm.eta_q, "iquant": prm.eta_iq}
        t_mem = sum(b / (eta[c] * bw) for c, b in _class_bytes(work).items())
        bw = work.bytes / t_mem if t_mem else bw
        t_cmp = 0.0
    # MoE: every routed expert is a small matrix of its own (a gather, a short kernel): a cost per expert
    t_mem += work.expert_calls * prm.expert_us * 1e-6
    # batched decode: the matmul FLOPs themselves (2 per weight per sequence) at the prefill rate
    if batch > 1:
        t_cmp = max(t_cmp, _matmul_seconds(work.flops, work, device, backend, prm, n_threads))
    t = t_mem + t_cmp - prm.overlap * min(t_mem, t_cmp)
    basis = {"backend": backend, "bw_eff_gbs": bw / 1e9, "eta_bw": prm.eta_bw}
    if backend == "cpu":
        basis.update(n_threads=_threads(device, n_threads), thread_bw_gbs=prm.thread_bw_gbs)
    else:
        basis.update(bw_sat_gbs=prm.bw_sat_gbs, eta_q=prm.eta_q)
    return t, t_mem, t_cmp, basis


def step_overhead_seconds(
    layers: dict, backends: dict, output_on_gpu: bool = False, params: dict | None = None
) -> float:
    """Per decode step: every block's launch/sync cost on its device's backend, plus the step cost of the
    backend that runs most of the graph (and a device switch where layers are split)."""
    t = 0.0
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
def _matmul_seconds(flops: float, work, device, backend: str, prm: Params, n_threads) -> float:
    """Seconds for `flops` of matmuls over this work's weights (time adds up per ggml type class)."""
    total = sum(w for _t, w in work.weights_by_type)
    if total <= 0:
        shares = {"f16": 1.0}
    else:
        shares = {}
        for t, w in work.weights_by_type:
            c = type_class(t)
            shares[c] = shares.get(c, 0.0) + w / total
    if backend == "cpu":
        base = _cpu_rate(device, n_threads) * prm.pp_eff_q
        return flops * sum(s / (base * prm.pp_dq.get(c, 1.0)) for c, s in shares.items())
    peak = tensor_tflops(device, backend) * 1e12
    f16 = shares.get("f16", 0.0)
    sat = prm.pp_sat_tflops * 1e12
    # quantized weights: tensor-core work and dequantization on the vector ALUs, one after the other
    quant_rate = 1.0 / (1.0 / (prm.pp_eff_q * peak) + 1.0 / (prm.pp_eff_c * vector_tflops(device, backend) * 1e12))
    per_flop = f16 / soft_min(prm.pp_eff_f * peak, sat) + (1.0 - f16) / soft_min(quant_rate, sat)
    return flops * per_flop


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
) -> tuple:
    """(compute seconds, memory seconds) of k micro-batches of u tokens, each doing `work` on one device.

    offloaded: the matmuls of CPU blocks run on this GPU (op offload): no per-block graph cost here."""
    prm = params_for(backend, params)
    scale = k if scale is None else scale
    t_c = _matmul_seconds(work.flops * scale, work, device, backend, prm, n_threads)
    if not offloaded:
        t_c += work.layers * prm.pp_layer_us * 1e-6 * k
    t_c += work.expert_calls * prm.pp_expert_us * 1e-6 * k  # MoE: one small GEMM per expert touched
    t_m = 0.0 if offloaded else work.weight_bytes * k / _bw_eff(device, backend, prm, n_threads)
    return t_c, t_m


def pcie_seconds(n_bytes: float, link_bytes_per_s: float, params: dict | None = None) -> float:
    return n_bytes / (params_for("cuda", params).pcie_eff * link_bytes_per_s)


# ---------------------------------------------------------------------------------------------------------
# The spread of published runs around an estimate
# ---------------------------------------------------------------------------------------------------------
def typical_range(value: float, backend: str, kind: str) -> tuple:
    """(low, high): where most published runs fall around an estimate of `value`, from the leave-one-device-
    out residuals of this backend's fit (the 20th and 80th percentiles of measured / estimated)."""
    lo, hi = RANGES.get(backend, {}).get(kind, TYPICAL[kind])
    return value * lo, value * hi


def basis_summary(backend: str, kind: str) -> dict:
    """What the explanation says about a measured estimate: the backend, the parameters, and how many runs
    and devices they were fitted on."""
    prm = params_for(backend)
    info = FIT.get("fits", {}).get(backend, {}).get(kind, {})
    values = {f.name: getattr(prm, f.name) for f in fields(prm)}
    return {
        "backend": backend,
        "params": values,
        "runs": info.get("runs", 0),
        "devices": info.get("devices", 0),
        "loo_median": info.get("loo_median"),
        "fitted": bool(info),
    }


def finite(x: float) -> bool:
    return isinstance(x, float) and math.isfinite(x)
