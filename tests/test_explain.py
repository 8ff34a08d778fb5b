"""enginelab.explain, "How is this computed?": each calculator box adds up to its readout, and the measured decode
box names the backend effects that apply to the device (and only those)."""

from __future__ import annotations

import re

import pytest

import perf_model as pm
from enginelab import explain
from enginelab.figures import calculator as calc

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
