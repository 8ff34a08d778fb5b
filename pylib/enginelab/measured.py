"""The measured profile: how fast llama.cpp's kernels really move and multiply, per backend.

perf_model times each forward pass from the work it does on each device (a perf_model.Work: bytes of
weights and KV read, FLOPs, blocks, and weights per ggml type). The course profile divides that work by
the module's flat efficiencies. This profile uses a few physical parameters per backend (not per device),
fitted on published llama-bench runs (data/calibration/) by enginelab.calibration; their values, the runs
they were fitted on and their leave-one-device-out errors are in enginelab/data/measured_params.json.

A device is described by its datasheet figures (bandwidth, the FP16 figure of perf_model.Device) and the rates
its units run at (`rates`): the non-tensor FP32 rate of its vector ALUs, the FP16 rate of its matrix units at
the accumulation llama.cpp uses, and the rate of the units a quantized matmul multiplies on (int8 tensor cores,
dp4a, or the FP16 path). Where a Device does not carry them they come from the device's row in
data/calibration/devices.csv (whitepaper figures, matched by name), else from the architecture's ratios to the
FP16 figure (`_rule_rates`).

Decode, one device (a GPU, or the CPU with n_threads threads):

    t = t_mem + t_cmp - overlap * min(t_mem, t_cmp)
    t_mem = sum_class bytes_class / (eta_class * bw_eff)
        GPU: bw_eff = bandwidth, or soft_min(bandwidth, bw_sat / eta_bw) on HBM parts (batch-1 kernels stall)
        CPU: bw_eff = soft_min(n_eff * thread_bw, eta_bw * bandwidth) with CPU_BW_KNEE  (a core's outstanding
             misses; the threads' sum bends into the memory controller's cap)
    t_cmp = sum_class weights_class * dq_class / vector rate  (dequantization and dot products per weight:
            the GPU's FP32 ALUs, the CPU's FMA rate of the cores in use)

plus, per step, layer_us for every block (kernel launches and syncs; a CPU's barriers; hbm_layer_us more on an
HBM part), step_us (sampling, graph build and launch), expert_us per routed expert and moe_layer_us per MoE block
(its router and gather kernels), and the copy of the token's logits back to the host over a discrete GPU's PCIe
link (step_overhead_seconds; HOST_LINKS for the single-board hosts some runs use). On a CPU eta is the same for
every type (its cores stream what they are given) and the types differ by dq, per ggml-cpu's kernels
(CPU_CLASS: the repacked Q4_K joins the 4-bit class; in decode the K-quants that keep their high bits apart,
Q3_K, Q5_K and Q6_K, cost more than Q2_K and Q4_K; dq_arm for Arm cores; within a class, each K-quant's plain
vec_dot costs what its kernel's cycles on that family of cores give relative to the class's reference type:
VEC_DOT_CYCLES, constants of ggml-cpu's code, not fitted).

Prefill, one micro-batch: matmul FLOPs at the rate of the kernels for the weights' type class, the weights
streamed once (at eta_bw), pp_layer_us per block and pp_expert_us per expert touched:
    GPU, quantized weights (MMQ: tiles dequantized on the vector ALUs, multiplied on the matrix units)
        1 / rate = 1 / (pp_eff_q * mma) + pp_dq_class / (pp_eff_c * fp32),   bending into pp_sat_tflops
    GPU, F16/BF16 weights (BLAS GEMMs), and quantized weights where the backend dequantizes to F16 first
        rate = pp_eff_f * f16 (the FP16 matrix rate)
    CPU: rate = n_eff * core FMA rate * pp_eff_q / pp_dq_class (/ dq_emul without int8 dot products),
         times pp_gemm for the types ggml-cpu multiplies with a tiled GEMM on that ISA in that build (repacked
         interleaved blocks, or llamafile's tinyBLAS)

Why each parameter exists (the reasons are physics; the values are fitted):
  eta_bw       streaming kernels never reach the datasheet bandwidth: refresh, page misses, the tail of each
               kernel. GDDR and LPDDR parts reach 80-90% with large F16 mat-vecs.
  eta_legacy/eta_q/eta_iq
               quantized mat-vec kernels dequantize as they read (smaller, scattered loads, scales per block,
               K-quant super-blocks, IQ lattice tables): a lower share of the bandwidth than F16.
  bw_sat       a single sequence issues one mat-vec per weight matrix; to fill HBM (stacked memory: longer
               latency, 1-5 TB/s) a kernel must keep megabytes in flight, and llama.cpp's batch-1 kernels do not:
               V100s, H100s and Instinct cards decode far below their bandwidth while GDDR cards of the same
               bandwidth do not ("batch-1 behaviour of HBM parts"). An HBM part's bandwidth bends into it.
  dq           FLOP-equivalents per weight of dequantizing and the dot product, by type class, at the vector
               FP32 rate: cheap for Q8_0 and the (repacked) 4-bit blocks, more for Q5's assembled fifth bit and the
               K-quants' sub-block scales, most for the IQ lattices. It bounds decode
               where the vector ALUs are weak against the bandwidth: A30, V100, Turing, Pascal and older GPUs;
               a CPU on few cores (the issue's 2-core Zen 4: Q4_K_M decode implies 19.6 GB/s, F16 28.7 GB/s).
  dq_emul      GPUs without an int8 dot-product instruction (Kepler, Maxwell, GP100) run the same kernels with
               __dp4a emulated by byte extracts and multiply-adds: their dq is this many times larger. Likewise
               x86 CPUs without VNNI (before Ice Lake / Zen 4) and Arm cores without sdot: three instructions
               where one would do, for decode's dot products and prefill's quantized matmuls.
  overlap      how much of that work hides under the memory stream (1: fully).
  apple_overlap the same for an Apple M-series CPU. Its performance cores keep far more instructions in flight
               (a reorder window of ~600 against Zen 4's 320) behind the loads of the weight stream, so the
               dequantization hides under it almost entirely: an M4 Max decodes llama 8B at ~205 GB/s whatever
               the type (Q4_K_M, Q6_K; #16739/#18888), where the x86 cores' decode time grows with the type's work.
  thread_bw    one core only pulls so much from DRAM (its outstanding-miss limit): bandwidth grows with
               threads until the memory controller saturates. It bends into that cap (CPU_BW_KNEE) rather than
               meeting it at a corner: near saturation the controller's queues lengthen every miss, so each
               thread pulls less (a Ryzen 9 7950X decodes F16 at 35, 58 and 67 GB/s on 1, 2 and 4 threads).
  smt_gain     a second hardware thread on a core adds this share of a core (shared FMA pipes and load ports).
  dq_arm       ggml-cpu has a kernel per type and ISA: Arm's NEON dot products (sdot) make the plain 4/5-bit
               blocks cheaper than x86's AVX2/AVX-512 code does, the 3-bit lattices dearer; an Arm core's dq per
               class is x86's times this. (F16 is fixed, not fitted: half of x86's on a core with FP16 vector
               arithmetic, which multiplies in FP16 lanes: ARM_F16_ARITH.)
  dq_repack    a repacked type's GEMV (CPU_REPACK) reads 4-8 interleaved rows against one activation load and
               reduces them together: its work per weight, relative to the plain vec_dot of the same class. The
               repack pull requests time the same build with and without it (an Apple M4 Max decodes llama 8B
               Q4_K_M 10-18% and Q6_K 14% faster repacked, #16739/#17494/#18888); a repacked Q4_K costs what a
               repacked Q4_0 does, a plain Q4_K what the other K-quants do.
  soc_cpu_share the CPU cluster of an SoC reaches only part of the unified memory's bandwidth (the fabric is
               sized for the GPU: an M-series Max CPU tops out near half of its 400 GB/s, a Ryzen AI Max's CPU
               dies near half of its 256 GB/s through their fabric links). Where a source states what a chip's
               CPU cores reach (devices.csv cpu_read_gbs: the M2 Max's owner measured 110-115 GB/s at most), that
               figure stands in for share x bandwidth, as the lab's own read test does (cpu_bandwidth).
  expert_us    a short kernel per routed expert. At batch 1 the k experts of a block share one mul_mat_id launch
               on CUDA, ROCm and Vulkan, but build_moe_ffn sums their outputs with k - 1 adds, a kernel each, and
               ggml-sycl looped over the experts from the host (copying the router's choice back and waiting for
               it) until its fused kernel, #21920 (2026-04-22). Metal (July 2025), Vulkan and CUDA/ROCm (August
               2025) fuse the adds into one kernel (fused_expert_adds): a build since then pays expert_us once per
               MoE block, whatever its k. Held out, that moved an RTX 5090's late-2025 Vulkan decode of
               Qwen3-30B-A3B (k = 8) from 29-31% slow to 8%. The one direct measure is CUDA's: #15631 took an
               RTX 4090's batch-1 Qwen3-30B-A3B from 194.2 to 205.9 t/s (0.29 ms a token over 48 blocks of 7 adds,
               with an add-rms_norm fusion in the same change), so at most 0.9 us an add: the GPU backends' prior
               is 1 us, a small kernel's dispatch. The runs hardly size it otherwise (the fits stay at the prior);
               SYCL's prior stays 5 us, its host loop waits for each expert.
  moe_layer_us an MoE block also runs kernels a dense one has not, whatever its k: the router's mat-vec, softmax
               and top-k (argsort), the gather of the chosen weights, their normalisation, and the weighted sum of
               the experts' outputs (llama.cpp's build_moe_ffn); at batch 1 today's mat-vec kernels take all k
               experts in one launch (mul_mat_id), so these few kernels, not the experts, carry the fixed cost.
  nograph_layer_us
               ggml-cuda records a decode step's kernels as a CUDA graph once and replays it, one launch a token, but
               only on the GPUs it enables graphs for (cuda_graphs: Ampere and newer; Volta and Turing since July
               2026). On the others the host launches each of a block's dozen kernels every token, a few microseconds
               apiece: this much more per block (prior 20 us; in September 2025 a Quadro RTX 6000 decoded a 7B Q4_0
               at 103 t/s, an RTX A6000 with 14% more bandwidth at 139: 35% faster). A ROCm build compiles the same
               graph code only with GGML_HIP_GRAPHS, off by default until April 2026 (hip_graphs), so every earlier
               ROCm run launched each kernel from the host. ROCm's prior is 40 us (a HIP launch costs more than a
               CUDA one); fits of its runs from priors of 10, 20, 40 and 80 us end at 12, 26, 42 and 54 us, so the
               runs pull it up, and held out by device ROCm's decode median falls from 10% to about 6%.
  sync_layer_us
               ggml-vulkan records a token's graph into command buffers. Until #15489 (2025-08-23) it ended every
               node with a full pipeline barrier, so each of a block's ~20 dispatches waited for the one before it to
               drain the GPU; since then a node waits only for the nodes it reads, and #15850 (2025-09-08) sorts the
               graph so that independent ones (Q, K and V) run together. A build from before pays this much more per
               block (vulkan_node_sync). Prior 20 us: ~20 barriers of about a microsecond each. The runs barely size
               it (fits from priors of 5 and 60 us stay at their priors: among the old builds an RTX 4070 is
               already modelled slow while an RTX 5090, a 3090 and a 2070 are modelled fast); it is there so that
               the 2025 builds do not teach the fit a per-block cost today's builds no longer pay. It never applies
               to the app's estimates, which are for today's build.
  hbm_layer_us on an HBM part each of those kernels first waits out the memory's longer latency (and the
               Instinct cards' slower kernel dispatch): an extra cost per block ("batch-1 behaviour of HBM parts").
  layer_us     every block is a dozen kernels (norms, rope, matmuls, attention, adds); each launch and sync
               costs microseconds whatever its size, so small models and fast cards are launch-bound.
  step_us      sampling, the host round trip and graph setup, once per token.
  pp_eff_q     the share of the matrix units' rate llama.cpp's quantized matmuls reach (MMQ on int8 tensor
               cores or dp4a on NVIDIA/AMD, cooperative matrices on Vulkan, simdgroup matrices on Metal,
               VNNI/AVX-512/NEON dot products on a CPU).
  pp_eff_c     a quantized matmul also dequantizes its weight tiles (once per tile of columns, so per FLOP)
               and converts its activations on the ordinary ALUs, at the FP32 rate. So a GPU with huge tensor
               cores and few CUDA cores (A100, H100, A30) reaches a small share of its tensor peak (0.1-0.25 in
               llama.cpp), while a GeForce card reaches most of it. pp_dq scales it per type class.
  pp_eff_f     F16/BF16 weights: cuBLAS/hipBLAS/Metal GEMMs at the FP16 matrix rate (FP16 accumulate on
               GeForce cards: twice the datasheet's FP32-accumulate figure). Also the dequantize-then-GEMM path
               of GPUs without int8 matrix units (V100: cuBLAS FP16 for quantized weights).
  pp_sat       the largest sustained rate the kernels reach on the biggest parts (tile shapes, launch counts,
               power limits), a soft ceiling.
  pp_gemm      CPU: ggml-cpu repacks some types at load into blocks interleaved across 4 or 8 rows and multiplies
               them with GEMM kernels that reuse every activation load across those rows (CPU_REPACK: which types,
               ISAs and builds), and llamafile's tinyBLAS tiles a few more the same way (CPU_TINYBLAS); the plain
               path computes one or two dot products at a time. A tiled type's matmuls run this many times faster
               (PR tables: x86 Q4_K 1.6-1.9x, PR #12332; Arm Q4_K 1.6-1.9x, Q6_K 2.1-3.1x, Q8_0 3.5x on an M4
               Max, #16739/#17494/#18888/#19360/#18096; a 7950X's Q5_0 2.1x with tinyBLAS, #10010). One factor for
               x86 and one for Arm (pp_gemm_arm), whose plain path gains more from tiling (an M2 Ultra's IQ4_NL
               pp256 3.0x with its repack, #10541); the i8mm and dotprod builds of the same repacked GEMM run at the
               same speed on an M4 Max.
  pp_layer_us  per block and micro-batch: the non-matmul ops (norms, rope, softmax, copies).
  pp_expert_us an MoE micro-batch sorts its tokens by expert and runs one small GEMM per expert touched
               (mul_mat_id): a cost per expert and micro-batch.
  pp_moe_eff   and those GEMMs see only the tokens routed to their expert (u * k / E: 64 of 512 for gpt-oss-20b),
               gathered and scattered, in part-filled tiles: the routed experts' FLOPs run at this share of the
               dense rate (an RTX 4090 runs gpt-oss-20b's prompt at about half its dense FLOP rate).
  pcie_eff     op offload's weight copies reach this share of the PCIe link (pinned host memory).
  pp_eff_v     an FP32 build of the SYCL backend (GGML_SYCL_F16 off, "-f16" in a run's build) runs every prompt
               matmul as an FP32 SGEMM on the vector ALUs, at this share of their rate, where an FP16 build converts
               to half and reaches the XMX units (sycl_f16_build). Prior 0.75: what Metal's GEMMs, which also run
               on a GPU's FP32 ALUs, reach (its pp_eff_q, fitted 0.74).
  sycl_plain   SYCL: ggml-sycl rewrites a weight it has a "reordered" mat-vec kernel for (SYCL_REORDER) at its
               first use, the block scales apart from the quants, so the kernel's loads coalesce; a type without
               one streams its interleaved blocks as stored and reaches this share of the bandwidth the reordered
               kernels reach. The pull requests that added a reordered kernel time it against the plain one on the
               same card: Q8_0 on an Arc Pro B70 4.88 -> 15.24 t/s (21% -> 66% of its bandwidth, #21527), IQ3_XXS
               on a B60 7.67 -> 14.94 (#29107), Q2_K 1.54-1.90x (#26336): prior 0.45.
  vendor_bw/vendor_pp/vendor_dq
               a vendor's driver stack on a backend it does not own: llama.cpp's Vulkan shaders on Intel GPUs
               (Mesa 24's ANV ran them 2-3x below Intel's Windows driver, PR #14001; a B70 decodes at half
               its SYCL speed on the same machine) reach this share of the bandwidth and prefill rate, and their
               dequantizing mat-vec shaders do this many times the work per weight (Q4_0 holds up, K-quants,
               Q8_0 and the lattices fall behind). "intel" is Linux's Mesa ANV (Mesa 25 on), what the app
               assumes; "intel_windows" Intel's own Windows driver, fitted on the runs that name it (the same
               cards, the same build, PR #14001); "intel_mesa24" Mesa 24's ANV, which that PR timed 2.5-3.1x below
               the Windows driver (prior 1/2.8 of it), fitted on the runs that name Mesa 24 so that they do not
               drag today's Mesa down (a B70 on a 2026 Mesa decodes Q4_0 at 55% of its bandwidth). AMD's and
               Intel's Vulkan drivers offer llama.cpp only KHR cooperative matrices (smaller tiles) where NVIDIA's
               offer NV_cooperative_matrix2, so their prompt processing reaches a smaller share of the matrix rate.
  vendor_legacy on Intel GPUs ggml-vulkan keeps Q4_0 and Q5_1 on the float mat-vec shader, which dequantizes its
               simple blocks as it reads them, two rows a workgroup (VULKAN_FLOAT_LEGACY), while the K-quants, Q8_0
               and MXFP4 go through the q8_1 integer-dot shader (MMVQ) since late 2025 and the lattices through
               their table-lookup shaders. That shader streams this many times the bandwidth share (vendor_bw) of
               the vendor's others: the code keeps it for Q4_0 because it measured faster ("from tests on A770
               Linux"), and an Arc Pro B70 on a 2026 Mesa streams Q4_0 at 55% of its bandwidth where its Q4_K and
               Q5_K reach 32-34% (prior 1.5).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from pkgutil import get_data

from .ggml import GGML_TYPES

BACKENDS = ("cuda", "rocm", "vulkan", "metal", "sycl", "cpu")
GPU_BACKENDS = BACKENDS[:-1]

# ggml types by the work their dot products do per weight (see "dq" above)
TYPE_CLASS = {
    "F32": "f16", "F16": "f16", "BF16": "f16",
    "Q8_0": "q8",
    "Q4_0": "legacy", "Q4_1": "legacy", "IQ4_NL": "legacy", "MXFP4": "legacy", "NVFP4": "legacy",
    "Q1_0": "legacy", "Q2_0": "legacy",
    "Q5_0": "q5", "Q5_1": "q5",
    "Q2_K": "kquant", "Q3_K": "kquant", "Q4_K": "kquant", "Q5_K": "kquant", "Q6_K": "kquant", "IQ4_XS": "kquant",
    "IQ3_S": "iquant", "IQ3_XXS": "iquant", "IQ2_S": "iquant", "IQ2_XS": "iquant",
    "IQ2_XXS": "iquant", "IQ1_S": "iquant", "IQ1_M": "iquant", "TQ1_0": "iquant", "TQ2_0": "iquant",
}  # fmt: skip
# f16: converted and multiplied; q8: int8 blocks, multiplied as they are; legacy: 4-bit blocks (nibbles unpacked,
# a 16-entry table for IQ4_NL/MXFP4); q5: the fifth bit assembled from a separate mask; kquant: super-blocks with
# sub-block scales (IQ4_XS: 4-bit table lookups in the same layout); iquant: lattice codebooks of 2-3 bits; on a CPU
# also iq3 (the 3-bit lattices) and khigh (the K-quants whose high bits sit in a second array): CPU_CLASS below
CLASSES = ("f16", "q8", "legacy", "q5", "kquant", "iquant", "iq3", "khigh")


# The CPU backend repacks Q4_0 and IQ4_NL (Nov 2024) and Q4_K (x86 AVX2/AVX-512 March 2025, PR #12332; arm64
# late 2025) into interleaved blocks at load, multiplied by the same GEMV/GEMM kernels: Q4_K joins the 4-bit
# class (a plain Q4_K, in a build that does not repack it, stays a K-quant: _dq_seconds). Q4_1's plain vec_dot
# is Q4_0's with one more multiply-add per block (its min): the same class.
# The K-quants split by how their quants are stored. Q2_K and Q4_K keep each weight's bits in one array: the
# vec_dot masks and shifts them out (ggml_vec_dot_q4_K_q8_K: an and or a shift per 16 bytes). Q3_K, Q5_K and
# Q6_K keep the low bits in one array and the high bit(s) in another (hmask, qh): every 16 weights the kernel
# also masks, shifts and ORs the high bits in (three more NEON/AVX2 operations per vector; Q6_K and Q3_K also
# apply a scale per 16 weights), so they cost more per weight ("khigh"). The M2 Max runs of mainline (2024) show
# it: with one K-quant class, Q4_K_S decoded up to 27% faster than its estimate on 2-4 threads, while Q3_K_S,
# Q5_K_S and Q6_K ran 11-45% slower than theirs. So does this lab's Zen 4 core on one thread (2026 build, Llama
# 3.2 1B): Q6_K, Q3_K_M and Q5_K_M at 21-24 G weights/s, the Q2_K of its Q2_K mix at about 35.
# (Decode only: the prompt matmuls keep one K-quant class, _matmul_seconds.)
CPU_CLASS = {"Q4_K": "legacy", "IQ3_S": "iq3", "IQ3_XXS": "iq3", "Q3_K": "khigh", "Q5_K": "khigh", "Q6_K": "khigh"}
# On a CPU the 3-bit lattices (IQ3_S, IQ3_XXS: a 256/512-entry grid looked up per 4 weights, signs from a separate
# table) cost clearly more per weight than the 2-bit ones (IQ2_XXS/XS/S/M: 8 weights per lookup): both the Zen 4 and
# the M2 Max runs show it, 30-45 % apart at the same fit. They are a class of their own there ("iq3").


def type_class(ggml_type: str, backend: str = "") -> str:
    if backend == "cpu" and ggml_type in CPU_CLASS:
        return CPU_CLASS[ggml_type]
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
    smt_gain: float = 0.15  # CPU: what a core's second hardware thread adds, in cores
    soc_cpu_share: float = 1.0  # CPU of an SoC (Apple M, Ryzen AI Max): the share of the unified bandwidth it reaches
    dq_arm: dict = field(default_factory=dict)  # CPU: an Arm core's dq per class, relative to an x86 core's
    dq_row: float = 0.0  # CPU: FLOP-equivalents of one plain vec_dot call per matrix row (its set-up and reduction)
    pp_gemm_arm: float = -1.0  # CPU: pp_gemm on an Arm core (<0: the same as pp_gemm)
    apple_overlap: float = -1.0  # CPU: the overlap of an Apple M-series CPU's cores (<0: the same as overlap)
    dq_repack: float = 1.0  # CPU: a repacked type's GEMV work per weight, relative to the plain vec_dot of its class
    dq_emul: float = 1.0  # GPU without an int8 dot-product instruction (Kepler, Maxwell, GP100): dq times this
    layer_us: float = 20.0
    hbm_layer_us: float = 10.0  # GPU with HBM: extra per block (each kernel waits out the longer first-access latency)
    expert_us: float = 3.0  # decode: per routed expert (MoE), or per block where their sum is fused (expert_kernels)
    moe_layer_us: float = 0.0  # decode: per MoE block, its router, top-k, gather and weighting kernels
    step_us: float = 200.0
    overlap: float = 0.5
    dq: dict = field(
        default_factory=lambda: {"f16": 1.0, "q8": 1.5, "legacy": 2.0, "q5": 3.0, "kquant": 3.0, "iquant": 5.0}
    )  # FLOP-eq/weight
    pp_eff_q: float = 0.5
    pp_eff_c: float = 1e6  # the quantized matmul's dequantization, per FP32 FLOP/s; huge = free
    pp_eff_f: float = 0.5
    pp_sat_tflops: float = 1e6
    pp_layer_us: float = 50.0
    pp_expert_us: float = 20.0  # prefill: per expert touched in a block, per micro-batch (MoE)
    pp_moe_eff: float = 1.0  # prefill: the routed experts' matmuls run at this share of the dense rate
    pp_gemm: float = 1.0  # CPU prefill: a tiled GEMM's rate (repacked or tinyBLAS) over the plain vec_dot path's
    pp_dq: dict = field(
        default_factory=lambda: dict.fromkeys(CLASSES, 1.0)
    )  # per class: GPU, dequantization work relative to Q4_0's; CPU, cost of the matmul relative to pp_eff_q
    pcie_eff: float = 0.8
    # a vendor's driver stack on this backend, relative to the rest (Vulkan on Intel GPUs): the share of the
    # modelled decode bandwidth and of the prefill rate it reaches
    vendor_bw: dict = field(default_factory=dict)
    vendor_pp: dict = field(default_factory=dict)
    vendor_dq: dict = field(default_factory=dict)  # and the per-weight dequantization work of its mat-vec shaders
    pp_eff_v: float = 0.75  # SYCL, an FP32 build: the share of the FP32 ALUs' rate its SGEMMs reach
    sycl_plain: float = 1.0  # SYCL: the bandwidth share of a type without a reordered mat-vec kernel (SYCL_REORDER)
    # Vulkan, per vendor: the legacy quants' float mat-vec shader's bandwidth share over the vendor's other shaders'
    vendor_legacy: dict = field(default_factory=dict)
    nograph_layer_us: float = 0.0  # CUDA/ROCm: per block, kernels launched from the host (cuda_graphs, hip_graphs)
    sync_layer_us: float = 0.0  # Vulkan: per block, in builds with a barrier after every node (vulkan_node_sync)

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
# GPU dq: FLOP-equivalents at the FP32 rate per weight of a mat-vec: unpacking nibbles, a dp4a per 4 weights,
# a scale per block (Q4_0, Q8_0: a few); K-quants add sub-block scales and mins; the IQ types table lookups.
_GPU_DQ = {"f16": 1.0, "q8": 2.0, "legacy": 3.0, "q5": 4.0, "kquant": 4.5, "iquant": 7.0}
# GPU pp_dq: the tile dequantization of a quantized matmul relative to Q4_0's
_GPU_PP_DQ = {"f16": 1.0, "q8": 0.8, "legacy": 1.0, "q5": 1.2, "kquant": 1.4, "iquant": 2.0}
PRIORS = {
    # NVIDIA: mat-vec kernels with CUDA graphs reach ~90% of GDDR bandwidth on F16, less on quantized types,
    # and single-stream decode stalls near 1.2 TB/s (RTX 5090, H100); MMQ prompt processing near half the
    # int8 tensor rate on GeForce cards, bending into ~200 TFLOP/s on the biggest parts.
    "cuda": Params(eta_bw=0.9, eta_legacy=0.85, eta_q=0.8, eta_iq=0.75, bw_sat_gbs=2500.0, hbm_layer_us=10.0, layer_us=25.0, nograph_layer_us=20.0,
                   step_us=150.0, expert_us=1.0, moe_layer_us=20.0, overlap=0.5, dq=_GPU_DQ, dq_emul=4.0,
                   pp_eff_q=0.45, pp_eff_c=4.5, pp_eff_f=0.5, pp_sat_tflops=250.0, pp_layer_us=30.0,
                   pp_expert_us=5.0, pp_moe_eff=0.6, pp_dq=_GPU_PP_DQ),
    # AMD via HIP: the CUDA kernels ported (MFMA/WMMA or dp4a MMQ); HBM Instinct parts stall earlier. HIP builds
    # before April 2026 replay no graphs (GGML_HIP_GRAPHS was off by default, hip_graphs): the host launches every
    # kernel of every token (nograph_layer_us per block) and waits for its logits
    "rocm": Params(eta_bw=0.85, eta_legacy=0.8, eta_q=0.75, eta_iq=0.65, bw_sat_gbs=1500.0, hbm_layer_us=60.0,
                   layer_us=25.0, nograph_layer_us=40.0,
                   step_us=800.0, expert_us=1.0, moe_layer_us=20.0, overlap=0.5, dq=_GPU_DQ, dq_emul=4.0,
                   pp_eff_q=0.35, pp_eff_c=3.0, pp_eff_f=0.3, pp_sat_tflops=150.0, pp_layer_us=60.0,
                   pp_expert_us=5.0, pp_moe_eff=0.6, pp_dq=_GPU_PP_DQ),
    # Vulkan: portable shaders; quantized matmuls dequantize into FP16 tiles for cooperative matrices. Intel's
    # Vulkan drivers run them well below the other vendors' (Mesa ANV 2-3x below Intel's Windows driver, PR
    # #14001; a B70 decodes at half its SYCL speed on the same machine)
    "vulkan": Params(eta_bw=0.85, eta_legacy=0.8, eta_q=0.75, eta_iq=0.65, bw_sat_gbs=1200.0, layer_us=30.0, sync_layer_us=20.0,
                     step_us=200.0, expert_us=1.0, moe_layer_us=20.0, overlap=0.5, dq=_GPU_DQ,
                     pp_eff_q=0.3, pp_eff_c=3.0, pp_eff_f=0.3, pp_sat_tflops=150.0, pp_layer_us=40.0,
                     pp_expert_us=5.0, pp_moe_eff=0.6, pp_dq=_GPU_PP_DQ, vendor_bw={"intel": 0.6, "intel_windows": 1.0, "intel_mesa24": 0.35}, vendor_pp={"intel": 0.5, "amd": 0.7}, vendor_dq={"intel": 2.0, "intel_windows": 1.0}, vendor_legacy={"intel": 1.5},
                     dq_emul=4.0),
    # Apple: unified LPDDR5/5X; simdgroup-matrix GEMMs on the FP32 ALUs, which also dequantize the tiles. Metal has
    # no graph replay: every kernel of every block is encoded and dispatched each token (~100 us per block: an
    # M2 Ultra decodes a 7B Q8_0 and F16 at 674 GB/s apart, with 4 ms per token left over)
    "metal": Params(eta_bw=0.85, eta_legacy=0.8, eta_q=0.75, eta_iq=0.65, bw_sat_gbs=2000.0, layer_us=100.0,
                    step_us=200.0, expert_us=1.0, moe_layer_us=60.0, overlap=0.5, dq=_GPU_DQ,
                    pp_eff_q=0.8, pp_eff_c=8.0, pp_eff_f=0.75, pp_sat_tflops=60.0, pp_layer_us=30.0,
                    pp_expert_us=5.0, pp_moe_eff=0.6, pp_dq=_GPU_PP_DQ),
    # SYCL: Intel's oneAPI backend; a type without a reordered mat-vec kernel streams at sycl_plain of the rest
    "sycl": Params(eta_bw=0.75, eta_legacy=0.7, eta_q=0.65, eta_iq=0.55, bw_sat_gbs=1000.0, layer_us=40.0, sycl_plain=0.45,
                   step_us=300.0, expert_us=5.0, moe_layer_us=25.0, overlap=0.5, dq=_GPU_DQ,
                   pp_eff_q=0.2, pp_eff_c=3.0, pp_eff_f=0.2, pp_sat_tflops=60.0, pp_layer_us=50.0,
                   pp_expert_us=5.0, pp_moe_eff=0.6, pp_dq=_GPU_PP_DQ),
    # CPU: bandwidth grows with threads until the memory controller saturates; dequantization and the dot
    # products (FLOP-equivalents at the cores' FMA rate) bound decode on few cores. dq_row: a plain vec_dot call
    # costs ~90 cycles beyond its blocks (the call, the loop's set-up, the horizontal sum of its accumulators, a
    # chain of shuffles and adds) on a core that does 32 FLOP a cycle: ~3,000 FLOP-equivalents per row. dq.kquant and
    # dq.khigh: the cycles of their reference kernels on a Zen core (VEC_DOT_CYCLES, Q4_K 18.3 and Q5_K 29.4 per 256
    # weights) at its 32 FLOP a cycle. thread_bw_gbs: what one of this lab's Zen 4 cores reads alone (27.9 GB/s,
    # data/lab/machine.json memory_read_bandwidth)
    "cpu": Params(eta_bw=0.75, thread_bw_gbs=28.0, apple_overlap=0.5, pp_gemm_arm=2.5, smt_gain=0.15, soc_cpu_share=0.5, dq_emul=2.5, dq_row=3000.0,
                  dq_arm=dict.fromkeys(CLASSES, 1.0), layer_us=15.0, step_us=300.0, moe_layer_us=10.0, overlap=0.5,
                  dq={"f16": 2.0, "q8": 3.0, "legacy": 3.0, "q5": 5.0, "kquant": 2.3, "iquant": 8.0, "iq3": 10.0, "khigh": 3.7},
                  pp_eff_q=0.5, pp_eff_f=0.5, pp_gemm=1.8,
                  pp_layer_us=100.0, pp_expert_us=5.0, pp_moe_eff=0.7,
                  pp_dq={"f16": 1.0, "q8": 1.0, "legacy": 1.0, "q5": 1.5, "kquant": 1.4, "iquant": 3.0, "iq3": 3.5}),
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
        if backend in PRIORS:
            params[backend] = PRIORS[backend].with_values(
                {k: v for k, v in values.items() if k.split(".")[0] in _FIELD_NAMES}
            )
    return params, data.get("ranges", {}), data


_FIELD_NAMES = {f.name for f in fields(Params)}
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


def cpu_thread_share(device, n_threads, prm: Params) -> float:
    """The cores' worth of work n_threads threads do: one per physical core, smt_gain for a core's second
    hardware thread (it shares the core's FMA pipes and load ports), nothing past two per core."""
    cores = cpu_cores(device)
    t = _threads(device, n_threads)
    return min(t, cores) + prm.smt_gain * max(0, min(t, 2 * cores) - cores)


def _cpu_rate(device, n_threads, prm: Params | None = None) -> float:
    """FLOP/s of the threads in use (physical cores count once; SMT siblings add smt_gain)."""
    cores = cpu_cores(device)
    share = cpu_thread_share(device, n_threads, prm or PRIORS["cpu"])
    return device.fp16_tflops * 1e12 * share / cores


# --- GPU rates: the device's own figures, else its catalog row, else its architecture's ratios -------------
_VENDOR_WORDS = {"nvidia", "geforce", "amd", "radeon", "intel", "apple", "graphics", "gpu", "the", "card", "edition"}


def _name_key(name: str) -> frozenset:
    """A device name's words without vendor words and memory sizes: "NVIDIA GeForce RTX 3060 12GB" and
    "RTX 3060" give the same key."""
    words = re.sub(r"[^a-z0-9]+", " ", (name or "").lower()).split()
    return frozenset(w for w in words if w not in _VENDOR_WORDS and w != "gb" and not re.fullmatch(r"\d{1,2}|\d+gb", w))


@lru_cache(maxsize=1)
def _device_rows() -> tuple:
    """The rows of data/calibration/devices.csv (packaged with the wheel), read once; () without the file."""
    try:
        text = get_data("enginelab", "data/calibration_devices.csv").decode("utf-8")
    except (FileNotFoundError, OSError):
        return ()
    return tuple(csv.DictReader(io.StringIO(text)))


@lru_cache(maxsize=1)
def _catalog() -> dict:
    """{name key: (fp16, fp32, int8, vendor)} of data/calibration/devices.csv (whitepaper figures)."""
    out = {}
    for r in _device_rows():

        def num(k, r=r):
            try:
                v = float((r.get(k) or "").split()[0])
            except (ValueError, IndexError):
                return 0.0
            return v if math.isfinite(v) and v > 0 else 0.0

        if r.get("kind") in ("cpu", "apple"):
            continue
        out.setdefault(
            _name_key(r["device"]),
            (num("fp16_tflops"), num("fp32_tflops"), num("int8_tops"), r.get("backend_family", "")),
        )
    return out


def catalog_rates(device):
    """(fp16, fp32, int8, vendor) of the device's row in devices.csv (TFLOP/s), when its name and FP16 figure
    match."""
    row = _catalog().get(_name_key(getattr(device, "name", "")))
    tf = getattr(device, "spec_tflops", 0.0) or device.fp16_tflops
    if row is None or not row[0] or abs(tf / row[0] - 1) > 0.3:
        return None
    return row


def gpu_vendor(device) -> str:
    """nvidia, amd, intel or "" (unknown), from the catalog row or the name."""
    cat = catalog_rates(device)
    if cat and cat[3] in ("nvidia", "amd", "intel"):
        return cat[3]
    name = getattr(device, "name", "") or ""
    if re.search(r"nvidia|geforce|\b(rtx|gtx|gt)\b|tesla|quadro|titan|\b[ahlbtvpkm]\d{2,3}\b|dgx|gb10", name, re.I):
        return "nvidia"
    if re.search(r"\bamd\b|radeon|\brx\s?\d|instinct|\bmi\s?\d|\b\d{3,4}m\b|8060s|8050s", name, re.I):
        return "amd"
    if re.search(r"intel|\barc\b|iris|\bxe\b", name, re.I):
        return "intel"
    return ""


_GEFORCE = re.compile(r"geforce|titan|\b(rtx|gtx)\s?\d{3,4}\b|gb10|dgx\s*spark", re.I)  # GB10: GeForce-class cores
_NOT_GEFORCE = re.compile(r"quadro|\bada\b|\bpro\b|blackwell|\brtx\s?a\d|tesla|\bl40\b(?!s)", re.I)
_NO_TENSOR_NV = re.compile(r"\bgtx\b|tesla\s*[pmk]\d|\b[pmk]\d{2,3}\b|titan\s*x|quadro\s*[pmk]\d", re.I)
_DP4A_NV = re.compile(r"\bgtx\s*1[06]\d\d|\bp(4|6|40)\b|tesla\s*p(4|40)\b|titan\s*xp?\b|quadro\s*p", re.I)
_TURING = re.compile(r"\brtx\s?20\d\d|titan\s*rtx|quadro\s*rtx|\bt4\b", re.I)
_HBM_NV = re.compile(r"\b(a100|a800|a30|h100|h800|h200|h20|gh200|b100|b200|gb200)\b", re.I)
_VOLTA = re.compile(r"v100|titan\s*v\b", re.I)
_AMD_RDNA3 = re.compile(r"\b(rx|pro\s*w)\s?7\d{3}|\b7\d{3}\s?(xtx|xt|gre)|\b(780m|760m|890m|880m|8060s|8050s)\b", re.I)
_AMD_RDNA4 = re.compile(r"\brx\s?9\d{3}|r9700|\bai\s*pro\b", re.I)
_AMD_CDNA = re.compile(r"\bmi\s?(100|2\d\d|3\d\d)", re.I)
_AMD_VEGA = re.compile(r"\bmi\s?(50|60|25)\b|radeon\s*vii|vega", re.I)
_AMD_POLARIS = re.compile(r"\brx\s?(4|5)[6-9]0\b", re.I)
# no int8 dot-product instruction: Kepler, Maxwell, GP100 (NVIDIA dp4a needs sm_61); Polaris, Vega 10, RDNA1
_NO_DP4A = re.compile(
    r"\bk\d{2}\b|tesla\s*[km]\d|\bm\d{2}\b|gtx\s*(9\d\d|7\d\d)|titan\s*x\b(?!p)|p100|gp100|"
    r"\brx\s?(4|5)[6-9]0\b|vega\s*(56|64)|\bmi25\b|\brx\s?5[5-7]\d\d",
    re.I,
)
# HBM parts (stacked memory: more latency, more bytes in flight needed to fill it at batch 1)
_HBM = re.compile(
    r"\bmi\s?\d{2,3}[a-z]?\b|instinct|v100|p100|a100|a800|\ba30\b|h100|h800|h200|\bh20\b|gh200|b100|b200|gb200|"
    r"radeon\s*vii|vega\s*(56|64)|titan\s*v\b",
    re.I,
)
_INTEL = re.compile(r"\barc\b|\bb[56]0\b|\bb70\b|\ba[357]\d0\b", re.I)


def _rule_rates(device, backend: str) -> tuple:
    """(fp32, int8, f16_acc_factor) from the architecture's ratios to the datasheet FP16 figure (tf): the
    non-tensor FP32 rate, the int8 rate of the units a quantized matmul multiplies on (0: none), and how much
    faster than tf the FP16 matrix units run at the accumulation llama.cpp uses."""
    name = getattr(device, "name", "") or ""
    tf = getattr(device, "spec_tflops", 0.0) or device.fp16_tflops
    if backend in ("metal", "cpu"):
        return tf, 0.0, 1.0
    if _AMD_CDNA.search(name):  # MFMA: int8 at the FP16 matrix rate (MI300: twice), FP32 vector 1/8
        return tf / 8, (2 * tf if re.search(r"mi\s?3", name, re.I) else tf), 1.0
    if _AMD_VEGA.search(name):  # packed FP16 = 2x FP32; v_dot4 int8 = 4x FP32
        return tf / 2, 2 * tf, 1.0
    if _AMD_POLARIS.search(name):  # no packed FP16, no int8 dot: all at the FP32 rate
        return tf, 0.0, 1.0
    if _AMD_RDNA4.search(name):  # WMMA: FP16 4x the (dual-issue) FP32 figure, int8 twice FP16
        return tf / 4, 2 * tf, 1.0
    if _AMD_RDNA3.search(name):  # WMMA at the packed FP16 rate, int8 the same; FP32 figure counts dual issue
        return tf / 2, tf, 1.0
    if re.search(r"\brx\s?[56]\d{3}|v620|w6\d00", name, re.I):  # RDNA1/2: packed FP16, dot4 int8 = 2x FP16
        return tf / 2, 2 * tf, 1.0
    if _INTEL.search(name):  # XMX: FP16 8x the FP32 vector rate, int8 twice FP16
        return tf / 8, 2 * tf, 1.0
    if _VOLTA.search(name):  # FP16 tensor cores only (no int8): 8x FP32
        return tf / 8, 0.0, 1.0
    if re.search(r"p100|gp100", name, re.I):  # GP100: packed FP16 at twice FP32, no dp4a
        return tf / 2, 0.0, 1.0
    if _NO_TENSOR_NV.search(name) and not _TURING.search(name):  # Pascal and older: tf is the FP32 rate
        return tf, (4 * tf if _DP4A_NV.search(name) else 0.0), 1.0
    if re.search(r"\bl40\b(?!s)", name, re.I):  # L40: AD102 with the FP32 ALUs of a GeForce
        return tf / 2, 2 * tf, 1.0
    if _HBM_NV.search(name):  # A100/H100 class: FP32 1/16 of the tensor figure, int8 twice
        return tf / 16, 2 * tf, 1.0
    geforce = bool(_GEFORCE.search(name)) and not _NOT_GEFORCE.search(name)
    if _TURING.search(name):  # Turing: FP32 1/4 (GeForce, half-rate FP32 accumulate) or 1/8 of tf
        return (tf / 4, 4 * tf, 2.0) if geforce else (tf / 8, 2 * tf, 1.0)
    if geforce:  # Ampere/Ada/Blackwell GeForce: FP32 half the FP32-accumulate tensor figure, int8 4x
        return tf / 2, 4 * tf, 2.0
    if backend in ("cuda", "vulkan") and re.search(r"\brtx\b|\bl4\b|\bl40|\ba\d{1,2}\b|dgx|gb10", name, re.I):
        return tf / 4, 2 * tf, 1.0  # workstation / inference parts: full-rate FP32 accumulate
    return tf / 2, 2 * tf, 1.0  # unknown: a consumer-like ratio


@lru_cache(maxsize=4096)
def rates(device, backend: str) -> dict:
    """A device's rates for the measured profile (FLOP/s and bytes/s):
    bw, fp32 (vector ALUs), f16 (FP16 matrix rate at llama.cpp's accumulation), int8 (the integer units a
    quantized matmul multiplies on; 0 where there are none), and where the figures came from."""
    tf = (getattr(device, "spec_tflops", 0.0) or device.fp16_tflops) * 1e12
    out = {"bw": device.bandwidth_gbs * 1e9, "tf": tf}
    if backend in ("metal", "cpu"):
        vendor = "apple" if backend == "metal" else ""
        out.update(fp32=tf, f16=tf, int8=0.0, dp4a=True, hbm=False, vendor=vendor, basis="device")
        return out
    fp32_r, int8_r, acc = _rule_rates(device, backend)
    cat = catalog_rates(device)
    fp32 = getattr(device, "fp32_tflops", 0.0) or 0.0
    basis = "device" if fp32 else ("catalog" if cat and cat[1] else "rule")
    if not fp32:
        fp32 = cat[1] if cat and cat[1] else fp32_r
    int8 = cat[2] if cat and cat[2] else int8_r
    name = getattr(device, "name", "") or ""
    out.update(
        fp32=fp32 * 1e12,
        f16=tf * acc,
        int8=int8 * 1e12,
        dp4a=not _NO_DP4A.search(name),
        hbm=bool(_HBM.search(name)),
        vendor=gpu_vendor(device),
        basis=basis,
    )
    return out


def tensor_tflops(device, backend: str) -> float:
    """The FP16 matrix rate llama.cpp's F16 GEMMs run at, TFLOP/s: the datasheet's FP32-accumulate figure, twice
    that on GeForce cards (llama.cpp accumulates in FP16; GeForce runs FP32 accumulation at half rate)."""
    return rates(device, backend)["f16"] / 1e12


def vector_tflops(device, backend: str) -> float:
    """A GPU's non-tensor FP32 rate, TFLOP/s: the Device's fp32_tflops, else its catalog row, else its
    architecture's ratio to the FP16 figure (RTX 3090: 71 and 35.6; A100: 312 and 19.5)."""
    return rates(device, backend)["fp32"] / 1e12


_SOC_CPU = re.compile(r"\(cpu\)|\bapple\b|\bm[1-9]\b.*\bcpu\b|ryzen ai max|strix halo|snapdragon x", re.I)


def is_soc_cpu(device) -> bool:
    """The CPU cores of an SoC whose Device bandwidth is the unified memory's (shared with its GPU)."""
    return bool(_SOC_CPU.search(getattr(device, "name", "") or ""))


# A read-bandwidth test reaches about this share of a platform's bandwidth (what eta_bw is fitted to on machines
# whose datasheet figure is known: 0.81 for the CPUs in data/calibration): a CPU whose read bandwidth was measured
# (this lab's guest, an SoC's CPU cores) stands in its measurement over this for a datasheet figure.
READ_TEST_SHARE = 0.8


def cpu_read_gbs(device) -> float:
    """The read bandwidth a source measured an SoC's CPU cores to reach (devices.csv cpu_read_gbs), GB/s; 0 unknown."""
    text = _cpu_column("cpu_read_gbs").get(_name_key(getattr(device, "name", "") or ""))
    if not text:
        return 0.0
    try:
        v = float(text)
    except ValueError:
        return 0.0
    return v if math.isfinite(v) and v > 0 else 0.0


def cpu_bandwidth(device, prm: Params) -> float:
    """The bandwidth a CPU's cores can pull at most, GB/s, before eta_bw: an SoC's CPU cores' measured read
    bandwidth over READ_TEST_SHARE where a source gives one, else their share of the SoC's, else the platform's."""
    read = cpu_read_gbs(device)
    if read:
        return read / READ_TEST_SHARE
    return device.bandwidth_gbs * (prm.soc_cpu_share if is_soc_cpu(device) else 1.0)


def _bw_eff(device, backend: str, prm: Params, n_threads) -> float:
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
# controller nears saturation). 4 follows the F16 decode of a Ryzen 9 7950X (35, 58, 67 GB/s on 1, 2, 4
# threads: 2 x 35 is not reached, nor 2 x 27.9 GB/s in this lab's read test, which gives 33.8 on two cores);
# 3, 4 and 6 move the held-out CPU decode median by under a point (data/calibration/README.md).
CPU_BW_KNEE = 4.0


def soft_min(x: float, cap: float, p: float = SATURATION_SHARPNESS) -> float:
    """x below the ceiling `cap`, bending smoothly into it: (x^-p + cap^-p)^(-1/p)."""
    return (x**-p + cap**-p) ** (-1.0 / p)


def _vector_rate(device, backend: str, prm: Params, n_threads) -> float:
    return _cpu_rate(device, n_threads, prm) if backend == "cpu" else rates(device, backend)["fp32"]


_ARM_CPU = re.compile(
    r"\bapple\b|\bm[1-9]\b|cortex|\barm\b|aarch64|qualcomm|snapdragon|\bcix\b|raspberry|graviton|neoverse|"
    r"ampere|rk35\d\d|bcm27\d\d|dimensity|tegra|grace",
    re.I,
)


def is_apple_cpu(device) -> bool:
    """An Apple M-series CPU ("Apple M2 Max (CPU)" in data/calibration/devices.csv, "M4 Max CPU" in the app)."""
    return bool(re.match(r"(apple )?m[1-9]\b", getattr(device, "name", "") or "", re.I))


def pp_gemm_for(device, prm: Params) -> float:
    """How many times faster ggml-cpu's tiled GEMMs run a type's prompt matmuls than its plain path, on this CPU."""
    return prm.pp_gemm_arm if prm.pp_gemm_arm >= 0 and is_arm_cpu(device) else prm.pp_gemm


def overlap_for(device, backend: str, prm: Params) -> float:
    """The share of the smaller of a decode pass's memory and compute times that hides under the other."""
    if backend == "cpu" and prm.apple_overlap >= 0 and is_apple_cpu(device):
        return prm.apple_overlap
    return prm.overlap


def is_arm_cpu(device) -> bool:
    """An Arm CPU (NEON / SVE kernels of ggml-cpu), from its name; otherwise x86 (AVX2 / AVX-512)."""
    return bool(_ARM_CPU.search(getattr(device, "name", "") or ""))


# x86 cores without an int8 dot-product instruction (VNNI, AVX-512 or AVX-VNNI): Intel before Ice Lake / Tiger Lake
# client and Cascade Lake server, AMD before Zen 4; Arm cores before the dot-product extension (Cortex-A72/A53)
_NO_INT8_DOT_CPU = re.compile(
    r"\bi[3579]-[2-9]\d{3}|\bi[3579]-10\d{3}|haswell|broadwell|skylake|kaby|coffee|comet|"
    r"ryzen [3579] [1-5]\d{3}|ryzen [3579] pro [1-5]\d{3}|threadripper( pro)? [1-5]\d{3}|epyc 7\d{2}[1-3]\b|"
    r"xeon e[35]-|cortex-a(72|73|53)\b|raspberry pi 4|bcm2711",
    re.I,
)


def cpu_has_int8_dot(device) -> bool:
    """A CPU with an int8 dot-product instruction (VNNI / Arm sdot): its devices.csv int8_isa, else from its name;
    unknown CPUs count as modern."""
    return cpu_int8_isa(device) != "none"


INT8_ISAS = ("none", "dotprod", "i8mm", "avx_vnni", "avx512_vnni", "amx")
# Arm cores with the int8 matrix-multiply extension (FEAT_I8MM, mandatory from Armv8.6-A): Apple M2 and later,
# Neoverse V1/V2/N2/V3 (Graviton 3/4, Grace), Cortex-A710/X2 and later, Qualcomm Oryon (Snapdragon X), Cix P1
_I8MM_CPU = re.compile(
    r"apple\s*m[2-9]|m[2-9]\s*(pro|max|ultra)?\s*\(cpu\)|graviton\s*[34]|neoverse[- ]?(v[1-3]|n2|n3)|grace|"
    r"cortex-a7[1-2]\d|cortex-x[2-9]|oryon|snapdragon x|\bcix\b|cp8180|dimensity 9[2-4]00",
    re.I,
)


def cpu_int8_isa(device) -> str:
    """The int8 dot/matmul instructions of a CPU (INT8_ISAS): its devices.csv row's int8_isa (datasheets and the
    Arm architecture versions, each with its source), else from its name: none for the x86 and Arm cores listed in
    _NO_INT8_DOT_CPU, i8mm for the Arm cores of _I8MM_CPU, dotprod for other Arm cores, avx512_vnni for other x86."""
    name = getattr(device, "name", "") or ""
    isa = _cpu_column("int8_isa").get(_name_key(name))
    if isa in INT8_ISAS:
        return isa
    if _NO_INT8_DOT_CPU.search(name):
        return "none"
    if is_arm_cpu(device):
        return "i8mm" if _I8MM_CPU.search(name) else "dotprod"
    return "avx512_vnni"


@lru_cache(maxsize=8)
def _cpu_column(column: str) -> dict:
    """{name key: value} of one column of the CPU rows of data/calibration/devices.csv, where it is filled."""
    return {
        _name_key(r["device"]): (r.get(column) or "").strip()
        for r in _device_rows()
        if r.get("kind") == "cpu" and (r.get(column) or "").strip()
    }


# ggml-cpu repacks some types at load into interleaved blocks of 4 or 8 rows (the CPU_REPACK buffer, on by default)
# and multiplies them with GEMM kernels that reuse each activation load across those rows: prompt processing runs
# 1.5-3.5x faster than the plain vec_dot path of the same type (PR tables below). Which types, on which ISA, from
# which build (ggml/src/ggml-cpu/repack.cpp, ggml_repack_get_optimal_repack_type; dates: the month after the PR was
# opened, when its build reached users): (type, "x86" | "arm_dot" | "arm_i8mm"): first build month
#   x86 (AVX2 or better): Q4_0 8x8 and IQ4_NL 8x8 (runtime repack, Nov 2024); Q4_K 8x8 (PR #12332, Mar 2025).
#   Arm with dotprod: Q4_0 4x4 (Nov 2024), IQ4_NL 4x4 (PR #10541), Q4_K 8x4 (#17494), Q8_0 4x4 (#18096), Q5_K
#   (#19356) and Q6_K 8x4 (#19360); with i8mm also Q4_0 4x8, Q4_K 8x8 (#16739), Q8_0 4x8 (#18096), Q5_K (#18860),
#   Q6_K (#18888). The Q2_K 8x8 kernel (x86 AVX-512) is left out: its date is not established here.
# On the same Apple M4 Max the i8mm and dotprod builds of the repacked Q4_K GEMM run a llama 8B pp256 at 98.4 and
# 96.1 t/s (#16739, #17494), of Q6_K a qwen3 8B pp512 at 95.0 and 94.8 (#18888, #19360): the gain is the
# repacked GEMM's, not the wider int8 instruction's, so i8mm counts as dotprod here.
CPU_REPACK = {
    ("Q4_0", "x86"): "2024-11", ("IQ4_NL", "x86"): "2024-11", ("Q4_K", "x86"): "2025-04",
    ("Q4_0", "arm_dot"): "2024-11", ("IQ4_NL", "arm_dot"): "2024-12", ("Q4_K", "arm_dot"): "2025-12",
    ("Q8_0", "arm_dot"): "2026-01", ("Q5_K", "arm_dot"): "2026-03", ("Q6_K", "arm_dot"): "2026-03",
    ("Q4_K", "arm_i8mm"): "2025-11", ("Q5_K", "arm_i8mm"): "2026-02", ("Q6_K", "arm_i8mm"): "2026-02",
}  # fmt: skip


# llamafile's tinyBLAS (ggml-cpu/llamafile/sgemm.cpp) is the other tiled GEMM of ggml-cpu: it takes a quantized
# matmul of these types when no repacked buffer holds the weights: x86 (AVX/AVX2/AVX-512) Q8_0 and Q4_0 (PR #6891,
# May 2024), IQ4_NL (#9422, Sep 2024), Q5_0 (#10010, Oct 2024); Arm with dotprod Q8_0 and Q4_0 (#6414, Apr 2024).
# (a Ryzen 9 7950X ran Llama 3 8B Q5_0 pp512 at 53.5 t/s in July 2024, at 111.7 in December)
CPU_TINYBLAS = {
    ("Q8_0", "x86"): "2024-05", ("Q4_0", "x86"): "2024-05", ("IQ4_NL", "x86"): "2024-10", ("Q5_0", "x86"): "2024-11",
    ("Q8_0", "arm_dot"): "2024-05", ("Q4_0", "arm_dot"): "2024-05",
}  # fmt: skip


def cpu_tiled(ggml_type: str, device, build: str = "") -> bool:
    """Whether ggml-cpu multiplies this type with a tiled GEMM (a repacked one, or llamafile's tinyBLAS) on this
    CPU in a build of this month (YYYY-MM; "" = today's), rather than one or two dot products at a time."""
    return cpu_repacked(ggml_type, device, build) or _since(CPU_TINYBLAS, ggml_type, device, build)


def cpu_repacked(ggml_type: str, device, build: str = "") -> bool:
    """Whether ggml-cpu multiplies this type with a repacked GEMM on this CPU in a build of this month (YYYY-MM;
    "" = today's). The month may be followed by overrides of what that build repacks: "2026-01 +Q6_K" (a pull
    request's branch, before its merge reached a release), "2025-10 -Q4_K" (a build without that repack)."""
    if " " in build:
        month, *marks = build.split()
        if "+" + ggml_type in marks:
            return True
        if "-" + ggml_type in marks:
            return False
        build = month
    return _since(CPU_REPACK, ggml_type, device, build)


def _since(table: dict, ggml_type: str, device, build: str) -> bool:
    kernels = "repack" if table is CPU_REPACK else "tinyblas"
    return _since_named(kernels, ggml_type, getattr(device, "name", "") or "", build[:7])


@lru_cache(maxsize=4096)
def _since_named(kernels: str, ggml_type: str, name: str, month: str) -> bool:
    """_since on what it reads (a CPU's name decides its ISA), cached: decode asks it per type every estimate."""
    table = CPU_REPACK if kernels == "repack" else CPU_TINYBLAS
    device = _Named(name)
    isa = cpu_int8_isa(device)
    if is_arm_cpu(device):
        if isa == "none":
            return False
        keys = ("arm_dot", "arm_i8mm") if isa == "i8mm" else ("arm_dot",)
    else:
        keys = ("x86",)
    since = [table[(ggml_type, k)] for k in keys if (ggml_type, k) in table]
    return bool(since) and (not month or min(since) <= month)


@dataclass(frozen=True)
class _Named:  # a Device as the ISA look-ups read it: by name
    name: str


# ggml-cpu's F16 dot product on an Arm core with FP16 vector arithmetic (Armv8.2-A FEAT_FP16: every Arm core here
# with the dot-product extension has it; the Cortex-A72/A57 have neither) multiplies and accumulates in FP16,
# eight lanes a 128-bit FMA (vfmaq_f16, GGML_F16_EPR 8), where x86 converts each half to FP32 first (vcvtph2ps) and
# runs the FMA on FP32 lanes: half the FLOP-equivalents of x86's per weight.
ARM_F16_ARITH = 0.5


# The K-quants' plain vec_dot kernels differ per type, and not alike on every core: what a type costs relative to its
# class's reference type (VEC_DOT_REF) follows each ISA's kernel in ggml-cpu and each core's ports. The throughput
# of one main-loop iteration (256 weights, one super-block) of ggml_vec_dot_<type>_q8_K, in cycles, as llvm-mca
# (LLVM 14) gives it for gcc 12 -O3 output of ggml-cpu-quants.c (ggml-org/llama.cpp, February 2025; the loops are
# fully unrolled, one basic block each): the AVX2 path (-march=x86-64-v3) on the znver3 model for AMD cores (Zen 4
# issues these 256-bit operations as Zen 3 does) and on the skylake model for Intel's; the NEON path
# (-march=armv8.2-a+dotprod) on the apple-m1 model for Apple's cores and on neoverse-n1 (= cortex-a76) for other Arm
# cores. NEON's Q2_K costs 1.4-1.6x its Q4_K where AVX2's costs 0.8-1.1x; AVX2's IQ4_XS 1.5-1.8x its Q4_K, NEON's
# on an Apple core about the same. These are constants of the kernels, not fitted: the fit keeps one dq per class.
VEC_DOT_CYCLES = {
    "amd": {"Q2_K": 20.1, "Q3_K": 31.1, "Q4_K": 18.3, "Q5_K": 29.4, "Q6_K": 35.1, "IQ4_XS": 32.8},
    "intel": {"Q2_K": 22.2, "Q3_K": 40.2, "Q4_K": 29.1, "Q5_K": 36.9, "Q6_K": 36.2, "IQ4_XS": 43.6},
    "apple": {"Q2_K": 51.2, "Q3_K": 71.2, "Q4_K": 31.7, "Q5_K": 52.7, "Q6_K": 63.2, "IQ4_XS": 32.7},
    "arm": {"Q2_K": 80.2, "Q3_K": 97.2, "Q4_K": 58.2, "Q5_K": 83.2, "Q6_K": 105.2, "IQ4_XS": 77.2},
}
VEC_DOT_REF = {"kquant": "Q4_K", "khigh": "Q5_K"}
_INTEL_CPU = re.compile(
    r"\bintel\b|\bcore\s+(i[3579]|ultra|m[3-7])\b|xeon|celeron|pentium|\bn[1-3]\d{2}\b|\bi[3579]-\d", re.I
)


def cpu_core_family(device) -> str:
    """Which VEC_DOT_CYCLES table a CPU's cores follow, from its name: apple, arm, intel or amd (any other x86)."""
    return _core_family_named(getattr(device, "name", "") or "")


@lru_cache(maxsize=1024)
def _core_family_named(name: str) -> str:  # cached: decode asks it per type every estimate
    device = _Named(name)
    if is_arm_cpu(device):
        return "apple" if is_apple_cpu(device) else "arm"
    return "intel" if _INTEL_CPU.search(name) else "amd"


def _vec_dot_share(ggml_type: str, cls: str, device) -> float:
    """A plain (not repacked) type's vec_dot cost relative to its class's reference type on this CPU's cores."""
    ref = VEC_DOT_REF.get(cls)
    table = VEC_DOT_CYCLES[cpu_core_family(device)]
    if not ref or ggml_type not in table:
        return 1.0
    return table[ggml_type] / table[ref]


def _dq_seconds(work, device, backend: str, prm: Params, n_threads, batch: int = 1, build: str = "") -> float:
    """Dequantization and dot-product work of the weights streamed, at the device's vector rate.

    CPU: ggml-cpu multiplies a plain (not repacked) type one row at a time, a vec_dot call per row and token
    that sets up its loop and reduces its vector accumulators to one float whatever the row's length: dq_row
    FLOP-equivalents per row. A repacked type's GEMV (cpu_repacked, for this build) shares that over its 4-8
    interleaved rows; it is left out. Short rows weigh most: at the fitted values it is ~45% of a Q8_0 Qwen2.5-0.5B's
    dot-product work (896-wide rows) and ~25% of a Llama 3.2 1B's (2048)."""
    emul = 1.0
    arm = prm.dq_arm if backend == "cpu" and prm.dq_arm and is_arm_cpu(device) else {}
    if backend == "cpu" and not cpu_has_int8_dot(device):
        emul = prm.dq_emul  # int8 products from multiply-add pairs (vpmaddubsw + vpmaddwd) instead of one VNNI op
    if prm.vendor_dq and backend != "cpu":
        emul = prm.vendor_dq.get(rates(device, backend)["vendor"], 1.0)
    if backend != "cpu" and not rates(device, backend)["dp4a"]:
        emul *= prm.dq_emul  # ggml emulates __dp4a with byte extracts and multiply-adds
    n = 0.0
    for t, w in work.weights_by_type:
        c = type_class(t, backend)
        kernel = 1.0  # the kernel ggml-cpu runs for this type, relative to its class's plain vec_dot
        if backend == "cpu":
            packed = cpu_repacked(t, device, build)
            if t == "Q4_K" and not packed:
                c = "kquant"  # the plain K-quant vec_dot; repacked, its GEMV costs what Q4_0's does (CPU_CLASS)
            kernel = prm.dq_repack if packed else _vec_dot_share(t, c, device)
        if t == "F16" and arm and cpu_has_int8_dot(device):
            kernel = ARM_F16_ARITH  # FP16 vector arithmetic: twice the lanes an FMA, no conversion
        n += w * prm.dq.get(c, 1.0) * arm.get(c, 1.0) * kernel * (emul if c != "f16" else 1.0)
    if backend == "cpu" and prm.dq_row:
        n += prm.dq_row * sum(r for t, r in work.rows_by_type if not cpu_repacked(t, device, build))
    return n * batch / _vector_rate(device, backend, prm, n_threads)


# ---------------------------------------------------------------------------------------------------------
# Decode
# ---------------------------------------------------------------------------------------------------------
# ggml-sycl's reordered mat-vec kernels (ggml-sycl.cpp: ggml_sycl_supports_reorder_mmvq/_dmmv, opt_for_reorder): a
# weight of these types is rewritten at its first batch-1 use, its quants in one array and its block scales in
# another, so that a work-item's loads coalesce (sycl_plain). The day each kernel landed on master (ggml-org/ggml's
# sync commits keep the llama.cpp author dates): Q4_0 DMMV #12035 (MMVQ #12858 2025-05-09), Q4_K #13109, Q6_K
# #13885, Q8_0 #21527, Q5_K #22152, Q3_K #23725, Q1_0 #24721, Q2_K (DMMV) #25064. The routed experts' MUL_MAT_ID
# took reordered Q4_K/Q5_K/Q6_K with #24452. IQ types, MXFP4, Q4_1 and Q5_0/Q5_1 have none (ggml, 2026-08-21).
# The reorder ran only with GGML_SYCL_DISABLE_OPT=0 until #13973 turned it on by default and #14504 (2025-07-03)
# fixed that switch for Intel GPUs.
SYCL_REORDER = {
    "Q4_0": "2025-02-24", "Q4_K": "2025-05-15", "Q6_K": "2025-06-09", "Q8_0": "2026-04-07", "Q5_K": "2026-05-08",
    "Q3_K": "2026-06-01", "Q1_0": "2026-06-18", "Q2_K": "2026-07-12",
}  # fmt: skip
SYCL_REORDER_MOE = {"Q4_K": "2026-06-16", "Q5_K": "2026-06-16", "Q6_K": "2026-06-16"}
SYCL_REORDER_DEFAULT = "2025-07-03"


def _built_since(build: str, since: str) -> bool:
    """Whether a build of this day (the first word of `build`: YYYY-MM-DD, or YYYY-MM, which counts a change of that
    month; "" = today's) has a change that landed on the day `since`."""
    day = (build or "").split()[0] if (build or "").split() else ""
    n = min(len(day), 10)
    return day[:n] >= since[:n]


def sycl_reordered(ggml_type: str, build: str = "", expert: bool = False) -> bool:
    """Whether ggml-sycl multiplies this type (a routed expert's, if expert) at batch 1 with a reordered kernel in a
    build of this day (YYYY-MM-DD, or YYYY-MM: then a kernel of that month counts; "" = today's). The date may be
    followed by "+opt" (the run set GGML_SYCL_DISABLE_OPT=0 before the reorder was the default) or "-opt" (the
    reorder turned off), and by "+Q4_K" (a pull request's branch with that type's kernel, before its merge)."""
    day, *marks = (build or "").split() or [""]
    since = (SYCL_REORDER_MOE if expert else SYCL_REORDER).get(ggml_type)
    if since is None or "-opt" in marks:
        return False
    if not expert and "+" + ggml_type in marks:
        return True
    if "+opt" not in marks:
        since = max(since, SYCL_REORDER_DEFAULT)
    return _built_since(day, since)


def sycl_f16_build(build: str = "") -> bool:
    """Whether a SYCL build multiplies prompt matmuls in FP16 on the XMX matrix units (GGML_SYCL_F16=ON: weights
    converted to half, a oneDNN/oneMKL half GEMM; what llama.cpp's CI, its Docker image's FP16 option and the common
    toolboxes build) or, marked "-f16" in the build string, in FP32 on the vector ALUs (the CMake default and the FP32
    build llama.cpp's SYCL guide recommends: ggml_sycl_op_mul_mat_sycl converts to float and calls an SGEMM)."""
    return "-f16" not in (build or "").split()


def _sycl_plain_bytes(work, build: str = "") -> dict:
    """Bytes per type class (as _class_bytes counts them) of the quantized weights ggml-sycl multiplies without a
    reordered kernel in this build (F16/F32 weights have no blocks to reorder)."""
    experts = dict(work.expert_weights_by_type)
    out: dict = {}
    for (t, w), b in zip(work.weights_by_type, _type_bytes(work)):
        c = type_class(t)
        if c == "f16" or w <= 0:
            continue
        e = min(experts.get(t, 0.0), w)
        plain = (0.0 if sycl_reordered(t, build) else w - e) + (0.0 if sycl_reordered(t, build, True) else e)
        if plain > 0:
            out[c] = out.get(c, 0.0) + b * plain / w
    return out


# ggml-vulkan's batch-1 mat-vec on Intel GPUs (ggml_vk_should_use_mmvq; data/calibration/vulkan_intel_mmvq.md): Q4_0
# and Q5_1 always take the float shader that dequantizes as it reads (two rows per workgroup on Intel, rm_stdq), never
# the q8_1 integer-dot one (MMVQ): "from tests on A770 Linux" it is faster for them. The other legacy quants took it
# until MMVQ covered them (#14903, 2025-09-01); the K-quants, MXFP4 and the lattices never run on it.
VULKAN_FLOAT_LEGACY = {"Q4_0": "", "Q5_1": "", "Q4_1": "2025-09-01", "Q5_0": "2025-09-01", "Q8_0": "2025-09-01"}


def vulkan_float_legacy(ggml_type: str, build: str = "") -> bool:
    """Whether ggml-vulkan multiplies this type at batch 1 on an Intel GPU (Mesa's ANV) with the float legacy-quant
    mat-vec shader in a build of this day (YYYY-MM-DD or YYYY-MM; "" = today's)."""
    if ggml_type not in VULKAN_FLOAT_LEGACY:
        return False
    until = VULKAN_FLOAT_LEGACY[ggml_type]
    return not until or not _built_since(build, until)


def _vulkan_float_legacy_bytes(work, build: str = "") -> dict:
    """Bytes per type class (as _class_bytes counts them) of the weights vulkan_float_legacy holds for."""
    out: dict = {}
    for (t, _w), b in zip(work.weights_by_type, _type_bytes(work)):
        if vulkan_float_legacy(t, build):
            out[type_class(t)] = out.get(type_class(t), 0.0) + b
    return out


# ggml-cuda captures a token's graph once and replays it (CUDA graphs), but only on GPUs it enables them for
# (ggml_cuda_graph_set_enabled): compute capability 8.0 (Ampere) and newer until #25749 (2026-07-16, "Enable CUDA
# graphs on volta+turing"), 7.0 (Volta) and newer since. On the others the host launches every kernel of every token.
CUDA_GRAPHS_VOLTA = "2026-07-16"
_TURING_GTX = re.compile(r"\bgtx\s*16\d\d", re.I)  # Turing without tensor cores (compute capability 7.5)


def cuda_graphs(device, build: str = "") -> bool:
    """Whether ggml-cuda replays a decode step's graph on this GPU in a build of this day (YYYY-MM(-DD); "" =
    today's): Ampere and newer always, Volta and Turing from CUDA_GRAPHS_VOLTA, Pascal and older never."""
    name = getattr(device, "name", "") or ""
    if _VOLTA.search(name) or _TURING.search(name) or _TURING_GTX.search(name):
        return _built_since(build, CUDA_GRAPHS_VOLTA)
    return not _NO_TENSOR_NV.search(name)


HIP_GRAPHS = "2026-04-23"


def hip_graphs(build: str = "") -> bool:
    """Whether a ROCm build of this day (YYYY-MM(-DD); "" = today's) replays a decode step's graph: ggml-cuda's graph
    code compiles for HIP only with GGML_HIP_GRAPHS, which was off by default ("experimental, slow") until #22254
    (2026-04-23) turned it on."""
    return _built_since(build, HIP_GRAPHS)


VULKAN_NODE_SYNC = "2025-08-23"


def vulkan_node_sync(build: str = "") -> bool:
    """Whether a ggml-vulkan build of this day (YYYY-MM-DD or YYYY-MM; "" = today's) puts a full pipeline barrier
    after every node of the graph (before #15489, 2025-08-23)."""
    return not _built_since(build, VULKAN_NODE_SYNC)


# The day each backend began to sum an MoE block's routed experts in one kernel. llama.cpp's build_moe_ffn adds the
# k experts' outputs with a chain of k - 1 ggml_add nodes, their views ordered before the adds so that the adds sit
# side by side in the graph; a backend that fuses consecutive adds (up to 8 on CUDA and Metal, 9 on Vulkan) runs
# the chain as one kernel: Metal #14596, Vulkan #15252, CUDA #15631 (ROCm builds the same code). ggml-sycl does not
# fuse adds.
FUSED_EXPERT_ADDS = {"metal": "2025-07-18", "vulkan": "2025-08-16", "cuda": "2025-08-29", "rocm": "2025-08-29"}


def fused_expert_adds(backend: str, build: str = "") -> bool:
    """Whether a build of this day (YYYY-MM-DD or YYYY-MM; "" = today's) sums an MoE block's routed experts in one
    fused kernel on this backend (FUSED_EXPERT_ADDS) rather than with one add per expert."""
    since = FUSED_EXPERT_ADDS.get(backend)
    return since is not None and _built_since(build, since)


def expert_kernels(work, backend: str, build: str = "") -> float:
    """The small per-expert kernels of a pass's MoE blocks, each costing expert_us: one per routed expert
    multiplied (work.expert_calls: the k - 1 adds of the sum, and on ggml-sycl before #21920 the host's loop over
    the experts), or, where the backend fuses the sum (fused_expert_adds), one per MoE block."""
    return work.moe_layers if fused_expert_adds(backend, build) else work.expert_calls


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


def decode_seconds(
    work, device, backend: str, n_threads=None, batch: int = 1, params: dict | None = None, build: str = ""
) -> tuple:
    """(seconds, memory seconds, compute seconds, basis) of one decode pass's work on one device.

    build: the llama.cpp build's month (YYYY-MM) where it matters (which types a CPU holds repacked); "" = today's."""
    prm = params_for(backend, params)
    # mat-vec kernels reach eta of the (saturating) bandwidth, lower for types that dequantize as they read
    bw = _bw_eff(device, backend, prm, n_threads) / prm.eta_bw
    eta = {
        "kv": prm.eta_bw, "f16": prm.eta_bw, "q8": prm.eta_legacy, "legacy": prm.eta_legacy, "q5": prm.eta_legacy,
        "kquant": prm.eta_q, "iquant": prm.eta_iq,
    }  # fmt: skip
    if backend == "cpu":  # the cores' streaming share is the same for every type; dq carries the difference
        eta = dict.fromkeys(eta, prm.eta_bw)
    t_mem = sum(b / (eta[c] * bw) for c, b in _class_bytes(work).items())
    if backend == "sycl" and prm.sycl_plain != 1.0:  # the types without a reordered kernel stream slower
        t_mem += sum(b / (eta[c] * bw) for c, b in _sycl_plain_bytes(work, build).items()) * (1 / prm.sycl_plain - 1)
    if backend == "vulkan" and prm.vendor_legacy:  # a vendor whose float legacy-quant shader outruns its others
        f = prm.vendor_legacy.get(rates(device, backend)["vendor"], 1.0)
        if f != 1.0:
            t_mem += sum(b / (eta[c] * bw) for c, b in _vulkan_float_legacy_bytes(work, build).items()) * (1 / f - 1)
    bw_used = work.bytes / t_mem if t_mem else bw
    t_cmp = _dq_seconds(work, device, backend, prm, n_threads, batch, build)
    # MoE: a short kernel per routed expert (or one per block where the sum of the experts is fused), and the
    # router's kernels per block
    t_mem += expert_kernels(work, backend, build) * prm.expert_us * 1e-6 + work.moe_layers * prm.moe_layer_us * 1e-6
    if backend != "cpu" and rates(device, backend)["hbm"]:  # each block's kernels wait out HBM's latency
        t_mem += work.layers * prm.hbm_layer_us * 1e-6
    if (backend == "cuda" and not cuda_graphs(device, build)) or (backend == "rocm" and not hip_graphs(build)):
        t_mem += work.layers * prm.nograph_layer_us * 1e-6  # no graph replay: every kernel launched by the host
    if backend == "vulkan" and prm.sync_layer_us and vulkan_node_sync(build):
        t_mem += work.layers * prm.sync_layer_us * 1e-6
    # batched decode: the matmul FLOPs themselves (2 per weight per sequence) at the prefill rate
    if batch > 1:
        t_cmp = max(t_cmp, _matmul_seconds(work.flops, work, device, backend, prm, n_threads))
    t = t_mem + t_cmp - overlap_for(device, backend, prm) * min(t_mem, t_cmp)
    basis = {"backend": backend, "bw_eff_gbs": bw_used / 1e9, "eta_bw": prm.eta_bw}
    if backend == "cpu":
        basis.update(n_threads=_threads(device, n_threads), thread_bw_gbs=prm.thread_bw_gbs)
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
    """Per decode step: every block's launch/sync cost on its device's backend, plus the step cost of the
    backend that runs most of the graph (and a device switch where layers are split), plus, when the output head
    runs on a discrete GPU, the copy of the token's logits (logits_bytes: n_vocab F32 values) back to the host over
    its link (link_bytes_per_s: the machine's PCIe bandwidth). On a desktop's x16 link that is tens of
    microseconds; a GPU on one PCIe 2.0 lane (a Raspberry Pi 5's, HOST_LINKS) waits over a millisecond for a
    128k vocabulary's half a megabyte."""
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

# Hosts that hold a GPU on a narrower link than a desktop's x16 slot, as the published runs name them, and that
# link's one-way bandwidth in GB/s (raw rate after line coding). A Raspberry Pi 5 (and the Pi 500+ and Compute
# Module 5, the same BCM2712) has one external PCIe 2.0 lane: 5 GT/s with 8b/10b coding, 0.5 GB/s (Raspberry Pi 5
# product brief; PCIe 3.0 speed is an unsupported option, and no run here says it was set). The SiFive HiFive
# Premier P550 (ESWIN EIC7700X) has one PCIe 3.0 x4 slot: 8 GT/s x 4 lanes with 128b/130b coding, 3.94 GB/s.
HOST_LINKS = {"Raspberry Pi 5 (BCM2712)": 0.5, "SiFive HiFive Premier P550": 3.94}
_HOST_NAMES = (
    (re.compile(r"\b(raspberry\s+)?pi\s*(5|500\+?)\b|\bcm5\b|compute\s+module\s+5", re.I), "Raspberry Pi 5 (BCM2712)"),
    (re.compile(r"\bp550\b|hifive\s+premier", re.I), "SiFive HiFive Premier P550"),
)


def host_of(text: str) -> str:
    """The HOST_LINKS host a run's notes name ("host Raspberry Pi 500+", "host SiFive HiFive Premier P550"), or ""
    (a desktop or server: a PCIe x16 slot)."""
    m = re.search(r"\bhost\b[^;,)]*|\bpi\s*500\+?[^;,)]*", text or "", re.I)
    for pattern, name in _HOST_NAMES:
        if m and pattern.search(m.group(0)):
            return name
    return ""


# ---------------------------------------------------------------------------------------------------------
# Prefill
# ---------------------------------------------------------------------------------------------------------
def class_rates(device, backend: str, prm: Params, n_threads=None) -> dict:
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


def _matmul_seconds(flops: float, work, device, backend: str, prm: Params, n_threads, build: str = "") -> float:
    """Seconds for `flops` of matmuls over this work's weights (time adds up per ggml type class).

    CPU: each type at its class's rate, times pp_gemm where ggml-cpu runs it as a tiled GEMM (cpu_tiled; build:
    the run's month, "" = today's llama.cpp). Q4_K is a K-quant here (its repacked GEMM is pp_gemm's), and so are
    Q3_K, Q5_K and Q6_K: decode's split of the K-quants (CPU_CLASS) is left out of the prompt matmuls, where the
    published runs held out did not support it (from the priors 17.5% with it, 15.5% without)."""
    cr = class_rates(device, backend, prm, n_threads)
    if backend == "sycl" and not sycl_f16_build(build):  # an FP32 build: every matmul an SGEMM on the vector ALUs
        cr = dict.fromkeys(cr, prm.pp_eff_v * rates(device, backend)["fp32"])
    total = sum(w for _t, w in work.weights_by_type)
    if backend == "cpu":
        if total <= 0:
            return flops / cr["f16"]
        t = 0.0
        for typ, w in work.weights_by_type:
            c = type_class(typ, backend)
            if typ == "Q4_K" or c == "khigh":
                c = "kquant"  # one K-quant class for prompt matmuls: held out, the prefill runs did not carry two
            gain = pp_gemm_for(device, prm) if cpu_tiled(typ, device, build) else 1.0
            t += w / total / (cr[c] * gain)
        return flops * t
    if total <= 0:
        shares = {"f16": 1.0}
    else:
        shares = {}
        for t, w in work.weights_by_type:
            c = type_class(t, backend)
            shares[c] = shares.get(c, 0.0) + w / total
    sat = prm.pp_sat_tflops * 1e12
    return flops * sum(s / soft_min(cr[c], sat) for c, s in shares.items())


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
    build: str = "",
) -> tuple:
    """(compute seconds, memory seconds) of k micro-batches of u tokens, each doing `work` on one device.

    offloaded: the matmuls of CPU blocks run on this GPU (op offload): no per-block graph cost here.
    build: the llama.cpp build's month (YYYY-MM) where it matters (the CPU's repacked GEMMs); "" = today's."""
    prm = params_for(backend, params)
    scale = k if scale is None else scale
    t_c = _matmul_seconds(work.flops * scale, work, device, backend, prm, n_threads, build)
    xf = getattr(work, "expert_flops", 0.0)
    if xf and prm.pp_moe_eff != 1.0:  # MoE: tokens gathered per expert, short GEMMs in part-filled tiles
        t_c += (1.0 / prm.pp_moe_eff - 1.0) * _matmul_seconds(xf * scale, work, device, backend, prm, n_threads, build)
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
def typical_range(value: float, backend: str, kind: str, device=None) -> tuple:
    """(low, high): where most published runs fall around an estimate of `value`, from the leave-one-device-
    out residuals of this backend's fit (the 20th and 80th percentiles of measured / estimated). With the device,
    a GPU vendor whose runs on a shared backend spread apart from the others' (Intel on Vulkan) gets its own."""
    vendor = range_basis(backend, kind, device)
    lo, hi = RANGES.get(backend, {}).get(f"{kind}.{vendor}" if vendor else kind, TYPICAL[kind])
    return value * lo, value * hi


def range_basis(backend: str, kind: str, device=None) -> str:
    """Whose runs the typical range of typical_range comes from: "" for the backend's, else the vendor's."""
    if device is None or backend not in GPU_BACKENDS:
        return ""
    vendor = rates(device, backend)["vendor"]
    return vendor if f"{kind}.{vendor}" in RANGES.get(backend, {}) else ""


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
