"""The devices' taxonomy, as the measured profile reads it: a GPU's vendor, architecture and rates, a CPU's ISA and
core family, a host's PCIe link. The figures come from the Device itself, else its row of data/calibration/devices.csv
(whitepaper figures, matched by name), else its architecture's ratios to the FP16 figure (_rule_rates)."""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pkgutil import get_data

CPU_CORE_FLOPS = 100e9  # a core's FP32 FMA peak when a CPU Device does not say how many cores it has


def cpu_cores(device) -> int:
    """Cores of a CPU Device: its `cores`, else its FP32 peak over a typical core's (about 100 GFLOP/s:
    2 FMA pipes x 8 lanes x 2 FLOPs x ~3 GHz)."""
    c = getattr(device, "cores", 0) or 0
    return c if c > 0 else max(1, round(device.fp16_tflops * 1e12 / CPU_CORE_FLOPS))


# --- GPU rates: the device's own figures, else its catalog row, else its architecture's ratios -------------
_VENDOR_WORDS = {"nvidia", "geforce", "amd", "radeon", "intel", "apple", "graphics", "gpu", "the", "card", "edition"}


def _name_key(name: str) -> frozenset:
    """A device name's words without vendor words and memory sizes: "NVIDIA GeForce RTX 3060 12GB" and
    "RTX 3060" give the same key."""
    words = re.sub(r"[^a-z0-9]+", " ", (name or "").lower()).split()
    return frozenset(w for w in words if w not in _VENDOR_WORDS and w != "gb" and not re.fullmatch(r"\d{1,2}|\d+gb", w))


@lru_cache(maxsize=1)
def _device_rows() -> tuple:
    """The rows of data/calibration/devices.csv (packaged with the wheel), read once; () without the file."""
    try:
        text = get_data("enginelab", "data/calibration_devices.csv").decode("utf-8")
    except (FileNotFoundError, OSError):
        return ()
    return tuple(csv.DictReader(io.StringIO(text)))


@lru_cache(maxsize=1)
def _catalog() -> dict:
    """{name key: (fp16, fp32, int8, vendor)} of data/calibration/devices.csv (whitepaper figures)."""
    out = {}
    for r in _device_rows():

        def num(k, r=r):
            try:
                v = float((r.get(k) or "").split()[0])
            except (ValueError, IndexError):
                return 0.0
            return v if math.isfinite(v) and v > 0 else 0.0

        if r.get("kind") in ("cpu", "apple"):
            continue
        out.setdefault(
            _name_key(r["device"]),
            (num("fp16_tflops"), num("fp32_tflops"), num("int8_tops"), r.get("backend_family", "")),
        )
    return out


def catalog_rates(device):
    """(fp16, fp32, int8, vendor) of the device's row in devices.csv (TFLOP/s), when its name and FP16 figure
    match."""
    row = _catalog().get(_name_key(getattr(device, "name", "")))
    tf = getattr(device, "spec_tflops", 0.0) or device.fp16_tflops
    if row is None or not row[0] or abs(tf / row[0] - 1) > 0.3:
        return None
    return row


def gpu_vendor(device) -> str:
    """nvidia, amd, intel or "" (unknown), from the catalog row or the name."""
    cat = catalog_rates(device)
    if cat and cat[3] in ("nvidia", "amd", "intel"):
        return cat[3]
    name = getattr(device, "name", "") or ""
    if re.search(r"nvidia|geforce|\b(rtx|gtx|gt)\b|tesla|quadro|titan|\b[ahlbtvpkm]\d{2,3}\b|dgx|gb10", name, re.I):
        return "nvidia"
    if re.search(r"\bamd\b|radeon|\brx\s?\d|instinct|\bmi\s?\d|\b\d{3,4}m\b|8060s|8050s", name, re.I):
        return "amd"
    if re.search(r"intel|\barc\b|iris|\bxe\b", name, re.I):
        return "intel"
    return ""


