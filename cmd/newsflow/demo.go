package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/newsflow/newsflow/crawl"
	"github.com/newsflow/newsflow/demo/feedfarm"
	"github.com/newsflow/newsflow/internal/opml"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/tick"
	"github.com/newsflow/newsflow/node"
	"github.com/newsflow/newsflow/query/auth"
	"golang.org/x/sync/errgroup"
)

const demoUsage = `usage: newsflow demo [--http ADDR] [--data DIR] [--farm ADDR] [--users N] [--rate R] [--advance D]

Runs, in one process and without the internet, a node that crawls a local
feed farm of generated news (a new event every --advance, each covered by
several outlets) and simulated readers who read and share its stories.
Open the printed address to watch stories form and the trending panel move.
`

// demoOptions are the flags of newsflow demo.
type demoOptions struct {
	http, data, farm, logLevel string
	users                      int
	rate                       float64
	advance                    time.Duration
}

// demoAdminName is the admin account the demo creates.
const demoAdminName = "admin"

// cmdDemo runs a feed farm serving a generated news world, a node that
// crawls it, and readers who read and share what the node shows, until ctx
// is done.
func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, demoUsage); fs.PrintDefaults() }
	var o demoOptions
	fs.StringVar(&o.http, "http", "127.0.0.1:8080", "the node's HTTP address")
	fs.StringVar(&o.data, "data", "demo-data", "data directory (delete it to start afresh)")
	fs.StringVar(&o.farm, "farm", "127.0.0.1:8090", "the feed farm's address")
	fs.IntVar(&o.users, "users", 50, "simulated readers")
	fs.Float64Var(&o.rate, "rate", 20, "reads and shares per second, all readers together")
	fs.DurationVar(&o.advance, "advance", 20*time.Second, "how often the news world publishes an event")
	fs.StringVar(&o.logLevel, "log-level", "warn", "log level of the node")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		fs.Usage()
		return fmt.Errorf("demo: unexpected argument %q", fs.Arg(0))
	case o.users < 1:
		return errors.New("demo: --users must be at least 1")
	case o.rate < 0 || math.IsNaN(o.rate) || math.IsInf(o.rate, 0):
		return errors.New("demo: --rate must be a number of events per second, 0 or more")
	case o.advance < time.Second:
		return errors.New("demo: --advance must be at least 1s")
	}
	logger, err := node.NewLogger(node.LoggingConfig{Level: o.logLevel, Format: "text"})
	if err != nil {
		return err
	}

	farmLn, err := net.Listen("tcp", o.farm)
	if err != nil {
		return fmt.Errorf("demo: feed farm: %w (is another demo running? choose another address with --farm)", err)
	}
	defer farmLn.Close()
	httpLn, err := net.Listen("tcp", o.http)
	if err != nil {
		return fmt.Errorf("demo: node: %w (is another node running? choose another address with --http)", err)
	}
	defer httpLn.Close()

	// The feeds link each article to its page on the farm, so that a click
	// in the reader opens it without the internet.
	farm := feedfarm.New(feedfarm.Options{Now: time.Now, ArticlePages: true})
	farmAddr, nodeAddr := dialable(farmLn.Addr()), dialable(httpLn.Addr())
	seed, entries, err := writeDemoSources(farm, "http://"+farmAddr, o.data)
	if err != nil {
		return err
	}
	token, err := randomHex(16)
	if err != nil {
		return err
	}
	ingest, err := randomHex(16) // the simulated readers write reads for many users
	if err != nil {
		return err
	}
	cfg := demoConfig(o, httpLn.Addr().String(), seed, token, ingest)
	n, err := node.Open(ctx, cfg, node.Options{Logger: logger})
	if err != nil {
		return fmt.Errorf("demo: %w (data dir %s: is another node running on it?)", err, cfg.DataDir)
	}
	defer n.Close()
	if err := pruneDemoSources(ctx, n.Sources(), entries); err != nil {
		return fmt.Errorf("demo: sources: %w", err)
	}
	password, err := demoAdmin(ctx, n.Auth())
	if err != nil {
		return fmt.Errorf("demo: admin account: %w", err)
	}

	base := "http://" + nodeAddr
	client := &nodeClient{base: base, token: token, ingest: ingest, http: &http.Client{Timeout: 30 * time.Second}}
	advanced := make(chan struct{}, 1)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return n.Run(gctx, httpLn) })
	g.Go(func() error { return serveFarm(gctx, farm, farmLn) })
	g.Go(func() error { return advanceFarm(gctx, farm, o.advance, advanced) })
	g.Go(func() error {
		if err := waitDemoReady(gctx, n, client); err != nil {
			return nil // stopped while starting
		}
		fmt.Fprintf(stdout, `
newsflow demo
  open        %s/
  log in as   %s, password %s (admin console at %s/admin)
  admin API   Authorization: Bearer %s
  news        %d outlets at http://%s/news/sources.opml, an event every %s
  readers     %d, reading and sharing %g times a second
  data        %s (delete it to start afresh)
Stories appear within seconds and gain sources as outlets are crawled; press Ctrl-C to stop.

`, base, demoAdminName, password, base, token, len(entries), farmAddr, o.advance, o.users, o.rate, o.data)
		t := newDemoTraffic(client, o, logger)
		tg, tctx := errgroup.WithContext(gctx)
		tg.Go(func() error { return t.crawlOnAdvance(tctx, advanced, o.advance) })
		tg.Go(func() error { return t.readAndShare(tctx) })
		return tg.Wait()
	})
	err = g.Wait()
	if ctx.Err() != nil {
		logger.Info("demo stopped")
		return nil
	}
	return err
}

