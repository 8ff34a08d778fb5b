#!/usr/bin/env python3
"""enginelab's one entry point (standard library only).

    python3 build.py                  build dist/ (the static site)
    python3 build.py serve [--port N] build, then serve dist/ on 127.0.0.1 (default port 8000)
    python3 build.py test             set up .venv + a Chromium, lint (ruff), build, run pytest (unit + browser)
    python3 build.py bench            measure load time, interaction latency and dist size

What a build does, in order:
1. Vendor the browser runtime: the Pyodide core and PyScript from npm, micropip and packaging from PyPI.
   Each is pinned below by version and sha256, downloaded once into .cache/vendor/, verified, and copied
   into dist/. Pyodide's lock file is rewritten to list only the packages we ship, with the hashes of the
   files we ship (PyPI's wheels are not byte-identical to the ones Pyodide's lock was made for).
2. Build our wheel from pylib/ with zipfile (deterministic: fixed timestamps, sorted entries).
3. Render every figure page from site/templates/figure.html, pre-rendered for the figure's default
   state by the same Python render functions the browser runs.
4. Check that nothing in dist/ would make a browser fetch anything outside the site.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import http.server
import json
import os
import re
import shutil
import socketserver
import string
import subprocess
import sys
import tarfile
import time
import tomllib
import urllib.request
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
PYLIB = ROOT / "pylib"
SITE = ROOT / "site"
DIST = ROOT / "dist"
CACHE = ROOT / ".cache" / "vendor"
VENV = ROOT / ".venv"

# ---------------------------------------------------------------------------------------------------------
# 1. Vendored runtime: pinned by version and sha256 of the registry artifact.
# ---------------------------------------------------------------------------------------------------------
NPM_PINS = {
    # name: (version, sha256 of the npm tarball)
    "pyodide": ("314.0.7", "66b7949e5a0cba2250b586d7e368bf12fb482800748d182c4618254b685ffaa0"),
    "@pyscript/core": ("0.7.31", "b2ca1a0c0956aebd990a7c8524cca1eb061444a8319a7264d2f31ef30bea276a"),
}
PYPI_PINS = {
    # name: (version, wheel file name, sha256 of the wheel on PyPI)
    "micropip": (
        "0.11.1",
        "micropip-0.11.1-py3-none-any.whl",
        "768de165adb8e66906039d8fec4127a57f522dfdf8e6fbff877a4616941ecfd3",
    ),
    "packaging": (
        "26.1",
        "packaging-26.1-py3-none-any.whl",
        "5d9c0669c6285e491e0ced2eee587eaf67b670d94a19e94e3984a481aba6802f",
    ),
}
# Files of the pyodide npm package that a page needs (the rest are docs, typings, source maps, a UMD
# build and a REPL page).
PYODIDE_FILES = ["pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip"]

# Remote URLs that appear inside vendored JavaScript, reviewed by hand for these pinned versions. None is
# fetched with our configuration: each is a default that our config overrides or a feature we do not use.
# Any other remote URL in a shipped file fails the build.
VENDOR_URL_ALLOW = {
    # Pyodide's default indexURL when loaded from its CDN; we import pyodide.mjs locally, so indexURL is
    # derived from its own location.
    "https://cdn.jsdelivr.net/pyodide/v${U}/full/": "pyodide default indexURL (unused: loaded locally)",
    # PyScript's default interpreters; our config sets "interpreter": ".../pyodide/pyodide.mjs".
    "https://cdn.jsdelivr.net/pyodide/v${e}/full/pyodide.mjs": "PyScript default Pyodide (overridden by config)",
    "https://cdn.jsdelivr.net/npm/@micropython/micropython-webassembly-pyscript@${e}/micropython.mjs": "PyScript default MicroPython (we use no mpy scripts)",
    # MicroPython's mip index, only used by <script type="mpy"> package installs.
    "https://micropython.org/pi/v2": "MicroPython mip index (no mpy scripts)",
    # Used to expand "github:" package specs; we list no packages.
    "https://raw.githubusercontent.com/": "github: package prefix (no packages listed)",
    # Links printed in error messages and docs, never fetched.
    "https://packages.pyscript.net/?q=${r}": "link in an error message",
    "https://docs.pyscript.net/latest/faq/#sharedarraybuffer": "link in an error message",
    "https://github.com/pyscript/pyscript/issues/257#issuecomment-1119595062": "link in a comment",
    "https://pyscript.github.io/docs/2023.11.2/user-guide/workers/": "link in an error message",
    "https://developer.mozilla.org/en-US/docs/Web/HTML/Element/{tag}": "link in an error message",
    # Emscripten's URL-scheme test and PyScript's 0.0.0.0 redirect helper: string comparisons, not fetches.
    "https://${t}": "emscripten scheme check",
    "http://0.0.0.0": "PyScript dev-server redirect check",
}
# XML namespaces look like URLs but are identifiers.
NAMESPACE_URLS = {
    "http://www.w3.org/2000/svg",
    "http://www.w3.org/1999/xlink",
    "http://www.w3.org/1999/xhtml",
    "http://www.w3.org/XML/1998/namespace",
    "http://www.w3.org/2000/xmlns/",
}


def log(*a):
    print("[build]", *a, flush=True)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _verified(path: Path, sha: str) -> bool:
    return path.exists() and sha256_file(path) == sha


def _npm_tarball_name(name: str, version: str) -> str:
    # npm pack names scoped packages "scope-name-version.tgz"
    return name.replace("@", "").replace("/", "-") + f"-{version}.tgz"


def fetch_npm(name: str, version: str, sha: str) -> Path:
    """The npm tarball of name@version in .cache/vendor, verified against sha."""
    CACHE.mkdir(parents=True, exist_ok=True)
    dest = CACHE / _npm_tarball_name(name, version)
    if _verified(dest, sha):
        return dest
    dest.unlink(missing_ok=True)
    if shutil.which("npm"):
        log(f"npm pack {name}@{version}")
        subprocess.run(
            ["npm", "pack", f"{name}@{version}", "--pack-destination", str(CACHE)],
            check=True,
            stdout=subprocess.DEVNULL,
            cwd=CACHE,
        )
    else:  # no Node.js here: the registry's tarball URL is what npm itself downloads
        base = name.split("/")[-1]
        url = f"https://registry.npmjs.org/{name}/-/{base}-{version}.tgz"
        log(f"download {url}")
        with urllib.request.urlopen(url, timeout=120) as r, open(dest, "wb") as f:
            shutil.copyfileobj(r, f)
    if not _verified(dest, sha):
        got = sha256_file(dest) if dest.exists() else "nothing"
        dest.unlink(missing_ok=True)
        raise SystemExit(f"build: {name}@{version}: sha256 mismatch (expected {sha}, got {got})")
    return dest


def fetch_wheel(name: str, version: str, filename: str, sha: str) -> Path:
    """A pure-Python wheel from PyPI for Pyodide's Python (3.14), verified against sha."""
    CACHE.mkdir(parents=True, exist_ok=True)
    dest = CACHE / filename
    if _verified(dest, sha):
        return dest
    dest.unlink(missing_ok=True)
    log(f"pip download {name}=={version}")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.14",
            "-d",
            str(CACHE),
            f"{name}=={version}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if r.returncode != 0 or not dest.exists():
        # pip missing or too old: ask PyPI's Simple API (PEP 691, JSON) for the file's URL
        log(f"pip download failed ({r.stderr.strip()[-200:]}); trying PyPI's Simple API")
        req = urllib.request.Request(
            f"https://pypi.org/simple/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
        )
        with urllib.request.urlopen(req, timeout=60) as resp:
            meta = json.load(resp)
        url = next(u["url"] for u in meta["files"] if u["filename"] == filename)
        with urllib.request.urlopen(url, timeout=120) as resp, open(dest, "wb") as f:
            shutil.copyfileobj(resp, f)
    if not _verified(dest, sha):
        got = sha256_file(dest) if dest.exists() else "nothing"
        dest.unlink(missing_ok=True)
        raise SystemExit(f"build: {filename}: sha256 mismatch (expected {sha}, got {got})")
    return dest


