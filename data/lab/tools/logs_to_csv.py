#!/usr/bin/env python3
"""Summarise captured llama.cpp load logs (data/lab/logs/*.log) into load_logs.csv and multi_device.csv.

usage: logs_to_csv.py LOG_DIR OUT_DIR

Only the final, real load of each log is read: with --fit on (the default) llama.cpp first does
dry-run loads that print 0.00 MiB buffers; those come before the last
"load_tensors: loading model tensors ... (load_mode = mmap)" line and are skipped.
Sizes in the logs are MiB with two decimals; bytes here are MiB * 2**20 rounded, so they carry
that rounding (+-5 KiB).
"""

import csv
import glob
import os
import re
import sys

log_dir, out_dir = sys.argv[1:3]
MiB = 1 << 20
# arch, config (which synthetic model), notes -- keyed by the log-name prefix
ARCH = {
    "llama-3.1-8b": ("llama", "meta-llama/Llama-3.1-8B-Instruct shape, all 32 layers, Q4_K_M (llama-quantize)"),
    "qwen2.5-1.5b": ("qwen2", "Qwen/Qwen2.5-1.5B-Instruct shape, all 28 layers, Q4_K_M (llama-quantize)"),
    "gemma2-2b": ("gemma2", "google/gemma-2-2b-it shape, all 26 layers, Q8_0 written directly"),
    "gemma3-1b": ("gemma3", "google/gemma-3-1b-it shape, all 26 layers, Q8_0 written directly"),
    "gemma3-4b": ("gemma3", "google/gemma-3-4b-it text shape, all 34 layers, Q8_0 written directly"),
    "gpt-oss-20b": (
        "gpt-oss",
        "openai/gpt-oss-20b shape, all 24 layers, experts MXFP4 + other matrices F16 written directly",
    ),
    "llama4-scout-4L": (
        "llama4",
        "meta-llama/Llama-4-Scout-17B-16E-Instruct text shape CUT TO 4 LAYERS (3 chunked + 1 full), Q4_0 written directly",
    ),
    "deepseek2-lite-4L": (
        "deepseek2",
        "deepseek-ai/DeepSeek-V2-Lite-Chat shape CUT TO 4 LAYERS (1 dense + 3 MoE), MLA (k_b/v_b split), Q4_0 written directly",
    ),
    "qwen3next-4L": (
        "qwen3next",
        "Qwen/Qwen3-Next-80B-A3B-Instruct shape CUT TO 4 LAYERS (3 gated-delta-net + 1 full attention), Q4_0 written directly",
    ),
    "glm4moe-3L": (
        "glm4moe",
        "zai-org/GLM-4.5-Air shape CUT TO 3 LAYERS (1 dense + 2 MoE; NextN layer not written), Q4_0 written directly",
    ),
    "rpc-": (
        "llama",
        "meta-llama/Llama-3.2-1B-Instruct shape, all 16 layers, Q4_K_M (llama-quantize), 2 ggml-rpc-server devices on 127.0.0.1",
    ),
}


def last_real_block(lines):
    idx = [
        i for i, ln in enumerate(lines) if "load_tensors: loading model tensors" in ln and "load_mode = none" not in ln
    ]
    return lines[idx[-1] :] if idx else lines


def parse(path):
    lines = open(path, errors="replace").read().splitlines()
    cmd = next((ln[len("# command: ") :] for ln in lines if ln.startswith("# command: ")), "")
    blk = last_real_block(lines)
    d = {"cmd": cmd, "model": {}, "compute": {}, "kv": [], "kv_dev": {}, "rs": {}, "layers": {}}
    for ln in blk:
        m = re.search(r"load_tensors:\s+(.+?) model buffer size =\s+([\d.]+) MiB", ln)
        if m:
            d["model"][m.group(1).strip()] = round(float(m.group(2)) * MiB)
        m = re.search(r"sched_reserve:\s+(.+?) compute buffer size =\s+([\d.]+) MiB", ln)
        if m:
            d["compute"][m.group(1).strip()] = round(float(m.group(2)) * MiB)
        m = re.search(r"llama_kv_cache:\s+(.+?) KV buffer size =\s+([\d.]+) MiB", ln)
        if m:
            d["kv_dev"][m.group(1).strip()] = d["kv_dev"].get(m.group(1).strip(), 0) + round(float(m.group(2)) * MiB)
        m = re.search(r"llama_memory_recurrent:\s+(.+?) RS buffer size =\s+([\d.]+) MiB", ln)
        if m:
            d["rs"][m.group(1).strip()] = round(float(m.group(2)) * MiB)
        m = re.search(r"(llama_kv_cache: size = .*)", ln)
        if m:
            d["kv"].append(m.group(1))
        m = re.search(r"llama_kv_cache_iswa: (creating .*)", ln)
        if m:
            d["kv"].append(m.group(1))
        m = re.search(r"llama_context: (n_ctx|n_seq_max|n_ubatch)\s+= (\d+)", ln)
        if m:
            d[m.group(1)] = int(m.group(2))
        m = re.search(r"graph splits = (\d+)", ln)
        if m:
            d["splits"] = int(m.group(1))
        m = re.search(r"graph nodes\s+= (\d+)", ln)
        if m:
            d["nodes"] = int(m.group(1))
    # layer placement of the real load
    for ln in lines:
        if "load_tensors: loading model tensors" in ln and "load_mode = none" not in ln:
            d["layers"] = {}
        m = re.search(r"load_tensors: layer +(\d+) assigned to device (\S+?),", ln)
        if m:
            d["layers"].setdefault(m.group(2), []).append(int(m.group(1)))
    tk = re.search(r"K \((\w+)\)", " ".join(d["kv"]))
    tv = re.search(r"V \((\w+)\)", " ".join(d["kv"]))
    d["type_k"] = tk.group(1) if tk else ""
    d["type_v"] = tv.group(1) if tv else ""
    d["fit"] = [
        ln.split("I ", 1)[-1]
        for ln in lines
        if "common_params_fit_impl:" in ln
        and any(
            k in ln for k in ("projected to use", "reduced", "layers,", "context size", "cannot meet", "will leave")
        )
    ]
    return d


