"""build.py's offline check: anything in dist/ that would make a browser fetch off-site fails the build.

Runs the check on a copy of the built site with one thing broken at a time (no browser needed)."""

from __future__ import annotations

import json
import shutil

import pytest

from .harness import DIST, _build_module

build = _build_module()


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    d = tmp_path_factory.mktemp("dist")
    shutil.copytree(
        DIST, d, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.wasm", "python_stdlib.zip")
    )  # big and never scanned
    return d


def test_the_built_site_is_clean():
    assert build.offline_problems(DIST) == []


def test_pins_are_verified_hashes():
    manifest = json.loads((DIST / "manifest.json").read_text())
    assert manifest["pyodide"]["sha256"] == build.NPM_PINS["pyodide"][1]
    for _name, (_version, fname, sha) in build.PYPI_PINS.items():
        assert build.sha256_file(DIST / "pyodide" / fname) == sha
    lock = json.loads((DIST / "pyodide" / "pyodide-lock.json").read_text())
    assert set(lock["packages"]) == set(build.PYPI_PINS)


@pytest.mark.parametrize(
    "rel, append, expect",
    [
        ("figures/calculator.html", '<script src="https://cdn.example.org/x.js"></script>', "<script src="),
        ("figures/calculator.html", '<link rel="stylesheet" href="//fonts.example.org/a.css">', "<link href="),
        ("figures/calculator.html", '<img src="http://example.org/a.png">', "<img src="),
        ("assets/site.css", '@import "https://example.org/a.css";', "CSS url"),
        ("assets/site.css", "body { background: url(https://example.org/a.png) }", "CSS url"),
        ("assets/shell.js", 'import "https://esm.example.org/x.js";', "script fetch"),
        ("pyscript/core.js", '\nconst u = "https://cdn.jsdelivr.net/npm/other@1/x.js";', "unreviewed remote URL"),
    ],
)
def test_remote_references_fail(clean, tmp_path, rel, append, expect):
    d = tmp_path / "d"
    shutil.copytree(clean, d)
    with open(d / rel, "a") as f:
        f.write(append)
    problems = build.offline_problems(d)
    assert any(expect in p and rel in p for p in problems), problems


def test_pyscript_config_must_name_the_local_interpreter(clean, tmp_path):
    d = tmp_path / "d"
    shutil.copytree(clean, d)
    cfg = d / "exercises.json"  # the exercises page's PyScript config (figure pages boot Pyodide themselves)
    data = json.loads(cfg.read_text())
    del data["interpreter"]
    cfg.write_text(json.dumps(data))
    assert any("interpreter" in p for p in build.offline_problems(d))
    data["interpreter"] = "https://cdn.jsdelivr.net/pyodide/v314.0.7/full/pyodide.mjs"
    data["packages"] = ["numpy"]
    cfg.write_text(json.dumps(data))
    problems = build.offline_problems(d)
    assert any("interpreter" in p for p in problems)


def test_the_lock_must_match_the_shipped_wheels(clean, tmp_path):
    d = tmp_path / "d"
    shutil.copytree(clean, d)
    lock_path = d / "pyodide" / "pyodide-lock.json"
    lock = json.loads(lock_path.read_text())
    lock["packages"]["micropip"]["sha256"] = "0" * 64
    lock["packages"]["numpy"] = dict(lock["packages"]["packaging"], file_name="numpy-2.0-cp314-wasm32.whl")
    lock_path.write_text(json.dumps(lock))
    problems = build.offline_problems(d)
    assert any("micropip: sha256 differs" in p for p in problems)
    assert any("numpy" in p and "not shipped" in p for p in problems)


def test_the_wheel_is_deterministic_and_holds_the_course_modules(tmp_path):
    import zipfile

    a = build.build_wheel(tmp_path / "a")
    b = build.build_wheel(tmp_path / "b")
    assert a.read_bytes() == b.read_bytes()
    names = zipfile.ZipFile(a).namelist()
    for must in (
        "perf_model/__init__.py",
        "perf_model/timing.py",
        "enginelab/__init__.py",
        "enginelab/state.py",
        "enginelab/figures/calculator.py",
        "enginelab-0.1.0.dist-info/RECORD",
    ):
        assert must in names
    assert not any("__pycache__" in n for n in names)
