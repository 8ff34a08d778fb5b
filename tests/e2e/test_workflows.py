"""Three users, end to end, in Chromium.

- A course author takes two figures' embed snippets from their Embed buttons, pastes them into a page served from
  another origin, and changes the figures' state there: each frame stays within 24 px of its content after
  growing and after shrinking (embed.js), and a frame from a third site cannot resize anything.
- A practitioner opens a shared calculator link on a slow connection: before Python is ready the controls show
  the link's settings and every number is marked as computed for other settings; when it is ready the page
  answers "does it fit, and how fast" with CPython's own numbers for that state.
- A learner follows the companion page's links: a "Try this" link into a live frame, a link inside that figure
  to the advisor, a "Where it shows" link of the engines matrix, and the figure index's embed snippets.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

from playwright.sync_api import expect

from enginelab.figures import REGISTRY
from enginelab.figures import calculator as calc

from .harness import Guard, Site, readouts, wait_ready

SLACK_PX = 24  # a frame may differ from its content by at most this much


# ---------------------------------------------------------------------------------------------------------
# The course author
# ---------------------------------------------------------------------------------------------------------
def _snippet_from_embed_button(page, site, path: str) -> str:
    page.goto(site.url(path))
    wait_ready(page)
    page.click("[data-action=embed]")
    return page.input_value("#embed-code")


def _frame_fits(page, frame_id: str) -> tuple[float, float]:
    """(frame height on the host page, content height inside the frame), in CSS px."""
    outer = page.evaluate(f"document.getElementById('{frame_id}').getBoundingClientRect().height")
    inner = page.locator(f"#{frame_id}").element_handle().content_frame().evaluate("window.enginelab.contentHeight()")
    return outer, inner


def _wait_fitted(page, frame_id: str, timeout_s: float = 20.0) -> tuple[float, float]:
    deadline = 0.0
    outer = inner = 0.0
    while deadline < timeout_s:
        outer, inner = _frame_fits(page, frame_id)
        if abs(outer - inner) <= SLACK_PX:
            return outer, inner
        page.wait_for_timeout(250)
        deadline += 0.25
    log = [m for m in page.evaluate("window.__heights || []") if m[1] != 31]
    raise AssertionError(f"#{frame_id} is {outer:.0f} px tall around {inner:.0f} px of content; messages {log[-6:]}")


def test_course_author_embeds_two_figures_on_another_origin(browser, site, tmp_path):
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    host_dir = tmp_path / "course"
    host_dir.mkdir()
    host = Site(host_dir, check_built=False)  # the course's own site: a second origin
    guard = Guard(context, site.origin, also=(host.origin,))
    try:
        page = context.new_page()
        # 1. the snippets, as the Embed buttons give them: absolute URLs plus the one script line
        calc_snip = _snippet_from_embed_button(page, site, "figures/calculator.html?machine=rtx3060")
        kv_snip = _snippet_from_embed_button(page, site, "figures/kv-managers.html")
        for snip in (calc_snip, kv_snip):
            frame_line, script_line = snip.splitlines()
            assert frame_line.startswith(f'<iframe src="{site.origin}/figures/')
            assert script_line == f'<script src="{site.origin}/embed.js" async></script>'
        assert "machine=rtx3060" in calc_snip
        # 2. the course page on its own origin, with a frame of its own that pretends to be a figure
        calc_snip = calc_snip.replace("<iframe ", '<iframe id="calc" ', 1)
        kv_snip = kv_snip.replace("<iframe ", '<iframe id="kv" ', 1)
        (host_dir / "intruder.html").write_text(
            '<!doctype html><link rel="icon" href="data:,"><p>not enginelab</p><script>'
            "setInterval(() => parent.postMessage("
            "{type: 'enginelab:height', v: 1, figure: 'calculator', height: 31}, '*'), 200)</script>"
        )
        (host_dir / "week3.html").write_text(
            "<!doctype html><html><head><meta charset=utf-8><title>Week 3</title>"
            '<link rel="icon" href="data:,"><script>window.__heights = []; addEventListener("message", (e) => '
            "__heights.push([e.origin, e.data && e.data.height, e.data && e.data.figure]))</script></head><body>"
            f"<h1>Week 3: memory</h1><p>Try the calculator.</p>{calc_snip}<p>Then the KV managers.</p>{kv_snip}"
            '<iframe id="intruder" src="intruder.html" height="150" style="border:0"></iframe></body></html>'
        )
        page.goto(f"{host.origin}/week3.html")
        for fid in ("calc", "kv"):
            page.locator(f"#{fid}").scroll_into_view_if_needed()
            frame = page.locator(f"#{fid}").element_handle().content_frame()
            frame.wait_for_selector("html[data-ready=true]", state="attached", timeout=90_000)
        calc_frame = page.locator("#calc").element_handle().content_frame()
        kv_frame = page.locator("#kv").element_handle().content_frame()
        assert readouts(calc_frame)["verdict"] == "partial"  # the snippet's state (Qwen2.5 32B on an RTX 3060)
        start, _ = _wait_fitted(page, "calc")
        _wait_fitted(page, "kv")

        # 3. the author changes the calculator's state in place: a small model that fits (the page shrinks) ...
        calc_frame.select_option("#f-model", "llama-3.2-1b")
        calc_frame.wait_for_function("document.querySelector('[data-readout=verdict]').dataset.value === 'vram'")
        small, content = _wait_fitted(page, "calc")
        assert small < start - 100, (start, small)
        # ... then a setup that cannot load, with its alert and the advisor's changes (the page grows)
        calc_frame.select_option("#f-model", "qwen2.5-32b")
        calc_frame.select_option("#f-ngl", "65")
        calc_frame.wait_for_function("document.querySelector('[data-readout=verdict]').dataset.value === 'fails'")
        calc_frame.wait_for_selector("#calc-findings-body .finding, #calc-findings-body section", timeout=30_000)
        grown, _ = _wait_fitted(page, "calc")
        assert grown > small + 100, (small, grown)

        # 4. and the KV managers: a smaller pool (fewer rows: shrinks), then the agent workload (grows)
        before, _ = _wait_fitted(page, "kv")
        kv_frame.select_option("#f-capacity", "64")
        kv_frame.wait_for_function("document.querySelectorAll('#kv-cells-paged rect').length === 64")
        shrunk, _ = _wait_fitted(page, "kv")
        assert shrunk < before - 50, (before, shrunk)
        kv_frame.select_option("#f-capacity", "1024")
        kv_frame.wait_for_function("document.querySelectorAll('#kv-cells-paged rect').length === 1024")
        regrown, _ = _wait_fitted(page, "kv")
        assert regrown > shrunk + 200, (shrunk, regrown)

        # 5. a frame from another site posting height messages is not obeyed, and the figures were not moved by it
        page.wait_for_timeout(600)
        assert page.evaluate("document.getElementById('intruder').getBoundingClientRect().height") == 150
        _wait_fitted(page, "calc")
        assert not guard.problems(), guard.problems()
    finally:
        context.close()
        host.close()


# ---------------------------------------------------------------------------------------------------------
# The practitioner
# ---------------------------------------------------------------------------------------------------------
def test_practitioner_opens_a_shared_link_on_a_slow_connection(page, site, context):
    shared = "calculator.html?model=qwen2.5-14b&machine=rtx3060&ctx=16384&kv=q8_0"
    held = []  # the wheel (our Python) is held back, as on a slow line, until the test lets it through
    context.route("**/wheels/*.whl", lambda route: held.append(route))
    page.goto(site.url(shared), wait_until="domcontentloaded")
    # before Python: the link's own settings are in the controls at once ...
    page.wait_for_function("document.querySelector('#f-model').value === 'qwen2.5-14b'", timeout=5_000)
    assert page.input_value("#f-machine") == "rtx3060"
    assert page.input_value("#f-ctx") == "16384" and page.input_value("#f-kv") == "q8_0"
    assert page.evaluate("document.documentElement.dataset.ready") == "false"
    # ... and no number computed for the defaults passes for an answer: all are marked, with a visible banner
    expect(page.locator("#figure .stale-banner")).to_contain_text("Computing for your settings")
    stale = page.eval_on_selector_all("#figure [data-readout]", "els => els.map(e => e.hasAttribute('data-stale'))")
    assert stale and all(stale)
    assert page.locator("#figure > .calculator").evaluate("e => getComputedStyle(e).opacity") != "1"
    page.wait_for_timeout(1500)  # the slow line
    assert page.evaluate("document.documentElement.dataset.ready") == "false"
    assert held, "the page never asked for the wheel"
    for route in held:
        route.continue_()
    wait_ready(page)
    # Python is running: the answers are there, for this state, and nothing is marked stale any more
    assert page.locator("[data-stale]").count() == 0 and page.locator(".stale-banner").count() == 0
    assert page.locator("#figure > *").first.evaluate("e => getComputedStyle(e).opacity") == "1"
    state, _ = calc.SPEC.from_query(urlsplit(site.url(shared)).query)
    want = calc.compute(state).readouts
    got = readouts(page)
    assert got["verdict"] == want.verdict and got["fits"] == ("true" if want.fits else "false")
    assert abs(float(got["decode_tok_s"]) / want.decode_tok_s - 1) < 1e-9  # Pyodide's floats, CPython's numbers
    verdict = page.locator(".readout-verdict").text_content()
    assert calc.VERDICTS[want.verdict] in verdict
    assert page.locator("[data-readout=decode_tok_s]").text_content() not in ("", "—")
    # the shared link is still the page's URL: nothing was rewritten
    assert dict(parse_qsl(urlsplit(page.url).query)) == dict(parse_qsl(urlsplit(site.url(shared)).query))


# ---------------------------------------------------------------------------------------------------------
# The learner
# ---------------------------------------------------------------------------------------------------------
def test_learner_follows_the_companion_pages_links(page, site):
    page.goto(site.url("index.html"))
    # a "Try this" link opens the figure, with its state, live in the section's frame, sized to its content
    link = page.locator('a.try-link[data-frame="frame-calculator"]').first
    href = link.get_attribute("href")
    link.scroll_into_view_if_needed()
    link.click()
    frame = page.frame(name="frame-calculator")
    frame.wait_for_selector("html[data-ready=true]", state="attached", timeout=90_000)
    want = dict(parse_qsl(urlsplit(href).query))
    assert {k: frame.locator(f"#f-{k}").input_value() for k in want} == want
    assert frame.locator("#messages").is_hidden()
    frame_box = page.locator("iframe[name=frame-calculator]")
    page.wait_for_function(
        "() => { const f = document.querySelector('iframe[name=frame-calculator]');"
        " const h = f.contentWindow.enginelab && f.contentWindow.enginelab.contentHeight();"
        f" return h && Math.abs(f.getBoundingClientRect().height - h) <= {SLACK_PX}; }}",
        timeout=30_000,
    )
    assert frame_box.count() == 1
    # inside the figure, "Open the advisor" carries the same settings to the advisor page
    frame.locator("a", has_text="Open the advisor").click()
    frame.wait_for_url(re.compile(r"figures/advisor\.html\?"), wait_until="commit")
    frame.wait_for_selector("html[data-ready=true]", state="attached", timeout=90_000)
    assert {k: frame.locator(f"#f-{k}").input_value() for k in want} == want
    assert frame.locator("#messages").is_hidden()
    # the engines matrix's "Where it shows" links (pre-rendered on the companion page) open the figure they name
    where = page.locator("#engines .static-figure a.fig-link").first
    target = where.get_attribute("href")
    assert target.startswith("figures/")
    where.click()
    page.wait_for_url(re.compile(re.escape(target.split("?")[0])))
    wait_ready(page)
    assert page.locator("#messages").is_hidden()
    # the contents link to the figure index: one snippet per figure, absolute, with the script line
    page.goto(site.url("index.html"))
    page.locator("nav.toc a", has_text="All figures").click()
    page.wait_for_url(re.compile(r"figures/index\.html"))
    snippets = page.locator("textarea.snippet")
    assert snippets.count() == len(REGISTRY)
    for i in range(snippets.count()):
        frame_line, script_line = snippets.nth(i).input_value().splitlines()
        src = re.search(r'src="([^"]+)"', frame_line).group(1)
        assert src.startswith(f"{site.origin}/figures/") and src.endswith(".html")
        assert page.request.get(src).status == 200
        assert script_line == f'<script src="{site.origin}/embed.js" async></script>'
    assert page.request.get(f"{site.origin}/embed.js").status == 200
