"""The hybrid models that published llama-bench runs used: each run's (GGUF architecture, params) as a perf_model
Model (a catalog model or its config.json), its block family, and the scaling of a run's weights to the size its file
printed. enginelab.calibration reads runs through it; enginelab.hybrid_calibration fits the recurrent rows on them.
"""

from __future__ import annotations

import perf_model as pm

from . import blocks

# (GGUF architecture, params in billions as llama-bench prints them): a catalog model or a config.json
_QWEN35_08B = {  # Qwen/Qwen3.5-0.8B config.json (code index, file id 71269929174: a test fixture quoting it)
    "model_type": "qwen3_5",
    "tie_word_embeddings": True,
    "text_config": {
        "model_type": "qwen3_5_text",
        "attn_output_gate": True,
        "full_attention_interval": 4,
        "head_dim": 256,
        "hidden_size": 1024,
        "intermediate_size": 3584,
        "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 6,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 16,
        "linear_value_head_dim": 128,
        "num_attention_heads": 8,
        "num_hidden_layers": 24,
        "num_key_value_heads": 2,
        "tie_word_embeddings": True,
        "vocab_size": 248320,
    },
}
# Qwen/Qwen3.5-9B: hidden 4096, 16 heads of 256, 4 KV heads, FFN 12288 (code index, file id 47033724395); 32 blocks,
# 24 of them delta nets with 16 key heads and 32 value heads of 128 and conv 4 (its llama_memory_recurrent line,
# data/architectures/load_logs.csv: R 2.25 MiB, S 48.00 MiB); vocabulary 248320 as every Qwen3.5 config read; an
# untied output head (tied, the count would be 7.94 B, not llama-bench's 8.95 B and 16.68 GiB in BF16)
_QWEN35_9B = {
    "model_type": "qwen3_5",
    "text_config": {
        "model_type": "qwen3_5_text",
        "full_attention_interval": 4,
        "head_dim": 256,
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_value_head_dim": 128,
        "num_attention_heads": 16,
        "num_hidden_layers": 32,
        "num_key_value_heads": 4,
        "tie_word_embeddings": False,
        "vocab_size": 248320,
    },
}
# NVIDIA-Nemotron-Nano-9B-v2: the geometry of a test fixture quoting its config (code index, file id 70988719928:
# 56 blocks, hidden 4480, FFN 15680, 40 heads of 128, 8 KV heads, 128 Mamba-2 heads of 80, 8 groups, state 128,
# conv 4); an untied output head (tied, 8.30 B; llama-bench prints 8.89 B and 6.07 GiB for its Q4_K_M)
_NEMOTRON_NANO_9B_V2 = {
    "model_type": "nemotron_h",
    "num_hidden_layers": 56,
    "hidden_size": 4480,
    "intermediate_size": 15680,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 131072,
    "hybrid_override_pattern": "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-",
    "ssm_state_size": 128,
    "conv_kernel": 4,
    "n_groups": 8,
    "mamba_num_heads": 128,
    "mamba_head_dim": 80,
    "tie_word_embeddings": False,
}
# LiquidAI/LFM2-1.2B config.json (code index: test fixtures quoting it verbatim, file ids 59124207504 "read from the
# Hub" and 68303452161, and three more with the same keys): 16 blocks, hidden 2048, 32 heads of 64, 8 KV heads,
# block_ff_dim 12288 auto-adjusted to 8192, conv_L_cache 3, attention at full_attn_idxs [2, 5, 8, 10, 12, 14] (here
# as layer_types, the form the lfm2 reader reads), vocabulary 65536, tied; 1.17 B as llama-bench prints it
_LFM2_12B = {
    "model_type": "lfm2",
    "hidden_size": 2048,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "block_ff_dim": 12288,
    "block_auto_adjust_ff_dim": True,
    "block_ffn_dim_multiplier": 1.0,
    "block_multiple_of": 256,
    "conv_L_cache": 3,
    "layer_types": ["full_attention" if il in (2, 5, 8, 10, 12, 14) else "conv" for il in range(16)],
    "vocab_size": 65536,
    "tie_word_embeddings": True,
}
CONFIGS = {
    ("qwen35", "0.75"): _QWEN35_08B,
    ("qwen35", "8.95"): _QWEN35_9B,
    ("qwen35", "26.90"): "qwen3.5-27b",
    ("qwen35moe", "34.66"): "qwen3.6-35b-a3b",
    ("qwen3next", "79.67"): "qwen3-next-80b-a3b",
    ("nemotron_h_moe", "31.58"): "nemotron-3-nano-30b-a3b",
    ("nemotron_h", "8.89"): _NEMOTRON_NANO_9B_V2,
    ("lfm2", "2.70"): "lfm2.5-2.6b",
    ("lfm2", "1.17"): _LFM2_12B,
}
# the size labels of pull-request tables (compare-llama-bench prints no params column)
LABELS = {
    ("qwen35", "0.8B"): "0.75",
    ("qwen35", "9B"): "8.95",
    ("qwen35", "27B"): "26.90",
    ("qwen35moe", "35B.A3B"): "34.66",
    ("qwen3next", "80B.A3B"): "79.67",
    ("nemotron_h_moe", "31B.A3.5B"): "31.58",
    ("nemotron_h", "9B"): "8.89",
    ("lfm2", "1.2B"): "1.17",
}
SIZE_TOLERANCE = 0.15  # a UD file against llama-quantize's preset of the same name (5-8% in the runs read)

# ggml's fused GATED_DELTA_NET op (PR #19504, February 2026) replaced the delta rule's graph of small ops; its
# CUDA kernel was reworked in March (PR #20391): earlier delta-net runs time another implementation
MIN_DATE = {"gated delta net": "2026-03"}

FAMILIES = ("gated delta net", "Mamba-2", "short conv", "attention")
_KIND_FAMILY = {"gated_delta_net": "gated delta net", "kda": "gated delta net", "mamba2": "Mamba-2", "mamba": "Mamba-2"}

_CACHE: dict = {}


def model_for(model_type: str, params_b: str, label: str = "") -> tuple:
    """(perf_model.Model or None, params as a string) of a hybrid run: by its params column, else its size label."""
    params = str(params_b or "").strip()
    if not params:
        words = (label or "").split()
        params = LABELS.get((model_type, words[1] if len(words) > 1 else ""), "")
    key = (model_type, params)
    if key not in _CACHE:
        cfg = CONFIGS.get(key)
        m = None
        if isinstance(cfg, str):
            m = pm.MODELS[cfg]
        elif cfg is not None:
            m = pm.model_from_hf_config(dict(cfg, max_position_embeddings=8192), name=f"{model_type} {params}B")
        if m is not None and abs(m.total_params() / 1e9 - float(params)) > 0.01 * float(params):
            m = None  # not the model the run used
        _CACHE[key] = m
    return _CACHE[key], params


def family(model) -> str:
    """The block family a model's speed turns on: its recurrent mixer's kind, else "attention"."""
    for b in model.blocks:
        m = b.mixer
        if isinstance(m, blocks.Recurrent):
            return _KIND_FAMILY[m.kind]
        if isinstance(m, blocks.ShortConv):
            return "short conv"
    return "attention"


def is_hybrid(model) -> bool:
    return family(model) != "attention"


def scale_weights(work: tuple, scale: float) -> tuple:
    """A sample's work with its weights' bytes scaled (the file's size over our plan's): decode ((side, Work), ...)
    or prefill ((side, Work, u, k, scale), ...)."""
    from dataclasses import replace

    return tuple((item[0], replace(item[1], weight_bytes=item[1].weight_bytes * scale), *item[2:]) for item in work)
