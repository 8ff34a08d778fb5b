"""Three KV managers side by side: llama.cpp slots, vLLM paged blocks and SGLang's radix tree on one workload.

Each manager gets the same pool of `capacity_tokens` cells (one cell = the KV of one token) and the same
requests; kv_managers.simulate records one frame per simulated step (the frame format is documented at the top
of kv_managers.py). This module only draws those frames: a grid of cells per manager, coloured by the user whose
KV a cell holds, with the cell's state (cached, reused, prefilled, decoded, ...) shown by fill, outline and shape,
plus running counters summed from the frames' events. Peak concurrency is the module's: simulate's
summary["peak_concurrency"] once a manager has finished (and in the "At the end" line); while it runs, the most
requests its frames so far show holding cells (simulate reports its peak for the whole run only).

State: workload (a preset), capacity ("preset" or a pool size), policy (SGLang's schedule_policy, "preset" or
fcfs/lpm) and step (the simulation step; STEP_FIELD, so the page gets Back / Play / Step and a scrubber). The
scrubber covers the manager that runs longest; a manager that has finished keeps showing its last frame.

What the figure teaches, step by step: a caption says what each manager did in the step and why (which slot a
request took and what it reused, which blocks matched by block_hash, what match_prefix found, what was evicted
or preempted and what forced it); the radix column draws SGLang's tree (kv_managers' frame "tree": shared
prefixes as shared nodes, each with its lock_ref); and a run of steps in which no request arrives, is admitted,
finishes or is evicted is folded: Back / Step / Play jump over it to its last step (the root's data-stops, read
by site/assets/steps.js), whose caption tells the run as one.

Stepping is cheap: simulations are cached per (workload, capacity, policy) in this process, and `frame_patch`
gives the glue (site/py/main.py, site/assets/patch.js) only what changes from frame to frame: every cell's class
and the live counters, applied to the grids already in the page. A full `render` is needed only when the
workload, capacity or policy change.

compute(state) returns a KvData: the cached Sim (one Run per manager: simulate's frames as Frames, running
counters per frame, its summary as a RunSummary) and one Panel per manager, the frame it shows at the step.
Those types, and the frame a manager shows at a step, are figures/kv_frames.py's (importable from here too).
"""

from __future__ import annotations

from dataclasses import dataclass

import kv_managers as kvm

from .. import chart, fmt
from ..state import Choice, Int, Spec
from ..svg import Raw, data_details, el, join, table
from .kv_frames import (  # noqa: F401 (the frames' types stay importable from this module)
    CLASS_CODE,
    CODE_CLASS,
    NO_COUNTERS,
    Counters,
    Event,
    Frame,
    Frames,
    Panel,
    Run,
    RunSummary,
    Sim,
    TreeRow,
    cell_classes,
    class_table,
    fold_quiet_steps,
    frame_at,
    frame_index,
    run_of,
)

ID = "kv-managers"
TITLE = "Three KV managers, one workload"
LEDE = (
    "The same requests on three equal pools of KV cells: llama.cpp's slots, vLLM's 16-token blocks and "
    "SGLang's radix tree. Each square is one token's KV; its colour is the user it belongs to, its shape and "
    "outline say whether the manager reused it from the cache or computed it."
)
STEP_FIELD = "step"

MANAGERS = ("slots", "paged", "radix")
MANAGER_NAMES = {"slots": "llama.cpp slots", "paged": "vLLM paged blocks", "radix": "SGLang radix tree"}

COLS = 16  # cells per grid row: one row is one vLLM block (block_size 16)
PITCH = 10  # grid pitch in SVG units
CELL = 9  # drawn cell size (1 unit gap)
PAD = 1  # room for outlines at the grid's edges
N_HUES = 8  # user colours, cycled

# workload id -> (label, default capacity, default schedule_policy for the radix manager)
WORKLOADS = {
    "chat": ("Chat: 4 users, 2 turns each (the module's)", 384, "fcfs"),
    "radix-loses": ("Two cached documents, four questions (exercise 3's answer: try it first)", None, "lpm"),
    "agent": ("Agent sessions sharing tool definitions", 384, "fcfs"),
}
CAPACITIES = (64, 96, 128, 192, 256, 320, 384, 512, 768, 1024)

LEGEND = [  # (class, label), in reading order
    ("k-free", "free"),
    ("k-cached h0", "cached: kept for a later prefix hit, nobody running uses it"),
    ("k-reused h0", "reused from the cache (prefill skipped)"),
    ("k-prefill h0", "prefilled: prompt computed"),
    ("k-decode h0", "decoded: reply token"),
    ("k-alloc h0", "allocated, not written yet (rest of a block)"),
    ("k-evicted now h0", "evicted this step"),
    ("k-preempted now h0", "freed by preemption this step"),
    ("k-prefill now h0", "outlined: written or reused in this step"),
]


