"""The calculator's llama.cpp build in a real Chromium, offline: the URL key, the control with its examples, a bad
value explained and replaced, and the numbers perf_model gives in CPython for that build."""

from __future__ import annotations

import pytest

import perf_model as pm

from .harness import readouts, url_query, wait_ready

PAGE = "figures/calculator.html"
MOE = "?model=qwen3-30b-a3b&machine=rtx4090"


def decode_for(build) -> float:
    """perf_model's decode for the page's default settings on Qwen3-30B-A3B / RTX 4090 (measured profile)."""
    p = pm.place(pm.MODELS["qwen3-30b-a3b"], pm.MACHINES["rtx4090"], "Q4_K_M", n_ctx=8192, profile="measured")
    return pm.decode_step_time(p, context=2000, build=build)["tok_per_s"]


def test_a_build_from_the_url_is_in_the_control_the_numbers_and_the_explanation(page_at):
    page = page_at(PAGE + MOE + "&build=Ollama%200.11.4")
    assert page.input_value("#f-build") == "Ollama 0.11.4"
    assert page.locator("#f-build-list option").count() >= 3  # examples offered as the reader types
    assert float(readouts(page)["decode_tok_s"]) == pytest.approx(decode_for("Ollama 0.11.4"), rel=1e-9)
    assert decode_for("Ollama 0.11.4") < decode_for(None)  # its llama.cpp lacks the fused expert adds
    assert page.locator(".sub-build").first.text_content() == "Ollama 0.11.4"
    page.locator('[data-explain="decode_tok_s"] summary').first.click()
    link = page.locator('[data-explain="decode_tok_s"] a[href$="/pull/15631"]')
    assert link.count() == 1 and link.text_content() == "PR #15631"


def test_a_typed_build_updates_the_url_and_a_bad_one_is_explained(page_at):
    page = page_at(PAGE + MOE)
    page.fill("#f-build", "2025-08-28")
    page.wait_for_function("() => new URLSearchParams(location.search).get('build') === '2025-08-28'")
    wait_ready(page)
    page.wait_for_function(
        f"() => Math.abs(Number(document.querySelector('[data-readout=decode_tok_s]').dataset.value) - "
        f"{decode_for('2025-08-28')}) < 1e-6"
    )
    page.fill("#f-build", "<b>b12x</b>")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#messages li')].some(li => li.textContent.startsWith('llama.cpp build:'))"
    )
    assert page.locator("#messages b, #figure b").count() == 0  # shown as text, never as markup
    assert "build" not in url_query(page)
    assert float(readouts(page)["decode_tok_s"]) == pytest.approx(decode_for(None), rel=1e-9)
