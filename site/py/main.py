"""Browser glue: the only Python that touches the DOM (through PyScript).

On load: location.search -> Spec.from_query -> compute -> render -> one write into #figure ->
history.replaceState with only the non-default keys -> <html data-ready="true">.
On every input: the form's values -> Spec.from_form -> the same path.
Any failure before the first render sets data-ready="error" and says why; the pre-rendered figure stays.
"""
import os
import sys
import traceback

from pyscript import document, window
from pyodide.ffi import create_proxy

html = document.documentElement


def status(text, step=None):
    window.enginelab.setStatus(text, step) if hasattr(window, "enginelab") else None


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

    # -- reading the form --------------------------------------------------------------------------------
    def form_values(self):
        values = {}
        elements = self.form.elements
        for f in self.spec.fields:
            el = elements.namedItem(f.key)
            if el is None:
                continue
            if getattr(el, "type", "") == "checkbox":
                values[f.key] = "1" if el.checked else "0"
            else:
                values[f.key] = el.value
        return values

    # -- writing the page --------------------------------------------------------------------------------
    def sync_controls(self, state):
        """Rebuild only the controls whose options or bounds changed; set every value from the state."""
        active = document.activeElement
        active_id = active.id if active is not None else ""
        for key, sig, field_html in self.page.controls_fields(self.spec, state):
            box = self.form.querySelector(f'[data-field="{key}"]')
            if box is None:
                continue
            if box.dataset.sig != sig:
                box.outerHTML = field_html
                if active_id == self.page.field_id(key):
                    document.getElementById(active_id).focus()
                continue
            ctl = box.querySelector("select, input")
            if ctl is None:
                continue
            field = self.spec.by_key[key]
            value = getattr(state, key)
            if ctl.type == "checkbox":
                ctl.checked = bool(value)
            elif ctl.id == active_id and ctl.type in ("number", "text"):
                pass  # never rewrite what the user is typing; a clamp shows as a message instead
            else:
                encoded = field.encode(value)
                if ctl.value != encoded:
                    ctl.value = encoded

    def show_messages(self, messages):
        self.messages.innerHTML = self.page.messages_html(messages)
        self.messages.hidden = not messages

    def apply(self, state, messages):
        view = self.page.view(self.fig, state)
        self.root.innerHTML = view["figure"]  # the one write for the figure
        self.summary.textContent = view["summary"]
        self.sync_controls(state)
        self.show_messages(messages)
        loc = window.location
        window.history.replaceState(None, "", loc.pathname + view["query"] + loc.hash)
        self.state = state

    # -- events ------------------------------------------------------------------------------------------
    def on_input(self, event):
        try:
            state, messages = self.spec.from_form(self.form_values())
            self.apply(state, messages)
        except Exception as e:  # keep the page alive; say what went wrong
            traceback.print_exc()
            self.show_messages([f"Could not update the figure: {type(e).__name__}: {e}"])

    def start(self):
        state, messages = self.spec.from_query(str(window.location.search))
        self.apply(state, messages)
        self._proxy = create_proxy(self.on_input)
        self.form.addEventListener("input", self._proxy)
        document.getElementById("controls-set").disabled = False


def main():
    status("Python is running; importing enginelab…", 4)
    sys.path.insert(0, os.path.abspath("lib"))  # where PyScript unpacked our wheel (see the page's config)
    from enginelab import figures, page
    fig = figures.get(str(html.dataset.figure))
    status("Drawing the figure…", 5)
    app = App(fig, page)
    app.start()
    window.enginelab_app = create_proxy(app)  # for debugging in the console
    html.dataset.ready = "true"
    document.getElementById("status").hidden = True


try:
    main()
except Exception as e:
    traceback.print_exc()
    fail(f"{type(e).__name__}: {e}")
