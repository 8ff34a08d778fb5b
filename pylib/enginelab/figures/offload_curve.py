"""Offload break-even: decode speed against -ngl, from all layers in RAM to everything on the GPU.

The module's exercise 2 as a figure. On a machine with several GPUs (the gpus/sm/ts/mg/link keys, as the
calculator's) every -ngl is split over them as llama.cpp would, and the speed includes the hops between them.
For each n from 0 to n_layers + 1 the model is placed with
perf_model.place(..., n_gpu_layers=n) and timed with perf_model.decode_step_time. The auto -ngl is
place(..., n_gpu_layers=None) (what --fit picks); the fit limit is the largest n whose placement fits, and the
points past it are drawn as the allocation failures llama.cpp would report. This module only draws them.
"""

from __future__ import annotations

from dataclasses import dataclass

import perf_model as pm

from .. import chart, fmt, gpus, scenario
from ..state import Choice, Int, Spec
from ..svg import Raw, data_details, el, svg, table

ID = "offload-curve"
TITLE = "Offload break-even: decode speed against -ngl"
LEDE = (
    "Each layer moved to the GPU is read at VRAM speed instead of RAM speed. The layers left in RAM dominate "
    "the time per token, so the curve stays flat for a long time and climbs steeply at the end."
)

CTX_MIN, CTX_MAX = 256, 1 << 20


def _model(p):
    return pm.MODELS[p["model"]]


SPEC = Spec(
    ID,
    [
        Choice("model", "Model", default="qwen2.5-14b", options=lambda p: [(k, m.name) for k, m in pm.MODELS.items()]),
        Choice(
            "machine", "Machine", default="rtx3060", options=lambda p: [(k, m.name) for k, m in pm.MACHINES.items()]
        ),
        *gpus.fields(lambda p: pm.MACHINES[p["machine"]]),  # several GPUs (enginelab.gpus): gpus, sm, ts, mg, link
        Choice("quant", "Quantization", default="Q4_K_M", options=lambda p: pm.quant_options()),
        Choice("kv", "KV cache type (-ctk/-ctv)", default="f16", options=lambda p: [(k, k) for k in pm.KV_TYPES]),
        Int(
            "ctx",
            "Context, n_ctx (-c)",
            default=16384,
            min=CTX_MIN,
            step=256,
            max=lambda p: min(CTX_MAX, max(CTX_MIN, _model(p).max_position_embeddings)),
            help="KV cache allocated at startup: it competes with layers for VRAM.",
        ),
        Int(
            "tokens",
            "Decode at context (tokens)",
            default=2000,
            min=0,
            max=lambda p: p["ctx"],
            step=100,
            help="How much KV each decode step reads.",
        ),
    ],
)


def default_state():
    return SPEC.default()


# ---------------------------------------------------------------------------------------------------------
# Compute
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Point:
    """One -ngl of the sweep."""

    ngl: int
    tok_s: float
    fits: bool
    cpu_share: float
    gpu_gb: float
    cpu_gb: float
    error: str | None


@dataclass(frozen=True)
class Auto:
    """What --fit chose (the calculator's placement)."""

    ngl: int
    tok_s: float
    fits: bool


@dataclass(frozen=True)
class Readouts:
    auto_ngl: int | None = None
    fit_limit: int | None = None
    auto_tok_s: float | None = None
    cpu_tok_s: float | None = None
    full_tok_s: float | None = None


@dataclass(frozen=True)
class OffloadData:
    state: object
    model: pm.Model
    machine: pm.Machine
    error: str | None = None
    points: tuple = ()  # Point per -ngl, 0 .. n_layers + 1
    auto: Auto | None = None
    fit_limit: int | None = None  # the largest -ngl that allocates
    readouts: Readouts = Readouts()


