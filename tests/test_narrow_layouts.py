"""Every chart that a phone would otherwise see scaled down has a layout drawn for it (chart.responsive): the
narrow twin is chart.NARROW_W units wide, its ids end in "-n" (no id appears twice in a page), and it carries no
data-readout (each computed number is marked once, in the wide twin or outside the charts). A live frame gets only
the layout it shows (chart.layout_for; site/py/main.py asks by the frame's width)."""

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


@pytest.mark.parametrize("fid", CHARTS)
@pytest.mark.parametrize("layout", ["wide", "narrow"])
def test_a_live_frame_gets_only_the_layout_it_shows(fid, layout):
    """chart.layout_for: the browser glue draws only the layout the frame shows; what it draws is that layout of
    the full render, byte for byte, and the other is not drawn at all."""
    fig = REGISTRY[fid]
    state = fig.default_state()
    both = str(page.view(fig, state)["figure"])
    with chart.layout_for(layout):
        one = str(page.view(fig, state)["figure"])
    other = "narrow" if layout == "wide" else "wide"
    assert f'<div class="layout-{layout}">' in one and f'<div class="layout-{other}">' not in one
    assert len(one) < len(both)
    # removing the other layout's divs from the full render gives the one-layout render
    cut = both
    while f'<div class="layout-{other}">' in cut:
        start = cut.index(f'<div class="layout-{other}">')
        depth = 0
        for m in re.finditer(r"<div\b[^>]*>|</div>", cut[start:]):
            depth += -1 if m.group(0) == "</div>" else 1
            if depth == 0:
                cut = cut[:start] + cut[start + m.end() :]
                break
    assert cut == one
    assert chart.LAYOUT is None  # restored


def test_frame_patches_of_one_layout_carry_only_its_parts():
    from enginelab.figures import load, phases

    for fig in (load, phases):
        data = fig.compute(fig.SPEC.from_query("?step=2")[0])
        both = fig.frame_patch(data)
        with chart.layout_for("wide"):
            wide = fig.frame_patch(data)
        with chart.layout_for("narrow"):
            narrow = fig.frame_patch(data)
        is_narrow = lambda k: k.endswith("-n") or "-chart-n-" in k  # noqa: E731
        for part in ("html", "text"):
            assert not any(is_narrow(k) for k in wide[part]) and any(is_narrow(k) for k in narrow[part])
            assert all(is_narrow(k) for k in set(narrow[part]) - set(wide[part]))
            assert set(wide[part]) | set(narrow[part]) == set(both[part])
            assert {k: both[part][k] for k in wide[part]} == wide[part]


def test_the_glue_draws_the_layout_each_frame_asks_for():
    """site/py/main.py: one runtime serving a wide and a narrow frame draws each its own layout; a frame whose
    width crosses the breakpoint asks for a refresh with its new layout and gets that one in full."""
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "site" / "py"))
    import main

    def ask(client, **req):
        return json.loads(main.serve(client, json.dumps(req)))

    opened = {}
    for client, layout in (("w", "wide"), ("n", "narrow")):
        r = ask(client, op="open", figure="roofline", search="?batch=8", sigs={}, values={}, layout=layout)
        opened[client] = r["figure"]
    assert '"layout-wide"' in opened["w"] and '"layout-narrow"' not in opened["w"]
    assert '"layout-narrow"' in opened["n"] and '"layout-wide"' not in opened["n"]
    r = ask("w", op="refresh", layout="narrow")
    assert '"layout-narrow"' in r["figure"] and '"layout-wide"' not in r["figure"]
    r = ask("n", op="input", values={"batch": "16"}, target="batch", patch_key="")
    assert '"layout-narrow"' in r["figure"] and '"layout-wide"' not in r["figure"]  # kept from before
    for c in ("w", "n"):
        ask(c, op="close")
    assert chart.LAYOUT is None
