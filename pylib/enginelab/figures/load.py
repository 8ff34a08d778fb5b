"""Model load, step by step: what a llama.cpp launch does to each memory tier, one step at a time.

The steps, their tiers, bytes and seconds are inference_trace.load_trace's, for the module's four scenarios
(inference_trace.LOAD_SCENARIOS), cold (the file comes from the drive) or warm (the OS page cache still holds
it). This module only groups and draws them: the tier the current step touches lights up, the tiers a copy
passes through are marked, and a running tally shows what each memory holds so far. A run of layer uploads (44
near-identical "Upload block N" steps for a 32B model) is one frame, with a progress bar over its blocks; the
first token lights every memory it reads, each with its own bytes.

State: scenario, warm, step (the frame, one per row of the step list: a trace step, or a run of uploads;
STEP_FIELD, so the page gets Back / Play / Step and a scrubber). compute(state) returns a LoadData: the trace
as LoadSteps, the frame's StepGroup and its last trace step, the boxes drawn, what each memory holds so far,
and the step list's rows (StepGroups).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import inference_trace as it
import perf_model as pm

from .. import chart, fmt
from ..chart import readout as _readout  # the data-readout contract, in one place
from ..chart import readout_attrs
from ..state import Bool, Choice, Int, Spec
from ..svg import Raw, data_details, el, join, svg, table

ID = "load"
TITLE = "Model load, step by step"
LEDE = (
    "Step through a llama.cpp launch: reading the GGUF header, mapping the file, copying layers to the GPU, "
    "allocating the KV cache, and the first token. The tier each step touches lights up."
)
STEP_FIELD = "step"

TIER_NAMES = {
    "drive": "NVMe drive",
    "ram": "RAM / page cache",
    "pcie": "PCIe link",
    "vram": "GPU VRAM",
    "unified": "Unified memory",
}
BOX_NAMES = {"drive": "NVMe drive", "ram": "RAM", "pcie": "PCIe link", "vram": "GPU VRAM", "unified": "Unified mem."}


@dataclass(frozen=True)
class LoadStep:
    """One step of inference_trace.load_trace, its fields typed (those only some steps have are None elsewhere)."""

    index: int
    what: str
    tier: str  # the tier the step touches (lit)
    bytes: float
    seconds: float
    elapsed_s: float  # the running total, this step included
    reads_file: bool
    source: str | None = None  # steps that read the file: "drive" or "page cache"
    mapped_bytes: float | None = None  # the mmap step: the whole file, addressable
    layer: int | None = None  # uploads: the block (n_layers for the output head)
    via: str | None = None  # uploads: the tier the bytes come from
    file_read_s: float | None = None  # uploads: the file read alone
    link_s: float | None = None  # uploads: the PCIe copy alone
    lands_in: str | None = None  # the page-in step: where the pages end up
    gpu_read_bytes: float | None = None  # the first token: bytes the GPU reads
    cpu_read_bytes: float | None = None  # ... and the CPU

    @classmethod
    def of(cls, step: dict) -> LoadStep:
        """A load_trace step (a dict) as a LoadStep; a key this class does not know is an error."""
        return cls(**step)


_TRACE_CACHE: dict = {}


def trace(scenario: str, warm: bool) -> tuple[LoadStep, ...]:
    """inference_trace.load_scenario as LoadSteps, memoised (the trace is pure; stepping re-renders many frames)."""
    key = (scenario, bool(warm))
    if key not in _TRACE_CACHE:
        _TRACE_CACHE[key] = tuple(LoadStep.of(s) for s in it.load_scenario(scenario, warm=bool(warm)))
    return _TRACE_CACHE[key]


def _n_frames(partial) -> int:
    return len(_groups(partial["scenario"], partial.get("warm", False)))


SPEC = Spec(
    ID,
    [
        Choice(
            "scenario",
            "Scenario",
            default="split-16gb",
            options=lambda p: [(k, v["label"]) for k, v in it.LOAD_SCENARIOS.items()],
        ),
        Bool(
            "warm",
            "Warm launch (file already in the page cache)",
            default=False,
            help="Off: a cold launch reads the file from the drive.",
        ),
        Int(
            "step",
            "Step",
            default=0,
            min=0,
            max=lambda p: _n_frames(p) - 1,
            widget="range",
            help="Drag, or use Back, Play and Step.",
        ),
    ],
)


State = SPEC.State  # this figure's state: scenario, warm, step


def default_state() -> State:
    return SPEC.default()


# ---------------------------------------------------------------------------------------------------------
# Compute
# ---------------------------------------------------------------------------------------------------------
def machine_tiers(mc) -> tuple[str, ...]:
    """The boxes drawn for a machine, left to right."""
    if mc.unified:
        return ("drive", "ram", "unified")
    if mc.gpu is None:
        return ("drive", "ram")
    return ("drive", "ram", "pcie", "vram")


def kind(step: LoadStep, last: bool) -> str:
    """A short name for what a step is, from the trace's own fields."""
    if step.index == 0:
        return "header"
    if step.mapped_bytes is not None:
        return "mmap"
    if step.tier == "pcie":
        return "upload"
    if step.lands_in is not None:
        return "page-in"
    if last:
        return "first-token"
    if "KV cache" in step.what:
        return "kv"
    return "buffer"


