// newsflow web reader and admin console: a single page application in
// plain ES modules over the JSON API. Everything shown is escaped (esc)
// except search highlights, which the server escapes and marks up itself.
const $ = (id) => document.getElementById(id);
const main = $("main");
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
const enc = encodeURIComponent;

async function api(path, opts = {}) {
  const res = await fetch(path, { credentials: "same-origin", ...opts, headers: { "Content-Type": "application/json", ...(opts.headers || {}) } });
  const text = await res.text();
  let body = {};
  try { body = text ? JSON.parse(text) : {}; } catch { body = { error: text }; }
  if (!res.ok) throw new Error(body.error || `${res.status} ${res.statusText}`);
  return body;
}

function ago(ms) {
  const m = Math.max(0, Math.round((Date.now() - ms) / 60000));
  return m < 60 ? `${m} min ago` : m < 2880 ? `${Math.round(m / 60)} h ago` : `${Math.round(m / 1440)} days ago`;
}
const until = (ms) => {
  const m = Math.round((ms - Date.now()) / 60000);
  return m <= 0 ? "now" : m < 120 ? `in ${m} min` : `in ${Math.round(m / 60)} h`;
};
const when = (ms) => `<time datetime="${new Date(ms).toISOString()}">${ago(ms)}</time>`;
const bytes = (n) => n < 1024 ? `${n} B` : n < 1 << 20 ? `${(n / 1024).toFixed(1)} KiB` : n < 1 << 30 ? `${(n / (1 << 20)).toFixed(1)} MiB` : `${(n / (1 << 30)).toFixed(2)} GiB`;
const plural = (n, w) => `${n} ${w}${n === 1 ? "" : "s"}`;

// Account.
let me = null;
async function loadMe() {
  try { me = await api("/api/v1/me"); } catch { me = null; }
  document.querySelector(".account").innerHTML = me
    ? `<a href="/preferences">${esc(me.username)}</a><a href="/history">History</a>${me.role === "admin" ? '<a href="/admin">Admin</a>' : ""}<button type="button" id="logout">Log out</button>`
    : '<a href="/login">Log in</a><a href="/register">Register</a>';
  $("logout")?.addEventListener("click", async () => { await api("/api/v1/auth/logout", { method: "POST" }); await loadMe(); go("/"); });
}

function page(title, body) {
  document.title = title ? `${title} · newsflow` : "newsflow";
  main.innerHTML = body;
}

// Story cards and the feed, with cursor-based infinite scroll.
function card(st) {
  const n = st.sources?.length || 1;
  const topics = (st.topics || []).map((t) => `<span class="topic">${esc(t.topic)}</span>`).join(" ");
  return `<article class="card" data-id="${esc(st.id)}">
    <h2><a href="/stories/${enc(st.id)}">${st.breaking ? '<span class="badge">Breaking</span> ' : ""}${esc(st.title)}</a></h2>
    <p class="meta">${esc(st.source || st.source_id)} · ${when(st.last_seen)} · <span class="sources">${plural(n, "source")}</span>${topics ? " · " + topics : ""}</p>
  </article>`;
}

function scroller(load, render, list, status, empty) {
  let cursor = "", done = false, busy = false;
  const more = async () => {
    if (done || busy) return;
    busy = true;
    try {
      const res = await load(cursor);
      list.insertAdjacentHTML("beforeend", render(res));
      cursor = res.next_cursor || "";
      done = !cursor;
      status.textContent = done ? (list.children.length ? "" : empty) : "";
    } catch (e) {
      status.innerHTML = `<span class="error">${esc(e.message)}</span>`;
    }
    busy = false;
  };
  new IntersectionObserver((es) => es.some((e) => e.isIntersecting) && more()).observe(status);
  return more();
}

async function showFeed(topic) {
  page(topic, `<h1 class="${topic ? "" : "visually-hidden"}">${topic ? esc(topic) : "Top stories"}</h1><div id="cards"></div><p id="more" class="meta">Loading…</p>`);
  const base = topic ? `/api/v1/stories?topic=${enc(topic)}&limit=20` : "/api/v1/feed?limit=20";
  await scroller((c) => api(base + (c ? `&cursor=${enc(c)}` : "")), (r) => r.stories.map(card).join(""), $("cards"), $("more"), "No stories yet.");
}

