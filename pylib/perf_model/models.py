"""A Model: a transformer's shape under its config.json field names, checked when made, and the tensors
convert_hf_to_gguf.py writes for it (GGUF names, ggml's dimension order: ne[0] the row length)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from enginelab import arch_config as _arch_config
from enginelab import blocks as _blocks
from enginelab import engine_io as _engine_io
from enginelab.blocks import Attention, BlockModel, MoEFFN, Recurrent, ShortConv
from enginelab.checks import brief, check_bool, check_int, check_text, is_int
from enginelab.ggml import GGML_TYPES, Tensor, make_tensor, weight_order

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
        """Every tensor of the model's GGUF file, in llama-quantize's order (listed once per Model: every
        quantization's plan reads the same list)."""
        ts = self.__dict__.get("_tensors")
        if ts is None:
            if self.gguf_tensors:
                ts = tuple(sorted(self.gguf_tensors, key=weight_order))
            else:  # the inventory listed in that order already (the same as sorting it by weight_order)
                head, layers = self._tensor_templates()
                out = [make_tensor(name, ne, cls, -1, src) for name, ne, cls, src in head]
                for il, tpl in layers:
                    prefix = f"blk.{il}."
                    out += [make_tensor(prefix + rest, ne, cls, il, src) for rest, ne, cls, src in tpl]
                ts = tuple(out)
            object.__setattr__(self, "_tensors", ts)
        return list(ts)

    def _tensor_templates(self):
        """tensors() before it is named block by block, for a model whose tensors come from its blocks: (the
        global tensors as (name, ne, class, source type), ((block number, (name after "blk.N.", ne, class,
        source type) of each of its tensors), ...)), in the same order; equal blocks share one template.
        None for a model read from a GGUF header (its tensors are the file's). Once per Model."""
        if self.gguf_tensors:
            return None
        lay = self.__dict__.get("_layout")
        if lay is None:
            lay = _tensor_layout(self.block_model, by_name=True)
            object.__setattr__(self, "_layout", lay)
        return lay

    def file_only_tensors(self) -> list:
        """Tensors the GGUF file holds but llama.cpp does not load: GLM-4.5's MTP block (blk.<num_hidden_layers>),
        which llama-quantize still quantizes and counts as a layer. Empty for a model read from a GGUF header (its
        tensors() are the file's)."""
        if self.gguf_tensors:
            return []
        ts = self.__dict__.get("_file_only")
        if ts is None:  # (once per Model: every plan of the model asks)
            ts = tuple(_nextn_tensors(self))
            object.__setattr__(self, "_file_only", ts)
        return list(ts)

    def total_params(self) -> int:
        return sum(t.n_elements for t in self.tensors())

    def unread_tensors(self) -> frozenset:
        """Names of the tensors llama.cpp loads (memory) but no forward pass reads (no work): the K/V projections
        of a cache-sharing block whose file still holds them (enginelab.blocks.unread_tensor_names)."""
        return _blocks.unread_tensor_names(self.block_model)

    def active_params(self) -> int:
        """Parameters one token touches: experts scaled by used/total, no embedding table, nothing unread."""
        n = 0
        unread = self.unread_tensors()
        for t in self.tensors():
            if t.cls == "token_embd" or t.name in unread:
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


# -- The tensor inventory ------------------------------------------------------------------------------
# Every model's tensors come from its blocks (enginelab.blocks.tensors): the reader (enginelab.arch_config for
# a config.json or these fields, enginelab.arch_gguf for a GGUF header) sets what an architecture adds as
# block properties (q/k/v biases, attention sinks, post-norms, a gated query, fused projections, the routing
# bias...), so nothing here looks at model_type. Shapes are llama-arch.cpp / llama-model.cpp's (ggml order).


def _tensor_inventory(m: Model) -> list:
    """The tensors convert_hf_to_gguf.py writes for m, from its blocks (Model.blocks)."""
    return _block_tensors_of(m.block_model)


# kept F32 by the converter (llama.cpp reads them so): the convolutions, SSM A and D
_F32_2D = ("ssm_conv1d", "shortconv.conv", ".ssm_a", ".ssm_d")
# block tensors llama-quantize has no category for, kept under their own name as their class
_OWN_CLASS = ("attn_q_a", "attn_q_b", "attn_kv_a_mqa", "attn_k_b", "attn_v_b", "attn_gate", "ssm_ba", "ssm_out")


def _tensor_of(name: str, ne: tuple) -> Tensor:
    """A tensor classed as llama-quantize classes it (engine_io's GGUF classes): norms, biases, the router and
    the convolutions F32 (convert_hf_to_gguf.py keeps them so)."""
    parts = name.split(".")
    il = int(parts[1]) if parts[0] == "blk" else -1
    if name.endswith(".bias"):
        return Tensor(name, ne, "bias", il, "F32")
    if len(ne) == 1 or any(k in name for k in _F32_2D):
        return Tensor(name, ne, "norm", il, "F32")
    if name.endswith("ffn_gate_inp.weight"):
        return Tensor(name, ne, "ffn_gate_inp", il, "F32")
    if il >= 0 and parts[2] in _OWN_CLASS:
        return Tensor(name, ne, parts[2], il)
    return Tensor(name, ne, _engine_io._gguf_class(name, len(ne)), il)


# (in a block, the name after "blk.N", else the whole name; dimensions) -> (class, type) as _tensor_of classes it.
# _tensor_of reads only the name's text around the block number and the number of dimensions, so every block's
# copy of a tensor is classed alike: a model's hundreds of tensors take a few dozen classifications.
_CLASS_CACHE: dict = {}
_CLASS_CACHE_MAX = 4096  # names come from the blocks' few kinds; bounded all the same (then it starts over)


def _classed(key: tuple, name: str, ne: tuple) -> tuple:
    """(class, source type) of a tensor, as _tensor_of classes it, through _CLASS_CACHE."""
    kind = _CLASS_CACHE.get(key)
    if kind is None:
        t = _tensor_of(name, ne)
        if len(_CLASS_CACHE) >= _CLASS_CACHE_MAX:
            _CLASS_CACHE.clear()
        kind = _CLASS_CACHE[key] = (t.cls, t.src_type)
    return kind


def _block_template(b, g, by_name: bool) -> tuple:
    """One block's tensors as (name after "blk.N.", ne, class, source type), in the blocks' order or by name.
    enginelab.blocks.block_tensors reads the block number only to name the tensors, so every equal block (most
    models repeat one or two kinds) has the same template under its own number."""
    names = _blocks.block_tensors(b, 0, g.n_embd)
    if g.per_layer_width:  # as enginelab.blocks.tensors adds them after each block
        p, n = g.per_layer_width, g.n_embd
        names += [_blocks._t(0, "inp_gate.weight", n, p), _blocks._t(0, "proj.weight", p, n),
                  _blocks._t(0, "post_norm.weight", n)]  # fmt: skip
    # experts a MoE ships as MXFP4 (gpt-oss: released, and converted, so) are of that type
    mxfp4 = isinstance(b.ffn, MoEFFN) and b.ffn.mxfp4
    out = []
    for name, ne in names:
        rest = name[6:]  # after "blk.0."
        cls, src = _classed((True, rest, len(ne)), name, ne)
        if mxfp4 and cls.endswith("_exps"):
            src = "MXFP4"
        out.append((rest, ne, cls, src))
    if by_name:
        out.sort(key=lambda e: e[0])
    return tuple(out)


def _tensor_layout(bm: BlockModel, by_name: bool = False) -> tuple:
    """(the global tensors as (name, ne, class, source type), ((block number, its block's template), ...)): the
    inventory before it is named block by block. by_name: each part in llama-quantize's order (weight_order: the
    globals by name, then block by block, each by name), else in the blocks' own."""
    g = bm.globals
    glob = _blocks.global_tensors(g, bm.n_layer)
    head = tuple(
        (name, ne, *_classed((False, name, len(ne)), name, ne)) for name, ne in (sorted(glob) if by_name else glob)
    )
    templates = {}  # this model's distinct blocks -> their templates
    layers = []
    for il, b in enumerate(bm.blocks):
        tpl = templates.get(b)
        if tpl is None:
            tpl = templates[b] = _block_template(b, g, by_name)
        layers.append((il, tpl))
    return head, tuple(layers)


def _block_tensors_of(bm: BlockModel, by_name: bool = False) -> list:
    """The tensors of a model as typed blocks (enginelab.blocks.tensors), classed by _tensor_of, in the blocks'
    order; by_name: in llama-quantize's (weight_order: the globals by name, then block by block, each by name).
    Each distinct block is classed once (_block_template) and its tensors named per block number."""
    head, layers = _tensor_layout(bm, by_name)
    out = [make_tensor(name, ne, cls, -1, src) for name, ne, cls, src in head]
    for il, tpl in layers:
        prefix = f"blk.{il}."
        out += [make_tensor(prefix + rest, ne, cls, il, src) for rest, ne, cls, src in tpl]
    return out


def _block_tensors(m: Model, il: int) -> list:
    """Block il's tensors: its norms, its mixer, its FFN."""
    return [t for t in _tensor_inventory(m) if t.layer == il]


def _norm(name: str, n: int, il: int) -> Tensor:
    return Tensor(name, (n,), "norm", il, "F32")


# convert_hf_to_gguf.py writes these architectures' multi-token-prediction blocks (num_nextn_predict_layers, 1
# in every GLM-4.5/4.6 config.json) after the main blocks, block_count counting them: a full block plus
# nextn.eh_proj (2h -> h), its own nextn.embed_tokens and nextn.shared_head_head (vocab x h) and three norms.
_NEXTN_LAYERS = {"glm4_moe": 1}


def _nextn_tensors(m: Model) -> list:
    h, v, n, L = m.hidden_size, m.vocab_size, m.num_hidden_layers, []
    n_extra = _NEXTN_LAYERS.get(m.model_type, 0)
    # a full block, shaped as the last main one (whose kind Model.blocks knows), under its own index: the last
    # block's tensors (_block_tensors(m, n - 1), in the blocks' order) renamed
    last = _block_template(m.blocks[n - 1], m.block_model.globals, by_name=False) if n_extra else ()
    for il in range(n, n + n_extra):
        p = f"blk.{il}.nextn."
        L += [make_tensor(f"blk.{il}.{rest}", ne, cls, il, src) for rest, ne, cls, src in last] + [
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
