"""Tests for pylib/kv_managers/: literal workloads with exact cells, invariants under generated workloads, the
module's compare figures and exercise 3."""

import json
import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "pylib"))

from kv_managers import (  # noqa: E402
    AGENT_FIGURE_PRESET,
    CELL_CODES,
    RADIX_LOSES_CAPACITY,
    PagedManager,
    RadixManager,
    Request,
    SlotManager,
    agent_workload,
    chat_workload,
    compare,
    radix_loses_workload,
    simulate,
)


def frame_at(run, step):
    return next(f for f in run["frames"] if f["step"] == step)


# --- slots -------------------------------------------------------------------------------------------------------


def test_slot_follow_up_reuses_its_own_slot():
    # explicit n_parallel=2 over 16 cells: slot 0 owns cells 0-7, slot 1 cells 8-15
    a = Request(0, 0, (1, 2, 3, 4), (50, 51), "u")
    b = Request(1, 0, (1, 2, 3, 4, 50, 51, 9), (60,), "u", follows=0)
    run = simulate(SlotManager(16, n_parallel=2), [a, b], check=True)
    assert frame_at(run, 0)["state"] == "PPPP" + "." * 12
    assert frame_at(run, 0)["owner"][:5] == [0, 0, 0, 0, -1]
    assert frame_at(run, 1)["state"] == "ppppD" + "." * 11
    # a finishes in step 2: its 6 cells stay in the slot as cache; b is bound to the slot one step later
    assert frame_at(run, 2)["state"] == "cccccc" + "." * 10
    assert frame_at(run, 3)["state"] == "RRRRRRP" + "." * 9
    assert frame_at(run, 3)["owner"][:7] == [1] * 7
    assert run["requests"][1] == {"arrival": 0, "admitted": 3, "reused": 6, "computed": 1, "preempted": 0, "finish": 4}
    s = run["summary"]
    assert (s["prefill_computed"], s["cache_hit_tokens"], s["prompt_tokens"]) == (5, 6, 11)


def test_slot_similarity_and_lru_choice():
    # two idle slots: one holds the shared system prompt, one is empty; the similar one wins
    sysp = (1, 2, 3, 4, 5, 6)
    reqs = [Request(0, 0, sysp + (10,), 1, "a"), Request(1, 5, sysp + (20,), 1, "b")]
    run = simulate(SlotManager(32, n_parallel=2), reqs, check=True)
    assert run["requests"][1]["reused"] == 6 and run["requests"][1]["computed"] == 1
    assert frame_at(run, 5)["state"][:7] == "RRRRRRP"  # landed in slot 0, not the empty slot 1
    # a prompt sharing nothing goes to the least recently used slot: the empty one (t_last_used = -1)
    reqs = [Request(0, 0, sysp + (10,), 1, "a"), Request(1, 5, (90, 91, 92), 1, "b")]
    run = simulate(SlotManager(32, n_parallel=2), reqs, check=True)
    assert frame_at(run, 5)["state"] == "c" * 8 + "." * 8 + "PPP" + "." * 13


def test_slots_cap_concurrency_at_n_parallel():
    reqs = [Request(i, 0, (100 * i + 1, 100 * i + 2), 3, f"u{i}") for i in range(6)]
    s = simulate(SlotManager(64), reqs, check=True)["summary"]
    assert s["peak_concurrency"] == 4 and s["finished"] == 6


def test_unified_slots_purge_idle_slot_when_full():
    # unified 16 cells: a (8 cells) finishes; b needs 10 cells, so the idle slot holding a is purged
    reqs = [Request(0, 0, tuple(range(1, 8)), 1, "a"), Request(1, 3, tuple(range(20, 29)), 1, "b")]
    run = simulate(SlotManager(16), reqs, check=True)
    ev = frame_at(run, 3)["events"]
    assert {"type": "evict", "rid": 0, "cells": 8} in ev
    assert run["summary"]["prefill_computed"] == 7 + 9


# --- paged -------------------------------------------------------------------------------------------------------


