"""The measured profile on hybrid models: their runs, the recurrent rows' fit, and the held-out error per block family.

A hybrid model mixes attention blocks with recurrent ones (enginelab.blocks): the gated delta net (Qwen3-Next,
Qwen3.5), Mamba-2 (Nemotron-H, Granite 4.0-H) or LFM2's short convolution. Their published llama-bench runs
(data/calibration/hybrid_runs.csv and the hybrid rows of the other run files) become Samples through
enginelab.calibration.samples(hybrid=True), with the models below. The measured profile's recurrent row
(enginelab.measured.recurrent: scan_us, a prefill scan step) is fitted here, one backend at a time, with every
other parameter at its shipped value (enginelab/data/measured_params.json); loo() holds out each device in turn,
refits it without that device and predicts its runs. Decode has no recurrent row (the state's bytes are counted
with the KV cache's): its errors are the plain estimates'.

A run counts when its model's parameter count is within 1% of llama-bench's and its file within SIZE_TOLERANCE of
our quantize plan's size: unsloth's UD files (Q4_K_XL printed as "Q4_K - Medium") keep more or fewer tensors at
higher precision than llama-quantize's preset, so the weights the run streamed are scaled to the size it printed.
"""

from __future__ import annotations

import math
import statistics

import perf_model as pm

