"""The roofline: how far a weight matmul over a batch of tokens is from a device's compute peak.

Log-log axes: arithmetic intensity (FLOP per byte of weights read) against attainable FLOP/s. Each device is
two lines, the bandwidth slope (intensity x bandwidth) and the flat peak, meeting at the ridge point
I* = peak / bandwidth. The operating point of the chosen batch sits at I = 16 * batch / bpw; the ridge batch is
the batch that reaches I*. Every number comes from perf_model: roofline(), ridge_batch(), quant_bpw() and the
Device objects of perf_model.MACHINES. This module only arranges and draws them.

compute(state) returns a RooflineData: the chosen device's operating point (a RoofPoint, perf_model.roofline's
result), the comparison quantization's, one DeviceLine per device drawn, and the page's Readouts.
"""

from __future__ import annotations

from dataclasses import dataclass

import perf_model as pm

from .. import chart, fmt, page
from ..state import Bool, Choice, Int, Spec
from ..svg import Raw, data_details, el, svg, table

ID = "roofline"
TITLE = "The roofline: device, quantization and batch"
LEDE = (
    "A weight matmul does 2 FLOPs per weight per token in the batch and reads each weight once. Move the "
    "batch to slide the operating point up the bandwidth slope until it meets the compute roof."
)

MAX_BATCH = 4096
NO_MODEL = "none"
NO_VS = "none"


def device_of(machine):
    """The device whose roofline matters for a machine: its GPU, or the CPU with its RAM."""
    return machine.gpu if machine.gpu is not None else machine.ram


def _machine_label(key, mc) -> str:
    d = device_of(mc)
    return d.name if mc.gpu is not None else f"CPU · {d.name}"


def _machines():
    return [(k, _machine_label(k, mc)) for k, mc in pm.MACHINES.items()]


def _also_key(mkey: str) -> str:
    """The overlay checkbox's state key for a machine key (an identifier: "cpu-ddr5" -> "also_cpu_ddr5")."""
    return "also_" + mkey.replace("-", "_").replace(".", "_")


SPEC = Spec(
    ID,
    [
        Choice(
            "machine",
            "Device",
            default="rtx4090",
            options=lambda p: _machines(),
            help="Its ridge point and operating point are marked.",
        ),
        Choice("quant", "Quantization", default="Q4_K_M", options=lambda p: pm.quant_options()),
        Choice(
            "model",
            "Bits per weight from",
            default="llama-3.1-8b",
            options=lambda p: (
                [(NO_MODEL, "the ggml block type alone")]
                + [(k, f"{m.name} (effective bpw)") for k, m in pm.MODELS.items()]
            ),
            help="A model gives the file's average bpw (Q4_K_M mixes in Q6_K tensors).",
        ),
        Int(
            "batch",
            "Batch (tokens per weight read)",
            default=1,
            min=1,
            max=MAX_BATCH,
            widget="number",
            help="Decode streams sharing one pass, or a prefill micro-batch.",
        ),
        Choice(
            "vs",
            "Compare with quantization",
            default=NO_VS,
            options=lambda p: [(NO_VS, "none")] + pm.quant_options(),
        ),
    ]
    + [
        Bool(_also_key(k), label, default=False, visible=lambda p, k=k: p["machine"] != k)  # not the device itself
        for k, label in _machines()
    ],
)

OVERLAY_KEYS = [f.key for f in SPEC.fields if f.key.startswith("also_")]


State = SPEC.State  # this figure's state: machine, quant, model, batch, vs and one also_<machine> per overlay


def default_state() -> State:
    return SPEC.default()


def controls(state) -> str:
    """The generic controls, with the overlay checkboxes grouped under one legend."""
    return page.grouped_controls(SPEC, state, "Overlay devices", lambda key: key.startswith("also_"))