def fmt(dct):
    return "; ".join(f"{k}={v}" for k, v in dct.items())


load_rows, md_rows = [], []
for path in sorted(glob.glob(os.path.join(log_dir, "*.log"))):
    name = os.path.basename(path)[:-4]
    key = next((k for k in ARCH if name.startswith(k)), None)
    if key is None:
        continue
    arch, config = ARCH[key]
    d = parse(path)
    kv_total = sum(d["kv_dev"].values()) + sum(d["rs"].values())
    notes = [f"log {name}.log", f"cmd: {d['cmd']}", f"graph nodes={d.get('nodes', '')} splits={d.get('splits', '')}"]
    if d["rs"]:
        notes.append("recurrent state (RS) buffer " + fmt(d["rs"]) + " bytes included in kv_bytes_total")
    if d["fit"]:
        notes.append("fit: " + " | ".join(d["fit"][-4:]))
    if key != "rpc-":
        load_rows.append(
            {
                "arch": arch,
                "config": config,
                "n_ctx": d.get("n_ctx", ""),
                "n_seq": d.get("n_seq_max", ""),
                "n_ubatch": d.get("n_ubatch", ""),
                "type_k": d["type_k"],
                "type_v": d["type_v"],
                "kv_line": " | ".join(d["kv"]),
                "kv_bytes_total": kv_total,
                "model_buffer_bytes_by_device": fmt(d["model"]),
                "compute_buffer_bytes_by_device": fmt(d["compute"]),
                "notes": "; ".join(notes),
            }
        )
    else:
        # device names: layer lines say RPC0/RPC1/CPU; buffer names say RPC0[host:port] (for every RPC device)
        eps = re.findall(r"127\.0\.0\.1:\d+", d["cmd"].split("--rpc", 1)[1].split()[0]) if "--rpc" in d["cmd"] else []
        devs = {f"RPC{i}": f"RPC0[{ep}]" for i, ep in enumerate(eps)}
        devs["CPU"] = "CPU"
        flags = d["cmd"].split(" -n 1 ")[0].split(".gguf ", 1)[-1]
        for dev, bufname in devs.items():
            model_b = sum(v for k, v in d["model"].items() if k == bufname or (dev == "CPU" and k.startswith("CPU")))
            kv_b = sum(v for k, v in d["kv_dev"].items() if k == bufname)
            comp_b = sum(v for k, v in d["compute"].items() if k == bufname)
            lay = d["layers"].get(dev, [])
            lay_s = f"{len(lay)} ({min(lay)}-{max(lay)})" if lay else "0"
            md_rows.append(
                {
                    "config": name[4:],
                    "flags": flags,
                    "device": dev + (f" ({bufname[5:-1]})" if dev != "CPU" else " (host)"),
                    "model_buffer_bytes": model_b,
                    "kv_bytes": kv_b,
                    "compute_bytes": comp_b,
                    "layers_on_device": lay_s,
                    "notes": "; ".join(
                        x
                        for x in [
                            f"n_ctx={d.get('n_ctx', '')}",
                            f"graph splits={d.get('splits', '')}",
                            "CPU model bytes = CPU_Mapped + CPU_REPACK (host; includes token_embd)"
                            if dev == "CPU"
                            else "",
                            "layer index n_layer (=16) is the output layer",
                        ]
                        + notes[:1]
                        + (["fit: " + " | ".join(d["fit"][-4:])] if d["fit"] else [])
                        if x
                    ),
                }
            )

with open(os.path.join(out_dir, "load_logs.csv"), "w", newline="") as f:
    w = csv.DictWriter(
        f,
        fieldnames=[
            "arch",
            "config",
            "n_ctx",
            "n_seq",
            "n_ubatch",
            "type_k",
            "type_v",
            "kv_line",
            "kv_bytes_total",
            "model_buffer_bytes_by_device",
            "compute_buffer_bytes_by_device",
            "notes",
        ],
    )
    w.writeheader()
    w.writerows(load_rows)
with open(os.path.join(out_dir, "multi_device.csv"), "w", newline="") as f:
    w = csv.DictWriter(
        f,
        fieldnames=[
            "config",
            "flags",
            "device",
            "model_buffer_bytes",
            "kv_bytes",
            "compute_bytes",
            "layers_on_device",
            "notes",
        ],
    )
    w.writeheader()
    w.writerows(md_rows)
print(len(load_rows), "load rows,", len(md_rows), "multi-device rows")
