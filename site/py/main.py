"""Browser glue: the only Python that touches the DOM (through PyScript).

On load: location.search -> Spec.from_query -> compute -> render -> one write into #figure ->
history.replaceState with only the non-default keys -> <html data-ready="true">.
On every input: the form's values -> Spec.from_form -> the same path.
Any failure before the first render sets data-ready="error" and says why; the pre-rendered figure stays.
"""

import os
import sys
import time
import traceback

from pyodide.ffi import create_once_callable, create_proxy
from pyscript import document, window

html = document.documentElement


def status(text, step=None):
    window.enginelab.setStatus(text, step) if hasattr(window, "enginelab") else None


def report(e):
    """Bad input (ValueError) is the user's to fix and is shown on the page; anything else is our bug: log it."""
    if not isinstance(e, ValueError):
        traceback.print_exc()


def problem_text(e, doing):
    """A message for an error: a ValueError's own message names the field; anything else says what failed."""
    if isinstance(e, ValueError):
        return str(e)
    return f"Could not {doing}: {type(e).__name__}: {e}"


def fail(reason):
    if hasattr(window, "enginelab"):
        window.enginelab.setError(reason)
    else:
        html.dataset.ready = "error"


class App:
    def __init__(self, fig, page):
        self.fig, self.page, self.spec = fig, page, fig.SPEC
        self.form = document.getElementById("controls")
        self.root = document.getElementById("figure")
        self.summary = document.getElementById("summary")
        self.messages = document.getElementById("messages")
        self.state = None
        self.sigs = {}  # key -> the sig of the control now in the DOM
        self.controls = {}  # key -> its <select>/<input> element
        self.shown = {}  # key -> the value string the control now holds (as far as we know)
        self.query = None
        self.message_list = None
        self._find_controls()

    def _find_controls(self, only=None):
        for f in self.spec.fields:
            if only is not None and f.key != only:
                continue
            box = self.form.querySelector(f'[data-field="{f.key}"]')
            if box is None:
                continue
            self.sigs[f.key] = str(box.dataset.sig)
            self.controls[f.key] = box.querySelector("select, input, textarea")

    # -- reading the form --------------------------------------------------------------------------------
    def form_values(self):
        values = {}
        for key, el in self.controls.items():
            values[key] = ("1" if el.checked else "0") if el.type == "checkbox" else str(el.value)
        self.shown = dict(values)
        return values

    # -- writing the page --------------------------------------------------------------------------------
    def sync_controls(self, state, force=False):
        """Rebuild only the controls whose options or bounds changed; put state values into the others."""
        active = document.activeElement
        active_id = str(active.id) if active is not None else ""
        for key, sig in self.page.field_sigs(self.spec, state).items():
            if key not in self.controls:
                continue
            field = self.spec.by_key[key]
            shown = self.spec.shown(state, key)  # a held value shows as the reader gave it (state.Spec.shown)
            encoded = field.encode(shown)
            if sig != self.sigs.get(key):
                box = self.form.querySelector(f'[data-field="{key}"]')
                box.outerHTML = self.page.field_html(self.spec, state, key)
                self._find_controls(only=key)
                self.shown[key] = encoded
                if active_id == self.page.field_id(key):
                    self.controls[key].focus()
                continue
            if not force and self.shown.get(key) == encoded:
                continue
            ctl = self.controls[key]
            if ctl.type == "checkbox":
                ctl.checked = bool(shown)
            elif ctl.id == active_id and ctl.type in ("number", "text", "textarea") and not force:
                continue  # never rewrite what the user is typing; a clamp shows as a message instead
            else:
                ctl.value = encoded
            self.shown[key] = encoded

    def show_messages(self, messages):
        if messages == self.message_list:
            return
        self.messages.innerHTML = self.page.messages_html(messages)
        self.messages.hidden = not messages
        self.message_list = list(messages)

    def apply(self, state, messages, force=False):
        t0 = time.perf_counter()
        # an animated figure with frame_patch changes only what differs between frames (page.patch_view)
        view = None if force else self.page.patch_view(self.fig, state)
        t1 = time.perf_counter()
        if view is None or not window.enginelab.applyPatch(view["patch"]):
            view = self.page.view(self.fig, state, defer=True)  # slow extras come after (after_render)
            t1 = time.perf_counter()
            self.root.innerHTML = view["figure"]  # the one write for the figure
        self.root.classList.remove("stale")  # shell.js's mark for a shared link's state before Python ran
        self.summary.textContent = view["summary"]
        self.sync_controls(state, force)
        self.show_messages(messages)
        if view["query"] != self.query or force:
            loc = window.location
            window.history.replaceState(None, "", loc.pathname + view["query"] + loc.hash)
            self.query = view["query"]
        self.state = state
        # where the time goes, for `build.py bench`: Python (compute + render) / the rest (DOM, controls)
        html.dataset.renderMs = f"{(t1 - t0) * 1e3:.2f}/{(time.perf_counter() - t1) * 1e3:.2f}"
        self.after_render(state)

    def after_render(self, state):
        """Fill in what the figure defers (deferred_html: {element id: html}) once the numbers are on screen;
        a newer render cancels an older fill."""
        fill = getattr(self.fig, "deferred_html", None)
        if fill is None:
            return
        token = object()
        self._deferred = token

        def run(*_):
            if getattr(self, "_deferred", None) is not token:
                return
            try:
                for el_id, inner in fill(state).items():
                    node = document.getElementById(el_id)
                    if node:  # JS null is falsy (and not None in Pyodide)
                        node.innerHTML = inner
            except Exception as e:  # the numbers stay; say what is missing
                traceback.print_exc()
                self.show_messages(self.message_list + [f"Could not add the advice: {type(e).__name__}: {e}"])

        window.setTimeout(create_once_callable(run), 0)

    # -- events ------------------------------------------------------------------------------------------
    def on_input(self, event):
        try:
            state, messages = self.spec.from_form(self.form_values())
            step = getattr(self.fig, "STEP_FIELD", None)
            if step and getattr(event.target, "name", "") != step:
                # another setting changed the trace under an animated figure: re-clamping its frame to the
                # new length is expected, not the reader's mistake, so it is not reported
                label = self.spec.by_key[step].label + ":"
                messages = [m for m in messages if not m.startswith(label)]
            self.apply(state, messages)
        except Exception as e:  # keep the page alive and its last good state; say what went wrong
            report(e)
            self.show_messages([problem_text(e, "update the figure")])

    def start(self):
        state, messages = self.spec.from_query(str(window.location.search))
        self.apply(state, messages, force=True)
        self._proxy = create_proxy(self.on_input)
        self.form.addEventListener("input", self._proxy)
        document.getElementById("controls-set").disabled = False


