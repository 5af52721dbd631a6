package httpkit

import (
	"encoding/json"
	"strings"

	"github.com/newsflow/newsflow/internal/redact"
	"github.com/valyala/fasthttp"
)

// ErrorBody is every JSON error answer of the node's own API.
type ErrorBody struct {
	Error string `json:"error"`
}

// WriteJSON answers v as JSON with status (500 if v cannot be encoded).
func WriteJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = fasthttp.StatusInternalServerError, []byte(`{"error":"encode response"}`)
	}
	WriteRaw(ctx, status, b)
}

// WriteRaw answers body, already JSON, with status.
func WriteRaw(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// WriteError answers {"error": msg} with status, the node's internal
// addresses masked in msg.
func WriteError(ctx *fasthttp.RequestCtx, status int, msg string) {
	WriteJSON(ctx, status, ErrorBody{Error: redact.InternalAddrs(msg)})
}

// ETagMatches reports whether an If-None-Match list names etag (weak
// comparison) or is "*".
func ETagMatches(list, etag string) bool {
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}
