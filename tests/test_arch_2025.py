"""The 2025 architectures (issue 16): Gemma 3, Llama 4, DeepSeek V2/V3 (MLA), Qwen3-Next (hybrid), GLM-4.5,
gpt-oss 20b/120b.

- KV per token and per context derived by hand for each (the arithmetic is in the comments);
- every row of data/lab/load_logs.csv (real llama.cpp load logs, 2026-08 build, of synthetic GGUFs with the
  real tensor shapes): the KV cache per kind of layer (cells, layers, MiB as the llama_kv_cache and
  llama_memory_recurrent lines print them) and the model buffers (CPU_REPACK and CPU_Mapped), from a Model read
  from a config.json and from a GGUF header written the way data/lab/tools/synth_gguf.py wrote the files;
- placement puts each block's cache with its block; decode reads follow each kind of block.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz_pipeline as fz  # noqa: E402

import perf_model as pm  # noqa: E402
from enginelab import blocks as eb  # noqa: E402
from enginelab.ggml import GGML_TYPES, GGML_TYPES_BY_ID  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "data" / "lab"
MiB = 1 << 20
ROUND = 0.005 * MiB  # the logs print MiB with two decimals


# ---------------------------------------------------------------------------------------------------------------
# KV per token, by hand
# ---------------------------------------------------------------------------------------------------------------
def test_gemma3_27b_kv_by_hand():
    m = pm.MODELS["gemma-3-27b"]
    # K and V, 16 KV heads x head_dim 128, f16: 2 x 16 x 128 x 2 B = 8,192 B per token per layer
    assert pm.kv_bytes_per_token_layer(m) == 2 * 16 * 128 * 2 == 8192
    # 62 layers, a global one every 6th (il % 6 == 5: 5, 11, ..., 59): 10 global, 52 sliding
    kinds = [m.layer_kind(il) for il in range(62)]
    assert kinds.count("full") == 10 and kinds.count("swa") == 52 and kinds[5] == "full" and kinds[60] == "swa"
    # a sliding layer's cache: PAD(min(n_ctx, 1024 + 512), 256) = 1,536 cells at -c 32768
    assert pm.kv_cells(m, 0, 32768) == 1536
    # 8,192 x (10 x 32,768 + 52 x 1,536) = 8,192 x 407,552 = 3,338,665,984 B
    total = sum(r["bytes"] for r in pm.kv_allocation(m, 32768))
    assert total == 8192 * (10 * 32768 + 52 * 1536) == 3_338_665_984
    # the textbook count holds each sliding layer's window exactly: 8,192 x (10 x 32,768 + 52 x 1,024)
    assert pm.kv_cache_bytes(m, 32768) == 8192 * (10 * 32768 + 52 * 1024)


def test_gemma3_4b_and_12b_kv_by_hand():
    m4, m12 = pm.MODELS["gemma-3-4b"], pm.MODELS["gemma-3-12b"]
    # 4B: 2 x 4 x 256 x 2 = 4,096 B; 34 layers: 5 global (5, 11, 17, 23, 29), 29 sliding
    assert pm.kv_bytes_per_token_layer(m4) == 4096
    assert [r["layers"] for r in pm.kv_allocation(m4, 8192)] == [5, 29]
    # 12B: 2 x 8 x 256 x 2 = 8,192 B; 48 layers: 8 global, 40 sliding of 1,536 cells
    rows = pm.kv_allocation(m12, 131072)
    assert [(r["kind"], r["layers"], r["cells"]) for r in rows] == [("full", 8, 131072), ("swa", 40, 1536)]
    assert sum(r["bytes"] for r in rows) == 8192 * (8 * 131072 + 40 * 1536)


def test_llama4_scout_kv_by_hand():
    m = pm.MODELS["llama-4-scout"]
    # 2 x 8 KV heads x 128 x 2 B = 4,096 B per token per layer
    assert pm.kv_bytes_per_token_layer(m) == 4096
    # 48 layers, chunked attention on 3 of every 4 (il % 4 != 3): 36 chunked, 12 global
    assert [m.layer_kind(il) for il in range(4)] == ["swa", "swa", "swa", "full"]
    # chunk 8,192: PAD(min(32,768, 8,192 + 512), 256) = 8,704 cells; at -c 4096 the whole context (4,096)
    assert pm.kv_cells(m, 0, 32768) == 8704 and pm.kv_cells(m, 0, 4096) == 4096
    # 4,096 x (12 x 32,768 + 36 x 8,704) = 4,096 x 706,560 = 2,894,069,760 B
    assert sum(r["bytes"] for r in pm.kv_allocation(m, 32768)) == 2_894_069_760
    # its MoE: 16 experts, 1 routed + 1 shared expert per token; every block is MoE (interleave step 1)
    assert all(m.is_moe_layer(il) for il in range(48))
    names = {t.name for t in m.tensors() if t.layer == 0}
    assert {"blk.0.ffn_gate_shexp.weight", "blk.0.ffn_up_exps.weight"} <= names


def test_deepseek_v2_lite_mla_kv_by_hand():
    m = pm.MODELS["deepseek-v2-lite"]
    # MLA: the latent, kv_lora_rank 512 + qk_rope_head_dim 64 = 576 elements, K only: 576 x 2 B = 1,152 B
    assert m.is_mla and pm.kv_elements_per_token_layer(m) == 576
    assert pm.kv_bytes_per_token_layer(m) == 1152
    # 27 layers: 27 x 1,152 = 31,104 B per token; at -c 32768: 31,104 x 32,768 = 1,019,215,872 B (972 MiB)
    assert pm.kv_bytes_per_token(m) == 31104
    assert sum(r["bytes"] for r in pm.kv_allocation(m, 32768)) == 31104 * 32768 == 972 * MiB
    # per-head K and V would be 2 x 16 heads x 192 x 2 = 12,288 B per layer: the latent is 10.7x smaller
    assert 2 * 16 * 192 * 2 / 1152 > 10
    # one dense block (first_k_dense_replace 1), then 64 routed experts + 2 shared (2 x 1,408 wide)
    assert not m.is_moe_layer(0) and m.is_moe_layer(1)


def test_qwen3_next_kv_and_recurrent_state_by_hand():
    m = pm.MODELS["qwen3-next-80b-a3b"]
    # full attention every 4th block (il % 4 == 3): 12 of 48; the other 36 are gated delta nets
    assert [m.layer_kind(il) for il in range(4)] == ["recurrent"] * 3 + ["full"]
    assert len(pm.kv_layers(m)) == 12
    # attention: 2 x 2 KV heads x 256 x 2 B = 2,048 B per layer; 12 layers: 24,576 B per token
    assert pm.kv_bytes_per_token(m) == 12 * 2048 == 24576
    # recurrent state per sequence per block, f32:
    #   r = (conv kernel 4 - 1) x (2 x 16 x 128 + 32 x 128) = 3 x 8,192 = 24,576
    #   s = 128 x 128 x 32 value heads = 524,288
    assert pm.recurrent_state_elements(m) == (24576, 524288)
    assert pm.recurrent_state_bytes(m) == 4 * (24576 + 524288) == 2_195_456
    # independent of the context, one per sequence: 36 x 2,195,456 = 79,036,416 B (75.375 MiB) per sequence
    for n_ctx in (4096, 262144):
        rec = [r for r in pm.kv_allocation(m, n_ctx, n_seq=2) if r["kind"] == "recurrent"][0]
        assert rec["layers"] == 36 and rec["bytes"] == 2 * 36 * 2_195_456


def test_glm45_air_and_gpt_oss_120b_kv_by_hand():
    glm = pm.MODELS["glm-4.5-air"]
    # 2 x 8 x 128 x 2 = 4,096 B per layer, 46 layers (the MTP block is not loaded): 188,416 B per token
    assert pm.kv_bytes_per_token(glm) == 46 * 4096 == 188416
    assert not glm.is_moe_layer(0) and glm.is_moe_layer(1)  # first_k_dense_replace 1
    oss = pm.MODELS["gpt-oss-120b"]
    # 2 x 8 x 64 x 2 = 2,048 B per layer; 36 layers alternate sliding (window 128) and global
    # sliding cells: PAD(min(32,768, 128 + 512), 256) = 768; total 2,048 x (18 x 32,768 + 18 x 768)
    assert pm.kv_bytes_per_token_layer(oss) == 2048
    assert sum(r["bytes"] for r in pm.kv_allocation(oss, 32768)) == 2048 * (18 * 32768 + 18 * 768) == 1_236_271_104
    # 128 experts, 4 per token: 116.8B parameters, 5.1B active (OpenAI: 116.8B and 5.1B)
    assert round(oss.total_params() / 1e9, 1) == 116.8 and 5.0 < oss.active_params() / 1e9 < 5.3


def test_kv_cells_follow_llama_cpp_padding_and_streams():
    m = pm.MODELS["gemma-2-9b"]  # window 4,096
    assert pm.kv_cells(m, 1, 1000) == 1024  # a global layer: n_ctx padded to 256
    assert pm.kv_cells(m, 0, 8192) == 4608  # PAD(min(8,192, 4,096 + 512), 256)
    # -np 4 without --kv-unified: 4 streams of PAD(8,192 / 4, 256) = 2,048 cells; windows capped at that
    assert pm.kv_cells(m, 1, 8192, n_seq=4) == 4 * 2048 and pm.kv_cells(m, 0, 8192, n_seq=4) == 4 * 2048
    # --kv-unified: one stream of 8,192; the window grows to n_swa x n_seq + n_ubatch, capped at n_ctx
    assert pm.kv_cells(m, 0, 32768, n_seq=4, kv_unified=True) == 16896  # PAD(4 x 4,096 + 512, 256)
    assert pm.kv_cells(m, 0, 8192, n_seq=4, kv_unified=True) == 8192
    with pytest.raises(ValueError, match="^n_seq"):
        pm.kv_cells(m, 0, 8192, n_seq=0)


def test_placement_puts_each_cache_with_its_block():
    m = pm.MODELS["gemma-3-12b"]
    p = pm.place(m, "rtx3060", "Q4_K_M", n_ctx=32768, n_gpu_layers=24)
    gpu = sum(pm.kv_layer_bytes(m, il, 32768) for il in range(24))
    cpu = sum(pm.kv_layer_bytes(m, il, 32768) for il in range(24, 48))
    assert p.gpu_kv == gpu and p.cpu_kv == cpu
    # blocks 0-23 hold 4 global layers (5, 11, 17, 23) and 20 sliding ones
    assert gpu == 8192 * (4 * 32768 + 20 * 1536)
    # a hybrid: the recurrent blocks' states go with their blocks too, n_seq of them
    q = pm.MODELS["qwen3-next-80b-a3b"]
    p = pm.place(q, "rtx5090", "Q4_K_M", n_ctx=8192, n_gpu_layers=2, n_seq=3)
    assert p.gpu_kv == 2 * 3 * pm.recurrent_state_bytes(q)  # blocks 0 and 1 are recurrent


def test_decode_reads_follow_each_kind_of_block():
    # MLA: the latent per cached token; recurrent: the state read and written; sliding: the window
    ds = pm.MODELS["deepseek-v2-lite"]
    assert pm.decode_kv_read_bytes(ds, 5, 10000) == 1152 * 10000
    q = pm.MODELS["qwen3-next-80b-a3b"]
    assert pm.decode_kv_read_bytes(q, 0, 10000) == 2 * pm.recurrent_state_bytes(q)
    assert pm.decode_kv_read_bytes(q, 3, 10000) == 2048 * 10000
    g = pm.MODELS["gemma-3-27b"]
    assert pm.decode_kv_read_bytes(g, 0, 10000) == 8192 * 1024
    p = pm.place(q, "rtx5090", "Q4_K_M", n_ctx=16384, n_gpu_layers=49)
    d = pm.decode_step_time(p, context=16000)
    want = sum(pm.decode_kv_read_bytes(q, il, 16000) for il in range(48))
    assert d["gpu_kv_bytes"] == pytest.approx(want)
    # the weights read: every dense tensor (attention, shared expert, router) and 10 of 512 experts
    exps = sum(r["bytes"] for r in pm.quantize_plan(q, "Q4_K_M") if r["cls"].endswith("_exps"))
    assert d["gpu_weight_bytes"] < pm.weight_bytes(q, "Q4_K_M")["total"] - exps * (1 - 10 / 512) + 1
    # bandwidth bound: tokens/s x bytes per token never exceeds the GPU's bandwidth
    assert d["tok_per_s"] * d["gpu_bytes"] <= pm.MACHINES["rtx5090"].gpu.bandwidth


# ---------------------------------------------------------------------------------------------------------------
# The real llama.cpp load logs (data/lab/load_logs.csv)
# ---------------------------------------------------------------------------------------------------------------
CONFIGS = {  # load_logs.csv arch -> (data/lab/configs file, layers in the file, HF model_type)
    "deepseek2": ("deepseek-v2-lite", 4, "deepseek_v2"),
    "gemma2": ("gemma-2-2b", 26, "gemma2"),
    "gemma3": ("gemma-3-1b", 26, "gemma3_text"),
    "glm4moe": ("glm-4.5-air", 3, "glm4_moe"),
    "gpt-oss": ("gpt-oss-20b", 24, "gpt_oss"),
    "llama": ("llama-3.1-8b", 32, "llama"),
    "llama4": ("llama-4-scout", 4, "llama4_text"),
    "qwen3next": ("qwen3-next-80b-a3b", 4, "qwen3_next"),
    "qwen2": ("qwen2.5-1.5b", 28, "qwen2"),
}
GGUF_ARCH = {"gpt-oss": "gpt-oss", "llama": "llama"}
QUANTIZED = ("llama", "qwen2")  # files made by llama-quantize (its Q4_K_M mix, its tensor order)
# How each file's weights were written (data/lab/README.md): matrices in one type, norms and routers F32
FILE_TYPES = {
    "deepseek2": "Q4_0",
    "gemma2": "Q8_0",
    "gemma3": "Q8_0",
    "glm4moe": "Q4_0",
    "gpt-oss": "MXFP4-MOE",
    "llama": "Q4_K_M",  # llama-quantize's mix
    "qwen2": "Q4_K_M",
    "llama4": "Q4_0",
    "qwen3next": "Q4_0",
}
# Each log's "print_info: file size" line: the tensors' bytes (llama_model_loader n_bytes), GiB or MiB
FILE_SIZE_LINE = {
    "deepseek2": ("GiB", 1.18),
    "gemma2": ("GiB", 2.59),
    "gemma3": ("MiB", 1013.54),
    "glm4moe": ("GiB", 3.23),
    "gpt-oss": ("GiB", 12.83),
    "llama": ("GiB", 4.58),
    "llama4": ("GiB", 5.70),
    "qwen3next": ("GiB", 3.79),
    "qwen2": ("MiB", 934.69),
}


def lab_rows():
    with open(LAB / "load_logs.csv", newline="") as f:
        return list(csv.DictReader(f))


def hf_config(arch: str) -> dict:
    name, layers, mt = CONFIGS[arch]
    cfg = dict(json.loads((LAB / "configs" / f"{name}.json").read_text())["hf"])
    cfg.pop("layer_types", None)  # gpt-oss's is a description in this file; the default (alternating) holds
    cfg.update(model_type=mt, num_hidden_layers=layers)
    return cfg


def _synth_type(arch: str, t) -> str:
    """synth_gguf.py's qtype(): norms (1-D, biases, routers, conv) F32, else the file's type; a row that is not
    a whole number of blocks falls back to F16."""
    mode = FILE_TYPES[arch]
    if len(t.ne) < 2 or t.cls in ("norm", "bias", "ffn_gate_inp"):
        return "F32"
    if mode == "MXFP4-MOE":
        typ = "MXFP4" if t.cls.endswith("_exps") else "F16"
    else:
        typ = mode
    return typ if t.ne[0] % GGML_TYPES[typ].block_size == 0 else "F16"


def synth_gguf_header(arch: str) -> bytes:
    """The header data/lab/tools/synth_gguf.py wrote for this arch (its GGUF keys; the tensors of our inventory in
    its types). The tokenizer is left out: vocab_size says the vocabulary's size."""
    cfg = hf_config(arch)
    m = pm.model_from_hf_config(cfg)
    a = GGUF_ARCH.get(arch, arch)
    E, H, L = m.hidden_size, m.num_attention_heads, m.num_hidden_layers
    kv = [
        ("general.architecture", "str", a),
        ("general.name", "str", f"{arch} synthetic"),
        (f"{a}.context_length", "u32", m.max_position_embeddings),
        (f"{a}.embedding_length", "u32", E),
        (f"{a}.block_count", "u32", L),
        (f"{a}.attention.head_count", "u32", H),
        (f"{a}.attention.head_count_kv", "u32", m.num_key_value_heads),
        (f"{a}.vocab_size", "u32", m.vocab_size),
        (f"{a}.feed_forward_length", "u32", m.intermediate_size),
    ]
    if cfg.get("head_dim") and cfg["head_dim"] != E // H:
        kv += [
            (f"{a}.attention.key_length", "u32", cfg["head_dim"]),
            (f"{a}.attention.value_length", "u32", cfg["head_dim"]),
        ]
    if m.is_moe:
        kv += [
            (f"{a}.expert_count", "u32", m.num_local_experts),
            (f"{a}.expert_used_count", "u32", m.num_experts_per_tok),
            (f"{a}.expert_feed_forward_length", "u32", m.moe_intermediate_size or m.intermediate_size),
        ]
    if arch in ("gemma2", "gemma3", "gpt-oss"):
        kv.append((f"{a}.attention.sliding_window", "u32", cfg["sliding_window"]))
    if arch == "llama4":
        kv.append((f"{a}.interleave_moe_layer_step", "u32", 1))
    if arch in ("deepseek2", "glm4moe"):
        kv += [
            (f"{a}.leading_dense_block_count", "u32", cfg["first_k_dense_replace"]),
            (f"{a}.expert_shared_count", "u32", cfg["n_shared_experts"]),
        ]
    if arch == "deepseek2":  # the MLA layout of current converters: one KV head of 576
        kv = [k for k in kv if k[0] != f"{a}.attention.head_count_kv"]
        kv += [
            (f"{a}.attention.head_count_kv", "u32", 1),
            (f"{a}.attention.kv_lora_rank", "u32", 512),
            (f"{a}.attention.q_lora_rank", "u32", 0),
            (f"{a}.rope.dimension_count", "u32", 64),
            (f"{a}.attention.key_length", "u32", 576),
            (f"{a}.attention.value_length", "u32", 512),
            (f"{a}.attention.key_length_mla", "u32", 192),
            (f"{a}.attention.value_length_mla", "u32", 128),
        ]
    if arch == "qwen3next":
        kv += [
            (f"{a}.expert_shared_feed_forward_length", "u32", 512),
            (f"{a}.ssm.conv_kernel", "u32", 4),
            (f"{a}.ssm.inner_size", "u32", 4096),
            (f"{a}.ssm.state_size", "u32", 128),
            (f"{a}.ssm.time_step_rank", "u32", 32),
            (f"{a}.ssm.group_count", "u32", 16),
            (f"{a}.full_attention_interval", "u32", 4),
        ]
    ids = {t.name: i for i, t in GGML_TYPES_BY_ID.items()}
    if arch in QUANTIZED:  # made by llama-quantize: its Q4_K_M mix
        tensors = [(r["name"], list(r["ne"]), ids[r["type"]]) for r in pm.quantize_plan(m, "Q4_K_M")]
    else:
        tensors = [(t.name, list(t.ne), ids[_synth_type(arch, t)]) for t in m.tensors()]
    return fz.gguf_bytes(kv, tensors)


