"""Prefill and decode on the hardware: one forward pass, stage by stage, on the device that does the work.

The stages are inference_trace.phase_trace's for the module's two scenarios (inference_trace.PHASE_SCENARIOS:
an 8B model that fits on the GPU, and the partially offloaded 32B model). For each stage: the device that
works (GPU, CPU, or the PCIe link), the bytes it streams and the FLOPs it does, their ratio (arithmetic
intensity, FLOP/byte) against the device's ridge point, and whether the stage is memory- or compute-bound.
The running total of the stages' seconds ends at perf_model's own total for the phase (decode_step_time or
prefill_time), and both are shown side by side.

State: scenario, phase, step (the stage; STEP_FIELD, so the page gets Back / Play / Step and a scrubber).
compute(state) returns a PhasesData: the trace as Stages, the current one, the Devices drawn, each device's busy
time so far, and perf_model's own total for the phase.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import inference_trace as it
import perf_model as pm

from .. import chart, fmt
from ..chart import readout as _readout  # the data-readout contract, in one place
from ..chart import readout_attrs
from ..state import Choice, Int, Spec
from ..svg import Raw, data_details, el, join, svg, table

ID = "phases"
TITLE = "Prefill and decode on the hardware"
LEDE = (
    "Step through one forward pass, stage by stage: which device works, how many bytes it reads and FLOPs it "
    "does, and whether memory bandwidth or arithmetic sets its time."
)
STEP_FIELD = "step"
PHASES = (("prefill", "Prefill (the prompt)"), ("decode", "Decode (one token)"))
DEVICE_NAMES = {"gpu": "GPU", "cpu": "CPU", "pcie": "PCIe link", "host": "CPU (host)"}


@dataclass(frozen=True)
class Stage:
    """One step of inference_trace.phase_trace, its fields typed (those only one phase has are None in the other)."""

    index: int
    what: str
    stage: str  # decode: attention / ffn / output / overhead; prefill: gpu / cpu / pcie / gpu_offload
    device: str  # gpu, cpu, pcie or host (the launch/sync overhead)
    tier: str
    bytes: float
    weight_bytes: float
    kv_bytes: float
    flops: float
    intensity: float  # FLOP/byte (inf: FLOPs without bytes read; 0: neither)
    bound: str  # memory, compute, transfer or latency
    seconds: float
    elapsed_s: float  # the running total, this stage included
    layers: tuple[int, int] | None = None  # decode: the blocks of the stage
    device_name: str | None = None  # decode: the GPU's or the RAM's name ("" for the overhead)
    ubatch: int | None = None  # prefill: the micro-batch
    tokens: int | None = None  # prefill: its tokens

    @classmethod
    def of(cls, step: dict) -> Stage:
        """A phase_trace step (a dict) as a Stage; a key this class does not know is an error."""
        return cls(**step)


_CACHE: dict = {}


def scenario_placement(key: str):
    """perf_model.place for a scenario, memoised (a Placement is frozen)."""
    ck = ("placement", key)
    if ck not in _CACHE:
        sc = it.PHASE_SCENARIOS[key]
        _CACHE[ck] = pm.place(sc["model"], sc["machine"], sc["quant"], sc["n_ctx"])
    return _CACHE[ck]


def trace(scenario: str, phase: str) -> tuple[Stage, ...]:
    """inference_trace.phase_scenario as Stages, memoised (pure; stepping re-renders many frames)."""
    key = (scenario, phase)
    if key not in _CACHE:
        _CACHE[key] = tuple(Stage.of(s) for s in it.phase_scenario(scenario, phase))
    return _CACHE[key]


def model_total(scenario: str, phase: str) -> float:
    """perf_model's own time for the phase: decode_step_time(...)['total_s'] or prefill_time(...)['total_s']."""
    key = ("total", scenario, phase)
    if key not in _CACHE:
        sc = it.PHASE_SCENARIOS[scenario]
        p = scenario_placement(scenario)
        if phase == "decode":
            _CACHE[key] = pm.decode_step_time(p, p.machine, context=sc["context"])["total_s"]
        else:
            _CACHE[key] = pm.prefill_time(p, p.machine, sc["n_tokens"])["total_s"]
    return _CACHE[key]


