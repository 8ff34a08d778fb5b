"""A model from Hugging Face or a link, in Chromium (issue 16). The Hub (huggingface.co) and a file host
(files.example.org) are local fixtures (tests/remote_fixtures.py) behind Playwright's request routing for this
page only; the offline guard still aborts and reports any other request that leaves the site.

Covered: config only; the GGUF listing and a header read by Range (bytes requested against the file's size);
split files; a direct link; 404, 401, a CORS failure, no network, a stalled host; a header that claims a huge size;
the state in the URL; the last good state kept after a failure; nothing fetched before the reader asks.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from urllib.parse import parse_qs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import remote_fixtures as rf  # noqa: E402

from enginelab import remote  # noqa: E402

from .harness import url_search  # noqa: E402

PAGE = "figures/calculator.html"
SITE = rf.site()
HOSTS = re.compile(r"^https://(huggingface\.co|files\.example\.org)/")


class Hub:
    """Answers the fixture URLs; records every request (url, Range header, bytes sent). `cors_off`: URLs answered
    without Access-Control-Allow-Origin; `stall`: URLs never answered."""

    def __init__(self, page, cors_off=(), stall=()):
        self.requests = []
        self.cors_off, self.stall = set(cors_off), set(stall)
        self.stalled = []
        self.offline = False  # set with context.set_offline(True): the router answers nothing either
        page.route(HOSTS, self.handle)

    def handle(self, route):
        req = route.request
        url = req.url
        if self.offline:
            route.abort("internetdisconnected")
            return
        if url in self.cors_off:  # allowed for another site only (a missing header is filled in by the router)
            cors = {"Access-Control-Allow-Origin": "https://somewhere-else.example"}
        else:
            cors = {
                "Access-Control-Allow-Origin": "*",
                "Access-Control-Expose-Headers": "Content-Range, Content-Length, Accept-Ranges",
            }
        if req.method == "OPTIONS":  # a preflight, should the browser send one for the Range header
            route.fulfill(status=204, headers={**cors, "Access-Control-Allow-Headers": "Range"})
            return
        if url in self.stall:
            self.stalled.append(route)  # never answered: the page's timeout must fire
            return
        rng = req.headers.get("range")
        start = end = None
        if rng:
            a, b = rng.removeprefix("bytes=").split("-")
            start, end = int(a), int(b)
        entry = SITE.get(url, (404, b"Entry not found", None))
        status, body, total = rf.serve(entry, start, end, None)
        headers = dict(cors)
        if status == 206:
            headers["Content-Range"] = f"bytes {start}-{start + len(body) - 1}/{total}"
            headers["Accept-Ranges"] = "bytes"
        self.requests.append((url, rng, len(body) if req.method == "GET" and status < 400 else 0))
        route.fulfill(status=status, body=body, headers=headers)

    def ranged(self, name):
        return [(r, n) for u, r, n in self.requests if u.endswith(name)]

    def sent(self) -> int:
        return sum(n for _u, _r, n in self.requests)


def wait_remote(page, timeout_ms=30_000):
    """Until the panel's status line says the read is over (a summary, or an error)."""
    page.wait_for_function(
        """() => { const s = document.getElementById('remote-status');
                   return s && (s.classList.contains('remote-error') || / from the (config\\.json|GGUF header) of /.test(s.textContent)); }""",
        timeout=timeout_ms,
    )
    return page.locator("#remote-status").text_content()


def query(page) -> dict:
    return {k: v[0] for k, v in parse_qs(url_search(page)).items()}


def read_from_panel(page, text):
    if page.locator("#own-model").get_attribute("open") is None:
        page.locator("#own-model summary").click()
    page.fill("#remote-input", text)
    page.evaluate(
        "() => { const s = document.getElementById('remote-status'); s.textContent = ''; s.className = 'remote-status'; }"
    )
    page.click("#remote-read")
    return wait_remote(page)


def test_nothing_leaves_the_page_until_the_reader_asks_and_a_repo_with_config_only(page_at, page, guard):
    hub = Hub(page)
    page = page_at(PAGE)
    assert hub.requests == []  # offline by default
    page.locator("#own-model summary").click()
    privacy = page.locator("#remote-privacy")
    assert privacy.is_visible() and "Offline until you press Read" in privacy.text_content()
    text = read_from_panel(page, rf.CONFIG_REPO)
    assert "from the config.json of lab-test/Tiny-Llama" in text, text
    assert [u for u, _r, _n in hub.requests] == [remote.tree_url(rf.CONFIG_REPO), remote.config_url(rf.CONFIG_REPO)]
    assert query(page) == {"hf": rf.CONFIG_REPO}
    assert page.locator("#remote-files").is_hidden()  # no GGUF files in that repo
    assert page.locator("#f-quant").is_visible()  # a config's model takes the page's quantization
    assert page.locator("[data-readout='vram_gb']").get_attribute("data-value") not in (None, "", "None")
    # a shared link re-reads it
    hub.requests.clear()
    page = page_at(f"{PAGE}?hf={rf.CONFIG_REPO}")
    assert "from the config.json" in wait_remote(page)
    assert len(hub.requests) == 2


