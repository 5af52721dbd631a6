package query

import (
	"context"

	"github.com/newsflow/newsflow/operators/searchindex"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/newsflow/newsflow/query/httpkit"
	"github.com/newsflow/newsflow/query/readerapi"
	"github.com/valyala/fasthttp"
)

// The route table. Each part of the API declares its routes once, with
// their handlers and their documentation: routes gathers the parts this
// node has (Deps fields may be nil), New registers them, and the OpenAPI
// document is built from the same entries (openapi.go), so what a node
// serves and what it documents cannot differ.

// routes is every route of the API this node serves, but the operator
// endpoints (opsRoutes), which may have a listener of their own.
func (s *Server) routes() []httpkit.Route {
	d := s.deps
	routes := append(s.nodeRoutes(), s.eventRoutes()...)
	routes = append(routes, s.adminRoutes()...)
	if d.Articles != nil {
		routes = append(routes, s.articleRoutes()...)
	}
	if d.Stories != nil {
		routes = append(routes, s.storyRoutes()...)
	}
	if d.Search != nil {
		routes = append(routes, s.searchRoutes()...)
	}
	if d.Interest != nil {
		routes = append(routes, s.interestAdminRoutes()...)
	}
	if d.Auth != nil {
		routes = append(routes, s.accountRoutes()...)
		if d.Webhooks != nil {
			routes = append(routes, s.webhookRoutes()...)
		}
		if d.Sources != nil {
			routes = append(routes, s.readerAPI().Routes()...)
		}
		routes = append(routes, s.readingRoutes()...)
	}
	if d.Sources != nil {
		routes = append(routes, s.sourceRoutes()...)
	}
	if d.Cluster != nil {
		routes = append(routes, s.clusterRoutes()...)
	}
	return routes
}

// nodeRoutes are the node's own: its API document, probes and first-run status, and trending.
func (s *Server) nodeRoutes() []httpkit.Route {
	return []httpkit.Route{
		{Method: "GET", Path: "/api/v1/openapi.json", Name: "openapi", Handler: s.handleOpenAPI, Doc: httpkit.Doc{Tag: "meta", Summary: "This document", OK: 200, OKSchema: "Object"}},
		{Method: "GET", Path: "/health/live", Name: "live", Handler: s.handleLive, Doc: httpkit.Doc{Tag: "health", Summary: "Liveness", OK: 200, OKSchema: "Status"}},
		{Method: "GET", Path: "/health/ready", Name: "ready", Handler: s.handleReady, Doc: httpkit.Doc{Tag: "health", Summary: "Readiness: in a cluster the node runs every partition given to it and its copy of the cluster state has an owner for each, every task has restored its state and the standby copy of the story state has caught up once; 503 with reason (assigning, restoring, standby, stopping) and error otherwise", OK: 200, OKSchema: "Status", Errs: []int{503}}},
		{Method: "GET", Path: "/api/v1/setup", Name: "setup", Handler: s.handleSetup, Doc: httpkit.Doc{Tag: "meta", Summary: "First-run status for the web page: whether an admin exists, sources and why they fail, whether articles arrived, and what to do next. No secrets", OK: 200, OKSchema: "SetupStatus", Errs: []int{429}}},
		{Method: "GET", Path: "/api/v1/trending", Name: "trending", Handler: s.toOwner(s.expandOwner, s.handleTrending), Doc: httpkit.Doc{Tag: "trending", Summary: "Top articles by shares in a sliding window", Query: []string{"window:string:1m, 1h or 24h (default 1h)", "k:integer:how many (default 10)", "category:string:only this category", "expand:string:articles to add each article's title, url, source and story_id", "by:string:article (default) or story: the shares of each story's articles summed, one item per story"}, OK: 200, OKSchema: "Trending", Errs: []int{400, 429}}},
		{Method: "GET", Path: "/api/v1/articles/{id}/shares", Name: "article_shares", Handler: s.toOwner(s.keyPartition("id"), s.handleArticleShares), Doc: httpkit.Doc{Tag: "trending", Summary: "Share counts of one article per window (with trending.counter: cms, estimates and their error bounds per window in bounds)", OK: 200, OKSchema: "Object", Errs: []int{400, 429}}},
	}
}

