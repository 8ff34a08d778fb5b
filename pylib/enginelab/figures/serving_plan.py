"""vLLM and SGLang memory planning: how each engine divides one GPU at start-up.

Every number comes from the course-side module serving_plan (vllm_plan, sglang_plan), which documents the
engine versions it follows. This module arranges the plan into controls, readouts, a stacked bar of the
GPU's memory, the start-up log lines, the command line and a data table.

compute(state) returns a ServingPlanData: the engine's plan (a VllmPlan or SglangPlan: the fields of
serving_plan's plan dict that this figure shows), or the error that stopped the planner, and the Readouts.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import perf_model as pm

from .. import chart, fmt, links
from .. import serving_plan as sp
from ..chart import readout as _readout  # the data-readout contract, in one place
from ..state import Bool, Choice, Float, Int, Spec
from ..svg import Raw, data_details, el, svg, table

ID = "serving-plan"
TITLE = "vLLM and SGLang memory planner"
LEDE = (
    "Both serving engines grab the KV cache up front. Pick an engine, a model, a GPU and the engine's own "
    "settings: see what the weights, activations and CUDA graphs take, how many tokens the KV pool holds, "
    "and the start-up lines the engine would log."
)

VLLM_READOUTS = ("gpu_kv_cache_tokens", "max_concurrency", "num_gpu_blocks", "available_kv_gib", "fits")
SGLANG_READOUTS = ("max_total_num_tokens", "max_running_requests", "mem_fraction_static", "kv_pool_gib", "fits")


# ---------------------------------------------------------------------------------------------------------
# State
# ---------------------------------------------------------------------------------------------------------
def machines() -> dict:
    """The catalog's machines with a discrete GPU and the published serving runs' A100 and H100 80 GB
    (enginelab.serving.validate.server_machines)."""
    from ..serving import validate

    return {**sp.serving_machines(), **validate.server_machines()}


def _vllm_default(partial, key: str) -> int:
    """vLLM's own default for the GPU picked (serving_plan.vllm_gpu_defaults: 256 sequences and 2,048 tokens a step
    under 70 GiB or on an A100, 1,024 and 8,192 on a larger GPU)."""
    mcs = machines()
    mc = mcs.get(partial.get("machine"), mcs["rtx4090"])
    return sp.vllm_gpu_defaults(mc)[key]


def _model(partial):
    return pm.MODELS[partial["model"]]


def _is(engine):
    return lambda p: p.get("engine") == engine


MFS_OPTIONS = [("auto", "auto (SGLang's heuristic)")] + [(f"{x / 100:.2f}", f"{x / 100:.2f}") for x in range(40, 96)]

SPEC = Spec(
    ID,
    [
        Choice(
            "engine",
            "Engine",
            default="vllm",
            options=[("vllm", "vLLM (vllm serve)"), ("sglang", "SGLang (sglang.launch_server)")],
        ),
        Choice("model", "Model", default="llama-3.1-8b", options=lambda p: [(k, m.name) for k, m in pm.MODELS.items()]),
        Choice(
            "machine",
            "GPU",
            default="rtx4090",
            options=lambda p: [(k, m.gpu.name) for k, m in machines().items()],
        ),
        Choice(
            "tp",
            "GPUs (--tensor-parallel-size / --tp)",
            default="1",
            options=[(str(n), f"{n} (tensor parallel)" if n > 1 else "1") for n in sp.TP_SIZES],
            help="Each GPU holds 1/tp of the weights and its share of the KV heads; every number below is per GPU.",
        ),
        Choice(
            "weights",
            "Checkpoint weights",
            default="bf16",
            options=lambda p: [(k, v[0]) for k, v in sp.WEIGHT_DTYPES.items()],
        ),
        Int(
            "ctx",
            "Context (--max-model-len / --context-length)",
            default=8192,
            min=16,
            max=lambda p: _model(p).max_position_embeddings,
            step=1024,
            help="Longest request, prompt plus output, in tokens.",
        ),
        Choice(
            "kv",
            "KV cache dtype (--kv-cache-dtype)",
            default="auto",
            options=[("auto", "auto (= model dtype)"), ("fp8", "fp8 (e4m3)"), ("fp8_e5m2", "fp8_e5m2")],
        ),
        Bool(
            "graphs", "CUDA graphs", default=True, help="Off: --enforce-eager (vLLM) / --disable-cuda-graph (SGLang)."
        ),
        Float(
            "util",
            "--gpu-memory-utilization",
            default=0.92,
            min=0.05,
            max=1.0,
            step=0.01,
            visible=_is("vllm"),
            help="Fraction of total GPU memory vLLM may use.",
        ),
        Choice(
            "block_size",
            "--block-size (tokens per block)",
            default="16",
            visible=_is("vllm"),
            options=[(str(b), str(b)) for b in (8, 16, 32, 64, 128)],
        ),
        Int(
            "max_num_seqs",
            "--max-num-seqs",
            default=lambda p: _vllm_default(p, "max_num_seqs"),
            min=1,
            max=1024,
            visible=_is("vllm"),
            help="Concurrency cap; also sizes the sampler and CUDA graphs.",
        ),
        Int(
            "max_num_batched_tokens",
            "--max-num-batched-tokens",
            default=lambda p: _vllm_default(p, "max_num_batched_tokens"),
            min=16,
            max=65536,
            step=256,
            visible=_is("vllm"),
            help="Tokens per scheduler step; sizes the profiling run.",
        ),
        Choice(
            "mfs",
            "--mem-fraction-static",
            default="auto",
            options=MFS_OPTIONS,
            visible=_is("sglang"),
            help="Fraction of free memory for weights + KV pool.",
        ),
        Float(
            "other_gib",
            "Used by other processes (GiB)",
            default=0.0,
            min=0.0,
            max=32.0,
            step=0.25,
            help="A desktop or another program on the same GPU.",
        ),
    ],
)


State = SPEC.State  # this figure's state: engine, model, machine, weights and the engines' own settings


def default_state() -> State:
    return SPEC.default()


# ---------------------------------------------------------------------------------------------------------
# Compute
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """What this figure shows of a serving_plan plan (its keys of the same names; sizes in bytes)."""

    model: str  # the model's name
    gpu: str  # the GPU's name
    fits: bool  # the engine would start
    error: str | None  # why it would not
    total_bytes: float  # the GPU's memory
    weights_bytes: float
    kv_cache_bytes: float  # the KV pool allocated
    log_lines: tuple[str, ...]  # what the engine would print at start-up
    command: str  # the command line
    notes: tuple[str, ...]
    kv_heads_per_gpu: int  # tensor parallelism: the KV heads each GPU keeps (replicated below one per GPU)
    kv_heads_replicated: bool
    allreduce_bytes_per_token: float  # what each GPU sends per token (0 on one GPU)

    @classmethod
    def of(cls, plan: dict):
        """The fields of this class from a plan dict (a missing key is an error)."""
        return cls(
            **{f.name: tuple(plan[f.name]) if f.name in ("log_lines", "notes") else plan[f.name] for f in fields(cls)}
        )


@dataclass(frozen=True)
class VllmPlan(Plan):
    """serving_plan.vllm_plan's numbers."""

    gpu_memory_utilization: float
    max_model_len: int
    block_size: int
    requested_bytes: float  # total x gpu_memory_utilization
    reserved_bytes: float  # outside gpu_memory_utilization
    peak_activation_bytes: float
    non_torch_bytes: float
    cudagraph_bytes: float
    available_kv_bytes: float  # the KV budget (negative: over it)
    profiled: bool  # vLLM got as far as measuring it (the weights loaded): available_kv_bytes is what it logs
    page_size_bytes: int  # one block of one layer
    kv_bytes_per_token: float
    num_layers: int
    num_gpu_blocks: int
    gpu_kv_cache_tokens: int
    max_concurrency: float
    blocks_per_request: int  # one max_model_len request
    needed_bytes: float  # one max_model_len request's KV


