"""The catalog: the models the course and the app pick from (MODELS), read from catalog.json.

catalog.json holds a row per model, device and machine, each with its source and, where a value needs it, a
note. This module reads the file and builds MODELS; perf_model.devices builds the devices and MACHINES from
the same file. A row is checked by the class it becomes (Model, Device, Machine): a broken row raises
ValueError naming the section, the row's key and the field, e.g. "models['llama-3.1-8b'].hidden_size: ...".
"""

from __future__ import annotations

import json
from dataclasses import MISSING, fields
from functools import lru_cache
from importlib.resources import files

from enginelab.checks import brief, check_int

from .models import MAX_LAYERS, Model
from .units import _check

CATALOG_FILE = "catalog.json"
ROW_META = ("key", "source", "note")  # every row's own fields, beside its class's: source required, note optional


@lru_cache(maxsize=1)
def catalog_data() -> dict:
    """catalog.json, parsed (read through importlib.resources: the wheel is imported from a zip in Pyodide)."""
    return json.loads(files(__package__).joinpath(CATALOG_FILE).read_text(encoding="utf-8"))


def catalog_rows(data: dict, section: str, cls) -> list:
    """(key, fields) for each row of data[section]: the row's key, source and note checked, every other field
    one of cls's (a dataclass) and its required fields present; fields holds cls's fields only (key and source
    where cls has them). The errors name the section, the row's key and the field."""
    rows = data.get(section) if isinstance(data, dict) else None
    if not (isinstance(rows, list)):
        _check(False, section, f"must be a list of rows, got {brief(rows)}")
    allowed = {f.name for f in fields(cls)}
    required = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
    out, seen = [], set()
    for i, row in enumerate(rows):
        if not (isinstance(row, dict)):
            _check(False, f"{section}[{i}]", f"must be an object, got {brief(row)}")
        key = row.get("key")
        if not (isinstance(key, str) and key and key not in seen):
            _check(False, f"{section}[{i}].key", f"must be a unique non-empty string, got {brief(key)}")
        seen.add(key)
        where = f"{section}[{brief(key)}]"
        source = row.get("source")
        if not (isinstance(source, str) and source.strip()):
            _check(False, f"{where}.source", f"every row needs one (a URL or a document), got {brief(source)}")
        if not (isinstance(row.get("note", ""), str)):
            _check(False, f"{where}.note", f"must be a string, got {brief(row['note'])}")
        for name in row:
            if name not in allowed and name not in ROW_META:
                _check(False, f"{where}.{name}", f"unknown field; allowed: {', '.join(sorted(allowed))}")
        for name in required:
            if name not in row:
                _check(False, f"{where}.{name}", "missing")
        out.append((key, {k: v for k, v in row.items() if k in allowed}))
    return out


def catalog_error(section: str, key: str, err: ValueError) -> ValueError:
    """A class's ValueError ("field: message") as the catalog row's: "section['key'].field: message"."""
    return ValueError(f"{section}[{brief(key)}].{err}")


def _swa_pattern(n) -> tuple:
    """config.json's integer sliding_window_pattern n: n - 1 sliding-window layers, then a global one."""
    n = check_int(n, "sliding_window_pattern", 1, MAX_LAYERS)
    return tuple(i < n - 1 for i in range(n))


def models_from_catalog(data: dict) -> dict:
    """{key: Model} from data["models"], in the file's order."""
    out = {}
    for key, row in catalog_rows(data, "models", Model):
        try:
            pattern = row.get("sliding_window_pattern", ())
            if not isinstance(pattern, (list, tuple)):  # an integer n, as Gemma 3's config.json gives it
                row["sliding_window_pattern"] = _swa_pattern(pattern)
            out[key] = Model(**row)
        except ValueError as e:
            raise catalog_error("models", key, e) from None
    return out


MODELS: dict[str, Model] = {}


MODELS.update(models_from_catalog(catalog_data()))
GEMMA3_PATTERN = MODELS["gemma-3-4b"].sliding_window_pattern  # 5 sliding-window layers, then a global one
LLAMA4_PATTERN = MODELS["llama-4-scout"].sliding_window_pattern  # 3 chunked-attention layers, then a global one


CONFIG_ROW = ("key", "name", "source", "note", "config")


def models_from_configs(data: dict, taken=None) -> dict:
    """{key: Model} from data["configs"]: each row's config (a config.json's language-model keys) read as typed
    blocks (enginelab.engine_io.block_model_fields, enginelab.arch_config), named and sourced by the row; a key
    must be new to `taken` (default: MODELS)."""
    from enginelab import engine_io

    rows = data.get("configs", []) if isinstance(data, dict) else None
    if not (isinstance(rows, list)):
        _check(False, "configs", f"must be a list of rows, got {brief(rows)}")
    taken = MODELS if taken is None else taken
    out = {}
    for i, row in enumerate(rows):
        key = row.get("key") if isinstance(row, dict) else None
        if not (isinstance(key, str) and key and key not in out and key not in taken):
            _check(False, f"configs[{i}].key", f"must be a unique non-empty string, got {brief(key)}")
        for name in row:
            if name not in CONFIG_ROW:
                _check(False, f"configs[{brief(key)}].{name}", f"unknown field; allowed: {', '.join(CONFIG_ROW)}")
        if not (isinstance(row.get("source"), str) and row["source"].strip()):
            _check(False, f"configs[{brief(key)}].source", "every row needs one (a URL or a document)")
        try:
            fields = engine_io.block_model_fields(row.get("config"), row.get("name"))
            fields.update(key=key, source=row["source"])
            out[key] = Model(**fields)
        except ValueError as e:
            raise catalog_error("configs", key, e) from None
    return out


MODELS.update(models_from_configs(catalog_data()))


def get_model(model) -> Model:
    """A Model, or the key of one in MODELS."""
    if isinstance(model, Model):
        return model
    if not (isinstance(model, str) and model in MODELS):
        _check(
            False, "model", f"must be a Model or the key of one; unknown {brief(model)}; allowed: {', '.join(MODELS)}"
        )
    return MODELS[model]