_GEFORCE = re.compile(r"geforce|titan|\b(rtx|gtx)\s?\d{3,4}\b|gb10|dgx\s*spark", re.I)  # GB10: GeForce-class cores
_NOT_GEFORCE = re.compile(r"quadro|\bada\b|\bpro\b|blackwell|\brtx\s?a\d|tesla|\bl40\b(?!s)", re.I)
_NO_TENSOR_NV = re.compile(r"\bgtx\b|tesla\s*[pmk]\d|\b[pmk]\d{2,3}\b|titan\s*x|quadro\s*[pmk]\d", re.I)
_DP4A_NV = re.compile(r"\bgtx\s*1[06]\d\d|\bp(4|6|40)\b|tesla\s*p(4|40)\b|titan\s*xp?\b|quadro\s*p", re.I)
_TURING = re.compile(r"\brtx\s?20\d\d|titan\s*rtx|quadro\s*rtx|\bt4\b", re.I)
_HBM_NV = re.compile(r"\b(a100|a800|a30|h100|h800|h200|h20|gh200|b100|b200|gb200)\b", re.I)
_VOLTA = re.compile(r"v100|titan\s*v\b", re.I)
_AMD_RDNA3 = re.compile(r"\b(rx|pro\s*w)\s?7\d{3}|\b7\d{3}\s?(xtx|xt|gre)|\b(780m|760m|890m|880m|8060s|8050s)\b", re.I)
_AMD_RDNA4 = re.compile(r"\brx\s?9\d{3}|r9700|\bai\s*pro\b", re.I)
_AMD_CDNA = re.compile(r"\bmi\s?(100|2\d\d|3\d\d)", re.I)
_AMD_VEGA = re.compile(r"\bmi\s?(50|60|25)\b|radeon\s*vii|vega", re.I)
_AMD_POLARIS = re.compile(r"\brx\s?(4|5)[6-9]0\b", re.I)
# no int8 dot-product instruction: Kepler, Maxwell, GP100 (NVIDIA dp4a needs sm_61); Polaris, Vega 10, RDNA1
_NO_DP4A = re.compile(
    r"\bk\d{2}\b|tesla\s*[km]\d|\bm\d{2}\b|gtx\s*(9\d\d|7\d\d)|titan\s*x\b(?!p)|p100|gp100|"
    r"\brx\s?(4|5)[6-9]0\b|vega\s*(56|64)|\bmi25\b|\brx\s?5[5-7]\d\d",
    re.I,
)
# Kepler (compute capability 3.x): the 32-bit integer multiply-adds of the emulated __dp4a run at 32 a clock per SM,
# a sixth of its 192 FP32 lanes (CUDA C Programming Guide, arithmetic instruction throughput); Maxwell and Pascal
# issue a product of two bytes as one full-rate XMAD (GTX 745/750 and Titan X are Maxwell)
_KEPLER = re.compile(
    r"\btesla\s*k\d{2}|\bk(10|20|40|80)[a-z]?\b|\bgtx\s*(6\d\d|7[6-9]0)\b|\bgtx\s*titan\b(?!\s*x)", re.I
)
# HBM parts (stacked memory: more latency, more bytes in flight needed to fill it at batch 1)
_HBM = re.compile(
    r"\bmi\s?\d{2,3}[a-z]?\b|instinct|v100|p100|a100|a800|\ba30\b|h100|h800|h200|\bh20\b|gh200|b100|b200|gb200|"
    r"radeon\s*vii|vega\s*(56|64)|titan\s*v\b",
    re.I,
)
_INTEL = re.compile(r"\barc\b|\bb[56]0\b|\bb70\b|\ba[357]\d0\b", re.I)


