"""How good are these estimates? perf_model's predictions against published llama-bench measurements.

The dataset, the predictions, the error summary and the llama-bench parser all live in the course-side
module `validation`; this figure draws predicted-against-measured per device (log axes, y = x), the error
distribution, the median absolute errors, a table, and a box for pasting one's own llama-bench output.

compute(state) returns a ValidationData: every dataset row with our estimates (Predictions), the error Summary,
the pasted rows compared with our estimate (a Paste) or why the paste could not be read, and the Readouts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import perf_model as pm

from .. import fmt, links
from .. import validation as val
from ..chart import readout as _readout  # the data-readout contract, in one place
from ..state import Choice, Spec, Text
from ..svg import Raw, data_details, el, join, svg, table

ID = "validation"
TITLE = "How good are these estimates?"
LEDE = (
    "Our decode and prompt-processing estimates next to published llama-bench results, with a source for "
    "every row. Paste your own llama-bench output to see your measurement beside our estimate."
)

READOUTS = ("decode_mape", "prefill_mape", "n_measurements", "paste_rows")
FAMILIES = ("Apple M1", "Apple M2", "Apple M3", "Apple M4", "NVIDIA (CUDA)")
PLACEHOLDER = (
    "| model | size | params | backend | ngl | test | t/s |\n"
    "| --- | ---: | ---: | --- | --: | --- | ---: |\n"
    "| llama 7B Q4_0 | 3.56 GiB | 6.74 B | Metal | 99 | pp512 | 540.15 ± 0.18 |\n"
    "(or the JSON of llama-bench -o json)"
)


def _fam_class(family: str) -> str:
    return "fam-" + family.lower().replace("apple ", "").replace(" (cuda)", "").replace(" ", "-")


def _machine_options(p):
    v = val
    own = [(k, m.name) for k, m in pm.MACHINES.items()]
    ds = [(k, m.name + " (dataset)") for k, m in v.dataset_machines().items()]
    return own + ds


SPEC = Spec(
    ID,
    [
        Choice(
            "family", "Highlight devices", default="all", options=[("all", "All devices")] + [(f, f) for f in FAMILIES]
        ),
        Text(
            "bench",
            "Your llama-bench output",
            default="",
            max_len=20000,
            rows=7,
            placeholder=PLACEHOLDER,
            help="Paste the table llama-bench prints (-o md, the default) or its -o json output.",
        ),
        Choice(
            "model",
            "Your model",
            default="llama-2-7b",
            options=lambda p: [(k, m.name) for k, m in val.all_models().items()],
        ),
        Choice(
            "quant",
            "Quant (if the table does not name one)",
            default="Q4_0",
            options=lambda p: pm.quant_options(),
        ),
        Choice("machine", "Your machine", default="rtx4090", options=_machine_options),
        Choice(
            "profile",
            "Speed estimate",
            default="measured",
            options=[
                ("measured", "measured: fitted on published llama-bench runs"),
                ("course", "course: the module's model"),
            ],
            help="The charts, the error readouts and your paste use this profile; the table below shows both.",
        ),
    ],
)


State = SPEC.State  # this figure's state: family, bench (the paste), model, quant, machine, profile


def default_state() -> State:
    return SPEC.default()


# ---------------------------------------------------------------------------------------------------------
# Compute
# ---------------------------------------------------------------------------------------------------------
def _machine(key):
    v = val
    if key in pm.MACHINES:
        return pm.MACHINES[key]
    return v.dataset_machines()[key]


@dataclass(frozen=True)
class Measure:
    """One llama-bench test of a dataset row: what was measured and what we predict (tok/s)."""

    test: str  # e.g. tg128, pp512
    measured: float | None  # None: the row has no such measurement
    predicted: float
    error: float | None  # predicted / measured - 1


@dataclass(frozen=True)
class Prediction:
    """One row of validation.predictions(): a published result and our estimates for it."""

    model: str
    quant: str
    device: str
    backend: str
    family: str  # validation.device_family
    source: str
    build: str
    tg: Measure  # decode
    pp: Measure  # prompt processing
    run_build: str = ""  # the llama.cpp build (its day) the estimates are for; "": today's (validation.run_build)
    build_changed: bool = False  # the estimates differ from today's build's

    @classmethod
    def of(cls, p: dict) -> Prediction:
        return cls(
            model=p["model"],
            quant=p["quant"],
            device=p["device"],
            backend=p["backend"],
            family=p["family"],
            source=p["source"],
            build=p["build"],
            tg=Measure(p["tg_test"], p["tg_measured"], p["tg_predicted"], p["tg_error"]),
            pp=Measure(p["pp_test"], p["pp_measured"], p["pp_predicted"], p["pp_error"]),
            run_build=p.get("run_build", ""),
            build_changed=p.get("build_changed", False),
        )

    def metric(self, metric: str) -> Measure:
        """ "tg" (decode) or "pp" (prompt processing)."""
        return self.tg if metric == "tg" else self.pp


@dataclass(frozen=True)
class ErrorStats:
    """validation.summary's error statistics of a set of rows (errors as fractions; None: no measurement)."""

    n_tg: int
    n_pp: int
    decode_mape: float | None  # median absolute error
    prefill_mape: float | None
    decode_bias: float | None  # median signed error
    prefill_bias: float | None

    @classmethod
    def of(cls, st: dict):
        return cls(st["n_tg"], st["n_pp"], st["decode_mape"], st["prefill_mape"], st["decode_bias"], st["prefill_bias"])

    def mape(self, metric: str) -> float | None:
        return self.decode_mape if metric == "tg" else self.prefill_mape

    def bias(self, metric: str) -> float | None:
        return self.decode_bias if metric == "tg" else self.prefill_bias