SPEC = Spec(
    ID,
    [
        Choice(
            "scenario",
            "Scenario",
            default="partial",
            options=lambda p: [(k, v["label"]) for k, v in it.PHASE_SCENARIOS.items()],
        ),
        Choice("phase", "Phase", default="decode", options=lambda p: list(PHASES)),
        Int(
            "step",
            "Stage",
            default=0,
            min=0,
            max=lambda p: len(trace(p["scenario"], p["phase"])) - 1,
            widget="range",
            help="Drag, or use Back, Play and Step.",
        ),
    ],
)


State = SPEC.State  # this figure's state: scenario, phase, step


def default_state() -> State:
    return SPEC.default()


# ---------------------------------------------------------------------------------------------------------
# Compute
# ---------------------------------------------------------------------------------------------------------
def box_of(step: Stage) -> str:
    """The device box a stage lights: its device ('host' overhead runs on the CPU side)."""
    d = step.device
    return "cpu" if d == "host" else d


@dataclass(frozen=True)
class Device:
    """A box of the figure: a processor with its memory, or the PCIe link between them."""

    key: str  # gpu, pcie or cpu
    name: str
    bandwidth: float  # bytes/s
    flops: float  # FLOP/s (0 for the link)
    ridge: float | None  # flops / bandwidth, FLOP/byte (None for the link)
    mem: str  # VRAM, unified, link or RAM


@dataclass(frozen=True)
class PhasesData:
    state: State
    scenario_label: str  # inference_trace.PHASE_SCENARIOS[state.scenario]["label"]
    context: int  # decode: tokens in the cache (the scenario's)
    n_tokens: int  # prefill: the prompt's tokens (the scenario's)
    machine: pm.Machine
    placement: pm.Placement
    model: pm.Model
    steps: tuple[Stage, ...]  # the whole trace
    index: int  # the current stage
    step: Stage
    lit: str  # the box it lights (box_of)
    devices: tuple[Device, ...]  # the boxes drawn, left to right
    device_s: dict[str, float]  # box -> seconds busy up to and including this stage
    elapsed_s: float
    trace_total_s: float  # the stages' seconds, all added up
    model_total_s: float  # perf_model's own total for the phase (model_total)
    model_fn: str  # which perf_model function gave it: decode_step_time or prefill_time


def compute(state: State) -> PhasesData:
    sc = it.PHASE_SCENARIOS[state.scenario]
    steps = trace(state.scenario, state.phase)
    i = min(max(state.step, 0), len(steps) - 1)
    cur = steps[i]
    mc = pm.MACHINES[sc["machine"]]
    p = scenario_placement(state.scenario)
    devices = []
    if mc.gpu is not None:
        devices.append(
            Device(
                key="gpu",
                name=mc.gpu.name,
                bandwidth=mc.gpu.bandwidth,
                flops=mc.gpu.flops,
                ridge=mc.gpu.flops / mc.gpu.bandwidth,
                mem="VRAM" if not mc.unified else "unified",
            )
        )
    if mc.gpu is not None and not mc.unified:
        devices.append(
            Device(key="pcie", name=f"{mc.pcie_gbs:g} GB/s", bandwidth=mc.pcie, flops=0.0, ridge=None, mem="link")
        )
    devices.append(
        Device(
            key="cpu",
            name=mc.ram.name,
            bandwidth=mc.ram.bandwidth,
            flops=mc.ram.flops,
            ridge=mc.ram.flops / mc.ram.bandwidth,
            mem="RAM",
        )
    )
    by_dev = {}
    for s in steps[: i + 1]:
        b = box_of(s)
        by_dev[b] = by_dev.get(b, 0.0) + s.seconds
    return PhasesData(
        state=state,
        scenario_label=sc["label"],
        context=sc["context"],
        n_tokens=sc["n_tokens"],
        machine=mc,
        placement=p,
        model=p.model,
        steps=steps,
        index=i,
        step=cur,
        lit=box_of(cur),
        devices=tuple(devices),
        device_s=by_dev,
        elapsed_s=cur.elapsed_s,
        trace_total_s=steps[-1].elapsed_s,
        model_total_s=model_total(state.scenario, state.phase),
        model_fn="decode_step_time" if state.phase == "decode" else "prefill_time",
    )


