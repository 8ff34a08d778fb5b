"""One forward pass over a mixed batch: decode sequences at their own contexts plus prefill chunk tokens.

A serving engine's scheduler step runs every running sequence's next token and, beside them, chunks of the
prompts it is prefilling, in one forward pass. What that pass costs:

  * weights: read once per pass, whatever the batch (an MoE block reads the experts its tokens touch:
    E * (1 - (1 - k/E)^R) distinct experts, perf_model._moe_fraction, for the R = T ** kernels.ROUTE_EXP
    independently routed tokens that T tokens' overlapping router choices amount to);
  * KV: each decode sequence reads its own cache at its own context (perf_model.decode_kv_read_bytes);
    a prefill chunk of u tokens starting at position s reads its prefix and its own u tokens once;
  * matmul FLOPs: 2 per weight per token (T = decode sequences + chunk tokens); attention FLOPs: per
    query-key pair (decode: its context; a chunk: u*s + u(u+1)/2, causal);
  * the output head: one row of logits per decode sequence, one per chunk that ends its prompt.

Timing, per profile:
  course    the module's roofline: max(bytes / (ETA_DECODE x bandwidth), FLOPs / (ETA_PREFILL x FLOP/s))
            + DECODE_OVERHEAD_S, per device, as decode_step_time does.
  measured  llama.cpp's kernels past one token (perf_model.kernels): mat-vec with several columns up to 8
            tokens, mat-mat tiles above, MoE's host sync past MUL_MAT_ID's mat-vec kernel.
  engine    "vllm" / "sglang": decode-only batches run a captured CUDA graph padded up to the next capture
            size (vLLM's default cudagraph_capture_sizes [1, 2, 4] + range(8, 256, 8) + range(256, max + 1,
            16), max = min(2 x max_num_seqs, 512), vllm/config/compilation.py; SGLang's cuda_graph_bs is
            the same ladder), and their GEMMs do not take llama.cpp's mat-vec path. They sample on the GPU
            (a token id per row comes back, not the logits), and their engine loop spends host time per
            request in the step: vLLM v0.11 between passes, SGLang beside them (HOST_US_PER_REQUEST).
"""

from __future__ import annotations

from enginelab.checks import brief, check_bool, check_int, is_int
from enginelab.ggml import GGML_TYPES

from . import kernels
from .devices import device_backend, side_device
from .kv import _kv_plan
from .models import MAX_CONTEXT
from .placement import Placement
from .profiles import get_profile
from .timing import _check_threads, _logits_bytes
from .units import _check
from .work import Work, _blocks_static, _causal_pairs_window, _head_work, _kind_counts

ENGINES = ("llama.cpp", "vllm", "sglang")
MAX_NUM_SEQS = 1 << 20  # max_num_seqs / max_running_requests: far above any engine's default (256-1024)
# vLLM's and SGLang's samplers run on the GPU; the host gets each row's sampled token id: vLLM v1's GPUModelRunner
# copies them into sampled_token_ids_pinned_cpu, an int64 tensor (vllm/v1/worker/gpu_model_runner.py), SGLang's
# scheduler reads next_token_ids (int64) after the sampler (python/sglang/srt/layers/sampler.py)
SAMPLED_ID_BYTES = 8
# The engine loop's CPU time per request in a step, during which vLLM v0.11's GPU waits (its engine core
# schedules, prepares the inputs, runs the pass and processes the outputs in turn: --async-scheduling, which
# overlaps them, is off by default, vllm#19970): vllm#10634 measured 5-6 ms between two decode passes of
# Llama-2-7B at a batch of 256 on ShareGPT (V1 engine with AsyncLLM, vllm#9826), 5.5 ms / 256. SGLang runs the
# same work one batch ahead, beside the pass (its zero-overhead scheduler, SGLang v0.4 blog, lmsys.org
# 2024-12-04: no idle time between decode batches in its Nsight profile): the step takes the longer of the two.
HOST_US_PER_REQUEST = {"vllm": 5500.0 / 256, "sglang": 5500.0 / 256}


def cudagraph_capture_sizes(max_num_seqs: int = 256) -> list:
    """vLLM's default capture sizes: 1, 2, 4, then every 8 to 256, then every 16, up to
    max_cudagraph_capture_size = min(2 * max_num_seqs, 512) (vllm/config/compilation.py)."""
    check_int(max_num_seqs, "max_num_seqs", 1, MAX_NUM_SEQS)
    top = min(2 * max_num_seqs, 512)
    sizes = [1, 2, 4] + list(range(8, 257, 8)) + list(range(272, 513, 16))
    return [s for s in sizes if s <= top]


def padded_batch(n: int, sizes: list) -> int:
    """The captured size a decode batch of n runs at (n itself past the largest: eager mode)."""
    for s in sizes:
        if s >= n:
            return s
    return n


