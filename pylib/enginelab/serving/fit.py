"""Calibrating the batched step on published llama-batched-bench runs, and its held-out error.

    data/serving/batched_bench.csv (S_TG against B, per device and model)  ->  Sample: the pass batched-bench
    times (B sequences at PP + TG/2 tokens, a random token in each: BENCH_SAME_TOKENS)
    ->  fit_all(): kernels.MV_COL, MM_BW and MV_COL_GCN on the dense rows, then kernels.ROUTE_EXP (one value) on
    the MoE rows, grids minimising the median |log error| (kernels.BATCH_PARAMS, the host sync of builds before
    #15525, is not fitted: no row here ran one)
    ->  loo(): for every device (or model), fit without it and predict it.

The micro-batch rows of data/calibration/pr_tables.csv (llama-bench ppN at -ub 2-31: passes of u tokens of one
prompt, the same mat-vec -> mat-mat switch, on a dozen CUDA and ROCm GPUs) join them where the change table places
their build (placed(): each row is a pull request's baseline column, at its date less the pull request's own change):
combined() is the set the parameters are fitted on and loo() holds out, by device or by model.
"""

from __future__ import annotations

import csv
import datetime
import io
import math
import statistics
from dataclasses import dataclass, replace
from pkgutil import get_data

import perf_model as pm
from enginelab import calibration as cal
from enginelab import measured
from enginelab.measured import builds
from perf_model import batched as step
from perf_model import kernels

# MV_COL and MV_COL_GCN: a column's cost in one token's matmul time at the prefill rate (kernels.column_seconds)
GRID_MV_COL = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)
GRID_MM_BW = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0)
GRID_MV_COL_GCN = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0)
GRID_ROUTE_EXP = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
# llama-batched-bench's decode tokens: random (get_token_rand, std::rand() % n_vocab, one per sequence and step) in
# the build the batched-bench rows ran (2f68ce7cf, 2025-11); before, every sequence fed token 0. So the rows' MoE
# routers pick experts per sequence, as llama-bench's prompt tokens (random since #6069) do for the micro-batch rows.
BENCH_SAME_TOKENS = False
# a run is used only if our quantize_plan gives its file within this share of llama.cpp's (as calibration does)
SIZE_TOLERANCE = 0.03
# GGUF architecture and parameter label of the runs whose config calibration.CONFIGS does not list, with the catalog
# model that has that parameter count
EXTRA_MODELS = {("gemma3", "3.88"): "gemma-3-4b"}
# llama.cpp's printed file sizes (GiB) of the runs' GGUF files, where the source prints them (llama-bench rows
# beside the batched-bench tables in benches/dgx-spark.md)
FILE_GIB = {
    ("gpt-oss", "20.91", "MXFP4_MOE"): 11.27,
    ("gpt-oss", "116.83", "MXFP4_MOE"): 59.02,
    ("qwen3moe", "30.53", "Q8_0"): 30.25,
    ("qwen2", "7.62", "Q8_0"): 7.54,
    ("gemma3", "3.88", "Q4_0"): 2.35,
}


@dataclass(frozen=True)
class Sample:
    device: str
    backend: str
    label: str
    batch: int
    context: int
    measured_tps: float
    placement: object
    source: str
    chunk: int = 0  # > 0: a pr_tables micro-batch row (passes of `chunk` prompt tokens), not batched decode
    date: str = ""  # the run's day or month
    build: str = ""  # the run's build as enginelab.measured.builds reads it, where its date alone is not it


def _rows(name: str) -> list:
    """A CSV shipped in enginelab/data/ (symlinks to data/), as dicts."""
    try:
        text = get_data("enginelab", "data/" + name)
    except (FileNotFoundError, OSError):
        return []
    return list(csv.DictReader(io.StringIO(text.decode("utf-8"))))


def _model(model_type: str, params_b: str):
    m = cal.model_for(model_type, params_b)
    if m is None and (model_type, params_b) in EXTRA_MODELS:
        m = pm.MODELS[EXTRA_MODELS[(model_type, params_b)]]
        if abs(m.total_params() / 1e9 - float(params_b)) > 0.01 * float(params_b):
            m = None
    return m


def _placement(dev, backend: str, model, quant: str, n_ctx: int):
    d = replace(dev, backend=backend)
    mc = pm.Machine(dev.name, d, pm.DDR5_DUAL, cal.LINK_GBS, unified=backend == "metal")
    return pm.place(model, mc, quant, n_ctx=n_ctx, n_gpu_layers=model.n_layers + 1, profile="measured")


