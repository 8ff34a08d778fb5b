"""The calculator's "use your own model or machine" panel and its advisor findings, in Chromium:
a GGUF file written by llama.cpp's gguf package (only its header is read), a pasted config.json, a
machine described by numbers, bad input for each, and one-click advice with undo."""

import base64
import dataclasses
import json
import re
import sys
from pathlib import Path
from urllib.parse import parse_qs, quote, urlparse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_model_from_gguf import _write  # noqa: E402  (tests/ helpers: a GGUF written by gguf-py)

import perf_model as pm  # noqa: E402
from enginelab import custom  # noqa: E402
from enginelab.figures import calculator  # noqa: E402

from .harness import same_readouts, url_search  # noqa: E402

PAGE = "figures/calculator.html"
# files written for the drop tests: MID's tensor data (~60 MB) is larger than the first slice the page reads,
# so a passing test shows the weights were never read; TINY (~1 MB) is small enough to hand over in a drop event
MID = {
    "model_type": "llama",
    "num_hidden_layers": 8,
    "hidden_size": 1024,
    "intermediate_size": 2816,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "max_position_embeddings": 8192,
}
TINY = {
    "model_type": "llama",
    "num_hidden_layers": 4,
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1024,
    "max_position_embeddings": 4096,
}
CFG = {
    "model_type": "qwen2",
    "num_hidden_layers": 28,
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "max_position_embeddings": 32768,
    "tie_word_embeddings": False,
    "_name_or_path": "my-org/my-7b",
    "torch_dtype": "bfloat16",
}


def readouts(page):
    return {
        el.get_attribute("data-readout"): el.get_attribute("data-value") for el in page.locator("[data-readout]").all()
    }


def expected(state_query):
    st, msgs = calculator.SPEC.from_query(state_query)
    assert msgs == []
    return dataclasses.asdict(calculator.compute(st).readouts)  # compute() returns a Scenario


def close(a, b):
    if b is None or isinstance(b, bool):
        return str(a).lower() in (str(b).lower(), "") or (a in ("true", "false") and (a == "true") == b)
    return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))


def test_config_json_and_custom_machine(page_at):
    page = page_at(PAGE)
    page.locator("#own-model summary").click()
    page.fill("#cfg-text", "{ not json")
    page.click("#cfg-use")
    assert "not valid JSON" in page.locator("#own-status").text_content()
    assert page.locator("#f-model").input_value() == "qwen2.5-32b"  # last good state kept
    page.fill("#cfg-text", json.dumps(CFG, indent=2))
    page.click("#cfg-use")
    page.wait_for_function("document.querySelector('#f-model').value === 'custom'")
    q = url_search(page)
    assert parse_qs(q)["model"] == ["custom"] and "torch_dtype" not in q
    got, want = readouts(page), expected("?" + q)
    assert want["n_gpu_layers"] == 29 and int(got["n_gpu_layers"]) == 29
    assert close(got["decode_tok_s"], want["decode_tok_s"]) and close(got["vram_gb"], want["vram_gb"])
    # the same model as the catalog's Qwen2.5 7B: same numbers
    cat = expected("?model=qwen2.5-7b")
    assert close(got["decode_tok_s"], cat["decode_tok_s"])
    # the URL alone restores it
    page2 = page_at(f"{PAGE}?{q}")
    assert readouts(page2)["decode_tok_s"] == got["decode_tok_s"]
    # a machine described by numbers
    page2.select_option("#f-machine", "custom")
    page2.fill("#f-gpu_gb", "4")
    page2.locator("#f-gpu_gb").dispatch_event("input")
    page2.wait_for_function("new URLSearchParams(location.search).get('gpu_gb') === '4'")
    q2 = urlparse(page2.url).query
    want2 = expected("?" + q2)
    got2 = readouts(page2)
    assert int(got2["n_gpu_layers"]) == want2["n_gpu_layers"] < 29
    assert close(got2["decode_tok_s"], want2["decode_tok_s"])


