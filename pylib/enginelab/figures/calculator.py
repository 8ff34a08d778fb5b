"""The fit-and-speed calculator: where llama.cpp would put a model, and how fast it would run.

Inputs are llama.cpp's own: the model and its quantization, the KV-cache type (-ctk/-ctv), the context it
allocates (-c, n_ctx), -ngl (auto: what --fit would pick), --n-cpu-moe, and the conversation length the
speeds are estimated at. compute(state) is enginelab.scenario.build: one Scenario (placement, decode and
prefill from perf_model, computed once) that this module draws, and that the "how is this computed?" boxes
(enginelab.explain) and the advisor's findings (enginelab.findings) read too.
"""

from __future__ import annotations

import itertools
import json

import perf_model as pm

from .. import chart, custom, explain, fmt, gpus, links, remote, scenario
from ..engine_io import LLAMA_CPP_FLAGS
from ..measured.builds import MAX_BUILD_CHARS, describe_build
from ..state import Choice, Float, Int, Spec, Text, _shown
from ..svg import Raw, data_details, el, join, svg, table

ID = "calculator"
TITLE = "Fit and speed calculator"
LEDE = (
    "Pick a model, a machine, a quantization, a KV-cache type and a context length: see where llama.cpp "
    "would place each byte, and what that does to decode and prompt speed."
)

READOUTS = ("verdict", "n_gpu_layers", "vram_gb", "ram_gb", "decode_tok_s", "prefill_tok_s", "cpu_share")
# ("fits", true or false, is a readout too: the verdict's box carries it; see _verdict)


# ---------------------------------------------------------------------------------------------------------
# State
# ---------------------------------------------------------------------------------------------------------
_model = scenario.model_for  # the Model / Machine a state names (catalog, your config or file, your machine)
_machine = scenario.machine_for


def _model_options(partial):
    opts = [(k, m.name) for k, m in pm.MODELS.items() if k not in custom.RESERVED_KEYS]
    opts.append(("custom", "Your config.json (paste it below)"))
    if custom.dropped_model() is not None:
        opts.append(("gguf", f"{custom.dropped_model().name} (your GGUF file)"))
    if remote.wants_remote(partial):
        rm = remote.loaded(partial)
        where = "Hugging Face" if str(partial.get("hf") or "").strip() else "your link"
        opts.append(("remote", f"{rm.model.name} (from {where})" if rm else f"The model from {where} (being read)"))
    return opts


def _default_model(partial) -> str:
    """A link with hf= or url= names a remote model; otherwise the catalog's default."""
    return "remote" if remote.wants_remote(partial) else scenario.CATALOG_DEFAULT_MODEL


def _remote_gguf(partial) -> bool:
    rm = remote.loaded(partial) if partial.get("model") == "remote" else None
    return rm is not None and rm.kind == "gguf"


class _CalculatorSpec(Spec):
    """The calculator's Spec: naming another model (the form, a link's model=, your config or file) drops the
    remote model's hf / file / url, so the link names only what is shown (the keys come before `model`, whose
    default they set)."""

    def _validate(self, raw, typed):
        if raw.get("model") not in (None, "", "remote"):
            raw = {**raw, "hf": "", "file": "", "url": ""}
        return super()._validate(raw, typed)


def _machine_options(partial):
    return [(k, m.name) for k, m in pm.MACHINES.items() if k != "custom"] + [
        ("custom", "Your machine (enter it below)")
    ]


def _max_ngl(partial) -> int:
    if _machine(partial).gpu is None:
        return 0  # nothing to offload to
    return _model(partial).n_layers + 1  # n_layers + 1 also moves the output head


CTX_MIN = 256
CTX_MAX = 1 << 20


def _ctx_max(partial) -> int:
    return min(CTX_MAX, max(CTX_MIN, getattr(_model(partial), "max_position_embeddings", CTX_MAX)))


def _is_custom_machine(p) -> bool:
    return p.get("machine") == "custom"


class _BuildText(Text):
    """The reader's llama.cpp build (measured.builds.describe_build): a text kept as typed when it names one, else
    today's with a message (the build the measured profile estimates)."""

    def parse(self, raw, partial):
        text = " ".join(str(raw).split())
        try:
            describe_build(text)
        except ValueError as e:
            why = str(e).removeprefix("build: ").split(", got ")[0]
            return "", f"{self.label}: {_shown(text)} is not one we know: {why}; using today's."
        return text, None


BUILD_EXAMPLES = ("today", "2025-08-28", "b6840", "Ollama 0.11.4", "Ollama 0.32.15")


