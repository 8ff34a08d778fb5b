"""Benchmark (not a test): how long a cell of the exercises page takes to run in the browser.

    python3 bench/bench_exercises.py [--runs N]        (after `python3 build.py`; uses dist/)

Loads dist/exercises.html in headless Chromium (offline, from a plain static server), waits for the Python
worker, puts exercise 2's reference solution in its editor (50 placements and decode-step timings of Qwen2.5 14B,
then plot.line) and runs the cell N times. Two numbers per run:

    cell_ms   from the Run call to the verdict and chart being in the page (what a learner waits for)
    python_ms the cell's own exec time inside the worker (enginelab.exercises.run_cell's run_ms)

The first run is reported on its own (the worker warms the checkers' references at start-up, so it should be
close to the rest). Target: cell_ms median under 200 ms.

`run(scale=1.0) -> dict` is the hook for `build.py bench`; scale multiplies the number of runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "pylib"))

TARGET_MS = 200.0
BASE_RUNS = 20

MEASURE_JS = """async ([n, runs]) => {
  const lab = window.enginelabExercises;
  const sec = lab.sections[n - 1];
  const out = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await lab.runCell(n);
    const t1 = performance.now();
    out.push({cell_ms: t1 - t0, python_ms: Number(sec.dataset.runMs),
              verdict: sec.querySelector('.ex-verdict').dataset.verdict,
              plots: sec.querySelectorAll('.ex-plots svg').length});
  }
  return out;
}"""


def run(scale: float = 1.0, dist: Path | None = None) -> dict:
    from playwright.sync_api import sync_playwright

    from tests.e2e.harness import DIST, Guard, Site, launch, wait_ready

    site = Site(dist or DIST)
    runs = max(3, int(round(BASE_RUNS * scale)))
    code = (ROOT / "pylib" / "enginelab" / "solutions" / "ex2.py").read_text().strip()
    try:
        with sync_playwright() as pw:
            browser = launch(pw)
            ctx = browser.new_context()
            guard = Guard(ctx, site.origin)
            page = ctx.new_page()
            t0 = time.perf_counter()
            page.goto(site.url("exercises.html"))
            wait_ready(page)
            ready_ms = (time.perf_counter() - t0) * 1e3
            page.evaluate("(code) => { document.getElementById('ex2-editor').code = code; }", code)
            times = page.evaluate(MEASURE_JS, [2, runs])
            problems = guard.problems()
            browser.close()
    finally:
        site.close()
    bad = [t for t in times if t["verdict"] != "correct" or t["plots"] != 1]
    cell = [t["cell_ms"] for t in times[1:]]
    py = [t["python_ms"] for t in times[1:]]
    return {
        "exercise": 2,
        "runs": runs,
        "page_ready_ms": ready_ms,
        "first_cell_ms": times[0]["cell_ms"],
        "first_python_ms": times[0]["python_ms"],
        "cell_ms_median": statistics.median(cell),
        "cell_ms_max": max(cell),
        "python_ms_median": statistics.median(py),
        "target_ms": TARGET_MS,
        "meets_target": statistics.median(cell) < TARGET_MS,
        "wrong_results": len(bad),
        "browser_problems": problems,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help=f"runs = {BASE_RUNS} x scale")
    ap.add_argument("--dist", default=None)
    args = ap.parse_args(argv)
    if not os.environ.get("ENGINELAB_CHROMIUM") and Path("/usr/bin/chromium").exists():
        os.environ["ENGINELAB_CHROMIUM"] = "/usr/bin/chromium"
    r = run(args.scale, Path(args.dist) if args.dist else None)
    print(json.dumps(r, indent=1))
    print(
        f"exercise 2 cell: median {r['cell_ms_median']:.0f} ms (max {r['cell_ms_max']:.0f}, first "
        f"{r['first_cell_ms']:.0f}; Python alone {r['python_ms_median']:.0f} ms) over {r['runs']} runs; "
        f"target < {TARGET_MS:.0f} ms: {'met' if r['meets_target'] else 'MISSED'}"
    )
    return 0 if r["meets_target"] and not r["wrong_results"] and not r["browser_problems"] else 1


if __name__ == "__main__":
    sys.exit(main())
