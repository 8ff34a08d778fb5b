"""Several GPUs: llama.cpp's layer and row split, --fit across devices, their time, and vLLM/SGLang tensor
parallelism. Splits derived by hand (the arithmetic is in the comments), and per-device buffers checked against
real llama.cpp loads with two devices (data/lab/multi_device.csv and data/lab/logs/rpc-*.log)."""

from __future__ import annotations

import csv
import dataclasses
import math
import re
from pathlib import Path

import pytest

import perf_model as pm
from enginelab import serving_plan as sp

GB, GiB, MiB = 1e9, 1 << 30, 1 << 20
MARGIN = 1024 * MiB  # --fit-target, per device
DDR4 = pm._ram(64, pm.DDR4_DUAL)


def machine(*gpus, link=None, pcie=31.5):
    return pm.Machine(" + ".join(g.name for g in gpus), tuple(gpus), DDR4, pcie, interconnect=link)


TWO_3090 = machine(pm.RTX_3090, pm.RTX_3090)
RTX3090_3060 = machine(pm.RTX_3090, pm.RTX_3060)


def block_bytes(model, quant, layers):
    return sum(r["bytes"] for r in pm.quantize_plan(model, quant) if r["layer"] in layers)


# ---------------------------------------------------------------------------------------------------------
# Machines
# ---------------------------------------------------------------------------------------------------------
def test_one_gpu_machines_are_unchanged():
    one = pm.MACHINES["rtx3090"]
    tup = pm.Machine(one.name, (one.gpu,), one.ram, one.pcie_gbs, key=one.key)
    assert tup.gpu is one.gpu and tup == one and tup.gpus == (one.gpu,) and not tup.multi_gpu
    assert pm.MACHINES["cpu-ddr5"].gpus == ()
    a = pm.place("qwen2.5-32b", one, n_ctx=8192)
    b = pm.place("qwen2.5-32b", tup, n_ctx=8192, split_mode="row", tensor_split=(1,))
    assert a == b  # one GPU: -sm / -ts change nothing
    assert a.per_gpu[0].weights == a.gpu_weights and a.per_gpu[0].total == a.gpu_total
    assert "-sm" not in pm.llama_server_command(a) and "-ts" not in pm.llama_server_command(a)


def test_machine_checks():
    with pytest.raises(ValueError, match="gpu"):
        pm.Machine("x", (), DDR4, 31.5)
    with pytest.raises(ValueError, match="gpu"):
        pm.Machine("x", (pm.RTX_3090, "RTX 3060"), DDR4, 31.5)
    with pytest.raises(ValueError, match="unified"):
        pm.Machine("x", (pm.M4_MAX, pm.M4_MAX), DDR4, 0.0, unified=True)
    with pytest.raises(ValueError, match="^kind"):
        pm.Interconnect("carrier-pigeon")
    with pytest.raises(ValueError, match="^interconnect"):
        pm.Machine("x", (pm.RTX_3090, pm.RTX_3090), DDR4, 31.5, interconnect="nvlink")
    # the default link: PCIe through the host at the machine's PCIe rate
    assert TWO_3090.link.kind == "pcie" and TWO_3090.link.bandwidth_gbs == 31.5
    assert machine(pm.RTX_3090, pm.RTX_3090, link=pm.LINKS["nvlink"]).link.bandwidth_gbs == 56.25


def test_split_arguments_are_checked():
    with pytest.raises(ValueError, match="split_mode"):
        pm.place("qwen2.5-32b", TWO_3090, split_mode="rows")
    with pytest.raises(ValueError, match="main_gpu"):
        pm.place("qwen2.5-32b", TWO_3090, main_gpu=2)
    with pytest.raises(ValueError, match="tensor_split"):
        pm.place("qwen2.5-32b", TWO_3090, tensor_split=(1, 1, 1))
    with pytest.raises(ValueError, match="tensor_split"):
        pm.place("qwen2.5-32b", TWO_3090, tensor_split=(3, -1))
    with pytest.raises(ValueError, match="tensor_split"):
        pm.place("qwen2.5-32b", TWO_3090, tensor_split="3,1")
    # all zero is llama.cpp's "not given": split by free memory
    assert pm.place("qwen2.5-32b", TWO_3090, tensor_split=(0, 0)) == pm.place("qwen2.5-32b", TWO_3090)


