"""Several GPUs in a figure's state: the URL keys, their validation, and the Machine they describe.

    gpus=rtx3090,rtx3060    the GPUs in llama.cpp's device order (CUDA0, CUDA1, ...): catalog cards by key
                            (perf_model.GPUS), or a card of your own as 24gb-936gbs-71tf (memory in GB,
                            bandwidth in GB/s, FP16 TFLOP/s); empty: the machine's own GPU
    sm=layer|row|none       llama.cpp's --split-mode
    ts=3,1                  --tensor-split (empty: by free memory, llama.cpp's default)
    mg=1                    --main-gpu (with sm=none)
    link=pcie               how the GPUs reach each other (perf_model.LINKS)

The host (RAM, CPU, PCIe) stays the `machine`'s. A URL without these keys is the single-GPU page it always was.
Bad values never raise: a card that cannot exist (0 GB, a key we do not know) is left out, a split with a
negative value or no weight at all falls back to llama.cpp's default, and each says so in a message that names
the field (the state module shows it) while the rest of the page keeps working.
"""

from __future__ import annotations

import dataclasses
import math
import re

import perf_model as pm

from .state import Choice, Int, Text, _shown

MAX_GPUS = 8  # cards the calculator takes (llama.cpp itself allows GGML_CUDA_MAX_DEVICES = 16)
# a card of your own: memory, bandwidth, FP16 TFLOP/s, with the same bounds as the custom machine's GPU
CARD_RE = re.compile(r"^(\d+(?:\.\d+)?)gb-(\d+(?:\.\d+)?)gbs-(\d+(?:\.\d+)?)tf$")
CARD_BOUNDS = (("memory", "GB", 0.0, 512.0), ("bandwidth", "GB/s", 10.0, 20000.0), ("FP16", "TFLOP/s", 0.1, 10000.0))
CARD_EXAMPLE = "24gb-936gbs-71tf"
KEYS = ("gpus", "sm", "ts", "mg", "link")
DEFAULTS = {"gpus": "", "sm": "layer", "ts": "", "mg": 0, "link": "pcie"}


def _num(x: float) -> str:
    return f"{x:g}"


def card_token(dev: pm.Device) -> str:
    """The URL token of a card: its catalog key, or memory-bandwidth-TFLOP/s."""
    for k, d in pm.GPUS.items():
        if d == dev:
            return k
    return f"{_num(dev.mem_gb)}gb-{_num(dev.bandwidth_gbs)}gbs-{_num(dev.fp16_tflops)}tf"


def parse_card(token: str) -> tuple:
    """(Device, None) for a token, or (None, why not)."""
    t = token.strip().lower()
    if t in pm.GPUS:
        return pm.GPUS[t], None
    m = CARD_RE.match(t)
    if not m:
        return None, (
            f"{_shown(token)} is neither a catalog card ({', '.join(pm.GPUS)}) nor a card of your own like "
            f"{CARD_EXAMPLE} (memory GB, bandwidth GB/s, FP16 TFLOP/s)"
        )
    vals = [float(g) for g in m.groups()]
    for v, (what, unit, lo, hi) in zip(vals, CARD_BOUNDS):
        if what == "memory" and not (math.isfinite(v) and lo < v <= hi):
            return None, f"{_shown(token)}: {_num(v)} GB of memory; a card has more than 0 and at most {_num(hi)} GB"
        if not (math.isfinite(v) and lo <= v <= hi):
            return None, f"{_shown(token)}: {what} {_num(v)} {unit}; allowed: {_num(lo)} to {_num(hi)} {unit}"
    gb, bw, tf = vals
    name = f"GPU {_num(gb)} GB, {_num(bw)} GB/s"
    return pm.Device(name, gb, bw, tf, source="entered by you"), None


