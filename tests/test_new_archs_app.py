"""The app's faces with each 2025-2026 catalog architecture (issue 31, "What it must show"): the calculator, the
advisor's diagnosis, the vLLM and SGLang serving plans, and a remote read of a hybrid and a Gemma-4-like GGUF
served by the fake Hub (tests/remote_fixtures.py). Each face is checked against perf_model or the blocks, by hand
where the relation is simple (the KV bytes per token, the recurrent state)."""

from __future__ import annotations

import asyncio
import functools
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz_pipeline as fz  # noqa: E402
import remote_fixtures as rf  # noqa: E402
from test_advisor import BASE as ADVISOR_BASE  # noqa: E402  (the advisor tests' state)

import perf_model as pm  # noqa: E402
from enginelab import advisor as A  # noqa: E402
from enginelab import blocks as eb  # noqa: E402
from enginelab import remote, scenario  # noqa: E402
from enginelab import serving_plan as sp  # noqa: E402
from enginelab.figures import calculator as calc  # noqa: E402

NEW_ARCHS = [  # the catalog's 2025-2026 entries (pylib/perf_model/catalog.json)
    "qwen3.6-35b-a3b",  # gated delta net + MoE
    "qwen3.5-27b",  # gated delta net, dense
    "glm-4.7-flash",  # MLA + MoE
    "nemotron-3-nano-30b-a3b",  # Mamba-2 + MoE + attention
    "gemma-4-31b",  # sliding + global with their own KV heads and width
    "gemma-4-26b-a4b",  # the same with MoE
    "gemma-4-e4b",  # per-layer embeddings, shared KV
    "lfm2.5-2.6b",  # short convolution + attention
    "deepseek-v3.2",  # MLA with the DSA indexer
    "kimi-k2.5",  # MLA, 384 experts
    "llama-4-maverick",  # chunked attention, MoE every other block
]
MACHINE = "rtx4090"


def _recurrent(m) -> bool:
    return any(eb.state_elements(b) != (0, 0) for b in m.blocks)


def test_the_list_is_the_catalogs_new_architectures():
    assert set(NEW_ARCHS) <= set(pm.MODELS)
    kinds = {type(b.mixer).__name__ for k in NEW_ARCHS for b in pm.MODELS[k].blocks}
    assert {"Attention", "Recurrent", "ShortConv"} <= kinds


# ---------------------------------------------------------------------------------------------------------------
# The calculator: its readouts are perf_model's numbers for the state
# ---------------------------------------------------------------------------------------------------------------
def _calc(key: str):
    s, msgs = calc.SPEC.from_query(f"?model={key}&machine={MACHINE}&profile=course")
    assert msgs == []
    return s, calc.compute(s)


@pytest.mark.parametrize("key", NEW_ARCHS)
def test_calculator(key):
    s, d = _calc(key)
    mc = pm.MACHINES[MACHINE]
    p = pm.place(pm.MODELS[key], mc, s.quant, n_ctx=s.ctx, kv_type=s.kv, n_cpu_moe=s.n_cpu_moe, profile=s.profile)
    r = d.readouts
    assert r.fits == p.fits and r.verdict == scenario.verdict(p)
    assert r.vram_gb == pytest.approx(p.gpu_total / pm.GB) and r.ram_gb == pytest.approx(p.cpu_total / pm.GB)
    # the cache the placement holds is the blocks' own: only attention blocks grow with the context
    alloc = pm.kv_allocation(pm.MODELS[key], n_ctx=s.ctx, kv_type=s.kv)
    assert p.gpu_kv + p.cpu_kv == pytest.approx(sum(a["bytes"] for a in alloc))
    assert any(a["kind"] == "recurrent" for a in alloc) == _recurrent(pm.MODELS[key])
    if p.fits:
        dec = pm.decode_step_time(p, mc, context=s.tokens)
        assert r.n_gpu_layers == p.n_gpu_layers and r.decode_tok_s == pytest.approx(dec["tok_per_s"])
        assert r.decode_tok_s > 0 and r.prefill_tok_s > 0
    html = calc.render(d)
    assert 'data-readout="fits"' in html and pm.MODELS[key].name in html


