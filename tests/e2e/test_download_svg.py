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
