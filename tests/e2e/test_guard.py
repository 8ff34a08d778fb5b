"""The browser tests' offline guard (harness.Guard): a request to anywhere but the site's own origin (and the
origins a test serves itself) is aborted and recorded; the site's own requests pass untouched."""

from __future__ import annotations

from .harness import Guard

FETCH_JS = """
async (urls) => {
  const out = {};
  for (const u of urls) {
    try { out[u] = (await fetch(u, { cache: 'no-store' })).status; } catch (e) { out[u] = 'failed'; }
  }
  return out;
}
"""


def test_only_the_site_and_the_origins_a_test_serves_get_through(browser, site):
    ctx = browser.new_context()
    try:
        # an allowed origin whose text is a prefix of another one: the port 1 is not the port 12
        g = Guard(ctx, site.origin, also=("http://127.0.0.1:1",))
        page = ctx.new_page()
        page.goto(site.url("_bare.html"))
        own = site.url("manifest.json")
        off = ["http://example.invalid/weights.gguf", "http://127.0.0.1:12/x", f"http://localhost:{site.port}/x"]
        got = page.evaluate(FETCH_JS, [own, "data:text/plain,ok", *off])
        assert got[own] == 200 and got["data:text/plain,ok"] == 200
        assert all(got[u] == "failed" for u in off)
        assert sorted(g.blocked) == sorted(off)
    finally:
        ctx.close()
