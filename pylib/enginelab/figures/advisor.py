"""The bottleneck advisor: the calculator's numbers, then what is slowing this setup down and which flags fix it.

Takes the calculator's URL state (model, machine, quant, kv, ctx, ngl, tokens, n_cpu_moe) plus the workload the
calculator does not hold (CPU threads, -np slots, concurrent users, -ub/-b), a tuning goal, a LoRA adapter and a
speculative-decoding draft. Every number comes from the course modules: advisor.py (built on perf_model) for the
findings, recipes, LoRA and speculative decoding, and the calculator figure's own compute/render for the bars.

Each suggested change is a button carrying `data-set-state` (the state keys it sets, as JSON); the page's
generic glue (site/assets/setstate.js) puts those values into the form and fires its input event, so an apply
goes through the same form -> state -> render -> URL path as any other edit, and `data-undo` restores the
previous values. `findings_html(state)` returns the findings block alone, for embedding in another figure.
"""

from __future__ import annotations

import json

import perf_model as pm

from .. import advisor as adv
from .. import fmt
from ..chart import readout as _readout  # the data-readout contract, in one place
from ..state import Choice, Float, Int, Spec
from ..svg import Raw, data_details, el, svg, table
from . import calculator

ID = "advisor"
TITLE = "Bottleneck advisor"
LEDE = (
    "The calculator's numbers for a setup, then what holds it back, in the module's terms, with the exact "
    "flags that fix it and their effect, computed by running the model again. One click applies a change."
)

READOUTS = ("advice_count", "advisor_decode_tok_s", "aggregate_tok_s")
CALC_KEYS = tuple(f.key for f in calculator.SPEC.fields)


_PARAMS: dict = {}


def _params(key: str) -> int:
    if key not in _PARAMS:
        _PARAMS[key] = pm.MODELS[key].total_params()
    return _PARAMS[key]


def _draft_options(partial):
    """Catalog models under 0.6x the target's parameters: the candidates for a draft."""
    size = _params(partial["model"])
    opts = [("none", "none")]
    for k, m in pm.MODELS.items():
        if k != partial["model"] and _params(k) < 0.6 * size:
            opts.append((k, m.name))
    return opts


def _goal_options(partial):
    return [("none", "none")] + list(adv.GOALS.items())


SPEC = Spec(
    ID,
    list(calculator.SPEC.fields)
    + [
        Int(
            "threads",
            "CPU threads (-t)",
            default="auto",
            auto="auto",
            min=1,
            max=64,
            help="auto: llama.cpp's default, the physical cores.",
        ),
        Int(
            "np",
            "Slots (-np)",
            default=1,
            min=1,
            max=64,
            widget="number",
            help="Sequences llama-server decodes at once.",
        ),
        Int(
            "users",
            "Concurrent users",
            default=1,
            min=1,
            max=256,
            widget="number",
            help="Requests the workload makes at the same time.",
        ),
        Int("ub", "Micro-batch (-ub)", default=512, min=32, max=8192, step=32, widget="number"),
        Int("b", "Logical batch (-b)", default=2048, min=32, max=65536, step=32, widget="number"),
        Choice("goal", "Goal (tuning recipe)", default="none", options=_goal_options),
        Int("lora_rank", "LoRA adapter rank (0: none or merged)", default=0, min=0, max=512, widget="number"),
        Choice(
            "lora_targets",
            "LoRA target modules",
            default="qkvo",
            options=[("qkvo", "q, k, v, o_proj"), ("all", "attention + MLP (q…o, gate, up, down)")],
            visible=lambda p: p["lora_rank"] > 0,
        ),
        Choice("draft", "Draft model (speculative decoding)", default="none", options=_draft_options),
        Float(
            "acceptance",
            "Draft acceptance rate",
            default=0.7,
            min=0.0,
            max=1.0,
            step=0.05,
            visible=lambda p: p["draft"] != "none",
        ),
        Int(
            "n_draft",
            "Draft tokens (--spec-draft-n-max)",
            default=3,
            min=1,
            max=16,
            widget="number",
            visible=lambda p: p["draft"] != "none",
        ),
    ],
)
LORA_TARGETS = {
    "qkvo": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "all": ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
}
CAUSE_LABELS = {
    "over_ask": "Over-ask: load fails",
    "partial_offload": "Partial offload",
    "kv_competes": "KV cache competes with weights",
    "kv_overflow_long_context": "Long context",
    "pp_bound_by_pcie": "Prompt processing bound by PCIe",
    "too_many_threads": "Too many CPU threads",
    "concurrency_cap": "Concurrency cap",
}


