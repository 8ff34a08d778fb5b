"""The engines figure: the module's defaults kept, our own descriptions, filter and engine checkboxes (URL
state), links to the figures where each parameter matters, escaping, and golden SVGs of the parameter map."""

from __future__ import annotations

import html as htmllib
import re

import pytest
from goldens import golden  # noqa: E402  tests/golden/<name>.svg, byte for byte

from enginelab import page
from enginelab.figures import REGISTRY
from enginelab.figures import engines as eg


def state(q=""):
    s, msgs = eg.SPEC.from_query(q)
    assert msgs == [], msgs
    return s


def view(q=""):
    d = eg.compute(state(q))
    return d, eg.render(d)


def params(html: str) -> list:
    return [htmllib.unescape(p) for p in re.findall(r'<tr data-param="([^"]+)"', html)]


# The module's configuration tables, transcribed by hand (parameter: default).
MODULE_DEFAULTS = {
    "llama": {
        "-ngl, --n-gpu-layers": "auto",
        "--fit / --fit-target / --fit-ctx": "on / 1024 MiB / 4096",
        "-c, --ctx-size": "0 (model's trained length)",
        "-b, --batch-size / -ub, --ubatch-size": "2048 / 512",
        "-t / -tb": "physical cores",
        "-fa, --flash-attn": "auto",
        "-ctk / -ctv": "f16",
        "--load-mode": "auto (mmap)",
        "-np, --parallel": "auto (4)",
        "-kvu, --kv-unified": "on when -np is auto",
        "--cache-prompt / --cache-reuse / --cache-ram": "on / 0 / 8192 MiB",
        "-ot, --override-tensor": "—",
        "--cpu-moe / --n-cpu-moe N": "—",
        "-sm / -ts": "layer / even",
        "--op-offload": "on",
        "-nkvo, --no-kv-offload": "off",
        "--spec-draft-model, -md / --spec-draft-n-max": "— / 3",
    },
    "vllm": {
        "--gpu-memory-utilization": "0.92",
        "--max-model-len": "from model config; auto fits to memory",
        "--max-num-seqs / --max-num-batched-tokens": "256 / 2048 (server, GPU < 70 GiB)",
        "--kv-cache-dtype": "auto",
        "--block-size": "16",
        "--enable-prefix-caching": "on",
        "--enforce-eager": "off",
        "--cpu-offload-gb": "0",
        "--quantization, -q": "from checkpoint",
        "--tensor-parallel-size, -tp": "1",
        "--enable-lora / --max-loras / --max-lora-rank": "off / 1 / 16",
        "--speculative-config": "—",
    },
    "sglang": {
        "--mem-fraction-static": "auto",
        "--context-length": "from model config",
        "--max-running-requests": "auto",
        "--chunked-prefill-size": "auto (2048 on GPUs < 20 GB)",
        "--schedule-policy": "fcfs",
        "--disable-radix-cache / --radix-eviction-policy": "off / lru",
        "--kv-cache-dtype": "auto",
        "--cuda-graph-max-bs-decode": "auto (8 on GPUs < 20 GB)",
        "--quantization": "from checkpoint",
        "--lora-paths / --max-loras-per-batch": "— / 8",
        "--speculative-algorithm": "—",
    },
}
# A few of the module's own descriptions: ours must not repeat them.
MODULE_WORDS = [
    "Layers whose weights and KV live in VRAM (all or a number)",
    "Shrink unset arguments until the model fits, keeping a margin",
    "Fraction of total GPU memory vLLM may use (weights + activations + KV)",
    "lpm = longest prefix match (the paper's cache-aware policy)",
    "Tokens per KV block",
    "Block-hash prefix reuse",
    "Largest decode batch captured as a CUDA graph",
]


def test_registered_and_defaults():
    assert REGISTRY["engines"] is eg
    s = eg.default_state()
    assert (s.q, s.llama, s.vllm, s.sglang) == ("", True, True, True) and eg.SPEC.to_query(s) == ""


def test_the_module_defaults_are_kept_and_the_descriptions_are_ours():
    for k, table in MODULE_DEFAULTS.items():
        assert {p: d for p, d, _w, _l in eg.CONFIG[k]} == table
    ours = [w for rows in eg.CONFIG.values() for _p, _d, w, _l in rows]
    for phrase in MODULE_WORDS:
        assert not any(phrase.lower() in w.lower() for w in ours), phrase
    assert len(eg.COMPARISON) == 8 and all(len(r) == 4 for r in eg.COMPARISON)


