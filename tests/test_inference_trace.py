"""inference_trace: steps add up to perf_model's totals; warm vs cold; the partial-offload story."""

import pytest

import inference_trace as it
import perf_model as pm


@pytest.mark.parametrize("key", list(it.PHASE_SCENARIOS))
@pytest.mark.parametrize("context", [0, 2000, 8000])
def test_decode_steps_sum_to_decode_step_time(key, context):
    s = it.PHASE_SCENARIOS[key]
    p = pm.place(s["model"], s["machine"], s["quant"], s["n_ctx"])
    steps = it.phase_trace(p, p.machine, "decode", context=context)
    assert sum(x["seconds"] for x in steps) == pytest.approx(
        pm.decode_step_time(p, p.machine, context)["total_s"], rel=1e-12
    )
    d = pm.decode_step_time(p, p.machine, context)
    assert sum(x["bytes"] for x in steps) == pytest.approx(d["gpu_bytes"] + d["cpu_bytes"], rel=1e-12)


@pytest.mark.parametrize("key", list(it.PHASE_SCENARIOS))
@pytest.mark.parametrize("n", [1, 31, 512, 2000, 5000])
def test_prefill_steps_sum_to_prefill_time(key, n):
    s = it.PHASE_SCENARIOS[key]
    p = pm.place(s["model"], s["machine"], s["quant"], s["n_ctx"])
    steps = it.phase_trace(p, p.machine, "prefill", n_tokens=n)
    assert sum(x["seconds"] for x in steps) == pytest.approx(pm.prefill_time(p, p.machine, n)["total_s"], rel=1e-12)
    assert len({x["ubatch"] for x in steps}) == -(-n // 512)


def test_step_fields_and_bounds():
    steps = it.phase_scenario("fits", "prefill")
    for x in steps:
        assert {"what", "device", "tier", "bytes", "flops", "intensity", "bound", "seconds"} <= set(x)
    assert all(x["bound"] == "compute" for x in steps)  # prefill: compute-bound
    dec = it.phase_scenario("fits", "decode")
    assert all(x["bound"] in ("memory", "latency") for x in dec)  # decode: memory-bound
    assert max(x["intensity"] for x in dec if x["bytes"]) < 10


def test_partial_offload_cpu_dominates_decode():
    # module: CPU share 62% (32B on a 16 GB card) and 92% (70B on a 24 GB card)
    for key, mk, want in [("qwen2.5-32b", "rtx4060ti", 0.62), ("llama-3.1-70b", "rtx4090", 0.92)]:
        p = pm.place(key, mk, "Q4_K_M", 8192)
        steps = it.phase_trace(p, p.machine, "decode", context=2000)
        cpu = sum(x["seconds"] for x in steps if x["device"] == "cpu")
        total = sum(x["seconds"] for x in steps)
        assert cpu / total > 0.5
        assert round(cpu / total, 2) == want


def test_warm_load_faster_only_by_drive_reads():
    for key in it.LOAD_SCENARIOS:
        cold, warm = it.load_scenario(key), it.load_scenario(key, warm=True)
        assert [s["what"].replace("(drive", "(page cache").replace("drive ->", "page cache ->") for s in cold] == [
            s["what"] for s in warm
        ]
        assert warm[-1]["elapsed_s"] < cold[-1]["elapsed_s"]
        for c, w in zip(cold, warm):
            if not c["reads_file"]:
                assert c["seconds"] == w["seconds"] and c["bytes"] == w["bytes"]
            else:
                assert c["bytes"] == w["bytes"] and w["seconds"] <= c["seconds"]
        assert any(s["tier"] == "drive" for s in cold) and not any(s["tier"] == "drive" for s in warm)


def test_load_partial_uploads_each_gpu_layer_over_pcie():
    steps = it.load_scenario("split-16gb")
    p = pm.place("qwen2.5-32b", "rtx4060ti", "Q4_K_M", 8192)
    ups = [s for s in steps if s["tier"] == "pcie"]
    assert len(ups) == p.gpu_layers
    assert sum(s["bytes"] for s in ups) == pytest.approx(p.gpu_weights)
    link = p.machine.pcie
    for s in ups:  # bounded by the slower of drive (5 GB/s) and link (15.75 GB/s)
        assert s["seconds"] == pytest.approx(s["bytes"] / min(p.machine.drive_gbs * 1e9, link))
    kv = [s for s in steps if "KV cache" in s["what"]]
    assert sum(s["bytes"] for s in kv) == pytest.approx(p.gpu_kv + p.cpu_kv)


def test_apple_and_cpu_scenarios_have_no_pcie():
    for key in ("apple-unified", "cpu-only"):
        steps = it.load_scenario(key)
        assert not any(s["tier"] == "pcie" for s in steps)
    assert any(s["tier"] == "unified" for s in it.load_scenario("apple-unified"))


def test_decode_curve_module_listing():
    mc = pm.MACHINES["rtx4090"]
    want = {"f16": [151.6, 136.0, 103.8, 78.9, 53.3], "q8_0": [151.6, 142.9, 121.8, 101.7, 76.6]}
    for kv, vals in want.items():
        p = pm.place(pm.MODELS["llama-3.1-8b"], mc, "Q4_K_M", n_ctx=65536, kv_type=kv)
        curve = it.decode_curve(p, mc, [0, 4096, 16384, 32768, 65536])
        assert [c["context"] for c in curve] == [0, 4096, 16384, 32768, 65536]
        assert [round(c["tok_s"], 1) for c in curve] == vals


@pytest.mark.parametrize(
    "call,arg",
    [
        (lambda p: it.phase_trace(p, None, "generate"), "phase"),
        (lambda p: it.phase_trace(p, None, "decode", context=-1), "context"),
        (lambda p: it.phase_trace(p, None, "decode", context=10**6), "context"),
        (lambda p: it.phase_trace(p, None, "prefill", n_tokens=0), "n_tokens"),
        (lambda p: it.decode_curve(p, None, [0, "x"]), "contexts"),
        (lambda p: it.decode_curve("not a placement"), "placement"),
        (lambda p: it.load_trace("llama-3.1-8b", "rtx4090", "Q4_K_M", 0), "n_ctx"),
        (lambda p: it.load_trace("llama-3.1-8b", "rtx4090", "Q4_K_M", 4096, warm="yes"), "warm"),
        (lambda p: it.load_scenario("nope"), "scenario"),
    ],
)
def test_bad_arguments_named(call, arg):
    p = pm.place("llama-3.1-8b", "rtx4090", "Q4_K_M", 8192)
    with pytest.raises(ValueError, match=arg):
        call(p)
