"""The exercises in CPython: every reference solution passes its checker, wrong answers get "not yet" with a
hint that does not give the answer away, the runner survives anything a learner types, and plot.line/bars
draw accessible, deterministic SVG.

Expected numbers are derived here by hand or from perf_model directly, never from enginelab.exercises.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from goldens import golden  # tests/golden/<name>.svg, byte for byte

import kv_managers as kvm
import perf_model as pm
from enginelab import exercises as ex
from enginelab import plot


def run(n, code):
    r = ex.run_cell(n, code)
    assert set(r) >= {"verdict", "hint", "error", "stdout", "plots", "run_ms"}
    return r


def solution(n):
    return (Path(ex.__file__).parent / "solutions" / f"ex{n}.py").read_text()


def namespace(code):
    ns = {"__name__": "__main__"}
    with plot.capture() as shown:
        exec(compile(code, "<test>", "exec"), ns)
    return ns, shown


# ---------------------------------------------------------------------------------------------------------
# Reference solutions: correct, through run_cell and through check() directly
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_solution_is_correct(n):
    r = run(n, solution(n))
    assert r["error"] is None, r["error"]
    assert r["verdict"] == "correct", r["hint"]
    assert r["hint"]
    assert len(r["plots"]) == (1 if ex.EXERCISES[n].wants_plot else 0)
    ns, shown = namespace(solution(n))
    assert ex.check(n, ns, shown) == (r["verdict"], r["hint"])


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_starter_runs_and_is_not_yet(n):
    r = run(n, ex.EXERCISES[n].starter)
    assert r["error"] is None, r["error"]
    assert r["verdict"] == "not yet"
    assert len(r["hint"]) > 20


def test_solution_values_by_hand():
    ns, _ = namespace(solution(1))
    # Qwen2.5 32B: 64 layers, 8 KV heads, head_dim 128; f16 = 2 bytes; K and V; 16,384 tokens.
    assert ns["kv_gb"] == 2 * 64 * 8 * 128 * 16384 * 2 / 1e9 == 4.294967296
    assert ns["fits_f16"] is True and ns["fits_q8_0"] is True
    # An upper bound: 1,792 GB/s over about 23.3 GB of weights.
    assert 76 < ns["decode_upper_bound_tok_s"] < 78
    ns, _ = namespace(solution(2))
    assert ns["ngl_values"] == list(range(50)) and len(ns["tok_s"]) == 50
    assert all(b > a for a, b in zip(ns["tok_s"], ns["tok_s"][1:])), "more layers on the GPU is always faster"
    # gains grow: the last ten layers buy more than the first ten
    assert ns["tok_s"][48] - ns["tok_s"][38] > 2 * (ns["tok_s"][10] - ns["tok_s"][0])
    ns, _ = namespace(solution(4))
    # the measured batched step (perf_model.kernels): up to 8 tokens one mat-vec pass whose every extra column
    # adds the same streaming time, so step times 1..8 lie on a line; from 9 on mat-mat tiles leave that line
    tok = ns["tok_s"]
    step = [b / t for b, t in zip(ns["batches"], tok)]  # seconds per step
    slope = step[1] - step[0]
    assert slope > 0
    for b in range(3, 9):
        assert step[b - 1] == pytest.approx(step[0] + (b - 1) * slope, rel=1e-9)
    assert abs(step[8] - (step[0] + 8 * slope)) > 0.01 * step[8]
    # the knee is the first b whose b + 1 adds < 1%, on that curve; the roofline's corner is elsewhere
    k = ns["knee_batch"]
    assert tok[k] < 1.01 * tok[k - 1] and all(tok[b] >= 1.01 * tok[b - 1] for b in range(1, k))
    ridge = pm.ridge_batch(pm.MACHINES["rtx4060ti"].gpu, "Q4_K_M", pm.MODELS["llama-3.1-8b"])
    assert abs(k - ridge) > 2


def test_ex3_solution_radix_really_computes_more():
    ns, _ = namespace(solution(3))
    reqs, cap = ns["workload"], ns["capacity_tokens"]
    radix = kvm.simulate(kvm.RadixManager(cap, schedule_policy="lpm"), reqs, check=True)["summary"]
    paged = kvm.simulate(kvm.PagedManager(cap), reqs, check=True)["summary"]
    assert radix["prefill_computed"] > paged["prefill_computed"]
    assert not radix["rejected"] and not paged["rejected"]
    # with arrival order (fcfs) the radix tree does not lose: the reordering is the cause
    fcfs = kvm.simulate(kvm.RadixManager(cap), reqs)["summary"]
    assert fcfs["prefill_computed"] <= paged["prefill_computed"]


# ---------------------------------------------------------------------------------------------------------
# Wrong answers: "not yet" with a hint that names the problem, without the expected value
# ---------------------------------------------------------------------------------------------------------
def with_lines(n, **assign):
    """The solution with extra assignments appended (overriding what it computed)."""
    return solution(n) + "\n" + "\n".join(f"{k} = {v}" for k, v in assign.items()) + "\n"


def not_yet(n, code, *needles):
    r = run(n, code)
    assert r["verdict"] == "not yet", r
    for s in needles:
        assert s.lower() in r["hint"].lower(), (s, r["hint"])
    return r["hint"]


REF1 = {
    "file_gb": pm.weight_bytes(pm.MODELS["qwen2.5-32b"], "Q5_K_M")["total"] / 1e9,
    "kv_gb": 2 * 64 * 8 * 128 * 16384 * 2 / 1e9,
}


def assert_no_answer(hint, *values):
    for v in values:
        for digits in (1, 2, 3):
            assert f"{v:.{digits}f}" not in hint, (v, hint)


def test_ex1_wrong_answers():
    h = not_yet(1, with_lines(1, file_gb="file_gb * 1e9 / 2**30"), "GiB", "file_gb")
    assert_no_answer(h, REF1["file_gb"], REF1["kv_gb"])
    not_yet(1, with_lines(1, file_gb="weight_bytes(qwen32, 'Q4_K_M')['total'] / GB"), "Q4_K_M")
    # an answer that used no GiB but lands where GiB would (a bits-per-weight estimate) is not told it used GiB:
    # the hint names both readings
    bpw = with_lines(1, file_gb="qwen32.total_params() * 5.3 / 8 / GB")
    h = not_yet(1, bpw, "0.93", "if you divided by 1e9")
    assert "looks like GiB" not in h
    not_yet(1, with_lines(1, kv_gb="kv_cache_bytes(qwen32, n_ctx, 'q8_0') / GB"), "q8_0")
    not_yet(1, with_lines(1, kv_gb="kv_gb / 2"), "both K and V")
    not_yet(1, with_lines(1, decode_upper_bound_tok_s="rtx5090.gpu.bandwidth_gbs / weights"), "1e9")
    not_yet(1, with_lines(1, decode_upper_bound_tok_s="500.0"), "bandwidth")
    not_yet(1, with_lines(1, fits_q8_0="False"), "fits_q8_0", ".fits")
    not_yet(1, with_lines(1, fits_f16="place(qwen32, rtx5090, 'Q5_K_M', n_ctx=n_ctx)"), "Placement")
    not_yet(1, with_lines(1, kv_gb="'4.3 GB'"), "kv_gb", "number")
    # several problems are listed together
    h = not_yet(1, with_lines(1, kv_gb="None", fits_f16="1"), "kv_gb is still None", "fits_f16")
    assert h.count("\n") == 1


def test_ex1_accepts_reasonable_readings():
    # 16,000 tokens instead of 16,384 is inside kv_gb's 3%; the bound at 70% efficiency with KV is accepted too
    r = run(
        1,
        with_lines(
            1,
            kv_gb="kv_cache_bytes(qwen32, 16000, 'f16') / GB",
            decode_upper_bound_tok_s="0.7 * 1792e9 / (weights + kv_gb * GB)",
        ),
    )
    assert r["verdict"] == "correct", r["hint"]
    # the whole file (header included) instead of the tensor bytes
    r = run(
        1,
        "from perf_model import file_bytes as pm_file_bytes\n"
        + with_lines(1, file_gb="pm_file_bytes(qwen32, 'Q5_K_M') / GB"),
    )
    assert r["verdict"] == "correct", r["hint"]


def test_ex2_wrong_answers():
    # decode at 100% of peak instead of the model's 70%
    code = solution(2).replace(
        'decode_step_time(p, context=context)["tok_per_s"]',
        '1 / ((1 / decode_step_time(p, context=context)["tok_per_s"] - 50.5e-6) * 0.7 + 50.5e-6)',
    )
    r = run(2, code)
    assert r["verdict"] == "not yet"
    h = not_yet(2, with_lines(2, tok_s="[t / 0.7 for t in tok_s]"), "70%", "-ngl 0")
    ref = pm.decode_step_time(
        pm.place(pm.MODELS["qwen2.5-14b"], pm.MACHINES["rtx3060"], "Q4_K_M", n_ctx=8192, n_gpu_layers=0)
    )["tok_per_s"]
    assert_no_answer(h, ref)
    not_yet(2, with_lines(2, tok_s="tok_s[1:] + [tok_s[-1]]"), "shifted")
    not_yet(2, with_lines(2, ngl_values="list(range(1, 50))"), "0 to 49")
    not_yet(2, with_lines(2, tok_s="tok_s[:-1]"), "49 values")
    not_yet(2, with_lines(2, tok_s="[str(t) for t in tok_s]"), "number")
    # right numbers, no chart
    no_plot = solution(2).replace("plot.line(", "(lambda *a, **k: None)(")
    not_yet(2, no_plot, "plot.line")


def test_ex2_uses_the_learners_context():
    r = run(2, solution(2).replace("context = 0 ", "context = 4096 "))
    assert r["verdict"] == "correct", r["hint"]
    # the numbers for context 4096 do not pass as context 0
    code = solution(2).replace("context = 0 ", "context = 4096 ") + "\ncontext = 0\n"
    not_yet(2, code, "differ")


def test_ex3_wrong_answers():
    # the solution's workload under arrival order: radix does not lose
    not_yet(3, with_lines(3, schedule_policy="'fcfs'"), "lpm")
    not_yet(3, with_lines(3, capacity_tokens="100_000"), "holds the whole workload")
    not_yet(3, with_lines(3, workload="[1, 2]"), "not a Request")
    not_yet(3, with_lines(3, workload="[]"), "empty")
    not_yet(3, with_lines(3, workload="workload + [Request(0, 0, [1, 2], 1)]"), "refused", "unique")
    not_yet(3, with_lines(3, workload="workload + [Request(99, 0, list(range(500)), 1)]"), "rejected")
    not_yet(3, with_lines(3, schedule_policy="'random'"), "schedule_policy")
    not_yet(3, with_lines(3, capacity_tokens="'lots'"), "capacity_tokens")


def test_ex4_wrong_answers():
    h = not_yet(4, with_lines(4, knee_batch="round(ridge)"), "ridge_batch")
    knee = namespace(solution(4))[0]["knee_batch"]
    assert str(knee) not in h
    # the course profile's knee (the roofline at 70% / 50% of the peaks) is not the calibrated one
    course = solution(4).replace('profile="measured"', 'profile="course"')
    h = not_yet(4, course, "course profile")
    assert str(knee) not in h
    not_yet(4, with_lines(4, knee_batch="10"), "too early")
    not_yet(4, with_lines(4, knee_batch="120"), "too late")
    not_yet(4, with_lines(4, knee_batch="'forty'"), "number")
    no_plot = solution(4).replace("plot.line(", "(lambda *a, **k: None)(")
    not_yet(4, no_plot, "plot.line")


def test_ex4_knee_follows_the_context():
    # at context 2000 each sequence's KV read moves the knee; the checker uses the learner's context
    r = run(4, solution(4).replace("context = 0 ", "context = 2000 "))
    assert r["verdict"] == "correct", r["hint"]
    ref0 = run(4, solution(4))
    knee = namespace(solution(4))[0]["knee_batch"]
    assert f"batch {knee}" in ref0["hint"]  # the hint after "correct" may name the learner's own number
    assert "mat-vec" in ref0["hint"] and "mat-mat" in ref0["hint"]


# ---------------------------------------------------------------------------------------------------------
# The runner: errors, output, isolation
# ---------------------------------------------------------------------------------------------------------
def test_traceback_starts_in_the_learners_code():
    r = run(2, "import perf_model\n\ndef f(x):\n    return 1 / x\n\nf(0)\n")
    assert r["verdict"] == "not yet" and "error" in r["hint"]
    tb = r["error"]
    assert tb.startswith("Traceback (most recent call last):")
    assert 'File "<exercise 2>", line 6, in <module>' in tb
    assert "return 1 / x" in tb  # the source line is shown
    assert tb.rstrip().endswith("ZeroDivisionError: division by zero")
    assert "exercises.py" not in tb and "run_cell" not in tb


def test_errors_inside_the_library_keep_their_frames_and_message():
    r = run(
        2,
        "from perf_model import MODELS, MACHINES, place\nplace(MODELS['qwen2.5-14b'], MACHINES['rtx3060'], "
        "'Q4_K_M', n_gpu_layers=-1)\n",
    )
    assert "n_gpu_layers: must be None (auto) or an integer from 0 to 65,536" in r["error"]
    assert "perf_model/placement.py" in r["error"] and "exercises.py" not in r["error"]


@pytest.mark.parametrize(
    "code,last",
    [
        ("x = (\n", "SyntaxError: '(' was never closed"),
        ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
        ("raise KeyboardInterrupt\n", "KeyboardInterrupt"),
        ("def f():\n    return f()\nf()\n", "RecursionError: maximum recursion depth exceeded"),
    ],
)
def test_runner_survives(code, last):
    r = run(3, code)
    assert last in r["error"], r["error"]
    assert r["verdict"] == "not yet"


def test_output_is_captured_and_capped():
    r = run(1, "print('hello')\nimport sys\nprint('oops', file=sys.stderr)\n")
    assert r["stdout"] == "hello\n" and r["stderr"] == "oops\n"
    r = run(1, "for i in range(100000):\n    print('x' * 50)\n")
    assert len(r["stdout"]) < ex.MAX_OUTPUT_CHARS + 200 and "output cut" in r["stdout"]


def test_each_run_starts_from_a_fresh_namespace():
    assert run(1, solution(1))["verdict"] == "correct"
    r = run(1, "print('nothing')\n")
    assert r["verdict"] == "not yet" and "file_gb is not defined" in r["hint"]


def test_learner_cannot_change_the_reference():
    code = (
        "import perf_model\nperf_model.decode_step_time = lambda *a, **k: {'tok_per_s': 1.0, 'gpu_bound': 'memory'}\n"
        "knee_batch = 1\n"
    )
    r = run(4, code)
    assert r["verdict"] == "not yet" and "too early" in r["hint"]


def test_a_cell_cannot_change_the_course_modules_for_later_cells():
    dst, models, gb = pm.decode_step_time, dict(pm.MODELS), pm.GB
    code = (
        "import perf_model, kv_managers\nperf_model.decode_step_time = None\nperf_model.GB = 1\n"
        "perf_model.MODELS['llama-3.1-8b'] = None\ndel perf_model.MODELS['qwen2.5-14b']\n"
        "perf_model.EXTRA = 1\nkv_managers.simulate = print\n"
    )
    run(3, code)
    assert pm.decode_step_time is dst and pm.GB == gb and pm.MODELS == models and not hasattr(pm, "EXTRA")
    assert kvm.simulate.__name__ == "simulate"
    # and the next cell computes with the real library
    assert run(2, solution(2))["verdict"] == "correct"


def test_unknown_exercise():
    with pytest.raises(KeyError, match="unknown exercise 7"):
        ex.run_cell(7, "")


# ---------------------------------------------------------------------------------------------------------
# The page's cells
# ---------------------------------------------------------------------------------------------------------
def test_render_cells():
    html = ex.render_cells()
    assert html.count('<script type="py-editor" env="lab"') == 4
    for n in range(1, 5):
        assert f'id="ex{n}-solution"' in html and f'id="ex{n}-starter"' in html
        assert ex.EXERCISES[n].starter in html
    # the module's imports, as the module writes them
    assert "from kv_managers import Request, RadixManager, PagedManager, simulate" in html
    assert "from perf_model import MODELS, GB, Device, Machine, DDR5_DUAL" in html
    with pytest.raises(ValueError, match="script"):
        ex._script_text("x = '</script>'", "test")


# ---------------------------------------------------------------------------------------------------------
# plot
# ---------------------------------------------------------------------------------------------------------
def test_line_is_accessible_and_escaped():
    s = plot.line(
        [0, 1, 2], [3.0, 4.5, 6.0], title="A <b>&</b> chart", xlabel="-ngl", ylabel="tok/s", marks={"knee": 1}
    )
    assert isinstance(s, str) and s.startswith("<svg ")
    assert 'role="img"' in s and "aria-labelledby=" in s
    assert "<title id=" in s and "A &lt;b&gt;&amp;&lt;/b&gt; chart" in s and "<b>" not in s
    desc = re.search(r"<desc[^>]*>(.*?)</desc>", s).group(1)
    assert "tok/s against -ngl, 3 points" in desc and "from 3 to 6" in desc and "Mark knee at -ngl 1" in desc
    assert 'class="plot-line plot-s0"' in s and "fill=" not in s and "stroke=" not in s  # colours are CSS
    assert s.count('class="plot-dot plot-s0"') == 3
    assert s.rows == [["0", "3"], ["1", "4.5"], ["2", "6"]] and s.header == ["-ngl", "tok/s"]
    assert "<table" in s.html() and "<details" in s.html()
    assert (
        plot.line(
            [0, 1, 2], [3.0, 4.5, 6.0], title="A <b>&</b> chart", xlabel="-ngl", ylabel="tok/s", marks={"knee": 1}
        )
        == s
    )  # same input, same bytes


def test_line_several_series_and_log_axes():
    s = plot.line(
        [1, 10, 100],
        [[1, 2, 3], [2, 4, 8]],
        series=["f16", "q8_0"],
        title="t",
        xlabel="x",
        ylabel="y",
        log_x=True,
        log_y=True,
    )
    assert 'class="plot-line plot-s1"' in s and "plot-legend" in s and ">q8_0<" in s
    assert s.header == ["x", "f16", "q8_0"]


@pytest.mark.parametrize(
    "kw,msg",
    [
        (dict(xs=[1, 2], ys=[1]), "ys has 1 values but xs has 2"),
        (dict(xs=[1, 2], ys=[1, float("nan")]), "ys[1] is nan"),
        (dict(xs=[1, 2], ys=[1, "a"]), "ys[1] is 'a', not a number"),
        (dict(xs=[0, 2], ys=[1, 2], log_x=True), "xs[0] is 0.0; a logarithmic axis needs values > 0"),
        (dict(xs=[], ys=[]), "xs is empty"),
        (dict(xs=[1], ys=[[1], [2]], series="one"), "series must be a list of 2 names"),
        (dict(xs=[1], ys=[1], marks="knee"), "marks must be a dict"),
        (dict(xs=5, ys=[1]), "xs must be a list of numbers, got int"),
    ],
)
def test_line_rejects_bad_input_clearly(kw, msg):
    with pytest.raises(ValueError) as e:
        plot.line(title="t", xlabel="x", ylabel="y", **kw)
    assert str(e.value).startswith("plot.line: ") and msg in str(e.value), str(e.value)


def test_bars():
    s = plot.bars(["F16", "Q8_0", "Q4_K_M"], [16.1, 8.5, 4.9], title="File size", ylabel="GB", marks={"VRAM": 12})
    assert s.count('class="plot-bar plot-s0"') == 3 and 'role="img"' in s
    assert "highest F16 at 16.1, lowest Q4_K_M at 4.9" in s and "Mark VRAM at 12" in s
    with pytest.raises(ValueError, match="plot.bars: values has 2 numbers but labels has 3"):
        plot.bars(["a", "b", "c"], [1, 2], title="t", ylabel="y")


def test_capture_collects_only_inside_the_block():
    plot.line([0, 1], [0, 1], title="outside", xlabel="x", ylabel="y")
    with plot.capture() as shown:
        a = plot.line([0, 1], [0, 1], title="inside", xlabel="x", ylabel="y")
        b = plot.bars(["a"], [1], title="bar", ylabel="y")
    assert shown == [a, b]


def test_golden_line_svg():
    s = plot.line(
        list(range(0, 50, 7)),
        [4.2 + i * i * 0.01 for i in range(0, 50, 7)],
        title="Decode vs -ngl",
        xlabel="-ngl",
        ylabel="tok/s",
        marks={"full offload": 49},
    )
    golden("plot-line", s, newline=True)
