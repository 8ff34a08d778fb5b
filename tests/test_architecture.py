"""The shape of the code: the import graph has no circle, the layers import only downwards, figures share no
private names, and the calculator family computes one Scenario per state."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import perf_model as pm
from enginelab import explain, scenario
from enginelab.figures import advisor as fig_advisor
from enginelab.figures import calculator as calc

PYLIB = Path(__file__).resolve().parents[1] / "pylib"
COURSE = ("perf_model", "inference_trace", "kv_managers")
# below perf_model: the pieces it is built from (they import nothing above them)
BELOW_COURSE = (
    "enginelab.checks",
    "enginelab.blocks",
    "enginelab.arch_config",
    "enginelab.arch_gguf",
    "enginelab.ggml",
    "enginelab.engine_io",
    "enginelab.gguf_header",
    "enginelab.measured",
)


def _modules() -> dict[str, Path]:
    out = {}
    for f in PYLIB.rglob("*.py"):
        rel = f.relative_to(PYLIB).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


MODULES = _modules()


def _resolve(module: str, level: int, name: str | None, is_pkg: bool) -> str:
    if level == 0:
        return name or ""
    base = module.split(".")
    base = base if is_pkg else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _imports(module: str) -> list[tuple[str, list[str]]]:
    """(imported module, names) for every import statement anywhere in the module (functions included)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node.level, node.module, is_pkg)
            names = [a.name for a in node.names]
            # `from . import x` imports the module x when it is one
            for n in names:
                if f"{target}.{n}" in MODULES:
                    out.append((f"{target}.{n}", []))
            out.append((target, names))
    return out


def _graph() -> dict[str, set[str]]:
    g = {}
    for m in MODULES:
        deps = set()
        for target, _names in _imports(m):
            # the longest known module prefix of the target (a.b.c -> a.b when c is a name in it)
            parts = target.split(".")
            while parts and ".".join(parts) not in MODULES:
                parts.pop()
            if parts and ".".join(parts) != m:
                deps.add(".".join(parts))
        g[m] = deps
    return g


def _cycles(g: dict[str, set[str]]) -> list[list[str]]:
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in g:
        if v not in index:
            strong(v)
    return out


def test_the_graph_sees_every_module_and_a_known_edge():
    g = _graph()
    assert {"perf_model", "enginelab.scenario", "enginelab.figures.calculator"} <= set(g)
    assert "enginelab.ggml" in g["perf_model.models"] and "perf_model" in g["enginelab.scenario"]
    # a made-up circle is found (the detector itself works)
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]


def test_the_import_graph_has_no_circle():
    assert _cycles(_graph()) == []


def test_layers_import_only_downwards():
    g = _graph()
    app = [m for m in g if m.startswith("enginelab.") and m not in BELOW_COURSE and m != "enginelab.data"]
    for m in BELOW_COURSE:
        assert not (g[m] & (set(COURSE) | set(app))), f"{m} imports above itself: {g[m]}"
    for m in [m for m in g if m.split(".")[0] in COURSE]:  # a course package's submodules too
        above = {d for d in g[m] if d.startswith("enginelab.") and d not in BELOW_COURSE}
        assert not above, f"course module {m} imports the app: {above}"


def test_no_figure_imports_another_figures_private_names():
    for m in MODULES:
        if not m.startswith("enginelab.figures."):
            continue
        for target, names in _imports(m):
            if target.startswith("enginelab.figures.") and target != m:
                private = [n for n in names if n.startswith("_")]
                assert not private, f"{m} imports {private} from {target}"


def test_only_three_course_modules_at_the_top_of_the_wheel():
    top = {m for m in MODULES if "." not in m and m != "enginelab"}
    assert top == set(COURSE)


# -- one Scenario per state -----------------------------------------------------------------------------
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


_SECONDS = {"µs": 1e-6, "ms": 1e-3, "s": 1.0}


def _secs(text: str) -> float:
    v, unit = re.fullmatch(r"([\d.,]+) (µs|ms|s)", text.strip()).groups()
    return float(v.replace(",", "")) * _SECONDS[unit]


def _decode_box(gpu, quant: str) -> str:
    """The measured decode box (plain text) of the calculator's default scenario with llama-3.1-8b on one library
    Device (the app's machines hold no SYCL, Intel or Pascal GPU)."""
    import html
    from dataclasses import replace

    d = calc.compute(calc.SPEC.from_query("?profile=measured&model=llama-3.1-8b")[0])
    mc = pm.Machine(gpu.name + " host", gpu, d.machine.ram, 16.0)
    p = pm.place(d.model, mc, quant, profile="measured")
    scn = replace(
        d,
        machine=mc,
        placement=p,
        decode=pm.decode_step_time(p, context=d.decode["context"], profile="measured"),
        prefill=pm.prefill_time(p, n_tokens=d.prefill["n_tokens"], profile="measured"),
    )
    return html.unescape(explain.explain(scn)["decode_tok_s"])


