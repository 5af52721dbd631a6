package query_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
)

// sseEvent is one block of a text/event-stream: fields up to a blank line.
type sseEvent struct {
	id, name, data, retry string
	comments              []string
}

// sseClient reads a stream over its own TCP connection, as a browser's
// EventSource does.
type sseClient struct {
	conn   net.Conn
	header http.Header
	events chan sseEvent // closed when the stream ends
	seen   []sseEvent    // everything read so far, in order
}

// openStream connects to the node's listener and reads the stream's
// events in the background; hdr is a list of header name, value pairs.
func openStream(t *testing.T, addr string, hdr ...string) *sseClient {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/api/v1/stream", nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Fatalf("stream: %s %v", resp.Status, resp.Header)
	}
	c := &sseClient{conn: conn, header: resp.Header, events: make(chan sseEvent, 100)}
	go func() {
		defer close(c.events)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				c.events <- ev
				ev = sseEvent{}
				continue
			}
			if rest, ok := strings.CutPrefix(line, ":"); ok {
				ev.comments = append(ev.comments, strings.TrimSpace(rest))
				continue
			}
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			switch k {
			case "id":
				ev.id = v
			case "event":
				ev.name = v
			case "data":
				ev.data += v
			case "retry":
				ev.retry = v
			}
		}
	}()
	t.Cleanup(c.close)
	return c
}

// close drops the connection and waits for the reader to stop.
func (c *sseClient) close() {
	c.conn.Close()
	for range c.events {
	}
}

// waitFor reads events until one satisfies ok, or fails after timeout.
func (c *sseClient) waitFor(t *testing.T, timeout time.Duration, what string, ok func(sseEvent) bool) sseEvent {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, open := <-c.events:
			if !open {
				t.Fatalf("stream ended while waiting for %s; read %+v", what, c.seen)
			}
			c.seen = append(c.seen, ev)
			if ok(ev) {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s within %v; read %+v", what, timeout, c.seen)
		}
	}
}

// quiet reads events for d and returns them.
func (c *sseClient) quiet(d time.Duration) []sseEvent {
	var out []sseEvent
	deadline := time.After(d)
	for {
		select {
		case ev, open := <-c.events:
			if !open {
				return out
			}
			c.seen = append(c.seen, ev)
			out = append(out, ev)
		case <-deadline:
			return out
		}
	}
}

func named(name string) func(sseEvent) bool {
	return func(ev sseEvent) bool { return ev.name == name }
}

// streamTrend is the data of a trending event.
type streamTrend struct {
	Window string `json:"window"`
	Items  []struct {
		Rank    int    `json:"rank"`
		StoryID string `json:"story_id"`
		Count   uint64 `json:"count"`
	} `json:"items"`
	AsOf int64 `json:"as_of"`
}

// streamBreaking is the data of a breaking event.
type streamBreaking struct {
	Stories []struct {
		ID       string `json:"id"`
		Breaking bool   `json:"breaking"`
		Articles int    `json:"article_count"`
	} `json:"stories"`
	AsOf int64 `json:"as_of"`
}

func decodeEvent[T any](t *testing.T, ev sseEvent) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
		t.Fatalf("event %s: %v: %s", ev.name, err, ev.data)
	}
	return v
}

// streamNode starts a node with the article pipeline on a TCP listener,
// streams computed every 20ms with heartbeats every 200ms, and stories
// breaking at more than 0.1 articles a minute from 3 sources (the four
// quake reports of the fixture, no other story).
func streamNode(t *testing.T, q query.Options) (*testNode, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	q.StreamInterval, q.StreamHeartbeat = 20*time.Millisecond, 200*time.Millisecond
	n := newTestNode(t, withArticles(), withQuery(q), func(o *nodeOptions) {
		o.listener = ln
		o.stories.Builder.Breaking = story.BreakingOptions{Window: 30 * time.Minute, Rate: 0.1, Sources: 3}
	})
	return n, ln.Addr().String()
}

