"""An architecture the lab has not checked is computed all the same, under a visible warning."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from enginelab.figures import calculator as calc

BASE = {
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
}


def _render(cfg: dict) -> str:
    s, msgs = calc.SPEC.from_query("?model=custom&cfg=" + quote(json.dumps(cfg, separators=(",", ":"))))
    return calc.render(calc.compute(s), defer=False), msgs


def test_an_unknown_model_type_is_read_and_warned_about():
    html, msgs = _render({"model_type": "acme_lm", **BASE})
    assert msgs == []
    assert 'data-unverified="true"' in html and "Architecture not verified: sizes approximate." in html
    assert 'data-readout="fits"' in html  # not a dead end: the verdict and readouts are there
    # 32 blocks of 2 x 8 x 128 f16 K and V: 4,096 B per cell, as the explanation says
    assert (
        "4,096 B per cell"
        in calc.deferred_html(
            calc.SPEC.from_query("?model=custom&cfg=" + quote(json.dumps({"model_type": "acme_lm", **BASE})))[0]
        )["explain-vram_gb"]
    )


def test_a_known_architecture_has_no_warning():
    s, _ = calc.SPEC.from_query("?model=qwen3.5-27b")
    assert "data-unverified" not in calc.render(calc.compute(s), defer=False)


@pytest.mark.parametrize("mt", ["<b>x</b>", "a\"b'c&d"])
def test_the_model_type_is_escaped_or_refused(mt):
    html, msgs = _render({"model_type": mt, **BASE})
    assert "<b>x</b>" not in html
    if not msgs:
        assert "&lt;b&gt;" in html or "&quot;" in html or "&#x27;" in html
