"""The companion page: every figure it embeds exists, and every try-this link is a valid state."""

from urllib.parse import parse_qsl, urlparse

from enginelab import companion
from enginelab.figures import REGISTRY


def test_every_section_figure_is_registered():
    missing = [s["figure"] for s in companion.SECTIONS if s["figure"] not in REGISTRY]
    assert missing == []


def test_try_links_are_valid_states_that_differ_from_the_default():
    for s in companion.SECTIONS:
        fig = REGISTRY[s["figure"]]
        for label, query in s["try"]:
            state, messages = fig.SPEC.from_query(query)
            assert messages == [], (s["figure"], label, messages)
            if query:  # the link really changes the figure, and the state round-trips through the URL
                assert state != fig.SPEC.default(), (s["figure"], label)
                again, messages = fig.SPEC.from_query(fig.SPEC.to_query(state))
                assert again == state and messages == []


def test_sections_show_the_static_figure_and_link_to_the_live_one():
    body = str(companion.companion_body(set(REGISTRY), {fid: f"<svg id='pre-{fid}'></svg>" for fid in REGISTRY}))
    for s in companion.SECTIONS:
        fid = s["figure"]
        assert f'id="frame-{fid}"' in body and f"<svg id='pre-{fid}'>" in body
        assert body.count(f'data-frame="frame-{fid}"') == len(s["try"]) + 1  # try links + "make live"
        for _label, query in s["try"]:
            assert companion.figure_src(fid, query).replace("&", "&amp;") in body
    assert "<script" not in body and "<iframe" not in body  # no Python boots until asked
    idx = str(companion.index_body([("a<b", "T<itle", "L&ede")]))
    assert "T&lt;itle" in idx and "L&amp;ede" in idx and "a<b" not in idx


def test_embed_snippet_points_at_the_figure_page_and_includes_embed_js():
    snip = companion.embed_snippet("roofline", {"machine": "rtx3060"}, base="https://course.example/lab/")
    src = snip.split('src="')[1].split('"')[0]
    u = urlparse(src)
    assert u.path.endswith("/figures/roofline.html") and dict(parse_qsl(u.query)) == {"machine": "rtx3060"}
    assert snip.splitlines()[1] == '<script src="https://course.example/lab/embed.js" async></script>'
    assert 'title="a &quot;b&quot; &lt;c"' in companion.embed_snippet("x", title='a "b" <c')


def test_roofline_try_links_are_the_figures_own_presets():
    from urllib.parse import parse_qsl

    from enginelab.figures import roofline

    mine = [q for s in companion.SECTIONS if s["figure"] == "roofline" for _, q in s["try"]]
    theirs = [dict(parse_qsl(q.lstrip("?"))) for _, q, _ in roofline.presets()]
    for q in mine:
        state, _ = roofline.SPEC.from_query(q)
        assert any(roofline.SPEC.from_query(t)[0] == state for t in theirs), q
