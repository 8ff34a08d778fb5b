"""The KV cache and the recurrent state, as llama.cpp allocates them (src/llama-kv-cache.cpp,
llama-kv-cache-iswa.cpp, llama-memory-recurrent.cpp)."""

from __future__ import annotations

from enginelab import blocks as _blocks
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
#
# Recurrent state: one cell per sequence, each holding its state and n_rs_seq
# rollback copies of it (llama_context's n_rs_seq: states kept for speculative
# decoding with a draft model or MTP head, 0 otherwise).  Its log line reads
# "(1 cells, 64 layers, 1 seqs 2 rs_seq)" for a buffer of 1 x 3 states.

KV_TYPES = ["f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"]
KV_PAD = 256  # llama.cpp pads n_ctx and every cache to a multiple of 256 cells (llama-context.cpp, -kv-cache-iswa.cpp)
MAX_SEQ = 1 << 16  # -np: parallel sequences (llama.cpp's LLAMA_MAX_SEQ is 256; far above it is still bounded)
MAX_RS_SEQ = 1 << 10  # n_rs_seq: rollback states per sequence (a draft's length; far above any draft is still bounded)
RS_BYTES_PER_ELEMENT = 4  # the recurrent state's type_r and type_s: f32 (llama-memory-recurrent.cpp)


def _kv_type(kv_type: str) -> GGMLType:
    if not (isinstance(kv_type, str) and kv_type.lower() in KV_TYPES):
        _check(False, "kv_type", f"unknown KV cache type {brief(kv_type)}; allowed: {', '.join(KV_TYPES)}")
    return GGML_TYPES[kv_type.upper()]


def _block_info(m: Model) -> tuple:
    """Per block of m (from Model.blocks), once per Model: (kind, elements one token adds to its own cache (K,
    V and a DSA indexer key; 0 without a cache of its own), window (0: every token), the block whose cache it
    reads (itself, or the earlier block it shares), recurrent (r, s) elements).

    kind: "full", "swa" (a window or chunk), "mla", "recurrent" (a fixed state per sequence: linear attention,
    SSM, short conv), "shared" (attention over an earlier block's cache) or "none" (no token mixer)."""
    info = m.__dict__.get("_block_info")
    if info is None:
        rows = []
        for il, blk in enumerate(m.blocks):
            mx = blk.mixer
            if isinstance(mx, _blocks.Attention):
                src = mx.kv_shared_from if mx.kv_shared_from >= 0 else il
                k, v = _blocks.kv_elements_per_token(m.blocks[src])
                elems = k + v + _blocks.indexer_elements_per_token(m.blocks[src])
                w = m.blocks[src].mixer.window
                if mx.kv_shared_from >= 0:
                    kind = "shared"
                elif mx.kv_lora_rank:
                    kind = "mla"
                else:
                    kind = "swa" if w else "full"
                rows.append((kind, elems, w, src, (0, 0)))
            elif isinstance(mx, (_blocks.Recurrent, _blocks.ShortConv)):
                rows.append(("recurrent", 0, 0, il, _blocks.state_elements(blk)))
            else:
                rows.append(("none", 0, 0, il, (0, 0)))
        info = tuple(rows)
        object.__setattr__(m, "_block_info", info)
    return info


def kv_elements_per_token_layer(model, il: int | None = None) -> int:
    """K and V elements one token adds to an attention layer's cache: 2 (K and V) x n_kv_heads x head_dim; for
    MLA the latent, kv_lora_rank + qk_rope_head_dim (K only); a DSA indexer key on top. With il, block il's
    (the cache it reads, for a block sharing an earlier one's; 0 for a block without attention); without,
    the widest block's (every block's, in a model whose attention blocks are alike).

    The one KV formula: llama.cpp's cache, vLLM's pages and SGLang's cells all multiply it by their
    element size (serving_plan uses it too)."""
    model = get_model(model)
    info = _block_info(model)
    if il is not None:
        check_int(il, "il", 0, model.num_hidden_layers - 1)
        return info[il][1]
    return max((r[1] for r in info), default=0)


def kv_bytes_per_token_layer(model, kv_type: str = "f16", il: int | None = None) -> float:
    """Bytes one token adds to an attention layer's cache in llama.cpp's -ctk/-ctv type (block il's, or the
    widest block's: kv_elements_per_token_layer)."""
    g = _kv_type(kv_type)
    return kv_elements_per_token_layer(model, il) * g.type_size / g.block_size