def parse_gpus(text: str) -> tuple:
    """(the usable tokens, their Devices, the problems as sentences) of a gpus value."""
    tokens, devices, problems = [], [], []
    raw = [t for t in re.split(r"[,\s]+", str(text).strip()) if t]
    for i, t in enumerate(raw, 1):
        if len(devices) == MAX_GPUS:
            problems.append(f"at most {MAX_GPUS} GPUs; the {len(raw) - MAX_GPUS} after them are left out")
            break
        dev, why = parse_card(t)
        if dev is None:
            problems.append(f"GPU {i} is left out: {why}")
            continue
        tokens.append(card_token(dev))
        devices.append(dev)
    return tuple(tokens), tuple(devices), problems


@dataclasses.dataclass(frozen=True)
class GpuList(Text):
    """The gpus key: a comma-separated list of cards, kept as the valid ones (see the module docstring)."""

    unified: object = None  # callable(partial) -> True where the machine cannot take other GPUs

    def parse(self, raw, partial):
        s = str(raw)[: self.max_len]
        if not s.strip():
            return "", None
        if self.unified is not None and self.unified(partial):
            return "", f"{self.label}: {_shown(s)} ignored; a Mac's unified memory has its one GPU."
        tokens, _devs, problems = parse_gpus(s)
        msg = f"{self.label}: " + "; ".join(problems) + "." if problems else None
        return ",".join(tokens), msg

    def describe_allowed(self, partial):
        return f"catalog cards ({', '.join(pm.GPUS)}) or cards like {CARD_EXAMPLE}, comma-separated"


def parse_split(text: str, n_gpus: int) -> tuple:
    """(the weights to use as a tuple, or () for llama.cpp's default, problem or None) of a ts value."""
    s = str(text).strip()
    if not s:
        return (), None
    parts = [p for p in re.split(r"[,/\s]+", s) if p]  # llama.cpp accepts 3,1 and 3/1
    vals = []
    for i, p in enumerate(parts, 1):
        try:
            v = float(p)
        except ValueError:
            return (), f"{_shown(s)}: value {i} ({_shown(p)}) is not a number; splitting by free memory instead"
        if not math.isfinite(v) or v < 0 or v > 1e9:
            return (), (
                f"{_shown(s)}: value {i} is {p}; each GPU's share must be a number from 0 to 1e9. Splitting by free "
                "memory instead"
            )
        vals.append(v)
    msg = None
    if len(vals) > max(n_gpus, 1):
        msg = f"{_shown(s)} has {len(vals)} values for {n_gpus} GPU{'s' if n_gpus != 1 else ''}; the extra ones are ignored"
        vals = vals[: max(n_gpus, 1)]
    if not any(vals):
        return (), f"{_shown(s)} sums to 0: llama.cpp then splits by free memory, as without -ts"
    return tuple(vals), msg


@dataclasses.dataclass(frozen=True)
class TensorSplit(Text):
    """The ts key: llama.cpp's --tensor-split, one share per GPU (normalised text, or '' for the default)."""

    n_gpus: object = None  # callable(partial) -> the number of GPUs of the state

    def parse(self, raw, partial):
        n = self.n_gpus(partial) if self.n_gpus is not None else MAX_GPUS
        vals, problem = parse_split(str(raw)[: self.max_len], n)
        msg = f"{self.label}: {problem}." if problem else None
        return ",".join(_num(v) for v in vals), msg

    def describe_allowed(self, partial):
        return "one share per GPU, e.g. 3,1 (empty: by free memory)"


# ---------------------------------------------------------------------------------------------------------
# From a state to perf_model
# ---------------------------------------------------------------------------------------------------------
def devices(values) -> tuple:
    """The state's GPUs (the gpus key's valid cards), or () when it names none."""
    return parse_gpus(values.get("gpus", "") or "")[1]


