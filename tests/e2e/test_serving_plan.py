"""The [serving-plan] figure in a real Chromium, offline. Expected numbers come from serving_plan run here in
CPython, so a test fails if the browser computes anything different from the course module."""

from __future__ import annotations

import pytest

from enginelab import serving_plan as sp

from .harness import readouts, url_query

PAGE = "figures/serving-plan.html"


def query(page) -> dict:
    return url_query(page)


def wait_value(page, name, value):
    page.wait_for_function(
        "([n, v]) => document.querySelector(`[data-readout='${n}']`)?.dataset.value === v",
        arg=[name, value],
        timeout=30_000,
    )


def test_default_vllm_plan_matches_cpython(page_at):
    page = page_at(PAGE)
    p = sp.vllm_plan("llama-3.1-8b", "rtx4090", max_model_len=8192)
    r = readouts(page)
    assert int(r["gpu_kv_cache_tokens"]) == p["gpu_kv_cache_tokens"]
    assert int(r["num_gpu_blocks"]) == p["num_gpu_blocks"]
    assert float(r["max_concurrency"]) == pytest.approx(p["max_concurrency"], rel=1e-12)
    assert r["fits"] == "true"
    log = page.locator("[data-log]").inner_text()
    assert sp.vllm_kv_log_line(p) in log and sp.vllm_concurrency_log_line(p) in log
    assert page.locator("#serving-command").inner_text() == p["command"]
    svg = page.locator("#figure svg#serving-plan-chart")
    assert svg.get_attribute("role") == "img" and page.locator("#serving-plan-chart > desc").count() == 1
    assert page.locator("#figure details.data-table table").count() == 1
    assert query(page) == {}

    # every change goes through the same path: new plan, new readouts, new URL
    page.select_option("#f-kv", "fp8")
    p = sp.vllm_plan("llama-3.1-8b", "rtx4090", max_model_len=8192, kv_cache_dtype="fp8")
    wait_value(page, "gpu_kv_cache_tokens", str(p["gpu_kv_cache_tokens"]))
    assert query(page) == {"kv": "fp8"}
    assert "--kv-cache-dtype fp8" in page.locator("#serving-command").inner_text()
    page.locator("#f-graphs").uncheck()
    p = sp.vllm_plan("llama-3.1-8b", "rtx4090", max_model_len=8192, kv_cache_dtype="fp8", enforce_eager=True)
    wait_value(page, "gpu_kv_cache_tokens", str(p["gpu_kv_cache_tokens"]))
    assert page.locator("#serving-command").inner_text().endswith("--enforce-eager")
    # SGLang: its own fields appear, vLLM's hide
    page.select_option("#f-engine", "sglang")
    q = sp.sglang_plan(
        "llama-3.1-8b", "rtx4090", context_length=8192, kv_cache_dtype="fp8_e4m3", disable_cuda_graph=True
    )
    wait_value(page, "max_total_num_tokens", str(q["max_total_num_tokens"]))
    assert readouts(page)["max_running_requests"] == str(q["max_running_requests"])
    assert page.locator('[data-field="mfs"]').is_visible() and page.locator('[data-field="util"]').is_hidden()
    assert page.locator("#serving-command").inner_text() == q["command"]
    # back to vLLM with the model's own 131072-token context: vLLM's start-up error, no KV numbers
    page.select_option("#f-engine", "vllm")
    page.locator("#f-graphs").check()
    page.select_option("#f-kv", "auto")
    page.fill("#f-ctx", "131072")
    alert = page.locator("[data-startup-error]")
    alert.wait_for(timeout=30_000)
    assert "max seq len (131072)" in alert.inner_text() and "estimated maximum model length" in alert.inner_text()
    wait_value(page, "fits", "false")
    assert readouts(page)["gpu_kv_cache_tokens"] == ""
    assert query(page) == {"ctx": "131072"}


def test_shared_url_reproduces_the_state_and_bad_values_explain_themselves(page_at):
    q = sp.sglang_plan("qwen2.5-7b", "rtx3090", "awq", mem_fraction_static=0.8, context_length=16384)
    page = page_at(
        PAGE + "?engine=sglang&model=qwen2.5-7b&machine=rtx3090&weights=awq&mfs=0.80&ctx=16384&block_size=12&util=lots"
    )
    r = readouts(page)
    assert r["max_total_num_tokens"] == str(q["max_total_num_tokens"])
    assert r["max_running_requests"] == str(q["max_running_requests"]) and r["mem_fraction_static"] == "0.8"
    msgs = page.locator("#messages").inner_text()
    assert "--gpu-memory-utilization" in msgs and "--block-size" in msgs
    assert page.locator("#serving-command").inner_text() == q["command"]
