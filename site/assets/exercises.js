// The exercises page: wires every py-editor cell to the Python worker (site/py/exercises_worker.py).
//
// py-editor draws the editors (CodeMirror, from the vendored @pyscript/core) and starts one worker for the
// env "lab" from the setup script. We replace each editor's run handler (script.handleEvent returning false)
// with our own: the cell's code goes to the worker's enginelab_run(n, code), which runs it in a fresh
// namespace, checks it and returns JSON; we draw output, traceback, charts and verdict under the cell. Only
// the page calls the worker (never the reverse), so no SharedArrayBuffer or COOP/COEP headers are needed.
//
// The cell's code is untrusted, and so is everything the worker sends back: output is shown as text, and a
// chart is rebuilt element by element from an allow-list (safeChart), never inserted as markup. Cells run one
// at a time, in the order Run was pressed (the worker is single-threaded): a cell waiting its turn says so,
// and Stop ends only the cell that is running. A worker that stops answering (a cell called js.close(), or cut
// its line to the page) is found by a ping after every run and before the next, and replaced, with a message.
const html = document.documentElement;
let setupScript = document.getElementById("ex-setup");
let generation = 0;          // bumped by every restart of the worker
let abortRun = null;         // rejects the run in flight when the worker is restarted
const STOP_AFTER_MS = 1500;  // a run this long shows the Stop button
const PING_TIMEOUT_MS = 8000;  // an idle worker answers a ping in milliseconds; generous for a busy machine
const queue = [];            // sections waiting for the worker, in the order Run was pressed
let running = null;          // the section whose code the worker is running
const sections = [...document.querySelectorAll("section.exercise")];
const READY_TIMEOUT_MS = 120_000;
let worker = null;
let userActed = false;

const status = (text, step) => window.enginelab?.setStatus?.(text, step);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const editorOf = (sec) => sec.querySelector('script[id$="-editor"]');
const textOf = (id) => document.getElementById(id).textContent.replace(/^\n+/, "").replace(/\s+$/, "");

for (const ev of ["pointerdown", "keydown", "wheel", "touchstart"]) {
  addEventListener(ev, () => { userActed = true; }, { capture: true, once: true });
}

// ---- the worker ------------------------------------------------------------------------------------------
async function connect(script) {
  const t0 = performance.now();
  for (;;) {
    const xw = script.xworker;
    if (xw) {
      try {
        // a call the worker cannot answer yet fails at once; one sent while it boots may never be answered
        const r = await Promise.race([xw.sync.enginelab_ping(), sleep(1500).then(() => null)]);
        if (r === "ready") return xw;
      } catch (_) { /* not exposed yet */ }
    }
    if (performance.now() - t0 > READY_TIMEOUT_MS) {
      throw new Error(`Python did not start in the background worker within ${READY_TIMEOUT_MS / 1000} s.`);
    }
    await sleep(100);
  }
}

// Is the worker still there? An idle worker answers at once; a closed or cut-off one never does.
async function alive(xw) {
  if (!xw) return false;
  try {
    return (await Promise.race([xw.sync.enginelab_ping(), sleep(PING_TIMEOUT_MS).then(() => null)])) === "ready";
  } catch (_) {
    return false;
  }
}

// ---- charts from the worker: rebuilt from an allow-list, never inserted as markup ---------------------------
// enginelab.plot draws only these elements and attributes (tests/e2e/test_exercises.py checks a real chart
// survives whole). Anything else (a script, an <img onerror>, an href, a style, an event handler, a
// foreignObject) is dropped; text is copied as text.
const SVG_NS = "http://www.w3.org/2000/svg";
const CHART_HTML_TAGS = new Set(["figure", "details", "summary", "table", "caption", "thead", "tbody", "tr", "th", "td"]);
const CHART_SVG_TAGS = new Set(["svg", "g", "path", "line", "circle", "rect", "text", "title", "desc"]);
const CHART_ATTRS = new Set(["class", "role", "aria-labelledby", "x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r",
  "d", "width", "height", "viewBox", "text-anchor", "transform", "data-value", "data-series", "scope"]);
const CHART_IDS = /^plot-[0-9a-f]{10}(-title|-desc)?$/;  // plot._id(): ids only for <title>/<desc> labelling
const MAX_CHART_NODES = 50_000;

