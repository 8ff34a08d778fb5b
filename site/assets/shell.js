// Page chrome shared by every figure page. Plain JavaScript that works before (and without) Python:
// load progress and load errors, Embed / Download SVG / Share / copy buttons, and the height message
// to a parent page when embedded (the host side is site/embed.js). The figure itself is drawn by Python
// (site/py/main.py), through live.js.
import { applyPatch } from "./patch.js";  // frame patches for animated figures (page.patch_view)

const html = document.documentElement;
html.classList.remove("no-js");

const $ = (sel) => document.querySelector(sel);
const statusText = () => $("#status-text");

// ---- load progress -----------------------------------------------------------------------------------
// Python sets later steps itself; until it runs, the resources arriving tell us where we are.
const RUNTIME_PATH = /\/(pyodide|wheels|py)\/[^/]+$/;
const STEPS = [
  [/pyodide\.asm\.wasm$/, 1, "Compiling the Python runtime (WebAssembly)…"],
  [/python_stdlib\.zip$/, 2, "Starting Python…"],
];
export function setStatus(text, step) {
  const t = statusText();
  if (t && html.dataset.ready === "false") t.textContent = text;
  const p = $("#status-progress");
  if (p && step !== undefined && step > p.value) p.value = step;
}
try {
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      for (const [re, step, text] of STEPS) if (re.test(new URL(e.name).pathname)) setStatus(text, step);
      if (e.responseStatus >= 400) noteFailure(e.name, e.responseStatus);  // a script, module or file of ours
      // a runtime file the server never answered: no status, no body (Pyodide may have asked before our fetch
      // wrapper existed, and its loader then waits forever instead of failing)
      else if (e.responseStatus === 0 && !e.decodedBodySize && RUNTIME_PATH.test(new URL(e.name).pathname)) {
        noteFailure(e.name, 0);
      }
    }
  }).observe({ type: "resource", buffered: true });
} catch (_) { /* old browser: the static message stays */ }

// ---- load errors -------------------------------------------------------------------------------------
// A failed start names the file that could not be fetched and what to do about it. Every file the page needs
// comes from this site; we learn which one failed from our fetch wrapper (PyScript and Pyodide fetch their
// files with fetch), from resource timing (scripts and modules), and, for the exercises page whose Python
// starts in a worker we cannot watch, from a check of the worker's files when the page loads.
let failedFile = null;  // {url, status} of the first site file that could not be fetched while loading