_MODELS: dict = {}


def lab_model(arch: str, source: str) -> pm.Model:
    key = (arch, source)
    if key not in _MODELS:
        if source == "gguf":
            _MODELS[key] = pm.model_from_gguf(synth_gguf_header(arch))
        else:
            _MODELS[key] = pm.model_from_hf_config(hf_config(arch))
    return _MODELS[key]


_KV_LINE = re.compile(
    r"llama_kv_cache: size = +([\d.]+) MiB \( *(\d+) cells, +(\d+) layers, +(\d+)/(\d+) seqs\), "
    r"K \((\w+)\): +([\d.]+) MiB, V \((\w+)\): +([\d.]+) MiB"
)


def logged_caches(row) -> list:
    """(kind, cells, layers, MiB) per llama_kv_cache line of the row, in log order (iSWA: non-SWA first)."""
    out = []
    swa_next = False
    for part in row["kv_line"].split(" | "):
        if "creating     SWA" in part:
            swa_next = True
        elif "creating non-SWA" in part:
            swa_next = False
        m = _KV_LINE.search(part)
        if m:
            out.append(("swa" if swa_next else "attn", int(m[2]), int(m[3]), float(m[1])))
    return out


def _row_id(row):
    return f"{row['arch']}-c{row['n_ctx']}-np{row['n_seq']}-{row['type_k']}"