def default_state():
    return SPEC.default()


def _as_state(state):
    """A SPEC state from a State, a dict (missing keys default) or a query string."""
    if isinstance(state, str):
        return SPEC.from_query(state)[0]
    if isinstance(state, dict):
        return SPEC.coerce({**SPEC.default().as_dict(), **state})[0]
    if not isinstance(state, SPEC.State) and hasattr(state, "as_dict"):  # e.g. the calculator's state
        return SPEC.coerce({**SPEC.default().as_dict(), **state.as_dict()})[0]
    return state


def _state_dict(state) -> dict:
    return {f.key: getattr(state, f.key) for f in SPEC.fields}


# ---------------------------------------------------------------------------------------------------------
# Compute
# ---------------------------------------------------------------------------------------------------------
def compute(state) -> dict:
    state = _as_state(state)
    calc_state, _ = calculator.SPEC.coerce({k: getattr(state, k) for k in CALC_KEYS})
    data = {
        "state": state,
        "calc": calculator.compute(calc_state),
        "error": None,
        "findings": [],
        "outcome": None,
        "recipe": None,
        "lora": None,
        "spec": None,
        "notes": [],
    }
    data["calc"]["with_findings"] = False  # this page shows the findings itself, with more around them
    sd = _state_dict(state)
    sd["b"] = max(state.b, state.ub)
    try:
        setup = adv.setup_from_state(sd)
        data["setup"] = setup
        data["outcome"] = adv.evaluate(setup)
        data["findings"] = adv.advise_setup(setup, data["outcome"])
    except Exception as e:  # noqa: BLE001  bad settings or a gap in the model: shown, never a crash
        data["error"] = f"{type(e).__name__}: {e}"
        data["readouts"] = {"advice_count": None, "advisor_decode_tok_s": None, "aggregate_tok_s": None}
        return data
    o = data["outcome"]
    data["readouts"] = {
        "advice_count": len(data["findings"]),
        "advisor_decode_tok_s": o.decode_tok_s,
        "aggregate_tok_s": o.aggregate_tok_s,
    }
    if state.goal != "none":
        try:
            data["recipe"] = adv.recipe(
                state.goal,
                state.model,
                state.machine,
                state.quant,
                context=max(256, state.tokens),
                users=max(2, state.users),
                tokens=state.tokens,
            )
        except Exception as e:  # noqa: BLE001  a gap in the course module: say so, keep the page
            data["notes"].append(f"Recipe: {type(e).__name__}: {e}")
    if state.lora_rank > 0:
        try:
            targets = LORA_TARGETS[state.lora_targets]
            if pm.MODELS[state.model].model_type == "phi3":  # Phi-3 fuses q/k/v and gate/up
                targets = {"qkvo": ("qkv_proj", "o_proj"), "all": ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")}[
                    state.lora_targets
                ]
            data["lora"] = adv.lora_cost(
                state.model,
                state.lora_rank,
                targets,
                placement=o.placement if o.fits else None,
                context=state.tokens,
                prompt_tokens=state.tokens,
                n_adapters=1,
            )
        except Exception as e:  # noqa: BLE001
            data["notes"].append(f"LoRA: {type(e).__name__}: {e}")
    if state.draft != "none":
        if not o.fits:
            data["notes"].append("Speculative decoding: the target does not load with these settings.")
        else:
            try:
                data["spec"] = adv.speculative(
                    o.placement, state.draft, state.acceptance, state.n_draft, context=state.tokens
                )
            except Exception as e:  # noqa: BLE001
                data["notes"].append(f"Speculative decoding: {type(e).__name__}: {e}")
    return data


def describe(data) -> str:
    fs = data["findings"]
    head = calculator.describe(data["calc"])
    if data["error"]:
        return f"{head} Advisor: {data['error']}"
    if not fs:
        return f"{head} Advisor: nothing to fix."
    best = next((f.changes[0] for f in fs if f.changes), None)
    tail = f" Best change: {best.title} ({best.effect})." if best else ""
    return (
        f"{head} Advisor: {len(fs)} finding{'s' if len(fs) != 1 else ''}: "
        f"{', '.join(CAUSE_LABELS[f.cause] for f in fs)}.{tail}"
    )


