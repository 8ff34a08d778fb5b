"""ggml's block types and llama-quantize's per-tensor rules.

This module owns three things the rest of the library builds on:

* the ggml types: how many weights a block holds and how many bytes it takes, from the block structs in
  ggml/src/ggml-common.h (bits per weight follow: Q8_0 is 32 int8 + one fp16 scale = 34 bytes -> 8.5 bpw);
* `Tensor`: one tensor of a GGUF file, with its GGUF name, ggml shape and role (its "class");
* llama-quantize's presets (Q4_K_M, Q6_K, ...): which ggml type each tensor gets, following
  llama_tensor_get_type in src/llama-quant.cpp, and `quantize_plan`, the per-tensor result.

It imports only enginelab.checks: perf_model (sizes, placement) and gguf_header (reading files) import it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .checks import brief, check

_check = check


# ---------------------------------------------------------------------------
# 1. ggml block types
# ---------------------------------------------------------------------------
# A quantized tensor is stored in blocks of `block_size` weights taking
# `type_size` bytes (ggml.c type_traits; gguf-py GGML_QUANT_SIZES).
# bpw = 8 * type_size / block_size.


@dataclass(frozen=True)
class GGMLType:
    type_id: int  # the value of `enum ggml_type` (ggml.h), as written in each GGUF tensor info
    name: str  # as in gguf-py's GGMLQuantizationType (ggml.c spells them in lower case: "q4_K")
    block_size: int  # ggml.c `blck_size`: weights per block
    type_size: int  # ggml.c `type_size`: bytes per block

    @property
    def bpw(self) -> float:
        """Bits per weight."""
        return 8.0 * self.type_size / self.block_size

    bits_per_weight = bpw

    @property
    def is_quantized(self) -> bool:
        return self.block_size > 1

    def row_bytes(self, n_per_row: int) -> int:
        """ggml_row_size(): bytes for one row of `n_per_row` weights (must be whole blocks)."""
        if n_per_row % self.block_size:
            raise ValueError(
                f"{self.name} stores blocks of {self.block_size} weights; "
                f"a row of {n_per_row} is not a whole number of blocks"
            )
        return n_per_row // self.block_size * self.type_size


QK_K = 256  # ggml-common.h: weights per super-block of the K-quants and most IQ types

_TYPE_ROWS = (
    # id  name       block  bytes per block, from the struct in ggml-common.h
    (0, "F32", 1, 4),
    (1, "F16", 1, 2),
    (2, "Q4_0", 32, 2 + 16),  # block_q4_0: ggml_half d; uint8_t qs[QK4_0/2]
    (3, "Q4_1", 32, 2 + 2 + 16),  # block_q4_1: d, m; qs[16]
    # ids 4 and 5 were Q4_2 and Q4_3, removed from ggml
    (6, "Q5_0", 32, 2 + 4 + 16),  # block_q5_0: d; qh[4] (5th bits); qs[16]
    (7, "Q5_1", 32, 2 + 2 + 4 + 16),  # block_q5_1: d, m; qh[4]; qs[16]
    (8, "Q8_0", 32, 2 + 32),  # block_q8_0: d; int8 qs[32]
    (9, "Q8_1", 32, 2 + 2 + 32),  # block_q8_1: d, s; qs[32] -> 36 (gguf-py still says 40, from when d, s were
    #                             float; Q8_1 is only an intermediate for dot products, never stored in files)
    (10, "Q2_K", QK_K, QK_K // 16 + QK_K // 4 + 2 + 2),  # block_q2_K: scales[16]; qs[64]; d, dmin -> 84
    (11, "Q3_K", QK_K, QK_K // 8 + QK_K // 4 + 12 + 2),  # block_q3_K: hmask[32]; qs[64]; scales[12]; d -> 110
    (12, "Q4_K", QK_K, 2 + 2 + 12 + QK_K // 2),  # block_q4_K: d, dmin; scales[12]; qs[128] -> 144
    (13, "Q5_K", QK_K, 2 + 2 + 12 + QK_K // 8 + QK_K // 2),  # block_q5_K: + qh[32] -> 176
    (14, "Q6_K", QK_K, QK_K // 2 + QK_K // 4 + QK_K // 16 + 2),  # block_q6_K: ql[128]; qh[64]; scales[16]; d -> 210
    (15, "Q8_K", QK_K, 4 + QK_K + QK_K // 16 * 2),  # block_q8_K: float d; qs[256]; int16 bsums[16] -> 292
    (16, "IQ2_XXS", QK_K, 2 + QK_K // 8 * 2),  # block_iq2_xxs: d; uint16 qs[32] -> 66
    (17, "IQ2_XS", QK_K, 2 + QK_K // 8 * 2 + QK_K // 32),  # block_iq2_xs: + scales[8] -> 74
    (18, "IQ3_XXS", QK_K, 2 + 3 * (QK_K // 8)),  # block_iq3_xxs: d; qs[96] -> 98
    (19, "IQ1_S", QK_K, 2 + QK_K // 8 + QK_K // 16),  # block_iq1_s: d; qs[32]; uint16 qh[8] -> 50
    (20, "IQ4_NL", 32, 2 + 16),  # block_iq4_nl: d; qs[QK4_NL/2]
    (21, "IQ3_S", QK_K, 2 + 13 * (QK_K // 32) + QK_K // 64),  # block_iq3_s: d; qs[64]; qh[8]; signs[32]; scales[4]
    (22, "IQ2_S", QK_K, 2 + QK_K // 4 + QK_K // 16),  # block_iq2_s: d; qs[64]; qh[8]; scales[8] -> 82
    (23, "IQ4_XS", QK_K, 2 + 2 + QK_K // 64 + QK_K // 2),  # block_iq4_xs: d; scales_h; scales_l[4]; qs[128] -> 136
    (24, "I8", 1, 1),
    (25, "I16", 1, 2),
    (26, "I32", 1, 4),
    (27, "I64", 1, 8),
    (28, "F64", 1, 8),
    (29, "IQ1_M", QK_K, QK_K // 8 + QK_K // 16 + QK_K // 32),  # block_iq1_m: qs[32]; qh[16]; scales[8] -> 56
    (30, "BF16", 1, 2),
    # ids 31-33 (Q4_0_4_4, Q4_0_4_8, Q4_0_8_8) were removed from GGUF files: Q4_0 is now repacked at load time
    (34, "TQ1_0", QK_K, (QK_K - 4 * QK_K // 64) // 5 + QK_K // 64 + 2),  # block_tq1_0: qs[48]; qh[4]; d -> 54
    (35, "TQ2_0", QK_K, QK_K // 4 + 2),  # block_tq2_0: qs[64]; d -> 66
    # ids 36-38 (IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8) were removed the same way
    (39, "MXFP4", 32, 1 + 16),  # block_mxfp4: uint8 e (E8M0 scale); qs[16] (E2M1 nibbles) -> 17, used by gpt-oss
    # Newer types: some ggml.h versions still end at MXFP4 = 39 (GGML_TYPE_COUNT = 40); these are in later
    # ggml.h / ggml.c type_traits / ggml-common.h:
    (40, "NVFP4", 64, 64 // 16 + 64 // 2),  # block_nvfp4: uint8 d[4] (UE4M3, one per 16 weights); qs[32] -> 36
    (41, "Q1_0", 128, 2 + 128 // 8),  # block_q1_0: d; qs[16] (one bit per weight) -> 18
    (42, "Q2_0", 64, 2 + 64 // 4),  # block_q2_0: d; qs[16] (two bits per weight) -> 18; not yet in gguf-py 0.19
)

GGML_TYPES_BY_ID: dict[int, GGMLType] = {row[0]: GGMLType(*row) for row in _TYPE_ROWS}
GGML_TYPES: dict[str, GGMLType] = {t.name: t for t in GGML_TYPES_BY_ID.values()}

# ids that ggml once used and then removed; a file using them is from an old or odd converter
REMOVED_GGML_TYPES = {
    4: "Q4_2",
    5: "Q4_3",
    31: "Q4_0_4_4",
    32: "Q4_0_4_8",
    33: "Q4_0_8_8",
    36: "IQ4_NL_4_4",
    37: "IQ4_NL_4_8",
    38: "IQ4_NL_8_8",
}


def ggml_type(name: str) -> GGMLType:
    """A ggml type by name (case-insensitive), or ValueError naming the known ones."""
    key = name.upper() if isinstance(name, str) else None
    if key not in GGML_TYPES:
        _check(False, "ggml_type", f"unknown type {brief(name)}; allowed: {', '.join(GGML_TYPES)}")
    return GGML_TYPES[key]


# ---------------------------------------------------------------------------
# 2. GGUF tensors
# ---------------------------------------------------------------------------
# convert_hf_to_gguf.py writes each weight under a GGUF name (llama-arch.cpp),
# with ggml's dimension order: ne[0] is the row length (the input features of a
# matmul), ne[1] the rows, ne[2] the experts.


@dataclass(frozen=True)
class Tensor:
    name: str  # GGUF name, e.g. "blk.7.attn_v.weight"
    ne: tuple  # ggml dims, ne[0] = row length
    cls: str  # tensor class: attn_q, ffn_down_exps, token_embd, norm, ...
    layer: int  # block index, -1 for non-block tensors
    src_type: str = "F16"  # type in an unquantized (F16/BF16) GGUF: norms and biases are F32

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.ne:
            n *= d
        return n


_new_object = object.__new__
_set = object.__setattr__


def make_tensor(name: str, ne: tuple, cls: str, layer: int, src_type: str = "F16") -> Tensor:
    """Tensor(name, ne, cls, layer, src_type), the same object built for about three quarters of the cost (a
    model's inventory builds hundreds on its first visit): the fields set as the frozen dataclass's __init__ sets
    them, without its call. (Not through the instance's __dict__: that would turn its attributes into a dict's
    entries, each read later several times slower.) Tensor has no __post_init__, so nothing is skipped."""
    t = _new_object(Tensor)
    _set(t, "name", name)
    _set(t, "ne", ne)
    _set(t, "cls", cls)
    _set(t, "layer", layer)
    _set(t, "src_type", src_type)
    return t


def weight_order(t: Tensor):
    # llama_model_loader::weights_map is sorted by block number, then by name
    # (weight_name_comparer), and llama-quantize walks it in that order, which is
    # what its per-layer counters (i_attention_wv, ...) count.
    return (t.layer, t.name)


# ---------------------------------------------------------------------------
# 3. llama-quantize presets
# ---------------------------------------------------------------------------
# A preset (llama_ftype) has a default ggml type (llama_ftype_get_default_type),
# and llama_tensor_get_type_impl in src/llama-quant.cpp moves some tensors to
# other types by their role (its tensor_category), their layer and the model's
# shape.  The rules below follow that function branch by branch for the presets
# listed in QUANT_PRESETS.
#
# Naming: the module prints plain "Q3_K" and "Q2_K" rows that store every
# quantizable tensor in that one ggml type (3.44 and 2.63 bpw for Llama 3.1 8B),
# so in the library those two names mean the plain types.  llama-quantize's own
# "Q2_K" mix, the file people download as Q2_K, is "Q2_K_MIX" here (its label in
# the app is "Q2_K", and its file name ends in -Q2_K.gguf); llama-quantize's
# "Q3_K" is only an alias of Q3_K_M.

# preset -> default ggml type (llama_ftype_get_default_type)
_FTYPE_DEFAULT = {
    "F32": "F32", "F16": "F16", "BF16": "BF16", "Q8_0": "Q8_0", "Q6_K": "Q6_K",
    "Q5_K_M": "Q5_K", "Q5_K_S": "Q5_K", "Q5_0": "Q5_0", "Q5_1": "Q5_1",
    "Q4_K_M": "Q4_K", "Q4_K_S": "Q4_K", "Q4_0": "Q4_0", "Q4_1": "Q4_1",
    "IQ4_NL": "IQ4_NL", "IQ4_XS": "IQ4_XS",
    "Q3_K_L": "Q3_K", "Q3_K_M": "Q3_K", "Q3_K_S": "Q3_K",
    "IQ3_M": "IQ3_S", "IQ3_S": "IQ3_S", "IQ3_XS": "IQ3_S", "IQ3_XXS": "IQ3_XXS",
    "Q2_K_MIX": "Q2_K", "Q2_K_S": "Q2_K",
    "IQ2_M": "IQ2_S", "IQ2_S": "IQ2_XS", "IQ2_XS": "IQ2_XS", "IQ2_XXS": "IQ2_XXS",
    "IQ1_M": "IQ1_M", "IQ1_S": "IQ1_S",
    "MXFP4_MOE": "MXFP4",
}  # fmt: skip
# names that store every quantizable tensor in one ggml type (llama-quantize --pure)
_PURE = {"Q3_K": "Q3_K", "Q2_K": "Q2_K", "Q4_K": "Q4_K", "Q5_K": "Q5_K"}
# The presets whose published files are made with an importance matrix: llama-quantize refuses IQ1/IQ2/
# IQ3_XXS tensors (and Q2_K_S's Q2_K tensors) without one (tensor_requires_imatrix), and the rest of the IQ
# family is published with one too (the i-quants were designed around it). An imatrix changes a few rules
# (IQ3_XXS's attn_v and ffn_down, IQ4's and Q4_0/Q5_0's first ffn_down layers).
IMATRIX_PRESETS = ("IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS", "IQ3_XS", "IQ3_S", "IQ3_M",
                   "IQ4_XS", "IQ4_NL", "Q2_K_S")  # fmt: skip

QUANT_PRESETS = [
    "F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_K_S", "Q4_K_M", "Q4_K_S", "Q4_0",
    "IQ4_XS", "IQ4_NL", "Q3_K_L", "Q3_K_M", "Q3_K_S", "IQ3_M", "IQ3_XXS", "Q3_K",
    "Q2_K_MIX", "Q2_K_S", "IQ2_M", "IQ2_XS", "Q2_K",
]  # fmt: skip
ALL_QUANTS = QUANT_PRESETS + [q for q in list(_FTYPE_DEFAULT) + list(_PURE) if q not in QUANT_PRESETS]

# What people see: the file names on Hugging Face (llama-quantize's own names); the module's single-type rows
# say what they are.
_LABELS = {
    "Q2_K_MIX": "Q2_K",
    "Q2_K": "every tensor Q2_K (the module's table)",
    "Q3_K": "every tensor Q3_K (the module's table)",
    "Q4_K": "every tensor Q4_K",
    "Q5_K": "every tensor Q5_K",
}


def quant_label(quant: str) -> str:
    """The name a preset goes by in the app and on Hugging Face (Q2_K_MIX is the file called Q2_K)."""
    return _LABELS.get(quant, quant)


def quant_short(quant) -> str:
    """A preset's name in running text and titles: the file name people know (Q2_K_MIX -> "Q2_K"); the module's
    single-type rows say so ("Q2_K, every tensor")."""
    if quant in _PURE:
        return f"{quant}, every tensor"
    return _LABELS.get(quant, quant) if quant is not None else "its own types"


def quant_file_tag(quant) -> str:
    """The tag in a GGUF file name: Model-<tag>.gguf (Q2_K_MIX -> Q2_K; the pure types get -pure)."""
    if quant is None:
        return "model"
    if quant == "Q2_K_MIX":
        return "Q2_K"
    if quant in _PURE:
        return quant + "-pure"
    return quant


def quant_options() -> list:
    """(value, label) for every preset a quantization dropdown offers: llama-quantize's presets under their
    Hugging Face file names first, then the module's single-type rows."""
    files = [q for q in QUANT_PRESETS if q not in _PURE]
    return [(q, quant_label(q)) for q in files + [q for q in QUANT_PRESETS if q in _PURE]]


def check_quant(quant: str) -> str:
    """The preset or pure-type name, or ValueError naming the allowed ones."""
    if not (isinstance(quant, str) and (quant in _FTYPE_DEFAULT or quant in _PURE)):
        _check(False, "quant", f"unknown quantization {brief(quant)}; allowed: {', '.join(ALL_QUANTS)}")
    return quant


def main_type(quant: str) -> str:
    """The ggml type most tensors of a preset (or pure name) get: Q4_K for Q4_K_M."""
    q = check_quant(quant)
    return _PURE.get(q) or _FTYPE_DEFAULT[q]


def _use_more_bits(i_layer: int, n_layers: int) -> bool:
    # llama-quant.cpp use_more_bits: the first and last eighth, and every third layer between.
    # C++ integer division and modulo: (i - n/8) % 3 is negative-safe here since i >= n/8.
    a = n_layers // 8
    return i_layer < a or i_layer >= 7 * n_layers // 8 or (i_layer - a) % 3 == 2


def _is_70b(model) -> bool:
    # llama-model.cpp sets LLM_TYPE_70B for 80-layer Llama and Qwen2 models.
    return model.model_type in ("llama", "qwen2") and model.num_hidden_layers == 80


def _allows_quantization(t: Tensor) -> bool:
    # tensor_allows_quantization (src/llama-quant.cpp): 2-D and 3-D weights only; no norms, no router; Gemma
    # 3n/4's per_layer_model_proj ("not too big so keep them as it is"), altup and laurel stay as converted;
    # so do the SSM / linear-attention convolutions (ssm_conv1d, Kimi's ssm_conv1d_q/k/v) and LFM2's short one.
    return (
        len(t.ne) >= 2
        and t.name.endswith("weight")
        and "_norm.weight" not in t.name
        and "ffn_gate_inp.weight" not in t.name
        and "ssm_conv1d" not in t.name
        and "shortconv.conv.weight" not in t.name
        and "per_layer_model_proj" not in t.name
        and "altup" not in t.name
        and "laurel" not in t.name
    )


def _fallback(t: Tensor, typ: str) -> str:
    # tensor_type_fallback: a row that is not a multiple of the block size cannot use that type;
    # llama-quantize picks a 32-weight type instead.  The 256-weight IQ types and Q2_K/Q3_K fall back to
    # IQ4_NL (the llama-quant.cpp our rules follow; its 2026 rewrite sends Q2_K/Q3_K to Q4_0 instead, the same
    # 4.5 bpw, so sizes agree either way).
    bs = GGML_TYPES[typ].block_size
    if t.ne[0] % bs == 0:
        return typ
    alt = {"IQ1_S": "IQ4_NL", "IQ1_M": "IQ4_NL", "IQ2_XXS": "IQ4_NL", "IQ2_XS": "IQ4_NL",
           "IQ2_S": "IQ4_NL", "IQ3_XXS": "IQ4_NL", "IQ3_S": "IQ4_NL", "IQ4_XS": "IQ4_NL",
           "Q2_K": "IQ4_NL", "Q3_K": "IQ4_NL", "TQ1_0": "Q4_0", "TQ2_0": "Q4_0",
           "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}.get(typ, "F16")  # fmt: skip
    if t.ne[0] % GGML_TYPES[alt].block_size:
        alt = "F16"
    return alt


_IQ2_GROUP = ("IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M")
_ATTN_V = ("attn_v", "attn_qkv", "attn_kv_b")  # category_is_attn_v: fused qkv and MLA's kv_b count as attn_v


def _tensor_type(model, t: Tensor, ftype: str, default: str, counters: dict, tied: bool, imatrix: bool) -> str:
    """llama_tensor_get_type_impl, branch by branch."""
    new = default
    n_expert = model.n_expert
    gqa = model.n_gqa
    cls = t.cls
    iq2s = ftype in ("IQ2_S", "IQ2_M")
    if cls == "output" or (tied and cls == "token_embd"):
        # the output head (and a tied embedding, which is the same matrix)
        if ftype == "MXFP4_MOE" or t.ne[0] % GGML_TYPES[new].block_size:
            return "Q8_0"
        if ftype in _IQ2_GROUP or ftype == "IQ3_XXS":
            return "Q5_K"
        return new if new == "Q8_0" else "Q6_K"
    if ftype == "MXFP4_MOE":
        return "MXFP4" if len(t.ne) > 2 and t.ne[2] > 1 else "Q8_0"
    if cls == "token_embd":
        if ftype in ("IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ1_M"):
            return "Q2_K"
        if ftype in ("IQ2_S", "IQ2_M", "IQ3_XXS"):
            return "IQ3_S"
        return new
    if ftype in _IQ2_GROUP:
        if cls in _ATTN_V:
            new = "Q4_K" if gqa >= 4 or n_expert >= 4 else ("IQ3_S" if iq2s else "Q2_K")
            counters["i_attention_wv"] += 1
        elif n_expert == 8 and cls == "attn_k":
            new = "Q4_K"
        elif cls in ("ffn_down", "ffn_down_exps"):
            # the counter itself, not the block: one step per ffn_down* tensor, so a block's routed and shared
            # experts (ffn_down_exps, ffn_down_shexp) take two
            if counters["i_ffn_down"] < counters["n_ffn_down"] // 8:
                new = "IQ3_S" if iq2s else "Q2_K"
            counters["i_ffn_down"] += 1
        elif cls == "attn_output":
            if n_expert == 8:
                new = "Q5_K"
            elif ftype in ("IQ1_S", "IQ1_M"):
                new = "IQ2_XXS"
            elif iq2s:
                new = "IQ3_S"
        return new
    if cls in _ATTN_V:
        i, n = counters["i_attention_wv"], counters["n_attention_wv"]
        if ftype == "Q2_K_MIX":
            new = "Q4_K" if gqa >= 4 else "Q3_K"
        elif ftype == "Q2_K_S" and gqa >= 4:
            new = "Q4_K"
        elif ftype == "IQ3_XXS":
            new = "Q4_K" if gqa >= 4 else ("IQ3_XXS" if imatrix else "IQ3_S")
        elif ftype in ("IQ3_XS", "IQ3_S") and gqa >= 4:
            new = "Q4_K"
        elif ftype == "IQ3_M":
            new = "Q4_K"
        elif ftype == "Q3_K_M":
            new = "Q5_K" if i < 2 else "Q4_K"
        elif ftype == "Q3_K_L":
            new = "Q5_K"
        elif ftype in ("IQ4_NL", "IQ4_XS") and gqa >= 4:
            new = "Q5_K"
        elif ftype in ("Q4_K_M", "Q5_K_M") and _use_more_bits(i, n):
            new = "Q6_K"
        elif ftype == "Q4_K_S" and i < 4:
            new = "Q5_K"
        if _is_70b(model) and new in ("Q3_K", "Q4_K"):
            new = "Q5_K"  # 8 heads share attn_v in the 70B: more bits cost little
        if n_expert == 8:
            new = "Q8_0"
        counters["i_attention_wv"] += 1
        # (llama-quant.cpp also has an ATTENTION_QKV branch after this one, but
        # category_is_attn_v() already routes fused qkv here, so it never runs.)
        return new
    if cls == "attn_k":
        if n_expert == 8:
            return "Q8_0"
        return {"IQ3_XS": "IQ3_XXS", "IQ3_XXS": "IQ2_S"}.get(ftype, new)
    if cls == "attn_q":
        return {"IQ3_XS": "IQ3_XXS", "IQ3_XXS": "IQ2_S"}.get(ftype, new)
    if cls in ("ffn_down", "ffn_down_exps"):
        # layer_info: the layer index is a counter for dense models, the tensor's block for MoE
        il = t.layer if n_expert > 1 else counters["i_ffn_down"]
        n = counters["n_ffn_down"]
        if ftype == "Q2_K_MIX":
            new = "Q3_K"
        elif ftype == "Q2_K_S":
            if il < n // 8:
                new = "Q4_K"
        elif ftype == "IQ3_XXS" and not imatrix:
            new = "Q4_K" if il < n // 8 else "Q3_K"
        elif ftype == "Q3_K_M":
            new = "Q5_K" if il < n // 16 else "Q4_K"  # the Q3_K branch is Falcon-only
        elif ftype == "IQ3_M" and (il < n // 8 or (n_expert == 8 and _use_more_bits(il, n))):
            new = "Q4_K"
        elif ftype == "Q3_K_L":
            new = "Q5_K"
        elif ftype == "Q4_K_M":
            if _use_more_bits(il, n):
                new = "Q6_K"
        elif il < n // 8 and ftype in ("IQ4_NL", "IQ4_XS") and not imatrix:
            new = "Q5_K"
        elif ftype == "Q5_K_M" and _use_more_bits(il, n):
            new = "Q6_K"
        elif ftype == "Q4_K_S" and il < n // 8:
            new = "Q5_K"
        elif ftype in ("Q4_0", "Q5_0") and imatrix and il < n // 8:
            new = "Q4_1" if ftype == "Q4_0" else "Q5_1"
        counters["i_ffn_down"] += 1
        return new
    if cls == "attn_output":
        if n_expert == 8:
            if ftype in ("Q2_K_MIX", "IQ3_XS", "IQ3_XXS", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M",
                         "IQ3_S", "IQ3_M", "IQ4_XS"):  # fmt: skip
                new = "Q5_K"
        else:
            new = {"Q2_K_MIX": "Q3_K", "IQ3_XXS": "IQ3_S", "Q3_K_M": "Q4_K", "Q3_K_L": "Q5_K", "IQ3_M": "Q4_K"}.get(
                ftype, new
            )
        return new
    if cls in ("ffn_gate", "ffn_up", "ffn_gate_exps", "ffn_up_exps"):
        key = "i_ffn_gate" if "gate" in cls else "i_ffn_up"
        il = t.layer if n_expert > 1 else counters[key]
        n = counters["n_ffn_down"]
        if ftype == "IQ3_XS" and n // 8 <= il < 7 * n // 8:
            new = "IQ3_XXS"
        counters[key] += 1
        return new
    return new


# ---------------------------------------------------------------------------
# 4. The plan: every tensor's type and bytes
# ---------------------------------------------------------------------------


def tensor_bytes(t: Tensor, typ: str) -> int:
    g = GGML_TYPES[typ]
    rows = t.n_elements // t.ne[0]
    return rows * (-(-t.ne[0] // g.block_size)) * g.type_size


_PLAN_CACHE: dict = {}
_PLAN_CACHE_MAX_ROWS = 100_000  # rows kept over all cached plans (~40 MB at most); then the cache starts over
_plan_cache_rows = 0


def quantize_plan(model, quant, imatrix=None, file=False) -> list:
    """One row per tensor: GGUF name, ggml type, element count and bytes.

    `model` is a perf_model.Model (anything with its fields and tensors()). Types follow llama-quantize's
    per-tensor rules (above) for a preset, or one type for every quantizable tensor for the plain names
    Q2_K/Q3_K/Q4_K/Q5_K. A model read from a GGUF header returns the file's own types for quant=None.
    imatrix: whether the file was made with an importance matrix (None: as published files of the preset
    are, see IMATRIX_PRESETS). file: also the rows of the tensors the file holds but llama.cpp does not load
    (model.file_only_tensors(): GLM-4.5's MTP block), after the others; without it, the loaded tensors only.
    llama-quantize walks every tensor of the file, so the file-only ones count in its layer counters either way.
    """
    key = _plan_key(model, quant, imatrix)
    if key not in _PLAN_CACHE:
        spans = []
        _cache_plan(key, (*_plan(model, key[1], bool(key[2]), spans), tuple(spans) or None))
    loaded, file_only, _spans = _PLAN_CACHE[key]
    return loaded + file_only if file and file_only else loaded


def _plan_key(model, quant, imatrix) -> tuple:
    """quantize_plan's cache key: (model, preset, imatrix as published files of the preset are, or as given)."""
    if quant is None and model.gguf_tensors:
        return (model, None, None)
    quant = check_quant(quant)
    return (model, quant, bool(quant in IMATRIX_PRESETS if imatrix is None else imatrix))


def plan_blocks(model, quant, imatrix=None):
    """For quantize_plan(model, quant, imatrix) made from block templates (cached): per block (block number, the
    start and end of its rows in the plan, its kind), where two blocks of one kind have rows alike but for their
    names and block numbers: a table summed per block can be summed once per kind. Else None."""
    plan = _PLAN_CACHE.get(_plan_key(model, quant, imatrix))
    return plan[2] if plan is not None else None


_SUMMARY_CACHE: dict = {}
_SUMMARY_CACHE_MAX = 512  # (model, quant, imatrix) summaries kept (a few dozen rows each); then it starts over


def plan_summary(model, quant, imatrix=None):
    """What tables summed block by block need of quantize_plan(model, quant, imatrix), for a model whose tensors
    come from its blocks: (the rows before the blocks (the globals), ((block number, kind), ...), {kind: the
    rows of its first block}), where the blocks of one kind have the plan's same rows but for their names and
    block numbers. Made with the plan's own decisions without making every row (or read from the plan, if it is
    cached), and cached. None for other models (a GGUF's own tensors; a file with blocks llama.cpp does not
    load): read quantize_plan."""
    key = _plan_key(model, quant, imatrix)
    hit = _SUMMARY_CACHE.get(key)
    if hit is not None:
        return hit
    plan = _PLAN_CACHE.get(key)
    if plan is not None:
        loaded, _file_only, spans = plan
        if spans is None:
            return None
        kinds: dict = {}
        for _il, a, b, kind in spans:
            if kind not in kinds:
                kinds[kind] = loaded[a:b]
        out = (loaded[: spans[0][1]], tuple((il, kind) for il, _a, _b, kind in spans), kinds)
    else:
        extra = model.file_only_tensors() if key[1] is not None and hasattr(model, "file_only_tensors") else []
        templates = getattr(model, "_tensor_templates", None)
        layout = templates() if key[1] is not None and templates is not None else None
        if layout is None or not _after_the_blocks(layout, extra):
            return None
        out = _plan_of_templates(model, key[1], bool(key[2]), layout, summary=True, extra=extra)
    if len(_SUMMARY_CACHE) >= _SUMMARY_CACHE_MAX:
        _SUMMARY_CACHE.clear()
    _SUMMARY_CACHE[key] = out
    return out


def has_plan(model, quant, imatrix=None) -> bool:
    """Whether quantize_plan(model, quant, imatrix) is cached."""
    return _plan_key(model, quant, imatrix) in _PLAN_CACHE


def forget_plan(model, quant, imatrix=None) -> None:
    """Drop the cached quantize_plan(model, quant, imatrix), if any: the idle warm-up keeps the per-block tables
    made from a plan, not its rows (about 0.4 KB a tensor)."""
    global _plan_cache_rows
    plan = _PLAN_CACHE.pop(_plan_key(model, quant, imatrix), None)
    if plan is not None:
        _plan_cache_rows -= len(plan[0]) + len(plan[1])


def _cache_plan(key, plan: tuple) -> None:
    global _plan_cache_rows
    n = len(plan[0]) + len(plan[1])
    if _plan_cache_rows + n > _PLAN_CACHE_MAX_ROWS:
        _PLAN_CACHE.clear()
        _plan_cache_rows = 0
    _PLAN_CACHE[key] = plan
    _plan_cache_rows += n


# The per-tensor rules (_tensor_type) read, besides the plan's constants (the model, preset, imatrix), a tensor's
# class and shape and one layer index: a counter (_RULE_COUNTER) or, for a MoE's FFN tensors, the tensor's block.
# They compare that index with the counted total only through a few tests (_layer_bucket). So a plan decides the
# type once per (class, shape, buckets of the index) and steps the counters as the rule did; the other tensors of
# that key take the same type (a model's hundreds of tensors take a few dozen decisions). The counters are
# llama-quantize's, stepped per tensor in its order, exactly as _tensor_type steps them.
_RULE_COUNTER = {
    **{c: ("i_attention_wv", "n_attention_wv") for c in _ATTN_V},
    "ffn_down": ("i_ffn_down", "n_ffn_down"),
    "ffn_down_exps": ("i_ffn_down", "n_ffn_down"),
    "ffn_gate": ("i_ffn_gate", "n_ffn_down"),
    "ffn_gate_exps": ("i_ffn_gate", "n_ffn_down"),
    "ffn_up": ("i_ffn_up", "n_ffn_down"),
    "ffn_up_exps": ("i_ffn_up", "n_ffn_down"),
}
_BUCKETS: dict = {}
_BUCKETS_MAX = 1 << 14  # (index, total) pairs: a few hundred per model; bounded all the same (then starts over)


def _layer_bucket(i: int, n: int) -> tuple:
    """Every test _tensor_type makes of a layer index i against a total n (its thresholds n/16, n/8, 7n/8, 2, 4
    and use_more_bits): two indexes in one bucket get the same type from every rule."""
    key = (i, n)
    b = _BUCKETS.get(key)
    if b is None:
        if len(_BUCKETS) >= _BUCKETS_MAX:
            _BUCKETS.clear()
        b = _BUCKETS[key] = (i < n // 16, i < n // 8, i < 2, i < 4, _use_more_bits(i, n), i < 7 * n // 8)
    return b


def _ruled_type(decided: dict, counters: dict, ctr, name: str, ne: tuple, cls: str, il: int, src: str, rule) -> str:
    """The type llama-quantize's rules give a tensor (class cls, shape ne, block il, the rule's counter ctr from
    _RULE_COUNTER), decided once per (class, shape, layer buckets) in `decided` and the counters stepped as the
    rule steps them; rule(tensor) runs _tensor_type where the key is new (the tensor is made only then)."""
    if ctr is None:
        key = (cls, ne)
    else:  # (_layer_bucket, its cache read here first: this runs per tensor)
        i, n = counters[ctr[0]], counters[ctr[1]]
        b = _BUCKETS.get((i, n)) or _layer_bucket(i, n)
        if ctr[0] == "i_attention_wv":  # the counter only (the block is not read)
            key = (cls, ne, b)
        else:  # the counter, or the block for a MoE
            key = (cls, ne, b, _BUCKETS.get((il, n)) or _layer_bucket(il, n))
    hit = decided.get(key)
    if hit is None:
        before = dict(counters)
        typ = rule(make_tensor(name, ne, cls, il, src))
        decided[key] = (typ, tuple((k, v - before[k]) for k, v in counters.items() if v != before[k]))
        return typ
    typ, steps = hit
    for k, d in steps:
        counters[k] += d
    return typ


def _plan(model, quant, imatrix: bool, spans: list | None = None) -> tuple:
    """(rows of the loaded tensors, rows of the file-only tensors), each in llama-quantize's order. spans: as for
    _plan_of_templates, filled when the plan is made from block templates."""
    extra = model.file_only_tensors() if quant is not None and hasattr(model, "file_only_tensors") else []
    templates = getattr(model, "_tensor_templates", None)
    layout = templates() if quant is not None and templates is not None else None
    if layout is not None and _after_the_blocks(layout, extra):
        rows = _plan_of_templates(model, quant, imatrix, layout, spans, extra=extra)
        if not extra:
            return rows, []
        extra_names = {t.name for t in extra}
        return [r for r in rows if r["name"] not in extra_names], [r for r in rows if r["name"] in extra_names]
    loaded = model.tensors()
    tensors = sorted(loaded + extra, key=weight_order) if extra else loaded
    if quant is None:
        types = [t.src_type for t in tensors]
    else:
        tied = not any(t.cls == "output" for t in tensors)
        counters = {
            "i_attention_wv": 0,
            "i_ffn_down": 0,
            "i_ffn_gate": 0,
            "i_ffn_up": 0,
            "n_attention_wv": sum(1 for t in tensors if t.cls in _ATTN_V),
            # init_quantize_state_counters: n_layer_all, the file's block_count (MTP blocks included)
            "n_ffn_down": max([model.num_hidden_layers] + [t.layer + 1 for t in extra]),
        }
        pure = quant in _PURE
        default = _PURE[quant] if pure else _FTYPE_DEFAULT[quant]
        decided = {}  # (class, shape, layer buckets) -> (type, the counters' steps)

        def rule(t):
            return _fallback(t, _tensor_type(model, t, quant, default, counters, tied, imatrix))

        types = []
        for t in tensors:
            if not _allows_quantization(t):
                typ = t.src_type  # norms, biases, the router: kept as converted (F32)
            elif t.src_type == "MXFP4" and not pure:
                # experts released in MXFP4 (gpt-oss): convert_hf_to_gguf.py writes them so even for --outtype
                # f16/bf16, llama-quantize refuses to requantize a quantized tensor without --allow-requantize,
                # and every published file keeps them (bartowski: "all quants keep the FFNs at mxfp4")
                typ = "MXFP4"
            elif default in ("F16", "BF16", "F32"):
                typ = default  # not a quantized type: no per-tensor rules
            elif pure:
                typ = _fallback(t, default)
            else:
                cls = t.cls
                typ = _ruled_type(
                    decided, counters, _RULE_COUNTER.get(cls), t.name, t.ne, cls, t.layer, t.src_type, rule
                )
            types.append(typ)
    sizes = {}  # (shape, type) -> (elements, bytes)
    rows = []
    for t, typ in zip(tensors, types):
        ne = t.ne
        size = sizes.get((ne, typ))
        if size is None:
            n = t.n_elements
            g = GGML_TYPES[typ]
            size = sizes[ne, typ] = (n, n // ne[0] * (-(-ne[0] // g.block_size)) * g.type_size)  # tensor_bytes
        rows.append(  # the row _row(t, typ) makes
            {
                "name": t.name,
                "type": typ,
                "n_elements": size[0],
                "bytes": size[1],
                "cls": t.cls,
                "layer": t.layer,
                "ne": ne,
            }
        )
    if not extra:
        return rows, []
    extra_names = {t.name for t in extra}
    return [r for r in rows if r["name"] not in extra_names], [r for r in rows if r["name"] in extra_names]


def _after_the_blocks(layout: tuple, extra: list) -> bool:
    """Whether the file-only tensors (Model.file_only_tensors) are whole blocks after the model's own, named
    "blk.N." for their block N: then llama-quantize meets them last, and _plan_of_templates plans them there."""
    last = layout[1][-1][0] if layout[1] else -1
    return all(t.layer > last and t.name.startswith(f"blk.{t.layer}.") for t in extra)


def _extra_layers(extra: list) -> list:
    """The file-only tensors as ((block number, ((name after "blk.N.", ne, class, source type), ...)), ...), in
    llama-quantize's order."""
    out: dict = {}
    for t in sorted(extra, key=weight_order):
        out.setdefault(t.layer, []).append((t.name[len(f"blk.{t.layer}.") :], t.ne, t.cls, t.src_type))
    return [(il, tuple(entries)) for il, entries in out.items()]


def _plan_of_templates(model, quant, imatrix: bool, layout: tuple, spans: list | None = None, summary=False, extra=()):
    """_plan's rows for a model whose tensors come from its blocks (perf_model's Model._tensor_templates: the
    globals, then per block its template, the order of model.tensors()): the same rows, in the same order, with
    the same counters, without making the Tensors. What a tensor's type does not owe to the counters (kept as
    converted, MXFP4 experts, F16, a pure type) is decided once per template entry; the rules, as in _plan.
    spans: a list to get, per block, (block number, its rows' start and end, its kind: (its template's number in
    this plan, its rows' types)); two blocks of one kind have rows alike but for their names (plan_blocks).
    summary: instead of the rows, plan_summary's (the globals' rows, ((block number, kind), ...), {kind: the rows
    of its first block}): the same decisions, without the rows of the blocks that repeat a kind."""
    if summary:
        spans = []
    head, layers = layout
    after = _extra_layers(list(extra))  # the file's blocks llama.cpp does not load, met last (_after_the_blocks)
    distinct = {id(tpl): tpl for _il, tpl in layers}
    n_wv = sum(1 for e in head if e[2] in _ATTN_V) + sum(1 for t in extra if t.cls in _ATTN_V)
    per_tpl_wv = {k: sum(1 for e in tpl if e[2] in _ATTN_V) for k, tpl in distinct.items()}
    n_wv += sum(per_tpl_wv[id(tpl)] for _il, tpl in layers)
    tied = not any(e[2] == "output" for e in head) and not any(e[2] == "output" for t in distinct.values() for e in t)
    tied = tied and not any(t.cls == "output" for t in extra)
    counters = {
        "i_attention_wv": 0,
        "i_ffn_down": 0,
        "i_ffn_gate": 0,
        "i_ffn_up": 0,
        "n_attention_wv": n_wv,
        # init_quantize_state_counters: n_layer_all, the file's block_count (MTP blocks included)
        "n_ffn_down": max([model.num_hidden_layers] + [t.layer + 1 for t in extra]),
    }
    pure = quant in _PURE
    default = _PURE[quant] if pure else _FTYPE_DEFAULT[quant]
    decided = {}  # as in _plan: (class, shape, layer buckets) -> (type, the counters' steps)

    def rule(t):
        return _fallback(t, _tensor_type(model, t, quant, default, counters, tied, imatrix))

    sizes = {}  # (shape, type) -> (elements, bytes)

    def facts(prefix: str, entries) -> tuple:
        """Per entry: (name after the prefix, ne, class, source type, its type if no rule decides it, the rule's
        counter). A block's tensors are judged by its first block's names: _allows_quantization reads a name's
        end and words that "blk.N." cannot contain, so every block of a template is judged alike."""
        out = []
        for rest, ne, cls, src in entries:
            t = make_tensor(prefix + rest, ne, cls, 0, src)
            if not _allows_quantization(t):
                fixed = src  # norms, biases, the router: kept as converted (F32)
            elif src == "MXFP4" and not pure:
                fixed = "MXFP4"  # experts released in MXFP4 (gpt-oss), kept so (see _plan)
            elif default in ("F16", "BF16", "F32"):
                fixed = default
            elif pure:
                fixed = _fallback(t, default)
            else:
                fixed = None
            out.append((rest, ne, cls, src, fixed, _RULE_COUNTER.get(cls)))
        return tuple(out)

    def types_of(prefix: str, il: int, entries) -> list:
        """The types of a block's tensors (or the globals'), in order, the counters stepped as they go."""
        types = []
        for rest, ne, cls, src, typ, ctr in entries:
            if typ is None:  # _plan's rule step, the same keys and counters
                typ = _ruled_type(decided, counters, ctr, prefix + rest, ne, cls, il, src, rule)
            types.append(typ)
        return types

    def rows_of(prefix: str, il: int, entries, types: list, rows: list) -> None:
        for (rest, ne, cls, _src, _fixed, _ctr), typ in zip(entries, types):
            size = sizes.get((ne, typ))
            if size is None:
                n_el = 1
                for d in ne:
                    n_el *= d
                g = GGML_TYPES[typ]
                size = sizes[ne, typ] = (n_el, n_el // ne[0] * (-(-ne[0] // g.block_size)) * g.type_size)
            rows.append(
                {
                    "name": prefix + rest,
                    "type": typ,
                    "n_elements": size[0],
                    "bytes": size[1],
                    "cls": cls,
                    "layer": il,
                    "ne": ne,
                }
            )

    rows: list = []
    f = facts("", head)
    rows_of("", -1, f, types_of("", -1, f), rows)
    judged = {}  # id(template) -> (its number in this plan, its facts)
    kinds = {}  # summary: kind -> the rows of its first block
    for il, tpl in layers:
        prefix = f"blk.{il}."
        hit = judged.get(id(tpl))
        if hit is None:
            hit = judged[id(tpl)] = (len(judged), facts(prefix, tpl))
        types = types_of(prefix, il, hit[1])
        kind = (hit[0], *types)
        if summary:
            if kind not in kinds:
                kinds[kind] = []
                rows_of(prefix, il, hit[1], types, kinds[kind])
            spans.append((il, kind))
        else:
            start = len(rows)
            rows_of(prefix, il, hit[1], types, rows)
            if spans is not None:
                spans.append((il, start, len(rows), kind))
    if not summary:  # (a summary is of the loaded blocks, which the file-only ones, met last, cannot change)
        for il, entries in after:
            prefix = f"blk.{il}."
            f = facts(prefix, entries)
            rows_of(prefix, il, f, types_of(prefix, il, f), rows)
    return (rows, tuple(spans), kinds) if summary else rows


def _row(t: Tensor, typ: str) -> dict:
    n = t.n_elements
    g = GGML_TYPES[typ]
    ne0 = t.ne[0]
    return {
        "name": t.name,
        "type": typ,
        "n_elements": n,
        "bytes": n // ne0 * (-(-ne0 // g.block_size)) * g.type_size,  # tensor_bytes(t, typ), n counted once
        "cls": t.cls,
        "layer": t.layer,
        "ne": t.ne,
    }


# ---------------------------------------------------------------------------
# Presets from the file names people download
# ---------------------------------------------------------------------------
# A file's name says its preset (model-Q4_K_M.gguf), not always exactly: unsloth's dynamic quants (UD-Q4_K_XL,
# UD-IQ1_S, ...) raise some tensors above a preset's rules, bartowski's *_L / *_XL keep the embeddings and
# output in Q8_0, and some publishers write Q4_K for Q4_K_M (llama-quantize's own alias: Q3_K means Q3_K_M).
# Such a name is sized as the nearest preset; a GGUF's header gives the exact types.
_FILE_ALIASES = {"Q2_K": "Q2_K_MIX", "Q3_K": "Q3_K_M", "Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M", "MXFP4": "MXFP4_MOE"}
_FILE_NEAREST = {  # a name that is no preset -> the preset it is sized as
    "Q2_K_L": "Q2_K_MIX", "Q2_K_XL": "Q2_K_MIX", "Q3_K_XL": "Q3_K_L", "Q4_K_L": "Q4_K_M", "Q4_K_XL": "Q4_K_M",
    "Q5_K_L": "Q5_K_M", "Q5_K_XL": "Q5_K_M", "Q6_K_L": "Q6_K", "Q6_K_XL": "Q6_K", "Q8_K_XL": "Q8_0",
    "IQ2_XXS_L": "IQ2_XXS", "IQ3_XXS_L": "IQ3_XXS",
}  # fmt: skip


def file_quant(name) -> tuple:
    """(preset, note) from a GGUF file's name: the preset it is sized as (None if the name says none) and, where
    that is not the file's own name, a note: "UD-Q4_K_XL: sized as Q4_K_M (nearest preset; exact from the file)".
    """
    if not isinstance(name, str) or len(name) > 512:
        return None, ""
    words = name.rsplit("/", 1)[-1].upper().replace(".", "-").split("-")
    found = None
    for i, w in enumerate(words):  # the last tag wins: Qwen3-30B-A3B-Q4_K_M -> Q4_K_M
        if w in _FILE_ALIASES or w in _FILE_NEAREST or (w in _FTYPE_DEFAULT and w != "F32"):
            found = ("UD-" if i and words[i - 1] == "UD" else "", w)
    if found is None:
        return None, ""
    ud, tag = found
    said = ud + tag
    if tag in _FILE_ALIASES:
        preset = _FILE_ALIASES[tag]
    elif tag in _FILE_NEAREST:
        preset = _FILE_NEAREST[tag]
    elif tag in _FTYPE_DEFAULT:
        preset = tag
    else:
        return None, ""
    if quant_label(preset) == said:
        return preset, ""
    why = "nearest preset; exact from the file" if ud or tag in _FILE_NEAREST else "the same preset under another name"
    return preset, f"{said}: sized as {quant_label(preset)} ({why})"
