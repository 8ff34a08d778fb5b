"""kv_managers section 5: SGLang's radix tree (see the package docstring)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from enginelab.checks import brief, check_bool
from enginelab.checks import check as _check

from .pool import _CACHED, _DECODE, _EVICT, _FREE, _PREFILL, _REUSED, _capacity, _CellMap, _common_prefix_len, _Live

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
# on top of new_token_ratio x what running requests may still produce (the requests admitted in the same prefill
# batch count in full). With new_token_ratio = 1 (the default here) the reservation is exact and a running
# request never has to be retracted. SGLang's scheduler moves the ratio (enginelab.serving.sim does the same):
# 0.7 at start and when idle, down by (0.7 - 0.7 x 0.14) / 600 per decode step, and when a decode step finds no
# room it retracts requests (retract: their decoded cells freed, their prompt left in the tree) and raises it.
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
        self.new_token_ratio = 1.0  # the share of running requests' remaining replies that admission reserves
        # reply tokens running requests decoded whose cells the caller has not taken yet (the serving simulation
        # takes a reply's cells when it finishes: decode_many); they count as used at admission
        self.decoded = 0
        self._fresh = 0  # replies reserved by this step's admissions (counted in full)
        self.shortfall = (0.0, 0)  # the last refused admission's (missing cells, running replies)
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
        self._fresh = 0
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
        # PrefillAdder: free + evictable must hold the new prompt tokens, this reply, the replies admitted in this
        # batch and new_token_ratio x what running requests may still decode
        running = self.reserved - self._fresh - self.decoded
        room = len(self._free) + self.evictable_size_ - self.decoded - self._fresh - self.new_token_ratio * running
        if room < n_new + live.remaining:
            self.dec_lock_ref(last)
            # by how much it failed, and the remaining replies a lower ratio would discount
            self.shortfall = (n_new + live.remaining - room, running)
            return None
        self.cells.set(cells, _REUSED, live.rid)
        new = self._alloc(n_new)
        self.cells.set(new, _PREFILL, live.rid)
        cells.extend(new)
        self.reserved += live.remaining
        self._fresh += live.remaining
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

    def retract(self, live: _Live) -> None:
        """ScheduleBatch.release_req for a retracted request: the tokens it was admitted with stay in the tree
        (unlocked: evictable), its reservation ends; the caller frees the reply cells it had not taken (decoded).
        live.n_generated: the reply tokens it was admitted with."""
        rec = self._req.pop(live.rid)
        self.reserved -= live.remaining
        self._insert_and_relock(live, rec, len(rec[0]), keep_lock=False)

    def available(self) -> int:
        """Cells free or evictable, less the decoded tokens not taken yet."""
        return len(self._free) + self.evictable_size_ - self.decoded

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
        if self.new_token_ratio >= 1.0:
            assert 0 <= self.reserved <= len(self._free) + self.evictable_size_, "reservation not covered"