# -- "Use your own model or machine" (the calculator's panel, figures/calculator.py own_model_panel) -------
def setup_own_model(app):
    ids = ("own-model", "own-status", "gguf-file", "gguf-drop", "cfg-text", "cfg-use")
    nodes = {i: document.getElementById(i) for i in ids}
    if not all(nodes.values()):
        return  # this page has no such panel (a missing element is JS null: falsy, and not None)
    panel = nodes["own-model"]
    from enginelab import custom

    status_el = nodes["own-status"]

    def say(text, error=False):
        status_el.textContent = text  # plain text: a file name or a JSON error never becomes markup
        status_el.classList.toggle("own-error", error)

    def switch(**changes):
        """Show the state with these changes; if that fails, put the last good state back and raise."""
        good = app.state
        try:
            state, messages = app.spec.coerce(app.state.replace(**changes))
            app.apply(state, messages, force=True)
        except Exception:
            app.apply(good, app.message_list or [], force=True)
            raise

    async def load_file(f):
        size = int(f.size)
        name = str(f.name)
        say(f"Reading the header of {name}…")
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
            switch(model="gguf")
        except Exception as e:  # any failure: say which file and why; the last good state stays
            report(e)
            if custom.dropped_model() is not previous[0]:
                custom.restore_dropped(*previous)
            say(f"{name}: {problem_text(e, 'read this file')}", True)
            return
        say(text)

    async def on_file(event):
        files = event.target.files
        if files.length:
            await load_file(files.item(0))

    def on_dragover(event):
        event.preventDefault()

    async def on_drop(event):
        event.preventDefault()
        files = event.dataTransfer.files
        if files.length:
            await load_file(files.item(0))

    def on_cfg(event):
        try:
            text = str(nodes["cfg-text"].value)  # the textarea's maxlength bounds it (CONFIG_MAX_CHARS + 1)
            m = custom.model_from_config_text(text)
            compact = custom.compact_config(text)
            done = f"Using {m.name}: {m.num_hidden_layers} layers, {m.total_params() / 1e9:.2f}B parameters."
            switch(model="custom", cfg=compact)
        except Exception as e:  # the message names the field; the last good state stays
            report(e)
            say(problem_text(e, "use this config"), True)
            return
        say(done)

    def stop(event):
        event.stopPropagation()  # typing in the panel is not a change of the figure's settings

    app._own_proxies = [create_proxy(f) for f in (stop, on_file, on_dragover, on_drop, on_cfg)]
    stop_p, file_p, over_p, drop_p, cfg_p = app._own_proxies
    panel.addEventListener("input", stop_p)
    panel.addEventListener("change", stop_p)
    nodes["gguf-file"].addEventListener("change", file_p)
    nodes["gguf-drop"].addEventListener("dragover", over_p)
    nodes["gguf-drop"].addEventListener("drop", drop_p)
    nodes["cfg-use"].addEventListener("click", cfg_p)