# ---------------------------------------------------------------------------------------------------------
# Layer split by hand
# ---------------------------------------------------------------------------------------------------------
def test_two_24gb_cards_llama31_70b_q4_k_m_by_hand():
    p = pm.place("llama-3.1-70b", TWO_3090, "Q4_K_M", n_ctx=8192)
    # 80 blocks + the output layer = 81 layers over two cards with the same free memory (24e9 bytes each,
    # course profile): split points [0.5, 1.0]; layer il goes to GPU 0 while il / 81 < 0.5, i.e. il <= 40.
    g0, g1 = p.per_gpu
    assert g0.layers == tuple(range(41))
    assert g1.layers == tuple(range(41, 81))  # blocks 41..79 and the output layer (index 80)
    # Q4_K_M: a block is 482,410,496 bytes (attn_q/attn_output 8192x8192 Q4_K = 37,748,736 each; attn_k
    # 8192x1024 Q4_K = 4,718,592; attn_v Q5_K = 5,767,168; ffn_gate/up/down 8192x28672 Q4_K = 132,120,576 each;
    # two f32 norms 65,536), and 544,079,872 where llama-quantize's use_more_bits(i, 80) gives attn_v and
    # ffn_down Q6_K (i < 10, i >= 70, or (i - 10) % 3 == 2: +1,114,112 and +60,555,264).
    big, small = 544_079_872, 482_410_496
    # GPU 0: blocks 0..40 = 10 (0..9) + 10 (12, 15, ..., 39) big blocks, 21 small
    assert g0.weights == 20 * big + 21 * small == 21_012_217_856
    # GPU 1: blocks 41..79 = 10 (42, ..., 69) + 10 (70..79) big, 19 small; plus output.weight
    # (8192 x 128256 Q6_K = 861,880,320) and output_norm + rope_freqs (f32, 32,768 + 256)
    assert g1.weights == 20 * big + 19 * small + 861_880_320 + 33_024 == 20_909_310_208
    # KV: 2 (K, V) x 8 heads x 128 x 2 bytes (f16) = 4096 bytes per token and layer; x 8192 = 32 MiB per layer
    assert g0.kv == 41 * 8192 * 4096 and g1.kv == 39 * 8192 * 4096
    # compute buffers: blocks 4*512*(3*28672 + 3*8192) + 2*512*8192 = 234,881,024; the output's logits
    # 4*512*(128256 + 8192) = 279,445,504 (the larger)
    assert g0.compute == 234_881_024 and g1.compute == 279_445_504
    # each keeps --fit's 1 GiB free (22.62 and 22.50 GB of 24 - 1.07), so --fit keeps the default split
    assert g0.total == 22_622_830_592 and g1.total == 22_497_378_560
    assert p.fits and p.auto and p.n_gpu_layers == 81 and all(u.fits for u in p.per_gpu)
    assert p.cpu_weights == 591_003_648  # token_embd (Q4_K) stays on the CPU
    # the command leaves -ngl and -ts to --fit (it splits the same way); with -ngl pinned, -ts pins the split
    assert pm.llama_server_command(p) == "llama-server -m Llama-3.1-70B-Q4_K_M.gguf -c 8192 -fa on"
    pinned = pm.place("llama-3.1-70b", TWO_3090, "Q4_K_M", n_ctx=8192, n_gpu_layers=81)
    assert pinned.per_gpu == p.per_gpu and "-ngl 81 -ts 41,40" in pm.llama_server_command(pinned)


