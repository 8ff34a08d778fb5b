"""'How is this computed?' for every number of the fit-and-speed calculator.

    explain(scn) -> {readout_name: html}

`scn` is the calculator's Scenario (enginelab.scenario.build): its placement, decode and prefill are the very
objects the readouts show, so every box substitutes the same numbers into its formula and adds them up to
the readout (the terms in a "Result" line sum to the number it ends with; tests check this). Nothing is
recomputed here. Each value is a self-contained <details class="explain" data-explain="<readout>"> fragment,
built with svg.el (every text escaped): the formula in the engine's terms, the inputs for this state, and the
result. Names: n_gpu_layers, vram_gb, ram_gb, decode_tok_s, prefill_tok_s, cpu_share, verdict.
"""

from __future__ import annotations

import perf_model as pm

from . import fmt
from . import measured as me
from .measured.builds import feature_name
from .svg import Raw, el

NAMES = ("verdict", "n_gpu_layers", "vram_gb", "ram_gb", "decode_tok_s", "prefill_tok_s", "cpu_share")

# measured.cpu_core_family, as the explanation names it
_CORE_FAMILY = {"apple": "Apple", "arm": "Arm", "intel": "Intel", "amd": "AMD"}


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


def _sum(terms: list, total: str) -> str:
    """'a (what) + b (what) = total': a Result line whose terms add up to the readout."""
    return " + ".join(f"{v} ({what})" for v, what in terms) + f" = {total}"


_KIND_WORDS = {"full": "global", "swa": "sliding", "mla": "MLA", "recurrent": "recurrent"}


def kv_groups(model, p, layers) -> list:
    """The KV cache of `layers` under placement p, by kind of block (in the order llama.cpp logs them):
    [(kind, blocks, cells per block, bytes per cell, bytes)], where a recurrent group's "cells" are its states
    (one per sequence) and its bytes per cell a state's bytes (perf_model.kv_layer_bytes)."""
    groups: dict = {}
    for il in layers:
        kind = model.layer_kind(il)
        if kind == "none":  # no cache of its own (no attention, or an earlier block's cache)
            continue
        if kind == "recurrent":
            cells, per = p.n_seq, float(pm.recurrent_state_bytes(model, il))
        else:
            cells = pm.kv_cells(model, il, p.n_ctx, p.n_seq, p.n_ubatch, p.kv_unified)
            per = pm.kv_bytes_per_token_layer(model, p.kv_type, il)
        g = groups.setdefault((kind, cells), [kind, 0, cells, per, 0.0])
        g[1] += 1
        g[4] += cells * per
    order = {"full": 0, "mla": 1, "swa": 2, "recurrent": 3}
    return [tuple(g) for _k, g in sorted(groups.items(), key=lambda kv: (order[kv[0][0]], -kv[0][1]))]


def kv_breakdown_text(model, p, layers) -> str:
    """'8 global × 32,768 cells + 40 sliding × 1,536 cells, 8,192 B per cell' (+ recurrent states): what one
    device's KV cache holds, by kind of block."""
    groups = kv_groups(model, p, layers)
    if not groups:
        return "no blocks here"
    cached = [g for g in groups if g[0] != "recurrent"]
    parts = []
    for kind, n, cells, _per, _b in cached:
        word = "chunked" if kind == "swa" and model.chunked_attention else _KIND_WORDS[kind]
        unit = "layer" if n == 1 else "layers"
        parts.append(f"{n} {word} {unit} × {fmt.integer(cells)} cells")
    text = " + ".join(parts)
    if len({g[3] for g in cached}) > 1:  # blocks of different widths (Gemma 4's global and sliding heads)
        text = (
            " + ".join(f"{part} × {fmt.integer(g[3])} B per cell" for part, g in zip(parts, cached, strict=True))
            + f" (K and V, {p.kv_type})"
        )
    elif cached:
        per = cached[0][3]
        what = (
            f"the latent: {model.kv_lora_rank} + {model.qk_rope_head_dim} elements"
            if model.is_mla
            else f"K and V: 2 × {model.num_key_value_heads} KV heads × {model.d_head}"
        )
        text = f"({text}) × {fmt.integer(per)} B per cell ({what}, {p.kv_type})"
    for kind, n, cells, per, _b in groups:
        if kind == "recurrent":
            seqs = "sequence" if cells == 1 else "sequences"
            text += (" + " if cached else "") + (
                f"{n} recurrent layers × {cells} {seqs} × {fmt.integer(per)} B of state (f32, any context)"
            )
    return text


