"""Fuzzing the whole way in from a GGUF file: header -> Model -> placement -> timing (shared by the suite's
tests/test_robustness.py, at a size CI runs in seconds, and bench/bench_fuzz.py, with larger counts).

Standard library only (no gguf-py), so the bench runs anywhere the library does.

- `gguf_bytes(kvs, tensors)` writes a GGUF header (v3, little-endian) from typed metadata and tensor infos.
- `SEEDS`: small but real-shaped models of several architectures (dense, MoE, sliding window, MXFP4 experts,
  per-layer head-count arrays, a fused-QKV model, every ggml tensor type), as (kvs, tensors); and BLOCK_SEEDS,
  tensor tables written from typed blocks (enginelab.blocks) for the block reader (enginelab.arch_gguf): a
  gated-delta-net hybrid, MLA with a DSA indexer, Mamba-2 with FFN-only blocks, short convolutions, Gemma 4's
  two widths with shared caches and per-layer embeddings, Kimi's KDA, gpt-oss's sinks and biases.
- `hostile_input(rng)`: one seed changed by one to three mutations: a metadata value replaced by a hostile one
  of any GGUF type (inf, NaN, negative, 2^64-1, a string, an array, a nested array), a key dropped, a tensor's
  type, shape or block number changed, the tensors dropped, a tensor renamed to another block kind's or a
  block's tensors dropped; then sometimes bytes flipped, spliced or cut.
- `run_pipeline(data)`: model_from_gguf, then place / decode_step_time / prefill_time / sizes on three
  machines and two quantizations. The only exception allowed is ValueError from model_from_gguf (the file is
  refused); once a Model is made, every call must succeed and every number must be finite and non-negative.
- `fuzz(n, seed)`: runs n inputs and returns the counts: inputs, refused, accepted, failures by exception
  type, non-finite/negative outputs, and the slowest call.
"""

from __future__ import annotations

import math
import random
import struct
import time
from collections import Counter

import perf_model as pm
from enginelab import blocks as bl
from enginelab import custom
from enginelab.ggml import GGML_TYPES_BY_ID

# ---------------------------------------------------------------------------------------------------------------
# A GGUF header writer (docs/gguf.md): typed values, tensor infos, offsets at the alignment
# ---------------------------------------------------------------------------------------------------------------
VT = {"u8": 0, "i8": 1, "u16": 2, "i16": 3, "u32": 4, "i32": 5, "f32": 6, "bool": 7, "str": 8, "arr": 9}
VT.update({"u64": 10, "i64": 11, "f64": 12})
_FMT = {"u8": "B", "i8": "b", "u16": "H", "i16": "h", "u32": "I", "i32": "i", "f32": "f", "bool": "?"}
_FMT.update({"u64": "Q", "i64": "q", "f64": "d"})


def _s(text) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def _value(vtype: str, v) -> bytes:
    if vtype == "str":
        return _s(v)
    if vtype == "arr":
        etype, items = v
        body = b"".join(_value(etype, x) for x in items)
        return struct.pack("<IQ", VT[etype], len(items)) + body
    return struct.pack("<" + _FMT[vtype], v)