def test_decode_layer_split_by_hand():
    p = pm.place("llama-3.1-70b", TWO_3090, "Q4_K_M", n_ctx=8192)
    d = pm.decode_step_time(p, context=0)
    # course profile: each card streams its layers at 0.7 x 936 GB/s, one after the other (memory-bound:
    # 2 FLOPs per weight at 0.5 x 71 TFLOP/s is 2 ms against 32 ms of reading)
    t0 = 21_012_217_856 / (0.7 * 936e9)
    t1 = 20_909_310_208 / (0.7 * 936e9)
    # one hop, GPU 0 -> GPU 1: 8192 x 4 bytes through the host (two trips over 31.5 GB/s) + 30 us
    hop = 30e-6 + 2 * 8192 * 4 / 31.5e9
    assert d["link"] == {"kind": "hop", "transfers": 1, "bytes": 32768.0}
    assert d["link_s"] == pytest.approx(hop)
    assert d["gpu_s"] == pytest.approx(t0 + t1)
    assert d["total_s"] == pytest.approx(t0 + t1 + hop + pm.DECODE_OVERHEAD_S)
    assert [e["side"] for e in d["devices"]] == ["gpu0", "gpu1", "cpu"]
    assert d["devices"][0]["busy_s"] == pytest.approx(t0) and d["devices"][1]["busy_s"] == pytest.approx(t1)
    assert d["tok_per_s"] == pytest.approx(15.6, abs=0.05)


def test_24gb_plus_12gb_default_proportional_split():
    model = "qwen2.5-32b"
    p = pm.place(model, RTX3090_3060, "Q4_K_M", n_ctx=8192)
    # free memory 24e9 and 12e9 (exact in float32): split points [2/3, 1]; 65 layers; GPU 0 while
    # il / 65 < 0.6667: il <= 43 (43/65 = 0.662, 44/65 = 0.677)
    g0, g1 = p.per_gpu
    assert g0.layers == tuple(range(44)) and g1.layers == tuple(range(44, 65))
    # KV 2 x 8 x 128 x 2 = 4096 bytes per token and layer, 32 MiB per layer at 8192
    assert g0.kv == 44 * 32 * MiB and g1.kv == 20 * 32 * MiB
    assert g0.weights == block_bytes(model, "Q4_K_M", range(44))
    assert p.fits and p.n_gpu_layers == 65 and g0.fits and g1.fits
    pinned = pm.place(model, RTX3090_3060, "Q4_K_M", n_ctx=8192, n_gpu_layers=65)
    assert "-ngl 65 -ts 44,21" in pm.llama_server_command(pinned)
    # -ts 3,1 instead: points [0.75, 1]; il / 65 < 0.75 for il <= 48
    q = pm.place(model, RTX3090_3060, "Q4_K_M", n_ctx=8192, tensor_split=(3, 1))
    assert len(q.per_gpu[0].layers) == 49 and len(q.per_gpu[1].layers) == 16
    assert "-ts 3,1" in pm.llama_server_command(q)


def test_over_ask_on_the_second_device_names_it():
    p = pm.place("qwen2.5-32b", RTX3090_3060, "Q4_K_M", n_ctx=8192, tensor_split=(1, 1))
    # -ts 1,1: points [0.5, 1]: il / 65 < 0.5 for il <= 32. The RTX 3060 gets blocks 33..63 and the output
    g0, g1 = p.per_gpu
    assert g1.layers == tuple(range(33, 65))
    assert g1.kv == 31 * 32 * MiB == 1_040_187_392
    # its compute buffer is the logits': 4 * 512 * (152064 + 5120) = 321,912,832
    assert g1.compute == 321_912_832
    assert g0.fits and not g1.fits and not p.fits
    assert p.failing_device == "GPU 1 (RTX 3060)"
    assert "GPU 1 (RTX 3060)" in p.error
    # free = 12e9 - 1 GiB margin
    assert p.free_bytes == 12e9 - MARGIN and p.requested_bytes == g1.total
    assert p.overflow_bytes == pytest.approx(g1.total - (12e9 - MARGIN))


