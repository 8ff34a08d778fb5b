"""kv_managers section 4: vLLM's paged blocks (see the package docstring)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque

from enginelab.checks import check_bool, check_int

from .pool import (
    _ALLOC,
    _CACHED,
    _DECODE,
    _EVICT,
    _FREE,
    _PREEMPT,
    _PREFILL,
    _REUSED,
    _capacity,
    _CellMap,
    _common_prefix_len,
    _Live,
)

# ----------------------------------------------------------------------------------------------------------------
# 4. PagedManager: vLLM (v1)
#
# The pool is num_gpu_blocks blocks of block_size tokens (KVCacheBlock in kv_cache_utils.py). Each request has a
# block table; it holds at most one partly filled block. Prefix caching: a full block's block_hash stands for its
# tokens together with the block_hash of the block before it (hash_block_tokens), so equal block_hashes mean equal
# whole prefixes. Here a block_hash is exact, not a hash: the number _block_ids gives the pair (parent block_hash,
# the block's tokens) the first time it is seen. (A hash of the tokens could match another prefix: in CPython
# hash(-1) == hash(-2).) A prompt's blocks past its first unseen one are all unseen (their parents are new numbers),
# so they are numbered in a row and kept as a run: the first number and the tokens it covers, not a pair per
# block. BlockPool keeps cached_block_hash_to_block and a free_block_queue: freed blocks go to its
# tail (a request's blocks in reverse order, so its last block is evicted first), allocation pops the head, and a
# popped block that still has a hash is evicted from the cache then (_maybe_evict_cached_block). A cached block that
# a new request hits is "touched": ref_cnt += 1 and, if it was free, it leaves the queue.
# ----------------------------------------------------------------------------------------------------------------

_consume = deque(maxlen=0).extend  # runs an iterator to its end (map's calls at C speed)


class FreeBlockQueue:
    """vLLM's FreeKVCacheBlockQueue: the free blocks in order, freed ones joining at the tail, allocation taking
    from the head, a touched block leaving from anywhere. Kept as a list read from a head index, so a batch of
    blocks is taken with one slice and added with one extend. A block that leaves from the middle (remove) stays
    in the list as a stale entry, counted in stale[b], and is skipped when it reaches the head: a block's stale
    entries are always its earliest ones, because it has at most one live entry, the last one added. Reads like
    the ordered dict of blocks it stands for: len(), iteration in queue order, `b in queue`."""

    __slots__ = ("_q", "_head", "_n", "_stale", "_n_stale")

    def __init__(self, n_blocks: int):
        self._q = list(range(n_blocks))
        self._head = 0
        self._n = n_blocks  # live entries
        self._stale = [0] * n_blocks
        self._n_stale = 0

    def __len__(self) -> int:
        return self._n

    def __iter__(self):
        stale = self._stale[:]
        for b in self._q[self._head :]:
            if stale[b]:
                stale[b] -= 1
            else:
                yield b

    def __contains__(self, b) -> bool:
        return b in set(self)

    def extend(self, blocks: list) -> None:
        """Free blocks (none of them in the queue), in this order, at the tail."""
        self._q.extend(blocks)
        self._n += len(blocks)

    def remove(self, b: int) -> None:
        """Block b, in the queue, leaves it (a prefix hit touched it)."""
        self._stale[b] += 1
        self._n_stale += 1
        self._n -= 1
        if self._n_stale > max(64, self._n):  # more stale entries than live ones: drop them
            self._q = list(self)
            self._head = 0
            self._stale = [0] * len(self._stale)
            self._n_stale = 0

    def pop_many(self, n: int) -> list:
        """The first n blocks (at most len(self)), taken off the queue."""
        q, h = self._q, self._head
        out = q[h : h + n]
        stale = self._stale
        if self._n_stale and [stale[b] for b in out].count(0) < len(out):
            out = []
            while len(out) < n:
                b = q[h]
                h += 1
                if stale[b]:
                    stale[b] -= 1
                    self._n_stale -= 1
                else:
                    out.append(b)
        else:
            h += n
        self._n -= n
        if h > 256 and 2 * h > len(q):  # the taken entries are more than half the list: drop them
            del q[:h]
            h = 0
        self._head = h
        return out


class PagedManager:
    """vLLM paged blocks with automatic prefix caching, FCFS, preemption by recomputation."""

    name = "paged"
    record_events = True  # False: evictions append no event (a caller that never reads .events)

    def __init__(
        self, capacity_tokens: int, block_size: int = 16, enable_prefix_caching: bool = True, track_cells: bool = True
    ):
        capacity_tokens = _capacity(capacity_tokens)
        block_size = check_int(block_size, "block_size", 1, capacity_tokens)
        check_bool(enable_prefix_caching, "enable_prefix_caching")
        check_bool(track_cells, "track_cells")
        self.capacity = capacity_tokens
        self.block_size = block_size
        self.num_gpu_blocks = capacity_tokens // block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.ref_cnt = [0] * self.num_gpu_blocks
        self.block_hash: list = [None] * self.num_gpu_blocks
        self.free_block_queue = FreeBlockQueue(self.num_gpu_blocks)
        self.cached_block_hash_to_block: dict = {}
        self.req_to_blocks: dict = {}  # rid -> block table
        self._hashes: dict = {}  # rid -> block hashes of its full blocks so far
        self._block_ids: dict = {}  # (parent block_hash or -1, the block's tokens) -> its block_hash
        # runs of block_hashes numbered in a row: run i's first number and the tokens of its blocks (a list, a
        # multiple of block_size long); number runs_start[i] + j is the pair (that number - 1, block j's tokens)
        # for j >= 1 (block 0's pair is in _block_ids)
        self._run_starts: list = []
        self._run_tokens: list = []
        self._next_id = 0
        self._n_ids = 0  # pairs kept: _block_ids' and the runs' blocks
        self._ids_limit = 4 * self.num_gpu_blocks  # the pairs are pruned when they grow past this
        self._n_cached: dict = {}  # rid -> how many of its blocks are registered in the cache
        self._preempted_step = -1
        self._step = 0
        self._n_free_clean = self.num_gpu_blocks  # blocks in free_block_queue without a block_hash
        self.cells = _CellMap(capacity_tokens, track_cells)
        self.events: list = []

    def max_request_tokens(self) -> int:
        return self.num_gpu_blocks * self.block_size

    def begin_step(self, step: int) -> None:
        self.cells.settle()
        self._step = step

    def schedule(self, waiting, step: int):
        # FCFS; preempted requests were put back at the front. Scheduler.schedule admits no waiting request in
        # a step that had to preempt (`if not preempted_reqs:`), so freed blocks are not handed straight back.
        return iter(()) if self._preempted_step == step else iter(waiting)

    def _cells(self, block: int, lo: int = 0, hi: int | None = None):
        base = block * self.block_size
        return range(base + lo, base + (self.block_size if hi is None else hi))

    def _block_hashes(self, live: _Live) -> list:
        """hash_block_tokens: one block_hash per full block, chained through the parent block's."""
        hs = self._hashes.get(live.rid)
        if hs is None:
            hs = self._hashes[live.rid] = []
        bs, toks = self.block_size, live.tokens
        end = len(toks) // bs * bs
        i = len(hs) * bs
        if i >= end:
            return hs
        get, starts = self._block_ids.get, self._run_starts
        parent = hs[-1] if hs else -1
        while i < end:
            r = bisect_right(starts, parent) - 1  # a run holding parent's next block: as many blocks as match
            if r >= 0:
                run = self._run_tokens[r]
                at = (parent - starts[r] + 1) * bs
                n = min(len(run) - at, end - i)
                if n > 0:
                    if run[at : at + n] != toks[i : i + n]:
                        n = _common_prefix_len(run[at : at + n], toks[i : i + n]) // bs * bs
                    if n:
                        hs.extend(range(parent + 1, parent + 1 + n // bs))
                        parent += n // bs
                        i += n
                        continue
            h = get((parent, tuple(toks[i : i + bs])))
            if h is None:
                break
            hs.append(h)
            parent = h
            i += bs
        else:
            return hs
        # toks[i:end] is unseen from its first block: a new run
        nxt = self._next_id
        m = (end - i) // bs
        self._block_ids[(parent, tuple(toks[i : i + bs]))] = nxt
        if m > 1:
            starts.append(nxt)
            self._run_tokens.append(toks[i:end])
        hs.extend(range(nxt, nxt + m))
        self._next_id = nxt + m
        self._n_ids += m
        if self._n_ids > self._ids_limit:
            self._prune_block_ids()
        return hs

    def _prune_block_ids(self) -> None:
        """Forget the pairs that no block and no request's block hashes carry. A run keeps the span from its first
        to its last carried number, or, when fewer than a quarter of that span is carried, becomes a pair per
        carried number: what is kept stays within 4 x the pool's blocks and the requests' full blocks. A
        forgotten prefix seen again gets a new number; no cached block can still chain from the old one (a block
        is freed, so evicted, no earlier than its children)."""
        keep = set(self.block_hash)
        keep.update(*self._hashes.values())
        ids = {k: h for k, h in self._block_ids.items() if h in keep}
        keep.discard(None)
        carried = sorted(keep)
        bs = self.block_size
        starts, runs = [], []
        n_run = 0
        for n0, run in zip(self._run_starts, self._run_tokens):
            m = len(run) // bs
            lo, hi = bisect_right(carried, n0), bisect_left(carried, n0 + m)  # its numbers n0 + 1 .. n0 + m - 1
            if lo == hi:
                continue
            first, last = carried[lo], carried[hi - 1]
            if last - first + 2 > 4 * (hi - lo):
                for c in carried[lo:hi]:
                    ids[(c - 1, tuple(run[(c - n0) * bs : (c - n0 + 1) * bs]))] = c
                continue
            if first - 1 > n0 or last + 1 < n0 + m:
                run = run[(first - 1 - n0) * bs : (last + 1 - n0) * bs]
            starts.append(first - 1)
            runs.append(run)
            n_run += last - first + 2
        self._block_ids, self._run_starts, self._run_tokens = ids, starts, runs
        self._n_ids = len(ids) + n_run
        self._ids_limit = max(4 * self.num_gpu_blocks, 2 * self._n_ids)

    def _pop_free(self) -> int:
        """BlockPool.get_new_blocks: take the head of free_block_queue, evicting its cached hash if it has one."""
        table: list = []
        self._pop_free_into(1, table)
        return table[0]

    def _pop_free_into(self, n: int, table: list) -> None:
        """_pop_free n times, appending the blocks to table."""
        new = self.free_block_queue.pop_many(n)
        block_hash, ref_cnt, cached = self.block_hash, self.ref_cnt, self.cached_block_hash_to_block
        noted = self.record_events or self.cells.enabled
        clean = 0
        for b in new:
            h = block_hash[b]
            if h is None:
                clean += 1
            else:  # _maybe_evict_cached_block: the block forgets its block_hash
                if cached.get(h) == b:
                    del cached[h]
                block_hash[b] = None
                if noted:
                    self._note_evict(b)
            ref_cnt[b] = 1
        table.extend(new)
        self._n_free_clean -= clean

    def _note_evict(self, b: int) -> None:
        """The evict event and the block's cells (for the frames)."""
        track, bs = self.cells.enabled, self.block_size
        if self.record_events:
            self.events.append({"type": "evict", "rid": self.cells.owner[b * bs] if track else -1, "cells": bs})
        if track:
            self.cells.set(self._cells(b), _EVICT)

    def _cache_full_blocks(self, live: _Live) -> None:
        """cache_blocks: register every newly full block of the request under its block_hash."""
        if not self.enable_prefix_caching:
            return
        hs = self._block_hashes(live)
        start = self._n_cached.get(live.rid, 0)
        block_hash, register = self.block_hash, self.cached_block_hash_to_block.setdefault
        new, new_hs = self.req_to_blocks[live.rid][start : len(hs)], hs[start:]
        if [block_hash[b] for b in new].count(None) == len(new):  # new blocks have none
            for b, h in zip(new, new_hs):
                block_hash[b] = h
            _consume(map(register, new_hs, new))
        else:
            for b, h in zip(new, new_hs):
                if block_hash[b] is None:
                    block_hash[b] = h
                    register(h, b)
        self._n_cached[live.rid] = len(hs)

    def admit(self, live: _Live, step: int):
        n = len(live.tokens)
        bs = self.block_size
        # get_computed_blocks: the longest run of cached full blocks; at most n - 1 tokens may be hits, because
        # the last prompt token must be computed to produce logits
        computed = []
        if self.enable_prefix_caching:
            cached = self.cached_block_hash_to_block
            for h in self._block_hashes(live)[: (n - 1) // bs]:
                b = cached.get(h)
                if b is None:
                    break
                computed.append(b)
        n_hit = len(computed) * bs
        n_new_blocks = -(-n // bs) - len(computed)
        # allocate_slots: enough free blocks, not counting cached free blocks this request is about to touch
        ref_cnt = self.ref_cnt
        evictable_hits = [ref_cnt[b] for b in computed].count(0)
        if len(self.free_block_queue) - evictable_hits < n_new_blocks:
            return None
        track = self.cells.enabled
        for b in computed:  # touch
            if ref_cnt[b] == 0:
                self.free_block_queue.remove(b)
            ref_cnt[b] += 1
            if track:
                self.cells.set(self._cells(b), _REUSED, live.rid)
        table = list(computed)
        self._pop_free_into(n_new_blocks, table)
        self.req_to_blocks[live.rid] = table
        self._n_cached[live.rid] = len(computed)
        # cells: computed tokens, then the unfilled tail of the last block
        for i in range(len(computed), len(table) if track else 0):
            lo_tok = i * bs
            filled = min(bs, n - lo_tok)
            self.cells.set(self._cells(table[i], 0, filled), _PREFILL, live.rid)
            if filled < bs:
                self.cells.set(self._cells(table[i], filled), _ALLOC, live.rid)
        self._cache_full_blocks(live)
        return n_hit, n - n_hit

    def _free_request(self, live: _Live) -> list:
        """KVCacheManager.free: blocks go back in reverse order; a block with ref_cnt 0 joins the queue's tail."""
        table = self.req_to_blocks.pop(live.rid)
        self._n_cached.pop(live.rid, None)
        ref_cnt, block_hash = self.ref_cnt, self.block_hash
        if [ref_cnt[b] for b in table].count(1) == len(table):  # no other request shares a block: all are freed
            for b in table:
                ref_cnt[b] = 0
            freed = table[::-1]
            clean = [block_hash[b] for b in table].count(None)
        else:
            freed = []
            clean = 0
            for b in reversed(table):
                ref_cnt[b] -= 1
                if not ref_cnt[b]:
                    freed.append(b)
                    if block_hash[b] is None:
                        clean += 1
        self.free_block_queue.extend(freed)
        self._n_free_clean += clean
        return table

    def decode(self, live: _Live, running: list) -> list:
        """Place the token just appended to live.tokens; when the last block is full, a new block is needed. If
        none is free, preempt the most recently admitted running request (Scheduler.schedule:
        self.running.pop()), which may be this one. Returns the preempted requests."""
        preempted = []
        n = len(live.tokens) - 1  # position of the new token
        if n % self.block_size == 0:
            while not self.free_block_queue:
                victim = max(running, key=lambda r: r.order)
                running.remove(victim)
                preempted.append(victim)
                self._preempt(victim)
                if victim is live:
                    return preempted
            table = self.req_to_blocks[live.rid]
            self._pop_free_into(1, table)
            if self.cells.enabled:
                self.cells.set(self._cells(table[-1]), _ALLOC, live.rid)
        if self.cells.enabled:
            b = self.req_to_blocks[live.rid][n // self.block_size]
            self.cells.set((b * self.block_size + n % self.block_size,), _DECODE, live.rid)
        if (n + 1) % self.block_size == 0:
            self._cache_full_blocks(live)
        return preempted

    def start_blocks(self, lives: list) -> None:
        """decode's new blocks for several requests at once, when there is a free block for each (so nobody is
        preempted): each request whose next token starts a block takes one from the head of free_block_queue, in
        the order given, as decode would one request after another. The tokens are not placed: a caller that
        tracks no cells and whose blocks hold more than one token (so the token does not also fill the block)
        need not call decode for them."""
        if len(lives) > len(self.free_block_queue):
            raise ValueError(f"start_blocks: {len(lives)} blocks wanted, {len(self.free_block_queue)} free")
        new: list = []
        self._pop_free_into(len(lives), new)
        tables = self.req_to_blocks
        for live, b in zip(lives, new):
            tables[live.rid].append(b)
            if self.cells.enabled:
                self.cells.set(self._cells(b), _ALLOC, live.rid)

    def _preempt(self, live: _Live) -> None:
        self._preempted_step = self._step
        table = self._free_request(live)
        self._hashes.pop(live.rid, None)
        freed = [b for b in table if self.ref_cnt[b] == 0]
        self.events.append({"type": "preempt", "rid": live.rid, "cells": len(freed) * self.block_size})
        for b in freed if self.cells.enabled else ():
            if self.block_hash[b] is None:
                self.cells.set(self._cells(b), _PREEMPT)
            else:
                self.cells.set(self._cells(b), _CACHED)  # its full blocks stay cached: the recompute may hit them

    def finish(self, live: _Live, step: int) -> None:
        table = self._free_request(live)
        self._hashes.pop(live.rid, None)
        if self.cells.enabled:
            for b in table:
                if self.ref_cnt[b] == 0:
                    code = _CACHED if self.block_hash[b] is not None else _FREE
                    self.cells.set(self._cells(b), code, -1 if code == _FREE else None)

    def cells_used(self) -> int:
        return (self.num_gpu_blocks - self._n_free_clean) * self.block_size

    def check_invariants(self) -> None:
        held: dict = {}
        for table in self.req_to_blocks.values():
            for b in table:
                held[b] = held.get(b, 0) + 1
        queue = list(self.free_block_queue)
        free = set(queue)
        assert len(free) == len(queue) == len(self.free_block_queue), "a block is in the free queue twice"
        for b in range(self.num_gpu_blocks):
            assert self.ref_cnt[b] >= 0, f"ref_cnt of block {b} is negative"
            assert self.ref_cnt[b] == held.get(b, 0), f"ref_cnt of block {b} does not match the block tables"
            assert (b in free) == (self.ref_cnt[b] == 0), f"block {b} free-queue mismatch"
        assert self._n_free_clean == sum(1 for b in queue if self.block_hash[b] is None)
        for h, b in self.cached_block_hash_to_block.items():
            assert self.block_hash[b] == h, "cache map points at a block with another hash"
        for rid, table in self.req_to_blocks.items():
            assert len(set(table)) == len(table), f"request {rid} holds a block twice"