// TestStream: a page connected to /api/v1/stream gets the trending answer
// by story at once and again whenever shares change it, each story that
// becomes breaking once, heartbeats, and the end of the stream when the
// server shuts down; a client that goes away frees its stream at once.
//
// It is one scenario checked step by step (cyclomatic 36): the steps
// depend on each other's state, so they stay in order in one function.
func TestStream(t *testing.T) {
	n, addr := streamNode(t, query.Options{})
	c := openStream(t, addr)
	first := c.waitFor(t, 5*time.Second, "the first event", func(sseEvent) bool { return true })
	if first.retry != "5000" {
		t.Fatalf("first block %+v, want a retry hint", first)
	}
	ev := c.waitFor(t, 5*time.Second, "the current trending", named("trending"))
	if tr := decodeEvent[streamTrend](t, ev); tr.Window != "1h" || len(tr.Items) != 0 || ev.id == "" {
		t.Fatalf("first trending %+v (id %q)", tr, ev.id)
	}

	// Four outlets report the quake within 15 minutes: it breaks.
	// (The ECB report, at minute 20, keeps it within the breaking window.)
	ingestFixture(t, n, append(articleFixture[:4:4], articleFixture[4]))
	ev = c.waitFor(t, 10*time.Second, "a breaking event", named("breaking"))
	br := decodeEvent[streamBreaking](t, ev)
	if len(br.Stories) != 1 || !br.Stories[0].Breaking || br.Stories[0].Articles != 4 || br.AsOf == 0 {
		t.Fatalf("breaking %s", ev.data)
	}
	quake := br.Stories[0].ID

	// Shares of two quake reports: the story leads the trending answer,
	// their shares summed, as /api/v1/trending?by=story says.
	ts := n.clock.ms(0)
	postShares(t, n, "s", canonID(t, articleFixture[0].url), 3, canonID(t, articleFixture[1].url), 2)
	ev = c.waitFor(t, 10*time.Second, "the quake trending", func(ev sseEvent) bool {
		if ev.name != "trending" {
			return false
		}
		tr := decodeEvent[streamTrend](t, ev)
		return len(tr.Items) == 1 && tr.Items[0].StoryID == quake && tr.Items[0].Count == 5
	})
	r := n.get(t, "/api/v1/trending?by=story&window=1h&k=10")
	var want streamTrend
	if err := json.Unmarshal(r.body, &want); err != nil || fmt.Sprint(want) != fmt.Sprint(decodeEvent[streamTrend](t, ev)) {
		t.Fatalf("stream %s, endpoint %s", ev.data, r.body)
	}
	lastID := ev.id

	// A share of another article: a new answer. Nothing else changes, so
	// nothing else is sent (but that the article entered the top: a
	// trending.entered event), and heartbeats keep the stream open.
	ecb := canonID(t, articleFixture[4].url)
	if r := n.post(t, pathShare, share("z1", ecb, ts)); r.status != fasthttp.StatusAccepted {
		t.Fatalf("share: %s", r)
	}
	c.waitFor(t, 10*time.Second, "the ECB trending", func(ev sseEvent) bool {
		return ev.name == "trending" && len(decodeEvent[streamTrend](t, ev).Items) == 2
	})
	var pings, trends int
	for _, ev := range c.quiet(700 * time.Millisecond) {
		switch {
		case len(ev.comments) == 1 && ev.comments[0] == "ping" && ev.name == "":
			pings++
		case ev.name == "trending":
			trends++
		case ev.name == "trending.entered":
		default:
			t.Errorf("unexpected %+v", ev)
		}
	}
	if pings < 2 || trends > 0 {
		t.Errorf("%d heartbeats, %d trending events in 700ms of quiet; want heartbeats every 200ms, no event", pings, trends)
	}
	breaking := 0
	for _, ev := range c.seen {
		if ev.name == "breaking" {
			breaking++
		}
	}
	if breaking != 1 {
		t.Errorf("%d breaking events, want 1", breaking)
	}

	// A reconnection with the last id gets only what came after it (the
	// ECB share, and its article entering the top); one with an id of
	// another process the whole state.
	again := openStream(t, addr, "Last-Event-ID", lastID)
	again.waitFor(t, 5*time.Second, "the newer trending", named("trending"))
	for _, ev := range again.quiet(300 * time.Millisecond) {
		if ev.name != "" && ev.name != "trending.entered" {
			t.Errorf("after Last-Event-ID: %+v", ev)
		}
	}
	fresh := openStream(t, addr, "Last-Event-ID", "elsewhere.99")
	fresh.waitFor(t, 5*time.Second, "the current trending", named("trending"))
	fresh.waitFor(t, 5*time.Second, "the quake again", named("breaking"))
	testutil.Eventually(t, 5*time.Second, func() error {
		if got := n.metrics(t)["newsflow_http_streams_open"]; got != 3 {
			return fmt.Errorf("%v streams open, want 3", got)
		}
		return nil
	})
	// A client that goes away frees its stream without waiting for a
	// write to fail.
	fresh.close()
	again.close()
	testutil.Eventually(t, 2*time.Second, func() error {
		if got := n.metrics(t)["newsflow_http_streams_open"]; got != 1 {
			return fmt.Errorf("%v streams open, want 1", got)
		}
		return nil
	})

	// Shutdown ends the stream, and the server drains at once.
	start := time.Now()
	n.stop()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stop took %v", d)
	}
	select {
	case _, open := <-c.events:
		for open {
			_, open = <-c.events
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream outlived the server")
	}
}