def _preset_capacity(workload: str) -> int:
    cap = WORKLOADS[workload][1]
    return kvm.RADIX_LOSES_CAPACITY if cap is None else cap


def _capacity(partial) -> int:
    c = partial.get("capacity", "preset")
    return _preset_capacity(partial["workload"]) if c == "preset" else int(c)


def _policy(partial) -> str:
    p = partial.get("policy", "preset")
    return WORKLOADS[partial["workload"]][2] if p == "preset" else p


# ---------------------------------------------------------------------------------------------------------
# Simulations, cached per (workload, capacity, policy)
# ---------------------------------------------------------------------------------------------------------
_SIM_CACHE: dict = {}  # key -> Sim, the most recently used last
# a simulation keeps its frames (0.3-2 MB; Pyodide's heap grows and never shrinks) and takes 3-7 ms to make again in
# CPython: keep the last few, for a reader going back and forth between settings
SIM_CACHE_MAX = 4


def workload_requests(workload: str) -> list:
    kv = kvm
    if workload == "chat":
        return kv.chat_workload()
    if workload == "radix-loses":
        return kv.radix_loses_workload()
    if workload == "agent":
        return kv.agent_workload(**kv.AGENT_FIGURE_PRESET)
    raise ValueError(f"unknown workload {workload!r}")


def simulation(workload: str, capacity: int, policy: str) -> Sim:
    """The three runs plus what the view needs per step, computed once per key and kept."""
    key = (workload, capacity, policy)
    hit = _SIM_CACHE.pop(key, None)
    if hit is not None:
        _SIM_CACHE[key] = hit  # most recently used
        return hit
    kv = kvm
    reqs = workload_requests(workload)
    managers = {
        "slots": kv.SlotManager(capacity),
        "paged": kv.PagedManager(capacity),
        "radix": kv.RadixManager(capacity, schedule_policy=policy),
    }
    runs = {name: run_of(kv.simulate(m, reqs, record_frames=True)) for name, m in managers.items()}
    sessions: list = []
    for r in reqs:
        if r.session not in sessions:
            sessions.append(r.session)
    first = min((r.steps[0] for r in runs.values() if r.steps), default=0)
    last = max((r.steps[-1] for r in runs.values() if r.steps), default=0)
    stops, quiet = fold_quiet_steps(runs, first, last)
    sim = Sim(
        key=key,
        workload=workload,
        capacity=capacity,
        policy=policy,
        runs=runs,
        hue={r.rid: sessions.index(r.session) % N_HUES for r in reqs},
        sessions=tuple(sessions),
        session_of={r.rid: r.session for r in reqs},
        first_step=first,
        last_step=last,
        n_requests=len(reqs),
        stops=stops,
        quiet=quiet,
    )
    _SIM_CACHE[key] = sim
    while len(_SIM_CACHE) > SIM_CACHE_MAX:
        del _SIM_CACHE[next(iter(_SIM_CACHE))]  # the least recently used
    return sim


def _sim_for(partial) -> Sim:
    return simulation(partial["workload"], _capacity(partial), _policy(partial))


class _Step(Int):
    """The simulation step. A step past the last one is clamped without a message: by then every manager has
    finished and shows its final frame, which is also what the reader sees after switching to a shorter run."""

    def parse(self, raw, partial):
        v, msg = super().parse(raw, partial)
        lo, hi = self.bounds(partial)
        if msg and v == hi and hi is not None:
            try:
                if int(float(str(raw).strip())) > hi:
                    return v, None
            except (ValueError, OverflowError):
                pass
        return v, msg


def _capacity_options(p):
    preset = _preset_capacity(p["workload"])
    return [("preset", f"Preset ({preset} cells)")] + [(str(c), f"{c} cells") for c in CAPACITIES]


def _policy_options(p):
    return [
        ("preset", f"Preset ({WORKLOADS[p['workload']][2]})"),
        ("fcfs", "fcfs (first come, first served)"),
        ("lpm", "lpm (longest prefix match first)"),
    ]


SPEC = Spec(
    ID,
    [
        Choice("workload", "Workload", default="chat", options=[(k, v[0]) for k, v in WORKLOADS.items()]),
        Choice(
            "capacity",
            "KV pool (capacity_tokens)",
            default="preset",
            options=_capacity_options,
            help="Cells per manager; one row of the grid is 16 cells, one vLLM block.",
        ),
        Choice(
            "policy",
            "SGLang schedule_policy",
            default="preset",
            options=_policy_options,
            help="Only the radix manager has it: lpm admits the longest cached prefix first.",
        ),
        _Step(
            "step",
            "Step",
            default=lambda p: _sim_for(p).first_step,
            min=lambda p: _sim_for(p).first_step,
            max=lambda p: _sim_for(p).last_step,
            widget="range",
            help="Drag, or use Back, Play and Step.",
        ),
    ],
)


State = SPEC.State  # this figure's state: workload, capacity, policy, step


