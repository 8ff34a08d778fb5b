"""A Model: a transformer's shape under its config.json field names, checked when made, and the tensors
convert_hf_to_gguf.py writes for it (GGUF names, ggml's dimension order: ne[0] the row length)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from enginelab import arch_config as _arch_config
from enginelab import blocks as _blocks
from enginelab import engine_io as _engine_io
from enginelab.blocks import Attention, BlockModel, MoEFFN, Recurrent, ShortConv
from enginelab.checks import brief, check_bool, check_int, check_text, is_int
from enginelab.ggml import GGML_TYPES, Tensor, weight_order

from .units import _check

# A Model holds the hyperparameters of a Hugging Face config.json under the same
# field names.  `tensors()` lists the tensors convert_hf_to_gguf.py writes, under
# their GGUF names, with ggml's dimension order: ne[0] is the row length (the
# input features of a matmul), ne[1] the rows, ne[2] the experts.

# Model bounds.  Every Model is checked when it is made (Model.__post_init__), whatever made it: the catalog
# below, a config.json (model_from_hf_config), a GGUF header (model_from_gguf), a URL or a learner's code.
# The bounds are physical: generous enough for any real model (the largest today are noted), and tight enough
# that no valid Model can make a function here run for seconds or give an infinite or negative number.
MAX_LAYERS = 1_000  # num_hidden_layers; Llama 3.1 405B has 126, DeepSeek V3 61
MAX_VOCAB = 10_000_000  # vocab_size; real vocabularies are 32k-262k (Gemma 3: 262,144)
MAX_HIDDEN = 65_536  # hidden_size; Llama 3.1 405B: 16,384
MAX_HEAD_DIM = 4_096  # head_dim; real heads are 64-256 (DeepSeek's MLA keys: 192)
MAX_HEADS = 4_096  # num_attention_heads and num_key_value_heads; Llama 3.1 405B: 128
MAX_EXPERTS = 4_096  # num_local_experts; DeepSeek V3 and Qwen3 235B: 256 and 128
MAX_CONTEXT = 1 << 25  # max_position_embeddings (33,554,432 tokens); Llama 4 Scout: 10,485,760
MAX_INTERMEDIATE = 1 << 20  # intermediate_size, moe_intermediate_size, shared_expert_intermediate_size
MAX_NGL = 1 << 16  # -ngl: anything above n_layers + 1 is clamped to it, as llama.cpp does (-ngl 99, 999)
MAX_BATCH = 1 << 20  # sequences decoded together (decode_step_time, roofline): far past any KV pool
MAX_TEXT_CHARS = 256  # name, key, source
MAX_TAG_CHARS = 64  # model_type, tokenizer
MAX_GGUF_TENSORS = 1 << 16  # tensors of a GGUF file (65,536); real files have 300-2,000
MAX_LORA_RANK = 1 << 16  # kv_lora_rank, q_lora_rank (MLA's compressions); DeepSeek V3: 512 and 1,536
MAX_CONV_KERNEL = 64  # linear_conv_kernel_dim (the short convolution of linear attention); Qwen3-Next: 4
# Architectures whose attention has no head_dim of its own: q/k/v are hidden_size wide, split into heads
# (transformers' Phi3Attention and Qwen2Attention derive head_dim = hidden_size // num_attention_heads).
HEAD_DIM_FROM_HIDDEN = ("phi3", "qwen2")

_INT_FIELDS = (
    # field, smallest, largest (a str names another field, read after that one is checked)
    ("num_hidden_layers", 1, MAX_LAYERS),
    ("hidden_size", 1, MAX_HIDDEN),
    ("intermediate_size", 1, MAX_INTERMEDIATE),
    ("num_attention_heads", 1, MAX_HEADS),
    ("num_key_value_heads", 1, "num_attention_heads"),
    ("vocab_size", 1, MAX_VOCAB),
    ("head_dim", 0, MAX_HEAD_DIM),
    ("max_position_embeddings", 1, MAX_CONTEXT),
    ("num_local_experts", 0, MAX_EXPERTS),
    ("num_experts_per_tok", 0, "num_local_experts"),
    ("moe_intermediate_size", 0, MAX_INTERMEDIATE),
    ("shared_expert_intermediate_size", 0, MAX_INTERMEDIATE),
    ("sliding_window", 0, "max_position_embeddings"),
    # the 2025 architectures (models.py's 2025 architectures): 0 where a model does not use the feature
    ("first_k_dense_replace", 0, "num_hidden_layers"),
    ("interleave_moe_layer_step", 0, "num_hidden_layers"),
    ("kv_lora_rank", 0, MAX_LORA_RANK),
    ("q_lora_rank", 0, MAX_LORA_RANK),
    ("qk_rope_head_dim", 0, MAX_HEAD_DIM),
    ("qk_nope_head_dim", 0, MAX_HEAD_DIM),
    ("v_head_dim", 0, MAX_HEAD_DIM),
    ("full_attention_interval", 0, "num_hidden_layers"),
    ("linear_conv_kernel_dim", 0, MAX_CONV_KERNEL),
    ("linear_key_head_dim", 0, MAX_HEAD_DIM),
    ("linear_value_head_dim", 0, MAX_HEAD_DIM),
    ("linear_num_key_heads", 0, MAX_HEADS),
    ("linear_num_value_heads", 0, MAX_HEADS),
)
_BOOL_FIELDS = ("tie_word_embeddings", "attention_bias", "qk_norm", "rope_freqs", "chunked_attention")
_TEXT_FIELDS = (
    ("name", MAX_TEXT_CHARS),
    ("key", MAX_TEXT_CHARS),
    ("source", MAX_TEXT_CHARS),
    ("model_type", MAX_TAG_CHARS),
    ("tokenizer", MAX_TAG_CHARS),
)


@dataclass(frozen=True)
class Model:
    """A transformer's shape, in Hugging Face config.json terms."""

    name: str
    model_type: str  # config.json "model_type": llama, qwen2, qwen3_moe, ...
    num_hidden_layers: int
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    head_dim: int = 0  # 0: hidden_size // num_attention_heads
    tie_word_embeddings: bool = False
    max_position_embeddings: int = 4096
    num_local_experts: int = 0  # routed experts (Mixtral: num_local_experts, Qwen: num_experts)
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0  # per-expert FFN width (0: intermediate_size)
    shared_expert_intermediate_size: int = 0
    sliding_window: int = 0  # tokens a sliding-window layer attends to
    sliding_window_pattern: tuple = ()  # per-layer True where the layer uses the window
    attention_bias: bool = False  # q/k/v projections carry biases (Qwen2)
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3)
    rope_freqs: bool = False  # llama3-style rope scaling ships a rope_freqs tensor
    source: str = ""  # where the numbers come from
    key: str = ""
    tokenizer: str = "llama3"  # tokenizer family: sizes the GGUF metadata
    gguf_tensors: tuple = ()  # real tensors from a GGUF header (model_from_gguf)
    # -- the 2025 architectures (models.py's 2025 architectures), under their config.json names; 0/False: not used ---------------
    chunked_attention: bool = False  # Llama 4: the windowed layers attend within chunks of sliding_window tokens
    first_k_dense_replace: int = 0  # DeepSeek, GLM-4.5: the first k blocks have a dense FFN (intermediate_size)
    interleave_moe_layer_step: int = 0  # Llama 4: block il is MoE when (il + 1) % step == 0 (0: every block)
    kv_lora_rank: int = 0  # MLA (DeepSeek V2/V3, Kimi K2): width of the compressed KV latent that is cached
    q_lora_rank: int = 0  # MLA: the queries' compression (0: a plain q projection, as in V2-Lite)
    qk_rope_head_dim: int = 0  # MLA: the rotary part of each key, cached beside the latent
    qk_nope_head_dim: int = 0  # MLA: the non-rotary part of each query/key head
    v_head_dim: int = 0  # MLA: each head's value width
    full_attention_interval: int = 0  # hybrids (Qwen3-Next): every n-th block has attention, the rest linear attention
    linear_conv_kernel_dim: int = 0  # linear attention (gated delta net): the short convolution's width
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    # -- a model read as typed blocks (enginelab.arch_config / arch_gguf); None: derived from the fields above --
    carried_blocks: object = None

    def __post_init__(self):
        _validate_model(self)

    def __hash__(self):
        # Models key the size and placement caches; a GGUF model's tensor table is hashed once, not per lookup.
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(tuple(getattr(self, f) for f in _MODEL_FIELD_NAMES))
            object.__setattr__(self, "_hash", h)
        return h

    # -- the typed blocks -------------------------------------------------
    @property
    def block_model(self) -> BlockModel:
        """The model as typed blocks (enginelab.blocks): the ones it was read with, else derived from its fields
        (enginelab.arch_config.blocks_from_fields), once per Model."""
        bm = self.__dict__.get("_block_model")
        if bm is None:
            bm = self.carried_blocks if self.carried_blocks is not None else _arch_config.blocks_from_fields(self)
            object.__setattr__(self, "_block_model", bm)
        return bm

    @property
    def blocks(self) -> tuple:
        """One enginelab.blocks.Block per layer: its mixer and its FFN."""
        return self.block_model.blocks

    # -- derived shapes ---------------------------------------------------
    @property
    def n_layers(self) -> int:
        return self.num_hidden_layers

    @property
    def d_head(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def n_expert(self) -> int:
        return self.num_local_experts

    @property
    def is_moe(self) -> bool:
        return self.num_local_experts > 1

    @property
    def n_gqa(self) -> int:
        return self.num_attention_heads // max(1, self.num_key_value_heads)

    def _kinds(self) -> tuple:
        """Per block: "recurrent", "mla", "swa", "full" or "none" (no cache of its own), from Model.blocks."""
        kinds = self.__dict__.get("_kinds_t")
        if kinds is None:
            out = []
            for blk in self.blocks:
                mx = blk.mixer
                if isinstance(mx, (Recurrent, ShortConv)):
                    out.append("recurrent")
                elif not isinstance(mx, Attention) or mx.kv_shared_from >= 0:
                    out.append("none")
                elif mx.kv_lora_rank:
                    out.append("mla")
                else:
                    out.append("swa" if mx.window else "full")
            kinds = tuple(out)
            object.__setattr__(self, "_kinds_t", kinds)
        return kinds

    def is_swa_layer(self, il: int) -> bool:
        """Block il attends within a window (or a chunk): llama.cpp's is_swa(il)."""
        return self._kinds()[il] == "swa"

    @property
    def is_mla(self) -> bool:
        """Multi-head latent attention (DeepSeek V2/V3, Kimi K2): the cache holds a compressed latent."""
        return "mla" in self._kinds()

    def is_recurrent_layer(self, il: int) -> bool:
        """A block with a fixed state per sequence instead of a cache (linear attention, SSM, short conv):
        llama.cpp's hparams.is_recurrent(il)."""
        return self._kinds()[il] == "recurrent"

    def is_moe_layer(self, il: int) -> bool:
        """Whether block il has routed experts (Model.blocks: not the first_k_dense_replace dense blocks of
        DeepSeek or GLM-4.5, and with interleave_moe_layer_step only every step-th block)."""
        return isinstance(self.blocks[il].ffn, MoEFFN)

    def layer_kind(self, il: int) -> str:
        """What block il keeps between tokens, as llama.cpp allocates it: "recurrent" (a fixed state per
        sequence), "mla" (the latent per token), "swa" (a window of tokens; chunked for Llama 4), "full", or
        "none" (no cache of its own: no attention, or an earlier block's cache read again)."""
        return self._kinds()[il]

    def tensors(self) -> list:
        """Every tensor of the model's GGUF file, in llama-quantize's order."""
        if self.gguf_tensors:
            ts = list(self.gguf_tensors)
        elif self.carried_blocks is not None:
            ts = _block_tensors_of(self.carried_blocks)
        else:
            ts = _tensor_inventory(self)
        return sorted(ts, key=weight_order)

    def file_only_tensors(self) -> list:
        """Tensors the GGUF file holds but llama.cpp does not load: GLM-4.5's MTP block (blk.<num_hidden_layers>),
        which llama-quantize still quantizes and counts as a layer. Empty for a model read from a GGUF header (its
        tensors() are the file's)."""
        return [] if self.gguf_tensors else _nextn_tensors(self)

    def total_params(self) -> int:
        return sum(t.n_elements for t in self.tensors())

    def active_params(self) -> int:
        """Parameters one token touches: experts scaled by used/total, no embedding table."""
        n = 0
        for t in self.tensors():
            if t.cls == "token_embd":
                continue
            n += _active_elements(self, t)
        return n


_MODEL_FIELD_NAMES = tuple(f.name for f in fields(Model))


def _validate_model(m: Model) -> None:
    """Model.__post_init__: every field of the right type and within the bounds above, and the cross-field rules.
    Raises ValueError naming the field. Integers of other integer types become int, lists become tuples."""

    def put(name, value):
        object.__setattr__(m, name, value)

    for name, max_chars in _TEXT_FIELDS:
        check_text(getattr(m, name), name, max_chars)
    for name in _BOOL_FIELDS:
        check_bool(getattr(m, name), name)
    for name, lo, hi in _INT_FIELDS:
        hi_value = getattr(m, hi) if isinstance(hi, str) else hi
        value = getattr(m, name)
        if isinstance(hi, str) and is_int(value) and lo <= value and value > hi_value:
            _check(False, name, f"must be at most {hi} ({hi_value:,}), got {brief(value)}")
        put(name, check_int(value, name, lo, hi_value))
    # cross-field rules
    heads, kv = m.num_attention_heads, m.num_key_value_heads
    _check(
        heads % kv == 0,
        "num_key_value_heads",
        f"must divide num_attention_heads ({heads:,}): each KV head serves a whole group of query heads, got {kv:,}",
    )
    if m.head_dim == 0:
        _check(
            m.hidden_size % heads == 0,
            "head_dim",
            f"is 0 (derive it from hidden_size / num_attention_heads), but hidden_size {m.hidden_size:,} is not a "
            f"multiple of num_attention_heads {heads:,}",
        )
    _check(m.d_head <= MAX_HEAD_DIM, "head_dim", f"must be at most {MAX_HEAD_DIM:,}, got {m.d_head:,}")
    if m.model_type in HEAD_DIM_FROM_HIDDEN and not m.gguf_tensors:
        _check(
            m.d_head * heads == m.hidden_size,
            "head_dim",
            f"{m.model_type} splits hidden_size into the heads: head_dim x num_attention_heads must equal "
            f"hidden_size ({m.hidden_size:,}), got {m.d_head:,} x {heads:,} = {m.d_head * heads:,}",
        )
    if m.rope_freqs:
        _check(
            m.d_head % 2 == 0,
            "head_dim",
            f"must be even with llama3 rope scaling (rope_freqs holds one frequency per pair of dimensions), "
            f"got {m.d_head:,}",
        )
    if m.num_local_experts > 1:
        _check(
            m.num_experts_per_tok >= 1,
            "num_experts_per_tok",
            f"must be at least 1 in a model with {m.num_local_experts:,} experts, got 0",
        )
    # the per-layer sliding-window pattern: one bool per layer, repeated when shorter than the model
    pattern = m.sliding_window_pattern
    if isinstance(pattern, list):
        pattern = tuple(pattern)
        put("sliding_window_pattern", pattern)
    if not (isinstance(pattern, tuple)):
        _check(False, "sliding_window_pattern", f"must be a tuple of booleans, got {brief(pattern)}")
    if not (len(pattern) <= m.num_hidden_layers):
        _check(
            False,
            "sliding_window_pattern",
            f"must have at most one entry per layer ({m.num_hidden_layers:,}), got {len(pattern):,}",
        )
    for i, v in enumerate(pattern):
        if not (isinstance(v, bool)):
            _check(False, "sliding_window_pattern", f"entry {i} must be True or False, got {brief(v)}")
    _check(
        not pattern or m.sliding_window > 0,
        "sliding_window",
        "must be > 0 when sliding_window_pattern marks sliding-window layers",
    )
    # the 2025 architectures: a feature's fields come together (models.py's 2025 architectures)
    if m.kv_lora_rank:
        for name in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            if not (getattr(m, name) >= 1):
                _check(
                    False,
                    name,
                    f"must be at least 1 in an MLA model (kv_lora_rank {m.kv_lora_rank:,}), got {getattr(m, name)}",
                )
    if m.full_attention_interval:
        for name in (
            "linear_conv_kernel_dim",
            "linear_key_head_dim",
            "linear_value_head_dim",
            "linear_num_key_heads",
            "linear_num_value_heads",
        ):
            if not (getattr(m, name) >= 1):
                _check(
                    False,
                    name,
                    f"must be at least 1 in a hybrid model (full_attention_interval {m.full_attention_interval}), "
                    f"got {getattr(m, name)}",
                )
    # the blocks it was read with: one per layer, as wide as the model
    bm = m.carried_blocks
    if bm is not None:
        if not isinstance(bm, BlockModel):
            _check(False, "carried_blocks", f"must be None or an enginelab.blocks.BlockModel, got {brief(bm)}")
        if bm.n_layer != m.num_hidden_layers or bm.globals.n_embd != m.hidden_size:
            _check(
                False,
                "carried_blocks",
                f"must have num_hidden_layers ({m.num_hidden_layers:,}) blocks of hidden_size ({m.hidden_size:,}), "
                f"got {bm.n_layer:,} of {bm.globals.n_embd:,}",
            )
    # a GGUF file's own tensors
    ts = m.gguf_tensors
    if isinstance(ts, list):
        ts = tuple(ts)
        put("gguf_tensors", ts)
    if not (isinstance(ts, tuple)):
        _check(False, "gguf_tensors", f"must be a tuple of Tensor, got {brief(ts)}")
    if not (len(ts) <= MAX_GGUF_TENSORS):
        _check(False, "gguf_tensors", f"holds {len(ts):,} tensors; at most {MAX_GGUF_TENSORS:,} are allowed")
    for t in ts:
        _check_gguf_tensor(t, m.num_hidden_layers)


def _check_gguf_tensor(t, n_layers: int) -> None:
    if not (isinstance(t, Tensor)):
        _check(False, "gguf_tensors", f"must hold Tensor objects, got {brief(t)}")
    if not (isinstance(t.name, str) and 0 < len(t.name) <= MAX_TEXT_CHARS):
        _check(
            False,
            "gguf_tensors",
            f"a tensor's name must be a non-empty string of at most {MAX_TEXT_CHARS} characters, got {brief(t.name)}",
        )
    what = f"tensor {t.name!r}"
    if not (isinstance(t.src_type, str) and t.src_type in GGML_TYPES):
        _check(False, what, f"unknown ggml type {brief(t.src_type)}")
    if not (isinstance(t.ne, tuple) and 1 <= len(t.ne) <= 4):
        _check(False, what, f"must have 1 to 4 dimensions (a tuple), got {brief(t.ne)}")
    for j, d in enumerate(t.ne):
        if not (is_int(d) and 1 <= d < 1 << 63):
            _check(False, what, f"dimension {j} must be an integer from 1 to 2^63-1, got {brief(d)}")
    if not (isinstance(t.cls, str)):
        _check(False, what, f"its class must be a string, got {brief(t.cls)}")
    if not (is_int(t.layer) and -1 <= t.layer < n_layers):
        _check(
            False,
            what,
            f"its block index must be -1 (not in a block) or from 0 to num_hidden_layers - 1 = {n_layers - 1:,}, "
            f"got {brief(t.layer)}",
        )


def _active_elements(model: Model, t: Tensor) -> float:
    if t.cls.endswith("_exps") and model.n_expert:
        return t.n_elements * model.num_experts_per_tok / model.n_expert
    return t.n_elements


# -- The 2025 architectures ------------------------------------------------------------------------------
# What differs from the textbook transformer, in the terms llama.cpp loads (src/llama-model.cpp load_hparams
# and load_tensors); the cache each kind of block keeps is in perf_model.kv.
#   Gemma 3      5 sliding-window blocks (window 512-1,024) per global one: sliding_window_pattern
#                (llama.cpp set_swa_pattern(6)); q/k norms, post-attention and post-FFN norms; tied embeddings.
#   Llama 4      chunked attention (chunks of 8,192) on 3 blocks of 4, a global one every 4th
#                (set_swa_pattern(4), swa_type CHUNKED; chunked_attention); MoE with one shared expert
#                as wide as a routed one; interleave_moe_layer_step (Scout 1: every block; Maverick 2).
#   DeepSeek V2/V3, Kimi K2: multi-head latent attention (kv_lora_rank, qk_rope_head_dim, ...): the cache
#                holds the compressed latent; first_k_dense_replace dense blocks, then routed + shared
#                experts (V3 adds a routing bias, exp_probs_b).
#   Qwen3-Next   a gated delta net (linear attention) in 3 blocks of 4 (full_attention_interval 4), gated
#                attention in the 4th; 512 experts + a gated shared expert.
#   GLM-4.5      a dense first block, then 128 routed + 1 shared expert; q/k/v biases; its MTP block
#                (num_nextn_predict_layers) is in the GGUF file but llama.cpp neither loads nor caches it.
#   gpt-oss      sliding window 128 on every other block, attention sinks, MXFP4 experts (20b: 32, 120b: 128).
def _tensor_inventory(m: Model) -> list:
    """The tensors convert_hf_to_gguf.py writes for m (names and shapes from llama-arch.cpp and
    llama-model.cpp's load_tensors; ggml order, ne[0] first)."""
    h = m.hidden_size
    ts = [Tensor("token_embd.weight", (h, m.vocab_size), "token_embd", -1)]
    if not m.tie_word_embeddings:
        ts.append(Tensor("output.weight", (h, m.vocab_size), "output", -1))
    ts.append(Tensor("output_norm.weight", (h,), "norm", -1, "F32"))
    if m.rope_freqs:
        ts.append(Tensor("rope_freqs.weight", (m.d_head // 2,), "norm", -1, "F32"))
    for il in range(m.num_hidden_layers):
        ts += _block_tensors(m, il)
    return ts


_F32_2D = ("ssm_conv1d", "shortconv.conv", ".ssm_a", ".ssm_d")  # kept f32 by the converter (llama.cpp reads them so)


def _block_tensors_of(bm: BlockModel) -> list:
    """The tensors of a model read as typed blocks (enginelab.blocks.tensors), classed as llama-quantize
    classes them (engine_io's GGUF classes): norms, biases and the convolutions f32."""
    out = []
    for name, ne in _blocks.tensors(bm):
        parts = name.split(".")
        il = int(parts[1]) if parts[0] == "blk" else -1
        if len(ne) == 1 or any(k in name for k in _F32_2D):
            out.append(Tensor(name, ne, "bias" if name.endswith(".bias") else "norm", il, "F32"))
        else:
            out.append(Tensor(name, ne, _engine_io._gguf_class(name, len(ne)), il))
    return out


def _norm(name: str, n: int, il: int) -> Tensor:
    return Tensor(name, (n,), "norm", il, "F32")


def _block_tensors(m: Model, il: int) -> list:
    """Block il's tensors: its norms, its attention (or linear attention), its FFN (dense or MoE)."""
    h, d, mt, p = m.hidden_size, m.d_head, m.model_type, f"blk.{il}."
    q_out, kv_out = m.num_attention_heads * d, m.num_key_value_heads * d
    L = [_norm(p + "attn_norm.weight", h, il)]
    # -- attention -------------------------------------------------------------------------------------------
    if m.is_recurrent_layer(il):
        L += _linear_attention_tensors(m, il)
    elif m.is_mla:
        L += _mla_tensors(m, il)
    else:
        if mt == "phi3":
            L.append(Tensor(p + "attn_qkv.weight", (h, q_out + 2 * kv_out), "attn_qkv", il))
        else:
            # Qwen3-Next's attention is gated: attn_q holds the queries and their gate (2 x n_head x head_dim)
            q_rows = 2 * q_out if mt == "qwen3_next" else q_out
            L.append(Tensor(p + "attn_q.weight", (h, q_rows), "attn_q", il))
            L.append(Tensor(p + "attn_k.weight", (h, kv_out), "attn_k", il))
            L.append(Tensor(p + "attn_v.weight", (h, kv_out), "attn_v", il))
        L.append(Tensor(p + "attn_output.weight", (q_out, h), "attn_output", il))
        if m.attention_bias:
            L += [
                Tensor(p + "attn_q.bias", (q_out,), "bias", il, "F32"),
                Tensor(p + "attn_k.bias", (kv_out,), "bias", il, "F32"),
                Tensor(p + "attn_v.bias", (kv_out,), "bias", il, "F32"),
            ]
            if mt == "gpt_oss":
                L.append(Tensor(p + "attn_output.bias", (h,), "bias", il, "F32"))
        if m.qk_norm:
            L += [_norm(p + "attn_q_norm.weight", d, il), _norm(p + "attn_k_norm.weight", d, il)]
    # -- the norms around the FFN ----------------------------------------------------------------------------
    if mt in ("gemma2", "gemma3"):
        L += [_norm(p + "post_attention_norm.weight", h, il), _norm(p + "post_ffw_norm.weight", h, il)]
    if mt == "gpt_oss":
        L.append(Tensor(p + "attn_sinks.weight", (m.num_attention_heads,), "norm", il, "F32"))
    if mt in ("gpt_oss", "glm4_moe", "qwen3_next"):
        L.append(_norm(p + "post_attention_norm.weight", h, il))  # the pre-FFN norm goes by this name here
    else:
        L.append(_norm(p + "ffn_norm.weight", h, il))
    # -- FFN -------------------------------------------------------------------------------------------------
    if m.is_moe_layer(il):
        L += _moe_tensors(m, il)
    elif mt == "phi3":
        f = m.intermediate_size
        L += [
            Tensor(p + "ffn_up.weight", (h, 2 * f), "ffn_up", il),  # gate and up fused
            Tensor(p + "ffn_down.weight", (f, h), "ffn_down", il),
        ]
    else:
        f = m.intermediate_size
        L += [
            Tensor(p + "ffn_gate.weight", (h, f), "ffn_gate", il),
            Tensor(p + "ffn_up.weight", (h, f), "ffn_up", il),
            Tensor(p + "ffn_down.weight", (f, h), "ffn_down", il),
        ]
    return L


def _mla_tensors(m: Model, il: int) -> list:
    """Multi-head latent attention as current convert_hf_to_gguf.py writes it (DeepSeek V2/V3, Kimi K2): the
    queries (through a low-rank q_a/q_b pair when q_lora_rank > 0), one projection to the latent plus the
    rotary key (attn_kv_a_mqa: kv_lora_rank + qk_rope_head_dim), and the latent's per-head up-projections
    split into attn_k_b and attn_v_b, so the cache only holds the latent (llama.cpp's is_mla path)."""
    h, p, nh = m.hidden_size, f"blk.{il}.", m.num_attention_heads
    r, rope, nope, vh = m.kv_lora_rank, m.qk_rope_head_dim, m.qk_nope_head_dim, m.v_head_dim
    L = [_norm(p + "attn_kv_a_norm.weight", r, il)]
    if m.q_lora_rank:
        q = m.q_lora_rank
        L += [
            _norm(p + "attn_q_a_norm.weight", q, il),
            Tensor(p + "attn_q_a.weight", (h, q), "attn_q_a", il),
            Tensor(p + "attn_q_b.weight", (q, nh * (nope + rope)), "attn_q_b", il),
        ]
    else:
        L.append(Tensor(p + "attn_q.weight", (h, nh * (nope + rope)), "attn_q", il))
    L += [
        Tensor(p + "attn_kv_a_mqa.weight", (h, r + rope), "attn_kv_a_mqa", il),
        Tensor(p + "attn_k_b.weight", (nope, r, nh), "attn_k_b", il),
        Tensor(p + "attn_v_b.weight", (r, vh, nh), "attn_v_b", il),
        Tensor(p + "attn_output.weight", (nh * vh, h), "attn_output", il),
    ]
    return L


def _linear_attention_tensors(m: Model, il: int) -> list:
    """A gated-delta-net block of Qwen3-Next (llama.cpp LLM_ARCH_QWEN3NEXT): q, k and v in one projection
    feeding a short causal convolution (ssm_conv1d), the output gate, the per-head decay and beta (ssm_ba,
    ssm_a, ssm_dt), a norm and the output projection."""
    h, p = m.hidden_size, f"blk.{il}."
    key_dim = m.linear_key_head_dim * m.linear_num_key_heads
    value_dim = m.linear_value_head_dim * m.linear_num_value_heads
    conv_dim = 2 * key_dim + value_dim
    nv = m.linear_num_value_heads
    return [
        Tensor(p + "attn_qkv.weight", (h, conv_dim), "attn_qkv", il),
        Tensor(p + "attn_gate.weight", (h, value_dim), "attn_gate", il),
        Tensor(p + "ssm_conv1d.weight", (m.linear_conv_kernel_dim, conv_dim), "norm", il, "F32"),
        Tensor(p + "ssm_dt.bias", (nv,), "bias", il, "F32"),
        Tensor(p + "ssm_a", (nv,), "norm", il, "F32"),
        Tensor(p + "ssm_ba.weight", (h, 2 * nv), "ssm_ba", il),
        _norm(p + "ssm_norm.weight", m.linear_value_head_dim, il),
        Tensor(p + "ssm_out.weight", (value_dim, h), "ssm_out", il),
    ]


def _moe_tensors(m: Model, il: int) -> list:
    """A block's router, routed experts and shared expert (a dense FFN every token runs)."""
    h, p, mt = m.hidden_size, f"blk.{il}.", m.model_type
    e, f = m.n_expert, m.moe_intermediate_size or m.intermediate_size
    L = [Tensor(p + "ffn_gate_inp.weight", (h, e), "ffn_gate_inp", il, "F32")]
    if mt == "gpt_oss":
        L.append(Tensor(p + "ffn_gate_inp.bias", (e,), "bias", il, "F32"))
    src = "MXFP4" if mt == "gpt_oss" else "F16"  # gpt-oss's experts are released, and converted, as MXFP4
    L += [
        Tensor(p + "ffn_gate_exps.weight", (h, f, e), "ffn_gate_exps", il, src),
        Tensor(p + "ffn_up_exps.weight", (h, f, e), "ffn_up_exps", il, src),
        Tensor(p + "ffn_down_exps.weight", (f, h, e), "ffn_down_exps", il, src),
    ]
    if mt == "gpt_oss":
        L += [
            Tensor(p + "ffn_gate_exps.bias", (f, e), "bias", il, "F32"),
            Tensor(p + "ffn_up_exps.bias", (f, e), "bias", il, "F32"),
            Tensor(p + "ffn_down_exps.bias", (h, e), "bias", il, "F32"),
        ]
    if m.shared_expert_intermediate_size:
        s = m.shared_expert_intermediate_size
        if mt in ("qwen2_moe", "qwen3_next"):  # Qwen's shared expert has a sigmoid gate of its own
            L.append(Tensor(p + "ffn_gate_inp_shexp.weight", (h,), "norm", il, "F32"))
        L += [
            Tensor(p + "ffn_gate_shexp.weight", (h, s), "ffn_gate", il),
            Tensor(p + "ffn_up_shexp.weight", (h, s), "ffn_up", il),
            Tensor(p + "ffn_down_shexp.weight", (s, h), "ffn_down", il),
        ]
    if mt in ("glm4_moe", "deepseek_v3"):  # the routing bias (e_score_correction_bias)
        L.append(Tensor(p + "exp_probs_b.bias", (e,), "bias", il, "F32"))
    return L


# convert_hf_to_gguf.py writes these architectures' multi-token-prediction blocks (num_nextn_predict_layers, 1
# in every GLM-4.5/4.6 config.json) after the main blocks, block_count counting them: a full block plus
# nextn.eh_proj (2h -> h), its own nextn.embed_tokens and nextn.shared_head_head (vocab x h) and three norms.
_NEXTN_LAYERS = {"glm4_moe": 1}


def _nextn_tensors(m: Model) -> list:
    h, v, n, L = m.hidden_size, m.vocab_size, m.num_hidden_layers, []
    for il in range(n, n + _NEXTN_LAYERS.get(m.model_type, 0)):
        p = f"blk.{il}.nextn."
        # a full block, shaped as the last main one (whose kind Model.blocks knows), under its own index
        last = f"blk.{n - 1}."
        L += [replace(t, name=f"blk.{il}." + t.name[len(last) :], layer=il) for t in _block_tensors(m, n - 1)] + [
            Tensor(p + "eh_proj.weight", (2 * h, h), "nextn", il),
            Tensor(p + "embed_tokens.weight", (h, v), "nextn", il),
            Tensor(p + "shared_head_head.weight", (h, v), "nextn", il),
            _norm(p + "enorm.weight", h, il),
            _norm(p + "hnorm.weight", h, il),
            _norm(p + "shared_head_norm.weight", h, il),
        ]
    return L


# -- Models from a Hugging Face config.json or a GGUF header ---------------------------------------------
# enginelab.engine_io reads the file into Model fields (and says which field is wrong); these two build it.


def model_from_hf_config(config: dict, name=None) -> Model:
    """A Model from a Hugging Face config.json (as a dict).

    Supports model_type llama, mistral, qwen2, qwen3, qwen3_moe, mixtral, gemma2, phi3, gpt_oss, and the 2025
    architectures gemma3, llama4, deepseek_v2, deepseek_v3, kimi_k2, qwen3_next and glm4_moe (multimodal
    configs through their text_config).  A missing or invalid field raises ValueError naming it."""
    return _engine_io.model_from_hf_config(config, name, Model)


def model_from_gguf(source, name=None) -> Model:
    """A Model from a GGUF file's header (bytes, a file object, or a parsed GGUFHeader).

    Only the header is read.  The Model's tensors are the file's own, with their
    real types, so quantize_plan(model, None) and place(model, machine, None, ...)
    use the file's exact sizes."""
    return _engine_io.model_from_gguf(source, name, Model)
