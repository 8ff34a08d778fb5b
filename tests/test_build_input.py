"""The reader's llama.cpp build as an input of the measured profile: today by default, else a date, a llama.cpp build
number or an Ollama version; in the API, the calculator (URL, Scenario, explanation) and the validation page."""

from __future__ import annotations

import pytest

import perf_model as pm
from enginelab import explain, scenario
from enginelab import measured as me
from enginelab import validation as val
from enginelab.figures import calculator as calc
from enginelab.measured import builds


@pytest.fixture(scope="module")
def moe_on_cuda():
    return pm.place("qwen3-30b-a3b", "rtx4090", "Q4_K_M", n_ctx=4096, profile="measured")


def test_no_build_and_today_are_todays_estimate(moe_on_cuda):
    base = pm.decode_step_time(moe_on_cuda, context=1000)
    for b in ("", "today", "latest"):
        assert pm.decode_step_time(moe_on_cuda, context=1000, build=b) == base
    assert "build" not in base


def test_a_build_before_the_fused_expert_sum_pays_an_add_per_expert(moe_on_cuda):
    # ggml-cuda fused the k - 1 adds of the experts' sum on 2025-08-29 (#15631): a build of the day before
    # launches one kernel per routed expert in every MoE block, today's one per block: 48 x 8 - 48 = 336 more.
    # Nothing else in the change table touches an RTX 4090 between then and now (CUDA graphs: Ada had them).
    m = pm.MODELS["qwen3-30b-a3b"]
    assert (m.num_hidden_layers, m.num_experts_per_tok) == (48, 8)
    today = pm.decode_step_time(moe_on_cuda, context=1000)
    old = pm.decode_step_time(moe_on_cuda, context=1000, build="2025-08-28")
    extra = 48 * 8 - 48
    assert old["total_s"] - today["total_s"] == pytest.approx(extra * me.PARAMS["cuda"].expert_us * 1e-6, rel=1e-9)
    assert old["build"] == "2025-08-28"
    # the day it landed has it
    assert pm.decode_step_time(moe_on_cuda, context=1000, build="2025-08-29")["total_s"] == today["total_s"]


def test_the_course_profile_has_no_builds(moe_on_cuda):
    c = pm.place("qwen3-30b-a3b", "rtx4090", "Q4_K_M", n_ctx=4096)
    assert pm.decode_step_time(c, build="2024-01-01") == pm.decode_step_time(c)


def test_prefill_takes_a_build_too(moe_on_cuda):
    t = pm.prefill_time(moe_on_cuda, n_tokens=512, build="2025-01-15")
    assert t["build"] == "2025-01-15" and t["tok_per_s"] > 0


@pytest.mark.parametrize("bad", ["2025-13-01", "yesterday", "25-01-01", "2025-1-1", 2025, "x" * 100, "２０２５-01"])
def test_a_build_that_is_not_a_date_names_the_argument(moe_on_cuda, bad):
    with pytest.raises(ValueError, match=r"^build: "):
        pm.decode_step_time(moe_on_cuda, build=bad)


# ---------------------------------------------------------------------------------------------------------------
# A build as the reader writes it: a date, a llama.cpp build number, an Ollama version (measured.builds)
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, day",
    [
        ("2025-06-01", "2025-06-01"),
        ("2025-06", "2025-06"),
        ("  today ", ""),
        # winget's manifest for b6840 gives ReleaseDate 2025-10-26; b10015 2026-07-15, b10092 2026-07-23
        ("b6840", "2025-10-26"),
        ("6840", "2025-10-26"),
        ("B6840", "2025-10-26"),
        ("b10015", "2026-07-15"),
        # between two known builds: the day of the one below (it has at least that day's changes)
        ("b10050", "2026-07-15"),
        ("b10091", "2026-07-15"),
        ("b10092", "2026-07-23"),
        # Ollama v0.32.15's LLAMA_CPP_VERSION is b10488, released 2026-08-18 (winget)
        ("Ollama 0.32.15", "2026-08-18"),
        # v0.30.0 pins b9452: between b9129 (2026-05-13, shamitv/llama_cpp's changelog) and b10015
        ("Ollama 0.30", "2026-05-13"),
        # v0.12.4's Makefile.sync: 364a7a6d, "Update GGML to b6646"; b6646 released 2025-09-30
        ("ollama v0.12.4", "2025-09-30"),
        # v0.11.4 vendors commit de4c07f9, set by Ollama's "llama: update to commit de4c07f93" of 2025-05-12
        ("Ollama 0.11.4", "2025-05-12"),
    ],
)
def test_a_build_as_the_reader_writes_it_maps_to_a_day(text, day):
    assert builds.parse_build(text) == day


