"""Decode speed against context, one line per KV-cache type.

Every decode step reads the weights once and the whole KV cache once, so as the context grows the cache's
share of the bytes grows with it. For each chosen KV type the model is placed with perf_model.place (auto -ngl
for that type and n_ctx) and timed along the context with inference_trace.decode_curve. The marker on each
line is the first context at which the KV bytes read per token reach the weight bytes read per token
(perf_model.kv_cache_bytes against decode_curve's weight_bytes). This module only arranges and draws them.

compute(state) returns a DecodeCurveData: one KvLine per chosen KV type (its placement's -ngl, its curve as
CurvePoints, where the KV reaches the weights), the contexts sampled, and the readouts by name.
"""

from __future__ import annotations

from dataclasses import dataclass

import inference_trace as it
import perf_model as pm

from .. import chart, fmt
from ..state import Bool, Choice, Int, Spec
from ..svg import Raw, data_details, el, svg, table

ID = "decode-curve"
TITLE = "Decode speed as the context grows"
LEDE = (
    "Each new token reads every weight and every cached key and value. At short context the weights "
    "dominate; at long context the KV cache catches up, and a smaller cache type keeps decode faster."
)

CTX_MIN, CTX_MAX = 1024, 1 << 20
N_SAMPLES = 32  # segments along the context axis (the curve is smooth; fewer calls keep input snappy)
TABLE_EVERY = 4  # data-table rows: every 4th sample


def _model(p):
    return pm.MODELS[p["model"]]


def _kv_key(kv: str) -> str:
    return "kv_" + kv


KV_ON = ("f16", "q8_0", "q4_0")  # shown by default

SPEC = Spec(
    ID,
    [
        Choice("model", "Model", default="llama-3.1-8b", options=lambda p: [(k, m.name) for k, m in pm.MODELS.items()]),
        Choice(
            "machine", "Machine", default="rtx4090", options=lambda p: [(k, m.name) for k, m in pm.MACHINES.items()]
        ),
        Choice("quant", "Quantization", default="Q4_K_M", options=lambda p: pm.quant_options()),
        Int(
            "ctx",
            "Context, n_ctx (-c)",
            step=1024,
            min=CTX_MIN,
            default=lambda p: min(65536, max(CTX_MIN, _model(p).max_position_embeddings)),
            max=lambda p: min(CTX_MAX, max(CTX_MIN, _model(p).max_position_embeddings)),
            help="The cache allocated, and the right end of the curve.",
        ),
    ]
    + [Bool(_kv_key(k), f"KV {k}", default=k in KV_ON) for k in pm.KV_TYPES],
)

KV_FIELDS = [f.key for f in SPEC.fields if f.key.startswith("kv_")]


State = SPEC.State  # this figure's state: model, machine, quant, ctx and one kv_<type> per KV cache type


def default_state() -> State:
    return SPEC.default()


def controls(state) -> str:
    """The generic controls, with one checkbox per KV cache type grouped under one legend."""
    from .. import page

    return page.grouped_controls(SPEC, state, "KV cache types (-ctk/-ctv)", lambda key: key.startswith("kv_"))


# ---------------------------------------------------------------------------------------------------------
# Compute
# ---------------------------------------------------------------------------------------------------------
def kv_equals_weights_context(model, kv_type: str, weight_bytes: float, limit: int = 1 << 24):
    """The first context (tokens) at which the KV cache read per token is at least `weight_bytes`, or None
    if it never gets there below `limit` (sliding-window layers stop growing at their window)."""
    if pm.kv_cache_bytes(model, limit, kv_type) < weight_bytes:
        return None
    lo, hi = 0, limit  # kv(lo) < W <= kv(hi); kv is nondecreasing in the context
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pm.kv_cache_bytes(model, mid, kv_type) >= weight_bytes:
            hi = mid
        else:
            lo = mid
    return hi


def contexts(n_ctx: int) -> list:
    return sorted({round(n_ctx * i / N_SAMPLES) for i in range(N_SAMPLES + 1)})


