// newsflow web reader and admin console: a single page application in
// plain ES modules over the JSON API. Everything shown is escaped (esc)
// except search highlights, which the server escapes and marks up itself.
const $ = (id) => document.getElementById(id);
const main = $("main");
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
const enc = encodeURIComponent;

async function api(path, opts = {}) {
  let res;
  try {
    res = await fetch(path, { credentials: "same-origin", ...opts, headers: { "Content-Type": "application/json", ...(opts.headers || {}) } });
  } catch {
    throw Object.assign(new Error(navigator.onLine ? "The node did not answer: is it running?" : "Not available offline."), { status: 0 });
  }
  noteSource(res);
  const text = await res.text();
  let body = {};
  try { body = text ? JSON.parse(text) : {}; } catch { body = { error: text }; }
  if (!res.ok) throw Object.assign(new Error(body.error || `${res.status} ${res.statusText}`), { status: res.status });
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
// when shows a time as "5 min ago", the exact time on hover; a missing or
// unreadable time shows nothing rather than "NaN" or "Invalid Date".
const when = (ms) => {
  const t = typeof ms === "number" ? ms : Date.parse(ms);
  if (!Number.isFinite(t) || t <= 0) return "";
  const d = new Date(t);
  return `<time datetime="${d.toISOString()}" title="${esc(d.toLocaleString())}">${ago(t)}</time>`;
};
// snippet shortens text to about n characters at a word boundary.
const snippet = (text, n = 240) => {
  const s = String(text ?? "").trim();
  if (s.length <= n) return s;
  const cut = s.slice(0, n + 1), at = cut.lastIndexOf(" ");
  return `${(at > n / 2 ? cut.slice(0, at) : cut.slice(0, n)).replace(/[\s,;:.\-–—]+$/, "")}…`;
};
const meta = (...parts) => parts.filter(Boolean).join(" · ");
const bytes = (n) => n < 1024 ? `${n} B` : n < 1 << 20 ? `${(n / 1024).toFixed(1)} KiB` : n < 1 << 30 ? `${(n / (1 << 20)).toFixed(1)} MiB` : `${(n / (1 << 30)).toFixed(2)} GiB`;
const plural = (n, w) => `${n} ${w}${n === 1 ? "" : "s"}`;

// Account.
let me = null;
async function loadMe() {
  try { me = await api("/api/v1/me"); } catch { me = null; }
  document.querySelector(".account").innerHTML = me
    ? `<a href="/preferences">${esc(me.username)}</a><a href="/starred">Starred</a><a href="/history">History</a>${me.role === "admin" ? '<a href="/admin">Admin</a>' : ""}<button type="button" id="logout">Log out</button>`
    : '<a href="/login">Log in</a><a href="/register">Register</a>';
  $("logout")?.addEventListener("click", async () => {
    await api("/api/v1/auth/logout", { method: "POST" });
    // What was saved for offline reading is this reader's: drop it.
    await globalThis.caches?.delete("newsflow-api");
    await loadMe();
    go("/");
  });
}

function page(title, body) {
  document.title = title ? `${title} · newsflow` : "newsflow";
  main.innerHTML = body;
}

// Story cards and the feed, with cursor-based infinite scroll.
function card(st) {
  const n = st.sources?.length || 1;
  const topics = (st.topics || []).map((t) => `<span class="topic">${esc(t.topic)}</span>`).join(" ");
  const read = st.unread === 0;
  return `<article class="card${read ? " read" : ""}" data-id="${esc(st.id)}">
    ${thumb(st.image)}<h2><a href="/stories/${enc(st.id)}">${st.breaking ? '<span class="badge">Breaking</span> ' : ""}${esc(st.title)}</a></h2>
    <p class="meta">${meta(outlet(st), when(st.last_seen), `<span class="sources">${plural(n, "source")}</span>`, unreadLabel(st.unread), topics)}</p>
    ${st.coverage?.length ? `<ul class="coverage" aria-label="More coverage">${st.coverage.map((c) => `<li><a href="${esc(c.url)}" target="_blank" rel="noopener" data-read="${esc(c.id)}">${esc(c.title)}</a> <span class="meta">${meta(outlet(c), when(c.published_at))}</span></li>`).join("")}</ul>` : ""}
    ${me && typeof st.unread === "number" ? `<div class="actions">
      <button type="button" data-mark="${esc(st.id)}">${read ? "Mark unread" : "Mark read"}</button>
      <button type="button" data-mark-above="${esc(st.id)}" title="Mark this story and every story above it read">Read to here</button>
      ${starButton(st.representative, st.title)}</div>` : ""}
  </article>`;
}

// thumb shows a lead image through the node's image proxy (readers never
// contact outlets); an image that fails to load is removed.
const thumb = (src) => src ? `<img class="thumb" src="${esc(src)}" alt="" loading="lazy" width="120" height="80">` : "";
document.addEventListener("error", (e) => { if (e.target.matches?.("img.thumb")) e.target.remove(); }, true);

// Read state of a logged-in reader: unread counts, marks and stars.
let starred = new Set();
let hideRead = localStorage.getItem("hideRead") === "1";
const unreadLabel = (n) => typeof n !== "number" ? "" : n ? `<span class="unread">${n} unread</span>` : "read";
const starButton = (id, title) => `<button type="button" class="star" data-star="${esc(id)}" aria-pressed="${starred.has(id)}" aria-label="Star: ${esc(title)}">${starred.has(id) ? "★" : "☆"} Star</button>`;

async function loadStarred() {
  starred = new Set(me ? (await api("/api/v1/me/starred").catch(() => ({ articles: [] }))).articles.map((a) => a.id) : []);
}

// refreshUnread puts the reader's unread counts on the topic tabs and on
// whatever shows a source's count.
async function refreshUnread() {
  if (!me) return;
  const u = await api("/api/v1/me/unread").catch(() => null);
  if (!u) return;
  const topics = new Map(u.topics.map((t) => [t.topic, t.articles]));
  for (const a of document.querySelectorAll(".topics a[data-topic]")) {
    const n = a.dataset.topic ? topics.get(a.dataset.topic) || 0 : u.total.articles;
    let c = a.querySelector(".count");
    if (!c) { c = document.createElement("span"); c.className = "count"; a.append(" ", c); }
    c.textContent = n ? String(n) : "";
    c.title = `${n} unread`;
  }
  const sources = new Map(u.sources.map((x) => [x.source_id, x.articles]));
  for (const el of document.querySelectorAll("[data-unread-source]")) el.textContent = `${sources.get(el.dataset.unreadSource) || 0} unread`;
}

async function markStories(ids, read) {
  await api("/api/v1/me/read", { method: "POST", body: JSON.stringify({ stories: ids, read }) });
  for (const id of ids) {
    const c = main.querySelector(`.card[data-id="${CSS.escape(id)}"]`);
    if (!c) continue;
    c.classList.toggle("read", read);
    c.querySelector("[data-mark]").textContent = read ? "Mark unread" : "Mark read";
    const u = c.querySelector(".unread");
    if (read && u) u.replaceWith("read");
  }
  await refreshUnread();
}

// toolbar offers, on a list of stories, marking it all read (scope: the
// topic or source it shows, or everything) and hiding read stories.
const toolbar = (scope, follow, hiding = true) => me ? `<div class="toolbar">
  <button type="button" data-mark-all='${esc(JSON.stringify(scope))}'>Mark all as read</button>
  ${hiding ? `<label><input type="checkbox" id="hide-read"${hideRead ? " checked" : ""}> Hide read</label>` : ""}
  ${follow ? `<button type="button" data-follow="${esc(follow[0])}" data-value="${esc(follow[1])}">${follow[2] ? "Following ✓" : "Follow"}</button>` : ""}</div>` : "";

// follow adds or removes a topic or source in the reader's preferences.
async function follow(kind, value) {
  const p = await api("/api/v1/preferences"), key = kind === "topic" ? "topics" : "preferred_sources";
  const on = !p[key].includes(value);
  p[key] = on ? [...p[key], value] : p[key].filter((x) => x !== value);
  await api("/api/v1/preferences", { method: "PUT", body: JSON.stringify(p) });
  return on;
}
const following = async (kind, value) => me ? (await api("/api/v1/preferences").catch(() => ({ topics: [], preferred_sources: [] })))[kind === "topic" ? "topics" : "preferred_sources"].includes(value) : false;

function scroller(load, render, list, status, empty, after) {
  let cursor = "", done = false, busy = false;
  const more = async () => {
    if (done || busy) return;
    busy = true;
    try {
      const res = await load(cursor);
      list.insertAdjacentHTML("beforeend", render(res));
      after?.(res);
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
  const follows = topic && await following("topic", topic);
  page(topic, `<h1 class="${topic ? "" : "visually-hidden"}">${topic ? esc(topic) : "Top stories"}</h1>
    ${toolbar(topic ? { topic } : {}, topic && ["topic", topic, follows])}<div id="cards"></div><p id="more" class="meta">Loading…</p>`);
  const base = (topic ? `/api/v1/stories?topic=${enc(topic)}&limit=20` : "/api/v1/feed?limit=20") + (me && hideRead ? "&hide_read=1" : "");
  await scroller((c) => api(base + (c ? `&cursor=${enc(c)}` : "")), (r) => r.stories.map(card).join(""), $("cards"), $("more"),
    topic ? "No stories in this topic yet." : "No stories yet.", () => { if (!topic && !$("cards").children.length) gettingStarted(); });
}

// gettingStarted explains an empty reader: what the node lacks (an admin,
// sources that can be fetched, articles), why, and what to do.
async function gettingStarted() {
  const st = await api("/api/v1/setup").catch(() => null);
  if (!st || st.done || !$("cards") || $("cards").children.length) return;
  const src = st.sources;
  const why = src.failing
    ? `<p>${plural(src.failing, "source")} of ${src.active} cannot be fetched:</p><ul>${src.reasons.map((r) => `<li>${esc(r.message)} (${plural(r.sources, "source")})</li>`).join("")}</ul>`
    : src.active ? `<p>${plural(src.active, "source")}, ${src.crawled} crawled so far; ${st.articles.received ? plural(st.articles.received, "article") + " received" : "no article yet"}.</p>` : "<p>There are no sources yet.</p>";
  const step = (x) => `<li>${esc(x.text)}${x.command ? ` <code>${esc(x.command)}</code>` : ""}${x.path ? ` <a href="${esc(x.path)}">${esc(x.path)}</a>` : ""}</li>`;
  if ($("gs")) return;
  $("more").insertAdjacentHTML("afterend", `<section class="card getting-started" aria-labelledby="gs"><h2 id="gs">Getting started</h2>${why}
    ${st.next_steps.length ? `<p>What to do:</p><ol>${st.next_steps.map(step).join("")}</ol>` : ""}</section>`);
}

// showSetup creates the first admin with the one-time link the node
// printed at start.
function showSetup(params) {
  page("Create the first admin", `<h1>Create the first admin</h1>
    <p>This link was printed by the node when it started without an admin account. It works once.</p>
    <form class="stack" id="setup"><label>Username <input name="username" autocomplete="username" required></label>
    <label>Password <input name="password" type="password" minlength="10" autocomplete="new-password" required></label>
    <button>Create admin</button><p class="error" role="alert" id="err"></p></form>`);
  $("setup").addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    try {
      await api("/api/v1/setup/admin", { method: "POST", body: JSON.stringify({ token: params.get("token") || "", username: f.get("username"), password: f.get("password") }) });
      await loadMe();
      go("/admin");
    } catch (err) { $("err").textContent = err.message; }
  });
}

async function showStory(id) {
  let d;
  try {
    d = await api(`/api/v1/stories/${enc(id)}`);
  } catch (e) {
    if (e.status !== 404) throw e;
    page("Story not found", `<h1>Story not found</h1><p>This story is no longer here: stories close a few days after their latest article, and old ones are removed.</p>
      <p><a href="/">Back to the top stories</a> or <a href="/search">search the articles</a>.</p>`);
    return;
  }
  const names = {};
  for (const a of d.articles) names[a.source_id] = a.source || a.source_id;
  page(d.title, `<h1>${d.breaking ? '<span class="badge">Breaking</span> ' : ""}${esc(d.title)}</h1>
    <p class="meta">${plural(d.article_count, "article")} from ${plural(d.sources.length, "source")} · first seen ${when(d.first_seen)} · latest ${when(d.last_seen)}${(d.topics || []).map((t) => ` · <span class="topic">${esc(t.topic)}</span>`).join("")}</p>
    ${typeof d.unread === "number" ? `<p class="toolbar"><span id="story-unread" role="status">${d.unread} of ${plural(d.articles.length, "article")} unread</span>
      <button type="button" data-mark-story="${esc(d.id)}">${d.unread ? "Mark story read" : "Mark story unread"}</button></p>` : ""}
    <section aria-labelledby="srcs"><h2 id="srcs">Sources</h2>
      <ul class="chips">${d.sources.map((s) => `<li><a href="/sources/${enc(s.source_id)}">${esc(names[s.source_id] || s.source_id)}</a> <span class="meta">(${s.articles})</span></li>`).join("")}</ul></section>
    <section aria-labelledby="arts"><h2 id="arts">Articles</h2>
    <div id="articles">${d.articles.map((a) => `<article class="card${a.read ? " read" : ""}" data-article="${esc(a.id)}">
      ${thumb(a.image)}      <h3><a href="${esc(a.url)}" target="_blank" rel="noopener" data-read="${esc(a.id)}">${esc(a.title)}</a></h3>
      <p class="meta">${meta(outlet(a), when(a.published_at))}</p>
      ${a.summary ? `<p class="summary">${esc(a.summary)}</p>` : ""}
      <div class="actions"><button type="button" data-share="${esc(a.id)}" aria-label="Share: ${esc(a.title)}">Share</button>${me ? starButton(a.id, a.title) : ""}</div>
    </article>`).join("")}</div></section>`);
}

// Starred articles, the most recently starred first.
async function showStarred() {
  const s = await api("/api/v1/me/starred");
  page("Starred", `<h1>Starred</h1>` + (s.articles.length
    ? `<div id="starred">${s.articles.map((a) => `<article class="card" data-article="${esc(a.id)}">
      <h2><a href="${esc(a.url)}" target="_blank" rel="noopener" data-read="${esc(a.id)}">${esc(a.title || a.id)}</a></h2>
      <p class="meta">${meta(outlet(a), when(a.published_at), a.story_id ? `<a href="/stories/${enc(a.story_id)}">the story</a>` : "", `starred ${when(a.starred_at)}`)}</p>
      <div class="actions">${starButton(a.id, a.title || a.id)}</div></article>`).join("")}</div>`
    : "<p>Nothing starred yet. Star an article from a story page, or a story from its card.</p>"));
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
  await storyResults(q, $("hits"), $("more"), $("total"));
}

// storyResults lists the articles a search finds (q: its parameters), one
// result per story: the server groups each page, and a story that comes
// back on a later page folds under its first result.
function storyResults(q, list, status, total) {
  const shown = new Map();
  const key = (h) => h.story_id || `article:${h.id}`;
  const also = (h) => `<li><a href="${esc(h.url)}" target="_blank" rel="noopener" data-read="${esc(h.id)}">${esc(h.title)}</a> <span class="meta">${meta(outlet(h), when(h.published_at))}</span></li>`;
  const fold = (el, hits) => {
    const ul = el.querySelector(".also ul");
    ul.insertAdjacentHTML("beforeend", hits.map(also).join(""));
    el.querySelector(".also summary").textContent = `${plural(ul.children.length, "more article")} in this story`;
    el.querySelector(".also").hidden = false;
  };
  return scroller(async (c) => {
    const res = await api(`/api/v1/search?${q}&group=story${c ? `&cursor=${enc(c)}` : ""}`);
    if (total) total.textContent = plural(res.total, "matching article") + (res.partial ? " (some partitions did not answer)" : "");
    const fresh = [];
    for (const h of res.hits) {
      if (shown.has(key(h))) fold(shown.get(key(h)), [h, ...(h.also || [])]);
      else fresh.push(h);
    }
    return { ...res, hits: fresh };
  }, (res) => res.hits.map((h) => `<article class="card hit" data-story="${esc(key(h))}">
    <h2><a href="${h.story_id ? `/stories/${enc(h.story_id)}` : esc(h.url)}">${h.highlights?.title?.[0] || esc(h.title)}</a></h2>
    <p class="summary">${h.highlights?.summary?.[0] || esc(snippet(h.summary))}</p>
    <p class="meta">${meta(outlet(h), when(h.published_at), ...(h.topics || []).map((t) => `<span class="topic">${esc(t)}</span>`))}</p>
    <details class="also" hidden><summary></summary><ul></ul></details></article>`).join(""),
  list, status, "No results.", (res) => {
    for (const h of res.hits) {
      const el = list.querySelector(`[data-story="${CSS.escape(key(h))}"]`);
      shown.set(key(h), el);
      if (h.also?.length) fold(el, h.also);
    }
  });
}

// outlet names an article's source, linked to the source's page.
const outlet = (x) => x.source_id ? `<a class="outlet" href="/sources/${enc(x.source_id)}">${esc(x.source || x.source_id)}</a>` : esc(x.source || "");

// A source's page: its newest articles, one result per story.
async function showSource(id) {
  const all = await api("/api/v1/sources").catch(() => ({ sources: [] }));
  const src = all.sources.find((x) => x.id === id);
  const name = src?.name || id;
  const follows = await following("source", id);
  page(name, `<h1>${esc(name)}</h1>
    <p class="meta">${meta(src?.homepage ? `<a href="${esc(src.homepage)}" target="_blank" rel="noopener">${esc(src.homepage)}</a>` : "", me ? `<span data-unread-source="${esc(id)}"></span>` : "", "newest articles first")}</p>
    ${toolbar({ source: id }, ["source", id, follows], false)}
    <p id="total" class="meta" role="status"></p><div id="hits"></div><p id="more" class="meta"></p>`);
  await storyResults(new URLSearchParams({ source: id, limit: "20" }), $("hits"), $("more"), $("total"));
}

function showAuth(kind) {
  const login = kind === "login", title = login ? "Log in" : "Register";
  page(title, `<h1>${title}</h1>
    <form class="stack" id="auth"><label>Username <input name="username" autocomplete="username" required></label>
    <label>Password <input name="password" type="password" minlength="${login ? 1 : 10}" autocomplete="${login ? "current-password" : "new-password"}" required></label>
    <button>${title}</button><p class="error" role="alert" id="err"></p></form>
    <p>${login ? 'No account? <a href="/register">Register</a>' : 'Have an account? <a href="/login">Log in</a>'}</p><p id="no-admin" class="meta"></p>`);
  if (login) api("/api/v1/setup").then((st) => {
    if (st.accounts && !st.admin_exists && $("no-admin")) $("no-admin").textContent = "No admin account exists yet: open the one-time setup link the node printed when it started, or run newsflow user add --admin.";
  }, () => {});
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
    <button>Save</button><p role="status" id="saved" class="meta"></p></form>
    <section class="stack wide" aria-labelledby="apps-h"><h2 id="apps-h">Reader apps</h2>
    <p class="meta">Apps that sync with Miniflux or with the Google Reader API (FreshRSS, FeedHQ, Inoreader) sync with this server too: give each app its own API key, and enter your username and the key as its password, with <code>${esc(location.origin)}</code> as the server.</p>
    <form id="newkey" class="row"><label>App name <input name="name" required maxlength="64" autocomplete="off"></label><button>Create API key</button></form>
    <div role="status" id="keysecret"></div>
    <ul class="keys" id="keys"></ul></section>
    <section class="stack wide" aria-labelledby="everywhere-h"><h2 id="everywhere-h">Log out everywhere</h2>
    <p class="meta">Ends every session of your account, in every browser, this one too, and revokes every API key: reader apps using them are logged out and need a new key.</p>
    <p><button type="button" id="everywhere">Log out everywhere and revoke all API keys</button></p><p role="status" id="everywhere-status" class="meta"></p></section>`);
  $("everywhere").addEventListener("click", async () => {
    if (!confirm("Log out everywhere? Every session of your account ends, this one too, and every API key is revoked: apps using them stay logged out until you give them a new key.")) return;
    try {
      await api("/api/v1/auth/logout?everywhere=true", { method: "POST" });
      await globalThis.caches?.delete("newsflow-api");
      await loadMe();
      go("/");
    } catch (err) { $("everywhere-status").textContent = err.message; }
  });
  $("prefs").addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    try {
      await api("/api/v1/preferences", { method: "PUT", body: JSON.stringify({ topics: f.getAll("topics"), preferred_sources: f.getAll("preferred_sources"), excluded_sources: f.getAll("excluded_sources") }) });
      $("saved").textContent = "Saved.";
    } catch (err) { $("saved").textContent = err.message; }
  });
  await showKeys();
  $("newkey").addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const k = await api("/api/v1/me/api-keys", { method: "POST", body: JSON.stringify({ name: new FormData(e.target).get("name") }) });
      $("keysecret").innerHTML = `<p>API key for <strong>${esc(k.name)}</strong> (shown only now; copy it into the app):</p><p><code class="secret">${esc(k.secret)}</code></p>`;
      e.target.reset();
      await showKeys();
    } catch (err) { $("keysecret").textContent = err.message; }
  });
}

// showKeys lists the reader's API keys, each with a button to revoke it.
async function showKeys() {
  const { api_keys: keys } = await api("/api/v1/me/api-keys");
  $("keys").innerHTML = keys.length
    ? keys.map((k) => `<li><strong>${esc(k.name)}</strong> <span class="meta">created ${when(k.created_at)}${k.last_used_at ? ", last used " + when(k.last_used_at) : ", not used yet"}</span> <button type="button" data-revoke="${esc(k.id)}" aria-label="Revoke the key of ${esc(k.name)}">Revoke</button></li>`).join("")
    : `<li class="meta">No API keys.</li>`;
  for (const b of $("keys").querySelectorAll("[data-revoke]")) {
    b.addEventListener("click", async () => {
      await api(`/api/v1/me/api-keys/${enc(b.dataset.revoke)}`, { method: "DELETE" });
      $("keysecret").textContent = "Key revoked: apps using it are logged out.";
      await showKeys();
    });
  }
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

// Service level objectives (/api/v1/admin/slo): each objective's target,
// its value over 5 min, 1 h and the SLO window, the error budget left over
// the window (a meter) and its status. A value without events reads "no
// data", never a broken number.
const sloPct = (v) => {
  if (typeof v !== "number" || !Number.isFinite(v)) return "no data";
  // Floored to 0.01 %: 99.999 % is not shown as 100 %.
  return `${Math.floor(v * 10000 + 1e-9) / 100}%`;
};
const sloBudget = (b) => {
  if (typeof b !== "number" || !Number.isFinite(b)) return "no data";
  return b >= 0 ? `${Math.floor(b * 100 + 1e-9)}% left` : `spent ${Number((1 - b).toFixed(1))}× the budget`;
};
const sloStatus = { ok: "ok", burning: "burning", breached: "breached", no_data: "no data" };
const span = (s) => s < 60 ? "less than a minute" : s < 7200 ? plural(Math.round(s / 60), "minute") : s < 172800 ? plural(Math.round(s / 3600), "hour") : plural(Math.round(s / 86400), "day");
const windowLabel = (w) => ({ "5m": "5 min", "1h": "1 h", "30d": "30 days" })[w] || w;
function sloRow(r, win, name) {
  const b = r.error_budget_remaining, has = typeof b === "number" && Number.isFinite(b);
  const meter = has ? `<meter min="0" max="100" low="25" high="50" optimum="100" value="${Math.max(0, Math.min(100, b * 100))}" aria-label="Error budget left: ${esc(name)}"></meter> ` : "";
  return `<tr data-slo="${esc(r.id)}${r.group ? `/${esc(r.group)}` : ""}"><th scope="row">${esc(name)}<br><span class="meta">${esc(r.group ? `${r.id} · ${r.group}` : r.id)}</span></th>
    <td>${sloPct(r.target)}</td>${win.map((w) => `<td>${sloPct(r.windows?.[w]?.value)}</td>`).join("")}
    <td>${meter}${sloBudget(b)}</td><td class="slo-${esc(r.status)}">${esc(sloStatus[r.status] || r.status)}</td></tr>`;
}
function sloPanel(rep) {
  if (!rep?.objectives) return "";
  const win = rep.windows || [], full = win[win.length - 1];
  const covered = rep.objectives[0]?.windows?.[full];
  const since = covered?.since_start ? ` (so far: ${span(covered.window_s)})` : "";
  const nodes = rep.nodes ? `<p class="meta">Nodes counted: ${esc(rep.nodes.join(", "))}${rep.failed_nodes?.length ? ` · <span class="error">not answering: ${esc(rep.failed_nodes.join(", "))}</span>` : ""}</p>` : "";
  const rows = [];
  for (const r of rep.objectives) {
    const name = r.description.charAt(0).toUpperCase() + r.description.slice(1);
    rows.push(sloRow(r, win, name));
    for (const g of r.groups || []) if (g.windows?.[full]?.total > 0) rows.push(sloRow(g, win, `Requests to ${g.group} not answered 5xx`));
  }
  return `<div class="scroll" tabindex="0" role="region" aria-label="Service level objectives"><table class="slo"><caption>Service level objectives over ${esc(windowLabel(full))}${esc(since)}</caption>
    <thead><tr><th scope="col">Objective</th><th scope="col">Target</th>${win.map((w) => `<th scope="col">${esc(windowLabel(w))}</th>`).join("")}<th scope="col">Error budget</th><th scope="col">Status</th></tr></thead>
    <tbody>${rows.join("")}</tbody></table></div>${nodes}`;
}

async function systemPanel() {
  const [st, prog, cl, slo] = await Promise.all([api("/api/v1/admin/stats"), api("/api/v1/admin/progress"), api("/api/v1/admin/cluster").catch(() => null),
    api("/api/v1/admin/slo").catch(() => null)]);
  const parts = prog.inputs.filter((i) => i.lag > 0);
  return `<p class="meta">ready: ${prog.ready} · caught up: ${prog.caught_up} · dead letters: <span id="dead">${st.dead_letters ?? esc(st.dead_letters_error)}</span> · uptime ${Math.round(st.uptime_s / 60)} min</p>
    <div class="scroll" tabindex="0" role="region" aria-label="Stages"><table><caption>Stages</caption><thead><tr><th scope="col">Stage</th><th scope="col">Records/s</th><th scope="col">Committed</th><th scope="col">Lag</th></tr></thead>
    <tbody>${st.stages.map((s) => `<tr><td>${esc(s.stage)}</td><td>${st.rate_window_s > 0 ? s.events_per_s.toFixed(1) : "measuring…"}</td><td>${s.committed}</td><td>${s.lag}</td></tr>`).join("")}</tbody></table></div>
    ${sloPanel(slo)}
    <table><caption>Stores on disk</caption><tbody>${Object.entries(st.stores || {}).map(([k, v]) => `<tr><th scope="row">${esc(k)}</th><td>${bytes(v)}</td></tr>`).join("")}</tbody></table>
    ${cl ? `<div class="scroll" tabindex="0" role="region" aria-label="Cluster">${clusterPanel(cl)}</div>` : ""}
    <details><summary>Lag per partition (${plural(parts.length, "partition")} behind)</summary>
    <div class="scroll" tabindex="0" role="region" aria-label="Lag per partition"><table><thead><tr><th scope="col">Stage</th><th scope="col">Topic</th><th scope="col">Partition</th><th scope="col">Committed</th><th scope="col">Lag</th></tr></thead>
    <tbody>${prog.inputs.map((i) => `<tr><td>${esc(i.stage)}</td><td>${esc(i.topic)}</td><td>${i.partition}</td><td>${i.committed}</td><td>${i.lag}</td></tr>`).join("")}</tbody></table></div></details>`;
}

// errorText shows an error's first line, shortened; the whole of it opens
// on demand (a failing fetch can carry a long multi-line message).
function errorText(msg) {
  const first = String(msg).split("\n")[0].trim(), short = snippet(first, 90);
  return short === String(msg).trim() ? esc(short) : `<details class="err"><summary>${esc(short)}</summary><pre>${esc(msg)}</pre></details>`;
}

function sourceRow(s) {
  const c = s.crawl || {}, circuit = c.circuit?.state || "closed", paused = s.status === "paused";
  return `<tr data-source="${esc(s.id)}"><th scope="row"><a href="/sources/${enc(s.id)}">${esc(s.name || s.feed_url)}</a><br><a class="meta feedurl" href="${esc(s.feed_url)}" rel="noopener">${esc(s.feed_url)}</a></th>
    <td data-label="Status">${esc(s.status)}${s.status_reason ? ` (${esc(s.status_reason)})` : ""}</td>
    <td data-label="Last crawl">${c.last_crawl ? `${when(c.last_crawl)} ${esc(c.last_result?.outcome || "")}` : "never"}</td>
    <td data-label="Next crawl">${s.status !== "active" ? "–" : c.next_crawl ? until(c.next_crawl) : "now"}</td>
    <td data-label="Errors">${c.consecutive_errors || 0}${c.last_error ? `: ${errorText(c.last_error)}` : ""}</td><td data-label="Circuit">${esc(circuit)}</td>
    <td class="actions"><button type="button" data-act="crawl">Crawl now</button> <button type="button" data-act="${paused ? "resume" : "pause"}">${paused ? "Resume" : "Pause"}</button> <button type="button" data-act="delete">Delete</button></td></tr>`;
}

// hookRow is a webhook with its delivery status in the admin console.
const hookRow = (h) => {
  const st = h.status || {}, filter = [...(h.topics || []), ...(h.sources || [])].join(", ") || "every story";
  const last = st.last_attempt_at ? `${when(st.last_attempt_at)}${st.last_error ? `: <span class="error">${esc(st.last_error)}</span>` : st.last_status ? ` (${st.last_status})` : ""}` : "never";
  return `<tr><td>${esc(h.url)}</td><td>${esc(filter)}</td><td>${st.delivered || 0}</td><td>${st.retried || 0}</td><td>${st.dead_lettered || 0}</td><td>${last}</td>
    <td><button type="button" data-hook="${esc(h.id)}" aria-label="Delete the webhook to ${esc(h.url)}">Delete</button></td></tr>`;
};

async function showAdmin() {
  const [src, sys, hooks] = await Promise.all([api("/api/v1/admin/sources"), systemPanel(), api("/api/v1/admin/webhooks").catch(() => ({ webhooks: [] }))]);
  // Rates need two samples: take the second one soon.
  setTimeout(async () => { if ($("system")) $("system").innerHTML = await systemPanel().catch((e) => `<p class="error">${esc(e.message)}</p>`); }, 1500);
  page("Admin", `<h1>Admin</h1>
    <section aria-labelledby="sys"><h2 id="sys">System</h2><div id="system">${sys}</div></section>
    <section aria-labelledby="srcs"><h2 id="srcs">Sources (${src.sources.length})</h2>
      <form class="inline" id="add"><label>Feed or page URL <input name="url" type="url" required></label><button>Add source</button></form>
      <p role="status" id="addmsg" class="meta"></p>
      <p><a href="/api/v1/admin/sources/export" download="sources.opml">Export OPML</a> ·
      <label>Import OPML <input type="file" id="opml" accept=".opml,.xml,text/xml"></label></p>
      <div><table class="sources"><caption class="visually-hidden">Sources and their crawl status</caption><thead><tr><th scope="col">Name</th><th scope="col">Status</th><th scope="col">Last crawl</th><th scope="col">Next crawl</th><th scope="col">Errors</th><th scope="col">Circuit</th><th scope="col">Actions</th></tr></thead>
      <tbody>${src.sources.map(sourceRow).join("")}</tbody></table></div></section>
    <section aria-labelledby="hooks"><h2 id="hooks">Webhooks (${hooks.webhooks.length})</h2>
      ${hooks.webhooks.length ? `<div><table class="sources"><caption class="visually-hidden">Breaking-news webhooks and their deliveries</caption><thead><tr><th scope="col">URL</th><th scope="col">Filter</th><th scope="col">Delivered</th><th scope="col">Retried</th><th scope="col">Dead letters</th><th scope="col">Last attempt</th><th scope="col">Actions</th></tr></thead>
      <tbody>${hooks.webhooks.map(hookRow).join("")}</tbody></table></div>` : `<p class="meta">No webhooks. Readers register them with POST /api/v1/me/webhooks.</p>`}</section>`);
  main.querySelectorAll("[data-hook]").forEach((b) => b.addEventListener("click", async () => {
    if (!confirm("Delete this webhook?")) return;
    try {
      await api(`/api/v1/admin/webhooks/${enc(b.dataset.hook)}`, { method: "DELETE" });
      await showAdmin();
    } catch (err) { $("addmsg").textContent = err.message; }
  }));
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
  document.querySelector(".topics").innerHTML = `<a href="/" data-topic=""${cur(!active)}>Top</a>` +
    // Alphabetical, so the tabs stay put while their story counts change.
    t.topics.map((x) => x.topic).sort((a, b) => a.localeCompare(b)).map((x) => `<a href="/topics/${enc(x)}" data-topic="${esc(x)}"${cur(active === x)}>${esc(x)}</a>`).join("");
}

let trendWindow = localStorage.getItem("trendWindow") || "1h";
// showTrending renders the trending panel: from t (a trending answer the
// live stream pushed) or, without it, from /api/v1/trending.
async function showTrending(t) {
  const aside = document.querySelector(".trending");
  let body;
  try {
    // One line per story: the shares of a story's articles count for it.
    t ??= await api(`/api/v1/trending?window=${enc(trendWindow)}&k=10&by=story`);
    body = t.items.length
      ? `<ol id="trending-list">${t.items.map((i) => {
        const title = esc(i.title || i.articles[0]?.article_id);
        const link = i.story_id ? `<a href="/stories/${enc(i.story_id)}">${title}</a>` : i.url ? `<a href="${esc(i.url)}" target="_blank" rel="noopener">${title}</a>` : title;
        return `<li data-story="${esc(i.story_id || "")}">${link} <span class="meta">${plural(i.count, "share")}</span></li>`;
      }).join("")}</ol>`
      : `<p id="trending-list" class="meta">No shares in the last ${esc(trendWindow)}.</p>`;
  } catch (e) { body = `<p class="error">${esc(e.message)}</p>`; }
  aside.innerHTML = `<h2>Trending</h2><div role="group" aria-label="Window" class="windows">${["1m", "1h", "24h"].map((w) => `<button type="button" data-window="${w}" aria-pressed="${w === trendWindow}">${w}</button>`).join("")}</div>${body}`;
}

// Routing.
async function route(focus) {
  const url = new URL(location.href);
  const [, first, second] = url.pathname.split("/");
  selected = -1;
  document.body.dataset.page = first || "home";
  try {
    await loadStarred();
    await showTopics(first === "topics" ? decodeURIComponent(second) : "");
    if (first === "stories" && second) await showStory(decodeURIComponent(second));
    else if (first === "topics" && second) await showFeed(decodeURIComponent(second));
    else if (first === "search") await showSearch(url.searchParams);
    else if (first === "sources" && second) await showSource(decodeURIComponent(second));
    else if (first === "login" || first === "register") showAuth(first);
    else if (first === "setup") showSetup(url.searchParams);
    else if (first === "preferences") await (me ? showPreferences() : go("/login"));
    else if (first === "history") await (me ? showHistory() : go("/login"));
    else if (first === "starred") await (me ? showStarred() : go("/login"));
    else if (first === "admin") await (me ? showAdmin() : go("/login"));
    else await showFeed("");
  } catch (e) {
    page("Error", `<h1>Something went wrong</h1><p class="error" role="alert">${esc(e.message)}</p>`);
  }
  refreshUnread();
  if (focus) {
    window.scrollTo(0, 0);
    main.focus({ preventScroll: true });
  }
}

function go(path) { history.pushState(null, "", path); return route(true); }

// Reads, shares, links and trending windows.
const sessionId = crypto.randomUUID();
document.addEventListener("click", (e) => {
  const a = e.target.closest("a");
  if (a?.dataset.read) {
    if (me) {
      navigator.sendBeacon("/api/v1/events/read", new Blob([JSON.stringify({ event_id: crypto.randomUUID(), user_id: me.id, article_id: a.dataset.read, session_id: sessionId, timestamp: Date.now() })], { type: "application/json" }));
      // Opened is read: the counts follow.
      fetch("/api/v1/me/read", { method: "POST", keepalive: true, credentials: "same-origin", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ articles: [a.dataset.read] }) })
        .then(() => { a.closest(".card")?.classList.add("read"); return showStoryUnread(); }).then(refreshUnread, () => {});
    }
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
  readAction(e.target).catch((err) => {
    const m = main.querySelector(".toolbar") || main;
    m.insertAdjacentHTML("beforeend", `<p class="error" role="alert">${esc(err.message)}</p>`);
  });
  const w = e.target.closest("[data-window]");
  if (w) { trendWindow = w.dataset.window; localStorage.setItem("trendWindow", trendWindow); showTrending(); }
});

// readAction handles the read-state buttons of cards, story pages and
// list toolbars.
async function readAction(target) {
  const b = target.closest("button");
  if (!b || !me) return;
  if (b.dataset.mark) await markStories([b.dataset.mark], !b.closest(".card").classList.contains("read"));
  else if (b.dataset.markAbove) {
    const cards = [...main.querySelectorAll(".card[data-id]")];
    await markStories(cards.slice(0, cards.indexOf(b.closest(".card")) + 1).map((c) => c.dataset.id), true);
  } else if (b.dataset.markStory) {
    const read = b.textContent === "Mark story read";
    await api("/api/v1/me/read", { method: "POST", body: JSON.stringify({ stories: [b.dataset.markStory], read }) });
    main.querySelectorAll("#articles .card").forEach((c) => c.classList.toggle("read", read));
    b.textContent = read ? "Mark story unread" : "Mark story read";
    await showStoryUnread();
    await refreshUnread();
  } else if (b.dataset.markAll) {
    await api("/api/v1/me/read/all", { method: "POST", body: b.dataset.markAll });
    await route(false);
  } else if (b.dataset.star) {
    const on = b.getAttribute("aria-pressed") !== "true", id = b.dataset.star;
    await api(`/api/v1/me/starred/${enc(id)}`, { method: on ? "PUT" : "DELETE" });
    on ? starred.add(id) : starred.delete(id);
    for (const s of document.querySelectorAll(`[data-star="${CSS.escape(id)}"]`)) {
      s.setAttribute("aria-pressed", String(on));
      s.firstChild.textContent = on ? "★ Star" : "☆ Star";
    }
  } else if (b.dataset.follow) {
    const on = await follow(b.dataset.follow, b.dataset.value);
    b.textContent = on ? "Following ✓" : "Follow";
  }
}

// showStoryUnread refreshes a story page's "n of m unread" line.
async function showStoryUnread() {
  const el = $("story-unread"), id = main.querySelector("[data-mark-story]")?.dataset.markStory;
  if (!el || !id) return;
  const d = await api(`/api/v1/stories/${enc(id)}`);
  el.textContent = `${d.unread} of ${plural(d.articles.length, "article")} unread`;
}

document.addEventListener("change", (e) => {
  if (e.target.id !== "hide-read") return;
  hideRead = e.target.checked;
  localStorage.setItem("hideRead", hideRead ? "1" : "0");
  route(false);
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
// Keys that click a control of the selected story: open, mark read, mark
// the stories above read, star.
const cardKeys = new Map([["o", "a"], ["m", "[data-mark]"], ["a", "[data-mark-above]"], ["s", "[data-star]"]]);
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
  } else if (cardKeys.has(e.key) && cards[selected]) {
    cards[selected].querySelector(cardKeys.get(e.key))?.click();
  } else if (e.key === "A") {
    main.querySelector("[data-mark-all]")?.click();
  } else if (e.key === "h" && $("hide-read")) {
    $("hide-read").click();
  } else if (e.key === "/") {
    e.preventDefault();
    $("q").focus();
  } else if (e.key === "?") {
    help.showModal();
  }
});

window.addEventListener("popstate", () => route(true));

// Offline: the service worker serves the shell and the lists read before,
// and marks what it served from this device's copy. The notice shows while
// the browser says it is offline or the last answer was such a copy; then
// the page asks the node every 5 s and reloads what it shows once it
// answers.
const offline = document.querySelector(".offline");
let fromSaved = false, lookForNode;
const syncOnline = () => { offline.hidden = navigator.onLine && !fromSaved; };
function noteSource(res) {
  const saved = res.headers.get("X-Newsflow-Saved") === "1";
  if (saved === fromSaved) return;
  fromSaved = saved;
  syncOnline();
  clearInterval(lookForNode);
  if (saved) {
    lookForNode = setInterval(async () => {
      try {
        if ((await fetch("/health/live", { cache: "no-store" })).ok) route(false);
      } catch { /* still away */ }
    }, 5000);
  }
}
window.addEventListener("online", () => { syncOnline(); route(false); });
window.addEventListener("offline", syncOnline);
syncOnline();
navigator.serviceWorker?.register("/sw.js").catch(() => {});
await loadMe();
await route(false);
await showTrending();
// Live updates: the node pushes trending (1h, by story) and newly breaking
// stories over server-sent events; other windows, or a node that refuses
// the stream, are polled.
let live = null;
function startLive() {
  live = new EventSource("/api/v1/stream");
  live.addEventListener("trending", (e) => { if (trendWindow === "1h") showTrending(JSON.parse(e.data)); });
  live.addEventListener("breaking", (e) => breakingNews(JSON.parse(e.data).stories || []));
  live.addEventListener("error", () => { if (live.readyState === EventSource.CLOSED) live = null; });
}
startLive();
setInterval(() => {
  if (document.hidden) return;
  if (trendWindow !== "1h" || !live) showTrending();
  if (!live && navigator.onLine) startLive();
}, 5000);

// breakingNews announces stories that just became breaking, for a minute.
const announced = new Set();
function breakingNews(stories) {
  const box = document.querySelector(".breaking-now");
  for (const st of stories) {
    if (announced.has(st.id)) continue;
    announced.add(st.id);
    box.insertAdjacentHTML("beforeend", `<p data-story="${esc(st.id)}"><span class="badge">Breaking</span> <a href="/stories/${enc(st.id)}">${esc(st.title)}</a></p>`);
    const el = box.lastElementChild;
    setTimeout(() => el.remove(), 60000);
  }
}
setInterval(async () => {
  if (location.pathname === "/admin" && !document.hidden && $("system")) $("system").innerHTML = await systemPanel().catch((e) => `<p class="error">${esc(e.message)}</p>`);
}, 5000);