def samples() -> list:
    """The batched-bench rows we can time (known model, file size within SIZE_TOLERANCE, known device)."""
    devs = cal.devices()
    out = []
    for r in _rows("serving_batched_bench.csv"):
        m = _model(r["model_type"], r["params_b"])
        dev = devs.get(r["device"])
        if m is None or dev is None or r["quant"] not in pm.ALL_QUANTS:
            continue
        gib = FILE_GIB.get((r["model_type"], r["params_b"], r["quant"]))
        if gib and abs(pm.weight_bytes(m, r["quant"])["total"] / pm.GiB / gib - 1) > SIZE_TOLERANCE:
            continue
        b, pp, tg = int(r["B"]), int(r["pp"]), int(r["tg"])
        p = _placement(dev, r["backend"], m, r["quant"], max(4096, int(r["n_kv"])))
        label = f"{r['model']} B={b} PP={pp}"
        out.append(
            Sample(dev.name, r["backend"], label, b, pp + tg // 2, float(r["s_tg_tps"]), p, r["source"], date=r["date"])
        )
    return out


def microbatch_samples() -> list:
    """pr_tables.csv's llama-bench ppN rows at a micro-batch of 2-31 tokens (depth 0), as batched passes."""
    devs = cal.devices()
    out = []
    for r in _rows("calibration_pr_tables.csv"):
        if r.get("tps_kind") != "batched" or not r.get("microbatch") or r.get("depth") not in ("0", ""):
            continue
        words = r["model"].split()
        m = cal.model_for(r["model_type"], cal.LABELS.get((r["model_type"], words[1] if len(words) > 1 else ""), ""))
        quant = "Q2_K_MIX" if r["quant"] == "Q2_K" else r["quant"]
        dev = devs.get(r["device"])
        if m is None or dev is None or quant not in pm.ALL_QUANTS:
            continue
        u, n = int(r["microbatch"]), int(r["test"][2:])
        try:
            p = _placement(dev, r["backend"], m, quant, max(4096, n + u))
        except ValueError:
            continue
        label = f"{r['model']} ub={u} {r['test']}"
        build = baseline_build(r["date"], r["source"])
        out.append(
            Sample(dev.name, r["backend"], label, u, n // 2, float(r["tps"]), p, r["source"], u, r["date"], build)
        )
    return out


def baseline_build(date: str, source: str) -> str:
    """The build of a pull request's baseline column (every micro-batch row of pr_tables.csv is one: 't/s master' or
    the base commit), which lacks the pull request's own change: its date, or the day before that change landed
    where the date (the thread's month) would count it as landed."""
    pr = source.rstrip("/").rsplit("/", 1)[-1]
    own = sorted(r["since"] for r in builds.changes() if r["pr"] == pr)
    if not own or date[: len(own[0])] < own[0][: len(date)]:
        return date
    first = own[0] if len(own[0]) == 10 else own[0] + "-01"
    return (datetime.date.fromisoformat(first) - datetime.timedelta(days=1)).isoformat()


# The change table's earliest row about ggml-cuda's kernels past one token (mmq_mmid, #13199): a micro-batch row of
# an older build ran kernels the table cannot place (MoE through per-expert copies, MMQ before its 2024 rewrites).
COVERED_SINCE = "2025-05"
# Changes that made a small-batch path faster in a way the batched step's few parameters do not describe (a library
# GEMM's configuration, a tile table): a row whose build lacks one that applies to it is left out of the validation,
# as calibration leaves out runs older than its MIN_DATE. Feature -> the weights it applies to on the mat-mat path.
UNMODELLED = {"cublas_refactor": "float", "gcn_mmq_config": "quantized"}


def placed(s: Sample) -> bool:
    """Whether the change table places a micro-batch row's build: at or after COVERED_SINCE, and not lacking an
    UNMODELLED change that applies to its device, weights and path."""
    if s.date[:7] < COVERED_SINCE:
        return False
    w = step.step_work(s.placement, [], [(0, s.chunk, False)])[0].get("gpu")
    if w is None or not w.weights_by_type:
        return True
    typ = max(w.weights_by_type, key=lambda tw: tw[1])[0]
    kind = "float" if typ in measured.FLOAT_TYPES else "quantized"
    if s.chunk <= kernels.streaming_max(w, s.placement.machine.gpu, s.backend, s.build):
        return True
    arch = measured.gpu_arch(s.placement.machine.gpu, s.backend)[0]
    for r in builds.changes():
        if UNMODELLED.get(r["feature"]) == kind and r["backend"] == s.backend and r["applies_to"] in ("", arch):
            if builds.key(r) not in builds.features_at(s.build or s.date):
                return False
    return True


def combined() -> list:
    """The batched validation set: the batched-bench rows and the micro-batch rows whose build the change table
    places."""
    return samples() + [s for s in microbatch_samples() if placed(s)]


def predict(s: Sample, params: dict | None = None, shape: tuple | None = None, route: float | None = None) -> float:
    """Tokens per second the batched step predicts for a sample; params: BATCH_PARAMS (the pre-#15525 host sync),
    shape: (MV_COL, MM_BW, MV_COL_GCN), route: ROUTE_EXP (None: the shipped values)."""
    old = kernels.MV_COL, kernels.MM_BW, kernels.MV_COL_GCN, kernels.ROUTE_EXP
    if shape is not None:
        kernels.MV_COL, kernels.MM_BW, kernels.MV_COL_GCN = shape
    if route is not None:
        kernels.ROUTE_EXP = route
    try:
        if s.chunk:
            start = s.context // s.chunk * s.chunk
            b = s.build or s.date
            t = step.batched_step(s.placement, [], [(start, s.chunk, False)], params=params, build=b)["total_s"]
            return s.chunk / t
        b = s.date  # the run's own build: MUL_MAT_ID's batched path changed since
        same = BENCH_SAME_TOKENS
        t = step.batched_step(s.placement, [s.context] * s.batch, same_tokens=same, params=params, build=b)["total_s"]
        return s.batch / t
    finally:
        kernels.MV_COL, kernels.MM_BW, kernels.MV_COL_GCN, kernels.ROUTE_EXP = old


def errors(samples_: list, params: dict | None = None, shape: tuple | None = None, route: float | None = None) -> list:
    """|predicted / measured - 1| per sample."""
    return [abs(predict(s, params, shape, route) / s.measured_tps - 1.0) for s in samples_]


def _log_err(samples_: list, params: dict | None, shape: tuple | None, route: float | None = None) -> float:
    return statistics.median(abs(math.log(predict(s, params, shape, route) / s.measured_tps)) for s in samples_)


def _is_moe(s: Sample) -> bool:
    return s.placement.model.is_moe


def _on_gcn_matvec(s: Sample) -> bool:
    """Whether a row's pass runs its quantized mat-vec kernels on ggml-cuda's GCN parameter table
    (kernels.gcn_table), where MV_COL_GCN and not MV_COL prices its columns."""
    if s.backend != "rocm":
        return False
    contexts, chunks = ([], [(0, s.chunk, False)]) if s.chunk else ([s.context] * s.batch, [])
    w = step.step_work(s.placement, contexts, chunks)[0].get("gpu")
    dev = s.placement.machine.gpu
    if w is None or not kernels.gcn_table(w, dev, s.backend):
        return False
    return s.batch <= kernels.streaming_max(w, dev, s.backend, s.build or s.date)


def fit_shape(samples_: list) -> tuple:
    """(MV_COL, MM_BW, MV_COL_GCN) on the dense rows with a batch above 1, every GPU backend together: MV_COL_GCN on
    the rows whose columns it prices (quantized mat-vec on the GCN table), the other two on the rest."""
    dense = [s for s in samples_ if not _is_moe(s) and s.batch > 1 and s.backend != "cpu"]
    gcn = [s for s in dense if _on_gcn_matvec(s)]
    rest = [s for s in dense if s not in gcn]
    best = None
    for a in GRID_MV_COL if rest else ():
        for b in GRID_MM_BW:
            e = _log_err(rest, None, (a, b, kernels.MV_COL_GCN))
            if best is None or e < best[0] - 1e-12:
                best = (e, (a, b))
    a, b = best[1] if best else (kernels.MV_COL, kernels.MM_BW)
    if not gcn:  # no row on the GCN table: its columns cost what the others' do
        return a, b, a
    best = None
    for c in GRID_MV_COL_GCN:
        e = _log_err(gcn, None, (a, b, c))
        if best is None or e < best[0] - 1e-12:
            best = (e, c)
    return a, b, best[1]


def fit_moe(samples_: list, shape: tuple) -> float:
    """ROUTE_EXP: the routing exponent on the grid with the lowest median |log error| over all the MoE rows with a
    batch above 1 (every device and backend together: one value for the routers). A set without MoE rows keeps
    the shipped exponent."""
    moe = [s for s in samples_ if _is_moe(s) and s.batch > 1]
    if not moe:
        return kernels.ROUTE_EXP
    best = None
    for r in GRID_ROUTE_EXP:
        e = _log_err(moe, None, shape, r)
        if best is None or e < best[0] - 1e-12:
            best = (e, r)
    return best[1]


def fit_all(samples_: list) -> tuple:
    """((MV_COL, MM_BW, MV_COL_GCN), ROUTE_EXP) fitted on samples_."""
    shape = fit_shape(samples_)
    return shape, fit_moe(samples_, shape)


# What a fit without any run to go on uses (loo: a held-out device whose kind of rows no other device has): no
# batched-kernel effect at all
PRIOR_SHAPE = (0.0, 0.0, 0.0)


def _model_key(s: Sample) -> str:
    return s.label.split(" B=")[0].split(" ub=")[0]


def loo(samples_: list, by: str = "device") -> list:
    """[(sample, held-out |error|)]: every device's (by="model": every model's) rows predicted by a fit on the
    other rows only (parameters with no rows to fit on take PRIOR_SHAPE, never the values fitted on all the rows)."""
    key = (lambda s: s.device) if by == "device" else _model_key
    out = []
    for dev in sorted({key(s) for s in samples_}):
        train = [s for s in samples_ if key(s) != dev]
        test = [s for s in samples_ if key(s) == dev]
        dense = [s for s in train if not _is_moe(s) and s.batch > 1]
        shape = fit_shape(train) if dense else PRIOR_SHAPE
        route = fit_moe(train, shape)
        out.extend(zip(test, errors(test, None, shape, route)))
    return out


def summary(errs: list) -> dict:
    """Median and 90th percentile of |errors|."""
    xs = sorted(errs)
    if not xs:
        return {"n": 0, "median": float("nan"), "p90": float("nan")}
    return {"n": len(xs), "median": statistics.median(xs), "p90": xs[min(len(xs) - 1, int(0.9 * len(xs)))]}
