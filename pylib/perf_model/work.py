"""The work of one forward pass: what each device reads and computes for a decode step or a prefill
micro-batch, per kind of block (Work). Both speed profiles time the same work."""

from __future__ import annotations

from dataclasses import dataclass, replace

from enginelab import ggml as _ggml
from enginelab.blocks import ShortConv
from enginelab.checks import check_int, is_int

from .catalog import get_model
from .kv import _kv_plan, _kv_type
from .models import MAX_CONTEXT, Model
from .multigpu import _gpu_side
from .placement import Placement
from .sizes import _layer_bytes, _layer_matrix_bytes, _layer_parts, _plan_summary, quantize_plan
from .units import WORK_CACHE_MAX


@dataclass(frozen=True)
class Work:
    """What one device does in one forward pass (decode step or prefill micro-batch)."""

    weight_bytes: float = 0.0  # weights streamed from its memory
    kv_bytes: float = 0.0  # K and V read (decode) from its memory
    flops: float = 0.0  # matmul FLOPs (2 per weight per token) plus attention
    attn_flops: float = 0.0  # the attention part of flops
    layers: int = 0  # blocks that run here (each costs the backend's per-layer graph overhead)
    weights_by_type: tuple = ()  # ((ggml type, weights streamed), ...): what dequantization works on
    head_on_this: bool = False  # the output head runs here
    expert_calls: float = 0.0  # MoE: routed experts multiplied (distinct experts touched, summed over blocks)
    expert_flops: float = 0.0  # MoE: the part of flops in routed experts' matmuls (the measured profile's MoE rate)
    moe_layers: int = 0  # MoE: blocks whose routed experts run here (each adds its router and gather kernels)
    rows_by_type: tuple = ()  # ((ggml type, matrix rows multiplied), ...): one dot product each per token
    expert_weights_by_type: tuple = ()  # MoE: the part of weights_by_type in routed experts (MUL_MAT_ID kernels)
    rec_blocks: int = 0  # blocks with a recurrent mixer (linear attention, SSM, short conv) that run here
    rec_steps: float = 0.0  # sequential token steps in this pass: scanning blocks (not short convolutions) x tokens
    # (decode: those blocks, one step each)

    @property
    def bytes(self) -> float:
        return self.weight_bytes + self.kv_bytes


_WORK_CACHE: dict = {}


def _add_block_row(blk: dict, blk_rows: dict, typ: str, n, nr, expert: bool) -> None:
    """A plan row's elements (and its nr matrix rows, if any) into its block's {type: (dense, expert)} tables."""
    d, e = blk.get(typ, (0, 0))
    blk[typ] = (d, e + n) if expert else (d + n, e)
    if nr:
        d, e = blk_rows.get(typ, (0, 0))
        blk_rows[typ] = (d, e + nr) if expert else (d + nr, e)


