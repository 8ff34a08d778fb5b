"""llama.cpp's kernels past one token per pass, as the measured profile times a batched decode step.

Up to a few tokens a GPU backend multiplies each weight matrix with a kernel that streams the weights once and
takes several columns (MMVQ_MAX_BATCH_SIZE = 8 in ggml-cuda/mmvq.cuh, ne11_mm_min = 8 in ggml-metal-ops.cpp,
mul_mat_vec_max_cols = 8 in ggml-vulkan.cpp, MMVQ_MAX_BATCH_SIZE in ggml-sycl): the weights are read once, but the
kernel unpacks and multiplies every weight again for each column, so each column after the first costs MV_COL
times one token's matmul over the streamed weights at the device's prefill rate for their types (column_seconds).
Above the limit it switches to mat-mat tiles (MMQ, GEMM): the matmul FLOPs at the prefill rate beside the weights'
streaming, which the tiles do (1 + MM_BW) x slower. On CUDA and ROCm the limit depends on
the weights' type, the GPU and the build (enginelab.measured.streaming_max_tokens: float weights went to cuBLAS
from 2 tokens before mul_mat_vec took several columns, mul_mat_f streams them up to 16 tokens where it runs, CDNA
moved quantized matmuls of 4 tokens and more to MMQ): a pass takes the limit of the type that holds most of its
weights. An MoE block past MUL_MAT_ID's mat-vec kernel (MMID_MV_MAX tokens) gathers each expert's tokens first
(ggml-cuda: a routing-to-expert-bounds kernel, the activations quantized per expert, the tiles' stream-k fixup) and
runs the experts on tiles, also while the rest of the pass still streams on mat-vec kernels; in ggml-cuda builds
before #15525 the host synced on the routing for each call (BATCH_PARAMS, from that pull request's table, not
fitted). A pass past one token can also lose the graph replay batch-1 decode has (graphs_lost, by build): the host
then launches every kernel, and an MoE block launches more of them than a dense one (graph_loss_seconds). vLLM's and
SGLang's GEMMs never take the mat-vec path, and multiply weight-only quantized matrices on the BF16 tensor cores
(W4A16: MXFP4 experts on Marlin or triton_kernels; AWQ / GPTQ on Marlin, as enginelab.serving reads a 4-bit
placement): every weight at the 16-bit class rate. (An 8-bit placement, read as FP8, gets that rate too: a floor on
Ada and Hopper, whose FP8 tensor cores run twice as fast.) MV_COL, MV_COL_GCN, MM_BW and ROUTE_EXP (how many
experts a batch's tokens read, perf_model.batched.step_work) are fitted on published llama-batched-bench runs and
llama-bench micro-batch rows (enginelab.serving.fit, data/serving/batched_bench.csv, data/calibration/pr_tables.csv).
"""

from __future__ import annotations

from enginelab import measured as _measured
from enginelab.ggml import GGML_TYPES