def test_the_label_and_note_say_how_the_day_was_found():
    b = builds.describe_build("b10050")
    assert (b.label, b.day) == ("llama.cpp b10050", "2026-07-15") and "b10015" in b.note
    old = builds.describe_build("Ollama 0.11.4")
    assert old.label == "Ollama 0.11.4" and "de4c07f9" in old.note and "own engine" in old.note
    new = builds.describe_build("Ollama 0.32.15")  # llama-server for every GGUF model: no other engine to mention
    assert "b10488" in new.note and "own engine" not in new.note


@pytest.mark.parametrize(
    "bad, says",
    [
        ("b4000", "older than the earliest"),  # the table starts at b5400
        ("Ollama 0.25.0", "not in data/bundled_llama_cpp.csv"),  # Ollama went from 0.24.0 to 0.30.0
        ("LM Studio 0.3.30", "LM Studio"),  # no LM Studio version with a cited llama.cpp build yet
        ("Ollama", "must be"),
        ("b12345678", "must be"),
        (["b6840"], "must be"),
    ],
)
def test_a_build_we_cannot_date_is_a_value_error_naming_build(bad, says):
    with pytest.raises(ValueError, match=r"^build: ") as err:
        builds.parse_build(bad)
    assert says in str(err.value)


def test_every_build_and_bundle_row_has_a_source_and_the_days_follow_the_numbers():
    rows = builds._csv("llama_cpp_builds.csv")
    assert rows and all(r["source"].startswith("https://") and r["date"] for r in rows)
    days = [d for _n, d in builds.build_days()]
    assert days == sorted(days)  # a later build is never older
    for (app, version), r in builds.bundled().items():
        assert r["source"].startswith("https://github.com/ollama/ollama/blob/v" + version)
        assert builds.parse_build(f"{app} {version}")  # every row maps to a day


def test_the_wheel_ships_the_tables_as_package_data():
    from pathlib import Path

    import enginelab

    data = Path(enginelab.__file__).parent / "data"
    for name in ("llama_cpp_builds.csv", "bundled_llama_cpp.csv"):
        assert (data / name).resolve() == (Path(__file__).parents[1] / "data" / name).resolve()


# ---------------------------------------------------------------------------------------------------------------
# The calculator: the URL key, the Scenario, the explanation
# ---------------------------------------------------------------------------------------------------------------

MOE_4090 = "?model=qwen3-30b-a3b&machine=rtx4090"


@pytest.mark.parametrize("value", ["2025-06-01", "b6840", "Ollama%200.11.4"])
def test_the_build_round_trips_through_the_url(value):
    state, msgs = calc.SPEC.from_query(f"?build={value}")
    assert msgs == [] and state.build == value.replace("%20", " ")
    assert calc.SPEC.to_query(state) == f"?build={value}"


def test_a_bad_build_in_the_url_is_explained_and_replaced_by_todays():
    state, msgs = calc.SPEC.from_query("?build=%3Cscript%3Eb6840")
    assert state.build == "" and calc.SPEC.to_query(state) == ""
    assert len(msgs) == 1 and msgs[0].startswith("llama.cpp build: ") and "using today's" in msgs[0]
    from enginelab.page import messages_html

    assert "<script>" not in str(messages_html(msgs))


def test_the_default_state_has_no_build_and_adds_nothing():
    scn = scenario.build(calc.SPEC.default())
    assert calc.SPEC.default().build == "" and scn.build is None and scn.build_effects == ()
    assert "build" not in scn.decode and "your build" not in str(explain.explain(scn)["decode_tok_s"])


def test_an_old_build_on_an_moe_card_lacks_the_fused_expert_adds_and_says_what_it_costs():
    # A CUDA build of 2025-08-28 lacks #15631 (2025-08-29): 48 MoE blocks x (8 - 1) = 336 more add kernels a token,
    # expert_us each, against today's whole step. The PR measured 194.2 -> 205.9 t/s on this card and model (+6.0%).
    state, msgs = calc.SPEC.from_query(MOE_4090 + "&build=2025-08-28")
    assert msgs == []
    scn = scenario.build(state)
    today = scenario.build(state.replace(build=""))
    assert scn.decode["build"] == scn.prefill["build"] == "2025-08-28"
    share = 336 * me.PARAMS["cuda"].expert_us * 1e-6 / today.decode["total_s"]
    [(row, got)] = scn.build_effects
    assert (row["pr"], got) == ("15631", pytest.approx(share, rel=1e-9))
    assert scn.readouts.decode_tok_s == pytest.approx(today.readouts.decode_tok_s / (1 + share), rel=1e-9)
    assert abs(share - (205.9 / 194.2 - 1)) < 0.01
    box = str(explain.explain(scn)["decode_tok_s"])
    assert "your build lacks one kernel for an MoE block&#x27;s k - 1 expert adds" in box
    assert (
        f'<a href="https://github.com/ggml-org/llama.cpp/pull/15631">PR #15631</a>): about {share * 100:.1f}% slower'
        in box
    )
    html = calc.render(calc.compute(state))
    assert "Estimated for llama.cpp of 2025-08-28: 1 change since makes its decode about 6% slower" in html
    assert 'class="sub-build"' in html and "llama.cpp of 2025-08-28" in calc.describe(scn)


