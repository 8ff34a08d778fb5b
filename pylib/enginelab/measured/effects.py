"""What a llama.cpp build lacks against today's, and what each missing change costs an estimate."""

from __future__ import annotations

from .builds import key, missing
from .features import TODAY
from .physics import decode_seconds


def decode_effects(work, device, backend: str, build: str, n_threads=None, params: dict | None = None) -> tuple:
    """What each change this build lacks costs one decode pass of `work` on this device: (row, share), the pass's time
    today without that one change over its time today, less 1 ("your build lacks X (PR #N): about Y% slower"). Rows
    that do not touch this device or work (another ISA's repack, a type the model has not) are left out."""
    t_today = decode_seconds(work, device, backend, n_threads, 1, params, TODAY)[0]
    out = []
    for r in missing(build, backend):
        t = decode_seconds(work, device, backend, n_threads, 1, params, TODAY - {key(r)})[0]
        if t != t_today:
            out.append((r, t / t_today - 1.0))
    return tuple(out)