MMV_MAX_COLS = 8  # the most columns (tokens) a mat-vec kernel takes; every GPU backend agrees (quantized weights)
# MoE: the most tokens MUL_MAT_ID still runs on mat-vec kernels (ggml-cuda.cu's ggml_cuda_mul_mat_id: ne2 == 1 in
# builds before #18958; ggml-metal-ops.cpp keeps mul_mv_id below ne21_mm_id_min = 32)
MMID_MV_MAX = {"cuda": 1, "rocm": 1, "vulkan": 1, "sycl": 1, "metal": 32}
# ggml-cuda since #18958 (the change table's mmvq_mmid rows): MMVQ for MUL_MAT_ID up to get_mmvq_mmid_max_batch
# columns, 4 for most types and architectures (MMVQ_MMID_MAX_BATCH_SIZE 4 where it is one constant)
MMID_MMVQ_MAX = 4
# ggml-cuda keeps a step's graph for MUL_MAT_ID up to this many tokens (#19645, the change table's cuda_graphs_batch)
MMID_GRAPH_MAX = 4
# Each mat-vec column after the first: MV_COL x one token's matmul time over the streamed weights at the prefill rate
# (column_seconds). ggml-cuda's mul_mat_vec_q loops `for j < ncols_dst` around vec_dot_q_cuda, which unpacks the
# weight block it is given again for every column (the IQ types through their grid tables); mul_mat_vec_f does
# one FMA per weight and column. So a column costs the device's compute per weight, not a share of the bytes:
# a 1.56-bit IQ1_S weight costs as much work as a 4.5-bit Q4_0 one, and a GPU with little compute for its
# bandwidth (P40, MI50) pays more per column than one with much (RTX 4090, DGX Spark).
MV_COL = 2.0
# ggml-cuda's mmvq.cu on GCN and CDNA (MMVQ_PARAMETERS_GCN): blocks of 2 warps up to 4 columns and 1 from 5 (the
# generic table: 4, then 2), so each column after the first costs MV_COL_GCN (in MV_COL's unit) there (quantized
# weights; the architectures of enginelab.measured.gpu_arch that GGML_CUDA_CC_IS_GCN / IS_CDNA cover)
MMVQ_GCN_ARCHS = frozenset({"polaris", "vega", "cdna", "cdna3"})
MV_COL_GCN = 2.0
MM_BW = 0.3  # mat-mat tiles stream the weights (1 + MM_BW) x slower than mat-vec kernels
# ggml-cuda (CUDA and ROCm) builds before #15525 (the change table's mmid_sync_free): per backend (moe_sync_us,
# moe_tok_us), the host sync on each MUL_MAT_ID call past the mat-vec kernel (the MoE MMQ helper ran on the host)
# and a cost per token and block (none). 20 µs: #15525's own table, RTX 3090 DeepSeek-V2-Lite Q4_0 at a micro-batch
# of 2, 158.03 -> 180.94 t/s, 1.6 ms over its 26 MoE blocks' 78 calls (the pull request's tighter tile bound
# matters little at 2 tokens). Not fitted: every MoE row of the validation ran a later build. Other backends never
# synced there.
BATCH_PARAMS = {"cuda": (20.0, 0.0), "rocm": (20.0, 0.0)}
# Without graph replay the host launches each kernel (graphs_lost). nograph_layer_us is what a block costs then,
# fitted on decode runs of dense models, whose block ggml-cuda runs as BLOCK_KERNELS launches (llama, a few tokens:
# the fused RMS norm, Q/K/V, RoPE x2, two KV-cache set_rows, flash attention and its combine, output, residual add,
# the FFN norm, gate/up/down, GLU and residual add; each quantized matmul a quantize_q8_1 and an MMVQ launch). An MoE
# block's FFN launches more (llm_graph_context::build_moe_ffn, ggml_cuda_mul_mat_id): the router matmul, softmax,
# argsort (top-k), get_rows of the weights, sum_rows / clamp / div (their normalisation), three MUL_MAT_ID, the GLU,
# the weights' MUL and the sum over the k experts, against the dense FFN's three matmuls and GLU: MOE_EXTRA_KERNELS
# more, for MUL_MAT_ID on tiles (MMQ: ids helper, quantize, MMQ and stream-k fixup, 4 launches a call) with the
# k - 1 = 7 adds of a top-8 router fused into one (fused_expert_adds); MMID_LAUNCHES per call on each path, and the
# unfused adds (k - 1 = 7, Qwen3-MoE's top-8; gpt-oss's top-4 adds three but its router bias and three add_id
# biases make up the difference) where the build does not fuse them.
BLOCK_KERNELS = 25
MOE_EXTRA_KERNELS = 16
MMID_LAUNCHES = {"tiles": 4, "matvec": 2}
UNFUSED_EXPERT_ADDS = 6  # k - 1 = 7 adds as 7 launches instead of 1
# MoE routing over a pass of T tokens that do not share their input (different sequences' tokens, a prompt's
# tokens): a trained router's experts are not picked independently and uniformly, popular experts recur, so the
# distinct experts the pass reads are those of T ** ROUTE_EXP independent tokens (perf_model.batched.step_work).
# Fitted with MV_COL, MM_BW and MV_COL_GCN (enginelab.serving.fit); 1.0: independent uniform routing.
ROUTE_EXP = 0.7