def test_a_sycl_gpus_decode_box_names_the_share_of_types_without_a_reordered_kernel():
    """A library Device on SYCL (the app's machines have none): the measured decode box says what a type without a
    reordered ggml-sycl kernel streams at (measured.sycl_plain); a CUDA box does not."""
    import html

    from enginelab import measured as me

    d = calc.compute(calc.SPEC.from_query("?profile=measured&model=llama-3.1-8b")[0])
    assert d.profile == "measured" and "reordered SYCL kernel" not in html.unescape(explain.explain(d)["decode_tok_s"])
    box = _decode_box(pm.Device("Intel Arc B580", 12, 456, 116.5, backend="sycl"), "Q4_K_M")
    assert html.unescape(explain.basis_text("sycl", "decode")) in box  # the basis: SYCL's fit, its runs and devices
    assert (
        f"without a reordered SYCL kernel (IQ types, MXFP4, Q4_1, Q5_0) streams at {me.PARAMS['sycl'].sycl_plain:.2f}×"
        in box
    )
    assert "float mat-vec shader" not in box and "logits copied back over PCIe" in box


def test_an_intel_gpus_vulkan_decode_box_names_the_float_legacy_shader_and_an_nvidia_box_does_not():
    """On Vulkan, Intel GPUs keep Q4_0 and Q5_1 on the float mat-vec shader (measured.vendor_legacy): the decode box
    says how much faster those stream; the same box for an NVIDIA card on Vulkan does not."""
    from enginelab import measured as me

    f = me.PARAMS["vulkan"].vendor_legacy["intel"]
    for name, bw, expect in (("Intel Arc B580", 456, True), ("GeForce RTX 4070", 504, False)):
        box = _decode_box(pm.Device(name, 12, bw, 116.5, backend="vulkan"), "Q4_0")
        assert (f"on this vendor's float mat-vec shader, stream at {f:.2f}× that" in box) is expect, name


def test_a_pascal_gpus_cuda_decode_box_says_it_has_no_cuda_graphs():
    """ggml-cuda replays no graphs on a Pascal GPU (measured.cuda_graphs): the decode box names the per-block launch
    cost; an Ampere card's box does not."""
    from enginelab import measured as me

    us = me.PARAMS["cuda"].nograph_layer_us
    for name, expect in (("GeForce GTX 1080 Ti", True), ("GeForce RTX 3090", False)):
        box = _decode_box(pm.Device(name, 11, 484, 11.3, backend="cuda"), "Q4_0")
        text = f"no CUDA graphs on this GPU: every kernel launched by the host, {us:.0f} µs more per block"
        assert (text in box) is expect, name


@pytest.mark.parametrize("q", ["", "?machine=cpu-ddr5", "?model=llama-3.1-8b&machine=rtx4090", "?machine=m4max"])
def test_explain_results_add_up_to_the_readout(q):
    d = calc.compute(calc.SPEC.from_query(q)[0])
    e = explain.explain(d)
    # VRAM and RAM: "a GB (weights) + b GB (KV) + c GB (compute) = total GB"
    for name in ("vram_gb", "ram_gb"):
        result = re.search(r"Result: </span>(.*?)</p>", e[name]).group(1)
        terms = [float(x) for x in re.findall(r"([\d.,]+) GB \(", result)]
        total = float(re.search(r"= ([\d.,]+) GB", result).group(1))
        assert total == pytest.approx(getattr(d.readouts, name), abs=0.006)
        assert sum(terms) == pytest.approx(total, abs=0.02)
    # decode: "t_token = x (GPU) + y (CPU) + z (overhead) = total → rate tok/s"
    result = re.search(r"Result: </span>t_token = (.*?) →", e["decode_tok_s"]).group(1)
    parts, total = result.rsplit(" = ", 1)
    terms = [_secs(t.split(" (")[0]) for t in parts.split(" + ")]
    assert _secs(total) == pytest.approx(d.decode["total_s"], rel=0.01)
    # each printed term is rounded (0.1 ms): their sum may differ from the rounded total by half a unit per term
    assert sum(terms) == pytest.approx(_secs(total), rel=0.01, abs=0.05e-3 * (len(terms) + 1))
