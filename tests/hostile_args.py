"""Hostile arguments for every public function of the library (used by tests/test_robustness.py and
bench/bench_fuzz.py).

Each case is a function and keyword arguments that work; `attacks()` replaces one argument at a time by each
of HOSTILE (None, bools, negatives, NaN, infinities, a 401-digit integer, numeric strings, a 10,000-character
string, containers, an object whose repr() raises). The rule `attack()` checks: the call either works, and then
every number it returns is not NaN (and, for sizes and times, finite and non-negative), or it raises ValueError
whose message starts with the argument's name; never another exception, and never slower than SLOW_S.
"""

from __future__ import annotations

import math
import time

import inference_trace as it
import kv_managers as kv
import perf_model as pm
from enginelab import arch_config, arch_gguf, blocks, ggml
from enginelab import serving_plan as sp
from enginelab.advisor import diagnosis, lora, recipes
from enginelab.advisor import setup as adv_setup
from enginelab.advisor.speculative import expected_tokens, speculative
from enginelab.checks import brief

SLOW_S = 3.0


class _Weird:
    def __repr__(self):
        raise RuntimeError("a hostile __repr__")

    def __index__(self):
        raise RuntimeError("a hostile __index__")


HOSTILE = [
    None,
    True,
    False,
    -1,
    0,
    1.5,
    -0.0,
    math.nan,
    math.inf,
    -math.inf,
    10**400,
    10**9,
    2**63,
    "384",
    "",
    "x" * 10_000,
    [],
    [1, 2],
    {},
    (),
    object(),
    _Weird(),
    b"GGUF",
]

LLAMA_CONFIG = {
    "model_type": "llama",
    "num_hidden_layers": 4,
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1024,
}

_P: list = []


def placement():
    if not _P:
        _P.append(pm.place("llama-3.1-8b", "rtx3060", "Q4_K_M", n_ctx=4096))
    return _P[0]


def _gguf():
    import fuzz_pipeline

    return fuzz_pipeline.gguf_bytes(*fuzz_pipeline.SEEDS["llama"])


# arguments given as LIVE are made afresh for every call (a manager keeps its state between runs)
LIVE = object()
_MAKE = {
    "placement": placement,
    "p": placement,
    "target_placement": placement,
    "manager": lambda: kv.PagedManager(384),
    "requests": kv.chat_workload,
    "s": lambda: adv_setup.setup_from_placement(placement()),
    "config": lambda: dict(LLAMA_CONFIG),
    "source": _gguf,
}
# arguments that are containers: a message may name the field inside them (config.json's keys, a state's keys)
CONTAINERS = {"config", "state", "source", "requests", "workload", "change"}

M8, GPU = "llama-3.1-8b", "rtx4090"
# several GPUs (perf_model sections 6b and 7b)
TWO_GPUS = pm.Machine("two", (pm.RTX_3090, pm.RTX_3060), pm.DDR5_DUAL, 31.5, interconnect=pm.LINKS["p2p"])
_P2: list = []


def placement2():
    if not _P2:
        _P2.append(pm.place("llama-3.1-8b", TWO_GPUS, "Q4_K_M", n_ctx=4096, tensor_split=(3, 1)))
    return _P2[0]


