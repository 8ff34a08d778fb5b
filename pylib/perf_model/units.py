"""Units, the module's stated assumptions and fitted constants, and the two speed profiles' names."""

from __future__ import annotations

from enginelab.checks import brief

GB = 1e9  # decimal gigabyte: file sizes, VRAM bars, bandwidths (GB/s)
GiB = 1 << 30  # binary gibibyte: what llama.cpp's logs print as "GiB"
MiB = 1 << 20
KiB = 1 << 10

ETA_DECODE = 0.7  # the module's assumption: fraction of peak memory bandwidth decode kernels reach
ETA_PREFILL = 0.5  # the module's assumption: fraction of peak FP16 tensor FLOP/s prefill matmuls reach
# Fitted to the module's printed decode numbers (50.4-50.8 us reproduces every digit): a fixed cost per
# decode step, in seconds.  Not a measurement; the measured profile replaces it with a per-backend cost.
DECODE_OVERHEAD_S = 50.5e-6
# Fitted to the module's prefill column (0.924-0.935 reproduces it): the share of the PCIe link the weight
# copies of op offload reach.
ETA_PCIE = 0.93


def _check(cond: bool, arg: str, msg: str) -> None:
    if not cond:
        raise ValueError(f"{arg}: {msg}")


PROFILES = ("course", "measured")


def _check_profile(profile, placement=None) -> str:
    if profile is None:
        return placement.profile if placement is not None else "course"
    if profile not in PROFILES:
        _check(False, "profile", f"unknown profile {brief(profile)}; allowed: {', '.join(PROFILES)}")
    return profile


WORK_CACHE_MAX = 512  # distinct (model, quant) pairs kept