def _intensity_text(v: float) -> str:
    if math.isinf(v):
        return "∞"
    if v == 0:
        return "0"
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def describe(data: PhasesData) -> str:
    s, st = data.step, data.state
    phase = "decode step" if st.phase == "decode" else "prefill"
    return (
        f"{data.scenario_label}, {phase}, stage {data.index + 1} of {len(data.steps)}: "
        f"{s.what} on the {DEVICE_NAMES[s.device]}: {fmt.bytes_auto(s.bytes)}, "
        f"{_flops(s.flops)}, intensity {_intensity_text(s.intensity)} FLOP/byte, {s.bound}-bound, "
        f"{fmt.seconds(s.seconds)}; running total {fmt.seconds(data.elapsed_s)} of "
        f"{fmt.seconds(data.model_total_s)} ({data.model_fn})."
    )


def _flops(f: float) -> str:
    if f >= 1e12:
        return f"{f / 1e12:,.2f} TFLOP"
    if f >= 1e9:
        return f"{f / 1e9:,.1f} GFLOP"
    if f > 0:
        return f"{f / 1e6:,.1f} MFLOP"
    return "0 FLOP"


# ---------------------------------------------------------------------------------------------------------
# Render
# ---------------------------------------------------------------------------------------------------------
W = 520
BOX_Y, BOX_H, GAP = 8, 92, 16
GAUGE_Y = BOX_Y + BOX_H + 30
STRIP_Y = GAUGE_Y + 98
STRIP_H = 18
GX0, GX1 = 10, W - 10


@dataclass(frozen=True)
class Layout:
    """The wide layout, or the narrow one for a phone (chart.NARROW_W wide, tighter gaps between the boxes)."""

    width: float
    gap: float
    suffix: str  # of element ids ("" or "-n")

    @property
    def gx1(self) -> float:
        return self.width - 10


WIDE = Layout(W, GAP, "")
NARROW = Layout(chart.NARROW_W, 8, "-n")


def _boxes(data: PhasesData, lay: Layout = WIDE) -> Raw:
    devs = data.devices
    n = len(devs)
    bw = (lay.width - 16 - lay.gap * (n - 1)) / n
    parts = []
    for j, d in enumerate(devs):
        x = 8 + j * (bw + lay.gap)
        lit = d.key == data.lit
        title = {"gpu": "GPU", "pcie": "PCIe link", "cpu": "CPU + RAM"}[d.key]
        if d.key == "gpu":
            title += " + " + d.mem
        inner = [
            el("rect", x=x, y=BOX_Y, width=bw, height=BOX_H, rx=6, class_="box"),
            el("text", title, x=x + 8, y=BOX_Y + 18, class_="box-title"),
            el("text", f"{d.bandwidth / 1e9:,.4g} GB/s", x=x + 8, y=BOX_Y + 35, class_="box-sub"),
        ]
        if d.flops:
            inner.append(el("text", f"{d.flops / 1e12:,.4g} TFLOP/s", x=x + 8, y=BOX_Y + 50, class_="box-sub"))
        busy = data.device_s.get(d.key, 0.0)
        inner.append(
            el(
                "text",
                f"busy {fmt.seconds(busy)}",
                x=x + 8,
                y=BOX_Y + 66,
                class_="box-sub",
                **({} if lay.suffix else readout_attrs(f"busy_s_{d.key}", busy)),
            )
        )
        if lit:
            inner.append(el("text", "working", x=x + 8, y=BOX_Y + 84, class_="box-now"))
        parts.append(el("g", inner, class_=f"dev dev-{d.key}" + (" lit" if lit else ""), data_device=d.key))
        if j < n - 1:
            parts.append(el("path", d=f"M{x + bw + 3:.1f} {BOX_Y + BOX_H / 2:.1f} h{lay.gap - 6}", class_="link"))
    return el("g", parts, class_="devices", id_="phases-devices" + lay.suffix)