def kv_cells_note(model, p) -> str:
    """How llama.cpp sized the cells of these settings (only what applies)."""
    notes = []
    if any(model.layer_kind(il) == "swa" for il in range(model.num_hidden_layers)):
        word = "chunk" if model.chunked_attention else "window"
        notes.append(
            f"A {'chunked' if model.chunked_attention else 'sliding'} layer keeps PAD(min(n_ctx, {word} "
            f"{model.sliding_window:,} + n_ubatch {p.n_ubatch}), 256) cells (llama.cpp's iSWA cache), a global "
            "one n_ctx padded to 256."
        )
    if model.is_mla:
        notes.append("MLA caches the compressed latent once per token, not per-head K and V.")
    if any(model.is_recurrent_layer(il) for il in range(model.num_hidden_layers)):
        notes.append("A recurrent (linear-attention) layer keeps a fixed state per sequence instead of a cache.")
    shared = sum(1 for b in model.blocks if getattr(b.mixer, "kv_shared_from", -1) >= 0)
    if shared:
        notes.append(f"{shared} layers read an earlier layer's cache and keep none of their own.")
    bm = model.carried_blocks
    if bm is not None:  # what the reader could not verify or infer
        notes += [f"{w[:1].upper()}{w[1:]}." for w in bm.warnings]
        notes += [f"Not in the file: {u}." for u in bm.unknown[:5]]
    return " ".join(notes)


