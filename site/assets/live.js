// A figure page's live half: it sends the figure's state to the Python runtime (runtime.js: the page's own, or
// the one the figures on a host page share) and writes the HTML it gets back, in one DOM write per render.
//
//   URL (first) / the form's values (every input) -> runtime: Spec.from_query / from_form, compute, render
//   (site/py/main.py) -> {figure HTML or frame patch, summary, rebuilt controls, values, messages, query}
//   -> this file: #figure's one write, the controls, history.replaceState -> <html data-ready="true"> after the
//   first one.
// An embedded figure does not start (or join) a runtime until it is scrolled into view; then it goes live by
// itself. Until then, and while a shared runtime is starting, its status line says so above the pre-rendered
// figure, which stays readable throughout.
import { connect, timing } from "./runtime.js";
import { applyPatch } from "./patch.js";

const html = document.documentElement;
const $ = (id) => document.getElementById(id);
const form = $("controls");
const root = $("figure");
const embedded = window.parent !== window;

const status = (text, step) => window.enginelab?.setStatus(text, step);
const fail = (reason) => {
  if (window.enginelab) window.enginelab.setError(reason);
  else html.dataset.ready = "error";
};

// ---- what the frame shows now --------------------------------------------------------------------------
function boxes() {
  const out = {};
  for (const box of form ? form.querySelectorAll("[data-field]") : []) {
    const ctl = box.querySelector("select, input, textarea");
    if (ctl) out[box.dataset.field] = [box, ctl];
  }
  return out;
}

function formValues() {
  const values = {};
  for (const [key, [, el]] of Object.entries(boxes())) {
    values[key] = el.type === "checkbox" ? (el.checked ? "1" : "0") : String(el.value);
  }
  return values;
}

// form: the session starts from the form's values (a runtime taking over while the reader changed something)
// rather than from the URL
function openRequest(form = false) {
  const sigs = {};
  for (const [key, [box]] of Object.entries(boxes())) sigs[key] = box.dataset.sig || "";
  return {
    op: "open",
    figure: html.dataset.figure,
    search: location.search,
    base: html.getAttribute("data-figures-base") || "",
    sigs,
    values: formValues(),
    patch_key: patchKey(),
    form,
    layout: layout(),
  };
}

// The chart layout this frame shows (site.css: the narrow one up to 720 px wide): Python draws only that one
// for a live frame (enginelab.chart.LAYOUT), and a frame whose width crosses the breakpoint asks again in full.
const narrow = typeof matchMedia === "function" ? matchMedia("(max-width: 720px)") : null;
const layout = () => (narrow && narrow.matches ? "narrow" : "wide");

const patchKey = () => root.querySelector("[data-patch-key]")?.dataset.patchKey || "";
const patchBase = () => root.querySelector("[data-patch-key]")?.dataset.patchBase || "";

// ---- writing an answer -----------------------------------------------------------------------------------
const TYPED = ["number", "text", "textarea"];
const DEFER_MS = 150;
let deferTimer = 0;