LAB_ROWS = lab_rows()


@pytest.mark.parametrize("source", ["config", "gguf"])
@pytest.mark.parametrize("row", LAB_ROWS, ids=[_row_id(r) for r in LAB_ROWS])
def test_kv_cache_matches_the_llama_cpp_load_log(row, source):
    m = lab_model(row["arch"], source)
    args = dict(n_ctx=int(row["n_ctx"]), kv_type=row["type_k"], n_seq=int(row["n_seq"]), n_ubatch=int(row["n_ubatch"]))
    alloc = pm.kv_allocation(m, **args)
    ours = {("swa" if r["kind"] == "swa" else "rs" if r["kind"] == "recurrent" else "attn"): r for r in alloc}
    for kind, cells, layers, mib in logged_caches(row):
        r = ours[kind]
        # llama.cpp prints cells per stream: ours are over all the row's streams (one per sequence)
        assert r["cells"] == cells * int(row["n_seq"]), (kind, r)
        assert r["layers"] == layers
        assert abs(r["bytes"] - mib * MiB) <= ROUND, (kind, r["bytes"] / MiB, mib)
    # the whole memory, the recurrent state included (the CSV's kv_bytes_total adds the RS buffer)
    total = sum(r["bytes"] for r in alloc)
    n_lines = len(logged_caches(row)) + (1 if "rs" in ours else 0)
    assert abs(total - float(row["kv_bytes_total"])) <= n_lines * ROUND
    # place() holds exactly that, all of it in RAM here (no GPU)
    p = pm.place(m, "cpu-ddr5", None if source == "gguf" else "Q4_0", **args)
    assert p.cpu_kv == pytest.approx(total)