def explain(scn) -> dict:
    """{readout: html} for a calculator Scenario (see the module docstring)."""
    p, mc, model = scn.placement, scn.machine, scn.model
    if p is None:
        msg = f"perf_model rejects these settings: {scn.error}"
        return {k: str(_box(k, "—", [], msg)) for k in NAMES}
    n = model.num_hidden_layers
    out = {}
    margin = p.fit_margin
    gl = p.gpu_layers
    gpu_blocks = [il for il in range(n) if p.layer_device[il] == "gpu"]
    cpu_blocks = [il for il in range(n) if p.layer_device[il] == "cpu"]

    # -- n_gpu_layers --------------------------------------------------------------------------------------
    if mc.multi_gpu:
        out["n_gpu_layers"] = _ngl_multi(p)
    elif mc.gpu is None:
        out["n_gpu_layers"] = _box(
            "n_gpu_layers", "no GPU: -ngl 0", [("Machine", mc.name)], "0", "Every layer runs from system RAM."
        )
    elif p.auto:
        inputs = [
            ("GPU capacity", _gb(p.gpu_capacity) + (f" ({mc.gpu_share:.0%} of unified memory)" if mc.unified else "")),
            ("--fit-target margin", f"{pm.FIT_TARGET_MIB} MiB = {_gb(margin)}"),
            (f"GPU total at -ngl {p.n_gpu_layers}", _gb(p.gpu_total)),
        ]
        if p.fit_next_gpu_total is not None:
            inputs.append((f"GPU total at -ngl {p.n_gpu_layers + 1}", _gb(p.fit_next_gpu_total) + " (does not fit)"))
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
    vram = _vram_multi(p) if mc.multi_gpu else None
    out["vram_gb"] = vram or _box(
        "vram_gb",
        "VRAM = weights of the GPU layers (+ output head) + KV of the GPU layers + compute buffer",
        [
            ("Weights on the GPU", _gb(p.gpu_weights) + f" ({gl} blocks{', output head' if p.output_on_gpu else ''})"),
            ("KV cache on the GPU", f"{_gb(p.gpu_kv)} = {kv_breakdown_text(model, p, gpu_blocks)}"),
            (
                "Compute buffer",
                f"{_gb(p.gpu_compute)}"
                + (f" = 4 B × n_ubatch {p.n_ubatch} × (vocab + 3 × ffn)" if p.gpu_compute else ""),
            ),
        ],
        _sum(
            [(_gb(p.gpu_weights), "weights"), (_gb(p.gpu_kv), "KV"), (_gb(p.gpu_compute), "compute")],
            f"{p.gpu_total / pm.GB:.2f} GB",
        ),
        kv_cells_note(model, p),
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
            ("KV cache in RAM", f"{_gb(p.cpu_kv)} = {kv_breakdown_text(model, p, cpu_blocks)}"),
            ("Host compute buffer", _gb(p.cpu_compute)),
        ],
        _sum(
            [(_gb(p.cpu_weights), "weights"), (_gb(p.cpu_kv), "KV"), (_gb(p.cpu_compute), "buffer")],
            f"{p.cpu_total / pm.GB:.2f} GB",
        ),
        "token_embd stays in host memory: a lookup reads one row of it."
        + (f" {p.n_cpu_moe} layers keep their experts in RAM (--n-cpu-moe)." if p.n_cpu_moe else "")
        + (f" {kv_cells_note(model, p)}" if cpu_blocks and kv_cells_note(model, p) else ""),
    )

    # -- verdict: fits in VRAM, runs with partial offload, or fails to allocate ------------------------------
    if mc.multi_gpu:
        fit_inputs = [
            (
                f"GPU {u.index} · {u.name}",
                f"{_gb(u.total)} + {_gb(u.margin if u.total else 0)} margin = "
                f"{_gb(u.total + (u.margin if u.total else 0))} of {_gb(u.capacity)}" + ("" if u.fits else " (over)"),
            )
            for u in p.per_gpu
        ]
    elif mc.gpu is not None:
        fit_inputs = [
            ("GPU total + margin", f"{_gb(p.gpu_total)} + {_gb(margin)} = {_gb(p.gpu_total + margin)}"),
            ("GPU capacity", _gb(p.gpu_capacity)),
        ]
    else:
        fit_inputs = []
    fit_inputs.append(("RAM total", f"{_gb(p.cpu_total)} of {_gb(p.cpu_capacity)}"))
    fit_inputs.append(
        (
            "Blocks on the GPU",
            f"{gl} of {n}, output head {'on the GPU' if p.output_on_gpu else 'in RAM'}"
            + (f", experts of {p.n_cpu_moe} layers in RAM" if p.n_cpu_moe else ""),
        )
    )
    verdict = scn.readouts.verdict
    out["verdict"] = _box(
        "verdict",
        "loads = GPU total + margin ≤ GPU capacity, and RAM total ≤ RAM"
        + (" (unified: both from one pool)" if mc.unified else "")
        + "; fits in VRAM = loads with every block and the output head on the GPU; else a partial offload",
        fit_inputs,
        {"vram": "fits in VRAM", "partial": "runs with partial offload"}.get(verdict, f"fails to allocate: {p.error}"),
    )

    # -- speeds ------------------------------------------------------------------------------------------------
    d, f = scn.decode, scn.prefill
    if d is None or f is None:
        why = (
            "Not computed: this placement would fail to allocate, so llama.cpp would not run."
            if not p.fits
            else f"Not computed: {scn.error}"
        )
        for k in ("decode_tok_s", "prefill_tok_s", "cpu_share"):
            out[k] = _box(k, "—", [], why)
        return {k: str(v) for k, v in out.items()}
    out["cpu_share"] = _box(
        "cpu_share",
        "CPU share = CPU time per token / total time per token",
        [("CPU time", fmt.seconds(d["cpu_s"])), ("Total time", fmt.seconds(d["total_s"]))],
        fmt.pct(d["cpu_share"]),
        "The part of each decode step spent reading weights and KV from system RAM.",
    )
    if scn.profile == "measured":
        out.update(_measured_boxes(scn))
        return {k: str(v) for k, v in out.items()}
    tokens = d["context"]
    dec_inputs, terms = [], []
    if mc.multi_gpu:
        out["decode_tok_s"] = _decode_multi(p, d)
    for side, dev in () if mc.multi_gpu else (("gpu", mc.gpu), ("cpu", mc.ram)):
        if not d[side + "_bytes"]:
            continue
        label = "GPU" if side == "gpu" else "CPU"
        dec_inputs.append(
            (
                f"{label} bytes per token",
                f"{_gb(d[side + '_bytes'])} (weights {_gb(d[side + '_weight_bytes'])}"
                f" + KV {_gb(d[side + '_kv_bytes'])} at {tokens:,} tokens)",
            )
        )
        bound = d[side + "_bound"]
        how = (
            f"bytes / ({pm.ETA_DECODE} × {dev.bandwidth_gbs:,.1f} GB/s)"
            if bound == "memory"
            else f"FLOPs / ({pm.ETA_PREFILL} × {dev.fp16_tflops:g} TFLOP/s)"
        )
        dec_inputs.append((f"{label} time", f"{fmt.seconds(d[side + '_s'])} = {how}, {bound}-bound"))
        terms.append((fmt.seconds(d[side + "_s"]), label))
    dec_inputs.append(("Fixed overhead per token", fmt.seconds(d["overhead_s"])))
    terms.append((fmt.seconds(d["overhead_s"]), "overhead"))
    out["decode_tok_s"] = out.get("decode_tok_s") or _box(
        "decode_tok_s",
        "t_token = Σ_devices max(bytes_d / (η_decode × bandwidth_d), FLOPs_d / (η_prefill × peak_d)) + overhead;"
        "  tok/s = 1 / t_token",
        dec_inputs,
        "t_token = " + _sum(terms, fmt.seconds(d["total_s"])) + f" → {fmt.rate(d['tok_per_s'])} tok/s",
        f"η_decode = {pm.ETA_DECODE} of peak bandwidth (the module's assumption). Every weight a token uses is read "
        f"once per token, plus the KV cache of the context.",
    )
    pre_inputs = [
        ("Prompt tokens", f"{f['n_tokens']:,} in {f['n_micro_batches']} micro-batch(es) of n_ubatch {f['n_ubatch']}"),
        ("Matmul + attention FLOPs", f"{f['flops']:.3g}"),
    ]
    parts = sorted(f["parts_s"].items())
    for kind, t in parts:
        pre_inputs.append((f"Time on {kind}", fmt.seconds(t)))
    out["prefill_tok_s"] = _box(
        "prefill_tok_s",
        "per micro-batch and device: FLOPs / (η_prefill × peak FLOP/s) + weight bytes / "
        "(η_prefill × bandwidth) [+ PCIe copy of CPU weights with op offload];  "
        "tok/s = tokens / Σ time",
        pre_inputs,
        _sum([(fmt.seconds(t), kind) for kind, t in parts], fmt.seconds(f["total_s"]))
        + f" → {fmt.rate(f['tok_per_s'])} tok/s",
        f"η_prefill = {pm.ETA_PREFILL} of peak FP16 tensor throughput (the module's assumption).",
    )
    return {k: str(v) for k, v in out.items()}


