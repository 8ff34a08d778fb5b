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
- interaction_busy_p95_ms / cross_frame_busy_p95_ms: the same changes (the calculator alone; the four embedded
  figures) while another process keeps one core busy (a busy loop pinned to core 0: a machine doing something
  else, as a reader's usually is). The p95 of the 50 changes falls on the first visits of the first pass (a model,
  quantization or layer split not computed yet); bench/bench_interaction.py times the same changes' Python in
  CPython, which a busy machine disturbs far less (data/lab/embed_bench.csv has runs of both).
  interaction_busy_cpu_p50_ms / _p95_ms: the same busy changes' main-thread CPU time (each input event's thread
  duration in a Chromium trace, on another fresh page: the wall times come from one not traced, as tracing's own
  work slows them): what the page itself spends, apart from the time the OS gives the core to others.
  interaction_busy_settled_*: the busy changes again, on a fresh page left alone for SETTLE_S first (as a reader's
  first look): by then V8 has compiled the interpreter's hot WebAssembly functions with TurboFan, work that right
  after ready runs in background threads beside the page's changes. The pages run under the tests' offline guard
  (harness.Guard), whose route Playwright's driver matches itself: a same-origin request (the service worker's
  install, 3 s after the last change, among them) never waits on this process, whose CPU would compete with the
  page's on the one free core.
- embeds_*: four figures embedded on a host page against one (time until ready, memory, interactions across the
  frames); embeds_where_mb says where the three more frames' memory goes (Chromium's memory-infra allocators
  summed over the frames' processes: compositor tiles, V8, Blink's DOM and layout heap, ...; the Python
  runtime's WebAssembly heap; DOM nodes per frame).
