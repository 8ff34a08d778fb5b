"""advisor: diagnose a local inference setup and say which flags fix it.

The bottleneck advisor, built only on perf_model's public functions (place, decode_step_time,
prefill_time, kv_cache_bytes, weight_bytes, quantize_plan, and the catalogs). Every predicted effect is
computed by changing the setup and running the model (or the serving simulation) again, never by a rule of thumb.

  setup.py        Setups (a placement plus threads, slots, users), Outcomes, one change re-run
  diagnosis.py    the diagnoses, one per row of the module's "Where Bottlenecks Happen" table; advise()
  load.py         load sweeps on the serving simulation, and why throughput goes flat as users are added
                  (a concurrency cap, the KV pool, or compute); imported only when a setup has several users
  recipes.py      tuning recipes for the module's five goals: recipe()
  lora.py         a runtime LoRA adapter against merged weights: lora_cost()
  speculative.py  speculative decoding with a draft model: speculative()

Vocabulary is the engines' own: n_ctx (-c), n_gpu_layers (-ngl), n_cpu_moe,
type_k/type_v (-ctk/-ctv), n_parallel (-np), n_threads (-t), n_ubatch (-ub).

A "state" is the calculator's URL state as a dict: model, machine, quant, kv,
ctx, ngl ("auto" or a number), tokens, n_cpu_moe; the advisor adds threads,
np (slots), users, ub (-ub) and b (-b).  Every change carries an `apply` dict in those keys, so
the app can apply it with one click.
"""

from .diagnosis import (  # noqa: F401
    CAUSES,
    KV_LONG_CONTEXT_SHARE,
    PCIE_PREFILL_SHARE,
    advise,
    advise_setup,
    advise_state,
    apply_change,
)
from .lora import lora_cost, lora_shapes  # noqa: F401
from .recipes import GOALS, recipe  # noqa: F401
from .setup import (  # noqa: F401
    MIN_GAIN,
    Change,
    Finding,
    Outcome,
    Setup,
    cpu_cores,
    evaluate,
    setup_from_placement,
    setup_from_state,
    thread_factor,
)
from .speculative import expected_tokens, speculative  # noqa: F401
