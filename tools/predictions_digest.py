#!/usr/bin/env python3
"""The measured profile's predictions over every published run, as two numbers that must not move in a refactor.

    python3 tools/predictions_digest.py

For each Sample of enginelab.calibration.samples() (every run of data/calibration/*.csv and the lab's), the tokens
per second calibration.predict gives it with the packaged parameters: once with the run's own build (its date and
marks), once as today's build (no date). Prints per pass the number of runs, the sum of the predictions (repr, all
digits) and a SHA-256 of the predictions rounded to 9 significant digits, in the samples' order.

    python3 tools/predictions_digest.py --loo

also prints each backend's linearised leave-one-device-out median and p90 (the gate test's, calibration.loo_linear
with 12 refining steps), which depend on the fit's free parameters and their order.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pylib"))

from enginelab import calibration as cal  # noqa: E402
from enginelab import measured  # noqa: E402


def digest(values: list) -> tuple:
    text = "\n".join(f"{v:.9g}" for v in values)
    return len(values), sum(values), hashlib.sha256(text.encode()).hexdigest()[:16]


def main(argv=None) -> int:
    loo = "--loo" in (sys.argv[1:] if argv is None else argv)
    samples = cal.samples()
    own = [cal.predict(s, measured.PARAMS) for s in samples]
    today = [cal.predict(replace(s, date="", repack=""), measured.PARAMS) for s in samples]
    for name, values in (("own build", own), ("today", today)):
        n, total, h = digest(values)
        print(f"{name}: runs {n} sum {total!r} sha256 {h}")
    for backend in measured.BACKENDS if loo else ():
        for kind in ("decode", "prefill"):
            fitted = measured.FIT.get("params", {}).get(backend, {})
            s = cal.summary(cal.loo_linear(samples, backend, kind, fitted, base=fitted, refine=12))
            print(f"loo {backend} {kind}: median {s.get('median')!r} p90 {s.get('p90')!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
