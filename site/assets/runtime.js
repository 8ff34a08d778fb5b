// The Python runtime for figure frames: where a figure's state is turned into HTML (site/py/main.py).
//
// A figure page opened on its own boots Pyodide itself ("own"). Figures embedded in a page share one runtime
// ("shared"): the frames that come into view elect a leader over BroadcastChannel; the leader boots Pyodide
// and serves every other frame over the same channels. A follower sends {state} and gets back the
// HTML to write; the data flow stays one way (state -> Python -> HTML string -> one DOM write in the frame
// that shows it, see live.js). When the leader goes (its frame removed, its tab hidden), the others elect a
// new one, which boots a runtime and says so; every follower opens its session again from its URL (which holds
// the figure's whole state) and carries on. Where BroadcastChannel is missing, each frame boots its own, as a
// page on its own does.
//
// Channel messages ({t: ...}; names carry the build, so frames of two builds never share a runtime):
//   "enginelab-rt-<build>"         claim {id}          a frame offers to lead (and so asks who leads)
//                                  leader {id, ready, error}   the leader says it leads / is ready / failed
//                                  gone {id}           the leader stops leading
//   "enginelab-rt-<build>:<id>"    req {from, seq, text, file}  a request to the frame <id> (the leader)
//                                  res {seq, text}     its answer, on the asking frame's own channel
//                                  bye {from}          a follower leaves (its session can go)
// Requests and answers are JSON texts (site/py/main.py's serve): the same bytes in-process and over a channel.
//
// The direct path: frames of this site on one host page are same-origin with each other, so they share one
// event loop and can call into each other. A ready leader puts its serve on window.enginelab_direct; a follower
// finds it among its parent's frames (window.parent.frames: readable across origins; the leader's own window
// is same-origin) and calls it synchronously, which saves the channel's two hops (a task each way, and a
// rendering update between them, 8-20 ms per change on a 2-core machine). Everything else (the election, file
// reads, remote reads, bye) stays on the channel, and a follower that cannot reach the leader's window (a
// leader nested in another frame) or whose direct call fails uses the channel as before.

const html = document.documentElement;
const ROOT = new URL("../", import.meta.url); // the site's root (this file is in assets/)
const BUILD = html.dataset.build || "dev";
const NAME = `enginelab-rt-${BUILD}`;

// Where the time goes until the first render (for `build.py bench` and the curious: window.enginelab_timing).
export const timing = (window.enginelab_timing = {});
const mark = (name) => { timing[name] = performance.now(); };

const PYODIDE_FILES = ["pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json"];

let local = null; // this frame's own runtime (a promise), once booted

async function get(url, how) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`Could not load ${url.pathname} (HTTP ${r.status}).`);
  return r[how]();
}

// Boot Pyodide from the vendored files, our wheel on its path (imported from the zip as it is: nothing to
// unpack), and the glue imported: {serve(client, text) -> text, serveFile(client, file) -> Promise<text>,
// serveAsync(client, text, note) -> Promise<text>, calling note(text) with what to show meanwhile}.
async function boot(status = (text, step) => window.enginelab?.setStatus(text, step)) {
  mark("boot_start");
  // fetch the wheel and the glue while Pyodide loads
  const wheelP = get(new URL(`wheels/${html.dataset.wheel}`, ROOT), "arrayBuffer");
  const glueP = get(new URL("py/main.py", ROOT), "text");
  wheelP.catch(() => {});
  glueP.catch(() => {});
  let loadPyodide;
  try {
    ({ loadPyodide } = await import(new URL("pyodide/pyodide.mjs", ROOT).href));
  } catch (e) {
    throw new Error(`Could not load pyodide/pyodide.mjs (${e.message}).`);
  }
  mark("pyodide_js");
  let py;
  try {
    py = await loadPyodide({ indexURL: new URL("pyodide/", ROOT).href, packages: [] });
  } catch (e) {
    // Pyodide's own error says only "Failed to fetch" (its first fetches may even precede shell.js's fetch
    // wrapper): ask for its files again (HEAD, no bodies) so the page can name the one that fails
    await Promise.all(PYODIDE_FILES.map((f) => fetch(new URL(`pyodide/${f}`, ROOT), { method: "HEAD", cache: "no-store" })
      .then((r) => r.arrayBuffer(), () => null)));
    throw e;
  }
  mark("pyodide_ready");
  status("Python is running; loading enginelab…", 3);
  const [wheel, glue] = await Promise.all([wheelP, glueP]);
  mark("files_ready");
  status("Python is running; importing enginelab…", 4);
  py.FS.mkdirTree("/enginelab");
  py.FS.writeFile(`/enginelab/${html.dataset.wheel}`, new Uint8Array(wheel));
  py.FS.writeFile("/enginelab/main.py", glue);
  py.runPython(`import sys; sys.path[:0] = ["/enginelab/${html.dataset.wheel}", "/enginelab"]`);
  const main = py.pyimport("main");
  mark("glue_imported");
  return {
    serve: (client, text) => main.serve(client, text),
    serveFile: (client, file) => main.serve_file(client, file),
    serveAsync: (client, text, note) => main.serve_async(client, text, note),
    ready: () => main.ready(),
    // the WebAssembly heap Python lives in, in bytes (it grows and never shrinks; for `build.py bench`)
    heapBytes: () => py._module?.HEAPU8?.length ?? null,
  };
}

