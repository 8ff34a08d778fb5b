"""site/py/main.py, the browser glue, in CPython: what a frame is sent for a change of its figure. The kv-managers
figure: a step is a frame patch, another simulation on the same grids a base patch, other grids a full render; the
data table comes after (deferred) only when what was sent has a placeholder for it."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "site" / "py"))
import main  # noqa: E402

from enginelab import page  # noqa: E402
from enginelab.figures import kv_managers as kv  # noqa: E402


def ask(client, **req):
    return json.loads(main.serve(client, json.dumps(req)))


def open_kv(client, search):
    r = ask(client, op="open", figure="kv-managers", search=search, sigs={}, values={}, layout="wide")
    html = r["figure"]
    key = re.search(r'data-patch-key="([^"]*)"', html).group(1)
    base = re.search(r'data-patch-base="([^"]*)"', html).group(1)
    app = main.SESSIONS[client]
    values = {k: app.spec.by_key[k].encode(app.spec.shown(app.state, k)) for k in app.spec.by_key}
    app.sigs = dict(page.field_sigs(app.spec, app.state))
    return r, key, base, values


def test_kv_changes_take_the_lightest_answer_and_the_table_follows_only_a_placeholder():
    r, key, base, values = open_kv("kv1", "?step=5")
    assert "data-deferred" in r["figure"] and "Building the table" in r["figure"]  # first render: table after
    filled = ask("kv1", op="deferred", token=r["deferred"])["deferred_html"]
    assert filled == {"kv-table": kv.deferred_html(kv.SPEC.from_query("?step=5")[0])["kv-table"]}
    assert "<table" in filled["kv-table"] and "data-deferred" not in filled["kv-table"]

    # a step: a frame patch, nothing deferred (the table is the simulation's, already there)
    r = ask("kv1", op="input", values=values | {"step": "6"}, target="step", patch_key=key, patch_base=base)
    patch = json.loads(r["patch"])
    assert patch["key"] == key and "deferred" not in r and "figure" not in r

    # another workload on as many cells: a base patch, whose table is a placeholder filled after
    r = ask("kv1", op="input", values=values | {"workload": "agent"}, target="workload", patch_key=key, patch_base=base)
    patch = json.loads(r["patch"])
    assert patch["base"] == base and "Building the table" in patch["html"]["kv-table"]
    new_key = patch["attrs"]["kv-fig"]["data-patch-key"]
    assert new_key != key and "agent" in new_key
    filled = ask("kv1", op="deferred", token=r["deferred"])["deferred_html"]
    assert "<table" in filled["kv-table"] and "Agent" in filled["kv-table"]

    # other grids: a full render
    r = ask(
        "kv1", op="input", values=values | {"capacity": "256"}, target="capacity", patch_key=new_key, patch_base=base
    )
    assert "patch" not in r and 'data-patch-base="cells-256"' in r["figure"] and "deferred" in r
    ask("kv1", op="close")


def test_a_stale_deferred_token_fills_nothing():
    r, key, base, values = open_kv("kv2", "?step=3")
    first = r["deferred"]
    r = ask("kv2", op="input", values=values | {"capacity": "128"}, target="capacity", patch_key=key, patch_base=base)
    assert r["deferred"] != first
    assert ask("kv2", op="deferred", token=first)["deferred_html"] is None
    ask("kv2", op="close")


def test_the_calculator_defers_its_explanations_and_findings_in_every_state():
    for search in ("?machine=rtx3060", "?model=llama-3.1-70b&machine=rtx4060ti&ngl=99", "?ctx=99999999"):
        r = ask("calc", op="open", figure="calculator", search=search, sigs={}, values={}, layout="wide")
        assert "deferred" in r and 'data-deferred="explain"' in r["figure"], search
        filled = ask("calc", op="deferred", token=r["deferred"])["deferred_html"]
        assert filled and all(k.startswith("explain-") or k == "calc-findings-body" for k in filled)
    ask("calc", op="close")
