"""Placement: where each tensor lives (llama.cpp -ngl, --fit, --n-cpu-moe), on one GPU or several."""

from __future__ import annotations

from dataclasses import dataclass, replace

from enginelab.checks import brief, check_bool, check_int, check_number, is_int
from enginelab.engine_io import FIT_TARGET_MIB, N_UBATCH_DEFAULT
from enginelab.ggml import check_quant

from .catalog import get_model
from .devices import MAX_DEVICE_GB, Machine, device_backend, get_machine
from .kv import MAX_RS_SEQ, MAX_SEQ, _kv_layers_bytes, _kv_type
from .models import MAX_CONTEXT, MAX_NGL, Model
from .multigpu import ROW_SPLIT_BACKENDS, SPLIT_MODES, _multi_compute_bytes, check_split, layer_devices, split_points
from .profiles import PROFILE_OBJECTS
from .sizes import _layer_bytes, _layer_matrix_bytes
from .units import GB, MiB, _check, _check_profile

# The course's placement rule: blocks 0 .. ngl-1 and their KV cache go to the
# GPU, the rest stay in system RAM, and ngl = n_layers + 1 also moves the output
# head (and the final norm).  token_embd always stays in host memory: llama.cpp
# allocates the input layer on the CPU because a lookup reads one row of it.
# (llama.cpp itself counts -ngl from the *last* block, i_gpu_start =
# n_layer + 1 - ngl; for the bytes in each tier the two are nearly the same.)
#
# Memory per device:
#   weights      the tensors placed there (expert tensors of the first n_cpu_moe
#                blocks stay in RAM even when their block is on the GPU)
#   KV cache     kv_cache_bytes of the device's blocks, allocated for all n_ctx
#   compute      compute_buffer_bytes(): scratch for one micro-batch
#   margin       --fit-target (1024 MiB) kept free on the GPU
#
# With n_gpu_layers=None the placement is what --fit chooses: the largest ngl
# whose GPU total plus the margin fits the device.  An explicit ngl is taken as
# given; if it does not fit, the Placement says so (fits=False, error=...) the
# way llama.cpp's allocation would fail, instead of raising.


