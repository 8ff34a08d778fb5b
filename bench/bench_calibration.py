"""Benchmark (not a test): how far the speed estimates are from published llama-bench runs, per backend.

    python3 bench/bench_calibration.py [--scale S]

For every llama.cpp backend and test kind (decode tgN, prompt ppN) in data/calibration (and the lab's own runs):
the course profile's median and p90 absolute error on every run, and the measured profile's leave-one-device-out
error: each device is predicted by a fit that never saw it (enginelab.calibration.loo), which is what a reader with
a device outside the data should expect. The gate in tests/test_calibration.py holds the same figures to decode
10% and prompt 20% median per backend.

`run(scale=1.0) -> dict` is what `build.py bench` imports and calls (scale multiplies the fit's iterations);
the script prints the same table.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))

from enginelab import calibration as cal  # noqa: E402
from enginelab import measured  # noqa: E402

# Nelder-Mead steps per held-out fit from the priors: tools/fit_measured.py's default, so the bench and the numbers it
# records in measured_params.json come from the same procedure (with 28 free CPU parameters the held-out median still
# moves by about half a point with the step budget: data/calibration/README.md, stop 25)
ITERATIONS = 400


def _course(samples: list) -> dict:
    """The course profile's |error| per (backend, kind), the same measured runs."""
    import perf_model as pm

    out: dict = {}
    for s in samples:
        if s.kind == "decode":
            t = sum(w.bytes / (pm.ETA_DECODE * s.dev.bandwidth) for _side, w in s.work) + pm.DECODE_OVERHEAD_S
            est = 1.0 / t
        else:
            t = sum(
                w.flops * scale / (pm.ETA_PREFILL * s.dev.flops) + w.weight_bytes / (pm.ETA_PREFILL * s.dev.bandwidth)
                for _side, w, _u, _k, scale in s.work
            )
            est = s.tokens / t
        out.setdefault((s.backend, s.kind), []).append((s, est / s.tps - 1.0))
    return out


def run(scale: float = 1.0) -> dict:
    t0 = time.perf_counter()
    iterations = max(40, int(ITERATIONS * scale))
    samples = cal.samples()
    course = _course(samples)
    result: dict = {}
    held_out: dict = {}  # (backend, kind) -> [(sample, error)] of the held-out predictions
    for backend in measured.BACKENDS:
        for kind in ("decode", "prefill"):
            sel = [s for s in samples if s.backend == backend and s.kind == kind]
            if not sel:
                continue
            n_dev = len({s.device for s in sel})
            held_out[(backend, kind)] = cal.loo(samples, backend, kind, iterations) if n_dev > 1 else []
            held = cal.summary(held_out[(backend, kind)]) if n_dev > 1 else {}
            c = cal.summary(course[(backend, kind)])
            result.setdefault(backend, {})[kind] = {
                "runs": len(sel),
                "devices": n_dev,
                "course_median": c["median"],
                "course_p90": c["p90"],
                "loo_median": held.get("median"),
                "loo_p90": held.get("p90"),
            }
    result["targets"] = targets(held_out)
    result["gate_cpu_seconds"] = gate_seconds(samples)
    result["seconds"] = time.perf_counter() - t0
    result["iterations"] = iterations
    return result


def gate_seconds(samples: list) -> float:
    """CPU seconds of the unit test's gate: the linearised leave-one-device-out of every gated backend and kind from
    the committed fit (tests/test_calibration.py held_out, 12 refining steps). A speed figure, printed, not tested."""
    t0 = time.process_time()
    for backend in measured.BACKENDS:
        if backend == "sycl":
            continue
        fitted = measured.FIT.get("params", {}).get(backend, {})
        for kind in ("decode", "prefill"):
            cal.loo_linear(samples, backend, kind, fitted, base=fitted, refine=12)
    return time.process_time() - t0


# Issue 13's targets for runs the project has not seen, here on the held-out predictions of the runs it has:
# (name, what is pooled, median target, p90 target)
TARGETS = (
    ("decode, discrete GPUs", "tgN on CUDA, ROCm, Vulkan and SYCL cards of devices.csv kind discrete_gpu", 0.08, 0.25),
    ("pp512, every backend", "pp512 runs of every backend", 0.15, None),
    ("decode, a 2-core CPU", "this lab's runs (2 cores, -t 1 and -t 2)", 0.15, None),
    ("prompt, a 2-core CPU", "this lab's runs (2 cores, -t 1 and -t 2)", 0.20, None),
)


