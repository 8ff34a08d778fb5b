// Step-through transport for animated figures (a figure module that declares STEP_FIELD; page.py renders a
// .transport group with Back / Play / Step buttons next to the field's <input type=range>). A figure whose root
// carries data-stops is stepped from stop to stop (the KV-manager figure folds its quiet steps so).
//
// A button only moves the range input and fires its "input" event, so every frame goes through the page's one
// path: form -> state -> render -> history.replaceState (site/py/main.py). Play advances one frame every
// FRAME_MS, stops at the last frame, is suspended while the figure is off screen or the tab is hidden, and
// stops when the reader changes any control themselves. Nothing ever starts playing by itself (so nothing
// autoplays under prefers-reduced-motion either). All controls are native buttons and a native range input:
// keyboard use needs nothing extra.
const FRAME_MS = 700;
const html = document.documentElement;

export function initTransport(box) {
  const field = box.dataset.stepField;
  const input = () => document.getElementById(`f-${field}`);  // looked up each time: Python may rebuild it
  const playBtn = box.querySelector('[data-step-action="play"]');
  let playing = false;
  let visible = true;
  let timer = null;

  const bounds = (el) => [Number(el.min || 0), Number(el.max || 0), Number(el.value)];

  function set(value) {
    const el = input();
    if (!el) return false;
    const [lo, hi, v] = bounds(el);
    const nv = Math.min(hi, Math.max(lo, value));
    if (nv === v) return false;
    el.value = String(nv);
    el.dispatchEvent(new Event("input", { bubbles: true }));
    return true;
  }
  // A figure may fold runs of frames in which nothing happens: its root lists the frames to stop at
  // (data-stops="0,1,4,5,13"), and Back / Step / Play jump from stop to stop. The scrubber still reaches any frame.
  const stops = () => {
    const s = document.querySelector("#figure [data-stops]")?.dataset.stops;
    return s ? s.split(",").map(Number) : null;
  };
  const move = (delta) => {
    const el = input();
    if (!el) return false;
    const v = Number(el.value);
    const list = stops();
    if (!list) return set(v + delta);
    const next = delta > 0 ? list.find((t) => t > v) : [...list].reverse().find((t) => t < v);
    return next === undefined ? false : set(next);
  };

  function schedule() {
    clearInterval(timer);
    timer = null;
    const ticking = playing && visible && !document.hidden && html.dataset.ready === "true";
    if (ticking) timer = setInterval(() => { if (!move(1)) setPlaying(false); }, FRAME_MS);
    box.dataset.playing = String(playing);
    box.dataset.ticking = String(ticking);
  }

  function setPlaying(on) {
    playing = on;
    playBtn.textContent = on ? "Pause" : "Play";
    schedule();
  }

  box.addEventListener("click", (e) => {
    const btn = e.target.closest("button[data-step-action]");
    if (!btn) return;
    const action = btn.dataset.stepAction;
    if (action === "play") {
      if (playing) { setPlaying(false); return; }
      const el = input();
      if (el) {
        const [lo, hi, v] = bounds(el);
        if (v >= hi) set(lo);  // at the end: start over
        else move(1);          // show the next frame at once, then every FRAME_MS
      }
      setPlaying(true);
    } else {
      setPlaying(false);
      move(action === "back" ? -1 : 1);
    }
  });
  // The reader's own change of any control (a trusted event) stops playback; ours are untrusted.
  document.getElementById("controls")?.addEventListener("input", (e) => { if (e.isTrusted) setPlaying(false); });
  document.addEventListener("visibilitychange", schedule);
  const root = document.getElementById("figure");
  if (root && "IntersectionObserver" in window) {
    new IntersectionObserver((entries) => {
      for (const en of entries) visible = en.isIntersecting;
      schedule();
    }).observe(root);
  }
  schedule();
  return { setPlaying, move, isPlaying: () => playing };
}

for (const box of document.querySelectorAll(".transport[data-step-field]")) initTransport(box);