# The ratios of an architecture's rates to its datasheet FP16 figure tf: (non-tensor FP32 / tf, int8 / tf, how much
# faster than tf its FP16 matrix units run at the accumulation llama.cpp uses). devices.csv's `arch` column names one
# per device; a device not in it is classed by its name (_arch_by_name).
ARCH_RATIOS = {
    "cdna3": (1 / 8, 2.0, 1.0),  # MI300: MFMA int8 twice the FP16 matrix rate; FP32 vector 1/8
    "cdna": (1 / 8, 1.0, 1.0),  # MFMA: int8 at the FP16 matrix rate
    "vega": (1 / 2, 2.0, 1.0),  # packed FP16 = 2x FP32; v_dot4 int8 = 4x FP32
    "polaris": (1.0, 0.0, 1.0),  # no packed FP16, no int8 dot: all at the FP32 rate
    "rdna4": (1 / 4, 2.0, 1.0),  # WMMA: FP16 4x the (dual-issue) FP32 figure, int8 twice FP16
    "rdna3": (1 / 2, 1.0, 1.0),  # WMMA at the packed FP16 rate, int8 the same; the FP32 figure counts dual issue
    "rdna12": (1 / 2, 2.0, 1.0),  # RDNA1/2: packed FP16, dot4 int8 = 2x FP16
    "xe": (1 / 8, 2.0, 1.0),  # Intel XMX: FP16 8x the FP32 vector rate, int8 twice FP16
    "volta": (1 / 8, 0.0, 1.0),  # FP16 tensor cores only (no int8): 8x FP32
    "gp100": (1 / 2, 0.0, 1.0),  # packed FP16 at twice FP32, no dp4a
    "pascal_dp4a": (1.0, 4.0, 1.0),  # no tensor cores: tf is the FP32 rate; dp4a at 4x
    "nv_no_tensor": (1.0, 0.0, 1.0),  # Maxwell, Kepler: tf is the FP32 rate, no int8 dot
    "l40": (1 / 2, 2.0, 1.0),  # AD102 with the FP32 ALUs of a GeForce
    "nv_hbm": (1 / 16, 2.0, 1.0),  # A100/H100 class: FP32 1/16 of the tensor figure, int8 twice
    "turing_geforce": (1 / 4, 4.0, 2.0),  # half-rate FP32 accumulate on GeForce
    "turing_pro": (1 / 8, 2.0, 1.0),
    "nv_geforce": (1 / 2, 4.0, 2.0),  # Ampere/Ada/Blackwell GeForce: FP32 half the FP32-accumulate figure, int8 4x
    "nv_pro": (1 / 4, 2.0, 1.0),  # workstation / inference parts: full-rate FP32 accumulate
    "other": (1 / 2, 2.0, 1.0),  # unknown: a consumer-like ratio
}


def _arch_by_name(name: str, backend: str) -> str:
    """The ARCH_RATIOS key of a GPU known only by its name."""
    if _AMD_CDNA.search(name):
        return "cdna3" if re.search(r"mi\s?3", name, re.I) else "cdna"
    for label, rx in (("vega", _AMD_VEGA), ("polaris", _AMD_POLARIS), ("rdna4", _AMD_RDNA4), ("rdna3", _AMD_RDNA3)):
        if rx.search(name):
            return label
    if re.search(r"\brx\s?[56]\d{3}|v620|w6\d00", name, re.I):
        return "rdna12"
    if _INTEL.search(name):
        return "xe"
    if _VOLTA.search(name):
        return "volta"
    if re.search(r"p100|gp100", name, re.I):
        return "gp100"
    if _NO_TENSOR_NV.search(name) and not _TURING.search(name):
        return "pascal_dp4a" if _DP4A_NV.search(name) else "nv_no_tensor"
    if re.search(r"\bl40\b(?!s)", name, re.I):
        return "l40"
    if _HBM_NV.search(name):
        return "nv_hbm"
    geforce = bool(_GEFORCE.search(name)) and not _NOT_GEFORCE.search(name)
    if _TURING.search(name):
        return "turing_geforce" if geforce else "turing_pro"
    if geforce:
        return "nv_geforce"
    if backend in ("cuda", "vulkan") and re.search(r"\brtx\b|\bl4\b|\bl40|\ba\d{1,2}\b|dgx|gb10", name, re.I):
        return "nv_pro"
    return "other"


