"""`python -m enginelab` (enginelab.cli): the calculator in a terminal, run in-process through main(argv).

Numbers are checked against hand-derived ones (KV bytes per token from the config's shapes, the course
profile's bandwidth formula), against the calculator's Scenario for the same settings, and against the files
the tests write (synthetic GGUF headers, config.json files). The Hugging Face path runs over a mocked
urllib.request.urlopen serving tests/remote_fixtures.py's fake Hub: no network.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import remote_fixtures as rf  # noqa: E402

import perf_model as pm  # noqa: E402
from enginelab import cli, scenario  # noqa: E402
from enginelab import gguf_header as gh  # noqa: E402
from enginelab.figures import calculator  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def run(capsys, *argv):
    """(exit code, stdout, stderr) of `python -m enginelab *argv`, in-process."""
    code = cli.main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def run_json(capsys, *argv) -> dict:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


# Qwen3-8B (config.json: 36 layers, 8 KV heads, head_dim 128): K and V, f16 = 2 x 36 x 8 x 128 x 2 B per token
QWEN3_8B_KV_PER_TOKEN = 2 * 36 * 8 * 128 * 2  # 147,456 B


# ---------------------------------------------------------------------------------------------------------------
# A catalog model
# ---------------------------------------------------------------------------------------------------------------
def test_catalog_model_json_numbers_by_hand(capsys):
    d = run_json(capsys, "qwen3-8b", "--machine", "rtx4090", "--ctx", "8192")
    (row,) = d["rows"]
    assert row["source"] == {"kind": "catalog", "name": "qwen3-8b"}
    assert row["model"]["layers"] == 36 and row["model"]["quant"] == "Q4_K_M"
    assert row["model"]["kv_bytes_per_token"] == QWEN3_8B_KV_PER_TOKEN
    # 8,192 cells (a multiple of 256: no padding), every layer on the 4090
    fit = row["fit"]
    assert fit["fits"] and fit["verdict"] == "vram" and fit["n_gpu_layers"] == 37 == fit["of_layers"]
    gpu, ram = fit["devices"]
    assert gpu["device"] == "GPU 0" and gpu["layers"] == 36 and gpu["output_layer"]
    assert gpu["kv_bytes"] == fit["kv_bytes"] == 8192 * QWEN3_8B_KV_PER_TOKEN
    assert ram["device"] == "RAM" and ram["layers"] == 0 and ram["kv_bytes"] == 0
    assert fit["vram_bytes"] == pytest.approx(gpu["weights_bytes"] + gpu["kv_bytes"] + gpu["compute_bytes"])
    # the range table: 0, then 1k doubling up to n_ctx; the KV read grows by the bytes per token
    table = row["range"]
    assert [r["context"] for r in table] == [0, 1024, 2048, 4096, 8192]
    assert [r["kv_read_bytes"] for r in table] == [c * QWEN3_8B_KV_PER_TOKEN for c in (0, 1024, 2048, 4096, 8192)]
    speeds = [r["tok_s"] for r in table]
    assert speeds == sorted(speeds, reverse=True) and speeds[-1] < speeds[0]
    for r in table + row["speed"]["decode"] + [row["speed"]["prefill"]]:
        assert r["low_tok_s"] < r["tok_s"] < r["high_tok_s"]  # measured profile: where most published runs fall
    assert [r["context"] for r in row["speed"]["decode"]] == [0, 2000, 8192]
    assert row["speed"]["prefill"]["n_tokens"] == 2000
    assert row["command"] == "llama-server -m Qwen3-8B-Q4_K_M.gguf -c 8192 -fa on"
    assert d["settings"]["profile"] == "measured" and d["settings"]["build"] == "today"


def test_course_profile_is_the_bandwidth_formula(capsys):
    """Course profile, everything on one GPU: a decode step reads the GPU's weights and the context's KV at
    0.7 of the card's bandwidth, plus 50 us (the module's assumptions) -- here on a card given as numbers."""
    d = run_json(capsys, "qwen3-8b", "--machine", "24gb-936gbs-71tf", "--profile", "course")
    (row,) = d["rows"]
    assert d["machine"]["gpus"] == [
        {"name": "GPU 24 GB, 936 GB/s", "memory_gb": 24, "bandwidth_gbs": 936, "fp16_tflops": 71}
    ]
    gpu = row["fit"]["devices"][0]
    assert gpu["capacity_bytes"] == 24e9  # course: decimal GB, no driver reserve
    bw = 0.7 * 936e9
    for r in row["range"]:
        want = 1 / ((gpu["weights_bytes"] + r["context"] * QWEN3_8B_KV_PER_TOKEN) / bw + 50e-6)
        assert r["tok_s"] == pytest.approx(want, rel=2e-3)
        assert r["low_tok_s"] is None and r["high_tok_s"] is None  # the course profile has no measured spread


def test_the_numbers_are_the_calculators(capsys):
    """The CLI and the calculator page (its Scenario) give the same placement, speeds and command."""
    d = run_json(capsys, "gemma-3-12b", "--machine", "rtx3060", "--ctx", "16384", "--kv", "q8_0")
    (row,) = d["rows"]
    state, msgs = calculator.SPEC.from_form(
        {"model": "gemma-3-12b", "machine": "rtx3060", "ctx": "16384", "kv": "q8_0", "tokens": "2000"}
    )
    assert msgs == []
    scn = scenario.build(state)
    assert row["fit"]["n_gpu_layers"] == scn.readouts.n_gpu_layers
    assert row["fit"]["vram_bytes"] == scn.placement.gpu_total and row["fit"]["ram_bytes"] == scn.placement.cpu_total
    assert row["fit"]["verdict"] == scn.readouts.verdict
    at_2000 = next(r for r in row["speed"]["decode"] if r["context"] == 2000)
    assert at_2000["tok_s"] == scn.readouts.decode_tok_s
    assert (at_2000["low_tok_s"], at_2000["high_tok_s"]) == scn.readouts.decode_range
    assert row["speed"]["prefill"]["tok_s"] == scn.readouts.prefill_tok_s
    assert row["command"] == scn.command


def test_catalog_model_text(capsys):
    code, out, err = run(capsys, "qwen3-8b", "--machine", "rtx4090")
    assert code == 0 and err == ""
    d = run_json(capsys, "qwen3-8b", "--machine", "rtx4090")
    row = d["rows"][0]
    assert out.startswith("Qwen3 8B (Q4_K_M) on RTX 4090 24 GB + DDR5\n")
    assert "Fit: fits in VRAM, -ngl 37 of 37 (auto: what --fit picks)" in out
    assert "KV 147 KB per token (f16)" in out
    # the printed speeds are the JSON's, rounded as the page rounds them
    dec = row["speed"]["decode"][1]
    assert dec["context"] == 2000
    low, high = (cli.fmt.rate(dec[k]) for k in ("low_tok_s", "high_tok_s"))
    assert f"{cli.fmt.rate(dec['tok_s'])} tok/s at 2,000 tokens  most runs {low}-{high}" in out
    assert f"{cli.fmt.rate(row['speed']['prefill']['tok_s'])} tok/s for a 2,000-token prompt" in out
    assert "Decode against context:" in out and "\n    8,192 " in out
    assert out.rstrip().endswith("  llama-server -m Qwen3-8B-Q4_K_M.gguf -c 8192 -fa on")


def test_np_and_several_gpus(capsys):
    d = run_json(capsys, "qwen3-30b-a3b", "--machine", "rtx3090,rtx3060", "--np", "4", "--ctx", "32k")
    (row,) = d["rows"]
    assert row["settings"] == {"n_ctx": 32768, "n_ctx_seq": 8192, "kv_type": "f16", "n_parallel": 4}
    names = [dev["name"] for dev in row["fit"]["devices"]]
    assert names == ["RTX 3090", "RTX 3060", "DDR5-5600 dual channel"]  # the default machine's host
    assert sum(dev["layers"] for dev in row["fit"]["devices"]) == 48
    # 4 streams of PAD(32768 / 4, 256) = 8,192 cells: 32,768 cells in all; Qwen3-30B-A3B caches
    # 2 x 48 layers x 4 KV heads x 128 x 2 B = 98,304 B per token
    assert row["model"]["kv_bytes_per_token"] == 2 * 48 * 4 * 128 * 2
    assert row["fit"]["kv_bytes"] == 32768 * 98304
    assert row["range"][-1]["context"] == 8192  # a sequence's context, not n_ctx
    par = row["speed"]["parallel_decode"]
    one = next(r for r in row["speed"]["decode"] if r["context"] == 2000)
    assert par["sequences"] == 4 and one["tok_s"] < par["tok_s"] < 4 * one["tok_s"]
    assert row["command"].endswith(" -np 4")


def test_np_sizes_each_sequences_window(capsys):
    """Gemma 3 12B: 8 global and 40 sliding layers (window 1,024), 8 KV heads of 256, so 2 x 8 x 256 x 2 = 8,192 B
    per cell and layer in f16. -c 32768 -np 4 gives 4 streams: the global layers 4 x 8,192 cells, each sliding
    layer 4 x PAD(min(8,192, 1,024 + 512), 256) = 4 x 1,536 cells (one window per sequence)."""
    per_cell = 2 * 8 * 256 * 2
    want = {1: (32768 * 8 + 1536 * 40) * per_cell, 4: (4 * 8192 * 8 + 4 * 1536 * 40) * per_cell}
    for n_seq, kv in want.items():
        d = run_json(capsys, "gemma-3-12b", "--machine", "rtx4090", "--ctx", "32768", "--np", n_seq)
        assert d["rows"][0]["fit"]["kv_bytes"] == kv
    # --swa-full: the sliding layers keep every cell too, 32,768 x 48 layers; the command asks for it
    d = run_json(capsys, "gemma-3-12b", "--machine", "rtx4090", "--ctx", "32768", "--swa-full")
    assert d["settings"]["swa_full"] is True
    assert d["rows"][0]["fit"]["kv_bytes"] == 32768 * 48 * per_cell
    assert d["rows"][0]["command"].endswith(" --swa-full")


def test_n_cpu_moe_keeps_the_experts_in_ram(capsys):
    """--n-cpu-moe 99 on a 48-layer MoE: every layer's experts (the *_exps tensors) stay in RAM with the token
    embeddings, the rest goes to the GPU, and the command asks for it as llama.cpp counts it (48 layers)."""
    d = run_json(capsys, "qwen3-30b-a3b", "--machine", "rtx3060", "--n-cpu-moe", "99")
    row = d["rows"][0]
    plan = pm.quantize_plan(pm.MODELS["qwen3-30b-a3b"], "Q4_K_M")
    in_ram = sum(r["bytes"] for r in plan if "_exps" in r["name"] or r["name"] == "token_embd.weight")
    ram = row["fit"]["devices"][-1]
    assert ram["device"] == "RAM" and ram["weights_bytes"] == in_ram
    assert row["fit"]["n_gpu_layers"] == 49 and row["command"].endswith(" --n-cpu-moe 48")
    state, msgs = calculator.SPEC.from_form({"model": "qwen3-30b-a3b", "machine": "rtx3060", "n_cpu_moe": "48"})
    assert msgs == [] and scenario.build(state).readouts.decode_tok_s == row["speed"]["decode"][1]["tok_s"]
    d = run_json(capsys, "qwen3-8b", "--n-cpu-moe", "4")  # a dense model: nothing to keep, and it says so
    assert "--n-cpu-moe" not in d["rows"][0]["command"]
    assert "--n-cpu-moe does nothing here: the model has no experts" in d["rows"][0]["notes"]


def test_ctx_zero_and_defaults_follow_the_model(capsys):
    # phi-3-mini was trained on 4,096 tokens: the default 8,192 is capped there; 0 means the trained context
    assert pm.MODELS["phi-3-mini"].max_position_embeddings == 4096
    d = run_json(capsys, "phi-3-mini", "--machine", "rtx3060")
    assert d["rows"][0]["settings"]["n_ctx"] == 4096
    d = run_json(capsys, "qwen3-8b", "--machine", "rtx4090", "--ctx", "0", "--ngl", "20")
    row = d["rows"][0]
    assert row["settings"]["n_ctx"] == 40960 and row["fit"]["n_gpu_layers"] == 20 and not row["fit"]["auto"]
    assert " -ngl 20" in row["command"]
    d = run_json(capsys, "qwen3-8b", "--ctx", "65536")
    assert any("above the 40,960 tokens" in n for n in d["rows"][0]["notes"])


def test_build_is_passed_to_the_timing(capsys):
    """--build goes to decode_step_time / prefill_time as it is (a date here)."""
    d = run_json(capsys, "gpt-oss-20b", "--machine", "rtx3060", "--build", "2025-03-01")
    row = d["rows"][0]
    assert d["settings"]["build"] == row["speed"]["build"] == "2025-03-01"
    p = pm.place("gpt-oss-20b", "rtx3060", "Q4_K_M", n_ctx=8192, profile="measured")
    want = pm.decode_step_time(p, context=2000, build="2025-03-01")
    today = pm.decode_step_time(p, context=2000)
    got = next(r for r in row["speed"]["decode"] if r["context"] == 2000)
    assert got["tok_s"] == want["tok_per_s"] and (got["low_tok_s"], got["high_tok_s"]) == want["range_tok_s"]
    assert row["speed"]["prefill"]["tok_s"] == pm.prefill_time(p, n_tokens=2000, build="2025-03-01")["tok_per_s"]
    assert today["tok_per_s"] >= want["tok_per_s"]  # an older build lacks changes, never gains speed


def test_a_model_that_does_not_fit_is_an_answer(capsys):
    code, out, err = run(capsys, "llama-3.1-70b", "--machine", "rtx3060")
    assert code == 0 and "Fit: fails to allocate" in out and "Speed" not in out
    d = run_json(capsys, "llama-3.1-70b", "--machine", "rtx3060")
    row = d["rows"][0]
    assert not row["fit"]["fits"] and row["speed"] is None and row["fit"]["overflow_bytes"] > 0


def test_cpu_only_machine(capsys):
    code, out, _ = run(capsys, "qwen3-8b", "--machine", "cpu-ddr5")
    assert code == 0 and "Fit: runs on the CPU (no GPU), -ngl 0 of 37" in out
    d = run_json(capsys, "qwen3-8b", "--machine", "cpu-ddr5")
    assert [dev["device"] for dev in d["rows"][0]["fit"]["devices"]] == ["RAM"]


# ---------------------------------------------------------------------------------------------------------------
# Files: a GGUF, a split GGUF, a folder, a config.json
# ---------------------------------------------------------------------------------------------------------------
def write_gguf(path: Path, header: bytes) -> int:
    """The header, then as many bytes as its tensors take (a sparse file: the reader never looks at them)."""
    size = gh.read_gguf(header).file_size_estimate()
    with open(path, "wb") as f:
        f.write(header)
        f.truncate(size)
    return size


TINY = rf.tiny_model()  # 4 layers, 8 heads of 512 / 8 = 64, 2 KV heads
TINY_KV_PER_TOKEN = 2 * 4 * 2 * 64 * 2  # K and V, f16: 2,048 B


@pytest.fixture
def tiny_gguf(tmp_path) -> Path:
    path = tmp_path / "tiny-llama-Q4_K_M.gguf"
    write_gguf(path, rf.tiny_header(vocab_tokens=1000))
    return path


def test_gguf_file(capsys, tiny_gguf):
    d = run_json(capsys, tiny_gguf, "--machine", "rtx3060")
    (row,) = d["rows"]
    header = gh.read_gguf(tiny_gguf)
    assert row["source"] == {"kind": "gguf", "name": "tiny-llama-Q4_K_M.gguf"}
    assert row["model"]["layers"] == 4 and row["model"]["quant"] is None  # the file's own types
    assert row["model"]["weights_bytes"] == header.weights_bytes
    assert row["model"]["file_bytes"] == tiny_gguf.stat().st_size
    assert row["model"]["kv_bytes_per_token"] == TINY_KV_PER_TOKEN
    assert row["settings"]["n_ctx"] == 8192 and row["fit"]["kv_bytes"] == 8192 * TINY_KV_PER_TOKEN
    assert row["command"] == f"llama-server -m {tiny_gguf} -c 8192 -fa on"  # the file itself
    code, out, _ = run(capsys, tiny_gguf, "--machine", "rtx3060")
    assert code == 0 and out.startswith("Tiny Llama (its own tensor types) on RTX 3060")
    assert "tensor types: Q6_K 0.04 GB, Q4_K 0.03 GB, F32 0.00 GB" in out  # the file's (output Q6_K, rest Q4_K)
    # what the header lacks, once for the blocks it concerns (not once per block)
    assert out.count("attention.key_length missing") == 1 and "4 blocks (0 to 3): attention.key_length" in out


def split_files(folder: Path) -> list:
    paths = []
    for i, part in enumerate(rf.split_headers()):
        p = folder / rf.SPLIT.format(i + 1)
        write_gguf(p, part)
        paths.append(p)
    return paths


def test_split_gguf_read_as_one_model(capsys, tmp_path):
    paths = split_files(tmp_path)
    d = run_json(capsys, paths[1], "--machine", "rtx3060")  # any part names the model
    (row,) = d["rows"]
    want = sum(t.n_bytes for p in paths for t in gh.read_gguf(p).tensors)
    assert row["model"]["weights_bytes"] == want and row["model"]["layers"] == 4
    assert row["model"]["file_bytes"] == sum(p.stat().st_size for p in paths)
    assert f"-m {paths[0]} " in row["command"]  # llama.cpp loads the first part and finds the rest
    paths[2].unlink()
    code, out, err = run(capsys, paths[0])
    assert code == 2 and out == ""
    assert err == f"python -m enginelab: MODEL: {paths[0].name} is one of 3 parts; missing beside it: {paths[2].name}\n"


def test_folder_each_model_a_row(capsys, tmp_path, tiny_gguf):
    folder = tmp_path / "models"
    (folder / "big").mkdir(parents=True)
    tiny_gguf.rename(folder / tiny_gguf.name)
    split_files(folder / "big")
    write_gguf(folder / "mmproj-tiny-f16.gguf", rf.tiny_header(vocab_tokens=1000))
    (folder / "broken.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    (folder / "README.md").write_text("not a model")
    d = run_json(capsys, folder, "--machine", "rtx3060")
    by_name = {r["source"]["name"]: r for r in d["rows"]}
    assert sorted(by_name) == ["big/" + rf.SPLIT.format(1), "broken.gguf", "tiny-llama-Q4_K_M.gguf"]
    assert by_name["tiny-llama-Q4_K_M.gguf"]["fit"]["fits"]
    assert by_name["big/" + rf.SPLIT.format(1)]["model"]["layers"] == 4
    assert by_name["broken.gguf"]["error"].startswith("broken.gguf is not a GGUF model file we can read")
    assert d["skipped"] == ["mmproj-tiny-f16.gguf (a vision projector)"]
    code, out, _ = run(capsys, folder, "--machine", "rtx3060")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "3 models on RTX 3060 12 GB + DDR4 (measured profile)"
    assert lines[1].split() == [
        "file",
        "size",
        "fit",
        "-ngl",
        "VRAM",
        "GB",
        "RAM",
        "GB",
        "decode",
        "tok/s",
        "prefill",
        "tok/s",
    ]
    tiny_line = next(ln for ln in lines if ln.strip().startswith("tiny-llama-Q4_K_M.gguf"))
    row = by_name["tiny-llama-Q4_K_M.gguf"]
    assert "in VRAM" in tiny_line and cli.fmt.rate(row["speed"]["prefill"]["tok_s"]) in tiny_line
    assert "left out: mmproj-tiny-f16.gguf (a vision projector)" in out


CONFIG = {
    "model_type": "llama",
    "num_hidden_layers": 4,
    "hidden_size": 512,
    "intermediate_size": 1536,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "vocab_size": 32000,
    "max_position_embeddings": 16384,
}


def test_config_json(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIG))
    d = run_json(capsys, path, "--quant", "q8_0", "--machine", "rtx3060", "--ctx", "4096", "--kv", "q8_0")
    (row,) = d["rows"]
    assert row["source"]["kind"] == "config" and row["model"]["quant"] == "Q8_0"
    # q8_0 KV: 34 bytes per 32 values, so 2 x 4 layers x 2 heads x 64 = 1,024 values are 1,088 B per token
    assert row["model"]["kv_bytes_per_token"] == 1024 / 32 * 34
    assert row["fit"]["kv_bytes"] == 4096 * 1088
    assert row["model"]["weights_bytes"] == pm.weight_bytes(pm.model_from_hf_config(CONFIG), "Q8_0")["total"]
    # a folder holding only a config.json (a Hugging Face snapshot) reads it
    snap = tmp_path / "models--acme--Tiny-7B" / "snapshots" / "0123abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(CONFIG))
    d = run_json(capsys, snap)
    assert d["rows"][0]["model"]["name"] == "acme/Tiny-7B" and d["rows"][0]["model"]["quant"] == "Q4_K_M"


def test_unknown_architecture_is_a_warning(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**CONFIG, "model_type": "brand_new_arch"}))
    code, out, _ = run(capsys, path, "--machine", "rtx3060")
    assert code == 0
    warning = "  Warning: Architecture not verified: sizes approximate. model_type 'brand_new_arch' was read from"
    assert warning in out and out.index(warning) < out.index("Fit:")  # above the answer, as on the page
    d = run_json(capsys, path, "--machine", "rtx3060")
    assert d["rows"][0]["model"]["warnings"] == ["architecture not verified: sizes approximate"]
    assert d["rows"][0]["fit"]["fits"] and d["rows"][0]["speed"] is not None  # a warning, never a dead end
    assert run_json(capsys, "qwen3-8b")["rows"][0]["model"]["warnings"] == []


# ---------------------------------------------------------------------------------------------------------------
# Bad input: one line naming the argument, exit code 2, never a traceback
# ---------------------------------------------------------------------------------------------------------------
BAD = [
    (["nope-7b"], "MODEL: 'nope-7b' is not a catalog model"),
    (
        ["qwen3-7b"],
        "MODEL: 'qwen3-7b' is not a catalog model, a file or folder, or a Hugging Face owner/repo; did you mean",
    ),
    (["qwen3-8b", "--ctx", "abc"], "--ctx: 'abc' is not a whole number"),
    (["qwen3-8b", "--ctx", "-5"], "--ctx: '-5' is not a whole number"),
    (["qwen3-8b", "--ctx", "99999999999"], "--ctx: '99999999999' is not a whole number"),
    (["qwen3-8b", "--ctx", "40000k"], "--ctx: 40,960,000 is outside 0 to 33,554,432"),
    (["qwen3-8b", "--machine", "rtx9090"], "--machine: GPU 1 is left out: 'rtx9090' is neither a catalog card"),
    (["qwen3-8b", "--machine", "0gb-936gbs-71tf"], "--machine: GPU 1 is left out: '0gb-936gbs-71tf': 0 GB of memory"),
    (["qwen3-8b", "--machine", ""], "--machine: empty"),
    (["qwen3-8b", "--quant", "Q9_K"], "--quant: unknown quantization 'Q9_K'"),
    (["qwen3-8b", "--kv", "f8"], "--kv: 'f8' is not a KV cache type"),
    (["qwen3-8b", "--ngl", "lots"], "--ngl: 'lots' is not a whole number"),
    (["qwen3-8b", "--np", "0"], "--np: 0 is outside 1 to 65,536"),
    (["qwen3-8b", "--profile", "fast"], "--profile: 'fast'; allowed: measured, course"),
    (["qwen3-8b", "--build", "not-a-build"], "--build: "),
    (["qwen3-8b", "--bogus"], "unrecognized arguments: --bogus"),
    ([], "the following arguments are required: MODEL"),
]


@pytest.mark.parametrize(("argv", "start"), BAD, ids=[" ".join(a) or "no-args" for a, _ in BAD])
def test_bad_arguments(capsys, argv, start):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith(f"python -m enginelab: {start}")
    assert err.count("\n") == 1 and "Traceback" not in err


def test_bad_files(capsys, tmp_path, tiny_gguf):
    cases = []
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    cases.append(([text], f"MODEL: {text} is neither a .gguf file nor a config.json"))
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny_gguf.read_bytes()[:5000])
    cases.append(([cut], "MODEL: cut.gguf is not a GGUF model file we can read: "))
    cfg = tmp_path / "config.json"
    cfg.write_text('{"model_type": "llama", "num_hidden_layers": ')
    cases.append(([cfg], f"MODEL: {cfg}: config.json: not valid JSON (line 1"))
    cfg2 = tmp_path / "bad" / "config.json"
    cfg2.parent.mkdir()
    cfg2.write_text(json.dumps({**CONFIG, "num_hidden_layers": -1}))
    cases.append(([cfg2], f"MODEL: {cfg2}: num_hidden_layers"))
    empty = tmp_path / "empty"
    empty.mkdir()
    cases.append(([empty], f"MODEL: no GGUF model (and no config.json) in the folder {empty}"))
    cases.append(([tiny_gguf, "--quant", "Q8_0"], "--quant: a GGUF file uses its own tensor types"))
    for argv, start in cases:
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == "", argv
        assert err.startswith(f"python -m enginelab: {start}"), (argv, err)
        assert err.count("\n") == 1 and "Traceback" not in err


def test_control_characters_in_a_name_do_not_reach_the_terminal(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**CONFIG, "_name_or_path": "evil\x1b[2J\x07name"}))
    code, out, _ = run(capsys, path)
    assert code == 0 and "\x1b" not in out and "\x07" not in out and "evil?[2J?name" in out


# ---------------------------------------------------------------------------------------------------------------
# A Hugging Face repo, over a mocked urllib (tests/remote_fixtures.py's fake Hub; nothing leaves the machine)
# ---------------------------------------------------------------------------------------------------------------
class FakeResponse(io.BytesIO):
    def __init__(self, status, body, headers):
        super().__init__(body)
        self.status = status
        self.headers = headers


@pytest.fixture
def hub(monkeypatch):
    """urlopen answering from the fake Hub; the URLs asked for, in order."""
    site = rf.site()
    asked = []

    def urlopen(req, timeout=None):
        url = req.full_url
        asked.append((url, req.get_header("Range")))
        assert url in site, f"the CLI asked for a URL the fake Hub does not serve: {url}"
        start = end = None
        rng = req.get_header("Range")
        if rng:
            start, end = (int(x) for x in rng.removeprefix("bytes=").split("-"))
        status, body, size = rf.serve(site[url], start, end, None)
        if status >= 400:
            raise urllib.error.HTTPError(url, status, "error", {}, io.BytesIO(body))
        headers = {"Content-Length": str(len(body))}
        if status == 206:
            headers["Content-Range"] = f"bytes {start}-{start + len(body) - 1}/{size}"
        return FakeResponse(status, body, headers)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    return asked


def test_hf_repo_reads_one_gguf_header(capsys, hub):
    d = run_json(capsys, rf.REPO, "--machine", "rtx3060")
    (row,) = d["rows"]
    assert row["source"] == {"kind": "hf-gguf", "name": f"{rf.REPO}/{rf.FILE}"}  # the repo's Q4_K_M by default
    assert row["model"]["layers"] == 4 and row["model"]["kv_bytes_per_token"] == TINY_KV_PER_TOKEN
    assert row["model"]["file_bytes"] == rf.TINY_SIZE  # as the listing says
    assert row["command"] == f"llama-server -hf {rf.REPO} -hff {rf.FILE} -c 8192 -fa on"
    assert any(rf.SPLIT.format(1) in n for n in row["notes"])  # the other files, to pick with :TAG
    # the listing once, then the header in growing Range slices from byte 0, never the weights
    assert hub[0] == (f"https://huggingface.co/api/models/{rf.REPO}/tree/main?recursive=true", None)
    ranges = [r for _u, r in hub[1:]]
    assert ranges[0] == "bytes=0-1048575" and all(r is not None for r in ranges)
    assert int(ranges[-1].split("-")[1]) < 8 << 20


def test_hf_tag_picks_the_file_and_a_split_model(capsys, hub):
    d = run_json(capsys, f"{rf.REPO}:Q8_0")
    assert d["rows"][0]["source"]["name"] == f"{rf.REPO}/tiny-llama-Q8_0.gguf"
    hub.clear()
    d = run_json(capsys, f"{rf.REPO}:big-llama-Q8_0")
    row = d["rows"][0]
    assert row["source"]["name"] == f"{rf.REPO}/{rf.SPLIT.format(1)}"
    assert row["model"]["file_bytes"] == sum(rf.SPLIT_SIZES)
    assert {u.rsplit("/", 1)[1] for u, _r in hub[1:]} == {rf.SPLIT.format(i) for i in (1, 2, 3)}
    code, _out, err = run(capsys, f"{rf.REPO}:Q2_K")
    assert code == 2 and err.startswith("python -m enginelab: MODEL: no GGUF file in the repo is tagged 'Q2_K'")


def test_hf_repo_without_gguf_reads_config_json(capsys, hub):
    d = run_json(capsys, rf.CONFIG_REPO, "--quant", "Q5_K_M")
    row = d["rows"][0]
    assert row["source"]["kind"] == "hf-config" and row["model"]["quant"] == "Q5_K_M"
    assert row["model"]["layers"] == 4 and row["model"]["kv_bytes_per_token"] == TINY_KV_PER_TOKEN


def test_hf_repo_read_from_inside_a_running_event_loop(capsys, hub):
    """main() called where an event loop already runs (a notebook's kernel, or a browser test's thread): the
    remote read runs in a thread of its own and gives the same row."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    async def inside():
        return run_json(capsys, rf.REPO, "--machine", "rtx3060")

    with ThreadPoolExecutor(1) as pool:  # a thread of the test's own, whatever loop this one runs
        (row,) = pool.submit(asyncio.run, inside()).result()["rows"]
    assert row["source"] == {"kind": "hf-gguf", "name": f"{rf.REPO}/{rf.FILE}"}
    assert row["model"]["kv_bytes_per_token"] == TINY_KV_PER_TOKEN