def test_paged_blocks_and_prefix_hit():
    a = Request(0, 0, (1, 2, 3, 4, 5, 6), (7, 8), "a")  # 2 blocks of 4
    b = Request(1, 5, (1, 2, 3, 4, 9, 9), 1, "b")  # shares the first block only
    run = simulate(PagedManager(16, block_size=4), [a, b], check=True)
    assert frame_at(run, 0)["state"] == "PPPPPPaa" + "." * 8  # tail of the last block allocated, unwritten
    assert frame_at(run, 1)["state"] == "ppppppDa" + "." * 8
    # a finishes at step 2: both blocks are full and hashed, so both stay cached
    assert frame_at(run, 2)["state"] == "cccccccc" + "." * 8
    # b reuses block 0 and takes new blocks from the head of free_block_queue (never-used blocks 2, 3)
    assert frame_at(run, 5)["state"] == "RRRRcccc" + "PPaa" + "...."
    assert run["requests"][1]["reused"] == 4 and run["requests"][1]["computed"] == 2


def test_paged_never_hits_the_whole_prompt():
    # an identical 8-token prompt is two full cached blocks, but the last token must be computed: 1 block hit
    p = tuple(range(1, 9))
    run = simulate(PagedManager(32, block_size=4), [Request(0, 0, p, 1), Request(1, 3, p, 1)], check=True)
    assert run["requests"][1]["reused"] == 4 and run["requests"][1]["computed"] == 4


def test_paged_prefix_cache_matches_exact_tokens_not_hashes():
    # hash(-1) == hash(-2) in CPython, so these first blocks hash alike, but their tokens differ: no hit
    assert hash((-1,) * 4) == hash((-2,) * 4)
    a = Request(0, 0, (-1,) * 4 + (5,), 1)
    b = Request(1, 3, (-2,) * 4 + (5,), 1)
    run = simulate(PagedManager(32, block_size=4), [a, b], check=True)
    assert run["requests"][1]["reused"] == 0 and run["requests"][1]["computed"] == 5
    # a block matches only after the same parent: equal second blocks behind different first blocks do not hit
    c = Request(2, 6, (1, 2, 3, 4, 9, 9, 9, 9, 7), 1)
    d = Request(3, 9, (1, 2, 3, 5, 9, 9, 9, 9, 7), 1)
    e = Request(4, 12, (1, 2, 3, 4, 9, 9, 9, 9, 8), 1)
    run = simulate(PagedManager(64, block_size=4), [c, d, e], check=True)
    assert [run["requests"][i]["reused"] for i in (2, 3, 4)] == [0, 0, 8]


def test_paged_block_keys_stay_bounded_and_still_match():
    # 60 distinct prompts of two full blocks each through a pool of 16 blocks: 120 block keys are numbered, but
    # those no block and no request carries are forgotten, so at most 4 x 16 are kept; a prompt sent twice after
    # them still reuses its two full blocks (8 tokens)
    reqs = [Request(i, 2 * i, (1000 + i, 1, 2, 3, 4, 5, 6, 7, 8), 1) for i in range(60)]
    q = (7, 7, 7, 7, 8, 8, 8, 8, 9)
    reqs += [Request(60, 130, q, 1), Request(61, 134, q, 1)]
    m = PagedManager(64, block_size=4)
    run = simulate(m, reqs, check=True)
    assert len(m._block_ids) <= 4 * m.num_gpu_blocks
    assert run["requests"][61]["reused"] == 8 and run["requests"][61]["computed"] == 1


def test_paged_free_queue_evicts_last_block_first():
    # a's blocks 0,1 are freed in reverse order (1 then 0), after never-used blocks 2,3; c needs 3 blocks:
    # blocks 2, 3, then block 1 (a's last block) is evicted; block 0 (a's prefix) survives
    a = Request(0, 0, tuple(range(1, 8)), 1, "a")
    c = Request(1, 3, tuple(range(50, 59)), 2, "c")
    d = Request(2, 8, tuple(range(1, 5)) + (99,), 1, "d")
    run = simulate(PagedManager(16, block_size=4), [a, c, d], check=True)
    assert {"type": "evict", "rid": 0, "cells": 4} in frame_at(run, 3)["events"]
    assert frame_at(run, 3)["state"][:4] == "cccc"
    assert run["requests"][2]["reused"] == 4


def test_paged_preempts_most_recent_and_recomputes():
    # 4 blocks of 4: two requests each grow to 3 blocks; the later one is preempted, then recomputed
    a = Request(0, 0, tuple(range(1, 5)), 6, "a")
    b = Request(1, 0, tuple(range(11, 15)), 6, "b")
    run = simulate(PagedManager(16, block_size=4), [a, b], check=True)
    s = run["summary"]
    assert s["preemptions"] >= 1 and s["finished"] == 2 and not s["rejected"]
    assert run["requests"][1]["preempted"] >= 1
    assert s["prefill_computed"] > 8  # b's prompt (and its generated tokens) were computed again


