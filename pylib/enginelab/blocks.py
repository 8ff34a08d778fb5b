"""blocks: a model as a stack of typed blocks, each a token mixer and an FFN, beside the model's globals.

The readers (enginelab.arch_config for a config.json, enginelab.arch_gguf for a GGUF header) decide, once,
what each block is; everything here works from the blocks alone and never from an architecture's name.

Mixers
  Attention  a per-token KV cache (llama_kv_cache / llama_kv_cache_iswa): n_head_kv x head_dim_k elements of K
             and n_head_kv x head_dim_v of V per token; a sliding window or chunk (`window`) bounds the tokens
             kept; an MLA latent (`kv_lora_rank`) caches kv_lora_rank + rope_dim as K and no V; a block that
             reads an earlier block's cache (`kv_shared_from`) keeps none; a DSA lightning indexer
             (`indexer_head_dim`) keeps one more key of that width per token.
  Recurrent  a fixed state per sequence (llama_memory_recurrent): the conv state r and the recurrent state s,
             f32, with llama_hparams::n_embd_r() / n_embd_s() (src/llama-hparams.cpp):
               r = (d_conv - 1) * (d_inner + 2 * n_group * d_state)
               s = d_state * d_inner
             Mamba-2 (nemotron_h, granitehybrid), the gated delta net (qwen3next, qwen35) and Kimi's KDA
             (kimi_linear: n_group = n_head, d_state = head_dim, so r = 3 (d_conv - 1) d_inner and
             s = head_dim^2 n_head, the KDA branch of n_embd_r/n_embd_s) all fit these two formulas.
  ShortConv  LFM2's gated short convolution: r = n_embd * (l_cache - 1), s = 0 (n_embd_r's LFM2 branch).
  NoMixer    a block without a token mixer (Nemotron-H's FFN-only blocks).

FFNs: DenseFFN(width), MoEFFN(n_expert, n_expert_used, expert_width, n_shared, shared_width), NoFFN.

Shapes are in ggml order (ne[0] first, the row length), as convert_hf_to_gguf.py writes them and
llama.cpp's create_tensor checks them. This module imports only enginelab.checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .checks import brief, check

# Bounds, the same as perf_model's MAX_* constants (a block's numbers are checked against them when made).
MAX_LAYERS = 1_000
MAX_VOCAB = 10_000_000
MAX_HIDDEN = 65_536
MAX_HEAD_DIM = 4_096
MAX_HEADS = 4_096
MAX_EXPERTS = 4_096
MAX_CONTEXT = 1 << 25
MAX_INTERMEDIATE = 1 << 20
MAX_LORA_RANK = 1 << 16
MAX_CONV_KERNEL = 64
MAX_STATE = 1 << 16  # d_state, head widths of a recurrent block
MAX_INNER = 1 << 24  # d_inner of a recurrent block (perf_model: linear_value_head_dim x heads, 4,096 x 4,096)

RS_BYTES_PER_ELEMENT = 4  # llama_memory_recurrent's type_r and type_s: f32

RECURRENT_KINDS = ("mamba", "mamba2", "gated_delta_net", "kda")


def _int(obj, name: str, lo: int, hi: int) -> None:
    v = getattr(obj, name)
    if not (type(v) is int and lo <= v <= hi):  # (the message is built only for a bad value: checks run per block)
        check(False, name, f"must be an integer from {lo:,} to {hi:,}, got {brief(v)}")


def _bool(obj, name: str) -> None:
    v = getattr(obj, name)
    if not isinstance(v, bool):
        check(False, name, f"must be true or false, got {brief(v)}")


# ---------------------------------------------------------------------------
# Mixers
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Attention:
    """Softmax attention with a per-token cache."""

    n_head: int
    n_head_kv: int
    head_dim_k: int
    head_dim_v: int
    window: int = 0  # tokens a sliding-window or chunked block keeps; 0: every token (a global block)
    chunked: bool = False  # the window is a chunk (Llama 4): positions restart at each chunk's start
    kv_lora_rank: int = 0  # MLA: the cached latent's width (K = kv_lora_rank + rope_dim, no V)
    rope_dim: int = 0  # rotary part of the key (MLA's k_pe; partial RoPE elsewhere, for reference)
    kv_shared_from: int = -1  # a block that reads block kv_shared_from's cache and keeps none of its own
    q_lora_rank: int = 0  # MLA: the query's compression (0: a full attn_q)
    indexer_head_dim: int = 0  # DSA lightning indexer: one cached key of this width per token
    n_indexer_head: int = 0
    q_gate: bool = False  # attn_q also yields an output gate (Qwen3-Next/3.5: attn_q is 2 x n_head x head_dim_k)
    v_from_k: bool = False  # no attn_v: V is K's projection (Gemma 4's attention_k_eq_v global blocks)
    qk_norm: bool = False
    fused_qkv: bool = False  # one attn_qkv projection instead of attn_q, attn_k, attn_v (Phi-3)
    qkv_bias: bool = False  # the q, k and v projections carry biases (Qwen2, gpt-oss, GLM-4.5)
    out_bias: bool = False  # attn_output carries a bias (gpt-oss)
    sinks: bool = False  # one learned attention-sink logit per head, attn_sinks (gpt-oss)
    # a block sharing another's cache whose file still holds its own attn_k, attn_v and attn_k_norm: Gemma 4's
    # E-models keep k_proj/v_proj in every layer, llama.cpp loads them (gemma4.cpp: TENSOR_NOT_REQUIRED) and
    # its graph never reads them (hparams.has_kv(il) is false)
    unused_kv_proj: bool = False

    def __post_init__(self):
        _int(self, "n_head", 1, MAX_HEADS)
        _int(self, "n_head_kv", 1, MAX_HEADS)
        _int(self, "head_dim_k", 1, 2 * MAX_HEAD_DIM)  # an MLA query/key head: nope + rope, each up to 4,096
        _int(self, "head_dim_v", 1, MAX_HEAD_DIM)
        _int(self, "window", 0, MAX_CONTEXT)
        _int(self, "kv_lora_rank", 0, MAX_LORA_RANK)
        _int(self, "rope_dim", 0, MAX_HEAD_DIM)
        _int(self, "kv_shared_from", -1, MAX_LAYERS - 1)
        _int(self, "q_lora_rank", 0, MAX_LORA_RANK)
        _int(self, "indexer_head_dim", 0, MAX_HEAD_DIM)
        _int(self, "n_indexer_head", 0, MAX_HEADS)
        for name in (
            "chunked", "q_gate", "v_from_k", "qk_norm", "fused_qkv", "qkv_bias", "out_bias", "sinks", "unused_kv_proj"
        ):  # fmt: skip
            _bool(self, name)
        check(
            not self.unused_kv_proj or self.kv_shared_from >= 0,
            "unused_kv_proj",
            "only a block that shares another's cache can hold projections it does not use",
        )
        check(
            self.n_head % self.n_head_kv == 0,
            "n_head_kv",
            f"must divide n_head ({self.n_head:,}), got {self.n_head_kv:,}",
        )
        check(not self.chunked or self.window > 0, "chunked", "needs a window (the chunk size)")
        if self.kv_lora_rank:
            check(
                0 < self.rope_dim < self.head_dim_k,
                "rope_dim",
                f"must be from 1 to head_dim_k - 1 ({self.head_dim_k - 1:,}) in an MLA block, got {self.rope_dim:,}",
            )
        check(
            (self.indexer_head_dim == 0) == (self.n_indexer_head == 0),
            "n_indexer_head",
            "a DSA indexer needs both indexer_head_dim and n_indexer_head (or neither)",
        )

    @property
    def kind(self) -> str:
        if self.kv_shared_from >= 0:
            return "shared"
        if self.kv_lora_rank:
            return "mla"
        if self.window:
            return "chunked" if self.chunked else "sliding"
        return "global"


@dataclass(frozen=True)
class Recurrent:
    """A linear-attention / SSM block: a fixed state per sequence (see the module's formulas)."""

    kind: str  # "mamba" (Mamba-1: no groups), "mamba2", "gated_delta_net" or "kda"
    d_conv: int  # the short convolution's kernel (ssm.conv_kernel)
    d_inner: int  # ssm.inner_size (the value width: heads x head width)
    d_state: int  # ssm.state_size (the key head width in a delta net)
    n_group: int  # ssm.group_count (the key heads in a delta net; KDA: its heads)
    n_head: int  # ssm.time_step_rank (value heads; Mamba-2's heads; Mamba-1's dt_rank)
    fused_ba: bool = False  # gated delta net: beta and alpha in one ssm_ba projection (Qwen3-Next)

    def __post_init__(self):
        check(
            isinstance(self.kind, str) and self.kind in RECURRENT_KINDS,
            "kind",
            f"must be one of {', '.join(RECURRENT_KINDS)}, got {brief(self.kind)}",
        )
        _int(self, "d_conv", 1, MAX_CONV_KERNEL)
        _int(self, "d_inner", 1, MAX_INNER)
        _int(self, "d_state", 1, MAX_STATE)
        _int(self, "n_group", 0 if self.kind == "mamba" else 1, 0 if self.kind == "mamba" else MAX_HEADS)
        _int(self, "n_head", 1, MAX_HEADS)
        _bool(self, "fused_ba")
        check(not self.fused_ba or self.kind == "gated_delta_net", "fused_ba", "only a gated delta net has ssm_ba")
        check(
            self.kind == "mamba" or self.d_inner % self.n_head == 0,
            "d_inner",
            f"must be a multiple of n_head ({self.n_head:,}), got {self.d_inner:,}",
        )
        if self.kind == "kda":
            check(
                self.n_group == self.n_head and self.d_inner == self.n_head * self.d_state,
                "d_inner",
                "KDA keeps one key head per value head: n_group = n_head and d_inner = n_head x d_state",
            )

    @property
    def conv_elements(self) -> int:
        """llama_hparams::n_embd_r(): the conv state of one sequence."""
        return (self.d_conv - 1) * (self.d_inner + 2 * self.n_group * self.d_state)

    @property
    def state_elements(self) -> int:
        """llama_hparams::n_embd_s(): the recurrent state of one sequence."""
        return self.d_state * self.d_inner


@dataclass(frozen=True)
class ShortConv:
    """LFM2's gated short convolution over n_embd channels (shortconv.l_cache taps)."""

    l_cache: int
    width: int  # n_embd

    def __post_init__(self):
        _int(self, "l_cache", 2, MAX_CONV_KERNEL)
        _int(self, "width", 1, MAX_HIDDEN)

    @property
    def conv_elements(self) -> int:
        return self.width * (self.l_cache - 1)

    @property
    def state_elements(self) -> int:
        return 0


@dataclass(frozen=True)
class NoMixer:
    """A block without a token mixer."""


# ---------------------------------------------------------------------------
# FFNs
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DenseFFN:
    width: int
    gated: bool = True  # ffn_gate + ffn_up (SwiGLU/GeGLU); False: ffn_up only (Nemotron-H's ReLU^2)
    fused_gate_up: bool = False  # gate and up in one ffn_up of 2 x width rows (Phi-3, GLM-4-0414)

    def __post_init__(self):
        _int(self, "width", 1, MAX_INTERMEDIATE)
        _bool(self, "gated")
        _bool(self, "fused_gate_up")
        check(not self.fused_gate_up or self.gated, "fused_gate_up", "needs a gated FFN")


@dataclass(frozen=True)
class MoEFFN:
    n_expert: int
    n_expert_used: int
    expert_width: int
    n_shared: int = 0  # shared experts (0: none)
    shared_width: int = 0  # their total width (n_shared x each one's, as llama.cpp's n_ff_shexp)
    gated: bool = True
    dense_width: int = 0  # a dense FFN run beside the experts (Gemma 4's MoE blocks)
    merged_gate_up: bool = False  # one ffn_gate_up_exps tensor (Gemma 4's converter) instead of gate + up
    router_bias: bool = False  # ffn_gate_inp.bias (gpt-oss)
    expert_bias: bool = False  # each expert's gate, up and down carry biases (gpt-oss)
    shared_gate: bool = False  # the shared expert's own sigmoid gate, ffn_gate_inp_shexp (Qwen2-MoE, Qwen3-Next)
    routing_bias: bool = False  # exp_probs_b: the router's score-correction bias (DeepSeek V3's noaux_tc, GLM-4.5)
    mxfp4: bool = False  # the experts are released, and converted, as MXFP4 (gpt-oss)
    # Gemma 4's experts beside a dense FFN: the router's input scale (ffn_gate_inp.scale), one output scale per
    # expert (ffn_down_exps.scale) and a norm before the expert branch and after each branch (pre_ffw_norm_2,
    # post_ffw_norm_1, post_ffw_norm_2); src/models/gemma4.cpp load_arch_tensors
    branch_norms: bool = False

    def __post_init__(self):
        _int(self, "n_expert", 1, MAX_EXPERTS)
        _int(self, "n_expert_used", 1, MAX_EXPERTS)
        _int(self, "expert_width", 1, MAX_INTERMEDIATE)
        _int(self, "n_shared", 0, MAX_EXPERTS)
        _int(self, "shared_width", 0, MAX_INTERMEDIATE)
        _int(self, "dense_width", 0, MAX_INTERMEDIATE)
        _bool(self, "gated")
        for name in (
            "merged_gate_up", "router_bias", "expert_bias", "shared_gate", "routing_bias", "mxfp4", "branch_norms"
        ):  # fmt: skip
            _bool(self, name)
        check(not self.shared_gate or self.shared_width, "shared_gate", "needs a shared expert")
        check(
            self.n_expert_used <= self.n_expert,
            "n_expert_used",
            f"must be at most n_expert ({self.n_expert:,}), got {self.n_expert_used:,}",
        )
        check(
            (self.n_shared == 0) == (self.shared_width == 0),
            "shared_width",
            f"must be > 0 exactly when n_shared is (n_shared {self.n_shared:,}, got {self.shared_width:,})",
        )


@dataclass(frozen=True)
class NoFFN:
    """A block without an FFN (Nemotron-H's mixer-only blocks)."""


MIXERS = (Attention, Recurrent, ShortConv, NoMixer)
FFNS = (DenseFFN, MoEFFN, NoFFN)


FFN_NORM_NAMES = ("ffn_norm", "post_attention_norm")


@dataclass(frozen=True)
class Block:
    mixer: Attention | Recurrent | ShortConv | NoMixer
    ffn: DenseFFN | MoEFFN | NoFFN
    post_norms: bool = (
        False  # norms after the mixer and after the FFN too (Gemma 2/3: post_attention_norm, post_ffw_norm)
    )
    ffn_norm_name: str = (
        "ffn_norm"  # the pre-FFN norm's GGUF name (post_attention_norm in gpt-oss, GLM-4.5, Qwen3-Next)
    )
    out_scale: bool = False  # one learned scalar on the block's output, layer_output_scale (Gemma 4)

    def __post_init__(self):
        # each message is built only when its check fails: brief() of a mixer is a repr, and this runs per block
        if not isinstance(self.mixer, MIXERS):
            check(False, "mixer", f"must be a blocks mixer, got {brief(self.mixer)}")
        if not isinstance(self.ffn, FFNS):
            check(False, "ffn", f"must be a blocks FFN, got {brief(self.ffn)}")
        _bool(self, "post_norms")
        _bool(self, "out_scale")
        if not (isinstance(self.ffn_norm_name, str) and self.ffn_norm_name in FFN_NORM_NAMES):
            check(
                False, "ffn_norm_name", f"must be one of {', '.join(FFN_NORM_NAMES)}, got {brief(self.ffn_norm_name)}"
            )
        check(
            not (self.post_norms and self.ffn_norm_name == "post_attention_norm"),
            "ffn_norm_name",
            "post_attention_norm is already one of the post norms",
        )


@dataclass(frozen=True)
class Globals:
    vocab: int
    n_embd: int
    tied_output: bool  # no output.weight: the output head reuses token_embd
    per_layer_width: int = 0  # Gemma 3n/4 E-models: per-layer token embeddings of this width per block
    rope_freqs: int = 0  # llama3-style rope scaling: a rope_freqs tensor of this many factors (head_dim / 2)

    def __post_init__(self):
        _int(self, "vocab", 1, MAX_VOCAB)
        _int(self, "n_embd", 1, MAX_HIDDEN)
        _bool(self, "tied_output")
        _int(self, "per_layer_width", 0, MAX_HIDDEN)
        _int(self, "rope_freqs", 0, MAX_HEAD_DIM)


@dataclass(frozen=True)
class BlockModel:
    """A model's globals and blocks, with what its reader could not verify or infer."""

    globals: Globals
    blocks: tuple
    arch: str = ""  # the architecture the reader saw (for the explain box only)
    warnings: tuple = ()  # e.g. "architecture not verified: sizes approximate"
    unknown: tuple = field(default=())  # what could not be inferred, one phrase each

    def __post_init__(self):
        check(isinstance(self.globals, Globals), "globals", f"must be a blocks.Globals, got {brief(self.globals)}")
        check(
            isinstance(self.blocks, tuple) and 1 <= len(self.blocks) <= MAX_LAYERS,
            "blocks",
            f"must be a tuple of 1 to {MAX_LAYERS:,} Blocks, got {brief(self.blocks)}",
        )
        for il, b in enumerate(self.blocks):
            if not isinstance(b, Block):  # (brief() of a block is a repr: built only for a bad entry)
                check(False, "blocks", f"entry {il} must be a blocks.Block, got {brief(b)}")
            m = b.mixer
            if isinstance(m, Attention) and m.kv_shared_from >= 0:
                src = m.kv_shared_from
                ok = src < il and isinstance(self.blocks[src].mixer, Attention)
                ok = ok and self.blocks[src].mixer.kv_shared_from < 0
                check(ok, "kv_shared_from", f"block {il} must name an earlier block with its own cache, got {src}")
            if isinstance(m, ShortConv):
                check(
                    m.width == self.globals.n_embd,
                    "width",
                    f"a short convolution spans n_embd ({self.globals.n_embd:,}), got {m.width:,}",
                )

    @property
    def n_layer(self) -> int:
        return len(self.blocks)


# ---------------------------------------------------------------------------
# Per block: cache, state, weights, work
# ---------------------------------------------------------------------------


def kv_elements_per_token(block: Block) -> tuple:
    """(K, V) elements one token adds to this block's cache (0, 0 without one).

    MLA caches its latent as K (kv_lora_rank + rope_dim) and no V; a block reading another's cache adds none.
    The DSA indexer's keys are separate (indexer_elements_per_token)."""
    m = block.mixer
    if not isinstance(m, Attention) or m.kv_shared_from >= 0:
        return 0, 0
    if m.kv_lora_rank:
        return m.kv_lora_rank + m.rope_dim, 0
    return m.n_head_kv * m.head_dim_k, m.n_head_kv * m.head_dim_v


def indexer_elements_per_token(block: Block) -> int:
    m = block.mixer
    if not isinstance(m, Attention) or m.kv_shared_from >= 0:
        return 0
    return m.indexer_head_dim


def state_elements(block: Block) -> tuple:
    """(r, s): the conv and recurrent state one sequence keeps in this block (0, 0 for others)."""
    m = block.mixer
    if isinstance(m, (Recurrent, ShortConv)):
        return m.conv_elements, m.state_elements
    return 0, 0


def cached_tokens(block: Block, n_ctx: int) -> int:
    """Tokens the block's cache holds at context n_ctx: every token, or its window (0 without a cache)."""
    m = block.mixer
    if not isinstance(m, Attention) or m.kv_shared_from >= 0:
        return 0
    return min(m.window, n_ctx) if m.window else n_ctx


def _t(il: int, name: str, *ne) -> tuple:
    return (f"blk.{il}.{name}", tuple(ne))


def mixer_tensors(m, il: int, n_embd: int) -> list:
    """(GGUF name, ggml shape) of a mixer's weights in block il, as convert_hf_to_gguf.py names them."""
    out = [_t(il, "attn_norm.weight", n_embd)] if not isinstance(m, NoMixer) else []
    if isinstance(m, Attention):
        hk, hv = m.head_dim_k, m.head_dim_v
        if m.kv_lora_rank:  # llama-model.cpp (deepseek2): q_a/q_b or q, kv_a_mqa, k_b, v_b
            nope = hk - m.rope_dim
            if m.q_lora_rank:
                out += [
                    _t(il, "attn_q_a.weight", n_embd, m.q_lora_rank),
                    _t(il, "attn_q_a_norm.weight", m.q_lora_rank),
                    _t(il, "attn_q_b.weight", m.q_lora_rank, m.n_head * hk),
                ]
            else:
                out.append(_t(il, "attn_q.weight", n_embd, m.n_head * hk))
            out += [
                _t(il, "attn_kv_a_mqa.weight", n_embd, m.kv_lora_rank + m.rope_dim),
                _t(il, "attn_kv_a_norm.weight", m.kv_lora_rank),
                _t(il, "attn_k_b.weight", nope, m.kv_lora_rank, m.n_head),
                _t(il, "attn_v_b.weight", m.kv_lora_rank, hv, m.n_head),
            ]
        elif m.fused_qkv:  # llama-model.cpp (phi3): wqkv is n_embd -> q + k + v
            qkv = m.n_head * hk + m.n_head_kv * (hk + hv)
            out.append(_t(il, "attn_qkv.weight", n_embd, qkv))
            if m.qkv_bias:
                out.append(_t(il, "attn_qkv.bias", qkv))
        else:
            q_rows = m.n_head * hk * (2 if m.q_gate else 1)
            out.append(_t(il, "attn_q.weight", n_embd, q_rows))
            if m.qkv_bias:
                out.append(_t(il, "attn_q.bias", q_rows))
            if m.kv_shared_from < 0 or m.unused_kv_proj:
                out.append(_t(il, "attn_k.weight", n_embd, m.n_head_kv * hk))
                if m.qkv_bias:
                    out.append(_t(il, "attn_k.bias", m.n_head_kv * hk))
                if not m.v_from_k:
                    out.append(_t(il, "attn_v.weight", n_embd, m.n_head_kv * hv))
                    if m.qkv_bias:
                        out.append(_t(il, "attn_v.bias", m.n_head_kv * hv))
        if m.qk_norm and not m.kv_lora_rank:
            out.append(_t(il, "attn_q_norm.weight", hk))
            if m.kv_shared_from < 0 or m.unused_kv_proj:
                out.append(_t(il, "attn_k_norm.weight", hk))
        out.append(_t(il, "attn_output.weight", m.n_head * hv, n_embd))
        if m.out_bias:
            out.append(_t(il, "attn_output.bias", n_embd))
        if m.sinks:  # llama-model.cpp (openai_moe): attn_sinks, one logit per head
            out.append(_t(il, "attn_sinks.weight", m.n_head))
        if m.indexer_head_dim:  # deepseek32 / glm-dsa lightning indexer
            ni, di = m.n_indexer_head, m.indexer_head_dim
            out += [
                _t(il, "indexer.attn_q_b.weight", m.q_lora_rank or n_embd, ni * di),
                _t(il, "indexer.attn_k.weight", n_embd, di),
                _t(il, "indexer.k_norm.weight", di),
                _t(il, "indexer.k_norm.bias", di),
                _t(il, "indexer.proj.weight", n_embd, ni),
            ]
    elif isinstance(m, Recurrent):
        conv_dim = m.d_inner + 2 * m.n_group * m.d_state
        if m.kind == "mamba":  # llama-model.cpp (mamba): in_proj, conv, x (dt_rank + 2 d_state), dt, A, D, out
            dt_rank = m.n_head
            out += [
                _t(il, "ssm_in.weight", n_embd, 2 * m.d_inner),
                _t(il, "ssm_conv1d.weight", m.d_conv, m.d_inner),
                _t(il, "ssm_conv1d.bias", m.d_inner),
                _t(il, "ssm_x.weight", m.d_inner, dt_rank + 2 * m.d_state),
                _t(il, "ssm_dt.weight", dt_rank, m.d_inner),
                _t(il, "ssm_dt.bias", m.d_inner),
                _t(il, "ssm_a", m.d_state, m.d_inner),
                _t(il, "ssm_d", m.d_inner),
                _t(il, "ssm_out.weight", m.d_inner, n_embd),
            ]
        elif m.kind == "mamba2":  # llama-model.cpp (mamba2 / nemotron_h / granitehybrid)
            out += [
                _t(il, "ssm_in.weight", n_embd, 2 * m.d_inner + 2 * m.n_group * m.d_state + m.n_head),
                _t(il, "ssm_conv1d.weight", m.d_conv, conv_dim),
                _t(il, "ssm_conv1d.bias", conv_dim),
                _t(il, "ssm_dt.bias", m.n_head),
                _t(il, "ssm_a", 1, m.n_head),
                _t(il, "ssm_d", 1, m.n_head),
                _t(il, "ssm_norm.weight", m.d_inner // m.n_group, m.n_group),
                _t(il, "ssm_out.weight", m.d_inner, n_embd),
            ]
        elif m.kind == "gated_delta_net":  # src/models/qwen35.cpp load_arch_tensors
            out += [
                _t(il, "attn_qkv.weight", n_embd, conv_dim),
                _t(il, "attn_gate.weight", n_embd, m.d_inner),
                _t(il, "ssm_conv1d.weight", m.d_conv, conv_dim),
                _t(il, "ssm_dt.bias", m.n_head),
                _t(il, "ssm_a", m.n_head),
                *(
                    [_t(il, "ssm_ba.weight", n_embd, 2 * m.n_head)]  # qwen3next: beta and alpha in one
                    if m.fused_ba
                    else [_t(il, "ssm_beta.weight", n_embd, m.n_head), _t(il, "ssm_alpha.weight", n_embd, m.n_head)]
                ),
                _t(il, "ssm_norm.weight", m.d_inner // m.n_head),
                _t(il, "ssm_out.weight", m.d_inner, n_embd),
            ]
        else:  # kda: src/models/kimi-linear.cpp load_arch_tensors
            d = m.d_state
            out += [
                _t(il, "ssm_conv1d_q.weight", m.d_conv, 1, m.d_inner),
                _t(il, "ssm_conv1d_k.weight", m.d_conv, 1, m.d_inner),
                _t(il, "ssm_conv1d_v.weight", m.d_conv, 1, m.d_inner),
                _t(il, "attn_q.weight", n_embd, m.d_inner),
                _t(il, "attn_k.weight", n_embd, m.d_inner),
                _t(il, "attn_v.weight", n_embd, m.d_inner),
                _t(il, "ssm_f_a.weight", n_embd, d),
                _t(il, "ssm_f_b.weight", d, m.d_inner),
                _t(il, "ssm_beta.weight", n_embd, m.n_head),
                _t(il, "ssm_a", 1, m.n_head),
                _t(il, "ssm_dt.bias", m.d_inner),
                _t(il, "ssm_g_a.weight", n_embd, d),
                _t(il, "ssm_g_b.weight", d, m.d_inner),
                _t(il, "ssm_norm.weight", d),
                _t(il, "attn_output.weight", m.d_inner, n_embd),
            ]
    elif isinstance(m, ShortConv):  # llama-model.cpp (lfm2)
        out += [
            _t(il, "shortconv.in_proj.weight", n_embd, 3 * n_embd),
            _t(il, "shortconv.conv.weight", m.l_cache, n_embd),
            _t(il, "shortconv.out_proj.weight", n_embd, n_embd),
        ]
    return out


def ffn_tensors(f, il: int, n_embd: int, norm: str = "ffn_norm") -> list:
    """An FFN's weights in block il, its pre-FFN norm (named `norm`) first."""
    if isinstance(f, NoFFN):
        return []
    out = [_t(il, f"{norm}.weight", n_embd)]
    dense_w = f.width if isinstance(f, DenseFFN) else f.dense_width
    if dense_w:
        if isinstance(f, DenseFFN) and f.fused_gate_up:
            out.append(_t(il, "ffn_up.weight", n_embd, 2 * dense_w))
        else:
            if f.gated:
                out.append(_t(il, "ffn_gate.weight", n_embd, dense_w))
            out.append(_t(il, "ffn_up.weight", n_embd, dense_w))
        out.append(_t(il, "ffn_down.weight", dense_w, n_embd))
    if isinstance(f, MoEFFN):
        e, w = f.n_expert, f.expert_width
        out.append(_t(il, "ffn_gate_inp.weight", n_embd, e))
        if f.router_bias:
            out.append(_t(il, "ffn_gate_inp.bias", e))
        if f.merged_gate_up:
            out.append(_t(il, "ffn_gate_up_exps.weight", n_embd, 2 * w, e))
            if f.expert_bias:
                out.append(_t(il, "ffn_gate_up_exps.bias", 2 * w, e))
        else:
            if f.gated:
                out.append(_t(il, "ffn_gate_exps.weight", n_embd, w, e))
                if f.expert_bias:
                    out.append(_t(il, "ffn_gate_exps.bias", w, e))
            out.append(_t(il, "ffn_up_exps.weight", n_embd, w, e))
            if f.expert_bias:
                out.append(_t(il, "ffn_up_exps.bias", w, e))
        out.append(_t(il, "ffn_down_exps.weight", w, n_embd, e))
        if f.branch_norms:
            out += [
                _t(il, "ffn_gate_inp.scale", n_embd),
                _t(il, "ffn_down_exps.scale", e),
                _t(il, "pre_ffw_norm_2.weight", n_embd),
                _t(il, "post_ffw_norm_1.weight", n_embd),
                _t(il, "post_ffw_norm_2.weight", n_embd),
            ]
        if f.expert_bias:
            out.append(_t(il, "ffn_down_exps.bias", n_embd, e))
        if f.shared_width:
            sw = f.shared_width
            if f.shared_gate:
                out.append(_t(il, "ffn_gate_inp_shexp.weight", n_embd))
            if f.gated:
                out.append(_t(il, "ffn_gate_shexp.weight", n_embd, sw))
            out += [_t(il, "ffn_up_shexp.weight", n_embd, sw), _t(il, "ffn_down_shexp.weight", sw, n_embd)]
        if f.routing_bias:
            out.append(_t(il, "exp_probs_b.bias", e))
    return out


def block_tensors(block: Block, il: int, n_embd: int) -> list:
    out = mixer_tensors(block.mixer, il, n_embd)
    if block.post_norms:
        out += [_t(il, "post_attention_norm.weight", n_embd), _t(il, "post_ffw_norm.weight", n_embd)]
    if block.out_scale:
        out.append(_t(il, "layer_output_scale.weight", 1))
    return out + ffn_tensors(block.ffn, il, n_embd, block.ffn_norm_name)


def unread_tensor_names(bm: BlockModel) -> frozenset:
    """Tensors llama.cpp loads but no forward pass reads: the K/V projections a cache-sharing block still holds
    (Attention.unused_kv_proj). They take memory, not decode or prefill work."""
    out = set()
    for il, blk in enumerate(bm.blocks):
        m = blk.mixer
        if isinstance(m, Attention) and m.unused_kv_proj:
            out |= {f"blk.{il}.attn_k.weight", f"blk.{il}.attn_v.weight", f"blk.{il}.attn_k_norm.weight"}
    return frozenset(out)


def global_tensors(g: Globals, n_layer: int) -> list:
    out = [("token_embd.weight", (g.n_embd, g.vocab)), ("output_norm.weight", (g.n_embd,))]
    if not g.tied_output:
        out.append(("output.weight", (g.n_embd, g.vocab)))
    if g.rope_freqs:
        out.append(("rope_freqs.weight", (g.rope_freqs,)))
    if g.per_layer_width:  # src/models/gemma4.cpp: per_layer_token_embd, per_layer_model_proj, ...
        w = g.per_layer_width * n_layer
        out += [
            ("per_layer_token_embd.weight", (w, g.vocab)),
            ("per_layer_model_proj.weight", (g.n_embd, w)),
            ("per_layer_proj_norm.weight", (g.per_layer_width,)),
        ]
    return out


def tensors(bm: BlockModel) -> list:
    """Every weight tensor (name, ggml shape) of the model, globals first, then block by block."""
    out = global_tensors(bm.globals, bm.n_layer)
    for il, b in enumerate(bm.blocks):
        out += block_tensors(b, il, bm.globals.n_embd)
        if bm.globals.per_layer_width:
            p, n = bm.globals.per_layer_width, bm.globals.n_embd
            out += [_t(il, "inp_gate.weight", n, p), _t(il, "proj.weight", p, n), _t(il, "post_norm.weight", n)]
    return out


def n_elements(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _is_expert(name: str) -> bool:
    return "_exps." in name


def active_weight_elements(block: Block, il: int, n_embd: int) -> int:
    """Weights one token reads in this block: all but the experts it does not use (and the K/V projections of a
    cache-sharing block, which it never reads)."""
    total = 0
    f = block.ffn
    m = block.mixer
    unread = ("attn_k.weight", "attn_v.weight", "attn_k_norm.weight")
    for name, shape in block_tensors(block, il, n_embd):
        if isinstance(m, Attention) and m.unused_kv_proj and name.endswith(unread):
            continue
        n = n_elements(shape)
        if _is_expert(name) and isinstance(f, MoEFFN):
            n = n // f.n_expert * f.n_expert_used
        total += n
    return total


def attention_flops_per_token(block: Block, n_kv: int) -> int:
    """Multiply-adds x 2 of one query token's attention over n_kv cached tokens (QK^T and the V sum).

    MLA with the absorbed weights (llama.cpp's path) attends in the latent: kv_lora_rank + rope_dim per score
    and kv_lora_rank per value; a block sharing another's cache still attends over it."""
    m = block.mixer
    if not isinstance(m, Attention):
        return 0
    if m.kv_lora_rank:
        per = (m.kv_lora_rank + m.rope_dim) + m.kv_lora_rank
    else:
        per = m.head_dim_k + m.head_dim_v
    return 2 * m.n_head * per * n_kv


def state_traffic_bytes_per_token(block: Block) -> int:
    """Bytes of recurrent state a decoded token reads and writes back in this block (f32, once each)."""
    r, s = state_elements(block)
    return 2 * (r + s) * RS_BYTES_PER_ELEMENT


def scan_flops_per_token(block: Block) -> int:
    """The recurrent update's own work per token, beyond its matmuls: about one multiply-add per state
    element to update the state and one to read it out (2 x 2 x s), plus the conv taps (2 x r)."""
    r, s = state_elements(block)
    return 4 * s + 2 * r


# ---------------------------------------------------------------------------
# Whole model
# ---------------------------------------------------------------------------


def kv_elements_per_token_model(bm: BlockModel) -> tuple:
    """(K, V) elements per token over every block with a cache (global or windowed alike)."""
    k = v = 0
    for b in bm.blocks:
        bk, bv = kv_elements_per_token(b)
        k += bk + indexer_elements_per_token(b)
        v += bv
    return k, v


def kv_cache_elements(bm: BlockModel, n_ctx: int, n_seq: int = 1) -> tuple:
    """(K, V) elements of the KV cache at context n_ctx with n_seq sequences sharing it (-np): the global
    blocks keep n_ctx tokens in all (the sequences split them); a windowed block keeps its window per
    sequence (llama_kv_cache_iswa sizes the SWA cache as min(n_ctx, n_swa x n_seq + n_ubatch), here without
    the ubatch margin)."""
    check(type(n_ctx) is int and 1 <= n_ctx <= MAX_CONTEXT, "n_ctx", f"must be from 1 to {MAX_CONTEXT:,}")
    check(type(n_seq) is int and 1 <= n_seq <= 1 << 16, "n_seq", "must be from 1 to 65,536")
    k = v = 0
    for b in bm.blocks:
        m = b.mixer
        if not isinstance(m, Attention) or m.kv_shared_from >= 0:
            continue
        tokens = min(n_ctx, m.window * n_seq) if m.window else n_ctx
        bk, bv = kv_elements_per_token(b)
        k += (bk + indexer_elements_per_token(b)) * tokens
        v += bv * tokens
    return k, v


def state_bytes(bm: BlockModel, n_seq: int = 1, n_rs_seq: int = 0) -> int:
    """llama_memory_recurrent's RS buffer: (r + s) x 4 bytes per recurrent block, per sequence (-np), times
    1 + n_rs_seq (the rollback copies llama_context keeps for speculative decoding; 0 without a draft)."""
    check(type(n_seq) is int and 1 <= n_seq <= 1 << 16, "n_seq", "must be from 1 to 65,536")
    check(type(n_rs_seq) is int and 0 <= n_rs_seq <= 1 << 10, "n_rs_seq", "must be from 0 to 1,024")
    per = sum(sum(state_elements(b)) for b in bm.blocks)
    return per * RS_BYTES_PER_ELEMENT * n_seq * (1 + n_rs_seq)


def weight_elements(bm: BlockModel) -> int:
    return sum(n_elements(s) for _, s in tensors(bm))


def describe(block: Block) -> str:
    """A short label: "attention (sliding 1024) + MoE 128/8", "gated_delta_net + dense 17408", ..."""
    m, f = block.mixer, block.ffn
    if isinstance(m, Attention):
        k = m.kind
        mix = f"attention ({k} {m.window})" if m.window and k in ("sliding", "chunked") else f"attention ({k})"
    elif isinstance(m, Recurrent):
        mix = m.kind
    elif isinstance(m, ShortConv):
        mix = "short conv"
    else:
        mix = "no mixer"
    if isinstance(f, MoEFFN):
        ffn = f"MoE {f.n_expert_used}/{f.n_expert}" + (" + shared" if f.n_shared else "")
    elif isinstance(f, DenseFFN):
        ffn = f"dense {f.width}"
    else:
        ffn = "no FFN"
    return f"{mix} + {ffn}"