def _layer_plan(m: Model, quant) -> tuple:
    """(blocks, head, row_blocks, head_rows), from one walk of the quantize plan, cached per (model, quant):
    per block {type: (dense weights, expert weights)} and the head's {type: weights}; then the same in matrix
    rows (a tensor of ne = (n_per_row, ...) has n_elements / n_per_row rows, each one dot product per token)."""
    key = (m, quant)
    if key not in _WORK_CACHE:
        blocks = [dict() for _ in range(m.n_layers)]
        rows = [dict() for _ in range(m.n_layers)]
        head: dict = {}
        head_rows: dict = {}
        unread = m.unread_tensors()  # loaded, never read: memory only
        summary = _plan_summary(m, quant)
        if summary is not None:  # blocks of one kind (sizes._plan_summary) have the same rows but for their names
            # (and the same unread tensors: those of a block kind, Attention.unused_kv_proj, whatever its number)
            plan, layer_kinds, kind_rows = summary  # (plan: the rows before the blocks)
            tied = not any(r["cls"] == "output" for r in plan) and not any(
                r["cls"] == "output" for k in kind_rows.values() for r in k
            )
            done = {}
            for il, kind in layer_kinds:
                hit = done.get(kind)
                if hit is not None:
                    blocks[il], rows[il] = dict(hit[0]), dict(hit[1])
                    continue
                for r in kind_rows[kind]:  # as below
                    if unread and r["name"] in unread:
                        continue
                    typ, n, ne = r["type"], r["n_elements"], r["ne"]
                    nr = n / max(1, ne[0]) if len(ne) >= 2 else 0
                    _add_block_row(blocks[il], rows[il], typ, n, nr, r["cls"].endswith("_exps"))
                done[kind] = (dict(blocks[il]), dict(rows[il]))
        else:
            plan = quantize_plan(m, quant)
            tied = not any(r["cls"] == "output" for r in plan)
        for r in plan:
            if unread and r["name"] in unread:
                continue
            il, typ, n = r["layer"], r["type"], r["n_elements"]
            ne = r.get("ne") or (n,)
            nr = n / max(1, ne[0]) if len(ne) >= 2 else 0  # norms and biases: added, not multiplied
            if il >= 0:
                _add_block_row(blocks[il], rows[il], typ, n, nr, r["cls"].endswith("_exps"))
            elif r["cls"] == "output" or (tied and r["cls"] == "token_embd"):
                head[typ] = head.get(typ, 0) + n
                if nr:
                    head_rows[typ] = head_rows.get(typ, 0) + nr
            elif r["cls"] != "token_embd":
                head[typ] = head.get(typ, 0) + n  # output_norm: runs with the head
        if len(_WORK_CACHE) >= WORK_CACHE_MAX:  # bounded, like the layer-bytes cache: a long session stays flat
            _WORK_CACHE.clear()
        _WORK_CACHE[key] = (blocks, head, rows, head_rows)
    return _WORK_CACHE[key]


def _head_bytes(p: Placement) -> float:
    """Bytes of the output projection (and final norm): output.weight, or token_embd when tied."""
    _dense, _experts, other = _layer_bytes(p.model, p.quant)
    head = sum(v for k, v in other.items() if k != "token_embd")
    if "output" not in other:  # tied embeddings: the head is token_embd itself
        head += other.get("token_embd", 0)
    return head


def _moe_fraction(m: Model, tokens: int) -> tuple:
    """(share of expert weights touched by `tokens` tokens, share each token multiplies): k/E per token,
    and 1 - (1 - k/E)^tokens distinct experts over the batch."""
    if not m.is_moe:
        return 1.0, 1.0
    k, e = m.num_experts_per_tok, m.n_expert
    return 1.0 - (1.0 - k / e) ** tokens, k / e


# What each kind of block reads and computes per sequence in one decode step (Model.layer_kind):
#   full / swa  its cached tokens (all of them, or its window), K and V: 4 x n_head x head_dim FLOPs per
#               cached token (QK^T and AV, 2 each)
#   mla         the latent of every cached token; with the up-projections absorbed (llama.cpp's MLA path)
#               each head scores over kv_lora_rank + qk_rope_head_dim and sums over kv_lora_rank:
#               2 x n_head x (2 x kv_lora_rank + qk_rope_head_dim) FLOPs per cached token
#   recurrent   its state, read and written back once per token (2 x the state's bytes), whatever the
#               context; the delta rule touches each element of s a few times (decay, k^T S, the rank-1
#               update, q^T S: about 7 FLOPs each) and the convolution 2 x kernel x conv_dim
def decode_kv_read_bytes(model, il: int, context: int, kv_type: str = "f16") -> float:
    """Bytes block il reads from its cache (or moves of its recurrent state) per sequence in one decode step
    at `context` tokens (a block sharing an earlier block's cache reads that cache)."""
    model = _check_layer_context(model, il, context)
    _kv_type(kv_type)
    per_tok, _pp, w, rec_b, _rf, kind = _kv_plan(model, kv_type.lower())[il]
    if kind >= 2:
        return rec_b
    return per_tok * (min(context, w) if w else context)


def _check_layer_context(model, il, context) -> Model:
    if type(model) is not Model:
        model = get_model(model)
    if not (is_int(il) and 0 <= il < model.num_hidden_layers):
        check_int(il, "il", 0, model.num_hidden_layers - 1)
    if not (is_int(context) and 0 <= context <= MAX_CONTEXT):
        check_int(context, "context", 0, MAX_CONTEXT)
    return model


