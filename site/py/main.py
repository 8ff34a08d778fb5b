"""Browser glue: the Python side of every live figure (the only Python that touches JavaScript).

site/assets/runtime.js boots Pyodide, puts our wheel on the path and imports this module. From then on every
figure frame the runtime serves talks to `serve(client, request)`: its own page's, and on a host page with
several embedded figures, the other frames' too (they share this one runtime; see runtime.js). A request and its
answer are JSON texts, so a frame served over a channel and the frame served in-process get the same bytes.

One session (`App`) per frame, none of them touching any DOM: the frame sends its state (the query string at
first, then its form's values), the session validates it (Spec.from_query / from_form), computes once and renders
the HTML strings, and answers with what changed; the frame's site/assets/live.js does the one DOM write and
history.replaceState. Any failure before the first render is answered with an error; the frame says why and
keeps its pre-rendered figure.

Requests ({"op": ...}):
  open     {figure, search, base, sigs: {key: sig}, values: {key: value}, patch_key, form}: a frame starts (or
           starts again on a runtime that took over): from the URL's query, or with form, from its form's values
  input    {values: {key: value}, target: the control's name, patch_key}: a control changed
  refresh  the frame's figure could not take a patch: render it in full
  deferred {token}: the slow extras of the last render (deferred_html), if no newer render came since
  svg      one standalone SVG of the current state (Download SVG, for figures with download_svg)
  config   {text}: "Use your own model": a pasted config.json
  gguf     (serve_file) a dropped GGUF file: its header, read in slices
  warm     the frame is live: get ready for its first change (import its figure's module)
  close    the frame is gone
An answer is {"ok": true, ...what changed} or {"error": "..."} (see App.apply for the keys).
"""

import json
import time
import traceback

from enginelab import figures, links  # light: page (state, svg) comes with a frame's first real request

SESSIONS = {}  # client id -> App


def report(e):
    """Bad input (ValueError) is the user's to fix and is shown on the page; anything else is our bug: log it."""
    if not isinstance(e, ValueError):
        traceback.print_exc()


def problem_text(e, doing):
    """A message for an error: a ValueError's own message names the field; anything else says what failed."""
    if isinstance(e, ValueError):
        return str(e)
    return f"Could not {doing}: {type(e).__name__}: {e}"


