"""The figure registry: figure id -> module.

Each module follows the contract in DESIGN.md (ID, TITLE, SPEC, default_state, compute, describe, render).
build.py renders one page per entry, `dist/figures/<id>.html`; the browser glue looks the page's figure up
here by the `data-figure` attribute of <html>. To add a figure, write `figures/<id>.py` and list it below.
"""
from __future__ import annotations

from . import calculator
from . import serving_plan, validation  # issue 7: vLLM/SGLang planner, estimates vs llama-bench
from . import load, phases, tiers  # figures 1-3 (step-through: load, phases)

REGISTRY = {m.ID: m for m in (calculator, tiers, load, phases)}
from . import decode_curve, engines, offload_curve, roofline  # noqa: E402  figures 4, 6, 7, 9
REGISTRY.update({m.ID: m for m in (roofline, offload_curve, decode_curve, engines)})
REGISTRY.update({m.ID: m for m in (serving_plan, validation)})

from . import advisor as _advisor  # noqa: E402  issue 8: bottleneck advisor
REGISTRY[_advisor.ID] = _advisor
from . import kv_managers as _kv_managers  # noqa: E402  figure 8: three KV managers
REGISTRY[_kv_managers.ID] = _kv_managers


def get(figure_id: str):
    """The figure module for an id, or KeyError naming the ids there are."""
    try:
        return REGISTRY[figure_id]
    except KeyError:
        raise KeyError(f"unknown figure {figure_id!r}; known: {', '.join(REGISTRY)}") from None
