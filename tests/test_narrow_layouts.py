"""Every chart that a phone would otherwise see scaled down has a layout drawn for it (chart.responsive): the
narrow twin is chart.NARROW_W units wide, its ids end in "-n" (no id appears twice in a page), and it carries no
data-readout (each computed number is marked once, in the wide twin or outside the charts)."""

from __future__ import annotations

import re

import pytest

from enginelab import chart, page
from enginelab.figures import REGISTRY

CHARTS = ("calculator", "tiers", "load", "phases", "roofline", "offload-curve", "decode-curve", "engines")
CHARTS += ("serving-plan", "advisor")


@pytest.mark.parametrize("fid", CHARTS)
def test_the_figure_is_drawn_twice_wide_and_for_a_phone(fid):
    html = page.prerender(REGISTRY[fid])["figure"]
    assert '<div class="layout-wide">' in html and '<div class="layout-narrow">' in html
    narrow = html.split('<div class="layout-narrow">', 1)[1]
    first = re.search(r'<svg [^>]*viewBox="0 0 ([\d.]+) [\d.]+"[^>]*id="([^"]+)"', narrow)
    assert first and float(first.group(1)) == chart.NARROW_W and first.group(2).endswith("-n")
    ids = re.findall(r' id="([^"]+)"', html)
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    for part in html.split('<div class="layout-narrow">')[1:]:
        svg_part = part.split("</svg>", 1)[0]
        assert "data-readout" not in svg_part


def test_frame_patches_keep_both_layouts_in_step():
    from enginelab.figures import load, phases

    for fig, ids in ((load, ("load-boxes", "load-strip-now")), (phases, ("phases-devices", "phases-gauge"))):
        patch = fig.frame_patch(fig.compute(fig.SPEC.from_query("?step=2")[0]))
        for i in ids:
            assert i in patch["html"] and f"{i}-n" in patch["html"]
        assert any(k.endswith("-n-title") for k in patch["text"])
