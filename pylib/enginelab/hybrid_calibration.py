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

from . import calibration, measured
from .hybrid_models import (  # noqa: F401  (the models this fit runs on)
    _KIND_FAMILY,
    _NEMOTRON_NANO_9B_V2,
    _QWEN35_08B,
    _QWEN35_9B,
    CONFIGS,
    FAMILIES,
    LABELS,
    MIN_DATE,
    SIZE_TOLERANCE,
    family,
    is_hybrid,
    model_for,
    scale_weights,
)


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
