"""Download SVG saves the current figure: for the KV-manager grids (three SVGs on the page) one standalone
file with all three grids of the current frame, styled; for a one-chart figure, that chart."""

import re


def _download(page):
    with page.expect_download() as info:
        page.click("button[data-action=download-svg]")
    return open(info.value.path(), encoding="utf-8").read()


def test_kv_managers_download_has_all_three_grids_of_this_frame(page_at):
    page = page_at("figures/kv-managers.html?step=12")
    text = _download(page)
    assert text.startswith("<?xml") and "<svg" in text and "<style>" in text
    assert 'data-step="12"' in text
    for name in ("slots", "paged", "radix"):
        assert re.search(name, text, re.I), name


def test_calculator_download_is_its_chart(page_at):
    page = page_at("figures/calculator.html")
    text = _download(page)
    assert 'id="calculator-chart"' in text and "seg-weights" in text


def test_calculator_download_has_a_title_line_with_the_state_the_verdict_and_the_legend(page_at):
    page = page_at("figures/calculator.html?model=qwen2.5-14b&machine=rtx3060&ctx=32768")
    text = _download(page)
    assert ">Qwen2.5 14B Q4_K_M on RTX 3060 12 GB + DDR4</text>" in text
    assert "n_ctx 32,768 · KV f16 · -ngl auto" in text and "Runs with partial offload." in text
    assert "decode " in text and " tok/s" in text
    for label in ("Weights", "KV cache", "Compute buffer", "--fit margin", "Free"):
        assert f">{label}</text>" in text
    assert ".dl-title" in text and "seg-weights" in text


def test_any_figure_download_carries_its_title_and_state(page_at):
    page = page_at("figures/roofline.html?machine=rtx3060")
    text = _download(page)
    summary = page.text_content("#summary").strip()
    assert 'class="chart dl-sheet"' in text and ">Roofline" in text
    # the state in words (the page's summary), wrapped into lines above the chart
    words = " ".join(re.findall(r'<text[^>]*class="dl-state"[^>]*>([^<]*)</text>', text))
    assert words.replace("&amp;", "&") == summary and "RTX 3060" in words
    assert 'id="roofline-chart"' in text
