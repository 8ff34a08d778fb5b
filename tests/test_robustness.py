"""Every way into the model is validated (issue 12): a Model is checked when it is made, from any source; for
bad input only ValueError leaves the library, naming the field or argument; any Model that constructs gives
finite, non-negative numbers quickly.

- property tests (hypothesis) from Model construction to decode and prefill timing;
- crafted GGUF headers and config.json texts, one lie each;
- the GGUF header -> Model -> placement -> timing fuzz (tests/fuzz_pipeline.py) at a size CI runs in seconds
  (bench/bench_fuzz.py runs it with larger counts);
- hostile arguments for every public function (tests/hostile_args.py).
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz_pipeline as fz  # noqa: E402
import hostile_args as ha  # noqa: E402

import kv_managers as kv  # noqa: E402
import perf_model as pm  # noqa: E402
from enginelab import custom  # noqa: E402
from enginelab.checks import brief  # noqa: E402
from enginelab.ggml import GGML_TYPES_BY_ID  # noqa: E402

TIME_BOUND_S = 3.0  # the bound: no call may take longer (CPU seconds here, so a busy machine does not flake)
FIELDS = [f.name for f in dataclasses.fields(pm.Model)]


def names_a_field(msg: str, fields=FIELDS) -> bool:
    head = msg.split(":", 1)[0].split(" (", 1)[0]
    return head in fields


def finite_nonneg(obj, what: str) -> None:
    for path, v in ha.numbers(obj, what):
        assert math.isfinite(v) and v >= 0, f"{path} = {v!r}"


def timed(fn, *args, **kw):
    t0 = time.process_time()  # CPU seconds: other work on a shared machine does not count against the bound
    out = fn(*args, **kw)
    dt = time.process_time() - t0
    assert dt < TIME_BOUND_S, f"{getattr(fn, '__name__', fn)} took {dt:.2f} s"
    return out


# ---------------------------------------------------------------------------------------------------------------
# Property: any Model that constructs gives finite, non-negative numbers within the time bound
# ---------------------------------------------------------------------------------------------------------------
HOSTILE_FIELD_VALUES = [
    None,
    True,
    -1,
    0,
    1.5,
    math.nan,
    math.inf,
    10**400,
    2**31,
    10**6,
    "32",
    "",
    "x" * 1000,
    [],
    [1, 2],
    (1,),
    {},
    object(),
]


@st.composite
def model_kwargs(draw):
    """Fields of a Model across the whole valid range (up to every bound), then 0-2 fields made hostile."""
    layers = draw(st.one_of(st.integers(1, 40), st.sampled_from([1, 2, 3, 999, pm.MAX_LAYERS])))
    kv_heads = draw(st.sampled_from([1, 2, 4, 8, 16, 64]))
    heads = kv_heads * draw(st.sampled_from([1, 2, 4, 8, 64]))
    head_dim = draw(st.sampled_from([0, 0, 64, 128, 256, 2, 6, pm.MAX_HEAD_DIM]))
    if head_dim == 0:
        hidden = heads * draw(st.sampled_from([1, 2, 16, 64, 128]))
    else:
        hidden = draw(st.sampled_from([64, 896, 4096, 2880, pm.MAX_HIDDEN, 7]))
    hidden = min(hidden, pm.MAX_HIDDEN)
    maxpos = draw(st.sampled_from([1, 256, 4096, 131072, pm.MAX_CONTEXT]))
    experts = draw(st.sampled_from([0, 0, 1, 2, 8, 128, pm.MAX_EXPERTS]))
    per_tok = 0 if experts == 0 else draw(st.integers(1, min(experts, 8)))
    sw = draw(st.sampled_from([0, 0, 1, 128, 4096, pm.MAX_CONTEXT]))
    sw = min(sw, maxpos)
    pattern = draw(st.sampled_from([(), pm.SWA_ALTERNATE, (True,) * layers, (False, True, True)])) if sw else ()
    pattern = pattern[:layers]
    kw = dict(
        name="m",
        model_type=draw(st.sampled_from(["llama", "qwen2", "phi3", "gemma2", "gpt_oss", "qwen3_moe", "lfm2"])),
        num_hidden_layers=layers,
        hidden_size=hidden,
        intermediate_size=draw(st.sampled_from([1, 512, 14336, pm.MAX_INTERMEDIATE])),
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        vocab_size=draw(st.sampled_from([1, 32000, 151936, pm.MAX_VOCAB])),
        head_dim=head_dim,
        tie_word_embeddings=draw(st.booleans()),
        max_position_embeddings=maxpos,
        num_local_experts=experts,
        num_experts_per_tok=per_tok,
        moe_intermediate_size=draw(st.sampled_from([0, 768, pm.MAX_INTERMEDIATE])) if experts else 0,
        shared_expert_intermediate_size=draw(st.sampled_from([0, 0, 2048])) if experts else 0,
        sliding_window=sw,
        sliding_window_pattern=pattern,
        attention_bias=draw(st.booleans()),
        qk_norm=draw(st.booleans()),
        rope_freqs=draw(st.booleans()),
        tokenizer=draw(st.sampled_from(["llama3", "spm", "o200k", "unknown"])),
    )
    # the 2025 architectures' features (issue 16): MLA, a hybrid's recurrent blocks, dense-first or interleaved MoE
    feature = draw(st.sampled_from(["", "", "mla", "hybrid", "moe_layout"]))
    if feature == "mla":
        kw.update(
            kv_lora_rank=draw(st.sampled_from([1, 512, pm.MAX_LORA_RANK])),
            q_lora_rank=draw(st.sampled_from([0, 1536])),
            qk_rope_head_dim=draw(st.sampled_from([1, 64, pm.MAX_HEAD_DIM])),
            qk_nope_head_dim=draw(st.sampled_from([1, 128])),
            v_head_dim=draw(st.sampled_from([1, 128, pm.MAX_HEAD_DIM])),
        )
    elif feature == "hybrid":
        kw.update(
            model_type="qwen3_next",
            full_attention_interval=draw(st.integers(1, layers)),
            linear_conv_kernel_dim=draw(st.sampled_from([1, 4, pm.MAX_CONV_KERNEL])),
            linear_key_head_dim=draw(st.sampled_from([1, 128, pm.MAX_HEAD_DIM])),
            linear_value_head_dim=draw(st.sampled_from([1, 128])),
            linear_num_key_heads=draw(st.sampled_from([1, 16, pm.MAX_HEADS])),
            linear_num_value_heads=draw(st.sampled_from([1, 32])),
        )
    elif feature == "moe_layout":
        kw.update(
            first_k_dense_replace=draw(st.integers(0, layers)),
            interleave_moe_layer_step=draw(st.integers(0, layers)),
            chunked_attention=draw(st.booleans()),
        )
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        kw[draw(st.sampled_from(FIELDS))] = draw(st.sampled_from(HOSTILE_FIELD_VALUES))
    return kw


property_stats = {"examples": 0, "constructed": 0, "refused": 0, "slowest_s": 0.0}


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    kw=model_kwargs(),
    machine=st.sampled_from(sorted(pm.MACHINES)),
    quant=st.sampled_from(["Q4_K_M", "Q8_0", "Q2_K_MIX", "IQ4_XS", "F16", "Q3_K"]),
    kv_type=st.sampled_from(pm.KV_TYPES),
    ctx_frac=st.floats(0, 1),
    ngl=st.one_of(st.none(), st.floats(0, 1)),
    batch=st.sampled_from([1, 2, 64, pm.MAX_BATCH]),
    n_tokens=st.sampled_from([1, 17, 512, 2048]),
    n_ubatch=st.sampled_from([32, 512, 4096]),
    profile=st.sampled_from(["course", "measured"]),
    n_threads=st.sampled_from([None, 1, 2, 1024]),
)
def _any_model_example(kw, machine, quant, kv_type, ctx_frac, ngl, batch, n_tokens, n_ubatch, profile, n_threads):
    """One example: a Model that constructs gives finite numbers quickly; one that does not names its field."""
    property_stats["examples"] += 1
    t0 = time.process_time()
    try:
        m = pm.Model(**kw)
    except ValueError as e:
        property_stats["refused"] += 1
        assert names_a_field(str(e)), f"the message names no field: {e}"
        assert time.process_time() - t0 < 0.5
        return
    property_stats["constructed"] += 1
    finite_nonneg(timed(m.total_params), "total_params")
    finite_nonneg(timed(m.active_params), "active_params")
    finite_nonneg(timed(pm.file_bytes, m, quant), "file_bytes")
    n_ctx = max(1, int(ctx_frac * m.max_position_embeddings))
    finite_nonneg(timed(pm.kv_cache_bytes, m, n_ctx, kv_type), "kv_cache_bytes")
    n_gpu_layers = None if ngl is None else int(ngl * (m.num_hidden_layers + 1))
    p = timed(
        pm.place,
        m,
        machine,
        quant,
        n_ctx=n_ctx,
        kv_type=kv_type,
        n_gpu_layers=n_gpu_layers,
        n_ubatch=n_ubatch,
        profile=profile,
    )
    finite_nonneg({k: v for k, v in p.as_dict().items() if k not in ("fits", "error")}, "place")
    d = timed(pm.decode_step_time, p, context=n_ctx, batch=batch, n_threads=n_threads)
    finite_nonneg({k: v for k, v in d.items() if k not in ("basis", "range_tok_s")}, "decode_step_time")
    f = timed(pm.prefill_time, p, n_tokens=n_tokens, n_threads=n_threads)
    finite_nonneg({k: v for k, v in f.items() if k != "steps"}, "prefill_time")
    property_stats["slowest_s"] = max(property_stats["slowest_s"], time.process_time() - t0)


def test_any_model_that_constructs_gives_finite_numbers_quickly():
    """The property over 150 examples, then its counts: both outcomes (made, refused) must have been exercised."""
    property_stats.update(examples=0, constructed=0, refused=0, slowest_s=0.0)
    _any_model_example()
    print(
        f"\nproperty: {property_stats['examples']} examples, {property_stats['constructed']} Models made, "
        f"{property_stats['refused']} refused; slowest example {property_stats['slowest_s']:.2f} s"
    )
    assert property_stats["examples"] >= 100
    assert property_stats["constructed"] + property_stats["refused"] == property_stats["examples"]
    assert property_stats["constructed"] >= 30 and property_stats["refused"] >= 10


@pytest.mark.parametrize("field", FIELDS)
def test_every_field_refuses_hostile_values_by_name(field):
    base = dataclasses.asdict(pm.MODELS["gemma-2-9b"])  # a sliding-window model: every kind of field is in use
    base["gguf_tensors"] = ()
    refused = 0
    for bad in HOSTILE_FIELD_VALUES:
        try:
            pm.Model(**{**base, field: bad})
        except ValueError as e:
            refused += 1
            assert names_a_field(str(e)), f"{field}={brief(bad)}: {e}"
    assert refused >= len(HOSTILE_FIELD_VALUES) - 4, f"{field} accepted too many hostile values"


def test_bounds_are_generous_for_real_models_and_refuse_past_them():
    base = dict(
        name="big",
        model_type="llama",
        num_hidden_layers=pm.MAX_LAYERS,
        hidden_size=pm.MAX_HIDDEN,
        intermediate_size=pm.MAX_INTERMEDIATE,
        num_attention_heads=pm.MAX_HEADS,
        num_key_value_heads=pm.MAX_HEADS,
        vocab_size=pm.MAX_VOCAB,
        head_dim=pm.MAX_HEAD_DIM,
        max_position_embeddings=pm.MAX_CONTEXT,
        sliding_window=pm.MAX_CONTEXT,
        sliding_window_pattern=(True,) * pm.MAX_LAYERS,
    )
    m = pm.Model(**base)  # every bound at once
    assert m.max_position_embeddings >= 10_485_760  # Llama 4 Scout's context
    for field in (
        "num_hidden_layers",
        "hidden_size",
        "intermediate_size",
        "num_attention_heads",
        "vocab_size",
        "head_dim",
        "max_position_embeddings",
    ):
        with pytest.raises(ValueError, match=f"^{field}"):
            pm.Model(**{**base, field: getattr(m, field) + 1})
    with pytest.raises(ValueError, match="^sliding_window: must be at most max_position_embeddings"):
        pm.Model(**{**base, "max_position_embeddings": 4096})
    with pytest.raises(ValueError, match="^num_key_value_heads: must divide"):
        pm.Model(**{**base, "num_key_value_heads": 3})
    with pytest.raises(ValueError, match="^num_experts_per_tok"):
        pm.Model(**{**base, "num_local_experts": 8, "num_experts_per_tok": 9})
    with pytest.raises(ValueError, match="^head_dim: qwen2 splits hidden_size"):
        pm.Model(**{**base, "model_type": "qwen2", "hidden_size": 4096, "head_dim": 128, "num_attention_heads": 64,
                    "num_key_value_heads": 8})  # fmt: skip
    with pytest.raises(ValueError, match="^sliding_window_pattern: must have at most one entry per layer"):
        pm.Model(**{**base, "num_hidden_layers": 4})
    # every catalog model is inside the bounds (they construct at import), and so is a list given for a tuple
    m = pm.replace(pm.MODELS["gemma-2-9b"], sliding_window_pattern=[True, False])
    assert m.sliding_window_pattern == (True, False) and hash(m) == hash(pm.MODELS["gemma-2-9b"])


def test_device_machine_and_placement_are_checked():
    with pytest.raises(ValueError, match="^bandwidth_gbs"):
        pm.Device("d", 8, 0, 10)
    with pytest.raises(ValueError, match="^fp16_tflops"):
        pm.Device("d", 8, 100, math.inf)
    with pytest.raises(ValueError, match="^gpu_share"):
        pm.Machine("m", pm.RTX_3060, pm.DDR5_DUAL, gpu_share=0)
    p = pm.place("llama-3.1-8b", "rtx3060")
    with pytest.raises(ValueError, match="^layer_device"):
        dataclasses.replace(p, layer_device=("gpu",))
    with pytest.raises(ValueError, match="^placement"):
        pm.decode_step_time("not a placement")


# ---------------------------------------------------------------------------------------------------------------
# The time bound inside perf_model's Time section: prefill is timed in at most PREFILL_GROUP_MAX groups and
# attention pairs in closed form, so any valid prompt length is quick (issue 12)
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n_tokens, n_ubatch", [(8192, 1), (1 << 20, 512), (pm.MAX_CONTEXT, 512)])
def test_prefill_of_any_valid_length_is_quick(n_tokens, n_ubatch):
    # in a child process, killed at the bound, so a slow case fails without burning CPU for the rest of the suite
    code = f"""
