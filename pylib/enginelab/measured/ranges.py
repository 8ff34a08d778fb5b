"""Where published runs fall around a measured estimate, and what the explanation says about a backend's fit."""

from __future__ import annotations

import math
from dataclasses import fields

from .devices import rates
from .params import FIT, GPU_BACKENDS, RANGES, TYPICAL, params_for


def typical_range(value: float, backend: str, kind: str, device=None) -> tuple:
    """(low, high): where most published runs fall around an estimate of `value`, from the leave-one-device-
    out residuals of this backend's fit (the 20th and 80th percentiles of measured / estimated). With the device,
    a GPU vendor whose runs on a shared backend spread apart from the others' (Intel on Vulkan) gets its own."""
    vendor = range_basis(backend, kind, device)
    lo, hi = RANGES.get(backend, {}).get(f"{kind}.{vendor}" if vendor else kind, TYPICAL[kind])
    return value * lo, value * hi


def range_basis(backend: str, kind: str, device=None) -> str:
    """Whose runs the typical range of typical_range comes from: "" for the backend's, else the vendor's."""
    if device is None or backend not in GPU_BACKENDS:
        return ""
    vendor = rates(device, backend)["vendor"]
    return vendor if f"{kind}.{vendor}" in RANGES.get(backend, {}) else ""


def basis_summary(backend: str, kind: str) -> dict:
    """What the explanation says about a measured estimate: the backend, the parameters, and how many runs
    and devices they were fitted on."""
    prm = params_for(backend)
    info = FIT.get("fits", {}).get(backend, {}).get(kind, {})
    values = {f.name: getattr(prm, f.name) for f in fields(prm)}
    return {
        "backend": backend,
        "params": values,
        "runs": info.get("runs", 0),
        "devices": info.get("devices", 0),
        "loo_median": info.get("loo_median"),
        "fitted": bool(info),
    }


def finite(x: float) -> bool:
    return isinstance(x, float) and math.isfinite(x)
