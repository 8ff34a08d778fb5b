"""serving_plan: how vLLM and SGLang carve up one GPU at start-up.

Built on perf_model's public API (MODELS, MACHINES, Model.tensors, GiB/MiB).
Pure Python, standard library only.  Read it top to bottom:

  1. Engine versions this file follows
  2. Weights as a Hugging Face checkpoint stores them (bf16, fp8, AWQ, GPTQ)
     2b. Tensor parallelism: weights and KV heads per GPU, all-reduce traffic per token
  3. vLLM: requested memory, profiling, KV blocks, the two start-up log lines
  4. SGLang: mem_fraction_static, the token pool, max running requests
  5. The command lines

Both engines pre-allocate the KV cache at start-up from whatever memory is
left after the weights and a forward-pass reserve.  The differences are in
how the reserve is found (vLLM profiles a dummy forward pass; SGLang takes a
fraction of the free memory) and in the unit of the pool (vLLM: blocks of
block_size tokens; SGLang: single-token cells).

What is exact and what is estimated
-----------------------------------
Exact (the engines' own formulas): the requested memory, the KV page and
cell sizes, num_gpu_blocks from the available bytes, the KV size in tokens,
the maximum concurrency, the "max_model_len does not fit" check, SGLang's
default mem_fraction_static heuristic and its max_running_requests rule.

Estimated (vLLM measures these on the real GPU; we cannot): the peak
activation of the profiling run, the non-torch memory, and the CUDA graph
pool.  Their formulas below are order-of-magnitude models checked against
published start-up logs of 7-14B models on 24 GB cards (peak activation
0.2-0.6 GiB, non-torch 0.13-0.25 GiB, CUDA graphs 0.1-0.6 GiB); a real log
will differ by a few hundred MiB, which moves the KV pool by a few thousand
tokens.
"""

from __future__ import annotations

import re

import perf_model as pm

from .checks import brief, check_bool, check_int, check_number

# ---------------------------------------------------------------------------
# 1. Engine versions
# ---------------------------------------------------------------------------
VLLM_VERSION = (
    "vLLM >= 0.21 (V1 engine), as on main in late 2026: "
    "vllm/v1/worker/gpu_worker.py determine_available_memory, "
    "vllm/v1/core/kv_cache_utils.py get_num_blocks / check_enough_kv_cache_memory / "
    "get_max_concurrency_for_kv_cache_config; CUDA graph memory profiling on by default "
    "since v0.21.0 (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1)"
)
SGLANG_VERSION = (
    "SGLang main (v0.5 series, 2026): python/sglang/srt/server_args.py "
    "_handle_gpu_memory_settings (mem_fraction_static heuristic of PR #10975), "
    "python/sglang/srt/model_executor/model_runner.py profile_max_num_token and "
    "_resolve_max_num_reqs"
)

GiB = pm.GiB
MiB = pm.MiB

# vLLM defaults (vllm serve, one GPU with < 70 GiB)
VLLM_GPU_MEMORY_UTILIZATION = 0.92  # CacheConfig default (docs: "If unspecified, will use the default value of 0.92")
VLLM_BLOCK_SIZE = 16
VLLM_MAX_NUM_SEQS = 256
VLLM_MAX_NUM_BATCHED_TOKENS = 2048  # server default on GPUs with < 70 GiB (8192 above)
VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)
VLLM_KV_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")

# Estimated terms (see the module docstring)
NON_TORCH_BYTES = 0.2 * GiB  # cuBLAS/cuDNN workspaces etc. allocated during profiling
CUDA_CONTEXT_BYTES = 500 * MiB  # CUDA context + kernels, present before either engine measures
CUDAGRAPH_BASE_BYTES = 64 * MiB  # graph pool baseline
CUDAGRAPH_PER_SIZE_BYTES = 6 * MiB  # each captured batch size adds a little

WEIGHT_DTYPES = {
    # key: (label, description)
    "bf16": ("BF16", "the checkpoint's bf16 weights, 2 bytes each"),
    "fp16": ("FP16", "fp16 weights, 2 bytes each"),
    "fp8": (
        "FP8 (online, --quantization fp8)",
        "linear layers in fp8 (1 byte) with a per-channel f32 scale; embeddings, lm_head and norms stay bf16",
    ),
    "awq": (
        "AWQ int4, group 128",
        "linear layers packed 4-bit with an fp16 scale and a 4-bit zero per "
        "128 weights; embeddings, lm_head and norms stay fp16",
    ),
    "gptq": (
        "GPTQ int4, group 128",
        "linear layers packed 4-bit with an fp16 scale and a 4-bit zero per "
        "128 weights, plus an int32 g_idx per input feature; embeddings, "
        "lm_head and norms stay fp16",
    ),
}
AWQ_GROUP = 128


def _check(cond: bool, arg: str, msg: str) -> None:
    if not cond:
        raise ValueError(f"{arg}: {msg}")


MAX_SEQS = 1 << 20  # max_num_seqs, max_running_requests: far above any engine's default (256-1024)


def _int(v, arg: str, lo: int = 1, hi: int = pm.MAX_CONTEXT) -> int:
    return check_int(v, arg, lo, hi)


def _one_of(v, arg: str, allowed) -> str:
    _check(isinstance(v, str) and v in allowed, arg, f"unknown {brief(v)}; allowed: {', '.join(allowed)}")
    return v


def _total_bytes(v) -> float:
    return check_number(v, "total_bytes", 0.0, pm.MAX_DEVICE_GB * pm.GB, lo_open=True)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def gib(n_bytes: float) -> float:
    return n_bytes / GiB


# ---------------------------------------------------------------------------
# 2. Weights of a Hugging Face checkpoint
# ---------------------------------------------------------------------------
# A serving engine loads safetensors, not GGUF.  Every matmul weight inside the
# blocks (attention projections, MLP and expert weights) takes the checkpoint's
# quantization; the embedding, the lm_head, norms and the MoE router stay in the
# model dtype.  perf_model's tensor inventory gives the shapes (ne[0] = input
# features, ne[1] = output features); rope_freqs is a GGUF-only tensor.


def _is_linear(t) -> bool:
    return t.layer >= 0 and len(t.ne) >= 2 and t.cls not in ("norm", "bias", "ffn_gate_inp")


def _tensor_bytes(t, weight_dtype: str) -> float:
    """Bytes of one tensor as the engine holds it (see WEIGHT_DTYPES)."""
    n = t.n_elements
    if not _is_linear(t) or weight_dtype in ("bf16", "fp16"):
        return 2.0 * n
    rows = n // t.ne[0]  # output channels (x experts)
    if weight_dtype == "fp8":
        return n + 4.0 * rows  # 1 byte each + an f32 scale per output channel
    groups = rows * cdiv(t.ne[0], AWQ_GROUP)
    b = 0.5 * n + groups * (2.0 + 0.5)  # packed int4 + fp16 scale + int4 zero per group
    if weight_dtype == "gptq":
        experts = n // (t.ne[0] * t.ne[1])
        b += 4.0 * t.ne[0] * experts  # g_idx: one int32 per input feature
    return b