class App:
    """One frame's figure: its state and what its page shows now (as far as this session has told it)."""

    def __init__(self, fig, sigs, values, patch_key=""):
        from enginelab import page

        self.fig, self.page, self.spec = fig, page, fig.SPEC
        self.state = None
        self.sigs = dict(sigs)  # key -> the sig of the control now in the frame
        self.shown = dict(values)  # key -> the value string the control now holds (as far as we know)
        self.patch_key = patch_key  # data-patch-key of the figure now in the frame ("" if none)
        self.query = None
        self.message_list = None
        self.deferred = 0  # token of the last render whose extras are still to come

    # -- what the frame should write -------------------------------------------------------------------
    def sync_controls(self, state, out, force=False):
        """Rebuild only the controls whose options or bounds changed; put state values into the others."""
        fields, values = {}, {}
        for key, sig in self.page.field_sigs(self.spec, state).items():
            if key not in self.sigs:
                continue  # not a control of this page
            encoded = self.spec.by_key[key].encode(self.spec.shown(state, key))  # a held value as given
            if sig != self.sigs[key]:
                fields[key] = str(self.page.field_html(self.spec, state, key))
                self.sigs[key] = sig
            elif not force and self.shown.get(key) == encoded:
                continue
            else:
                values[key] = encoded  # live.js leaves a field being typed in alone unless forced
            self.shown[key] = encoded
        out["fields"], out["values"] = fields, values

    def show_messages(self, messages, out):
        if messages == self.message_list:
            return
        out["messages"] = str(self.page.messages_html(messages))
        self.message_list = list(messages)

    def apply(self, state, messages, force=False):
        """The answer for a new state: figure (HTML) or patch (JSON for patch.js), summary, fields (controls
        rebuilt: {key: HTML}), values ({key: value}), force, messages (HTML, when they changed), query, python_ms
        and deferred (a token, when the figure has extras to fill in after)."""
        t0 = time.perf_counter()
        out = {"ok": True, "force": force}
        # an animated figure with frame_patch changes only what differs between frames (page.patch_view)
        view = None if force or not self.patch_key else self.page.patch_view(self.fig, state)
        if view is not None and json.loads(view["patch"]).get("key") == self.patch_key:
            out["patch"] = view["patch"]
        else:
            view = self.page.view(self.fig, state, defer=True)  # slow extras come after (deferred)
            out["figure"] = str(view["figure"])
        out["summary"] = str(view["summary"])
        self.sync_controls(state, out, force)
        self.show_messages(messages, out)
        if view["query"] != self.query or force:
            out["query"] = view["query"]
            self.query = view["query"]
        self.state = state
        if hasattr(self.fig, "deferred_html"):
            self.deferred += 1
            out["deferred"] = self.deferred
        out["python_ms"] = (time.perf_counter() - t0) * 1e3  # for `build.py bench`: Python's share of a change
        return out

    def fill_deferred(self, token):
        """{element id: HTML} of the figure's slow extras, if token is still the latest render's."""
        if token != self.deferred:
            return {"ok": True, "deferred_html": None}
        try:
            parts = {k: str(v) for k, v in self.fig.deferred_html(self.state).items()}
        except Exception as e:  # the numbers stay; say what is missing
            traceback.print_exc()
            out = {"ok": True, "deferred_html": None}
            self.show_messages(self.message_list + [f"Could not add the advice: {type(e).__name__}: {e}"], out)
            return out
        return {"ok": True, "deferred_html": parts}

    # -- events ------------------------------------------------------------------------------------------
    def on_input(self, values, target="", force=False):
        self.shown = {k: str(v) for k, v in values.items()}
        try:
            state, messages = self.spec.from_form(self.shown)
            step = getattr(self.fig, "STEP_FIELD", None)
            if step and target != step:
                # another setting changed the trace under an animated figure: re-clamping its frame to the
                # new length is expected, not the reader's mistake, so it is not reported
                label = self.spec.by_key[step].label + ":"
                messages = [m for m in messages if not m.startswith(label)]
            return self.apply(state, messages, force)
        except Exception as e:  # keep the page alive and its last good state; say what went wrong
            report(e)
            out = {"ok": True}
            self.show_messages([problem_text(e, "update the figure")], out)
            return out

    def start(self, search):
        state, messages = self.spec.from_query(search)
        return self.apply(state, messages, force=True)

    def switch(self, **changes):
        """Show the state with these changes (raises if it cannot: the caller answers with the last good one)."""
        state, messages = self.spec.coerce(self.state.replace(**changes))
        return self.apply(state, messages, force=True)


# -- "Use your own model or machine" (the calculator's panel, figures/calculator.py own_model_panel) -------
def own_config(app, text):
    """A pasted config.json: switch to it, or say (own: [text, error]) why not; the last good state stays."""
    from enginelab import custom

    try:
        m = custom.model_from_config_text(text)  # the textarea's maxlength bounds it (CONFIG_MAX_CHARS + 1)
        compact = custom.compact_config(text)
        done = f"Using {m.name}: {m.num_hidden_layers} layers, {m.total_params() / 1e9:.2f}B parameters."
        out = app.switch(model="custom", cfg=compact)
    except Exception as e:  # the message names the field
        report(e)
        out = app.apply(app.state, app.message_list or [], force=True)
        out["own"] = [problem_text(e, "use this config"), True]
        return out
    out["own"] = [done, False]
    return out


