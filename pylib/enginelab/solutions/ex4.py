# Exercise 4, one solution: where batching stops raising decode throughput (Llama 3.1 8B Q4_K_M, RTX 4060 Ti).
from enginelab import plot
from perf_model import MACHINES, MODELS, decode_step_time, place, ridge_batch

model, machine = MODELS["llama-3.1-8b"], MACHINES["rtx4060ti"]
n_ctx = 8192
context = 0  # KV tokens per sequence; each sequence reads its own KV once per step

p = place(model, machine, "Q4_K_M", n_ctx=n_ctx)
batches = list(range(1, 129))
# decode_step_time(batch=b): the weights are read once per step, each sequence's KV once, and the matmul
# FLOPs grow with b; each device takes the longer of its memory time and its compute time.
tok_s = [decode_step_time(p, context=context, batch=b)["tok_per_s"] for b in batches]

# The knee: the first batch after which one more sequence adds less than 1% throughput.
knee_batch = next(b for b, t0, t1 in zip(batches, tok_s, tok_s[1:]) if t1 < 1.01 * t0)
ridge = ridge_batch(machine.gpu, "Q4_K_M", model)

plot.line(
    batches,
    tok_s,
    title="Llama 3.1 8B Q4_K_M on an RTX 4060 Ti: batched decode",
    xlabel="batch (sequences per step)",
    ylabel="tok/s (all sequences)",
    marks={"knee": knee_batch, "ridge_batch": ridge},
)
print(f"throughput stops rising at batch {knee_batch}; ridge_batch says {ridge:.1f}")
# They differ because ridge_batch compares peak FLOP/s with peak bandwidth, while decode_step_time runs
# memory at 70% of peak and compute at 50%: the knee sits near ridge * 0.5 / 0.7.