def decode_attention_flops(model, il: int, context: int) -> float:
    """Attention FLOPs of block il per sequence in one decode step at `context` tokens (the matmuls with
    weights are counted apart, from the tensors)."""
    model = _check_layer_context(model, il, context)
    _pt, per_pair, w, _rb, rec_f, kind = _kv_plan(model, "f16")[il]
    if kind >= 2:
        return rec_f
    return per_pair * (min(context, w) if w else context)


_STATIC_CACHE: dict = {}
_LAYER_TERMS_CACHE: dict = {}


def _layer_terms(m: Model, quant) -> list:
    """Per block, what _blocks_static adds for it whatever the pass: (dense bytes, expert bytes, ((type, dense
    weights, expert weights, 2 x dense weights, 2 x expert weights x the share each token multiplies), ...),
    ((type, dense rows, expert rows), ...)); cached per (model, quant)."""
    key = (m, quant)
    hit = _LAYER_TERMS_CACHE.get(key)
    if hit is not None:
        return hit
    dense, experts, _other = _layer_bytes(m, quant)
    blocks, _head, row_blocks, _head_rows = _layer_plan(m, quant)
    _touched, routed = _moe_fraction(m, 1)  # (k/E, the share each token multiplies, is the same for any batch)
    out = [
        (
            dense[il],
            experts[il],
            tuple((typ, dn, en, 2.0 * dn, 2.0 * en * routed) for typ, (dn, en) in blocks[il].items()),
            tuple((typ, dr, er) for typ, (dr, er) in row_blocks[il].items()),
        )
        for il in range(m.n_layers)
    ]
    if len(_LAYER_TERMS_CACHE) >= WORK_CACHE_MAX:
        _LAYER_TERMS_CACHE.clear()
    _LAYER_TERMS_CACHE[key] = out
    return out


def warm_steps(model, quant):
    """The per-(model, quant) caches a first placement and timing of the pair fills, as steps (functions of no
    argument) to run one at a time while the page is idle: the model's blocks and tensor templates, llama-quantize's
    plan (its summary, ggml.plan_summary, where the tables need no more), the per-block byte tables, the per-block
    work terms. Each step is one of the walks over the model's
    tensors (a few ms each in Pyodide); a step whose cache is filled returns at once. The caches are the ones
    a computation uses, each bounded (sizes, ggml, this module)."""
    m = get_model(model)
    yield lambda: m.block_model
    yield m._tensor_templates
    yield lambda: _plan_summary(m, quant) or quantize_plan(m, quant)  # (the plan's rows only where needed)
    yield lambda: (_layer_bytes(m, quant), _layer_matrix_bytes(m, quant))
    yield lambda: (_layer_plan(m, quant), _layer_terms(m, quant))


def warm_tables_steps(model, quant) -> list:
    """warm_steps for a model the reader may pick later rather than next: the same caches, and where these steps
    had to make the plan's rows (a model without a plan summary), the rows dropped again (ggml.forget_plan): a
    first placement and timing read only the per-block tables made from them, a small part of their memory."""
    m = get_model(model)
    made = []  # [True] once these steps made the plan

    def plan():
        if _plan_summary(m, quant) is None and not _ggml.has_plan(m, quant):
            made.append(True)
            quantize_plan(m, quant)

    def tables():
        _layer_plan(m, quant)
        _layer_terms(m, quant)
        if made:
            _ggml.forget_plan(m, quant)

    return [lambda: m.block_model, m._tensor_templates, plan,
            lambda: (_layer_bytes(m, quant), _layer_matrix_bytes(m, quant)), tables]  # fmt: skip


