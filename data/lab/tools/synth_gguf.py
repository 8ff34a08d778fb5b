#!/usr/bin/env python3
"""Write a synthetic GGUF: real tensor shapes and metadata of a model, random weights.

Speed and memory in llama.cpp depend on tensor shapes, types and metadata, not on the
weight values, so a file written here measures like the real model would.

usage: synth_gguf.py CONFIG.json OUT.gguf [--type F16|Q8_0|Q4_0|MXFP4-MOE] [--layers N]

CONFIG.json (see ../configs/) holds {"model_key": HF repo id, "arch": gguf arch name,
"hf": {... values copied from the HF config.json ...}}.
--type F16: 2-D/3-D weights F16, norms/biases F32 (what convert_hf_to_gguf --outtype f16 gives).
--type Q8_0 / Q4_0: matrices written directly in that type (for files too big for F16).
--type MXFP4-MOE: expert tensors MXFP4, other matrices F16 (like the published gpt-oss GGUFs,
which keep non-expert weights in BF16).
--layers N: keep only N layers (the layer-type pattern is the model's own, from layer 0).
Tokenizer: an SPM ("llama") vocab with the model's real vocab size (<unk>, <s>, </s>,
256 byte tokens, filler tokens), enough for llama.cpp to load and run.
Needs gguf-py (the one shipped with the llama.cpp version used) and numpy.
"""

import argparse
import json
import sys
import zlib

import gguf
import numpy as np
from gguf import GGMLQuantizationType as QT

ap = argparse.ArgumentParser()
ap.add_argument("config")
ap.add_argument("out")
ap.add_argument("--type", default="F16")
ap.add_argument("--layers", type=int, default=None)
args = ap.parse_args()
cfg = json.load(open(args.config))
hf = cfg["hf"]
arch = cfg["arch"]
L = args.layers or hf["num_hidden_layers"]
E = hf["hidden_size"]
V = hf["vocab_size"]
H = hf["num_attention_heads"]
HKV = hf.get("num_key_value_heads", H)
HD = hf.get("head_dim") or E // H
FF = hf.get("intermediate_size", 0)
tied = hf.get("tie_word_embeddings", False)

T = []  # (name, numpy-order shape, kind) kind: 'norm' (F32), 'mat', 'exp' (expert matrix)


def t(name, shape, kind="mat"):
    T.append((name, tuple(int(s) for s in shape), kind))


def norm(name, n):
    t(name, (n,), "norm")


def tok_out(out_required=False):
    t("token_embd.weight", (V, E))
    norm("output_norm.weight", E)
    if not tied or out_required:
        t("output.weight", (V, E))


def attn_std(i, q_mult=1, bias=False, qk_norm=False, o_bias=False):
    t(f"blk.{i}.attn_q.weight", (H * HD * q_mult, E))
    t(f"blk.{i}.attn_k.weight", (HKV * HD, E))
    t(f"blk.{i}.attn_v.weight", (HKV * HD, E))
    t(f"blk.{i}.attn_output.weight", (E, H * HD))
    if bias:
        norm(f"blk.{i}.attn_q.bias", H * HD)
        norm(f"blk.{i}.attn_k.bias", HKV * HD)
        norm(f"blk.{i}.attn_v.bias", HKV * HD)
    if o_bias:
        norm(f"blk.{i}.attn_output.bias", E)
    if qk_norm:
        norm(f"blk.{i}.attn_q_norm.weight", HD)
        norm(f"blk.{i}.attn_k_norm.weight", HD)


def ffn_dense(i, ff=None):
    ff = ff or FF
    t(f"blk.{i}.ffn_gate.weight", (ff, E))
    t(f"blk.{i}.ffn_up.weight", (ff, E))
    t(f"blk.{i}.ffn_down.weight", (E, ff))


