"""The calculator family's one compute stage (enginelab.scenario): one Scenario per state, memoised, shared by the
advisor page, and rendering takes deferral as an argument."""

from __future__ import annotations

import perf_model as pm
from enginelab import scenario
from enginelab.figures import advisor as fig_advisor
from enginelab.figures import calculator as calc


def test_one_placement_per_calculator_state(monkeypatch):
    """Rendering the calculator, its explanations and the advisor's findings places the state's own setup
    once per profile: the measured one the page shows, and the course one whose numbers sit beside it (the
    advisor's suggested changes place other setups, which is their job)."""
    s = calc.SPEC.from_query("?model=qwen2.5-14b&machine=rtx3060&ctx=32768")[0]
    calls = []
    real = pm.place

    def counting(model, machine, quant="Q4_K_M", n_ctx=4096, kv_type="f16", n_gpu_layers=None, **kw):
        calls.append(
            (
                getattr(model, "key", model),
                getattr(machine, "key", machine),
                quant,
                n_ctx,
                kv_type,
                n_gpu_layers,
                kw.get("profile", "course"),
                tuple(sorted((k, v) for k, v in kw.items() if k != "profile")),  # e.g. another -ub: another setup
            )
        )
        return real(model, machine, quant, n_ctx, kv_type, n_gpu_layers, **kw)

    monkeypatch.setattr(pm, "place", counting)
    scenario._CACHE.clear()
    calc.render(calc.compute(s), defer=True)
    calc.deferred_html(s)
    base = ("qwen2.5-14b", "rtx3060", "Q4_K_M", 32768, "f16", None)
    own = [c for c in calls if c[:6] == base and c[7] == calls[0][7]]  # the state's own flags
    assert [c[6] for c in own].count("measured") == 1, calls[:5]
    assert [c[6] for c in own].count("course") == 1, calls[:5]
    assert len(calls) > 1  # the findings did try changes


def test_scenario_is_memoised_and_the_advisor_page_reuses_it():
    s = calc.default_state()
    assert calc.compute(s) is calc.compute(s)
    a = fig_advisor.compute(fig_advisor.default_state())
    assert a.calc is calc.compute(calc.SPEC.coerce(a.calc.state.as_dict())[0])
    assert a.outcome.placement is a.calc.placement  # the advisor judged the very same placement


def test_render_takes_deferral_as_an_argument():
    d = calc.compute(calc.default_state())
    now, later = calc.render(d), calc.render(d, defer=True)
    assert 'data-deferred="findings"' in later and 'data-deferred="findings"' not in now
    assert 'data-explain="decode_tok_s"' in now and 'data-explain="decode_tok_s"' not in later
    filled = calc.deferred_html(d.state)
    assert filled["explain-decode_tok_s"] in now and set(filled) >= {"calc-findings-body", "explain-verdict"}
    assert calc.render(d) == now  # no global switch changed anything
