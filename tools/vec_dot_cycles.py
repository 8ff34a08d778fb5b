"""Where measured.VEC_DOT_CYCLES comes from: the throughput of ggml-cpu's plain K-quant vec_dot main loops, by llvm-mca.

    python3 tools/vec_dot_cycles.py LLAMA_CPP_CHECKOUT

Compiles the checkout's ggml/src/ggml-cpu/ggml-cpu-quants.c (the layout of early 2025; later trees split it into
arch/x86/quants.c and arch/arm/quants.c) twice with gcc 12 -O3: the AVX2 path (-march=x86-64-v3) and the NEON path
(aarch64-linux-gnu-gcc -march=armv8.2-a+dotprod+fp16). In each ggml_vec_dot_<type>_q8_K the main loop over the
256-weight super-blocks is one basic block (gcc unrolls the inner loops), so llvm-mca's cycles per iteration of it
(200 iterations) are the kernel's cycles per 256 weights on the scheduling model named: znver3 (AMD), skylake
(Intel), apple-m1 (Apple) and neoverse-n1 (other Arm cores). Prints one row per model, the numbers the table holds.

Needs gcc, aarch64-linux-gnu-gcc (Debian gcc-aarch64-linux-gnu) and llvm-mca (Debian llvm-14). Not run by the tests:
the table is a constant of the kernels, written into pylib/enginelab/measured/devices.py by hand.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

TYPES = ("q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_xs")
MODELS = (
    ("amd", "znver3", "x86"),
    ("intel", "skylake", "x86"),
    ("apple", "apple-m1", "arm"),
    ("arm", "neoverse-n1", "arm"),
)
COMPILE = {
    "x86": ["gcc", "-O3", "-march=x86-64-v3"],
    "arm": ["aarch64-linux-gnu-gcc", "-O3", "-march=armv8.2-a+dotprod+fp16"],
}
TRIPLE = {"x86": "x86_64", "arm": "aarch64"}
_BRANCH = re.compile(r"\s+(j\w+|b\.?\w*|cbnz|cbz|tbnz|tbz)\s+(?:.*,\s*)?(\.L\w+)$")


def main_loop(asm: str, fn: str) -> str:
    """The instructions of the widest backward-branching loop of one function in gcc's assembly output."""
    lines = asm.split("\n")
    start = lines.index(fn + ":")
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("\t.size\t" + fn))
    body = lines[start:end]
    labels = {ln[:-1]: i for i, ln in enumerate(body) if re.match(r"^\.L\w+:$", ln)}
    loops = []
    for i, ln in enumerate(body):
        m = _BRANCH.match(ln)
        if m and m.group(2) in labels and labels[m.group(2)] < i:
            loops.append((labels[m.group(2)], i))
    a, b = max(loops, key=lambda x: x[1] - x[0])
    keep = [ln for ln in body[a + 1 : b + 1] if not re.match(r"^\.L\w+:$", ln)]
    return "\n".join(ln for ln in keep if not ln.strip().startswith((".loc", ".cfi", ".p2align", ".align")))


def cycles(block: str, cpu: str, triple: str, iterations: int = 200) -> float:
    out = subprocess.run(
        ["llvm-mca", f"-mcpu={cpu}", f"-mtriple={triple}", f"-iterations={iterations}"],
        input=block,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(re.search(r"Total Cycles:\s*(\d+)", out).group(1)) / iterations


def main(argv: list) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    src = os.path.join(argv[0], "ggml", "src", "ggml-cpu")
    inc = ["-I" + src, "-I" + os.path.join(src, ".."), "-I" + os.path.join(argv[0], "ggml", "include")]
    asm = {}
    with tempfile.TemporaryDirectory() as tmp:
        for isa, cmd in COMPILE.items():
            out = os.path.join(tmp, isa + ".s")
            subprocess.run(
                [*cmd, "-S", "-DNDEBUG", *inc, "-o", out, os.path.join(src, "ggml-cpu-quants.c")], check=True
            )
            with open(out) as f:
                asm[isa] = f.read()
    for family, cpu, isa in MODELS:
        row = {t: cycles(main_loop(asm[isa], f"ggml_vec_dot_{t}_q8_K"), cpu, TRIPLE[isa]) for t in TYPES}
        print(f"{family:6s} ({cpu:11s}) " + "  ".join(f"{t.upper()}: {c:.1f}" for t, c in row.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
