"""perf_model: where a model's bytes live and how fast the hardware moves them.

The course library's performance model for local inference engines (llama.cpp first; vLLM and SGLang where
they differ). Pure Python, standard library only, so it runs the same in CPython and in Pyodide. Every name
of every module below is importable from here, so `from perf_model import place, decode_step_time` and the
module's listings work as they are. The package, bottom up (each module imports only those above it here):

    units       GB/GiB, the module's assumptions (ETA_DECODE, ETA_PREFILL, DECODE_OVERHEAD_S), the profiles
    models      Model (config.json field names, checked when made), its GGUF tensors, config.json / GGUF import
    catalog     MODELS: the models the course and the app pick from, get_model
    sizes       quantize_plan, weight_bytes, effective_bpw, file_bytes; per-layer byte tables
    kv          the KV cache and the recurrent state as llama.cpp allocates them
    devices     Device, Machine, Interconnect, the machine catalog
    profiles    the course and measured profiles: one interface, each its own rules and memory counts
    multigpu    several GPUs: -sm/-ts/-mg, split points, layer devices, link costs
    placement   place(): -ngl, --fit, --n-cpu-moe, on one GPU or several
    work        what each device reads and computes in a decode step or a prefill micro-batch
    timing      decode_step_time, prefill_time, prefill_steps: one loop over the devices, one GPU or several
    ridge       the roofline and the ridge batch

Fitted to the module, not measured
----------------------------------
Some constants are the module's assumptions, and some were fitted so that the listings print the module's
numbers; each is named as such where it is defined, with the range of values that reproduces them:
ETA_DECODE = 0.7 and ETA_PREFILL = 0.5 (the module's stated assumptions), DECODE_OVERHEAD_S = 50.5 us per
token (50.4-50.8 us reproduces every printed digit), ETA_PCIE = 0.93 (0.924-0.935), and the FP16 rates of
the RTX 4060 Ti and RTX 3060 (flagged fitted=True). GB is 10**9 bytes and a "16 GB" card holds 16e9 bytes in
the course profile; the measured profile counts GiB less the driver's reserve. The module's plain "Q2_K" and
"Q3_K" rows store every quantizable tensor in that one ggml type; llama-quantize's Q2_K mix is "Q2_K_MIX".

Bounds: every way into the model is checked
-------------------------------------------
A Model is checked when it is made, from any source (the catalog, a config.json, a GGUF header, a URL or a
learner's code): every field a finite number of the right type within physical bounds (models.MAX_*),
generous for any real model and tight enough that no valid Model makes a function here run for seconds.
Arguments too (n_ctx, context, batch, n_ubatch; a Device's figures). Anything else raises ValueError whose
message starts with the field or argument's name (enginelab.checks); no other exception leaves for bad input.
"""

from dataclasses import replace  # noqa: F401  (a Model with fields changed: replace(model, sliding_window=0))

# Defined by the two neighbours perf_model builds on, and found here too:
#   enginelab.ggml       ggml block types, GGUF tensors, llama-quantize presets and rules
#   enginelab.engine_io  llama.cpp's defaults, config.json / GGUF header import, the llama-server command line
from enginelab.engine_io import (  # noqa: F401
    FIT_CTX_DEFAULT,
    FIT_TARGET_MIB,
    N_BATCH_DEFAULT,
    N_UBATCH_DEFAULT,
    OP_OFFLOAD_MIN_BATCH,
    SWA_ALTERNATE,
    gguf_fields,
    gguf_filename,
    hf_config_fields,
    llama_server_command,
)
from enginelab.ggml import (  # noqa: F401
    ALL_QUANTS,
    GGML_TYPES,
    GGML_TYPES_BY_ID,
    QUANT_PRESETS,
    GGMLType,
    Tensor,
    check_quant,
    ggml_type,
    main_type,
    quant_file_tag,
    quant_label,
    quant_options,
    quant_short,
    weight_order,
)

