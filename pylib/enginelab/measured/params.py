"""The measured profile's parameters as one table: a row per parameter, from which the Params record, the priors,
the fit's free parameters and bounds, and the explain box's sentences all derive.

A row says what the parameter is (unit), what it is counted per (a block, a routed expert's kernel, a step, a share
of the bytes or of a rate), when it applies (a device property or a build feature, as enginelab.measured.physics
tests it), its physical prior per backend, its fit bounds and the fits that may move it, and why it exists. Where a
prior's figure rests on a measurement, data/calibration/README.md ("The measured profile's parameters: reasons and evidence") gives it.

    t_token = memory time (bytes / (eta x bandwidth)) + dequantization time - overlap
              + sum over the rows counted per block, expert kernel or MoE block whose condition holds: count x value
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, make_dataclass, replace
from pkgutil import get_data

from .classes import CLASSES

BACKENDS = ("cuda", "rocm", "vulkan", "metal", "sycl", "cpu")
GPU_BACKENDS = BACKENDS[:-1]
_GPU = GPU_BACKENDS


@dataclass(frozen=True)
class Row:
    """One parameter: see the module docstring."""

    name: str
    unit: str
    per: str  # what a value is counted per; "block", "expert kernel", "MoE block" rows are summed by physics
    applies: str  # the condition (physics.CONDITIONS for the summed rows; otherwise where the code reads it)
    default: object  # the value where a backend has no prior of its own
    priors: dict  # backend -> prior
    bounds: tuple | None  # the fit's limits (per key for a dict-valued parameter); None: never fitted
    fit: dict  # fit group ("gpu.decode", "cpu.prefill", or a backend's own "vulkan.decode") -> keys (None: scalar)
    reason: str
    fixed_on: tuple = ()  # backends whose fits keep the prior
    explain: dict = field(default_factory=dict)  # backend -> the decode box's sentence while the row is active


# GPU dq: FLOP-equivalents at the FP32 rate per weight of a mat-vec: unpacking nibbles, a dp4a per 4 weights, a scale
# per block (Q4_0, Q8_0: a few); K-quants add sub-block scales and mins; the IQ types table lookups.
_GPU_DQ = {"f16": 1.0, "q8": 2.0, "legacy": 3.0, "q5": 4.0, "kquant": 4.5, "iquant": 7.0}
# GPU pp_dq: the tile dequantization of a quantized matmul relative to Q4_0's
_GPU_PP_DQ = {"f16": 1.0, "q8": 0.8, "legacy": 1.0, "q5": 1.2, "kquant": 1.4, "iquant": 2.0}
# CPU dq: the cycles of the reference kernels on a Zen core (Q4_K 18.3, Q5_K 29.4 per 256 weights, VEC_DOT_CYCLES)
# at its 32 FLOP a cycle for kquant and khigh
_CPU_DQ = {"f16": 2.0, "q8": 3.0, "legacy": 3.0, "q5": 5.0, "kquant": 2.3, "iquant": 8.0, "iq3": 10.0, "khigh": 3.7}
_CPU_PP_DQ = {"f16": 1.0, "q8": 1.0, "legacy": 1.0, "q5": 1.5, "kquant": 1.4, "iquant": 3.0, "iq3": 3.5}
_DQ_CPU_FREE = ("f16", "q8", "legacy", "q5", "kquant", "iquant", "iq3", "khigh")
_SHARE = (0.05, 2.0)  # a vendor's share of a backend's rate


def _each(value, backends=_GPU) -> dict:
    return dict.fromkeys(backends, value)


# fmt: off
TABLE = (
    # --- decode: the memory stream, the dequantization, the per-token costs ---
    Row("eta_bw", "share of bandwidth", "byte share", "F16/BF16/F32 weights and the KV cache (every type on a CPU)",
        0.85, {"cuda": 0.9, "rocm": 0.85, "vulkan": 0.85, "metal": 0.85, "sycl": 0.75, "cpu": 0.75}, (0.2, 1.0),
        {"gpu.decode": None, "cpu.decode": None},
        "streaming kernels never reach the datasheet bandwidth: refresh, page misses, each kernel's tail"),
    Row("eta_legacy", "share of bandwidth", "byte share", "Q8_0 and the 4/5-bit blocks, on a GPU",
        0.8, {"cuda": 0.85, "rocm": 0.8, "vulkan": 0.8, "metal": 0.8, "sycl": 0.7}, (0.2, 1.0), {"gpu.decode": None},
        "mat-vec kernels that dequantize simple blocks as they read load less evenly than F16's"),
    Row("eta_q", "share of bandwidth", "byte share", "the K-quants, on a GPU",
        0.7, {"cuda": 0.8, "rocm": 0.75, "vulkan": 0.75, "metal": 0.75, "sycl": 0.65}, (0.2, 1.0), {"gpu.decode": None},
        "super-blocks with sub-block scales: smaller, scattered loads"),
    Row("eta_iq", "share of bandwidth", "byte share", "the IQ lattices, on a GPU",
        0.6, {"cuda": 0.75, "rocm": 0.65, "vulkan": 0.65, "metal": 0.65, "sycl": 0.55}, (0.1, 1.0), {"gpu.decode": None},
        "table lookups per weight"),
    Row("bw_sat_gbs", "GB/s", "device", "an HBM GPU (devices: hbm)",
        1e6, {"cuda": 2500.0, "rocm": 1500.0, "vulkan": 1200.0, "metal": 2000.0, "sycl": 1000.0}, (100.0, 20000.0),
        {"gpu.decode": None},
        "batch-1 kernels keep too few bytes in flight to fill stacked memory: its bandwidth bends into this"),
    Row("thread_bw_gbs", "GB/s", "thread", "a CPU",
        1e6, {"cpu": 28.0}, (1.0, 200.0), {"cpu.decode": None},
        "one core pulls only so much from DRAM (its outstanding misses); the threads' sum bends into the cap"),
    Row("smt_gain", "cores", "second hardware thread", "a CPU with more threads than cores",
        0.15, {}, (0.0, 1.0), {"cpu.decode": None},
        "a core's second thread shares its FMA pipes and load ports"),
    Row("soc_cpu_share", "share of bandwidth", "device", "an SoC's CPU (devices: is_soc_cpu) without a measured read",
        1.0, {"cpu": 0.5}, (0.1, 1.0), {"cpu.decode": None},
        "an SoC's fabric is sized for its GPU: its CPU cluster reaches part of the unified bandwidth"),
    Row("layer_us", "µs", "block", "always (step_overhead_seconds)",
        20.0, {"cuda": 25.0, "rocm": 25.0, "vulkan": 30.0, "metal": 100.0, "sycl": 40.0, "cpu": 15.0}, (0.5, 500.0),
        {"gpu.decode": None, "cpu.decode": None},
        "a block is a dozen kernels; each launch and sync costs microseconds whatever its size"),
    Row("step_us", "µs", "step", "the backend running most blocks (step_overhead_seconds)",
        200.0, {"cuda": 150.0, "rocm": 800.0, "sycl": 300.0, "cpu": 300.0}, (1.0, 20000.0),
        {"gpu.decode": None, "cpu.decode": None},
        "sampling, the host round trip and graph set-up, once per token"),
    Row("expert_us", "µs", "expert kernel", "always",
        3.0, {"cuda": 1.0, "rocm": 1.0, "vulkan": 1.0, "metal": 1.0, "sycl": 5.0}, (0.05, 100.0), {"gpu.decode": None},
        "a small kernel per routed expert's add (one per MoE block where the adds are fused)"),
    Row("moe_layer_us", "µs", "MoE block", "always",
        0.0, {"cuda": 20.0, "rocm": 20.0, "vulkan": 20.0, "metal": 60.0, "sycl": 25.0, "cpu": 10.0}, (0.1, 1000.0),
        {"gpu.decode": None},
        "the router's mat-vec, softmax, top-k, gather and weighting kernels"),
    Row("overlap", "share", "step", "always",
        0.5, {}, (0.0, 1.0), {"gpu.decode": None, "cpu.decode": None},
        "how much of the dequantization hides under the memory stream"),
    Row("dq", "FLOP-equivalents", "weight, per class", "always",
        {"f16": 1.0, "q8": 1.5, "legacy": 2.0, "q5": 3.0, "kquant": 3.0, "iquant": 5.0},
        {**_each(_GPU_DQ), "cpu": _CPU_DQ}, (0.05, 100.0),
        {"gpu.decode": ("legacy", "kquant", "iquant"), "cpu.decode": _DQ_CPU_FREE},
        "dequantizing a weight and its dot product, at the vector FP32 rate"),
    Row("dq_emul", "ratio", "weight", "a GPU without dp4a, a CPU without int8 dot products",
        1.0, {"cuda": 4.0, "rocm": 4.0, "vulkan": 4.0, "cpu": 2.5}, (1.0, 50.0), {"gpu.decode": None, "cpu.decode": None},
        "int8 dot products emulated with byte extracts and multiply-adds", fixed_on=("metal", "sycl")),
    Row("dq_emul_kepler", "ratio", "weight", "a Kepler GPU (compute capability 3.x), on top of dq_emul",
        1.0, {"cuda": 1.8}, None, {},
        "the emulated __dp4a's four 32-bit integer multiply-adds run at a sixth of Kepler's FP32 rate"),
    Row("hbm_layer_us", "µs", "block", "hbm",
        10.0, {"rocm": 60.0}, (0.1, 1000.0), {"gpu.decode": None},
        "on HBM each kernel first waits out the memory's longer latency", fixed_on=("metal", "sycl")),
    Row("dq_row", "FLOP-equivalents", "matrix row", "a CPU, a type not repacked",
        0.0, {"cpu": 3000.0}, (1.0, 100000.0), {"cpu.decode": None},
        "a plain vec_dot call sets up its loop and reduces its accumulators once per row (~90 cycles)"),
    Row("dq_repack", "ratio", "weight", "a CPU, a repacked type",
        1.0, {}, (0.2, 2.0), {"cpu.decode": None},
        "a repacked GEMV reduces 4-8 interleaved rows against one activation load"),
    Row("apple_overlap", "share", "step", "an Apple M-series CPU (<0: overlap)",
        -1.0, {"cpu": 0.5}, (0.0, 1.0), {"cpu.decode": None},
        "a wide reorder window hides the dequantization under the weight stream"),
    Row("dq_arm", "ratio", "weight, per class", "an Arm CPU",
        {}, {"cpu": dict.fromkeys(CLASSES, 1.0)}, (0.05, 100.0),
        {"cpu.decode": ("q8", "legacy", "q5", "kquant", "iquant", "iq3", "khigh")},
        "ggml-cpu's NEON kernels cost a class this many times its x86 (AVX2/AVX-512) kernels"),
    # --- prefill ---
    Row("pp_eff_q", "share of rate", "FLOP", "quantized weights",
        0.5, {"cuda": 0.45, "rocm": 0.35, "vulkan": 0.3, "metal": 0.8, "sycl": 0.2, "cpu": 0.5}, (0.01, 10.0),
        {"gpu.prefill": None, "cpu.prefill": None},
        "the share of the matrix units' rate quantized matmuls reach (MMQ, cooperative matrices, simdgroups)"),
    Row("pp_eff_c", "share of FP32 rate", "FLOP", "a GPU, quantized weights",
        1e6, {"cuda": 4.5, "rocm": 3.0, "vulkan": 3.0, "metal": 8.0, "sycl": 3.0}, (0.2, 50.0), {"gpu.prefill": None},
        "a quantized matmul dequantizes its tiles on the ordinary ALUs"),
    Row("pp_eff_f", "share of rate", "FLOP", "F16/BF16 weights (and GPUs without int8 units)",
        0.5, {"cuda": 0.5, "rocm": 0.3, "vulkan": 0.3, "metal": 0.75, "sycl": 0.2, "cpu": 0.5}, (0.01, 10.0),
        {"gpu.prefill": None},
        "BLAS GEMMs at the FP16 matrix rate"),
    Row("pp_sat_tflops", "TFLOP/s", "device", "a GPU",
        1e6, {"cuda": 250.0, "rocm": 150.0, "vulkan": 150.0, "metal": 60.0, "sycl": 60.0}, (20.0, 5000.0),
        {"gpu.prefill": None},
        "the sustained ceiling of the biggest parts (tile shapes, launches, power)"),
    Row("pp_gemm", "ratio", "FLOP", "a CPU, a tiled type (repacked or tinyBLAS)",
        1.0, {"cpu": 1.8}, (1.0, 5.0), {"cpu.prefill": None},
        "tiled GEMMs reuse each activation load across 4-8 rows"),
    Row("pp_gemm_arm", "ratio", "FLOP", "an Arm CPU, a tiled type (<0: pp_gemm)",
        -1.0, {"cpu": 2.5}, (1.0, 5.0), {"cpu.prefill": None},
        "Arm's plain matmul path gains more from tiling than x86's"),
    Row("pp_layer_us", "µs", "block x micro-batch", "not offloaded",
        50.0, {"cuda": 30.0, "rocm": 60.0, "vulkan": 40.0, "metal": 30.0, "sycl": 50.0, "cpu": 100.0}, (0.5, 5000.0),
        {"gpu.prefill": None, "cpu.prefill": None},
        "the non-matmul ops of a block (norms, rope, softmax, copies)"),
    Row("pp_expert_us", "µs", "expert call x micro-batch", "always",
        20.0, {**_each(5.0), "cpu": 5.0}, (0.1, 1000.0), {"gpu.prefill": None},
        "one small GEMM per expert touched (mul_mat_id)"),
    Row("pp_moe_eff", "share of rate", "expert FLOP", "an MoE model",
        1.0, {**_each(0.6), "cpu": 0.7}, (0.05, 1.0), {"gpu.prefill": None},
        "routed experts' GEMMs see few tokens each, in part-filled tiles"),
    Row("pp_dq", "ratio", "FLOP, per class", "quantized weights",
        dict.fromkeys(CLASSES, 1.0), {**_each(_GPU_PP_DQ), "cpu": _CPU_PP_DQ}, (0.05, 100.0),
        {"gpu.prefill": ("kquant", "iquant"), "cpu.prefill": ("f16", "q8", "q5", "kquant", "iquant", "iq3")},
        "GPU: a class's tile dequantization relative to Q4_0's; CPU: its matmul's cost relative to pp_eff_q"),
    Row("pcie_eff", "share of link", "byte", "op offload's weight copies, the logits copy",
        0.8, {}, None, {}, "pinned host copies reach part of the PCIe link"),
    # --- a vendor's driver stack, a backend's own kernels ---
    Row("vendor_bw", "share", "byte share", "Vulkan on a vendor's GPU (intel: Mesa ANV; intel_windows, intel_mesa24)",
        {}, {"vulkan": {"intel": 0.6, "intel_windows": 1.0, "intel_mesa24": 0.35}}, _SHARE,
        {"vulkan.decode": ("intel", "intel_windows", "intel_mesa24")},
        "llama.cpp's Vulkan shaders on Intel's drivers reach a smaller share of the bandwidth (#14001)"),
    Row("vendor_pp", "share", "FLOP", "Vulkan on a vendor's GPU",
        {}, {"vulkan": {"intel": 0.5, "amd": 0.7}}, _SHARE, {"vulkan.prefill": ("intel", "amd")},
        "AMD's and Intel's drivers offer only KHR cooperative matrices (smaller tiles)"),
    Row("vendor_dq", "ratio", "weight", "Vulkan on a vendor's GPU",
        {}, {"vulkan": {"intel": 2.0, "intel_windows": 1.0}}, (0.2, 50.0),
        {"vulkan.decode": ("intel", "intel_windows")},
        "Intel's dequantizing mat-vec shaders do more work per weight"),
    Row("pp_eff_v", "share of FP32 rate", "FLOP", "SYCL, an FP32 build (feature sycl_f16 absent)",
        0.75, {}, (0.05, 1.0), {"sycl.prefill": None},
        "without GGML_SYCL_F16 every prompt matmul is an FP32 SGEMM on the vector ALUs"),
    Row("sycl_plain", "share", "byte share", "sycl (the types without a reordered kernel in the build)",
        1.0, {"sycl": 0.45}, (0.1, 1.0), {"sycl.decode": None},
        "a type without a reordered mat-vec kernel streams its interleaved blocks as stored",
        explain={"sycl": "a type without a reordered SYCL kernel (IQ types, MXFP4, Q4_1, Q5_0) streams at "
                         "{value:.2f}× that"}),
    Row("vendor_legacy", "ratio", "byte share", "vulkan, a vendor with a factor (its float legacy-quant shader's types)",
        {}, {"vulkan": {"intel": 1.5}}, (0.3, 4.0), {"vulkan.decode": ("intel",)},
        "Intel keeps Q4_0 and Q5_1 on the float mat-vec shader, which streams faster than its others",
        explain={"vulkan": "Q4_0 and Q5_1, on this vendor's float mat-vec shader, stream at {value:.2f}× that"}),
    Row("nograph_layer_us", "µs", "block", "no graphs",
        0.0, {"cuda": 20.0, "rocm": 40.0}, (0.1, 1000.0), {"cuda.decode": None, "rocm.decode": None},
        "without graph replay the host launches every kernel of every token",
        explain={"cuda": "no CUDA graphs on this GPU: every kernel launched by the host, {value:.0f} µs more per block",
                 "rocm": "no HIP graphs in this build: every kernel launched by the host, {value:.0f} µs more per "
                         "block"}),
    Row("sync_layer_us", "µs", "block", "barrier per node",
        0.0, {"vulkan": 20.0}, (0.1, 1000.0), {"vulkan.decode": None},
        "a build without node dependencies puts a full pipeline barrier after every node"),
    # --- recurrent, linear-attention and short-conv blocks (enginelab.measured.recurrent) ---
    Row("scan_us", "µs", "token x recurrent block", "the block has a recurrent mixer",
        0.0, {"cuda": 0.40, "rocm": 4.1, "vulkan": 0.86, "metal": 1.0, "sycl": 10.0}, (0.001, 100.0),
        {"hybrid.prefill": None},
        "ggml's ssm_scan and gated_delta_net kernels walk a micro-batch's tokens one after another (priors: "
        "enginelab.hybrid_calibration's fit on hybrid runs)",
        fixed_on=("cpu",)),
)
# fmt: on
ROWS = {r.name: r for r in TABLE}


def _with_values(self, values: dict):
    """A copy with some values replaced; dict-valued ones by key ("dq.kquant": 4.0)."""
    plain = {k: v for k, v in values.items() if "." not in k}
    out = replace(self, **plain)
    for k, v in values.items():
        if "." in k:
            name, sub = k.split(".", 1)
            out = replace(out, **{name: {**getattr(out, name), sub: v}})
    return out


def _field(row: Row):
    if isinstance(row.default, dict):
        return field(default_factory=lambda d=row.default: dict(d))
    return field(default=row.default)


# One backend's parameters (a field per row of TABLE)
Params = make_dataclass(
    "Params",
    [(r.name, dict if isinstance(r.default, dict) else float, _field(r)) for r in TABLE],
    frozen=True,
    namespace={"with_values": _with_values, "__module__": __name__},
)
Params.__doc__ = "One backend's parameters: a field per row of enginelab.measured.params.TABLE."
PRIORS = {b: Params(**{r.name: r.priors[b] for r in TABLE if b in r.priors}) for b in BACKENDS}
TYPICAL = {"decode": (0.85, 1.15), "prefill": (0.8, 1.2)}  # before a fit: a spread of +-15/20 %


# ---------------------------------------------------------------------------------------------------------
# What a fit may move
# ---------------------------------------------------------------------------------------------------------
def _names(group: str, backend: str = "") -> tuple:
    out = []
    for r in TABLE:
        if group not in r.fit or backend in r.fixed_on:
            continue
        keys = r.fit[group]
        out += [r.name] if keys is None else [f"{r.name}.{k}" for k in keys]
    return tuple(out)


def free_names(backend: str, kind: str) -> tuple:
    """The parameters a fit of (backend, kind) moves: the GPU's or CPU's group, then the backend's own."""
    own = _names(f"{backend}.{kind}") if backend != "cpu" else ()
    return _names(f"{'cpu' if backend == 'cpu' else 'gpu'}.{kind}", backend) + own