def ffn_moe(i, n_exp, ff_exp, shexp_ff=0):
    t(f"blk.{i}.ffn_gate_inp.weight", (n_exp, E), "norm")  # router stays F32 (llama-quantize never quantizes it)
    t(f"blk.{i}.ffn_gate_exps.weight", (n_exp, ff_exp, E), "exp")
    t(f"blk.{i}.ffn_up_exps.weight", (n_exp, ff_exp, E), "exp")
    t(f"blk.{i}.ffn_down_exps.weight", (n_exp, E, ff_exp), "exp")
    if shexp_ff:
        t(f"blk.{i}.ffn_gate_shexp.weight", (shexp_ff, E))
        t(f"blk.{i}.ffn_up_shexp.weight", (shexp_ff, E))
        t(f"blk.{i}.ffn_down_shexp.weight", (E, shexp_ff))


w = gguf.GGUFWriter(args.out, arch)
w.add_name(cfg["model_key"] + " (synthetic random weights)")
w.add_context_length(hf.get("max_position_embeddings", 4096))
w.add_embedding_length(E)
w.add_block_count(L)
w.add_head_count(H)
w.add_head_count_kv(HKV)
w.add_layer_norm_rms_eps(hf.get("rms_norm_eps", 1e-6))
w.add_rope_freq_base(hf.get("rope_theta", 10000.0))
w.add_vocab_size(V)
if hf.get("head_dim") and hf["head_dim"] != E // H:
    w.add_key_length(HD)
    w.add_value_length(HD)

