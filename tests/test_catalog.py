"""perf_model's catalog file (pylib/perf_model/catalog.json): every row has a source, a broken row raises
ValueError naming its key and field, and the rows become the MODELS, MACHINES and named devices the listings use."""

from __future__ import annotations

import copy
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import perf_model as pm
from perf_model.catalog import catalog_data, models_from_catalog, models_from_configs
from perf_model.devices import machines_from_catalog

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("models", "devices", "machines")


def _load(data):
    return models_from_catalog(data), machines_from_catalog(data)


@pytest.mark.parametrize("section", SECTIONS)
def test_every_row_has_a_source_and_a_unique_key(section):
    rows = catalog_data()[section]
    assert rows
    for row in rows:
        assert isinstance(row.get("source"), str) and row["source"].strip(), row.get("key")
    keys = [row["key"] for row in rows]
    assert len(set(keys)) == len(keys)


def test_every_model_cites_its_config_json():
    for row in catalog_data()["models"]:
        assert row["source"].startswith("https://huggingface.co/") and row["source"].endswith("/config.json")


def test_fitted_figures_are_explained():
    # a figure fitted to the module rather than read from a datasheet says so in the row's note
    fitted = [row for row in catalog_data()["devices"] if row.get("fitted")]
    assert {row["key"] for row in fitted} == {"rtx3060", "rtx4060ti"}
    for row in fitted:
        assert "fitted" in row["note"] and row["spec_tflops"] < row["fp16_tflops"]


def test_the_rows_become_the_catalog_in_file_order():
    data = catalog_data()
    assert list(pm.MODELS) == [row["key"] for row in data["models"] + data["configs"]]
    assert list(pm.MACHINES) == [row["key"] for row in data["machines"]]
    assert all(m.key == k for k, m in pm.MODELS.items()) and all(m.key == k for k, m in pm.MACHINES.items())


def test_machines_name_their_devices():
    mc = pm.MACHINES
    assert mc["rtx3060"].gpu is pm.RTX_3060 and mc["rtx4090"].gpu is pm.RTX_4090 and mc["m4max"].gpu is pm.M4_MAX
    assert mc["cpu-ddr5"].gpu is None
    assert pm.GPUS == {k: mc[k].gpu for k in ("rtx3060", "rtx4060ti", "rtx3090", "rtx4090", "rtx5090")}
    # ram: the named device with the row's fields replaced
    ram = mc["rtx3060"].ram
    assert (ram.mem_gb, ram.bandwidth_gbs, ram.name) == (32, 51.2, "DDR4-3200 dual channel")
    assert mc["rtx5090"].ram.mem_gb == 96 and mc["rtx5090"].ram.bandwidth_gbs == pm.DDR5_DUAL.bandwidth_gbs
    cpu = mc["m4pro"].ram  # the CPU side of the same unified memory: 273 GB/s, 10 performance cores
    assert (cpu.name, cpu.cores, cpu.bandwidth_gbs, cpu.mem_gb) == ("M4 Pro CPU", 10, 273, 48)
    assert mc["m4pro"].unified and mc["rtx4060ti"].pcie_gbs == 15.75  # PCIe 4.0 x8: half of x16's 31.5


def test_an_integer_sliding_window_pattern_is_n_minus_1_windowed_layers_then_a_global_one():
    gemma3 = pm.MODELS["gemma-3-12b"]  # sliding_window_pattern 6, as in Gemma 3's config.json
    assert [gemma3.is_swa_layer(il) for il in range(12)] == [True] * 5 + [False] + [True] * 5 + [False]
    assert pm.GEMMA3_PATTERN == (True, True, True, True, True, False)
    assert pm.LLAMA4_PATTERN == (True, True, True, False)
    oss = pm.MODELS["gpt-oss-20b"]  # 2: the window on even layers
    assert [oss.is_swa_layer(il) for il in range(4)] == [True, False, True, False]
    assert pm.MODELS["gemma-2-9b"].sliding_window_pattern == pm.SWA_ALTERNATE


def _broken(section, key, change):
    data = copy.deepcopy(catalog_data())
    row = next(r for r in data[section] if r["key"] == key)
    change(row)
    return data