def test_gguf_listing_and_a_header_read_by_range(page_at, page, guard):
    guard.allow_problems = True  # the repo's missing config.json is a 404 the browser logs
    hub = Hub(page)
    page = page_at(PAGE)
    text = read_from_panel(page, rf.REPO)
    # the repo has no config.json: its Q4_K_M file's header is read, by ranges, and named in the link
    assert query(page) == {"hf": rf.REPO, "file": rf.FILE}
    ranges = hub.ranged(rf.FILE)
    assert ranges[0][0] == "bytes=0-1048575" and len(ranges) >= 2
    header, sent = len(rf.tiny_header()), sum(n for _r, n in ranges)
    assert header <= sent <= 2 * header  # the header and no more than one slice past it
    status = page.locator("#remote-status")
    assert int(status.get_attribute("data-value")) == hub.sent()  # all it read: the list and the header
    assert int(status.get_attribute("data-file-size")) == rf.TINY_SIZE
    assert "of a 4.9 GB file" in text and "from the GGUF header of" in text, text
    # the listing: every GGUF model with its size (a split model as one entry), no vision projector
    labels = page.locator("#remote-file option").all_text_contents()
    assert any(rf.FILE in lab and "4.9 GB" in lab for lab in labels)
    assert any(rf.SPLIT.format(1) in lab and "3 parts" in lab for lab in labels)
    assert not any("mmproj" in lab for lab in labels)
    assert page.locator("#f-quant").is_hidden()  # the file's own types
    # picking another file reads its header
    page.select_option("#remote-file", "tiny-llama-Q8_0.gguf")
    page.wait_for_function("() => location.search.includes('tiny-llama-Q8_0.gguf')")
    assert query(page)["file"] == "tiny-llama-Q8_0.gguf"
    assert hub.ranged("tiny-llama-Q8_0.gguf")
    assert not guard.blocked and all("huggingface.co" in p or "127.0.0.1" in p for p in guard.bad_status)


def test_split_files_and_a_direct_link(page_at, page, guard):
    hub = Hub(page)  # a named file: no config.json is asked for, so no 404
    page = page_at(f"{PAGE}?hf={rf.REPO}&file={rf.SPLIT.format(1)}")
    text = wait_remote(page)
    assert "from the GGUF header of" in text, text
    for i in range(3):
        assert hub.ranged(rf.SPLIT.format(i + 1)), f"part {i + 1} not read"
    assert int(page.locator("#remote-status").get_attribute("data-file-size")) == sum(rf.SPLIT_SIZES)
    assert "22.5 GB" in text
    hub.requests.clear()
    page = page_at(f"{PAGE}?url={rf.HOST}/models/{rf.FILE}")
    text = wait_remote(page)
    assert "from the GGUF header of https://files.example.org/models/" in text, text
    assert query(page) == {"url": f"{rf.HOST}/models/{rf.FILE}"}
    assert page.locator("#remote-input").input_value() == f"{rf.HOST}/models/{rf.FILE}"


def _keeps_last_state(page, before):
    assert query(page) == before  # the settings, and the link, are the last good ones
    assert page.locator("[data-readout='vram_gb']").get_attribute("data-value") not in (None, "", "None")


def test_not_found_and_gated(page_at, page, guard):
    guard.allow_problems = True  # the 404 and 401 answers are logged by the browser
    hub = Hub(page)
    page = page_at(f"{PAGE}?model=qwen2.5-7b")
    text = read_from_panel(page, "lab-test/No-Such-Repo")
    assert "Not found" in text and "HTTP 404" in text, text
    _keeps_last_state(page, {"model": "qwen2.5-7b"})
    text = read_from_panel(page, rf.GATED_REPO)
    assert "asks for a login (HTTP 401)" in text and "never sends credentials" in text, text
    _keeps_last_state(page, {"model": "qwen2.5-7b"})
    assert not guard.blocked
    # a shared link that cannot be read says so in the figure too
    page = page_at(f"{PAGE}?hf=lab-test/No-Such-Repo")
    wait_remote(page)
    alert = page.locator("#figure .alert-error")
    assert "Not found" in alert.text_content()
    assert len(hub.requests) >= 2


def test_a_cors_failure_and_no_network(page_at, page, context, guard):
    guard.allow_problems = True  # the browser logs the blocked read
    url = f"{rf.HOST}/models/{rf.FILE}"
    hub = Hub(page, cors_off=[url])
    page = page_at(PAGE)
    text = read_from_panel(page, url)
    assert "does not let other sites read its files (CORS)" in text, text
    _keeps_last_state(page, {})
    context.set_offline(True)
    hub.offline = True
    text = read_from_panel(page, rf.REPO)
    assert "You are offline" in text, text
    _keeps_last_state(page, {})
    context.set_offline(False)
    assert not guard.blocked


def test_a_stalled_host_times_out(page_at, page, guard):
    guard.allow_problems = True
    hub = Hub(page, stall=[remote.tree_url(rf.REPO)])
    page = page_at(PAGE)
    page.evaluate("window.enginelab_remote_timeout_ms = 1500")
    text = read_from_panel(page, rf.REPO)
    assert "did not answer within" in text, text
    _keeps_last_state(page, {})
    for r in hub.stalled:
        r.abort()


def test_a_header_claiming_a_huge_size_is_refused(page_at, page, guard):
    hub = Hub(page)
    page = page_at(PAGE)
    text = read_from_panel(page, f"{rf.HOST}/models/huge.gguf")
    assert "real headers are a few MB" in text and "hostile" in text, text
    assert hub.sent() <= remote.MAX_FIRST_SLICE and len(hub.requests) == 1
    _keeps_last_state(page, {})


def test_bad_input_is_explained_and_never_requested(page_at, page, guard):
    hub = Hub(page)
    page = page_at(PAGE)
    text = read_from_panel(page, "<img src=x onerror=alert(1)>/x")
    assert "is not a Hugging Face repo id" in text
    assert page.locator("#remote-status img").count() == 0  # shown as text
    assert hub.requests == []
