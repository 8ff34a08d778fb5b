"""The calculator figure in CPython: numbers straight from perf_model, rendering, golden SVGs."""

from __future__ import annotations

import re
from html import unescape

import pytest
from goldens import golden

import perf_model as pm
from enginelab import fmt, page, scenario
from enginelab.figures import REGISTRY
from enginelab.figures import calculator as calc
from enginelab.svg import esc


def state(q=""):
    s, msgs = calc.SPEC.from_query(q)
    assert msgs == []
    return s


def test_registry_and_contract():
    assert REGISTRY["calculator"] is calc
    for name in ("ID", "TITLE", "SPEC", "default_state", "compute", "describe", "render"):
        assert hasattr(calc, name)


def test_default_state_is_the_module_listing_case():
    s = calc.default_state()
    assert (s.model, s.machine, s.quant, s.kv, s.ctx, s.ngl, s.tokens, s.n_cpu_moe) == (
        "qwen2.5-32b",
        "rtx4060ti",
        "Q4_K_M",
        "f16",
        8192,
        "auto",
        2000,
        0,
    )


@pytest.mark.parametrize(
    "q",
    [
        "",
        "?ngl=30",
        "?kv=q8_0&ctx=32768",
        "?machine=cpu-ddr5",
        "?machine=cpu-ddr5&threads=2",
        "?model=qwen3-30b-a3b&n_cpu_moe=20",
        "?machine=m4max&model=llama-3.1-70b",
        "?profile=course",
        "?profile=course&machine=cpu-ddr5",
    ],
)
def test_readouts_are_perf_models_numbers(q):
    s = state(q)
    d = calc.compute(s)
    mc = pm.MACHINES[s.machine]
    threads = None if s.threads == "auto" else s.threads
    p = pm.place(
        pm.MODELS[s.model],
        mc,
        s.quant,
        n_ctx=s.ctx,
        kv_type=s.kv,
        n_gpu_layers=None if s.ngl == "auto" else s.ngl,
        n_cpu_moe=s.n_cpu_moe,
        profile=s.profile,
    )
    dec = pm.decode_step_time(p, mc, context=s.tokens, n_threads=threads)
    pre = pm.prefill_time(p, mc, s.tokens, n_threads=threads)
    assert d.readouts == scenario.Readouts(
        n_gpu_layers=p.n_gpu_layers,
        vram_gb=p.gpu_total / pm.GB,
        ram_gb=p.cpu_total / pm.GB,
        decode_tok_s=dec["tok_per_s"],
        prefill_tok_s=pre["tok_per_s"],
        cpu_share=dec["cpu_s"] / dec["total_s"],
        fits=True,
        verdict=scenario.verdict(p),
        decode_range=dec.get("range_tok_s"),
        prefill_range=pre.get("range_tok_s"),
    )
    html = calc.render(d)
    for k in calc.READOUTS + ("fits",):
        assert f'data-readout="{k}"' in html
    # the data-readout values follow the page's profile
    assert f'data-readout="decode_tok_s" data-value="{fmt.raw(dec["tok_per_s"])}"' in html
    if s.profile == "measured":
        lo, hi = dec["range_tok_s"]
        assert f'data-readout="decode_low_tok_s" data-value="{fmt.raw(lo)}"' in html
        assert f'data-readout="decode_high_tok_s" data-value="{fmt.raw(hi)}"' in html
        # the module's number for the same settings sits beside it
        course = pm.decode_step_time(
            pm.place(
                pm.MODELS[s.model],
                mc,
                s.quant,
                n_ctx=s.ctx,
                kv_type=s.kv,
                n_gpu_layers=None if s.ngl == "auto" else s.ngl,
                n_cpu_moe=s.n_cpu_moe,
            ),
            mc,
            context=s.tokens,
        )["tok_per_s"]
        assert f'data-readout="course_decode_tok_s" data-value="{fmt.raw(course)}"' in html
        assert "Measured profile" in html and "The module's model gives" in unescape(html)
    else:
        assert "decode_low_tok_s" not in html and "course_decode_tok_s" not in html
        assert "Course profile" in html


def test_the_calculator_defaults_to_the_measured_profile_and_threads_move_cpu_decode():
    assert calc.default_state().profile == "measured"
    one = calc.compute(state("?machine=cpu-ddr5&threads=1")).readouts.decode_tok_s
    eight = calc.compute(state("?machine=cpu-ddr5&threads=8")).readouts.decode_tok_s
    assert one < eight  # one core cannot pull the memory bus's bandwidth
    # the course profile has no thread model: the field is hidden and changes nothing
    assert calc.compute(state("?machine=cpu-ddr5&profile=course")).readouts.decode_tok_s == pytest.approx(
        pm.decode_step_time(pm.place(pm.MODELS["qwen2.5-32b"], "cpu-ddr5", "Q4_K_M", n_ctx=8192), context=2000)[
            "tok_per_s"
        ]
    )
    assert calc.SPEC.to_query(state("?profile=course")) == "?profile=course"
    bad, msgs = calc.SPEC.from_query("?profile=fastest")
    assert bad.profile == "measured" and msgs and msgs[0].startswith("Speed estimate")