// dialable is the address to reach a listener at: its own, or loopback's
// when it listens on every interface.
func dialable(a net.Addr) string { return node.Dialable(a.String()) }

// demoConfig is the default configuration with the demo's addresses, the
// farm's outlets as seed sources, and an admin token and an ingestion
// token for the traffic.
func demoConfig(o demoOptions, httpAddr, seedOPML, token, ingest string) node.Config {
	cfg := node.Default()
	cfg.DataDir = o.data
	cfg.HTTP.Addr = httpAddr
	cfg.Auth.AdminToken = token
	cfg.Auth.IngestToken = ingest
	cfg.Logging.Level = o.logLevel
	c := &cfg.Crawl
	c.SeedOPML = seedOPML
	c.Fetch.AllowPrivate = true // the farm is on loopback
	c.IgnoreRobots = true       // and has no robots.txt
	// Every outlet is on the farm's host.
	c.Limiter.HostConcurrency, c.Limiter.HostRate = 8, 50
	return cfg
}

// writeDemoSources writes the farm's outlets to DIR/sources.opml and
// returns its path and entries.
func writeDemoSources(farm *feedfarm.Farm, farmURL, dir string) (string, []opml.Entry, error) {
	b, err := farm.NewsOPML(farmURL)
	if err != nil {
		return "", nil, err
	}
	entries, err := opml.Parse(bytes.NewReader(b))
	if err != nil {
		return "", nil, fmt.Errorf("demo: farm sources: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("demo: %w", err)
	}
	path := filepath.Join(dir, "sources.opml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", nil, fmt.Errorf("demo: %w", err)
	}
	return path, entries, nil
}

// pruneDemoSources deletes the sources of an earlier demo that are not the
// farm's current outlets (the farm may listen elsewhere now), so that the
// node imports the current ones when it starts.
func pruneDemoSources(ctx context.Context, sources *crawl.Sources, current []opml.Entry) error {
	list, err := sources.List(ctx)
	if err != nil {
		return err
	}
	for _, s := range list {
		if !slices.ContainsFunc(current, func(e opml.Entry) bool { return e.FeedURL == s.FeedURL }) {
			if err := sources.Delete(ctx, s.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// demoAdmin creates the admin account, or gives it a new password, and
// returns the password.
func demoAdmin(ctx context.Context, st *auth.Store) (string, error) {
	password, err := randomHex(8)
	if err != nil {
		return "", err
	}
	u, err := st.UserByName(ctx, demoAdminName)
	switch {
	case errors.Is(err, auth.ErrUserNotFound):
		_, err = st.AddUser(ctx, demoAdminName, password, auth.RoleAdmin)
		return password, err
	case err != nil:
		return "", err
	}
	if _, err := st.SetRole(ctx, u.ID, auth.RoleAdmin); err != nil {
		return "", err
	}
	return password, st.SetPassword(ctx, u.ID, password)
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// serveFarm serves the farm on ln until ctx is done.
func serveFarm(ctx context.Context, farm *feedfarm.Farm, ln net.Listener) error {
	srv := &http.Server{Handler: farm, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("feed farm: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("feed farm: %w", err)
	}
	<-errc
	return nil
}

// advanceFarm moves the farm's generated feeds on every interval and
// signals advanced (if not nil) without blocking.
func advanceFarm(ctx context.Context, farm *feedfarm.Farm, every time.Duration, advanced chan<- struct{}) error {
	return tick.Every(ctx, every, func() {
		farm.Advance()
		select {
		case advanced <- struct{}{}:
		default:
		}
	})
}

// waitDemoReady waits until the node's tasks have restored their state
// and its HTTP server answers /health/ready.
func waitDemoReady(ctx context.Context, n *node.Node, c *nodeClient) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !n.Engine().Ready() || c.do(ctx, http.MethodGet, "/health/ready", "", nil, nil) != nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// demoTraffic is the demo's readers: they read and share the articles of
// the stories the node shows, the newest stories most, and ask for a crawl
// of the outlets after the news world moves on.
type demoTraffic struct {
	c      *nodeClient
	o      demoOptions
	logger *slog.Logger
	rng    *mrand.Rand
	run    string // tells this run's event ids from an earlier run's
	seq    int

	stories  map[string]demoStory // by id
	articles []demoArticle        // most popular first
	words    []string             // of the stories' headlines, to search for
	zipf     *mrand.Zipf
	crawled  map[string]time.Time // source id → last crawl asked for
	warned   map[string]time.Time // kind of failure → last warning
}

// demoStoryRow is what the traffic reads of a story in a list.
type demoStoryRow struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Articles int    `json:"article_count"`
	LastSeen int64  `json:"last_seen"`
	Topics   []struct {
		Topic string `json:"topic"`
	} `json:"topics"`
}

type demoStory struct {
	count    int
	articles []demoArticle
}

type demoArticle struct{ id, category string }

func newDemoTraffic(c *nodeClient, o demoOptions, logger *slog.Logger) *demoTraffic {
	seed := uint64(time.Now().UnixNano())
	return &demoTraffic{c: c, o: o, logger: logger, rng: mrand.New(mrand.NewPCG(seed, seed>>1)),
		run: strconv.FormatInt(time.Now().Unix(), 36), stories: map[string]demoStory{},
		crawled: map[string]time.Time{}, warned: map[string]time.Time{}}
}

// warn logs a failure, at most once a minute for each kind.
func (t *demoTraffic) warn(kind string, err error) {
	if time.Since(t.warned[kind]) < time.Minute {
		return
	}
	t.warned[kind] = time.Now()
	t.logger.Warn("demo: "+kind, "err", err)
}

// manualCrawlInterval is how often the node lets one source be crawled on
// request.
const manualCrawlInterval = time.Minute

// crawlOnAdvance asks for a crawl of the outlets after each advance of the
// news world. The node crawls a source on request at most once a minute,
// so each advance asks for the outlets crawled longest ago, as many as
// keep every outlet crawled about once a minute.
func (t *demoTraffic) crawlOnAdvance(ctx context.Context, advanced <-chan struct{}, every time.Duration) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-advanced:
		}
		var list struct {
			Sources []crawl.Source `json:"sources"`
		}
		if err := t.c.do(ctx, http.MethodGet, "/api/v1/admin/sources", "", nil, &list); err != nil {
			t.warn("list sources", err)
			continue
		}
		due := slices.DeleteFunc(list.Sources, func(s crawl.Source) bool {
			return s.Status != crawl.StatusActive || time.Since(t.crawled[s.ID]) <= manualCrawlInterval
		})
		slices.SortStableFunc(due, func(a, b crawl.Source) int { return t.crawled[a.ID].Compare(t.crawled[b.ID]) })
		budget := max(1, int(math.Ceil(float64(len(list.Sources))*every.Seconds()/manualCrawlInterval.Seconds())))
		for _, s := range due[:min(budget, len(due))] {
			t.crawled[s.ID] = time.Now()
			err := t.c.do(ctx, http.MethodPost, "/api/v1/admin/sources/"+url.PathEscape(s.ID)+"/crawl", "", nil, nil)
			var se *statusError
			if err != nil && ctx.Err() == nil && !(errors.As(err, &se) && se.code == http.StatusTooManyRequests) {
				t.warn("crawl", err) // 429: crawled by the schedule moments ago
			}
		}
	}
}

// readAndShare sends reads and shares at the configured rate, in batches
// four times a second, and refreshes the stories every five seconds.
func (t *demoTraffic) readAndShare(ctx context.Context) error {
	if t.o.rate == 0 {
		<-ctx.Done()
		return nil
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var refreshed time.Time
	last, owed := time.Now(), 0.0
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-tick.C:
			if now.Sub(refreshed) >= 5*time.Second || len(t.articles) == 0 {
				refreshed = now
				if err := t.refresh(ctx); err != nil && ctx.Err() == nil {
					t.warn("list stories", err)
				}
			}
			owed += t.o.rate * now.Sub(last).Seconds()
			last = now
			n := int(owed)
			owed -= float64(n)
			if len(t.articles) > 0 && n > 0 {
				t.send(ctx, now, n)
				t.browse(ctx)
			}
		}
	}
}

// browse is a visitor opening the front page and, now and then, searching
// for a word of a headline, as the readers who send the events would.
func (t *demoTraffic) browse(ctx context.Context) {
	if err := t.c.do(ctx, http.MethodGet, "/api/v1/feed?limit=20", "", nil, nil); err != nil && ctx.Err() == nil {
		t.warn("open the feed", err)
	}
	if len(t.words) == 0 || t.rng.IntN(4) != 0 {
		return
	}
	q := url.QueryEscape(t.words[t.rng.IntN(len(t.words))])
	if err := t.c.do(ctx, http.MethodGet, "/api/v1/search?limit=10&q="+q, "", nil, nil); err != nil && ctx.Err() == nil {
		t.warn("search", err)
	}
}

// refresh reloads the stories and orders their articles by popularity:
// the articles of the newest stories first, so that each new event
// climbs the trending list.
func (t *demoTraffic) refresh(ctx context.Context) error {
	var page struct {
		Stories []demoStoryRow `json:"stories"`
	}
	if err := t.c.do(ctx, http.MethodGet, "/api/v1/stories?limit=50", "", nil, &page); err != nil {
		return err
	}
	slices.SortStableFunc(page.Stories, func(a, b demoStoryRow) int { return cmp.Compare(b.LastSeen, a.LastSeen) })
	t.words = t.words[:0]
	for _, s := range page.Stories {
		for w := range strings.FieldsSeq(s.Title) {
			if len(w) > 4 {
				t.words = append(t.words, strings.Trim(w, ".,:;!?'\""))
			}
		}
	}
	stories := make(map[string]demoStory, len(page.Stories))
	var articles []demoArticle
	for _, s := range page.Stories {
		st, ok := t.stories[s.ID]
		if !ok || st.count != s.Articles {
			var detail struct {
				Articles []struct {
					ID string `json:"id"`
				} `json:"articles"`
			}
			if err := t.c.do(ctx, http.MethodGet, "/api/v1/stories/"+url.PathEscape(s.ID), "", nil, &detail); err != nil {
				return err
			}
			category := "general"
			if len(s.Topics) > 0 {
				category = s.Topics[0].Topic
			}
			st = demoStory{count: s.Articles}
			for _, a := range detail.Articles {
				st.articles = append(st.articles, demoArticle{id: a.ID, category: category})
			}
		}
		stories[s.ID] = st
		articles = append(articles, st.articles...)
	}
	t.stories = stories
	switch {
	case len(articles) < 2:
		t.zipf = nil
	case len(articles) != len(t.articles):
		t.zipf = mrand.NewZipf(t.rng, 1.2, 2, uint64(len(articles)-1))
	}
	t.articles = articles
	return nil
}

// send sends n reads and shares of articles drawn by popularity, about
// two reads for each share.
func (t *demoTraffic) send(ctx context.Context, now time.Time, n int) {
	var reads, shares bytes.Buffer
	re, se := json.NewEncoder(&reads), json.NewEncoder(&shares)
	ts := now.UnixMilli()
	for range n {
		a := t.articles[0]
		if t.zipf != nil {
			a = t.articles[t.zipf.Uint64()]
		}
		user := fmt.Sprintf("reader-%03d", t.rng.IntN(t.o.users)+1)
		t.seq++
		id := fmt.Sprintf("demo-%s-%d", t.run, t.seq)
		var err error
		if t.rng.IntN(3) == 0 {
			kinds := []string{"link", "email", "social", "message"}
			err = se.Encode(schema.Share{EventID: id, ArticleID: a.id, UserID: user,
				ShareType: kinds[t.rng.IntN(len(kinds))], Category: a.category, Timestamp: ts})
		} else {
			// A visit lasts a quarter of an hour.
			err = re.Encode(schema.Read{EventID: id, UserID: user, ArticleID: a.id,
				SessionID: fmt.Sprintf("%s-%d", user, now.Unix()/900), Timestamp: ts, DwellMS: 5000 + t.rng.Int64N(115000)})
		}
		if err != nil {
			t.warn("encode events", err)
			return
		}
	}
	for _, b := range []struct {
		path string
		body []byte
	}{{"/api/v1/events/read/batch", reads.Bytes()}, {"/api/v1/events/share/batch", shares.Bytes()}} {
		if len(b.body) == 0 {
			continue
		}
		if err := t.c.do(ctx, http.MethodPost, b.path, "application/x-ndjson", b.body, nil); err != nil && ctx.Err() == nil {
			t.warn("send events", err)
		}
	}
}
