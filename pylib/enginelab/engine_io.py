"""engine_io: what crosses the boundary with the real engines.

* llama.cpp's command-line defaults that the model depends on (common/arg.cpp, common/common.h);
* a Hugging Face config.json, or a GGUF file's header, read into the fields of a perf_model.Model
  (perf_model.model_from_hf_config / model_from_gguf build the Model from them);
* the llama-server command line that asks for a placement, and the GGUF file name it loads.

The vLLM and SGLang command lines live with their memory plans in enginelab.serving_plan.
A config.json of any other decoder, and every GGUF header, is also read as typed blocks (enginelab.arch_config,
enginelab.arch_gguf), which the Model carries (carried_blocks) and which decide its caches, state and, for a
config, its tensors. This module sits below perf_model: it imports enginelab.ggml, and enginelab.gguf_header,
arch_config and arch_gguf when a file is read (so a page that never reads one never loads them).
"""

from __future__ import annotations

import re

from .checks import brief, check, is_int
from .ggml import Tensor, quant_file_tag

_check = check


# ---------------------------------------------------------------------------
# 1. llama.cpp defaults
# ---------------------------------------------------------------------------
FIT_TARGET_MIB = 1024  # --fit-target default: MiB left free per device
FIT_CTX_DEFAULT = 4096  # --fit-ctx default: the smallest context --fit shrinks -c to
N_UBATCH_DEFAULT = 512  # -ub default (physical micro-batch)
N_BATCH_DEFAULT = 2048  # -b default (logical batch)
OP_OFFLOAD_MIN_BATCH = 32  # ggml-cuda offloads CPU-weight matmuls at >= 32 tokens

SWA_ALTERNATE = (True, False)  # sliding window on even layers, global on odd (Gemma 2, gpt-oss)


# ---------------------------------------------------------------------------
# 2. A Hugging Face config.json
# ---------------------------------------------------------------------------
# Only types and the shape of the file are checked here; perf_model.Model checks every value against its
# bounds when it is built (model_from_hf_config), so a config and a GGUF header meet the same rules.

_HF_TYPES = (
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "qwen3_moe",
    "mixtral",
    "gemma2",
    "phi3",
    "gpt_oss",
    # the 2025 architectures (perf_model section 2b)
    "gemma3",
    "gemma3_text",
    "llama4",
    "llama4_text",
    "deepseek_v2",
    "deepseek_v3",
    "kimi_k2",
    "qwen3_next",
    "glm4_moe",
)
# a checkpoint's model_type -> the Model's (text_config names and Kimi K2's DeepSeek V3 architecture)
_HF_TYPE_ALIASES = {"gemma3_text": "gemma3", "llama4_text": "llama4", "kimi_k2": "deepseek_v3"}
# transformers' Gemma3TextConfig defaults, for the fields a Gemma 3 config.json leaves out (the 4B-27B
# checkpoints' text_config omits head_dim, vocab_size and others)
_GEMMA3_DEFAULTS = {
    "head_dim": 256,
    "vocab_size": 262208,
    "max_position_embeddings": 131072,
    "sliding_window": 4096,
    "sliding_window_pattern": 6,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "tie_word_embeddings": True,
}
# encoders llama.cpp loads for embeddings only (LLM_ARCH_BERT and relatives): nothing to decode
_ENCODER_TYPES = ("bert", "roberta", "xlm-roberta", "nomic_bert", "modernbert", "distilbert", "t5", "t5encoder")
MAX_NAME_CHARS = 200  # a model's label (config _name_or_path, GGUF general.name) is cut to this
_BIG = (1 << 63) - 1  # any larger integer is nonsense for a count; Model's bounds are far tighter


def _cfg_int(cfg: dict, key: str, default=None, minimum: int = 1) -> int:
    v = cfg.get(key)
    if v is None:  # absent, or null in the file: the default
        v = default
    _check(v is not None, key, "missing from config.json")
    _check(
        is_int(v) and minimum <= v <= _BIG,
        key,
        f"must be an integer >= {minimum}, got {brief(v)}",
    )
    return int(v)


def _cfg_bool(cfg: dict, key: str, default: bool) -> bool:
    v = cfg.get(key)
    if v is None:
        return default
    _check(isinstance(v, bool), key, f"must be true or false, got {brief(v)}")
    return v


def _label(value, fallback: str) -> str:
    text = value if isinstance(value, str) and value.strip() else fallback
    return text if len(text) <= MAX_NAME_CHARS else text[: MAX_NAME_CHARS - 1] + "…"