const sameSite = (url) => {
  try { return new URL(url, location.href).origin === location.origin; } catch (_) { return false; }
};
const sitePath = (url) => decodeURIComponent(new URL(url, location.href).pathname).replace(/^\//, "");

function fileProblem(f) {
  const name = sitePath(f.url);
  if (!f.status) {
    return `Could not fetch ${name}: the server did not answer. Check that the server (\`python3 build.py serve\`, ` +
      "or the one you copied the site to) is still running and reachable, then reload the page.";
  }
  if (f.status === 404 || f.status === 410) {
    return `Could not fetch ${name}: the server says it does not exist (HTTP ${f.status}). It is part of the ` +
      "site: copy the whole dist/ folder to the server (or serve it with `python3 build.py serve`), then reload.";
  }
  return `Could not fetch ${name}: the server answered HTTP ${f.status}. Check the server's log for that ` +
    "file, then reload the page.";
}

function noteFailure(url, status) {
  if (failedFile || html.dataset.ready === "true" || !sameSite(url)) return;
  failedFile = { url: String(url), status: status || 0 };
  html.dataset.failedFile = sitePath(url);
  setError(fileProblem(failedFile));
}

export function setError(reason) {
  if (html.dataset.ready === "true") return;
  html.dataset.ready = "error";
  // once we know which file failed, that says more than the runtime's own words ("Failed to fetch")
  const text = failedFile ? fileProblem(failedFile) : String(reason);
  const s = $("#status");
  if (s) {
    s.classList.add("status-error");
    s.replaceChildren();
    const strong = document.createElement("strong");
    strong.textContent = "The interactive version could not start. ";
    const span = document.createElement("span");
    span.id = "status-text";
    const after = html.dataset.page === "exercises"
      ? " The tasks and the starter code below stay readable."
      : " The figure below shows the default settings.";
    span.textContent = text + after;
    s.append(strong, span);
  }
}

// PyScript, Pyodide and our own code fetch the site's files with fetch(): note the first that fails.
const siteFetch = window.fetch.bind(window);
window.fetch = async function (input, init) {
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : input && input.url;
  let response;
  try {
    response = await siteFetch(input, init);
  } catch (e) {
    // (also after an error is shown: Pyodide's own "Failed to fetch" may land first, and the re-asked files then
    // name the one that failed)
    if (html.dataset.ready !== "true" && !(e && e.name === "AbortError")) noteFailure(url, 0);
    throw e;
  }
  if (!response.ok && html.dataset.ready !== "true") noteFailure(response.url || url, response.status);
  return response;
};

// What Pyodide fetches from its folder as it starts (pyodide.mjs, its entry module, comes first)
const PYODIDE_FILES = ["pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json"];

// The exercises page starts Python in a worker, whose fetches this page cannot see: check its files (HEAD
// requests, no bodies) while it boots, so a missing one is named at once instead of after a 2-minute timeout.
async function checkWorkerFiles() {
  const s = document.querySelector('script[type="py-editor"][setup][config]');
  if (!s) return;
  const page = location.href;
  const cfgUrl = new URL(s.getAttribute("config"), page);
  let cfg;
  try {
    const r = await fetch(cfgUrl);
    if (!r.ok) return;  // noted by the wrapper
    cfg = await r.json();
  } catch (_) { return; }
  const interp = new URL(cfg.interpreter, page);  // the config's interpreter resolves against the page
  const urls = [new URL(s.getAttribute("src"), page), interp];
  for (const f of PYODIDE_FILES) urls.push(new URL(f, interp));
  for (const f of Object.keys(cfg.files || {})) urls.push(new URL(f, cfgUrl));  // files resolve against the config
  // (reading the empty body lets the request finish; an unread one is reported as aborted)
  await Promise.all(urls.map((u) => fetch(u, { method: "HEAD", cache: "no-store" }).then((r) => r.arrayBuffer(), () => null)));
}
if (html.dataset.ready === "false") checkWorkerFiles();
// A stray error that only says a fetch failed (Pyodide's loader aborts with one when its wasm download dies, and
// may have fetched before the wrapper above was installed): ask for the runtime's files again (HEAD, no bodies)
// so the one that fails is named, and show the bare words only if every file answers.
const GENERIC_FETCH = /failed to fetch|networkerror|load failed/i;
const SITE_ROOT = new URL("../", import.meta.url);
function runtimeFiles() {
  const files = ["pyodide.mjs", ...PYODIDE_FILES].map((f) => `pyodide/${f}`);
  if (html.dataset.wheel) files.push(`wheels/${html.dataset.wheel}`, "py/main.py");
  return files.map((f) => new URL(f, SITE_ROOT));
}
function reportStray(text) {
  if (html.dataset.ready !== "false") return;
  if (failedFile || !GENERIC_FETCH.test(text)) return setError(text);
  Promise.all(runtimeFiles().map((u) => fetch(u, { method: "HEAD", cache: "no-store" })
    .then((r) => r.arrayBuffer(), () => null)))
    .then(() => { if (html.dataset.ready === "false") setError(text); });
}
window.addEventListener("error", (e) => reportStray(e.message || "A script failed to load."));
// (a missing module script is also noted by resource timing, with its HTTP status)
window.addEventListener("unhandledrejection", (e) => reportStray((e.reason && e.reason.message) || String(e.reason)));
// A failed <script> fetch (e.g. assets/live.js missing) fires an error event on the element only.
document.addEventListener("error", (e) => {
  const t = e.target;
  if (t && t.tagName === "SCRIPT" && html.dataset.ready === "false") setError(`Could not load ${t.src}.`);
}, true);
const LOAD_TIMEOUT_S = 120;
setTimeout(() => {
  if (html.dataset.ready === "false") setError(`Python did not start within ${LOAD_TIMEOUT_S} s.`);
}, LOAD_TIMEOUT_S * 1000);

// ---- the URL's state before Python -------------------------------------------------------------------
// The page was pre-rendered for the figure's default settings. A shared link asks for others: show them in the
// controls at once, and mark every number on the page as computed for other settings (data-stale, and a
// visible "computing for your settings…") until Python's first render replaces the figure. Python then
// validates the same query (state.Spec.from_query) and explains anything it rejects.
export function controlsFromQuery(search = location.search) {
  const form = $("#controls");
  if (!form) return [];
  const changed = [];
  for (const [key, value] of new URLSearchParams(search)) {
    const box = form.querySelector(`[data-field="${CSS.escape(key)}"]`);
    const el = box && box.querySelector("select, input, textarea");
    if (!el) continue;  // not a setting of this figure: Python will say so
    if (el.type === "checkbox") {
      const on = ["1", "true", "yes", "on"].includes(value.trim().toLowerCase());
      if (el.checked !== on) { el.checked = on; changed.push(key); }
    } else {
      const before = el.value;
      if (el.tagName === "SELECT") {
        const v = [...el.options].find((o) => o.value === value || o.value.toLowerCase() === value.toLowerCase());
        if (v) el.value = v.value;
        else {  // an option the pre-rendered list does not have (it depends on other settings)
          const opt = document.createElement("option");
          opt.value = opt.textContent = value;
          el.append(opt);
          el.value = value;
        }
      } else {
        el.value = value;
      }
      if (el.value !== before) changed.push(key);
    }
    box.hidden = false;  // a setting the link gives is shown, even if the defaults would hide it
  }
  return changed;
}

export function markStale() {
  const fig = $("#figure");
  if (!fig || fig.querySelector(".stale-banner")) return;
  for (const r of fig.querySelectorAll("[data-readout]")) r.setAttribute("data-stale", "");
  for (const part of fig.children) part.inert = true;  // the defaults' buttons and links: not for these settings
  const banner = document.createElement("p");
  banner.className = "stale-banner";
  banner.setAttribute("role", "status");
  banner.textContent = "Computing for your settings… Everything below is for the default settings until " +
    "Python is running.";
  fig.prepend(banner);  // Python's first render rewrites #figure: banner and data-stale go with it
  const summary = $("#summary");
  if (summary) summary.textContent = "Computing for your settings…";
  const note = $("#status .status-note");
  if (note) note.textContent = "Your settings are in the controls; the figure below still shows the defaults.";
}

if (html.dataset.ready === "false" && location.search && controlsFromQuery().length) markStale();

// Controls do nothing until Python runs: disable them meanwhile (with JavaScript off they stay as they are).
const fs = $("#controls-set");
if (fs && html.dataset.ready === "false") fs.disabled = true;
$("#controls")?.addEventListener("submit", (e) => e.preventDefault());

// ---- chrome buttons -----------------------------------------------------------------------------------
function say(text) {
  const s = $("#chrome-status");
  if (!s) return;
  s.textContent = text;
  clearTimeout(say.timer);
  say.timer = setTimeout(() => { s.textContent = ""; }, 4000);
}

async function copyText(text, what) {
  try {
    await navigator.clipboard.writeText(text);
    say(`${what} copied.`);
    return true;
  } catch (_) {
    say(`Copy failed: select the text and copy it by hand.`);
    return false;
  }
}

export function embedURL() {
  window.dispatchEvent(new Event("enginelab:flush-query")); // live.js writes the URL once the reader pauses
  const path = html.dataset.embedPath || location.pathname;
  return new URL(path + location.search, location.href).href;
}

// The site's embed.js (at the site root, one folder above this file), as an absolute URL.
export function embedScriptURL() {
  return new URL("../embed.js", import.meta.url).href;
}

// What a course page pastes: the frame, with an absolute URL and this figure's state, plus the one script line
// that sizes it (embed.js). Absolute URLs are built from where this page is served.
export function embedSnippet() {
  const title = document.title.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");
  const h = contentHeight();
  return `<iframe src="${embedURL().replace(/"/g, "%22")}" title="${title}" width="100%" height="${h}" ` +
         `style="border:0;max-width:100%" loading="lazy"></iframe>\n` +
         `<script src="${embedScriptURL().replace(/"/g, "%22")}" async></script>`;
}

// The height of the page's content in CSS px. Not scrollHeight: inside a frame that never falls below the
// frame's own height, so a frame sized by it could grow and never shrink. <html> has no height of its own here,
// so its box is exactly its content.
export function contentHeight() {
  return Math.ceil(document.documentElement.getBoundingClientRect().height);
}

// A chart saved on its own must say what it shows: above the chart, a title line (the figure) and the state in
// words (the page's live summary, the figure's describe()), wrapped to the chart's width.
function titled(chart) {
  const NS = "http://www.w3.org/2000/svg";
  const vb = (chart.getAttribute("viewBox") || "").split(/[\s,]+/).map(Number);
  const w = vb.length === 4 ? vb[2] : Number(chart.getAttribute("width")) || 600;
  const h = vb.length === 4 ? vb[3] : Number(chart.getAttribute("height")) || 400;
  const title = document.title.replace(/ · enginelab$/, "");
  const state = ($("#summary")?.textContent || "").trim();
  const perLine = Math.max(30, Math.floor(w / 6.8));  // characters of 12 px text per line
  const lines = [[title, "dl-title"]];
  let line = "";
  for (const word of state.split(/\s+/).filter(Boolean)) {
    if (line && line.length + 1 + word.length > perLine) { lines.push([line, "dl-state"]); line = word; }
    else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push([line, "dl-state"]);
  const top = 12 + 17 * lines.length;
  const out = document.createElementNS(NS, "svg");
  out.setAttribute("xmlns", NS);
  out.setAttribute("viewBox", `0 0 ${w} ${top + h}`);
  out.setAttribute("width", String(w));
  out.setAttribute("height", String(top + h));
  out.setAttribute("role", "img");
  out.setAttribute("class", "chart dl-sheet");
  const t = document.createElementNS(NS, "title");
  t.textContent = `${title}: ${state}`;
  out.append(t);
  lines.forEach(([text, cls], i) => {
    const el = document.createElementNS(NS, "text");
    el.setAttribute("x", "0");
    el.setAttribute("y", String(16 + 17 * i));
    el.setAttribute("class", cls);
    el.setAttribute("style", cls === "dl-title" ? "font-size:15px;font-weight:650" : "font-size:12px");
    el.textContent = text;
    out.append(el);
  });
  chart.setAttribute("y", String(top));
  chart.setAttribute("style", `width:${w}px;height:${h}px`);  // its own size, whatever .chart's CSS says
  out.append(chart);
  return out;
}

async function chartSVG() {
  // A figure drawn as several SVGs (the three KV-manager grids) supplies one standalone SVG of the current
  // state through the Python runtime (figure module's download_svg, see live.js and site/py/main.py); others: the
  // first chart.
  let clone = null;
  const own = typeof window.enginelab_svg === "function" ? await window.enginelab_svg() : null;
  if (own) {  // the figure's own file, which carries its title lines and legend (figures/<id>.py download_svg)
    clone = new DOMParser().parseFromString(String(own), "image/svg+xml").documentElement;
  } else {
    // the chart the reader sees (a figure drawn twice, wide and for a phone, shows one: chart.responsive)
    const charts = [...document.querySelectorAll("#figure svg.chart")];
    const svg = charts.find((s) => s.getClientRects().length) || charts[0];
    if (!svg) return null;
    clone = titled(svg.cloneNode(true));
  }
  // Colours come from CSS classes: carry the chart rules (light theme) into the file, and all of the
  // figure's own stylesheet.
  const rules = [];
  const ownSheet = `fig-${html.dataset.figure}.css`;
  for (const sheet of document.styleSheets) {
    let list;
    try { list = sheet.cssRules; } catch (_) { continue; }
    const mine = own && (sheet.href || "").endsWith(ownSheet);
    for (const r of list) if (r.selectorText && (mine || /(^|[\s,])\.(chart|seg|pool|bar-|legend|capacity|overflow|axis|mark)/.test(r.selectorText))) rules.push(r.cssText);
  }
  const style = document.createElementNS("http://www.w3.org/2000/svg", "style");
  // resolve the theme's custom properties, so the file keeps its colours outside this page
  const root = getComputedStyle(document.documentElement);
  style.textContent = rules.join("\n").replace(/var\((--[\w-]+)\s*(?:,\s*([^()]*))?\)/g,
    (_, name, fallback) => root.getPropertyValue(name).trim() || (fallback || "").trim() || "currentColor");
  clone.insertBefore(style, clone.firstChild);
  return '<?xml version="1.0" encoding="UTF-8"?>\n' + new XMLSerializer().serializeToString(clone);
}

document.addEventListener("click", async (e) => {
  const btn = e.target.closest("button");
  if (!btn) return;
  const copySel = btn.dataset.copyTarget;
  if (copySel) {
    const el = document.querySelector(copySel);
    if (el) await copyText(el.value !== undefined && el.tagName === "TEXTAREA" ? el.value : el.textContent, "Text");
    return;
  }
  switch (btn.dataset.action) {
    case "embed": {
      const box = $("#embed-box");
      const open = box.hidden;
      box.hidden = !open;
      btn.setAttribute("aria-expanded", String(open));
      if (open) {
        const ta = $("#embed-code");
        ta.value = embedSnippet();
        ta.focus();
        ta.select();
      }
      break;
    }
    case "download-svg": {
      const text = await chartSVG();
      if (!text) { say("This figure has no chart to download."); break; }
      const a = document.createElement("a");
      a.href = URL.createObjectURL(new Blob([text], { type: "image/svg+xml" }));
      a.download = `${html.dataset.figure || "figure"}.svg`;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 1000);
      say("SVG saved.");
      break;
    }
    case "share":
      window.dispatchEvent(new Event("enginelab:flush-query")); // the state just changed may not be in it yet
      await copyText(location.href, "Link");
      break;
  }
});

// Keep the embed snippet current when the state (URL) changes while the box is open.
const _replace = history.replaceState.bind(history);
history.replaceState = function (...args) {
  _replace(...args);
  const box = $("#embed-box");
  if (box && !box.hidden) $("#embed-code").value = embedSnippet();
  window.dispatchEvent(new CustomEvent("enginelab:statechange"));
};

// ---- height for a parent page (the protocol is documented in site/embed.js) --------------------------------
if (window.parent !== window) {
  html.classList.add("embedded");
  let last = 0;
  const post = (force) => {
    const h = contentHeight();
    if (h === last && force !== true) return;
    last = h;
    // "*": the host may be any site; the message says only how tall this page is and which figure it shows
    window.parent.postMessage({ type: "enginelab:height", v: 1, figure: html.dataset.figure, height: h,
                                href: location.href }, "*");
  };
  // the content's box, grown or shrunk: <html> (its height is its content's) and <body>
  const ro = new ResizeObserver(() => post());
  ro.observe(document.documentElement);
  ro.observe(document.body);
  // Chromium does not run ResizeObserver in a cross-origin frame that is scrolled out of view, so changes to the
  // page (a render, deferred advice filled in, a <details> opened, a message shown) are measured directly too
  let queued = false;
  new MutationObserver(() => {
    if (queued) return;
    queued = true;
    queueMicrotask(() => { queued = false; post(); });
  }).observe(document.body, { subtree: true, childList: true, characterData: true,
                              attributes: true, attributeFilter: ["open", "hidden", "style"] });
  window.addEventListener("resize", () => post());
  window.addEventListener("load", () => post());
  window.addEventListener("enginelab:statechange", () => post());
  // embed.js says hello when this frame loads (it may have missed our first report): answer at once
  window.addEventListener("message", (e) => {
    if (e.source === window.parent && e.data && e.data.type === "enginelab:hello") post(true);
  });
}

window.enginelab = { setStatus, setError, embedURL, embedSnippet, embedScriptURL, contentHeight, applyPatch };

// Back / Play / Step for animated figures (a figure module with STEP_FIELD): see steps.js.
import "./steps.js";
// One-click apply / undo buttons inside a figure (data-set-state, data-undo): see setstate.js.
import "./setstate.js";
