"""site/py/main.py's warm-up (op "warm"), in CPython: once a frame is live and idle, the session rehearses the
reader's next change through serve on a scratch session (and its deferred extras), then computes the figure's default
state, a short step per request, and throws the answers away; the session's state and what the frame was told stay
as they were."""

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
    """Open a frame as live.js does (its controls' sigs and values), then send "warm" until nothing is left."""
    fig = REGISTRY[figure]
    state = fig.SPEC.from_query(search)[0]
    sigs = page.field_sigs(fig.SPEC, state)
    values = {k: fig.SPEC.by_key[k].encode(fig.SPEC.shown(state, k)) for k in sigs}
    ask(client, op="open", figure=figure, search=search, sigs=sigs, values=values, layout="wide")
    views.clear()  # only what the warm-up draws
    app = main.SESSIONS[client]
    before = None
    if isinstance(app, main.App):  # (a frame at its default opens on its pre-render: a session comes with "warm")
        before = (app.state, app.query, dict(app.sigs), dict(app.shown), app.message_list, app.deferred)
    answers = [ask(client, op="warm")]
    while answers[-1].get("more"):
        answers.append(ask(client, op="warm"))
        assert len(answers) < 10
    return before, answers, main.SESSIONS[client]


def next_model(fig, state):
    options = [v for v, _ in fig.SPEC.by_key["model"].options_for(state.as_dict())]
    return options[(options.index(state.model) + 1) % len(options)]


@pytest.fixture
def deferred(monkeypatch):
    """The states the calculator's deferred extras are drawn for."""
    fig = REGISTRY["calculator"]
    seen = []
    real = fig.deferred_html
    monkeypatch.setattr(fig, "deferred_html", lambda state: seen.append(state) or real(state))
    return seen


def test_a_frame_with_its_own_settings_rehearses_a_change_then_warms_the_default(views, deferred):
    before, answers, app = warm("w1", "calculator", "?machine=rtx3060&ctx=16384", views)
    fig = REGISTRY["calculator"]
    # three short steps: the change, its deferred extras, the default state; nothing for the frame to write
    assert answers == [{"ok": True, "more": True}] * 2 + [{"ok": True, "more": False}]
    # the rehearsed change: the model (the calculator's first setting) to its next option, this frame's other settings
    # kept; then the default
    assert [s.model for s in views] == [next_model(fig, app.state), fig.default_state().model]
    assert views[0].machine == "rtx3060" and views[0].ctx == 16384 and views[1] == fig.default_state()
    assert deferred == [views[0]]
    assert (app.state, app.query, app.sigs, app.shown, app.message_list, app.deferred) == before
    assert app.state.machine == "rtx3060" and app.state.ctx == 16384
    assert sorted(main.SESSIONS) == sorted(k for k in main.SESSIONS if not k.startswith("scratch:"))
    assert ask("w1", op="warm") == {"ok": True, "more": False}  # done once


def test_a_frame_at_the_default_rehearses_its_first_settings_next_option(views, deferred):
    _before, answers, app = warm("w2", "calculator", "", views)
    fig = REGISTRY["calculator"]
    assert answers[-1] == {"ok": True, "more": False} and app.state == fig.default_state()
    # the model changed, then the pre-rendered default itself (nothing computed it)
    assert [s.model for s in views] == [next_model(fig, app.state), app.state.model]
    assert views[1] == fig.default_state() and deferred == [views[0]]
    # the frame's session saw none of it: its next change is answered against what the frame shows
    values = {k: fig.SPEC.by_key[k].encode(fig.SPEC.shown(app.state, k)) for k in app.sigs}
    out = ask("w2", op="input", values=values | {"model": "qwen2.5-7b"}, target="model")
    assert "figure" in out and app.state.model == "qwen2.5-7b"


def test_a_step_through_figure_at_its_default_does_not_warm_up_another_computation(views):
    _before, answers, app = warm("w3", "kv-managers", "", views)
    assert answers == [{"ok": True, "more": False}] and views == []  # its changes are frame patches
    _before, answers, app = warm("w4", "kv-managers", "?step=5", views)
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