def test_a_build_whose_missing_changes_do_not_touch_the_setup_says_so():
    state, _ = calc.SPEC.from_query("?model=llama-3.1-8b&machine=rtx4090&build=2025-08-28")
    scn = scenario.build(state)
    assert scn.build is not None and scn.build_effects == ()  # dense: no expert adds to fuse
    assert "none of llama.cpp&#x27;s changes since 2025-08-28 touches" in str(explain.explain(scn)["decode_tok_s"])


def test_the_course_profile_ignores_the_build():
    state, _ = calc.SPEC.from_query(MOE_4090 + "&profile=course&build=2025-08-28")
    scn = scenario.build(state)
    assert scn.build is None and scn.decode == scenario.build(state.replace(build="")).decode


# ---------------------------------------------------------------------------------------------------------------
# The validation page: each run with its own build where the data dates it
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, day",
    [
        ("PR #4766 branch (2024-01-10)", "2024-01-10"),
        ("sl/backend-sched (PR #4766, 2024-01)", "2024-01"),
        ("4426e298 (2824)", ""),  # older than data/llama_cpp_builds.csv: not dated
        ("0123abcd (6840)", "2025-10-26"),  # a llama-bench build line: commit (number)
        ("8e672ef reference (2023-11-21); newer chips added on newer builds", ""),  # each chip its own build
        ("", ""),
    ],
)
def test_a_runs_build_column_dates_it_where_it_can(text, day):
    assert val.run_build(text) == day


def test_the_validation_page_scores_dated_runs_with_their_build_and_says_so(monkeypatch):
    asked = []
    real = val.estimate

    def spy(*a, **kw):
        asked.append(kw.get("build"))
        return real(*a, **kw)

    monkeypatch.setattr(val, "estimate", spy)
    rows = [r for r in val.dataset_rows() if "2024-01" in r["build"]]
    assert len(rows) == 5  # 3 "PR #4766 branch (2024-01-10)" and 2 "sl/backend-sched (PR #4766, 2024-01)"
    preds = val.predictions(rows, profile="measured")
    assert [p["run_build"] for p in preds] == [val.run_build(r["build"]) for r in rows]
    assert asked.count("2024-01-10") == 6 and asked.count("2024-01") == 4  # tg and pp per row
    assert not any(p["build_changed"] for p in preds)  # dense 7B on Ampere/Ada: no change of the table applies
    assert val.predictions(rows, profile="course")[0]["run_build"] == ""  # the course profile has no builds

    from enginelab.figures import validation as fv

    html = fv.render(fv.compute(fv.default_state()))
    n = len(val.dataset_rows())
    assert f"Each run is scored with the llama.cpp build it ran where the dataset dates it (5 of {n} rows" in html
    assert "build of 2024-01-10" in html and "today&#x27;s build" in html


PASTE = """| model | size | params | backend | ngl | test | t/s |
| --- | ---: | ---: | --- | --: | --- | ---: |
| qwen3moe 30B.A3B Q4_K - Medium | 17.28 GiB | 30.53 B | CUDA | 99 | tg128 | 194.20 ± 0.50 |

build: 0123abcd ({n})
"""


def test_pasted_llama_bench_output_is_scored_with_the_build_it_prints():
    # b6250 was released 2025-08-22 (winget): before #15631 (2025-08-29), so its estimate pays the expert adds
    args = ("qwen3-30b-a3b", "Q4_K_M", "rtx4090")
    old = val.compare(PASTE.format(n=6250), *args, profile="measured")
    today = val.compare(PASTE.format(n=6250).replace("build: 0123abcd (6250)", ""), *args, profile="measured")
    assert old["build"] == "llama.cpp b6250, released 2025-08-22" and today["build"] == ""
    assert old["rows"][0]["estimate_tps"] == pytest.approx(
        val.estimate(
            pm.MODELS["qwen3-30b-a3b"], pm.MACHINES["rtx4090"], "Q4_K_M", "tg128", 99, "measured", "2025-08-22"
        )
    )
    assert old["rows"][0]["estimate_tps"] < today["rows"][0]["estimate_tps"]
    assert val.paste_build('[{"build_number": 6250, "avg_ts": 1}]')[0] == "2025-08-22"  # -o json
    too_old = val.compare(PASTE.format(n=1786), *args, profile="measured")
    assert "older than the builds we can date" in too_old["build"]
    assert too_old["rows"][0]["estimate_tps"] == today["rows"][0]["estimate_tps"]
    assert val.compare(PASTE.format(n=6250), *args, profile="course")["build"] == ""
