"""Physics of the time and size model, each number derived by hand in the comments (issue 13).

These pin what a forward pass reads and multiplies, independent of any fitted constant."""

import pytest

import perf_model as pm

MODELS = pm.MODELS


def _plan(model, quant):
    return {r["name"]: r for r in pm.quantize_plan(model, quant)}


# ---------------------------------------------------------------- the tied output head


def test_tied_head_bytes_read_every_decode_step():
    m = MODELS["llama-3.2-1b"]
    assert m.tie_word_embeddings
    plan = _plan(m, "Q4_K_M")
    assert "output.weight" not in plan  # tied: llama.cpp multiplies by token_embd itself
    # llama-quantize gives the tied embedding the output head's type (Q6_K under Q4_K_M):
    # 2048 x 128256 weights, Q6_K = 210 bytes per 256 weights -> 128256 * 8 * 210 = 215,470,080 B
    assert plan["token_embd.weight"]["type"] == "Q6_K"
    assert plan["token_embd.weight"]["bytes"] == 128256 * 8 * 210 == 215_470_080
    head = 215_470_080 + 2048 * 4 + 32 * 4  # + output_norm (2048 F32) + rope_freqs (head_dim/2 = 32 F32)
    all_gpu = pm.place(m, "rtx4060ti", "Q4_K_M", n_ctx=4096, n_gpu_layers=17)
    layers_only = pm.place(m, "rtx4060ti", "Q4_K_M", n_ctx=4096, n_gpu_layers=16)
    # with ngl = n_layers + 1 the head runs on the GPU, which holds its own copy of token_embd
    # (the input embedding lookup stays in host memory)
    assert all_gpu.output_on_gpu and not layers_only.output_on_gpu
    assert all_gpu.gpu_weights - layers_only.gpu_weights == head
    # host memory keeps token_embd for the input lookup either way; only the norm and rope_freqs move
    assert all_gpu.cpu_weights == 215_470_080
    assert layers_only.cpu_weights == head
    # every decode step reads it, on whichever side runs the head
    d_gpu = pm.decode_step_time(all_gpu, context=0)
    d_cpu = pm.decode_step_time(layers_only, context=0)
    assert d_cpu["cpu_weight_bytes"] == head
    assert d_gpu["gpu_weight_bytes"] == d_cpu["gpu_weight_bytes"] + head
    # it is 27% of what a Llama 3.2 1B Q4_K_M step reads (the share the issue measured)
    assert 0.26 < head / d_gpu["gpu_weight_bytes"] < 0.28


def test_metal_counts_token_embd_in_its_one_buffer():
    # llama.cpp maps the whole file into one Metal buffer, token_embd included
    m = MODELS["llama-3.1-8b"]
    mac = pm.place(m, "m4pro", "Q4_K_M", n_ctx=4096)
    cuda = pm.place(m, "rtx4090", "Q4_K_M", n_ctx=4096)
    embd = _plan(m, "Q4_K_M")["token_embd.weight"]["bytes"]  # 4096 x 128256 Q4_K = 128256 * 16 * 144
    assert embd == 128256 * 16 * 144
    assert mac.gpu_weights - cuda.gpu_weights == embd


# ---------------------------------------------------------------- MoE prefill FLOPs and last-token logits