def test_hf_failures_are_one_line(capsys, hub, monkeypatch):
    code, out, err = run(capsys, rf.GATED_REPO)
    assert code == 2 and out == "" and err.startswith("python -m enginelab: MODEL: ")
    assert "HTTP 401" in err and err.count("\n") == 1

    def offline(req, timeout=None):
        raise urllib.error.URLError(OSError(-3, "Temporary failure in name resolution"))

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    code, out, err = run(capsys, "unsloth/Qwen3-8B-GGUF")
    assert code == 2 and out == ""
    assert err.startswith("python -m enginelab: MODEL: could not reach huggingface.co (")
    assert err.endswith("reading a Hugging Face repo needs a network\n")

    def stalled(req, timeout=None):
        raise TimeoutError("timed out")

    monkeypatch.setattr(urllib.request, "urlopen", stalled)
    code, _out, err = run(capsys, "https://files.example.org/models/x.gguf")
    assert code == 2 and err == "python -m enginelab: MODEL: files.example.org did not answer within 20 s\n"


# ---------------------------------------------------------------------------------------------------------------
# The module runs as `python -m enginelab`
# ---------------------------------------------------------------------------------------------------------------
def test_python_dash_m(tmp_path):
    env = {"PYTHONPATH": str(ROOT / "pylib"), "PATH": "/usr/bin:/bin"}
    ok = subprocess.run(
        [sys.executable, "-m", "enginelab", "qwen3-8b", "--json"], capture_output=True, text=True, env=env, timeout=60
    )
    assert ok.returncode == 0 and json.loads(ok.stdout)["rows"][0]["model"]["layers"] == 36
    bad = subprocess.run(
        [sys.executable, "-m", "enginelab", "qwen3-8b", "--np", "x"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert (
        bad.returncode == 2
        and bad.stdout == ""
        and bad.stderr == "python -m enginelab: --np: 'x' is not a whole number\n"
    )


HOSTILE = ["", " ", "-1", "1e9", "nan", "0x10", "9" * 400, "x" * 10_000, "\x00", "\x1b[31m", "auto", "١٢٣"]
OPTIONS = ["--machine", "--quant", "--ctx", "--kv", "--ngl", "--n-cpu-moe", "--np", "--profile", "--build"]


@pytest.mark.parametrize("option", OPTIONS)
def test_hostile_option_values(capsys, option):
    """Any text for any option: an answer (exit 0) or one line naming the option (exit 2), never a traceback, and
    no control character echoed to the terminal."""
    for value in HOSTILE:
        code, out, err = run(capsys, "qwen2.5-0.5b", option, value)
        assert code in (0, 2), (option, value)
        if code == 2:
            assert out == "" and err.startswith(f"python -m enginelab: {option}: "), (option, value, err)
            assert err.count("\n") == 1 and len(err) < 2000
        assert "\x1b" not in out + err and "\x00" not in out + err


@pytest.mark.parametrize("model", ["", "\x00", "x" * 10_000, "../../..", "a/b/c", "owner/repo:", "https://", "://x"])
def test_hostile_model_values(capsys, model, monkeypatch):
    def no_network(req, timeout=None):
        raise AssertionError("no request should be made")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    code, out, err = run(capsys, model)
    assert code == 2 and out == "" and err.startswith("python -m enginelab: MODEL: ")
    assert err.count("\n") == 1 and len(err) < 2000


def test_hf_progress_on_a_terminal_only(capsys, hub, monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    with monkeypatch.context() as mp:
        mp.setattr(sys, "stderr", tty)
        assert cli.main([rf.REPO, "--json"]) == 0
    lines = tty.getvalue().split("\r\x1b[K")
    assert any(ln.startswith("Read 1.00 MiB of a 4.9 GB file") for ln in lines)
    assert lines[-1] == ""  # the line is cleared before the answer
    capsys.readouterr()
    assert cli.main([rf.REPO, "--json"]) == 0
    assert capsys.readouterr().err == ""  # not a terminal: nothing on stderr


def test_a_closed_pipe_is_not_an_error():
    """`python -m enginelab ... | head -1`: the reader closes the pipe; no traceback, exit 0."""
    env = {"PYTHONPATH": str(ROOT / "pylib"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "enginelab", "qwen3-8b"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    proc.stdout.close()  # before the answer is written (the import alone takes longer)
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 0 and err == ""
