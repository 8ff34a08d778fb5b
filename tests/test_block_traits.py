"""What an architecture adds to the textbook block, as block properties: every model's tensors come from its
blocks, nothing after the readers looks at model_type (issue 31)."""

import gguf  # llama.cpp's own gguf package (test extra)
import numpy as np
import pytest

import perf_model as pm
from enginelab import arch_config as ac
from enginelab import arch_gguf as ag
from enginelab import blocks as b
from enginelab.engine_io import _gguf_class


def names(m, il):
    return {t.name.split(".", 2)[2]: t for t in m.tensors() if t.layer == il}


def test_gpt_oss_blocks_carry_sinks_biases_and_the_post_attention_norm():
    # gpt-oss-20b config.json: 64 heads of 64, 8 KV heads, hidden 2880, 32 experts of 2880
    m = pm.MODELS["gpt-oss-20b"]
    att, ffn = m.blocks[0].mixer, m.blocks[0].ffn
    assert att.sinks and att.qkv_bias and att.out_bias
    assert ffn.router_bias and ffn.expert_bias and not ffn.routing_bias
    assert m.blocks[0].ffn_norm_name == "post_attention_norm"
    t = names(m, 0)
    assert t["attn_sinks.weight"].ne == (64,)
    assert t["attn_q.bias"].ne == (64 * 64,) and t["attn_k.bias"].ne == (8 * 64,)
    assert t["attn_output.bias"].ne == (2880,)
    assert t["ffn_gate_inp.bias"].ne == (32,)
    assert t["ffn_gate_exps.bias"].ne == (2880, 32) and t["ffn_down_exps.bias"].ne == (2880, 32)
    assert all(t[x].src_type == "F32" and t[x].cls == "bias" for x in t if x.endswith(".bias"))
    assert ffn.mxfp4 and t["ffn_up_exps.weight"].src_type == "MXFP4"  # released, and converted, as MXFP4
    assert "post_attention_norm.weight" in t and "ffn_norm.weight" not in t


def test_phi3_fuses_qkv_and_gate_up():
    # Phi-3 mini: hidden 3072, 32 heads of 96, no GQA; intermediate 8192
    m = pm.MODELS["phi-3-mini"]
    t = names(m, 5)
    assert t["attn_qkv.weight"].ne == (3072, 3 * 3072) and t["attn_qkv.weight"].cls == "attn_qkv"
    assert t["ffn_up.weight"].ne == (3072, 2 * 8192)
    assert "attn_q.weight" not in t and "ffn_gate.weight" not in t


def test_gemma3_post_norms_and_qwen3_next_fused_ba():
    t = names(pm.MODELS["gemma-3-4b"], 0)
    assert {"post_attention_norm.weight", "post_ffw_norm.weight", "ffn_norm.weight"} <= set(t)
    q = pm.MODELS["qwen3-next-80b-a3b"]
    # a gated delta net block: 32 value heads, beta and alpha in one ssm_ba of 2 x 32 rows
    t = names(q, 0)
    assert t["ssm_ba.weight"].ne == (2048, 64) and "ssm_beta.weight" not in t
    assert t["ffn_gate_inp_shexp.weight"].ne == (2048,)
    assert t["ffn_gate_inp.weight"].src_type == "F32"
    # its attention block: attn_q holds the queries and their gate, 2 x 16 heads x 256
    assert names(q, 3)["attn_q.weight"].ne == (2048, 2 * 16 * 256)


def test_llama3_rope_freqs_is_a_global_property():
    m = pm.MODELS["llama-3.1-8b"]
    assert m.block_model.globals.rope_freqs == 64  # head_dim 128 / 2
    rf = [t for t in m.tensors() if t.name == "rope_freqs.weight"]
    assert len(rf) == 1 and rf[0].ne == (64,) and rf[0].src_type == "F32"
    cfg = {
        "model_type": "llama",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 100,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0},
    }
    assert ac.read_config(cfg).globals.rope_freqs == 8  # head_dim 16 / 2
    assert ac.read_config({**cfg, "rope_scaling": {"rope_type": "yarn"}}).globals.rope_freqs == 0
    with pytest.raises(ValueError, match="^rope_scaling:"):
        ac.read_config({**cfg, "rope_scaling": "llama3"})


def test_the_config_readers_set_the_same_properties_as_the_catalog():
    # a catalog row is config.json-named: read through arch_config it gives the catalog model's tensors
    for key in ("gpt-oss-20b", "phi-3-mini", "gemma-3-4b", "qwen2.5-7b", "gemma-2-9b"):
        m = pm.MODELS[key]
        cfg = {f: getattr(m, f) for f in ("model_type", "num_hidden_layers", "hidden_size", "intermediate_size")}
        cfg.update(
            num_attention_heads=m.num_attention_heads,
            num_key_value_heads=m.num_key_value_heads,
            vocab_size=m.vocab_size,
            head_dim=m.d_head,
            tie_word_embeddings=m.tie_word_embeddings,
            max_position_embeddings=m.max_position_embeddings,
            sliding_window=m.sliding_window or None,
            attention_bias=m.attention_bias,
            num_local_experts=m.num_local_experts or None,
            num_experts_per_tok=m.num_experts_per_tok or None,
        )
        if m.sliding_window_pattern:
            n = len(m.sliding_window_pattern)
            cfg["layer_types"] = [
                "sliding_attention" if m.sliding_window_pattern[il % n] else "full_attention"
                for il in range(m.num_hidden_layers)
            ]
        bm = ac.read_config(cfg)
        assert bm.blocks == m.blocks, key
        got = sorted((t.name, t.ne, t.cls, t.src_type) for t in pm._block_tensors_of(bm))
        assert got == sorted((t.name, t.ne, t.cls, t.src_type) for t in m.tensors()), key


