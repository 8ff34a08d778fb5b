"""Sizes: llama-quantize's per-tensor plan, weight bytes, bits per weight, the GGUF file; per-block byte tables."""

from __future__ import annotations

from enginelab.ggml import plan_summary as _ggml_plan_summary
from enginelab.ggml import quantize_plan as _ggml_quantize_plan

from .catalog import get_model
from .models import Model


def quantize_plan(model, quant) -> list:
    """One row per tensor: GGUF name, ggml type, element count and bytes (enginelab.ggml.quantize_plan).

    Types follow llama-quantize's per-tensor rules for a preset, or one type for every quantizable tensor
    for the plain names Q2_K/Q3_K/Q4_K/Q5_K. A model read from a GGUF header returns the file's own types
    for quant=None."""
    return _ggml_quantize_plan(get_model(model), quant)


def _plan_summary(model, quant):
    """enginelab.ggml.plan_summary of quantize_plan(model, quant): (the rows before the blocks, ((block number,
    kind), ...), {kind: the rows of its first block}), or None (then read the plan)."""
    return _ggml_plan_summary(get_model(model), quant)


_WEIGHT_CACHE: dict = {}
_WEIGHT_CACHE_MAX = 512  # (model, quant) pairs kept (a dozen numbers each); then it starts over


def weight_bytes(model, quant: str) -> dict:
    """Bytes per tensor class (attn_q, ffn_down, output, norm, ...) plus 'total'."""
    model = get_model(model)
    if not (quant is None or isinstance(quant, str)):
        return _weight_bytes(model, quant)  # (which says what is wrong with it)
    key = (model, quant)
    hit = _WEIGHT_CACHE.get(key)
    if hit is None:  # (the advisor asks for every preset of a model, several times over, after each change)
        if len(_WEIGHT_CACHE) >= _WEIGHT_CACHE_MAX:
            _WEIGHT_CACHE.clear()
        hit = _WEIGHT_CACHE[key] = _weight_bytes(model, quant)
    return dict(hit)


def _weight_bytes(model, quant: str) -> dict:
    out: dict = {}
    summary = _plan_summary(model, quant)
    for r in quantize_plan(model, quant) if summary is None else summary[0]:
        out[r["cls"]] = out.get(r["cls"], 0) + r["bytes"]
    if summary is not None:  # then block by block: each kind's sums once (the same classes in the same order)
        per_kind: dict = {}
        for _il, kind in summary[1]:
            sums = per_kind.get(kind)
            if sums is None:
                sums = per_kind[kind] = {}
                for r in summary[2][kind]:
                    sums[r["cls"]] = sums.get(r["cls"], 0) + r["bytes"]
            for c, b in sums.items():
                out[c] = out.get(c, 0) + b
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
    table = sum(len(t.name) + 8 + 4 + 8 * len(t.ne) + 4 + 8 for t in model.tensors() + model.file_only_tensors())
    return int(tok + kv + table)


def file_bytes(model, quant: str, imatrix=None) -> int:
    """The whole .gguf file: header + aligned tensor data (with the tensors llama.cpp does not load).
    imatrix: made with an importance matrix (None: as the preset's published files usually are)."""
    model = get_model(model)
    plan = _ggml_quantize_plan(model, quant, imatrix, file=True)
    data = sum(-(-r["bytes"] // GGUF_ALIGNMENT) * GGUF_ALIGNMENT for r in plan)
    head = gguf_metadata_bytes(model)
    return -(-head // GGUF_ALIGNMENT) * GGUF_ALIGNMENT + data


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
    summary = _plan_summary(model, quant)
    if summary is not None:  # blocks of one kind have the same rows (but names): summed once per kind
        plan, layer_kinds, kind_rows = summary  # (plan: the rows before the blocks)
        sums = {}
        for il, kind in layer_kinds:
            hit = sums.get(kind)
            if hit is None:
                d = e = 0
                for r in kind_rows[kind]:
                    if r["cls"].endswith("_exps"):
                        e += r["bytes"]
                    else:
                        d += r["bytes"]
                hit = sums[kind] = (d, e)
            dense[il], experts[il] = hit
    else:
        plan = quantize_plan(model, quant)
    for r in plan:
        il = r["layer"]
        if il >= 0:
            if r["cls"].endswith("_exps"):
                experts[il] += r["bytes"]
            else:
                dense[il] += r["bytes"]
        else:
            other[r["cls"]] = other.get(r["cls"], 0) + r["bytes"]
    return dense, experts, other


_MATRIX_CACHE: dict = {}


def _layer_matrix_bytes(model: Model, quant) -> list:
    """Per block: bytes of its 2-D matrices outside the experts (what a row split spreads over the GPUs)."""
    key = (model, quant)
    if key not in _MATRIX_CACHE:
        if len(_MATRIX_CACHE) > 64:
            _MATRIX_CACHE.clear()
        out = [0] * model.num_hidden_layers
        summary = _plan_summary(model, quant)
        if summary is not None:  # blocks of one kind (_plan_summary) have the same rows but for their names
            sums = {}
            for il, kind in summary[1]:
                hit = sums.get(kind)
                if hit is None:
                    hit = sums[kind] = sum(
                        r["bytes"]
                        for r in summary[2][kind]
                        if r["cls"] not in ("norm", "bias") and not r["cls"].endswith("_exps")
                    )
                out[il] = hit
        else:
            for r in quantize_plan(model, quant):
                if r["layer"] >= 0 and r["cls"] not in ("norm", "bias") and not r["cls"].endswith("_exps"):
                    out[r["layer"]] += r["bytes"]
        _MATRIX_CACHE[key] = out
    return _MATRIX_CACHE[key]


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
        unread = m.unread_tensors()  # loaded, never multiplied: not the kernels' work
        for r in quantize_plan(m, quant):
            il, cls = r["layer"], r["cls"]
            if il < 0 or r["name"] in unread:
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
