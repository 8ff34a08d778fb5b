"""The companion page (dist/index.html) and the figure index (dist/figures/index.html).

The companion walks through the module's ideas in reading order, in our own words.  Each section shows
its figure pre-rendered for the default state (so the page is complete at once, with JavaScript off, and
boots no Python), with a button that swaps in the live figure: an <iframe> of the figure's standalone page,
which is also how course authors embed figures (sized by the site's embed.js, as on any host page).  "Try this" items are links to the figure page with that
state in its query; with JavaScript on, companion.js opens them in the section's live frame instead.
Every query used here is validated against the figure's Spec by the tests, so a renamed field cannot
silently break a link.  Everything is built with svg.el, which escapes all text.
"""

from __future__ import annotations

from urllib.parse import urlencode

from .svg import Raw, el, join

TITLE = "Where the bytes live: a companion to the local inference engines module"

# (figure id, iframe height in px before the figure reports its own)
# Sections in reading order: heading, paragraphs, figure, try-this items [(label, query dict)].
SECTIONS = [
    {
        "id": "tiers",
        "heading": "Three places a weight can be",
        "text": [
            "A desktop keeps model weights on a drive, in system RAM, or in GPU memory, and a laptop with "
            "Apple silicon has one pool of unified memory instead of the last two. Each step down that list "
            "is roughly an order of magnitude faster to read, and the only road between RAM and VRAM is the "
            "PCIe link.",
            "Generating a token touches every weight once, so the time per token is close to the model's size "
            "divided by the bandwidth of wherever the weights sit. The figure draws the tiers to scale and "
            "prices one decode token on each of them.",
        ],
        "figure": "tiers",
        "try": [
            ("A desktop with an RTX 3060 and DDR4", {"machine": "rtx3060"}),
            ("A MacBook Pro with an M4 Max", {"machine": "m4max"}),
            ("No GPU at all", {"machine": "cpu-ddr5"}),
        ],
    },
    {
        "id": "load",
        "heading": "What happens when the model loads",
        "text": [
            "llama.cpp maps the GGUF file into memory rather than reading it. Layers that will run on the CPU "
            "are fetched from the drive only when first touched, which is why a second launch, with the file "
            "still in the page cache, starts so much faster.",
            "Layers chosen by -ngl are different: they are read and pushed across PCIe into VRAM before "
            "anything runs. The KV cache for the whole context is reserved at the same time, so a long -c "
            "costs memory before you type a word.",
        ],
        "figure": "load",
        "try": [
            ("An 8B model that fits on a 24 GB card", {"scenario": "fits-24gb"}),
            ("The 32B split, on a warm second launch", {"scenario": "split-16gb", "warm": "1"}),
            ("An 8B model on Apple unified memory", {"scenario": "apple-unified"}),
        ],
    },
    {
        "id": "phases",
        "heading": "Prefill and decode use the hardware differently",
        "text": [
            "Reading the prompt (prefill) pushes hundreds of tokens through each weight matrix per read, so the "
            "GPU's arithmetic is the limit. Generating (decode) handles one token per pass and re-reads every "
            "weight for it, so memory bandwidth is the limit.",
            "When some layers live in system RAM, decode spends most of each token waiting on them, while "
            "prefill can still send their weights to the GPU over PCIe and compute there.",
        ],
        "figure": "phases",
        "try": [
            ("Decode when the model fits", {"scenario": "fits", "phase": "decode"}),
            ("Prefill with a partial offload", {"scenario": "partial", "phase": "prefill"}),
        ],
    },
    {
        "id": "roofline",
        "heading": "The roofline: why batching is nearly free",
        "text": [
            "Arithmetic intensity counts the FLOPs done per byte moved. A matmul over a batch of B tokens does "
            "2B FLOPs for every weight it reads, so its intensity grows with the batch until it meets the "
            "device's ridge point, where compute takes over from bandwidth as the limit.",
            "Single-stream decode sits far below the ridge and leaves most of a GPU's arithmetic idle; "
            "serving engines fill that gap by decoding many requests in the same pass.",
        ],
        "figure": "roofline",
        "try": [
            ("Ridge batch of an RTX 3060 at Q4_K_M", {"machine": "rtx3060", "quant": "Q4_K_M", "batch": "24"}),
            ("F16 versus Q4_K_M at batch 1", {"quant": "Q4_K_M", "vs": "F16", "batch": "1"}),
            ("M4 Max against RTX 4090", {"machine": "m4max", "also_rtx4090": "1"}),
        ],
    },
    {
        "id": "calculator",
        "heading": "Does it fit, and how fast?",
        "text": [
            "The calculator places a model the way llama.cpp does: the first -ngl blocks and their share of the "
            "KV cache go to the GPU, the rest stay in RAM, and automatic fitting keeps a safety margin free. "
            "It then estimates decode and prompt speed from the bytes each device has to stream.",
            "Try the module's exercise: Qwen2.5 14B on a 12 GB RTX 3060 at a 32k context, first with an f16 "
            "cache, then q8_0, then a shorter context. Which change buys more layers, and at what cost?",
        ],
        "figure": "calculator",
        "try": [
            (
                "Qwen2.5 14B, RTX 3060, 32k, f16 cache",
                {"model": "qwen2.5-14b", "machine": "rtx3060", "ctx": "32768", "kv": "f16"},
            ),
            ("… with a q8_0 cache", {"model": "qwen2.5-14b", "machine": "rtx3060", "ctx": "32768", "kv": "q8_0"}),
            ("… at 8k instead", {"model": "qwen2.5-14b", "machine": "rtx3060", "ctx": "8192", "kv": "f16"}),
            ("Asking for too many layers", {"model": "qwen2.5-32b", "machine": "rtx4060ti", "ngl": "65"}),
        ],
    },
    {
        "id": "offload-curve",
        "heading": "Each layer moved to the GPU",
        "text": [
            "Decode time is a sum over devices, and the slow device dominates it. Moving the first few layers "
            "to the GPU barely helps, because the rest still stream from RAM; the curve only turns steep when "
            "the last layers leave system memory.",
        ],
        "figure": "offload-curve",
        "try": [
            ("Qwen2.5 32B on an RTX 4060 Ti 16 GB", {"model": "qwen2.5-32b", "machine": "rtx4060ti"}),
            ("Llama 3.1 70B on an RTX 4090", {"model": "llama-3.1-70b", "machine": "rtx4090"}),
        ],
    },
    {
        "id": "decode-curve",
        "heading": "Long conversations get slower",
        "text": [
            "Every decode step also reads the keys and values of every earlier token. At a few thousand tokens "
            "that is small next to the weights; tens of thousands of tokens later it is as large as they are. "
            "A q8_0 cache halves that traffic, and a model with fewer KV heads needs less of it to begin with.",
        ],
        "figure": "decode-curve",
        "try": [
            ("Qwen2.5 7B, with only 4 KV heads", {"model": "qwen2.5-7b", "ctx": "32768"}),
            ("Gemma 2 9B, half of whose layers use a sliding window", {"model": "gemma-2-9b", "ctx": "8192"}),
        ],
    },
    {
        "id": "kv-managers",
        "heading": "Three ways to manage the KV cache",
        "text": [
            "llama.cpp hands each request a slot and reuses only what that slot last held. vLLM cuts the cache "
            "into 16-token blocks, shares full blocks between requests with the same prefix, and evicts or "
            "recomputes when blocks run out. SGLang keeps every cached sequence in a radix tree and shares "
            "prefixes token by token.",
            "The figure runs the same chat workload through simplified versions of all three and colours each "
            "cell of the cache by who owns it and whether it was reused or computed.",
        ],
        "figure": "kv-managers",
        "try": [
            ("The chat workload with the radix tree on lpm", {"policy": "lpm"}),
            ("A workload where the radix tree loses", {"workload": "radix-loses"}),
            ("An agent with shared tool definitions", {"workload": "agent"}),
        ],
    },
    {
        "id": "serving-plan",
        "heading": "Serving engines plan memory up front",
        "text": [
            "vLLM and SGLang claim a fixed fraction of GPU memory at startup, load the weights, measure the "
            "activations of a dummy pass, and turn whatever is left into a pool of KV cache. That pool decides "
            "how many requests can run at once.",
        ],
        "figure": "serving-plan",
        "try": [],
    },
    {
        "id": "engines",
        "heading": "The engines side by side",
        "text": [
            "All three run the same forward pass. They differ in what they optimise for: llama.cpp for running "
            "anywhere with whatever memory is available, vLLM and SGLang for keeping a GPU busy with many "
            "requests. Each parameter below links to the figure where its effect is visible.",
        ],
        "figure": "engines",
        "try": [],
    },
    {
        "id": "users",
        "heading": "How many users can one GPU serve?",
        "text": [
            '"How many users" is a latency question. Every user who joins adds a sequence to the batch, and '
            "while reading the weights dominates a step the batch is almost free: throughput climbs and each "
            "user's time per token barely moves. The number of users an engine serves is the largest load at "
            "which each of them still gets a first token (TTFT) and every token after it (TPOT) within a "
            "target you choose.",
            "The three engines stop at different places for different reasons. llama-server runs as many "
            "requests as it has slots (-np), all sharing one context (-c), so a long context split across "
            "many users runs out of cells first. vLLM and SGLang size their KV pool from the memory the "
            "weights leave and admit requests while it has room, until the arithmetic of a big batch makes "
            "each step slower. The figure simulates each engine's scheduler step by step, names what flattens "
            "its curve, and plays back its KV pool as the requests come and go.",
        ],
        "figure": "users",
        "try": [
            ("Long prompts: the KV pool runs out", {"input_len": "4096", "output_len": "512"}),
            ("llama-server capped at four slots", {"np": "4", "kv_engine": "llama.cpp", "kv_users": "16"}),
        ],
    },
    {
        "id": "validation",
        "heading": "How good are these estimates?",
        "text": [
            "Every number here comes from a roofline model with assumed efficiencies. The validation page puts "
            "its predictions next to published llama-bench measurements, and lets you paste your own.",
        ],
        "figure": "validation",
        "try": [],
    },
]