import perf_model as pm
m = pm.Model(name="deep swa", model_type="gemma2", num_hidden_layers=pm.MAX_LAYERS, hidden_size=4096,
             intermediate_size=4096, num_attention_heads=32, num_key_value_heads=8, vocab_size=32000,
             head_dim=128, max_position_embeddings=pm.MAX_CONTEXT, sliding_window=4096,
             sliding_window_pattern=pm.SWA_ALTERNATE)
p = pm.place(m, "rtx4090", "Q4_K_M", n_ctx=8192)
for profile in ("course", "measured"):
    r = pm.prefill_time(p, n_tokens={n_tokens}, n_ubatch={n_ubatch}, profile=profile)
    assert r["total_s"] > 0 and r["tok_per_s"] > 0
"""
    pylib = str(Path(__file__).resolve().parents[1] / "pylib")
    try:
        subprocess.run([sys.executable, "-c", code], check=True, timeout=TIME_BOUND_S + 2, env={"PYTHONPATH": pylib})
    except subprocess.TimeoutExpired:
        pytest.fail(f"prefill_time({n_tokens:,} tokens, n_ubatch={n_ubatch}) took over {TIME_BOUND_S} s")


# ---------------------------------------------------------------------------------------------------------------
# Crafted GGUF headers: one lie each (the findings)
# ---------------------------------------------------------------------------------------------------------------
def _llama(replace_kv=(), drop=(), tensors=None):
    kvs, ts = fz.SEEDS["llama"]
    keys = {k for k, _t, _v in replace_kv}
    kvs = [k for k in kvs if k[0] not in keys and not k[0].endswith(drop)] + list(replace_kv)
    return fz.gguf_bytes(kvs, ts if tensors is None else tensors)


@pytest.mark.parametrize(
    "kv, match",
    [
        (("llama.attention.head_count_kv", "f32", math.inf), r"^num_key_value_heads \(llama.attention.head_count_kv"),
        (("llama.attention.head_count_kv", "f64", math.nan), r"^num_key_value_heads \(llama.attention.head_count_kv"),
        (("llama.attention.key_length", "arr", ("u32", [64] * 3 + [128])), r"^head_dim \(llama.attention.key_length"),
        (("llama.attention.key_length", "i32", -128), r"^head_dim \(llama.attention.key_length"),
        (("llama.block_count", "u64", 10**9), r"^num_hidden_layers \(llama.block_count.*1,000"),
        (("llama.block_count", "u32", 0), r"^num_hidden_layers \(llama.block_count"),
        (("llama.embedding_length", "u64", 2**64 - 1), r"^hidden_size \(llama.embedding_length"),
        (("llama.context_length", "str", "4096"), r"^max_position_embeddings \(llama.context_length"),
        (("llama.attention.head_count", "arr", ("arr", [("u32", [2])] * 4)), r"^num_attention_heads"),
        (("llama.attention.head_count_kv", "arr", ("u32", [2, 4])), r"^num_key_value_heads.*one entry per block"),
        (("llama.attention.head_count_kv", "u32", 3), r"^num_key_value_heads.*must divide"),
        (("llama.vocab_size", "bool", True), r"^vocab_size \(llama.vocab_size"),
    ],
)
def test_crafted_gguf_values_are_refused_by_name(kv, match):
    t0 = time.process_time()
    with pytest.raises(ValueError, match=match):
        pm.model_from_gguf(_llama([kv]))
    assert time.process_time() - t0 < 0.5


def test_per_layer_head_counts_are_handled_as_llama_cpp_reads_them():
    m = pm.model_from_gguf(fz.gguf_bytes(*fz.SEEDS["lfm2"]))  # head_count_kv [0, 2, 0, 2], FFN [512, 512, 1024, 512]
    assert m.num_key_value_heads == 2 and m.intermediate_size == 1024
    p = pm.place(m, "rtx3060", None, n_ctx=4096)
    finite_nonneg(pm.decode_step_time(p, context=4096), "decode")


def test_every_ggml_type_the_reader_accepts_has_sizes():
    m = pm.model_from_gguf(fz.gguf_bytes(*fz.SEEDS["all_types"]))
    types = {r["type"] for r in pm.quantize_plan(m, None)}
    assert {"Q1_0", "Q2_0", "NVFP4", "MXFP4", "TQ1_0", "IQ1_M"} <= types
    assert types >= {t.name for t in GGML_TYPES_BY_ID.values()}
    for r in pm.quantize_plan(m, None):
        assert r["bytes"] > 0
    finite_nonneg(pm.file_bytes(m, None), "file_bytes")
    finite_nonneg(pm.decode_step_time(pm.place(m, "m4max", None), context=100), "decode")
    # requantizing the file's tensors with a preset works from any source type
    finite_nonneg(pm.file_bytes(m, "Q4_K_M"), "file_bytes")


def test_unknown_ggml_type_is_reported_by_tensor_name():
    kvs, ts = fz.SEEDS["llama"]
    bad = [(name, dims, 99 if i == 3 else tid) for i, (name, dims, tid) in enumerate(ts)]
    with pytest.raises(ValueError, match=rf"tensor '{ts[3][0]}'.*ggml type 99"):
        pm.model_from_gguf(fz.gguf_bytes(kvs, bad))
    with pytest.raises(ValueError, match="Q4_2, a type ggml has removed"):
        pm.model_from_gguf(fz.gguf_bytes(kvs, [(n, [32, 4], 4) for n, _d, _t in ts[:1]]))


def test_files_without_a_usable_tensor_table_are_refused():
    kvs, ts = fz.SEEDS["llama"]
    with pytest.raises(ValueError, match="^tensors: the GGUF header lists no tensors"):
        pm.model_from_gguf(fz.gguf_bytes(kvs, []))
    with pytest.raises(ValueError, match=r"blk.7.attn_q.weight names a block beyond block_count=4"):
        pm.model_from_gguf(fz.gguf_bytes(kvs, ts + [("blk.7.attn_q.weight", [512, 512], 1)]))
    with pytest.raises(ValueError, match="dimension 1 must be an integer from 1"):
        pm.model_from_gguf(fz.gguf_bytes(kvs, ts + [("blk.0.zero.weight", [512, 0], 1)]))
    with pytest.raises(ValueError, match="must have 1 to 4 dimensions"):
        pm.model_from_gguf(fz.gguf_bytes(kvs, ts + [("scalar", [], 0)]))
    with pytest.raises(ValueError, match="^source: not a GGUF file"):
        pm.model_from_gguf(b"GGML" + bytes(64))
    with pytest.raises(ValueError, match="^source"):
        pm.model_from_gguf(12345)


def test_a_negative_key_length_never_gives_fits_yes():
    """The issue's case: key_length = -128 gave VRAM -0.0, prefill -6,313,981 tok/s and fits = yes."""
    with pytest.raises(ValueError, match="^head_dim"):
        pm.model_from_gguf(_llama([("llama.attention.key_length", "i32", -128)]))


