"""validation: the dataset, the predictions, the error summary and the llama-bench parser."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pytest

import perf_model as pm
from enginelab import validation as v

ROOT = Path(__file__).resolve().parents[1]

MD = """\
ggml_metal_init: found device: Apple M2 Max
| model                          |       size |     params | backend    | ngl | test       |              t/s |
| ------------------------------ | ---------: | ---------: | ---------- | --: | ---------- | ---------------: |
| llama 7B Q4_0                  |   3.56 GiB |     6.74 B | Metal      |  99 | pp 512     |    540.15 ± 0.18 |
| llama 7B Q4_0                  |   3.56 GiB |     6.74 B | Metal      |  99 | tg 128     |     60.99 ± 0.05 |

build: 8e672ef (1550)
"""

MD_NEW = """\
| model                          |       size |     params | backend    | ngl | fa |            test |                  t/s |
| ------------------------------ | ---------: | ---------: | ---------- | --: | -: | --------------: | -------------------: |
| llama 8B Q4_K - Medium         |   4.58 GiB |     8.03 B | CUDA       |  99 |  1 |           pp512 |      1,493.64 ± 0.53 |
| llama 8B Q4_K - Medium         |   4.58 GiB |     8.03 B | CUDA       |  99 |  1 |           tg128 |        98.10 ± 0.02 |
| llama 8B Q4_K - Medium         |   4.58 GiB |     8.03 B | CUDA       |  99 |  1 |     pp512+tg128 |       500.00 ± 1.00 |
"""

JSON = json.dumps(
    [
        {
            "build_commit": "8e672ef",
            "build_number": 1550,
            "model_filename": "llama-2-7b.Q8_0.gguf",
            "model_type": "llama 7B Q8_0",
            "model_size": 7161089536,
            "model_n_params": 6738415616,
            "backends": "CUDA",
            "n_gpu_layers": 99,
            "n_prompt": 512,
            "n_gen": 0,
            "avg_ts": 7664.0,
            "stddev_ts": 108.8,
        },
        {
            "build_commit": "8e672ef",
            "build_number": 1550,
            "model_filename": "llama-2-7b.Q8_0.gguf",
            "model_type": "llama 7B Q8_0",
            "model_size": 7161089536,
            "model_n_params": 6738415616,
            "backends": "CUDA",
            "n_gpu_layers": 99,
            "n_prompt": 0,
            "n_gen": 128,
            "avg_ts": 98.13,
            "stddev_ts": 0.07,
        },
    ]
)


# -- dataset -------------------------------------------------------------------------------------------------
def test_every_row_has_a_source_and_numbers():
    rows = list(csv.DictReader(open(ROOT / "data" / "llama_bench.csv", newline="")))
    assert len(rows) >= 80
    for r in rows:
        assert r["source"].startswith("https://github.com/") and len(r["source"]) > 30, r
        assert r["model"] in v.DATASET_MODEL and r["quant"] and r["device"] and r["build"]
        assert float(r["pp_tps"]) > 0 and r["pp_test"] == "pp512" and r["tg_test"] in ("tg128", "tg512")
        assert r["tg_tps"] == "" or float(r["tg_tps"]) > 0
        assert float(r["mem_bandwidth_GBps"]) > 0
    # at least the Apple table of discussion #4167 and something beyond it
    sources = {r["source"] for r in rows}
    assert "https://github.com/ggml-org/llama.cpp/discussions/4167" in sources and len(sources) >= 2


def test_packaged_csv_is_the_data_file():
    # the wheel ships data/llama_bench.csv as enginelab/data/llama_bench.csv (package data, a symlink here)
    from importlib import resources

    packaged = resources.files("enginelab.data").joinpath("llama_bench.csv").read_text(encoding="utf-8")
    assert packaged == (ROOT / "data" / "llama_bench.csv").read_text(encoding="utf-8")
    assert len(v.dataset_rows()) == packaged.count("\n") - 1


def test_apple_rows_match_the_shared_transcription():
    # data/llama-bench-apple-silicon.csv: the project's shared transcription of discussion #4167
    shared = ROOT / "data" / "llama-bench-apple-silicon.csv"
    want = {(r["device"], r["quant"]): (r["pp_tps"], r["tg_tps"]) for r in csv.DictReader(open(shared))}
    got = {(r["device"], r["quant"]): (r["pp_tps"], r["tg_tps"]) for r in v.dataset_rows() if r["backend"] == "Metal"}
    assert got == want


# -- predictions and errors ----------------------------------------------------------------------------------
def test_llama2_7b_shape_and_sizes():
    m = v.MODELS["llama-2-7b"]
    assert m.total_params() == 6738415616  # llama-bench prints "6.74 B"
    assert f"{pm.file_bytes(m, 'Q4_0') / pm.GiB:.2f}" == "3.56"  # "3.56 GiB" in the tables
    assert f"{pm.file_bytes(m, 'Q8_0') / pm.GiB:.2f}" == "6.67"


def test_prediction_is_perf_model_decode_and_prefill():
    r = next(r for r in v.dataset_rows() if r["device"] == "Apple M2 Max (38-core GPU)" and r["quant"] == "Q4_0")
    p = v.predictions([r])[0]
    mc = v.machine_for(r["device"], 400)
    pl = pm.place(v.MODELS["llama-2-7b"], mc, "Q4_0", n_ctx=1024, n_gpu_layers=33)
    assert p["tg_predicted"] == pm.decode_step_time(pl, mc, context=64)["tok_per_s"]
    assert p["pp_predicted"] == pm.prefill_time(pl, mc, n_tokens=512)["tok_per_s"]
    assert p["tg_error"] == p["tg_predicted"] / 65.95 - 1
    # the decode estimate never beats the bandwidth bound: bytes per token / bandwidth
    d = pm.decode_step_time(pl, mc, context=64)
    assert p["tg_predicted"] * d["gpu_bytes"] <= 400e9


def test_median_errors_are_computed_from_the_data():
    preds = v.predictions()
    s = v.summary(preds)
    tg = sorted(abs(p["tg_predicted"] / p["tg_measured"] - 1) for p in preds if p["tg_measured"])
    pp = sorted(abs(p["pp_predicted"] / p["pp_measured"] - 1) for p in preds)
    assert s["decode_mape"] == statistics.median(tg)
    assert s["prefill_mape"] == statistics.median(pp)
    assert s["n_tg"] == len(tg) == len(v.dataset_rows()) - 1 and s["n_pp"] == len(v.dataset_rows())
    # a tg512 row is estimated at 256 tokens of context
    r = next(r for r in v.dataset_rows() if r["tg_test"] == "tg512")
    p = v.predictions([r])[0]
    mc = v.machine_for(r["device"], float(r["mem_bandwidth_GBps"]))
    pl = pm.place(v.MODELS["llama-3-8b"], mc, r["quant"], n_ctx=1024, n_gpu_layers=33)
    assert p["tg_predicted"] == pm.decode_step_time(pl, mc, context=256)["tok_per_s"]
    # per device: the breakdown covers every row once
    assert sum(d["n_pp"] for d in s["by_device"].values()) == len(preds)
    # changing one measurement changes the summary (nothing is hard-coded)
    rows = [dict(r) for r in v.dataset_rows()]
    for r in rows:
        r["tg_tps"] = str(float(r["tg_tps"]) * 2) if r["tg_tps"] else ""
    assert v.summary(v.predictions(rows))["decode_mape"] != s["decode_mape"]


# -- parser --------------------------------------------------------------------------------------------------
def test_parse_markdown_old_and_new_formats():
    rows = v.parse_llama_bench(MD)
    assert [(r["test"], r["kind"], r["n"], r["tps"], r["stddev"], r["quant"], r["ngl"]) for r in rows] == [
        ("pp512", "pp", 512, 540.15, 0.18, "Q4_0", 99),
        ("tg128", "tg", 128, 60.99, 0.05, "Q4_0", 99),
    ]
    assert rows[0]["params"] == 6.74e9 and rows[0]["backend"] == "Metal"
    new = v.parse_llama_bench(MD_NEW)
    assert [r["test"] for r in new] == ["pp512", "tg128", "pp512+tg128"]
    assert new[0]["tps"] == 1493.64 and new[0]["quant"] == "Q4_K_M" and new[2]["kind"] == "pg"


def test_parse_json_and_jsonl():
    rows = v.parse_llama_bench(JSON)
    assert [(r["test"], r["tps"], r["quant"], r["ngl"]) for r in rows] == [
        ("pp512", 7664.0, "Q8_0", 99),
        ("tg128", 98.13, "Q8_0", 99),
    ]
    jsonl = "\n".join(json.dumps(o) for o in json.loads(JSON))
    assert [r["tps"] for r in v.parse_llama_bench(jsonl)] == [7664.0, 98.13]


def test_compare_puts_our_estimate_next_to_the_measurement():
    res = v.compare(MD, "llama-2-7b", "Q4_0", v.machine_for("Apple M2 Max (38-core GPU)", 400))
    tg = res["rows"][1]
    assert tg["estimate_tps"] == v.estimate(
        v.MODELS["llama-2-7b"], v.machine_for("Apple M2 Max (38-core GPU)", 400), "Q4_0", "tg128"
    )
    assert tg["error"] == tg["estimate_tps"] / 60.99 - 1 and tg["note"] == ""
    # a row of another model is estimated for the model it names (llama-bench's own description), and says so;
    # combined tests are not estimated
    res2 = v.compare(MD_NEW, "llama-2-7b", "Q4_0", "rtx4090")
    assert "recognised as Llama 3 8B from 'llama 8B Q4_K - Medium'" in res2["rows"][0]["note"]
    assert res2["rows"][0]["model_used"] == "Llama 3 8B"
    assert res2["rows"][2]["estimate_tps"] is None and "not estimated" in res2["rows"][2]["note"]
    res3 = v.compare(MD_NEW, "llama-3.1-8b", "Q4_0", "rtx4090")
    assert res3["rows"][0]["note"] == "" and res3["rows"][0]["quant_used"] == "Q4_K_M"


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "empty"),
        ("   \n  ", "empty"),
        ("hello world", "no markdown table"),
        ("| a | b |\n| - | - |\n| 1 | 2 |", "no table header"),
        ("| model | test |\n| --- | --- |\n| llama 7B Q4_0 | pp512 |", "lacks column"),
        ("| model | test | t/s |\n| --- | --- | --- |\n| llama 7B Q4_0 | pp512 | fast |", "t/s"),
        ("| model | test | t/s |\n| --- | --- | --- |\n| llama 7B Q4_0 | warmup | 5.0 |", "test"),
        ("| model | test | t/s |\n| --- | --- | --- |\n| llama 7B Q4_0 | pp512 |", "cells"),
        ("| model | test | t/s |\n| --- | --- | --- |", "no result rows"),
        ("[1, 2]", "not an object"),
        ("[]", "non-empty"),
        ('[{"model_type": "llama 7B Q4_0"}]', "lacks n_prompt"),
        ('[{"model_type": "x", "n_prompt": 512, "n_gen": 0, "avg_ts": -1}]', "avg_ts"),
        ('{"model_type": "x", "n_prompt": 512, "n_gen": 0, "avg_ts": 5', "not valid JSON"),
        ("x" * (v.MAX_INPUT_CHARS + 1), "at most"),
    ],
)
def test_bad_input_raises_clear_valueerror(text, match):
    with pytest.raises(ValueError, match=match):
        v.parse_llama_bench(text)


# =============================================================================================================
# The validation figure (enginelab/figures/validation.py): readouts from the course module, rendering, goldens
# =============================================================================================================
import re as _re  # noqa: E402

from enginelab import page  # noqa: E402
from enginelab.figures import REGISTRY  # noqa: E402
from enginelab.figures import validation as fval  # noqa: E402


def test_figure_registered_with_the_contract():
    mod = fval
    assert REGISTRY[mod.ID] is mod
    for name in ("ID", "TITLE", "SPEC", "default_state", "compute", "describe", "render"):
        assert hasattr(mod, name)
    s = mod.default_state()
    assert page.prerender(mod)["figure"] == mod.render(mod.compute(s)) == mod.render(mod.compute(s))


PASTE_MD = """| model | size | params | backend | ngl | test | t/s |
| --- | ---: | ---: | --- | --: | --- | ---: |
| llama 7B Q4_0 | 3.56 GiB | 6.74 B | CUDA | 99 | pp512 | 7979.85 ± 114.18 |
| llama 7B Q4_0 | 3.56 GiB | 6.74 B | CUDA | 99 | tg128 | 150.00 ± 0.10 |"""


# -- validation ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("profile", ["measured", "course"])
def test_validation_readouts_come_from_the_summary(profile):
    st = fval.SPEC.from_query(f"?profile={profile}")[0]
    assert fval.default_state().profile == "measured"
    d = fval.compute(st)
    s = v.summary(profile=profile)
    assert d.readouts == fval.Readouts(
        decode_mape=s["decode_mape"],
        prefill_mape=s["prefill_mape"],
        n_measurements=s["n_tg"] + s["n_pp"],
        paste_rows=None,
    )
    assert d.summary == fval.Summary.of(s)
    assert d.preds == tuple(fval.Prediction.of(p) for p in v.predictions(profile=profile))
    html = fval.render(d)
    assert html.count("<svg") == 4 and html.count('role="img"') == 4
    assert html.count("<circle") >= 2 * len(v.dataset_rows()) - 1
    assert f"{round(s['decode_mape'] * 100)}%" in fval.describe(d)


def test_validation_paste_and_bad_paste():
    s, msgs = fval.SPEC.from_form({"bench": PASTE_MD, "machine": "rtx4090", "model": "llama-2-7b"})
    assert msgs == []
    d = fval.compute(s)
    res = v.compare(PASTE_MD, "llama-2-7b", "Q4_0", "rtx4090", profile="measured")  # the page's default
    assert d.readouts.paste_rows == 2 and d.paste == fval.Paste.of(res)
    html = fval.render(d)
    tr = _re.findall(
        r'<tr data-paste-row="(\d)" data-test="(\w+)" data-measured="([^"]*)" data-estimate="([^"]*)"', html
    )
    assert tr == [(str(i), r["test"], repr(r["tps"]), repr(r["estimate_tps"])) for i, r in enumerate(res["rows"])]
    bad = fval.compute(fval.SPEC.from_form({"bench": "| model | test |\n|---|---|\n| x | pp512 |"})[0])
    assert bad.paste is None and "t/s" in bad.paste_error
    assert 'data-paste-error="true"' in fval.render(bad)


def test_both_profiles_per_backend_side_by_side():
    d = fval.compute(fval.default_state())
    html = fval.render(d)
    rows = v.backend_errors()
    assert {r["backend"] for r in rows} >= {"cuda", "rocm", "vulkan", "metal", "cpu"}
    for r in rows:
        assert r["course_median"] is not None and r["measured_median"] is not None
        assert f'data-readout="course_{r["kind"]}_{r["backend"]}" data-value="{_fmt.raw(r["course_median"])}"' in html
        assert (
            f'data-readout="measured_{r["kind"]}_{r["backend"]}" data-value="{_fmt.raw(r["measured_median"])}"' in html
        )
    # the measured profile is the better one where it was fitted on several devices
    held = [r for r in rows if r["held_out"]]
    assert held and sum(r["measured_median"] < r["course_median"] for r in held) > len(held) / 2


def test_validation_histogram_counts_every_error():
    preds = v.predictions()
    errs = [p["tg_error"] for p in preds if p["tg_error"] is not None]
    assert sum(fval.histogram_counts(errs)) == len(errs)
    assert fval.histogram_counts([-0.7, -0.5, -0.05, 0.0, 0.12, 0.5, 2.0]) == [1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 2]


@pytest.mark.parametrize("name, q", [("validation", ""), ("validation-m4", "?family=Apple+M4")])
def test_validation_golden(name, q):
    # pinned on the course profile: the measured one moves with every refit
    d = fval.compute(fval.SPEC.from_query(q + ("&" if q else "?") + "profile=course")[0])
    golden(name + "-decode", fval._scatter(d, "tg", "Decode, tg128 / tg512"))
    if not q:
        golden(name + "-hist", fval._histogram(d, "pp", "Prompt error"))


# =============================================================================================================
# "How is this computed?" for every calculator readout (enginelab/explain.py)
# =============================================================================================================
from goldens import golden as _golden  # noqa: E402  tests/golden/<name>.svg, byte for byte

from enginelab import explain as _explain  # noqa: E402
from enginelab import fmt as _fmt  # noqa: E402
from enginelab.figures import calculator as _calc  # noqa: E402


def golden(name: str, text: str):
    _golden(name, text, newline=True)


@pytest.mark.parametrize(
    "q",
    [
        "",
        "?ngl=65",
        "?machine=cpu-ddr5",
        "?machine=m4max&model=llama-3.1-70b",
        "?model=qwen3-30b-a3b&n_cpu_moe=20",
        "?ngl=20&kv=q8_0",
    ],
)
def test_explain_covers_every_readout_and_agrees_with_it(q):
    s, msgs = _calc.SPEC.from_query(q)
    assert msgs == []
    d = _calc.compute(s)
    e = _explain.explain(d)
    r = d.readouts
    assert set(e) == set(_calc.READOUTS) == set(_explain.NAMES)
    for name, html in e.items():
        assert html.startswith(f'<details class="explain" data-explain="{name}">') and "Formula:" in html
    assert f"{r.vram_gb:.2f} GB" in e["vram_gb"] and f"{r.ram_gb:.2f} GB" in e["ram_gb"]
    assert f"{r.n_gpu_layers} of" in e["n_gpu_layers"] or "0" in e["n_gpu_layers"]
    if r.fits:
        assert f"→ {_fmt.rate(r.decode_tok_s)} tok/s" in e["decode_tok_s"]
        assert f"→ {_fmt.rate(r.prefill_tok_s)} tok/s" in e["prefill_tok_s"]
        assert _fmt.pct(r.cpu_share) in e["cpu_share"]
        assert "Result: </span>fits in VRAM" in e["verdict"] or "Result: </span>runs with partial" in e["verdict"]
    else:
        assert "Not computed" in e["decode_tok_s"] and "Result: </span>fails to allocate: " in e["verdict"]


def test_explain_auto_ngl_shows_the_next_layer_does_not_fit():
    e = _explain.explain(_calc.compute(_calc.default_state()))["n_gpu_layers"]
    kw = dict(n_ctx=8192, profile="measured")  # the calculator's default profile
    p = pm.place(pm.MODELS["qwen2.5-32b"], pm.MACHINES["rtx4060ti"], "Q4_K_M", **kw)
    q = pm.place(pm.MODELS["qwen2.5-32b"], pm.MACHINES["rtx4060ti"], "Q4_K_M", n_gpu_layers=p.n_gpu_layers + 1, **kw)
    assert f"GPU total at -ngl {p.n_gpu_layers + 1}" in e and _fmt.gb(q.gpu_total, 2) in e
    assert q.gpu_total + p.fit_margin > p.gpu_capacity >= p.gpu_total + p.fit_margin


def test_llama_benchs_own_model_strings_are_recognised():
    paste = (
        "| model | size | params | backend | ngl | test | t/s |\n|---|--:|--:|---|--:|--:|--:|\n"
        "| qwen2 14B Q4_K - Medium | 8.37 GiB | 14.77 B | CUDA | 99 | tg128 | 33.10 ± 0.05 |\n"
        "| qwen3moe 30B.A3B Q4_K - Medium | 17.28 GiB | 30.53 B | CUDA | 99 | tg128 | 150.0 ± 1.0 |\n"
        "| llama 7B Q4_0 | 3.56 GiB | 6.74 B | CUDA | 99 | tg128 | 120.0 ± 1.0 |\n"
        "| bert 1B F16 | 1 GiB | 1.00 B | CUDA | 99 | tg128 | 10.0 ± 1.0 |\n"
    )
    res = v.compare(paste, model="llama-2-7b", machine="rtx4090")
    rows = res["rows"]
    assert rows[0]["model_used"] == "Qwen2.5 14B" and "recognised as Qwen2.5 14B" in rows[0]["note"]
    assert rows[0]["quant_used"] == "Q4_K_M"
    want = v.estimate(pm.MODELS["qwen2.5-14b"], pm.get_machine("rtx4090"), "Q4_K_M", "tg128", 99)
    assert rows[0]["estimate_tps"] == want
    assert rows[1]["model_used"] == "Qwen3 30B-A3B" or "Qwen3" in rows[1]["model_used"]
    assert rows[2]["model_used"] == "LLaMA 2 7B" and rows[2]["note"] == ""  # the chosen model: no note
    assert rows[3]["model_used"] == "LLaMA 2 7B" and "pick the matching model" in rows[3]["note"]
    assert v.model_of_row("mistral 7B Q4_0", 7.25e9) is not None  # converted to llama in GGUF? either name
