"""A llama.cpp build as the feature set enginelab.measured.features reads: which rows of data/llama_cpp_changes.csv it
has. Calibration turns each published run into one (its date, then its marks); the app's estimates are today's
unless the reader names a build: parse_build turns a date, a llama.cpp build number or an app's version into a day
(the tables data/llama_cpp_builds.csv and data/bundled_llama_cpp.csv, at the end of this module).

    features_at("")                   every change: today's build
    features_at("2025-08-21")         the changes that landed on or before that day
    features_at("2025-03")            a month: the changes of that month count
    features_at("2025-07-02 +opt")    and marks: what the run's build did unlike its day's default

A change lands on its `since` day (YYYY-MM-DD, or YYYY-MM for the CPU kernels, dated by the month their build reached
users); a build compares its day with it to the precision both give. Marks: "+opt" / "-opt" (GGML_SYCL_DISABLE_OPT=0
before the SYCL reorder was the default / the reorder off), "+<type>" (a pull request's branch with that type's
reordered SYCL kernel or CPU repack, before its merge), "-<type>" (a CPU build without that type's repack), "-f16"
(a SYCL build without GGML_SYCL_F16).
"""

from __future__ import annotations

import bisect
import csv
import io
import re
from dataclasses import dataclass
from functools import lru_cache
from pkgutil import get_data


def key(row: dict) -> str:
    """A change's feature key: feature:backend, then :applies_to where it has one."""
    parts = [row["feature"], row["backend"]] + ([row["applies_to"]] if row.get("applies_to") else [])
    return ":".join(parts)


@lru_cache(maxsize=1)
def changes() -> tuple:
    """The rows of data/llama_cpp_changes.csv (packaged with the wheel)."""
    text = get_data("enginelab", "data/llama_cpp_changes.csv").decode("utf-8")
    return tuple(csv.DictReader(io.StringIO(text)))


def _landed(day: str, since: str) -> bool:
    """Whether a build of this day (YYYY-MM-DD, or YYYY-MM: a change of that month counts; "" today) has a change that
    landed on `since`."""
    n = min(len(day), 10)
    return day[:n] >= since[:n]


@lru_cache(maxsize=512)
def features_at(build: str = "") -> frozenset:
    """The feature set of a build: see the module docstring."""
    words = (build or "").split()
    day, marks = (words[0], words[1:]) if words else ("", [])
    month = day[:7]
    out = set()
    since_default = {r["feature"]: r["since"] for r in changes() if not r.get("applies_to")}.get(
        "sycl_reorder_default", ""
    )
    for r in changes():
        feature, since = r["feature"], r["since"]
        if feature in ("cpu_repack", "cpu_tinyblas"):
            typ = r["applies_to"].split()[0]
            if feature == "cpu_repack" and "-" + typ in marks and "+" + typ not in marks:
                continue
            if not month or since <= month:
                out.add(key(r))
        elif feature in ("sycl_reorder", "sycl_reorder_moe"):
            if "-opt" in marks:
                continue
            if feature == "sycl_reorder" and "+" + r["applies_to"] in marks:
                out.add(key(r))
            elif _landed(day, since if "+opt" in marks else max(since, since_default)):
                out.add(key(r))
        elif _landed(day, since):
            out.add(key(r))
    for m in marks:
        if m.startswith("+") and m[1:] not in ("opt",):
            out.add(f"cpu_repack:cpu:{m[1:]} any")
    if "-f16" not in marks:
        out.add("sycl_f16")
    return frozenset(out)


def missing(build: str, backend: str = "") -> tuple:
    """The changes today's llama.cpp has and this build lacks (rows of the change table), for one backend or all."""
    have = features_at(build)
    return tuple(
        r for r in changes() if key(r) not in have and key(r) in features_at("") and backend in ("", r["backend"])
    )


