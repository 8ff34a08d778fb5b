"""The measured profile's costs of recurrent, linear-attention and short-conv blocks (enginelab.blocks: Recurrent,
ShortConv), beyond what every block costs.

Decode: a recurrent block reads its state and writes it back once per token and sequence: perf_model counts
those bytes with the KV cache's (Work.kv_bytes: 2 x (r + s) x 4 bytes per block and sequence, r and s as
llama_hparams::n_embd_r() / n_embd_s()), and the memory stream times them. What the bytes do not cover is the
block's extra kernels: ssm_conv, the state update (ggml_ssm_scan, ggml_gated_delta_net), the gate and the norm
run beside its matmuls, rec_layer_us each per decode step (the params table's row).

Prefill: the state update's FLOPs are counted per token (perf_model.kv._recurrent_flops_per_token) and timed
with the matmuls. The update itself is sequential over the micro-batch's tokens: ggml-cuda's gated_delta_net
(ggml/src/ggml-cuda/gated_delta_net.cu) and ssm_scan (ssm-scan.cu) give each state column a warp or thread that
loops over the tokens one after another (the chunked prefill kernel is still a TODO there, llama.cpp issue
#22967), so a micro-batch of u tokens costs u dependent steps per recurrent block whatever the GPU's width
(RTX 5090, Qwen3.5's 32 x 128 x 128 state: 279.6 µs for 512 tokens, 0.55 µs a step, PR #22587). scan_us is
that step; Work.rec_steps counts them (blocks x tokens). A short convolution (LFM2) has no recurrent state to
update, only its conv taps, but counts as a recurrent block (its ssm_conv walks the tokens too).
"""

from __future__ import annotations

CONDITION = "the block has a recurrent mixer"


def decode_count(work, backend: str, f) -> int:
    """Recurrent blocks in a decode pass (each runs its extra kernels once per step)."""
    return getattr(work, "rec_blocks", 0)


def prefill_count(work) -> float:
    """Sequential token steps of the recurrent blocks in one micro-batch: blocks x tokens."""
    return getattr(work, "rec_steps", 0.0)


# the physics' tables of counts and conditions take these (enginelab.measured.physics)
DECODE_COUNTS = {"recurrent block": decode_count}
DECODE_CONDITIONS = {CONDITION: lambda device, backend, f: True}
PREFILL_COUNTS = {"token x recurrent block": prefill_count}
PREFILL_CONDITIONS = {CONDITION: lambda offloaded: not offloaded}  # op offload runs only the matmuls on the GPU


def recurrent_seconds(work, prm, kind: str, k: int = 1) -> float:
    """Seconds the recurrent rows add to one pass (decode) or k micro-batches (prefill) of `work`."""
    if kind == "decode":
        return decode_count(work, "", None) * prm.rec_layer_us * 1e-6
    return prefill_count(work) * prm.scan_us * 1e-6 * k
