"""GGUF file sizes against the files published on Hugging Face (data/sizes/hf_gguf_files.csv), and model sizes
as llama.cpp itself printed them (data/sizes/llama_cpp_model_sizes.csv).

Our size is computed tensor by tensor from llama-quantize's rules (enginelab.ggml) plus the GGUF header
(mostly the tokenizer); a dense file that differs by more than 0.5%, or a MoE file by more than 1%, means a rule
is wrong."""

import csv
from pathlib import Path

import pytest

import perf_model as pm
from enginelab import ggml

DATA = Path(__file__).resolve().parents[1] / "data/sizes"
ROWS = list(csv.DictReader((DATA / "hf_gguf_files.csv").open()))
PRINTED = list(csv.DictReader((DATA / "llama_cpp_model_sizes.csv").open()))
FILE_QUANT = {"Q2_K": "Q2_K_MIX", "MXFP4": "MXFP4_MOE"}  # file names -> our quant names
GIB = 2**30
# The 2025-2026 architectures of issue 31 are held to its targets: 1% dense, 2% MoE
NEW_ARCHS = {
    "qwen3.6-35b-a3b",
    "glm-4.7-flash",
    "nemotron-3-nano-30b-a3b",
    "gemma-4-31b",
    "lfm2.5-2.6b",
    "qwen3.5-27b",
    "gemma-4-26b-a4b",
    "gemma-4-e4b",
    "deepseek-v3.2",
    "kimi-k2.5",
    "llama-4-maverick",
}
# Rows beyond the target, with what is known of the cause (data/sizes/README.md). Q8_0 and BF16 of GLM-4.7-Flash
# match to 0.01% (the tensor inventory is right); its k-quant mixes are all under bartowski's (Q6_K -0.9%, Q4_K_M
# -1.8%, Q4_K_S -4.0%): some tensors get larger types in that build than the rules give here.
KNOWN_GAPS = {
    ("glm-4.7-flash", "Q4_K_S"): "Q4_K_S 4.0% under bartowski's (b7779): the tensor types differ, cause not found",
    ("qwen3.5-27b", "Q3_K_M"): "Q3_K_M 3.9% under bartowski's (as quoted by a third party): cause not yet found",
}


def _quant(row):
    return FILE_QUANT.get(row["file_quant"], row["file_quant"])


def test_the_table_covers_moe_dense_and_the_squeeze_presets():
    models = {r["model_key"] for r in ROWS}
    assert {"qwen3-30b-a3b", "gpt-oss-20b", "gpt-oss-120b", "glm-4.5-air", "llama-3.1-8b", "mistral-7b-v0.3"} <= models
    quants = {r["file_quant"] for r in ROWS}
    assert {"IQ2_XS", "IQ2_M", "IQ3_XXS", "IQ3_M", "IQ4_XS", "Q2_K", "Q3_K_M", "Q8_0", "MXFP4"} <= quants
    assert all(r["source"].startswith("https://huggingface.co/") for r in ROWS)
    assert all(r["imatrix"] in ("yes", "no") for r in ROWS)


def _marked(row):
    gap = KNOWN_GAPS.get((row["model_key"], row["file_quant"]))
    return pytest.param(row, marks=pytest.mark.xfail(strict=True, reason=gap)) if gap else row


@pytest.mark.parametrize(
    "row", [_marked(r) for r in ROWS], ids=lambda r: f"{r['model_key']}-{r['file_quant']}-{r['hf_repo'].split('/')[0]}"
)
def test_file_size(row):
    m = pm.MODELS[row["model_key"]]
    ours = pm.file_bytes(m, _quant(row), imatrix=row["imatrix"] == "yes")
    if row["model_key"] in NEW_ARCHS:
        rel = 0.02 if m.is_moe else 0.01
    else:
        rel = 0.01 if m.is_moe else 0.005
    assert ours == pytest.approx(int(row["size_bytes"]), rel=rel)


def test_the_new_architectures_have_published_files():
    assert {"glm-4.7-flash", "qwen3.5-27b", "qwen3.6-35b-a3b"} <= {r["model_key"] for r in ROWS} & NEW_ARCHS


def test_moe_files_within_two_percent_by_tensor_data_alone():
    # even without the header, the tensor data of the MoE files (the MTP block llama.cpp skips included) is
    # within 2% of the whole file
    for r in ROWS:
        m = pm.MODELS[r["model_key"]]
        if m.is_moe and (r["model_key"], r["file_quant"]) not in KNOWN_GAPS:
            plan = ggml.quantize_plan(m, _quant(r), imatrix=r["imatrix"] == "yes", file=True)
            assert sum(x["bytes"] for x in plan) == pytest.approx(int(r["size_bytes"]), rel=0.02)


def test_printed_sizes_table_is_sourced():
    assert {r["model_key"] for r in PRINTED} == {"mixtral-8x7b", "glm-4.5-air", "qwen3.5-27b"}
    assert all(r["source"].startswith("https://") for r in PRINTED)


@pytest.mark.parametrize("row", PRINTED, ids=lambda r: f"{r['model_key']}-{r['quant']}")
def test_model_size_as_llama_cpp_printed_it(row):
    # llama.cpp's "model size" is the tensor data of the whole file (every tensor, loaded or not), in GiB with
    # 2 or 3 decimals. A row made before a later rule change names the type attn_output had then.
    m = pm.MODELS[row["model_key"]]
    plan = ggml.quantize_plan(m, row["quant"], imatrix=False, file=True)
    total = 0
    for r in plan:
        if r["cls"] == "attn_output" and row["attn_output_then"]:
            total += ggml.tensor_bytes(ggml.Tensor(r["name"], r["ne"], r["cls"], r["layer"]), row["attn_output_then"])
        else:
            total += r["bytes"]
    # the printed value is rounded; 0.1% is well below the smallest rule change tested here (attn_output
    # Q4_K -> Q5_K in Mixtral's Q3_K_M: 0.06 GiB of 20.9, 0.3%)
    assert total / GIB == pytest.approx(float(row["size_gib"]), rel=0.001)
