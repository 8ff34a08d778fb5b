"""Tests for pylib/gguf_header.py, the stdlib GGUF header reader.

The oracle is llama.cpp's own `gguf` package (PyPI, a test dependency only): we write files with its
GGUFWriter, read them with ours and with its GGUFReader, and compare everything. Then hostile inputs, one
per way a header can lie, and a hypothesis fuzz test over mutated valid headers.
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
import struct
import sys
import time
import tracemalloc
from pathlib import Path

import gguf  # llama.cpp's gguf-py, numpy and hypothesis: the test extras (a missing one is an error, not a skip)
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pylib"))

from enginelab import gguf_header as gh  # noqa: E402
from enginelab.gguf_header import (  # noqa: E402
    GGML_TYPES,
    GGUFError,
    GGUFLimitError,
    GGUFTruncated,
    read_gguf,
)

Q = gguf.GGMLQuantizationType
VT = gguf.GGUFValueType


# ---------------------------------------------------------------------------------------------------------------
# Writing test files with gguf-py's GGUFWriter
# ---------------------------------------------------------------------------------------------------------------


def quant_tensor(ggml_type, *ggml_shape):
    """Raw bytes for a tensor of `ggml_type` with shape given in ggml order (ne0 = row length first).

    GGUFWriter takes quantized data as uint8 rows of bytes in numpy order, plus raw_dtype."""
    block, size = GGML_TYPES[int(ggml_type)].block_size, GGML_TYPES[int(ggml_type)].type_size
    ne0, rest = ggml_shape[0], ggml_shape[1:]
    assert ne0 % block == 0
    rng = np.random.default_rng(len(ggml_shape) + ne0)
    return rng.integers(0, 256, size=(*reversed(rest), ne0 // block * size), dtype=np.uint8)


def write_gguf(path, arch, kvs=(), tensors=(), alignment=None, endianess=None):
    """kvs: (key, value, GGUFValueType, sub_type or None); tensors: (name, np.ndarray, raw_dtype or None)."""
    kwargs = {} if endianess is None else {"endianess": endianess}
    w = gguf.GGUFWriter(str(path), arch, **kwargs)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for key, value, vtype, sub in kvs:
        w.add_key_value(key, value, vtype, sub)
    for name, data, raw_dtype in tensors:
        w.add_tensor(name, data, raw_dtype=raw_dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(path)


def arch_kvs(arch, *, layers, embd, ff, heads, kv_heads, ctx, extra=()):
    return [
        (f"{arch}.block_count", layers, VT.UINT32, None),
        (f"{arch}.embedding_length", embd, VT.UINT32, None),
        (f"{arch}.feed_forward_length", ff, VT.UINT32, None),
        (
            f"{arch}.attention.head_count",
            heads,
            VT.UINT32 if isinstance(heads, int) else VT.ARRAY,
            None if isinstance(heads, int) else VT.INT32,
        ),
        (
            f"{arch}.attention.head_count_kv",
            kv_heads,
            VT.UINT32 if isinstance(kv_heads, int) else VT.ARRAY,
            None if isinstance(kv_heads, int) else VT.INT32,
        ),
        (f"{arch}.context_length", ctx, VT.UINT32, None),
        (f"{arch}.rope.freq_base", 1000000.0, VT.FLOAT32, None),
        (f"{arch}.attention.layer_norm_rms_epsilon", 1e-6, VT.FLOAT32, None),
        ("general.file_type", 15, VT.UINT32, None),
        ("general.quantization_version", 2, VT.UINT32, None),
        *extra,
    ]


def vocab_kvs(n_vocab, model="gpt2"):
    tokens = [f"tok{i}" for i in range(n_vocab - 3)] + ["<|im_start|>", "Ġthe", "日本"]
    return [
        ("tokenizer.ggml.model", model, VT.STRING, None),
        ("tokenizer.ggml.tokens", tokens, VT.ARRAY, VT.STRING),
        ("tokenizer.ggml.token_type", [1] * n_vocab, VT.ARRAY, VT.INT32),
        ("tokenizer.ggml.merges", ["Ġ t", "h e", "Ġt he"], VT.ARRAY, VT.STRING),
        ("tokenizer.ggml.bos_token_id", 1, VT.UINT32, None),
        ("tokenizer.chat_template", "{% for m in messages %}{{ m['content'] }}{% endfor %}", VT.STRING, None),
    ]


def f32(*ggml_shape):
    return np.ones(tuple(reversed(ggml_shape)), dtype=np.float32)


def f16(*ggml_shape):
    return np.ones(tuple(reversed(ggml_shape)), dtype=np.float16)


def make_llama(path):
    # 2 layers, n_embd 256, 8 heads of 32, GQA with 2 KV heads, 32-token vocabulary
    t = [("token_embd.weight", quant_tensor(Q.Q4_K, 256, 32), Q.Q4_K)]
    for i in range(2):
        t += [
            (f"blk.{i}.attn_norm.weight", f32(256), None),
            (f"blk.{i}.attn_q.weight", quant_tensor(Q.Q4_K, 256, 256), Q.Q4_K),
            (f"blk.{i}.attn_k.weight", quant_tensor(Q.Q8_0, 256, 64), Q.Q8_0),
            (f"blk.{i}.attn_v.weight", quant_tensor(Q.Q6_K, 256, 64), Q.Q6_K),
            (f"blk.{i}.attn_output.weight", quant_tensor(Q.Q4_K, 256, 256), Q.Q4_K),
            (f"blk.{i}.ffn_gate.weight", quant_tensor(Q.Q4_K, 256, 512), Q.Q4_K),
            (f"blk.{i}.ffn_up.weight", quant_tensor(Q.Q5_K, 256, 512), Q.Q5_K),
            (f"blk.{i}.ffn_down.weight", quant_tensor(Q.Q6_K, 512, 256), Q.Q6_K),
            (f"blk.{i}.ffn_norm.weight", f32(256), None),
        ]
    t += [("output_norm.weight", f32(256), None), ("output.weight", quant_tensor(Q.Q6_K, 256, 32), Q.Q6_K)]
    kvs = arch_kvs(
        "llama",
        layers=2,
        embd=256,
        ff=512,
        heads=8,
        kv_heads=2,
        ctx=8192,
        extra=[("llama.rope.dimension_count", 32, VT.UINT32, None)],
    ) + vocab_kvs(32, "llama")
    return write_gguf(path, "llama", kvs, t)


def make_qwen2(path):
    # tied embeddings (no output.weight), biases, more quant types, custom alignment 64
    t = [("token_embd.weight", quant_tensor(Q.Q8_0, 128, 48), Q.Q8_0)]
    t += [
        ("blk.0.attn_q.weight", quant_tensor(Q.IQ4_XS, 256, 128), Q.IQ4_XS),
        ("blk.0.attn_q.bias", f32(128), None),
        ("blk.0.attn_k.weight", quant_tensor(Q.Q5_0, 128, 32), Q.Q5_0),
        ("blk.0.attn_v.weight", quant_tensor(Q.Q4_0, 128, 32), Q.Q4_0),
        ("blk.0.attn_output.weight", quant_tensor(Q.BF16, 128, 128), Q.BF16),
        ("blk.0.ffn_up.weight", quant_tensor(Q.Q3_K, 256, 96), Q.Q3_K),
        ("blk.0.ffn_down.weight", quant_tensor(Q.Q2_K, 512, 128), Q.Q2_K),
        ("blk.0.ffn_gate.weight", f16(128, 384), None),
        ("output_norm.weight", f32(128), None),
    ]
    kvs = arch_kvs("qwen2", layers=1, embd=128, ff=384, heads=4, kv_heads=1, ctx=32768) + vocab_kvs(48)
    return write_gguf(path, "qwen2", kvs, t, alignment=64)


def make_qwen3moe(path):
    # 8 experts, 2 used per token; expert tensors are 3-D: (n_embd, n_ff_exp, n_expert) in ggml order
    t = [("token_embd.weight", quant_tensor(Q.Q4_K, 256, 40), Q.Q4_K)]
    t += [
        ("blk.0.attn_q.weight", quant_tensor(Q.Q4_K, 256, 512), Q.Q4_K),
        ("blk.0.attn_k.weight", quant_tensor(Q.Q4_K, 256, 128), Q.Q4_K),
        ("blk.0.attn_q_norm.weight", f32(128), None),
        ("blk.0.ffn_gate_inp.weight", f32(256, 8), None),
        ("blk.0.ffn_gate_exps.weight", quant_tensor(Q.Q4_K, 256, 64, 8), Q.Q4_K),
        ("blk.0.ffn_up_exps.weight", quant_tensor(Q.IQ2_XXS, 256, 64, 8), Q.IQ2_XXS),
        ("blk.0.ffn_down_exps.weight", quant_tensor(Q.Q8_0, 64, 256, 8), Q.Q8_0),
        ("output.weight", quant_tensor(Q.Q6_K, 256, 40), Q.Q6_K),
    ]
    kvs = arch_kvs(
        "qwen3moe",
        layers=1,
        embd=256,
        ff=768,
        heads=4,
        kv_heads=1,
        ctx=40960,
        extra=[
            ("qwen3moe.expert_count", 8, VT.UINT32, None),
            ("qwen3moe.expert_used_count", 2, VT.UINT32, None),
            ("qwen3moe.expert_feed_forward_length", 64, VT.UINT32, None),
            ("qwen3moe.attention.key_length", 128, VT.UINT32, None),
            ("qwen3moe.attention.value_length", 128, VT.UINT32, None),
        ],
    ) + vocab_kvs(40)
    return write_gguf(path, "qwen3moe", kvs, t)


def make_gpt_oss(path):
    # MXFP4 experts, sliding window, attention sinks, head_dim 64 != n_embd / n_head
    t = [
        ("token_embd.weight", quant_tensor(Q.Q8_0, 128, 24), Q.Q8_0),
        ("blk.0.attn_sinks.weight", f32(4), None),
        ("blk.0.attn_q.weight", quant_tensor(Q.Q8_0, 128, 256), Q.Q8_0),
        ("blk.0.ffn_gate_exps.weight", quant_tensor(Q.MXFP4, 128, 128, 4), Q.MXFP4),
        ("blk.0.ffn_down_exps.weight", quant_tensor(Q.MXFP4, 128, 128, 4), Q.MXFP4),
        ("blk.0.ffn_gate_inp.bias", f32(4), None),
        ("output.weight", quant_tensor(Q.Q8_0, 128, 24), Q.Q8_0),
    ]
    kvs = arch_kvs(
        "gpt-oss",
        layers=1,
        embd=128,
        ff=128,
        heads=4,
        kv_heads=1,
        ctx=131072,
        extra=[
            ("gpt-oss.expert_count", 4, VT.UINT32, None),
            ("gpt-oss.expert_used_count", 2, VT.UINT32, None),
            ("gpt-oss.expert_feed_forward_length", 128, VT.UINT32, None),
            ("gpt-oss.attention.key_length", 64, VT.UINT32, None),
            ("gpt-oss.attention.value_length", 64, VT.UINT32, None),
            ("gpt-oss.attention.sliding_window", 128, VT.UINT32, None),
        ],
    ) + vocab_kvs(24)
    return write_gguf(path, "gpt-oss", kvs, t)


def make_hybrid(path):
    # per-layer head counts, as hybrid attention/recurrent models (LFM2, Jamba, ...) write them
    t = [
        ("token_embd.weight", f16(64, 16), None),
        ("blk.0.attn_q.weight", quant_tensor(Q.IQ3_S, 256, 64), Q.IQ3_S),
        ("blk.1.shortconv.conv.weight", quant_tensor(Q.TQ2_0, 256, 64), Q.TQ2_0),
        ("blk.2.ffn_up.weight", quant_tensor(Q.IQ1_M, 256, 8), Q.IQ1_M),
        ("blk.3.ffn_up.weight", quant_tensor(Q.IQ2_S, 256, 8), Q.IQ2_S),
    ]
    kvs = arch_kvs("lfm2", layers=4, embd=64, ff=[128, 128, 256, 128], heads=4, kv_heads=[0, 2, 0, 2], ctx=4096)
    kvs[2] = ("lfm2.feed_forward_length", [128, 128, 256, 128], VT.ARRAY, VT.UINT32)
    return write_gguf(path, "lfm2", kvs, t)


def make_all_types(path, endianess=None):
    """Every metadata value type, scalar and array, nested arrays, and a few plain tensor types."""
    kvs = [
        ("test.uint8", 255, VT.UINT8, None),
        ("test.int8", -128, VT.INT8, None),
        ("test.uint16", 65535, VT.UINT16, None),
        ("test.int16", -32768, VT.INT16, None),
        ("test.uint32", 2**32 - 1, VT.UINT32, None),
        ("test.int32", -(2**31), VT.INT32, None),
        ("test.float32", 0.1, VT.FLOAT32, None),
        ("test.bool_true", True, VT.BOOL, None),
        ("test.bool_false", False, VT.BOOL, None),
        ("test.string", "héllo, wörld ✓ 日本語", VT.STRING, None),
        ("test.empty_string", "", VT.STRING, None),
        ("test.uint64", 2**64 - 1, VT.UINT64, None),
        ("test.int64", -(2**63), VT.INT64, None),
        ("test.float64", math.pi, VT.FLOAT64, None),
        ("test.arr.uint8", [0, 1, 255], VT.ARRAY, VT.UINT8),
        ("test.arr.int8", [-128, 0, 127], VT.ARRAY, VT.INT8),
        ("test.arr.uint16", [0, 65535], VT.ARRAY, VT.UINT16),
        ("test.arr.int16", [-32768, 32767], VT.ARRAY, VT.INT16),
        ("test.arr.uint32", [0, 2**32 - 1], VT.ARRAY, VT.UINT32),
        ("test.arr.int32", [-(2**31), 2**31 - 1], VT.ARRAY, VT.INT32),
        ("test.arr.float32", [0.5, -1.25, 3.0e38], VT.ARRAY, VT.FLOAT32),
        ("test.arr.bool", [True, False, True], VT.ARRAY, VT.BOOL),
        ("test.arr.string", ["a", "", "ü", "with space"], VT.ARRAY, VT.STRING),
        ("test.arr.uint64", [0, 2**64 - 1], VT.ARRAY, VT.UINT64),
        ("test.arr.int64", [-(2**63), 2**63 - 1], VT.ARRAY, VT.INT64),
        ("test.arr.float64", [math.e, -0.0, 1e-300], VT.ARRAY, VT.FLOAT64),
        ("test.arr.nested_int", [[1, 2, 3], [4], [5, 6]], VT.ARRAY, None),
        ("test.arr.nested_str", [["x", "y"], ["z"]], VT.ARRAY, None),
    ]
    tensors = [
        ("t.f32", f32(8, 2), None),
        ("t.f16", f16(8), None),
        ("t.f64", np.zeros((3,), dtype=np.float64), None),
        ("t.i8", np.zeros((5,), dtype=np.int8), None),
        ("t.i16", np.zeros((2, 3), dtype=np.int16), None),
        ("t.i32", np.zeros((7,), dtype=np.int32), None),
        ("t.i64", np.zeros((1, 1, 2, 2), dtype=np.int64), None),
    ]
    return write_gguf(path, "test", kvs, tensors, endianess=endianess)


MAKERS = {
    "llama": make_llama,
    "qwen2": make_qwen2,
    "qwen3moe": make_qwen3moe,
    "gpt-oss": make_gpt_oss,
    "lfm2": make_hybrid,
    "all_types": make_all_types,
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("gguf")
    out = {name: make(d / f"{name}.gguf") for name, make in MAKERS.items()}
    out["big_endian"] = make_all_types(d / "big_endian.gguf", endianess=gguf.GGUFEndian.BIG)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Against the oracle
# ---------------------------------------------------------------------------------------------------------------


def flatten(value):
    if isinstance(value, list):
        return [x for v in value for x in (flatten(v) if isinstance(v, list) else [v])]
    return value


def reader_type_desc(types):
    """gguf-py's field.types, e.g. [ARRAY, ARRAY, INT32], as our metadata_types string."""
    if types[0] != VT.ARRAY:
        return types[0].name
    return f"ARRAY[{reader_type_desc(types[1:])}]"


