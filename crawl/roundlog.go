package crawl

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Failure is the class of a crawl error: a short key for counting and
// logs ("dns", "timeout", "http_404", ...) and a sentence for people.
type Failure struct {
	Key  string `json:"reason"`
	Hint string `json:"message"`
}

// ClassifyFailure returns the class of a crawl error message (as stored
// in CrawlState.LastError). It reads the message, not the error value, so
// that the crawler's logs and the setup status, which reads stored
// sources, agree.
func ClassifyFailure(msg string) Failure {
	m := strings.ToLower(msg)
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(m, s) {
				return true
			}
		}
		return false
	}
	switch {
	case has("no such host", "dial tcp: lookup ", "dial udp: lookup ", "temporary failure in name resolution", "server misbehaving"):
		return Failure{"dns", "cannot resolve host names — is this machine offline?"}
	case has("network is unreachable", "no route to host"):
		return Failure{"unreachable", "the network is unreachable — is this machine offline?"}
	case has("blocked address"):
		return Failure{"blocked", "the feed's address is private and blocked (crawl.allow_private or crawl.allow_cidrs allow feeds on your network)"}
	case has("connection refused"):
		return Failure{"refused", "the server refused the connection (down, or a wrong port)"}
	case has("timeout", "deadline exceeded"):
		return Failure{"timeout", "the server did not answer in time"}
	case has("tls:", "x509:", "certificate"):
		return Failure{"tls", "the TLS handshake or the server's certificate failed"}
	case has("connection reset", "broken pipe", "unexpected eof"):
		return Failure{"reset", "the server closed the connection"}
	case strings.HasPrefix(m, "robots.txt:"):
		return Failure{"robots", "robots.txt could not be read, so nothing may be fetched"}
	case has("body too large"):
		return Failure{"too_large", "the feed is larger than crawl.max_body_bytes"}
	case has("too many redirects", "redirect loop"):
		return Failure{"redirects", "the feed URL redirects in a loop or too many times"}
	case has("invalid url"):
		return Failure{"invalid_url", "the feed URL is not a valid http or https URL"}
	case strings.HasPrefix(m, "parse:"):
		return Failure{"parse", "the answer is not a feed newsflow can read"}
	case strings.HasPrefix(m, "append articles:"):
		return Failure{"append", "new articles could not be written to the log"}
	case m == "disallowed by robots.txt":
		return Failure{"disallowed", "the site's robots.txt does not allow crawling the feed"}
	}
	if code, ok := httpStatus(m); ok {
		return Failure{"http_" + strconv.Itoa(code), fmt.Sprintf("the server answered HTTP %d %s", code, http.StatusText(code))}
	}
	return Failure{"other", "other errors"}
}

// httpStatus finds the status in a fetch.StatusError message ("http 404
// Not Found").
func httpStatus(m string) (int, bool) {
	i := strings.Index(m, "http ")
	if i < 0 || len(m) < i+8 {
		return 0, false
	}
	code, err := strconv.Atoi(m[i+5 : i+8])
	if err != nil || code < 100 || code > 599 {
		return 0, false
	}
	return code, true
}

// SourceFailure reports whether a source is failing: active, and its last
// crawl failed (or robots.txt disallows its feed); and why.
func SourceFailure(s *Source) (Failure, bool) {
	if s.Status != StatusActive {
		return Failure{}, false
	}
	if s.Crawl.ConsecutiveErrors > 0 || (s.Crawl.LastResult != nil && s.Crawl.LastResult.Outcome == "disallowed") {
		return ClassifyFailure(s.Crawl.LastError), true
	}
	return Failure{}, false
}

// maxTransitionLogs bounds the "source failing" and "source recovered"
// lines of one round each; the rest are counted in the round's summary.
const maxTransitionLogs = 5

// roundLog gathers what the crawler did since its last summary, so that
// the log gets one line per round instead of one per failed fetch. It is
// safe for concurrent use (workers and manual crawls record into it).
type roundLog struct {
	mu struct {
		sync.Mutex
		since   time.Time
		sources int // active sources this crawler owns, at the last reload
		crawls  int
		fetched int // ok or not modified
		skipped int // circuit open
		newArts int
		started int // sources that started failing this round
		recov   int // sources that recovered this round
		// failing holds the failure key of every source whose latest
		// crawl by this crawler failed.
		failing map[string]string
	}
}