# ---------------------------------------------------------------------------------------------------------
# Compute
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RoofPoint:
    """perf_model.roofline's result for one device, quantization and batch (its fields, typed)."""

    quant: str  # the quantization whose bpw it was computed with
    batch: int
    bpw: float
    intensity: float  # FLOP per byte of weights, 16 * batch / bpw
    ridge_intensity: float  # the device's peak / bandwidth
    attainable_flops: float  # min(peak, intensity x bandwidth)
    peak_flops: float
    bandwidth: float
    utilization: float  # attainable / peak
    bound: str  # memory or compute
    ridge_batch: float  # the batch that reaches the ridge at this bpw

    @classmethod
    def of(cls, quant: str, result: dict) -> RoofPoint:
        """A perf_model.roofline result (a dict) for `quant`; a key this class does not know is an error."""
        return cls(quant=quant, **result)


@dataclass(frozen=True)
class DeviceLine:
    """One device drawn: the chosen one (primary) or an overlay."""

    key: str  # its perf_model.MACHINES key
    label: str
    device: pm.Device  # device_of(machine)
    primary: bool
    ridge_batch: float  # perf_model.ridge_batch for the state's quant (and model)
    op: RoofPoint  # the state's batch on this device


@dataclass(frozen=True)
class Readouts:
    """The page's numbers (data-readout values)."""

    bpw: float
    intensity: float
    attainable_tflops: float
    utilization: float
    bound: str
    ridge_intensity: float
    ridge_batch: float
    intensity_ratio: float | None  # op / vs intensity (None without a comparison)


@dataclass(frozen=True)
class RooflineData:
    state: State
    model: pm.Model | None  # None: bpw of the ggml block type alone
    machine: pm.Machine
    device: pm.Device  # device_of(machine)
    bpw: float
    op: RoofPoint  # the operating point
    ridge_batch: float
    vs: RoofPoint | None  # the comparison quantization at the same batch (None: no comparison)
    devices: tuple[DeviceLine, ...]  # the chosen device and every overlay, in perf_model.MACHINES order
    readouts: Readouts


def compute(state: State) -> RooflineData:
    model = None if state.model == NO_MODEL else pm.MODELS[state.model]
    mc = pm.MACHINES[state.machine]
    dev = device_of(mc)
    bpw = pm.quant_bpw(state.quant, model)
    op = RoofPoint.of(state.quant, pm.roofline(dev, bpw, state.batch))
    rb = pm.ridge_batch(dev, state.quant, model)
    vs = None
    if state.vs != NO_VS:
        vbpw = pm.quant_bpw(state.vs, model)
        vs = RoofPoint.of(state.vs, pm.roofline(dev, vbpw, state.batch))
    devices = []
    for k, m in pm.MACHINES.items():
        if k != state.machine and not getattr(state, _also_key(k)):
            continue
        d = device_of(m)
        devices.append(
            DeviceLine(
                key=k,
                label=_machine_label(k, m),
                device=d,
                primary=k == state.machine,
                ridge_batch=pm.ridge_batch(d, state.quant, model),
                op=RoofPoint.of(state.quant, pm.roofline(d, bpw, state.batch)),
            )
        )
    readouts = Readouts(
        bpw=bpw,
        intensity=op.intensity,
        attainable_tflops=op.attainable_flops / 1e12,
        utilization=op.utilization,
        bound=op.bound,
        ridge_intensity=op.ridge_intensity,
        ridge_batch=rb,
        intensity_ratio=(op.intensity / vs.intensity) if vs else None,
    )
    return RooflineData(
        state=state,
        model=model,
        machine=mc,
        device=dev,
        bpw=bpw,
        op=op,
        ridge_batch=rb,
        vs=vs,
        devices=tuple(devices),
        readouts=readouts,
    )


def _bpw_source(data: RooflineData) -> str:
    return f"{data.model.name} effective bpw" if data.model is not None else "block type bpw"