def default_state() -> State:
    return SPEC.default()


# ---------------------------------------------------------------------------------------------------------
# Compute: the frame each manager shows at a step, and its counters
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KvData:
    state: State
    sim: Sim
    step: int  # clamped to the simulation's steps
    capacity: int
    policy: str
    panels: dict[str, Panel]  # manager name -> its panel, in MANAGERS order
    workload_label: str
    quiet: tuple[int, int] | None = None  # the folded run of quiet steps this step belongs to (None: eventful)


def _classes(sim: Sim, name: str, panel: Panel) -> list:
    cache = sim.cache
    key = ("classes", name, panel.frame_index, panel.exact)
    got = cache.get(key)
    if got is None:
        if "table" not in cache:
            cache["table"] = class_table(sim.hue)
        got = cache[key] = cell_classes(panel.codes, panel.owner, sim.hue, cache["table"])
    return got


# ---------------------------------------------------------------------------------------------------------
# The caption: what each manager did in the step, and why (from the frame's events and each engine's rules)
# ---------------------------------------------------------------------------------------------------------
def _ids(rids) -> str:
    rids = list(rids)
    return ", ".join(f"#{r}" for r in rids[:-1]) + (" and " if len(rids) > 1 else "") + f"#{rids[-1]}"


def _admit_why(name: str, e: Event, sim: Sim) -> str:
    who, r, c = f"#{e.rid}", e.reused, e.computed
    if name == "slots":
        if r:
            return f"{who} took the idle slot whose cache shares its first {r} tokens: {r} reused, {c} computed"
        return f"{who} took a slot with nothing of its prompt cached (the least recently used one): {c} computed"
    if name == "paged":
        if r:
            return (
                f"{who}'s first {r // 16} full blocks matched cached blocks by block_hash: {r} tokens reused, "
                f"{c} computed"
            )
        return f"{who} found no full 16-token block of its prompt cached: {c} computed"
    if r:
        return f"match_prefix found the first {r} tokens of {who} in the tree (lock_ref +1 on that path): {c} computed"
    return f"match_prefix found nothing of {who} in the tree: {c} computed"


def _evict_why(name: str, rid: int, cells: int, n: int) -> str:
    """n evict events of one request's KV in one step, `cells` cells in all."""
    if name == "slots":
        return f"cleared an idle slot holding {cells} cells of #{rid}: the unified buffer was full"
    if name == "paged":
        blocks = "a free block" if n == 1 else f"{n} free blocks"
        return (
            f"took {blocks} from the head of free_block_queue that still cached {cells} cells of #{rid}, so "
            f"{'its block_hash is' if n == 1 else 'their block_hashes are'} forgotten"
        )
    leaves = "the least recently used leaf" if n == 1 else f"{n} least recently used leaves"
    return f"evicted {cells} cells of #{rid} ({leaves} with lock_ref 0) to make room"


def _finish_why(name: str, rid: int) -> str:
    if name == "slots":
        return f"#{rid} finished: its slot keeps the KV, for a next prompt that starts the same way"
    if name == "paged":
        return f"#{rid} finished: its blocks return to free_block_queue; full ones keep their block_hash"
    return f"#{rid} finished: prompt and reply are inserted into the tree and its path unlocked (lock_ref -1)"


def _waiting_why(name: str, p: Panel, preempted: bool, many: bool) -> str:
    its = "their prompts" if many else "its prompt"
    if name == "slots" and len(p.running) >= 4:
        return "all 4 slots are busy"
    if name == "slots":
        return "no idle slot has room for it yet (a slot freed in this step takes a task from the next)"
    if name == "paged" and preempted:
        return "vLLM admits nothing in a step in which it had to preempt"
    if name == "radix":
        return f"free plus evictable cells cannot hold {its} and every running reply"
    return f"not enough free cells for {its} and {'their replies' if many else 'its reply'}"


