"""enginelab.arch_config and arch_gguf: config.json and GGUF headers -> blocks, for every architecture of
issue 31. Each test derives the KV cache / recurrent state per token by hand from the config's numbers."""

import gguf  # llama.cpp's own gguf package (test extra)
import numpy as np
import pytest

from enginelab import arch_config as ac
from enginelab import arch_gguf as ag
from enginelab import blocks as b


def kinds(bm):
    return [type(x.mixer).__name__ for x in bm.blocks]


def kv_tok(bm):
    return b.kv_elements_per_token_model(bm)


def rs_per_seq(bm):
    return b.state_bytes(bm, 1)


# ---------------------------------------------------------------------------
# config.json, one architecture at a time
# ---------------------------------------------------------------------------


def qwen35_cfg(moe: bool):
    text = {
        "model_type": "qwen3_5_moe_text" if moe else "qwen3_5_text",
        "hidden_size": 2048 if moe else 4096,
        "num_hidden_layers": 40 if moe else 32,
        "num_attention_heads": 16,
        "num_key_value_heads": 2 if moe else 4,
        "head_dim": 256,
        "full_attention_interval": 4,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "vocab_size": 248320,
    }
    if moe:
        text.update(
            num_experts=256, num_experts_per_tok=8, moe_intermediate_size=512, shared_expert_intermediate_size=512
        )
    else:
        text["intermediate_size"] = 12288
    return {"model_type": "qwen3_5_moe" if moe else "qwen3_5", "text_config": text}


def test_qwen3_5_dense():
    bm = ac.read_config(qwen35_cfg(False))
    # (il + 1) % 4 == 0 is attention: 8 of 32 blocks, 2 KV... here 4 KV heads x 256 = 1024 K and V per block
    assert kinds(bm).count("Attention") == 8 and isinstance(bm.blocks[3].mixer, b.Attention)
    assert kv_tok(bm) == (8 * 1024, 8 * 1024)
    # 24 delta-net blocks: r = 3 * (32*128 + 2*16*128) = 24,576; s = 128 * 4096 = 524,288; f32
    assert rs_per_seq(bm) == 24 * (24_576 + 524_288) * 4 == 52_690_944
    assert bm.blocks[3].mixer.q_gate and not bm.warnings


def test_qwen3_5_moe():
    bm = ac.read_config(qwen35_cfg(True))
    # 10 attention blocks of 2 KV heads x 256 = 512
    assert kv_tok(bm) == (10 * 512, 10 * 512)
    # 30 recurrent blocks: 30 * 548,864 * 4 bytes = 62.8125 MiB per sequence
    assert rs_per_seq(bm) == 30 * 548_864 * 4
    assert rs_per_seq(bm) / 2**20 == 62.8125
    f = bm.blocks[0].ffn
    assert (f.n_expert, f.n_expert_used, f.expert_width, f.n_shared, f.shared_width) == (256, 8, 512, 1, 512)


def gemma4_cfg(**kw):
    text = {
        "model_type": "gemma4_text",
        "hidden_size": 5376,
        "num_hidden_layers": 60,
        "num_attention_heads": 32,
        "num_key_value_heads": 16,
        "num_global_key_value_heads": 4,
        "head_dim": 256,
        "global_head_dim": 512,
        "attention_k_eq_v": True,
        "sliding_window": 1024,
        "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 10,
        "intermediate_size": 21504,
        "vocab_size": 262144,
        "max_position_embeddings": 262144,
    }
    text.update(kw)
    return {"model_type": "gemma4", "text_config": text}


def test_gemma4_dense_global_blocks_have_their_own_kv_heads_and_width():
    bm = ac.read_config(gemma4_cfg())
    # sliding: 16 x 256 = 4096 each of K and V; global: 4 x 512 = 2048
    assert kv_tok(bm) == (50 * 4096 + 10 * 2048,) * 2
    # at 32,768 tokens a sliding block keeps its 1,024
    k, v = b.kv_cache_elements(bm, 32768)
    assert k == v == 50 * 4096 * 1024 + 10 * 2048 * 32768
    g = bm.blocks[5].mixer
    assert (g.n_head_kv, g.head_dim_k, g.v_from_k, g.window) == (4, 512, True, 0)
    assert "blk.5.attn_v.weight" not in [n for n, _ in b.block_tensors(bm.blocks[5], 5, 5376)]
    assert bm.globals.tied_output


