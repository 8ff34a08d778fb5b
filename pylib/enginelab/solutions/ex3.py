# Exercise 3, one solution: a workload on which SGLang's radix cache computes more prefill than vLLM's pages.
from kv_managers import PagedManager, RadixManager, Request, simulate

capacity_tokens = 152  # tight: the two documents and their questions fill most of the pool
schedule_policy = "lpm"  # SGLang's longest-prefix-match order (the default is "fcfs")


def doc(first_id, n):
    return list(range(first_id, first_id + n))


manual = doc(5_000, 48)  # a 48-token document: 3 whole 16-token blocks
faq = doc(7_000, 80)  # an 80-token document: 5 whole blocks

workload = [
    # step 0: one question about each document puts both into the cache
    Request(0, 0, manual + doc(100, 8), 4),
    Request(1, 0, faq + doc(200, 8), 4),
    # step 6: a question about the manual arrives first, then two about the FAQ
    Request(2, 6, manual + doc(300, 16), 8),
    Request(3, 6, faq + doc(400, 16), 8),
    Request(4, 6, faq + doc(500, 16), 8),
]

radix = simulate(RadixManager(capacity_tokens, schedule_policy=schedule_policy), workload)["summary"]
paged = simulate(PagedManager(capacity_tokens), workload)["summary"]
print(f"radix computed {radix['prefill_computed']} prefill tokens, paged {paged['prefill_computed']}")
# Why: lpm runs the FAQ questions first (80 cached tokens beat 48). The radix pool has no partly filled
# blocks, so both fit at once, and it makes room by evicting its least recently used leaf: the manual.
# The manual question then recomputes all 48 tokens. Paged admits in arrival order, so the manual
# question runs while the manual's blocks are still cached.
