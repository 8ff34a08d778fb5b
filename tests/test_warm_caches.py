"""The caches that make a first visit of a model in the calculator cheaper, and the idle warm-up that fills them:
each returns what the computation without it returns, and each stays bounded."""

from __future__ import annotations

from dataclasses import replace

import pytest

import perf_model as pm
from enginelab import blocks, ggml, scenario
from enginelab.figures import calculator
from perf_model import models, placement, sizes, work

# dense, MoE (a shared expert), MXFP4 experts (gpt-oss), sliding window, hybrid recurrent, MLA, MTP block
MODELS = ["llama-3.1-70b", "qwen3-30b-a3b", "gpt-oss-20b", "gemma-3-27b", "qwen3-next-80b-a3b", "deepseek-v2-lite",
          "glm-4.5-air"]  # fmt: skip


@pytest.mark.parametrize("key", MODELS)
def test_tensors_classed_once_per_name_are_the_tensors_classed_one_by_one(key):
    bm = pm.MODELS[key].block_model
    mxfp4 = {il for il, b in enumerate(bm.blocks) if isinstance(b.ffn, blocks.MoEFFN) and b.ffn.mxfp4}
    want = []
    for name, ne in blocks.tensors(bm):
        t = models._tensor_of(name, ne)
        if t.layer in mxfp4 and t.cls.endswith("_exps"):
            t = ggml.Tensor(t.name, t.ne, t.cls, t.layer, "MXFP4")
        want.append(t)
    models._CLASS_CACHE.clear()
    assert models._block_tensors_of(bm) == want  # from an empty cache
    assert models._block_tensors_of(bm) == want  # and from a filled one


# and per-layer embeddings with cache-sharing blocks (Gemma 4 E4B), a Mixtral (8 experts), a hybrid with short convs
ALL_KINDS = MODELS + ["gemma-4-e4b", "mixtral-8x7b", "lfm2.5-2.6b", "nemotron-3-nano-30b-a3b"]


@pytest.mark.parametrize("key", ALL_KINDS)
def test_the_inventory_listed_by_name_is_the_inventory_sorted_as_llama_quantize_walks_it(key):
    m = pm.MODELS[key]
    in_blocks = models._block_tensors_of(m.block_model)
    by_name = models._block_tensors_of(m.block_model, by_name=True)
    assert by_name == sorted(in_blocks, key=ggml.weight_order)
    assert m.tensors() == by_name
    assert len({t.name for t in by_name}) == len(by_name)


def test_a_tensor_made_fast_is_the_tensor_made_by_its_class():
    args = ("blk.3.ffn_down_exps.weight", (768, 2048, 128), "ffn_down_exps", 3, "MXFP4")
    fast, slow = ggml.make_tensor(*args), ggml.Tensor(*args)
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert (fast.name, fast.ne, fast.cls, fast.layer, fast.src_type) == args
    assert ggml.make_tensor(*args[:4]) == ggml.Tensor(*args[:4])  # the same default source type
    with pytest.raises(AttributeError):  # still frozen
        fast.layer = 4


def _plan_one_by_one(model, quant, imatrix):
    """ggml._plan as it was before the rules were decided once per key: every tensor through _tensor_type."""
    loaded = model.tensors()
    extra = model.file_only_tensors()
    tensors = sorted(loaded + extra, key=ggml.weight_order) if extra else loaded
    tied = not any(t.cls == "output" for t in tensors)
    counters = {"i_attention_wv": 0, "i_ffn_down": 0, "i_ffn_gate": 0, "i_ffn_up": 0,
                "n_attention_wv": sum(1 for t in tensors if t.cls in ggml._ATTN_V),
                "n_ffn_down": max([model.num_hidden_layers] + [t.layer + 1 for t in extra])}  # fmt: skip
    pure = quant in ggml._PURE
    default = ggml._PURE[quant] if pure else ggml._FTYPE_DEFAULT[quant]
    rows = []
    for t in tensors:
        if not ggml._allows_quantization(t):
            typ = t.src_type
        elif t.src_type == "MXFP4" and not pure:
            typ = "MXFP4"
        elif default in ("F16", "BF16", "F32"):
            typ = default
        elif pure:
            typ = ggml._fallback(t, default)
        else:
            typ = ggml._fallback(t, ggml._tensor_type(model, t, quant, default, counters, tied, imatrix))
        rows.append(ggml._row(t, typ))
    names = {t.name for t in extra}
    return [r for r in rows if r["name"] not in names], [r for r in rows if r["name"] in names]


