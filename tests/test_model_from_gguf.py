"""perf_model.model_from_gguf: a GGUF header (written by llama.cpp's own gguf package) becomes a Model
whose per-tensor types and sizes are the file's."""

import gguf  # llama.cpp's own gguf package: a test dependency (pyproject [test] extra)
import numpy as np
import pytest

import perf_model as pm  # noqa: E402

Q = gguf.GGMLQuantizationType


def _write(path, model, quant, arch="llama"):
    """Write `model`'s tensors with the types perf_model's plan gives them (zeros as data)."""
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(model.num_hidden_layers)
    w.add_embedding_length(model.hidden_size)
    w.add_feed_forward_length(model.intermediate_size)
    w.add_head_count(model.num_attention_heads)
    w.add_head_count_kv(model.num_key_value_heads)
    w.add_context_length(model.max_position_embeddings)
    w.add_name("tiny test model")
    w.add_token_list([f"t{i}" for i in range(model.vocab_size)])
    for r in pm.quantize_plan(model, quant):
        t = pm.GGML_TYPES[r["type"]]
        ne = r["ne"]
        if r["type"] == "F32":
            w.add_tensor(r["name"], np.zeros(tuple(reversed(ne)), dtype=np.float32))
        else:  # raw quantized rows, numpy order, as GGUFWriter takes them
            row_bytes = ne[0] // t.block_size * t.type_size
            w.add_tensor(r["name"], np.zeros((*reversed(ne[1:]), row_bytes), dtype=np.uint8), raw_dtype=Q[r["type"]])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture
def tiny():
    return pm.model_from_hf_config(
        {
            "model_type": "llama",
            "num_hidden_layers": 4,
            "hidden_size": 256,
            "intermediate_size": 512,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "vocab_size": 1024,
            "max_position_embeddings": 4096,
        },
        name="tiny",
    )


def _file(tmp_path, model, quant):
    path = tmp_path / "m.gguf"
    _write(path, model, quant)
    return path.read_bytes()


@pytest.mark.parametrize("quant", ["Q4_K_M", "Q8_0", "Q3_K_M", "F16"])
def test_plan_is_the_files_types(tmp_path, tiny, quant):
    data = _file(tmp_path, tiny, quant)
    m = pm.model_from_gguf(data)
    assert m.num_hidden_layers == 4 and m.hidden_size == 256 and m.num_key_value_heads == 2
    assert m.vocab_size == 1024 and m.name == "tiny test model"
    want = {r["name"]: (r["type"], r["bytes"]) for r in pm.quantize_plan(tiny, quant)}
    got = {r["name"]: (r["type"], r["bytes"]) for r in pm.quantize_plan(m, None)}
    assert got == want
    assert pm.weight_bytes(m, None)["total"] == pm.weight_bytes(tiny, quant)["total"]
    # placement and timing take the file's model as they take a catalog model
    p = pm.place(m, pm.MACHINES["rtx3060"], None, n_ctx=2048)
    assert p.fits and p.n_gpu_layers == 5
    assert p.gpu_kv == pm.kv_cache_bytes(tiny, 2048)
    assert pm.decode_step_time(p, context=100)["tok_per_s"] > 0


def test_only_the_header_is_needed(tmp_path, tiny):
    data = _file(tmp_path, tiny, "Q4_K_M")
    from enginelab import gguf_header

    head = gguf_header.read_gguf(data)
    cut = data[: head.data_offset]  # no tensor data at all
    m = pm.model_from_gguf(cut)
    assert pm.weight_bytes(m, None)["total"] == head.weights_bytes


def test_bad_header_is_value_error(tmp_path, tiny):
    data = _file(tmp_path, tiny, "Q4_K_M")
    with pytest.raises(ValueError):
        pm.model_from_gguf(b"NOPE" + data[4:])
    with pytest.raises(ValueError):
        pm.model_from_gguf(data[:100])
