// Companion and index pages.
// 1. "Make this figure live" and "Try this" links open the figure page in an <iframe> inside the section
//    (without JavaScript they simply navigate to the figure page). One live frame per section. Its height is
//    kept to its content by the site's embed.js, which this page includes like any host page.
// 2. The figure index's embed snippets get this site's absolute URLs (as the figure pages' Embed button gives),
//    and their Copy buttons work.
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

// The figure index: snippets with absolute URLs, built from where this page is served (it sits in figures/).
function snippet(figure, title) {
  const src = new URL(`${figure}.html`, location.href).href;
  const script = new URL("../embed.js", location.href).href;
  const t = title.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");
  return `<iframe src="${src}" title="${t}" width="100%" height="900" style="border:0;max-width:100%" ` +
         `loading="lazy"></iframe>\n<script src="${script}" async></script>`;
}
for (const ta of document.querySelectorAll("textarea[data-snippet-figure]")) {
  ta.value = snippet(ta.dataset.snippetFigure, ta.dataset.snippetTitle || ta.dataset.snippetFigure);
}
document.addEventListener("click", async (event) => {
  const btn = event.target.closest("button[data-copy-snippet]");
  if (!btn) return;
  const ta = document.getElementById(btn.dataset.copySnippet);
  try {
    await navigator.clipboard.writeText(ta.value);
    btn.textContent = "Copied";
  } catch (_) {
    ta.focus();
    ta.select();
    btn.textContent = "Select and copy by hand";
  }
  setTimeout(() => { btn.textContent = "Copy snippet"; }, 2500);
});
