"""validation: perf_model's estimates against published llama-bench measurements.

Standard library only.  Sections:

  1. The models and devices of the dataset (built here from perf_model's public
     constructors; perf_model's own catalog is not touched)
  2. One prediction per measurement: tg128 and pp512 as perf_model estimates them
  3. Errors and their summary: median absolute percentage error, per device
  4. Reading pasted llama-bench output (markdown table or JSON) and comparing
     each row with our estimate

How a llama-bench test maps to perf_model (most rows are tg128 and pp512; a row names its own tests):
  tgN  generates N tokens from an empty context, so the average step sees about
       N/2 tokens of KV: decode_step_time(placement, context=N // 2)
  ppN  processes an N-token prompt in micro-batches of n_ubatch (512):
       prefill_time(placement, n_tokens=N)
with the whole model on the device (llama-bench -ngl 99 in every row).
profile="course" (the default) uses the module's efficiencies (ETA_DECODE, ETA_PREFILL), nothing fitted to these
measurements; profile="measured" uses enginelab.measured, whose parameters were fitted on data/calibration/ (which
includes most of these rows, so its error here is an in-sample one: the held-out figures per backend are in
backend_errors()).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import replace
from pkgutil import get_data

import perf_model as pm

from .checks import check_json_text

_CACHE: dict = {}


def dataset_rows() -> tuple:
    """The published llama-bench rows (data/llama_bench.csv, shipped in the wheel as package data)."""
    if "rows" not in _CACHE:
        text = get_data("enginelab", "data/llama_bench.csv").decode("utf-8")
        _CACHE["rows"] = tuple(csv.DictReader(io.StringIO(text)))
    return _CACHE["rows"]


# ---------------------------------------------------------------------------
# 1. Models and devices
# ---------------------------------------------------------------------------
# LLaMA 2 7B (meta-llama/Llama-2-7b-hf config.json).  LLaMA 1 7B has the same
# shape; CodeLlama 7B differs only in vocab (32016) and context (16384).
LLAMA2_7B_CONFIG = {
    "model_type": "llama",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
}
CODELLAMA_7B_CONFIG = dict(LLAMA2_7B_CONFIG, vocab_size=32016, max_position_embeddings=16384)
# Meta-Llama-3-8B: Llama 3.1 8B's shape without the llama3 rope scaling (no rope_freqs tensor), 8k context.
LLAMA3_8B_CONFIG = dict(
    LLAMA2_7B_CONFIG,
    intermediate_size=14336,
    num_key_value_heads=8,
    vocab_size=128256,
    max_position_embeddings=8192,
    rope_theta=500000.0,
)

MODELS = {
    "llama-2-7b": replace(
        pm.model_from_hf_config(LLAMA2_7B_CONFIG, name="LLaMA 2 7B"),
        key="llama-2-7b",
        source="https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json",
    ),
    "codellama-7b": replace(
        pm.model_from_hf_config(CODELLAMA_7B_CONFIG, name="CodeLlama 7B"),
        key="codellama-7b",
        source="https://huggingface.co/codellama/CodeLlama-7b-hf/blob/main/config.json",
    ),
    "llama-3-8b": replace(
        pm.model_from_hf_config(LLAMA3_8B_CONFIG, name="Llama 3 8B"),
        key="llama-3-8b",
        source="https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json",
    ),
}
DATASET_MODEL = {
    "LLaMA 2 7B": "llama-2-7b",
    "LLaMA 7B": "llama-2-7b",
    "CodeLlama 7B": "codellama-7b",
    "Llama 3 8B": "llama-3-8b",
}

# Apple GPUs: FP16 throughput = GPU cores x 128 ALUs x 2 FLOPs x clock (Apple GPUs run
# FP16 at the FP32 rate).  The clocks are approximate per generation; only the
# prompt-processing estimates depend on them.  Bandwidth is the dataset's column
# (Apple's specification for the chip).
APPLE_GPU_CLOCK_GHZ = {"M1": 1.278, "M2": 1.398, "M3": 1.38, "M4": 1.6}
CAPACITY_GB = 192.0  # memory capacity is not what is validated here: every row ran with the model loaded

RTX_3090_TI = pm.Device(
    "RTX 3090 Ti",
    24,
    1008,
    80.0,
    approx=True,
    source="NVIDIA: 1008 GB/s; FP16 tensor TFLOP/s with FP32 accumulate approximated",
)
CUDA_DEVICES = {
    "NVIDIA GeForce RTX 3090": pm.RTX_3090,
    "NVIDIA GeForce RTX 3090 Ti": RTX_3090_TI,
    "NVIDIA GeForce RTX 4090": pm.RTX_4090,
}

_APPLE = re.compile(r"Apple (M\d)(?: (Pro|Max|Ultra))? \((\d+)-core GPU\)")


def apple_device(name: str, bandwidth_gbs: float) -> pm.Device:
    m = _APPLE.fullmatch(name)
    if not m:
        raise ValueError(f"device: not an Apple chip name like 'Apple M2 Max (38-core GPU)': {name!r}")
    gen, cores = m.group(1), int(m.group(3))
    _check(gen in APPLE_GPU_CLOCK_GHZ, "device", f"no GPU clock for {gen}")
    tflops = cores * 128 * 2 * APPLE_GPU_CLOCK_GHZ[gen] / 1000.0
    return pm.Device(
        name,
        CAPACITY_GB,
        float(bandwidth_gbs),
        tflops,
        approx=True,
        source=f"bandwidth: Apple spec; FP16: {cores} cores x 128 x 2 x {APPLE_GPU_CLOCK_GHZ[gen]} GHz",
    )


def machine_for(device: str, bandwidth_gbs: float) -> pm.Machine:
    """A perf_model Machine for a dataset device (the whole model runs on its GPU)."""
    if device in CUDA_DEVICES:
        gpu = CUDA_DEVICES[device]
        return pm.Machine(device, gpu, replace(pm.DDR5_DUAL, mem_gb=64), 31.5, key=device)
    gpu = apple_device(device, bandwidth_gbs)
    return pm.Machine(
        device, gpu, replace(gpu, name=device + " CPU", fp16_tflops=1.0), 0.0, unified=True, gpu_share=1.0, key=device
    )


def _check(cond: bool, arg: str, msg: str) -> None:
    if not cond:
        raise ValueError(f"{arg}: {msg}")


# ---------------------------------------------------------------------------
# 2. Predictions
# ---------------------------------------------------------------------------


def full_offload(model, machine, quant: str, n_ctx: int = 1024, profile: str = "course") -> pm.Placement:
    model = pm.get_model(model) if not isinstance(model, pm.Model) else model
    ngl = model.num_hidden_layers + 1 if machine.gpu is not None else 0
    return pm.place(model, machine, quant, n_ctx=n_ctx, kv_type="f16", n_gpu_layers=ngl, profile=profile)


PROFILES = ("measured", "course")


def estimate(model, machine, quant: str, test: str, ngl=None, profile: str = "course", build=None) -> float:
    """Our tokens/s for a llama-bench test name ('tg128', 'pp512') on a machine, in a speed profile (measured: for
    a llama.cpp build, perf_model's `build`; None is today's)."""
    kind, n = parse_test(test)
    _check(kind in ("pp", "tg"), "test", f"only ppN and tgN tests can be estimated, got {test!r}")
    model = model if isinstance(model, pm.Model) else get_model(model)
    n_ctx = max(1024, n + 16)
    if ngl is None or machine.gpu is None:
        p = full_offload(model, machine, quant, n_ctx, profile)
    else:
        p = pm.place(
            model,
            machine,
            quant,
            n_ctx=n_ctx,
            kv_type="f16",
            n_gpu_layers=min(int(ngl), model.num_hidden_layers + 1),
            profile=profile,
        )
    if kind == "tg":
        return pm.decode_step_time(p, machine, context=n // 2, build=build)["tok_per_s"]
    return pm.prefill_time(p, machine, n_tokens=n, build=build)["tok_per_s"]


_RUN_NUMBER = re.compile(r"\(([0-9]{3,6})\)")
_RUN_DAY = re.compile(r"\b([0-9]{4}-[0-9]{2}(?:-[0-9]{2})?)\b")


def run_build(text: str) -> str:
    """The day of the llama.cpp build a dataset row ran, as perf_model's `build` takes it, or "" (today's) where
    the row does not date it. A build number ("4426e298 (2824)") is dated by data/llama_cpp_builds.csv (older than
    the table: not dated); otherwise the one date the row names ("PR #4766 branch (2024-01-10)", "(PR #4766,
    2024-01)"), unless the row says later rows ran on newer builds (the Apple table: each chip its own build)."""
    from .measured.builds import describe_build

    text = str(text)
    if "newer build" in text:
        return ""
    m = _RUN_NUMBER.search(text)
    try:
        if m:
            return describe_build(f"b{m.group(1)}").day
        m = _RUN_DAY.search(text)
        return describe_build(m.group(1)).day if m else ""
    except ValueError:
        return ""


