// enginelab embed.js: sizes every enginelab figure embedded on a page to its content, as it grows and shrinks.
//
// A course page that embeds figures adds this one line once, next to its <iframe> snippets (the Embed button of
// every figure page and the figure index give both, with absolute URLs):
//
//   <script src="{the address this site is served from}/embed.js" async></script>
//
// Plain JavaScript, no dependencies, nothing global but one listener. The message protocol (version 1), for
// anyone extending it: every message is a plain object with a string `type` that starts with "enginelab:".
//   frame -> host  {type: "enginelab:height", v: 1, figure: "<id>", height: <CSS px>, href: "<frame URL>"}
//                  sent by each figure page (site/assets/shell.js) whenever its content's height changes, and in
//                  answer to a hello. `height` is the height of the page's content, not of its frame.
//   host -> frame  {type: "enginelab:hello", v: 1}
//                  sent by this script to each frame of the site when the frame loads, so a frame that reported
//                  its height before this script ran reports it again.
// Messages come only from frames served from the origin this script was loaded from: a frame from any other
// site is ignored, and so is a message from a window that is not an <iframe> of this page. Unknown types and
// versions are ignored, so a newer frame and an older host (or the reverse) keep working.
(function () {
  "use strict";
  var script = document.currentScript;
  if (!script || !script.src) return;
  var SITE = new URL(script.src, location.href).origin;
  var MIN = 80, MAX = 100000; // CSS px: a figure page is never shorter, and a bogus height is never obeyed

  function frames() {
    return Array.prototype.slice.call(document.getElementsByTagName("iframe"));
  }

  function fromSite(frame) {
    try { return new URL(frame.src, location.href).origin === SITE; } catch (_) { return false; }
  }

  function hello(frame) {
    if (fromSite(frame) && frame.contentWindow) {
      frame.contentWindow.postMessage({ type: "enginelab:hello", v: 1 }, SITE);
    }
  }

  window.addEventListener("message", function (event) {
    if (event.origin !== SITE) return; // another site's frame (or window): not ours to size
    var msg = event.data;
    if (!msg || msg.type !== "enginelab:height" || typeof msg.height !== "number" || !isFinite(msg.height)) return;
    var list = frames();
    for (var i = 0; i < list.length; i++) {
      var frame = list[i];
      if (frame.contentWindow !== event.source) continue;
      var h = Math.max(MIN, Math.min(MAX, Math.ceil(msg.height)));
      frame.style.height = h + "px";
      frame.setAttribute("height", String(h));
      frame.setAttribute("data-enginelab-height", String(h));
    }
  });

  // a frame that loads (now or later, e.g. a "Try this" link that changes its src) is asked for its height
  document.addEventListener("load", function (event) {
    if (event.target && event.target.tagName === "IFRAME") hello(event.target);
  }, true);
  frames().forEach(hello);
})();