@dataclass(frozen=True)
class SglangPlan(Plan):
    """serving_plan.sglang_plan's numbers."""

    mem_fraction_static: float
    context_length: int
    static_bytes: float  # total x mem_fraction_static
    cuda_context_bytes: float
    other_processes_bytes: float
    free_before_load_bytes: float
    activation_reserve_bytes: float  # free before loading - static
    rest_bytes: float  # static - weights (negative: over it)
    unused_bytes: float
    cell_size_bytes: int  # one token, all layers
    max_total_num_tokens: int
    max_running_requests: int
    request_capped: bool  # one context_length request does not fit the pool: SGLang caps every request
    max_req_len: int  # the cap, min(context_length, max_total_num_tokens) - 1


@dataclass(frozen=True)
class VllmReadouts:
    """vLLM's numbers on the page (None where the engine would not start)."""

    gpu_kv_cache_tokens: int | None
    max_concurrency: float | None
    num_gpu_blocks: int | None
    available_kv_gib: float | None
    fits: bool


@dataclass(frozen=True)
class SglangReadouts:
    """SGLang's numbers on the page (None where the engine would not start)."""

    max_total_num_tokens: int | None
    max_running_requests: int | None
    mem_fraction_static: float | None
    kv_pool_gib: float | None
    fits: bool
    capped_at: int | None = None  # it starts, but one --context-length request does not fit: requests stop here