def assert_same_as_reader(path):
    ours = read_gguf(path)
    ref = gguf.GGUFReader(path)

    ref_fields = {k: f for k, f in ref.fields.items() if not k.startswith("GGUF.")}
    assert list(ours.metadata) == list(ref_fields)  # same keys, same order
    for key, field in ref_fields.items():
        assert ours.metadata_types[key] == reader_type_desc(field.types), key
        expected = field.contents()
        got = ours.metadata[key]
        if field.types[0] == VT.ARRAY and field.types[1] == VT.ARRAY:
            got = flatten(got)  # gguf-py's contents() flattens nested arrays
        if isinstance(expected, float) and math.isnan(expected):
            assert math.isnan(got)
        else:
            assert got == expected, key
        assert type(got) is type(expected), key

    assert ours.alignment == ref.alignment
    assert ours.data_offset == ref.data_offset
    assert ours.byte_order == ("big" if ref.endianess == gguf.GGUFEndian.BIG else "little")
    assert len(ours.tensors) == len(ref.tensors)
    for t, r in zip(ours.tensors, ref.tensors):
        assert t.name == r.name
        assert t.shape == tuple(int(x) for x in r.shape)
        assert t.ggml_type == int(r.tensor_type)
        assert t.type_name == r.tensor_type.name
        assert t.n_elements == r.n_elements
        assert t.n_bytes == r.n_bytes
        assert ours.data_offset + t.offset == r.data_offset
    assert ours.file_size_estimate() == os.path.getsize(path)
    return ours


