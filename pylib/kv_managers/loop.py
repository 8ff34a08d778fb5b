"""kv_managers section 6: simulate, the step loop shared by all managers (see the package docstring)."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence

from enginelab.checks import brief, check_bool, check_int
from enginelab.checks import check as _check

from .paged import PagedManager
from .pool import (
    MAX_FRAME_CELLS,
    MAX_RECORDED_CELLS,
    MAX_REPLY_TOKENS,
    MAX_REQUESTS,
    MAX_STEP,
    MAX_WORKLOAD_TOKENS,
    Request,
    _check_request,
    _Live,
)
from .radix import RadixManager
from .slots import SlotManager

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
