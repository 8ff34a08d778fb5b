"""The bottleneck advisor: the calculator's numbers, then what is slowing this setup down and which flags fix it.

Takes the calculator's URL state (model, machine, quant, kv, ctx, ngl, tokens, n_cpu_moe) plus the workload the
calculator does not hold (CPU threads, -np slots, concurrent users, -ub/-b), a tuning goal, a LoRA adapter and a
speculative-decoding draft. Every number comes from the course modules: advisor.py (built on perf_model) for the
findings, recipes, LoRA and speculative decoding, and the calculator figure's own compute/render for the bars.

Each suggested change is a button carrying `data-set-state` (the state keys it sets, as JSON); the page's
generic glue (site/assets/setstate.js) puts those values into the form and fires its input event, so an apply
goes through the same form -> state -> render -> URL path as any other edit, and `data-undo` restores the
previous values. The findings block itself is enginelab.findings, shared with the calculator.
"""

from __future__ import annotations

from dataclasses import dataclass

import perf_model as pm

from .. import advisor as adv
from .. import chart, findings, fmt, scenario
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
    key = partial["model"]
    # a catalog model by its key; your config, a dropped GGUF or a remote model by the Model the state names
    size = _params(key) if key in pm.MODELS else scenario.model_for(partial).total_params()
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
@dataclass(frozen=True)
class AdvisorReadouts:
    advice_count: int | None
    advisor_decode_tok_s: float | None
    aggregate_tok_s: float | None


@dataclass(frozen=True)
class AdvisorData:
    state: object  # this figure's state
    calc: scenario.Scenario  # the calculator's Scenario for the same model, machine and settings
    found: findings.Findings  # the advisor's findings for the whole setup (threads, slots, users, batches)
    readouts: AdvisorReadouts
    recipe: object = None  # advisor Recipe for state.goal
    lora: dict | None = None  # advisor.lora_cost
    spec: dict | None = None  # advisor.speculative
    notes: tuple = ()  # what could not be computed, in words

    @property
    def error(self) -> str | None:
        return self.found.error

    @property
    def findings(self) -> tuple:
        return self.found.findings

    @property
    def outcome(self):
        return self.found.outcome


def compute(state) -> AdvisorData:
    state = _as_state(state)
    # the calculator part of this page: the calculator's own Scenario (memoised: the calculator page and this one
    # share it), or with -ub/-b changed, one placed with this page's batches
    if (state.ub, state.b) == (pm.N_UBATCH_DEFAULT, pm.N_BATCH_DEFAULT):
        scn = scenario.build(calculator.SPEC.coerce({k: getattr(state, k) for k in CALC_KEYS})[0])
    else:
        scn = scenario.build(state)
    sd = _state_dict(state)
    sd["b"] = max(state.b, state.ub)
    # the calculator's Scenario was placed and timed with llama.cpp's default batches: reuse it when they hold
    same = (state.ub, sd["b"]) == (pm.N_UBATCH_DEFAULT, pm.N_BATCH_DEFAULT) and scn.placement is not None
    try:
        setup = adv.setup_from_state(sd)
    except Exception as e:  # noqa: BLE001  bad settings or a gap in the model: shown, never a crash
        found = findings.Findings((), None, f"{type(e).__name__}: {e}", "")
    else:
        found = findings.for_setup(
            setup,
            f"{state.model} {pm.quant_short(state.quant)} on {state.machine}",
            (scn.placement, scn.decode, scn.prefill) if same else None,
        )
    if found.error:
        return AdvisorData(state, scn, found, AdvisorReadouts(None, None, None))
    o = found.outcome
    readouts = AdvisorReadouts(len(found.findings), o.decode_tok_s, o.aggregate_tok_s)
    notes, recipe, lora, spec = [], None, None, None
    if state.goal != "none":
        try:
            recipe = adv.recipe(
                state.goal,
                state.model,
                state.machine,
                state.quant,
                context=max(256, state.tokens),
                users=max(2, state.users),
                tokens=state.tokens,
                profile=state.profile,
            )
        except Exception as e:  # noqa: BLE001  a gap in the course module: say so, keep the page
            notes.append(f"Recipe: {type(e).__name__}: {e}")
    if state.lora_rank > 0:
        try:
            targets = LORA_TARGETS[state.lora_targets]
            if pm.MODELS[state.model].model_type == "phi3":  # Phi-3 fuses q/k/v and gate/up
                targets = {"qkvo": ("qkv_proj", "o_proj"), "all": ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")}[
                    state.lora_targets
                ]
            lora = adv.lora_cost(
                state.model,
                state.lora_rank,
                targets,
                placement=o.placement if o.fits else None,
                context=state.tokens,
                prompt_tokens=state.tokens,
                n_adapters=1,
            )
        except Exception as e:  # noqa: BLE001
            notes.append(f"LoRA: {type(e).__name__}: {e}")
    if state.draft != "none":
        if not o.fits:
            notes.append("Speculative decoding: the target does not load with these settings.")
        else:
            try:
                spec = adv.speculative(o.placement, state.draft, state.acceptance, state.n_draft, context=state.tokens)
            except Exception as e:  # noqa: BLE001
                notes.append(f"Speculative decoding: {type(e).__name__}: {e}")
    return AdvisorData(state, scn, found, readouts, recipe, lora, spec, tuple(notes))