@pytest.mark.parametrize("name", [*MAKERS, "big_endian"])
def test_matches_gguf_reader(files, name):
    assert_same_as_reader(files[name])


def test_metadata_values_exact(files):
    h = read_gguf(files["all_types"])
    md = h.metadata
    assert md["test.uint64"] == 2**64 - 1 and md["test.int64"] == -(2**63)
    assert md["test.float32"] == struct.unpack("<f", struct.pack("<f", 0.1))[0]  # float32, widened exactly
    assert md["test.bool_true"] is True and md["test.bool_false"] is False
    assert md["test.string"] == "héllo, wörld ✓ 日本語" and md["test.empty_string"] == ""
    assert md["test.arr.nested_int"] == [[1, 2, 3], [4], [5, 6]]
    assert md["test.arr.nested_str"] == [["x", "y"], ["z"]]
    assert h.metadata_types["test.arr.nested_str"] == "ARRAY[ARRAY[STRING]]"
    assert md["test.arr.bool"] == [True, False, True]
    assert h.version == 3 and h.architecture == "test"


def test_big_endian_same_values(files):
    little, big = read_gguf(files["all_types"]), read_gguf(files["big_endian"])
    assert big.byte_order == "big" and little.byte_order == "little"
    assert big.metadata == little.metadata
    assert [(t.name, t.shape, t.ggml_type) for t in big.tensors] == [
        (t.name, t.shape, t.ggml_type) for t in little.tensors
    ]


