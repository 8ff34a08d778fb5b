"""kv_managers section 3: llama-server's slots (see the package docstring)."""

from __future__ import annotations

from dataclasses import dataclass, field

from enginelab.checks import check_bool, check_int, check_number

from .pool import _CACHED, _DECODE, _EVICT, _PREFILL, _REUSED, MAX_SLOTS, _capacity, _CellMap, _common_prefix_len, _Live

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
