// newsflow web reader: a small single page application over the JSON API.
const main = document.getElementById("main");
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

async function api(path, opts = {}) {
  const res = await fetch(path, { credentials: "same-origin", ...opts, headers: { "Content-Type": "application/json", ...(opts.headers || {}) } });
  const text = await res.text();
  const body = text ? JSON.parse(text) : {};
  if (!res.ok) throw new Error(body.error || res.statusText);
  return body;
}

let me = null;
async function loadMe() {
  try { me = await api("/api/v1/me"); } catch { me = null; }
  const nav = document.querySelector(".account");
  nav.innerHTML = me
    ? `<a href="/preferences">${esc(me.username)}</a><a href="/history">History</a>${me.role === "admin" ? '<a href="/admin">Admin</a>' : ""}<button type="button" id="logout">Log out</button>`
    : '<a href="/login">Log in</a><a href="/register">Register</a>';
  document.getElementById("logout")?.addEventListener("click", async () => { await api("/api/v1/auth/logout", { method: "POST" }); await loadMe(); go("/"); });
}

function ago(ms) {
  const m = Math.max(0, Math.round((Date.now() - ms) / 60000));
  return m < 60 ? `${m} min ago` : m < 2880 ? `${Math.round(m / 60)} h ago` : `${Math.round(m / 1440)} days ago`;
}

function card(st) {
  const n = st.sources?.length || 1;
  const topics = (st.topics || []).map((t) => esc(t.topic)).join(", ");
  return `<article class="card" data-id="${esc(st.id)}">
    <h2><a href="/stories/${encodeURIComponent(st.id)}">${st.breaking ? '<span class="badge">BREAKING</span>' : ""}${esc(st.title)}</a></h2>
    <div class="meta">${esc(st.source || st.source_id)} · ${ago(st.last_seen)} · ${n} source${n === 1 ? "" : "s"}${topics ? " · " + topics : ""}</div>
  </article>`;
}

// Feed with infinite scroll.
async function showFeed(topic) {
  main.innerHTML = `<h1 class="visually-hidden">${topic ? esc(topic) : "Top stories"}</h1><div id="cards"></div><p id="more" class="meta">Loading…</p>`;
  const cards = document.getElementById("cards");
  let cursor = "", done = false, busy = false;
  const more = async () => {
    if (done || busy) return;
    busy = true;
    try {
      const base = topic ? `/api/v1/stories?topic=${encodeURIComponent(topic)}&limit=20` : "/api/v1/feed?limit=20";
      const page = await api(base + (cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""));
      cards.insertAdjacentHTML("beforeend", page.stories.map(card).join(""));
      cursor = page.next_cursor || "";
      done = !cursor;
      document.getElementById("more").textContent = done ? (cards.children.length ? "" : "No stories yet.") : "";
    } catch (e) {
      document.getElementById("more").innerHTML = `<span class="error">${esc(e.message)}</span>`;
    }
    busy = false;
  };
  await more();
  new IntersectionObserver((es) => es.some((e) => e.isIntersecting) && more()).observe(document.getElementById("more"));
}

async function showStory(id) {
  const d = await api(`/api/v1/stories/${encodeURIComponent(id)}`);
  main.innerHTML = `<h1>${d.breaking ? '<span class="badge">BREAKING</span>' : ""}${esc(d.title)}</h1>
    <p class="meta">${d.article_count} articles from ${d.sources.length} sources · first seen ${ago(d.first_seen)}</p>
    <div id="articles">${d.articles.map((a) => `<article class="card" data-article="${esc(a.id)}">
      <h2><a href="${esc(a.url)}" target="_blank" rel="noopener" data-read="${esc(a.id)}">${esc(a.title)}</a></h2>
      <div class="meta">${esc(a.source || a.source_id)} · ${ago(a.published_at)}</div>
      <button type="button" data-share="${esc(a.id)}">Share</button>
    </article>`).join("")}</div>`;
}