// eventRoutes ingest share and read events.
func (s *Server) eventRoutes() []httpkit.Route {
	return []httpkit.Route{
		{Method: "POST", Path: "/api/v1/events/share", Name: "ingest_share", Handler: s.requireDisk(s.handleShare), Doc: httpkit.Doc{Tag: "events", Summary: "Ingest one share event (open to anonymous clients; with a session, only as its user)", Body: "Share", OK: 202, OKSchema: "Accepted", Errs: []int{400, 403, 409, 413, 422, 429, 503}}},
		{Method: "POST", Path: "/api/v1/events/share/batch", Name: "ingest_share_batch", Handler: s.requireDisk(s.handleShareBatch), Doc: httpkit.Doc{Tag: "events", Summary: "Ingest share events, one JSON object per line", Body: "ndjson", OK: 202, OKSchema: "Accepted", Batch: true, Errs: []int{400, 409, 413, 422, 429, 503}}},
		{Method: "POST", Path: "/api/v1/events/read", Name: "ingest_read", Handler: s.requireReader(s.requireDisk(s.handleRead)), Doc: httpkit.Doc{Tag: "events", Auth: "reader", Summary: "Ingest one read event", Body: "Read", OK: 202, OKSchema: "Accepted", Errs: []int{400, 401, 403, 409, 413, 422, 429, 503}}},
		{Method: "POST", Path: "/api/v1/events/read/batch", Name: "ingest_read_batch", Handler: s.requireReader(s.requireDisk(s.handleReadBatch)), Doc: httpkit.Doc{Tag: "events", Auth: "reader", Summary: "Ingest read events, one JSON object per line", Body: "ndjson", OK: 202, OKSchema: "Accepted", Batch: true, Errs: []int{400, 401, 409, 413, 422, 429, 503}}},
	}
}

// adminRoutes are the pipeline's administration (with the SLO report when
// the node keeps one).
func (s *Server) adminRoutes() []httpkit.Route {
	routes := []httpkit.Route{
		{Method: "GET", Path: "/api/v1/admin/progress", Name: "progress", Handler: s.handleProgress, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "Readiness and committed offsets and lag per stage and partition", OK: 200, OKSchema: "Object", Errs: []int{401, 403, 503}}},
		{Method: "GET", Path: "/api/v1/admin/topology", Name: "topology", Handler: s.handleTopology, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "Operators, stages and topics", OK: 200, OKSchema: "Object", Errs: []int{401, 403}}},
		{Method: "GET", Path: "/api/v1/admin/stages", Name: "stages_list", Handler: s.handleStages, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "Every stage with its tasks on this node (running, restoring, standby copies), whether it is paused here, and its lag", OK: 200, OKSchema: "Object", Errs: []int{401, 403}}},
		{Method: "POST", Path: "/api/v1/admin/stages/{stage}/pause", Name: "stages_pause", Handler: s.handlePauseStage(true), Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "Pause a stage on this node: its tasks commit what they applied and read nothing more until resumed; its lag grows", OK: 200, OKSchema: "Object", Errs: []int{401, 403, 404, 503}}},
		{Method: "POST", Path: "/api/v1/admin/stages/{stage}/resume", Name: "stages_resume", Handler: s.handlePauseStage(false), Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "Resume a stage paused on this node", OK: 200, OKSchema: "Object", Errs: []int{401, 403, 404, 503}}},
		{Method: "GET", Path: "/api/v1/admin/stats", Name: "stats", Handler: s.handleStats, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "Records per second and lag per stage, dead letters, bytes on disk per store", OK: 200, OKSchema: "Object", Errs: []int{401, 403}}},
	}
	if s.deps.SLO != nil {
		routes = append(routes, httpkit.Route{Method: "GET", Path: "/api/v1/admin/slo", Name: "slo", Handler: s.handleSLO, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "Service level objectives (ids as in the alerts and dashboards): per objective its target, and over 5m, 1h and the 30-day window good and total events, value and burn rate (window_s: the span covered, since_start when the node started later); over the window the error budget remaining (1 - bad fraction / (1 - target), negative when overspent) and status (ok, burning, breached, no_data); availability per endpoint group. In a cluster the counts of every node that answered are summed; nodes, failed_nodes and per_node say whose", OK: 200, OKSchema: "Object", Errs: []int{401, 403}}})
	}
	return routes
}