async function showStory(id) {
  const d = await api(`/api/v1/stories/${enc(id)}`);
  const names = {};
  for (const a of d.articles) names[a.source_id] = a.source || a.source_id;
  page(d.title, `<h1>${d.breaking ? '<span class="badge">Breaking</span> ' : ""}${esc(d.title)}</h1>
    <p class="meta">${plural(d.article_count, "article")} from ${plural(d.sources.length, "source")} · first seen ${when(d.first_seen)} · latest ${when(d.last_seen)}${(d.topics || []).map((t) => ` · <span class="topic">${esc(t.topic)}</span>`).join("")}</p>
    <section aria-labelledby="srcs"><h2 id="srcs">Sources</h2>
      <ul class="chips">${d.sources.map((s) => `<li>${esc(names[s.source_id] || s.source_id)} <span class="meta">(${s.articles})</span></li>`).join("")}</ul></section>
    <section aria-labelledby="arts"><h2 id="arts">Articles</h2>
    <div id="articles">${d.articles.map((a) => `<article class="card" data-article="${esc(a.id)}">
      <h3><a href="${esc(a.url)}" target="_blank" rel="noopener" data-read="${esc(a.id)}">${esc(a.title)}</a></h3>
      <p class="meta">${esc(a.source || a.source_id)} · ${when(a.published_at)}</p>
      ${a.summary ? `<p>${esc(a.summary)}</p>` : ""}
      <button type="button" data-share="${esc(a.id)}" aria-label="Share: ${esc(a.title)}">Share</button>
    </article>`).join("")}</div></section>`);
}

// Search with highlights, filters and more results on scroll.
async function showSearch(params) {
  const f = Object.fromEntries(["q", "topic", "source", "from", "to"].map((k) => [k, params.get(k) || ""]));
  $("q").value = f.q;
  const [topics, sources] = await Promise.all([api("/api/v1/topics").catch(() => ({})), api("/api/v1/sources").catch(() => ({ sources: [] }))]);
  const opts = (list, cur) => `<option value="">Any</option>` + list.map(([v, l]) => `<option value="${esc(v)}"${v === cur ? " selected" : ""}>${esc(l)}</option>`).join("");
  page(`Search: ${f.q}`, `<h1>Search${f.q ? `: ${esc(f.q)}` : ""}</h1>
    <form class="filters" id="filters">
      <input type="hidden" name="q" value="${esc(f.q)}">
      <label>Topic <select name="topic">${opts((topics.labels || []).map((t) => [t, t]), f.topic)}</select></label>
      <label>Source <select name="source">${opts(sources.sources.map((s) => [s.id, s.name || s.id]), f.source)}</select></label>
      <label>From <input type="date" name="from" value="${esc(f.from)}"></label>
      <label>To <input type="date" name="to" value="${esc(f.to)}"></label>
      <button>Filter</button></form>
    <p id="total" class="meta" role="status"></p><div id="hits"></div><p id="more" class="meta"></p>`);
  $("filters").addEventListener("submit", (e) => {
    e.preventDefault();
    const q = new URLSearchParams([...new FormData(e.target)].filter(([, v]) => v));
    go(`/search?${q}`);
  });
  const q = new URLSearchParams({ q: f.q, limit: "20" });
  for (const k of ["topic", "source"]) if (f[k]) q.set(k, f[k]);
  if (f.from) q.set("from", new Date(f.from + "T00:00:00Z").toISOString());
  if (f.to) q.set("to", new Date(Date.parse(f.to + "T00:00:00Z") + 86400000).toISOString());
  await scroller(async (c) => {
    const res = await api(`/api/v1/search?${q}${c ? `&cursor=${enc(c)}` : ""}`);
    $("total").textContent = plural(res.total, "result") + (res.partial ? " (some partitions did not answer)" : "");
    return res;
  }, (res) => res.hits.map((h) => `<article class="card hit">
    <h2><a href="/stories/${enc(h.story_id)}">${h.highlights?.title?.[0] || esc(h.title)}</a></h2>
    <p>${h.highlights?.summary?.[0] || esc(h.summary || "")}</p>
    <p class="meta">${esc(h.source || h.source_id)} · ${when(h.published_at)}${(h.topics || []).map((t) => ` · <span class="topic">${esc(t)}</span>`).join("")}</p></article>`).join(""),
  $("hits"), $("more"), "No results.");
}

