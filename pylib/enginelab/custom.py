"""Your own model and machine: a dropped GGUF file, a pasted config.json, a machine described by numbers.

The calculator's "use your own model" panel calls these. Everything is validated here and fails with a
ValueError whose message names the field and what is allowed, so the page can show it and keep its last
good state.

- A GGUF file is read header-only: the browser hands us the first bytes of the file (File.slice), and if
  the header is longer than that slice, `gguf_header.GGUFTruncated` says how many bytes are needed, so the
  caller reads a bigger slice and tries again (`gguf_slice_plan`). The file's real tensor types and sizes
  drive the placement (perf_model.model_from_gguf).
- A config.json goes through perf_model.model_from_hf_config. Its compact JSON can live in the URL, so a
  pasted config is shareable; a dropped file is not (a URL cannot carry a 40 GB file), which the page says.
  Its text is refused by size (CONFIG_MAX_CHARS), nesting depth (JSON_MAX_DEPTH) and number length
  (JSON_MAX_NUMBER_CHARS) before json.loads sees it.
- A custom machine is a perf_model.Machine built from VRAM, bandwidth, TFLOP/s, RAM, RAM bandwidth and
  PCIe figures, each range-checked.
"""

from __future__ import annotations

import dataclasses
import json

import perf_model as pm

from . import arch_config as _arch_config
from .checks import JSON_MAX_DEPTH, JSON_MAX_NUMBER_CHARS, check_json_text  # noqa: F401 (re-exported)

GGUF_FIRST_SLICE = 8 << 20  # bytes read first: enough for nearly every header (vocabularies ~2-8 MB)
GGUF_MAX_HEADER = 256 << 20  # never read more than this, whatever the header claims
CONFIG_MAX_CHARS = 200_000  # a real config.json is 1-5 kB; with layer_types for 1,000 layers about 25 kB


# ---------------------------------------------------------------------------------------------------------
# GGUF
# ---------------------------------------------------------------------------------------------------------
def gguf_slice_plan(data: bytes, file_size: int | None = None) -> tuple[str, object]:
    """Try to read a GGUF header from the first bytes of a file.

    Returns ("model", Model) when the slice held the whole header, or ("more", n_bytes) when the caller
    should read the first n_bytes of the file and call again. Raises ValueError for a file that is not a
    usable GGUF (bad magic, hostile counts, a header over GGUF_MAX_HEADER, a file cut short)."""
    from . import gguf_header  # only when a file is dropped: keeps the calculator's start-up import small

    try:
        header = gguf_header.read_gguf(bytes(data), max_header_bytes=GGUF_MAX_HEADER, file_size=file_size)
    except gguf_header.GGUFTruncated as e:
        if e.end_of_file or e.needed_bytes is None:
            raise ValueError(f"GGUF file: {e}") from None
        want = max(int(e.needed_bytes), 2 * len(data))
        if file_size is not None:
            want = min(want, file_size)
        if want > GGUF_MAX_HEADER or want <= len(data):
            raise ValueError(
                f"GGUF file: the header needs more than {GGUF_MAX_HEADER >> 20} MiB; not a model file we can read"
            ) from None
        return "more", want
    return "model", pm.model_from_gguf(header)


def model_from_gguf_bytes(data: bytes, file_size: int | None = None, name: str | None = None) -> pm.Model:
    kind, value = gguf_slice_plan(data, file_size)
    if kind == "more":
        raise ValueError(f"GGUF file: the header is longer than the {len(data)} bytes given (read at least {value})")
    if name:
        value = dataclasses.replace(value, name=name)
    return value


def describe_gguf_model(m: pm.Model) -> str:
    types: dict = {}
    for r in pm.quantize_plan(m, None):
        types[r["type"]] = types.get(r["type"], 0) + r["bytes"]
    main = sorted(types.items(), key=lambda kv: -kv[1])[:3]
    mix = ", ".join(f"{t} {b / pm.GB:.2f} GB" for t, b in main)
    return (
        f"{m.name}: {m.num_hidden_layers} layers, {m.total_params() / 1e9:.2f}B parameters, "
        f"{pm.weight_bytes(m, None)['total'] / pm.GB:.2f} GB of tensors ({mix})"
    )


# ---------------------------------------------------------------------------------------------------------
# config.json
# ---------------------------------------------------------------------------------------------------------
def _no_constant(name: str):
    raise ValueError(f"config.json: {name} is not a number JSON allows")


