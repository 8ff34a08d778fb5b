"""Screenshots of the calculator for a human to look at: light and dark, 390 px and 1280 px wide, the over-ask
state, and the page before Python is ready. Writes screenshots/*.png (ignored by git).

    .venv/bin/python tests/e2e/screenshots.py        (after `python3 build.py`)
"""

from __future__ import annotations

import sys
from pathlib import Path

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
    # several GPUs: a bar per card, the -ts suggestion when one overflows
    ("calculator-2gpu-1280", "figures/calculator.html?model=llama-3.1-70b&machine=rtx3090&gpus=rtx3090,rtx3090",
     "light", 1280),
    ("calculator-2gpu-overask-dark-390", "figures/calculator.html?machine=rtx3090&gpus=rtx3090,rtx3060&ts=1,1",
     "dark", 390),
]  # fmt: skip


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
    print("wrote", ", ".join(f"screenshots/{n}.png" for n, *_ in SHOTS), "and screenshots/calculator-loading-1280.png")


if __name__ == "__main__":
    main()