function safeChart(markup) {
  // DOMParser's document is inert: no script runs and no image loads while we read it
  const doc = new DOMParser().parseFromString(`<!doctype html><body>${String(markup)}`, "text/html");
  let budget = MAX_CHART_NODES;
  const copy = (node, inSvg) => {
    if (--budget < 0) return null;
    if (node.nodeType === Node.TEXT_NODE) return document.createTextNode(node.data);
    if (node.nodeType !== Node.ELEMENT_NODE) return null;
    const tag = node.localName;
    const svg = inSvg || tag === "svg";
    if (!(svg ? CHART_SVG_TAGS : CHART_HTML_TAGS).has(tag)) return null;
    const out = svg ? document.createElementNS(SVG_NS, tag) : document.createElement(tag);
    for (const a of node.attributes) {
      const name = a.name;
      if (name === "id" ? CHART_IDS.test(a.value) : CHART_ATTRS.has(name)) out.setAttribute(name, a.value);
    }
    for (const c of node.childNodes) {
      const k = copy(c, svg);
      if (k) out.append(k);
    }
    return out;
  };
  const frag = document.createDocumentFragment();
  for (const c of doc.body.childNodes) {
    const k = copy(c, false);
    if (k) frag.append(k);
  }
  return frag;
}

// ---- one cell ----------------------------------------------------------------------------------------------
function say(sec, text) {
  sec.querySelector(".ex-state").textContent = text;
}

function button(sec, action) {
  return sec.querySelector(`button[data-action="${action}"]`);
}

