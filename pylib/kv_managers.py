"""kv_managers: three ways to manage one pool of KV-cache cells, simulated step by step.

A serving engine keeps the attention keys and values (the KV cache) of every token it has processed in a fixed
pool of GPU memory. How it hands out that pool decides how many requests run at once and how much prompt work it
can skip when a new prompt starts with tokens it has already seen. This module simulates three designs on the same
pool of `capacity_tokens` cells (one cell = the KV of one token, all layers):

    SlotManager   llama.cpp   llama-server's `n_parallel` slots over one context (tools/server, src/llama-kv-cache.cpp)
    PagedManager  vLLM        16-token blocks, block tables, hashed prefix blocks (vllm/v1/core/kv_cache_manager.py,
                              block_pool.py, single_type_kv_cache_manager.py, sched/scheduler.py)
    RadixManager  SGLang      a token-granular radix tree shared by all requests (python/sglang/srt/mem_cache/
                              radix_cache.py, managers/schedule_policy.py)

They are simplified on purpose (no chunked prefill, no RAM/CPU tiers, one forward pass per step), but each keeps
the rule that decides its cache behaviour, under the engine's own names. Everything here is standard-library
Python, so it runs the same in CPython and in the browser (Pyodide).

Sections, top to bottom:
  1. Requests                 what arrives: prompt token ids, reply, session, the turn it follows
  2. The cell pool            per-cell owner/state bookkeeping shared by all managers, and the frame format
  3. SlotManager              llama.cpp
  4. PagedManager             vLLM
  5. RadixManager             SGLang
  6. simulate                 the step loop, the counting conventions, the summary
  7. Workloads and compare    the module's chat workload, exercise 3, the agent workload

The step (same loop for all three managers, see `simulate`)
------------------------------------------------------------
Time advances in integer steps; each step is one forward pass of the model:
  1. decode: every running request that was prefilled in an earlier step produces one reply token, which takes one
     new cell. A request that produces its last token finishes and hands its cells back to its manager; a
     follow-up turn waiting for it (think = 0) arrives at once.
  2. admit: waiting requests that have arrived (and whose previous turn has finished) are admitted in the manager's
     schedule order, until one does not fit; each admitted request reuses what its manager has cached and computes
     the rest of its prompt in this same step (prefill).
A reply token's KV is counted as written in the step that produces it, so a request with a prompt of P tokens and a
reply of R tokens ends up holding P + R cells. (Real engines never write the KV of the very last sampled token; we
ignore that one-token difference to keep the arithmetic readable.) Each engine's own timing rules sit inside its
manager: llama-server sees slots and its queue as they were at the top of the step; vLLM admits nothing in a step
in which it had to preempt; SGLang adds a prefilled prompt to its tree only after the step.

peak_concurrency counts, for each step, the requests that held KV cells during it: those that decoded in part 1
(including any that finished there) plus those admitted in part 2; the summary reports the maximum over steps.
This is the same rule for every manager. With it, a step in which one turn ends and the same user's next turn
starts counts both, because paged blocks and radix cells freed in part 1 are available to part 2. llama-server
binds waiting tasks to idle slots at the top of its loop, before it decodes the batch and releases finished slots,
so a slot released in step t takes its next request in step t+1: slot concurrency can never exceed n_parallel.

Frame format (what a view animates; recorded when `simulate(..., record_frames=True)`)
-------------------------------------------------------------------------------------
run["frames"] is a list with one dict per simulated step:
    {"step": t,                    # step index (idle stretches with nothing running or waiting are skipped)
     "state": "....cccRRPPPd..",   # str, exactly capacity_tokens characters, one per cell (codes below)
     "owner": [-1, -1, 3, ...],    # list[int], capacity_tokens entries: request id per cell, -1 exactly when
                                   # the cell is "." (E and X cells keep the id of the request whose KV went)
     "running": [3, 5],            # ids of the requests holding cells after the step, in admission order
     "waiting": [6],               # ids of requests that have arrived but are not admitted yet
     "events": [...],              # what happened in the step, in order (see below)
     "tree": [[1, 0, 48, 2, 0], ...]}  # RadixManager only: the radix tree after the step, one
                                   # [node id, parent id, tokens on its edge, lock_ref, owner] per node, parents
                                   # before children (the root, id 0, is left out); see RadixManager.tree_rows
Cell codes (upper case = it happened in this step; the next frame shows the lower-case form):
    "."       free
    "c"       cached: holds KV that no running request is using (idle slot, a freed block that still has a
              block_hash, an unlocked radix node); it can be reused by a prefix hit or dropped to make room
    "r" "R"   reused: a running request's prompt cell that came from the cache instead of being computed
    "p" "P"   prefilled: computed by the running request's prefill
    "d" "D"   decoded: a reply token written by the running request
    "a"       allocated but not written yet: the unfilled tail of a paged block (internal fragmentation)
    "E"       evicted in this step: cached KV was dropped to make room, or cut off a slot's old sequence where
              the new prompt differs (it is free in the next frame)
    "X"       freed in this step because its request was preempted (free in the next frame; a preempted
              request's full blocks that have a block_hash become "c" instead, and its recompute may hit them)
owner is the request that most recently took the cell: for a prefix shared by several running requests that is
the last one admitted; for a cached cell it is the last request that used it.
Events are dicts with a "type" and a request id "rid":
    {"type": "arrive", "rid"}
    {"type": "admit", "rid", "reused": n, "computed": n}              prefill of n computed tokens this step
    {"type": "finish", "rid"}
    {"type": "evict", "rid": whose KV it was, "cells": n}           cached KV dropped to make room
    {"type": "preempt", "rid", "cells": n}                          freed now, recomputed later (vLLM)
    {"type": "reject", "rid", "reason": str}
A 384-cell grid for three managers over ~100 steps is a few hundred kilobytes of JSON; a view draws the grid once
and only changes each cell's class per frame.

Bounds (bad arguments raise ValueError naming the argument): a pool of at most MAX_CAPACITY_TOKENS = 2,097,152
cells; frames recorded only for pools of at most MAX_FRAME_CELLS = 65,536 cells and MAX_RECORDED_CELLS = 8,388,608
cells over all frames; a workload of at most MAX_WORKLOAD_TOKENS = 33,554,432 prompt and reply tokens, of which at
most MAX_REPLY_TOKENS = 1,048,576 reply tokens (each takes a step of a few microseconds).
"""

from __future__ import annotations

import heapq
import random
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from enginelab.checks import brief, check_bool, check_int, check_number, is_int
from enginelab.checks import check as _check

__all__ = [
    "Request",
    "SlotManager",
    "PagedManager",
    "RadixManager",
    "simulate",
    "compare",
    "chat_workload",
    "radix_loses_workload",
    "agent_workload",
    "CELL_CODES",
    "RADIX_LOSES_CAPACITY",
    "AGENT_FIGURE_PRESET",
    "MAX_CAPACITY_TOKENS",
    "MAX_FRAME_CELLS",
    "MAX_RECORDED_CELLS",
    "MAX_WORKLOAD_TOKENS",
    "MAX_REPLY_TOKENS",
]

# Bounds on what a simulation may be asked for. Bad arguments raise ValueError naming the argument; these keep
# memory bounded and the step loop (one step per reply token, a few microseconds each) to seconds.
MAX_CAPACITY_TOKENS = 1 << 21  # cells in a pool (2,097,152): more than an 80 GB GPU holds for an 8B model
MAX_SLOTS = 4096  # llama-server -np
MAX_FRAME_CELLS = 1 << 16  # record_frames: the largest pool whose frames are recorded (65,536 cells)
MAX_RECORDED_CELLS = 1 << 23  # record_frames: cells over all frames (8,388,608, about 80 MB of frames)
MAX_WORKLOAD_TOKENS = 1 << 25  # prompt + reply tokens over all requests of one simulation (33,554,432)
MAX_REPLY_TOKENS = 1 << 20  # reply tokens over all requests (1,048,576): each takes a step, ~3 us each
MAX_REQUESTS = 1 << 20  # requests in one workload
MAX_STEP = 1 << 40  # arrival and think times, and max_steps


def _capacity(capacity_tokens) -> int:
    return check_int(capacity_tokens, "capacity_tokens", 1, MAX_CAPACITY_TOKENS)


