"""Small plotting helpers shared by the chart figures: scales, ticks, axes, paths and a frame.

Everything returns plain numbers or `svg.el` markup, so charts stay pure functions of their data (same input,
same bytes) and colours stay in CSS classes.

    x = LinearScale(0, 49, 60, 620)              # data domain -> pixel range
    y = LogScale(1e9, 1e15, 300, 20)             # pixel range may run downwards (SVG y grows down)
    x(24.5) -> 340.0;  y.ticks() -> [1e9, 1e10, ..., 1e15];  x.ticks(6) -> [0, 10, 20, 30, 40]
    axis(x, y_at=300, side="bottom", label="-ngl", fmt=str)   -> <g class="axis axis-x">…</g>
    path_d([(x(a), y(b)) for a, b in points])                 -> "M60,300L72,290…"

    stacked_bar([Segment(3, "weights: 3 GB", "seg seg-weights"), Segment(1, "KV: 1 GB", "seg seg-kv")],
                x0=10, y=40, height=20, span=400, total=8)
        -> [<rect x="10" y="40" width="150" height="20" class="seg seg-weights"><title>weights: 3 GB</title></rect>,
            <rect x="160" y="40" width="50" height="20" class="seg seg-kv"><title>KV: 1 GB</title></rect>]

Ticks: `nice_ticks(lo, hi, n)` gives round steps (1, 2, 2.5 or 5 times a power of ten; with `base`, a power of
two times base, e.g. base=1024 gives 4k, 8k, 16k steps for token counts); `log_ticks(lo, hi)` gives the powers of ten inside [lo, hi] (and 2x, 5x when
there are few decades). `si(v)` formats a tick: 1500 -> "1.5k", 2e12 -> "2T".
"""

from __future__ import annotations

import math
from typing import NamedTuple

from .svg import Raw, el, num

__all__ = [
    "LinearScale",
    "LogScale",
    "nice_ticks",
    "log_ticks",
    "si",
    "axis",
    "grid",
    "path_d",
    "Frame",
    "Segment",
    "stacked_bar",
    "responsive",
    "NARROW_W",
]

# A chart re-laid out for a phone is drawn this many units wide: on a 390 px screen it gets about 358 px, so one
# unit is a little more than one CSS px and its 11-13 px text stays 11 px or more (DESIGN.md: no figure text
# under 11 CSS px).
NARROW_W = 340


# Which layouts responsive() draws: None, both (the pages built ahead, which must suit any screen, with or
# without Python), or "wide" / "narrow", only the one a live frame shows (site/py/main.py sets it per request
# from the frame's width, and the frame asks for a full render when its width crosses NARROW_BREAK_PX).
LAYOUT = None
LAYOUTS = ("wide", "narrow")
NARROW_BREAK_PX = 720  # site.css's @media (max-width: 720px)


def shows(layout: str) -> bool:
    """Whether renders now draw this layout ("wide" or "narrow")."""
    return LAYOUT is None or LAYOUT == layout


class layout_for:
    """with layout_for("narrow"): ... renders only that layout inside (None or anything else: both)."""

    def __init__(self, layout):
        self.layout = layout if layout in LAYOUTS else None

    def __enter__(self):
        global LAYOUT
        self.saved, LAYOUT = LAYOUT, self.layout

    def __exit__(self, *exc):
        global LAYOUT
        LAYOUT = self.saved


def responsive(wide, narrow) -> Raw:
    """Two layouts of one chart: the wide one, and one re-laid out for a phone (NARROW_W units wide; its ids end
    in "-n"). The stylesheet shows one of them by the width of the page (site.css: .layout-wide, .layout-narrow),
    so a narrow screen gets a figure drawn for it rather than the wide one scaled down, with or without Python.
    wide, narrow: the markup, or functions that draw it (called only for a layout that is drawn: see LAYOUT)."""
    parts = []
    for name, draw in (("wide", wide), ("narrow", narrow)):
        if shows(name):
            parts.append(str(el("div", draw() if callable(draw) else draw, class_=f"layout-{name}")))
    return Raw("".join(parts))