def test_gemma4_e_model_shared_kv_and_per_layer_embeddings():
    bm = ac.read_config(
        gemma4_cfg(
            hidden_size=1536,
            num_hidden_layers=35,
            num_attention_heads=8,
            num_key_value_heads=1,
            num_global_key_value_heads=None,
            attention_k_eq_v=False,
            sliding_window=512,
            layer_types=(["sliding_attention"] * 4 + ["full_attention"]) * 7,
            num_kv_shared_layers=20,
            hidden_size_per_layer_input=256,
            intermediate_size=6144,
            use_double_wide_mlp=True,
        )
    )
    # blocks 0-14 keep caches: 12 sliding of 1 x 256, 3 global (4, 9, 14) of 1 x 512
    assert kv_tok(bm) == (12 * 256 + 3 * 512,) * 2
    # blocks 15-34 read the last block of their kind: sliding 13, global 14
    assert bm.blocks[15].mixer.kv_shared_from == 13 and bm.blocks[19].mixer.kv_shared_from == 14
    assert bm.blocks[15].ffn.width == 2 * 6144 and bm.blocks[14].ffn.width == 6144
    names = dict(b.tensors(bm))
    assert names["per_layer_token_embd.weight"] == (256 * 35, 262144)


def test_gemma4_moe_runs_the_dense_ffn_beside_the_experts():
    bm = ac.read_config(
        gemma4_cfg(
            hidden_size=2816,
            num_hidden_layers=30,
            num_attention_heads=16,
            num_key_value_heads=8,
            num_global_key_value_heads=2,
            layer_types=(["sliding_attention"] * 5 + ["full_attention"]) * 5,
            intermediate_size=2112,
            enable_moe_block=True,
            num_experts=128,
            top_k_experts=8,
            moe_intermediate_size=704,
        )
    )
    f = bm.blocks[0].ffn
    assert (f.n_expert, f.n_expert_used, f.expert_width, f.dense_width) == (128, 8, 704, 2112)
    # sliding 8 x 256 = 2048, global 2 x 512 = 1024
    assert kv_tok(bm) == (25 * 2048 + 5 * 1024,) * 2
    assert ("blk.0.ffn_gate_up_exps.weight", (2816, 2 * 704, 128)) in b.block_tensors(bm.blocks[0], 0, 2816)


def test_nemotron_h():
    cfg = {
        "model_type": "nemotron_h",
        "num_hidden_layers": 6,
        "hybrid_override_pattern": "M-M*EM",
        "hidden_size": 2688,
        "num_attention_heads": 32,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "mamba_num_heads": 64,
        "mamba_head_dim": 64,
        "n_groups": 8,
        "ssm_state_size": 128,
        "conv_kernel": 4,
        "intermediate_size": 1856,
        "n_routed_experts": 128,
        "num_experts_per_tok": 6,
        "moe_intermediate_size": 1856,
        "moe_shared_expert_intermediate_size": 3712,
        "vocab_size": 131072,
    }
    bm = ac.read_config(cfg)
    assert kinds(bm) == ["Recurrent", "NoMixer", "Recurrent", "Attention", "NoMixer", "Recurrent"]
    # one attention block: 2 x 128 = 256 K and V
    assert kv_tok(bm) == (256, 256)
    # 3 Mamba-2 blocks: d_inner 64 x 64 = 4096; r = 3 * (4096 + 2*8*128) = 18,432; s = 128 * 4096
    assert rs_per_seq(bm) == 3 * (18_432 + 524_288) * 4
    assert isinstance(bm.blocks[3].ffn, b.NoFFN) and not bm.blocks[1].ffn.gated
    e = bm.blocks[4].ffn
    assert (e.n_expert, e.n_expert_used, e.shared_width, e.gated) == (128, 6, 3712, False)


def test_granitemoehybrid():
    cfg = {
        "model_type": "granitemoehybrid",
        "num_hidden_layers": 4,
        "layer_types": ["mamba", "mamba", "attention", "mamba"],
        "hidden_size": 1536,
        "num_attention_heads": 12,
        "num_key_value_heads": 4,
        "mamba_n_heads": 48,
        "mamba_d_head": 64,
        "mamba_n_groups": 1,
        "mamba_d_state": 128,
        "mamba_d_conv": 4,
        "num_local_experts": 64,
        "num_experts_per_tok": 6,
        "intermediate_size": 512,
        "shared_intermediate_size": 1024,
        "vocab_size": 100352,
    }
    bm = ac.read_config(cfg)
    # attention: 1536 / 12 = 128 per head x 4 KV heads = 512
    assert kv_tok(bm) == (512, 512)
    # d_inner 48 x 64 = 3072: r = 3 * (3072 + 2 * 128) = 9,984, s = 128 * 3072 = 393,216; 3 blocks
    assert rs_per_seq(bm) == 3 * (9_984 + 393_216) * 4
    assert bm.blocks[0].ffn.shared_width == 1024