def gguf_bytes(kvs: list, tensors: list, alignment: int = 32) -> bytes:
    """kvs: [(key, vtype, value)], value of an "arr" is (element vtype, [items]);
    tensors: [(name, dims in ggml order, ggml type id)]. Returns the header, padded to the alignment."""
    out = [b"GGUF", struct.pack("<IQQ", 3, len(tensors), len(kvs))]
    for key, vtype, v in kvs:
        out += [_s(key), struct.pack("<I", VT[vtype]), _value(vtype, v)]
    offset = 0
    for name, dims, tid in tensors:
        out += [_s(name), struct.pack("<I", len(dims)), b"".join(struct.pack("<Q", d % 2**64) for d in dims)]
        out.append(struct.pack("<IQ", tid, offset))
        info = GGML_TYPES_BY_ID.get(tid)
        n = 1
        for d in dims:
            n *= d
        size = n // info.block_size * info.type_size if info and dims and dims[0] % info.block_size == 0 else 0
        offset += -(-size // alignment) * alignment
    head = b"".join(out)
    return head + b"\0" * (-len(head) % alignment)


# ---------------------------------------------------------------------------------------------------------------
# Seeds: a few real shapes, kept small so one pipeline run takes milliseconds
# ---------------------------------------------------------------------------------------------------------------
def _model_seed(m: pm.Model, quant: str, arch: str, extra=()) -> tuple:
    kvs = [
        ("general.architecture", "str", arch),
        ("general.name", "str", m.name),
        (f"{arch}.block_count", "u32", m.num_hidden_layers),
        (f"{arch}.embedding_length", "u32", m.hidden_size),
        (f"{arch}.feed_forward_length", "u32", m.intermediate_size),
        (f"{arch}.attention.head_count", "u32", m.num_attention_heads),
        (f"{arch}.attention.head_count_kv", "u32", m.num_key_value_heads),
        (f"{arch}.attention.key_length", "u32", m.d_head),
        (f"{arch}.context_length", "u32", m.max_position_embeddings),
        (f"{arch}.vocab_size", "u32", m.vocab_size),
        *extra,
    ]
    ids = {t.name: i for i, t in GGML_TYPES_BY_ID.items()}
    tensors = [(r["name"], list(r["ne"]), ids[r["type"]]) for r in pm.quantize_plan(m, quant)]
    return kvs, tensors


def _small(key: str, **kw) -> pm.Model:
    return pm.replace(pm.MODELS[key], **kw)


def _seeds() -> dict:
    seeds = {}
    seeds["llama"] = _model_seed(
        _small(
            "llama-3.1-8b",
            num_hidden_layers=4,
            hidden_size=512,
            intermediate_size=1024,
            num_attention_heads=8,
            num_key_value_heads=2,
            head_dim=64,
            vocab_size=2048,
        ),
        "Q4_K_M",
        "llama",
    )
    moe = _small(
        "qwen3-30b-a3b",
        num_hidden_layers=3,
        hidden_size=256,
        num_local_experts=8,
        vocab_size=1024,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        moe_intermediate_size=256,
    )
    seeds["qwen3moe"] = _model_seed(
        moe,
        "Q4_K_M",
        "qwen3moe",
        [
            ("qwen3moe.expert_count", "u32", 8),
            ("qwen3moe.expert_used_count", "u32", 2),
            ("qwen3moe.expert_feed_forward_length", "u32", 256),
        ],
    )
    gem = _small(
        "gemma-2-9b",
        num_hidden_layers=4,
        hidden_size=256,
        intermediate_size=512,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        vocab_size=1024,
    )
    seeds["gemma2"] = _model_seed(gem, "Q8_0", "gemma2", [("gemma2.attention.sliding_window", "u32", 4096)])
    oss = _small(
        "gpt-oss-20b",
        num_hidden_layers=2,
        hidden_size=256,
        intermediate_size=256,
        vocab_size=512,
        num_attention_heads=8,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
    )
    seeds["gpt-oss"] = _model_seed(
        oss,
        "MXFP4_MOE",
        "gpt-oss",
        [
            ("gpt-oss.expert_count", "u32", 4),
            ("gpt-oss.expert_used_count", "u32", 2),
            ("gpt-oss.attention.sliding_window", "u32", 128),
        ],
    )
    phi = _small(
        "phi-3-mini",
        num_hidden_layers=2,
        hidden_size=256,
        intermediate_size=512,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=512,
    )
    seeds["phi3"] = _model_seed(phi, "Q4_0", "phi3")
    # a hybrid: per-layer head counts, 0 in the recurrent layers (LFM2, Jamba)
    kvs, tensors = _model_seed(
        _small(
            "llama-3.1-8b",
            num_hidden_layers=4,
            hidden_size=256,
            intermediate_size=512,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=64,
            vocab_size=512,
        ),
        "Q5_K_M",
        "lfm2",
    )
    kvs = [k for k in kvs if not k[0].endswith((".head_count_kv", ".feed_forward_length"))]
    kvs += [
        ("lfm2.attention.head_count_kv", "arr", ("u32", [0, 2, 0, 2])),
        ("lfm2.feed_forward_length", "arr", ("u32", [512, 512, 1024, 512])),
    ]
    seeds["lfm2"] = (kvs, tensors)
    # one tensor of every ggml type the reader knows, each a whole number of blocks
    kvs, tensors = seeds["llama"]
    extra = [
        (f"blk.0.extra_{t.name.lower()}.weight", [t.block_size * 2, 3], tid) for tid, t in GGML_TYPES_BY_ID.items()
    ]
    seeds["all_types"] = (kvs, tensors + extra)
    # a tokenizer list instead of vocab_size (the vocabulary's length is the vocab size)
    kvs, tensors = seeds["llama"]
    kvs = [k for k in kvs if not k[0].endswith(".vocab_size")] + [
        ("tokenizer.ggml.tokens", "arr", ("str", [f"t{i}" for i in range(2048)]))
    ]
    seeds["tokens"] = (kvs, tensors)
    return seeds


def _block_seed(arch: str, bm, keys: dict) -> tuple:
    """(kvs, tensors) of a GGUF holding bm's tensors (f32 vectors, f16 matrices) with the {arch}.* keys given."""
    kvs = [
        ("general.architecture", "str", arch),
        ("general.name", "str", arch),
        (f"{arch}.block_count", "u32", bm.n_layer),
        (f"{arch}.embedding_length", "u32", bm.globals.n_embd),
        (f"{arch}.context_length", "u32", 4096),
        (f"{arch}.vocab_size", "u32", bm.globals.vocab),
    ]
    for k, v in keys.items():
        if isinstance(v, list):
            kvs.append((f"{arch}.{k}", "arr", ("bool" if isinstance(v[0], bool) else "u32", v)))
        else:
            kvs.append((f"{arch}.{k}", "u32", v))
    tensors = [(name, list(ne), 0 if len(ne) == 1 else 1) for name, ne in bl.tensors(bm)]
    return kvs, tensors


def _block_models() -> dict:
    """name -> (GGUF arch, BlockModel, keys): one small model per block kind the block reader knows."""
    g = bl.Globals(vocab=256, n_embd=64, tied_output=False)
    moe_sh = bl.MoEFFN(4, 2, 32, n_shared=1, shared_width=32, shared_gate=True)
    gdn = bl.Recurrent("gated_delta_net", 4, 64, 16, 2, 4)
    gated = bl.Attention(4, 2, 16, 16, q_gate=True, qk_norm=True)
    mla = bl.Attention(4, 1, 24, 16, kv_lora_rank=16, rope_dim=8, q_lora_rank=32, indexer_head_dim=16, n_indexer_head=2)
    moe_rb = bl.MoEFFN(4, 2, 32, n_shared=1, shared_width=32, routing_bias=True)
    m2 = bl.Recurrent("mamba2", 4, 128, 16, 2, 8)
    swa = bl.Attention(4, 2, 16, 16, window=64, qk_norm=True)
    glob = bl.Attention(4, 1, 32, 32, qk_norm=True)
    kda = bl.Recurrent("kda", 4, 64, 16, 4, 4)
    sinks = bl.Attention(4, 2, 16, 16, window=32, qkv_bias=True, out_bias=True, sinks=True)
    oss = bl.MoEFFN(4, 2, 32, router_bias=True, expert_bias=True)
    return {
        "b_qwen35moe": ("qwen35moe", bl.BlockModel(g, (bl.Block(gdn, moe_sh), bl.Block(gated, moe_sh)) * 2), {
            "attention.head_count": 4, "attention.head_count_kv": 2, "attention.key_length": 16,
            "ssm.conv_kernel": 4, "ssm.inner_size": 64, "ssm.state_size": 16, "ssm.group_count": 2,
            "ssm.time_step_rank": 4, "full_attention_interval": 2, "expert_count": 4, "expert_used_count": 2}),
        "b_deepseek32": ("deepseek32", bl.BlockModel(g, (bl.Block(mla, bl.DenseFFN(96)),) + (bl.Block(mla, moe_rb),) * 2), {
            "attention.head_count": 4, "rope.dimension_count": 8, "attention.kv_lora_rank": 16,
            "attention.key_length_mla": 24, "attention.value_length_mla": 16, "attention.indexer.head_count": 2,
            "attention.indexer.key_length": 16, "expert_count": 4, "expert_used_count": 2,
            "leading_dense_block_count": 1}),
        "b_nemotron_h": ("nemotron_h_moe", bl.BlockModel(g, (
            bl.Block(m2, bl.NoFFN()), bl.Block(bl.NoMixer(), bl.MoEFFN(4, 2, 32, gated=False)),
            bl.Block(bl.Attention(4, 2, 16, 16), bl.NoFFN()), bl.Block(bl.NoMixer(), bl.DenseFFN(96, gated=False)))), {
            "attention.head_count": [0, 0, 4, 0], "attention.head_count_kv": [0, 0, 2, 0], "attention.key_length": 16,
            "ssm.conv_kernel": 4, "ssm.inner_size": 128, "ssm.state_size": 16, "ssm.group_count": 2,
            "ssm.time_step_rank": 8, "expert_count": 4, "expert_used_count": 2}),
        "b_lfm2": ("lfm2", bl.BlockModel(g, (bl.Block(bl.ShortConv(3, 64), bl.DenseFFN(96)),
                                            bl.Block(bl.Attention(4, 2, 16, 16, qk_norm=True), bl.DenseFFN(96))) * 2), {
            "attention.head_count": 4, "attention.head_count_kv": [0, 2, 0, 2], "attention.key_length": 16,
            "shortconv.l_cache": 3}),
        "b_gemma4": ("gemma4", bl.BlockModel(bl.Globals(vocab=256, n_embd=64, tied_output=True, per_layer_width=8), (
            bl.Block(swa, bl.DenseFFN(96)), bl.Block(glob, bl.DenseFFN(96)), bl.Block(swa, bl.DenseFFN(96)),
            bl.Block(bl.Attention(4, 2, 16, 16, window=64, qk_norm=True, kv_shared_from=2), bl.DenseFFN(96)),
            bl.Block(bl.Attention(4, 1, 32, 32, qk_norm=True, kv_shared_from=1), bl.DenseFFN(96)))), {
            "attention.head_count": 4, "attention.head_count_kv": [2, 1, 2, 2, 1], "attention.key_length": 32,
            "attention.key_length_swa": 16, "attention.sliding_window": 64,
            "attention.sliding_window_pattern": [True, False, True, True, False], "attention.shared_kv_layers": 2,
            "embedding_length_per_layer_input": 8}),
        "b_kimi_linear": ("kimi-linear", bl.BlockModel(g, (bl.Block(kda, bl.DenseFFN(96)), bl.Block(mla.__class__(
            4, 1, 24, 16, kv_lora_rank=16, rope_dim=8), moe_rb))), {
            "attention.head_count": 4, "rope.dimension_count": 8, "attention.kv_lora_rank": 16,
            "attention.key_length_mla": 24, "attention.value_length_mla": 16, "kda.head_dim": 16,
            "ssm.conv_kernel": 4, "expert_count": 4, "expert_used_count": 2}),
        "b_gpt_oss": ("gpt-oss", bl.BlockModel(g, (bl.Block(sinks, oss, ffn_norm_name="post_attention_norm"),
                                                  bl.Block(bl.Attention(4, 2, 16, 16, qkv_bias=True, out_bias=True,
                                                                        sinks=True), oss,
                                                           ffn_norm_name="post_attention_norm"))), {
            "attention.head_count": 4, "attention.head_count_kv": 2, "attention.key_length": 16,
            "attention.sliding_window": 32, "expert_count": 4, "expert_used_count": 2}),
    }  # fmt: skip


BLOCK_MODELS = _block_models()
BLOCK_SEEDS = {name: _block_seed(arch, bm, keys) for name, (arch, bm, keys) in BLOCK_MODELS.items()}
SEEDS = {**_seeds(), **BLOCK_SEEDS}
SEED_NAMES = sorted(SEEDS)

# ---------------------------------------------------------------------------------------------------------------
# Mutations
# ---------------------------------------------------------------------------------------------------------------
_INT_EDGES = [0, 1, 2, 3, 7, 1000, 1001, 4096, 65536, 65537, 2**20 + 1, 2**25 + 1, 2**31 - 1, 2**32 - 1]
_BIG_EDGES = [2**32, 2**40, 2**53 + 1, 2**63 - 1, 2**64 - 1, 10**9, 10**12]
_NEG_EDGES = [-1, -2, -128, -(2**31)]
_FLOATS = [math.inf, -math.inf, math.nan, 1.5, -0.0, 0.0, 4096.0, 1e300, -7.25, 1e-300]


def _hostile_value(rng: random.Random, n_layers: int) -> tuple:
    """(vtype, value) of any GGUF type, chosen to break a reader of hyper-parameters."""
    kind = rng.randrange(12)
    if kind == 0:
        return "u32", rng.choice(_INT_EDGES)
    if kind == 1:
        return "u64", rng.choice(_BIG_EDGES + _INT_EDGES)
    if kind == 2:
        return "i32", rng.choice(_NEG_EDGES + _INT_EDGES[:8])
    if kind == 3:
        return "i64", rng.choice([-(2**63), -(2**40), -1] + _INT_EDGES)
    if kind == 4:
        return rng.choice(["f32", "f64"]), rng.choice(_FLOATS)
    if kind == 5:
        return "str", rng.choice(["", "4096", "inf", "x" * 300, "7\x00"])
    if kind == 6:
        return "bool", rng.random() < 0.5
    if kind == 7:  # a per-layer array of the right length
        return "arr", ("u32", [rng.choice([0, 1, 2, 4, 8, 3, 2**32 - 1]) for _ in range(n_layers)])
    if kind == 8:  # an array of the wrong length
        return "arr", ("u32", [rng.choice([1, 2, 4, 8]) for _ in range(rng.choice([0, 1, n_layers + 1, 3]))])
    if kind == 9:  # an array of floats or strings
        if rng.random() < 0.5:
            return "arr", ("f32", [rng.choice(_FLOATS) for _ in range(n_layers)])
        return "arr", ("str", ["8"] * n_layers)
    if kind == 10:  # a nested array
        return "arr", ("arr", [("u32", [2, 2])] * n_layers)
    return "u8", rng.choice([0, 1, 255])


_HPARAM_SUFFIXES = [
    "block_count",
    "embedding_length",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "context_length",
    "vocab_size",
    "expert_count",
    "expert_used_count",
    "expert_feed_forward_length",
    "attention.sliding_window",
    # the block reader's keys (enginelab.arch_gguf)
    "ssm.conv_kernel",
    "ssm.inner_size",
    "ssm.state_size",
    "ssm.group_count",
    "ssm.time_step_rank",
    "attention.kv_lora_rank",
    "rope.dimension_count",
    "attention.key_length_mla",
    "attention.value_length_mla",
    "attention.key_length_swa",
    "attention.sliding_window_pattern",
    "attention.shared_kv_layers",
    "attention.indexer.head_count",
    "attention.indexer.key_length",
    "embedding_length_per_layer_input",
    "shortconv.l_cache",
    "kda.head_dim",
    "nextn_predict_layers",
    "expert_shared_count",
    "full_attention_interval",
]
# tensor names of every block kind (arch_gguf decides a block's mixer and FFN by them)
_BLOCK_TENSORS = ["attn_q.weight", "attn_k.weight", "attn_qkv.weight", "attn_kv_a_mqa.weight", "attn_q_a.weight",
                  "ssm_in.weight", "ssm_x.weight", "ssm_conv1d.weight", "ssm_conv1d_q.weight", "ssm_ba.weight",
                  "ssm_beta.weight", "shortconv.conv.weight", "ffn_down_exps.weight", "ffn_gate_up_exps.weight",
                  "ffn_gate_inp.weight", "ffn_up_shexp.weight", "ffn_up.weight", "ffn_down.weight",
                  "indexer.attn_k.weight", "indexer.proj.weight", "attn_sinks.weight", "exp_probs_b.bias",
                  "post_attention_norm.weight"]  # fmt: skip


def _mutate_semantic(rng: random.Random, kvs: list, tensors: list) -> tuple:
    kvs, tensors = list(kvs), list(tensors)
    arch = next((v for k, _t, v in kvs if k == "general.architecture"), "llama")
    n_layers = next((v for k, _t, v in kvs if k == f"{arch}.block_count"), 4)
    op = rng.randrange(12)
    if op == 10 and tensors:  # a block tensor renamed to another kind's, its shape kept or changed
        i = rng.randrange(len(tensors))
        name, dims, tid = tensors[i]
        block = name.split(".")[1] if name.startswith("blk.") else "0"
        if rng.random() < 0.5:
            dims = [rng.choice([1, 2, 3, 4, 16, 64, 2**20]) for _ in range(rng.randint(1, 3))]
            tid = 0
        tensors[i] = (f"blk.{block}.{rng.choice(_BLOCK_TENSORS)}", dims, tid)
        return kvs, tensors
    if op == 11 and tensors:  # one block's tensors dropped, or just its attention's keys
        block = rng.choice([t[0].split(".")[1] for t in tensors if t[0].startswith("blk.")] or ["0"])
        keep = (lambda n: "attn_k" not in n) if rng.random() < 0.5 else (lambda n: False)
        tensors = [t for t in tensors if not t[0].startswith(f"blk.{block}.") or keep(t[0])]
        return kvs, tensors
    if op <= 3:  # a hyper-parameter gets a hostile value (added if absent)
        key = f"{arch}.{rng.choice(_HPARAM_SUFFIXES)}"
        # a per-layer array as long as block_count, unless a mutation made block_count absurd (2^32 - 1)
        vtype, value = _hostile_value(rng, n_layers if isinstance(n_layers, int) and 0 < n_layers <= 4096 else 4)
        kvs = [k for k in kvs if k[0] != key] + [(key, vtype, value)]
    elif op == 4:  # a key dropped
        kvs.pop(rng.randrange(len(kvs)))
    elif op == 5 and tensors:  # a tensor's type: any id, known or not
        i = rng.randrange(len(tensors))
        name, dims, _tid = tensors[i]
        tid = rng.choice(list(GGML_TYPES_BY_ID) + [4, 31, 36, 43, 99, 2**31])
        info = GGML_TYPES_BY_ID.get(tid)
        if info and rng.random() < 0.8:  # usually keep the row a whole number of blocks, so the reader accepts it
            dims = [info.block_size * max(1, (dims[0] if dims else 256) // info.block_size)] + list(dims[1:])
        tensors[i] = (name, dims, tid)
    elif op == 6 and tensors:  # a tensor's shape
        i = rng.randrange(len(tensors))
        name, dims, tid = tensors[i]
        choice = rng.randrange(5)
        if choice == 0:
            dims = [d if j else 0 for j, d in enumerate(dims)] if dims else [0]
        elif choice == 1:
            dims = list(dims) + [rng.choice([1, 2, 2**20])]
        elif choice == 2:
            dims = []
        elif choice == 3:
            dims = [dims[0]] + [rng.choice([2**31, 2**40, 1]) for _ in dims[1:]] if dims else [256]
        else:
            dims = list(dims[:1])
        tensors[i] = (name, dims, tid)
    elif op == 7 and tensors:  # a tensor's block number
        i = rng.randrange(len(tensors))
        name, dims, tid = tensors[i]
        tail = name.split(".", 2)[-1]
        tensors[i] = (f"blk.{rng.choice(['-1', '999999', '1e3', '', 'x', str(2**70), '٣'])}.{tail}", dims, tid)
    elif op == 8:  # no tensors, or a thousand copies
        tensors = [] if rng.random() < 0.5 else [(f"blk.0.t{i}.weight", [256, 4], 12) for i in range(1000)]
    else:  # the architecture
        new = rng.choice(["", "x" * 100, "gemma3", "qwen2", "bert", "llama\x00"])
        kvs = [(k, t, new if k == "general.architecture" else v) for k, t, v in kvs]
    return kvs, tensors


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        if not buf:
            break
        at = rng.randrange(len(buf))
        op = rng.randrange(4)
        if op == 0:
            buf[at] ^= 1 << rng.randrange(8)
        elif op == 1:
            buf[at : at + 8] = struct.pack("<Q", rng.choice(_BIG_EDGES + _INT_EDGES))
        elif op == 2:
            buf[at : at + 4] = struct.pack("<I", rng.choice(_INT_EDGES))
        else:
            del buf[at:]
    return bytes(buf)


def hostile_input(rng: random.Random) -> bytes:
    kvs, tensors = SEEDS[rng.choice(SEED_NAMES)]
    for _ in range(rng.randint(1, 3)):
        kvs, tensors = _mutate_semantic(rng, kvs, tensors)
    try:
        data = gguf_bytes(kvs, tensors)
    except (struct.error, OverflowError):  # a value the writer cannot encode in its type: pick another input
        return hostile_input(rng)
    if rng.random() < 0.25:
        data = _mutate_bytes(rng, data)
    return data


# ---------------------------------------------------------------------------------------------------------------
# The pipeline and its checks
# ---------------------------------------------------------------------------------------------------------------
MACHINES = ("rtx3060", "m4max", "cpu-ddr5")
SLOW_CALL_S = 3.0  # the bound: no call may take longer


class BadOutput(AssertionError):
    """A number that is infinite, NaN or negative."""


def _numbers(obj, path="result"):
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return
    if isinstance(obj, (int, float)):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _numbers(v, f"{path}[{i}]")


def check_output(obj, what: str) -> None:
    for path, v in _numbers(obj, what):
        if isinstance(v, float) and not math.isfinite(v) or v < 0:
            raise BadOutput(f"{path} = {v!r}")


class Stats:
    def __init__(self):
        self.inputs = self.refused = self.accepted = 0
        self.failures: Counter = Counter()
        self.examples: dict = {}
        self.slowest = (0.0, "")  # seconds, which call
        self.slow_calls = 0

    def as_dict(self) -> dict:
        return {
            "inputs": self.inputs,
            "refused_value_error": self.refused,
            "accepted": self.accepted,
            "failures": dict(self.failures),
            "failures_total": sum(self.failures.values()),
            "slow_calls_over_3s": self.slow_calls,
            "slowest_call_s": self.slowest[0],
            "slowest_call": self.slowest[1],
            "examples": self.examples,
        }


def _timed(stats: Stats, label: str, fn, *args, **kw):
    t0 = time.process_time()
    try:
        return fn(*args, **kw)
    finally:
        dt = time.process_time() - t0
        if dt > stats.slowest[0]:
            stats.slowest = (dt, label)
        if dt > SLOW_CALL_S:
            stats.slow_calls += 1


def run_pipeline(data: bytes, stats: Stats) -> None:
    """One input through the pipeline; records the outcome in stats (never raises)."""
    stats.inputs += 1
    try:
        try:
            m = _timed(stats, "model_from_gguf", pm.model_from_gguf, data)
        except ValueError:
            stats.refused += 1
            return
        stats.accepted += 1
        check_output(_timed(stats, "total_params", m.total_params), "total_params")
        check_output(_timed(stats, "active_params", m.active_params), "active_params")
        check_output(_timed(stats, "file_bytes", pm.file_bytes, m, None), "file_bytes")
        check_output(_timed(stats, "kv_cache_bytes", pm.kv_cache_bytes, m, m.max_position_embeddings), "kv")
        for machine in MACHINES:
            for quant in (None, "Q4_K_M"):
                n_ctx = min(8192, m.max_position_embeddings)
                p = _timed(stats, f"place({machine}, {quant})", pm.place, m, machine, quant, n_ctx=n_ctx)
                check_output(p.as_dict(), "place")
                d = _timed(stats, "decode_step_time", pm.decode_step_time, p, context=n_ctx, batch=4)
                check_output(d, "decode_step_time")
                f = _timed(stats, "prefill_time", pm.prefill_time, p, n_tokens=min(n_ctx, 2048))
                check_output({k: v for k, v in f.items() if k != "steps"}, "prefill_time")
        p = _timed(stats, "place(max ctx)", pm.place, m, "rtx4090", None, n_ctx=m.max_position_embeddings)
        check_output(p.as_dict(), "place(max ctx)")
        check_output(_timed(stats, "decode(max ctx)", pm.decode_step_time, p, context=p.n_ctx), "decode(max ctx)")
    except Exception as e:  # anything here is a failure: a crash, or a ValueError after the Model was made
        kind = type(e).__name__
        stats.failures[kind] += 1
        stats.examples.setdefault(kind, f"{e}"[:300])


# ---------------------------------------------------------------------------------------------------------------
# config.json: hostile dicts and texts through the same pipeline
# ---------------------------------------------------------------------------------------------------------------
_CONFIG_KEYS = [*custom.CONFIG_KEYS, "text_config"]  # the fields a Model is read from, and their nesting
_CONFIG_SEEDS = [
    {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 512, "intermediate_size": 1024,
     "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 2048, "rope_scaling": {"rope_type": "llama3"}},
    {"model_type": "qwen3_moe", "num_hidden_layers": 3, "hidden_size": 256, "intermediate_size": 512,
     "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1024, "num_experts": 8,
     "num_experts_per_tok": 2, "moe_intermediate_size": 128},
    {"model_type": "gemma2", "num_hidden_layers": 4, "hidden_size": 256, "intermediate_size": 512,
     "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1024, "sliding_window": 512,
     "layer_types": ["sliding_attention", "full_attention"] * 2},
    {"model_type": "phi3", "num_hidden_layers": 2, "hidden_size": 256, "intermediate_size": 512,
     "num_attention_heads": 4, "vocab_size": 512},
    # the block readers (enginelab.arch_config): 2025-2026 architectures and a generic unknown one
    {"model_type": "qwen3_5_moe", "text_config": {"model_type": "qwen3_5_moe_text", "num_hidden_layers": 4,
     "hidden_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 512,
     "full_attention_interval": 2, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 16,
     "linear_value_head_dim": 16, "linear_num_key_heads": 2, "linear_num_value_heads": 4, "num_experts": 8,
     "num_experts_per_tok": 2, "moe_intermediate_size": 64, "shared_expert_intermediate_size": 64}},
    {"model_type": "gemma4", "text_config": {"model_type": "gemma4_text", "num_hidden_layers": 6, "hidden_size": 128,
     "intermediate_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "num_global_key_value_heads": 1,
     "head_dim": 32, "global_head_dim": 64, "attention_k_eq_v": True, "sliding_window": 128,
     "layer_types": ["sliding_attention", "full_attention"] * 3, "num_kv_shared_layers": 2, "hidden_size_per_layer_input": 16, "enable_moe_block": True, "num_experts": 4,
     "top_k_experts": 2, "moe_intermediate_size": 32, "vocab_size": 512}},
    {"model_type": "nemotron_h", "num_hidden_layers": 4, "hybrid_override_pattern": "M*-E", "hidden_size": 128,
     "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 256,
     "mamba_num_heads": 4, "mamba_head_dim": 32, "n_groups": 2, "ssm_state_size": 16, "conv_kernel": 4,
     "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "vocab_size": 512},
    {"model_type": "lfm2", "num_hidden_layers": 4, "hidden_size": 128, "intermediate_size": 256,
     "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "conv_L_cache": 3,
     "layer_types": ["conv", "full_attention", "conv", "full_attention"]},
    {"model_type": "deepseek_v32", "num_hidden_layers": 3, "hidden_size": 128, "intermediate_size": 256,
     "moe_intermediate_size": 32, "num_attention_heads": 4, "q_lora_rank": 32, "kv_lora_rank": 16,
     "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "n_routed_experts": 4, "n_shared_experts": 1,
     "num_experts_per_tok": 2, "first_k_dense_replace": 1, "topk_method": "noaux_tc", "index_n_heads": 2,
     "index_head_dim": 16, "vocab_size": 512},
    {"model_type": "kimi_linear", "num_hidden_layers": 4, "hidden_size": 128, "intermediate_size": 256,
     "moe_intermediate_size": 32, "num_attention_heads": 4, "kv_lora_rank": 16, "qk_nope_head_dim": 16,
     "qk_rope_head_dim": 8, "v_head_dim": 16, "num_experts": 4, "num_experts_per_token": 2, "num_shared_experts": 1,
     "first_k_dense_replace": 1, "vocab_size": 512,
     "linear_attn_config": {"kda_layers": [1, 3], "head_dim": 16, "num_heads": 4, "short_conv_kernel_size": 4}},
    {"model_type": "llama4", "text_config": {"model_type": "llama4_text", "num_hidden_layers": 4, "hidden_size": 128,
     "intermediate_size": 64, "intermediate_size_mlp": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
     "head_dim": 32, "num_local_experts": 4, "num_experts_per_tok": 1, "interleave_moe_layer_step": 2,
     "attention_chunk_size": 256, "vocab_size": 512}},
    {"model_type": "brand_new_arch", "num_hidden_layers": 3, "hidden_size": 128, "intermediate_size": 256,
     "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "num_experts": 4,
     "num_experts_per_tok": 2, "layer_types": ["sliding_attention", "full_attention", "mystery"],
     "sliding_window": 64},
]  # fmt: skip
_JSON_VALUES = [None, True, False, -1, 0, 1, 2, 3, 1.5, 4096.0, 10**6, 10**8, 10**400, 2**63, 2**64, "", "32",
                "llama", [], [1, 2], [0] * 4, {}, {"rope_type": "llama3"}, {"type": 1}, [[1]], 1e308,
                ["linear_attention"] * 4, ["conv", "x"], "M*-E", "MMMM", ["sliding_attention"] * 3,
                {"kda_layers": [0, 99], "head_dim": 0}, {"kda_layers": "x"}, "qwen3_5", "gemma4_text",
                "noaux_tc", [True, 1], {"model_type": "kimi_k2"}]  # fmt: skip


def hostile_config(rng: random.Random):
    """A config.json dict (or, a quarter of the time, its text, possibly cut or deeply nested)."""
    cfg = dict(rng.choice(_CONFIG_SEEDS))
    for _ in range(rng.randint(1, 3)):
        key = rng.choice(_CONFIG_KEYS)
        if rng.random() < 0.15:
            cfg.pop(key, None)
        else:
            cfg[key] = rng.choice(_JSON_VALUES)
    if rng.random() < 0.75:
        return cfg
    import json

    text = json.dumps(cfg) if not any(isinstance(v, int) and v > 10**300 for v in cfg.values()) else str(cfg)
    op = rng.randrange(4)
    if op == 0:
        text = text[: rng.randrange(len(text) + 1)]
    elif op == 1:
        depth = rng.choice([10, 40, 1000, 50_000])
        text = text[:-1] + ', "deep": ' + "[" * depth + "]" * depth + "}"
    elif op == 2:
        text = text[:-1] + ', "n": ' + "9" * rng.choice([30, 5000]) + "}"
    return text


def run_config(cfg, stats: Stats) -> None:
    """One config (a dict or a text) through model_from_hf_config (or parse_config) and the pipeline."""
    stats.inputs += 1
    try:
        try:
            if isinstance(cfg, str):
                m = _timed(stats, "model_from_config_text", custom.model_from_config_text, cfg)
            else:
                m = _timed(stats, "model_from_hf_config", pm.model_from_hf_config, cfg)
        except ValueError:
            stats.refused += 1
            return
        stats.accepted += 1
        check_output(_timed(stats, "total_params", m.total_params), "total_params")
        for machine in MACHINES[:2]:
            p = _timed(
                stats, f"place({machine})", pm.place, m, machine, "Q4_K_M", n_ctx=min(8192, m.max_position_embeddings)
            )
            check_output(p.as_dict(), "place")
            check_output(_timed(stats, "decode_step_time", pm.decode_step_time, p, context=p.n_ctx), "decode")
            f = _timed(stats, "prefill_time", pm.prefill_time, p, n_tokens=min(p.n_ctx, 512))
            check_output({k: v for k, v in f.items() if k != "steps"}, "prefill_time")
    except Exception as e:
        kind = type(e).__name__
        stats.failures[kind] += 1
        stats.examples.setdefault(kind, f"{e}"[:300])


def fuzz_configs(n: int, seed: int = 0, stats: Stats | None = None) -> Stats:
    rng = random.Random(seed)
    stats = stats or Stats()
    for cfg in _CONFIG_SEEDS:
        run_config(cfg, stats)
    for _ in range(n):
        run_config(hostile_config(rng), stats)
    return stats


def fuzz(n: int, seed: int = 0, stats: Stats | None = None) -> Stats:
    rng = random.Random(seed)
    stats = stats or Stats()
    for name in SEED_NAMES:  # the seeds themselves must go through cleanly
        run_pipeline(gguf_bytes(*SEEDS[name]), stats)
    for _ in range(n):
        run_pipeline(hostile_input(rng), stats)
    return stats
