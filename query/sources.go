package query

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/newsflow/newsflow/cluster"
	"github.com/newsflow/newsflow/crawl"
	"github.com/newsflow/newsflow/internal/fetch"
	"github.com/newsflow/newsflow/internal/opml"
	"github.com/newsflow/newsflow/internal/redact"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/newsflow/newsflow/query/readerapi"
	"github.com/valyala/fasthttp"
	"golang.org/x/sync/errgroup"
)

// sourceInput is the writable part of a source, as POST and PATCH take it.
// PATCH changes only the fields present.
type sourceInput struct {
	FeedURL     *string         `json:"feed_url"`
	Name        *string         `json:"name"`
	Homepage    *string         `json:"homepage"`
	Category    *string         `json:"category"`
	Authority   *float64        `json:"authority"`
	MinInterval *crawl.Duration `json:"min_interval"`
	MaxInterval *crawl.Duration `json:"max_interval"`
	Status      *string         `json:"status"`
	FullText    *string         `json:"full_text"`
}

func (in *sourceInput) apply(s *crawl.Source, creating bool) error {
	if in.FeedURL != nil {
		if !creating && *in.FeedURL != s.FeedURL {
			return errors.New("feed_url cannot be changed; add a new source")
		}
		s.FeedURL = *in.FeedURL
	}
	setIfGiven(&s.Name, in.Name)
	setIfGiven(&s.Homepage, in.Homepage)
	setIfGiven(&s.Category, in.Category)
	setIfGiven(&s.Authority, in.Authority)
	setIfGiven(&s.MinInterval, in.MinInterval)
	setIfGiven(&s.MaxInterval, in.MaxInterval)
	setIfGiven(&s.FullText, in.FullText)
	if in.Status != nil {
		switch *in.Status {
		case crawl.StatusActive, crawl.StatusPaused:
			if *in.Status == crawl.StatusActive && s.Status != crawl.StatusActive {
				s.StatusReason = ""
				s.Crawl.NextCrawl = time.Time{} // due now
			}
			s.Status = *in.Status
		default:
			return fmt.Errorf("status %q: set active or paused", *in.Status)
		}
	}
	return nil
}

// setIfGiven sets *dst to *v when the field v was given.
func setIfGiven[T any](dst, v *T) {
	if v != nil {
		*dst = *v
	}
}

func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid JSON body: %w", err)
	}
	if dec.More() {
		return errors.New("invalid JSON body: trailing data")
	}
	return nil
}

func (s *Server) sourceError(ctx *fasthttp.RequestCtx, err error) {
	switch {
	case metaUnavailable(ctx, err):
	case errors.Is(err, crawl.ErrSourceNotFound):
		writeError(ctx, fasthttp.StatusNotFound, err.Error())
	case errors.Is(err, crawl.ErrSourceExists):
		writeError(ctx, fasthttp.StatusConflict, err.Error())
	default:
		writeError(ctx, fasthttp.StatusBadRequest, err.Error())
	}
}

func (s *Server) handleListSources(ctx *fasthttp.RequestCtx) {
	mctx, cancel := s.metaCtx()
	defer cancel()
	list, err := s.deps.Sources.List(mctx)
	if err != nil {
		metaError(ctx, "list sources", err)
		return
	}
	if list == nil {
		list = []crawl.Source{}
	}
	for i := range list {
		list[i] = publicSource(list[i])
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"sources": list})
}

// publicSource is a source as admins read it: its crawl errors without
// the node's own addresses (its DNS resolver, its end of a connection),
// also those stored by versions that kept them.
func publicSource(src crawl.Source) crawl.Source {
	src.Crawl.LastError = redact.InternalAddrs(src.Crawl.LastError)
	if r := src.Crawl.LastResult; r != nil {
		rec := publicRecord(*r)
		src.Crawl.LastResult = &rec
	}
	return src
}