def destination(step: LoadStep, k: str) -> str | None:
    """The memory a step leaves bytes resident in (None: it only reads)."""
    if k == "upload":
        return "vram"
    if k == "page-in":
        return step.lands_in
    if k in ("kv", "buffer"):
        return step.tier
    return None


def path(step: LoadStep, k: str, tiers: tuple[str, ...]) -> tuple[str, ...]:
    """The boxes a step's bytes pass through, in drawing order (for the arrows)."""
    if k == "upload":
        a, b = tiers.index(step.via), tiers.index("vram")
        return tiers[a : b + 1]
    if k == "page-in":
        src, dst = step.tier, step.lands_in
        if src == dst:
            return (src,)
        a, b = sorted((tiers.index(src), tiers.index(dst)))
        return tiers[a : b + 1]
    return (step.tier,)


@dataclass(frozen=True)
class StepGroup:
    """One row of the step list: a step, or a run of consecutive layer uploads."""

    kind: str  # kind() of the step, or "upload-run"
    first: int  # step indices, inclusive
    last: int
    bytes: float
    seconds: float
    tier: str
    what: str
    layers: tuple[int, int] | None = None  # upload-run: first and last block
    via: str | None = None  # upload-run: where the bytes come from


def _upload_run_what(g: StepGroup) -> str:
    a, b = g.layers
    src = "drive" if g.via == "drive" else "page cache"
    if a == b:
        return f"Upload block {a} to VRAM ({src} -> PCIe -> VRAM)"
    return f"Upload blocks {a}-{b} to VRAM, {b - a + 1} blocks one after another ({src} -> PCIe -> VRAM)"


def groups(steps) -> list[StepGroup]:
    """Runs of consecutive layer uploads become one row of the step list; every other step is its own row."""
    out: list[StepGroup] = []
    last = len(steps) - 1
    for s in steps:
        k = kind(s, s.index == last)
        block = k == "upload" and s.what.startswith("Upload block")
        if block and out and out[-1].kind == "upload-run":
            g = out[-1]
            out[-1] = replace(
                g, last=s.index, bytes=g.bytes + s.bytes, seconds=g.seconds + s.seconds, layers=(g.layers[0], s.layer)
            )
        elif block:
            out.append(
                StepGroup(
                    kind="upload-run",
                    first=s.index,
                    last=s.index,
                    bytes=s.bytes,
                    seconds=s.seconds,
                    tier=s.tier,
                    what="",  # named below, once the run is complete
                    layers=(s.layer, s.layer),
                    via=s.via,
                )
            )
        else:
            out.append(
                StepGroup(
                    kind=k, first=s.index, last=s.index, bytes=s.bytes, seconds=s.seconds, tier=s.tier, what=s.what
                )
            )
    return [replace(g, what=_upload_run_what(g)) if g.kind == "upload-run" else g for g in out]