SPEC = _CalculatorSpec(
    ID,
    [
        # a remote model (enginelab.remote): set by the panel's Read button or a shared link, never shown as controls
        Text("hf", "Hugging Face repo", default="", max_len=remote.MAX_INPUT_CHARS, rows=1, visible=False),
        Text("file", "GGUF file in the repo", default="", max_len=remote.MAX_INPUT_CHARS, rows=1, visible=False),
        Text(
            "url", "Link to a .gguf or config.json", default="", max_len=remote.MAX_INPUT_CHARS, rows=1, visible=False
        ),
        Choice("model", "Model", default=_default_model, options=_model_options),
        Text(
            "cfg",
            "Your config.json",
            default="",
            max_len=custom.CONFIG_MAX_CHARS,
            rows=3,
            visible=lambda p: p.get("model") == "custom",
            help="Set by “Use this config” in the panel below (compact JSON; it travels in the URL).",
        ),
        Choice("machine", "Machine", default="rtx4060ti", options=_machine_options),
    ]
    + [
        Float(key, label, default=d, min=lo, max=hi, step=0.1, visible=_is_custom_machine)
        for key, label, d, lo, hi in custom.MACHINE_FIELDS
    ]
    + gpus.fields(scenario.host_machine_for)  # several GPUs: gpus, sm, ts, mg, link (enginelab.gpus)
    + [
        Choice(
            "quant",
            "Quantization",
            default="Q4_K_M",
            options=lambda p: pm.quant_options(),
            visible=lambda p: p.get("model") != "gguf" and not _remote_gguf(p),
            help="A GGUF file (dropped or read from a link) uses its own tensor types.",
        ),
        Choice("kv", "KV cache type (-ctk/-ctv)", default="f16", options=lambda p: [(k, k) for k in pm.KV_TYPES]),
        Int(
            "ctx",
            "Context, n_ctx (-c)",
            default=8192,
            min=CTX_MIN,
            max=_ctx_max,
            step=256,
            special=((0, "the model's trained context, as -c 0"),),
            help="Tokens of KV cache allocated at startup; 0: the model's trained context, as llama.cpp's -c 0.",
        ),
        Int(
            "ngl",
            "GPU layers (-ngl)",
            default="auto",
            auto="auto",
            min=0,
            max=_max_ngl,
            help="auto: the most that fit with --fit's margin.",
        ),
        Int(
            "tokens",
            "Conversation length (tokens)",
            default=2000,
            min=1,
            max=scenario.n_ctx_for,
            step=100,
            help="Where decode speed is read, and the prompt length for prefill.",
        ),
        Int(
            "n_cpu_moe",
            "Expert layers in RAM (--n-cpu-moe)",
            default=0,
            min=0,
            max=lambda p: _model(p).n_layers,
            visible=lambda p: _model(p).is_moe,
            help="Keep the expert weights of the first N layers in system RAM.",
        ),
        Choice(
            "profile",
            "Speed estimate",
            default="measured",
            options=[
                ("measured", "measured: fitted on published llama-bench runs"),
                ("course", "course: the module's model (η 0.7, 50 µs per token)"),
            ],
            help="Both place the same bytes; measured counts GiB less the driver's reserve and times the kernels "
            "llama.cpp really runs.",
        ),
        Int(
            "threads",
            "CPU threads (-t)",
            default="auto",
            auto="auto",
            min=1,
            max=256,
            visible=lambda p: p.get("profile") == "measured",
            help="auto: llama.cpp's default, the physical cores. Where the CPU works, decode grows with threads "
            "until memory bandwidth saturates.",
        ),
        _BuildText(
            "build",
            "llama.cpp build",
            default="",
            max_len=MAX_BUILD_CHARS,
            rows=1,
            placeholder="today",
            suggestions=BUILD_EXAMPLES,
            visible=lambda p: p.get("profile") == "measured",
            help="today's, a day (2025-08-28), a build number (b6840) or the app that bundles it (Ollama 0.11.4): "
            "the speed without llama.cpp's changes made since.",
        ),
    ],
)


def default_state():
    return SPEC.default()


# ---------------------------------------------------------------------------------------------------------
# Compute
# ---------------------------------------------------------------------------------------------------------
def compute(state) -> scenario.Scenario:
    """The state's Scenario (enginelab.scenario.build): placed and timed once, shared by every view."""
    return scenario.build(state)


def warm_steps(state):
    """What a reader may pick next, warmed while the page is idle (site/py/main.py, op "idle"): the previous and
    next option of the model and quantization selects (one arrow key away), as enginelab.scenario.warm_steps;
    then every other catalog model of the select at this quantization, nearest first, as
    scenario.warm_later_steps (its per-block tables, not its plan: a reader who pauses finds any model cheap)."""
    partial, near = state.as_dict(), []
    models = []
    for key in ("model", "quant"):
        f = SPEC.by_key[key]
        values = [v for v, _label in f.options_for(partial)] if f.visible_for(partial) else []
        i = values.index(getattr(state, key)) if getattr(state, key) in values else -1
        near += [state.replace(**{key: values[j]}) for j in (i - 1, i + 1) if i >= 0 and 0 <= j < len(values)]
        if key == "model" and i >= 0:
            models = sorted((v for j, v in enumerate(values) if abs(j - i) > 1), key=lambda v: abs(values.index(v) - i))
    later = [state.replace(model=v) for v in models]
    return itertools.chain(scenario.warm_steps(near), scenario.warm_later_steps(later))


def describe(data) -> str:
    s, r, m = data.state, data.readouts, data.model
    where = f"{m.name} {pm.quant_short(s.quant)} on {data.machine.name}, n_ctx {scenario.n_ctx_for(s.as_dict()):,} ({s.kv} KV)"
    if data.error:
        return f"{where}: not computable: {data.error}"
    p = data.placement
    if not r.fits:
        return f"{where}: -ngl {p.n_gpu_layers} would fail to allocate: {_overask_text(data)}."
    on = "on the GPU"
    if data.machine.multi_gpu:
        split = " + ".join(str(len(u.layers)) for u in p.per_gpu)
        on = f"over {len(p.per_gpu)} GPUs ({split} layers, -sm {p.split_mode})"
    return (
        f"{where}: -ngl {p.n_gpu_layers} of {m.n_layers + 1} {on}, {fmt.gb(p.gpu_total)} VRAM and "
        f"{fmt.gb(p.cpu_total)} RAM; decode {fmt.rate(r.decode_tok_s)} tok/s at {s.tokens:,} tokens "
        f"(CPU share {fmt.pct(r.cpu_share)}), prefill {fmt.rate(r.prefill_tok_s)} tok/s ({data.profile} profile"
        + (f", {_build_name(data.build)})." if data.build else ").")
    )