if arch in ("llama", "qwen2", "qwen3"):
    w.add_feed_forward_length(FF)
    w.add_rope_dimension_count(HD)
    rs = hf.get("rope_scaling") or {}
    tok_out()
    if rs.get("rope_type") == "llama3":
        t("rope_freqs.weight", (HD // 2,), "norm")
    for i in range(L):
        norm(f"blk.{i}.attn_norm.weight", E)
        attn_std(i, bias=(arch == "qwen2"), qk_norm=(arch == "qwen3"))
        norm(f"blk.{i}.ffn_norm.weight", E)
        ffn_dense(i)
elif arch in ("gemma2", "gemma3"):
    w.add_feed_forward_length(FF)
    w.add_sliding_window(hf["sliding_window"])
    if arch == "gemma2":
        w.add_attn_logit_softcapping(hf["attn_logit_softcapping"])
        w.add_final_logit_softcapping(hf["final_logit_softcapping"])
    else:
        rs = hf.get("rope_scaling") or {}
        if rs.get("rope_type") == "linear":
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(rs["factor"])
    tied = True
    tok_out()
    for i in range(L):
        norm(f"blk.{i}.attn_norm.weight", E)
        attn_std(i, qk_norm=(arch == "gemma3"))
        norm(f"blk.{i}.post_attention_norm.weight", E)
        norm(f"blk.{i}.ffn_norm.weight", E)
        ffn_dense(i)
        norm(f"blk.{i}.post_ffw_norm.weight", E)
elif arch == "gpt-oss":
    NE = hf["num_local_experts"]
    FFE = hf["intermediate_size"]
    w.add_feed_forward_length(FFE)
    w.add_expert_feed_forward_length(FFE)
    w.add_expert_count(NE)
    w.add_expert_used_count(hf["num_experts_per_tok"])
    w.add_sliding_window(hf["sliding_window"])
    w.add_rope_dimension_count(HD)
    rs = hf["rope_scaling"]
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(rs["factor"])
    w.add_rope_scaling_orig_ctx_len(rs["original_max_position_embeddings"])
    w.add_key_length(HD)
    w.add_value_length(HD)
    tied = False
    tok_out()
    for i in range(L):
        norm(f"blk.{i}.attn_norm.weight", E)
        norm(f"blk.{i}.post_attention_norm.weight", E)
        attn_std(i, bias=True, o_bias=True)
        norm(f"blk.{i}.attn_sinks.weight", H)
        ffn_moe(i, NE, FFE)
        norm(f"blk.{i}.ffn_gate_inp.bias", NE)
        t(f"blk.{i}.ffn_gate_exps.bias", (NE, FFE), "norm")
        t(f"blk.{i}.ffn_up_exps.bias", (NE, FFE), "norm")
        t(f"blk.{i}.ffn_down_exps.bias", (NE, E), "norm")
elif arch == "qwen3moe":
    NE = hf["num_experts"]
    FFE = hf["moe_intermediate_size"]
    w.add_feed_forward_length(FF)
    w.add_expert_feed_forward_length(FFE)
    w.add_expert_count(NE)
    w.add_expert_used_count(hf["num_experts_per_tok"])
    w.add_rope_dimension_count(HD)
    tok_out()
    for i in range(L):
        norm(f"blk.{i}.attn_norm.weight", E)
        attn_std(i, qk_norm=True)
        norm(f"blk.{i}.ffn_norm.weight", E)
        ffn_moe(i, NE, FFE)
elif arch == "llama4":
    NE = hf["num_local_experts"]
    FFE = hf["intermediate_size"]
    FFM = hf["intermediate_size_mlp"]
    step = hf.get("interleave_moe_layer_step", 1)
    w.add_feed_forward_length(FFM)
    w.add_expert_feed_forward_length(FFE)
    w.add_expert_count(NE)
    w.add_expert_used_count(hf["num_experts_per_tok"])
    w.add_interleave_moe_layer_step(step)
    w.add_rope_dimension_count(HD)
    tok_out()
    for i in range(L):
        norm(f"blk.{i}.attn_norm.weight", E)
        attn_std(i)
        norm(f"blk.{i}.ffn_norm.weight", E)
        if (i + 1) % step == 0:
            ffn_moe(i, NE, FFE, shexp_ff=FFE)
        else:
            ffn_dense(i, FFM)
elif arch == "deepseek2":
    NE = hf["n_routed_experts"]
    FFE = hf["moe_intermediate_size"]
    NSH = hf["n_shared_experts"]
    KVR = hf["kv_lora_rank"]
    QR = hf.get("q_lora_rank")
    ROPE = hf["qk_rope_head_dim"]
    NOPE = hf["qk_nope_head_dim"]
    VH = hf["v_head_dim"]
    DENSE = hf["first_k_dense_replace"]
    w.add_feed_forward_length(FF)
    w.add_expert_feed_forward_length(FFE)
    w.add_expert_count(NE)
    w.add_expert_used_count(hf["num_experts_per_tok"])
    w.add_expert_shared_count(NSH)
    w.add_leading_dense_block_count(DENSE)
    w.add_expert_weights_scale(hf.get("routed_scaling_factor", 1.0))
    w.add_kv_lora_rank(KVR)
    w.add_q_lora_rank(QR or 0)  # 0 = no q LoRA (needed when layers are cut: llama.cpp detects 'Lite' by n_layer)
    w.add_rope_dimension_count(ROPE)
    # MLA layout as written by current convert_hf_to_gguf: one KV head of 576 = kv_lora_rank + rope
    w.add_head_count_kv(1)
    w.add_key_length(KVR + ROPE)
    w.add_value_length(KVR)
    w.add_key_length_mla(NOPE + ROPE)
    w.add_value_length_mla(VH)
    rs = hf.get("rope_scaling") or {}
    if rs.get("type") == "yarn":
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(rs["factor"])
        w.add_rope_scaling_orig_ctx_len(rs["original_max_position_embeddings"])
        w.add_rope_scaling_yarn_log_mul(0.1 * rs.get("mscale_all_dim", 0.707))
    tok_out()
    for i in range(L):
        norm(f"blk.{i}.attn_norm.weight", E)
        norm(f"blk.{i}.attn_kv_a_norm.weight", KVR)
        if QR:
            norm(f"blk.{i}.attn_q_a_norm.weight", QR)
            t(f"blk.{i}.attn_q_a.weight", (QR, E))
            t(f"blk.{i}.attn_q_b.weight", (H * (NOPE + ROPE), QR))
        else:
            t(f"blk.{i}.attn_q.weight", (H * (NOPE + ROPE), E))
        t(f"blk.{i}.attn_kv_a_mqa.weight", (KVR + ROPE, E))
        t(f"blk.{i}.attn_k_b.weight", (H, KVR, NOPE))
        t(f"blk.{i}.attn_v_b.weight", (H, VH, KVR))
        t(f"blk.{i}.attn_output.weight", (E, H * VH))
        norm(f"blk.{i}.ffn_norm.weight", E)
        if i < DENSE:
            ffn_dense(i)
        else:
            ffn_moe(i, NE, FFE, shexp_ff=FFE * NSH)
elif arch == "glm4moe":
    NE = hf["n_routed_experts"]
    FFE = hf["moe_intermediate_size"]
    NSH = hf["n_shared_experts"]
    DENSE = hf["first_k_dense_replace"]
    w.add_feed_forward_length(FF)
    w.add_expert_feed_forward_length(FFE)
    w.add_expert_count(NE)
    w.add_expert_used_count(hf["num_experts_per_tok"])
    w.add_expert_shared_count(NSH)
    w.add_leading_dense_block_count(DENSE)
    w.add_expert_weights_scale(hf.get("routed_scaling_factor", 1.0))
    w.add_expert_weights_norm(hf.get("norm_topk_prob", True))
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    w.add_rope_dimension_count(int(HD * hf.get("partial_rotary_factor", 0.5)))
    w.add_key_length(HD)
    w.add_value_length(HD)
    tok_out()
    for i in range(L):
        norm(f"blk.{i}.attn_norm.weight", E)
        attn_std(i, bias=hf.get("attention_bias", True), qk_norm=hf.get("use_qk_norm", False))
        norm(f"blk.{i}.post_attention_norm.weight", E)
        if i < DENSE:
            ffn_dense(i)
        else:
            ffn_moe(i, NE, FFE, shexp_ff=FFE * NSH)
            norm(f"blk.{i}.exp_probs_b.bias", NE)
    # the NextN/MTP layer is not written (llama.cpp skips it at load unless MTP is requested)
elif arch == "qwen3next":
    NE = hf["num_experts"]
    FFE = hf["moe_intermediate_size"]
    FFS = hf["shared_expert_intermediate_size"]
    NK = hf["linear_num_key_heads"]
    NV = hf["linear_num_value_heads"]
    DK = hf["linear_key_head_dim"]
    DV = hf["linear_value_head_dim"]
    KC = hf["linear_conv_kernel_dim"]
    interval = hf.get("full_attention_interval", 4)
    w.add_feed_forward_length(FF)
    w.add_expert_feed_forward_length(FFE)
    w.add_expert_shared_feed_forward_length(FFS)
    w.add_expert_count(NE)
    w.add_expert_used_count(hf["num_experts_per_tok"])
    w.add_rope_dimension_count(int(HD * hf.get("partial_rotary_factor", 0.25)))
    w.add_key_length(HD)
    w.add_value_length(HD)
    w.add_ssm_conv_kernel(KC)
    w.add_ssm_inner_size(DV * NV)
    w.add_ssm_state_size(DK)
    w.add_ssm_time_step_rank(NV)
    w.add_ssm_group_count(NK)
    w.add_full_attention_interval(interval)
    tok_out()
    key_dim, value_dim = DK * NK, DV * NV
    for i in range(L):
        norm(f"blk.{i}.attn_norm.weight", E)
        norm(f"blk.{i}.post_attention_norm.weight", E)
        if (i + 1) % interval == 0:
            attn_std(i, q_mult=2, qk_norm=True)
        else:
            t(f"blk.{i}.attn_qkv.weight", (key_dim * 2 + value_dim, E))
            t(f"blk.{i}.attn_gate.weight", (value_dim, E))
            t(f"blk.{i}.ssm_conv1d.weight", (key_dim * 2 + value_dim, KC), "norm")
            norm(f"blk.{i}.ssm_dt.bias", NV)
            norm(f"blk.{i}.ssm_a", NV)
            t(f"blk.{i}.ssm_ba.weight", (2 * NV, E))
            norm(f"blk.{i}.ssm_norm.weight", DV)
            t(f"blk.{i}.ssm_out.weight", (E, value_dim))
        ffn_moe(i, NE, FFE, shexp_ff=FFS)
        norm(f"blk.{i}.ffn_gate_inp_shexp.weight", E)
else:
    sys.exit(f"arch {arch} not handled")

# ---- tokenizer: SPM with the real vocab size ----
toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
types = [2, 3, 3] + [6] * 256
toks += [f"\u2581t{i}" for i in range(V - len(toks))]
types += [1] * (V - len(types))
w.add_tokenizer_model("llama")
w.add_token_list(toks)
w.add_token_scores([-float(i) for i in range(V)])
w.add_token_types(types)
w.add_bos_token_id(1)
w.add_eos_token_id(2)
w.add_unk_token_id(0)
if arch == "gpt-oss":
    w.add_add_bos_token(False)

# ---- tensor types ----
mode = args.type.upper()


def qtype(kind):
    if kind == "norm":
        return QT.F32
    if mode == "F16":
        return QT.F16
    if mode == "MXFP4-MOE":
        return QT.MXFP4 if kind == "exp" else QT.F16
    return QT[mode]


ftype = {
    "F16": gguf.LlamaFileType.MOSTLY_F16,
    "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
    "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
    "MXFP4-MOE": gguf.LlamaFileType.MOSTLY_MXFP4_MOE,
}[mode]
w.add_file_type(ftype)
w.add_quantization_version(gguf.GGML_QUANT_VERSION)

rng = np.random.default_rng(0)
POOL_N = 1 << 22  # random values reused cyclically (values do not matter for speed/memory)
pool_f = (rng.standard_normal(POOL_N) * 0.02).astype(np.float32)
pools = {}


def pool_bytes(q):
    if q not in pools:
        if q == QT.F32:
            pools[q] = pool_f.view(np.uint8)
        elif q == QT.F16:
            pools[q] = pool_f.astype(np.float16).view(np.uint8)
        else:
            pools[q] = gguf.quants.quantize(pool_f.reshape(-1, 256), q).reshape(-1)
    return pools[q]


plan = []
for name, shape, kind in T:
    q = qtype(kind)
    bs, ts = gguf.GGML_QUANT_SIZES[q]
    if shape[-1] % bs:
        q = QT.F16 if kind != "norm" else QT.F32
        bs, ts = gguf.GGML_QUANT_SIZES[q]
    nbytes = int(np.prod(shape)) // bs * ts
    plan.append((name, shape, q, nbytes))
    bshape = list(shape)
    bshape[-1] = shape[-1] // bs * ts
    w.add_tensor_info(name, bshape, np.dtype(np.uint8), nbytes, raw_dtype=q)

w.write_header_to_file()
w.write_kv_data_to_file()
w.write_ti_data_to_file()
fout = w.fout[0]
total = 0
for name, _shape, q, nbytes in plan:
    w.write_padding(fout, fout.tell())
    src = pool_bytes(q)
    bsz = gguf.GGML_QUANT_SIZES[q][1]
    off = (zlib.crc32(name.encode()) % 997) * bsz * 1021 % len(src)  # whole blocks
    left = nbytes
    while left:
        chunk = src[off : off + left]
        chunk.tofile(fout)
        left -= len(chunk)
        off = 0
    w.write_padding(fout, nbytes)
    total += nbytes
fout.close()
print(f"wrote {args.out}: {len(plan)} tensors, {total / 2**30:.3f} GiB of tensor data, layers={L}, arch={arch}")
