"""The two speed profiles as objects with one interface, so that placement and timing never ask which one
they have: they hand a device's Work to `profile.decode_seconds(work, device, backend, n_threads, batch)` and
the like, and each profile answers by its own rules.

    course     the module's assumptions: ETA_DECODE of peak bandwidth, ETA_PREFILL of peak FP16 FLOP/s,
               DECODE_OVERHEAD_S per decode step, op offload's copies at ETA_PCIE of the link once per
               logical batch; a "16 GB" card holds 16e9 bytes. The default of every function, so the
               module's listings print its numbers.
    measured   what llama.cpp reaches: enginelab.measured's few fitted parameters per backend; memory in
               GiB less the driver's reserve; each estimate carries the spread of published runs around it.

`get_profile("measured")` returns the object; the public functions keep taking the name.
"""

from __future__ import annotations

from enginelab import measured as _measured
from enginelab.measured import builds as _builds

from . import kernels as _kernels
from .devices import DRIVER_RESERVE_MIB, Device, Machine
from .units import DECODE_OVERHEAD_S, ETA_DECODE, ETA_PCIE, ETA_PREFILL, MiB, _check_profile


class CourseProfile:
    """The module's assumptions (see the module docstring above)."""

    name = "course"
    # The module's simplification: logits for every prompt token, the head's weights streamed with each
    # micro-batch. Its fitted constants (RTX 3060 / 4060 Ti FP16, ETA_PCIE) were fitted under it, and no
    # values of them reproduce the module's four prefill numbers once the head runs for the last token only.
    head_every_ubatch = True

    def decode_seconds(self, w, dev: Device, backend: str, n_threads, batch: int) -> tuple:
        """(seconds, memory seconds, compute seconds, basis) of a device's decode work: the roofline at the
        module's efficiencies."""
        t_mem = w.bytes / (ETA_DECODE * dev.bandwidth)
        t_cmp = w.flops / (ETA_PREFILL * dev.flops)
        return max(t_mem, t_cmp), t_mem, t_cmp, None

    def batched_seconds(
        self, w, dev: Device, backend: str, n_tok: int, engine: str, n_threads, params=None, gain: float = 1.0
    ) -> tuple:
        """A device's share of a pass over n_tok tokens of a mixed batch: the same roofline, whoever's kernels."""
        return self.decode_seconds(w, dev, backend, n_threads, n_tok)

    def step_overhead_seconds(self, layers, backends, output_on_gpu, logits_bytes, link_bytes_per_s) -> float:
        return DECODE_OVERHEAD_S

    def prefill_seconds(self, w, dev: Device, backend: str, u: int, k: int, n_threads, scale: float) -> tuple:
        """(compute seconds, memory seconds) of k micro-batches of u tokens doing `w` each (FLOPs `scale`
        times w's): computing and then streaming the weights, each at ETA_PREFILL of the peak."""
        return w.flops * scale / (ETA_PREFILL * dev.flops), w.weight_bytes * k / (ETA_PREFILL * dev.bandwidth)

    def offloaded_seconds(self, w, dev: Device, backend: str, u: int, k: int, scale: float) -> float:
        """The GPU's arithmetic for CPU-resident blocks under op offload (the copies are timed apart)."""
        return w.flops * scale / (ETA_PREFILL * dev.flops)

    def weight_copies(self, start: int, k: int, n_ubatch: int, n_batch: int) -> int:
        """Op offload's weight copies in k micro-batches from token `start`: one per logical batch (-b)."""
        return sum(1 for j in range(k) if (start + j * n_ubatch) % n_batch == 0)

    def pcie_seconds(self, n_bytes: float, n_copies: int, link_bytes_per_s: float) -> float:
        return n_bytes * n_copies / (ETA_PCIE * link_bytes_per_s)

    def gpu_capacity(self, machine: Machine) -> float:
        """Bytes llama.cpp may use on the (first) GPU: the card's decimal GB (unified memory: its share)."""
        if machine.gpu is None:
            return 0.0
        if machine.unified:
            return machine.gpu.mem_bytes * machine.gpu_share
        return machine.gpu.mem_bytes

    def device_capacity(self, dev: Device) -> float:
        """What llama.cpp finds free on one discrete GPU of several."""
        return dev.mem_bytes

    def ram_capacity(self, machine: Machine) -> float:
        return machine.ram.mem_bytes

    def annotate(self, res: dict, kind: str, backend: str, dev, basis=None) -> None:
        """Add the profile's own keys to a decode or prefill result: none for the course profile."""

    def for_build(self, day: str):
        """The profile for a llama.cpp build of this day ("": today's): the course profile has no builds."""
        return self


