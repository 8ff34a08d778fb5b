"""Views take typed data: each figure's compute(state) returns a frozen dataclass of its own module, and every
record inside it (points, devices, rows, steps, readouts) is a frozen dataclass too, never a string-keyed dict."""

from __future__ import annotations

import dataclasses

import pytest

from enginelab.figures import REGISTRY

TYPED = ("tiers", "load", "phases", "roofline", "decode-curve", "kv-managers", "engines", "serving-plan", "validation")
STATES = {  # a state of each figure that fills its optional parts (a comparison, a paste, an overlay, ...)
    "roofline": "?vs=F16&also_m4max=1",
    "validation": "?bench=" + "| model | test | t/s |%0A|---|---|---|%0A| llama 7B Q4_0 | tg128 | 99.5 ± 0.1 |",
    "serving-plan": "?engine=sglang",
    "kv-managers": "?workload=agent&step=40",
}


def records(value, path="data"):
    """(path, value) of every dataclass instance reachable from value (through fields, tuples and dict values)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        yield path, value
        for f in dataclasses.fields(value):
            if f.compare:  # a memo (kv-managers' markup cache) is not data
                yield from records(getattr(value, f.name), f"{path}.{f.name}")
    elif isinstance(value, tuple):
        for i, v in enumerate(value[:3]):
            yield from records(v, f"{path}[{i}]")
    elif isinstance(value, dict):
        for k, v in list(value.items())[:3]:
            yield from records(v, f"{path}[{k!r}]")


def lists(value, path="data"):
    """Paths of list fields of the figure's own records (a frozen record holds tuples)."""
    for p, rec in records(value, path):
        if type(rec).__module__.startswith("enginelab.figures."):
            for f in dataclasses.fields(rec):
                if isinstance(getattr(rec, f.name), list):
                    yield f"{p}.{f.name}"


@pytest.mark.parametrize("fid", TYPED)
def test_compute_returns_a_frozen_dataclass_of_the_figure(fid):
    fig = REGISTRY[fid]
    s, msgs = fig.SPEC.from_query(STATES.get(fid, ""))
    assert msgs == []
    data = fig.compute(s)
    assert dataclasses.is_dataclass(data) and type(data).__module__ == fig.__name__
    assert data.state == s
    with pytest.raises(dataclasses.FrozenInstanceError):
        data.state = None
    # the figure's records: its module's, or a helper module's beside it (figures/kv_frames.py)
    mine = [(p, r) for p, r in records(data) if type(r).__module__.startswith("enginelab.figures.")]
    assert len(mine) > 1  # the data and at least one record inside it
    for p, r in mine:
        assert type(r).__dataclass_params__.frozen, p
    assert list(lists(data)) == []