@pytest.mark.parametrize("key", ALL_KINDS)
def test_a_plan_deciding_each_rule_once_per_key_is_the_plan_tensor_by_tensor(key):
    m = pm.MODELS[key]
    for quant in ggml.ALL_QUANTS:
        for imatrix in (False, True):
            assert ggml._plan(m, quant, imatrix) == _plan_one_by_one(m, quant, imatrix), (quant, imatrix)


@pytest.mark.parametrize("key", ALL_KINDS)
def test_a_plan_from_the_block_templates_is_the_plan_of_the_tensors(key, monkeypatch):
    m = pm.MODELS[key]
    head, layers = m._tensor_templates()
    named = [(n, ne, c, s) for n, ne, c, s in head]
    named += [(f"blk.{il}.{rest}", ne, c, s) for il, tpl in layers for rest, ne, c, s in tpl]
    assert named == [(t.name, t.ne, t.cls, t.src_type) for t in m.tensors()]  # the same tensors, in order
    from_templates = {q: ggml._plan(m, q, False) for q in ggml.ALL_QUANTS}
    monkeypatch.setattr(models.Model, "_tensor_templates", lambda self: None)  # _plan's way through the Tensors
    for q, plan in from_templates.items():
        assert plan == ggml._plan(m, q, False), q


def test_a_plan_of_a_model_no_catalog_model_is_shaped_like():
    # Llama 3.1 8B with 37 blocks (no threshold n/16, n/8, 7n/8 falls evenly) and every third block's FFN a MoE
    # of 8 experts (Mixtral's n_expert == 8 rules, dense and expert FFNs in one plan); the shared-expert models
    # above have two ffn_down tensors per block, so their counter runs at twice the block number
    base = pm.MODELS["llama-3.1-8b"]
    m = replace(base, num_hidden_layers=37, num_local_experts=8, num_experts_per_tok=2, interleave_moe_layer_step=3)
    for quant in ("Q4_K_M", "Q3_K_M", "IQ3_XS", "IQ2_XS", "Q5_K_M", "IQ3_M", "Q2_K_MIX"):
        assert ggml._plan(m, quant, False) == _plan_one_by_one(m, quant, False), quant


def test_the_layer_buckets_stay_bounded(monkeypatch):
    monkeypatch.setattr(ggml, "_BUCKETS_MAX", 16)
    ggml._BUCKETS.clear()
    for key in MODELS:
        ggml._plan(pm.MODELS[key], "Q4_K_M", False)
        assert len(ggml._BUCKETS) <= 16
    ggml._BUCKETS.clear()


def test_the_class_cache_stays_bounded(monkeypatch):
    monkeypatch.setattr(models, "_CLASS_CACHE_MAX", 8)
    models._CLASS_CACHE.clear()
    for key in MODELS:
        models._block_tensors_of(pm.MODELS[key].block_model)
        assert len(models._CLASS_CACHE) <= 8
    models._CLASS_CACHE.clear()


