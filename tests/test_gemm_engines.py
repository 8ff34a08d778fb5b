"""vLLM's and SGLang's weight-only quantized GEMMs: BF16 tensor-core math on dequantized weight tiles."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "pylib"))

import perf_model as pm  # noqa: E402
from enginelab import measured  # noqa: E402
from enginelab.serving import validate  # noqa: E402
from perf_model import batched as step  # noqa: E402
from perf_model import kernels  # noqa: E402


@pytest.fixture(scope="module")
def oss_a100():
    # gpt-oss-20b as vLLM loads it: MXFP4 routed experts, BF16 elsewhere
    p = pm.place(
        validate.run_model("gpt-oss-20b"), validate._machine("A100 SXM4 80GB"), "BF16", n_ctx=16384, profile="measured"
    )
    w = step.step_work(p, [], [(0, 2048, True)])[0]["gpu"]
    return p, w


def test_the_pass_holds_mxfp4_experts(oss_a100):
    _p, w = oss_a100
    types = dict(w.weights_by_type)
    assert types.get("MXFP4", 0) > types.get("BF16", 0) > 0


def test_gemm_engines_multiply_quantized_weights_at_the_16_bit_rate(oss_a100):
    p, w = oss_a100
    dev, prm = p.machine.gpu, measured.params_for("cuda")
    layers = w.layers * prm.pp_layer_us * 1e-6
    t_vllm = kernels.batched_seconds(w, dev, "cuda", 2048, "vllm", None)[2] - layers
    t_sglang = kernels.batched_seconds(w, dev, "cuda", 2048, "sglang", None)[2] - layers
    t_llama = kernels.batched_seconds(w, dev, "cuda", 2048, "llama.cpp", None)[2] - layers
    rates = measured.class_rates(dev, "cuda", prm)
    f16 = measured.soft_min(rates["f16"], prm.pp_sat_tflops * 1e12)
    # every FLOP of the pass at the 16-bit class rate, whatever the weights' type (MoE: no wave gain)
    assert t_vllm == pytest.approx(w.flops / f16, rel=1e-9)
    assert t_sglang == pytest.approx(t_vllm, rel=1e-12)
    # llama.cpp's MMQ runs MXFP4 on int8 tiles with its dequantization cost: slower than that on the A100
    assert t_llama > 1.2 * t_vllm
    # a BF16 model gets nothing from the change: its weights are at that rate already
    q = pm.place("llama-3.1-8b", validate._machine("A100 SXM4 80GB"), "BF16", n_ctx=8192)
    wq = step.step_work(q, [], [(0, 2048, True)])[0]["gpu"]
    assert measured._matmul_seconds(wq.flops, wq, dev, "cuda", prm, None, w16=True) == pytest.approx(
        measured._matmul_seconds(wq.flops, wq, dev, "cuda", prm, None), rel=1e-12
    )


def test_the_16_bit_rate_leaves_llama_cpp_and_batch_one_alone(oss_a100):
    p, _w = oss_a100
    # llama.cpp's prompt and decode do not take the flag: the same seconds with and without the GEMM engines
    t = step.batched_step(p, [], [(0, 512, True)], engine="llama.cpp")["total_s"]
    assert t == step.batched_step(p, [], [(0, 512, True)])["total_s"]
    # a vLLM pass of a 2048-token chunk, where the matmuls set the time, is quicker than llama.cpp's
    chunk = [(0, 2048, True)]
    assert step.batched_step(p, [], chunk, engine="vllm")["total_s"] < step.batched_step(p, [], chunk)["total_s"]