def test_fit_fills_back_to_front():
    two_3060 = machine(pm.RTX_3060, pm.RTX_3060)
    p = pm.place("qwen2.5-32b", two_3060, "Q4_K_M", n_ctx=8192)
    g0, g1 = p.per_gpu
    # the default split (33 / 32 layers) overflows both 12 GB cards, so --fit fills GPU 1 from the end,
    # then GPU 0 below it, and leaves the first layers on the CPU
    assert g1.layers[-1] == 64 and g0.layers[-1] + 1 == g1.layers[0]
    assert p.n_gpu_layers == len(g0.layers) + len(g1.layers) < 65
    assert p.tensor_split == (len(g0.layers), len(g1.layers))
    assert p.layer_device[: 65 - p.n_gpu_layers] == ("cpu",) * (65 - p.n_gpu_layers)
    assert p.fits and p.auto
    # each card is as full as whole layers allow: one more layer on GPU 1 (taken from GPU 0) would not fit
    more = pm.place(
        "qwen2.5-32b", two_3060, "Q4_K_M", n_ctx=8192, n_gpu_layers=p.n_gpu_layers, tensor_split=(0.001, 1e9)
    )
    assert len(more.per_gpu[1].layers) > len(g1.layers) and not more.per_gpu[1].fits


def test_split_mode_none_uses_main_gpu_only():
    p = pm.place("qwen2.5-14b", RTX3090_3060, "Q4_K_M", n_ctx=8192, split_mode="none", main_gpu=1)
    g0, g1 = p.per_gpu
    assert g0.total == 0 and g1.layers[-1] == 48  # everything --fit fits on the RTX 3060
    assert "-sm none -mg 1" in pm.llama_server_command(p)


# ---------------------------------------------------------------------------------------------------------
# Row split
# ---------------------------------------------------------------------------------------------------------
def test_row_split_by_hand():
    model, quant = "qwen2.5-32b", "Q4_K_M"
    p = pm.place(model, TWO_3090, quant, n_ctx=8192, split_mode="row")
    assert p.row_split and p.row_fractions == (0.5, 0.5)  # by total memory: 24 / (24 + 24)
    g0, g1 = p.per_gpu
    # the layers (norms, KV cache) are assigned as in layer mode: 33 / 32 (32 = 31 blocks + output)
    assert g0.layers == tuple(range(33)) and g1.layers == tuple(range(33, 65))
    assert g0.kv == 33 * 32 * MiB and g1.kv == 31 * 32 * MiB
    plan = pm.quantize_plan(model, quant)
    mats = sum(r["bytes"] for r in plan if r["layer"] >= 0 and r["cls"] not in ("norm", "bias"))
    out = sum(r["bytes"] for r in plan if r["cls"] == "output")
    small = {i: sum(r["bytes"] for r in plan if r["layer"] in layers and r["cls"] in ("norm", "bias")) for i, layers in
             ((0, range(33)), (1, range(33, 64)))}  # fmt: skip
    out_norm = sum(r["bytes"] for r in plan if r["layer"] < 0 and r["cls"] == "norm")
    # every matrix (and the output matrix) half on each card; norms and biases on the layer's card
    assert g0.weights == pytest.approx(0.5 * (mats + out) + small[0])
    assert g1.weights == pytest.approx(0.5 * (mats + out) + small[1] + out_norm)
    # the synchronisations: per block 7 split matmuls (q, k, v, o, gate, up, down): inputs
    # 6 x 5120 + 27648 = 58,368 wide (copied, f32, to the other card), outputs 5120 + 1024 + 1024 + 5120 +
    # 27648 + 27648 + 5120 = 72,704 rows (the other card's half comes back): 4 * 58368 + 4 * 72704 / 2 =
    # 378,880 bytes per token and block; the output matrix 4 * 5120 + 4 * 152064 / 2 = 324,608
    d = pm.decode_step_time(p, context=0)
    assert d["link"]["kind"] == "sync" and d["link"]["transfers"] == 7 * 64 + 1 == 449
    assert d["link"]["bytes"] == 64 * 378_880 + 324_608 == 24_572_928
    assert d["link_s"] == pytest.approx(449 * 30e-6 + 2 * 24_572_928 / 31.5e9)
    # the cards read their halves at the same time: the GPU time is about half the layer split's
    lay = pm.decode_step_time(pm.place(model, TWO_3090, quant, n_ctx=8192), context=0)
    assert d["gpu_s"] == pytest.approx(lay["gpu_s"] / 2, rel=0.03)
    assert "-sm row" in pm.llama_server_command(p)