# ---------------------------------------------------------------------------------------------------------------
# config.json: hostile dicts and texts
# ---------------------------------------------------------------------------------------------------------------
CFG = dict(ha.LLAMA_CONFIG)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"num_hidden_layers": 1_000_000}, r"^num_hidden_layers: must be an integer from 1 to 1,000"),
        ({"num_hidden_layers": 10**8}, r"^num_hidden_layers"),
        ({"hidden_size": 10**400}, r"^hidden_size: .*401 digits"),
        ({"head_dim": 1, "rope_scaling": {"rope_type": "llama3"}}, r"^head_dim: must be even"),
        ({"num_key_value_heads": 3}, r"^num_key_value_heads: must divide"),
        ({"vocab_size": "32000"}, r"^vocab_size: must be an integer"),
        ({"vocab_size": 32000.0}, r"^vocab_size: must be an integer"),
        ({"num_hidden_layers": True}, r"^num_hidden_layers"),
        ({"tie_word_embeddings": "yes"}, r"^tie_word_embeddings"),
        ({"attention_bias": [1]}, r"^attention_bias"),
        ({"max_position_embeddings": 2**26}, r"^max_position_embeddings"),
        ({"model_type": ["llama"]}, r"^model_type"),
        ({"model_type": "qwen3_moe", "num_experts": 8, "num_experts_per_tok": 9, "moe_intermediate_size": 64},
         r"^num_experts_per_tok"),
        ({"model_type": "qwen3_moe", "num_experts": 10**4, "num_experts_per_tok": 1, "moe_intermediate_size": 64},
         r"^num_experts: must be an integer from 0 to 4,096"),
    ],
)  # fmt: skip
def test_hostile_config_values_are_refused_quickly_by_name(change, match):
    t0 = time.process_time()
    with pytest.raises(ValueError, match=match):
        pm.model_from_hf_config({**CFG, **change})
    assert time.process_time() - t0 < 0.5