# (label, function, keyword arguments that work, outputs are sizes/times: finite and non-negative)
CASES = [
    ("place", pm.place, dict(model=M8, machine="rtx3060", quant="Q4_K_M", n_ctx=4096, kv_type="f16",
                             n_gpu_layers=None, n_cpu_moe=0, n_ubatch=512, fit_target_mib=1024, n_rs_seq=0), True),
    ("decode_step_time", pm.decode_step_time, dict(placement=LIVE, machine=None, context=100, batch=1), True),
    ("prefill_time", pm.prefill_time, dict(placement=LIVE, machine=None, n_tokens=512, n_ubatch=None,
                                           n_batch=2048, op_offload=True), True),
    ("prefill_steps", pm.prefill_steps, dict(p=LIVE, n_tokens=512, n_ubatch=512, n_batch=2048, op_offload=True), True),
    ("quantize_plan", pm.quantize_plan, dict(model=M8, quant="Q4_K_M"), True),
    ("weight_bytes", pm.weight_bytes, dict(model=M8, quant="Q4_K_M"), True),
    ("effective_bpw", pm.effective_bpw, dict(model=M8, quant="Q4_K_M"), True),
    ("file_bytes", pm.file_bytes, dict(model=M8, quant="Q4_K_M"), True),
    ("gguf_metadata_bytes", pm.gguf_metadata_bytes, dict(model=M8), True),
    ("kv_cache_bytes", pm.kv_cache_bytes, dict(model=M8, n_ctx=4096, kv_type="f16", layers=None), True),
    ("kv_bytes_per_token", pm.kv_bytes_per_token, dict(model=M8, kv_type="q8_0"), True),
    ("kv_layer_tokens", pm.kv_layer_tokens, dict(model="gemma-2-9b", il=0, n_ctx=8192), True),
    ("kv_cells", pm.kv_cells, dict(model="gemma-3-12b", il=0, n_ctx=8192, n_seq=2, n_ubatch=512, kv_unified=False,
                                   swa_full=False), True),
    ("kv_layer_bytes", pm.kv_layer_bytes, dict(model="qwen3-next-80b-a3b", il=0, n_ctx=8192, kv_type="f16", n_seq=2,
                                               n_ubatch=512, kv_unified=False, n_rs_seq=2, swa_full=False), True),
    ("kv_allocation", pm.kv_allocation, dict(model="qwen3-next-80b-a3b", n_ctx=8192, kv_type="q8_0", n_seq=2,
                                             n_ubatch=512, kv_unified=True, n_rs_seq=7, swa_full=True), True),
    ("recurrent_state_bytes", pm.recurrent_state_bytes, dict(model="qwen3-next-80b-a3b"), True),
    ("decode_kv_read_bytes", pm.decode_kv_read_bytes, dict(model="deepseek-v2-lite", il=1, context=4096,
                                                           kv_type="f16"), True),
    ("decode_attention_flops", pm.decode_attention_flops, dict(model="qwen3-next-80b-a3b", il=0, context=4096),
     True),
    ("place (2025)", pm.place, dict(model="gemma-3-12b", machine="rtx3060", quant="Q4_K_M", n_ctx=8192, n_seq=4,
                                    kv_unified=False, swa_full=True), True),
    ("compute_buffer_bytes", pm.compute_buffer_bytes, dict(model=M8, n_ubatch=512, with_logits=True), True),
    ("roofline", pm.roofline, dict(device=pm.RTX_4090, bpw=4.5, batch=1), True),
    ("ridge_batch", pm.ridge_batch, dict(device=pm.RTX_4090, quant="Q4_K_M", model=None), True),
    ("quant_bpw", pm.quant_bpw, dict(quant="Q4_K_M", model=None), True),
    ("model_from_hf_config", pm.model_from_hf_config, dict(config=LIVE, name=None), True),
    ("model_from_gguf", pm.model_from_gguf, dict(source=LIVE, name=None), False),
    ("Device", pm.Device, dict(name="d", mem_gb=8, bandwidth_gbs=100, fp16_tflops=10), True),
    ("Machine", pm.Machine, dict(name="m", gpu=pm.RTX_3060, ram=pm.DDR5_DUAL, pcie_gbs=16.0, unified=False,
                                 gpu_share=0.75, drive_gbs=5.0), True),
    ("llama_server_command", pm.llama_server_command, dict(p=LIVE, n_parallel=None, flash_attn="on"), True),
    ("load_trace", it.load_trace, dict(model=M8, machine="rtx3060", quant="Q4_K_M", n_ctx=4096, kv_type="f16",
                                       n_gpu_layers=None, warm=False, n_cpu_moe=0), True),
    ("phase_trace", it.phase_trace, dict(placement=LIVE, machine=None, phase="decode", n_tokens=512, context=0,
                                         batch=1), True),
    ("decode_curve", it.decode_curve, dict(placement=LIVE, machine=None, contexts=(0, 4096)), True),
    ("SlotManager", kv.SlotManager, dict(capacity_tokens=384, n_parallel=None, slot_prompt_similarity=0.1,
                                         track_cells=True), False),
    ("PagedManager", kv.PagedManager, dict(capacity_tokens=384, block_size=16, enable_prefix_caching=True,
                                           track_cells=True), False),
    ("RadixManager", kv.RadixManager, dict(capacity_tokens=384, schedule_policy="fcfs", track_cells=True), False),
    ("simulate", kv.simulate, dict(manager=LIVE, requests=LIVE, record_frames=True, check=False, max_steps=10_000),
     False),
    ("compare", kv.compare, dict(capacity_tokens=384, workload=None, record_frames=False), False),
    ("Request", lambda **kw: kv.simulate(kv.PagedManager(256), [kv.Request(**kw)]),
     dict(rid=0, arrival=0, prompt=(1, 2, 3), reply=4, session="s", follows=None, think=0), False),
    ("agent_workload", kv.agent_workload, dict(n_requests=20, seed=0, system_tokens=32, tool_tokens=32, n_toolsets=2,
                                               turns=(2, 3), msg_tokens=(4, 8), reply_tokens=(4, 8), branch_prob=0.25,
                                               think=(0, 2), session_gap=2.0), False),
    ("chat_workload", kv.chat_workload, dict(first_msg=(10, 6, 6, 6), think=(40, 0, 0, 0), system_tokens=48), False),
    ("vllm_plan", sp.vllm_plan, dict(model=M8, machine=GPU, weight_dtype="bf16", gpu_memory_utilization=0.9,
                                     max_model_len=None, block_size=16, kv_cache_dtype="auto", enforce_eager=False,
                                     max_num_seqs=256, max_num_batched_tokens=None, other_processes_gib=0.0), False),
    ("sglang_plan", sp.sglang_plan, dict(model=M8, machine=GPU, weight_dtype="bf16", mem_fraction_static=None,
                                         context_length=None, kv_cache_dtype="auto", disable_cuda_graph=False,
                                         max_running_requests=None, other_processes_gib=0.0), False),
    ("vllm_command", sp.vllm_command, dict(model=M8, weight_dtype="bf16", gpu_memory_utilization=0.9,
                                           max_model_len=None, block_size=16, kv_cache_dtype="auto",
                                           enforce_eager=False, max_num_seqs=256, max_num_batched_tokens=None), False),
    ("sglang_command", sp.sglang_command, dict(model=M8, weight_dtype="bf16", mem_fraction_static=None,
                                               context_length=None, kv_cache_dtype="auto", disable_cuda_graph=False,
                                               max_running_requests=None), False),
    ("hf_weight_bytes", sp.hf_weight_bytes, dict(model=M8, weight_dtype="bf16"), True),
    ("vllm_page_size_bytes", sp.vllm_page_size_bytes, dict(model=M8, block_size=16, kv_cache_dtype="auto"), True),
    ("peak_activation_bytes", sp.peak_activation_bytes, dict(model=M8, max_num_batched_tokens=2048,
                                                             max_num_seqs=256), True),
    ("cudagraph_bytes", sp.cudagraph_bytes, dict(max_num_seqs=256), True),
    ("cudagraph_capture_sizes", sp.cudagraph_capture_sizes, dict(max_num_seqs=256), True),
    ("kv_dtype_bytes", sp.kv_dtype_bytes, dict(kv_cache_dtype="auto", model_dtype_bytes=2), True),
    ("sglang_mem_fraction_static", sp.sglang_mem_fraction_static, dict(total_bytes=24e9, chunked_prefill_size=None,
                                                                       cuda_graph_max_bs=None, tp_size=1, pp_size=1),
     False),
    ("sglang_gpu_defaults", sp.sglang_gpu_defaults, dict(total_bytes=24e9, tp_size=1), False),
    ("vllm_gpu_defaults", sp.vllm_gpu_defaults, dict(machine=GPU, usage_context="openai_api_server",
                                                     max_num_batched_tokens=None, tensor_parallel_size=1), False),
    ("gpu_total_bytes", sp.gpu_total_bytes, dict(machine=GPU), True),
    ("advise", diagnosis.advise, dict(placement=LIVE, machine=None, context=2000, n_parallel=1, n_threads=None,
                                      concurrent_users=None, prompt_tokens=None, perf_cores=None, op_offload=True),
     False),
    ("advise_state", diagnosis.advise_state, dict(state={"model": M8, "machine": "rtx3060"}), False),
    ("apply_change", diagnosis.apply_change, dict(state={"model": M8}, change={"apply": {}}), False),
    ("recipe", recipes.recipe, dict(goal="one_user_fits", model=M8, machine=GPU, quant="Q4_K_M", context=4096,
                                    users=4, tokens=None), False),
    ("lora_cost", lora.lora_cost, dict(model=M8, rank=16, target_modules=("q_proj", "v_proj"), dtype_bytes=2,
                                       placement=None, context=2000, prompt_tokens=2000, n_adapters=1), False),
    ("lora_shapes", lora.lora_shapes, dict(model=M8), False),
    ("speculative", speculative, dict(target_placement=LIVE, draft_model_key="llama-3.2-1b", acceptance=0.7,
                                      n_draft=3, context=2000, draft_quant=None), False),
    ("expected_tokens", expected_tokens, dict(acceptance=0.7, n_draft=4), False),
    ("thread_factor", adv_setup.thread_factor, dict(n_threads=8, perf_cores=8), False),
    ("setup_from_state", adv_setup.setup_from_state, dict(state={"model": M8, "machine": "rtx3060"}), False),
    ("setup_from_placement", adv_setup.setup_from_placement, dict(placement=LIVE, machine=None, context=2000,
                                                                  prompt_tokens=None, n_parallel=1), False),
    ("evaluate", adv_setup.evaluate, dict(s=LIVE, prefill=True), False),
    # several GPUs
    ("place (2 GPUs)", pm.place, dict(model=M8, machine=TWO_GPUS, quant="Q4_K_M", n_ctx=4096, n_gpu_layers=None,
                                      tensor_split=(3, 1), split_mode="layer", main_gpu=0), True),
    ("place (2 GPUs, row)", pm.place, dict(model=M8, machine=TWO_GPUS, n_ctx=4096, split_mode="row", main_gpu=1),
     True),
    ("decode_step_time (2 GPUs)", lambda **kw: pm.decode_step_time(placement2(), **kw),
     dict(context=100, batch=2, profile="measured"), True),
    ("prefill_time (2 GPUs)", lambda **kw: pm.prefill_time(placement2(), **kw),
     dict(n_tokens=700, n_ubatch=256, n_batch=2048, op_offload=True), True),
    ("Machine (2 GPUs)", pm.Machine, dict(name="m", gpu=(pm.RTX_3060, pm.RTX_3090), ram=pm.DDR5_DUAL, pcie_gbs=16.0,
                                          interconnect=pm.LINKS["nvlink"]), True),
    ("Interconnect", pm.Interconnect, dict(kind="rpc", bandwidth_gbs=1.0, latency_us=100.0, name="x"), True),
    ("check_split", pm.check_split, dict(machine=TWO_GPUS, tensor_split=(1, 1), split_mode="row", main_gpu=1), True),
    ("link_seconds", pm.link_seconds, dict(machine=TWO_GPUS, n_bytes=1e6, n_transfers=3), True),
    ("vllm_plan (TP 2)", sp.vllm_plan, dict(model=M8, machine=GPU, max_model_len=8192, tensor_parallel_size=2),
     False),
    ("sglang_plan (TP 2)", sp.sglang_plan, dict(model=M8, machine=GPU, context_length=8192, tp_size=2), False),
    ("tp_kv_heads", sp.tp_kv_heads, dict(model=M8, tp=4), True),
    # the typed blocks: readers (kv_shared_from -1 means none: not a size), per-block serving plans, file names
    ("read_config", arch_config.read_config, dict(config=LIVE, name=None), False),
    ("read_generic", arch_config.read_generic, dict(config=LIVE), False),
    ("read_gguf_blocks", arch_gguf.read_gguf_blocks, dict(source=LIVE), False),
    ("kv_cache_elements", lambda **kw: blocks.kv_cache_elements(arch_config.read_config(LLAMA_CONFIG), **kw),
     dict(n_ctx=4096, n_seq=2), True),
    ("state_bytes", lambda **kw: blocks.state_bytes(pm.MODELS["qwen3.6-35b-a3b"].block_model, **kw),
     dict(n_seq=4, n_rs_seq=2), True),
    ("vllm_kv_groups", sp.vllm_kv_groups, dict(model="qwen3.6-35b-a3b", available_bytes=4e9, block_size=16,
                                               kv_cache_dtype="fp8", max_model_len=32768, max_num_batched_tokens=2048,
                                               mamba_cache_mode="align", tp=1), True),
    ("vllm_plan (hybrid)", sp.vllm_plan, dict(model="qwen3.6-35b-a3b", machine=GPU, weight_dtype="awq",
                                              max_model_len=32768, mamba_cache_mode="none"), False),
    ("sglang_plan (hybrid)", sp.sglang_plan, dict(model="qwen3.6-35b-a3b", machine=GPU, weight_dtype="awq",
                                                  context_length=32768), False),
    ("sglang_cell_size_bytes", sp.sglang_cell_size_bytes, dict(model="gemma-4-31b", kv_cache_dtype="auto", tp=1),
     True),
    ("sglang_mamba_state_bytes", sp.sglang_mamba_state_bytes, dict(model="nemotron-3-nano-30b-a3b", tp=1), True),
    ("file_quant", ggml.file_quant, dict(name="Qwen3.6-35B-A3B-UD-Q4_K_XL.gguf"), True),
    ("allreduce_bytes_per_token", sp.allreduce_bytes_per_token, dict(model=M8, tp=2, dtype_bytes=2), True),
]  # fmt: skip