# vLLM's and SGLang's passes multiply each weight matrix with all the pass's tokens (M = tokens) in one cuBLAS /
# CUTLASS GEMM, while llama.cpp's measured prefill rate (pp_eff_f, pp_sat_tflops) was fitted on llama-bench's pp512:
# 512-token micro-batches. A GEMM's output is cut into thread-block tiles that run one per SM in waves; a part-filled
# last wave leaves SMs idle (wave quantization, NVIDIA's Matrix Multiplication Background User's Guide). A GEMM
# engine's pass runs its matmuls that much faster than the fitted rate: the tiles' wave utilization at its tokens
# over that at 512 (never slower: below 512 tokens cuBLAS picks smaller tiles and split-K).
GEMM_TILE = (128, 256)  # CUTLASS's default SM80 half-precision threadblock (M x N): GemmShape<128, 256, 64>
CALIBRATION_TOKENS = 512  # llama-bench's pp512 runs as one n_ubatch = 512 micro-batch
# streaming multiprocessors (CUDA cores / 128, A100's / 64), from NVIDIA's whitepapers and spec pages: A100
# (GA100, 6,912 cores), H100 SXM5 (16,896), RTX 3060 (3,584), RTX 3090 (10,496), RTX 4060 Ti (4,352), RTX 4090
# (16,384), RTX 5090 (21,760); other GPUs keep the fitted rate. Names without "GeForce ", as the catalog spells them.
GPU_SMS = {
    "A100 SXM4 80GB": 108, "A100 SXM4 40GB": 108, "H100 SXM5 80GB": 132, "RTX 3060": 28, "RTX 3090": 82,
    "RTX 4060 Ti 16GB": 34, "RTX 4090": 128, "RTX 5090": 170,
}  # fmt: skip


def batched_seconds(
    w, dev, backend: str, n_tok: int, engine: str, n_threads, params=None, build=None, gain: float = 1.0
) -> tuple:
    """(seconds, memory seconds, compute seconds, basis) of one device's share of a pass over n_tok tokens, with
    engine's kernels ("llama.cpp", or "vllm" / "sglang": GEMMs throughout). gain: the GEMM engines' matmul rate
    over the fitted one (gemm_gain)."""
    if backend == "cpu":  # ggml-cpu's decode time already multiplies each row once per token
        return _measured.decode_seconds(w, dev, backend, n_threads, n_tok, build=build)
    t, t_mem, t_cmp, basis = _measured.decode_seconds(w, dev, backend, n_threads, min(n_tok, MMV_MAX_COLS), build=build)
    if n_tok == 1:
        return t, t_mem, t_cmp, basis
    prm = _measured.params_for(backend)
    t_w = t_mem * w.weight_bytes / w.bytes if w.bytes else 0.0  # the weights' share of the streaming time
    extra = 0.0
    fs = _measured.feature_set(build)
    mmid_tiles = n_tok > (MMID_MMVQ_MAX if f"mmvq_mmid:{backend}" in fs else MMID_MV_MAX.get(backend, 1))
    if engine == "llama.cpp" and w.moe_layers and mmid_tiles and backend in BATCH_PARAMS:
        moe_sync_us, moe_tok_us = (params or BATCH_PARAMS).get(backend, BATCH_PARAMS[backend])
        if f"mmid_sync_free:{backend}" in fs:
            moe_sync_us = 0.0
        extra = w.moe_layers * (3 * moe_sync_us + n_tok * moe_tok_us) * 1e-6
    if engine == "llama.cpp" and graphs_lost(w, dev, backend, n_tok, build):
        extra += graph_loss_seconds(w, backend, prm, mmid_tiles, build)
    if engine == "llama.cpp" and n_tok <= streaming_max(w, dev, backend, build):
        col = MV_COL_GCN if gcn_table(w, dev, backend) else MV_COL
        t_col = column_seconds(w, dev, backend, prm, n_threads, build)
        if w.moe_layers and mmid_tiles:
            # MUL_MAT_ID past its mat-vec limit runs the routed experts on tiles (MMQ) while the rest of the pass
            # streams on mat-vec kernels: the experts stream (1 + MM_BW) x slower and take no mat-vec columns
            n_all = sum(k for _t, k in w.weights_by_type)
            n_exp = sum(k for _t, k in w.expert_weights_by_type)
            t_col *= (n_all - n_exp) / n_all if n_all else 1.0
            extra += MM_BW * t_w * _expert_byte_share(w)
        return t + col * (n_tok - 1) * t_col + extra, t_mem, t_cmp, basis
    # mat-mat tiles beside the streaming
    t_c = _measured._matmul_seconds(w.flops, w, dev, backend, prm, n_threads, build, w16=engine != "llama.cpp") / gain
    t_c += w.layers * prm.pp_layer_us * 1e-6
    if engine == "llama.cpp":
        t_mem += MM_BW * t_w
    t = max(t_mem, t_c) + min(t_mem, t_c) * (1.0 - _measured.overlap_for(dev, backend, prm)) + extra
    return t, t_mem, t_c, basis