@dataclass(frozen=True)
class Summary(ErrorStats):
    """validation.summary over the whole dataset."""

    n_rows: int
    by_device: dict[str, ErrorStats]  # device name -> its statistics, in dataset order

    @classmethod
    def of(cls, summ: dict) -> Summary:
        overall = ErrorStats.of(summ)
        by_device = {d: ErrorStats.of(st) for d, st in summ["by_device"].items()}
        return cls(**vars(overall), n_rows=summ["n_rows"], by_device=by_device)


@dataclass(frozen=True)
class PasteRow:
    """One pasted llama-bench row next to our estimate (validation.compare's row)."""

    model: str  # as llama-bench printed it ("" if the row has none)
    test: str
    quant_used: str
    tps: float  # measured
    estimate_tps: float | None  # None: not estimated (see note)
    error: float | None
    note: str
    model_used: str = ""  # the model our estimate is for (the chosen one, or the one the row names)

    @classmethod
    def of(cls, r: dict) -> PasteRow:
        return cls(
            r["model"],
            r["test"],
            r["quant_used"],
            r["tps"],
            r["estimate_tps"],
            r["error"],
            r["note"],
            r.get("model_used", ""),
        )


@dataclass(frozen=True)
class Paste:
    """validation.compare's result for the pasted text."""

    rows: tuple[PasteRow, ...]
    model: str  # the chosen model's name
    machine: str  # the chosen machine's name
    quant: str
    build: str = ""  # the llama.cpp build the output names, as the estimates use it ("": none named)

    @classmethod
    def of(cls, res: dict) -> Paste:
        rows = tuple(PasteRow.of(r) for r in res["rows"])
        return cls(rows, res["model"], res["machine"], res["quant"], res.get("build", ""))


@dataclass(frozen=True)
class Readouts:
    decode_mape: float | None
    prefill_mape: float | None
    n_measurements: int  # decode and prompt measurements together
    paste_rows: int | None  # None: nothing pasted (or unreadable)


