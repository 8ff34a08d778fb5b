"""What a figure page shows, as HTML strings: controls built from a figure's Spec, messages, the figure.

Shared by build.py (pre-rendering each page for its default state) and the browser glue (site/py/main.py),
so the page a reader gets before Python loads is byte-for-byte what Python would render for that state.

A figure module provides ID, TITLE, SPEC (a state.Spec), default_state(), compute(state), describe(data),
render(data) -> str, and optionally LEDE (one sentence of plain text under the title),
controls(state) -> str to replace the generic controls, STEP_FIELD (the key of an Int field with
widget="range") to get Back / Play / Step buttons for an animated figure, and frame_patch(data) to update
such a figure in place between frames (see patch_view), and deferred_html(state) -> {element id: html} for
extras that render(data, defer=True) leaves as placeholders (see view).
"""

from __future__ import annotations

import hashlib
import json

from . import state as st
from .svg import Raw, el, esc, join


def field_id(key: str) -> str:
    return f"f-{key}"


def _outside(field: st.Field, value, partial: dict) -> bool:
    """A number outside the field's current bounds (a held value, see state.Spec.shown)."""
    if not isinstance(field, (st.Int, st.Float)) or not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    if isinstance(field, st.Int) and value in field._special_values:
        return False
    lo, hi = field.bounds(partial)
    return (lo is not None and value < lo) or (hi is not None and value > hi)


def field_sig(field: st.Field, partial: dict, value=None) -> str:
    """Changes whenever the field's control must be rebuilt (its options, bounds or visibility changed, or a
    select must offer a held value outside its range)."""
    parts = [field.kind, str(field.visible_for(partial))]
    if isinstance(field, st.Choice):
        parts.append(repr(field.options_for(partial)))
    elif isinstance(field, (st.Int, st.Float)):
        parts.append(repr(field.bounds(partial)))
        if _outside(field, value, partial):
            parts.append(repr(value))
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:12]


def control_html(field: st.Field, value, partial: dict) -> Raw:
    """The native form control for one field (keyboard operable by construction)."""
    fid = field_id(field.key)
    hint_id = f"{fid}-help" if field.help else None
    common = dict(id_=fid, name=field.key, aria_describedby=hint_id)
    if field.visible is False:  # state that is never a control (set by a panel, carried by the URL): a hidden input
        return el(
            "div",
            el("input", type="hidden", value=field.encode(value), id_=fid, name=field.key),
            class_=f"field field-{field.kind} field-internal",
            data_field=field.key,
            data_sig=field_sig(field, partial),
            hidden=True,
        )
    if isinstance(field, st.Choice):
        ctl = el(
            "select",
            [el("option", label, value=v, selected=(v == str(value))) for v, label in field.options_for(partial)],
            **common,
        )
    elif isinstance(field, st.Int) and (field.widget == "select" or (field.auto is not None and not field.widget)):
        lo, hi = field.bounds(partial)
        opts = []
        if field.auto is not None:
            opts.append(el("option", field.auto, value=field.auto, selected=(value == field.auto)))
        opts += [el("option", str(i), value=str(i), selected=(value == i)) for i in range(lo, hi + 1)]
        if _outside(field, value, partial):  # a held value: offered as it is, the message says what is used
            opts.append(el("option", f"{value} (more than allowed here)", value=str(value), selected=True))
        ctl = el("select", opts, **common)
    elif isinstance(field, st.Int) and field.widget == "range":  # a scrubber (e.g. a figure's STEP_FIELD)
        lo, hi = field.bounds(partial)
        ctl = el("input", type="range", value=field.encode(value), min=lo, max=hi, step=field.step, **common)
    elif isinstance(field, (st.Int, st.Float)):
        lo, hi = field.bounds(partial)
        if isinstance(field, st.Int) and field.special and lo is not None:
            lo = min([lo] + [v for v in field._special_values if v < lo])  # e.g. -c 0 is a valid entry
        ctl = el(
            "input",
            type="number",
            value=field.encode(value),
            min=lo,
            max=hi,
            step=field.step,
            inputmode="numeric" if isinstance(field, st.Int) else "decimal",
            **common,
        )
    elif isinstance(field, st.Bool):
        ctl = el("input", type="checkbox", value="1", checked=bool(value), **common)
    elif isinstance(field, st.Text) and field.rows == 1:  # a one-line list (e.g. the calculator's GPUs)
        ctl = el(
            "input",
            type="text",
            value=str(value),
            maxlength=field.max_len,
            placeholder=field.placeholder or None,
            spellcheck="false",
            autocomplete="off",
            list=f"{fid}-list" if field.suggestions else None,
            **common,
        )
        if field.suggestions:  # examples the browser offers as the reader types
            ctl = join([ctl, el("datalist", [el("option", value=v) for v in field.suggestions], id_=f"{fid}-list")])
    elif isinstance(field, getattr(st, "Text", ())):
        ctl = el(
            "textarea",
            str(value),
            rows=field.rows,
            placeholder=field.placeholder or None,
            spellcheck="false",
            autocomplete="off",
            **common,
        )
    else:
        raise TypeError(f"no control for {type(field).__name__}")
    children = [el("label", field.label, for_=fid), ctl]
    if field.help:
        children.append(el("small", field.help, id_=hint_id, class_="help"))
    return el(
        "div",
        children,
        class_=f"field field-{field.kind}",
        data_field=field.key,
        data_sig=field_sig(field, partial),
        hidden=not field.visible_for(partial),
    )


