"""Quick charts for learners' code: `plot.line(...)` and `plot.bars(...)` in the house style.

    from enginelab import plot
    plot.line([0, 10, 20], [4.2, 5.1, 6.3], title="Decode speed", xlabel="-ngl", ylabel="tok/s")
    plot.line(xs, [ys_f16, ys_q8], series=["f16", "q8_0"], title=..., xlabel=..., ylabel=..., log_y=True)
    plot.line(batches, tok_s, title=..., xlabel="batch", ylabel="tok/s", marks={"ridge_batch": 55.0})
    plot.bars(["F16", "Q8_0", "Q4_K_M"], [16.1, 8.5, 4.9], title="File size", ylabel="GB")

Both return an `SVG` (a str): an accessible chart with role="img", a <title> and a <desc> that says what the
data shows, colours only through CSS classes (plot-s0 ... plot-s5, so the dark theme is one stylesheet), and
the same numbers as a table (`SVG.table_html()`). Same input, same bytes.

On the exercises page a chart also appears under the cell that drew it: the page's runner installs a
display hook (`capture()`); in plain Python nothing is shown and you keep the returned string. The page
never shows markup a cell hands it: each chart keeps the validated data it was drawn from (`SVG.spec`), and
the runner draws it again from that data (`rebuild`) after the cell has finished; anything else is dropped.

Bad input raises ValueError naming the argument and what is allowed, e.g.
    ValueError: plot.line: ys has 49 values but xs has 50; they must be the same length
"""

from __future__ import annotations

import hashlib
import math
from contextlib import contextmanager
from numbers import Real

from . import chart
from .svg import Raw, el, join, num, svg, table

__all__ = ["line", "bars", "SVG", "capture"]

W, H = 640, 360  # viewBox; the SVG scales to its container
MAX_POINTS = 20_000  # per series: beyond this a chart is unreadable and slow to draw
MAX_SERIES = 6  # one CSS colour class per series
MAX_BARS = 60
DOTS_UP_TO = 60  # draw a dot on every point when a series has at most this many


class SVG(str):
    """A chart's SVG markup (a str), with the plotted numbers kept for the table twin."""

    kind = title = ""
    header: list = []
    rows: list = []
    spec: tuple | None = None  # ("line" | "bars", validated arguments): what rebuild() draws the chart from

    def _repr_html_(self) -> str:  # Jupyter / PyScript display()
        return self.html()

    def table_html(self) -> str:
        return str(
            el(
                "details",
                [el("summary", "Data"), table(self.title, self.header, self.rows)],
                class_="data-table plot-data",
            )
        )

    def html(self) -> str:
        """The chart and its data table, as the exercises page shows them."""
        return str(el("figure", [Raw(str(self)), Raw(self.table_html())], class_="plot-figure"))


# ---------------------------------------------------------------------------------------------------------
# Display hook: the exercises runner collects what a cell draws
# ---------------------------------------------------------------------------------------------------------
_sink: list | None = None
MAX_SHOWN = 12


@contextmanager
def capture():
    """Collect every chart drawn inside the block: `with plot.capture() as shown: ...` -> list of SVG."""
    global _sink
    prev, _sink = _sink, []
    try:
        yield _sink
    finally:
        _sink = prev


def _show(chart_svg: SVG) -> SVG:
    # only charts line() and bars() drew (they carry their data); a string made some other way is not shown
    if _sink is not None and len(_sink) < MAX_SHOWN and isinstance(chart_svg, SVG) and chart_svg.spec is not None:
        _sink.append(chart_svg)
    return chart_svg


def rebuild(chart_svg) -> SVG | None:
    """The chart drawn again from its data (SVG.spec) by line() or bars(), or None when it has no valid data.

    The exercises runner shows only what this returns, so no markup a cell made (or edited) reaches the page."""
    spec = getattr(chart_svg, "spec", None) if isinstance(chart_svg, SVG) else None
    if not (isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[1], dict)):
        return None
    kind, kwargs = spec
    draw = {"line": _line, "bars": _bars}.get(kind) if isinstance(kind, str) else None
    if draw is None:
        return None
    try:
        return draw(**kwargs)
    except (ValueError, TypeError):
        return None


# ---------------------------------------------------------------------------------------------------------
# Input checking
# ---------------------------------------------------------------------------------------------------------
def _fail(fn: str, msg: str):
    raise ValueError(f"plot.{fn}: {msg}")