# ----------------------------------------------------------------------------------------------------------------
# 1. Requests
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class Request:
    """One request as a client sends it.

    rid      unique id (an int; frames and events refer to requests by it)
    arrival  the step at which it reaches the server
    prompt   the prompt as token ids
    reply    the reply as token ids, or just its length (then the tokens are synthesised and unique to this request)
    session  the user or conversation it belongs to (used by views and by workloads, never by the managers)
    follows  rid of the earlier turn this one continues; it is not admitted before that one has finished, because
             a user cannot send turn 2 before reading reply 1 (None for a first turn)
    think    for a follow-up: steps between the previous turn finishing and this one arriving (0 = the same step)
    """

    rid: int
    arrival: int
    prompt: Sequence[int]
    reply: Sequence[int] | int
    session: str = ""
    follows: int | None = None
    think: int = 0

    def reply_tokens(self) -> tuple:
        if isinstance(self.reply, int):
            # Synthetic reply ids: negative, so they never collide with real token ids or with another request.
            return tuple(-(self.rid * 1_000_003 + i + 1) for i in range(self.reply))
        return tuple(self.reply)


def _check_request(r, i: int) -> tuple:
    """ValueError naming the field of requests[i] that is not usable; returns (prompt tokens, reply tokens)."""
    if not (isinstance(r, Request)):
        _check(False, f"requests[{i}]", f"must be a kv_managers.Request, got {brief(r)}")
    what = f"requests[{i}]"
    if not (is_int(r.rid) and abs(r.rid) < 1 << 62):
        _check(False, f"{what}.rid", f"must be an integer, got {brief(r.rid)}")
    check_int(r.arrival, f"{what}.arrival", 0, MAX_STEP)
    check_int(r.think, f"{what}.think", 0, MAX_STEP)
    if not (r.follows is None or is_int(r.follows)):
        _check(False, f"{what}.follows", f"must be None or the rid of an earlier turn, got {brief(r.follows)}")
    if not (isinstance(r.session, str)):
        _check(False, f"{what}.session", f"must be a string, got {brief(r.session)}")
    seqs = (list, tuple, range)
    if not (isinstance(r.prompt, seqs)):
        _check(False, f"{what}.prompt", f"must be a list or tuple of token ids, got {brief(r.prompt)}")
    if not (len(r.prompt) <= MAX_CAPACITY_TOKENS):
        _check(False, f"{what}.prompt", f"has {len(r.prompt):,} tokens; at most {MAX_CAPACITY_TOKENS:,}")
    if is_int(r.reply):
        n_reply = check_int(r.reply, f"{what}.reply", 0, MAX_REPLY_TOKENS)
    else:
        if not (isinstance(r.reply, seqs)):
            _check(
                False,
                f"{what}.reply",
                f"must be a reply length (an integer >= 0) or a list of token ids, got {brief(r.reply)}",
            )
        n_reply = len(r.reply)
        _check(n_reply <= MAX_REPLY_TOKENS, f"{what}.reply", f"has {n_reply:,} tokens; at most {MAX_REPLY_TOKENS:,}")
    for name, seq in (("prompt", r.prompt), ("reply", () if is_int(r.reply) else r.reply)):
        try:
            hash(tuple(seq))  # token ids key the prefix caches: they must be hashable (ints)
        except TypeError:
            _check(False, f"{what}.{name}", "token ids must be integers (hashable values)")
    return len(r.prompt), n_reply


class _Live:
    """The simulator's per-request state (managers read .tokens / .rid / .remaining)."""

    __slots__ = (
        "req",
        "rid",
        "reply",
        "tokens",
        "n_generated",
        "admitted_step",
        "prefilled_step",
        "order",
        "queued_in_decode",
    )

    def __init__(self, req: Request):
        self.req = req
        self.rid = req.rid
        self.reply = req.reply_tokens()
        self.tokens = list(req.prompt)  # prompt + reply tokens produced so far
        self.n_generated = 0
        self.admitted_step = -1
        self.prefilled_step = -1
        self.order = 0  # admission counter, for "most recently admitted"
        self.queued_in_decode = -1  # step in which it was released by its previous turn finishing

    @property
    def remaining(self) -> int:  # reply tokens still to be decoded
        return len(self.reply) - self.n_generated