@dataclass(frozen=True)
class Placement:
    model: Model
    machine: Machine
    quant: str
    n_ctx: int
    kv_type: str
    n_gpu_layers: int
    n_cpu_moe: int
    auto: bool  # ngl chosen by --fit
    layer_device: tuple  # per block: "gpu" or "cpu"
    output_on_gpu: bool
    gpu_weights: float
    gpu_kv: float
    gpu_compute: float
    cpu_weights: float
    cpu_kv: float
    cpu_compute: float
    gpu_capacity: float  # bytes llama.cpp may use on the GPU (0 without one)
    cpu_capacity: float
    fit_margin: float
    n_ubatch: int = N_UBATCH_DEFAULT
    fits: bool = True
    error: str | None = None
    requested_bytes: float = 0.0  # what the failing device needs
    free_bytes: float = 0.0  # what it has free (capacity less the margin on a GPU)
    overflow_bytes: float = 0.0
    failing_device: str = ""
    fit_next_gpu_total: float | None = None  # --fit: GPU bytes at one more layer (the one that did not fit)
    profile: str = "course"  # how capacities were counted, and the timing profile used by default
    n_seq: int = 1  # -np: sequences the KV cache is allocated for (one stream each unless kv_unified)
    kv_unified: bool = False  # --kv-unified: one stream shared by all sequences
    n_rs_seq: int = 0  # rollback copies of each sequence's recurrent state (speculative decoding; kv.kv_allocation)
    swa_full: bool = False  # --swa-full: sliding-window blocks keep the whole context (and decode reads it all)
    # Several GPUs (perf_model.multigpu; a machine with one GPU leaves these at their defaults, see per_gpu):
    split_mode: str = "layer"  # llama.cpp --split-mode: none, layer or row
    main_gpu: int = 0  # --main-gpu: the one GPU used with split_mode none
    tensor_split: tuple = ()  # --tensor-split as llama.cpp gets it (given, or what --fit wrote); () = by free memory
    fit_wrote_split: bool = False  # tensor_split is --fit's layers per GPU (not the reader's -ts)
    gpu_devices: tuple = ()  # one DeviceUse per GPU of the machine
    layer_gpu: tuple = ()  # per block: the index of its GPU in machine.gpus, None on the CPU
    output_gpu: int | None = None  # the GPU holding the output layer, None on the CPU
    row_split: bool = False  # split_mode row on a backend with a split buffer: matrices split by rows
    row_fractions: tuple = ()  # with row_split: each GPU's share of every matrix's rows

    @property
    def per_gpu(self) -> tuple:
        """One DeviceUse per GPU: what each holds and how much room it has (one entry for a single GPU)."""
        if self.gpu_devices or self.machine.gpu is None:
            return self.gpu_devices
        layers = tuple(il for il, d in enumerate(self.layer_device) if d == "gpu")
        if self.output_on_gpu:
            layers += (self.model.num_hidden_layers,)
        dev = self.machine.gpu
        return (
            DeviceUse(
                0, dev.name, layers, self.gpu_weights, self.gpu_kv, self.gpu_compute, self.gpu_capacity, self.fit_margin
            ),
        )

    def __post_init__(self):
        # place() makes valid Placements; this catches a hand-made one before it reaches the timing functions
        if not (isinstance(self.model, Model)):
            _check(False, "model", f"must be a Model, got {brief(self.model)}")
        if not (isinstance(self.machine, Machine)):
            _check(False, "machine", f"must be a Machine, got {brief(self.machine)}")
        n = self.model.num_hidden_layers
        _check(
            isinstance(self.layer_device, tuple)
            and len(self.layer_device) == n
            and all(d == "gpu" or d == "cpu" for d in self.layer_device),
            "layer_device",
            f"must be a tuple of {n} entries, each 'gpu' or 'cpu'",
        )
        _kv_type(self.kv_type)
        check_int(self.n_ctx, "n_ctx", 1, MAX_CONTEXT)
        check_int(self.n_gpu_layers, "n_gpu_layers", 0, n + 1)
        check_int(self.n_cpu_moe, "n_cpu_moe", 0, n)
        check_int(self.n_ubatch, "n_ubatch", 1, MAX_CONTEXT)
        check_int(self.n_seq, "n_seq", 1, MAX_SEQ)
        check_bool(self.kv_unified, "kv_unified")
        check_int(self.n_rs_seq, "n_rs_seq", 0, MAX_RS_SEQ)
        check_bool(self.swa_full, "swa_full")
        if self.machine.multi_gpu:  # perf_model.multigpu's fields, which the timing functions read
            ng = len(self.machine.gpus)
            if self.split_mode not in SPLIT_MODES:
                _check(False, "split_mode", f"must be one of {', '.join(SPLIT_MODES)}")
            _check(
                isinstance(self.layer_gpu, tuple)
                and len(self.layer_gpu) == n
                and all(g is None or (is_int(g) and 0 <= g < ng) for g in self.layer_gpu),
                "layer_gpu",
                f"must be a tuple of {n} GPU indices (None: the CPU), each below {ng}",
            )
            _check(
                self.output_gpu is None or (is_int(self.output_gpu) and 0 <= self.output_gpu < ng),
                "output_gpu",
                f"must be None (the CPU) or 0 to {ng - 1}",
            )
            _check(
                isinstance(self.gpu_devices, tuple) and len(self.gpu_devices) == ng,
                "gpu_devices",
                f"must hold one DeviceUse per GPU ({ng})",
            )
            if self.row_split:
                _check(
                    isinstance(self.row_fractions, tuple)
                    and len(self.row_fractions) == ng
                    and abs(sum(self.row_fractions) - 1.0) < 1e-6,
                    "row_fractions",
                    f"must be {ng} shares that sum to 1",
                )

    @property
    def gpu_total(self) -> float:
        return self.gpu_weights + self.gpu_kv + self.gpu_compute

    @property
    def cpu_total(self) -> float:
        return self.cpu_weights + self.cpu_kv + self.cpu_compute

    @property
    def n_layers(self) -> int:
        return self.model.num_hidden_layers

    @property
    def gpu_layers(self) -> int:
        return sum(1 for d in self.layer_device if d == "gpu")

    @property
    def full_offload(self) -> bool:
        return self.n_gpu_layers >= self.model.num_hidden_layers + 1

    def as_dict(self) -> dict:
        out = {
            k: getattr(self, k)
            for k in (
                "quant",
                "n_ctx",
                "kv_type",
                "n_gpu_layers",
                "n_cpu_moe",
                "auto",
                "gpu_weights",
                "gpu_kv",
                "gpu_compute",
                "gpu_total",
                "cpu_weights",
                "cpu_kv",
                "cpu_compute",
                "cpu_total",
                "gpu_capacity",
                "cpu_capacity",
                "fit_margin",
                "fits",
                "error",
                "requested_bytes",
                "free_bytes",
                "overflow_bytes",
            )
        }
        out["model"] = self.model.name
        out["machine"] = self.machine.name
        return out