function write(r) {
  const t0 = performance.now();
  if (r.patch !== undefined && !applyPatch(r.patch)) return false; // the figure changed under us: ask in full
  if (r.figure !== undefined) root.innerHTML = r.figure; // the one write for the figure
  root.classList.remove("stale"); // shell.js's mark for a shared link's state before Python ran
  if (r.summary !== undefined) $("summary").textContent = r.summary;
  const active = document.activeElement;
  const current = boxes();
  for (const [key, markup] of Object.entries(r.fields || {})) {
    const [box] = current[key] || [];
    if (!box) continue;
    const hadFocus = box.contains(active);
    box.outerHTML = markup;
    if (hadFocus) form.querySelector(`[data-field="${CSS.escape(key)}"] select, [data-field="${CSS.escape(key)}"] input, [data-field="${CSS.escape(key)}"] textarea`)?.focus();
  }
  const now = boxes();
  for (const [key, value] of Object.entries(r.values || {})) {
    const [, ctl] = now[key] || [];
    if (!ctl) continue;
    if (ctl.type === "checkbox") ctl.checked = value === "1";
    else if (ctl === active && TYPED.includes(ctl.type) && !r.force) continue; // never rewrite what is typed
    else ctl.value = value;
  }
  if (r.messages !== undefined) {
    const box = $("messages");
    box.innerHTML = r.messages;
    box.hidden = !r.messages;
  }
  if (r.own) {
    const s = $("own-status");
    if (s) { s.textContent = r.own[0]; s.classList.toggle("own-error", !!r.own[1]); }
  }
  if (r.remote) writeRemote(r.remote);
  if (r.query !== undefined) setQuery(r.query, !live);
  // where the time goes, for `build.py bench`: Python (compute + render) / the rest (DOM, controls, URL)
  if (r.python_ms !== undefined) html.dataset.renderMs = `${r.python_ms.toFixed(2)}/${(performance.now() - t0).toFixed(2)}`;
  if (r.deferred !== undefined) {
    // the slow extras (the advisor's findings) just after the render; on a runtime shared by several frames
    // once the reader pauses (DEFER_MS): a change that follows replaces them, so they never hold up the next
    // change's render in any frame
    const token = r.deferred;
    clearTimeout(deferTimer);
    const wait = rt.mode === "own" ? 0 : DEFER_MS; // a page's own runtime serves nobody else
    deferTimer = setTimeout(() => then(rt.request({ op: "deferred", token }), fillDeferred), wait);
  }
  html.dataset.renders = String(Number(html.dataset.renders || 0) + 1);
  window.dispatchEvent(new CustomEvent("enginelab:rendered"));
  return true;
}

// The URL follows the state once the reader pauses (QUERY_MS after the last change), not inside each change:
// history.replaceState costs 1-10 ms of the frame's thread (Chromium tells its browser process), a frame's
// budget, and a run of changes (a slider dragged, Play) needs only its last. <html data-url-pending> says a
// query is still to be written; Share and the embed snippet, and leaving the page, write it first.
const QUERY_MS = 100;
let queryTimer = 0;
let queryNext = null;

function setQuery(query, now = false) {
  queryNext = query;
  clearTimeout(queryTimer);
  if (now) return flushQuery();
  html.dataset.urlPending = "";
  queryTimer = setTimeout(flushQuery, QUERY_MS);
}

function flushQuery() {
  clearTimeout(queryTimer);
  if (queryNext === null) return;
  const query = queryNext;
  queryNext = null;
  delete html.dataset.urlPending;
  history.replaceState(null, "", location.pathname + query + location.hash);
}
addEventListener("pagehide", flushQuery);
addEventListener("enginelab:flush-query", flushQuery); // shell.js, before it reads location

function fillDeferred(r) {
  if (r.messages !== undefined) write({ messages: r.messages });
  for (const [id, inner] of Object.entries(r.deferred_html || {})) {
    const node = $(id);
    if (node) node.innerHTML = inner;
  }
}

// ---- talking to the runtime ------------------------------------------------------------------------------
let rt = null;
let live = false;
let inflight = false; // an answer still to come (a shared runtime answers asynchronously)
let again = null; // the input to send when it comes: only the latest counts

const then = (r, f) => (r && typeof r.then === "function" ? r.then(f) : f(r));

function answer(r, retry) {
  if (r.error === "no-session") {
    // a runtime that took over from another one: open this frame's session again, from its URL, then redo
    const fromForm = !!retry && retry.op === "input";
    return then(rt.request(openRequest(fromForm)), (o) => {
      answer(o);
      if (retry && retry.op !== "open" && retry.op !== "input") send(retry);
    });
  }
  if (r.error) {
    if (!live) fail(r.error);
    else write({ messages: `<ul><li>${r.error.replace(/&/g, "&amp;").replace(/</g, "&lt;")}</li></ul>` });
    return;
  }
  if (!write(r)) return send({ op: "refresh", layout: layout() });
  if (!live) {
    live = true;
    timing.first_render = performance.now();
    $("controls-set") && ($("controls-set").disabled = false);
    rt.ready();
    html.dataset.ready = "true";
    const s = $("status");
    if (s) s.hidden = true;
    // a frame that opened on its pre-rendered default state has not imported its figure yet, and no frame has
    // run its figure's code for another state: do both (site/py/main.py App.warm_up: a change rehearsed, a short
    // step per request) once the page is idle (the frames of a host page share one thread: after the others'
    // first renders), so that the first change is as quick as the others
    const idle = window.requestIdleCallback || ((f) => setTimeout(f, 0));
    const warm = () => then(rt.request({ op: "warm" }), (w) => { if (w && w.more) idle(warm, { timeout: 2000 }); });
    idle(warm, { timeout: 2000 });
    registerServiceWorker();
  } else if (retry && retry.op === "input") {
    idleWarm();
  }
  if (r.remote_start) startRemote(r.remote_start);
}