# ---------------------------------------------------------------------------------------------------------
# Several GPUs (perf_model sections 6b and 7b): the same boxes, one line per GPU
# ---------------------------------------------------------------------------------------------------------
def _layers(u, n: int) -> str:
    blocks = [il for il in u.layers if il < n]
    if not u.layers:
        return "no layers"
    span = f"layers {blocks[0]}–{blocks[-1]}" if len(blocks) > 1 else f"layer {blocks[0]}" if blocks else ""
    return (span + (" + output" if n in u.layers else "")).strip(" +") or "output layer"


def _ngl_multi(p) -> Raw:
    n = p.model.num_hidden_layers
    inputs = [
        (f"GPU {u.index} · {u.name}", f"{_layers(u, n)} ({len(u.layers)}), {_gb(u.total)} of {_gb(u.capacity)}")
        for u in p.per_gpu
    ]
    if p.tensor_split:
        inputs.append(("-ts", ",".join(f"{v:g}" for v in p.tensor_split)))
    else:
        inputs.append(("Split", "in proportion to each GPU's free memory (no -ts)"))
    if p.auto:
        formula = (
            "--fit: keep the default split if every GPU keeps its margin; otherwise fill the GPUs back to front, "
            "whole layers, each up to its capacity − margin, and write -ngl and -ts"
        )
        note = f"--fit-target {pm.FIT_TARGET_MIB} MiB is kept free on each GPU; what does not fit stays on the CPU."
    else:
        formula = "layer il → GPU upper_bound(split points, (il − i_gpu_start) / act), i_gpu_start = n + 1 − ngl"
        note = "An explicit -ngl is used as given; if a GPU cannot hold its share, the load fails."
    terms = [(str(len(u.layers)), f"GPU {u.index}") for u in p.per_gpu]
    return _box("n_gpu_layers", formula, inputs, _sum(terms, f"{p.n_gpu_layers} of {n + 1}"), note)