def figure_src(fig_id: str, query: dict | None = None, prefix: str = "figures/") -> str:
    q = urlencode(query or {})
    return f"{prefix}{fig_id}.html" + (f"?{q}" if q else "")


SNIPPET_HEIGHT = 900  # px: the frame's height until embed.js sizes it to the figure


def embed_snippet(fig_id: str, query: dict | None = None, base: str = "", title: str = "") -> str:
    """What a course page pastes to embed a figure: the iframe and the one line that sizes it (the site's
    embed.js). `base` is the site's absolute URL (ending in "/"); the figure index page fills it in from where it
    is served (companion.js), the same snippet shell.js's Embed button gives."""
    src = base + figure_src(fig_id, query)
    t = (title or fig_id).replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    return (
        f'<iframe src="{src}" title="{t}" width="100%" height="{SNIPPET_HEIGHT}" '
        f'style="border:0;max-width:100%" loading="lazy"></iframe>\n'
        f'<script src="{base}embed.js" async></script>'
    )


def _try_links(sec: dict, frame: str) -> Raw:
    if not sec["try"]:
        return Raw("")
    items = [
        el("li", el("a", label, href=figure_src(sec["figure"], q), class_="try-link", data_frame=frame))
        for label, q in sec["try"]
    ]
    return el(
        "div",
        [el("p", "Try this:", class_="try-head"), el("ul", items, class_="try-list")],
        class_="try",
        role="group",
        aria_label=f"Try this: {sec['heading']}",
    )