def _blocks_static(p: Placement, n: int, with_head: bool) -> tuple:
    """What a pass of n tokens (decode: n sequences; prefill: a micro-batch of n) does that does not depend on
    the context, per side: weights read, matmul FLOPs, blocks, weights per type, experts; with_head: the output
    head too (decode; prefill runs it apart). Returns ({side: (w, f, layers, types, x, xf, moe blocks, rows per
    type, the routed experts' weights per type)}, the head's side).
    Memoised on what it reads (the model object, quant, the layer split, --n-cpu-moe, the head's side): a decode
    curve or a prompt's micro-batches time one placement many times, and placements that differ only in their
    context or KV type (the calculator's changes, the course and measured placements) split the layers alike."""
    key = (id(p.model), p.quant, p.layer_device, p.n_cpu_moe, p.output_on_gpu, n, with_head)
    hit = _STATIC_CACHE.get(key)
    if hit is not None and hit[0] is p.model:
        return hit[1]
    m = p.model
    touched, _routed = _moe_fraction(m, n)
    n_expert = m.n_expert
    # per side: the scalar sums, then {type: weights}, {type: rows}, {type: routed experts' weights}
    w, f, x, xf = ({"gpu": 0.0, "cpu": 0.0} for _ in range(4))
    layers, mx = {"gpu": 0, "cpu": 0}, {"gpu": 0, "cpu": 0}
    types, rows, et = ({"gpu": {}, "cpu": {}} for _ in range(3))
    n_cpu_moe, layer_device = p.n_cpu_moe, p.layer_device
    for il, (dense, experts, type_terms, row_terms) in enumerate(_layer_terms(m, p.quant)):
        dev = layer_device[il]
        ed = "cpu" if il < n_cpu_moe else dev  # where the block's experts run
        if not experts and ed == dev:
            # a block without experts: the same sums, less the expert terms, which are all +0.0 here (and add no
            # new type: the dense term of each type is added first, to the same table)
            w[dev] += dense
            layers[dev] += 1
            t_dev = types[dev]
            fd = f[dev]
            for typ, dn, _en, two_dn, _two_en_routed in type_terms:
                fd += two_dn * n
                t_dev[typ] = t_dev.get(typ, 0.0) + dn
            f[dev] = fd
            r_dev = rows[dev]
            for typ, dr, _er in row_terms:
                r_dev[typ] = r_dev.get(typ, 0.0) + dr
            continue
        if ed == dev:  # the experts run with the block: the same sums below, each table looked up once
            w[dev] += dense
            w[dev] += experts * touched
            if experts:
                x[dev] += touched * n_expert
                mx[dev] += 1
            layers[dev] += 1
            t_dev, e_dev = types[dev], et[dev]
            fd, xfd = f[dev], xf[dev]
            for typ, dn, en, two_dn, two_en_routed in type_terms:
                fd += two_dn * n
                fd += two_en_routed * n
                xfd += two_en_routed * n
                t_dev[typ] = (t_dev.get(typ, 0.0) + dn) + en * touched
                if en:
                    e_dev[typ] = e_dev.get(typ, 0.0) + en * touched
            f[dev], xf[dev] = fd, xfd
            r_dev = rows[dev]
            for typ, dr, er in row_terms:
                r_dev[typ] = (r_dev.get(typ, 0.0) + dr) + er * touched
            continue
        w[dev] += dense
        w[ed] += experts * touched
        if experts:
            x[ed] += touched * n_expert
            mx[ed] += 1
        layers[dev] += 1
        t_dev, t_ed, e_ed = types[dev], types[ed], et[ed]
        for typ, dn, en, two_dn, two_en_routed in type_terms:
            f[dev] += two_dn * n
            f[ed] += two_en_routed * n
            xf[ed] += two_en_routed * n
            t_dev[typ] = t_dev.get(typ, 0.0) + dn
            t_ed[typ] = t_ed.get(typ, 0.0) + en * touched
            if en:
                e_ed[typ] = e_ed.get(typ, 0.0) + en * touched
        r_dev, r_ed = rows[dev], rows[ed]
        for typ, dr, er in row_terms:
            r_dev[typ] = r_dev.get(typ, 0.0) + dr
            r_ed[typ] = r_ed.get(typ, 0.0) + er * touched
    hd = "gpu" if p.output_on_gpu else "cpu"
    if with_head:
        _blocks, head, _row_blocks, head_rows = _layer_plan(m, p.quant)
        w[hd] += _head_bytes(p)
        for typ, k in head.items():
            f[hd] += 2.0 * k * n
            types[hd][typ] = types[hd].get(typ, 0.0) + k
        for typ, r in head_rows.items():
            rows[hd][typ] = rows[hd].get(typ, 0.0) + r
    static = (
        {
            s: (
                w[s], f[s], layers[s], tuple(sorted(types[s].items())), x[s], xf[s], mx[s],
                tuple(sorted((t, r) for t, r in rows[s].items() if r > 0)), tuple(sorted(et[s].items())),
            )
            for s in ("gpu", "cpu")
        },
        hd,
    )  # fmt: skip
    if len(_STATIC_CACHE) >= WORK_CACHE_MAX:
        _STATIC_CACHE.clear()
    _STATIC_CACHE[key] = (m, static)
    return static