// articleRoutes ingest raw articles.
func (s *Server) articleRoutes() []httpkit.Route {
	return []httpkit.Route{
		{Method: "POST", Path: "/api/v1/articles", Name: "ingest_articles", Handler: s.requireIngest(s.requireDisk(s.handleArticles)), Doc: httpkit.Doc{Tag: "articles", Auth: "ingest", Summary: "Ingest raw articles (one object, or NDJSON with Content-Type application/x-ndjson or ?batch=1)", Query: []string{"batch:string:1 for NDJSON"}, Body: "RawArticle", OK: 202, OKSchema: "Accepted", Batch: true, Errs: []int{400, 401, 403, 409, 413, 429, 503}}},
	}
}

// storyRoutes read the story view: stories, breaking news, topics, the feed, the live stream and the images of articles.
func (s *Server) storyRoutes() []httpkit.Route {
	return []httpkit.Route{
		{Method: "GET", Path: "/api/v1/stories", Name: "stories", Handler: s.atStories(s.handleStories), Doc: httpkit.Doc{Tag: "stories", Summary: "Recent stories ranked by size, authority, freshness and velocity", Query: []string{"topic:string:only this topic", "since:string:latest article at or after (RFC 3339 or ms)", "limit:integer:1-100 (default 20)", "cursor:string:next_cursor of the previous page", "hide_read:string:1 to leave out stories the logged-in reader has read (each story carries unread for a logged-in reader; a page may come back short, with next_cursor)"}, OK: 200, OKSchema: "StoryPage", Errs: []int{400, 429, 503}}},
		{Method: "GET", Path: "/api/v1/stories/{id}", Name: "story", Handler: s.atStories(s.handleStory), Doc: httpkit.Doc{Tag: "stories", Summary: "One story with all its articles and sources (a merged story answers with the story it is part of); for a logged-in reader each article carries read and starred, and the story unread", OK: 200, OKSchema: "StoryDetail", Errs: []int{400, 404, 429, 503}}},
		{Method: "GET", Path: "/api/v1/breaking", Name: "breaking", Handler: s.atStories(s.handleBreaking), Doc: httpkit.Doc{Tag: "stories", Summary: "Stories breaking now", OK: 200, OKSchema: "StoryPage", Errs: []int{429}}},
		{Method: "GET", Path: "/api/v1/topics", Name: "topics", Handler: s.atStories(s.handleTopics), Doc: httpkit.Doc{Tag: "stories", Summary: "Topics of recent stories with story and article counts", OK: 200, OKSchema: "Object", Errs: []int{429}}},
		{Method: "GET", Path: "/api/v1/feed", Name: "feed", Handler: s.atStories(s.handleFeed), Doc: httpkit.Doc{Tag: "feed", Summary: "The reader's feed (personal with a session, else the non-personal ranking). interest says whether the reader's interest profile ranked it: applied, none (no reads yet) or unavailable (its owner did not answer: ranked with the preferences alone, partial: true, with interest_error, missing_partitions and failed_nodes)", Query: []string{"limit:integer:1-100 (default 20)", "cursor:string:next_cursor of the previous page", "explain:string:1 to include each story's signals", "hide_read:string:1 to leave out stories the logged-in reader has read (each story carries unread, its unread article count, for a logged-in reader)"}, OK: 200, OKSchema: "FeedPage", Errs: []int{400, 429, 503}}},
		{Method: "GET", Path: "/api/v1/stream", Name: "stream", Handler: s.handleStream, Doc: httpkit.Doc{Tag: "stories", Summary: "Server-sent events (text/event-stream): event trending (the answer of /api/v1/trending?by=story&window=1h&k=10 whenever it changes), event breaking ({\"stories\": [...], \"as_of\"}: stories that became breaking, as /api/v1/breaking lists them, once per episode), a \": ping\" comment every 15 s. It starts with retry and the current state; with a Last-Event-ID of the same server process, only what came after it. 503 when too many streams are open", Query: []string{"last_event_id:string:the id of the last event received, for clients that cannot send the Last-Event-ID header"}, OK: 200, Errs: []int{429, 503}}},
		{Method: "GET", Path: story.ImagePathPrefix + "{id}", Name: "image", Handler: s.handleImage, Doc: httpkit.Doc{Tag: "stories", Summary: "A lead image of the node's articles through its caching proxy (the image field of stories and articles holds this path; the id is the first 16 bytes of the SHA-256 of the image URL in hex). Only images of articles the node applied are served: JPEG, PNG, GIF, WebP, AVIF or BMP up to the size limit, never SVG, with ETag (304 on If-None-Match) and Cache-Control", OK: 200, Errs: []int{400, 403, 404, 429, 502, 503, 504}}},
	}
}