def _numbers(fn: str, name: str, values, positive: bool = False, max_len: int = MAX_POINTS) -> list:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        _fail(fn, f"{name} must be a list of numbers, got {type(values).__name__}")
    out = []
    for i, v in enumerate(values):
        if i >= max_len:
            _fail(fn, f"{name} has more than {max_len:,} values; plot fewer points")
        if isinstance(v, bool) or not isinstance(v, Real):
            _fail(fn, f"{name}[{i}] is {v!r}, not a number")
        f = float(v)
        if not math.isfinite(f):
            _fail(fn, f"{name}[{i}] is {f!r}; only finite numbers can be drawn")
        if positive and f <= 0:
            _fail(
                fn,
                f"{name}[{i}] is {f!r}; a logarithmic axis needs values > 0 (turn the log axis off, "
                f"or leave those points out)",
            )
        out.append(f)
    if not out:
        _fail(fn, f"{name} is empty; give at least one value")
    return out


def _flag(fn: str, name: str, value) -> bool:
    if not isinstance(value, bool):
        _fail(fn, f"{name} must be True or False, got {type(value).__name__}")
    return value


def _text(fn: str, name: str, value, max_len: int = 120) -> str:
    if not isinstance(value, str):
        _fail(fn, f"{name} must be a string, got {type(value).__name__}")
    return value if len(value) <= max_len else value[: max_len - 1] + "…"


def _is_multi(ys) -> bool:
    if isinstance(ys, (str, bytes)) or not hasattr(ys, "__iter__"):
        return False
    try:
        first = next(iter(ys))
    except StopIteration:
        return False
    return not isinstance(first, (str, bytes)) and hasattr(first, "__iter__")


def _marks(fn: str, marks) -> list:
    """marks: {label: value} or [(value, label), ...] -> [(value, label)]."""
    if marks is None:
        return []
    items = marks.items() if isinstance(marks, dict) else None
    out = []
    if items is not None:
        pairs = [(v, k) for k, v in items]
    else:
        if isinstance(marks, (str, bytes)) or not hasattr(marks, "__iter__"):
            _fail(fn, "marks must be a dict {label: value} or a list of (value, label) pairs")
        pairs = []
        for m in marks:
            if not (isinstance(m, (tuple, list)) and len(m) == 2):
                _fail(fn, f"each mark must be a (value, label) pair, got {m!r}")
            pairs.append((m[0], m[1]))
    if len(pairs) > 8:
        _fail(fn, "at most 8 marks")
    for v, label in pairs:
        if isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(float(v)):
            _fail(fn, f"mark {label!r} has value {v!r}; it must be a finite number")
        out.append((float(v), _text(fn, "a mark's label", str(label), 40)))
    return out


# ---------------------------------------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------------------------------------
def _fmt(v: float) -> str:
    """A value in a sentence or a table cell: 4 significant digits, thousands separators."""
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e6 or a < 1e-3:
        return f"{v:.3g}"
    if float(v).is_integer():
        return f"{int(v):,}"
    digits = max(0, 3 - int(math.floor(math.log10(a))))
    return f"{v:,.{digits}f}".rstrip("0").rstrip(".")


def _id(kind: str, title: str, desc: str) -> str:
    """A stable element id (so two charts on one page do not share their <title>/<desc> ids)."""
    return "plot-" + hashlib.sha1(f"{kind}\0{title}\0{desc}".encode()).hexdigest()[:10]


def _tick(v: float) -> str:
    return chart.si(v)


def _padded(lo: float, hi: float, log: bool, zero: bool) -> tuple:
    """A domain around [lo, hi]: from 0 for linear value axes that start near it, a bit of headroom."""
    if log:
        if lo == hi:
            return lo / 2, hi * 2
        return lo, hi
    if zero and lo >= 0:
        lo = 0.0
    if lo == hi:
        return (lo - 1, hi + 1) if lo == 0 else (lo - abs(lo) * 0.1, hi + abs(hi) * 0.1)
    return lo, hi + (hi - lo) * 0.05 if zero else hi


def _scale(frame, axis: str, lo: float, hi: float, log: bool):
    if axis == "x":
        return frame.log_x(lo, hi) if log else frame.linear_x(lo, hi)
    return frame.log_y(lo, hi) if log else frame.linear_y(lo, hi)


def _ticks(scale, log: bool, n: int = 5) -> list:
    if log:
        t = scale.ticks()
        if len(t) < 2:  # less than a decade: fall back to round linear steps
            t = chart.nice_ticks(min(scale.d0, scale.d1), max(scale.d0, scale.d1), 4)
        return t
    return scale.ticks(n)


