"""kv_managers section 7: the module's workloads and compare (see the package docstring)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from enginelab.checks import brief, check_bool, check_int, check_number, is_int
from enginelab.checks import check as _check

from .loop import simulate
from .paged import PagedManager
from .pool import MAX_CAPACITY_TOKENS, MAX_REQUESTS, MAX_WORKLOAD_TOKENS, Request
from .radix import RadixManager
from .slots import SlotManager

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