@dataclass(frozen=True)
class DeviceUse:
    """What one GPU holds in a placement (llama.cpp's per-device model, KV and compute buffers)."""

    index: int  # position in machine.gpus: llama.cpp's device order (CUDA0, CUDA1, ...)
    name: str
    layers: tuple  # the layers placed here: block indices, and n_layers for the output layer
    weights: float  # model buffer, bytes
    kv: float  # KV buffer
    compute: float  # compute buffer
    capacity: float  # what llama.cpp may use on it (course: decimal GB; measured: GiB less the driver's share)
    margin: float  # --fit-target kept free (when it holds anything)

    @property
    def total(self) -> float:
        return self.weights + self.kv + self.compute

    @property
    def free(self) -> float:
        """Room left after its buffers and the margin (negative: over by that much)."""
        return self.capacity - self.total - (self.margin if self.total > 0 else 0.0)

    @property
    def fits(self) -> bool:
        return self.free >= 0


def compute_buffer_bytes(model, n_ubatch: int = N_UBATCH_DEFAULT, with_logits: bool = True) -> float:
    """Scratch memory ggml's scheduler reserves for one micro-batch, f32 activations:
    the logits (n_ubatch x n_vocab), the three FFN-wide tensors of the widest
    matmul (gate, up and their product).  Matches llama.cpp's reported CUDA compute
    buffer (about 0.3 GB for an 8B model at -ub 512) to within a few percent."""
    model = get_model(model)
    check_int(n_ubatch, "n_ubatch", 1, MAX_CONTEXT)
    check_bool(with_logits, "with_logits")
    ff = model.intermediate_size
    if model.is_moe:
        ff = max(model.moe_intermediate_size or ff, 1) * max(1, model.num_experts_per_tok)
    per_token = (model.vocab_size if with_logits else 0) + 3 * ff
    return 4.0 * n_ubatch * per_token