def _frame_parts(frame, xs_scale, ys_scale, xt, yt, xlabel, ylabel, title):
    return [
        el("text", title, x=frame.x0, y=18, class_="plot-title"),
        el("g", [el("line", x1=frame.x0, y1=ys_scale(t), x2=frame.x1, y2=ys_scale(t)) for t in yt], class_="plot-grid"),
        chart.axis(xs_scale, at=frame.y1, side="bottom", ticks=xt, fmt=_tick, label=xlabel)
        if xt is not None
        else Raw(""),
        chart.axis(
            ys_scale,
            at=frame.x0,
            side="left",
            ticks=yt,
            fmt=_tick,
            label=ylabel,
            label_pos=(frame.x0 - 56, frame.y0 - 10),
        ),
    ]


def _legend(frame, names: list) -> Raw:
    items, lx = [], frame.x0
    y = frame.height - 8
    for i, name in enumerate(names):
        items.append(el("line", x1=lx, y1=y - 4, x2=lx + 18, y2=y - 4, class_=f"plot-line plot-s{i}"))
        items.append(el("text", name, x=lx + 23, y=y, class_="plot-legend-label"))
        lx += 23 + 7 * len(name) + 18
    return el("g", items, class_="plot-legend")


# ---------------------------------------------------------------------------------------------------------
# line
# ---------------------------------------------------------------------------------------------------------
def line(
    xs, ys, *, title: str, xlabel: str, ylabel: str, series=None, log_x: bool = False, log_y: bool = False, marks=None
) -> SVG:
    """A line chart of ys against xs (one series, or several: ys = [ys_a, ys_b], series = ["a", "b"]).

    marks: vertical reference lines, {label: x} or [(x, label)], e.g. {"ridge_batch": 55.0}.
    log_x / log_y: logarithmic axes (all values on that axis must be > 0)."""
    return _show(
        _line(xs, ys, title=title, xlabel=xlabel, ylabel=ylabel, series=series, log_x=log_x, log_y=log_y, marks=marks)
    )


