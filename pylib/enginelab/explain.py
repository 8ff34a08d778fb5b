"""'How is this computed?' for every number of the fit-and-speed calculator.

    explain(state) -> {readout_name: html}

`state` is the calculator's state (figures/calculator.py SPEC: model, machine, quant, kv, ctx, ngl, tokens,
n_cpu_moe). Each value is a self-contained <details class="explain" data-explain="<readout>"> fragment, built
with svg.el (every text escaped): the formula in the engine's terms, the inputs with their values for this
state, and the result, all recomputed here from perf_model's public functions (place, decode_step_time,
prefill_time, kv_cache_bytes, compute_buffer_bytes and the ETA_* constants), so it always agrees with the
readout it explains. Names: n_gpu_layers, vram_gb, ram_gb, decode_tok_s, prefill_tok_s, cpu_share, fits.
"""

from __future__ import annotations

import perf_model as pm

from . import fmt
from .svg import Raw, el

NAMES = ("n_gpu_layers", "vram_gb", "ram_gb", "decode_tok_s", "prefill_tok_s", "cpu_share", "fits")


def _box(name: str, formula: str, inputs: list, result: str, note: str = "") -> Raw:
    rows = [el("div", [el("dt", k), el("dd", v)], class_="explain-input") for k, v in inputs]
    body = [
        el("p", [el("span", "Formula: ", class_="explain-k"), el("code", formula)], class_="explain-formula"),
        el("dl", rows, class_="explain-inputs"),
        el("p", [el("span", "Result: ", class_="explain-k"), result], class_="explain-result"),
    ]
    if note:
        body.append(el("p", note, class_="explain-note"))
    return el("details", [el("summary", "How is this computed?")] + body, class_="explain", data_explain=name)


def _gb(b) -> str:
    return fmt.gb(b, 2)