@dataclass(frozen=True)
class ValidationData:
    state: State
    preds: tuple[Prediction, ...]
    summary: Summary
    paste: Paste | None  # None: nothing pasted, or it could not be read
    paste_error: str | None  # why it could not be read
    readouts: Readouts
    backends: tuple = ()  # validation.backend_errors(): both profiles' errors per backend on the calibration runs


def compute(state: State) -> ValidationData:
    v = val
    preds = v.predictions(profile=state.profile)
    summ = Summary.of(v.summary(preds))
    paste = paste_error = None
    if state.bench.strip():
        try:
            paste = Paste.of(
                v.compare(state.bench, state.model, state.quant, _machine(state.machine), profile=state.profile)
            )
        except ValueError as e:
            paste_error = str(e)
    readouts = Readouts(
        decode_mape=summ.decode_mape,
        prefill_mape=summ.prefill_mape,
        n_measurements=summ.n_tg + summ.n_pp,
        paste_rows=None if paste is None else len(paste.rows),
    )
    return ValidationData(
        state=state,
        preds=tuple(Prediction.of(p) for p in preds),
        summary=summ,
        paste=paste,
        paste_error=paste_error,
        readouts=readouts,
        backends=tuple(v.backend_errors()),
    )


def describe(data: ValidationData) -> str:
    s = data.summary
    text = (
        f"Against {s.n_rows} published llama-bench results, the {data.state.profile} profile's median absolute error is "
        f"{fmt.pct(s.decode_mape)} for decode (tg128, or tg512 where that is what was run; {s.n_tg} measurements) and "
        f"{fmt.pct(s.prefill_mape)} for prompt processing (pp512, {s.n_pp}); the median signed error is "
        f"{_signed(s.decode_bias)} and {_signed(s.prefill_bias)}."
    )
    if data.paste is not None:
        text += f" Your paste: {len(data.paste.rows)} row(s) compared."
    elif data.paste_error:
        text += f" Your paste could not be read: {data.paste_error}"
    return text


def _signed(x) -> str:
    return "—" if x is None else f"{x * 100:+.0f}%"


# ---------------------------------------------------------------------------------------------------------
# Render
# ---------------------------------------------------------------------------------------------------------
PANEL_W, PANEL_H = 320, 280
ML, MR, MT, MB = 46, 10, 30, 40


class _Log:
    def __init__(self, lo, hi, a, b):
        self.l0, self.l1, self.a, self.b = math.log10(lo), math.log10(hi), a, b

    def __call__(self, v):
        return self.a + (self.b - self.a) * (math.log10(v) - self.l0) / (self.l1 - self.l0)


def _log_bounds(values):
    """The data range widened by 40% each way (a point never sits on the frame)."""
    return min(values) / 1.4, max(values) * 1.4


def _ticks(lo, hi):
    """1-2-5 steps over two decades or less, 1-3 steps beyond."""
    mults = (1, 2, 5) if math.log10(hi / lo) <= 2.2 else (1, 3)
    out = []
    e = math.floor(math.log10(lo))
    while 10**e <= hi:
        out += [m * 10**e for m in mults if lo <= m * 10**e <= hi]
        e += 1
    return out


def _tick_label(t) -> str:
    return f"{t / 1000:g}k" if t >= 1000 else f"{t:g}"


