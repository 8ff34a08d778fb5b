# Exercise 1, one solution: size Qwen2.5 32B at Q5_K_M for an RTX 5090 with a 16k context.
from perf_model import DDR5_DUAL, GB, MODELS, Device, Machine, decode_step_time, kv_cache_bytes, place, weight_bytes

rtx5090 = Machine("RTX 5090 32 GB + DDR5", Device("RTX 5090", 32, 1792, 209.5), DDR5_DUAL, 63.0)
qwen32 = MODELS["qwen2.5-32b"]
n_ctx = 16 * 1024

# The file is (almost all) tensor data: sum the bytes of every tensor in its Q5_K_M type.
weights = weight_bytes(qwen32, "Q5_K_M")["total"]
file_gb = weights / GB

# K and V, for every layer and every token of the context, in f16 (2 bytes per element).
kv_gb = kv_cache_bytes(qwen32, n_ctx, "f16") / GB

# One token reads every weight once: no faster than bandwidth / bytes, even at 100% of peak.
decode_upper_bound_tok_s = rtx5090.gpu.bandwidth / weights

# Does everything (all 64 blocks + the output head, n_gpu_layers = 65) fit in VRAM with each KV type?
full = qwen32.n_layers + 1
fits_f16 = place(qwen32, rtx5090, "Q5_K_M", n_ctx=n_ctx, kv_type="f16", n_gpu_layers=full).fits
fits_q8_0 = place(qwen32, rtx5090, "Q5_K_M", n_ctx=n_ctx, kv_type="q8_0", n_gpu_layers=full).fits

p = place(qwen32, rtx5090, "Q5_K_M", n_ctx=n_ctx, kv_type="f16")
estimate = decode_step_time(p, context=n_ctx)["tok_per_s"]
print(f"file {file_gb:.2f} GB, KV at {n_ctx} tokens {kv_gb:.2f} GB (f16)")
print(
    f"decode: at most {decode_upper_bound_tok_s:.0f} tok/s; the model's estimate at a full 16k context "
    f"is {estimate:.0f} tok/s"
)
print(f"fits with f16 KV: {fits_f16}, with q8_0 KV: {fits_q8_0}")