def sections(available: set | None = None) -> list[dict]:
    """The sections whose figure exists (all of them when `available` is None)."""
    return [s for s in SECTIONS if available is None or s["figure"] in available]


def companion_body(available: set | None = None, prerendered: dict | None = None) -> Raw:
    """available: the registered figure ids; prerendered: figure id -> its default figure HTML
    (page.prerender(fig)["figure"]: markup we built, inserted as it is)."""
    prerendered = prerendered or {}
    parts = [
        el(
            "header",
            [
                el("h1", TITLE),
                el(
                    "p",
                    (
                        "This page follows the module on local inference engines: where a model's bytes live, how fast the "
                        "hardware moves them, and how llama.cpp, vLLM and SGLang manage memory. Each figure below is shown "
                        "for its default settings; make it live to change them, with Python running in your browser and no "
                        "network. A live figure keeps its settings in its URL. Like the module, these figures time decode and "
                        "prefill with the course profile (the module's η and overhead); the calculator defaults to the "
                        "measured profile, fitted on published llama-bench runs."
                    ),
                    class_="lede",
                ),
                el(
                    "p",
                    [
                        el("a", "Open the fit-and-speed calculator", href="calculator.html", class_="cta"),
                        " · ",
                        el("a", "Do the exercises", href="exercises.html", class_="cta"),
                    ],
                    class_="ctas",
                ),
                el(
                    "nav",
                    el(
                        "ul",
                        [el("li", el("a", s["heading"], href=f"#{s['id']}")) for s in sections(available)]
                        + [
                            el("li", el("a", "All figures and their embed snippets", href="figures/index.html")),
                            el("li", el("a", "Exercises", href="exercises.html")),
                        ],
                    ),
                    aria_label="Contents",
                    class_="toc",
                ),
            ],
            class_="page-head",
        )
    ]
    for s in sections(available):
        fid = s["figure"]
        frame = f"frame-{fid}"
        slot = el(
            "div",
            [
                # trusted markup: page.prerender's output, built with svg.el from our own render functions
                el("div", Raw(str(prerendered.get(fid, ""))), class_="static-figure", data_figure=fid),
                el(
                    "p",
                    [
                        el(
                            "a",
                            "Make this figure live",
                            href=figure_src(fid),
                            class_="go-live",
                            data_frame=frame,
                            data_src=figure_src(fid),
                        ),
                        el("small", " (loads Python in the page: a few seconds the first time)"),
                    ],
                    class_="live-row",
                ),
            ],
            class_="fig-slot",
            id_=frame,
        )
        parts.append(
            el(
                "section",
                [
                    el("h2", s["heading"]),
                    join(el("p", t) for t in s["text"]),
                    _try_links(s, frame),
                    slot,
                    el("p", el("a", "Open this figure on its own page", href=figure_src(fid)), class_="open-link"),
                ],
                id_=s["id"],
                class_="companion-section",
            )
        )
    return el("main", parts, class_="companion", id_="main")