def hf_weight_bytes(model, weight_dtype: str = "bf16", tp: int = 1) -> dict:
    """Bytes of the model's weights as the engine holds them on one GPU (of tp, see section 2b).

    Returns total, linear (quantized part), other (embedding, lm_head, norms),
    params and bits per weight."""
    model = pm.get_model(model)
    _one_of(weight_dtype, "weight_dtype", WEIGHT_DTYPES)
    if tp != 1:
        check_tp(model, tp, "tp")
    linear = other = 0.0
    params = 0
    for t in model.tensors():
        if t.name.startswith("rope_freqs"):
            continue
        params += t.n_elements
        b = _tensor_bytes(t, weight_dtype)
        if tp != 1:
            b *= tp_share(model, t, tp)
        if _is_linear(t):
            linear += b
        else:
            other += b
    total = linear + other
    return {
        "total": total,
        "linear": linear,
        "other": other,
        "params": params,
        "bpw": 8.0 * total / params if params else 0.0,
    }


# ---------------------------------------------------------------------------
# 2b. Tensor parallelism (vLLM --tensor-parallel-size, SGLang --tp)
# ---------------------------------------------------------------------------
# Megatron-style sharding, as vLLM's and SGLang's linear layers do it (vllm/model_executor/layers/linear.py):
#   * column-parallel q, gate, up (and each expert's gate/up) and row-parallel o, down: 1/tp of the weights each;
#   * k and v (QKVParallelLinear): num_kv_heads // tp heads per GPU, but at least one: with fewer KV heads
#     than GPUs each head is replicated on tp // num_kv_heads GPUs (vLLM ModelConfig.get_num_kv_heads:
#     max(1, total_num_kv_heads // tensor_parallel_size); SGLang's get_num_kv_heads is the same);
#   * the embedding and the lm_head are vocab-parallel: the vocabulary, padded to a multiple of 64, split in tp;
#   * norms and the MoE router are replicated.
# Both engines refuse a tp that does not divide num_attention_heads, and the KV heads must divide tp or be
# divisible by it.  The KV cache per GPU holds only that GPU's heads, so its page (and SGLang's cell) shrinks.
# Every layer ends its attention and its MLP with an all-reduce of the hidden state (n_embd values per token,
# in the model dtype); a ring all-reduce sends 2 (tp - 1) / tp of it from each GPU.  The embedding adds one
# more all-reduce, and the logits are gathered (each GPU receives the other GPUs' share of the vocabulary).
VOCAB_PADDING = 64  # vLLM's DEFAULT_VOCAB_PADDING_SIZE
TP_SIZES = (1, 2, 4, 8)
# NCCL communicators and vLLM's custom all-reduce buffers, per GPU, with tp > 1: an estimate (a few hundred
# MiB in published multi-GPU start-up logs), counted with the non-torch memory.
TP_COMM_BYTES = 256 * MiB


def check_tp(model, tp, arg: str = "tensor_parallel_size") -> int:
    """tp, checked as vLLM and SGLang check it at start-up; ValueError naming `arg` otherwise."""
    model = pm.get_model(model)
    _int(tp, arg)
    _check(tp <= 64, arg, f"must be at most 64, got {tp}")
    heads, kv = model.num_attention_heads, model.num_key_value_heads
    _check(
        heads % tp == 0,
        arg,
        f"total number of attention heads ({heads}) must be divisible by tensor parallel size ({tp})",
    )
    _check(
        kv % tp == 0 or tp % kv == 0,
        arg,
        f"the {kv} KV heads cannot be split over {tp} GPUs (one must divide the other)",
    )
    return tp


