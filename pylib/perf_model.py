"""perf_model: where a model's bytes live and how fast the hardware moves them.

The course library's performance model for local inference engines (llama.cpp
first; vLLM and SGLang where they differ).  Pure Python, standard library only,
so it runs the same in CPython and in Pyodide.  Read it top to bottom:

  1. Units and the module's constants
  2. Models (Hugging Face config.json field names) and their GGUF tensors
     2b. the 2025 architectures: sliding and chunked layers, MLA, hybrids, MoE layouts
  3. Sizes: quantize_plan, weight_bytes, effective_bpw, file_bytes
  4. KV cache
  5. Devices and machines (one GPU, several, and how they connect)
  6. Placement: llama.cpp's -ngl / --fit / --n-cpu-moe
     6b. Several GPUs: --split-mode, --tensor-split, --main-gpu, --fit across devices
  7. Time: decode and prefill
     7b. Time on several GPUs: layer split (hops) and row split (synchronisations)
  8. The roofline
  9. Models from a Hugging Face config.json or a GGUF header

Two neighbours own the details this file builds on, and everything they define
is re-exported here, so `from perf_model import ...` finds it:

* enginelab.ggml: ggml's block types (bits per weight follow from the block
  layout), GGUF tensors, and llama-quantize's per-tensor rules (quantize_plan);
* enginelab.engine_io: llama.cpp's default flags, reading a config.json or a
  GGUF header into Model fields, and the llama-server command line.

Fitted to the module, not measured
----------------------------------
Some constants are the module's assumptions, and some were fitted so that this
file prints the module's numbers.  They are named as such where they are
defined, with the range of values that reproduces the module's printed lines:

* ``ETA_DECODE`` = 0.7 and ``ETA_PREFILL`` = 0.5: the module's stated
  assumptions (fractions of peak bandwidth and of peak FP16 FLOP/s).
* ``DECODE_OVERHEAD_S`` = 50.5 us per token, fitted: 50.4-50.8 us reproduces
  every printed digit of the module's placement and decode-curve listings
  (46-56 us reproduces them within one unit of the last digit).  It is not a
  measurement of launches or sampling.
* ``ETA_PCIE`` = 0.93, fitted: the share of the PCIe link that op offload's
  weight copies reach (0.924-0.935 exact; 0.912-0.947 within a last digit).
* The FP16 throughputs of the RTX 4060 Ti (51.75 TFLOP/s; 51.74-51.77 exact)
  and RTX 3060 (28.2; 28.15-28.21 exact) were fitted to the module's prefill
  column (flagged ``fitted=True``); the Apple GPUs' figures are approximations
  (``approx=True``).  They only affect prefill.
* ``GB`` is 10**9 bytes, the unit every printed size uses, and device memory
  ``mem_gb`` is counted in decimal GB: a "16 GB" card has 16 GiB of DRAM, but
  the driver, the CUDA/Metal context and a desktop take several hundred MiB of
  it, and 16e9 bytes stands in for what llama.cpp finds free.  On top of that
  --fit keeps ``FIT_TARGET_MIB`` = 1024 MiB free (its --fit-target default).
* The compute buffer (``compute_buffer_bytes``) is the f32 scratch of one
  micro-batch: n_ubatch x (n_vocab logits + 3 FFN-wide activations) x 4 bytes,
  about 0.3 GB for an 8B model at -ub 512, close to what llama.cpp reports.

Names: the module's plain "Q2_K" and "Q3_K" rows store every quantizable
tensor in that one ggml type; llama-quantize's Q2_K mix is "Q2_K_MIX".

Bounds: every way into the model is checked
-------------------------------------------
A Model is checked when it is made (``Model.__post_init__``), from any
source: the catalog, a config.json, a GGUF header, a URL or your own code.
Every field must be a finite number of the right type (a bool is not an
integer) within physical bounds, generous for any real model and tight
enough that no valid Model can make a function here run for seconds:

* ``MAX_LAYERS`` = 1,000 layers; ``MAX_VOCAB`` = 10**7 tokens;
  ``MAX_HIDDEN`` = 65,536; ``MAX_HEAD_DIM`` = 4,096; ``MAX_HEADS`` = 4,096
  query (and KV) heads; ``MAX_EXPERTS`` = 4,096; ``MAX_INTERMEDIATE`` =
  2**20 for the FFN widths; ``MAX_CONTEXT`` = 2**25 = 33,554,432 tokens
  (Llama 4 Scout has 10,485,760); the sliding window at most the context;
  a GGUF file's tensor table at most ``MAX_GGUF_TENSORS`` = 65,536 tensors.
* Cross-field rules: num_key_value_heads divides num_attention_heads;
  num_experts_per_tok <= num_local_experts (and >= 1 with experts);
  head_dim x heads = hidden_size where the architecture has no head_dim of
  its own (``HEAD_DIM_FROM_HIDDEN``: phi3, qwen2), and hidden_size a
  multiple of the heads when head_dim is derived; an even head_dim with
  llama3 rope scaling; a sliding-window pattern of at most one entry per
  layer; a GGUF tensor's 1-4 dimensions >= 1, its block index in range and
  its ggml type known.
* Arguments too: n_ctx, context, n_tokens, n_ubatch and n_batch up to
  ``MAX_CONTEXT``, batch up to ``MAX_BATCH`` = 2**20; a Device's memory,
  bandwidth and FLOP/s positive and finite.

Anything else raises ValueError whose message starts with the field or
argument's name (``enginelab.checks``); no other exception leaves for bad
input. The importers (``enginelab.engine_io``) check types and read a GGUF
file's per-layer head and FFN arrays as llama.cpp does (the largest layer).
"""

from __future__ import annotations

import bisect
import math
import struct
from dataclasses import dataclass, fields, replace

from enginelab import engine_io as _engine_io
from enginelab import measured as _measured  # the measured profile's parameters (section 7)
from enginelab.checks import brief, check_bool, check_int, check_number, check_text, is_int

# What moved out of this file, re-exported so `from perf_model import ...` keeps working:
#   enginelab.ggml       ggml block types, GGUF tensors, llama-quantize presets and rules
#   enginelab.engine_io  llama.cpp's defaults, config.json / GGUF header import, the llama-server command line
from enginelab.engine_io import (  # noqa: F401
    FIT_CTX_DEFAULT,
    FIT_TARGET_MIB,
    N_BATCH_DEFAULT,
    N_UBATCH_DEFAULT,
    OP_OFFLOAD_MIN_BATCH,
    SWA_ALTERNATE,
    gguf_fields,
    gguf_filename,
    hf_config_fields,
    llama_server_command,
)
from enginelab.ggml import (  # noqa: F401
    ALL_QUANTS,
    GGML_TYPES,
    GGML_TYPES_BY_ID,
    QUANT_PRESETS,
    GGMLType,
    Tensor,
    check_quant,
    ggml_type,
    main_type,
    quant_file_tag,
    quant_label,
    quant_options,
    quant_short,
    weight_order,
)
from enginelab.ggml import quantize_plan as _ggml_quantize_plan

# ---------------------------------------------------------------------------
# 1. Units and the module's constants
# ---------------------------------------------------------------------------
GB = 1e9  # decimal gigabyte: file sizes, VRAM bars, bandwidths (GB/s)
GiB = 1 << 30  # binary gibibyte: what llama.cpp's logs print as "GiB"
MiB = 1 << 20
KiB = 1 << 10

ETA_DECODE = 0.7  # the module's assumption: fraction of peak memory bandwidth decode kernels reach
ETA_PREFILL = 0.5  # the module's assumption: fraction of peak FP16 tensor FLOP/s prefill matmuls reach
# Fitted to the module's printed decode numbers (50.4-50.8 us reproduces every digit): a fixed cost per
# decode step, in seconds.  Not a measurement; the measured profile replaces it with a per-backend cost.
DECODE_OVERHEAD_S = 50.5e-6


def _check(cond: bool, arg: str, msg: str) -> None:
    if not cond:
        raise ValueError(f"{arg}: {msg}")


# ---------------------------------------------------------------------------
# 2. Models and their GGUF tensors
# ---------------------------------------------------------------------------
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
    # the 2025 architectures (section 2b): 0 where a model does not use the feature
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
    # -- the 2025 architectures (section 2b), under their config.json names; 0/False: not used ---------------
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

    def __post_init__(self):
        _validate_model(self)

    def __hash__(self):
        # Models key the size and placement caches; a GGUF model's tensor table is hashed once, not per lookup.
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(tuple(getattr(self, f) for f in _MODEL_FIELD_NAMES))
            object.__setattr__(self, "_hash", h)
        return h

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

    def is_swa_layer(self, il: int) -> bool:
        if not self.sliding_window or not self.sliding_window_pattern or self.is_recurrent_layer(il):
            return False
        return bool(self.sliding_window_pattern[il % len(self.sliding_window_pattern)])

    @property
    def is_mla(self) -> bool:
        """Multi-head latent attention (DeepSeek V2/V3, Kimi K2): the cache holds a compressed latent."""
        return self.kv_lora_rank > 0

    def is_recurrent_layer(self, il: int) -> bool:
        """A linear-attention block of a hybrid (Qwen3-Next: 3 of every 4): a fixed state, no KV cache.
        llama.cpp: hparams.recurrent_layer_arr[il] = (il + 1) % full_attention_interval != 0."""
        return self.full_attention_interval > 0 and (il + 1) % self.full_attention_interval != 0

    def is_moe_layer(self, il: int) -> bool:
        """Whether block il has routed experts: not the first_k_dense_replace dense blocks (DeepSeek, GLM-4.5),
        and with interleave_moe_layer_step only every step-th block (Llama 4 Maverick: 2)."""
        if not self.is_moe or il < self.first_k_dense_replace:
            return False
        step = self.interleave_moe_layer_step
        return step <= 1 or (il + 1) % step == 0

    def layer_kind(self, il: int) -> str:
        """What block il keeps between tokens, as llama.cpp allocates it: "recurrent" (a fixed state per
        sequence), "mla" (the latent per token), "swa" (a window of tokens; chunked for Llama 4) or "full"."""
        if self.is_recurrent_layer(il):
            return "recurrent"
        if self.is_mla:
            return "mla"
        if self.is_swa_layer(il):
            return "swa"
        return "full"

    def tensors(self) -> list:
        """Every tensor of the model's GGUF file, in llama-quantize's order."""
        if self.gguf_tensors:
            ts = list(self.gguf_tensors)
        else:
            ts = _tensor_inventory(self)
        return sorted(ts, key=weight_order)

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
    # the 2025 architectures: a feature's fields come together (section 2b)
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


