"""advisor: one triggering setup per row of the module's bottleneck table, every suggested change re-checked
against perf_model called here directly, a healthy setup with no advice, LoRA sizes by hand, and the
speculative-decoding limits in closed form."""

from __future__ import annotations

import pytest

import perf_model as pm
from enginelab import advisor as A
from enginelab import findings as findings_mod

# ---------------------------------------------------------------------------------------------------------
# An independent re-check: a state dict -> perf_model, without going through the advisor's own evaluate()
# ---------------------------------------------------------------------------------------------------------
BASE = {
    "quant": "Q4_K_M",
    "kv": "f16",
    "ctx": 8192,
    "ngl": "auto",
    "tokens": 2000,
    "n_cpu_moe": 0,
    "threads": "auto",
    "np": 1,
    "users": 1,
    "ub": 512,
    "b": 2048,
}


def st(**kw) -> dict:
    return {**BASE, **kw}


def by_hand_thread_factor(t, p=8):
    # the advisor's documented model, written out: 4 threads saturate dual-channel RAM on 8 cores,
    # and each thread past the 8 performance cores adds 0.4/8 to the CPU part of the step
    if t == "auto":
        return 1.0
    if t < p // 2:
        return (p // 2) / t
    return 1.0 if t <= p else 1.0 + 0.4 * (t - p) / p


def recheck(state: dict) -> dict:
    """What perf_model says for a state: placement, decode (threads applied), prefill, aggregate."""
    mc = pm.MACHINES[state["machine"]]
    p = pm.place(
        pm.MODELS[state["model"]],
        mc,
        state["quant"],
        n_ctx=state["ctx"],
        kv_type=state["kv"],
        n_gpu_layers=None if state["ngl"] == "auto" else state["ngl"],
        n_cpu_moe=state["n_cpu_moe"],
        n_ubatch=state["ub"],
    )
    out = {"fits": p.fits, "n_gpu_layers": p.n_gpu_layers, "gpu_layers": p.gpu_layers, "vram": p.gpu_total}
    if not p.fits:
        return out | {"decode_tok_s": None, "prefill_tok_s": None, "aggregate_tok_s": None}
    f = by_hand_thread_factor(state["threads"])

    def tok_s(batch):
        d = pm.decode_step_time(p, mc, context=state["tokens"], batch=batch)
        return batch / (d["gpu_s"] + d["cpu_s"] * f + d["overhead_s"])

    active = max(1, min(state["users"], state["np"], state["ctx"] // state["tokens"]))
    pre = pm.prefill_time(p, mc, n_tokens=state["tokens"], n_batch=max(state["b"], state["ub"]))
    return out | {"decode_tok_s": tok_s(1), "prefill_tok_s": pre["tok_per_s"], "aggregate_tok_s": tok_s(active)}


def findings(state) -> dict:
    fs = A.advise_state(state)
    causes = [f.cause for f in fs]
    assert len(causes) == len(set(causes)), causes
    return {f.cause: f for f in fs}


def check_changes(state: dict, finding) -> list:
    """Every change: apply it, call perf_model, compare with the predicted after; gains positive, ranked."""
    before = recheck(state)
    assert finding.changes, f"{finding.cause}: no change suggested"
    gains = []
    for c in finding.changes:
        after = recheck(A.apply_change(state, c))
        assert after["fits"], (c.title, after)
        assert c.after["n_gpu_layers"] == after["n_gpu_layers"], c.title
        assert c.after["vram_gb"] == pytest.approx(after["vram"] / pm.GB, rel=1e-12)
        want_after = after[c.metric]
        assert c.after[c.metric] == pytest.approx(want_after, rel=1e-12), c.title
        b = before[c.metric] or 0.0
        assert c.before[c.metric] == (pytest.approx(b, rel=1e-12) if before[c.metric] is not None else None)
        assert c.gain == pytest.approx(want_after - b, rel=1e-9), c.title
        assert c.gain > 0, c.title  # sign: every suggestion helps
        assert want_after >= b * A.MIN_GAIN, c.title  # size: by at least 1%
        assert c.flags.get("llama.cpp"), c.title  # names the exact llama.cpp flags
        assert "→" in c.effect, c.effect
        gains.append(c.gain)
    assert gains == sorted(gains, reverse=True), "changes not ranked by gain"
    return finding.changes


def change(finding, title_start: str):
    for c in finding.changes:
        if c.title.startswith(title_start):
            return c
    raise AssertionError(f"no change {title_start!r} in {[c.title for c in finding.changes]}")


# ---------------------------------------------------------------------------------------------------------
# No advice when there is nothing to fix
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("context", [2000, 8192])
def test_healthy_8b_on_a_24gb_gpu_gets_no_advice(context):
    p = pm.place(pm.MODELS["llama-3.1-8b"], pm.MACHINES["rtx4090"], "Q4_K_M", n_ctx=8192)
    assert p.fits and p.full_offload
    assert A.advise(p, context=context) == []
    assert A.advise_state(st(model="llama-3.1-8b", machine="rtx4090", tokens=context)) == []


def test_default_threads_and_one_user_are_not_findings():
    p = pm.place("llama-3.1-8b", "cpu-ddr5", "Q4_K_M", n_ctx=8192)
    assert A.advise(p, n_threads=8) == [] and A.advise(p, n_threads=None) == []


# ---------------------------------------------------------------------------------------------------------
# Row 1: partial offload (and --n-cpu-moe for an MoE model)
# ---------------------------------------------------------------------------------------------------------
def test_partial_offload_qwen32b_on_4060ti():
    state = st(model="qwen2.5-32b", machine="rtx4060ti")
    f = findings(state)["partial_offload"]
    p = pm.place("qwen2.5-32b", "rtx4060ti", "Q4_K_M", n_ctx=8192)
    d = pm.decode_step_time(p, context=2000)
    # evidence: the module's listing, "-ngl 44/65 ... 5.8 tok/s (CPU share 62%)"
    assert f.evidence["cpu_share"] == pytest.approx(d["cpu_s"] / d["total_s"], rel=1e-12)
    assert f"{f.evidence['cpu_share']:.0%}" == "62%" and f.evidence["gpu_layers"] == 44
    assert f.evidence["cpu_layers"] == 20
    assert "62% of each decode step" in f.evidence_text[0]
    check_changes(state, f)
    kv = change(f, "-ctk q8_0")
    assert kv.apply == {"kv": "q8_0"} and kv.flags["llama.cpp"] == "-ctk q8_0 -ctv q8_0 -fa on"
    assert kv.after["gpu_layers"] - kv.before["gpu_layers"] == 2  # 44 -> 46 layers
    assert kv.effect.startswith("+2 layers on GPU, 5.8 tok/s → 6.1 tok/s")
    c = change(f, "-c 4096")
    assert c.apply == {"ctx": 4096} and c.flags["vLLM"] == "--max-model-len 4096"
    q = change(f, "Q4_K_M → ")
    assert q.after["gpu_layers"] > q.before["gpu_layers"]


def test_partial_offload_moe_suggests_n_cpu_moe():
    state = st(model="qwen3-30b-a3b", machine="rtx3060")
    f = findings(state)["partial_offload"]
    check_changes(state, f)
    top = f.changes[0]  # the biggest gain on an MoE model
    assert top.apply["ngl"] == 49 and top.title == f"-ngl 49 --n-cpu-moe {top.apply['n_cpu_moe']}"
    n = top.apply["n_cpu_moe"]
    # it is the smallest --n-cpu-moe that loads with every layer on the GPU
    assert pm.place("qwen3-30b-a3b", "rtx3060", "Q4_K_M", n_ctx=8192, n_gpu_layers=49, n_cpu_moe=n).fits
    assert not pm.place("qwen3-30b-a3b", "rtx3060", "Q4_K_M", n_ctx=8192, n_gpu_layers=49, n_cpu_moe=n - 1).fits
    assert top.after["decode_tok_s"] > 1.5 * top.before["decode_tok_s"]


# ---------------------------------------------------------------------------------------------------------
# Row 1b: the KV cache competing with weights for VRAM (the module's "Try This": Qwen2.5 14B, RTX 3060, 32k)
# ---------------------------------------------------------------------------------------------------------
def test_kv_competes_qwen14b_on_3060_at_32k():
    state = st(model="qwen2.5-14b", machine="rtx3060", ctx=32768)
    f = findings(state)["kv_competes"]
    m = pm.MODELS["qwen2.5-14b"]
    kv = 2 * 48 * 8 * 128 * 2 * 32768  # bytes, by hand: 2 * L * n_kv * d_head * 2 B * n_ctx
    assert f.evidence["kv_bytes"] == kv == pm.kv_cache_bytes(m, 32768, "f16")
    assert f.evidence["kv_to_weights"] == pytest.approx(kv / pm.weight_bytes(m, "Q4_K_M")["total"])
    check_changes(state, f)
    q8 = change(f, "-ctk q8_0")
    assert q8.after["gpu_layers"] - q8.before["gpu_layers"] == 9  # 35 -> 44 layers
    assert (q8.before["decode_tok_s"], q8.after["decode_tok_s"]) == (
        pytest.approx(9.45, abs=0.01),
        pytest.approx(14.88, abs=0.01),
    )
    ctx = change(f, "-c ")
    assert ctx.after["gpu_layers"] == 48 and "fits entirely on the GPU" in ctx.effect
    assert ctx.gain > q8.gain  # the module's question: which bought more?


# ---------------------------------------------------------------------------------------------------------
# Row 2: slower as the chat grows (the module's decode_curve listing: 32k -> 78.9 tok/s f16, 101.7 q8_0)
# ---------------------------------------------------------------------------------------------------------
def test_long_context_kv_rivals_weights():
    state = st(model="llama-3.1-8b", machine="rtx4090", ctx=65536, tokens=32768)
    f = findings(state)["kv_overflow_long_context"]
    ev = f.evidence
    assert ev["kv_bytes_per_token_read"] == 131072 * 32768  # 128 KiB per token of context, by hand
    assert ev["kv_to_weights"] > A.KV_LONG_CONTEXT_SHARE
    assert f"{ev['tok_s_at_0']:.1f}" == "151.6" and f"{ev['tok_s_now']:.1f}" == "78.9"
    check_changes(state, f)
    q8 = change(f, "-ctk q8_0")
    assert f"{q8.after['decode_tok_s']:.1f}" == "101.7"
    assert q8.after["gpu_layers"] == q8.before["gpu_layers"] == 32
    # Qwen2.5 7B (4 KV heads, 28 layers) would be a fewer-KV-heads model, but it is trained to 32k only; Gemma 4
    # E4B (7.46B, 0.93 of the size) keeps 20 sliding blocks x 2 KV x 2 x 256 x 2 bytes + 4 global x 2 x 2 x 512
    # x 2 = 57,344 bytes per token (the 18 KV-shared blocks none), under 3/4 of 131,072, for 131,072 tokens
    assert pm.kv_bytes_per_token("gemma-4-e4b") == 20 * 2048 + 4 * 4096 <= 0.75 * 131072
    assert [c.apply["model"] for c in f.changes if c.apply.get("model")] == ["gemma-4-e4b"]


def test_long_context_suggests_a_model_with_fewer_kv_heads():
    state = st(model="llama-3.1-8b", machine="rtx4090", ctx=32768, tokens=30000)
    f = findings(state)["kv_overflow_long_context"]
    check_changes(state, f)
    c = change(f, "Llama 3.1 8B → Qwen2.5 7B")
    assert c.apply == {"model": "qwen2.5-7b"}
    assert pm.kv_bytes_per_token("qwen2.5-7b") == 2 * 28 * 4 * 128 * 2 <= 0.75 * 131072  # 56 KiB vs 128 KiB


# ---------------------------------------------------------------------------------------------------------
# Row 3: long wait before the first token: prefill bound by PCIe on a partial offload
# ---------------------------------------------------------------------------------------------------------
def test_prefill_bound_by_pcie_70b_on_4090():
    state = st(model="llama-3.1-70b", machine="rtx4090", ctx=16384, tokens=8000)
    f = findings(state)["pp_bound_by_pcie"]
    p = pm.place("llama-3.1-70b", "rtx4090", "Q4_K_M", n_ctx=16384)
    pre = pm.prefill_time(p, n_tokens=8000)
    assert f.evidence["pcie_s"] == pytest.approx(pre["parts_s"]["pcie"], rel=1e-12)
    assert f.evidence["pcie_share"] >= A.PCIE_PREFILL_SHARE
    assert f.evidence["pcie_copies"] == 4  # one per 2048-token logical batch (-b)
    assert f.evidence["no_op_offload_tok_s"] < pre["tok_per_s"] / 10
    changes = check_changes(state, f)
    assert all(c.metric == "prefill_tok_s" for c in changes)
    ub = change(f, "-b 8192 -ub 2048")
    assert ub.apply == {"ub": 2048, "b": 8192}
    assert ub.after["gpu_layers"] < ub.before["gpu_layers"]  # the trade-off is shown: VRAM for the buffer


# ---------------------------------------------------------------------------------------------------------
# Row 4: load fails with an allocation error (-ngl forced too high)
# ---------------------------------------------------------------------------------------------------------
def test_over_ask_forced_ngl():
    state = st(model="qwen2.5-32b", machine="rtx4060ti", ngl=65)
    fs = A.advise_state(state)
    assert fs[0].cause == "over_ask"  # a setup that does not load comes first
    f = fs[0]
    p = pm.place("qwen2.5-32b", "rtx4060ti", "Q4_K_M", n_ctx=8192, n_gpu_layers=65)
    assert not p.fits and f.evidence["overflow_bytes"] == p.overflow_bytes > 0
    assert any("shared system memory" in t for t in f.evidence_text)  # the module's Windows row
    changes = check_changes(state, f)  # before = does not load: every gain = tok/s
    assert all(c.before["decode_tok_s"] is None for c in changes)
    auto = change(f, "-ngl auto")
    assert auto.after["n_gpu_layers"] == 44
    for c in changes:  # -ngl 65 cannot load at >= 3 bpw: every change hands -ngl back to --fit
        assert c.apply["ngl"] == "auto" and "-ngl auto" in c.flags["llama.cpp"]


def test_sysmem_spill_on_an_nvidia_card_is_a_placement_finding():
    # -ngl 65 of a 32B on a 16 GB card: NVIDIA's Windows driver loads it and reads the overflow across PCIe
    state = st(model="qwen2.5-32b", machine="rtx4060ti", ngl=65)
    fs = A.advise_state(state)
    assert [f.cause for f in fs[:2]] == ["over_ask", "sysmem_spill"]
    f = fs[1]
    p = pm.place("qwen2.5-32b", "rtx4060ti", "Q4_K_M", n_ctx=8192, n_gpu_layers=65)
    mc = pm.MACHINES["rtx4060ti"]
    assert f.evidence["overflow_bytes"] == p.overflow_bytes > 0 and f.evidence["pcie_gbs"] == mc.pcie_gbs
    # by hand: the same -ngl on a card with room for it, then the overflow read over PCIe once per token
    from dataclasses import replace

    big = replace(mc, gpu=replace(mc.gpu, mem_gb=100.0))
    roomy = pm.place("qwen2.5-32b", big, "Q4_K_M", n_ctx=8192, n_gpu_layers=65)
    assert roomy.fits and roomy.gpu_layers == 64
    fit = pm.decode_step_time(roomy, big, context=2000)["tok_per_s"]
    assert f.evidence["fit_decode_tok_s"] == pytest.approx(fit, rel=1e-9)
    spilled = 1.0 / (1.0 / fit + p.overflow_bytes / (mc.pcie_gbs * 1e9))
    assert f.evidence["spilled_decode_tok_s"] == pytest.approx(spilled, rel=1e-9)
    assert spilled < fit / 4  # 7 GB over a 16 GB/s link per token: PCIe sets the speed
    assert "placement question" in f.evidence_text[-1] and "Sysmem Fallback" in f.evidence_text[-1]
    assert [c.apply for c in f.changes] == [{"ngl": "auto"}]
    # the calculator's findings render its label
    assert findings_mod.CAUSE_LABELS["sysmem_spill"]


def test_no_sysmem_spill_where_the_driver_fails_the_load_or_fit_chooses():
    # --fit (-ngl auto) never over-asks; a ROCm card's driver has no sysmem fallback; a setup that fits has none
    assert all(f.cause != "sysmem_spill" for f in A.advise_state(st(model="qwen2.5-32b", machine="rtx4060ti")))
    assert all(f.cause != "sysmem_spill" for f in A.advise_state(st(model="llama-3.1-8b", machine="rtx4090", ngl=33)))
    from dataclasses import replace

    mc = pm.MACHINES["rtx4060ti"]
    amd = replace(mc, gpu=replace(mc.gpu, backend="rocm"))
    p = pm.place("qwen2.5-32b", amd, "Q4_K_M", n_ctx=8192, n_gpu_layers=65)
    fs = A.advise(p, amd, context=2000)
    assert not p.fits and fs[0].cause == "over_ask" and all(f.cause != "sysmem_spill" for f in fs)


def test_over_ask_keeps_the_users_ngl_when_something_else_fits():
    state = st(model="qwen2.5-32b", machine="rtx4060ti", ngl=50)
    f = findings(state)["over_ask"]
    check_changes(state, f)
    keep = [c for c in f.changes if "ngl" not in c.apply]
    assert keep and all(c.after["n_gpu_layers"] == 50 for c in keep)
    assert all(set(c.apply) == {"quant"} and c.apply["quant"].startswith("Q3_K") for c in keep)


def test_over_ask_ram_on_cpu_only():
    state = st(model="llama-3.1-70b", machine="cpu-ddr5", quant="Q8_0")
    f = findings(state)["over_ask"]
    assert f.evidence["failing_device"] == "RAM"
    assert any("pages weights from the drive" in t for t in f.evidence_text)  # the module's "disk busy" row
    check_changes(state, f)
    assert all(c.apply.get("quant") for c in f.changes)


# ---------------------------------------------------------------------------------------------------------
# Row 7: CPU-only decode slower than expected: too many threads
# ---------------------------------------------------------------------------------------------------------
def test_thread_model_by_hand():
    for t in (1, 2, 3, 4, 6, 8, 12, 16):
        assert A.thread_factor(t, 8) == pytest.approx(by_hand_thread_factor(t))
    assert A.thread_factor(16, 8) == pytest.approx(1.4)
    with pytest.raises(ValueError, match="n_threads"):
        A.thread_factor(0, 8)


def _threads_to_8(state, f):
    """The finding's one change (-t 8, llama.cpp's default on the 8-core DDR5 machine) and the default -t's
    decode step, which is the change's 'after'."""
    check_changes(state, f)
    c = f.changes[0]
    assert c.apply == {"threads": 8} and c.flags["llama.cpp"].startswith("-t 8")
    p = pm.place("llama-3.1-8b", "cpu-ddr5", "Q4_K_M", n_ctx=8192)
    d = pm.decode_step_time(p, context=2000)
    assert c.after["decode_tok_s"] == pytest.approx(d["tok_per_s"], rel=1e-12)  # the default -t is the baseline
    return c, d


def test_too_many_threads_cpu_only():
    state = st(model="llama-3.1-8b", machine="cpu-ddr5", threads=16)
    f = findings(state)["too_many_threads"]
    assert f.evidence["cpu_time_factor"] == pytest.approx(1.4)
    c, d = _threads_to_8(state, f)
    assert c.before["decode_tok_s"] == pytest.approx(1 / (1.4 * d["cpu_s"] + d["overhead_s"]), rel=1e-12)


def test_too_few_threads_cpu_only():
    """-t 2 on an 8-core CPU that runs the whole model: -t 8 (llama.cpp's default) is offered, with the model's
    own numbers before and after; at the default -t nothing about threads is reported."""
    state = st(model="llama-3.1-8b", machine="cpu-ddr5", threads=2)
    f = findings(state)["too_few_threads"]
    assert f.evidence["n_threads"] == 2 and f.evidence["perf_cores"] == 8 and f.evidence["cpu_share"] > 0.9
    c, d = _threads_to_8(state, f)
    f2 = A.thread_factor(2, 8)
    assert c.before["decode_tok_s"] == pytest.approx(1 / (f2 * d["cpu_s"] + d["overhead_s"]), rel=1e-12)
    assert not {"too_few_threads", "too_many_threads"} & set(
        findings(st(model="llama-3.1-8b", machine="cpu-ddr5", threads=8))
    )
    # a GPU machine whose CPU does nothing: no thread advice
    assert "too_few_threads" not in findings(st(model="llama-3.1-8b", machine="rtx4090", threads=2))


# ---------------------------------------------------------------------------------------------------------
# Row 8: throughput flat as users are added: concurrency capped by -np / the KV pool
# ---------------------------------------------------------------------------------------------------------
def test_concurrency_cap_slots():
    state = st(model="llama-3.1-8b", machine="rtx4090", users=8)
    f = findings(state)["concurrency_cap"]
    assert f.evidence["active"] == 1 and f.evidence["users"] == 8
    check_changes(state, f)
    for c in f.changes:
        assert c.apply["np"] == 8 and c.apply["ctx"] >= 8 * 2000
        assert c.after["active"] == 8
        assert "--max-num-seqs" in c.flags["vLLM"] and "--max-running-requests 8" in c.flags["SGLang"]
    p = pm.place("llama-3.1-8b", "rtx4090", "Q4_K_M", n_ctx=8192)
    one = pm.decode_step_time(p, context=2000)["tok_per_s"]
    assert f.changes[-1].after["aggregate_tok_s"] > 4 * one  # memory-bound: a batch of 8 nearly free


def test_concurrency_cap_kv_pool():
    # -np 4 but -c 4096 holds only two 2,000-token requests
    state = st(model="llama-3.1-8b", machine="rtx4090", ctx=4096, np=4, users=4)
    f = findings(state)["concurrency_cap"]
    assert f.evidence["pool_sequences"] == 2 and f.evidence["active"] == 2
    check_changes(state, f)


# Row 8 again, from the serving simulation: throughput flat as users are added, with the cause named
def flat(state):
    return findings(state).get("throughput_flat")


def test_throughput_flat_cap_slots():
    # -np 2, 8 users of 2,000 + 128 tokens: at 4 and at 8 users llama-server decodes 2 at a time, the same
    # batches, so twice the users give the same throughput; the rest queue (TTFT grows)
    f = flat(st(model="llama-3.1-8b", machine="rtx4090", np=2, users=8, ctx=8192))
    assert f and f.evidence["cause"] == "cap" and f.title.endswith("a concurrency cap")
    assert f.evidence["tok_s"] == pytest.approx(f.evidence["tok_s_half"], rel=0.05)
    assert "-np (n_parallel) allows 2 slots" in f.evidence_text[1] and "6 wait in the queue" in f.evidence_text[1]
    # the change: a slot per user and a context that holds them all, simulated again
    (c,) = f.changes
    assert c.apply == {"np": 8, "ctx": -(-8 * 2128 // 256) * 256}
    assert c.after["aggregate_tok_s"] > 1.5 * c.before["aggregate_tok_s"]
    from enginelab.advisor import load

    p = pm.place("llama-3.1-8b", "rtx4090", "Q4_K_M", n_ctx=c.apply["ctx"])
    again, _ = load.run("llama.cpp", p, 8, 2000, 128, n_parallel=8, kv_unified=True)
    assert c.after["aggregate_tok_s"] == pytest.approx(again.output_throughput)


def test_throughput_flat_kv_pool():
    # -np 8 but -c 8192 holds 8192 // 2128 = 3 whole requests: at 4 and at 8 users 3 run
    f = flat(st(model="llama-3.1-8b", machine="rtx4090", np=8, users=8, ctx=8192))
    assert f and f.evidence["cause"] == "kv" and f.evidence["kv_pool_tokens"] == 8192
    assert "hold 3 requests of 2,128 tokens, not 8" in f.evidence_text[1]
    assert f.evidence["gain"] < 0.25


def test_throughput_flat_compute_and_no_finding_for_one_user():
    # a CPU: 16 then 32 users, all of whom fit -c 131072 and the 32 slots; the arithmetic of their prompts and
    # decodes is what does not grow, and no flag is offered for it
    f = flat(st(model="llama-3.1-8b", machine="cpu-ddr5", np=32, users=32, ctx=131072))
    assert f and f.evidence["cause"] == "compute" and f.changes == []
    assert flat(st(model="llama-3.1-8b", machine="rtx4090")) is None  # one user
    # 8 slots and room for 8 on a 4090, 512-token prompts: 4 -> 8 users adds more than a quarter
    assert flat(st(model="llama-3.1-8b", machine="rtx4090", np=8, users=8, ctx=32768, tokens=512)) is None
    # with 2,000-token prompts the prompts' arithmetic, shared by the steps, flattens it: compute
    f = flat(st(model="llama-3.1-8b", machine="rtx4090", np=8, users=8, ctx=32768))
    assert f and f.evidence["cause"] == "compute" and f.evidence["tok_s"] > f.evidence["tok_s_half"]


# ---------------------------------------------------------------------------------------------------------
# advise() on a Placement, and bad input
# ---------------------------------------------------------------------------------------------------------
def test_advise_takes_a_placement_and_names_its_causes():
    p = pm.place("qwen2.5-14b", "rtx3060", "Q4_K_M", n_ctx=32768)
    fs = A.advise(p, context=2000)
    assert {f.cause for f in fs} == {"partial_offload", "kv_competes"}
    assert all(f.cause in A.CAUSES for f in fs)
    d = fs[0].as_dict()
    assert set(d) == {"cause", "title", "evidence", "evidence_text", "changes", "severity"}
    assert set(d["changes"][0]) >= {"title", "flags", "apply", "before", "after", "gain", "effect"}


def test_bad_input_names_the_field():
    p = pm.place("llama-3.1-8b", "rtx4090")
    with pytest.raises(ValueError, match="placement"):
        A.advise("not a placement")
    with pytest.raises(ValueError, match="n_parallel"):
        A.advise(p, n_parallel=0)
    with pytest.raises(ValueError, match="n_threads"):
        A.advise(pm.place("llama-3.1-8b", "cpu-ddr5"), n_threads=-2)


# ---------------------------------------------------------------------------------------------------------
# Recipes
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "goal,model,machine,used",
    [
        ("one_user_fits", "llama-3.1-8b", "rtx4060ti", "one_user_fits"),
        ("one_user_too_big", "qwen2.5-32b", "rtx4060ti", "one_user_too_big"),
        ("one_user_too_big", "qwen3-30b-a3b", "rtx3060", "one_user_too_big"),
        ("apple", "llama-3.1-70b", "m4max", "apple"),
        ("cpu_only", "llama-3.1-8b", "cpu-ddr5", "cpu_only"),
        ("several_users", "llama-3.1-8b", "rtx4090", "several_users"),
        ("one_user_fits", "qwen2.5-32b", "rtx4060ti", "one_user_too_big"),  # does not fit: says so, switches
        ("apple", "llama-3.1-8b", "rtx4090", "one_user_fits"),
    ],
)
def test_recipes_fill_a_state_perf_model_agrees_with(goal, model, machine, used):
    r = A.recipe(goal, model, machine)
    assert r.goal == used
    s = r.state
    assert {"model", "machine", "quant", "kv", "ctx", "ngl", "n_cpu_moe", "tokens", "engine"} <= set(s)
    got = recheck({**BASE, **s})
    assert got["fits"]
    assert r.outcome["decode_tok_s"] == pytest.approx(got["decode_tok_s"], rel=1e-12)
    numbered = [e for e in r.explanations if any(ch.isdigit() for ch in e)]
    assert len(numbered) >= 2 and len(numbered) >= len(r.explanations) - 1  # at most one plain remark
    if used != goal:
        assert A.GOALS[used] in r.explanations[0]
    # the first numbers quoted are perf_model's
    if used in ("one_user_fits", "cpu_only"):
        v = got["decode_tok_s"]
        assert (f"{v:,.0f}" if v >= 100 else f"{v:.1f}") + " tok/s" in " ".join(r.explanations)
    if used == "several_users":
        assert r.engine == "vLLM" and "--max-num-seqs 4" in r.command
        assert f"{got['aggregate_tok_s']:,.0f} tok/s in all" in " ".join(r.explanations)
    if used == "one_user_too_big" and pm.MODELS[model].is_moe:
        assert s["n_cpu_moe"] > 0 and s["ngl"] == pm.MODELS[model].n_layers + 1


def test_recipe_rejects_unknown_goal():
    with pytest.raises(ValueError, match="goal"):
        A.recipe("fastest", "llama-3.1-8b", "rtx4090")


# ---------------------------------------------------------------------------------------------------------
# Fine-tuned models: LoRA
# ---------------------------------------------------------------------------------------------------------
def test_lora_memory_rank16_qkvo_llama8b_by_hand():
    c = A.lora_cost("llama-3.1-8b", 16)
    q = 16 * (4096 + 4096)  # A: 16 x 4096, B: 4096 x 16
    k = 16 * (4096 + 1024)  # 8 KV heads x 128 = 1024 outputs
    per_layer = q + k + k + q  # q, k, v, o
    assert per_layer == 425_984
    assert c["params_per_layer"] == per_layer
    assert c["params"] == per_layer * 32 == 13_631_488
    assert c["bytes"] == 13_631_488 * 2 == 27_262_976
    assert c["per_layer"]["k_proj"]["A"] == (16, 4096) and c["per_layer"]["k_proj"]["B"] == (1024, 16)
    assert c["decode_flops_per_token"] == 2 * 13_631_488
    assert c["merged_extra_bytes"] == 0 and c["merge_wins"]
    assert not c["vllm_needs_max_lora_rank"] and "--max-lora-rank 16" in c["flags"]["vLLM"]
    assert "--lora adapter.gguf" in c["flags"]["llama.cpp"] and "--lora-scaled" in c["flags"]["llama.cpp"]
    assert "--lora-paths" in c["flags"]["SGLang"] and "--max-loras-per-batch" in c["flags"]["SGLang"]


def test_lora_decode_cost_and_when_adapters_win():
    p = pm.place("llama-3.1-8b", "rtx4090", "Q4_K_M", n_ctx=8192)
    c = A.lora_cost(
        "llama-3.1-8b",
        64,
        ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
        placement=p,
        n_adapters=1,
    )
    d = pm.decode_step_time(p, context=2000)
    # adapter bytes at the GPU's effective bandwidth (perf_model's bytes / memory time)
    assert c["extra_decode_s"] == pytest.approx(c["bytes"] * d["gpu_mem_s"] / d["gpu_bytes"], rel=1e-12)
    assert 0 < c["lora_tok_s"] < d["tok_per_s"]
    assert c["vllm_needs_max_lora_rank"] and "--max-lora-rank 64" in c["flags"]["vLLM"]
    many = A.lora_cost("llama-3.1-8b", 16, placement=p, n_adapters=5)
    assert not many["merge_wins"] and many["adapters_bytes"] < many["separate_models_bytes"]
    with pytest.raises(ValueError, match="target_modules"):
        A.lora_cost("llama-3.1-8b", 16, ("qq_proj",))
    with pytest.raises(ValueError, match="rank"):
        A.lora_cost("llama-3.1-8b", 0)


# ---------------------------------------------------------------------------------------------------------
# Speculative decoding
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 3, 5, 8])
def test_expected_tokens_closed_form_limits(n):
    assert A.expected_tokens(0.0, n) == 1.0
    assert A.expected_tokens(1.0, n) == n + 1
    a = 0.6
    assert A.expected_tokens(a, n) == pytest.approx(sum(a**i for i in range(n + 1)), rel=1e-12)
    assert A.expected_tokens(0.999999, n) == pytest.approx(n + 1, rel=1e-4)  # continuous at a -> 1


def test_speculative_timing_from_perf_model():
    p = pm.place("llama-3.1-8b", "rtx4060ti", "Q4_K_M", n_ctx=8192)
    n = 3
    lo, hi = A.speculative(p, "llama-3.2-1b", 0.0, n), A.speculative(p, "llama-3.2-1b", 1.0, n)
    dp = pm.place("llama-3.2-1b", "rtx4060ti", "Q4_K_M", n_ctx=8192)
    t_d = pm.decode_step_time(dp, context=2000)["total_s"]
    assert lo["target_gpu_layers_with_draft"] == 32  # 8B + 1B both fit: the target keeps its layers
    t_v = pm.decode_step_time(p, context=2000, batch=n + 1)["total_s"]
    assert lo["expected_tokens"] == 1 and hi["expected_tokens"] == n + 1
    assert lo["tok_s"] == pytest.approx(1 / (n * t_d + t_v), rel=1e-12)
    assert hi["tok_s"] == pytest.approx((n + 1) / (n * t_d + t_v), rel=1e-12)
    assert lo["speedup"] < 1 < hi["speedup"]  # acceptance 0: drafting only costs
    be = A.speculative(p, "llama-3.2-1b", lo["break_even_acceptance"], n)
    assert be["tok_s"] == pytest.approx(be["baseline_tok_s"], rel=1e-6)
    assert "--spec-draft-n-max 3" in lo["flags"]["llama.cpp"] and "-md " in lo["flags"]["llama.cpp"]
    assert '"num_speculative_tokens": 3' in lo["flags"]["vLLM"]


def test_speculative_stops_paying_with_a_slow_draft():
    p = pm.place("qwen2.5-32b", "rtx4060ti", "Q4_K_M", n_ctx=8192)
    fast = A.speculative(p, "qwen2.5-0.5b", 0.7)
    slow = A.speculative(p, "qwen2.5-14b", 0.7)
    assert fast["pays"] and fast["speedup"] > 1.5
    assert not slow["pays"] and slow["break_even_acceptance"] > 0.7
    # the 14B draft takes VRAM from the target: fewer target layers on the GPU
    assert slow["target_gpu_layers_with_draft"] < slow["target_gpu_layers_before"]
    with pytest.raises(ValueError, match="acceptance"):
        A.speculative(p, "qwen2.5-0.5b", 1.5)


def test_pure_stdlib_import():
    import subprocess
    import sys
    from pathlib import Path

    pylib = Path(__file__).resolve().parents[1] / "pylib"
    r = subprocess.run(
        [
            sys.executable,
            "-E",
            "-s",
            "-S",
            "-c",
            f"import sys; sys.path.insert(0, {str(pylib)!r}); import enginelab.advisor; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'js', 'pyscript')))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert r.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------------------
# The [advisor] figure page (enginelab.figures.advisor): state, apply buttons, golden SVGs
# ---------------------------------------------------------------------------------------------------------
import json  # noqa: E402
import re  # noqa: E402
from html import unescape  # noqa: E402

from goldens import golden  # noqa: E402  tests/golden/<name>.svg, byte for byte

from enginelab import page as _page  # noqa: E402
from enginelab.figures import REGISTRY, calculator  # noqa: E402
from enginelab.figures import advisor as F  # noqa: E402


def fstate(q=""):
    s, msgs = F.SPEC.from_query(q)
    assert msgs == []
    return s


def buttons(html: str, cls: str | None = "apply") -> list:
    """The states of the buttons with data-set-state: the findings' Apply buttons (class="apply"), or every one
    (cls=None, which includes the calculator's GPU buttons)."""
    out = []
    for tag in re.findall(r"<button[^>]*data-set-state=[^>]*>", html):
        if cls is None or f'class="{cls}"' in tag:
            out.append(json.loads(unescape(re.search(r'data-set-state="([^"]*)"', tag).group(1))))
    return out


def test_figure_is_registered_and_takes_the_calculators_state():
    assert REGISTRY["advisor"] is F
    for name in ("ID", "TITLE", "SPEC", "default_state", "compute", "describe", "render"):
        assert hasattr(F, name)
    calc_default = calculator.default_state().as_dict()
    adv_default = F.default_state().as_dict()
    assert {k: adv_default[k] for k in calc_default} == calc_default
    # a calculator URL is an advisor URL
    q = "?model=qwen2.5-14b&machine=rtx3060&quant=Q5_K_M&kv=q8_0&ctx=32768&ngl=40&tokens=3000"
    assert F.SPEC.to_query(fstate(q)) == q


def test_every_apply_button_moves_the_numbers_as_predicted():
    s = fstate()
    data = F.compute(s)
    html = F.render(data)
    applies = buttons(html)
    assert applies, "no apply buttons"
    predicted = {json.dumps(c.apply, sort_keys=True): c for f in data.findings for c in f.changes}
    assert {json.dumps(a, sort_keys=True) for a in applies} == set(predicted)
    for a in applies:
        new, msgs = F.SPEC.coerce({**s.as_dict(), **a})
        assert msgs == []
        got = F.compute(new).readouts
        c = predicted[json.dumps(a, sort_keys=True)]
        assert got.advisor_decode_tok_s == pytest.approx(c.after["decode_tok_s"], rel=1e-12)
        # the calculator part shows the same placement
        calc = F.compute(new).calc.readouts
        assert calc.n_gpu_layers == c.after["n_gpu_layers"]
    assert 'data-undo=""' in html and "disabled" in re.search(r"<button[^>]*data-undo[^>]*>", html).group(0)


def test_findings_html_alone_and_the_healthy_case():
    healthy = F.findings_html({"model": "llama-3.1-8b", "machine": "rtx4090"})
    assert 'data-findings="0"' in healthy and "Nothing to fix" in healthy and "data-set-state" not in healthy
    sick = F.findings_html("?model=qwen2.5-14b&machine=rtx3060&ctx=32768")
    assert 'data-cause="partial_offload"' in sick and 'data-cause="kv_competes"' in sick
    assert "{&quot;kv&quot;:&quot;q8_0&quot;}" in sick


def test_recipe_lora_and_speculative_panels():
    s = fstate("?model=llama-3.1-8b&machine=rtx4060ti&goal=one_user_fits&lora_rank=16&draft=llama-3.2-1b")
    data = F.compute(s)
    html = F.render(data)
    r = A.recipe(
        "one_user_fits", "llama-3.1-8b", "rtx4060ti", "Q4_K_M", context=2000, users=2, tokens=2000, profile="measured"
    )
    assert data.recipe.state == r.state  # the page's (measured) profile
    use = [b for b in buttons(html) if "ctx" in b]
    assert use == [{"ctx": 4096, "ngl": 33}]  # only what differs from the current state
    assert 'data-lora-bytes="27262976"' in html  # rank 16 on q,k,v,o of the 8B, by hand above
    sp = A.speculative(data.outcome.placement, "llama-3.2-1b", 0.7, 3, context=2000)
    assert f'data-spec-tok-s="{sp["tok_s"]!r}"' in html
    assert 'id="spec-chart"' in html and "--spec-draft-n-max 3" in html


def test_bad_query_values_never_crash():
    s, msgs = F.SPEC.from_query("?acceptance=2&draft=zzz&lora_rank=-1&goal=<b>x</b>&threads=0&users=abc")
    text = " | ".join(msgs)
    assert "above the maximum 1" in text and "'zzz'" in text and "below the minimum 0" in text
    assert "not one of" in text and "'abc' is not a whole number" in text
    html = F.render(F.compute(s))
    assert "<b>x</b>" not in html


@pytest.mark.parametrize(
    "q",
    [
        "?machine=cpu-ddr5&threads=16",
        "?model=qwen3-30b-a3b&machine=rtx3060&users=4&np=2",
        "?machine=m4max&model=llama-3.1-70b&goal=apple",
        "?goal=several_users&users=8",
        "?model=llama-3.1-70b&machine=rtx4090&tokens=8000&ctx=16384&goal=one_user_too_big",
        "?model=qwen2.5-32b&draft=qwen2.5-14b&lora_rank=128&lora_targets=all",
    ],
)
def test_pages_render_for_many_states(q):
    s = fstate(q)
    v = _page.view(F, s)
    assert "What holds this setup back" in v["figure"] and v["summary"]
    for a in buttons(v["figure"], cls=None):
        assert F.SPEC.coerce({**s.as_dict(), **a})[1] == []  # every button holds a valid state change


def _golden(name: str, text: str):
    golden(name.removesuffix(".svg"), text)


def test_golden_gains_chart_default():
    # the module's case on the course profile (stable across refits of the measured profile)
    _golden("advisor.svg", str(findings_mod.gains_chart(F.compute(fstate("?profile=course")).found)) + "\n")


def test_golden_gains_chart_overask():
    _golden(
        "advisor-overask.svg", str(findings_mod.gains_chart(F.compute(fstate("?ngl=65&profile=course")).found)) + "\n"
    )


def test_golden_speculative_chart():
    d = F.compute(fstate("?model=llama-3.1-8b&machine=rtx4060ti&draft=llama-3.2-1b&profile=course"))
    _golden("advisor-spec.svg", str(F._spec_chart(d.spec)) + "\n")


def test_unified_memory_partial_offload_does_not_time_pcie():
    # 70B Q4_K_M (42 GB) on a 48 GB M4 Pro: the GPU may use 75% (36 GB), so --fit leaves blocks on the CPU side.
    # There is no PCIe link (pcie_gbs = 0): the advisor times the prompt without op offload instead of dividing by 0.
    p = pm.place("llama-3.1-70b", "m4pro", "Q4_K_M", n_ctx=8192)
    assert p.fits and not p.full_offload and pm.MACHINES["m4pro"].pcie_gbs == 0
    fs = A.advise(p)
    assert all(f.cause != "pp_bound_by_pcie" for f in fs)
    o = A.evaluate(A.setup_from_placement(p))
    assert o.prefill_tok_s == pytest.approx(pm.prefill_time(p, n_tokens=2000, op_offload=False)["tok_per_s"])
    r = A.recipe("apple", "llama-3.1-70b", "m4pro")
    assert r.goal == "apple" and r.outcome["fits"]


def test_recipe_when_nothing_loads_at_the_asked_quant():
    r = A.recipe("one_user_too_big", "qwen2.5-72b", "rtx3060", quant="Q8_0")  # 77 GB of weights, 12 + 32 GB
    assert "does not load" in r.explanations[0]
    assert r.outcome["fits"] is True or "Pick a smaller model" in r.explanations[0]


def test_findings_html_for_the_calculators_state():
    cs = calculator.SPEC.from_query("?model=llama-3.1-70b&machine=rtx4090&ctx=16384&tokens=8000")[0]
    html = calculator.findings_html(calculator.compute(cs))  # what the calculator page shows
    assert 'data-cause="pp_bound_by_pcie"' in html  # its -ub/-b change needs keys the
    assert "(set it on the advisor page)" in html  # calculator does not have
    for a in buttons(html):
        assert set(a) <= set(calculator.SPEC.by_key)
        assert calculator.SPEC.coerce({**cs.as_dict(), **a})[1] == []