# --- radix -------------------------------------------------------------------------------------------------------


def test_radix_token_granular_match_and_split():
    a = Request(0, 0, (1, 2, 3, 4, 5), (6, 7), "a")
    b = Request(1, 5, (1, 2, 3, 9, 9), 1, "b")
    m = RadixManager(16)
    run = simulate(m, [a, b], check=True)
    assert run["requests"][1]["reused"] == 3 and run["requests"][1]["computed"] == 2
    assert frame_at(run, 5)["state"] == "RRRccccPP" + "." * 7
    # the tree now has [1,2,3] with children [4,5,6,7] (a) and [9,9,b's reply] (b)
    (top,) = m.root.children.values()
    assert top.key == (1, 2, 3) and top.value == [0, 1, 2] and top.lock_ref == 0
    assert sorted(c.key[:2] for c in top.children.values()) == [(4, 5), (9, 9)]
    assert m.evictable_size_ == 3 + 4 + 3 and m.protected_size_ == 0


def test_radix_admission_discounts_running_replies_by_new_token_ratio():
    # 100 cells. a (10 prompt, 60 reply) is admitted; b (10 prompt, 40 reply) needs 50 cells. Exact reservation:
    # 90 free - 60 reserved = 30 < 50, refused. At new_token_ratio 0.5 a's 60 count as 30: 90 - 30 = 60 >= 50,
    # admitted, but not in the prefill batch that admitted a (its reply counts in full there: 90 - 60 = 30).
    from kv_managers.pool import _Live

    def live(rid, n_prompt, n_reply):
        return _Live(Request(rid, 0, tuple(range(1000 * rid + 1, 1000 * rid + 1 + n_prompt)), n_reply))

    for ratio, same_batch, want in ((1.0, False, None), (0.5, True, None), (0.5, False, (0, 10))):
        m = RadixManager(100)
        m.new_token_ratio = ratio
        m.begin_step(0)
        assert m.admit(live(1, 10, 60), 0) == (0, 10)
        if not same_batch:
            m.begin_step(1)
        assert m.admit(live(2, 10, 40), 1) == want
        if want is None:
            assert m.shortfall[0] == pytest.approx(20)  # 50 needed, 30 of room
    # retract: a's prompt stays in the tree (evictable), its reservation ends, its cells are no longer locked
    m = RadixManager(100)
    a = live(1, 10, 60)
    m.admit(a, 0)
    m.begin_step(1)
    m.retract(a)
    assert m.reserved == 0 and m.evictable_size_ == 10 and m.protected_size_ == 0 and m.available() == 100
    m.check_invariants()


def test_radix_lock_ref_pins_running_prefix_and_evicts_lru_leaf():
    # 12 cells. a and b finish (a first, so a is least recently used); each is a 3-token prompt node with a
    # 1-token reply leaf. c needs 5 cells now and 3 more while decoding: SGLang evicts just enough leaves, LRU
    # first: a's reply leaf (step 4), then a's prompt node once it has become a leaf (step 5); b is untouched.
    a = Request(0, 0, (1, 2, 3), 1, "a")
    b = Request(1, 1, (5, 6, 7), 1, "b")
    c = Request(2, 4, (20, 21, 22, 23, 24), 3, "c")
    m = RadixManager(12)
    run = simulate(m, [a, b, c], check=True)
    assert [e for e in frame_at(run, 4)["events"] if e["type"] == "evict"] == [{"type": "evict", "rid": 0, "cells": 1}]
    assert frame_at(run, 4)["state"].count("R") == 0 and frame_at(run, 4)["state"].count("P") == 5
    evicted = [e for f in run["frames"] for e in f["events"] if e["type"] == "evict"]
    assert {e["rid"] for e in evicted} == {0} and sum(e["cells"] for e in evicted) == 4
    # at the end nothing is locked: b (4 cells) and c (8) are all evictable, a is gone
    assert m.match_prefix((5, 6, 7))[0] and m.evictable_size_ == 4 + 8


def test_radix_lpm_reorders_queue():
    shared = tuple(range(1, 11))
    warm = Request(0, 0, shared + (50,), 1, "w")
    x = Request(1, 3, (90, 91, 92), 1, "x")  # arrives first, nothing cached
    y = Request(2, 3, shared + (60,), 1, "y")  # arrives second, 10 tokens cached
    for policy, first in (("fcfs", 1), ("lpm", 2)):
        run = simulate(RadixManager(64, schedule_policy=policy), [warm, x, y])
        admits = [e["rid"] for e in frame_at(run, 3)["events"] if e["type"] == "admit"]
        assert admits[0] == first