def test_config_json_with_odd_shapes():
    assert pm.model_from_hf_config({**CFG, "num_key_value_heads": None}).num_key_value_heads == 4  # null: default
    # text_config merges even when the top level has non-string keys (a Python dict, not JSON)
    m = pm.model_from_hf_config({"text_config": dict(CFG), 1: 2, "model_type": "llama"})
    assert m.num_hidden_layers == 4
    with pytest.raises(ValueError, match="^config"):
        pm.model_from_hf_config([CFG])
    with pytest.raises(ValueError, match="^name"):
        pm.model_from_hf_config(CFG, name=["x"])
    assert len(pm.model_from_hf_config({**CFG, "_name_or_path": "x" * 10_000}).name) <= pm.MAX_TEXT_CHARS


@pytest.mark.parametrize(
    "text, match",
    [
        ("[" * 50000 + "]" * 50000, "nested more than 32 levels"),
        ('{"a": ' * 40 + "1" + "}" * 40, "nested more than 32 levels"),
        ('{"num_hidden_layers": ' + "9" * 5000 + "}", "a number of 5,000 characters"),
        ('{"x": 1e99999}', "a number of 7 characters|model_type"),
        ('{"x": NaN}', "NaN is not a number JSON allows"),
        ("{" + '"' + '\\"' * 99_000 + "}", "not valid JSON"),  # an unterminated string: one linear pass
        ("x" * (custom.CONFIG_MAX_CHARS + 1), "too long for a config"),
    ],
)
def test_json_text_is_limited_before_parsing(text, match):
    t0 = time.process_time()
    with pytest.raises(ValueError, match=match):
        custom.model_from_config_text(text)
    assert time.process_time() - t0 < 0.5