def _check_inputs(p, contexts, chunks):
    if not isinstance(p, Placement):
        _check(False, "placement", f"must be a Placement (from place()), got {brief(p)}")
    if not isinstance(contexts, (list, tuple, range)):
        _check(False, "contexts", f"must be a list of decode contexts, got {brief(contexts)}")
    if not isinstance(chunks, (list, tuple)):
        _check(False, "chunks", f"must be a list of (start, tokens, last) prefill chunks, got {brief(chunks)}")
    for c in contexts:
        if not (is_int(c) and 0 <= c <= MAX_CONTEXT):
            _check(False, "contexts", f"each must be an integer from 0 to {MAX_CONTEXT:,}, got {brief(c)}")
    for ch in chunks:
        ok = isinstance(ch, (list, tuple)) and len(ch) == 3
        ok = ok and is_int(ch[0]) and is_int(ch[1]) and 0 <= ch[0] <= MAX_CONTEXT and 1 <= ch[1] <= MAX_CONTEXT
        if not ok:
            _check(False, "chunks", f"each must be (start >= 0, tokens >= 1, last), got {brief(ch)}")
        check_bool(ch[2], "chunks")
    if not contexts and not chunks:
        _check(False, "contexts", "a step needs at least one decode sequence or prefill chunk")


def step_work(p, contexts, chunks=(), same_tokens: bool = False) -> tuple:
    """({side: perf_model.Work}, tokens, logits rows) of one pass: `contexts` are the decode sequences'
    KV lengths, `chunks` the prefill chunks as (start, tokens, last): last = the chunk ends its prompt.
    same_tokens: every decode sequence feeds the same token (llama-batched-bench did before it drew random
    tokens), so an MoE block's router picks the same experts for all of them: the weights of one token's experts
    are read, not E * (1 - (1 - k/E)^R) experts' worth (R = B ** kernels.ROUTE_EXP)."""
    _check_inputs(p, contexts, chunks)
    m = p.model
    n_tok = len(contexts) + sum(c[1] for c in chunks)
    n_logits = len(contexts) + sum(1 for c in chunks if c[2])
    if m.is_moe:
        static, _hd = _blocks_static(p, n_tok, False)
    else:  # a dense pass's matmul FLOPs are 2 per weight per token: one token's, n_tok times (one memo entry)
        one, _hd = _blocks_static(p, 1, False)
        static = {s: (v[0], v[1] * n_tok) + v[2:] for s, v in one.items()}
    # the experts' weights read: one token's when every sequence feeds the same token, else those of
    # n_tok ** kernels.ROUTE_EXP independently routed tokens (a router's choices overlap); FLOPs stay n_tok's
    n_route = 1 if same_tokens and not chunks else max(1, round(n_tok**kernels.ROUTE_EXP))
    if m.is_moe and n_route != n_tok:
        one = _blocks_static(p, n_route, False)[0]
        static = {
            s: (one[s][0], static[s][1], static[s][2], one[s][3], one[s][4], static[s][5], static[s][6],
                one[s][7], one[s][8])
            for s in static
        }  # fmt: skip
    # each block reads its own kind of cache (perf_model._kind_counts groups blocks alike): the whole context,
    # a window of it, or a recurrent state; a decode sequence reads and scores its context, a chunk its prefix
    # and itself, with the causal pairs of its own tokens
    full_read = sum(contexts) + sum(s + u for s, u, _ in chunks)
    full_pairs = sum(contexts) + sum(_causal_pairs_window(0, s, s + u) for s, u, _ in chunks)
    windowed: dict = {}

    def window(w: int) -> tuple:
        if w not in windowed:
            windowed[w] = (
                sum(min(c, w) for c in contexts) + sum(min(s + u, w) for s, u, _ in chunks),
                sum(min(c, w) for c in contexts) + sum(_causal_pairs_window(w, s, s + u) for s, u, _ in chunks),
            )
        return windowed[w]

    n_seq = len(contexts) + len(chunks)
    counts = _kind_counts(p, _kv_plan(m, p.kv_type, p.swa_full))
    kv = {"gpu": 0.0, "cpu": 0.0}
    af = {"gpu": 0.0, "cpu": 0.0}
    nrec = {"gpu": 0, "cpu": 0}
    for side, (att, rec) in counts.items():
        for (per_tok, per_pair), (n_full, windows) in att.items():
            read, pairs = full_read * n_full, full_pairs * n_full
            for w, n in windows.items():
                r_w, p_w = window(w)
                read, pairs = read + r_w * n, pairs + p_w * n
            kv[side] += per_tok * read
            af[side] += per_pair * pairs
        for (rec_b, rec_f), n in rec.items():
            kv[side] += rec_b * n_seq * n
            af[side] += rec_f * n_tok * n
            nrec[side] += n
    # a recurrent block's scan walks a chunk's tokens in order (the sequences side by side): as many steps as the
    # longest chunk, one for a pass of decode tokens alone
    steps = max([1] * bool(contexts) + [u for _s, u, _last in chunks])
    head_side, head = _head_work(p)
    out = {}
    for side in ("gpu", "cpu"):
        w, f, layers, types, x, xf, mx, rows, et = static[side]
        work = Work(
            w, kv[side], f + af[side], af[side], layers, types, False, x, xf, mx, rows, et, nrec[side],
            float(nrec[side] * steps),
        )  # fmt: skip
        if side == head_side and n_logits:
            types_h = dict(work.weights_by_type)
            for t, n in head.weights_by_type:
                types_h[t] = types_h.get(t, 0.0) + n
            rows_h = dict(work.rows_by_type)
            for t, r in head.rows_by_type:
                rows_h[t] = rows_h.get(t, 0.0) + r
            work = Work(
                work.weight_bytes + head.weight_bytes, kv[side], work.flops + head.flops * n_logits, af[side], layers,
                tuple(sorted(types_h.items())), True, x, xf, mx, tuple(sorted(rows_h.items())), et, work.rec_blocks,
                work.rec_steps,
            )  # fmt: skip
        out[side] = work
    return out, n_tok, n_logits


