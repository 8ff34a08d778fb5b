"""A tiny SVG/HTML builder that escapes every text and every attribute.

    el("rect", x=0, y=0, width=10, height=4, class_="bar weights")   -> '<rect x="0" y="0" ... />'
    el("text", "5 < 6", x=1)                                          -> '<text x="1">5 &lt; 6</text>'
    el("g", [el(...), el(...)], class_="axis")                        children: a list of built strings

Children given as `Raw` (what `el` returns) are inserted as they are; any other child is text and is escaped.
Attribute names: a trailing underscore is dropped (`class_`), other underscores become dashes
(`data_value` -> `data-value`, `aria_label` -> `aria-label`). `None` and `False` attributes are left out;
`True` writes the bare attribute name (HTML boolean attributes). Numbers are written with `num()`, so the
same input always gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable

VOID_HTML = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
SVG_NS = "http://www.w3.org/2000/svg"


class Raw(str):
    """Markup that is already safe (built here)."""

    __slots__ = ()


def esc(text) -> str:
    """Escape text for element content or a quoted attribute (what html.escape(text, quote=True) gives, without
    importing html and its entity table at a page's start)."""
    s = str(text)
    if "&" in s or "<" in s or ">" in s or '"' in s or "'" in s:  # (most labels and numbers have none)
        s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        s = s.replace('"', "&quot;").replace("'", "&#x27;")
    return s


def num(v) -> str:
    """A coordinate or size: integers without '.0', others to 2 decimals, no '-0'."""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    r = round(float(v), 2)
    if r == int(r):
        return str(int(r))
    s = f"{r:.2f}".rstrip("0")
    return "0" if s in ("-0.", "-0") else s


_NAMES: dict = {}  # keyword -> attribute name (a few dozen distinct keywords in all)


def attr_name(k: str) -> str:
    name = _NAMES.get(k)
    if name is None:
        name = k[:-1] if k.endswith("_") else k
        if name.startswith(("xlink_", "xml_")):
            name = name.replace("_", ":", 1)
        else:
            name = name.replace("_", "-")
        if len(_NAMES) < 1024:
            _NAMES[k] = name
    return name


def attrs(**kw) -> str:
    return _attrs(kw)


def _attrs(kw: dict) -> str:
    # (the common types first, by exact type: a chart writes thousands of attributes per change; a bool is not
    # an int here, and a str subclass such as Raw takes the general path below)
    out = ""
    for k, v in kw.items():
        t = type(v)
        if t is str:
            out += f' {_NAMES.get(k) or attr_name(k)}="{esc(v)}"'
        elif t is int:
            out += f' {_NAMES.get(k) or attr_name(k)}="{v}"'  # num(v) of an int
        elif t is float:
            out += f' {_NAMES.get(k) or attr_name(k)}="{num(v)}"'
        elif v is None or v is False:
            continue
        elif v is True:
            out += f" {_NAMES.get(k) or attr_name(k)}"
        elif isinstance(v, (int, float)):
            out += f' {_NAMES.get(k) or attr_name(k)}="{num(v)}"'
        else:
            out += f' {_NAMES.get(k) or attr_name(k)}="{esc(v)}"'
    return out


def _children(children) -> str:
    t = type(children)
    if t is Raw:
        return children
    if t is str:
        return esc(children)
    if t is list or t is tuple:
        parts = []
        for c in children:
            parts.append(c if type(c) is Raw else _children(c))
        return "".join(parts)
    if children is None:
        return ""
    if isinstance(children, Raw):
        return str(children)
    if isinstance(children, (str, int, float)):
        return esc(children)
    return "".join([_children(c) for c in children])


def _empty(tag: str, a: str) -> Raw:
    if tag in VOID_HTML:
        return Raw(f"<{tag}{a}>")
    if tag in HTML_CONTAINERS:
        return Raw(f"<{tag}{a}></{tag}>")
    return Raw(f"<{tag}{a}/>")


def el(tag: str, children=None, /, **kw) -> Raw:
    """One element. children: text (escaped), a Raw, or an iterable of those."""
    a = _attrs(kw) if kw else ""
    t = type(children)
    if t is Raw:
        return Raw(f"<{tag}{a}>{children}</{tag}>")
    if t is str:
        return Raw(f"<{tag}{a}>{esc(children)}</{tag}>")
    if children is None:
        return _empty(tag, a)
    if t is list or t is tuple:
        return Raw(f"<{tag}{a}>{_children(children)}</{tag}>") if children else _empty(tag, a)
    if (
        not isinstance(children, (str, int, float))
        and not isinstance(children, Raw)
        and isinstance(children, (list, tuple))
        and not children
    ):
        return _empty(tag, a)
    return Raw(f"<{tag}{a}>{_children(children)}</{tag}>")


# HTML elements that must never be self-closed
HTML_CONTAINERS = {
    "div",
    "span",
    "p",
    "td",
    "th",
    "tr",
    "table",
    "tbody",
    "thead",
    "caption",
    "details",
    "summary",
    "button",
    "select",
    "option",
    "label",
    "output",
    "textarea",
    "code",
    "pre",
    "section",
    "ul",
    "ol",
    "li",
    "strong",
    "em",
    "a",
    "form",
    "fieldset",
    "legend",
    "dl",
    "dt",
    "dd",
    "small",
    "b",
    "i",
    "h1",
    "h2",
    "h3",
    "figure",
    "figcaption",
    "script",
}


def join(parts: Iterable) -> Raw:
    return Raw("".join(_children(p) for p in parts))


def svg(children, *, width, height, title: str, desc: str, class_: str = "chart", id_: str | None = None, **kw) -> Raw:
    """An accessible chart: role="img", a <title> and a <desc>, labelled by both, scalable by viewBox."""
    tid = f"{id_ or 'chart'}-title"
    did = f"{id_ or 'chart'}-desc"
    return el(
        "svg",
        [el("title", title, id_=tid), el("desc", desc, id_=did), children],
        xmlns=SVG_NS,
        viewBox=f"0 0 {num(width)} {num(height)}",
        width=width,
        height=height,
        role="img",
        aria_labelledby=f"{tid} {did}",
        class_=class_,
        id_=id_,
        **kw,
    )


def _row(cells) -> str:
    """<tr><th scope="row">first</th><td>...</td>...</tr>, as el() writes it (tables run to hundreds of cells)."""
    parts = ["<tr>"]
    for i, c in enumerate(cells):
        parts.append(f'<th scope="row">{_children(c)}</th>' if i == 0 else f"<td>{_children(c)}</td>")
    parts.append("</tr>")
    return "".join(parts)


def table(caption: str, header: list, rows: list[list], class_: str = "data") -> Raw:
    """A plain data table (the accessible twin of a chart)."""
    return el(
        "table",
        [
            el("caption", caption),
            el("thead", el("tr", [el("th", h, scope="col") for h in header])),
            el("tbody", Raw("".join(_row(r) for r in rows))),
        ],
        class_=class_,
    )


def data_details(summary: str, tbl: Raw, open_: bool = False, id_: str | None = None) -> Raw:
    return el("details", [el("summary", summary), tbl], class_="data-table", open=open_, id_=id_)