def test_brackets_and_digits_inside_strings_do_not_count():
    text = json.dumps({**CFG, "_name_or_path": "[" * 100 + "9" * 100})
    assert custom.model_from_config_text(text).num_hidden_layers == 4


# ---------------------------------------------------------------------------------------------------------------
# kv_managers: the absurd arguments
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: kv.PagedManager(384, block_size=0), "^block_size"),
        (lambda: kv.PagedManager("384"), "^capacity_tokens"),
        (lambda: kv.SlotManager(1.5), "^capacity_tokens"),
        (lambda: kv.RadixManager(10**9), "^capacity_tokens: must be an integer from 1 to 2,097,152"),
        (lambda: kv.SlotManager(384, n_parallel=0), "^n_parallel"),
        (lambda: kv.simulate(kv.PagedManager(256), [kv.Request(0, 0, (1, 2), -3)]), r"^requests\[0\].reply"),
        (lambda: kv.simulate(kv.RadixManager(1 << 20), kv.chat_workload()), "^record_frames: a pool of 1,048,576"),
        (lambda: kv.simulate(kv.PagedManager(256), [kv.Request(0, 0, ([1],), 2)]), r"^requests\[0\].prompt"),
        (lambda: kv.simulate(kv.PagedManager(256), [kv.Request(0, 0, (1,), 2, follows=7)]), r"follows"),
        (lambda: kv.agent_workload(10**9), "^n_requests"),
        (lambda: kv.compare(8), "^capacity_tokens"),
    ],
)
def test_kv_managers_refuse_absurd_arguments_by_name(make, match):
    t0 = time.process_time()
    with pytest.raises(ValueError, match=match):
        make()
    assert time.process_time() - t0 < 0.5