def _vram_multi(p) -> Raw:
    inputs = []
    m = p.model
    for u in p.per_gpu:
        inputs.append(
            (
                f"GPU {u.index} · {u.name}",
                f"weights {_gb(u.weights)} + KV {_gb(u.kv)} + compute {_gb(u.compute)} = {_gb(u.total)}",
            )
        )
    if p.row_split:
        inputs.append(("Row split", "every matrix's rows shared by " + " / ".join(f"{f:.0%}" for f in p.row_fractions)))
    for u in p.per_gpu:  # each layer's cache on its layer's GPU, by kind of layer
        blocks = [il for il in u.layers if il < m.num_hidden_layers]
        if blocks:
            inputs.append((f"KV on GPU {u.index}", f"{_gb(u.kv)} = {kv_breakdown_text(m, p, blocks)}"))
    return _box(
        "vram_gb",
        "VRAM = Σ GPUs (weights + KV + compute buffer); each GPU holds its layers' weights and KV",
        inputs,
        _sum([(_gb(u.total), f"GPU {u.index}") for u in p.per_gpu], f"{p.gpu_total / pm.GB:.2f} GB"),
        "The output head sits on the last GPU with layers; token_embd stays in host memory.",
    )


def _decode_multi(p, d: dict, measured: str = "") -> Raw:
    """The decode box on several GPUs; measured: the measured profile's basis (its per-device rules differ)."""
    inputs, terms = ([("Profile", "measured: " + measured)] if measured else []), []
    row = p.row_split
    slowest = 0.0
    for e in d["devices"]:
        if not e["bytes"]:
            continue
        own = e["busy_s"] - e["parallel_s"]
        inputs.append(
            (
                f"{e['name']} ({e['side']})",
                f"{_gb(e['bytes'])} read per token, {fmt.seconds(e['busy_s'])} ({e['bound']}-bound)"
                + (f"; {fmt.seconds(e['parallel_s'])} of it in row-split matrices" if e["parallel_s"] else ""),
            )
        )
        terms.append((fmt.seconds(own), e["side"]))
        slowest = max(slowest, e["parallel_s"])
    if row and slowest:
        terms.append((fmt.seconds(slowest), "row-split matrices, slowest GPU"))
    link = d["link"]
    what = "synchronisations" if link["kind"] == "sync" else "hops"
    inputs.append(
        ("GPU link", f"{link['transfers']} {what}, {fmt.integer(link['bytes'])} B over {p.machine.link.name}")
    )
    terms.append((fmt.seconds(d["link_s"]), "link"))
    terms.append((fmt.seconds(d["overhead_s"]), "overhead"))
    per_device = (
        "device time = its bytes at its backend's fitted rates (enginelab.measured)"
        if measured
        else "device time = max(bytes_d / (η_decode × bandwidth_d), FLOPs_d / (η_prefill × peak_d))"
    )
    formula = (
        "t_token = Σ_GPUs own layers' time + max_GPUs row-split matrices' time + link + overhead"
        if row
        else "t_token = Σ_devices device time + hops + overhead"
    ) + f"; {per_device}"
    return _box(
        "decode_tok_s",
        formula + ";  tok/s = 1 / t_token",
        inputs,
        "t_token = " + _sum(terms, fmt.seconds(d["total_s"])) + f" → {fmt.rate(d['tok_per_s'])} tok/s",
        "Layer split: the GPUs run one after the other, handing the activations over at each boundary. Row split: "
        "they read their share of every matrix at the same time, and synchronise after each one.",
    )