def _line(xs, ys, *, title, xlabel, ylabel, series=None, log_x=False, log_y=False, marks=None) -> SVG:
    fn = "line"
    log_x, log_y = _flag(fn, "log_x", log_x), _flag(fn, "log_y", log_y)
    title, xlabel, ylabel = _text(fn, "title", title), _text(fn, "xlabel", xlabel, 60), _text(fn, "ylabel", ylabel, 60)
    x = _numbers(fn, "xs", xs, positive=log_x)
    if _is_multi(ys):
        ys_list = [_numbers(fn, f"ys[{k}]", s, positive=log_y) for k, s in enumerate(ys)]
        if not ys_list:
            _fail(fn, "ys is empty")
        if series is None:
            names = [f"series {k + 1}" for k in range(len(ys_list))]
        elif isinstance(series, str) or len(series) != len(ys_list):
            _fail(fn, f"series must be a list of {len(ys_list)} names, one per list in ys")
        else:
            names = [_text(fn, "series name", str(s), 30) for s in series]
    else:
        ys_list = [_numbers(fn, "ys", ys, positive=log_y)]
        names = [_text(fn, "series", series, 30)] if series is not None else []
    if len(ys_list) > MAX_SERIES:
        _fail(fn, f"at most {MAX_SERIES} series, got {len(ys_list)}")
    for k, s in enumerate(ys_list):
        if len(s) != len(x):
            which = "ys" if len(ys_list) == 1 else f"ys[{k}]"
            _fail(fn, f"{which} has {len(s)} values but xs has {len(x)}; they must be the same length")
    mk = _marks(fn, marks)
    for v, label in mk:
        if log_x and v <= 0:
            _fail(fn, f"mark {label!r} is at x = {v!r}; a logarithmic x axis needs values > 0")

    frame = chart.Frame(W, H, left=64, top=40, right=24, bottom=64 if len(names) > 1 else 48)
    all_x = x + [v for v, _ in mk]
    x_lo, x_hi = _padded(min(all_x), max(all_x), log_x, zero=False)
    all_y = [v for s in ys_list for v in s]
    y_lo, y_hi = _padded(min(all_y), max(all_y), log_y, zero=True)
    if mk:  # room above the data for the marks' labels
        y_hi = y_hi * 1.6 if log_y else y_hi + (y_hi - y_lo) * 0.1
    sx, sy = _scale(frame, "x", x_lo, x_hi, log_x), _scale(frame, "y", y_lo, y_hi, log_y)
    xt, yt = _ticks(sx, log_x, 6), _ticks(sy, log_y)

    parts = _frame_parts(frame, sx, sy, xt, yt, xlabel, ylabel, title)
    for v, label in mk:
        px = sx(v)
        parts.append(
            el(
                "g",
                [
                    el("line", x1=px, y1=frame.y0, x2=px, y2=frame.y1, class_="plot-mark-line"),
                    el("text", label, x=px + 4, y=frame.y0 + 12, class_="plot-mark-label"),
                ],
                class_="plot-mark",
                data_value=repr(v),
            )
        )
    for k, s in enumerate(ys_list):
        pts = [(sx(a), sy(b)) for a, b in zip(x, s)]
        g = [el("path", d=chart.path_d(pts), class_=f"plot-line plot-s{k}")]
        if len(pts) <= DOTS_UP_TO:
            g += [el("circle", cx=px, cy=py, r=2.5, class_=f"plot-dot plot-s{k}") for px, py in pts]
        parts.append(el("g", g, class_="plot-series", data_series=names[k] if names else None))
    if len(names) > 1:
        parts.append(_legend(frame, names))

    desc = _describe_line(x, ys_list, names, xlabel, ylabel, mk)
    out = SVG(
        svg(
            join(parts),
            width=W,
            height=H,
            title=title,
            desc=desc,
            class_="chart plot plot-line-chart",
            id_=_id("line", title, desc),
        )
    )
    out.kind, out.title = "line", title
    out.header = [xlabel] + (names if names else [ylabel])
    out.rows = [[_fmt(a)] + [_fmt(s[i]) for s in ys_list] for i, a in enumerate(x)]
    multi = len(ys_list) > 1 or _is_multi(ys)
    out.spec = (
        "line",
        dict(
            xs=tuple(x),
            ys=tuple(tuple(s) for s in ys_list) if multi else tuple(ys_list[0]),
            title=title,
            xlabel=xlabel,
            ylabel=ylabel,
            series=(tuple(names) if multi else names[0]) if names else None,
            log_x=log_x,
            log_y=log_y,
            marks=tuple(mk) or None,
        ),
    )
    return out


def _describe_line(x, ys_list, names, xlabel, ylabel, marks) -> str:
    n = len(x)
    head = f"Line chart of {ylabel} against {xlabel}, {n} point{'s' if n != 1 else ''}"
    head += f" from {xlabel} {_fmt(x[0])} to {_fmt(x[-1])}." if n > 1 else f" at {xlabel} {_fmt(x[0])}."
    parts = [head]
    for k, s in enumerate(ys_list):
        who = f"{names[k]}: " if names else ""
        i_max = max(range(n), key=lambda i: s[i])
        parts.append(
            f"{who}{ylabel} goes from {_fmt(s[0])} to {_fmt(s[-1])}, highest {_fmt(s[i_max])} "
            f"at {xlabel} {_fmt(x[i_max])}."
        )
    for v, label in marks:
        parts.append(f"Mark {label} at {xlabel} {_fmt(v)}.")
    return " ".join(parts)


# ---------------------------------------------------------------------------------------------------------
# bars
# ---------------------------------------------------------------------------------------------------------
def bars(labels, values, *, title: str, ylabel: str, xlabel: str = "", log_y: bool = False, marks=None) -> SVG:
    """A bar chart: one bar per label. marks: horizontal reference lines, {label: y} or [(y, label)]."""
    return _show(_bars(labels, values, title=title, ylabel=ylabel, xlabel=xlabel, log_y=log_y, marks=marks))