# ---------------------------------------------------------------------------------------------------------------
# The advisor: its diagnosis of the calculator's state; every change it proposes checked against perf_model
# ---------------------------------------------------------------------------------------------------------------
def _state(key: str, **kw) -> dict:
    return {**ADVISOR_BASE, "model": key, "machine": MACHINE, "ctx": 32768, **kw}


@pytest.mark.parametrize("key", NEW_ARCHS)
def test_advisor(key):
    st = _state(key)
    fs = A.advise_state(st)
    causes = [f.cause for f in fs]
    assert len(causes) == len(set(causes)), causes
    p = pm.place(pm.MODELS[key], pm.MACHINES[MACHINE], "Q4_K_M", n_ctx=32768, kv_type="f16")
    for f in fs:
        for c in f.changes:
            # the state the change leads to is a valid calculator state, and perf_model agrees with its numbers
            after = A.apply_change(st, c)
            q = pm.place(
                pm.MODELS[after["model"]],
                pm.MACHINES[after["machine"]],
                after["quant"],
                n_ctx=after["ctx"],
                kv_type=after["kv"],
                n_gpu_layers=None if after["ngl"] == "auto" else after["ngl"],
                n_cpu_moe=after["n_cpu_moe"],
                n_ubatch=after["ub"],
            )
            assert c.after["n_gpu_layers"] == q.n_gpu_layers, (key, c.title)
            assert c.after["vram_gb"] == pytest.approx(q.gpu_total / pm.GB, rel=1e-9), (key, c.title)
            assert c.gain > 0, (key, c.title)
    if not p.fits:  # a model that cannot load is diagnosed, never passed over in silence
        assert fs, key


# ---------------------------------------------------------------------------------------------------------------
# The serving plans: vLLM pages the attention blocks' KV per token and keeps a state per request for the others
# ---------------------------------------------------------------------------------------------------------------
def _kv_bytes_per_token_bf16(m) -> int:
    k, v = eb.kv_elements_per_token_model(m.block_model)
    return 2 * (k + v)


@pytest.mark.parametrize("key", NEW_ARCHS)
def test_serving_plans(key):
    m = pm.MODELS[key]
    v = sp.vllm_plan(key, "rtx5090", max_model_len=4096)
    s = sp.sglang_plan(key, "rtx5090", context_length=4096)
    if v["fits"]:
        assert v["num_gpu_blocks"] >= 1 and v["max_concurrency"] >= 1.0
        assert v["kv_cache_bytes"] <= v["available_kv_bytes"]
    else:
        assert v["error"]
    if s["fits"]:
        assert 1 <= s["max_running_requests"] <= s["max_total_num_tokens"] // 2
    else:
        assert s["error"]
    assert (v["mamba_state_bytes"] > 0) == _recurrent(m) == (s["mamba_cache_per_req_bytes"] > 0)
    if not any(b.mixer.kv_lora_rank for b in m.blocks if isinstance(b.mixer, eb.Attention)):
        # plain attention: K and V of every cached block, bf16 (MLA's latent layout is the engines' own)
        assert v["kv_bytes_per_token"] == _kv_bytes_per_token_bf16(m), key
        assert s["cell_size_bytes"] == _kv_bytes_per_token_bf16(m), key