function setRunning(sec, on) {
  sec.dataset.running = on ? "true" : "false";
  const run = button(sec, "run");
  run.disabled = on || !worker;
  run.textContent = on ? "Running…" : "Run";
  sec.setAttribute("aria-busy", on ? "true" : "false");
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function render(sec, r, roundtripMs) {
  const out = sec.querySelector(".ex-output");
  out.replaceChildren();
  if (r.stdout) out.append(el("pre", "ex-stdout", r.stdout));
  if (r.stderr) out.append(el("pre", "ex-stderr", r.stderr));
  if (r.error) {
    const pre = el("pre", "ex-traceback", r.error);
    pre.setAttribute("aria-label", "Error");
    out.append(pre);
  }
  if (Array.isArray(r.plots) && r.plots.length) {
    const div = el("div", "ex-plots");
    for (const p of r.plots.slice(0, 12)) div.append(safeChart(p));
    out.append(div);
  }
  const ok = r.verdict === "correct";
  const v = el("div", "ex-verdict");
  v.dataset.verdict = ok ? "correct" : "not-yet";
  v.setAttribute("role", "status");
  v.append(el("strong", "", ok ? "Correct." : "Not yet."), el("span", "ex-hint", " " + r.hint));
  out.append(v);
  if (typeof r.run_ms === "number") {
    out.append(el("p", "ex-timing", `Ran in ${r.run_ms.toFixed(0)} ms, checked in ${r.check_ms.toFixed(0)} ms.`));
    sec.dataset.runMs = String(r.run_ms);
  }
  sec.dataset.roundtripMs = String(roundtripMs);
  sec.dataset.runs = String((Number(sec.dataset.runs) || 0) + 1);
}

const finished = new Map();  // section -> {promise, resolve}: settles when the section's run is shown

// Queue a cell's run; the promise settles when its result is under the cell (bench/bench_exercises.py awaits it).
function runCell(sec) {
  if (!worker && !queue.length && !running) {
    say(sec, "Python is still starting; Run works in a moment.");
    return Promise.resolve();
  }
  if (sec.dataset.running === "true") return finished.get(sec)?.promise ?? Promise.resolve();  // queued already
  let resolve;
  const promise = new Promise((r) => { resolve = r; });
  finished.set(sec, { promise, resolve });
  setRunning(sec, true);
  // the last run's output (a traceback, say) is not this run's: take it away as soon as the run is asked for
  sec.querySelector(".ex-output").replaceChildren(el("p", "ex-running", "Running…"));
  queue.push(sec);
  if (running || !worker) say(sec, running ? `Waiting for exercise ${running.dataset.exercise} to finish…` : "Waiting for Python…");
  pump();
  return promise;
}

// Run the next waiting cell when the worker is free.
async function pump() {
  if (running || !worker || !queue.length) return;
  const sec = queue.shift();
  running = sec;
  try {
    await execute(sec);
  } finally {
    running = null;
  }
  pump();
}

function failure(error, hint) {
  return { stdout: "", stderr: "", plots: [], error, verdict: "not yet", hint };
}

async function execute(sec) {
  const n = Number(sec.dataset.exercise);
  const code = editorOf(sec).code;
  const xw = worker;
  if (!(await alive(xw))) {  // it died while idle: replace it, and run this cell first on the new one
    queue.unshift(sec);
    say(sec, "Python's worker had stopped; restarting it…");
    restartPython("Python's background worker had stopped; it was restarted.");
    return;
  }
  say(sec, "Running…");
  // the last run's output (a traceback, say) is not this run's: clear it while this one runs
  sec.querySelector(".ex-output").replaceChildren(el("p", "ex-running", "Running…"));
  const stop = button(sec, "stop");
  const showStop = setTimeout(() => { stop.hidden = false; }, STOP_AFTER_MS);
  const t0 = performance.now();
  let r, stopped = false;
  try {
    const aborted = new Promise((_, reject) => { abortRun = reject; });
    const reply = await Promise.race([xw.sync.enginelab_run(n, code), aborted]);
    r = JSON.parse(reply);
    if (!r || typeof r !== "object") throw new Error("the worker's reply was not a result");
  } catch (e) {
    stopped = Boolean(e && e.stopped);
    r = stopped
      ? failure("Stopped: Python was restarted before this run finished.", "A loop that never ends? Fix it, then Run again.")
      : failure(`The Python worker failed: ${(e && e.message) || e}`, "Run the cell again; reload the page if this keeps happening.");
  }
  abortRun = null;
  const roundtrip = performance.now() - t0;
  clearTimeout(showStop);
  stop.hidden = true;
  let note = "";
  if (!stopped && !(await alive(xw))) {
    // the cell ended the worker (js.close()) or cut its line to the page: replace it, and say so here (the
    // cell's own output, if its reply got through, stays above the message)
    const why = "Python's background worker stopped responding after this cell ran (did the code call " +
      "js.close(), or change the worker's messaging?). Python was restarted; the other cells are not affected.";
    r = { ...r, error: (r.error ? r.error + "\n" : "") + why, verdict: "not yet",
          hint: "Run the cell again without that line." };
    note = "Python was restarted.";
    restartPython();
  }
  render(sec, r, roundtrip);
  setRunning(sec, false);
  say(sec, note);
  const f = finished.get(sec);
  finished.delete(sec);
  if (f) f.resolve();
}

// Stop: the worker is busy in the learner's code and cannot be interrupted, so end it and start a new one
// (a fresh py-editor setup script with a new env name; every run starts from a fresh namespace anyway).
// Only the running cell is told it was stopped; cells waiting their turn run on the new worker.
async function restartPython() {
  const old = setupScript;
  const xw = worker || old.xworker;
  worker = null;
  generation += 1;
  const abort = abortRun;
  abortRun = null;
  try { xw && xw.terminate(); } catch (_) { /* already gone */ }
  if (abort) abort({ stopped: true });
  html.dataset.pythonRestarts = String(generation);
  for (const s of sections) button(s, "run").disabled = true;
  const fresh = document.createElement("script");
  fresh.type = "py-editor";
  fresh.id = `ex-setup-${generation}`;
  for (const a of ["setup", "config", "src"]) fresh.setAttribute(a, old.getAttribute(a) ?? "");
  fresh.setAttribute("env", `lab-${generation}`);
  old.after(fresh);
  old.remove();
  setupScript = fresh;
  const mine = generation;
  try {
    const w = await connect(fresh);
    if (mine !== generation) return;
    worker = w;
    for (const s of sections) button(s, "run").disabled = s.dataset.running === "true";
    pump();  // cells that were waiting their turn
  } catch (err) {
    for (const s of sections) say(s, err.message);
  }
}

function setCode(sec, code) {
  editorOf(sec).code = code;
}

function wire(sec) {
  if (sec.dataset.wired === "true") return;
  const script = editorOf(sec);
  // py-editor's Run button and its Ctrl/Shift+Enter keys call handleEvent; returning false skips its own run.
  script.handleEvent = async (event) => {
    if (!event.currentTarget) return true;  // script.process(...): let py-editor evaluate it
    runCell(sec);
    return false;
  };
  const solutionBtn = button(sec, "solution");
  let mine = null;  // the learner's code while a solution is shown
  button(sec, "run").addEventListener("click", () => runCell(sec));
  button(sec, "stop").addEventListener("click", () => {
    if (running !== sec) return;  // only the running cell can be stopped
    say(sec, "Restarting Python…");
    restartPython();
  });
  button(sec, "reset").addEventListener("click", () => {
    setCode(sec, textOf(`ex${sec.dataset.exercise}-starter`));
    mine = null;
    solutionBtn.textContent = "Show a solution";
    sec.querySelector(".ex-output").replaceChildren();
    say(sec, "Back to the starter code.");
  });
  solutionBtn.addEventListener("click", () => {
    if (mine === null) {
      mine = editorOf(sec).code;
      setCode(sec, textOf(`ex${sec.dataset.exercise}-solution`));
      solutionBtn.textContent = "Back to my code";
      say(sec, "This is one solution; run it to see it checked.");
    } else {
      setCode(sec, mine);
      mine = null;
      solutionBtn.textContent = "Show a solution";
      say(sec, "Your code is back.");
    }
  });
  button(sec, "reset").disabled = false;
  solutionBtn.disabled = false;
  button(sec, "run").disabled = !worker;
  styleEditor(sec);
  sec.dataset.wired = "true";
  // py-editor focuses each editor it creates, which scrolls the page to the last one: undo that on load.
  if (!userActed) {
    let a = document.activeElement;
    while (a && a.shadowRoot && a.shadowRoot.activeElement) a = a.shadowRoot.activeElement;
    a?.blur?.();
    const target = location.hash && document.getElementById(location.hash.slice(1));
    if (target) target.scrollIntoView(); else scrollTo(0, 0);
  }
  maybeReady();
}

// The editor lives in a shadow root that resets inherited styles: give it our fonts and a dark theme.
const EDITOR_CSS = `
.cm-editor { font-size: 14px; background: #ffffff; color: #1b1f24; }
.cm-scroller { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; line-height: 1.45; }
.cm-gutters { background: #f6f8fa; color: #57606a; border-right: 1px solid #d0d7de; }
.cm-editor.cm-focused { outline: none; }
@media (prefers-color-scheme: dark) {
  /* CodeMirror's default highlight colours are for light backgrounds: invert the whole editor and turn the
     hues back, which keeps every colour's contrast. */
  .cm-editor { filter: invert(1) hue-rotate(180deg); background: #f0f2f4; }
}`;

function styleEditor(sec) {
  const host = sec.querySelector(".py-editor-input > div");
  const root = host && host.shadowRoot;
  if (!root || root.querySelector("style[data-enginelab]")) return;
  const style = document.createElement("style");
  style.dataset.enginelab = "";
  style.textContent = EDITOR_CSS;
  root.append(style);
}

function maybeReady() {
  if (!worker || !sections.every((s) => s.dataset.wired === "true")) return;
  for (const s of sections) button(s, "run").disabled = s.dataset.running === "true";
  html.dataset.ready = "true";
  document.getElementById("status").hidden = true;
}

// ---- start -------------------------------------------------------------------------------------------------
document.addEventListener("py-editor", (e) => {
  const sec = e.target.closest && e.target.closest("section.exercise");
  if (sec) wire(sec);
}, true);
for (const sec of sections) if (typeof editorOf(sec).process === "function") wire(sec);

connect(setupScript).then((xw) => {
  worker = xw;
  status("Python is ready.", 2);
  maybeReady();
}, (err) => {
  window.enginelab?.setError?.(err.message);
  if (!window.enginelab) html.dataset.ready = "error";
});
status("Starting Python in a background worker (Pyodide, about 13 MB)…", 1);

// for `bench/bench_exercises.py` and the browser tests (safeChart: what a chart from the worker becomes)
window.enginelabExercises = { runCell: (n) => runCell(sections[n - 1]), sections, safeChart };