_KIND_CACHE: dict = {}


def _kind_counts(p: Placement, plan) -> dict:
    """{side: (attention groups, recurrent groups)} of a placement: blocks alike in what they read grouped
    ({(bytes, FLOPs per cached token): [blocks reading the whole context, {window: blocks}]} and
    {(state bytes, FLOPs): blocks}), memoised per placement object (a decode curve times one placement at many
    contexts)."""
    key = id(p)
    hit = _KIND_CACHE.get(key)
    if hit is not None and hit[0] is p and hit[1] is plan:
        return hit[2]
    out = {"gpu": ({}, {}), "cpu": ({}, {})}
    for il in range(p.model.n_layers):
        per_tok, per_pair, w, rec_b, rec_f, kind = plan[il]
        att, rec = out[p.layer_device[il]]
        if kind == 2:
            rec[(rec_b, rec_f)] = rec.get((rec_b, rec_f), 0) + 1
        elif kind < 2:
            g = att.setdefault((per_tok, per_pair), [0, {}])
            if w:
                g[1][w] = g[1].get(w, 0) + 1
            else:
                g[0] += 1
    if len(_KIND_CACHE) >= WORK_CACHE_MAX:
        _KIND_CACHE.clear()
    _KIND_CACHE[key] = (p, plan, out)
    return out


def _decode_work(p: Placement, context: int, batch: int) -> dict:
    """{"gpu": Work, "cpu": Work} for one decode pass of `batch` sequences at `context` tokens of KV."""
    m = p.model
    if not (is_int(context) and 0 <= context <= MAX_CONTEXT):
        check_int(context, "context", 0, MAX_CONTEXT)
    static, hd = _blocks_static(p, batch, True)
    # decode_kv_read_bytes / decode_attention_flops of every block, from one plan (the same products)
    counts = _kind_counts(p, _kv_plan(m, p.kv_type, p.swa_full))
    kv = {"gpu": 0.0, "cpu": 0.0}
    af = {"gpu": 0.0, "cpu": 0.0}
    nrec = {"gpu": 0, "cpu": 0}
    for dev, (att, rec) in counts.items():
        # each block reads its own kind of cache: the whole context, a window, or a recurrent state
        k = f = 0.0
        for (per_tok, per_pair), (n_full, windows) in att.items():
            tokens = context * n_full
            for w, n in windows.items():
                tokens += min(context, w) * n
            k += per_tok * tokens * batch
            f += per_pair * tokens * batch
        for (rec_b, rec_f), n in rec.items():
            k += rec_b * batch * n
            f += rec_f * batch * n
            nrec[dev] += n
        kv[dev], af[dev] = k, f
    out = {}
    for s in ("gpu", "cpu"):
        w, f, layers, types, x, xf, mx, rows, et = static[s]
        # the batch's sequences advance one token each, in parallel: one step per recurrent block
        out[s] = Work(w, kv[s], f + af[s], af[s], layers, types, s == hd, x, xf, mx, rows, et, nrec[s], float(nrec[s]))
    return out


_PREFILL_TERMS_CACHE: dict = {}
_PREFILL_TERMS_MAX = 8  # placements kept: one prompt's micro-batches read one placement, then the next comes


