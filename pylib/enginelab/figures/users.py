"""How many users? Throughput and latency against concurrency, llama-server, vLLM and SGLang side by side.

For each engine and each concurrency C (1, 2, 4, ... 64) enginelab.serving.sim serves a closed-loop load like
`vllm bench serve --max-concurrency C --request-rate inf`: 2C + 8 prompts of `input_len` tokens, `output_len`
tokens each, C of them in flight. llama-server runs -np C slots over one unified context (--kv-unified) of the
model's context length, with the chosen GGUF quant; vLLM and SGLang run their default flags on the checkpoint's
BF16 weights (their start-up memory plans, enginelab.serving_plan, size the KV pool). The "users" each engine
serves is the largest C whose mean TPOT and mean TTFT stay within the SLO; the chart marks it (the knee).

compute(state) returns UsersData: one EngineLine per engine (a point per concurrency, or why it cannot run),
and the readouts by name. This module only arranges and draws them.
"""

from __future__ import annotations

from dataclasses import dataclass

import perf_model as pm

from .. import chart, fmt
from ..serving import sim
from ..state import Choice, Int, Spec
from ..svg import Raw, data_details, el, svg, table

ID = "users"
TITLE = "How many users?"
LEDE = (
    "Batching more requests raises throughput until the GPU runs out of bandwidth headroom, compute or KV "
    "cache; past that, every user waits longer per token. The knee is how many users an engine serves "
    "within a latency target."
)

CONCURRENCY = (1, 2, 4, 8, 16, 32, 64)
ENGINES = ("llama.cpp", "vllm", "sglang")
ENGINE_LABEL = {"llama.cpp": "llama-server", "vllm": "vLLM", "sglang": "SGLang"}

SPEC = Spec(
    ID,
    [
        Choice("model", "Model", default="llama-3.1-8b", options=lambda p: [(k, m.name) for k, m in pm.MODELS.items()]),
        Choice(
            "machine", "Machine", default="rtx4090", options=lambda p: [(k, m.name) for k, m in pm.MACHINES.items()]
        ),
        Choice("quant", "llama-server quant", default="Q4_K_M", options=lambda p: pm.quant_options()),
        Int("input_len", "Prompt tokens", default=512, min=16, max=8192, step=16),
        Int("output_len", "Reply tokens", default=128, min=8, max=2048, step=8),
        Int("slo_tpot", "SLO: mean TPOT (ms)", default=25, min=5, max=1000, step=5),
        Int("slo_ttft", "SLO: mean TTFT (ms)", default=2000, min=50, max=60000, step=50),
    ],
)

State = SPEC.State


def default_state() -> State:
    return SPEC.default()


# ---------------------------------------------------------------------------------------------------------
# Compute
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Point:
    concurrency: int
    output_throughput: float  # tok/s, all users
    mean_ttft_ms: float
    mean_tpot_ms: float
    preemptions: int
    within_slo: bool


@dataclass(frozen=True)
class EngineLine:
    engine: str
    points: tuple[Point, ...] = ()
    error: str | None = None  # why it does not run here (then no points)
    users: int = 0  # the largest concurrency within the SLO (0: not even one)


@dataclass(frozen=True)
class UsersData:
    state: State
    model: pm.Model
    machine: pm.Machine
    lines: tuple[EngineLine, ...]
    readouts: dict


def _placement(state: State, engine: str):
    model, mc = pm.MODELS[state.model], pm.MACHINES[state.machine]
    n_ctx = min(model.max_position_embeddings, 32768)
    quant = state.quant if engine == "llama.cpp" else "BF16"
    return pm.place(model, mc, quant, n_ctx=n_ctx, profile="measured")