// TestStreamLimit: beyond MaxStreams a stream is refused with 503 and a
// JSON error, until one closes.
func TestStreamLimit(t *testing.T) {
	n, addr := streamNode(t, query.Options{MaxStreams: 2})
	a := openStream(t, addr)
	openStream(t, addr)
	r := n.get(t, "/api/v1/stream")
	wantError(t, r, fasthttp.StatusServiceUnavailable, "too many open streams", "at most 2")
	if r.header["Retry-After"] == "" {
		t.Errorf("no Retry-After: %v", r.header)
	}
	a.close()
	testutil.Eventually(t, 5*time.Second, func() error {
		if got := n.metrics(t)["newsflow_http_streams_open"]; got != 1 {
			return fmt.Errorf("%v streams open", got)
		}
		return nil
	})
	openStream(t, addr).waitFor(t, 5*time.Second, "trending", named("trending"))
	if got := n.metrics(t)[`newsflow_http_requests_total{code="503",route="stream"}`]; got != 1 {
		t.Errorf("refused streams counted %v", got)
	}
}

// TestClusterStream: a stream on a node that owns neither the story
// partition nor every share's partition carries the cluster's answer, with
// the stories named by their owner: the same as the story owner's
// /api/v1/trending?by=story, and the breaking stories from there.
func TestClusterStream(t *testing.T) {
	q := query.Options{PeerTimeout: time.Second, StreamInterval: 50 * time.Millisecond, StreamHeartbeat: time.Second}
	c := newClusterNet(t, map[string][]int32{"a": {0, 2}, "b": {1, 3}}, withQuery(q), func(o *nodeOptions) {
		o.stories.Builder.Breaking = story.BreakingOptions{Window: 30 * time.Minute, Rate: 0.1, Sources: 3}
	})
	a, b := c.node("a"), c.node("b")
	arts := articleFixture[:5] // the quake (breaking) and the ECB
	ingestFixture(t, a, arts)
	var onA, onB string // a quake report in a's partitions, the ECB in b's
	for _, f := range arts[:4] {
		if id := canonID(t, f.url); c.ownerOf(id) == "a" {
			onA = id
		}
	}
	if onB = canonID(t, arts[4].url); onA == "" || c.ownerOf(onB) != "b" {
		t.Fatalf("fixture: quake report on a %q, ECB on %s", onA, c.ownerOf(onB))
	}
	c.mu.Lock()
	bAddr := c.state.Members["b"].HTTPAddr
	c.mu.Unlock()
	s := openStream(t, bAddr)
	br := decodeEvent[streamBreaking](t, s.waitFor(t, 10*time.Second, "the quake breaking", named("breaking")))
	if len(br.Stories) != 1 || br.Stories[0].Articles != 4 {
		t.Fatalf("breaking through b: %+v", br)
	}

	ts := c.clock.ms(0)
	if r := b.post(t, pathBatch, strings.Join([]string{share("c1", onA, ts), share("c2", onA, ts), share("c3", onB, ts)}, "\n")); r.status != fasthttp.StatusAccepted {
		t.Fatalf("shares: %s", r)
	}
	// (A view may hold a partition between two shares of one batch: wait
	// for both quake shares.)
	ev := s.waitFor(t, 20*time.Second, "the cluster's trending", func(ev sseEvent) bool {
		if ev.name != "trending" {
			return false
		}
		tr := decodeEvent[streamTrend](t, ev)
		return len(tr.Items) == 2 && tr.Items[0].Count == 2
	})
	got := decodeEvent[streamTrend](t, ev)
	if got.Items[0].StoryID != br.Stories[0].ID || got.Items[0].Count != 2 || got.Items[1].StoryID == "" || got.Items[1].Count != 1 {
		t.Fatalf("trending through b: %s", ev.data)
	}
	var want streamTrend
	if r := a.get(t, "/api/v1/trending?by=story&window=1h&k=10"); json.Unmarshal(r.body, &want) != nil || fmt.Sprint(want) != fmt.Sprint(got) {
		t.Fatalf("stream through b %s, the story owner's answer %s", ev.data, r.body)
	}
	// Asked of b, trending by story is routed to the story owner: the
	// same stories, titled, not b's bare article counts.
	var viaB streamTrend
	if r := b.get(t, "/api/v1/trending?by=story&window=1h&k=10"); json.Unmarshal(r.body, &viaB) != nil || fmt.Sprint(viaB) != fmt.Sprint(want) {
		t.Fatalf("by=story through b %s, the story owner's answer %+v", r.body, want)
	}
}