def _device_bytes(machine: Machine, tables: tuple, lg: tuple, og, n_cpu_moe: int, row_fr: tuple = ()) -> tuple:
    """The bytes each device holds when block il runs on GPU lg[il] (None: the CPU) and the output layer on GPU og:
    (weights per GPU, KV per GPU, host weights, host KV, which GPUs run blocks, whether the CPU does). One account
    for one GPU or several; only where each layer goes differs between them.

    tables: (dense, experts, matrix bytes per block, KV bytes per block, token_embd, the output layer's small
    tensors, its matrix, tied). With row_fr (a row split) each block's matrices are spread over the GPUs."""
    dense, experts, matrix, kv_layer, embd, out_small, out_matrix, tied = tables
    ng = len(machine.gpus)
    w, k, has_blocks = [0.0] * ng, [0.0] * ng, [False] * ng
    cw = ck = 0.0
    cpu_blocks = False
    for il, g in enumerate(lg):
        if g is None:
            cw += dense[il] + experts[il]
            ck += kv_layer[il]
            cpu_blocks = True
            continue
        has_blocks[g] = True
        k[g] += kv_layer[il]
        if il < n_cpu_moe:
            cw += experts[il]  # --n-cpu-moe: this block's experts stay in RAM
        else:
            w[g] += experts[il]
        if row_fr:
            w[g] += dense[il] - matrix[il]  # norms and biases on the layer's device
            for i in range(ng):
                w[i] += matrix[il] * row_fr[i]
        else:
            w[g] += dense[il]
    if machine.unified and (og is not None or any(has_blocks)):
        w[0] += embd  # Metal maps the whole file into one buffer: the working-set limit counts token_embd
    else:
        cw += embd  # the input layer: a lookup reads one row, from host memory
    if og is not None:
        # with tied embeddings the output layer's token_embd is a duplicated tensor: a GPU copy (on unified
        # memory the mapping already holds it)
        w[og] += out_small + (0 if tied and machine.unified else 0 if row_fr else out_matrix)
        for i in range(ng if row_fr else 0):
            w[i] += out_matrix * row_fr[i]
    else:
        cw += out_small + (0 if tied else out_matrix)  # a tied head on the CPU reads token_embd itself
    return w, k, cw, ck, has_blocks, cpu_blocks


def _byte_tables(
    model: Model,
    quant,
    n_ctx: int,
    kv_type: str,
    n_seq: int,
    n_ubatch: int,
    kv_unified: bool,
    n_rs_seq: int = 0,
    swa_full: bool = False,
) -> tuple:
    """_device_bytes's tables: per block its dense and expert weights, its matrices, its cache (or recurrent
    state) as llama.cpp allocates it; the input embeddings and the output layer."""
    dense, experts, other = _layer_bytes(model, quant)
    kv_layer = _kv_layers_bytes(model, n_ctx, kv_type, n_seq, n_ubatch, kv_unified, n_rs_seq, swa_full)
    embd = other.get("token_embd", 0)
    out_matrix = other.get("output", embd)  # the output projection: token_embd itself when tied
    out_small = sum(v for k, v in other.items() if k not in ("token_embd", "output"))
    return (
        dense,
        experts,
        _layer_matrix_bytes(model, quant),
        kv_layer,
        embd,
        out_small,
        out_matrix,
        "output" not in other,
    )