# The tensors llama.cpp's CPU backend repacks on this AVX-512 machine (ggml-cpu repack.cpp): Q4_0, Q4_K, IQ4_NL and
# MXFP4 weights of a matmul (a 2-D matrix with rows in groups of 8) or an expert matmul (MUL_MAT_ID, 3-D); never
# token_embd (a row lookup) nor MLA's batched 3-D attn_k_b/attn_v_b.
REPACKED_TYPES = ("Q4_0", "Q4_K", "IQ4_NL", "MXFP4")


def repacked(r) -> bool:
    ne = r["ne"]
    if r["type"] not in REPACKED_TYPES or r["cls"] == "token_embd" or ne[1] % 8:
        return False
    return len(ne) == 2 or r["cls"].endswith("_exps")


# After the last tensor that stays in the mapping, these (repacked) ones end the file: the MoE blocks' experts and
# shared expert (synth_gguf.py's ffn_moe writes them last in a block).
_TRAILING = ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps", "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp")


@pytest.mark.parametrize("arch", sorted(CONFIGS))
def test_weight_buffers_match_the_llama_cpp_load_log(arch):
    rows = [r for r in LAB_ROWS if r["arch"] == arch]
    if arch in QUANTIZED:
        plan = pm.quantize_plan(lab_model(arch, "config"), "Q4_K_M")
    else:
        plan = pm.quantize_plan(lab_model(arch, "gguf"), None)  # the file's own types
    bufs = dict(kv.split("=") for kv in rows[0]["model_buffer_bytes_by_device"].split("; "))
    total = sum(r["bytes"] for r in plan)
    # every row of the arch logged the same buffers
    assert all(r["model_buffer_bytes_by_device"] == rows[0]["model_buffer_bytes_by_device"] for r in rows)
    # 1. CPU_REPACK: the repacked tensors' bytes (repacking keeps a tensor's size)
    repack = sum(r["bytes"] for r in plan if repacked(r))
    assert abs(repack - int(bufs.get("CPU_REPACK", 0))) <= ROUND, (repack / MiB, int(bufs.get("CPU_REPACK", 0)) / MiB)
    # 2. the "file size" line: all tensor bytes
    unit, value = FILE_SIZE_LINE[arch]
    scale = MiB if unit == "MiB" else 1 << 30
    assert abs(total / scale - value) <= 0.005, (total / scale, value)
    # 3. CPU_Mapped: the mapping spans the file's tensor data from the first tensor to the last one that is not
    #    repacked (padding to 32 bytes between tensors).
    pad = lambda n: -(-n // 32) * 32  # noqa: E731
    if arch in QUANTIZED:
        # llama-quantize writes the tensors in llama_model_loader's weights_map order: by block, then by name
        # (quantize_plan's order), so the file ends ... blk.31.ffn_norm (F32, mapped), blk.31.ffn_up (repacked)
        i = max(j for j, r in enumerate(plan) if not repacked(r))
        mapped = sum(pad(r["bytes"]) for r in plan[:i]) + plan[i]["bytes"]
        assert abs(mapped - int(bufs["CPU_Mapped"])) <= ROUND, (mapped / MiB, int(bufs["CPU_Mapped"]) / MiB)
        return
    # synth_gguf.py's order: token_embd, output_norm, output, then block by block
    last = max(r["layer"] for r in plan)
    trailing = sum(pad(r["bytes"]) for r in plan if r["layer"] == last and r["name"].split(".")[2] in _TRAILING)
    if arch not in ("deepseek2", "llama4"):
        trailing = 0  # their last block ends with a tensor that stays in the mapping (a bias or a norm)
    mapped = sum(pad(r["bytes"]) for r in plan) - trailing  # (the last tensor's own padding: < 32 bytes)
    assert abs(mapped - int(bufs["CPU_Mapped"])) <= ROUND + 32, (mapped / MiB, int(bufs["CPU_Mapped"]) / MiB)


# ---------------------------------------------------------------------------------------------------------------
# config.json and GGUF shapes as published
# ---------------------------------------------------------------------------------------------------------------
def test_multimodal_configs_read_their_text_config_with_transformers_defaults():
    # google/gemma-3-12b-it: the wrapper names gemma3, the text_config leaves head_dim and vocab_size out
    cfg = {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "text_config": {
            "hidden_size": 3840,
            "intermediate_size": 15360,
            "model_type": "gemma3_text",
            "num_attention_heads": 16,
            "num_hidden_layers": 48,
            "num_key_value_heads": 8,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "sliding_window": 1024,
        },
        "vision_config": {"hidden_size": 1152, "num_hidden_layers": 27},
    }
    m = pm.model_from_hf_config(cfg)
    ref = pm.MODELS["gemma-3-12b"]
    for f in ("num_hidden_layers", "head_dim", "vocab_size", "sliding_window", "sliding_window_pattern"):
        assert getattr(m, f) == getattr(ref, f), f
    assert pm.weight_bytes(m, "Q4_K_M")["total"] == pm.weight_bytes(ref, "Q4_K_M")["total"]
    # meta-llama/Llama-4-Scout-17B-16E-Instruct: model_type llama4 with a llama4_text text_config
    scout = dict(hf_config("llama4"), num_hidden_layers=48, model_type="llama4_text")
    m = pm.model_from_hf_config({"model_type": "llama4", "text_config": scout})
    assert m.model_type == "llama4" and m.chunked_attention and m.sliding_window == 8192
    assert m.total_params() == pm.MODELS["llama-4-scout"].total_params() - 64  # the catalog ships rope_freqs (64)
    # Kimi K2 is DeepSeek V3's architecture (MLA, exp_probs_b)
    k2 = dict(hf_config("deepseek2"), model_type="kimi_k2", q_lora_rank=1536)
    m = pm.model_from_hf_config(k2)
    assert m.model_type == "deepseek_v3" and m.is_mla and m.q_lora_rank == 1536
    assert any(t.name.endswith("exp_probs_b.bias") for t in m.tensors())


def test_glm_mtp_block_is_in_the_file_but_not_loaded():
    data = synth_gguf_header("glm4moe")  # 3 blocks
    m = pm.model_from_gguf(data)
    # the same file with a 4th block marked as the MTP block (nextn_predict_layers 1)
    kvs = [("general.architecture", "str", "glm4moe"), ("glm4moe.nextn_predict_layers", "u32", 1)]
    ids = {t.name: i for i, t in GGML_TYPES_BY_ID.items()}
    base = [(t.name, list(t.ne), ids[t.src_type]) for t in m.gguf_tensors]
    mtp = [(n.replace("blk.2.", "blk.3."), ne, tid) for n, ne, tid in base if n.startswith("blk.2.")]
    meta = [
        (f"glm4moe.{k}", "u32", v)
        for k, v in (
            ("block_count", 4),
            ("embedding_length", m.hidden_size),
            ("feed_forward_length", m.intermediate_size),
            ("attention.head_count", m.num_attention_heads),
            ("attention.head_count_kv", m.num_key_value_heads),
            ("attention.key_length", 128),
            ("vocab_size", m.vocab_size),
            ("expert_count", 128),
            ("expert_used_count", 8),
            ("expert_feed_forward_length", 1408),
            ("leading_dense_block_count", 1),
        )
    ]
    m4 = pm.model_from_gguf(fz.gguf_bytes(kvs + meta, base + mtp))
    assert m4.num_hidden_layers == 3 and len(m4.gguf_tensors) == len(m.gguf_tensors)
    assert pm.kv_bytes_per_token(m4) == 3 * 4096


# ---------------------------------------------------------------------------------------------------------------
# "How is this computed?": the KV cache by kind of layer
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "model, want",
    [
        ("gemma-3-12b", "(8 global layers × 32,768 cells + 40 sliding layers × 1,536 cells) × 8,192 B per cell"),
        ("llama-4-scout", "(12 global layers × 32,768 cells + 36 chunked layers × 8,704 cells)"),
        ("deepseek-v2-lite", "(27 MLA layers × 32,768 cells) × 1,152 B per cell (the latent: 512 + 64 elements"),
        ("qwen3-next-80b-a3b", "recurrent layers × 1 sequence × 2,195,456 B of state"),
    ],
)
def test_explain_shows_the_kv_cache_by_kind_of_layer(model, want):
    import html

    from enginelab import explain
    from enginelab.figures import calculator

    state, _ = calculator.SPEC.from_query(f"?model={model}&machine=cpu-ddr5&ctx=32768&profile=course")
    scn = calculator.compute(state)
    box = html.unescape(explain.explain(scn)["ram_gb"])
    assert want in box
    # the groups add up to the placement's KV bytes
    groups = explain.kv_groups(scn.model, scn.placement, range(scn.model.num_hidden_layers))
    assert sum(g[4] for g in groups) == pytest.approx(scn.placement.cpu_kv)