function showAuth(kind) {
  const login = kind === "login", title = login ? "Log in" : "Register";
  page(title, `<h1>${title}</h1>
    <form class="stack" id="auth"><label>Username <input name="username" autocomplete="username" required></label>
    <label>Password <input name="password" type="password" minlength="${login ? 1 : 10}" autocomplete="${login ? "current-password" : "new-password"}" required></label>
    <button>${title}</button><p class="error" role="alert" id="err"></p></form>
    <p>${login ? 'No account? <a href="/register">Register</a>' : 'Have an account? <a href="/login">Log in</a>'}</p>`);
  $("auth").addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    try {
      await api(`/api/v1/auth/${kind}`, { method: "POST", body: JSON.stringify({ username: f.get("username"), password: f.get("password") }) });
      await loadMe();
      go("/");
    } catch (err) { $("err").textContent = err.message; }
  });
}

async function showPreferences() {
  const [p, t, s] = await Promise.all([api("/api/v1/preferences"), api("/api/v1/topics").catch(() => ({})), api("/api/v1/sources").catch(() => ({ sources: [] }))]);
  const topics = [...new Set([...(t.labels || []), ...p.topics])].sort();
  const names = new Map(s.sources.map((x) => [x.id, x.name || x.id]));
  for (const id of [...p.preferred_sources, ...p.excluded_sources]) if (!names.has(id)) names.set(id, id);
  const select = (name, label, chosen) => `<label>${label}<select name="${name}" multiple size="${Math.min(8, Math.max(3, names.size))}">${[...names].map(([id, n]) => `<option value="${esc(id)}"${chosen.includes(id) ? " selected" : ""}>${esc(n)}</option>`).join("")}</select></label>`;
  page("Preferences", `<h1>Preferences</h1><form class="stack wide" id="prefs">
    <fieldset><legend>Topics you follow</legend><div class="checks">${topics.map((x) => `<label><input type="checkbox" name="topics" value="${esc(x)}"${p.topics.includes(x) ? " checked" : ""}> ${esc(x)}</label>`).join("")}</div></fieldset>
    ${select("preferred_sources", "Preferred sources", p.preferred_sources)}
    ${select("excluded_sources", "Excluded sources", p.excluded_sources)}
    <button>Save</button><p role="status" id="saved" class="meta"></p></form>`);
  $("prefs").addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    try {
      await api("/api/v1/preferences", { method: "PUT", body: JSON.stringify({ topics: f.getAll("topics"), preferred_sources: f.getAll("preferred_sources"), excluded_sources: f.getAll("excluded_sources") }) });
      $("saved").textContent = "Saved.";
    } catch (err) { $("saved").textContent = err.message; }
  });
}

async function showHistory() {
  const h = await api("/api/v1/history");
  page("Reading history", `<h1>Reading history</h1>` + (h.history.length
    ? `<ol class="history">${h.history.map((r) => `<li>${r.story_id ? `<a href="/stories/${enc(r.story_id)}">${esc(r.title || r.article_id)}</a>` : esc(r.title || r.article_id)} <span class="meta">${esc(r.source || "")} · ${when(r.timestamp)}</span></li>`).join("")}</ol>`
    : "<p>Nothing read yet. Articles you open from a story page appear here.</p>"));
}