def hf_config_fields(config: dict, name=None) -> dict:
    """perf_model.Model's fields from a Hugging Face config.json (as a dict).

    Supports model_type llama, mistral, qwen2, qwen3, qwen3_moe, mixtral, gemma2, phi3, gpt_oss, and the 2025
    architectures gemma3, llama4, deepseek_v2, deepseek_v3, kimi_k2, qwen3_next and glm4_moe (multimodal
    configs through their text_config).  A missing or invalid field raises ValueError naming it."""
    _check(isinstance(config, dict), "config", f"must be a JSON object (dict), got {brief(config)}")
    _check(name is None or isinstance(name, str), "name", f"must be a string or None, got {brief(name)}")
    tc = config.get("text_config")
    # a multimodal config keeps the language model's fields in text_config; top-level keys win
    cfg = {**tc, **{k: v for k, v in config.items() if k != "text_config"}} if isinstance(tc, dict) else config
    mt = cfg.get("model_type")
    if isinstance(tc, dict) and tc.get("model_type") in _HF_TYPES and mt not in _HF_TYPES:
        mt = tc["model_type"]  # a wrapper's own type (e.g. a multimodal class) with a known text model inside
    if not (isinstance(mt, str) and mt in _HF_TYPES):
        # every other decoder: read as typed blocks (enginelab.arch_config), generically if it has no reader
        _check(
            isinstance(mt, str) and 0 < len(mt) <= 64,
            "model_type",
            f"must name the architecture (a string of 1 to 64 characters), got {brief(mt)}",
        )
        _check(
            mt not in _ENCODER_TYPES,
            "model_type",
            f"{brief(mt)} is an encoder (embeddings, no text generation): it keeps no KV cache to plan for",
        )
        return block_model_fields(config, name)
    mt = _HF_TYPE_ALIASES.get(mt, mt)
    if mt == "gemma3":
        cfg = {**_GEMMA3_DEFAULTS, **{k: v for k, v in cfg.items() if v is not None}}
    if mt in _NEW_TYPES:
        return _hf_fields_2025(cfg, mt, name)
    layers = _cfg_int(cfg, "num_hidden_layers")
    hidden = _cfg_int(cfg, "hidden_size")
    heads = _cfg_int(cfg, "num_attention_heads")
    kv = _cfg_int(cfg, "num_key_value_heads", heads)
    vocab = _cfg_int(cfg, "vocab_size")
    head_dim = cfg.get("head_dim")
    if head_dim is None:
        _check(hidden % heads == 0, "head_dim", "missing, and hidden_size is not a multiple of num_attention_heads")
        head_dim = hidden // heads
    head_dim = _cfg_int({"head_dim": head_dim}, "head_dim")
    moe = {}
    if mt == "mixtral" or mt == "gpt_oss":
        moe["num_local_experts"] = _cfg_int(cfg, "num_local_experts")
        moe["num_experts_per_tok"] = _cfg_int(cfg, "num_experts_per_tok", cfg.get("experts_per_token"))
    if mt == "qwen3_moe":
        moe["num_local_experts"] = _cfg_int(cfg, "num_experts")
        moe["num_experts_per_tok"] = _cfg_int(cfg, "num_experts_per_tok")
        moe["moe_intermediate_size"] = _cfg_int(cfg, "moe_intermediate_size")
    inter = _cfg_int(cfg, "intermediate_size", moe.get("moe_intermediate_size"))
    tie = _cfg_bool(cfg, "tie_word_embeddings", mt in ("gemma2",))
    maxpos = _cfg_int(cfg, "max_position_embeddings", 4096)
    sw, pattern = 0, ()
    if mt in ("gemma2", "gpt_oss"):
        # a window wider than the context never slides: the same as min(window, context)
        sw = min(_cfg_int(cfg, "sliding_window", 4096 if mt == "gemma2" else 128), maxpos)
        lt = cfg.get("layer_types")
        if isinstance(lt, list) and len(lt) == layers:
            pattern = tuple(x == "sliding_attention" for x in lt)
        else:
            pattern = SWA_ALTERNATE[:layers]
    rs = cfg.get("rope_scaling")
    rope_freqs = isinstance(rs, dict) and (rs.get("rope_type") or rs.get("type")) == "llama3"
    if mt in ("qwen2", "qwen3", "qwen3_moe"):
        tok = "qwen2"
    elif mt == "gpt_oss":
        tok = "o200k"
    elif mt == "gemma2":
        tok = "gemma"
    elif vocab >= 100000:
        tok = "llama3"
    else:
        tok = "spm"
    label = _label(name if name is not None else cfg.get("_name_or_path"), f"{mt} {layers}L/{hidden}")
    return dict(
        name=label,
        model_type=mt,
        num_hidden_layers=layers,
        hidden_size=hidden,
        intermediate_size=inter,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        vocab_size=vocab,
        head_dim=head_dim,
        tie_word_embeddings=tie,
        max_position_embeddings=maxpos,
        sliding_window=sw,
        sliding_window_pattern=pattern,
        attention_bias=(mt == "qwen2" or mt == "gpt_oss" or _cfg_bool(cfg, "attention_bias", False)),
        qk_norm=mt in ("qwen3", "qwen3_moe"),
        rope_freqs=rope_freqs,
        tokenizer=tok,
        source="config.json",
        key=label,
        **moe,
    )


_NEW_TYPES = ("gemma3", "llama4", "deepseek_v2", "deepseek_v3", "qwen3_next", "glm4_moe")