def _bars(labels, values, *, title, ylabel, xlabel="", log_y=False, marks=None) -> SVG:
    fn = "bars"
    log_y = _flag(fn, "log_y", log_y)
    title, xlabel, ylabel = _text(fn, "title", title), _text(fn, "xlabel", xlabel, 60), _text(fn, "ylabel", ylabel, 60)
    if isinstance(labels, (str, bytes)) or not hasattr(labels, "__iter__"):
        _fail(fn, f"labels must be a list of names, got {type(labels).__name__}")
    labs = [_text(fn, f"labels[{i}]", str(v), 40) for i, v in enumerate(labels)]
    vals = _numbers(fn, "values", values, positive=log_y, max_len=MAX_BARS)
    if len(labs) > MAX_BARS:
        _fail(fn, f"at most {MAX_BARS} bars, got {len(labs)}")
    if len(labs) != len(vals):
        _fail(fn, f"values has {len(vals)} numbers but labels has {len(labs)}; they must be the same length")
    mk = _marks(fn, marks)
    for v, label in mk:
        if log_y and v <= 0:
            _fail(fn, f"mark {label!r} is at {v!r}; a logarithmic axis needs values > 0")

    n = len(vals)
    longest = max(len(s) for s in labs)
    step_px = (W - 64 - 24) / n
    rotate = longest * 7 > step_px - 4
    frame = chart.Frame(W, H, left=64, top=40, right=24, bottom=48 + (min(longest, 16) * 5 if rotate else 0))
    all_y = vals + [v for v, _ in mk]
    if log_y:
        y_lo, y_hi = _padded(min(all_y), max(all_y), True, zero=False)
    else:
        lo, hi = min(all_y + [0.0]), max(all_y + [0.0])
        y_lo, y_hi = (lo, hi + (hi - lo) * 0.05) if hi > lo else (-1.0, 1.0)
    sy = _scale(frame, "y", y_lo, y_hi, log_y)
    yt = _ticks(sy, log_y)
    base = sy(y_lo) if log_y else sy(0.0)
    parts = _frame_parts(frame, None, sy, None, yt, xlabel, ylabel, title)
    parts.append(el("line", x1=frame.x0, y1=frame.y1, x2=frame.x1, y2=frame.y1, class_="axis-line"))
    slot = (frame.x1 - frame.x0) / n
    bw = max(1.0, slot * 0.7)
    for i, (lab, v) in enumerate(zip(labs, vals)):
        cx = frame.x0 + slot * (i + 0.5)
        top, bottom = sorted((sy(v), base))
        shown = lab if len(lab) <= 16 else lab[:15] + "…"
        if rotate:
            label = el(
                "text",
                shown,
                x=cx,
                y=frame.y1 + 12,
                class_="tick-label",
                text_anchor="end",
                transform=f"rotate(-40 {num(cx)} {num(frame.y1 + 12)})",
            )
        else:
            label = el("text", shown, x=cx, y=frame.y1 + 16, class_="tick-label", text_anchor="middle")
        parts.append(
            el(
                "g",
                [
                    el(
                        "rect",
                        el("title", f"{lab}: {_fmt(v)}"),
                        x=cx - bw / 2,
                        y=top,
                        width=bw,
                        height=max(bottom - top, 0.5),
                        class_="plot-bar plot-s0",
                    ),
                    label,
                ],
                class_="plot-bar-group",
                data_value=repr(v),
            )
        )
    if xlabel:
        parts.append(
            el("text", xlabel, x=(frame.x0 + frame.x1) / 2, y=H - 6, class_="axis-label", text_anchor="middle")
        )
    for v, label in mk:
        py = sy(v)
        parts.append(
            el(
                "g",
                [
                    el("line", x1=frame.x0, y1=py, x2=frame.x1, y2=py, class_="plot-mark-line"),
                    el("text", label, x=frame.x1 - 4, y=py - 4, class_="plot-mark-label", text_anchor="end"),
                ],
                class_="plot-mark",
                data_value=repr(v),
            )
        )
    i_max = max(range(n), key=lambda i: vals[i])
    i_min = min(range(n), key=lambda i: vals[i])
    desc = (
        f"Bar chart of {ylabel}, {n} bar{'s' if n != 1 else ''}: highest {labs[i_max]} at {_fmt(vals[i_max])}, "
        f"lowest {labs[i_min]} at {_fmt(vals[i_min])}." + "".join(f" Mark {label} at {_fmt(v)}." for v, label in mk)
    )
    out = SVG(
        svg(
            join(parts),
            width=W,
            height=H,
            title=title,
            desc=desc,
            class_="chart plot plot-bar-chart",
            id_=_id("bars", title, desc),
        )
    )
    out.kind, out.title = "bars", title
    out.header = [xlabel or "label", ylabel]
    out.rows = [[lab, _fmt(v)] for lab, v in zip(labs, vals)]
    out.spec = (
        "bars",
        dict(
            labels=tuple(labs),
            values=tuple(vals),
            title=title,
            ylabel=ylabel,
            xlabel=xlabel,
            log_y=log_y,
            marks=tuple(mk) or None,
        ),
    )
    return out