# ---------------------------------------------------------------------------------------------------------
# The reader's build: a date, a llama.cpp build number, or an app that bundles llama.cpp
# ---------------------------------------------------------------------------------------------------------
# A llama.cpp build number maps to its release day through data/llama_cpp_builds.csv (build, date, source: a
# release's own date, or the first build of a day in a list of releases). A number between two rows takes the
# day of the row below it: the latest day the build is known to include (a build is never older than a smaller
# number), so a change that landed after that day counts as missing even if the build may have it. An app version
# maps to the llama.cpp it bundles through data/bundled_llama_cpp.csv (app, version, llama.cpp build or commit,
# the day a commit was vendored, the app's release day, source): a build number as above, a bare commit by the
# day the app vendored it (the commit is no newer than that).
MAX_BUILD_CHARS = 64
ALLOWED = "a date (YYYY-MM-DD or YYYY-MM), a llama.cpp build number (b6840), 'Ollama x.y.z' or 'today'"
APPS = {"ollama": "Ollama", "lmstudio": "LM Studio"}  # as the reader may write them, without spaces

_NUMBER = re.compile(r"[bB]?([0-9]{1,6})")
_APP = re.compile(r"(ollama|lm ?studio)\s+v?([0-9]{1,4}(?:\.[0-9]{1,4}){1,3})", re.IGNORECASE)


@dataclass(frozen=True)
class Build:
    """A reader's build: `day` as features_at takes it ("" today), `label` as the page names it, `note` how the day
    was found (the build an app bundles, the row a build number took its day from, another engine the app runs)."""

    day: str
    label: str
    note: str = ""


def _csv(name: str) -> tuple:
    return tuple(csv.DictReader(io.StringIO(get_data("enginelab", f"data/{name}").decode("utf-8"))))


@lru_cache(maxsize=1)
def build_days() -> tuple:
    """((build number, YYYY-MM-DD), ...) from data/llama_cpp_builds.csv, by number."""
    return tuple(sorted((int(r["build"].lstrip("b")), r["date"]) for r in _csv("llama_cpp_builds.csv")))


@lru_cache(maxsize=1)
def bundled() -> dict:
    """{(app, version): row} from data/bundled_llama_cpp.csv (app as APPS names it, version "x.y.z")."""
    return {(r["app"], r["version"]): r for r in _csv("bundled_llama_cpp.csv")}


def day_of_number(n: int) -> tuple:
    """(day, note) of llama.cpp build n: its release day, or the day of the nearest smaller build with a known
    date (see above). ValueError naming `build` for a build older than the table."""
    rows = build_days()
    i = bisect.bisect_right([k for k, _d in rows], n) - 1
    if i < 0:
        k, d = rows[0]
        raise ValueError(
            f"build: b{n} is older than the earliest llama.cpp build with a known date (b{k}, {d}); "
            "give the day it was built instead (YYYY-MM-DD)"
        )
    k, d = rows[i]
    if k == n:
        return d, f"llama.cpp b{n}, released {d}"
    return d, f"llama.cpp b{n}, taken as of {d}: the day of b{k}, the nearest earlier build with a known date"


def _app_build(app: str, version: str) -> Build:
    parts = version.split(".")
    key = ".".join(str(int(x)) for x in (parts + ["0"])[:3]) if len(parts) <= 3 else version
    row = bundled().get((app, key))
    label = f"{app} {key}"
    if row is None:
        known = [v for a, v in bundled() if a == app]
        if not known:
            raise ValueError(
                f"build: no {app} version has a cited llama.cpp build in data/bundled_llama_cpp.csv"
                + (" (LM Studio updates its llama.cpp runtime apart from the app)" if app == "LM Studio" else "")
                + "; give the llama.cpp build number its runtime names (b6840) or the build's date"
            )
        raise ValueError(
            f"build: {label} is not in data/bundled_llama_cpp.csv ({app} {known[0]} to {known[-1]}); give {ALLOWED}"
        )
    ref = row["llama_cpp"].split()[0]
    if ref.startswith("b") and ref[1:].isdigit():
        day, how = day_of_number(int(ref[1:]))
        note = f"{label} bundles {how}"
    else:
        day = row["vendored_by"]
        note = f"{label} bundles llama.cpp commit {ref}, no newer than {day} (the day {app} vendored it)"
    if "own engine" in row["notes"]:
        note += f"; {app} runs some model families on its own engine instead (its graphs on this ggml)"
    return Build(day, label, note)


