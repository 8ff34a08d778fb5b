"""perf_model: sizes against published files, hand-derived KV, placement invariants, timing bounds."""

import math

import pytest

import perf_model as pm
from perf_model import GB, MACHINES, MODELS


# ---------------------------------------------------------------- sizes
# Published Llama 3.1 8B Instruct GGUF sizes (decimal GB), from the file lists of
# huggingface.co/bartowski/Meta-Llama-3.1-8B-Instruct-GGUF, as the module quotes them.
@pytest.mark.parametrize("quant,published_gb", [("Q8_0", 8.54), ("Q6_K", 6.60), ("Q5_K_M", 5.73), ("Q4_K_M", 4.92)])
def test_llama31_8b_file_sizes_within_1pct(quant, published_gb):
    got = pm.file_bytes(MODELS["llama-3.1-8b"], quant) / GB
    assert abs(got - published_gb) / published_gb < 0.01


# Other published Q4_K_M files (bytes as listed on Hugging Face):
#   Qwen/Qwen2.5-7B-Instruct-GGUF qwen2.5-7b-instruct-q4_k_m.gguf: 4.68 GB
#   bartowski/Llama-3.2-1B-Instruct-GGUF Q4_K_M: 0.808 GB; Llama-3.2-3B: 2.02 GB
#   bartowski/Mistral-7B-Instruct-v0.3-GGUF Q4_K_M: 4.37 GB
#   bartowski/gemma-2-9b-it-GGUF Q4_K_M: 5.76 GB
#   bartowski/Meta-Llama-3.1-70B-Instruct-GGUF Q4_K_M: 42.5 GB
@pytest.mark.parametrize(
    "key,published_gb",
    [
        ("qwen2.5-7b", 4.68),
        ("llama-3.2-1b", 0.808),
        ("llama-3.2-3b", 2.02),
        ("mistral-7b-v0.3", 4.37),
        ("gemma-2-9b", 5.76),
        ("llama-3.1-70b", 42.5),
    ],
)
def test_other_q4_k_m_files_within_half_pct(key, published_gb):
    got = pm.file_bytes(MODELS[key], "Q4_K_M") / GB
    assert abs(got - published_gb) / published_gb < 0.005


def test_block_layouts_give_module_bpw():
    assert pm.GGML_TYPES["Q8_0"].bpw == 8 * 34 / 32 == 8.5
    assert pm.GGML_TYPES["Q4_K"].bpw == 8 * 144 / 256 == 4.5
    assert pm.GGML_TYPES["Q6_K"].bpw == 6.5625
    assert pm.GGML_TYPES["IQ4_XS"].bpw == 4.25
    for name in [
        "F32",
        "F16",
        "BF16",
        "Q8_0",
        "Q4_0",
        "Q4_1",
        "Q5_0",
        "Q5_1",
        "Q2_K",
        "Q3_K",
        "Q4_K",
        "Q5_K",
        "Q6_K",
        "IQ4_NL",
        "IQ4_XS",
    ]:
        assert name in pm.GGML_TYPES


def test_llama8b_param_count_by_hand():
    # embeddings + output: 2 * 128256 * 4096; per block: q,o 4096^2; k,v 4096*1024; 3 FFN 4096*14336; 2 norms
    per_block = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    want = 2 * 128256 * 4096 + 32 * per_block + 4096 + 64  # output_norm, rope_freqs
    assert MODELS["llama-3.1-8b"].total_params() == want


def _types(model, quant):
    return {r["name"]: r["type"] for r in pm.quantize_plan(model, quant)}


def test_q4_k_m_rules_llama8b():
    t = _types(MODELS["llama-3.1-8b"], "Q4_K_M")
    more = [i for i in range(32) if i < 4 or i >= 28 or (i - 4) % 3 == 2]  # use_more_bits by hand
    assert len(more) == 16
    for i in range(32):
        want = "Q6_K" if i in more else "Q4_K"
        assert t[f"blk.{i}.attn_v.weight"] == want
        assert t[f"blk.{i}.ffn_down.weight"] == want
        assert t[f"blk.{i}.attn_q.weight"] == "Q4_K"
        assert t[f"blk.{i}.attn_norm.weight"] == "F32"
    assert t["output.weight"] == "Q6_K"
    assert t["token_embd.weight"] == "Q4_K"


