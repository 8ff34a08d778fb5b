#!/usr/bin/env python3
"""Regenerate pylib/validation_data.py from data/llama_bench.csv (run after editing the CSV).

The browser has no file system access to data/, so the dataset ships inside the wheel as a Python module.
tests/test_validation.py checks that the two agree.
"""
from __future__ import annotations

import csv
import pprint
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CSV = ROOT / "data" / "llama_bench.csv"
OUT = ROOT / "pylib" / "validation_data.py"


def rows() -> list[dict]:
    with open(CSV, newline="") as f:
        return [dict(r) for r in csv.DictReader(f)]


def render(rs: list[dict]) -> str:
    body = pprint.pformat(tuple(rs), width=116, sort_dicts=False)
    return ('"""Published llama-bench measurements (generated from data/llama_bench.csv by '
            'data/make_validation_data.py; do not edit by hand)."""\n\n'
            f"ROWS = {body}\n")


if __name__ == "__main__":
    OUT.write_text(render(rows()))
    print(f"wrote {OUT.relative_to(ROOT)} ({len(rows())} rows)")
