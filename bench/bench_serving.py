"""Benchmark (not a test): the serving simulation's speed and its errors against published runs.

    python3 bench/bench_serving.py [--scale S] [--pyodide DIR]

1. Speed: a 1,000-request workload (vllm bench serve's defaults: random dataset, 1,024 input and 128 output tokens;
   here at 10 requests/s, seed 0) served by each engine with its default flags on Llama 3.1 8B (F16 for vLLM and
   SGLang, Q4_K_M for llama-server) on an RTX 4090, measured profile. CPU seconds of this process, best of 3, with
   a cold step-time memo each run. The issue's target is under 300 ms of Python in Pyodide (Pyodide under node
   takes about 1.6-1.9x the CPython time here).
   Memory: the simulation keeps per-request records (tokens only while a request is in the server), an ITL ->
   count map and at most 2 x KV_SAMPLES KV samples; tracemalloc's peak is printed. With --pyodide DIR (a
   directory holding pyodide.mjs, as build.py copies it into dist/pyodide), the same workloads also run in
   Pyodide under node: wall-clock ms, best of 3.
2. Batched decode (enginelab.serving.fit): in-sample, leave-one-model-out and leave-one-device-out median and p90
   |error| on data/serving/batched_bench.csv, and the never-fitted micro-batch rows of pr_tables.csv.
3. Serving (enginelab.serving.validate): median |error| of mean TTFT, mean TPOT and output throughput on
   data/serving/serving_runs.csv, both profiles.

`run(scale=1.0) -> dict` returns the numbers; scale multiplies the request count of part 1.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))

import perf_model as pm  # noqa: E402
from enginelab.serving import fit, sim, validate  # noqa: E402

ENGINES = (("llama.cpp", "Q4_K_M", {"n_parallel": 16, "kv_unified": True}), ("vllm", "F16", {}), ("sglang", "F16", {}))


def _speed(n: int, repeats: int) -> dict:
    out = {}
    w = sim.Workload(num_prompts=n, request_rate=10.0, input_len=1024, output_len=128, seed=0)
    for engine, quant, flags in ENGINES:
        p = pm.place("llama-3.1-8b", "rtx4090", quant, n_ctx=32768, profile="measured")
        best = None
        for _ in range(repeats):
            gc.collect()
            t = time.process_time()
            res = sim.simulate(engine, p, w, **flags)
            dt = time.process_time() - t
            best = dt if best is None else min(best, dt)
        tracemalloc.start()
        sim.simulate(engine, p, w, **flags)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        m = res.metrics
        out[engine] = {
            "cpu_s": best,
            "steps": res.steps,
            "peak_mib": peak / 2**20,
            "output_throughput": m["output_throughput"],
            "mean_ttft_ms": m["mean_ttft_ms"],
            "mean_tpot_ms": m["mean_tpot_ms"],
            "preemptions": res.preemptions,
        }
    return out


# run in Pyodide: the speed part's workloads, wall-clock ms per engine (best of 3), as JSON on the last line
_PYODIDE_PY = """
import gc, json, time
import perf_model as pm
from enginelab.serving import sim
w = sim.Workload(num_prompts=NUM_PROMPTS, request_rate=10.0, input_len=1024, output_len=128, seed=0)
out = {}
for engine, quant, flags in ENGINES:
    p = pm.place("llama-3.1-8b", "rtx4090", quant, n_ctx=32768, profile="measured")
    best = None
    for _ in range(3):
        gc.collect()
        t = time.perf_counter()
        sim.simulate(engine, p, w, **flags)
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    out[engine] = best * 1e3
json.dumps(out)
"""
_PYODIDE_MJS = """
import { loadPyodide } from "%s";
const [pylib, code] = process.argv.slice(2);
const py = await loadPyodide({ indexURL: "%s" });
py.FS.mkdirTree("/mnt/pylib");
py.FS.mount(py.FS.filesystems.NODEFS, { root: pylib }, "/mnt/pylib");
py.runPython("import sys; sys.path.insert(0, '/mnt/pylib')");
console.log(py.runPython(code));
"""


def pyodide_speed(pyodide_dir: str, n: int) -> dict:
    """{engine: wall-clock ms in Pyodide under node} for the speed part's workloads (best of 3)."""
    node = shutil.which("node")
    d = os.path.abspath(pyodide_dir)
    if node is None or not os.path.exists(os.path.join(d, "pyodide.mjs")):
        raise SystemExit(f"--pyodide: needs node and {d}/pyodide.mjs")
    pylib = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib")
    code = _PYODIDE_PY.replace("NUM_PROMPTS", str(n)).replace("ENGINES", repr(ENGINES))
    with tempfile.TemporaryDirectory() as tmp:
        mjs = os.path.join(tmp, "run.mjs")
        with open(mjs, "w") as fh:
            fh.write(_PYODIDE_MJS % (os.path.join(d, "pyodide.mjs"), d + "/"))
        res = subprocess.run([node, mjs, os.path.abspath(pylib), code], capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def run(scale: float = 1.0, repeats: int = 3) -> dict:
    n = max(10, int(1000 * scale))
    out = {"requests": n, "speed": _speed(n, repeats)}
    samples = fit.combined()  # the set the parameters are fitted on and the tests gate
    bench_rows = fit.samples()
    micro = fit.microbatch_samples()
    unplaced = [s for s in micro if not fit.placed(s)]
    out["batched_decode"] = {
        "in_sample": fit.summary(fit.errors(samples)),
        "leave_one_model_out": fit.summary([e for _s, e in fit.loo(samples, by="model")]),
        "leave_one_device_out": fit.summary([e for _s, e in fit.loo(samples, by="device")]),
        "batched_bench_rows_in_sample": fit.summary(fit.errors(bench_rows)),
        "microbatch_rows_not_placed": fit.summary(fit.errors(unplaced)),
        "devices": sorted({s.device for s in samples}),
    }
    out["serving"] = {prof: validate.summary(validate.errors(prof)) for prof in ("measured", "course")}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--pyodide", metavar="DIR", help="also time the simulation in Pyodide (DIR holds pyodide.mjs)")
    args = ap.parse_args()
    r = run(args.scale)
    print(f"serving simulation, {r['requests']:,} requests (Llama 3.1 8B, RTX 4090, 10 req/s, 1024 in / 128 out)")
    for engine, s in r["speed"].items():
        print(
            f"  {engine:9s} {s['cpu_s'] * 1e3:7.1f} ms CPU  {s['steps']:6,} steps  peak {s['peak_mib']:5.1f} MiB  "
            f"out {s['output_throughput']:7.1f} tok/s  TTFT {s['mean_ttft_ms']:8.1f} ms  TPOT {s['mean_tpot_ms']:6.2f} ms"
        )
    if args.pyodide:
        for engine, ms in pyodide_speed(args.pyodide, r["requests"]).items():
            print(f"  {engine:9s} {ms:7.1f} ms in Pyodide (node, wall clock; the issue's target: under 300 ms)")
    b = r["batched_decode"]
    print(
        f"batched decode (batched-bench + placed micro-batch rows, {len(b['devices'])} devices): |error| median / p90"
    )
    keys = ("in_sample", "leave_one_model_out", "leave_one_device_out", "batched_bench_rows_in_sample")
    for key in keys + ("microbatch_rows_not_placed",):
        s = b[key]
        print(f"  {key:30s} n={s['n']:3d}  {s['median'] * 100:5.1f}% / {s['p90'] * 100:5.1f}%")
    print("serving runs (held out: nothing fitted to them): median |error| (runs)")
    for prof, s in r["serving"].items():
        cells = "  ".join(f"{k} {v[1] * 100:5.1f}% ({v[0]})" for k, v in s.items())
        print(f"  {prof:9s} {cells}")


if __name__ == "__main__":
    main()