def _layer_pattern(cfg: dict, layers: int, default: tuple) -> tuple:
    """Per-layer True where a layer uses the window: config.json's layer_types when it lists every layer,
    else an integer sliding_window_pattern n (n - 1 windowed layers, then a global one), else `default`."""
    lt = cfg.get("layer_types")
    if isinstance(lt, list) and len(lt) == layers:
        return tuple(x in ("sliding_attention", "chunked_attention") for x in lt)
    n = cfg.get("sliding_window_pattern")
    if is_int(n) and 1 <= n <= layers:
        return tuple(i % n < n - 1 for i in range(n))
    return default[:layers]


def _hf_fields_2025(cfg: dict, mt: str, name) -> dict:
    """Model fields for the 2025 architectures (perf_model section 2b), from config.json names."""
    layers = _cfg_int(cfg, "num_hidden_layers")
    hidden = _cfg_int(cfg, "hidden_size")
    heads = _cfg_int(cfg, "num_attention_heads")
    kv = _cfg_int(cfg, "num_key_value_heads", heads)
    vocab = _cfg_int(cfg, "vocab_size")
    maxpos = _cfg_int(cfg, "max_position_embeddings", 4096)
    f = dict(
        model_type=mt,
        num_hidden_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        vocab_size=vocab,
        max_position_embeddings=maxpos,
        tie_word_embeddings=_cfg_bool(cfg, "tie_word_embeddings", False),
        attention_bias=_cfg_bool(cfg, "attention_bias", False),
        tokenizer="llama3",
    )
    head_dim = cfg.get("head_dim")
    if head_dim is None:
        _check(hidden % heads == 0, "head_dim", "missing, and hidden_size is not a multiple of num_attention_heads")
        head_dim = hidden // heads
    f["head_dim"] = _cfg_int({"head_dim": head_dim}, "head_dim")
    rs = cfg.get("rope_scaling")
    f["rope_freqs"] = isinstance(rs, dict) and (rs.get("rope_type") or rs.get("type")) == "llama3"
    if mt == "gemma3":
        # Gemma3TextConfig: 5 sliding-window layers per global one; q/k norms; tied embeddings
        f.update(intermediate_size=_cfg_int(cfg, "intermediate_size"), qk_norm=True, tokenizer="gemma")
        f["tie_word_embeddings"] = _cfg_bool(cfg, "tie_word_embeddings", True)
        f["sliding_window"] = min(_cfg_int(cfg, "sliding_window", 4096), maxpos)
        f["sliding_window_pattern"] = _layer_pattern(cfg, layers, (True,) * 5 + (False,))
    elif mt == "llama4":
        # config.json's intermediate_size is each expert's; intermediate_size_mlp the dense blocks' (Maverick)
        expert_ff = _cfg_int(cfg, "intermediate_size")
        f.update(
            intermediate_size=_cfg_int(cfg, "intermediate_size_mlp", expert_ff),
            num_local_experts=_cfg_int(cfg, "num_local_experts"),
            num_experts_per_tok=_cfg_int(cfg, "num_experts_per_tok"),
            moe_intermediate_size=expert_ff,
            shared_expert_intermediate_size=expert_ff,  # Llama4TextMoe: one shared expert as wide as the others
            interleave_moe_layer_step=_cfg_int(cfg, "interleave_moe_layer_step", 1),
        )
        chunk = cfg.get("attention_chunk_size")
        if chunk is not None:  # llama.cpp: n_swa 8192, 3 chunked layers then a global one
            f["sliding_window"] = min(_cfg_int(cfg, "attention_chunk_size"), maxpos)
            f["sliding_window_pattern"] = _layer_pattern(cfg, layers, (True,) * 3 + (False,))
            f["chunked_attention"] = True
    elif mt in ("deepseek_v2", "deepseek_v3"):
        n_exp = _cfg_int(cfg, "n_routed_experts")
        moe_ff = _cfg_int(cfg, "moe_intermediate_size")
        nope, rope = _cfg_int(cfg, "qk_nope_head_dim"), _cfg_int(cfg, "qk_rope_head_dim")
        f.update(
            intermediate_size=_cfg_int(cfg, "intermediate_size"),
            head_dim=nope + rope,  # each query head; the cache holds the latent instead (kv_lora_rank)
            num_local_experts=n_exp,
            num_experts_per_tok=_cfg_int(cfg, "num_experts_per_tok"),
            moe_intermediate_size=moe_ff,
            shared_expert_intermediate_size=moe_ff * _cfg_int(cfg, "n_shared_experts", 0, minimum=0),
            first_k_dense_replace=_cfg_int(cfg, "first_k_dense_replace", 0, minimum=0),
            kv_lora_rank=_cfg_int(cfg, "kv_lora_rank"),
            q_lora_rank=_cfg_int(cfg, "q_lora_rank", 0, minimum=0),
            qk_rope_head_dim=rope,
            qk_nope_head_dim=nope,
            v_head_dim=_cfg_int(cfg, "v_head_dim"),
        )
        f["num_key_value_heads"] = heads  # MLA: every head reads the one latent; the HF value has no use here
    elif mt == "qwen3_next":
        f.update(
            intermediate_size=_cfg_int(cfg, "intermediate_size"),
            num_local_experts=_cfg_int(cfg, "num_experts"),
            num_experts_per_tok=_cfg_int(cfg, "num_experts_per_tok"),
            moe_intermediate_size=_cfg_int(cfg, "moe_intermediate_size"),
            shared_expert_intermediate_size=_cfg_int(cfg, "shared_expert_intermediate_size", 0, minimum=0),
            qk_norm=True,
            full_attention_interval=_cfg_int(cfg, "full_attention_interval", 4),
            linear_conv_kernel_dim=_cfg_int(cfg, "linear_conv_kernel_dim"),
            linear_key_head_dim=_cfg_int(cfg, "linear_key_head_dim"),
            linear_value_head_dim=_cfg_int(cfg, "linear_value_head_dim"),
            linear_num_key_heads=_cfg_int(cfg, "linear_num_key_heads"),
            linear_num_value_heads=_cfg_int(cfg, "linear_num_value_heads"),
            tokenizer="qwen2",
        )
    elif mt == "glm4_moe":
        moe_ff = _cfg_int(cfg, "moe_intermediate_size")
        f.update(
            intermediate_size=_cfg_int(cfg, "intermediate_size"),
            num_local_experts=_cfg_int(cfg, "n_routed_experts"),
            num_experts_per_tok=_cfg_int(cfg, "num_experts_per_tok"),
            moe_intermediate_size=moe_ff,
            shared_expert_intermediate_size=moe_ff * _cfg_int(cfg, "n_shared_experts", 0, minimum=0),
            first_k_dense_replace=_cfg_int(cfg, "first_k_dense_replace", 0, minimum=0),
            qk_norm=_cfg_bool(cfg, "use_qk_norm", False),
            attention_bias=_cfg_bool(cfg, "attention_bias", True),
        )
    label = _label(name if name is not None else cfg.get("_name_or_path"), f"{mt} {layers}L/{hidden}")
    return dict(f, name=label, source="config.json", key=label)