def test_dropped_gguf_uses_the_files_tensors(page_at, tmp_path):
    m = pm.model_from_hf_config(MID, name="unused")
    path = tmp_path / "mine.gguf"
    _write(path, m, "Q5_K_M")
    page = page_at(PAGE)
    page.locator("#own-model summary").click()
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGML" + b"\0" * 100)
    page.set_input_files("#gguf-file", str(bad))
    page.wait_for_function("document.querySelector('#own-status').textContent.includes('GGUF')")
    assert page.locator("#f-model").input_value() == "qwen2.5-32b"
    page.set_input_files("#gguf-file", str(path))
    page.wait_for_function("document.querySelector('#f-model').value === 'gguf'", timeout=30_000)
    status = page.locator("#own-status").text_content()
    assert "8 layers" in status and re.search(r"read [\d,]+ of [\d,]+ bytes", status)
    read, size = (int(x.replace(",", "")) for x in re.search(r"read ([\d,]+) of ([\d,]+)", status).groups())
    assert read <= custom.GGUF_FIRST_SLICE < size  # the weights were never read
    fm = pm.model_from_gguf(path.read_bytes()[:read])
    p = pm.place(fm, pm.MACHINES["rtx4060ti"], None, n_ctx=8192, profile="measured")
    d = pm.decode_step_time(p, context=2000)
    got = readouts(page)
    assert int(got["n_gpu_layers"]) == p.n_gpu_layers
    assert close(got["vram_gb"], p.gpu_total / pm.GB) and close(got["decode_tok_s"], d["tok_per_s"])
    assert page.locator("[data-field=quant]").is_hidden()  # the file's own types


def test_findings_apply_and_undo(page_at):
    page = page_at(f"{PAGE}?model=qwen2.5-14b&machine=rtx3060&ctx=32768")
    body = page.locator("#calc-findings-body")
    body.locator("button[data-set-state]").first.wait_for(timeout=30_000)
    before = readouts(page)
    btn = body.locator("button[data-set-state]").first
    change = json.loads(btn.get_attribute("data-set-state"))
    btn.click()
    page.wait_for_function(
        f"document.querySelector('[data-readout=decode_tok_s]').dataset.value !== '{before['decode_tok_s']}'"
    )
    after = readouts(page)
    assert float(after["decode_tok_s"]) > float(before["decode_tok_s"])
    for k, v in change.items():
        assert parse_qs(url_search(page)).get(k, [str(v)]) == [str(v)]
    page.locator("#calc-findings-body button[data-undo]").first.wait_for()
    page.locator("#calc-findings-body button[data-undo]").first.click()
    page.wait_for_function(
        f"document.querySelector('[data-readout=decode_tok_s]').dataset.value === '{before['decode_tok_s']}'"
    )
    # every readout explains itself (the explanations come with the slow extras, once the reader pauses)
    page.wait_for_function("document.querySelectorAll('[data-explain]').length >= 7")


def test_gguf_dropped_on_the_drop_zone(page_at, tmp_path):
    m = pm.model_from_hf_config(TINY, name="unused")
    path = tmp_path / "dropped.gguf"
    _write(path, m, "Q4_K_M")
    data = base64.b64encode(path.read_bytes()).decode()  # (1.8 MB: as a list of numbers, ~15 s to send)
    page = page_at(PAGE)
    page.locator("#own-model summary").click()
    # a real drop: a DataTransfer holding a File, dispatched on the drop zone
    page.evaluate(
        """(b64) => {
        const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
        const dt = new DataTransfer();
        dt.items.add(new File([bytes], "dropped.gguf", {type: "application/octet-stream"}));
        const zone = document.getElementById("gguf-drop");
        zone.dispatchEvent(new DragEvent("dragover", {dataTransfer: dt, bubbles: true, cancelable: true}));
        zone.dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true}));
    }""",
        data,
    )
    page.wait_for_function("document.querySelector('#f-model').value === 'gguf'", timeout=30_000)
    # the file's context_length bounds n_ctx: 4096 is used, while the 8192 the control held stays shown, with a
    # message (a bound from another setting never rewrites the reader's value: state.Spec.shown)
    assert int(page.locator("#f-ctx").input_value()) == 8192
    assert "8192 is above 4096" in page.locator("#messages").text_content()
    ctx = 4096
    p = pm.place(pm.model_from_gguf(path.read_bytes()), pm.MACHINES["rtx4060ti"], None, n_ctx=ctx, profile="measured")
    assert int(readouts(page)["n_gpu_layers"]) == p.n_gpu_layers
    assert close(readouts(page)["vram_gb"], p.gpu_total / pm.GB)


# ---------------------------------------------------------------------------------------------------------------
# Hostile input (issue 12): crafted GGUF files and config.json texts get a message naming the field, fast; the
# last good state stays, nothing is logged as an error, and a good file still works afterwards
# ---------------------------------------------------------------------------------------------------------------
import fuzz_pipeline as fz  # noqa: E402

