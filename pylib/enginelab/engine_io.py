"""engine_io: what crosses the boundary with the real engines.

* llama.cpp's command-line defaults that the model depends on (common/arg.cpp, common/common.h);
* a Hugging Face config.json, or a GGUF file's header, read into the fields of a perf_model.Model
  (perf_model.model_from_hf_config / model_from_gguf build the Model from them);
* the llama-server command line that asks for a placement, and the GGUF file name it loads.

The vLLM and SGLang command lines live with their memory plans in enginelab.serving_plan.
This module sits below perf_model: it imports only enginelab.ggml, and enginelab.gguf_header when a
header is read (so a page that never reads one never loads the reader).
"""

from __future__ import annotations

import re

from .ggml import Tensor, quant_file_tag


def _check(cond: bool, arg: str, msg: str) -> None:
    if not cond:
        raise ValueError(f"{arg}: {msg}")


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

_HF_TYPES = ("llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "mixtral", "gemma2", "phi3", "gpt_oss")


def _cfg_int(cfg: dict, key: str, default=None, minimum: int = 1) -> int:
    v = cfg.get(key, default)
    _check(v is not None, key, "missing from config.json")
    _check(
        isinstance(v, int) and not isinstance(v, bool) and v >= minimum,
        key,
        f"must be an integer >= {minimum}, got {v!r}",
    )
    return v


def hf_config_fields(config: dict, name=None) -> dict:
    """perf_model.Model's fields from a Hugging Face config.json (as a dict).

    Supports model_type llama, mistral, qwen2, qwen3, qwen3_moe, mixtral, gemma2,
    phi3 and gpt_oss.  A missing or invalid field raises ValueError naming it."""
    _check(isinstance(config, dict), "config", "must be a JSON object (dict)")
    cfg = (
        dict(config.get("text_config") or {}, **{k: v for k, v in config.items() if k != "text_config"})
        if isinstance(config.get("text_config"), dict)
        else config
    )
    mt = cfg.get("model_type")
    _check(
        isinstance(mt, str) and mt in _HF_TYPES, "model_type", f"unsupported {mt!r}; allowed: {', '.join(_HF_TYPES)}"
    )
    layers = _cfg_int(cfg, "num_hidden_layers")
    hidden = _cfg_int(cfg, "hidden_size")
    heads = _cfg_int(cfg, "num_attention_heads")
    kv = _cfg_int(cfg, "num_key_value_heads", heads)
    _check(heads % kv == 0, "num_key_value_heads", f"must divide num_attention_heads ({heads}), got {kv}")
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
    if moe:
        _check(
            moe["num_experts_per_tok"] <= moe["num_local_experts"],
            "num_experts_per_tok",
            "must not exceed the number of experts",
        )
    tie_default = mt in ("gemma2",)
    tie = cfg.get("tie_word_embeddings", tie_default)
    _check(isinstance(tie, bool), "tie_word_embeddings", f"must be true or false, got {tie!r}")
    maxpos = _cfg_int(cfg, "max_position_embeddings", 4096)
    sw, pattern = 0, ()
    if mt in ("gemma2", "gpt_oss"):
        sw = _cfg_int(cfg, "sliding_window", 4096 if mt == "gemma2" else 128)
        lt = cfg.get("layer_types")
        if isinstance(lt, list) and len(lt) == layers:
            pattern = tuple(x == "sliding_attention" for x in lt)
        else:
            pattern = SWA_ALTERNATE
    rs = cfg.get("rope_scaling") or {}
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
    label = name or cfg.get("_name_or_path") or f"{mt} {layers}L/{hidden}"
    return dict(
        name=str(label),
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
        attention_bias=(mt == "qwen2" or mt == "gpt_oss" or bool(cfg.get("attention_bias", False))),
        qk_norm=mt in ("qwen3", "qwen3_moe"),
        rope_freqs=rope_freqs,
        tokenizer=tok,
        source="config.json",
        key=str(label),
        **moe,
    )


# ---------------------------------------------------------------------------
# 3. A GGUF header
# ---------------------------------------------------------------------------

_GGUF_CLASSES = [  # (substring of the GGUF name, tensor class); first match wins
    ("token_embd", "token_embd"),
    ("output_norm", "norm"),
    ("output.weight", "output"),
    ("_exps", None),
    ("attn_qkv", "attn_qkv"),
    ("attn_q.", "attn_q"),
    ("attn_k.", "attn_k"),
    ("attn_v.", "attn_v"),
    ("attn_output.", "attn_output"),
    ("ffn_gate_inp", "ffn_gate_inp"),
    ("ffn_gate", "ffn_gate"),
    ("ffn_up", "ffn_up"),
    ("ffn_down", "ffn_down"),
]


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


def gguf_fields(source, name=None) -> dict:
    """perf_model.Model's fields from a GGUF file's header (bytes, a file object, or a parsed GGUFHeader).

    Only the header is read.  The Model's tensors are the file's own, with their
    real types, so quantize_plan(model, None) and place(model, machine, None, ...)
    use the file's exact sizes."""
    from . import gguf_header as gh  # below us; loaded only when a header is read

    header = source if isinstance(source, gh.GGUFHeader) else gh.read_gguf(source)
    hp = header.hparams()
    arch = header.architecture or "?"
    mt = hp.get("model_type", arch)
    need = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")
    for k in need:
        v = hp.get(k)
        _check(isinstance(v, int) and v > 0, k, f"missing or invalid in the GGUF header ({arch}.*): {v!r}")
    kv = hp.get("num_key_value_heads", hp["num_attention_heads"])
    if isinstance(kv, list):  # per-layer head counts: use the largest for the KV estimate
        kv = max(int(x) for x in kv) or hp["num_attention_heads"]
    ff = hp.get("intermediate_size", 0)
    if isinstance(ff, list):
        ff = max(int(x) for x in ff)
    n = hp["num_hidden_layers"]
    ts = []
    for t in header.tensors:
        il = -1
        if t.name.startswith("blk."):
            try:
                il = int(t.name.split(".")[1])
            except ValueError:
                il = -1
        _check(il < n, "tensors", f"{t.name} names a block beyond block_count={n}")
        ts.append(Tensor(t.name, tuple(t.shape), _gguf_class(t.name, len(t.shape)), il, t.type_name))
    sw = hp.get("sliding_window") or 0
    pattern = SWA_ALTERNATE if sw and mt in ("gemma2", "gpt_oss", "gemma3") else ()
    label = name or header.metadata.get("general.name") or f"{arch} GGUF"
    return dict(
        name=str(label),
        model_type=mt,
        num_hidden_layers=n,
        hidden_size=hp["hidden_size"],
        intermediate_size=int(ff or hp.get("moe_intermediate_size") or 1),
        num_attention_heads=hp["num_attention_heads"],
        num_key_value_heads=int(kv),
        vocab_size=hp["vocab_size"],
        head_dim=int(hp.get("head_dim") or 0),
        tie_word_embeddings=bool(hp.get("tie_word_embeddings", False)),
        max_position_embeddings=int(hp.get("max_position_embeddings") or 4096),
        num_local_experts=int(hp.get("num_local_experts") or 0),
        num_experts_per_tok=int(hp.get("num_experts_per_tok") or 0),
        moe_intermediate_size=int(hp.get("moe_intermediate_size") or 0),
        sliding_window=int(sw) if pattern else 0,
        sliding_window_pattern=pattern,
        source="GGUF header",
        key=str(label),
        gguf_tensors=tuple(ts),
    )


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


def llama_server_command(p, n_parallel=None, flash_attn: str = "on") -> str:
    """The llama-server invocation that asks for placement p, in the flags of LLAMA_CPP_FLAGS.

    -c is always written (so --fit never shortens the context). -ngl is written only when the placement's was
    set (p.auto is False): with auto it is left to --fit, which picks the same number place() did."""
    parts = ["llama-server", "-m", gguf_filename(p.model, p.quant), "-c", str(p.n_ctx)]
    if p.machine.gpu is not None and not p.auto:
        parts += ["-ngl", str(p.n_gpu_layers)]
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
    return " ".join(parts)
