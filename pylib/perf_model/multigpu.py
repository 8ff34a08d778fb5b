"""Several GPUs: llama.cpp's --split-mode, --tensor-split and --main-gpu, the layers each device runs, the
compute buffers per device, and what a transfer between two devices costs."""

from __future__ import annotations

import bisect
import math
import struct

from enginelab.checks import brief, check_int, check_number

from .devices import MAX_GPUS, Machine, get_machine
from .models import Model
from .units import GB, _check

# llama.cpp gives every layer one device (src/llama-model.cpp, llama_model::load_tensors):
#
#   splits      = tensor_split (-ts), or each device's free memory when -ts is not given (or all zero),
#                 summed up and normalised into split points, in float32: -ts 3,1 -> [0.75, 1.0]
#   i_gpu_start = max(n_layer + 1 - n_gpu_layers, 0)     the first layers stay on the CPU
#   act         = min(n_gpu_layers, n_layer + 1)
#   layer il = 0 .. n_layer (il = n_layer is the output layer) goes to the CPU if il < i_gpu_start, else to
#       devices[upper_bound(splits, (il - i_gpu_start) / act)]
#
# so each GPU holds a contiguous run of layers, the last one the output layer, and the input layer
# (token_embd) stays on the CPU.  Each layer's KV cache lives on its layer's device (src/llama-kv-cache.cpp,
# dev_layer(il)).  --split-mode none keeps only --main-gpu in the device list (src/llama.cpp).  With
# -ngl below n_layer + 1 it is the *first* layers that stay on the CPU (a single-GPU machine keeps the
# module's rule, see placement.py; the bytes per tier are nearly the same).
#
# --split-mode row: every device's buffer list starts with its backend's split buffer type
# (make_gpu_buft_list), so each 2-D matrix of a GPU layer, and the output matrix, has its rows spread over
# all the GPUs: by -ts, or by each card's total memory without it (ggml-cuda's default_tensor_split).  The
# layer's norms, its expert tensors (mul_mat_id cannot read a split buffer) and its KV cache stay on the
# layer's device.  Only CUDA, ROCm and SYCL offer a split buffer; on Vulkan, Metal or RPC devices row
# places like layer.  (ggml-cuda also rounds each slice to whole tiles of 64-128 rows; ignored here.)
#
# --fit across devices (common/fit.cpp, common_params_fit_impl), when -ngl is left to it:
#   1. the default placement (every layer, split by free memory): when every GPU keeps its margin
#      (--fit-target, 1024 MiB per device) free, nothing changes;
#   2. it would shrink the context only where -c was not given (place() always has n_ctx);
#   3. otherwise it fills the GPUs back to front: the last GPU takes as many layers from the end (the output
#      layer first) as fit in its free memory less the margin, then the GPU before it, and so on; what is
#      left stays on the CPU.  It then sets -ngl to their sum and -ts to the layers per GPU.
#   With -ts given or --split-mode row it leaves the weights where they are.  (An MoE model is filled here
#   with whole layers and --n-cpu-moe as given; llama.cpp first fills "dense-only" layers with the experts
#   in RAM and then moves experts in, which this does not model.)
#
# Compute buffers per device, from the ggml graph's largest live tensors (checked against llama.cpp's own
# lines in data/lab/logs/rpc-*.log, Llama 3.2 1B on two RPC devices and the host, to 0.01 MiB):
#   a GPU running blocks      4 * ub * (3 * n_ff + 3 * n_embd) + 2 * ub * n_ctx
#                             (FFN activations, the residual stream, the f16 KQ mask)
#   the GPU with the output   at least 4 * ub * (n_vocab + n_embd)  (the logits)
#   the host                  4 * ub * 2 * n_embd + 2 * ub * n_ctx, or, running blocks, the block formula
#                             + 4 * ub * n_embd
# A machine with one GPU keeps the module's compute_buffer_bytes (its printed numbers stand).

SPLIT_MODES = ("none", "layer", "row")
ROW_SPLIT_BACKENDS = ("cuda", "rocm", "sycl")  # the backends with ggml_backend_split_buffer_type


