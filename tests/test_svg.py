"""enginelab.svg: every text and attribute escaped, deterministic numbers, accessible charts."""

from enginelab.svg import Raw, attrs, el, esc, join, num, svg, table


def test_text_and_attributes_are_escaped():
    evil = '<script>alert("x")</script>&'
    out = el("text", evil, x=1, data_note=evil)
    assert "<script>" not in out
    assert out == (
        '<text x="1" data-note="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;">'
        "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;</text>"
    )


def test_built_children_are_not_escaped_twice():
    inner = el("tspan", "a<b")
    assert isinstance(inner, Raw)
    assert el("text", [inner, " & c"]) == "<text><tspan>a&lt;b</tspan> &amp; c</text>"
    assert join([inner, "<"]) == "<tspan>a&lt;b</tspan>&lt;"


def test_attribute_names_and_values():
    assert (
        attrs(class_="a", data_value=3, aria_label="x", hidden=True, open=False, title=None)
        == ' class="a" data-value="3" aria-label="x" hidden'
    )
    assert attrs(xlink_href="#a") == ' xlink:href="#a"'


def test_numbers_are_stable():
    assert [num(v) for v in (3, 3.0, 2.499, -0.001, 1 / 3, True)] == ["3", "3", "2.5", "0", "0.33", "1"]


def test_void_and_empty_elements():
    assert el("input", type="checkbox", checked=True) == '<input type="checkbox" checked>'
    assert el("div") == "<div></div>"
    assert el("rect", width=2) == '<rect width="2"/>'
    assert esc("'") == "&#x27;"


def test_svg_is_accessible():
    out = svg(el("rect", width=1, height=1), width=10, height=5, title="T <1>", desc="D", id_="c")
    assert out.startswith(
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 5" width="10" height="5" '
        'role="img" aria-labelledby="c-title c-desc"'
    )
    assert '<title id="c-title">T &lt;1&gt;</title><desc id="c-desc">D</desc>' in out


def test_table():
    t = table("cap", ["a", "b"], [["x", 1]])
    assert t == (
        '<table class="data"><caption>cap</caption><thead><tr><th scope="col">a</th>'
        '<th scope="col">b</th></tr></thead><tbody><tr><th scope="row">x</th><td>1</td></tr></tbody></table>'
    )