class MeasuredProfile(CourseProfile):
    """llama.cpp as published runs measure it (enginelab.measured), for one build: "" is today's; a date
    ("2025-06-01") is a build of that day, which lacks the changes of data/llama_cpp_changes.csv made since."""

    name = "measured"
    head_every_ubatch = False  # llama.cpp computes logits for the prompt's last token only

    def __init__(self, build: str = ""):
        self.build = build

    def decode_seconds(self, w, dev: Device, backend: str, n_threads, batch: int) -> tuple:
        """One token per sequence: llama.cpp's mat-vec kernels; a batch of several: perf_model.kernels's."""
        if batch > 1:
            return self.batched_seconds(w, dev, backend, batch, "llama.cpp", n_threads)
        return _measured.decode_seconds(w, dev, backend, n_threads, batch, build=self.build or None)

    def batched_seconds(
        self, w, dev: Device, backend: str, n_tok: int, engine: str, n_threads, params=None, gain: float = 1.0
    ) -> tuple:
        return _kernels.batched_seconds(
            w, dev, backend, n_tok, engine, n_threads, params, build=self.build or None, gain=gain
        )

    def step_overhead_seconds(self, layers, backends, output_on_gpu, logits_bytes, link_bytes_per_s) -> float:
        return _measured.step_overhead_seconds(
            layers, backends, output_on_gpu, logits_bytes=logits_bytes, link_bytes_per_s=link_bytes_per_s
        )

    def prefill_seconds(self, w, dev: Device, backend: str, u: int, k: int, n_threads, scale: float) -> tuple:
        return _measured.prefill_seconds(w, dev, backend, u, k, n_threads, scale=scale, build=self.build or None)

    def offloaded_seconds(self, w, dev: Device, backend: str, u: int, k: int, scale: float) -> float:
        b = self.build or None
        return _measured.prefill_seconds(w, dev, backend, u, k, None, offloaded=True, scale=scale, build=b)[0]

    def weight_copies(self, start: int, k: int, n_ubatch: int, n_batch: int) -> int:
        return k  # ggml's scheduler copies the weights each time the graph runs: every micro-batch

    def pcie_seconds(self, n_bytes: float, n_copies: int, link_bytes_per_s: float) -> float:
        return _measured.pcie_seconds(n_bytes * n_copies, link_bytes_per_s)

    def gpu_capacity(self, machine: Machine) -> float:
        """The card's GiB less what the driver and desktop hold (unified memory: macOS's
        recommendedMaxWorkingSetSize, a share of the real GiB)."""
        if machine.gpu is None:
            return 0.0
        if machine.unified:
            return machine.gpu.mem_gib_bytes * machine.gpu_share
        return max(0.0, machine.gpu.mem_gib_bytes - DRIVER_RESERVE_MIB * MiB)

    def device_capacity(self, dev: Device) -> float:
        return max(0.0, dev.mem_gib_bytes - DRIVER_RESERVE_MIB * MiB)

    def ram_capacity(self, machine: Machine) -> float:
        return machine.ram.mem_gib_bytes

    def for_build(self, day: str):
        return MeasuredProfile(day) if day else self

    def annotate(self, res: dict, kind: str, backend: str, dev, basis=None) -> None:
        """The backend that did most of the work, and where most published runs fall around the estimate."""
        if basis is not None:
            res["basis"] = basis
        if self.build:
            res["build"] = self.build
        res["backend"] = backend
        res["range_tok_s"] = _measured.typical_range(res["tok_per_s"], backend, kind, dev)
        res["range_vendor"] = _measured.range_basis(backend, kind, dev)


PROFILE_OBJECTS = {"course": CourseProfile(), "measured": MeasuredProfile()}


def get_profile(profile, placement=None, build=None):
    """The profile object for a name (None: the placement's profile, else "course"). build: the llama.cpp
    build the measured profile estimates (None or "today": today's; "YYYY-MM-DD" or "YYYY-MM": a build of that
    day); the course profile has no builds and ignores it."""
    return PROFILE_OBJECTS[_check_profile(profile, placement)].for_build(_builds.parse_build(build))
