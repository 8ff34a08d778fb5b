"""arch_config: a Hugging Face config.json -> blocks.BlockModel, for the architectures llama.cpp runs today.

Each reader names the llama.cpp code it mirrors (ggml-org/llama.cpp: src/models/<arch>.cpp load_arch_hparams /
load_arch_tensors, src/llama-model.cpp, src/llama-hparams.cpp; data/architectures/README.md has the details).
A model_type without a reader is read generically from the standard keys, with the warning
GENERIC_WARNING: a warning, never an error. Bad values raise ValueError naming the config.json key.

This module imports enginelab.checks and enginelab.blocks only.
"""

from __future__ import annotations

from dataclasses import replace

from .blocks import (
    MAX_CONTEXT,
    MAX_CONV_KERNEL,
    MAX_EXPERTS,
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_HIDDEN,
    MAX_INNER,
    MAX_INTERMEDIATE,
    MAX_LAYERS,
    MAX_LORA_RANK,
    MAX_STATE,
    MAX_VOCAB,
    Attention,
    Block,
    BlockModel,
    DenseFFN,
    Globals,
    MoEFFN,
    NoFFN,
    NoMixer,
    Recurrent,
    ShortConv,
)
from .checks import brief, check, is_int

GENERIC_WARNING = "architecture not verified: sizes approximate"

# Every config.json key a reader here reads (a config kept to these, and its text_config's, reads the same)
CONFIG_KEYS = (
    "attention_bias",
    "attention_chunk_size",
    "attention_k_eq_v",
    "attn_output_gate",
    "block_auto_adjust_ff_dim",
    "block_ff_dim",
    "block_ffn_dim_multiplier",
    "block_multiple_of",
    "conv_L_cache",
    "conv_kernel",
    "d_model",
    "enable_moe_block",
    "experts_per_token",
    "first_k_dense_replace",
    "full_attention_interval",
    "global_head_dim",
    "head_dim",
    "hidden_size",
    "hidden_size_per_layer_input",
    "hybrid_override_pattern",
    "index_head_dim",
    "index_n_heads",
    "interleave_moe_layer_step",
    "intermediate_size",
    "intermediate_size_mlp",
    "kv_lora_rank",
    "layer_types",
    "layers_block_type",
    "linear_attn_config",
    "linear_conv_kernel_dim",
    "linear_key_head_dim",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_value_head_dim",
    "mamba_d_conv",
    "mamba_d_head",
    "mamba_d_state",
    "mamba_expand",
    "mamba_head_dim",
    "mamba_n_groups",
    "mamba_n_heads",
    "mamba_num_heads",
    "max_position_embeddings",
    "model_type",
    "moe_intermediate_size",
    "moe_k",
    "moe_layer_freq",
    "moe_layer_interval",
    "moe_layer_start_index",
    "moe_num_experts",
    "moe_num_shared_experts",
    "moe_shared_expert_intermediate_size",
    "n_embd",
    "n_groups",
    "n_head",
    "n_layer",
    "n_routed_experts",
    "n_shared_experts",
    "num_attention_heads",
    "num_dense_layers",
    "num_experts",
    "num_experts_per_tok",
    "num_experts_per_token",
    "num_global_key_value_heads",
    "num_hidden_layers",
    "num_key_value_heads",
    "num_kv_shared_layers",
    "num_layers",
    "num_local_experts",
    "num_shared_experts",
    "q_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "rope_scaling",
    "shared_expert_intermediate_size",
    "shared_intermediate_size",
    "sliding_window",
    "ssm_state_size",
    "tie_word_embeddings",
    "top_k",
    "top_k_experts",
    "topk_method",
    "use_double_wide_mlp",
    "v_head_dim",
    "vocab_size",
)

# config.json key -> its upper bound (every integer read is checked against one)
_BOUNDS = {
    "num_hidden_layers": MAX_LAYERS,
    "hidden_size": MAX_HIDDEN,
    "vocab_size": MAX_VOCAB,
    "max_position_embeddings": MAX_CONTEXT,
    "sliding_window": MAX_CONTEXT,
    "attention_chunk_size": MAX_CONTEXT,
}


def _bound(key: str) -> int:
    if key in _BOUNDS:
        return _BOUNDS[key]
    if "head_dim" in key or key.endswith("_d_head") or key == "head_dim":
        return MAX_HEAD_DIM
    if "heads" in key or key.endswith("n_heads") or key.endswith("_groups") or key == "n_groups":
        return MAX_HEADS
    if "expert" in key and "size" not in key and "intermediate" not in key:
        return MAX_EXPERTS
    if "lora_rank" in key:
        return MAX_LORA_RANK
    if "conv" in key or "l_cache" in key.lower():
        return MAX_CONV_KERNEL
    if "state" in key:
        return MAX_STATE
    if "layer" in key or "interval" in key or "step" in key or "index" in key:
        return MAX_LAYERS
    return MAX_INTERMEDIATE


class _Cfg:
    """config.json's language-model keys (a multimodal wrapper's text_config merged under its top level)."""

    def __init__(self, config: dict):
        check(isinstance(config, dict), "config", f"must be a JSON object (dict), got {brief(config)}")
        tc = config.get("text_config")
        if tc is not None:
            check(isinstance(tc, dict), "text_config", f"must be a JSON object, got {brief(tc)}")
            # the text model's keys; the wrapper's own keys fill in what it lacks
            self.d = {**{k: v for k, v in config.items() if k != "text_config"}, **tc}
            self.wrapper = config.get("model_type")
        else:
            self.d = config
            self.wrapper = None

    def has(self, key: str) -> bool:
        return self.d.get(key) is not None

    def int(self, key: str, default=None, lo: int = 1, hi: int | None = None) -> int:
        v = self.d.get(key)
        if v is None:
            v = default
        check(v is not None, key, "missing from config.json")
        hi = _bound(key) if hi is None else hi
        check(is_int(v) and lo <= v <= hi, key, f"must be an integer from {lo:,} to {hi:,}, got {brief(v)}")
        return int(v)

    def first_int(self, keys: tuple, default=None, lo: int = 1) -> int:
        for k in keys:
            if self.has(k):
                return self.int(k, lo=lo)
        check(default is not None, keys[0], "missing from config.json")
        return self.int(keys[0], default, lo=lo)

    def bool(self, key: str, default: bool) -> bool:
        v = self.d.get(key)
        if v is None:
            return default
        check(isinstance(v, bool), key, f"must be true or false, got {brief(v)}")
        return v

    def list(self, key: str, n: int) -> list | None:
        v = self.d.get(key)
        if v is None:
            return None
        check(
            isinstance(v, list) and len(v) == n, key, f"must be a list of {n:,} entries (one per layer), got {brief(v)}"
        )
        return v