def place(
    model,
    machine,
    quant: str = "Q4_K_M",
    n_ctx: int = 4096,
    kv_type: str = "f16",
    n_gpu_layers=None,
    n_cpu_moe: int = 0,
    n_ubatch: int = N_UBATCH_DEFAULT,
    fit_target_mib: float = FIT_TARGET_MIB,
    profile: str = "course",
    tensor_split=None,
    split_mode: str = "layer",
    main_gpu: int = 0,
    n_seq: int = 1,
    kv_unified: bool = False,
    n_rs_seq: int = 0,
    swa_full: bool = False,
) -> Placement:
    """Place a model on a machine the way llama.cpp would (see the section comment).

    profile: "course" counts device memory in the module's decimal GB; "measured" in real GiB, less what
    the driver holds (DRIVER_RESERVE_MIB). The placement remembers it: decode_step_time and prefill_time use
    it when not told otherwise.

    Several GPUs (perf_model.multigpu): tensor_split (-ts: one weight per GPU, None = by free memory), split_mode
    (-sm: "none", "layer" or "row") and main_gpu (-mg). With one GPU they change nothing.

    n_seq (-np) and kv_unified (--kv-unified) size the KV cache as llama.cpp does (kv_layer_bytes: padded
    cells, windows, one recurrent state per sequence); each block's cache lives on its block's device.
    n_rs_seq: the rollback copies of each recurrent state llama.cpp keeps for speculative decoding (a draft
    model or MTP head; 0 without one). swa_full (--swa-full): sliding-window blocks keep a cell per token of the
    context, as a full block does, and decode reads them all."""
    model, machine = get_model(model), get_machine(machine)
    profile = _check_profile(profile)
    if quant is not None or not model.gguf_tensors:
        check_quant(quant)
    _kv_type(kv_type)
    if not (is_int(n_ctx) and 0 < n_ctx <= MAX_CONTEXT):
        _check(False, "n_ctx", f"context length must be a positive integer up to {MAX_CONTEXT:,}, got {brief(n_ctx)}")
    n = model.num_hidden_layers
    if not (n_gpu_layers is None or (is_int(n_gpu_layers) and 0 <= n_gpu_layers <= MAX_NGL)):
        _check(
            False, "n_gpu_layers", f"must be None (auto) or an integer from 0 to {MAX_NGL:,}, got {brief(n_gpu_layers)}"
        )
    if not (is_int(n_cpu_moe) and 0 <= n_cpu_moe <= n):
        _check(False, "n_cpu_moe", f"must be an integer from 0 to {n}, got {brief(n_cpu_moe)}")
    if not (is_int(n_ubatch) and 1 <= n_ubatch <= MAX_CONTEXT):
        _check(False, "n_ubatch", f"must be a positive integer up to {MAX_CONTEXT:,}, got {brief(n_ubatch)}")
    check_number(fit_target_mib, "fit_target_mib", 0.0, MAX_DEVICE_GB * 1e3)
    check_int(n_seq, "n_seq", 1, MAX_SEQ)
    check_bool(kv_unified, "kv_unified")
    check_int(n_rs_seq, "n_rs_seq", 0, MAX_RS_SEQ)
    check_bool(swa_full, "swa_full")
    n_ctx, n_cpu_moe, n_ubatch, n_seq = int(n_ctx), int(n_cpu_moe), int(n_ubatch), int(n_seq)
    # as llama.cpp: -ngl past the model's n_layer + 1 (the habitual -ngl 99) means every layer and the head
    n_gpu_layers = None if n_gpu_layers is None else min(int(n_gpu_layers), n + 1)
    if n_cpu_moe and not model.is_moe:
        n_cpu_moe = 0
    tensor_split, split_mode, main_gpu = check_split(machine, tensor_split, split_mode, main_gpu)
    tables = _byte_tables(model, quant, n_ctx, kv_type, n_seq, n_ubatch, kv_unified, n_rs_seq, swa_full)
    prof = PROFILE_OBJECTS[profile]
    rule_of = _SplitRule if machine.multi_gpu else _ModuleRule
    rule = rule_of(model, machine, prof, tables, n_ctx, n_ubatch, fit_target_mib, tensor_split, split_mode, main_gpu)
    common = dict(model=model, machine=machine, quant=quant, n_ctx=n_ctx, kv_type=kv_type, n_cpu_moe=n_cpu_moe)
    common.update(n_ubatch=n_ubatch, profile=profile, n_seq=n_seq, kv_unified=kv_unified, n_rs_seq=n_rs_seq)
    common.update(swa_full=swa_full)

    def build(ngl: int, auto: bool, weights=None, ts_out: tuple = (), fit_wrote: bool = False) -> Placement:
        """The placement of -ngl ngl (the rule's own split arguments besides): one account for any rule."""
        ngl, lg, og = rule.layers(ngl, weights)
        acc = _device_bytes(machine, tables, lg, og, n_cpu_moe, rule.row_fr)
        fields = rule.fields(ngl, lg, og, acc, ts_out, fit_wrote)
        return rule.check(Placement(**common, n_gpu_layers=ngl, auto=auto, **fields))

    def gpu_total(ngl: int) -> float:
        """build(ngl, True).gpu_total, from the same account without making (and checking) the Placement: what
        --fit's search asks of each -ngl it tries."""
        ngl, lg, og = rule.layers(ngl, None)
        f = rule.fields(ngl, lg, og, _device_bytes(machine, tables, lg, og, n_cpu_moe, rule.row_fr), (), False)
        return f["gpu_weights"] + f["gpu_kv"] + f["gpu_compute"]  # (Placement.gpu_total's sum, in its order)

    if n_gpu_layers is not None or machine.gpu is None:
        return build(n_gpu_layers or 0, n_gpu_layers is None, rule.weights, tensor_split)
    fast = getattr(rule, "gpu_totals", None)  # one GPU: every -ngl's total from one walk of the blocks
    return rule.fit(build, fast(tables, n_cpu_moe) if fast is not None else gpu_total)


