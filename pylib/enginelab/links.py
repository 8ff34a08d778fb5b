"""Links from one figure's markup to another figure's page, wherever the markup is shown.

A figure renders the same HTML into `dist/figures/<id>.html`, into `dist/calculator.html` (one folder up) and,
pre-rendered, into the companion page `dist/index.html`. A relative link such as `advisor.html` resolves only in
the first. So figure modules write links with `figure_href(id, query)`, which prefixes the path from the page
being rendered to the figures folder: "" on a figure page (the default), "figures/" on a page at the site root.
build.py sets it around each page it pre-renders (`figures_base`); in the browser, site/py/main.py sets it once
from the page's `<html data-figures-base>`.
"""

from __future__ import annotations

from contextlib import contextmanager

_base = [""]  # path from the page being rendered to dist/figures/


def figure_href(figure_id: str, query: str = "") -> str:
    """The link to a figure page ('advisor.html?x=1' on a figure page, 'figures/advisor.html?x=1' at the root)."""
    return f"{_base[0]}{figure_id}.html{query}"


def set_figures_base(base: str) -> None:
    """Where figure pages are from the page being rendered ("" or "figures/"); the browser glue calls this once."""
    _base[0] = base


@contextmanager
def figures_base(base: str):
    """Render with `base` as the path to the figures folder, then restore the previous one."""
    old = _base[0]
    _base[0] = base
    try:
        yield
    finally:
        _base[0] = old


USERS_KEYS = ("model", "machine", "quant", "ctx")  # what the calculator and the serving plan carry to "users"


def users_query(state) -> str:
    """The "How many users?" figure's query for another figure's state (a State or a dict): its model, machine,
    quant and ctx, each only if the users figure takes it (a catalogue model, a catalogue machine or one of the
    serving runs' datacenter GPUs, a preset quant, a
    context it accepts), so a reader's own model or several GPUs fall back to that figure's defaults."""
    from urllib.parse import urlencode

    import perf_model as pm

    get = state.get if isinstance(state, dict) else lambda k, d=None: getattr(state, k, d)
    out = {}
    model = get("model")
    if model in pm.MODELS:
        out["model"] = model
    from enginelab.serving_plan import SERVER_GPUS

    if (get("machine") in pm.MACHINES or get("machine") in SERVER_GPUS) and not get("gpus"):
        out["machine"] = get("machine")
    if get("quant") in pm.QUANT_PRESETS:
        out["quant"] = get("quant")
    ctx = get("ctx")
    if isinstance(ctx, int) and not isinstance(ctx, bool) and (ctx == 0 or ctx >= 256):
        out["ctx"] = ctx
    return "?" + urlencode(out) if out else ""


def users_href(state) -> str:
    return figure_href("users", users_query(state))