def test_noaux_tc_router_keeps_its_score_bias():
    cfg = {
        "model_type": "deepseek_v3",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "vocab_size": 100,
        "kv_lora_rank": 16,
        "q_lora_rank": 24,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 16,
        "v_head_dim": 16,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "n_shared_experts": 1,
        "first_k_dense_replace": 1,
    }
    assert not ac.read_config(cfg).blocks[1].ffn.routing_bias
    bm = ac.read_config({**cfg, "topk_method": "noaux_tc"})
    assert bm.blocks[1].ffn.routing_bias and not isinstance(bm.blocks[0].ffn, b.MoEFFN)
    assert ("blk.1.exp_probs_b.bias", (8,)) in b.tensors(bm)


def test_attn_output_is_not_the_output_head():
    # blk.N.attn_output.weight contains "output.weight": it must not be classed (and quantized) as the head
    assert _gguf_class("blk.3.attn_output.weight", 2) == "attn_output"
    assert _gguf_class("output.weight", 2) == "output"
    m = pm.MODELS["gemma-4-31b"]
    assert sum(t.cls == "output" for t in m.tensors()) == 0  # tied: token_embd is the head
    # the model card of steampunque/gemma-4-31B-it-MP-GGUF compares its quant with the plain Q4_K_M, 18.7e9
    # bytes (read at https://thisissparta.cloud-ip.cc/steampunque/gemma-4-31B-it-MP-GGUF, a mirror of the
    # Hugging Face card); with attn_output classed as the head (Q6_K) the model was 19.11e9, 2.2% over
    assert pm.file_bytes(m, "Q4_K_M") == pytest.approx(18.7e9, rel=0.005)


def test_every_trait_reads_back_from_a_gguf(tmp_path):
    att = b.Attention(4, 2, 8, 8, qkv_bias=True, out_bias=True, sinks=True)
    fused = b.Attention(4, 4, 8, 8, fused_qkv=True)
    rec = b.Recurrent("gated_delta_net", 4, 64, 16, 2, 4, fused_ba=True)
    moe = b.MoEFFN(
        4, 2, 16, n_shared=1, shared_width=16, router_bias=True, expert_bias=True, shared_gate=True, routing_bias=True
    )
    blocks = (
        b.Block(att, moe, ffn_norm_name="post_attention_norm"),
        b.Block(fused, b.DenseFFN(24, fused_gate_up=True), post_norms=True),
        b.Block(rec, moe, ffn_norm_name="post_attention_norm"),
    )
    g = b.Globals(vocab=64, n_embd=32, tied_output=False, rope_freqs=4)
    bm = b.BlockModel(g, blocks)
    path = tmp_path / "t.gguf"
    w = gguf.GGUFWriter(str(path), "anyarch")
    for k, v in {
        "block_count": 3,
        "embedding_length": 32,
        "attention.head_count": 4,
        "attention.head_count_kv": [2, 4, 0],
        "attention.key_length": 8,
        "ssm.conv_kernel": 4,
        "ssm.inner_size": 64,
        "ssm.state_size": 16,
        "ssm.group_count": 2,
        "ssm.time_step_rank": 4,
        "expert_count": 4,
        "expert_used_count": 2,
    }.items():
        (w.add_array if isinstance(v, list) else w.add_uint32)(f"anyarch.{k}", v)
    w.add_token_list([f"t{i}" for i in range(64)])
    for name, shape in b.tensors(bm):
        w.add_tensor(name, np.zeros(tuple(reversed(shape)), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    got = ag.read_gguf_blocks(path.read_bytes())
    assert got.globals == g
    assert got.blocks == blocks
    # hand count of the biases and gates: q/k/v 32 + 16 + 16, attn_output 32, 4 sinks; per MoE block the
    # router bias 4, expert biases (16 + 16 + 32) x 4, the shared gate 32 and the routing bias 4
    t = dict(b.tensors(bm))
    assert sum(b.n_elements(t[f"blk.0.{x}"]) for x in ("attn_q.bias", "attn_k.bias", "attn_v.bias")) == 64
    moe_small = ("ffn_gate_inp.bias", "ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias")
    assert sum(b.n_elements(t[f"blk.2.{x}"]) for x in moe_small) == 4 + 64 * 4
    assert t["blk.1.attn_qkv.weight"] == (32, 4 * 8 + 4 * 16) and t["blk.1.ffn_up.weight"] == (32, 48)
    assert t["blk.2.ssm_ba.weight"] == (32, 8) and t["rope_freqs.weight"] == (4,)


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: b.Recurrent("mamba2", 4, 64, 16, 2, 4, fused_ba=True), "fused_ba"),
        (lambda: b.DenseFFN(8, gated=False, fused_gate_up=True), "fused_gate_up"),
        (lambda: b.MoEFFN(4, 2, 8, shared_gate=True), "shared_gate"),
        (lambda: b.Block(b.NoMixer(), b.NoFFN(), ffn_norm_name="norm"), "ffn_norm_name"),
        (
            lambda: b.Block(b.NoMixer(), b.NoFFN(), post_norms=True, ffn_norm_name="post_attention_norm"),
            "ffn_norm_name",
        ),
        (lambda: b.Attention(4, 2, 8, 8, sinks=1), "sinks"),
        (lambda: b.Globals(10, 8, False, rope_freqs=-1), "rope_freqs"),
    ],
)
def test_trait_checks_name_the_field(make, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        make()