@pytest.mark.parametrize(
    "q, verdict, words",
    [
        ("?model=llama-3.1-8b", "vram", "All 32 layers and the output head run from VRAM."),
        (
            "?profile=course",
            "partial",
            "20 of 64 layers and the output head run from system RAM; 62% of each decode step",
        ),
        ("?model=qwen3-30b-a3b&machine=rtx3060&n_cpu_moe=20", "partial", "the experts of 20 layers (--n-cpu-moe)"),
        ("?machine=cpu-ddr5", "partial", "No GPU: all 64 layers run from system RAM"),
        ("?machine=m4max", "vram", "run from the GPU's share of unified memory"),
        ("?machine=m4max&ngl=0", "partial", "-ngl 0: all 64 layers and the output head run from unified memory"),
        ("?machine=rtx3090&ngl=0", "partial", "-ngl 0: all 64 layers and the output head run from system RAM"),
        ("?ngl=65&profile=course", "fails", "over by 7.1 GB"),
        ("?ngl=65", "fails", "over by 7.3 GB"),  # measured: the card's GiB less the driver's reserve
    ],
)
def test_three_way_verdict(q, verdict, words):
    d = calc.compute(state(q))
    assert d.readouts.verdict == verdict and d.readouts.fits == (verdict != "fails")
    head, detail = calc.verdict_text(d)
    assert words in detail
    html = calc.render(d)
    assert f'data-readout="verdict" data-value="{verdict}">{esc(head)}</output>' in html
    assert f'data-readout="fits" data-value="{"false" if verdict == "fails" else "true"}"' in html
    assert ">Fits</dt>" not in html  # the verdict replaces "Fits: yes/no"


def test_module_listing_row_qwen32b_on_4060ti():
    # Module: "Qwen2.5 32B on RTX 4060 Ti 16GB -ngl 44/65 VRAM 14.8 GB decode 5.8 tok/s (CPU share 62%)"
    d = calc.compute(state("?profile=course"))
    r = d.readouts
    assert r.n_gpu_layers == 44 and f"{r.vram_gb:.1f}" == "14.8"
    assert f"{r.decode_tok_s:.1f}" == "5.8" and f"{r.cpu_share:.0%}" == "62%"
    assert "-ngl 44 of 65" in calc.describe(d)
    # the measured profile shows the module's number beside its own
    m = calc.compute(calc.default_state())
    assert f"{m.course.decode_tok_s:.1f}" == "5.8" and m.course.n_gpu_layers == 44


def test_overask_is_explicit_and_shows_no_speed():
    d = calc.compute(state("?ngl=65"))
    r = d.readouts
    assert r.fits is False and r.decode_tok_s is None and r.prefill_tok_s is None
    html = calc.render(d)
    assert "Would fail to allocate" in html and re.search(r"needs [\d.]+ GB, [\d.]+ GB free", html)
    assert 'data-readout="decode_tok_s" data-value=""' in html
    assert "would fail to allocate" in calc.describe(d)


def test_every_model_and_machine_renders():
    for mk in pm.MODELS:
        for mc in pm.MACHINES:
            s, msgs = calc.SPEC.from_query({"model": mk, "machine": mc})
            assert msgs == []
            d = calc.compute(s)
            html = calc.render(d)
            assert html.startswith('<div class="calculator"') and "data-readout" in html


def test_ngl_bound_follows_the_model_and_machine():
    s, msgs = calc.SPEC.from_query("?model=llama-3.1-8b&ngl=40")
    assert s.ngl == 33 and "40 is above 33" in msgs[0]
    s, msgs = calc.SPEC.from_query("?machine=cpu-ddr5&ngl=5")
    assert s.ngl == 0
    s, _ = calc.SPEC.from_query("?ctx=1024&tokens=4000")
    assert s.tokens == 1024 and calc.SPEC.to_query(s) == "?ctx=1024&tokens=4000"  # the reader's 4000 is kept


def test_command_line():
    d = calc.compute(state("?kv=q8_0&ngl=30&ctx=16384"))
    cmd = d.command
    assert cmd.startswith("llama-server -m Qwen2.5-32B-Q4_K_M.gguf ") and "-c 16384" in cmd and "-ngl 30" in cmd
    assert "-ctk q8_0 -ctv q8_0" in cmd and "-fa on" in cmd
    assert 'id="llama-command"' in calc.render(d)
    assert "-ngl 30 is written because you set it" in calc.command_note(d)


