"""Tests for perf_model.batched (the batched forward pass) and enginelab.serving.fit (its calibration)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "pylib"))

import perf_model as pm  # noqa: E402
from enginelab import measured  # noqa: E402
from enginelab.serving import fit  # noqa: E402
from perf_model import batched as step  # noqa: E402
from perf_model import kernels  # noqa: E402


@pytest.fixture(scope="module")
def p1b():
    return pm.place("llama-3.2-1b", "rtx4090", "F16", n_ctx=8192)


def test_weights_once_kv_per_sequence(p1b):
    # Llama 3.2 1B: 16 layers x 8 KV heads x 64 dims x (K and V) x 2 bytes = 32,768 bytes per cached token
    w1, n1, _ = step.step_work(p1b, [100])
    w2, n2, _ = step.step_work(p1b, [100, 300, 7])
    assert (n1, n2) == (1, 3)
    assert w2["gpu"].weight_bytes == w1["gpu"].weight_bytes  # read once, whatever the batch
    assert w2["gpu"].kv_bytes == pytest.approx(32768 * (100 + 300 + 7))
    assert w1["gpu"].kv_bytes == pytest.approx(32768 * 100)


def test_a_prefill_chunk_reads_its_prefix_and_computes_causal_pairs(p1b):
    m = p1b.model
    # a chunk of 4 tokens after 10 cached ones: reads 14 tokens of KV; pairs 11 + 12 + 13 + 14 = 50
    w, n, logits = step.step_work(p1b, [], [(10, 4, True)])
    assert (n, logits) == (4, 1)
    assert w["gpu"].kv_bytes == pytest.approx(32768 * 14)
    per_pair = 4.0 * m.num_attention_heads * m.d_head  # QK^T and AV, 2 FLOPs each per head dim
    assert w["gpu"].attn_flops == pytest.approx(per_pair * 50 * m.num_hidden_layers)


def test_single_decode_equals_decode_step_time_in_the_course_profile(p1b):
    for ctx in (0, 1000, 4096):
        a = step.batched_step(p1b, [ctx], profile="course")["total_s"]
        b = pm.decode_step_time(p1b, context=ctx, batch=1, profile="course")["total_s"]
        assert a == pytest.approx(b, rel=1e-12)


def test_moe_experts_touched_grow_with_the_batch():
    p = pm.place("qwen3-30b-a3b", "rtx4090", "Q4_K_M", n_ctx=4096, n_gpu_layers=0)
    e, k, layers = 128, 8, 48
    for b in (1, 4, 16):
        w = step.step_work(p, [64] * b)[0]["cpu"]
        touched = e * (1 - (1 - k / e) ** b)  # expected distinct experts per block for b tokens
        assert w.expert_calls == pytest.approx(touched * layers)
    # batched-bench feeds every sequence the same token: one token's experts only
    same = step.step_work(p, [64] * 16, same_tokens=True)[0]["cpu"]
    one = step.step_work(p, [64])[0]["cpu"]
    assert same.weight_bytes == pytest.approx(one.weight_bytes)


def test_vllm_pads_decode_batches_to_cuda_graph_sizes(p1b):
    assert step.padded_batch(3, [1, 2, 4, 8]) == 4
    r = step.batched_step(p1b, [50] * 9, engine="vllm")
    assert r["padded_batch"] == 16  # capture sizes 1, 2, 4, 8, 16, 24, ...
    assert step.batched_step(p1b, [50] * 300, engine="vllm", max_num_seqs=256)["padded_batch"] == 304
    assert step.batched_step(p1b, [50] * 9)["padded_batch"] == 9  # llama.cpp runs the batch as it is


def test_llama_cpp_leaves_mat_vec_above_eight_tokens():
    p = pm.place("llama-3.1-8b", "rtx4090", "Q4_K_M", n_ctx=8192, profile="measured")
    t = {b: step.batched_step(p, [512] * b)["total_s"] for b in (1, 2, 7, 8, 9)}
    assert t[1] < t[2] < t[7] < t[8] < t[9]
    # at 9 tokens the MMQ tiles stream the weights (1 + MM_BW) x slower than one mat-vec pass reads them
    w = step.step_work(p, [512] * 9)[0]["gpu"]
    _t, t_mem, _c, _b = measured.decode_seconds(w, p.machine.gpu, "cuda", None, 1)
    t_w = t_mem * w.weight_bytes / w.bytes
    assert t[9] >= (1 + kernels.MM_BW) * t_w


def test_bad_arguments_name_themselves(p1b):
    for kwargs, name in (
        ({"contexts": [-1]}, "contexts"),
        ({"contexts": [], "chunks": []}, "contexts"),
        ({"contexts": [1], "chunks": [(0, 0, True)]}, "chunks"),
        ({"contexts": [1], "engine": "tgi"}, "engine"),
        ({"contexts": [1], "profile": "fast"}, "profile"),
    ):
        with pytest.raises(ValueError, match=f"^{name}"):
            step.batched_step(p1b, **kwargs)
    with pytest.raises(ValueError, match="^placement"):
        step.batched_step("llama", [1])


@pytest.fixture(scope="module")
def bench_samples():
    return fit.samples()


def test_batched_bench_rows_carry_a_source(bench_samples):
    rows = fit._rows("serving_batched_bench.csv")
    assert len(rows) >= 90
    assert all(r["source"].startswith("https://github.com/ggml-org/llama.cpp/") for r in rows)
    assert len(bench_samples) >= 70  # the rows we can time (the QAT gemma file is 7% off our size: left out)


def test_the_shipped_parameters_are_the_fit(bench_samples):
    shape, params = fit.fit_all(bench_samples)
    assert shape == (kernels.MV_COL, kernels.MM_BW)
    assert params["cuda"] == kernels.BATCH_PARAMS["cuda"]


def test_batched_decode_error_gates(bench_samples):
    inside = fit.summary(fit.errors(bench_samples))
    assert inside["median"] <= 0.10 and inside["p90"] <= 0.25
    # held out by model (a model's rows predicted from a fit on the other models): the targets
    held = fit.summary([e for _s, e in fit.loo(bench_samples, by="model")])
    assert held["median"] <= 0.10 and held["p90"] <= 0.25


def test_leave_one_device_out_error(bench_samples):
    # The gate (median 10%, p90 25%) is not met: the rows come from two devices, one per backend, so a
    # held-out DGX Spark leaves no CUDA row to fit on and takes the prior (no batched-kernel effect). Measured:
    # median 60.8%, p90 162% (the M2 Ultra's 3 rows near 7% / 19%). This keeps it from getting worse until rows
    # from more devices per backend are in data/serving/batched_bench.csv.
    held = fit.loo(bench_samples, by="device")
    assert {s.device for s, _e in held} == {s.device for s in bench_samples}
    s = fit.summary([e for _s, e in held])
    assert s["n"] == len(bench_samples)
    assert s["median"] <= 0.65 and s["p90"] <= 1.70


@pytest.mark.parametrize("b", [2, 8, 9, 32])
def test_decode_step_time_times_a_batch_with_the_batched_kernels(b):
    """decode_step_time(batch=B) in the measured profile is the batched step's pass of B sequences at one context
    (llama.cpp's kernels), not B tokens at the one-token rate; the course profile keeps the module's roofline."""
    p = pm.place("llama-3.1-8b", "rtx4090", "Q4_K_M", n_ctx=8192, profile="measured")
    d = pm.decode_step_time(p, context=1000, batch=b)
    s = step.batched_step(p, [1000] * b)
    assert d["gpu_s"] == pytest.approx(s["gpu_s"], rel=1e-9)
    one = pm.decode_step_time(p, context=1000)
    assert one["gpu_s"] < d["gpu_s"] and d["tok_per_s"] > one["tok_per_s"]  # slower passes, more tokens a second
    c = pm.place("llama-3.1-8b", "rtx4090", "Q4_K_M", n_ctx=8192)
    w = pm._decode_work(c, 1000, b)["gpu"]
    dev = c.machine.gpu
    assert pm.decode_step_time(c, context=1000, batch=b)["gpu_s"] == max(
        w.bytes / (pm.ETA_DECODE * dev.bandwidth), w.flops / (pm.ETA_PREFILL * dev.flops)
    )


def test_a_hybrids_recurrent_blocks_scan_a_chunk_token_by_token():
    """Qwen3.5 27B: 48 of its 64 blocks are gated delta nets. A pass of decode tokens advances each block's state
    one step (the sequences side by side); a 512-token prefill chunk walks its tokens in order: 48 x 512 steps,
    as a prefill micro-batch does (perf_model._prefill_work)."""
    p = pm.place("qwen3.5-27b", "rtx4090", "Q4_K_M", n_ctx=8192, profile="measured")
    dec = step.step_work(p, [100] * 4)[0]["gpu"]
    assert (dec.rec_blocks, dec.rec_steps) == (48, 48.0)
    pre = step.step_work(p, [], [(0, 512, True)])[0]["gpu"]
    assert (pre.rec_blocks, pre.rec_steps) == (48, 48.0 * 512)
    assert pre.rec_steps == pm._prefill_work(p, 0, 512)["gpu"].rec_steps
