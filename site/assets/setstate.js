// One-click state changes, for any figure page. A button inside the figure with
//   data-set-state='{"kv":"q8_0","ngl":"auto"}'
// puts those values into the form's controls (by field name) and fires the form's "input" event, so the change
// takes the page's one path: form -> state -> render -> history.replaceState (site/py/main.py). Before each
// apply the form's current values are pushed on a stack; a button with data-undo pops the last entry back into
// the form the same way. Undo buttons are enabled only while there is something to undo (they are re-rendered
// with the figure, so this is re-checked after every render).
const html = document.documentElement;
const stack = [];
const form = () => document.getElementById("controls");

function snapshot() {
  const out = {};
  for (const el of form().elements) {
    if (el.name) out[el.name] = el.type === "checkbox" ? el.checked : el.value;
  }
  return out;
}

function setControl(el, value) {
  if (el.type === "checkbox") { el.checked = value === true || value === "1" || value === 1; return; }
  const v = String(value);
  if (el.tagName === "SELECT" && ![...el.options].some((o) => o.value === v)) {
    // a value outside the current options (they depend on other fields): let Python validate it
    const opt = document.createElement("option");
    opt.value = v;
    opt.textContent = v;
    el.append(opt);
  }
  el.value = v;
}

function write(values) {
  const f = form();
  for (const [name, value] of Object.entries(values)) {
    const el = f.elements.namedItem(name);
    if (el && el.tagName) setControl(el, value);
  }
  f.dispatchEvent(new Event("input", { bubbles: true }));
}

function refreshUndo() {
  for (const b of document.querySelectorAll("[data-undo]")) b.disabled = stack.length === 0;
}

document.addEventListener("click", (e) => {
  const btn = e.target.closest("button[data-set-state], button[data-undo]");
  if (!btn || html.dataset.ready !== "true" || !form()) return;
  if (btn.hasAttribute("data-undo")) {
    if (stack.length) write(stack.pop());
  } else {
    let change;
    try { change = JSON.parse(btn.dataset.setState); } catch (_) { return; }
    stack.push(snapshot());
    write(change);
  }
  refreshUndo();
  // the re-render replaced the clicked button: keep keyboard focus in the same place (Undo, else the first Apply)
  const undo = document.querySelector("[data-undo]");
  const target = undo && !undo.disabled ? undo : document.querySelector("button[data-set-state]");
  if (target && !btn.isConnected) target.focus();
});

const root = document.getElementById("figure");
// subtree: parts of a figure may be filled in after its render (App.after_render in site/py/main.py)
if (root) new MutationObserver(refreshUndo).observe(root, { childList: true, subtree: true });
