"""Devices and machines: GPUs, CPUs and their memory, how several GPUs connect, the machine catalog, and
how much of a device llama.cpp can use."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from enginelab import measured as _measured  # the measured profile's parameters
from enginelab.checks import brief, check_bool, check_int, check_number, check_text

from .catalog import catalog_data, catalog_error, catalog_rows
from .models import MAX_TEXT_CHARS
from .units import GB, GiB, _check

# Checked when made, like a Model: positive, finite figures (bounds far above any real device, so a typo or a
# hostile URL cannot make a time infinite, zero or negative).
MAX_DEVICE_GB = 1e6  # memory, decimal GB (a petabyte)
MAX_DEVICE_GBS = 1e6  # bandwidth, GB/s (HBM3e GPUs: ~8,000)
MAX_DEVICE_TFLOPS = 1e6  # FP16 TFLOP/s (B200: ~2,250 dense)


@dataclass(frozen=True)
class Device:
    """One memory + compute device: a GPU, or the CPU with its system RAM."""

    name: str
    mem_gb: float  # capacity as sold: a "12 GB" card (12 GiB; the course profile counts it as 12e9 bytes)
    bandwidth_gbs: float  # peak memory bandwidth, GB/s
    # Peak FP16 rate, TFLOP/s: for a GPU the datasheet's dense FP16 tensor figure with FP32 accumulate; for
    # Apple the GPU's FP32 rate; for a CPU the peak FP32 FMA rate of all its cores.
    fp16_tflops: float
    source: str = ""
    approx: bool = False  # True where a figure is our approximation, not a vendor spec
    fitted: bool = False  # True where a figure was fitted to the module's printed numbers
    backend: str = ""  # llama.cpp backend: cuda, rocm, vulkan, metal, sycl, cpu ("" = by its role: see device_backend)
    cores: int = 0  # a CPU's physical cores (0: estimated from fp16_tflops, see enginelab.measured.cpu_cores)
    # where fp16_tflops was fitted to the module (fitted=True): the datasheet figure, which the measured
    # profile uses instead (0: fp16_tflops is the datasheet's)
    spec_tflops: float = 0.0
    # a GPU's non-tensor FP32 rate (CUDA cores, shader ALUs), TFLOP/s: the measured profile's rate for the work
    # a quantized matmul does outside the tensor cores (dequantizing tiles). 0: estimated (see
    # enginelab.measured.vector_tflops)
    fp32_tflops: float = 0.0

    def __post_init__(self):
        check_text(self.name, "name", MAX_TEXT_CHARS)
        check_number(self.mem_gb, "mem_gb", 0.0, MAX_DEVICE_GB)
        check_number(self.bandwidth_gbs, "bandwidth_gbs", 0.0, MAX_DEVICE_GBS, lo_open=True)
        check_number(self.fp16_tflops, "fp16_tflops", 0.0, MAX_DEVICE_TFLOPS, lo_open=True)
        check_text(self.source, "source", MAX_TEXT_CHARS)
        check_bool(self.approx, "approx")
        check_bool(self.fitted, "fitted")
        if not (isinstance(self.backend, str) and self.backend in ("",) + _measured.BACKENDS):
            _check(False, "backend", f"unknown backend {brief(self.backend)}; allowed: {', '.join(_measured.BACKENDS)}")
        check_int(self.cores, "cores", 0, 1 << 16)
        check_number(self.spec_tflops, "spec_tflops", 0.0, MAX_DEVICE_TFLOPS)
        check_number(self.fp32_tflops, "fp32_tflops", 0.0, MAX_DEVICE_TFLOPS)

    @property
    def mem_bytes(self) -> float:
        """Capacity in the course profile's decimal bytes (the module's convention)."""
        return self.mem_gb * GB

    @property
    def mem_gib_bytes(self) -> float:
        """Capacity in real bytes: a "12 GB" card has 12 GiB."""
        return self.mem_gb * GiB

    @property
    def bandwidth(self) -> float:
        return self.bandwidth_gbs * GB

    @property
    def flops(self) -> float:
        return self.fp16_tflops * 1e12


@dataclass(frozen=True)
class Interconnect:
    """How the GPUs of a machine reach each other (see LINKS).

    kind: "pcie" (through the host: a copy goes GPU -> host -> GPU, two trips over the link), "p2p" (PCIe
    peer-to-peer, one trip), "nvlink" (a bridge between the cards), "rpc" (llama.cpp's RPC backend over a
    network: every hand-over is a round trip). bandwidth_gbs: one direction, GB/s. latency_us: what one
    transfer or synchronisation costs whatever its size (driver calls and events on a local link, the network
    round trip for RPC)."""

    kind: str
    bandwidth_gbs: float = 0.0  # 0: the machine's PCIe link (pcie and p2p)
    latency_us: float = 10.0
    name: str = ""

    def __post_init__(self):
        if not (isinstance(self.kind, str) and self.kind in LINK_KINDS):
            _check(False, "kind", f"unknown link kind {brief(self.kind)}; allowed: {', '.join(LINK_KINDS)}")
        check_number(self.bandwidth_gbs, "bandwidth_gbs", 0.0, MAX_DEVICE_GBS)
        check_number(self.latency_us, "latency_us", 0.0, 1e7)
        check_text(self.name, "name", MAX_TEXT_CHARS)


LINK_KINDS = ("pcie", "p2p", "nvlink", "rpc")


@dataclass(frozen=True)
class Machine:
    """A GPU (or none, or several), the host's RAM and CPU, and the PCIe link between them.

    gpu: one Device, None, or a tuple of Devices in llama.cpp's device order (CUDA0, CUDA1, ...); a tuple of
    one is that Device. `gpus` always gives the tuple. With several GPUs, `interconnect` says how they reach
    each other (None: PCIe through the host at pcie_gbs).

    For Apple silicon, `unified=True`: the GPU device *is* the unified memory,
    and the GPU may use `gpu_share` of it (macOS's recommendedMaxWorkingSetSize,
    about 75% on the larger configurations)."""

    name: str
    gpu: Device | tuple | None
    ram: Device
    pcie_gbs: float = 0.0
    unified: bool = False
    gpu_share: float = 0.75
    drive_gbs: float = 5.0  # NVMe sequential read, GB/s (PCIe 4.0 drive)
    key: str = ""
    interconnect: Interconnect | None = None  # how several GPUs reach each other (None: PCIe via the host)

    def __post_init__(self):
        check_text(self.name, "name", MAX_TEXT_CHARS)
        # several GPUs: a tuple (or list) of Devices; a tuple of one is that Device (perf_model.multigpu)
        if isinstance(self.gpu, list):
            object.__setattr__(self, "gpu", tuple(self.gpu))
        if isinstance(self.gpu, tuple):
            _check(len(self.gpu) > 0, "gpu", "an empty tuple: pass None for a machine without a GPU")
            if not (len(self.gpu) <= MAX_GPUS):
                _check(False, "gpu", f"at most {MAX_GPUS} GPUs, got {len(self.gpu):,}")
            for i, d in enumerate(self.gpu):
                if not (isinstance(d, Device)):
                    _check(False, "gpu", f"entry {i} must be a Device, got {brief(d)}")
            if len(self.gpu) == 1:
                object.__setattr__(self, "gpu", self.gpu[0])
            else:
                _check(not self.unified, "gpu", "a unified-memory machine has one GPU")
        if not (self.gpu is None or isinstance(self.gpu, (Device, tuple))):
            _check(False, "gpu", f"must be a Device, a tuple of Devices or None, got {brief(self.gpu)}")
        if not (self.interconnect is None or isinstance(self.interconnect, Interconnect)):
            _check(False, "interconnect", f"must be an Interconnect or None, got {brief(self.interconnect)}")
        if not (isinstance(self.ram, Device)):
            _check(False, "ram", f"must be a Device, got {brief(self.ram)}")
        check_number(self.pcie_gbs, "pcie_gbs", 0.0, MAX_DEVICE_GBS)
        check_bool(self.unified, "unified")
        check_number(self.gpu_share, "gpu_share", 0.0, 1.0, lo_open=True)
        check_number(self.drive_gbs, "drive_gbs", 0.0, MAX_DEVICE_GBS, lo_open=True)
        check_text(self.key, "key", MAX_TEXT_CHARS)

    @property
    def pcie(self) -> float:
        return self.pcie_gbs * GB

    @property
    def gpus(self) -> tuple:
        """The GPUs as a tuple: () without one, (gpu,) with one."""
        if self.gpu is None:
            return ()
        return self.gpu if isinstance(self.gpu, tuple) else (self.gpu,)

    @property
    def multi_gpu(self) -> bool:
        return len(self.gpus) > 1

    @property
    def link(self) -> Interconnect:
        """The GPU-to-GPU link: the interconnect given, with the PCIe bandwidth filled in for pcie/p2p."""
        ic = self.interconnect or Interconnect("pcie", 0.0, LINK_LATENCY_US["pcie"], "PCIe through the host")
        if ic.bandwidth_gbs <= 0:
            ic = replace(ic, bandwidth_gbs=self.pcie_gbs or PCIE4_X16_GBS)
        return ic


MAX_GPUS = 16  # llama.cpp's GGML_CUDA_MAX_DEVICES
PCIE4_X16_GBS = 31.5  # a GPU link when the machine names none (PCIe 4.0 x16, one direction)
# What one transfer or synchronisation between two GPUs costs whatever its size, microseconds: device switches,
# events and the waits of a split matmul (ggml-cuda copies its input to every GPU and gathers the slices back).
# pcie = 30 us is fitted to one published comparison, not measured here: two RTX 3090s, Qwen3-14B Q4_0, where
# mainline's --split-mode row decodes at about 0.77x of --split-mode layer (ik_llama.cpp PR #1106: "graph" is
# 1.53x layer and 2x row); P2P and NVLink skip the host and are set lower by assumption. llama.cpp's RPC backend
# sends a command and waits for the reply: a hand-over costs a network round trip and the server's handling.
LINK_LATENCY_US = {"pcie": 30.0, "p2p": 20.0, "nvlink": 10.0, "rpc": 300.0}
# Ready-made links (bandwidth 0: the machine's own PCIe link).
LINKS: dict[str, Interconnect] = {
    "pcie": Interconnect("pcie", 0.0, LINK_LATENCY_US["pcie"], "PCIe through the host"),
    "p2p": Interconnect("p2p", 0.0, LINK_LATENCY_US["p2p"], "PCIe peer-to-peer"),
    # NVIDIA's RTX 3090 NVLink bridge: 112.5 GB/s both directions (GA102 whitepaper), 56.25 each way
    "nvlink": Interconnect("nvlink", 56.25, LINK_LATENCY_US["nvlink"], "NVLink bridge (RTX 3090)"),
    # llama.cpp's RPC backend over Ethernet: 1 GbE carries about 117 MB/s of payload, 10 GbE about 1.17 GB/s
    "rpc-1g": Interconnect("rpc", 0.117, LINK_LATENCY_US["rpc"], "RPC over 1 Gb Ethernet"),
    "rpc-10g": Interconnect("rpc", 1.17, 150.0, "RPC over 10 Gb Ethernet"),
}


# -- the machine catalog: catalog.json's devices and machines ------------------------------------------------
def machines_from_catalog(data: dict) -> tuple:
    """({key: Device}, {key: Machine}) from data["devices"] and data["machines"], in the file's order. A machine
    row's gpu names a device row (null: none); its ram names one under "device", with the fields given beside
    it replaced (mem_gb: the machine's RAM; an Apple CPU's name, rate and cores)."""
    devices = {}
    for key, row in catalog_rows(data, "devices", Device):
        try:
            devices[key] = Device(**row)
        except ValueError as e:
            raise catalog_error("devices", key, e) from None

    def device(field, value):
        if not (isinstance(value, str) and value in devices):
            _check(False, field, f"must name a device row ({', '.join(devices)}), got {brief(value)}")
        return devices[value]

    machines = {}
    for key, row in catalog_rows(data, "machines", Machine):
        try:
            if row.get("gpu") is not None:
                row["gpu"] = device("gpu", row["gpu"])
            ram = row["ram"]
            if not (isinstance(ram, dict)):
                _check(False, "ram", f'must be an object naming a device row under "device", got {brief(ram)}')
            changes = {k: v for k, v in ram.items() if k != "device"}
            for name in changes:
                if name not in _DEVICE_FIELDS:
                    _check(False, f"ram.{name}", f"unknown field; allowed: {', '.join(_DEVICE_FIELDS)}")
            base = device("ram.device", ram.get("device"))
            try:
                row["ram"] = replace(base, **changes)
            except ValueError as e:
                raise ValueError(f"ram.{e}") from None
            machines[key] = Machine(**row)
        except ValueError as e:
            raise catalog_error("machines", key, e) from None
    return devices, machines


_DEVICE_FIELDS = tuple(f.name for f in fields(Device))
DEVICES, MACHINES = machines_from_catalog(catalog_data())
# The named devices: system RAM (a CPU's rate is its FP32 FMA peak), the GPUs, Apple's unified memory.
# catalog.json gives each its source, and notes the RTX 3060's and RTX 4060 Ti's fitted FP16 rates.
DDR4_DUAL = DEVICES["ddr4-dual"]
DDR5_DUAL = DEVICES["ddr5-dual"]
RTX_3060 = DEVICES["rtx3060"]
RTX_4060_TI = DEVICES["rtx4060ti"]
RTX_3090 = DEVICES["rtx3090"]
RTX_4090 = DEVICES["rtx4090"]
RTX_5090 = DEVICES["rtx5090"]
M4_PRO = DEVICES["m4pro"]
M4_MAX = DEVICES["m4max"]


def _ram(gb: float, base: Device = DDR5_DUAL) -> Device:
    """System RAM of gb GB: a RAM device with its capacity replaced."""
    return replace(base, mem_gb=gb)


# The discrete GPU cards of the catalog, under the key of the machine that has them: the cards a machine with
# several GPUs is built from (e.g. Machine("2x RTX 3090", (GPUS["rtx3090"],) * 2, ...)).
GPUS: dict[str, Device] = {k: m.gpu for k, m in MACHINES.items() if m.gpu is not None and not m.unified}


def side_device(machine: Machine, side: str):
    """The Device that runs `side` ("gpu", "gpu0", "gpu1", ... or "cpu") of a machine (None: no such GPU)."""
    if side.startswith("gpu"):
        gpus = machine.gpus
        i = int(side[3:]) if len(side) > 3 else 0
        return gpus[i] if i < len(gpus) else None
    return machine.ram


def device_backend(machine: Machine, side: str) -> str:
    """The llama.cpp backend that runs `side` ("gpu", "gpu0", "gpu1", ... or "cpu") of a machine: the Device's
    own backend, else cpu for the host, metal for Apple's unified GPU, cuda for a discrete GPU. "gpu" is the
    first GPU."""
    dev = side_device(machine, side)
    if dev is not None and dev.backend:
        return dev.backend
    if not side.startswith("gpu"):
        return "cpu"
    return "metal" if machine.unified else "cuda"


def get_machine(machine) -> Machine:
    if isinstance(machine, Machine):
        return machine
    if not (isinstance(machine, str) and machine in MACHINES):
        _check(
            False,
            "machine",
            f"must be a Machine or the key of one; unknown {brief(machine)}; allowed: {', '.join(MACHINES)}",
        )
    return MACHINES[machine]


# What the driver, the CUDA/ROCm context and a desktop hold before llama.cpp asks for free memory, MiB.
# Seen in real logs: an RTX 4090 D reports 24563 MiB total and 23042 MiB free (ollama issue #8923, Linux);
# an RTX 5060 Ti 16 GB, 15055 MiB free of about 16310 (lmstudio-bug-tracker issue #1360, Windows): 1.2-1.5 GiB.
# The measured profile subtracts this from the card's GiB (profiles.py); the course profile keeps decimal GB.
DRIVER_RESERVE_MIB = 1300