def _scatter(data: ValidationData, metric: str, title: str) -> Raw:
    preds = data.preds
    fam = data.state.family
    pts = [(p.metric(metric).measured, p.metric(metric).predicted, p) for p in preds if p.metric(metric).measured]
    lo, hi = _log_bounds([a for a, _, _ in pts] + [b for _, b, _ in pts])
    x1, y1 = PANEL_W - MR, MT + PANEL_H - MB - MT
    sx = _Log(lo, hi, ML, x1)
    sy = _Log(lo, hi, y1, MT)
    parts = [el("text", title, x=ML, y=18, class_="panel-title")]
    for t in _ticks(lo, hi):
        parts.append(el("line", x1=sx(t), x2=sx(t), y1=MT, y2=y1, class_="grid"))
        parts.append(el("line", x1=ML, x2=x1, y1=sy(t), y2=sy(t), class_="grid"))
        parts.append(el("text", _tick_label(t), x=sx(t), y=y1 + 14, class_="tick", text_anchor="middle"))
        parts.append(el("text", _tick_label(t), x=ML - 4, y=sy(t) + 4, class_="tick", text_anchor="end"))
    parts.append(el("rect", x=ML, y=MT, width=x1 - ML, height=y1 - MT, class_="frame"))
    parts.append(el("line", x1=sx(lo), y1=sy(lo), x2=sx(hi), y2=sy(hi), class_="identity"))
    parts.append(el("text", "y = x", x=sx(hi) - 6, y=sy(hi) + 14, class_="identity-label", text_anchor="end"))
    parts.append(
        el("text", "measured tok/s (log)", x=(ML + x1) / 2, y=y1 + 30, class_="axis-label", text_anchor="middle")
    )
    cy = (MT + y1) / 2
    parts.append(
        el(
            "text",
            "predicted tok/s (log)",
            x=12,
            y=cy,
            class_="axis-label",
            text_anchor="middle",
            transform=f"rotate(-90 12 {cy:.1f})",
        )
    )
    dots = []
    for meas, pred, p in sorted(pts, key=lambda t: (t[2].family == fam, t[2].device, t[2].quant)):
        dim = fam != "all" and p.family != fam
        tip = (
            f"{p.device}, {p.model} {pm.quant_short(p.quant)}: measured {fmt.rate(meas)}, predicted {fmt.rate(pred)} "
            f"tok/s ({_signed(pred / meas - 1)})"
        )
        dots.append(
            el(
                "circle",
                el("title", tip),
                cx=sx(meas),
                cy=sy(pred),
                r=3.5,
                class_=f"pt {_fam_class(p.family)}" + (" dim" if dim else ""),
                data_metric=metric,
            )
        )
    parts.append(el("g", dots, class_="points"))
    # legend under the panel
    lx, ly = ML, y1 + 50
    for f in FAMILIES:
        w = 14 + 6.6 * len(f) + 10
        if lx + w > PANEL_W:
            lx, ly = ML, ly + 16
        parts.append(el("circle", cx=lx, cy=ly - 4, r=4, class_=f"pt {_fam_class(f)}"))
        parts.append(el("text", f, x=lx + 8, y=ly, class_="legend-label"))
        lx += w
    height = ly + 10
    name = "Decode (tgN)" if metric == "tg" else "Prompt processing (pp512)"
    s = data.summary
    desc = (
        f"{name}: predicted against measured tokens per second for {len(pts)} published results, log axes; "
        f"median absolute error {fmt.pct(s.mape(metric))}, median signed error {_signed(s.bias(metric))}."
    )
    return svg(
        parts,
        width=PANEL_W,
        height=height,
        title=f"{name}: predicted against measured",
        desc=desc,
        id_=f"validation-scatter-{metric}",
        class_="chart validation-chart",
    )


BINS = [(-1.0, -0.5)] + [(a / 100, (a + 10) / 100) for a in range(-50, 50, 10)] + [(0.5, 10.0)]


def _bin_label(lo, hi) -> str:
    if lo <= -1.0:
        return "< -50%"
    if hi >= 10:
        return "> +50%"
    return f"{lo * 100:+.0f}% to {hi * 100:+.0f}%"


def histogram_counts(errors) -> list:
    """Counts of signed errors in 10% bins from -50% to +50%, with open-ended bins on both sides."""
    counts = [0] * len(BINS)
    for e in errors:
        if e < BINS[1][0]:
            counts[0] += 1
        elif e >= BINS[-1][0]:
            counts[-1] += 1
        else:
            counts[1 + int(math.floor(round((e - BINS[1][0]) * 100, 9) / 10))] += 1
    return counts


