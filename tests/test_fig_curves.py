"""enginelab.chart (scales, ticks, axes) and the two curve figures: offload-curve and decode-curve.

Expected numbers come from perf_model / inference_trace called here, never from the figure modules' own
arithmetic, so a test fails if a figure draws anything the course modules would not compute.
"""
from __future__ import annotations

import math
import os
import re
from pathlib import Path

import pytest

from enginelab import chart

GOLDEN = Path(__file__).parent / "golden"


def golden(name: str, text: str):
    """Compare with tests/golden/<name>.svg byte for byte; UPDATE_GOLDEN=1 rewrites it (review the diff)."""
    path = GOLDEN / f"{name}.svg"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with UPDATE_GOLDEN=1 once and review it"
    assert text == path.read_text(), f"{name} differs from its golden SVG (UPDATE_GOLDEN=1 to accept, then review)"


# ---------------------------------------------------------------------------------------------------------
# chart: scales and ticks
# ---------------------------------------------------------------------------------------------------------
def test_linear_scale_maps_ends_and_middle_and_may_run_downwards():
    x = chart.LinearScale(0, 49, 60, 620)
    assert x(0) == 60 and x(49) == 620 and x(24.5) == pytest.approx(340)
    y = chart.LinearScale(0, 30, 300, 20)      # SVG y grows down
    assert y(0) == 300 and y(30) == 20 and y(15) == pytest.approx(160)


def test_log_scale_puts_each_decade_the_same_distance_apart():
    y = chart.LogScale(1e9, 1e15, 320, 20)
    assert y(1e9) == pytest.approx(320) and y(1e15) == pytest.approx(20)
    assert y(1e10) - y(1e11) == pytest.approx(50) and y(1e13) - y(1e14) == pytest.approx(50)
    with pytest.raises(ValueError, match="domain must be > 0"):
        chart.LogScale(0, 10, 0, 1)


def test_nice_ticks_are_round_and_inside_the_range():
    assert chart.nice_ticks(0, 30, 5) == [0, 10, 20, 30]
    assert chart.nice_ticks(0, 30, 10) == [0, 5, 10, 15, 20, 25, 30]
    assert chart.nice_ticks(0, 49, 8) == [0, 10, 20, 30, 40]
    assert chart.nice_ticks(0.3, 1.1, 4) == [0.4, 0.6, 0.8, 1.0]
    # token counts: power-of-two multiples of 1024
    assert chart.nice_ticks(0, 65536, 8, base=1024) == [i * 8192 for i in range(9)]
    assert chart.nice_ticks(0, 8192, 8, base=1024) == [i * 1024 for i in range(9)]
    assert chart.nice_ticks(0, 2000, 8, base=1024) == [0, 1024]   # never a fraction of the unit
    with pytest.raises(ValueError):
        chart.nice_ticks(0, math.inf)


def test_log_ticks_are_decades_or_1_2_5_for_short_ranges():
    assert chart.log_ticks(1, 1e6) == [1, 10, 100, 1000, 1e4, 1e5, 1e6]
    assert chart.log_ticks(0.5, 50) == [0.5, 1, 2, 5, 10, 20, 50]
    assert chart.LogScale.decades(3.3, 450) == (1, 1000)


def test_si_labels():
    assert [chart.si(v) for v in (0, 0.25, 3, 1500, 2e6, 1.65e14, 1e15)] == \
        ["0", "0.25", "3", "1.5k", "2M", "165T", "1P"]


def test_axis_draws_one_tick_and_label_per_tick_and_escapes_text():
    x = chart.LinearScale(0, 10, 50, 550)
    g = chart.axis(x, at=300, side="bottom", ticks=[0, 5, 10], fmt=str, label="a < b")
    assert g.count('class="tick"') == 3 and g.count('class="tick-label"') == 3
    assert '>a &lt; b</text>' in g
    assert 'x1="300"' in chart.axis(chart.LinearScale(0, 1, 300, 20), at=300, side="left", ticks=[0, 1])
    with pytest.raises(ValueError):
        chart.axis(x, at=0, side="top")


def test_path_d_and_label_spreading():
    assert chart.path_d([(0, 1), (2.5, 3.333)]) == "M0,1L2.5,3.33"
    assert chart.path_d([]) == ""
    ys = chart.spread_labels([100, 104, 106, 300], 14, 20, 320)
    s = sorted(ys)
    assert all(b - a >= 14 - 1e-9 for a, b in zip(s, s[1:]))
    assert ys[3] == 300 and ys[0] == 100          # labels with room stay where they were wanted
    # a stack that would run past the bottom is pushed back up inside [lo, hi]
    ys = chart.spread_labels([310, 312, 315], 14, 20, 320)
    assert max(ys) <= 320 and min(ys) >= 20 and sorted(ys) == [292, 306, 320]
