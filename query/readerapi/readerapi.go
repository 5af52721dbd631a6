package readerapi

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"github.com/newsflow/newsflow/query/httpkit"
	"time"

	"github.com/newsflow/newsflow/cluster"
	"github.com/newsflow/newsflow/crawl"
	"github.com/newsflow/newsflow/operators/readstate"
	"github.com/newsflow/newsflow/query/auth"
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
	// Timeout bounds each handler's calls to the metadata store (API keys,
	// read state, subscriptions; default 4s): without a cluster leader a
	// change answers 503 with Retry-After instead of waiting for one.
	Timeout time.Duration
}

// Errors of AddSource.
var (
	ErrMayNotAddSources = errors.New("readers may not add sources on this server: ask an admin to add it")
	ErrSourceRefused    = errors.New("the feed URL cannot be added")
)

// API serves the reader APIs. Safe for concurrent use.
type API struct {
	deps Deps
}

// New returns the APIs over deps.
func New(deps Deps) *API {
	if deps.Timeout <= 0 {
		deps.Timeout = defaultTimeout
	}
	return &API{deps: deps}
}

// defaultTimeout is Deps.Timeout's default.
const defaultTimeout = 4 * time.Second

// bounded is the context of a handler's calls to the metadata store: not
// the request's, so a change once sent is not abandoned halfway, and
// bounded by Deps.Timeout.
func (a *API) bounded() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), a.deps.Timeout)
}

// unavailable reports whether err says the metadata store could not answer
// in time: the cluster has no leader to take a change, or it did not
// answer within Deps.Timeout.
func unavailable(err error) bool {
	return errors.Is(err, cluster.ErrNoLeader) || errors.Is(err, context.DeadlineExceeded)
}

// retryAfter is the Retry-After of a 503 for want of a leader: about an
// election.
const retryAfter = "5"

// mfServerError answers a Miniflux API request whose store call failed:
// 503 with Retry-After when the store is unavailable, else 500.
func mfServerError(ctx *fasthttp.RequestCtx, err error) {
	if unavailable(err) {
		ctx.Response.Header.Set("Retry-After", retryAfter)
		mfError(ctx, fasthttp.StatusServiceUnavailable, "the cluster has no leader right now, or did not answer in time; try again")
		return
	}
	mfError(ctx, fasthttp.StatusInternalServerError, err.Error())
}

// grServerError is mfServerError for the Google Reader API (plain text).
func grServerError(ctx *fasthttp.RequestCtx, err error) {
	if unavailable(err) {
		ctx.Response.Header.Set("Retry-After", retryAfter)
		ctx.Error("the cluster has no leader right now, or did not answer in time; try again", fasthttp.StatusServiceUnavailable)
		return
	}
	ctx.Error(err.Error(), fasthttp.StatusInternalServerError)
}

// Routes are the APIs' routes, for the node's route table.
func (a *API) Routes() []httpkit.Route {
	routes := a.minifluxRoutes()
	if a.deps.Stories != nil && a.deps.Search != nil {
		routes = append(routes, a.greaderRoutes()...)
	}
	return routes
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
