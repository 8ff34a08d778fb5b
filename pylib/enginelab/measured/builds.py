"""A llama.cpp build as the feature set enginelab.measured.features reads: which rows of data/llama_cpp_changes.csv it
has. Calibration turns each published run into one (its date, then its marks); the app's estimates use
features.TODAY and never come here.

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

import csv
import io
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


MAX_BUILD_CHARS = 64


def parse_build(build) -> str:
    """A reader's llama.cpp build as features_at takes it: "" for today (None, "", "today", "latest"), else the
    day the build was made, "YYYY-MM-DD" or "YYYY-MM" (a month: its changes count). ValueError naming `build`
    for anything else."""
    if build is None:
        return ""
    if not isinstance(build, str) or len(build) > MAX_BUILD_CHARS:
        raise ValueError(f"build: must be a date (YYYY-MM-DD or YYYY-MM) or 'today', got {str(build)[:40]!r}")
    text = build.strip()
    if text.lower() in ("", "today", "latest"):
        return ""
    parts = text.split("-")
    ok = len(parts) in (2, 3) and len(parts[0]) == 4 and all(p.isdigit() and p.isascii() for p in parts)
    ok = ok and all(len(p) == 2 for p in parts[1:]) and 1 <= int(parts[1]) <= 12
    ok = ok and (len(parts) == 2 or 1 <= int(parts[2]) <= 31)
    if not ok:
        raise ValueError(f"build: must be a date (YYYY-MM-DD or YYYY-MM) or 'today', got {text[:40]!r}")
    return text
