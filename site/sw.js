// enginelab's service worker: this build's files, kept for the next visit and for use with no network.
// build.py writes it to dist/sw.js with this build's id and every file's sha256 filled in (do not edit there).
//
// - install: fetch every file of the build (revalidated, never a stale HTTP-cache copy), check it against the
//   build's hash, and keep it in one cache named after the build ("enginelab-<id>"). A file that does not match
//   (a server half-way through a deploy) fails the install: the previous build stays in charge, whole.
// - fetch: a file of the build is answered from that cache (query strings ignored: they are figure state);
//   anything else goes to the network as usual.
// - activate: the caches of other builds are deleted. A new build's worker waits, as browsers do, until no page
//   of the old build is open, so a page never mixes files of two builds.
// Pages register it (site/assets/live.js) once their figure is live and the reader has paused for a few seconds.
const VERSION = "__VERSION__";
const CACHE = `enginelab-${VERSION}`;
const FILES = __FILES__; // path under the site root -> sha256
const BASE = new URL("./", self.location);

const hex = (buf) => [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, "0")).join("");

// Two files at a time: the install is background work, and a page may still be in use beside it.
const PARALLEL = 2;

async function precache() {
  const cache = await caches.open(CACHE);
  const todo = Object.entries(FILES);
  const one = async ([path, sha]) => {
    const url = new URL(path, BASE);
    const res = await fetch(new Request(url, { cache: "no-cache" }));
    if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
    const got = hex(await crypto.subtle.digest("SHA-256", await res.clone().arrayBuffer()));
    if (got !== sha) throw new Error(`${path} is not build ${VERSION}'s`);
    await cache.put(url, res);
  };
  const lane = async () => {
    while (todo.length) await one(todo.shift());
  };
  try {
    await Promise.all(Array.from({ length: PARALLEL }, lane));
  } catch (e) {
    todo.length = 0; // the other lane stops too
    await caches.delete(CACHE);
    throw e;
  }
}

self.addEventListener("install", (event) => event.waitUntil(precache()));

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    for (const name of await caches.keys()) {
      if (name.startsWith("enginelab-") && name !== CACHE) await caches.delete(name);
    }
    await self.clients.claim();
  })());
});

self.addEventListener("fetch", (event) => {
  const req = event.request;
  if (req.method !== "GET") return;
  const url = new URL(req.url);
  if (url.origin !== BASE.origin || !url.pathname.startsWith(BASE.pathname)) return;
  let path = decodeURIComponent(url.pathname.slice(BASE.pathname.length));
  if (path === "" || path.endsWith("/")) path += "index.html";
  if (!Object.prototype.hasOwnProperty.call(FILES, path)) return;
  event.respondWith((async () => {
    const hit = await (await caches.open(CACHE)).match(new URL(path, BASE).href);
    return hit || fetch(req);
  })());
});