@dataclass(frozen=True)
class CurvePoint:
    """One point of inference_trace.decode_curve (its fields, typed)."""

    context: int  # tokens in the KV cache
    tok_s: float
    total_s: float  # one decode step
    cpu_share: float
    kv_bytes: float  # KV cache bytes read per token
    weight_bytes: float  # weight bytes read per token

    @classmethod
    def of(cls, point: dict) -> CurvePoint:
        """A decode_curve point (a dict) as a CurvePoint; a key this class does not know is an error."""
        return cls(**point)


@dataclass(frozen=True)
class KvLine:
    """One KV cache type: placed with auto -ngl for it and n_ctx, then timed along the context."""

    kv: str  # the KV cache type (-ctk/-ctv)
    ngl: int  # the placement's n_gpu_layers
    fits: bool
    error: str | None = None  # why it does not load (then there is no curve)
    curve: tuple[CurvePoint, ...] = ()  # at every one of the data's contexts
    weight_bytes: float | None = None  # weights read per token (the curve's, context 0)
    cross: int | None = None  # the first context whose KV read per token reaches weight_bytes (None: never)
    cross_in_range: bool = False  # cross <= n_ctx: the marker is drawn
    cross_tok_s: float | None = None  # decode tok/s at cross, when in range


@dataclass(frozen=True)
class DecodeCurveData:
    state: State
    model: pm.Model
    machine: pm.Machine
    lines: tuple[KvLine, ...]  # the chosen KV types, in perf_model.KV_TYPES order
    error: str | None  # perf_model rejected the settings (then lines stop at the type that failed)
    contexts: tuple[int, ...]  # the context samples, 0 .. n_ctx
    readouts: dict[str, float | int | None]  # tok_s_<kv> and cross_<kv> for every line that loads


def compute(state: State) -> DecodeCurveData:
    model, mc = pm.MODELS[state.model], pm.MACHINES[state.machine]
    chosen = [k for k in pm.KV_TYPES if getattr(state, _kv_key(k))]
    ctxs = tuple(contexts(state.ctx))
    lines, error = [], None
    for kv in chosen:
        try:
            p = pm.place(model, mc, state.quant, n_ctx=state.ctx, kv_type=kv)
        except ValueError as e:
            error = str(e)
            break
        if not p.fits:
            lines.append(KvLine(kv=kv, ngl=p.n_gpu_layers, fits=False, error=p.error))
            continue
        curve = tuple(CurvePoint.of(c) for c in it.decode_curve(p, mc, list(ctxs)))
        w = curve[0].weight_bytes
        c = kv_equals_weights_context(model, kv, w)
        in_range = c is not None and c <= state.ctx
        lines.append(
            KvLine(
                kv=kv,
                ngl=p.n_gpu_layers,
                fits=True,
                curve=curve,
                weight_bytes=w,
                cross=c,
                cross_in_range=in_range,
                cross_tok_s=it.decode_curve(p, mc, [c])[0]["tok_s"] if in_range else None,
            )
        )
    ok = [ln for ln in lines if not ln.error]
    readouts = {f"tok_s_{ln.kv}": ln.curve[-1].tok_s for ln in ok}
    readouts |= {f"cross_{ln.kv}": ln.cross for ln in ok}
    return DecodeCurveData(
        state=state, model=model, machine=mc, lines=tuple(lines), error=error, contexts=ctxs, readouts=readouts
    )


def describe(data: DecodeCurveData) -> str:
    s, m = data.state, data.model
    where = f"{m.name} {pm.quant_short(s.quant)} on {data.machine.name}, n_ctx {s.ctx:,}"
    if data.error:
        return f"{where}: not computable: {data.error}"
    if not data.lines:
        return f"{where}: no KV cache type chosen."
    bits = []
    for ln in data.lines:
        if ln.error:
            bits.append(f"{ln.kv} does not fit ({ln.error})")
            continue
        c0, c1 = ln.curve[0], ln.curve[-1]
        cross = f"KV equals weights at {ln.cross:,} tokens" if ln.cross is not None else "KV never reaches the weights"
        bits.append(f"{ln.kv}: {fmt.rate(c0.tok_s)} tok/s empty, {fmt.rate(c1.tok_s)} at {c1.context:,}, {cross}")
    return f"{where}. " + "; ".join(bits) + "."