def test_a_long_chain_of_rejected_follow_ups_needs_no_recursion():
    reqs = [kv.Request(0, 0, tuple(range(500)), 10)]  # too big for the pool: rejected, and so is every follow-up
    reqs += [kv.Request(i, 0, (1, 2), 2, follows=i - 1) for i in range(1, 5000)]
    run = kv.simulate(kv.PagedManager(256), reqs, record_frames=False)
    assert len(run["summary"]["rejected"]) == 5000


def test_recorded_frames_are_bounded_in_memory():
    reqs = [kv.Request(i, 0, (i, i + 1), 2000) for i in range(30)]  # ~60,000 steps of a 65,536-cell pool
    with pytest.raises(ValueError, match="^record_frames: .* would pass 8,388,608 recorded cells"):
        kv.simulate(kv.SlotManager(1 << 16, n_parallel=1), reqs, record_frames=True)


# ---------------------------------------------------------------------------------------------------------------
# The fuzz (CI size) and the hostile-argument table
# ---------------------------------------------------------------------------------------------------------------
FUZZ_INPUTS = 400


def test_fuzz_gguf_header_to_timing():
    t0 = time.process_time()
    s = fz.fuzz(FUZZ_INPUTS, seed=12).as_dict()
    print(
        f"\nfuzz: {s['inputs']} GGUF headers, {s['accepted']} became Models, {s['refused_value_error']} refused "
        f"(ValueError), failures {s['failures'] or 0}, slowest call {s['slowest_call_s'] * 1e3:.0f} ms "
        f"({s['slowest_call']}), {time.process_time() - t0:.1f} CPU s in all"
    )
    assert s["failures_total"] == 0, s["examples"]
    assert s["slow_calls_over_3s"] == 0
    assert s["accepted"] >= 50 and s["refused_value_error"] >= 100  # both sides of the boundary are exercised