// publicRecord is a crawl record without the node's own addresses.
func publicRecord(rec crawl.CrawlRecord) crawl.CrawlRecord {
	rec.Error = redact.InternalAddrs(rec.Error)
	return rec
}

// handlePublicSources answers GET /api/v1/sources: the id, name, site and
// category of every source, for readers choosing preferred and excluded
// sources (the crawl state stays admin-only).
func (s *Server) handlePublicSources(ctx *fasthttp.RequestCtx) {
	mctx, cancel := s.metaCtx()
	defer cancel()
	list, err := s.deps.Sources.List(mctx)
	if err != nil {
		metaError(ctx, "list sources", err)
		return
	}
	type public struct {
		ID       string `json:"id"`
		Name     string `json:"name"`
		Homepage string `json:"homepage,omitempty"`
		Category string `json:"category,omitempty"`
	}
	out := make([]public, 0, len(list))
	for _, src := range list {
		out = append(out, public{src.ID, src.Name, src.Homepage, src.Category})
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"sources": out})
}

func (s *Server) handleAddSource(ctx *fasthttp.RequestCtx) {
	var in sourceInput
	if !decodeJSON(ctx, &in) {
		return
	}
	if in.FeedURL == nil {
		writeError(ctx, fasthttp.StatusBadRequest, "feed_url is required")
		return
	}
	var src crawl.Source
	if err := in.apply(&src, true); err != nil {
		writeError(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	added, warning, refused, err := s.addSource(ctx, src, string(ctx.QueryArgs().Peek("discover")) != "false")
	switch {
	case refused != nil:
		writeJSON(ctx, fasthttp.StatusBadRequest, refused)
		return
	case err != nil:
		s.sourceError(ctx, err)
		return
	}
	s.kickCrawler()
	ctx.Response.Header.Set("Location", "/api/v1/admin/sources/"+added.ID)
	writeJSON(ctx, fasthttp.StatusCreated, addedSource{added, warning})
}

// addSource adds a source. A URL the crawler's SSRF guard refuses (with
// the node's crawl.allow_private and allow_cidrs) is refused (refused says
// why), with discovery or without. With discover, its URL may be a web
// page whose feed it finds; a page that is no feed and names none is
// refused too. One that cannot be fetched now is kept as given, with a
// warning; the crawler retries and records its errors. Unless given, the
// name is the feed's title.
func (s *Server) addSource(ctx context.Context, src crawl.Source, discover bool) (added crawl.Source, warning string, refused *refusal, err error) {
	if refused, warning = s.checkFeedURL(ctx, src.FeedURL); refused != nil {
		return crawl.Source{}, "", refused, nil
	}
	switch {
	case !discover, warning != "": // a name that does not resolve is not fetched
	case s.deps.Crawler == nil:
		warning = "crawling is disabled on this node: the URL was not checked and the source is not crawled here"
	default:
		r, err := s.deps.Crawler.Resolve(ctx, src.FeedURL)
		switch {
		case errors.Is(err, crawl.ErrNoFeed):
			return crawl.Source{}, "", &refusal{Reason: "no_feed",
				Error: "feed discovery: " + err.Error() + " (neither a feed nor a page that links to one)"}, nil
		case errors.Is(err, fetch.ErrBlockedAddress):
			// The name resolved elsewhere than when it was checked, or
			// discovery led to another host: the answer does not say
			// which address a name resolved to.
			return crawl.Source{}, "", &refusal{Reason: "blocked_address",
				Error: fmt.Sprintf("%s cannot be crawled: %s a private, loopback or other non-public address, which the crawler's SSRF guard refuses "+
					"(a node may crawl such addresses when its configuration allows them: crawl.allow_cidrs or crawl.allow_private)",
					src.FeedURL, blockedAddress(err, src.FeedURL))}, nil
		case err != nil:
			if inner := errors.Unwrap(err); inner != nil {
				err = inner // without Resolve's "fetch URL: "
			}
			warning = fmt.Sprintf("%s cannot be fetched now (%s); the source is kept as given and the crawler will retry",
				src.FeedURL, redact.InternalAddrs(err.Error()))
		default:
			if r.FeedURL != src.FeedURL {
				if refused, _ := s.checkFeedURL(ctx, r.FeedURL); refused != nil {
					return crawl.Source{}, "", refused, nil
				}
			}
			src.FeedURL = r.FeedURL
			src.Homepage = cmp.Or(src.Homepage, r.Homepage)
			src.Name = cmp.Or(src.Name, r.Title)
		}
	}
	mctx, cancel := s.metaCtx()
	defer cancel()
	if added, err = s.deps.Sources.Add(mctx, src); err != nil {
		return src, "", nil, err // the source as resolved, to find the one that exists
	}
	return added, warning, nil, nil
}

// urlGuard is the SSRF guard that URLs to be stored are checked with:
// the crawler's, or on a node that does not crawl, one made of the
// crawler's fetch options, which the node gives the image proxy
// (Options.Images.Fetch).
func (s *Server) urlGuard() *fetch.Guard {
	if c, ok := s.deps.Crawler.(interface{ Guard() *fetch.Guard }); ok {
		return c.Guard()
	}
	return fetch.NewGuard(s.opts.Images.Fetch)
}

// checkFeedURL checks a feed URL against the crawler's SSRF guard without
// fetching it: refused says why when the guard refuses its host (in any
// numeric form, or a name that resolves to such an address), warning when
// its name does not resolve now (the crawler retries). A URL that is not
// one passes: Sources.Add says what is wrong with it.
func (s *Server) checkFeedURL(ctx context.Context, feedURL string) (refused *refusal, warning string) {
	err := s.urlGuard().CheckURL(ctx, feedURL)
	var be *fetch.BlockedError
	switch {
	case errors.As(err, &be):
		return &refusal{Reason: "blocked_address", Error: fmt.Sprintf("%s cannot be crawled: %s, which the crawler's SSRF guard refuses "+
			"(a node may crawl such addresses when its configuration allows them: crawl.allow_cidrs or crawl.allow_private)",
			feedURL, be.Reason())}, ""
	case errors.Is(err, fetch.ErrUnresolved):
		return nil, fmt.Sprintf("%s cannot be fetched now (%v); the source is kept as given and the crawler will retry", feedURL, err)
	}
	return nil, ""
}

// addedSource is the answer to adding a source: the source, and what
// could not be checked.
type addedSource struct {
	crawl.Source
	Warning string `json:"warning,omitempty"`
}

// refusal is the answer to a URL that cannot work: the reason
// as a word (no_feed, blocked_address) and as a sentence.
type refusal struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

// blockedAddress names what the SSRF guard refused in err, a fetch of
// feedURL, as the subject of "is" or "resolves to": the address when
// feedURL's host is an address, else the host name alone (the address
// it resolved to, or redirected to, is not for the answer).
func blockedAddress(err error, feedURL string) string {
	u, perr := url.Parse(feedURL)
	if perr != nil || u.Hostname() == "" {
		return "its address is"
	}
	if _, ok := fetch.ParseHostIP(u.Hostname()); ok {
		for e := err; e != nil && e != fetch.ErrBlockedAddress; e = errors.Unwrap(e) {
			if msg := e.Error(); strings.HasPrefix(msg, fetch.ErrBlockedAddress.Error()+" ") {
				return strings.TrimPrefix(msg, fetch.ErrBlockedAddress.Error()+" ") + " is"
			}
		}
		return u.Hostname() + " is"
	}
	return u.Hostname() + " (or where it redirects) resolves to"
}

func sourceID(ctx *fasthttp.RequestCtx) (string, bool) {
	raw, _ := ctx.UserValue("id").(string)
	id, err := url.PathUnescape(raw)
	if err != nil || id == "" || len(id) > 64 {
		writeError(ctx, fasthttp.StatusBadRequest, "source id must be 1-64 bytes")
		return "", false
	}
	return id, true
}

// sourceByID returns the source the path's id names; when there is
// none, or the id is invalid, it has answered the request.
func (s *Server) sourceByID(ctx *fasthttp.RequestCtx) (crawl.Source, bool) {
	id, ok := sourceID(ctx)
	if !ok {
		return crawl.Source{}, false
	}
	mctx, cancel := s.metaCtx()
	defer cancel()
	src, err := s.deps.Sources.Get(mctx, id)
	if err != nil {
		s.sourceError(ctx, err)
		return crawl.Source{}, false
	}
	return publicSource(src), true
}

func (s *Server) handleGetSource(ctx *fasthttp.RequestCtx) {
	if src, ok := s.sourceByID(ctx); ok {
		writeJSON(ctx, fasthttp.StatusOK, src)
	}
}

func (s *Server) handleSourceStatus(ctx *fasthttp.RequestCtx) {
	src, ok := s.sourceByID(ctx)
	if !ok {
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{
		"id": src.ID, "status": src.Status, "status_reason": src.StatusReason, "feed_url": src.FeedURL, "crawl": src.Crawl,
	})
}

func (s *Server) handlePatchSource(ctx *fasthttp.RequestCtx) {
	id, ok := sourceID(ctx)
	if !ok {
		return
	}
	var in sourceInput
	if !decodeJSON(ctx, &in) {
		return
	}
	mctx, cancel := s.metaCtx()
	defer cancel()
	src, err := s.deps.Sources.Update(mctx, id, func(src *crawl.Source) error { return in.apply(src, false) })
	if err != nil {
		s.sourceError(ctx, err)
		return
	}
	s.kickCrawler()
	writeJSON(ctx, fasthttp.StatusOK, publicSource(src))
}

func (s *Server) handleDeleteSource(ctx *fasthttp.RequestCtx) {
	id, ok := sourceID(ctx)
	if !ok {
		return
	}
	mctx, cancel := s.metaCtx()
	defer cancel()
	if err := s.deps.Sources.Delete(mctx, id); err != nil {
		s.sourceError(ctx, err)
		return
	}
	s.kickCrawler()
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// handleImportSources adds every feed of an OPML body; feeds already
// present are skipped, invalid ones and those on addresses the crawler's
// SSRF guard refuses reported.
func (s *Server) handleImportSources(ctx *fasthttp.RequestCtx) {
	entries, err := opml.Parse(bytes.NewReader(ctx.PostBody()))
	if err != nil {
		writeError(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	allowed, refused := s.checkImport(ctx, entries)
	// One change per feed: the deadline grows with the list.
	mctx, cancel := context.WithTimeout(context.Background(), s.opts.MetaTimeout+time.Duration(len(allowed))*importPerFeed)
	defer cancel()
	res := s.deps.Sources.Import(mctx, allowed)
	if res.Added > 0 {
		s.kickCrawler()
	}
	if mctx.Err() != nil {
		// The store stopped taking changes (no leader): the feeds added
		// stay, and a resend skips them.
		setMetaRetryAfter(ctx)
		writeJSON(ctx, fasthttp.StatusServiceUnavailable, map[string]any{"added": res.Added, "skipped": res.Skipped,
			"error": "the cluster has no leader right now, or did not answer in time: the import stopped; send it again (the feeds added are skipped)"})
		return
	}
	res.Errors = append(refused, res.Errors...)
	status := fasthttp.StatusOK
	if len(res.Errors) > 0 {
		status = fasthttp.StatusBadRequest
	}
	writeJSON(ctx, status, res)
}

// importPerFeed is what each feed of an import adds to its deadline.
const importPerFeed = 50 * time.Millisecond

// checkImport checks the feed URLs of an import against the crawler's
// SSRF guard, a few at a time: allowed are the entries it lets through, in
// order, refused the failures of the others.
func (s *Server) checkImport(ctx context.Context, entries []opml.Entry) (allowed []opml.Entry, refused []crawl.ImportFailure) {
	errs := make([]*refusal, len(entries))
	var g errgroup.Group
	g.SetLimit(8)
	for i, e := range entries {
		g.Go(func() error {
			errs[i], _ = s.checkFeedURL(ctx, e.FeedURL)
			return nil
		})
	}
	_ = g.Wait()
	for i, e := range entries {
		if errs[i] != nil {
			refused = append(refused, crawl.ImportFailure{FeedURL: e.FeedURL, Error: errs[i].Error})
			continue
		}
		allowed = append(allowed, e)
	}
	return allowed, refused
}

func (s *Server) handleExportSources(ctx *fasthttp.RequestCtx) {
	mctx, cancel := s.metaCtx()
	defer cancel()
	es, err := s.deps.Sources.Export(mctx)
	if err != nil {
		metaError(ctx, "export sources", err)
		return
	}
	var buf bytes.Buffer
	if err := opml.Write(&buf, "newsflow sources", es); err != nil {
		writeError(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("text/x-opml; charset=utf-8")
	ctx.Response.Header.Set("Content-Disposition", `attachment; filename="newsflow-sources.opml"`)
	ctx.SetBody(buf.Bytes())
}

func (s *Server) kickCrawler() {
	if s.deps.Crawler != nil {
		s.deps.Crawler.Kick()
	}
}

// handleCrawlSource crawls one source now and returns the crawl record.
func (s *Server) handleCrawlSource(ctx *fasthttp.RequestCtx) {
	id, ok := sourceID(ctx)
	if !ok {
		return
	}
	if s.deps.Crawler == nil {
		writeError(ctx, fasthttp.StatusServiceUnavailable, "crawling is disabled on this node")
		return
	}
	rec, err := s.deps.Crawler.CrawlNow(ctx, id)
	switch {
	case errors.Is(err, crawl.ErrTooSoon) || errors.Is(err, crawl.ErrBusy):
		ctx.Response.Header.Set("Retry-After", "60")
		writeError(ctx, fasthttp.StatusTooManyRequests, err.Error())
	case errors.Is(err, crawl.ErrHeld):
		ctx.Response.Header.Set("Retry-After", "30")
		writeError(ctx, fasthttp.StatusInsufficientStorage, err.Error())
	case err != nil:
		s.sourceError(ctx, err)
	default:
		writeJSON(ctx, fasthttp.StatusOK, publicRecord(rec))
	}
}

// readerAddSource adds the source of a feed URL a reader subscribes to in
// a reader app, when the reader is an admin or auth.readers_add_sources
// lets readers add sources: checked as an admin's would be (feed
// discovery, the SSRF guard). A URL that leads to a source that exists
// gives that source.
func (s *Server) readerAddSource(ctx context.Context, u auth.User, feedURL string) (crawl.Source, error) {
	if u.Role != auth.RoleAdmin && !s.opts.ReadersAddSources {
		return crawl.Source{}, readerapi.ErrMayNotAddSources
	}
	in := sourceInput{FeedURL: &feedURL}
	var src crawl.Source
	if err := in.apply(&src, true); err != nil {
		return crawl.Source{}, fmt.Errorf("%w: %v", readerapi.ErrSourceRefused, err)
	}
	added, _, refused, err := s.addSource(ctx, src, true)
	switch {
	case refused != nil:
		return crawl.Source{}, fmt.Errorf("%w: %s", readerapi.ErrSourceRefused, refused.Error)
	case errors.Is(err, crawl.ErrSourceExists):
		return s.deps.Sources.Get(ctx, crawl.SourceID(added.FeedURL))
	case errors.Is(err, cluster.ErrNoLeader), errors.Is(err, context.DeadlineExceeded):
		return crawl.Source{}, err // not the URL's fault: the reader may try again
	case err != nil:
		// As for an admin's addition (sourceError): what Add refuses is the
		// URL's fault.
		return crawl.Source{}, fmt.Errorf("%w: %v", readerapi.ErrSourceRefused, err)
	}
	s.kickCrawler()
	return added, nil
}
