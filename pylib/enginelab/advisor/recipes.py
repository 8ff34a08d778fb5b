"""Tuning recipes: a recommended configuration for each of the module's goals, with the numbers behind
every choice (recipe())."""

from __future__ import annotations

from dataclasses import dataclass

import perf_model as pm

from ..checks import brief, check_int
from .diagnosis import CTX_LADDER, QUALITY_FLOOR_BPW, moe_changes, quant_ladder
from .setup import Setup, check, cpu_cores, evaluate, gb_text, pct_text, rate_text
from .speculative import speculative

# ---------------------------------------------------------------------------
# Recipes
# ---------------------------------------------------------------------------
GOALS = {
    "one_user_fits": "One user, the model fits in VRAM",
    "one_user_too_big": "One user, the model is larger than VRAM",
    "apple": "Apple silicon",
    "cpu_only": "CPU only",
    "several_users": "Several users or an agent making parallel calls",
}
DRAFTS = {"llama": "llama-3.2-1b", "qwen2": "qwen2.5-0.5b"}  # the small catalog model of each family


@dataclass
class Recipe:
    goal: str
    engine: str
    state: dict
    command: str
    explanations: list
    outcome: dict

    def as_dict(self) -> dict:
        return {
            "goal": self.goal,
            "engine": self.engine,
            "state": dict(self.state),
            "command": self.command,
            "explanations": list(self.explanations),
            "outcome": dict(self.outcome),
        }


def _gpu_names(mc) -> str:
    return " + ".join(g.name for g in mc.gpus)


def _bound_tok_s(s: Setup, p) -> float:
    """Decode with zero context and no fixed overhead: bytes read over effective bandwidth (the module's bound)."""
    d = pm.decode_step_time(p, s.machine, context=0)
    return 1.0 / (d["gpu_s"] + d["cpu_s"])


def _which_goal(m, mc, quant, ctx, profile: str = "course") -> str:
    """The recipe that applies to a single user on this machine."""
    if mc.gpu is None:
        return "cpu_only"
    if mc.unified:
        return "apple"
    p = pm.place(m, mc, quant, n_ctx=ctx, profile=profile)
    return "one_user_fits" if p.full_offload else "one_user_too_big"


def _one_user_fits(s: Setup, ex: list, tokens: int, users: int) -> tuple:
    """Everything on the GPU, -c what the conversation needs, then a smaller quant or a draft model. Returns (setup, engine)."""
    m, quant, ctx = s.model, s.quant, s.ctx
    s = s.changed(ngl=m.n_layers + 1)
    o = evaluate(s, prefill=False)
    maxpos = m.max_position_embeddings
    ex.append(
        f"Everything on the GPU (-ngl {m.n_layers + 1}): {gb_text(o.vram)} of VRAM, decode "
        f"{rate_text(o.decode_tok_s)} at {tokens:,} tokens; the ceiling, bandwidth / bytes, is "
        f"{rate_text(_bound_tok_s(s, o.placement))}."
    )
    ex.append(
        f"-c {ctx:,} (what the conversation needs) instead of the trained {maxpos:,}: the f16 KV cache "
        f"is {gb_text(pm.kv_cache_bytes(m, ctx, 'f16'))} instead of {gb_text(pm.kv_cache_bytes(m, maxpos, 'f16'))}."
    )
    ex.append("Flash attention on (-fa on).")
    lad = quant_ladder(s)
    if lad:
        q2 = lad[0][0]
        o2 = evaluate(s.changed(quant=q2), prefill=False)
        if o2.fits:
            ex.append(
                f"Faster still: {q2} reads {gb_text(lad[0][1])} of weights per token instead of "
                f"{gb_text(pm.weight_bytes(m, quant)['total'])}: {rate_text(o.decode_tok_s)} → "
                f"{rate_text(o2.decode_tok_s)}, at some cost in quality."
            )
    draft = DRAFTS.get(m.model_type)
    if draft and draft != m.key and o.fits:
        sp = speculative(o.placement, draft, 0.7, n_draft=3, context=tokens)
        if sp["fits"]:
            be = sp["break_even_acceptance"]
            ex.append(
                f"Or speculative decoding with {pm.MODELS[draft].name} ({sp['flags']['llama.cpp']}): at "
                f"70% acceptance {rate_text(sp['baseline_tok_s'])} → {rate_text(sp['tok_s'])}"
                + (f"; it pays above {be:.0%} acceptance." if be is not None else "; it never pays here.")
            )
    return s, "llama.cpp"