def explain(state) -> dict:
    """{readout: html} for the calculator state (see the module docstring)."""
    from .figures import calculator  # resolves your own config.json, GGUF file or machine too

    sd = state.as_dict() if hasattr(state, "as_dict") else dict(vars(state))
    model, mc = calculator._model(sd), calculator._machine(sd)
    quant = None if getattr(state, "model", "") == "gguf" else state.quant
    ngl = None if state.ngl == "auto" else state.ngl
    try:
        p = pm.place(model, mc, quant, n_ctx=state.ctx, kv_type=state.kv, n_gpu_layers=ngl, n_cpu_moe=state.n_cpu_moe)
    except ValueError as e:
        msg = f"perf_model rejects these settings: {e}"
        return {k: str(_box(k, "—", [], msg)) for k in NAMES}
    n = model.num_hidden_layers
    out = {}
    margin = p.fit_margin
    kv_tok_layer = pm.kv_bytes_per_token_layer(model, state.kv)

    # -- n_gpu_layers --------------------------------------------------------------------------------------
    if mc.gpu is None:
        out["n_gpu_layers"] = _box(
            "n_gpu_layers", "no GPU: -ngl 0", [("Machine", mc.name)], "0", "Every layer runs from system RAM."
        )
    elif p.auto:
        nxt = None
        if p.n_gpu_layers < n + 1:
            q = pm.place(
                model,
                mc,
                quant,
                n_ctx=state.ctx,
                kv_type=state.kv,
                n_gpu_layers=p.n_gpu_layers + 1,
                n_cpu_moe=state.n_cpu_moe,
            )
            nxt = q.gpu_total
        inputs = [
            ("GPU capacity", _gb(p.gpu_capacity) + (f" ({mc.gpu_share:.0%} of unified memory)" if mc.unified else "")),
            ("--fit-target margin", f"{pm.FIT_TARGET_MIB} MiB = {_gb(margin)}"),
            (f"GPU total at -ngl {p.n_gpu_layers}", _gb(p.gpu_total)),
        ]
        if nxt is not None:
            inputs.append((f"GPU total at -ngl {p.n_gpu_layers + 1}", _gb(nxt) + " (does not fit)"))
        out["n_gpu_layers"] = _box(
            "n_gpu_layers",
            "ngl = the largest value in 0 … n_layers + 1 with GPU total(ngl) + margin ≤ capacity",
            inputs,
            f"{p.n_gpu_layers} of {n + 1} (n_layers + 1 also moves the output head)",
            "What llama.cpp's --fit picks when -ngl is left on auto.",
        )
    else:
        out["n_gpu_layers"] = _box(
            "n_gpu_layers",
            "ngl = the -ngl you set",
            [("-ngl", str(p.n_gpu_layers))],
            f"{p.n_gpu_layers} of {n + 1}",
            "An explicit -ngl is used as given; if it does not fit, the load fails.",
        )

    # -- vram_gb / ram_gb ----------------------------------------------------------------------------------
    gl = p.gpu_layers
    pm.compute_buffer_bytes(model, p.n_ubatch)
    out["vram_gb"] = _box(
        "vram_gb",
        "VRAM = weights of the GPU layers (+ output head) + KV of the GPU layers + compute buffer",
        [
            ("Weights on the GPU", _gb(p.gpu_weights) + f" ({gl} blocks{', output head' if p.output_on_gpu else ''})"),
            (
                "KV cache on the GPU",
                f"{_gb(p.gpu_kv)} = {fmt.integer(kv_tok_layer)} B per token per layer "
                f"× n_ctx {state.ctx:,} × {gl} layers ({state.kv})",
            ),
            (
                "Compute buffer",
                f"{_gb(p.gpu_compute)}"
                + (f" = 4 B × n_ubatch {p.n_ubatch} × (vocab + 3 × ffn)" if p.gpu_compute else ""),
            ),
        ],
        f"{p.gpu_total / pm.GB:.2f} GB",
        "Sliding-window layers hold only their window of KV." if model.sliding_window else "",
    )
    out["ram_gb"] = _box(
        "ram_gb",
        "RAM = weights of the CPU layers + token_embd (+ output head) + their KV + host buffer",
        [
            (
                "Weights in RAM",
                _gb(p.cpu_weights)
                + f" ({n - gl} blocks, token_embd"
                + ("" if p.output_on_gpu else ", output head")
                + ")",
            ),
            (
                "KV cache in RAM",
                f"{_gb(p.cpu_kv)} = {fmt.integer(kv_tok_layer)} B per token per layer "
                f"× n_ctx {state.ctx:,} × {n - gl} layers",
            ),
            ("Host compute buffer", _gb(p.cpu_compute)),
        ],
        f"{p.cpu_total / pm.GB:.2f} GB",
        "token_embd stays in host memory: a lookup reads one row of it."
        + (f" {state.n_cpu_moe} layers keep their experts in RAM (--n-cpu-moe)." if state.n_cpu_moe else ""),
    )

    # -- fits ------------------------------------------------------------------------------------------------
    if mc.gpu is not None:
        fit_inputs = [
            ("GPU total + margin", f"{_gb(p.gpu_total)} + {_gb(margin)} = {_gb(p.gpu_total + margin)}"),
            ("GPU capacity", _gb(p.gpu_capacity)),
        ]
    else:
        fit_inputs = []
    fit_inputs.append(("RAM total", f"{_gb(p.cpu_total)} of {_gb(p.cpu_capacity)}"))
    out["fits"] = _box(
        "fits",
        "fits = GPU total + margin ≤ GPU capacity, and RAM total ≤ RAM"
        + (" (unified: both from one pool)" if mc.unified else ""),
        fit_inputs,
        "yes" if p.fits else f"no: {p.error}",
    )

    # -- speeds ------------------------------------------------------------------------------------------------
    if not p.fits:
        why = "Not computed: this placement would fail to allocate, so llama.cpp would not run."
        for k in ("decode_tok_s", "prefill_tok_s", "cpu_share"):
            out[k] = _box(k, "—", [], why)
        return {k: str(v) for k, v in out.items()}
    d = pm.decode_step_time(p, mc, context=state.tokens)
    f = pm.prefill_time(p, mc, state.tokens)
    bw_g = mc.gpu.bandwidth if mc.gpu is not None else 0.0
    dec_inputs = []
    if d["gpu_bytes"]:
        dec_inputs.append(
            (
                "GPU bytes per token",
                f"{_gb(d['gpu_bytes'])} (weights {_gb(d['gpu_weight_bytes'])}"
                f" + KV {_gb(d['gpu_kv_bytes'])} at {state.tokens:,} tokens)",
            )
        )
        dec_inputs.append(
            (
                "GPU time",
                f"{fmt.seconds(d['gpu_s'])} = bytes / ({pm.ETA_DECODE} × "
                f"{bw_g / pm.GB:,.0f} GB/s), {d['gpu_bound']}-bound",
            )
        )
    if d["cpu_bytes"]:
        dec_inputs.append(
            (
                "CPU bytes per token",
                f"{_gb(d['cpu_bytes'])} (weights {_gb(d['cpu_weight_bytes'])} + KV {_gb(d['cpu_kv_bytes'])})",
            )
        )
        dec_inputs.append(
            (
                "CPU time",
                f"{fmt.seconds(d['cpu_s'])} = bytes / ({pm.ETA_DECODE} × "
                f"{mc.ram.bandwidth / pm.GB:,.1f} GB/s), {d['cpu_bound']}-bound",
            )
        )
    dec_inputs.append(("Fixed overhead per token", fmt.seconds(d["overhead_s"])))
    out["decode_tok_s"] = _box(
        "decode_tok_s",
        "t_token = Σ_devices max(bytes_d / (η_decode × bandwidth_d), FLOPs_d / (η_prefill × "
        "peak_d)) + overhead;  tok/s = 1 / t_token",
        dec_inputs,
        f"t_token = {fmt.seconds(d['total_s'])} → {fmt.rate(d['tok_per_s'])} tok/s",
        f"η_decode = {pm.ETA_DECODE} of peak bandwidth (the module's assumption). Every weight a token uses is read "
        f"once per token, plus the KV cache of the context.",
    )
    pre_inputs = [
        ("Prompt tokens", f"{state.tokens:,} in {f['n_micro_batches']} micro-batch(es) of n_ubatch {f['n_ubatch']}"),
        ("Matmul + attention FLOPs", f"{f['flops']:.3g}"),
    ]
    for kind, t in sorted(f["parts_s"].items()):
        pre_inputs.append((f"Time on {kind}", fmt.seconds(t)))
    out["prefill_tok_s"] = _box(
        "prefill_tok_s",
        "per micro-batch and device: FLOPs / (η_prefill × peak FLOP/s) + weight bytes / "
        "(η_prefill × bandwidth) [+ PCIe copy of CPU weights with op offload];  "
        "tok/s = tokens / Σ time",
        pre_inputs,
        f"{fmt.seconds(f['total_s'])} → {fmt.rate(f['tok_per_s'])} tok/s",
        f"η_prefill = {pm.ETA_PREFILL} of peak FP16 tensor throughput (the module's assumption).",
    )
    out["cpu_share"] = _box(
        "cpu_share",
        "CPU share = CPU time per token / total time per token",
        [("CPU time", fmt.seconds(d["cpu_s"])), ("Total time", fmt.seconds(d["total_s"]))],
        fmt.pct(d["cpu_s"] / d["total_s"]),
        "The part of each decode step spent reading weights and KV from system RAM.",
    )
    return {k: str(v) for k, v in out.items()}