def _extract_member(tgz: Path, member: str, dest: Path):
    with tarfile.open(tgz, "r:gz") as t:
        f = t.extractfile(f"package/{member}")
        if f is None:
            raise SystemExit(f"build: {tgz.name} has no {member}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(f.read())


def vendor(out: Path) -> dict:
    """Copy the pinned runtime into out/pyodide and out/pyscript. Returns a manifest."""
    manifest = {}
    # Pyodide core
    ver, sha = NPM_PINS["pyodide"]
    tgz = fetch_npm("pyodide", ver, sha)
    pyo = out / "pyodide"
    for name in PYODIDE_FILES:
        _extract_member(tgz, name, pyo / name)
    with tarfile.open(tgz, "r:gz") as t:
        lock = json.load(t.extractfile("package/pyodide-lock.json"))
    manifest["pyodide"] = {"version": ver, "sha256": sha}
    # micropip + packaging wheels, and a lock that lists exactly what we ship
    shipped = {}
    for name, (pver, fname, psha) in PYPI_PINS.items():
        whl = fetch_wheel(name, pver, fname, psha)
        shutil.copy2(whl, pyo / fname)
        entry = dict(lock["packages"][name])
        if entry["version"] != pver or entry["file_name"] != fname:
            raise SystemExit(f"build: Pyodide {ver}'s lock expects {entry['file_name']}, we pin {fname}")
        entry["sha256"] = psha
        shipped[name] = entry
        manifest[name] = {"version": pver, "sha256": psha}
    lock["packages"] = shipped
    (pyo / "pyodide-lock.json").write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n")
    # PyScript: the built bundle (core.js loads its chunks lazily; py-editor/terminal chunks are never
    # requested by our pages but ship so core.js's import graph is whole)
    ver, sha = NPM_PINS["@pyscript/core"]
    tgz = fetch_npm("@pyscript/core", ver, sha)
    ps = out / "pyscript"
    with tarfile.open(tgz, "r:gz") as t:
        for m in t.getmembers():
            rel = m.name[len("package/") :]
            if m.isfile() and rel.startswith("dist/") and not rel.endswith(".map"):
                dest = ps / rel[len("dist/") :]
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(t.extractfile(m).read())
        lic = t.extractfile("package/LICENSE")
        (ps / "LICENSE").write_bytes(lic.read())
    manifest["@pyscript/core"] = {"version": ver, "sha256": sha}
    return manifest


# ---------------------------------------------------------------------------------------------------------
# 2. Our wheel, built from pylib/ with zipfile
# ---------------------------------------------------------------------------------------------------------
def project_meta() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


PACKAGE_DATA = ("*.csv", "*.json")  # data files shipped inside packages (read with importlib.resources)


def wheel_sources() -> list[tuple[str, Path]]:
    """(archive name, file) for every file the wheel ships, per pyproject's wheel packages list: modules,
    packages' modules and their data files (symlinks, as in pylib/enginelab/data/, are followed). A listed
    path that is missing fails the build: a wheel without one of its modules must never ship."""
    packages = project_meta()["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    out = []
    for entry in packages:
        p = ROOT / entry
        if p.is_file():
            out.append((p.name, p))
        elif p.is_dir():
            files = [f for f in p.rglob("*.py")]
            files += [f for pattern in PACKAGE_DATA for f in p.rglob(pattern)]
            for f in sorted(set(files)):
                if "__pycache__" in f.parts:
                    continue
                if not f.exists():
                    raise SystemExit(f"build: {f.relative_to(ROOT)} is a broken link (listed under {entry})")
                out.append((f.relative_to(p.parent).as_posix(), f))
        else:
            raise SystemExit(f"build: pyproject.toml lists {entry} for the wheel, and it does not exist")
    return out


def build_wheel(out_dir: Path) -> Path:
    meta = project_meta()["project"]
    name, version = meta["name"], meta["version"]
    fname = f"{name}-{version}-py3-none-any.whl"
    dist_info = f"{name}-{version}.dist-info"
    files = [(arc, f.read_bytes()) for arc, f in wheel_sources()]
    files.append(
        (
            f"{dist_info}/METADATA",
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: {meta['description']}\n"
            f"Requires-Python: {meta['requires-python']}\n".encode(),
        )
    )
    files.append(
        (
            f"{dist_info}/WHEEL",
            b"Wheel-Version: 1.0\nGenerator: enginelab build.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
    )
    return _write_wheel(out_dir / fname, files, dist_info)


def precompiled_wheel(wheel: Path, out_dir: Path) -> Path | None:
    """The wheel the pages load: our modules as bytecode for Pyodide's Python, so a page's imports skip
    compiling (about half their time). A wheel like the other (same data files and metadata, tag cp314-none-any),
    whose modules are unchecked hash-based .pyc files (PEP 552) in place of the .py ones; the runtime puts it on
    sys.path as it is (zipimport: nothing unpacked). Compiling needs Pyodide's own Python, run in Node
    (tools/precompile.mjs); without Node, None: the pages load the source wheel (slower to start, same result).
    Cached in .cache/pyc/ by the source wheel's hash."""
    node = shutil.which("node")
    if not node:
        log("no Node.js: pages will import the wheel's sources (no precompiled bytecode)")
        return None
    pyver = NPM_PINS["pyodide"][0]
    cache = ROOT / ".cache" / "pyc" / f"{sha256_file(wheel)[:24]}-pyodide{pyver}.zip"
    if not cache.exists():
        cache.parent.mkdir(parents=True, exist_ok=True)
        part = cache.with_suffix(f".{os.getpid()}.part")
        r = subprocess.run(
            [node, str(ROOT / "tools" / "precompile.mjs"), str(out_dir.parent / "pyodide"), str(wheel), str(part)],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0 or not part.exists():
            log(f"precompiling failed ({r.stderr.strip()[-300:]}); pages will import the wheel's sources")
            part.unlink(missing_ok=True)
            return None
        part.replace(cache)
    with zipfile.ZipFile(cache) as z:
        pyc = {n: z.read(n) for n in z.namelist()}
    meta = project_meta()["project"]
    name, version = meta["name"], meta["version"]
    dist_info = f"{name}-{version}.dist-info"
    files = []
    with zipfile.ZipFile(wheel) as src:
        for arc in src.namelist():
            if arc.startswith(dist_info + "/"):
                continue
            if arc.endswith(".py"):
                files.append((arc + "c", pyc[arc + "c"]))
            else:
                files.append((arc, src.read(arc)))
        files.append((f"{dist_info}/METADATA", src.read(f"{dist_info}/METADATA")))
    pyodide_python = json.loads((out_dir.parent / "pyodide" / "pyodide-lock.json").read_text())["info"]["python"]
    tag = "cp" + "".join(pyodide_python.split(".")[:2])  # cp314
    files.append(
        (
            f"{dist_info}/WHEEL",
            f"Wheel-Version: 1.0\nGenerator: enginelab build.py\nRoot-Is-Purelib: true\nTag: {tag}-none-any\n".encode(),
        )
    )
    return _write_wheel(out_dir / f"{name}-{version}-{tag}-none-any.whl", files, dist_info)


def _write_wheel(path: Path, files: list[tuple[str, bytes]], dist_info: str) -> Path:
    """A wheel (deterministic: fixed timestamps, entries in the order given) with its RECORD."""
    record = []
    for arc, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{arc},sha256={digest},{len(data)}")
    record.append(f"{dist_info}/RECORD,,")
    files = [*files, (f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode())]
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files:
            info = zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, data)
    return path


# ---------------------------------------------------------------------------------------------------------
# 3. Pages
# ---------------------------------------------------------------------------------------------------------
def _import_app():
    """Import enginelab from pylib/ (fresh, so a rebuild in one process sees edits)."""
    if str(PYLIB) not in sys.path:
        sys.path.insert(0, str(PYLIB))
    import enginelab.figures as figures

    return figures


def pyscript_config(root: str, wheel_name: str) -> dict:
    """PyScript config for a page whose path back to dist/ is `root` ('' or '../').

    `interpreter` resolves against the page, `files` against this config file, which sits beside the page.
    Without `interpreter`, PyScript silently loads Pyodide from a CDN. We list no `packages`: that would load
    micropip (about a second); our wheel is unpacked straight onto the path instead.
    """
    return {
        "interpreter": f"./{root}pyodide/pyodide.mjs",
        "files": {f"./{root}wheels/{wheel_name}": "./lib/*"},
    }


def render_page(fig, root: str, embed_path: str, wheel_name: str, page_name: str, build_id: str = "dev") -> str:
    """One figure page from the shared template, pre-rendered for fig's default state."""
    from enginelab import links, page

    tpl = string.Template((SITE / "templates" / "figure.html").read_text())
    figures_base = "" if root == "../" else "figures/"  # the path from this page to dist/figures/
    with links.figures_base(figures_base):
        parts = page.prerender(fig)
    return tpl.substitute(
        root=root,
        figure_id=fig.ID,
        title=html.escape(fig.TITLE),
        lede=parts["lede"],
        controls=parts["controls"],
        figure=parts["figure"],
        summary=parts["summary"],
        embed_path=html.escape(embed_path),
        figures_base=figures_base,
        wheel=wheel_name,
        build=build_id,
        figure_css=figure_css_link(fig.ID, root),
    )


def figure_css_link(fig_id: str, root: str) -> str:
    """A figure's own stylesheet, site/assets/fig-<id>.css, linked when it exists (else nothing)."""
    if (SITE / "assets" / f"fig-{fig_id}.css").is_file():
        return f'<link rel="stylesheet" href="{root}assets/fig-{html.escape(fig_id)}.css">'
    return ""


def build_pages(out: Path, wheel_name: str, build_id: str = "dev") -> list[str]:
    """Every figure page. No PyScript config: site/assets/runtime.js boots Pyodide itself (see live.js)."""
    figures = _import_app()
    written = []
    for fid, fig in figures.REGISTRY.items():
        targets = [(out / "figures" / f"{fid}.html", "../", f"./{fid}.html")]
        if fid == "calculator":
            # The calculator also has a top-level page (dist/index.html is the companion page).
            targets += [(out / "calculator.html", "", f"./figures/{fid}.html")]
        for path, root, embed in targets:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render_page(fig, root, embed, wheel_name, path.stem, build_id))
            written.append(path.relative_to(out).as_posix())
    return written


def build_companion_pages(out: Path) -> list[str]:
    """dist/index.html (the module's companion: prose, embedded figures, try-this links) and
    dist/figures/index.html (every figure with its embed snippet): static pages from
    site/templates/companion.html and enginelab.companion."""
    figures = _import_app()
    from enginelab import companion, links, page

    tpl = string.Template((SITE / "templates" / "companion.html").read_text())
    have = set(figures.REGISTRY)
    with links.figures_base("figures/"):  # the figures' own links, from the site root
        static = {fid: page.prerender(fig)["figure"] for fid, fig in figures.REGISTRY.items()}
    css = "".join(figure_css_link(fid, "") for fid in figures.REGISTRY)
    (out / "index.html").write_text(
        tpl.substitute(
            root="", title=html.escape(companion.TITLE), figure_css=css, body=companion.companion_body(have, static)
        )
    )
    entries = [(fid, fig.TITLE, getattr(fig, "LEDE", "")) for fid, fig in figures.REGISTRY.items()]
    (out / "figures").mkdir(parents=True, exist_ok=True)
    (out / "figures" / "index.html").write_text(
        tpl.substitute(root="../", title="All figures", figure_css="", body=companion.index_body(entries))
    )
    return ["index.html", "figures/index.html"]


def build_exercises_page(out: Path, wheel_name: str) -> list[str]:
    """dist/exercises.html: the module's exercises as py-editor cells (site/templates/exercises.html, cells from
    enginelab.exercises.render_cells). All cells share one PyScript worker, set up by site/py/exercises_worker.py.
    Its config adds "sync_main_only": the worker never calls into the page, so no SharedArrayBuffer (and no
    COOP/COEP headers) is needed and the page works from any static server."""
    tpl = SITE / "templates" / "exercises.html"
    if not tpl.exists():
        return []
    _import_app()
    from enginelab import exercises

    config = {**pyscript_config("", wheel_name), "sync_main_only": True}
    (out / "exercises.json").write_text(json.dumps(config, indent=1) + "\n")
    page = string.Template(tpl.read_text()).substitute(
        root="", config="./exercises.json", cells=exercises.render_cells()
    )
    (out / "exercises.html").write_text(page)
    return ["exercises.html"]


BARE_PAGE = """<!doctype html>
<html lang="en" data-ready="false"><head><meta charset="utf-8"><title>bare Pyodide boot</title></head>
<body><p id="out">Booting Pyodide…</p>
<script type="module">
// Used by `build.py bench` (the baseline for load_ratio: Pyodide alone, from the same vendored files) and by
// the browser tests (?micropip=1: micropip and packaging load offline from the rewritten lock, and micropip
// installs our wheel from a relative URL).
import { loadPyodide } from "./pyodide/pyodide.mjs";
const html = document.documentElement;
try {
  const t0 = performance.now();
  const py = await loadPyodide();
  let msg = py.runPython("import sys; sys.version.split()[0]");
  if (new URLSearchParams(location.search).has("micropip")) {
    await py.loadPackage("micropip");
    const whl = new URL("./wheels/$wheel", location.href).href;
    await py.runPythonAsync(`import micropip; await micropip.install("${whl}", deps=False)`);
    msg += " " + py.runPython("import enginelab, perf_model; enginelab.__name__");
  }
  html.dataset.bootMs = String(performance.now() - t0);
  document.getElementById("out").textContent = msg;
  html.dataset.ready = "true";
} catch (e) {
  document.getElementById("out").textContent = String(e);
  html.dataset.ready = "error";
}
</script></body></html>
"""


def copy_site(out: Path):
    for sub in ("assets", "py"):
        src = SITE / sub
        if src.is_dir():
            shutil.copytree(src, out / sub, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # the one script a host page includes to size embedded figures (its URL is part of every embed snippet)
    shutil.copy2(SITE / "embed.js", out / "embed.js")


def build_id(wheel: Path) -> str:
    """This build's id: a hash of everything its pages are made from (our wheel, site/, the vendored pins). It
    names the service worker's cache and the channel the figures of a page share a runtime on, so two builds
    never mix."""
    h = hashlib.sha256()
    h.update(wheel.read_bytes())
    for f in sorted(SITE.rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts:
            h.update(f.relative_to(SITE).as_posix().encode() + b"\0" + f.read_bytes())
    h.update(json.dumps([NPM_PINS, PYPI_PINS], sort_keys=True).encode())
    return h.hexdigest()[:16]


SW_SKIP = {"sw.js", "bench.json", "_bare.html"}  # never cached: the worker itself, bench output, the bench page


def write_service_worker(out: Path, version: str) -> Path:
    """dist/sw.js (from site/sw.js): the build's id and every file it caches, with its sha256."""
    files = {}
    for f in sorted(out.rglob("*")):
        rel = f.relative_to(out).as_posix()
        if f.is_file() and rel not in SW_SKIP:
            files[rel] = sha256_file(f)
    text = (SITE / "sw.js").read_text()
    text = text.replace("__VERSION__", version).replace("__FILES__", json.dumps(files, indent=0, sort_keys=True))
    (out / "sw.js").write_text(text)
    return out / "sw.js"


# ---------------------------------------------------------------------------------------------------------
# 4. Offline check
# ---------------------------------------------------------------------------------------------------------
URL_RE = re.compile(r"""(?:https?:)?//[A-Za-z0-9$\{][^\s"'`()<>\\]*""")
HTML_FETCH_ATTR = re.compile(
    r"""<(script|link|img|iframe|source|video|audio|embed|object|track|image|use)\b[^>]*?"""
    r"""\b(src|href|data|poster|srcset|xlink:href)\s*=\s*["']?\s*((?:https?:)?//[^"'\s>]+)""",
    re.I,
)
CSS_URL = re.compile(r"""(?:url\(\s*["']?|@import\s+["'])\s*((?:https?:)?//[^"')\s]+)""", re.I)
JS_IMPORT = re.compile(
    r"""(?:\bimport\s*\(?\s*|\bfrom\s*|\bfetch\s*\(\s*|importScripts\s*\(\s*)["'`]((?:https?:)?//[^"'`]+)"""
)


def offline_problems(out: Path) -> list[str]:
    """Every reference in out/ that would make a browser fetch something off-site."""
    problems = []
    for f in sorted(out.rglob("*")):
        if not f.is_file():
            continue
        rel = f.relative_to(out).as_posix()
        suffix = f.suffix.lower()
        if suffix in (".wasm", ".zip", ".whl", ".png", ".ico", ".woff2") or rel == "bench.json":
            continue
        text = f.read_text(errors="replace")
        vendored = rel.startswith(("pyodide/", "pyscript/"))
        if suffix in (".html", ".svg"):
            for m in HTML_FETCH_ATTR.finditer(text):
                problems.append(f"{rel}: <{m.group(1)} {m.group(2)}={m.group(3)}>")
            for m in CSS_URL.finditer(text):
                problems.append(f"{rel}: CSS url {m.group(1)}")
            for m in JS_IMPORT.finditer(text):
                problems.append(f"{rel}: script fetch {m.group(1)}")
        elif suffix == ".css":
            for m in CSS_URL.finditer(text):
                problems.append(f"{rel}: CSS url {m.group(1)}")
        elif suffix in (".js", ".mjs"):
            if vendored:
                for m in URL_RE.finditer(text):
                    url = m.group(0)
                    if not url.startswith("http"):
                        continue  # protocol-relative matches in minified code are regex/comment noise
                    url = url.rstrip("\\")
                    if url in NAMESPACE_URLS or url in VENDOR_URL_ALLOW or url in ("http://", "https://"):
                        continue
                    problems.append(f"{rel}: unreviewed remote URL {url}")
            else:
                for m in JS_IMPORT.finditer(text):
                    problems.append(f"{rel}: script fetch {m.group(1)}")
                for m in URL_RE.finditer(text):
                    if m.group(0).startswith("http") and m.group(0) not in NAMESPACE_URLS:
                        problems.append(f"{rel}: remote URL {m.group(0)}")
        elif suffix == ".json":
            try:
                data = json.loads(text)
            except ValueError:
                problems.append(f"{rel}: not valid JSON")
                continue
            if rel.endswith("pyodide-lock.json"):
                for name, p in data["packages"].items():
                    if "//" in p["file_name"]:
                        problems.append(f"{rel}: package {name} from {p['file_name']}")
                    if not (f.parent / p["file_name"]).exists():
                        problems.append(f"{rel}: package {name} lists {p['file_name']}, not shipped")
                    elif sha256_file(f.parent / p["file_name"]) != p["sha256"]:
                        problems.append(f"{rel}: package {name}: sha256 differs from the shipped file")
            elif isinstance(data, dict) and ("interpreter" in data or "files" in data):
                # a PyScript config: its interpreter must be local, or PyScript goes to a CDN
                interp = data.get("interpreter")
                if not interp or "//" in interp:
                    problems.append(f"{rel}: PyScript interpreter is {interp!r} (must be the local pyodide.mjs)")
                for src in (
                    list(data.get("files", {}))
                    + list(data.get("packages", []))
                    + list(data.get("js_modules", {}).get("main", {}))
                ):
                    if "//" in src or src.startswith(("http", "github:")):
                        problems.append(f"{rel}: PyScript fetches {src}")
                    elif not src.startswith("{") and not (f.parent / src).resolve().exists():
                        problems.append(f"{rel}: PyScript file {src} is missing")
        elif suffix == ".py":
            continue  # Python in the page fetches nothing by itself; pyodide.http use would show in tests
    return problems


# ---------------------------------------------------------------------------------------------------------
# build
# ---------------------------------------------------------------------------------------------------------
def build(out: Path = DIST) -> dict:
    t0 = time.perf_counter()
    # a private staging folder: two builds at once (two terminals, a test run beside `serve`) do not collide
    tmp = ROOT / ".cache" / f"build-{os.getpid()}"  # .cache/ is ignored by git, and on the same disk
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    manifest = vendor(tmp)
    wheel = build_wheel(tmp / "wheels")
    page_wheel = precompiled_wheel(wheel, tmp / "wheels") or wheel
    version = build_id(page_wheel)
    copy_site(tmp)
    pages = build_pages(tmp, page_wheel.name, version)
    pages += build_exercises_page(tmp, wheel.name)
    pages += build_companion_pages(tmp)
    (tmp / "_bare.html").write_text(BARE_PAGE.replace("$wheel", wheel.name))
    manifest["build"] = version
    manifest["wheel"] = {"file": wheel.name, "sha256": sha256_file(wheel)}
    manifest["page_wheel"] = {"file": page_wheel.name, "sha256": sha256_file(page_wheel)}
    manifest["pages"] = pages
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    write_service_worker(tmp, version)  # last: it lists every other file with its hash
    problems = offline_problems(tmp)
    if problems:
        for p in problems:
            print("offline check:", p, file=sys.stderr)
        raise SystemExit(f"build: {len(problems)} file(s) would fetch from outside the site (see above)")
    # swap in atomically-ish, keeping a previous bench.json
    old_bench = out / "bench.json"
    if old_bench.exists():
        shutil.copy2(old_bench, tmp / "bench.json")
    for _attempt in range(5):
        shutil.rmtree(out, ignore_errors=True)
        try:
            tmp.rename(out)
            break
        except OSError:  # another build swapped its dist/ in between: replace it again
            time.sleep(0.2)
    else:
        raise SystemExit(f"build: could not move {tmp.name} to {out.name}")
    log(f"built {out.relative_to(ROOT)}/ ({len(pages)} pages) in {time.perf_counter() - t0:.1f} s")
    return manifest


# ---------------------------------------------------------------------------------------------------------
# serve
# ---------------------------------------------------------------------------------------------------------
class _Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".mjs": "text/javascript",
        ".js": "text/javascript",
        ".wasm": "application/wasm",
        ".json": "application/json",
        ".whl": "application/zip",
        ".zip": "application/zip",
        ".svg": "image/svg+xml",
        ".py": "text/plain; charset=utf-8",
        ".css": "text/css",
    }
    quiet = False

    def log_message(self, fmt, *args):
        if not self.quiet:
            super().log_message(fmt, *args)

    def end_headers(self):
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def make_server(directory: Path = DIST, port: int = 0, quiet: bool = True) -> http.server.HTTPServer:
    """A static file server for directory on 127.0.0.1 (port 0: any free port). Call serve_forever()."""
    handler = type("Handler", (_Handler,), {"quiet": quiet})

    def factory(*a, **kw):
        return handler(*a, directory=str(directory), **kw)

    return _Server(("127.0.0.1", port), factory)


def serve(port: int):
    build()
    srv = make_server(DIST, port, quiet=False)
    url = f"http://127.0.0.1:{srv.server_address[1]}/"
    print(f"Serving dist/ at {url}  (calculator: {url}calculator.html)  Ctrl-C to stop", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


# ---------------------------------------------------------------------------------------------------------
# test: a venv with the test extras, a Chromium, a build, pytest
# ---------------------------------------------------------------------------------------------------------
def venv_python() -> Path:
    return VENV / "bin" / "python"


def ensure_venv() -> Path:
    py = venv_python()
    deps = project_meta()["project"]["optional-dependencies"]["test"]
    stamp = VENV / ".enginelab-test-deps"
    want = json.dumps(sorted(deps))
    if not py.exists():
        log("creating .venv")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    if not stamp.exists() or stamp.read_text() != want:
        log("installing test extras: " + " ".join(deps))
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *deps], check=True)
        stamp.write_text(want)
    # pylib/ on the venv's path: the same effect as an editable install, without a build backend
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "enginelab-dev.pth").write_text(f"{PYLIB}\n")
    return py


def find_chromium(install: bool = True) -> str | None:
    """Playwright's own Chromium if installed, else the system one; on Debian as root, install it."""
    env = os.environ.get("ENGINELAB_CHROMIUM")
    if env and Path(env).exists():
        return env
    pw = Path(os.environ.get("PLAYWRIGHT_BROWSERS_PATH", Path.home() / ".cache" / "ms-playwright"))
    for pattern in ("chromium-*/chrome-linux*/chrome", "chromium_headless_shell-*/chrome-*/chrome-headless-shell"):
        found = sorted(pw.glob(pattern))
        if found:
            return str(found[-1])
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        p = shutil.which(name)
        if p:
            return p
    if install and os.geteuid() == 0 and Path("/etc/debian_version").exists() and shutil.which("apt-get"):
        log("installing Debian's chromium (apt-get)")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], check=True, env=env, stdout=subprocess.DEVNULL)
        subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], check=True, env=env, stdout=subprocess.DEVNULL)
        return find_chromium(install=False)
    return None