async function showSearch(params) {
  const q = params.get("q") || "", topic = params.get("topic") || "";
  document.getElementById("q").value = q;
  main.innerHTML = `<h1>Search</h1><form class="stack" id="filters"><label>Topic <input name="topic" value="${esc(topic)}"></label><button>Filter</button></form><div id="hits"></div>`;
  document.getElementById("filters").addEventListener("submit", (e) => {
    e.preventDefault();
    go(`/search?q=${encodeURIComponent(q)}&topic=${encodeURIComponent(new FormData(e.target).get("topic"))}`);
  });
  const res = await api(`/api/v1/search?q=${encodeURIComponent(q)}&topic=${encodeURIComponent(topic)}&limit=20`);
  document.getElementById("hits").innerHTML = `<p class="meta">${res.total} results</p>` + res.hits.map((h) => `<article class="card">
    <h2><a href="/stories/${encodeURIComponent(h.story_id)}">${h.highlights?.title?.[0] || esc(h.title)}</a></h2>
    <p>${h.highlights?.summary?.[0] || esc(h.summary || "")}</p>
    <div class="meta">${esc(h.source || h.source_id)} · ${esc((h.topics || []).join(", "))}</div></article>`).join("");
}

function showAuth(kind) {
  main.innerHTML = `<h1>${kind === "login" ? "Log in" : "Register"}</h1>
    <form class="stack" id="auth"><label>Username <input name="username" autocomplete="username" required></label>
    <label>Password <input name="password" type="password" autocomplete="${kind === "login" ? "current-password" : "new-password"}" required></label>
    <button>${kind === "login" ? "Log in" : "Register"}</button><p class="error" role="alert" id="err"></p></form>`;
  document.getElementById("auth").addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    try {
      await api(`/api/v1/auth/${kind}`, { method: "POST", body: JSON.stringify({ username: f.get("username"), password: f.get("password") }) });
      await loadMe();
      go("/");
    } catch (err) { document.getElementById("err").textContent = err.message; }
  });
}

async function showPreferences() {
  const p = await api("/api/v1/preferences");
  const list = (a) => esc((a || []).join(", "));
  main.innerHTML = `<h1>Preferences</h1><form class="stack" id="prefs">
    <label>Topics <input name="topics" value="${list(p.topics)}"></label>
    <label>Preferred sources <input name="preferred_sources" value="${list(p.preferred_sources)}"></label>
    <label>Excluded sources <input name="excluded_sources" value="${list(p.excluded_sources)}"></label>
    <button>Save</button><p role="status" id="saved" class="meta"></p></form>`;
  document.getElementById("prefs").addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = new FormData(e.target), split = (k) => String(f.get(k)).split(",").map((s) => s.trim()).filter(Boolean);
    try {
      await api("/api/v1/preferences", { method: "PUT", body: JSON.stringify({ topics: split("topics"), preferred_sources: split("preferred_sources"), excluded_sources: split("excluded_sources") }) });
      document.getElementById("saved").textContent = "Saved.";
    } catch (err) { document.getElementById("saved").textContent = err.message; }
  });
}

async function showHistory() {
  const h = await api("/api/v1/history");
  main.innerHTML = `<h1>Reading history</h1>` + (h.history.length ? `<ol>${h.history.map((r) => `<li>${esc(r.article_id)} · ${ago(r.timestamp)}</li>`).join("")}</ol>` : "<p>Nothing read yet.</p>");
}

