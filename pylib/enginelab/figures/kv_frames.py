"""The KV-managers figure's data: kv_managers.simulate's frames, typed, and what a manager's pool shows at a step.

    run = run_of(kv_managers.simulate(PagedManager(384), chat_workload(), record_frames=True))
    run.frames[0]  -> Frame(step=0, state="PPPP…", owner=(0, 0, …), events=(Event("arrive", 0),
                      Event("admit", 0, reused=0, computed=58)), …)
    run.live[0]    -> Counters(computed=58, reused=0, preemptions=0, concurrency=1, peak=1), summed over the frames
    frame_at(run, step, capacity) -> (frame index, cell codes, owners, exact); a step without a frame of its own
                      shows the last one before it, settled (its this-step codes in their steady form)
    cell_classes("p.", (0, -1), {0: 2}) -> ["k-prefill h2", "k-free"]

The figure (figures/kv_managers.py) caches one Sim per (workload, capacity, policy) and draws its Panels."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

# cell code (kv_managers frame "state" character) -> CSS classes; the hue class h<n> is added when the cell has an owner
CODE_CLASS = {
    ".": "k-free",
    "c": "k-cached",
    "r": "k-reused",
    "R": "k-reused now",
    "p": "k-prefill",
    "P": "k-prefill now",
    "d": "k-decode",
    "D": "k-decode now",
    "a": "k-alloc",
    "E": "k-evicted now",
    "X": "k-preempted now",
}
CLASS_CODE = {v: k for k, v in CODE_CLASS.items()}


@dataclass(frozen=True)
class Event:
    """One event of a frame (kv_managers' frame format): what happened to request `rid` in the step."""

    type: str  # arrive, admit, finish, evict, preempt or reject
    rid: int
    reused: int | None = None  # admit: prompt tokens reused from the cache
    computed: int | None = None  # admit: prompt tokens computed (prefill)
    cells: int | None = None  # evict, preempt: cells freed
    reason: str | None = None  # reject: why

    @classmethod
    def of(cls, e: dict) -> Event:
        return cls(**e)


@dataclass(frozen=True)
class TreeRow:
    """One node of SGLang's radix tree after a step (kv_managers' frame "tree")."""

    id: int
    parent: int  # 0: the root
    tokens: int  # tokens on the edge into the node
    lock_ref: int  # running requests whose path pins it (0: evictable)
    owner: int  # the request that inserted it


@dataclass(frozen=True)
class Frame:
    """One frame of kv_managers.simulate (its frame format, typed): the pool after one simulated step."""

    step: int
    state: str  # one cell code per cell (CODE_CLASS's keys)
    owner: tuple[int, ...]  # the request id per cell, -1 for a free cell
    running: tuple[int, ...]  # requests holding cells after the step, in admission order
    waiting: tuple[int, ...]  # requests that have arrived and are not admitted
    events: tuple[Event, ...]  # what happened in the step, in order
    tree: tuple[TreeRow, ...] = ()  # the radix manager's tree after the step (parents first); () for the others

    @classmethod
    def of(cls, f: dict) -> Frame:
        return cls(
            step=f["step"],
            state=f["state"],
            owner=tuple(f["owner"]),
            running=tuple(f["running"]),
            waiting=tuple(f["waiting"]),
            events=tuple(Event.of(e) for e in f["events"]),
            tree=tuple(TreeRow(*row) for row in f.get("tree", ())),
        )


@dataclass(frozen=True)
class RunSummary:
    """kv_managers.simulate's summary of one run (its keys, typed)."""

    manager: str
    capacity_tokens: int
    prefill_computed: int
    prompt_tokens: int
    prefill_saved_frac: float
    cache_hit_tokens: int
    peak_concurrency: int  # the most requests holding cells in one step
    preemptions: int
    peak_cells_used: int
    steps: int
    finished: int
    rejected: dict[int, str]  # request id -> why
    decode_tokens: int

    @classmethod
    def of(cls, summary: dict) -> RunSummary:
        return cls(**summary)


@dataclass(frozen=True)
class Counters:
    """A manager's running counters after a frame."""

    computed: int  # prefill tokens computed so far (admit events)
    reused: int  # prompt tokens reused so far
    preemptions: int
    concurrency: int  # requests holding cells during the frame's step
    peak: int  # the most so far (the frames' holding counts; compute shows the summary's once a run is done)


NO_COUNTERS = Counters(computed=0, reused=0, preemptions=0, concurrency=0, peak=0)  # before the first frame


class Frames:
    """A run's frames as typed Frames, each made the first time it is read: a new simulation shows one frame, and
    typing every frame's cells and events up front would add about a fifth to its cost."""

    __slots__ = ("_raw", "_done")

    def __init__(self, raw: list):
        self._raw = raw
        self._done: list = [None] * len(raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self))))
        f = self._done[i]
        if f is None:
            f = self._done[i] = Frame.of(self._raw[i])
        return f

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __eq__(self, other) -> bool:
        return isinstance(other, Frames) and tuple(self) == tuple(other)

    __hash__ = None


@dataclass(frozen=True)
class Run:
    """One manager's simulation: its frames, the counters after each, and simulate's summary."""

    frames: Frames
    steps: tuple[int, ...]  # each frame's step (idle stretches are skipped)
    live: tuple[Counters, ...]  # after each frame
    summary: RunSummary


