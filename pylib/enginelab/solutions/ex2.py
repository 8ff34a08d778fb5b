# Exercise 2, one solution: decode speed of Qwen2.5 14B Q4_K_M on an RTX 3060 for every -ngl.
from enginelab import plot
from perf_model import MACHINES, MODELS, decode_step_time, place

model, machine = MODELS["qwen2.5-14b"], MACHINES["rtx3060"]
n_ctx = 8192  # the KV cache llama.cpp allocates (it moves to the GPU with each block)
context = 0  # tokens already in the conversation when we time a decode step

ngl_values = list(range(model.n_layers + 2))  # 0 .. 49: 48 blocks, then the output head
tok_s = []
for n in ngl_values:
    p = place(model, machine, "Q4_K_M", n_ctx=n_ctx, n_gpu_layers=n)
    tok_s.append(decode_step_time(p, context=context)["tok_per_s"])

plot.line(
    ngl_values,
    tok_s,
    title="Qwen2.5 14B Q4_K_M on an RTX 3060: decode speed vs -ngl",
    xlabel="-ngl (layers on the GPU)",
    ylabel="decode tok/s",
)
print(f"-ngl 0: {tok_s[0]:.1f} tok/s, -ngl 24: {tok_s[24]:.1f}, -ngl 48: {tok_s[48]:.1f}, -ngl 49: {tok_s[49]:.1f}")
# Why the shape: time per token is (bytes in RAM) / (RAM bandwidth) + (bytes in VRAM) / (VRAM bandwidth).
# Moving one layer takes the same bytes off the slow term each time, but speed is 1 / time: while most
# layers are still in RAM the slow term dominates and each step barely changes the total; near full
# offload the RAM term is nearly gone, so removing what is left of it shrinks the time fastest. The last
# step (-ngl 49) moves the large output head (152k-token vocabulary) to the GPU.
