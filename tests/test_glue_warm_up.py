"""site/py/main.py's warm-up (op "warm"), in CPython: once a frame is live and idle, the session runs compute and
render for one neighbouring state and throws the answer away; the session's state and what the frame was told
stay as they were."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "site" / "py"))
import main  # noqa: E402

import perf_model as pm  # noqa: E402
from enginelab import page  # noqa: E402
from enginelab.figures import REGISTRY  # noqa: E402


def ask(client, **req):
    return json.loads(main.serve(client, json.dumps(req)))


@pytest.fixture
def views(monkeypatch):
    """The states page.view is asked to draw."""
    seen = []
    real = page.view

    def spy(fig, state, **kw):
        seen.append(state)
        return real(fig, state, **kw)

    monkeypatch.setattr(page, "view", spy)
    return seen


def warm(client, figure, search, views):
    ask(client, op="open", figure=figure, search=search, sigs={}, values={}, layout="wide")
    views.clear()  # only what the warm-up draws
    app = main.SESSIONS[client]
    before = None
    if isinstance(app, main.App):  # (a frame at its default opens on its pre-render: a session comes with "warm")
        before = (app.state, app.query, dict(app.sigs), dict(app.shown), app.message_list, app.deferred)
    return before, ask(client, op="warm"), main.SESSIONS[client]


def test_a_frame_with_its_own_settings_warms_up_on_the_default_state(views):
    before, out, app = warm("w1", "calculator", "?machine=rtx3060&ctx=16384", views)
    assert out == {"ok": True}  # nothing for the frame to write
    assert views == [REGISTRY["calculator"].default_state()]
    assert (app.state, app.query, app.sigs, app.shown, app.message_list, app.deferred) == before
    assert app.state.machine == "rtx3060" and app.state.ctx == 16384


def test_a_frame_at_the_default_warms_up_on_it_and_its_first_settings_next_option(views):
    _before, out, app = warm("w2", "calculator", "", views)
    fig = REGISTRY["calculator"]
    assert out == {"ok": True} and app.state == fig.default_state()
    options = [v for v, _ in fig.SPEC.by_key["model"].options_for({})]
    want = options[(options.index(app.state.model) + 1) % len(options)]
    # the pre-rendered default itself (nothing computed it), then the model (the calculator's first setting) changed
    assert [s.model for s in views] == [app.state.model, want]
    assert views[0] == fig.default_state()


def test_a_step_through_figure_at_its_default_does_not_warm_up_another_computation(views):
    _before, out, app = warm("w3", "kv-managers", "", views)
    assert out == {"ok": True} and views == []  # its changes are frame patches on the simulation it has
    _before, out, app = warm("w4", "kv-managers", "?step=5", views)
    assert [s.step for s in views] == [0] and app.state.step == 5  # the same simulation, at its first step


def test_idle_requests_after_a_change_warm_what_is_one_step_away_and_change_nothing_shown(monkeypatch):
    from enginelab import scenario

    fig = REGISTRY["calculator"]
    ask("i1", op="open", figure="calculator", search="?model=qwen2.5-14b", sigs={}, values={}, layout="wide")
    app = main.SESSIONS["i1"]
    ran = []
    real = scenario.warm_steps
    monkeypatch.setattr(scenario, "warm_steps", lambda states: ran.append(len(states)) or real(states))
    monkeypatch.setattr(main, "IDLE_BUDGET_S", 0.0)  # one step per request
    # the neighbours: the previous and next model and quantization (as the selects list them now: a catalog model
    # is warmed, the "custom" option is not)
    near = []
    for key in ("model", "quant"):
        values = [v for v, _ in fig.SPEC.by_key[key].options_for(app.state.as_dict())]
        i = values.index(getattr(app.state, key))
        near += [values[j] for j in (i - 1, i + 1) if 0 <= j < len(values)]
    warmed = sum(1 for v in near if v in pm.MODELS or v in pm.QUANT_PRESETS)
    # then the select's other catalog models, at this quantization
    models = [v for v, _ in fig.SPEC.by_key["model"].options_for(app.state.as_dict())]
    later = sum(1 for v in models if v in pm.MODELS and v != app.state.model and v not in near)
    before = (app.state, app.query, dict(app.sigs), dict(app.shown), app.message_list, app.deferred)
    answers = [ask("i1", op="idle")]
    while answers[-1].get("more"):
        answers.append(ask("i1", op="idle"))
        assert len(answers) <= 5 * (4 + len(pm.MODELS)) + 1  # bounded: five steps per neighbour and per model
    assert all(a["ok"] for a in answers) and answers[-1] == {"ok": True, "more": False}
    assert warmed >= 3 and later > 20
    assert len(answers) == 5 * (warmed + later) + 1  # five steps each, one step per request
    assert ran == [len(near)]  # the steps were made once, for the state shown
    assert (app.state, app.query, app.sigs, app.shown, app.message_list, app.deferred) == before
    assert ask("i1", op="idle") == {"ok": True, "more": False}  # nothing left for this state
    values = {k: fig.SPEC.by_key[k].encode(fig.SPEC.shown(app.state, k)) for k in app.sigs} | {"model": "qwen2.5-7b"}
    ask("i1", op="input", values=values, target="model")
    assert ask("i1", op="idle")["more"] and len(ran) == 2  # a new state: its own neighbours