BROKEN = [
    # (section, key, the change, the field the message names)
    ("models", "llama-3.1-8b", lambda r: r.update(num_hidden_layers=0), "num_hidden_layers"),
    ("models", "qwen2.5-7b", lambda r: r.update(num_key_value_heads=5), "num_key_value_heads"),
    ("models", "qwen3-8b", lambda r: r.pop("source"), "source"),
    ("models", "phi-3-mini", lambda r: r.update(source="  "), "source"),
    ("models", "mixtral-8x7b", lambda r: r.pop("hidden_size"), "hidden_size"),
    ("models", "gemma-2-9b", lambda r: r.update(num_layers=42), "num_layers"),
    ("models", "gemma-3-4b", lambda r: r.update(sliding_window_pattern=0), "sliding_window_pattern"),
    ("models", "gemma-3-4b", lambda r: r.update(sliding_window_pattern=[True, "no"]), "sliding_window_pattern"),
    ("models", "llama-4-scout", lambda r: r.update(note=7), "note"),
    ("devices", "rtx3090", lambda r: r.update(bandwidth_gbs=-936), "bandwidth_gbs"),
    ("devices", "m4pro", lambda r: r.update(backend="opencl"), "backend"),
    ("devices", "rtx4090", lambda r: r.pop("source"), "source"),
    ("machines", "rtx4090", lambda r: r.update(gpu="rtx9999"), "gpu"),
    ("machines", "rtx3060", lambda r: r.update(pcie_gbs="fast"), "pcie_gbs"),
    ("machines", "m4pro", lambda r: r["ram"].update(cores="ten"), "ram.cores"),
    ("machines", "m4max", lambda r: r["ram"].update(threads=12), "ram.threads"),
    ("machines", "cpu-ddr5", lambda r: r["ram"].update(device="ddr6"), "ram.device"),
    ("machines", "cpu-ddr5", lambda r: r.pop("source"), "source"),
]


@pytest.mark.parametrize("section,key,change,field", BROKEN, ids=[f"{b[0]}-{b[1]}-{b[3]}" for b in BROKEN])
def test_a_broken_row_names_its_key_and_field(section, key, change, field):
    with pytest.raises(ValueError) as e:
        _load(_broken(section, key, change))
    assert str(e.value).startswith(f"{section}['{key}'].{field}: "), str(e.value)


def test_a_duplicate_key_is_refused():
    data = copy.deepcopy(catalog_data())
    n = len(data["models"])
    data["models"].append(copy.deepcopy(data["models"][0]))
    with pytest.raises(ValueError, match=rf"^models\[{n}\]\.key: must be a unique"):
        models_from_catalog(data)


def test_the_wheel_ships_the_catalog_and_it_loads_from_a_zip(tmp_path):
    sys.path.insert(0, str(ROOT))
    try:
        import build
    finally:
        sys.path.remove(str(ROOT))
    assert "perf_model/catalog.json" in [name for name, _ in build.wheel_sources()]
    # Pyodide imports the wheel from a zip: the catalog must be read as package data, not from a path
    archive = tmp_path / "pylib.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name, path in build.wheel_sources():
            z.write(path, name)
    code = "import perf_model as pm; print(pm.__file__.split('.zip')[0] != pm.__file__, len(pm.MODELS))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(archive)},
        text=True,
        capture_output=True,
        check=True,
    ).stdout.split()
    assert out == ["True", str(len(catalog_data()["models"]) + len(catalog_data()["configs"]))]


def test_config_rows_cite_their_config_json_and_its_gathered_copy():
    for row in catalog_data()["configs"]:
        assert row["source"].startswith("https://huggingface.co/") and row["source"].endswith("/config.json")
        assert (ROOT / "data/architectures/configs" / f"{row['key']}.json").is_file()
        assert pm.MODELS[row["key"]].carried_blocks is not None


@pytest.mark.parametrize(
    "change, match",
    [
        (
            lambda r: r["config"]["text_config"].update(num_hidden_layers=0),
            r"^configs\['qwen3.6-35b-a3b'\]\.num_hidden_layers:",
        ),
        (lambda r: r.update(extra=1), r"^configs\['qwen3.6-35b-a3b'\]\.extra: unknown field"),
        (lambda r: r.update(source=" "), r"^configs\['qwen3.6-35b-a3b'\]\.source:"),
    ],
)
def test_a_broken_config_row_names_its_key_and_field(change, match):
    data = copy.deepcopy(catalog_data())
    row = next(r for r in data["configs"] if r["key"] == "qwen3.6-35b-a3b")
    change(row)
    data["configs"] = [row]
    data_models = {k: v for k, v in pm.MODELS.items() if k != "qwen3.6-35b-a3b"}
    with pytest.raises(ValueError, match=match):
        models_from_configs(data, data_models)