def kv_layers(model) -> list:
    """The blocks that keep a per-token cache of their own (not recurrent blocks, not blocks reading another
    block's cache, not blocks without attention)."""
    model = get_model(model)
    return [il for il, r in enumerate(_block_info(model)) if r[0] in ("full", "swa", "mla")]


def kv_bytes_per_token(model, kv_type: str = "f16") -> float:
    """KV bytes one more token of context adds, summed over the layers that cache tokens.

    Sliding-window layers are counted too: below the window they grow like the
    others (use kv_cache_bytes for a given context, which caps them)."""
    model = get_model(model)
    g = _kv_type(kv_type)
    info = _block_info(model)
    return sum(info[il][1] for il in kv_layers(model)) * g.type_size / g.block_size


def recurrent_state_elements(model, il: int | None = None) -> tuple:
    """(r, s): f32 elements of one sequence's state in a recurrent block (llama.cpp hparams.n_embd_r() and
    n_embd_s(); see enginelab.blocks): block il's, or the first recurrent block's; (0, 0) without one."""
    model = get_model(model)
    info = _block_info(model)
    if il is not None:
        check_int(il, "il", 0, model.num_hidden_layers - 1)
        return info[il][4]
    for r in info:
        if r[0] == "recurrent":
            return r[4]
    return 0, 0


def recurrent_state_bytes(model, il: int | None = None) -> int:
    """Bytes of one sequence's state in a recurrent block (r + s, f32): block il's or the first one's; 0
    without recurrent blocks."""
    r, s = recurrent_state_elements(model, il)
    return RS_BYTES_PER_ELEMENT * (r + s)


def kv_layer_tokens(model, il: int, n_ctx: int) -> int:
    """Tokens layer il holds at context n_ctx: all of them, or its window (0 without a cache of its own)."""
    if type(model) is not Model or not is_int(il) or not is_int(n_ctx):  # the hot path skips the full checks
        model = get_model(model)
        check_int(il, "il", 0, model.num_hidden_layers - 1)
        check_int(n_ctx, "n_ctx", 0, MAX_CONTEXT)
    kind, _e, w, _src, _rs = _block_info(model)[il]
    if kind in ("recurrent", "shared", "none"):
        return 0
    return min(n_ctx, w) if w else n_ctx


def kv_cache_bytes(model, n_ctx: int, kv_type: str = "f16", layers=None) -> float:
    """Bytes of KV cache for n_ctx tokens of one sequence (over `layers`, default all): the textbook count,
    tokens x bytes per token, plus one sequence's state in a hybrid's recurrent blocks.  What llama.cpp
    allocates (its padding, windows of n_ubatch more, -np streams) is kv_allocation."""
    model = get_model(model)
    check_int(n_ctx, "n_ctx", 0, MAX_CONTEXT)
    g = _kv_type(kv_type)
    if layers is not None:
        if not (not isinstance(layers, (str, bytes)) and hasattr(layers, "__iter__")):
            _check(False, "layers", f"must be None (all) or a list of layer indices, got {brief(layers)}")
        rng = list(layers)
        if not (len(rng) <= MAX_LAYERS):
            _check(False, "layers", f"at most {MAX_LAYERS:,} layer indices, got {len(rng):,}")
        for il in rng:
            check_int(il, "layers", 0, model.num_hidden_layers - 1)
    info = _block_info(model)
    rng = range(model.num_hidden_layers) if layers is None else rng
    total = 0.0
    for il in rng:
        kind, elems, _w, _src, (r, st) = info[il]
        if kind == "recurrent":
            total += RS_BYTES_PER_ELEMENT * (r + st)
        else:
            total += elems * g.type_size / g.block_size * kv_layer_tokens(model, il, n_ctx)
    return total


