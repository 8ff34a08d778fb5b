"""The wheel a learner installs: `pip install enginelab-*.whl` into a fresh environment, then the course
modules import by their course names from any directory (a notebook's), and nothing else lands at the top of
site-packages."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import build  # noqa: E402

# What a notebook cell of the course runs (our own check, not the module's listing text).
NOTEBOOK_CELL = """
from perf_model import MODELS, MACHINES, GB, place, decode_step_time, weight_bytes
from inference_trace import decode_curve
from kv_managers import compare
import enginelab.advisor, enginelab.serving_plan, enginelab.validation

m, mc = MODELS["llama-3.1-8b"], MACHINES["rtx4090"]
p = place(m, mc, "Q4_K_M", n_ctx=8192)
print(round(weight_bytes(m, "Q4_K_M")["total"] / GB, 2), p.n_gpu_layers)
print(len(enginelab.validation.dataset_rows()) > 0, sorted(compare(capacity_tokens=384)))
print(round(decode_curve(p, mc, [0])[0]["tok_s"], 1))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build.build_wheel(tmp_path_factory.mktemp("wheel"))


def test_top_level_names_are_the_course_modules_and_enginelab(wheel):
    with zipfile.ZipFile(wheel) as z:
        tops = {n.split("/")[0] for n in z.namelist() if not n.split("/")[0].endswith(".dist-info")}
        assert tops == {"perf_model", "inference_trace.py", "kv_managers", "enginelab"}
        assert "enginelab/data/llama_bench.csv" in z.namelist()  # package data, read with importlib.resources


def test_pip_install_and_run_a_notebook_cell(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    before = {p.name for p in site.iterdir()}
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--disable-pip-version-check", str(wheel)],
        check=True,
    )
    added = {p.name for p in site.iterdir()} - before - {"__pycache__"}  # pip byte-compiles the top modules
    assert added == {"perf_model", "inference_trace.py", "kv_managers", "enginelab", "enginelab-0.1.0.dist-info"}
    work = tmp_path / "notebook"
    work.mkdir()
    r = subprocess.run([str(py), "-I", "-c", NOTEBOOK_CELL], cwd=work, capture_output=True, text=True, check=True)
    lines = r.stdout.splitlines()
    assert lines[0] == "4.91 33"  # the module's Q4_K_M size for Llama 3.1 8B, all 33 layers on a 24 GB card
    assert lines[1] == "True ['paged', 'radix', 'slots']"
    assert float(lines[2]) > 100