def compute(state) -> OffloadData:
    # the auto (--fit) point is the calculator's Scenario for these settings; the sweep places every other -ngl
    scn = scenario.build(state)
    model, mc = scn.model, scn.machine
    kw = dict(n_ctx=state.ctx, kv_type=state.kv, **gpus.split_args(state.as_dict(), mc))
    points = []
    try:
        if scn.placement is None:
            raise ValueError(scn.error)
        auto = scn.placement
        top = model.n_layers + 1 if mc.gpu is not None else 0
        for n in range(0, top + 1):
            p = auto if n == auto.n_gpu_layers else pm.place(model, mc, state.quant, n_gpu_layers=n, **kw)
            d = pm.decode_step_time(p, mc, context=state.tokens)
            points.append(
                Point(
                    n, d["tok_per_s"], bool(p.fits), d["cpu_share"], p.gpu_total / pm.GB, p.cpu_total / pm.GB, p.error
                )
            )
        auto_d = scn.decode if scn.decode is not None else pm.decode_step_time(auto, mc, context=state.tokens)
    except ValueError as e:
        return OffloadData(state, model, mc, error=str(e), points=tuple(points))
    fitting = [pt.ngl for pt in points if pt.fits]
    fit_limit = max(fitting) if fitting else None
    return OffloadData(
        state,
        model,
        mc,
        points=tuple(points),
        auto=Auto(auto.n_gpu_layers, auto_d["tok_per_s"], bool(auto.fits)),
        fit_limit=fit_limit,
        readouts=Readouts(auto.n_gpu_layers, fit_limit, auto_d["tok_per_s"], points[0].tok_s, points[-1].tok_s),
    )


def describe(data) -> str:
    s, m, mc = data.state, data.model, data.machine
    where = (
        f"{m.name} {pm.quant_short(s.quant)} on {mc.name}, n_ctx {s.ctx:,} ({s.kv} KV), decode at {s.tokens:,} tokens"
    )
    if data.error:
        return f"{where}: not computable: {data.error}"
    pts, r = data.points, data.readouts
    if mc.gpu is None:
        return f"{where}: no GPU, so -ngl has nothing to offload; decode {fmt.rate(pts[0].tok_s)} tok/s from RAM."
    lim = r.fit_limit
    fail = (
        f"; -ngl {lim + 1} and above would fail to allocate"
        if lim is not None and lim < pts[-1].ngl
        else "; every -ngl fits"
        if lim == pts[-1].ngl
        else "; no -ngl fits"
    )
    return (
        f"{where}: decode rises from {fmt.rate(pts[0].tok_s)} tok/s at -ngl 0 to "
        f"{fmt.rate(pts[-1].tok_s)} tok/s at -ngl {pts[-1].ngl}; auto picks -ngl {r.auto_ngl} "
        f"({fmt.rate(r.auto_tok_s)} tok/s){fail}."
    )


# ---------------------------------------------------------------------------------------------------------
# Render
# ---------------------------------------------------------------------------------------------------------
W, H = 720, 400


