"""Which of llama.cpp's changes a build has, as the measured profile asks it: predicates on a feature set.

A feature is a key of a row of data/llama_cpp_changes.csv ("fused_expert_adds:cuda", "sycl_reorder:sycl:Q4_K",
"cpu_repack:cpu:Q4_K x86") or a build option ("sycl_f16"). The app estimates today's llama.cpp: TODAY, every change
in the table. enginelab.measured.builds turns a published run's build (its date and marks) into its feature set;
the functions here take a set, or a build string they hand to it ("" or None: TODAY). Nothing here reads a date.
"""

from __future__ import annotations

from functools import lru_cache

from .devices import _Named, cpu_isa_keys, cuda_graph_arch, gpu_arch

# Today's llama.cpp: every row of data/llama_cpp_changes.csv, and an FP16 SYCL build (tests/test_physics.py checks it
# against builds.features_at(""))
TODAY = frozenset(
    {
        "fused_expert_adds:metal", "fused_expert_adds:vulkan", "fused_expert_adds:cuda", "fused_expert_adds:rocm",
        "hip_graphs:rocm", "cuda_graphs:cuda:volta_turing", "vulkan_node_deps:vulkan",
        "cuda_graphs_batch:cuda", "cuda_graphs_batch:rocm", "cuda_graphs_mmid:cuda", "cuda_graphs_mmid:rocm",
        "mmvq_mmid:cuda", "mmvq_mmid:rocm", "mmq_mmid:cuda", "mmq_mmid:rocm",
        "mmid_sync_free:cuda", "mmid_sync_free:rocm",
        "mmv_float_batch:cuda", "mmv_float_batch:rocm", "mmf:cuda", "mmf:cuda:volta", "mmf:rocm:rdna4", "mmf:rocm:rdna3",
        "mmq_mfma_batch4:rocm:cdna", "cublas_refactor:cuda", "cublas_refactor:rocm", "gcn_mmq_config:rocm:vega",
        "vulkan_mmvq:vulkan:Q4_1", "vulkan_mmvq:vulkan:Q5_0", "vulkan_mmvq:vulkan:Q8_0",
        "sycl_reorder_default:sycl",
        "sycl_reorder:sycl:Q4_0", "sycl_reorder:sycl:Q4_K", "sycl_reorder:sycl:Q6_K", "sycl_reorder:sycl:Q8_0",
        "sycl_reorder:sycl:Q5_K", "sycl_reorder:sycl:Q3_K", "sycl_reorder:sycl:Q1_0", "sycl_reorder:sycl:Q2_K",
        "sycl_reorder_moe:sycl:Q4_K", "sycl_reorder_moe:sycl:Q5_K", "sycl_reorder_moe:sycl:Q6_K",
        "cpu_repack:cpu:Q4_0 x86", "cpu_repack:cpu:IQ4_NL x86", "cpu_repack:cpu:Q4_K x86",
        "cpu_repack:cpu:Q4_0 arm_dot", "cpu_repack:cpu:IQ4_NL arm_dot", "cpu_repack:cpu:Q4_K arm_dot",
        "cpu_repack:cpu:Q8_0 arm_dot", "cpu_repack:cpu:Q5_K arm_dot", "cpu_repack:cpu:Q6_K arm_dot",
        "cpu_repack:cpu:Q4_K arm_i8mm", "cpu_repack:cpu:Q5_K arm_i8mm", "cpu_repack:cpu:Q6_K arm_i8mm",
        "cpu_tinyblas:cpu:Q8_0 x86", "cpu_tinyblas:cpu:Q4_0 x86", "cpu_tinyblas:cpu:IQ4_NL x86",
        "cpu_tinyblas:cpu:Q5_0 x86", "cpu_tinyblas:cpu:Q8_0 arm_dot", "cpu_tinyblas:cpu:Q4_0 arm_dot",
        "sycl_f16",
    }
)  # fmt: skip


