"""Benchmark (not a test): the issue-12 fuzz with larger counts than the suite runs.

    python3 bench/bench_fuzz.py [--scale S]

Three ways into the model, each checked against the same rule: for bad input only ValueError leaves the library;
for anything accepted every call succeeds with finite, non-negative numbers, and no call takes 3 s or more.

- GGUF: 5,000 x S hostile headers (tests/fuzz_pipeline.py: six architectures' seeds and a tensor table per block
  kind the block reader knows, hostile metadata values of every GGUF type, tensors of every ggml type id, broken
  shapes and block numbers, tensors renamed to another block kind's or dropped, flipped and cut bytes) through
  model_from_gguf -> place (3 machines x 2 quantizations, and the file's own context) -> decode_step_time ->
  prefill_time -> sizes;
- config.json: 3,000 x S hostile dicts and texts (the 2025-2026 architectures' readers and the generic one, deep
  nesting, 5,000-digit numbers, cut text) through
  model_from_hf_config / the calculator's parser -> place -> decode -> prefill;
- arguments: every public function of the library with each argument replaced by each of 23 hostile values
  (tests/hostile_args.py), 7,866 calls.

Prints inputs tried, failures by exception type, and the slowest call (CPU seconds); `run(scale) -> dict` is what
`build.py bench` imports and calls. Exit status 1 if anything failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import fuzz_pipeline as fz  # noqa: E402
import hostile_args as ha  # noqa: E402

BASE_GGUF = 5_000
BASE_CONFIGS = 3_000
SEED = 2026


def _hostile_arguments() -> dict:
    calls = 0
    failures: dict = {}
    examples: dict = {}
    slowest = (0.0, "")
    for label, fn, arg, kwargs, nonneg in ha.attacks():
        calls += 1
        t0 = time.process_time()
        try:
            outcome, _dt, msg = ha.attack(label, fn, arg, kwargs, nonneg)
            if outcome == "ValueError" and not ha.names_argument(msg, arg):
                failures["unnamed ValueError"] = failures.get("unnamed ValueError", 0) + 1
                examples.setdefault("unnamed ValueError", f"{label}({arg}): {msg[:200]}")
        except ha.Escape as e:
            kind = type(e.__cause__).__name__ if e.__cause__ else "bad output or slow"
            failures[kind] = failures.get(kind, 0) + 1
            examples.setdefault(kind, str(e)[:300])
        dt = time.process_time() - t0
        if dt > slowest[0]:
            slowest = (dt, f"{label}({arg}=...)")
    return {
        "inputs": calls,
        "functions": len(ha.CASES),
        "failures": failures,
        "failures_total": sum(failures.values()),
        "slowest_call_s": slowest[0],
        "slowest_call": slowest[1],
        "examples": examples,
    }


def run(scale: float = 1.0) -> dict:
    """Returns {"gguf": {...}, "config": {...}, "arguments": {...}, "failures_total", "slow_calls_over_3s",
    "slowest_call_s", "seconds", "ok"}; each part has inputs, failures by type and its slowest call."""
    t0 = time.process_time()
    n_gguf = max(1, int(round(BASE_GGUF * scale)))
    n_cfg = max(1, int(round(BASE_CONFIGS * scale)))
    out = {
        "gguf": fz.fuzz(n_gguf, seed=SEED).as_dict(),
        "config": fz.fuzz_configs(n_cfg, seed=SEED).as_dict(),
        "arguments": _hostile_arguments(),
    }
    parts = out["gguf"], out["config"], out["arguments"]
    out["inputs_total"] = sum(p["inputs"] for p in parts)
    out["failures_total"] = sum(p["failures_total"] for p in parts)
    out["slow_calls_over_3s"] = out["gguf"]["slow_calls_over_3s"] + out["config"]["slow_calls_over_3s"]
    out["slowest_call_s"] = max(p["slowest_call_s"] for p in parts)
    out["seconds"] = time.process_time() - t0
    out["ok"] = out["failures_total"] == 0 and out["slow_calls_over_3s"] == 0
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the GGUF and config.json counts")
    args = ap.parse_args(argv)
    res = run(args.scale)
    for name in ("gguf", "config", "arguments"):
        p = res[name]
        accepted = (
            f", {p['accepted']:,} accepted, {p['refused_value_error']:,} refused (ValueError)"
            if "accepted" in p
            else ""
        )
        print(
            f"{name:9s} {p['inputs']:6,} inputs{accepted}; failures: {p['failures'] or 0}; "
            f"slowest call {p['slowest_call_s'] * 1e3:.0f} ms ({p['slowest_call']})"
        )
        for kind, example in p["examples"].items():
            print(f"          e.g. {kind}: {example}")
    print(
        f"total     {res['inputs_total']:,} inputs, {res['failures_total']} failures, {res['slow_calls_over_3s']} calls "
        f"over 3 s, slowest {res['slowest_call_s']:.2f} s; {res['seconds']:.0f} CPU s: {'ok' if res['ok'] else 'FAILED'}"
    )
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
