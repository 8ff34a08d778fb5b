"""perf_model.Model.blocks: every catalog model as typed blocks, agreeing block by block with what the Model's
fields say (its layer kinds, experts, KV elements per token and recurrent state)."""

import pytest

import perf_model as pm
from enginelab import blocks as b


@pytest.mark.parametrize("key", sorted(pm.MODELS))
def test_catalog_blocks_match_the_fields(key):
    m = pm.MODELS[key]
    assert len(m.blocks) == m.num_hidden_layers
    for il, blk in enumerate(m.blocks):
        assert isinstance(blk.mixer, (b.Recurrent, b.ShortConv)) == m.is_recurrent_layer(il)
        assert isinstance(blk.ffn, b.MoEFFN) == m.is_moe_layer(il)
        if isinstance(blk.mixer, b.Attention):
            # a block reading an earlier block's cache (Gemma 4 E-models) keeps none of its own: kind "none"
            own = blk.mixer.kv_shared_from < 0
            assert (blk.mixer.window > 0 and own) == m.is_swa_layer(il)
            src = blk if own else m.blocks[blk.mixer.kv_shared_from]
            k, v = b.kv_elements_per_token(src)
            k += b.indexer_elements_per_token(src)  # DeepSeek V3.2's lightning-indexer key
            assert k + v == pm.kv_elements_per_token_layer(m, il) <= pm.kv_elements_per_token_layer(m)
        elif isinstance(blk.mixer, (b.Recurrent, b.ShortConv)):
            assert b.state_elements(blk) == pm.recurrent_state_elements(m, il) == pm.recurrent_state_elements(m)
    assert m.block_model.globals.tied_output == m.tie_word_embeddings


def test_blocks_are_carried_when_given():
    from enginelab import arch_config as ac

    bm = ac.read_config(
        {
            "model_type": "llama",
            "num_hidden_layers": 2,
            "hidden_size": 64,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "intermediate_size": 128,
            "vocab_size": 100,
        }
    )
    m = pm.Model("t", "llama", 2, 64, 128, 4, 2, 100, carried_blocks=bm)
    assert m.block_model is bm
    with pytest.raises(ValueError, match="^carried_blocks:"):
        pm.Model("t", "llama", 3, 64, 128, 4, 2, 100, carried_blocks=bm)
    with pytest.raises(ValueError, match="^carried_blocks:"):
        pm.Model("t", "llama", 2, 64, 128, 4, 2, 100, carried_blocks="blocks")


# ---------------------------------------------------------------------------
# Models read as blocks: the 2025-2026 architectures through model_from_hf_config / model_from_gguf
# ---------------------------------------------------------------------------

from test_arch_readers import G, _write_gguf, gemma4_cfg, nemotron_like, qwen35_cfg  # noqa: E402


def test_qwen3_5_moe_config_plans_its_hybrid_cache():
    m = pm.model_from_hf_config(qwen35_cfg(True), name="Qwen3.5-35B-A3B-like")
    rows = {r["kind"]: r for r in pm.kv_allocation(m, 32768, "f16", n_seq=2)}
    # 10 attention blocks x 2 KV heads x 256 x (K + V) x 2 bytes = 2,048 B per cell, 2 streams of 16,384 cells
    assert rows["full"]["layers"] == 10 and rows["full"]["bytes_per_cell"] == 2 * 2 * 256 * 2
    assert rows["full"]["cells"] == 32768
    # 30 recurrent blocks, one state per sequence: (24,576 + 524,288) x 4 bytes
    assert rows["recurrent"]["layers"] == 30 and rows["recurrent"]["cells"] == 2
    assert rows["recurrent"]["bytes"] == 30 * 2 * (24_576 + 524_288) * 4
    p = pm.place(m, pm.MACHINES[sorted(pm.MACHINES)[0]], "Q4_K_M", n_ctx=8192)
    t = pm.decode_step_time(p)
    assert 0 < t["tok_per_s"] < 1e6 and t["cpu_kv_bytes"] + t["gpu_kv_bytes"] > 0


def test_gemma4_config_sizes_each_kind_of_block_its_own_way():
    m = pm.model_from_hf_config(gemma4_cfg(), name="Gemma-4-31B-like")
    rows = {r["kind"]: r for r in pm.kv_allocation(m, 32768, "f16", n_seq=1, n_ubatch=512)}
    # global: 4 KV heads x 512 x (K + V) x 2 B; sliding: 16 x 256 x 2 x 2 B, PAD(min(32768, 1024 + 512), 256)
    assert (rows["full"]["layers"], rows["full"]["bytes_per_cell"], rows["full"]["cells"]) == (10, 8192, 32768)
    assert (rows["swa"]["layers"], rows["swa"]["bytes_per_cell"], rows["swa"]["cells"]) == (50, 16384, 1536)
    assert pm.kv_bytes_per_token(m) == (10 * 2048 + 50 * 4096) * 2 * 2


