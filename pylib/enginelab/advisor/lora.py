"""Fine-tuned models: what a runtime LoRA adapter costs against merged weights (lora_cost())."""

from __future__ import annotations

import perf_model as pm

from ..checks import brief, check_int
from .setup import check, gb_text, rate_text

# ---------------------------------------------------------------------------
# A runtime LoRA adapter
# ---------------------------------------------------------------------------
# LoRA (Hu et al. 2021) adds dW = B A to a projection W (out x in): A is r x in,
# B is out x r, so one adapted projection stores r * (in + out) numbers.  At
# inference, unmerged, each token does x -> A x -> B (A x): 2 r (in + out) FLOPs
# per projection, and every pass reads all of A and B once, like the weights.
# Merged (W + B A saved as one checkpoint) it costs exactly the base model.

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "qkv_proj", "gate_up_proj")
VLLM_MAX_LORA_RANK_DEFAULT = 16
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # values --max-lora-rank accepts


def lora_shapes(model) -> dict:
    """(in_features, out_features) of each LoRA target module, in Hugging Face names."""
    m = pm.get_model(model)
    h, d = m.hidden_size, m.d_head
    q, kv = m.num_attention_heads * d, m.num_key_value_heads * d
    f = m.intermediate_size
    return {
        "q_proj": (h, q),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (q, h),
        "gate_proj": (h, f),
        "up_proj": (h, f),
        "down_proj": (f, h),
        "qkv_proj": (h, q + 2 * kv),
        "gate_up_proj": (h, 2 * f),
    }