@dataclass(frozen=True)
class LoadData:
    state: State
    scenario_label: str  # inference_trace.LOAD_SCENARIOS[state.scenario]["label"]
    machine: pm.Machine
    model: pm.Model
    steps: tuple[LoadStep, ...]  # the whole trace (state.warm's launch)
    index: int  # the frame: the current row of the step list (groups)
    group: StepGroup  # that row: one trace step, or a run of uploads
    step: LoadStep  # its last trace step (what the memories hold after it)
    kind: str  # kind(step)
    lit: str  # the tier the step touches
    reads: dict[str, float]  # tier -> bytes the frame reads there (the first token reads from two), else {lit: bytes}
    path: tuple[str, ...]  # the boxes its bytes pass through
    dest: str | None  # the memory it leaves bytes in
    tiers: tuple[str, ...]  # the boxes drawn (machine_tiers)
    resident: dict[str, float]  # tier -> bytes held after this step
    caps: dict[str, float | None]  # tier -> capacity in bytes (None: not a memory, or none drawn)
    bandwidths: dict[str, float]  # tier -> bytes/s
    elapsed_s: float
    total_s: float  # the whole launch
    cold_total_s: float
    warm_total_s: float
    file_bytes: int
    groups: tuple[StepGroup, ...]  # the step list's rows


def compute(state: State) -> LoadData:
    sc = it.LOAD_SCENARIOS[state.scenario]
    steps = trace(state.scenario, state.warm)
    cold = trace(state.scenario, False)
    warm = trace(state.scenario, True)
    mc = pm.MACHINES[sc["machine"]]
    model = pm.MODELS[sc["model"]]
    rows = _groups(state.scenario, state.warm)
    gi = min(max(state.step, 0), len(rows) - 1)
    g = rows[gi]
    i = g.last
    cur = steps[i]
    last = len(steps) - 1
    tiers = machine_tiers(mc)
    k = kind(cur, i == last)
    resident = {t: 0.0 for t in tiers}
    for s in steps[: i + 1]:
        d = destination(s, kind(s, s.index == last))
        if d in resident:
            resident[d] += s.bytes
    caps = {
        "drive": None,
        "ram": None if mc.unified else mc.ram.mem_bytes,
        "pcie": None,
        "vram": mc.gpu.mem_bytes if mc.gpu is not None and not mc.unified else None,
        "unified": mc.gpu.mem_bytes if mc.unified else None,
    }
    bws = {
        "drive": mc.drive_gbs * pm.GB,
        "ram": mc.ram.bandwidth,
        "pcie": mc.pcie,
        "vram": mc.gpu.bandwidth if mc.gpu is not None else 0.0,
        "unified": mc.gpu.bandwidth if mc.unified else 0.0,
    }
    if cur.gpu_read_bytes is not None:  # the first token reads the GPU's memory and the CPU's
        gpu_tier, cpu_tier = ("unified", "unified") if mc.unified else ("vram", "ram")
        reads = {}
        for t, b in ((gpu_tier, cur.gpu_read_bytes), (cpu_tier, cur.cpu_read_bytes)):
            if b:
                reads[t] = reads.get(t, 0.0) + b
    else:
        reads = {cur.tier: g.bytes}
    return LoadData(
        state=state,
        scenario_label=sc["label"],
        machine=mc,
        model=model,
        steps=steps,
        index=gi,
        group=g,
        step=cur,
        kind=k,
        lit=cur.tier,
        reads=reads,
        path=path(cur, k, tiers),
        dest=destination(cur, k),
        tiers=tiers,
        resident=resident,
        caps=caps,
        bandwidths=bws,
        elapsed_s=cur.elapsed_s,
        total_s=steps[-1].elapsed_s,
        cold_total_s=cold[-1].elapsed_s,
        warm_total_s=warm[-1].elapsed_s,
        file_bytes=_file_bytes(state.scenario),
        groups=rows,
    )