class _Ctx:
    """What a reader gathers besides blocks: notes for the explain box."""

    def __init__(self):
        self.unknown: list = []
        self.warnings: list = []


def _head_dim(c: _Cfg, heads: int, hidden: int, key: str = "head_dim") -> int:
    if c.has(key):
        return c.int(key, hi=MAX_HEAD_DIM)
    check(hidden % heads == 0, key, "missing, and hidden_size is not a multiple of num_attention_heads")
    return hidden // heads


def _kv_heads(c: _Cfg, heads: int, key: str = "num_key_value_heads") -> int:
    kv = c.int(key, heads, hi=MAX_HEADS)
    check(heads % kv == 0, key, f"must divide num_attention_heads ({heads:,}), got {kv:,}")
    return kv


def _globals(c: _Cfg, tied_default: bool, per_layer_width: int = 0) -> Globals:
    return Globals(
        vocab=c.int("vocab_size"),
        n_embd=c.int("hidden_size"),
        tied_output=c.bool("tie_word_embeddings", tied_default),
        per_layer_width=per_layer_width,
    )


def _layer_types(c: _Cfg, n: int) -> list | None:
    lt = c.list("layer_types", n)
    if lt is not None:
        for i, x in enumerate(lt):
            check(isinstance(x, str) and len(x) <= 64, "layer_types", f"entry {i} must be a string, got {brief(x)}")
    return lt


def _window(c: _Cfg, maxpos: int, default=None, key: str = "sliding_window") -> int:
    w = c.int(key, default, lo=0)
    return min(w, maxpos) if w else 0


# ---------------------------------------------------------------------------
# Dense transformers: llama, mistral, qwen2/3, smollm3, seed_oss, glm4, olmo3, ministral, phi3, gemma2/3 ...
# ---------------------------------------------------------------------------


def _dense(
    c: _Cfg,
    ctx: _Ctx,
    *,
    tied=False,
    qk_norm=False,
    swa_default=(),
    window_default=None,
    bias=False,
    fused=False,
    post_norms=False,
    fused_gate_up=False,
) -> BlockModel:
    """A stack of attention + dense FFN blocks; sliding-window blocks where layer_types (or the architecture's
    own layout, `swa_default`: one bool per position of a repeating pattern) says so. `bias`: q/k/v biases
    (the default of attention_bias); `fused`: one attn_qkv and one ffn_up for gate and up (Phi-3);
    `post_norms`: Gemma 2/3's norms after the mixer and the FFN; `fused_gate_up`: GLM-4-0414's ffn_up."""
    n = c.int("num_hidden_layers")
    hidden = c.int("hidden_size")
    heads = c.int("num_attention_heads", hi=MAX_HEADS)
    kv = _kv_heads(c, heads)
    hd = _head_dim(c, heads, hidden)
    maxpos = c.int("max_position_embeddings", 4096, hi=MAX_CONTEXT)
    ff = c.int("intermediate_size")
    swa = _swa_layers(c, n, swa_default)
    win = _window(c, maxpos, window_default) if any(swa) else 0
    qkv_bias = c.bool("attention_bias", bias)
    ffn = DenseFFN(ff, fused_gate_up=fused or fused_gate_up)
    blocks = []
    for il in range(n):
        att = Attention(
            heads, kv, hd, hd, window=win if swa[il] else 0, qk_norm=qk_norm, fused_qkv=fused, qkv_bias=qkv_bias
        )
        blocks.append(Block(att, ffn, post_norms=post_norms))
    return BlockModel(_globals(c, tied), tuple(blocks))


def _swa_layers(c: _Cfg, n: int, default: tuple) -> list:
    """True where a layer uses the sliding window: layer_types, else `default` repeated (llama.cpp's
    set_swa_pattern), else none."""
    lt = _layer_types(c, n)
    if lt is not None:
        return [x in ("sliding_attention", "chunked_attention") for x in lt]
    if default:
        return [default[il % len(default)] for il in range(n)]
    return [False] * n


# ---------------------------------------------------------------------------
# The 2025-2026 architectures
# ---------------------------------------------------------------------------


def _qwen3_5(c: _Cfg, ctx: _Ctx, moe: bool, next_: bool = False) -> BlockModel:
    """qwen3_5 / qwen3_5_moe (and qwen3_next): src/models/qwen35.cpp load_arch_hparams: a layer is recurrent
    unless (il + 1) % full_attention_interval == 0 (or per layer_types); gated delta net with ssm_d_conv =
    linear_conv_kernel_dim, ssm_d_inner = linear_value_head_dim x linear_num_value_heads, ssm_d_state =
    linear_key_head_dim, ssm_n_group = linear_num_key_heads, ssm_dt_rank = linear_num_value_heads; attention
    blocks have a gated query (attn_q is 2 x n_head x head_dim) and q/k norms. Qwen3-Next (`next_`,
    src/models/qwen3next.cpp) fuses beta and alpha into ssm_ba, gates its shared expert (ffn_gate_inp_shexp)
    and names the pre-FFN norm post_attention_norm."""
    n = c.int("num_hidden_layers")
    hidden = c.int("hidden_size")
    heads = c.int("num_attention_heads", hi=MAX_HEADS)
    kv = _kv_heads(c, heads)
    hd = _head_dim(c, heads, hidden)
    lt = _layer_types(c, n)
    if lt is not None:
        recurrent = [x == "linear_attention" for x in lt]
    else:
        interval = c.int("full_attention_interval", 4, hi=n)
        recurrent = [(il + 1) % interval != 0 for il in range(n)]
    kh, vh = c.int("linear_key_head_dim", hi=MAX_STATE), c.int("linear_value_head_dim", hi=MAX_STATE)
    nk, nv = c.int("linear_num_key_heads", hi=MAX_HEADS), c.int("linear_num_value_heads", hi=MAX_HEADS)
    check(nv % nk == 0, "linear_num_value_heads", f"must be a multiple of linear_num_key_heads ({nk:,}), got {nv:,}")
    rec = Recurrent("gated_delta_net", c.int("linear_conv_kernel_dim"), vh * nv, kh, nk, nv, fused_ba=next_)
    att = Attention(heads, kv, hd, hd, q_gate=c.bool("attn_output_gate", True), qk_norm=True)
    if moe:
        sw = c.int("shared_expert_intermediate_size", 0, lo=0)
        ffn = MoEFFN(
            c.int("num_experts"),
            c.int("num_experts_per_tok"),
            c.int("moe_intermediate_size"),
            n_shared=1 if sw else 0,
            shared_width=sw,
            shared_gate=sw > 0,  # shared_expert_gate: Qwen3.5-MoE keeps Qwen3-Next's (ffn_gate_inp_shexp)
        )
    else:
        ffn = DenseFFN(c.int("intermediate_size"))
    norm = "post_attention_norm" if next_ else "ffn_norm"
    blocks = tuple(Block(rec if recurrent[il] else att, ffn, ffn_norm_name=norm) for il in range(n))
    return BlockModel(_globals(c, False), blocks)


