"""PagedManager's fast internals against straightforward references: the list-backed free block queue against an
ordered dict, block numbers kept as runs against a (parent, tokens) pair per block, and the serving simulation on
a PagedManager built from those references (step by step, every block taken by decode) against the default one."""

import os
import random
import sys
from collections import OrderedDict

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "pylib"))

import kv_managers as kvm  # noqa: E402
import perf_model as pm  # noqa: E402
from enginelab.serving import sim  # noqa: E402
from kv_managers.paged import FreeBlockQueue  # noqa: E402

# --- the free block queue ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_free_block_queue_keeps_the_order_of_an_ordered_dict(seed):
    # random frees (at the tail), touches (from anywhere) and allocations (from the head) on 40 blocks; the
    # queue must hand out the blocks an ordered dict of the free blocks would, and stay bounded
    rng = random.Random(seed)
    n = 40
    q, ref = FreeBlockQueue(n), OrderedDict((b, None) for b in range(n))
    held: list = []
    touches = 0
    for _ in range(3000):
        op = rng.random()
        if op < 0.3 and ref:  # allocate a few from the head
            k = rng.randint(1, min(6, len(ref)))
            got = q.pop_many(k)
            assert got == [ref.popitem(last=False)[0] for _ in range(k)]
            held += got
        elif op < 0.65 and ref:  # a prefix hit touches a free block
            b = rng.choice(list(ref))
            q.remove(b)
            del ref[b]
            held.append(b)
            touches += 1
        elif held:  # a request frees some blocks, in some order
            rng.shuffle(held)
            k = rng.randint(1, len(held))
            freed, held = held[:k], held[k:]
            q.extend(freed)
            for b in freed:
                ref[b] = None
        assert len(q) == len(ref)
        assert list(q) == list(ref)
        assert all((b in q) == (b in ref) for b in range(n))
        # stale entries never outnumber max(64, live ones); taken entries are dropped once they are half the list
        assert len(q._q) - q._head <= len(ref) + max(64, len(ref)) + 1
        assert q._head <= max(256, len(q._q) // 2 + 1)
    assert touches > 500


# --- block numbers -------------------------------------------------------------------------------------------------


class _PairNumbers:
    """The reference numbering: (parent number or -1, the block's tokens) -> a number, new ones in order."""

    def __init__(self):
        self.ids: dict = {}

    def numbers(self, toks, bs):
        out, parent = [], -1
        for i in range(0, len(toks) // bs * bs, bs):
            parent = self.ids.setdefault((parent, tuple(toks[i : i + bs])), len(self.ids))
            out.append(parent)
        return out


def _prompts(rng, count, bs):
    """Token lists that share prefixes of whole blocks and parts of blocks, and repeat one another."""
    base = [rng.randrange(3) for _ in range(12 * bs)]
    out = []
    for _ in range(count):
        if out and rng.random() < 0.2:
            out.append(list(rng.choice(out)))
            continue
        cut = rng.randrange(len(base))
        tail = [rng.randrange(3) for _ in range(rng.randrange(4 * bs))]
        out.append(base[:cut] + tail)
    return out


@pytest.mark.parametrize("bs", [1, 3, 16])
def test_block_numbers_are_those_of_a_pair_per_block(bs):
    # a pool large enough that nothing is pruned: every number equals the reference's, prompts grown token by
    # token (as decodes do) included
    rng = random.Random(bs)
    m = kvm.PagedManager(1 << 16, block_size=bs)
    ref = _PairNumbers()
    for rid, toks in enumerate(_prompts(rng, 80, bs)):
        live = kvm._Live(kvm.Request(rid, 0, toks, 0))
        if rid % 3 == 0:  # grown in steps
            live.tokens = toks[: len(toks) // 2]
            m._block_hashes(live)
            live.tokens = list(toks)
        assert m._block_hashes(live) == ref.numbers(toks, bs)
    assert len(m._run_starts) > 0 and m._n_ids == len(ref.ids)


def test_pruned_block_numbers_keep_what_requests_carry_and_stay_bounded():
    # a pool of 8 blocks of 4 tokens: pruning runs many times; the requests still held keep their numbers (a
    # prompt seen again gets them back), and the kept pairs stay bounded by what blocks and requests carry
    rng = random.Random(7)
    bs = 4
    m = kvm.PagedManager(32, block_size=bs)
    prune, prunes = m._prune_block_ids, []
    m._prune_block_ids = lambda: (prunes.append(1), prune())
    held: dict = {}
    most = 0  # the most numbers the held requests carried at once
    for rid, toks in enumerate(_prompts(rng, 400, bs)):
        live = kvm._Live(kvm.Request(rid, 0, toks, 0))
        held[rid] = (toks, list(m._block_hashes(live)))
        most = max(most, sum(len(h) for _t, h in held.values()))
        if len(held) > 5:  # a request leaves: its numbers are no longer carried
            old = min(held)
            del held[old], m._hashes[old]
        # a run keeps at most 4 numbers per carried one, and the limit is twice what was kept
        assert m._n_ids <= m._ids_limit <= max(4 * m.num_gpu_blocks, 8 * (m.num_gpu_blocks + most))
    assert len(prunes) > 10
    for rid, (toks, hs) in held.items():
        again = kvm._Live(kvm.Request(10_000 + rid, 0, toks, 0))
        assert m._block_hashes(again) == hs


def test_a_run_keeps_the_span_blocks_carry_or_pairs_when_sparse():
    # one prompt of 10 blocks is a run of numbers 0-9; after it leaves, cached blocks still carry some numbers
    bs = 2
    m = kvm.PagedManager(64, block_size=bs)
    toks = list(range(20))
    assert m._block_hashes(kvm._Live(kvm.Request(0, 0, toks, 0))) == list(range(10)) and m._run_starts == [0]
    del m._hashes[0]
    # numbers 2 and 5 carried: the run is cut to 1-5 (number 1 is its base, 2-5 its pairs)
    m.block_hash[5], m.block_hash[6] = 2, 5
    m._prune_block_ids()
    assert m._run_starts == [1] and m._run_tokens == [toks[2:12]] and m._n_ids == 5 and m._block_ids == {}
    # then 2 and 9: a span of 9 blocks for 2 numbers is mostly forgotten, so the run becomes their two pairs
    m.block_hash[6] = 9
    m._run_starts, m._run_tokens = [0], [toks]
    m._prune_block_ids()
    assert m._run_starts == [] and m._n_ids == 2
    assert m._block_ids == {(1, (4, 5)): 2, (8, (18, 19)): 9}


# --- the serving simulation on reference internals -----------------------------------------------------------------


class _OrderedQueue(OrderedDict):
    """free_block_queue as vLLM's ordered free list, one block at a time."""

    def remove(self, b):
        del self[b]

    def extend(self, blocks):
        for b in blocks:
            self[b] = None

    def pop_many(self, n):
        return [self.popitem(last=False)[0] for _ in range(n)]


class _ReferencePaged(kvm.PagedManager):
    """PagedManager with its internals written the straightforward way: a pair per block (never pruned), an
    ordered dict for the free queue, blocks taken, evicted, registered and freed one at a time."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.free_block_queue = _OrderedQueue((b, None) for b in range(self.num_gpu_blocks))
        self._pairs: dict = {}

    def _block_hashes(self, live):
        hs = self._hashes.setdefault(live.rid, [])
        bs, toks = self.block_size, live.tokens
        parent = hs[-1] if hs else -1
        for i in range(len(hs) * bs, len(toks) // bs * bs, bs):
            parent = self._pairs.setdefault((parent, tuple(toks[i : i + bs])), len(self._pairs))
            hs.append(parent)
        return hs

    def _pop_free_into(self, n, table):
        for _ in range(n):
            b = self.free_block_queue.popitem(last=False)[0]
            h = self.block_hash[b]
            if h is None:
                self._n_free_clean -= 1
            else:
                if self.cached_block_hash_to_block.get(h) == b:
                    del self.cached_block_hash_to_block[h]
                self.block_hash[b] = None
            self.ref_cnt[b] = 1
            table.append(b)

    def _cache_full_blocks(self, live):
        if not self.enable_prefix_caching:
            return
        hs = self._block_hashes(live)
        start = self._n_cached.get(live.rid, 0)
        for b, h in zip(self.req_to_blocks[live.rid][start:], hs[start:]):
            if self.block_hash[b] is None:
                self.block_hash[b] = h
                self.cached_block_hash_to_block.setdefault(h, b)
        self._n_cached[live.rid] = len(hs)

    def _free_request(self, live):
        table = self.req_to_blocks.pop(live.rid)
        self._n_cached.pop(live.rid, None)
        for b in reversed(table):
            self.ref_cnt[b] -= 1
            if self.ref_cnt[b] == 0:
                self.free_block_queue[b] = None
                if self.block_hash[b] is None:
                    self._n_free_clean += 1
        return table

    def start_blocks(self, lives):
        raise AssertionError("the reference run takes every block in decode")


@pytest.fixture(scope="module")
def p8b():
    return pm.place("llama-3.1-8b", "rtx4090", "F16", n_ctx=32768, profile="measured")


WORKLOADS = {
    # the bench's shape, smaller: a request finishes every few steps, the pool fills, cached blocks are evicted
    "poisson": sim.Workload(num_prompts=150, request_rate=40.0, input_len=1024, output_len=128, seed=3),
    # a shared prefix: prefix hits, touched free blocks, recomputes that hit their own cached blocks
    "prefix": sim.Workload(num_prompts=120, request_rate=30.0, input_len=600, output_len=300, prefix_len=700, seed=4),
    # ShareGPT lengths all at once: preemption when the blocks run out
    "burst": sim.Workload(num_prompts=120, dataset="sharegpt", seed=5),
}
SETUPS = [
    ("vllm", {}),
    ("vllm", {"num_gpu_blocks_override": 260}),  # KV-bound: preemption
    ("vllm", {"num_gpu_blocks_override": 400, "max_num_batched_tokens": 512}),  # chunked prefill beside decodes
    ("vllm", {"enable_chunked_prefill": False, "num_gpu_blocks_override": 600}),
    ("vllm", {"enable_prefix_caching": False, "num_gpu_blocks_override": 300}),
    ("llama.cpp", {"n_parallel": 16, "kv_unified": True}),
    ("sglang", {}),
    ("sglang", {"schedule_policy": "lpm", "chunked_prefill_size": 512}),
]


def _outcome(res) -> tuple:
    recs = [{k: v for k, v in r.items() if k != "token_times_s"} for r in res.requests]
    return (res.metrics, recs, res.kv_use, res.preemptions, res.prefix_hit_tokens, res.steps, res.pool_tokens)


@pytest.mark.parametrize("workload", list(WORKLOADS))
@pytest.mark.parametrize(("engine", "flags"), SETUPS, ids=[f"{e}-{'-'.join(f) or 'default'}" for e, f in SETUPS])
def test_the_simulation_gives_the_reference_result(p8b, monkeypatch, engine, flags, workload):
    # reference: every step in full, the generic emit loop (record_tokens), vLLM's blocks taken by decode one
    # request at a time on _ReferencePaged; against the default run, every float to the bit. (SGLang on "prefix":
    # a coast ran past the step whose new_token_ratio decay let the refused head in, until coast stopped there.)
    w = WORKLOADS[workload]
    fast = sim.simulate(engine, p8b, w, **flags)
    monkeypatch.setattr(kvm, "PagedManager", _ReferencePaged)
    ref = sim.simulate(engine, p8b, w, fast=False, record_tokens=True, **flags)
    assert _outcome(fast) == _outcome(ref)


def test_the_reference_runs_reach_what_the_fast_internals_must_get_right(p8b, monkeypatch):
    # the comparison above takes blocks in batches, evicts cached blocks, touches free ones, prunes block numbers
    counts = {"start_blocks": 0, "remove": 0, "_prune_block_ids": 0, "evicted": 0}

    def counting(cls, name):
        orig = getattr(cls, name)

        def f(self, *a):
            counts[name] += 1
            return orig(self, *a)

        monkeypatch.setattr(cls, name, f)

    counting(kvm.PagedManager, "start_blocks")
    counting(FreeBlockQueue, "remove")
    counting(kvm.PagedManager, "_prune_block_ids")
    hits = preempted = 0
    for w in WORKLOADS.values():
        for flags in ({}, {"num_gpu_blocks_override": 260}):
            res = sim.simulate("vllm", p8b, w, **flags)
            hits += res.prefix_hit_tokens
            preempted += res.preemptions
    assert counts["start_blocks"] > 100 and counts["remove"] > 100 and counts["_prune_block_ids"] > 0
    assert hits > 50_000 and preempted > 50