def test_radix_same_step_prefill_does_not_share():
    # SGLang inserts a prompt into the tree after its prefill batch: two new identical prefixes in one step are
    # both computed; the duplicate cells are freed when the second insert finds the first
    p = tuple(range(1, 9))
    reqs = [Request(0, 0, p + (20,), 1), Request(1, 0, p + (30,), 1)]
    m = RadixManager(64)
    s = simulate(m, reqs, check=True)["summary"]
    assert s["prefill_computed"] == 18
    assert m.cells_used() == 8 + 1 + 1 + 1 + 1  # shared prefix once, two 1-token suffixes, two reply tokens


# --- all managers: rejection, invariants -------------------------------------------------------------------------

MANAGERS = [
    lambda cap: SlotManager(cap),
    lambda cap: SlotManager(cap, n_parallel=2),
    lambda cap: PagedManager(cap, block_size=4),
    lambda cap: PagedManager(cap, block_size=4, enable_prefix_caching=False),
    lambda cap: RadixManager(cap),
    lambda cap: RadixManager(cap, schedule_policy="lpm"),
]


@pytest.mark.parametrize("make", MANAGERS)
def test_request_larger_than_pool_is_rejected(make):
    big = Request(0, 0, tuple(range(1, 40)), 5, "big")
    follow = Request(1, 0, tuple(range(1, 40)) + (7,), 1, "big", follows=0)
    ok = Request(2, 0, (1, 2, 3), 2, "ok")
    run = simulate(make(32), [big, follow, ok], check=True, max_steps=1000)
    s = run["summary"]
    assert "at most" in s["rejected"][0] and "rejected" in s["rejected"][1]
    assert s["finished"] == 1 and s["prompt_tokens"] == 3


@pytest.mark.parametrize("make", MANAGERS)
def test_oversized_follow_up_is_rejected_not_looped(make):
    # the first turn fits; its follow-up (arriving in the step the first one finishes) does not
    a = Request(0, 0, tuple(range(1, 11)), 4, "u")  # 14 tokens: fits every pool here
    b = Request(1, 0, tuple(range(1, 11)) + a.reply_tokens() + tuple(range(50, 70)), 2, "u", follows=0)  # 36
    s = simulate(make(32), [a, b], check=True, max_steps=1000)["summary"]
    assert s["finished"] == 1 and "at most" in s["rejected"][1]


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 8))
    prefixes = [tuple(range(1, 1 + draw(st.integers(0, 12)))), tuple(range(100, 106))]
    reqs = []
    for rid in range(n):
        if reqs and draw(st.booleans()):
            parent = reqs[draw(st.integers(0, len(reqs) - 1))]
            prompt = (
                tuple(parent.prompt)
                + tuple(parent.reply_tokens())
                + tuple(draw(st.lists(st.integers(200, 205), min_size=1, max_size=6)))
            )
            follows, think = parent.rid, draw(st.integers(0, 2))
        else:
            prompt = draw(st.sampled_from(prefixes)) + tuple(
                draw(st.lists(st.integers(300, 310), min_size=1, max_size=10))
            )
            follows, think = None, 0
        reqs.append(
            Request(rid, draw(st.integers(0, 6)), prompt, draw(st.integers(1, 6)), f"s{rid % 3}", follows, think)
        )
    return reqs


@pytest.mark.parametrize("make", MANAGERS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=workloads(), cap=st.integers(8, 64))
def test_invariants_hold_every_step(make, reqs, cap):
    m = make(cap)
    run = simulate(m, reqs, check=True, max_steps=5000)  # check: no cell owned twice, counts never negative...
    s = run["summary"]
    assert s["finished"] + len(s["rejected"]) == len(reqs)  # every request finishes or is rejected...
    assert all(isinstance(r, str) and r for r in s["rejected"].values())  # ...with a reason
    assert s["peak_cells_used"] <= cap
    for f in run["frames"]:
        assert len(f["state"]) == len(f["owner"]) == cap
        assert set(f["state"]) <= set(CELL_CODES)
        assert all((o == -1) == (c == ".") for o, c in zip(f["owner"], f["state"]))


# --- the module's figures ----------------------------------------------------------------------------------------


