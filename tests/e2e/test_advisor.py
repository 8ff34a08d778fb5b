"""The [advisor] page in a real Chromium, offline: apply a suggestion, see the numbers and the URL change, undo.

Expected numbers come from perf_model and advisor run here in CPython, never from the page."""

from __future__ import annotations

import json

import pytest

import perf_model as pm
from enginelab import advisor as A

from .harness import readouts, same_readouts, url_query

PAGE = "figures/advisor.html"


def query(page) -> dict:
    return url_query(page)


def calc_expected(
    model="qwen2.5-32b", machine="rtx4060ti", quant="Q4_K_M", kv="f16", ctx=8192, ngl="auto", tokens=2000
) -> dict:
    mc = pm.MACHINES[machine]
    p = pm.place(
        pm.MODELS[model],
        mc,
        quant,
        n_ctx=ctx,
        kv_type=kv,
        n_gpu_layers=None if ngl == "auto" else ngl,
        profile="measured",  # the page's default
    )
    d = pm.decode_step_time(p, mc, context=tokens)
    return {"n_gpu_layers": p.n_gpu_layers, "decode_tok_s": d["tok_per_s"], "vram_gb": p.gpu_total / pm.GB}


def assert_numbers(page, **state):
    got = readouts(page)
    want = calc_expected(**state)
    assert int(got["n_gpu_layers"]) == want["n_gpu_layers"], (got, state)
    for k in ("decode_tok_s", "vram_gb"):
        assert float(got[k]) == pytest.approx(want[k], rel=1e-9), (k, got[k], want[k])
    return got


def apply_button(page, change: dict):
    return page.locator(f"button[data-set-state='{json.dumps(change, sort_keys=True, separators=(',', ':'))}']").first


def test_apply_undo_then_recipe_lora_and_draft(page_at):
    page = page_at(PAGE)
    before = assert_numbers(page)
    assert query(page) == {}
    findings = A.advise_state({"model": "qwen2.5-32b", "machine": "rtx4060ti", "ctx": 8192, "profile": "measured"})
    q8 = next(c for f in findings for c in f.changes if c.apply == {"kv": "q8_0"})
    assert page.locator("[data-undo]").is_disabled()
    bar_before = page.locator("#calculator-chart .pool-vram .seg-kv").get_attribute("data-bytes")

    # 1. a click applies -ctk q8_0 -ctv q8_0: URL, control, readouts and bars all follow
    apply_button(page, {"kv": "q8_0"}).click()
    page.wait_for_function("location.search.includes('kv=q8_0')")
    assert query(page) == {"kv": "q8_0"}
    after = assert_numbers(page, kv="q8_0")
    assert int(after["n_gpu_layers"]) == q8.after["n_gpu_layers"] > int(before["n_gpu_layers"])
    assert float(after["decode_tok_s"]) == pytest.approx(q8.after["decode_tok_s"], rel=1e-9)
    assert page.input_value("#f-kv") == "q8_0"
    assert page.locator("#calculator-chart .pool-vram .seg-kv").get_attribute("data-bytes") != bar_before
    assert page.locator("[data-undo]").is_enabled()

    # 2. the keyboard applies the next suggestion on the new state (a shorter context); focus lands on Undo
    ctx_btn = page.locator("button[data-set-state*='\"ctx\"']").first
    ctx_change = json.loads(ctx_btn.get_attribute("data-set-state"))
    ctx_btn.focus()
    page.keyboard.press("Enter")
    page.wait_for_function(f"location.search.includes('ctx={ctx_change['ctx']}')")
    assert_numbers(page, kv="q8_0", ctx=ctx_change["ctx"])
    assert page.evaluate("document.activeElement.hasAttribute('data-undo')")

    # 3. undo twice (keyboard, then mouse) walks back in order to the first state
    page.keyboard.press("Enter")
    page.wait_for_function("!location.search.includes('ctx=')")
    assert query(page) == {"kv": "q8_0"}
    assert same_readouts(readouts(page), after)
    page.locator("[data-undo]").click()
    page.wait_for_function("location.search === ''")
    assert same_readouts(readouts(page), before)
    assert page.input_value("#f-kv") == "f16"
    assert page.locator("[data-undo]").is_disabled()

    # 4. the same page (one Pyodide load keeps this file fast): a healthy setup with the extras switched on
    page.select_option("#f-model", "llama-3.1-8b")
    page.wait_for_function("location.search.includes('model=llama-3.1-8b')")
    for key, value in (("goal", "one_user_fits"), ("draft", "llama-3.2-1b")):
        page.select_option(f"#f-{key}", value)
        page.wait_for_function(f"location.search.includes('{key}={value}')")
    page.fill("#f-lora_rank", "16")
    page.wait_for_function("location.search.includes('lora_rank=16')")
    assert query(page) == {"model": "llama-3.1-8b", "goal": "one_user_fits", "lora_rank": "16", "draft": "llama-3.2-1b"}
    extras_and_recipe(page)


def extras_and_recipe(page):
    """Nothing to fix on 8B/4060 Ti; the LoRA and draft panels hold CPython's numbers; the recipe applies."""
    r = readouts(page)
    assert r["advice_count"] == "0" and page.locator(".no-findings").count() == 1  # nothing to fix
    assert page.locator(".advisor-lora").get_attribute("data-lora-bytes") == str(27_262_976)
    p = pm.place("llama-3.1-8b", "rtx4060ti", "Q4_K_M", n_ctx=8192, profile="measured")
    sp = A.speculative(p, "llama-3.2-1b", 0.7, 3, context=2000)
    assert float(page.locator(".advisor-spec").get_attribute("data-spec-tok-s")) == pytest.approx(sp["tok_s"])
    page.fill("#f-acceptance", "0")  # acceptance 0: drafting only costs
    page.wait_for_function("location.search.includes('acceptance=0')")
    sp0 = A.speculative(p, "llama-3.2-1b", 0.0, 3, context=2000)
    assert float(page.locator(".advisor-spec").get_attribute("data-spec-tok-s")) == pytest.approx(sp0["tok_s"])
    assert page.locator(".advisor-spec").get_attribute("data-pays") == "false"
    # the goal's recipe: one click fills the calculator with the recommended configuration
    assert page.locator(".advisor-recipe").get_attribute("data-goal") == "one_user_fits"
    page.locator(".advisor-recipe button[data-set-state]").click()
    page.wait_for_function("location.search.includes('ctx=4096')")
    q = query(page)
    assert q["ctx"] == "4096" and q["ngl"] == "33" and q["goal"] == "one_user_fits"
    assert_numbers(page, model="llama-3.1-8b", machine="rtx4060ti", ctx=4096, ngl=33)
    assert page.locator(".advisor-recipe [data-recipe-applied]").count() == 1
    page.locator("[data-undo]").click()
    page.wait_for_function("!location.search.includes('ctx=')")
    assert "ngl" not in query(page)