def _first(blocks, kind):
    return next((b for b in blocks if isinstance(b, kind)), None)


def model_fields_from_blocks(bm, **extra) -> dict:
    """perf_model.Model's fields summing up a blocks.BlockModel (carried as carried_blocks, which decides the
    caches, state and tensors; the summary fields are the first block of each kind's numbers)."""
    from . import blocks as bl

    mixers = [b.mixer for b in bm.blocks]
    ffns = [b.ffn for b in bm.blocks]
    att = next((m for m in mixers if isinstance(m, bl.Attention) and m.kv_shared_from < 0), None)
    att = att or _first(mixers, bl.Attention)
    f = dict(
        num_hidden_layers=bm.n_layer,
        hidden_size=bm.globals.n_embd,
        vocab_size=bm.globals.vocab,
        tie_word_embeddings=bm.globals.tied_output,
        carried_blocks=bm,
    )
    if att is not None:
        f.update(num_attention_heads=att.n_head, num_key_value_heads=att.n_head_kv, head_dim=att.head_dim_k)
        if att.kv_lora_rank:
            f.update(
                num_key_value_heads=att.n_head,
                kv_lora_rank=att.kv_lora_rank,
                q_lora_rank=att.q_lora_rank,
                qk_rope_head_dim=att.rope_dim,
                qk_nope_head_dim=att.head_dim_k - att.rope_dim,
                v_head_dim=att.head_dim_v,
            )
    else:  # no attention at all (a pure SSM): one head as wide as the model
        f.update(num_attention_heads=1, num_key_value_heads=1, head_dim=min(bm.globals.n_embd, 4096))
    windows = [m.window if isinstance(m, bl.Attention) else 0 for m in mixers]
    if any(windows):
        f.update(sliding_window=max(windows), sliding_window_pattern=tuple(w > 0 for w in windows))
        f["chunked_attention"] = any(isinstance(m, bl.Attention) and m.chunked for m in mixers)
    dense = _first(ffns, bl.DenseFFN)
    moe = _first(ffns, bl.MoEFFN)
    f["intermediate_size"] = dense.width if dense else (moe.dense_width or moe.expert_width) if moe else 1
    if moe is not None and moe.n_expert > 1:
        f.update(
            num_local_experts=moe.n_expert,
            num_experts_per_tok=moe.n_expert_used,
            moe_intermediate_size=moe.expert_width,
            shared_expert_intermediate_size=moe.shared_width,
        )
    f.update(extra)
    return f


