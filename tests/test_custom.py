"""enginelab.custom: a GGUF read header-only in growing slices, a pasted config.json, a custom machine."""

import json
from pathlib import Path

import pytest
from test_model_from_gguf import _write  # tests/ is on sys.path (rootdir-relative imports)

import perf_model as pm
from enginelab import custom


@pytest.fixture
def gguf_bytes(tmp_path):
    m = pm.model_from_hf_config(
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
    path = tmp_path / "tiny.gguf"
    _write(path, m, "Q4_K_M")
    return m, path.read_bytes()


def test_slices_grow_until_the_header_is_read(gguf_bytes):
    m, data = gguf_bytes
    size, n, reads = len(data), 64, 0
    while True:
        reads += 1
        kind, value = custom.gguf_slice_plan(data[:n], file_size=size)
        if kind == "model":
            break
        assert value > n  # always asks for more than it had
        n = value
    assert reads >= 2 and n < size  # never needed the tensor data
    assert pm.weight_bytes(value, None)["total"] == pm.weight_bytes(m, "Q4_K_M")["total"]
    assert "4 layers" in custom.describe_gguf_model(value)


def test_bad_gguf_is_a_clear_value_error(gguf_bytes):
    _, data = gguf_bytes
    with pytest.raises(ValueError, match="GGUF"):
        custom.gguf_slice_plan(b"GGML" + data[4:2000], file_size=len(data))
    with pytest.raises(ValueError, match="GGUF file"):
        custom.gguf_slice_plan(data[:300], file_size=300)  # the file itself ends mid-header
    with pytest.raises(ValueError):
        custom.model_from_gguf_bytes(b"")


def test_config_text_errors_name_the_problem():
    with pytest.raises(ValueError, match="not valid JSON"):
        custom.model_from_config_text('{"model_type": "llama",')
    with pytest.raises(ValueError, match="JSON object"):
        custom.model_from_config_text("[1, 2]")
    with pytest.raises(ValueError, match="num_hidden_layers"):
        custom.model_from_config_text('{"model_type": "llama", "hidden_size": 4096}')
    with pytest.raises(ValueError, match="paste"):
        custom.model_from_config_text("   ")


def test_compact_config_round_trips_to_the_same_model():
    cfg = {
        "model_type": "gpt_oss",
        "num_hidden_layers": 24,
        "hidden_size": 2880,
        "intermediate_size": 2880,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "vocab_size": 201088,
        "num_local_experts": 32,
        "num_experts_per_tok": 4,
        "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"] * 12,
        "torch_dtype": "bfloat16",
        "architectures": ["GptOssForCausalLM"],
        "rope_scaling": {"rope_type": "yarn", "factor": 32.0},
    }
    text = json.dumps(cfg, indent=2)
    small = custom.compact_config(text)
    assert len(small) < len(text) / 2 and "torch_dtype" not in small
    a = custom.model_from_config_text(text, name="x")
    b = custom.model_from_config_text(custom.expand_compact(small), name="x")
    assert a == b
    assert pm.kv_cache_bytes(a, 10000) == 12 * 10000 * 2048 + 12 * 128 * 2048


LAB_CONFIGS = [  # data/lab/configs/<file>.json "hf" (layers cut as the lab's synthetic files have them), model_type
    ("deepseek-v2-lite", "deepseek_v2"),
    ("gemma-2-2b", "gemma2"),
    ("gemma-3-1b", "gemma3_text"),
    ("glm-4.5-air", "glm4_moe"),
    ("gpt-oss-20b", "gpt_oss"),
    ("llama-3.1-8b", "llama"),
    ("llama-4-scout", "llama4_text"),
    ("qwen3-next-80b-a3b", "qwen3_next"),
    ("qwen2.5-1.5b", "qwen2"),
]