# ---------------------------------------------------------------------------------------------------------
# Render
# ---------------------------------------------------------------------------------------------------------
def _apply_button(apply: dict, label: str, what: str) -> Raw:
    return el(
        "button",
        label,
        type="button",
        class_="apply",
        data_set_state=json.dumps(apply, sort_keys=True, separators=(",", ":")),
        aria_label=f"{label}: {what}",
    )


def _flags(flags: dict) -> Raw:
    return el(
        "dl",
        [el("div", [el("dt", k), el("dd", el("code", v))], class_="flag") for k, v in flags.items()],
        class_="flags",
    )


def _change_item(c, i: int, apply_keys=None) -> Raw:
    can = apply_keys is None or set(c.apply) <= set(apply_keys)
    return el(
        "li",
        [
            el(
                "div",
                [
                    el("code", c.title, class_="change-title"),
                    _apply_button(c.apply, "Apply", c.title)
                    if can
                    else el("small", "(set it on the advisor page)", class_="note"),
                ],
                class_="change-head",
            ),
            el("p", c.effect, class_="effect", data_gain=fmt.raw(c.gain), data_metric=c.metric),
            el("p", c.note, class_="note") if c.note else "",
            el("details", [el("summary", "Flags (llama.cpp, vLLM, SGLang)"), _flags(c.flags)], class_="flag-details"),
        ],
        class_="change",
        data_rank=str(i + 1),
    )


def _finding(f, apply_keys=None) -> Raw:
    return el(
        "section",
        [
            el("h3", [el("span", CAUSE_LABELS[f.cause], class_="cause"), " ", f.title]),
            el("ul", [el("li", t) for t in f.evidence_text], class_="evidence"),
            el("ol", [_change_item(c, i, apply_keys) for i, c in enumerate(f.changes)], class_="changes")
            if f.changes
            else el("p", "No single change helps here.", class_="note"),
        ],
        class_=f"finding finding-{f.cause}",
        data_cause=f.cause,
    )


GW, ROW, PAD = 480, 40, 12


def _gains(data) -> list:
    """Decode-speed changes across findings, one row per distinct apply, fastest first."""
    seen, rows = set(), []
    for f in data["findings"]:
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


def gains_chart(data) -> Raw | None:
    rows = _gains(data)
    if not rows:
        return None
    now = data["outcome"].decode_tok_s
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
    s = data["state"]
    desc = (
        f"Decode speed after each suggested change for {s.model} {s.quant} on {s.machine}: "
        + "; ".join(f"{c.title} {fmt.rate(c.after['decode_tok_s'])} tok/s" for c in rows)
        + (f"; now {fmt.rate(now)} tok/s." if now else "; now it does not load.")
    )
    return svg(
        parts,
        width=GW,
        height=h,
        title="Decode speed after each suggested change",
        desc=desc,
        id_="advisor-chart",
        class_="chart advisor-chart",
    )


def _gains_table(data) -> Raw:
    rows = _gains(data)
    now = data["outcome"].decode_tok_s
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


def _advisor_readouts(data) -> Raw:
    r, s = data["readouts"], data["state"]
    n = r["advice_count"]
    items = [
        _readout("advice_count", n, "—" if n is None else str(n), "Findings"),
        _readout(
            "advisor_decode_tok_s",
            r["advisor_decode_tok_s"],
            fmt.rate(r["advisor_decode_tok_s"]),
            "Decode with -t " + ("default" if s.threads == "auto" else str(s.threads)),
            "tok/s",
        ),
    ]
    if s.users > 1 or s.np > 1:
        items.append(
            _readout(
                "aggregate_tok_s",
                r["aggregate_tok_s"],
                fmt.rate(r["aggregate_tok_s"]),
                f"All sequences ({data['outcome'].active if data['outcome'] else 0} at once)",
                "tok/s",
            )
        )
    return el("dl", items, class_="readouts advisor-readouts")


def _findings_block(data, apply_keys=None, with_chart: bool = True) -> Raw:
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
    if data["error"]:
        body = [
            el(
                "div",
                [el("strong", "The advisor cannot judge these settings: "), data["error"]],
                class_="alert alert-error",
                role="alert",
            )
        ]
    elif not data["findings"]:
        o = data["outcome"]
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
        body = [_finding(f, apply_keys) for f in data["findings"]]
        chart = gains_chart(data) if with_chart else None
        if chart is not None:
            body.append(el("figure", [chart], class_="chart-wrap"))
            body.append(_gains_table(data))
    return el(
        "section",
        [head] + body,
        class_="advisor-findings",
        aria_labelledby="advisor-findings-title",
        data_findings=str(len(data["findings"])),
    )