def story(name: str, data: KvData) -> str:
    """One or two sentences: what this manager did at the step (or over the folded run) and why."""
    p, sim = data.panels[name], data.sim
    if p.frame_index < 0:
        return "Nothing has arrived yet."
    if p.done and data.step > p.last_step:
        return f"Finished at step {p.last_step}: every request has its reply."
    if data.quiet is not None:
        a, b = data.quiet
        n = len(p.running) if p.exact else 0
        steps = data.step - a + 1  # of the run, up to this step (Back / Step land on its last: the whole run)
        if not n:
            return "Idle: nothing running or waiting." if not p.waiting else "Waiting: nothing fits yet."
        who = "its running request" if n == 1 else f"each of its {n} running requests"
        so_far = "" if data.step == b else f" (step {steps} of the {b - a + 1} quiet steps {a}–{b})"
        return (
            f"{'One step' if steps == 1 else f'{steps} steps'} of decoding{so_far}: {who} wrote {steps} reply "
            f"token{'s' if steps != 1 else ''}; nothing arrived, was admitted, finished or was evicted."
        )
    if not p.exact:
        return "Idle: nothing running or waiting."
    parts: list[str] = []
    preempted = any(e.type == "preempt" for e in p.events)
    evicted: dict[int, list[int]] = {}  # rid -> cells per evict event (told once, at its first)
    for e in p.events:
        if e.type == "evict":
            evicted.setdefault(e.rid, []).append(e.cells)
    admitted = [e.rid for e in p.events if e.type == "admit"]
    for e in p.events:
        if e.type == "admit":
            parts.append(_admit_why(name, e, sim))
        elif e.type == "evict":
            if e.rid in evicted:
                cells = evicted.pop(e.rid)
                parts.append(_evict_why(name, e.rid, sum(cells), len(cells)))
        elif e.type == "preempt":
            parts.append(
                f"preempted #{e.rid}, the latest admitted request ({e.cells} cells freed): a running request needed "
                "a new block and none was free; it will be recomputed"
            )
        elif e.type == "finish":
            parts.append(_finish_why(name, e.rid))
        elif e.type == "reject":
            parts.append(f"rejected #{e.rid}: {e.reason}")
    arrived = [e.rid for e in p.events if e.type == "arrive"]
    if arrived:
        parts.insert(0, f"{_ids(arrived)} arrived")
    if name == "radix" and data.policy == "lpm" and any(w < a for w in p.waiting for a in admitted):
        parts.append("lpm ran the longest cached prefixes first, ahead of earlier arrivals")
    if p.waiting:
        many = len(p.waiting) > 1
        parts.append(f"{_ids(p.waiting)} wait{'' if many else 's'}: {_waiting_why(name, p, preempted, many)}")
    decoding = [r for r in p.running if not any(e.type == "admit" and e.rid == r for e in p.events)]
    if not parts:
        return f"{_ids(decoding)} decoded one token each." if decoding else "Nothing happened."
    text = "; ".join(parts)
    return f"{text[0].upper()}{text[1:]}."


def compute(state: State) -> KvData:
    cap = _capacity(state.as_dict())
    pol = _policy(state.as_dict())
    sim = simulation(state.workload, cap, pol)
    step = min(max(state.step, sim.first_step), sim.last_step)
    panels = {}
    for name in MANAGERS:
        run = sim.runs[name]
        i, codes, owner, exact = frame_at(run, step, cap)
        live = run.live[i] if i >= 0 else NO_COUNTERS
        f = run.frames[i] if i >= 0 else None
        done = bool(run.steps) and step >= run.steps[-1]
        used = cap - codes.count(".") - codes.count("E") - codes.count("X")
        cached = codes.count("c")
        panels[name] = Panel(
            frame_index=i,
            frame_step=run.steps[i] if i >= 0 else None,
            exact=exact,
            done=done,
            codes=codes,
            owner=owner,
            computed=live.computed,
            reused=live.reused,
            preemptions=live.preemptions,
            concurrency=live.concurrency if exact else 0,
            # the module's own peak once the run is over; before that, the frames' highest holding count so far
            peak=run.summary.peak_concurrency if done else live.peak,
            running=f.running if (f and exact) else (),
            waiting=f.waiting if (f and exact) else (),
            events=f.events if (f and exact) else (),
            cells_used=used,
            cells_cached=cached,
            summary=run.summary,
            last_step=run.steps[-1] if run.steps else None,
            tree=f.tree if f else (),
        )
    return KvData(
        state=state,
        sim=sim,
        step=step,
        capacity=cap,
        policy=pol,
        panels=panels,
        workload_label=WORKLOADS[state.workload][0],
        quiet=sim.quiet.get(step),
    )


def describe(data: KvData) -> str:
    p = data.panels
    parts = [f"{n} {p[n].computed} computed, {p[n].concurrency} running" for n in MANAGERS]
    return (
        f"{data.workload_label} on {data.capacity} KV cells per manager, step {data.step} of "
        f"{data.sim.last_step}: prefill tokens computed so far and requests holding cells now: "
        + "; ".join(parts)
        + "."
    )


# ---------------------------------------------------------------------------------------------------------
# Render
# ---------------------------------------------------------------------------------------------------------
def _grid_geometry(capacity: int) -> tuple[int, int]:
    rows = (capacity + COLS - 1) // COLS
    return COLS * PITCH - 1 + 2 * PAD, rows * PITCH - 1 + 2 * PAD


def _cell_prefixes(capacity: int, cache: dict) -> list:
    key = ("prefix", capacity)
    if key not in cache:
        cache[key] = [
            f'<rect x="{PAD + (i % COLS) * PITCH}" y="{PAD + (i // COLS) * PITCH}" width="{CELL}" '
            f'height="{CELL}" data-i="{i}" class="'
            for i in range(capacity)
        ]
    return cache[key]


