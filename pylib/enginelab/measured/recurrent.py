"""The measured profile's cost of recurrent, linear-attention and short-conv blocks (enginelab.blocks: Recurrent,
ShortConv) beyond what every block costs.

Decode: a recurrent block reads its state and writes it back once per token and sequence. perf_model counts those
bytes with the KV cache's (Work.kv_bytes: 2 x (r + s) x 4 bytes per block and sequence, r and s as
llama_hparams::n_embd_r() / n_embd_s()) and the memory stream times them; the block's kernels cost what any
block's do (layer_us). No row of its own: on the published hybrid runs a per-recurrent-block decode cost fitted
on the other devices made the held-out error worse, not better (data/calibration/README.md, hybrid models).

Prefill: the state update's FLOPs are counted per token (perf_model.kv._recurrent_flops_per_token) and timed with
the matmuls. The update itself is sequential over a micro-batch's tokens: ggml-cuda's gated_delta_net_cuda
(ggml/src/ggml-cuda/gated_delta_net.cu) gives each state column a warp that loops `for t < n_tokens`, with a
"TODO: Add chunked kernel for even faster pre-fill" at its launch, and ssm_scan (ssm-scan.cu) loops over the
tokens the same way, so a micro-batch of u tokens costs u dependent steps per recurrent block whatever the GPU's
width (RTX 5090, Qwen3.5's 32 x 128 x 128 state: 279.6 µs for 512 tokens, 0.55 µs a step, PR #22587). scan_us is
that step and Work.rec_steps counts them (blocks x tokens). LFM2's short convolution has no such step: its ssm_conv
is a d_conv-tap dot product per token and channel with no state carried between tokens, which ggml-cuda (HIP too)
splits into 32-token chunks across thread blocks past 32 tokens (ssm-conv.cu, ssm_conv_long_token_f32) and Vulkan
runs as one invocation per channel and token (vulkan-shaders/ssm_conv.comp). A short-conv block is recurrent in
its decode state (Work.rec_blocks counts it) but adds no steps. On LFM2-1.2B's published prefill runs (RX 7900
XTX, ROCm; data/calibration/hybrid_runs.csv) charging it scan steps put the estimates 25% and 43% below the
measured rates.
"""

from __future__ import annotations

CONDITION = "the block has a recurrent mixer"


def prefill_count(work) -> float:
    """Sequential token steps of the recurrent blocks in one micro-batch: blocks x tokens."""
    return getattr(work, "rec_steps", 0.0)


# the physics' tables of prefill counts and conditions take these (enginelab.measured.physics)
PREFILL_COUNTS = {"token x recurrent block": prefill_count}
PREFILL_CONDITIONS = {CONDITION: lambda offloaded: not offloaded}  # op offload runs only the matmuls on the GPU


def scan_seconds(work, prm, k: int = 1) -> float:
    """Seconds the scan steps of k micro-batches of `work` take (prefill_terms' scan_us row)."""
    return prefill_count(work) * prm.scan_us * 1e-6 * k