def _gauge(data: PhasesData, lay: Layout = WIDE) -> Raw:
    """Arithmetic intensity on a log axis, with each device's ridge point; the current stage as a dot."""
    lo_e, hi_e = -1, 4  # 0.1 .. 10,000 FLOP/byte
    gx0, gx1 = GX0, lay.gx1

    def x(v):
        t = (math.log10(min(max(v, 10.0**lo_e), 10.0**hi_e)) - lo_e) / (hi_e - lo_e)
        return gx0 + (gx1 - gx0) * t

    y = GAUGE_Y + 34
    parts = [
        el(
            "text",
            "Arithmetic intensity, FLOP/byte (log)"
            if lay.suffix
            else "Arithmetic intensity, FLOP per byte (log scale)",
            x=gx0,
            y=GAUGE_Y - (12 if lay.suffix else 0),  # narrow: room for a second line of ridge labels
            class_="g-title",
        ),
        el("line", x1=gx0, y1=y, x2=gx1, y2=y, class_="g-axis"),
    ]
    for e in range(lo_e, hi_e + 1):
        v = 10.0**e
        parts.append(el("line", x1=x(v), y1=y - 4, x2=x(v), y2=y + 4, class_="g-tick"))
        parts.append(
            el(
                "text",
                f"{v:,g}",
                x=x(v),
                y=y + 17,
                class_="g-ticklabel",
                text_anchor="start" if e == lo_e else "end" if e == hi_e else "middle",
            )
        )
    ridges = [(d, x(d.ridge)) for d in data.devices if d.ridge is not None]
    # narrow: two ridge labels too close to share a line; the one further right goes one line up
    by_x = sorted(ridges, key=lambda r: r[1])
    label_y = {}
    for k, (d, rx) in enumerate(by_x):
        crowded = lay.suffix and k > 0 and rx - by_x[k - 1][1] < 110
        label_y[d.key] = y - 15 - (13 if crowded and label_y.get(by_x[k - 1][0].key) == y - 15 else 0)
    for d, rx in ridges:
        parts.append(el("line", x1=rx, y1=y - 12, x2=rx, y2=y + 4, class_=f"g-ridge ridge-{d.key}"))
        anchor = "middle"
        if lay.suffix:  # narrow: a label near an edge is anchored inside the chart
            anchor = "start" if rx < gx0 + 50 else "end" if rx > gx1 - 50 else "middle"
        parts.append(
            el(
                "text",
                f"{DEVICE_NAMES[d.key]} ridge {d.ridge:,.0f}",
                x=rx,
                y=label_y[d.key],
                class_=f"g-ridgelabel ridge-{d.key}",
                text_anchor=anchor,
            )
        )
    s = data.step
    v = s.intensity
    if s.flops and s.bytes:
        parts.append(
            el(
                "circle",
                el("title", f"this stage: {_intensity_text(v)} FLOP/byte"),
                cx=x(v),
                cy=y,
                r=6,
                class_=f"g-dot bound-{s.bound}",
            )
        )
    else:
        why = "no bytes read: the weights arrived over PCIe" if s.flops else "no arithmetic: a copy or overhead"
        if lay.suffix:
            why = "no bytes read (weights came over PCIe)" if s.flops else "no arithmetic (a copy or overhead)"
        parts.append(el("text", f"this stage: {why}", x=gx0, y=y + 36, class_="g-note"))
    return el("g", parts, class_="gauge", id_="phases-gauge" + lay.suffix)


def _static(data: PhasesData, name: str, build):
    """A part of the page that depends only on the trace (scenario, phase): built once, reused every frame."""
    key = (name, data.state.scenario, data.state.phase)
    if key not in _CACHE:
        _CACHE[key] = build(data)
    return _CACHE[key]


def _segments(data: PhasesData, lay: Layout = WIDE) -> Raw:
    """A segment per stage on the timeline, coloured by the device that works."""
    segs = [chart.step_segment(s, f"seg-t seg-{box_of(s)}") for s in data.steps]
    total = data.trace_total_s or 1.0
    return join(
        chart.stacked_bar(segs, x0=GX0, y=STRIP_Y, height=STRIP_H, span=lay.gx1 - GX0, total=total, min_width=0.8)
    )


def _strip(data: PhasesData, lay: Layout = WIDE) -> Raw:
    """The phase on one time axis: a segment per stage, coloured by device (built once per scenario and phase);
    the frame's part (in #phases-strip-now) dims the future, outlines the current stage, says the time so far."""
    gx1 = lay.gx1
    span = gx1 - GX0
    return el(
        "g",
        [
            el("text", "Time, to scale", x=GX0, y=STRIP_Y - 8, class_="strip-title"),
            el(
                "text",
                f"total {fmt.seconds(data.model_total_s)}",
                x=gx1,
                y=STRIP_Y - 8,
                class_="strip-total",
                text_anchor="end",
            ),
            el("rect", x=GX0, y=STRIP_Y, width=span, height=STRIP_H, class_="strip-track"),
            _static(data, "segments" + lay.suffix, lambda d: _segments(d, lay)),
            el("g", _strip_now(data, lay), id_="phases-strip-now" + lay.suffix),
        ],
        class_="strip",
    )


