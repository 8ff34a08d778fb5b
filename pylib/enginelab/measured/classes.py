"""ggml types by the work their dot products do per weight: the classes every per-weight parameter is counted in."""

from __future__ import annotations

TYPE_CLASS = {
    "F32": "f16", "F16": "f16", "BF16": "f16",
    "Q8_0": "q8",
    "Q4_0": "legacy", "Q4_1": "legacy", "IQ4_NL": "legacy", "MXFP4": "legacy", "NVFP4": "legacy",
    "Q1_0": "legacy", "Q2_0": "legacy",
    "Q5_0": "q5", "Q5_1": "q5",
    "Q2_K": "kquant", "Q3_K": "kquant", "Q4_K": "kquant", "Q5_K": "kquant", "Q6_K": "kquant", "IQ4_XS": "kquant",
    "IQ3_S": "iquant", "IQ3_XXS": "iquant", "IQ2_S": "iquant", "IQ2_XS": "iquant",
    "IQ2_XXS": "iquant", "IQ1_S": "iquant", "IQ1_M": "iquant", "TQ1_0": "iquant", "TQ2_0": "iquant",
}  # fmt: skip
# f16: converted and multiplied; q8: int8 blocks, multiplied as they are; legacy: 4-bit blocks (nibbles unpacked,
# a 16-entry table for IQ4_NL/MXFP4); q5: the fifth bit assembled from a separate mask; kquant: super-blocks with
# sub-block scales (IQ4_XS: 4-bit table lookups in the same layout); iquant: lattice codebooks of 2-3 bits; on a CPU
# also iq3 and khigh (CPU_CLASS)
CLASSES = ("f16", "q8", "legacy", "q5", "kquant", "iquant", "iq3", "khigh")

# On a CPU (decode; the prompt matmuls keep one K-quant class):
# - a repacked Q4_K (CPU_REPACK) is multiplied by the 4-bit blocks' GEMV kernels: the legacy class (a plain Q4_K, in
#   a build that does not repack it, stays a K-quant);
# - Q3_K, Q5_K and Q6_K keep their high bits in a second array (hmask, qh) that the vec_dot masks, shifts and ORs in
#   every 16 weights, and Q3_K/Q6_K apply a scale per 16 weights: "khigh", dearer than Q2_K and Q4_K;
# - the 3-bit lattices (IQ3_S, IQ3_XXS: a 256/512-entry grid looked up per 4 weights, signs from a separate table)
#   cost more per weight than the 2-bit ones (8 weights per lookup): "iq3".
CPU_CLASS = {"Q4_K": "legacy", "IQ3_S": "iq3", "IQ3_XXS": "iq3", "Q3_K": "khigh", "Q5_K": "khigh", "Q6_K": "khigh"}


def type_class(ggml_type: str, backend: str = "") -> str:
    if backend == "cpu" and ggml_type in CPU_CLASS:
        return CPU_CLASS[ggml_type]
    return TYPE_CLASS.get(ggml_type, "kquant")