def test_sizes_by_hand(files):
    h = read_gguf(files["llama"])
    q = h.tensor("blk.0.attn_q.weight")
    # Q4_K: 256 weights per 144-byte block; a 256x256 matrix is 256 rows x 1 block = 36,864 bytes (4.5 bits/weight)
    assert (q.shape, q.type_name, q.n_elements, q.n_bytes) == ((256, 256), "Q4_K", 65536, 256 * 144)
    k = h.tensor("blk.0.attn_k.weight")
    assert k.n_bytes == 64 * (256 // 32) * 34  # Q8_0: 34 bytes per 32 weights
    v = h.tensor("blk.0.attn_v.weight")
    assert v.n_bytes == 64 * 210  # Q6_K: 210 bytes per 256 weights
    norm = h.tensor("blk.0.attn_norm.weight")
    assert (norm.shape, norm.n_bytes) == ((256,), 1024)
    moe = read_gguf(files["qwen3moe"]).tensor("blk.0.ffn_gate_exps.weight")
    assert moe.shape == (256, 64, 8) and moe.n_bytes == 8 * 64 * 144
    mx = read_gguf(files["gpt-oss"]).tensor("blk.0.ffn_gate_exps.weight")
    assert mx.type_name == "MXFP4" and mx.n_bytes == 4 * 128 * (128 // 32) * 17  # 17 bytes per 32 weights
    # tensor data offsets are each padded to the alignment (32 by default, 64 in the qwen2 file)
    for name in ("llama", "qwen2"):
        hh = read_gguf(files[name])
        assert all(t.offset % hh.alignment == 0 for t in hh.tensors)
        assert hh.data_offset % hh.alignment == 0 and hh.data_offset >= hh.header_bytes
    assert read_gguf(files["qwen2"]).alignment == 64


def test_ggml_type_table_matches_gguf_py():
    # every type gguf-py knows has the same id, name, block size and block bytes here
    for qtype, (block, size) in gguf.GGML_QUANT_SIZES.items():
        info = GGML_TYPES[int(qtype)]
        assert info.name == qtype.name
        if qtype == Q.Q8_1:
            # ggml-common.h: static_assert(sizeof(block_q8_1) == 2*sizeof(ggml_half) + QK8_1) = 36 bytes.
            # gguf-py still lists 4 + 4 + 32 = 40 (its float d, s era); Q8_1 never appears in files.
            assert (info.block_size, info.type_size, size) == (32, 36, 40)
            continue
        assert (info.block_size, info.type_size) == (block, size), qtype.name
    required = (
        "F32 F16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1 Q2_K Q3_K Q4_K Q5_K Q6_K Q8_K IQ2_XXS IQ2_XS IQ3_XXS IQ1_S "
        "IQ4_NL IQ3_S IQ2_S IQ4_XS I8 I16 I32 I64 F64 IQ1_M BF16 TQ1_0 TQ2_0 MXFP4"
    ).split()
    assert all(name in gh.GGML_TYPE_IDS for name in required)
    # bits per weight, by hand: Q4_K 144*8/256 = 4.5, Q6_K 210*8/256 = 6.5625, Q8_0 34*8/32 = 8.5
    assert GGML_TYPES[12].bits_per_weight == 4.5 and GGML_TYPES[14].bits_per_weight == 6.5625
    assert GGML_TYPES[8].bits_per_weight == 8.5
    assert gh.tensor_n_bytes((4096, 4096), 12) == 4096 * 16 * 144
    with pytest.raises(ValueError, match="whole number of blocks"):
        gh.tensor_n_bytes((100, 2), 12)


def test_hparams(files):
    hp = read_gguf(files["llama"]).hparams()
    assert hp == {
        "model_type": "llama",
        "num_hidden_layers": 2,
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "max_position_embeddings": 8192,
        "rope_theta": 1000000.0,
        "rms_norm_eps": pytest.approx(1e-6),
        "head_dim": 32,  # 256 / 8
        "rope_dimension_count": 32,  # llama.rope.dimension_count (read since issue 16: MLA's rotary part)
        "vocab_size": 32,
        "tie_word_embeddings": False,
    }
    hp = read_gguf(files["qwen2"]).hparams()
    assert hp["tie_word_embeddings"] is True and hp["num_key_value_heads"] == 1 and hp["head_dim"] == 32
    hp = read_gguf(files["qwen3moe"]).hparams()
    assert hp["model_type"] == "qwen3_moe"
    assert (hp["num_local_experts"], hp["num_experts"], hp["num_experts_per_tok"]) == (8, 8, 2)
    assert (hp["moe_intermediate_size"], hp["intermediate_size"]) == (64, 768)
    assert (hp["head_dim"], hp["v_head_dim"]) == (128, 128)
    hp = read_gguf(files["gpt-oss"]).hparams()
    assert hp["model_type"] == "gpt_oss" and hp["sliding_window"] == 128 and hp["head_dim"] == 64
    assert hp["vocab_size"] == 24
    hp = read_gguf(files["lfm2"]).hparams()
    assert hp["num_key_value_heads"] == [0, 2, 0, 2]  # per-layer: recurrent layers have no KV heads
    assert hp["intermediate_size"] == [128, 128, 256, 128]
    assert hp["num_attention_heads"] == 4 and hp["head_dim"] == 16
    assert hp["vocab_size"] == 16  # no tokenizer: from token_embd.weight, (n_embd, n_vocab) in ggml order
    # per-layer arrays whose layers all agree come back as one number
    data = (
        header(0, 3)
        + kv_raw("general.architecture", 8, gguf_str(b"x"))
        + kv_raw("x.attention.head_count", 9, struct.pack("<IQ3i", 5, 3, 8, 8, 8))
        + kv_raw("x.embedding_length", 4, struct.pack("<I", 512))
    )
    assert read_gguf(data).hparams() == {
        "model_type": "x",
        "num_attention_heads": 8,
        "hidden_size": 512,
        "num_key_value_heads": 8,
        "head_dim": 64,
    }


def without_size(h):
    return dataclasses.replace(h, file_size=None)


def test_sources_bytes_memoryview_fileobj_path(files):
    path = files["qwen3moe"]
    data = path.read_bytes()
    expected = read_gguf(path)
    for source in (data, bytearray(data), memoryview(data), io.BytesIO(data), str(path)):
        assert without_size(read_gguf(source)) == without_size(expected)
    with open(path, "rb") as f:
        assert read_gguf(f) == expected and expected.file_size == len(data)  # found by seeking
    # a slice that covers the header is enough: the weights are never needed
    assert read_gguf(data[: expected.header_bytes]).tensors == expected.tensors


def test_version_2_reads_like_3(files):
    data = bytearray(files["llama"].read_bytes())
    data[4:8] = struct.pack("<I", 2)  # v2 and v3 share the layout (uint64 counts); v3 added big-endian
    h = read_gguf(bytes(data))
    assert h.version == 2 and h.tensors == read_gguf(files["llama"]).tensors


def test_browser_slice_retry(files):
    """What the browser does: read a small slice, and on GGUFTruncated read `needed_bytes` and retry."""
    data = files["llama"].read_bytes()
    size, attempts = 64, 0
    while True:
        attempts += 1
        try:
            h = read_gguf(data[:size], file_size=len(data))
            break
        except GGUFTruncated as err:
            assert not err.end_of_file and err.available_bytes == size
            assert size < err.needed_bytes <= len(data)
            size = max(err.needed_bytes, 2 * size)
    assert without_size(h) == read_gguf(data) and attempts > 1


def test_only_reads_the_header(files):
    class CountingReader(io.BytesIO):
        n_read = 0

        def read(self, n=-1):
            chunk = super().read(n)
            self.n_read += len(chunk)
            return chunk

    # a header followed by 64 MiB of "weights": we read at most the first 1 MiB chunk
    data = files["llama"].read_bytes()
    h0 = read_gguf(data)
    f = CountingReader(data[: h0.data_offset] + bytes(64 << 20))
    h = read_gguf(f)
    assert h.tensors == h0.tensors and f.n_read <= 1 << 20


def test_realistic_vocabulary_is_fast():
    # 262,144 tokens (Gemma 3's vocabulary) with scores and types: the biggest real headers
    n = 262144
    tokens = [f"▁token{i}".encode() for i in range(n)]
    body = kv_raw("general.architecture", 8, gguf_str(b"llama"))
    body += kv_raw("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, n) + b"".join(gguf_str(t) for t in tokens))
    body += kv_raw("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, n) + struct.pack(f"<{n}f", *range(n)))
    body += kv_raw("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 5, n) + struct.pack(f"<{n}i", *[1] * n))
    data = header(0, 4) + body
    t0 = time.perf_counter()
    h = read_gguf(data)
    elapsed = time.perf_counter() - t0
    assert len(h.metadata["tokenizer.ggml.tokens"]) == n and h.hparams()["vocab_size"] == n
    assert elapsed < 5, elapsed  # ~0.2 s in CPython


# ---------------------------------------------------------------------------------------------------------------
# Hostile input: hand-built headers, one lie each
# ---------------------------------------------------------------------------------------------------------------


def gguf_str(raw: bytes) -> bytes:
    return struct.pack("<Q", len(raw)) + raw


def header(n_tensors, n_kv, version=3) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def kv_raw(key, vtype, payload, key_raw=None) -> bytes:
    return gguf_str(key_raw if key_raw is not None else key.encode()) + struct.pack("<I", vtype) + payload


def tensor_raw(name, dims, ggml_type, offset=0, name_raw=None) -> bytes:
    return (
        gguf_str(name_raw if name_raw is not None else name.encode())
        + struct.pack("<I", len(dims))
        + b"".join(struct.pack("<Q", d) for d in dims)
        + struct.pack("<IQ", ggml_type, offset)
    )


def one_tensor(dims, ggml_type, offset=0):
    return header(1, 0) + tensor_raw("w", dims, ggml_type, offset)


def rejects(data, match, exc=GGUFError, **kwargs):
    t0 = time.perf_counter()
    with pytest.raises(exc, match=match) as info:
        read_gguf(data, **kwargs)
    assert time.perf_counter() - t0 < 0.5  # fails fast: nothing is allocated for what the header claims
    assert isinstance(info.value, ValueError)
    return info.value


def test_valid_minimal_header():
    h = read_gguf(header(1, 1) + kv_raw("general.architecture", 8, gguf_str(b"x")) + tensor_raw("w", [32, 2], 8))
    assert h.tensors[0].n_bytes == 2 * 34 and h.data_offset == _round_up(h.header_bytes, 32)


def _round_up(n, a):
    return (n + a - 1) // a * a


def test_empty_and_short_input():
    err = rejects(b"", "magic", GGUFTruncated)
    assert err.needed_bytes == 4 and err.available_bytes == 0
    rejects(b"GGUF\x03\x00", "version", GGUFTruncated)
    err = rejects(io.BytesIO(b"GGUF\x03\x00\x00\x00"), "tensor_count", GGUFTruncated)
    assert err.end_of_file  # a file object that ended: reading more cannot help


def test_bad_magic():
    err = rejects(b"GGML" + bytes(20), "not a GGUF file")
    assert err.offset == 0
    rejects(b"version https://git-lfs.github.com/spec/v1\noid sha256:...", "Git LFS pointer")
    rejects(b"tjgg" + bytes(20), "GGJT")
    rejects(struct.pack("<Q", 100) + b'{"__metadata__": {}}', "safetensors")


def test_versions():
    rejects(header(0, 0, version=1), "version 1")
    rejects(header(0, 0, version=4), "unsupported GGUF version 4")
    rejects(header(0, 0, version=0), "unsupported GGUF version 0")
    rejects(header(0, 0, version=0x00010000), "unsupported GGUF version 65536")


def test_impossible_counts():
    err = rejects(header(2**60, 0), "tensor infos", GGUFLimitError)
    assert err.offset == 8 and "2^60" not in str(err) and f"{2**60:,}" in str(err)
    rejects(header(0, 2**60), "metadata entries", GGUFLimitError)
    rejects(header(2**63, 0), "negative")
    rejects(header(2**64 - 1, 2**64 - 1), "negative")
    # modest counts a short file cannot hold: truncated, and we say how many bytes would be needed
    err = rejects(header(1000, 0), "tensor infos", GGUFTruncated)
    assert err.needed_bytes == 24 + 1000 * 24 and not err.end_of_file
    rejects(io.BytesIO(header(1000, 0)), "truncated", GGUFTruncated)


def test_huge_strings():
    # a key longer than the spec allows
    rejects(header(0, 1) + struct.pack("<Q", 2**40) + bytes(8), "at most 65,535", GGUFError)
    err = rejects(header(0, 1) + kv_raw("k", 8, struct.pack("<Q", 2**40)), "max_header_bytes", GGUFLimitError)
    assert err.offset == 24 + 8 + 1 + 4
    rejects(header(1, 0) + struct.pack("<Q", 2**40) + bytes(16), "at most 64")  # tensor name
    rejects(header(1, 0) + tensor_raw("x" * 65, [32], 0), "at most 64")
    err = rejects(header(0, 1) + kv_raw("k", 8, struct.pack("<Q", 5000) + b"abc"), "string", GGUFTruncated)
    assert err.needed_bytes == 24 + 8 + 1 + 4 + 8 + 5000


def test_huge_arrays():
    for itype in range(13):
        payload = struct.pack("<IQ", itype, 2**50)
        rejects(header(0, 1) + kv_raw("arr", 9, payload), "max_header_bytes", GGUFLimitError)
    # element count beyond the items budget, though the bytes would fit
    data = header(0, 1) + kv_raw("arr", 9, struct.pack("<IQ", 0, 1000) + bytes(1000))
    rejects(data, "max_array_items", GGUFLimitError, max_array_items=999)
    assert len(read_gguf(data, max_array_items=1000).metadata["arr"]) == 1000


def test_header_size_cap():
    data = header(0, 1) + kv_raw("k", 8, gguf_str(b"x" * 1000))
    rejects(data, "max_header_bytes=100", GGUFLimitError, max_header_bytes=100)
    rejects(io.BytesIO(data), "max_header_bytes=100", GGUFLimitError, max_header_bytes=100)
    assert read_gguf(data, max_header_bytes=len(data)).metadata["k"] == "x" * 1000


def test_cut_mid_array(files):
    data = files["llama"].read_bytes()
    at = data.index(b"tok25") + 2  # inside the token list
    assert at > 24 + 18 * 14 + 21 * 24  # past the least bytes the counts need, so we reach the list
    err = rejects(data[:at], "string", GGUFTruncated)
    assert err.needed_bytes > at and err.offset is not None and not err.end_of_file
    err = rejects(io.BytesIO(data[:at]), "the file is only", GGUFTruncated)  # size known by seeking
    assert err.end_of_file
    err = rejects(NoSeek(data[:at]), "the file ends at byte", GGUFTruncated)  # found by reading to the end
    assert err.end_of_file
    err = rejects(data[:at], "truncated", GGUFTruncated, file_size=at)
    assert err.end_of_file
    # a numeric array cut short
    err = rejects(header(0, 1) + kv_raw("a", 9, struct.pack("<IQ", 4, 10) + bytes(12)), "array", GGUFTruncated)
    assert err.needed_bytes == 24 + 8 + 1 + 4 + 12 + 40


class NoSeek(io.BytesIO):
    def seekable(self):
        return False


def test_cut_mid_weights(files):
    data = files["llama"].read_bytes()
    rejects(io.BytesIO(data[:-1000]), "incomplete download", GGUFTruncated)
    header_only = data[: read_gguf(data).data_offset]
    rejects(header_only, "truncated", GGUFTruncated, file_size=len(header_only))
    assert read_gguf(header_only, file_size=len(data)).tensors  # the real size: fine


def test_bad_value_types():
    err = rejects(header(0, 1) + kv_raw("k", 13, b"\x00" * 8), "unknown value type 13")
    assert err.offset == 24 + 8 + 1
    rejects(header(0, 1) + kv_raw("k", 9, struct.pack("<IQ", 99, 1) + bytes(8)), "unknown value type 99")
    rejects(header(0, 1) + kv_raw("k", 7, b"\x02"), "not 0 or 1")
    rejects(header(0, 1) + kv_raw("k", 9, struct.pack("<IQ", 7, 3) + b"\x01\x00\x05"), "bool element 2")
    rejects(header(0, 2) + kv_raw("k", 0, b"\x01") + kv_raw("k", 0, b"\x01"), "duplicate metadata key")
    rejects(header(0, 1) + kv_raw("", 0, b"\x01") + bytes(8), "empty key")


def test_nesting_depth():
    def nested(depth):
        return struct.pack("<IQ", 9, 1) * depth + struct.pack("<IQ", 0, 0)

    ok = header(0, 1) + kv_raw("n", 9, nested(7))  # 8 levels of arrays in all
    assert read_gguf(ok).metadata["n"] == [[[[[[[[]]]]]]]]
    rejects(header(0, 1) + kv_raw("n", 9, nested(8)), "nested deeper", GGUFLimitError)
    rejects(header(0, 1) + kv_raw("n", 9, nested(10_000)), "nested deeper", GGUFLimitError)
    # many arrays inside one array: capped (gguf.cpp loads none at all)
    many = struct.pack("<IQ", 9, 70_000) + struct.pack("<IQ", 0, 0) * 70_000
    rejects(header(0, 1) + kv_raw("n", 9, many), "65,536 arrays inside arrays", GGUFLimitError)


def test_bad_tensors():
    rejects(one_tensor([1, 1, 1, 1, 1], 0), "5 dimensions")
    rejects(header(1, 0) + gguf_str(b"w") + struct.pack("<I", 2**32 - 1) + bytes(16), "4,294,967,295 dimensions")
    err = rejects(one_tensor([32, 99], 99), "ggml type 99")
    assert err.offset == 24 + 8 + 1 + 4 + 16
    rejects(one_tensor([32], 4), "Q4_2, a type ggml has removed")
    rejects(one_tensor([32], 2**31 + 5), "unknown")
    rejects(one_tensor([2**63], 0), "negative")
    rejects(one_tensor([2**64 - 1, 2], 0), "negative")
    rejects(one_tensor([2**32, 2**32], 0), "overflow int64")
    rejects(one_tensor([2**62, 4], 0), "overflow int64")
    rejects(one_tensor([2**61, 2], 0), "overflow int64")  # 2^62 elements of 4 bytes: 2^64 bytes
    rejects(one_tensor([100, 4], 12), "not a whole number of 256-weight blocks")
    rejects(one_tensor([], 12), "not a whole number")  # a 0-d tensor is 1 element: not a block
    rejects(one_tensor([32], 0, offset=7), "not a multiple of the alignment 32")
    rejects(header(2, 0) + tensor_raw("w", [1], 0) + tensor_raw("w", [1], 0, 32), "duplicate tensor name")
    assert read_gguf(one_tensor([0, 5], 12)).tensors[0].n_bytes == 0  # zero elements are allowed, as in ggml


def test_alignment_key():
    def with_alignment(vtype, payload):
        return header(0, 1) + kv_raw("general.alignment", vtype, payload)

    assert read_gguf(with_alignment(4, struct.pack("<I", 64))).alignment == 64
    rejects(with_alignment(4, struct.pack("<I", 0)), "not a power of two")
    rejects(with_alignment(4, struct.pack("<I", 48)), "not a power of two")
    rejects(with_alignment(10, struct.pack("<Q", 64)), "must be a UINT32")


def test_invalid_utf8():
    bad = b"\xff\xfeabc"
    err = rejects(header(0, 1) + kv_raw("k", 8, gguf_str(bad)), "UTF-8")
    assert err.offset == 24 + 8 + 1 + 4 + 8
    rejects(header(0, 1) + kv_raw("", 0, b"\x01", key_raw=b"\xc3"), "UTF-8")
    rejects(header(1, 0) + tensor_raw("", [32], 0, name_raw=b"w\xe2\x82"), "UTF-8")
    arr = header(0, 1) + kv_raw("a", 9, struct.pack("<IQ", 8, 2) + gguf_str(b"ok") + gguf_str(bad))
    rejects(arr, "string 1 of 'a'.*UTF-8")
    assert read_gguf(arr, utf8_errors="replace").metadata["a"] == ["ok", "\ufffd\ufffdabc"]


def test_memory_stays_small_whatever_the_claims():
    """A header's claims allocate nothing: each fails before any list, string or read of that size."""
    hostile = [
        header(2**60, 0),
        header(0, 2**60),
        header(0, 1) + kv_raw("k", 8, struct.pack("<Q", 2**40)),
        header(0, 1) + kv_raw("k", 9, struct.pack("<IQ", 8, 2**50)),
        header(0, 1) + kv_raw("k", 9, struct.pack("<IQ", 9, 2**50)),
        header(0, 1) + kv_raw("k", 9, struct.pack("<IQ", 0, 200 << 20)),  # 200 MiB of uint8: under the cap
    ]
    tracemalloc.start()
    try:
        for data in hostile:
            for source in (data, io.BytesIO(data)):
                with pytest.raises(ValueError):
                    read_gguf(source)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak  # a few MiB at most (the first 1 MiB chunk of a file object)


def test_not_bytes():
    with pytest.raises(TypeError):
        read_gguf(12345)


# ---------------------------------------------------------------------------------------------------------------
# Fuzzing: mutate valid headers; only ValueError may escape, and every parse is quick
# ---------------------------------------------------------------------------------------------------------------


def _seed_files(tmp_dir: Path) -> list[bytes]:
    seeds = []
    makers = (
        ("llama", make_llama),
        ("all_types", make_all_types),
        ("lfm2", make_hybrid),
        ("big_endian", lambda p: make_all_types(p, endianess=gguf.GGUFEndian.BIG)),
    )
    for name, make in makers:
        data = make(tmp_dir / f"seed_{name}.gguf").read_bytes()
        seeds.append(data[: read_gguf(data).data_offset + 64])  # the header and a little data
    seeds.append(header(1, 1) + kv_raw("general.architecture", 8, gguf_str(b"x")) + tensor_raw("w", [32, 2], 8))
    return seeds


_SEEDS: list[bytes] = []
_HUGE = [0, 1, 2**31, 2**32 - 1, 2**32, 2**40, 2**50, 2**60, 2**63 - 1, 2**63, 2**64 - 1]
FUZZ_EXAMPLES = 2000
fuzz_stats = {"inputs": 0, "parsed": 0, "max_seconds": 0.0}

mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 1 << 20), st.integers(0, 7)),
    st.tuples(st.just("truncate"), st.integers(0, 1 << 20)),
    st.tuples(st.just("splice64"), st.integers(0, 1 << 20), st.sampled_from(_HUGE)),
    st.tuples(st.just("splice32"), st.integers(0, 1 << 20), st.integers(0, 2**32 - 1)),
    st.tuples(st.just("byte"), st.integers(0, 1 << 20), st.integers(0, 255)),
    st.tuples(st.just("insert"), st.integers(0, 1 << 20), st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), st.integers(0, 1 << 20), st.integers(1, 64)),
)


def mutate(data: bytes, ops) -> bytes:
    buf = bytearray(data)
    for op in ops:
        if not buf:
            break
        at = op[1] % len(buf)
        if op[0] == "flip":
            buf[at] ^= 1 << op[2]
        elif op[0] == "truncate":
            del buf[at:]
        elif op[0] == "splice64":
            buf[at : at + 8] = struct.pack("<Q", op[2])
        elif op[0] == "splice32":
            buf[at : at + 4] = struct.pack("<I", op[2])
        elif op[0] == "byte":
            buf[at] = op[2]
        elif op[0] == "insert":
            buf[at:at] = op[2]
        elif op[0] == "delete":
            del buf[at : at + op[2]]
    return bytes(buf)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    if not _SEEDS:
        _SEEDS.extend(_seed_files(tmp_path_factory.mktemp("fuzz")))
    return _SEEDS


@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed_index=st.integers(0, 4),
    ops=st.lists(mutation, min_size=1, max_size=4),
    as_file=st.booleans(),
    give_size=st.booleans(),
)
def test_fuzz_2000_mutations(seeds, seed_index, ops, as_file, give_size):
    data = mutate(seeds[seed_index], ops)
    source = io.BytesIO(data) if as_file else data
    t0 = time.perf_counter()
    try:
        h = read_gguf(source, file_size=len(data) if give_size else None, max_header_bytes=1 << 24)
    except ValueError:
        pass  # GGUFError and its subclasses, the only thing allowed to escape
    else:
        fuzz_stats["parsed"] += 1
        h.hparams(), h.file_size_estimate()  # the helpers must not crash on odd but valid headers
    elapsed = time.perf_counter() - t0
    fuzz_stats["inputs"] += 1
    fuzz_stats["max_seconds"] = max(fuzz_stats["max_seconds"], elapsed)
    assert elapsed < 1.0, f"parse took {elapsed:.2f} s"


def test_fuzz_count_report(seeds):
    """Runs after the fuzz test (file order): say how many inputs it tried. Selected on its own (or run first),
    it runs the fuzz test itself, so it never passes without having counted anything."""
    if not fuzz_stats["inputs"]:
        test_fuzz_2000_mutations(seeds)
    print(
        f"\nfuzz: {fuzz_stats['inputs']} mutated headers, {fuzz_stats['parsed']} still parsed, "
        f"slowest parse {fuzz_stats['max_seconds'] * 1000:.1f} ms"
    )
    assert fuzz_stats["inputs"] >= FUZZ_EXAMPLES * 0.9