def describe_build(build) -> Build:
    """A reader's llama.cpp build (see parse_build) with its label and how its day was found."""
    if build is None:
        return Build("", "today")
    if not isinstance(build, str) or len(build) > MAX_BUILD_CHARS:
        raise ValueError(f"build: must be {ALLOWED}, got {str(build)[:40]!r}")
    return _describe(" ".join(build.split()))


@lru_cache(maxsize=256)
def _describe(text: str) -> Build:
    if text.lower() in ("", "today", "latest"):
        return Build("", "today")
    m = _APP.fullmatch(text)
    if m:
        return _app_build(APPS[m.group(1).lower().replace(" ", "")], m.group(2))
    m = _NUMBER.fullmatch(text)
    if m:
        day, note = day_of_number(int(m.group(1)))
        return Build(day, f"llama.cpp b{int(m.group(1))}", note)
    parts = text.split("-")
    ok = len(parts) in (2, 3) and len(parts[0]) == 4 and all(p.isdigit() and p.isascii() for p in parts)
    ok = ok and all(len(p) == 2 for p in parts[1:]) and 1 <= int(parts[1]) <= 12
    ok = ok and (len(parts) == 2 or 1 <= int(parts[2]) <= 31)
    if not ok:
        raise ValueError(f"build: must be {ALLOWED}, got {text[:40]!r}")
    return Build(text, text)


def parse_build(build) -> str:
    """A reader's llama.cpp build as features_at takes it: "" for today (None, "", "today", "latest"), else the day
    the build was made, "YYYY-MM-DD" or "YYYY-MM" (a month: its changes count). Also a llama.cpp build number
    ("b6840" or "6840": its release day, see above) and "Ollama x.y[.z]" (the llama.cpp it bundles). ValueError
    naming `build` for anything else."""
    return describe_build(build).day


# What each change of data/llama_cpp_changes.csv is, in a reader's words ({t}: the row's applies_to)
FEATURE_NAMES = {
    "fused_expert_adds": "one kernel for an MoE block's k - 1 expert adds",
    "hip_graphs": "HIP graphs on by default",
    "cuda_graphs": "CUDA graphs on Volta and Turing",
    "vulkan_node_deps": "Vulkan's per-node dependencies instead of a barrier after every node",
    "vulkan_mmvq": "Vulkan's integer-dot mat-vec shader for {t}",
    "sycl_reorder_default": "SYCL's reordered kernels on by default",
    "sycl_reorder": "SYCL's reordered {t} kernel",
    "sycl_reorder_moe": "SYCL's reordered {t} expert kernel",
    "cpu_repack": "the CPU repack of {t}",
    "cpu_tinyblas": "tinyBLAS for {t} on the CPU",
    "mmvq_mmid": "MoE expert matmuls on mat-vec kernels for small batches",
    "mmq_mmid": "MoE expert matmuls batched in MMQ",
    "mmv_float_batch": "float weights on mat-vec kernels up to 8 tokens",
    "mmf": "mul_mat_f for float weights up to 16 tokens",
    "mmq_mfma_batch4": "MMQ from 4 tokens on CDNA",
    "cublas_refactor": "the refactored cuBLAS/hipBLAS GEMM path",
    "gcn_mmq_config": "MMQ tile configurations for GCN",
}


def feature_name(row: dict) -> str:
    """A change table row as the explanation names it ("the CPU repack of Q4_K (x86)")."""
    t = row.get("applies_to") or ""
    if " " in t:  # "Q4_K x86": the type, then the ISA
        typ, isa = t.split(" ", 1)
        t = f"{typ} ({isa.replace('_', ' ')})"
    return FEATURE_NAMES.get(row["feature"], row["feature"]).format(t=t)
