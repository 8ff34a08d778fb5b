"""Benchmark (not a test): the measured profile's held-out error on hybrid models, per block family.

    python3 bench/bench_blocks.py

For the gated delta net (Qwen3-Next, Qwen3.5), Mamba-2 (Nemotron-H, Granite 4.0-H) and short-conv (LFM2) families,
on their published llama-bench runs (enginelab.hybrid_calibration): each device held out in turn, the recurrent
rows (rec_layer_us in decode, scan_us in prefill) refitted on the other devices and its runs predicted. Beside
it, the same runs without the recurrent rows (the model before them), and the attention-only runs of the same
backends held out by calibration.loo_linear, for comparison. tests/test_block_speed.py gates the medians.

`run(scale=1.0) -> dict` is what `build.py bench` imports and calls (scale is unused: the fits are one-dimensional
and take about a second); the script prints the same table.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))

from enginelab import hybrid_calibration as hc  # noqa: E402


def run(scale: float = 1.0) -> dict:
    t0 = time.perf_counter()
    res = hc.report()
    res["seconds"] = time.perf_counter() - t0
    return res


def _pct(x) -> str:
    return "-" if x is None else f"{x:+.1%}" if x < 0 else f"{x:.1%}"


def table(res: dict) -> str:
    lines = [
        f"{'family':16s} {'kind':8s} {'runs':>5s} {'devs':>5s} | {'LOO med':>8s} {'p90':>7s} {'bias':>7s} | "
        f"{'no rows med':>11s} {'bias':>7s}"
    ]
    for fam in hc.FAMILIES:
        for kind, r in res.get(fam, {}).items():
            if not r["runs"]:
                lines.append(f"{fam:16s} {kind:8s} {0:5d} {0:5d} | no published run on a known device and model")
                continue
            lines.append(
                f"{fam:16s} {kind:8s} {r['runs']:5d} {r['devices']:5d} | {_pct(r['median']):>8s} "
                f"{_pct(r['p90']):>7s} {_pct(r['bias']):>7s} | {_pct(r['without_rows_median']):>11s} "
                f"{_pct(r['without_rows_bias']):>7s}"
            )
    fitted = res.get("fitted", {})
    if fitted:
        lines.append("recurrent rows fitted on every hybrid run: " + ", ".join(f"{k} {v:g}" for k, v in fitted.items()))
    return "\n".join(lines)


if __name__ == "__main__":
    r = run()
    print(table(r))
    print(f"({r['seconds']:.1f} s)")