def _fit_search(n: int, total, room: float) -> int:
    """The largest count from 0 to n + 1 whose total(count) is within room (total grows with the count; 0 is taken
    to fit): a binary search."""
    if total(n + 1) <= room:
        return n + 1
    lo, hi = 0, n + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if total(mid) <= room:
            lo = mid
        else:
            hi = mid
    return lo


class _ModuleRule:
    """One GPU, the module's rule: blocks 0 .. ngl-1 on the GPU and the output layer with ngl = n + 1 (llama.cpp
    counts -ngl from the last block; the bytes per tier are nearly the same), the module's compute buffers, and
    --fit as the largest ngl whose GPU total keeps the margin free."""

    row_fr: tuple = ()
    weights = None

    def __init__(self, model, machine, prof, tables, n_ctx, n_ubatch, fit_target_mib, *_split):
        self.model, self.machine, self.n_ubatch = model, machine, n_ubatch
        self.cap_gpu, self.cap_cpu = prof.gpu_capacity(machine), prof.ram_capacity(machine)
        self.margin = fit_target_mib * MiB if machine.gpu is not None else 0.0

    def layers(self, ngl: int, _weights) -> tuple:
        n = self.model.num_hidden_layers
        ngl = 0 if self.machine.gpu is None else ngl
        return ngl, tuple(0 if il < ngl else None for il in range(n)), (0 if ngl > n else None)

    def fields(self, ngl, lg, og, acc, _ts_out, _fit_wrote) -> dict:
        w, k, cw, ck, _blocks, _cpu = acc
        any_gpu = self.machine.gpu is not None and ngl > 0
        # The GPU runs every micro-batch matmul (op offload included), so its buffer holds the logits; the host
        # keeps a small staging buffer.
        buf = compute_buffer_bytes(self.model, self.n_ubatch)
        return dict(
            layer_device=tuple("cpu" if g is None else "gpu" for g in lg),
            output_on_gpu=og is not None,
            gpu_weights=w[0] if w else 0.0,
            gpu_kv=k[0] if k else 0.0,
            gpu_compute=buf if any_gpu else 0.0,
            cpu_weights=cw,
            cpu_kv=ck,
            cpu_compute=4.0 * self.n_ubatch * 2 * self.model.hidden_size if any_gpu else buf,
            gpu_capacity=self.cap_gpu,
            cpu_capacity=self.cap_cpu,  # (unified memory: one pool, which the CPU side shares too)
            fit_margin=self.margin,
        )

    def check(self, p: Placement) -> Placement:
        return _check_fit(p)

    def gpu_totals(self, tables: tuple, n_cpu_moe: int):
        """place()'s gpu_total(ngl) for this rule, the same sums in the same order for every ngl, from running sums
        over the blocks (--fit's search asks for several -ngl, and each account walks every block): _device_bytes
        adds to the GPU, block by block from block 0, its experts (unless --n-cpu-moe keeps them) and its dense
        weights, and its cache; then the embeddings (unified memory) and the output layer (ngl = n + 1)."""
        dense, experts, _matrix, kv_layer, embd, out_small, out_matrix, tied = tables
        machine, n = self.machine, self.model.num_hidden_layers
        w_at, k_at = [0.0], [0.0]  # the GPU's weights and KV after blocks 0 .. i-1
        w = k = 0.0
        for il in range(n):
            k += kv_layer[il]
            if il >= n_cpu_moe:
                w += experts[il]
            w += dense[il]
            w_at.append(w)
            k_at.append(k)
        buf = compute_buffer_bytes(self.model, self.n_ubatch)

        def gpu_total(ngl: int) -> float:
            g = min(ngl, n)
            w = w_at[g]
            if machine.unified and ngl > 0:
                w += embd
            if ngl > n:
                w += out_small + (0 if tied and machine.unified else out_matrix)
            return w + k_at[g] + (buf if ngl > 0 else 0.0)

        return gpu_total

    def fit(self, build, total) -> Placement:
        tried: dict = {}

        def gpu_total(ngl: int) -> float:
            if ngl not in tried:
                tried[ngl] = total(ngl)
            return tried[ngl]

        n = self.model.num_hidden_layers
        best = _fit_search(n, lambda c: gpu_total(c) + self.margin, self.cap_gpu)
        # the first -ngl that did not fit (what stopped --fit), for explanations
        nxt = gpu_total(best + 1) if best < n + 1 else None
        return replace(build(best, True), fit_next_gpu_total=nxt)