@dataclass(frozen=True)
class ServingPlanData:
    state: State
    engine: str  # vllm or sglang
    plan: VllmPlan | SglangPlan | None  # None when the planner rejected the settings
    error: str | None  # the planner's message then
    readouts: VllmReadouts | SglangReadouts


def compute(state: State) -> ServingPlanData:
    try:
        if state.engine == "vllm":
            plan = sp.vllm_plan(
                state.model,
                machines()[state.machine],
                state.weights,
                gpu_memory_utilization=state.util,
                max_model_len=state.ctx,
                block_size=int(state.block_size),
                kv_cache_dtype=state.kv,
                enforce_eager=not state.graphs,
                max_num_seqs=state.max_num_seqs,
                max_num_batched_tokens=state.max_num_batched_tokens,
                other_processes_gib=state.other_gib,
                tensor_parallel_size=int(state.tp),
            )
        else:
            plan = sp.sglang_plan(
                state.model,
                machines()[state.machine],
                state.weights,
                mem_fraction_static=None if state.mfs == "auto" else float(state.mfs),
                context_length=state.ctx,
                kv_cache_dtype={"fp8": "fp8_e4m3"}.get(state.kv, state.kv),
                disable_cuda_graph=not state.graphs,
                other_processes_gib=state.other_gib,
                tp_size=int(state.tp),
            )
    except ValueError as e:  # settings the planner rejects: shown, never a crash
        none = (
            VllmReadouts(None, None, None, None, False)
            if state.engine == "vllm"
            else SglangReadouts(None, None, None, None, False)
        )
        return ServingPlanData(state=state, engine=state.engine, plan=None, error=str(e), readouts=none)
    GiB = sp.GiB
    if state.engine == "vllm":
        p = VllmPlan.of(plan)
        ok = p.fits
        readouts = VllmReadouts(
            gpu_kv_cache_tokens=p.gpu_kv_cache_tokens if ok else None,
            max_concurrency=p.max_concurrency if ok else None,
            num_gpu_blocks=p.num_gpu_blocks if ok else None,
            available_kv_gib=p.available_kv_bytes / GiB if p.profiled else None,  # never measured otherwise
            fits=ok,
        )
    else:
        p = SglangPlan.of(plan)
        ok = p.fits
        readouts = SglangReadouts(
            max_total_num_tokens=p.max_total_num_tokens if ok else None,
            max_running_requests=p.max_running_requests if ok else None,
            mem_fraction_static=p.mem_fraction_static,
            kv_pool_gib=p.kv_cache_bytes / GiB,
            fits=ok,
            capped_at=p.max_req_len if ok and p.request_capped else None,
        )
    return ServingPlanData(state=state, engine=state.engine, plan=p, error=None, readouts=readouts)


