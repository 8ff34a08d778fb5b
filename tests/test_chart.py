"""enginelab.chart's shared pieces that several figures draw with: the stacked bar and the step-throughs' list."""

from __future__ import annotations

import re

from enginelab import chart


def _rects(markup: list) -> list[dict]:
    return [dict(re.findall(r'(\w[\w-]*)="([^"]*)"', r.split(">", 1)[0])) for r in markup]


def test_a_stacked_bar_lays_its_segments_end_to_end():
    # 400 px for 8 units: 3 units are 150 px from x0=10, then 1 unit is 50 px from 160; zero and negative
    # values draw nothing; a sliver of 0.004 units (0.2 px) is drawn 0.5 px wide, and the next starts after 0.2 px
    segs = [
        chart.Segment(3, "weights: 3 GB", "seg seg-weights", attrs={"data_bytes": "3"}),
        chart.Segment(0, "nothing", "seg seg-none"),
        chart.Segment(-1, "negative", "seg seg-neg"),
        chart.Segment(1, "KV: 1 GB", "seg seg-kv"),
        chart.Segment(0.004, "sliver", "seg seg-s"),
        chart.Segment(2, "compute", "seg seg-c"),
    ]
    out = chart.stacked_bar(segs, x0=10, y=40, height=20, span=400, total=8)
    got = [(r["x"], r["width"], r["class"]) for r in _rects(out)]
    assert got == [
        ("10", "150", "seg seg-weights"),
        ("160", "50", "seg seg-kv"),
        ("210", "0.5", "seg seg-s"),
        ("210.2", "100", "seg seg-c"),
    ]
    assert _rects(out)[0]["data-bytes"] == "3" and "<title>weights: 3 GB</title>" in out[0]
    assert all(r["y"] == "40" and r["height"] == "20" for r in _rects(out))


def test_a_segment_with_a_start_is_placed_there():
    # a timeline: 100 px for 10 s; a step of 2 s that starts at 5 s spans 50..70 px from x0=0
    out = chart.stacked_bar([chart.Segment(2, "b", "t", at=5)], x0=0, y=0, height=1, span=100, total=10, min_width=3)
    assert [(r["x"], r["width"]) for r in _rects(out)] == [("50", "20")]


def test_a_trace_step_becomes_a_segment_from_its_start():
    class Step:
        index, what, seconds, elapsed_s = 2, "Upload block 0", 0.25, 1.0

    seg = chart.step_segment(Step, "seg-t seg-pcie")
    assert seg.value == 0.25 and seg.at == 0.75 and seg.cls == "seg-t seg-pcie"
    assert seg.title.startswith("3. Upload block 0: ")


def test_the_step_list_marks_done_now_and_todo():
    rows = [("Read header", "RAM", "step-tier-ram"), ("Map file", "drive", "step-tier-drive"), ("KV", "VRAM", "x")]
    html = str(chart.step_list(rows, 1, label="Launch steps", id_="load-steps"))
    assert html.startswith('<ol class="step-list" aria-label="Launch steps" id="load-steps">')
    classes = re.findall(r'<li class="([^"]*)"', html)
    assert classes == ["step step-done step-tier-ram", "step step-now step-tier-drive", "step step-todo x"]
    assert html.count('aria-current="step"') == 1 and re.search(r'step-now[^>]*aria-current="step"', html)
    assert [n for n in re.findall(r'<span class="step-num">(\d+)</span>', html)] == ["1", "2", "3"]
    assert chart.inner(chart.step_list(rows[:1], 0, label="a", id_="b")).startswith('<li class="step step-now')