def test_lfm2_and_its_ffn_width():
    cfg = {
        "model_type": "lfm2",
        "num_hidden_layers": 4,
        "layer_types": ["conv", "conv", "full_attention", "conv"],
        "hidden_size": 2048,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "conv_L_cache": 3,
        "block_ff_dim": 12288,
        "block_auto_adjust_ff_dim": True,
        "block_ffn_dim_multiplier": 1.0,
        "block_multiple_of": 256,
        "vocab_size": 65536,
    }
    bm = ac.read_config(cfg)
    assert kv_tok(bm) == (8 * 64, 8 * 64)  # 2048 / 32 = 64 per head
    assert rs_per_seq(bm) == 3 * 2048 * 2 * 4  # n_embd x (l_cache - 1), f32, 3 conv blocks
    assert bm.blocks[0].ffn.width == 8192  # 2 x 12288 / 3 = 8192, a multiple of 256


def test_lfm2_moe_dense_lead():
    cfg = {
        "model_type": "lfm2_moe",
        "num_hidden_layers": 4,
        "layer_types": ["conv", "full_attention", "conv", "conv"],
        "hidden_size": 2048,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "conv_L_cache": 3,
        "intermediate_size": 7168,
        "num_dense_layers": 2,
        "num_experts": 32,
        "num_experts_per_tok": 4,
        "moe_intermediate_size": 1792,
        "vocab_size": 65536,
    }
    bm = ac.read_config(cfg)
    assert [type(x.ffn).__name__ for x in bm.blocks] == ["DenseFFN", "DenseFFN", "MoEFFN", "MoEFFN"]
    assert kv_tok(bm) == (512, 512)


def _dense_cfg(mt, **kw):
    cfg = {
        "model_type": mt,
        "num_hidden_layers": 4,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 11008,
        "vocab_size": 128256,
    }
    cfg.update(kw)
    return cfg


@pytest.mark.parametrize(
    "mt, kw, per_block",
    [
        ("glm4", dict(num_attention_heads=48, num_key_value_heads=2, head_dim=128, hidden_size=6144), 2 * 128),
        ("seed_oss", dict(num_attention_heads=80, num_key_value_heads=8, head_dim=128, hidden_size=5120), 8 * 128),
        ("smollm3", dict(hidden_size=2048, num_attention_heads=16, num_key_value_heads=4), 4 * 128),
        ("llama", {}, 8 * 128),
    ],
)
def test_dense_families(mt, kw, per_block):
    bm = ac.read_config(_dense_cfg(mt, **kw))
    assert kv_tok(bm) == (4 * per_block, 4 * per_block) and not bm.warnings


def test_olmo3_sliding_three_of_four():
    bm = ac.read_config(
        _dense_cfg(
            "olmo3",
            num_key_value_heads=32,
            sliding_window=4096,
            layer_types=["sliding_attention"] * 3 + ["full_attention"],
            max_position_embeddings=65536,
        )
    )
    assert [x.mixer.window for x in bm.blocks] == [4096, 4096, 4096, 0]
    k, _ = b.kv_cache_elements(bm, 65536)
    assert k == 4096 * (3 * 4096 + 65536)  # 32 x 128 = 4096 per token


def test_mistral3_wrapper_reads_its_text_model():
    cfg = {"model_type": "mistral3", "text_config": _dense_cfg("mistral", head_dim=128, hidden_size=5120)}
    bm = ac.read_config(cfg)
    assert bm.arch == "mistral" and kv_tok(bm) == (4 * 1024, 4 * 1024) and not bm.warnings


def test_minimax_m2():
    bm = ac.read_config(
        _dense_cfg(
            "minimax_m2",
            hidden_size=3072,
            num_attention_heads=48,
            head_dim=128,
            num_local_experts=256,
            num_experts_per_tok=8,
            intermediate_size=1536,
        )
    )
    assert kv_tok(bm) == (4 * 1024, 4 * 1024)
    assert bm.blocks[0].ffn.n_expert == 256 and bm.blocks[0].ffn.expert_width == 1536