def _blocks_static_one_by_one(p, n, with_head):
    """_blocks_static as it was before its per-block terms were cached: the plan's tables read block by block."""
    m = p.model
    dense, experts, _other = sizes._layer_bytes(m, p.quant)
    blocks_, head, row_blocks, head_rows = work._layer_plan(m, p.quant)
    touched, routed = work._moe_fraction(m, n)
    acc = {
        s: {"w": 0.0, "f": 0.0, "layers": 0, "types": {}, "x": 0.0, "xf": 0.0, "mx": 0, "rows": {}, "et": {}}
        for s in ("gpu", "cpu")
    }
    for il in range(m.n_layers):
        dev = p.layer_device[il]
        a, ae = acc[dev], acc["cpu" if il < p.n_cpu_moe else dev]
        a["w"] += dense[il]
        ae["w"] += experts[il] * touched
        if experts[il]:
            ae["x"] += touched * m.n_expert
            ae["mx"] += 1
        a["layers"] += 1
        for typ, (dn, en) in blocks_[il].items():
            a["f"] += 2.0 * dn * n
            ae["f"] += 2.0 * en * routed * n
            ae["xf"] += 2.0 * en * routed * n
            a["types"][typ] = a["types"].get(typ, 0.0) + dn
            ae["types"][typ] = ae["types"].get(typ, 0.0) + en * touched
            if en:
                ae["et"][typ] = ae["et"].get(typ, 0.0) + en * touched
        for typ, (dr, er) in row_blocks[il].items():
            a["rows"][typ] = a["rows"].get(typ, 0.0) + dr
            ae["rows"][typ] = ae["rows"].get(typ, 0.0) + er * touched
    hd = "gpu" if p.output_on_gpu else "cpu"
    if with_head:
        acc[hd]["w"] += work._head_bytes(p)
        for typ, k in head.items():
            acc[hd]["f"] += 2.0 * k * n
            acc[hd]["types"][typ] = acc[hd]["types"].get(typ, 0.0) + k
        for typ, r in head_rows.items():
            acc[hd]["rows"][typ] = acc[hd]["rows"].get(typ, 0.0) + r
    return (
        {
            s: (a["w"], a["f"], a["layers"], tuple(sorted(a["types"].items())), a["x"], a["xf"], a["mx"],
                tuple(sorted((t, r) for t, r in a["rows"].items() if r > 0)), tuple(sorted(a["et"].items())))
            for s, a in acc.items()
        },
        hd,
    )  # fmt: skip


@pytest.mark.parametrize("key", MODELS)
def test_a_pass_read_from_cached_block_terms_is_the_same_as_read_from_the_tables(key):
    m = pm.MODELS[key]
    for machine, ngl, n_cpu_moe in (("rtx4090", None, 0), ("rtx3060", 10, 0), ("rtx3060", None, 4)):
        p = pm.place(m, machine, "Q4_K_M", n_ctx=8192, n_gpu_layers=ngl, n_cpu_moe=n_cpu_moe if m.is_moe else 0)
        for n in (1, 97, 512):
            for with_head in (True, False):
                work._STATIC_CACHE.clear()
                assert work._blocks_static(p, n, with_head) == _blocks_static_one_by_one(p, n, with_head)


def test_the_block_terms_cache_stays_bounded(monkeypatch):
    monkeypatch.setattr(work, "WORK_CACHE_MAX", 3)
    work._LAYER_TERMS_CACHE.clear()
    for key in MODELS:
        work._layer_terms(pm.MODELS[key], "Q4_K_M")
        assert len(work._LAYER_TERMS_CACHE) <= 3
    work._LAYER_TERMS_CACHE.clear()


def _forget(m):
    """Drop every cached table, plan and summary of model m."""
    for cache in (ggml._PLAN_CACHE, ggml._SUMMARY_CACHE, sizes._LAYER_CACHE, sizes._MATRIX_CACHE,
                  work._WORK_CACHE, work._LAYER_TERMS_CACHE):  # fmt: skip
        for k in [k for k in cache if k[0] is m]:
            del cache[k]