def _strip_now(data: PhasesData, lay: Layout = WIDE) -> Raw:
    total = data.trace_total_s or 1.0
    gx1 = lay.gx1
    span = gx1 - GX0
    cx = GX0 + span * data.elapsed_s / total
    cw = span * data.step.seconds / total
    return join(
        [
            el("rect", x=cx, y=STRIP_Y, width=max(gx1 - cx, 0), height=STRIP_H, class_="strip-future"),
            el("rect", x=cx - cw, y=STRIP_Y - 3, width=max(cw, 2), height=STRIP_H + 6, class_="strip-current"),
            chart.edge_label(f"{fmt.seconds(data.elapsed_s)} so far", cx, GX0, gx1, STRIP_Y + STRIP_H + 17),
        ]
    )


def _chart_title(data: PhasesData) -> str:
    return (
        f"{'Decode' if data.state.phase == 'decode' else 'Prefill'}: {data.scenario_label}, "
        f"stage {data.index + 1} of {len(data.steps)}"
    )


def _chart(data: PhasesData, lay: Layout = WIDE) -> Raw:
    h = STRIP_Y + STRIP_H + 26
    return svg(
        [_boxes(data, lay), _gauge(data, lay), _strip(data, lay)],
        width=lay.width,
        height=h,
        title=_chart_title(data),
        desc=describe(data),
        id_="phases-chart" + lay.suffix,
        class_="chart phases-chart",
    )


def _charts(data: PhasesData) -> Raw:
    """Wide, and re-laid out for a phone (the page shows one: chart.responsive)."""
    return chart.responsive(lambda: _chart(data), lambda: _chart(data, NARROW))


def _stage_list(data: PhasesData) -> Raw:
    rows = [
        (
            s.what,
            f"{DEVICE_NAMES[s.device]} · {fmt.bytes_auto(s.bytes)} · {_flops(s.flops)} · "
            f"{_intensity_text(s.intensity)} FLOP/B · {s.bound} · {fmt.seconds(s.seconds)}",
            f"step-dev-{box_of(s)}",
        )
        for s in data.steps  # in order: s.index is the row's
    ]
    return chart.step_list(rows, data.index, label="Stages", id_="phases-steps")


def _table(data: PhasesData) -> Raw:
    """Every stage of the trace (the same for every frame of a scenario and phase, so built once)."""

    def build(data):
        header = ["#", "Stage", "Device", "Bytes", "FLOPs", "FLOP/byte", "Bound", "Seconds", "Running total (s)"]
        rows = [
            [
                str(s.index + 1),
                s.what,
                DEVICE_NAMES[s.device],
                f"{s.bytes:.4g}",
                f"{s.flops:.4g}",
                _intensity_text(s.intensity),
                s.bound,
                f"{s.seconds:.4g}",
                f"{s.elapsed_s:.6g}",
            ]
            for s in data.steps
        ]
        rows.append(["", f"perf_model.{data.model_fn} total", "", "", "", "", "", "", f"{data.model_total_s:.6g}"])
        phase = "decode step" if data.state.phase == "decode" else "prefill"
        caption = (
            f"{data.scenario_label}, {phase}: all {len(data.steps)} stages of "
            f"inference_trace.phase_trace; they add up to perf_model.{data.model_fn}'s "
            f"{fmt.seconds(data.model_total_s)}."
        )
        return data_details(f"Data table ({len(data.steps)} stages)", table(caption, header, rows))

    return _static(data, "table", build)