def _num(s) -> float | None:
    s = str(s).strip()
    return float(s) if s else None


def predictions(rows=None, profile: str = "course") -> list:
    """Every dataset row with our two estimates and their errors (the dataset's own are computed once per
    profile)."""
    _check(profile in PROFILES, "profile", f"unknown profile {profile!r}; allowed: {', '.join(PROFILES)}")
    if rows is None:
        key = ("predictions", profile)
        if key not in _CACHE:
            _CACHE[key] = predictions(dataset_rows(), profile)
        return [dict(p) for p in _CACHE[key]]
    out = []
    for r in rows:
        model = MODELS[DATASET_MODEL[r["model"]]]
        mc = machine_for(r["device"], float(r["mem_bandwidth_GBps"]))
        tg, pp = _num(r["tg_tps"]), _num(r["pp_tps"])
        day = run_build(r["build"]) if profile == "measured" else ""  # the course profile has no builds
        ptg = estimate(model, mc, r["quant"], r["tg_test"], profile=profile, build=day or None)
        ppp = estimate(model, mc, r["quant"], r["pp_test"], profile=profile, build=day or None)
        changed = bool(day) and (ptg, ppp) != (
            estimate(model, mc, r["quant"], r["tg_test"], profile=profile),
            estimate(model, mc, r["quant"], r["pp_test"], profile=profile),
        )
        out.append(
            {
                "model": r["model"],
                "quant": r["quant"],
                "device": r["device"],
                "backend": r["backend"],
                "family": device_family(r["device"]),
                "source": r["source"],
                "build": r["build"],
                "run_build": day,  # the build the estimates are for ("": today's)
                "build_changed": changed,  # they differ from today's build's
                "tg_test": r["tg_test"],
                "pp_test": r["pp_test"],
                "tg_measured": tg,
                "tg_predicted": ptg,
                "tg_error": None if tg is None else ptg / tg - 1,
                "pp_measured": pp,
                "pp_predicted": ppp,
                "pp_error": None if pp is None else ppp / pp - 1,
            }
        )
    return out