// searchRoutes search the articles.
func (s *Server) searchRoutes() []httpkit.Route {
	return []httpkit.Route{
		{Method: "GET", Path: "/api/v1/search", Name: "search", Handler: s.handleSearch, Doc: httpkit.Doc{Tag: "search", Summary: "Full-text search over all partitions (title boosted), with filters and highlights. In a cluster the receiving node asks every node and merges; partitions no node answered for are in missing_partitions (partial: true), nodes that did not answer in failed_nodes. next_cursor is a position in the order, valid on any node", Query: []string{"q:string:text (empty: newest first)", "topic:string:only this topic", "source:string:only this source id; repeated, any of them (at most 5,000)", "from:string:published at or after (RFC 3339 or ms)", "to:string:published before", "limit:integer:1-100 (default 20)", "cursor:string:next_cursor of the previous page", "group:string:story for one result per story, its other hits in also"}, OK: 200, OKSchema: "SearchPage", Errs: []int{400, 429, 503}}},
	}
}

// interestAdminRoutes show an admin any reader's interest profile, at its owner.
func (s *Server) interestAdminRoutes() []httpkit.Route {
	return []httpkit.Route{
		{Method: "GET", Path: "/api/v1/admin/users/{id}/interest", Name: "user_interest", Handler: s.toOwner(s.keyPartition("id"), s.handleUserInterest), Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "A user's interest vector and reading history", Query: []string{"at:string:decay the vector to this event time (RFC 3339 or ms; default now)"}, OK: 200, OKSchema: "Profile", Errs: []int{400, 401, 403, 503}}},
	}
}