def kwargs_for(kw: dict) -> dict:
    return {k: (_MAKE[k]() if v is LIVE else v) for k, v in kw.items()}


def attacks():
    """(label, function, argument, kwargs, nonneg) for every case and every single-argument substitution."""
    for label, fn, kw, nonneg in CASES:
        for arg in kw:
            for bad in HOSTILE:
                yield label, fn, arg, {**kwargs_for(kw), arg: bad}, nonneg


def names_argument(msg: str, arg: str) -> bool:
    """The message starts with the argument's name (or a field inside it: requests[3].reply, config keys)."""
    head = msg.split(":", 1)[0].split(" (", 1)[0]
    return (
        head == arg
        or head.startswith((arg + "[", arg + "."))
        or head.endswith("." + arg)  # a field of a request: requests[0].reply
        or (arg in CONTAINERS and head.isidentifier())
    )


class Escape(AssertionError):
    """A call broke the rule: another exception, a bad number, or too slow."""


def numbers(obj, path="result", depth=0):
    if depth > 8 or isinstance(obj, (bool, str)) or obj is None:
        return
    if isinstance(obj, (int, float)):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from numbers(v, f"{path}.{k}", depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj[:2000]):
            yield from numbers(v, f"{path}[{i}]", depth + 1)
    elif hasattr(obj, "__dataclass_fields__"):
        for k in obj.__dataclass_fields__:
            yield from numbers(getattr(obj, k), f"{path}.{k}", depth + 1)


def attack(label, fn, arg, kwargs, nonneg=True) -> tuple:
    """Call fn(**kwargs): returns ("ok" | "ValueError", seconds, message); raises Escape when the rule breaks."""
    what = f"{label}({arg}={brief(kwargs[arg])})"
    t0 = time.process_time()
    try:
        out = fn(**kwargs)
    except ValueError as e:
        dt = time.process_time() - t0
        if dt > SLOW_S:
            raise Escape(f"{what}: took {dt:.1f} s to refuse") from None
        return "ValueError", dt, str(e)
    except Exception as e:
        raise Escape(f"{what}: {type(e).__name__}: {e}") from e
    dt = time.process_time() - t0
    if dt > SLOW_S:
        raise Escape(f"{what}: took {dt:.1f} s")
    for path, v in numbers(out):
        if isinstance(v, float) and math.isnan(v):
            raise Escape(f"{what}: {path} = {v!r}")
        if nonneg and (v < 0 or (isinstance(v, float) and not math.isfinite(v))):
            raise Escape(f"{what}: {path} = {v!r}")
    return "ok", dt, ""
