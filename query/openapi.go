package query

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
)

// apiOp describes one operation of the API for the OpenAPI document.
type apiOp struct {
	method, path, tag, summary string
	// auth is "", "user", "admin", "reader" (the session of the user the
	// events name, or the ingestion token) or "ingest" (the ingestion token
	// or an admin).
	auth string
	// query lists query parameters as "name:type:description".
	query []string
	// body names the request body schema (or "ndjson", "opml").
	body string
	// ok is the success status and its schema ("" for none).
	ok       int
	okSchema string
	// errs lists the error statuses the operation may answer.
	errs []int
	// batch: a batch of lines, answered 207 when only some are accepted.
	batch bool
}

// apiOps is the whole API. TestOpenAPICoversRoutes checks it against the
// router, so a route cannot be added without documenting it.
var apiOps = []apiOp{
	{method: "GET", path: "/health/live", tag: "health", summary: "Liveness", ok: 200, okSchema: "Status"},
	{method: "GET", path: "/health/ready", tag: "health", summary: "Readiness: in a cluster the node runs every partition given to it and its copy of the cluster state has an owner for each, every task has restored its state and the standby copy of the story state has caught up once; 503 with reason (assigning, restoring, standby, stopping) and error otherwise", ok: 200, okSchema: "Status", errs: []int{503}},
	{method: "GET", path: "/health/detailed", tag: "health", summary: "The node's health: status ok, degraded (200, with reasons: a stage paused or far behind, a cluster member down, partitions without an owner up, the story state stale, search partitions missing, the log or state store failing, the disk nearly full) or restoring (503); dependencies (log, state store, cluster, crawler) and stages (running, restoring, paused, standby, not_here; tasks here, lag) with their state; checks: lag per stage, story and search views (the story state's source and staleness_ms), trending memory. With http.ops_token it needs Authorization: Bearer <ops_token> (401 otherwise); with http.ops_addr it is served only there (404 here)", ok: 200, okSchema: "Object", errs: []int{401, 404, 503}},
	{method: "GET", path: "/metrics", tag: "health", summary: "Prometheus metrics (text format). With http.ops_token it needs Authorization: Bearer <ops_token> (401 otherwise); with http.ops_addr it is served only there (404 here)", ok: 200, errs: []int{401, 404}},
	{method: "GET", path: "/api/v1/openapi.json", tag: "meta", summary: "This document", ok: 200, okSchema: "Object"},
	{method: "GET", path: "/api/v1/setup", tag: "meta", summary: "First-run status for the web page: whether an admin exists, sources and why they fail, whether articles arrived, and what to do next. No secrets",
		ok: 200, okSchema: "SetupStatus", errs: []int{429}},
	{method: "POST", path: "/api/v1/setup/admin", tag: "account", summary: "Create the first admin account with the one-time setup token the node printed at start, and log in. The token dies with it, and when any admin exists; limited like login",
		body: "SetupAdmin", ok: 201, okSchema: "Session", errs: []int{400, 403, 409, 429, 503}},
	{method: "POST", path: "/api/v1/admin/users", tag: "admin", auth: "admin", summary: "Create an account with a role (user or admin; newsflow user add against a running node)",
		body: "NewUser", ok: 201, okSchema: "User", errs: []int{400, 401, 403, 409, 503}},
	{method: "GET", path: "/api/v1/admin/users", tag: "admin", auth: "admin", summary: "Every account, by username", ok: 200, okSchema: "Users", errs: []int{401, 403}},
	{method: "DELETE", path: "/api/v1/admin/users/{id}", tag: "admin", auth: "admin", summary: "Delete an account with its sessions, API keys, webhooks (their queued deliveries dropped), preferences and read state (not the last admin: 409)",
		ok: 204, errs: []int{401, 403, 404, 409, 503}},
	{method: "DELETE", path: "/api/v1/admin/users/{id}/sessions", tag: "admin", auth: "admin", summary: "Log an account out everywhere: end every session and revoke every API key", ok: 204, errs: []int{401, 403, 404, 503}},

	{method: "GET", path: "/api/v1/trending", tag: "trending", summary: "Top articles by shares in a sliding window",
		query: []string{"window:string:1m, 1h or 24h (default 1h)", "k:integer:how many (default 10)", "category:string:only this category", "expand:string:articles to add each article's title, url, source and story_id", "by:string:article (default) or story: the shares of each story's articles summed, one item per story"},
		ok:    200, okSchema: "Trending", errs: []int{400, 429}},
	{method: "GET", path: "/api/v1/articles/{id}/shares", tag: "trending", summary: "Share counts of one article per window (with trending.counter: cms, estimates and their error bounds per window in bounds)", ok: 200, okSchema: "Object", errs: []int{400, 429}},
	{method: "POST", path: "/api/v1/events/share", tag: "events", summary: "Ingest one share event (open to anonymous clients; with a session, only as its user)", body: "Share", ok: 202, okSchema: "Accepted", errs: []int{400, 403, 409, 413, 422, 429, 503}},
	{method: "POST", path: "/api/v1/events/share/batch", tag: "events", summary: "Ingest share events, one JSON object per line", body: "ndjson", ok: 202, okSchema: "Accepted", batch: true, errs: []int{400, 409, 413, 422, 429, 503}},
	{method: "POST", path: "/api/v1/events/read", tag: "events", auth: "reader", summary: "Ingest one read event", body: "Read", ok: 202, okSchema: "Accepted", errs: []int{400, 401, 403, 409, 413, 422, 429, 503}},
	{method: "POST", path: "/api/v1/events/read/batch", tag: "events", auth: "reader", summary: "Ingest read events, one JSON object per line", body: "ndjson", ok: 202, okSchema: "Accepted", batch: true, errs: []int{400, 401, 409, 413, 422, 429, 503}},
	{method: "POST", path: "/api/v1/articles", tag: "articles", auth: "ingest", summary: "Ingest raw articles (one object, or NDJSON with Content-Type application/x-ndjson or ?batch=1)",
		query: []string{"batch:string:1 for NDJSON"}, body: "RawArticle", ok: 202, okSchema: "Accepted", batch: true, errs: []int{400, 401, 403, 409, 413, 429, 503}},

	{method: "GET", path: "/api/v1/stories", tag: "stories", summary: "Recent stories ranked by size, authority, freshness and velocity",
		query: []string{"topic:string:only this topic", "since:string:latest article at or after (RFC 3339 or ms)", "limit:integer:1-100 (default 20)", "cursor:string:next_cursor of the previous page", "hide_read:string:1 to leave out stories the logged-in reader has read (each story carries unread for a logged-in reader; a page may come back short, with next_cursor)"},
		ok:    200, okSchema: "StoryPage", errs: []int{400, 429}},
	{method: "GET", path: "/api/v1/stories/{id}", tag: "stories", summary: "One story with all its articles and sources (a merged story answers with the story it is part of); for a logged-in reader each article carries read and starred, and the story unread", ok: 200, okSchema: "StoryDetail", errs: []int{400, 404, 429}},
	{method: "GET", path: "/api/v1/image/{id}", tag: "stories", summary: "A lead image of the node's articles through its caching proxy (the image field of stories and articles holds this path; the id is the first 16 bytes of the SHA-256 of the image URL in hex). Only images of articles the node applied are served: JPEG, PNG, GIF, WebP, AVIF or BMP up to the size limit, never SVG, with ETag (304 on If-None-Match) and Cache-Control",
		ok: 200, errs: []int{400, 403, 404, 429, 502, 503, 504}},
	{method: "GET", path: "/api/v1/breaking", tag: "stories", summary: "Stories breaking now", ok: 200, okSchema: "StoryPage", errs: []int{429}},
	{method: "GET", path: "/api/v1/stream", tag: "stories", summary: "Server-sent events (text/event-stream): event trending (the answer of /api/v1/trending?by=story&window=1h&k=10 whenever it changes), event breaking ({\"stories\": [...], \"as_of\"}: stories that became breaking, as /api/v1/breaking lists them, once per episode), a \": ping\" comment every 15 s. It starts with retry and the current state; with a Last-Event-ID of the same server process, only what came after it. 503 when too many streams are open",
		query: []string{"last_event_id:string:the id of the last event received, for clients that cannot send the Last-Event-ID header"}, ok: 200, errs: []int{429, 503}},
	{method: "GET", path: "/api/v1/topics", tag: "stories", summary: "Topics of recent stories with story and article counts", ok: 200, okSchema: "Object", errs: []int{429}},
	{method: "GET", path: "/api/v1/search", tag: "search", summary: "Full-text search over all partitions (title boosted), with filters and highlights. In a cluster the receiving node asks every node and merges; partitions no node answered for are in missing_partitions (partial: true), nodes that did not answer in failed_nodes. next_cursor is a position in the order, valid on any node",
		query: []string{"q:string:text (empty: newest first)", "topic:string:only this topic", "source:string:only this source id; repeated, any of them (at most 5,000)", "from:string:published at or after (RFC 3339 or ms)", "to:string:published before", "limit:integer:1-100 (default 20)", "cursor:string:next_cursor of the previous page", "group:string:story for one result per story, its other hits in also"},
		ok:    200, okSchema: "SearchPage", errs: []int{400, 429, 503}},
	{method: "GET", path: "/api/v1/feed", tag: "feed", summary: "The reader's feed (personal with a session, else the non-personal ranking). interest says whether the reader's interest profile ranked it: applied, none (no reads yet) or unavailable (its owner did not answer: ranked with the preferences alone, partial: true, with interest_error, missing_partitions and failed_nodes)",
		query: []string{"limit:integer:1-100 (default 20)", "cursor:string:next_cursor of the previous page", "explain:string:1 to include each story's signals", "hide_read:string:1 to leave out stories the logged-in reader has read (each story carries unread, its unread article count, for a logged-in reader)"},
		ok:    200, okSchema: "FeedPage", errs: []int{400, 429}},

	{method: "POST", path: "/api/v1/auth/register", tag: "account", summary: "Create an account and log in (a JSON body only; refused from another site's page)", body: "Credentials", ok: 201, okSchema: "Session", errs: []int{400, 403, 409, 413, 415, 429, 503}},
	{method: "POST", path: "/api/v1/auth/login", tag: "account", summary: "Log in (sets the nf_session cookie; a JSON body only; refused from another site's page; limited per client address and per username from that address)", body: "Credentials", ok: 200, okSchema: "Session", errs: []int{400, 401, 403, 413, 415, 429}},
	{method: "POST", path: "/api/v1/auth/logout", tag: "account", summary: "Revoke the request's session; with ?everywhere=true log its account out everywhere: every session ends and every API key is revoked (401 without a session)",
		query: []string{"everywhere:string:true to end every session and revoke every API key of the account"}, ok: 204, errs: []int{400, 401, 503}},
	{method: "GET", path: "/api/v1/me", tag: "account", auth: "user", summary: "The logged-in user", ok: 200, okSchema: "User", errs: []int{401, 429}},
	{method: "GET", path: "/api/v1/preferences", tag: "account", auth: "user", summary: "The user's preferences", ok: 200, okSchema: "Preferences", errs: []int{401, 429}},
	{method: "PUT", path: "/api/v1/preferences", tag: "account", auth: "user", summary: "Replace the user's preferences", body: "Preferences", ok: 200, okSchema: "Preferences", errs: []int{400, 401, 429, 503}},
	{method: "GET", path: "/v1/me", tag: "miniflux", auth: "apikey", summary: "Miniflux API: the reader (id, username, is_admin, display settings)", ok: 200, okSchema: "Object", errs: []int{401}},
	{method: "GET", path: "/v1/categories", tag: "miniflux", auth: "apikey", summary: "Miniflux API: the reader's folders as categories ({id, title, user_id, hide_globally}; 1 is \"All\")", ok: 200, okSchema: "Object", errs: []int{401}},
	{method: "POST", path: "/v1/categories", tag: "miniflux", auth: "apikey", summary: "Miniflux API: create a category ({\"title\"})", body: "Object", ok: 201, okSchema: "Object", errs: []int{400, 401}},
	{method: "GET", path: "/v1/feeds", tag: "miniflux", auth: "apikey", summary: "Miniflux API: the reader's subscriptions as feeds", ok: 200, okSchema: "Object", errs: []int{401}},
	{method: "POST", path: "/v1/feeds", tag: "miniflux", auth: "apikey", summary: "Miniflux API: subscribe to the source of a feed URL ({\"feed_url\", \"category_id\"}; 201 {\"feed_id\"}); a URL no source has is added when auth.readers_add_sources allows (or for an admin), checked as an admin's addition is, else 403", body: "Object", ok: 201, okSchema: "Object", errs: []int{400, 401, 403}},
	{method: "GET", path: "/v1/feeds/{id}", tag: "miniflux", auth: "apikey", summary: "Miniflux API: one subscribed feed", ok: 200, okSchema: "Object", errs: []int{400, 401, 404}},
	{method: "DELETE", path: "/v1/feeds/{id}", tag: "miniflux", auth: "apikey", summary: "Miniflux API: unsubscribe", ok: 204, errs: []int{400, 401, 404}},
	{method: "GET", path: "/v1/entries", tag: "miniflux", auth: "apikey", summary: "Miniflux API: entries of the reader's subscriptions (feed_id or category_id to narrow), newest 2,000 of the selection at most: status (read, unread; repeatable), starred, after/before and published_after/published_before (unix s), after_entry_id/before_entry_id, order (published_at, id), direction (asc, default, or desc), limit (default 100), offset; {total, entries}", ok: 200, okSchema: "Object", errs: []int{400, 401, 404}},
	{method: "PUT", path: "/v1/entries", tag: "miniflux", auth: "apikey", summary: "Miniflux API: set the status (read, unread) and/or starred of entries ({\"entry_ids\": [...], \"status\", \"starred\"}; the body is read as JSON whatever its Content-Type)", body: "Object", ok: 204, errs: []int{400, 401}},
	{method: "GET", path: "/v1/entries/{entry}", tag: "miniflux", auth: "apikey", summary: "Miniflux API: one entry", ok: 200, okSchema: "Object", errs: []int{400, 401, 404}},
	{method: "PUT", path: "/v1/entries/{entry}/bookmark", tag: "miniflux", auth: "apikey", summary: "Miniflux API: toggle an entry's star", ok: 204, errs: []int{400, 401, 404}},
	{method: "PUT", path: "/v1/entries/{entry}/star", tag: "miniflux", auth: "apikey", summary: "Miniflux API: toggle an entry's star (the newer name of bookmark)", ok: 204, errs: []int{400, 401, 404}},
	{method: "GET", path: "/v1/feeds/{id}/entries", tag: "miniflux", auth: "apikey", summary: "Miniflux API: the entries of one subscribed feed (the filters of /v1/entries)", ok: 200, okSchema: "Object", errs: []int{400, 401, 404}},
	{method: "GET", path: "/v1/feeds/{id}/entries/{entry}", tag: "miniflux", auth: "apikey", summary: "Miniflux API: one entry", ok: 200, okSchema: "Object", errs: []int{400, 401, 404}},
	{method: "PUT", path: "/v1/feeds/{id}/mark-all-as-read", tag: "miniflux", auth: "apikey", summary: "Miniflux API: mark everything of a feed published until now read", ok: 204, errs: []int{400, 401, 404}},
	{method: "GET", path: "/v1/categories/{id}/entries", tag: "miniflux", auth: "apikey", summary: "Miniflux API: the entries of the feeds in one category (the filters of /v1/entries)", ok: 200, okSchema: "Object", errs: []int{400, 401, 404}},
	{method: "GET", path: "/v1/feeds/counters", tag: "miniflux", auth: "apikey", summary: "Miniflux API: read and unread entries per subscribed feed ({\"reads\": {feed id: n}, \"unreads\": {...}}, counts that are not zero)", ok: 200, okSchema: "Object", errs: []int{401}},
	{method: "POST", path: "/accounts/ClientLogin", tag: "greader", summary: "Google Reader API: log in (form Email = username, Passwd = an API key); text/plain SID, LSID and Auth (output=json: JSON). 401 Error=BadAuthentication", ok: 200, errs: []int{401}},
	{method: "GET", path: "/reader/api/0/token", tag: "greader", auth: "greader", summary: "Google Reader API: the action token T (text/plain)", ok: 200, errs: []int{401}},
	{method: "GET", path: "/reader/api/0/user-info", tag: "greader", auth: "greader", summary: "Google Reader API: userId, userName, userProfileId, userEmail", ok: 200, errs: []int{401}},
	{method: "GET", path: "/reader/api/0/subscription/list", tag: "greader", auth: "greader", summary: "Google Reader API: the reader's subscriptions ({subscriptions: [{id: feed/<n>, title, categories: [{id: user/-/label/<folder>, label}], url, htmlUrl, iconUrl}]})", ok: 200, errs: []int{401}},
	{method: "GET", path: "/reader/api/0/tag/list", tag: "greader", auth: "greader", summary: "Google Reader API: the starred state and the reader's folders as labels", ok: 200, errs: []int{401}},
	{method: "POST", path: "/reader/api/0/edit-tag", tag: "greader", auth: "greader", summary: "Google Reader API: add (a) or remove (r) user/-/state/com.google/read or starred on items (i: long or short form, repeatable); other tags are accepted and ignored; text/plain OK", ok: 200, errs: []int{400, 401}},
	{method: "POST", path: "/reader/api/0/mark-all-as-read", tag: "greader", auth: "greader", summary: "Google Reader API: mark a stream (s) read up to ts (microseconds; default now); text/plain OK", ok: 200, errs: []int{400, 401}},
	{method: "GET", path: "/reader/api/0/stream/items/ids", tag: "greader", auth: "greader", summary: "Google Reader API: the item ids (short form) of a stream (s: feed/<n>, user/-/label/<folder>, user/-/state/com.google/reading-list, starred, read), newest first (r=o: oldest), n, ot, nt, xt, it, c (continuation)", ok: 200, errs: []int{400, 401}},
	{method: "POST", path: "/reader/api/0/stream/items/contents", tag: "greader", auth: "greader", summary: "Google Reader API: the items named by i (repeatable, either form)", ok: 200, errs: []int{400, 401}},
	{method: "GET", path: "/reader/api/0/stream/contents", tag: "greader", auth: "greader", summary: "Google Reader API: the items of the stream s (the parameters of stream/items/ids); {id, updated, items, continuation}", ok: 200, errs: []int{400, 401}},
	{method: "GET", path: "/reader/api/0/stream/contents/{stream:*}", tag: "greader", auth: "greader", summary: "Google Reader API: the items of the stream in the path", ok: 200, errs: []int{400, 401}},
	{method: "POST", path: "/reader/api/0/subscription/quickadd", tag: "greader", auth: "greader", summary: "Google Reader API: subscribe to a feed URL (quickadd; a source no one added is added when auth.readers_add_sources allows, or for an admin): {numResults, query, streamId, streamName}; numResults 0 with error when refused", ok: 200, okSchema: "Object", errs: []int{401}},
	{method: "POST", path: "/reader/api/0/subscription/edit", tag: "greader", auth: "greader", summary: "Google Reader API: ac subscribe, unsubscribe or edit feeds s (feed/<n> or feed/<url>, repeatable) with title t, into label a (created) or out of label r; text/plain OK", ok: 200, errs: []int{400, 401}},
	{method: "GET", path: "/reader/api/0/unread-count", tag: "greader", auth: "greader", summary: "Google Reader API: unread items per feed, label and the reading list ({max, unreadcounts: [{id, count, newestItemTimestampUsec}]})", ok: 200, errs: []int{401}},
	{method: "GET", path: "/reader/atom/{stream:*}", tag: "greader", auth: "greader", summary: "Google Reader API (FeedHQ, TheOldReader): a stream as Atom, each entry with the Google Reader categories (label=\"read\" when read); no validators", ok: 200, errs: []int{400, 401}},
	{method: "GET", path: "/api/v1/me/webhooks", tag: "webhooks", auth: "user", summary: "The reader's breaking-news webhooks, each with its secret and delivery status (delivered, retried, dead_lettered, last_attempt_at, last_status, last_error)", ok: 200, okSchema: "Object", errs: []int{401, 429}},
	{method: "POST", path: "/api/v1/me/webhooks", tag: "webhooks", auth: "user", summary: "Register a webhook ({\"url\": http(s), \"topics\": [...], \"sources\": [...]}): when a story that passes the filter becomes breaking, a signed JSON POST (X-Newsflow-Signature: sha256=HMAC-SHA256(secret, timestamp + \".\" + body)); the answer holds the secret. At most 10 per reader (409). A URL on an address the SSRF guard refuses (loopback, private, link-local, metadata, in any numeric form; crawl.allow_cidrs and crawl.allow_private allow some) is refused: 400 with reason blocked_address", body: "Object", ok: 201, okSchema: "Object", errs: []int{400, 401, 409, 429, 503}},
	{method: "DELETE", path: "/api/v1/me/webhooks/{id}", tag: "webhooks", auth: "user", summary: "Delete one of the reader's webhooks", ok: 204, errs: []int{401, 404, 429, 503}},
	{method: "GET", path: "/api/v1/admin/webhooks", tag: "webhooks", auth: "admin", summary: "Every webhook with its owner and delivery status (no secrets)", ok: 200, okSchema: "Object", errs: []int{401, 403}},
	{method: "DELETE", path: "/api/v1/admin/webhooks/{id}", tag: "webhooks", auth: "admin", summary: "Delete any webhook", ok: 204, errs: []int{401, 403, 404, 503}},
	{method: "GET", path: "/api/v1/me/api-keys", tag: "account", auth: "user", summary: "The reader's API keys, the passwords of the client APIs (id, name, created_at, last_used_at; never the secret)", ok: 200, okSchema: "Object", errs: []int{401, 429}},
	{method: "POST", path: "/api/v1/me/api-keys", tag: "account", auth: "user", summary: "Create an API key ({\"name\": ...}, 1 to 64 bytes); the answer is the only time its secret is shown. At most 20 per reader (409)", body: "Object", ok: 201, okSchema: "Object", errs: []int{400, 401, 409, 429, 503}},
	{method: "DELETE", path: "/api/v1/me/api-keys/{id}", tag: "account", auth: "user", summary: "Revoke an API key: apps using it are logged out", ok: 204, errs: []int{401, 404, 429, 503}},
	{method: "GET", path: "/api/v1/history", tag: "account", auth: "user", summary: "The user's latest reads, newest first, with each article's title and story", ok: 200, okSchema: "Object", errs: []int{401, 429, 503}},
	{method: "GET", path: "/api/v1/me/unread", tag: "reading", auth: "user", summary: "Unread counts over the stories of the story view: in total, per topic (stories with an unread article, unread articles) and per source (unread articles); as_of is the latest event time", ok: 200, okSchema: "Object", errs: []int{401, 429}},
	{method: "POST", path: "/api/v1/me/read", tag: "reading", auth: "user", summary: "Mark articles and whole stories read ({\"articles\": [...], \"stories\": [...]}) or unread (\"read\": false). A story marked read is read up to its latest article: an article that joins it later is unread. Unknown ids are listed in unknown (404 when none is known)", body: "Object", ok: 200, okSchema: "Object", errs: []int{400, 401, 404, 413, 429, 503}},
	{method: "POST", path: "/api/v1/me/read/all", tag: "reading", auth: "user", summary: "Mark everything read, or everything of one topic or source ({\"topic\": ...} or {\"source\": ...}), published up to before (ms; default: as_of of /api/v1/me/unread)", body: "Object", ok: 200, okSchema: "Object", errs: []int{400, 401, 429, 503}},
	{method: "GET", path: "/api/v1/me/starred", tag: "reading", auth: "user", summary: "Starred articles, the most recently starred first, each with the story it is in now", ok: 200, okSchema: "Object", errs: []int{401, 429}},
	{method: "PUT", path: "/api/v1/me/starred/{id}", tag: "reading", auth: "user", summary: "Star an article (it must be in the story view)", ok: 200, okSchema: "Object", errs: []int{400, 401, 404, 429, 503}},
	{method: "DELETE", path: "/api/v1/me/starred/{id}", tag: "reading", auth: "user", summary: "Unstar an article", ok: 204, errs: []int{400, 401, 429, 503}},
	{method: "GET", path: "/api/v1/me/interest", tag: "account", auth: "user", summary: "The user's interest vector and reading history, from the owner of the user's partition (the feed reads the profile through it)",
		query: []string{"at:string:decay the vector to this event time (RFC 3339 or ms; default now)"}, ok: 200, okSchema: "Profile", errs: []int{400, 401, 429, 503}},

	{method: "GET", path: "/api/v1/admin/progress", tag: "admin", auth: "admin", summary: "Readiness and committed offsets and lag per stage and partition", ok: 200, okSchema: "Object", errs: []int{401, 403, 503}},
	{method: "GET", path: "/api/v1/admin/cluster", tag: "admin", auth: "admin", summary: "Cluster: this node, the leader, members (up, partitions owned), each partition's owner, epoch, lag and state size (from its owner), and nodes that did not answer", ok: 200, okSchema: "Object", errs: []int{401, 403}},
	{method: "GET", path: "/api/v1/admin/cluster/local", tag: "admin", auth: "admin", summary: "The partitions this node runs, with lag and state size", ok: 200, okSchema: "Object", errs: []int{401, 403}},
	{method: "POST", path: "/api/v1/admin/cluster/leave", tag: "admin", auth: "admin", summary: "The node gives up its partitions, leaves the cluster and stops (newsflow leave)", ok: 200, okSchema: "Object", errs: []int{401, 403, 503}},
	{method: "GET", path: "/api/v1/admin/stats", tag: "admin", auth: "admin", summary: "Records per second and lag per stage, dead letters, bytes on disk per store", ok: 200, okSchema: "Object", errs: []int{401, 403}},
	{method: "GET", path: "/api/v1/admin/slo", tag: "admin", auth: "admin", summary: "Service level objectives (ids as in the alerts and dashboards): per objective its target, and over 5m, 1h and the 30-day window good and total events, value and burn rate (window_s: the span covered, since_start when the node started later); over the window the error budget remaining (1 - bad fraction / (1 - target), negative when overspent) and status (ok, burning, breached, no_data); availability per endpoint group. In a cluster the counts of every node that answered are summed; nodes, failed_nodes and per_node say whose", ok: 200, okSchema: "Object", errs: []int{401, 403}},
	{method: "GET", path: "/api/v1/admin/topology", tag: "admin", auth: "admin", summary: "Operators, stages and topics", ok: 200, okSchema: "Object", errs: []int{401, 403}},
	{method: "GET", path: "/api/v1/admin/stages", tag: "admin", auth: "admin", summary: "Every stage with its tasks on this node (running, restoring, standby copies), whether it is paused here, and its lag", ok: 200, okSchema: "Object", errs: []int{401, 403}},
	{method: "POST", path: "/api/v1/admin/stages/{stage}/pause", tag: "admin", auth: "admin", summary: "Pause a stage on this node: its tasks commit what they applied and read nothing more until resumed; its lag grows", ok: 200, okSchema: "Object", errs: []int{401, 403, 404, 503}},
	{method: "POST", path: "/api/v1/admin/stages/{stage}/resume", tag: "admin", auth: "admin", summary: "Resume a stage paused on this node", ok: 200, okSchema: "Object", errs: []int{401, 403, 404, 503}},
	{method: "GET", path: "/api/v1/admin/users/{id}/interest", tag: "admin", auth: "admin", summary: "A user's interest vector and reading history",
		query: []string{"at:string:decay the vector to this event time (RFC 3339 or ms; default now)"}, ok: 200, okSchema: "Profile", errs: []int{400, 401, 403, 503}},
	{method: "GET", path: "/api/v1/sources", tag: "stories", summary: "Sources (id, name, site, category), for choosing preferred and excluded sources", ok: 200, okSchema: "Object", errs: []int{429}},
	{method: "GET", path: "/api/v1/admin/sources", tag: "admin", auth: "admin", summary: "All sources", ok: 200, okSchema: "Object", errs: []int{401, 403}},
	{method: "POST", path: "/api/v1/admin/sources", tag: "admin", auth: "admin", summary: "Add a source (a page URL is resolved to its feed unless ?discover=false); either way a URL on an address the crawler's SSRF guard refuses is refused: 400 with reason blocked_address",
		query: []string{"discover:string:false to keep the URL as given, unfetched"}, body: "Source", ok: 201, okSchema: "Source", errs: []int{400, 401, 403, 409, 503}},
	{method: "POST", path: "/api/v1/admin/sources/import", tag: "admin", auth: "admin", summary: "Import sources from OPML; feeds that are invalid or on addresses the crawler's SSRF guard refuses are reported in errors (400)", body: "opml", ok: 200, okSchema: "Object", errs: []int{400, 401, 403, 503}},
	{method: "GET", path: "/api/v1/admin/sources/export", tag: "admin", auth: "admin", summary: "Export sources as OPML", ok: 200, errs: []int{401, 403}},
	{method: "GET", path: "/api/v1/admin/sources/{id}", tag: "admin", auth: "admin", summary: "One source", ok: 200, okSchema: "Source", errs: []int{401, 403, 404}},
	{method: "PATCH", path: "/api/v1/admin/sources/{id}", tag: "admin", auth: "admin", summary: "Change a source (name, category, authority, paused, ...)", body: "Source", ok: 200, okSchema: "Source", errs: []int{400, 401, 403, 404, 503}},
	{method: "DELETE", path: "/api/v1/admin/sources/{id}", tag: "admin", auth: "admin", summary: "Delete a source", ok: 204, errs: []int{401, 403, 404, 503}},
	{method: "GET", path: "/api/v1/admin/sources/{id}/status", tag: "admin", auth: "admin", summary: "Crawl status: last and next crawl, errors, circuit (times in ms since the epoch)", ok: 200, okSchema: "Object", errs: []int{401, 403, 404}},
	{method: "POST", path: "/api/v1/admin/sources/{id}/crawl", tag: "admin", auth: "admin", summary: "Crawl now (at most once a minute per source)", ok: 200, okSchema: "Object", errs: []int{401, 403, 404, 429}},
}