def feature_set(build=None) -> frozenset:
    """A build's feature set: a set as it is; "" or None, TODAY; a build string, builds.features_at's."""
    if not build:
        return TODAY
    if isinstance(build, frozenset):
        return build
    from .builds import features_at  # a published run's build: its date read from the change table

    return features_at(build)


# --- the CPU's tiled kernels ---------------------------------------------------------------------------------------
# ggml-cpu repacks some types at load into blocks interleaved across 4 or 8 rows (the CPU_REPACK buffer, on by
# default) and multiplies them with GEMV/GEMM kernels that reuse each activation load across those rows; llamafile's
# tinyBLAS tiles a few more types the same way when no repacked buffer holds them. Which types on which ISA: the
# cpu_repack and cpu_tinyblas rows (an i8mm core runs the dotprod kernels too; the gain is the tiling's, not the
# wider instruction's). A build may force a repack on ("cpu_repack:cpu:<type> any": a pull request's branch).
def cpu_repacked(ggml_type: str, device, build=None) -> bool:
    """Whether ggml-cpu multiplies this type with a repacked GEMV/GEMM on this CPU in this build."""
    f = feature_set(build)
    return f"cpu_repack:cpu:{ggml_type} any" in f or _on_isa("cpu_repack", ggml_type, device, f)


def cpu_tiled(ggml_type: str, device, build=None) -> bool:
    """Whether ggml-cpu multiplies this type with a tiled GEMM (repacked, or tinyBLAS) on this CPU in this build,
    rather than one or two dot products at a time."""
    f = feature_set(build)
    return cpu_repacked(ggml_type, device, f) or _on_isa("cpu_tinyblas", ggml_type, device, f)


def _on_isa(kernels: str, ggml_type: str, device, f: frozenset) -> bool:
    return _on_isa_named(kernels, ggml_type, getattr(device, "name", "") or "", f)


@lru_cache(maxsize=4096)
def _on_isa_named(kernels: str, ggml_type: str, name: str, f: frozenset) -> bool:  # decode asks per type, every pass
    return any(f"{kernels}:cpu:{ggml_type} {k}" in f for k in cpu_isa_keys(_Named(name)))


# --- GPU backends ----------------------------------------------------------------------------------------------------
def sycl_reordered(ggml_type: str, build=None, expert: bool = False) -> bool:
    """Whether ggml-sycl multiplies this type (a routed expert's, if expert) at batch 1 with a reordered kernel."""
    return f"{'sycl_reorder_moe' if expert else 'sycl_reorder'}:sycl:{ggml_type}" in feature_set(build)


def sycl_f16_build(build=None) -> bool:
    """Whether a SYCL build multiplies prompt matmuls in FP16 on the XMX units (GGML_SYCL_F16=ON, what llama.cpp's CI
    and Docker image build) rather than in FP32 on the vector ALUs (marked "-f16" in a run's build)."""
    return "sycl_f16" in feature_set(build)


# ggml-vulkan's batch-1 mat-vec on Intel GPUs (ggml_vk_should_use_mmvq; data/calibration/vulkan_intel_mmvq.md): these
# legacy types take the float shader that dequantizes as it reads, unless the build's integer-dot shader (MMVQ) takes
# them; Q4_0 and Q5_1 never do ("from tests on A770 Linux" the float shader is faster for them).
VULKAN_FLOAT_LEGACY_TYPES = ("Q4_0", "Q5_1", "Q4_1", "Q5_0", "Q8_0")


def vulkan_float_legacy(ggml_type: str, build=None) -> bool:
    """Whether ggml-vulkan multiplies this type at batch 1 on an Intel GPU with the float legacy-quant shader."""
    return ggml_type in VULKAN_FLOAT_LEGACY_TYPES and f"vulkan_mmvq:vulkan:{ggml_type}" not in feature_set(build)


def cuda_graphs(device, build=None) -> bool:
    """Whether ggml-cuda replays a decode step's graph on this GPU: Ampere and newer always, Volta and Turing where
    the build has cuda_graphs:cuda:volta_turing, Pascal and older never."""
    arch = cuda_graph_arch(device)
    return arch == "ampere" or (arch == "volta_turing" and "cuda_graphs:cuda:volta_turing" in feature_set(build))