def test_unknown_decoder_is_read_with_the_warning_and_encoders_are_refused():
    cfg = {
        "model_type": "brand_new",
        "num_hidden_layers": 4,
        "hidden_size": 512,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "intermediate_size": 1024,
        "vocab_size": 1000,
    }
    m = pm.model_from_hf_config(cfg)
    assert "architecture not verified: sizes approximate" in m.source
    assert pm.kv_bytes_per_token(m) == 4 * 2 * 2 * 64 * 2  # 4 blocks x (K + V) x 2 KV heads x 64 x 2 B
    with pytest.raises(ValueError, match="^model_type:.*encoder"):
        pm.model_from_hf_config({**cfg, "model_type": "bert"})


def test_gguf_of_a_gemma4_like_file_carries_its_blocks(tmp_path):
    swa = b.Attention(4, 2, 8, 8, window=16)
    glob = b.Attention(4, 1, 16, 16)
    blocks = (b.Block(swa, b.DenseFFN(64)), b.Block(glob, b.DenseFFN(64)))
    keys = {
        "attention.head_count": 4,
        "attention.head_count_kv": [2, 1],
        "attention.key_length": 16,
        "attention.value_length": 16,
        "attention.key_length_swa": 8,
        "attention.value_length_swa": 8,
        "attention.sliding_window": 16,
        "attention.sliding_window_pattern": [True, False],
        "context_length": 1024,
        "feed_forward_length": 64,
    }
    data = _write_gguf(tmp_path, b.BlockModel(G, blocks), "gemma4", keys)
    m = pm.model_from_gguf(data)
    assert m.blocks == blocks
    # per token: the sliding block 2 x 8 (K) + 2 x 8 (V), the global one 1 x 16 + 1 x 16: f16
    assert pm.kv_bytes_per_token(m) == (32 + 32) * 2


# ---------------------------------------------------------------------------
# The catalog's 2026 entries (configs in data/architectures/configs/), by hand
# ---------------------------------------------------------------------------


def test_catalog_qwen3_6_35b_a3b():
    m = pm.MODELS["qwen3.6-35b-a3b"]
    # 10 attention blocks x (K + V) 2 KV heads x 256 x 2 B (f16)
    assert pm.kv_bytes_per_token(m) == 10 * 2 * 2 * 256 * 2
    # 30 delta nets: (3 x (32 x 128 + 2 x 16 x 128) + 128 x 32 x 128) x 4 B per sequence
    assert sum(pm.recurrent_state_bytes(m, il) for il in range(40) if m.is_recurrent_layer(il)) == 30 * 548_864 * 4


def test_catalog_glm_4_7_flash():
    m = pm.MODELS["glm-4.7-flash"]
    # MLA: 47 blocks x (512 + 64) latent elements x 2 B, no V
    assert pm.kv_bytes_per_token(m) == 47 * 576 * 2
    assert [m.is_moe_layer(il) for il in range(3)] == [False, True, True]  # first_k_dense_replace 1


def test_catalog_nemotron_3_nano():
    m = pm.MODELS["nemotron-3-nano-30b-a3b"]
    kinds = [m.layer_kind(il) for il in range(52)]
    assert (kinds.count("full"), kinds.count("recurrent"), kinds.count("none")) == (6, 23, 23)
    # 6 attention blocks x (K + V) 2 KV heads x 128 x 2 B
    assert pm.kv_bytes_per_token(m) == 6 * 2 * 2 * 128 * 2
    # 23 Mamba-2 blocks: (3 x (64 x 64 + 2 x 8 x 128) + 128 x 4096) x 4 B per sequence
    assert pm.kv_cache_bytes(m, 0) == 23 * (3 * (4096 + 2048) + 128 * 4096) * 4


def test_catalog_gemma_4_31b():
    m = pm.MODELS["gemma-4-31b"]
    # 50 sliding blocks of 16 KV heads x 256, 10 global of 4 x 512; K and V each, f16
    assert pm.kv_bytes_per_token(m) == (50 * 16 * 256 + 10 * 4 * 512) * 2 * 2
    rows = {r["kind"]: r for r in pm.kv_allocation(m, 65536, "f16", n_seq=1, n_ubatch=512)}
    assert rows["swa"]["cells"] == 1536 and rows["full"]["cells"] == 65536  # PAD(1024 + 512, 256)
    names = [t.name for t in m.tensors()]
    assert "blk.5.attn_v.weight" not in names and "blk.0.attn_v.weight" in names  # V = K on global blocks