def device_family(device: str) -> str:
    m = _APPLE.fullmatch(device)
    if m:
        return f"Apple {m.group(1)}"
    return "NVIDIA (CUDA)" if device.startswith("NVIDIA") else "other"


# ---------------------------------------------------------------------------
# 3. Errors
# ---------------------------------------------------------------------------


def median(xs) -> float | None:
    xs = sorted(xs)
    if not xs:
        return None
    k = len(xs) // 2
    return xs[k] if len(xs) % 2 else (xs[k - 1] + xs[k]) / 2


def summary(preds=None, profile: str = "course") -> dict:
    """Median absolute percentage error (as a fraction) for decode and for prompt processing,
    overall and per device, plus the signed median (the bias)."""
    preds = predictions(profile=profile) if preds is None else preds

    def stats(ps):
        tg = [p["tg_error"] for p in ps if p["tg_error"] is not None]
        pp = [p["pp_error"] for p in ps if p["pp_error"] is not None]
        return {
            "n_tg": len(tg),
            "n_pp": len(pp),
            "decode_mape": median([abs(e) for e in tg]),
            "prefill_mape": median([abs(e) for e in pp]),
            "decode_bias": median(tg),
            "prefill_bias": median(pp),
        }

    out = stats(preds)
    out["n_rows"] = len(preds)
    devices = {}
    for p in preds:
        devices.setdefault(p["device"], []).append(p)
    out["by_device"] = {d: stats(ps) for d, ps in devices.items()}
    fams = {}
    for p in preds:
        fams.setdefault(p["family"], []).append(p)
    out["by_family"] = {f: stats(ps) for f, ps in fams.items()}
    return out


