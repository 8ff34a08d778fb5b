"""The companion page in Chromium: sections in reading order, try-this links load state into the
embedded figure, the figures report their height, and the figure index lists embed snippets."""

import re

from .harness import wait_ready


def test_companion_page_try_link_makes_the_figure_live(page, site):
    page.goto(site.url("index.html"))
    assert page.locator("h1").first.text_content().startswith("Where the bytes live")
    ids = page.eval_on_selector_all("section.companion-section", "els => els.map(e => e.id)")
    assert ids.index("load") < ids.index("calculator") < ids.index("kv-managers")
    # every figure is there at once, pre-rendered, and no Python has started
    assert page.locator(".static-figure svg").count() >= len(ids)
    assert page.locator("iframe").count() == 0
    link = page.locator('a[data-frame="frame-roofline"].try-link').first
    link.scroll_into_view_if_needed()
    link.click()
    assert page.locator("iframe").count() == 1
    frame = page.frame(name="frame-roofline")
    frame.wait_for_url(re.compile(r"roofline\.html\?.*machine=rtx3060"), wait_until="commit")
    frame.wait_for_selector("html[data-ready=true]", state="attached", timeout=90_000)
    assert frame.locator("#f-machine").input_value() == "rtx3060"
    # the figure told its parent its height and the frame was resized to it
    page.wait_for_function(
        "() => { const f = document.querySelector('iframe[name=frame-roofline]');"
        " return f && f.style.height && parseInt(f.style.height) > 300; }",
        timeout=30_000,
    )


def test_companion_works_without_javascript(browser, site):
    ctx = browser.new_context(java_script_enabled=False)
    try:
        page = ctx.new_page()
        page.goto(site.url("index.html"))
        assert page.locator(".static-figure svg").first.is_visible()
        page.locator('a[data-frame="frame-load"].try-link').first.click()  # plain link: the figure page
        page.wait_for_url(re.compile(r"figures/load\.html\?scenario=fits-24gb"))
    finally:
        ctx.close()


def test_figure_index_has_a_snippet_per_figure(page, site):
    from enginelab.figures import REGISTRY

    page.goto(site.url("figures/index.html"))
    snippets = page.locator("textarea.snippet")
    assert snippets.count() == len(REGISTRY)
    assert all('<iframe src="' in snippets.nth(i).input_value() for i in range(snippets.count()))
    page.locator("a", has_text=REGISTRY["tiers"].TITLE).first.click()
    wait_ready(page)
    assert page.evaluate("document.documentElement.dataset.figure") == "tiers"
