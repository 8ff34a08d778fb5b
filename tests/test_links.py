"""Every link in the built site resolves, and every link that carries a figure's state is one its Spec accepts.

The site is built into a private folder (build.py's own build, pre-rendered pages and all), then every page is
crawled: each href, src and data-src must name a file in the site (a folder means its index.html), a #fragment
must name an id in the page it points to, and a link to a figure page with a query (a "Try this" link, a state
link between figures, a preset's data-query) must pass that figure's Spec.from_query with no message at all.
Relative imports in the site's scripts and stylesheets must resolve too. Links to other sites are not fetched.
"""

from __future__ import annotations

import html.parser
import importlib.util
import os
import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from enginelab.figures import REGISTRY

ROOT = Path(__file__).resolve().parents[1]


class _Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.refs: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k == "id" and v:
                self.ids.add(v)
            if k in ("href", "src", "data-src") and v:
                self.refs.append((tag, k, v))
            if k == "data-query" and v is not None:
                self.refs.append((tag, k, v))


@pytest.fixture(scope="module")
def site():
    spec = importlib.util.spec_from_file_location("enginelab_build_links", ROOT / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    out = ROOT / ".cache" / f"linkcheck-{os.getpid()}"
    shutil.rmtree(out, ignore_errors=True)
    build.build(out)
    pages = {}
    for f in sorted(out.rglob("*.html")):
        p = _Page()
        p.feed(f.read_text())
        pages[f] = p
    yield out, pages
    shutil.rmtree(out, ignore_errors=True)


def _figure_of(path: Path, out: Path) -> str | None:
    rel = path.relative_to(out).as_posix()
    if rel == "calculator.html":
        return "calculator"
    m = re.fullmatch(r"figures/([\w-]+)\.html", rel)
    return m.group(1) if m and m.group(1) in REGISTRY else None


def test_every_href_and_src_in_the_site_resolves(site):
    out, pages = site
    broken, checked = [], 0
    for page, parsed in pages.items():
        for tag, attr, ref in parsed.refs:
            if attr == "data-query":
                continue
            u = urlsplit(ref)
            if u.scheme in ("http", "https", "mailto", "data", "blob", "javascript") or ref.startswith("//"):
                continue  # another site (never fetched: build.py's offline check), or not a location
            checked += 1
            target = (
                page
                if not u.path
                else (out / unquote(u.path).lstrip("/") if u.path.startswith("/") else (page.parent / unquote(u.path)))
            )
            target = Path(os.path.normpath(target))
            if target.is_dir():
                target = target / "index.html"
            where = f"{page.relative_to(out)}: <{tag} {attr}={ref!r}>"
            if not target.is_file():
                broken.append(f"{where} -> {target.relative_to(out) if target.is_relative_to(out) else target}")
            elif u.fragment and target.suffix == ".html" and u.fragment not in pages[target].ids:
                broken.append(f"{where}: no id {u.fragment!r} in {target.relative_to(out)}")
    assert checked > 200, checked
    assert not broken, "\n".join(broken)


def test_every_state_link_passes_its_figures_spec(site):
    out, pages = site
    bad, checked = [], 0
    for page, parsed in pages.items():
        for tag, attr, ref in parsed.refs:
            u = urlsplit(ref)
            if attr == "data-query":  # a preset button: the query of the page it sits in
                fid, query = _figure_of(page, out), ref
            else:
                if u.scheme or not u.path or not u.query:
                    continue
                fid = _figure_of(Path(os.path.normpath(page.parent / unquote(u.path))), out)
                query = u.query
            if fid is None:
                continue
            checked += 1
            _state, messages = REGISTRY[fid].SPEC.from_query("?" + query.lstrip("?"))
            if messages:
                bad.append(f"{page.relative_to(out)}: <{tag} {attr}={ref!r}> -> {fid}: {messages}")
    assert checked >= 20, checked
    assert not bad, "\n".join(bad)


_JS_IMPORT = re.compile(r"""(?:\bimport\s*\(?\s*|\bfrom\s*)["'](\.{1,2}/[^"']+)["']""")
_CSS_IMPORT = re.compile(r"""@import\s+(?:url\()?\s*["']([^"')]+)["']""")


def test_relative_imports_in_scripts_and_stylesheets_resolve(site):
    out, _pages = site
    missing = []
    for f in sorted((out / "assets").rglob("*")):
        if f.suffix not in (".js", ".css"):
            continue
        pattern = _JS_IMPORT if f.suffix == ".js" else _CSS_IMPORT
        for ref in pattern.findall(f.read_text()):
            if not (f.parent / ref).resolve().is_file():
                missing.append(f"{f.relative_to(out)}: {ref}")
    assert not missing, missing
