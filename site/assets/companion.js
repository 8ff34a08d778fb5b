// Companion and index pages.
// 1. "Make this figure live" and "Try this" links open the figure page in an <iframe> inside the section
//    (without JavaScript they simply navigate to the figure page). One live frame per section.
// 2. Each embedded figure reports its height ({type: "enginelab:height", height}, see shell.js): size it.
function liveFrame(slotId, src, title) {
  const slot = document.getElementById(slotId);
  if (!slot) return false;
  let frame = slot.querySelector("iframe");
  if (!frame) {
    frame = document.createElement("iframe");
    frame.className = "fig-frame";
    frame.name = slotId;
    frame.title = title || "Live figure";
    frame.setAttribute("height", "640");
    slot.querySelector(".static-figure")?.setAttribute("hidden", "");
    slot.querySelector(".live-row")?.setAttribute("hidden", "");
    slot.prepend(frame);
  }
  frame.src = src;
  frame.focus();
  return true;
}

document.addEventListener("click", (event) => {
  const a = event.target.closest("a[data-frame]");
  if (!a || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
  const section = a.closest("section");
  const title = section?.querySelector("h2")?.textContent;
  if (liveFrame(a.dataset.frame, a.getAttribute("href"), title)) event.preventDefault();
});

window.addEventListener("message", (event) => {
  const msg = event.data;
  if (!msg || msg.type !== "enginelab:height" || typeof msg.height !== "number") return;
  for (const frame of document.querySelectorAll("iframe")) {
    if (frame.contentWindow === event.source) {
      const h = Math.max(200, Math.min(4000, Math.ceil(msg.height)));
      frame.style.height = `${h}px`;
      frame.setAttribute("height", String(h));
    }
  }
});