# ---------------------------------------------------------------------------
# 4. Pasted llama-bench output
# ---------------------------------------------------------------------------
# `llama-bench -o md` prints a pipe table:
#   | model | size | params | backend | ngl | test | t/s |
#   | llama 7B Q4_0 | 3.56 GiB | 6.74 B | Metal | 99 | pp512 | 535.71 ± 0.30 |
# (older builds write the test as "pp 512"; extra columns such as fa, n_ubatch
# or threads may appear between ngl and test).  `llama-bench -o json` prints an
# array of objects with model_type, model_size, model_n_params, backends,
# n_gpu_layers, n_prompt, n_gen, avg_ts and stddev_ts; `-o jsonl` one object per line.

MAX_INPUT_CHARS = 200_000
REQUIRED_MD = ("model", "test", "t/s")

# llama_model_ftype_name() -> our preset names
FTYPE_NAMES = {
    "all f32": "F32",
    "f16": "F16",
    "bf16": "BF16",
    "q4_0": "Q4_0",
    "q4_1": "Q4_1",
    "q5_0": "Q5_0",
    "q5_1": "Q5_1",
    "q8_0": "Q8_0",
    "q2_k - medium": "Q2_K_MIX",
    "q2_k - small": "Q2_K_S",
    "q3_k - small": "Q3_K_S",
    "q3_k - medium": "Q3_K_M",
    "q3_k - large": "Q3_K_L",
    "q4_k - small": "Q4_K_S",
    "q4_k - medium": "Q4_K_M",
    "q5_k - small": "Q5_K_S",
    "q5_k - medium": "Q5_K_M",
    "q6_k": "Q6_K",
    "iq4_nl - 4.5 bpw": "IQ4_NL",
    "iq4_xs - 4.25 bpw": "IQ4_XS",
    "mxfp4 moe": "MXFP4_MOE",
}


def parse_test(test: str) -> tuple:
    """'pp512' / 'pp 512' -> ('pp', 512); 'tg128' -> ('tg', 128); 'pp512+tg128' -> ('pg', 640)."""
    t = re.sub(r"\s+", "", str(test)).lower()
    m = re.fullmatch(r"(pp|tg)(\d+)(?:@d\d+)?", t)
    if m:
        return m.group(1), int(m.group(2))
    m = re.fullmatch(r"pp(\d+)\+tg(\d+)(?:@d\d+)?", t)
    if m:
        return "pg", int(m.group(1)) + int(m.group(2))
    raise ValueError(f"test: {test!r} is not a llama-bench test name like pp512, tg128 or pp512+tg128")


def quant_of(model_desc: str) -> str | None:
    """'llama 7B Q4_K - Medium' -> 'Q4_K_M' (None if not recognised)."""
    d = str(model_desc).strip().lower()
    for name in sorted(FTYPE_NAMES, key=len, reverse=True):
        if d.endswith(" " + name) or d == name:
            return FTYPE_NAMES[name]
    return None


def _tps(cell: str) -> tuple:
    m = re.fullmatch(
        r"\s*([0-9][0-9,]*(?:\.[0-9]+)?)\s*(?:(?:±|\+/-|\+-)\s*([0-9][0-9,]*(?:\.[0-9]+)?))?\s*", str(cell)
    )
    if not m:
        raise ValueError(f"t/s: {cell.strip()!r} is not a number like '535.71 ± 0.30'")
    return float(m.group(1).replace(",", "")), (float(m.group(2).replace(",", "")) if m.group(2) else None)


