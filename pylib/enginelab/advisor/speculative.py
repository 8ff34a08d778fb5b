"""Speculative decoding: tokens per target pass, tok/s with a draft model, and where drafting stops paying
(speculative())."""

from __future__ import annotations

from dataclasses import replace

import perf_model as pm

from ..checks import brief, check_int, check_number
from .setup import check

# ---------------------------------------------------------------------------
# Speculative decoding
# ---------------------------------------------------------------------------
# A draft model proposes n tokens one at a time; the target checks all n (plus
# one of its own) in a single pass.  With a per-token acceptance rate a,
# independent per position, the expected tokens per target pass are
#   E = 1 + a + a^2 + ... + a^n = (1 - a^(n+1)) / (1 - a)
# (Leviathan, Kalman and Matias, ICML 2023, eq. 1).  a = 0 gives 1 (only the
# target's own token), a = 1 gives n + 1.  One round costs n draft steps plus
# one target pass over n + 1 tokens:  t_round = n * t_draft + t_verify, timed
# by perf_model (the verify pass with batch = n + 1, which reads the weights
# once; it charges the KV once per token, slightly pessimistic).


MAX_DRAFT = 64  # draft tokens per round (llama.cpp --spec-draft-n-max; real values are 3-16)


def expected_tokens(acceptance: float, n_draft: int) -> float:
    a = check_number(acceptance, "acceptance", 0.0, 1.0)
    check_int(n_draft, "n_draft", 1, MAX_DRAFT)
    if a == 1.0:
        return float(n_draft + 1)
    return (1.0 - a ** (n_draft + 1)) / (1.0 - a)


def _draft_placement(target: pm.Placement, draft, quant):
    """Place the draft on the GPU first (it runs every step), then the target in what is left."""
    mc = target.machine
    dm = pm.get_model(draft)
    dq = quant or (target.quant if target.quant else "Q8_0")
    dp = pm.place(dm, mc, dq, n_ctx=target.n_ctx, kv_type=target.kv_type, profile=target.profile)
    tp = target
    # (several GPUs: the draft's share is not taken out of a card here; llama.cpp splits it by free memory too)
    if mc.gpu is not None and not mc.unified and not mc.multi_gpu and target.auto and dp.gpu_total > 0:
        # the draft's VRAM comes out of the target's: re-fit the target on a smaller GPU
        # (in the unit the profile counts a card's memory in: decimal GB for the course, GiB when measured)
        if target.profile == "measured":
            left = replace(mc.gpu, mem_gb=max(0.0, (mc.gpu.mem_gib_bytes - dp.gpu_total) / pm.GiB))
        else:
            left = replace(mc.gpu, mem_gb=max(0.0, (mc.gpu.mem_bytes - dp.gpu_total) / pm.GB))
        tp = pm.place(
            target.model,
            replace(mc, gpu=left),
            target.quant,
            n_ctx=target.n_ctx,
            kv_type=target.kv_type,
            n_cpu_moe=target.n_cpu_moe,
            n_ubatch=target.n_ubatch,
            profile=target.profile,
        )
    return dp, tp


def speculative(
    target_placement, draft_model_key, acceptance: float, n_draft: int = 3, context: int = 2000, draft_quant=None
) -> dict:
    """Tokens per target pass and tok/s with a draft model, and where drafting stops paying."""
    check(isinstance(target_placement, pm.Placement), "target_placement", "must be a perf_model.Placement")
    E = expected_tokens(acceptance, n_draft)
    target = target_placement
    check(
        isinstance(draft_model_key, str) and draft_model_key in pm.MODELS,
        "draft_model_key",
        f"unknown model {brief(draft_model_key)}; allowed: {', '.join(pm.MODELS)}",
    )
    check_int(context, "context", 0, pm.MAX_CONTEXT)
    check(
        draft_quant is None or (isinstance(draft_quant, str) and draft_quant in pm.ALL_QUANTS),
        "draft_quant",
        f"must be None (the target's) or a quantization ({', '.join(pm.ALL_QUANTS)}), got {brief(draft_quant)}",
    )
    dp, tp = _draft_placement(target, draft_model_key, draft_quant)
    base = pm.decode_step_time(target, target.machine, context=context)
    out = {
        "acceptance": acceptance,
        "n_draft": n_draft,
        "expected_tokens": E,
        "baseline_tok_s": base["tok_per_s"],
        "draft": pm.MODELS[draft_model_key].name,
        "draft_vram_bytes": dp.gpu_total,
        "target_gpu_layers_before": target.gpu_layers,
        "target_gpu_layers_with_draft": tp.gpu_layers,
        "fits": dp.fits and tp.fits,
    }
    if not out["fits"]:
        out.update(
            {
                "tok_s": None,
                "speedup": None,
                "break_even_acceptance": None,
                "best_n_draft": None,
                "error": (dp.error or tp.error),
            }
        )
        return out
    t_draft = pm.decode_step_time(dp, dp.machine, context=context)["total_s"]
    t1 = pm.decode_step_time(tp, tp.machine, context=context)["total_s"]

    def rate(a, n):
        t_verify = pm.decode_step_time(tp, tp.machine, context=context, batch=n + 1)["total_s"]
        return expected_tokens(a, n) / (n * t_draft + t_verify), t_verify

    tok_s, t_verify = rate(acceptance, n_draft)
    # break-even: the acceptance at which drafting matches plain decoding (bisection; E grows with a)
    lo, hi = 0.0, 1.0
    if rate(1.0, n_draft)[0] < base["tok_per_s"]:
        be = None  # even perfect acceptance does not pay: the draft is too slow
    elif rate(0.0, n_draft)[0] >= base["tok_per_s"]:
        be = 0.0
    else:
        for _ in range(50):
            mid = (lo + hi) / 2
            if rate(mid, n_draft)[0] < base["tok_per_s"]:
                lo = mid
            else:
                hi = mid
        be = hi
    best = max(range(1, 9), key=lambda n: rate(acceptance, n)[0])
    curve = [{"acceptance": a / 20, "tok_s": rate(a / 20, n_draft)[0]} for a in range(0, 21)]
    out.update(
        {
            "t_draft_s": t_draft,
            "t_verify_s": t_verify,
            "t_target_s": t1,
            "round_s": n_draft * t_draft + t_verify,
            "tok_s": tok_s,
            "speedup": tok_s / base["tok_per_s"],
            "break_even_acceptance": be,
            "draft_cost_ratio": t_draft / base["total_s"],
            "best_n_draft": best,
            "best_tok_s": rate(acceptance, best)[0],
            "pays": tok_s > base["tok_per_s"],
            "curve": curve,
        }
    )
    out["flags"] = {
        "llama.cpp": f"-md {pm.gguf_filename(pm.MODELS[draft_model_key], dp.quant)} --spec-draft-n-max {n_draft}",
        "vLLM": '--speculative-config \'{"model": "<draft HF repo>", "num_speculative_tokens": '
        f'{n_draft}, "method": "draft_model"}}\'',
        "SGLang": f"--speculative-algorithm STANDALONE --speculative-draft-model-path <draft> "
        f"--speculative-num-draft-tokens {n_draft + 1}",
    }
    return out