def test_compare_reproduces_the_module_listing():
    runs = compare(capacity_tokens=384)
    got = {
        k: (
            r["summary"]["prefill_computed"],
            r["summary"]["prompt_tokens"],
            r["summary"]["peak_concurrency"],
            r["summary"]["preemptions"],
        )
        for k, r in runs.items()
    }
    assert list(runs) == ["slots", "paged", "radix"]
    assert got == {"slots": (376, 652, 4, 0), "paged": (268, 652, 5, 0), "radix": (208, 652, 5, 0)}
    assert [f"{r['summary']['prefill_saved_frac']:.0%}" for r in runs.values()] == ["42%", "59%", "68%"]
    # the prompt total is the sum of the documented lengths
    assert sum(len(r.prompt) for r in chat_workload()) == 652


def test_compare_frames_are_compact_and_json():
    runs = compare(capacity_tokens=384)
    for run in runs.values():
        assert len(run["frames"]) <= run["summary"]["steps"]
        text = json.dumps(run["frames"])
        assert len(text) < 400_000
        last = run["frames"][-1]
        assert not last["running"] and not last["waiting"]


def test_exercise_3_radix_loses():
    reqs = radix_loses_workload()
    radix = simulate(RadixManager(RADIX_LOSES_CAPACITY, schedule_policy="lpm"), reqs, check=True)["summary"]
    paged = simulate(PagedManager(RADIX_LOSES_CAPACITY), reqs, check=True)["summary"]
    assert radix["prefill_computed"] > paged["prefill_computed"]
    assert (radix["prefill_computed"], paged["prefill_computed"], paged["preemptions"]) == (336, 272, 0)
    # the two ingredients: with fcfs, or with room to spare, radix no longer loses
    fcfs = simulate(RadixManager(RADIX_LOSES_CAPACITY), reqs)["summary"]
    roomy = simulate(RadixManager(512, schedule_policy="lpm"), reqs)["summary"]
    assert fcfs["prefill_computed"] <= paged["prefill_computed"]
    assert roomy["prefill_computed"] <= simulate(PagedManager(512), reqs)["summary"]["prefill_computed"]


def test_agent_workload_is_seeded_and_branches():
    a = agent_workload(60, seed=3)
    b = agent_workload(60, seed=3)
    assert [(r.arrival, tuple(r.prompt), r.reply, r.follows) for r in a] == [
        (r.arrival, tuple(r.prompt), r.reply, r.follows) for r in b
    ]
    assert len(a) == 60
    by = {r.rid: r for r in a}
    children: dict = {}
    for r in a:
        if r.follows is not None:
            p = by[r.follows]
            assert r.follows < r.rid and r.session == p.session
            assert tuple(r.prompt[: len(p.prompt) + len(p.reply)]) == tuple(p.prompt) + tuple(p.reply)
            children[r.follows] = children.get(r.follows, 0) + 1
    assert max(children.values()) >= 2  # some turn has two continuations: a branch
    assert all(tuple(r.prompt[:256]) == tuple(range(1, 257)) for r in a)  # shared system prompt


def test_agent_workload_small_pool_all_managers():
    reqs = agent_workload(
        24,
        seed=1,
        system_tokens=32,
        tool_tokens=48,
        n_toolsets=2,
        turns=(2, 4),
        msg_tokens=(4, 16),
        reply_tokens=(4, 12),
        session_gap=3,
    )
    out = {}
    for make in (SlotManager, PagedManager, RadixManager):
        s = simulate(make(384), reqs, check=True)["summary"]
        assert s["finished"] == len(reqs)
        out[s["manager"]] = s["prefill_computed"]
    assert out["radix"] <= out["paged"] <= out["slots"]


def test_agent_figure_preset_exercises_eviction_and_preemption():
    reqs = agent_workload(**AGENT_FIGURE_PRESET)
    runs = {}
    for make in (SlotManager, PagedManager, RadixManager):
        run = simulate(make(384), reqs, check=True)
        runs[run["summary"]["manager"]] = run
        assert run["summary"]["finished"] == len(reqs)
        assert any(e["type"] == "evict" for f in run["frames"] for e in f["events"])
    assert runs["paged"]["summary"]["preemptions"] >= 1
    assert compare(workload=reqs)["radix"]["summary"] == runs["radix"]["summary"]


def test_frames_need_cell_tracking():
    with pytest.raises(ValueError):
        simulate(RadixManager(16, track_cells=False), [Request(0, 0, (1, 2), 1)])
    s = simulate(RadixManager(16, track_cells=False), [Request(0, 0, (1, 2), 1)], record_frames=False)
    assert s["frames"] == [] and s["summary"]["finished"] == 1