def _common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix; compares whole chunks at C speed, then narrows down in Python."""
    n = min(len(a), len(b))
    if list(a[:n]) == list(b[:n]):
        return n
    lo = 0
    step = 64
    while lo + step <= n and list(a[lo : lo + step]) == list(b[lo : lo + step]):
        lo += step
    while lo < n and a[lo] == b[lo]:
        lo += 1
    return lo


# ----------------------------------------------------------------------------------------------------------------
# 2. The cell pool: who holds each cell, in what state. Shared bookkeeping, used only to draw frames and to check
#    invariants; the managers' decisions never read it.
# ----------------------------------------------------------------------------------------------------------------

CELL_CODES = {
    ".": "free",
    "c": "cached",
    "r": "reused",
    "p": "prefilled",
    "d": "decoded",
    "a": "allocated",
    "R": "reused this step",
    "P": "prefilled this step",
    "D": "decoded this step",
    "E": "evicted this step",
    "X": "freed by preemption this step",
}
_FREE, _CACHED, _ALLOC = ord("."), ord("c"), ord("a")
_REUSED, _PREFILL, _DECODE = ord("R"), ord("P"), ord("D")
_EVICT, _PREEMPT = ord("E"), ord("X")


class _CellMap:
    """owner + state per cell. Upper-case codes are remembered in `touched` and settled at the next step, so the
    per-step cost is proportional to what changed, never to the pool size. Disabled (enabled=False) in benchmarks."""

    def __init__(self, capacity: int, enabled: bool = True):
        self.enabled = enabled
        self.capacity = capacity
        self.owner = [-1] * capacity if enabled else []
        self.state = bytearray(b"." * capacity) if enabled else bytearray()
        self.touched: list = []

    def set(self, cells, code: int, owner: int | None = None) -> None:
        if not self.enabled:
            return
        st, ow = self.state, self.owner
        for c in cells:
            st[c] = code
            if owner is not None:
                ow[c] = owner
        if code >= 65 and code <= 90:  # upper case: settle later
            self.touched.extend(cells)

    def settle(self) -> None:
        """Start of a step: this-step codes become steady ones (E and X become free)."""
        if not self.enabled:
            return
        st, ow = self.state, self.owner
        for c in self.touched:
            code = st[c]
            if code == _EVICT or code == _PREEMPT:
                st[c] = _FREE
                ow[c] = -1
            elif 65 <= code <= 90:
                st[c] = code + 32
        self.touched = []


# ----------------------------------------------------------------------------------------------------------------
# 3. SlotManager: llama.cpp's llama-server
#
# llama-server runs `n_parallel` slots (-np). Each slot is one sequence id in the KV cache
# (src/llama-kv-cache.cpp). With the automatic slot count (-np -1 -> 4) the cache is unified (--kv-unified): one
# stream of n_ctx cells shared by all slots. With an explicit -np N the cache has one stream per slot of
# n_ctx / N cells (n_ctx_seq). A slot keeps the tokens of the last sequence it ran (slot.prompt.tokens), so a
# follow-up that lands in the same slot only computes the tokens after the common prefix (cache_prompt).
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class _Slot:
    id: int
    tokens: list = field(default_factory=list)  # cached sequence (slot.prompt.tokens)
    cells: list = field(default_factory=list)  # the cell of each cached token
    rid: int | None = None  # running request, None when idle
    last_rid: int = -1  # the request whose KV the slot holds
    t_last_used: int = -1
    idle_from: int = 0  # first step at which this slot can take a task


class SlotManager:
    """llama.cpp slots.

    n_parallel=None is llama-server's automatic count: 4 slots sharing one unified KV buffer, so one request may
    use the whole context. An explicit n_parallel splits capacity_tokens evenly, one private range per slot.
    kv_unified (--kv-unified) shares one buffer between the slots; None = unified exactly when n_parallel is None.
    slot_prompt_similarity is --slot-prompt-similarity (default 0.1).
    """

    name = "slots"

    def __init__(
        self,
        capacity_tokens: int,
        n_parallel: int | None = None,
        slot_prompt_similarity: float = 0.1,
        track_cells: bool = True,
        kv_unified: bool | None = None,
    ):
        capacity_tokens = _capacity(capacity_tokens)
        if n_parallel is not None:
            n_parallel = check_int(n_parallel, "n_parallel", 1, min(MAX_SLOTS, capacity_tokens))
        slot_prompt_similarity = check_number(slot_prompt_similarity, "slot_prompt_similarity", 0.0, 1.0)
        check_bool(track_cells, "track_cells")
        if kv_unified is not None:
            check_bool(kv_unified, "kv_unified")
        self.capacity = capacity_tokens
        self.kv_unified = n_parallel is None if kv_unified is None else kv_unified
        self.n_parallel = 4 if n_parallel is None else n_parallel
        # n_ctx per sequence: the whole buffer when unified, an even share otherwise (llama-context.cpp n_ctx_seq)
        self.n_ctx_slot = capacity_tokens if self.kv_unified else capacity_tokens // self.n_parallel
        self.slot_prompt_similarity = slot_prompt_similarity
        self.slots = [_Slot(i) for i in range(self.n_parallel)]
        # free cells: one list for the unified stream, or one per slot; pop() takes the lowest index first
        if self.kv_unified:
            self._free = [list(range(capacity_tokens - 1, -1, -1))]
        else:
            n = self.n_ctx_slot
            self._free = [list(range((i + 1) * n - 1, i * n - 1, -1)) for i in range(self.n_parallel)]
        self.reserved = [0] * len(self._free)  # cells promised to running replies (n_predict), per stream
        self._by_rid: dict = {}
        self.cells = _CellMap(capacity_tokens, track_cells)
        self.events: list = []

    # --- helpers ---
    def _stream(self, slot: _Slot) -> int:
        return 0 if self.kv_unified else slot.id

    def max_request_tokens(self) -> int:
        return self.n_ctx_slot

    def begin_step(self, step: int) -> None:
        self.cells.settle()

    def schedule(self, waiting, step: int):
        # Tasks are served in arrival order (server_queue). The server binds tasks to slots at the top of its
        # loop, so a follow-up released by a reply that finished in this step's decode is seen next step.
        return (w for w in waiting if w.queued_in_decode != step)

    # --- get_available_slot (tools/server): the most similar idle slot, else the least recently used one ---
    def _pick_slot(self, tokens: list, step: int) -> _Slot | None:
        idle = [s for s in self.slots if s.rid is None and s.idle_from <= step]
        if not idle:
            return None
        best, sim_best = None, 0.0
        for s in idle:
            if not s.tokens:
                continue  # a slot without cached tokens is skipped by the similarity search
            sim = _common_prefix_len(s.tokens, tokens) / len(tokens)
            if sim > sim_best and sim > self.slot_prompt_similarity:
                best, sim_best = s, sim
        if best is None:
            best = min(idle, key=lambda s: (s.t_last_used, s.id))  # least recently used (first on ties)
        return best

    def _clear(self, slot: _Slot) -> None:
        """slot.prompt_clear(): drop the slot's cached KV (llama_memory_seq_rm(seq_id, -1, -1))."""
        if slot.cells:
            self.events.append({"type": "evict", "rid": slot.last_rid, "cells": len(slot.cells)})
            self.cells.set(slot.cells, _EVICT)
            self._free[self._stream(slot)].extend(reversed(slot.cells))
        slot.tokens, slot.cells = [], []

    def admit(self, live: _Live, step: int):
        tokens = live.tokens
        slot = self._pick_slot(tokens, step)
        if slot is None:
            return None  # every slot is busy: the task is deferred
        # cache_prompt: keep the common prefix; at least one prompt token is always evaluated (for the logits)
        n_past = min(_common_prefix_len(slot.tokens, tokens), len(tokens) - 1)
        need = len(tokens) - n_past + live.remaining
        k = self._stream(slot)
        avail = len(self._free[k]) + (len(slot.cells) - n_past) - self.reserved[k]
        victims = []
        if avail < need and self.kv_unified:
            # try_clear_idle_slots(): when the unified buffer is full, purge idle slots one by one, in slot order
            for s in self.slots:
                if avail >= need:
                    break
                if s is not slot and s.rid is None and s.cells:
                    victims.append(s)
                    avail += len(s.cells)
        if avail < need:
            return None  # not enough room yet: wait for running requests to finish
        for s in victims:
            self._clear(s)
        # llama_memory_seq_rm(slot.id, n_past, -1): drop the part of the old sequence that differs
        tail = slot.cells[n_past:]
        if tail:
            self.cells.set(tail, _EVICT)
            self._free[k].extend(reversed(tail))
        slot.tokens, slot.cells = slot.tokens[:n_past], slot.cells[:n_past]
        self.cells.set(slot.cells, _REUSED, live.rid)
        free = self._free[k]  # pop() one cell per token, lowest index first, in one slice
        new = free[len(free) - (len(tokens) - n_past) :][::-1]
        del free[len(free) - (len(tokens) - n_past) :]
        self.cells.set(new, _PREFILL, live.rid)
        slot.tokens = list(tokens)
        slot.cells.extend(new)
        slot.rid = slot.last_rid = live.rid
        slot.t_last_used = step
        self.reserved[k] += live.remaining
        self._by_rid[live.rid] = slot
        return n_past, len(tokens) - n_past

    def decode(self, live: _Live, running: list) -> list:
        slot = self._by_rid[live.rid]
        k = self._stream(slot)
        cell = self._free[k].pop()  # always there: reserved at admission
        self.reserved[k] -= 1
        slot.tokens.append(live.tokens[-1])
        slot.cells.append(cell)
        self.cells.set((cell,), _DECODE, live.rid)
        return []

    def decode_many(self, live: _Live, n: int) -> None:
        """decode() for the last n tokens of live.tokens at once (a time-based simulation applies a reply's
        tokens in bulk; the cells were reserved at admission)."""
        slot = self._by_rid[live.rid]
        k = self._stream(slot)
        free = self._free[k]
        cells = free[len(free) - n :][::-1]
        del free[len(free) - n :]
        self.reserved[k] -= n
        slot.tokens.extend(live.tokens[len(live.tokens) - n :])
        slot.cells.extend(cells)
        self.cells.set(cells, _DECODE, live.rid)

    def finish(self, live: _Live, step: int) -> None:
        slot = self._by_rid.pop(live.rid)
        self.reserved[self._stream(slot)] -= live.remaining
        slot.rid = None
        slot.t_last_used = step
        slot.idle_from = step + 1  # the server binds tasks to slots before it decodes: usable next step
        self.cells.set(slot.cells, _CACHED)

    def cells_used(self) -> int:
        return sum(len(s.cells) for s in self.slots)

    def check_invariants(self) -> None:
        seen = set()
        for s in self.slots:
            assert len(s.cells) == len(s.tokens), "slot tokens and cells out of step"
            assert len(s.cells) <= self.n_ctx_slot, "slot exceeds its context"
            for c in s.cells:
                assert c not in seen, f"cell {c} owned twice"
                seen.add(c)
        for f in self._free:
            for c in f:
                assert c not in seen, f"cell {c} both free and owned"
                seen.add(c)
        assert len(seen) == self.capacity - (0 if self.kv_unified else self.capacity % self.n_parallel), "cells lost"
        assert all(r >= 0 for r in self.reserved), "negative reservation"
        for k, f in enumerate(self._free):
            assert len(f) >= self.reserved[k], "reservation exceeds free cells"


# ----------------------------------------------------------------------------------------------------------------
# 4. PagedManager: vLLM (v1)
#
# The pool is num_gpu_blocks blocks of block_size tokens (KVCacheBlock in kv_cache_utils.py). Each request has a
# block table; it holds at most one partly filled block. Prefix caching: a full block's block_hash hashes its
# tokens together with the hash of the block before it, so equal hashes mean equal whole prefixes
# (hash_block_tokens). BlockPool keeps cached_block_hash_to_block and a free_block_queue: freed blocks go to its
# tail (a request's blocks in reverse order, so its last block is evicted first), allocation pops the head, and a
# popped block that still has a hash is evicted from the cache then (_maybe_evict_cached_block). A cached block that
# a new request hits is "touched": ref_cnt += 1 and, if it was free, it leaves the queue.
# ----------------------------------------------------------------------------------------------------------------