def machine_with_gpus(base: pm.Machine, values) -> pm.Machine:
    """`base` with the state's GPUs (the host's RAM and PCIe stay), or `base` itself when it names none."""
    devs = devices(values)
    if not devs or base.unified:
        return base
    link = pm.LINKS.get(values.get("link") or "pcie", pm.LINKS["pcie"])
    names = [d.name for d in devs]
    label = f"{len(names)}× {names[0]}" if len(set(names)) == 1 and len(names) > 1 else " + ".join(names)
    return pm.Machine(
        f"{label} · {base.ram.name}",
        devs,
        base.ram,
        base.pcie_gbs or pm.PCIE4_X16_GBS,
        drive_gbs=base.drive_gbs,
        key=base.key,
        interconnect=link if len(devs) > 1 else None,
    )


def split_args(values, machine: pm.Machine) -> dict:
    """place()'s tensor_split, split_mode and main_gpu for a state (defaults on a machine with one GPU)."""
    n = len(machine.gpus)
    if n < 2:
        return {}
    ts, _msg = parse_split(values.get("ts", "") or "", n)
    mg = values.get("mg", 0) or 0
    return {
        "tensor_split": ts or None,
        "split_mode": values.get("sm") or "layer",
        "main_gpu": mg if isinstance(mg, int) and 0 <= mg < n else 0,
    }


def state_values(machine: pm.Machine, base: pm.Machine, split: dict | None = None) -> dict:
    """The URL keys that describe `machine` (built on `base`) and a split: the inverse of machine_with_gpus."""
    out = {}
    if machine.gpus != base.gpus:
        out["gpus"] = ",".join(card_token(d) for d in machine.gpus)
    if machine.multi_gpu:
        link = next((k for k, ic in pm.LINKS.items() if ic == machine.interconnect), "pcie")
        out["link"] = link
    for k, key in (("split_mode", "sm"), ("main_gpu", "mg")):
        if split and k in split:
            out[key] = split[k]
    if split and split.get("tensor_split"):
        out["ts"] = ",".join(_num(v) for v in split["tensor_split"])
    return out


# ---------------------------------------------------------------------------------------------------------
# The fields, for a figure's Spec
# ---------------------------------------------------------------------------------------------------------
def fields(machine_of) -> list:
    """The five fields, to follow the machine's in a Spec. machine_of(partial) is the state's host Machine."""

    def unified(p) -> bool:
        return machine_of(p).unified

    def n_gpus(p) -> int:
        return len(devices(p)) or len(machine_of(p).gpus)

    def several(p) -> bool:
        return n_gpus(p) > 1

    return [
        GpuList(
            "gpus",
            "GPUs",
            default="",
            max_len=400,
            rows=1,
            placeholder="the machine's own; e.g. rtx3090,rtx3060",
            visible=lambda p: not unified(p),
            url_safe=",",
            unified=unified,
            help=f"In llama.cpp's device order, comma-separated: catalog cards ({', '.join(pm.GPUS)}) or your own "
            f"as {CARD_EXAMPLE}. Empty: the machine's own.",
        ),
        Choice(
            "sm",
            "Split mode (-sm)",
            default="layer",
            options=[("layer", "layer (whole layers)"), ("row", "row (split matrices)"), ("none", "none (one GPU)")],
            visible=several,
        ),
        TensorSplit(
            "ts",
            "Tensor split (-ts)",
            default="",
            max_len=200,
            rows=1,
            placeholder="by free memory; e.g. 3,1",
            visible=lambda p: several(p) and p.get("sm") != "none",
            url_safe=",",
            n_gpus=n_gpus,
            help="One share per GPU, as llama.cpp's -ts; empty: in proportion to free memory.",
        ),
        Int(
            "mg",
            "Main GPU (-mg)",
            default=0,
            min=0,
            max=lambda p: max(0, n_gpus(p) - 1),
            visible=lambda p: several(p) and p.get("sm") == "none",
        ),  # fmt: skip
        Choice(
            "link",
            "GPU link",
            default="pcie",
            options=[(k, ic.name) for k, ic in pm.LINKS.items()],
            visible=several,
            help="How the GPUs pass activations: through the host, peer-to-peer, NVLink, or llama.cpp's RPC.",
        ),
    ]
