"""serving_plan: vLLM's and SGLang's start-up arithmetic, checked by hand."""

from __future__ import annotations

import math
import re

import pytest

import perf_model as pm
from enginelab import serving_plan as sp

GiB = 1 << 30


def test_llama31_8b_bf16_on_24gb_at_0_9_by_hand():
    p = sp.vllm_plan("llama-3.1-8b", "rtx4090", "bf16", gpu_memory_utilization=0.9, max_model_len=8192)
    # Llama 3.1 8B: 32 layers, 8 KV heads, head_dim 128, bf16 KV (auto = model dtype).
    # One block of one layer: 2 (K,V) * 16 tokens * 8 heads * 128 * 2 bytes = 65,536 bytes.
    assert p["page_size_bytes"] == 2 * 16 * 8 * 128 * 2 == 65536
    assert p["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2 == 131072
    # requested = 0.9 * 24 GiB
    assert p["requested_bytes"] == pytest.approx(0.9 * 24 * GiB)
    # weights: 8,030,261,248 parameters (HF count) * 2 bytes
    assert p["weights"]["params"] == 8030261248
    assert p["weights_bytes"] == 2 * 8030261248
    available = (
        p["requested_bytes"]
        - p["weights_bytes"]
        - p["peak_activation_bytes"]
        - p["non_torch_bytes"]
        - p["cudagraph_bytes"]
    )
    assert p["available_kv_bytes"] == pytest.approx(available)
    # num_gpu_blocks = available // page_size // num_layers
    assert p["num_gpu_blocks"] == int(available // 65536 // 32)
    # the log lines: tokens = blocks * 16 (8192 is a multiple of 16); concurrency = blocks / (8192/16)
    assert p["gpu_kv_cache_tokens"] == p["num_gpu_blocks"] * 16
    assert p["max_concurrency"] == pytest.approx(p["num_gpu_blocks"] / 512)
    assert sp.vllm_kv_log_line(p) == f"GPU KV cache size: {p['num_gpu_blocks'] * 16:,} tokens"
    assert (
        sp.vllm_concurrency_log_line(p)
        == f"Maximum concurrency for 8,192 tokens per request: {p['num_gpu_blocks'] / 512:.2f}x"
    )
    assert p["fits"] and p["error"] is None
    # KV pool + everything else never exceeds the requested budget
    assert (
        p["kv_cache_bytes"]
        + p["weights_bytes"]
        + p["peak_activation_bytes"]
        + p["non_torch_bytes"]
        + p["cudagraph_bytes"]
        <= p["requested_bytes"]
    )
    assert p["command"] == (
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --gpu-memory-utilization 0.9 --max-model-len 8192"
    )


def test_fp8_kv_doubles_tokens():
    a = sp.vllm_plan("llama-3.1-8b", "rtx4090", max_model_len=8192)
    b = sp.vllm_plan("llama-3.1-8b", "rtx4090", max_model_len=8192, kv_cache_dtype="fp8")
    assert b["page_size_bytes"] * 2 == a["page_size_bytes"]
    # same available bytes, half the page: twice the blocks (to within the floor of one division)
    assert b["available_kv_bytes"] == a["available_kv_bytes"]
    assert b["num_gpu_blocks"] in (2 * a["num_gpu_blocks"], 2 * a["num_gpu_blocks"] + 1)
    assert b["gpu_kv_cache_tokens"] >= 2 * a["gpu_kv_cache_tokens"]
    assert "--kv-cache-dtype fp8" in b["command"]
    e5 = sp.vllm_plan("llama-3.1-8b", "rtx4090", max_model_len=8192, kv_cache_dtype="fp8_e5m2")
    assert e5["num_gpu_blocks"] == b["num_gpu_blocks"]


def test_enforce_eager_frees_graph_memory():
    a = sp.vllm_plan("qwen2.5-7b", "rtx3090", max_model_len=16384)
    b = sp.vllm_plan("qwen2.5-7b", "rtx3090", max_model_len=16384, enforce_eager=True)
    assert a["cudagraph_bytes"] > 0 and b["cudagraph_bytes"] == 0
    assert b["available_kv_bytes"] - a["available_kv_bytes"] == pytest.approx(a["cudagraph_bytes"])
    assert b["num_gpu_blocks"] > a["num_gpu_blocks"]
    assert b["command"].endswith("--enforce-eager")


def test_oversized_max_model_len_errors_like_vllm():
    # The default max_model_len is the model's 131072: a 16 GiB bf16 KV cache on top of 15 GiB of weights.
    p = sp.vllm_plan("llama-3.1-8b", "rtx4090")
    assert p["max_model_len"] == 131072 and not p["fits"]
    assert p["needed_bytes"] == 131072 // 16 * 65536 * 32 == 16 * GiB
    assert p["error"].startswith(
        "ValueError: To serve at least one request with the models's max seq len "
        "(131072), (16.00 GiB KV cache is needed"
    )
    est = int(re.search(r"estimated maximum model length is (\d+)", p["error"]).group(1))
    # the estimate is the largest length whose blocks fit: a multiple of block_size
    assert est % 16 == 0 and (est // 16) * 65536 * 32 <= p["available_kv_bytes"] < (est // 16 + 1) * 65536 * 32
    # and at that length it starts
    ok = sp.vllm_plan("llama-3.1-8b", "rtx4090", max_model_len=est)
    assert ok["fits"] and ok["max_concurrency"] >= 1.0
    assert p["log_lines"][-1] == p["error"]


def test_weights_larger_than_budget_and_startup_free_check():
    p = sp.vllm_plan("qwen2.5-32b", "rtx4090", max_model_len=4096)
    assert not p["fits"] and "OutOfMemoryError" in p["error"]
    q = sp.vllm_plan("qwen2.5-32b", "rtx4090", "awq", max_model_len=4096)
    assert q["weights_bytes"] < p["weights_bytes"] / 3
    d = sp.vllm_plan("llama-3.1-8b", "rtx4090", max_model_len=8192, other_processes_gib=2.0)
    assert not d["fits"] and "Free memory on device" in d["error"]
    d2 = sp.vllm_plan(
        "llama-3.1-8b", "rtx4090", max_model_len=8192, other_processes_gib=2.0, gpu_memory_utilization=0.85
    )
    assert d2["fits"]


def test_quantized_weight_bytes_by_hand():
    w = sp.hf_weight_bytes("llama-3.1-8b", "awq")
    m = pm.MODELS["llama-3.1-8b"]
    lin = sum(t.n_elements for t in m.tensors() if t.layer >= 0 and len(t.ne) == 2)
    groups = sum(
        t.n_elements // t.ne[0] * math.ceil(t.ne[0] / 128) for t in m.tensors() if t.layer >= 0 and len(t.ne) == 2
    )
    assert w["linear"] == 0.5 * lin + 2.5 * groups
    # embedding + lm_head + norms stay 16-bit
    assert w["other"] == 2 * (8030261248 - lin)
    f = sp.hf_weight_bytes("llama-3.1-8b", "fp8")
    assert f["linear"] == lin + 4 * sum(t.n_elements // t.ne[0] for t in m.tensors() if t.layer >= 0 and len(t.ne) == 2)


def test_sglang_default_fraction_and_pool_by_hand():
    s = sp.sglang_plan("llama-3.1-8b", "rtx4090", context_length=8192)
    # 24 GiB = 24576 MiB: chunked_prefill_size 2048, cuda_graph_max_bs 24;
    # reserved = 512 + 1.5*2048 + 2*24 + 1/8*1024 = 3760 MiB
    assert s["reserved_mib_heuristic"] == 3760
    assert s["mem_fraction_static"] == round((24576 - 3760) / 24576, 3) == 0.847
    cell = 8 * 128 * 32 * 2 * 2
    assert s["cell_size_bytes"] == cell == 131072
    free = 24 * GiB - sp.CUDA_CONTEXT_BYTES
    tokens = int((free * 0.847 - 2 * 8030261248) // cell)
    assert s["max_total_num_tokens"] == tokens
    assert s["max_running_requests"] == min(min(max(int(tokens / 8192 * 512), 2048), 4096), tokens // 2)
    assert s["log_lines"][0].startswith(f"KV Cache is allocated. #tokens: {tokens}, K size: ")
    assert s["command"] == (
        "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --context-length 8192"
    )
    # 16 GB bucket: cuda_graph_max_bs 8 -> reserved 3728
    assert sp.sglang_mem_fraction_static(16 * GiB)["reserved_mib"] == 3728


def test_sglang_fraction_moves_the_pool_and_caps_requests():
    lo = sp.sglang_plan("llama-3.1-8b", "rtx4090", mem_fraction_static=0.75, context_length=131072)
    hi = sp.sglang_plan("llama-3.1-8b", "rtx4090", mem_fraction_static=0.9, context_length=131072)
    assert hi["max_total_num_tokens"] > lo["max_total_num_tokens"]
    d = (hi["static_bytes"] - lo["static_bytes"]) / hi["cell_size_bytes"]
    assert abs((hi["max_total_num_tokens"] - lo["max_total_num_tokens"]) - d) <= 1
    assert hi["request_capped"] and hi["max_req_len"] == hi["max_total_num_tokens"] - 1
    assert "--mem-fraction-static 0.9" in hi["command"]
    none = sp.sglang_plan("llama-3.1-8b", "rtx3060", "awq", mem_fraction_static=0.4, context_length=4096)
    assert not none["fits"] and "Not enough memory" in none["error"]


def test_bad_inputs_raise_clear_valueerrors():
    with pytest.raises(ValueError, match="block_size"):
        sp.vllm_plan("llama-3.1-8b", "rtx4090", block_size=12)
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        sp.vllm_plan("llama-3.1-8b", "rtx4090", gpu_memory_utilization=1.5)
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        sp.vllm_plan("llama-3.1-8b", "rtx4090", kv_cache_dtype="q8_0")
    with pytest.raises(ValueError, match="machine"):
        sp.vllm_plan("llama-3.1-8b", "m4max")
    with pytest.raises(ValueError, match="weight_dtype"):
        sp.hf_weight_bytes("llama-3.1-8b", "Q4_K_M")


@pytest.mark.parametrize("model", list(pm.MODELS))
@pytest.mark.parametrize("machine", list(sp.serving_machines()))
def test_invariants_every_model_and_gpu(model, machine):
    p = sp.vllm_plan(model, machine, max_model_len=4096)
    assert p["num_gpu_blocks"] >= 0 and p["kv_cache_bytes"] <= max(p["available_kv_bytes"], 0)
    if p["fits"]:
        assert p["max_concurrency"] >= 1.0
        assert (
            p["kv_cache_bytes"]
            + p["weights_bytes"]
            + p["peak_activation_bytes"]
            + p["non_torch_bytes"]
            + p["cudagraph_bytes"]
            <= p["requested_bytes"] + 1
        )
    s = sp.sglang_plan(model, machine, context_length=4096)
    if s["fits"]:
        assert s["weights_bytes"] + s["kv_cache_bytes"] <= s["static_bytes"]
        assert 1 <= s["max_running_requests"] <= s["max_total_num_tokens"] // 2


# =============================================================================================================
# The serving-plan figure (enginelab/figures/serving_plan.py): readouts from the course module, rendering, goldens
# =============================================================================================================

from goldens import golden as _golden  # noqa: E402  tests/golden/<name>.svg, byte for byte

from enginelab import page  # noqa: E402
from enginelab.figures import REGISTRY  # noqa: E402
from enginelab.figures import serving_plan as fsp  # noqa: E402


def golden(name: str, text: str):
    _golden(name, text, newline=True)


def test_figure_registered_with_the_contract():
    mod = fsp
    assert REGISTRY[mod.ID] is mod
    for name in ("ID", "TITLE", "SPEC", "default_state", "compute", "describe", "render"):
        assert hasattr(mod, name)
    s = mod.default_state()
    assert page.prerender(mod)["figure"] == mod.render(mod.compute(s)) == mod.render(mod.compute(s))


# -- serving plan --------------------------------------------------------------------------------------------
def test_serving_plan_readouts_are_the_planners_numbers():
    d = fsp.compute(fsp.default_state())
    p = sp.vllm_plan("llama-3.1-8b", "rtx4090", "bf16", 0.92, 8192, 16, "auto", False, 256, 2048, 0.0)
    assert d.readouts == fsp.VllmReadouts(
        gpu_kv_cache_tokens=p["gpu_kv_cache_tokens"],
        max_concurrency=p["max_concurrency"],
        num_gpu_blocks=p["num_gpu_blocks"],
        available_kv_gib=p["available_kv_bytes"] / sp.GiB,
        fits=True,
    )
    assert d.plan == fsp.VllmPlan.of(p) and d.plan.log_lines == tuple(p["log_lines"])  # the planner's own plan
    html = fsp.render(d)
    for k in fsp.VLLM_READOUTS:
        assert f'data-readout="{k}"' in html
    assert sp.vllm_kv_log_line(p) in html and sp.vllm_concurrency_log_line(p) in html
    assert p["command"] in html and 'data-copy-target="#serving-command"' in html
    s, msgs = fsp.SPEC.from_query("?engine=sglang&mfs=0.80")
    assert msgs == []
    d = fsp.compute(s)
    q = sp.sglang_plan("llama-3.1-8b", "rtx4090", "bf16", 0.8, 8192)
    assert d.readouts.max_total_num_tokens == q["max_total_num_tokens"]
    assert d.readouts.max_running_requests == q["max_running_requests"]
    assert "--mem-fraction-static 0.8" in fsp.render(d)


def test_serving_plan_segments_sum_to_the_gpu():
    for q in ("", "?engine=sglang", "?kv=fp8&graphs=0", "?weights=awq&model=qwen2.5-14b"):
        s, msgs = fsp.SPEC.from_query(q)
        assert msgs == []
        d = fsp.compute(s)
        total = sum(b for _, _, b, _ in fsp.segments(d))
        assert total == pytest.approx(d.plan.total_bytes, rel=1e-9), q


def test_serving_plan_errors_are_shown_not_raised():
    d = fsp.compute(fsp.SPEC.from_query("?ctx=131072")[0])
    html = fsp.render(d)
    assert d.readouts.fits is False and "Would not start" in html and "max seq len (131072)" in html
    assert 'data-readout="gpu_kv_cache_tokens" data-value=""' in html
    s, msgs = fsp.SPEC.from_query("?util=abc&block_size=7&engine=tensorrt")
    assert len(msgs) == 3 and s.util == 0.92 and s.block_size == "16" and s.engine == "vllm"


@pytest.mark.parametrize(
    "name, q", [("serving-plan", ""), ("serving-plan-sglang", "?engine=sglang"), ("serving-plan-error", "?ctx=131072")]
)
def test_serving_plan_golden(name, q):
    golden(name, fsp._bar(fsp.compute(fsp.SPEC.from_query(q)[0])))


def test_failed_start_draws_no_kv_pool():
    d = fsp.compute(fsp.SPEC.from_query("?ctx=131072")[0])
    seg = {k: b for k, _, b, _ in fsp.segments(d)}
    assert seg["kv"] == 0 and seg["unused"] == pytest.approx(d.plan.available_kv_bytes)
    assert 'data-segment="kv"' not in fsp._bar(d)


def test_weights_too_big_advice_depends_on_what_they_already_are():
    awq = sp.vllm_plan("llama-3.1-70b", "rtx4090", "awq")
    assert not awq["fits"] and "already 4-bit" in awq["error"] and "quantized checkpoint" not in awq["error"]
    fp8 = sp.vllm_plan("llama-3.1-70b", "rtx4090", "fp8")
    assert "4-bit checkpoint (AWQ, GPTQ)" in fp8["error"]
    bf16 = sp.vllm_plan("llama-3.1-70b", "rtx4090", "bf16")
    assert "Use a quantized checkpoint" in bf16["error"]
    sg = sp.sglang_plan("llama-3.1-70b", "rtx4090", "gptq")
    assert not sg["fits"] and "already 4-bit" in sg["error"]


def test_no_available_kv_memory_is_shown_when_the_weights_never_loaded():
    p = sp.vllm_plan("llama-3.1-70b", "rtx4090", "bf16")
    assert not p["profiled"] and p["available_kv_bytes"] < 0
    assert not any("Available KV cache memory" in line for line in p["log_lines"])
    d = fsp.compute(fsp.SPEC.from_query("?model=llama-3.1-70b")[0])
    assert d.readouts.available_kv_gib is None
    assert 'data-readout="available_kv_gib" data-value=""' in fsp.render(d) and "−" not in fsp.render(d)
    # after the weights loaded, vLLM logs its budget, negative or not
    tight = sp.vllm_plan("llama-3.1-8b", "rtx4090", "bf16", gpu_memory_utilization=0.66)
    assert tight["profiled"] and any("Available KV cache memory" in line for line in tight["log_lines"])


def test_sglang_says_when_a_full_length_request_does_not_fit_its_pool():
    d = fsp.compute(fsp.SPEC.from_query("?engine=sglang&model=llama-3.1-8b&ctx=131072")[0])
    assert d.plan.fits and d.plan.request_capped
    assert d.readouts.fits is True and d.readouts.capped_at == d.plan.max_req_len
    html = fsp.render(d)
    assert 'data-request-capped="true"' in html and ">capped</output>" in html
    assert f"every request at {d.plan.max_req_len:,} tokens" in html
    ok = fsp.compute(fsp.SPEC.from_query("?engine=sglang")[0])
    assert ok.readouts.capped_at is None and ">yes</output>" in fsp.render(ok)


def test_the_caption_is_html_that_wraps():
    for q in ("", "?ctx=131072", "?engine=sglang"):
        d = fsp.compute(fsp.SPEC.from_query(q)[0])
        html = fsp.render(d)
        assert '<figcaption class="sp-caption">' in html and "<text" not in str(fsp._bar(d)).split("legend")[-1]


def test_vllm_batch_defaults_follow_the_gpu_like_vllm_0_11():
    # vllm/engine/arg_utils.py (v0.11.0, EngineArgs._set_default_args): >= 70 GiB and "a100" not in the device
    # name -> {LLM_CLASS: 16384, OPENAI_API_SERVER: 8192} tokens and 1024 seqs; otherwise {8192, 2048} and 256
    from enginelab.serving import validate

    a100, h100 = validate._machine("A100 SXM4 80GB"), validate._machine("H100 SXM5 80GB")
    assert sp.gpu_total_bytes(a100) >= 70 * GiB and sp.gpu_total_bytes(h100) >= 70 * GiB
    got = {(mc.gpu.name, u): sp.vllm_gpu_defaults(mc, u) for mc in (a100, h100) for u in sp.VLLM_USAGE_CONTEXTS}
    want = {
        ("A100 SXM4 80GB", "openai_api_server"): (2048, 256),
        ("A100 SXM4 80GB", "llm_class"): (8192, 256),
        ("H100 SXM5 80GB", "openai_api_server"): (8192, 1024),
        ("H100 SXM5 80GB", "llm_class"): (16384, 1024),
    }
    assert {k: (v["max_num_batched_tokens"], v["max_num_seqs"]) for k, v in got.items()} == want
    assert not got[("A100 SXM4 80GB", "openai_api_server")]["large_gpu"]
    # a 24 GiB card is under 70 GiB whatever its name
    small = sp.vllm_gpu_defaults("rtx4090")
    assert (small["max_num_batched_tokens"], small["max_num_seqs"]) == (2048, 256) and not small["large_gpu"]
    # a given max_num_batched_tokens is kept, and max_num_seqs = min(default, max_num_batched_tokens)
    capped = sp.vllm_gpu_defaults(h100, max_num_batched_tokens=512)
    assert (capped["max_num_batched_tokens"], capped["max_num_seqs"]) == (512, 512)
    with pytest.raises(ValueError, match="^usage_context"):
        sp.vllm_gpu_defaults(h100, "batch")


def test_the_figure_plans_the_serving_runs_datacenter_gpus():
    # the serving plan offers the A100 and H100 of the published runs, planned on the machines the validation
    # simulates them on, and carries them to "How many users?"
    from enginelab import links
    from enginelab.figures import serving_plan as spfig
    from enginelab.serving import validate

    options = dict(spfig.SPEC.by_key["machine"].options_for({}))
    assert options["h100"] == "H100 SXM5 80GB" and options["a100"] == "A100 SXM4 80GB"
    s, msgs = spfig.SPEC.from_query("?machine=h100&model=qwen3-8b")
    assert not msgs
    d = spfig.compute(s)
    h100 = validate._machine("H100 SXM5 80GB")
    # vLLM's own batch defaults on an 80 GB GPU that is not an A100: 1,024 sequences, 8,192 tokens a step
    assert (s.max_num_seqs, s.max_num_batched_tokens) == (1024, 8192)
    assert spfig.SPEC.from_query("?machine=a100")[0].max_num_seqs == 256  # the A100 exception
    want = sp.vllm_plan("qwen3-8b", h100, "bf16", max_num_seqs=1024, max_num_batched_tokens=8192)
    assert d.error is None and d.readouts.num_gpu_blocks == want["num_gpu_blocks"] > 0
    # 80 GB against the RTX 4090's 24: the same model leaves several times the KV blocks
    d4 = spfig.compute(spfig.SPEC.from_query("?machine=rtx4090&model=qwen3-8b")[0])
    assert d.readouts.num_gpu_blocks > 4 * d4.readouts.num_gpu_blocks
    assert "machine=h100" in links.users_query(s)
    # the command line leaves out what is vLLM's default on that GPU, and says what is not
    assert "--max-num-seqs" not in want["command"]
    assert "--max-num-seqs 256" in sp.vllm_plan("qwen3-8b", h100, "bf16", max_num_seqs=256)["command"]
