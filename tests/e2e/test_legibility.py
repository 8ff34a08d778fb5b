"""Legible everywhere: at 390 px no SVG text on any figure page is under 11 CSS px, and nothing is clipped.

Figures are re-laid out for a phone (enginelab.chart.responsive: a layout drawn for the width, shown by the
stylesheet), so the check holds for the page as pre-rendered (before Python, or with JavaScript off) and after
Python's renders alike. Text size is measured as the browser draws it: the computed font size times the scale of
the text's transform to the screen.
"""

from __future__ import annotations

import pytest

from enginelab.figures import REGISTRY

MIN_PX = 11.0
PHONE = {"viewport": {"width": 390, "height": 844}}

SMALL_TEXT = """(minPx) => {
  const out = [];
  for (const t of document.querySelectorAll('#figure svg text, .static-figure svg text')) {
    const box = t.getBoundingClientRect();
    if (!box.width || !t.getClientRects().length) continue;  // not drawn (a hidden layout)
    const m = t.getScreenCTM();
    const px = parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b);
    if (px < minPx) out.push([Math.round(px * 10) / 10, t.textContent.slice(0, 40), t.ownerSVGElement.id]);
  }
  return out;
}"""

OVERFLOW = """() => {
  const out = [];
  const w = document.documentElement.clientWidth;
  for (const e of document.querySelectorAll('#figure *')) {
    const r = e.getBoundingClientRect();
    if (!r.width || !e.getClientRects().length) continue;
    if (r.right > w + 1 && !e.closest('.command, pre, details:not([open]), table, .data-table')) {
      out.push([e.tagName, e.className && e.className.baseVal !== undefined ? e.className.baseVal : e.className,
                Math.round(r.right)]);
    }
  }
  return out.slice(0, 5);
}"""


def _static(page, site, context, path):
    context.route("**/wheels/*.whl", lambda r: None)  # Python never starts: the page as pre-rendered
    page.goto(site.url(path), wait_until="load")
    page.wait_for_timeout(200)


@pytest.mark.parametrize("context", [PHONE], indirect=True)
@pytest.mark.parametrize("fid", list(REGISTRY))
def test_no_svg_text_under_11_px_at_390_before_python(page, site, context, guard, fid):
    guard.allow_problems = True  # the held wheel is a failed request when the page closes
    _static(page, site, context, f"figures/{fid}.html")
    small = page.evaluate(SMALL_TEXT, MIN_PX)
    assert not small, f"{fid}: SVG text under {MIN_PX} px at 390 px: {small[:6]}"
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, fid
    assert not page.evaluate(OVERFLOW), fid


@pytest.mark.parametrize("context", [PHONE], indirect=True)
def test_companion_figures_are_legible_at_390(page, site, context, guard):
    guard.allow_problems = True
    _static(page, site, context, "index.html")
    small = page.evaluate(SMALL_TEXT, MIN_PX)
    assert not small, small[:6]
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


@pytest.mark.parametrize("context", [PHONE], indirect=True)
@pytest.mark.parametrize(
    "path",
    [
        "figures/calculator.html?ngl=65&ctx=32768",
        "figures/load.html?step=8",
        "figures/serving-plan.html?engine=sglang&model=llama-3.1-8b&ctx=131072",
        "figures/engines.html?q=ngl",
    ],
)
def test_no_svg_text_under_11_px_at_390_after_python(page_at, path):
    page = page_at(path)
    small = page.evaluate(SMALL_TEXT, MIN_PX)
    assert not small, f"{path}: {small[:6]}"
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_a_live_figure_redraws_for_its_new_width(page_at):
    """A live frame gets only the layout it shows (enginelab.chart.LAYOUT): narrowed past 720 px it asks for the
    phone layout, widened again the wide one, each drawn for the same state."""
    page = page_at("figures/roofline.html?batch=8")  # not the default state: a live render, not the pre-rendered page
    page.set_viewport_size({"width": 1280, "height": 900})
    page.wait_for_function("document.querySelector('#roofline-chart') && !document.querySelector('#roofline-chart-n')")
    renders = int(page.evaluate("document.documentElement.dataset.renders"))
    page.set_viewport_size({"width": 390, "height": 900})
    page.wait_for_function("!!document.querySelector('#roofline-chart-n')")
    assert page.locator("#roofline-chart").count() == 0 and page.locator("#roofline-chart-n").is_visible()
    assert int(page.evaluate("document.documentElement.dataset.renders")) == renders + 1
    assert page.input_value("#f-batch") == "8"
    page.set_viewport_size({"width": 1280, "height": 900})
    page.wait_for_function("!!document.querySelector('#roofline-chart')")
    assert page.locator("#roofline-chart-n").count() == 0 and page.locator("#roofline-chart").is_visible()
