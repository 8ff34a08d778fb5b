"""The serving simulation against published `vllm bench serve` / SGLang `bench_serving` runs.

data/serving/serving_runs.csv holds each run's full setup (GPU, model, dtype, lengths, rate, concurrency, prompts,
engine flags) and its results under vLLM's names. Nothing in the simulation is fitted to these runs (its only
fitted numbers are the batched step's, from llama-batched-bench rows), so every run is held out.

Runs that did not pass --ignore-eos (ignore_eos 0) stop replies early: their output_len is the mean the results
imply (output tokens / requests), and the replies are spread by OUTPUT_SPREAD around it (our assumption: the runs print no
distribution), which keeps requests from finishing, and the next ones from arriving, in lockstep. A ShareGPT
row's input_len / output_len are the run's means (its model's tokens): the ShareGPT draws are scaled to them.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from dataclasses import replace
from pkgutil import get_data

import perf_model as pm
from enginelab import calibration as cal
from enginelab import serving_plan as sp

from . import sim

OUTPUT_SPREAD = 0.28  # output lengths uniform in [mean x (1 - s), mean x (1 + s)]: 72-128 for a mean of 100
METRICS = (
    ("mean_ttft_ms", "mean_ttft_ms"),
    ("mean_tpot_ms", "mean_tpot_ms"),
    ("output_throughput", "output_throughput"),
)
# The runs' models that perf_model's catalog does not list: their config.json keys (as calibration.CONFIGS holds the
# llama-bench runs' models)
CONFIGS = {
    "qwen3-14b": dict(model_type="qwen3", num_hidden_layers=40, hidden_size=5120, intermediate_size=17408,
                      num_attention_heads=40, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                      max_position_embeddings=40960, tie_word_embeddings=False),  # Qwen/Qwen3-14B config.json
    "qwen3-32b": dict(model_type="qwen3", num_hidden_layers=64, hidden_size=5120, intermediate_size=25600,
                      num_attention_heads=64, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                      max_position_embeddings=40960, tie_word_embeddings=False),  # Qwen/Qwen3-32B config.json
}  # fmt: skip
_MODELS: dict = {}
# engine_flags: the server's flags in the engine's own (Python) names, "name=value" separated by ";" (empty: the
# engine's defaults). The simulation's own flags (sim.FLAGS) reach sim.simulate; the context flags set the
# placement's n_ctx; flags that change nothing the simulation times are listed here, and any other is an error.
CONTEXT_FLAGS = {"vllm": "max_model_len", "sglang": "context_length"}
# The defaults of the engine version a run used where they differ from what sim takes by default (serving_plan
# follows vLLM's main): vLLM v0.11's CacheConfig.gpu_memory_utilization is 0.9 (vllm/config/cache.py of that
# series; its engine-args docs: "If unspecified, will use the default value of 0.9"), main's 0.92.
VERSION_DEFAULTS = {("vllm", "0.11"): {"gpu_memory_utilization": 0.9}}
UNTIMED_FLAGS = {
    "tokenizer_mode": "which tokenizer the API server loads (mistral_common for Mistral models): not an engine step",
}


def runs() -> list:
    """The published runs, as dicts (data/serving/serving_runs.csv)."""
    try:
        text = get_data("enginelab", "data/serving_runs.csv")
    except (FileNotFoundError, OSError):
        return []
    return list(csv.DictReader(io.StringIO(text.decode("utf-8"))))


_SERVERS: dict = {}


def server_machines() -> dict:
    """{key: pm.Machine} of serving_plan.SERVER_GPUS (the datacenter GPUs of these runs, which the serving figures
    offer beside perf_model's catalog machines: a team sizing a server for its users has one of these more often
    than a desktop card), each the machine these runs are simulated on (_machine)."""
    if not _SERVERS:
        _SERVERS.update((k, _machine(gpu)) for k, gpu in sp.SERVER_GPUS.items())
    return dict(_SERVERS)


def _machine(gpu: str) -> pm.Machine:
    """The catalog machine with this GPU (names compared without "GeForce "), else one built from the calibration
    device table (its memory from devices.csv's mem_gib column: calibration's Devices leave memory unbounded)."""
    short = gpu.removeprefix("GeForce ")
    for mc in pm.MACHINES.values():
        if mc.gpu is not None and mc.gpu.name.removeprefix("GeForce ") == short:
            return mc
    dev = cal.devices().get(gpu)
    rows = {r["device"]: r for r in cal._csv("calibration_devices.csv")}
    if dev is None or not _num(rows.get(gpu, {}).get("mem_gib")):
        raise ValueError(f"gpu: {gpu!r} is neither a catalog machine's GPU nor a calibration device with memory")
    dev = replace(dev, mem_gb=_num(rows[gpu]["mem_gib"]))
    return pm.Machine(dev.name, dev, pm.DDR5_DUAL, cal.LINK_GBS)


def run_model(key: str) -> pm.Model:
    """A run's model: the catalog's, else one built from CONFIGS."""
    if key in pm.MODELS or key not in CONFIGS:
        return pm.get_model(key)
    if key not in _MODELS:
        _MODELS[key] = pm.model_from_hf_config(CONFIGS[key], name=key)
    return _MODELS[key]


def _num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def _value(text: str):
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(low)
        except ValueError:
            pass
    return text.strip()


def engine_flags(run: dict) -> tuple:
    """(flags for sim.simulate, context length or None) from a run's engine_flags column, over the defaults of
    the run's engine version (VERSION_DEFAULTS)."""
    engine = run["engine"]
    version = ".".join((run.get("engine_version") or "").split(".")[:2])
    flags, n_ctx = dict(VERSION_DEFAULTS.get((engine, version), {})), None
    for item in (run.get("engine_flags") or "").split(";"):
        if not item.strip():
            continue
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"engine_flags: {item.strip()!r} is not name=value")
        if name == CONTEXT_FLAGS.get(engine):
            n_ctx = int(_value(text))
        elif name in sim.FLAGS.get(engine, {}):
            flags[name] = _value(text)
        elif name not in UNTIMED_FLAGS:
            raise ValueError(f"engine_flags: {name!r} is not a {engine} flag the simulation models")
    return flags, n_ctx


