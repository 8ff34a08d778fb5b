"""Benchmark (not a test): the calculator's changes in CPython, without a browser.

    python3 bench/bench_interaction.py [--runs N] [--idle]

Replays tests/e2e/bench.py's CHANGES (50 changes cycling through the calculator's controls) through the browser
glue's own entry point (site/py/main.py serve: open on the pre-rendered default, main.ready, the idle warm-up
requests, then one "input" request per change, each followed by its "deferred" request, as live.js sends them), in a
fresh process per run so that every cache starts cold. Each change is timed in the thread's CPU time
(time.thread_time: another process on the machine does not count), which makes this a steady measure of the
Python share of `build.py bench`'s interaction_p95_ms on a shared machine: the browser adds the DOM write (~2 ms)
and Pyodide runs the same Python about 2-2.5x slower (node + the vendored Pyodide, this machine).

The first pass through CHANGES holds the first visits (a model, quantization or layer split not computed yet), which
set the p95; the second pass is the same changes warm. --idle runs the page's idle requests to the end after each
change (a reader who pauses; the bench's own changes never leave the page idle).

`run(scale=1.0) -> dict`: p50 and p95 over the 50 changes, the sums of the first and second pass and the slowest
changes, medians over max(3, 5 x scale) runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# one run, in a fresh interpreter: CHANGES (JSON) and idle (0/1) in, the per-change milliseconds out
_REPLAY = r"""
import json, sys, time
root, changes, idle = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "1"
sys.path[:0] = [root + "/pylib", root + "/site/py"]
import main
from enginelab import figures, page
fig = figures.get("calculator")
s = fig.default_state()
sigs = page.field_sigs(fig.SPEC, s)
values = {k: fig.SPEC.by_key[k].encode(fig.SPEC.shown(s, k)) for k in sigs}
ask = lambda **r: json.loads(main.serve("bench", json.dumps(r)))
ask(op="open", figure="calculator", search="", base="", sigs=sigs, values=values, layout="wide")
main.ready()
while ask(op="warm", layout="wide").get("more"):  # the warm-up's steps, as live.js sends them while idle
    pass
out = []
for key, value in changes:
    key = key[2:]  # "f-model" -> "model"
    values[key] = value
    t0 = time.thread_time()
    r = ask(op="input", values=values, target=key, layout="wide")
    out.append((time.thread_time() - t0) * 1e3)
    values.update(r.get("values", {}))
    if r.get("deferred"):
        ask(op="deferred", token=r["deferred"])
    while idle and ask(op="idle").get("more"):
        pass
print(json.dumps(out))
"""


def _cycle() -> list:
    sys.path.insert(0, ROOT)
    from tests.e2e.bench import CHANGES

    return list(CHANGES)


def _changes(n: int = 50) -> list:
    cycle = _cycle()
    return [cycle[i % len(cycle)] for i in range(n)]


def replay(idle: bool = False) -> list:
    """One run: the milliseconds of CPU time of each change."""
    args = [sys.executable, "-c", _REPLAY, ROOT, json.dumps(_changes()), "1" if idle else "0"]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(scale: float = 1.0, idle: bool = False) -> dict:
    n_first = len(_cycle())  # the first pass through CHANGES
    runs = [replay(idle) for _ in range(max(3, int(5 * scale)))]
    per_change = [statistics.median(col) for col in zip(*runs)]
    changes = _changes()
    slowest = sorted(range(len(per_change)), key=lambda i: -per_change[i])[:5]
    return {
        "runs": len(runs),
        "p50_ms": statistics.median(statistics.median(r) for r in runs),
        "p95_ms": statistics.median(statistics.quantiles(r, n=100, method="inclusive")[94] for r in runs),
        "first_pass_ms": sum(per_change[:n_first]),
        "second_pass_ms": sum(per_change[n_first : 2 * n_first]),
        "slowest": [[changes[i][0], changes[i][1], i, round(per_change[i], 2)] for i in slowest],
    }


def table(r: dict) -> str:
    lines = [
        f"calculator changes in CPython (thread time, median of {r['runs']} cold runs): p50 {r['p50_ms']:.2f} ms, "
        f"p95 {r['p95_ms']:.2f} ms; first pass {r['first_pass_ms']:.1f} ms, second (warm) {r['second_pass_ms']:.1f} ms",
        "  slowest: " + ", ".join(f"#{i} {k[2:]}={v} {ms} ms" for k, v, i, ms in r["slowest"]),
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--idle", action="store_true", help="run the idle warm-up to the end after each change")
    a = ap.parse_args(argv)
    print(table(run(a.runs / 5, idle=a.idle)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