def _flags_by_name(name: str) -> tuple:
    """(has an int8 dot instruction, is Kepler, has HBM) of a GPU known only by its name."""
    kepler = bool(_KEPLER.search(name))
    return not (_NO_DP4A.search(name) or kepler), kepler, bool(_HBM.search(name))


@lru_cache(maxsize=1)
def _arch_rows() -> dict:
    """{name key: (arch, dp4a, kepler, hbm)} of devices.csv's GPU rows that give their architecture."""
    out = {}
    for r in _device_rows():
        if r.get("kind") in ("cpu", "apple") or not r.get("arch"):
            continue
        flag = {"1": True, "0": False}
        out.setdefault(_name_key(r["device"]), (r["arch"], flag[r["dp4a"]], flag[r["kepler"]], flag[r["hbm"]]))
    return out


def gpu_arch(device, backend: str) -> tuple:
    """(ARCH_RATIOS key, dp4a, kepler, hbm) of a GPU: its devices.csv row's columns, else what its name says."""
    name = getattr(device, "name", "") or ""
    row = _arch_rows().get(_name_key(name))
    if row is not None:
        return row
    return (_arch_by_name(name, backend), *_flags_by_name(name))


def _rule_rates(device, backend: str) -> tuple:
    """(fp32, int8, f16_acc_factor) from the architecture's ratios to the datasheet FP16 figure (tf): the
    non-tensor FP32 rate, the int8 rate of the units a quantized matmul multiplies on (0: none), and how much
    faster than tf the FP16 matrix units run at the accumulation llama.cpp uses."""
    tf = getattr(device, "spec_tflops", 0.0) or device.fp16_tflops
    if backend in ("metal", "cpu"):
        return tf, 0.0, 1.0
    fp32_r, int8_r, acc = ARCH_RATIOS[gpu_arch(device, backend)[0]]
    return tf * fp32_r, tf * int8_r, acc


@lru_cache(maxsize=4096)
def rates(device, backend: str) -> dict:
    """A device's rates for the measured profile (FLOP/s and bytes/s):
    bw, fp32 (vector ALUs), f16 (FP16 matrix rate at llama.cpp's accumulation), int8 (the integer units a
    quantized matmul multiplies on; 0 where there are none), and where the figures came from."""
    tf = (getattr(device, "spec_tflops", 0.0) or device.fp16_tflops) * 1e12
    out = {"bw": device.bandwidth_gbs * 1e9, "tf": tf}
    if backend in ("metal", "cpu"):
        vendor = "apple" if backend == "metal" else ""
        out.update(fp32=tf, f16=tf, int8=0.0, dp4a=True, kepler=False, hbm=False, vendor=vendor, basis="device")
        return out
    fp32_r, int8_r, acc = _rule_rates(device, backend)
    cat = catalog_rates(device)
    fp32 = getattr(device, "fp32_tflops", 0.0) or 0.0
    basis = "device" if fp32 else ("catalog" if cat and cat[1] else "rule")
    if not fp32:
        fp32 = cat[1] if cat and cat[1] else fp32_r
    int8 = cat[2] if cat and cat[2] else int8_r
    _arch, dp4a, kepler, hbm = gpu_arch(device, backend)
    out.update(
        fp32=fp32 * 1e12,
        f16=tf * acc,
        int8=int8 * 1e12,
        dp4a=dp4a,
        kepler=kepler,
        hbm=hbm,
        vendor=gpu_vendor(device),
        basis=basis,
    )
    return out


def tensor_tflops(device, backend: str) -> float:
    """The FP16 matrix rate llama.cpp's F16 GEMMs run at, TFLOP/s: the datasheet's FP32-accumulate figure, twice
    that on GeForce cards (llama.cpp accumulates in FP16; GeForce runs FP32 accumulation at half rate)."""
    return rates(device, backend)["f16"] / 1e12