def _chart(data, narrow: bool = False) -> Raw:
    """Decode tok/s against -ngl. narrow: drawn for a phone (chart.NARROW_W wide, fewer ticks, shorter labels)."""
    s, pts = data.state, data.points
    W, H = (chart.NARROW_W, 280) if narrow else (globals()["W"], globals()["H"])  # noqa: N806
    fr = (
        chart.Frame(W, H, left=38, top=34, right=10, bottom=46)
        if narrow
        else chart.Frame(W, H, left=56, top=34, right=20, bottom=52)
    )
    xmax = max(1, pts[-1].ngl)
    ymax = max(pt.tok_s for pt in pts) * 1.12
    yt = chart.nice_ticks(0, ymax, 5)
    ymax = max(ymax, yt[-1])
    x, y = fr.linear_x(-0.5, xmax + 0.5), fr.linear_y(0, ymax)
    xt = [t for t in chart.nice_ticks(0, xmax, 5 if narrow else 8) if t == int(t)]
    parts = [chart.grid(x, y, [], yt)]
    lim = data.fit_limit
    if lim is not None and lim < xmax:
        parts.append(
            el(
                "rect",
                el("title", f"-ngl {lim + 1} to {xmax}: would fail to allocate"),
                x=x(lim + 0.5),
                y=fr.y0,
                width=x(xmax + 0.5) - x(lim + 0.5),
                height=fr.y1 - fr.y0,
                class_="fail-zone",
            )
        )
        parts.append(
            el(
                "text",
                "fails to allocate" if narrow else "would fail to allocate",
                x=fr.x1 - 4,
                y=fr.y0 + 14,
                text_anchor="end",
                class_="fail-label",
            )
        )
    elif lim is None:
        parts.append(el("rect", x=fr.x0, y=fr.y0, width=fr.x1 - fr.x0, height=fr.y1 - fr.y0, class_="fail-zone"))
    parts += [
        chart.axis(x, at=fr.y1, side="bottom", ticks=xt, fmt=str, label="-ngl (layers on the GPU)"),
        chart.axis(
            y, at=fr.x0, side="left", ticks=yt, fmt=lambda v: f"{v:g}", label="Decode tok/s", label_pos=(8, fr.y0 - 16)
        ),
    ]
    ok = [(x(p.ngl), y(p.tok_s)) for p in pts if p.fits]
    [p for p in pts if p.fits]
    parts.append(el("path", d=chart.path_d(ok), class_="curve curve-fits"))
    # the failing tail, joined to the last point that fits
    tail = [p for p in pts if not p.fits and (lim is None or p.ngl > lim)]
    if tail:
        join_pts = ([(x(lim), y(pts[lim].tok_s))] if lim is not None else []) + [(x(p.ngl), y(p.tok_s)) for p in tail]
        parts.append(el("path", d=chart.path_d(join_pts), class_="curve curve-fail"))
    dots = []
    for p in pts:
        t = f"-ngl {p.ngl}: {fmt.rate(p.tok_s)} tok/s, CPU share {fmt.pct(p.cpu_share)}" + (
            "" if p.fits else " (would fail to allocate)"
        )
        dots.append(
            el(
                "circle",
                el("title", t),
                cx=x(p.ngl),
                cy=y(p.tok_s),
                r=3.2,
                class_="pt" + ("" if p.fits else " pt-fail"),
                data_ngl=str(p.ngl),
                data_tok_s=fmt.raw(p.tok_s),
                data_fits="true" if p.fits else "false",
            )
        )
    parts.append(el("g", dots, class_="points"))
    # markers: auto -ngl and the fit limit
    a = data.auto
    ax, ay = x(a.ngl), y(a.tok_s)
    right = ax > (fr.x0 + fr.x1) / 2
    marks = [
        el("line", x1=ax, y1=fr.y1, x2=ax, y2=ay, class_="auto-line"),
        el("circle", cx=ax, cy=ay, r=6.5, class_="auto-dot", data_auto_ngl=str(a.ngl)),
        el(
            "text",
            f"--fit: -ngl {a.ngl}, {fmt.rate(a.tok_s)} tok/s"
            if narrow
            else f"auto (--fit): -ngl {a.ngl}, {fmt.rate(a.tok_s)} tok/s",
            x=ax + (-10 if right else 10),
            y=ay - 12,
            text_anchor="end" if right else "start",
            class_="auto-label",
        ),
    ]
    if lim is not None and lim < xmax:
        lx = x(lim + 0.5)
        marks += [
            el("line", x1=lx, y1=fr.y0, x2=lx, y2=fr.y1, class_="limit-line", data_fit_limit=str(lim)),
            el(
                "text",
                f"limit {lim}" if narrow else f"fit limit: {lim}",
                x=lx - 4,
                y=fr.y1 - 8,
                text_anchor="end",
                class_="limit-label",
            ),
        ]
    parts.append(el("g", marks, class_="marks"))
    m = data.model
    return svg(
        parts,
        width=W,
        height=H,
        id_="offload-chart-n" if narrow else "offload-chart",
        class_="chart offload-chart",
        title=f"Decode tok/s against -ngl: {m.name} {pm.quant_short(s.quant)} on {data.machine.name}",
        desc=describe(data),
    )