// This frame's own runtime, booted once (the page's first script may have started it: see figure.html).
export function bootLocal(status) {
  if (!local) local = boot(status);
  return local;
}

// ---- own: this frame's runtime, called in-process (answers are synchronous once it is up) ------------------
class Own {
  constructor(id, status) {
    this.id = id;
    this.mode = "own";
    this.booting = bootLocal(status).then((rt) => { this.rt = rt; return rt; });
  }
  request(msg) {
    const text = JSON.stringify(msg);
    if (this.rt) return JSON.parse(this.rt.serve(this.id, text));
    return this.booting.then((rt) => JSON.parse(rt.serve(this.id, text)));
  }
  async file(f) {
    const rt = this.rt || (await this.booting);
    return JSON.parse(await rt.serveFile(this.id, f));
  }
  // a request that waits on the network (a remote model): onNote(answer) for each note meanwhile
  async call(msg, onNote) {
    const rt = this.rt || (await this.booting);
    return JSON.parse(await rt.serveAsync(this.id, JSON.stringify(msg), (t) => onNote(JSON.parse(t))));
  }
  ready() { if (this.rt) this.rt.ready(); }
}

// ---- shared: one leader per page, the others its followers ------------------------------------------------
// The election runs on BroadcastChannel alone: Web Locks, like storage, are denied to a frame embedded on
// another site by browsers that block third-party storage, while BroadcastChannel is only partitioned (the
// frames of one host page still hear each other).
//   - A frame that comes into view claims the lead; a leader answers with itself (and repeats itself every
//     HEARTBEAT_MS). Hearing no leader within CLAIM_MS, the smallest id among the claims heard leads. Should two frames lead at once (a claim that arrived late), the one with the larger id steps
//     down as soon as it hears the other: its followers move over; it keeps its runtime for its own figure.
//   - A leader that goes (its frame removed or navigated: pagehide; its tab hidden) says "gone" and its
//     followers elect again at once; a leader not heard for SILENT_MS (a crashed frame) is taken as gone.
const CLAIM_MS = 250;
const HEARTBEAT_MS = 1000;
const SILENT_MS = 10000;

class Shared {
  constructor(id, status, onError) {
    this.id = id;
    this.mode = "follower";
    this.status = status;
    this.onError = onError;
    this.seq = 0;
    this.pending = new Map(); // seq -> {text, file, call, onNote, resolve}
    this.leader = null; // {id, ready, seen}
    this.claims = null; // Set of claimed ids while an election runs
    this.outs = new Map(); // follower id -> its channel (while leading)
    this.direct = null; // the leader's window.enginelab_direct, when this frame can reach it
    this.ctl = new BroadcastChannel(NAME);
    this.inbox = new BroadcastChannel(`${NAME}:${id}`);
    this.ctl.onmessage = (e) => this.control(e.data || {});
    this.inbox.onmessage = (e) => this.incoming(e.data || {});
    this.elect();
    setInterval(() => this.tick(), HEARTBEAT_MS);
    document.addEventListener("visibilitychange", () => {
      if (document.hidden) this.resign();
      else if (!this.leader) this.elect();
    });
    addEventListener("pagehide", () => {
      this.resign();
      if (this.leader) this.out(this.leader.id).postMessage({ t: "bye", from: id });
    });
  }

  leading() { return this.leader && this.leader.id === this.id; }

  setMode(mode) {
    this.mode = mode;
    if (html.dataset.runtime) html.dataset.runtime = mode; // <html data-runtime>: own, leader or follower
  }