def controls_fields(spec: st.Spec, state) -> list[tuple[str, str, Raw]]:
    """(key, sig, html) for every field, in order. A control shows spec.shown (a held value as the reader gave
    it); later fields' bounds follow the state's values."""
    out = []
    partial: dict = {}
    for f in spec.fields:
        shown = spec.shown(state, f.key)
        out.append((f.key, field_sig(f, partial, shown), control_html(f, shown, partial)))
        partial[f.key] = getattr(state, f.key)
    return out


def grouped_controls(spec: st.Spec, state, legend: str, in_group, replace: dict | None = None) -> Raw:
    """The generic controls, with the fields whose key in_group(key) picks gathered after the others in one
    <fieldset class="overlay-set"> under `legend` (a figure's overlay checkboxes: devices, KV cache types,
    engines). replace: {key: html} drawn instead of that field's generic control."""
    replace = replace or {}
    rest, group = [], []
    for key, _sig, html in controls_fields(spec, state):
        (group if in_group(key) else rest).append(replace.get(key, html))
    rest.append(el("fieldset", [el("legend", legend), el("div", group, class_="overlay-list")], class_="overlay-set"))
    return join(rest)


def transport_html(fig) -> Raw:
    """Back / Play / Step buttons for a figure that declares STEP_FIELD (an Int field drawn as a range).

    They only move that field's control and fire its input event (site/assets/steps.js), so every frame
    goes through the same form -> state -> render -> URL path as any other change."""
    key = getattr(fig, "STEP_FIELD", None)
    if not key:
        return Raw("")
    fid = field_id(key)
    return el(
        "div",
        [
            el("button", "◀ Back", type="button", data_step_action="back", aria_controls=fid),
            el("button", "Play", type="button", data_step_action="play", aria_controls=fid),
            el("button", "Step ▶", type="button", data_step_action="next", aria_controls=fid),
        ],
        class_="transport",
        role="group",
        aria_label="Step through the figure",
        data_step_field=key,
    )


def field_sigs(spec: st.Spec, state) -> dict[str, str]:
    """{key: sig} for every field: cheap, so the glue can rebuild only the controls that changed."""
    out = {}
    partial: dict = {}
    for f in spec.fields:
        out[f.key] = field_sig(f, partial, spec.shown(state, f.key))
        partial[f.key] = getattr(state, f.key)
    return out


def field_html(spec: st.Spec, state, key: str) -> Raw:
    f = spec.by_key[key]
    return control_html(f, spec.shown(state, key), spec.partial_before(state, key))


def controls_html(fig, state) -> Raw:
    if hasattr(fig, "controls"):
        return Raw(str(fig.controls(state)) + transport_html(fig))
    return join([h for _, _, h in controls_fields(fig.SPEC, state)] + [transport_html(fig)])


def messages_html(messages: list[str]) -> Raw:
    if not messages:
        return Raw("")
    return el("ul", [el("li", m) for m in messages])


def view(fig, state, defer: bool = False) -> dict:
    """Everything the page needs for one state: the figure HTML, the live summary, the query string.

    defer: for a figure with deferred_html(state), render its slow extras as placeholders that the page
    fills right after (the browser does this; the build pre-renders them inline)."""
    data = fig.compute(state)
    deferred = defer and hasattr(fig, "deferred_html")
    return {
        "figure": fig.render(data, defer=True) if deferred else fig.render(data),
        "summary": fig.describe(data),
        "query": fig.SPEC.to_query(state),
    }


def patch_view(fig, state, key=None, base: str = "", defer: bool = False) -> dict | None:
    """For a figure that defines frame_patch(data) (an animated one whose frames share one skeleton): the
    frame's changes as one JSON text for the page's applyPatch (site/assets/patch.js), with the summary and the
    query string. None for other figures. applyPatch touches the page only if the figure in it carries the
    patch's data-patch-key; otherwise the glue falls back to `view` (a full render).

    key: the data-patch-key of the figure in the page. When given and the frame patch's key differs (another
    simulation), a figure with base_patch(data) may still be patched: if its data-patch-base (the skeleton, such
    as the grids' size) equals `base`, the answer is the base patch (every part but the skeleton, its slow extras
    left as placeholders with defer, as `view` leaves them); else None."""
    fp = getattr(fig, "frame_patch", None)
    if fp is None:
        return None
    data = fig.compute(state)
    patch = fp(data)
    if key is not None and patch["key"] != key:
        bp = getattr(fig, "base_patch", None)
        if not base or bp is None:
            return None
        patch = bp(data, defer=defer)
        if patch["base"] != base:
            return None
    return {
        "patch": json.dumps(patch, separators=(",", ":")),
        "summary": fig.describe(data),
        "query": fig.SPEC.to_query(state),
    }


def prerender(fig) -> dict:
    """The parts of the page template filled in at build time, for the default state."""
    s = fig.default_state()
    v = view(fig, s)
    return {
        "lede": esc(getattr(fig, "LEDE", "")),
        "controls": controls_html(fig, s),
        "figure": v["figure"],
        "summary": esc(v["summary"]),
    }