// accountRoutes are accounts, sessions, preferences and API keys.
func (s *Server) accountRoutes() []httpkit.Route {
	return []httpkit.Route{
		{Method: "POST", Path: "/api/v1/auth/register", Name: "register", Handler: s.handleRegister, Doc: httpkit.Doc{Tag: "account", Summary: "Create an account and log in (a JSON body only; refused from another site's page)", Body: "Credentials", OK: 201, OKSchema: "Session", Errs: []int{400, 403, 409, 413, 415, 429, 503}}},
		{Method: "POST", Path: "/api/v1/auth/login", Name: "login", Handler: s.handleLogin, Doc: httpkit.Doc{Tag: "account", Summary: "Log in (sets the nf_session cookie; a JSON body only; refused from another site's page; limited per client address and per username from that address)", Body: "Credentials", OK: 200, OKSchema: "Session", Errs: []int{400, 401, 403, 413, 415, 429}}},
		{Method: "POST", Path: "/api/v1/auth/logout", Name: "logout", Handler: s.handleLogout, Doc: httpkit.Doc{Tag: "account", Summary: "Revoke the request's session; with ?everywhere=true log its account out everywhere: every session ends and every API key is revoked (401 without a session)", Query: []string{"everywhere:string:true to end every session and revoke every API key of the account"}, OK: 204, Errs: []int{400, 401, 503}}},
		{Method: "POST", Path: "/api/v1/setup/admin", Name: "setup_admin", Handler: s.handleSetupAdmin, Doc: httpkit.Doc{Tag: "account", Summary: "Create the first admin account with the one-time setup token the node printed at start, and log in. The token dies with it, and when any admin exists; limited like login", Body: "SetupAdmin", OK: 201, OKSchema: "Session", Errs: []int{400, 403, 409, 429, 503}}},
		{Method: "POST", Path: "/api/v1/admin/users", Name: "users_add", Handler: s.handleAddUser, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "Create an account with a role (user or admin; newsflow user add against a running node)", Body: "NewUser", OK: 201, OKSchema: "User", Errs: []int{400, 401, 403, 409, 503}}},
		{Method: "GET", Path: "/api/v1/admin/users", Name: "users_list", Handler: s.handleListUsers, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "Every account, by username", OK: 200, OKSchema: "Users", Errs: []int{401, 403}}},
		{Method: "DELETE", Path: "/api/v1/admin/users/{id}", Name: "users_delete", Handler: s.handleDeleteUser, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "Delete an account with its sessions, API keys, webhooks (their queued deliveries dropped), preferences and read state (not the last admin: 409)", OK: 204, Errs: []int{401, 403, 404, 409, 503}}},
		{Method: "DELETE", Path: "/api/v1/admin/users/{id}/sessions", Name: "users_revoke", Handler: s.handleRevokeSessions, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "Log an account out everywhere: end every session and revoke every API key", OK: 204, Errs: []int{401, 403, 404, 503}}},
		{Method: "GET", Path: "/api/v1/me", Name: "me", Handler: s.requireUser(s.handleMe), Doc: httpkit.Doc{Tag: "account", Auth: "user", Summary: "The logged-in user", OK: 200, OKSchema: "User", Errs: []int{401, 429}}},
		{Method: "GET", Path: "/api/v1/preferences", Name: "preferences_get", Handler: s.requireUser(s.handleGetPreferences), Doc: httpkit.Doc{Tag: "account", Auth: "user", Summary: "The user's preferences", OK: 200, OKSchema: "Preferences", Errs: []int{401, 429}}},
		{Method: "PUT", Path: "/api/v1/preferences", Name: "preferences_put", Handler: s.requireUser(s.handlePutPreferences), Doc: httpkit.Doc{Tag: "account", Auth: "user", Summary: "Replace the user's preferences", Body: "Preferences", OK: 200, OKSchema: "Preferences", Errs: []int{400, 401, 429, 503}}},
		{Method: "GET", Path: "/api/v1/me/api-keys", Name: "api_keys", Handler: s.requireUser(s.handleAPIKeys), Doc: httpkit.Doc{Tag: "account", Auth: "user", Summary: "The reader's API keys, the passwords of the client APIs (id, name, created_at, last_used_at; never the secret)", OK: 200, OKSchema: "Object", Errs: []int{401, 429}}},
		{Method: "POST", Path: "/api/v1/me/api-keys", Name: "api_keys_create", Handler: s.requireUser(s.handleNewAPIKey), Doc: httpkit.Doc{Tag: "account", Auth: "user", Summary: "Create an API key ({\"name\": ...}, 1 to 64 bytes); the answer is the only time its secret is shown. At most 20 per reader (409)", Body: "Object", OK: 201, OKSchema: "Object", Errs: []int{400, 401, 409, 429, 503}}},
		{Method: "DELETE", Path: "/api/v1/me/api-keys/{id}", Name: "api_keys_revoke", Handler: s.requireUser(s.handleRevokeAPIKey), Doc: httpkit.Doc{Tag: "account", Auth: "user", Summary: "Revoke an API key: apps using it are logged out", OK: 204, Errs: []int{401, 404, 429, 503}}},
	}
}