def test_moe_prefill_multiplies_routed_experts_only():
    m = MODELS["qwen3-30b-a3b"]  # 48 blocks, hidden 2048, 32 heads x 128, 4 KV heads, 128 experts, 8 routed
    p = pm.place(m, "rtx5090", "Q4_K_M", n_ctx=4096, n_gpu_layers=49)
    # per block and token: q 2048x4096 + k 2048x512 + v 2048x512 + o 4096x2048 + router 2048x128
    dense = 2048 * 4096 + 2048 * 512 * 2 + 4096 * 2048 + 2048 * 128  # 19,136,512
    norms = 2048 + 2048 + 128 + 128  # attn_norm, ffn_norm, q_norm, k_norm
    routed = 8 * 3 * 2048 * 768  # 8 of the 128 experts, gate + up + down: 37,748,736
    matmul = 2 * 512 * 48 * (dense + norms + routed)
    # causal attention: 512 * 513 / 2 query-key pairs per block, 4 * 32 * 128 FLOPs per pair (QK^T, AV)
    attention = 4 * 32 * 128 * (512 * 513 // 2) * 48
    blocks = pm._prefill_work(p, 0, 512)
    assert blocks["gpu"].attn_flops == attention == 103_280_541_696
    assert blocks["gpu"].flops == matmul + attention == 2_899_518_160_896
    # had every expert been multiplied, the blocks would do 16x the expert FLOPs
    assert blocks["gpu"].flops < 0.1 * (2 * 512 * 48 * (dense + 128 * 3 * 2048 * 768))


def test_moe_blocks_are_counted_where_their_experts_run():
    """Each MoE block's router/top-k/gather kernels (measured.moe_layer_us) run where its experts do."""
    m = MODELS["qwen3-30b-a3b"]  # 48 blocks, every one an MoE block
    on_gpu = pm._decode_work(pm.place(m, "rtx5090", "Q4_K_M", n_ctx=4096, n_gpu_layers=49), 0, 1)
    assert (on_gpu["gpu"].moe_layers, on_gpu["cpu"].moe_layers) == (48, 0)
    # --n-cpu-moe 20: the experts of blocks 0-19 run on the CPU, the other 28 blocks' on the GPU
    split = pm._decode_work(pm.place(m, "rtx5090", "Q4_K_M", n_ctx=4096, n_gpu_layers=49, n_cpu_moe=20), 0, 1)
    assert (split["gpu"].moe_layers, split["cpu"].moe_layers) == (28, 20)
    # a dense model has none; nor does a prefill micro-batch count differently from decode
    dense = pm._decode_work(pm.place(MODELS["llama-3.1-8b"], "rtx5090", "Q4_K_M", n_gpu_layers=33), 0, 1)
    assert dense["gpu"].moe_layers == dense["cpu"].moe_layers == 0
    assert pm._prefill_work(pm.place(m, "rtx5090", "Q4_K_M", n_gpu_layers=49), 0, 512)["gpu"].moe_layers == 48


def test_moe_block_cost_is_per_block_not_per_expert():
    """The measured decode time of a Work grows by exactly moe_layer_us per MoE block (in a build from before the
    experts' sum was fused, whose expert kernels follow expert_calls alone)."""
    from dataclasses import replace

    from enginelab import measured as me

    m = MODELS["qwen3-30b-a3b"]
    p = pm.place(m, "rtx5090", "Q4_K_M", n_ctx=4096, n_gpu_layers=49)
    w = pm._decode_work(p, 0, 1)["gpu"]
    dev = p.machine.gpu
    t48 = me.decode_seconds(w, dev, "cuda", build="2025-06")[0]
    t0 = me.decode_seconds(replace(w, moe_layers=0), dev, "cuda", build="2025-06")[0]
    assert t48 - t0 == pytest.approx(48 * me.PARAMS["cuda"].moe_layer_us * 1e-6, rel=1e-9)
    assert 5.0 <= me.PARAMS["cuda"].moe_layer_us <= 100.0  # a handful of small kernels, microseconds each


def test_a_fused_build_sums_a_blocks_experts_in_one_kernel():
    """build_moe_ffn sums the k experts' outputs with k - 1 adds; Metal, Vulkan and CUDA/ROCm fuse them from the
    day of their fused_expert_adds row in data/llama_cpp_changes.csv, ggml-sycl never. By hand: Qwen3-30B-A3B (48 MoE blocks, k = 8) on an RTX 5090's
    Vulkan pays 48 x 8 expert kernels in a build of 2025-08-10 and 48 in one of 2025-08-20 (both before #15489, so
    the barriers are the same): 336 x expert_us less. On SYCL the dates change nothing."""
    from enginelab import measured as me

    f = me.fused_expert_adds
    assert not f("vulkan", "2025-08-15") and f("vulkan", "2025-08-16") and f("vulkan", "")
    assert not f("cuda", "2025-08-28") and f("cuda", "2025-09") and f("rocm", "2025-08-29")
    assert not f("metal", "2025-07-17") and f("metal", "2025-07-18")
    assert not f("sycl", "") and not f("cpu", "")
    m = MODELS["qwen3-30b-a3b"]
    w = pm._decode_work(pm.place(m, "rtx5090", "Q4_K_M", n_ctx=4096, n_gpu_layers=49), 0, 1)["gpu"]
    assert (w.moe_layers, w.expert_calls) == (48, 48 * 8)
    assert (me.expert_kernels(w, "vulkan", "2025-08-10"), me.expert_kernels(w, "vulkan", "2025-08-20")) == (384, 48)
    vk = pm.Device("GeForce RTX 5090", 32, 1792, 209.5, backend="vulkan")
    old, new = (me.decode_seconds(w, vk, "vulkan", build=b)[1] for b in ("2025-08-10", "2025-08-20"))
    assert old - new == pytest.approx(336 * me.PARAMS["vulkan"].expert_us * 1e-6, rel=1e-9)
    assert me.expert_kernels(w, "sycl", "") == me.expert_kernels(w, "sycl", "2025-01") == 384


def test_prefill_logits_for_the_last_token_only():
    m = MODELS["qwen3-30b-a3b"]
    p = pm.place(m, "rtx5090", "Q4_K_M", n_ctx=4096, n_gpu_layers=49)
    blocks = 2_899_518_160_896  # the test above
    head_one_token = 2 * (2048 * 151936 + 2048)  # output.weight and output_norm, one token
    measured = pm.prefill_time(p, n_tokens=512, profile="measured")
    assert measured["flops"] == blocks + head_one_token
    # the course profile keeps the module's simplification: the head for all 512 tokens
    course = pm.prefill_time(p, n_tokens=512)
    assert course["flops"] == blocks + 512 * head_one_token


# ---------------------------------------------------------------- llama-quantize's row fallback


@pytest.mark.parametrize("quant", ["Q2_K_MIX", "Q3_K_S", "Q3_K_M"])
def test_q2_q3_row_fallback_is_iq4_nl(quant):
    # Qwen2.5 0.5B: hidden 896 = 3.5 x 256, so a Q2_K/Q3_K row cannot be made of 256-weight super-blocks;
    # llama-quant.cpp falls back to IQ4_NL (32-weight blocks, 18 bytes)
    plan = _plan(MODELS["qwen2.5-0.5b"], quant)
    q = plan["blk.5.attn_q.weight"]
    assert q["type"] == "IQ4_NL"
    assert q["bytes"] == 896 * 896 // 32 * 18 == 451_584
    # ffn_down's rows are 4864 = 19 x 256 weights long: no fallback needed
    assert plan["blk.5.ffn_down.weight"]["type"] in ("Q3_K", "Q4_K", "Q5_K")


def test_q4_k_row_fallback_is_q5_0():
    # the K-quants of 4 bits and more fall back to the legacy blocks (Q4_K -> Q5_0, Q6_K -> Q8_0)
    plan = _plan(MODELS["qwen2.5-0.5b"], "Q4_K_M")
    assert plan["blk.5.attn_q.weight"]["type"] == "Q5_0"
    assert plan["blk.5.attn_q.weight"]["bytes"] == 896 * 896 // 32 * 22


# ---------------------------------------------------------------- matrix rows (a CPU vec_dot call each)


def test_rows_multiplied_per_decode_step_on_the_cpu():
    # Qwen2.5-0.5B: hidden 896, 14 query heads of 64 (896 rows), 2 KV heads (128 rows each for K and V),
    # FFN 4864; per block q 896 + k 128 + v 128 + o 896 + gate 4864 + up 4864 + down 896 = 12,672 rows,
    # x 24 blocks = 304,128, plus the tied head's 151,936 vocabulary rows = 456,064 (all Q8_0 under Q8_0)
    m = MODELS["qwen2.5-0.5b"]
    per_block = 896 + 128 + 128 + 896 + 4864 + 4864 + 896
    assert per_block == 12_672
    p = pm.place(m, "cpu-ddr5", "Q8_0", n_ctx=4096, n_gpu_layers=0)
    assert pm._decode_work(p, 64, 1)["cpu"].rows_by_type == (("Q8_0", 24 * per_block + 151_936),)
    # the multi-GPU path counts the CPU's rows alike: 10 of 25 layers on two GPUs = 9 blocks and the head there,
    # 15 blocks (190,080 rows) on the CPU
    two = pm.Machine("2x RTX 3090", (pm.RTX_3090, pm.RTX_3090), pm._ram(64, pm.DDR4_DUAL), 31.5)
    everything = pm.place(m, two, "Q8_0", n_ctx=4096, n_gpu_layers=0)
    assert pm._work_multi(everything, 1, 64)[0]["cpu"].rows_by_type == (("Q8_0", 456_064),)
    some = pm.place(m, two, "Q8_0", n_ctx=4096, n_gpu_layers=10)
    assert pm._work_multi(some, 1, 64)[0]["cpu"].rows_by_type == (("Q8_0", 15 * per_block),)
    # a type per row set: Q4_K_M falls back to Q5_0 for the 896-wide rows (not a multiple of 256) and keeps
    # K-quants for ffn_down (4864 = 19 x 256): the rows follow the tensors' types
    rows = dict(
        pm._decode_work(pm.place(m, "cpu-ddr5", "Q4_K_M", n_ctx=4096, n_gpu_layers=0), 64, 1)["cpu"].rows_by_type
    )
    assert sum(rows.values()) == 456_064 and rows.get("Q5_0", 0) > 0 and (rows.get("Q4_K", 0) + rows.get("Q6_K", 0)) > 0


# ---------------------------------------------------------------- the measured profile as data (issue 32)


def test_todays_features_are_every_row_of_the_change_table():
    """The runtime's TODAY is a literal: it must be what builds.features_at gives for today's build (every change in
    data/llama_cpp_changes.csv, and an FP16 SYCL build), so that the app never reads a date."""
    from enginelab.measured import builds, features

    keys = {builds.key(r) for r in builds.changes()}
    assert features.TODAY == builds.features_at("") == frozenset(keys | {"sycl_f16"})
    assert len(keys) == len(builds.changes())  # one key per row


def test_every_change_has_a_source_and_a_date():
    import re

    from enginelab.measured import builds

    for r in builds.changes():
        assert r["source"].startswith("https://github.com/ggml-org/llama.cpp/pull/"), r
        assert re.fullmatch(r"20\d\d-\d\d(-\d\d)?", r["since"]), r
        assert not r["pr"] or r["source"].endswith("/" + r["pr"]), r


def test_a_build_has_the_changes_that_landed_by_its_day():
    """By hand from the table: 2025-08-20 is after Vulkan's fused adds (2025-08-16) and before CUDA's (2025-08-29) and
    Vulkan's node dependencies (2025-08-23); a month counts the changes of that month; marks override the day."""
    from enginelab.measured.builds import features_at

    f = features_at("2025-08-20")
    assert "fused_expert_adds:vulkan" in f and "fused_expert_adds:metal" in f
    assert "fused_expert_adds:cuda" not in f and "vulkan_node_deps:vulkan" not in f and "hip_graphs:rocm" not in f
    assert "fused_expert_adds:cuda" in features_at("2025-08")  # the month of the change counts
    # the SYCL reorder: by default from 2025-07-03 (#14504); with "+opt" from each kernel's own day
    assert "sycl_reorder:sycl:Q4_K" not in features_at("2025-06-01")
    assert "sycl_reorder:sycl:Q4_K" in features_at("2025-06-01 +opt")
    assert "sycl_reorder:sycl:Q4_K" not in features_at("2026-01-01 -opt")
    assert "sycl_f16" not in features_at("2026-07-09 -f16") and "sycl_f16" in features_at("2026-07-09")
    # the CPU repacks compare months; "-Q4_K" drops a repack, "+Q6_K" forces one
    assert "cpu_repack:cpu:Q4_K x86" in features_at("2025-04") and "cpu_repack:cpu:Q4_K x86" not in features_at(
        "2025-03"
    )
    assert "cpu_repack:cpu:Q4_K x86" not in features_at("2025-10 -Q4_K")
    assert "cpu_repack:cpu:Q6_K any" in features_at("2026-01 +Q6_K")


def test_the_runtime_modules_hold_no_dates():
    """Only builds.py (calibration's) reads the change table's dates; the modules an estimate runs through hold none."""
    import re
    from pathlib import Path

    from enginelab import measured

    root = Path(measured.__file__).parent
    for name in ("classes", "devices", "features", "params", "physics", "ranges", "__init__"):
        text = (root / f"{name}.py").read_text()
        assert not re.search(r"\b20\d\d-\d\d-\d\d\b|\"20\d\d-\d\d\"", text), name


def test_the_parameter_table_has_a_row_per_parameter_and_derives_the_fit():
    from dataclasses import fields

    from enginelab import measured as me

    assert [f.name for f in fields(me.Params)] == [r.name for r in me.TABLE]
    for r in me.TABLE:
        assert r.unit and r.per and r.applies and r.reason, r.name
        assert (r.bounds is None) == (not r.fit), r.name  # fitted iff bounded
        for b, v in r.priors.items():
            assert b in me.BACKENDS and getattr(me.PRIORS[b], r.name) == v
    # by hand from the rows: CUDA's decode fit moves the GPU group and its own nograph_layer_us, Metal's keeps dq_emul
    # and hbm_layer_us (fixed_on), the CPU's moves dq_row and no GPU parameter
    cuda, metal, cpu = (me.free_names(b, "decode") for b in ("cuda", "metal", "cpu"))
    assert "nograph_layer_us" in cuda and "dq.kquant" in cuda and "sync_layer_us" not in cuda
    assert "dq_emul" not in metal and "hbm_layer_us" not in metal and "dq_emul" in cuda
    assert "dq_row" in cpu and "bw_sat_gbs" not in cpu and len(cpu) == len(set(cpu))
    assert me.bound("dq.kquant") == (0.05, 100.0) and me.bound("vendor_legacy.intel") == (0.3, 4.0)


def test_decode_time_is_the_sum_of_its_active_rows():
    """A Pascal card on CUDA has no graph replay: its decode terms list nograph_layer_us with one count per block, and
    the pass takes exactly those seconds more than the same work on an RTX 3090's figures; an RTX 3090 lists no such
    row. An HBM part lists hbm_layer_us. Each term is count x value."""
    from enginelab import measured as me

    w = pm.Work(weight_bytes=4e9, flops=8e9, layers=32, weights_by_type=(("Q4_0", 7e9),))
    prm = me.PARAMS["cuda"]
    for name, hbm, graphs in (
        ("GeForce GTX 1080 Ti", False, False),
        ("GeForce RTX 3090", False, True),
        ("A100", True, True),
    ):
        dev = pm.Device(name, 11, 484, 11.3, backend="cuda")
        terms = {t[0]: t for t in me.decode_seconds(w, dev, "cuda")[3]["terms"]}
        assert ("nograph_layer_us" in terms) is not graphs and ("hbm_layer_us" in terms) is hbm, name
        for n, count, value, seconds in terms.values():
            assert seconds == pytest.approx(count * value * 1e-6) and value == getattr(prm, n)
        if not graphs:
            assert terms["nograph_layer_us"][1] == 32


def test_kepler_multiplies_the_emulated_dot_products_at_a_sixth_of_its_fp32_rate():
    """No GPU before sm_61 has __dp4a: ggml_cuda_dp4a multiplies four byte pairs instead, the same code on Kepler and
    Maxwell. Kepler issues those 32-bit integer multiply-adds at a sixth of its FP32 rate, Maxwell a byte product as
    one full-rate XMAD: on the same figures only the dequantization's emulated part costs dq_emul_kepler times more.
    Compute seconds by hand: weights x dq.legacy x dq_emul (x dq_emul_kepler) / the FP32 rate."""
    from dataclasses import replace

    from enginelab import measured as me

    w = pm.Work(weight_bytes=4e9, flops=8e9, layers=32, weights_by_type=(("Q4_0", 7e9),))
    prm = replace(me.PARAMS["cuda"], dq_emul_kepler=1.8)
    params = dict(me.PARAMS, cuda=prm)
    kepler = pm.Device("Tesla K80", 12, 240.5, 4.37, backend="cuda")
    maxwell = pm.Device("Tesla M40", 12, 240.5, 4.37, backend="cuda")
    pascal = pm.Device("Tesla P40", 12, 240.5, 4.37, backend="cuda")  # sm_61: __dp4a
    assert me.rates(kepler, "cuda")["kepler"] and not me.rates(kepler, "cuda")["dp4a"]
    assert not me.rates(maxwell, "cuda")["kepler"] and not me.rates(maxwell, "cuda")["dp4a"]
    assert me.rates(pascal, "cuda")["dp4a"] and not me.rates(pascal, "cuda")["kepler"]
    fp32 = me.vector_tflops(kepler, "cuda") * 1e12
    cmp = {d.name: me.decode_seconds(w, d, "cuda", params=params)[2] for d in (kepler, maxwell, pascal)}
    base = 7e9 * prm.dq["legacy"] / fp32
    assert cmp["Tesla P40"] == pytest.approx(base)
    assert cmp["Tesla M40"] == pytest.approx(base * prm.dq_emul)
    assert cmp["Tesla K80"] == pytest.approx(base * prm.dq_emul * 1.8)
    # Kepler's GeForce cards and a Maxwell GTX 750 Ti / Titan X by name
    for name, is_kepler in (
        ("GeForce GTX 780 Ti", True),
        ("GeForce GTX TITAN Black", True),
        ("Tesla K40m", True),
        ("GeForce GTX 750 Ti", False),
        ("GeForce GTX TITAN X", False),
        ("GeForce GTX 980", False),
    ):
        r = me.rates(pm.Device(name, 6, 300, 5.0, backend="cuda"), "cuda")
        assert r["kepler"] is is_kepler and not r["dp4a"], name


def test_prefill_adds_its_active_rows_per_micro_batch():
    """By hand: 32 blocks and 64 expert calls over k = 3 micro-batches cost 3 x (32 pp_layer_us + 64 pp_expert_us);
    an offloaded pass (only the CPU blocks' matmuls run on the GPU) has no per-block row."""
    from enginelab import measured as me

    prm = me.PARAMS["cuda"]
    w = pm.Work(weight_bytes=4e9, flops=8e9, layers=32, expert_calls=64, weights_by_type=(("Q4_0", 7e9),))
    terms = {t[0]: t for t in me.prefill_terms(w, prm, 3)}
    assert terms["pp_layer_us"][3] == pytest.approx(32 * prm.pp_layer_us * 1e-6 * 3)
    assert terms["pp_expert_us"][3] == pytest.approx(64 * prm.pp_expert_us * 1e-6 * 3)
    assert [t[0] for t in me.prefill_terms(w, prm, 3, offloaded=True)] == ["pp_expert_us"]
    dev = pm.Device("GeForce RTX 3090", 24, 936, 71.0, backend="cuda")
    t_on, _ = me.prefill_seconds(w, dev, "cuda", 512, 3)
    t_off, _ = me.prefill_seconds(w, dev, "cuda", 512, 3, offloaded=True)
    assert t_on - t_off == pytest.approx(terms["pp_layer_us"][3], rel=1e-9)


def test_a_builds_missing_changes_and_what_each_costs():
    """By hand from the table: a Vulkan build of 2025-08-20 has the fused expert adds (2025-08-16) but neither the node
    dependencies (#15489, 2025-08-23) nor the integer-dot shader for Q4_1, Q5_0 and Q8_0 on Intel (#14903,
    2025-09-01). On an RTX 5090 decoding Qwen3-30B-A3B (48 blocks) only the first costs anything: 48 x sync_layer_us
    more per pass."""
    from enginelab import measured as me
    from enginelab.measured import builds, effects

    lacks = [(r["feature"], r["applies_to"], r["pr"]) for r in builds.missing("2025-08-20", "vulkan")]
    assert lacks == [("vulkan_node_deps", "", "15489")] + [
        ("vulkan_mmvq", t, "14903") for t in ("Q4_1", "Q5_0", "Q8_0")
    ]
    assert builds.missing("", "") == ()  # today's build lacks nothing
    m = MODELS["qwen3-30b-a3b"]
    w = pm._decode_work(pm.place(m, "rtx5090", "Q4_K_M", n_ctx=4096, n_gpu_layers=49), 0, 1)["gpu"]
    vk = pm.Device("GeForce RTX 5090", 32, 1792, 209.5, backend="vulkan")
    t_today = me.decode_seconds(w, vk, "vulkan")[0]
    ((row, share),) = effects.decode_effects(w, vk, "vulkan", "2025-08-20")
    assert row["pr"] == "15489"
    assert share * t_today == pytest.approx(48 * me.PARAMS["vulkan"].sync_layer_us * 1e-6, rel=1e-9)


def test_a_cpus_devices_csv_isa_decides_arm_or_x86_before_its_name(monkeypatch):
    """devices.csv's int8_isa names an Arm extension (dotprod, i8mm) or an x86 one (VNNI, AMX); where it does, it
    decides, whatever the name says; a CPU without a row (or with "none") falls back to its name."""
    from enginelab.measured import devices

    rows = {devices._name_key("Foo 9000"): "i8mm", devices._name_key("Apple Bar"): "avx512_vnni"}
    monkeypatch.setattr(devices, "_cpu_column", lambda column: rows if column == "int8_isa" else {})
    assert devices.is_arm_cpu(devices._Named("Foo 9000")) and not devices.is_arm_cpu(devices._Named("Apple Bar"))
    assert devices.is_arm_cpu(devices._Named("Apple M3 (CPU)")) and not devices.is_arm_cpu(
        devices._Named("Ryzen 5 7600")
    )


def test_the_explanation_reads_the_computations_terms_and_recomputes_no_condition():
    """explain.py takes from enginelab.measured only the fitted values, the fit's summary, the table's sentences and
    two constants of the formulas it prints; which rows applied (graphs, HBM, a vendor's shader, an SoC's cap, the
    overlap) it reads from the estimate's basis and terms."""
    import ast
    from pathlib import Path

    from enginelab import explain

    tree = ast.parse(Path(explain.__file__).read_text())
    used = {
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "me"
    }
    assert used <= {"params_for", "basis_summary", "explain_sentence", "READ_TEST_SHARE", "CPU_BW_KNEE"}, used


def test_devices_csv_names_each_gpus_architecture_and_a_name_outside_it_is_classed_by_its_name():
    """A GPU row of devices.csv gives its architecture (arch: an ARCH_RATIOS key) and its dp4a, kepler and hbm
    flags; the rates of a listed card come from those columns, and a card the file does not list (a reader's own
    24gb-936gbs-71tf, a new name) is classed by its name as before."""
    from enginelab.measured import devices as md

    rows = [r for r in md._device_rows() if r.get("kind") not in ("cpu", "apple")]
    assert rows and all(r["arch"] in md.ARCH_RATIOS and {r["dp4a"], r["kepler"], r["hbm"]} <= {"0", "1"} for r in rows)
    k80 = next(r for r in rows if "K80" in r["device"])
    assert (k80["arch"], k80["dp4a"], k80["kepler"]) == ("nv_no_tensor", "0", "1")

    class Card:  # the classification reads a name only
        def __init__(self, name):
            self.name = name

    # the column wins over the name: a listed name with its row's architecture
    assert md.gpu_arch(Card(k80["device"]), "cuda") == ("nv_no_tensor", False, True, False)
    # an unlisted name falls back to the name rules
    assert md.gpu_arch(Card("GeForce RTX 9999 Super"), "cuda")[0] == "nv_geforce"
    assert md.gpu_arch(Card("Radeon RX 7777 XT"), "rocm")[0] == "rdna3"
