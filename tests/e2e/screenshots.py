"""Screenshots for a human to look at: pages and states at 390 px and 1280 px wide, light and dark, written to
screenshots/<name>-<width>-<scheme>.png (ignored by git).

    .venv/bin/python tests/e2e/screenshots.py                 every shot, after `python3 build.py`
    .venv/bin/python tests/e2e/screenshots.py calc kv-        only shots whose name contains one of the words

A shot is (name, path, how): how is "ready" (wait for Python's first render), "static" (the pre-rendered page,
Python never starts: the wheel is held back) or "host" (the page inside a frame of a host page on another origin,
sized by embed.js). Every shot is taken light and dark, at 390 and 1280 px.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from playwright.sync_api import sync_playwright  # noqa: E402

from tests.e2e.harness import ROOT, Guard, Site, launch, wait_ready  # noqa: E402

GENERIC_CONFIG = (  # a config.json of an architecture the lab has never seen, with the standard keys
    '{"model_type":"acme_lm","hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,'
    '"num_key_value_heads":8,"intermediate_size":14336,"vocab_size":128256,"max_position_embeddings":32768}'
)
SHOTS = [
    ("calculator", "figures/calculator.html", "ready"),
    ("calculator-overask", "figures/calculator.html?ngl=65&ctx=32768", "ready"),
    ("calculator-vram", "figures/calculator.html?model=llama-3.1-8b", "ready"),
    ("calculator-moe-cpu", "figures/calculator.html?model=qwen3-30b-a3b&machine=rtx3060&n_cpu_moe=20", "ready"),
    ("calculator-held", "figures/calculator.html?ctx=1024&tokens=8000&ngl=99", "ready"),
    ("calculator-ctx0", "figures/calculator.html?model=qwen2.5-14b&ctx=0", "ready"),
    ("calculator-m4max", "figures/calculator.html?machine=m4max&model=llama-3.1-70b&quant=Q8_0", "ready"),
    ("calculator-course", "figures/calculator.html?profile=course", "ready"),
    ("calculator-cpu-threads", "figures/calculator.html?machine=cpu-ddr5&model=llama-3.1-8b&threads=2", "ready"),
    # several GPUs: a bar per card; one card overflows, the advisor suggests -ts
    ("calculator-2gpu", "figures/calculator.html?model=llama-3.1-70b&machine=rtx3090&gpus=rtx3090,rtx3090", "ready"),
    ("calculator-2gpu-overask", "figures/calculator.html?machine=rtx3090&gpus=rtx3090,rtx3060&ts=1,1", "ready"),
    # any model: a hybrid (Qwen3.5: 48 linear-attention blocks, 16 global), Gemma 4's global blocks, an
    # unknown model_type read generically
    ("calculator-qwen35-hybrid", "figures/calculator.html?model=qwen3.5-27b&machine=rtx4090", "ready"),
    ("calculator-gemma4", "figures/calculator.html?model=gemma-4-31b&machine=rtx5090", "ready"),
    ("calculator-gemma4-moe", "figures/calculator.html?model=gemma-4-26b-a4b&machine=rtx4060ti&ctx=32768", "ready"),
    ("serving-plan-hybrid", "figures/serving-plan.html?model=qwen3.6-35b-a3b", "ready"),
    ("calculator-generic-config", "figures/calculator.html?model=custom&cfg=" + quote(GENERIC_CONFIG), "ready"),
    # a reader's older llama.cpp build: the explain box names what it lacks
    ("calculator-build", "figures/calculator.html?model=qwen3-30b-a3b&machine=rtx4090&build=2025-08-28", "ready"),
    ("calculator-shared-before-python", "calculator.html?model=qwen2.5-14b&machine=rtx3060&ctx=16384", "static"),
    ("advisor", "figures/advisor.html", "ready"),
    ("tiers", "figures/tiers.html", "ready"),
    ("load", "figures/load.html", "ready"),
    ("load-upload", "figures/load.html?step=2", "ready"),
    ("load-first-token", "figures/load.html?step=9", "ready"),
    ("phases", "figures/phases.html", "ready"),
    ("roofline", "figures/roofline.html", "ready"),
    ("offload-curve", "figures/offload-curve.html", "ready"),
    ("decode-curve", "figures/decode-curve.html", "ready"),
    ("engines", "figures/engines.html", "ready"),
    ("serving-plan", "figures/serving-plan.html", "ready"),
    ("serving-plan-awq-too-big", "figures/serving-plan.html?model=llama-3.1-70b&weights=awq", "ready"),
    ("serving-plan-sglang-capped", "figures/serving-plan.html?engine=sglang&model=llama-3.1-8b&ctx=131072", "ready"),
    ("validation", "figures/validation.html", "ready"),
    ("kv-managers", "figures/kv-managers.html", "ready"),
    ("kv-managers-middle", "figures/kv-managers.html?step=7", "ready"),
    ("kv-managers-radix-loses", "figures/kv-managers.html?workload=radix-loses&step=9", "ready"),
    ("users", "figures/users.html", "ready"),
    # long prompts: each engine's KV pool holds a handful of requests; vLLM preempts
    ("users-kv-pool", "figures/users.html?input_len=4096&output_len=512", "ready"),
    # llama-server capped at 4 slots; its KV pool in time
    ("users-np4", "figures/users.html?np=4&kv_engine=llama.cpp&kv_users=16", "ready"),
    ("users-h100", "figures/users.html?model=qwen3-8b&machine=h100", "ready"),
    ("serving-plan-h100", "figures/serving-plan.html?model=qwen3-8b&machine=h100", "ready"),
    ("companion", "index.html", "static"),
    ("figure-index", "figures/index.html", "static"),
    ("exercises", "exercises.html", "ready"),
    ("embedded-calculator", "figures/calculator.html?model=llama-3.2-1b", "host"),
]
BAD_CONFIG = (
    '{"model_type":"llama","num_hidden_layers":100000000,"hidden_size":4096,"num_attention_heads":32,'
    '"vocab_size":32000,"intermediate_size":14336}'
)


def _open_decode_basis(page, tmp: Path):
    """The decode readout's "How is this computed?" box, opened (the measured profile's parameters)."""
    box = page.locator('[data-readout="decode_tok_s"]').locator("xpath=ancestor::*[.//details][1]").locator("details")
    box.first.evaluate("d => d.open = true")
    page.wait_for_timeout(200)
    box.first.scroll_into_view_if_needed()


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


def _hub(context):
    """The Hugging Face Hub as the remote-model browser tests fake it (tests/remote_fixtures.py)."""
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    from test_remote_model import HOSTS, Hub

    class _Ctx:  # Hub routes a page; here the whole context
        route = context.route

    Hub(_Ctx)
    del HOSTS


def _wait_remote(page, tmp: Path):
    page.wait_for_function(
        "() => { const s = document.getElementById('remote-status'); return s && s.textContent &&"
        " !/^(Asking|Reading)/.test(s.textContent); }",
        timeout=60_000,
    )
    page.locator("#own-model").scroll_into_view_if_needed()


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
            (
                f"calculator-cpu-basis-{tag}",
                "figures/calculator.html?machine=cpu-ddr5&model=qwen2.5-0.5b&quant=Q8_0&threads=1",
                scheme,
                width,
                _open_decode_basis,
                None,
            ),
            (
                f"calculator-gpu-basis-{tag}",
                "figures/calculator.html?machine=rtx4090&model=llama-3.1-8b&quant=Q4_K_M",
                scheme,
                width,
                _open_decode_basis,
                None,
            ),
            (
                f"calculator-apple-cpu-basis-{tag}",
                "figures/calculator.html?machine=m4max&model=llama-3.1-8b&quant=Q4_K_M&ngl=0&threads=8",
                scheme,
                width,
                _open_decode_basis,
                None,
            ),
            (f"load-failure-calculator-{tag}", "figures/calculator.html", scheme, width, None, _fail_stdlib),
            (f"load-failure-exercises-{tag}", "exercises.html", scheme, width, None, _fail_stdlib),
            # a remote model (issue 16): a GGUF repo's header read by Range, a config-only repo, a gated one
            (
                f"remote-gguf-{tag}",
                "figures/calculator.html?hf=lab-test/Tiny-Llama-GGUF",
                scheme,
                width,
                _wait_remote,
                _hub,
            ),
            (
                f"remote-config-{tag}",
                "figures/calculator.html?hf=lab-test/Tiny-Llama",
                scheme,
                width,
                _wait_remote,
                _hub,
            ),
            (
                f"remote-gated-{tag}",
                "figures/calculator.html?hf=lab-test/Gated-Model",
                scheme,
                width,
                _wait_remote,
                _hub,
            ),
        ]


def host_page(site, path: str) -> str:
    return (
        '<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">'
        '<link rel="icon" href="data:,"><title>A course page</title><style>body{font:16px system-ui;margin:1rem}'
        "@media (prefers-color-scheme: dark){body{background:#222;color:#eee}}</style></head><body>"
        "<h1>Week 3: where the bytes live</h1><p>Text of the course, then the figure:</p>"
        f'<iframe src="{site.url(path)}" title="figure" width="100%" height="900" style="border:0;max-width:100%">'
        f'</iframe><script src="{site.url("embed.js")}" async></script><p>More course text.</p></body></html>'
    )


def main(words: list[str]):
    out = ROOT / "screenshots"
    out.mkdir(exist_ok=True)
    site = Site()
    host_dir = Path(tempfile.mkdtemp())
    host = Site(host_dir, check_built=False)
    written = []
    with sync_playwright() as pw:
        browser = launch(pw)
        for name, path, how in SHOTS:
            if words and not any(w in name for w in words):
                continue
            for width in (390, 1280):
                for scheme in ("light", "dark"):
                    ctx = browser.new_context(
                        viewport={"width": width, "height": 900}, color_scheme=scheme, device_scale_factor=1
                    )
                    g = Guard(ctx, site.origin, also=(host.origin,))
                    page = ctx.new_page()
                    if how == "static":
                        ctx.route("**/wheels/*.whl", lambda r: None)  # held: Python never gets there
                        page.goto(site.url(path), wait_until="load")
                        page.wait_for_timeout(400)
                    elif how == "host":
                        (host_dir / f"{name}.html").write_text(host_page(site, path))
                        page.goto(f"{host.origin}/{name}.html")
                        frame = page.frame_locator("iframe")
                        frame.locator("html[data-ready=true]").wait_for(state="attached", timeout=90_000)
                        page.wait_for_timeout(1500)
                    else:
                        page.goto(site.url(path))
                        wait_ready(page)
                        page.wait_for_timeout(300)
                    file = out / f"{name}-{width}-{scheme}.png"
                    page.screenshot(path=str(file), full_page=True)
                    written.append(file.name)
                    problems = {k: v for k, v in g.problems().items() if how != "static" or k != "failed requests"}
                    assert not problems, (name, problems)
                    ctx.close()
        # the bad-input states (issue 12): error messages, the exercise sandbox, load failures
        with tempfile.TemporaryDirectory() as tmp:
            for name, path, scheme, width, prepare, before in STATES:
                if words and not any(w in name for w in words):
                    continue
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
                page.screenshot(path=str(out / f"{name}.png"), full_page=prepare is None)
                written.append(f"{name}.png")
                ctx.close()
        browser.close()
    site.close()
    host.close()
    print("wrote", len(written), "screenshots:", ", ".join(written))


if __name__ == "__main__":
    main(sys.argv[1:])