def test_row_split_on_a_backend_without_a_split_buffer_places_like_layer():
    vk = dataclasses.replace(pm.RTX_3090, backend="vulkan")
    p = pm.place("qwen2.5-32b", machine(vk, vk), n_ctx=8192, split_mode="row")
    q = pm.place("qwen2.5-32b", machine(vk, vk), n_ctx=8192)
    assert not p.row_split and [u.weights for u in p.per_gpu] == [u.weights for u in q.per_gpu]


# ---------------------------------------------------------------------------------------------------------
# Time: both profiles, per device, invariants
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("profile", pm.PROFILES)
@pytest.mark.parametrize("split_mode", ["layer", "row"])
def test_time_has_a_per_device_breakdown(profile, split_mode):
    p = pm.place("llama-3.1-70b", TWO_3090, "Q4_K_M", n_ctx=8192, split_mode=split_mode, profile=profile)
    d = pm.decode_step_time(p, context=2000)
    assert d["profile"] == profile and len(d["devices"]) == 3
    assert d["total_s"] == pytest.approx(d["gpu_s"] + d["cpu_s"] + d["link_s"] + d["overhead_s"])
    # tokens/s x bytes read never beats the GPUs' summed bandwidth
    assert d["tok_per_s"] * d["gpu_bytes"] <= 2 * 936e9
    f = pm.prefill_time(p, n_tokens=2000)
    assert f["total_s"] == pytest.approx(sum(s["time_s"] for s in f["steps"]))
    assert f["parts_s"]["link"] > 0
    gpus = {s.get("gpu") for s in f["steps"] if s["kind"] == "gpu"} - {None}
    if split_mode == "layer":
        assert gpus == {0, 1}
    else:
        assert any("parallel" in s for s in f["steps"])
    for x in (d["total_s"], f["total_s"]):
        assert math.isfinite(x) and x > 0


def test_nvlink_and_rpc_links():
    fast = machine(pm.RTX_3090, pm.RTX_3090, link=pm.LINKS["nvlink"])
    slow = machine(pm.RTX_3090, pm.RTX_3090, link=pm.LINKS["rpc-1g"])
    t = {}
    for name, mc in (("pcie", TWO_3090), ("nvlink", fast), ("rpc", slow)):
        p = pm.place("llama-3.1-70b", mc, "Q4_K_M", n_ctx=8192, split_mode="row" if name != "rpc" else "layer")
        t[name] = pm.decode_step_time(p, context=0)
    assert t["nvlink"]["link_s"] < t["pcie"]["link_s"]
    # RPC: the host sends the input rows to the first GPU, a hop between the GPUs, and the logits come back
    # (128256 x 4 bytes) over 1 GbE (0.117 GB/s): 3 round trips of 300 us
    r = t["rpc"]["link"]
    assert r["transfers"] == 3 and r["bytes"] == 8192 * 4 * 2 + 128256 * 4
    assert t["rpc"]["link_s"] == pytest.approx(3 * 300e-6 + r["bytes"] / 0.117e9)
    assert "--rpc host0:50052,host1:50052" in pm.llama_server_command(pm.place("qwen2.5-14b", slow))