def index_body(figures: list, base: str = "") -> Raw:
    """figures: [(id, title, lede)] -> a list with links and embed snippets."""
    rows = []
    for fid, title, lede in figures:
        snippet = embed_snippet(fid, base=base, title=title)
        rows.append(
            el(
                "li",
                [
                    el("h2", el("a", title, href=f"{fid}.html")),
                    el("p", lede),
                    el("label", f"Embed snippet for {title}", for_=f"snip-{fid}", class_="sr-only"),
                    # companion.js rewrites the snippet with this site's absolute URL (data-figure, data-title)
                    el(
                        "textarea",
                        snippet,
                        id_=f"snip-{fid}",
                        rows=4,
                        readonly=True,
                        class_="snippet",
                        data_snippet_figure=fid,
                        data_snippet_title=title,
                    ),
                    el("button", "Copy snippet", type="button", class_="copy", data_copy_snippet=f"snip-{fid}"),
                ],
                class_="figure-entry",
            )
        )
    return el(
        "main",
        [
            el(
                "header",
                [
                    el("h1", "All figures"),
                    el(
                        "p",
                        (
                            "Every figure is a standalone page whose whole state is in its query string. To embed one "
                            "in a course page, paste its snippet: the frame, with this site's absolute address, and "
                            "one script line (embed.js) that keeps each frame as tall as its figure, growing and "
                            "shrinking. Open a figure, set it up and press Embed to get the snippet for that state."
                        ),
                        class_="lede",
                    ),
                    el(
                        "noscript",
                        el(
                            "p",
                            "With JavaScript off the snippets below show addresses relative to this site: put the "
                            "address this site is served from in front of them.",
                            class_="note",
                        ),
                    ),
                    el("p", el("a", "Back to the companion page", href="../index.html")),
                ],
                class_="page-head",
            ),
            el("ul", rows, class_="figure-index"),
        ],
        class_="figure-index-page",
        id_="main",
    )
