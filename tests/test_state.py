"""enginelab.state: specs, validation that explains instead of raising, and the URL codec."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st_

from enginelab.state import Bool, Choice, Float, Int, Spec

MODELS = {"small": 4, "big": 10}  # name -> n_layers

SPEC = Spec(
    "demo",
    [
        Choice("model", "Model", default="small", options=[(k, k.title()) for k in MODELS]),
        Int("ctx", "Context", default=4096, min=256, max=65536),
        Int("ngl", "GPU layers", default="auto", auto="auto", min=0, max=lambda p: MODELS[p["model"]] + 1),
        Int("tokens", "Tokens", default=2000, min=1, max=lambda p: p["ctx"]),
        Float("eta", "Efficiency", default=0.7, min=0.1, max=1.0),
        Bool("dark", "Dark", default=False),
        Int("experts", "Experts", default=0, min=0, max=3, visible=lambda p: p["model"] == "big"),
    ],
)


def test_default_state_is_a_frozen_dataclass():
    s = SPEC.default()
    assert (s.model, s.ctx, s.ngl, s.tokens, s.eta, s.dark) == ("small", 4096, "auto", 2000, 0.7, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.ctx = 1
    assert s.replace(ctx=8192).ctx == 8192
    assert SPEC.to_query(s) == ""


def test_query_round_trip_writes_only_non_default_keys():
    s, msgs = SPEC.from_query("?model=big&ngl=11&dark=1&eta=0.5")
    assert msgs == []
    assert (s.model, s.ngl, s.dark, s.eta) == ("big", 11, True, 0.5)
    q = SPEC.to_query(s)
    assert q == "?model=big&ngl=11&eta=0.5&dark=1"  # spec order, defaults left out
    assert SPEC.from_query(q) == (s, [])


@pytest.mark.parametrize(
    "query, fragment, key, value",
    [
        ("?model=huge", "'huge' is not one of small, big; using 'small'", "model", "small"),
        ("?ctx=abc", "'abc' is not a whole number; allowed: 256 to 65536; using 4096", "ctx", 4096),
        ("?ctx=1.5", "not a whole number", "ctx", 4096),
        ("?ctx=100", "100 is below the minimum 256; using 256", "ctx", 256),
        ("?ctx=1e9", "1000000000 is above the maximum 65536; using 65536", "ctx", 65536),
        ("?ctx=inf", "not a whole number", "ctx", 4096),
        ("?ngl=6", "6 is above 5, the most the other settings allow", "ngl", 5),  # bound depends on the model
        ("?ngl=AUTO", None, "ngl", "auto"),
        ("?model=BIG", None, "model", "big"),  # case forgiven
        ("?eta=nan", "'nan' is not a number", "eta", 0.7),
        ("?dark=maybe", "'maybe' is not on/off", "dark", False),
        ("?nope=1", "Unknown setting 'nope' ignored", "model", "small"),
        ("?ctx=512&tokens=1000", "1000 is above 512, the most the other", "tokens", 512),  # bound from ctx
        (
            "?ctx=300&tokens=x",
            "'x' is not a whole number; allowed: 1 to 300; using 300",
            "tokens",
            300,
        ),  # fallback clamped
    ],
)
def test_bad_values_are_explained_and_replaced(query, fragment, key, value):
    s, msgs = SPEC.from_query(query)
    assert getattr(s, key) == value
    if fragment is None:
        assert msgs == []
    else:
        assert len(msgs) == 1 and fragment in msgs[0], msgs


def test_user_text_in_messages_is_quoted_and_truncated():
    s, msgs = SPEC.from_query({"model": "<script>" + "x" * 200})
    assert msgs[0].startswith("Model: '<script>xxx") and "…" in msgs[0] and len(msgs[0]) < 120


def test_a_default_that_no_longer_fits_is_clamped_silently():
    spec = Spec("t", [Int("a", "A", default=10, min=0, max=5)])
    assert spec.default().a == 5


def test_form_and_coerce():
    s, msgs = SPEC.from_form({"model": "big", "ngl": "11", "dark": "0", "junk": "x"})
    assert (s.model, s.ngl, s.dark) == ("big", 11, False) and msgs == []
    s2, msgs = SPEC.coerce(s.replace(model="small"))
    assert s2.ngl == 5 and "11 is above 5" in msgs[0]
    assert SPEC.coerce(s2.replace(model="big")) == (s, [])  # the held 11 applies again


def test_a_bound_from_another_field_never_rewrites_the_readers_value():
    s, msgs = SPEC.from_query("?ctx=1024&tokens=8000")
    assert s.tokens == 1024  # what every computation uses
    assert "8000 is above 1024" in msgs[0] and "stays in the link" in msgs[0]
    assert SPEC.to_query(s) == "?ctx=1024&tokens=8000" and SPEC.shown(s, "tokens") == 8000
    assert s == SPEC.from_query("?ctx=1024&tokens=1024")[0]  # held values take no part in equality
    # the context grows again: the reader's 8000 applies, with no message
    grown, msgs = SPEC.coerce(s.replace(ctx=16384))
    assert (grown.tokens, msgs, SPEC.to_query(grown)) == (8000, [], "?ctx=16384&tokens=8000")
    # the form does the same: its control still shows 8000
    f, msgs = SPEC.from_form({"ctx": "16384", "tokens": str(SPEC.shown(s, "tokens"))})
    assert f.tokens == 8000 and msgs == []


def test_a_fixed_bound_clamps_and_says_so():
    s, msgs = SPEC.from_query("?ctx=100000")
    assert s.ctx == 65536 and SPEC.to_query(s) == "?ctx=65536" and "above the maximum" in msgs[0]


def test_special_values_outside_the_range():
    spec = Spec("t", [Int("c", "C", default=4096, min=256, max=8192, special=((0, "the model's own"),))])
    assert spec.from_query("?c=0") == (spec.State(c=0), [])
    s, msgs = spec.from_query("?c=x")
    assert "0 (the model's own) or 256 to 8192" in msgs[0]
    assert spec.from_query("?c=100")[0].c == 256


def test_visibility_is_evaluated_on_earlier_fields():
    f = SPEC.by_key["experts"]
    assert f.visible_for({"model": "big"}) and not f.visible_for({"model": "small"})


def test_duplicate_keys_are_a_programming_error():
    with pytest.raises(ValueError):
        Spec("x", [Bool("a", "A", default=False), Bool("a", "A", default=False)])


@settings(max_examples=300, deadline=None)
@given(
    st_.dictionaries(
        st_.sampled_from(["model", "ctx", "ngl", "tokens", "eta", "dark", "experts", "zz"]), st_.text(max_size=12)
    )
)
def test_any_query_gives_a_valid_state_and_never_raises(raw):
    s, msgs = SPEC.from_query(raw)
    assert s.model in MODELS
    assert 256 <= s.ctx <= 65536 and 1 <= s.tokens <= s.ctx
    assert s.ngl == "auto" or 0 <= s.ngl <= MODELS[s.model] + 1
    assert all(isinstance(m, str) for m in msgs)
    # and the state survives its own URL, held values included (they are reported again, and only they are)
    again, msgs2 = SPEC.from_query(SPEC.to_query(s))
    assert again == s and again._held == s._held and len(msgs2) == len(s._held)
