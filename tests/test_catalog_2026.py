"""The catalog's 2026 additions read from their config.json keys (catalog.json `configs`, sources in
data/architectures/configs/): their blocks, caches and sizes derived by hand."""

import json
from pathlib import Path

import pytest

import perf_model as pm
from enginelab import blocks as b

ROOT = Path(__file__).resolve().parents[1]
NEW = ("gemma-4-26b-a4b", "gemma-4-e4b", "deepseek-v3.2", "kimi-k2.5", "llama-4-maverick", "mistral-small-3.2-24b")


@pytest.mark.parametrize("key", NEW)
def test_every_new_row_has_its_sources_and_reads_without_a_warning(key):
    data = json.loads((ROOT / "data/architectures/configs" / f"{key}.json").read_text())
    assert data["SOURCES"] and all(isinstance(s, str) and s for s in data["SOURCES"])
    m = pm.MODELS[key]
    assert m.block_model.warnings == ()  # read by the architecture's own reader, not the generic one
    cfg = {k: v for k, v in data.items() if k != "SOURCES"}
    row = next(r for r in pm.catalog_data()["configs"] if r["key"] == key)
    assert row["config"] == cfg  # the catalog reads what the data file records


def test_gemma4_26b_a4b_moe_blocks_and_published_file():
    m = pm.MODELS["gemma-4-26b-a4b"]
    blocks = m.blocks
    assert len(blocks) == 30
    globals_ = [il for il, x in enumerate(blocks) if not x.mixer.window]
    assert globals_ == [5, 11, 17, 23, 29]
    # sliding blocks: 8 KV heads x 256 (window 1,024); global: 2 KV heads x 512, V from K's projection
    s, g = blocks[0].mixer, blocks[5].mixer
    assert (s.n_head_kv, s.head_dim_k, s.window) == (8, 256, 1024)
    assert (g.n_head_kv, g.head_dim_k, g.v_from_k) == (2, 512, True)
    f = blocks[0].ffn
    assert (f.n_expert, f.n_expert_used, f.expert_width, f.dense_width, f.merged_gate_up) == (128, 8, 704, 2112, True)
    # KV per token, all blocks: 25 x 2 x 8 x 256 + 5 x 2 x 2 x 512 elements
    assert sum(sum(b.kv_elements_per_token(x)) for x in blocks) == 25 * 4096 + 5 * 2048
    # ggml-org/gemma-4-26B-A4B-it-GGUF's Q4_K_M is 16.80 GB on disk (the HF tree, as quoted by
    # https://smeltcore.com/recipes/gemma-4-26b-a4b-it-on-rtx-4090-local-multimodal-chat-via-q4-k-m-gguf-llama-cpp),
    # which also gives 25.2B parameters
    assert pm.file_bytes(m, "Q4_K_M") == pytest.approx(16.80e9, rel=0.02)
    assert m.total_params() == pytest.approx(25.2e9, rel=0.01)


def test_gemma4_e4b_shares_the_late_caches_and_matches_the_edge_log():
    m = pm.MODELS["gemma-4-e4b"]
    blocks = m.blocks
    assert m.block_model.globals.per_layer_width == 256
    own = [il for il, x in enumerate(blocks) if x.mixer.kv_shared_from < 0]
    assert own == list(range(24))  # the last num_kv_shared_layers = 18 read earlier caches
    glob = [il for il in own if not blocks[il].mixer.window]
    assert glob == [5, 11, 17, 23]
    # data/architectures/load_logs.csv (llama.cpp issue 21730): the non-SWA cache of 4 layers at 131,072 cells
    # holds 1024.00 MiB of K (f16): 4 x 131,072 x 2 KV heads x 512 x 2 bytes
    k_bytes = sum(b.kv_elements_per_token(blocks[il])[0] for il in glob) * 131072 * 2
    assert k_bytes == 1024 * 2**20
    names = {t.name for t in m.tensors()}
    assert {"per_layer_token_embd.weight", "per_layer_model_proj.weight"} <= names
    # the checkpoint keeps k_proj/v_proj in the KV-shared layers too: the file holds them and llama.cpp loads
    # them (memory), but block 30 reads block 22's cache and never multiplies its own K/V (no work)
    assert {"blk.30.attn_k.weight", "blk.30.attn_v.weight", "blk.23.attn_k.weight"} <= names
    assert "blk.30.attn_k.weight" in m.unread_tensors() and "blk.23.attn_k.weight" not in m.unread_tensors()