  // claim (a leader answers a claim with itself); unless a leader speaks within CLAIM_MS, the smallest
  // claim heard leads
  elect() {
    if (this.claims || document.hidden) return;
    this.claims = new Set([this.id]);
    this.ctl.postMessage({ t: "claim", id: this.id });
    setTimeout(() => {
      const winner = [...this.claims].sort()[0];
      this.claims = null;
      if (this.leader) return;
      // a frame of this page that already leads, found by looking (its claim or announcement may still be in
      // the channel: a long task, such as a Pyodide start in the same process, delays messages past CLAIM_MS,
      // and two frames would each boot a runtime). Frames of one origin share one thread, so whichever decides
      // first marks itself (window.enginelab_lead) before any other can look.
      const other = this.findSibling("enginelab_lead");
      if (other) { this.control({ t: "leader", id: other.id, ready: other.ready() }); return; }
      if (winner === this.id) this.lead();
      else setTimeout(() => { if (!this.leader) this.elect(); }, 4 * CLAIM_MS); // it should have spoken by now
    }, CLAIM_MS);
  }

  async lead() {
    this.setMode("leader");
    this.leader = { id: this.id, ready: false };
    const self = this;
    window.enginelab_lead = { build: BUILD, id: this.id, ready: () => !!(self.leading() && self.leader.ready) };
    this.announce();
    let rt;
    try {
      rt = await bootLocal(this.status);
    } catch (e) {
      delete window.enginelab_lead;
      this.ctl.postMessage({ t: "leader", id: this.id, error: String(e.message || e) });
      this.onError(String(e.message || e));
      return;
    }
    if (this.mode === "follower") return; // stepped down before it was up: this frame follows the other leader
    this.rt = rt;
    if (!this.leading()) return; // stepped down meanwhile
    this.leader.ready = true;
    window.enginelab_direct = {
      build: BUILD,
      id: this.id,
      // a leader that stepped down or resigned serves nobody else: the caller falls back to the channel
      serve(client, text) {
        if (!self.leading()) throw new Error("not leading");
        return self.rt.serve(client, text);
      },
    };
    this.announce();
    this.flush();
  }

  // what another frame of this build among our parent's frames puts on its window under `name` (and, given
  // id, only that frame's), or null: frames of another origin cannot be read, and are not ours
  findSibling(name, id = null) {
    let frames;
    try { frames = window.parent.frames; } catch { return null; }
    for (let i = 0; i < frames.length; i++) {
      try {
        if (frames[i] === window) continue;
        const d = frames[i][name];
        if (d && d.build === BUILD && d.id !== this.id && (id === null || d.id === id)) return d;
      } catch { /* a frame of another origin */ }
    }
    return null;
  }

  // the leader's direct entry point, if its window is one of our parent's frames (see the top of this file)
  findDirect(id) {
    const d = this.findSibling("enginelab_direct", id);
    return d && typeof d.serve === "function" ? d : null;
  }

  // a request answered in-process by the leader's runtime, or undefined (then it goes over the channel)
  viaDirect(text) {
    const d = this.direct;
    if (!d || !this.leader || !this.leader.ready || d.id !== this.leader.id) return undefined;
    try {
      return JSON.parse(d.serve(this.id, text));
    } catch {
      this.direct = null; // gone or stepped down: the channel carries on, and the election sorts it out
      return undefined;
    }
  }

  announce() {
    if (this.leading()) this.ctl.postMessage({ t: "leader", id: this.id, ready: this.leader.ready });
  }

  // stop leading (tab hidden, frame going): the others elect again; this frame keeps its runtime for itself
  resign() {
    if (!this.leading()) return;
    this.ctl.postMessage({ t: "gone", id: this.id });
    this.leader = null;
    delete window.enginelab_direct;
    delete window.enginelab_lead;
    this.setMode("own");
  }

  tick() {
    if (this.leading()) this.announce();
    else if (this.leader && !this.rt && performance.now() - this.leader.seen > SILENT_MS) {
      this.leader = null;
      this.elect();
    }
  }

  out(id) {
    let ch = this.outs.get(id);
    if (!ch) { ch = new BroadcastChannel(`${NAME}:${id}`); this.outs.set(id, ch); }
    return ch;
  }

