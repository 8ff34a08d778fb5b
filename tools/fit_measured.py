#!/usr/bin/env python3
"""Fit the measured profile on the calibration runs and report its leave-one-device-out error per backend.

    python3 tools/fit_measured.py                  print the fits and errors (no files written)
    python3 tools/fit_measured.py --write          also write pylib/enginelab/data/measured_params.json
    python3 tools/fit_measured.py --backend cuda   one backend only (nothing written)
    python3 tools/fit_measured.py --fast           held-out fits: one Gauss-Newton step from the full fit and
                                                   a few Nelder-Mead steps (the gate test's way, seconds);
                                                   default: each from the priors, as a fresh fit would

The fitting itself is enginelab.calibration (standard library only); this script only runs it and reports.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pylib"))

from enginelab import calibration as cal  # noqa: E402
from enginelab import measured  # noqa: E402

OUT = ROOT / "pylib" / "enginelab" / "data" / "measured_params.json"


def course_errors(samples) -> dict:
    """The course profile's error on the same runs (ETA_DECODE, ETA_PREFILL, DECODE_OVERHEAD_S)."""
    import perf_model as pm

    out = {}
    for s in samples:
        if s.kind == "decode":
            t = sum(w.bytes / (pm.ETA_DECODE * s.dev.bandwidth) for _side, w in s.work) + pm.DECODE_OVERHEAD_S
            est = 1.0 / t
        else:
            t = 0.0
            for _side, w, _u, _k, scale in s.work:
                t += w.flops * scale / (pm.ETA_PREFILL * s.dev.flops) + w.weight_bytes / (
                    pm.ETA_PREFILL * s.dev.bandwidth
                )
            est = s.tokens / t
        out.setdefault((s.backend, s.kind), []).append((s, est / s.tps - 1.0))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--iterations", type=int, default=400)
    ap.add_argument("--backend", choices=measured.BACKENDS)
    ap.add_argument("--fast", action="store_true", help="held-out fits linearised from the full fit")
    args = ap.parse_args(argv)
    if args.write and args.backend:
        ap.error("--write fits every backend")
    t0 = time.perf_counter()
    samples = cal.samples()
    course = course_errors(samples)
    result = {"params": {}, "ranges": {}, "fits": {}}
    print(f"{len(samples)} runs usable; fitting (Nelder-Mead, {args.iterations} iterations)\n")
    print(
        f"{'backend':8s} {'kind':8s} {'runs':>5s} {'devs':>4s} | {'course med':>10s} {'p90':>6s} | "
        f"{'fit med':>8s} {'p90':>6s} | {'LOO med':>8s} {'p90':>6s} | range"
    )
    for backend in (args.backend,) if args.backend else measured.BACKENDS:
        values = {}
        for kind in ("decode", "prefill"):
            sel = [s for s in samples if s.backend == backend and s.kind == kind]
            if not sel:
                continue
            base = dict(values)
            v = cal.fit(samples, backend, kind, args.iterations, base=base)
            values.update(v)
            params = dict(measured.PARAMS, **{backend: measured.PRIORS[backend].with_values(values)})
            fit_sum = cal.summary(cal.errors(sel, params))
            loo_sum = {}
            if len({s.device for s in sel}) > 1:
                if args.fast:
                    errs = cal.loo_linear(samples, backend, kind, v, base=base, refine=12)
                else:
                    errs = cal.loo(samples, backend, kind, args.iterations, base=base)
                loo_sum = cal.summary(errs)
            c = cal.summary(course[(backend, kind)])
            rng = (loo_sum or fit_sum)["range"]
            print(
                f"{backend:8s} {kind:8s} {fit_sum['n']:5d} {fit_sum['devices']:4d} | {c['median']:10.1%} {c['p90']:6.1%} | "
                f"{fit_sum['median']:8.1%} {fit_sum['p90']:6.1%} | "
                + (f"{loo_sum['median']:8.1%} {loo_sum['p90']:6.1%}" if loo_sum else f"{'-':>8s} {'-':>6s}")
                + f" | {rng[0]:.2f}-{rng[1]:.2f}"
            )
            result["fits"].setdefault(backend, {})[kind] = {
                "runs": fit_sum["n"],
                "devices": fit_sum["devices"],
                "fit_median": fit_sum["median"],
                "fit_p90": fit_sum["p90"],
                "loo_median": loo_sum.get("median") if loo_sum else None,
                "loo_p90": loo_sum.get("p90") if loo_sum else None,
                "course_median": c["median"],
                "course_p90": c["p90"],
            }
            result["ranges"].setdefault(backend, {})[kind] = [round(rng[0], 3), round(rng[1], 3)]
            if loo_sum:  # a vendor with a spread of its own on a shared backend (Intel on Vulkan)
                result["ranges"][backend].update(cal.vendor_ranges(errs, backend, kind))
        result["params"][backend] = {k: round(v, 6) for k, v in values.items()}
    print(f"\n({time.perf_counter() - t0:.1f} s)")
    for b, v in result["params"].items():
        print(b, json.dumps(v))
    if args.write:
        result["loo"] = "linearised" if args.fast else "from the priors"
        OUT.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