def test_warm_steps_fill_what_a_first_build_of_the_pair_reads(monkeypatch):
    state = calculator.default_state().replace(model="gemma-3-12b", quant="Q5_K_S")
    m = pm.MODELS["gemma-3-12b"]
    _forget(m)
    steps = list(scenario.warm_steps([state]))
    assert len(steps) == 5  # one (model, quant) pair: five walks
    for step in steps:
        step()
    assert (m, "Q5_K_S") in work._LAYER_TERMS_CACHE
    assert any(k[0] is m and k[1] == "Q5_K_S" for k in ggml._SUMMARY_CACHE)  # the plan's summary, not its rows
    assert not ggml.has_plan(m, "Q5_K_S")

    def no_plan(*a):
        raise AssertionError("a warmed pair computed llama-quantize's plan again")

    monkeypatch.setattr(ggml, "_plan", no_plan)
    monkeypatch.setattr(sizes, "_layer_bytes_uncached", no_plan)
    n_terms = len(work._LAYER_TERMS_CACHE)
    fresh = scenario._build(state)  # (not the memoised build: its own placement and timing)
    assert fresh.placement is not None and fresh.decode is not None
    assert len(work._LAYER_TERMS_CACHE) == n_terms  # nothing of the pair's was missing


def test_the_calculator_warms_what_is_one_step_away_then_every_other_model_nearest_first():
    state = calculator.default_state()
    models_ = [v for v, _ in calculator.SPEC.by_key["model"].options_for(state.as_dict())]
    quants = [v for v, _ in calculator.SPEC.by_key["quant"].options_for(state.as_dict())]
    i, j = models_.index(state.model), quants.index(state.quant)
    seen, later = [], []
    real, real_later = scenario.warm_steps, scenario.warm_later_steps

    def spy(states):
        seen.extend((s.model, s.quant) for s in states)
        return real(states)

    def spy_later(states):
        later.extend((s.model, s.quant) for s in states)
        return real_later(states)

    scenario.warm_steps, scenario.warm_later_steps = spy, spy_later
    try:
        steps = list(calculator.warm_steps(state))
    finally:
        scenario.warm_steps, scenario.warm_later_steps = real, real_later
    want = [(models_[i - 1], state.quant), (models_[i + 1], state.quant)]
    want += [(state.model, quants[j - 1]), (state.model, quants[j + 1])]
    assert seen == want
    # every other model of the select once, at the state's quantization, the nearest first
    others = [v for k, v in enumerate(models_) if abs(k - i) > 1]
    assert sorted(later) == sorted((v, state.quant) for v in others)
    distance = [abs(models_.index(v) - i) for v, _q in later]
    assert distance == sorted(distance)
    catalog = sum(1 for v, _q in later if v in pm.MODELS)
    assert len(steps) == 5 * len(want) + 5 * catalog  # bounded: five steps per pair


def test_a_later_model_warmed_keeps_its_tables_not_its_plan(monkeypatch):
    state = calculator.default_state().replace(model="gemma-3-12b", quant="Q5_K_S")
    m = pm.MODELS["gemma-3-12b"]
    _forget(m)
    rows = ggml._plan_cache_rows
    for step in scenario.warm_later_steps([state]):
        step()
    assert not ggml.has_plan(m, "Q5_K_S") and ggml._plan_cache_rows == rows  # its rows dropped again
    assert (m, "Q5_K_S") in work._LAYER_TERMS_CACHE and (m, "Q5_K_S") in sizes._LAYER_CACHE

    def no_plan(*a):
        raise AssertionError("a warmed model computed llama-quantize's plan again")

    monkeypatch.setattr(ggml, "_plan", no_plan)
    fresh = scenario._build(state)  # (not the memoised build: its own placement and timing)
    assert fresh.placement is not None and fresh.decode is not None


def test_a_plan_cached_before_the_warm_up_stays():
    m = pm.MODELS["gemma-3-4b"]
    ggml.quantize_plan(m, "Q6_K")
    for step in work.warm_tables_steps(m, "Q6_K"):
        step()
    assert ggml.has_plan(m, "Q6_K")
    ggml.forget_plan(m, "Q6_K")
    assert not ggml.has_plan(m, "Q6_K")
    ggml.forget_plan(m, "Q6_K")  # nothing to forget: no error