var statusText = map[int]string{
	400: "Invalid request (JSON error with the reason)", 401: "No valid session or token", 403: "Not an admin",
	404: "Not found", 409: "Conflict (name taken, or an Idempotency-Key in flight)", 413: "Body too large",
	415: "The body is not application/json", 422: "Idempotency-Key reused with another request body",
	429: "Too many requests (Retry-After)", 503: "Not ready or a dependency unavailable (Retry-After when the cluster has no leader to take a change)",
	502: "The origin failed or sent something that is not an allowed image", 504: "The origin did not answer in time",
}

func obj(props map[string]string, required ...string) map[string]any {
	p := map[string]any{}
	for k, t := range props {
		switch {
		case strings.HasPrefix(t, "[]"):
			p[k] = map[string]any{"type": "array", "items": typeOf(t[2:])}
		default:
			p[k] = typeOf(t)
		}
	}
	o := map[string]any{"type": "object", "properties": p}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

func typeOf(t string) map[string]any {
	switch t {
	case "string", "integer", "number", "boolean", "object":
		return map[string]any{"type": t}
	case "time":
		return map[string]any{"type": "string", "format": "date-time"}
	case "ms":
		return map[string]any{"type": "integer", "format": "int64", "description": "ms since the Unix epoch"}
	}
	return map[string]any{"$ref": "#/components/schemas/" + t}
}

var apiSchemas = map[string]any{
	"Error":     obj(map[string]string{"error": "string"}, "error"),
	"Status":    obj(map[string]string{"status": "string"}),
	"Object":    map[string]any{"type": "object"},
	"Accepted":  obj(map[string]string{"accepted": "integer", "rejected": "integer", "errors": "[]LineError", "errors_truncated": "boolean"}),
	"LineError": obj(map[string]string{"line": "integer", "error": "string"}),
	"Share": obj(map[string]string{"event_id": "string", "article_id": "string", "user_id": "string", "share_type": "string", "category": "string",
		"timestamp": "integer"}, "event_id", "article_id", "user_id", "timestamp"),
	"Read": obj(map[string]string{"event_id": "string", "user_id": "string", "article_id": "string", "session_id": "string", "timestamp": "integer",
		"dwell_ms": "integer"}, "event_id", "user_id", "article_id", "timestamp"),
	"RawArticle": obj(map[string]string{"url": "string", "source_id": "string", "guid": "string", "title": "string", "summary": "string",
		"content": "string", "author": "string", "image_url": "string", "published_at": "time", "fetched_at": "time"}, "url", "title"),
	"Trending": obj(map[string]string{"window": "string", "category": "string", "items": "[]object", "as_of": "integer"}),
	"Story": obj(map[string]string{"id": "string", "representative": "string", "title": "string", "url": "string", "source_id": "string",
		"authority": "number", "article_count": "integer", "sources": "[]object", "first_seen": "integer", "last_seen": "integer",
		"topics": "[]object", "velocity": "number", "breaking": "boolean", "decay_class": "string", "decay_lambda": "number", "score": "number",
		"image": "string"}),
	"StoryPage":   obj(map[string]string{"stories": "[]Story", "as_of": "integer", "next_cursor": "string", "staleness_ms": "integer"}),
	"StoryDetail": obj(map[string]string{"id": "string", "title": "string", "articles": "[]object", "sources": "[]object", "image": "string", "staleness_ms": "integer"}),
	"SearchPage": obj(map[string]string{"hits": "[]object", "total": "integer", "order": "string", "next_cursor": "string", "partial": "boolean",
		"missing_partitions": "[]integer", "failed_nodes": "[]string"}),
	"FeedPage": obj(map[string]string{"stories": "[]Story", "next_cursor": "string", "partial": "boolean", "interest": "string", "interest_error": "string",
		"missing_partitions": "[]integer", "failed_nodes": "[]string", "staleness_ms": "integer"}),
	"Profile":     obj(map[string]string{"user_id": "string", "topics": "[]object", "updated_at": "ms", "reads": "integer", "history": "[]object"}),
	"Credentials": obj(map[string]string{"username": "string", "password": "string"}, "username", "password"),
	"User":        obj(map[string]string{"id": "string", "username": "string", "role": "string", "created_at": "ms"}),
	"Users":       obj(map[string]string{"users": "[]User"}),
	"Session":     obj(map[string]string{"user": "User", "token": "string", "expires_at": "ms"}),
	"Preferences": obj(map[string]string{"topics": "[]string", "preferred_sources": "[]string", "excluded_sources": "[]string", "updated_at": "ms"}),
	"Source": obj(map[string]string{"id": "string", "feed_url": "string", "homepage": "string", "name": "string", "category": "string",
		"authority": "number", "paused": "boolean"}),

	"SetupAdmin": obj(map[string]string{"token": "string", "username": "string", "password": "string"}, "token", "username", "password"),
	"NewUser":    obj(map[string]string{"username": "string", "password": "string", "role": "string"}, "username", "password"),
	"SetupStatus": obj(map[string]string{"accounts": "boolean", "admin_exists": "boolean", "setup_token_active": "boolean", "ready": "boolean",
		"sources": "SetupSources", "articles": "SetupArticles", "done": "boolean", "next_steps": "[]SetupStep", "as_of": "integer"}),
	"SetupSources": obj(map[string]string{"total": "integer", "active": "integer", "crawled": "integer", "ok": "integer", "failing": "integer",
		"reasons": "[]SetupReason"}),
	"SetupReason":   obj(map[string]string{"reason": "string", "message": "string", "sources": "integer"}),
	"SetupArticles": obj(map[string]string{"received": "integer", "any": "boolean", "stories": "integer"}),
	"SetupStep":     obj(map[string]string{"id": "string", "text": "string", "command": "string", "path": "string"}, "id", "text"),
}

// openAPIDocument builds the OpenAPI 3.1 description of the API.
func openAPIDocument() []byte {
	paths := map[string]map[string]any{}
	for _, op := range apiOps {
		o := map[string]any{"summary": op.summary, "tags": []string{op.tag}, "operationId": strings.ToLower(op.method) + strings.NewReplacer("/", "_", "{", "", "}", "", ".", "_", "-", "_").Replace(op.path)}
		var params []any
		if strings.Contains(op.path, "{id}") {
			params = append(params, map[string]any{"name": "id", "in": "path", "required": true, "schema": map[string]string{"type": "string"}})
		}
		for _, q := range op.query {
			parts := strings.SplitN(q, ":", 3)
			params = append(params, map[string]any{"name": parts[0], "in": "query", "schema": map[string]string{"type": parts[1]}, "description": parts[2]})
		}
		if op.method == "POST" && strings.HasPrefix(op.path, "/api/v1/events") || op.path == "/api/v1/articles" {
			params = append(params, map[string]any{"name": HeaderIdempotencyKey, "in": "header", "schema": map[string]string{"type": "string"},
				"description": "makes a retry safe: a repeat of the same request (path and body) by the same caller (session user, token, or client address) gets the first response and appends nothing; the key with another body gets 422"})
		}
		if len(params) > 0 {
			o["parameters"] = params
		}
		switch op.body {
		case "":
		case "ndjson":
			o["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/x-ndjson": map[string]any{"schema": map[string]string{"type": "string"}}}}
		case "opml":
			o["requestBody"] = map[string]any{"required": true, "content": map[string]any{"text/x-opml": map[string]any{"schema": map[string]string{"type": "string"}}}}
		default:
			o["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": typeOf(op.body)}}}
		}
		resp := map[string]any{}
		ok := map[string]any{"description": "Success"}
		if op.okSchema != "" {
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": typeOf(op.okSchema)}}
		}
		resp[strconv.Itoa(op.ok)] = ok
		for _, e := range op.errs {
			resp[strconv.Itoa(e)] = map[string]any{"description": statusText[e], "content": map[string]any{"application/json": map[string]any{"schema": typeOf("Error")}}}
		}
		if op.batch {
			accepted := map[string]any{"application/json": map[string]any{"schema": typeOf("Accepted")}}
			resp["207"] = map[string]any{"description": "Some lines accepted (they are appended, once), the others rejected: accepted and rejected count them, " +
				"errors lists every rejected line with its number and reason (the first 100,000; errors_truncated says there were more)", "content": accepted}
			resp["400"] = map[string]any{"description": "No line accepted: the lines' errors as for 207 (or an error for an empty batch or a bad single object)",
				"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"oneOf": []any{typeOf("Accepted"), typeOf("Error")}}}}}
		}
		o["responses"] = resp
		switch op.auth {
		case "user":
			o["security"] = []any{map[string]any{"bearer": []string{}}, map[string]any{"cookie": []string{}}}
		case "admin":
			o["security"] = []any{map[string]any{"bearer": []string{}}, map[string]any{"cookie": []string{}}}
			o["description"] = "Admin only: an admin session or the configured admin token."
		case "reader":
			o["security"] = []any{map[string]any{"bearer": []string{}}, map[string]any{"cookie": []string{}}}
			o["description"] = "The session of the user each event names, or the ingestion token (auth.ingest_token) of a trusted service."
		case "ingest":
			o["security"] = []any{map[string]any{"bearer": []string{}}, map[string]any{"cookie": []string{}}}
			o["description"] = "The ingestion token (auth.ingest_token), or an admin."
		case "greader":
			o["security"] = []any{map[string]any{"googleLogin": []string{}}}
			o["description"] = "Authorization: GoogleLogin auth=<Auth of ClientLogin> (the API key). Writes take the action token T, an empty one or none."
		case "apikey":
			o["security"] = []any{map[string]any{"apiKey": []string{}}, map[string]any{"basic": []string{}}}
			o["description"] = "One of the reader's API keys (Settings, or POST /api/v1/me/api-keys): as X-Auth-Token, or as the password of HTTP Basic auth with the username. Errors are {\"error_message\": ...}, as Miniflux writes them."
		}
		if paths[op.path] == nil {
			paths[op.path] = map[string]any{}
		}
		paths[op.path][strings.ToLower(op.method)] = o
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "newsflow API", "version": "v1", "description": "News aggregation: trending, stories, search, feeds, accounts and administration. Errors are JSON objects with an error field."},
		"paths":   paths,
		"components": map[string]any{
			"schemas": apiSchemas,
			"securitySchemes": map[string]any{
				"bearer":      map[string]any{"type": "http", "scheme": "bearer", "description": "a session token from login, or the admin token"},
				"cookie":      map[string]any{"type": "apiKey", "in": "cookie", "name": SessionCookie},
				"apiKey":      map[string]any{"type": "apiKey", "in": "header", "name": "X-Auth-Token", "description": "a reader's API key (the client APIs)"},
				"basic":       map[string]any{"type": "http", "scheme": "basic", "description": "the username and one of the reader's API keys (the client APIs)"},
				"googleLogin": map[string]any{"type": "apiKey", "in": "header", "name": "Authorization", "description": "GoogleLogin auth=<a reader's API key> (the Google Reader API)"},
			},
		},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic(err) // the document is built from constants
	}
	return b
}

// handleOpenAPI serves the OpenAPI document.
func (s *Server) handleOpenAPI(ctx *fasthttp.RequestCtx) {
	writeRaw(ctx, fasthttp.StatusOK, s.openapi)
}