def describe(data: ServingPlanData) -> str:
    s = data.state
    eng = "vLLM" if s.engine == "vllm" else "SGLang"
    if data.error:
        return f"{eng}: these settings cannot be planned: {data.error}"
    p = data.plan
    where = f"{eng} serving {p.model} ({s.weights}) on {p.gpu}"
    if not p.fits:
        return f"{where}: would not start. {p.error}"
    if s.engine == "vllm":
        return (
            f"{where} at gpu_memory_utilization {s.util:g}: {fmt.gib(p.available_kv_bytes)} for the KV "
            f"cache, {p.num_gpu_blocks:,} blocks of {p.block_size} tokens; GPU KV cache size "
            f"{p.gpu_kv_cache_tokens:,} tokens, maximum concurrency {p.max_concurrency:.2f}x for "
            f"{p.max_model_len:,}-token requests."
        )
    capped = (
        f" One {p.context_length:,}-token request does not fit the pool: requests are capped at "
        f"{p.max_req_len:,} tokens."
        if p.request_capped
        else ""
    )
    return (
        f"{where} at mem_fraction_static {p.mem_fraction_static:g}: a pool of "
        f"{p.max_total_num_tokens:,} tokens ({fmt.gib(p.kv_cache_bytes)}), max running requests "
        f"{p.max_running_requests:,}.{capped}"
    )


# ---------------------------------------------------------------------------------------------------------
# Render
# ---------------------------------------------------------------------------------------------------------
W, PAD, BAR_Y, BAR_H = 500, 10, 30, 36

VLLM_SEGMENTS = (
    ("weights", "Weights"),
    ("activation", "Peak activation"),
    ("non_torch", "Non-torch"),
    ("graphs", "CUDA graphs"),
    ("kv", "KV cache pool"),
    ("unused", "Unused in budget"),
    ("reserved", "Outside gpu_memory_utilization"),
)
SGLANG_SEGMENTS = (
    ("weights", "Weights"),
    ("kv", "KV cache pool"),
    ("unused", "Unused in budget"),
    ("activation", "Activations + CUDA graphs (1 - fraction)"),
    ("reserved", "CUDA context + other processes"),
)


def segments(data: ServingPlanData) -> list:
    """(key, label, bytes, exact?) of the GPU's memory, in drawing order, summing to the total (plus any overflow)."""
    p = data.plan
    if data.engine == "vllm":
        over = max(0.0, -p.available_kv_bytes)
        vals = {
            "weights": p.weights_bytes,
            "activation": p.peak_activation_bytes,
            "non_torch": p.non_torch_bytes,
            "graphs": p.cudagraph_bytes,
            # a plan that fails its start-up checks never allocates the pool: the budget stays unused
            "kv": p.kv_cache_bytes if p.fits else 0.0,
            "unused": max(0.0, p.available_kv_bytes - (p.kv_cache_bytes if p.fits else 0.0)),
            "reserved": max(0.0, p.reserved_bytes - over),
        }
        exact = {
            "weights": True,
            "activation": False,
            "non_torch": False,
            "graphs": False,
            "kv": True,
            "unused": True,
            "reserved": True,
        }
        segs = VLLM_SEGMENTS
    else:
        over = max(0.0, -p.rest_bytes)
        vals = {
            "weights": p.weights_bytes,
            "kv": p.kv_cache_bytes if p.fits else 0.0,
            "unused": max(0.0, p.unused_bytes if p.fits else p.rest_bytes),
            "activation": max(0.0, p.activation_reserve_bytes - over),
            "reserved": p.cuda_context_bytes + p.other_processes_bytes,
        }
        exact = {"weights": True, "kv": True, "unused": True, "activation": True, "reserved": False}
        segs = SGLANG_SEGMENTS
    return [(k, label, vals[k], exact[k]) for k, label in segs]


