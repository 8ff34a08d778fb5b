"""Presets from the GGUF file names people download (enginelab.ggml.file_quant): unsloth's UD-* dynamic quants
and bartowski's *_L sized as the nearest llama-quantize preset, Q4_K as Q4_K_M."""

import pytest

from enginelab import remote
from enginelab.ggml import check_quant, file_quant


@pytest.mark.parametrize(
    "name, preset, note",
    [
        (
            "Qwen3.6-35B-A3B-UD-Q4_K_XL.gguf",
            "Q4_K_M",
            "UD-Q4_K_XL: sized as Q4_K_M (nearest preset; exact from the file)",
        ),
        (
            "GLM-4.7-Flash-UD-Q2_K_XL.gguf",
            "Q2_K_MIX",
            "UD-Q2_K_XL: sized as Q2_K (nearest preset; exact from the file)",
        ),
        (
            "UD-IQ1_S/DeepSeek-V3.2-UD-IQ1_S-00001-of-00004.gguf",
            "IQ1_S",
            "UD-IQ1_S: sized as IQ1_S (nearest preset; exact from the file)",
        ),
        (
            "gemma-4-31b-it-UD-Q3_K_XL.gguf",
            "Q3_K_L",
            "UD-Q3_K_XL: sized as Q3_K_L (nearest preset; exact from the file)",
        ),
        (
            "Meta-Llama-3.1-8B-Instruct-Q4_K_L.gguf",
            "Q4_K_M",
            "Q4_K_L: sized as Q4_K_M (nearest preset; exact from the file)",
        ),
        ("Llama-3.1-8B-Q4_K.gguf", "Q4_K_M", "Q4_K: sized as Q4_K_M (the same preset under another name)"),
        ("model-Q3_K.gguf", "Q3_K_M", "Q3_K: sized as Q3_K_M (the same preset under another name)"),
        # the exact names: no note (Q2_K is llama-quantize's mix, the library's Q2_K_MIX)
        ("model-Q2_K.gguf", "Q2_K_MIX", ""),
        ("Qwen2.5-7B-Instruct-q4_k_m.gguf", "Q4_K_M", ""),
        ("llama-2-7b.Q8_0.gguf", "Q8_0", ""),
        ("x-IQ4_XS-00002-of-00003.gguf", "IQ4_XS", ""),
        # no preset in the name
        ("model.gguf", None, ""),
        ("x-Q9_K.gguf", None, ""),
    ],
)
def test_file_names(name, preset, note):
    assert file_quant(name) == (preset, note)
    if preset is not None:
        assert check_quant(preset) == preset  # a preset the library sizes


@pytest.mark.parametrize("bad", [None, 7, b"x-Q4_K_M.gguf", "Q4_K_M" * 200])
def test_hostile_names_say_nothing(bad):
    assert file_quant(bad) == (None, "")


def test_a_listed_file_is_sized_as_its_nearest_preset():
    f = remote.GGUFFile("Qwen3.6-35B-A3B-UD-Q4_K_XL.gguf", 22_000_000_000)
    preset, note = f.quant
    assert preset == "Q4_K_M" and note.startswith("UD-Q4_K_XL: sized as Q4_K_M")
    # a repo's default pick takes a Q4_K_M over the UD file beside it
    files = [f, remote.GGUFFile("Qwen3.6-35B-A3B-Q4_K_M.gguf", 21_000_000_000)]
    assert remote.default_file(files).quant == ("Q4_K_M", "")