def describe(data: RooflineData) -> str:
    s, op, d = data.state, data.op, data.device
    text = (
        f"{d.name}, {pm.quant_short(s.quant)} at {data.bpw:.2f} bpw ({_bpw_source(data)}): batch {s.batch} has intensity "
        f"{op.intensity:.3g} FLOP/byte, {op.bound}-bound at {fmt.pct(op.utilization, 1)} of the "
        f"{d.fp16_tflops:g} TFLOP/s peak; the ridge is at {op.ridge_intensity:.3g} FLOP/byte, "
        f"batch {round(data.ridge_batch)}."
    )
    if data.vs:
        v = data.vs
        text += (
            f" {pm.quant_short(v.quant)} at {v.bpw:.2f} bpw has intensity {v.intensity:.3g}: {pm.quant_short(s.quant)} is "
            f"{op.intensity / v.intensity:.2f}x higher."
        )
    others = [x for x in data.devices if not x.primary]
    if others:
        text += " Overlaid: " + "; ".join(f"{x.device.name} ridge batch {round(x.ridge_batch)}" for x in others) + "."
    return text


# ---------------------------------------------------------------------------------------------------------
# Render
# ---------------------------------------------------------------------------------------------------------
W, H = 720, 440


def _domains(data: RooflineData):
    import math

    xs = [data.op.intensity] + ([data.vs.intensity] if data.vs else [])
    xs += [x.op.ridge_intensity for x in data.devices]
    xlo, xhi = chart.LogScale.decades(min(min(xs) / 2, 1.0), max(xs) * 3)
    bws = [x.device.bandwidth for x in data.devices]
    peaks = [x.device.flops for x in data.devices]
    ylo, yhi = chart.LogScale.decades(min(bws) * xlo, max(peaks) * 2)
    # keep the chart readable: at most 6 decades tall (lines below the floor are clipped)
    if math.log10(yhi / ylo) > 6:
        ylo = yhi / 1e6
    return (xlo, xhi), (ylo, yhi)


