"""enginelab.serving: a batched forward step (step.py) and a time-based serving simulation of llama-server,
vLLM and SGLang on the kv_managers' pool managers (sim.py)."""