def test_tied_embedding_and_row_fallback_qwen05b():
    t = _types(MODELS["qwen2.5-0.5b"], "Q4_K_M")
    # hidden 896 is not a multiple of 256: Q4_K rows fall back to Q5_0, Q6_K to Q8_0,
    # and the tied embedding (quantized as the output head) goes to Q8_0
    assert t["token_embd.weight"] == "Q8_0"
    assert t["blk.5.attn_q.weight"] == "Q5_0"
    assert t["blk.0.attn_v.weight"] == "Q8_0"  # use_more_bits -> Q6_K -> fallback Q8_0
    assert t["blk.0.ffn_down.weight"] == "Q6_K"  # ne[0] = 4864 = 19 * 256: no fallback
    assert t["blk.4.ffn_down.weight"] == "Q4_K"  # use_more_bits(4, 24) is False


def test_expert_and_70b_rules():
    mix = _types(MODELS["mixtral-8x7b"], "Q4_K_M")
    assert mix["blk.3.attn_v.weight"] == "Q8_0" and mix["blk.3.attn_k.weight"] == "Q8_0"
    assert mix["blk.3.attn_output.weight"] == "Q5_K"
    assert mix["blk.0.ffn_down_exps.weight"] == "Q6_K" and mix["blk.5.ffn_down_exps.weight"] == "Q4_K"
    big = _types(MODELS["llama-3.1-70b"], "Q4_K_M")
    assert big["blk.20.attn_v.weight"] == "Q5_K"  # 70B rule: Q4_K attn_v -> Q5_K
    assert big["blk.0.attn_v.weight"] == "Q6_K"
    q72 = _types(MODELS["qwen2.5-72b"], "Q4_K_M")
    assert q72["blk.20.ffn_down.weight"] == "Q5_0"  # 29568 is not a multiple of 256
    assert q72["blk.0.ffn_down.weight"] == "Q8_0"


def test_q3_k_m_and_q2_k_mix_rules():
    t = _types(MODELS["llama-3.1-8b"], "Q3_K_M")
    assert t["blk.0.attn_v.weight"] == "Q5_K" and t["blk.2.attn_v.weight"] == "Q4_K"
    assert t["blk.0.ffn_down.weight"] == "Q5_K" and t["blk.2.ffn_down.weight"] == "Q4_K"
    assert t["blk.9.attn_output.weight"] == "Q4_K" and t["blk.9.attn_q.weight"] == "Q3_K"
    t = _types(MODELS["llama-3.1-8b"], "Q2_K_MIX")
    assert t["blk.9.attn_v.weight"] == "Q4_K"  # n_gqa = 4
    assert t["blk.9.ffn_down.weight"] == "Q3_K" and t["blk.9.attn_output.weight"] == "Q3_K"
    # the module's plain Q2_K row: every quantizable tensor Q2_K
    t = _types(MODELS["llama-3.1-8b"], "Q2_K")
    assert {v for k, v in t.items() if not k.endswith("norm.weight") and "rope" not in k} == {"Q2_K"}


def test_weight_bytes_classes_sum_to_total():
    wb = pm.weight_bytes(MODELS["qwen3-30b-a3b"], "Q4_K_M")
    assert wb["total"] == sum(v for k, v in wb.items() if k != "total")
    assert wb["ffn_down_exps"] > wb["attn_q"]


# ---------------------------------------------------------------- KV cache
def test_kv_per_token_by_hand():
    assert pm.kv_bytes_per_token(MODELS["llama-3.1-8b"], "f16") == 2 * 32 * 8 * 128 * 2 == 131072
    assert pm.kv_bytes_per_token(MODELS["llama-3.1-8b"], "q8_0") == 2 * 32 * 8 * 128 * 34 / 32
    # MoE: Qwen3 30B-A3B, 48 layers, 4 KV heads of 128
    assert pm.kv_bytes_per_token(MODELS["qwen3-30b-a3b"], "f16") == 2 * 48 * 4 * 128 * 2
    assert pm.kv_bytes_per_token(MODELS["llama-3.1-8b"], "q4_0") == 2 * 32 * 8 * 128 * 18 / 32