# ---------------------------------------------------------------------------------------------------------
# Render
# ---------------------------------------------------------------------------------------------------------
W, H = 720, 420


def _ctx_label(v) -> str:
    return "0" if v == 0 else f"{v / 1024:g}k" if v % 1024 == 0 else f"{v:,}"


def _chart(data: DecodeCurveData, narrow: bool = False) -> Raw:
    """Decode tok/s against context, a line per KV type. narrow: drawn for a phone (chart.NARROW_W wide)."""
    s = data.state
    W, H = (chart.NARROW_W, 290) if narrow else (globals()["W"], globals()["H"])  # noqa: N806
    lines = [ln for ln in data.lines if not ln.error]
    fr = (
        chart.Frame(W, H, left=38, top=34, right=44, bottom=46)
        if narrow
        else chart.Frame(W, H, left=56, top=34, right=64, bottom=52)
    )
    x = fr.linear_x(0, s.ctx)
    top = max(ln.curve[0].tok_s for ln in lines) * 1.1
    yt = chart.nice_ticks(0, top, 5)
    y = fr.linear_y(0, max(top, yt[-1]))
    xt = chart.nice_ticks(0, s.ctx, 4 if narrow else 8, base=1024)
    parts = [
        chart.grid(x, y, xt, yt),
        chart.axis(
            x,
            at=fr.y1,
            side="bottom",
            ticks=xt,
            fmt=_ctx_label,
            label="Context (tokens)" if narrow else "Context (tokens in the KV cache)",
        ),
        chart.axis(
            y, at=fr.x0, side="left", ticks=yt, fmt=lambda v: f"{v:g}", label="Decode tok/s", label_pos=(8, fr.y0 - 16)
        ),
    ]
    paths, marks, end_ys, end_txt = [], [], [], []
    for ln in lines:
        cls = f"kv-{ln.kv}"
        pts = [(x(c.context), y(c.tok_s)) for c in ln.curve]
        paths.append(
            el(
                "path",
                el("title", f"KV {ln.kv} (-ngl {ln.ngl})"),
                d=chart.path_d(pts),
                class_=f"curve {cls}",
                data_kv=ln.kv,
            )
        )
        end_ys.append(pts[-1][1] + 4)
        end_txt.append((cls, ln.kv))
        if ln.cross_in_range:
            cx, cy = x(ln.cross), y(ln.cross_tok_s)
            marks.append(
                el(
                    "path",
                    el(
                        "title",
                        f"KV {ln.kv}: the cache read per token equals the weights "
                        f"({fmt.gb(ln.weight_bytes, 2)}) at {ln.cross:,} tokens",
                    ),
                    d=f"M{cx:.2f},{cy - 7:.2f}l7,7l-7,7l-7,-7z",
                    class_=f"cross {cls}",
                    data_kv=ln.kv,
                    data_cross=str(ln.cross),
                )
            )
    placed = chart.spread_labels(end_ys, 14, fr.y0 + 8, fr.y1 - 4)
    labels = [el("text", t, x=fr.x1 + 6, y=ly, class_=f"end-label {cls}") for (cls, t), ly in zip(end_txt, placed)]
    parts += [el("g", paths, class_="curves"), el("g", marks, class_="marks"), el("g", labels, class_="end-labels")]
    legend = el(
        "text",
        "◆ KV read = weights read" if narrow else "◆ KV bytes per token = weight bytes per token",
        x=fr.x0 + 8,
        y=fr.y1 - 10,
        class_="cross-legend",
    )
    parts.append(legend)
    m = data.model
    return svg(
        parts,
        width=W,
        height=H,
        id_="decode-curve-chart-n" if narrow else "decode-curve-chart",
        class_="chart decode-curve-chart",
        title=f"Decode tok/s against context: {m.name} {pm.quant_short(s.quant)} on {data.machine.name}",
        desc=describe(data),
    )