def test_deepseek_v32_caches_latent_and_indexer_key():
    m = pm.MODELS["deepseek-v3.2"]
    att = m.blocks[0].mixer
    assert (att.kv_lora_rank, att.rope_dim, att.indexer_head_dim, att.n_indexer_head) == (512, 64, 128, 64)
    # 61 blocks x (512 + 64 latent + 128 indexer key) elements per token
    assert sum(sum(b.kv_elements_per_token(x)) + b.indexer_elements_per_token(x) for x in m.blocks) == 61 * 704
    moe = [il for il, x in enumerate(m.blocks) if isinstance(x.ffn, b.MoEFFN)]
    assert moe == list(range(3, 61))  # first_k_dense_replace 3
    assert m.blocks[3].ffn.routing_bias  # topk_method noaux_tc: exp_probs_b
    assert sum(t.name.endswith("exp_probs_b.bias") for t in m.tensors()) == 58


def test_kimi_k25_unwraps_its_text_config():
    m = pm.MODELS["kimi-k2.5"]
    assert m.num_hidden_layers == 61 and m.hidden_size == 7168
    f = m.blocks[1].ffn
    assert (f.n_expert, f.n_expert_used, f.expert_width, f.n_shared, f.shared_width) == (384, 8, 2048, 1, 2048)
    assert not isinstance(m.blocks[0].ffn, b.MoEFFN)
    # MLA: 512 + 64 per token and block
    assert sum(sum(b.kv_elements_per_token(x)) for x in m.blocks) == 61 * 576


def test_llama4_maverick_alternates_dense_and_experts():
    m = pm.MODELS["llama-4-maverick"]
    ffns = [x.ffn for x in m.blocks]
    assert all(isinstance(ffns[il], b.MoEFFN) == (il % 2 == 1) for il in range(48))
    assert ffns[0].width == 16384 and ffns[1].n_expert == 128 and ffns[1].shared_width == 8192
    chunked = [il for il, x in enumerate(m.blocks) if x.mixer.chunked]
    assert len(chunked) == 36 and 3 not in chunked and chunked[:3] == [0, 1, 2]
    assert m.block_model.globals.rope_freqs == 0  # rope_scaling null: no rope_freqs tensor


def test_mistral_small_32_unwraps_mistral3_and_caches_full_attention():
    m = pm.MODELS["mistral-small-3.2-24b"]
    assert m.block_model.arch == "mistral" and len(m.blocks) == 40
    att = m.blocks[0].mixer
    assert (att.n_head, att.n_head_kv, att.head_dim_k, att.window) == (32, 8, 128, 0)
    # 40 layers x (8 KV heads x 128) for K and again for V, F16: 160 KiB per token
    assert sum(sum(b.kv_elements_per_token(x)) for x in m.blocks) == 40 * 2 * 8 * 128
    assert pm.kv_cache_bytes(m, 1) == 40 * 2 * 8 * 128 * 2
    # 40 x (q 5120x4096 + k, v 5120x1024 + o 4096x5120 + 3 x 5120x32768) + 2 x 131072x5120 (untied)
    n = 40 * (5120 * 4096 * 2 + 5120 * 1024 * 2 + 3 * 5120 * 32768) + 2 * 131072 * 5120
    assert sum(r["n_elements"] for r in pm.quantize_plan(m, "F16")) == n + 40 * 2 * 5120 + 5120  # + norms
