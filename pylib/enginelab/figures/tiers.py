"""Memory tiers: where a weight can live on one machine, how big and how fast each place is, and what that
means for one decode token.

For a chosen machine, model and quantization this draws the drive, system RAM, the PCIe link, GPU VRAM and
Apple unified memory on three log scales: capacity, bandwidth, and the time one decode token would take if
every weight it reads streamed from that tier. The bytes one token reads are perf_model's own accounting
(decode_step_time at context 0: every weight except token_embd, experts at their routed share); the time is
bytes / (ETA_DECODE x bandwidth), the module's 70% efficiency applied to every tier alike.

The machine table has no drive capacity: the drive is drawn at DRIVE_GB (an assumption, labelled as one).

compute(state) returns a TiersData: the machine, model, bytes per token, file size and efficiency, and one Tier
per place a weight can live (TIER_ORDER), each with its capacity, bandwidth and time per token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import perf_model as pm

from .. import chart, fmt
from ..chart import readout as _readout  # the data-readout contract, in one place
from ..chart import readout_attrs
from ..state import Choice, Spec
from ..svg import Raw, data_details, el, svg, table

ID = "tiers"
TITLE = "Memory tiers"
LEDE = (
    "Where a weight can live on one machine: how much each tier holds, how fast it reads, and how long one "
    "decode token takes when the weights stream from there."
)

DRIVE_GB = 2000.0  # assumed NVMe capacity (the module's range is 1-4 TB); Machine has no drive size
TIER_ORDER = ("drive", "ram", "pcie", "vram", "unified")
TIER_NAMES = {
    "drive": "NVMe drive",
    "ram": "System RAM",
    "pcie": "PCIe link",
    "vram": "GPU VRAM",
    "unified": "Unified memory",
}


SPEC = Spec(
    ID,
    [
        Choice(
            "machine", "Machine", default="rtx4090", options=lambda p: [(k, m.name) for k, m in pm.MACHINES.items()]
        ),
        Choice("model", "Model", default="llama-3.1-8b", options=lambda p: [(k, m.name) for k, m in pm.MODELS.items()]),
        Choice("quant", "Quantization", default="Q4_K_M", options=lambda p: pm.quant_options()),
    ],
)


State = SPEC.State  # this figure's state: machine, model, quant


def default_state() -> State:
    return SPEC.default()


# ---------------------------------------------------------------------------------------------------------
# Compute
# ---------------------------------------------------------------------------------------------------------
def weights_read_per_token(model, machine, quant) -> float:
    """Weight bytes one decode token reads (context 0), from perf_model.decode_step_time's accounting.

    The sum over devices does not depend on where the layers are placed, so any placement gives it."""
    p = pm.place(model, machine, quant, n_ctx=4096)
    d = pm.decode_step_time(p, p.machine, context=0)
    return d["gpu_weight_bytes"] + d["cpu_weight_bytes"]


@dataclass(frozen=True)
class Tier:
    """One place a weight can live on a machine (drawn even when the machine lacks it, muted)."""

    key: str  # one of TIER_ORDER
    present: bool
    device: str  # what it is on this machine ("" when absent)
    capacity: float | None  # bytes; None for the link and for a tier the machine lacks
    bandwidth: float  # bytes/s; 0 when absent
    absent: str = ""  # why the machine has no such tier
    capacity_assumed: bool = False  # the drive: DRIVE_GB, not a machine-table number
    gpu_share: float | None = None  # unified memory: the share the GPU may use
    token_s: float | None = None  # one decode token with every weight streaming from here (None: absent)
    tok_s: float | None = None  # 1 / token_s
    holds_file: bool | None = None  # the GGUF file fits (None: the tier holds nothing, or is absent)

    @property
    def name(self) -> str:
        return TIER_NAMES[self.key]


@dataclass(frozen=True)
class TiersData:
    state: State
    machine: pm.Machine
    model: pm.Model
    weights_read_bytes: float  # weight bytes one decode token reads (weights_read_per_token)
    file_bytes: float  # the GGUF file (perf_model.file_bytes)
    eta: float  # the efficiency applied to every tier's bandwidth (perf_model.ETA_DECODE)
    tiers: tuple[Tier, ...]  # in TIER_ORDER


def machine_tiers(mc) -> list[Tier]:
    """The five tiers, each with present/absent, device name, capacity (bytes or None) and bandwidth (B/s)."""
    discrete = mc.gpu is not None and not mc.unified
    return [
        Tier(
            key="drive",
            present=True,
            device=f"NVMe, {mc.drive_gbs:g} GB/s sequential read",
            capacity=DRIVE_GB * pm.GB,
            capacity_assumed=True,
            bandwidth=mc.drive_gbs * pm.GB,
        ),
        Tier(
            key="ram",
            present=not mc.unified,
            device=mc.ram.name,
            capacity=mc.ram.mem_bytes,
            bandwidth=mc.ram.bandwidth,
            absent="same pool as unified memory" if mc.unified else "",
        ),
        Tier(
            key="pcie",
            present=discrete,
            device=f"{mc.pcie_gbs:g} GB/s per direction" if discrete else "",
            capacity=None,
            bandwidth=mc.pcie if discrete else 0.0,
            absent="" if discrete else ("no discrete GPU" if mc.unified else "no GPU"),
        ),
        Tier(
            key="vram",
            present=discrete,
            device=mc.gpu.name if discrete else "",
            capacity=mc.gpu.mem_bytes if discrete else None,
            bandwidth=mc.gpu.bandwidth if discrete else 0.0,
            absent="" if discrete else ("the GPU uses unified memory" if mc.unified else "no GPU"),
        ),
        Tier(
            key="unified",
            present=bool(mc.unified),
            device=mc.gpu.name if mc.unified else "",
            capacity=mc.gpu.mem_bytes if mc.unified else None,
            bandwidth=mc.gpu.bandwidth if mc.unified else 0.0,
            gpu_share=mc.gpu_share if mc.unified else None,
            absent="" if mc.unified else "not Apple silicon",
        ),
    ]


def _timed(t: Tier, nbytes: float, eta: float, file_b: float) -> Tier:
    """The tier with its time per token and whether it holds the file."""
    token_s = tok_s = None
    if t.present and t.bandwidth > 0:
        token_s = nbytes / (eta * t.bandwidth)
        tok_s = 1.0 / token_s
    cap = t.capacity
    if t.key == "unified" and cap:
        cap = cap * t.gpu_share  # what the GPU may use of it
    holds = None if (cap is None or not t.present) else file_b <= cap
    return replace(t, token_s=token_s, tok_s=tok_s, holds_file=holds)


def compute(state: State) -> TiersData:
    mc = pm.MACHINES[state.machine]
    model = pm.MODELS[state.model]
    nbytes = weights_read_per_token(model, mc, state.quant)
    file_b = pm.file_bytes(model, state.quant)
    eta = pm.ETA_DECODE
    return TiersData(
        state=state,
        machine=mc,
        model=model,
        weights_read_bytes=nbytes,
        file_bytes=file_b,
        eta=eta,
        tiers=tuple(_timed(t, nbytes, eta, file_b) for t in machine_tiers(mc)),
    )


def describe(data: TiersData) -> str:
    m, mc, s = data.model, data.machine, data.state
    parts = [f"{t.name} {fmt.seconds(t.token_s)}" for t in data.tiers if t.token_s is not None]
    return (
        f"{m.name} {pm.quant_short(s.quant)} reads {fmt.gb(data.weights_read_bytes, 2)} of weights per decode token; on "
        f"{mc.name}, at {data.eta:.0%} of each tier's bandwidth, one token takes: " + ", ".join(parts) + "."
    )


# ---------------------------------------------------------------------------------------------------------
# Render
# ---------------------------------------------------------------------------------------------------------
W = 520
LABEL_W = 104
X0, X1 = LABEL_W + 8, W - 26
ROW_H, BAR_H = 24, 14
PANEL_HEAD = 26
AXIS_H = 10


@dataclass(frozen=True)
class Layout:
    """Where a panel's parts go. The wide layout puts each tier's name left of its bar; the narrow one (for a
    phone, chart.NARROW_W wide) puts the name above the bar, so the bars keep the whole width."""

    width: float
    x0: float  # where bars start
    x1: float  # where the axis ends
    row_h: float
    label_above: bool
    suffix: str  # of element ids ("" or "-n")


WIDE = Layout(W, X0, X1, ROW_H, False, "")
NARROW = Layout(chart.NARROW_W, 8, chart.NARROW_W - 14, 36, True, "-n")


def _decades(lo: float, hi: float) -> tuple[int, int]:
    return math.floor(math.log10(lo)), math.ceil(math.log10(hi))


class LogAxis:
    def __init__(self, lo: float, hi: float, lay: Layout = WIDE):
        a, b = _decades(lo, hi)
        if math.log10(lo) - a < 0.3:  # keep the shortest bar visibly long: a decade of room below it
            a -= 1
        if b <= a:
            b = a + 1
        self.a, self.b = a, b
        self.x0, self.x1 = lay.x0, lay.x1

    def x(self, v: float) -> float:
        t = (math.log10(max(v, 10.0**self.a)) - self.a) / (self.b - self.a)
        return self.x0 + (self.x1 - self.x0) * min(1.0, max(0.0, t))

    def ticks(self):
        return [10.0**e for e in range(self.a, self.b + 1)]


def _gb_tick(v: float) -> str:
    return f"{v:,.0f}" if v >= 1 else f"{v:g}"


def _time_tick(v: float) -> str:
    if v >= 1:
        return f"{v:g} s"
    if v >= 1e-3:
        return f"{v * 1e3:g} ms"
    return f"{v * 1e6:g} µs"


def _panel(
    y0: float,
    title: str,
    axis: LogAxis,
    rows: list,
    tick_text,
    unit_note: str,
    key: str,
    marker=None,
    lay: Layout = WIDE,
) -> tuple[Raw, float]:
    """One log-scale bar panel. rows: (Tier, value or None, label text, readout (name, raw) or None)."""
    X0, X1 = lay.x0, lay.x1  # noqa: N806  (the layout's, for this panel)
    note_below = lay.label_above  # narrow: the unit note on its own line under the title
    parts = [el("text", title, x=0, y=y0 + 16, class_="panel-title")]
    top = y0 + PANEL_HEAD + (16 if note_below else 0)
    bottom = top + lay.row_h * len(rows)
    # gridlines and ticks
    grid = []
    ticks = axis.ticks()
    if lay.label_above and len(ticks) > 5:  # narrow: every other decade, so the labels do not collide
        ticks = ticks[::2]
    for v in ticks:
        x = axis.x(v)
        grid.append(el("line", x1=x, y1=top - 4, x2=x, y2=bottom, class_="grid"))
        # a label at the chart's edge is anchored inside it (the narrow layout has no margin to spare)
        anchor = "start" if x < 24 else ("end" if x > lay.width - 24 else "middle")
        grid.append(el("text", tick_text(v), x=x, y=bottom + 14, class_="tick", text_anchor=anchor))
    if note_below:
        grid.append(el("text", unit_note, x=0, y=y0 + 32, class_="axis-note"))
    else:
        grid.append(el("text", unit_note, x=lay.width - 4, y=y0 + 16, class_="axis-note", text_anchor="end"))
    parts.append(el("g", grid, class_="axis"))
    for i, (t, value, text, readout) in enumerate(rows):
        y = top + i * lay.row_h + (16 if lay.label_above else 0)
        cls = f"tier-row tier-{t.key}" + ("" if t.present else " tier-absent")
        row = [
            el(
                "text",
                t.name,
                x=0 if not lay.label_above else X0,
                y=y + BAR_H - 2 - (16 if lay.label_above else 0),
                class_="row-label",
            )
        ]
        if value is None:
            row.append(el("text", text, x=X0 + 4, y=y + BAR_H - 2, class_="absent-note"))
        else:
            x = axis.x(value)
            row.append(
                el(
                    "rect",
                    el("title", f"{t.name}: {text}"),
                    x=X0,
                    y=y + 1,
                    width=max(x - X0, 1.0),
                    height=BAR_H - 2,
                    class_=f"bar bar-{key}",
                )
            )
            inside = x - X0 > 0.55 * (X1 - X0)
            row.append(
                el(
                    "text",
                    text,
                    x=x - 4 if inside else x + 4,
                    y=y + BAR_H - 2,
                    class_="value" + (" value-inside" if inside else ""),
                    text_anchor="end" if inside else None,
                    **(readout_attrs(*readout) if readout and not lay.suffix else {}),
                )
            )
        parts.append(el("g", row, class_=cls, data_tier=t.key))
    if marker is not None:
        mv, mtext = marker
        mx = axis.x(mv)
        if lay.label_above:  # narrow: the label on the title's line, right-aligned
            label = el("text", mtext, x=lay.width - 4, y=y0 + 16, class_="marker-text", text_anchor="end")
        else:
            label = el(
                "text",
                mtext,
                x=mx + 4 if mx < X1 - 160 else mx - 4,
                y=top - 8,
                class_="marker-text",
                text_anchor=None if mx < X1 - 160 else "end",
            )
        parts.append(
            el(
                "g",
                [el("line", x1=mx, y1=top - 6, x2=mx, y2=bottom + 2, class_="marker-line"), label],
                class_="mark mark-file",
            )
        )
    return el("g", parts, class_=f"panel panel-{key}"), bottom + AXIS_H + 8


def _chart(data: TiersData, lay: Layout = WIDE) -> Raw:
    tiers = data.tiers
    present = [t for t in tiers if t.present]
    caps = [t.capacity / pm.GB for t in present if t.capacity] + [data.file_bytes / pm.GB]
    bws = [t.bandwidth / pm.GB for t in present if t.bandwidth]
    times = [t.token_s for t in present if t.token_s is not None]
    cap_axis = LogAxis(min(caps), max(caps), lay)
    bw_axis = LogAxis(min(bws), max(bws), lay)
    t_axis = LogAxis(min(times), max(times), lay)

    def cap_row(t):
        if not t.present:
            return (t, None, t.absent, None)
        if t.capacity is None:
            return (t, None, "a link: holds nothing", None)
        text = fmt.gb(t.capacity, 0) + (" (assumed)" if t.capacity_assumed else "")
        if t.key == "unified":
            text += f" (GPU {t.gpu_share:.0%})"
        return (t, t.capacity / pm.GB, text, None)

    def bw_row(t):
        if not t.present:
            return (t, None, t.absent, None)
        return (t, t.bandwidth / pm.GB, f"{t.bandwidth / pm.GB:,.4g} GB/s", None)

    def time_row(t):
        if not t.present:
            return (t, None, t.absent, None)
        return (
            t,
            t.token_s,
            f"{fmt.seconds(t.token_s)} · {fmt.rate(t.tok_s)} tok/s",
            (f"token_s_{t.key}", t.token_s),
        )

    y = 0.0
    p1, y = _panel(
        y,
        "Capacity",
        cap_axis,
        [cap_row(t) for t in tiers],
        _gb_tick,
        "GB · log scale",
        "cap",
        marker=(data.file_bytes / pm.GB, f"model file {fmt.gb(data.file_bytes)}"),
        lay=lay,
    )
    p2, y = _panel(y, "Bandwidth", bw_axis, [bw_row(t) for t in tiers], _gb_tick, "GB/s · log scale", "bw", lay=lay)
    p3, y = _panel(
        y,
        "One decode token from each tier",
        t_axis,
        [time_row(t) for t in tiers],
        _time_tick,
        f"{fmt.gb(data.weights_read_bytes, 2)} at {data.eta:.0%} · log scale",
        "time",
        lay=lay,
    )
    s = data.state
    return svg(
        [p1, p2, p3],
        width=lay.width,
        height=round(y),
        title=f"Memory tiers of {data.machine.name}, {data.model.name} {pm.quant_short(s.quant)}",
        desc=describe(data),
        id_="tiers-chart" + lay.suffix,
        class_="chart tiers-chart",
    )


def _table(data: TiersData) -> Raw:
    header = ["Tier", "Device", "Capacity", "Bandwidth (GB/s)", "Holds the model file", "Time per token", "tok/s"]
    rows = []
    for t in data.tiers:
        if not t.present:
            rows.append([t.name, f"not present: {t.absent}", "—", "—", "—", "—", "—"])
            continue
        cap = "—" if t.capacity is None else fmt.gb(t.capacity, 0) + (" (assumed)" if t.capacity_assumed else "")
        holds = "—" if t.holds_file is None else ("yes" if t.holds_file else "no")
        rows.append(
            [
                t.name,
                t.device,
                cap,
                f"{t.bandwidth / pm.GB:,.4g}",
                holds,
                fmt.seconds(t.token_s),
                fmt.rate(t.tok_s),
            ]
        )
    return data_details("Data table", table(describe(data), header, rows))


def render(data: TiersData) -> str:
    m = data.model
    fastest = min((t for t in data.tiers if t.token_s is not None), key=lambda t: t.token_s)
    readouts = el(
        "dl",
        [
            _readout(
                "weights_read_bytes",
                data.weights_read_bytes,
                fmt.gb_num(data.weights_read_bytes, 2),
                "Weights read per token",
                "GB",
            ),
            _readout("file_bytes", data.file_bytes, fmt.gb_num(data.file_bytes, 2), "GGUF file", "GB"),
            _readout("eta", data.eta, fmt.pct(data.eta), "Assumed efficiency (of peak bandwidth)"),
            _readout("best_tok_s", fastest.tok_s, fmt.rate(fastest.tok_s), f"Best case ({fastest.name})", "tok/s"),
        ],
        class_="readouts",
    )
    note = el(
        "p",
        [
            "Every weight except the token embedding table (",
            el("code", "token_embd"),
            ", read one row at a time) is read once per token",
            " (for a mixture of experts, only the routed share)" if m.is_moe else "",
            f". Time per token = bytes ÷ ({data.eta:.0%} × bandwidth). The drive's capacity is an assumption "
            f"({DRIVE_GB / 1000:g} TB); the machine table lists only its read speed.",
        ],
        class_="note",
    )
    return el(
        "div",
        [
            readouts,
            el("figure", [chart.responsive(lambda: _chart(data), lambda: _chart(data, NARROW))], class_="chart-wrap"),
            note,
            _table(data),
        ],
        class_="fig-tiers",
    )
