"""Screenshots of the calculator for a human to look at: light and dark, 390 px and 1280 px wide, the over-ask
state, and the page before Python is ready; and the bad-input states, each light and dark at 390 and 1280 px: a
crafted GGUF file and a deep-JSON paste in the own-model panel, a shared URL with a hostile config, an exercise
cell that drew markup and closed Python's worker, and a failed load on a figure page and on the exercises page.
Writes screenshots/*.png (ignored by git).

    .venv/bin/python tests/e2e/screenshots.py        (after `python3 build.py`)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from playwright.sync_api import sync_playwright  # noqa: E402

from tests.e2e.harness import ROOT, Guard, Site, launch, wait_ready  # noqa: E402

SHOTS = [
    ("calculator-light-1280", "figures/calculator.html", "light", 1280),
    ("calculator-dark-1280", "figures/calculator.html", "dark", 1280),
    ("calculator-light-390", "figures/calculator.html", "light", 390),
    ("calculator-dark-390", "figures/calculator.html", "dark", 390),
    ("calculator-overask-1280", "figures/calculator.html?ngl=65&ctx=32768", "light", 1280),
    ("calculator-overask-dark-390", "figures/calculator.html?ngl=65&ctx=32768", "dark", 390),
    (
        "calculator-moe-cpu-1280",
        "figures/calculator.html?model=qwen3-30b-a3b&machine=rtx3060&n_cpu_moe=20",
        "light",
        1280,
    ),
    ("calculator-badquery-1280", "figures/calculator.html?model=nope&ctx=abc&ngl=999", "light", 1280),
    ("calculator-m4max-1280", "figures/calculator.html?machine=m4max&model=llama-3.1-70b&quant=Q8_0", "dark", 1280),
]
BAD_CONFIG = (
    '{"model_type":"llama","num_hidden_layers":100000000,"hidden_size":4096,"num_attention_heads":32,'
    '"vocab_size":32000,"intermediate_size":14336}'
)


def _drop_bad_gguf(page, tmp: Path):
    """The own-model panel after a crafted GGUF file (a billion layers) was dropped."""
    sys.path.insert(0, str(ROOT / "tests"))
    import fuzz_pipeline as fz

    kvs, ts = fz.SEEDS["llama"]
    kvs = [k for k in kvs if not k[0].endswith("block_count")] + [("llama.block_count", "u64", 10**9)]
    from enginelab import gguf_header

    head = fz.gguf_bytes(kvs, ts)
    path = tmp / "billion-layers.gguf"
    path.write_bytes(head + bytes(gguf_header.read_gguf(head).file_size_estimate() - len(head)))  # data: zeros
    page.locator("#own-model summary").click()
    page.set_input_files("#gguf-file", str(path))
    page.wait_for_function("document.querySelector('#own-status').textContent.startsWith('billion')")
    page.locator("#own-model").scroll_into_view_if_needed()


def _paste_deep_json(page, tmp: Path):
    page.locator("#own-model summary").click()
    page.evaluate("() => { document.getElementById('cfg-text').value = '['.repeat(50000) + ']'.repeat(50000); }")
    page.click("#cfg-use")
    page.wait_for_function("document.querySelector('#own-status').textContent.includes('nested')")
    page.locator("#own-model").scroll_into_view_if_needed()


def _hostile_cell(page, tmp: Path):
    """An exercise cell that drew a chart with markup in its title and then closed Python's worker."""
    code = (
        "from enginelab import plot\n"
        "plot.line([1, 2, 3], [4, 5, 7], title='<img src=x onerror=alert(1)>', xlabel='batch', ylabel='tok/s')\n"
        "import js\njs.close()"
    )
    page.evaluate("(c) => { document.getElementById('ex2-editor').code = c; }", code)
    page.evaluate("() => window.enginelabExercises.runCell(2)")
    page.wait_for_function("() => Number(document.getElementById('ex2').dataset.runs || 0) > 0", timeout=60_000)
    page.locator("#ex2 .ex-output").scroll_into_view_if_needed()


def _fail_stdlib(context):
    context.route("**/python_stdlib.zip", lambda r: r.fulfill(status=404, body="gone"))


# (name, path, scheme, width, prepare(page, tmp) after the page is ready, or a route set-up before it loads)
STATES = []
for scheme in ("light", "dark"):
    for width in (390, 1280):
        tag = f"{scheme}-{width}"
        STATES += [
            (f"own-gguf-error-{tag}", "figures/calculator.html", scheme, width, _drop_bad_gguf, None),
            (f"own-deep-json-{tag}", "figures/calculator.html", scheme, width, _paste_deep_json, None),
            (
                f"calculator-bad-config-url-{tag}",
                f"figures/calculator.html?model=custom&cfg={quote(BAD_CONFIG)}",
                scheme,
                width,
                None,
                None,
            ),  # fmt: skip
            (f"exercise-sandbox-{tag}", "exercises.html", scheme, width, _hostile_cell, None),
            (f"load-failure-calculator-{tag}", "figures/calculator.html", scheme, width, None, _fail_stdlib),
            (f"load-failure-exercises-{tag}", "exercises.html", scheme, width, None, _fail_stdlib),
        ]


def main():
    out = ROOT / "screenshots"
    out.mkdir(exist_ok=True)
    site = Site()
    with sync_playwright() as pw:
        browser = launch(pw)
        for name, path, scheme, width in SHOTS:
            ctx = browser.new_context(
                viewport={"width": width, "height": 900}, color_scheme=scheme, device_scale_factor=1
            )
            g = Guard(ctx, site.origin)
            page = ctx.new_page()
            page.goto(site.url(path))
            wait_ready(page)
            page.screenshot(path=str(out / f"{name}.png"), full_page=True)
            assert not g.problems(), g.problems()
            ctx.close()
        # the issue-12 states: error messages, the exercise sandbox, load failures
        with tempfile.TemporaryDirectory() as tmp:
            for name, path, scheme, width, prepare, before in STATES:
                ctx = browser.new_context(
                    viewport={"width": width, "height": 900}, color_scheme=scheme, device_scale_factor=1
                )
                Guard(ctx, site.origin)
                if before:
                    before(ctx)
                page = ctx.new_page()
                page.goto(site.url(path))
                page.wait_for_function("document.documentElement.dataset.ready !== 'false'", timeout=120_000)
                if prepare:
                    prepare(page, Path(tmp))
                full = prepare is None
                page.screenshot(path=str(out / f"{name}.png"), full_page=full)
                ctx.close()
        # before Python: the pre-rendered page with the progress indicator
        ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        ctx.route("**/*.whl", lambda r: None)  # hold the wheel forever: Python never gets there
        page = ctx.new_page()
        page.goto(site.url("calculator.html"), wait_until="domcontentloaded")
        page.wait_for_timeout(2500)
        page.screenshot(path=str(out / "calculator-loading-1280.png"), full_page=False)
        ctx.close()
        browser.close()
    site.close()
    names = [n for n, *_ in SHOTS] + [n for n, *_ in STATES] + ["calculator-loading-1280"]
    print("wrote", ", ".join(f"screenshots/{n}.png" for n in names))


if __name__ == "__main__":
    main()