# ---------------------------------------------------------------------------
# 2b. The 2025 architectures
# ---------------------------------------------------------------------------
# What differs from the textbook transformer, in the terms llama.cpp loads (src/llama-model.cpp load_hparams
# and load_tensors); the cache each kind of block keeps is in section 4.
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
    L += [
        Tensor(p + "ffn_gate_exps.weight", (h, f, e), "ffn_gate_exps", il),
        Tensor(p + "ffn_up_exps.weight", (h, f, e), "ffn_up_exps", il),
        Tensor(p + "ffn_down_exps.weight", (f, h, e), "ffn_down_exps", il),
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


def _hf(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


MODELS: dict[str, Model] = {}


def _add(key: str, **kw) -> None:
    MODELS[key] = Model(key=key, **kw)


# Every number below is the model's config.json on Hugging Face (source= link).
_add(
    "llama-3.2-1b",
    name="Llama 3.2 1B",
    model_type="llama",
    num_hidden_layers=16,
    hidden_size=2048,
    intermediate_size=8192,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=64,
    vocab_size=128256,
    tie_word_embeddings=True,
    max_position_embeddings=131072,
    rope_freqs=True,
    source=_hf("meta-llama/Llama-3.2-1B-Instruct"),
)
_add(
    "llama-3.2-3b",
    name="Llama 3.2 3B",
    model_type="llama",
    num_hidden_layers=28,
    hidden_size=3072,
    intermediate_size=8192,
    num_attention_heads=24,
    num_key_value_heads=8,
    head_dim=128,
    vocab_size=128256,
    tie_word_embeddings=True,
    max_position_embeddings=131072,
    rope_freqs=True,
    source=_hf("meta-llama/Llama-3.2-3B-Instruct"),
)
_add(
    "llama-3.1-8b",
    name="Llama 3.1 8B",
    model_type="llama",
    num_hidden_layers=32,
    hidden_size=4096,
    intermediate_size=14336,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
    vocab_size=128256,
    max_position_embeddings=131072,
    rope_freqs=True,
    source=_hf("meta-llama/Llama-3.1-8B-Instruct"),
)
_add(
    "llama-3.1-70b",
    name="Llama 3.1 70B",
    model_type="llama",
    num_hidden_layers=80,
    hidden_size=8192,
    intermediate_size=28672,
    num_attention_heads=64,
    num_key_value_heads=8,
    head_dim=128,
    vocab_size=128256,
    max_position_embeddings=131072,
    rope_freqs=True,
    source=_hf("meta-llama/Llama-3.1-70B-Instruct"),
)
_add(
    "qwen2.5-0.5b",
    name="Qwen2.5 0.5B",
    model_type="qwen2",
    num_hidden_layers=24,
    hidden_size=896,
    intermediate_size=4864,
    num_attention_heads=14,
    num_key_value_heads=2,
    vocab_size=151936,
    tie_word_embeddings=True,
    max_position_embeddings=32768,
    attention_bias=True,
    tokenizer="qwen2",
    source=_hf("Qwen/Qwen2.5-0.5B-Instruct"),
)
_add(
    "qwen2.5-7b",
    name="Qwen2.5 7B",
    model_type="qwen2",
    num_hidden_layers=28,
    hidden_size=3584,
    intermediate_size=18944,
    num_attention_heads=28,
    num_key_value_heads=4,
    vocab_size=152064,
    max_position_embeddings=32768,
    attention_bias=True,
    tokenizer="qwen2",
    source=_hf("Qwen/Qwen2.5-7B-Instruct"),
)
_add(
    "qwen2.5-14b",
    name="Qwen2.5 14B",
    model_type="qwen2",
    num_hidden_layers=48,
    hidden_size=5120,
    intermediate_size=13824,
    num_attention_heads=40,
    num_key_value_heads=8,
    vocab_size=152064,
    max_position_embeddings=32768,
    attention_bias=True,
    tokenizer="qwen2",
    source=_hf("Qwen/Qwen2.5-14B-Instruct"),
)
_add(
    "qwen2.5-32b",
    name="Qwen2.5 32B",
    model_type="qwen2",
    num_hidden_layers=64,
    hidden_size=5120,
    intermediate_size=27648,
    num_attention_heads=40,
    num_key_value_heads=8,
    vocab_size=152064,
    max_position_embeddings=32768,
    attention_bias=True,
    tokenizer="qwen2",
    source=_hf("Qwen/Qwen2.5-32B-Instruct"),
)
_add(
    "qwen2.5-72b",
    name="Qwen2.5 72B",
    model_type="qwen2",
    num_hidden_layers=80,
    hidden_size=8192,
    intermediate_size=29568,
    num_attention_heads=64,
    num_key_value_heads=8,
    vocab_size=152064,
    max_position_embeddings=32768,
    attention_bias=True,
    tokenizer="qwen2",
    source=_hf("Qwen/Qwen2.5-72B-Instruct"),
)
_add(
    "mistral-7b-v0.3",
    name="Mistral 7B v0.3",
    model_type="mistral",
    num_hidden_layers=32,
    hidden_size=4096,
    intermediate_size=14336,
    num_attention_heads=32,
    num_key_value_heads=8,
    vocab_size=32768,
    max_position_embeddings=32768,
    tokenizer="spm",
    source=_hf("mistralai/Mistral-7B-Instruct-v0.3"),
)
_add(
    "gemma-2-9b",
    name="Gemma 2 9B",
    model_type="gemma2",
    num_hidden_layers=42,
    hidden_size=3584,
    intermediate_size=14336,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=256,
    vocab_size=256000,
    tie_word_embeddings=True,
    max_position_embeddings=8192,
    sliding_window=4096,
    sliding_window_pattern=SWA_ALTERNATE,
    tokenizer="gemma",
    source=_hf("google/gemma-2-9b-it"),
)
_add(
    "qwen3-8b",
    name="Qwen3 8B",
    model_type="qwen3",
    num_hidden_layers=36,
    hidden_size=4096,
    intermediate_size=12288,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
    vocab_size=151936,
    max_position_embeddings=40960,
    qk_norm=True,
    tokenizer="qwen2",
    source=_hf("Qwen/Qwen3-8B"),
)
_add(
    "qwen3-30b-a3b",
    name="Qwen3 30B-A3B",
    model_type="qwen3_moe",
    num_hidden_layers=48,
    hidden_size=2048,
    intermediate_size=6144,
    num_attention_heads=32,
    num_key_value_heads=4,
    head_dim=128,
    vocab_size=151936,
    max_position_embeddings=40960,
    num_local_experts=128,
    num_experts_per_tok=8,
    moe_intermediate_size=768,
    qk_norm=True,
    tokenizer="qwen2",
    source=_hf("Qwen/Qwen3-30B-A3B"),
)
_add(
    "mixtral-8x7b",
    name="Mixtral 8x7B",
    model_type="mixtral",
    num_hidden_layers=32,
    hidden_size=4096,
    intermediate_size=14336,
    num_attention_heads=32,
    num_key_value_heads=8,
    vocab_size=32000,
    max_position_embeddings=32768,
    num_local_experts=8,
    num_experts_per_tok=2,
    tokenizer="spm",
    source=_hf("mistralai/Mixtral-8x7B-Instruct-v0.1"),
)
_add(
    "gpt-oss-20b",
    name="gpt-oss 20B",
    model_type="gpt_oss",
    num_hidden_layers=24,
    hidden_size=2880,
    intermediate_size=2880,
    num_attention_heads=64,
    num_key_value_heads=8,
    head_dim=64,
    vocab_size=201088,
    max_position_embeddings=131072,
    num_local_experts=32,
    num_experts_per_tok=4,
    sliding_window=128,
    sliding_window_pattern=SWA_ALTERNATE,
    attention_bias=True,
    tokenizer="o200k",
    source=_hf("openai/gpt-oss-20b"),
)
# -- the 2025 architectures (section 2b): every number is the config.json at the source= link; for the
# multimodal checkpoints (Gemma 3 4B-27B, Llama 4) its text_config, and where a config leaves a field out,
# its transformers class's default (Gemma3TextConfig: head_dim 256, vocab_size 262,208)
GEMMA3_PATTERN = (True,) * 5 + (False,)  # 5 sliding-window layers, then a global one (llama.cpp set_swa_pattern(6))
LLAMA4_PATTERN = (True,) * 3 + (False,)  # 3 chunked-attention layers, then a global one (set_swa_pattern(4))
for _key, _name, _layers, _hidden, _ff, _heads, _kv, _hd, _repo in (
    ("gemma-3-4b", "Gemma 3 4B", 34, 2560, 10240, 8, 4, 256, "google/gemma-3-4b-it"),
    ("gemma-3-12b", "Gemma 3 12B", 48, 3840, 15360, 16, 8, 256, "google/gemma-3-12b-it"),
    ("gemma-3-27b", "Gemma 3 27B", 62, 5376, 21504, 32, 16, 128, "google/gemma-3-27b-it"),
):
    _add(
        _key,
        name=_name,
        model_type="gemma3",
        num_hidden_layers=_layers,
        hidden_size=_hidden,
        intermediate_size=_ff,
        num_attention_heads=_heads,
        num_key_value_heads=_kv,
        head_dim=_hd,
        vocab_size=262208,
        tie_word_embeddings=True,
        max_position_embeddings=131072,
        sliding_window=1024,
        sliding_window_pattern=GEMMA3_PATTERN,
        qk_norm=True,
        tokenizer="gemma",
        source=_hf(_repo),
    )
_add(
    "llama-4-scout",
    name="Llama 4 Scout 17B-16E",
    model_type="llama4",
    num_hidden_layers=48,
    hidden_size=5120,
    intermediate_size=16384,  # intermediate_size_mlp: the dense FFN (Scout has none: every block is MoE)
    num_attention_heads=40,
    num_key_value_heads=8,
    head_dim=128,
    vocab_size=202048,
    max_position_embeddings=10485760,
    num_local_experts=16,
    num_experts_per_tok=1,
    moe_intermediate_size=8192,  # config.json intermediate_size: each expert's width
    shared_expert_intermediate_size=8192,  # one shared expert as wide as a routed one
    interleave_moe_layer_step=1,
    sliding_window=8192,  # attention_chunk_size
    sliding_window_pattern=LLAMA4_PATTERN,
    chunked_attention=True,
    rope_freqs=True,
    source=_hf("meta-llama/Llama-4-Scout-17B-16E-Instruct"),
)
_add(
    "deepseek-v2-lite",
    name="DeepSeek V2 Lite 16B",
    model_type="deepseek_v2",
    num_hidden_layers=27,
    hidden_size=2048,
    intermediate_size=10944,  # the dense first block
    num_attention_heads=16,
    num_key_value_heads=16,
    head_dim=192,  # qk_nope_head_dim + qk_rope_head_dim: each query head
    vocab_size=102400,
    max_position_embeddings=163840,
    num_local_experts=64,
    num_experts_per_tok=6,
    moe_intermediate_size=1408,
    shared_expert_intermediate_size=2816,  # n_shared_experts 2 x 1408
    first_k_dense_replace=1,
    kv_lora_rank=512,
    qk_rope_head_dim=64,
    qk_nope_head_dim=128,
    v_head_dim=128,
    source=_hf("deepseek-ai/DeepSeek-V2-Lite-Chat"),
)
_add(
    "qwen3-next-80b-a3b",
    name="Qwen3-Next 80B-A3B",
    model_type="qwen3_next",
    num_hidden_layers=48,
    hidden_size=2048,
    intermediate_size=5120,
    num_attention_heads=16,
    num_key_value_heads=2,
    head_dim=256,
    vocab_size=151936,
    max_position_embeddings=262144,
    num_local_experts=512,
    num_experts_per_tok=10,
    moe_intermediate_size=512,
    shared_expert_intermediate_size=512,
    qk_norm=True,
    full_attention_interval=4,
    linear_conv_kernel_dim=4,
    linear_key_head_dim=128,
    linear_value_head_dim=128,
    linear_num_key_heads=16,
    linear_num_value_heads=32,
    tokenizer="qwen2",
    source=_hf("Qwen/Qwen3-Next-80B-A3B-Instruct"),
)
_add(
    "glm-4.5-air",
    name="GLM-4.5-Air 106B-A12B",
    model_type="glm4_moe",
    num_hidden_layers=46,  # the MTP block (num_nextn_predict_layers) is in the GGUF but llama.cpp does not load it
    hidden_size=4096,
    intermediate_size=10944,
    num_attention_heads=96,
    num_key_value_heads=8,
    head_dim=128,
    vocab_size=151552,
    max_position_embeddings=131072,
    num_local_experts=128,
    num_experts_per_tok=8,
    moe_intermediate_size=1408,
    shared_expert_intermediate_size=1408,  # n_shared_experts 1
    first_k_dense_replace=1,
    attention_bias=True,
    source=_hf("zai-org/GLM-4.5-Air"),
)
_add(
    "gpt-oss-120b",
    name="gpt-oss 120B",
    model_type="gpt_oss",
    num_hidden_layers=36,
    hidden_size=2880,
    intermediate_size=2880,
    num_attention_heads=64,
    num_key_value_heads=8,
    head_dim=64,
    vocab_size=201088,
    max_position_embeddings=131072,
    num_local_experts=128,
    num_experts_per_tok=4,
    sliding_window=128,
    sliding_window_pattern=SWA_ALTERNATE,
    attention_bias=True,
    tokenizer="o200k",
    source=_hf("openai/gpt-oss-120b"),
)
_add(
    "phi-3-mini",
    name="Phi-3 mini 3.8B",
    model_type="phi3",
    num_hidden_layers=32,
    hidden_size=3072,
    intermediate_size=8192,
    num_attention_heads=32,
    num_key_value_heads=32,
    vocab_size=32064,
    max_position_embeddings=4096,
    tokenizer="spm",
    source=_hf("microsoft/Phi-3-mini-4k-instruct"),
)


def get_model(model) -> Model:
    """A Model, or the key of one in MODELS."""
    if isinstance(model, Model):
        return model
    if not (isinstance(model, str) and model in MODELS):
        _check(
            False, "model", f"must be a Model or the key of one; unknown {brief(model)}; allowed: {', '.join(MODELS)}"
        )
    return MODELS[model]


# ---------------------------------------------------------------------------
# 3. Sizes
# ---------------------------------------------------------------------------


def quantize_plan(model, quant) -> list:
    """One row per tensor: GGUF name, ggml type, element count and bytes (enginelab.ggml.quantize_plan).

    Types follow llama-quantize's per-tensor rules for a preset, or one type for every quantizable tensor
    for the plain names Q2_K/Q3_K/Q4_K/Q5_K. A model read from a GGUF header returns the file's own types
    for quant=None."""
    return _ggml_quantize_plan(get_model(model), quant)


def weight_bytes(model, quant: str) -> dict:
    """Bytes per tensor class (attn_q, ffn_down, output, norm, ...) plus 'total'."""
    out: dict = {}
    for r in quantize_plan(model, quant):
        out[r["cls"]] = out.get(r["cls"], 0) + r["bytes"]
    out["total"] = sum(v for k, v in out.items())
    return out


def effective_bpw(model, quant: str) -> float:
    """Average bits per weight over the whole file's tensors."""
    plan = quantize_plan(model, quant)
    return 8.0 * sum(r["bytes"] for r in plan) / sum(r["n_elements"] for r in plan)


# GGUF metadata: most of it is the tokenizer.  Per tokenizer family: the vocab
# strings (8-byte length + text; average text length measured on the real
# vocabularies), token_type (int32 each), scores (f32 each, SentencePiece) and
# the BPE merges (8-byte length + "a b" text).
_TOKENIZER_META = {
    #            avg token chars, has scores, merges, avg merge chars
    "llama3": (6.6, False, 280147, 10.5),
    "qwen2": (6.8, False, 151387, 10.5),
    "o200k": (7.4, False, 446189, 11.0),
    "spm": (5.5, True, 0, 0.0),
    "gemma": (7.2, True, 0, 0.0),
}
GGUF_ALIGNMENT = 32


def gguf_metadata_bytes(model) -> int:
    """Approximate size of a GGUF header: KV metadata, tokenizer and tensor table."""
    model = get_model(model)
    chars, scores, merges, mchars = _TOKENIZER_META.get(model.tokenizer, _TOKENIZER_META["llama3"])
    v = model.vocab_size
    tok = v * (8 + chars) + v * 4 + (v * 4 if scores else 0) + merges * (8 + mchars)
    kv = 4096 + 8 * 1024  # hyperparameters, chat template (a few KiB)
    table = sum(len(t.name) + 8 + 4 + 8 * len(t.ne) + 4 + 8 for t in model.tensors())
    return int(tok + kv + table)


def file_bytes(model, quant: str) -> int:
    """The whole .gguf file: header + aligned tensor data."""
    model = get_model(model)
    plan = quantize_plan(model, quant)
    data = sum(-(-r["bytes"] // GGUF_ALIGNMENT) * GGUF_ALIGNMENT for r in plan)
    head = gguf_metadata_bytes(model)
    return -(-head // GGUF_ALIGNMENT) * GGUF_ALIGNMENT + data


# ---------------------------------------------------------------------------
# 4. KV cache
# ---------------------------------------------------------------------------
# llama.cpp stores K and V per layer in -ctk/-ctv types (src/llama-kv-cache.cpp).
# Per token and layer: 2 (K and V) * n_kv_heads * head_dim elements.  A
# sliding-window layer (Gemma 2, gpt-oss) only keeps its window of tokens
# (llama_kv_cache_iswa), so its share stops growing past `sliding_window`.
#
# Four kinds of block (Model.layer_kind), each cached its own way:
#   full       every token of n_ctx: 2 x n_kv_heads x head_dim elements per token
#   swa        a sliding window (Gemma 2/3, gpt-oss) or a chunk (Llama 4): the same
#              elements per token, for fewer cells (kv_cells below)
#   mla        DeepSeek V2/V3, Kimi K2: current llama.cpp caches the compressed
#              latent, kv_lora_rank + qk_rope_head_dim elements per token, as K
#              only (V is a view of the latent: "V (f16): 0.00 MiB" in its log)
#   recurrent  Qwen3-Next's linear-attention blocks: no per-token cache, a fixed
#              state per sequence (llama-memory-recurrent.cpp), f32:
#                r = (conv_kernel - 1) x (2 x key_dim + value_dim)   the convolution's last inputs
#                s = key_head_dim x value_head_dim x value_heads       the delta rule's matrix
#
# Cells: llama-context.cpp pads n_ctx to 256 (GGML_PAD(n_ctx, 256)); with -np n
# sequences and no --kv-unified each sequence gets its own stream of
# n_ctx_seq = PAD(n_ctx / n, 256) cells.  A windowed layer's cache
# (llama-kv-cache-iswa.cpp) has PAD(min(n_ctx_seq, n_swa x (n if unified else 1)
# + n_ubatch), 256) cells per stream: the window plus one micro-batch, never more
# than the full cache.

KV_TYPES = ["f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"]
KV_PAD = 256  # llama.cpp pads n_ctx and every cache to a multiple of 256 cells (llama-context.cpp, -kv-cache-iswa.cpp)
MAX_SEQ = 1 << 16  # -np: parallel sequences (llama.cpp's LLAMA_MAX_SEQ is 256; far above it is still bounded)
RS_BYTES_PER_ELEMENT = 4  # the recurrent state's type_r and type_s: f32 (llama-memory-recurrent.cpp)


def _kv_type(kv_type: str) -> GGMLType:
    if not (isinstance(kv_type, str) and kv_type.lower() in KV_TYPES):
        _check(False, "kv_type", f"unknown KV cache type {brief(kv_type)}; allowed: {', '.join(KV_TYPES)}")
    return GGML_TYPES[kv_type.upper()]


def kv_elements_per_token_layer(model) -> int:
    """K and V elements one token adds to one attention layer: 2 (K and V) x n_kv_heads x head_dim; for MLA
    the latent, kv_lora_rank + qk_rope_head_dim (K only).

    The one KV formula: llama.cpp's cache, vLLM's pages and SGLang's cells all multiply it by their
    element size (serving_plan uses it too)."""
    model = get_model(model)
    if model.is_mla:
        return model.kv_lora_rank + model.qk_rope_head_dim
    return 2 * model.num_key_value_heads * model.d_head


def kv_bytes_per_token_layer(model, kv_type: str = "f16") -> float:
    """Bytes one token adds to one attention layer's cache in llama.cpp's -ctk/-ctv type."""
    g = _kv_type(kv_type)
    return kv_elements_per_token_layer(model) * g.type_size / g.block_size


def kv_layers(model) -> list:
    """The blocks that keep a per-token cache (all but a hybrid's recurrent ones)."""
    model = get_model(model)
    return [il for il in range(model.num_hidden_layers) if not model.is_recurrent_layer(il)]


def kv_bytes_per_token(model, kv_type: str = "f16") -> float:
    """KV bytes one more token of context adds, summed over the layers that cache tokens.

    Sliding-window layers are counted too: below the window they grow like the
    others (use kv_cache_bytes for a given context, which caps them)."""
    model = get_model(model)
    return len(kv_layers(model)) * kv_bytes_per_token_layer(model, kv_type)


def recurrent_state_elements(model) -> tuple:
    """(r, s): f32 elements of one sequence's state in one linear-attention block (see the section comment;
    llama.cpp hparams.n_embd_r() and n_embd_s() for Qwen3-Next), (0, 0) for a model without such blocks."""
    model = get_model(model)
    if not model.full_attention_interval:
        return 0, 0
    key_dim = model.linear_key_head_dim * model.linear_num_key_heads
    value_dim = model.linear_value_head_dim * model.linear_num_value_heads
    r = (model.linear_conv_kernel_dim - 1) * (2 * key_dim + value_dim)
    s = model.linear_key_head_dim * model.linear_value_head_dim * model.linear_num_value_heads
    return r, s


def recurrent_state_bytes(model) -> int:
    """Bytes of one sequence's state in one recurrent block (r + s, f32); 0 without recurrent blocks."""
    r, s = recurrent_state_elements(model)
    return RS_BYTES_PER_ELEMENT * (r + s)


def kv_layer_tokens(model, il: int, n_ctx: int) -> int:
    """Tokens layer il holds at context n_ctx: all of them, or its window (0 for a recurrent block)."""
    if type(model) is not Model or not is_int(il) or not is_int(n_ctx):  # the hot path skips the full checks
        model = get_model(model)
        check_int(il, "il", 0, model.num_hidden_layers - 1)
        check_int(n_ctx, "n_ctx", 0, MAX_CONTEXT)
    if model.is_recurrent_layer(il):
        return 0
    if model.is_swa_layer(il):
        return min(n_ctx, model.sliding_window)
    return n_ctx


def kv_cache_bytes(model, n_ctx: int, kv_type: str = "f16", layers=None) -> float:
    """Bytes of KV cache for n_ctx tokens of one sequence (over `layers`, default all): the textbook count,
    tokens x bytes per token, plus one sequence's state in a hybrid's recurrent blocks.  What llama.cpp
    allocates (its padding, windows of n_ubatch more, -np streams) is kv_allocation."""
    model = get_model(model)
    check_int(n_ctx, "n_ctx", 0, MAX_CONTEXT)
    per = kv_bytes_per_token_layer(model, kv_type)
    if layers is None:
        rng = range(model.num_hidden_layers)
    else:
        if not (not isinstance(layers, (str, bytes)) and hasattr(layers, "__iter__")):
            _check(False, "layers", f"must be None (all) or a list of layer indices, got {brief(layers)}")
        rng = list(layers)
        if not (len(rng) <= MAX_LAYERS):
            _check(False, "layers", f"at most {MAX_LAYERS:,} layer indices, got {len(rng):,}")
        for il in rng:
            check_int(il, "layers", 0, model.num_hidden_layers - 1)
    state = recurrent_state_bytes(model)
    if layers is None:  # every block, counted by kind (full context, sliding window, recurrent state)
        window = model.sliding_window
        kinds = _kv_plan(model, kv_type)[4]
        tokens = kinds.count(0) * n_ctx + kinds.count(1) * min(n_ctx, window)
        return kinds.count(2) * state + per * tokens
    return sum(state if model.is_recurrent_layer(il) else per * kv_layer_tokens(model, il, n_ctx) for il in rng)


def _pad(n: int, to: int = KV_PAD) -> int:
    return -(-n // to) * to


def kv_cells(model, il: int, n_ctx: int, n_seq: int = 1, n_ubatch: int = N_UBATCH_DEFAULT, kv_unified=False) -> int:
    """Cells llama.cpp allocates for block il, over all sequences (streams), at -c n_ctx -np n_seq -ub n_ubatch
    (see the section comment): 0 for a recurrent block."""
    if type(model) is not Model:
        model = get_model(model)
    _check_kv_args(model, il, n_ctx, n_seq, n_ubatch, kv_unified)
    kind = model.layer_kind(il)
    if kind == "recurrent":
        return 0
    ctx = _pad(n_ctx)  # llama_context: cparams.n_ctx = GGML_PAD(cparams.n_ctx, 256)
    if kv_unified:
        streams, kv_size = 1, ctx
    else:  # one stream per sequence, n_ctx_seq = PAD(n_ctx / n_seq, 256) cells each
        streams, kv_size = n_seq, _pad(ctx // n_seq)
    if kind == "swa":
        # llama_kv_cache_iswa: size_swa = GGML_PAD(min(size_base, n_swa*(unified ? n_seq_max : 1) + n_ubatch), 256)
        kv_size = _pad(min(kv_size, model.sliding_window * (n_seq if kv_unified else 1) + n_ubatch))
    return streams * kv_size


def _check_kv_args(model, il, n_ctx, n_seq, n_ubatch, kv_unified) -> None:
    if not (is_int(il) and 0 <= il < model.num_hidden_layers):
        check_int(il, "il", 0, model.num_hidden_layers - 1)
    if not (is_int(n_ctx) and 1 <= n_ctx <= MAX_CONTEXT):
        check_int(n_ctx, "n_ctx", 1, MAX_CONTEXT)
    if not (is_int(n_seq) and 1 <= n_seq <= MAX_SEQ):
        check_int(n_seq, "n_seq", 1, MAX_SEQ)
    if not (is_int(n_ubatch) and 1 <= n_ubatch <= MAX_CONTEXT):
        check_int(n_ubatch, "n_ubatch", 1, MAX_CONTEXT)
    check_bool(kv_unified, "kv_unified")


def kv_layer_bytes(
    model, il: int, n_ctx: int, kv_type: str = "f16", n_seq: int = 1, n_ubatch: int = N_UBATCH_DEFAULT, kv_unified=False
) -> float:
    """Bytes llama.cpp allocates for block il's memory: its cells x bytes per cell, or for a recurrent block
    n_seq states (llama_memory_recurrent keeps one per sequence, whatever the context)."""
    if type(model) is not Model:
        model = get_model(model)
    _check_kv_args(model, il, n_ctx, n_seq, n_ubatch, kv_unified)
    if model.is_recurrent_layer(il):
        return float(n_seq * recurrent_state_bytes(model))
    cells = kv_cells(model, il, n_ctx, n_seq, n_ubatch, kv_unified)
    return cells * kv_bytes_per_token_layer(model, kv_type)


_KV_LAYERS_CACHE: dict = {}


def _kv_layers_bytes(model, n_ctx, kv_type, n_seq, n_ubatch, kv_unified) -> list:
    """[kv_layer_bytes(model, il, ...) for every block]: each kind of block computed once (every block of a kind
    allocates the same), memoised per arguments."""
    key = (model, n_ctx, kv_type, n_seq, n_ubatch, kv_unified)
    try:
        hit = _KV_LAYERS_CACHE.get(key)
    except TypeError:  # an unhashable argument: kv_layer_bytes says what is wrong with it
        hit = None
        key = None
    if hit is None:
        by_kind = {}
        hit = []
        for il in range(model.num_hidden_layers):
            kind = model.layer_kind(il)
            if kind not in by_kind:
                by_kind[kind] = kv_layer_bytes(model, il, n_ctx, kv_type, n_seq, n_ubatch, kv_unified)
            hit.append(by_kind[kind])
        if key is not None:
            if len(_KV_LAYERS_CACHE) >= WORK_CACHE_MAX:
                _KV_LAYERS_CACHE.clear()
            _KV_LAYERS_CACHE[key] = hit
    return list(hit)


KV_KIND_LABELS = {"full": "global", "swa": "sliding", "mla": "MLA latent", "recurrent": "recurrent"}


def kv_allocation(
    model, n_ctx: int, kv_type: str = "f16", n_seq: int = 1, n_ubatch: int = N_UBATCH_DEFAULT, kv_unified=False
) -> list:
    """llama.cpp's memory for the model at these settings, one row per kind of block (what its load log
    prints as one llama_kv_cache or llama_memory_recurrent line each):

        {"kind", "layers" (count), "cells" (per block, all streams), "bytes_per_cell", "bytes"}

    bytes_per_cell is per block; a recurrent row has cells = n_seq (one state each) and bytes_per_cell the
    state's bytes."""
    model = get_model(model)
    _kv_type(kv_type)
    rows: dict = {}
    per_tok = kv_bytes_per_token_layer(model, kv_type)
    for il in range(model.num_hidden_layers):
        kind = model.layer_kind(il)
        if kind == "recurrent":
            _check_kv_args(model, il, n_ctx, n_seq, n_ubatch, kv_unified)
            cells, per = n_seq, float(recurrent_state_bytes(model))
        else:
            cells, per = kv_cells(model, il, n_ctx, n_seq, n_ubatch, kv_unified), per_tok
        r = rows.setdefault(kind, {"kind": kind, "layers": 0, "cells": cells, "bytes_per_cell": per, "bytes": 0.0})
        r["layers"] += 1
        r["bytes"] += cells * per
    order = ("full", "mla", "swa", "recurrent")
    return [rows[k] for k in order if k in rows]


# ---------------------------------------------------------------------------
# 5. Devices and machines
# ---------------------------------------------------------------------------
# Checked when made, like a Model: positive, finite figures (bounds far above any real device, so a typo or a
# hostile URL cannot make a time infinite, zero or negative).
MAX_DEVICE_GB = 1e6  # memory, decimal GB (a petabyte)
MAX_DEVICE_GBS = 1e6  # bandwidth, GB/s (HBM3e GPUs: ~8,000)
MAX_DEVICE_TFLOPS = 1e6  # FP16 TFLOP/s (B200: ~2,250 dense)


@dataclass(frozen=True)
class Device:
    """One memory + compute device: a GPU, or the CPU with its system RAM."""

    name: str
    mem_gb: float  # capacity as sold: a "12 GB" card (12 GiB; the course profile counts it as 12e9 bytes)
    bandwidth_gbs: float  # peak memory bandwidth, GB/s
    # Peak FP16 rate, TFLOP/s: for a GPU the datasheet's dense FP16 tensor figure with FP32 accumulate; for
    # Apple the GPU's FP32 rate; for a CPU the peak FP32 FMA rate of all its cores.
    fp16_tflops: float
    source: str = ""
    approx: bool = False  # True where a figure is our approximation, not a vendor spec
    fitted: bool = False  # True where a figure was fitted to the module's printed numbers
    backend: str = ""  # llama.cpp backend: cuda, rocm, vulkan, metal, sycl, cpu ("" = by its role: see device_backend)
    cores: int = 0  # a CPU's physical cores (0: estimated from fp16_tflops, see enginelab.measured.cpu_cores)
    # where fp16_tflops was fitted to the module (fitted=True): the datasheet figure, which the measured
    # profile uses instead (0: fp16_tflops is the datasheet's)
    spec_tflops: float = 0.0
    # a GPU's non-tensor FP32 rate (CUDA cores, shader ALUs), TFLOP/s: the measured profile's rate for the work
    # a quantized matmul does outside the tensor cores (dequantizing tiles). 0: estimated (see
    # enginelab.measured.vector_tflops)
    fp32_tflops: float = 0.0

    def __post_init__(self):
        check_text(self.name, "name", MAX_TEXT_CHARS)
        check_number(self.mem_gb, "mem_gb", 0.0, MAX_DEVICE_GB)
        check_number(self.bandwidth_gbs, "bandwidth_gbs", 0.0, MAX_DEVICE_GBS, lo_open=True)
        check_number(self.fp16_tflops, "fp16_tflops", 0.0, MAX_DEVICE_TFLOPS, lo_open=True)
        check_text(self.source, "source", MAX_TEXT_CHARS)
        check_bool(self.approx, "approx")
        check_bool(self.fitted, "fitted")
        if not (isinstance(self.backend, str) and self.backend in ("",) + _measured.BACKENDS):
            _check(False, "backend", f"unknown backend {brief(self.backend)}; allowed: {', '.join(_measured.BACKENDS)}")
        check_int(self.cores, "cores", 0, 1 << 16)
        check_number(self.spec_tflops, "spec_tflops", 0.0, MAX_DEVICE_TFLOPS)
        check_number(self.fp32_tflops, "fp32_tflops", 0.0, MAX_DEVICE_TFLOPS)

    @property
    def mem_bytes(self) -> float:
        """Capacity in the course profile's decimal bytes (the module's convention)."""
        return self.mem_gb * GB

    @property
    def mem_gib_bytes(self) -> float:
        """Capacity in real bytes: a "12 GB" card has 12 GiB."""
        return self.mem_gb * GiB

    @property
    def bandwidth(self) -> float:
        return self.bandwidth_gbs * GB

    @property
    def flops(self) -> float:
        return self.fp16_tflops * 1e12


@dataclass(frozen=True)
class Interconnect:
    """How the GPUs of a machine reach each other (see LINKS).

    kind: "pcie" (through the host: a copy goes GPU -> host -> GPU, two trips over the link), "p2p" (PCIe
    peer-to-peer, one trip), "nvlink" (a bridge between the cards), "rpc" (llama.cpp's RPC backend over a
    network: every hand-over is a round trip). bandwidth_gbs: one direction, GB/s. latency_us: what one
    transfer or synchronisation costs whatever its size (driver calls and events on a local link, the network
    round trip for RPC)."""

    kind: str
    bandwidth_gbs: float = 0.0  # 0: the machine's PCIe link (pcie and p2p)
    latency_us: float = 10.0
    name: str = ""

    def __post_init__(self):
        if not (isinstance(self.kind, str) and self.kind in LINK_KINDS):
            _check(False, "kind", f"unknown link kind {brief(self.kind)}; allowed: {', '.join(LINK_KINDS)}")
        check_number(self.bandwidth_gbs, "bandwidth_gbs", 0.0, MAX_DEVICE_GBS)
        check_number(self.latency_us, "latency_us", 0.0, 1e7)
        check_text(self.name, "name", MAX_TEXT_CHARS)


LINK_KINDS = ("pcie", "p2p", "nvlink", "rpc")


@dataclass(frozen=True)
class Machine:
    """A GPU (or none, or several), the host's RAM and CPU, and the PCIe link between them.

    gpu: one Device, None, or a tuple of Devices in llama.cpp's device order (CUDA0, CUDA1, ...); a tuple of
    one is that Device. `gpus` always gives the tuple. With several GPUs, `interconnect` says how they reach
    each other (None: PCIe through the host at pcie_gbs).

    For Apple silicon, `unified=True`: the GPU device *is* the unified memory,
    and the GPU may use `gpu_share` of it (macOS's recommendedMaxWorkingSetSize,
    about 75% on the larger configurations)."""

    name: str
    gpu: Device | tuple | None
    ram: Device
    pcie_gbs: float = 0.0
    unified: bool = False
    gpu_share: float = 0.75
    drive_gbs: float = 5.0  # NVMe sequential read, GB/s (PCIe 4.0 drive)
    key: str = ""
    interconnect: Interconnect | None = None  # how several GPUs reach each other (None: PCIe via the host)

    def __post_init__(self):
        check_text(self.name, "name", MAX_TEXT_CHARS)
        # several GPUs: a tuple (or list) of Devices; a tuple of one is that Device (section 6b)
        if isinstance(self.gpu, list):
            object.__setattr__(self, "gpu", tuple(self.gpu))
        if isinstance(self.gpu, tuple):
            _check(len(self.gpu) > 0, "gpu", "an empty tuple: pass None for a machine without a GPU")
            if not (len(self.gpu) <= MAX_GPUS):
                _check(False, "gpu", f"at most {MAX_GPUS} GPUs, got {len(self.gpu):,}")
            for i, d in enumerate(self.gpu):
                if not (isinstance(d, Device)):
                    _check(False, "gpu", f"entry {i} must be a Device, got {brief(d)}")
            if len(self.gpu) == 1:
                object.__setattr__(self, "gpu", self.gpu[0])
            else:
                _check(not self.unified, "gpu", "a unified-memory machine has one GPU")
        if not (self.gpu is None or isinstance(self.gpu, (Device, tuple))):
            _check(False, "gpu", f"must be a Device, a tuple of Devices or None, got {brief(self.gpu)}")
        if not (self.interconnect is None or isinstance(self.interconnect, Interconnect)):
            _check(False, "interconnect", f"must be an Interconnect or None, got {brief(self.interconnect)}")
        if not (isinstance(self.ram, Device)):
            _check(False, "ram", f"must be a Device, got {brief(self.ram)}")
        check_number(self.pcie_gbs, "pcie_gbs", 0.0, MAX_DEVICE_GBS)
        check_bool(self.unified, "unified")
        check_number(self.gpu_share, "gpu_share", 0.0, 1.0, lo_open=True)
        check_number(self.drive_gbs, "drive_gbs", 0.0, MAX_DEVICE_GBS, lo_open=True)
        check_text(self.key, "key", MAX_TEXT_CHARS)

    @property
    def pcie(self) -> float:
        return self.pcie_gbs * GB

    @property
    def gpus(self) -> tuple:
        """The GPUs as a tuple: () without one, (gpu,) with one."""
        if self.gpu is None:
            return ()
        return self.gpu if isinstance(self.gpu, tuple) else (self.gpu,)

    @property
    def multi_gpu(self) -> bool:
        return len(self.gpus) > 1

    @property
    def link(self) -> Interconnect:
        """The GPU-to-GPU link: the interconnect given, with the PCIe bandwidth filled in for pcie/p2p."""
        ic = self.interconnect or Interconnect("pcie", 0.0, LINK_LATENCY_US["pcie"], "PCIe through the host")
        if ic.bandwidth_gbs <= 0:
            ic = replace(ic, bandwidth_gbs=self.pcie_gbs or PCIE4_X16_GBS)
        return ic


MAX_GPUS = 16  # llama.cpp's GGML_CUDA_MAX_DEVICES
PCIE4_X16_GBS = 31.5  # a GPU link when the machine names none (PCIe 4.0 x16, one direction)
# What one transfer or synchronisation between two GPUs costs whatever its size, microseconds: device switches,
# events and the waits of a split matmul (ggml-cuda copies its input to every GPU and gathers the slices back).
# pcie = 30 us is fitted to one published comparison, not measured here: two RTX 3090s, Qwen3-14B Q4_0, where
# mainline's --split-mode row decodes at about 0.77x of --split-mode layer (ik_llama.cpp PR #1106: "graph" is
# 1.53x layer and 2x row); P2P and NVLink skip the host and are set lower by assumption. llama.cpp's RPC backend
# sends a command and waits for the reply: a hand-over costs a network round trip and the server's handling.
LINK_LATENCY_US = {"pcie": 30.0, "p2p": 20.0, "nvlink": 10.0, "rpc": 300.0}
# Ready-made links (bandwidth 0: the machine's own PCIe link).
LINKS: dict[str, Interconnect] = {
    "pcie": Interconnect("pcie", 0.0, LINK_LATENCY_US["pcie"], "PCIe through the host"),
    "p2p": Interconnect("p2p", 0.0, LINK_LATENCY_US["p2p"], "PCIe peer-to-peer"),
    # NVIDIA's RTX 3090 NVLink bridge: 112.5 GB/s both directions (GA102 whitepaper), 56.25 each way
    "nvlink": Interconnect("nvlink", 56.25, LINK_LATENCY_US["nvlink"], "NVLink bridge (RTX 3090)"),
    # llama.cpp's RPC backend over Ethernet: 1 GbE carries about 117 MB/s of payload, 10 GbE about 1.17 GB/s
    "rpc-1g": Interconnect("rpc", 0.117, LINK_LATENCY_US["rpc"], "RPC over 1 Gb Ethernet"),
    "rpc-10g": Interconnect("rpc", 1.17, 150.0, "RPC over 10 Gb Ethernet"),
}


# System RAM.  Dual-channel peak = 2 channels * 8 bytes * MT/s.
DDR4_DUAL = Device(
    "DDR4-3200 dual channel",
    64,
    51.2,
    1.0,
    source="JEDEC DDR4-3200: 3200 MT/s x 8 B x 2 channels = 51.2 GB/s",
    approx=True,
    cores=8,
)  # CPU FLOP/s: ~1 TFLOP/s FP32 AVX2 on 8 cores (approximation)
DDR5_DUAL = Device(
    "DDR5-5600 dual channel",
    64,
    89.6,
    1.5,
    source="JEDEC DDR5-5600: 5600 MT/s x 8 B x 2 channels = 89.6 GB/s",
    approx=True,
    cores=8,
)  # CPU FLOP/s: ~1.5 TFLOP/s FP32 AVX-512/AVX2 on 8 cores (approximation)

_NV = "https://www.nvidia.com/en-us/geforce/graphics-cards/"
# The RTX 3060's and RTX 4060 Ti's FP16 figures were fitted to the module's prefill column (28.15-28.21 and
# 51.74-51.77 TFLOP/s reproduce it), not taken from a datasheet.
RTX_3060 = Device(
    "RTX 3060",
    12,
    360,
    28.2,
    fitted=True,
    spec_tflops=25.6,
    fp32_tflops=12.7,
    source=_NV + "30-series/rtx-3060-3060ti/ (360 GB/s); FP16 TFLOP/s fitted to the module (GA106 datasheet: "
    "25.6 dense FP16 tensor with FP32 accumulate)",
)
RTX_4060_TI = Device(
    "RTX 4060 Ti 16GB",
    16,
    288,
    51.75,
    fitted=True,
    spec_tflops=44.1,
    fp32_tflops=22.1,
    source=_NV + "40-series/rtx-4060-4060ti/ (288 GB/s); FP16 TFLOP/s fitted to the module (Ada whitepaper: "
    "44.1 dense FP16 tensor with FP32 accumulate)",
)
RTX_3090 = Device(
    "RTX 3090",
    24,
    936,
    71.0,
    fp32_tflops=35.6,
    source="NVIDIA Ampere GA102 whitepaper: 936 GB/s, 71 TFLOP/s FP16 tensor (FP32 acc.), 35.6 TFLOP/s FP32",
)
RTX_4090 = Device(
    "RTX 4090",
    24,
    1008,
    165.2,
    fp32_tflops=82.6,
    source="NVIDIA Ada Lovelace whitepaper: 1008 GB/s, 165.2 TFLOP/s FP16 tensor (FP32 acc.), 82.6 FP32",
)
RTX_5090 = Device(
    "RTX 5090",
    32,
    1792,
    209.5,
    fp32_tflops=104.8,
    source="NVIDIA Blackwell RTX whitepaper: 1792 GB/s, 209.5 TFLOP/s FP16 tensor (FP32 acc.), 104.8 FP32",
)
M4_PRO = Device(
    "M4 Pro (48 GB)",
    48,
    273,
    8.5,
    approx=True,
    source="https://www.apple.com/macbook-pro/specs/ (273 GB/s); GPU TFLOP/s approximated",
)
M4_MAX = Device(
    "M4 Max 40-core (128 GB)",
    128,
    546,
    17.0,
    approx=True,
    source="https://www.apple.com/macbook-pro/specs/ (546 GB/s); GPU TFLOP/s approximated",
)


def _ram(gb: float, base: Device = DDR5_DUAL) -> Device:
    return replace(base, mem_gb=gb)


MACHINES: dict[str, Machine] = {
    "rtx3060": Machine("RTX 3060 12 GB + DDR4", RTX_3060, _ram(32, DDR4_DUAL), 31.5, key="rtx3060"),
    "rtx4060ti": Machine("RTX 4060 Ti 16 GB + DDR5", RTX_4060_TI, _ram(64), 15.75, key="rtx4060ti"),
    "rtx3090": Machine("RTX 3090 24 GB + DDR4", RTX_3090, _ram(64, DDR4_DUAL), 31.5, key="rtx3090"),
    "rtx4090": Machine("RTX 4090 24 GB + DDR5", RTX_4090, _ram(64), 31.5, key="rtx4090"),
    "rtx5090": Machine("RTX 5090 32 GB + DDR5", RTX_5090, _ram(96), 63.0, key="rtx5090"),
    "m4pro": Machine(
        "MacBook Pro M4 Pro 48 GB",
        M4_PRO,
        replace(M4_PRO, name="M4 Pro CPU", fp16_tflops=1.0, cores=10),  # 10 performance cores
        0.0,
        unified=True,
        key="m4pro",
    ),
    "m4max": Machine(
        "MacBook Pro M4 Max 128 GB",
        M4_MAX,
        replace(M4_MAX, name="M4 Max CPU", fp16_tflops=1.5, cores=12),  # 12 performance cores
        0.0,
        unified=True,
        key="m4max",
    ),
    "cpu-ddr5": Machine("CPU only, DDR5-5600 dual channel", None, _ram(64), 0.0, key="cpu-ddr5"),
}
# PCIe: 4.0 x16 = 31.5 GB/s per direction, 4.0 x8 (RTX 4060 Ti) = 15.75, 5.0 x16 = 63.0.

# The discrete GPU cards of the catalog, under the key of the machine that has them: the cards a machine with
# several GPUs is built from (e.g. Machine("2x RTX 3090", (GPUS["rtx3090"],) * 2, ...)).
GPUS: dict[str, Device] = {k: m.gpu for k, m in MACHINES.items() if m.gpu is not None and not m.unified}


def side_device(machine: Machine, side: str):
    """The Device that runs `side` ("gpu", "gpu0", "gpu1", ... or "cpu") of a machine (None: no such GPU)."""
    if side.startswith("gpu"):
        gpus = machine.gpus
        i = int(side[3:]) if len(side) > 3 else 0
        return gpus[i] if i < len(gpus) else None
    return machine.ram


def device_backend(machine: Machine, side: str) -> str:
    """The llama.cpp backend that runs `side` ("gpu", "gpu0", "gpu1", ... or "cpu") of a machine: the Device's
    own backend, else cpu for the host, metal for Apple's unified GPU, cuda for a discrete GPU. "gpu" is the
    first GPU."""
    dev = side_device(machine, side)
    if dev is not None and dev.backend:
        return dev.backend
    if not side.startswith("gpu"):
        return "cpu"
    return "metal" if machine.unified else "cuda"


def get_machine(machine) -> Machine:
    if isinstance(machine, Machine):
        return machine
    if not (isinstance(machine, str) and machine in MACHINES):
        _check(
            False,
            "machine",
            f"must be a Machine or the key of one; unknown {brief(machine)}; allowed: {', '.join(MACHINES)}",
        )
    return MACHINES[machine]


# ---------------------------------------------------------------------------
# 6. Placement: where each tensor lives (llama.cpp -ngl, --fit, --n-cpu-moe)
# ---------------------------------------------------------------------------
# The course's placement rule: blocks 0 .. ngl-1 and their KV cache go to the
# GPU, the rest stay in system RAM, and ngl = n_layers + 1 also moves the output
# head (and the final norm).  token_embd always stays in host memory: llama.cpp
# allocates the input layer on the CPU because a lookup reads one row of it.
# (llama.cpp itself counts -ngl from the *last* block, i_gpu_start =
# n_layer + 1 - ngl; for the bytes in each tier the two are nearly the same.)
#
# Memory per device:
#   weights      the tensors placed there (expert tensors of the first n_cpu_moe
#                blocks stay in RAM even when their block is on the GPU)
#   KV cache     kv_cache_bytes of the device's blocks, allocated for all n_ctx
#   compute      compute_buffer_bytes(): scratch for one micro-batch
#   margin       --fit-target (1024 MiB) kept free on the GPU
#
# With n_gpu_layers=None the placement is what --fit chooses: the largest ngl
# whose GPU total plus the margin fits the device.  An explicit ngl is taken as
# given; if it does not fit, the Placement says so (fits=False, error=...) the
# way llama.cpp's allocation would fail, instead of raising.


@dataclass(frozen=True)
class Placement:
    model: Model
    machine: Machine
    quant: str
    n_ctx: int
    kv_type: str
    n_gpu_layers: int
    n_cpu_moe: int
    auto: bool  # ngl chosen by --fit
    layer_device: tuple  # per block: "gpu" or "cpu"
    output_on_gpu: bool
    gpu_weights: float
    gpu_kv: float
    gpu_compute: float
    cpu_weights: float
    cpu_kv: float
    cpu_compute: float
    gpu_capacity: float  # bytes llama.cpp may use on the GPU (0 without one)
    cpu_capacity: float
    fit_margin: float
    n_ubatch: int = N_UBATCH_DEFAULT
    fits: bool = True
    error: str | None = None
    requested_bytes: float = 0.0  # what the failing device needs
    free_bytes: float = 0.0  # what it has free (capacity less the margin on a GPU)
    overflow_bytes: float = 0.0
    failing_device: str = ""
    fit_next_gpu_total: float | None = None  # --fit: GPU bytes at one more layer (the one that did not fit)
    profile: str = "course"  # how capacities were counted, and the timing profile used by default
    n_seq: int = 1  # -np: sequences the KV cache is allocated for (one stream each unless kv_unified)
    kv_unified: bool = False  # --kv-unified: one stream shared by all sequences
    # Several GPUs (section 6b; a machine with one GPU leaves these at their defaults, see per_gpu):
    split_mode: str = "layer"  # llama.cpp --split-mode: none, layer or row
    main_gpu: int = 0  # --main-gpu: the one GPU used with split_mode none
    tensor_split: tuple = ()  # --tensor-split as llama.cpp gets it (given, or what --fit wrote); () = by free memory
    fit_wrote_split: bool = False  # tensor_split is --fit's layers per GPU (not the reader's -ts)
    gpu_devices: tuple = ()  # one DeviceUse per GPU of the machine
    layer_gpu: tuple = ()  # per block: the index of its GPU in machine.gpus, None on the CPU
    output_gpu: int | None = None  # the GPU holding the output layer, None on the CPU
    row_split: bool = False  # split_mode row on a backend with a split buffer: matrices split by rows
    row_fractions: tuple = ()  # with row_split: each GPU's share of every matrix's rows

    @property
    def per_gpu(self) -> tuple:
        """One DeviceUse per GPU: what each holds and how much room it has (one entry for a single GPU)."""
        if self.gpu_devices or self.machine.gpu is None:
            return self.gpu_devices
        layers = tuple(il for il, d in enumerate(self.layer_device) if d == "gpu")
        if self.output_on_gpu:
            layers += (self.model.num_hidden_layers,)
        dev = self.machine.gpu
        return (
            DeviceUse(
                0, dev.name, layers, self.gpu_weights, self.gpu_kv, self.gpu_compute, self.gpu_capacity, self.fit_margin
            ),
        )

    def __post_init__(self):
        # place() makes valid Placements; this catches a hand-made one before it reaches the timing functions
        if not (isinstance(self.model, Model)):
            _check(False, "model", f"must be a Model, got {brief(self.model)}")
        if not (isinstance(self.machine, Machine)):
            _check(False, "machine", f"must be a Machine, got {brief(self.machine)}")
        n = self.model.num_hidden_layers
        _check(
            isinstance(self.layer_device, tuple)
            and len(self.layer_device) == n
            and all(d == "gpu" or d == "cpu" for d in self.layer_device),
            "layer_device",
            f"must be a tuple of {n} entries, each 'gpu' or 'cpu'",
        )
        _kv_type(self.kv_type)
        check_int(self.n_ctx, "n_ctx", 1, MAX_CONTEXT)
        check_int(self.n_gpu_layers, "n_gpu_layers", 0, n + 1)
        check_int(self.n_cpu_moe, "n_cpu_moe", 0, n)
        check_int(self.n_ubatch, "n_ubatch", 1, MAX_CONTEXT)
        check_int(self.n_seq, "n_seq", 1, MAX_SEQ)
        check_bool(self.kv_unified, "kv_unified")
        if self.machine.multi_gpu:  # section 6b's fields, which the timing functions read
            ng = len(self.machine.gpus)
            if self.split_mode not in SPLIT_MODES:
                _check(False, "split_mode", f"must be one of {', '.join(SPLIT_MODES)}")
            _check(
                isinstance(self.layer_gpu, tuple)
                and len(self.layer_gpu) == n
                and all(g is None or (is_int(g) and 0 <= g < ng) for g in self.layer_gpu),
                "layer_gpu",
                f"must be a tuple of {n} GPU indices (None: the CPU), each below {ng}",
            )
            _check(
                self.output_gpu is None or (is_int(self.output_gpu) and 0 <= self.output_gpu < ng),
                "output_gpu",
                f"must be None (the CPU) or 0 to {ng - 1}",
            )
            _check(
                isinstance(self.gpu_devices, tuple) and len(self.gpu_devices) == ng,
                "gpu_devices",
                f"must hold one DeviceUse per GPU ({ng})",
            )
            if self.row_split:
                _check(
                    isinstance(self.row_fractions, tuple)
                    and len(self.row_fractions) == ng
                    and abs(sum(self.row_fractions) - 1.0) < 1e-6,
                    "row_fractions",
                    f"must be {ng} shares that sum to 1",
                )

    @property
    def gpu_total(self) -> float:
        return self.gpu_weights + self.gpu_kv + self.gpu_compute

    @property
    def cpu_total(self) -> float:
        return self.cpu_weights + self.cpu_kv + self.cpu_compute

    @property
    def n_layers(self) -> int:
        return self.model.num_hidden_layers

    @property
    def gpu_layers(self) -> int:
        return sum(1 for d in self.layer_device if d == "gpu")

    @property
    def full_offload(self) -> bool:
        return self.n_gpu_layers >= self.model.num_hidden_layers + 1

    def as_dict(self) -> dict:
        out = {
            k: getattr(self, k)
            for k in (
                "quant",
                "n_ctx",
                "kv_type",
                "n_gpu_layers",
                "n_cpu_moe",
                "auto",
                "gpu_weights",
                "gpu_kv",
                "gpu_compute",
                "gpu_total",
                "cpu_weights",
                "cpu_kv",
                "cpu_compute",
                "cpu_total",
                "gpu_capacity",
                "cpu_capacity",
                "fit_margin",
                "fits",
                "error",
                "requested_bytes",
                "free_bytes",
                "overflow_bytes",
            )
        }
        out["model"] = self.model.name
        out["machine"] = self.machine.name
        return out


@dataclass(frozen=True)
class DeviceUse:
    """What one GPU holds in a placement (llama.cpp's per-device model, KV and compute buffers)."""

    index: int  # position in machine.gpus: llama.cpp's device order (CUDA0, CUDA1, ...)
    name: str
    layers: tuple  # the layers placed here: block indices, and n_layers for the output layer
    weights: float  # model buffer, bytes
    kv: float  # KV buffer
    compute: float  # compute buffer
    capacity: float  # what llama.cpp may use on it (course: decimal GB; measured: GiB less the driver's share)
    margin: float  # --fit-target kept free (when it holds anything)

    @property
    def total(self) -> float:
        return self.weights + self.kv + self.compute

    @property
    def free(self) -> float:
        """Room left after its buffers and the margin (negative: over by that much)."""
        return self.capacity - self.total - (self.margin if self.total > 0 else 0.0)

    @property
    def fits(self) -> bool:
        return self.free >= 0


def compute_buffer_bytes(model, n_ubatch: int = N_UBATCH_DEFAULT, with_logits: bool = True) -> float:
    """Scratch memory ggml's scheduler reserves for one micro-batch, f32 activations:
    the logits (n_ubatch x n_vocab), the three FFN-wide tensors of the widest
    matmul (gate, up and their product).  Matches llama.cpp's reported CUDA compute
    buffer (about 0.3 GB for an 8B model at -ub 512) to within a few percent."""
    model = get_model(model)
    check_int(n_ubatch, "n_ubatch", 1, MAX_CONTEXT)
    check_bool(with_logits, "with_logits")
    ff = model.intermediate_size
    if model.is_moe:
        ff = max(model.moe_intermediate_size or ff, 1) * max(1, model.num_experts_per_tok)
    per_token = (model.vocab_size if with_logits else 0) + 3 * ff
    return 4.0 * n_ubatch * per_token


_LAYER_CACHE: dict = {}
_CACHE_MAX_ENTRIES = 512  # (model, quant) pairs kept; then the caches start over (memory stays bounded)


def _layer_bytes(model: Model, quant) -> tuple:
    """Per block: (bytes of non-expert tensors, bytes of expert tensors); plus non-block bytes."""
    key = (model, quant)
    if key not in _LAYER_CACHE:
        if len(_LAYER_CACHE) >= _CACHE_MAX_ENTRIES:
            _LAYER_CACHE.clear()
        _LAYER_CACHE[key] = _layer_bytes_uncached(model, quant)
    return _LAYER_CACHE[key]


def _layer_bytes_uncached(model: Model, quant) -> tuple:
    n = model.num_hidden_layers
    dense, experts = [0] * n, [0] * n
    other = {}
    for r in quantize_plan(model, quant):
        il = r["layer"]
        if il >= 0:
            if r["cls"].endswith("_exps"):
                experts[il] += r["bytes"]
            else:
                dense[il] += r["bytes"]
        else:
            other[r["cls"]] = other.get(r["cls"], 0) + r["bytes"]
    return dense, experts, other


# What the driver, the CUDA/ROCm context and a desktop hold before llama.cpp asks for free memory, MiB.
# Seen in real logs: an RTX 4090 D reports 24563 MiB total and 23042 MiB free (ollama issue #8923, Linux);
# an RTX 5060 Ti 16 GB, 15055 MiB free of about 16310 (lmstudio-bug-tracker issue #1360, Windows): 1.2-1.5 GiB.
# The measured profile subtracts this from the card's GiB; the course profile keeps the module's decimal GB.
DRIVER_RESERVE_MIB = 1300


def _gpu_capacity(machine: Machine, profile: str = "course") -> float:
    """Bytes llama.cpp may use on the GPU (0 without one)."""
    if machine.gpu is None:
        return 0.0
    if profile == "measured":
        if machine.unified:  # macOS's recommendedMaxWorkingSetSize: a share of the real GiB
            return machine.gpu.mem_gib_bytes * machine.gpu_share
        return max(0.0, machine.gpu.mem_gib_bytes - DRIVER_RESERVE_MIB * MiB)
    if machine.unified:
        return machine.gpu.mem_bytes * machine.gpu_share
    return machine.gpu.mem_bytes


def _ram_capacity(machine: Machine, profile: str = "course") -> float:
    return machine.ram.mem_gib_bytes if profile == "measured" else machine.ram.mem_bytes


def place(
    model,
    machine,
    quant: str = "Q4_K_M",
    n_ctx: int = 4096,
    kv_type: str = "f16",
    n_gpu_layers=None,
    n_cpu_moe: int = 0,
    n_ubatch: int = N_UBATCH_DEFAULT,
    fit_target_mib: float = FIT_TARGET_MIB,
    profile: str = "course",
    tensor_split=None,
    split_mode: str = "layer",
    main_gpu: int = 0,
    n_seq: int = 1,
    kv_unified: bool = False,
) -> Placement:
    """Place a model on a machine the way llama.cpp would (see the section comment).

    profile: "course" counts device memory in the module's decimal GB; "measured" in real GiB, less what
    the driver holds (DRIVER_RESERVE_MIB). The placement remembers it: decode_step_time and prefill_time use
    it when not told otherwise.

    Several GPUs (section 6b): tensor_split (-ts: one weight per GPU, None = by free memory), split_mode
    (-sm: "none", "layer" or "row") and main_gpu (-mg). With one GPU they change nothing.

    n_seq (-np) and kv_unified (--kv-unified) size the KV cache as llama.cpp does (kv_layer_bytes: padded
    cells, windows, one recurrent state per sequence); each block's cache lives on its block's device."""
    model, machine = get_model(model), get_machine(machine)
    profile = _check_profile(profile)
    if quant is not None or not model.gguf_tensors:
        check_quant(quant)
    _kv_type(kv_type)
    if not (is_int(n_ctx) and 0 < n_ctx <= MAX_CONTEXT):
        _check(False, "n_ctx", f"context length must be a positive integer up to {MAX_CONTEXT:,}, got {brief(n_ctx)}")
    n = model.num_hidden_layers
    if not (n_gpu_layers is None or (is_int(n_gpu_layers) and 0 <= n_gpu_layers <= MAX_NGL)):
        _check(
            False, "n_gpu_layers", f"must be None (auto) or an integer from 0 to {MAX_NGL:,}, got {brief(n_gpu_layers)}"
        )
    if not (is_int(n_cpu_moe) and 0 <= n_cpu_moe <= n):
        _check(False, "n_cpu_moe", f"must be an integer from 0 to {n}, got {brief(n_cpu_moe)}")
    if not (is_int(n_ubatch) and 1 <= n_ubatch <= MAX_CONTEXT):
        _check(False, "n_ubatch", f"must be a positive integer up to {MAX_CONTEXT:,}, got {brief(n_ubatch)}")
    check_number(fit_target_mib, "fit_target_mib", 0.0, MAX_DEVICE_GB * 1e3)
    check_int(n_seq, "n_seq", 1, MAX_SEQ)
    check_bool(kv_unified, "kv_unified")
    n_ctx, n_cpu_moe, n_ubatch, n_seq = int(n_ctx), int(n_cpu_moe), int(n_ubatch), int(n_seq)
    # as llama.cpp: -ngl past the model's n_layer + 1 (the habitual -ngl 99) means every layer and the head
    n_gpu_layers = None if n_gpu_layers is None else min(int(n_gpu_layers), n + 1)
    if n_cpu_moe and not model.is_moe:
        n_cpu_moe = 0
    tensor_split, split_mode, main_gpu = check_split(machine, tensor_split, split_mode, main_gpu)
    if machine.multi_gpu:
        return _place_multi(
            model,
            machine,
            quant,
            n_ctx,
            kv_type,
            n_gpu_layers,
            n_cpu_moe,
            n_ubatch,
            fit_target_mib,
            profile,
            tensor_split,
            split_mode,
            main_gpu,
            n_seq,
            kv_unified,
        )

    dense, experts, other = _layer_bytes(model, quant)
    # each block's cache (or recurrent state) as llama.cpp allocates it, on the block's device
    kv_layer = _kv_layers_bytes(model, n_ctx, kv_type, n_seq, n_ubatch, kv_unified)
    out_bytes = sum(v for k, v in other.items() if k != "token_embd")
    embd = other.get("token_embd", 0)
    tied = "output" not in other
    cap_gpu = _gpu_capacity(machine, profile)
    cap_cpu = _ram_capacity(machine, profile)
    margin = fit_target_mib * MiB if machine.gpu is not None else 0.0

    def build(ngl: int) -> Placement:
        if machine.gpu is None:
            ngl = 0
        on_gpu = tuple("gpu" if il < ngl else "cpu" for il in range(n))
        out_gpu = ngl > n
        gw = gk = cw = ck = 0.0
        for il in range(n):
            exp_cpu = il < n_cpu_moe
            if on_gpu[il] == "gpu":
                gw += dense[il] + (0 if exp_cpu else experts[il])
                cw += experts[il] if exp_cpu else 0
                gk += kv_layer[il]
            else:
                cw += dense[il] + experts[il]
                ck += kv_layer[il]
        any_gpu = machine.gpu is not None and (ngl > 0)
        if machine.unified and any_gpu:
            gw += embd  # Metal maps the whole file into one buffer: the working-set limit counts token_embd
        else:
            cw += embd  # the input layer: a lookup reads one row, from host memory
        if out_gpu:
            # with tied embeddings the output layer's token_embd is a duplicated tensor: a GPU copy (on
            # unified memory the mapping already holds it)
            gw += out_bytes + (embd if tied and not machine.unified else 0)
        else:
            cw += out_bytes  # a tied head on the CPU reads the mapped token_embd: no second copy
        # The GPU runs every micro-batch matmul (op offload included), so its
        # buffer holds the logits; the host keeps a small staging buffer.
        gc = compute_buffer_bytes(model, n_ubatch) if any_gpu else 0.0
        cc = compute_buffer_bytes(model, n_ubatch) if not any_gpu else 4.0 * n_ubatch * 2 * model.hidden_size
        cap_cpu_eff = cap_cpu  # (unified memory: one pool, which the CPU side shares too)
        p = Placement(
            model,
            machine,
            quant,
            n_ctx,
            kv_type,
            ngl,
            n_cpu_moe,
            n_gpu_layers is None,
            on_gpu,
            out_gpu,
            gw,
            gk,
            gc,
            cw,
            ck,
            cc,
            cap_gpu,
            cap_cpu_eff,
            margin,
            n_ubatch,
            profile=profile,
            n_seq=n_seq,
            kv_unified=kv_unified,
        )
        return _check_fit(p)

    if n_gpu_layers is not None or machine.gpu is None:
        return build(n_gpu_layers or 0)

    # --fit: the largest ngl whose GPU total keeps the margin free.  GPU bytes
    # grow with ngl (tested), so a binary search finds it.
    tried: dict = {}

    def gpu_total(ngl: int) -> float:
        if ngl not in tried:
            tried[ngl] = build(ngl).gpu_total
        return tried[ngl]

    def ok(ngl: int) -> bool:
        return gpu_total(ngl) + margin <= cap_gpu

    if ok(n + 1):
        best = n + 1
    else:
        lo, hi = 0, n + 1  # ok(lo) assumed (0 layers: only nothing on the GPU), not ok(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if ok(mid):
                lo = mid
            else:
                hi = mid
        best = lo
    # the first -ngl that did not fit (what stopped --fit), for explanations
    nxt = gpu_total(best + 1) if best < n + 1 else None
    return replace(build(best), auto=True, fit_next_gpu_total=nxt)


def _check_fit(p: Placement) -> Placement:
    m = p.machine
    if m.unified:
        # unified memory: everything comes out of one pool; the GPU part may use gpu_share of it
        need_gpu = p.gpu_total
        if p.gpu_total > 0 and need_gpu + p.fit_margin > p.gpu_capacity:
            return _fail(p, "GPU (unified)", need_gpu, p.gpu_capacity - p.fit_margin)
        need = p.gpu_total + p.cpu_total
        if need > p.cpu_capacity:
            return _fail(p, "unified memory", need, p.cpu_capacity)
        return p
    if p.gpu_total > 0 and p.gpu_total + p.fit_margin > p.gpu_capacity:
        return _fail(p, "GPU", p.gpu_total, p.gpu_capacity - p.fit_margin)
    if p.cpu_total > p.cpu_capacity:
        return _fail(p, "RAM", p.cpu_total, p.cpu_capacity)
    return p


def _fail(p: Placement, dev: str, need: float, free: float) -> Placement:
    msg = (
        f"would fail to allocate on {dev}: needs {need / GB:.2f} GB, {max(free, 0) / GB:.2f} GB free "
        f"(over by {(need - free) / GB:.2f} GB)"
    )
    return replace(
        p,
        fits=False,
        error=msg,
        requested_bytes=need,
        free_bytes=max(free, 0.0),
        overflow_bytes=need - free,
        failing_device=dev,
    )


# ---------------------------------------------------------------------------
# 6b. Several GPUs: --split-mode, --tensor-split, --main-gpu, and --fit across devices
# ---------------------------------------------------------------------------
# llama.cpp gives every layer one device (src/llama-model.cpp, llama_model::load_tensors):
#
#   splits      = tensor_split (-ts), or each device's free memory when -ts is not given (or all zero),
#                 summed up and normalised into split points, in float32: -ts 3,1 -> [0.75, 1.0]
#   i_gpu_start = max(n_layer + 1 - n_gpu_layers, 0)     the first layers stay on the CPU
#   act         = min(n_gpu_layers, n_layer + 1)
#   layer il = 0 .. n_layer (il = n_layer is the output layer) goes to the CPU if il < i_gpu_start, else to
#       devices[upper_bound(splits, (il - i_gpu_start) / act)]
#
# so each GPU holds a contiguous run of layers, the last one the output layer, and the input layer
# (token_embd) stays on the CPU.  Each layer's KV cache lives on its layer's device (src/llama-kv-cache.cpp,
# dev_layer(il)).  --split-mode none keeps only --main-gpu in the device list (src/llama.cpp).  With
# -ngl below n_layer + 1 it is the *first* layers that stay on the CPU (a single-GPU machine keeps the
# module's rule, see section 6; the bytes per tier are nearly the same).
#
# --split-mode row: every device's buffer list starts with its backend's split buffer type
# (make_gpu_buft_list), so each 2-D matrix of a GPU layer, and the output matrix, has its rows spread over
# all the GPUs: by -ts, or by each card's total memory without it (ggml-cuda's default_tensor_split).  The
# layer's norms, its expert tensors (mul_mat_id cannot read a split buffer) and its KV cache stay on the
# layer's device.  Only CUDA, ROCm and SYCL offer a split buffer; on Vulkan, Metal or RPC devices row
# places like layer.  (ggml-cuda also rounds each slice to whole tiles of 64-128 rows; ignored here.)
#
# --fit across devices (common/fit.cpp, common_params_fit_impl), when -ngl is left to it:
#   1. the default placement (every layer, split by free memory): when every GPU keeps its margin
#      (--fit-target, 1024 MiB per device) free, nothing changes;
#   2. it would shrink the context only where -c was not given (place() always has n_ctx);
#   3. otherwise it fills the GPUs back to front: the last GPU takes as many layers from the end (the output
#      layer first) as fit in its free memory less the margin, then the GPU before it, and so on; what is
#      left stays on the CPU.  It then sets -ngl to their sum and -ts to the layers per GPU.
#   With -ts given or --split-mode row it leaves the weights where they are.  (An MoE model is filled here
#   with whole layers and --n-cpu-moe as given; llama.cpp first fills "dense-only" layers with the experts
#   in RAM and then moves experts in, which this does not model.)
#
# Compute buffers per device, from the ggml graph's largest live tensors (checked against llama.cpp's own
# lines in data/lab/logs/rpc-*.log, Llama 3.2 1B on two RPC devices and the host, to 0.01 MiB):
#   a GPU running blocks      4 * ub * (3 * n_ff + 3 * n_embd) + 2 * ub * n_ctx
#                             (FFN activations, the residual stream, the f16 KQ mask)
#   the GPU with the output   at least 4 * ub * (n_vocab + n_embd)  (the logits)
#   the host                  4 * ub * 2 * n_embd + 2 * ub * n_ctx, or, running blocks, the block formula
#                             + 4 * ub * n_embd
# A machine with one GPU keeps the module's compute_buffer_bytes (its printed numbers stand).

SPLIT_MODES = ("none", "layer", "row")
ROW_SPLIT_BACKENDS = ("cuda", "rocm", "sycl")  # the backends with ggml_backend_split_buffer_type


def check_split(machine, tensor_split=None, split_mode: str = "layer", main_gpu: int = 0) -> tuple:
    """(tensor_split, split_mode, main_gpu) checked against the machine's GPUs, as place() uses them.

    tensor_split: None or one number >= 0 per GPU (fewer: the rest are 0, as llama.cpp's zeroed array);
    returned as a tuple of floats, or () when it is None or all zero (llama.cpp then splits by free memory).
    Raises ValueError naming the argument."""
    machine = get_machine(machine)
    n = len(machine.gpus)
    if not (isinstance(split_mode, str) and split_mode in SPLIT_MODES):
        _check(False, "split_mode", f"unknown split mode {brief(split_mode)}; allowed: {', '.join(SPLIT_MODES)}")
    if not (isinstance(main_gpu, int) and not isinstance(main_gpu, bool) and 0 <= main_gpu < max(n, 1)):
        _check(
            False,
            "main_gpu",
            f"must be an integer from 0 to {max(n, 1) - 1} (the machine has {n} GPU{'s' if n != 1 else ''}), "
            f"got {brief(main_gpu)}",
        )
    if tensor_split is None:
        return (), split_mode, main_gpu
    if not (not isinstance(tensor_split, (str, bytes, dict)) and hasattr(tensor_split, "__iter__")):
        _check(
            False, "tensor_split", f"must be None or a list of numbers, one per GPU, got {type(tensor_split).__name__}"
        )
    vals = tuple(v for _, v in zip(range(MAX_GPUS + 1), tensor_split))  # never more than one past the limit
    if not (len(vals) <= max(n, 1)):
        _check(
            False, "tensor_split", f"{len(vals)} values for {n} GPU{'s' if n != 1 else ''}: give at most one per GPU"
        )
    for i, v in enumerate(vals):
        if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= 1e9):
            _check(False, "tensor_split", f"value {i + 1} must be a number from 0 to 1e9, got {brief(v)}")
    if not any(vals):
        return (), split_mode, main_gpu
    return tuple(float(v) for v in vals) + (0.0,) * (n - len(vals)), split_mode, main_gpu


def _f32(x: float) -> float:
    """x rounded to a C float: llama.cpp computes the split points in float32."""
    return struct.unpack("f", struct.pack("f", x))[0]


def split_points(weights) -> list:
    """llama.cpp's split points for per-device weights: the running sums, normalised (float32, as load_tensors)."""
    acc, out = 0.0, []
    for w in weights:
        acc = _f32(acc + _f32(w))
        out.append(acc)
    _check(acc > 0, "tensor_split", "the weights must not all be zero")
    return [_f32(x / acc) for x in out]


def layer_devices(n_layer: int, n_gpu_layers: int, splits) -> tuple:
    """For layers 0 .. n_layer (n_layer: the output layer), the index of the device in `splits` that gets it,
    or None for the CPU: load_tensors' get_layer_buft_list."""
    start = max(n_layer + 1 - n_gpu_layers, 0)
    act = min(n_gpu_layers, n_layer + 1) if splits else 0
    out = []
    for il in range(n_layer + 1):
        if il < start or il - start >= act:
            out.append(None)
        else:
            out.append(min(bisect.bisect_right(splits, _f32((il - start) / act)), len(splits) - 1))
    return tuple(out)


def _device_capacity(dev: Device, profile: str) -> float:
    """What llama.cpp finds free on one discrete GPU (course: decimal GB; measured: GiB less the driver)."""
    if profile == "measured":
        return max(0.0, dev.mem_gib_bytes - DRIVER_RESERVE_MIB * MiB)
    return dev.mem_bytes


_MATRIX_CACHE: dict = {}


def _layer_matrix_bytes(model: Model, quant) -> list:
    """Per block: bytes of its 2-D matrices outside the experts (what a row split spreads over the GPUs)."""
    key = (model, quant)
    if key not in _MATRIX_CACHE:
        if len(_MATRIX_CACHE) > 64:
            _MATRIX_CACHE.clear()
        out = [0] * model.num_hidden_layers
        for r in quantize_plan(model, quant):
            if r["layer"] >= 0 and r["cls"] not in ("norm", "bias") and not r["cls"].endswith("_exps"):
                out[r["layer"]] += r["bytes"]
        _MATRIX_CACHE[key] = out
    return _MATRIX_CACHE[key]


def _multi_compute_bytes(model: Model, n_ubatch: int, n_ctx: int, blocks: bool, output: bool, host=False) -> float:
    """One device's compute buffer on a machine with several GPUs (see the section comment)."""
    ff = model.intermediate_size
    if model.is_moe:
        ff = max(model.moe_intermediate_size or ff, 1) * max(1, model.num_experts_per_tok)
    h = model.hidden_size
    mask = 2.0 * n_ubatch * n_ctx  # the f16 KQ mask: one row per token of the micro-batch, one column per cell
    layer = 4.0 * n_ubatch * (3 * ff + 3 * h) + mask
    if host:
        c = layer + 4.0 * n_ubatch * h if blocks else 4.0 * n_ubatch * 2 * h + mask
    else:
        c = layer if blocks else 0.0
    if output:
        c = max(c, 4.0 * n_ubatch * (model.vocab_size + h))
    return c


def _place_multi(
    model,
    machine,
    quant,
    n_ctx,
    kv_type,
    n_gpu_layers,
    n_cpu_moe,
    n_ubatch,
    fit_target_mib,
    profile,
    ts,
    sm,
    mg,
    n_seq=1,
    kv_unified=False,
) -> Placement:
    """place() on a machine with several GPUs (see the section comment)."""
    n = model.num_hidden_layers
    gpus = machine.gpus
    ng = len(gpus)
    active = (mg,) if sm == "none" else tuple(range(ng))
    caps = [_device_capacity(d, profile) for d in gpus]
    cap_cpu = _ram_capacity(machine, profile)
    margin = fit_target_mib * MiB
    dense, experts, other = _layer_bytes(model, quant)
    matrix = _layer_matrix_bytes(model, quant)
    # each block's cache as llama.cpp allocates it (section 4), on its block's device
    kv_layer = _kv_layers_bytes(model, n_ctx, kv_type, n_seq, n_ubatch, kv_unified)
    embd = other.get("token_embd", 0)
    tied = "output" not in other
    out_matrix = other.get("output", embd)  # the output projection: a GPU copy of token_embd when tied
    out_small = sum(v for k, v in other.items() if k not in ("token_embd", "output"))
    row = (
        sm == "row"
        and len(active) > 1
        and all(device_backend(machine, f"gpu{i}") in ROW_SPLIT_BACKENDS for i in active)
    )
    row_fr: tuple = ()
    if row:
        w = ts if ts else tuple(d.mem_gb for d in gpus)  # ggml-cuda's default: each card's total memory
        s = sum(w)
        row_fr = tuple(x / s for x in w)
    # the split by free memory when -ts is not given (llama.cpp reads each device's free memory)
    default_weights = [caps[i] for i in active]

    def build(ngl: int, weights, auto: bool, ts_out: tuple, fit_wrote: bool = False) -> Placement:
        if not any(weights):
            weights = [1.0] * len(active)  # no GPU layers at all: the split does not matter
        devs = layer_devices(n, ngl, split_points(weights))
        lg = tuple(None if d is None else active[d] for d in devs)
        w, k, has_blocks = [0.0] * ng, [0.0] * ng, [False] * ng
        cw = ck = 0.0
        cpu_blocks = False
        for il in range(n):
            g = lg[il]
            if g is None:
                cw += dense[il] + experts[il]
                ck += kv_layer[il]
                cpu_blocks = True
                continue
            has_blocks[g] = True
            k[g] += kv_layer[il]
            if il < n_cpu_moe:
                cw += experts[il]  # --n-cpu-moe: this block's experts stay in RAM
            else:
                w[g] += experts[il]
            if row:
                w[g] += dense[il] - matrix[il]  # norms and biases on the layer's device
                for i in range(ng):
                    w[i] += matrix[il] * row_fr[i]
            else:
                w[g] += dense[il]
        cw += embd  # the input layer: always on the CPU
        og = lg[n]
        if og is not None:
            w[og] += out_small
            if row:
                for i in range(ng):
                    w[i] += out_matrix * row_fr[i]
            else:
                w[og] += out_matrix
        else:
            cw += out_small + (0 if tied else out_matrix)  # a tied head on the CPU reads token_embd itself
        comp = [_multi_compute_bytes(model, n_ubatch, n_ctx, has_blocks[i], og == i) for i in range(ng)]
        cc = _multi_compute_bytes(model, n_ubatch, n_ctx, cpu_blocks, og is None, host=True)
        uses = tuple(
            DeviceUse(
                i,
                gpus[i].name,
                tuple(il for il in range(n + 1) if lg[il] == i),
                w[i],
                k[i],
                comp[i],
                caps[i],
                margin,
            )
            for i in range(ng)
        )
        used = sum(1 for u in uses if u.total > 0)
        p = Placement(
            model=model,
            machine=machine,
            quant=quant,
            n_ctx=n_ctx,
            kv_type=kv_type,
            n_gpu_layers=ngl,
            n_cpu_moe=n_cpu_moe,
            auto=auto,
            layer_device=tuple("cpu" if g is None else "gpu" for g in lg[:n]),
            output_on_gpu=og is not None,
            gpu_weights=sum(w),
            gpu_kv=sum(k),
            gpu_compute=sum(comp),
            cpu_weights=cw,
            cpu_kv=ck,
            cpu_compute=cc,
            gpu_capacity=sum(caps),
            cpu_capacity=cap_cpu,
            fit_margin=margin * used,
            n_ubatch=n_ubatch,
            profile=profile,
            split_mode=sm,
            main_gpu=mg,
            tensor_split=ts_out,
            fit_wrote_split=fit_wrote,
            gpu_devices=uses,
            layer_gpu=lg[:n],
            output_gpu=og,
            row_split=row,
            row_fractions=row_fr,
            n_seq=n_seq,
            kv_unified=kv_unified,
        )
        return _check_fit_multi(p)

    weights = [ts[i] for i in active] if ts else default_weights
    if n_gpu_layers is not None:
        return build(n_gpu_layers, weights, False, ts)
    full = build(n + 1, weights, True, ts)
    if ts or row or all(u.fits for u in full.gpu_devices):
        return full  # step 1 (nothing to change), or a placement --fit does not change
    # step 3: fill the GPUs back to front, whole layers, the output layer first
    lb = [dense[il] + (0 if il < n_cpu_moe else experts[il]) + kv_layer[il] for il in range(n)]
    prefix = [0.0]
    for b in lb:
        prefix.append(prefix[-1] + b)
    out_bytes = out_small + out_matrix

    def need(end: int, count: int) -> float:
        """Bytes on a GPU holding layers end-count .. end-1 (end = n + 1 includes the output layer)."""
        if count <= 0:
            return 0.0
        first, last = end - count, min(end, n)
        b = prefix[last] - prefix[first] if last > first else 0.0
        has_out = end == n + 1
        if has_out:
            b += out_bytes
        return b + _multi_compute_bytes(model, n_ubatch, n_ctx, last > first, has_out)

    counts = [0] * len(active)
    end = n + 1
    for j in reversed(range(len(active))):
        target = caps[active[j]] - margin
        lo, hi = 0, end  # need(end, lo) fits; find the largest count that does
        if need(end, hi) <= target:
            lo = hi
        else:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if need(end, mid) <= target:
                    lo = mid
                else:
                    hi = mid
        counts[j] = lo if target >= 0 else 0
        end -= counts[j]
    ts_fit = tuple(float(counts[active.index(i)]) if i in active else 0.0 for i in range(ng))
    return build(sum(counts), counts, True, ts_fit if sum(counts) else (), fit_wrote=bool(sum(counts)))


def _check_fit_multi(p: Placement) -> Placement:
    for u in p.gpu_devices:
        if u.total > 0 and not u.fits:
            return _fail(p, f"GPU {u.index} ({u.name})", u.total, u.capacity - u.margin)
    if p.cpu_total > p.cpu_capacity:
        return _fail(p, "RAM", p.cpu_total, p.cpu_capacity)
    return p


# ---------------------------------------------------------------------------
# 7. Time: decode and prefill, in two profiles
# ---------------------------------------------------------------------------
# Both profiles time the same work: what each device moves and computes in one
# forward pass (_decode_work, _prefill_work).  They differ in how fast the
# hardware does it:
#
#   profile="course"    the module's assumptions, and the default of every
#                       function here, so the module's listings print its
#                       numbers: ETA_DECODE of peak bandwidth, ETA_PREFILL of
#                       peak FP16 FLOP/s, a fixed DECODE_OVERHEAD_S per step.
#   profile="measured"  the practitioner's estimate: a few physical parameters
#                       per backend (CUDA, ROCm, Vulkan, Metal, SYCL, CPU),
#                       fitted on published llama-bench runs; see
#                       enginelab.measured for each parameter and its reason.
#
# Decode (one token per sequence per pass): every device streams the weights it
# holds plus its blocks' KV cache; the devices run one after the other (layer by
# layer), so their times add.  In the course profile
#   t_token = sum_d max(B_d / (ETA_DECODE * beta_d), F_d / (ETA_PREFILL * P_d)) + DECODE_OVERHEAD_S
# An MoE block reads only the experts a token is routed to (num_experts_per_tok
# of num_local_experts).  With a batch of B sequences, the weights are read once
# per pass, each sequence's KV once, and the matmul FLOPs grow with B: a device
# takes the longer of its memory time and its compute time (the roofline).
# The output head is read every step too; with tied embeddings (no
# output.weight) it is token_embd itself, all of it.

PROFILES = ("course", "measured")


def _check_profile(profile, placement=None) -> str:
    if profile is None:
        return placement.profile if placement is not None else "course"
    if profile not in PROFILES:
        _check(False, "profile", f"unknown profile {brief(profile)}; allowed: {', '.join(PROFILES)}")
    return profile


@dataclass(frozen=True)
class Work:
    """What one device does in one forward pass (decode step or prefill micro-batch)."""

    weight_bytes: float = 0.0  # weights streamed from its memory
    kv_bytes: float = 0.0  # K and V read (decode) from its memory
    flops: float = 0.0  # matmul FLOPs (2 per weight per token) plus attention
    attn_flops: float = 0.0  # the attention part of flops
    layers: int = 0  # blocks that run here (each costs the backend's per-layer graph overhead)
    weights_by_type: tuple = ()  # ((ggml type, weights streamed), ...): what dequantization works on
    head_on_this: bool = False  # the output head runs here
    expert_calls: float = 0.0  # MoE: routed experts multiplied (distinct experts touched, summed over blocks)
    expert_flops: float = 0.0  # MoE: the part of flops in routed experts' matmuls (the measured profile's MoE rate)
    moe_layers: int = 0  # MoE: blocks whose routed experts run here (each adds its router and gather kernels)
    rows_by_type: tuple = ()  # ((ggml type, matrix rows multiplied), ...): one dot product each per token
    expert_weights_by_type: tuple = ()  # MoE: the part of weights_by_type in routed experts (MUL_MAT_ID kernels)

    @property
    def bytes(self) -> float:
        return self.weight_bytes + self.kv_bytes


_WORK_CACHE: dict = {}
WORK_CACHE_MAX = 512  # distinct (model, quant) pairs kept


def _layer_plan(m: Model, quant) -> tuple:
    """(blocks, head, row_blocks, head_rows), from one walk of the quantize plan, cached per (model, quant):
    per block {type: (dense weights, expert weights)} and the head's {type: weights}; then the same in matrix
    rows (a tensor of ne = (n_per_row, ...) has n_elements / n_per_row rows, each one dot product per token)."""
    key = (m, quant)
    if key not in _WORK_CACHE:
        blocks = [dict() for _ in range(m.n_layers)]
        rows = [dict() for _ in range(m.n_layers)]
        head: dict = {}
        head_rows: dict = {}
        plan = quantize_plan(m, quant)
        tied = not any(r["cls"] == "output" for r in plan)
        for r in plan:
            il, typ, n = r["layer"], r["type"], r["n_elements"]
            ne = r.get("ne") or (n,)
            nr = n / max(1, ne[0]) if len(ne) >= 2 else 0  # norms and biases: added, not multiplied
            if il >= 0:
                expert = r["cls"].endswith("_exps")
                d, e = blocks[il].get(typ, (0, 0))
                blocks[il][typ] = (d, e + n) if expert else (d + n, e)
                if nr:
                    d, e = rows[il].get(typ, (0, 0))
                    rows[il][typ] = (d, e + nr) if expert else (d + nr, e)
            elif r["cls"] == "output" or (tied and r["cls"] == "token_embd"):
                head[typ] = head.get(typ, 0) + n
                if nr:
                    head_rows[typ] = head_rows.get(typ, 0) + nr
            elif r["cls"] != "token_embd":
                head[typ] = head.get(typ, 0) + n  # output_norm: runs with the head
        if len(_WORK_CACHE) >= WORK_CACHE_MAX:  # bounded, like the layer-bytes cache: a long session stays flat
            _WORK_CACHE.clear()
        _WORK_CACHE[key] = (blocks, head, rows, head_rows)
    return _WORK_CACHE[key]


def _head_bytes(p: Placement) -> float:
    """Bytes of the output projection (and final norm): output.weight, or token_embd when tied."""
    _dense, _experts, other = _layer_bytes(p.model, p.quant)
    head = sum(v for k, v in other.items() if k != "token_embd")
    if "output" not in other:  # tied embeddings: the head is token_embd itself
        head += other.get("token_embd", 0)
    return head


def _moe_fraction(m: Model, tokens: int) -> tuple:
    """(share of expert weights touched by `tokens` tokens, share each token multiplies): k/E per token,
    and 1 - (1 - k/E)^tokens distinct experts over the batch."""
    if not m.is_moe:
        return 1.0, 1.0
    k, e = m.num_experts_per_tok, m.n_expert
    return 1.0 - (1.0 - k / e) ** tokens, k / e


# What each kind of block reads and computes per sequence in one decode step (Model.layer_kind):
#   full / swa  its cached tokens (all of them, or its window), K and V: 4 x n_head x head_dim FLOPs per
#               cached token (QK^T and AV, 2 each)
#   mla         the latent of every cached token; with the up-projections absorbed (llama.cpp's MLA path)
#               each head scores over kv_lora_rank + qk_rope_head_dim and sums over kv_lora_rank:
#               2 x n_head x (2 x kv_lora_rank + qk_rope_head_dim) FLOPs per cached token
#   recurrent   its state, read and written back once per token (2 x the state's bytes), whatever the
#               context; the delta rule touches each element of s a few times (decay, k^T S, the rank-1
#               update, q^T S: about 7 FLOPs each) and the convolution 2 x kernel x conv_dim
def decode_kv_read_bytes(model, il: int, context: int, kv_type: str = "f16") -> float:
    """Bytes block il reads from its cache (or moves of its recurrent state) per sequence in one decode step
    at `context` tokens."""
    model = _check_layer_context(model, il, context)
    if model.is_recurrent_layer(il):
        return 2.0 * recurrent_state_bytes(model)
    return kv_bytes_per_token_layer(model, kv_type) * kv_layer_tokens(model, il, context)


def _check_layer_context(model, il, context) -> Model:
    if type(model) is not Model:
        model = get_model(model)
    if not (is_int(il) and 0 <= il < model.num_hidden_layers):
        check_int(il, "il", 0, model.num_hidden_layers - 1)
    if not (is_int(context) and 0 <= context <= MAX_CONTEXT):
        check_int(context, "context", 0, MAX_CONTEXT)
    return model


def _attention_flops_per_token_pair(m: Model) -> float:
    if m.is_mla:
        return 2.0 * m.num_attention_heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
    return 4.0 * m.num_attention_heads * m.d_head


def _recurrent_flops_per_token(m: Model) -> float:
    r, s = recurrent_state_elements(m)
    k = m.linear_conv_kernel_dim
    conv_dim = r // (k - 1) if k > 1 else 0
    return 7.0 * s + 2.0 * k * conv_dim


def decode_attention_flops(model, il: int, context: int) -> float:
    """Attention FLOPs of block il per sequence in one decode step at `context` tokens (the matmuls with
    weights are counted apart, from the tensors)."""
    model = _check_layer_context(model, il, context)
    if model.is_recurrent_layer(il):
        return _recurrent_flops_per_token(model)
    return _attention_flops_per_token_pair(model) * kv_layer_tokens(model, il, context)


_KV_PLAN_CACHE: dict = {}


def _kv_plan(m: Model, kv_type: str) -> tuple:
    """Per (model, KV type), what decode_kv_read_bytes and decode_attention_flops multiply for every block:
    (bytes per cached token, FLOPs per cached token, a recurrent block's bytes and FLOPs, each block's kind:
    0 full, 1 sliding window, 2 recurrent). Decode at many contexts (the decode curve) reads it once."""
    key = (m, kv_type)
    plan = _KV_PLAN_CACHE.get(key)
    if plan is None:
        kinds = tuple(
            2 if m.is_recurrent_layer(il) else 1 if m.is_swa_layer(il) else 0 for il in range(m.num_hidden_layers)
        )
        rec = any(k == 2 for k in kinds)
        plan = (
            kv_bytes_per_token_layer(m, kv_type),
            _attention_flops_per_token_pair(m),
            2.0 * recurrent_state_bytes(m) if rec else 0.0,
            _recurrent_flops_per_token(m) if rec else 0.0,
            kinds,
        )
        if len(_KV_PLAN_CACHE) >= WORK_CACHE_MAX:
            _KV_PLAN_CACHE.clear()
        _KV_PLAN_CACHE[key] = plan
    return plan


_STATIC_CACHE: dict = {}


def _blocks_static(p: Placement, n: int, with_head: bool) -> tuple:
    """What a pass of n tokens (decode: n sequences; prefill: a micro-batch of n) does that does not depend on
    the context, per side: weights read, matmul FLOPs, blocks, weights per type, experts; with_head: the output
    head too (decode; prefill runs it apart). Returns ({side: (w, f, layers, types, x, xf, moe blocks, rows per
    type, the routed experts' weights per type)}, the head's side).
    Memoised on what it reads (the model object, quant, the layer split, --n-cpu-moe, the head's side): a decode
    curve or a prompt's micro-batches time one placement many times, and placements that differ only in their
    context or KV type (the calculator's changes, the course and measured placements) split the layers alike."""
    key = (id(p.model), p.quant, p.layer_device, p.n_cpu_moe, p.output_on_gpu, n, with_head)
    hit = _STATIC_CACHE.get(key)
    if hit is not None and hit[0] is p.model:
        return hit[1]
    m = p.model
    dense, experts, _other = _layer_bytes(m, p.quant)
    blocks, head, row_blocks, head_rows = _layer_plan(m, p.quant)
    touched, routed = _moe_fraction(m, n)
    acc = {
        s: {"w": 0.0, "f": 0.0, "layers": 0, "types": {}, "x": 0.0, "xf": 0.0, "mx": 0, "rows": {}, "et": {}}
        for s in ("gpu", "cpu")
    }
    for il in range(m.n_layers):
        dev = p.layer_device[il]
        exp_dev = "cpu" if il < p.n_cpu_moe else dev
        a, ae = acc[dev], acc[exp_dev]
        a["w"] += dense[il]
        ae["w"] += experts[il] * touched
        if experts[il]:
            ae["x"] += touched * m.n_expert
            ae["mx"] += 1
        a["layers"] += 1
        for typ, (dn, en) in blocks[il].items():
            a["f"] += 2.0 * dn * n
            ae["f"] += 2.0 * en * routed * n
            ae["xf"] += 2.0 * en * routed * n
            a["types"][typ] = a["types"].get(typ, 0.0) + dn
            ae["types"][typ] = ae["types"].get(typ, 0.0) + en * touched
            if en:
                ae["et"][typ] = ae["et"].get(typ, 0.0) + en * touched
        for typ, (dr, er) in row_blocks[il].items():
            a["rows"][typ] = a["rows"].get(typ, 0.0) + dr
            ae["rows"][typ] = ae["rows"].get(typ, 0.0) + er * touched
    hd = "gpu" if p.output_on_gpu else "cpu"
    if with_head:
        acc[hd]["w"] += _head_bytes(p)
        for typ, k in head.items():
            acc[hd]["f"] += 2.0 * k * n
            acc[hd]["types"][typ] = acc[hd]["types"].get(typ, 0.0) + k
        for typ, r in head_rows.items():
            acc[hd]["rows"][typ] = acc[hd]["rows"].get(typ, 0.0) + r
    static = (
        {
            s: (
                a["w"], a["f"], a["layers"], tuple(sorted(a["types"].items())), a["x"], a["xf"], a["mx"],
                tuple(sorted((t, r) for t, r in a["rows"].items() if r > 0)), tuple(sorted(a["et"].items())),
            )
            for s, a in acc.items()
        },
        hd,
    )  # fmt: skip
    if len(_STATIC_CACHE) >= WORK_CACHE_MAX:
        _STATIC_CACHE.clear()
    _STATIC_CACHE[key] = (m, static)
    return static


_KIND_CACHE: dict = {}


def _kind_counts(p: Placement, kinds) -> dict:
    """{side: (blocks reading the whole context, blocks reading a sliding window, recurrent blocks)} of a
    placement, memoised per placement object (a decode curve times one placement at many contexts)."""
    key = id(p)
    hit = _KIND_CACHE.get(key)
    if hit is not None and hit[0] is p and hit[1] == kinds:
        return hit[2]
    counts = {"gpu": [0, 0, 0], "cpu": [0, 0, 0]}
    for il in range(p.model.n_layers):
        counts[p.layer_device[il]][kinds[il]] += 1
    out = {side: tuple(c) for side, c in counts.items()}
    if len(_KIND_CACHE) >= WORK_CACHE_MAX:
        _KIND_CACHE.clear()
    _KIND_CACHE[key] = (p, kinds, out)
    return out


def _decode_work(p: Placement, context: int, batch: int) -> dict:
    """{"gpu": Work, "cpu": Work} for one decode pass of `batch` sequences at `context` tokens of KV."""
    m = p.model
    if not (is_int(context) and 0 <= context <= MAX_CONTEXT):
        check_int(context, "context", 0, MAX_CONTEXT)
    static, hd = _blocks_static(p, batch, True)
    # decode_kv_read_bytes / decode_attention_flops of every block, from one plan (the same products)
    per_tok, per_pair, rec_bytes, rec_flops, kinds = _kv_plan(m, p.kv_type)
    window = m.sliding_window
    counts = _kind_counts(p, kinds)
    kv = {"gpu": 0.0, "cpu": 0.0}
    af = {"gpu": 0.0, "cpu": 0.0}
    for dev, (n_full, n_window, n_rec) in counts.items():
        # each block reads its own kind of cache: the whole context, a sliding window, or a recurrent state
        tokens = context * n_full + min(context, window) * n_window
        kv[dev] = per_tok * tokens * batch + rec_bytes * batch * n_rec
        af[dev] = per_pair * tokens * batch + rec_flops * batch * n_rec
    out = {}
    for s in ("gpu", "cpu"):
        w, f, layers, types, x, xf, mx, rows, et = static[s]
        out[s] = Work(w, kv[s], f + af[s], af[s], layers, types, s == hd, x, xf, mx, rows, et)
    return out


def _device_for(p: Placement, side: str) -> Device:
    if side == "gpu":
        return p.machine.gpu
    return p.machine.ram


def _logits_bytes(p: Placement, machine: Machine) -> float:
    """Bytes of one token's logits (n_vocab F32 values) that cross the PCIe link back to the host after each decode
    pass (measured profile): none when the output head runs on the CPU or the GPU shares the host's memory."""
    return 4.0 * p.model.vocab_size if p.output_on_gpu and not machine.unified else 0.0


def decode_step_time(
    placement: Placement, machine=None, context: int = 0, batch: int = 1, profile=None, n_threads=None
) -> dict:
    """Time of one decode pass at `context` tokens of KV per sequence, for `batch` sequences.

    profile: "course" (the module's assumptions) or "measured" (fitted on published llama-bench runs);
    None uses the placement's (place's default is "course").  n_threads: llama.cpp's -t for the CPU
    side (measured profile; None = all the CPU's cores).

    Returns gpu_s, cpu_s, overhead_s, total_s, tok_per_s (all sequences), per-device bytes and FLOPs,
    whether each device is memory- or compute-bound, and for the measured profile `range_tok_s`
    (the typical spread of published runs around the estimate) and `basis` (the parameters used).
    On a machine with several GPUs (section 7b) the gpu_* numbers are over all GPUs, total_s also holds
    link_s (the hops or synchronisations over the GPU link), and `devices` breaks the step down per device."""
    p = placement
    if not (isinstance(p, Placement)):
        _check(False, "placement", f"must be a Placement (from place()), got {brief(p)}")
    machine = p.machine if machine is None else get_machine(machine)
    if not (is_int(context) and 0 <= context <= MAX_CONTEXT):
        _check(False, "context", f"must be an integer from 0 to {MAX_CONTEXT:,}, got {brief(context)}")
    if not (is_int(batch) and 1 <= batch <= MAX_BATCH):
        _check(False, "batch", f"must be an integer from 1 to {MAX_BATCH:,}, got {brief(batch)}")
    context, batch = int(context), int(batch)
    profile = _check_profile(profile, p)
    n_threads = _check_threads(n_threads)
    if p.machine.multi_gpu:
        return _decode_step_time_multi(p, context, batch, profile, n_threads)
    work = _decode_work(p, context, batch)
    res = {"context": context, "batch": batch, "profile": profile}
    basis = {}
    for side in ("gpu", "cpu"):
        w = work[side]
        if w.bytes == 0 and w.flops == 0:
            t_mem = t_cmp = t = 0.0
        elif profile == "course":
            dev = _device_for(p, side)
            t_mem = w.bytes / (ETA_DECODE * dev.bandwidth)
            t_cmp = w.flops / (ETA_PREFILL * dev.flops)
            t = max(t_mem, t_cmp)
        else:
            dev = _device_for(p, side)
            backend = device_backend(machine, side)
            t, t_mem, t_cmp, basis[side] = _measured.decode_seconds(w, dev, backend, n_threads, batch)
        res[side + "_bytes"] = w.bytes
        res[side + "_weight_bytes"] = w.weight_bytes
        res[side + "_kv_bytes"] = w.kv_bytes
        res[side + "_flops"] = w.flops
        res[side + "_mem_s"] = t_mem
        res[side + "_compute_s"] = t_cmp
        res[side + "_s"] = t
        res[side + "_bound"] = "compute" if t_cmp > t_mem else "memory"
    if profile == "course":
        overhead = DECODE_OVERHEAD_S
    else:
        overhead = _measured.step_overhead_seconds(
            {s: work[s].layers for s in work},
            {s: device_backend(machine, s) for s in work},
            p.output_on_gpu,
            logits_bytes=_logits_bytes(p, machine),
            link_bytes_per_s=machine.pcie,
        )
        res["basis"] = basis
    res["overhead_s"] = overhead
    res["total_s"] = res["gpu_s"] + res["cpu_s"] + overhead
    res["tok_per_s"] = batch / res["total_s"]
    res["seq_tok_per_s"] = 1.0 / res["total_s"]
    res["cpu_share"] = res["cpu_s"] / res["total_s"]
    if profile == "measured":
        side = "gpu" if work["gpu"].bytes > work["cpu"].bytes else "cpu"
        main, dev = device_backend(machine, side), side_device(machine, side)
        res["backend"] = main
        res["range_tok_s"] = _measured.typical_range(res["tok_per_s"], main, "decode", dev)
        res["range_vendor"] = _measured.range_basis(main, "decode", dev)
    return res


def _check_threads(n_threads):
    _check(
        n_threads is None
        or (isinstance(n_threads, int) and not isinstance(n_threads, bool) and 1 <= n_threads <= 1024),
        "n_threads",
        f"must be None (all cores) or an integer from 1 to 1024, got {n_threads!r}",
    )
    return n_threads


# Prefill (prompt processing) runs in micro-batches of n_ubatch tokens.  In one
# micro-batch of u tokens:
#   * every matmul does 2*u FLOPs per weight it multiplies: an MoE token
#     multiplies only its k routed experts (plus any shared expert), and the
#     output head runs for the last token of the sequence only (llama.cpp
#     computes logits where the batch asks for them: the last prompt token);
#   * causal attention compares the token at position q with its q keys (QK^T and
#     AV: 4 * n_head * head_dim FLOPs per pair; a sliding-window layer stops at
#     its window);
#   * each micro-batch streams the weights it touches once: every dense weight,
#     and the experts that any of its u tokens is routed to;
#   * course profile: the device computes at ETA_PREFILL of its peak FLOP/s and,
#     one after the other, streams its weights at ETA_PREFILL of its bandwidth;
#     measured profile: enginelab.measured.prefill_seconds;
#   * with a partial offload and u >= 32, llama.cpp's op offload runs the CPU
#     blocks' matmuls on the GPU too, copying their weights over PCIe.  The course
#     profile charges the copy once per logical batch (-b, 2048 tokens) at
#     ETA_PCIE of the link; the measured profile charges it for every micro-batch
#     (ggml's scheduler copies the weights each time the graph runs);
#   * without a GPU the CPU does all of it at its own (much lower) FLOP/s.
# Fitted to the module's prefill column (0.924-0.935 reproduces it): the share of the PCIe link the weight
# copies of op offload reach.
ETA_PCIE = 0.93
PREFILL_GROUP_MAX = 64  # more micro-batches than this are timed in groups (the steps list stays short)


def prefill_time(
    placement: Placement,
    machine=None,
    n_tokens: int = 512,
    n_ubatch=None,
    n_batch: int = N_BATCH_DEFAULT,
    op_offload: bool = True,
    profile=None,
    n_threads=None,
) -> dict:
    """Time to process a prompt of n_tokens; returns total_s, tok_per_s and its parts.

    profile and n_threads as for decode_step_time (for the CPU, n_threads is llama.cpp's -tb)."""
    p = placement
    if not (isinstance(p, Placement)):
        _check(False, "placement", f"must be a Placement (from place()), got {brief(p)}")
    machine = p.machine if machine is None else get_machine(machine)
    if not (is_int(n_tokens) and 0 < n_tokens <= MAX_CONTEXT):
        _check(False, "n_tokens", f"must be a positive integer up to {MAX_CONTEXT:,}, got {brief(n_tokens)}")
    ub = p.n_ubatch if n_ubatch is None else n_ubatch
    if not (is_int(ub) and 1 <= ub <= MAX_CONTEXT):
        _check(False, "n_ubatch", f"must be a positive integer up to {MAX_CONTEXT:,}, got {brief(ub)}")
    if not (is_int(n_batch) and 1 <= n_batch <= MAX_CONTEXT):
        _check(False, "n_batch", f"must be a positive integer up to {MAX_CONTEXT:,}, got {brief(n_batch)}")
    check_bool(op_offload, "op_offload")
    n_tokens, ub, n_batch = int(n_tokens), int(ub), int(n_batch)
    profile = _check_profile(profile, p)
    n_threads = _check_threads(n_threads)
    steps = prefill_steps(p, n_tokens, ub, n_batch, op_offload, profile=profile, n_threads=n_threads)
    total = sum(s["time_s"] for s in steps)
    parts: dict = {}
    for s in steps:
        parts[s["kind"]] = parts.get(s["kind"], 0.0) + s["time_s"]
    res = {
        "n_tokens": n_tokens,
        "n_ubatch": ub,
        "total_s": total,
        "tok_per_s": n_tokens / total,
        "parts_s": parts,
        "n_micro_batches": -(-n_tokens // ub),
        "flops": sum(s["flops"] for s in steps),
        "steps": steps,
        "profile": profile,
    }
    if profile == "measured":
        heavy = max(
            ("gpu", "cpu"), key=lambda s: parts.get(s, 0.0) + (parts.get("gpu_offload", 0.0) if s == "gpu" else 0)
        )
        res["backend"] = device_backend(machine, heavy)
        dev = side_device(machine, heavy)
        res["range_tok_s"] = _measured.typical_range(res["tok_per_s"], res["backend"], "prefill", dev)
        res["range_vendor"] = _measured.range_basis(res["backend"], "prefill", dev)
    return res


def _prefill_work(p: Placement, start: int, u: int) -> dict:
    """{"gpu": Work, "cpu": Work} for the blocks of the micro-batch of tokens start+1 .. start+u (the output
    head is _head_work: it runs for the last token only)."""
    m = p.model
    static, _hd = _blocks_static(p, u, False)
    attn_per = _attention_flops_per_token_pair(m)
    rec_per = _recurrent_flops_per_token(m)
    kinds = _kv_plan(m, p.kv_type)[4]
    af = {"gpu": 0.0, "cpu": 0.0}
    pairs = {}  # attention pairs per window size (one closed form per distinct window)
    for il in range(m.n_layers):
        dev = p.layer_device[il]
        kind = kinds[il]
        if kind == 2:
            af[dev] += rec_per * u  # linear attention: a fixed cost per token, no pairs
        else:
            win = m.sliding_window if kind == 1 else 0
            if win not in pairs:
                pairs[win] = _causal_pairs_window(win, start, start + u)
            af[dev] += attn_per * pairs[win]
    out = {}
    for s in ("gpu", "cpu"):
        w, f, layers, types, x, xf, mx, rows, et = static[s]
        out[s] = Work(w, 0.0, f + af[s], af[s], layers, types, False, x, xf, mx, rows, et)
    return out


def _with_head(w: Work, head: Work, u: int) -> Work:
    """w plus the output head run for each of u tokens (the course profile's prefill)."""
    types = dict(w.weights_by_type)
    for typ, n in head.weights_by_type:
        types[typ] = types.get(typ, 0.0) + n
    return replace(
        w,
        weight_bytes=w.weight_bytes + head.weight_bytes,
        flops=w.flops + head.flops * u,
        weights_by_type=tuple(sorted(types.items())),
        head_on_this=True,
    )


def _head_work(p: Placement) -> tuple:
    """(side, Work) of the output head for one token: its weights read once, multiplying one vector."""
    _blocks, head, _row_blocks, head_rows = _layer_plan(p.model, p.quant)
    flops = sum(2.0 * n for n in head.values())
    side = "gpu" if p.output_on_gpu else "cpu"
    return side, Work(
        _head_bytes(p),
        0.0,
        flops,
        0.0,
        0,
        tuple(sorted(head.items())),
        True,
        rows_by_type=tuple(sorted(head_rows.items())),
    )


def prefill_steps(
    p: Placement,
    n_tokens: int,
    n_ubatch: int = N_UBATCH_DEFAULT,
    n_batch: int = N_BATCH_DEFAULT,
    op_offload: bool = True,
    profile=None,
    n_threads=None,
) -> list:
    """The prefill as a list of timed steps (one per micro-batch and device, plus PCIe copies).

    Each step: kind ('gpu', 'cpu', 'gpu_offload', 'pcie'), ubatch index, tokens, n_ubatches, bytes,
    flops, time_s.  Past PREFILL_GROUP_MAX micro-batches, consecutive ones are timed together (a step's
    n_ubatches says how many), so a million-token prompt costs no more to time than a short one."""
    if not (isinstance(p, Placement)):
        _check(False, "p", f"must be a Placement (from place()), got {brief(p)}")
    for arg, v in (("n_tokens", n_tokens), ("n_ubatch", n_ubatch), ("n_batch", n_batch)):
        if not (is_int(v) and 1 <= v <= MAX_CONTEXT):
            _check(False, arg, f"must be a positive integer up to {MAX_CONTEXT:,}, got {brief(v)}")
    check_bool(op_offload, "op_offload")
    profile = _check_profile(profile, p)
    if p.machine.multi_gpu:
        return _prefill_steps_multi(p, n_tokens, n_ubatch, n_batch, op_offload, profile, n_threads)
    mc = p.machine
    steps = []
    n_ub = -(-n_tokens // n_ubatch)
    group = max(1, -(-n_ub // PREFILL_GROUP_MAX))
    has_gpu = mc.gpu is not None and p.gpu_layers + (1 if p.output_on_gpu else 0) > 0
    head_side, head_work = _head_work(p)
    i = 0
    start = 0
    while start < n_tokens:
        # `group` micro-batches of n_ubatch tokens (the last group may be shorter), timed at their middle
        k = min(group, -(-(n_tokens - start) // n_ubatch))
        toks = min(k * n_ubatch, n_tokens - start)
        u = min(n_ubatch, toks)
        # the group's attention: each micro-batch sees its own prefix; the middle one stands for all
        mid = start + (toks - u) // 2
        work = _prefill_work(p, mid, u)
        if profile == "course":
            # The course profile keeps the module's simplification: logits for every prompt token, the head's
            # weights streamed with each micro-batch. Its fitted constants (RTX 3060 / 4060 Ti FP16, ETA_PCIE)
            # were fitted under it, and no values of them reproduce the module's four prefill numbers once the
            # head runs for the last token only (the 32B partial offload then reaches at most 329 tok/s
            # against the module's 342). The measured profile computes the last token's logits only.
            work = dict(work)
            work[head_side] = _with_head(work[head_side], head_work, u)
        scale = toks / u
        # op offload needs a discrete GPU behind a PCIe link (unified memory has no copy to make:
        # the CPU blocks simply run on the CPU)
        offload = op_offload and has_gpu and not mc.unified and mc.pcie > 0 and u >= OP_OFFLOAD_MIN_BATCH
        for side in ("gpu", "cpu"):
            w = work[side]
            flops = w.flops * scale
            if flops == 0:
                continue
            if side == "cpu" and offload:
                # op offload: the CPU blocks' weights cross PCIe, then the GPU does their arithmetic
                if profile == "course":
                    n_copies = sum(1 for j in range(k) if (start + j * n_ubatch) % n_batch == 0)
                    t_x = w.weight_bytes * n_copies / (ETA_PCIE * mc.pcie)
                else:
                    n_copies = k
                    t_x = _measured.pcie_seconds(w.weight_bytes * k, mc.pcie)
                if n_copies:
                    steps.append(_step("pcie", i, toks, k, w.weight_bytes * n_copies, 0.0, t_x, "PCIe"))
                dev = mc.gpu
                if profile == "course":
                    t = flops / (ETA_PREFILL * dev.flops)
                else:
                    t = _measured.prefill_seconds(
                        w, dev, device_backend(mc, "gpu"), u, k, None, offloaded=True, scale=scale
                    )[0]
                steps.append(_step("gpu_offload", i, toks, k, 0.0, flops, t, dev.name))
                continue
            dev = _device_for(p, side)
            t_c, t_m = _prefill_device_seconds(w, dev, mc, side, u, k, scale, profile, n_threads)
            steps.append(_step(side, i, toks, k, w.weight_bytes * k, flops, t_c + t_m, dev.name, t_c, t_m))
        if profile != "course" and start + toks >= n_tokens:
            # the sequence's last token: the output head computes its logits (one token: never offloaded)
            dev = _device_for(p, head_side)
            w = head_work
            t_c, t_m = _prefill_device_seconds(w, dev, mc, head_side, 1, 1, 1.0, profile, n_threads)
            s = _step(head_side, i + k - 1, 1, 0, w.weight_bytes, w.flops, t_c + t_m, dev.name, t_c, t_m)
            s["head"] = True
            steps.append(s)
        start += toks
        i += k
    return steps


def _step(kind, i, toks, k, byts, flops, t, device, t_c=None, t_m=None) -> dict:
    s = {
        "kind": kind,
        "ubatch": i,
        "tokens": toks,
        "n_ubatches": k,
        "bytes": byts,
        "flops": flops,
        "time_s": t,
        "device": device,
    }
    if t_c is not None:
        s["compute_s"], s["mem_s"] = t_c, t_m
    return s


def _prefill_device_seconds(
    w: Work, dev: Device, mc: Machine, side: str, u: int, k: int, scale: float, profile: str, n_threads
) -> tuple:
    """(compute seconds, memory seconds) of k micro-batches of u tokens doing `w` each on `dev` (their FLOPs
    are `scale` times w's: the last micro-batch of a group may be shorter)."""
    if profile == "course":
        return w.flops * scale / (ETA_PREFILL * dev.flops), w.weight_bytes * k / (ETA_PREFILL * dev.bandwidth)
    return _measured.prefill_seconds(w, dev, device_backend(mc, side), u, k, n_threads, scale=scale)


def _causal_pairs_window(w: int, start: int, end: int) -> float:
    """Query-key pairs computed for positions start+1..end: sum of min(q, w) (w = 0: no window), in
    closed form."""

    def upto(n: int) -> float:  # sum_{q=1}^{n} min(q, w)
        if not w or n <= w:
            return n * (n + 1) / 2.0
        return w * (w + 1) / 2.0 + (n - w) * w

    return upto(end) - upto(start)


def _causal_pairs(m: Model, il: int, start: int, end: int) -> float:
    """Query-key pairs computed for positions start+1..end of layer il (causal, windowed)."""
    return _causal_pairs_window(m.sliding_window if m.is_swa_layer(il) else 0, start, end)


# ---------------------------------------------------------------------------
# 7b. Time on several GPUs
# ---------------------------------------------------------------------------
# Layer split: one token (or micro-batch) goes through the GPUs one after the other, each running its own
# layers, so their times add, and at every boundary between two GPUs the activations hop over the link:
# n_embd x 4 bytes (f32) per token.  Row split: each matrix's rows are spread over the GPUs, which multiply
# their slices at the same time (the step waits for the slowest), but every split matrix is a
# synchronisation: its input is copied to the other GPUs (k_in x 4 bytes per token each) and their slices of
# the result come back (their rows x 4 bytes per token).  Norms, attention over the KV cache and the expert
# matmuls run on the layer's own GPU, one layer after the other.
#
# Each transfer costs the link's latency plus bytes / bandwidth (Interconnect; PCIe through the host counts
# two trips).  Over RPC the host is on the network too: the input embeddings go out to the first GPU, the
# logits (n_vocab x 4 bytes per token) come back, and every host/GPU boundary is a round trip.
# Both profiles time each device's share with their own rules (course: ETA_DECODE / ETA_PREFILL of the
# device's peaks; measured: enginelab.measured per backend); the link costs are the same in both.

_PARTS_CACHE: dict = {}


def _layer_parts(m: Model, quant) -> tuple:
    """Per block: {"mat": {type: elements}, "small": {...}, "exp": {...}, "mat_bytes", "small_bytes",
    "exp_bytes", "k_in", "n_out", "n_mat"} (2-D matrices outside the experts, vectors, expert tensors; the
    matrices' summed input widths and output rows, and their number); plus the head's (matrix bytes, matrix
    types, k_in, n_out). Cached."""
    key = (m, quant)
    if key not in _PARTS_CACHE:
        if len(_PARTS_CACHE) > 64:
            _PARTS_CACHE.clear()
        blocks = [
            {"mat": {}, "small": {}, "exp": {}, "mat_bytes": 0, "small_bytes": 0, "exp_bytes": 0, "k_in": 0,
             "n_out": 0, "n_mat": 0}
            for _ in range(m.n_layers)
        ]  # fmt: skip
        for r in quantize_plan(m, quant):
            il, cls = r["layer"], r["cls"]
            if il < 0:
                continue
            b = blocks[il]
            part = "exp" if cls.endswith("_exps") else "small" if cls in ("norm", "bias") else "mat"
            b[part][r["type"]] = b[part].get(r["type"], 0) + r["n_elements"]
            b[part + "_bytes"] += r["bytes"]
            if part == "mat" and len(r["ne"]) >= 2:
                b["k_in"] += r["ne"][0]
                b["n_out"] += r["ne"][1]
                b["n_mat"] += 1
        _PARTS_CACHE[key] = (blocks, (m.hidden_size, m.vocab_size))
    return _PARTS_CACHE[key]


def link_seconds(machine: Machine, n_bytes: float, n_transfers: int = 1) -> float:
    """Seconds for n_transfers hand-overs carrying n_bytes in all over the machine's GPU link."""
    machine = get_machine(machine)
    check_number(n_bytes, "n_bytes", 0.0, 1e18)
    check_int(n_transfers, "n_transfers", 0, 1 << 40)
    ic = machine.link
    trips = 2 if ic.kind == "pcie" else 1  # through the host: GPU -> host -> GPU
    return n_transfers * ic.latency_us * 1e-6 + trips * n_bytes / (ic.bandwidth_gbs * GB)


def _link_traffic(p: Placement, tokens: int) -> dict:
    """What one forward pass of `tokens` tokens sends over the GPU link: transfers, bytes, and their kind."""
    m, mc = p.model, p.machine
    h = m.hidden_size
    rpc = mc.link.kind == "rpc"
    order = list(p.layer_gpu) + [p.output_gpu]  # the device of each layer in the order they run
    n_transfers, n_bytes = 0, 0.0
    if p.row_split:
        blocks, _ = _layer_parts(m, p.quant)
        act = [i for i, f in enumerate(p.row_fractions) if f > 0]
        for il, g in enumerate(p.layer_gpu):
            if g is None:
                continue
            b = blocks[il]
            others = sum(f for i, f in enumerate(p.row_fractions) if i != g)
            n_transfers += b["n_mat"]
            n_bytes += tokens * 4.0 * (b["k_in"] * (len(act) - 1) + b["n_out"] * others)
        if p.output_gpu is not None:
            others = sum(f for i, f in enumerate(p.row_fractions) if i != p.output_gpu)
            n_transfers += 1
            n_bytes += tokens * 4.0 * (h * (len(act) - 1) + m.vocab_size * others)
        kind = "sync"
    else:
        for a, b in zip(order, order[1:]):
            if a != b and (a is not None and b is not None or rpc):
                n_transfers += 1
                n_bytes += tokens * 4.0 * h
        kind = "hop"
    if rpc:
        if order[0] is not None:  # the host looks the input rows up in token_embd and sends them
            n_transfers += 1
            n_bytes += tokens * 4.0 * h
        if p.output_gpu is not None:  # the logits come back to the host
            n_transfers += 1
            n_bytes += tokens * 4.0 * m.vocab_size
    return {"kind": kind, "transfers": n_transfers, "bytes": n_bytes}


def _gpu_side(i: int) -> str:
    return f"gpu{i}"


def _work_multi(p: Placement, tokens: int, context: int | None, start: int = 0, with_head: bool = True) -> tuple:
    """({side: Work} each device runs on its own, {side: Work} of the row-split matrices run in parallel) for a
    pass of `tokens` tokens: decode (context = KV tokens per sequence, tokens = the batch) or a prefill
    micro-batch (context None: positions start+1 .. start+tokens, causal attention, no KV read).
    Sides: "gpu0", "gpu1", ..., "cpu"."""
    m = p.model
    blocks, _ = _layer_parts(m, p.quant)
    _blocks, head, row_blocks, head_rows = _layer_plan(m, p.quant)
    touched, routed = _moe_fraction(m, tokens)
    attn_per = _attention_flops_per_token_pair(m)
    rec_per = _recurrent_flops_per_token(m)
    sides = [_gpu_side(i) for i in range(len(p.machine.gpus))] + ["cpu"]

    def acc():
        zero = {"w": 0.0, "kv": 0.0, "f": 0.0, "af": 0.0, "layers": 0, "x": 0.0, "mx": 0}
        return {s: {**zero, "types": {}, "rows": {}, "et": {}} for s in sides}

    loc, spl = acc(), acc()
    shares = p.row_fractions if p.row_split else ()
    pairs: dict = {}

    def add(a, typ, n, bytes_share, flops):
        a["types"][typ] = a["types"].get(typ, 0.0) + n * bytes_share
        a["f"] += flops

    for il in range(m.n_layers):
        g = p.layer_gpu[il]
        side = "cpu" if g is None else _gpu_side(g)
        a = loc[side]
        ae = loc["cpu" if il < p.n_cpu_moe else side]
        b = blocks[il]
        a["layers"] += 1
        a["w"] += b["small_bytes"]
        for typ, n in b["small"].items():
            add(a, typ, n, 1.0, 2.0 * n * tokens)
        if shares and g is not None:
            for i, f in enumerate(shares):
                if f <= 0:
                    continue
                s = spl[_gpu_side(i)]
                s["w"] += b["mat_bytes"] * f
                for typ, n in b["mat"].items():
                    add(s, typ, n, f, 2.0 * n * f * tokens)
        else:
            a["w"] += b["mat_bytes"]
            for typ, n in b["mat"].items():
                add(a, typ, n, 1.0, 2.0 * n * tokens)
        cpu_rows = loc["cpu"]["rows"]  # rows matter on the CPU only (a vec_dot call each)
        for typ, (dr, er) in row_blocks[il].items():
            r = (dr if a is loc["cpu"] else 0.0) + (er * touched if ae is loc["cpu"] else 0.0)
            if r:
                cpu_rows[typ] = cpu_rows.get(typ, 0.0) + r
        if b["exp_bytes"]:
            ae["w"] += b["exp_bytes"] * touched
            ae["x"] += touched * m.n_expert
            ae["mx"] += 1
            for typ, n in b["exp"].items():
                add(ae, typ, n, touched, 2.0 * n * routed * tokens)
                ae["et"][typ] = ae["et"].get(typ, 0.0) + n * touched
        if context is not None:  # decode: every sequence reads its KV (each kind of block its own, section 7)
            a["kv"] += decode_kv_read_bytes(m, il, context, p.kv_type) * tokens
            a["af"] += decode_attention_flops(m, il, context) * tokens
        elif m.is_recurrent_layer(il):
            a["af"] += rec_per * tokens  # linear attention: a fixed cost per token, no pairs
        else:
            win = m.sliding_window if m.is_swa_layer(il) else 0
            if win not in pairs:
                pairs[win] = _causal_pairs_window(win, start, start + tokens)
            a["af"] += attn_per * pairs[win]
    if with_head:
        hside = "cpu" if p.output_gpu is None else _gpu_side(p.output_gpu)
        hb = _head_bytes(p)
        if shares and p.output_gpu is not None:
            for i, f in enumerate(shares):
                if f > 0:
                    s = spl[_gpu_side(i)]
                    s["w"] += hb * f
                    for typ, n in head.items():
                        add(s, typ, n, f, 2.0 * n * f * tokens)
        else:
            a = loc[hside]
            a["w"] += hb
            for typ, n in head.items():
                add(a, typ, n, 1.0, 2.0 * n * tokens)
            for typ, r in head_rows.items():
                a["rows"][typ] = a["rows"].get(typ, 0.0) + r

    def works(d, head_side=None):
        return {
            s: Work(
                a["w"],
                a["kv"],
                a["f"] + a["af"],
                a["af"],
                a["layers"],
                tuple(sorted(a["types"].items())),
                s == head_side,
                a["x"],
                moe_layers=a["mx"],
                rows_by_type=tuple(sorted((t, r) for t, r in a["rows"].items() if r > 0)),
                expert_weights_by_type=tuple(sorted((t, n) for t, n in a["et"].items() if n > 0)),
            )
            for s, a in d.items()
        }

    hs = ("cpu" if p.output_gpu is None else _gpu_side(p.output_gpu)) if with_head else None
    return works(loc, hs), works(spl)


def _side_device(p: Placement, side: str) -> Device:
    return p.machine.ram if side == "cpu" else p.machine.gpus[int(side[3:])]


def _decode_side_seconds(p: Placement, side: str, w: Work, profile: str, n_threads, batch: int) -> tuple:
    """(seconds, memory seconds, compute seconds, basis) of one device's decode work."""
    if w.bytes == 0 and w.flops == 0:
        return 0.0, 0.0, 0.0, None
    dev = _side_device(p, side)
    if profile == "course":
        t_mem = w.bytes / (ETA_DECODE * dev.bandwidth)
        t_cmp = w.flops / (ETA_PREFILL * dev.flops)
        return max(t_mem, t_cmp), t_mem, t_cmp, None
    return _measured.decode_seconds(w, dev, device_backend(p.machine, side), n_threads, batch)


def _decode_step_time_multi(p: Placement, context: int, batch: int, profile: str, n_threads) -> dict:
    """decode_step_time on a machine with several GPUs (see section 7b); the result has the single-GPU keys
    (gpu_* summed over the GPUs) plus `devices` (one entry per GPU and the CPU), `link_s` and `link`."""
    mc = p.machine
    local, split = _work_multi(p, batch, context)
    res = {"context": context, "batch": batch, "profile": profile, "split_mode": p.split_mode}
    devices, basis = [], {}
    gpu_local = gpu_split = 0.0
    tot = {"gpu": dict(bytes=0.0, w=0.0, kv=0.0, f=0.0, mem=0.0, cmp=0.0), "cpu": None}
    for side in local:
        wl, ws = local[side], split[side]
        t_l, m_l, c_l, b_l = _decode_side_seconds(p, side, wl, profile, n_threads, batch)
        t_s, m_s, c_s, b_s = _decode_side_seconds(p, side, ws, profile, n_threads, batch)
        if b_l or b_s:
            basis[side] = b_l or b_s
        entry = {
            "side": side,
            "name": _side_device(p, side).name,
            "bytes": wl.bytes + ws.bytes,
            "weight_bytes": wl.weight_bytes + ws.weight_bytes,
            "kv_bytes": wl.kv_bytes + ws.kv_bytes,
            "flops": wl.flops + ws.flops,
            "layers": wl.layers,
            "mem_s": m_l + m_s,
            "compute_s": c_l + c_s,
            "busy_s": t_l + t_s,  # this device's own time for the pass
            "parallel_s": t_s,  # of which row-split matrices, run at the same time as the other GPUs
        }
        entry["bound"] = "compute" if entry["compute_s"] > entry["mem_s"] else "memory"
        devices.append(entry)
        if side == "cpu":
            for k in ("bytes", "weight_bytes", "kv_bytes", "flops", "mem_s", "compute_s"):
                res["cpu_" + k] = entry[k]
            res["cpu_s"] = entry["busy_s"]
            res["cpu_bound"] = entry["bound"]
        else:
            gpu_local += t_l
            gpu_split = max(gpu_split, t_s)
            for k, v in (("bytes", "bytes"), ("w", "weight_bytes"), ("kv", "kv_bytes"), ("f", "flops")):
                tot["gpu"][k] += entry[v]
            tot["gpu"]["mem"] += entry["mem_s"]
            tot["gpu"]["cmp"] += entry["compute_s"]
    g = tot["gpu"]
    res.update(
        gpu_bytes=g["bytes"],
        gpu_weight_bytes=g["w"],
        gpu_kv_bytes=g["kv"],
        gpu_flops=g["f"],
        gpu_mem_s=g["mem"],
        gpu_compute_s=g["cmp"],
        gpu_s=gpu_local + gpu_split,
        gpu_bound="compute" if g["cmp"] > g["mem"] else "memory",
    )
    traffic = _link_traffic(p, batch)
    res["link"] = traffic
    res["link_s"] = link_seconds(mc, traffic["bytes"], traffic["transfers"]) if traffic["transfers"] else 0.0
    res["devices"] = devices
    if profile == "course":
        overhead = DECODE_OVERHEAD_S
    else:
        layers = {e["side"]: e["layers"] for e in devices}
        overhead = _measured.step_overhead_seconds(
            layers,
            {s: device_backend(mc, s) for s in layers},
            p.output_on_gpu,
            logits_bytes=_logits_bytes(p, mc),
            link_bytes_per_s=mc.pcie,
        )
        res["basis"] = basis
    res["overhead_s"] = overhead
    res["total_s"] = res["gpu_s"] + res["cpu_s"] + res["link_s"] + overhead
    res["tok_per_s"] = batch / res["total_s"]
    res["seq_tok_per_s"] = 1.0 / res["total_s"]
    res["cpu_share"] = res["cpu_s"] / res["total_s"]
    if profile == "measured":
        heavy = max(devices, key=lambda e: e["bytes"])["side"]
        res["backend"] = device_backend(mc, heavy)
        dev = side_device(mc, heavy)
        res["range_tok_s"] = _measured.typical_range(res["tok_per_s"], res["backend"], "decode", dev)
        res["range_vendor"] = _measured.range_basis(res["backend"], "decode", dev)
    return res


def _prefill_steps_multi(
    p: Placement, n_tokens: int, n_ubatch: int, n_batch: int, op_offload: bool, profile: str, n_threads
) -> list:
    """prefill_steps on a machine with several GPUs: per micro-batch group, one step per device (kind 'gpu'
    with its "gpu" index, or 'cpu'), the row-split matrices as one step run in parallel ('gpu', "parallel"
    with each GPU's seconds), op offload ('pcie', 'gpu_offload' on the first GPU) and the link ('link')."""
    mc = p.machine
    steps = []
    n_ub = -(-n_tokens // n_ubatch)
    group = max(1, -(-n_ub // PREFILL_GROUP_MAX))
    first = next((i for i in range(len(mc.gpus)) if p.per_gpu[i].total > 0), 0)
    head_side = "cpu" if p.output_gpu is None else _gpu_side(p.output_gpu)
    i = start = 0
    while start < n_tokens:
        k = min(group, -(-(n_tokens - start) // n_ubatch))
        toks = min(k * n_ubatch, n_tokens - start)
        u = min(n_ubatch, toks)
        mid = start + (toks - u) // 2
        # the course profile runs the head for every token of the micro-batch (see prefill_steps)
        local, split = _work_multi(p, u, None, start=mid, with_head=profile == "course")
        scale = toks / u
        offload = op_offload and p.gpu_total > 0 and mc.pcie > 0 and u >= OP_OFFLOAD_MIN_BATCH
        for side, w in local.items():
            flops = w.flops * scale
            if flops == 0:
                continue
            if side == "cpu" and offload:
                if profile == "course":
                    n_copies = sum(1 for j in range(k) if (start + j * n_ubatch) % n_batch == 0)
                    t_x = w.weight_bytes * n_copies / (ETA_PCIE * mc.pcie)
                else:
                    n_copies = k
                    t_x = _measured.pcie_seconds(w.weight_bytes * k, mc.pcie)
                if n_copies:
                    steps.append(_step("pcie", i, toks, k, w.weight_bytes * n_copies, 0.0, t_x, "PCIe"))
                dev = mc.gpus[first]
                if profile == "course":
                    t = flops / (ETA_PREFILL * dev.flops)
                else:
                    t = _measured.prefill_seconds(
                        w, dev, device_backend(mc, _gpu_side(first)), u, k, None, offloaded=True, scale=scale
                    )[0]
                steps.append(_step("gpu_offload", i, toks, k, 0.0, flops, t, dev.name))
                continue
            dev = _side_device(p, side)
            t_c, t_m = _prefill_device_seconds(w, dev, mc, side, u, k, scale, profile, n_threads)
            s = _step(side[:3], i, toks, k, w.weight_bytes * k, flops, t_c + t_m, dev.name, t_c, t_m)
            if side != "cpu":
                s["gpu"] = int(side[3:])
            steps.append(s)
        if p.row_split:
            per = {}
            fl = by = 0.0
            for side, w in split.items():
                if w.flops == 0:
                    continue
                t_c, t_m = _prefill_device_seconds(w, _side_device(p, side), mc, side, u, k, scale, profile, n_threads)
                per[int(side[3:])] = t_c + t_m
                fl += w.flops * scale
                by += w.weight_bytes * k
            if per:
                s = _step("gpu", i, toks, k, by, fl, max(per.values()), "GPUs in parallel (row split)")
                s["parallel"] = per
                steps.append(s)
        traffic = _link_traffic(p, u)
        if traffic["transfers"]:
            t = k * link_seconds(mc, traffic["bytes"], traffic["transfers"])
            s = _step("link", i, toks, k, traffic["bytes"] * k, 0.0, t, mc.link.name or mc.link.kind)
            s["transfers"] = traffic["transfers"] * k
            steps.append(s)
        if profile != "course" and start + toks >= n_tokens:
            # the last token's logits (a row split spreads them too; timed here on the output's GPU)
            _side, head_work = _head_work(p)
            dev = _side_device(p, head_side)
            t_c, t_m = _prefill_device_seconds(head_work, dev, mc, head_side, 1, 1, 1.0, profile, n_threads)
            s = _step(
                head_side[:3], i + k - 1, 1, 0, head_work.weight_bytes, head_work.flops, t_c + t_m, dev.name, t_c, t_m
            )
            s["head"] = True
            steps.append(s)
        start += toks
        i += k
    return steps


# ---------------------------------------------------------------------------
# 8. The roofline (Williams, Waterman and Patterson, CACM 2009)
# ---------------------------------------------------------------------------
# A weight matmul over B tokens does 2*B FLOPs per weight and reads bpw/8 bytes
# of it: intensity I = 2B / (bpw/8) = 16B / bpw FLOP/byte.  Attainable
# throughput is min(peak, I * bandwidth); the ridge point I* = peak / bandwidth,
# and the batch that reaches it is B* = I* * bpw / 16.


def quant_bpw(quant, model=None) -> float:
    """Bits per weight of a quant: a number passes through; a name gives the
    model's effective bpw when a model is given, else its main ggml type's bpw."""
    return _bpw(quant, "quant", model)


def _bpw(quant, arg: str, model=None) -> float:
    if isinstance(quant, (int, float)) and not isinstance(quant, bool):
        return check_number(quant, arg, 0.0, 64.0, lo_open=True)
    if not (isinstance(quant, str) and (quant.upper() in GGML_TYPES or quant in ALL_QUANTS)):
        _check(
            False,
            arg,
            f"must be bits per weight (a number) or a quantization ({', '.join(ALL_QUANTS)}) or ggml type, "
            f"got {brief(quant)}",
        )
    if model is not None:
        return effective_bpw(model, quant)
    if quant.upper() in GGML_TYPES:
        return GGML_TYPES[quant.upper()].bpw
    return GGML_TYPES[main_type(quant)].bpw


def roofline(device: Device, bpw, batch: int = 1) -> dict:
    """Where a weight matmul over `batch` tokens sits on `device`'s roofline."""
    if not (isinstance(device, Device)):
        _check(False, "device", f"must be a Device, got {brief(device)}")
    check_number(batch, "batch", 0.0, MAX_BATCH, lo_open=True)
    bpw = _bpw(bpw, "bpw")
    intensity = 16.0 * batch / bpw
    ridge = device.flops / device.bandwidth
    attainable = min(device.flops, intensity * device.bandwidth)
    return {
        "batch": batch,
        "bpw": bpw,
        "intensity": intensity,
        "ridge_intensity": ridge,
        "attainable_flops": attainable,
        "peak_flops": device.flops,
        "bandwidth": device.bandwidth,
        "utilization": attainable / device.flops,
        "bound": "memory" if intensity < ridge else "compute",
        "ridge_batch": ridge * bpw / 16.0,
    }


def ridge_batch(device: Device, quant="Q4_K_M", model=None) -> float:
    """The batch at which a weight matmul stops being memory-bound: P/beta * bpw / 16."""
    return roofline(device, quant_bpw(quant, model), 1)["ridge_batch"]


# ---------------------------------------------------------------------------
# 9. Models from a Hugging Face config.json or a GGUF header
# ---------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------