CONFIG_FUZZ_INPUTS = 300


def test_fuzz_config_json_to_timing():
    # the block readers (enginelab.arch_config) and the generic one, through placement and timing
    s = fz.fuzz_configs(CONFIG_FUZZ_INPUTS, seed=5).as_dict()
    assert s["failures_total"] == 0, s["examples"]
    assert s["slow_calls_over_3s"] == 0
    assert s["accepted"] >= 100 and s["refused_value_error"] >= 30


@pytest.mark.parametrize("name", sorted(fz.BLOCK_SEEDS))
def test_block_seeds_read_back_exactly(name):
    # each block kind's tensor table (fuzz_pipeline.BLOCK_SEEDS) is what the block reader turns back into the
    # blocks it was written from, so the GGUF fuzz starts from every kind arch_gguf knows
    from enginelab import arch_gguf

    _arch, bm, _keys = fz.BLOCK_MODELS[name]
    got = arch_gguf.read_gguf_blocks(fz.gguf_bytes(*fz.BLOCK_SEEDS[name]))
    assert got.blocks == bm.blocks and got.globals == bm.globals and got.unknown == ()


def test_hostile_arguments_to_every_public_function():
    calls = unnamed = 0
    escapes = []
    for label, fn, arg, kwargs, nonneg in ha.attacks():
        calls += 1
        try:
            outcome, _dt, msg = ha.attack(label, fn, arg, kwargs, nonneg)
        except ha.Escape as e:
            escapes.append(str(e))
            continue
        if outcome == "ValueError" and not ha.names_argument(msg, arg):
            unnamed += 1
            escapes.append(f"{label}({arg}={brief(kwargs[arg])}): the message names no argument: {msg[:120]}")
    print(f"\nhostile arguments: {calls} calls over {len(ha.CASES)} functions, {len(escapes)} escapes")
    assert not escapes, "\n".join(escapes[:30])


# ---------------------------------------------------------------------------------------------------------------
# URL state: every figure page renders whatever the query string says (a message explains what was rejected)
# ---------------------------------------------------------------------------------------------------------------
URL_VALUES = ["nan", "inf", "-inf", "1e999", "-1", "0", "9" * 30, "9" * 5000, "abc", "", "%00", "<img src=x>",
              "1.5", "auto", "custom", "gguf", "[" * 5000, "{" * 40 + "}" * 40, "true", "Q1_0", "1e-999", "-0"]  # fmt: skip


def test_hostile_query_strings_render_every_figure():
    import random

    from enginelab import figures, page

    rng = random.Random(7)
    for fid in figures.FIGURES:
        fig = figures.get(fid)
        keys = [f.key for f in fig.SPEC.fields] + ["cfg", "gpu_gb", "model", "machine", "unknown"]
        for _ in range(40):
            q = "&".join(f"{rng.choice(keys)}={rng.choice(URL_VALUES)}" for _ in range(rng.randint(1, 4)))
            t0 = time.process_time()
            state, _messages = fig.SPEC.from_query("?" + q)
            view = page.view(fig, state, defer=False)
            assert view["figure"] and time.process_time() - t0 < TIME_BOUND_S, (fid, q[:200])