// Admin console: system state (refreshed while shown) and sources.
function clusterPanel(c) {
  if (!c) return "";
  return `<table><caption>Cluster nodes (this node: ${esc(c.node)})</caption><thead><tr><th scope="col">Node</th><th scope="col">State</th><th scope="col">Partitions</th><th scope="col">API</th></tr></thead>
    <tbody>${c.members.map((m) => `<tr><th scope="row">${esc(m.id)}${m.leader ? " (leader)" : ""}</th><td>${m.leaving ? "leaving" : m.up ? "up" : "down"}</td><td>${m.partitions}</td><td>${esc(m.http_addr)}</td></tr>`).join("")}</tbody></table>
    <details><summary>Partition owners</summary><table><thead><tr><th scope="col">Partition</th><th scope="col">Owner</th><th scope="col">Epoch</th></tr></thead>
    <tbody>${c.partitions.map((p) => `<tr><td>${p.partition}</td><td>${esc(p.owner || "none")}</td><td>${p.epoch}</td></tr>`).join("")}</tbody></table></details>`;
}

async function systemPanel() {
  const [st, prog, cl] = await Promise.all([api("/api/v1/admin/stats"), api("/api/v1/admin/progress"), api("/api/v1/admin/cluster").catch(() => null)]);
  const parts = prog.inputs.filter((i) => i.lag > 0);
  return `<p class="meta">ready: ${prog.ready} · caught up: ${prog.caught_up} · dead letters: <span id="dead">${st.dead_letters ?? esc(st.dead_letters_error)}</span> · uptime ${Math.round(st.uptime_s / 60)} min</p>
    <table><caption>Stages</caption><thead><tr><th scope="col">Stage</th><th scope="col">Records/s</th><th scope="col">Committed</th><th scope="col">Lag</th></tr></thead>
    <tbody>${st.stages.map((s) => `<tr><td>${esc(s.stage)}</td><td>${s.events_per_s.toFixed(1)}</td><td>${s.committed}</td><td>${s.lag}</td></tr>`).join("")}</tbody></table>
    <table><caption>Stores on disk</caption><tbody>${Object.entries(st.stores || {}).map(([k, v]) => `<tr><th scope="row">${esc(k)}</th><td>${bytes(v)}</td></tr>`).join("")}</tbody></table>
    ${clusterPanel(cl)}
    <details><summary>Lag per partition (${plural(parts.length, "partition")} behind)</summary>
    <table><thead><tr><th scope="col">Stage</th><th scope="col">Topic</th><th scope="col">Partition</th><th scope="col">Committed</th><th scope="col">Lag</th></tr></thead>
    <tbody>${prog.inputs.map((i) => `<tr><td>${esc(i.stage)}</td><td>${esc(i.topic)}</td><td>${i.partition}</td><td>${i.committed}</td><td>${i.lag}</td></tr>`).join("")}</tbody></table></details>`;
}

function sourceRow(s) {
  const c = s.crawl || {}, circuit = c.circuit?.state || "closed", paused = s.status === "paused";
  return `<tr data-source="${esc(s.id)}"><th scope="row"><a href="${esc(s.feed_url)}" rel="noopener">${esc(s.name || s.feed_url)}</a></th>
    <td>${esc(s.status)}${s.status_reason ? ` (${esc(s.status_reason)})` : ""}</td>
    <td>${c.last_crawl ? `${when(Date.parse(c.last_crawl))} ${esc(c.last_result?.outcome || "")}` : "never"}</td>
    <td>${s.status !== "active" ? "–" : c.next_crawl ? until(Date.parse(c.next_crawl)) : "now"}</td>
    <td>${c.consecutive_errors || 0}${c.last_error ? `: ${esc(c.last_error)}` : ""}</td><td>${esc(circuit)}</td>
    <td class="actions"><button type="button" data-act="crawl">Crawl now</button> <button type="button" data-act="${paused ? "resume" : "pause"}">${paused ? "Resume" : "Pause"}</button> <button type="button" data-act="delete">Delete</button></td></tr>`;
}