def graph_loss_seconds(w, backend: str, prm, mmid_tiles: bool, build=None) -> float:
    """What the host's kernel launches cost a pass that runs without graph replay: nograph_layer_us per
    BLOCK_KERNELS launches, a dense block's; each MoE block launches more (MOE_EXTRA_KERNELS, its MUL_MAT_ID calls on
    tiles or on the mat-vec kernel, its expert adds one launch or k - 1)."""
    extra = MOE_EXTRA_KERNELS + 3 * (MMID_LAUNCHES["tiles" if mmid_tiles else "matvec"] - MMID_LAUNCHES["tiles"])
    if not _measured.fused_expert_adds(backend, build):
        extra += UNFUSED_EXPERT_ADDS
    kernels = w.layers * BLOCK_KERNELS + w.moe_layers * extra
    return kernels * prm.nograph_layer_us / BLOCK_KERNELS * 1e-6


def column_seconds(w, dev, backend: str, prm, n_threads, build=None) -> float:
    """One token's matmul time over the weights this pass streams (2 FLOPs per weight, every type at its own
    class rate, enginelab.measured._matmul_seconds): the unit of a mat-vec column's cost. An MoE pass counts
    every expert it reads, as its mat-vec and gathered kernels walk each of them."""
    n = sum(k for _t, k in w.weights_by_type)
    return _measured._matmul_seconds(2.0 * n, w, dev, backend, prm, n_threads, build) if n else 0.0


def streaming_max(w, dev, backend: str, build=None) -> int:
    """The most tokens this device's share of a pass runs on weight-streaming kernels: the limit of the type that
    holds most of its weights (enginelab.measured.streaming_max_tokens)."""
    if not w.weights_by_type:
        return MMV_MAX_COLS
    typ = max(w.weights_by_type, key=lambda tw: tw[1])[0]
    return _measured.streaming_max_tokens(typ, dev, backend, build)