def _readouts(data: DecodeCurveData) -> Raw:
    s = data.state
    items = []
    for ln in data.lines:
        if ln.error:
            continue
        kv = ln.kv
        items.append(
            chart.readout(
                f"tok_s_{kv}",
                ln.curve[-1].tok_s,
                fmt.rate(ln.curve[-1].tok_s),
                f"{kv} at {_ctx_label(s.ctx)}",
                "tok/s",
            )
        )
        c = ln.cross
        items.append(
            chart.readout(
                f"cross_{kv}",
                c,
                "never" if c is None else f"{c:,}",
                f"{kv} KV = weights at",
                "tok" if c is not None else "",
            )
        )
    return el("dl", items, class_="readouts")


def _query(**kw) -> str:
    base = {k: False for k in KV_FIELDS}  # each preset names the KV types it shows
    base.update(kw)
    return SPEC.to_query(SPEC.coerce(SPEC.default().replace(**base))[0])


def presets() -> list:
    """(label, query string, hint) for the preset links."""
    return [
        (
            "Module example: f16 vs q8_0",
            _query(kv_f16=True, kv_q8_0=True),
            "Llama 3.1 8B Q4_K_M on the RTX 4090 to 64k",
        ),
        (
            "Qwen2.5 14B on the RTX 3060 at 32k",
            _query(model="qwen2.5-14b", machine="rtx3060", ctx=32768, kv_f16=True, kv_q8_0=True),
            "With f16 fewer layers fit, so decode starts lower",
        ),
        (
            "Gemma 2 9B (sliding window)",
            _query(model="gemma-2-9b", ctx=8192, kv_f16=True, kv_q8_0=True, kv_q4_0=True),
            "Half the layers keep only a 4,096-token window",
        ),
        (
            "Qwen3 30B-A3B (MoE)",
            _query(model="qwen3-30b-a3b", ctx=40960, kv_f16=True, kv_q8_0=True),
            "Few active weights: the cache overtakes them early",
        ),
    ]


def _presets() -> Raw:
    return chart.presets_once(SPEC, presets, label="Presets")


def _table(data: DecodeCurveData) -> Raw:
    lines = [ln for ln in data.lines if not ln.error]
    header = ["Context"] + [f"{ln.kv} tok/s" for ln in lines] + [f"{ln.kv} KV (GB)" for ln in lines]
    rows = []
    for i in range(0, len(data.contexts), TABLE_EVERY):
        c = data.contexts[i]
        rows.append(
            [f"{c:,}"]
            + [fmt.rate(ln.curve[i].tok_s) for ln in lines]
            + [f"{ln.curve[i].kv_bytes / 1e9:.2f}" for ln in lines]
        )
    if lines:
        rows.append(
            ["Weights read per token (GB)"] + [f"{ln.weight_bytes / 1e9:.2f}" for ln in lines] + [""] * len(lines)
        )
        rows.append(["-ngl (auto)"] + [str(ln.ngl) for ln in lines] + [""] * len(lines))
    return data_details("Data table", table(describe(data), header, rows))


def render(data: DecodeCurveData) -> str:
    parts = [_presets()]
    if data.error:
        parts.append(
            el(
                "div",
                [el("strong", "Cannot compute these settings: "), data.error],
                class_="alert alert-error",
                role="alert",
            )
        )
        return el("div", parts, class_="decode-curve", data_state="error")
    if not data.lines:
        parts.append(el("div", "Choose at least one KV cache type to draw.", class_="alert", role="alert"))
        return el("div", parts, class_="decode-curve", data_state="empty")
    for ln in data.lines:
        if ln.error:
            parts.append(
                el(
                    "div",
                    [el("strong", f"KV {ln.kv}: "), f"does not fit: {ln.error}"],
                    class_="alert",
                    role="alert",
                )
            )
    if not any(not ln.error for ln in data.lines):
        return el("div", parts, class_="decode-curve", data_state="error")
    parts += [
        _readouts(data),
        el("figure", chart.responsive(lambda: _chart(data), lambda: _chart(data, narrow=True)), class_="chart-wrap"),
        chart.course_profile_note(),
        _table(data),
    ]
    return el("div", parts, class_="decode-curve", data_state="ok")