async function showAdmin() {
  const [src, sys] = await Promise.all([api("/api/v1/admin/sources"), systemPanel()]);
  page("Admin", `<h1>Admin</h1>
    <section aria-labelledby="sys"><h2 id="sys">System</h2><div id="system">${sys}</div></section>
    <section aria-labelledby="srcs"><h2 id="srcs">Sources (${src.sources.length})</h2>
      <form class="inline" id="add"><label>Feed or page URL <input name="url" type="url" required></label><button>Add source</button></form>
      <p role="status" id="addmsg" class="meta"></p>
      <p><a href="/api/v1/admin/sources/export" download="sources.opml">Export OPML</a> ·
      <label>Import OPML <input type="file" id="opml" accept=".opml,.xml,text/xml"></label></p>
      <div class="scroll"><table><caption class="visually-hidden">Sources and their crawl status</caption><thead><tr><th scope="col">Name</th><th scope="col">Status</th><th scope="col">Last crawl</th><th scope="col">Next crawl</th><th scope="col">Errors</th><th scope="col">Circuit</th><th scope="col">Actions</th></tr></thead>
      <tbody>${src.sources.map(sourceRow).join("")}</tbody></table></div></section>`);
  $("add").addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const s = await api("/api/v1/admin/sources", { method: "POST", body: JSON.stringify({ feed_url: new FormData(e.target).get("url") }) });
      await showAdmin();
      $("addmsg").textContent = `Added ${s.name || s.feed_url}.`;
    } catch (err) { $("addmsg").textContent = err.message; }
  });
  $("opml").addEventListener("change", async (e) => {
    const f = e.target.files[0];
    if (!f) return;
    try {
      const r = await api("/api/v1/admin/sources/import", { method: "POST", headers: { "Content-Type": "text/x-opml" }, body: await f.text() });
      await showAdmin();
      $("addmsg").textContent = `Imported: ${r.added ?? 0} added, ${r.skipped ?? 0} skipped.`;
    } catch (err) { $("addmsg").textContent = err.message; }
  });
  main.querySelectorAll("[data-act]").forEach((b) => b.addEventListener("click", async () => {
    const id = b.closest("tr").dataset.source, act = b.dataset.act;
    try {
      if (act === "crawl") await api(`/api/v1/admin/sources/${enc(id)}/crawl`, { method: "POST" });
      if (act === "pause" || act === "resume") await api(`/api/v1/admin/sources/${enc(id)}`, { method: "PATCH", body: JSON.stringify({ status: act === "pause" ? "paused" : "active" }) });
      if (act === "delete" && !confirm("Delete this source?")) return;
      if (act === "delete") await api(`/api/v1/admin/sources/${enc(id)}`, { method: "DELETE" });
      await showAdmin();
    } catch (err) { $("addmsg").textContent = err.message; }
  }));
}

// Topic tabs and the trending panel (live: refreshed every few seconds).
async function showTopics(active) {
  const t = await api("/api/v1/topics").catch(() => ({ topics: [] }));
  const cur = (on) => on ? ' aria-current="page"' : "";
  document.querySelector(".topics").innerHTML = `<a href="/"${cur(!active)}>Top</a>` +
    t.topics.map((x) => `<a href="/topics/${enc(x.topic)}"${cur(active === x.topic)}>${esc(x.topic)}</a>`).join("");
}

let trendWindow = localStorage.getItem("trendWindow") || "1h";
async function showTrending() {
  const aside = document.querySelector(".trending");
  let body;
  try {
    const t = await api(`/api/v1/trending?window=${enc(trendWindow)}&k=10&expand=articles`);
    body = t.items.length
      ? `<ol id="trending-list">${t.items.map((i) => `<li data-article="${esc(i.article_id)}">${i.story_id ? `<a href="/stories/${enc(i.story_id)}">${esc(i.title || i.article_id)}</a>` : esc(i.title || i.article_id)} <span class="meta">${plural(i.count, "share")}</span></li>`).join("")}</ol>`
      : `<p id="trending-list" class="meta">No shares in the last ${esc(trendWindow)}.</p>`;
  } catch (e) { body = `<p class="error">${esc(e.message)}</p>`; }
  aside.innerHTML = `<h2>Trending</h2><div role="group" aria-label="Window" class="windows">${["1m", "1h", "24h"].map((w) => `<button type="button" data-window="${w}" aria-pressed="${w === trendWindow}">${w}</button>`).join("")}</div>${body}`;
}