def parse_config(text: str) -> dict:
    """The JSON object of a config.json, or ValueError naming what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("config.json: paste the contents of a Hugging Face config.json")
    if len(text) > CONFIG_MAX_CHARS:
        raise ValueError(
            f"config.json: {len(text):,} characters is too long for a config (at most {CONFIG_MAX_CHARS:,})"
        )
    check_json_text(text, "config.json")
    try:
        cfg = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise ValueError(f"config.json: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    except RecursionError:  # cannot happen after check_json_text; kept so nothing but ValueError leaves
        raise ValueError(f"config.json: nested too deeply (at most {JSON_MAX_DEPTH} levels)") from None
    if not isinstance(cfg, dict):
        raise ValueError("config.json: must be a JSON object ({...})")
    return cfg


def model_from_config_text(text: str, name: str | None = None) -> pm.Model:
    cfg = parse_config(text)
    return pm.model_from_hf_config(cfg, name=name or cfg.get("_name_or_path") or "Your config.json model")


# The config.json fields perf_model.model_from_hf_config reads (enginelab.engine_io.hf_config_fields; a multimodal
# config nests them in text_config): what compact_config keeps for a URL, and what tests/fuzz_pipeline.py mutates.
_LEGACY_KEYS = (
    "model_type",
    "_name_or_path",
    "num_hidden_layers",
    "hidden_size",
    "intermediate_size",
    "intermediate_size_mlp",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "tie_word_embeddings",
    "max_position_embeddings",
    "attention_bias",
    "use_qk_norm",
    "rope_scaling",
    # mixture of experts
    "num_local_experts",
    "num_experts",
    "n_routed_experts",
    "num_experts_per_tok",
    "experts_per_token",
    "moe_intermediate_size",
    "n_shared_experts",
    "shared_expert_intermediate_size",
    "first_k_dense_replace",
    "interleave_moe_layer_step",
    # sliding, chunked and linear attention layers
    "sliding_window",
    "sliding_window_pattern",
    "layer_types",
    "attention_chunk_size",
    "full_attention_interval",
    "linear_conv_kernel_dim",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_num_key_heads",
    "linear_num_value_heads",
    # multi-head latent attention
    "q_lora_rank",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
)
# ... and the keys the block readers read (enginelab.arch_config: Gemma 4's global heads, hybrids' Mamba geometry...)
CONFIG_KEYS = _LEGACY_KEYS + tuple(k for k in _arch_config.CONFIG_KEYS if k not in _LEGACY_KEYS)


def compact_config(text: str) -> str:
    """The config's CONFIG_KEYS as compact JSON: short enough for a URL. When the Model made from them is not the
    whole config's (a field CONFIG_KEYS lacks matters), the whole config is kept, minified: a URL never changes
    the model."""
    cfg = parse_config(text)
    out = {k: cfg[k] for k in CONFIG_KEYS if k in cfg}
    if isinstance(cfg.get("text_config"), dict):
        out.update({k: cfg["text_config"][k] for k in CONFIG_KEYS if k in cfg["text_config"]})
    if isinstance(out.get("rope_scaling"), dict):
        out["rope_scaling"] = {k: v for k, v in out["rope_scaling"].items() if k in ("rope_type", "type")}
    if isinstance(out.get("layer_types"), list):  # long but needed for sliding-window layouts
        out["layer_types"] = [
            "s" if x == "sliding_attention" else "f" if x == "full_attention" else x for x in out["layer_types"]
        ]
    small = json.dumps(out, separators=(",", ":"), sort_keys=True)
    if _same_model(text, expand_compact(small)):
        return small
    return json.dumps(cfg, separators=(",", ":"), sort_keys=True)


def _same_model(text: str, other: str) -> bool:
    """Both config texts give one Model, or both fail with one message."""
    try:
        a = model_from_config_text(text)
    except ValueError as e:
        a = str(e)
    try:
        b = model_from_config_text(other)
    except ValueError as e:
        b = str(e)
    return a == b


def expand_compact(text: str) -> str:
    cfg = parse_config(text)
    if isinstance(cfg.get("layer_types"), list):
        cfg["layer_types"] = [
            "sliding_attention" if x == "s" else "full_attention" if x == "f" else x for x in cfg["layer_types"]
        ]
    return json.dumps(cfg)


# ---------------------------------------------------------------------------------------------------------
# A machine described by numbers
# ---------------------------------------------------------------------------------------------------------
MACHINE_FIELDS = [  # (key, label, default, min, max)
    ("gpu_gb", "GPU memory (GB, 0 = no GPU)", 24.0, 0.0, 512.0),
    ("gpu_bw", "GPU bandwidth (GB/s)", 1008.0, 10.0, 20000.0),
    ("gpu_tflops", "GPU FP16 TFLOP/s", 165.0, 0.1, 10000.0),
    ("ram_gb", "System RAM (GB)", 64.0, 1.0, 4096.0),
    ("ram_bw", "RAM bandwidth (GB/s)", 89.6, 1.0, 2000.0),
    ("pcie", "PCIe link (GB/s per direction)", 31.5, 0.5, 256.0),
]


def custom_machine(
    gpu_gb: float,
    gpu_bw: float,
    gpu_tflops: float,
    ram_gb: float,
    ram_bw: float,
    pcie: float,
    unified: bool = False,
    cpu_tflops: float = 1.5,
) -> pm.Machine:
    vals = dict(gpu_gb=gpu_gb, gpu_bw=gpu_bw, gpu_tflops=gpu_tflops, ram_gb=ram_gb, ram_bw=ram_bw, pcie=pcie)
    for key, label, _d, lo, hi in MACHINE_FIELDS:
        v = vals[key]
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v != v or not lo <= v <= hi:
            raise ValueError(f"{key} ({label}): must be a number from {lo:g} to {hi:g}, got {v!r}")
    ram = pm.Device("Your RAM", float(ram_gb), float(ram_bw), float(cpu_tflops), source="entered by you")
    gpu = None
    if gpu_gb > 0:
        gpu = pm.Device("Your GPU", float(gpu_gb), float(gpu_bw), float(gpu_tflops), source="entered by you")
    name = (
        f"Your machine: {gpu_gb:g} GB GPU at {gpu_bw:g} GB/s + {ram_gb:g} GB RAM"
        if gpu
        else f"Your machine: CPU only, {ram_gb:g} GB RAM at {ram_bw:g} GB/s"
    )
    return pm.Machine(name, gpu, ram, float(pcie) if gpu else 0.0, unified=unified, key="custom")


# ---------------------------------------------------------------------------------------------------------
# What the calculator's state points at: model=custom (config in the URL), model=gguf (this session's
# dropped file), machine=custom (numbers in the URL). Nothing is added to perf_model's catalogs.
# ---------------------------------------------------------------------------------------------------------
RESERVED_KEYS = ("custom", "gguf", "remote")  # remote: a model read from Hugging Face or a link (enginelab.remote)
_CONFIG_CACHE: dict = {}
_DROPPED: dict = {}


def config_result(compact_text: str) -> tuple:
    """(Model, None) for a (compact or full) config.json text, or (None, the ValueError's message) when it does
    not parse. Cached: a state's config is parsed once, however many views read it."""
    if compact_text in _CONFIG_CACHE:
        return _CONFIG_CACHE[compact_text]
    try:
        result = (model_from_config_text(expand_compact(compact_text)), None)
    except ValueError as e:
        result = (None, str(e))
    if len(_CONFIG_CACHE) > 32:
        _CONFIG_CACHE.clear()
    _CONFIG_CACHE[compact_text] = result
    return result


def config_model(compact_text: str):
    """The Model of a config.json text, or None when it does not parse (see config_result)."""
    return config_result(compact_text)[0]


def set_dropped(model: pm.Model, file_name: str = "", file_size: int | None = None) -> None:
    """Remember the GGUF model dropped into this page (one at a time)."""
    _DROPPED.clear()
    _DROPPED.update(model=model, file_name=file_name, file_size=file_size)


def dropped_model():
    return _DROPPED.get("model")


def dropped_info() -> tuple:
    """(file name, file size) of the dropped GGUF file, for putting it back after a failed drop."""
    return _DROPPED.get("file_name", ""), _DROPPED.get("file_size")


def restore_dropped(model, info: tuple) -> None:
    """Put back the model (or none) that was dropped before a failed attempt."""
    _DROPPED.clear()
    if model is not None:
        set_dropped(model, *info)


def machine_from_state(partial) -> pm.Machine:
    """The custom machine of a calculator state (its gpu_gb ... pcie fields); defaults fill gaps."""
    vals = {}
    for key, _label, default, lo, hi in MACHINE_FIELDS:
        v = partial.get(key, default)
        try:
            v = float(v)
        except (TypeError, ValueError):
            v = default
        vals[key] = min(max(v, lo), hi) if v == v else default
    return custom_machine(**vals)