// Admin console: sources and system state.
async function showAdmin() {
  const [src, prog, health] = await Promise.all([api("/api/v1/admin/sources"), api("/api/v1/admin/progress"), api("/health/detailed")]);
  const lag = {};
  for (const i of prog.inputs) lag[i.stage] = (lag[i.stage] || 0) + i.lag;
  main.innerHTML = `<h1>Admin</h1>
    <section aria-labelledby="sys"><h2 id="sys">System</h2>
      <p class="meta">ready: ${prog.ready} · caught up: ${prog.caught_up} · stories: ${health.checks?.stories?.recent ?? "–"} · indexed articles: ${health.checks?.search?.articles ?? "–"}</p>
      <table><caption class="visually-hidden">Lag per stage</caption><thead><tr><th scope="col">Stage</th><th scope="col">Lag</th></tr></thead>
      <tbody>${Object.entries(lag).map(([k, v]) => `<tr><td>${esc(k)}</td><td>${v}</td></tr>`).join("")}</tbody></table></section>
    <section aria-labelledby="srcs"><h2 id="srcs">Sources (${src.sources.length})</h2>
      <form class="stack" id="add"><label>Feed or page URL <input name="url" type="url" required></label><button>Add source</button><p role="status" id="addmsg" class="meta"></p></form>
      <p><a href="/api/v1/admin/sources/export" download="sources.opml">Export OPML</a>
      <label>Import OPML <input type="file" id="opml" accept=".opml,.xml,text/xml"></label></p>
      <table><caption class="visually-hidden">Sources</caption><thead><tr><th scope="col">Name</th><th scope="col">Status</th><th scope="col">Last crawl</th><th scope="col">Next crawl</th><th scope="col">Errors</th><th scope="col">Actions</th></tr></thead>
      <tbody>${src.sources.map((s) => `<tr data-source="${esc(s.id)}"><td><a href="${esc(s.feed_url)}" rel="noopener">${esc(s.name || s.feed_url)}</a></td>
        <td>${esc(s.status)}${s.status_reason ? " (" + esc(s.status_reason) + ")" : ""}</td>
        <td>${s.crawl?.last_crawl ? esc(s.crawl.last_crawl) + " " + esc(s.crawl.last_result?.outcome || "") : "never"}</td>
        <td>${esc(s.crawl?.next_crawl || "")}</td><td>${s.crawl?.consecutive_errors || 0}${s.crawl?.last_error ? ": " + esc(s.crawl.last_error) : ""}</td>
        <td><button type="button" data-act="crawl">Crawl now</button> <button type="button" data-act="${s.status === "paused" ? "resume" : "pause"}">${s.status === "paused" ? "Resume" : "Pause"}</button> <button type="button" data-act="delete">Delete</button></td></tr>`).join("")}</tbody></table></section>`;
  document.getElementById("add").addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      await api("/api/v1/admin/sources", { method: "POST", body: JSON.stringify({ feed_url: new FormData(e.target).get("url") }) });
      showAdmin();
    } catch (err) { document.getElementById("addmsg").textContent = err.message; }
  });
  document.getElementById("opml").addEventListener("change", async (e) => {
    const f = e.target.files[0];
    if (!f) return;
    await fetch("/api/v1/admin/sources/import", { method: "POST", credentials: "same-origin", headers: { "Content-Type": "text/x-opml" }, body: await f.text() });
    showAdmin();
  });
  main.querySelectorAll("[data-act]").forEach((b) => b.addEventListener("click", async () => {
    const id = b.closest("tr").dataset.source, act = b.dataset.act;
    try {
      if (act === "crawl") await api(`/api/v1/admin/sources/${id}/crawl`, { method: "POST" });
      if (act === "pause" || act === "resume") await api(`/api/v1/admin/sources/${id}`, { method: "PATCH", body: JSON.stringify({ status: act === "pause" ? "paused" : "active" }) });
      if (act === "delete" && confirm("Delete this source?")) await api(`/api/v1/admin/sources/${id}`, { method: "DELETE" });
      showAdmin();
    } catch (err) { b.textContent = err.message; }
  }));
}

async function showTopics(active) {
  const t = await api("/api/v1/topics");
  document.querySelector(".topics").innerHTML = `<a href="/"${active ? "" : ' aria-current="page"'}>Top</a>` +
    t.topics.map((x) => `<a href="/topics/${encodeURIComponent(x.topic)}"${active === x.topic ? ' aria-current="page"' : ""}>${esc(x.topic)}</a>`).join("");
}