def ds_cfg(mt, **kw):
    cfg = {
        "model_type": mt,
        "num_hidden_layers": 5,
        "hidden_size": 7168,
        "num_attention_heads": 128,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 2048,
        "intermediate_size": 18432,
        "first_k_dense_replace": 3,
        "vocab_size": 129280,
    }
    cfg.update(kw)
    return cfg


def test_deepseek_v32_and_glm_moe_dsa_cache_the_latent_and_the_indexer_key():
    for mt in ("deepseek_v32", "glm_moe_dsa"):
        bm = ac.read_config(ds_cfg(mt, index_head_dim=128, index_n_heads=64))
        # 5 blocks x (512 + 64 latent + 128 indexer key), no V
        assert kv_tok(bm) == (5 * (576 + 128), 0)
        assert [type(x.ffn).__name__ for x in bm.blocks] == ["DenseFFN"] * 3 + ["MoEFFN"] * 2
    v3 = ac.read_config(ds_cfg("deepseek_v3"))
    assert kv_tok(v3) == (5 * 576, 0)


def test_kimi_linear():
    cfg = ds_cfg(
        "kimi_linear",
        num_hidden_layers=4,
        hidden_size=2304,
        num_attention_heads=32,
        q_lora_rank=None,
        num_experts=256,
        num_experts_per_token=8,
        num_shared_experts=1,
        moe_intermediate_size=1024,
        first_k_dense_replace=1,
        intermediate_size=9216,
        linear_attn_config={"kda_layers": [1, 2, 3], "head_dim": 128, "num_heads": 32, "short_conv_kernel_size": 4},
    )
    del cfg["n_routed_experts"]
    bm = ac.read_config(cfg)
    assert kinds(bm) == ["Recurrent"] * 3 + ["Attention"]
    assert kv_tok(bm) == (576, 0)
    # KDA: r = 3 * 3 * 4096 = 36,864, s = 128 * 128 * 32 = 524,288
    assert rs_per_seq(bm) == 3 * (36_864 + 524_288) * 4


def test_ernie4_5_moe():
    cfg = _dense_cfg(
        "ernie4_5_moe",
        hidden_size=2560,
        num_attention_heads=20,
        num_key_value_heads=4,
        intermediate_size=12288,
        moe_num_experts=64,
        moe_k=6,
        moe_intermediate_size=1536,
        moe_num_shared_experts=2,
        moe_layer_start_index=1,
        moe_layer_interval=1,
        tie_word_embeddings=True,
    )
    bm = ac.read_config(cfg)
    assert kv_tok(bm) == (4 * 512, 4 * 512)  # 2560 / 20 = 128 x 4
    assert isinstance(bm.blocks[0].ffn, b.DenseFFN)
    f = bm.blocks[1].ffn
    assert (f.n_expert, f.n_expert_used, f.shared_width) == (64, 6, 2 * 1536)


def test_unknown_model_type_is_read_generically_with_a_warning():
    cfg = _dense_cfg(
        "brand_new_2027",
        layer_types=["sliding_attention", "full_attention", "mystery_mixer", "full_attention"],
        sliding_window=2048,
        num_experts=16,
        num_experts_per_tok=2,
        moe_intermediate_size=1024,
    )
    bm = ac.read_config(cfg)
    assert bm.warnings == (ac.GENERIC_WARNING,) == ("architecture not verified: sizes approximate",)
    assert any("mystery_mixer" in u for u in bm.unknown)
    assert bm.blocks[0].mixer.window == 2048 and bm.blocks[1].mixer.window == 0
    assert kv_tok(bm) == (4 * 1024, 4 * 1024)
    assert bm.blocks[0].ffn.n_expert == 16


@pytest.mark.parametrize(
    "cfg, key",
    [
        ([], "config"),
        (_dense_cfg("llama", num_hidden_layers=0), "num_hidden_layers"),
        (_dense_cfg("llama", num_hidden_layers=True), "num_hidden_layers"),
        (_dense_cfg("llama", num_key_value_heads=7), "num_key_value_heads"),
        (_dense_cfg("llama", vocab_size=10**30), "vocab_size"),
        (_dense_cfg("llama", hidden_size="4096"), "hidden_size"),
        (_dense_cfg("olmo3", layer_types=["sliding_attention"]), "layer_types"),
        ({**qwen35_cfg(False), "text_config": "x"}, "text_config"),
        (
            {"model_type": "nemotron_h", "num_hidden_layers": 2, "hybrid_override_pattern": "MX"},
            "hybrid_override_pattern",
        ),
        (ds_cfg("kimi_linear", linear_attn_config=[1]), "linear_attn_config"),
        (_dense_cfg("whatever", intermediate_size=None), "intermediate_size"),
        (_dense_cfg("whatever", num_hidden_layers=None), "num_hidden_layers"),
        (_dense_cfg("lfm2", layer_types=None), "layer_types"),
    ],
)
def test_hostile_configs_name_the_key(cfg, key):
    with pytest.raises(ValueError, match=f"^{key}:"):
        ac.read_config(cfg)