# ---------------------------------------------------------------------------------------------------------
# Real llama.cpp loads with two devices (RPC backend, Llama 3.2 1B Q4_K_M): per-device buffers
# ---------------------------------------------------------------------------------------------------------
LAB = Path(__file__).resolve().parents[1] / "data" / "lab"  # data/lab/README.md: how these were made


def _free_mib(log: str) -> tuple:
    """The free memory each rpc-server reported, from the log's header ("RPC0 ... reports 3000 MiB; ...")."""
    head = (LAB / "logs" / log).read_bytes().decode("utf-8", "replace").splitlines()[1]
    return tuple(int(x) for x in re.findall(r"RPC\d \S+ reports (\d+) MiB", head))


def _rows():
    by: dict = {}
    for r in csv.DictReader((LAB / "multi_device.csv").open(encoding="utf-8")):
        r["n_ctx"] = re.search(r"n_ctx=(\d+)", r["notes"]).group(1)  # the final load's (--fit may shrink it)
        r["free_mib"] = _free_mib(re.search(r"log (rpc-\S+\.log)", r["notes"]).group(1))
        r["device"] = r["device"].split()[0]
        by.setdefault(r["config"], []).append(r)
    return by


def _place_from_flags(rows):
    r0 = rows[0]
    flags = r0["flags"].split()
    arg = lambda f, d=None: flags[flags.index(f) + 1] if f in flags else d  # noqa: E731
    free = r0["free_mib"]
    dev = [pm.Device(f"RPC{i}", free[i] * MiB / GB, 100.0, 1.0, backend="cpu") for i in range(2)]
    mc = pm.Machine("two rpc-servers", tuple(dev), pm._ram(24), 0.0, interconnect=pm.LINKS["rpc-10g"])
    ngl = arg("-ngl")
    fit = arg("-fit") == "on"
    ts = arg("-ts")
    return pm.place(
        "llama-3.2-1b",
        mc,
        "Q4_K_M",
        n_ctx=int(r0["n_ctx"]),
        n_gpu_layers=None if fit else min(int(ngl), 17),
        tensor_split=None if ts is None else [float(x) for x in ts.split(",")],
        split_mode=arg("-sm", "layer"),
        main_gpu=int(arg("-mg", 0)),
        fit_target_mib=1024 if fit else 0,  # -fit off: no margin
    )


def test_the_lab_data_is_there():
    rows = _rows()
    assert len(rows) == 10 and all(len(r) == 3 for r in rows.values())  # RPC0, RPC1 and the host per load
    assert _rows()["j-fit-on-default-ctx"][0]["free_mib"] == (2000, 1500)


@pytest.mark.parametrize("config", sorted(_rows()))
def test_per_device_buffers_match_real_llama_cpp_loads(config):
    rows = _rows()[config]
    p = _place_from_flags(rows)
    for r in rows:
        if r["device"] == "CPU":
            # the host's model bytes include CPU_REPACK copies (this AVX-512 CPU repacks Q4_K): KV only
            assert p.cpu_kv == int(r["kv_bytes"])
            continue
        u = p.per_gpu[int(r["device"][3])]
        # the CSV holds llama.cpp's printed MiB (0.01 MiB steps) x 2^20; a rope_freqs copy per device is 128 B
        assert abs(u.weights - int(r["model_buffer_bytes"])) <= 0.006 * MiB, (r["device"], u.weights)
        assert abs(u.kv - int(r["kv_bytes"])) <= 0.006 * MiB
        # compute buffers: within 7% (one log has 60.01 MiB where the formula gives 64)
        assert u.compute == pytest.approx(int(r["compute_bytes"]), rel=0.07, abs=0.02 * MiB)
        m = re.match(r"(\d+)(?: \((\d+)-(\d+)\))?", r["layers_on_device"])
        assert len(u.layers) == int(m.group(1))
        if m.group(2):
            assert u.layers == tuple(range(int(m.group(2)), int(m.group(3)) + 1))


