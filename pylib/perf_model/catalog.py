"""The catalog: the models the course and the app pick from (MODELS), each from its config.json."""

from __future__ import annotations

from enginelab import engine_io as _engine_io
from enginelab.checks import brief
from enginelab.engine_io import SWA_ALTERNATE

from .models import Model
from .units import _check


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
# -- the 2025 architectures (models.py's 2025 architectures): every number is the config.json at the source= link; for the
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


# -- The 2026 architectures: read as typed blocks (enginelab.arch_config) from their config.json's keys ----------
# The numbers are data/architectures/configs/<key>.json's (its SOURCES say where each was read).
def _add_config(key: str, name: str, repo: str, config: dict) -> None:
    fields = _engine_io.block_model_fields(config, name)
    fields.pop("key")
    _add(key, **{**fields, "source": _hf(repo)})


_add_config(
    "qwen3.6-35b-a3b",
    "Qwen3.6 35B-A3B",
    "Qwen/Qwen3.6-35B-A3B",
    {
        "model_type": "qwen3_5_moe",
        "text_config": {
            "model_type": "qwen3_5_moe_text",
            "num_hidden_layers": 40,
            "hidden_size": 2048,
            "num_attention_heads": 16,
            "num_key_value_heads": 2,
            "head_dim": 256,
            "full_attention_interval": 4,
            "linear_conv_kernel_dim": 4,
            "linear_key_head_dim": 128,
            "linear_value_head_dim": 128,
            "linear_num_key_heads": 16,
            "linear_num_value_heads": 32,
            "num_experts": 256,
            "num_experts_per_tok": 8,
            "moe_intermediate_size": 512,
            "shared_expert_intermediate_size": 512,
            "vocab_size": 248320,
            "max_position_embeddings": 262144,
            "tie_word_embeddings": False,
        },
    },
)
_add_config(
    "glm-4.7-flash",
    "GLM-4.7-Flash",
    "zai-org/GLM-4.7-Flash",
    {
        "model_type": "glm4_moe_lite",
        "num_hidden_layers": 47,
        "hidden_size": 2048,
        "intermediate_size": 10240,
        "num_attention_heads": 20,
        "num_key_value_heads": 20,
        "vocab_size": 154880,
        "max_position_embeddings": 202752,
        "q_lora_rank": 768,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 192,
        "qk_rope_head_dim": 64,
        "v_head_dim": 256,
        "n_routed_experts": 64,
        "n_shared_experts": 1,
        "num_experts_per_tok": 4,
        "moe_intermediate_size": 1536,
        "first_k_dense_replace": 1,
    },
)
_add_config(
    "nemotron-3-nano-30b-a3b",
    "Nemotron 3 Nano 30B-A3B",
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    {
        "model_type": "nemotron_h",
        "num_hidden_layers": 52,
        "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
        "hidden_size": 2688,
        "num_attention_heads": 32,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "mamba_num_heads": 64,
        "mamba_head_dim": 64,
        "n_groups": 8,
        "ssm_state_size": 128,
        "conv_kernel": 4,
        "intermediate_size": 1856,
        "n_routed_experts": 128,
        "num_experts_per_tok": 6,
        "moe_intermediate_size": 1856,
        "moe_shared_expert_intermediate_size": 3712,
        "n_shared_experts": 1,
        "vocab_size": 131072,
        "max_position_embeddings": 262144,
    },
)
_add_config(
    "gemma-4-31b",
    "Gemma 4 31B",
    "google/gemma-4-31B-it",
    {
        "model_type": "gemma4",
        "text_config": {
            "model_type": "gemma4_text",
            "num_hidden_layers": 60,
            "hidden_size": 5376,
            "intermediate_size": 21504,
            "num_attention_heads": 32,
            "num_key_value_heads": 16,
            "num_global_key_value_heads": 4,
            "head_dim": 256,
            "global_head_dim": 512,
            "attention_k_eq_v": True,
            "sliding_window": 1024,
            "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 10,
            "vocab_size": 262144,
            "max_position_embeddings": 262144,
            "tie_word_embeddings": True,
        },
    },
)
_add_config(
    "lfm2.5-2.6b",
    "LFM2.5 2.6B",
    "LiquidAI/LFM2.5-2.6B",
    {
        "model_type": "lfm2",
        "num_hidden_layers": 30,
        "hidden_size": 2048,
        "intermediate_size": 10752,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "conv_L_cache": 3,
        "block_auto_adjust_ff_dim": False,
        "layer_types": ["full_attention" if il in (2, 5, 9, 13, 17, 21, 24, 27) else "conv" for il in range(30)],
        "vocab_size": 128000,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": True,
    },
)
_add_config(
    "qwen3.5-27b",
    "Qwen3.5 27B",
    "Qwen/Qwen3.5-27B",
    {
        "model_type": "qwen3_5",
        "text_config": {
            "model_type": "qwen3_5_text",
            "num_hidden_layers": 64,
            "hidden_size": 5120,
            "intermediate_size": 17408,
            "num_attention_heads": 24,
            "num_key_value_heads": 4,
            "head_dim": 256,
            "full_attention_interval": 4,
            "linear_conv_kernel_dim": 4,
            "linear_key_head_dim": 128,
            "linear_value_head_dim": 128,
            "linear_num_key_heads": 16,
            "linear_num_value_heads": 48,
            "vocab_size": 248320,
            "max_position_embeddings": 262144,
            "tie_word_embeddings": False,
        },
    },
)