def _histogram(data: ValidationData, metric: str, title: str) -> Raw:
    errs = [p.metric(metric).error for p in data.preds if p.metric(metric).error is not None]
    counts = histogram_counts(errs)
    h = 130
    top = max(counts) or 1
    x1 = PANEL_W - MR
    bw = (x1 - ML) / len(BINS)
    base = 40 + h
    parts = [el("text", title, x=ML, y=18, class_="panel-title")]
    for i, c in enumerate(counts):
        bh = h * c / top
        x = ML + i * bw
        lo, hi = BINS[i]
        parts.append(
            el(
                "rect",
                el("title", f"{_bin_label(lo, hi)}: {c} measurement(s)"),
                x=x + 1,
                y=base - bh,
                width=bw - 2,
                height=max(bh, 0.0),
                class_=f"hist-bar hist-{metric}",
                data_count=c,
            )
        )
        if c:
            parts.append(el("text", str(c), x=x + bw / 2, y=base - bh - 3, class_="tick", text_anchor="middle"))
    zero = ML + 6 * bw  # the bin boundary at 0%
    parts.append(el("line", x1=zero, x2=zero, y1=34, y2=base, class_="identity"))
    parts.append(el("line", x1=ML, x2=x1, y1=base, y2=base, class_="axis-line"))
    for i, lab in ((1, "-50%"), (4, "-20%"), (6, "0"), (8, "+20%"), (11, "+50%")):
        parts.append(el("text", lab, x=ML + i * bw, y=base + 14, class_="tick", text_anchor="middle"))
    parts.append(
        el(
            "text",
            "error = predicted / measured - 1",
            x=(ML + x1) / 2,
            y=base + 30,
            class_="axis-label",
            text_anchor="middle",
        )
    )
    name = "Decode (tgN)" if metric == "tg" else "Prompt processing (pp512)"
    desc = (
        f"{name}: how many of {len(errs)} estimates fall in each 10% error bin: "
        + ", ".join(f"{_bin_label(*BINS[i])}: {c}" for i, c in enumerate(counts) if c)
        + "."
    )
    return svg(
        parts,
        width=PANEL_W,
        height=base + 40,
        title=f"{name}: error distribution",
        desc=desc,
        id_=f"validation-hist-{metric}",
        class_="chart validation-chart validation-hist",
    )


def _chart(data: ValidationData) -> Raw:
    return el(
        "div",
        [
            _scatter(data, "tg", "Decode, tg128 / tg512"),
            _scatter(data, "pp", "Prompt, pp512"),
            _histogram(data, "tg", "Decode error"),
            _histogram(data, "pp", "Prompt error"),
        ],
        class_="validation-grid",
    )


def _readouts(data: ValidationData) -> Raw:
    r, s = data.readouts, data.summary
    return el(
        "dl",
        [
            _readout("decode_mape", r.decode_mape, fmt.pct(r.decode_mape), "Median |error|, decode (tgN)"),
            _readout("prefill_mape", r.prefill_mape, fmt.pct(r.prefill_mape), "Median |error|, prompt (pp512)"),
            _readout("n_measurements", r.n_measurements, f"{r.n_measurements}", f"Measurements ({s.n_rows} rows)"),
            _readout(
                "paste_rows",
                r.paste_rows,
                "—" if r.paste_rows is None else str(r.paste_rows),
                "Your rows compared",
            ),
        ],
        class_="readouts",
    )