def targets(held_out: dict) -> dict:
    """Issue 13's target figures on the held-out predictions: {name: summary plus its targets}."""
    kinds = {r.get("device", ""): r.get("kind", "") for r in cal._csv("calibration_devices.csv")}
    pools = {
        "decode, discrete GPUs": [
            (s, e)
            for (b, k), errs in held_out.items()
            if k == "decode" and b in measured.GPU_BACKENDS and b != "metal"
            for s, e in errs
            if kinds.get(s.device) == "discrete_gpu"
        ],
        "pp512, every backend": [
            (s, e) for (_b, k), errs in held_out.items() if k == "prefill" for s, e in errs if s.tokens == 512
        ],
        "decode, a 2-core CPU": [(s, e) for s, e in held_out.get(("cpu", "decode"), []) if s.device == cal.LAB_DEVICE],
        "prompt, a 2-core CPU": [(s, e) for s, e in held_out.get(("cpu", "prefill"), []) if s.device == cal.LAB_DEVICE],
    }
    out = {}
    for name, what, med, p90 in TARGETS:
        out[name] = {**cal.summary(pools[name]), "what": what, "median_target": med, "p90_target": p90}
        by: dict = {}
        for s, e in pools[name]:
            by.setdefault(s.backend, []).append((s, e))
        out[name]["by_backend"] = {b: cal.summary(errs) for b, errs in sorted(by.items())}
        sbc = [(s, e) for s, e in pools[name] if s.host]  # GPUs behind a single-board host (measured.HOST_LINKS)
        if name.startswith("decode, discrete") and sbc:
            desktop = [(s, e) for s, e in pools[name] if not s.host]
            out[name]["by_host"] = {
                "desktop or server host": cal.summary(desktop),
                "single-board host (measured.HOST_LINKS)": cal.summary(sbc),
            }
    return out


def table(res: dict) -> str:
    lines = [
        f"{'backend':8s} {'kind':8s} {'runs':>5s} {'devs':>5s} | {'course med':>10s} {'p90':>6s} | "
        f"{'measured LOO med':>16s} {'p90':>6s}"
    ]
    for backend, kinds in res.items():
        if not isinstance(kinds, dict) or backend == "targets":
            continue
        for kind, r in kinds.items():
            loo = "-" if r["loo_median"] is None else f"{r['loo_median']:.1%}"
            p90 = "-" if r["loo_p90"] is None else f"{r['loo_p90']:.1%}"
            lines.append(
                f"{backend:8s} {kind:8s} {r['runs']:5d} {r['devices']:5d} | {r['course_median']:10.1%} "
                f"{r['course_p90']:6.1%} | {loo:>16s} {p90:>6s}"
            )
    if res.get("targets"):
        lines.append("\nissue 13's targets, on the held-out predictions (runs the fit did not see):")
        for name, t in res["targets"].items():
            if not t.get("n"):
                lines.append(f"  {name:24s} no runs")
                continue
            goal = f"median <= {t['median_target']:.0%}" + (
                f", p90 <= {t['p90_target']:.0%}" if t["p90_target"] else ""
            )
            lines.append(
                f"  {name:24s} {t['n']:4d} runs {t['devices']:3d} devices | median {t['median']:5.1%} "
                f"p90 {t['p90']:5.1%} | target {goal}"
            )
            if len(t.get("by_backend", {})) > 1:  # what each backend brings to the pool
                lines.append(
                    "    "
                    + "; ".join(
                        f"{b} {x['n']} runs {x['median']:.1%} (p90 {x['p90']:.1%})" for b, x in t["by_backend"].items()
                    )
                )
            for h, x in t.get("by_host", {}).items():  # GPUs behind a Raspberry Pi or a RISC-V board apart
                lines.append(f"    {h}: {x['n']} runs, median {x['median']:.1%}, p90 {x['p90']:.1%}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0)
    res = run(ap.parse_args(argv).scale)
    print(table(res))
    print(f"({res['seconds']:.0f} s, {res['iterations']} iterations per fit)")
    print(f"the unit test's gate (linearised leave-one-device-out, every backend): {res['gate_cpu_seconds']:.0f} CPU s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
