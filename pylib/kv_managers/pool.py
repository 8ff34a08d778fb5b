"""kv_managers sections 1 and 2: what a simulation may be asked for, the requests, and the cell pool's
bookkeeping (see the package docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from enginelab.checks import brief, check_int, is_int
from enginelab.checks import check as _check

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