def test_command_carries_the_readers_threads_only():
    assert " -t " not in calc.compute(state("?machine=cpu-ddr5")).command  # auto: llama.cpp's default
    assert calc.compute(state("?machine=cpu-ddr5&threads=2")).command.endswith(" -t 2")


def test_command_leaves_ngl_to_fit_unless_set_and_names_the_llama_cpp_it_assumes():
    d = calc.compute(state())  # -ngl auto: --fit (on by default) chooses it
    assert "-ngl" not in d.command and "-c 8192" in d.command
    note = calc.command_note(d)
    assert f"--fit (on by default), which will choose -ngl {d.placement.n_gpu_layers} of 65 here" in note
    assert "llama.cpp as of December 2025" in note and "PR #16653" in note
    assert note in calc.render(d)
    full = calc.command_note(calc.compute(state("?model=llama-3.1-8b")))
    assert "choose -ngl 33 of 33 here: every layer and the output head on the GPU" in full
    assert "-ngl" not in calc.compute(state("?machine=cpu-ddr5")).command
    # the Q2_K mix is the file people download as -Q2_K.gguf
    assert "-m Qwen2.5-32B-Q2_K.gguf " in calc.compute(state("?quant=Q2_K_MIX")).command


def test_render_is_pure_and_prerender_matches():
    s = calc.default_state()
    assert calc.render(calc.compute(s)) == calc.render(calc.compute(s))
    pre = page.prerender(calc)
    assert pre["figure"] == calc.render(calc.compute(s))
    assert 'data-field="n_cpu_moe"' in pre["controls"] and "hidden" in pre["controls"]


@pytest.mark.parametrize(
    "name, q",
    [
        ("calculator", "?profile=course"),  # the module's case, as the module prints it
        ("calculator-overask", "?ngl=65&profile=course"),
        ("calculator-cpu", "?machine=cpu-ddr5&profile=course"),
    ],
)
def test_golden_svg(name, q):
    golden(name, str(calc._bar_chart(calc.compute(state(q)))), newline=True)


def test_ctx_0_is_the_models_trained_context_as_llama_cpp_c_0():
    s, msgs = calc.SPEC.from_query("?model=qwen2.5-14b&ctx=0&tokens=20000")
    trained = pm.MODELS["qwen2.5-14b"].max_position_embeddings
    assert msgs == [] and (s.ctx, s.tokens) == (0, 20000)  # not clamped to 256, and tokens is bounded by it
    assert calc.SPEC.to_query(s) == "?model=qwen2.5-14b&ctx=0&tokens=20000"
    d = calc.compute(s)
    assert d.placement.n_ctx == trained and f"n_ctx {trained:,}" in calc.describe(d)
    assert (
        calc.compute(calc.SPEC.from_query(f"?model=qwen2.5-14b&ctx={trained}&tokens=20000")[0]).readouts == d.readouts
    )
    # below the range (but not 0) still clamps to the minimum, and says so
    s, msgs = calc.SPEC.from_query("?ctx=100")
    assert s.ctx == calc.CTX_MIN and "below the minimum" in msgs[0]


def test_lowering_the_context_never_rewrites_the_conversation_length():
    s, msgs = calc.SPEC.from_query("?ctx=1024&tokens=4000")
    assert s.tokens == 1024 and "4000 is above 1024" in msgs[0]
    assert calc.compute(s).decode["context"] == 1024  # the number used is the clamped one
    assert calc.SPEC.to_query(s) == "?ctx=1024&tokens=4000"  # the reader's stays in the link
    assert calc.SPEC.coerce(s.replace(ctx=8192))[0].tokens == 4000


@pytest.mark.parametrize(
    "q",
    [
        "?ngl=65",
        "?ngl=60&ctx=32768",
        "?machine=m4max&model=llama-3.1-70b&quant=F16",
        "?model=qwen2.5-14b&machine=rtx3060&ctx=32768&ngl=49",
    ],
)
def test_one_over_ask_figure_in_the_bar_and_the_text(q):
    d = calc.compute(state(q))
    p = d.placement
    assert not p.fits
    over = fmt.gb(p.overflow_bytes)
    svg_text = str(calc._bar_chart(d))
    assert f"over by {over}" in svg_text and f"over by {over}" in calc.describe(d)
    assert f"over by {over}" in calc.render(d)
    # every "over by" on the page is that figure (the explanation gives it to two decimals)
    stated = {round(float(v), 1) for v in re.findall(r"over by ([\d.]+) GB", calc.render(d))}
    assert stated == {round(p.overflow_bytes / 1e9, 1)}
    # the --fit margin is named only where it is counted: on the GPU
    assert ("margin" in calc._overask_text(d)) == p.failing_device.startswith("GPU")