def _bar(data: ServingPlanData, narrow: bool = False) -> Raw:
    """The GPU's memory as one stacked bar, with the engine's budget and a tick per full-length request.
    narrow: drawn for a phone (chart.NARROW_W wide; the legend wraps into more rows)."""
    p = data.plan
    W = chart.NARROW_W if narrow else globals()["W"]  # noqa: N806  (this drawing's width)
    total = p.total_bytes
    segs = segments(data)
    used = sum(v for _, _, v, _ in segs)
    scale_max = max(total, used)
    left, span = PAD, W - 2 * PAD
    x_of = lambda v: left + span * v / scale_max  # noqa: E731
    each = " per GPU" if int(data.state.tp) > 1 else " total"  # tensor parallel: every number is one GPU's
    parts = [el("text", f"{p.gpu}: {fmt.gib(total)}{each}", x=left, y=20, class_="bar-label")]
    bar = [
        chart.Segment(
            v,
            f"{label}: {fmt.gib(v)}{'' if exact else ' (estimated)'}",
            f"sp-seg sp-seg-{key}",
            attrs={"data_segment": key, "data_bytes": f"{v:.0f}"},
        )
        for key, label, v, exact in segs
    ]
    parts += chart.stacked_bar(bar, x0=left, y=BAR_Y, height=BAR_H, span=span, total=scale_max)
    parts.append(el("rect", x=left, y=BAR_Y, width=x_of(total) - left, height=BAR_H, class_="capacity"))
    if used > total * (1 + 1e-9):
        parts.append(
            el(
                "rect",
                el("title", f"Over the GPU: {fmt.gib(used - total)}"),
                x=x_of(total),
                y=BAR_Y - 3,
                width=x_of(used) - x_of(total),
                height=BAR_H + 6,
                class_="overflow",
            )
        )
    # budget marker: where the engine's own limit ends
    if data.engine == "vllm":
        bx, blabel = x_of(p.requested_bytes), f"gpu_memory_utilization {p.gpu_memory_utilization:g}"
    else:
        bx = x_of(p.static_bytes)
        blabel = f"mem_fraction_static {p.mem_fraction_static:g}"
    parts.append(el("line", x1=bx, x2=bx, y1=BAR_Y - 6, y2=BAR_Y + BAR_H + 6, class_="sp-budget"))
    anchor = "end" if bx > W * 0.6 else "start"
    parts.append(
        el(
            "text",
            blabel,
            x=bx + (-4 if anchor == "end" else 4),
            y=BAR_Y + BAR_H + 18,
            class_="sp-budget-label",
            text_anchor=anchor,
        )
    )
    # per-request ticks across the KV pool: each tick is one max_model_len request
    kv_bytes = dict((k, v) for k, _, v, _ in segs)["kv"]
    if data.engine == "vllm":
        per_req = p.blocks_per_request * p.page_size_bytes * p.num_layers
    else:
        per_req = p.context_length * p.cell_size_bytes
    kx0 = left + span * sum(v for k, _, v, _ in segs[: [k for k, *_ in segs].index("kv")]) / scale_max
    n_req = int(kv_bytes // per_req) if per_req else 0
    if 1 <= n_req <= 64:
        for i in range(1, n_req + 1):
            tx = kx0 + span * per_req * i / scale_max
            parts.append(el("line", x1=tx, x2=tx, y1=BAR_Y + BAR_H - 9, y2=BAR_Y + BAR_H, class_="sp-req-tick"))
    # legend, wrapped into rows
    ly, lx, legend = BAR_Y + BAR_H + 34, left, []
    for key, label, v, _exact in segs:
        if v <= 0:
            continue
        wlab = 16 + 7 * len(label) + 16
        if lx + wlab > W - PAD:
            lx, ly = left, ly + 18
        legend.append(el("rect", x=lx, y=ly, width=12, height=12, class_=f"sp-seg sp-seg-{key}"))
        legend.append(el("text", label, x=lx + 16, y=ly + 11, class_="legend-label"))
        lx += wlab
    height = ly + 12 + 2 * PAD
    eng = "vLLM" if data.engine == "vllm" else "SGLang"
    return svg(
        [el("g", parts, class_="sp-bar"), el("g", legend, class_="legend")],
        width=W,
        height=height,
        title=f"{eng} GPU memory plan: {p.model} on {p.gpu}",
        desc=describe(data),
        id_="serving-plan-chart-n" if narrow else "serving-plan-chart",
        class_="chart serving-plan-chart",
    )


def _ticks(data: ServingPlanData) -> int:
    """How many whole one-request ranges the KV pool holds (the bar draws a tick per request up to 64)."""
    p = data.plan
    kv = p.kv_cache_bytes if p.fits else 0.0
    per_req = (
        p.blocks_per_request * p.page_size_bytes * p.num_layers
        if data.engine == "vllm"
        else p.context_length * p.cell_size_bytes
    )
    return int(kv // per_req) if per_req else 0


def _caption(data: ServingPlanData) -> Raw:
    """Under the bar, as HTML (so it wraps on any screen): what the ticks are, or where the sizes are."""
    p = data.plan
    n = _ticks(data)
    request_tokens = p.max_model_len if data.engine == "vllm" else p.context_length
    text = (
        f"Each tick in the KV pool is one {request_tokens:,}-token request: {n} fit at once."
        if 1 <= n <= 64
        else "Hover a segment for its size; the data table marks which terms are estimates."
    )
    return el("figcaption", text, class_="sp-caption")


def _n(v, digits=0) -> str:
    return "—" if v is None else (f"{v:,.{digits}f}" if digits else f"{v:,}")


def _readouts(data: ServingPlanData) -> Raw:
    r = data.readouts
    fits = r.fits
    if data.engine == "vllm":
        items = [
            _readout(
                "gpu_kv_cache_tokens",
                r.gpu_kv_cache_tokens,
                _n(r.gpu_kv_cache_tokens),
                "GPU KV cache size",
                "tokens",
            ),
            _readout(
                "max_concurrency",
                r.max_concurrency,
                "—" if r.max_concurrency is None else f"{r.max_concurrency:.2f}x",
                f"Maximum concurrency for {data.state.ctx:,} tokens per request",
            ),
            _readout("num_gpu_blocks", r.num_gpu_blocks, _n(r.num_gpu_blocks), "num_gpu_blocks"),
            _readout(
                "available_kv_gib",
                r.available_kv_gib,
                "—" if r.available_kv_gib is None else f"{r.available_kv_gib:.2f}",
                "Available KV cache memory",
                "GiB",
            ),
            _readout("fits", fits, "yes" if fits else "no", "Starts"),
        ]
    else:
        items = [
            _readout(
                "max_total_num_tokens",
                r.max_total_num_tokens,
                _n(r.max_total_num_tokens),
                "max_total_num_tokens",
                "tokens",
            ),
            _readout(
                "max_running_requests", r.max_running_requests, _n(r.max_running_requests), "max_running_requests"
            ),
            _readout(
                "mem_fraction_static",
                r.mem_fraction_static,
                "—" if r.mem_fraction_static is None else f"{r.mem_fraction_static:g}",
                "mem_fraction_static",
            ),
            _readout(
                "kv_pool_gib",
                r.kv_pool_gib,
                "—" if r.kv_pool_gib is None else f"{r.kv_pool_gib:.2f}",
                "KV pool",
                "GiB",
            ),
            _readout(
                "fits",
                fits,
                ("yes" if r.capped_at is None else "capped") if fits else "no",
                "Starts",
                "" if r.capped_at is None else f"every request at {r.capped_at:,} tokens",
            ),
        ]
    return el("dl", items, class_="readouts" + ("" if fits else " readouts-fail"))


def _table(data: ServingPlanData) -> Raw:
    p = data.plan
    total = p.total_bytes
    rows = [
        [label, fmt.gib(v), f"{100 * v / total:.1f}%", "exact" if exact else "estimated"]
        for _, label, v, exact in segments(data)
    ]
    if data.engine == "vllm":
        extra = [
            ["KV page (one block, one layer)", f"{p.page_size_bytes:,} B", "", "exact"],
            ["KV per token (all layers)", f"{p.kv_bytes_per_token:,.0f} B", "", "exact"],
            ["One max_model_len request", fmt.gib(p.needed_bytes), "", "exact"],
        ]
    else:
        extra = [
            ["KV cell (one token, all layers)", f"{p.cell_size_bytes:,} B", "", "exact"],
            ["Free before loading", fmt.gib(p.free_before_load_bytes), "", "estimated"],
        ]
    return data_details("Data table", table(describe(data), ["Term", "Size", "Share of GPU", "How"], rows + extra))


def render(data: ServingPlanData) -> str:
    s = data.state
    if data.error:
        return el(
            "div",
            [
                el(
                    "div",
                    [el("strong", "Cannot plan these settings: "), data.error],
                    class_="alert alert-error",
                    role="alert",
                ),
                _readouts(data),
            ],
            class_="serving-plan",
            data_state="error",
        )
    p = data.plan
    parts = []
    if not p.fits:
        parts.append(
            el(
                "div",
                [el("strong", "Would not start: "), p.error],
                class_="alert alert-overask",
                role="alert",
                data_startup_error="true",
            )
        )
    if data.engine == "sglang" and p.fits and p.request_capped:
        parts.append(
            el(
                "div",
                [
                    el("strong", "Starts, but a full-length request does not fit: "),
                    f"one {p.context_length:,}-token request needs {p.context_length:,} cells and the pool holds "
                    f"{p.max_total_num_tokens:,}. SGLang starts anyway and caps every request at {p.max_req_len:,} "
                    "tokens (max_req_input_len = min(context_len, max_total_num_tokens) - 1). Lower "
                    "--context-length, raise --mem-fraction-static, or use an fp8 KV cache or smaller weights.",
                ],
                class_="alert alert-warn",
                role="status",
                data_request_capped="true",
            )
        )
    parts.append(_readouts(data))
    parts.append(
        el(
            "figure",
            [chart.responsive(lambda: _bar(data), lambda: _bar(data, narrow=True)), _caption(data)],
            class_="chart-wrap",
        )
    )
    log_title = "Start-up log (what the engine would print, estimated)"
    parts.append(
        el(
            "div",
            [
                el("h2", log_title, class_="sp-h"),
                el("pre", el("code", "\n".join(p.log_lines)), class_="sp-log", data_log="true"),
            ],
            class_="sp-log-block",
        )
    )
    cmd_id = "serving-command"
    parts.append(
        el(
            "div",
            [
                el(
                    "div",
                    [
                        el("pre", el("code", p.command, id_=cmd_id)),
                        el("button", "Copy command", type="button", class_="copy", data_copy_target=f"#{cmd_id}"),
                    ],
                    class_="command",
                ),
            ],
            class_="command-block",
        )
    )
    notes = list(p.notes)
    if int(s.tp) > 1:
        notes.insert(
            0,
            f"Per GPU, on each of {s.tp}: 1/{s.tp} of the linear weights and of the vocabulary, "
            f"{p.kv_heads_per_gpu} KV head{'s' if p.kv_heads_per_gpu > 1 else ''}"
            + (" (replicated: fewer KV heads than GPUs)" if p.kv_heads_replicated else "")
            + f"; every token sends {fmt.integer(p.allreduce_bytes_per_token)} bytes from each GPU in all-reduces "
            "(two per layer) and the logits' gather.",
        )
    if s.weights in ("awq", "gptq"):
        notes.append(
            "AWQ and GPTQ need a pre-quantized checkpoint; the repository name in the command is illustrative."
        )
    version = sp.VLLM_VERSION if s.engine == "vllm" else sp.SGLANG_VERSION
    notes.append(f"Follows {version}.")
    if s.engine == "vllm":
        notes.append(
            "Exact (vLLM's formulas): requested memory, weights, KV page size, num_gpu_blocks, the KV cache "
            "size in tokens, the concurrency and the start-up checks. Estimated: peak activation, non-torch "
            "memory and CUDA graphs (vLLM measures these on the real GPU)."
        )
    else:
        notes.append(
            "Exact (SGLang's formulas): the default mem_fraction_static, the KV cell size, "
            "max_total_num_tokens from the free memory, and max_running_requests. Estimated: the CUDA "
            "context, which sets the free memory before the weights load."
        )
    parts.append(el("ul", [el("li", n) for n in notes], class_="sp-notes"))
    parts.append(el("p", el("a", "How many users does this serve? vLLM, SGLang and llama-server under load",
                            href=links.users_href(s), data_figure_link="users"), class_="note"))  # fmt: skip
    parts.append(_table(data))
    return el("div", parts, class_="serving-plan", data_state="ok" if p.fits else "error")
