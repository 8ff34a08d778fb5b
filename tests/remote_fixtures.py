"""Fixtures for reading a remote model (issue 16): a fake Hugging Face Hub and file host, shared by the unit tests
(tests/test_remote.py, through a fake fetch) and the browser tests (tests/e2e/test_remote_model.py, through
Playwright's request routing).

A "file" is its GGUF header followed by as many zero bytes as its size claims: the reader never asks past the
header, and the tests check that it does not.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz_pipeline as fz  # noqa: E402

import perf_model as pm  # noqa: E402
from enginelab.ggml import GGML_TYPES_BY_ID  # noqa: E402

_IDS = {t.name: i for i, t in GGML_TYPES_BY_ID.items()}
REPO = "lab-test/Tiny-Llama-GGUF"
CONFIG_REPO = "lab-test/Tiny-Llama"
GATED_REPO = "lab-test/Gated-Model"
FILE = "tiny-llama-Q4_K_M.gguf"
SPLIT = "big-llama-Q8_0-{:05d}-of-00003.gguf"
HOST = "https://files.example.org"


def _kvs(m: pm.Model, vocab_tokens: int, extra=()) -> list:
    kvs = [
        ("general.architecture", "str", "llama"),
        ("general.name", "str", m.name),
        ("llama.block_count", "u32", m.num_hidden_layers),
        ("llama.embedding_length", "u32", m.hidden_size),
        ("llama.feed_forward_length", "u32", m.intermediate_size),
        ("llama.attention.head_count", "u32", m.num_attention_heads),
        ("llama.attention.head_count_kv", "u32", m.num_key_value_heads),
        ("llama.context_length", "u32", m.max_position_embeddings),
        ("llama.vocab_size", "u32", m.vocab_size),
        *extra,
    ]
    if vocab_tokens:  # a tokenizer long enough that the header needs more than the first 1 MiB slice
        kvs.append(("tokenizer.ggml.tokens", "arr", ("str", [f"tok{i:07d}" for i in range(vocab_tokens)])))
    return kvs


def tiny_model() -> pm.Model:
    return pm.Model(
        name="Tiny Llama",
        model_type="llama",
        num_hidden_layers=4,
        hidden_size=512,
        intermediate_size=1536,
        num_attention_heads=8,
        num_key_value_heads=2,
        vocab_size=100_000,
        max_position_embeddings=8192,
    )


@functools.lru_cache(maxsize=4)
def tiny_header(vocab_tokens: int = 100_000) -> bytes:
    """A Q4_K_M llama header of about 1.9 MB (its 100,000 token strings), so it takes three range requests."""
    m = tiny_model()
    tensors = [(r["name"], list(r["ne"]), _IDS[r["type"]]) for r in pm.quantize_plan(m, "Q4_K_M")]
    return fz.gguf_bytes(_kvs(m, vocab_tokens), tensors)


@functools.lru_cache(maxsize=1)
def split_headers() -> list:
    """The same model in Q8_0 as three gguf-split parts: the first holds the metadata and the first block's and the
    embedding's tensors, the others the rest (each part's offsets start at 0)."""
    m = tiny_model()
    rows = [(r["name"], list(r["ne"]), _IDS[r["type"]]) for r in pm.quantize_plan(m, "Q8_0")]
    groups = [rows[: len(rows) // 3], rows[len(rows) // 3 : 2 * len(rows) // 3], rows[2 * len(rows) // 3 :]]
    split_kv = lambda i: [  # noqa: E731
        ("split.no", "u16", i),
        ("split.count", "u16", 3),
        ("split.tensors.count", "i32", len(rows)),
    ]
    first = fz.gguf_bytes(_kvs(m, 20_000, split_kv(0)), groups[0])
    rest = [fz.gguf_bytes(split_kv(i), groups[i]) for i in (1, 2)]
    return [first] + rest


def huge_claim_header() -> bytes:
    """A header whose vocabulary claims 2^40 strings: a reader that believed it would ask for terabytes."""
    import struct

    kvs = _kvs(tiny_model(), 0)
    body = b"".join(fz._s(k) + struct.pack("<I", fz.VT[t]) + fz._value(t, v) for k, t, v in kvs)
    key = b"tokenizer.ggml.tokens"  # then one more entry: an ARRAY of STRING with 2^40 elements, and nothing after
    entry = struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 8, 1 << 40)
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs) + 1) + body + entry + b"\0" * 4096


def tree(files: dict) -> bytes:
    """The Hub's tree listing (api/models/<repo>/tree/main) for {path: size}: LFS files carry lfs.size."""
    out = [{"type": "file", "oid": "0" * 40, "size": 1234, "path": ".gitattributes"}]
    for path, size in files.items():
        out.append(
            {
                "type": "file",
                "oid": "1" * 40,
                "size": size,
                "path": path,
                "lfs": {"oid": "2" * 64, "size": size, "pointerSize": 134},
            }
        )
    return json.dumps(out).encode()