def test_several_gpus_hold_their_own_blocks_caches():
    # two RTX 3090s, layer split: each GPU's KV is the sum of its own blocks' caches, of each kind
    machine = pm.Machine("2 x RTX 3090", (pm.RTX_3090, pm.RTX_3090), pm.DDR5_DUAL, 31.5)
    for key in ("gemma-3-27b", "qwen3-next-80b-a3b", "deepseek-v2-lite"):
        m = pm.MODELS[key]
        p = pm.place(m, machine, "Q4_K_M", n_ctx=32768, n_seq=2)
        assert p.n_seq == 2
        for u in p.per_gpu:
            blocks = [il for il in u.layers if il < m.num_hidden_layers]
            assert u.kv == pytest.approx(sum(pm.kv_layer_bytes(m, il, 32768, n_seq=2) for il in blocks)), key
        total = sum(r["bytes"] for r in pm.kv_allocation(m, 32768, n_seq=2))
        assert p.gpu_kv + p.cpu_kv == pytest.approx(total)
        d = pm.decode_step_time(p, context=8000)
        want = sum(pm.decode_kv_read_bytes(m, il, 8000) for il in range(m.num_hidden_layers))
        assert sum(e["kv_bytes"] for e in d["devices"]) == pytest.approx(want)


# ---------------------------------------------------------------------------------------------------------------
# Published llama.cpp load logs of the 2026 catalog models (data/architectures/load_logs.csv), against the catalog's
# Model: the whole cache line (to 0.01 MiB, its two-decimal rounding) and, for a recurrent line, its R and S parts
# ---------------------------------------------------------------------------------------------------------------
ARCH_LOGS = list(csv.DictReader((ROOT / "data/architectures/load_logs.csv").open()))
LOG_MODEL = {  # the row's model (as it begins) -> the catalog key whose header the log prints
    "Qwen3.5/3.6-27B": "qwen3.5-27b",  # 64 blocks, 5120 wide, 24 heads, 4 KV heads x 256
    "Gemma 4 edge model": "gemma-4-e4b",  # 42 blocks, the last 18 sharing: E4B in llama.cpp's gemma4 table
    "Gemma 4 E4B": "gemma-4-e4b",
    # Qwen3.5-35B-A3B and Qwen3.6-35B-A3B share one config (40 blocks, 10 with attention, 2 KV heads x 256, 30
    # gated delta nets of 16 key / 32 value heads x 128); the catalog holds the 3.6 release
    "Qwen3.5-35B-A3B": "qwen3.6-35b-a3b",
    "Qwen3.6-35B-A3B": "qwen3.6-35b-a3b",
}
CATALOG_LOG_ROWS = [
    r for r in ARCH_LOGS if any(r["model"].startswith(p) for p in LOG_MODEL) and r["memory"] in ("kv", "kv_swa", "rs")
]
LOG_KIND = {"kv_swa": "swa", "rs": "recurrent"}  # the row's memory -> kv_allocation's kind ("kv": full or MLA)