def _paste_block(data: ValidationData) -> Raw:
    if data.paste_error:
        return el(
            "div",
            [el("strong", "Could not read your llama-bench output: "), data.paste_error],
            class_="alert alert-error paste-error",
            role="alert",
            data_paste_error="true",
        )
    if data.paste is None:
        return el(
            "p",
            [
                "Paste llama-bench output into the “Your llama-bench output” box in the settings of ",
                el("a", "the validation page", href=links.figure_href(ID)),
                " to compare it with our estimate for the model, quant and machine you pick.",
            ],
            class_="note paste-hint",
        )
    res = data.paste
    rows = []
    for i, r in enumerate(res.rows):
        est = r.estimate_tps
        rows.append(
            el(
                "tr",
                [
                    el("th", r.model or "—", scope="row"),
                    el("td", r.model_used),
                    el("td", r.test),
                    el("td", r.quant_used),
                    el("td", fmt.rate(r.tps), class_="measured"),
                    el("td", fmt.rate(est), class_="estimate"),
                    el("td", _signed(r.error), class_="error"),
                    el("td", r.note or "", class_="row-note"),
                ],
                data_paste_row=i,
                data_test=r.test,
                data_measured=fmt.raw(r.tps),
                data_estimate=fmt.raw(est),
                data_error=fmt.raw(r.error),
            )
        )
    caption = f"Your llama-bench rows against our estimate on {res.machine}, for {res.model} or the model a row names"
    if res.build:  # the build llama-bench printed: the estimates are for it
        caption += f"; your build: {res.build}"
    return el(
        "div",
        [
            el(
                "table",
                [
                    el("caption", caption),
                    el(
                        "thead",
                        el(
                            "tr",
                            [
                                el("th", h, scope="col")
                                for h in (
                                    "model",
                                    "estimated as",
                                    "test",
                                    "quant",
                                    "measured t/s",
                                    "our estimate t/s",
                                    "error",
                                    "note",
                                )
                            ],
                        ),
                    ),
                    el("tbody", rows),
                ],
                class_="data paste-table",
            )
        ],
        class_="paste-result",
    )


def _table(data: ValidationData) -> Raw:
    header = [
        "Device",
        "Model",
        "Quant",
        "Decode test",
        "measured",
        "predicted",
        "error",
        "Prompt test",
        "measured",
        "predicted",
        "error",
        "Scored as",
        "Source",
    ]
    rows = []
    course = data.state.profile == "course"  # the course profile has no builds
    for p in data.preds:
        rows.append(
            [
                p.device,
                p.model,
                p.quant,
                p.tg.test,
                fmt.rate(p.tg.measured),
                fmt.rate(p.tg.predicted),
                _signed(p.tg.error),
                p.pp.test,
                fmt.rate(p.pp.measured),
                fmt.rate(p.pp.predicted),
                _signed(p.pp.error),
                "—" if course else f"build of {p.run_build}" if p.run_build else "today's build",
                p.source,
            ]
        )
    s = data.summary
    dev_rows = [
        [
            d,
            str(st.n_tg),
            fmt.pct(st.decode_mape),
            _signed(st.decode_bias),
            str(st.n_pp),
            fmt.pct(st.prefill_mape),
            _signed(st.prefill_bias),
        ]
        for d, st in s.by_device.items()
    ]
    return join(
        [
            data_details(
                "Per-device errors",
                table(
                    "Median absolute and signed errors per device",
                    [
                        "Device",
                        "decode n",
                        "median |error|",
                        "median error",
                        "prompt n",
                        "median |error|",
                        "median error",
                    ],
                    dev_rows,
                ),
            ),
            data_details("Data table", table(describe(data), header, rows)),
        ]
    )


BACKEND_NAMES = {"cuda": "CUDA", "rocm": "ROCm", "vulkan": "Vulkan", "metal": "Metal", "sycl": "SYCL", "cpu": "CPU"}