def lora_cost(
    model,
    rank: int,
    target_modules=("q_proj", "k_proj", "v_proj", "o_proj"),
    dtype_bytes: int = 2,
    placement=None,
    context: int = 2000,
    prompt_tokens: int = 2000,
    n_adapters: int = 1,
) -> dict:
    """Memory, bytes and FLOPs a runtime LoRA adapter adds, and whether merging wins.

    With a placement (of the base model), the extra decode time is the adapter's bytes at the
    effective bandwidth perf_model gives the device the adapted layers run on (its bytes over
    its memory time), a lower bound: the extra small matmuls also cost kernel launches."""
    m = pm.get_model(model)
    check_int(rank, "rank", 1, 1 << 16)
    check(
        dtype_bytes in (1, 2, 4) and not isinstance(dtype_bytes, bool),
        "dtype_bytes",
        f"must be 1, 2 or 4, got {brief(dtype_bytes)}",
    )
    check_int(n_adapters, "n_adapters", 1, 1 << 16)
    check_int(context, "context", 0, pm.MAX_CONTEXT)
    check_int(prompt_tokens, "prompt_tokens", 0, pm.MAX_CONTEXT)
    check(
        placement is None or isinstance(placement, pm.Placement),
        "placement",
        f"must be None or a perf_model.Placement, got {brief(placement)}",
    )
    check(
        isinstance(target_modules, (list, tuple)),
        "target_modules",
        f"must be a list of module names, got {brief(target_modules)}",
    )
    shapes = lora_shapes(m)
    targets = tuple(target_modules)
    check(len(targets) > 0, "target_modules", "name at least one module")
    for t in targets:
        check(
            isinstance(t, str) and t in shapes,
            "target_modules",
            f"unknown module {brief(t)}; allowed: {', '.join(LORA_TARGETS)}",
        )
    if m.model_type == "phi3":
        check(
            not any(t in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj") for t in targets),
            "target_modules",
            "Phi-3 fuses them: use qkv_proj and gate_up_proj",
        )
    mlp = {"gate_proj", "up_proj", "down_proj", "gate_up_proj"}
    per_layer = {}
    for t in targets:
        i, o = shapes[t]
        n = rank * (i + o)  # A: r x in, B: out x r
        if t in mlp and m.is_moe:
            n *= m.n_expert  # one adapter per expert
        per_layer[t] = {"in": i, "out": o, "A": (rank, i), "B": (o, rank), "params": n}
    layer_params = sum(v["params"] for v in per_layer.values())
    params = layer_params * m.n_layers
    # a token reads / multiplies only the experts it is routed to
    active = 0.0
    for t, v in per_layer.items():
        frac = m.num_experts_per_tok / m.n_expert if (t in mlp and m.is_moe) else 1.0
        active += v["params"] * frac
    active *= m.n_layers
    nbytes = params * dtype_bytes
    out = {
        "model": m.name,
        "rank": rank,
        "target_modules": targets,
        "dtype_bytes": dtype_bytes,
        "per_layer": per_layer,
        "params_per_layer": layer_params,
        "params": params,
        "bytes": nbytes,
        "decode_bytes_per_token": active * dtype_bytes,
        "decode_flops_per_token": 2.0 * active,
        "prefill_flops_per_token": 2.0 * active,
        "prefill_flops": 2.0 * active * prompt_tokens,
        "prompt_tokens": prompt_tokens,
        "merged_extra_bytes": 0,
        "merged_extra_s": 0.0,
    }
    if placement is not None:
        p = placement
        d = pm.decode_step_time(p, p.machine, context=context)
        # adapters follow their layers: split by the share of layers on each device
        g = p.gpu_layers / m.n_layers
        t = 0.0
        for side, share in (("gpu", g), ("cpu", 1.0 - g)):
            if share <= 0 or d[side + "_bytes"] <= 0:
                continue
            t += active * dtype_bytes * share * d[side + "_mem_s"] / d[side + "_bytes"]
        base_tok_s = d["tok_per_s"]
        out.update(
            {
                "base_tok_s": base_tok_s,
                "extra_decode_s": t,
                "lora_tok_s": 1.0 / (d["total_s"] + t),
                "slowdown": t / d["total_s"],
                "vram_extra_bytes": nbytes * g,
            }
        )
        w = p.gpu_weights + p.cpu_weights
        out["base_weight_bytes"] = w
    else:
        w = pm.weight_bytes(m, "Q4_K_M")["total"]
        out["base_weight_bytes"] = w
    # merging: one fine-tune -> merge (no cost at all); k fine-tunes of one base -> adapters
    # cost k x adapter instead of k x the whole model
    out["n_adapters"] = n_adapters
    out["separate_models_bytes"] = n_adapters * w
    out["adapters_bytes"] = w + n_adapters * nbytes
    out["merge_wins"] = n_adapters == 1
    why = (
        f"One fine-tune: merge it (W + BA in full precision, then quantize) and it runs at exactly the base "
        f"model's speed; the adapter would add {nbytes / 1e6:.1f} MB and "
        f"{2.0 * active / 1e6:.1f} MFLOP per token."
        if n_adapters == 1
        else f"{n_adapters} fine-tunes of one base: adapters need {gb_text(w + n_adapters * nbytes)} "
        f"against {gb_text(n_adapters * w)} for {n_adapters} merged models."
    )
    if "slowdown" in out:
        why += f" Unmerged decode: {rate_text(out['base_tok_s'])} → {rate_text(out['lora_tok_s'])} (at least)."
    out["advice"] = why
    r_up = next((r for r in VLLM_LORA_RANKS if r >= rank), rank)
    out["flags"] = {
        "llama.cpp": "--lora adapter.gguf (or --lora-scaled adapter.gguf 0.8); convert with "
        "convert_lora_to_gguf.py; merge with llama-export-lora",
        "vLLM": f"--enable-lora --max-loras {n_adapters} --max-lora-rank {max(r_up, VLLM_MAX_LORA_RANK_DEFAULT)}"
        f" --lora-modules name=path"
        + (
            f" (rank {rank} > the default limit {VLLM_MAX_LORA_RANK_DEFAULT}: --max-lora-rank is required)"
            if rank > VLLM_MAX_LORA_RANK_DEFAULT
            else ""
        ),
        "SGLang": f"--lora-paths name=path --max-loras-per-batch {max(1, n_adapters)}",
    }
    out["vllm_needs_max_lora_rank"] = rank > VLLM_MAX_LORA_RANK_DEFAULT
    return out