def test_unfiltered_page_shows_everything():
    d, html = view()
    assert d.readouts.rows_shown == 8 + 17 + 12 + 11
    assert len(params(html)) == 17 + 12 + 11
    assert html.count('<th scope="col" class="eng eng-') == 3


def test_text_filter_is_case_insensitive_and_needs_every_word():
    d, html = view("?q=LPM")
    assert params(html) == ["--schedule-policy"] and d.comparison == ()
    _, html = view("?q=kv%20dtype")
    assert params(html) == ["--kv-cache-dtype", "--kv-cache-dtype"]  # vLLM's and SGLang's
    _, html = view("?q=kv%20zzz")
    assert params(html) == [] and "No llama.cpp parameter matches the filter." in html
    # it searches defaults too, and marks what matched
    _, html = view("?q=0.92")
    assert params(html) == ["--gpu-memory-utilization"] and "<mark>0.92</mark>" in html
    d, _ = view("?q=radix")
    assert [r.aspect for r in d.comparison] == ["KV cache", "Prefix reuse"]


def test_engine_checkboxes_hide_columns_and_tables():
    d, html = view("?llama=0")
    assert "config-llama" not in html and 'class="eng eng-llama"' not in html
    assert 'id="config-vllm"' in html and 'id="config-sglang"' in html
    assert d.engines == ("vllm", "sglang") and eg.SPEC.to_query(d.state) == "?llama=0"
    d, html = view("?llama=0&vllm=0&sglang=0")
    assert d.engines == () and "No engine selected" in html and '<table class="engines-table' not in html
    # the filter only looks at the engines shown
    d, _ = view("?q=ggml&llama=0")
    assert d.comparison == ()


def test_parameters_link_to_the_figures_where_they_matter():
    _, html = view()

    def links(param):
        row = re.search(rf'<tr data-param="{re.escape(htmllib.escape(param))}">.*?</tr>', html).group(0)
        return re.findall(r'<a href="([^"]+)" class="fig-link"', row)

    assert links("-ngl, --n-gpu-layers")[0].startswith("calculator.html?ngl=")
    assert "decode-curve.html" in links("-ctk / -ctv")
    assert links("--schedule-policy") == ["kv-managers.html?policy=lpm"]
    assert links("--gpu-memory-utilization") == ["serving-plan.html"]
    assert links("-b, --batch-size / -ub, --ubatch-size") == ["phases.html"]
    # every link goes to a figure page of issue 5's list (or the serving plan), with this figure's state format
    for rows in eg.CONFIG.values():
        for _p, _d, _w, ls in rows:
            for fid, q in ls:
                assert fid in eg.FIGURES and (q == "" or q.startswith("?"))
    # linked calculator states are valid calculator states
    from enginelab.figures import calculator

    for rows in eg.CONFIG.values():
        for _p, _d, _w, ls in rows:
            for fid, q in ls:
                if fid == "calculator":
                    assert calculator.SPEC.from_query(q)[1] == [], q


def test_filter_text_is_escaped_and_limited():
    d, html = view("?q=%3Cscript%3Ealert(1)%3C/script%3E")
    assert "<script>" not in html and "&lt;script&gt;" in html
    s, msgs = eg.SPEC.from_query("?q=" + "x" * 100 + "&sglang=nah")
    assert len(s.q) == 60 and s.sglang is True and len(msgs) == 2


def test_controls_filter_box_and_checkboxes():
    html = page.controls_html(eg, eg.default_state())
    assert re.search(r'<div class="field field-text field-filter" data-field="q"[^>]*><label for="f-q">', html)
    assert '<input type="search" id="f-q" name="q" value=""' in html
    assert html.count('type="checkbox"') == 3 and "<legend>Engines</legend>" in html
    html = page.controls_html(eg, state("?q=%22a%22"))
    assert 'value="&quot;a&quot;"' in html


def test_map_counts_links_per_engine_and_figure():
    d, html = view()
    assert d.counts["sglang"]["kv-managers"] == 3 and d.counts["vllm"]["serving-plan"] == 4
    svg = re.search(r'<svg [^>]*id="engines-map".*?</svg>', html, re.S).group(0)
    assert 'role="img"' in svg and "<desc" in svg
    assert svg.count('class="map-dot') == 3 * len(eg.FIGURES)
    assert '<details class="data-table">' in html


@pytest.mark.parametrize("name,q", [("engines", ""), ("engines-filtered", "?q=cache&vllm=0")])
def test_golden(name, q):
    _, html = view(q)
    golden(name, re.search(r'<svg [^>]*id="engines-map".*?</svg>', html, re.S).group(0))
