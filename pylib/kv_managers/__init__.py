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

Sections, in reading order (one file each in this package; every name is importable from kv_managers):
  1. Requests                 pool.py       what arrives: prompt token ids, reply, session, the turn it follows
  2. The cell pool            pool.py       per-cell owner/state bookkeeping shared by all managers
  3. SlotManager              slots.py      llama.cpp
  4. PagedManager             paged.py      vLLM
  5. RadixManager             radix.py      SGLang
  6. simulate                 loop.py       the step loop, the counting conventions, the summary
  7. Workloads and compare    workloads.py  the module's chat workload, exercise 3, the agent workload

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

from .loop import simulate
from .paged import PagedManager
from .pool import (  # noqa: F401  (every name, the private ones too, stays importable from kv_managers)
    _ALLOC,
    _CACHED,
    _DECODE,
    _EVICT,
    _FREE,
    _PREEMPT,
    _PREFILL,
    _REUSED,
    CELL_CODES,
    MAX_CAPACITY_TOKENS,
    MAX_FRAME_CELLS,
    MAX_RECORDED_CELLS,
    MAX_REPLY_TOKENS,
    MAX_REQUESTS,
    MAX_SLOTS,
    MAX_STEP,
    MAX_WORKLOAD_TOKENS,
    Request,
    _capacity,
    _CellMap,
    _check_request,
    _common_prefix_len,
    _Live,
)
from .radix import RadixManager, TreeNode  # noqa: F401
from .slots import SlotManager, _Slot  # noqa: F401
from .workloads import (  # noqa: F401
    AGENT_FIGURE_PRESET,
    RADIX_LOSES_CAPACITY,
    SYSTEM_PROMPT_TOKENS,
    _ids,
    agent_workload,
    chat_workload,
    compare,
    radix_loses_workload,
)

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