// After a change, while the reader pauses: the runtime fills the caches of what they may pick next (the previous
// and next options of a figure's selects: site/py/main.py, op "idle"), one request per idle period, each a few ms
// (main.IDLE_BUDGET_S, a step at least), so that their next pick is not a first visit. A newer render starts
// over from its own state. Not before the reader's first change: a page only looked at keeps what it shows. Only
// on a page's own runtime: on a shared one another frame's change, answered over the channel, could wait behind a
// step (the bench's cross-frame p95 rose from 15.8 to 20-21 ms with it).
const IDLE_MIN_MS = 10; // a request only in an idle period with this much time left (a step may take a few ms)
let idleGen = 0;

function idleWarm() {
  if (!window.requestIdleCallback || rt.mode !== "own") return; // (no idle periods, or a shared runtime)
  const gen = ++idleGen;
  const step = (deadline) => {
    if (gen !== idleGen) return; // a newer change: its own warm-up runs
    if (inflight || deadline.timeRemaining() < IDLE_MIN_MS) return requestIdleCallback(step);
    then(rt.request({ op: "idle" }), (r) => {
      if (r && r.more && gen === idleGen) requestIdleCallback(step);
    });
  };
  requestIdleCallback(step);
}

function send(msg) {
  if (inflight) { again = msg; return; }
  const r = rt.request(msg);
  if (r && typeof r.then === "function") {
    inflight = true;
    r.then((a) => {
      inflight = false;
      answer(a, msg);
      const next = again;
      again = null;
      if (next) send(next.op === "input" ? inputRequest(next.target) : next);
    });
  } else {
    answer(r, msg);
  }
}

const inputRequest = (target) => ({
  op: "input", values: formValues(), target, patch_key: patchKey(), patch_base: patchBase(), layout: layout(),
});

function onInput(event) {
  if (!live) return;
  send(inputRequest(event.target?.name || ""));
  registerServiceWorker(); // (the wait starts again)
}

// ---- "Use your own model or machine" (the calculator's panel, figures/calculator.py own_model_panel) -------
function setupOwnModel() {
  const panel = $("own-model");
  if (!panel) return;
  const say = (text, error) => write({ own: [text, error] });
  const load = (f) => {
    if (!f || !live) return;
    say(`Reading the header of ${f.name}…`, false);
    rt.file(f).then((r) => answer(r));
  };
  const stop = (e) => e.stopPropagation(); // typing in the panel is not a change of the figure's settings
  panel.addEventListener("input", stop);
  panel.addEventListener("change", stop);
  $("gguf-file")?.addEventListener("change", (e) => { if (e.target.files.length) load(e.target.files[0]); });
  $("gguf-drop")?.addEventListener("dragover", (e) => e.preventDefault());
  $("gguf-drop")?.addEventListener("drop", (e) => {
    e.preventDefault();
    if (e.dataTransfer.files.length) load(e.dataTransfer.files[0]);
  });
  $("cfg-use")?.addEventListener("click", () => {
    if (live) send({ op: "config", text: String($("cfg-text").value) });
  });
}

