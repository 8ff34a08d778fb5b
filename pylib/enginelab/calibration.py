"""Calibrating the measured profile on published llama-bench runs, and its leave-one-device-out error.

    runs (data/calibration/*.csv, data/lab/cpu_runs.csv)  ->  Sample: the work of each run, from perf_model
        ->  fit(backend, kind): the few parameters of enginelab.measured that minimise the log error
        ->  loo(backend, kind): for every device, fit without it and predict it: the held-out error

Every run names its model as llama-bench prints it ("llama 8B Q4_K - Medium", 8.03 B params, 4.58 GiB); a run
is used only if a known config.json gives that parameter count within 1% and our quantize_plan gives its
file size within 3% (so the work we time is the work it measured). Each device weighs the same in a fit, however
many runs it has, and every parameter is pulled gently toward its physical prior (measured.PRIORS), so a
backend with few devices cannot be fitted to one of them.

tools/fit_measured.py runs the fits and writes enginelab/data/measured_params.json (the values the measured
profile uses, the runs and devices behind them, the held-out errors and the typical ranges shown in the app);
tests/test_calibration.py re-runs the leave-one-device-out check and gates its median error.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import statistics
from dataclasses import dataclass, replace
from pkgutil import get_data

import perf_model as pm

from . import measured
from .measured.builds import features_at

# ---------------------------------------------------------------------------------------------------------
# 1. The models the runs used (Hugging Face config.json values)
# ---------------------------------------------------------------------------------------------------------
_L2_7B = dict(
    model_type="llama",
    num_hidden_layers=32,
    hidden_size=4096,
    intermediate_size=11008,
    num_attention_heads=32,
    num_key_value_heads=32,
    vocab_size=32000,
)  # meta-llama/Llama-2-7b-hf
CONFIGS = {
    # (GGUF architecture, params in billions as llama-bench prints them): config.json
    ("llama", "6.74"): _L2_7B,
    ("llama", "7.24"): dict(_L2_7B, intermediate_size=14336, num_key_value_heads=8),  # mistralai/Mistral-7B-v0.1
    ("llama", "8.03"): dict(_L2_7B, intermediate_size=14336, num_key_value_heads=8, vocab_size=128256),  # Llama-3-8B
    ("llama", "13.02"): dict(_L2_7B, num_hidden_layers=40, hidden_size=5120, intermediate_size=13824,
                             num_attention_heads=40, num_key_value_heads=40),  # meta-llama/Llama-2-13b-hf
    ("llama", "70.55"): dict(_L2_7B, num_hidden_layers=80, hidden_size=8192, intermediate_size=28672,
                             num_attention_heads=64, num_key_value_heads=8, vocab_size=128256),  # Llama-3-70B
    ("llama", "3.21"): dict(_L2_7B, num_hidden_layers=28, hidden_size=3072, intermediate_size=8192,
                            num_attention_heads=24, num_key_value_heads=8, head_dim=128, vocab_size=128256,
                            tie_word_embeddings=True),  # meta-llama/Llama-3.2-3B
    ("llama", "1.24"): dict(_L2_7B, num_hidden_layers=16, hidden_size=2048, intermediate_size=8192,
                            num_attention_heads=32, num_key_value_heads=8, head_dim=64, vocab_size=128256,
                            tie_word_embeddings=True),  # meta-llama/Llama-3.2-1B
    ("llama", "1.10"): dict(_L2_7B, num_hidden_layers=22, hidden_size=2048, intermediate_size=5632,
                            num_attention_heads=32, num_key_value_heads=4),  # TinyLlama/TinyLlama-1.1B
    ("llama", "46.70"): dict(model_type="mixtral", num_hidden_layers=32, hidden_size=4096, intermediate_size=14336,
                             num_attention_heads=32, num_key_value_heads=8, vocab_size=32000, num_local_experts=8,
                             num_experts_per_tok=2),  # mistralai/Mixtral-8x7B-v0.1
    ("qwen3", "4.02"): dict(model_type="qwen3", num_hidden_layers=36, hidden_size=2560, intermediate_size=9728,
                            num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                            tie_word_embeddings=True),  # Qwen/Qwen3-4B
    ("qwen3", "8.19"): dict(model_type="qwen3", num_hidden_layers=36, hidden_size=4096, intermediate_size=12288,
                            num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936),  # Qwen/Qwen3-8B
    ("qwen3moe", "30.53"): "qwen3-30b-a3b",
    ("gpt-oss", "20.91"): "gpt-oss-20b",
    ("gpt-oss", "116.83"): dict(model_type="gpt_oss", num_hidden_layers=36, hidden_size=2880, intermediate_size=2880,
                                num_attention_heads=64, num_key_value_heads=8, head_dim=64, vocab_size=201088,
                                num_local_experts=128, num_experts_per_tok=4, sliding_window=128),  # gpt-oss-120b
    ("qwen2", "1.54"): dict(model_type="qwen2", num_hidden_layers=28, hidden_size=1536, intermediate_size=8960,
                            num_attention_heads=12, num_key_value_heads=2, vocab_size=151936,
                            tie_word_embeddings=True),  # Qwen/Qwen2.5-1.5B
    ("gemma2", "2.61"): dict(model_type="gemma2", num_hidden_layers=26, hidden_size=2304, intermediate_size=9216,
                             num_attention_heads=8, num_key_value_heads=4, head_dim=256, vocab_size=256000,
                             sliding_window=4096),  # google/gemma-2-2b
    ("qwen2", "0.49"): "qwen2.5-0.5b",
    ("qwen2", "7.62"): "qwen2.5-7b",
    ("qwen2", "14.77"): "qwen2.5-14b",
    ("qwen2", "32.76"): "qwen2.5-32b",
}  # fmt: skip

# Benchmark tables in pull requests print only a size label ("llama 8B"): the model behind each label in
# llama.cpp's own benchmarking (ggml-org/llama.cpp PRs by its maintainers).
LABELS = {
    ("llama", "7B"): "6.74", ("llama", "8B"): "8.03", ("llama", "13B"): "13.02", ("llama", "70B"): "70.55",
    ("llama", "3B"): "3.21", ("llama", "1B"): "1.24", ("llama", "8x7B"): "46.70",
    ("qwen2", "7B"): "7.62", ("qwen2", "14B"): "14.77", ("qwen2", "1.5B"): "1.54", ("qwen2", "0.5B"): "0.49",
    ("qwen3", "4B"): "4.02", ("qwen3", "8B"): "8.19", ("qwen3moe", "30B.A3B"): "30.53",
    ("gpt-oss", "20B"): "20.91", ("gpt-oss", "120B"): "116.83", ("gemma2", "2B"): "2.61",
}  # fmt: skip
# Kernel generations: runs older than these are not today's llama.cpp for that backend and test (CUDA and ROCm
# prompt processing moved to int8 tensor-core MMQ in June 2024, ggml-org/llama.cpp PR #7676, and the IQ types
# followed that summer).
# Decode kernels changed too (CUDA graphs in May 2024, faster mat-vec kernels over 2024): runs before the
# autumn of 2024 decode 10-30% slower than today's builds on the same card.
# Vulkan and SYCL kernels were rewritten over 2024 (cooperative-matrix matmuls, new mat-vec kernels): runs
# before 2025 are a different backend in all but name.
# Vulkan's prompt processing kept changing through 2025 (cooperative-matrix paths per vendor, integer-dot
# matmuls, Intel's XMX reached through cooperative matrices late in the year: an Arc B580 ran pp512 at 621 t/s
# in September 2025, a B70 at 2414 in 2026): its prefill runs before October 2025 describe superseded kernels.
# The CPU backend's matmuls moved to llamafile's tinyBLAS and AVX-512/VNNI dot products in the first half of 2024.
# Metal's matmul kernels took their current (simdgroup-matrix) form in autumn 2023: the M2 Ultra's pp512 went
# 630 -> 1032 -> 1238 t/s from August to November 2023 (PR #2917, #3084, discussion #4167).
MIN_DATE = {("cuda", "prefill"): "2024-09", ("rocm", "prefill"): "2024-09",
            ("cuda", "decode"): "2024-09", ("rocm", "decode"): "2024-09",
            ("vulkan", "prefill"): "2025-10", ("vulkan", "decode"): "2025-01",
            ("sycl", "prefill"): "2025-01", ("sycl", "decode"): "2025-01",
            ("metal", "prefill"): "2023-11", ("metal", "decode"): "2023-11",
            ("cpu", "prefill"): "2024-06", ("cpu", "decode"): "2024-06"}  # fmt: skip

# Intel GPUs reached llama.cpp's Vulkan matmuls through cooperative matrices (XMX) only late in 2025: an Arc B580
# ran pp512 below its FP32 peak in September 2025 (621 t/s, 8.4 of 13.7 TFLOP/s), an Arc Pro B70 above its FP32
# peak in 2026 (2414 t/s: 32.6 of 22.9 TFLOP/s): Intel's earlier Vulkan prefill runs describe a superseded path.
VENDOR_MIN_DATE = {("vulkan", "prefill", "intel"): "2026-01"}

# Vulkan's flash attention ran on scalar shaders until cooperative-matrix FA (ggml-org/llama.cpp PR #13506, May
# 2025): -fa 1 runs before then time a slow path (RTX 2070 tg128 36 against 63 t/s without it, PR #13324).
VULKAN_FA_DATE = "2025-06"


def _fa_on(r: dict) -> bool:
    return str(r.get("flash_attn", "")).strip() == "1" or bool(re.search(r"(^|[^\w])-?fa 1\b", r.get("notes") or ""))


# The CPU backend repacks Q4_0 and IQ4_NL weights at load into interleaved blocks (ggml-cpu repack, AVX2/AVX-512
# and NEON, November 2024): their decode got up to 1.75x faster (a Ryzen 9 7950X at 2 threads: Llama 3 8B Q4_0
# tg128 6.4 t/s in July, 11.2 in December 2024, while Q8_0, Q6_K, Q4_K_S and Q5_0 did not move).
# Q4_K followed in March 2025 (x86, PR #12332: pp 1.6-1.9x, tg 1.1x faster): the presets whose blocks are mostly
# Q4_K count from then.
CPU_REPACKED = {"Q4_0": "2024-11", "IQ4_NL": "2024-11", "Q4_K_S": "2025-04", "Q4_K_M": "2025-04"}

_MODEL_CACHE: dict = {}


def model_for(model_type: str, params_b: str):
    """The perf_model.Model of a run (its GGUF architecture and llama-bench's params column), or None."""
    key = (model_type, str(params_b).strip())
    if key not in _MODEL_CACHE:
        cfg = CONFIGS.get(key)
        if cfg is None:
            m = None
        elif isinstance(cfg, str):
            m = pm.MODELS[cfg]
        else:
            m = pm.model_from_hf_config(dict(cfg, max_position_embeddings=8192), name=f"{key[0]} {key[1]}B")
        if m is not None and abs(m.total_params() / 1e9 - float(key[1])) > 0.01 * float(key[1]):
            m = None  # the config is not the model the run used
        _MODEL_CACHE[key] = m
    return _MODEL_CACHE[key]


# ---------------------------------------------------------------------------------------------------------
# 2. The runs
# ---------------------------------------------------------------------------------------------------------
def _csv(name: str) -> list:
    try:
        text = get_data("enginelab", f"data/{name}").decode("utf-8")
    except (FileNotFoundError, OSError):
        return []
    return list(csv.DictReader(io.StringIO(text)))


def _num(s):
    try:
        v = float(str(s).split()[0].replace(",", ""))
    except (ValueError, IndexError):
        return None
    return v if math.isfinite(v) and v > 0 else None


@dataclass(frozen=True)
class Sample:
    """One measured number and the work it timed."""

    device: str
    backend: str
    kind: str  # "decode" or "prefill"
    tps: float  # measured tokens per second
    tokens: int  # tgN / ppN
    work: tuple  # decode: ((side, Work), ...); prefill: ((side, Work, u, k, scale), ...) + the head
    dev: pm.Device
    n_threads: int | None
    source: str
    label: str  # model and quant, for reports
    date: str = ""  # YYYY-MM(-DD) of the run as published ("" unknown)
    sampling: bool = True  # decode: a token is sampled after each pass (tgN); False for ppN at micro-batch 1
    notes: str = ""
    load: float = 0.0  # lab runs: the 1-minute load average before the run (other jobs on the 2 vCPUs)
    bound: bool = False  # taken under load (LAB_MAX_LOAD): a lower bound on the speed, not a measurement of it
    driver: str = ""  # Intel on Vulkan: "windows" (Intel's Windows driver), "mesa24" (Mesa 24); "" today's Mesa
    repack: str = ""  # CPU: the build's repacks unlike its month's release ("+Q6_K" a PR branch, "-Q4_K" none)
    logits_bytes: float = 0.0  # a discrete GPU's run: each token's logits (n_vocab F32) copied back to the host
    host: str = ""  # a host on a narrow PCIe link (measured.HOST_LINKS), from the notes; "" a desktop's x16 slot

    @property
    def build(self) -> str:
        """The build as measured.cpu_repacked and sycl_reordered read it: the run's date, then any overrides of
        what that build repacks or reorders."""
        return f"{self.date} {self.repack}" if self.repack else self.date

    @property
    def features(self) -> frozenset:
        """The run's build as the llama.cpp changes it has (data/llama_cpp_changes.csv), what measured reads."""
        return features_at(self.build)


def devices() -> dict:
    """{device name: pm.Device} from data/calibration/devices.csv (with its backend family) and the lab's machine."""
    out = {}
    for r in _csv("calibration_devices.csv"):
        bw, tf = _num(r.get("bandwidth_gbs")), _num(r.get("fp16_tflops"))
        if bw is None or tf is None:
            continue
        cores = 0
        if r.get("kind") == "cpu":  # "16 cores / 32 threads": physical cores
            text = str(r.get("cores", "")).split("/")[0].split("cores")[0]
            hybrid = re.fullmatch(r"\s*(\d+)P\s*\+\s*(\d+)E\s*", text)
            if hybrid:  # "8P+4E": llama.cpp's threads run on the performance cores (its default -t is their
                # count); the Device is those cores and their share of the FP32 peak (an E-core ~1/3 of a P-core)
                n_p, n_e = int(hybrid.group(1)), int(hybrid.group(2))
                cores, tf = n_p, tf * n_p / (n_p + n_e * E_CORE_SHARE)
            else:
                cores = sum(int(x) for x in re.findall(r"\d+", text))
        fp32 = _num(r.get("fp32_tflops")) or 0.0
        out[r["device"]] = pm.Device(
            r["device"], 1e6, bw, tf, source=r.get("source", ""), cores=cores, fp32_tflops=fp32
        )
    lab = lab_device()
    if lab is not None:
        out[lab.name] = lab
    return out


E_CORE_SHARE = 1 / 3  # an efficiency core's FMA throughput in performance cores (M2 Max: 0.35, i3-1315U: 0.37)
LAB_DEVICE = "AMD EPYC (lab: 2 vCPU Zen 4 KVM guest)"
ZEN4_FLOP_PER_CLOCK = 32  # FP32 per core per clock: two 256-bit FMA pipes (AVX-512 issues as 2 x 256) x 8 x 2


# The lab guest has no datasheet figure of its own (it shares an EPYC's memory controllers with other guests), so
# its measured all-core read bandwidth over measured.READ_TEST_SHARE stands in for one.
READ_TEST_SHARE = measured.READ_TEST_SHARE


def lab_device():
    """This lab's machine (data/lab/machine.json) as a CPU Device: its cores; their FP32 FMA peak as measured
    (data/lab/tools/fma.c: 117 GFLOP/s a core, i.e. 32 FLOP a clock at the 3.67 GHz boost clock the guest does not
    report; the TSC's 2.6 GHz is the fallback); as bandwidth the read bandwidth both cores measured
    (data/lab/tools/bw.c, under SCHED_FIFO: 33.8 GB/s in most runs) over READ_TEST_SHARE."""
    try:
        text = get_data("enginelab", "data/lab_machine.json").decode("utf-8")
    except (FileNotFoundError, OSError):
        return None
    m = json.loads(text)
    cpu = m.get("cpu", {})
    cores = int(cpu.get("vcpus", 2)) // max(1, int(cpu.get("threads_per_core", 1)))
    ghz = float(cpu.get("cpu_mhz_proc_cpuinfo", 2600.0)) / 1000.0
    peak = m.get("fp32_fma_peak", {}).get("GFLOPs", {})
    gflops = float(peak.get(f"{cores}_threads") or cores * ZEN4_FLOP_PER_CLOCK * ghz)
    summary = m.get("memory_read_bandwidth", {}).get("summary_GBps", {})
    bw_all = float(summary.get(f"{cores}_threads") or summary.get("1_thread", 20.0) * cores)
    return pm.Device(
        LAB_DEVICE,
        float(m.get("memory", {}).get("total_gib", 24.0)),
        round(bw_all / READ_TEST_SHARE, 1),
        gflops / 1000.0,
        source="data/lab/machine.json",
        cores=cores,
    )


# Lab rows taken with the 1-minute load average above this were slowed by other jobs on the 2 vCPUs (llama.cpp's
# threads spin at barriers, so a third runnable process costs far more than its share): they are lower bounds,
# kept out of the fit and the held-out error and checked only as bounds (tests/test_calibration.py).
LAB_MAX_LOAD = 1.0


def _isolated(row) -> bool:
    """A lab run at real-time priority (chrt -f 50, SCHED_FIFO: its notes say so): the other jobs on the machine
    could not preempt its threads, so the load average does not make it a bound."""
    return "SCHED_FIFO" in (row.get("notes") or "")


def _lab_rows() -> list:
    """data/lab/cpu_runs.csv rows in the calibration runs' columns."""
    out = []
    for r in _csv("lab_cpu_runs.csv"):
        params = _num(r.get("params"))
        size = _num(r.get("size_bytes"))
        words = (r.get("model") or "").split()
        out.append(
            dict(
                r,
                device=LAB_DEVICE,
                backend="cpu",
                model_type=words[0].lower() if words else "",
                params_b=f"{params / 1e9:.2f}" if params else "",
                size_gib=f"{size / pm.GiB:.4f}" if size else "",
                tps=r.get("t_per_s", ""),
                date=(r.get("date") or "")[:10],
            )
        )
    return out


LINK_GBS = 31.5  # a run's GPU link when its notes name no narrower host: PCIe 4.0 x16, one way


def _placement(model, dev: pm.Device, backend: str, quant: str):
    """The whole model on one device (llama-bench -ngl 99, or a CPU run)."""
    d = replace(dev, backend=backend)
    if backend == "cpu":
        mc = pm.Machine(dev.name, None, d, 0.0)
        return pm.place(model, mc, quant, n_ctx=4096, n_gpu_layers=0)
    mc = pm.Machine(dev.name, d, pm.DDR5_DUAL, LINK_GBS, unified=backend == "metal")
    return pm.place(model, mc, quant, n_ctx=4096, n_gpu_layers=model.n_layers + 1)


def _decode_sample(p, tokens: int, head: bool = True) -> tuple:
    """llama-bench tgN generates N tokens from an empty context: on average N/2 tokens of KV per step.
    head=False: a ppN test at micro-batch 1 (N single-token passes that compute logits for the last token
    only), so the output head is not read on the other passes."""
    work = pm._decode_work(p, tokens // 2, 1)
    if not head:
        side, hw = pm._head_work(p)
        w = work[side]
        types, rows = dict(w.weights_by_type), dict(w.rows_by_type)
        for t, n in hw.weights_by_type:
            types[t] = max(0.0, types.get(t, 0.0) - n)
        for t, n in hw.rows_by_type:
            rows[t] = max(0.0, rows.get(t, 0.0) - n)
        work = dict(work)
        work[side] = replace(
            w,
            weight_bytes=max(0.0, w.weight_bytes - hw.weight_bytes),
            flops=max(0.0, w.flops - hw.flops),
            weights_by_type=tuple(sorted((t, n) for t, n in types.items() if n > 0)),
            rows_by_type=tuple(sorted((t, n) for t, n in rows.items() if n > 0)),
        )
    return tuple((s, w) for s, w in work.items() if w.bytes or w.flops)


def _prefill_sample(p, tokens: int, ubatch: int) -> tuple:
    out = []
    start = 0
    while start < tokens:
        u = min(ubatch, tokens - start)
        for s, w in pm._prefill_work(p, start, u).items():
            if w.flops:
                out.append((s, w, u, 1, 1.0))
        start += u
    side, head = pm._head_work(p)
    out.append((side, head, 1, 1, 1.0))
    return tuple(out)


def samples(include_lab: bool = True, bounds: bool = True, hybrid: bool = False) -> list:
    """Every usable (device, model, quant, test) measurement as a Sample (see the module docstring).

    The lab runs taken under load (LAB_MAX_LOAD) come as Samples with bound=True (lower bounds: a fit only keeps
    its estimate from falling below them, and no error statistic counts them); bounds=False leaves them out.
    hybrid: also the runs of hybrid models (enginelab.hybrid_calibration: data/calibration/hybrid_runs.csv and
    the hybrid rows of the other files), their files' weights scaled to the sizes the runs printed."""
    devs = devices()
    discrete = {r.get("device", "") for r in _csv("calibration_devices.csv") if r.get("kind") == "discrete_gpu"}
    out = []
    runs = _csv("calibration_runs.csv") + _csv("calibration_pr_tables.csv") + _csv("calibration_extra_runs.csv")
    if include_lab:
        runs += _lab_rows()
    if hybrid:
        from . import hybrid_models as hc

        runs += _csv("calibration_hybrid_runs.csv")
    for r in runs:
        if "UNSURE" in (r.get("notes") or ""):
            continue  # the transcriber could not tell which build the number is from
        dev = devs.get(r.get("device", ""))
        backend = (r.get("backend") or "").strip().lower()
        if dev is None or backend not in measured.BACKENDS:
            continue
        params = r.get("params_b") or ""
        if not params and r.get("model"):
            words = r["model"].split()
            params = LABELS.get((r.get("model_type", ""), words[1] if len(words) > 1 else ""), "")
        model = model_for(r.get("model_type", ""), params)
        if model is None and hybrid:
            model, params = hc.model_for(r.get("model_type", ""), params, r.get("model", ""))
        quant = (r.get("quant") or "").strip()
        if quant == "Q2_K":
            quant = "Q2_K_MIX"  # llama-bench's "Q2_K - Medium" file is llama-quantize's Q2_K mix
        if model is None or quant not in pm.ALL_QUANTS:
            continue
        size = _num(r.get("size_gib"))
        scale = 1.0
        if size is not None:
            ours = pm.weight_bytes(model, quant)["total"] / pm.GiB
            if abs(ours / size - 1) > 0.03:
                if not (hybrid and hc.is_hybrid(model) and abs(ours / size - 1) <= hc.SIZE_TOLERANCE):
                    continue  # not the file the run measured
                scale = size / ours  # a hybrid's file mixes its types otherwise: its bytes as printed
        try:
            p = _placement(model, dev, backend, quant)
        except ValueError:
            continue
        threads = _num(r.get("threads"))
        n_threads = int(threads) if backend == "cpu" and threads else None
        label = f"{r.get('model', '')} {quant}"
        for kind, test_key, tps_key in (("decode", "test_tg", "tg_tps"), ("prefill", "test_pp", "pp_tps")):
            test, tps = (r.get(test_key) or "").strip(), _num(r.get(tps_key))
            if "test" in r and "tps" in r:  # pr_tables / lab rows: one test per row
                test, tps = (r.get("test") or "").strip(), _num(r.get("tps") or r.get("t_per_s"))
                if kind == "decode" and not (test.startswith("tg") or (r.get("microbatch") == "1")):
                    continue
                # prompt processing as llama-bench runs it by default: micro-batches of 256 tokens or more (not
                # the batched-decode rows: pp2..pp16 of a table without a micro-batch column)
                if kind == "prefill" and not (test.startswith("pp") and int(_num(r.get("microbatch")) or 512) >= 256):
                    continue
                if kind == "prefill" and (r.get("tps_kind") or "prefill") != "prefill":
                    continue
                if str(r.get("depth", "0") or "0") not in ("0", ""):
                    continue
            if not tps or test[:2] not in ("tg", "pp"):
                continue
            bound = (_num(r.get("loadavg_1m")) or 0.0) > LAB_MAX_LOAD and not _isolated(r)
            if bound and not bounds:
                continue
            if (r.get("date") or "9999") < MIN_DATE.get((backend, kind), ""):
                continue
            vendor = measured.rates(dev, backend).get("vendor", "") if backend in measured.GPU_BACKENDS else ""
            if (r.get("date") or "9999") < VENDOR_MIN_DATE.get((backend, kind, vendor), ""):
                continue
            if backend == "cpu" and kind == "prefill" and (r.get("date") or "9999") < CPU_REPACKED.get(quant, ""):
                continue  # before runtime repacking: a different (slower) kernel for these types
            if backend == "vulkan" and _fa_on(r) and (r.get("date") or "9999") < VULKAN_FA_DATE:
                continue  # scalar flash attention: a slow path llama-bench did not take by default
            n = int(_num(test[2:]) or 0)
            if n <= 0:
                continue
            if kind == "decode":
                work = _decode_sample(p, n, head=test.startswith("tg"))
            else:
                ub = int(_num(r.get("n_ubatch") or r.get("microbatch")) or pm.N_UBATCH_DEFAULT)
                work = _prefill_sample(p, n, min(ub, n))
            if scale != 1.0:
                work = hc.scale_weights(work, scale)
            out.append(
                Sample(
                    dev.name,
                    backend,
                    kind,
                    tps,
                    n,
                    work,
                    dev,
                    n_threads,
                    r.get("source", ""),
                    label,
                    date=r.get("date") or "",
                    sampling=kind == "prefill" or test.startswith("tg"),
                    notes=r.get("notes") or "",
                    load=_num(r.get("loadavg_1m")) or 0.0,
                    bound=bound,
                    repack=(r.get("cpu_repack") or _sycl_build(r.get("sycl_build") or "")).strip(),
                    driver=_intel_driver(r.get("notes") or "") if vendor == "intel" and backend == "vulkan" else "",
                    logits_bytes=4.0 * model.vocab_size if dev.name in discrete and backend != "cpu" else 0.0,
                    host=measured.host_of(r.get("notes") or ""),
                )
            )
    return out


# ---------------------------------------------------------------------------------------------------------
# 3. Prediction with given parameters
# ---------------------------------------------------------------------------------------------------------
def _on_driver(params: dict, backend: str, driver: str) -> dict:
    """The parameter table with an Intel driver's values ("intel_windows", "intel_mesa24") in place of today's
    Mesa's ("intel")."""
    prm = params[backend]
    swap = {}
    for name in ("vendor_bw", "vendor_dq", "vendor_pp"):
        table = getattr(prm, name)
        if "intel_" + driver in table:
            swap[name] = {**table, "intel": table["intel_" + driver]}
    return dict(params, **{backend: replace(prm, **swap)}) if swap else params


# a run whose notes name Windows 10/11 as its OS and no Mesa driver
_WINDOWS = re.compile(r"^(?!.*\bmesa\b).*\bwindows 1[01]\b", re.I | re.S)
# Mesa 24's ANV (2024 to mid-2025): PR #14001 timed it 2.5-3.1x below Intel's Windows driver on the same cards and
# build; an Arc Pro B70 on a 2026 Mesa streams Q4_0 at 55% of its bandwidth, as the Windows driver does
_MESA24 = re.compile(r"\bmesa\s*24\.", re.I)


# What a SYCL run's build did unlike the default the model assumes (its sycl_build column), as
# measured.sycl_reordered and sycl_f16_build read it after the run's date: "+opt" / "-opt" (GGML_SYCL_DISABLE_OPT=0 /
# 1), "+Q4_K" (a pull request's branch with that type's reordered kernel before its merge), "-f16" (built without
# GGML_SYCL_F16). Anything else is dropped.
_SYCL_MARK = re.compile(r"[+-]opt|\+[A-Z][A-Z0-9_]*|-f16")


def _sycl_build(value: str) -> str:
    return " ".join(t for t in value.split() if _SYCL_MARK.fullmatch(t))


def _intel_driver(notes: str) -> str:
    """The Intel GPU driver a Vulkan run names: "windows", "mesa24", or "" (a current Mesa, what the app assumes)."""
    if _WINDOWS.search(notes):
        return "windows"
    return "mesa24" if _MESA24.search(notes) else ""


def predict(s: Sample, params: dict) -> float:
    """Tokens per second the measured profile gives a sample with this parameter table."""
    if s.driver and s.backend in params:
        params = _on_driver(params, s.backend, s.driver)
    if s.kind == "decode":
        t = 0.0
        layers = {}
        for side, w in s.work:
            t += measured.decode_seconds(w, s.dev, s.backend, s.n_threads, 1, params, build=s.features)[0]
            layers[side] = w.layers
        link = measured.HOST_LINKS.get(s.host, LINK_GBS) * 1e9
        t += measured.step_overhead_seconds(
            layers, {side: s.backend for side in layers}, True, params, s.logits_bytes if s.sampling else 0.0, link
        )
        if not s.sampling:  # ppN at micro-batch 1: no token sampled, no host round trip between passes
            t -= measured.params_for(s.backend, params).step_us * 1e-6
        return 1.0 / t
    t = 0.0
    for _side, w, u, k, scale in s.work:
        tc, tm = measured.prefill_seconds(w, s.dev, s.backend, u, k, s.n_threads, params, scale=scale, build=s.features)
        t += tc + tm
    return s.tokens / t


# The parameters each fit may move (the rest keep their priors) and their limits: the fit columns of the parameter
# table (enginelab.measured.params.TABLE)
_free_names = measured.free_names
_bound = measured.bound
# How strongly each (log) parameter is pulled toward its prior, against the data: prompt processing has few
# modern dense runs per backend in the data, so its priors (documented in measured.PRIORS) weigh more.
PRIOR_WEIGHT = {"decode": 0.02, "prefill": 0.02}


def _objective(values: dict, samples_: list, backend: str, prior: measured.Params, kind: str = "decode") -> float:
    prm = prior.with_values(values)
    params = dict(measured.PARAMS, **{backend: prm})
    by_dev: dict = {}
    for s in samples_:
        try:
            e = math.log(predict(s, params) / s.tps)
        except (ZeroDivisionError, ValueError, OverflowError):
            e = 10.0
        # absolute log error (smoothed near zero): the fit aims at the median run, and a run far off (another
        # build, a driver regression, a misreport) pulls no harder than one slightly off. A lower bound (a lab run
        # under load) only counts where the estimate falls below it.
        key = s.device
        if s.bound:  # each bound stands alone: a constraint on every device's physics, not one device's runs
            e = min(0.0, e)
            key = (s.device, s.label, s.n_threads, s.kind)
        by_dev.setdefault(key, []).append(math.sqrt(e * e + 0.0025))
    # a device weighs the square root of its runs: one with a single odd run cannot set a type's cost alone, one
    # with a hundred runs cannot outvote the rest
    loss = sum(sum(v) / math.sqrt(len(v)) for v in by_dev.values()) / max(
        1.0, sum(math.sqrt(len(v)) for v in by_dev.values())
    )
    for name, v in values.items():
        p0 = _prior_value(prior, name)
        loss += PRIOR_WEIGHT[kind] * (math.log(v / p0)) ** 2
    return loss


def _prior_value(prior: measured.Params, name: str) -> float:
    if "." in name:
        a, b = name.split(".", 1)
        return getattr(prior, a)[b]
    return getattr(prior, name)


def fit(
    samples_: list, backend: str, kind: str, iterations: int = 400, start: dict | None = None, base: dict | None = None
) -> dict:
    """The free parameters of (backend, kind) that minimise the devices' mean absolute log error (plus the
    prior term), by Nelder-Mead in log space from the prior (or from `start`, e.g. the full fit when a device
    is held out), restarted once from its result. base: values of the other kind's fit (prefill streams its
    weights at the decode fit's bandwidth). Returns {name: value}."""
    names = _free_names(backend, kind)
    # the other kind's values only: the priors of the parameters being fitted stay the physical ones
    prior = measured.PRIORS[backend].with_values({k: v for k, v in (base or {}).items() if k not in names})
    sel = [s for s in samples_ if s.backend == backend and s.kind == kind]
    if not sel:
        return {}
    start = start or {}
    x0 = [math.log(start.get(n, _prior_value(prior, n))) for n in names]

    def values(x):
        vals = {}
        for n, xi in zip(names, x):
            lo, hi = _bound(n)
            vals[n] = min(max(math.exp(xi), lo), hi)
        return vals

    def f(x):
        return _objective(values(x), sel, backend, prior, kind)

    best = x0
    rounds = 2 if iterations >= 100 else 1
    for r in range(rounds):  # a restart with a fresh simplex escapes a collapsed one
        best = _nelder_mead(f, best, iterations // rounds, step=0.4 if r == 0 and not start else 0.15)
    return values(best)


def _nelder_mead(f, x0: list, iterations: int, step: float = 0.4) -> list:
    n = len(x0)
    pts = [list(x0)] + [[x0[j] + (step if j == i else 0.0) for j in range(n)] for i in range(n)]
    vals = [f(p) for p in pts]
    for _ in range(iterations):
        order = sorted(range(n + 1), key=lambda i: vals[i])
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if vals[-1] - vals[0] < 1e-9:
            break
        c = [sum(p[j] for p in pts[:-1]) / n for j in range(n)]
        xr = [c[j] + (c[j] - pts[-1][j]) for j in range(n)]
        fr = f(xr)
        if fr < vals[0]:
            xe = [c[j] + 2 * (c[j] - pts[-1][j]) for j in range(n)]
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = [c[j] + 0.5 * (pts[-1][j] - c[j]) for j in range(n)]
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:  # shrink toward the best
                for i in range(1, n + 1):
                    pts[i] = [pts[0][j] + 0.5 * (pts[i][j] - pts[0][j]) for j in range(n)]
                    vals[i] = f(pts[i])
    return pts[min(range(n + 1), key=lambda i: vals[i])]


# ---------------------------------------------------------------------------------------------------------
# 4. Held-out error
# ---------------------------------------------------------------------------------------------------------
def errors(samples_: list, params: dict) -> list:
    """(sample, estimate / measured - 1) for every sample that is a measurement (not a lower bound)."""
    return [(s, predict(s, params) / s.tps - 1.0) for s in samples_ if not s.bound]


def loo(
    samples_: list, backend: str, kind: str, iterations: int = 400, warm: dict | None = None, base: dict | None = None
) -> list:
    """Leave one device out: for each device, fit on the others and predict its runs. Returns (sample, error).

    warm: start each held-out fit from these values (the full fit) with `iterations` steps, instead of from
    the priors: the same minimum, found faster (the gate test uses it)."""
    sel = [s for s in samples_ if s.backend == backend and s.kind == kind]
    out = []
    for dev in sorted({s.device for s in sel if not s.bound}):
        train = [s for s in sel if s.device != dev]
        values = fit(train, backend, kind, iterations, start=warm, base=base) if train else {}
        vals = {**(base or {}), **(warm or {}), **values}
        params = dict(measured.PARAMS, **{backend: measured.PRIORS[backend].with_values(vals)})
        out += errors([s for s in sel if s.device == dev], params)
    return out


def _solve(a: list, b: list) -> list:
    """x with a x = b (Gaussian elimination with partial pivoting; a is small and positive definite)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(c + 1, n):
            f = m[r][c] / m[c][c]
            for k in range(c, n + 1):
                m[r][k] -= f * m[c][k]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (m[r][n] - sum(m[r][k] * x[k] for k in range(r + 1, n))) / m[r][r]
    return x


def loo_linear(
    samples_: list, backend: str, kind: str, values: dict, base: dict | None = None, refine: int = 0
) -> list:
    """Leave one device out in one Gauss-Newton step from a fit: for each device, the minimum of the objective
    without it (its absolute log errors by iteratively reweighted least squares, the same prior term), linearised
    around `values`, then that device's runs predicted with the moved parameters. Parameters only the held-out
    device constrained fall back toward their priors, as they would in a fit started afresh; the cost is one
    Jacobian (a few hundred estimates), so the gate test can afford it. refine: Nelder-Mead steps from that
    point on the held-out objective (what the linearisation misses). Returns (sample, error)."""
    names = _free_names(backend, kind)
    prior = measured.PRIORS[backend].with_values({k: v for k, v in (base or {}).items() if k not in names})
    full = {**(base or {}), **values}
    sel = [s for s in samples_ if s.backend == backend and s.kind == kind]
    theta = [math.log(_prior_value(prior.with_values(full), n)) for n in names]
    theta0 = [math.log(_prior_value(prior, n)) for n in names]

    def table(th):
        vals = {n: min(max(math.exp(x), _bound(n)[0]), _bound(n)[1]) for n, x in zip(names, th)}
        return dict(measured.PARAMS, **{backend: prior.with_values({**full, **vals})})

    def logerr(s, params):
        return math.log(predict(s, params) / s.tps)

    p0 = table(theta)
    e0 = [logerr(s, p0) for s in sel]
    jac = []  # d log(estimate) / d log(parameter), by central differences
    h = 0.02
    for j in range(len(names)):
        up, dn = theta[:], theta[:]
        up[j] += h
        dn[j] -= h
        pu, pd = table(up), table(dn)
        jac.append([(logerr(s, pu) - logerr(s, pd)) / (2 * h) for s in sel])
    out = []
    for dev in sorted({s.device for s in sel if not s.bound}):
        idx = [i for i, s in enumerate(sel) if s.device != dev]
        counts: dict = {}
        for i in idx:
            counts[sel[i].device] = counts.get(sel[i].device, 0) + 1
        norm = sum(math.sqrt(n) for n in counts.values())
        k = len(names)
        a = [[0.0] * k for _ in range(k)]
        g = [0.0] * k
        for i in idx:
            e = min(0.0, e0[i]) if sel[i].bound else e0[i]
            if sel[i].bound and e0[i] > 0:
                continue  # a lower bound the estimate already clears pulls on nothing
            c = 1.0 / math.sqrt(counts[sel[i].device]) / norm / (2.0 * math.sqrt(e * e + 0.0025))
            for r in range(k):
                jr = jac[r][i]
                g[r] += c * jr * e
                for q in range(r, k):
                    a[r][q] += c * jr * jac[q][i]
        for r in range(k):
            for q in range(r):
                a[r][q] = a[q][r]
            a[r][r] += PRIOR_WEIGHT[kind]
            g[r] += PRIOR_WEIGHT[kind] * (theta[r] - theta0[r])
        step = _solve(a, [-x for x in g])
        moved = [t + d for t, d in zip(theta, step)]
        if refine:
            train = [sel[i] for i in idx]
            vals = {n: min(max(math.exp(x), _bound(n)[0]), _bound(n)[1]) for n, x in zip(names, moved)}
            vals = fit(train, backend, kind, refine, start=vals, base=base)
            moved = [math.log(vals[n]) for n in names]
        params = table(moved)
        out += errors([s for s in sel if s.device == dev], params)
    return out


# A vendor's runs on a backend several vendors share (Vulkan) get a typical range of their own when there are
# this many, on this many devices: Intel's Vulkan drivers and kernel paths spread far wider than the others'
VENDOR_RANGE_MIN = (8, 3)


def vendor_ranges(errs: list, backend: str, kind: str) -> dict:
    """{"<kind>.<vendor>": [20th, 80th percentile of measured / estimated]} of the held-out errors of each vendor
    that shares a backend with others and has enough runs (VENDOR_RANGE_MIN); {} otherwise."""
    if backend not in measured.GPU_BACKENDS:
        return {}
    by: dict = {}
    for s, e in errs:
        if not s.bound:
            by.setdefault(measured.rates(s.dev, backend)["vendor"], []).append((s, e))
    if len(by) < 2:
        return {}
    out = {}
    for vendor, group in sorted(by.items()):
        sm = summary(group)
        if sm["n"] >= VENDOR_RANGE_MIN[0] and sm["devices"] >= VENDOR_RANGE_MIN[1]:
            out[f"{kind}.{vendor}"] = [round(sm["range"][0], 3), round(sm["range"][1], 3)]
    return out


def summary(errs: list) -> dict:
    """Median and 90th percentile of |error|, the count, and the 20th-80th percentile of measured/estimated."""
    if not errs:
        return {"n": 0}
    a = sorted(abs(e) for _s, e in errs)
    ratio = sorted(1.0 / (1.0 + e) for _s, e in errs)  # measured / estimated

    def q(xs, f):
        i = f * (len(xs) - 1)
        lo = int(math.floor(i))
        hi = min(lo + 1, len(xs) - 1)
        return xs[lo] + (xs[hi] - xs[lo]) * (i - lo)

    return {
        "n": len(errs),
        "devices": len({s.device for s, _e in errs}),
        "median": statistics.median(a),
        "p90": q(a, 0.9),
        "range": (q(ratio, 0.2), q(ratio, 0.8)),
    }