def check_split(machine, tensor_split=None, split_mode: str = "layer", main_gpu: int = 0) -> tuple:
    """(tensor_split, split_mode, main_gpu) checked against the machine's GPUs, as place() uses them.

    tensor_split: None or one number >= 0 per GPU (fewer: the rest are 0, as llama.cpp's zeroed array);
    returned as a tuple of floats, or () when it is None or all zero (llama.cpp then splits by free memory).
    Raises ValueError naming the argument."""
    machine = get_machine(machine)
    n = len(machine.gpus)
    if not (isinstance(split_mode, str) and split_mode in SPLIT_MODES):
        _check(False, "split_mode", f"unknown split mode {brief(split_mode)}; allowed: {', '.join(SPLIT_MODES)}")
    if not (isinstance(main_gpu, int) and not isinstance(main_gpu, bool) and 0 <= main_gpu < max(n, 1)):
        _check(
            False,
            "main_gpu",
            f"must be an integer from 0 to {max(n, 1) - 1} (the machine has {n} GPU{'s' if n != 1 else ''}), "
            f"got {brief(main_gpu)}",
        )
    if tensor_split is None:
        return (), split_mode, main_gpu
    if not (not isinstance(tensor_split, (str, bytes, dict)) and hasattr(tensor_split, "__iter__")):
        _check(
            False, "tensor_split", f"must be None or a list of numbers, one per GPU, got {type(tensor_split).__name__}"
        )
    vals = tuple(v for _, v in zip(range(MAX_GPUS + 1), tensor_split))  # never more than one past the limit
    if not (len(vals) <= max(n, 1)):
        _check(
            False, "tensor_split", f"{len(vals)} values for {n} GPU{'s' if n != 1 else ''}: give at most one per GPU"
        )
    for i, v in enumerate(vals):
        if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= 1e9):
            _check(False, "tensor_split", f"value {i + 1} must be a number from 0 to 1e9, got {brief(v)}")
    if not any(vals):
        return (), split_mode, main_gpu
    return tuple(float(v) for v in vals) + (0.0,) * (n - len(vals)), split_mode, main_gpu


def _f32(x: float) -> float:
    """x rounded to a C float: llama.cpp computes the split points in float32."""
    return struct.unpack("f", struct.pack("f", x))[0]


def split_points(weights) -> list:
    """llama.cpp's split points for per-device weights: the running sums, normalised (float32, as load_tensors)."""
    acc, out = 0.0, []
    for w in weights:
        acc = _f32(acc + _f32(w))
        out.append(acc)
    _check(acc > 0, "tensor_split", "the weights must not all be zero")
    return [_f32(x / acc) for x in out]


def layer_devices(n_layer: int, n_gpu_layers: int, splits) -> tuple:
    """For layers 0 .. n_layer (n_layer: the output layer), the index of the device in `splits` that gets it,
    or None for the CPU: load_tensors' get_layer_buft_list."""
    start = max(n_layer + 1 - n_gpu_layers, 0)
    act = min(n_gpu_layers, n_layer + 1) if splits else 0
    out = []
    for il in range(n_layer + 1):
        if il < start or il - start >= act:
            out.append(None)
        else:
            out.append(min(bisect.bisect_right(splits, _f32((il - start) / act)), len(splits) - 1))
    return tuple(out)


def _multi_compute_bytes(model: Model, n_ubatch: int, n_ctx: int, blocks: bool, output: bool, host=False) -> float:
    """One device's compute buffer on a machine with several GPUs (see the section comment)."""
    ff = model.intermediate_size
    if model.is_moe:
        ff = max(model.moe_intermediate_size or ff, 1) * max(1, model.num_experts_per_tok)
    h = model.hidden_size
    mask = 2.0 * n_ubatch * n_ctx  # the f16 KQ mask: one row per token of the micro-batch, one column per cell
    layer = 4.0 * n_ubatch * (3 * ff + 3 * h) + mask
    if host:
        c = layer + 4.0 * n_ubatch * h if blocks else 4.0 * n_ubatch * 2 * h + mask
    else:
        c = layer if blocks else 0.0
    if output:
        c = max(c, 4.0 * n_ubatch * (model.vocab_size + h))
    return c


def link_seconds(machine: Machine, n_bytes: float, n_transfers: int = 1) -> float:
    """Seconds for n_transfers hand-overs carrying n_bytes in all over the machine's GPU link."""
    machine = get_machine(machine)
    check_number(n_bytes, "n_bytes", 0.0, 1e18)
    check_int(n_transfers, "n_transfers", 0, 1 << 40)
    ic = machine.link
    trips = 2 if ic.kind == "pcie" else 1  # through the host: GPU -> host -> GPU
    return n_transfers * ic.latency_us * 1e-6 + trips * n_bytes / (ic.bandwidth_gbs * GB)


def _gpu_side(i: int) -> str:
    return f"gpu{i}"
