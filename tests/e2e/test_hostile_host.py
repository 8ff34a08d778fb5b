"""A hostile file host for `?url=` reads (issue 33), in Chromium: a real https server on loopback
(tests/e2e/hostile_host.py) that ignores ranges, lies in Content-Range, redirects to another origin, cuts its
answer short, drips a byte a second, or claims a 50 GB Content-Length.

Each time the page reads no more than it asked for (and never past remote.MAX_HEADER_BYTES), says what the host
did in plain words, keeps the last good state (the URL's settings and the figure's numbers) and stays responsive
(a control changed after the read, or during it, is answered). One page and one server serve every test here: a
Pyodide start costs seconds, so the tests run in order on the same page, each from where the last one left it.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import remote_fixtures as rf  # noqa: E402

from enginelab import remote  # noqa: E402

from .harness import Guard, wait_ready  # noqa: E402
from .hostile_host import CLAIM, CUT_AFTER, HostileHost  # noqa: E402
from .test_remote_model import query, read_from_panel, wait_remote  # noqa: E402

PAGE = "figures/calculator.html?model=qwen2.5-7b"
TIMEOUT_MS = 2000  # the glue's answer, stall and slow-body limits for these tests (remote.TIMEOUT_S etc. else)


def _socket_buffers() -> int:
    """What may sit in one connection's buffers when the page stops a body: the kernel's largest TCP receive and
    send buffers (autotuning grows them on a slow reader: 32 MiB + 4 MiB on some Linux hosts) plus the browser's
    own pipe (a few MiB)."""
    most = 0
    for name in ("tcp_rmem", "tcp_wmem"):
        try:
            most += int(Path(f"/proc/sys/net/ipv4/{name}").read_text().split()[2])
        except (OSError, IndexError, ValueError):
            most += 8 << 20
    return max(most, 8 << 20) + (4 << 20)


BUFFERS = _socket_buffers()


@pytest.fixture(scope="module")
def hostile(browser, site):
    host = HostileHost()
    ctx = browser.new_context(ignore_https_errors=True)  # the host's certificate is self-signed
    guard = Guard(ctx, site.origin, also=(host.origin, host.other_origin))
    page = ctx.new_page()
    page.goto(site.url(PAGE))
    wait_ready(page)
    page.evaluate(f"window.enginelab_remote_timeout_ms = {TIMEOUT_MS}")
    try:
        yield SimpleNamespace(page=page, host=host, guard=guard)
    finally:
        ctx.close()
        host.close()


def bytes_read(page) -> int:
    return int(page.locator("#remote-status").get_attribute("data-value"))


def responsive(page):
    """A control changed now is answered: the KV cache, and so the memory readout, follows n_ctx."""
    ctl = page.locator("#f-ctx")
    new = "4096" if ctl.input_value() != "4096" else "8192"
    before = page.locator("[data-readout='vram_gb']").get_attribute("data-value")
    t0 = time.monotonic()
    ctl.fill(new)
    page.wait_for_function(
        "v => document.querySelector(\"[data-readout='vram_gb']\").dataset.value !== v", arg=before, timeout=5000
    )
    return time.monotonic() - t0


def refused(h, path, *words):
    """Read path from the panel: the read fails with these words, the last good state stays, the page answers."""
    page = h.page
    before = query(page)
    vram = page.locator("[data-readout='vram_gb']").get_attribute("data-value")
    text = read_from_panel(page, path if path.startswith("https://") else h.host.url(path))
    for w in words:
        assert w in text, (w, text)
    assert query(page) == before  # the settings and the link are the last good ones
    assert page.locator("[data-readout='vram_gb']").get_attribute("data-value") == vram
    assert bytes_read(page) <= remote.MAX_HEADER_BYTES
    responsive(page)
    assert not h.guard.blocked and not h.guard.page_errors
    return text


def test_a_host_that_answers_ranges_with_200_and_the_whole_file(hostile):
    page, host = hostile.page, hostile.host
    url = host.url("/ignores-range.gguf")
    text = read_from_panel(page, url)
    assert "from the GGUF header of" in text and "ignores byte ranges" in text, text
    assert query(page) == {"model": "remote", "url": url} or query(page).get("url") == url
    # each answer started at byte 0 and was read up to the bytes asked for: 1 MiB, then the 1.9 MB header (or
    # twice the first slice), never the 4.9 GB the file weighs
    header = len(rf.tiny_header())
    asked = host.requests("/ignores-range.gguf")
    assert asked[0] == f"bytes=0-{remote.MAX_FIRST_SLICE - 1}" and len(asked) == 2, asked
    got = bytes_read(page)
    assert remote.MAX_FIRST_SLICE + header <= got <= remote.MAX_FIRST_SLICE + 2 * header, got
    assert host.sent("/ignores-range.gguf") <= got + 2 * BUFFERS  # the rest stayed on the server
    responsive(page)


def test_a_wrong_content_range_is_refused(hostile):
    refused(
        hostile,
        "/wrong-range.gguf",
        "answered the request for bytes 0-1,048,575 (1.00 MiB) with bytes from 4,096 on",
        "cannot be read safely",
    )
    assert bytes_read(hostile.page) == 0  # the body was not read


def test_a_redirect_to_another_origin(hostile):
    page, host = hostile.page, hostile.host
    # to an origin that allows it (as the Hub's file links do, to its CDN): read as usual
    text = read_from_panel(page, host.url("/redirect-ok.gguf"))
    assert "from the GGUF header of" in text, text
    assert host.requests("/cdn/x.gguf")
    # to one that does not: the page says the host sent it elsewhere, rather than blaming the host's CORS
    refused(hostile, "/redirect.gguf", "sent the request on to another address (an HTTP redirect)")
    assert query(page)["url"] == host.url("/redirect-ok.gguf")  # the last good model stays


def test_a_host_that_cuts_its_answer_short(hostile):
    refused(hostile, "/cut-body.gguf", "closed the connection before sending all of the 1,048,576 bytes it announced")
    assert hostile.host.sent("/cut-body.gguf") == CUT_AFTER
    refused(hostile, "/cut-head.gguf", "broke off before its answer began")


def test_a_host_that_drips_a_byte_a_second(hostile):
    page = hostile.page
    before = query(page)
    page.fill("#remote-input", hostile.host.url("/drip.gguf"))
    page.evaluate("() => { const s = document.getElementById('remote-status'); s.textContent = ''; }")
    t0 = time.monotonic()
    page.click("#remote-read")
    page.wait_for_function(
        "() => /Asking for the header of/.test(document.getElementById('remote-status').textContent)"
    )
    # the page answers while the host drips
    assert responsive(page) < 1.5
    assert "remote-error" not in (page.locator("#remote-status").get_attribute("class") or "")
    changed = query(page)
    assert changed != before
    text = wait_remote(page)
    took = time.monotonic() - t0
    assert "bytes a second" in text and "would take" in text and "stopped" in text, text
    assert took < TIMEOUT_MS / 1000 + 4, took  # stopped after the grace time, not after 1 MiB of drips
    assert query(page) == changed  # the state the reader made meanwhile is the one kept
    assert bytes_read(page) < 100


def test_a_host_that_claims_a_50_gb_content_length(hostile):
    page, host = hostile.page, hostile.host
    # a 206 for 1 MiB that announces 50 GB: refused before its body is read, the connection closed
    refused(hostile, "/claims-50gb.gguf", f"with {CLAIM:,} bytes (53.7 GB, its Content-Length)")
    assert bytes_read(page) == 0
    # a config.json that announces 50 GB: refused before its body is read
    refused(hostile, "/claims-50gb.json", f"announces {CLAIM:,} bytes")
    assert bytes_read(page) == 0
    time.sleep(0.5)  # the server notices the closed connections
    assert host.sent("/claims-50gb.gguf") + host.sent("/claims-50gb.json") <= 2 * BUFFERS


def test_an_hf_read_sent_on_to_the_hostile_host(hostile):
    # ?hf= reads go through the same reader: the Hub's file link redirects (as it does, to its CDN) to the host,
    # whose Content-Range is wrong
    page, host = hostile.page, hostile.host
    repo, name = "lab-test/Hostile-GGUF", "hostile-Q4_K_M.gguf"
    cors = {"Access-Control-Allow-Origin": "*"}

    def hub(route):
        url = route.request.url
        if url == remote.tree_url(repo):
            route.fulfill(status=200, body=rf.tree({name: 4_920_000_000}), headers=cors)
        elif url == remote.file_url(repo, name):
            route.fulfill(status=302, headers={**cors, "Location": host.url("/wrong-range.gguf")})
        else:
            route.fulfill(status=404, body=b"Entry not found", headers=cors)

    page.route(re.compile(r"^https://huggingface\.co/"), hub)
    try:
        refused(
            hostile,
            f"https://huggingface.co/{repo}/blob/main/{name}",
            f"{name}: 127.0.0.1 answered the request for bytes 0-1,048,575",  # the host it was sent on to
            "cannot be read safely",
        )
    finally:
        page.unroute(re.compile(r"^https://huggingface\.co/"))
    assert host.requests("/wrong-range.gguf")[-1] == f"bytes=0-{remote.MAX_FIRST_SLICE - 1}"