def _overask_text(data) -> str:
    """Why the placement fails, with the one over-ask figure the bar shows too (Placement.overflow_bytes: what
    the failing pool needs less what it has free). The --fit margin is named only where it is counted: on a GPU."""
    p = data.placement
    if not p.failing_device:
        return p.error or "does not fit"
    over = fmt.gb(p.overflow_bytes)
    if p.failing_device.startswith("GPU"):
        margin = p.fit_margin
        if data.machine.multi_gpu:  # the failing GPU's own margin, and its name
            margin = p.per_gpu[0].margin  # --fit-target, the same on every GPU
            return (
                f"{p.failing_device} needs {fmt.gb(p.requested_bytes)}, and {fmt.gb(p.free_bytes)} is free once "
                f"the {fmt.gb(margin)} margin is kept (--fit-target {pm.FIT_TARGET_MIB} MiB): over by {over}"
            )
        return (
            f"needs {fmt.gb(p.requested_bytes)} of GPU memory, and {fmt.gb(p.free_bytes)} is free once the "
            f"{fmt.gb(margin)} margin is kept (--fit-target {pm.FIT_TARGET_MIB} MiB): over by {over}"
        )
    return f"needs {fmt.gb(p.requested_bytes)} of {p.failing_device}, {fmt.gb(p.free_bytes)} free: over by {over}"


# ---------------------------------------------------------------------------------------------------------
# Render
# ---------------------------------------------------------------------------------------------------------
W, BAR_H, ROW_H, PAD = 560, 30, 70, 10
NOTE_H = 18  # a line under each bar (the layers a GPU holds) when the machine has several GPUs
SEGMENTS = (
    ("weights", "Weights"),
    ("kv", "KV cache"),
    ("compute", "Compute buffer"),
    ("margin", "--fit margin"),
    ("free", "Free"),
    ("over", "Over capacity"),
)
LEGEND_COLS, LEGEND_ROW = 3, 24


def _layers_text(layers: tuple, n_layers: int) -> str:
    """'layers 0–40', 'layers 41–79 + output', 'no layers' (a GPU holds a contiguous run of them)."""
    blocks = [il for il in layers if il < n_layers]
    out = " + output" if n_layers in layers else ""
    if not blocks:
        return "output layer" if out else "no layers"
    return f"layers {blocks[0]}–{blocks[-1]}{out}" if len(blocks) > 1 else f"layer {blocks[0]}{out}"


def _bars(data) -> list[dict]:
    """One bar per memory pool: its capacity and the bytes of each segment.

    A discrete GPU and system RAM are two pools. Apple's unified memory is one pool of which the GPU may use a
    share: the first bar is that share with what the GPU holds, the second the whole pool with everything."""
    p, mc = data.placement, data.machine
    pools = []
    gpu_margin = p.fit_margin if p.gpu_total else 0.0
    if mc.gpu is not None and getattr(mc, "unified", False):
        pools.append(
            {
                "key": "vram",
                "label": "GPU share of unified memory",
                "capacity": p.gpu_capacity,
                "weights": p.gpu_weights,
                "kv": p.gpu_kv,
                "compute": p.gpu_compute,
                "margin": gpu_margin,
            }
        )
        pools.append(
            {
                "key": "ram",
                "label": f"Unified memory · {mc.gpu.name}",
                "capacity": p.cpu_capacity,
                "weights": p.gpu_weights + p.cpu_weights,
                "kv": p.gpu_kv + p.cpu_kv,
                "compute": p.gpu_compute + p.cpu_compute,
                "margin": 0.0,
            }
        )
    elif mc.multi_gpu:  # one bar per GPU, in llama.cpp's device order, then the host's RAM
        for u in p.per_gpu:
            pools.append(
                {
                    "key": f"gpu{u.index}",
                    "label": f"GPU {u.index} · {u.name}",
                    "note": _layers_text(u.layers, data.model.n_layers)  # a line under the bar
                    + (f" · {p.row_fractions[u.index]:.0%} of each matrix" if p.row_split else ""),
                    "capacity": u.capacity,
                    "weights": u.weights,
                    "kv": u.kv,
                    "compute": u.compute,
                    "margin": u.margin if u.total else 0.0,
                }
            )
    elif mc.gpu is not None:
        pools.append(
            {
                "key": "vram",
                "label": f"VRAM · {mc.gpu.name}",
                "capacity": p.gpu_capacity,
                "weights": p.gpu_weights,
                "kv": p.gpu_kv,
                "compute": p.gpu_compute,
                "margin": gpu_margin,
            }
        )
    if not (mc.gpu is not None and getattr(mc, "unified", False)):  # the host's RAM, after the GPUs
        pools.append(
            {
                "key": "ram",
                "label": f"RAM · {mc.ram.name}",
                "capacity": p.cpu_capacity,
                "weights": p.cpu_weights,
                "kv": p.cpu_kv,
                "compute": p.cpu_compute,
                "margin": 0.0,
            }
        )
    for b in pools:
        used = b["weights"] + b["kv"] + b["compute"]
        b["used"] = used
        # the GPU's margin is part of what a placement needs (perf_model counts it), so what spills past the
        # capacity is the placement's own overflow_bytes: the one over-ask figure the text states too
        b["free"] = max(0.0, b["capacity"] - used - b["margin"])
        b["over"] = max(0.0, used + b["margin"] - b["capacity"])
    return pools


