// Frame patches for animated figures whose module defines frame_patch(data) (see pylib/enginelab/page.py
// patch_view): instead of replacing the whole figure, the glue hands over one JSON text with
//   key      must equal the data-patch-key of the figure now in #figure, else nothing is touched
//   base     (instead of key) must equal its data-patch-base: a base patch redraws a new simulation on the same
//            skeleton (every part but the skeleton, by html, and the new data-patch-key by attrs)
//   classes  {container id: "class of child 0|class of child 1|..."}: only the attributes that differ are set
//   text     {element id: text content} (plain text, set as text: nothing to escape)
//   html     {element id: inner HTML}, built by the same Python as a full render (so it is escaped there)
//   attrs    {element id: {attribute: value}}
// and the DOM ends up as a full render of the same state would leave it. Returns false when the key does not
// match (the glue then renders in full).
export function applyPatch(text) {
  const p = JSON.parse(text);
  const root = document.querySelector("#figure [data-patch-key]");
  if (!root || (p.base !== undefined ? root.dataset.patchBase !== p.base : root.dataset.patchKey !== p.key)) return false;
  const byId = (id) => document.getElementById(id);
  const lists = Object.entries(p.classes || {}).map(([id, text]) => [id, text.split("|")]);
  for (const [id, classes] of lists) {
    const box = byId(id);
    if (!box || box.children.length !== classes.length) return false;
  }
  for (const [id, classes] of lists) {
    const kids = byId(id).children;
    for (let i = 0; i < classes.length; i++) {
      const c = kids[i];
      if (c.getAttribute("class") !== classes[i]) c.setAttribute("class", classes[i]);
    }
  }
  const whole = p.base !== undefined; // a base patch writes every part (text entries may have changed them since)
  for (const [id, inner] of Object.entries(p.html || {})) {
    const e = byId(id);
    // skip a part that has not changed since we last wrote it (reading innerHTML back would cost more)
    if (e && (whole || e.__patched !== inner)) { e.innerHTML = inner; e.__patched = inner; }
  }
  for (const [id, t] of Object.entries(p.text || {})) {
    const e = byId(id);
    if (e && e.__text !== t) { e.textContent = t; e.__text = t; }
  }
  for (const [id, attrs] of Object.entries(p.attrs || {})) {
    const e = byId(id);
    if (e) for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  }
  return true;
}