def _grid(name: str, data: KvData, **pos) -> Raw:
    sim, cap = data.sim, data.capacity
    panel = data.panels[name]
    w, h = _grid_geometry(cap)
    classes = _classes(sim, name, panel)
    # Built with a format string, not el(): 1,000+ cells; every piece is a number or one of CODE_CLASS's words.
    cells = Raw("".join(p + c + '"/>' for p, c in zip(_cell_prefixes(cap, sim.cache), classes)))
    tid, did = f"kv-grid-{name}-title", f"kv-grid-{name}-desc"
    return el(
        "svg",
        [
            el("title", f"{MANAGER_NAMES[name]}: {cap} KV cells, {COLS} per row", id_=tid),
            el(
                "desc",
                "One square per KV cell. Colour: the user whose tokens it holds. Solid square: prompt "
                "computed; round: reply token; pale with an outline: reused from the cache; pale without "
                "one: cached, unused; grey: free.",
                id_=did,
            ),
            el("g", cells, id_=f"kv-cells-{name}", class_="cells"),
        ],
        xmlns="http://www.w3.org/2000/svg",
        viewBox=f"0 0 {w} {h}",
        width=w,
        height=h,
        role="img",
        aria_labelledby=f"{tid} {did}",
        class_="chart kv-grid",
        id_=f"kv-grid-{name}",
        **pos,
    )


def _status_text(name: str, data: KvData) -> str:
    p = data.panels[name]
    if p.done and data.step > p.last_step:
        return f"finished at step {p.last_step}"
    if p.frame_index < 0:
        return "nothing has arrived yet"
    if not p.exact:
        return "idle (nothing running or waiting)"
    n_run, n_wait = len(p.running), len(p.waiting)
    return f"{n_run} running, {n_wait} waiting" + (" · last step" if p.done else "")


COUNTERS = (  # (key, label): the live readouts of a panel, in order
    ("computed", "Prefill computed"),
    ("reused", "Reused (saved)"),
    ("concurrency", "Holding cells now"),
    ("peak", "Peak so far"),
    ("preemptions", "Preemptions"),
    ("cells_used", "Cells in use"),
)


def _counter_values(p: Panel, cap: int) -> dict:
    """{COUNTERS key: (text, value)} of a panel."""
    return {
        "computed": (f"{p.computed:,}", p.computed),
        "reused": (f"{p.reused:,}", p.reused),
        "concurrency": (str(p.concurrency), p.concurrency),
        "peak": (str(p.peak), p.peak),
        "preemptions": (str(p.preemptions), p.preemptions),
        "cells_used": (f"{p.cells_used}/{cap}", p.cells_used),
    }


def _live_values(name: str, data: KvData) -> dict:
    """{element id: (text, data-value or None)} for every part of a panel that changes between frames."""
    p, cap = data.panels[name], data.capacity
    out = {f"kv-{name}-status": (_status_text(name, data), None)}
    out.update({f"kv-{name}-{k}": (text, fmt.raw(value)) for k, (text, value) in _counter_values(p, cap).items()})
    out[f"kv-{name}-cached"] = (f"{p.cells_cached} cached", None)
    out[f"kv-{name}-events"] = (story(name, data), None)
    return out


def _live(name: str, data: KvData) -> Raw:
    """The per-frame part of a panel: status, counters and this step's events. Every part that changes has an
    id, so frame_patch can rewrite its text (and data-value) in place."""
    p = data.panels[name]
    v = _live_values(name, data)
    values = _counter_values(p, data.capacity)
    units = {
        "computed": f"of {p.summary.prompt_tokens:,}",
        "reused": "tokens",
        "concurrency": "requests",
        "peak": "requests",
    }
    readouts = []
    for k, label in COUNTERS:
        text, value = values[k]
        if k == "cells_used":
            readouts.append(
                chart.readout(
                    f"{name}_{k}",
                    value,
                    text,
                    label,
                    v[f"kv-{name}-cached"][0],
                    output_id=f"kv-{name}-{k}",
                    unit_id=f"kv-{name}-cached",
                )
            )
        else:
            readouts.append(
                chart.readout(f"{name}_{k}", value, text, label, units.get(k, ""), output_id=f"kv-{name}-{k}")
            )
    return join(
        [
            el("p", v[f"kv-{name}-status"][0], class_="kv-status", id_=f"kv-{name}-status"),
            el("dl", readouts, class_="readouts kv-readouts"),
        ]
    )


def _final(name: str, data: KvData) -> Raw:
    s = data.panels[name].summary
    rej = len(s.rejected)
    parts = [
        el("strong", "At the end: "),
        el("span", f"{s.prefill_computed:,}", **chart.readout_attrs(f"{name}_final_computed", s.prefill_computed)),
        f" of {s.prompt_tokens:,} prompt tokens computed ({s.prefill_saved_frac:.0%} saved), peak ",
        el("span", str(s.peak_concurrency), **chart.readout_attrs(f"{name}_final_peak", s.peak_concurrency)),
        f" at once, {s.preemptions} preemption{'s' if s.preemptions != 1 else ''}, "
        f"{s.steps} steps" + (f", {rej} rejected" if rej else "") + ".",
    ]
    return el("p", parts, class_="kv-final", id_=f"kv-final-{name}")