def _groups(scenario: str, warm: bool) -> tuple[StepGroup, ...]:
    """groups() of a trace, memoised with it."""
    key = ("groups", scenario, bool(warm))
    if key not in _TRACE_CACHE:
        _TRACE_CACHE[key] = tuple(groups(trace(scenario, warm)))
    return _TRACE_CACHE[key]


def _file_bytes(scenario: str) -> int:
    key = ("file", scenario)
    if key not in _TRACE_CACHE:
        sc = it.LOAD_SCENARIOS[scenario]
        _TRACE_CACHE[key] = pm.file_bytes(sc["model"], sc["quant"])
    return _TRACE_CACHE[key]


def _where(data: LoadData) -> str:
    """'GPU VRAM, 4.6 GB' or, for a step that reads two memories, 'GPU VRAM 12.4 GB + RAM / page cache 7.0 GB'."""
    if len(data.reads) > 1:
        return " + ".join(f"{TIER_NAMES[t]} {fmt.bytes_auto(b)}" for t, b in data.reads.items()) + " read"
    return f"{TIER_NAMES[data.group.tier]}, {fmt.bytes_auto(data.group.bytes)}"


def describe(data: LoadData) -> str:
    g, st, n = data.group, data.state, len(data.groups)
    launch = "warm" if st.warm else "cold"
    return (
        f"{data.scenario_label}, {launch} launch, step {data.index + 1} of {n}: {g.what} "
        f"({_where(data)}, {fmt.seconds(g.seconds)}); "
        f"{fmt.seconds(data.elapsed_s)} elapsed of {fmt.seconds(data.total_s)}."
    )


# ---------------------------------------------------------------------------------------------------------
# Render
# ---------------------------------------------------------------------------------------------------------
W = 520
BOX_Y, BOX_H = 8, 118
GAP = 16
STRIP_H = 18


