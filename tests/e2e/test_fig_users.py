"""The "How many users?" figure in a real Chromium, offline (the `guard` fixture fails a test on any console error,
page error or failed request): a URL with state reproduces CPython's numbers and causes, a control and a preset
re-run the simulation in Pyodide, and the calculator links here with its state."""

from __future__ import annotations

from enginelab.figures import users as fig

from .harness import readouts, url_query


def causes(page) -> dict:
    return page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('#figure .users-why li')]
             .map(li => [li.className, li.querySelector('[data-cause]').dataset.cause]))"""
    )


def expected(q: str):
    d = fig.compute(fig.SPEC.from_query(q)[0])
    return d, {f"why-{ln.engine.replace('.', '')}": ln.cause for ln in d.lines if not ln.error}


def test_users_figure_state_controls_and_presets(page_at):
    # -np 4 (a state the build did not pre-render: Python draws it)
    page = page_at("figures/users.html?np=4&kv_engine=llama.cpp&kv_users=16")
    d, want = expected("?np=4&kv_engine=llama.cpp&kv_users=16")
    assert causes(page) == want and want["why-llamacpp"] == "cap"
    got = readouts(page)
    for ln in d.lines:
        assert int(got[f"users_{ln.engine.replace('.', '')}"]) == ln.users
    for sid in ("users-tok", "users-tpot", "users-ttft", "users-kv"):
        svg = page.locator(f"#figure svg#{sid}")
        assert svg.get_attribute("role") == "img" and page.locator(f"#figure svg#{sid} > desc").count() == 1
    assert page.locator("#figure svg#users-kv rect").count() == fig.FRAMES * 128
    # a control: a looser TPOT target serves more users (same simulations, memoised)
    page.fill("#f-slo_tpot", "1000")
    page.keyboard.press("Tab")
    page.wait_for_function("new URLSearchParams(location.search).get('slo_tpot') === '1000'", timeout=30_000)
    d2, _ = expected("?np=4&kv_engine=llama.cpp&kv_users=16&slo_tpot=1000")
    vllm = next(ln for ln in d2.lines if ln.engine == "vllm")
    page.wait_for_function(
        f"document.querySelector('[data-readout=users_vllm]').dataset.value === '{vllm.users}'", timeout=30_000
    )
    # a preset: long prompts, the KV pool
    page.locator("button[data-set-state]", has_text="Long prompts").click()
    page.wait_for_function("new URLSearchParams(location.search).get('input_len') === '4096'", timeout=60_000)
    page.wait_for_function(
        "document.querySelector('#figure .why-vllm [data-cause]')?.dataset.cause === 'kv'", timeout=120_000
    )
    assert causes(page) == expected("?input_len=4096&output_len=512")[1]
    assert url_query(page) == {"input_len": "4096", "output_len": "512"}


def test_calculator_links_here_with_its_state(page_at):
    page = page_at("figures/calculator.html?model=qwen2.5-14b&machine=rtx3060&ctx=16384")
    link = page.locator("#calc-findings a[data-figure-link=users]")
    link.wait_for(timeout=60_000)
    assert link.get_attribute("href") == "users.html?model=qwen2.5-14b&machine=rtx3060&quant=Q4_K_M&ctx=16384"
    link.click()
    page.wait_for_function("document.documentElement.dataset.ready === 'true'", timeout=120_000)
    assert page.input_value("#f-model") == "qwen2.5-14b" and page.input_value("#f-ctx") == "16384"
