"""llama-quantize's rules for MoE models (enginelab.ggml), each derived by hand from llama_tensor_get_type_impl in
src/llama-quant.cpp: which counter or layer a rule reads, the n_expert conditions, and the tensors a MoE file holds
besides the ones llama.cpp loads."""

from collections import Counter

import pytest

import perf_model as pm
from enginelab import ggml

M = pm.MODELS


def _types(model, quant, **kw):
    return {r["name"]: r["type"] for r in ggml.quantize_plan(model, quant, file=True, **kw)}


def _use_more_bits(i, n):  # llama-quant.cpp, with C++ integer division
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


# ---------------------------------------------------------------- GLM-4.5's MTP block
def test_glm_mtp_block_is_in_the_file_but_not_loaded():
    m = M["glm-4.5-air"]
    loaded = ggml.quantize_plan(m, "Q4_K_M")
    whole = ggml.quantize_plan(m, "Q4_K_M", file=True)
    assert max(r["layer"] for r in loaded) == m.num_hidden_layers - 1 == 45
    extra = [r for r in whole if r["layer"] == 46]
    assert whole[: len(loaded)] == loaded and whole[len(loaded) :] == extra
    # blk.46 as convert_hf_to_gguf writes it: q, k, v, output and the 3 biases, 2 norms, the router and its
    # correction bias, 3 expert and 3 shared-expert tensors, then nextn.eh_proj, embed_tokens, shared_head_head and
    # 3 norms
    assert len(extra) == 4 + 3 + 2 + 2 + 3 + 3 + 6
    names = {r["name"] for r in extra}
    assert {"blk.46.nextn.eh_proj.weight", "blk.46.nextn.embed_tokens.weight", "blk.46.ffn_down_exps.weight"} <= names
    assert sum(r["n_elements"] for r in extra if "nextn" in r["name"]) == 2 * 4096 * 4096 + 2 * 4096 * 151552 + 3 * 4096


def test_glm_mtp_tensors_get_the_default_type_not_the_embedding_or_head_rules():
    # tensor_get_category matches token_embd.weight and output.weight by their whole name, so the MTP block's own
    # embedding and head are "other" tensors: the preset's default type
    t = _types(M["glm-4.5-air"], "IQ2_XXS")
    assert t["token_embd.weight"] == "Q2_K" and t["output.weight"] == "Q5_K"
    assert t["blk.46.nextn.embed_tokens.weight"] == "IQ2_XXS" == t["blk.46.nextn.shared_head_head.weight"]
    # Q4_K_M: use_more_bits(46, 47) over the file's 47 blocks -> Q6_K, and 1408-wide rows fall back to Q8_0
    t = _types(M["glm-4.5-air"], "Q4_K_M")
    assert _use_more_bits(46, 47) and t["blk.46.ffn_down_exps.weight"] == "Q8_0"
    assert not _use_more_bits(8, 47) and t["blk.8.ffn_down_exps.weight"] == "Q5_0"  # Q4_K -> Q5_0
    assert t["blk.46.nextn.embed_tokens.weight"] == "Q4_K" and t["output.weight"] == "Q6_K"


# ---------------------------------------------------------------- the ffn_down counters
def test_iq2_ffn_down_rule_counts_tensors_not_layers():
    # The IQ2 branch reads qs.i_ffn_down, one step per ffn_down* tensor in the file's order, against
    # n_ffn_down / 8 = 48 / 8 = 6. Llama 4 Scout has a routed and a shared ffn_down per block (exps sorts before
    # shexp), so the first 6 tensors are blocks 0-2, not blocks 0-5.
    t = _types(M["llama-4-scout"], "IQ2_XXS")
    for il in range(3):
        assert t[f"blk.{il}.ffn_down_exps.weight"] == "Q2_K" == t[f"blk.{il}.ffn_down_shexp.weight"]
    for il in (3, 5, 40):
        assert t[f"blk.{il}.ffn_down_exps.weight"] == "IQ2_XXS" == t[f"blk.{il}.ffn_down_shexp.weight"]


def test_other_ffn_down_rules_read_the_tensors_block_when_there_are_experts():
    # layer_info(): with n_expert > 1 the layer comes from the name (blk.N.), so the routed and the shared ffn_down
    # of a block get the same type
    t = _types(M["llama-4-scout"], "Q4_K_M")
    for il in range(48):
        want = "Q6_K" if _use_more_bits(il, 48) else "Q4_K"
        assert t[f"blk.{il}.ffn_down_exps.weight"] == want == t[f"blk.{il}.ffn_down_shexp.weight"], il
    q = _types(M["qwen3-30b-a3b"], "Q3_K_M")  # i_layer < n_layer / 16 = 3 -> Q5_K, else Q4_K
    assert [q[f"blk.{il}.ffn_down_exps.weight"] for il in (0, 2, 3, 47)] == ["Q5_K", "Q5_K", "Q4_K", "Q4_K"]


