# Exercise 4, one solution: where batching stops raising decode throughput (Llama 3.1 8B Q4_K_M, RTX 4060 Ti).
from enginelab import plot
from perf_model import MACHINES, MODELS, decode_step_time, place, ridge_batch

model, machine = MODELS["llama-3.1-8b"], MACHINES["rtx4060ti"]
n_ctx = 8192
context = 0  # KV tokens per sequence; each sequence reads its own KV once per step

p = place(model, machine, "Q4_K_M", n_ctx=n_ctx, profile="measured")
batches = list(range(1, 129))
# decode_step_time(batch=b, profile="measured"): llama.cpp's batched pass. The weights are read once per step,
# each sequence's KV once; up to 8 tokens a mat-vec kernel (each extra column unpacks and multiplies every weight
# again: a little compute), from 9 mat-mat tiles (the FLOPs at the prefill rate, the weights streamed more slowly,
# partly overlapped).
tok_s = [decode_step_time(p, context=context, batch=b, profile="measured")["tok_per_s"] for b in batches]

# The knee: the first batch after which one more sequence adds less than 1% throughput.
knee_batch = next(b for b, t0, t1 in zip(batches, tok_s, tok_s[1:]) if t1 < 1.01 * t0)
ridge = ridge_batch(machine.gpu, "Q4_K_M", model)

plot.line(
    batches,
    tok_s,
    title="Llama 3.1 8B Q4_K_M on an RTX 4060 Ti: batched decode (measured)",
    xlabel="batch (sequences per step)",
    ylabel="tok/s (all sequences)",
    marks={"knee": knee_batch, "ridge_batch": ridge},
)
print(f"throughput stops rising at batch {knee_batch}; ridge_batch says {ridge:.1f}")
# They differ because ridge_batch is the roofline's corner (peak FLOP/s over peak bandwidth), while the measured
# step bends gradually: the kernels switch from mat-vec to mat-mat at 8 tokens, the tiles stream the weights more
# slowly, and memory and compute only partly overlap (an MoE model would also touch more experts per step).