func newRoundLog(now time.Time) *roundLog {
	r := &roundLog{}
	r.mu.since = now
	r.mu.failing = map[string]string{}
	return r
}

// setSources records the sources the crawler owns; failing sources not
// among them (deleted, paused, moved to another node) are forgotten.
func (r *roundLog) setSources(owned map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.sources = len(owned)
	for id := range r.mu.failing {
		if !owned[id] {
			delete(r.mu.failing, id)
		}
	}
}

// transition says whether a source changed between failing and healthy
// with this crawl, and whether that change may still be logged this
// round.
type transition int

const (
	noTransition transition = iota
	startedFailing
	recovered
)

// record counts one crawl of source id, whose consecutive errors were
// prevErrors before it, and returns the transition it made and whether
// to log it on its own line.
func (r *roundLog) record(id string, prevErrors int, rec CrawlRecord) (transition, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.newArts += rec.ItemsNew
	switch rec.Outcome {
	case "skipped":
		r.mu.skipped++
		return noTransition, false
	case "ok", "not_modified":
		r.mu.crawls++
		r.mu.fetched++
		delete(r.mu.failing, id)
		if prevErrors > 0 {
			r.mu.recov++
			return recovered, r.mu.recov <= maxTransitionLogs
		}
	case "error", "disallowed":
		r.mu.crawls++
		r.mu.failing[id] = ClassifyFailure(rec.Error).Key
		if prevErrors == 0 && rec.Outcome == "error" {
			r.mu.started++
			return startedFailing, r.mu.started <= maxTransitionLogs
		}
	case "gone":
		r.mu.crawls++
		delete(r.mu.failing, id)
	default: // rate_limited: the server asked to wait, not a failure
		r.mu.crawls++
	}
	return noTransition, false
}

// flush logs the summary of the round that ends at now, if anything
// happened in it, and starts the next round.
func (r *roundLog) flush(l *slog.Logger, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := &r.mu
	if m.crawls == 0 && m.skipped == 0 {
		return
	}
	byKey := map[string]int{}
	for _, k := range m.failing {
		byKey[k]++
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if byKey[a] != byKey[b] {
			return byKey[b] - byKey[a]
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	fmt.Fprintf(&b, "crawl round: %d sources, %d crawls, %d fetched, %d new articles, %d failing", m.sources, m.crawls, m.fetched, m.newArts, len(m.failing))
	reasons := make([]string, len(keys))
	for i, k := range keys {
		reasons[i] = k + ": " + strconv.Itoa(byKey[k])
	}
	if len(reasons) > 0 {
		b.WriteString(" (" + strings.Join(reasons, ", ") + ")")
	}
	if m.skipped > 0 {
		fmt.Fprintf(&b, ", %d skipped (circuit open)", m.skipped)
	}
	attrs := []slog.Attr{slog.Int("sources", m.sources), slog.Int("crawls", m.crawls), slog.Int("fetched", m.fetched),
		slog.Int("new_articles", m.newArts), slog.Int("failing", len(m.failing)), slog.Duration("period", now.Sub(m.since).Round(time.Second))}
	if m.started > 0 {
		attrs = append(attrs, slog.Int("started_failing", m.started))
	}
	if m.recov > 0 {
		attrs = append(attrs, slog.Int("recovered", m.recov))
	}
	if m.started > maxTransitionLogs || m.recov > maxTransitionLogs {
		attrs = append(attrs, slog.Int("transitions_not_logged", max(m.started-maxTransitionLogs, 0)+max(m.recov-maxTransitionLogs, 0)))
	}
	l.LogAttrs(context.Background(), slog.LevelInfo, b.String(), attrs...)
	m.since, m.crawls, m.fetched, m.skipped, m.newArts, m.started, m.recov = now, 0, 0, 0, 0, 0, 0
}