def _params(cell) -> float | None:
    m = re.match(r"\s*([0-9.]+)\s*([BMK])?", str(cell))
    if not m:
        return None
    v = float(m.group(1))
    return v * {"B": 1e9, "M": 1e6, "K": 1e3, None: 1}[m.group(2)]


def _cells(line: str) -> list:
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|"):
        s = s[:-1]
    return [c.strip() for c in s.split("|")]


def parse_markdown(text: str) -> list:
    lines = [ln for ln in text.splitlines() if ln.strip().startswith("|")]
    _check(bool(lines), "llama-bench output", "no markdown table found (lines starting with '|')")
    header = None
    rows = []
    for ln in lines:
        cells = _cells(ln)
        low = [c.lower() for c in cells]
        if header is None:
            if "model" in low and "test" in low:
                header = low
                missing = [c for c in REQUIRED_MD if c not in header]
                _check(
                    not missing,
                    "llama-bench output",
                    f"the table header lacks column(s) {', '.join(missing)}; expected "
                    f"| model | size | params | backend | ngl | test | t/s |",
                )
            continue
        if all(re.fullmatch(r":?-+:?", c) for c in cells if c):
            continue  # the separator row
        if "model" in low and "test" in low:
            continue  # a repeated header (several tables pasted)
        _check(
            len(cells) == len(header),
            "llama-bench output",
            f"row {ln.strip()[:60]!r} has {len(cells)} cells, the header has {len(header)}",
        )
        r = dict(zip(header, cells))
        tps, std = _tps(r["t/s"])
        rows.append(
            _row(
                r.get("model", ""),
                r.get("size", ""),
                r.get("params", ""),
                r.get("backend", ""),
                r.get("ngl", ""),
                r["test"],
                tps,
                std,
            )
        )
    _check(
        header is not None,
        "llama-bench output",
        "no table header with 'model', 'test' and 't/s' columns; paste the output of llama-bench -o md",
    )
    _check(bool(rows), "llama-bench output", "the table has a header but no result rows")
    return rows


def _row(model, size, params, backend, ngl, test, tps, std) -> dict:
    kind, n = parse_test(test)
    ngl_v = None
    if str(ngl).strip():
        try:
            ngl_v = int(str(ngl).strip())
        except ValueError:
            raise ValueError(f"ngl: {ngl!r} is not a whole number") from None
    return {
        "model": str(model),
        "size": str(size),
        "params": _params(params),
        "backend": str(backend),
        "ngl": ngl_v,
        "test": re.sub(r"\s+", "", str(test)),
        "kind": kind,
        "n": n,
        "tps": tps,
        "stddev": std,
        "quant": quant_of(model),
    }


_JSON_KEYS = ("model_type", "n_prompt", "n_gen", "avg_ts")


def parse_json(text: str) -> list:
    s = text.strip()
    check_json_text(s, "llama-bench output")  # nesting and number length, before json.loads
    try:
        data = json.loads(s)
    except json.JSONDecodeError as e:
        # -o jsonl: one object per line
        objs = []
        for ln in (x for x in s.splitlines() if x.strip()):
            try:
                objs.append(json.loads(ln))
            except json.JSONDecodeError:
                raise ValueError(
                    f"llama-bench output: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})"
                ) from None
        data = objs
    if isinstance(data, dict):
        data = [data]
    _check(isinstance(data, list) and data, "llama-bench output", "JSON must be a non-empty array of results")
    rows = []
    for i, o in enumerate(data):
        _check(isinstance(o, dict), "llama-bench output", f"JSON item {i} is not an object")
        missing = [k for k in _JSON_KEYS if k not in o]
        _check(
            not missing,
            "llama-bench output",
            f"JSON item {i} lacks {', '.join(missing)} (expected llama-bench -o json fields)",
        )
        npp, ntg = o["n_prompt"], o["n_gen"]
        _check(
            isinstance(npp, int) and isinstance(ntg, int) and npp >= 0 and ntg >= 0,
            "llama-bench output",
            f"JSON item {i}: n_prompt and n_gen must be whole numbers",
        )
        _check(
            isinstance(o["avg_ts"], (int, float))
            and not isinstance(o["avg_ts"], bool)
            and math.isfinite(o["avg_ts"])
            and o["avg_ts"] > 0,
            "llama-bench output",
            f"JSON item {i}: avg_ts must be a positive number, got {o['avg_ts']!r}",
        )
        test = f"pp{npp}+tg{ntg}" if npp and ntg else (f"pp{npp}" if npp else f"tg{ntg}")
        _check(npp or ntg, "llama-bench output", f"JSON item {i} has n_prompt = n_gen = 0")
        size = o.get("model_size")
        size_s = f"{size / pm.GiB:.2f} GiB" if isinstance(size, (int, float)) else ""
        params = o.get("model_n_params")
        params_s = f"{params / 1e9:.2f} B" if isinstance(params, (int, float)) else ""
        rows.append(
            _row(
                o["model_type"],
                size_s,
                params_s,
                o.get("backends", o.get("backend", "")),
                o.get("n_gpu_layers", ""),
                test,
                float(o["avg_ts"]),
                o.get("stddev_ts") if isinstance(o.get("stddev_ts"), (int, float)) else None,
            )
        )
    return rows