def describe(data) -> str:
    fs = data.findings
    head = calculator.describe(data.calc)
    if data.error:
        return f"{head} Advisor: {data.error}"
    if not fs:
        return f"{head} Advisor: nothing to fix."
    best = next((f.changes[0] for f in fs if f.changes), None)
    tail = f" Best change: {best.title} ({best.effect})." if best else ""
    return (
        f"{head} Advisor: {len(fs)} finding{'s' if len(fs) != 1 else ''}: "
        f"{', '.join(findings.CAUSE_LABELS[f.cause] for f in fs)}.{tail}"
    )


# ---------------------------------------------------------------------------------------------------------
# Render
# ---------------------------------------------------------------------------------------------------------
def _advisor_readouts(data) -> Raw:
    r, s = data.readouts, data.state
    n = r.advice_count
    items = [
        _readout("advice_count", n, "—" if n is None else str(n), "Findings"),
        _readout(
            "advisor_decode_tok_s",
            r.advisor_decode_tok_s,
            fmt.rate(r.advisor_decode_tok_s),
            "Decode with -t " + ("default" if s.threads == "auto" else str(s.threads)),
            "tok/s",
        ),
    ]
    if s.users > 1 or s.np > 1:
        items.append(
            _readout(
                "aggregate_tok_s",
                r.aggregate_tok_s,
                fmt.rate(r.aggregate_tok_s),
                f"All sequences ({data.outcome.active if data.outcome else 0} at once)",
                "tok/s",
            )
        )
    return el("dl", items, class_="readouts advisor-readouts")


def findings_html(state, apply_keys=None, with_chart: bool = True) -> str:
    """The findings block alone (with its Apply / Undo buttons) for a state of this figure (a dict, a query
    string, or another figure's state with the same keys: the advisor's extra fields take their defaults).
    apply_keys: the state keys the host page can set; a change that needs others is listed without an Apply
    button."""
    return str(findings.block(compute(state).found, apply_keys, with_chart))


def _recipe_block(data) -> Raw:
    r = data.recipe
    s = data.state
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
            findings.apply_button(changed, "Use this configuration", adv.GOALS[r.goal])
            if changed
            else el("p", "The calculator already holds this configuration.", class_="note", data_recipe_applied="true"),
        ],
        class_="advisor-recipe",
        data_goal=r.goal,
    )


def _lora_block(data) -> Raw:
    c = data.lora
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
            findings.flags_list(c["flags"]),
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


def _spec_chart(sp, narrow: bool = False) -> Raw:
    """Speculative decoding's tok/s against the draft's acceptance rate. narrow: drawn for a phone."""
    SW = chart.NARROW_W if narrow else globals()["SW"]  # noqa: N806  (this drawing's width)
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
        id_="spec-chart-n" if narrow else "spec-chart",
        class_="chart spec-chart",
    )


def _spec_block(data) -> Raw:
    sp = data.spec
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
            el(
                "figure",
                [chart.responsive(lambda: _spec_chart(sp), lambda: _spec_chart(sp, narrow=True))],
                class_="chart-wrap",
            ),
            findings.flags_list(sp["flags"]),
        ],
        class_="advisor-spec",
        data_spec_tok_s=fmt.raw(sp["tok_s"]),
        data_pays="true" if sp["pays"] else "false",
    )


def render(data) -> str:
    parts = [
        Raw(calculator.render(data.calc, with_findings=False)),  # this page shows the findings itself
        _advisor_readouts(data),
        findings.block(data.found),
    ]
    for n in data.notes:
        parts.append(el("p", n, class_="note advisor-note"))
    if data.recipe:
        parts.append(_recipe_block(data))
    if data.lora:
        parts.append(_lora_block(data))
    if data.spec:
        parts.append(_spec_block(data))
    return str(el("div", parts, class_="fig-advisor"))
