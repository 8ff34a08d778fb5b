"""`python3 build.py bench`: load time, interaction latency and size of the built site, in real Chromium.

- load_ratio: the calculator page's cold load (navigation start to <html data-ready="true">, fresh browser
  context each time, so nothing is cached) divided by a bare Pyodide boot of the same vendored files
  (dist/_bare.html: loadPyodide() and nothing else), alternating the two, medians over --runs each.
- interaction_p50_ms / interaction_p95_ms: from dispatching an input event on a control to the readouts
  being updated (the glue runs synchronously, so the DOM is updated when dispatchEvent returns), over 50
  changes that cycle through every control.
- kv_frame_p50_ms / kv_frame_p95_ms: the KV-managers figure (three 384-cell grids, the module's chat workload):
  from the scrubber's input event to the new frame applied and laid out (dispatchEvent runs the glue
  synchronously; reading a bounding box then forces style and layout), over two passes through every frame, the
  first forward (simulation cached, frames new) and the second backward. Frames go through the figure's frame
  patch (site/assets/patch.js); kv_frame_full_* times the same frames rendered in full, for comparison.
- dist_bytes: the size of dist/ by component (and gzip -6 sizes, which is what a server would send).
- Extensions: every bench/bench_<name>.py with run(scale) (bench_kv, bench_exercises, bench_fuzz,
  bench_calibration: the measured profile's leave-one-device-out error per llama.cpp backend, ...) adds its figures
  under "<name>"; a module with table(result) prints it.

Prints the figures and writes them to dist/bench.json.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from playwright.sync_api import sync_playwright  # noqa: E402

from tests.e2e.harness import DIST, ROOT, Guard, Site, launch, wait_ready  # noqa: E402

READY_AT = """
(() => {
  const mark = () => { const html = document.documentElement;
                       if (html && html.dataset.ready === 'true' && window.__readyAt === undefined)
                         window.__readyAt = performance.now(); };
  new MutationObserver(mark).observe(document, { attributes: true, subtree: true, attributeFilter: ['data-ready'] });
})();
"""

# Control changes for the interaction benchmark: (control id, value), cycled.
CHANGES = [
    ("f-model", "qwen2.5-14b"),
    ("f-machine", "rtx3060"),
    ("f-quant", "Q5_K_M"),
    ("f-kv", "q8_0"),
    ("f-ctx", "32768"),
    ("f-ngl", "30"),
    ("f-tokens", "4000"),
    ("f-model", "llama-3.1-70b"),
    ("f-machine", "rtx4090"),
    ("f-ngl", "auto"),
    ("f-quant", "Q4_K_M"),
    ("f-kv", "f16"),
    ("f-ctx", "8192"),
    ("f-model", "qwen3-30b-a3b"),
    ("f-n_cpu_moe", "12"),
    ("f-tokens", "2000"),
    ("f-n_cpu_moe", "0"),
    ("f-model", "qwen2.5-32b"),
    ("f-machine", "rtx4060ti"),
]

MEASURE_JS = """
async (changes) => {
  const times = [];
  const readouts = () => [...document.querySelectorAll('[data-readout]')].map(e => e.dataset.value).join('|');
  for (const [id, value] of changes) {
    const el = document.getElementById(id);
    if (!el || el.closest('[hidden]')) continue;
    el.value = value;
    const before = readouts();
    const t0 = performance.now();
    el.dispatchEvent(new Event('input', { bubbles: true }));
    const t1 = performance.now();
    times.push({ id, value, ms: t1 - t0, changed: readouts() !== before, split: document.documentElement.dataset.renderMs });
    await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));  // let the frame paint
  }
  return times;
}
"""


KV_FRAME_JS = """
async ([full]) => {
  const el = document.getElementById('f-step');
  const lo = Number(el.min), hi = Number(el.max);
  const order = [];
  for (let v = lo + 1; v <= hi; v++) order.push(v);
  for (let v = hi - 1; v >= lo; v--) order.push(v);
  for (const r of document.querySelectorAll('#figure rect[data-i]')) r.__kept = true;
  const times = [];
  for (const v of order) {
    // without the figure's data-patch-key the glue cannot patch and renders the whole figure
    if (full) document.querySelector('#figure [data-patch-key]')?.removeAttribute('data-patch-key');
    el.value = String(v);
    const t0 = performance.now();
    el.dispatchEvent(new Event('input', { bubbles: true }));
    document.getElementById('figure').getBoundingClientRect();
    times.push(performance.now() - t0);
    await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));  // let the frame paint
  }
  const kept = [...document.querySelectorAll('#figure rect[data-i]')].every(r => r.__kept);
  return { times, patched: kept, cells: document.querySelectorAll('#figure rect[data-i]').length };
}
"""


def kv_frames(browser, site, problems: list) -> dict:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    g = Guard(ctx, site.origin)
    out = {}
    try:
        for full in (False, True):
            page = ctx.new_page()
            page.goto(site.url("figures/kv-managers.html"))
            wait_ready(page)
            res = page.evaluate(KV_FRAME_JS, [full])
            ms = sorted(res["times"])
            q = statistics.quantiles(ms, n=100, method="inclusive")
            pre = "kv_frame_full" if full else "kv_frame"
            out |= {
                f"{pre}_p50_ms": statistics.median(ms),
                f"{pre}_p95_ms": q[94],
                f"{pre}_max_ms": ms[-1],
                f"{pre}_n": len(ms),
            }
            if not full:
                out |= {"kv_frame_patched": res["patched"], "kv_frame_cells": res["cells"]}
            page.close()
        if g.problems():
            problems.append({"kv-managers": g.problems()})
    finally:
        ctx.close()
    return out


def cold_load(browser, site, path: str, guard_problems: list) -> float:
    ctx = browser.new_context()
    g = Guard(ctx, site.origin)
    try:
        page = ctx.new_page()
        page.add_init_script(READY_AT)
        page.goto(site.url(path))
        wait_ready(page, timeout_ms=120_000)
        page.wait_for_function("window.__readyAt !== undefined")
        ms = page.evaluate("window.__readyAt")
        if g.problems():
            guard_problems.append({path: g.problems()})
        return ms
    finally:
        ctx.close()


def dist_bytes(dist: Path) -> dict:
    groups = {"pyodide": 0, "pyscript": 0, "wheels": 0, "pages": 0, "assets": 0, "glue": 0, "other": 0}
    gz = dict.fromkeys(groups, 0)
    for f in dist.rglob("*"):
        if not f.is_file() or f.name == "bench.json":
            continue
        rel = f.relative_to(dist).as_posix()
        top = rel.split("/", 1)[0]
        key = {"pyodide": "pyodide", "pyscript": "pyscript", "wheels": "wheels", "assets": "assets", "py": "glue"}.get(
            top
        )
        if key is None:
            key = "pages" if f.suffix in (".html", ".json") else "other"
        data = f.read_bytes()
        groups[key] += len(data)
        gz[key] += len(gzip.compress(data, 6))
    groups["total"] = sum(groups.values())
    gz["total"] = sum(gz.values())
    return {"raw": groups, "gzip": gz}


# Every bench/bench_<name>.py with run(scale) -> dict lands under <name> in bench.json (kv, exercises, fuzz, ...).
EXTENSIONS = tuple((p.stem.removeprefix("bench_"), p.name) for p in sorted((ROOT / "bench").glob("bench_*.py")))


def run_extensions(scale: float) -> dict:
    """Other benchmarks in bench/: each module's run(scale) -> dict lands under its name in bench.json."""
    out = {}
    for name, file in EXTENSIONS:
        path = ROOT / "bench" / file
        if not path.exists():
            continue
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        if hasattr(mod, "run"):
            t = time.perf_counter()
            res = mod.run(scale)
            out[name] = res if isinstance(res, dict) else {"result": res}
            if hasattr(mod, "table"):  # a module's own summary of its figures
                print(mod.table(res))
            print(f"{path.stem}.run({scale}) took {time.perf_counter() - t:.1f} s")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dist", default=str(DIST))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--changes", type=int, default=50)
    ap.add_argument("--scale", type=float, default=1.0, help="passed to extension benchmarks' run(scale)")
    args = ap.parse_args(argv)
    dist = Path(args.dist)
    site = Site(dist)
    problems: list = []
    result: dict = {}
    try:
        with sync_playwright() as pw:
            browser = launch(pw)
            bare, calc = [], []
            cold_load(browser, site, "_bare.html", problems)  # warm the OS file cache, not the browser's
            for _ in range(args.runs):
                bare.append(cold_load(browser, site, "_bare.html", problems))
                calc.append(cold_load(browser, site, "figures/calculator.html", problems))
            ctx = browser.new_context()
            g = Guard(ctx, site.origin)
            page = ctx.new_page()
            page.goto(site.url("figures/calculator.html"))
            wait_ready(page)
            changes = [CHANGES[i % len(CHANGES)] for i in range(args.changes)]
            times = page.evaluate(MEASURE_JS, changes)
            if g.problems():
                problems.append({"interaction": g.problems()})
            ctx.close()
            kv = kv_frames(browser, site, problems)
            browser.close()
    finally:
        site.close()
    ms = sorted(t["ms"] for t in times)
    q = statistics.quantiles(ms, n=100, method="inclusive")
    result = {
        "load_ratio": statistics.median(calc) / statistics.median(bare),
        "load_ms_median": statistics.median(calc),
        "bare_pyodide_ms_median": statistics.median(bare),
        "load_ms_runs": calc,
        "bare_pyodide_ms_runs": bare,
        "interaction_p50_ms": statistics.median(ms),
        "interaction_p95_ms": q[94],
        "interaction_max_ms": ms[-1],
        "interaction_n": len(ms),
        # the glue's own split of each change: Python compute + render / DOM write + controls + URL
        "interaction_python_p50_ms": statistics.median(
            float(t["split"].split("/")[0]) for t in times if t.get("split")
        ),
        "interaction_dom_p50_ms": statistics.median(float(t["split"].split("/")[1]) for t in times if t.get("split")),
        "interaction_unchanged": sum(1 for t in times if not t["changed"]),
        **kv,
        "dist_bytes": dist_bytes(dist),
        "browser_problems": problems,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    result |= run_extensions(args.scale)
    (dist / "bench.json").write_text(json.dumps(result, indent=1) + "\n")
    print(
        f"load_ratio           {result['load_ratio']:.3f}  (calculator {result['load_ms_median']:.0f} ms / "
        f"bare Pyodide {result['bare_pyodide_ms_median']:.0f} ms, medians of {args.runs})"
    )
    print(f"interaction_p50_ms   {result['interaction_p50_ms']:.1f}")
    print(
        f"interaction_p95_ms   {result['interaction_p95_ms']:.1f}  (max {result['interaction_max_ms']:.1f}, "
        f"n={len(ms)}; median split: Python {result['interaction_python_p50_ms']:.1f} ms, "
        f"DOM {result['interaction_dom_p50_ms']:.1f} ms)"
    )
    print(
        f"kv_frame_p50_ms      {result['kv_frame_p50_ms']:.1f}  (KV managers, three {result['kv_frame_cells'] // 3}-cell "
        f"grids, frame patch: {result['kv_frame_patched']})"
    )
    print(
        f"kv_frame_p95_ms      {result['kv_frame_p95_ms']:.1f}  (max {result['kv_frame_max_ms']:.1f}, "
        f"n={result['kv_frame_n']}; full re-render instead: p50 {result['kv_frame_full_p50_ms']:.1f}, "
        f"p95 {result['kv_frame_full_p95_ms']:.1f})"
    )
    raw, gz = result["dist_bytes"]["raw"], result["dist_bytes"]["gzip"]
    print(
        "dist_bytes           "
        + ", ".join(f"{k} {raw[k] / 1e6:.2f} MB" for k in raw)
        + f"  (gzip total {gz['total'] / 1e6:.2f} MB)"
    )
    for name, _file in EXTENSIONS:
        for k, v in result.get(name, {}).items():
            if isinstance(v, (int, float, str, bool)):  # nested figures are in bench.json
                print(f"{name}.{k:17s}  {v}")
    if problems:
        print("browser problems:", problems)
    print(f"wrote {dist / 'bench.json'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