def _readouts(data: PhasesData) -> Raw:
    s = data.step
    n = len(data.steps)
    return el(
        "dl",
        [
            _readout("stage_index", data.index, f"{data.index + 1} / {n}", "Stage"),
            _readout("stage_device", s.device, DEVICE_NAMES[s.device], "Device"),
            _readout("stage_bytes", s.bytes, fmt.bytes_auto(s.bytes), "Bytes read"),
            _readout("stage_flops", s.flops, _flops(s.flops), "Arithmetic"),
            _readout("intensity", s.intensity, _intensity_text(s.intensity), "Intensity", "FLOP/B"),
            _readout("bound", s.bound, s.bound, "Bound by"),
            _readout("stage_s", s.seconds, fmt.seconds(s.seconds), "This stage"),
            _readout("elapsed_s", data.elapsed_s, fmt.seconds(data.elapsed_s), "Running total"),
            _readout(
                "model_total_s",
                data.model_total_s,
                fmt.seconds(data.model_total_s),
                f"perf_model {data.model_fn}",
            ),
        ],
        class_="readouts",
        id_="phases-readouts",
    )


def _caption(data: PhasesData) -> Raw:
    s = data.step
    ridge = next((d.ridge for d in data.devices if d.key == box_of(s)), None)
    ridge_txt = "" if ridge is None else f" The {DEVICE_NAMES[box_of(s)]}'s ridge point is {ridge:,.0f} FLOP/byte."
    return el(
        "p",
        [el("strong", f"Stage {data.index + 1}: "), s.what, f" ({s.bound}-bound).", ridge_txt],
        class_="step-caption",
        id_="phases-caption",
    )


def _why(data: PhasesData) -> Raw:
    st = data.state
    if st.phase == "decode":
        why = (
            f"Decode at a context of {data.context:,} tokens: one token per pass, so each weight fetched "
            "serves one multiply-add. The intensity stays in single digits, far below every ridge: memory-bound. "
            "Time = bytes ÷ (70% of the device's bandwidth), device after device, plus a fixed launch, sync "
            "and sampling overhead."
        )
    else:
        dense = [x.intensity for x in data.steps if x.bytes and x.flops]
        span = f"{min(dense):,.0f} to {max(dense):,.0f}" if dense else "far above the ridge"
        why = (
            f"Prefill of a {data.n_tokens:,}-token prompt in micro-batches of {data.placement.n_ubatch} "
            f"tokens (-ub): one read of each weight serves every token of the micro-batch, so the intensity "
            f"is {span} FLOP per byte, past the ridge: compute-bound. With a partial offload, llama.cpp "
            "copies the CPU blocks' weights over PCIe once and runs their matmuls on the GPU (op offload)."
        )
    return el("p", why, class_="note")


def patch_key(data: PhasesData) -> str:
    """Frames with the same key share one skeleton (the timeline's segments, the table, the notes)."""
    return f"phases|{data.state.scenario}|{data.state.phase}"


def frame_patch(data: PhasesData) -> dict:
    """What differs between two stages of one scenario and phase, for the glue's applyPatch
    (site/assets/patch.js), for the layouts drawn (chart.LAYOUT: a live frame shows one). Applied to any frame
    with the same key it gives exactly the full render of `data` (tests/test_fig_phases.py)."""
    html = {"phases-caption": chart.inner(_caption(data)), "phases-readouts": chart.inner(_readouts(data))}
    text = {}
    if chart.shows("wide"):
        html |= {
            "phases-devices": chart.inner(_boxes(data)),
            "phases-gauge": chart.inner(_gauge(data)),
            "phases-strip-now": _strip_now(data),
        }
        text |= {"phases-chart-title": _chart_title(data), "phases-chart-desc": describe(data)}
    if chart.shows("narrow"):
        html |= {
            "phases-devices-n": chart.inner(_boxes(data, NARROW)),
            "phases-gauge-n": chart.inner(_gauge(data, NARROW)),
            "phases-strip-now-n": _strip_now(data, NARROW),
        }
        text |= {"phases-chart-n-title": _chart_title(data), "phases-chart-n-desc": describe(data)}
    html["phases-steps"] = chart.inner(_stage_list(data))
    return {
        "key": patch_key(data),
        "html": html,
        "text": text,
        "attrs": {"phases-fig": {"data-step": str(data.index), "data-lit": data.lit}},
    }


def render(data: PhasesData) -> str:
    return el(
        "div",
        [
            _caption(data),
            _readouts(data),
            el("figure", [_charts(data)], class_="chart-wrap"),
            _stage_list(data),
            _static(data, "why", _why),
            _table(data),
        ],
        class_="fig-phases",
        id_="phases-fig",
        data_step=str(data.index),
        data_lit=data.lit,
        data_patch_key=patch_key(data),
    )
