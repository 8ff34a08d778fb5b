"""The KV cache and the recurrent state, as llama.cpp allocates them (src/llama-kv-cache.cpp,
llama-kv-cache-iswa.cpp, llama-memory-recurrent.cpp)."""

from __future__ import annotations

from enginelab.checks import brief, check_bool, check_int, is_int
from enginelab.engine_io import N_UBATCH_DEFAULT
from enginelab.ggml import GGML_TYPES, GGMLType

from .catalog import get_model
from .models import MAX_CONTEXT, MAX_LAYERS, Model
from .units import WORK_CACHE_MAX, _check

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


def _attention_flops_per_token_pair(m: Model) -> float:
    if m.is_mla:
        return 2.0 * m.num_attention_heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
    return 4.0 * m.num_attention_heads * m.d_head


def _recurrent_flops_per_token(m: Model) -> float:
    r, s = recurrent_state_elements(m)
    k = m.linear_conv_kernel_dim
    conv_dim = r // (k - 1) if k > 1 else 0
    return 7.0 * s + 2.0 * k * conv_dim


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