// Routing.
async function route(focus) {
  const url = new URL(location.href);
  const [, first, second] = url.pathname.split("/");
  selected = -1;
  try {
    await showTopics(first === "topics" ? decodeURIComponent(second) : "");
    if (first === "stories" && second) await showStory(decodeURIComponent(second));
    else if (first === "topics" && second) await showFeed(decodeURIComponent(second));
    else if (first === "search") await showSearch(url.searchParams);
    else if (first === "login" || first === "register") showAuth(first);
    else if (first === "preferences") await (me ? showPreferences() : go("/login"));
    else if (first === "history") await (me ? showHistory() : go("/login"));
    else if (first === "admin") await (me ? showAdmin() : go("/login"));
    else await showFeed("");
  } catch (e) {
    page("Error", `<h1>Something went wrong</h1><p class="error" role="alert">${esc(e.message)}</p>`);
  }
  if (focus) main.focus();
}

function go(path) { history.pushState(null, "", path); return route(true); }

// Reads, shares, links and trending windows.
const sessionId = crypto.randomUUID();
document.addEventListener("click", (e) => {
  const a = e.target.closest("a");
  if (a?.dataset.read) {
    if (me) navigator.sendBeacon("/api/v1/events/read", new Blob([JSON.stringify({ event_id: crypto.randomUUID(), user_id: me.id, article_id: a.dataset.read, session_id: sessionId, timestamp: Date.now() })], { type: "application/json" }));
    return;
  }
  if (a && a.origin === location.origin && !a.target && !a.hasAttribute("download") && !a.pathname.startsWith("/api/")) {
    e.preventDefault();
    go(a.pathname + a.search);
    return;
  }
  const share = e.target.closest("[data-share]");
  if (share) {
    share.disabled = true;
    api("/api/v1/events/share", { method: "POST", body: JSON.stringify({ event_id: crypto.randomUUID(), article_id: share.dataset.share, user_id: me?.id || "anonymous", share_type: "web", timestamp: Date.now() }) })
      .then(() => { share.textContent = "Shared"; setTimeout(showTrending, 500); }, (err) => { share.textContent = err.message; share.disabled = false; });
  }
  const w = e.target.closest("[data-window]");
  if (w) { trendWindow = w.dataset.window; localStorage.setItem("trendWindow", trendWindow); showTrending(); }
});

document.querySelector(".search").addEventListener("submit", (e) => { e.preventDefault(); go(`/search?q=${enc($("q").value)}`); });

// Theme: the system's, unless chosen.
const theme = localStorage.getItem("theme") || (matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light");
document.documentElement.dataset.theme = theme;
const themeButton = document.querySelector(".theme");
const syncTheme = () => themeButton.setAttribute("aria-pressed", String(document.documentElement.dataset.theme === "dark"));
syncTheme();
themeButton.addEventListener("click", () => {
  const t = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
  document.documentElement.dataset.theme = t;
  localStorage.setItem("theme", t);
  syncTheme();
});

// Keyboard: j/k next/previous story, o open, / search, ? help.
let selected = -1;
const help = $("help");
$("help-close").addEventListener("click", () => help.close());
document.addEventListener("keydown", (e) => {
  if (e.target.closest("input, textarea, select") || e.metaKey || e.ctrlKey || e.altKey || help.open) return;
  const cards = [...main.querySelectorAll(".card")];
  if ((e.key === "j" || e.key === "k") && cards.length) {
    selected = Math.max(0, Math.min(cards.length - 1, selected + (e.key === "j" ? 1 : -1)));
    cards.forEach((c, i) => c.classList.toggle("selected", i === selected));
    cards[selected].scrollIntoView({ block: "nearest" });
    cards[selected].querySelector("a")?.focus();
  } else if (e.key === "o" && cards[selected]) {
    cards[selected].querySelector("a")?.click();
  } else if (e.key === "/") {
    e.preventDefault();
    $("q").focus();
  } else if (e.key === "?") {
    help.showModal();
  }
});

window.addEventListener("popstate", () => route(true));
await loadMe();
await route(false);
await showTrending();
setInterval(() => document.hidden || showTrending(), 5000);
setInterval(async () => {
  if (location.pathname === "/admin" && !document.hidden && $("system")) $("system").innerHTML = await systemPanel().catch((e) => `<p class="error">${esc(e.message)}</p>`);
}, 5000);