def _bar_chart(data, narrow: bool = False) -> Raw:
    """The memory bars. narrow: re-laid out for a phone (chart.NARROW_W wide: each pool's value on its own line
    under its name, the legend in two columns)."""
    pools = _bars(data)
    scale_max = max(max(b["capacity"], b["used"] + b["margin"]) for b in pools) or 1.0
    width = chart.NARROW_W if narrow else W
    cols = 2 if narrow else LEGEND_COLS
    left, right = PAD, width - PAD
    span = right - left
    x_of = lambda v: left + span * v / scale_max  # noqa: E731
    rows = []
    row_h = ROW_H + (18 if narrow else 0) + (NOTE_H if any(b.get("note") for b in pools) else 0)
    for i, b in enumerate(pools):
        y0 = PAD + i * row_h
        y = y0 + 26 + (18 if narrow else 0)
        value = f"{fmt.gb_num(b['used'])} / {fmt.gb(b['capacity'])}" + (
            f" · over by {fmt.gb(b['over'])}" if b["over"] else ""
        )
        # the narrow twin carries no data-readout (one number, one readout: chart.responsive)
        gpu_readout = (
            chart.readout_attrs(f"{b['key']}_gb", b["used"] / pm.GB)
            if b["key"].startswith("gpu") and not narrow
            else {}
        )
        parts = [
            el("text", b["label"], x=left, y=y0 + 18, class_="bar-label"),
            el(
                "text",
                value,
                x=left if narrow else right,
                y=y0 + (36 if narrow else 18),
                class_="bar-value",
                text_anchor=None if narrow else "end",
                **gpu_readout,
            ),
        ]
        segs = [
            chart.Segment(
                b[key], f"{label}: {fmt.gb(b[key], 2)}", f"seg seg-{key}", attrs={"data_bytes": f"{b[key]:.0f}"}
            )
            for key, label in SEGMENTS[:5]
        ]
        parts += chart.stacked_bar(segs, x0=left, y=y, height=BAR_H, span=span, total=scale_max)
        # the capacity outline, and what does not fit past it
        parts.append(el("rect", x=left, y=y, width=x_of(b["capacity"]) - left, height=BAR_H, class_="capacity"))
        if b["over"]:
            parts.append(
                el(
                    "rect",
                    el("title", f"Over capacity: {fmt.gb(b['over'], 2)}"),
                    x=x_of(b["capacity"]),
                    y=y - 4,
                    width=x_of(b["used"] + b["margin"]) - x_of(b["capacity"]),
                    height=BAR_H + 8,
                    class_="overflow seg-over",
                )
            )
        if b.get("note"):
            parts.append(el("text", b["note"], x=left, y=y + BAR_H + 16, class_="bar-note"))
        rows.append(el("g", parts, class_=f"pool pool-{b['key']}"))
    # legend: a grid, so it stays readable when the chart is scaled down on a phone
    shown = [s for s in SEGMENTS if s[0] != "over" or any(b["over"] for b in pools)]
    ly = PAD + len(pools) * row_h + 4
    col_w = span / cols
    legend = []
    for j, (key, label) in enumerate(shown):
        lx, lyy = left + (j % cols) * col_w, ly + (j // cols) * LEGEND_ROW
        legend.append(el("rect", x=lx, y=lyy, width=14, height=14, class_=f"seg seg-{key}"))
        legend.append(el("text", label, x=lx + 20, y=lyy + 12, class_="legend-label"))
    height = ly + LEGEND_ROW * ((len(shown) + cols - 1) // cols) + PAD
    return svg(
        [join(rows), el("g", legend, class_="legend")],
        width=width,
        height=height,
        title=f"Memory: {data.model.name} {pm.quant_short(data.state.quant)} on {data.machine.name}",
        desc=describe(data),
        id_="calculator-chart-n" if narrow else "calculator-chart",
        class_="chart calculator-chart",
    )


def _bar_charts(data) -> Raw:
    """The bars, wide and re-laid out for a phone (the page shows one: chart.responsive)."""
    return chart.responsive(lambda: _bar_chart(data), lambda: _bar_chart(data, narrow=True))


def _readout(name: str, value, text: str, label: str, unit: str = "", how: str = "") -> Raw:
    return chart.readout(
        name, value, text, label, unit, extra=el("div", Raw(how), id_=f"explain-{name}", class_="explain-slot")
    )


def _explain(data) -> dict:
    """'How is this computed?' per readout (enginelab.explain): the formula and this state's inputs."""
    if data.placement is None:
        return {}
    try:
        return explain.explain(data)
    except Exception as e:  # noqa: BLE001  an explanation must never take the numbers down with it
        return {k: str(el("p", f"(no explanation: {type(e).__name__})", class_="explain-missing")) for k in READOUTS}


VERDICTS = {  # Readouts.verdict -> what the page says
    "vram": "Fits in VRAM",
    "partial": "Runs with partial offload",
    "fails": "Fails to allocate",
    None: "—",
}


def verdict_text(data) -> tuple[str, str]:
    """(headline, detail) of the Scenario's verdict (scenario.verdict): where the layers run and what share of
    each decode step the CPU takes, or why the load fails."""
    r, p, m = data.readouts, data.placement, data.model
    if p is None or r.verdict is None:
        return VERDICTS[None], data.error or ""
    if r.verdict == "fails":
        why = _overask_text(data)
        return VERDICTS["fails"], f"{why[0].upper()}{why[1:]}."
    n = m.num_hidden_layers
    if r.verdict == "vram":
        where = "the GPU's share of unified memory" if data.machine.unified else "VRAM"
        return (
            "Fits in the GPU's share of unified memory" if data.machine.unified else VERDICTS["vram"],
            f"All {n} layers and the output head run from {where}.",
        )
    in_ram = n - p.gpu_layers
    cpu = "" if r.cpu_share is None else f"; {fmt.pct(r.cpu_share)} of each decode step is spent on the CPU"
    if data.machine.gpu is None:
        return "Runs on the CPU", f"No GPU: all {n} layers run from system RAM{cpu}."
    if p.gpu_layers == 0 and not p.output_on_gpu and not p.n_cpu_moe:
        ram = "unified memory, by the CPU cores" if data.machine.unified else "system RAM"
        return "Runs on the CPU", f"-ngl 0: all {n} layers and the output head run from {ram}{cpu}."
    parts = [f"{in_ram} of {n} layers"] if in_ram else []
    if not p.output_on_gpu:
        parts.append("the output head")
    if p.n_cpu_moe:
        parts.append(f"the experts of {p.n_cpu_moe} layers (--n-cpu-moe)")
    what = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    verb = "runs" if parts == ["the output head"] else "run"
    return VERDICTS["partial"], f"{what[0].upper()}{what[1:]} {verb} from system RAM{cpu}."


def _verdict(data, how: str = "") -> Raw:
    """The verdict readout (data-readout="verdict"); its box also carries data-readout="fits" (true: it loads)."""
    r = data.readouts
    head, detail = verdict_text(data)
    return el(
        "div",
        [
            el("dt", "Verdict"),
            el("dd", [el("output", head, **chart.readout_attrs("verdict", r.verdict))]),
            el("p", detail, class_="verdict-detail"),
            el("div", Raw(how), id_="explain-verdict", class_="explain-slot"),
        ],
        class_=f"readout readout-verdict verdict-{r.verdict or 'none'}",
        **chart.readout_attrs("fits", r.fits),
    )


def _readouts(data, defer: bool = False) -> Raw:
    r, m = data.readouts, data.model
    how = {} if defer else _explain(data)  # deferred in the browser: see deferred_html
    fits = r.fits
    ngl = r.n_gpu_layers
    items = [
        _verdict(data, how.get("verdict", "")),
        _readout(
            "n_gpu_layers",
            ngl,
            "—" if ngl is None else f"{ngl} / {m.n_layers + 1}",
            "-ngl (layers on GPU)",
            how=how.get("n_gpu_layers", ""),
        ),
        _readout(
            "vram_gb",
            r.vram_gb,
            "—" if r.vram_gb is None else f"{r.vram_gb:.1f}",
            "VRAM",
            "GB",
            how=how.get("vram_gb", ""),
        ),
        _readout(
            "ram_gb",
            r.ram_gb,
            "—" if r.ram_gb is None else f"{r.ram_gb:.1f}",
            "RAM",
            "GB",
            how=how.get("ram_gb", ""),
        ),
        _speed("decode", data, how),
        _speed("prefill", data, how),
        _readout(
            "cpu_share",
            r.cpu_share,
            fmt.pct(r.cpu_share),
            "CPU share of a decode step",
            how=how.get("cpu_share", ""),
        ),
    ]
    return el(
        "dl",
        items,
        class_="readouts" + ("" if fits else " readouts-fail"),
        data_deferred="explain" if defer else None,  # its "how is this computed?" boxes come after
    )


def _speed(kind: str, data, how: dict) -> Raw:
    """The decode or prefill readout. Measured profile: "≈ 48" with where most published runs fall (the
    leave-one-device-out spread) and the module's number for the same settings, each a readout of its own."""
    r, name = data.readouts, f"{kind}_tok_s"
    value = getattr(r, name)
    label = "Decode" if kind == "decode" else "Prefill"
    measured = data.profile == "measured" and value is not None
    text = ("≈\u00a0" if measured else "") + fmt.rate(value)
    sub = []
    rng = getattr(r, f"{kind}_range")
    if measured and rng:
        sub.append(
            el(
                "span",
                [
                    "most runs ",
                    el("span", fmt.rate(rng[0]), **chart.readout_attrs(f"{kind}_low_tok_s", rng[0])),
                    "–",
                    el("span", fmt.rate(rng[1]), **chart.readout_attrs(f"{kind}_high_tok_s", rng[1])),
                ],
                class_="sub-range",
                title="Where most published llama-bench runs fall around an estimate like this one "
                "(20th-80th percentile, devices held out of the fit)",
            )
        )
    course = getattr(data.course, name, None) if data.course is not None else None
    if measured and data.course is not None:
        sub.append(
            el(
                "span",
                ["module: ", el("span", fmt.rate(course), **chart.readout_attrs(f"course_{name}", course))],
                class_="sub-course",
                title="The course profile's number for the same settings (the module's model)",
            )
        )
    if measured and data.build:  # the reader's llama.cpp build, when not today's
        sub.append(el("span", _build_name(data.build), class_="sub-build", title=data.build.note or None))
    extra = [el("p", sub, class_="readout-sub")] if sub else []
    extra.append(el("div", Raw(how.get(name, "")), id_=f"explain-{name}", class_="explain-slot"))
    return chart.readout(name, value, text, label, "tok/s", extra=join(extra))


def _unverified(model):
    """A warning above the readouts when the model's architecture was read generically (its config.json's
    standard keys, a model_type this lab has not checked against llama.cpp's loader): still computed."""
    bm = model.carried_blocks
    warnings = bm.warnings if bm is not None else ()
    if not warnings:
        return None
    return el(
        "div",
        [
            el("strong", f"{warnings[0][:1].upper()}{warnings[0][1:]}. "),
            f"model_type {model.model_type!r} is not one this lab has checked against llama.cpp's loader: it was "
            "read from the config's standard keys (layers, heads, KV heads, FFN and expert widths, layer_types), "
            "so the sizes and speeds below are those of a plain stack of such blocks.",
        ],
        class_="alert alert-warn",
        role="note",
        data_unverified="true",
    )


def _profile_line(data) -> Raw:
    """Which speed profile the numbers use, and (measured) why the module's numbers differ."""
    if data.profile == "measured":
        backend = data.decode.get("backend", "cpu") if data.decode else None
        basis = explain.basis_text(backend, "decode") if backend else ""
        why = explain.profile_note(data)
        text = [el("strong", "Measured profile"), f" ({basis}). " if basis else ". "]
        if why:
            text.append(why)
        if data.build:  # the reader's llama.cpp build: which, and what its missing changes cost (the decode box)
            text.append(_build_sentence(data))
        return el("p", text, class_="note profile-note", data_profile="measured")
    return el(
        "p",
        [
            el("strong", "Course profile"),
            ": the module's model (η = 0.7 of bandwidth for decode, 0.5 of peak for prefill, 50 µs per token, "
            "decimal GB). Switch “Speed estimate” to measured for what llama.cpp reaches on real hardware.",
        ],
        class_="note profile-note",
        data_profile="course",
    )


def _build_name(b) -> str:
    """The reader's build as the page names it: 'llama.cpp of 2025-08-28', 'llama.cpp b6840', 'Ollama 0.11.4'."""
    return f"llama.cpp of {b.day}" if b.label == b.day else b.label


def _build_sentence(data) -> str:
    """' Estimated for Ollama 0.11.4 (llama.cpp as of 2025-05-12): 1 change since makes its decode about 6% slower
    than today's llama.cpp.' (measured profile, a build that is not today's)."""
    b, costly = data.build, [s for _r, s in data.build_effects if s >= 0.0005]
    which = _build_name(b) + ("" if b.label == b.day else f" (llama.cpp as of {b.day})")
    if not costly:
        return f" Estimated for {which}: none of llama.cpp's changes since touches this decode."
    n = len(costly)
    return (
        f" Estimated for {which}: {n} change{'s' if n > 1 else ''} since make{'' if n > 1 else 's'} its decode "
        f"about {fmt.pct(sum(costly))} slower than today's llama.cpp (see “How is this computed?” under Decode)."
    )


def _table(data) -> Raw:
    pools = _bars(data)
    header = ["Pool", "Capacity", "Weights", "KV cache", "Compute buffer", "--fit margin", "Free", "Over"]
    rows = [
        [b["label"]] + [fmt.gb(b[k], 2) for k in ("capacity", "weights", "kv", "compute", "margin", "free", "over")]
        for b in pools
    ]
    return data_details("Data table", table(describe(data), header, rows))


def render(data, defer: bool = False, with_findings: bool = True) -> str:
    """The calculator for a Scenario. defer: leave the explanations and the advisor's findings as
    placeholders for the page to fill right after the numbers are on screen (deferred_html); the browser glue
    passes True, the build pre-renders everything inline. with_findings=False leaves the findings out (the
    advisor page shows its own)."""
    s = data.state
    parts = []
    if data.error and data.pending:  # a remote model still being read: say so, numbers follow
        parts.append(el("div", data.error, class_="alert alert-info", role="status", data_remote="pending"))
        parts.append(_readouts(data, defer))
        return el("div", parts, class_="calculator", data_state="pending")
    if data.error:
        parts.append(
            el(
                "div",
                [el("strong", "Cannot compute these settings: "), data.error],
                class_="alert alert-error",
                role="alert",
            )
        )
        parts.append(_readouts(data, defer))
        if data.placement is not None:
            parts.append(el("figure", [_bar_charts(data)], class_="chart-wrap"))
        return el("div", parts, class_="calculator", data_state="error")
    p = data.placement
    if not p.fits:
        parts.append(
            el(
                "div",
                [
                    el("strong", "Would fail to allocate: "),
                    _overask_text(data) + ". ",
                    "llama.cpp stops at load with an out-of-memory error here. Lower -ngl or the context, "
                    + ("move layers to a GPU with room (-ts), " if data.machine.multi_gpu else "")
                    + "pick a smaller quantization or KV type, or set -ngl to auto and let --fit choose.",
                ],
                class_="alert alert-overask",
                role="alert",
                data_overask="true",
            )
        )
    unverified = _unverified(data.model)
    if unverified:
        parts.append(unverified)
    parts.append(_readouts(data, defer))
    if p.fits:
        parts.append(_profile_line(data))
    parts.append(gpu_editor(data))
    parts.append(el("figure", [_bar_charts(data)], class_="chart-wrap"))
    parts.append(
        el(
            "div",
            [
                el(
                    "p",
                    [
                        f"Speeds at {s.tokens:,} tokens of conversation; decode is one token per forward pass, "
                        f"prefill processes a {s.tokens:,}-token prompt."
                    ],
                    class_="note",
                ),
                el(
                    "div",
                    [
                        el("pre", el("code", data.command, id_="llama-command")),
                        el("button", "Copy command", type="button", class_="copy", data_copy_target="#llama-command"),
                    ],
                    class_="command",
                ),
                el("p", command_note(data), class_="note command-note", id_="llama-command-note"),
            ],
            class_="command-block",
        )
    )
    if with_findings:
        parts.append(findings_slot(data, defer))
    parts.append(_table(data))
    return el("div", parts, class_="calculator", data_state="ok" if p.fits else "overask")


def command_note(data) -> str:
    """What the command leaves to llama.cpp: -ngl to --fit unless the reader set it (and what --fit will
    choose), and the llama.cpp whose flags it assumes (engine_io.LLAMA_CPP_FLAGS)."""
    p, m = data.placement, data.model
    total = m.n_layers + 1
    if data.machine.gpu is None:
        ngl = "No GPU: every layer runs on the CPU, so the command sets no -ngl."
    elif p.auto:
        ngl = f"-ngl is left to --fit (on by default), which will choose -ngl {p.n_gpu_layers} of {total} here" + (
            ": every layer and the output head on the GPU." if p.full_offload else "."
        )
    else:
        ngl = f"-ngl {p.n_gpu_layers} is written because you set it; --fit leaves a value you set alone."
    return f"{ngl} Flags as in {LLAMA_CPP_FLAGS}."


def download_svg(data) -> str:
    """What "Download SVG" saves: a standalone chart that reads on its own, with a title line naming the state
    (model, quantization, machine, n_ctx, KV type, -ngl), the verdict and the numbers, then the memory bars with
    their legend."""
    s, r, p = data.state, data.readouts, data.placement
    head, detail = verdict_text(data)
    ngl = "auto" if s.ngl == "auto" else s.ngl
    lines = [
        (f"{data.model.name} {s.quant} on {data.machine.name}", "dl-title"),
        (
            f"n_ctx {scenario.n_ctx_for(s.as_dict()):,} · KV {s.kv} · -ngl {ngl}"
            + (f" → {p.n_gpu_layers}" if p is not None and s.ngl == "auto" else "")
            + f" · {s.tokens:,} tokens of conversation",
            "dl-state",
        ),
        (f"{head}. {detail}", "dl-verdict"),
    ]
    if r.decode_tok_s is not None:
        lines.append(
            (
                f"VRAM {fmt.gb(p.gpu_total)} · RAM {fmt.gb(p.cpu_total)} · decode {fmt.rate(r.decode_tok_s)} tok/s · "
                f"prefill {fmt.rate(r.prefill_tok_s)} tok/s · CPU share {fmt.pct(r.cpu_share)}",
                "dl-state",
            )
        )
    wrapped = []
    for text, cls in lines:  # wrap at the chart's width (about 6.6 units per character at 12 px)
        width = 78 if cls != "dl-title" else 64
        words, line = text.split(), ""
        for w in words:
            if line and len(line) + 1 + len(w) > width:
                wrapped.append((line, cls))
                line = w
            else:
                line = f"{line} {w}" if line else w
        wrapped.append((line, cls))
    top = 22 + 17 * len(wrapped)
    chart_svg = str(_bar_chart(data)) if p is not None else ""
    m = re_size(chart_svg)
    w, h = m if m else (W, 0)
    head_el = [el("text", t, x=PAD, y=20 + 17 * i, class_=c) for i, (t, c) in enumerate(wrapped)]
    return str(
        el(
            "svg",
            [
                el("title", f"{TITLE}: {describe(data)}"),
                join(head_el),
                # the bar chart nested at its own size (inline style beats the page's .chart { width: 100% })
                el(
                    "g",
                    Raw(chart_svg.replace("<svg ", f'<svg y="{top}" style="width:{w:g}px;height:{h:g}px" ', 1)),
                    class_="dl-chart",
                ),
            ],
            xmlns="http://www.w3.org/2000/svg",
            viewBox=f"0 0 {w} {top + h}",
            width=w,
            height=top + h,
            role="img",
            class_="chart calculator-download",
        )
    )


def re_size(svg_text: str):
    """(width, height) of an <svg ... width=".." height=".."> string, or None."""
    import re

    m = re.match(r'<svg[^>]* width="([\d.]+)" height="([\d.]+)"', svg_text)
    return (float(m.group(1)), float(m.group(2))) if m else None


# ---------------------------------------------------------------------------------------------------------
# The GPUs: the machine's cards in llama.cpp's device order, with Remove and Add buttons. Each button carries the
# state it leads to (data-set-state, site/assets/setstate.js), so a click takes the page's one path: form ->
# state -> render -> URL. A card of your own is typed into the GPUs field (enginelab.gpus: 24gb-936gbs-71tf).
# ---------------------------------------------------------------------------------------------------------
def gpu_editor(data) -> Raw:
    mc = data.machine
    if mc.unified:
        return Raw("")
    cards = [gpus.card_token(d) for d in mc.gpus]
    items = []
    for i, d in enumerate(mc.gpus):
        rest = cards[:i] + cards[i + 1 :]
        remove = (
            el(
                "button",
                "Remove",
                type="button",
                class_="gpu-remove",
                data_set_state=json.dumps({"gpus": ",".join(rest), "ts": "", "mg": 0}),
                aria_label=f"Remove GPU {i} ({d.name})",
            )
            if len(cards) > 1
            else ""
        )
        items.append(
            el("li", [el("span", f"GPU {i} · {d.name} · {d.mem_gb:g} GB", class_="gpu-name"), remove], class_="gpu")
        )
    adds = []
    if len(cards) < gpus.MAX_GPUS:
        for key, d in pm.GPUS.items():
            adds.append(
                el(
                    "button",
                    f"+ {d.name}",
                    type="button",
                    class_="gpu-add",
                    data_set_state=json.dumps({"gpus": ",".join(cards + [key]), "ts": ""}),
                    aria_label=f"Add an {d.name} ({d.mem_gb:g} GB) as GPU {len(cards)}",
                )
            )
    return el(
        "section",
        [
            el("h3", "GPUs" if len(cards) != 1 else "GPU", class_="gpu-title"),
            el("ul", items, class_="gpu-list")
            if items
            else el("p", "No GPU: everything runs from RAM.", class_="note"),
            el("div", [el("span", "Add a GPU:", class_="gpu-add-label")] + adds, class_="gpu-adds") if adds else "",
            el(
                "p",
                [
                    "A card of your own: type it into the GPUs field as ",
                    el("code", gpus.CARD_EXAMPLE),
                    " (memory GB, bandwidth GB/s, FP16 TFLOP/s).",
                ],
                class_="help",
            ),
        ],
        class_="gpu-editor",
        aria_label="GPUs",
    )


# ---------------------------------------------------------------------------------------------------------
# The advisor's findings under the numbers. They take longer than the numbers (each suggestion re-runs the
# model), so in the browser render(..., defer=True) leaves a placeholder that the page fills right after the
# numbers are on screen (deferred_html). Pre-rendered pages carry the findings inline.
# ---------------------------------------------------------------------------------------------------------
def _advisable(state) -> bool:
    return state.model not in custom.RESERVED_KEYS and state.machine != "custom"


def findings_html(data) -> str:
    """The advisor's findings for a Scenario, with Apply buttons for the calculator's own keys."""
    if not _advisable(data.state):
        return str(
            el(
                "p",
                "The advisor works on the catalog's models and machines; pick one to see its diagnosis.",
                class_="note",
            )
        )
    from .. import findings  # the advisor: filled in after the numbers (deferred_html), so imported then

    # without the advisor's gains chart: one chart per calculator page (its bars)
    return str(findings.block(findings.for_scenario(data), apply_keys=[f.key for f in SPEC.fields], with_chart=False))


def findings_slot(data, defer: bool = False) -> Raw:
    state = data.state
    inner = el(
        "div",
        el("p", "Checking this setup for bottlenecks…", class_="note") if defer else Raw(findings_html(data)),
        id_="calc-findings-body",
    )
    return el(
        "section",
        [
            inner,
            el(
                "p",
                [
                    el(
                        "a",
                        "Open the advisor for recipes, LoRA and speculative decoding",
                        href=links.figure_href("advisor", SPEC.to_query(state)),
                    ),
                    " · ",
                    el(
                        "a",
                        "How many users? This model under load",
                        href=links.users_href(state),
                        data_figure_link="users",
                    ),
                ],
                class_="note",
            ),
        ],
        class_="calc-findings",
        id_="calc-findings",
        data_deferred="findings" if defer else None,
        aria_live="polite",
    )


def deferred_html(state) -> dict:
    """{element id: inner HTML} that the glue fills in after render(..., defer=True): each readout's "how is
    this computed?" and the advisor's findings, from the state's (memoised) Scenario."""
    data = compute(state)
    out = {f"explain-{k}": v for k, v in _explain(data).items()}
    out["calc-findings-body"] = findings_html(data)
    return out


# ---------------------------------------------------------------------------------------------------------
# Controls: the generic fields, plus "use your own model or machine" (its glue is in site/py/main.py)
# ---------------------------------------------------------------------------------------------------------
def remote_section() -> Raw:
    """Read a model from Hugging Face or a link (enginelab.remote; the glue is site/py/main.py setup_remote_model).
    Nothing is fetched until the reader presses Read, which the line under the input says."""
    return el(
        "div",
        [
            el(
                "label",
                "A Hugging Face repo (owner/name) or an https:// link to a .gguf or config.json",
                for_="remote-input",
            ),
            el(
                "div",
                [
                    el(
                        "input",
                        type="text",
                        id_="remote-input",
                        placeholder="unsloth/gpt-oss-20b-GGUF",
                        autocomplete="off",
                        spellcheck="false",
                        inputmode="url",
                        maxlength=remote.MAX_INPUT_CHARS,
                        aria_describedby="remote-privacy",
                    ),
                    el("button", "Read", type="button", id_="remote-read"),
                ],
                class_="remote-row",
            ),
            el(
                "p",
                "Offline until you press Read. Then your browser asks huggingface.co (or the link's host) for "
                "config.json, the list of GGUF files and the first megabytes of one file's header, never the "
                "weights; the page's link gets hf=… (or url=…), so whoever opens it reads the same header.",
                id_="remote-privacy",
                class_="help remote-privacy",
            ),
            el(
                "div",
                [
                    el("label", "GGUF files in the repo (the header of the one you pick is read)", for_="remote-file"),
                    el("select", [], id_="remote-file"),
                ],
                id_="remote-files",
                class_="remote-files",
                hidden=True,
            ),
            el("p", "", id_="remote-status", class_="remote-status", role="status", aria_live="polite"),
        ],
        class_="own-remote",
        id_="own-remote",
    )


def own_model_panel() -> Raw:
    return el(
        "details",
        [
            el("summary", "Use your own model or machine"),
            remote_section(),
            el(
                "div",
                [
                    el(
                        "label",
                        "A GGUF file: only its header is read (File.slice), so a 40 GB file is fine",
                        for_="gguf-file",
                    ),
                    el("input", type="file", id_="gguf-file", accept=".gguf"),
                    el(
                        "div",
                        "…or drop a .gguf file here",
                        id_="gguf-drop",
                        class_="dropzone",
                        tabindex="0",
                        role="button",
                        aria_label="Drop a GGUF file here",
                    ),
                ],
                class_="own-gguf",
            ),
            el(
                "div",
                [
                    el("label", "Or paste a Hugging Face config.json", for_="cfg-text"),
                    el(
                        "textarea",
                        "",
                        id_="cfg-text",
                        rows=5,
                        # the browser stops a paste one character past the limit: a huge paste never reaches Python
                        maxlength=custom.CONFIG_MAX_CHARS + 1,
                        spellcheck="false",
                        placeholder='{"model_type": "llama", "num_hidden_layers": 32, ...}',
                    ),
                    el("button", "Use this config", type="button", id_="cfg-use"),
                ],
                class_="own-config",
            ),
            el(
                "p",
                "Or choose “Your machine” in the Machine list to enter its VRAM, bandwidths, TFLOP/s, RAM and "
                "PCIe link.",
                class_="help",
            ),
            el("p", "", id_="own-status", class_="own-status", role="status", aria_live="polite"),
        ],
        class_="own-model",
        id_="own-model",
    )


def controls(state) -> str:
    from ..page import controls_fields

    return str(join([h for _, _, h in controls_fields(SPEC, state)] + [own_model_panel()]))
