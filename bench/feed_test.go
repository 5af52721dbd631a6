package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/cmd/newsflow/nodeproc"
	"github.com/newsflow/newsflow/internal/canon"
	"github.com/newsflow/newsflow/internal/testutil"
)

// BenchmarkFeed measures the personalized feed and login of a node (a
// second process) holding NEWSFLOW_BENCH_FEED_USERS accounts (default
// 10,000, imported from one hash) and NEWSFLOW_BENCH_FEED_STORIES recent
// stories (default 20,000). NEWSFLOW_BENCH_FEED_SESSIONS of the users (default
// 200) log in, read a few stories each, then ask for their feed: the first
// request of each computes it (uncached), the following ones within the
// minute are served from the cache.
//
// Metrics: uncached-p50-ms/uncached-p99-ms (target p99 <= 20 ms),
// cached-p50-ms/cached-p99-ms with one client (target <= 2 ms),
// cached-4c-qps and cached-4c-p99-ms with 4 clients (client and node share
// the 2 cores), login-p50-ms/login-p99-ms (bcrypt cost 12), node
// peak-rss-MB.
//
// It is one run checked step by step (cyclomatic 27): each step's
// figures are checked before the next.
func BenchmarkFeed(b *testing.B) {
	users := testutil.EnvInt(b, "NEWSFLOW_BENCH_FEED_USERS", 10000)
	stories := testutil.EnvInt(b, "NEWSFLOW_BENCH_FEED_STORIES", 20000)
	sessions := testutil.EnvInt(b, "NEWSFLOW_BENCH_FEED_SESSIONS", 200)
	bin, root := nodeproc.Binary(b)
	dir := b.TempDir()
	data := filepath.Join(dir, "data")
	config := filepath.Join(root, "configs", "newsflow.yaml")
	const password = "benchmark account password"

	// Accounts: one hash, imported for every user.
	hashCmd := exec.Command(bin, "user", "hash", "--config", config)
	hashCmd.Stdin = strings.NewReader(password + "\n")
	out, err := hashCmd.Output()
	if err != nil {
		b.Fatalf("user hash: %v", err)
	}
	var buf bytes.Buffer
	for i := range users {
		line, _ := json.Marshal(map[string]string{"username": fmt.Sprintf("reader%05d", i), "password_hash": strings.TrimSpace(string(out))})
		buf.Write(append(line, '\n'))
	}
	usersFile := filepath.Join(dir, "users.ndjson")
	if err := os.WriteFile(usersFile, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command(bin, "user", "import", "--config", config, "--data", data, "--log-level", "warn", usersFile).CombinedOutput(); err != nil {
		b.Fatalf("user import: %v\n%s", err, out)
	}

	n := &nodeProc{Proc: nodeproc.Start(b, nodeproc.Options{DataDir: data, Env: benchEnv}), b: b}
	n.WaitReady(60 * time.Second)

	// Stories: one article each, headlines of random words around a topic
	// word, spread over the last 40 hours.
	r := rand.New(rand.NewPCG(7, 7))
	topicWords := []string{"football", "election", "stocks", "vaccine", "smartphone", "film", "climate", "parliament"}
	now := time.Now().UTC()
	ids := make([]string, stories)
	client := &http.Client{Timeout: time.Minute}
	for start := 0; start < stories; start += 1000 {
		buf.Reset()
		for i := start; i < min(start+1000, stories); i++ {
			words := []string{topicWords[i%len(topicWords)]}
			for range 6 {
				words = append(words, fmt.Sprintf("w%x", r.Uint32()%50000+1000))
			}
			u := fmt.Sprintf("https://src%d.example/story/%d", i%300, i)
			c, _ := canon.Canonical(u, nil)
			ids[i] = canon.ArticleID(c)
			line, _ := json.Marshal(map[string]string{"url": u, "source_id": fmt.Sprint("src", i%300), "title": strings.Join(words, " "),
				"published_at": now.Add(-time.Duration(float64(40*time.Hour) * float64(stories-i) / float64(stories))).Format(time.RFC3339)})
			buf.Write(append(line, '\n'))
		}
		resp, err := ingestPost(client, n.URL("/api/v1/articles?batch=1"), buf.Bytes())
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			b.Fatalf("articles: %s", resp.Status)
		}
	}
	testutil.Eventually(b, 10*time.Minute, func() error {
		var h struct {
			Checks struct {
				Stories struct {
					Recent int `json:"recent"`
				} `json:"stories"`
			} `json:"checks"`
		}
		resp, err := client.Get(n.URL("/health/detailed"))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
			return err
		}
		if h.Checks.Stories.Recent < stories*9/10 {
			return fmt.Errorf("only %d stories", h.Checks.Stories.Recent)
		}
		b.Logf("%d recent stories", h.Checks.Stories.Recent)
		return nil
	})

	// Log in (2 at a time: bcrypt at cost 12 is the point).
	tokens := make([]string, sessions)
	userIDs := make([]string, sessions)
	var loginLat []time.Duration
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int)
	for range 2 {
		wg.Go(func() {
			for i := range next {
				body := fmt.Sprintf(`{"username":"reader%05d","password":%q}`, i*(users/sessions), password)
				t0 := time.Now()
				resp, err := client.Post(n.URL("/api/v1/auth/login"), "application/json", strings.NewReader(body))
				if err != nil {
					b.Error(err)
					continue
				}
				var s struct {
					Token string `json:"token"`
					User  struct {
						ID string `json:"id"`
					} `json:"user"`
				}
				json.NewDecoder(resp.Body).Decode(&s)
				resp.Body.Close()
				mu.Lock()
				loginLat = append(loginLat, time.Since(t0))
				tokens[i], userIDs[i] = s.Token, s.User.ID
				mu.Unlock()
			}
		})
	}
	for i := range sessions {
		next <- i
	}
	close(next)
	wg.Wait()
	// Each logged-in user reads five stories of two topics.
	buf.Reset()
	for i, uid := range userIDs {
		for k := range 5 {
			story := (i*7+k*len(topicWords)*13)%stories/len(topicWords)*len(topicWords) + (i+k/3)%len(topicWords)
			line, _ := json.Marshal(map[string]any{"event_id": fmt.Sprint("r", i, "-", k), "user_id": uid, "article_id": ids[story%stories],
				"session_id": "s", "timestamp": now.UnixMilli()})
			buf.Write(append(line, '\n'))
		}
	}
	if resp, err := ingestPost(client, n.URL("/api/v1/events/read/batch"), buf.Bytes()); err != nil || resp.StatusCode != http.StatusAccepted {
		b.Fatalf("reads: %v %v", err, resp)
	}
	n.WaitCaughtUp(time.Minute) // the interest operator has applied them

	feed := func(tok string) time.Duration {
		req, _ := http.NewRequest(http.MethodGet, n.URL("/api/v1/feed?limit=20"), nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("feed: %s", resp.Status)
		}
		return time.Since(t0)
	}
	var uncached, cached []time.Duration
	b.ResetTimer()
	for i := range sessions {
		uncached = append(uncached, feed(tokens[i]))
	}
	// Cached, one client: latency without queueing.
	var cached1 []time.Duration
	for i := range 2000 {
		cached1 = append(cached1, feed(tokens[i%sessions]))
	}
	// Cached, 4 clients for 5 seconds: throughput.
	stop := time.Now().Add(5 * time.Second)
	for c := range 4 {
		wg.Go(func() {
			var lat []time.Duration
			for i := c; time.Now().Before(stop); i++ {
				lat = append(lat, feed(tokens[i%sessions]))
			}
			mu.Lock()
			cached = append(cached, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	b.StopTimer()
	pct := func(d []time.Duration, p float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(uncached, 0.5), "uncached-p50-ms")
	b.ReportMetric(pct(uncached, 0.99), "uncached-p99-ms")
	b.ReportMetric(pct(cached1, 0.5), "cached-p50-ms")
	b.ReportMetric(pct(cached1, 0.99), "cached-p99-ms")
	b.ReportMetric(pct(cached, 0.99), "cached-4c-p99-ms")
	b.ReportMetric(float64(len(cached))/5, "cached-4c-qps")
	b.ReportMetric(pct(loginLat, 0.5), "login-p50-ms")
	b.ReportMetric(pct(loginLat, 0.99), "login-p99-ms")
	b.ReportMetric(n.PeakRSSMB(), "peak-rss-MB")
	b.ReportMetric(float64(users), "users")
}

// ingestPost posts NDJSON events or articles with the ingestion token.
func ingestPost(client *http.Client, url string, body []byte) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("Authorization", "Bearer "+nodeproc.IngestToken)
	return client.Do(req)
}