def test_kv_sliding_window_gemma2():
    m = MODELS["gemma-2-9b"]
    per_layer = 2 * 8 * 256 * 2
    # 21 global layers hold all 8192 tokens, 21 sliding-window layers hold 4096
    assert pm.kv_cache_bytes(m, 8192, "f16") == 21 * 8192 * per_layer + 21 * 4096 * per_layer
    assert pm.kv_cache_bytes(m, 2048, "f16") == 42 * 2048 * per_layer
    oss = MODELS["gpt-oss-20b"]
    assert pm.kv_cache_bytes(oss, 100000, "f16") == 12 * 100000 * 2048 + 12 * 128 * 2048


def test_kv_1gib_at_8k():
    assert pm.kv_cache_bytes(MODELS["llama-3.1-8b"], 8192) == 1 << 30


# ---------------------------------------------------------------- placement
@pytest.mark.parametrize("mk", ["rtx3060", "rtx4060ti", "rtx4090", "m4pro"])
@pytest.mark.parametrize("key", ["llama-3.1-8b", "qwen2.5-32b", "llama-3.1-70b", "qwen3-30b-a3b"])
def test_auto_never_exceeds_device_less_margin(key, mk):
    p = pm.place(MODELS[key], MACHINES[mk], "Q4_K_M", n_ctx=8192)
    assert p.gpu_total + p.fit_margin <= p.gpu_capacity or p.n_gpu_layers == 0
    if p.n_gpu_layers < MODELS[key].n_layers + 1:
        q = pm.place(MODELS[key], MACHINES[mk], "Q4_K_M", n_ctx=8192, n_gpu_layers=p.n_gpu_layers + 1)
        assert q.gpu_total + q.fit_margin > q.gpu_capacity  # one more would not fit


def test_gpu_bytes_monotonic_in_ngl():
    m, mc = MODELS["qwen2.5-32b"], MACHINES["rtx4060ti"]
    prev = -1
    for ngl in range(0, m.n_layers + 2):
        p = pm.place(m, mc, "Q4_K_M", n_ctx=4096, n_gpu_layers=ngl)
        assert p.gpu_total >= prev
        # bytes only move between devices: weights and KV are conserved
        assert p.gpu_weights + p.cpu_weights == pytest.approx(pm.weight_bytes(m, "Q4_K_M")["total"])
        assert p.gpu_kv + p.cpu_kv == pytest.approx(pm.kv_cache_bytes(m, 4096))
        prev = p.gpu_total


def test_over_ask_reports_instead_of_raising():
    p = pm.place(MODELS["qwen2.5-32b"], MACHINES["rtx4060ti"], "Q4_K_M", n_ctx=8192, n_gpu_layers=65)
    assert not p.fits
    assert p.requested_bytes == p.gpu_total
    assert p.free_bytes == MACHINES["rtx4060ti"].gpu.mem_bytes - 1024 * pm.MiB
    assert p.overflow_bytes == pytest.approx(p.requested_bytes - p.free_bytes)
    assert "needs" in p.error and "free" in p.error


def test_long_context_over_ask_on_small_gpu():
    p = pm.place(MODELS["llama-3.1-8b"], MACHINES["rtx3060"], "Q4_K_M", n_ctx=131072, n_gpu_layers=33)
    assert not p.fits and p.overflow_bytes > 0


def test_unified_memory_and_cpu_only():
    p = pm.place(MODELS["llama-3.1-8b"], MACHINES["m4pro"], "Q4_K_M", n_ctx=8192)
    assert p.n_gpu_layers == 33 and p.fits
    assert p.gpu_capacity == pytest.approx(48e9 * 0.75)
    p = pm.place(MODELS["llama-3.1-8b"], MACHINES["cpu-ddr5"], "Q4_K_M", n_ctx=8192)
    assert p.n_gpu_layers == 0 and p.gpu_total == 0 and p.cpu_weights > 4.5e9
    d = pm.decode_step_time(p, MACHINES["cpu-ddr5"], context=0)
    # the module: about 13 tok/s upper bound for an 8B Q4_K_M on dual-channel DDR5 at 70%
    assert 12.5 < d["tok_per_s"] < 14.0