class PagedManager:
    """vLLM paged blocks with automatic prefix caching, FCFS, preemption by recomputation."""

    name = "paged"

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
        self.free_block_queue: OrderedDict = OrderedDict((b, None) for b in range(self.num_gpu_blocks))
        self.cached_block_hash_to_block: dict = {}
        self.req_to_blocks: dict = {}  # rid -> block table
        self._hashes: dict = {}  # rid -> block hashes of its full blocks so far
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
        """hash_block_tokens: one hash per full block, chained through the parent block's hash."""
        hs = self._hashes.setdefault(live.rid, [])
        bs, toks = self.block_size, live.tokens
        parent = hs[-1] if hs else None
        for i in range(len(hs), len(toks) // bs):
            parent = hash((parent, tuple(toks[i * bs : (i + 1) * bs])))
            hs.append(parent)
        return hs

    def _pop_free(self) -> int:
        """BlockPool.get_new_blocks: take the head of free_block_queue, evicting its cached hash if it has one."""
        b, _ = self.free_block_queue.popitem(last=False)
        h = self.block_hash[b]
        if h is None:
            self._n_free_clean -= 1
        else:
            if self.cached_block_hash_to_block.get(h) == b:
                del self.cached_block_hash_to_block[h]
            self.block_hash[b] = None
            self.events.append(
                {
                    "type": "evict",
                    "rid": self.cells.owner[b * self.block_size] if self.cells.enabled else -1,
                    "cells": self.block_size,
                }
            )
            if self.cells.enabled:
                self.cells.set(self._cells(b), _EVICT)
        self.ref_cnt[b] = 1
        return b

    def _cache_full_blocks(self, live: _Live) -> None:
        """cache_blocks: register every newly full block of the request under its block_hash."""
        if not self.enable_prefix_caching:
            return
        hs = self._block_hashes(live)
        table = self.req_to_blocks[live.rid]
        for i in range(self._n_cached.get(live.rid, 0), len(hs)):
            b = table[i]
            if self.block_hash[b] is None:
                self.block_hash[b] = hs[i]
                self.cached_block_hash_to_block.setdefault(hs[i], b)
        self._n_cached[live.rid] = len(hs)

    def admit(self, live: _Live, step: int):
        n = len(live.tokens)
        bs = self.block_size
        # get_computed_blocks: the longest run of cached full blocks; at most n - 1 tokens may be hits, because
        # the last prompt token must be computed to produce logits
        computed = []
        if self.enable_prefix_caching:
            for h in self._block_hashes(live)[: (n - 1) // bs]:
                b = self.cached_block_hash_to_block.get(h)
                if b is None:
                    break
                computed.append(b)
        n_hit = len(computed) * bs
        n_new_blocks = -(-n // bs) - len(computed)
        # allocate_slots: enough free blocks, not counting cached free blocks this request is about to touch
        evictable_hits = sum(1 for b in computed if self.ref_cnt[b] == 0)
        if len(self.free_block_queue) - evictable_hits < n_new_blocks:
            return None
        track = self.cells.enabled
        for b in computed:  # touch
            if self.ref_cnt[b] == 0:
                del self.free_block_queue[b]
            self.ref_cnt[b] += 1
            if track:
                self.cells.set(self._cells(b), _REUSED, live.rid)
        table = list(computed)
        for _ in range(n_new_blocks):
            table.append(self._pop_free())
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
        for b in reversed(table):
            self.ref_cnt[b] -= 1
            if self.ref_cnt[b] == 0:
                self.free_block_queue[b] = None
                if self.block_hash[b] is None:
                    self._n_free_clean += 1
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
            b = self._pop_free()
            self.req_to_blocks[live.rid].append(b)
            self.cells.set(self._cells(b), _ALLOC, live.rid)
        table = self.req_to_blocks[live.rid]
        b = table[n // self.block_size]
        self.cells.set((b * self.block_size + n % self.block_size,), _DECODE, live.rid)
        if len(live.tokens) % self.block_size == 0:
            self._cache_full_blocks(live)
        return preempted

    def _preempt(self, live: _Live) -> None:
        self._preempted_step = self._step
        table = self._free_request(live)
        self._hashes.pop(live.rid, None)
        freed = [b for b in table if self.ref_cnt[b] == 0]
        self.events.append({"type": "preempt", "rid": live.rid, "cells": len(freed) * self.block_size})
        for b in freed:
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
        for b in range(self.num_gpu_blocks):
            assert self.ref_cnt[b] >= 0, f"ref_cnt of block {b} is negative"
            assert self.ref_cnt[b] == held.get(b, 0), f"ref_cnt of block {b} does not match the block tables"
            assert (b in self.free_block_queue) == (self.ref_cnt[b] == 0), f"block {b} free-queue mismatch"
        assert self._n_free_clean == sum(1 for b in self.free_block_queue if self.block_hash[b] is None)
        for h, b in self.cached_block_hash_to_block.items():
            assert self.block_hash[b] == h, "cache map points at a block with another hash"
        for rid, table in self.req_to_blocks.items():
            assert len(set(table)) == len(table), f"request {rid} holds a block twice"


# ----------------------------------------------------------------------------------------------------------------
# 5. RadixManager: SGLang
#
# RadixCache (radix_cache.py) stores every cached sequence in a radix tree whose edges are token runs; a node's
# value holds the pool cells of its tokens (page_size 1). match_prefix walks the tree and returns the cells of the
# longest cached prefix, splitting a node when the match ends inside it (_split_node). insert adds a sequence and
# reports how much of it was already there. lock_ref pins the path of a running request: inc_lock_ref /
# dec_lock_ref walk up to the root, moving tokens between evictable_size_ and protected_size_. evict(n) frees
# unlocked leaves, least recently used first, and lets a parent whose last child went become a leaf in turn.
# Cached and running tokens share one pool (token_to_kv_pool_allocator).
#
# Scheduling (schedule_policy.py): "fcfs" keeps arrival order; "lpm" sorts the waiting queue by longest prefix
# match, falling back to fcfs when more than 128 requests wait. Admission (PrefillAdder) only takes a request if
# the pool, counting evictable tokens, can hold its new prompt tokens plus the reply tokens it may still produce,
# on top of what running requests may still produce; here that reservation is exact (new_token_ratio = 1), so a
# running request never has to be retracted.
#
# One deliberate change: SGLang's evict() collects all leaves on every call (_collect_leaves). We keep a heap of
# (last_access_time, node) for evictable leaves instead, and drop stale entries when they surface, so eviction costs
# O(log n) per leaf and no step scans the whole tree.
# ----------------------------------------------------------------------------------------------------------------


class TreeNode:
    __slots__ = ("children", "parent", "key", "value", "lock_ref", "last_access_time", "owner", "id")

    def __init__(self, parent=None, key=(), value=None, node_id: int = 0):
        self.id = node_id  # a number for views (frames' "tree"); SGLang's TreeNode has one too
        self.children: dict = {}  # first token of the child's key -> child
        self.parent = parent
        self.key = key  # tuple of token ids on the edge into this node
        self.value = value or []  # the cell of each token in key
        self.lock_ref = 0
        self.last_access_time = 0
        self.owner = -1  # request that inserted it (for events)


class RadixManager:
    """SGLang radix cache over one token-granular pool, schedule_policy "fcfs" (default) or "lpm"."""

    name = "radix"
    LPM_MAX_WAITING = 128  # schedule_policy.py: lpm falls back to fcfs above this queue length

    def __init__(self, capacity_tokens: int, schedule_policy: str = "fcfs", track_cells: bool = True):
        if not (isinstance(schedule_policy, str) and schedule_policy in ("fcfs", "lpm")):
            _check(False, "schedule_policy", f"must be 'fcfs' or 'lpm', got {brief(schedule_policy)}")
        capacity_tokens = _capacity(capacity_tokens)
        check_bool(track_cells, "track_cells")
        self.capacity = capacity_tokens
        self.schedule_policy = schedule_policy
        self.root = TreeNode()
        self.root.lock_ref = 1  # the root is never evicted
        self._free = list(range(capacity_tokens - 1, -1, -1))
        self.evictable_size_ = 0
        self.protected_size_ = 0
        self.reserved = 0  # reply tokens running requests may still decode
        self._clock = 0
        self._heap: list = []  # (last_access_time, seq, node) of evictable leaves
        self._seq = 0
        self._req: dict = {}  # rid -> [cells, locked node, n cells in the tree]
        self._to_insert: list = []  # prefilled in this step, inserted at the next one
        self._next_id = 1  # node ids; the root is 0
        self.cells = _CellMap(capacity_tokens, track_cells)
        self.events: list = []

    def max_request_tokens(self) -> int:
        return self.capacity

    def _new_node(self, parent, key, value) -> TreeNode:
        node = TreeNode(parent, key, value, self._next_id)
        self._next_id += 1
        return node

    def tree_rows(self) -> list:
        """The tree as rows [node id, parent id, tokens on the edge, lock_ref, owner], parents before children:
        what a view needs to draw shared prefixes and which paths running requests pin (frames' "tree")."""
        rows, stack = [], list(reversed(self.root.children.values()))
        while stack:
            node = stack.pop()
            rows.append([node.id, node.parent.id, len(node.key), node.lock_ref, node.owner])
            stack.extend(reversed(node.children.values()))
        return rows

    def begin_step(self, step: int) -> None:
        self.cells.settle()
        for live in self._to_insert:
            rec = self._req.get(live.rid)
            if rec is not None:
                self._insert_and_relock(live, rec, len(rec[0]), keep_lock=True)
        self._to_insert = []

    # --- tree primitives ---
    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def _push_if_evictable(self, node: TreeNode) -> None:
        if node is not self.root and not node.children and node.lock_ref == 0:
            self._seq += 1
            heapq.heappush(self._heap, (node.last_access_time, self._seq, node))

    def _split_node(self, child: TreeNode, split_len: int) -> TreeNode:
        """Cut child's edge after split_len tokens; the new node becomes child's parent."""
        new = self._new_node(child.parent, child.key[:split_len], child.value[:split_len])
        new.lock_ref = child.lock_ref
        new.last_access_time = child.last_access_time
        new.owner = child.owner
        new.children = {child.key[split_len]: child}
        child.parent.children[child.key[0]] = new
        child.parent = new
        child.key = child.key[split_len:]
        child.value = child.value[split_len:]
        return new

    def _walk(self, key: Sequence[int], split: bool, touch: bool):
        """Follow key from the root; returns (matched cells, last matched node). Cost: O(matched length).
        split=True is match_prefix (a match ending inside an edge splits it there); split=False only measures."""
        key = tuple(key)
        node, i, cells = self.root, 0, []
        now = self._tick() if touch else 0
        while i < len(key):
            child = node.children.get(key[i])
            if child is None:
                break
            n = len(child.key)
            if key[i : i + n] != child.key:  # whole-edge compare first (C speed); find the split point if it fails
                n = _common_prefix_len(child.key, key[i : i + n])  # >= 1: children are keyed by their first token
                if not split:
                    cells.extend(child.value[:n])
                    break
                child = self._split_node(child, n)
            if touch:
                child.last_access_time = now
            cells.extend(child.value)
            node = child
            i += n
        return cells, node

    def match_prefix(self, key: Sequence[int]):
        return self._walk(key, split=True, touch=True)

    def _match_len(self, key: Sequence[int]) -> int:
        return len(self._walk(key, split=False, touch=False)[0])

    def insert(self, key: Sequence[int], value: list, owner: int):
        """Insert key -> value. Returns (how many leading tokens were already cached, the node where key ends).
        The caller frees its cells for the already-cached part when they differ from the tree's. A new leaf
        starts unlocked."""
        key = tuple(key)
        node, i = self.root, 0
        now = self._tick()
        while i < len(key):
            child = node.children.get(key[i])
            if child is None:
                break
            n = len(child.key)
            if key[i : i + n] != child.key:
                n = _common_prefix_len(child.key, key[i : i + n])
                child = self._split_node(child, n)
            child.last_access_time = now
            self._push_if_evictable(child)
            node = child
            i += n
        n_old = i
        if i < len(key):
            leaf = self._new_node(node, key[i:], list(value[i:]))
            leaf.last_access_time = now
            leaf.owner = owner
            node.children[key[i]] = leaf
            self.evictable_size_ += len(leaf.key)
            self._push_if_evictable(leaf)
            node = leaf
        return n_old, node

    def inc_lock_ref(self, node: TreeNode) -> None:
        while node is not self.root:
            if node.lock_ref == 0:
                self.evictable_size_ -= len(node.key)
                self.protected_size_ += len(node.key)
            node.lock_ref += 1
            node = node.parent

    def dec_lock_ref(self, node: TreeNode) -> None:
        while node is not self.root:
            if node.lock_ref == 1:
                self.evictable_size_ += len(node.key)
                self.protected_size_ -= len(node.key)
                self.cells.set(node.value, _CACHED)
            node.lock_ref -= 1
            self._push_if_evictable(node)
            node = node.parent

    def evict(self, num_tokens: int) -> int:
        """Free at least num_tokens cells from unlocked leaves, least recently used first."""
        evicted = 0
        while evicted < num_tokens and self._heap:
            t, _, node = heapq.heappop(self._heap)
            if node.parent is None or node.children or node.lock_ref > 0 or t != node.last_access_time:
                continue  # stale entry: the node was deleted, grew children, got locked or was touched since
            self._free.extend(reversed(node.value))
            self.cells.set(node.value, _EVICT)
            self.events.append({"type": "evict", "rid": node.owner, "cells": len(node.value)})
            evicted += len(node.value)
            self.evictable_size_ -= len(node.key)
            parent = node.parent
            del parent.children[node.key[0]]
            node.parent = None
            self._push_if_evictable(parent)
        return evicted

    def _alloc(self, n: int) -> list:
        free = self._free
        if len(free) < n:
            self.evict(n - len(free))
            if len(free) < n:
                raise RuntimeError("radix pool exhausted although admission reserved room (a bug)")
        if n == 0:
            return []
        cells = free[-n:]
        del free[-n:]
        cells.reverse()
        return cells

    # --- scheduling ---
    def schedule(self, waiting, step: int):
        if self.schedule_policy == "lpm" and len(waiting) <= self.LPM_MAX_WAITING:
            # longest prefix match first; ties keep arrival order (sorted() is stable)
            return iter(sorted(waiting, key=lambda r: -self._match_len(r.tokens[:-1])))
        return iter(waiting)

    # --- request lifecycle ---
    def admit(self, live: _Live, step: int):
        tokens = live.tokens
        cells, last = self.match_prefix(tokens[: len(tokens) - 1])  # compute at least one token
        n_hit = len(cells)
        n_new = len(tokens) - n_hit
        self.inc_lock_ref(last)
        # PrefillAdder: free + evictable must hold the new prompt tokens, this reply and all reserved replies
        if len(self._free) + self.evictable_size_ < n_new + live.remaining + self.reserved:
            self.dec_lock_ref(last)
            return None
        self.cells.set(cells, _REUSED, live.rid)
        new = self._alloc(n_new)
        self.cells.set(new, _PREFILL, live.rid)
        cells.extend(new)
        self.reserved += live.remaining
        self._req[live.rid] = [cells, last, n_hit]  # cells, locked node, how many leading cells are the tree's
        # cache_unfinished_req runs when the prefill batch's results come back (process_batch_result), so the
        # new prompt joins the tree only after this step: requests prefilled together do not share what they
        # compute (with fcfs; SGLang's lpm can postpone such requests, we do not model that)
        self._to_insert.append(live)
        return n_hit, n_new

    def _insert_and_relock(self, live: _Live, rec: list, n_tokens: int, keep_lock: bool) -> None:
        """Insert the request's first n_tokens tokens, free its cells that duplicate tokens another request
        inserted meanwhile (using the tree's instead), and move its lock to the node where they end."""
        cells, old_last, n_tree = rec
        n_old, new_last = self.insert(live.tokens[:n_tokens], cells[:n_tokens], live.rid)
        if n_old > n_tree:  # rare: someone else inserted the same tokens after we matched
            tree_cells = self._walk(live.tokens[:n_old], split=False, touch=False)[0]
            dup = [c for c, t in zip(cells[n_tree:n_old], tree_cells[n_tree:n_old]) if c != t]
            if dup:
                self._free.extend(dup)
                self.cells.set(dup, _FREE, -1)
                cells[n_tree:n_old] = tree_cells[n_tree:n_old]
        self.inc_lock_ref(new_last)
        self.dec_lock_ref(old_last)
        rec[1], rec[2] = new_last, n_tokens
        if not keep_lock:
            self.dec_lock_ref(new_last)

    def decode(self, live: _Live, running: list) -> list:
        rec = self._req[live.rid]
        # reserved at admission, so free + evictable always covers it
        cell = self._free.pop() if self._free else self._alloc(1)[0]
        self.reserved -= 1
        rec[0].append(cell)
        self.cells.set((cell,), _DECODE, live.rid)
        return []

    def decode_many(self, live: _Live, n: int) -> None:
        """decode() for the last n tokens of live.tokens at once (reserved at admission)."""
        rec = self._req[live.rid]
        take = min(n, len(self._free))
        cells = self._free[len(self._free) - take :][::-1]
        del self._free[len(self._free) - take :]
        if take < n:
            cells.extend(self._alloc(n - take))
        self.reserved -= n
        rec[0].extend(cells)
        self.cells.set(cells, _DECODE, live.rid)

    def finish(self, live: _Live, step: int) -> None:
        """cache_finished_req: insert prompt + reply, free duplicate cells, unlock the path."""
        rec = self._req.pop(live.rid)
        self.reserved -= live.remaining
        self._insert_and_relock(live, rec, len(live.tokens), keep_lock=False)

    def cells_used(self) -> int:
        return self.capacity - len(self._free)

    def check_invariants(self) -> None:
        seen = set()
        stack = [self.root]
        evictable = protected = 0
        while stack:
            node = stack.pop()
            if node is not self.root:
                assert node.lock_ref >= 0, "negative lock_ref"
                assert len(node.key) == len(node.value) > 0, "node key/value mismatch"
                assert node.lock_ref >= max((c.lock_ref for c in node.children.values()), default=0), (
                    "a child is locked more than its parent"
                )
                if node.lock_ref:
                    protected += len(node.key)
                else:
                    evictable += len(node.key)
                for c in node.value:
                    assert c not in seen, f"cell {c} owned twice"
                    seen.add(c)
            for k, ch in node.children.items():
                assert ch.parent is node and ch.key[0] == k, "broken tree link"
                stack.append(ch)
        assert evictable == self.evictable_size_ and protected == self.protected_size_, "size counters drifted"
        for cells, _, _ in self._req.values():
            for c in cells:
                assert c not in self._free, f"cell {c} both free and held"
        private = set()
        for cells, _, _ in self._req.values():
            for c in cells:
                if c not in seen:
                    assert c not in private, f"cell {c} owned twice"
                    private.add(c)
        assert len(set(self._free)) == len(self._free), "free list holds a cell twice"
        assert not (set(self._free) & (seen | private)), "a free cell is owned"
        assert len(self._free) + len(seen) + len(private) == self.capacity, "cells lost"
        assert 0 <= self.reserved <= len(self._free) + self.evictable_size_, "reservation not covered"


# ----------------------------------------------------------------------------------------------------------------
# 6. simulate: the step loop shared by all managers
# ----------------------------------------------------------------------------------------------------------------


def simulate(
    manager, requests: Sequence[Request], record_frames: bool = True, check: bool = False, max_steps: int = 10_000_000
) -> dict:
    """Run `requests` through `manager` step by step (see the module docstring for the step and the frames).

    Returns {"summary": {...}, "frames": [...], "requests": {rid: {...}}}. check=True calls
    manager.check_invariants() after every step (slow; for tests). A request whose prompt plus reply is larger
    than the manager can ever hold is rejected at arrival with a reason, and so is every later turn that follows it.
    """
    if not (isinstance(manager, (SlotManager, PagedManager, RadixManager))):
        _check(False, "manager", f"must be a SlotManager, PagedManager or RadixManager, got {brief(manager)}")
    check_bool(record_frames, "record_frames")
    check_bool(check, "check")
    max_steps = check_int(max_steps, "max_steps", 1, MAX_STEP)
    if not (isinstance(requests, (list, tuple))):
        _check(False, "requests", f"must be a list of kv_managers.Request, got {brief(requests)}")
    if not (len(requests) <= MAX_REQUESTS):
        _check(False, "requests", f"at most {MAX_REQUESTS:,} requests, got {len(requests):,}")
    if record_frames:
        _check(manager.cells.enabled, "record_frames", "needs a manager built with track_cells=True")
        _check(
            manager.capacity <= MAX_FRAME_CELLS,
            "record_frames",
            f"a pool of {manager.capacity:,} cells is too large to record frame by frame (at most "
            f"{MAX_FRAME_CELLS:,}); pass record_frames=False",
        )
    n_tokens = n_reply = 0
    for i, r in enumerate(requests):
        p, q = _check_request(r, i)
        _check(
            r.arrival <= max_steps,
            f"requests[{i}].arrival",
            f"is step {r.arrival:,}, after max_steps={max_steps:,}",
        )
        n_tokens += p + q
        n_reply += q
    _check(
        n_tokens <= MAX_WORKLOAD_TOKENS,
        "requests",
        f"hold {n_tokens:,} prompt and reply tokens; at most {MAX_WORKLOAD_TOKENS:,} in one simulation",
    )
    _check(
        n_reply <= MAX_REPLY_TOKENS,
        "requests",
        f"ask for {n_reply:,} reply tokens; at most {MAX_REPLY_TOKENS:,} in one simulation (one step each)",
    )
    manager.cells.enabled = record_frames
    reqs = sorted(requests, key=lambda r: (r.arrival, r.rid))
    _check(len({r.rid for r in reqs}) == len(reqs), "requests", "request ids (rid) must be unique")
    by_rid = {r.rid: r for r in reqs}
    pending: list = []  # heap of (arrival, rid) not yet arrived
    blocked: dict = {}  # rid of an unfinished turn -> turns that follow it
    finished: dict = {}  # rid -> finish step
    rejected: dict = {}  # rid -> reason
    info: dict = {}  # rid -> per-request record
    for i, r in enumerate(requests):
        if not (r.follows is None or r.follows in by_rid):
            _check(False, f"requests[{i}].follows", f"request {r.rid} follows unknown request {brief(r.follows)}")
    for r in reqs:
        if r.follows is None:
            pending.append((r.arrival, r.rid))
        else:
            blocked.setdefault(r.follows, []).append(r.rid)
    heapq.heapify(pending)
    waiting: deque = deque()  # arrived, not admitted: _Live, in queue order
    running: list = []  # admitted, in admission order
    frames: list = []
    prefill_computed = cache_hit_tokens = peak_concurrency = peak_cells = preemptions = 0
    n_admitted = 0
    step = 0
    limit = manager.max_request_tokens()

    def reject(rid: int, reason: str, events: list) -> None:
        todo = [(rid, reason)]  # a loop, not recursion: a chain of follow-ups may be thousands of turns long
        while todo:
            rid, reason = todo.pop()
            rejected[rid] = reason
            events.append({"type": "reject", "rid": rid, "reason": reason})
            for child in reversed(blocked.pop(rid, [])):
                todo.append((child, f"the turn it follows (request {rid}) was rejected"))

    def release_followers(rid: int, at: int) -> None:
        for child in blocked.pop(rid, []):
            r = by_rid[child]
            heapq.heappush(pending, (max(r.arrival, at + r.think), child))

    def arrive(step: int, events: list, in_decode: bool) -> None:
        while pending and pending[0][0] <= step:
            _, rid = heapq.heappop(pending)
            r = by_rid[rid]
            events.append({"type": "arrive", "rid": rid})
            size = len(r.prompt) + (r.reply if isinstance(r.reply, int) else len(r.reply))
            if len(r.prompt) == 0 or size == len(r.prompt):
                reject(rid, "empty prompt" if not r.prompt else "empty reply: nothing to generate", events)
            elif size > limit:
                reject(rid, f"prompt + reply is {size} tokens but one request can hold at most {limit}", events)
            else:
                live = _Live(r)
                if in_decode:
                    live.queued_in_decode = step
                waiting.append(live)

    while pending or waiting or running:
        _check(step <= max_steps, "max_steps", f"the simulation did not finish within max_steps={max_steps:,}")
        if not waiting and not running and pending[0][0] > step:
            step = pending[0][0]  # nothing to do until the next arrival
        manager.begin_step(step)
        manager.events = events = []
        arrive(step, events, in_decode=False)
        # 1. decode: one token for every request prefilled in an earlier step
        active = 0
        preempted_now: set = set()
        for live in list(running):
            if live.rid in preempted_now or live.prefilled_step >= step:
                continue  # preempted earlier in this step, or prefilled in this step
            live.tokens.append(live.reply[live.n_generated])
            victims = manager.decode(live, running)
            if victims:
                preemptions += len(victims)
                preempted_now.update(v.rid for v in victims)
                for v in victims:
                    if v is live:
                        live.tokens.pop()
                    v.tokens = list(v.req.prompt) + list(v.reply[: v.n_generated])
                    v.prefilled_step = -1
                waiting.extendleft(sorted(victims, key=lambda v: -v.order))  # back to the front, oldest first
                if live in victims:
                    continue
            live.n_generated += 1
            active += 1
            if live.remaining == 0:
                running.remove(live)
                manager.finish(live, step)
                finished[live.rid] = step
                info[live.rid]["finish"] = step
                events.append({"type": "finish", "rid": live.rid})
                release_followers(live.rid, step)
        arrive(step, events, in_decode=True)  # follow-ups released in part 1 (they may be admitted in this step)
        # 2. admit + prefill, in the manager's schedule order, until one does not fit
        admitted = []
        for live in manager.schedule(waiting, step):
            got = manager.admit(live, step)
            if got is None:
                break
            reused, computed = got
            n_admitted += 1
            live.order = n_admitted
            live.admitted_step = live.prefilled_step = step
            running.append(live)
            admitted.append(live)
            prefill_computed += computed
            cache_hit_tokens += reused
            rec = info.setdefault(
                live.rid, {"arrival": live.req.arrival, "admitted": step, "reused": 0, "computed": 0, "preempted": 0}
            )
            rec["reused"] += reused
            rec["computed"] += computed
            events.append({"type": "admit", "rid": live.rid, "reused": reused, "computed": computed})
        for live in admitted:  # usually the head of the queue (FCFS); O(1) then
            if waiting[0] is live:
                waiting.popleft()
            else:
                waiting.remove(live)
        for e in events:
            if e["type"] == "preempt" and e["rid"] in info:
                info[e["rid"]]["preempted"] += 1
        peak_concurrency = max(peak_concurrency, active + len(admitted))
        peak_cells = max(peak_cells, manager.cells_used())
        if check:
            manager.check_invariants()
            assert manager.cells_used() <= manager.capacity, "capacity exceeded"
        if record_frames:
            if not ((len(frames) + 1) * manager.capacity <= MAX_RECORDED_CELLS):
                _check(
                    False,
                    "record_frames",
                    f"{len(frames) + 1:,} frames of {manager.capacity:,} cells would pass {MAX_RECORDED_CELLS:,} recorded "
                    "cells; pass record_frames=False, or simulate a smaller pool or workload",
                )
            frames.append(
                {
                    "step": step,
                    "state": manager.cells.state.decode("ascii"),
                    "owner": list(manager.cells.owner),
                    "running": [r.rid for r in running],
                    "waiting": [r.rid for r in waiting],
                    "events": events,
                }
            )
            if hasattr(manager, "tree_rows"):
                frames[-1]["tree"] = manager.tree_rows()
        if waiting and not running and not admitted and not any(e["type"] in ("finish", "preempt") for e in events):
            # nothing runs and the head of the queue still does not fit: it never will
            for live in list(waiting):
                waiting.remove(live)
                reject(live.rid, "does not fit even in an empty pool", events)
        step += 1

    for rid in blocked:
        rejected.setdefault(rid, "the turn it follows never finished")
    prompt_tokens = sum(len(r.prompt) for r in reqs if r.rid not in rejected)
    summary = {
        "manager": manager.name,
        "capacity_tokens": manager.capacity,
        "prefill_computed": prefill_computed,
        "prompt_tokens": prompt_tokens,
        "prefill_saved_frac": 1 - prefill_computed / prompt_tokens if prompt_tokens else 0.0,
        "cache_hit_tokens": cache_hit_tokens,
        "peak_concurrency": peak_concurrency,
        "preemptions": preemptions,
        "peak_cells_used": peak_cells,
        "steps": step,
        "finished": len(finished),
        "rejected": dict(rejected),
        "decode_tokens": sum(
            by_rid[rid].reply if isinstance(by_rid[rid].reply, int) else len(by_rid[rid].reply) for rid in finished
        ),
    }
    return {"summary": summary, "frames": frames, "requests": info}


# ----------------------------------------------------------------------------------------------------------------
# 7. Workloads and compare
# ----------------------------------------------------------------------------------------------------------------

SYSTEM_PROMPT_TOKENS = 48


def _ids(base: int, n: int) -> tuple:
    return tuple(range(base, base + n))


def chat_workload(
    first_msg=(10, 6, 6, 6),
    first_reply=(14, 22, 22, 22),
    second_msg=(9, 46, 56, 21),
    second_reply=(8, 27, 9, 22),
    first_arrival=(0, 1, 5, 5),
    think=(40, 0, 0, 0),
    system_tokens: int = SYSTEM_PROMPT_TOKENS,
) -> list:
    """The module's chat workload: four users, two turns each, one shared 48-token system prompt.

    Turn 1 of user u (request 2u):    system + message_u                          arrives at first_arrival[u]
    Turn 2 of user u (request 2u+1):  system + message_u + reply_u + message2_u   think[u] steps after reply_u
    The module fixes the system prompt and this shape; the other lengths (in tokens) are our choice:

        user                0    1    2    3
        arrives at step     0    1    5    5
        message            10    6    6    6
        reply              14   22   22   22     message + reply: 24, 28, 28, 28
        thinks (steps)     40    0    0    0     user 0 reads its reply for a while; the others answer at once
        message 2           9   46   56   21
        reply 2             8   27    9   22
        prompts           58 + 54 + 54 + 54 (turn 1) + 81 + 122 + 132 + 97 (turn 2) = 652 tokens

    What each manager computes on 384 cells (prefill tokens), and why these lengths give it:
      radix  208 = 48 + (10 + 6 + 6 + 6) + (9 + 46 + 56 + 21): every distinct prompt token once. Everything
             fits in 384 cells, so nothing that is needed again is evicted.
      paged  268 = 208 + 60. A second turn reuses whole 16-token blocks only: users 1-3's first conversations
             are 48 + 28 = 76 tokens, 12 past their last full block, so each recomputes 12 (36 in all). User 0's
             conversation (72 tokens) has one full block of its own; while user 0 thinks, the other second turns
             use up the never-used blocks, that block reaches the head of free_block_queue and is evicted, so
             user 0 reuses only the system prompt and recomputes 24 tokens.
      slots  376 = 208 + 144 + 24. Each user starts in an empty slot (four copies of the system prompt, 3 x 48
             more than radix). Users 1-3 continue in their own slots. While user 0 thinks, the unified buffer
             fills and try_clear_idle_slots purges the first idle slot, user 0's; when user 0 returns, the most
             similar idle slot is another user's, sharing only the system prompt: 24 more tokens.
    Peak concurrency: 5 for paged and radix, in the step where users 2 and 3 finish their first turns and start
    their second ones (the counting convention is in the module docstring); 4 for slots, which never run more
    than n_parallel requests. Nothing is preempted.
    """
    for name, v in (
        ("first_msg", first_msg),
        ("first_reply", first_reply),
        ("second_msg", second_msg),
        ("second_reply", second_reply),
        ("first_arrival", first_arrival),
        ("think", think),
    ):
        if not (isinstance(v, (list, tuple)) and len(v) == 4 and all(is_int(x) and 0 <= x <= 1 << 16 for x in v)):
            _check(False, name, f"must be 4 integers from 0 to 65,536 (one per user), got {brief(v)}")
    check_int(system_tokens, "system_tokens", 0, 1 << 16)
    reqs = []
    system = _ids(1, system_tokens)
    for u in range(4):
        msg1 = _ids(1000 * (u + 1), first_msg[u])
        rep1 = _ids(1000 * (u + 1) + 100, first_reply[u])
        msg2 = _ids(1000 * (u + 1) + 200, second_msg[u])
        rep2 = _ids(1000 * (u + 1) + 300, second_reply[u])
        p1 = system + msg1
        reqs.append(Request(rid=2 * u, arrival=first_arrival[u], prompt=p1, reply=rep1, session=f"user{u}"))
        reqs.append(
            Request(
                rid=2 * u + 1,
                arrival=first_arrival[u],
                prompt=p1 + rep1 + msg2,
                reply=rep2,
                session=f"user{u}",
                follows=2 * u,
                think=think[u],
            )
        )
    return reqs


def compare(capacity_tokens: int = 384, workload: Sequence[Request] | None = None, record_frames: bool = True) -> dict:
    """Run one workload (default: chat_workload()) through the three managers on equal pools:
    llama.cpp slots with the automatic n_parallel (4, unified), vLLM paged blocks (block_size 16, prefix caching),
    SGLang radix (schedule_policy "fcfs", its default). Returns {"slots": run, "paged": run, "radix": run}."""
    capacity_tokens = check_int(capacity_tokens, "capacity_tokens", 16, MAX_CAPACITY_TOKENS)  # one 16-token block
    if not (workload is None or isinstance(workload, (list, tuple))):
        _check(False, "workload", f"must be None (the chat workload) or a list of Request, got {brief(workload)}")
    check_bool(record_frames, "record_frames")
    for i, r in enumerate(workload or ()):
        if not (isinstance(r, Request)):
            _check(False, f"workload[{i}]", f"must be a kv_managers.Request, got {brief(r)}")
    reqs = list(workload) if workload is not None else chat_workload()
    managers = {
        "slots": SlotManager(capacity_tokens),
        "paged": PagedManager(capacity_tokens),
        "radix": RadixManager(capacity_tokens),
    }
    return {name: simulate(m, reqs, record_frames=record_frames) for name, m in managers.items()}


RADIX_LOSES_CAPACITY = 192


def radix_loses_workload() -> list:
    """Exercise 3: a workload on which RadixManager(192, schedule_policy="lpm") computes more prefill tokens (336)
    than PagedManager(192) (272, no preemptions). Run it with capacity_tokens=RADIX_LOSES_CAPACITY:

        simulate(RadixManager(192, schedule_policy="lpm"), radix_loses_workload())   # 336 computed
        simulate(PagedManager(192), radix_loses_workload())                          # 272 computed
        simulate(RadixManager(192), radix_loses_workload())                          # fcfs: 272, a tie

    Two documents are warmed into the cache at step 0: Q (64 tokens) and P (96 tokens), each with an 8-token
    question and a 4-token answer. At step 8 four requests arrive in this order: one about Q, then three about P,
    each a 24-token question with an 8-token answer.

    Why radix loses: lpm sorts the queue by cached prefix length, so the three P requests (96 cached tokens each)
    jump ahead of the Q request (64). All three fit at once, because the radix pool spends nothing on partly
    filled blocks; to make room for them the tree evicts its least recently used unlocked leaf, and that leaf
    is Q's. When the Q request finally runs, it recomputes Q from scratch. Paged FCFS admits the Q request first,
    while Q's blocks are still cached, reusing all 64 tokens; the P requests then reuse P's blocks as room
    appears. The lost 64 tokens are the whole gap (336 - 272). Memory is tight (192 cells) and the scheduling
    order differs from the arrival order: remove either (more cells, or schedule_policy "fcfs") and radix
    computes no more than paged.
    """
    P, Q = _ids(10_000, 96), _ids(20_000, 64)
    reqs = [
        Request(0, 0, Q + _ids(30_000, 8), 4, "warm-q"),
        Request(1, 0, P + _ids(31_000, 8), 4, "warm-p"),
        Request(2, 8, Q + _ids(40_000, 24), 8, "q"),
    ]
    for i in range(3):
        reqs.append(Request(3 + i, 8, P + _ids(41_000 + 100 * i, 24), 8, f"p{i}"))
    return reqs


# The figure's agent preset: 16 requests on 384 cells; all three managers evict, paged preempts once.
AGENT_FIGURE_PRESET = dict(
    n_requests=16,
    seed=2,
    system_tokens=32,
    tool_tokens=48,
    n_toolsets=2,
    turns=(2, 4),
    msg_tokens=(4, 16),
    reply_tokens=(4, 12),
    session_gap=3.0,
)


def agent_workload(
    n_requests: int = 1000,
    seed: int = 0,
    system_tokens: int = 256,
    tool_tokens: int = 512,
    n_toolsets: int = 4,
    turns: tuple = (2, 6),
    msg_tokens: tuple = (16, 64),
    reply_tokens: tuple = (8, 32),
    branch_prob: float = 0.25,
    think: tuple = (0, 4),
    session_gap: float = 2.0,
) -> list:
    """A seeded multi-turn agent workload: `n_requests` requests from agent sessions.

    Every prompt starts with one system prompt (system_tokens) followed by one of n_toolsets tool-definition
    blocks (tool_tokens each). A session's first turn adds a task message; every later turn continues an earlier
    turn of the same session: its prompt is that turn's prompt + its reply + a new message (a tool result or user
    message, msg_tokens). Usually it continues the latest turn; with probability branch_prob it branches from a
    random earlier turn instead (a retry, or another tool call from the same state), so sessions form trees and
    several branches of one session can run at once. A follow-up arrives think steps after the turn it continues
    finishes. Sessions start on average every session_gap steps. All ranges are inclusive (lo, hi).
    """
    check_int(n_requests, "n_requests", 1, MAX_REQUESTS)
    if not (seed is None or is_int(seed)):
        _check(False, "seed", f"must be an integer or None, got {brief(seed)}")
    check_int(system_tokens, "system_tokens", 0, 1 << 16)
    check_int(tool_tokens, "tool_tokens", 0, 99_999)  # a tool block's ids stay below the next block's
    check_int(n_toolsets, "n_toolsets", 1, 64)  # their ids stay below the messages' (10,000,000 up)
    for name, v, lo in (
        ("turns", turns, 1),
        ("msg_tokens", msg_tokens, 0),
        ("reply_tokens", reply_tokens, 1),
        ("think", think, 0),
    ):
        if not (
            isinstance(v, (list, tuple)) and len(v) == 2 and all(is_int(x) for x in v) and lo <= v[0] <= v[1] <= 1 << 16
        ):
            _check(False, name, f"must be a range (lo, hi) of integers with {lo} <= lo <= hi <= 65,536, got {brief(v)}")
    check_number(branch_prob, "branch_prob", 0.0, 1.0)
    check_number(session_gap, "session_gap", 0.0, 1e6)
    rng = random.Random(seed)
    system = _ids(1, system_tokens)
    toolsets = [_ids(1_000_000 + 100_000 * k, tool_tokens) for k in range(n_toolsets)]
    budget = MAX_WORKLOAD_TOKENS  # prompts grow turn by turn: stop a workload that would not fit in one simulation
    next_id = [10_000_000]

    def fresh(n: int) -> tuple:
        base = next_id[0]
        next_id[0] += n
        return tuple(range(base, base + n))

    reqs: list = []
    t = 0.0
    session = 0
    while len(reqs) < n_requests:
        t += rng.expovariate(1.0 / session_gap) if session_gap > 0 else 0.0
        start = int(t)
        n_turns = min(rng.randint(*turns), n_requests - len(reqs))
        base = system + toolsets[rng.randrange(n_toolsets)]
        history: list = []  # (rid, prompt, reply) of this session's turns
        for _j in range(n_turns):
            msg = fresh(rng.randint(*msg_tokens))
            reply = fresh(rng.randint(*reply_tokens))
            rid = len(reqs)
            if not history:
                prompt, follows = base + msg, None
            else:
                parent = history[-1] if rng.random() >= branch_prob else rng.choice(history)
                prompt, follows = parent[1] + parent[2] + msg, parent[0]
            budget -= len(prompt) + len(reply)
            _check(
                budget >= 0,
                "n_requests",
                f"{n_requests:,} requests of these lengths would hold more than {MAX_WORKLOAD_TOKENS:,} tokens, "
                "the most one simulation takes; ask for fewer requests or shorter turns",
            )
            reqs.append(Request(rid, start, prompt, reply, f"s{session}", follows, rng.randint(*think)))
            history.append((rid, prompt, reply))
        session += 1
    return reqs