@dataclass(frozen=True)
class Layout:
    """The wide layout puts the memory boxes in one row; the narrow one (for a phone, chart.NARROW_W wide) puts
    two per row, snaking (drive, RAM / VRAM, PCIe), so each box keeps room for its text at its size."""

    width: float
    cols: int  # boxes per row (0: all in one row)
    suffix: str  # of element ids ("" or "-n")

    def box_w(self, n: int) -> float:
        c = self.cols or n
        return (self.width - 2 * 8 - GAP * (c - 1)) / c

    def box_xy(self, j: int, n: int) -> tuple[float, float]:
        c = self.cols or n
        row, col = divmod(j, c)
        if row % 2:  # snake: every other row runs right to left, so consecutive boxes touch
            col = c - 1 - col
        return 8 + col * (self.box_w(n) + GAP), BOX_Y + row * (BOX_H + GAP)

    def strip_y(self, n: int) -> float:
        rows = -(-n // (self.cols or n))
        return BOX_Y + rows * (BOX_H + GAP) - GAP + 34


WIDE = Layout(W, 0, "")
NARROW = Layout(chart.NARROW_W, 2, "-n")


def _boxes(data: LoadData, lay: Layout = WIDE) -> Raw:
    tiers = data.tiers
    n = len(tiers)
    bw = lay.box_w(n)
    cur_path = data.path
    parts = []
    for j, t in enumerate(tiers):
        x, by = lay.box_xy(j, n)
        lit = t in data.reads
        on_path = t in cur_path
        cls = (
            f"tier tier-{t}"
            + (" lit" if lit else "")
            + (" on-path" if on_path and not lit else "")
            + (" dest" if t == data.dest else "")
        )
        name = BOX_NAMES[t]
        if t == "ram" and data.machine.unified:
            name = "Page cache"
        inner = [
            el("rect", x=x, y=by, width=bw, height=BOX_H, rx=6, class_="box"),
            el("text", name, x=x + 8, y=by + 18, class_="box-title"),
            el("text", f"{data.bandwidths[t] / 1e9:,.4g} GB/s", x=x + 8, y=by + 36, class_="box-sub"),
        ]
        cap = data.caps[t]
        if cap:
            held = data.resident[t]
            inner.append(
                el(
                    "text",
                    f"{held / 1e9:.1f} of {fmt.gb(cap, 0)}",
                    x=x + 8,
                    y=by + 54,
                    class_="box-sub",
                    **({} if lay.suffix else readout_attrs(f"resident_{t}", held)),
                )
            )
            fw = (bw - 16) * min(1.0, held / cap)
            inner.append(el("rect", x=x + 8, y=by + 62, width=bw - 16, height=10, class_="fill-track"))
            inner.append(el("rect", x=x + 8, y=by + 62, width=max(fw, 0), height=10, class_="fill"))
        elif t == "drive":
            inner.append(el("text", f"file {fmt.gb(data.file_bytes, 1)}", x=x + 8, y=by + 54, class_="box-sub"))
        elif t == "pcie":
            inner.append(el("text", "host ⇄ GPU", x=x + 8, y=by + 54, class_="box-sub"))
        elif t == "ram":  # Apple: the page cache lives in the unified memory
            inner.append(el("text", "in unified memory", x=x + 8, y=by + 54, class_="box-sub"))
        if lit:
            b = data.reads[t]
            inner.append(el("text", "this step", x=x + 8, y=by + 92, class_="box-now"))
            inner.append(
                el(
                    "text",
                    (fmt.bytes_auto(b) if b else "0 B") + (" read" if len(data.reads) > 1 else ""),
                    x=x + 8,
                    y=by + 108,
                    class_="box-now-v",
                )
            )
        parts.append(el("g", inner, class_=cls, data_tier=t))
        if j < n - 1:  # the link to the next box: across the gap between them
            nx, ny = lay.box_xy(j + 1, n)
            active = t in cur_path and tiers[j + 1] in cur_path
            if ny == by:
                x_from = x + bw + 3 if nx > x else x - 3
                d = f"M{x_from:.1f} {by + BOX_H / 2:.1f} h{(GAP - 8) * (1 if nx > x else -1)}"
            else:
                d = f"M{x + bw / 2:.1f} {by + BOX_H + 3:.1f} v{GAP - 8}"
            parts.append(el("path", d=d, class_="link" + (" link-active" if active else "")))
    return el("g", parts, class_="tiers", id_="load-boxes" + lay.suffix)


def _static(data: LoadData, name: str, build):
    """A part of the page that depends only on the trace (scenario, warm): built once, reused every frame."""
    key = (name, data.state.scenario, bool(data.state.warm))
    if key not in _TRACE_CACHE:
        _TRACE_CACHE[key] = build(data)
    return _TRACE_CACHE[key]


def _segments(data: LoadData, lay: Layout = WIDE) -> Raw:
    """A segment per step on the timeline, coloured by the tier it touches."""
    segs = [chart.step_segment(s, f"seg-t seg-{s.tier}") for s in data.steps]
    sy = lay.strip_y(len(data.tiers))
    return join(
        chart.stacked_bar(
            segs, x0=8, y=sy, height=STRIP_H, span=lay.width - 16, total=data.total_s or 1.0, min_width=0.6
        )
    )


def _strip(data: LoadData, lay: Layout = WIDE) -> Raw:
    """The whole launch on one time axis: a segment per step, coloured by tier (built once per scenario); the
    frame's part (in #load-strip-now) dims the future, outlines the current step and says the time so far."""
    total = data.total_s or 1.0
    x0, x1 = 8, lay.width - 8
    sy = lay.strip_y(len(data.tiers))
    label_y = sy - 8
    parts = [
        el("text", "Timeline, to scale", x=x0, y=label_y, class_="strip-title"),
        el("text", f"total {fmt.seconds(total)}", x=x1, y=label_y, class_="strip-total", text_anchor="end"),
        el("rect", x=x0, y=sy, width=x1 - x0, height=STRIP_H, class_="strip-track"),
        _static(data, "segments" + lay.suffix, lambda d: _segments(d, lay)),
        el("g", _strip_now(data, lay), id_="load-strip-now" + lay.suffix),
    ]
    return el("g", parts, class_="strip")


def _strip_now(data: LoadData, lay: Layout = WIDE) -> Raw:
    total = data.total_s or 1.0
    x0, x1 = 8, lay.width - 8
    sy = lay.strip_y(len(data.tiers))
    span = x1 - x0
    cx = x0 + span * data.elapsed_s / total
    cw = span * data.group.seconds / total
    return join(
        [
            el("rect", x=cx, y=sy, width=max(x1 - cx, 0), height=STRIP_H, class_="strip-future"),
            el("rect", x=cx - cw, y=sy - 3, width=max(cw, 2), height=STRIP_H + 6, class_="strip-current"),
            el("line", x1=cx, y1=sy - 6, x2=cx, y2=sy + STRIP_H + 6, class_="strip-cursor"),
            chart.edge_label(f"{fmt.seconds(data.elapsed_s)} elapsed", cx, x0, x1, sy + STRIP_H + 18),
        ]
    )


def _chart_title(data: LoadData) -> str:
    st = data.state
    return (
        f"Loading {data.model.name} on {data.machine.name} "
        f"({'warm' if st.warm else 'cold'}), step {data.index + 1} of {len(data.groups)}"
    )


def _chart(data: LoadData, lay: Layout = WIDE) -> Raw:
    h = lay.strip_y(len(data.tiers)) + STRIP_H + 26
    return svg(
        [_boxes(data, lay), _strip(data, lay)],
        width=lay.width,
        height=h,
        title=_chart_title(data),
        desc=describe(data),
        id_="load-chart" + lay.suffix,
        class_="chart load-chart",
    )


def _charts(data: LoadData) -> Raw:
    """Wide, and re-laid out for a phone (the page shows one: chart.responsive)."""
    return chart.responsive(lambda: _chart(data), lambda: _chart(data, NARROW))


def _step_list(data: LoadData) -> Raw:
    rows = [
        (g.what, f"{TIER_NAMES[g.tier]} · {fmt.bytes_auto(g.bytes)} · {fmt.seconds(g.seconds)}", f"step-tier-{g.tier}")
        for g in data.groups
    ]
    return chart.step_list(rows, data.index, label="Launch steps", id_="load-steps")


def _table(data: LoadData) -> Raw:
    """Every step of the trace (the same for every frame of a scenario, so built once)."""

    def build(data):
        header = ["#", "Step", "Tier", "Bytes", "Seconds", "Elapsed (s)", "Source"]
        rows = [
            [
                str(s.index + 1),
                s.what,
                TIER_NAMES[s.tier],
                fmt.bytes_auto(s.bytes),
                f"{s.seconds:.4g}",
                f"{s.elapsed_s:.4g}",
                s.source or "",
            ]
            for s in data.steps
        ]
        launch = "warm" if data.state.warm else "cold"
        caption = (
            f"{data.scenario_label}, {launch} launch: all {len(rows)} steps of "
            f"inference_trace.load_trace, {fmt.seconds(data.total_s)} in all."
        )
        return data_details(f"Data table ({len(rows)} steps)", table(caption, header, rows))

    return _static(data, "table", build)


def _readouts(data: LoadData) -> Raw:
    g, st = data.group, data.state
    n = len(data.groups)
    return el(
        "dl",
        [
            _readout("step_index", data.index, f"{data.index + 1} / {n}", "Step"),
            _readout("step_tier", g.tier, TIER_NAMES[g.tier], "Tier"),
            _readout("step_bytes", g.bytes, fmt.bytes_auto(g.bytes), "Bytes"),
            _readout("step_s", g.seconds, fmt.seconds(g.seconds), "This step"),
            _readout("elapsed_s", data.elapsed_s, fmt.seconds(data.elapsed_s), "Elapsed"),
            _readout(
                "total_s",
                data.total_s,
                fmt.seconds(data.total_s),
                "Whole launch, warm" if st.warm else "Whole launch, cold",
            ),
        ],
        class_="readouts",
        id_="load-readouts",
    )


def _progress(data: LoadData) -> Raw:
    """A run of uploads as one step: a bar that fills block by block (CSS; at once under reduced motion)."""
    g = data.group
    a, b = g.layers
    n = b - a + 1
    return el(
        "span",
        [
            el(
                "span",
                el("span", class_="upload-fill", style=f"--blocks:{n}"),
                class_="upload-bar",
                role="progressbar",
                aria_valuemin="0",
                aria_valuemax=str(n),
                aria_valuenow=str(n),
                aria_label=f"{n} of {n} blocks uploaded",
            ),
            f" {n} blocks × {fmt.bytes_auto(g.bytes / n)}, {fmt.seconds(g.seconds)} in all",
        ],
        class_="upload-progress",
    )


def _caption(data: LoadData) -> Raw:
    parts = [el("strong", f"Step {data.index + 1}: "), data.group.what, "."]
    if data.group.kind == "upload-run" and data.group.first != data.group.last:
        parts.append(_progress(data))
    return el("p", parts, class_="step-caption", id_="load-caption")


def patch_key(data: LoadData) -> str:
    """Frames with the same key share one skeleton (the boxes, the timeline's segments, the table)."""
    st = data.state
    return f"load|{st.scenario}|{int(bool(st.warm))}"


def frame_patch(data: LoadData) -> dict:
    """What differs between two frames of one scenario, for the glue's applyPatch (site/assets/patch.js): the
    inner HTML of the parts that change, the chart's title and description, and the root's attributes, for the
    layouts drawn (chart.LAYOUT: a live frame shows one). Applied to any frame of the same scenario it gives
    exactly the full render of `data` (tests/test_fig_load.py)."""
    html = {"load-caption": chart.inner(_caption(data)), "load-readouts": chart.inner(_readouts(data))}
    text = {}
    if chart.shows("wide"):
        html |= {"load-boxes": chart.inner(_boxes(data)), "load-strip-now": _strip_now(data)}
        text |= {"load-chart-title": _chart_title(data), "load-chart-desc": describe(data)}
    if chart.shows("narrow"):
        html |= {"load-boxes-n": chart.inner(_boxes(data, NARROW)), "load-strip-now-n": _strip_now(data, NARROW)}
        text |= {"load-chart-n-title": _chart_title(data), "load-chart-n-desc": describe(data)}
    html["load-steps"] = chart.inner(_step_list(data))
    return {
        "key": patch_key(data),
        "html": html,
        "text": text,
        "attrs": {"load-fig": {"data-step": str(data.index), "data-lit": data.lit}},
    }


def render(data: LoadData) -> str:
    st = data.state
    other = data.cold_total_s if st.warm else data.warm_total_s
    note = el(
        "p",
        [
            f"A {'cold' if st.warm else 'warm'} launch of the same scenario takes {fmt.seconds(other)}. ",
            "Cold: every read of the file comes from the drive. Warm: the OS page cache still holds the file, so those "
            "reads come from RAM. Mapping the file reads nothing; the pages the CPU uses arrive on first touch.",
        ],
        class_="note",
    )
    return el(
        "div",
        [
            _caption(data),
            _readouts(data),
            el("figure", [_charts(data)], class_="chart-wrap"),
            _step_list(data),
            note,
            _table(data),
        ],
        class_="fig-load",
        id_="load-fig",
        data_step=str(data.index),
        data_lit=data.lit,
        data_patch_key=patch_key(data),
    )
