"""How many users? Throughput and latency against concurrency, llama-server, vLLM and SGLang side by side.

For each engine and each concurrency C (1, 2, 4, ... 64) enginelab.serving.sim serves a closed-loop load like
`vllm bench serve --max-concurrency C --request-rate inf`: 2C + 8 prompts of `input_len` tokens, `output_len`
tokens each, C of them in flight (advisor.load). llama-server runs -np slots (one per user unless `np` is given)
over one unified context (--kv-unified) of `ctx` tokens, with the chosen GGUF quant; vLLM and SGLang run their
default flags on the checkpoint's BF16 weights with --max-model-len / --context-length `ctx` (their start-up memory
plans, enginelab.serving_plan, size the KV pool). The "users" each engine serves is the largest C whose mean TPOT
and mean TTFT stay within the SLO; the charts mark it (the knee). Under the charts, for each engine, why its
throughput stops growing (advisor.load: a concurrency cap, the KV pool, or compute), and a time-lapse of one
engine's KV pool at one concurrency: FRAMES grids of the simulation's sampled KV use. The machines are the
catalog's and the A100 and H100 80 GB of the published serving runs (machines()), on which the simulation is
validated.

compute(state) returns UsersData: one EngineLine per engine (a point per concurrency, or why it cannot run), the
time-lapse and the readouts by name. This module only arranges and draws them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import perf_model as pm

from .. import chart, fmt
from ..advisor import load
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
CTX_MIN, CTX_DEFAULT = 256, 32768
FRAMES = 8  # time-lapse frames
GRID_COLS, GRID_ROWS = 16, 8  # cells per time-lapse frame; one cell is 1/128 of the pool


def _model(p):
    return pm.MODELS.get(p.get("model"), pm.MODELS["llama-3.1-8b"])


def machines() -> dict:
    """The catalog's machines and the published serving runs' datacenter GPUs (A100 and H100 80 GB, as
    enginelab.serving.validate simulates those runs on them)."""
    from ..serving import validate

    return {**pm.MACHINES, **validate.server_machines()}


def _ctx_max(p) -> int:
    return max(CTX_MIN, _model(p).max_position_embeddings)


SPEC = Spec(
    ID,
    [
        Choice("model", "Model", default="llama-3.1-8b", options=lambda p: [(k, m.name) for k, m in pm.MODELS.items()]),
        Choice("machine", "Machine", default="rtx4090", options=lambda p: [(k, m.name) for k, m in machines().items()]),
        Choice("quant", "llama-server quant", default="Q4_K_M", options=lambda p: pm.quant_options()),
        Int(
            "ctx",
            "Context, n_ctx (-c) / --max-model-len",
            default=lambda p: min(CTX_DEFAULT, _ctx_max(p)),
            min=CTX_MIN,
            max=_ctx_max,
            step=256,
            special=((0, "the model's trained context, as -c 0"),),
            help="llama-server: the KV cells all its slots share (-c with --kv-unified). vLLM and SGLang: the "
            "longest request (--max-model-len, --context-length); their pool is what memory leaves.",
        ),
        Int(
            "np",
            "llama-server slots (-np)",
            default=0,
            min=1,
            max=64,
            special=((0, "one slot per user"),),
            help="0: as many slots as users. A fixed number caps the requests llama-server runs at once.",
        ),
        Int("input_len", "Prompt tokens", default=512, min=16, max=8192, step=16),
        Int("output_len", "Reply tokens", default=128, min=8, max=2048, step=8),
        Int("slo_tpot", "SLO: mean TPOT (ms)", default=25, min=5, max=1000, step=5),
        Int("slo_ttft", "SLO: mean TTFT (ms)", default=2000, min=50, max=60000, step=50),
        Choice("kv_engine", "Time-lapse: engine", default="vllm", options=[(e, ENGINE_LABEL[e]) for e in ENGINES]),
        Choice("kv_users", "Time-lapse: users", default="64", options=[(str(c), str(c)) for c in CONCURRENCY]),
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
    flat_at: int = 0  # the first concurrency where doubling the users adds < load.FLAT_GAIN (0: none)
    cause: str = ""  # what limits the throughput there, or at the last point: load.CAUSES
    why: str = ""  # the cause, as a sentence
    cap: int = 0  # requests the engine runs at once
    pool: int = 0  # KV cells (tokens) in its pool


@dataclass(frozen=True)
class TimeLapse:
    engine: str
    users: int
    pool: int
    duration_s: float
    frames: tuple  # ((time_s, cells used), ...): FRAMES samples, evenly spaced in time
    preemptions: int
    error: str | None = None


@dataclass(frozen=True)
class UsersData:
    state: State
    model: pm.Model
    machine: pm.Machine
    lines: tuple[EngineLine, ...]
    timelapse: TimeLapse
    readouts: dict


def n_ctx(state: State) -> int:
    m = pm.MODELS[state.model]
    return m.max_position_embeddings if state.ctx == 0 else min(state.ctx, m.max_position_embeddings)


def _flags(state: State, engine: str, c: int) -> dict:
    return {"n_parallel": state.np or c, "kv_unified": True} if engine == "llama.cpp" else {}


@lru_cache(maxsize=8)
def _placement(model: str, machine: str, quant: str, ctx: int):
    return pm.place(pm.MODELS[model], machines()[machine], quant, n_ctx=ctx, profile="measured")


def placement(state: State, engine: str):
    return _placement(state.model, state.machine, state.quant if engine == "llama.cpp" else "BF16", n_ctx(state))


@lru_cache(maxsize=256)
def _run(engine: str, model: str, machine: str, quant: str, ctx: int, np: int, c: int, il: int, ol: int):
    """(LoadPoint, kv_use, pool, duration_s) of one simulation, memoised: an SLO or time-lapse change re-runs none."""
    p = _placement(model, machine, quant, ctx)
    flags = {"n_parallel": np or c, "kv_unified": True} if engine == "llama.cpp" else {}
    pt, res = load.run(engine, p, c, il, ol, **flags)
    return pt, tuple(res.kv_use), res.pool_tokens, res.metrics["duration_s"]


def run(state: State, engine: str, c: int):
    quant = state.quant if engine == "llama.cpp" else "BF16"
    key = (engine, state.model, state.machine, quant, n_ctx(state), state.np, c, state.input_len, state.output_len)
    return _run(*key)


def _line(state: State, engine: str) -> EngineLine:
    try:
        p = placement(state, engine)
        if engine == "llama.cpp" and not p.fits:
            return EngineLine(engine, error=p.error or "the model does not fit")
        runs = [run(state, engine, c) for c in CONCURRENCY]
    except ValueError as e:
        return EngineLine(engine, error=str(e))
    lps = [r[0] for r in runs]
    pool = runs[-1][2]
    points = tuple(
        Point(
            q.concurrency,
            q.output_throughput,
            q.mean_ttft_ms,
            q.mean_tpot_ms,
            q.preemptions,
            q.completed > 0 and q.mean_tpot_ms <= state.slo_tpot and q.mean_ttft_ms <= state.slo_ttft,
        )
        for q in lps
    )
    users = max((pt.concurrency for pt in points if pt.within_slo), default=0)
    i = load.first_flat(lps)
    j = i if i is not None else len(lps) - 1
    at = lps[j]
    flags = _flags(state, engine, at.concurrency)
    cap = load.running_cap(engine, p, **flags)
    cause = load.cause_of(engine, p, lps[j - 1], at, state.input_len, state.output_len, pool, **flags)
    why = load.cause_text(engine, cause, at, cap, pool, state.input_len + state.output_len)
    return EngineLine(engine, points, None, users, at.concurrency if i is not None else 0, cause, why, cap, pool)


def timelapse_of(state: State) -> TimeLapse:
    e, c = state.kv_engine, int(state.kv_users)
    try:
        p = placement(state, e)
        if e == "llama.cpp" and not p.fits:
            return TimeLapse(e, c, 0, 0.0, (), 0, p.error or "the model does not fit")
        pt, kv_use, pool, dur = run(state, e, c)
    except ValueError as err:
        return TimeLapse(e, c, 0, 0.0, (), 0, str(err))
    return TimeLapse(e, c, pool, dur, frames_of(kv_use, dur, FRAMES), pt.preemptions)


def frames_of(kv_use, duration: float, n: int) -> tuple:
    """n samples of kv_use ((time_s, cells), in time order) at the ends of n equal slices of the run: the last
    sample at or before each slice's end time."""
    if not kv_use:
        return ()
    out, j = [], 0
    for k in range(1, n + 1):
        t = duration * k / n
        while j + 1 < len(kv_use) and kv_use[j + 1][0] <= t * (1 + 1e-12):
            j += 1
        out.append(kv_use[j])
    return tuple(out)


