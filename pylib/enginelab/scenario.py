"""The calculator family's one compute stage: a calculator state in, a typed Scenario out.

    state (figures/calculator.py SPEC) -> build(state) -> Scenario -> calculator / explain / advisor findings

A Scenario holds everything the views of one setup read: the model and machine the state names (a catalog
entry, your pasted config.json, the GGUF file you dropped, or a machine you described), the placement
llama.cpp would make (perf_model.place, once), the decode and prefill timings (perf_model.decode_step_time
and prefill_time, once), the readouts, and the llama-server command line (engine_io.llama_server_command).
The calculator's numbers, their "how is this computed?" boxes (enginelab.explain) and the advisor's findings
(enginelab.findings) all render from it, so a number on the page is one hop from the Scenario field it
shows and two from the perf_model function that computed it.

build() is pure and memoised per state: the calculator's render and the deferred explanations and findings
that follow it share one Scenario.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import perf_model as pm
from perf_model.work import warm_steps as _warm_pair_steps
from perf_model.work import warm_tables_steps as _warm_tables_steps

from . import custom, gpus, remote
from .measured import builds as _builds
from .measured.effects import decode_effects
from .measured.features import TODAY
from .measured.physics import decode_seconds

CATALOG_DEFAULT_MODEL = "qwen2.5-32b"


# ---------------------------------------------------------------------------------------------------------
# What a state names
# ---------------------------------------------------------------------------------------------------------
def model_for(values) -> pm.Model:
    """The Model a state (or the partial values of one, while a Spec validates it) names: a catalog key,
    model=custom (your config.json, compact, in `cfg`) or model=gguf (the GGUF file dropped into this page).
    A config that does not parse stands in with the default catalog model for the bounds of later fields;
    build() reports the error."""
    key = values["model"]
    if key == "custom":
        m, _err = custom.config_result(values.get("cfg", ""))
        return m if m is not None else pm.MODELS[CATALOG_DEFAULT_MODEL]
    if key == "gguf" and custom.dropped_model() is not None:
        return custom.dropped_model()
    if key == "remote":  # read from Hugging Face or a link (enginelab.remote); the default stands in until then
        rm = remote.loaded(values)
        return rm.model if rm is not None else pm.MODELS[CATALOG_DEFAULT_MODEL]
    return pm.MODELS.get(key) or pm.MODELS[CATALOG_DEFAULT_MODEL]


def quant_for(values):
    """The state's quantization, or None where the model is a GGUF file's own tensor types (a dropped file, or
    a remote GGUF header)."""
    if values["model"] == "gguf":
        return None
    if values["model"] == "remote":
        rm = remote.loaded(values)
        if rm is not None and rm.kind == "gguf":
            return None
    return values["quant"]


def warm_steps(states):
    """Steps (functions of no argument) that fill, one at a time, the per-model caches a first build() of each of
    these states would fill (perf_model.work.warm_steps): for the glue to run while the page is idle, so that a
    reader's next model or quantization is not a first visit. Only catalog models (a custom, dropped or remote
    model is the one the page has)."""
    for state in states:
        v = {**DEFAULTS, **state.as_dict()}
        if v["model"] in pm.MODELS:
            yield from _warm_pair_steps(pm.MODELS[v["model"]], quant_for(v))


def warm_later_steps(states):
    """As warm_steps, for models the reader may pick later rather than next (perf_model.work.warm_tables_steps:
    the per-block tables a first build reads, without keeping llama-quantize's plan). Catalog models only."""
    for state in states:
        v = {**DEFAULTS, **state.as_dict()}
        if v["model"] in pm.MODELS:
            yield from _warm_tables_steps(pm.MODELS[v["model"]], quant_for(v))


def n_ctx_for(values) -> int:
    """The n_ctx a state asks for: its ctx, where 0 means the model's trained context
    (max_position_embeddings), as llama.cpp's `-c 0` does."""
    return values["ctx"] or model_for(values).max_position_embeddings


def host_machine_for(values) -> pm.Machine:
    """The machine a state's `machine` key names: a catalog key, or machine=custom (its numbers in gpu_gb ...
    pcie). Its RAM, CPU and PCIe link are the host of any GPUs the state lists (machine_for)."""
    if values["machine"] == "custom":
        return custom.machine_from_state(values)
    return pm.MACHINES[values["machine"]]


def machine_for(values) -> pm.Machine:
    """The Machine a state describes: the host machine, with the GPUs of its `gpus` key when it lists some
    (enginelab.gpus: several GPUs, their link)."""
    return gpus.machine_with_gpus(host_machine_for(values), values)


# ---------------------------------------------------------------------------------------------------------
# The Scenario
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Readouts:
    """The calculator's numbers (the page's data-readout values), None where they cannot be computed."""

    n_gpu_layers: int | None
    vram_gb: float | None
    ram_gb: float | None
    decode_tok_s: float | None
    prefill_tok_s: float | None
    cpu_share: float | None
    fits: bool
    verdict: str | None = None  # verdict(placement): "vram", "partial" or "fails"; None without a placement
    # measured profile: where most published runs fall around the estimates (low, high), else None
    decode_range: tuple | None = None
    prefill_range: tuple | None = None

    NAMES = ("n_gpu_layers", "vram_gb", "ram_gb", "decode_tok_s", "prefill_tok_s", "cpu_share", "fits", "verdict")

    @classmethod
    def empty(cls) -> Readouts:
        return cls(None, None, None, None, None, None, False, None)


def verdict(p: pm.Placement) -> str:
    """What llama.cpp would do with a placement, in three words: "vram" (it loads, every block and the output
    head on the GPU, no experts kept in RAM), "partial" (it loads, and some weights run from system RAM: a
    partial offload, or every layer on a machine without a GPU) or "fails" (it stops at load, out of memory)."""
    if not p.fits:
        return "fails"
    if p.machine.gpu is not None and p.full_offload and not p.n_cpu_moe:
        return "vram"
    return "partial"


@dataclass(frozen=True)
class CourseNumbers:
    """The module's (course profile's) numbers for the same settings, shown beside the measured ones.
    Its placement counts decimal GB with no driver reserve, so -ngl auto may differ too."""

    n_gpu_layers: int
    fits: bool
    decode_tok_s: float | None
    prefill_tok_s: float | None
    decode: dict | None  # perf_model.decode_step_time(profile="course")


@dataclass(frozen=True)
class Scenario:
    state: object  # the calculator state it was built from
    model: pm.Model
    machine: pm.Machine
    quant: str | None  # None: a dropped GGUF file's own tensor types
    placement: pm.Placement | None  # None when perf_model rejected the settings (see error)
    decode: dict | None  # perf_model.decode_step_time at state.tokens of context; None when it does not load
    prefill: dict | None  # perf_model.prefill_time for a state.tokens-token prompt
    error: str | None  # why the numbers are missing (or would mislead), in plain words
    command: str  # the llama-server command line for these settings ("" without a placement)
    readouts: Readouts
    profile: str = "course"  # the speed profile the numbers use ("measured": fitted on llama-bench runs)
    n_threads: int | None = None  # the CPU threads (-t) the numbers assume; None: all physical cores
    course: CourseNumbers | None = None  # measured profile: the module's numbers for the same settings
    pending: bool = False  # the error is "still reading the remote model", not a failure
    build: _builds.Build | None = None  # measured profile: the reader's llama.cpp build when not today's
    build_effects: tuple = ()  # ((change table row, share of today's decode step), ...): see build_effects

    @property
    def computable(self) -> bool:
        """The numbers stand for the state (no error, a placement)."""
        return self.error is None and self.placement is not None


_CACHE: OrderedDict = OrderedDict()
_CACHE_SIZE = 16


def build(state) -> Scenario:
    """The Scenario of a calculator state (memoised: the same state gives the same object). A state of another
    figure of the family works too: the keys it lacks take DEFAULTS (-ngl auto, no --n-cpu-moe)."""
    which = getattr(state, "model", None)
    if which == "gguf":
        key = (state, id(custom.dropped_model()))
    elif which == "remote":  # what has been read for it so far (or what is happening)
        values = state.as_dict()
        key = (state, id(remote.loaded(values)), remote.status(values))
    else:
        key = (state, None)
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    scn = _build(state)
    _CACHE[key] = scn
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return scn


# What a state of another figure in the family leaves out takes these values (a figure without a profile
# switch illustrates the module: course profile; without the gpus keys: the machine's own GPU).
DEFAULTS = {
    "cfg": "",
    "ngl": "auto",
    "n_cpu_moe": 0,
    "profile": "course",
    "threads": "auto",
    "ub": pm.N_UBATCH_DEFAULT,  # the advisor's -ub and -b (the calculator uses llama.cpp's defaults)
    "b": pm.N_BATCH_DEFAULT,
    "build": "",  # today's llama.cpp
    **gpus.DEFAULTS,
}


def _build(state) -> Scenario:
    v = {**DEFAULTS, **state.as_dict()}
    model, machine = model_for(v), machine_for(v)
    quant = quant_for(v)
    ngl = None if v["ngl"] == "auto" else v["ngl"]
    profile = v["profile"]
    n_threads = None if v["threads"] == "auto" else v["threads"]
    error = None
    if v["model"] == "custom":
        _m, err = custom.config_result(v["cfg"])
        if err:
            error = f"{err} (showing {model.name} until the config parses)"
    pending = False
    if v["model"] == "remote" and remote.loaded(v) is None:
        error, failed = remote.status(v)  # reading it, or why it could not be read
        pending = not failed

    rb = _builds.describe_build(v["build"]) if profile == "measured" else None  # the state checked the text
    rb = rb if rb is not None and rb.day else None  # the reader's build, None for today's

    def scenario(placement=None, decode=None, prefill=None, readouts=None, command="", effects=()):
        return Scenario(
            state,
            model,
            machine,
            quant,
            placement,
            decode,
            prefill,
            error,
            command,
            readouts or Readouts.empty(),
            profile,
            n_threads,
            course,
            pending,
            rb,
            effects,
        )

    course = None
    place_args = dict(n_ctx=n_ctx_for(v), kv_type=v["kv"], n_gpu_layers=ngl, n_cpu_moe=v["n_cpu_moe"], n_ubatch=v["ub"])
    place_args.update(gpus.split_args(v, machine))  # several GPUs: -ts, -sm, -mg (enginelab.gpus)
    n_batch = max(v["b"], v["ub"])
    try:
        p = pm.place(model, machine, quant, profile=profile, **place_args)
    except ValueError as e:  # settings perf_model rejects: shown, never a crash
        error = str(e)
        return scenario()
    command = pm.llama_server_command(p)
    if n_threads is not None:  # the reader's -t (auto: llama.cpp's default, the physical cores)
        command += f" -t {n_threads}"
    if v["model"] == "remote" and remote.loaded(v) is not None:  # llama.cpp downloads it itself: -hf / -mu
        command = remote.command_for(remote.loaded(v), command)
    if error:  # a config that did not parse (or a remote model not read): numbers for the stand-in would mislead
        return scenario(
            placement=None if v["model"] == "remote" else p, command="" if v["model"] == "remote" else command
        )
    base = dict(
        n_gpu_layers=p.n_gpu_layers, vram_gb=p.gpu_total / pm.GB, ram_gb=p.cpu_total / pm.GB, verdict=verdict(p)
    )
    if not p.fits:
        r = Readouts(**base, decode_tok_s=None, prefill_tok_s=None, cpu_share=None, fits=False)
        return scenario(placement=p, readouts=r, command=command)
    if profile == "measured":
        course = _course_numbers(model, machine, quant, place_args, v["tokens"], n_batch)
    try:
        day = rb.day if rb else None
        d = pm.decode_step_time(p, machine, context=v["tokens"], n_threads=n_threads, build=day)
        f = pm.prefill_time(p, machine, v["tokens"], n_batch=n_batch, n_threads=n_threads, build=day)
        effects = build_effects(p, machine, v["tokens"], n_threads, day) if day else ()
    except (ValueError, ArithmeticError) as e:  # a gap in the model: say so rather than guess a number
        error = f"perf_model could not time this placement ({type(e).__name__}: {e})"
        r = Readouts(**base, decode_tok_s=None, prefill_tok_s=None, cpu_share=None, fits=True)
        return scenario(placement=p, readouts=r, command=command)
    r = Readouts(
        **base,
        decode_tok_s=d["tok_per_s"],
        prefill_tok_s=f["tok_per_s"],
        cpu_share=d["cpu_s"] / d["total_s"],
        fits=True,
        decode_range=d.get("range_tok_s"),
        prefill_range=f.get("range_tok_s"),
    )
    return scenario(placement=p, decode=d, prefill=f, readouts=r, command=command, effects=effects)


def build_effects(p: pm.Placement, machine: pm.Machine, context: int, n_threads, day: str) -> tuple:
    """What each change a llama.cpp build of `day` lacks costs this placement's decode step (measured profile):
    ((row of data/llama_cpp_changes.csv, share), ...), largest first, where share is the extra seconds that one
    missing change adds over every device (enginelab.measured.decode_effects, on the very work perf_model times)
    divided by today's whole step (perf_model.decode_step_time with today's build): "about Y% slower"."""
    today = pm.decode_step_time(p, machine, context=context, n_threads=n_threads, profile="measured")["total_s"]
    extra: dict = {}
    for works in pm._sides(p, 1, context):  # (local, split) work per device: what decode_step_time times
        for side, w in works.items():
            if w.bytes == 0 and w.flops == 0:
                continue
            dev, backend = pm.side_device(p.machine, side), pm.device_backend(machine, side)
            t0 = decode_seconds(w, dev, backend, n_threads, 1, None, TODAY)[0]
            for row, share in decode_effects(w, dev, backend, day, n_threads):
                k = _builds.key(row)
                extra[k] = (row, extra.get(k, (row, 0.0))[1] + share * t0)
    return tuple(sorted(((row, s / today) for row, s in extra.values()), key=lambda e: -e[1]))


def _course_numbers(model, machine, quant, place_args: dict, tokens: int, n_batch: int) -> CourseNumbers | None:
    """The module's numbers for the same settings (course profile: its own placement and timing)."""
    try:
        p = pm.place(model, machine, quant, profile="course", **place_args)
        if not p.fits:
            return CourseNumbers(p.n_gpu_layers, False, None, None, None)
        d = pm.decode_step_time(p, machine, context=tokens)
        f = pm.prefill_time(p, machine, tokens, n_batch=n_batch)
    except (ValueError, ArithmeticError):
        return None
    return CourseNumbers(p.n_gpu_layers, True, d["tok_per_s"], f["tok_per_s"], d)