# ---------------------------------------------------------------------------
# GGUF headers: a synthetic file per block kind, read back exactly
# ---------------------------------------------------------------------------


def _write_gguf(tmp_path, bm, arch, keys):
    """A GGUF of `bm`'s tensors (f32 zeros) with the given {arch}.* keys."""
    path = tmp_path / "m.gguf"
    w = gguf.GGUFWriter(str(path), arch)
    w.add_uint32(f"{arch}.block_count", bm.n_layer)
    w.add_uint32(f"{arch}.embedding_length", bm.globals.n_embd)
    w.add_token_list([f"t{i}" for i in range(bm.globals.vocab)])
    for k, v in keys.items():
        key = f"{arch}.{k}"
        if isinstance(v, bool):
            w.add_bool(key, v)
        elif isinstance(v, list):
            w.add_array(key, v)
        else:
            w.add_uint32(key, v)
    for name, shape in b.tensors(bm):
        w.add_tensor(name, np.zeros(tuple(reversed(shape)), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


G = b.Globals(vocab=64, n_embd=32, tied_output=False)


def _roundtrip(tmp_path, blocks, arch, keys, g=G):
    bm = b.BlockModel(g, tuple(blocks))
    got = ag.read_gguf_blocks(_write_gguf(tmp_path, bm, arch, keys))
    assert got.globals == bm.globals
    assert got.blocks == bm.blocks
    return got


def test_gguf_attention_global_and_sliding(tmp_path):
    glob = b.Block(b.Attention(4, 2, 8, 8, qk_norm=True), b.DenseFFN(64))
    swa = b.Block(b.Attention(4, 2, 8, 8, window=16, qk_norm=True), b.DenseFFN(64))
    keys = {
        "attention.head_count": 4,
        "attention.head_count_kv": 2,
        "attention.key_length": 8,
        "attention.value_length": 8,
        "attention.sliding_window": 16,
        "attention.sliding_window_pattern": [True, False, True, False],
        "context_length": 1024,
    }
    got = _roundtrip(tmp_path, [swa, glob, swa, glob], "somearch", keys)
    assert got.unknown == ()


def test_gguf_gemma4_like_swa_widths_shared_kv_and_ple(tmp_path):
    swa = b.Attention(4, 2, 8, 8, window=16, qk_norm=True)
    glob = b.Attention(4, 1, 16, 16, v_from_k=True, qk_norm=True)
    moe = b.MoEFFN(4, 2, 8, dense_width=48, merged_gate_up=True)
    blocks = [
        b.Block(swa, moe),
        b.Block(glob, moe),
        b.Block(b.Attention(4, 2, 8, 8, window=16, kv_shared_from=0, qk_norm=True), moe),
        b.Block(b.Attention(4, 1, 16, 16, kv_shared_from=1, qk_norm=True), moe),
    ]
    keys = {
        "attention.head_count": 4,
        "attention.head_count_kv": [2, 1, 2, 1],
        "attention.key_length": 16,
        "attention.value_length": 16,
        "attention.key_length_swa": 8,
        "attention.value_length_swa": 8,
        "attention.sliding_window": 16,
        "attention.sliding_window_pattern": [True, False, True, False],
        "attention.shared_kv_layers": 2,
        "embedding_length_per_layer_input": 4,
        "expert_count": 4,
        "expert_used_count": 2,
        "context_length": 1024,
    }
    _roundtrip(tmp_path, blocks, "gemma4", keys, g=b.Globals(64, 32, True, per_layer_width=4))


def test_gguf_gemma4_e_model_file_keeps_unread_kv_projections(tmp_path):
    # Gemma 4 E-models' files hold attn_k/attn_v/attn_k_norm in the KV-shared blocks too: the reader still
    # shares from attention.shared_kv_layers' first block on (llama_hparams::has_kv) and marks them unread;
    # layer_output_scale and the expert branch's norms and scales read back as block traits
    swa = b.Attention(4, 2, 8, 8, window=16, qk_norm=True)
    glob = b.Attention(4, 1, 16, 16, qk_norm=True)
    moe = b.MoEFFN(4, 2, 8, dense_width=48, merged_gate_up=True, branch_norms=True)
    blocks = [
        b.Block(swa, moe, post_norms=True, out_scale=True),
        b.Block(glob, moe, post_norms=True, out_scale=True),
        b.Block(b.Attention(4, 2, 8, 8, window=16, kv_shared_from=0, qk_norm=True, unused_kv_proj=True), moe,
                post_norms=True, out_scale=True),
        b.Block(b.Attention(4, 1, 16, 16, kv_shared_from=1, qk_norm=True, unused_kv_proj=True), moe,
                post_norms=True, out_scale=True),
        # a shared global block whose file holds attn_k only (V from K, attention_k_eq_v)
        b.Block(b.Attention(4, 1, 16, 16, kv_shared_from=1, v_from_k=True, qk_norm=True, unused_kv_proj=True), moe,
                post_norms=True, out_scale=True),
    ]  # fmt: skip
    keys = {
        "attention.head_count": 4,
        "attention.head_count_kv": [2, 1, 2, 1, 1],
        "attention.key_length": 16,
        "attention.value_length": 16,
        "attention.key_length_swa": 8,
        "attention.value_length_swa": 8,
        "attention.sliding_window": 16,
        "attention.sliding_window_pattern": [True, False, True, False, False],
        "attention.shared_kv_layers": 3,
        "embedding_length_per_layer_input": 4,
        "expert_count": 4,
        "expert_used_count": 2,
        "context_length": 1024,
    }
    g = b.Globals(64, 32, True, per_layer_width=4, rope_freqs=8)
    got = _roundtrip(tmp_path, blocks, "gemma4", keys, g=g)
    names = {n for n, _ in b.tensors(got)}
    assert {"blk.3.attn_k.weight", "blk.3.attn_v.weight", "blk.2.layer_output_scale.weight"} <= names
    assert {"blk.0.pre_ffw_norm_2.weight", "blk.0.ffn_gate_inp.scale", "blk.0.ffn_down_exps.scale"} <= names
    assert b.unread_tensor_names(got) == {
        f"blk.{il}.{t}.weight" for il in (2, 3, 4) for t in ("attn_k", "attn_v", "attn_k_norm")
    }
    assert "blk.4.attn_v.weight" not in names  # named unread, held by no file: nothing counts it
    # the shared blocks keep no cache and their unread projections are no per-token work
    assert [sum(b.kv_elements_per_token(x)) for x in got.blocks] == [2 * 2 * 8, 2 * 16, 0, 0, 0]
    assert b.active_weight_elements(got.blocks[2], 2, 32) < b.active_weight_elements(got.blocks[0], 0, 32)
    with pytest.raises(ValueError, match="^unused_kv_proj"):
        b.Attention(4, 2, 8, 8, unused_kv_proj=True)  # a block with its own cache reads its projections


def test_gguf_mla_with_indexer_and_moe_shared(tmp_path):
    att = b.Attention(4, 1, 24, 16, kv_lora_rank=32, rope_dim=8, q_lora_rank=16, indexer_head_dim=16, n_indexer_head=2)
    blocks = [
        b.Block(att, b.DenseFFN(64)),
        b.Block(att, b.MoEFFN(8, 2, 16, n_shared=1, shared_width=16)),
    ]
    keys = {
        "attention.head_count": 4,
        "attention.head_count_kv": 1,
        "attention.kv_lora_rank": 32,
        "attention.key_length_mla": 24,
        "attention.value_length_mla": 16,
        "attention.indexer.head_count": 2,
        "attention.indexer.key_length": 16,
        "rope.dimension_count": 8,
        "expert_count": 8,
        "expert_used_count": 2,
        "expert_shared_count": 1,
    }
    got = _roundtrip(tmp_path, blocks, "deepseek32", keys)
    assert b.kv_elements_per_token_model(got) == (2 * (40 + 16), 0)


def nemotron_like() -> tuple:
    """(blocks, GGUF keys) of a small Nemotron-H-like hybrid: a Mamba-2 block, an FFN-only block, an attention
    block and an MoE block with a shared expert."""
    rec = b.Recurrent("mamba2", 4, 64, 16, 2, 8)
    blocks = (
        b.Block(rec, b.NoFFN()),
        b.Block(b.NoMixer(), b.DenseFFN(64, gated=False)),
        b.Block(b.Attention(4, 2, 8, 8), b.NoFFN()),
        b.Block(b.NoMixer(), b.MoEFFN(4, 2, 16, n_shared=1, shared_width=32, gated=False)),
    )
    keys = {
        "attention.head_count": 4,
        "attention.head_count_kv": [0, 0, 2, 0],
        "attention.key_length": 8,
        "feed_forward_length": [0, 64, 0, 16],
        "ssm.conv_kernel": 4,
        "ssm.inner_size": 64,
        "ssm.state_size": 16,
        "ssm.group_count": 2,
        "ssm.time_step_rank": 8,
        "expert_count": 4,
        "expert_used_count": 2,
    }
    return blocks, keys


def test_gguf_hybrid_mamba2_and_ffn_only(tmp_path):
    blocks, keys = nemotron_like()
    got = _roundtrip(tmp_path, blocks, "nemotron_h_moe", keys)
    # r = 3 * (64 + 2 * 2 * 16) = 384, s = 16 * 64 = 1024
    assert b.state_bytes(got) == (384 + 1024) * 4


def test_gguf_gated_delta_net_and_gated_query(tmp_path):
    rec = b.Recurrent("gated_delta_net", 4, 64, 16, 2, 4)
    att = b.Attention(4, 2, 8, 8, q_gate=True, qk_norm=True)
    ffn = b.MoEFFN(4, 2, 16, n_shared=1, shared_width=16)
    keys = {
        "attention.head_count": 4,
        "attention.head_count_kv": 2,
        "attention.key_length": 8,
        "ssm.conv_kernel": 4,
        "ssm.inner_size": 64,
        "ssm.state_size": 16,
        "ssm.group_count": 2,
        "ssm.time_step_rank": 4,
        "full_attention_interval": 2,
        "expert_count": 4,
        "expert_used_count": 2,
    }
    got = _roundtrip(tmp_path, [b.Block(rec, ffn), b.Block(att, ffn)], "qwen35moe", keys)
    # r = 3 * (64 + 2 * 2 * 16) = 384, s = 16 * 64
    assert b.state_bytes(got, 2) == 2 * (384 + 1024) * 4


def test_gguf_kda_and_mla(tmp_path):
    kda = b.Recurrent("kda", 4, 32, 8, 4, 4)
    mla = b.Attention(4, 1, 24, 16, kv_lora_rank=32, rope_dim=8)
    keys = {
        "attention.head_count": 4,
        "attention.head_count_kv": [0, 4],
        "attention.kv_lora_rank": 32,
        "attention.key_length_mla": 24,
        "attention.value_length_mla": 16,
        "rope.dimension_count": 8,
        "kda.head_dim": 8,
        "ssm.conv_kernel": 4,
    }
    got = _roundtrip(tmp_path, [b.Block(kda, b.DenseFFN(64)), b.Block(mla, b.DenseFFN(64))], "kimi-linear", keys)
    # KDA: r = 3 * 3 * 32 = 288, s = 8 * 8 * 4 = 256
    assert b.state_elements(got.blocks[0]) == (288, 256)


def test_gguf_short_conv(tmp_path):
    blocks = [b.Block(b.ShortConv(3, 32), b.DenseFFN(64)), b.Block(b.Attention(4, 2, 8, 8), b.DenseFFN(64))]
    keys = {
        "attention.head_count": 4,
        "attention.head_count_kv": [0, 2],
        "attention.key_length": 8,
        "shortconv.l_cache": 3,
    }
    got = _roundtrip(tmp_path, blocks, "lfm2", keys)
    assert b.state_elements(got.blocks[0]) == (32 * 2, 0)


def test_gguf_without_key_length_infers_from_shape_and_says_so(tmp_path):
    blk = b.Block(b.Attention(4, 2, 8, 8), b.DenseFFN(64))
    bm = b.BlockModel(G, (blk,))
    got = ag.read_gguf_blocks(
        _write_gguf(tmp_path, bm, "unheard-of", {"attention.head_count": 4, "attention.head_count_kv": 2})
    )
    assert got.blocks == bm.blocks
    assert any("key_length missing" in u for u in got.unknown)


def test_gguf_hostile_keys_name_the_key(tmp_path):
    blk = b.Block(b.Attention(4, 2, 8, 8), b.DenseFFN(64))
    bm = b.BlockModel(G, (blk, blk))
    data = _write_gguf(tmp_path, bm, "x", {"attention.head_count": 4, "attention.head_count_kv": [2, 2, 2]})
    with pytest.raises(ValueError, match=r"^x\.attention\.head_count_kv:"):
        ag.read_gguf_blocks(data)
    with pytest.raises(ValueError, match="^source:"):
        ag.read_gguf_blocks(b"not a gguf")


# ---------------------------------------------------------------------------
# Published llama.cpp load logs (data/architectures/load_logs.csv)
# ---------------------------------------------------------------------------

import csv  # noqa: E402
from pathlib import Path  # noqa: E402

LOGS = list(csv.DictReader((Path(__file__).parents[1] / "data/architectures/load_logs.csv").open()))
MiB = 1 << 20


def test_every_log_row_has_a_source_and_its_line():
    assert LOGS
    for r in LOGS:
        assert r["source"].startswith("https://github.com/") and r["size_mib"] in r["log_line"]


def test_qwen3_5_9b_rs_buffer_matches_the_log():
    row = next(r for r in LOGS if r["model"] == "Qwen3.5-9B")
    bm = ac.read_config(qwen35_cfg(False))  # 32 blocks, 24 delta nets: 16 key / 32 value heads x 128, conv 4
    n = int(row["n_seq"])
    r_bytes = sum(b.state_elements(x)[0] for x in bm.blocks) * 4 * n
    s_bytes = sum(b.state_elements(x)[1] for x in bm.blocks) * 4 * n
    assert round(r_bytes / MiB, 2) == float(row["k_or_r_mib"])  # 2.25
    assert round(s_bytes / MiB, 2) == float(row["v_or_s_mib"])  # 48.00
    assert round(b.state_bytes(bm, n) / MiB, 2) == float(row["size_mib"])  # 50.25


def test_qwen35_27b_rs_buffer_matches_the_log():
    # the header in the log: 64 blocks, full_attention_interval 4 (48 delta nets). The RS line's 288.00 MiB
    # of S over 2 sequences is 48 x 2 x d_state x d_inner x 4 B with d_state 128 and d_inner 6,144 (48 value
    # heads of 128) and its R, 11.25 MiB, is 48 x 2 x 3 x (6144 + 2 x 16 x 128) x 4 B: 16 key heads
    row = next(r for r in LOGS if r["model"].startswith("Qwen3.5/3.6-27B"))
    rec = b.Recurrent("gated_delta_net", 4, 48 * 128, 128, 16, 48)
    blocks = tuple(
        b.Block(rec if (il + 1) % 4 else b.Attention(24, 4, 256, 256, q_gate=True), b.DenseFFN(17408))
        for il in range(64)
    )
    bm = b.BlockModel(b.Globals(248320, 5120, False), blocks)
    assert round(b.state_bytes(bm, int(row["n_seq"])) / MiB, 2) == float(row["size_mib"])


def test_gemma4_edge_global_cache_matches_the_log():
    row = next(r for r in LOGS if r["arch"] == "gemma4")
    # what the row checks: 42 blocks, the last 18 sharing, 2 global KV heads x 512 (n_embd_head_k_all) and
    # one global block in 6; the other numbers (width, sliding heads, FFN) do not enter the global cache
    m_cfg = gemma4_cfg(
        hidden_size=2560,
        num_hidden_layers=42,
        num_attention_heads=8,
        num_key_value_heads=2,
        num_global_key_value_heads=2,
        head_dim=256,
        global_head_dim=512,
        attention_k_eq_v=False,
        sliding_window=512,
        layer_types=(["sliding_attention"] * 5 + ["full_attention"]) * 7,
        num_kv_shared_layers=18,
        hidden_size_per_layer_input=256,
        intermediate_size=10240,
    )
    bm = ac.read_config(m_cfg)
    # the log: blocks 29, 35 and 41 reuse block 23's global cache
    assert [bm.blocks[il].mixer.kv_shared_from for il in (29, 35, 41)] == [23, 23, 23]
    glob = [x for x in bm.blocks if x.mixer.window == 0 and x.mixer.kv_shared_from < 0]
    assert len(glob) == int(row["layers"])
    k = sum(b.kv_elements_per_token(x)[0] for x in glob) * int(row["cells"]) * 2
    v = sum(b.kv_elements_per_token(x)[1] for x in glob) * int(row["cells"]) * 2
    assert (k / MiB, v / MiB, (k + v) / MiB) == (
        float(row["k_or_r_mib"]),
        float(row["v_or_s_mib"]),
        float(row["size_mib"]),
    )
