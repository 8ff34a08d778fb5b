"""Shared browser-test machinery (used by conftest.py and by `build.py bench`).

- `Site`: dist/ served on 127.0.0.1 on a free port, from a thread (or any folder: a test's own host pages, served
  from a second origin).
- `launch(playwright)`: the Chromium that `build.py test` found (ENGINELAB_CHROMIUM), headless, with the flags
  this machine needs; no fallback and no skipping: a missing browser is a failure.
- `Guard`: per browser context, aborts every request whose origin is not the site's (or one the test serves
  itself) and records it, and
  collects console errors, page errors and failed requests, so a test can assert there were none.
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "dist"
READY_TIMEOUT_MS = 60_000

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-dev-shm-usage",
]


def _build_module():
    spec = importlib.util.spec_from_file_location("enginelab_build", ROOT / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Site:
    def __init__(self, directory: Path = DIST, check_built: bool = True, port: int = 0):
        if check_built and not (directory / "pyodide" / "pyodide.mjs").exists():
            raise RuntimeError(f"{directory} is not built: run `python3 build.py` (or `python3 build.py test`)")
        self.directory = directory
        self.server = _build_module().make_server(directory, port, quiet=True)
        self.port = self.server.server_address[1]
        self.origin = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path_and_query: str = "") -> str:
        return f"{self.origin}/{path_and_query.lstrip('/')}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def chromium_path() -> str:
    p = os.environ.get("ENGINELAB_CHROMIUM")
    if p and Path(p).exists():
        return p
    try:
        p = _build_module().find_chromium(install=False)
    except Exception:  # pragma: no cover
        p = None
    if not p:
        raise RuntimeError(
            "No Chromium found: run the tests through `python3 build.py test`, which installs one, "
            "or set ENGINELAB_CHROMIUM to a Chromium binary. Browser tests are never skipped."
        )
    return p


def launch(playwright, **kw):
    return playwright.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS, **kw)


class Guard:
    """Offline enforcement and error collection for one browser context."""

    def __init__(self, context, origin: str, also: tuple[str, ...] = ()):
        self.origin = origin
        self.allowed = {origin, *also}  # `also`: other local origins a test serves itself (a host page's)
        self.blocked: list[str] = []
        self.console_errors: list[str] = []
        self.page_errors: list[str] = []
        self.failed: list[str] = []
        self.bad_status: list[str] = []
        # only what is not ours goes to _route: matched by Playwright's driver, so a same-origin request (a page's
        # hundreds, a service worker's install) is never held up for a round trip to this process
        ours = "|".join(re.escape(o) + r"(?:[/?#]|$)" for o in sorted(self.allowed))
        context.route(re.compile(rf"^(?!data:|blob:|{ours})"), self._route)
        context.on("page", self.watch)
        for p in context.pages:
            self.watch(p)

    def _route(self, route):
        """A request off the site (the route's pattern lets nothing else through): recorded and stopped."""
        self.blocked.append(route.request.url)
        route.abort()

    def watch(self, page):
        page.on(
            "console", lambda m: self.console_errors.append(f"{m.text} @ {m.location}") if m.type == "error" else None
        )
        page.on("pageerror", lambda e: self.page_errors.append(str(e)))
        page.on("requestfailed", lambda r: self.failed.append(f"{r.url}: {r.failure}"))
        page.on("response", lambda r: self.bad_status.append(f"{r.status} {r.url}") if r.status >= 400 else None)

    def problems(self) -> dict:
        out = {
            "blocked off-site requests": self.blocked,
            "console errors": self.console_errors,
            "page errors": self.page_errors,
            "failed requests": self.failed,
            "HTTP errors": self.bad_status,
        }
        return {k: v for k, v in out.items() if v}

    def clear(self):
        for lst in (self.blocked, self.console_errors, self.page_errors, self.failed, self.bad_status):
            lst.clear()


def wait_ready(page, timeout_ms: int = READY_TIMEOUT_MS):
    """Wait until <html data-ready> is "true"; fail at once with the reason on "error"."""
    page.wait_for_function("() => document.documentElement.dataset.ready !== 'false'", timeout=timeout_ms)
    state = page.evaluate("document.documentElement.dataset.ready")
    if state != "true":
        reason = page.evaluate("document.querySelector('#status')?.textContent || ''")
        raise AssertionError(f"page did not become ready (data-ready={state!r}): {reason.strip()}")


def url_search(page) -> str:
    """The query string of a page's (or frame's) URL, without "?", once live.js has written it (it writes the
    state's query once the reader pauses: <html data-url-pending> until then)."""
    page.wait_for_function("!document.documentElement.hasAttribute('data-url-pending')")
    return page.evaluate("location.search")[1:]


def url_query(page, keep_blank_values: bool = False) -> dict:
    """url_search as a dict."""
    from urllib.parse import parse_qsl

    return dict(parse_qsl(url_search(page), keep_blank_values=keep_blank_values))


def readouts(page) -> dict:
    """{name: data-value} of every data-readout on the page."""
    return page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('[data-readout]')]
        .map(e => [e.dataset.readout, e.dataset.value]))""")


def same_readouts(a: dict, b: dict) -> bool:
    """Two pages' readouts are the same: equal keys, texts equal or numbers within 1e-12 relative. A page that
    opens on its pre-rendered state shows CPython's numbers (build.py computed them) until Python's first render
    in the browser; Pyodide's libm (pow, exp) may differ from glibc's in the last bit."""
    if a.keys() != b.keys():
        return False
    for k, x in a.items():
        y = b[k]
        if x == y:
            continue
        try:
            fx, fy = float(x), float(y)
        except (TypeError, ValueError):
            return False
        if abs(fx - fy) > 1e-12 * max(abs(fx), abs(fy)):
            return False
    return True