# -- A model from Hugging Face or a link (the calculator's panel; enginelab.remote does the reading) -----------
# Nothing is fetched until the reader presses Read or opens a link carrying hf= / url=. The requests go out with
# no credentials; each is aborted after remote.TIMEOUT_S (window.enginelab_remote_timeout_ms overrides it, for
# tests); a body is read only up to the bytes asked for, then the stream is cancelled, so a server that ignores
# the Range header never sends the weights.
def setup_remote_model(app):
    ids = ("own-model", "remote-input", "remote-read", "remote-files", "remote-file", "remote-status")
    nodes = {i: document.getElementById(i) for i in ids}
    if not all(nodes.values()):
        return
    import asyncio

    import js
    from pyodide.ffi import to_js

    from enginelab import remote
    from enginelab.svg import el

    status_el, box = nodes["remote-status"], nodes["remote-files"]
    job = {"token": None}

    def say(text, error=False, progress=None):
        status_el.textContent = text  # plain text: a repo or file name never becomes markup
        status_el.classList.toggle("remote-error", error)
        if progress is not None:
            status_el.dataset.readout = "remote_bytes_read"
            status_el.dataset.value = str(progress.bytes_read)
            status_el.dataset.requests = str(progress.requests)
            status_el.dataset.fileSize = str(progress.file_size or "")

    def opts(d):
        return to_js(d, dict_converter=js.Object.fromEntries)

    async def classify(url, ctrl):
        """Why a request got no answer: the timeout fired, the browser is offline, the host answered but CORS
        hid the answer (a no-cors HEAD gets through), or the host could not be reached."""
        if ctrl.signal.aborted:
            return "timeout"
        if not window.navigator.onLine:
            return "offline"
        try:
            await window.fetch(url, opts({"method": "HEAD", "mode": "no-cors", "credentials": "omit"}))
            return "cors"
        except Exception:
            return "network"

    async def read_body(resp, limit):
        if resp.body is None or not resp.body:
            return b""
        reader = resp.body.getReader()
        chunks, n = [], 0
        while n < limit:
            r = await reader.read()
            if r.done:
                break
            chunk = r.value.to_bytes()
            chunks.append(chunk)
            n += len(chunk)
        if n >= limit:
            try:
                # one more read tells a finished body (nothing to stop) from a longer one, which is cancelled:
                # the rest of the file stays on the server
                if not (await reader.read()).done:
                    await reader.cancel()
            except Exception:
                pass
        return b"".join(chunks)[:limit]

    def total_size(resp, status, start):
        cr = resp.headers.get("Content-Range")
        if cr and "/" in str(cr):
            tail = str(cr).rsplit("/", 1)[1].strip()
            return int(tail) if tail.isdigit() else None
        cl = resp.headers.get("Content-Length")
        if status == 200 and start is None and cl and str(cl).isdigit():
            return int(str(cl))
        return None

    async def fetch(url, start, end, limit):
        timeout_ms = int(getattr(window, "enginelab_remote_timeout_ms", None) or remote.TIMEOUT_S * 1000)
        ctrl = js.AbortController.new()
        timer = window.setTimeout(create_once_callable(lambda *_: ctrl.abort()), timeout_ms)
        headers = {"Range": f"bytes={start}-{end}"} if start is not None else {}
        init = opts(
            {"headers": headers, "signal": ctrl.signal, "credentials": "omit", "mode": "cors", "cache": "no-store"}
        )
        try:
            try:
                resp = await window.fetch(url, init)
            except Exception:
                raise remote.fetch_error(await classify(url, ctrl), url) from None
            code = int(resp.status)
            keep = (end + 1) if (code == 200 and start is not None) else limit
            try:
                body = await read_body(resp, keep) if code < 400 else b""
            except Exception:
                raise remote.fetch_error("timeout" if ctrl.signal.aborted else "network", url) from None
            return remote.Response(code, body, total_size(resp, code, start))
        finally:
            window.clearTimeout(timer)

    def fill_files(rm):
        choices = remote.files_options(rm)
        box.hidden = not choices
        nodes["remote-file"].innerHTML = "".join(
            str(el("option", label, value=value, selected=(value == rm.target.file))) for value, label in choices
        )

    def switch(**changes):
        good = app.state
        try:
            state, messages = app.spec.coerce(app.state.replace(**changes))
            app.apply(state, messages, force=True)
        except Exception:
            app.apply(good, app.message_list or [], force=True)
            raise

    async def load(target, initial=False):
        token = object()
        job["token"] = token
        remote.set_status(target, f"Reading {target.describe()}…")

        def progress(p):
            if job["token"] is token:
                say(p.text(), progress=p)

        say(f"Asking for {target.describe()}…")
        try:
            rm = await remote.read(target, fetch, progress)
        except Exception as e:  # any failure: say what happened; the last good state stays
            if job["token"] is not token:
                return
            report(e)
            text = problem_text(e, "read the remote model")
            remote.set_status(target, text, error=True)
            say(text, error=True)
            if initial:  # a shared link's model: the figure says it too (its numbers need the model)
                app.apply(app.state, app.message_list or [], force=True)
            return
        if job["token"] is not token:
            return
        remote.remember(rm, asked=target)
        fill_files(rm)
        try:
            switch(model="remote", hf=rm.target.hf, file=rm.target.file, url=rm.target.url)
        except Exception as e:
            report(e)
            say(problem_text(e, "show the remote model"), error=True)
            return
        say(rm.summary(), progress=rm.progress)

    def start(target, initial=False):
        asyncio.ensure_future(load(target, initial))

    def on_read(event=None):
        try:
            target = remote.parse_input(str(nodes["remote-input"].value))
        except Exception as e:
            report(e)
            say(problem_text(e, "read this"), error=True)
            return
        start(target)

    def on_key(event):
        if event.key == "Enter":
            event.preventDefault()  # not the form's submit
            on_read()

    def on_file(event):
        value = str(nodes["remote-file"].value)
        hf = app.state.hf if app.state.model == "remote" else ""
        if hf and value:
            start(remote.Target(hf=hf, file=value))

    app._remote_proxies = [create_proxy(f) for f in (on_read, on_key, on_file)]
    read_p, key_p, file_p = app._remote_proxies
    nodes["remote-read"].addEventListener("click", read_p)
    nodes["remote-input"].addEventListener("keydown", key_p)
    nodes["remote-file"].addEventListener("change", file_p)

    if app.state.model == "remote":  # a shared link: read what it names, as the reader asked before
        nodes["own-model"].open = True
        nodes["remote-input"].value = app.state.hf or app.state.url
        try:
            target = remote.target_from_values(app.state.as_dict())
        except Exception as e:
            report(e)
            say(problem_text(e, "read this link"), error=True)
            return
        start(target, initial=True)


def main():
    status("Python is running; importing enginelab…", 4)
    sys.path.insert(0, os.path.abspath("lib"))  # where PyScript unpacked our wheel (see the page's config)
    from enginelab import figures, links, page

    links.set_figures_base(str(html.getAttribute("data-figures-base") or ""))  # links to other figure pages
    fig = figures.get(str(html.dataset.figure))
    status("Drawing the figure…", 5)
    app = App(fig, page)
    app.start()
    setup_own_model(app)
    setup_remote_model(app)
    window.enginelab_app = create_proxy(app)  # for debugging in the console
    if hasattr(fig, "download_svg"):  # one standalone SVG of the current state, for Download SVG (shell.js)
        window.enginelab_download_svg = create_proxy(lambda *_: fig.download_svg(fig.compute(app.state)))
    import gc

    gc.freeze()  # boot-time objects never die: keep them out of every later collection's work
    html.dataset.ready = "true"
    document.getElementById("status").hidden = True


try:
    main()
except Exception as e:
    traceback.print_exc()
    fail(f"{type(e).__name__}: {e}")