def _prefill_terms(p: Placement, plan) -> dict:
    """{side: (((attention FLOPs per pair, window, blocks in a row) or (recurrent FLOPs per token, None, blocks
    in a row), ...) in block order, recurrent blocks, scanning blocks)}: what _prefill_work adds per block, read
    once per placement object (a prompt's micro-batches time one placement several times)."""
    key = id(p)
    hit = _PREFILL_TERMS_CACHE.get(key)
    if hit is not None and hit[0] is p and hit[1] is plan:
        return hit[2]
    m = p.model
    terms = {"gpu": [], "cpu": []}
    nrec = {"gpu": 0, "cpu": 0}
    nscan = {"gpu": 0, "cpu": 0}
    for il in range(m.n_layers):
        dev = p.layer_device[il]
        _pt, attn_per, win, _rb, rec_per, kind = plan[il]
        if kind == 2:
            terms[dev].append((rec_per, None))  # linear attention: a fixed cost per token, no pairs
            nrec[dev] += 1
            if not isinstance(m.blocks[il].mixer, ShortConv):
                nscan[dev] += 1
        elif kind < 2:
            terms[dev].append((attn_per, win))
    out = {s: (_runs(terms[s]), nrec[s], nscan[s]) for s in ("gpu", "cpu")}
    if len(_PREFILL_TERMS_CACHE) >= _PREFILL_TERMS_MAX:
        _PREFILL_TERMS_CACHE.clear()
    _PREFILL_TERMS_CACHE[key] = (p, plan, out)
    return out


def _runs(terms: list) -> tuple:
    """((term, window, how many in a row), ...): consecutive equal terms (most models repeat one block) as runs."""
    out = []
    for per, win in terms:
        if out and out[-1][0] == per and out[-1][1] == win:
            out[-1][2] += 1
        else:
            out.append([per, win, 1])
    return tuple((per, win, n) for per, win, n in out)


def _prefill_work(p: Placement, start: int, u: int) -> dict:
    """{"gpu": Work, "cpu": Work} for the blocks of the micro-batch of tokens start+1 .. start+u (the output
    head is _head_work: it runs for the last token only)."""
    static, _hd = _blocks_static(p, u, False)
    per_side = _prefill_terms(p, _kv_plan(p.model, p.kv_type, p.swa_full))
    pairs = {}  # attention pairs per window size (one closed form per distinct window)
    out = {}
    for s in ("gpu", "cpu"):
        terms, nrec, nscan = per_side[s]
        af = 0.0
        for per, win, n in terms:  # block by block, as each block adds its attention (or its recurrence)
            if win is None:
                x = per * u
            else:
                n_pairs = pairs.get(win)
                if n_pairs is None:
                    n_pairs = pairs[win] = _causal_pairs_window(win, start, start + u)
                x = per * n_pairs
            for _ in range(n):  # (one addition per block, in order: the same sum)
                af += x
        w, f, layers, types, x, xf, mx, rows, et = static[s]
        # llama.cpp's scan kernels walk the micro-batch's tokens in order: u steps per scanning block (a short
        # convolution's ssm_conv has none: enginelab.measured.recurrent)
        out[s] = Work(w, 0.0, f + af, af, layers, types, False, x, xf, mx, rows, et, nrec, float(nscan * u))
    return out


def _with_head(w: Work, head: Work, u: int) -> Work:
    """w plus the output head run for each of u tokens (the course profile's prefill)."""
    types = dict(w.weights_by_type)
    for typ, n in head.weights_by_type:
        types[typ] = types.get(typ, 0.0) + n
    return replace(
        w,
        weight_bytes=w.weight_bytes + head.weight_bytes,
        flops=w.flops + head.flops * u,
        weights_by_type=tuple(sorted(types.items())),
        head_on_this=True,
    )


def _head_work(p: Placement) -> tuple:
    """(side, Work) of the output head for one token: its weights read once, multiplying one vector."""
    _blocks, head, _row_blocks, head_rows = _layer_plan(p.model, p.quant)
    flops = sum(2.0 * n for n in head.values())
    side = "gpu" if p.output_on_gpu else "cpu"
    return side, Work(
        _head_bytes(p),
        0.0,
        flops,
        0.0,
        0,
        tuple(sorted(head.items())),
        True,
        rows_by_type=tuple(sorted(head_rows.items())),
    )