def test_hybrid_serving_state_by_hand():
    # Qwen3.6-35B-A3B: 10 attention blocks x 2 KV heads x 256 x (K + V) x 2 B = 20,480 B per token
    v = sp.vllm_plan("qwen3.6-35b-a3b", "rtx5090", max_model_len=4096)
    assert v["kv_bytes_per_token"] == 10 * 2 * 256 * 2 * 2 == 20480
    # each request's recurrent state in SGLang: 30 delta nets x (conv 3 x (4096 + 2 x 16 x 128) in bf16 + the
    # temporal state 32 heads x 128 x 128 in f32)
    s = sp.sglang_plan("qwen3.6-35b-a3b", "rtx5090", context_length=4096)
    assert s["mamba_cache_per_req_bytes"] == 30 * (2 * 3 * (4096 + 2 * 16 * 128) + 4 * 32 * 128 * 128) == 64389120
    assert v["mamba_state_bytes"] > 0


# ---------------------------------------------------------------------------------------------------------------
# Remote reads: a hybrid (qwen35moe: gated delta nets + MoE) and a Gemma-4-like GGUF (sliding and global widths,
# shared KV, per-layer embeddings) through the fake Hub's file host, by Range
# ---------------------------------------------------------------------------------------------------------------
SEEDS = {"hybrid.gguf": "b_qwen35moe", "gemma4.gguf": "b_gemma4"}


class _Net:
    def __init__(self, site):
        self.site = site
        self.requests = []

    async def fetch(self, url, start, end, limit):
        status, body, total = rf.serve(self.site.get(url, (404, b"Not Found", None)), start, end, limit)
        self.requests.append((url, start, end))
        return remote.Response(status, body, total)


@functools.lru_cache(maxsize=1)
def _remote_reads() -> dict:
    site, out = {}, {}
    for name, seed in SEEDS.items():
        data = fz.gguf_bytes(*fz.BLOCK_SEEDS[seed])
        site[f"{rf.HOST}/models/{name}"] = (200, data, 3_000_000_000)  # the header, then zeros up to 3 GB
    net = _Net(site)
    with ThreadPoolExecutor(1) as pool:
        for name in SEEDS:
            target = remote.Target(url=f"{rf.HOST}/models/{name}")
            out[name] = pool.submit(asyncio.run, remote.read(target, net.fetch)).result()
    return out, net.requests


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_remote_read(name):
    reads, requests = _remote_reads()
    rm = reads[name]
    _arch, bm, _keys = fz.BLOCK_MODELS[SEEDS[name]]
    assert rm.kind == "gguf"
    # the blocks read back exactly, and only the header was asked for (ranges, never the 3 GB)
    assert rm.model.blocks == bm.blocks and rm.model.block_model.globals == bm.globals
    asked = [(s, e) for u, s, e in requests if u.endswith(name)]
    assert asked and all(s is not None and e < 1 << 22 for s, e in asked)
    # the rest of the app takes the read model: its cache, by hand (n_ctx 4096, 2 sequences, n_ubatch 512), and
    # a placement
    alloc = {a["kind"]: a["bytes"] for a in pm.kv_allocation(rm.model, n_ctx=4096, kv_type="f16", n_seq=2)}
    assert alloc == HAND_CACHE[name]
    p = pm.place(rm.model, pm.MACHINES[MACHINE], None, n_ctx=4096, n_seq=2)
    assert p.fits and p.gpu_kv + p.cpu_kv == sum(alloc.values())


HAND_CACHE = {
    # 2 gated attention blocks x 2 KV heads x 16 x (K + V) x 2 B per cell; 2 streams of 2,048 cells. The 2 delta
    # nets keep per sequence, in F32, conv 3 x (64 + 2 x 2 x 16) and state 64 x 16
    "hybrid.gguf": {"full": 4096 * 2 * 2 * 16 * 2 * 2, "recurrent": 2 * 2 * (3 * (64 + 2 * 2 * 16) + 64 * 16) * 4},
    # the global block (1 KV head x 32) holds all 4,096 cells; the 2 sliding blocks (2 KV heads x 16, window 64)
    # hold per stream the window plus a ubatch, padded to 256 (768); blocks 3 and 4 read blocks 2's and 1's caches
    "gemma4.gguf": {"full": 4096 * 1 * 32 * 2 * 2, "swa": 2 * 768 * 2 * 2 * 16 * 2 * 2},
}