async def own_gguf(app, f):
    """A dropped or chosen GGUF file (a JavaScript File): read its header in growing slices, switch to it."""
    from enginelab import custom

    size = int(f.size)
    name = str(f.name)
    n = custom.GGUF_FIRST_SLICE
    previous = custom.dropped_model(), custom.dropped_info()
    try:
        while True:  # read a slice; if the header is longer, read as much as it says it needs
            buf = await f.slice(0, min(n, size)).arrayBuffer()
            kind, value = custom.gguf_slice_plan(buf.to_bytes(), size)
            if kind == "model":
                break
            n = value
        text = f"{custom.describe_gguf_model(value)}; read {min(n, size):,} of {size:,} bytes."
        custom.set_dropped(value, name, size)
        out = app.switch(model="gguf")
    except Exception as e:  # any failure: say which file and why; the last good state stays
        report(e)
        if custom.dropped_model() is not previous[0]:
            custom.restore_dropped(*previous)
        out = app.apply(app.state, app.message_list or [], force=True)
        out["own"] = [f"{name}: {problem_text(e, 'read this file')}", True]
        return out
    out["own"] = [text, False]
    return out


# -- the runtime's entry points ------------------------------------------------------------------------------
class Prerendered:
    """A frame whose URL asks for the default state: it already shows what the first render would draw (build.py
    pre-rendered it with these same render functions), so its session opens without importing, computing or
    drawing anything; the figure's module is imported on the frame's first request (or its warm-up)."""

    def __init__(self, req):
        self.req = req

    def open(self):
        fig = figures.get(str(self.req["figure"]))
        app = App(fig, self.req.get("sigs") or {}, self.req.get("values") or {}, str(self.req.get("patch_key") or ""))
        app.state, app.query, app.message_list = fig.default_state(), "", []
        return app


def _open(client, req):
    links.set_figures_base(str(req.get("base") or ""))  # links to other figure pages (the same for every frame)
    search = str(req.get("search") or "")
    if not req.get("form") and search in ("", "?"):
        figures.FIGURES[str(req["figure"])]  # a KeyError for an unknown figure, as figures.get would raise
        SESSIONS[client] = Prerendered(req)
        return {"ok": True, "python_ms": 0.0}
    fig = figures.get(str(req["figure"]))
    app = App(fig, req.get("sigs") or {}, req.get("values") or {}, str(req.get("patch_key") or ""))
    SESSIONS[client] = app
    if req.get("form"):  # a runtime taking over while the reader changed something: the form is the state
        return app.on_input(app.shown, force=True)
    return app.start(search)


def handle(client, req):
    op = req.get("op")
    if op == "open":
        return _open(client, req)
    if op == "close":
        SESSIONS.pop(client, None)
        return {"ok": True}
    app = SESSIONS.get(client)
    if app is None:
        return {"error": "no-session"}  # a runtime that took over from another: the frame opens again
    if isinstance(app, Prerendered):
        app = SESSIONS[client] = app.open()
    if op == "warm":  # the frame is live and idle: import its figure's module now, not on its first change
        return {"ok": True}
    if op == "input":
        app.patch_key = str(req.get("patch_key") or "")
        return app.on_input(req.get("values") or {}, str(req.get("target") or ""))
    if op == "refresh":
        app.patch_key = ""
        return app.apply(app.state, app.message_list or [], force=True)
    if op == "deferred":
        return app.fill_deferred(req.get("token"))
    if op == "svg":
        fn = getattr(app.fig, "download_svg", None)
        return {"ok": True, "svg": fn(app.fig.compute(app.state)) if fn else None}
    if op == "config":
        return own_config(app, str(req.get("text") or ""))
    return {"error": f"unknown request {op!r}"}


def serve(client, text):
    """One request (JSON text) from the frame `client` -> the answer (JSON text). Never raises."""
    try:
        out = handle(str(client), json.loads(str(text)))
    except Exception as e:
        traceback.print_exc()
        out = {"error": f"{type(e).__name__}: {e}"}
    return json.dumps(out, separators=(",", ":"))


async def serve_file(client, f):
    """A GGUF file for the frame `client`'s "Use your own model" panel -> the answer (JSON text)."""
    app = SESSIONS.get(str(client))
    if app is None:
        return json.dumps({"error": "no-session"})
    try:
        out = await own_gguf(app, f)
    except Exception as e:
        traceback.print_exc()
        out = {"error": f"{type(e).__name__}: {e}"}
    return json.dumps(out, separators=(",", ":"))


def ready():
    """Called once the first frame is drawn: boot-time objects never die, so keep them out of every later
    collection's work."""
    import gc

    gc.freeze()