@pytest.mark.parametrize("key", ["llama-3.1-70b", "qwen3-30b-a3b", "gpt-oss-20b", "gemma-3-27b", "qwen2.5-0.5b"])
def test_fit_totals_from_running_sums_are_each_accounts_total(key):
    m = pm.MODELS[key]
    for machine in ("rtx3060", "rtx4090", "m4pro"):
        mc = pm.MACHINES[machine]
        for n_cpu_moe in (0, 5) if m.is_moe else (0,):
            for kv, n_ctx in (("f16", 4096), ("q8_0", 32768)):
                tables = placement._byte_tables(m, "Q4_K_M", n_ctx, kv, 1, 512, False)
                prof = placement.PROFILE_OBJECTS["measured"]
                rule = placement._ModuleRule(m, mc, prof, tables, n_ctx, 512, pm.FIT_TARGET_MIB)
                fast = rule.gpu_totals(tables, n_cpu_moe)
                for ngl in range(m.n_layers + 2):  # every -ngl --fit may try, as place()'s own gpu_total sums it
                    ngl_, lg, og = rule.layers(ngl, None)
                    acc = placement._device_bytes(mc, tables, lg, og, n_cpu_moe, rule.row_fr)
                    f = rule.fields(ngl_, lg, og, acc, (), False)
                    assert fast(ngl) == f["gpu_weights"] + f["gpu_kv"] + f["gpu_compute"], (machine, n_cpu_moe, ngl)


def _prefill_work_block_by_block(p, start, u):
    """work._prefill_work as it was before its per-block terms were kept per placement."""
    m = p.model
    static, _hd = work._blocks_static(p, u, False)
    plan = pm._kv_plan(m, p.kv_type, p.swa_full)
    af, nrec, nscan, pairs = {"gpu": 0.0, "cpu": 0.0}, {"gpu": 0, "cpu": 0}, {"gpu": 0, "cpu": 0}, {}
    for il in range(m.n_layers):
        dev = p.layer_device[il]
        _pt, attn_per, win, _rb, rec_per, kind = plan[il]
        if kind == 2:
            af[dev] += rec_per * u
            nrec[dev] += 1
            if not isinstance(m.blocks[il].mixer, blocks.ShortConv):
                nscan[dev] += 1
        elif kind < 2:
            if win not in pairs:
                pairs[win] = work._causal_pairs_window(win, start, start + u)
            af[dev] += attn_per * pairs[win]
    out = {}
    for s in ("gpu", "cpu"):
        w, f, layers, types, x, xf, mx, rows, et = static[s]
        out[s] = work.Work(w, 0.0, f + af[s], af[s], layers, types, False, x, xf, mx, rows, et, nrec[s],
                           float(nscan[s] * u))  # fmt: skip
    return out


@pytest.mark.parametrize("key", MODELS + ["lfm2.5-2.6b", "nemotron-3-nano-30b-a3b"])
def test_a_prefill_micro_batch_from_kept_block_terms_is_the_same_as_block_by_block(key):
    m = pm.MODELS[key]
    for machine, ngl in (("rtx4090", None), ("rtx3060", 10), ("cpu-ddr5", None)):
        p = pm.place(m, machine, "Q4_K_M", n_ctx=8192, n_gpu_layers=ngl)
        for start, u in ((0, 512), (3584, 512), (8000, 97), (0, 1)):
            assert work._prefill_work(p, start, u) == _prefill_work_block_by_block(p, start, u)


def test_the_prefill_terms_cache_stays_bounded(monkeypatch):
    monkeypatch.setattr(work, "_PREFILL_TERMS_MAX", 3)
    work._PREFILL_TERMS_CACHE.clear()
    for key in MODELS:
        work._prefill_work(pm.place(pm.MODELS[key], "rtx4090", "Q4_K_M", n_ctx=4096), 0, 512)
        assert len(work._PREFILL_TERMS_CACHE) <= 3
    work._PREFILL_TERMS_CACHE.clear()


