"""The engines side by side: how llama.cpp, vLLM and SGLang differ, and the parameters that matter.

Two kinds of table: one comparison (an aspect per row, an engine per column) and one configuration table per
engine (parameter, default, what it does). A text filter and three engine checkboxes (all URL state) narrow
them; each parameter links to the figure where its effect can be seen. The defaults are the module's (checked
there against each project's main branch, October 2026); the descriptions are ours.

The figure part is a small map: for each engine, how many of the parameters shown link to each figure.

compute(state) returns an EnginesData: the comparison rows and, per engine shown, the configuration rows that
match the filter, the map's counts and the Readouts.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import chart, links
from ..chart import readout_attrs  # the data-readout contract, in one place
from ..state import Bool, Spec, Text
from ..svg import Raw, data_details, el, join, svg, table

ID = "engines"
TITLE = "Three engines side by side"
LEDE = (
    "The same forward pass, three designs: llama.cpp runs anywhere with whatever memory there is; vLLM and "
    "SGLang keep a GPU busy with many requests. Filter the tables, and follow a parameter to the figure "
    "where it matters."
)

ENGINES = (("llama", "llama.cpp"), ("vllm", "vLLM"), ("sglang", "SGLang"))

# Figures a parameter can link to: id -> short name (pages live next to this one, figures/<id>.html).
FIGURES = {
    "calculator": "calculator",
    "offload-curve": "offload curve",
    "decode-curve": "decode vs context",
    "roofline": "roofline",
    "phases": "prefill and decode",
    "load": "model load",
    "tiers": "memory tiers",
    "kv-managers": "KV managers",
    "serving-plan": "serving plan",
    "users": "how many users",
}

# ---------------------------------------------------------------------------------------------------------
# The comparison: (aspect, llama.cpp, vLLM, SGLang)
# ---------------------------------------------------------------------------------------------------------
COMPARISON = (
    (
        "Written in / runs on",
        "C and C++ on the ggml tensor library",
        "Python and PyTorch with its own CUDA kernels",
        "Python and PyTorch with its own CUDA kernels",
    ),
    (
        "Hardware",
        "CPUs, NVIDIA, AMD, Apple Metal, Vulkan, Intel and more",
        "NVIDIA from compute capability 7.5, AMD ROCm (Radeon RX 7900 / 9000 too); Apple and CPU are experimental; "
        "Windows only through WSL",
        "NVIDIA RTX 30/40/50 and datacenter cards, AMD Instinct; Apple through MLX (SGLANG_USE_MLX=1)",
    ),
    (
        "Model files",
        "GGUF",
        "Hugging Face safetensors checkpoints (AWQ, GPTQ, FP8 and others)",
        "Hugging Face safetensors; GGUF and bitsandbytes supported in tree",
    ),
    (
        "When the weights exceed VRAM",
        "Whole layers stay in RAM and the CPU computes them (-ngl, -ot, --n-cpu-moe)",
        "Part of the weights is sent over PCIe on every forward pass (--cpu-offload-gb)",
        "Layers are parked in RAM (--cpu-offload-gb, --offload-group-size)",
    ),
    (
        "KV cache",
        "One contiguous buffer sized by -c, shared by the slots",
        "A pool of fixed-size blocks, sized by profiling at startup",
        "A pool of single-token entries indexed by a radix tree",
    ),
    (
        "Prefix reuse",
        "Per slot (--cache-prompt), plus a prompt cache in RAM",
        "Automatic prefix caching in whole blocks",
        "RadixAttention, down to single tokens",
    ),
    (
        "Batching",
        "Continuous batching over the -np slots",
        "Continuous batching with chunked prefill",
        "Continuous batching, chunked prefill and an overlapped scheduler",
    ),
    (
        "Best for",
        "One or a few users on any machine, and models bigger than VRAM",
        "Many concurrent requests on a GPU that holds the whole model",
        "Many requests sharing long prefixes: agents, RAG, few-shot prompts",
    ),
)

# ---------------------------------------------------------------------------------------------------------
# Configuration: engine -> [(parameter, default, what it does, [(figure id, query), ...])]
# ---------------------------------------------------------------------------------------------------------
CONFIG = {
    "llama": (
        (
            "-ngl, --n-gpu-layers",
            "auto",
            "How many transformer blocks, with their share of the KV cache, go to VRAM: a number, all, or auto.",
            [("calculator", "?ngl=40"), ("offload-curve", "")],
        ),
        (
            "--fit / --fit-target / --fit-ctx",
            "on / 1024 MiB / 4096",
            "Shrinks any setting you did not give until the model fits, leaving the target free on each device; "
            "the context never drops below --fit-ctx.",
            [("calculator", ""), ("offload-curve", "?ctx=32768")],
        ),
        (
            "-c, --ctx-size",
            "0 (model's trained length)",
            "Tokens of KV cache reserved at startup, shared by every slot.",
            [("calculator", "?ctx=32768"), ("decode-curve", "")],
        ),
        (
            "-b, --batch-size / -ub, --ubatch-size",
            "2048 / 512",
            "Logical and physical prompt batch; the physical one sets the size of the compute buffer.",
            [("phases", "")],
        ),
        ("-t / -tb", "physical cores", "CPU threads for generation and for prompt processing.", []),
        (
            "-fa, --flash-attn",
            "auto",
            "Fused attention kernel; a quantized V cache needs it on.",
            [("decode-curve", "")],
        ),
        (
            "-ctk / -ctv",
            "f16",
            "Element type of the cached keys and values: f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0 or q5_1.",
            [("decode-curve", ""), ("calculator", "?kv=q8_0")],
        ),
        (
            "--load-mode",
            "auto (mmap)",
            "How the file reaches memory: mmap, mlock, mmap+mlock, none or dio.",
            [("load", "")],
        ),
        (
            "-np, --parallel",
            "auto (4)",
            "Server slots, i.e. sequences decoded at the same time.",
            [("kv-managers", ""), ("users", "?np=4&kv_engine=llama.cpp&kv_users=16")],
        ),
        (
            "-kvu, --kv-unified",
            "on when -np is auto",
            "All slots draw on one KV pool instead of equal shares.",
            [("kv-managers", "")],
        ),
        (
            "--cache-prompt / --cache-reuse / --cache-ram",
            "on / 0 / 8192 MiB",
            "Keeps earlier prompts around, in the slots and in a RAM cache, so they need not be computed again.",
            [("kv-managers", "")],
        ),
        (
            "-ot, --override-tensor",
            "—",
            "Sends the tensors whose names match a regular expression to a chosen device.",
            [],
        ),
        (
            "--cpu-moe / --n-cpu-moe N",
            "—",
            "Leaves the expert weights of a mixture-of-experts model (all, or the first N layers') in RAM.",
            [("calculator", "?model=qwen3-30b-a3b&machine=rtx3060&n_cpu_moe=24")],
        ),
        ("-sm / -ts", "layer / even", "How a model is split over several GPUs, and in what proportions.", []),
        (
            "--op-offload",
            "on",
            "During a large prompt batch, copies a RAM layer's weights to the GPU and multiplies there.",
            [("phases", "")],
        ),
        ("-nkvo, --no-kv-offload", "off", "Keeps the KV cache in system RAM even for layers on the GPU.", []),
        (
            "--spec-draft-model, -md / --spec-draft-n-max",
            "— / 3",
            "Speculative decoding: a small draft model proposes tokens the big one checks in one pass.",
            [("roofline", "?batch=4")],
        ),
    ),
    "vllm": (
        (
            "--gpu-memory-utilization",
            "0.92",
            "Share of the card's total memory vLLM claims for weights, activations and KV blocks.",
            [("serving-plan", "")],
        ),
        (
            "--max-model-len",
            "from model config; auto fits to memory",
            "Longest sequence accepted; it also caps the KV memory one request can need.",
            [("serving-plan", "")],
        ),
        (
            "--max-num-seqs / --max-num-batched-tokens",
            "256 / 2048 (server, GPU < 70 GiB)",
            "Requests running at once, and tokens the scheduler packs into one step.",
            [("roofline", "?batch=256"), ("users", "")],
        ),
        (
            "--kv-cache-dtype",
            "auto",
            "fp8 (e4m3) or fp8_e5m2 store the cache in half the bytes.",
            [("serving-plan", ""), ("decode-curve", "")],
        ),
        ("--block-size", "16", "Tokens held by one KV block.", [("kv-managers", "")]),
        (
            "--enable-prefix-caching",
            "on",
            "Reuses full blocks whose whole prefix hashes the same.",
            [("kv-managers", "")],
        ),
        (
            "--enforce-eager",
            "off",
            "Skips CUDA graphs: less memory and a faster start, slower decode steps.",
            [("serving-plan", "")],
        ),
        (
            "--cpu-offload-gb",
            "0",
            "GiB of weights kept in RAM and streamed to the GPU on every forward pass.",
            [("tiers", "")],
        ),
        (
            "--quantization, -q",
            "from checkpoint",
            "Weight format: awq, gptq, fp8, compressed-tensors and others.",
            [("roofline", "")],
        ),
        ("--tensor-parallel-size, -tp", "1", "Splits every layer across this many GPUs.", []),
        (
            "--enable-lora / --max-loras / --max-lora-rank",
            "off / 1 / 16",
            "Serves LoRA adapters on top of the base.",
            [],
        ),
        (
            "--speculative-config",
            "—",
            "JSON choosing a speculative method: ngram, draft_model, eagle, eagle3 and more.",
            [("roofline", "?batch=4")],
        ),
    ),
    "sglang": (
        (
            "--mem-fraction-static",
            "auto",
            "Share of GPU memory reserved for the weights plus the KV pool.",
            [("serving-plan", "")],
        ),
        ("--context-length", "from model config", "Longest sequence accepted.", [("serving-plan", "")]),
        (
            "--max-running-requests",
            "auto",
            "Requests decoded at the same time.",
            [("kv-managers", ""), ("users", "?kv_engine=sglang")],
        ),
        (
            "--chunked-prefill-size",
            "auto (2048 on GPUs < 20 GB)",
            "Largest piece a long prompt is cut into; -1 turns chunking off.",
            [("phases", "")],
        ),
        (
            "--schedule-policy",
            "fcfs",
            "Order of waiting requests; lpm (longest prefix match) is the paper's cache-aware choice.",
            [("kv-managers", "?policy=lpm")],
        ),
        (
            "--disable-radix-cache / --radix-eviction-policy",
            "off / lru",
            "Turns the radix prefix cache off, or picks how it frees entries.",
            [("kv-managers", "")],
        ),
        (
            "--kv-cache-dtype",
            "auto",
            "fp8_e4m3, fp8_e5m2 and others shrink the cache.",
            [("serving-plan", ""), ("decode-curve", "")],
        ),
        (
            "--cuda-graph-max-bs-decode",
            "auto (8 on GPUs < 20 GB)",
            "Largest decode batch recorded as a CUDA graph.",
            [("serving-plan", "")],
        ),
        (
            "--quantization",
            "from checkpoint",
            "Weight format: awq, gptq, fp8, gguf, bitsandbytes and others.",
            [("roofline", "")],
        ),
        ("--lora-paths / --max-loras-per-batch", "— / 8", "Serves LoRA adapters.", []),
        (
            "--speculative-algorithm",
            "—",
            "Speculative decoding: EAGLE, EAGLE3, NGRAM, STANDALONE and more.",
            [("roofline", "?batch=4")],
        ),
    ),
}

SPEC = Spec(
    ID,
    [
        Text(
            "q",
            "Filter",
            default="",
            max_len=60,
            rows=1,
            placeholder="e.g. kv cache, fp8, -ngl",
            help="Words that must all appear (in a parameter, its default or its description).",
        ),
    ]
    + [Bool(k, name, default=True) for k, name in ENGINES],
)


State = SPEC.State  # this figure's state: the filter q and one checkbox per engine


def default_state() -> State:
    return SPEC.default()


def controls(state) -> str:
    """The filter as a one-line search box (the glue reads any <input> in a [data-field] box), then the
    engine checkboxes, grouped."""
    from .. import page

    f = SPEC.by_key["q"]
    fid = page.field_id("q")
    box = el(
        "div",
        [
            el("label", f.label, for_=fid),
            el(
                "input",
                type="search",
                id_=fid,
                name="q",
                value=state.q,
                maxlength=f.max_len,
                placeholder=f.placeholder,
                autocomplete="off",
                spellcheck="false",
                aria_describedby=f"{fid}-help",
            ),
            el("small", f.help, id_=f"{fid}-help", class_="help"),
        ],
        class_="field field-text field-filter",
        data_field="q",
        data_sig=page.field_sig(f, {}),
    )
    return page.grouped_controls(SPEC, state, "Engines", lambda key: key != "q", replace={"q": box})


# ---------------------------------------------------------------------------------------------------------
# Compute
# ---------------------------------------------------------------------------------------------------------
def terms(q: str) -> list:
    return [t for t in q.lower().split() if t]


def matches(texts, ts) -> bool:
    """Every term appears somewhere in the texts (case-insensitive)."""
    hay = " ".join(texts).lower()
    return all(t in hay for t in ts)


@dataclass(frozen=True)
class ComparisonRow:
    aspect: str
    cells: dict[str, str]  # engine key -> what that engine does


@dataclass(frozen=True)
class ConfigRow:
    param: str  # the command-line flag(s)
    default: str
    what: str  # what it does
    links: tuple[tuple[str, str], ...]  # (figure id, query string) of the figures where it shows


@dataclass(frozen=True)
class Readouts:
    rows_shown: int  # comparison rows and parameters shown
    params_shown: int


@dataclass(frozen=True)
class EnginesData:
    state: State
    terms: tuple[str, ...]  # the filter's words, lower case
    engines: tuple[str, ...]  # the engine keys shown, in ENGINES order
    comparison: tuple[ComparisonRow, ...]  # the aspects that match
    config: dict[str, tuple[ConfigRow, ...]]  # engine key -> its parameters that match
    totals: dict[str, int]  # engine key -> all its parameters
    counts: dict[str, dict[str, int]]  # engine key -> figure id -> parameters shown that link there
    readouts: Readouts


def compute(state: State) -> EnginesData:
    ts = terms(state.q)
    shown = [k for k, _ in ENGINES if getattr(state, k)]
    comparison = []
    for row in COMPARISON:
        aspect, cells = row[0], dict(zip([k for k, _ in ENGINES], row[1:]))
        if matches([aspect] + [cells[k] for k in shown], ts):
            comparison.append(ComparisonRow(aspect=aspect, cells=cells))
    config, totals = {}, {}
    for k in shown:
        rows = CONFIG[k]
        totals[k] = len(rows)
        config[k] = tuple(
            ConfigRow(param=p, default=d, what=w, links=tuple(links))
            for p, d, w, links in rows
            if matches([p, d, w], ts)
        )
    counts = {k: {f: sum(1 for r in config[k] for fid, _ in r.links if fid == f) for f in FIGURES} for k in shown}
    return EnginesData(
        state=state,
        terms=tuple(ts),
        engines=tuple(shown),
        comparison=tuple(comparison),
        config=config,
        totals=totals,
        counts=counts,
        readouts=Readouts(
            rows_shown=len(comparison) + sum(len(v) for v in config.values()),
            params_shown=sum(len(v) for v in config.values()),
        ),
    )


def describe(data: EnginesData) -> str:
    s = data.state
    names = dict(ENGINES)
    if not data.engines:
        return "No engine selected: tick llama.cpp, vLLM or SGLang."
    what = f" matching {s.q!r}" if data.terms else ""
    per = ", ".join(f"{names[k]} {len(data.config[k])} of {data.totals[k]} parameters" for k in data.engines)
    return f"Comparison rows{what}: {len(data.comparison)} of {len(COMPARISON)}; {per}."


# ---------------------------------------------------------------------------------------------------------
# Render
# ---------------------------------------------------------------------------------------------------------
def highlight(text: str, ts) -> list:
    """text split into plain strings and <mark> elements around every occurrence of a term."""
    if not ts:
        return [text]
    low = text.lower()
    spans = []
    for t in ts:
        i = low.find(t)
        while i >= 0:
            spans.append((i, i + len(t)))
            i = low.find(t, i + 1)
    if not spans:
        return [text]
    spans.sort()
    merged = [list(spans[0])]
    for a, b in spans[1:]:
        if a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    out, pos = [], 0
    for a, b in merged:
        out += [text[pos:a], el("mark", text[a:b])]
        pos = b
    out.append(text[pos:])
    return [p for p in out if p != ""]


def link_href(fid: str, query: str) -> str:
    return links.figure_href(fid, query)  # right from a figure page and from the site root alike


def _links(links) -> Raw:
    if not links:
        return el("span", "—", class_="muted")
    return join(
        el("a", FIGURES[fid], href=link_href(fid, q), class_="fig-link", data_figure_link=fid) for fid, q in links
    )


def _comparison(data: EnginesData) -> Raw:
    names = dict(ENGINES)
    ts = data.terms
    head = el(
        "thead",
        el(
            "tr",
            [el("th", "Aspect", scope="col")]
            + [el("th", names[k], scope="col", class_=f"eng eng-{k}") for k in data.engines],
        ),
    )
    body = el(
        "tbody",
        [
            el(
                "tr",
                [el("th", highlight(r.aspect, ts), scope="row")]
                + [el("td", highlight(r.cells[k], ts), class_=f"eng-{k}", data_label=names[k]) for k in data.engines],
            )
            for r in data.comparison
        ],
    )
    return el(
        "section",
        [
            el("h2", "Where they differ", id_="where-they-differ"),
            el(
                "table",
                [el("caption", f"{len(data.comparison)} of {len(COMPARISON)} aspects"), head, body],
                class_="engines-table compare",
            )
            if data.comparison
            else el("p", "No aspect matches the filter.", class_="empty"),
        ],
        class_="engines-section",
    )


def _config(data: EnginesData, k: str) -> Raw:
    names = dict(ENGINES)
    ts = data.terms
    rows = data.config[k]
    head = el(
        "thead",
        el("tr", [el("th", h, scope="col") for h in ("Parameter", "Default", "What it does", "Where it shows")]),
    )
    body = el(
        "tbody",
        [
            el(
                "tr",
                [
                    el("th", el("code", highlight(r.param, ts)), scope="row"),
                    el("td", highlight(r.default, ts), class_="default"),
                    el("td", highlight(r.what, ts)),
                    el("td", _links(r.links), class_="links"),
                ],
                data_param=r.param,
            )
            for r in rows
        ],
    )
    title = {
        "llama": "llama.cpp (llama-server, llama-cli)",
        "vllm": "vLLM (vllm serve)",
        "sglang": "SGLang (python -m sglang.launch_server)",
    }[k]
    return el(
        "section",
        [
            el("h2", title, id_=f"config-{k}"),
            el(
                "table",
                [el("caption", f"{len(rows)} of {data.totals[k]} parameters"), head, body],
                class_=f"engines-table config config-{k}",
            )
            if rows
            else el("p", f"No {names[k]} parameter matches the filter.", class_="empty"),
        ],
        class_="engines-section",
        data_engine=k,
    )


W = 720


def _map(data: EnginesData) -> Raw:
    """Dots: for each engine shown (rows) and figure (columns), how many shown parameters link there."""
    names = dict(ENGINES)
    figs = list(FIGURES)
    left, top, colw, rowh = 92, 80, (W - 92 - 84) / len(figs), 34
    h = top + rowh * max(1, len(data.engines)) + 8
    parts = []
    for j, f in enumerate(figs):
        cx = left + colw * (j + 0.5)
        parts.append(
            el(
                "text",
                FIGURES[f],
                x=cx,
                y=top - 10,
                text_anchor="start",
                class_="map-col",
                transform=f"rotate(-30 {cx:.1f} {top - 10})",
            )
        )
    for i, k in enumerate(data.engines):
        cy = top + rowh * (i + 0.5)
        parts.append(el("text", names[k], x=left - 10, y=cy + 4, text_anchor="end", class_="map-row"))
        for j, f in enumerate(figs):
            n = data.counts[k][f]
            cx = left + colw * (j + 0.5)
            t = f"{names[k]}: {n} parameter{'s' if n != 1 else ''} shown link to the {FIGURES[f]}"
            parts.append(
                el(
                    "circle",
                    el("title", t),
                    cx=cx,
                    cy=cy,
                    r=4 + 3 * n if n else 2.5,
                    class_=f"map-dot eng-{k}" + ("" if n else " map-empty"),
                    data_count=str(n),
                )
            )
            if n:
                parts.append(el("text", str(n), x=cx, y=cy + 4, text_anchor="middle", class_="map-n"))
    if not data.engines:
        parts.append(el("text", "No engine selected", x=left, y=top + 20, class_="map-row"))
    return svg(
        parts,
        width=W,
        height=h,
        id_="engines-map",
        class_="chart engines-map",
        title="Where each engine's parameters show up in the figures",
        desc=describe(data),
    )


def _map_narrow(data: EnginesData) -> Raw:
    """The same map re-laid out for a phone (chart.NARROW_W wide): a row per figure, a column per engine, so
    the figure names read horizontally at their size instead of a wide chart scaled down or cut off."""
    names = dict(ENGINES)
    figs = list(FIGURES)
    width = chart.NARROW_W
    left, top, rowh = 128, 30, 26
    colw = (width - left - 6) / max(1, len(data.engines))
    h = top + rowh * len(figs) + 6
    parts = []
    for j, k in enumerate(data.engines):
        cx = left + colw * (j + 0.5)
        parts.append(el("text", names[k], x=cx, y=top - 10, text_anchor="middle", class_="map-row"))
    for i, f in enumerate(figs):
        cy = top + rowh * (i + 0.5)
        parts.append(el("text", FIGURES[f], x=0, y=cy + 4, class_="map-col"))
        for j, k in enumerate(data.engines):
            n = data.counts[k][f]
            cx = left + colw * (j + 0.5)
            t = f"{names[k]}: {n} parameter{'s' if n != 1 else ''} shown link to the {FIGURES[f]}"
            parts.append(
                el(
                    "circle",
                    el("title", t),
                    cx=cx,
                    cy=cy,
                    r=min(4 + 3 * n, rowh / 2 - 1) if n else 2.5,
                    class_=f"map-dot eng-{k}" + ("" if n else " map-empty"),
                )
            )
            if n:
                parts.append(el("text", str(n), x=cx, y=cy + 4, text_anchor="middle", class_="map-n"))
    if not data.engines:
        parts.append(el("text", "No engine selected", x=left, y=top, class_="map-row"))
    return svg(
        parts,
        width=width,
        height=h,
        id_="engines-map-n",
        class_="chart engines-map",
        title="Where each engine's parameters show up in the figures",
        desc=describe(data),
    )


def _map_table(data: EnginesData) -> Raw:
    names = dict(ENGINES)
    header = ["Engine"] + [FIGURES[f] for f in FIGURES]
    rows = [[names[k]] + [str(data.counts[k][f]) for f in FIGURES] for k in data.engines]
    return data_details("Data table: parameters per figure", table(describe(data), header, rows))


def render(data: EnginesData) -> str:
    parts = []
    if not data.engines:
        parts.append(
            el("div", "No engine selected: tick llama.cpp, vLLM or SGLang above.", class_="alert", role="alert")
        )
    parts.append(
        el(
            "p",
            [
                el("output", str(data.readouts.rows_shown), **readout_attrs("rows_shown", data.readouts.rows_shown)),
                " rows shown. ",
                describe(data),
            ],
            class_="engines-count",
        )
    )
    parts.append(el("figure", [chart.responsive(lambda: _map(data), lambda: _map_narrow(data))], class_="chart-wrap"))
    parts.append(_map_table(data))
    if data.engines:
        parts.append(_comparison(data))
        parts += [_config(data, k) for k in data.engines]
    parts.append(
        el(
            "p",
            "Defaults as the module lists them (each project's main branch, October 2026); check "
            "--help on the version you run.",
            class_="note",
        )
    )
    return el("div", parts, class_="engines")