def _readouts(data) -> Raw:
    r, m = data.readouts, data.model
    lim = r.fit_limit
    return el(
        "dl",
        [
            chart.readout(
                "auto_ngl",
                r.auto_ngl,
                "—" if r.auto_ngl is None else f"{r.auto_ngl} / {m.n_layers + 1}",
                "Auto -ngl (--fit)",
            ),
            chart.readout("fit_limit", lim, "none" if lim is None else str(lim), "Largest -ngl that fits"),
            chart.readout("auto_tok_s", r.auto_tok_s, fmt.rate(r.auto_tok_s), "Decode at auto", "tok/s"),
            chart.readout("cpu_tok_s", r.cpu_tok_s, fmt.rate(r.cpu_tok_s), "At -ngl 0", "tok/s"),
            chart.readout(
                "full_tok_s",
                r.full_tok_s,
                fmt.rate(r.full_tok_s),
                f"At -ngl {m.n_layers + 1}" if data.machine.gpu is not None else "Full offload",
                "tok/s",
            ),
        ],
        class_="readouts",
    )


def _query(**kw) -> str:
    return SPEC.to_query(SPEC.coerce(SPEC.default().replace(**kw))[0])


def presets() -> list:
    """(label, query string, hint) for the preset links."""
    return [
        ("Exercise 2 at 8k context", _query(ctx=8192), "Qwen2.5 14B Q4_K_M on the RTX 3060: every -ngl fits"),
        ("… at 32k context", _query(ctx=32768), "A longer context's KV cache takes the VRAM of a dozen layers"),
        ("… 32k with a q8_0 KV cache", _query(ctx=32768, kv="q8_0"), "Halving the cache frees VRAM for layers"),
        ("Qwen2.5 32B on a 16 GB card", _query(model="qwen2.5-32b", machine="rtx4060ti", ctx=8192), ""),
        ("Llama 3.1 70B on an RTX 4090", _query(model="llama-3.1-70b", machine="rtx4090", ctx=8192), ""),
    ]


def _presets() -> Raw:
    return chart.presets_once(SPEC, presets, label="Presets")


def _table(data) -> Raw:
    header = ["-ngl", "Decode tok/s", "CPU share of a step", "VRAM (GB)", "RAM (GB)", "Allocation"]
    rows = [
        [
            str(p.ngl),
            fmt.rate(p.tok_s),
            fmt.pct(p.cpu_share),
            f"{p.gpu_gb:.2f}",
            f"{p.cpu_gb:.2f}",
            ("fits" if p.fits else "would fail") + (" (auto)" if p.ngl == data.auto.ngl else ""),
        ]
        for p in data.points
    ]
    return data_details("Data table", table(describe(data), header, rows))


def render(data) -> str:
    if data.error:
        return el(
            "div",
            [
                _presets(),
                el(
                    "div",
                    [el("strong", "Cannot compute these settings: "), data.error],
                    class_="alert alert-error",
                    role="alert",
                ),
            ],
            class_="offload-curve",
            data_state="error",
        )
    parts = [_presets(), _readouts(data)]
    if data.machine.gpu is None:
        parts.append(
            el(
                "p",
                "This machine has no GPU: every layer runs from system RAM, so -ngl changes nothing.",
                class_="note",
            )
        )
    m = data.model
    parts += [
        el("figure", chart.responsive(lambda: _chart(data), lambda: _chart(data, narrow=True)), class_="chart-wrap"),
        el(
            "p",
            f"-ngl {m.n_layers} puts every block on the GPU; -ngl {m.n_layers + 1} also moves the output "
            "head, which every token reads, hence the last jump.",
            class_="note",
        ),
        chart.course_profile_note(),
        _table(data),
    ]
    return el("div", parts, class_="offload-curve", data_state="ok")