# ---------------------------------------------------------------------------------------------------------
# The measured profile: the same sums, with the fitted parameters and the basis they rest on
# ---------------------------------------------------------------------------------------------------------
BACKEND_NAMES = {"cuda": "CUDA", "rocm": "ROCm", "vulkan": "Vulkan", "metal": "Metal", "sycl": "SYCL", "cpu": "CPU"}


def backend_name(backend: str) -> str:
    return BACKEND_NAMES.get(backend, backend)


def basis_text(backend: str, kind: str) -> str:
    """'CUDA, fitted on 31 runs of 7 devices (leave-one-device-out median error 12%)', or why not."""
    b = me.basis_summary(backend, kind)
    if not b["fitted"]:
        return f"{backend_name(backend)}: physical priors (no published runs of this backend were fitted)"
    loo = b["loo_median"]
    err = f", leave-one-device-out median error {loo:.0%}" if loo is not None else ""
    return f"{backend_name(backend)}, fitted on {b['runs']} llama-bench runs of {b['devices']} devices{err}"


VENDOR_NAMES = {"intel": "Intel", "amd": "AMD", "nvidia": "NVIDIA", "apple": "Apple"}


def _vendor_runs(res: dict) -> str:
    """' of Intel GPUs on Vulkan' where the typical range is that vendor's own (measured.range_basis), else ''."""
    v = res.get("range_vendor") or ""
    if not v:
        return ""
    return f" of {VENDOR_NAMES.get(v, v)} GPUs on {backend_name(res.get('backend', ''))}"


def _range_text(rng) -> str:
    return f"most runs {fmt.rate(rng[0])}–{fmt.rate(rng[1])} tok/s" if rng else ""


def build_inputs(scn) -> list:
    """The decode box's lines on the reader's llama.cpp build when it is not today's: which build, and for each
    change it lacks that costs this setup time (scn.build_effects, computed with the Scenario) "your build lacks X
    (PR #N): about Y% slower" against today's llama.cpp, linked to the change."""
    b = scn.build
    if b is None:
        return []
    out = [("llama.cpp build", b.note or f"a build of {b.day}")]
    costly = [(row, share) for row, share in scn.build_effects if share >= 0.0005]
    for row, share in costly:
        pr = f"PR #{row['pr']}" if row.get("pr") else "its source"
        lacks = ["your build lacks ", feature_name(row), " (", el("a", pr, href=row["source"]), ")"]
        out.append(
            ("Missing change", el("span", lacks + [f": about {fmt.pct(share, 1 if share < 0.1 else 0)} slower"]))
        )
    if not costly:
        out.append(("Missing changes", f"none of llama.cpp's changes since {b.day} touches this setup's decode"))
    return out