def predict(run: dict, profile: str = "measured") -> dict:
    """The simulation's metrics for one published run, with its engine flags."""
    quant = {"bf16": "BF16", "fp16": "F16"}.get(run["dtype"], "F16")
    if quant not in pm.ALL_QUANTS:
        quant = "F16"
    model = run_model(run["model"])
    flags, n_ctx = engine_flags(run)
    n_ctx = n_ctx or model.max_position_embeddings
    p = pm.place(model, _machine(run["gpu"]), quant, n_ctx=n_ctx, profile=profile)
    rate = _num(run["request_rate"])
    w = sim.Workload(
        num_prompts=int(run["num_prompts"]),
        request_rate=math.inf if rate is None or math.isinf(rate) else rate,
        max_concurrency=int(run["max_concurrency"]) if run["max_concurrency"] else None,
        dataset=run["dataset"],
        input_len=int(run["input_len"]),
        output_len=int(run["output_len"]),
        range_ratio=float(run["range_ratio"] or 0),
        prefix_len=int(run["prefix_len"] or 0),
        output_range_ratio=OUTPUT_SPREAD if run.get("ignore_eos") == "0" else None,
        sharegpt_means=(float(run["input_len"]), float(run["output_len"])) if run["dataset"] == "sharegpt" else None,
    )
    return sim.simulate(run["engine"], p, w, profile=profile, **flags).metrics


def errors(profile: str = "measured", rows: list | None = None) -> dict:
    """{metric: [|predicted / published - 1| for each run that prints it]} over rows (None: every run)."""
    out = {name: [] for name, _ in METRICS}
    for run in runs() if rows is None else rows:
        got = predict(run, profile)
        for name, col in METRICS:
            ref = _num(run[col])
            if ref:
                out[name].append(abs(got[name] / ref - 1.0))
    return out


def summary(errs: dict) -> dict:
    """{metric: (runs, median |error|)}."""
    return {k: (len(v), statistics.median(v) if v else float("nan")) for k, v in errs.items()}