// webhookRoutes are the readers' breaking-news webhooks, and their administration.
func (s *Server) webhookRoutes() []httpkit.Route {
	return []httpkit.Route{
		{Method: "GET", Path: "/api/v1/me/webhooks", Name: "webhooks", Handler: s.requireUser(s.handleMyWebhooks), Doc: httpkit.Doc{Tag: "webhooks", Auth: "user", Summary: "The reader's breaking-news webhooks, each with its secret and delivery status (delivered, retried, dead_lettered, last_attempt_at, last_status, last_error)", OK: 200, OKSchema: "Object", Errs: []int{401, 429}}},
		{Method: "POST", Path: "/api/v1/me/webhooks", Name: "webhooks_add", Handler: s.requireUser(s.handleAddWebhook), Doc: httpkit.Doc{Tag: "webhooks", Auth: "user", Summary: "Register a webhook ({\"url\": http(s), \"topics\": [...], \"sources\": [...]}): when a story that passes the filter becomes breaking, a signed JSON POST (X-Newsflow-Signature: sha256=HMAC-SHA256(secret, timestamp + \".\" + body)); the answer holds the secret. At most 10 per reader (409). A URL on an address the SSRF guard refuses (loopback, private, link-local, metadata, in any numeric form; crawl.allow_cidrs and crawl.allow_private allow some) is refused: 400 with reason blocked_address", Body: "Object", OK: 201, OKSchema: "Object", Errs: []int{400, 401, 409, 429, 503}}},
		{Method: "DELETE", Path: "/api/v1/me/webhooks/{id}", Name: "webhooks_delete", Handler: s.requireUser(s.handleDeleteMyWebhook), Doc: httpkit.Doc{Tag: "webhooks", Auth: "user", Summary: "Delete one of the reader's webhooks", OK: 204, Errs: []int{401, 404, 429, 503}}},
		{Method: "GET", Path: "/api/v1/admin/webhooks", Name: "admin_webhooks", Handler: s.handleAdminWebhooks, Doc: httpkit.Doc{Tag: "webhooks", Auth: "admin", Summary: "Every webhook with its owner and delivery status (no secrets)", OK: 200, OKSchema: "Object", Errs: []int{401, 403}}},
		{Method: "DELETE", Path: "/api/v1/admin/webhooks/{id}", Name: "admin_webhooks_delete", Handler: s.handleAdminDeleteWebhook, Doc: httpkit.Doc{Tag: "webhooks", Auth: "admin", Summary: "Delete any webhook", OK: 204, Errs: []int{401, 403, 404, 503}}},
	}
}