def _measured_boxes(scn) -> dict:
    d, f, mc = scn.decode, scn.prefill, scn.machine
    out = {}
    inputs, terms = [], []
    backend = d.get("backend", "cpu")
    inputs.append(("Profile", "measured: " + basis_text(backend, "decode")))
    inputs += build_inputs(scn)
    if mc.multi_gpu:  # one line per device, the link, the overhead (section 7b)
        out["decode_tok_s"] = _decode_multi(scn.placement, d, measured=basis_text(backend, "decode"))
    for side, dev in () if mc.multi_gpu else (("gpu", mc.gpu), ("cpu", mc.ram)):
        if not d[side + "_bytes"]:
            continue
        label = "GPU" if side == "gpu" else "CPU"
        bb = d.get("basis", {}).get(side, {})
        be = bb.get("backend", side)
        prm = me.params_for(be)
        inputs.append(
            (
                f"{label} bytes per token",
                f"{_gb(d[side + '_bytes'])} (weights {_gb(d[side + '_weight_bytes'])}"
                f" + KV {_gb(d[side + '_kv_bytes'])} at {d['context']:,} tokens)",
            )
        )
        if be == "cpu":
            n_thr = bb.get("n_threads", 1)
            # an SoC's CPU cores reach only their share of the unified memory's bandwidth (or what a source
            # measured them to reach)
            read = bb.get("cpu_read_gbs", 0.0)
            if read:
                cap = f"{read:,.1f} GB/s (its CPU cores' measured read bandwidth) / {me.READ_TEST_SHARE:g}"
            elif bb.get("soc_cpu"):
                cap = f"{prm.soc_cpu_share:.2f} (the CPU's share) × {dev.bandwidth_gbs:,.1f} GB/s"
            else:
                cap = f"{dev.bandwidth_gbs:,.1f} GB/s"
            knee = f"{me.CPU_BW_KNEE:g}"
            how = (
                f"streams at {bb.get('bw_eff_gbs', 0):,.1f} GB/s: {n_thr} thread{'s' if n_thr != 1 else ''} × "
                f"{prm.thread_bw_gbs:.1f} GB/s "
                f"bending into the cap {prm.eta_bw:.2f} × {cap} (the soft minimum of the two, "
                f"(a^-{knee} + b^-{knee})^(-1/{knee}): near saturation every thread pulls less); dequantization "
                f"{fmt.seconds(d[side + '_compute_s'])} at the cores' FMA rate (per weight by type class, a K-quant scaled by its kernel's cycles on "
                f"{_CORE_FAMILY[bb['core_family']]} cores, and "
                f"{prm.dq_row:,.0f} FLOP per row of a type not repacked; a repacked type's GEMV {prm.dq_repack:.2f}× the "
                f"work per weight), overlapping {bb['overlap']:.0%}"
            )
        else:
            how = (
                f"streams at {bb.get('bw_eff_gbs', 0):,.0f} GB/s of {dev.bandwidth_gbs:,.0f} GB/s "
                f"(η {prm.eta_bw:.2f} F16, {prm.eta_legacy:.2f} Q8_0/Q4_0, {prm.eta_q:.2f} K-quants, "
                f"{prm.eta_iq:.2f} IQ; batch-1 ceiling {prm.bw_sat_gbs:,.0f} GB/s)"
            )
            for name, _n, value, _s in bb.get("terms", ()):  # the rows the computation charged, as it charged them
                sentence = me.explain_sentence(name, be, value)
                if sentence:
                    how += "; " + sentence
        inputs.append((f"{label} time", f"{fmt.seconds(d[side + '_s'])}: {how}"))
        terms.append((fmt.seconds(d[side + "_s"]), label))
    inputs.append(
        (
            "Per-step overhead",
            f"{fmt.seconds(d['overhead_s'])} (kernel launches per block, the step itself, and the token's logits "
            "copied back over PCIe when a discrete GPU runs the output head)",
        )
    )
    terms.append((fmt.seconds(d["overhead_s"]), "overhead"))
    out["decode_tok_s"] = out.get("decode_tok_s") or _box(
        "decode_tok_s",
        "t_token = Σ_devices Σ_type-class bytes / (η_class × bw) [+ expert kernels × expert_us + MoE blocks × moe_layer_us] "
        "+ layers × layer_us "
        "+ step_us [+ n_vocab × 4 B / PCIe];  tok/s = 1 / t_token",
        inputs,
        "t_token = " + _sum(terms, fmt.seconds(d["total_s"])) + f" → {fmt.rate(d['tok_per_s'])} tok/s",
        f"Typical spread: {_range_text(d.get('range_tok_s'))} (the 20th–80th percentile of published runs"
        f"{_vendor_runs(d)} around the profile's estimates, held out one device at a time).",
    )
    pre_inputs = [
        ("Profile", "measured: " + basis_text(f.get("backend", backend), "prefill")),
        ("Prompt tokens", f"{f['n_tokens']:,} in {f['n_micro_batches']} micro-batch(es) of n_ubatch {f['n_ubatch']}"),
        ("Matmul + attention FLOPs", f"{f['flops']:.3g} (logits for the last token only)"),
    ]
    pb = me.params_for(f.get("backend", backend))
    if f.get("backend", backend) != "cpu":
        pre_inputs.append(
            (
                "Kernel rate",
                f"{pb.pp_eff_q:.2f} (quantized, MMQ) / {pb.pp_eff_f:.2f} (F16) of the FP16 tensor peak, "
                f"bending into {pb.pp_sat_tflops:,.0f} TFLOP/s; {pb.pp_layer_us:.0f} µs per block per micro-batch",
            )
        )
    parts = sorted(f["parts_s"].items())
    for kind, t in parts:
        pre_inputs.append((f"Time on {kind}", fmt.seconds(t)))
    out["prefill_tok_s"] = _box(
        "prefill_tok_s",
        "per micro-batch and device: FLOPs / rate(type class) + blocks × pp_layer_us + weight bytes / bw "
        "[+ PCIe copy of CPU weights with op offload];  tok/s = tokens / Σ time",
        pre_inputs,
        _sum([(fmt.seconds(t), kind) for kind, t in parts], fmt.seconds(f["total_s"]))
        + f" → {fmt.rate(f['tok_per_s'])} tok/s",
        f"Typical spread: {_range_text(f.get('range_tok_s'))}"
        + (f" (published runs{_vendor_runs(f)}, held out one device at a time)." if f.get("range_vendor") else "."),
    )
    return out