def _layer_plan_row_by_row(m, quant):
    """work._layer_plan's tables as one plain walk of the plan builds them."""
    blocks_, rows = [dict() for _ in range(m.n_layers)], [dict() for _ in range(m.n_layers)]
    head, head_rows = {}, {}
    plan = pm.quantize_plan(m, quant)
    tied = not any(r["cls"] == "output" for r in plan)
    for r in plan:
        if r["name"] in m.unread_tensors():
            continue
        il, typ, n, ne = r["layer"], r["type"], r["n_elements"], r["ne"]
        nr = n / max(1, ne[0]) if len(ne) >= 2 else 0
        if il >= 0:
            expert = r["cls"].endswith("_exps")
            d, e = blocks_[il].get(typ, (0, 0))
            blocks_[il][typ] = (d, e + n) if expert else (d + n, e)
            if nr:
                d, e = rows[il].get(typ, (0, 0))
                rows[il][typ] = (d, e + nr) if expert else (d + nr, e)
        elif r["cls"] == "output" or (tied and r["cls"] == "token_embd"):
            head[typ] = head.get(typ, 0) + n
            if nr:
                head_rows[typ] = head_rows.get(typ, 0) + nr
        elif r["cls"] != "token_embd":
            head[typ] = head.get(typ, 0) + n
    return blocks_, head, rows, head_rows


@pytest.mark.parametrize("key", ALL_KINDS)
def test_the_work_tables_are_one_plain_walk_of_the_plan(key):
    m = pm.MODELS[key]
    work._WORK_CACHE.clear()
    got = work._layer_plan(m, "Q4_K_M")
    want = _layer_plan_row_by_row(m, "Q4_K_M")
    assert got == want
    assert [list(b) for b in got[0]] == [list(b) for b in want[0]]  # the types in the same order too


@pytest.mark.parametrize("key", ALL_KINDS)
def test_blocks_of_one_kind_have_the_same_rows_and_the_byte_tables_are_plain_walks(key):
    m = pm.MODELS[key]
    for quant in ("Q4_K_M", "IQ2_XS", "Q3_K_M"):
        plan = pm.quantize_plan(m, quant)
        spans = ggml.plan_blocks(m, quant)
        # (GLM-4.5's MTP block, which the file holds and llama.cpp does not load, is none of the blocks here)
        assert [il for il, *_ in spans] == list(range(m.n_layers))
        assert [r["layer"] for r in plan[spans[0][1] :]] == sorted(r["layer"] for r in plan if r["layer"] >= 0)
        first = {}
        for il, a, b, kind in spans:
            assert {r["layer"] for r in plan[a:b]} == {il}
            rows = [{k: v for k, v in r.items() if k not in ("name", "layer")} for r in plan[a:b]]
            assert first.setdefault(kind, rows) == rows
        want_plan = _layer_plan_row_by_row(m, quant)
        ggml.forget_plan(m, quant)  # the tables from the plan's summary alone, where there is one
        ggml._SUMMARY_CACHE.clear()
        sizes._LAYER_CACHE.clear()
        sizes._MATRIX_CACHE.clear()
        dense, experts, matrix = [0] * m.n_layers, [0] * m.n_layers, [0] * m.n_layers
        other = {}
        for r in plan:
            if r["layer"] < 0:
                other[r["cls"]] = other.get(r["cls"], 0) + r["bytes"]
            elif r["cls"].endswith("_exps"):
                experts[r["layer"]] += r["bytes"]
            else:
                dense[r["layer"]] += r["bytes"]
                if r["cls"] not in ("norm", "bias"):
                    matrix[r["layer"]] += r["bytes"]
        assert sizes._layer_bytes(m, quant) == (dense, experts, other)
        assert sizes._layer_matrix_bytes(m, quant) == matrix
        work._WORK_CACHE.clear()
        assert work._layer_plan(m, quant) == want_plan
        assert not ggml.has_plan(m, quant) or spans is None or m.unread_tensors()  # (else the plan itself)