LINT_PATHS = ["pylib", "site/py", "tests", "bench", "build.py"]


def lint(py: Path) -> int:
    """Ruff (configured in pyproject.toml): the linter, then the formatter in check mode."""
    rc = 0
    for args in (["check"], ["format", "--check"]):
        log("ruff " + " ".join(args))
        rc |= subprocess.run([str(py), "-m", "ruff", *args, *LINT_PATHS], cwd=ROOT).returncode
    return rc


def test(pytest_args: list[str]) -> int:
    py = ensure_venv()
    lint_rc = lint(py)
    chromium = find_chromium()
    if not chromium:
        print("build: no Chromium found and none could be installed; browser tests will fail", file=sys.stderr)
    build()
    env = {**os.environ}
    if chromium:
        env["ENGINELAB_CHROMIUM"] = chromium
    log(f"pytest (chromium: {chromium})")
    rc = subprocess.run([str(py), "-m", "pytest", *pytest_args], cwd=ROOT, env=env).returncode
    if lint_rc:
        print("build: ruff found problems (see above); fix them or run `.venv/bin/ruff format`", file=sys.stderr)
    return rc or lint_rc


# ---------------------------------------------------------------------------------------------------------
# bench
# ---------------------------------------------------------------------------------------------------------
def bench(args) -> int:
    py = ensure_venv()
    chromium = find_chromium()
    if not chromium:
        raise SystemExit("bench: no Chromium")
    build()
    env = {**os.environ, "ENGINELAB_CHROMIUM": chromium}
    cmd = [
        str(py),
        str(ROOT / "tests" / "e2e" / "bench.py"),
        "--dist",
        str(DIST),
        "--runs",
        str(args.runs),
        "--changes",
        str(args.changes),
        "--scale",
        str(args.scale),
    ]
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    sub.add_parser("build")
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, default=8000)
    t = sub.add_parser("test")
    t.add_argument("pytest_args", nargs=argparse.REMAINDER)
    b = sub.add_parser("bench")
    b.add_argument("--runs", type=int, default=5, help="cold loads of each page (alternating)")
    b.add_argument("--changes", type=int, default=50, help="input changes timed for the interaction figures")
    b.add_argument("--scale", type=float, default=1.0, help="passed to extension benchmarks (bench/*.py run(scale))")
    args = ap.parse_args(argv)
    if args.cmd in (None, "build"):
        build()
        return 0
    if args.cmd == "serve":
        serve(args.port)
        return 0
    if args.cmd == "test":
        return test(args.pytest_args)
    if args.cmd == "bench":
        return bench(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