def compute(state: State) -> UsersData:
    lines = tuple(_line(state, e) for e in ENGINES)
    readouts = {}
    for ln in lines:
        if not ln.error:
            key = ln.engine.replace(".", "")
            readouts[f"users_{key}"] = ln.users
            readouts[f"tok_s_{key}"] = max(pt.output_throughput for pt in ln.points)
    return UsersData(state, pm.MODELS[state.model], machines()[state.machine], lines, timelapse_of(state), readouts)


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
W, H = 720, 300
PANELS = {  # key -> (title, y label)
    "tok": ("Output throughput", "Output tok/s (all users)"),
    "tpot": ("Mean time per output token", "Mean TPOT (ms)"),
    "ttft": ("Mean time to first token", "Mean TTFT (ms, log)"),
}


def _val(pt: Point, key: str) -> float:
    return pt.output_throughput if key == "tok" else pt.mean_tpot_ms if key == "tpot" else max(pt.mean_ttft_ms, 1e-3)


def _panel(data: UsersData, key: str, narrow: bool) -> Raw:
    """One chart against concurrency (log2 axis): output throughput, mean TPOT or mean TTFT (log axis)."""
    s = data.state
    w, h = (chart.NARROW_W, 230) if narrow else (W, H)
    fr = (
        chart.Frame(w, h, left=44, top=30, right=58, bottom=44)
        if narrow
        else chart.Frame(w, h, left=62, top=30, right=96, bottom=48)
    )
    lines = [ln for ln in data.lines if not ln.error]
    x = fr.log_x(CONCURRENCY[0], CONCURRENCY[-1])
    vals = [_val(pt, key) for ln in lines for pt in ln.points]
    slo = s.slo_tpot if key == "tpot" else s.slo_ttft if key == "ttft" else None
    if key == "ttft":
        lo, hi = chart.LogScale.decades(min(vals + [slo]), max(vals + [slo]))
        y = fr.log_y(lo, hi)
        yt = chart.log_ticks(lo, hi)
    else:
        top = max(vals + ([slo] if slo else []) + [1.0])
        yt = chart.nice_ticks(0, top * 1.08, 5)
        y = fr.linear_y(0, max(top * 1.08, yt[-1]))
    title, label = PANELS[key]
    parts = [
        chart.grid(x, y, CONCURRENCY, yt),
        chart.axis(x, at=fr.y1, side="bottom", ticks=CONCURRENCY, fmt=lambda v: f"{v:g}", label="Concurrent users"),
        chart.axis(y, at=fr.x0, side="left", ticks=yt, fmt=chart.si, label=label, label_pos=(8, fr.y0 - 14)),
    ]
    if slo:
        ys = y(slo)
        parts.append(el("line", x1=fr.x0, y1=ys, x2=fr.x1, y2=ys, class_="slo"))
        parts.append(el("text", f"SLO {slo:,} ms", x=fr.x0 + 6, y=ys - 5, class_="slo-label"))
    paths, knees, end_ys, end_txt = [], [], [], []
    for ln in lines:
        cls = "eng-" + ln.engine.replace(".", "")
        pts = [(x(pt.concurrency), y(_val(pt, key))) for pt in ln.points]
        paths.append(el("path", el("title", ENGINE_LABEL[ln.engine]), d=chart.path_d(pts), class_=f"curve {cls}"))
        if ln.users:
            pt = next(p for p in ln.points if p.concurrency == ln.users)
            knees.append(
                el(
                    "circle",
                    el("title", f"{ENGINE_LABEL[ln.engine]}: {ln.users} users within the SLO"),
                    cx=x(pt.concurrency),
                    cy=y(_val(pt, key)),
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
    return svg(
        parts,
        width=w,
        height=h,
        id_=sid,
        class_="chart users-chart",
        title=f"{title} against concurrent users: {data.model.name} on {data.machine.name}",
        desc=describe(data),
    )


CAUSE_LABEL = {"cap": "a concurrency cap", "kv": "the KV pool", "compute": "compute"}


def _why(data: UsersData) -> Raw:
    """Per engine: where its throughput goes flat (or how much the last doubling still adds), and why."""
    items = []
    for ln in data.lines:
        if ln.error:
            continue
        name = ENGINE_LABEL[ln.engine]

        def pct(g):
            return f"{round(g * 100) or 0:+d}%"  # no "-0%"

        if ln.flat_at:
            i = CONCURRENCY.index(ln.flat_at)
            g = ln.points[i].output_throughput / ln.points[i - 1].output_throughput - 1
            head = f"flat from {CONCURRENCY[i - 1]} to {ln.flat_at} users ({pct(g)} throughput), because of "
        else:
            g = ln.points[-1].output_throughput / ln.points[-2].output_throughput - 1
            head = f"still rising at {CONCURRENCY[-1]} users ({pct(g)} from {CONCURRENCY[-2]}); it is bent by "
        items.append(
            el(
                "li",
                [
                    el("strong", f"{name}: "),
                    head,
                    el("span", CAUSE_LABEL[ln.cause], class_=f"cause cause-{ln.cause}", data_cause=ln.cause),
                    ": ",
                    ln.why,
                ],
                class_="why-" + ln.engine.replace(".", ""),
            )
        )
    if not items:
        return Raw("")
    return el(
        "section",
        [
            el("h3", "Why the curves flatten"),
            el("ul", items),
            el(
                "p",
                "Doubling the users doubles the batch. While the weights' read dominates a step, the step barely "
                "slows and throughput nearly doubles; it stops when the engine will not run more requests (its "
                "cap), when their KV does not fit the pool (they queue or are preempted), or when the step's "
                f"arithmetic grows with the batch (compute). Flat: doubling adds under {load.FLAT_GAIN:.0%}.",
                class_="note",
            ),
        ],
        class_="users-why",
    )


def _frame(fx: float, fy: float, used: int, pitch: float, eng_cls: str) -> list:
    """One time-lapse grid: GRID_COLS x GRID_ROWS cells, the first `used` filled (the manager grids' cells)."""
    cell = pitch - 1
    out = []
    for i in range(GRID_COLS * GRID_ROWS):
        cx, cy = fx + (i % GRID_COLS) * pitch, fy + (i // GRID_COLS) * pitch
        out.append(
            f'<rect x="{cx:g}" y="{cy:g}" width="{cell:g}" height="{cell:g}" '
            f'class="{"k-used " + eng_cls if i < used else "k-free"}"/>'
        )
    return out


def _timelapse_svg(data: UsersData, narrow: bool) -> Raw:
    tl = data.timelapse
    per_row = 4 if narrow else FRAMES
    pitch = 5
    fw, fh = GRID_COLS * pitch, GRID_ROWS * pitch
    gap_x = ((chart.NARROW_W if narrow else W) - per_row * fw) / per_row
    row_h = fh + 34
    w = chart.NARROW_W if narrow else W
    h = row_h * ((FRAMES + per_row - 1) // per_row) + 4
    n_cells = GRID_COLS * GRID_ROWS
    cls = "eng-" + tl.engine.replace(".", "")
    parts = []
    for k, (t, used) in enumerate(tl.frames):
        col, row = k % per_row, k // per_row
        fx, fy = gap_x / 2 + col * (fw + gap_x), row * row_h + 4
        share = min(1.0, used / tl.pool) if tl.pool else 0.0
        parts.append(Raw("".join(_frame(fx, fy, round(share * n_cells), pitch, cls))))
        parts.append(el("text", f"{t:.1f} s", x=fx + fw / 2, y=fy + fh + 13, class_="tl-time"))
        parts.append(el("text", f"{share:.0%}", x=fx + fw / 2, y=fy + fh + 27, class_="tl-share"))
    name = ENGINE_LABEL[tl.engine]
    return svg(
        parts,
        width=w,
        height=h,
        id_="users-kv" + ("-n" if narrow else ""),
        class_="chart users-kv",
        title=f"{name}'s KV pool under {tl.users} users: {FRAMES} moments of the run",
        desc=(
            f"{FRAMES} grids, one per eighth of the run ({tl.duration_s:.1f} s). Each grid is the pool of "
            f"{tl.pool:,} tokens in {n_cells} cells of {tl.pool / n_cells:,.0f} tokens; filled cells hold KV "
            "(running requests, and cached prefixes on vLLM and SGLang). Under each: the time and the share used."
        ),
    )


def _timelapse(data: UsersData) -> Raw:
    tl = data.timelapse
    name = ENGINE_LABEL[tl.engine]
    head = el("h3", f"The KV pool in time: {name}, {tl.users} users")
    if tl.error or not tl.frames:
        return el("section", [head, el("p", f"{name} cannot run here: {tl.error}", class_="note")], class_="users-tl")
    pre = f"{tl.preemptions} preemption{'s' if tl.preemptions != 1 else ''}" if tl.preemptions else "no preemptions"
    return el(
        "section",
        [
            head,
            el(
                "figure",
                chart.responsive(lambda: _timelapse_svg(data, False), lambda: _timelapse_svg(data, True)),
                class_="chart-wrap",
            ),
            el(
                "p",
                f"The pool holds {tl.pool:,} tokens; each cell above is {tl.pool / (GRID_COLS * GRID_ROWS):,.0f} of "
                f"them. The run lasts {tl.duration_s:.1f} s with {pre}. Pick another engine or number of users "
                "in the controls (Time-lapse).",
                class_="note",
            ),
        ],
        class_="users-tl",
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


def _presets() -> Raw:
    return chart.presets_once(
        SPEC,
        lambda: [
            ("Chat (default)", "", "512 prompt and 128 reply tokens, Llama 3.1 8B on an RTX 4090"),
            ("Long prompts: the KV pool", "?input_len=4096&output_len=512", "4,096 + 512 tokens per request"),
            ("llama-server -np 4", "?np=4&kv_engine=llama.cpp&kv_users=16", "four slots, whatever the users"),
            (
                "A server: Qwen3-8B on an H100",
                "?model=qwen3-8b&machine=h100",
                "the GPU and model of published vLLM and SGLang runs (data/serving)",
            ),
        ],
    )


def _chart(data: UsersData, key: str) -> Raw:
    return el(
        "figure",
        chart.responsive(lambda: _panel(data, key, False), lambda: _panel(data, key, True)),
        class_="chart-wrap",
    )


def render(data: UsersData) -> str:
    parts = [_presets()]
    for ln in data.lines:
        if ln.error:
            parts.append(
                el("div", [el("strong", f"{ENGINE_LABEL[ln.engine]}: "), ln.error], class_="alert", role="alert")
            )
    if all(ln.error for ln in data.lines):
        return el("div", parts, class_="users", data_state="error")
    parts += [
        _readouts(data),
        _chart(data, "tok"),
        _chart(data, "tpot"),
        _chart(data, "ttft"),
        _why(data),
        el(
            "p",
            "Simulated with enginelab.serving: each engine's scheduler over its KV manager, every step timed by the "
            "batched forward pass (measured profile). Closed-loop load, like vllm bench serve --max-concurrency. "
            "llama-server runs the chosen GGUF quant; vLLM and SGLang the checkpoint's BF16 weights.",
            class_="note",
        ),
        _timelapse(data),
        _table(data),
    ]
    return el("div", parts, class_="users", data_state="ok")