// readingRoutes are what a logged-in reader read: history, and with the
// story view read state and stars; with interest profiles the reader's
// own.
func (s *Server) readingRoutes() []httpkit.Route {
	history := s.requireUser(s.handleHistory)
	if s.deps.Stories != nil {
		// Titles come from the story view; the reads from the user's
		// partition (userProfile).
		history = s.atStories(history)
	}
	routes := []httpkit.Route{
		{Method: "GET", Path: "/api/v1/history", Name: "history", Handler: history, Doc: httpkit.Doc{Tag: "account", Auth: "user", Summary: "The user's latest reads, newest first, with each article's title and story", OK: 200, OKSchema: "Object", Errs: []int{401, 429, 503}}},
	}
	if s.deps.Stories != nil {
		// Read state needs the story view: at the story owner.
		me := func(h func(*fasthttp.RequestCtx, auth.User)) fasthttp.RequestHandler {
			return s.atStories(s.requireUser(h))
		}
		routes = append(routes, []httpkit.Route{
			{Method: "GET", Path: "/api/v1/me/unread", Name: "unread", Handler: me(s.handleUnread), Doc: httpkit.Doc{Tag: "reading", Auth: "user", Summary: "Unread counts over the stories of the story view: in total, per topic (stories with an unread article, unread articles) and per source (unread articles); as_of is the latest event time", OK: 200, OKSchema: "Object", Errs: []int{401, 429, 503}}},
			{Method: "POST", Path: "/api/v1/me/read", Name: "mark_read", Handler: me(s.handleMark), Doc: httpkit.Doc{Tag: "reading", Auth: "user", Summary: "Mark articles and whole stories read ({\"articles\": [...], \"stories\": [...]}) or unread (\"read\": false). A story marked read is read up to its latest article: an article that joins it later is unread. Unknown ids are listed in unknown (404 when none is known)", Body: "Object", OK: 200, OKSchema: "Object", Errs: []int{400, 401, 404, 413, 429, 503}}},
			{Method: "POST", Path: "/api/v1/me/read/all", Name: "mark_all_read", Handler: me(s.handleMarkAll), Doc: httpkit.Doc{Tag: "reading", Auth: "user", Summary: "Mark everything read, or everything of one topic or source ({\"topic\": ...} or {\"source\": ...}), published up to before (ms; default: as_of of /api/v1/me/unread)", Body: "Object", OK: 200, OKSchema: "Object", Errs: []int{400, 401, 429, 503}}},
			{Method: "GET", Path: "/api/v1/me/starred", Name: "starred", Handler: me(s.handleStarred), Doc: httpkit.Doc{Tag: "reading", Auth: "user", Summary: "Starred articles, the most recently starred first, each with the story it is in now", OK: 200, OKSchema: "Object", Errs: []int{401, 429}}},
			{Method: "PUT", Path: "/api/v1/me/starred/{id}", Name: "star", Handler: me(s.handleStar), Doc: httpkit.Doc{Tag: "reading", Auth: "user", Summary: "Star an article (it must be in the story view)", OK: 200, OKSchema: "Object", Errs: []int{400, 401, 404, 429, 503}}},
			{Method: "DELETE", Path: "/api/v1/me/starred/{id}", Name: "unstar", Handler: me(s.handleStar), Doc: httpkit.Doc{Tag: "reading", Auth: "user", Summary: "Unstar an article", OK: 204, Errs: []int{400, 401, 429, 503}}},
		}...)
	}
	if s.deps.Interest != nil {
		routes = append(routes, httpkit.Route{Method: "GET", Path: "/api/v1/me/interest", Name: "my_interest", Handler: s.toOwner(s.userPartition, s.requireUser(s.handleMyInterest)), Doc: httpkit.Doc{Tag: "account", Auth: "user", Summary: "The user's interest vector and reading history, from the owner of the user's partition (the feed reads the profile through it)", Query: []string{"at:string:decay the vector to this event time (RFC 3339 or ms; default now)"}, OK: 200, OKSchema: "Profile", Errs: []int{400, 401, 429, 503}}})
	}
	return routes
}

// readerAPI is the APIs reader apps speak (Miniflux, Google Reader), with
// API keys; their entries need the story view and search.
func (s *Server) readerAPI() *readerapi.API {
	d := s.deps
	rd := readerapi.Deps{Auth: d.Auth, Reads: s.reads, Sources: d.Sources}
	if d.Stories != nil && d.Search != nil {
		rd.Stories = d.Stories
		rd.Search = func(ctx context.Context, r searchindex.Request) ([]searchindex.Hit, *searchindex.Cursor, error) {
			page, err := s.searchCluster(ctx, r)
			return page.Hits, page.Next, err
		}
	}
	rd.AddSource, rd.Timeout = s.readerAddSource, s.opts.MetaTimeout
	return readerapi.New(rd)
}