def _subtitle(name: str, data: KvData) -> str:
    if name == "slots":
        return "4 slots (-np auto) in one unified buffer"
    if name == "paged":
        return f"block_size 16: {data.capacity // 16} blocks, prefix caching on"
    return f"token-granular tree, schedule_policy {data.policy}"


def _tree_html(data: KvData) -> Raw:
    """SGLang's radix tree after the step, as a nested list: one node per edge of shared tokens, coloured by the
    request that inserted it, with its lock_ref (the running requests whose path pins it; 0: evictable) and how
    many branches share it. Built from kv_managers' frame "tree"."""
    rows = data.panels["radix"].tree
    if not rows:
        return el("p", "The tree is empty: nothing has been inserted yet.", class_="kv-tree-empty")
    kids: dict[int, list[TreeRow]] = {}
    for r in rows:
        kids.setdefault(r.parent, []).append(r)
    hue = data.sim.hue

    def node(r: TreeRow) -> Raw:
        sub = kids.get(r.id, [])
        label = [
            el("span", "", class_=f"kv-tree-sw h{hue.get(r.owner, 0)}", aria_hidden="true"),
            el("span", f"{r.tokens} token{'s' if r.tokens != 1 else ''}", class_="kv-tree-n"),
            el(
                "span",
                f"lock_ref {r.lock_ref}" if r.lock_ref else "lock_ref 0 · evictable",
                class_="kv-tree-lock" + (" locked" if r.lock_ref else ""),
            ),
        ]
        if len(sub) > 1:
            label.append(el("span", f"shared by {len(sub)} branches", class_="kv-tree-shared"))
        return el(
            "li",
            [el("span", label, class_="kv-tree-node")] + ([el("ul", [node(c) for c in sub])] if sub else []),
            class_="locked" if r.lock_ref else None,
        )

    return el("ul", [node(r) for r in kids.get(0, [])], class_="kv-tree-list", aria_label="Radix tree")


def _tree(data: KvData) -> Raw:
    return el(
        "figure",
        [
            el("figcaption", "The radix tree (a node per shared run of tokens, owner's colour):"),
            el("div", _tree_html(data), id_="kv-radix-tree", class_="kv-tree-body"),
        ],
        class_="kv-tree",
    )


def _panel(name: str, data: KvData) -> Raw:
    return el(
        "section",
        [
            el("h2", MANAGER_NAMES[name], id_=f"kv-h-{name}"),
            el("p", _subtitle(name, data), class_="kv-sub", id_=f"kv-sub-{name}"),
            _grid(name, data),
            _tree(data) if name == "radix" else "",
            el("div", _live(name, data), id_=f"kv-live-{name}", class_="kv-live"),
            _final(name, data),
        ],
        class_=f"kv-panel kv-{name}",
        aria_labelledby=f"kv-h-{name}",
        data_manager=name,
    )


def _swatch(cls: str) -> Raw:
    """One grid cell drawn on its own, 14 px: a legend's key."""
    return el(
        "svg",
        el("rect", x=PAD, y=PAD, width=CELL, height=CELL, class_=cls),
        xmlns="http://www.w3.org/2000/svg",
        viewBox=f"0 0 {CELL + 2 * PAD} {CELL + 2 * PAD}",
        width=14,
        height=14,
        class_="chart kv-grid kv-swatch",
        aria_hidden="true",
        focusable="false",
    )


def _legend() -> Raw:
    items = [el("li", [_swatch(cls), " ", label]) for cls, label in LEGEND]
    return el("div", el("ul", items, class_="kv-legend-codes"), class_="kv-legend", aria_label="Legend")


def _users(data: KvData) -> Raw:
    sim = data.sim
    items = []
    for i, s in enumerate(sim.sessions):
        rids = [rid for rid, ses in sim.session_of.items() if ses == s]
        items.append(
            el(
                "li",
                [_swatch(f"k-prefill h{i % N_HUES}"), " ", f"{s} (requests {', '.join('#' + str(r) for r in rids)})"],
            )
        )
    return el("ul", items, class_="kv-legend-users", id_="kv-users", aria_label="Users (colours)")


def _step_title(data: KvData) -> str:
    """'Step 5', or 'Steps 6–13' at the last step of a folded run of quiet steps (where Step lands)."""
    if data.quiet is not None and data.quiet[0] != data.quiet[1] and data.step == data.quiet[1]:
        return f"Steps {data.quiet[0]}–{data.quiet[1]}"
    return f"Step {data.step}"