def bound(name: str) -> tuple:
    """The fit's limits of a parameter ("dq.kquant": the dict's row's)."""
    return ROWS[name.split(".")[0]].bounds


def explain_sentence(name: str, backend: str, value: float) -> str:
    """The decode box's sentence for an active row of this backend ("" when it has none)."""
    text = ROWS[name].explain.get(backend, "") if name in ROWS else ""
    return text.format(value=value) if text else ""


# ---------------------------------------------------------------------------------------------------------
# The fitted values (enginelab/data/measured_params.json, written by tools/fit_measured.py)
# ---------------------------------------------------------------------------------------------------------
_FIELD_NAMES = {f.name for f in fields(Params)}


def _load_fitted() -> tuple:
    try:
        text = get_data("enginelab", "data/measured_params.json").decode("utf-8")
    except (FileNotFoundError, OSError):
        return dict(PRIORS), {}, {}
    data = json.loads(text)
    params = dict(PRIORS)
    for backend, values in data.get("params", {}).items():
        if backend in PRIORS:
            params[backend] = PRIORS[backend].with_values(
                {k: v for k, v in values.items() if k.split(".")[0] in _FIELD_NAMES}
            )
    return params, data.get("ranges", {}), data


PARAMS, RANGES, FIT = _load_fitted()


def params_for(backend: str, params: dict | None = None):
    table = PARAMS if params is None else params
    if backend not in table:
        raise ValueError(f"backend: unknown {backend!r}; allowed: {', '.join(BACKENDS)}")
    return table[backend]
