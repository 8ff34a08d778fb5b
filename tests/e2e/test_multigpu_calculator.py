"""The calculator with several GPUs, in a real Chromium, offline: the gpus/sm/ts/mg/link URL keys round-trip,
the + card and Remove buttons, one memory bar per GPU, the llama-server flags, and bad values (a 0 GB card, a
split with a negative value or none at all) that give messages naming the field while the rest keeps working.
Expected numbers come from perf_model in CPython."""

from __future__ import annotations

from urllib.parse import urlsplit

import perf_model as pm

from .harness import readouts, same_readouts, url_query, wait_ready

PAGE = "figures/calculator.html"


def query(page) -> dict:
    return url_query(page)


def expected(model, gpus, **kw):
    """perf_model's placement and decode in CPython, in the calculator's default (measured) profile."""
    mc = pm.Machine("x", tuple(pm.GPUS[g] for g in gpus), pm.MACHINES["rtx3090"].ram, 31.5)
    p = pm.place(model, mc, "Q4_K_M", n_ctx=8192, profile="measured", **kw)
    d = pm.decode_step_time(p, context=2000) if p.fits else None
    return p, d


def messages(page) -> list:
    return page.locator("#messages li").all_text_contents()


def test_url_state_round_trips_with_two_gpus(page_at):
    q = "?model=llama-3.1-70b&machine=rtx3090&gpus=rtx3090,rtx3090"
    page = page_at(PAGE + q)
    assert urlsplit(page.url).query == q[1:]  # commas stay readable
    assert page.locator("#messages").is_hidden()
    p, d = expected("llama-3.1-70b", ["rtx3090", "rtx3090"])
    got = readouts(page)
    assert got["n_gpu_layers"] == "81" and got["fits"] == "true"
    assert abs(float(got["decode_tok_s"]) - d["tok_per_s"]) < 1e-6 * d["tok_per_s"]
    for u in p.per_gpu:  # one bar per GPU, its total as a readout
        assert abs(float(got[f"gpu{u.index}_gb"]) - u.total / pm.GB) < 1e-6
    assert page.locator("#calculator-chart .pool").count() == 3  # two GPUs and the host's RAM
    assert "-ngl" not in page.locator("#llama-command").text_content()  # auto: --fit splits the layers itself
    assert page.input_value("#f-gpus") == "rtx3090,rtx3090"
    assert page.locator("#f-sm").is_visible() and page.locator("#f-ts").is_visible()
    before = readouts(page)
    page.reload()
    wait_ready(page)
    assert same_readouts(readouts(page), before)


def test_add_and_remove_a_gpu_and_change_the_split(page_at):
    page = page_at(PAGE + "?model=llama-3.1-70b&machine=rtx3090")
    assert not page.locator("#f-sm").is_visible()  # one GPU: no split controls
    page.get_by_role("button", name="Add an RTX 3060 (12 GB) as GPU 1").click()
    page.wait_for_function("() => new URLSearchParams(location.search).get('gpus') === 'rtx3090,rtx3060'")
    assert page.locator("#calculator-chart .pool").count() == 3
    assert page.locator("#f-sm").is_visible()
    # row split: the command says so and the URL keeps it
    page.select_option("#f-sm", "row")
    page.wait_for_function("() => new URLSearchParams(location.search).get('sm') === 'row'")
    assert "-sm row" in page.locator("#llama-command").text_content()
    # a tensor split typed in
    page.select_option("#f-sm", "layer")
    page.fill("#f-ts", "3,1")
    page.wait_for_function("() => new URLSearchParams(location.search).get('ts') === '3,1'")
    p, _d = expected("llama-3.1-70b", ["rtx3090", "rtx3060"], tensor_split=(3, 1))
    assert readouts(page)["fits"] == ("true" if p.fits else "false")
    assert "-ts 3,1" in page.locator("#llama-command").text_content()
    # remove the second card: back to one GPU, no split keys left
    page.get_by_role("button", name="Remove GPU 1 (RTX 3060)").click()
    page.wait_for_function("() => new URLSearchParams(location.search).get('gpus') === 'rtx3090'")
    assert "ts" not in query(page) and page.locator("#calculator-chart .pool").count() == 2


def test_a_zero_memory_gpu_is_named_and_left_out(page_at):
    page = page_at(PAGE + "?machine=rtx3090&gpus=rtx3090,0gb-360gbs-28tf")
    msgs = messages(page)
    assert len(msgs) == 1 and msgs[0].startswith("GPUs:") and "0 GB of memory" in msgs[0]
    # the rest works: the valid card is used, numbers are there, the URL drops the bad card
    got = readouts(page)
    assert got["fits"] in ("true", "false") and got["vram_gb"] != ""
    assert query(page).get("gpus") == "rtx3090"
    # typed into the field: the same message, and the page keeps working
    page.fill("#f-gpus", "rtx3090,rtx3060,0gb-1gbs-1tf")
    page.wait_for_function("() => new URLSearchParams(location.search).get('gpus') === 'rtx3090,rtx3060'")
    assert any(m.startswith("GPUs:") and "GPU 3 is left out" in m for m in messages(page))
    assert page.locator("#calculator-chart .pool").count() == 3


def test_a_split_that_does_not_sum_or_has_negatives(page_at):
    page = page_at(PAGE + "?machine=rtx3090&gpus=rtx3090,rtx3060&ts=0,0")
    msgs = messages(page)
    assert len(msgs) == 1 and msgs[0].startswith("Tensor split (-ts):") and "sums to 0" in msgs[0]
    default = readouts(page)
    assert default["fits"] in ("true", "false") and "ts" not in query(page)
    page.fill("#f-ts", "3,-1")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#messages li')].some(li => li.textContent.includes('value 2 is -1'))"
    )
    assert messages(page)[0].startswith("Tensor split (-ts):")
    assert same_readouts(readouts(page), default)  # llama.cpp's default split (by free memory) is used meanwhile
    page.fill("#f-ts", "<b>x</b>")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#messages li')].some(li => li.textContent.includes('not a number'))"
    )
    assert page.locator("#messages b, #figure b").count() == 0  # shown as text, never as markup
    page.fill("#f-ts", "2,1")
    page.wait_for_function("() => new URLSearchParams(location.search).get('ts') === '2,1'")
    assert page.locator("#messages").is_hidden()