def nice_ticks(lo: float, hi: float, n: int = 5, base: float = 1) -> list:
    """About n evenly spaced round values covering [lo, hi] (only those inside it).

    base: if not 1, steps are base times a power of two (1024 gives 4096, 8192, 16384, … for token counts)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"nice_ticks: bounds must be finite, got {lo!r}, {hi!r}")
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        return [lo]
    raw = (hi - lo) / base / max(1, n)
    if base != 1:
        # binary units: a power-of-two number of them (1k, 2k, 4k, 8k, 16k ... for base 1024), never a fraction
        step = base * 2.0 ** max(0, math.ceil(math.log2(raw) - 1e-9))
    else:
        mag = 10.0 ** math.floor(math.log10(raw))
        step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9)
    out = []
    k = first
    while k * step <= hi * (1 + 1e-12) + 1e-12:
        v = round(k * step, 10)  # no 0.6000000000000001
        out.append(int(v) if float(v).is_integer() else v)
        k += 1
    return out


def log_ticks(lo: float, hi: float) -> list:
    """Powers of ten inside [lo, hi]; when [lo, hi] spans under 2.5 decades also 2x and 5x."""
    if lo <= 0 or hi <= 0:
        raise ValueError(f"log_ticks: bounds must be > 0, got {lo!r}, {hi!r}")
    if hi < lo:
        lo, hi = hi, lo
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    mults = (1,) if math.log10(hi / lo) >= 2.5 else (1, 2, 5)
    out = []
    for e in range(a, b + 1):
        for m in mults:
            v = m * 10.0**e
            if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9):
                out.append(v)
    return out


def si(v: float, unit: str = "") -> str:
    """A tick label: 0.5, 3, 1.5k, 20M, 2T (decimal prefixes)."""
    if v == 0:
        return "0" + unit
    a = abs(v)
    for p, s in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= p:
            return f"{v / p:g}{s}{unit}"
    if a >= 1:
        return f"{v:g}{unit}"
    return f"{v:.3g}{unit}"


class LinearScale:
    """domain [d0, d1] -> range [r0, r1], linearly (extrapolates outside)."""

    def __init__(self, d0: float, d1: float, r0: float, r1: float):
        if d0 == d1:
            d1 = d0 + 1
        self.d0, self.d1, self.r0, self.r1 = float(d0), float(d1), float(r0), float(r1)

    def __call__(self, v: float) -> float:
        return self.r0 + (float(v) - self.d0) * (self.r1 - self.r0) / (self.d1 - self.d0)

    def ticks(self, n: int = 5, base: float = 1) -> list:
        return nice_ticks(min(self.d0, self.d1), max(self.d0, self.d1), n, base)


class LogScale:
    """domain [d0, d1] (both > 0) -> range [r0, r1], logarithmically."""

    def __init__(self, d0: float, d1: float, r0: float, r1: float):
        if d0 <= 0 or d1 <= 0:
            raise ValueError(f"LogScale: domain must be > 0, got {d0!r}, {d1!r}")
        if d0 == d1:
            d1 = d0 * 10
        self.d0, self.d1, self.r0, self.r1 = float(d0), float(d1), float(r0), float(r1)
        self._l0, self._span = math.log10(self.d0), math.log10(self.d1) - math.log10(self.d0)

    def __call__(self, v: float) -> float:
        v = max(float(v), 1e-300)
        return self.r0 + (math.log10(v) - self._l0) * (self.r1 - self.r0) / self._span

    def ticks(self, n: int = 0) -> list:
        return log_ticks(min(self.d0, self.d1), max(self.d0, self.d1))

    @staticmethod
    def decades(lo: float, hi: float) -> tuple:
        """[lo, hi] widened to whole powers of ten."""
        return 10.0 ** math.floor(math.log10(lo)), 10.0 ** math.ceil(math.log10(hi))


def axis(scale, *, at: float, side: str, ticks=None, fmt=si, label: str = "", length: float = 5, label_pos=None) -> Raw:
    """An axis line with ticks and labels. side: 'bottom' or 'left'. `at` is the pixel where the axis sits
    (the y of a bottom axis, the x of a left axis)."""
    ticks = scale.ticks() if ticks is None else ticks
    lo, hi = sorted((scale.r0, scale.r1))
    parts = []
    if side == "bottom":
        parts.append(el("line", x1=lo, y1=at, x2=hi, y2=at, class_="axis-line"))
        for t in ticks:
            x = scale(t)
            parts.append(el("line", x1=x, y1=at, x2=x, y2=at + length, class_="tick"))
            parts.append(el("text", fmt(t), x=x, y=at + length + 13, class_="tick-label", text_anchor="middle"))
        if label:
            lx, ly = label_pos or ((lo + hi) / 2, at + length + 32)
            parts.append(el("text", label, x=lx, y=ly, class_="axis-label", text_anchor="middle"))
        return el("g", parts, class_="axis axis-x")
    if side == "left":
        parts.append(el("line", x1=at, y1=lo, x2=at, y2=hi, class_="axis-line"))
        for t in ticks:
            y = scale(t)
            parts.append(el("line", x1=at - length, y1=y, x2=at, y2=y, class_="tick"))
            parts.append(el("text", fmt(t), x=at - length - 3, y=y + 4, class_="tick-label", text_anchor="end"))
        if label:
            lx, ly = label_pos or (at, lo - 10)
            parts.append(el("text", label, x=lx, y=ly, class_="axis-label", text_anchor="start"))
        return el("g", parts, class_="axis axis-y")
    raise ValueError(f"axis: side must be 'bottom' or 'left', got {side!r}")


def grid(x=None, y=None, xticks=(), yticks=()) -> Raw:
    """Light grid lines at the given ticks (x: vertical lines across y's range, and vice versa)."""
    parts = []
    if x is not None and y is not None:
        y0, y1 = y.r0, y.r1
        x0, x1 = x.r0, x.r1
        parts += [el("line", x1=x(t), y1=y0, x2=x(t), y2=y1) for t in xticks]
        parts += [el("line", x1=x0, y1=y(t), x2=x1, y2=y(t)) for t in yticks]
    return el("g", parts, class_="grid")


def path_d(points) -> str:
    """An SVG path 'd' through points [(px, py), ...]: 'M x,y L x,y …' (empty for no points)."""
    out = []
    for i, (px, py) in enumerate(points):
        out.append(("M" if i == 0 else "L") + f"{num(px)},{num(py)}")
    return "".join(out)


class Segment(NamedTuple):
    """One part of a stacked bar: its value, its tooltip, its CSS classes; `at`: where it starts, in the bar's
    units (a timeline step's start), when it is not right after the one before; `attrs`: more attributes
    (data_bytes=...), written after the class."""

    value: float
    title: str
    cls: str
    at: float | None = None
    attrs: dict | None = None


def stacked_bar(
    segments, *, x0: float, y: float, height: float, span: float, total: float, min_width: float = 0.5
) -> list:
    """A horizontal stacked bar: a <rect> with a <title> per segment of positive value, `span` pixels wide for
    `total` (a segment of value v is span * v / total wide, at least min_width so a sliver stays visible).
    Segments run end to end from x0; one with `at` starts at x0 + span * at / total."""
    out = []
    x = x0
    for seg in segments:
        v = seg.value
        if v <= 0:
            continue
        if seg.at is not None:
            x = x0 + span * seg.at / total
        w = span * v / total
        out.append(
            el(
                "rect",
                el("title", seg.title),
                x=x,
                y=y,
                width=max(w, min_width),
                height=height,
                class_=seg.cls,
                **(seg.attrs or {}),
            )
        )
        x += w
    return out


def step_segment(step, cls: str) -> Segment:
    """A step of a trace (index, what, seconds, elapsed_s: the running total, this step included) as a timeline
    segment that starts where the steps before it end (the load and phases step-throughs)."""
    from . import fmt

    return Segment(
        step.seconds,
        f"{step.index + 1}. {step.what}: {fmt.seconds(step.seconds)}",
        cls,
        at=step.elapsed_s - step.seconds,
    )


class Frame:
    """The plot area inside a width x height chart with margins (left, top, right, bottom)."""

    def __init__(
        self, width: float, height: float, left: float = 64, top: float = 28, right: float = 24, bottom: float = 48
    ):
        self.width, self.height = width, height
        self.x0, self.x1 = left, width - right
        self.y0, self.y1 = top, height - bottom  # y0 top, y1 bottom

    def linear_x(self, d0, d1):
        return LinearScale(d0, d1, self.x0, self.x1)

    def log_x(self, d0, d1):
        return LogScale(d0, d1, self.x0, self.x1)

    def linear_y(self, d0, d1):
        return LinearScale(d0, d1, self.y1, self.y0)

    def log_y(self, d0, d1):
        return LogScale(d0, d1, self.y1, self.y0)

    def clip(self, cid: str) -> Raw:
        """A clipPath of the plot area (use clip_path=f"url(#{cid})")."""
        return el(
            "clipPath", el("rect", x=self.x0, y=self.y0, width=self.x1 - self.x0, height=self.y1 - self.y0), id_=cid
        )


# ---------------------------------------------------------------------------------------------------------
# Page bits shared by the chart figures
# ---------------------------------------------------------------------------------------------------------
def readout_attrs(name: str, value) -> dict:
    """The attributes that mark a computed number (the DESIGN.md contract): data-readout=name, data-value=raw,
    as keyword arguments for el(). `readout` uses them; so does a number set inside a sentence or a chart."""
    from . import fmt

    return {"data_readout": name, "data_value": fmt.raw(value)}


def readout(
    name: str, value, text: str, label: str, unit: str = "", extra=None, *, output_id=None, unit_id=None
) -> Raw:
    """One computed number: <output data-readout=name data-value=raw> (the DESIGN.md contract).
    `extra`: markup after the number (the calculator's "how is this computed?" slot).
    `output_id`, `unit_id`: ids for the number and its unit, for a figure whose frame patches rewrite them."""
    children = [
        el("dt", label),
        el(
            "dd",
            [
                el("output", text, id_=output_id, **readout_attrs(name, value)),
                el("span", unit, class_="unit", id_=unit_id) if unit else "",
            ],
        ),
    ]
    if extra is not None:
        children.append(extra)
    return el("div", children, class_=f"readout readout-{name}")


def course_profile_note() -> Raw:
    """The line a figure that illustrates the module's text carries: its speeds use the course profile."""
    return el(
        "p",
        [
            el("strong", "Course profile"),
            ": speeds here use the module's model (η = 0.7 of peak bandwidth for decode, 0.5 of peak for prefill, "
            "50 µs per token), as the module's text does. The calculator's measured profile estimates what "
            "llama.cpp reaches on real hardware.",
        ],
        class_="note profile-note",
        data_profile="course",
    )


def presets(spec, items, label: str = "Try this") -> Raw:
    """One-click states: items [(text, query, title)], each a <button data-set-state='{...every field...}'>.

    The page's generic set-state glue (site/assets/setstate.js) writes those values into the form and fires its
    input event, so a preset takes the same form -> state -> render -> URL path as any control, without a
    reload. The values are the whole state the query stands for (every field), so a preset never inherits
    settings from the state it was clicked in. data-query holds the same state as a URL query."""
    import json

    buttons = []
    for text, query, title in items:
        state, _ = spec.from_query(query)
        values = {f.key: f.encode(getattr(state, f.key)) for f in spec.fields}
        buttons.append(
            el(
                "li",
                el(
                    "button",
                    text,
                    type="button",
                    class_="preset",
                    title=title or None,
                    data_set_state=json.dumps(values, separators=(",", ":")),
                    data_query=query or "?",
                ),
            )
        )
    return el("nav", [el("span", label, class_="presets-label"), el("ul", buttons)], class_="presets", aria_label=label)


_PRESETS_CACHE: dict = {}


def presets_once(spec, make_items, label: str = "Try this") -> Raw:
    """presets(spec, make_items(), label), built once per catalogue: the preset states are fixed, but their
    options depend on perf_model's MODELS and MACHINES, to which a reader's own model or machine is added."""
    import perf_model as pm

    key = (spec.name, label, tuple(pm.MODELS), tuple(pm.MACHINES))
    hit = _PRESETS_CACHE.get(key)
    if hit is None:
        if len(_PRESETS_CACHE) >= 64:
            _PRESETS_CACHE.clear()
        hit = _PRESETS_CACHE[key] = presets(spec, make_items(), label)
    return hit


def spread_labels(ys: list, min_gap: float, lo: float, hi: float) -> list:
    """Label positions near the wanted ys (same order), at least min_gap apart, kept inside [lo, hi] when
    there is room: push down from the top, then, if the stack ran past hi, push up from the bottom."""
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    out = list(ys)
    prev = None
    for i in order:
        y = max(out[i], lo) if prev is None else max(out[i], prev + min_gap)
        out[i] = y
        prev = y
    prev = None
    for i in reversed(order):
        y = min(out[i], hi) if prev is None else min(out[i], prev - min_gap)
        out[i] = y
        prev = y
    return out


def edge_label(text: str, cx: float, x0: float, x1: float, y: float) -> Raw:
    """A label under a timeline cursor at cx, kept inside [x0, x1]: centred, or flush with the nearer edge
    (the load and phases step-throughs)."""
    if cx > x1 - 80:
        return el("text", text, x=x1, y=y, class_="strip-elapsed", text_anchor="end")
    if cx < x0 + 80:
        return el("text", text, x=x0, y=y, class_="strip-elapsed")
    return el("text", text, x=cx, y=y, class_="strip-elapsed", text_anchor="middle")


def step_list(rows, current: int, *, label: str, id_: str) -> Raw:
    """The step-throughs' list of steps (load, phases): rows [(what, detail, cls)], one <li> each, numbered from 1;
    the row at index `current` is "now" (aria-current="step"), those before it "done", the rest "todo"; `cls` is
    added to the row's classes (e.g. "step-tier-vram")."""
    items = []
    for j, (what, detail, cls) in enumerate(rows):
        status = "now" if j == current else ("done" if j < current else "todo")
        items.append(
            el(
                "li",
                [
                    el("span", str(j + 1), class_="step-num"),
                    el("span", what, class_="step-what"),
                    el("span", detail, class_="step-detail"),
                ],
                class_=f"step step-{status} {cls}",
                aria_current="step" if status == "now" else None,
            )
        )
    return el("ol", items, class_="step-list", aria_label=label, id_=id_)


def inner(markup) -> str:
    """The content of one element built by el() (its start tag ends at the first '>': attributes are escaped):
    what a frame patch writes into the element already in the page."""
    s = str(markup)
    return s[s.index(">") + 1 : s.rindex("</")]