CRAFTED = {
    # file name: (metadata changed, tensors changed, what the message must say)
    "inf-kv-heads.gguf": ([("llama.attention.head_count_kv", "f32", float("inf"))], None, "num_key_value_heads"),
    "nan-context.gguf": ([("llama.context_length", "f64", float("nan"))], None, "max_position_embeddings"),
    "negative-key-length.gguf": ([("llama.attention.key_length", "i32", -128)], None, "head_dim"),
    "array-key-length.gguf": ([("llama.attention.key_length", "arr", ("u32", [64, 64, 64, 128]))], None, "head_dim"),
    "billion-layers.gguf": ([("llama.block_count", "u64", 10**9)], None, "num_hidden_layers"),
    "unknown-type.gguf": ([], lambda ts: [(n, d, 99 if i == 2 else t) for i, (n, d, t) in enumerate(ts)], "type 99"),
    "no-tensors.gguf": ([], lambda ts: [], "no tensors"),
}


def _crafted(kv_changes, tensor_change) -> bytes:
    """The llama seed with these changes, as a whole file: the header, then zeros where the tensor data goes
    (the page checks that a file holds the data its header places)."""
    from enginelab import gguf_header

    kvs, ts = fz.SEEDS["llama"]
    keys = {k for k, _t, _v in kv_changes}
    kvs = [k for k in kvs if k[0] not in keys] + list(kv_changes)
    head = fz.gguf_bytes(kvs, tensor_change(ts) if tensor_change else ts)
    try:
        size = gguf_header.read_gguf(head).file_size_estimate()
    except ValueError:  # the reader refuses it (an unknown type): the header alone is the test
        size = len(head)
    return head + bytes(max(0, size - len(head)))


def test_crafted_gguf_files_get_a_message_naming_the_field(page_at, tmp_path):
    page = page_at(PAGE)
    page.locator("#own-model summary").click()
    before = readouts(page)
    for name, (kv_changes, tensor_change, says) in CRAFTED.items():
        path = tmp_path / name
        path.write_bytes(_crafted(kv_changes, tensor_change))
        page.set_input_files("#gguf-file", str(path))
        page.wait_for_function(
            "(n) => document.querySelector('#own-status').textContent.startsWith(n + ':')", arg=name, timeout=10_000
        )
        status = page.locator("#own-status")
        assert says in status.text_content(), (name, status.text_content())
        assert "own-error" in status.get_attribute("class")
        assert page.locator("#f-model").input_value() == "qwen2.5-32b"  # the last good state stays
        assert same_readouts(readouts(page), before)
    # a Q1_0 tensor (a type the reader knows) is read, and a good file still works after all that
    path = tmp_path / "q1-0.gguf"
    path.write_bytes(_crafted([], lambda ts: ts[:-1] + [(ts[-1][0], ts[-1][1], 41)]))
    page.set_input_files("#gguf-file", str(path))
    page.wait_for_function("document.querySelector('#f-model').value === 'gguf'", timeout=30_000)
    assert "Q1_0" in page.locator("#own-status").text_content()
    assert float(readouts(page)["decode_tok_s"]) > 0


def test_hostile_config_pastes_are_refused_by_name(page_at):
    page = page_at(PAGE)
    page.locator("#own-model summary").click()
    cases = [
        ("[" * 50_000 + "]" * 50_000, "nested more than 32 levels"),  # a Pyodide fatal error before
        ('{"num_hidden_layers": ' + "9" * 5000 + "}", "a number of 5,000 characters"),
        (json.dumps({**CFG, "num_hidden_layers": 10**8}), "num_hidden_layers: must be an integer from 1 to 1,000"),
        (
            json.dumps({**CFG, "model_type": "llama", "head_dim": 1, "rope_scaling": {"rope_type": "llama3"}}),
            "head_dim: must be even",
        ),
        ("x" * (custom.CONFIG_MAX_CHARS + 10_000), "too long for a config"),
    ]
    for text, says in cases:
        page.evaluate("(t) => { document.getElementById('cfg-text').value = t; }", text)
        page.click("#cfg-use")
        page.wait_for_function(
            "(s) => document.querySelector('#own-status').textContent.includes(s)", arg=says, timeout=30_000
        )
        assert "own-error" in page.locator("#own-status").get_attribute("class")
        assert page.locator("#f-model").input_value() == "qwen2.5-32b"


def test_a_shared_url_with_a_hostile_config_loads_at_once_and_says_why(page_at):
    cfg = json.dumps({**CFG, "num_hidden_layers": 10**8}, separators=(",", ":"))
    page = page_at(f"{PAGE}?model=custom&cfg={quote(cfg)}")  # froze the tab for 34 s before
    text = page.locator("#figure").inner_text() + page.locator("#messages").inner_text()
    assert "num_hidden_layers: must be an integer from 1 to 1,000" in text