def _caption(data: KvData) -> Raw:
    """The step, then what each manager did in it and why (story); folded runs of quiet steps are told as one."""
    sim = data.sim
    return el(
        "div",
        [
            el(
                "p",
                [
                    el("strong", _step_title(data), id_="kv-caption-step"),
                    f" (steps {sim.first_step}–{sim.last_step}; Back and Step skip the quiet ones) · "
                    f"{data.workload_label} · {data.capacity} cells per manager",
                ],
                class_="step-caption",
            ),
            el(
                "ul",
                [
                    el(
                        "li",
                        [el("strong", f"{MANAGER_NAMES[n]}: "), el("span", story(n, data), id_=f"kv-{n}-events")],
                    )
                    for n in MANAGERS
                ],
                class_="kv-story",
                aria_live="polite",
            ),
        ],
        class_="kv-caption",
        id_="kv-caption",
    )


def _table(data: KvData) -> Raw:
    """Per step and manager: the counters (static for a simulation, so it is built once)."""
    sim = data.sim
    key = ("table",)
    if key not in sim.cache:
        header = ["Step"] + [f"{n}: {c}" for n in MANAGERS for c in ("computed", "reused", "holding")]
        rows = []
        for t in range(sim.first_step, sim.last_step + 1):
            row = [str(t)]
            for n in MANAGERS:
                run = sim.runs[n]
                i, exact = frame_index(run, t)  # (the counters only: no cells)
                lv = run.live[i] if i >= 0 else NO_COUNTERS
                row += [str(lv.computed), str(lv.reused), str(lv.concurrency if exact else 0)]
            rows.append(row)
        caption = (
            f"{data.workload_label}, {data.capacity} cells: prefill tokens computed and reused so "
            f"far, and requests holding cells, per step"
        )
        sim.cache[key] = data_details(
            f"Data table (steps {sim.first_step}–{sim.last_step})", table(caption, header, rows), id_="kv-table"
        )
    return sim.cache[key]


def _note(data: KvData) -> Raw:
    return el(
        "p",
        [
            "Counting: a request holds cells in a step if it decoded or was admitted in it, so a user's finishing "
            "turn and next turn both count in the step where one hands over to the other. Slots never run more than "
            "n_parallel requests; paged and radix admit while cells last. Requests are numbered #0, #1, … in the "
            "order the workload lists them."
        ],
        class_="note",
    )


def _patch_key(data: KvData) -> str:
    """The simulation a frame patch belongs to (data-patch-key)."""
    return "|".join(str(k) for k in data.sim.key)


def _patch_base(data: KvData) -> str:
    """The skeleton (data-patch-base): the grids' size is all that fixes the figure's markup outside its parts."""
    return f"cells-{data.capacity}"


def _table_slot(data: KvData, defer: bool) -> Raw:
    """The data table, or (defer) its closed box with a placeholder that deferred_html fills right after."""
    if not defer:
        return _table(data)
    sim = data.sim
    note = el("p", "Building the table…", class_="note", data_deferred="table")
    return data_details(f"Data table (steps {sim.first_step}–{sim.last_step})", note, id_="kv-table")


def deferred_html(state) -> dict:
    """{element id: inner HTML} that the glue fills in after render(..., defer=True): the data table (64 rows
    of counters, in a closed box), which a new simulation would otherwise add to the change that asked for it."""
    return {"kv-table": chart.inner(_table(compute(state)))}


def render(data: KvData, defer: bool = False) -> str:
    """The figure for one frame; defer: the data table as a placeholder (the browser; see deferred_html)."""
    sim = data.sim
    key = _patch_key(data)
    return el(
        "div",
        [
            _caption(data),
            el("div", [_panel(n, data) for n in MANAGERS], class_="kv-panels"),
            _legend(),
            _users(data),
            _note(data),
            _table_slot(data, defer),
        ],
        class_="fig-kv",
        id_="kv-fig",
        data_step=str(data.step),
        data_patch_key=key,
        data_patch_base=_patch_base(data),
        data_stops=",".join(map(str, sim.stops)),  # where Back / Step / Play stop (site/assets/steps.js)
    )


def _classes_text(sim: Sim, name: str, panel: Panel) -> str:
    key = ("classes-text", name, panel.frame_index, panel.exact)
    got = sim.cache.get(key)
    if got is None:
        got = sim.cache[key] = "|".join(_classes(sim, name, panel))
    return got