- dist_bytes: the size of dist/ by component (and gzip -6 sizes, which is what a server would send).
- Extensions: every bench/bench_<name>.py with run(scale) (bench_kv, bench_exercises, bench_fuzz,
  bench_calibration: the measured profile's leave-one-device-out error per llama.cpp backend, ...) adds its figures
  under "<name>"; a module with table(result) prints it.

Prints the figures and writes them to dist/bench.json. `--only embeds,busy` (any of load, interaction, kv,
repeat, embeds, busy, extensions) runs only those parts.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
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


def cold_load(browser, site, path: str, guard_problems: list, phases: list | None = None) -> float:
    ctx = browser.new_context()
    g = Guard(ctx, site.origin)
    try:
        page = ctx.new_page()
        page.add_init_script(READY_AT)
        page.goto(site.url(path))
        wait_ready(page, timeout_ms=120_000)
        page.wait_for_function("window.__readyAt !== undefined")
        ms = page.evaluate("window.__readyAt")
        if phases is not None:
            phases.append(page.evaluate("JSON.stringify(window.enginelab_timing || {})"))
        if g.problems():
            guard_problems.append({path: g.problems()})
        return ms
    finally:
        ctx.close()


# A page's start, phase by phase (site/assets/runtime.js and live.js mark them in window.enginelab_timing):
# until the runtime starts (HTML, CSS, scripts), pyodide.mjs imported, loadPyodide, waiting for the wheel and
# glue fetched alongside, importing the glue (and enginelab), the first render (the figure's module, compute,
# render, the DOM write), and the rest until <html data-ready="true">.
PHASES = [
    ("page", None, "boot_start"),
    ("pyodide_js", "boot_start", "pyodide_js"),
    ("load_pyodide", "pyodide_js", "pyodide_ready"),
    ("wheel_wait", "pyodide_ready", "files_ready"),
    ("imports", "files_ready", "glue_imported"),
    ("first_render", "glue_imported", "first_render"),
]


def breakdown(timings: list[str], ready_ms: list[float]) -> dict:
    """Median milliseconds per phase of a page's start (PHASES), and what is left until data-ready."""
    rows = [json.loads(t) for t in timings]
    out = {}
    for name, a, b in PHASES:
        vals = [r[b] - (r[a] if a else 0) for r in rows if b in r and (a is None or a in r)]
        if vals:
            out[name] = statistics.median(vals)
    rest = [ms - r["first_render"] for r, ms in zip(rows, ready_ms, strict=True) if "first_render" in r]
    if rest:
        out["after_render"] = statistics.median(rest)
    return out


# ---------------------------------------------------------------------------------------------------------
# Several figures on one host page (another origin: localhost against the site's 127.0.0.1, so the frames
# are cross-site, as on a real course page), each run in a fresh browser: the time until every frame is ready,
# the browser's memory over an empty host page, and interactions across the frames that share one runtime.
# ---------------------------------------------------------------------------------------------------------
# Each with settings of its own (a snippet from a figure's Embed button after changing something): a frame that
# shows its default settings opens without drawing anything (it is pre-rendered), which would flatter the numbers.
# The four of issue 33: a form-heavy figure, a 1,000-cell animated one, a chart, and a step-through.
EMBED_FIGURES = [
    "calculator.html?machine=rtx3060&ctx=16384",
    "kv-managers.html?step=5",
    "roofline.html?machine=rtx3060&batch=4",
    "load.html?step=3",
]


@contextlib.contextmanager
def busy_core(core: int = 0):
    """Another process busy on one core (a Python busy loop pinned to `core`) for the duration."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(proc.pid, {core % (os.cpu_count() or 1)})
        time.sleep(0.2)  # scheduled and spinning
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def memory_infra(browser) -> dict:
    """{pid: {allocator: MB}} from one Chromium memory-infra dump (the allocators chrome://tracing shows: malloc,
    partition_alloc, v8, blink_gc, cc/tile_memory, gpu/shared_images, ...), top two levels of names only."""
    cdp = browser.new_browser_cdp_session()
    events, done = [], []
    cdp.on("Tracing.dataCollected", lambda p: events.extend(p["value"]))
    cdp.on("Tracing.tracingComplete", lambda p: done.append(True))
    cdp.send(
        "Tracing.start",
        {
            "traceConfig": {
                "includedCategories": ["disabled-by-default-memory-infra"],
                "memoryDumpConfig": {"triggers": []},
            }
        },
    )
    cdp.send("Tracing.requestMemoryDump", {"deterministic": True, "levelOfDetail": "detailed"})
    cdp.send("Tracing.end")
    t0 = time.monotonic()
    while not done and time.monotonic() - t0 < 30:
        cdp.send("Browser.getVersion")  # lets the session's events arrive
        time.sleep(0.05)
    cdp.detach()
    out: dict = {}
    for e in events:
        if e.get("ph") != "v":
            continue
        for name, d in e.get("args", {}).get("dumps", {}).get("allocators", {}).items():
            size = d.get("attrs", {}).get("size")
            if name.count("/") <= 1 and size and size.get("units") == "bytes":
                out.setdefault(e["pid"], {})[name] = int(size["value"], 16) / 1e6
    return out


# where a frame's memory can go, by memory-infra allocator (summed over processes)
WHERE = {
    "compositor_tiles": "cc/tile_memory",
    "gpu_shared_images": "gpu/shared_images",
    "v8_js_heap": "v8",
    "blink_dom_layout": "blink_gc",
    "partition_alloc": "partition_alloc",
    "malloc": "malloc",
}


def where(dump: dict) -> dict:
    return {k: sum(a.get(name, 0.0) for a in dump.values()) for k, name in WHERE.items()}


FRAME_JS = """() => ({
  runtime: document.documentElement.dataset.runtime,
  dom_nodes: document.getElementsByTagName('*').length,
  python_heap_mb: window.enginelab_runtime?.rt?.heapBytes ? window.enginelab_runtime.rt.heapBytes() / 1e6 : null,
})"""


def host_page(site, figures: list[str]) -> str:
    """A course page with the figures in a grid, every frame in view (1280 x 1300 px viewport)."""
    frames = "".join(
        f'<iframe id="f{i}" src="{site.url(f"figures/{fig}")}" title="figure {i + 1}" loading="lazy"'
        ' style="width:620px;height:600px;border:0"></iframe>'
        for i, fig in enumerate(figures)
    )
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>Course page</title><link rel="icon" href="data:,">'
        f"</head><body><h1>Week 3</h1>{frames}</body></html>"
    )


def browser_pss_mb(root_pid: int) -> float:
    """The proportional set size (PSS: shared pages split between the processes that map them) of every
    Chromium process under root_pid (our browser: its GPU, network, renderer and frame processes), in MB."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(d))
    total, todo = 0, list(kids.get(root_pid, []))
    while todo:
        pid = todo.pop()
        todo += kids.get(pid, [])
        try:
            if "chrom" not in Path(f"/proc/{pid}/comm").read_text():
                continue
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


CROSS_JS = """
async (n) => {
  const times = [];
  for (let i = 0; i < n; i++) {
    const sels = [...document.querySelectorAll('#controls select')]
      .filter(s => !s.closest('[hidden]') && !s.disabled && s.options.length > 1);
    if (!sels.length) break;
    const s = sels[i % sels.length];
    s.selectedIndex = (s.selectedIndex + 1) % s.options.length;
    const done = new Promise(r => addEventListener('enginelab:rendered', r, { once: true }));
    const t0 = performance.now();
    s.dispatchEvent(new Event('input', { bubbles: true }));
    await done;  // a frame served by another frame's runtime is answered asynchronously
    times.push(performance.now() - t0);
    await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
  }
  return times;
}
"""


def embeds_run(pw, site, host, figures: list[str], problems: list, interact: int = 0, detail=False) -> dict:
    """One fresh browser, the host page with these figures: ms from navigation until every frame is ready,
    the browser's PSS then (after a second's rest), and, if interact, per-change times across the frames (then
    again with one core busy). detail: where the memory is (memory-infra allocators, per-frame DOM and heap)."""
    browser = launch(pw)
    try:
        ctx = browser.new_context(viewport={"width": 1280, "height": 1300})
        horigin = f"http://localhost:{host.port}"
        g = Guard(ctx, site.origin, also=(horigin,))
        page = ctx.new_page()
        page.add_init_script(READY_AT)  # runs in every frame
        name = f"host-{len(figures)}.html"
        (host.directory / name).write_text(host_page(site, figures))
        page.goto(f"{horigin}/{name}")
        done = []
        for i in range(len(figures)):
            frame = page.locator(f"#f{i}").element_handle().content_frame()
            frame.wait_for_selector("html[data-ready=true]", state="attached", timeout=180_000)
            frame.wait_for_function("window.__readyAt !== undefined")
            done.append(frame.evaluate("performance.timeOrigin + window.__readyAt"))
        ready_ms = (max(done) - page.evaluate("performance.timeOrigin")) if done else 0.0
        page.wait_for_timeout(1000)
        out = {"ready_ms": ready_ms, "pss_mb": browser_pss_mb(os.getpid())}
        frames = [page.locator(f"#f{i}").element_handle().content_frame() for i in range(len(figures))]
        if figures:
            out["runtimes"] = [f.evaluate("document.documentElement.dataset.runtime") for f in frames]
        if detail:
            out["where_mb"] = where(memory_infra(browser))
            out["frames"] = {figures[i].split(".html")[0]: f.evaluate(FRAME_JS) for i, f in enumerate(frames)}
        if interact:
            for key, busy in (("interaction", False), ("busy_interaction", True)):
                times, by_figure = [], {}
                with busy_core() if busy else contextlib.nullcontext():
                    for i, frame in enumerate(frames):
                        t = frame.evaluate(CROSS_JS, interact)
                        times += t
                        by_figure[figures[i].split(".html")[0]] = t
                out[f"{key}_ms"] = times
                out[f"{key}_by_figure"] = by_figure
        if g.problems():
            problems.append({f"embeds-{len(figures)}": g.problems()})
        ctx.close()
        return out
    finally:
        browser.close()


def embeds(site, runs: int, interact: int, problems: list) -> dict:
    """embeds_4_ready_ratio and embeds_4_memory_ratio (4 figures against 1, memory over an empty host page),
    and the cross-frame interaction p95 on the 4-figure page. Medians over runs, configurations alternated."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        host = Site(Path(tmp), check_built=False)
        res: dict[int, list] = {0: [], 1: [], 4: []}
        try:
            with sync_playwright() as pw:
                for r in range(runs):
                    for n in (0, 1, 4):
                        res[n].append(
                            embeds_run(
                                pw,
                                site,
                                host,
                                EMBED_FIGURES[:n],
                                problems,
                                interact if (n == 4 and r == 0) else 0,
                                detail=r == 0 and n > 0,
                            )
                        )
        finally:
            host.close()
    med = {n: {k: statistics.median(x[k] for x in res[n]) for k in ("ready_ms", "pss_mb")} for n in res}
    cross = sorted(res[4][0].get("interaction_ms", []))
    out = {
        "embeds_1_ready_ms": med[1]["ready_ms"],
        "embeds_4_ready_ms": med[4]["ready_ms"],
        "embeds_4_ready_ratio": med[4]["ready_ms"] / med[1]["ready_ms"],
        "embeds_empty_pss_mb": med[0]["pss_mb"],
        "embeds_1_memory_mb": med[1]["pss_mb"] - med[0]["pss_mb"],
        "embeds_4_memory_mb": med[4]["pss_mb"] - med[0]["pss_mb"],
        "embeds_4_runtimes": res[4][0].get("runtimes"),
        "embeds_runs": {str(n): res[n] for n in res},
    }
    out["embeds_4_memory_ratio"] = out["embeds_4_memory_mb"] / out["embeds_1_memory_mb"]
    one, four = res[1][0], res[4][0]
    if "where_mb" in one and "where_mb" in four:  # the three more frames, by allocator (first run)
        out["embeds_where_mb"] = {k: four["where_mb"][k] - one["where_mb"][k] for k in WHERE}
        heap = [f.get("python_heap_mb") for x in (one, four) for f in x["frames"].values() if f.get("python_heap_mb")]
        if len(heap) == 2:
            out["embeds_where_mb"]["python_heap"] = heap[1] - heap[0]
        out["embeds_4_frames"] = four["frames"]
    busy = sorted(four.get("busy_interaction_ms", []))
    if busy:
        out |= {
            "cross_frame_busy_p50_ms": statistics.median(busy),
            "cross_frame_busy_p95_ms": statistics.quantiles(busy, n=100, method="inclusive")[94],
        }
    if cross:
        q = statistics.quantiles(cross, n=100, method="inclusive")
        out |= {
            "cross_frame_p50_ms": statistics.median(cross),
            "cross_frame_p95_ms": q[94],
            "cross_frame_n": len(cross),
            "cross_frame_by_figure": {
                fig: {"p50": statistics.median(t), "max": max(t)}
                for fig, t in res[4][0].get("interaction_by_figure", {}).items()
                if t
            },
        }
    return out


REPEAT_JS = """
async () => {
  const reg = await navigator.serviceWorker.ready;  // installed (this build's files cached) and active
  return !!reg.active;
}
"""


def repeat_visit(browser, site, runs: int, problems: list) -> dict:
    """repeat_visit_ms: the calculator again in the same browser profile once the service worker has cached the
    build (every file from the cache), against its first visit there."""
    first, again = [], []
    for _ in range(runs):
        ctx = browser.new_context()
        g = Guard(ctx, site.origin)
        try:
            for lst in (first, again):
                page = ctx.new_page()
                page.add_init_script(READY_AT)
                page.goto(site.url("figures/calculator.html"))
                wait_ready(page, timeout_ms=120_000)
                page.wait_for_function("window.__readyAt !== undefined")
                lst.append(page.evaluate("window.__readyAt"))
                if lst is first:
                    page.evaluate(REPEAT_JS)
                    page.wait_for_function(
                        "navigator.serviceWorker.controller !== null", timeout=60_000
                    )  # clients.claim(): this page is served by it now
                page.close()
            if g.problems():
                problems.append({"repeat visit": g.problems()})
        finally:
            ctx.close()
    return {
        "first_visit_ms": statistics.median(first),
        "repeat_visit_ms": statistics.median(again),
        "repeat_visit_runs": again,
    }


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


PARTS = ("load", "interaction", "kv", "repeat", "embeds", "busy", "extensions")


def input_cpu_ms(trace: Path) -> list:
    """Each input event's main-thread CPU time (ms) in a Chromium trace: its EventDispatch's thread duration. With
    another process busy, a change's wall time is this plus the time the OS ran something else on its core."""
    try:
        events = json.loads(trace.read_text())
    except (OSError, ValueError):
        return []
    events = events.get("traceEvents", []) if isinstance(events, dict) else events
    return [
        e["tdur"] / 1e3
        for e in events
        if e.get("name") == "EventDispatch"
        and e.get("ph") == "X"
        and "tdur" in e
        and (e.get("args") or {}).get("data", {}).get("type") == "input"
    ]


# A reader's first look before the first change (bench key interaction_busy_settled_*): long enough for the idle
# warm-up and for V8 to finish compiling the Python interpreter's hot WebAssembly functions with TurboFan in the
# background, which on a two-core machine with one core busy competes with the page's main thread for the other
SETTLE_S = 5.0


def _changes_on_a_fresh_page(browser, site, n_changes: int, problems: list, busy: bool, settle_s: float, trace):
    """The calculator's changes on a fresh page (another process busy on one core if busy, after settle_s of the
    page left alone): each change's {ms, changed, split}. trace: a path for Chromium's trace of the changes."""
    ctx = browser.new_context()
    g = Guard(ctx, site.origin)
    page = ctx.new_page()
    page.goto(site.url("figures/calculator.html"))
    wait_ready(page)
    changes = [CHANGES[i % len(CHANGES)] for i in range(n_changes)]
    with busy_core() if busy else contextlib.nullcontext():
        time.sleep(settle_s)
        if trace:
            browser.start_tracing(page=page, path=str(trace), categories=["devtools.timeline"])
        times = page.evaluate(MEASURE_JS, changes)
        if trace:
            browser.stop_tracing()
    if g.problems():
        problems.append({"interaction": g.problems()})
    ctx.close()
    return times


def interaction(browser, site, n_changes: int, problems: list, busy: bool = False, settle_s: float = 0.0) -> dict:
    """interaction_* (or interaction_busy_*, interaction_busy_settled_* after settle_s of the page left alone): the
    calculator's changes, input event to readouts updated. Wall times always come from a page that is not traced
    (tracing costs the browser's threads CPU, which with a core busy lengthens the changes: about 3 ms on the busy
    p95 on this machine); interaction_busy_cpu_* from a second fresh page whose changes are traced."""
    times = _changes_on_a_fresh_page(browser, site, n_changes, problems, busy, settle_s, None)
    ms = sorted(t["ms"] for t in times)
    q = statistics.quantiles(ms, n=100, method="inclusive")
    pre = ("interaction_busy_settled" if settle_s else "interaction_busy") if busy else "interaction"
    out = {f"{pre}_p50_ms": statistics.median(ms), f"{pre}_p95_ms": q[94], f"{pre}_max_ms": ms[-1]}
    if busy:
        if settle_s:
            return out
        # Chromium's trace of the same changes on another fresh page: each input event's main-thread CPU time
        trace = Path(tempfile.mkdtemp()) / "trace.json"
        traced = _changes_on_a_fresh_page(browser, site, n_changes, problems, busy, settle_s, trace)
        cpu = input_cpu_ms(trace)
        shutil.rmtree(trace.parent, ignore_errors=True)
        if len(cpu) == len(traced):
            cq = statistics.quantiles(sorted(cpu), n=100, method="inclusive")
            out |= {f"{pre}_cpu_p50_ms": statistics.median(cpu), f"{pre}_cpu_p95_ms": cq[94]}
        return out
    return out | {
        "interaction_n": len(ms),
        # the glue's own split of each change: Python compute + render / DOM write + controls + URL
        "interaction_python_p50_ms": statistics.median(
            float(t["split"].split("/")[0]) for t in times if t.get("split")
        ),
        "interaction_dom_p50_ms": statistics.median(float(t["split"].split("/")[1]) for t in times if t.get("split")),
        "interaction_unchanged": sum(1 for t in times if not t["changed"]),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dist", default=str(DIST))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--changes", type=int, default=50)
    ap.add_argument("--scale", type=float, default=1.0, help="passed to extension benchmarks' run(scale)")
    ap.add_argument("--embed-runs", type=int, default=3, help="host pages with 0, 1 and 4 figures, fresh browsers")
    ap.add_argument("--cross-changes", type=int, default=25, help="changes per frame on the 4-figure page")
    ap.add_argument("--no-extensions", action="store_true", help="skip bench/bench_*.py")
    ap.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts to run, of {', '.join(PARTS)}")
    args = ap.parse_args(argv)
    parts = set(args.only.split(","))
    if parts - set(PARTS):
        ap.error(f"--only: unknown part(s) {', '.join(sorted(parts - set(PARTS)))}")
    if args.no_extensions:
        parts.discard("extensions")
    dist = Path(args.dist)
    site = Site(dist)
    problems: list = []
    result: dict = {}
    try:
        with sync_playwright() as pw:
            browser = launch(pw)
            if "load" in parts:
                bare, calc, phases = [], [], []
                cold_load(browser, site, "_bare.html", problems)  # warm the OS file cache, not the browser's
                for _ in range(args.runs):
                    bare.append(cold_load(browser, site, "_bare.html", problems))
                    calc.append(cold_load(browser, site, "figures/calculator.html", problems, phases))
                result |= {
                    "load_ratio": statistics.median(calc) / statistics.median(bare),
                    "load_ms_median": statistics.median(calc),
                    "bare_pyodide_ms_median": statistics.median(bare),
                    "load_ms_runs": calc,
                    "bare_pyodide_ms_runs": bare,
                    "load_breakdown_ms": breakdown(phases, calc),
                }
            if "interaction" in parts:
                result |= interaction(browser, site, args.changes, problems)
            if "busy" in parts:
                result |= interaction(browser, site, args.changes, problems, busy=True)
                result |= interaction(browser, site, args.changes, problems, busy=True, settle_s=SETTLE_S)
            if "kv" in parts:
                result |= kv_frames(browser, site, problems)
            if "repeat" in parts:
                result |= repeat_visit(browser, site, 3, problems)
            browser.close()
        if "embeds" in parts:  # its own browsers, one per run
            result |= embeds(site, args.embed_runs, args.cross_changes, problems)
    finally:
        site.close()
    result |= {
        "dist_bytes": dist_bytes(dist),
        "browser_problems": problems,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if "extensions" in parts:
        result |= run_extensions(args.scale)
    out = dist / "bench.json"
    if parts != set(PARTS) and out.exists():  # a partial run updates the last full one's figures
        try:
            result = json.loads(out.read_text()) | result
        except ValueError:
            pass
    out.write_text(json.dumps(result, indent=1) + "\n")
    report(result, args, parts)
    if problems:
        print("browser problems:", problems)
    print(f"wrote {out}")
    return 1 if problems else 0


def report(result: dict, args, parts: set) -> None:
    """Print the figures this run measured."""
    r = result
    if "load" in parts:
        print(
            f"load_ratio           {r['load_ratio']:.3f}  (calculator {r['load_ms_median']:.0f} ms / "
            f"bare Pyodide {r['bare_pyodide_ms_median']:.0f} ms, medians of {args.runs})"
        )
        print(
            "load_breakdown_ms    "
            + ", ".join(f"{k} {v:.0f}" for k, v in r["load_breakdown_ms"].items())
            + f"  (bare Pyodide {r['bare_pyodide_ms_median']:.0f})"
        )
    if "repeat" in parts:
        print(
            f"repeat_visit_ms      {r['repeat_visit_ms']:.0f}  (the calculator again, from the service worker's "
            f"cache; first visit {r['first_visit_ms']:.0f})"
        )
    if "embeds" in parts:
        print(
            f"embeds_4_ready_ratio {r['embeds_4_ready_ratio']:.2f}  (all 4 figures ready "
            f"{r['embeds_4_ready_ms']:.0f} ms, 1 figure {r['embeds_1_ready_ms']:.0f} ms; host on another origin)"
        )
        print(
            f"embeds_4_memory_ratio {r['embeds_4_memory_ratio']:.2f}  (+{r['embeds_4_memory_mb']:.0f} MB against "
            f"+{r['embeds_1_memory_mb']:.0f} MB over an empty host page's {r['embeds_empty_pss_mb']:.0f} MB, PSS; "
            f"runtimes {r['embeds_4_runtimes']})"
        )
        if "embeds_where_mb" in r:
            print(
                "embeds_where_mb      "
                + ", ".join(f"{k} {v:+.1f}" for k, v in r["embeds_where_mb"].items())
                + "  (4 figures against 1, by allocator; DOM nodes per frame: "
                + ", ".join(f"{k} {v['dom_nodes']}" for k, v in r["embeds_4_frames"].items())
                + ")"
            )
        if "cross_frame_p95_ms" in r:
            print(
                f"cross_frame_p95_ms   {r['cross_frame_p95_ms']:.1f}  (p50 {r['cross_frame_p50_ms']:.1f}, "
                f"n={r['cross_frame_n']}: input to DOM written, in all 4 frames sharing one runtime; "
                + ", ".join(f"{k} p50 {v['p50']:.1f} max {v['max']:.1f}" for k, v in r["cross_frame_by_figure"].items())
                + ")"
            )
        if "cross_frame_busy_p95_ms" in r:
            print(
                f"cross_frame_busy_p95_ms {r['cross_frame_busy_p95_ms']:.1f}  (p50 {r['cross_frame_busy_p50_ms']:.1f}; "
                "the same changes with another process busy on one core)"
            )
    if "interaction" in parts:
        print(f"interaction_p50_ms   {r['interaction_p50_ms']:.1f}")
        print(
            f"interaction_p95_ms   {r['interaction_p95_ms']:.1f}  (max {r['interaction_max_ms']:.1f}, "
            f"n={r['interaction_n']}; median split: Python {r['interaction_python_p50_ms']:.1f} ms, "
            f"DOM {r['interaction_dom_p50_ms']:.1f} ms)"
        )
    if "busy" in parts:
        print(
            f"interaction_busy_p95_ms {r['interaction_busy_p95_ms']:.1f}  (p50 {r['interaction_busy_p50_ms']:.1f}, "
            f"max {r['interaction_busy_max_ms']:.1f}: the calculator's changes with another process busy on one core)"
        )
        if "interaction_busy_cpu_p95_ms" in r:
            print(
                f"interaction_busy_cpu_p95_ms {r['interaction_busy_cpu_p95_ms']:.1f}  (p50 "
                f"{r['interaction_busy_cpu_p50_ms']:.1f}: the same changes' main-thread CPU time, from Chromium's trace; "
                "the rest of their wall time the OS ran other threads on the core)"
            )
        if "interaction_busy_settled_p95_ms" in r:
            print(
                f"interaction_busy_settled_p95_ms {r['interaction_busy_settled_p95_ms']:.1f}  (p50 "
                f"{r['interaction_busy_settled_p50_ms']:.1f}, max {r['interaction_busy_settled_max_ms']:.1f}: the "
                f"same, after the page sat {SETTLE_S:.0f} s untouched, as a reader's first look does)"
            )
    if "kv" in parts:
        print(
            f"kv_frame_p50_ms      {r['kv_frame_p50_ms']:.1f}  (KV managers, three {r['kv_frame_cells'] // 3}-cell "
            f"grids, frame patch: {r['kv_frame_patched']})"
        )
        print(
            f"kv_frame_p95_ms      {r['kv_frame_p95_ms']:.1f}  (max {r['kv_frame_max_ms']:.1f}, "
            f"n={r['kv_frame_n']}; full re-render instead: p50 {r['kv_frame_full_p50_ms']:.1f}, "
            f"p95 {r['kv_frame_full_p95_ms']:.1f})"
        )
    raw, gz = r["dist_bytes"]["raw"], r["dist_bytes"]["gzip"]
    print(
        "dist_bytes           "
        + ", ".join(f"{k} {raw[k] / 1e6:.2f} MB" for k in raw)
        + f"  (gzip total {gz['total'] / 1e6:.2f} MB)"
    )
    if "extensions" in parts:
        for name, _file in EXTENSIONS:
            for k, v in r.get(name, {}).items():
                if isinstance(v, (int, float, str, bool)):  # nested figures are in bench.json
                    print(f"{name}.{k:17s}  {v}")


if __name__ == "__main__":
    sys.exit(main())
