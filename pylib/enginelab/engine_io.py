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

_HF_TYPES = ("llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "mixtral", "gemma2", "phi3", "gpt_oss")
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

    Supports model_type llama, mistral, qwen2, qwen3, qwen3_moe, mixtral, gemma2,
    phi3 and gpt_oss.  A missing or invalid field raises ValueError naming it."""
    _check(isinstance(config, dict), "config", f"must be a JSON object (dict), got {brief(config)}")
    _check(name is None or isinstance(name, str), "name", f"must be a string or None, got {brief(name)}")
    tc = config.get("text_config")
    # a multimodal config keeps the language model's fields in text_config; top-level keys win
    cfg = {**tc, **{k: v for k, v in config.items() if k != "text_config"}} if isinstance(tc, dict) else config
    mt = cfg.get("model_type")
    _check(
        isinstance(mt, str) and mt in _HF_TYPES,
        "model_type",
        f"unsupported {brief(mt)}; allowed: {', '.join(_HF_TYPES)}",
    )
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
}
# llama.cpp reads these three per layer when the file holds an array (llama-model.cpp get_key_or_arr): head
# counts vary in OpenELM, and are 0 in the recurrent layers of hybrids (Jamba, LFM2); FFN widths vary too.
# We keep the largest, an upper bound for the KV cache and the weights' shapes. Any other key must be a number.
_GGUF_PER_LAYER = ("num_attention_heads", "num_key_value_heads", "intermediate_size")
# llama.cpp's sliding-window layouts (llama-model.cpp set_swa_pattern): True where a layer uses the window
_GGUF_SWA_PATTERNS = {"gemma2": SWA_ALTERNATE, "gpt_oss": SWA_ALTERNATE, "gemma3": (True,) * 5 + (False,)}


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
    sw = get_int("sliding_window", 0, minimum=0)
    pattern = _GGUF_SWA_PATTERNS.get(mt, ())[:n] if sw else ()

    ts = []
    for t in header.tensors:
        il = -1
        parts = t.name.split(".")
        if parts[0] == "blk" and len(parts) > 1 and parts[1].isascii() and parts[1].isdigit():
            il = int(parts[1])
        _check(il < n, "tensors", f"{t.name} names a block beyond block_count={n}")
        ts.append(Tensor(t.name, tuple(t.shape), _gguf_class(t.name, len(t.shape)), il, t.type_name))
    _check(
        ts,
        "tensors",
        "the GGUF header lists no tensors: a model file holds its weights (is this a vocabulary-only GGUF?)",
    )
    title = header.metadata.get("general.name")
    text = _label(name if name is not None else title, f"{arch} GGUF")
    return dict(
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
        source="GGUF header",
        key=text,
        gguf_tensors=tuple(ts),
    ), arch


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
    return " ".join(parts)