def test_n_cpu_moe_moves_experts_to_ram():
    m, mc = MODELS["qwen3-30b-a3b"], MACHINES["rtx4060ti"]
    a = pm.place(m, mc, "Q4_K_M", n_ctx=8192, n_gpu_layers=49)
    b = pm.place(m, mc, "Q4_K_M", n_ctx=8192, n_gpu_layers=49, n_cpu_moe=20)
    exp20 = sum(r["bytes"] for r in pm.quantize_plan(m, "Q4_K_M") if r["cls"].endswith("_exps") and r["layer"] < 20)
    assert a.gpu_weights - b.gpu_weights == exp20
    assert b.cpu_weights - a.cpu_weights == exp20
    assert b.gpu_kv == a.gpu_kv  # attention (and its KV) stays on the GPU


# ---------------------------------------------------------------- time
@pytest.mark.parametrize(
    "key,mk",
    [
        ("llama-3.1-8b", "rtx4060ti"),
        ("qwen2.5-32b", "rtx4060ti"),
        ("llama-3.1-70b", "rtx4090"),
        ("qwen3-30b-a3b", "rtx3060"),
        ("gemma-2-9b", "m4max"),
        ("llama-3.1-8b", "cpu-ddr5"),
    ],
)
@pytest.mark.parametrize("context", [0, 2000, 8000])
def test_decode_never_beats_bandwidth(key, mk, context):
    mc = MACHINES[mk]
    p = pm.place(MODELS[key], mc, "Q4_K_M", n_ctx=8192)
    d = pm.decode_step_time(p, mc, context=context)
    for side, dev in (("gpu", mc.gpu), ("cpu", mc.ram)):
        if d[side + "_bytes"]:
            # tokens/s x bytes per token on that device <= its bandwidth
            assert d[side + "_bytes"] / d[side + "_s"] <= dev.bandwidth * (1 + 1e-12)
    assert d["tok_per_s"] * (d["gpu_bytes"] + d["cpu_bytes"]) <= (mc.gpu or mc.ram).bandwidth + mc.ram.bandwidth


def test_decode_reads_kv_growing_with_context():
    mc = MACHINES["rtx4090"]
    p = pm.place(MODELS["llama-3.1-8b"], mc, "Q4_K_M", n_ctx=65536)
    a, b = pm.decode_step_time(p, mc, 0), pm.decode_step_time(p, mc, 4096)
    assert b["gpu_bytes"] - a["gpu_bytes"] == 4096 * 131072
    # module: 4.9 GB at 288 GB/s cannot exceed ~59 tok/s
    assert 4.9e9 / 288e9 == pytest.approx(1 / 58.8, rel=1e-3)


def test_batch_reads_weights_once_and_flattens():
    mc = MACHINES["rtx4060ti"]
    p = pm.place(MODELS["llama-3.1-8b"], mc, "Q4_K_M", n_ctx=8192)
    one = pm.decode_step_time(p, mc, 1000, batch=1)
    eight = pm.decode_step_time(p, mc, 1000, batch=8)
    assert eight["gpu_weight_bytes"] == one["gpu_weight_bytes"]
    assert eight["gpu_kv_bytes"] == 8 * one["gpu_kv_bytes"]
    tps = [pm.decode_step_time(p, mc, 0, batch=b)["tok_per_s"] for b in range(1, 200)]
    assert all(y >= x - 1e-9 for x, y in zip(tps, tps[1:]))  # never falls at context 0
    gains = [y / x for x, y in zip(tps, tps[1:])]
    knee = next(i + 1 for i, g in enumerate(gains) if g < 1.005)  # < 0.5% more per extra stream
    rb = pm.ridge_batch(MACHINES["rtx4060ti"].gpu, "Q4_K_M", MODELS["llama-3.1-8b"])
    assert 0.3 * rb < knee < 1.5 * rb


def test_prefill_faster_than_decode_and_partial_uses_pcie():
    mc = MACHINES["rtx4060ti"]
    p = pm.place(MODELS["qwen2.5-32b"], mc, "Q4_K_M", n_ctx=8192)
    f = pm.prefill_time(p, mc, 2000)
    assert f["parts_s"]["pcie"] > 0 and f["n_micro_batches"] == 4
    no = pm.prefill_time(p, mc, 2000, op_offload=False)
    assert "pcie" not in no["parts_s"] and no["total_s"] > f["total_s"]
    small = pm.prefill_time(p, mc, 16)  # below 32 tokens: no op offload
    assert "pcie" not in small["parts_s"]