// ---- A model from Hugging Face or a link (the calculator's panel; site/py/main.py own_remote) ------------
// The runtime does the reading (its page's fetch: the same origin as this frame) and sends notes meanwhile.
function writeRemote(m) {
  const s = $("remote-status");
  if (!s) return;
  s.textContent = m.text; // plain text: a repo or file name never becomes markup
  s.classList.toggle("remote-error", !!m.error);
  if (m.bytes_read !== undefined) {
    s.dataset.readout = "remote_bytes_read";
    s.dataset.value = String(m.bytes_read);
    s.dataset.requests = String(m.requests);
    s.dataset.fileSize = m.file_size ? String(m.file_size) : "";
  }
  if (Array.isArray(m.files)) {
    const box = $("remote-files");
    const pick = $("remote-file");
    if (box && pick) {
      box.hidden = !m.files.length;
      pick.replaceChildren(...m.files.map(([value, label]) => {
        const o = document.createElement("option");
        o.value = value;
        o.textContent = label;
        o.selected = value === m.file;
        return o;
      }));
    }
  }
}

function readRemote(msg) {
  if (!live || typeof rt.call !== "function") return;
  rt.call(msg, (note) => write(note)).then((r) => answer(r));
}

function setupRemote() {
  const input = $("remote-input");
  if (!input) return;
  $("remote-read")?.addEventListener("click", () => readRemote({ op: "remote", input: String(input.value) }));
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      e.preventDefault(); // not the form's submit
      readRemote({ op: "remote", input: String(input.value) });
    }
  });
  $("remote-file")?.addEventListener("change", (e) => {
    if (e.target.value) readRemote({ op: "remote", file: String(e.target.value) });
  });
}

// a shared link naming a remote model: read it, as the reader who shared it did (the first answer says so)
function startRemote(what) {
  const panel = $("own-model");
  if (panel) panel.open = true;
  const input = $("remote-input");
  if (input) input.value = what;
  readRemote({ op: "remote", initial: true });
}

// ---- start ---------------------------------------------------------------------------------------------
function whenInView() {
  return new Promise((resolve) => {
    if (!embedded || typeof IntersectionObserver !== "function") return resolve();
    const io = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) { io.disconnect(); resolve(); }
    });
    io.observe(document.body);
  });
}

// The service worker (sw.js at the site's root) keeps this build's files for the next visit and for use with no
// network. Its install reads and hashes every file of the build (about a second of CPU across the browser's
// threads), so it waits until the figure is live and the reader has left it alone for SW_QUIET_MS: a reader
// changing settings right after the page starts never shares the machine with it.
const SW_QUIET_MS = 3000;
let swTimer = 0;
let swDone = false;

function registerServiceWorker() {
  if (swDone || !("serviceWorker" in navigator) || !/^https?:$/.test(location.protocol)) return;
  clearTimeout(swTimer);
  swTimer = setTimeout(() => {
    swDone = true;
    const url = new URL("../sw.js", import.meta.url);
    navigator.serviceWorker.register(url, { scope: new URL("../", import.meta.url).pathname, updateViaCache: "none" })
      .catch(() => {}); // a host that forbids it (or a private window) just goes without
  }, SW_QUIET_MS);
}

async function start() {
  timing.start = performance.now();
  if (embedded) status("This figure becomes live when you scroll to it; until then it shows its default settings.", 0);
  await whenInView();
  timing.in_view = performance.now();
  status("Loading the Python runtime (Pyodide, about 13 MB)…", 0);
  rt = connect({ status, onError: (reason) => { if (!live) fail(reason); } });
  window.enginelab_runtime = rt; // for the console (and tests): rt.mode, rt.leader
  html.dataset.runtime = rt.mode;
  if (rt.mode === "follower") status("Waiting for the Python runtime the figures on this page share…", 1);
  form?.addEventListener("input", onInput);
  narrow?.addEventListener("change", () => { if (live) send({ op: "refresh", layout: layout() }); });
  form?.addEventListener("submit", (e) => e.preventDefault());
  setupOwnModel();
  setupRemote();
  // one standalone SVG of the current state, for Download SVG (figures with download_svg; else null)
  window.enginelab_svg = async () => (live ? (await rt.request({ op: "svg" })).svg : null);
  try {
    const r = await rt.request(openRequest());
    html.dataset.runtime = rt.mode;
    answer(r);
  } catch (e) {
    console.error(e);
    fail(String(e.message || e));
  }
}

if (html.dataset.figure && root) start();