// sourceRoutes list the sources, and administer them.
func (s *Server) sourceRoutes() []httpkit.Route {
	return []httpkit.Route{
		{Method: "GET", Path: "/api/v1/sources", Name: "sources_public", Handler: s.handlePublicSources, Doc: httpkit.Doc{Tag: "stories", Summary: "Sources (id, name, site, category), for choosing preferred and excluded sources", OK: 200, OKSchema: "Object", Errs: []int{429}}},
		{Method: "GET", Path: "/api/v1/admin/sources", Name: "sources_list", Handler: s.handleListSources, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "All sources", OK: 200, OKSchema: "Object", Errs: []int{401, 403}}},
		{Method: "POST", Path: "/api/v1/admin/sources", Name: "sources_add", Handler: s.handleAddSource, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "Add a source (a page URL is resolved to its feed unless ?discover=false); either way a URL on an address the crawler's SSRF guard refuses is refused: 400 with reason blocked_address", Query: []string{"discover:string:false to keep the URL as given, unfetched"}, Body: "Source", OK: 201, OKSchema: "Source", Errs: []int{400, 401, 403, 409, 503}}},
		{Method: "POST", Path: "/api/v1/admin/sources/import", Name: "sources_import", Handler: s.handleImportSources, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "Import sources from OPML; feeds that are invalid or on addresses the crawler's SSRF guard refuses are reported in errors (400)", Body: "opml", OK: 200, OKSchema: "Object", Errs: []int{400, 401, 403, 503}}},
		{Method: "GET", Path: "/api/v1/admin/sources/export", Name: "sources_export", Handler: s.handleExportSources, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "Export sources as OPML", OK: 200, Errs: []int{401, 403}}},
		{Method: "GET", Path: "/api/v1/admin/sources/{id}", Name: "sources_get", Handler: s.handleGetSource, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "One source", OK: 200, OKSchema: "Source", Errs: []int{401, 403, 404}}},
		{Method: "PATCH", Path: "/api/v1/admin/sources/{id}", Name: "sources_patch", Handler: s.handlePatchSource, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "Change a source (name, category, authority, paused, ...)", Body: "Source", OK: 200, OKSchema: "Source", Errs: []int{400, 401, 403, 404, 503}}},
		{Method: "DELETE", Path: "/api/v1/admin/sources/{id}", Name: "sources_delete", Handler: s.handleDeleteSource, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "Delete a source", OK: 204, Errs: []int{401, 403, 404, 503}}},
		{Method: "GET", Path: "/api/v1/admin/sources/{id}/status", Name: "sources_status", Handler: s.handleSourceStatus, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "Crawl status: last and next crawl, errors, circuit (times in ms since the epoch)", OK: 200, OKSchema: "Object", Errs: []int{401, 403, 404}}},
		{Method: "POST", Path: "/api/v1/admin/sources/{id}/crawl", Name: "sources_crawl", Handler: s.handleCrawlSource, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "Crawl now (at most once a minute per source)", OK: 200, OKSchema: "Object", Errs: []int{401, 403, 404, 429}}},
	}
}

// clusterRoutes show and change this node's part in the cluster.
func (s *Server) clusterRoutes() []httpkit.Route {
	return []httpkit.Route{
		{Method: "GET", Path: "/api/v1/admin/cluster", Name: "cluster", Handler: s.handleCluster, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "Cluster: this node, the leader, members (up, partitions owned), each partition's owner, epoch, lag and state size (from its owner), and nodes that did not answer", OK: 200, OKSchema: "Object", Errs: []int{401, 403}}},
		{Method: "GET", Path: "/api/v1/admin/cluster/local", Name: "cluster_local", Handler: s.handleClusterLocal, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "The partitions this node runs, with lag and state size", OK: 200, OKSchema: "Object", Errs: []int{401, 403}}},
		{Method: "POST", Path: "/api/v1/admin/cluster/leave", Name: "cluster_leave", Handler: s.handleLeave, Doc: httpkit.Doc{Tag: "admin", Auth: "admin", Summary: "The node gives up its partitions, leaves the cluster and stops (newsflow leave)", OK: 200, OKSchema: "Object", Errs: []int{401, 403, 503}}},
	}
}