class _SplitRule:
    """Several GPUs, llama.cpp's rule (see multigpu.py): the last ngl layers split over the active GPUs by -ts or
    their free memory, -sm row spreading each matrix's rows, per-device compute buffers, and --fit's default
    placement or its back-to-front fill."""

    def __init__(self, model, machine, prof, tables, n_ctx, n_ubatch, fit_target_mib, ts, sm, mg):
        gpus = machine.gpus
        self.model, self.machine, self.tables, self.n_ctx, self.n_ubatch = model, machine, tables, n_ctx, n_ubatch
        self.ts, self.sm, self.mg = ts, sm, mg
        self.active = (mg,) if sm == "none" else tuple(range(len(gpus)))
        self.caps = [prof.device_capacity(d) for d in gpus]
        self.cap_cpu = prof.ram_capacity(machine)
        self.margin = fit_target_mib * MiB
        self.row = (
            sm == "row"
            and len(self.active) > 1
            and all(device_backend(machine, f"gpu{i}") in ROW_SPLIT_BACKENDS for i in self.active)
        )
        self.row_fr = ()
        if self.row:
            w = ts if ts else tuple(d.mem_gb for d in gpus)  # ggml-cuda's default: each card's total memory
            self.row_fr = tuple(x / sum(w) for x in w)
        # -ts, or the split by free memory when it is not given (llama.cpp reads each device's free memory)
        self.weights = [ts[i] for i in self.active] if ts else [self.caps[i] for i in self.active]

    def layers(self, ngl: int, weights) -> tuple:
        if not any(weights):
            weights = [1.0] * len(self.active)  # no GPU layers at all: the split does not matter
        n = self.model.num_hidden_layers
        lg = tuple(None if d is None else self.active[d] for d in layer_devices(n, ngl, split_points(weights)))
        return ngl, lg[:n], lg[n]

    def fields(self, ngl, lg, og, acc, ts_out, fit_wrote) -> dict:
        w, k, cw, ck, has_blocks, cpu_blocks = acc
        m, gpus, n = self.model, self.machine.gpus, self.model.num_hidden_layers
        comp = [_multi_compute_bytes(m, self.n_ubatch, self.n_ctx, has_blocks[i], og == i) for i in range(len(gpus))]
        cc = _multi_compute_bytes(m, self.n_ubatch, self.n_ctx, cpu_blocks, og is None, host=True)
        on = lg + (og,)
        uses = tuple(
            DeviceUse(
                i,
                gpus[i].name,
                tuple(il for il in range(n + 1) if on[il] == i),
                w[i],
                k[i],
                comp[i],
                self.caps[i],
                self.margin,
            )
            for i in range(len(gpus))
        )
        return dict(
            layer_device=tuple("cpu" if g is None else "gpu" for g in lg),
            output_on_gpu=og is not None,
            gpu_weights=sum(w),
            gpu_kv=sum(k),
            gpu_compute=sum(comp),
            cpu_weights=cw,
            cpu_kv=ck,
            cpu_compute=cc,
            gpu_capacity=sum(self.caps),
            cpu_capacity=self.cap_cpu,
            fit_margin=self.margin * sum(1 for u in uses if u.total > 0),
            split_mode=self.sm,
            main_gpu=self.mg,
            tensor_split=ts_out,
            fit_wrote_split=fit_wrote,
            gpu_devices=uses,
            layer_gpu=lg,
            output_gpu=og,
            row_split=self.row,
            row_fractions=self.row_fr,
        )

    def check(self, p: Placement) -> Placement:
        return _check_fit_multi(p)

    def fit(self, build, _total) -> Placement:
        n = self.model.num_hidden_layers
        full = build(n + 1, True, self.weights, self.ts)
        if self.ts or self.row or all(u.fits for u in full.gpu_devices):
            return full  # step 1 (nothing to change), or a placement --fit does not change
        # step 3: fill the GPUs back to front, whole layers, the output layer first
        dense, experts, _matrix, kv_layer, _embd, out_small, out_matrix, _tied = self.tables
        n_cpu_moe = full.n_cpu_moe
        lb = [dense[il] + (0 if il < n_cpu_moe else experts[il]) + kv_layer[il] for il in range(n)]
        prefix = [0.0]
        for b in lb:
            prefix.append(prefix[-1] + b)
        out_bytes = out_small + out_matrix

        def need(end: int, count: int) -> float:
            """Bytes on a GPU holding layers end-count .. end-1 (end = n + 1 includes the output layer)."""
            if count <= 0:
                return 0.0
            first, last = end - count, min(end, n)
            b = prefix[last] - prefix[first] if last > first else 0.0
            has_out = end == n + 1
            if has_out:
                b += out_bytes
            return b + _multi_compute_bytes(self.model, self.n_ubatch, self.n_ctx, last > first, has_out)

        counts = [0] * len(self.active)
        end = n + 1
        for j in reversed(range(len(self.active))):
            target = self.caps[self.active[j]] - self.margin
            counts[j] = _fit_search(end - 1, lambda c, end=end: need(end, c), target) if target >= 0 else 0
            end -= counts[j]
        ng = len(self.machine.gpus)
        ts_fit = tuple(float(counts[self.active.index(i)]) if i in self.active else 0.0 for i in range(ng))
        total = sum(counts)
        return build(total, True, counts, ts_fit if total else (), fit_wrote=bool(total))