def _line(state: State, engine: str) -> EngineLine:
    try:
        p = _placement(state, engine)
        if engine == "llama.cpp" and not p.fits:
            return EngineLine(engine, error=p.error or "the model does not fit")
        points = []
        for c in CONCURRENCY:
            w = sim.Workload(
                num_prompts=2 * c + 8, max_concurrency=c, input_len=state.input_len, output_len=state.output_len
            )
            flags = {"n_parallel": c, "kv_unified": True} if engine == "llama.cpp" else {}
            res = sim.simulate(engine, p, w, **flags)
            m = res.metrics
            ok = m["completed"] > 0 and m["mean_tpot_ms"] <= state.slo_tpot and m["mean_ttft_ms"] <= state.slo_ttft
            points.append(Point(c, m["output_throughput"], m["mean_ttft_ms"], m["mean_tpot_ms"], res.preemptions, ok))
    except ValueError as e:
        return EngineLine(engine, error=str(e))
    users = max((pt.concurrency for pt in points if pt.within_slo), default=0)
    return EngineLine(engine, tuple(points), None, users)


def compute(state: State) -> UsersData:
    lines = tuple(_line(state, e) for e in ENGINES)
    readouts = {}
    for ln in lines:
        if not ln.error:
            key = ln.engine.replace(".", "")
            readouts[f"users_{key}"] = ln.users
            readouts[f"tok_s_{key}"] = max(pt.output_throughput for pt in ln.points)
    return UsersData(state, pm.MODELS[state.model], pm.MACHINES[state.machine], lines, readouts)


def describe(data: UsersData) -> str:
    s = data.state
    where = (
        f"{data.model.name} on {data.machine.name}, {s.input_len:,} prompt and {s.output_len:,} reply tokens, "
        f"SLO TPOT {s.slo_tpot} ms and TTFT {s.slo_ttft:,} ms"
    )
    bits = []
    for ln in data.lines:
        name = ENGINE_LABEL[ln.engine]
        if ln.error:
            bits.append(f"{name} cannot run here")
            continue
        peak = max(ln.points, key=lambda pt: pt.output_throughput)
        bits.append(
            f"{name} serves {ln.users} users within the SLO, peaking at {fmt.rate(peak.output_throughput)} tok/s "
            f"at {peak.concurrency}"
        )
    return f"{where}: " + "; ".join(bits) + "."


# ---------------------------------------------------------------------------------------------------------
# Render
# ---------------------------------------------------------------------------------------------------------
W, H = 720, 330


def _panel(data: UsersData, key: str, narrow: bool) -> Raw:
    """One chart against concurrency (log2 axis): output throughput (key="tok") or mean TPOT (key="tpot")."""
    s = data.state
    w, h = (chart.NARROW_W, 250) if narrow else (W, H)
    fr = (
        chart.Frame(w, h, left=40, top=30, right=62, bottom=44)
        if narrow
        else chart.Frame(w, h, left=58, top=30, right=96, bottom=48)
    )
    lines = [ln for ln in data.lines if not ln.error]
    x = fr.log_x(CONCURRENCY[0], CONCURRENCY[-1])

    def val(pt):
        return pt.output_throughput if key == "tok" else pt.mean_tpot_ms

    top = max([val(pt) for ln in lines for pt in ln.points] + ([s.slo_tpot] if key == "tpot" else []) + [1.0])
    yt = chart.nice_ticks(0, top * 1.08, 5)
    y = fr.linear_y(0, max(top * 1.08, yt[-1]))
    label = "Output tok/s (all users)" if key == "tok" else "Mean TPOT (ms)"
    parts = [
        chart.grid(x, y, CONCURRENCY, yt),
        chart.axis(x, at=fr.y1, side="bottom", ticks=CONCURRENCY, fmt=lambda v: f"{v:g}", label="Concurrent users"),
        chart.axis(y, at=fr.x0, side="left", ticks=yt, fmt=lambda v: f"{v:g}", label=label, label_pos=(8, fr.y0 - 14)),
    ]
    if key == "tpot":
        ys = y(s.slo_tpot)
        parts.append(el("line", x1=fr.x0, y1=ys, x2=fr.x1, y2=ys, class_="slo"))
        parts.append(el("text", f"SLO {s.slo_tpot} ms", x=fr.x0 + 6, y=ys - 5, class_="slo-label"))
    paths, knees, end_ys, end_txt = [], [], [], []
    for ln in lines:
        cls = "eng-" + ln.engine.replace(".", "")
        pts = [(x(pt.concurrency), y(val(pt))) for pt in ln.points]
        paths.append(el("path", el("title", ENGINE_LABEL[ln.engine]), d=chart.path_d(pts), class_=f"curve {cls}"))
        if ln.users:
            pt = next(p for p in ln.points if p.concurrency == ln.users)
            kx, ky = x(pt.concurrency), y(val(pt))
            knees.append(
                el(
                    "circle",
                    el("title", f"{ENGINE_LABEL[ln.engine]}: {ln.users} users within the SLO"),
                    cx=kx,
                    cy=ky,
                    r=5,
                    class_=f"knee {cls}",
                )
            )
        end_ys.append(pts[-1][1] + 4)
        end_txt.append((cls, "llama" if narrow and ln.engine == "llama.cpp" else ENGINE_LABEL[ln.engine]))
    placed = chart.spread_labels(end_ys, 14, fr.y0 + 8, fr.y1 - 4)
    labels = [el("text", t, x=fr.x1 + 6, y=ly, class_=f"end-label {cls}") for (cls, t), ly in zip(end_txt, placed)]
    parts += [el("g", paths, class_="curves"), el("g", knees, class_="knees"), el("g", labels, class_="end-labels")]
    sid = f"users-{key}" + ("-n" if narrow else "")
    title = "Output throughput" if key == "tok" else "Mean time per output token"
    return svg(
        parts,
        width=w,
        height=h,
        id_=sid,
        class_="chart users-chart",
        title=f"{title} against concurrent users: {data.model.name} on {data.machine.name}",
        desc=describe(data),
    )