def _catalog_key(row) -> str:
    return next(k for p, k in LOG_MODEL.items() if row["model"].startswith(p))


def _mib(row, col):
    return float(row[col]) * MiB


@pytest.mark.parametrize(
    "row",
    CATALOG_LOG_ROWS,
    ids=lambda r: f"{_catalog_key(r)}-{r['memory']}-{r['cells']}-{r['n_seq']}seq-{r['n_rs_seq']}rs",
)
def test_catalog_model_matches_the_published_load_log(row):
    m = pm.MODELS[_catalog_key(row)]
    n_seq, n_rs, cells = int(row["n_seq"]), int(row["n_rs_seq"]), int(row["cells"])
    args = dict(n_ctx=int(row["n_ctx"] or 4096), n_seq=n_seq, n_rs_seq=n_rs, swa_full=row["swa_full"] == "1")
    if row["n_ubatch"]:
        args["n_ubatch"] = int(row["n_ubatch"])
    if row["memory"] == "rs":
        # llama_memory_recurrent holds one cell per sequence (cells = n_seq), each with its state and n_rs_seq
        # rollback copies; the context does not enter
        rec = {r["kind"]: r for r in pm.kv_allocation(m, kv_type="f16", **args)}["recurrent"]
        assert rec["cells"] == cells == n_seq
        assert abs(rec["bytes"] - _mib(row, "size_mib")) <= ROUND
        assert eb.state_bytes(m.block_model, n_seq, n_rs) == rec["bytes"]
        # R (conv) and S (recurrent) separately, F32, from the blocks, where the line prints them
        states = n_seq * (1 + n_rs)
        if row["k_or_r_mib"]:
            r_el = sum(eb.state_elements(x)[0] for x in m.blocks)
            s_el = sum(eb.state_elements(x)[1] for x in m.blocks)
            assert abs(r_el * 4 * states - _mib(row, "k_or_r_mib")) <= ROUND
            assert abs(s_el * 4 * states - _mib(row, "v_or_s_mib")) <= ROUND
    else:
        # a KV line: its cells are per stream; "kv" is the global (non-SWA) cache, "kv_swa" the sliding one
        alloc = {r["kind"]: r for r in pm.kv_allocation(m, kv_type=row["type"], **args)}
        kv = alloc[LOG_KIND.get(row["memory"], "mla" if "mla" in alloc else "full")]
        if row["layers"]:
            assert kv["layers"] == int(row["layers"])
        if row["n_ctx"]:
            assert kv["cells"] == cells * n_seq
        else:  # a line without its run's -c / -ub: the blocks and their bytes per cell, at the cells it prints
            kv = dict(kv, bytes=kv["layers"] * kv["bytes_per_cell"] * cells)
        assert abs(kv["bytes"] - _mib(row, "size_mib")) <= ROUND
        for col in ("k_or_r_mib", "v_or_s_mib"):  # K and V alike in these models
            if row[col]:
                assert abs(kv["bytes"] / 2 - _mib(row, col)) <= ROUND