def block_model_fields(config: dict, name=None) -> dict:
    """perf_model.Model's fields for a config.json read as typed blocks (enginelab.arch_config): any decoder
    llama.cpp runs. A generically read model says so in its source ("architecture not verified: ...")."""
    from . import arch_config

    bm = arch_config.read_config(config)
    tc = config.get("text_config")
    cfg = {**tc, **{k: v for k, v in config.items() if k != "text_config"}} if isinstance(tc, dict) else config
    maxpos = cfg.get("max_position_embeddings")
    if not (is_int(maxpos) and 1 <= maxpos <= 1 << 25):
        maxpos = 4096
    if bm.globals.vocab >= 200_000:
        tok = "gemma" if bm.arch.startswith("gemma") else "o200k"
    elif bm.arch.startswith("qwen"):
        tok = "qwen2"
    else:
        tok = "llama3" if bm.globals.vocab >= 100_000 else "spm"
    label = _label(
        name if name is not None else cfg.get("_name_or_path"), f"{bm.arch} {bm.n_layer}L/{bm.globals.n_embd}"
    )
    source = "config.json" + (f" ({'; '.join(bm.warnings)})" if bm.warnings else "")
    mt = bm.arch  # the reader's: the text model's type in a multimodal config
    return model_fields_from_blocks(
        bm,
        name=label,
        key=label,
        model_type=mt[:64],
        max_position_embeddings=maxpos,
        tokenizer=tok,
        source=source,
    )


def model_from_hf_config(config: dict, name, make):
    """make(**hf_config_fields(config, name)), with the Model's errors naming config.json's own keys."""
    fields = hf_config_fields(config, name)
    try:
        return make(**fields)
    except ValueError as e:
        msg = str(e)
        if fields["model_type"] == "qwen3_moe" and msg.startswith("num_local_experts:"):
            msg = "num_experts" + msg[len("num_local_experts") :]  # Qwen's name for it
        raise ValueError(msg) from None


# ---------------------------------------------------------------------------
# 3. A GGUF header
# ---------------------------------------------------------------------------

_GGUF_CLASSES = [  # (substring of the GGUF name, tensor class); first match wins
    ("token_embd", "token_embd"),
    ("output_norm", "norm"),
    ("attn_output.", "attn_output"),  # before output.weight, which blk.N.attn_output.weight also contains
    ("output.weight", "output"),
    ("_exps", None),
    ("attn_qkv", "attn_qkv"),
    ("attn_q.", "attn_q"),
    ("attn_k.", "attn_k"),
    ("attn_v.", "attn_v"),
    ("ffn_gate_inp", "ffn_gate_inp"),
    ("ffn_gate", "ffn_gate"),
    ("ffn_up", "ffn_up"),
    ("ffn_down", "ffn_down"),
]

# Model field -> the GGUF key it comes from (after "{arch}."), for error messages (gguf_header._HPARAM_KEYS)
GGUF_KEYS = {
    "num_hidden_layers": "block_count",
    "hidden_size": "embedding_length",
    "intermediate_size": "feed_forward_length",
    "num_attention_heads": "attention.head_count",
    "num_key_value_heads": "attention.head_count_kv",
    "head_dim": "attention.key_length",
    "max_position_embeddings": "context_length",
    "num_local_experts": "expert_count",
    "num_experts_per_tok": "expert_used_count",
    "moe_intermediate_size": "expert_feed_forward_length",
    "sliding_window": "attention.sliding_window",
    "vocab_size": "vocab_size",
    "kv_lora_rank": "attention.kv_lora_rank",
    "q_lora_rank": "attention.q_lora_rank",
    "qk_rope_head_dim": "rope.dimension_count",
    "qk_nope_head_dim": "attention.key_length_mla",
    "v_head_dim": "attention.value_length_mla",
    "first_k_dense_replace": "leading_dense_block_count",
    "shared_expert_intermediate_size": "expert_shared_feed_forward_length",
    "interleave_moe_layer_step": "interleave_moe_layer_step",
    "full_attention_interval": "full_attention_interval",
    "linear_conv_kernel_dim": "ssm.conv_kernel",
    "linear_key_head_dim": "ssm.state_size",
    "linear_num_key_heads": "ssm.group_count",
    "linear_num_value_heads": "ssm.time_step_rank",
    "linear_value_head_dim": "ssm.inner_size",
    "num_nextn_predict_layers": "nextn_predict_layers",
    "sliding_window_pattern": "attention.sliding_window_pattern",
    # the header's own names for them (GGUFHeader.hparams), as read below
    "rope_dimension_count": "rope.dimension_count",
    "key_length_mla": "attention.key_length_mla",
    "value_length_mla": "attention.value_length_mla",
    "ssm_conv_kernel": "ssm.conv_kernel",
    "ssm_inner_size": "ssm.inner_size",
    "ssm_state_size": "ssm.state_size",
    "ssm_time_step_rank": "ssm.time_step_rank",
    "ssm_group_count": "ssm.group_count",
}
# llama.cpp reads these three per layer when the file holds an array (llama-model.cpp get_key_or_arr): head
# counts vary in OpenELM, and are 0 in the recurrent layers of hybrids (Jamba, LFM2); FFN widths vary too.
# We keep the largest, an upper bound for the KV cache and the weights' shapes. Any other key must be a number.
_GGUF_PER_LAYER = ("num_attention_heads", "num_key_value_heads", "intermediate_size")
# llama.cpp's sliding-window layouts (llama-model.cpp set_swa_pattern): True where a layer uses the window
_GGUF_SWA_PATTERNS = {
    "gemma2": SWA_ALTERNATE,
    "gpt_oss": SWA_ALTERNATE,
    "gemma3": (True,) * 5 + (False,),
    "llama4": (True,) * 3 + (False,),  # chunked attention on 3 blocks of 4
}
LLAMA4_CHUNK_DEFAULT = 8192  # llama.cpp: n_swa = 8192 for llama4 unless the file sets sliding_window to 0