@dataclass(frozen=True)
class Sim:
    """The three runs of one (workload, capacity, policy), and what the view needs of the requests."""

    key: tuple[str, int, str]  # (workload, capacity, policy)
    workload: str
    capacity: int
    policy: str
    runs: dict[str, Run]  # manager name -> its run
    hue: dict[int, int]  # request id -> colour (its session's)
    sessions: tuple[str, ...]  # in order of first appearance
    session_of: dict[int, str]  # request id -> session
    first_step: int
    last_step: int
    n_requests: int
    stops: tuple[int, ...]  # the steps Back / Step / Play stop at: every eventful step, and each quiet run's last
    quiet: dict[int, tuple[int, int]]  # a step in which nothing happens -> the run of such steps it belongs to
    cache: dict = field(default_factory=dict, compare=False, repr=False)  # built markup, reused across frames


def run_of(run: dict) -> Run:
    """One run of kv_managers.simulate (its dict, frames recorded) as a Run, with the counters after each frame."""
    raw = run["frames"]
    live = []  # cumulative counters after each frame (read from the frames as simulate gives them)
    computed = reused = preempt = peak = 0
    for f in raw:
        finished = 0
        for e in f["events"]:
            t = e["type"]
            if t == "admit":
                computed += e["computed"]
                reused += e["reused"]
            elif t == "preempt":
                preempt += 1
            elif t == "finish":
                finished += 1
        conc = len(f["running"]) + finished  # held KV in the step: running after it, or finished in it
        peak = max(peak, conc)
        live.append(Counters(computed=computed, reused=reused, preemptions=preempt, concurrency=conc, peak=peak))
    return Run(
        frames=Frames(raw), steps=tuple(f["step"] for f in raw), live=tuple(live), summary=RunSummary.of(run["summary"])
    )


def fold_quiet_steps(runs: dict[str, Run], first: int, last: int) -> tuple[tuple[int, ...], dict]:
    """Steps in which no manager records an event (nobody arrives, is admitted, finishes, is evicted, preempted or
    rejected: running requests only decode, or all is idle) are quiet. A run of quiet steps is one stop, at its
    last step; every other step is a stop of its own, and so are the first and the last."""
    eventful = {f["step"] for r in runs.values() for f in r.frames._raw if f["events"]}
    stops: list[int] = []
    quiet: dict[int, tuple[int, int]] = {}
    t = first
    while t <= last:
        if t in eventful or t in (first, last):
            stops.append(t)
            t += 1
            continue
        b = t
        while b + 1 < last and b + 1 not in eventful:
            b += 1
        for u in range(t, b + 1):
            quiet[u] = (t, b)
        stops.append(b)
        t = b + 1
    return tuple(stops), quiet


def settled(state: str) -> str:
    """A frame seen after its own step: nothing happened since, so this-step codes take their steady form."""
    return state.translate(_SETTLE)


_SETTLE = str.maketrans({"R": "r", "P": "p", "D": "d", "E": ".", "X": "."})


def frame_index(run: Run, step: int) -> tuple[int, bool]:
    """(index of the frame shown at a simulation step: the last one at or before it, -1 if none; whether the
    frame is that step's own)."""
    i = bisect_right(run.steps, step) - 1
    return i, i >= 0 and run.steps[i] == step


def frame_at(run: Run, step: int, capacity: int):
    """(index of the frame shown, cell codes, owners, exact) for one manager at a simulation step."""
    steps = run.steps
    i, _ = frame_index(run, step)
    if i < 0:
        return -1, "." * capacity, (-1,) * capacity, False
    f = run.frames[i]
    exact = steps[i] == step
    codes = f.state if exact else settled(f.state)
    owner = f.owner if exact else tuple(o if c != "." else -1 for o, c in zip(f.owner, codes))
    return i, codes, owner, exact


def cell_classes(codes: str, owner: tuple[int, ...], hue: dict, table: dict | None = None) -> list:
    """The class attribute of every cell (the same strings in `render` and in `frame_patch`).

    `table` (code -> owner -> class string) may be passed in to reuse its strings across frames."""
    if table is None:
        table = class_table(hue)
    return [table[c][o] for c, o in zip(codes, owner)]


def class_table(hue: dict) -> dict:
    owners = [-1] + list(hue)
    return {c: {o: cls + (f" h{hue[o]}" if o >= 0 else "") for o in owners} for c, cls in CODE_CLASS.items()}


@dataclass(frozen=True)
class Panel:
    """What one manager shows at the step: the frame (the last one at or before the step) and its counters."""

    frame_index: int  # -1: nothing has arrived yet
    frame_step: int | None
    exact: bool  # the frame is the step's own (otherwise it is shown settled: nothing happened since)
    done: bool  # the manager has finished by this step
    codes: str  # one cell code per cell
    owner: tuple[int, ...]  # request id per cell, -1 for a free cell
    computed: int
    reused: int
    preemptions: int
    concurrency: int  # requests holding cells in this step (0 between frames)
    peak: int  # so far; simulate's summary["peak_concurrency"] once done
    running: tuple[int, ...]  # the step's, when exact
    waiting: tuple[int, ...]
    events: tuple[Event, ...]
    cells_used: int
    cells_cached: int
    summary: RunSummary
    last_step: int | None  # the manager's last frame
    tree: tuple[TreeRow, ...] = ()  # the radix tree as the frame left it (radix only)