# ---------------------------------------------------------------- the module's printed numbers
def test_module_listing_numbers():
    rows = [
        ("llama-3.1-8b", "rtx4060ti", 33, 6.0, 41.2, 0, 1505),
        ("qwen2.5-14b", "rtx3060", 49, 10.6, 28.2, 0, 465),
        ("qwen2.5-32b", "rtx4060ti", 44, 14.8, 5.8, 62, 342),
        ("llama-3.1-70b", "rtx4090", 41, 22.8, 2.7, 92, 464),
    ]
    for key, mk, ngl, vram, dec, share, pre in rows:
        mc = MACHINES[mk]
        p = pm.place(MODELS[key], mc, "Q4_K_M", n_ctx=8192)
        d = pm.decode_step_time(p, mc, context=2000)
        f = pm.prefill_time(p, mc, 2000)
        assert p.n_gpu_layers == ngl
        assert round(p.gpu_total / GB, 1) == vram
        assert round(d["tok_per_s"], 1) == dec
        assert round(100 * d["cpu_s"] / d["total_s"]) == share
        assert round(f["tok_per_s"]) == pre


def test_exercise1_qwen32b_on_rtx5090():
    rtx5090 = pm.Machine("RTX 5090 32 GB + DDR5", pm.Device("RTX 5090", 32, 1792, 209.5), pm.DDR5_DUAL, 63.0)
    q = MODELS["qwen2.5-32b"]
    size = pm.weight_bytes(q, "Q5_K_M")["total"]
    kv = pm.kv_cache_bytes(q, 16384, "f16")
    assert kv == 2 * 64 * 8 * 128 * 2 * 16384
    assert 23.0e9 < size < 23.5e9
    full = q.n_layers + 1
    f16 = pm.place(q, rtx5090, "Q5_K_M", 16384, "f16", n_gpu_layers=full)
    q8 = pm.place(q, rtx5090, "Q5_K_M", 16384, "q8_0", n_gpu_layers=full)
    assert f16.fits and q8.fits  # 32 GB holds it either way at 16k
    assert f16.gpu_kv - q8.gpu_kv == pytest.approx(kv * (1 - 34 / 64))
    d = pm.decode_step_time(f16, rtx5090, 0)
    assert d["tok_per_s"] < 1792e9 / size  # the bandwidth bound
    # at the full 32k context the f16 cache no longer fits with the --fit margin; q8_0 does
    assert not pm.place(q, rtx5090, "Q5_K_M", 32768, "f16", n_gpu_layers=full).fits
    assert pm.place(q, rtx5090, "Q5_K_M", 32768, "q8_0", n_gpu_layers=full).fits


# ---------------------------------------------------------------- roofline
def test_roofline_module_numbers():
    r = pm.roofline(pm.RTX_4090, 4.5, 1)
    assert r["intensity"] == pytest.approx(16 / 4.5)
    assert r["bound"] == "memory" and 0.015 < r["utilization"] < 0.025
    assert round(pm.ridge_batch(pm.RTX_4090, "Q4_K_M")) == 46
    m = MODELS["llama-3.1-8b"]
    ratio = (
        pm.roofline(pm.RTX_4090, pm.quant_bpw("Q4_K_M", m))["intensity"]
        / pm.roofline(pm.RTX_4090, pm.quant_bpw("F16", m))["intensity"]
    )
    assert round(ratio, 1) == 3.3
    assert pm.ridge_batch(pm.M4_MAX, "Q4_K_M") < pm.ridge_batch(pm.RTX_4090, "Q4_K_M")
    big = pm.roofline(pm.RTX_4090, 4.5, 1000)
    assert big["bound"] == "compute" and big["attainable_flops"] == pm.RTX_4090.flops


# ---------------------------------------------------------------- config.json
LLAMA_CFG = {
    "model_type": "llama",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0},
}


def test_hf_config_matches_catalog():
    m = pm.model_from_hf_config(LLAMA_CFG, name="mine")
    assert m.total_params() == MODELS["llama-3.1-8b"].total_params()
    assert pm.file_bytes(m, "Q4_K_M") == pm.file_bytes(MODELS["llama-3.1-8b"], "Q4_K_M")
    p = pm.place(m, MACHINES["rtx4090"], "Q4_K_M", 8192)
    assert p.fits and p.n_gpu_layers == 33