def _gguf_class(name: str, ndim: int) -> str:
    if name.endswith(".bias"):
        return "bias"
    if ndim < 2 and "token_embd" not in name:
        return "norm"
    for sub, cls in _GGUF_CLASSES:
        if sub in name:
            if cls is None:  # expert tensors: ffn_gate_exps, ffn_up_exps, ffn_down_exps
                for kind in ("gate", "up", "down"):
                    if f"ffn_{kind}_exps" in name:
                        return f"ffn_{kind}_exps"
                return "ffn_exps"
            return cls
    return "other"


def _read_header(source):
    from . import gguf_header as gh  # below us; loaded only when a header is read

    if isinstance(source, gh.GGUFHeader):
        return source
    try:
        return gh.read_gguf(source)
    except ValueError as e:  # the reader's errors name the header field and its byte
        raise ValueError(f"source: {e}") from None
    except TypeError as e:  # not bytes, a file or a path
        raise ValueError(f"source: {e}") from None
    except OSError as e:  # a path that cannot be read
        raise ValueError(f"source: cannot read the file: {e}") from None


def gguf_fields(source, name=None) -> dict:
    """perf_model.Model's fields from a GGUF file's header (see _gguf_fields)."""
    return _gguf_fields(source, name)[0]


def _gguf_fields(source, name=None) -> tuple:
    """(perf_model.Model's fields, the architecture) from a GGUF file's header (bytes, a file object, or a parsed GGUFHeader).

    Only the header is read.  The Model's tensors are the file's own, with their
    real types, so quantize_plan(model, None) and place(model, machine, None, ...)
    use the file's exact sizes.  A value of the wrong type (a float, a string, an array where llama.cpp
    reads one number) raises ValueError naming the field and its GGUF key."""
    _check(name is None or isinstance(name, str), "name", f"must be a string or None, got {brief(name)}")
    header = _read_header(source)
    hp = header.hparams()
    arch = header.architecture
    _check(
        arch is not None and 0 < len(arch) <= 64,
        "general.architecture",
        f"must name the model's architecture (a string of 1 to 64 characters), got {brief(arch)}",
    )
    mt = hp.get("model_type", arch)

    def label(field: str) -> str:
        return f"{field} ({arch}.{GGUF_KEYS.get(field, field)})"

    def get_int(field: str, default=None, minimum: int = 1, n_layers: int = 0) -> int:
        v = hp.get(field)
        if v is None:
            _check(default is not None, label(field), "missing from the GGUF header")
            return default
        if isinstance(v, list):
            _check(
                field in _GGUF_PER_LAYER,
                label(field),
                f"llama.cpp reads one number here, got an array ({brief(v)})",
            )
            _check(
                len(v) == n_layers,
                label(field),
                f"a per-layer array must have one entry per block (block_count = {n_layers:,}), got {len(v):,}",
            )
            for i, x in enumerate(v):
                _check(is_int(x) and 0 <= x <= _BIG, label(field), f"entry {i} must be an integer >= 0, got {brief(x)}")
            v = max(v)  # the largest layer: an upper bound (see _GGUF_PER_LAYER)
        _check(is_int(v) and minimum <= v <= _BIG, label(field), f"must be an integer >= {minimum}, got {brief(v)}")
        return int(v)

    n = get_int("num_hidden_layers")
    hidden = get_int("hidden_size")
    heads = get_int("num_attention_heads", n_layers=n)
    kv = get_int("num_key_value_heads", heads, n_layers=n)
    vocab = get_int("vocab_size")
    head_dim = get_int("head_dim", 0, minimum=0)
    ff = get_int("intermediate_size", 0, minimum=0, n_layers=n)
    moe_ff = get_int("moe_intermediate_size", 0, minimum=0)
    maxpos = get_int("max_position_embeddings", 0, minimum=0) or 4096
    extra = _gguf_fields_2025(mt, hp, get_int, label, n)
    sw = get_int("sliding_window", LLAMA4_CHUNK_DEFAULT if mt == "llama4" else 0, minimum=0)
    pattern = _gguf_swa_pattern(mt, hp, n, label) if sw else ()
    # GLM-4.5's MTP block(s) sit after the model's own (block_count counts them): llama.cpp does not load
    # them (TENSOR_SKIP) and gives them no cache (n_layer_kv_from_start), so neither do we
    n_skip = get_int("num_nextn_predict_layers", 0, minimum=0) if mt == "glm4_moe" else 0
    _check(n_skip < n, label("num_nextn_predict_layers"), f"must be below block_count ({n:,}), got {n_skip:,}")
    n_file = n
    n -= n_skip

    ts = []
    for t in header.tensors:
        il = -1
        parts = t.name.split(".")
        if parts[0] == "blk" and len(parts) > 1 and parts[1].isascii() and parts[1].isdigit():
            il = int(parts[1])
        _check(il < n_file, "tensors", f"{t.name} names a block beyond block_count={n_file}")
        if il >= n:
            continue  # an MTP block (see n_skip)
        ts.append(Tensor(t.name, tuple(t.shape), _gguf_class(t.name, len(t.shape)), il, t.type_name))
    _check(
        ts,
        "tensors",
        "the GGUF header lists no tensors: a model file holds its weights (is this a vocabulary-only GGUF?)",
    )
    title = header.metadata.get("general.name")
    text = _label(name if name is not None else title, f"{arch} GGUF")
    fields = dict(
        name=text,
        model_type=mt,
        num_hidden_layers=n,
        hidden_size=hidden,
        intermediate_size=ff or moe_ff or 1,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        vocab_size=vocab,
        head_dim=head_dim,
        tie_word_embeddings=bool(hp.get("tie_word_embeddings", False)),
        max_position_embeddings=maxpos,
        num_local_experts=get_int("num_local_experts", 0, minimum=0),
        num_experts_per_tok=get_int("num_experts_per_tok", 0, minimum=0),
        moe_intermediate_size=moe_ff,
        sliding_window=min(sw, maxpos) if pattern else 0,
        sliding_window_pattern=pattern,
        chunked_attention=mt == "llama4" and bool(pattern),
        source="GGUF header",
        key=text,
        gguf_tensors=tuple(ts),
    )
    fields.update(extra)  # (MLA's head_dim is its query head's, key_length_mla)
    # the blocks as the file's tensors make them (enginelab.arch_gguf): they decide each block's cache and state
    from . import arch_gguf

    try:
        bm = arch_gguf.read_gguf_blocks(header)
    except ValueError:
        bm = None  # a layout the block reader does not follow: the fields above stand alone
    if bm is not None and bm.n_layer == n and bm.globals.n_embd == hidden:
        fields["carried_blocks"] = bm
    return fields, arch