def vector_tflops(device, backend: str) -> float:
    """A GPU's non-tensor FP32 rate, TFLOP/s: the Device's fp32_tflops, else its catalog row, else its
    architecture's ratio to the FP16 figure (RTX 3090: 71 and 35.6; A100: 312 and 19.5)."""
    return rates(device, backend)["fp32"] / 1e12


_SOC_CPU = re.compile(r"\(cpu\)|\bapple\b|\bm[1-9]\b.*\bcpu\b|ryzen ai max|strix halo|snapdragon x", re.I)


def is_soc_cpu(device) -> bool:
    """The CPU cores of an SoC whose Device bandwidth is the unified memory's (shared with its GPU)."""
    return bool(_SOC_CPU.search(getattr(device, "name", "") or ""))


# A read-bandwidth test reaches about this share of a platform's bandwidth (what eta_bw is fitted to on machines
# whose datasheet figure is known: 0.81 for the CPUs in data/calibration): a CPU whose read bandwidth was measured
# (this lab's guest, an SoC's CPU cores) stands in its measurement over this for a datasheet figure.
READ_TEST_SHARE = 0.8


def cpu_read_gbs(device) -> float:
    """The read bandwidth a source measured an SoC's CPU cores to reach (devices.csv cpu_read_gbs), GB/s; 0 unknown."""
    text = _cpu_column("cpu_read_gbs").get(_name_key(getattr(device, "name", "") or ""))
    if not text:
        return 0.0
    try:
        v = float(text)
    except ValueError:
        return 0.0
    return v if math.isfinite(v) and v > 0 else 0.0


_ARM_CPU = re.compile(
    r"\bapple\b|\bm[1-9]\b|cortex|\barm\b|aarch64|qualcomm|snapdragon|\bcix\b|raspberry|graviton|neoverse|"
    r"ampere|rk35\d\d|bcm27\d\d|dimensity|tegra|grace",
    re.I,
)


def is_apple_cpu(device) -> bool:
    """An Apple M-series CPU ("Apple M2 Max (CPU)" in data/calibration/devices.csv, "M4 Max CPU" in the app)."""
    return bool(re.match(r"(apple )?m[1-9]\b", getattr(device, "name", "") or "", re.I))


def is_arm_cpu(device) -> bool:
    """An Arm CPU (NEON / SVE kernels of ggml-cpu); otherwise x86 (AVX2 / AVX-512). Its devices.csv int8_isa decides
    where it names an Arm or an x86 extension; else its name."""
    name = getattr(device, "name", "") or ""
    isa = _cpu_column("int8_isa").get(_name_key(name))
    if isa in ("dotprod", "i8mm"):
        return True
    if isa in ("avx_vnni", "avx512_vnni", "amx"):
        return False
    return bool(_ARM_CPU.search(name))


# x86 cores without an int8 dot-product instruction (VNNI, AVX-512 or AVX-VNNI): Intel before Ice Lake / Tiger Lake
# client and Cascade Lake server, AMD before Zen 4; Arm cores before the dot-product extension (Cortex-A72/A53)
_NO_INT8_DOT_CPU = re.compile(
    r"\bi[3579]-[2-9]\d{3}|\bi[3579]-10\d{3}|haswell|broadwell|skylake|kaby|coffee|comet|"
    r"ryzen [3579] [1-5]\d{3}|ryzen [3579] pro [1-5]\d{3}|threadripper( pro)? [1-5]\d{3}|epyc 7\d{2}[1-3]\b|"
    r"xeon e[35]-|cortex-a(72|73|53)\b|raspberry pi 4|bcm2711",
    re.I,
)


def cpu_has_int8_dot(device) -> bool:
    """A CPU with an int8 dot-product instruction (VNNI / Arm sdot): its devices.csv int8_isa, else from its name;
    unknown CPUs count as modern."""
    return cpu_int8_isa(device) != "none"