from .batched import (  # noqa: F401
    ENGINES,
    MAX_NUM_SEQS,
    _check_inputs,
    _expert_share,
    batched_step,
    cudagraph_capture_sizes,
    padded_batch,
    step_work,
)
from .catalog import (  # noqa: F401
    CATALOG_FILE,
    CONFIG_ROW,
    GEMMA3_PATTERN,
    LLAMA4_PATTERN,
    MODELS,
    ROW_META,
    _swa_pattern,
    catalog_data,
    catalog_error,
    catalog_rows,
    get_model,
    models_from_catalog,
    models_from_configs,
)
from .devices import (  # noqa: F401
    _DEVICE_FIELDS,
    DDR4_DUAL,
    DDR5_DUAL,
    DEVICES,
    DRIVER_RESERVE_MIB,
    GPUS,
    LINK_KINDS,
    LINK_LATENCY_US,
    LINKS,
    M4_MAX,
    M4_PRO,
    MACHINES,
    MAX_DEVICE_GB,
    MAX_DEVICE_GBS,
    MAX_DEVICE_TFLOPS,
    MAX_GPUS,
    PCIE4_X16_GBS,
    RTX_3060,
    RTX_3090,
    RTX_4060_TI,
    RTX_4090,
    RTX_5090,
    Device,
    Interconnect,
    Machine,
    _ram,
    device_backend,
    get_machine,
    machines_from_catalog,
    side_device,
)
from .kernels import (  # noqa: F401
    BATCH_PARAMS,
    MM_BW,
    MMID_MMVQ_MAX,
    MMID_MV_MAX,
    MMV_MAX_COLS,
    MV_COL,
    batched_seconds,
)
from .kv import (  # noqa: F401
    _KV_LAYERS_CACHE,
    _KV_PLAN_CACHE,
    KIND_FULL,
    KIND_NONE,
    KIND_RECURRENT,
    KIND_WINDOW,
    KV_KIND_LABELS,
    KV_PAD,
    KV_TYPES,
    MAX_SEQ,
    RS_BYTES_PER_ELEMENT,
    _attention_flops_per_token_pair,
    _block_info,
    _check_kv_args,
    _kv_layers_bytes,
    _kv_plan,
    _kv_type,
    _pad,
    _recurrent_flops_per_token,
    kv_allocation,
    kv_bytes_per_token,
    kv_bytes_per_token_layer,
    kv_cache_bytes,
    kv_cells,
    kv_elements_per_token_layer,
    kv_layer_bytes,
    kv_layer_tokens,
    kv_layers,
    recurrent_state_bytes,
    recurrent_state_elements,
)
from .models import (  # noqa: F401
    _BOOL_FIELDS,
    _F32_2D,
    _INT_FIELDS,
    _MODEL_FIELD_NAMES,
    _NEXTN_LAYERS,
    _OWN_CLASS,
    _TEXT_FIELDS,
    HEAD_DIM_FROM_HIDDEN,
    MAX_BATCH,
    MAX_CONTEXT,
    MAX_CONV_KERNEL,
    MAX_EXPERTS,
    MAX_GGUF_TENSORS,
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_HIDDEN,
    MAX_INTERMEDIATE,
    MAX_LAYERS,
    MAX_LORA_RANK,
    MAX_NGL,
    MAX_TAG_CHARS,
    MAX_TEXT_CHARS,
    MAX_VOCAB,
    Model,
    _active_elements,
    _block_tensors,
    _block_tensors_of,
    _check_gguf_tensor,
    _nextn_tensors,
    _norm,
    _tensor_inventory,
    _tensor_of,
    _validate_model,
    model_from_gguf,
    model_from_hf_config,
)
from .multigpu import (  # noqa: F401
    ROW_SPLIT_BACKENDS,
    SPLIT_MODES,
    _f32,
    _gpu_side,
    _multi_compute_bytes,
    check_split,
    layer_devices,
    link_seconds,
    split_points,
)
from .placement import (  # noqa: F401
    DeviceUse,
    Placement,
    _byte_tables,
    _check_fit,
    _check_fit_multi,
    _device_bytes,
    _fail,
    _fit_search,
    _ModuleRule,
    _SplitRule,
    compute_buffer_bytes,
    place,
)
from .profiles import (  # noqa: F401
    PROFILE_OBJECTS,
    CourseProfile,
    MeasuredProfile,
    get_profile,
)
from .ridge import (  # noqa: F401
    _bpw,
    quant_bpw,
    ridge_batch,
    roofline,
)
from .sizes import (  # noqa: F401
    _CACHE_MAX_ENTRIES,
    _LAYER_CACHE,
    _MATRIX_CACHE,
    _PARTS_CACHE,
    _TOKENIZER_META,
    GGUF_ALIGNMENT,
    _layer_bytes,
    _layer_bytes_uncached,
    _layer_matrix_bytes,
    _layer_parts,
    effective_bpw,
    file_bytes,
    gguf_metadata_bytes,
    quantize_plan,
    weight_bytes,
)
from .timing import (  # noqa: F401
    _NO_WORK,
    PREFILL_GROUP_MAX,
    _check_threads,
    _logits_bytes,
    _side_seconds,
    _sides,
    _step,
    decode_step_time,
    prefill_steps,
    prefill_time,
)
from .units import (  # noqa: F401
    DECODE_OVERHEAD_S,
    ETA_DECODE,
    ETA_PCIE,
    ETA_PREFILL,
    GB,
    PROFILES,
    WORK_CACHE_MAX,
    GiB,
    KiB,
    MiB,
    _check,
    _check_profile,
)
from .work import (  # noqa: F401
    _KIND_CACHE,
    _STATIC_CACHE,
    _WORK_CACHE,
    Work,
    _blocks_static,
    _causal_pairs,
    _causal_pairs_window,
    _check_layer_context,
    _decode_work,
    _head_bytes,
    _head_work,
    _kind_counts,
    _layer_plan,
    _link_traffic,
    _moe_fraction,
    _prefill_work,
    _with_head,
    _work_multi,
    decode_attention_flops,
    decode_kv_read_bytes,
)