# ---------------------------------------------------------------- n_expert == 8 (Mixtral) and the rest
def test_eight_expert_rules_apply_to_mixtral_only():
    mix, qwen = M["mixtral-8x7b"], M["qwen3-30b-a3b"]
    assert (mix.n_expert, qwen.n_expert) == (8, 128)
    for quant in ("Q2_K_MIX", "Q3_K_S", "Q4_K_S", "Q4_K_M", "Q5_K_M", "Q6_K"):
        t = _types(mix, quant)
        assert t["blk.9.attn_v.weight"] == "Q8_0" == t["blk.9.attn_k.weight"], quant
    for quant, mix_out, qwen_out in (
        ("Q2_K_MIX", "Q5_K", "Q3_K"),
        ("Q3_K_M", "Q5_K", "Q4_K"),
        ("Q4_K_M", "Q5_K", "Q4_K"),
        ("Q5_K_M", "Q5_K", "Q5_K"),  # Q5_K_M is not in the 8-expert list: its default Q5_K
    ):
        assert _types(mix, quant)["blk.9.attn_output.weight"] == mix_out, quant
        assert _types(qwen, quant)["blk.9.attn_output.weight"] == qwen_out, quant
    t = _types(qwen, "Q4_K_M")
    assert t["blk.9.attn_k.weight"] == "Q4_K"
    assert t["blk.0.attn_v.weight"] == "Q6_K" and t["blk.6.attn_v.weight"] == "Q4_K"  # use_more_bits(i, 48)


def test_eight_expert_rules_in_the_iq_presets():
    t = _types(M["mixtral-8x7b"], "IQ2_XS")
    assert t["blk.9.attn_v.weight"] == "Q4_K" == t["blk.9.attn_k.weight"]
    assert t["blk.9.attn_output.weight"] == "Q5_K"
    # IQ3_M: ffn_down gets Q4_K in the first n/8 blocks and, with 8 experts, wherever use_more_bits holds
    t = _types(M["mixtral-8x7b"], "IQ3_M")
    for il in range(32):
        want = "Q4_K" if il < 4 or _use_more_bits(il, 32) else "IQ3_S"
        assert t[f"blk.{il}.ffn_down_exps.weight"] == want, il
    t = _types(M["qwen3-30b-a3b"], "IQ3_M")  # 128 experts: only the first n/8 = 6 blocks
    assert t["blk.5.ffn_down_exps.weight"] == "Q4_K" and t["blk.8.ffn_down_exps.weight"] == "IQ3_S"


# ---------------------------------------------------------------- gpt-oss's MXFP4 experts
@pytest.mark.parametrize("quant", ["Q8_0", "Q6_K", "Q4_K_M", "Q3_K_M", "IQ4_XS", "BF16", "MXFP4_MOE"])
def test_gpt_oss_experts_stay_mxfp4(quant):
    t = _types(M["gpt-oss-20b"], quant)
    assert {v for k, v in t.items() if "_exps.weight" in k} == {"MXFP4"}


def test_gpt_oss_q4_k_m_tensor_types_match_the_published_file():
    # unsloth/gpt-oss-20b-GGUF gpt-oss-20b-Q4_K_M.gguf (revision d449b42d), as a tensor audit of the file counts
    # them: 13 Q8_0, 61 Q5_0, 24 Q4_K, 289 F32 and 72 MXFP4 tensors; its Q8_0 file: 98 Q8_0, 289 F32, 72 MXFP4
    assert Counter(_types(M["gpt-oss-20b"], "Q4_K_M").values()) == {
        "Q8_0": 13, "Q5_0": 61, "Q4_K": 24, "F32": 289, "MXFP4": 72,
    }  # fmt: skip
    assert Counter(_types(M["gpt-oss-20b"], "Q8_0").values()) == {"Q8_0": 98, "F32": 289, "MXFP4": 72}


def test_the_pure_rows_still_store_every_tensor_in_one_type():
    # the module's "every tensor Q4_K" row: experts too (2880-wide rows fall back to Q5_0)
    t = _types(M["gpt-oss-20b"], "Q4_K")
    assert t["blk.0.ffn_gate_exps.weight"] == "Q5_0" and t["blk.0.attn_output.weight"] == "Q4_K"


# ---------------------------------------------------------------- fused qkv of a hybrid model
def test_fused_qkv_is_an_attn_v_tensor_sharing_its_counter():
    # Since llama.cpp PR #19770 (2026-03-10) category_is_attn_v() takes ATTENTION_QKV: Qwen3.5-27B's 48 Gated
    # DeltaNet attn_qkv and 16 attention attn_v are one sequence for use_more_bits, counted before any type is
    # chosen (n_attention_wv = 64, PR #20357) and walked in the loader's order (block, then name). Before #19770
    # fused qkv had its own branch, which left IQ4_XS's attn_qkv at IQ4_XS (data/sizes/README.md).
    m = M["qwen3.5-27b"]
    plan = ggml.quantize_plan(m, "Q4_K_M", file=True)
    wv = [r for r in plan if r["cls"] in ("attn_v", "attn_qkv")]
    assert Counter(r["cls"] for r in wv) == {"attn_qkv": 48, "attn_v": 16}
    assert [r["layer"] for r in wv] == list(range(64))  # one attn_v-like tensor per block: 3 qkv, then 1 v
    for i, r in enumerate(wv):
        assert r["type"] == ("Q6_K" if _use_more_bits(i, 64) else "Q4_K"), r["name"]
    # IQ4_XS: Qwen3.5-27B has 24 query heads on 4 KV heads (n_gqa 6 >= 4), so every attn_v-like tensor is Q5_K
    assert m.n_gqa >= 4
    t = ggml.quantize_plan(m, "IQ4_XS", imatrix=True, file=True)
    assert {r["type"] for r in t if r["cls"] in ("attn_v", "attn_qkv")} == {"Q5_K"}
    assert {r["type"] for r in t if r["cls"] == "attn_q"} == {"IQ4_XS"}