INT8_ISAS = ("none", "dotprod", "i8mm", "avx_vnni", "avx512_vnni", "amx")
# Arm cores with the int8 matrix-multiply extension (FEAT_I8MM, mandatory from Armv8.6-A): Apple M2 and later,
# Neoverse V1/V2/N2/V3 (Graviton 3/4, Grace), Cortex-A710/X2 and later, Qualcomm Oryon (Snapdragon X), Cix P1
_I8MM_CPU = re.compile(
    r"apple\s*m[2-9]|m[2-9]\s*(pro|max|ultra)?\s*\(cpu\)|graviton\s*[34]|neoverse[- ]?(v[1-3]|n2|n3)|grace|"
    r"cortex-a7[1-2]\d|cortex-x[2-9]|oryon|snapdragon x|\bcix\b|cp8180|dimensity 9[2-4]00",
    re.I,
)


def cpu_int8_isa(device) -> str:
    """The int8 dot/matmul instructions of a CPU (INT8_ISAS): its devices.csv row's int8_isa (datasheets and the
    Arm architecture versions, each with its source), else from its name: none for the x86 and Arm cores listed in
    _NO_INT8_DOT_CPU, i8mm for the Arm cores of _I8MM_CPU, dotprod for other Arm cores, avx512_vnni for other x86."""
    name = getattr(device, "name", "") or ""
    isa = _cpu_column("int8_isa").get(_name_key(name))
    if isa in INT8_ISAS:
        return isa
    if _NO_INT8_DOT_CPU.search(name):
        return "none"
    if is_arm_cpu(device):
        return "i8mm" if _I8MM_CPU.search(name) else "dotprod"
    return "avx512_vnni"


@lru_cache(maxsize=8)
def _cpu_column(column: str) -> dict:
    """{name key: value} of one column of the CPU rows of data/calibration/devices.csv, where it is filled."""
    return {
        _name_key(r["device"]): (r.get(column) or "").strip()
        for r in _device_rows()
        if r.get("kind") == "cpu" and (r.get(column) or "").strip()
    }


@dataclass(frozen=True)
class _Named:  # a Device as the ISA look-ups read it: by name
    name: str


def cpu_isa_keys(device) -> tuple:
    """The ISA columns of llama_cpp_changes.csv's CPU kernels this CPU runs: ("x86",), ("arm_dot",), ("arm_dot",
    "arm_i8mm") or () (an Arm core without dot products)."""
    return _isa_keys_named(getattr(device, "name", "") or "")


@lru_cache(maxsize=1024)
def _isa_keys_named(name: str) -> tuple:
    device = _Named(name)
    if not is_arm_cpu(device):
        return ("x86",)
    isa = cpu_int8_isa(device)
    return () if isa == "none" else ("arm_dot", "arm_i8mm") if isa == "i8mm" else ("arm_dot",)


_TURING_GTX = re.compile(r"\bgtx\s*16\d\d", re.I)  # Turing without tensor cores (compute capability 7.5)


def cuda_graph_arch(device) -> str:
    """Which GPUs ggml-cuda replays graphs on, this one's class: "ampere" (compute capability 8.0 and newer: always),
    "volta_turing" (7.x: from the change of that name), "none" (Pascal and older: never)."""
    name = getattr(device, "name", "") or ""
    if _VOLTA.search(name) or _TURING.search(name) or _TURING_GTX.search(name):
        return "volta_turing"
    return "none" if _NO_TENSOR_NV.search(name) else "ampere"