@pytest.mark.parametrize("name,model_type", LAB_CONFIGS, ids=[n for n, _ in LAB_CONFIGS])
def test_the_compact_config_gives_the_same_model(name, model_type):
    """The URL's compact config keeps every field the reader uses: MLA (DeepSeek, GLM), linear attention (Qwen3-Next)
    and chunked attention (Llama 4) as well as the dense and sliding-window models; and it is shorter."""
    path = Path(__file__).resolve().parents[1] / "data/lab/configs" / f"{name}.json"
    cfg = {k: v for k, v in json.loads(path.read_text())["hf"].items() if k != "layer_types"}
    cfg.update(model_type=model_type, num_hidden_layers=4)
    text = json.dumps(cfg, indent=2)
    small = custom.compact_config(text)
    assert len(small) < len(json.dumps(cfg, separators=(",", ":")))  # the keys kept, not the whole config
    assert custom.model_from_config_text(custom.expand_compact(small)) == custom.model_from_config_text(text)


def test_a_field_the_compact_form_would_lose_keeps_the_whole_config(monkeypatch):
    """Should CONFIG_KEYS lack a field the reader uses, the compact text is the whole config, minified."""
    cfg = {
        "model_type": "qwen3_next",
        "num_hidden_layers": 4,
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "vocab_size": 1024,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 128,
        "shared_expert_intermediate_size": 128,
        "full_attention_interval": 4,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 64,
        "linear_value_head_dim": 64,
        "linear_num_key_heads": 4,
        "linear_num_value_heads": 8,
        "torch_dtype": "bfloat16",
    }
    text = json.dumps(cfg)
    assert "torch_dtype" not in custom.compact_config(text)
    monkeypatch.setattr(custom, "CONFIG_KEYS", tuple(k for k in custom.CONFIG_KEYS if k != "linear_num_value_heads"))
    small = custom.compact_config(text)
    assert json.loads(small) == cfg  # all of it, torch_dtype too
    assert custom.model_from_config_text(custom.expand_compact(small)) == custom.model_from_config_text(text)


def test_layer_types_other_than_sliding_and_full_survive_the_compact_form():
    cfg = {
        "model_type": "llama4_text",
        "num_hidden_layers": 4,
        "hidden_size": 256,
        "intermediate_size": 512,
        "intermediate_size_mlp": 1024,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "vocab_size": 1024,
        "num_local_experts": 4,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": 1,
        "attention_chunk_size": 256,
        "layer_types": ["chunked_attention", "chunked_attention", "chunked_attention", "full_attention"],
    }
    small = custom.compact_config(json.dumps(cfg))
    assert json.loads(small)["layer_types"] == ["chunked_attention"] * 3 + ["f"]
    assert custom.model_from_config_text(custom.expand_compact(small)) == custom.model_from_config_text(json.dumps(cfg))


def test_custom_machine_validates_and_places():
    mc = custom.custom_machine(16, 448, 60, 32, 60, 31.5)
    p = pm.place("llama-3.1-8b", mc, "Q4_K_M", 8192)
    assert p.fits and p.n_gpu_layers == 33
    cpu = custom.custom_machine(0, 448, 60, 32, 60, 31.5)
    assert cpu.gpu is None and pm.place("llama-3.1-8b", cpu, "Q4_K_M", 8192).n_gpu_layers == 0
    with pytest.raises(ValueError, match="gpu_bw"):
        custom.custom_machine(16, 0, 60, 32, 60, 31.5)
    with pytest.raises(ValueError, match="ram_gb"):
        custom.custom_machine(16, 448, 60, float("nan"), 60, 31.5)


def test_compact_config_keeps_what_the_block_readers_need():
    # Qwen3.6-35B-A3B's config.json (data/architectures/configs), its vision tower and sources dropped
    path = Path(__file__).resolve().parents[1] / "data/architectures/configs/qwen3.6-35b-a3b.json"
    text = path.read_text()
    small = custom.compact_config(text)
    assert "vision_config" not in small and "SOURCES" not in small
    a = custom.model_from_config_text(text, name="x")
    b = custom.model_from_config_text(custom.expand_compact(small), name="x")
    assert a.blocks == b.blocks and pm.kv_bytes_per_token(b) == 10 * 2 * 2 * 256 * 2