def parse_llama_bench(text) -> list:
    """Rows of pasted `llama-bench -o md` or `-o json`/`-o jsonl` output.

    Each row: model, size, params, backend, ngl, test, kind (pp/tg/pg), n, tps, stddev, quant.
    Raises ValueError naming what is wrong."""
    _check(isinstance(text, str), "llama-bench output", "must be text")
    _check(
        len(text) <= MAX_INPUT_CHARS,
        "llama-bench output",
        f"is {len(text):,} characters; at most {MAX_INPUT_CHARS:,} are read",
    )
    s = text.strip()
    _check(bool(s), "llama-bench output", "is empty; paste the table llama-bench printed (or its -o json output)")
    if s[0] in "[{":
        return parse_json(s)
    return parse_markdown(s)


def get_model(key):
    if isinstance(key, pm.Model):
        return key
    if key in MODELS:
        return MODELS[key]
    return pm.get_model(key)


def all_models() -> dict:
    return {**{k: m for k, m in MODELS.items()}, **pm.MODELS}


def _arch(name: str) -> str:
    """An architecture name folded for comparison: GGUF's 'qwen3moe' and Hugging Face's 'qwen3_moe' agree."""
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


# GGUF architectures llama-bench prints for Hugging Face model_types that convert to another one
_GGUF_ARCH = {"mistral": "llama", "gptoss": "gptoss"}


def model_of_row(desc: str, params: float | None):
    """The catalog model a llama-bench row describes, or None. llama-bench's model column is the GGUF
    architecture, the size label and the file type ('qwen2 14B Q4_K - Medium'); its params column the exact
    parameter count. A model matches when its architecture is that one and its parameter count is within 3%."""
    words = str(desc).split()
    if not words or not params:
        return None
    arch = _arch(words[0])
    found = [
        m
        for m in all_models().values()
        if arch in (_arch(m.model_type), _GGUF_ARCH.get(_arch(m.model_type)))
        and abs(m.total_params() / params - 1) <= 0.03
    ]
    return found[0] if found else None


_BUILD_LINE = re.compile(r"^\s*build:\s*\S+\s+\(([0-9]{1,6})\)\s*$", re.MULTILINE)  # -o md's last line
_BUILD_NUMBER = re.compile(r'"build_number"\s*:\s*([0-9]{1,6})\b')  # -o json / jsonl


def paste_build(text: str) -> tuple:
    """(day, what) for the llama.cpp build pasted llama-bench output names ('build: 8e672efe (1786)' under the
    table, or build_number in its JSON): its day through data/llama_cpp_builds.csv and a phrase saying how the
    estimates use it; ("", "") when it names none, ("", why) when the table cannot date it (today's is used)."""
    m = _BUILD_LINE.search(text) or _BUILD_NUMBER.search(text)
    if not m:
        return "", ""
    from .measured.builds import describe_build

    try:
        b = describe_build(f"b{m.group(1)}")
    except ValueError:
        return "", f"llama.cpp b{int(m.group(1))}, older than the builds we can date: today's build is used"
    return b.day, b.note