def _pad(n: int, to: int = KV_PAD) -> int:
    return -(-n // to) * to


def kv_cells(
    model, il: int, n_ctx: int, n_seq: int = 1, n_ubatch: int = N_UBATCH_DEFAULT, kv_unified=False, swa_full=False
) -> int:
    """Cells llama.cpp allocates for block il, over all sequences (streams), at -c n_ctx -np n_seq -ub n_ubatch
    (see the section comment): 0 for a recurrent block.  swa_full (--swa-full; llama_context_default_params()
    turns it on for library users): a windowed block keeps every cell of the context."""
    if type(model) is not Model:
        model = get_model(model)
    _check_kv_args(model, il, n_ctx, n_seq, n_ubatch, kv_unified)
    check_bool(swa_full, "swa_full")
    kind, _e, window, _src, _rs = _block_info(model)[il]
    if kind in ("recurrent", "shared", "none"):
        return 0
    ctx = _pad(n_ctx)  # llama_context: cparams.n_ctx = GGML_PAD(cparams.n_ctx, 256)
    if kv_unified:
        streams, kv_size = 1, ctx
    else:  # one stream per sequence, n_ctx_seq = PAD(n_ctx / n_seq, 256) cells each
        streams, kv_size = n_seq, _pad(ctx // n_seq)
    if kind == "swa" and not swa_full:
        # llama_kv_cache_iswa: size_swa = GGML_PAD(min(size_base, n_swa*(unified ? n_seq_max : 1) + n_ubatch), 256)
        kv_size = _pad(min(kv_size, window * (n_seq if kv_unified else 1) + n_ubatch))
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


def _check_rs_seq(n_rs_seq) -> None:
    if not (is_int(n_rs_seq) and 0 <= n_rs_seq <= MAX_RS_SEQ):
        check_int(n_rs_seq, "n_rs_seq", 0, MAX_RS_SEQ)


def kv_layer_bytes(
    model,
    il: int,
    n_ctx: int,
    kv_type: str = "f16",
    n_seq: int = 1,
    n_ubatch: int = N_UBATCH_DEFAULT,
    kv_unified=False,
    n_rs_seq: int = 0,
    swa_full=False,
) -> float:
    """Bytes llama.cpp allocates for block il's memory: its cells x bytes per cell, or for a recurrent block
    n_seq x (1 + n_rs_seq) states (llama_memory_recurrent keeps one per sequence, whatever the context, and
    n_rs_seq rollback copies of it for speculative decoding)."""
    if type(model) is not Model:
        model = get_model(model)
    _check_kv_args(model, il, n_ctx, n_seq, n_ubatch, kv_unified)
    _check_rs_seq(n_rs_seq)
    check_bool(swa_full, "swa_full")
    if _block_info(model)[il][0] == "recurrent":
        return float(n_seq * (1 + n_rs_seq) * recurrent_state_bytes(model, il))
    cells = kv_cells(model, il, n_ctx, n_seq, n_ubatch, kv_unified, swa_full)
    return cells * kv_bytes_per_token_layer(model, kv_type, il)


_KV_LAYERS_CACHE: dict = {}


def _kv_layers_bytes(model, n_ctx, kv_type, n_seq, n_ubatch, kv_unified, n_rs_seq=0, swa_full=False) -> list:
    """[kv_layer_bytes(model, il, ...) for every block]: each kind of block computed once (every block of a kind
    allocates the same), memoised per arguments."""
    key = (model, n_ctx, kv_type, n_seq, n_ubatch, kv_unified, n_rs_seq, swa_full)
    try:
        hit = _KV_LAYERS_CACHE.get(key)
    except TypeError:  # an unhashable argument: kv_layer_bytes says what is wrong with it
        hit = None
        key = None
    if hit is None:
        by_kind = {}
        hit = []
        for il, (kind, elems, w, _src, rs) in enumerate(_block_info(model)):
            sig = (kind, elems, w, rs)  # blocks alike allocate alike
            if sig not in by_kind:
                by_kind[sig] = kv_layer_bytes(
                    model, il, n_ctx, kv_type, n_seq, n_ubatch, kv_unified, n_rs_seq, swa_full
                )
            hit.append(by_kind[sig])
        if key is not None:
            if len(_KV_LAYERS_CACHE) >= WORK_CACHE_MAX:
                _KV_LAYERS_CACHE.clear()
            _KV_LAYERS_CACHE[key] = hit
    return list(hit)


KV_KIND_LABELS = {"full": "global", "swa": "sliding", "mla": "MLA latent", "recurrent": "recurrent"}


def kv_allocation(
    model,
    n_ctx: int,
    kv_type: str = "f16",
    n_seq: int = 1,
    n_ubatch: int = N_UBATCH_DEFAULT,
    kv_unified=False,
    n_rs_seq: int = 0,
    swa_full=False,
) -> list:
    """llama.cpp's memory for the model at these settings, one row per kind of block (what its load log
    prints as one llama_kv_cache or llama_memory_recurrent line each):

        {"kind", "layers" (count), "cells" (per block, all streams), "bytes_per_cell", "bytes"}

    bytes_per_cell is per block; a recurrent row has cells = n_seq (one per sequence, as the log counts
    them) and bytes_per_cell the state's bytes times 1 + n_rs_seq (the state and its rollback copies)."""
    model = get_model(model)
    _kv_type(kv_type)
    _check_rs_seq(n_rs_seq)
    check_bool(swa_full, "swa_full")
    rows: dict = {}
    for il, (kind, _e, _w, _src, _rs) in enumerate(_block_info(model)):
        if kind in ("shared", "none"):
            continue
        if kind == "recurrent":
            _check_kv_args(model, il, n_ctx, n_seq, n_ubatch, kv_unified)
            cells, per = n_seq, float((1 + n_rs_seq) * recurrent_state_bytes(model, il))
        else:
            cells = kv_cells(model, il, n_ctx, n_seq, n_ubatch, kv_unified, swa_full)
            per = kv_bytes_per_token_layer(model, kv_type, il)
        r = rows.setdefault(kind, {"kind": kind, "layers": 0, "cells": cells, "bytes_per_cell": per, "bytes": 0.0})
        r["layers"] += 1
        r["bytes"] += cells * per
    order = ("full", "mla", "swa", "recurrent")
    return [rows[k] for k in order if k in rows]


def _attention_flops_per_token_pair(m: Model, il: int | None = None) -> float:
    """FLOPs one query spends on one cached token in block il (or the first attention block): QK^T and AV,
    2 each per element; MLA with the absorbed up-projections scores over kv_lora_rank + rope and sums over
    kv_lora_rank (llama.cpp's MLA path)."""
    blocks = m.blocks
    if il is None:
        il = next((i for i, b in enumerate(blocks) if isinstance(b.mixer, _blocks.Attention)), None)
        if il is None:
            return 0.0
    mx = blocks[il].mixer
    if not isinstance(mx, _blocks.Attention):
        return 0.0
    if mx.kv_lora_rank:
        return 2.0 * mx.n_head * (2 * mx.kv_lora_rank + mx.rope_dim)
    return 2.0 * mx.n_head * (mx.head_dim_k + mx.head_dim_v)


def _recurrent_flops_per_token(m: Model, il: int | None = None) -> float:
    """A recurrent block's own FLOPs per token beyond its matmuls: the state update touches each element of s
    a few times (decay, k^T S, the rank-1 update, q^T S: about 7 FLOPs each) and the convolution
    2 x kernel x its channels (r / (kernel - 1))."""
    info = _block_info(m)
    if il is None:
        il = next((i for i, r in enumerate(info) if r[0] == "recurrent"), None)
        if il is None:
            return 0.0
    if info[il][0] != "recurrent":
        return 0.0
    r, s = info[il][4]
    mx = m.blocks[il].mixer
    k = mx.d_conv if isinstance(mx, _blocks.Recurrent) else mx.l_cache
    conv_dim = r // (k - 1) if k > 1 else 0
    return 7.0 * s + 2.0 * k * conv_dim


_KV_PLAN_CACHE: dict = {}

KIND_FULL, KIND_WINDOW, KIND_RECURRENT, KIND_NONE = 0, 1, 2, 3


def _kv_plan(m: Model, kv_type: str, swa_full: bool = False) -> tuple:
    """Per (model, KV type), what decode_kv_read_bytes and decode_attention_flops multiply, one entry per block:
    (bytes per cached token it reads, FLOPs per cached token, window (0: every token), a recurrent block's
    bytes moved and FLOPs per token, kind: KIND_FULL, KIND_WINDOW, KIND_RECURRENT or KIND_NONE). A block that
    shares an earlier block's cache reads that cache. Decode at many contexts (the decode curve) reads it
    once. swa_full (llama.cpp's --swa-full): a sliding-window block keeps every cell, and its attention reads
    them all: ggml-cuda's fattn-vec.cuh loops over every K/V cell up to KV_max and masks the old ones, and
    KV_max (flash_attn_mask_to_KV_max) only trims masked cells at the end, so the block reads as a full one."""
    key = (m, kv_type, bool(swa_full))
    plan = _KV_PLAN_CACHE.get(key)
    if plan is None:
        g = _kv_type(kv_type)
        rows = []
        for il, (kind, elems, w, _src, (r, s)) in enumerate(_block_info(m)):
            if kind == "recurrent":
                rows.append((0.0, 0.0, 0, 2.0 * RS_BYTES_PER_ELEMENT * (r + s), _recurrent_flops_per_token(m, il), 2))
            elif kind == "none":
                rows.append((0.0, 0.0, 0, 0.0, 0.0, 3))
            else:
                per = elems * g.type_size / g.block_size
                w = 0 if swa_full else w
                rows.append((per, _attention_flops_per_token_pair(m, il), w, 0.0, 0.0, 1 if w else 0))
        plan = tuple(rows)
        if len(_KV_PLAN_CACHE) >= WORK_CACHE_MAX:
            _KV_PLAN_CACHE.clear()
        _KV_PLAN_CACHE[key] = plan
    return plan