def _check_fit(p: Placement) -> Placement:
    m = p.machine
    if m.unified:
        # unified memory: everything comes out of one pool; the GPU part may use gpu_share of it
        need_gpu = p.gpu_total
        if p.gpu_total > 0 and need_gpu + p.fit_margin > p.gpu_capacity:
            return _fail(p, "GPU (unified)", need_gpu, p.gpu_capacity - p.fit_margin)
        need = p.gpu_total + p.cpu_total
        if need > p.cpu_capacity:
            return _fail(p, "unified memory", need, p.cpu_capacity)
        return p
    if p.gpu_total > 0 and p.gpu_total + p.fit_margin > p.gpu_capacity:
        return _fail(p, "GPU", p.gpu_total, p.gpu_capacity - p.fit_margin)
    if p.cpu_total > p.cpu_capacity:
        return _fail(p, "RAM", p.cpu_total, p.cpu_capacity)
    return p


def _fail(p: Placement, dev: str, need: float, free: float) -> Placement:
    msg = (
        f"would fail to allocate on {dev}: needs {need / GB:.2f} GB, {max(free, 0) / GB:.2f} GB free "
        f"(over by {(need - free) / GB:.2f} GB)"
    )
    return replace(
        p,
        fits=False,
        error=msg,
        requested_bytes=need,
        free_bytes=max(free, 0.0),
        overflow_bytes=need - free,
        failing_device=dev,
    )


def _check_fit_multi(p: Placement) -> Placement:
    for u in p.gpu_devices:
        if u.total > 0 and not u.fits:
            return _fail(p, f"GPU {u.index} ({u.name})", u.total, u.capacity - u.margin)
    if p.cpu_total > p.cpu_capacity:
        return _fail(p, "RAM", p.cpu_total, p.cpu_capacity)
    return p