def _readouts(data: UsersData) -> Raw:
    items = []
    for ln in data.lines:
        if ln.error:
            continue
        key = ln.engine.replace(".", "")
        items.append(chart.readout(f"users_{key}", ln.users, str(ln.users), ENGINE_LABEL[ln.engine], "users"))
    return el("dl", items, class_="readouts")


def _table(data: UsersData) -> Raw:
    header = ["Engine", "Users", "Output tok/s", "Mean TTFT (ms)", "Mean TPOT (ms)", "Preemptions", "Within SLO"]
    rows = []
    for ln in data.lines:
        if ln.error:
            rows.append([ENGINE_LABEL[ln.engine], "", "", "", "", "", f"cannot run: {ln.error}"])
            continue
        for pt in ln.points:
            rows.append(
                [
                    ENGINE_LABEL[ln.engine],
                    str(pt.concurrency),
                    fmt.rate(pt.output_throughput),
                    f"{pt.mean_ttft_ms:,.0f}",
                    f"{pt.mean_tpot_ms:.1f}",
                    str(pt.preemptions),
                    "yes" if pt.within_slo else "no",
                ]
            )
    return data_details("Data table", table(describe(data), header, rows))


def render(data: UsersData) -> str:
    parts = []
    for ln in data.lines:
        if ln.error:
            parts.append(
                el("div", [el("strong", f"{ENGINE_LABEL[ln.engine]}: "), ln.error], class_="alert", role="alert")
            )
    if all(ln.error for ln in data.lines):
        return el("div", parts, class_="users", data_state="error")
    parts += [
        _readouts(data),
        el(
            "figure",
            chart.responsive(lambda: _panel(data, "tok", False), lambda: _panel(data, "tok", True)),
            class_="chart-wrap",
        ),
        el(
            "figure",
            chart.responsive(lambda: _panel(data, "tpot", False), lambda: _panel(data, "tpot", True)),
            class_="chart-wrap",
        ),
        el(
            "p",
            "Simulated with enginelab.serving: each engine's scheduler over its KV manager, every step timed by the "
            "batched forward pass (measured profile). Closed-loop load, like vllm bench serve --max-concurrency. "
            "llama-server runs the chosen GGUF quant; vLLM and SGLang the checkpoint's BF16 weights.",
            class_="note",
        ),
        _table(data),
    ]
    return el("div", parts, class_="users", data_state="ok")