def test_rollback_states_multiply_the_recurrent_buffer():
    # hand-derived: Qwen3.6-35B-A3B's 30 delta nets keep R = 3 x (4096 + 2 x 16 x 128) = 24,576 and S = 128 x 4096
    # = 524,288 f32 per sequence: 30 x 548,864 x 4 B = 65,863,680 B (62.81 MiB); with n_rs_seq = 7 each of 2
    # sequences keeps 8 of them
    m = pm.MODELS["qwen3.6-35b-a3b"]
    per_seq = 30 * (24576 + 524288) * 4
    rec = [r for r in pm.kv_allocation(m, 8192, n_seq=2, n_rs_seq=7) if r["kind"] == "recurrent"][0]
    assert (rec["cells"], rec["bytes"]) == (2, 2 * 8 * per_seq)
    assert pm.kv_layer_bytes(m, 0, 8192, n_seq=2, n_rs_seq=7) == 2 * 8 * per_seq / 30
    # the attention blocks' cache does not change
    full = [r["bytes"] for r in pm.kv_allocation(m, 8192, n_rs_seq=7) if r["kind"] == "full"]
    assert full == [r["bytes"] for r in pm.kv_allocation(m, 8192) if r["kind"] == "full"] == [10 * 2 * 512 * 2 * 8192]
    with pytest.raises(ValueError, match="^n_rs_seq"):
        pm.kv_allocation(m, 8192, n_rs_seq=-1)
    # place() counts them on the device of each recurrent block: 7 more states of 2 sequences, all on one GPU
    args = dict(quant="Q4_K_M", n_ctx=8192, n_seq=2, n_gpu_layers=99)
    p0 = pm.place(m, pm.MACHINES["rtx5090"], **args)
    p7 = pm.place(m, pm.MACHINES["rtx5090"], n_rs_seq=7, **args)
    assert p7.n_rs_seq == 7 and p7.gpu_kv - p0.gpu_kv == 2 * 7 * per_seq
    with pytest.raises(ValueError, match="^n_rs_seq"):
        pm.place(m, pm.MACHINES["rtx5090"], n_rs_seq=True, **args)


# LFM2 of 16 blocks (LFM2-350M, LFM2-1.2B and the LFM2.5-Audio-1.5B backbone alike): conv, conv, attention, ... with
# attention at blocks 2, 5, 8, 10, 12, 14 (the n_head_kv array the logs print), short conv of 3 taps, tied, vocab 65,536
LFM2_TYPES = ["full_attention" if il in (2, 5, 8, 10, 12, 14) else "conv" for il in range(16)]


def _lfm2(hidden, heads, block_ff_dim):
    return pm.model_from_hf_config(
        {
            "model_type": "lfm2",
            "num_hidden_layers": 16,
            "layer_types": LFM2_TYPES,
            "hidden_size": hidden,
            "num_attention_heads": heads,
            "num_key_value_heads": 8,
            "conv_L_cache": 3,
            "block_ff_dim": block_ff_dim,
            "block_auto_adjust_ff_dim": True,
            "block_ffn_dim_multiplier": 1.0,
            "block_multiple_of": 256,
            "vocab_size": 65536,
            "tie_word_embeddings": True,
            "max_position_embeddings": 128000,
        }
    )


def _log_row(model_prefix, memory, size=None):
    return next(
        r
        for r in ARCH_LOGS
        if r["model"].startswith(model_prefix) and r["memory"] == memory and size in (None, r["size_mib"])
    )


def test_lfm2_350m_f16_tensor_bytes_match_the_log():
    # print_info's "file size" is the tensors' bytes (llama_model_loader::n_bytes).  LFM2-350M: 1024 wide, 16 heads,
    # n_ff 2 x 6656 / 3 rounded up to 256 = 4608.  F16 except the norms, the q/k norms and the 10 short convolutions
    # (3 x 1024 each), which convert_hf_to_gguf.py keeps in F32: with the convolutions in F16 the sum was 676.19 MiB
    row = _log_row("LFM2-350M", "file_size")
    m = _lfm2(1024, 16, 6656)
    plan = pm.quantize_plan(m, "F16")
    conv = [r for r in plan if "shortconv.conv" in r["name"]]
    assert [(r["type"], r["n_elements"]) for r in conv] == [("F32", 3 * 1024)] * 10
    assert abs(sum(r["bytes"] for r in plan) - _mib(row, "size_mib")) <= ROUND