def test_catalog_lfm2_5():
    m = pm.MODELS["lfm2.5-2.6b"]
    kinds = [m.layer_kind(il) for il in range(30)]
    assert (kinds.count("full"), kinds.count("recurrent")) == (8, 22)
    # 8 attention blocks x (K + V) 8 KV heads x 64 (2048 / 32) x 2 B
    assert pm.kv_bytes_per_token(m) == 8 * 2 * 8 * 64 * 2
    # 22 short convolutions: n_embd x (l_cache - 1) f32 each, no recurrent state
    assert pm.kv_cache_bytes(m, 0) == 22 * 2048 * 2 * 4


def test_catalog_qwen3_5_27b_matches_the_published_rs_buffer():
    m = pm.MODELS["qwen3.5-27b"]
    rows = {r["kind"]: r for r in pm.kv_allocation(m, 32768, "f16", n_seq=2)}
    # llama.cpp PR #23792's log: llama_memory_recurrent: size = 299.25 MiB (2 cells, 64 layers, 2 seqs)
    assert rows["recurrent"]["layers"] == 48 and round(rows["recurrent"]["bytes"] / 2**20, 2) == 299.25
    # 16 attention blocks x (K + V) 4 KV heads x 256 x 2 B
    assert pm.kv_bytes_per_token(m) == 16 * 2 * 4 * 256 * 2


def test_explain_names_each_kind_of_block_and_what_was_not_verified():
    from enginelab import explain

    mc = pm.MACHINES[sorted(pm.MACHINES)[0]]
    m = pm.MODELS["gemma-4-31b"]
    p = pm.place(m, mc, "Q4_K_M", n_ctx=32768)
    text = explain.kv_breakdown_text(m, p, range(60))
    # global: 4 KV heads x 512 x (K + V) x 2 B = 8,192 B; sliding: 16 x 256 x 2 x 2 B = 16,384 B
    assert "10 global layers × 32,768 cells × 8,192 B per cell" in text
    assert "50 sliding layers × 1,536 cells × 16,384 B per cell" in text
    g = pm.model_from_hf_config(
        {
            "model_type": "brand_new",
            "num_hidden_layers": 4,
            "hidden_size": 512,
            "num_attention_heads": 8,
            "intermediate_size": 1024,
            "vocab_size": 1000,
        }
    )
    note = explain.kv_cells_note(g, pm.place(g, mc, "Q4_K_M", n_ctx=4096))
    assert "Architecture not verified: sizes approximate." in note and "num_key_value_heads missing" in note


def test_gguf_of_a_nemotron_like_hybrid_plans_and_times(tmp_path):
    blocks, keys = nemotron_like()
    keys = {**keys, "context_length": 4096}
    m = pm.model_from_gguf(_write_gguf(tmp_path, b.BlockModel(G, blocks), "nemotron_h_moe", keys))
    assert m.blocks == blocks
    rows = {r["kind"]: r for r in pm.kv_allocation(m, 4096, "f16", n_seq=2)}
    assert rows["full"]["bytes_per_cell"] == 2 * 2 * 8 * 2  # one attention block: (K + V) 2 heads x 8, f16
    assert rows["recurrent"]["bytes"] == 2 * (3 * (64 + 2 * 2 * 16) + 16 * 64) * 4  # 2 sequences' state
    t = pm.decode_step_time(pm.place(m, pm.MACHINES[sorted(pm.MACHINES)[0]], None, n_ctx=4096))
    assert 0 < t["tok_per_s"] < float("inf")


@pytest.mark.parametrize(
    "change, key",
    [
        ({"linear_num_value_heads": 0}, "linear_num_value_heads"),
        ({"linear_num_value_heads": 24}, "linear_num_value_heads"),  # not a multiple of the 16 key heads
        ({"num_experts": None}, "num_experts"),
        ({"layer_types": ["full_attention"]}, "layer_types"),
        ({"head_dim": 10**6}, "head_dim"),
        ({"linear_conv_kernel_dim": 1000}, "linear_conv_kernel_dim"),
    ],
)
def test_hostile_new_architecture_configs_name_the_key(change, key):
    cfg = qwen35_cfg(True)
    cfg["text_config"] = {k: v for k, v in {**cfg["text_config"], **change}.items() if v is not None}
    with pytest.raises(ValueError, match=f"^{key}:"):
        pm.model_from_hf_config(cfg)