def findings_html(state, apply_keys=None, with_chart: bool = True) -> str:
    """The findings block alone (with its Apply / Undo buttons) for a state, for embedding in another figure.

    state: this figure's state, a dict or query string, or another figure's state with the same keys (the
    calculator's: the advisor's extra fields take their defaults). apply_keys: the state keys the host page
    can set; a change that needs others is listed without an Apply button. In the calculator:
    `findings_html(state, apply_keys=[f.key for f in calculator.SPEC.fields])`."""
    return str(_findings_block(compute(state), apply_keys, with_chart))


def _recipe_block(data) -> Raw:
    r = data["recipe"]
    s = data["state"]
    apply = {k: v for k, v in r.state.items() if k in SPEC.by_key and k != "goal"}
    changed = {k: v for k, v in apply.items() if str(v) != SPEC.by_key[k].encode(getattr(s, k))}
    return el(
        "section",
        [
            el("h2", f"Recipe: {adv.GOALS[r.goal]}"),
            el("p", [f"Engine: {r.engine}. "], class_="note"),
            el("ul", [el("li", e) for e in r.explanations], class_="recipe-steps"),
            el(
                "div",
                [
                    el("pre", el("code", r.command, id_="recipe-command")),
                    el("button", "Copy command", type="button", class_="copy", data_copy_target="#recipe-command"),
                ],
                class_="command",
            ),
            _apply_button(changed, "Use this configuration", adv.GOALS[r.goal])
            if changed
            else el("p", "The calculator already holds this configuration.", class_="note", data_recipe_applied="true"),
        ],
        class_="advisor-recipe",
        data_goal=r.goal,
    )


def _lora_block(data) -> Raw:
    c = data["lora"]
    rows = [
        [t, f"{v['A'][0]} x {v['A'][1]}", f"{v['B'][0]} x {v['B'][1]}", fmt.integer(v["params"])]
        for t, v in c["per_layer"].items()
    ]
    items = [
        f"Rank {c['rank']} on {', '.join(c['target_modules'])}: {fmt.integer(c['params_per_layer'])} numbers per "
        f"layer x {fmt.integer(c['params'] // c['params_per_layer'])} layers = {fmt.integer(c['params'])}, "
        f"{fmt.bytes_auto(c['bytes'])} at {c['dtype_bytes']} bytes each.",
        f"Per token (decode and prefill): {c['decode_flops_per_token'] / 1e6:,.1f} MFLOP and "
        f"{fmt.bytes_auto(c['decode_bytes_per_token'])} read on top of the base model.",
    ]
    if "lora_tok_s" in c:
        items.append(
            f"Decode {fmt.rate(c['base_tok_s'])} → {fmt.rate(c['lora_tok_s'])} tok/s unmerged "
            f"({c['slowdown']:.1%} slower, a lower bound: the extra matmuls also cost kernel launches)."
        )
    items.append(c["advice"])
    return el(
        "section",
        [
            el("h2", "Fine-tuned model: a runtime LoRA adapter"),
            el("ul", [el("li", t) for t in items]),
            _flags(c["flags"]),
            data_details(
                "Adapter shapes",
                table(
                    "A is r x in, B is out x r, per adapted projection and layer", ["Module", "A", "B", "Numbers"], rows
                ),
            ),
        ],
        class_="advisor-lora",
        data_lora_bytes=fmt.raw(c["bytes"]),
    )


SW, SH = 480, 220


def _ticks(top: float) -> list:
    """0 and round steps (1, 2 or 5 x 10^k) up to top: about four of them."""
    raw = top / 4
    mag = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 0.1
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    return [i * step for i in range(int(top / step) + 1)]