def _causal_pairs_window(w: int, start: int, end: int) -> float:
    """Query-key pairs computed for positions start+1..end: sum of min(q, w) (w = 0: no window), in
    closed form."""

    def upto(n: int) -> float:  # sum_{q=1}^{n} min(q, w)
        if not w or n <= w:
            return n * (n + 1) / 2.0
        return w * (w + 1) / 2.0 + (n - w) * w

    return upto(end) - upto(start)


def _causal_pairs(m: Model, il: int, start: int, end: int) -> float:
    """Query-key pairs computed for positions start+1..end of layer il (causal, windowed)."""
    return _causal_pairs_window(_kv_plan(m, "f16")[il][2], start, end)


def _link_traffic(p: Placement, tokens: int) -> dict:
    """What one forward pass of `tokens` tokens sends over the GPU link: transfers, bytes, and their kind."""
    m, mc = p.model, p.machine
    h = m.hidden_size
    rpc = mc.link.kind == "rpc"
    order = list(p.layer_gpu) + [p.output_gpu]  # the device of each layer in the order they run
    n_transfers, n_bytes = 0, 0.0
    if p.row_split:
        blocks, _ = _layer_parts(m, p.quant)
        act = [i for i, f in enumerate(p.row_fractions) if f > 0]
        for il, g in enumerate(p.layer_gpu):
            if g is None:
                continue
            b = blocks[il]
            others = sum(f for i, f in enumerate(p.row_fractions) if i != g)
            n_transfers += b["n_mat"]
            n_bytes += tokens * 4.0 * (b["k_in"] * (len(act) - 1) + b["n_out"] * others)
        if p.output_gpu is not None:
            others = sum(f for i, f in enumerate(p.row_fractions) if i != p.output_gpu)
            n_transfers += 1
            n_bytes += tokens * 4.0 * (h * (len(act) - 1) + m.vocab_size * others)
        kind = "sync"
    else:
        for a, b in zip(order, order[1:]):
            if a != b and (a is not None and b is not None or rpc):
                n_transfers += 1
                n_bytes += tokens * 4.0 * h
        kind = "hop"
    if rpc:
        if order[0] is not None:  # the host looks the input rows up in token_embd and sends them
            n_transfers += 1
            n_bytes += tokens * 4.0 * h
        if p.output_gpu is not None:  # the logits come back to the host
            n_transfers += 1
            n_bytes += tokens * 4.0 * m.vocab_size
    return {"kind": kind, "transfers": n_transfers, "bytes": n_bytes}