def _one_user_too_big(s: Setup, ex: list, tokens: int, users: int) -> tuple:
    """--fit's -ngl, an 8-bit KV cache when it moves layers, experts to RAM for MoE. Returns (setup, engine)."""
    m, mc, ctx = s.model, s.machine, s.ctx
    o = evaluate(s, prefill=False)
    ex.append(
        f"--fit picks -ngl {o.ngl}: {o.gpu_layers} of {m.n_layers} layers in VRAM, decode "
        f"{rate_text(o.decode_tok_s)} with {pct_text(o.cpu_share)} of each step on the CPU."
    )
    s8 = s.changed(kv="q8_0")
    o8 = evaluate(s8, prefill=False)
    if o8.fits and o8.gpu_layers > o.gpu_layers:
        ex.append(
            f"-ctk q8_0 -ctv q8_0 -fa on: the KV cache shrinks from {gb_text(pm.kv_cache_bytes(m, ctx, 'f16'))} "
            f"to {gb_text(pm.kv_cache_bytes(m, ctx, 'q8_0'))}, {o8.gpu_layers - o.gpu_layers:+d} layers on the "
            f"GPU, {rate_text(o.decode_tok_s)} → {rate_text(o8.decode_tok_s)}."
        )
        s, o = s8, o8
    if m.is_moe:
        for c in moe_changes(s, o):
            s = s.changed(ngl=c.apply["ngl"], n_cpu_moe=c.apply["n_cpu_moe"])
            o2 = evaluate(s, prefill=False)
            ex.append(f"MoE: {c.title}: {c.note}; {rate_text(o.decode_tok_s)} → {rate_text(o2.decode_tok_s)}.")
            o = o2
    ex.append(
        f"Decode speed is set by system RAM ({mc.ram.bandwidth_gbs:g} GB/s against "
        f"{' / '.join(f'{g.bandwidth_gbs:g}' for g in mc.gpus)} GB/s of VRAM): {pct_text(o.cpu_share)} of each step "
        "is spent there."
    )
    return s, "llama.cpp"


def _apple(s: Setup, ex: list, tokens: int, users: int) -> tuple:
    """Metal on unified memory: no offload decision; the GPU's share of memory is the limit. Returns (setup, engine)."""
    mc = s.machine
    o = evaluate(s, prefill=False)
    cap = mc.gpu.mem_bytes * mc.gpu_share
    ex.append(
        f"Metal uses unified memory: no offload decision (-ngl {o.ngl}). The GPU may use "
        f"{mc.gpu_share:.0%} of {mc.gpu.mem_gb:g} GB = {gb_text(cap)}; this setup needs {gb_text(o.vram)}."
    )
    ex.append(
        f"Decode follows the chip's memory bandwidth, {mc.gpu.bandwidth_gbs:g} GB/s: "
        f"{rate_text(o.decode_tok_s)} (ceiling {rate_text(_bound_tok_s(s, o.placement))})."
    )
    ex.append("vLLM and SGLang reach Apple silicon only through experimental or MLX-based paths.")
    return s, "llama.cpp"


def _cpu_only(s: Setup, ex: list, tokens: int, users: int) -> tuple:
    """Physical cores only; decode is RAM bandwidth over bytes, prompts are compute-bound. Returns (setup, engine)."""
    mc = s.machine
    s = s.changed(ngl=0, threads=cpu_cores(mc)[0])
    o = evaluate(s)
    ex.append(
        f"-ngl 0 -t {s.threads}: physical performance cores only. Decode is RAM bandwidth / model bytes: "
        f"{rate_text(o.decode_tok_s)} at {tokens:,} tokens (ceiling {rate_text(_bound_tok_s(s, o.placement))})."
    )
    oh = evaluate(s.changed(threads=cpu_cores(mc)[1]), prefill=False)
    ex.append(
        f"All {cpu_cores(mc)[1]} logical threads would give {rate_text(oh.decode_tok_s)} "
        f"(the advisor's contention model)."
    )
    ex.append(
        f"Prompt processing is compute-bound and slow on a CPU: {rate_text(o.prefill_tok_s)} for a "
        f"{tokens:,}-token prompt."
    )
    lad = quant_ladder(s)
    if lad:
        q2 = lad[0][0]
        o2 = evaluate(s.changed(quant=q2), prefill=False)
        ex.append(f"Prefer the smallest quant whose quality is acceptable: {q2} gives {rate_text(o2.decode_tok_s)}.")
    return s, "llama.cpp"