def _spec_chart(sp) -> Raw:
    left, right, top, bottom = 52, SW - 16, 16, SH - 34
    ymax = max([p["tok_s"] for p in sp["curve"]] + [sp["baseline_tok_s"]]) * 1.1
    x = lambda a: left + (right - left) * a  # noqa: E731
    y = lambda v: bottom - (bottom - top) * v / ymax  # noqa: E731
    pts = " ".join(f"{x(p['acceptance']):.1f},{y(p['tok_s']):.1f}" for p in sp["curve"])
    parts = [
        el("line", x1=left, x2=right, y1=bottom, y2=bottom, class_="axis"),
        el("line", x1=left, x2=left, y1=top, y2=bottom, class_="axis"),
    ]
    for a in (0, 0.25, 0.5, 0.75, 1.0):
        parts.append(el("text", f"{a:.0%}", x=x(a), y=bottom + 16, class_="tick", text_anchor="middle"))
    for v in _ticks(ymax):
        parts.append(el("text", fmt.rate(v) if v else "0", x=left - 6, y=y(v) + 4, class_="tick", text_anchor="end"))
    parts.append(el("text", "acceptance rate", x=(left + right) / 2, y=SH - 4, class_="tick", text_anchor="middle"))
    parts.append(
        el("line", x1=left, x2=right, y1=y(sp["baseline_tok_s"]), y2=y(sp["baseline_tok_s"]), class_="baseline")
    )
    parts.append(
        el(
            "text",
            f"without a draft {fmt.rate(sp['baseline_tok_s'])} tok/s",
            x=right,
            y=y(sp["baseline_tok_s"]) - 5,
            class_="baseline-label",
            text_anchor="end",
        )
    )
    parts.append(el("polyline", points=pts, class_="spec-curve"))
    parts.append(el("circle", cx=x(sp["acceptance"]), cy=y(sp["tok_s"]), r=4.5, class_="spec-point"))
    desc = (
        f"Decode tok/s with {sp['draft']} drafting {sp['n_draft']} tokens, against acceptance from 0 to 1: "
        f"{fmt.rate(sp['curve'][0]['tok_s'])} at 0, {fmt.rate(sp['curve'][-1]['tok_s'])} at 1, "
        f"{fmt.rate(sp['baseline_tok_s'])} without a draft."
    )
    return svg(
        parts,
        width=SW,
        height=SH,
        title="Speculative decoding: tok/s against acceptance",
        desc=desc,
        id_="spec-chart",
        class_="chart spec-chart",
    )


def _spec_block(data) -> Raw:
    sp = data["spec"]
    if not sp["fits"]:
        return el(
            "section",
            [
                el("h2", "Speculative decoding"),
                el("p", f"The draft and the target do not fit together: {sp.get('error')}"),
            ],
            class_="advisor-spec",
        )
    be = sp["break_even_acceptance"]
    items = [
        f"Expected tokens per target pass E = (1 − a^(n+1)) / (1 − a) = {sp['expected_tokens']:.2f} "
        f"at a = {sp['acceptance']:g}, n = {sp['n_draft']} (between 1 and {sp['n_draft'] + 1}).",
        f"One round: {sp['n_draft']} draft steps of {fmt.seconds(sp['t_draft_s'])} + one verify pass over "
        f"{sp['n_draft'] + 1} tokens of {fmt.seconds(sp['t_verify_s'])} = {fmt.seconds(sp['round_s'])}.",
        f"Decode {fmt.rate(sp['baseline_tok_s'])} → {fmt.rate(sp['tok_s'])} tok/s (x{sp['speedup']:.2f}); "
        + (
            f"drafting pays above {be:.0%} acceptance."
            if be is not None
            else "it never pays: even perfect acceptance cannot cover the draft's cost."
        ),
        f"The draft takes {fmt.gb(sp['draft_vram_bytes'])} of VRAM: the target keeps "
        f"{sp['target_gpu_layers_with_draft']} of its {sp['target_gpu_layers_before']} GPU layers.",
        f"Best --spec-draft-n-max at this acceptance: {sp['best_n_draft']} ({fmt.rate(sp['best_tok_s'])} tok/s).",
    ]
    return el(
        "section",
        [
            el("h2", f"Speculative decoding with {sp['draft']}"),
            el("ul", [el("li", t) for t in items]),
            el("figure", [_spec_chart(sp)], class_="chart-wrap"),
            _flags(sp["flags"]),
        ],
        class_="advisor-spec",
        data_spec_tok_s=fmt.raw(sp["tok_s"]),
        data_pays="true" if sp["pays"] else "false",
    )


def render(data) -> str:
    parts = [Raw(calculator.render(data["calc"])), _advisor_readouts(data), _findings_block(data)]
    for n in data["notes"]:
        parts.append(el("p", n, class_="note advisor-note"))
    if data.get("recipe"):
        parts.append(_recipe_block(data))
    if data.get("lora"):
        parts.append(_lora_block(data))
    if data.get("spec"):
        parts.append(_spec_block(data))
    return str(el("div", parts, class_="fig-advisor"))
