#!/usr/bin/env python3
"""Turn raw llama-bench CSV output (-o csv) plus our sidecar .meta.json files into data/lab/cpu_runs.csv.

usage: bench_to_csv.py RAW_DIR OUT.csv SOURCE_TEXT BUILD_TEXT

Each RAW_DIR/<tag>.csv is one llama-bench run; <tag>.meta.json holds what llama-bench does not
print: the HF model key, the quant label, the 1/5/15-min load average before and after the run,
the date and free-text notes.
"""

import csv
import glob
import json
import os
import sys

raw_dir, out_path, source, build = sys.argv[1:5]
COLS = [
    "device",
    "backend",
    "model",
    "model_key",
    "params",
    "size_bytes",
    "quant",
    "threads",
    "flash_attn",
    "n_ubatch",
    "test",
    "t_per_s",
    "t_per_s_sd",
    "loadavg_1m",
    "build",
    "date",
    "source",
    "notes",
]
rows = []
for path in sorted(glob.glob(os.path.join(raw_dir, "*.csv"))):
    meta_path = path[:-4] + ".meta.json"
    if not os.path.exists(meta_path):
        continue
    meta = json.load(open(meta_path))
    with open(path) as f:
        for r in csv.DictReader(f):
            n_p, n_g, n_d = int(r["n_prompt"]), int(r["n_gen"]), int(r.get("n_depth", 0) or 0)
            test = f"pp{n_p}" if n_p else f"tg{n_g}"
            if n_d:
                test += f" @ d{n_d}"
            l_before = meta["load_before"].split()[0]
            l_after = meta["load_after"].split()[0]
            notes = [f"loadavg_1m after batch {l_after}", f"llama-bench {meta['args']}"]
            if meta.get("notes"):
                notes.insert(0, meta["notes"])
            rows.append(
                {
                    "device": r.get("cpu_info", "CPU"),
                    "backend": r.get("backends", "CPU"),
                    "model": r["model_type"],
                    "model_key": meta["model_key"],
                    "params": r["model_n_params"],
                    "size_bytes": r["model_size"],
                    "quant": meta["quant"],
                    "threads": r["n_threads"],
                    "flash_attn": r["flash_attn"],
                    "n_ubatch": r["n_ubatch"],
                    "test": test,
                    "t_per_s": f"{float(r['avg_ts']):.3f}",
                    "t_per_s_sd": f"{float(r['stddev_ts']):.3f}",
                    "loadavg_1m": l_before,
                    "build": build,
                    "date": meta["date"],
                    "source": source,
                    "notes": "; ".join(notes),
                }
            )
with open(out_path, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=COLS)
    w.writeheader()
    w.writerows(rows)
print(f"{len(rows)} rows -> {out_path}")