def tp_kv_heads(model, tp: int = 1) -> int:
    """KV heads each GPU holds: max(1, num_key_value_heads // tp) (replicated when there are fewer than tp)."""
    model = pm.get_model(model)
    _int(tp, "tp", 1, 64)
    return max(1, model.num_key_value_heads // tp)


def tp_share(model, t, tp: int) -> float:
    """The share of tensor t one of tp GPUs holds (see the section comment)."""
    if tp == 1:
        return 1.0
    cls = t.cls
    if cls in ("token_embd", "output"):
        vocab = cdiv(model.vocab_size, VOCAB_PADDING) * VOCAB_PADDING
        return cdiv(vocab, tp) / model.vocab_size
    if not _is_linear(t):
        return 1.0  # norms, biases and the router are replicated
    kv_share = tp_kv_heads(model, tp) / model.num_key_value_heads
    if cls in ("attn_k", "attn_v"):
        return kv_share
    if cls == "attn_qkv":  # fused q, k, v (phi3): the q rows split in tp, the k/v rows by heads
        q = model.num_attention_heads * model.d_head
        kv = 2 * model.num_key_value_heads * model.d_head
        return (q / tp + kv * kv_share) / (q + kv)
    return 1.0 / tp


def allreduce_bytes_per_token(model, tp: int, dtype_bytes: int = 2) -> float:
    """Bytes each GPU sends per token for tensor parallelism: two all-reduces of the hidden state per layer and
    one for the embedding (ring: 2 (tp - 1) / tp of n_embd values each), and its gather of the logits."""
    model = pm.get_model(model)
    _int(tp, "tp", 1, 64)
    _int(dtype_bytes, "dtype_bytes", 1, 8)
    if tp <= 1:
        return 0.0
    ring = 2.0 * (tp - 1) / tp
    reduces = 2 * model.num_hidden_layers + 1
    return reduces * ring * model.hidden_size * dtype_bytes + (tp - 1) / tp * model.vocab_size * dtype_bytes


# ---------------------------------------------------------------------------
# 3. vLLM
# ---------------------------------------------------------------------------
# Start-up, in the order the V1 engine does it (gpu_worker.py):
#   requested  = gpu_memory_utilization * total GPU memory
#   load the weights, then profile_run(): a dummy forward pass of
#   max_num_batched_tokens tokens and a dummy sampler pass of max_num_seqs rows;
#   its peak is the activation term; what grew outside torch is non-torch memory;
#   a dummy CUDA graph capture estimates the graph pool (unless --enforce-eager).
#   available  = requested - weights - peak activation - non-torch - CUDA graphs
# kv_cache_utils.py then turns the available bytes into blocks:
#   page_size  = 2 (K and V) * block_size * num_kv_heads * head_dim * dtype bytes   (one layer)
#   num_blocks = available // page_size // num_layers
#   concurrency = num_blocks / cdiv(max_model_len, block_size)
#   "GPU KV cache size" = int(concurrency * max_model_len) tokens
#                       (= num_blocks * block_size when max_model_len is a multiple of block_size)
# and refuses to start if one max_model_len request needs more than is available.


def kv_dtype_bytes(kv_cache_dtype: str, model_dtype_bytes: int = 2) -> int:
    """Bytes per KV element: auto = the model dtype (bf16/fp16: 2); fp8 variants: 1."""
    _one_of(kv_cache_dtype, "kv_cache_dtype", VLLM_KV_DTYPES + tuple(SGLANG_KV_DTYPES))
    _check(
        model_dtype_bytes in (1, 2, 4) and not isinstance(model_dtype_bytes, bool),
        "model_dtype_bytes",
        f"must be 1, 2 or 4, got {brief(model_dtype_bytes)}",
    )
    return model_dtype_bytes if kv_cache_dtype == "auto" else 1


def vllm_page_size_bytes(model, block_size: int = VLLM_BLOCK_SIZE, kv_cache_dtype: str = "auto", tp: int = 1) -> int:
    """One block of one layer on one GPU (FullAttentionSpec.page_size_bytes): block_size tokens of K and V of
    that GPU's KV heads (tp_kv_heads)."""
    _int(block_size, "block_size", 1, 1 << 16)
    model = pm.get_model(model)
    per_gpu = pm.kv_elements_per_token_layer(model) * tp_kv_heads(model, tp) // model.num_key_value_heads
    return block_size * per_gpu * kv_dtype_bytes(kv_cache_dtype)


# 3b. The KV cache per block: vLLM's KV cache groups
# ---------------------------------------------------------------------------
# Read from vllm/v1/kv_cache_interface.py and vllm/v1/core/kv_cache_utils.py (vllm-project/vllm at
# 001cabc1be16): each layer gets a spec from its block:
#   FullAttentionSpec   page = block_size x kv_heads x (head_size + head_size_v) x dtype (a global block;
#                       Llama 4's chunked blocks too: the hybrid manager is off for chunked local attention)
#   SlidingWindowSpec   the same page; a request holds cdiv(min(window - 1 + max_num_batched_tokens,
#                       max_model_len), block_size) + 1 blocks
#   MLAAttentionSpec    page = block_size x (kv_lora_rank + qk_rope_head_dim) x dtype (no V)
#   MambaSpec           page = the state of one request: the conv state in the model dtype and the SSM
#                       state in mamba_ssm_dtype (f32 in Qwen3.5/3.6's config.json); a request holds 1
#                       block ("none"), 2 with prefix caching ("align", vLLM's mode when prefix caching is
#                       on, the default)
# A block reading another block's cache (Gemma's KV sharing) has no spec. One spec for every layer: one group
# (num_blocks = available // page // num_layers). The same kind with different widths (e.g. full attention
# of two widths): one group whose layers each get num_blocks pages (num_blocks = available // sum of pages).
# Otherwise (a hybrid): the attention block size grows so that an attention page holds a Mamba state
# (kernel alignment max(16, block_size) x cdiv(mamba page, alignment x attention bytes per token)), the Mamba
# page is padded to it, smaller attention pages take a block size that makes them equal (their page must
# divide the largest: vLLM refuses otherwise); the layers of each kind are split into groups of group_size
# layers (the smallest kind's count, or the largest's when it is under 1.5 times that);
#   num_blocks = available // page // group_size,  "GPU KV cache size" = num_blocks // groups x block_size,
#   concurrency = num_blocks / (the blocks one max_model_len request takes in every group).
VLLM_MAMBA_CACHE_MODES = ("none", "align")
MAMBA_ALIGNMENT = 16  # the attention backends' smallest kernel block size (kernel_block_alignment_size)


def _block_specs(model, kv_bytes: int, tp: int, ssm_bytes=None) -> list:
    """One entry per block: (kind, bytes) where kind is "full", "sliding", "mla" (bytes per token on one GPU)
    or "mamba" (bytes of one request's state on one GPU), with the window for "sliding"; None for a block
    that keeps nothing. `ssm_bytes`: the SSM state's element size (None: 4 for a gated delta net, whose
    configs carry mamba_ssm_dtype float32, else the model dtype's 2)."""
    from enginelab import blocks as bl

    out = []
    for blk in model.blocks:
        m = blk.mixer
        if isinstance(m, bl.Attention) and m.kv_shared_from < 0:
            if m.kv_lora_rank:  # the latent is replicated on every GPU
                out.append(("mla", (m.kv_lora_rank + m.rope_dim + m.indexer_head_dim) * kv_bytes, 0))
            else:
                kvh = max(1, m.n_head_kv // tp)
                per = kvh * (m.head_dim_k + m.head_dim_v) * kv_bytes
                sliding = m.window and not m.chunked
                out.append(("sliding" if sliding else "full", per, m.window if sliding else 0))
        elif isinstance(m, (bl.Recurrent, bl.ShortConv)):
            r, st = bl.state_elements(blk)
            sb = ssm_bytes if ssm_bytes is not None else (4 if getattr(m, "kind", "") == "gated_delta_net" else 2)
            out.append(("mamba", (r * 2 + st * sb) // tp, 0))
        else:
            out.append(None)
    return out


def vllm_kv_groups(
    model,
    available_bytes: float,
    block_size: int = VLLM_BLOCK_SIZE,
    kv_cache_dtype: str = "auto",
    max_model_len=None,
    max_num_batched_tokens: int = VLLM_MAX_NUM_BATCHED_TOKENS,
    mamba_cache_mode: str = "align",
    tp: int = 1,
) -> dict:
    """vLLM's KV cache layout for `available_bytes` (see above): the block size it settles on, the page, the
    groups, num_gpu_blocks, the logged KV size in tokens, the concurrency at max_model_len and the bytes one
    such request needs (or an error where vLLM cannot unify the pages)."""
    model = pm.get_model(model)
    check_number(available_bytes, "available_bytes", -float(1 << 60), float(1 << 60))
    _int(block_size, "block_size", 1, 1 << 16)
    _one_of(mamba_cache_mode, "mamba_cache_mode", VLLM_MAMBA_CACHE_MODES)
    if max_model_len is None:
        max_model_len = model.max_position_embeddings
    _int(max_model_len, "max_model_len")
    _int(max_num_batched_tokens, "max_num_batched_tokens")
    _int(tp, "tp", 1, 64)
    specs = [s for s in _block_specs(model, kv_dtype_bytes(kv_cache_dtype), tp) if s is not None]
    _check(bool(specs), "model", "keeps no KV cache or state at all")
    attn = [s for s in specs if s[0] != "mamba"]
    mamba = [s for s in specs if s[0] == "mamba"]
    error = None
    bs = {}  # kind key -> block size
    keys = sorted({s for s in specs})
    if mamba and attn:
        attn_1 = max(s[1] for s in attn)
        mamba_page = max(s[1] for s in mamba)
        align = max(MAMBA_ALIGNMENT, block_size)
        block_size = max(block_size, align * -(-mamba_page // (align * attn_1)))
    page_of = {}
    for k in keys:
        page_of[k] = k[1] if k[0] == "mamba" else block_size * k[1]
        bs[k] = block_size
    if mamba and attn:
        top = block_size * max(s[1] for s in attn)
        for k in keys:
            if k[0] == "mamba":
                page_of[k] = top  # padded to the attention page
    counts = {k: sum(1 for s in specs if s == k) for k in keys}
    uniform_type = len({k[0] for k in keys}) == 1 and keys[0][0] in ("full", "mla") and len(keys) > 1
    if len(keys) == 1 or uniform_type:
        if len(keys) == 1:
            page = page_of[keys[0]]
            n_layers = counts[keys[0]]
            num_blocks = max(int(available_bytes // page // n_layers), 0) if available_bytes > 0 else 0
        else:  # one kind of different widths: each layer its pages (UniformTypeKVCacheSpecs)
            page = sum(page_of[k] * counts[k] for k in keys)
            n_layers = 1
            num_blocks = max(int(available_bytes // page), 0) if available_bytes > 0 else 0
        groups = [(keys[0][0], 1)]
        group_size = n_layers
        per_request = {
            k: _blocks_per_request(k, bs[k], max_model_len, max_num_batched_tokens, mamba_cache_mode) for k in keys
        }
        blocks_per_request = max(per_request.values())
        needed = blocks_per_request * page * n_layers
        kv_tokens = num_blocks * block_size
    else:
        top = max(page_of.values())
        for k in keys:
            if page_of[k] != top:
                if top % page_of[k]:
                    error = (
                        "NotImplementedError: The page size of the layer is not divisible by the maximum page "
                        "size. Cannot unify by adjusting block_size."
                    )
                    break
                bs[k] = bs[k] * (top // page_of[k])
                page_of[k] = top
        page = top
        lo, hi = min(counts.values()), max(counts.values())
        group_size = hi if hi < lo * 1.5 else lo
        groups = [(k[0], -(-counts[k] // group_size)) for k in keys]
        n_groups = sum(g for _, g in groups)
        num_blocks = max(int(available_bytes // page // group_size), 0) if available_bytes > 0 and not error else 0
        per_request = {
            k: _blocks_per_request(k, bs[k], max_model_len, max_num_batched_tokens, mamba_cache_mode) for k in keys
        }
        blocks_per_request = sum(per_request[k] * g for k, (_, g) in zip(keys, groups))
        needed = blocks_per_request * page * group_size
        kv_tokens = num_blocks // n_groups * min(bs.values())
    concurrency = num_blocks / blocks_per_request if blocks_per_request else 0.0
    return {
        "block_size": min(bs.values()),
        "page_size_bytes": page,
        "kv_groups": [{"kind": k, "groups": g} for k, g in groups],
        "group_size": group_size,
        "num_gpu_blocks": num_blocks,
        "kv_cache_bytes": num_blocks * page * group_size,
        "gpu_kv_cache_tokens": kv_tokens,
        "blocks_per_request": blocks_per_request,
        "max_concurrency": concurrency,
        "needed_bytes": needed,
        "mamba_state_bytes": sum(s[1] for s in mamba),
        "attention_layers": len(attn),
        "error": error,
    }


def _estimate_max_model_len(model, available, block_size, kv_cache_dtype, max_model_len, mnbt, mode, tp) -> int:
    """estimate_max_model_len: the longest max_model_len one request fits in `available` (binary search)."""
    if available <= 0:
        return 0

    def fits(n):
        g = vllm_kv_groups(model, available, block_size, kv_cache_dtype, n, mnbt, mode, tp)
        return g["needed_bytes"] <= available

    lo, hi = 1, max_model_len
    if not fits(lo):
        return 0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _blocks_per_request(key, bs: int, max_model_len: int, mnbt: int, mamba_cache_mode: str) -> int:
    """The blocks one request of max_model_len tokens holds in a group of this kind (max_memory_usage_bytes)."""
    kind, _, window = key
    if kind == "mamba":
        return 2 if mamba_cache_mode == "align" else 1
    if kind == "sliding":
        return cdiv(min(window - 1 + mnbt, max_model_len), bs) + 1
    return cdiv(max_model_len, bs)


def peak_activation_bytes(
    model, max_num_batched_tokens: int = VLLM_MAX_NUM_BATCHED_TOKENS, max_num_seqs: int = VLLM_MAX_NUM_SEQS, tp: int = 1
) -> float:
    """Estimated peak of vLLM's profiling run on one GPU (an approximation; vLLM measures it).

    Forward pass of T = max_num_batched_tokens tokens in bf16: the widest layer holds
    the fused gate_up output (2 * ffn), its activation (ffn), the fused qkv output
    and four hidden-size tensors (residual, normed input, attention output, MLP output);
    with tensor parallelism the ffn and qkv parts are that GPU's shard.
    Sampler pass of S = min(max_num_seqs, T) rows: f32 logits over the vocabulary and
    two working copies of them (probabilities, log-probabilities).
    profile_run (v1/worker/gpu_model_runner.py) runs the two one after the other: the forward
    pass's intermediates are freed before the sampler runs, and only its output hidden states
    (T x hidden_size, bf16) stay, so the peak is the larger of the two, not their sum."""
    model = pm.get_model(model)
    _int(tp, "tp", 1, 64)
    _int(max_num_batched_tokens, "max_num_batched_tokens")
    _int(max_num_seqs, "max_num_seqs", 1, MAX_SEQS)
    ffn = model.intermediate_size
    if model.is_moe:
        ffn = (model.moe_intermediate_size or ffn) * max(1, model.num_experts_per_tok)
    qkv = (model.num_attention_heads + 2 * model.num_key_value_heads) * model.d_head
    if tp > 1:
        ffn, qkv = ffn / tp, (model.num_attention_heads // tp + 2 * tp_kv_heads(model, tp)) * model.d_head
    t = max_num_batched_tokens
    forward = 2.0 * t * (3 * ffn + qkv + 4 * model.hidden_size)
    s = min(max_num_seqs, t)
    sampler = 3 * 4.0 * s * model.vocab_size
    return max(forward, 2.0 * t * model.hidden_size + sampler)


def cudagraph_capture_sizes(max_num_seqs: int = VLLM_MAX_NUM_SEQS) -> list:
    """vLLM's default capture sizes: 1, 2, 4, then every 8 to 256, then every 16,
    up to max_cudagraph_capture_size = min(2 * max_num_seqs, 512)."""
    _int(max_num_seqs, "max_num_seqs", 1, MAX_SEQS)
    return pm.cudagraph_capture_sizes(max_num_seqs)


def cudagraph_bytes(max_num_seqs: int = VLLM_MAX_NUM_SEQS) -> float:
    """Estimated CUDA graph pool (an approximation; vLLM profiles a dummy capture)."""
    return CUDAGRAPH_BASE_BYTES + CUDAGRAPH_PER_SIZE_BYTES * len(cudagraph_capture_sizes(max_num_seqs))


def format_gib(n_bytes: float) -> str:
    return f"{n_bytes / GiB:.2f}"


def gpu_total_bytes(machine, tp: int = 1) -> float:
    """Total memory the CUDA driver reports on each GPU: the card's DRAM, e.g. 24 GiB on an RTX 4090
    (cudaMemGetInfo says 23.99 GiB; the difference is below a block's worth of KV). With tp GPUs: a machine
    with one GPU stands for tp copies of it; on a machine with several, the first tp, and the smallest of them
    sets the plan (every GPU holds the same shard and the same number of KV blocks)."""
    mc = pm.get_machine(machine)
    _check(
        mc.gpu is not None and not mc.unified,
        "machine",
        f"{mc.name} has no discrete NVIDIA GPU; vLLM and SGLang run on Apple silicon only through experimental paths",
    )
    gpus = mc.gpus
    if len(gpus) > 1:
        _check(tp <= len(gpus), "tensor_parallel_size", f"{mc.name} has {len(gpus)} GPUs, fewer than {tp}")
        return min(g.mem_gb for g in gpus[:tp]) * GiB
    return gpus[0].mem_gb * GiB


def gpu_name(machine, tp: int = 1) -> str:
    mc = pm.get_machine(machine)
    gpus = mc.gpus
    if len(gpus) > 1:
        names = [g.name for g in gpus[:tp]]
        return names[0] if tp == 1 else f"{tp}x {names[0]}" if len(set(names)) == 1 else " + ".join(names)
    return gpus[0].name if tp == 1 else f"{tp}x {gpus[0].name}"


def serving_machines() -> dict:
    """The perf_model machines with a discrete GPU (what vLLM and SGLang target)."""
    return {k: m for k, m in pm.MACHINES.items() if m.gpu is not None and not m.unified}


# The datacenter GPUs of the published serving runs (data/serving/serving_runs.csv), by the key the serving
# figures give them beside the catalog's machines (enginelab.serving.validate.server_machines builds them)
SERVER_GPUS = {"a100": "A100 SXM4 80GB", "h100": "H100 SXM5 80GB"}


def vllm_plan(
    model,
    machine,
    weight_dtype: str = "bf16",
    gpu_memory_utilization: float = VLLM_GPU_MEMORY_UTILIZATION,
    max_model_len=None,
    block_size: int = VLLM_BLOCK_SIZE,
    kv_cache_dtype: str = "auto",
    enforce_eager: bool = False,
    max_num_seqs: int = VLLM_MAX_NUM_SEQS,
    max_num_batched_tokens=None,
    other_processes_gib: float = 0.0,
    tensor_parallel_size: int = 1,
    mamba_cache_mode: str = "align",
) -> dict:
    """vLLM's start-up memory plan: every term, the blocks, the log lines, fits or the error.

    With tensor_parallel_size > 1 every number is per GPU (each holds its shard of the weights and its KV
    heads, section 2b); the pool in tokens is the same on every GPU. The KV cache is laid out per block
    (section 3b): sliding-window blocks keep their window, recurrent blocks one state per request."""
    model = pm.get_model(model)
    mc = pm.get_machine(machine)
    tp = check_tp(model, tensor_parallel_size, "tensor_parallel_size")
    total = gpu_total_bytes(mc, tp)
    _one_of(weight_dtype, "weight_dtype", WEIGHT_DTYPES)
    check_number(gpu_memory_utilization, "gpu_memory_utilization", 0.0, 1.0, lo_open=True)
    if max_model_len is None:
        max_model_len = model.max_position_embeddings  # vLLM's default: the model's config
    _int(max_model_len, "max_model_len")
    _check(
        block_size in VLLM_BLOCK_SIZES and not isinstance(block_size, bool),
        "block_size",
        f"must be one of {', '.join(map(str, VLLM_BLOCK_SIZES))}, got {brief(block_size)}",
    )
    _one_of(kv_cache_dtype, "kv_cache_dtype", VLLM_KV_DTYPES)
    check_bool(enforce_eager, "enforce_eager")
    _int(max_num_seqs, "max_num_seqs", 1, MAX_SEQS)
    if max_num_batched_tokens is None:
        max_num_batched_tokens = VLLM_MAX_NUM_BATCHED_TOKENS
    _int(max_num_batched_tokens, "max_num_batched_tokens")
    check_number(other_processes_gib, "other_processes_gib", 0.0, pm.MAX_DEVICE_GB)

    requested = total * gpu_memory_utilization
    w = hf_weight_bytes(model, weight_dtype, tp)
    weights = w["total"]
    act = peak_activation_bytes(model, max_num_batched_tokens, max_num_seqs, tp)
    non_torch = NON_TORCH_BYTES + (TP_COMM_BYTES if tp > 1 else 0.0)
    graphs = 0.0 if enforce_eager else cudagraph_bytes(max_num_seqs)
    available = requested - weights - act - non_torch - graphs

    n_layers = model.num_hidden_layers
    kvg = vllm_kv_groups(
        model, available, block_size, kv_cache_dtype, max_model_len, max_num_batched_tokens, mamba_cache_mode, tp
    )
    page = kvg["page_size_bytes"]
    specs = _block_specs(model, kv_dtype_bytes(kv_cache_dtype), tp)
    per_token = sum(sp[1] for sp in specs if sp is not None and sp[0] != "mamba")  # every cached block, one token
    num_blocks = kvg["num_gpu_blocks"]
    kv_bytes = kvg["kv_cache_bytes"]
    blocks_per_request = kvg["blocks_per_request"]
    concurrency = kvg["max_concurrency"]
    hybrid = len(kvg["kv_groups"]) > 1 or sum(g["groups"] for g in kvg["kv_groups"]) > 1
    # one group: vLLM logs int(concurrency x max_model_len); several: num_blocks // groups x block_size
    kv_tokens = kvg["gpu_kv_cache_tokens"] if hybrid else int(concurrency * max_model_len)
    needed = kvg["needed_bytes"]  # one request at max_model_len
    free_at_start = total - CUDA_CONTEXT_BYTES - other_processes_gib * GiB

    error = None
    if free_at_start < requested:
        error = (
            f"ValueError: Free memory on device ({gib(free_at_start):.2f}/{gib(total):.2f} GiB) on startup "
            f"is less than desired GPU memory utilization ({gpu_memory_utilization}, "
            f"{gib(requested):.2f} GiB). Decrease GPU memory utilization or reduce GPU memory used by "
            f"other processes."
        )
    elif weights > requested:
        error = (
            f"torch.OutOfMemoryError while loading the weights: they take {gib(weights):.2f} GiB but "
            f"gpu_memory_utilization {gpu_memory_utilization} allows {gib(requested):.2f} GiB. "
            f"{_too_big_advice(weight_dtype)}"
        )
    elif available <= 0:
        error = (
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine."
        )
    elif kvg["error"]:
        error = kvg["error"]
    elif needed > available:
        est = _estimate_max_model_len(
            model, available, block_size, kv_cache_dtype, max_model_len, max_num_batched_tokens, mamba_cache_mode, tp
        )
        hint = f"Based on the available memory, the estimated maximum model length is {est}. " if est > 0 else ""
        error = (
            f"ValueError: To serve at least one request with the models's max seq len ({max_model_len}), "
            f"({format_gib(needed)} GiB KV cache is needed, which is larger than the available KV cache "
            f"memory ({format_gib(available)} GiB). {hint}Try increasing `gpu_memory_utilization` or "
            f"decreasing `max_model_len` when initializing the engine."
        )
    fits = error is None
    # vLLM measures the KV budget only once the weights are loaded: before that, no "Available KV cache memory"
    profiled = free_at_start >= requested and weights <= requested
    notes = []
    kinds = {g["kind"] for g in kvg["kv_groups"]}
    if "sliding" in kinds:
        notes.append(
            "Sliding-window layers keep only their window (vLLM's hybrid KV cache manager): a request holds "
            "window + max_num_batched_tokens tokens of them, however long it is."
        )
    if "mamba" in kinds:
        notes.append(
            f"Recurrent layers keep one state per request ({gib(kvg['mamba_state_bytes']):.3f} GiB over all of "
            f"them), each in a block padded to the attention page: the attention block size becomes "
            f"{kvg['block_size']} tokens."
        )
    if hybrid:
        notes.append(
            f"The blocks are shared by {sum(g['groups'] for g in kvg['kv_groups'])} KV cache groups: vLLM's "
            '"GPU KV cache size" divides them evenly between the groups, so the concurrency line is the '
            "real capacity."
        )
    if any(getattr(b.mixer, "chunked", False) for b in model.blocks):
        notes.append("Chunked-attention layers are allocated as full attention (vLLM turns the hybrid manager off).")
    if model.is_moe:
        notes.append("MoE activation and CUDA graph terms are rougher estimates than for dense models.")
    if tp > model.num_key_value_heads:
        notes.append(
            f"{model.num_key_value_heads} KV head{'s' if model.num_key_value_heads > 1 else ''} for {tp} GPUs: "
            f"each GPU keeps one, replicated on {tp // model.num_key_value_heads} GPUs, so the KV cache does not "
            "shrink past that."
        )
    plan = {
        "engine": "vllm",
        "version": VLLM_VERSION,
        "model": model.name,
        "machine": mc.name,
        "gpu": gpu_name(mc, tp),
        "tensor_parallel_size": tp,
        "kv_heads_per_gpu": tp_kv_heads(model, tp),
        "kv_heads_replicated": tp > model.num_key_value_heads,
        "allreduce_bytes_per_token": allreduce_bytes_per_token(model, tp),
        "weight_dtype": weight_dtype,
        "gpu_memory_utilization": gpu_memory_utilization,
        "max_model_len": max_model_len,
        "block_size": block_size,
        "kv_cache_dtype": kv_cache_dtype,
        "enforce_eager": enforce_eager,
        "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": max_num_batched_tokens,
        "other_processes_bytes": other_processes_gib * GiB,
        "total_bytes": total,
        "requested_bytes": requested,
        "reserved_bytes": total - requested,
        "weights_bytes": weights,
        "weights": w,
        "peak_activation_bytes": act,
        "non_torch_bytes": non_torch,
        "cudagraph_bytes": graphs,
        "cudagraph_sizes": 0 if enforce_eager else len(cudagraph_capture_sizes(max_num_seqs)),
        "available_kv_bytes": available,
        "profiled": profiled,  # the profiling run happened: available_kv_bytes is what vLLM would log
        "page_size_bytes": page,
        "kv_bytes_per_token": per_token,
        "num_layers": n_layers,
        "effective_block_size": kvg["block_size"],
        "kv_groups": kvg["kv_groups"],
        "mamba_cache_mode": mamba_cache_mode,
        "mamba_state_bytes": kvg["mamba_state_bytes"],
        "num_gpu_blocks": num_blocks,
        "kv_cache_bytes": kv_bytes,
        "unused_bytes": max(available - kv_bytes, 0.0),
        "gpu_kv_cache_tokens": kv_tokens,
        "max_concurrency": concurrency,
        "blocks_per_request": blocks_per_request,
        "needed_bytes": needed,
        "fits": fits,
        "error": error,
        "notes": notes,
    }
    plan["log_lines"] = vllm_log_lines(plan)
    plan["command"] = vllm_command(
        model,
        weight_dtype,
        gpu_memory_utilization,
        max_model_len,
        block_size,
        kv_cache_dtype,
        enforce_eager,
        max_num_seqs,
        max_num_batched_tokens,
        tp,
        machine=mc,
    )
    return plan


def vllm_kv_log_line(plan: dict) -> str:
    return f"GPU KV cache size: {plan['gpu_kv_cache_tokens']:,} tokens"


def vllm_concurrency_log_line(plan: dict) -> str:
    return f"Maximum concurrency for {plan['max_model_len']:,} tokens per request: {plan['max_concurrency']:.2f}x"


def _too_big_advice(weight_dtype: str) -> str:
    """What to do when the checkpoint's weights alone do not fit, given what they already are."""
    if weight_dtype in ("awq", "gptq"):
        return (
            "These are already 4-bit weights: use a smaller model, a GPU with more memory, or split the model "
            "over several GPUs (--tensor-parallel-size)."
        )
    if weight_dtype == "fp8":
        return "Use a 4-bit checkpoint (AWQ, GPTQ), a GPU with more memory, or several GPUs (--tensor-parallel-size)."
    return "Use a quantized checkpoint (AWQ, GPTQ, FP8) or a larger GPU."


def vllm_log_lines(plan: dict) -> list:
    """The start-up lines vLLM would print (INFO prefixes left out)."""
    if plan["error"] and "Free memory" in plan["error"]:
        return [plan["error"]]  # checked before anything loads
    lines = [f"Model loading took {format_gib(plan['weights_bytes'])} GiB memory"]
    if not plan["profiled"]:
        return lines + [plan["error"]]
    lines.append(f"Available KV cache memory: {format_gib(plan['available_kv_bytes'])} GiB")
    if plan["error"]:
        return lines + [plan["error"]]
    return lines + [vllm_kv_log_line(plan), vllm_concurrency_log_line(plan)]


# vLLM's batch defaults by GPU and usage context. vLLM v0.11.0 (vllm/engine/arg_utils.py,
# EngineArgs._set_default_args; the same table moved into EngineArgs.get_batch_defaults in later releases)
# reads the device's total memory and name: a GPU with at least 70 GiB whose name does not contain "a100"
# (H100, H200, MI300X, ...) gets the large defaults; every other GPU, the A100 80GB included ("Setting large
# `max_num_batched_tokens` for A100 reduces throughput, see PR #17885"), the small ones. Where the user gives
# max_num_batched_tokens but not max_num_seqs, max_num_seqs is at most max_num_batched_tokens.
VLLM_LARGE_GPU_BYTES = 70 * GiB
VLLM_USAGE_CONTEXTS = ("openai_api_server", "llm_class")  # `vllm serve` / the offline LLM class
VLLM_BATCH_DEFAULTS = {  # (large GPU?) -> usage context -> (max_num_batched_tokens, max_num_seqs)
    True: {"openai_api_server": (8192, 1024), "llm_class": (16384, 1024)},
    False: {"openai_api_server": (2048, 256), "llm_class": (8192, 256)},
}


def vllm_gpu_defaults(
    machine, usage_context: str = "openai_api_server", max_num_batched_tokens=None, tensor_parallel_size: int = 1
) -> dict:
    """vLLM's max_num_batched_tokens and max_num_seqs on this machine's GPU (VLLM_BATCH_DEFAULTS), for a server
    (usage_context "openai_api_server") or the offline LLM class ("llm_class"); a given max_num_batched_tokens
    is kept and caps max_num_seqs."""
    mc = pm.get_machine(machine)
    tp = _int(tensor_parallel_size, "tensor_parallel_size", 1, 64)
    total = gpu_total_bytes(mc, tp)
    _one_of(usage_context, "usage_context", VLLM_USAGE_CONTEXTS)
    name = gpu_name(mc).lower()
    large = total >= VLLM_LARGE_GPU_BYTES and "a100" not in name
    tokens, seqs = VLLM_BATCH_DEFAULTS[large][usage_context]
    if max_num_batched_tokens is not None:
        tokens = _int(max_num_batched_tokens, "max_num_batched_tokens")
    return {
        "max_num_batched_tokens": tokens,
        "max_num_seqs": min(seqs, tokens),
        "large_gpu": large,
        "rule": (
            f"{gpu_name(mc)}: {gib(total):.0f} GiB"
            + (", at least 70 GiB and not an A100" if large else (", an A100" if "a100" in name else ", under 70 GiB"))
            + f": vLLM's {usage_context} defaults"
        ),
    }


# ---------------------------------------------------------------------------
# 4. SGLang
# ---------------------------------------------------------------------------
# server_args.py picks chunked_prefill_size and cuda_graph_max_bs by GPU memory,
# then (if --mem-fraction-static is not given) reserves, in MiB,
#   512 + 1.5 * max(chunked_prefill_size, 2048) + 2 * cuda_graph_max_bs + tp*pp/8 * 1024
# for activations and CUDA graphs, and sets
#   mem_fraction_static = round((gpu_mem - reserved) / gpu_mem, 3).
# model_runner.py measures free memory before and after loading the weights:
#   rest = free_after_load - free_before_load * (1 - mem_fraction_static)
#        = free_before_load * mem_fraction_static - weights
#   cell_size = num_kv_heads * head_dim * num_layers * 2 * dtype bytes      (one token, all layers)
#   max_total_num_tokens = rest // cell_size
# and max_running_requests = min(clamp(tokens / context_len * 512, 2048, 4096), tokens // 2).
# A request longer than the pool is not refused at start-up: its input is capped at
# min(context_len, max_total_num_tokens) - 1 tokens.

SGLANG_KV_DTYPES = ("auto", "fp8_e4m3", "fp8_e5m2")


def sglang_gpu_defaults(total_bytes: float, tp_size: int = 1) -> dict:
    """chunked_prefill_size and cuda_graph_max_bs by GPU memory (server_args.py _handle_gpu_memory_settings
    buckets; the same in v0.5.3-v0.5.5, where an 80 GB A100 and an H100 share the < 90 GiB bucket)."""
    mem = _total_bytes(total_bytes) / MiB
    _int(tp_size, "tp_size", 1, 1024)
    if mem < 20 * 1024:  # T4, 4080, 4060 Ti
        cps, bs = 2048, 8
    elif mem < 35 * 1024:  # A10, 4090, 5090
        cps, bs = 2048, (24 if tp_size < 4 else 80)
    elif mem < 60 * 1024:  # A100 40GB, L40
        cps, bs = 4096, (32 if tp_size < 4 else 160)
    elif mem < 160 * 1024:  # H100, H200
        cps, bs = 8192, (256 if tp_size < 4 else 512)
    else:  # B200, MI300
        cps, bs = 16384, 512
    return {"chunked_prefill_size": cps, "cuda_graph_max_bs": bs}


def sglang_mem_fraction_static(
    total_bytes: float, chunked_prefill_size=None, cuda_graph_max_bs=None, tp_size: int = 1, pp_size: int = 1
) -> dict:
    """SGLang's default mem_fraction_static and the reserve it leaves (MiB)."""
    d = sglang_gpu_defaults(total_bytes, tp_size)
    _int(pp_size, "pp_size", 1, 1024)
    cps = (
        d["chunked_prefill_size"]
        if chunked_prefill_size is None
        else _int(chunked_prefill_size, "chunked_prefill_size")
    )
    bs = (
        d["cuda_graph_max_bs"]
        if cuda_graph_max_bs is None
        else _int(cuda_graph_max_bs, "cuda_graph_max_bs", 1, MAX_SEQS)
    )
    mem = total_bytes / MiB
    reserved = 512 + max(cps, 2048) * 1.5 + bs * 2 + tp_size * pp_size / 8 * 1024
    if mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return {
        "mem_fraction_static": round((mem - reserved) / mem, 3),
        "reserved_mib": reserved,
        "chunked_prefill_size": cps,
        "cuda_graph_max_bs": bs,
    }


def sglang_cell_size_bytes(model, kv_cache_dtype: str = "auto", tp: int = 1) -> int:
    """One token of K and V on one GPU (SGLang's token pool cell): every block with a cache of its own, each
    with its KV heads and widths (a sliding-window block as a full one; recurrent blocks none)."""
    model = pm.get_model(model)
    _int(tp, "tp", 1, 64)
    specs = _block_specs(model, kv_dtype_bytes(kv_cache_dtype), tp)
    return sum(sp[1] for sp in specs if sp is not None and sp[0] != "mamba")


# Hybrid (Mamba / linear-attention) models: SGLang's KV cache configurator (_handle_max_mamba_cache, sglang
# main 2026) gives the recurrent states mamba_full_memory_ratio / (1 + ratio) of the rest, in whole requests
# (max_mamba_cache_size = that // the state of one request), and the KV pool what is left; with the radix
# cache max_running_requests is at most max_mamba_cache_size // 3 (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO).
SGLANG_MAMBA_FULL_MEMORY_RATIO = 0.9
SGLANG_MAMBA_REQUESTS_RATIO = 3


def sglang_mamba_state_bytes(model, tp: int = 1) -> int:
    """One request's recurrent state over every recurrent block on one GPU (mamba_cache_per_req): the conv
    state in the model dtype, the SSM state in f32 for a gated delta net (mamba_ssm_dtype), else bf16."""
    model = pm.get_model(model)
    _int(tp, "tp", 1, 64)
    return sum(sp[1] for sp in _block_specs(model, 2, tp) if sp is not None and sp[0] == "mamba")


def sglang_plan(
    model,
    machine,
    weight_dtype: str = "bf16",
    mem_fraction_static=None,
    context_length=None,
    kv_cache_dtype: str = "auto",
    disable_cuda_graph: bool = False,
    max_running_requests=None,
    other_processes_gib: float = 0.0,
    tp_size: int = 1,
) -> dict:
    """SGLang's start-up memory plan (per GPU with --tp > 1, as for vllm_plan)."""
    model = pm.get_model(model)
    mc = pm.get_machine(machine)
    tp = check_tp(model, tp_size, "tp_size")
    total = gpu_total_bytes(mc, tp)
    _one_of(weight_dtype, "weight_dtype", WEIGHT_DTYPES)
    if context_length is None:
        context_length = model.max_position_embeddings
    _int(context_length, "context_length")
    _one_of(kv_cache_dtype, "kv_cache_dtype", SGLANG_KV_DTYPES)
    check_bool(disable_cuda_graph, "disable_cuda_graph")
    auto = sglang_mem_fraction_static(total, tp_size=tp)
    mfs = auto["mem_fraction_static"] if mem_fraction_static is None else mem_fraction_static
    check_number(mfs, "mem_fraction_static", 0.0, 1.0, lo_open=True)
    _check(mfs < 1, "mem_fraction_static", f"must be below 1, got {brief(mfs)}")
    if max_running_requests is not None:
        _int(max_running_requests, "max_running_requests", 1, MAX_SEQS)
    check_number(other_processes_gib, "other_processes_gib", 0.0, pm.MAX_DEVICE_GB)
    w = hf_weight_bytes(model, weight_dtype, tp)
    weights = w["total"]
    free_before = total - CUDA_CONTEXT_BYTES - other_processes_gib * GiB
    static = free_before * mfs  # weights + KV pool
    rest = static - weights
    cell = sglang_cell_size_bytes(model, kv_cache_dtype, tp)
    per_req = sglang_mamba_state_bytes(model, tp)
    mamba_reqs = 0
    if per_req and rest > 0:
        mamba_reqs = int(rest * SGLANG_MAMBA_FULL_MEMORY_RATIO / (1 + SGLANG_MAMBA_FULL_MEMORY_RATIO) // per_req)
        rest -= mamba_reqs * per_req
    tokens = int(rest // cell) if rest > 0 and cell else 0
    kv_bytes = tokens * cell
    error = None
    if weights > free_before:
        error = (
            f"torch.OutOfMemoryError while loading the weights: they take {gib(weights):.2f} GiB, "
            f"{gib(free_before):.2f} GiB is free. {_too_big_advice(weight_dtype)}"
        )
    elif per_req and mamba_reqs <= 0:
        error = "RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache."
    elif tokens <= 0:
        error = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    estimated = min(max(int(tokens / context_length * 512), 2048), 4096)
    if max_running_requests is None:
        running = min(estimated, tokens // 2)
    else:
        running = min(max_running_requests, tokens // 2)
    if per_req:
        running = min(running, mamba_reqs // SGLANG_MAMBA_REQUESTS_RATIO)
    max_req_len = min(context_length - 1, tokens - 1) if tokens > 0 else 0
    plan = {
        "engine": "sglang",
        "version": SGLANG_VERSION,
        "model": model.name,
        "machine": mc.name,
        "gpu": gpu_name(mc, tp),
        "tp_size": tp,
        "kv_heads_per_gpu": tp_kv_heads(model, tp),
        "kv_heads_replicated": tp > model.num_key_value_heads,
        "allreduce_bytes_per_token": allreduce_bytes_per_token(model, tp),
        "weight_dtype": weight_dtype,
        "context_length": context_length,
        "kv_cache_dtype": kv_cache_dtype,
        "disable_cuda_graph": disable_cuda_graph,
        "mem_fraction_static": mfs,
        "mem_fraction_static_auto": auto["mem_fraction_static"],
        "mem_fraction_static_given": mem_fraction_static is not None,
        "reserved_mib_heuristic": auto["reserved_mib"],
        "chunked_prefill_size": auto["chunked_prefill_size"],
        "cuda_graph_max_bs": auto["cuda_graph_max_bs"],
        "total_bytes": total,
        "cuda_context_bytes": CUDA_CONTEXT_BYTES,
        "other_processes_bytes": other_processes_gib * GiB,
        "free_before_load_bytes": free_before,
        "static_bytes": static,
        "weights_bytes": weights,
        "weights": w,
        "activation_reserve_bytes": free_before - static,
        "rest_bytes": rest,
        "cell_size_bytes": cell,
        "mamba_cache_per_req_bytes": per_req,
        "max_mamba_cache_size": mamba_reqs,
        "mamba_state_bytes": mamba_reqs * per_req,
        "max_total_num_tokens": tokens,
        "kv_cache_bytes": kv_bytes,
        "unused_bytes": max(rest - kv_bytes, 0.0),
        "max_running_requests": max(running, 0),
        "max_req_len": max_req_len,
        "request_capped": tokens > 0 and tokens < context_length,
        "fits": error is None,
        "error": error,
        "notes": [],
    }
    if any(sp is not None and sp[0] == "sliding" for sp in _block_specs(model, 2, tp)):
        plan["notes"].append("Sliding-window layers are counted as full attention here.")
    if per_req:
        plan["notes"].append(
            f"Recurrent layers: {mamba_reqs:,} request states of {per_req / MiB:.2f} MiB "
            f"(mamba_full_memory_ratio {SGLANG_MAMBA_FULL_MEMORY_RATIO}), beside the KV pool of the "
            "attention layers; max_running_requests is at most a third of them."
        )
    plan["log_lines"] = sglang_log_lines(plan)
    plan["command"] = sglang_command(
        model,
        weight_dtype,
        mem_fraction_static,
        context_length,
        kv_cache_dtype,
        disable_cuda_graph,
        max_running_requests,
        tp,
    )
    return plan


def sglang_log_lines(plan: dict) -> list:
    if plan["error"]:
        return [plan["error"]]
    half = plan["kv_cache_bytes"] / 2 / GiB
    return [
        f"KV Cache is allocated. #tokens: {plan['max_total_num_tokens']}, K size: {half:.2f} GB, V size: {half:.2f} GB",
        f"max_total_num_tokens={plan['max_total_num_tokens']}, "
        f"chunked_prefill_size={plan['chunked_prefill_size']}, "
        f"max_running_requests={plan['max_running_requests']}, context_len={plan['context_length']}",
    ]


# ---------------------------------------------------------------------------
# 5. Command lines
# ---------------------------------------------------------------------------


def hf_repo(model) -> str:
    """The Hugging Face repository of a catalog model (from its config.json link)."""
    model = pm.get_model(model)
    m = re.match(r"https://huggingface\.co/([^/]+/[^/]+)/", model.source or "")
    return m.group(1) if m else re.sub(r"[^A-Za-z0-9._-]+", "-", model.name)


def _checkpoint(model, weight_dtype: str) -> tuple:
    """(model path, extra flags): AWQ/GPTQ need a pre-quantized checkpoint (name illustrative);
    FP8 quantizes the bf16 checkpoint online."""
    _one_of(weight_dtype, "weight_dtype", WEIGHT_DTYPES)
    repo = hf_repo(model)
    if weight_dtype == "awq":
        return repo + "-AWQ", []
    if weight_dtype == "gptq":
        return repo + "-GPTQ-Int4", []
    if weight_dtype == "fp8":
        return repo, ["--quantization", "fp8"]
    if weight_dtype == "fp16":
        return repo, ["--dtype", "float16"]
    return repo, []


def _g(v: float) -> str:
    return f"{v:g}"


def vllm_command(
    model,
    weight_dtype="bf16",
    gpu_memory_utilization=VLLM_GPU_MEMORY_UTILIZATION,
    max_model_len=None,
    block_size=VLLM_BLOCK_SIZE,
    kv_cache_dtype="auto",
    enforce_eager=False,
    max_num_seqs=VLLM_MAX_NUM_SEQS,
    max_num_batched_tokens=None,
    tensor_parallel_size: int = 1,
    machine=None,
) -> str:
    """The `vllm serve` line for these settings: the flags that differ from vLLM's defaults (its batch defaults on
    `machine`'s GPU when one is given, vllm_gpu_defaults; else the small-GPU ones)."""
    model = pm.get_model(model)
    path, extra = _checkpoint(model, weight_dtype)
    seqs_default, tokens_default = VLLM_MAX_NUM_SEQS, VLLM_MAX_NUM_BATCHED_TOKENS
    if machine is not None:
        d = vllm_gpu_defaults(machine)
        seqs_default, tokens_default = d["max_num_seqs"], d["max_num_batched_tokens"]
    check_number(gpu_memory_utilization, "gpu_memory_utilization", 0.0, 1.0, lo_open=True)
    mml = model.max_position_embeddings if max_model_len is None else _int(max_model_len, "max_model_len")
    _check(
        block_size in VLLM_BLOCK_SIZES and not isinstance(block_size, bool),
        "block_size",
        f"must be one of {', '.join(map(str, VLLM_BLOCK_SIZES))}, got {brief(block_size)}",
    )
    _one_of(kv_cache_dtype, "kv_cache_dtype", VLLM_KV_DTYPES)
    check_bool(enforce_eager, "enforce_eager")
    _int(max_num_seqs, "max_num_seqs", 1, MAX_SEQS)
    if max_num_batched_tokens is not None:
        _int(max_num_batched_tokens, "max_num_batched_tokens")
    parts = ["vllm", "serve", path] + extra
    if tensor_parallel_size > 1:
        parts += ["--tensor-parallel-size", str(tensor_parallel_size)]
    parts += ["--gpu-memory-utilization", _g(gpu_memory_utilization), "--max-model-len", str(mml)]
    if block_size != VLLM_BLOCK_SIZE:
        parts += ["--block-size", str(block_size)]
    if kv_cache_dtype != "auto":
        parts += ["--kv-cache-dtype", kv_cache_dtype]
    if enforce_eager:
        parts.append("--enforce-eager")
    if max_num_seqs != seqs_default:
        parts += ["--max-num-seqs", str(max_num_seqs)]
    if max_num_batched_tokens not in (None, tokens_default):
        parts += ["--max-num-batched-tokens", str(max_num_batched_tokens)]
    return " ".join(parts)


def sglang_command(
    model,
    weight_dtype="bf16",
    mem_fraction_static=None,
    context_length=None,
    kv_cache_dtype="auto",
    disable_cuda_graph=False,
    max_running_requests=None,
    tp_size: int = 1,
) -> str:
    model = pm.get_model(model)
    path, extra = _checkpoint(model, weight_dtype)
    ctx = model.max_position_embeddings if context_length is None else _int(context_length, "context_length")
    if mem_fraction_static is not None:
        check_number(mem_fraction_static, "mem_fraction_static", 0.0, 1.0, lo_open=True)
    _one_of(kv_cache_dtype, "kv_cache_dtype", SGLANG_KV_DTYPES)
    check_bool(disable_cuda_graph, "disable_cuda_graph")
    if max_running_requests is not None:
        _int(max_running_requests, "max_running_requests", 1, MAX_SEQS)
    parts = ["python", "-m", "sglang.launch_server", "--model-path", path] + extra
    if tp_size > 1:
        parts += ["--tp", str(tp_size)]
    parts += ["--context-length", str(ctx)]
    if mem_fraction_static is not None:
        parts += ["--mem-fraction-static", _g(mem_fraction_static)]
    if kv_cache_dtype != "auto":
        parts += ["--kv-cache-dtype", kv_cache_dtype]
    if disable_cuda_graph:
        parts.append("--disable-cuda-graph")
    if max_running_requests is not None:
        parts += ["--max-running-requests", str(max_running_requests)]
    return " ".join(parts)
