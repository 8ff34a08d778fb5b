"""The reader's llama.cpp build as an input of the measured profile: today by default, a date otherwise."""

from __future__ import annotations

import pytest

import perf_model as pm
from enginelab import measured as me


@pytest.fixture(scope="module")
def moe_on_cuda():
    return pm.place("qwen3-30b-a3b", "rtx4090", "Q4_K_M", n_ctx=4096, profile="measured")


def test_no_build_and_today_are_todays_estimate(moe_on_cuda):
    base = pm.decode_step_time(moe_on_cuda, context=1000)
    for b in ("", "today", "latest"):
        assert pm.decode_step_time(moe_on_cuda, context=1000, build=b) == base
    assert "build" not in base


def test_a_build_before_the_fused_expert_sum_pays_an_add_per_expert(moe_on_cuda):
    # ggml-cuda fused the k - 1 adds of the experts' sum on 2025-08-29 (#15631): a build of the day before
    # launches one kernel per routed expert in every MoE block, today's one per block: 48 x 8 - 48 = 336 more.
    # Nothing else in the change table touches an RTX 4090 between then and now (CUDA graphs: Ada had them).
    m = pm.MODELS["qwen3-30b-a3b"]
    assert (m.num_hidden_layers, m.num_experts_per_tok) == (48, 8)
    today = pm.decode_step_time(moe_on_cuda, context=1000)
    old = pm.decode_step_time(moe_on_cuda, context=1000, build="2025-08-28")
    extra = 48 * 8 - 48
    assert old["total_s"] - today["total_s"] == pytest.approx(extra * me.PARAMS["cuda"].expert_us * 1e-6, rel=1e-9)
    assert old["build"] == "2025-08-28"
    # the day it landed has it
    assert pm.decode_step_time(moe_on_cuda, context=1000, build="2025-08-29")["total_s"] == today["total_s"]


def test_the_course_profile_has_no_builds(moe_on_cuda):
    c = pm.place("qwen3-30b-a3b", "rtx4090", "Q4_K_M", n_ctx=4096)
    assert pm.decode_step_time(c, build="2024-01-01") == pm.decode_step_time(c)


def test_prefill_takes_a_build_too(moe_on_cuda):
    t = pm.prefill_time(moe_on_cuda, n_tokens=512, build="2025-01-15")
    assert t["build"] == "2025-01-15" and t["tok_per_s"] > 0


@pytest.mark.parametrize("bad", ["2025-13-01", "yesterday", "25-01-01", "2025-1-1", 2025, "x" * 100, "２０２５-01"])
def test_a_build_that_is_not_a_date_names_the_argument(moe_on_cuda, bad):
    with pytest.raises(ValueError, match=r"^build: "):
        pm.decode_step_time(moe_on_cuda, build=bad)