def _gguf_swa_pattern(mt: str, hp: dict, n: int, label) -> tuple:
    """Which blocks use the window: the file's attention.sliding_window_pattern (an integer n: n - 1 windowed
    blocks then a global one; or one bool per block), else llama.cpp's set_swa_pattern for the architecture."""
    v = hp.get("sliding_window_pattern")
    if isinstance(v, bool):
        return (v,) * min(n, 1)
    if is_int(v):
        _check(1 <= v <= n, label("sliding_window_pattern"), f"must be from 1 to block_count ({n:,}), got {v:,}")
        return tuple(i % v < v - 1 for i in range(v))
    if isinstance(v, list):
        _check(
            len(v) == n and all(isinstance(x, bool) for x in v),
            label("sliding_window_pattern"),
            f"a per-block array must hold one bool per block ({n:,}), got {brief(v)}",
        )
        return tuple(v)
    return _GGUF_SWA_PATTERNS.get(mt, ())[:n]


def _gguf_fields_2025(mt: str, hp: dict, get_int, label, n: int) -> dict:
    """The fields of the 2025 architectures from their GGUF keys (llama-model.cpp load_hparams)."""
    out: dict = {}
    if mt == "deepseek_v2" and hp.get("kv_lora_rank") is not None and hp.get("key_length_mla") is not None:
        # current converters write MLA as one KV head of kv_lora_rank + rope (key_length 576), with the query
        # head's own width in key_length_mla; llama.cpp then caches only that latent (is_mla). Files from
        # before the split (attn_kv_b, no key_length_mla) are read as plain attention from their head counts.
        rope = get_int("rope_dimension_count")
        k_mla = get_int("key_length_mla")
        _check(k_mla > rope, label("key_length_mla"), f"must exceed rope.dimension_count ({rope:,}), got {k_mla:,}")
        out.update(
            kv_lora_rank=get_int("kv_lora_rank"),
            q_lora_rank=get_int("q_lora_rank", 0, minimum=0),
            qk_rope_head_dim=rope,
            qk_nope_head_dim=k_mla - rope,
            v_head_dim=get_int("value_length_mla"),
            head_dim=k_mla,
        )
    if mt in ("deepseek_v2", "glm4_moe"):
        out["first_k_dense_replace"] = min(get_int("first_k_dense_replace", 0, minimum=0), n)
    if mt == "llama4":
        out["interleave_moe_layer_step"] = min(get_int("interleave_moe_layer_step", 1, minimum=0), n)
    if mt == "qwen3_next":
        interval = get_int("full_attention_interval", 4)
        _check(
            interval <= n, label("full_attention_interval"), f"must be at most block_count ({n:,}), got {interval:,}"
        )
        inner = get_int("ssm_inner_size")
        v_heads = get_int("ssm_time_step_rank")
        _check(
            inner % v_heads == 0,
            label("ssm_inner_size"),
            f"must be a multiple of ssm.time_step_rank ({v_heads:,}), got {inner:,}",
        )
        out.update(
            full_attention_interval=interval,
            linear_conv_kernel_dim=get_int("ssm_conv_kernel"),
            linear_key_head_dim=get_int("ssm_state_size"),
            linear_num_key_heads=get_int("ssm_group_count"),
            linear_num_value_heads=v_heads,
            linear_value_head_dim=inner // v_heads,
        )
    return out


