package readerapi

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"

	"github.com/fasthttp/router"
	"github.com/newsflow/newsflow/crawl"
	"github.com/newsflow/newsflow/internal/auth"
	"github.com/newsflow/newsflow/internal/readstate"
	"github.com/valyala/fasthttp"
)

// Sources is what the APIs read of the sources.
type Sources interface {
	Get(ctx context.Context, id string) (crawl.Source, error)
	List(ctx context.Context) ([]crawl.Source, error)
}

// Deps are the parts of a node the APIs use.
type Deps struct {
	Auth    *auth.Store
	Reads   *readstate.Store
	Sources Sources
	// Stories and Search give the entries (entries.go); without them the
	// entry endpoints are not served.
	Stories Stories
	Search  SearchFunc
	// AddSource adds the source of a feed URL for a reader who subscribes
	// to one no source has, as the node's policy allows (nil: never); it
	// returns the source added, or the one that has the URL the page led
	// to, or an error wrapping ErrMayNotAddSources or ErrSourceRefused.
	AddSource func(ctx context.Context, u auth.User, feedURL string) (crawl.Source, error)
}

// Errors of AddSource.
var (
	ErrMayNotAddSources = errors.New("readers may not add sources on this server: ask an admin to add it")
	ErrSourceRefused    = errors.New("the feed URL cannot be added")
)

// API serves the reader APIs. Safe for concurrent use.
type API struct {
	deps Deps
	// instrument wraps each handler with the server's metrics, under a
	// route name.
	instrument func(name string, h fasthttp.RequestHandler) fasthttp.RequestHandler
}

// New returns the APIs over deps; instrument (nil: none) wraps each
// handler.
func New(deps Deps, instrument func(string, fasthttp.RequestHandler) fasthttp.RequestHandler) *API {
	if instrument == nil {
		instrument = func(_ string, h fasthttp.RequestHandler) fasthttp.RequestHandler { return h }
	}
	return &API{deps: deps, instrument: instrument}
}

// Register adds the APIs' routes to r.
func (a *API) Register(r *router.Router) {
	a.registerMiniflux(r)
	if a.deps.Stories != nil && a.deps.Search != nil {
		a.registerGReader(r)
	}
}

// userNum is a user's integer id: 52 bits of the SHA-256 of their id, an
// integer every JSON client reads exactly.
func userNum(id string) int64 {
	h := sha256.Sum256([]byte(id))
	return int64(binary.BigEndian.Uint64(h[:8]) >> 12)
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = fasthttp.StatusInternalServerError, []byte(`{"error_message":"encode response"}`)
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json; charset=utf-8")
	ctx.SetBody(b)
}