def _chart(data: RooflineData, narrow: bool = False) -> Raw:
    """The roofline. narrow: drawn for a phone (chart.NARROW_W wide, smaller margins, shorter labels)."""
    s = data.state
    W, H = (chart.NARROW_W, 300) if narrow else (globals()["W"], globals()["H"])  # noqa: N806
    fr = (
        chart.Frame(W, H, left=40, top=30, right=10, bottom=46)
        if narrow
        else chart.Frame(W, H, left=70, top=30, right=24, bottom=52)
    )
    clip = "roofline-plot" + ("-n" if narrow else "")
    (xlo, xhi), (ylo, yhi) = _domains(data)
    x, y = fr.log_x(xlo, xhi), fr.log_y(ylo, yhi)
    parts = [
        fr.clip(clip),
        chart.grid(x, y, x.ticks(), y.ticks()),
        chart.axis(
            x,
            at=fr.y1,
            side="bottom",
            label="FLOP per byte of weights" if narrow else "Arithmetic intensity (FLOP per byte of weights)",
        ),
        chart.axis(y, at=fr.x0, side="left", label="Attainable FLOP/s", label_pos=(8, fr.y0 - 14)),
    ]
    lines, label_ys, label_txt = [], [], []
    ordered = sorted(data.devices, key=lambda v: v.primary)  # primary drawn last, on top
    for dv in ordered:
        d, r = dv.device, dv.op
        pts = [(x(xlo), y(xlo * d.bandwidth)), (x(r.ridge_intensity), y(d.flops)), (x(xhi), y(d.flops))]
        cls = f"roof dev-{dv.key}" + (" roof-primary" if dv.primary else "")
        lines.append(
            el(
                "path",
                el("title", f"{d.name}: {d.bandwidth_gbs:g} GB/s, {d.fp16_tflops:g} TFLOP/s"),
                d=chart.path_d(pts),
                class_=cls,
                data_device=dv.key,
            )
        )
        lines.append(
            el(
                "circle",
                cx=x(r.ridge_intensity),
                cy=y(d.flops),
                r=4 if dv.primary else 3,
                class_=f"ridge-dot dev-{dv.key}",
            )
        )
        label_ys.append(y(d.flops) - 6)
        label_txt.append((dv, f"{d.name} · ridge batch {round(dv.ridge_batch)}"))
    parts.append(el("g", lines, class_="roofs", clip_path=f"url(#{clip})"))
    placed = chart.spread_labels(label_ys, 14, fr.y0 + 10, fr.y1 - 6)
    parts.append(
        el(
            "g",
            [
                el(
                    "text",
                    t,
                    x=fr.x1 - 4,
                    y=ly,
                    text_anchor="end",
                    class_=f"roof-label dev-{dv.key}" + (" roof-label-primary" if dv.primary else ""),
                )
                for (dv, t), ly in zip(label_txt, placed)
            ],
            class_="roof-labels",
        )
    )
    # the primary device's ridge point, and the batch that reaches it
    op, d = data.op, data.device
    rx, ry = x(op.ridge_intensity), y(d.flops)
    rb = round(data.ridge_batch)
    marks = [
        el("line", x1=rx, y1=ry, x2=rx, y2=fr.y1, class_="ridge-line"),
        el(
            "text",
            [
                f"ridge I* = {op.ridge_intensity:.3g} FLOP/B, batch ",
                el("tspan", str(rb), **({} if narrow else {"data_ridge_batch": str(rb)}), class_="ridge-batch"),
            ],
            x=rx + 6,
            y=fr.y1 - 8,
            class_="ridge-label",
            text_anchor="start" if rx < W - (215 if narrow else 260) else "end",
            dx=0 if rx < W - (215 if narrow else 260) else -12,
        ),
    ]

    # operating points
    key = []  # narrow: the points' labels go in a key under the chart, where they cannot collide

    def point(r, cls, text):
        px, py = x(r.intensity), y(r.attainable_flops)
        if narrow:
            ky = H + 10 + 9 * len(key)  # (two entries per point: circle and text)
            key.append(el("circle", cx=fr.x0 - 32, cy=ky - 4, r=5, class_=cls))
            key.append(el("text", text, x=fr.x0 - 22, y=ky, class_=f"{cls}-label"))
            return [el("circle", el("title", text), cx=px, cy=py, r=6, class_=cls)]
        anchor = "start" if px < W - 240 else "end"
        return [
            el("circle", el("title", text), cx=px, cy=py, r=6, class_=cls),
            el(
                "text",
                text,
                x=px + (10 if anchor == "start" else -10),
                y=py + 18 if cls == "op" else py - 10,
                class_=f"{cls}-label",
                text_anchor=anchor,
            ),
        ]

    marks += point(
        op,
        "op",
        f"batch {s.batch} · {pm.quant_short(s.quant)}: {op.intensity:.3g} FLOP/B, {fmt.pct(op.utilization, 1)} of peak",
    )
    if data.vs:
        v = data.vs
        marks += point(v, "op-vs", f"{pm.quant_short(v.quant)}: {v.intensity:.3g} FLOP/B")
    parts.append(el("g", marks, class_="marks"))
    if key:
        parts.append(el("g", key, class_="point-key"))
        H = H + 18 * (len(key) // 2) + 10  # noqa: N806
    return svg(
        parts,
        width=W,
        height=H,
        id_="roofline-chart-n" if narrow else "roofline-chart",
        class_="chart roofline-chart",
        title=f"Roofline of {d.name} for {pm.quant_short(s.quant)} ({data.bpw:.2f} bpw) at batch {s.batch}",
        desc=describe(data),
    )


def _readouts(data: RooflineData) -> Raw:
    r = data.readouts
    items = [
        chart.readout("bpw", r.bpw, f"{r.bpw:.2f}", "Bits per weight"),
        chart.readout("intensity", r.intensity, f"{r.intensity:.3g}", "Intensity", "FLOP/B"),
        chart.readout("attainable_tflops", r.attainable_tflops, f"{r.attainable_tflops:.3g}", "Attainable", "TFLOP/s"),
        chart.readout("utilization", r.utilization, fmt.pct(r.utilization, 1), "Share of peak"),
        chart.readout("bound", r.bound, r.bound, "Bound by"),
        chart.readout("ridge_intensity", r.ridge_intensity, f"{r.ridge_intensity:.3g}", "Ridge point", "FLOP/B"),
        chart.readout("ridge_batch", r.ridge_batch, str(round(r.ridge_batch)), "Ridge batch", "tokens"),
    ]
    if r.intensity_ratio is not None:
        items.append(
            chart.readout(
                "intensity_ratio",
                r.intensity_ratio,
                f"×{r.intensity_ratio:.2f}",
                f"Intensity vs {pm.quant_short(data.vs.quant)}",
            )
        )
    return el("dl", items, class_="readouts")


def _query(**kw) -> str:
    return SPEC.to_query(SPEC.coerce(SPEC.default().replace(**kw))[0])


def presets() -> list:
    """The module's three "Try this" questions as (label, query string, hint)."""
    rb3060 = round(pm.ridge_batch(pm.MACHINES["rtx3060"].gpu, "Q4_K_M", pm.MODELS["llama-3.1-8b"]))
    return [
        (
            "1 · RTX 3060 + Q4_K_M: its ridge batch",
            _query(machine="rtx3060", quant="Q4_K_M", batch=rb3060),
            "The batch at which decode stops being memory-bound",
        ),
        (
            "2 · F16 → Q4_K_M at batch 1",
            _query(quant="Q4_K_M", vs="F16", batch=1),
            "Same FLOPs from fewer bytes: intensity rises about 3.3x",
        ),
        (
            "3 · M4 Max vs RTX 4090",
            _query(machine="m4max", **{_also_key("rtx4090"): True}),
            "Apple silicon reaches its ridge at a much smaller batch",
        ),
    ]


def _presets(data: RooflineData) -> Raw:
    return chart.presets_once(SPEC, presets)


def _table(data: RooflineData) -> Raw:
    header = [
        "Device",
        "Peak FP16 (TFLOP/s)",
        "Bandwidth (GB/s)",
        "Ridge (FLOP/B)",
        "Ridge batch",
        f"Attainable at batch {data.state.batch} (TFLOP/s)",
        "Share of peak",
        "Bound",
    ]
    rows = []
    for dv in data.devices:
        d, r = dv.device, dv.op
        rows.append(
            [
                d.name + (" (fitted)" if getattr(d, "fitted", False) else " (approx.)" if d.approx else ""),
                f"{d.fp16_tflops:g}",
                f"{d.bandwidth_gbs:g}",
                f"{r.ridge_intensity:.3g}",
                str(round(dv.ridge_batch)),
                f"{r.attainable_flops / 1e12:.3g}",
                fmt.pct(r.utilization, 1),
                r.bound,
            ]
        )
    if data.vs:
        v = data.vs
        rows.append(
            [
                f"{data.device.name} with {pm.quant_short(v.quant)} ({v.bpw:.2f} bpw)",
                f"{data.device.fp16_tflops:g}",
                f"{data.device.bandwidth_gbs:g}",
                f"{v.ridge_intensity:.3g}",
                str(round(v.ridge_batch)),
                f"{v.attainable_flops / 1e12:.3g}",
                fmt.pct(v.utilization, 1),
                v.bound,
            ]
        )
    return data_details("Data table", table(describe(data), header, rows))


def render(data: RooflineData) -> str:
    return el(
        "div",
        [
            _presets(data),
            _readouts(data),
            el(
                "figure", chart.responsive(lambda: _chart(data), lambda: _chart(data, narrow=True)), class_="chart-wrap"
            ),
            el(
                "p",
                [
                    "Intensity I = 16 × batch / bpw. Attainable = min(peak, I × bandwidth). "
                    "Compute peaks marked approx. are estimates, and those marked fitted were fitted to the module's "
                    "prefill numbers: neither is a vendor figure."
                ],
                class_="note",
            ),
            chart.course_profile_note(),
            _table(data),
        ],
        class_="roofline",
    )