  control(m) {
    if (m.t === "claim" && this.claims) this.claims.add(m.id);
    else if (m.t === "claim") this.announce(); // (only a leader announces)
    else if (m.t === "gone" && this.leader && this.leader.id === m.id) {
      this.leader = null;
      this.direct = null;
      this.elect();
    } else if (m.t === "leader" && m.id !== this.id) {
      if (m.error) { this.onError(m.error); return; }
      if (this.leading()) {
        if (m.id > this.id) { this.announce(); return; } // two leaders: the smaller id stays
        // step down: a runtime already up still serves this frame; one still booting is not waited for, the
        // frame follows the other leader (so a late claim never leaves two runtimes serving)
        this.setMode(this.rt ? "own" : "follower");
        delete window.enginelab_direct;
        delete window.enginelab_lead;
      }
      if (this.leader && this.leader.id < m.id && !this.leading()) return; // we follow the smaller: it stays
      if (!this.leader || this.leader.id !== m.id) { this.leader = { id: m.id, ready: false }; this.direct = null; }
      this.leader.seen = performance.now();
      if (m.ready && !this.leader.ready) {
        this.leader.ready = true;
        if (!this.rt) this.direct = this.findDirect(m.id);
        this.flush();
      }
      else if (!m.ready && !this.rt) this.status("Starting Python for the figures on this page…", 1);
    }
  }

  incoming(m) {
    if (m.t === "res") {
      const p = this.pending.get(m.seq);
      if (p) { this.pending.delete(m.seq); p.resolve(JSON.parse(m.text)); }
    } else if (m.t === "note") {
      const p = this.pending.get(m.seq);
      if (p && p.onNote) p.onNote(JSON.parse(m.text));
    } else if (m.t === "req" && this.rt) {
      // served in arrival order: the runtime is single-threaded (a file read awaits its slices)
      const reply = (text) => this.out(m.from).postMessage({ t: "res", seq: m.seq, text });
      if (m.file) {
        this.rt.serveFile(m.from, m.file).then(reply);
      } else if (m.call) {
        const note = (text) => this.out(m.from).postMessage({ t: "note", seq: m.seq, text });
        this.rt.serveAsync(m.from, m.text, note).then(reply);
      } else {
        this.out(m.from).postMessage({ t: "res", seq: m.seq, text: this.rt.serve(m.from, m.text) });
      }
    } else if (m.t === "bye" && this.rt) {
      this.rt.serve(m.from, '{"op":"close"}');
      this.outs.get(m.from)?.close();
      this.outs.delete(m.from);
    }
  }

  // send every request not yet answered to the runtime now serving (a new leader answers "no-session" to a
  // frame it does not know yet, and live.js opens the session again)
  flush() {
    for (const [seq, p] of this.pending) this.send(seq, p);
  }

  send(seq, p) {
    if (this.rt) {
      this.pending.delete(seq);
      if (p.file) this.rt.serveFile(this.id, p.file).then((t) => p.resolve(JSON.parse(t)));
      else if (p.call) this.rt.serveAsync(this.id, p.text, (t) => p.onNote(JSON.parse(t))).then((t) => p.resolve(JSON.parse(t)));
      else p.resolve(JSON.parse(this.rt.serve(this.id, p.text)));
    } else if (this.leader && this.leader.ready) {
      if (!p.file && !p.call) {
        const r = this.viaDirect(p.text);
        if (r !== undefined) { this.pending.delete(seq); p.resolve(r); return; }
      }
      this.out(this.leader.id).postMessage({ t: "req", from: this.id, seq, text: p.text, file: p.file, call: p.call });
    }
  }

  request(msg) {
    const text = JSON.stringify(msg);
    if (this.rt) return JSON.parse(this.rt.serve(this.id, text)); // a frame with a runtime serves itself
    if (!this.pending.size) {
      const r = this.viaDirect(text); // answered now, in order: nothing of ours is waiting on the channel
      if (r !== undefined) return r;
    }
    return new Promise((resolve) => {
      const seq = ++this.seq;
      const p = { text, resolve };
      this.pending.set(seq, p);
      this.send(seq, p);
    });
  }

  file(f) {
    return new Promise((resolve) => {
      const seq = ++this.seq;
      const p = { file: f, resolve };
      this.pending.set(seq, p);
      this.send(seq, p);
    });
  }

  call(msg, onNote) {
    return new Promise((resolve) => {
      const seq = ++this.seq;
      const p = { text: JSON.stringify(msg), call: true, onNote, resolve };
      this.pending.set(seq, p);
      this.send(seq, p);
    });
  }

  ready() { if (this.rt && this.mode === "leader") this.rt.ready(); }
}

// The runtime for this frame: its own on a page of its own (or where BroadcastChannel is missing), else the
// page's shared one.
export function connect({ status, onError }) {
  const id = (crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2)) + "";
  if (window.parent !== window && typeof BroadcastChannel === "function") {
    return new Shared(id, status, onError);
  }
  return new Own(id, status);
}
