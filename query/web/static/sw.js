// newsflow service worker: the page's shell works offline, and the last
// story lists and stories read online are shown when the network is gone.
// Everything else (search, accounts, admin, events) needs the node.
const shell = "newsflow-shell-v1";
const saved = "newsflow-api";
const assets = ["/", "/app.js", "/app.css", "/icon.svg", "/manifest.webmanifest"];
// Reading endpoints kept for offline reading (network first).
const readable = /^\/api\/v1\/(feed|stories|topics|breaking)(\/|$)/;

self.addEventListener("install", (e) => {
  e.waitUntil(caches.open(shell).then((c) => c.addAll(assets)).then(() => self.skipWaiting()));
});

self.addEventListener("activate", (e) => {
  e.waitUntil(caches.keys()
    .then((keys) => Promise.all(keys.filter((k) => k !== shell && k !== saved).map((k) => caches.delete(k))))
    .then(() => self.clients.claim()));
});

// networkFirst answers from the network and keeps a copy; offline, from
// the copy, marked X-Newsflow-Saved: 1 so that the page can say so (a
// browser's navigator.onLine is not a reliable witness).
async function networkFirst(req, cacheName, fallback) {
  try {
    const res = await fetch(req);
    if (res.ok) (await caches.open(cacheName)).put(fallback || req, res.clone());
    return res;
  } catch (err) {
    const hit = await caches.match(fallback || req);
    if (!hit) throw err;
    const headers = new Headers(hit.headers);
    headers.set("X-Newsflow-Saved", "1");
    return new Response(hit.body, { status: hit.status, statusText: hit.statusText, headers });
  }
}

self.addEventListener("fetch", (e) => {
  const req = e.request, url = new URL(req.url);
  if (req.method !== "GET" || url.origin !== location.origin) return;
  if (req.mode === "navigate") {
    // Every page is the same shell (client-side routes).
    e.respondWith(networkFirst(req, shell, "/"));
  } else if (assets.includes(url.pathname)) {
    e.respondWith(networkFirst(req, shell));
  } else if (readable.test(url.pathname)) {
    e.respondWith(networkFirst(req, saved));
  }
});
