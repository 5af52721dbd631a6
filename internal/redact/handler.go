package redact

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
)

// Handler is a slog.Handler that masks credentials in every record before
// the handler it wraps sees it: the message and string values as Text
// masks them, URLs (*url.URL, and strings) as URL does, errors and
// fmt.Stringers by their text, http.Header values of secret headers, and
// the whole value of an attribute whose key says it is a secret (token,
// password, secret, authorization, ...). It is safe for concurrent use as
// the wrapped handler is.
type Handler struct{ h slog.Handler }

// NewHandler returns h behind the masking.
func NewHandler(h slog.Handler) *Handler { return &Handler{h: h} }

// Enabled implements slog.Handler.
func (r *Handler) Enabled(ctx context.Context, l slog.Level) bool { return r.h.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (r *Handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, Text(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(Attr(a))
		return true
	})
	return r.h.Handle(ctx, out)
}

// WithAttrs implements slog.Handler.
func (r *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(as))
	for i, a := range as {
		masked[i] = Attr(a)
	}
	return &Handler{h: r.h.WithAttrs(masked)}
}

// WithGroup implements slog.Handler.
func (r *Handler) WithGroup(name string) slog.Handler { return &Handler{h: r.h.WithGroup(name)} }

// Attr returns a with its credentials masked, as Handler masks them.
func Attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	if SecretName(a.Key) && v.Kind() != slog.KindGroup {
		if v.Kind() == slog.KindString && v.String() == "" {
			return a
		}
		return slog.String(a.Key, Mask)
	}
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, Text(v.String()))
	case slog.KindGroup:
		as := v.Group()
		masked := make([]any, len(as))
		for i, g := range as {
			masked[i] = Attr(g)
		}
		return slog.Group(a.Key, masked...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case *url.URL:
			if x != nil {
				return slog.String(a.Key, URL(x.String()))
			}
		case http.Header:
			return slog.Any(a.Key, header(x))
		case error:
			return slog.String(a.Key, Text(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, Text(x.String()))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// header returns a copy of h with the values of secret headers masked.
func header(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		if SecretName(k) {
			out[k] = []string{Mask}
			continue
		}
		masked := make([]string, len(vs))
		for i, v := range vs {
			masked[i] = Text(v)
		}
		out[k] = masked
	}
	return out
}