@pytest.mark.parametrize("key", ALL_KINDS)
def test_a_plan_summary_made_without_the_rows_is_the_one_read_from_the_plan(key):
    m = pm.MODELS[key]
    for quant in ("Q4_K_M", "IQ2_XS", "Q3_K_M", "MXFP4_MOE", "F16"):
        ggml.forget_plan(m, quant)
        ggml._SUMMARY_CACHE.clear()
        made = ggml.plan_summary(m, quant)  # from the templates, no plan
        assert not ggml.has_plan(m, quant)
        ggml.quantize_plan(m, quant)
        ggml._SUMMARY_CACHE.clear()
        read = ggml.plan_summary(m, quant)  # from the plan's rows
        assert made == read
        if read is not None:
            plan, spans = ggml.quantize_plan(m, quant), ggml.plan_blocks(m, quant)
            assert [(il, kind) for il, _a, _b, kind in spans] == list(read[1])
            assert read[0] == plan[: spans[0][1]]


def test_the_plan_summaries_stay_bounded(monkeypatch):
    monkeypatch.setattr(ggml, "_SUMMARY_CACHE_MAX", 3)
    ggml._SUMMARY_CACHE.clear()
    for key in MODELS:
        ggml.plan_summary(pm.MODELS[key], "Q5_K_M")
        assert len(ggml._SUMMARY_CACHE) <= 3
    ggml._SUMMARY_CACHE.clear()


@pytest.mark.parametrize("key", ALL_KINDS)
def test_weight_bytes_from_the_plan_summary_are_a_walk_of_the_plan(key):
    m = pm.MODELS[key]
    for quant in ("Q4_K_M", "Q2_K_MIX", "IQ3_XXS"):
        want: dict = {}
        for r in pm.quantize_plan(m, quant):
            want[r["cls"]] = want.get(r["cls"], 0) + r["bytes"]
        want["total"] = sum(want.values())
        ggml.forget_plan(m, quant)
        ggml._SUMMARY_CACHE.clear()
        got = pm.weight_bytes(m, quant)
        assert got == want and list(got) == list(want)  # the classes in the same order too


def test_weight_bytes_are_kept_per_model_and_quant_and_stay_bounded(monkeypatch):
    m = pm.MODELS["qwen3-30b-a3b"]
    first = pm.weight_bytes(m, "Q4_K_M")
    first["total"] = -1  # a caller's copy: the kept table is not changed
    assert pm.weight_bytes("qwen3-30b-a3b", "Q4_K_M")["total"] == sizes._weight_bytes(m, "Q4_K_M")["total"] > 0
    monkeypatch.setattr(sizes, "_WEIGHT_CACHE_MAX", 2)
    sizes._WEIGHT_CACHE.clear()
    for quant in ("Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0"):
        assert pm.weight_bytes(m, quant) == sizes._weight_bytes(m, quant)
        assert len(sizes._WEIGHT_CACHE) <= 2
    sizes._WEIGHT_CACHE.clear()


def test_matmul_factors_kept_per_weights_and_device_give_the_seconds_computed_afresh(monkeypatch):
    from enginelab.measured import physics

    cases = []
    for machine, model in (("rtx4090", "qwen3-30b-a3b"), ("m4pro", "llama-3.1-8b"), ("cpu-ddr5", "qwen2.5-7b")):
        p = pm.place(model, machine, "Q4_K_M", n_ctx=4096, n_gpu_layers=10, profile="measured")
        for side, w in work._prefill_work(p, 0, 512).items():
            if w.flops:
                dev = pm.side_device(p.machine, side)
                backend = pm.device_backend(p.machine, side)
                cases.append((w, dev, backend, physics.params_for(backend)))
    cases.append((work.Work(flops=1e9), *cases[-1][1:]))  # no weights: the CPU divides by its F16 rate
    for build in (None, "b4000"):
        afresh = []
        for w, dev, backend, prm in cases:
            physics._PER_FLOP.clear()
            afresh.append(physics._matmul_seconds(w.flops * 3, w, dev, backend, prm, None, build))
        kept = [physics._matmul_seconds(w.flops * 3, w, d, b, prm, None, build) for w, d, b, prm in cases * 2]
        assert kept == afresh * 2
    monkeypatch.setattr(physics, "_PER_FLOP_MAX", 2)
    physics._PER_FLOP.clear()
    for w, dev, backend, prm in cases:
        physics._matmul_seconds(w.flops, w, dev, backend, prm, None)
        assert len(physics._PER_FLOP) <= 2