# The K-quants' plain vec_dot kernels differ per type, and not alike on every core: what a type costs relative to its
# class's reference type (VEC_DOT_REF) follows each ISA's kernel in ggml-cpu and each core's ports. The throughput
# of one main-loop iteration (256 weights, one super-block) of ggml_vec_dot_<type>_q8_K, in cycles, as llvm-mca
# (LLVM 14) gives it for gcc 12 -O3 output of ggml-cpu-quants.c (ggml-org/llama.cpp, February 2025; the loops are
# fully unrolled, one basic block each): the AVX2 path (-march=x86-64-v3) on the znver3 model for AMD cores (Zen 4
# issues these 256-bit operations as Zen 3 does) and on the skylake model for Intel's; the NEON path
# (-march=armv8.2-a+dotprod) on the apple-m1 model for Apple's cores and on neoverse-n1 (= cortex-a76) for other Arm
# cores. NEON's Q2_K costs 1.4-1.6x its Q4_K where AVX2's costs 0.8-1.1x; AVX2's IQ4_XS 1.5-1.8x its Q4_K, NEON's
# on an Apple core about the same. These are constants of the kernels, not fitted: the fit keeps one dq per class.
VEC_DOT_CYCLES = {
    "amd": {"Q2_K": 20.1, "Q3_K": 31.1, "Q4_K": 18.3, "Q5_K": 29.4, "Q6_K": 35.1, "IQ4_XS": 32.8},
    "intel": {"Q2_K": 22.2, "Q3_K": 40.2, "Q4_K": 29.1, "Q5_K": 36.9, "Q6_K": 36.2, "IQ4_XS": 43.6},
    "apple": {"Q2_K": 51.2, "Q3_K": 71.2, "Q4_K": 31.7, "Q5_K": 52.7, "Q6_K": 63.2, "IQ4_XS": 32.7},
    "arm": {"Q2_K": 80.2, "Q3_K": 97.2, "Q4_K": 58.2, "Q5_K": 83.2, "Q6_K": 105.2, "IQ4_XS": 77.2},
}
VEC_DOT_REF = {"kquant": "Q4_K", "khigh": "Q5_K"}
_INTEL_CPU = re.compile(
    r"\bintel\b|\bcore\s+(i[3579]|ultra|m[3-7])\b|xeon|celeron|pentium|\bn[1-3]\d{2}\b|\bi[3579]-\d", re.I
)


def cpu_core_family(device) -> str:
    """Which VEC_DOT_CYCLES table a CPU's cores follow, from its name: apple, arm, intel or amd (any other x86)."""
    return _core_family_named(getattr(device, "name", "") or "")


@lru_cache(maxsize=1024)
def _core_family_named(name: str) -> str:  # cached: decode asks it per type every estimate
    device = _Named(name)
    if is_arm_cpu(device):
        return "apple" if is_apple_cpu(device) else "arm"
    return "intel" if _INTEL_CPU.search(name) else "amd"


# Hosts that hold a GPU on a narrower link than a desktop's x16 slot, as the published runs name them, and that
# link's one-way bandwidth in GB/s (raw rate after line coding). A Raspberry Pi 5 (and the Pi 500+ and Compute
# Module 5, the same BCM2712) has one external PCIe 2.0 lane: 5 GT/s with 8b/10b coding, 0.5 GB/s (Raspberry Pi 5
# product brief; PCIe 3.0 speed is an unsupported option, and no run here says it was set). The SiFive HiFive
# Premier P550 (ESWIN EIC7700X) has one PCIe 3.0 x4 slot: 8 GT/s x 4 lanes with 128b/130b coding, 3.94 GB/s.
HOST_LINKS = {"Raspberry Pi 5 (BCM2712)": 0.5, "SiFive HiFive Premier P550": 3.94}
_HOST_NAMES = (
    (re.compile(r"\b(raspberry\s+)?pi\s*(5|500\+?)\b|\bcm5\b|compute\s+module\s+5", re.I), "Raspberry Pi 5 (BCM2712)"),
    (re.compile(r"\bp550\b|hifive\s+premier", re.I), "SiFive HiFive Premier P550"),
)


def host_of(text: str) -> str:
    """The HOST_LINKS host a run's notes name ("host Raspberry Pi 500+", "host SiFive HiFive Premier P550"), or ""
    (a desktop or server: a PCIe x16 slot)."""
    m = re.search(r"\bhost\b[^;,)]*|\bpi\s*500\+?[^;,)]*", text or "", re.I)
    for pattern, name in _HOST_NAMES:
        if m and pattern.search(m.group(0)):
            return name
    return ""