def _several_users(s: Setup, ex: list, tokens: int, users: int) -> tuple:
    """Batch the users: vLLM when the model fits in VRAM, else llama.cpp slots. Returns (setup, engine)."""
    m, mc, quant, ctx = s.model, s.machine, s.quant, s.ctx
    engine = "llama.cpp"
    per_req = tokens
    ctx_all = -(-max(ctx, users * per_req) // 256) * 256
    s = s.changed(n_parallel=users, users=users, ctx=ctx_all)
    o = evaluate(s, prefill=False)
    if mc.gpu is not None and not mc.unified and o.placement.full_offload:
        engine = "vLLM"
    else:
        ex.append(
            f"{m.name} {pm.quant_short(quant)} does not fit entirely in VRAM here (or there is no discrete GPU): "
            f"vLLM and SGLang want the model in VRAM, so this uses llama.cpp slots (-np {users})."
        )
    if not o.placement.full_offload and mc.gpu is not None:
        s8 = s.changed(kv="q8_0")
        o8 = evaluate(s8, prefill=False)
        if o8.fits and o8.gpu_layers > o.gpu_layers:
            ex.append(
                f"An 8-bit KV cache (llama.cpp -ctk q8_0 -ctv q8_0; vLLM --kv-cache-dtype fp8) puts "
                f"{o8.gpu_layers - o.gpu_layers:+d} layers on the GPU."
            )
            s, o = s8, o8
    one = evaluate(s.changed(users=1), prefill=False)
    ex.append(
        f"Decode is memory-bound, so {users} requests in one batch read the weights once: "
        f"{rate_text(one.aggregate_tok_s)} for one stream, {rate_text(o.aggregate_tok_s)} in all for {users}."
    )
    ex.append(
        f"Context per request = what the workload needs (--max-model-len {per_req} / --context-length "
        f"{per_req}; llama.cpp -c {s.ctx} shared by {users} slots) so more requests fit in the KV pool."
    )
    ex.append(
        "On a GPU that also drives displays, lower --gpu-memory-utilization (vLLM, default 0.92) or "
        "--mem-fraction-static (SGLang). Requests sharing long prefixes: SGLang --schedule-policy lpm."
    )
    return s, engine


_GOAL_RECIPES = {
    "one_user_fits": _one_user_fits,
    "one_user_too_big": _one_user_too_big,
    "apple": _apple,
    "cpu_only": _cpu_only,
    "several_users": _several_users,
}


def recipe(
    goal: str,
    model,
    machine,
    quant: str = "Q4_K_M",
    context: int = 4096,
    users: int = 4,
    tokens=None,
    profile: str = "course",
) -> Recipe:
    """A recommended configuration for a goal, with the numbers behind each choice.

    goal: one of GOALS.  context: the longest conversation (tokens) a request needs.  users:
    concurrent requests (several_users).  When the goal does not match the machine (an Apple
    recipe on a PC, "fits" for a model that does not), the matching recipe is used and the first
    explanation says why.  profile: perf_model's speed profile for every number ("course" or "measured")."""
    check(isinstance(goal, str) and goal in GOALS, "goal", f"unknown goal {brief(goal)}; allowed: {', '.join(GOALS)}")
    m, mc = pm.get_model(model), pm.get_machine(machine)
    pm.check_quant(quant)
    check_int(context, "context", 256, pm.MAX_CONTEXT)
    check_int(users, "users", 1, 1 << 16)
    if tokens is not None:
        check_int(tokens, "tokens", 1, pm.MAX_CONTEXT)
    tokens = min(context, tokens or min(2000, context))
    ctx = next((c for c in CTX_LADDER if c >= context), context)
    ex = []
    used = goal
    single = _which_goal(m, mc, quant, ctx, profile)
    if goal in ("one_user_fits", "one_user_too_big", "apple") and goal != single:
        why = {
            "cpu_only": f"{mc.name} has no GPU",
            "apple": f"{mc.name} has unified memory",
            "one_user_fits": f"{m.name} {pm.quant_short(quant)} fits entirely in {_gpu_names(mc)} VRAM at -c {ctx:,}",
            "one_user_too_big": f"{m.name} {pm.quant_short(quant)} does not fit entirely in {_gpu_names(mc)} VRAM "
            f"at -c {ctx:,}",
        }[single]
        ex.append(f"{why}: the '{GOALS[single]}' recipe applies.")
        used = single
    engine = "llama.cpp"
    s = Setup(
        m, mc, quant, "f16", ctx, None, 0, tokens=tokens, prompt=tokens, perf_cores=cpu_cores(mc)[0], profile=profile
    )
    if not evaluate(s, prefill=False).fits:
        # not even --fit can load it (RAM or unified memory is too small): the largest quant that loads
        fitting = [q for q, b, bpw in quant_ladder(s) if evaluate(s.changed(quant=q), prefill=False).fits]
        if not fitting:
            o = evaluate(s, prefill=False)
            ex.append(
                f"{m.name} does not load on {mc.name} at any quant of {QUALITY_FLOOR_BPW:g} bits or more: "
                f"{o.placement.error}. Pick a smaller model."
            )
            state = {**s.state(), "engine": engine, "goal": goal}
            return Recipe(used, engine, state, pm.llama_server_command(o.placement), ex, o.summary())
        err = evaluate(s, prefill=False).placement.error
        ex.append(
            f"{m.name} {pm.quant_short(quant)} does not load on {mc.name} even with --fit ({err}); "
            f"{fitting[0]} is the largest quant that does."
        )
        quant = fitting[0]
        s = s.changed(quant=quant)
    s, engine = _GOAL_RECIPES[used](s, ex, tokens, users)
    o = evaluate(s)
    state = s.state()
    state["engine"] = engine
    state["goal"] = goal
    cmd = pm.llama_server_command(o.placement, n_parallel=s.n_parallel if s.n_parallel > 1 else None)
    if s.threads is not None:
        cmd += f" -t {s.threads}"
    if engine == "vLLM":
        cmd = f"vllm serve <{m.name} AWQ/GPTQ checkpoint> --max-model-len {tokens} --max-num-seqs {users}" + (
            " --kv-cache-dtype fp8" if s.kv != "f16" else ""
        )
    return Recipe(used, engine, state, cmd, ex, o.summary())