def _expert_share(w) -> float:
    """The part of a pass's weight bytes in routed experts (by each type's bits per weight)."""
    if not w.expert_weights_by_type:
        return 0.0
    bpw = {t: (GGML_TYPES[t].bpw if t in GGML_TYPES else 16.0) for t, _n in w.weights_by_type}
    total = sum(n * bpw.get(t, 16.0) for t, n in w.weights_by_type)
    experts = sum(n * bpw.get(t, 16.0) for t, n in w.expert_weights_by_type)
    return experts / total if total else 0.0


def batched_step(
    placement,
    contexts=(),
    chunks=(),
    profile=None,
    engine: str = "llama.cpp",
    n_threads=None,
    max_num_seqs: int = 256,
    same_tokens: bool = False,
    params: dict | None = None,
    build=None,
) -> dict:
    """Time of one forward pass over decode sequences at `contexts` and prefill `chunks` ((start, tokens,
    last) each). engine: whose kernels run it ("llama.cpp", "vllm", "sglang": CUDA-graph padding of
    decode-only batches, max_num_seqs sets the largest captured size). build: the llama.cpp build, as for
    decode_step_time. Returns total_s, tokens, logits, per-side seconds and the Work, and tok_per_s (decode
    tokens per second)."""
    p = placement
    if engine not in ENGINES:
        _check(False, "engine", f"must be one of {', '.join(ENGINES)}, got {brief(engine)}")
    if not isinstance(p, Placement):
        _check(False, "placement", f"must be a Placement (from place()), got {brief(p)}")
    prof = get_profile(profile, p, build)
    n_threads = _check_threads(n_threads)
    if p is not None and isinstance(p, Placement) and p.machine.multi_gpu:
        _check(False, "placement", "batched_step times one GPU (or CPU) machine; several GPUs are not modelled")
    contexts = list(contexts) if isinstance(contexts, (list, tuple, range)) else contexts
    padded = len(contexts) if isinstance(contexts, list) else 0
    if engine != "llama.cpp" and not chunks and isinstance(contexts, list) and contexts:
        padded = padded_batch(len(contexts), cudagraph_capture_sizes(max_num_seqs))
        # padded rows run the weights' matmuls and read no KV (they attend to nothing)
    work, n_tok, n_logits = step_work(p, contexts + [0] * (padded - len(contexts)), list(chunks), same_tokens)
    res = {"tokens": n_tok, "logits": n_logits, "padded_batch": padded, "profile": prof.name, "engine": engine}
    total = 0.0
    mc = p.machine
    for side in ("gpu", "cpu"):
        w = work[side]
        t = 0.0
        if w.bytes or w.flops:
            dev, backend = side_device(mc, side), device_backend(mc, side)
            gain = kernels.gemm_gain(p.model, n_tok, engine, dev.name) if backend == "cuda" else 1.0
            t = prof.batched_seconds(w, dev, backend, n_tok, engine, n_threads, params, gain=gain)[0]
        res[side + "_s"] = t
        total += t
    # llama.cpp copies each output row's logits to the host and samples there; vLLM and SGLang sample on the GPU
    # and copy back one token id per row
    row_bytes = _logits_bytes(p, mc) if engine == "llama.cpp" else SAMPLED_ID_BYTES * (_logits_bytes(p, mc) > 0)
    overhead = prof.step_overhead_seconds(
        {s: work[s].layers for s in work},
        {s: device_backend(mc, s) for s in work},
        p.output_on_gpu,
        row_bytes * max(1, n_logits),
        mc.pcie,
    )
    res["overhead_s"] = overhead
    # the engine loop's host time for this step's requests (scheduler, input preparation, output processing):
    # vLLM runs it between passes, SGLang's overlap scheduler beside the GPU's pass
    host = HOST_US_PER_REQUEST.get(engine, 0.0) * (len(contexts) + len(chunks)) * 1e-6
    res["host_s"] = host
    gpu_s = total + overhead
    res["total_s"] = max(gpu_s, host) if engine == "sglang" else gpu_s + host
    res["work"] = work
    res["tok_per_s"] = len(contexts) / res["total_s"]
    return res