def sheet_svg(data: KvData) -> str:
    """The three grids of one frame side by side in one standalone SVG (what "Download SVG" saves and the golden
    tests pin; the page itself stacks three SVGs so phones can reflow them): a title line with the state (workload,
    pool, policy, step), each grid with its manager's counters, and the legend (cell states, users' colours)."""
    w, h = _grid_geometry(data.capacity)
    gap, top, bottom = 16, 76, 38
    sim = data.sim
    parts = [
        el("text", "Three KV managers, one workload", x=0, y=14, class_="kv-sheet-title"),
        el("text", data.workload_label, x=0, y=32, class_="kv-sheet-state"),
        el(
            "text",
            f"{data.capacity} KV cells per manager · SGLang schedule_policy {data.policy} · "
            f"{_step_title(data)} (steps {sim.first_step}–{sim.last_step})",
            x=0,
            y=48,
            class_="kv-sheet-state",
        ),
    ]
    for j, n in enumerate(MANAGERS):
        x = j * (w + gap)
        p = data.panels[n]
        parts.append(el("text", MANAGER_NAMES[n], x=x, y=top - 8, class_="kv-name"))
        parts.append(_grid(n, data, x=x, y=top))
        parts.append(el("text", f"computed {p.computed}, reused {p.reused}", x=x, y=top + h + 14, class_="kv-count"))
        parts.append(
            el(
                "text",
                f"holding {p.concurrency}, preempted {p.preemptions}",
                x=x,
                y=top + h + 30,
                class_="kv-count",
            )
        )
    # the legend: what a cell's look means, then whose colour is whose
    ly = top + h + bottom + 8
    swatch = 11
    items = [(cls, label) for cls, label in LEGEND] + [
        (f"k-prefill h{i % N_HUES}", f"user {s_}") for i, s_ in enumerate(sim.sessions)
    ]
    legend = []
    for i, (cls, label) in enumerate(items):
        y = ly + i * 16
        legend.append(
            el(
                "svg",
                el("rect", x=PAD, y=PAD, width=CELL, height=CELL, class_=cls),
                x=0,
                y=y - swatch + 2,
                width=swatch,
                height=swatch,
                viewBox=f"0 0 {CELL + 2 * PAD} {CELL + 2 * PAD}",
                class_="chart kv-grid kv-swatch",
            )
        )
        legend.append(el("text", label, x=swatch + 6, y=y, class_="kv-legend-label"))
    width, height = 3 * w + 2 * gap, ly + len(items) * 16
    return str(
        el(
            "svg",
            [
                el("title", f"Three KV managers, {_step_title(data).lower()}"),
                el("desc", describe(data)),
                join(parts),
                el("g", legend, class_="legend"),
            ],
            xmlns="http://www.w3.org/2000/svg",
            viewBox=f"0 0 {width} {height}",
            width=width,
            height=height,
            role="img",
            class_="chart kv-sheet",
            data_step=str(data.step),
        )
    )


def frame_patch(data: KvData) -> dict:
    """What changes from one frame to another of the same simulation, for the glue's applyPatch: every cell's
    class per grid (in cell order, joined by "|"), the text of the step caption and of each live counter, and
    the counters' data-value. The patch applies only to a figure in the page with the same data-patch-key; the
    result equals a full render of `data` (tests/test_fig_kv_managers.py and the browser tests check it)."""
    sim = data.sim
    text = {"kv-caption-step": _step_title(data)}
    attrs = {"kv-fig": {"data-step": str(data.step)}}
    for n in MANAGERS:
        for eid, (t, value) in _live_values(n, data).items():
            text[eid] = t
            if value is not None:
                attrs[eid] = {"data-value": value}
    return {
        "key": _patch_key(data),
        "classes": {f"kv-cells-{n}": _classes_text(sim, n, data.panels[n]) for n in MANAGERS},
        "text": text,
        "html": {"kv-radix-tree": str(_tree_html(data))},
        "attrs": attrs,
    }


def base_patch(data: KvData, defer: bool = False) -> dict:
    """Another simulation on the same grids (a new workload, policy or capacity with as many cells): every part
    that depends on the simulation by html, the cells' classes, and the root's new data-patch-key and stops, for
    a figure in the page with the same data-patch-base. Rewriting these parts instead of the whole figure keeps
    the 1,000+ cells (most of the markup) in place. The result equals a full render of `data` (with the same
    defer: tests)."""
    sim = data.sim
    html = {
        "kv-caption": chart.inner(_caption(data)),
        "kv-radix-tree": str(_tree_html(data)),
        "kv-users": chart.inner(_users(data)),
        "kv-table": chart.inner(_table_slot(data, defer)),
    }
    for n in MANAGERS:
        html[f"kv-sub-{n}"] = chart.inner(el("p", _subtitle(n, data)))
        html[f"kv-live-{n}"] = str(_live(n, data))
        html[f"kv-final-{n}"] = chart.inner(_final(n, data))
    return {
        "base": _patch_base(data),
        "classes": {f"kv-cells-{n}": _classes_text(sim, n, data.panels[n]) for n in MANAGERS},
        "html": html,
        "attrs": {
            "kv-fig": {
                "data-step": str(data.step),
                "data-patch-key": _patch_key(data),
                "data-stops": ",".join(map(str, sim.stops)),
            }
        },
    }


def download_svg(data: KvData) -> str:
    """What "Download SVG" saves: the three grids of the current frame in one file (sheet_svg)."""
    return str(sheet_svg(data))
