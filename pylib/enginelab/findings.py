"""The advisor's findings as HTML: what holds a setup back, its evidence, and the changes that fix it, each
with an Apply button (data-set-state) and its flags for llama.cpp, vLLM and SGLang.

Shared by the calculator (findings under its numbers, from its Scenario) and the advisor page. The findings
themselves come from enginelab.advisor (diagnosis.advise_setup); this module only arranges them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import perf_model as pm

from . import advisor as adv
from . import chart, fmt
from .svg import Raw, data_details, el, svg, table

CAUSE_LABELS = {
    "over_ask": "Over-ask: load fails",
    "sysmem_spill": "Windows: spills to system memory",
    "uneven_split": "Uneven GPU split",
    "partial_offload": "Partial offload",
    "kv_competes": "KV cache competes with weights",
    "kv_overflow_long_context": "Long context",
    "pp_bound_by_pcie": "Prompt processing bound by PCIe",
    "too_many_threads": "Too many CPU threads",
    "too_few_threads": "Too few CPU threads",
    "concurrency_cap": "Concurrency cap",
    "throughput_flat": "Under load (simulated)",
}


@dataclass(frozen=True)
class Findings:
    """What the advisor found for one setup."""

    findings: tuple  # advisor Finding objects, most severe first
    outcome: object  # the setup's advisor Outcome (None when the advisor could not judge it)
    error: str | None  # why the advisor could not judge it
    subject: str  # "<model> <quant> on <machine>", for the chart's description


def for_setup(setup, subject: str, known=None) -> Findings:
    """Diagnose a Setup. known: (placement, decode, prefill) already computed for it (see advisor.evaluate)."""
    try:
        outcome = adv.evaluate(setup, known=known)
        return Findings(tuple(adv.advise_setup(setup, outcome)), outcome, None, subject)
    except Exception as e:  # noqa: BLE001  bad settings or a gap in the model: shown, never a crash
        return Findings((), None, f"{type(e).__name__}: {e}", subject)


def for_scenario(scn) -> Findings:
    """The findings of a calculator Scenario, from its own placement and timings (placed once)."""
    s = scn.state
    setup = adv.setup_from_state(s.as_dict())
    known = (scn.placement, scn.decode, scn.prefill) if scn.placement is not None else None
    return for_setup(setup, f"{s.model} {pm.quant_short(s.quant)} on {s.machine}", known)


def apply_button(apply: dict, label: str, what: str) -> Raw:
    return el(
        "button",
        label,
        type="button",
        class_="apply",
        data_set_state=json.dumps(apply, sort_keys=True, separators=(",", ":")),
        aria_label=f"{label}: {what}",
    )


def flags_list(flags: dict) -> Raw:
    return el(
        "dl",
        [el("div", [el("dt", k), el("dd", el("code", v))], class_="flag") for k, v in flags.items()],
        class_="flags",
    )


def change_item(c, i: int, apply_keys=None) -> Raw:
    can = apply_keys is None or set(c.apply) <= set(apply_keys)
    return el(
        "li",
        [
            el(
                "div",
                [
                    el("code", c.title, class_="change-title"),
                    apply_button(c.apply, "Apply", c.title)
                    if can
                    else el("small", "(set it on the advisor page)", class_="note"),
                ],
                class_="change-head",
            ),
            el("p", c.effect, class_="effect", data_gain=fmt.raw(c.gain), data_metric=c.metric),
            el("p", c.note, class_="note") if c.note else "",
            el(
                "details",
                [el("summary", "Flags (llama.cpp, vLLM, SGLang)"), flags_list(c.flags)],
                class_="flag-details",
            ),
        ],
        class_="change",
        data_rank=str(i + 1),
    )


def finding_section(f, apply_keys=None) -> Raw:
    return el(
        "section",
        [
            el("h3", [el("span", CAUSE_LABELS[f.cause], class_="cause"), " ", f.title]),
            el("ul", [el("li", t) for t in f.evidence_text], class_="evidence"),
            el("ol", [change_item(c, i, apply_keys) for i, c in enumerate(f.changes)], class_="changes")
            if f.changes
            else el("p", "No single change helps here.", class_="note"),
        ],
        class_=f"finding finding-{f.cause}",
        data_cause=f.cause,
    )


GW, ROW, PAD = 480, 40, 12


def gains(data) -> list:
    """Decode-speed changes across findings, one row per distinct apply, fastest first."""
    seen, rows = set(), []
    for f in data.findings:
        for c in f.changes:
            if c.metric != "decode_tok_s" or c.after["decode_tok_s"] is None:
                continue
            key = json.dumps(c.apply, sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            rows.append(c)
    rows.sort(key=lambda c: -c.after["decode_tok_s"])
    return rows[:6]


def gains_chart(data, narrow: bool = False) -> Raw | None:
    """Decode speed after each suggested change, a bar each, with today's speed as a line. narrow: drawn for a
    phone (chart.NARROW_W wide)."""
    rows = gains(data)
    if not rows:
        return None
    GW = chart.NARROW_W if narrow else globals()["GW"]  # noqa: N806  (this drawing's width)
    now = data.outcome.decode_tok_s
    top = max([c.after["decode_tok_s"] for c in rows] + [now or 0.0]) * 1.08
    left, right = PAD, GW - PAD - 64
    span = right - left
    x = lambda v: left + span * v / top  # noqa: E731
    parts = []
    for i, c in enumerate(rows):
        y0 = PAD + 18 + i * ROW
        v = c.after["decode_tok_s"]
        parts.append(
            el(
                "g",
                [
                    el("text", c.title, x=left, y=y0 + 11, class_="gain-label"),
                    el(
                        "rect",
                        el("title", f"{c.title}: {fmt.rate(v)} tok/s"),
                        x=left,
                        y=y0 + 16,
                        width=max(0.5, x(v) - left),
                        height=14,
                        class_="gain-bar",
                    ),
                    el("text", f"{fmt.rate(v)} tok/s", x=x(v) + 4, y=y0 + 27, class_="gain-value"),
                ],
                class_="gain-row",
            )
        )
    h = PAD + 18 + len(rows) * ROW + PAD
    if now:
        parts.append(el("line", x1=x(now), x2=x(now), y1=PAD + 14, y2=h - PAD + 2, class_="now-line"))
        right_half = x(now) > GW / 2  # keep the label inside the chart: left of the line on the right half
        parts.append(
            el(
                "text",
                f"now {fmt.rate(now)} tok/s",
                x=x(now) + (-4 if right_half else 4),
                y=PAD + 8,
                class_="now-label",
                text_anchor="end" if right_half else None,
            )
        )
    else:
        parts.append(el("text", "now: does not load", x=left, y=PAD + 8, class_="now-label"))
    desc = (
        f"Decode speed after each suggested change for {data.subject}: "
        + "; ".join(f"{c.title} {fmt.rate(c.after['decode_tok_s'])} tok/s" for c in rows)
        + (f"; now {fmt.rate(now)} tok/s." if now else "; now it does not load.")
    )
    return svg(
        parts,
        width=GW,
        height=h,
        title="Decode speed after each suggested change",
        desc=desc,
        id_="advisor-chart-n" if narrow else "advisor-chart",
        class_="chart advisor-chart",
    )


def gains_table(data) -> Raw:
    rows = gains(data)
    now = data.outcome.decode_tok_s
    return data_details(
        "Data table",
        table(
            "Decode tok/s before and after each suggested change (perf_model)",
            ["Change", "-ngl before", "-ngl after", "Decode before", "Decode after", "VRAM after (GB)"],
            [
                [
                    c.title,
                    str(c.before["n_gpu_layers"]),
                    str(c.after["n_gpu_layers"]),
                    fmt.rate(now),
                    fmt.rate(c.after["decode_tok_s"]),
                    f"{c.after['vram_gb']:.2f}",
                ]
                for c in rows
            ],
        ),
    )


def block(data, apply_keys=None, with_chart: bool = True) -> Raw:
    head = el(
        "div",
        [
            el("h2", "What holds this setup back", id_="advisor-findings-title"),
            el(
                "button",
                "Undo",
                type="button",
                data_undo="",
                disabled=True,
                aria_label="Undo the last applied change",
                class_="undo",
            ),
        ],
        class_="findings-head",
    )
    if data.error:
        body = [
            el(
                "div",
                [el("strong", "The advisor cannot judge these settings: "), data.error],
                class_="alert alert-error",
                role="alert",
            )
        ]
    elif not data.findings:
        o = data.outcome
        body = [
            el(
                "p",
                [
                    el("strong", "Nothing to fix. "),
                    f"Every layer sits where it runs fastest for this workload: decode "
                    f"{fmt.rate(o.decode_tok_s)} tok/s. Faster needs a smaller quant, a faster GPU, or "
                    f"speculative decoding (pick a draft model above).",
                ],
                class_="no-findings",
                data_findings="0",
            )
        ]
    else:
        body = [finding_section(f, apply_keys) for f in data.findings]
        wide = gains_chart(data) if with_chart else None
        if wide is not None:
            body.append(el("figure", [chart.responsive(wide, gains_chart(data, narrow=True))], class_="chart-wrap"))
            body.append(gains_table(data))
    return el(
        "section",
        [head] + body,
        class_="advisor-findings",
        aria_labelledby="advisor-findings-title",
        data_findings=str(len(data.findings)),
    )
