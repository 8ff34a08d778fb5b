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
  input    {values: {key: value}, target: the control's name, patch_key, patch_base}: a control changed (the
           figure's data-patch-key and data-patch-base: which patch, if any, the figure in the frame can take)
  refresh  the frame's figure could not take a patch, or its width crossed the layouts' breakpoint: render it in
           full
Any request may carry layout ("wide" or "narrow"): the chart layout the frame shows, the only one drawn for it
(enginelab.chart.LAYOUT; without it both are drawn, as in the pages built ahead).
  deferred {token}: the slow extras of the last render (deferred_html), if no newer render came since
  svg      one standalone SVG of the current state (Download SVG, for figures with download_svg)
  config   {text}: "Use your own model": a pasted config.json
  gguf     (serve_file) a dropped GGUF file: its header, read in slices
  remote   (serve_async) {input} or {file} or {initial}: a model from Hugging Face or a link, read over HTTP;
           progress goes to the frame as notes ({"remote": ...}) while it is read
  warm     the frame is live: get ready for its first change (import its figure's module, rehearse a change),
           one short step per request; answers {"more": true} while steps remain
  idle     the reader paused after a change: fill, for IDLE_BUDGET_S at most, the caches of what they may pick
           next (the figure's warm_steps(state)); answers {"more": true} while steps remain
  close    the frame is gone
An answer is {"ok": true, ...what changed} or {"error": "..."} (see App.apply for the keys).
"""

import json
import time
import traceback

from enginelab import chart, figures, links  # light: page (state, svg) comes with a frame's first real request

SESSIONS = {}  # client id -> App
IDLE_BUDGET_S = 0.003  # an "idle" request runs steps until this much time has passed (each step a few ms at most)


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
        self.patch_base = ""  # its data-patch-base: the skeleton a base patch fits ("" if none)
        self.layout = None  # the chart layout the frame shows ("wide" or "narrow"; None: draw both)
        self.query = None
        self.message_list = None
        self.deferred = 0  # token of the last render whose extras are still to come
        self.remote_job = None  # the latest remote read (an older one's answer is dropped)
        self.idle_steps = None  # the warm-up steps left for the state shown (None: not started for it)
        self.first_warm = None  # the steps left of the warm-up after the first render (None: not started)

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
        and deferred (a token, when what it sends has placeholders (data-deferred) to fill in after)."""
        with chart.layout_for(self.layout):  # only the layout the frame shows is drawn
            return self._apply(state, messages, force)

    def _apply(self, state, messages, force):
        t0 = time.perf_counter()
        out = {"ok": True, "force": force}
        # an animated figure with frame_patch changes only what differs between frames (page.patch_view)
        # (or, for a new simulation drawn on the same skeleton, a base patch: every part but the skeleton)
        view = (
            None
            if force or not self.patch_key
            else self.page.patch_view(self.fig, state, self.patch_key, self.patch_base, defer=True)
        )
        if view is not None:
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
        self.idle_steps = None  # a new state: what the reader may pick next is new too
        if hasattr(self.fig, "deferred_html") and "data-deferred" in (out.get("figure") or out.get("patch") or ""):
            self.deferred += 1  # (placeholders to fill: a frame patch between two frames leaves none)
            out["deferred"] = self.deferred
        out["python_ms"] = (time.perf_counter() - t0) * 1e3  # for `build.py bench`: Python's share of a change
        return out

    def fill_deferred(self, token):
        """{element id: HTML} of the figure's slow extras, if token is still the latest render's."""
        if token != self.deferred:
            return {"ok": True, "deferred_html": None}
        try:
            with chart.layout_for(self.layout):
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

    def warm_up(self):
        """One step of the frame's warm-up, run while it is idle after its first render (live.js sends "warm"
        again while this answers True): the reader's first change then runs on warm code. In Pyodide a code
        path's first run costs several times a later one: WebAssembly functions not called yet are compiled on the
        spot, on the page's thread, and the caches a new model or machine fills are empty (a cold first change
        took 25-60 ms against 5-10 ms). The steps, each a short task of its own:
          1. the reader's next change rehearsed: the first setting changed to its next option, as a request
             through serve on a scratch copy of this session (the same JSON in and out, validation, render and
             controls), not on a step-through figure, whose changes are frame patches on the same computation;
          2. the rehearsal's deferred extras (the advice that follows each change);
          3. the figure's default state computed (a reader who tries another setting and comes back finds it
             warm; at the default, the frame shows it pre-rendered and nothing has computed it).
        The first step also grows the runtime's WebAssembly heap ahead of need (reserve_heap).
        The session's own state and what the frame shows are left as they are."""
        if self.first_warm is None:
            self.first_warm = self._first_warm_steps()
            try:
                reserve_heap()  # (the first frame's grows it; the others find it grown)
            except Exception:
                traceback.print_exc()
        try:
            next(self.first_warm)
            return True
        except StopIteration:
            return False
        except Exception:  # a warm-up is never the reader's concern
            traceback.print_exc()
            self.first_warm = iter(())
            return False

    def _first_warm_steps(self):
        step_figure = getattr(self.fig, "STEP_FIELD", None)
        nxt = None if step_figure or self.state is None else self._neighbour()
        if nxt is not None:
            scratch = App(self.fig, self.sigs, self.shown, self.patch_key)
            scratch.state, scratch.query, scratch.layout = self.state, self.query, self.layout
            scratch.message_list = list(self.message_list or [])
            values = {  # the frame's controls, as its form would send them
                key: self.spec.by_key[key].encode(self.spec.shown(nxt, key)) if key in self.spec.by_key else value
                for key, value in self.shown.items()
            }
            req = {"op": "input", "values": values, "target": "", "patch_key": self.patch_key, "layout": self.layout}
            out = json.loads(_serve_scratch(scratch, req))
            if out.get("deferred"):
                yield
                _serve_scratch(scratch, {"op": "deferred", "token": out["deferred"]})
            yield
        default = self.fig.default_state()
        if not step_figure or default != self.state:
            with chart.layout_for(self.layout):
                self.page.view(self.fig, default, defer=True)

    def idle_step(self):
        """Run the figure's warm_steps(state) (what the reader may pick next from the state shown) for
        IDLE_BUDGET_S, and say whether steps remain. Each step fills caches that a computation would fill (and that
        bound themselves); nothing the frame shows changes."""
        if self.idle_steps is None:
            make = getattr(self.fig, "warm_steps", None)
            self.idle_steps = iter(make(self.state) if make is not None and self.state is not None else ())
        t0 = time.perf_counter()
        for step in self.idle_steps:
            try:
                step()
            except Exception:  # a warm-up is never the reader's concern
                traceback.print_exc()
            if time.perf_counter() - t0 >= IDLE_BUDGET_S:
                return {"ok": True, "more": True}
        return {"ok": True, "more": False}

    def _neighbour(self):
        from enginelab import state as st

        partial = self.state.as_dict()
        for f in self.spec.fields:
            if isinstance(f, st.Choice) and f.visible_for(partial):
                values = [v for v, _label in f.options_for(partial)]
                here = str(getattr(self.state, f.key))
                if len(values) > 1 and here in values:
                    nxt = values[(values.index(here) + 1) % len(values)]
                    return self.spec.coerce(self.state.replace(**{f.key: nxt}))[0]
        return None

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


# -- A model from Hugging Face or a link (the calculator's panel; enginelab.remote does the reading) -----------
# Nothing is fetched until the reader presses Read or opens a link carrying hf= / url=. The requests go out from
# the runtime's page (a frame's own, or the leader's: the same origin) with no credentials. A watchdog stops a
# request whose answer does not begin within remote.TIMEOUT_S, whose body stalls for remote.STALL_S, or whose body
# comes slower than remote.MIN_RATE once remote.RATE_GRACE_S have passed (window.enginelab_remote_timeout_ms sets
# all three times, for tests). A body is read only up to the bytes asked for, then the stream is cancelled, so a
# server that ignores the Range header, or announces a huge Content-Length, never sends the weights.
def _js_obj(d):
    import js
    from pyodide.ffi import to_js

    return to_js(d, dict_converter=js.Object.fromEntries)


async def _classify(url, probe_ms):
    """Why a request got no answer (the browser says only "Failed to fetch"): the browser is offline, the host
    redirected it somewhere this page may not read (a manual-redirect probe sees the redirect), the host answered
    but CORS hid the answer (a no-cors HEAD gets through), or the host could not be reached."""
    import js

    if not js.navigator.onLine:
        return "offline"
    probes = (
        ({"redirect": "manual", "mode": "cors"}, lambda r: str(r.type) == "opaqueredirect", "redirect"),
        ({"method": "HEAD", "mode": "no-cors"}, lambda r: True, "cors"),
    )
    for init, hit, kind in probes:
        try:
            signal = js.AbortSignal.timeout(probe_ms)
            r = await js.fetch(url, _js_obj({**init, "credentials": "omit", "cache": "no-store", "signal": signal}))
            if hit(r):
                return kind
        except Exception:
            pass
    return "network"


def _header_int(resp, name):
    v = resp.headers.get(name)
    v = str(v).strip() if v is not None else ""
    return int(v) if v.isdigit() else None


def _content_range(resp):
    """(first byte, total) of a Content-Range header ("bytes a-b/total", "bytes */total"); None where absent."""
    cr = resp.headers.get("Content-Range")
    if not cr:
        return None, None
    cr = str(cr).strip()
    unit, _, rest = cr.partition(" ")
    span, _, total = rest.partition("/")
    first = span.split("-", 1)[0].strip()
    return (int(first) if first.isdigit() else None), (int(total) if total.strip().isdigit() else None)


async def _fetch(url, start, end, limit):
    """enginelab.remote's fetch, by the browser's: (url, first byte or None, last byte, bytes at most) ->
    remote.Response, or a RemoteError saying why there was no complete answer."""
    import js
    from pyodide.ffi import create_proxy

    from enginelab import remote

    override = getattr(js, "enginelab_remote_timeout_ms", None)
    answer_s = float(override) / 1000 if override else remote.TIMEOUT_S
    stall_s = float(override) / 1000 if override else remote.STALL_S
    grace_s = float(override) / 1000 if override else remote.RATE_GRACE_S
    ctrl = js.AbortController.new()
    w = {"why": None, "t0": time.monotonic(), "body_t0": None, "last": time.monotonic(), "n": 0, "want": limit}

    def watch(*_):  # every tick: stop an answer that is late, a body that stalls or drips
        now = time.monotonic()
        if w["why"] is not None:
            return
        if w["body_t0"] is None:
            if now - w["t0"] > answer_s:
                w["why"] = "timeout"
        elif now - w["last"] > stall_s:
            w["why"] = "stall"
        elif now - w["body_t0"] >= grace_s and w["n"] / (now - w["body_t0"]) < remote.MIN_RATE:
            w["why"] = "slow"
        if w["why"] is not None:
            ctrl.abort()

    tick = create_proxy(watch)
    timer = js.setInterval(tick, max(50, min(250, int(min(answer_s, stall_s, grace_s) * 250))))
    headers = {"Range": f"bytes={start}-{end}"} if start is not None else {}
    init = _js_obj(
        {"headers": headers, "signal": ctrl.signal, "credentials": "omit", "mode": "cors", "cache": "no-store"}
    )

    def failed(kind):
        rate = w["n"] / max(time.monotonic() - (w["body_t0"] or w["t0"]), 1e-3)
        seconds = {"timeout": answer_s, "stall": stall_s}.get(kind)
        return remote.fetch_error(
            kind, url, got=w["n"], expected=w.get("length"), rate=rate, need=w["want"], seconds=seconds
        )

    try:
        try:
            resp = await js.fetch(url, init)
        except Exception:
            if w["why"] == "timeout":
                raise failed("timeout") from None
            raise failed(await _classify(url, int(answer_s * 1000))) from None
        code = int(resp.status)
        w["body_t0"] = w["last"] = time.monotonic()
        w["length"] = _header_int(resp, "Content-Length")
        first, total = _content_range(resp)
        if code == 200 and total is None:
            total = w["length"]  # a whole answer: its length is the file's size
        # a 200 to a range request sends the file from byte 0: read it up to byte `end`
        keep = (end + 1) if (code == 200 and start is not None) else limit
        w["want"] = keep
        body = b""
        # a 206 that is not the range asked for (remote._check_range), or a whole answer announced longer than
        # the most it may be (remote's JSON reads), is refused without reading its body
        span = end - start + 1 if start is not None else 0
        wrong = (code == 206 and start is not None and (first not in (None, start) or (w["length"] or 0) > span)) or (
            start is None and (w["length"] or 0) > limit
        )
        if wrong and resp.body is not None and resp.body:
            try:
                await resp.body.cancel()  # the connection closes: nothing more comes from it
            except Exception:
                pass
        elif code < 400 and resp.body is not None and resp.body:
            try:
                body = await _read_body(resp, keep, w)
            except Exception:
                raise failed(w["why"] or "truncated") from None
        return remote.Response(
            code, body, total, start=first, length=w["length"], url=str(resp.url or "") if resp.redirected else ""
        )
    finally:
        js.clearInterval(timer)
        tick.destroy()


async def _read_body(resp, limit, w):
    """At most `limit` bytes of the body; w["n"] and w["last"] follow the bytes as they come (for the watchdog)."""
    reader = resp.body.getReader()
    chunks = []
    while w["n"] < limit:
        r = await reader.read()
        if r.done:
            break
        chunk = r.value.to_bytes()
        chunks.append(chunk)
        w["n"] += len(chunk)
        w["last"] = time.monotonic()
    if w["n"] >= limit:
        try:
            # one more read tells a finished body (nothing to stop) from a longer one, which is cancelled: the
            # rest of the file stays on the server
            if not (await reader.read()).done:
                await reader.cancel()
        except Exception:
            pass
    return b"".join(chunks)[:limit]


def _remote_line(text, error=False, progress=None, rm=None):
    """What the panel shows: {"text", "error", "bytes_read", "requests", "file_size"}, and with a model read
    "files" ([[value, label], ...]: the repo's GGUF files) and "file" (the one read)."""
    out = {"text": text, "error": bool(error)}
    if progress is not None:
        out.update(bytes_read=progress.bytes_read, requests=progress.requests, file_size=progress.file_size or 0)
    if rm is not None:
        from enginelab import remote

        out["files"] = [list(c) for c in remote.files_options(rm)]
        out["file"] = rm.target.file or ""
    return out


async def own_remote(app, req, note):
    """Read a remote model (req: {input} typed in the panel, {file} picked from its list, or {initial}: the
    state's own hf / file / url, a shared link) and switch to it; notes carry the progress. The last good state
    stays on any failure, and a newer read of the same frame wins over an older one."""
    from enginelab import remote

    token = object()
    app.remote_job = token
    initial = bool(req.get("initial"))
    try:
        if initial:
            target = remote.target_from_values(app.state.as_dict())
        elif req.get("file"):
            hf = app.state.hf if app.state.model == "remote" else ""
            if not hf:
                return {"ok": True, "remote": _remote_line("Pick a repo first.", error=True)}
            target = remote.Target(hf=hf, file=str(req["file"]))
        else:
            target = remote.parse_input(str(req.get("input") or ""))
    except Exception as e:
        report(e)
        return {"ok": True, "remote": _remote_line(problem_text(e, "read this"), error=True)}
    remote.set_status(target, f"Reading {target.describe()}…")
    note({"remote": _remote_line(f"Asking for {target.describe()}…")})

    seen = [remote.Progress()]  # this read's counts, for the error line too

    def progress(p):
        seen[0] = p
        if app.remote_job is token:
            note({"remote": _remote_line(p.text(), progress=p)})

    try:
        rm = await remote.read(target, _fetch, progress)
    except Exception as e:  # any failure: say what happened; the last good state stays
        if app.remote_job is not token:
            return {"ok": True}
        report(e)
        text = problem_text(e, "read the remote model")
        remote.set_status(target, text, error=True)
        out = app.apply(app.state, app.message_list or [], force=True) if initial else {"ok": True}
        out["remote"] = _remote_line(text, error=True, progress=seen[0])  # a shared link's: the figure says it too
        return out
    if app.remote_job is not token:
        return {"ok": True}
    remote.remember(rm, asked=target)
    try:
        out = app.switch(model="remote", hf=rm.target.hf, file=rm.target.file, url=rm.target.url)
    except Exception as e:
        report(e)
        return {"ok": True, "remote": _remote_line(problem_text(e, "show the remote model"), error=True, rm=rm)}
    out["remote"] = _remote_line(rm.summary(), progress=rm.progress, rm=rm)
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
        app.layout = _layout(self.req)
        return app


def _layout(req):
    """The chart layout a request says its frame shows ("wide" or "narrow"), or None (draw both)."""
    v = req.get("layout")
    return v if v in chart.LAYOUTS else None


def _open(client, req):
    links.set_figures_base(str(req.get("base") or ""))  # links to other figure pages (the same for every frame)
    search = str(req.get("search") or "")
    if not req.get("form") and search in ("", "?"):
        figures.FIGURES[str(req["figure"])]  # a KeyError for an unknown figure, as figures.get would raise
        SESSIONS[client] = Prerendered(req)
        return {"ok": True, "python_ms": 0.0}
    fig = figures.get(str(req["figure"]))
    app = App(fig, req.get("sigs") or {}, req.get("values") or {}, str(req.get("patch_key") or ""))
    app.layout = _layout(req)
    SESSIONS[client] = app
    if req.get("form"):  # a runtime taking over while the reader changed something: the form is the state
        out = app.on_input(app.shown, force=True)
    else:
        out = app.start(search)
    if app.state is not None and getattr(app.state, "model", None) == "remote":
        from enginelab import remote

        if remote.loaded(app.state.as_dict()) is None:  # a shared link's remote model: the frame asks to read it
            out["remote_start"] = app.state.hf or app.state.url
    return out


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
    if _layout(req):  # the frame's width (live.js asks for a refresh when it crosses the breakpoint)
        app.layout = _layout(req)
    if op == "warm":  # the frame is live and idle: import its figure's module and warm it up, not on its first change
        return {"ok": True, "more": app.warm_up()}
    if op == "idle":  # the reader paused after a change: warm up what they may pick next, a few ms at a time
        return app.idle_step()
    if op == "input":
        app.patch_key = str(req.get("patch_key") or "")
        app.patch_base = str(req.get("patch_base") or "")
        return app.on_input(req.get("values") or {}, str(req.get("target") or ""))
    if op == "refresh":
        app.patch_key = app.patch_base = ""
        return app.apply(app.state, app.message_list or [], force=True)
    if op == "deferred":
        return app.fill_deferred(req.get("token"))
    if op == "svg":
        fn = getattr(app.fig, "download_svg", None)
        return {"ok": True, "svg": fn(app.fig.compute(app.state)) if fn else None}
    if op == "config":
        return own_config(app, str(req.get("text") or ""))
    return {"error": f"unknown request {op!r}"}


def _serve_scratch(app, req):
    """serve() for a session that no frame has (App.warm_up's rehearsal): registered for the one request."""
    client = f"scratch:{id(app)}"
    SESSIONS[client] = app
    try:
        return serve(client, json.dumps(req))
    finally:
        SESSIONS.pop(client, None)


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


async def serve_async(client, text, note):
    """A request that waits on the network (op "remote") from the frame `client` -> the answer (JSON text);
    note(JSON text) sends the frame what to show meanwhile. Never raises."""
    app = SESSIONS.get(str(client))
    if app is None:
        return json.dumps({"error": "no-session"})
    if isinstance(app, Prerendered):
        app = SESSIONS[str(client)] = app.open()

    def send_note(d):
        try:
            note(json.dumps(d, separators=(",", ":")))
        except Exception:
            traceback.print_exc()  # a frame gone meanwhile: its answer will not be read either

    try:
        req = json.loads(str(text))
        if req.get("op") != "remote":
            out = {"error": f"unknown request {req.get('op')!r}"}
        else:
            out = await own_remote(app, req, send_note)
    except Exception as e:
        traceback.print_exc()
        out = {"error": f"{type(e).__name__}: {e}"}
    return json.dumps(out, separators=(",", ":"))


def ready():
    """Called once the first frame is drawn: boot-time objects never die, so keep them out of every later
    collection's work."""
    import gc

    gc.freeze()


# The WebAssembly heap Python lives in grows (and never shrinks) as a session needs more: 30 MB at start, 36 MB after
# fifty calculator changes. Each time it grows, V8 replaces the heap's buffer and counts the new memory against
# its JavaScript heap's limits, which starts a collection: 8-20 ms on the page's thread, inside whatever change
# asked for the memory. One growth to HEAP_RESERVE_BYTES during the first warm-up (the page is idle) takes them
# out of the changes. Growing reserves address space; the operating system backs a page only when it is written.
HEAP_RESERVE_BYTES = 64 * 1024 * 1024


def reserve_heap(size=HEAP_RESERVE_BYTES):
    """Grow the WebAssembly heap to `size` bytes now, under Pyodide, if it is smaller (elsewhere nothing).
    Returns the heap's size in bytes after it, or None where there is no such heap."""
    import sys

    if sys.platform != "emscripten":
        return None
    import ctypes

    lib = ctypes.CDLL(None)  # Pyodide's own C symbols (emscripten's, among them)
    heap_size = lib.emscripten_get_heap_size
    heap_size.restype, heap_size.argtypes = ctypes.c_size_t, []
    if heap_size() < size:
        grow = lib.emscripten_resize_heap
        grow.restype, grow.argtypes = ctypes.c_int, [ctypes.c_size_t]
        grow(size)  # (a refusal leaves the heap as it was: it grows later, as it would have)
    return heap_size()