def profile_note(scn) -> str | None:
    """One line on why the measured numbers differ from the module's (the course profile's) for these settings,
    or None (course profile, or nothing to compare)."""
    if scn.profile != "measured" or scn.decode is None or scn.course is None:
        return None
    d, c = scn.decode, scn.course
    if not c.fits:
        return (
            f"The module's model would not load this (it counts decimal GB and -ngl {c.n_gpu_layers}); the measured "
            "profile counts the card's GiB less what the driver keeps."
        )
    side = "gpu" if d["gpu_bytes"] >= d["cpu_bytes"] else "cpu"
    dev = (scn.machine.gpus[0] if scn.machine.gpus else None) if side == "gpu" else scn.machine.ram
    bw = d.get("basis", {}).get(side, {}).get("bw_eff_gbs", 0.0)
    backend = backend_name(d.get("backend", side))
    reach = f"{bw:,.0f} GB/s ({bw / dev.bandwidth_gbs:.0%} of peak)" if dev is not None and bw else "its fitted rate"
    ngl = "" if c.n_gpu_layers == scn.placement.n_gpu_layers else f" and -ngl {c.n_gpu_layers}"
    return (
        f"The module's model gives {fmt.rate(c.decode_tok_s)} tok/s decode and {fmt.rate(c.prefill_tok_s)} tok/s "
        f"prefill here{ngl}: it assumes {pm.ETA_DECODE:.0%} of peak bandwidth and "
        f"{pm.DECODE_OVERHEAD_S * 1e6:.0f} µs per token, while llama.cpp's {backend} kernels stream these weights "
        f"at {reach} and spend {fmt.seconds(d['overhead_s'])} per token on launches."
    )
