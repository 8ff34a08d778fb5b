"""The roofline (Williams, Waterman and Patterson, CACM 2009) and the batch at its ridge."""

from __future__ import annotations

from enginelab.checks import brief, check_number
from enginelab.ggml import ALL_QUANTS, GGML_TYPES, main_type

from .devices import Device
from .models import MAX_BATCH
from .sizes import effective_bpw
from .units import _check

# A weight matmul over B tokens does 2*B FLOPs per weight and reads bpw/8 bytes
# of it: intensity I = 2B / (bpw/8) = 16B / bpw FLOP/byte.  Attainable
# throughput is min(peak, I * bandwidth); the ridge point I* = peak / bandwidth,
# and the batch that reaches it is B* = I* * bpw / 16.


def quant_bpw(quant, model=None) -> float:
    """Bits per weight of a quant: a number passes through; a name gives the
    model's effective bpw when a model is given, else its main ggml type's bpw."""
    return _bpw(quant, "quant", model)


def _bpw(quant, arg: str, model=None) -> float:
    if isinstance(quant, (int, float)) and not isinstance(quant, bool):
        return check_number(quant, arg, 0.0, 64.0, lo_open=True)
    if not (isinstance(quant, str) and (quant.upper() in GGML_TYPES or quant in ALL_QUANTS)):
        _check(
            False,
            arg,
            f"must be bits per weight (a number) or a quantization ({', '.join(ALL_QUANTS)}) or ggml type, "
            f"got {brief(quant)}",
        )
    if model is not None:
        return effective_bpw(model, quant)
    if quant.upper() in GGML_TYPES:
        return GGML_TYPES[quant.upper()].bpw
    return GGML_TYPES[main_type(quant)].bpw


def roofline(device: Device, bpw, batch: int = 1) -> dict:
    """Where a weight matmul over `batch` tokens sits on `device`'s roofline."""
    if not (isinstance(device, Device)):
        _check(False, "device", f"must be a Device, got {brief(device)}")
    check_number(batch, "batch", 0.0, MAX_BATCH, lo_open=True)
    bpw = _bpw(bpw, "bpw")
    intensity = 16.0 * batch / bpw
    ridge = device.flops / device.bandwidth
    attainable = min(device.flops, intensity * device.bandwidth)
    return {
        "batch": batch,
        "bpw": bpw,
        "intensity": intensity,
        "ridge_intensity": ridge,
        "attainable_flops": attainable,
        "peak_flops": device.flops,
        "bandwidth": device.bandwidth,
        "utilization": attainable / device.flops,
        "bound": "memory" if intensity < ridge else "compute",
        "ridge_batch": ridge * bpw / 16.0,
    }


def ridge_batch(device: Device, quant="Q4_K_M", model=None) -> float:
    """The batch at which a weight matmul stops being memory-bound: P/beta * bpw / 16."""
    return roofline(device, quant_bpw(quant, model), 1)["ridge_batch"]