def test_lfm2_audio_backbone_buffers_match_the_log():
    # LFM2.5-Audio-1.5B's backbone: 2048 wide, 32 heads, n_ff 2 x 12288 / 3 = 8192.  Q4_0 (llama-quantize keeps the
    # short convolutions F32 and puts the tied token_embd in Q6_K): 55 F32, 92 Q4_0 and 1 Q6_K tensors.  With
    # -ngl 99 the CPU keeps token_embd (65,536 x 2048 in Q6_K = 105.00 MiB) and the GPU holds the rest plus the
    # tied output's copy of it
    m = _lfm2(2048, 32, 12288)
    plan = pm.quantize_plan(m, "Q4_0")
    counts = {t: sum(1 for r in plan if r["type"] == t) for t in ("F32", "Q4_0", "Q6_K")}
    assert counts == {"F32": 55, "Q4_0": 92, "Q6_K": 1} and len(plan) == 148
    p = pm.place(m, pm.MACHINES["rtx3090"], "Q4_0", n_ctx=4096)
    assert p.output_on_gpu and p.n_gpu_layers == 17
    assert abs(p.cpu_weights - _mib(_log_row("LFM2.5-Audio", "model_buffer", "105.00"), "size_mib")) <= ROUND
    assert abs(p.gpu_weights - _mib(_log_row("LFM2.5-Audio", "model_buffer", "661.25"), "size_mib")) <= ROUND
    # the KV line: 6 attention blocks x 8 KV heads x 64 x (K + V) x 2 B x 4096 cells = 48 MiB
    kv = {r["kind"]: r for r in pm.kv_allocation(m, 4096)}
    assert kv["full"]["bytes"] == 6 * 8 * 64 * 2 * 2 * 4096 == _mib(_log_row("LFM2.5-Audio", "kv"), "size_mib")
    # (its RS line is not in the published excerpt: 10 conv blocks x 2048 x (3 - 1) x 4 B = 0.16 MiB)
    assert kv["recurrent"]["bytes"] == 10 * 2048 * 2 * 4


def test_qwen3_6_27b_host_buffer_is_its_token_embd():
    # Metal with mmap: the host's CPU_Mapped buffer is token_embd alone (248,320 x 5120 in Q4_K under Q4_K_M's
    # rules: 144 bytes per 256 weights = 682.03 MiB); MTL0_Mapped maps the rest of the file
    row = _log_row("Qwen3.5/3.6-27B (Qwen3.6-27B", "model_buffer")
    plan = pm.quantize_plan(pm.MODELS["qwen3.5-27b"], "Q4_K_M")
    embd = next(r for r in plan if r["name"] == "token_embd.weight")
    assert (embd["type"], embd["bytes"]) == ("Q4_K", 248320 * 5120 // 256 * 144)
    assert abs(embd["bytes"] - _mib(row, "size_mib")) <= ROUND


def test_every_catalog_log_row_is_checked():
    # the rows without a catalog model are checked above (LFM2) or in test_arch_readers.py (Qwen3.5-9B); the
    # catalog models' buffer rows by their own tests above
    unchecked = {r["model"].split(" ")[0] for r in ARCH_LOGS if r not in CATALOG_LOG_ROWS}
    assert unchecked == {"Qwen3.5-9B", "LFM2.5-Audio-1.5B", "LFM2-350M", "Qwen3.5/3.6-27B"}
    assert [
        r["memory"] for r in ARCH_LOGS if r["model"].startswith("Qwen3.5/3.6-27B") and r not in CATALOG_LOG_ROWS
    ] == ["model_buffer"]
    assert len(CATALOG_LOG_ROWS) >= 16


def test_swa_full_keeps_the_whole_context_in_windowed_blocks():
    # --swa-full (llama_context_default_params() turns it on for library users): size_swa = size_base.  Gemma 4
    # E4B's sliding blocks (window 512) at -c 4096: 4,096 cells instead of PAD(512 + 512) = 1,024; the global
    # blocks do not change
    m = pm.MODELS["gemma-4-e4b"]
    il = next(i for i in range(m.num_hidden_layers) if pm.kv_cells(m, i, 4096) == 1024)
    assert pm.kv_cells(m, il, 4096, swa_full=True) == 4096
    base = {r["kind"]: r for r in pm.kv_allocation(m, 4096)}
    full = {r["kind"]: r for r in pm.kv_allocation(m, 4096, swa_full=True)}
    assert full["swa"]["bytes"] == 4 * base["swa"]["bytes"] and full["full"] == base["full"]
    with pytest.raises(ValueError, match="^swa_full"):
        pm.kv_cells(m, il, 4096, swa_full="yes")


def test_swa_full_placement_holds_and_reads_the_whole_context():
    # Gemma 3 12B: 48 blocks (5 of 6 sliding, window 1024), 8 KV heads x 256, K and V in f16
    per_token = 48 * 2 * 8 * 256 * 2
    m = pm.MODELS["gemma-3-12b"]
    windowed = pm.place(m, "rtx3090", "Q4_K_M", n_ctx=32768, profile="measured")
    full = pm.place(m, "rtx3090", "Q4_K_M", n_ctx=32768, profile="measured", swa_full=True)
    assert full.swa_full and not windowed.swa_full
    assert full.gpu_kv == per_token * 32768  # every block keeps n_ctx cells, as a full-attention block does
    assert windowed.gpu_kv == sum(r["bytes"] for r in pm.kv_allocation(m, 32768))
    assert windowed.gpu_kv < full.gpu_kv / 4
    # decode reads every cached token of every block (fattn-vec masks the old ones, it does not skip them)
    ctx = 30000
    assert pm.decode_step_time(full, context=ctx)["gpu_kv_bytes"] == per_token * ctx
    assert pm.decode_step_time(windowed, context=ctx)["gpu_kv_bytes"] == 2 * 8 * 256 * 2 * (8 * ctx + 40 * 1024)
    assert pm.decode_step_time(full, context=ctx)["total_s"] > pm.decode_step_time(windowed, context=ctx)["total_s"]
    # within the window, nothing differs
    assert pm.decode_step_time(full, context=900)["total_s"] == pm.decode_step_time(windowed, context=900)["total_s"]
    assert pm.llama_server_command(full).endswith(" --swa-full")
    assert "--swa-full" not in pm.llama_server_command(windowed)
    # a model without sliding windows: the flag changes no byte
    dense = pm.place("llama-3.1-8b", "rtx3090", "Q4_K_M", n_ctx=16384, swa_full=True)
    assert dense.gpu_kv == pm.place("llama-3.1-8b", "rtx3090", "Q4_K_M", n_ctx=16384).gpu_kv
    with pytest.raises(ValueError, match="^swa_full"):
        pm.place(m, "rtx3090", "Q4_K_M", swa_full="yes")