let trendWindow = "1h";
async function showTrending() {
  const aside = document.querySelector(".trending");
  try {
    const t = await api(`/api/v1/trending?window=${trendWindow}&k=10`);
    aside.innerHTML = `<h2>Trending</h2><div role="group" aria-label="Window">${["1m", "1h", "24h"].map((w) => `<button type="button" data-window="${w}" aria-pressed="${w === trendWindow}">${w}</button>`).join(" ")}</div>
      <ol>${t.items.map((i) => `<li>${esc(i.article_id)} <span class="meta">(${i.count})</span></li>`).join("") || "<li>No shares yet</li>"}</ol>`;
  } catch (e) { aside.innerHTML = `<p class="error">${esc(e.message)}</p>`; }
}

async function route() {
  const url = new URL(location.href);
  const [, first, second] = url.pathname.split("/");
  try {
    await showTopics(first === "topics" ? decodeURIComponent(second) : "");
    if (first === "stories" && second) await showStory(decodeURIComponent(second));
    else if (first === "topics" && second) await showFeed(decodeURIComponent(second));
    else if (first === "search") await showSearch(url.searchParams);
    else if (first === "login" || first === "register") showAuth(first);
    else if (first === "preferences") await showPreferences();
    else if (first === "history") await showHistory();
    else if (first === "admin") await showAdmin();
    else await showFeed("");
  } catch (e) {
    main.innerHTML = `<p class="error" role="alert">${esc(e.message)}</p>`;
  }
}

function go(path) { history.pushState(null, "", path); route(); }

// Reads and shares.
document.addEventListener("click", (e) => {
  const a = e.target.closest("a");
  if (a?.dataset.read && me) {
    navigator.sendBeacon?.("/api/v1/events/read", new Blob([JSON.stringify({ event_id: crypto.randomUUID(), user_id: me.id, article_id: a.dataset.read, session_id: sessionId, timestamp: Date.now() })], { type: "application/json" }));
    return;
  }
  if (a && a.origin === location.origin && !a.target) { e.preventDefault(); go(a.pathname + a.search); return; }
  const share = e.target.closest("[data-share]");
  if (share) {
    api("/api/v1/events/share", { method: "POST", body: JSON.stringify({ event_id: crypto.randomUUID(), article_id: share.dataset.share, user_id: me?.id || "anonymous", share_type: "web", timestamp: Date.now() }) })
      .then(() => { share.textContent = "Shared"; showTrending(); }, (err) => { share.textContent = err.message; });
  }
  const w = e.target.closest("[data-window]");
  if (w) { trendWindow = w.dataset.window; showTrending(); }
});
const sessionId = crypto.randomUUID();

document.querySelector(".search").addEventListener("submit", (e) => { e.preventDefault(); go(`/search?q=${encodeURIComponent(document.getElementById("q").value)}`); });

// Theme: the system's, unless chosen.
const theme = localStorage.getItem("theme") || (matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light");
document.documentElement.dataset.theme = theme;
document.querySelector(".theme").addEventListener("click", () => {
  const t = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
  document.documentElement.dataset.theme = t;
  localStorage.setItem("theme", t);
});

// Keyboard: j/k next/previous story, o open, / search, ? help.
let selected = -1;
document.addEventListener("keydown", (e) => {
  if (e.target.closest("input, textarea") || e.metaKey || e.ctrlKey || e.altKey) return;
  const cards = [...main.querySelectorAll(".card")];
  if (e.key === "j" || e.key === "k") {
    selected = Math.max(0, Math.min(cards.length - 1, selected + (e.key === "j" ? 1 : -1)));
    cards.forEach((c, i) => c.classList.toggle("selected", i === selected));
    cards[selected]?.scrollIntoView({ block: "nearest" });
    cards[selected]?.querySelector("a")?.focus();
  } else if (e.key === "o" && cards[selected]) {
    cards[selected].querySelector("a")?.click();
  } else if (e.key === "/") {
    e.preventDefault();
    document.getElementById("q").focus();
  } else if (e.key === "?") {
    alert("j / k: next / previous story\no: open\n/: search\n?: this help");
  }
});

window.addEventListener("popstate", route);
await loadMe();
await route();
showTrending();
setInterval(showTrending, 10000);