def model_from_gguf(source, name, make):
    """make(**gguf_fields(source, name)), with the Model's errors naming the GGUF key as well."""
    fields, arch = _gguf_fields(source, name)
    try:
        return make(**fields)
    except ValueError as e:
        msg = str(e)
        field = msg.split(":", 1)[0]
        if field in GGUF_KEYS:
            msg = f"{field} ({arch}.{GGUF_KEYS[field]} in the GGUF header){msg[len(field) :]}"
        raise ValueError(msg) from None


# ---------------------------------------------------------------------------
# 4. The llama-server command line
# ---------------------------------------------------------------------------


# The llama.cpp whose flags the command line below assumes. Since December 2025 (ggml-org/llama.cpp PR #16653,
# "automatically set parameters not set by the user in such a way that maximizes GPU utilization"), -ngl
# defaults to every layer and --fit is on: at load, for the parameters the user did not set, it first lowers
# the context and then moves layers to system RAM until each device keeps --fit-target (1024 MiB) free. A
# command that writes -c and leaves -ngl out therefore gets the -ngl that place(n_gpu_layers=None) computes.
LLAMA_CPP_FLAGS = (
    "llama.cpp as of December 2025 or later (--fit on by default, ggml-org/llama.cpp PR #16653; -fa on|off|auto)"
)


def gguf_filename(model, quant) -> str:
    """The file name a GGUF of this model and preset goes by: Model-<tag>.gguf (ggml.quant_file_tag: the Q2_K
    mix is the file called -Q2_K.gguf)."""
    base = re.sub(r"[^A-Za-z0-9.]+", "-", model.name).strip("-")
    return f"{base}-{quant_file_tag(quant)}.gguf"


def split_flags(p) -> list:
    """llama.cpp's multi-GPU flags for placement p: -sm (when not layer), -ts, -mg (with -sm none), and
    --rpc for GPUs reached over the network; [] on a machine with at most one GPU.

    -ts: the reader's split; with -ngl auto and no -ts of the reader's, nothing (--fit splits the layers
    itself, as place() did, and a -ts would stop it); with an explicit -ngl in layer mode, the layers per GPU of
    this placement (it pins the split by free memory, which differs from machine to machine)."""
    gpus = getattr(p.machine, "gpus", ())
    if len(gpus) < 2:
        return []
    out = []
    if p.split_mode != "layer":
        out += ["-sm", p.split_mode]
    ts = () if p.fit_wrote_split else p.tensor_split
    if not ts and not p.auto and p.split_mode == "layer" and p.n_gpu_layers > 0:
        ts = tuple(float(len(u.layers)) for u in p.per_gpu)
    if ts and p.split_mode != "none":
        out += ["-ts", ",".join(f"{v:g}" for v in ts)]
    if p.split_mode == "none" and p.main_gpu:
        out += ["-mg", str(p.main_gpu)]
    if p.machine.link.kind == "rpc":  # every GPU an rpc-server on another host (addresses to fill in)
        out += ["--rpc", ",".join(f"host{i}:50052" for i in range(len(gpus)))]
    return out


def llama_server_command(p, n_parallel=None, flash_attn: str = "on") -> str:
    """The llama-server invocation that asks for placement p, in the flags of LLAMA_CPP_FLAGS.

    -c is always written (so --fit never shortens the context). -ngl is written only when the placement's was
    set (p.auto is False): with auto it is left to --fit, which picks the same number place() did."""
    _check(
        type(p).__name__ == "Placement" and hasattr(p, "layer_device"),
        "p",
        f"must be a perf_model.Placement (from place()), got {brief(p)}",
    )
    _check(
        n_parallel is None or (is_int(n_parallel) and 1 <= n_parallel <= 1 << 16),
        "n_parallel",
        f"must be None or an integer from 1 to 65,536, got {brief(n_parallel)}",
    )
    _check(
        isinstance(flash_attn, str) and flash_attn in ("on", "off", "auto"),
        "flash_attn",
        f"must be 'on', 'off' or 'auto', got {brief(flash_attn)}",
    )
    parts = ["llama-server", "-m", gguf_filename(p.model, p.quant), "-c", str(p.n_ctx)]
    if p.machine.gpu is not None and not p.auto:
        parts += ["-ngl", str(p.n_gpu_layers)]
    parts += split_flags(p)
    if p.kv_type != "f16":
        parts += ["-ctk", p.kv_type, "-ctv", p.kv_type]
    if p.kv_type != "f16" or flash_attn != "auto":
        parts += ["-fa", flash_attn]
    if p.n_cpu_moe:
        parts += ["--n-cpu-moe", str(p.n_cpu_moe)]
    if p.n_ubatch != N_UBATCH_DEFAULT:
        parts += ["-ub", str(p.n_ubatch)]
    if n_parallel:
        parts += ["-np", str(n_parallel)]
    if p.swa_full:
        parts += ["--swa-full"]
    return " ".join(parts)
