"""Several GPUs in the app: the gpus/sm/ts/mg/link URL keys, the calculator's bars and command, the advisor's -ts
suggestion, the offload curve. Bad values give messages that name the field; the rest keeps working."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest

import perf_model as pm
from enginelab import explain, findings, gpus
from enginelab.figures import advisor as fig_advisor
from enginelab.figures import calculator as calc
from enginelab.figures import offload_curve as oc


def state(q):
    s, msgs = calc.SPEC.from_query(q)
    return s, msgs


TWO = "?model=llama-3.1-70b&machine=rtx3090&gpus=rtx3090,rtx3090"


def test_url_round_trip_and_old_urls():
    q = "?model=llama-3.1-70b&machine=rtx3090&gpus=rtx3090,rtx3060,24gb-936gbs-71tf&sm=row&ts=2,1,2&link=nvlink"
    s, msgs = state(q)
    assert msgs == []
    assert calc.SPEC.to_query(s) == q  # commas stay readable
    # a URL from before: no key, one GPU, the same numbers as ever
    old, msgs = state("?model=qwen2.5-14b&machine=rtx3060&ctx=32768")
    assert msgs == [] and old.gpus == "" and not calc.compute(old).machine.multi_gpu
    assert calc.compute(old).placement == pm.place("qwen2.5-14b", "rtx3060", n_ctx=32768, profile=old.profile)


def test_two_3090s_in_the_calculator():
    d = calc.compute(state(TWO)[0])
    assert d.machine.gpus == (pm.RTX_3090, pm.RTX_3090) and d.machine.ram == pm.MACHINES["rtx3090"].ram
    assert d.readouts.fits and d.readouts.n_gpu_layers == 81
    assert "-ngl" not in d.command and "-ts" not in d.command  # -ngl auto: --fit splits the layers itself
    pinned = calc.compute(state(TWO + "&ngl=81")[0])
    assert "-ngl 81 -ts 41,40" in pinned.command
    html = calc.render(d)
    # one memory bar per GPU, then the host's RAM, each GPU's total as a readout
    svg = str(calc._bar_chart(d))
    assert svg.count('class="pool pool-gpu') == 2 and "pool-ram" in svg
    assert 'data-readout="gpu0_gb"' in svg and 'data-readout="gpu1_gb"' in svg
    assert "GPU 0 · RTX 3090" in svg and ">layers 0–40<" in svg and ">layers 41–79 + output<" in svg
    assert "over 2 GPUs (41 + 40 layers, -sm layer)" in calc.describe(d)
    # explanations add up per GPU
    e = explain.explain(d)
    assert "GPU 0" in e["vram_gb"] and "41 (GPU 0) + 40 (GPU 1) = 81 of 81" in e["n_gpu_layers"]
    assert "(link)" in e["decode_tok_s"]
    assert "data-set-state" in html


def _editor_states(html):
    tags = re.findall(r'<button[^>]*class="gpu-(?:add|remove)"[^>]*>', html)
    return [json.loads(unescape(re.search(r'data-set-state="([^"]*)"', t).group(1))) for t in tags]


def test_gpu_buttons_lead_to_valid_states():
    s = state("?machine=rtx3090")[0]
    html = calc.render(calc.compute(s))
    adds = _editor_states(html)
    assert {"gpus": "rtx3090,rtx3060", "ts": ""} in adds  # the machine's own card, then the new one
    assert not any("mg" in a for a in adds)  # one GPU: nothing to remove
    two = calc.SPEC.coerce({**s.as_dict(), **{"gpus": "rtx3090,rtx3060", "ts": ""}})[0]
    html2 = calc.render(calc.compute(two))
    states = _editor_states(html2)
    assert {"gpus": "rtx3060", "ts": "", "mg": 0} in states and {"gpus": "rtx3090", "ts": "", "mg": 0} in states
    for a in states:
        assert calc.SPEC.coerce({**two.as_dict(), **a})[1] == []
    # a Mac: no GPU list to edit
    assert "gpu-editor" not in calc.render(calc.compute(state("?machine=m4max")[0]))


@pytest.mark.parametrize(
    "q, field, text",
    [
        ("gpus=rtx3090,0gb-360gbs-28tf", "GPUs", "GPU 2 is left out: '0gb-360gbs-28tf': 0 GB of memory"),
        ("gpus=rtx3090,rtx9999", "GPUs", "GPU 2 is left out: 'rtx9999' is neither a catalog card"),
        ("gpus=rtx3090,rtx3060&ts=3,-1", "Tensor split (-ts)", "value 2 is -1"),
        ("gpus=rtx3090,rtx3060&ts=0,0", "Tensor split (-ts)", "sums to 0"),
        ("gpus=rtx3090,rtx3060&ts=3,1,1", "Tensor split (-ts)", "3 values for 2 GPUs"),
        ("gpus=rtx3090,rtx3060&ts=a,b", "Tensor split (-ts)", "is not a number"),
        ("gpus=rtx3090,rtx3060&sm=rows", "Split mode (-sm)", "'rows' is not one of"),
        ("gpus=rtx3090,rtx3060&sm=none&mg=5", "Main GPU (-mg)", "5 is above 1"),
        ("machine=m4max&gpus=rtx3090", "GPUs", "unified memory"),
    ],
)
def test_bad_values_name_the_field_and_the_rest_works(q, field, text):
    s, msgs = state("?" + q)
    assert len(msgs) == 1 and msgs[0].startswith(field + ":") and text in msgs[0], msgs
    d = calc.compute(s)
    assert d.error is None and d.placement is not None  # the page still computes
    html = calc.render(d)
    assert html.startswith('<div class="calculator"')


def test_user_text_is_escaped():
    s, msgs = state("?gpus=<img src=x onerror=alert(1)>,rtx3090&ts=<b>")
    assert msgs and all("<img" in m or "<b>" in m for m in msgs)
    html = calc.render(calc.compute(s))
    assert "<img" not in html and "<b>" not in html
    from enginelab import page

    assert "<img" not in page.messages_html(msgs) and "&lt;img" in page.messages_html(msgs)


def test_zero_memory_card_alone_leaves_the_machines_own():
    s, msgs = state("?machine=rtx3060&gpus=0gb-360gbs-28tf")
    assert msgs and s.gpus == ""
    assert calc.compute(s).machine == pm.MACHINES["rtx3060"]


def test_card_tokens():
    dev, why = gpus.parse_card("12gb-360gbs-28.2tf")
    assert why is None and (dev.mem_gb, dev.bandwidth_gbs, dev.fp16_tflops) == (12.0, 360.0, 28.2)
    assert gpus.card_token(dev) == "12gb-360gbs-28.2tf" and gpus.card_token(pm.RTX_3090) == "rtx3090"
    assert gpus.parse_card("24gb")[0] is None and gpus.parse_card("999gb-1gbs-1tf")[0] is None
    toks, devs, probs = gpus.parse_gpus(",".join(["rtx3060"] * 10))
    assert len(devs) == gpus.MAX_GPUS and probs


def test_advisor_suggests_ts_when_one_card_overflows_and_another_has_room():
    s = state("?machine=rtx3090&gpus=rtx3090,rtx3060&ts=1,1&profile=course")[0]
    d = calc.compute(s)
    assert not d.readouts.fits and d.placement.failing_device == "GPU 1 (RTX 3060)"
    f = findings.for_scenario(d)
    causes = [x.cause for x in f.findings]
    assert causes[:2] == ["over_ask", "uneven_split"]
    split = f.findings[1]
    assert split.title == "GPU 1 (RTX 3060) overflows while GPU 0 (RTX 3090) has 12.0 GB free"
    ts = [c for c in split.changes if "ts" in c.apply]
    assert ts and all(c.after["fits"] for c in ts)
    # the over-ask finding offers it too, and applying it loads
    assert any("ts" in c.apply for c in f.findings[0].changes)
    c = ts[0]
    new = calc.SPEC.coerce({**s.as_dict(), **c.apply})[0]
    assert calc.compute(new).readouts.fits
    assert f"-ts {c.apply['ts']}" in calc.compute(new).command
    # the calculator shows it (its findings section renders every cause)
    assert "overflows while GPU 0 (RTX 3090)" in calc.findings_html(d)
    # no such finding on a balanced pair
    ok = findings.for_scenario(calc.compute(state(TWO)[0]))
    assert "uneven_split" not in [x.cause for x in ok.findings]


def test_advisor_page_takes_the_gpus():
    s, msgs = fig_advisor.SPEC.from_query(TWO + "&ts=3,1")
    assert msgs == []
    a = fig_advisor.compute(s)
    assert a.calc.machine.multi_gpu and a.outcome.placement is a.calc.placement


def test_offload_curve_on_two_gpus():
    s, msgs = oc.SPEC.from_query("?model=llama-3.1-70b&machine=rtx3090&gpus=rtx3090,rtx3090&ctx=8192")
    assert msgs == []
    d = oc.compute(s)
    assert d.error is None and d.readouts.auto_ngl == 81 and d.fit_limit == 81
    # the same sweep on one card stops far earlier
    one = oc.compute(oc.SPEC.from_query("?model=llama-3.1-70b&machine=rtx3090&ctx=8192")[0])
    assert one.fit_limit < 50
    assert d.points[-1].tok_s > 5 * one.points[one.fit_limit].tok_s


def test_every_cause_has_a_label():
    from enginelab.advisor import diagnosis

    assert set(diagnosis.CAUSES) <= set(findings.CAUSE_LABELS)


def test_serving_plan_figure_takes_tensor_parallelism():
    from enginelab import serving_plan as sp
    from enginelab.figures import serving_plan as fig

    s, msgs = fig.SPEC.from_query("?model=llama-3.1-70b&weights=awq&tp=2")
    assert msgs == [] and fig.SPEC.to_query(s) == "?model=llama-3.1-70b&tp=2&weights=awq"
    d = fig.compute(s)
    want = sp.vllm_plan("llama-3.1-70b", "rtx4090", "awq", max_model_len=8192, tensor_parallel_size=2)
    assert d.plan.gpu == "2x RTX 4090" and d.readouts.num_gpu_blocks == want["num_gpu_blocks"]
    html = fig.render(d)
    assert "--tensor-parallel-size 2" in html and "Per GPU, on each of 2" in html
    # SGLang: --tp; a tp the model's heads cannot split is the engine's error, shown
    s2 = fig.SPEC.from_query("?engine=sglang&tp=2")[0]
    assert "--tp 2" in fig.render(fig.compute(s2))
    bad = fig.compute(fig.SPEC.from_query("?model=qwen2.5-7b&tp=8")[0])
    assert bad.plan is None and bad.error.startswith("tensor_parallel_size:")
    assert "Cannot plan these settings" in fig.render(bad)


_SECONDS = {"µs": 1e-6, "ms": 1e-3, "s": 1.0}


def _secs(text: str) -> float:
    v, unit = re.fullmatch(r"([\d.,]+) (µs|ms|s)", text.strip()).groups()
    return float(v.replace(",", "")) * _SECONDS[unit]


@pytest.mark.parametrize(
    "q",
    [
        TWO + "&profile=course",
        TWO,  # measured
        TWO + "&sm=row&link=nvlink",
        "?model=llama-3.1-70b&machine=rtx3090&gpus=rtx3090,rtx3060&ctx=8192&profile=course",  # partial offload
    ],
)
def test_explanations_add_up_per_gpu(q):
    d = calc.compute(state(q)[0])
    e = explain.explain(d)
    result = re.search(r"Result: </span>(.*?)</p>", e["vram_gb"]).group(1)
    terms = [float(x) for x in re.findall(r"([\d.,]+) GB \(GPU", result)]
    total = float(re.search(r"= ([\d.,]+) GB", result).group(1))
    assert len(terms) == 2 and sum(terms) == pytest.approx(total, abs=0.02)
    assert total == pytest.approx(d.readouts.vram_gb, abs=0.006)
    result = re.search(r"Result: </span>t_token = (.*?) →", e["decode_tok_s"]).group(1)
    parts, total = result.rsplit(" = ", 1)
    terms = [_secs(t.split(" (")[0]) for t in parts.split(" + ")]
    assert _secs(total) == pytest.approx(d.decode["total_s"], rel=0.01)
    assert sum(terms) == pytest.approx(_secs(total), rel=0.01)
    assert "(link)" in result