from . import blocks, calibration, measured

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
CONFIGS = {
    ("qwen35", "0.75"): _QWEN35_08B,
    ("qwen35", "8.95"): _QWEN35_9B,
    ("qwen35", "26.90"): "qwen3.5-27b",
    ("qwen35moe", "34.66"): "qwen3.6-35b-a3b",
    ("qwen3next", "79.67"): "qwen3-next-80b-a3b",
    ("nemotron_h_moe", "31.58"): "nemotron-3-nano-30b-a3b",
    ("nemotron_h", "8.89"): _NEMOTRON_NANO_9B_V2,
    ("lfm2", "2.70"): "lfm2.5-2.6b",
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


def samples() -> list:
    """Every usable hybrid run as a calibration.Sample (the runs of models without recurrent blocks left out)."""
    out = []
    for s in calibration.samples(include_lab=False, bounds=False, hybrid=True):
        if any(getattr(item[1], "rec_blocks", 0) for item in s.work):
            out.append(s)
    return out


def sample_family(s) -> str:
    """The block family of a run's model (its GGUF architecture, the first word of llama-bench's model column)."""
    arch = s.label.split()[0] if s.label else ""
    for t, p in CONFIGS:
        if t == arch:
            m, _ = model_for(t, p)
            if m is not None:
                return family(m)
    return "recurrent"


def families() -> dict:
    """{family: [Sample, ...]} of the hybrid runs, the runs of superseded kernels (MIN_DATE) left out."""
    by: dict = {}
    for s in samples():
        fam = sample_family(s)
        if (s.date or "9999") < MIN_DATE.get(fam, ""):
            continue
        by.setdefault(fam, []).append(s)
    return by


# ---------------------------------------------------------------------------------------------------------
# The recurrent row's fit: one parameter per backend (prefill), the rest at the shipped values
# ---------------------------------------------------------------------------------------------------------
PARAM = {"prefill": "scan_us"}  # the recurrent row of each kind (decode has none)
PRIOR_WEIGHT = 0.02  # as calibration.PRIOR_WEIGHT: a gentle pull toward the physical prior
# The physical priors the fit pulls toward (the parameter table's priors are this fit's values, so that the app uses
# them; a held-out device must not pull its own refit through them): PR #22587's RTX 5090 measurement of
# gated_delta_net, 279.6 µs for 512 tokens of a 32-head block (0.55 µs a step) on CUDA, twice that elsewhere.
PHYSICAL = {"scan_us": {"cuda": 0.5, "rocm": 1.0, "vulkan": 1.0, "metal": 1.0, "sycl": 1.0, "cpu": 0.0}}


def _params(backend: str, value, kind: str) -> dict:
    if kind not in PARAM or value is None:
        return measured.PARAMS
    prm = measured.PARAMS[backend].with_values({PARAM[kind]: value})
    return dict(measured.PARAMS, **{backend: prm})


def _loss(value: float, sel: list, backend: str, kind: str) -> float:
    params = _params(backend, value, kind)
    by_dev: dict = {}
    for s in sel:
        try:
            e = math.log(calibration.predict(s, params) / s.tps)
        except (ZeroDivisionError, ValueError, OverflowError):
            e = 10.0
        by_dev.setdefault(s.device, []).append(math.sqrt(e * e + 0.0025))
    loss = sum(sum(v) / math.sqrt(len(v)) for v in by_dev.values()) / max(
        1.0, sum(math.sqrt(len(v)) for v in by_dev.values())
    )
    p0 = PHYSICAL[PARAM[kind]][backend]
    return loss + PRIOR_WEIGHT * math.log(value / p0) ** 2


def fit(sel: list, backend: str, kind: str):
    """The value of the (backend, kind) recurrent row minimising the devices' mean absolute log error plus the prior
    term over these samples (a golden-section search in log space within the row's bounds); the prior without
    samples, or on a backend whose fits keep it (the row's fixed_on); None for a kind without a row."""
    if kind not in PARAM:
        return None
    name = PARAM[kind]
    prior = PHYSICAL[name][backend]
    sel = [s for s in sel if s.backend == backend and s.kind == kind]
    if not sel or prior <= 0 or backend in measured.ROWS[name].fixed_on:
        return prior
    lo, hi = (math.log(b) for b in measured.bound(name))
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = _loss(math.exp(c), sel, backend, kind), _loss(math.exp(d), sel, backend, kind)
    for _ in range(40):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = _loss(math.exp(c), sel, backend, kind)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = _loss(math.exp(d), sel, backend, kind)
    return math.exp((a + b) / 2)


def errors(sel: list, fitted: dict | None = None) -> list:
    """(sample, estimate / measured - 1) with the recurrent row at fitted[(backend, kind)] (absent: the parameter
    table's value)."""
    out = []
    for s in sel:
        v = (fitted or {}).get((s.backend, s.kind))
        out.append((s, calibration.predict(s, _params(s.backend, v, s.kind)) / s.tps - 1.0))
    return out


def loo(by_family: dict) -> dict:
    """{family: [(sample, error), ...]}: for every device, the recurrent row refitted on the other devices' hybrid
    runs (every family's, same backend and kind) and that device's runs predicted (decode: nothing to refit)."""
    allrec = [s for fam, ss in by_family.items() if fam != "attention" for s in ss]
    out: dict = {fam: [] for fam in by_family}
    for dev in sorted({s.device for s in allrec}):
        train = [s for s in allrec if s.device != dev]
        fitted = {}
        for backend, kind in {(s.backend, s.kind) for s in allrec if s.device == dev}:
            fitted[(backend, kind)] = fit(train, backend, kind)
        for fam, ss in by_family.items():
            if fam == "attention":
                continue
            out[fam] += errors([s for s in ss if s.device == dev], fitted)
    return out


def attention_loo(backends: set, kind: str) -> list:
    """The attention-only runs' held-out errors on these backends, for comparison: calibration.loo_linear from the
    shipped fit (one Gauss-Newton step per held-out device, the gate test's method)."""
    sm = calibration.samples(include_lab=False, bounds=False)
    out = []
    for backend in sorted(backends):
        values = measured.FIT.get("params", {}).get(backend, {})
        names = measured.free_names(backend, kind)
        vals = {n: v for n, v in values.items() if n in names}
        if not any(s.backend == backend and s.kind == kind for s in sm):
            continue
        out += calibration.loo_linear(sm, backend, kind, vals)
    return out


def full_fit(by_family: dict) -> dict:
    """{(backend, kind): value} of the recurrent row fitted on every hybrid run."""
    allrec = [s for fam, ss in by_family.items() if fam != "attention" for s in ss]
    return {(b, k): fit(allrec, b, k) for b, k in sorted({(s.backend, s.kind) for s in allrec}) if k in PARAM}


def summary(errs: list) -> dict:
    """calibration.summary, with the signed median (the bias) too."""
    out = calibration.summary(errs)
    if errs:
        out["bias"] = statistics.median(e for _s, e in errs)
    return out


def report() -> dict:
    """The held-out error per block family and test kind: {family: {kind: {...}}}, each with the runs and devices,
    the leave-one-device-out median, p90 and signed median (bias) of estimate / measured - 1, and for the recurrent
    families the same errors without the recurrent row (scan_us = 0, nothing fitted: the model before it; in decode,
    which has no row, the same errors). "attention" is the attention-only runs on the backends the hybrid runs use, held out by
    calibration.loo_linear, for comparison. Families without a usable run are listed with n = 0."""
    by = families()
    held = loo(by)
    backends = {s.backend for ss in by.values() for s in ss}
    without = {(b, k): 0.0 for b in measured.BACKENDS for k in PARAM}
    out: dict = {}
    for fam in FAMILIES:
        out[fam] = {}
        for kind in ("decode", "prefill"):
            if fam == "attention":
                errs = attention_loo(backends, kind)
                base = []
            else:
                errs = [(s, e) for s, e in held.get(fam, []) if s.kind == kind]
                base = errors([s for s in by.get(fam, []) if s.kind == kind], without)
            sm, sb = summary(errs), summary(base)
            out[fam][kind] = {
                "runs": sm["n"],
                "devices": sm.get("devices", 0),
                "median": sm.get("median"),
                "p90": sm.get("p90"),
                "bias": sm.get("bias"),
                "without_rows_median": sb.get("median"),
                "without_rows_bias": sb.get("bias"),
            }
    out["fitted"] = {f"{b}.{PARAM[k]}": round(v, 3) for (b, k), v in full_fit(by).items()}
    return out