def _work_multi(p: Placement, tokens: int, context: int | None, start: int = 0, with_head: bool = True) -> tuple:
    """({side: Work} each device runs on its own, {side: Work} of the row-split matrices run in parallel) for a
    pass of `tokens` tokens: decode (context = KV tokens per sequence, tokens = the batch) or a prefill
    micro-batch (context None: positions start+1 .. start+tokens, causal attention, no KV read).
    Sides: "gpu0", "gpu1", ..., "cpu"."""
    m = p.model
    blocks, _ = _layer_parts(m, p.quant)
    _blocks, head, row_blocks, head_rows = _layer_plan(m, p.quant)
    touched, routed = _moe_fraction(m, tokens)
    plan = _kv_plan(m, p.kv_type, p.swa_full)
    sides = [_gpu_side(i) for i in range(len(p.machine.gpus))] + ["cpu"]

    def acc():
        zero = {"w": 0.0, "kv": 0.0, "f": 0.0, "af": 0.0, "layers": 0, "x": 0.0, "mx": 0, "rec": 0, "scan": 0}
        return {s: {**zero, "types": {}, "rows": {}, "et": {}} for s in sides}

    loc, spl = acc(), acc()
    shares = p.row_fractions if p.row_split else ()
    pairs: dict = {}

    def add(a, typ, n, bytes_share, flops):
        a["types"][typ] = a["types"].get(typ, 0.0) + n * bytes_share
        a["f"] += flops

    for il in range(m.n_layers):
        g = p.layer_gpu[il]
        side = "cpu" if g is None else _gpu_side(g)
        a = loc[side]
        ae = loc["cpu" if il < p.n_cpu_moe else side]
        b = blocks[il]
        a["layers"] += 1
        a["w"] += b["small_bytes"]
        for typ, n in b["small"].items():
            add(a, typ, n, 1.0, 2.0 * n * tokens)
        if shares and g is not None:
            for i, f in enumerate(shares):
                if f <= 0:
                    continue
                s = spl[_gpu_side(i)]
                s["w"] += b["mat_bytes"] * f
                for typ, n in b["mat"].items():
                    add(s, typ, n, f, 2.0 * n * f * tokens)
        else:
            a["w"] += b["mat_bytes"]
            for typ, n in b["mat"].items():
                add(a, typ, n, 1.0, 2.0 * n * tokens)
        cpu_rows = loc["cpu"]["rows"]  # rows matter on the CPU only (a vec_dot call each)
        for typ, (dr, er) in row_blocks[il].items():
            r = (dr if a is loc["cpu"] else 0.0) + (er * touched if ae is loc["cpu"] else 0.0)
            if r:
                cpu_rows[typ] = cpu_rows.get(typ, 0.0) + r
        if b["exp_bytes"]:
            ae["w"] += b["exp_bytes"] * touched
            ae["x"] += touched * m.n_expert
            ae["mx"] += 1
            for typ, n in b["exp"].items():
                add(ae, typ, n, touched, 2.0 * n * routed * tokens)
                ae["et"][typ] = ae["et"].get(typ, 0.0) + n * touched
        if plan[il][5] == 2:
            a["rec"] += 1
            if not isinstance(m.blocks[il].mixer, ShortConv):
                a["scan"] += 1  # a short convolution has no sequential scan (enginelab.measured.recurrent)
        if context is not None:  # decode: every sequence reads its KV (each kind of block its own, perf_model.timing)
            per_tok, per_pair, win, rec_b, rec_f, kind = plan[il]  # decode_kv_read_bytes' and _attention_flops'
            seen = min(context, win) if win else context
            a["kv"] += (rec_b if kind >= 2 else per_tok * seen) * tokens
            a["af"] += (rec_f if kind >= 2 else per_pair * seen) * tokens
        elif plan[il][5] == 2:
            a["af"] += plan[il][4] * tokens  # linear attention: a fixed cost per token, no pairs
        elif plan[il][5] < 2:
            attn_per, win = plan[il][1], plan[il][2]
            if win not in pairs:
                pairs[win] = _causal_pairs_window(win, start, start + tokens)
            a["af"] += attn_per * pairs[win]
    if with_head:
        hside = "cpu" if p.output_gpu is None else _gpu_side(p.output_gpu)
        hb = _head_bytes(p)
        if shares and p.output_gpu is not None:
            for i, f in enumerate(shares):
                if f > 0:
                    s = spl[_gpu_side(i)]
                    s["w"] += hb * f
                    for typ, n in head.items():
                        add(s, typ, n, f, 2.0 * n * f * tokens)
        else:
            a = loc[hside]
            a["w"] += hb
            for typ, n in head.items():
                add(a, typ, n, 1.0, 2.0 * n * tokens)
            for typ, r in head_rows.items():
                a["rows"][typ] = a["rows"].get(typ, 0.0) + r

    def works(d, head_side=None):
        return {
            s: Work(
                a["w"],
                a["kv"],
                a["f"] + a["af"],
                a["af"],
                a["layers"],
                tuple(sorted(a["types"].items())),
                s == head_side,
                a["x"],
                moe_layers=a["mx"],
                rows_by_type=tuple(sorted((t, r) for t, r in a["rows"].items() if r > 0)),
                expert_weights_by_type=tuple(sorted((t, n) for t, n in a["et"].items() if n > 0)),
                rec_blocks=a["rec"],
                rec_steps=float(a["scan"] * (1 if context is not None else tokens)),
            )
            for s, a in d.items()
        }

    hs = ("cpu" if p.output_gpu is None else _gpu_side(p.output_gpu)) if with_head else None
    return works(loc, hs), works(spl)