def hip_graphs(build=None) -> bool:
    """Whether a ROCm build replays a decode step's graph (GGML_HIP_GRAPHS on: hip_graphs:rocm)."""
    return "hip_graphs:rocm" in feature_set(build)


def vulkan_node_sync(build=None) -> bool:
    """Whether a ggml-vulkan build puts a full pipeline barrier after every node (no vulkan_node_deps:vulkan)."""
    return "vulkan_node_deps:vulkan" not in feature_set(build)


def fused_expert_adds(backend: str, build=None) -> bool:
    """Whether a build sums an MoE block's routed experts in one fused kernel on this backend (build_moe_ffn adds the
    k experts' outputs with k - 1 consecutive adds, which Metal, Vulkan and CUDA/ROCm fuse; ggml-sycl does not)."""
    return f"fused_expert_adds:{backend}" in feature_set(build)


def expert_kernels(work, backend: str, build=None) -> float:
    """The small per-expert kernels of a pass's MoE blocks, each costing expert_us: one per routed expert
    multiplied (work.expert_calls: the k - 1 adds of the sum, and on ggml-sycl before its fused kernel the host's
    loop over the experts), or, where the backend fuses the sum (fused_expert_adds), one per MoE block."""
    return work.moe_layers if fused_expert_adds(backend, build) else work.expert_calls


# --- ggml-cuda's kernels past one token (CUDA and ROCm) ----------------------------------------------------------
# A matmul of n tokens runs on a kernel that streams the weights once (MMVQ for quantized types, mul_mat_vec or
# mul_mat_f for float ones) up to a limit, and on tiles above it (MMQ, or cuBLAS/hipBLAS for float weights). The limit
# per type, GPU and build (ggml-cuda.cu's ggml_cuda_mul_mat dispatch): MMVQ_MAX_BATCH_SIZE = 8 for quantized types,
# 3 on CDNA where the build routes 4 tokens and more to MMQ (mmq_mfma_batch4); for float types 1 before mul_mat_vec
# took several columns (mmv_float_batch), then 8, and 16 where the build's mul_mat_f runs on this GPU's matrix units
# (mmf: Turing and newer, Volta, RDNA3 and RDNA4, each from its own change).
FLOAT_TYPES = frozenset({"F32", "F16", "BF16"})
MMVQ_MAX_BATCH = 8
MMF_MAX_BATCH = 16
_NV_TENSOR_ARCHS = frozenset({"nv_geforce", "nv_pro", "nv_hbm", "l40", "turing_geforce", "turing_pro"})


def mmf_key(device, backend: str) -> str:
    """The change that put mul_mat_f on this GPU ("" where it never runs: Pascal and older, GCN, CDNA, RDNA1/2)."""
    arch = gpu_arch(device, backend)[0]
    if backend == "cuda":
        return "mmf:cuda" if arch in _NV_TENSOR_ARCHS else "mmf:cuda:volta" if arch == "volta" else ""
    if backend == "rocm" and arch in ("rdna3", "rdna4"):
        return f"mmf:rocm:{arch}"
    return ""


def streaming_max_tokens(ggml_type: str, device, backend: str, build=None) -> int:
    """The most tokens a dense matmul of this type runs on a kernel that streams the weights once (CUDA and ROCm; see
    above). Other backends: 8, their mat-vec kernels' column limit."""
    if backend not in ("cuda", "rocm"):
        return MMVQ_MAX_BATCH
    f = feature_set(build)
    if ggml_type in FLOAT_TYPES:
        if f"mmv_float_batch:{backend}" not in f:
            return 1
        key = mmf_key(device, backend)
        return MMF_MAX_BATCH if key and key in f else MMVQ_MAX_BATCH
    if backend == "rocm" and "mmq_mfma_batch4:rocm:cdna" in f and gpu_arch(device, backend)[0] in ("cdna", "cdna3"):
        return 3
    return MMVQ_MAX_BATCH
