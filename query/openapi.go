package query

import (
	"encoding/json"
	"github.com/newsflow/newsflow/query/httpkit"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
)

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

// openAPIDocument builds the OpenAPI 3.1 description of the routes.
func openAPIDocument(routes []httpkit.Route) []byte {
	paths := map[string]map[string]any{}
	for _, rt := range routes {
		op := rt.Doc
		o := map[string]any{"summary": op.Summary, "tags": []string{op.Tag}, "operationId": strings.ToLower(rt.Method) + strings.NewReplacer("/", "_", "{", "", "}", "", ".", "_", "-", "_").Replace(rt.Path)}
		var params []any
		if strings.Contains(rt.Path, "{id}") {
			params = append(params, map[string]any{"name": "id", "in": "path", "required": true, "schema": map[string]string{"type": "string"}})
		}
		for _, q := range op.Query {
			parts := strings.SplitN(q, ":", 3)
			params = append(params, map[string]any{"name": parts[0], "in": "query", "schema": map[string]string{"type": parts[1]}, "description": parts[2]})
		}
		if rt.Method == "POST" && strings.HasPrefix(rt.Path, "/api/v1/events") || rt.Path == "/api/v1/articles" {
			params = append(params, map[string]any{"name": HeaderIdempotencyKey, "in": "header", "schema": map[string]string{"type": "string"},
				"description": "makes a retry safe: a repeat of the same request (path and body) by the same caller (session user, token, or client address) gets the first response and appends nothing; the key with another body gets 422"})
		}
		if len(params) > 0 {
			o["parameters"] = params
		}
		switch op.Body {
		case "":
		case "ndjson":
			o["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/x-ndjson": map[string]any{"schema": map[string]string{"type": "string"}}}}
		case "opml":
			o["requestBody"] = map[string]any{"required": true, "content": map[string]any{"text/x-opml": map[string]any{"schema": map[string]string{"type": "string"}}}}
		default:
			o["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": typeOf(op.Body)}}}
		}
		resp := map[string]any{}
		ok := map[string]any{"description": "Success"}
		if op.OKSchema != "" {
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": typeOf(op.OKSchema)}}
		}
		resp[strconv.Itoa(op.OK)] = ok
		for _, e := range op.Errs {
			resp[strconv.Itoa(e)] = map[string]any{"description": statusText[e], "content": map[string]any{"application/json": map[string]any{"schema": typeOf("Error")}}}
		}
		if op.Batch {
			accepted := map[string]any{"application/json": map[string]any{"schema": typeOf("Accepted")}}
			resp["207"] = map[string]any{"description": "Some lines accepted (they are appended, once), the others rejected: accepted and rejected count them, " +
				"errors lists every rejected line with its number and reason (the first 100,000; errors_truncated says there were more)", "content": accepted}
			resp["400"] = map[string]any{"description": "No line accepted: the lines' errors as for 207 (or an error for an empty batch or a bad single object)",
				"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"oneOf": []any{typeOf("Accepted"), typeOf("Error")}}}}}
		}
		o["responses"] = resp
		switch op.Auth {
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
		if paths[rt.Path] == nil {
			paths[rt.Path] = map[string]any{}
		}
		paths[rt.Path][strings.ToLower(rt.Method)] = o
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