# ---------------------------------------------------------------------------------------------------------
# vLLM / SGLang tensor parallelism
# ---------------------------------------------------------------------------------------------------------
MQA = pm.Model(
    name="MQA 7B (one KV head)",
    model_type="llama",
    num_hidden_layers=32,
    hidden_size=4096,
    intermediate_size=11008,
    num_attention_heads=32,
    num_key_value_heads=1,
    head_dim=128,
    vocab_size=32000,
    max_position_embeddings=8192,
    key="mqa-7b",
)


def test_vllm_tp2_with_fewer_kv_heads_than_gpus_replicates_them():
    one = sp.vllm_plan(MQA, "rtx4090", max_model_len=8192)
    two = sp.vllm_plan(MQA, "rtx4090", max_model_len=8192, tensor_parallel_size=2)
    # vLLM: max(1, num_kv_heads // tp) = max(1, 1 // 2) = 1 KV head per GPU: replicated, not split
    assert two["kv_heads_per_gpu"] == 1 and two["kv_heads_replicated"]
    # so a page is as big as on one GPU: 16 tokens x 2 (K, V) x 1 head x 128 x 2 bytes = 8192
    assert two["page_size_bytes"] == one["page_size_bytes"] == 16 * 2 * 1 * 128 * 2
    # weights per GPU (bf16): per block q and o (4096 x 4096) and gate/up/down (4096 x 11008) halved, k and v
    # (4096 x 128, the one head) whole, two norms whole: 16,777,216 + 1,048,576 + 67,633,152 + 8,192 =
    # 85,467,136 parameters; x 32 blocks; embedding and lm_head 32000 x 4096 split by vocabulary
    # (32000 / 2 = 16000 rows each: 65,536,000 x 2); the final norm 4,096
    params = 32 * 85_467_136 + 2 * 65_536_000 + 4_096
    assert two["weights_bytes"] == 2 * params == 5_732_048_896
    # all-reduce per token and GPU: (2 x 32 + 1) all-reduces x 2 (2-1)/2 x 4096 x 2 bytes, plus half the
    # logits gathered: 32000 / 2 x 2 bytes = 532,480 + 32,000
    assert two["allreduce_bytes_per_token"] == 532_480 + 32_000
    assert "--tensor-parallel-size 2" in two["command"]
    assert any("replicated" in n for n in two["notes"])
    # with 8 KV heads the page halves instead
    gqa = sp.vllm_plan("llama-3.1-8b", "rtx4090", max_model_len=8192, tensor_parallel_size=2)
    assert gqa["kv_heads_per_gpu"] == 4 and gqa["page_size_bytes"] == 16 * 2 * 4 * 128 * 2
    assert not gqa["kv_heads_replicated"]


def test_sglang_tp_and_its_checks():
    p = sp.sglang_plan(MQA, "rtx4090", context_length=8192, tp_size=2)
    # one replicated KV head: 32 layers x 2 x 1 x 128 x 2 bytes per token on each GPU
    assert p["cell_size_bytes"] == 32 * 2 * 1 * 128 * 2 and p["kv_heads_per_gpu"] == 1
    assert "--tp 2" in p["command"]
    # the heuristic reserves tp/8 GiB more with more GPUs
    assert p["reserved_mib_heuristic"] == sp.sglang_mem_fraction_static(24 * GiB, tp_size=2)["reserved_mib"]
    with pytest.raises(ValueError, match="tensor_parallel_size"):
        sp.vllm_plan("qwen2.5-7b", "rtx4090", tensor_parallel_size=8)  # 28 heads
    with pytest.raises(ValueError, match="tp_size"):
        sp.sglang_plan("qwen2.5-7b", "rtx4090", tp_size=3)
    # a machine with two GPUs: the smaller card sets the plan
    q = sp.vllm_plan("llama-3.1-8b", RTX3090_3060, max_model_len=8192, tensor_parallel_size=2)
    assert q["total_bytes"] == 12 * GiB and q["gpu"] == "RTX 3090 + RTX 3060"