def _gemma4(c: _Cfg, ctx: _Ctx) -> BlockModel:
    """gemma4 (Gemma4ForConditionalGeneration's text_config): src/models/gemma4.cpp load_arch_hparams /
    load_arch_tensors. Sliding blocks: num_key_value_heads x head_dim (attention.key_length_swa); global
    blocks: num_global_key_value_heads x global_head_dim (attention.key_length), with V from K's projection
    when attention_k_eq_v. The last num_kv_shared_layers blocks keep no cache (n_layer_kv_from_start) and
    read the last earlier block of their kind's; their files still hold their own k_proj/v_proj (the
    checkpoint keeps them; llama.cpp loads them, TENSOR_NOT_REQUIRED, and never reads them). Per-layer
    embeddings of hidden_size_per_layer_input per block (E-models). Every block has a norm after the
    attention and after the FFN and a layer_output_scale; the converter adds a rope_freqs tensor of
    global_head_dim / 2 factors (conversion/gemma.py generate_extra_tensors). MoE blocks (enable_moe_block)
    run the dense FFN beside the experts, with their own norms and scales; KV-shared blocks get a double-wide
    FFN when use_double_wide_mlp."""
    n = c.int("num_hidden_layers")
    c.int("hidden_size")
    heads = c.int("num_attention_heads", hi=MAX_HEADS)
    kv = _kv_heads(c, heads)
    gkv = _kv_heads(c, heads, "num_global_key_value_heads") if c.has("num_global_key_value_heads") else kv
    hd = c.int("head_dim", 256, hi=MAX_HEAD_DIM)
    ghd = c.int("global_head_dim", hd, hi=MAX_HEAD_DIM)
    maxpos = c.int("max_position_embeddings", 131072, hi=MAX_CONTEXT)
    swa = _swa_layers(c, n, (True,) * 5 + (False,))
    win = _window(c, maxpos, 1024)
    k_eq_v = c.bool("attention_k_eq_v", False)
    n_shared = c.int("num_kv_shared_layers", 0, lo=0, hi=n - 1)
    first_shared = n - n_shared
    ff = c.int("intermediate_size")
    double = c.bool("use_double_wide_mlp", False)
    moe = c.bool("enable_moe_block", False)
    if moe:
        n_exp = c.first_int(("num_experts", "num_local_experts"))
        used = c.first_int(("top_k_experts", "num_experts_per_tok"))
        exp_w = c.int("moe_intermediate_size")
    ple = c.int("hidden_size_per_layer_input", 0, lo=0, hi=MAX_HIDDEN)
    blocks = []
    last_of_kind = {}
    for il in range(n):
        s = swa[il]
        shared_from = -1
        if il >= first_shared:
            check(s in last_of_kind, "num_kv_shared_layers", f"block {il} has no earlier block of its kind to share")
            shared_from = last_of_kind[s]
        else:
            last_of_kind[s] = il
        unused = shared_from >= 0
        if s:
            att = Attention(
                heads, kv, hd, hd, window=win, kv_shared_from=shared_from, qk_norm=True, unused_kv_proj=unused
            )
        else:
            att = Attention(
                heads, gkv, ghd, ghd, kv_shared_from=shared_from, v_from_k=k_eq_v, qk_norm=True, unused_kv_proj=unused
            )
        width = ff * 2 if double and il >= first_shared else ff
        if moe:
            ffn = MoEFFN(n_exp, used, exp_w, dense_width=width, merged_gate_up=True, branch_norms=True)
        else:
            ffn = DenseFFN(width)
        blocks.append(Block(att, ffn, post_norms=True, out_scale=True))
    g = _globals(c, True, ple)
    return BlockModel(replace(g, rope_freqs=ghd // 2), tuple(blocks))


def _mamba2(c: _Cfg, heads_key, head_dim_key, groups_key, state_key, conv_key, expand_key=None) -> Recurrent:
    nh = c.int(heads_key, hi=MAX_HEADS)
    if c.has(head_dim_key) or expand_key is None:
        d_inner = nh * c.int(head_dim_key, hi=MAX_HEAD_DIM)
    else:
        d_inner = c.int(expand_key, hi=64) * c.int("hidden_size")
    check(d_inner <= MAX_INNER, head_dim_key, f"gives an inner size of {d_inner:,}, above {MAX_INNER:,}")
    return Recurrent("mamba2", c.int(conv_key), d_inner, c.int(state_key), c.int(groups_key, hi=MAX_HEADS), nh)


def _nemotron_h(c: _Cfg, ctx: _Ctx) -> BlockModel:
    """nemotron_h (Nemotron-H, Nemotron 3 Nano): llama-model.cpp load_hparams (LLM_ARCH_NEMOTRON_H[_MOE]): a
    block is Mamba-2 when its head_count_kv and feed_forward_length are both 0, attention when only its
    feed_forward_length is, else an FFN alone: hybrid_override_pattern's M, *, - and E (MoE). The FFNs are
    ReLU^2 without a gate (src/models/nemotron-h.cpp build_ffn_layer), MoE with one ungated shared expert."""
    n = c.int("num_hidden_layers")
    pat = c.d.get("hybrid_override_pattern")
    kinds = c.d.get("layers_block_type")
    if pat is None and isinstance(kinds, list):  # Nemotron 3.5 names its blocks in a list
        names = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}
        check(
            len(kinds) == n and all(isinstance(k, str) and k in names for k in kinds),
            "layers_block_type",
            f"must list {n:,} of mamba / attention / mlp / moe, got {brief(kinds)}",
        )
        pat = "".join(names[k] for k in kinds)
    check(
        isinstance(pat, str) and len(pat) == n and set(pat) <= set("M*-E"),
        "hybrid_override_pattern",
        f"must be a string of {n:,} characters from M, *, - and E, got {brief(pat)}",
    )
    hidden = c.int("hidden_size")
    heads = c.int("num_attention_heads", hi=MAX_HEADS)
    kv = _kv_heads(c, heads)
    hd = c.int("head_dim", None, hi=MAX_HEAD_DIM) if c.has("head_dim") else _head_dim(c, heads, hidden)
    rec = None
    if "M" in pat:
        rec = _mamba2(c, "mamba_num_heads", "mamba_head_dim", "n_groups", "ssm_state_size", "conv_kernel")
    mlp = DenseFFN(c.int("intermediate_size"), gated=False) if "-" in pat else None
    moe = None
    if "E" in pat:
        sw = c.int("moe_shared_expert_intermediate_size", 0, lo=0)
        moe = MoEFFN(
            c.first_int(("n_routed_experts", "num_experts")),
            c.int("num_experts_per_tok"),
            c.int("moe_intermediate_size"),
            n_shared=c.int("n_shared_experts", 1 if sw else 0, lo=0) if sw else 0,
            shared_width=sw,
            gated=False,
        )
    blocks = []
    for ch in pat:
        if ch == "M":
            blocks.append(Block(rec, NoFFN()))
        elif ch == "*":
            blocks.append(Block(Attention(heads, kv, hd, hd), NoFFN()))
        elif ch == "-":
            blocks.append(Block(NoMixer(), mlp))
        else:
            blocks.append(Block(NoMixer(), moe))
    return BlockModel(_globals(c, False), tuple(blocks))


def _granite_hybrid(c: _Cfg, ctx: _Ctx) -> BlockModel:
    """granitemoehybrid (Granite 4.0): llama-model.cpp load_hparams (LLM_ARCH_GRANITE_HYBRID): Mamba-2 blocks
    where head_count_kv is 0 (layer_types "mamba"), attention blocks otherwise; every block has an FFN: the
    shared MLP (shared_intermediate_size) alone, or beside num_local_experts experts (as the shared expert)."""
    n = c.int("num_hidden_layers")
    lt = _layer_types(c, n) or c.list("layers_block_type", n)
    check(lt is not None, "layer_types", "missing from config.json (one of 'mamba' / 'attention' per layer)")
    hidden = c.int("hidden_size")
    heads = c.int("num_attention_heads", hi=MAX_HEADS)
    kv = _kv_heads(c, heads)
    hd = _head_dim(c, heads, hidden)
    rec = None
    if "mamba" in lt:
        rec = _mamba2(
            c, "mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state", "mamba_d_conv", "mamba_expand"
        )
    shared = c.int("shared_intermediate_size", 0, lo=0)
    n_exp = c.int("num_local_experts", 0, lo=0)
    if n_exp:
        ffn = MoEFFN(
            n_exp,
            c.int("num_experts_per_tok"),
            c.int("intermediate_size"),
            n_shared=1 if shared else 0,
            shared_width=shared,
        )
    else:
        ffn = DenseFFN(shared or c.int("intermediate_size"))
    att = Attention(heads, kv, hd, hd)
    blocks = tuple(Block(rec if x == "mamba" else att, ffn) for x in lt)
    return BlockModel(_globals(c, False), blocks)


def _lfm2_ff(c: _Cfg) -> int:
    """LFM2's FFN width as the converter and Lfm2MLP compute it: block_ff_dim, x 2/3 when
    block_auto_adjust_ff_dim, x block_ffn_dim_multiplier, rounded up to block_multiple_of."""
    ff = c.first_int(("block_ff_dim", "intermediate_size"))
    if c.bool("block_auto_adjust_ff_dim", False):
        ff = int(2 * ff / 3)
        mult = c.d.get("block_ffn_dim_multiplier")
        if mult is not None:
            check(
                isinstance(mult, (int, float)) and not isinstance(mult, bool) and 0 < mult <= 64,
                "block_ffn_dim_multiplier",
                f"must be a number from 0 to 64, got {brief(mult)}",
            )
            ff = int(mult * ff)
        m = c.int("block_multiple_of", 256)
        ff = m * ((ff + m - 1) // m)
    check(1 <= ff <= MAX_INTERMEDIATE, "block_ff_dim", f"gives an FFN width of {ff:,}")
    return ff


def _lfm2(c: _Cfg, ctx: _Ctx, moe: bool) -> BlockModel:
    """lfm2 / lfm2_moe: src/models/lfm2.cpp: layer_types "conv" blocks are short convolutions of
    conv_L_cache taps over n_embd (n_embd_r = n_embd x (l_cache - 1)), the others attention; LFM2-MoE's first
    num_dense_layers blocks are dense, then experts (n_layer_dense_lead)."""
    n = c.int("num_hidden_layers")
    lt = _layer_types(c, n)
    check(lt is not None, "layer_types", "missing from config.json ('conv' / 'full_attention' per layer)")
    hidden = c.int("hidden_size")
    heads = c.int("num_attention_heads", hi=MAX_HEADS)
    kv = _kv_heads(c, heads)
    hd = _head_dim(c, heads, hidden)
    conv = ShortConv(c.int("conv_L_cache", 3, lo=2), hidden)
    att = Attention(heads, kv, hd, hd, qk_norm=True)
    if moe:
        dense = DenseFFN(c.int("intermediate_size"))
        n_dense = c.int("num_dense_layers", 0, lo=0, hi=n)
        experts = MoEFFN(c.int("num_experts"), c.int("num_experts_per_tok"), c.int("moe_intermediate_size"))
        ffns = [dense if il < n_dense else experts for il in range(n)]
    else:
        ffns = [DenseFFN(_lfm2_ff(c))] * n
    blocks = tuple(Block(conv if x == "conv" else att, ffns[il]) for il, x in enumerate(lt))
    return BlockModel(_globals(c, True), blocks)


def _mla(c: _Cfg, heads: int, indexer: bool) -> Attention:
    rope = c.int("qk_rope_head_dim", hi=MAX_HEAD_DIM)
    nope = c.int("qk_nope_head_dim", hi=MAX_HEAD_DIM)
    ni = di = 0
    if indexer:
        di = c.int("index_head_dim", hi=MAX_HEAD_DIM)
        ni = c.int("index_n_heads", hi=MAX_HEADS)
    return Attention(
        heads,
        1,
        nope + rope,
        c.int("v_head_dim", hi=MAX_HEAD_DIM),
        kv_lora_rank=c.int("kv_lora_rank"),
        rope_dim=rope,
        q_lora_rank=c.int("q_lora_rank", 0, lo=0),
        indexer_head_dim=di,
        n_indexer_head=ni,
    )


def _noaux_tc(c: _Cfg) -> bool:
    """DeepSeek V3's router (topk_method "noaux_tc") keeps a score-correction bias, exp_probs_b."""
    tm = c.d.get("topk_method")
    check(tm is None or isinstance(tm, str), "topk_method", f"must be a string, got {brief(tm)}")
    return tm == "noaux_tc"


def _deepseek(c: _Cfg, ctx: _Ctx, indexer: bool) -> BlockModel:
    """deepseek_v2/v3, kimi_k2, deepseek_v32 and glm_moe_dsa: MLA (src/models/deepseek2.cpp, deepseek32.cpp,
    glm-dsa.cpp): the cache holds kv_lora_rank + qk_rope_head_dim per token (one K, no V); the first
    first_k_dense_replace blocks are dense (n_layer_dense_lead), the rest n_routed_experts experts with
    n_shared_experts shared ones of moe_intermediate_size each. DeepSeek V3.2 and GLM-5 add the lightning
    indexer (index_head_dim, index_n_heads): one more cached key of index_head_dim per token. The MTP blocks
    (num_nextn_predict_layers) are not counted: llama.cpp does not run them in the main pass."""
    n = c.int("num_hidden_layers")
    heads = c.int("num_attention_heads", hi=MAX_HEADS)
    att = _mla(c, heads, indexer)
    moe_w = c.int("moe_intermediate_size")
    n_sh = c.int("n_shared_experts", 0, lo=0)
    experts = MoEFFN(
        c.int("n_routed_experts"),
        c.int("num_experts_per_tok"),
        moe_w,
        n_shared=n_sh,
        shared_width=moe_w * n_sh,
        routing_bias=_noaux_tc(c),
    )
    dense = DenseFFN(c.int("intermediate_size"))
    k = c.int("first_k_dense_replace", 0, lo=0, hi=n)
    step = c.int("moe_layer_freq", 1, hi=n)
    blocks = tuple(Block(att, experts if il >= k and il % step == 0 else dense) for il in range(n))
    return BlockModel(_globals(c, False), blocks)


def _kimi_linear(c: _Cfg, ctx: _Ctx) -> BlockModel:
    """kimi_linear (Kimi Linear 48B-A3B): src/models/kimi-linear.cpp: KDA blocks (linear_attn_config's
    kda_layers, 1-based) are recurrent with head_dim = linear_attn_config.head_dim, n_head =
    linear_attn_config.num_heads, d_conv = short_conv_kernel_size (llama_hparams::n_embd_r/n_embd_s's KDA
    branch); the others MLA; first_k_dense_replace dense blocks, then experts with shared ones."""
    n = c.int("num_hidden_layers")
    la = c.d.get("linear_attn_config")
    check(isinstance(la, dict), "linear_attn_config", f"must be a JSON object, got {brief(la)}")
    lc = _Cfg(la)
    kda = la.get("kda_layers")
    check(
        isinstance(kda, list) and len(kda) <= n and all(is_int(x) and 1 <= x <= n for x in kda),
        "linear_attn_config.kda_layers",
        f"must list layer numbers from 1 to {n:,}, got {brief(kda)}",
    )
    kda_set = {x - 1 for x in kda}
    hdim = lc.int("head_dim", hi=MAX_STATE)
    nh = lc.int("num_heads", hi=MAX_HEADS)
    rec = Recurrent("kda", lc.int("short_conv_kernel_size", 4), nh * hdim, hdim, nh, nh)
    heads = c.int("num_attention_heads", hi=MAX_HEADS)
    att = _mla(c, heads, False)
    moe_w = c.int("moe_intermediate_size")
    n_sh = c.first_int(("num_shared_experts", "n_shared_experts"), 0, lo=0)
    experts = MoEFFN(
        c.first_int(("num_experts", "n_routed_experts")),
        c.first_int(("num_experts_per_token", "num_experts_per_tok")),
        moe_w,
        n_shared=n_sh,
        shared_width=moe_w * n_sh,
    )
    dense = DenseFFN(c.int("intermediate_size"))
    k = c.int("first_k_dense_replace", 0, lo=0, hi=n)
    blocks = tuple(Block(rec if il in kda_set else att, experts if il >= k else dense) for il in range(n))
    return BlockModel(_globals(c, False), blocks)


def _moe_stack(
    c: _Cfg,
    ctx: _Ctx,
    *,
    experts_key,
    used_key,
    width_key,
    shared_key=None,
    qk_norm=False,
    tied=False,
    swa_default=(),
    window_default=None,
    dense_lead_key=None,
    step_key=None,
    bias=False,
    gpt_oss=False,
    routing_bias=False,
    post_attention_norm=False,
) -> BlockModel:
    """Attention + experts in every block (MiniMax M2, Qwen3-MoE, Mixtral, gpt-oss, GLM-4.5, ERNIE 4.5 MoE...),
    with an optional dense lead (dense_lead_key) and MoE every step_key-th block. `bias`: the default of
    attention_bias; `gpt_oss`: attention sinks, attn_output, router and expert biases (llama-model.cpp
    LLM_ARCH_OPENAI_MOE); `routing_bias`: exp_probs_b; `post_attention_norm`: the pre-FFN norm's name."""
    n = c.int("num_hidden_layers")
    hidden = c.int("hidden_size")
    heads = c.int("num_attention_heads", hi=MAX_HEADS)
    kv = _kv_heads(c, heads)
    hd = _head_dim(c, heads, hidden)
    maxpos = c.int("max_position_embeddings", 4096, hi=MAX_CONTEXT)
    swa = _swa_layers(c, n, swa_default)
    win = _window(c, maxpos, window_default) if any(swa) else 0
    w = c.first_int(width_key if isinstance(width_key, tuple) else (width_key,))
    n_sh, sw = 0, 0
    if shared_key is not None:
        n_sh = c.int(shared_key, 0, lo=0)
        sw = w * n_sh
    experts = MoEFFN(
        c.first_int(experts_key if isinstance(experts_key, tuple) else (experts_key,)),
        c.first_int(used_key if isinstance(used_key, tuple) else (used_key,)),
        w,
        n_shared=n_sh,
        shared_width=sw,
        router_bias=gpt_oss,
        expert_bias=gpt_oss,
        routing_bias=routing_bias,
        mxfp4=gpt_oss,
    )
    lead = c.int(dense_lead_key, 0, lo=0, hi=n) if dense_lead_key else 0
    step = c.int(step_key, 1, hi=n) if step_key else 1
    dense = DenseFFN(c.int("intermediate_size")) if lead or step > 1 else None
    qkv_bias = c.bool("attention_bias", bias)
    norm = "post_attention_norm" if post_attention_norm else "ffn_norm"
    blocks = []
    for il in range(n):
        moe = il >= lead and (il + 1) % step == 0 if step > 1 else il >= lead
        att = Attention(
            heads,
            kv,
            hd,
            hd,
            window=win if swa[il] else 0,
            qk_norm=qk_norm,
            qkv_bias=qkv_bias,
            out_bias=gpt_oss and qkv_bias,
            sinks=gpt_oss,
        )
        blocks.append(Block(att, experts if moe else dense, ffn_norm_name=norm))
    return BlockModel(_globals(c, tied), tuple(blocks))


def _ernie_moe_width(c: _Cfg) -> None:
    # ERNIE 4.5 VL lists [text, vision] widths and expert counts; the text model's come first
    for key in ("moe_intermediate_size", "moe_num_experts"):
        v = c.d.get(key)
        if isinstance(v, list):
            check(v and is_int(v[0]), key, f"must be an integer or a list of them, got {brief(v)}")
            c.d = {**c.d, key: v[0]}


def _ernie4_5_moe(c: _Cfg, ctx: _Ctx) -> BlockModel:
    """ernie4_5_moe: src/models/ernie4-5-moe.cpp / llama-model.cpp (LLM_ARCH_ERNIE4_5_MOE): experts from
    moe_layer_start_index on, every moe_layer_interval-th block ((il + 1) % n_moe_layer_step == 0), with
    moe_num_shared_experts shared experts of moe_intermediate_size each; dense blocks of intermediate_size."""
    _ernie_moe_width(c)
    return _moe_stack(
        c,
        ctx,
        experts_key="moe_num_experts",
        used_key="moe_k",
        width_key="moe_intermediate_size",
        shared_key="moe_num_shared_experts",
        tied=True,
        dense_lead_key="moe_layer_start_index",
        step_key="moe_layer_interval",
    )


def _llama4(c: _Cfg, ctx: _Ctx) -> BlockModel:
    """llama4: llama-model.cpp (LLM_ARCH_LLAMA4): chunked attention (attention_chunk_size, 3 chunked blocks
    then a global one); experts every interleave_moe_layer_step-th block with one shared expert as wide as
    the others (intermediate_size), dense blocks of intermediate_size_mlp."""
    n = c.int("num_hidden_layers")
    hidden = c.int("hidden_size")
    heads = c.int("num_attention_heads", hi=MAX_HEADS)
    kv = _kv_heads(c, heads)
    hd = _head_dim(c, heads, hidden)
    maxpos = c.int("max_position_embeddings", 4096, hi=MAX_CONTEXT)
    chunk = _window(c, maxpos, 0, "attention_chunk_size")
    chunked = _swa_layers(c, n, (True, True, True, False)) if chunk else [False] * n
    w = c.int("intermediate_size")
    experts = MoEFFN(c.int("num_local_experts"), c.int("num_experts_per_tok"), w, n_shared=1, shared_width=w)
    dense = DenseFFN(c.int("intermediate_size_mlp", w))
    step = c.int("interleave_moe_layer_step", 1, hi=n)
    blocks = []
    for il in range(n):
        att = Attention(heads, kv, hd, hd, window=chunk if chunked[il] else 0, chunked=chunked[il] and chunk > 0)
        blocks.append(Block(att, experts if (il + 1) % step == 0 else dense))
    return BlockModel(_globals(c, False), tuple(blocks))


# model_type -> reader(cfg, ctx). Multimodal wrappers are read through their text_config's model_type.
_READERS = {
    "qwen3_5": lambda c, x: _qwen3_5(c, x, False),
    "qwen3_5_text": lambda c, x: _qwen3_5(c, x, False),
    "qwen3_5_moe": lambda c, x: _qwen3_5(c, x, True),
    "qwen3_5_moe_text": lambda c, x: _qwen3_5(c, x, True),
    "qwen3_next": lambda c, x: _qwen3_5(c, x, True, next_=True),
    "gemma4": _gemma4,
    "gemma4_text": _gemma4,
    "nemotron_h": _nemotron_h,
    "granitemoehybrid": _granite_hybrid,
    "lfm2": lambda c, x: _lfm2(c, x, False),
    "lfm2_moe": lambda c, x: _lfm2(c, x, True),
    "deepseek_v2": lambda c, x: _deepseek(c, x, False),
    "deepseek_v3": lambda c, x: _deepseek(c, x, False),
    "kimi_k2": lambda c, x: _deepseek(c, x, False),
    "deepseek_v32": lambda c, x: _deepseek(c, x, True),
    "glm4_moe_lite": lambda c, x: _deepseek(c, x, False),  # GLM-4.7-Flash: MLA (src/models/glm4-moe-lite.cpp)
    "glm_moe_dsa": lambda c, x: _deepseek(c, x, True),
    "kimi_linear": _kimi_linear,
    "ernie4_5_moe": _ernie4_5_moe,
    "llama4": _llama4,
    "llama4_text": _llama4,
    # dense transformers (llama-model.cpp: one attention + one FFN per block)
    "llama": lambda c, x: _dense(c, x),
    "mistral": lambda c, x: _dense(c, x),
    "ministral": lambda c, x: _dense(c, x),
    "ministral3": lambda c, x: _dense(c, x),
    "qwen2": lambda c, x: _dense(c, x, bias=True),
    "qwen3": lambda c, x: _dense(c, x, qk_norm=True),
    "smollm3": lambda c, x: _dense(c, x, tied=True),  # NoPE every 4th layer changes no size
    "seed_oss": lambda c, x: _dense(c, x),
    "glm4": lambda c, x: _dense(c, x, fused_gate_up=True),  # GLM-4-0414: ffn_up holds gate and up
    "olmo3": lambda c, x: _dense(c, x, qk_norm=True, swa_default=(True, True, True, False), window_default=4096),
    "phi3": lambda c, x: _dense(c, x, fused=True),
    "gemma2": lambda c, x: _dense(c, x, tied=True, swa_default=(True, False), window_default=4096, post_norms=True),
    "gemma3": lambda c, x: _dense(
        c, x, tied=True, qk_norm=True, swa_default=(True,) * 5 + (False,), window_default=4096, post_norms=True
    ),
    "gemma3_text": lambda c, x: _dense(
        c, x, tied=True, qk_norm=True, swa_default=(True,) * 5 + (False,), window_default=4096, post_norms=True
    ),
    # attention + experts in every block
    "minimax_m2": lambda c, x: _moe_stack(
        c,
        x,
        experts_key="num_local_experts",
        used_key="num_experts_per_tok",
        width_key="intermediate_size",
        qk_norm=True,
    ),
    "qwen3_moe": lambda c, x: _moe_stack(
        c, x, experts_key="num_experts", used_key="num_experts_per_tok", width_key="moe_intermediate_size", qk_norm=True
    ),
    "mixtral": lambda c, x: _moe_stack(
        c, x, experts_key="num_local_experts", used_key="num_experts_per_tok", width_key="intermediate_size"
    ),
    "gpt_oss": lambda c, x: _moe_stack(
        c,
        x,
        experts_key="num_local_experts",
        used_key=("num_experts_per_tok", "experts_per_token"),
        width_key="intermediate_size",
        swa_default=(True, False),
        window_default=128,
        bias=True,
        gpt_oss=True,
        post_attention_norm=True,
    ),
    "glm4_moe": lambda c, x: _moe_stack(
        c,
        x,
        experts_key="n_routed_experts",
        used_key="num_experts_per_tok",
        width_key="moe_intermediate_size",
        shared_key="n_shared_experts",
        dense_lead_key="first_k_dense_replace",
        routing_bias=True,
        post_attention_norm=True,
    ),
}

SUPPORTED = tuple(sorted(_READERS))


def read_config(config: dict, name=None) -> BlockModel:
    """The blocks of the model a config.json describes.

    A model_type with a reader is read as llama.cpp builds it; any other is read from the standard keys
    (read_generic) with the warning GENERIC_WARNING. Bad values raise ValueError naming the key."""
    check(name is None or isinstance(name, str), "name", f"must be a string or None, got {brief(name)}")
    c = _Cfg(config)
    mt = c.d.get("model_type")
    if c.wrapper is not None and mt not in _READERS and c.wrapper in _READERS:
        mt = c.wrapper
    ctx = _Ctx()
    if isinstance(mt, str) and mt in _READERS:
        bm = _READERS[mt](c, ctx)
        g = _with_rope_freqs(c, bm)
        return BlockModel(g, bm.blocks, arch=mt, warnings=tuple(ctx.warnings), unknown=tuple(ctx.unknown))
    bm = _generic(c, ctx, mt)
    return BlockModel(_with_rope_freqs(c, bm), bm.blocks, arch=bm.arch, warnings=bm.warnings, unknown=bm.unknown)


def _with_rope_freqs(c: _Cfg, bm: BlockModel) -> Globals:
    """The globals, with llama3-style rope scaling's rope_freqs tensor (head_dim / 2 factors) where
    rope_scaling's rope_type (or type) is "llama3": convert_hf_to_gguf.py writes it for those (Llama 3.1+,
    Llama 4)."""
    rs = c.d.get("rope_scaling")
    if rs is None:
        return bm.globals
    check(isinstance(rs, dict), "rope_scaling", f"must be a JSON object, got {brief(rs)}")
    if rs.get("rope_type", rs.get("type")) != "llama3":
        return bm.globals
    att = next((blk.mixer for blk in bm.blocks if isinstance(blk.mixer, Attention)), None)
    if att is None or att.kv_lora_rank:
        return bm.globals
    g = bm.globals
    return Globals(g.vocab, g.n_embd, g.tied_output, g.per_layer_width, rope_freqs=att.head_dim_k // 2)


def read_generic(config: dict) -> BlockModel:
    """The generic reader on its own (what read_config does for an unknown model_type)."""
    c = _Cfg(config)
    return _generic(c, _Ctx(), c.d.get("model_type"))


_GENERIC_LAYER_KINDS = ("full_attention", "attention", "global", "sliding_attention", "chunked_attention")


def _generic(c: _Cfg, ctx: _Ctx, mt) -> BlockModel:
    """An unknown model_type from the standard keys: hidden_size, num_hidden_layers, num_attention_heads,
    num_key_value_heads, head_dim, intermediate_size, vocab_size, layer_types + sliding_window, and
    num_experts / num_local_experts / n_routed_experts with num_experts_per_tok, moe_intermediate_size and a
    shared expert (shared_expert_intermediate_size or n_shared_experts), first_k_dense_replace; MLA when
    kv_lora_rank is given. Anything else is listed in `unknown`."""
    label = mt if isinstance(mt, str) and 0 < len(mt) <= 64 else "(no model_type)"
    ctx.warnings.append(GENERIC_WARNING)
    n = c.first_int(("num_hidden_layers", "n_layer", "num_layers"))
    if not c.has("num_hidden_layers"):
        c.d = {**c.d, "num_hidden_layers": n}
    hidden = c.first_int(("hidden_size", "n_embd", "d_model"))
    c.d = {**c.d, "hidden_size": hidden}
    heads = c.first_int(("num_attention_heads", "n_head", "num_heads"))
    c.d = {**c.d, "num_attention_heads": heads}
    kv = _kv_heads(c, heads, "num_key_value_heads") if c.has("num_key_value_heads") else heads
    if not c.has("num_key_value_heads"):
        ctx.unknown.append("num_key_value_heads missing: read as num_attention_heads (no grouped KV)")
    hd = _head_dim(c, heads, hidden)
    maxpos = c.int("max_position_embeddings", 4096, hi=MAX_CONTEXT)
    lt = _layer_types(c, n)
    if lt is not None:
        odd = sorted({x for x in lt if x not in _GENERIC_LAYER_KINDS})
        if odd:
            ctx.unknown.append(f"layer_types {', '.join(odd)[:120]}: read as full attention")
    swa = [x in ("sliding_attention", "chunked_attention") for x in lt] if lt else [False] * n
    win = _window(c, maxpos, 4096) if any(swa) else 0
    if c.has("kv_lora_rank"):
        att_g = att_s = _mla(c, heads, c.has("index_head_dim"))
    else:
        bias = c.bool("attention_bias", False)
        att_g = Attention(heads, kv, hd, hd, qkv_bias=bias)
        att_s = Attention(heads, kv, hd, hd, window=win, qkv_bias=bias) if win else att_g
    n_exp = 0
    for key in ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"):
        if c.has(key):
            n_exp = c.int(key, lo=0)
            break
    ff = c.int("intermediate_size", 0, lo=0) if c.has("intermediate_size") else 0
    experts = None
    if n_exp:
        used = c.first_int(("num_experts_per_tok", "experts_per_token", "num_experts_per_token", "moe_k", "top_k"))
        w = c.int("moe_intermediate_size", ff or None)
        sw = c.int("shared_expert_intermediate_size", 0, lo=0)
        n_sh = 1 if sw else 0
        if not sw and c.has("n_shared_experts"):
            n_sh = c.int("n_shared_experts", lo=0)
            sw = w * n_sh
        experts = MoEFFN(n_exp, used, w, n_shared=n_sh, shared_width=sw, routing_bias=_noaux_tc(c))
    lead = c.int("first_k_dense_replace", 0, lo=0, hi=n)
    check(ff or (experts and not lead), "intermediate_size", "missing from config.json")
    dense = DenseFFN(ff) if ff else None
    blocks = []
    for il in range(n):
        ffn = experts if experts is not None and il >= lead else dense
        blocks.append(Block(att_s if swa[il] else att_g, ffn))
    bm = BlockModel(_globals(c, False), tuple(blocks))
    return BlockModel(bm.globals, bm.blocks, arch=label, warnings=tuple(ctx.warnings), unknown=tuple(ctx.unknown))


# ---------------------------------------------------------------------------
# perf_model.Model's fields -> blocks
# ---------------------------------------------------------------------------


# What a model_type adds to the textbook block, as block properties (llama-model.cpp's load_tensors for each):
#   phi3        one attn_qkv and gate + up in one ffn_up
#   gemma2/3    post_attention_norm and post_ffw_norm beside the pre-norms
#   gpt_oss     attention sinks, a bias on attn_output, router and expert biases, MXFP4 experts; the pre-FFN
#               norm is post_attention_norm
#   qwen3_next  a gated query, the shared expert's sigmoid gate, ssm_ba (beta and alpha in one); the pre-FFN
#               norm is post_attention_norm
#   qwen2_moe   the shared expert's sigmoid gate
#   glm4_moe    the routing bias (exp_probs_b); the pre-FFN norm is post_attention_norm
#   deepseek_v3 the routing bias (exp_probs_b)
_FIELD_TRAITS = {
    "phi3": {"fused_qkv", "fused_gate_up"},
    "gemma2": {"post_norms"},
    "gemma3": {"post_norms"},
    "gpt_oss": {"sinks", "out_bias", "router_bias", "expert_bias", "post_attention_norm", "mxfp4"},
    "qwen3_next": {"q_gate", "shared_gate", "fused_ba", "post_attention_norm"},
    "qwen2_moe": {"shared_gate"},
    "glm4_moe": {"routing_bias", "post_attention_norm"},
    "deepseek_v3": {"routing_bias"},
}


def blocks_from_fields(m) -> BlockModel:
    """The blocks of a model given by perf_model.Model's config.json-named fields (any object with them).

    A block is a gated delta net where full_attention_interval says so ((il + 1) % interval != 0, as
    qwen35.cpp), MLA when kv_lora_rank is set, else attention (its window where sliding_window_pattern marks
    the block, chunked with chunked_attention); its FFN has experts where first_k_dense_replace and
    interleave_moe_layer_step put them (with the shared expert of shared_expert_intermediate_size). What the
    model_type adds (_FIELD_TRAITS), attention_bias and rope_freqs become block and global properties."""
    n, heads, kv = m.num_hidden_layers, m.num_attention_heads, m.num_key_value_heads
    d = m.head_dim or m.hidden_size // heads
    traits = _FIELD_TRAITS.get(m.model_type, set())
    rec = None
    if m.full_attention_interval:
        nv, nk = m.linear_num_value_heads, m.linear_num_key_heads
        rec = Recurrent(
            "gated_delta_net",
            m.linear_conv_kernel_dim,
            m.linear_value_head_dim * nv,
            m.linear_key_head_dim,
            nk,
            nv,
            fused_ba="fused_ba" in traits,
        )
    if m.kv_lora_rank:
        att = Attention(
            heads,
            1,
            m.qk_nope_head_dim + m.qk_rope_head_dim,
            m.v_head_dim,
            kv_lora_rank=m.kv_lora_rank,
            rope_dim=m.qk_rope_head_dim,
            q_lora_rank=m.q_lora_rank,
        )
        swa_att = att
    else:
        extra = dict(
            q_gate="q_gate" in traits,
            qk_norm=m.qk_norm,
            fused_qkv="fused_qkv" in traits,
            qkv_bias=m.attention_bias,
            out_bias=m.attention_bias and "out_bias" in traits,
            sinks="sinks" in traits,
        )
        att = Attention(heads, kv, d, d, **extra)
        swa_att = att
        if m.sliding_window and m.sliding_window_pattern:
            swa_att = Attention(heads, kv, d, d, window=m.sliding_window, chunked=m.chunked_attention, **extra)
    dense = DenseFFN(m.intermediate_size, fused_gate_up="fused_gate_up" in traits)
    experts = None
    if m.num_local_experts > 1:
        sw = m.shared_expert_intermediate_size
        experts = MoEFFN(
            m.num_local_experts,
            m.num_experts_per_tok,
            m.moe_intermediate_size or m.intermediate_size,
            n_shared=1 if sw else 0,
            shared_width=sw,
            router_bias="router_bias" in traits,
            expert_bias="expert_bias" in traits,
            shared_gate="shared_gate" in traits and sw > 0,
            routing_bias="routing_bias" in traits,
            mxfp4="mxfp4" in traits,
        )
    pattern = m.sliding_window_pattern
    step = m.interleave_moe_layer_step
    norms = dict(
        post_norms="post_norms" in traits,
        ffn_norm_name="post_attention_norm" if "post_attention_norm" in traits else "ffn_norm",
    )
    out = []
    for il in range(n):
        if rec is not None and (il + 1) % m.full_attention_interval != 0:
            mixer = rec
        elif pattern and m.sliding_window and pattern[il % len(pattern)]:
            mixer = swa_att
        else:
            mixer = att
        moe = experts is not None and il >= m.first_k_dense_replace and (step <= 1 or (il + 1) % step == 0)
        out.append(Block(mixer, experts if moe else dense, **norms))
    g = Globals(m.vocab_size, m.hidden_size, m.tie_word_embeddings, rope_freqs=d // 2 if m.rope_freqs else 0)
    return BlockModel(g, tuple(out), arch=m.model_type)