def _backend_table(data: ValidationData) -> Raw:
    """Both profiles side by side, per backend: the course profile's error on every calibration run, and the
    measured profile's leave-one-device-out error (each device predicted by a fit that never saw it)."""
    if not data.backends:
        return el("p", "No calibration summary is available (measured_params.json missing).", class_="note")
    rows = []
    for b in data.backends:
        kind = "decode (tgN)" if b["kind"] == "decode" else "prompt (ppN)"
        held = "" if b["held_out"] else " (in-sample: one device)"
        rows.append(
            el(
                "tr",
                [
                    el("th", BACKEND_NAMES.get(b["backend"], b["backend"]), scope="row"),
                    el("td", kind),
                    el("td", f"{b['runs']} / {b['devices']}"),
                    el(
                        "td",
                        fmt.pct(b["course_median"]),
                        data_readout=f"course_{b['kind']}_{b['backend']}",
                        data_value=fmt.raw(b["course_median"]),
                    ),
                    el("td", fmt.pct(b["course_p90"])),
                    el(
                        "td",
                        fmt.pct(b["measured_median"]) + held,
                        data_readout=f"measured_{b['kind']}_{b['backend']}",
                        data_value=fmt.raw(b["measured_median"]),
                        class_="better" if (b["measured_median"] or 9) < (b["course_median"] or 9) else None,
                    ),
                    el("td", fmt.pct(b["measured_p90"])),
                ],
                data_backend=b["backend"],
                data_kind=b["kind"],
            )
        )
    head = el(
        "tr",
        [
            el("th", h, scope="col")
            for h in (
                "Backend",
                "Test",
                "Runs / devices",
                "Course: median |error|",
                "p90",
                "Measured, held out: median |error|",
                "p90",
            )
        ],
    )
    return el(
        "section",
        [
            el("h3", "Both profiles, per llama.cpp backend"),
            el(
                "table",
                [
                    el(
                        "caption",
                        "Errors on the published runs of data/calibration: the course profile (the module's model, "
                        "nothing fitted) against the measured profile, each device predicted by a fit without it.",
                    ),
                    el("thead", head),
                    el("tbody", rows),
                ],
                class_="data backend-table",
            ),
        ],
        class_="backend-errors",
    )


def _builds_note(data: ValidationData) -> str:
    """Which llama.cpp build each run is scored with (measured profile): its own where the dataset dates it."""
    if data.state.profile != "measured":
        return ""
    dated = [p for p in data.preds if p.run_build]
    days = sorted({p.run_build for p in dated})
    changed = sum(p.build_changed for p in dated)
    if not dated:
        return "Every run is scored with today's llama.cpp build: the dataset dates none of them. "
    effect = (
        "none of llama.cpp's changes since then (data/llama_cpp_changes.csv) touches their estimates"
        if not changed
        else f"for {changed} of them that build's estimate differs from today's"
    )
    return (
        f"Each run is scored with the llama.cpp build it ran where the dataset dates it ({len(dated)} of "
        f"{len(data.preds)} rows: builds of {', '.join(days)}; {effect}); the others, whose build is not known, with "
        "today's. "
    )


def render(data: ValidationData) -> str:
    s = data.summary
    parts = [
        _readouts(data),
        _backend_table(data),
        el("div", _paste_block(data), class_="paste-block", aria_live="polite"),
        el("figure", [_chart(data)], class_="chart-wrap"),
        el(
            "p",
            [
                "Decode (tgN) is predicted as one decode step at N/2 tokens of context (the middle of the run), prompt "
                "processing as prefill_time(512) in 512-token micro-batches, both with the whole model on the GPU. "
                + (
                    "The charts use the measured profile, whose parameters were fitted on the calibration runs, "
                    "these rows among them: read the held-out errors in the table above for what to expect on "
                    "hardware the fit has not seen. "
                    if data.state.profile == "measured"
                    else "The charts use the course profile: the module's efficiencies (70% of peak bandwidth, "
                    "50% of peak FP16 throughput), nothing fitted to these measurements. "
                )
                + _builds_note(data)
                + f"The median signed errors ({_signed(s.decode_bias)} decode, {_signed(s.prefill_bias)} prompt) show "
                "the bias. Apple GPU FP16 throughput is approximated from core count and clock, so prompt estimates "
                "there are rougher."
            ],
            class_="note",
        ),
        _table(data),
    ]
    return el("div", parts, class_="validation")