def wave_utilization(m_tok: int, shapes, sms: int) -> float:
    """The FLOP-weighted share of SM time the GEMMs' tiles fill: per (N, K) matrix, ceil(M / 128) x ceil(N / 256)
    tiles over whole waves of `sms`."""
    tm, tn = GEMM_TILE
    done = total = 0.0
    for n, k in shapes:
        tiles = -(-m_tok // tm) * -(-n // tn)
        done += n * k * tiles / (-(-tiles // sms) * sms)
        total += n * k
    return done / total if total else 1.0


def gemm_shapes(model, engine: str) -> list:
    """(N, K) of a dense block's matrices as the engine runs them: vLLM and SGLang fuse q, k and v into one
    QKVParallelLinear and gate and up into one MergedColumnParallelLinear (vllm/model_executor/models/llama.py,
    qwen3.py; sglang's the same); llama.cpp multiplies each on its own (wq, wk, wv, ffn_gate, ffn_up)."""
    h, d = model.hidden_size, model.d_head
    q, kv, inter = model.num_attention_heads * d, model.num_key_value_heads * d, model.intermediate_size
    if engine == "llama.cpp":
        return [(q, h), (kv, h), (kv, h), (h, q), (inter, h), (inter, h), (h, inter)]
    return [(q + 2 * kv, h), (h, q), (2 * inter, h), (h, inter)]


def gemm_gain(model, n_tok: int, engine: str, device_name: str) -> float:
    """How much faster a GEMM engine's pass of n_tok tokens runs its matmuls than llama.cpp's fitted pp512 rate:
    wave utilization of its own fused GEMMs at n_tok over llama.cpp's at 512, at least 1. 1 for llama.cpp, for an
    MoE model (its experts' GEMMs see a share of the tokens; not modelled) and for a GPU without an SM count."""
    sms = GPU_SMS.get(device_name.removeprefix("GeForce "))
    if engine == "llama.cpp" or not sms or model.is_moe or n_tok <= CALIBRATION_TOKENS:
        return 1.0
    ref = wave_utilization(CALIBRATION_TOKENS, gemm_shapes(model, "llama.cpp"), sms)
    return max(1.0, wave_utilization(n_tok, gemm_shapes(model, engine), sms) / ref)


def graphs_lost(w, dev, backend: str, n_tok: int, build=None) -> bool:
    """Whether a pass of n_tok > 1 tokens runs without the graph replay this GPU's batch-1 decode has, so the host
    launches every kernel (ggml-cuda's graph compatibility check, also under ROCm): before cuda_graphs_batch
    (#19645) any pass of more than one token (an ADD over a batch above 1 turned graphs off, and a MUL_MAT_ID past
    one token); since, an MoE pass past MMID_GRAPH_MAX tokens; since cuda_graphs_mmid (#26802) only where
    MUL_MAT_ID would sync the stream (float experts: quantized ones run on MMQ without a sync)."""
    if backend == "cuda":
        replayed = _measured.cuda_graphs(dev, build)
    elif backend == "rocm":
        replayed = _measured.hip_graphs(build)
    else:
        return False
    if not replayed or n_tok <= 1:
        return False
    fs = _measured.feature_set(build)
    if f"cuda_graphs_batch:{backend}" not in fs:
        return True
    if not w.moe_layers or n_tok <= MMID_GRAPH_MAX:
        return False
    if f"cuda_graphs_mmid:{backend}" not in fs:
        return True
    experts = w.expert_weights_by_type
    return bool(experts) and max(experts, key=lambda tw: tw[1])[0] in _measured.FLOAT_TYPES


def gcn_table(w, dev, backend: str) -> bool:
    """Whether this device's share of a pass runs its quantized mat-vec kernels on ggml-cuda's GCN parameter
    table (MMVQ_GCN_ARCHS under ROCm, the type holding most of its weights quantized)."""
    if backend != "rocm" or _measured.gpu_arch(dev, backend)[0] not in MMVQ_GCN_ARCHS or not w.weights_by_type:
        return False
    return max(w.weights_by_type, key=lambda tw: tw[1])[0] not in _measured.FLOAT_TYPES


def _expert_byte_share(w) -> float:
    """The routed experts' part of a pass's weight bytes (each type at its bits per weight)."""
    if not w.expert_weights_by_type:
        return 0.0
    bpw = {t: (GGML_TYPES[t].bpw if t in GGML_TYPES else 16.0) for t, _n in w.weights_by_type}
    total = sum(n * bpw.get(t, 16.0) for t, n in w.weights_by_type)
    return sum(n * bpw.get(t, 16.0) for t, n in w.expert_weights_by_type) / total if total else 0.0