def compare(text: str, model="llama-2-7b", quant: str = "Q4_0", machine="rtx4090", profile: str = "course") -> dict:
    """Parse pasted output and put our estimate next to each measurement.

    The quant of each row is read from its model column when llama-bench names a preset we know; otherwise the
    chosen `quant` is used. The model of each row is the chosen one when its parameter count matches (within
    10%); otherwise the catalog model that llama-bench's own description names (model_of_row: 'qwen2 14B
    Q4_K - Medium' with 14.77 B parameters is Qwen2.5 14B), and if none does the row is flagged."""
    rows = parse_llama_bench(text)
    m = get_model(model)
    mc = machine if isinstance(machine, pm.Machine) else pm.get_machine(machine)
    n_params = m.total_params()
    day, build = paste_build(text) if profile == "measured" else ("", "")  # the course profile has no builds
    out = []
    for r in rows:
        q = r["quant"] if r["quant"] in pm.ALL_QUANTS else quant
        note = []
        row_model = m
        if r["params"] and abs(r["params"] / n_params - 1) > 0.10:
            row_model = model_of_row(r["model"], r["params"])
            if row_model is not None:
                note.append(f"recognised as {row_model.name} from {r['model']!r}")
            else:
                row_model = m
                note.append(
                    f"this row's model has {r['params'] / 1e9:.2f} B parameters, {m.name} has "
                    f"{n_params / 1e9:.2f} B: pick the matching model"
                )
        if r["quant"] is None and r["model"]:
            note.append(f"quant not recognised in {r['model']!r}; using {quant}")
        est = None
        if r["kind"] in ("pp", "tg"):
            try:
                est = estimate(row_model, mc, q, r["test"], r["ngl"], profile=profile, build=day or None)
            except ValueError as e:
                note.append(str(e))
        else:
            note.append("combined pp+tg tests are not estimated")
        out.append(
            dict(
                r,
                model_used=row_model.name,
                quant_used=q,
                estimate_tps=est,
                error=None if est is None else est / r["tps"] - 1,
                note="; ".join(note),
            )
        )
    return {"rows": out, "model": m.name, "machine": mc.name, "quant": quant, "profile": profile, "build": build}


def dataset_machines() -> dict:
    """{key: Machine} for every device of the dataset (key: a slug of its name), for pasted comparisons."""
    if "machines" in _CACHE:
        return dict(_CACHE["machines"])
    out = {}
    for r in dataset_rows():
        key = re.sub(r"[^a-z0-9]+", "-", r["device"].lower()).strip("-")
        if key not in out:
            out[key] = machine_for(r["device"], float(r["mem_bandwidth_GBps"]))
    _CACHE["machines"] = out
    return dict(out)


# ---------------------------------------------------------------------------
# 5. Both profiles per backend, on the calibration runs (data/calibration)
# ---------------------------------------------------------------------------
def backend_errors() -> list:
    """Per llama.cpp backend and test kind: the runs and devices of the calibration data, the course profile's
    median and p90 error on them, and the measured profile's leave-one-device-out median and p90 (each device
    predicted by a fit that never saw it), as tools/fit_measured.py recorded them in measured_params.json."""
    from . import measured

    out = []
    for backend in measured.BACKENDS:
        for kind in ("decode", "prefill"):
            f = measured.FIT.get("fits", {}).get(backend, {}).get(kind)
            if not f:
                continue
            out.append(
                {
                    "backend": backend,
                    "kind": kind,
                    "runs": f.get("runs", 0),
                    "devices": f.get("devices", 0),
                    "course_median": f.get("course_median"),
                    "course_p90": f.get("course_p90"),
                    "measured_median": f.get("loo_median") if f.get("loo_median") is not None else f.get("fit_median"),
                    "measured_p90": f.get("loo_p90") if f.get("loo_p90") is not None else f.get("fit_p90"),
                    "held_out": f.get("loo_median") is not None,
                }
            )
    return out