def config_json() -> bytes:
    return json.dumps(
        {
            "_name_or_path": CONFIG_REPO,
            "model_type": "llama",
            "num_hidden_layers": 4,
            "hidden_size": 512,
            "intermediate_size": 1536,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "vocab_size": 100000,
            "max_position_embeddings": 8192,
        }
    ).encode()


TINY_SIZE = 4_920_000_000  # what the listing says the file weighs: the reader must not care
SPLIT_SIZES = (9_000_000_000, 9_000_000_000, 4_500_000_000)


def site() -> dict:
    """url -> (status, body, claimed size): every URL the fake Hub and file host answer."""
    hf = "https://huggingface.co"
    tiny = tiny_header()
    parts = split_headers()
    files = {FILE: TINY_SIZE, "mmproj-tiny-f16.gguf": 800_000_000, "tiny-llama-Q8_0.gguf": 8_000_000_000}
    files.update({SPLIT.format(i + 1): SPLIT_SIZES[i] for i in range(3)})
    out = {
        f"{hf}/api/models/{REPO}/tree/main?recursive=true": (200, tree(files), None),
        f"{hf}/{REPO}/resolve/main/config.json": (404, b"Entry not found", None),
        f"{hf}/{REPO}/resolve/main/{FILE}": (200, tiny, TINY_SIZE),
        f"{hf}/{REPO}/resolve/main/tiny-llama-Q8_0.gguf": (200, tiny, 8_000_000_000),
        f"{hf}/api/models/{CONFIG_REPO}/tree/main?recursive=true": (200, tree({"model.safetensors": 1_000_000}), None),
        f"{hf}/{CONFIG_REPO}/resolve/main/config.json": (200, config_json(), None),
        f"{hf}/api/models/{GATED_REPO}/tree/main?recursive=true": (200, tree({}), None),
        f"{hf}/{GATED_REPO}/resolve/main/config.json": (401, b"Access to model is restricted", None),
        f"{HOST}/models/{FILE}": (200, tiny, TINY_SIZE),
        f"{HOST}/models/config.json": (200, config_json(), None),
        f"{HOST}/models/huge.gguf": (200, huge_claim_header(), 10_000_000_000),
    }
    for i in range(3):
        out[f"{hf}/{REPO}/resolve/main/{SPLIT.format(i + 1)}"] = (200, parts[i], SPLIT_SIZES[i])
        out[f"{HOST}/models/{SPLIT.format(i + 1)}"] = (200, parts[i], SPLIT_SIZES[i])
    return out


def serve(entry, start, end, limit):
    """(status, body bytes, total size or None) for a request: a range of a file that claims a size is served from
    its header followed by zeros (206 with the size), anything else whole."""
    status, body, size = entry
    if status >= 400 or size is None or start is None:
        data = body if size is None else body[: min(size, limit or len(body))]
        return status, data[:limit] if limit is not None else data, size if status < 400 else None
    end = min(end, size - 1)
    if start > end:
        return 416, b"", size
    chunk = body[start : end + 1]
    chunk += b"\0" * (end + 1 - start - len(chunk))
    return 206, chunk, size
