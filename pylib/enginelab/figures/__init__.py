"""The figure registry: figure id -> module, imported on first use.

Each module follows the contract in DESIGN.md (ID, TITLE, SPEC, default_state, compute, describe, render).
build.py renders one page per entry, `dist/figures/<id>.html`; the browser glue looks the page's figure up
here by the `data-figure` attribute of <html>. A page imports only its own figure's module (the registry is
lazy), so the calculator does not pay at start-up for the KV simulator or the validation dataset.
To add a figure, write `figures/<module>.py` and list its id below.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

# figure id -> module name, in the site's order
FIGURES = {
    "calculator": "calculator",
    "tiers": "tiers",  # figures 1-3: memory tiers, model load, prefill/decode (step-through)
    "load": "load",
    "phases": "phases",
    "roofline": "roofline",  # figures 4, 6, 7, 9
    "offload-curve": "offload_curve",
    "decode-curve": "decode_curve",
    "engines": "engines",
    "serving-plan": "serving_plan",  # vLLM/SGLang planner
    "validation": "validation",  # estimates vs llama-bench
    "advisor": "advisor",  # bottleneck advisor
    "kv-managers": "kv_managers",  # figure 8: three KV managers
    "users": "users",  # how many users: the three engines under load, in time
}


class _Registry(Mapping):
    """A read-only mapping id -> figure module that imports each module when it is first asked for."""

    def __getitem__(self, figure_id):
        name = FIGURES[figure_id]
        module = importlib.import_module(f"{__name__}.{name}")
        assert module.ID == figure_id, (module.ID, figure_id)
        return module

    def __iter__(self):
        return iter(FIGURES)

    def __len__(self):
        return len(FIGURES)

    def __contains__(self, figure_id):
        return figure_id in FIGURES


REGISTRY = _Registry()


def get(figure_id: str):
    """The figure module for an id, or KeyError naming the ids there are."""
    if figure_id not in FIGURES:
        raise KeyError(f"unknown figure {figure_id!r}; known: {', '.join(FIGURES)}")
    return REGISTRY[figure_id]