def test_hf_config_other_families():
    moe = {
        "model_type": "qwen3_moe",
        "num_hidden_layers": 48,
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "vocab_size": 151936,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 768,
    }
    m = pm.model_from_hf_config(moe)
    assert m.total_params() == MODELS["qwen3-30b-a3b"].total_params()
    assert 3.0e9 < m.active_params() < 3.6e9
    oss = {
        "model_type": "gpt_oss",
        "num_hidden_layers": 24,
        "hidden_size": 2880,
        "intermediate_size": 2880,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "vocab_size": 201088,
        "num_local_experts": 32,
        "num_experts_per_tok": 4,
        "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"] * 12,
    }
    m = pm.model_from_hf_config(oss)
    assert m.is_swa_layer(0) and not m.is_swa_layer(1)
    phi = {
        "model_type": "phi3",
        "num_hidden_layers": 32,
        "hidden_size": 3072,
        "intermediate_size": 8192,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "vocab_size": 32064,
    }
    names = {r["name"] for r in pm.quantize_plan(pm.model_from_hf_config(phi), "Q4_K_M")}
    assert "blk.0.attn_qkv.weight" in names


@pytest.mark.parametrize(
    "field,value",
    [
        ("num_hidden_layers", None),
        ("hidden_size", "big"),
        ("vocab_size", 0),
        ("model_type", "bert"),
        ("num_key_value_heads", 7),
    ],
)
def test_hf_config_bad_field_named(field, value):
    cfg = dict(LLAMA_CFG)
    if value is None:
        del cfg[field]
    else:
        cfg[field] = value
    with pytest.raises(ValueError, match=field):
        pm.model_from_hf_config(cfg)


# ---------------------------------------------------------------- bad input
def test_ngl_past_the_model_means_every_layer_as_in_llama_cpp():
    # -ngl 99 (or 34 on a 32-layer model) is every block and the output head, as llama.cpp reads it
    p = pm.place("llama-3.1-8b", "rtx4090", "Q4_K_M", n_gpu_layers=99)
    assert p.n_gpu_layers == 33 and p.full_offload and p.output_on_gpu
    assert p == pm.place("llama-3.1-8b", "rtx4090", "Q4_K_M", n_gpu_layers=33)


@pytest.mark.parametrize(
    "kwargs,arg",
    [
        ({"model": "llama-9"}, "model"),
        ({"quant": "Q9_K"}, "quant"),
        ({"kv_type": "fp8"}, "kv_type"),
        ({"n_ctx": 0}, "n_ctx"),
        ({"n_ctx": -5}, "n_ctx"),
        ({"n_gpu_layers": 1 << 17}, "n_gpu_layers"),
        ({"n_gpu_layers": -1}, "n_gpu_layers"),
        ({"n_gpu_layers": 2.5}, "n_gpu_layers"),
        ({"machine": "rtx9090"}, "machine"),
    ],
)
def test_bad_input_names_argument(kwargs, arg):
    args = {"model": "llama-3.1-8b", "machine": "rtx4090", "quant": "Q4_K_M", "n_ctx": 4096, "kv_type": "f16"}
    args.update(kwargs)
    with pytest.raises(ValueError, match=arg):
        pm.place(args.pop("model"), args.pop("machine"), **args)


def test_every_catalog_model_places_everywhere():
    for _key, m in MODELS.items():
        assert m.source.startswith("https://huggingface.co/")
        for _mk, mc in MACHINES.items():
            p = pm.place(m, mc, "Q4_K_M", 4096)
            d = pm.decode_step_time(p, mc, 1000)
            assert d["tok_per_s"] > 0 and math.isfinite(d["tok_per_s"])


def test_unified_memory_partial_offload_has_no_pcie_step():
    # Apple silicon: a model larger than the GPU's share runs its remaining blocks on the CPU;
    # there is no PCIe link to copy over (regression: this used to divide by pcie_gbs = 0)
    p = pm.place(MODELS["llama-3.1-70b"], MACHINES["m4pro"], "Q4_K_M", n_ctx=8192)
    assert 0 < p.n_gpu_layers < MODELS["llama-3.1-70b"].n_layers
    f = pm.prefill_time(p, MACHINES["m4pro"], 2000)
    assert "pcie" not in f["parts_s"] and f["parts_s"]["cpu"] > 0 and f["tok_per_s"] > 0
