"""Recurrent, linear-attention and short-conv blocks in both speed profiles: the state a decode step reads and
writes, the scan a prefill runs, and the measured profile's held-out error on published hybrid runs."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

import perf_model as pm
from enginelab import calibration, ggml, hybrid_calibration, measured

ROOT = Path(__file__).resolve().parents[1]
F32 = 4


def _qwen35_08b():
    return pm.model_from_hf_config(dict(hybrid_calibration.CONFIGS[("qwen35", "0.75")]), name="Qwen3.5-0.8B")


def _on_gpu(model, quant="Q8_0", n_ctx=4096):
    return pm.place(model, pm.MACHINES["rtx4090"], quant, n_ctx=n_ctx, n_gpu_layers=model.n_layers + 1)


# Qwen3.5-0.8B's delta-net block (its config.json): conv kernel 4, 16 key heads and 16 value heads of 128.
#   conv state r = (4 - 1) x (value 16 x 128 + 2 x key 16 x 128) = 3 x 6144 = 18,432 f32
#   delta-rule state s = 128 (key width) x 2048 (value width) = 262,144 f32
#   a decode step reads both and writes both back: 2 x 4 x (18,432 + 262,144) = 2,244,608 bytes per sequence
QWEN35_GDN_STEP_BYTES = 2 * F32 * (3 * (16 * 128 + 2 * 16 * 128) + 128 * 16 * 128)
# LFM2.5-2.6B's short-conv block: n_embd 2048, L_cache 3: r = 2048 x 2 = 4,096 f32 and no s: 2 x 4 x 4096 bytes
LFM2_CONV_STEP_BYTES = 2 * F32 * 2048 * (3 - 1)


def test_hand_derived_state_bytes():
    assert QWEN35_GDN_STEP_BYTES == 2_244_608
    assert LFM2_CONV_STEP_BYTES == 32_768


@pytest.mark.parametrize("context", [1, 1000, 100_000])
def test_qwen35_delta_net_block_moves_its_state_whatever_the_context(context):
    m = _qwen35_08b()
    assert pm.decode_kv_read_bytes(m, 0, context) == QWEN35_GDN_STEP_BYTES  # block 0: linear attention
    # block 3 is a full-attention block: 2 KV heads x 256 (K and V) x 2 bytes (f16) per cached token
    assert pm.decode_kv_read_bytes(m, 3, context) == 2 * 2 * 256 * 2 * context


def test_lfm2_short_conv_block_moves_its_conv_state():
    m = pm.MODELS["lfm2.5-2.6b"]
    cfg = json.loads((ROOT / "data/architectures/configs/lfm2.5-2.6b.json").read_text())
    conv = [i for i, t in enumerate(cfg["layer_types"]) if t == "conv"]
    assert len(conv) == 22
    for il in conv:
        assert pm.decode_kv_read_bytes(m, il, 5000) == LFM2_CONV_STEP_BYTES


@pytest.mark.parametrize("batch", [1, 3])
def test_decode_work_counts_every_recurrent_blocks_state_per_sequence(batch):
    m = _qwen35_08b()
    w = pm._decode_work(_on_gpu(m), 0, batch)["gpu"]  # context 0: the attention blocks read nothing yet
    assert w.kv_bytes == 18 * QWEN35_GDN_STEP_BYTES * batch  # 18 of the 24 blocks are delta nets
    assert w.rec_blocks == 18
    assert w.rec_steps == 18  # the batch's sequences advance together: one step per block


def test_lfm2_decode_work_counts_its_conv_blocks():
    m = pm.MODELS["lfm2.5-2.6b"]
    w = pm._decode_work(_on_gpu(m), 0, 1)["gpu"]
    assert w.kv_bytes == 22 * LFM2_CONV_STEP_BYTES
    assert w.rec_blocks == 22


def _dev():
    return replace(pm.MACHINES["rtx4090"].gpu, backend="cuda")


def test_both_profiles_charge_the_state_traffic_in_decode():
    m = _qwen35_08b()
    w = pm._decode_work(_on_gpu(m), 0, 1)["gpu"]
    no_state = replace(w, kv_bytes=0.0)
    dev = _dev()
    course = pm.get_profile("course")
    dt = course.decode_seconds(w, dev, "cuda", None, 1)[1] - course.decode_seconds(no_state, dev, "cuda", None, 1)[1]
    assert dt == pytest.approx(w.kv_bytes / (pm.ETA_DECODE * dev.bandwidth))
    prm = measured.params_for("cuda")
    dt = measured.decode_seconds(w, dev, "cuda")[1] - measured.decode_seconds(no_state, dev, "cuda")[1]
    assert dt == pytest.approx(w.kv_bytes / measured._bw_eff(dev, "cuda", prm, None))
    assert dt > 0


def test_prefill_work_counts_the_scan_per_token():
    m = _qwen35_08b()
    w = pm._prefill_work(_on_gpu(m), 0, 512)["gpu"]
    # per token and delta-net block: 7 FLOPs per element of s (decay, k^T S, the rank-1 update, q^T S) and
    # 2 x 4 taps x 6144 conv channels; per query-key pair of an attention block 2 x 8 heads x (256 + 256)
    scan = 7 * 128 * 2048 + 2 * 4 * 6144
    pairs = 512 * 513 // 2
    assert w.attn_flops == pytest.approx(18 * 512 * scan + 6 * pairs * 2 * 8 * 512)
    assert w.rec_steps == 18 * 512
    # a second micro-batch: the scan costs the same per token, the attention pairs grow
    w2 = pm._prefill_work(_on_gpu(m), 512, 512)["gpu"]
    assert w2.attn_flops - w.attn_flops == pytest.approx(6 * (512 * 512) * 2 * 8 * 512)


def test_both_profiles_charge_the_scan_in_prefill():
    m = _qwen35_08b()
    w = pm._prefill_work(_on_gpu(m), 0, 512)["gpu"]
    dev = _dev()
    course = pm.get_profile("course")
    no_scan = replace(w, flops=w.flops - 18 * 512 * (7 * 128 * 2048 + 2 * 4 * 6144))
    dt = (
        course.prefill_seconds(w, dev, "cuda", 512, 1, None, 1.0)[0]
        - course.prefill_seconds(no_scan, dev, "cuda", 512, 1, None, 1.0)[0]
    )
    assert dt == pytest.approx(18 * 512 * (7 * 128 * 2048 + 2 * 4 * 6144) / (pm.ETA_PREFILL * dev.flops))
    # the measured profile adds the scan's sequential steps: scan_us per token and block, k micro-batches
    for k in (1, 3):
        steps = (
            measured.prefill_seconds(w, dev, "cuda", 512, k)[0]
            - measured.prefill_seconds(replace(w, rec_steps=0.0), dev, "cuda", 512, k)[0]
        )
        assert steps == pytest.approx(18 * 512 * measured.params_for("cuda").scan_us * 1e-6 * k)


def test_default_calibration_samples_have_no_hybrid_model():
    assert not any(getattr(item[1], "rec_blocks", 0) for s in calibration.samples() for item in s.work)


def test_hybrid_models_match_llama_bench_parameter_counts():
    for (arch, params), _cfg in hybrid_calibration.CONFIGS.items():
        m, _ = hybrid_calibration.model_for(arch, params)
        assert m is not None, (arch, params)
        assert abs(m.total_params() / 1e9 / float(params) - 1) <= 0.01
    assert hybrid_calibration.family(hybrid_calibration.model_for("qwen35", "8.95")[0]) == "gated delta net"
    assert hybrid_calibration.family(hybrid_calibration.model_for("nemotron_h_moe", "31.58")[0]) == "Mamba-2"
    assert hybrid_calibration.family(hybrid_calibration.model_for("nemotron_h", "8.89")[0]) == "Mamba-2"
    assert hybrid_calibration.family(hybrid_calibration.model_for("lfm2", "2.70")[0]) == "short conv"


# Held-out error of the measured profile on published hybrid runs (bench/bench_blocks.py prints the table):
# the leave-one-device-out median of |estimate / measured - 1| as measured when the scan row was added, with a
# tolerance of 15% of it plus one point. Gated delta net: decode 26.7%, prefill 33.3%; Mamba-2: decode 4.7%,
# prefill 11.8%. Without the scan row the prefill medians were 34.8% and 38.2%.
GATES = {
    ("gated delta net", "decode"): 0.267,
    ("gated delta net", "prefill"): 0.333,
    ("Mamba-2", "decode"): 0.047,
    ("Mamba-2", "prefill"): 0.118,
}


@pytest.fixture(scope="module")
def held_out():
    by = hybrid_calibration.families()
    return by, hybrid_calibration.loo(by)


@pytest.mark.parametrize("family,kind", sorted(GATES))
def test_held_out_error_per_block_family(held_out, family, kind):
    _by, held = held_out
    errs = [(s, e) for s, e in held[family] if s.kind == kind]
    sm = hybrid_calibration.summary(errs)
    assert sm["devices"] >= 4
    assert sm["median"] <= GATES[(family, kind)] * 1.15 + 0.01


@pytest.mark.parametrize("family", ["gated delta net", "Mamba-2"])
def test_the_scan_row_lowers_the_held_out_prefill_error(held_out, family):
    by, held = held_out
    with_row = hybrid_calibration.summary([(s, e) for s, e in held[family] if s.kind == "prefill"])
    without = hybrid_calibration.summary(
        hybrid_calibration.errors(
            [s for s in by[family] if s.kind == "prefill"], {(b, "prefill"): 0.0 for b in measured.BACKENDS}
        )
    )
    assert with_row["median"] < without["median"]
    assert abs(with_row["bias"]) < abs(without["bias"])


def test_a_short_convolution_is_recurrent_state_but_no_scan():
    # ggml's ssm_conv is a 3-tap dot product per token and channel with no carried state: CUDA/HIP split a long
    # micro-batch into 32-token chunks across thread blocks, Vulkan runs one invocation per token and channel. A
    # short-conv block keeps a decode state (rec_blocks) but adds no sequential prefill steps; a delta-net does.
    lfm2 = pm.MODELS["lfm2.5-2.6b"]
    n_conv = sum(type(x.mixer).__name__ == "ShortConv" for x in lfm2.blocks)
    w = pm._prefill_work(_on_gpu(lfm2), 0, 512)["gpu"]
    assert (w.rec_blocks, w.rec_steps) == (n_conv, 0.0) and n_conv == 22
    q = pm._prefill_work(_on_gpu(_qwen35_08b()), 0, 512)["gpu"]
    assert q.rec_steps == 18 * 512


def test_lfm2_12b_published_files_differ_by_our_tensor_bytes():
    # LiquidAI/LFM2-1.2B-GGUF's Q4_K_M and Q4_0 are 730,893,248 and 695,749,568 bytes (exact sizes in a public
    # GitHub model list, code index file id 71187888670): one header, so the files differ by their tensors alone,
    # and our rules (no imatrix) give that difference to the byte; llama-bench prints 694.76 MiB for the Q4_K_M's
    # tensors, which also needs the short convolutions in F32 (F16 would be 0.12 MiB less)
    m, _ = hybrid_calibration.model_for("lfm2", "1.17")
    assert hybrid_calibration.family(m) == "short conv"
    ours = {q: sum(r["bytes"] for r in ggml.quantize_plan(m, q, imatrix=False)) for q in ("Q4_K_M", "Q4_0")}
    assert 730_893_248 - ours["Q4_K_M"] == 695_749_568 - ours["Q4_0"]
    assert round(ours["Q4_K_M"] / 2**20, 2) == 694.76
