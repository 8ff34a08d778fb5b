"""The [validation] figure in a real Chromium, offline: the median errors from the dataset, and pasting
llama-bench output (markdown and JSON) to see a measurement beside our estimate; bad input shows a message."""

from __future__ import annotations

import json

import pytest

from enginelab import validation as v

from .harness import readouts

PAGE = "figures/validation.html"

MD = """| model                          |       size |     params | backend    | ngl | test       |              t/s |
| ------------------------------ | ---------: | ---------: | ---------- | --: | ---------- | ---------------: |
| llama 7B Q4_0                  |   3.56 GiB |     6.74 B | CUDA       |  99 | pp 512     | 7979.85 ± 114.18 |
| llama 7B Q4_0                  |   3.56 GiB |     6.74 B | CUDA       |  99 | tg 128     |    150.00 ± 0.10 |
"""


def paste(page, text):
    box = page.locator("#f-bench")
    box.fill(text)  # fires input: the glue re-renders


def test_medians_then_paste_markdown_json_and_bad_input(page_at):
    page = page_at(PAGE)
    s = v.summary(profile="measured")  # the page's default
    r = readouts(page)
    assert float(r["decode_mape"]) == pytest.approx(s["decode_mape"], rel=1e-12)
    assert float(r["prefill_mape"]) == pytest.approx(s["prefill_mape"], rel=1e-12)
    assert r["paste_rows"] == ""
    assert page.locator("#figure svg.validation-chart[role=img]").count() == 4
    assert page.locator("#validation-scatter-tg circle.pt[data-metric]").count() == s["n_tg"]

    # markdown (old "pp 512" style): each row beside our estimate for the chosen model and machine
    paste(page, MD)
    page.wait_for_selector("tr[data-paste-row='1']", timeout=30_000)
    res = v.compare(MD, "llama-2-7b", "Q4_0", "rtx4090", profile="measured")
    rows = page.locator("tr[data-paste-row]")
    assert rows.count() == 2
    for i, want in enumerate(res["rows"]):
        tr = rows.nth(i)
        assert tr.get_attribute("data-test") == want["test"]
        assert float(tr.get_attribute("data-measured")) == want["tps"]
        assert float(tr.get_attribute("data-estimate")) == pytest.approx(want["estimate_tps"], rel=1e-12)
    assert readouts(page)["paste_rows"] == "2"
    # another machine changes the estimate
    page.select_option("#f-machine", "rtx3090")
    res2 = v.compare(MD, "llama-2-7b", "Q4_0", "rtx3090", profile="measured")
    # the browser's libm (pow in the measured profile's soft minimums) may differ from CPython's in the last bit
    page.wait_for_function(
        """(v) => {
            const e = Number(document.querySelector("tr[data-paste-row='1']")?.dataset.estimate);
            return Math.abs(e - v) <= 1e-12 * Math.abs(v);
        }""",
        arg=res2["rows"][1]["estimate_tps"],
        timeout=30_000,
    )

    # JSON (llama-bench -o json)
    data = [
        {
            "model_type": "llama 7B Q8_0",
            "model_size": 7161089536,
            "model_n_params": 6738415616,
            "backends": "CUDA",
            "n_gpu_layers": 99,
            "n_prompt": 0,
            "n_gen": 128,
            "avg_ts": 98.13,
            "stddev_ts": 0.07,
        }
    ]
    paste(page, json.dumps(data, indent=1))
    page.wait_for_function(
        "() => document.querySelector(\"tr[data-paste-row='0']\")?.dataset.test === 'tg128'", timeout=30_000
    )
    want = v.compare(json.dumps(data), "llama-2-7b", "Q4_0", "rtx3090", profile="measured")["rows"][0]
    tr = page.locator("tr[data-paste-row='0']")
    assert float(tr.get_attribute("data-measured")) == 98.13
    assert float(tr.get_attribute("data-estimate")) == pytest.approx(want["estimate_tps"], rel=1e-12)

    # bad input: a message naming the problem; the rest of the page stays
    for text, words in (
        ("this is not a table", "no markdown table"),
        ("| model | test | t/s |\n| --- | --- | --- |\n| llama 7B Q4_0 | pp512 | fast |", "t/s"),
        ('[{"model_type": "llama 7B Q4_0"}]', "lacks n_prompt"),
    ):
        paste(page, text)
        page.wait_for_function(
            "(w) => document.querySelector('[data-paste-error]')?.textContent.includes(w)", arg=words, timeout=30_000
        )
        assert readouts(page)["paste_rows"] == ""
        assert float(readouts(page)["decode_mape"]) > 0
