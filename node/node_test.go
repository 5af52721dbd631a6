package node

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/operators/readstate"
)

// A node asked for an operator it does not have refuses to open, rather
// than run without it.
func TestOpenUnknownOperator(t *testing.T) {
	cfg := Default()
	cfg.DataDir = t.TempDir()
	_, err := Open(context.Background(), cfg, Options{Operators: []string{"trending", "storys"}})
	if err == nil || !strings.Contains(err.Error(), `operator "storys"`) {
		t.Fatalf("Open with an unknown operator: %v", err)
	}
}

// A node running a subset registers exactly it, and Deps leaves the
// operators it does not run nil.
func TestOpenOperatorSubset(t *testing.T) {
	cfg := Default()
	cfg.DataDir, cfg.Crawl.Enabled = t.TempDir(), false
	n, err := Open(context.Background(), cfg, Options{Operators: []string{"trending"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	}()
	var stages []string
	for _, s := range n.Engine().Topology() {
		if s.Kind == "operator" {
			stages = append(stages, s.Name)
		}
	}
	if strings.Join(stages, ",") != "trending" {
		t.Errorf("operators %v, want trending alone", stages)
	}
	d := n.Deps()
	if d.Trending == nil || d.Stories != nil || d.Articles != nil || d.Search != nil || d.Interest != nil {
		t.Errorf("deps %+v", d)
	}
}

// forgetReads deletes the read marks on articles older than both
// retention spans, for every reader, and nothing when either keeps
// everything.
func TestForgetReads(t *testing.T) {
	ctx := context.Background()
	cfg := Default()
	cfg.DataDir, cfg.Crawl.Enabled = t.TempDir(), false
	cfg.Auth.BcryptCost, cfg.Auth.AllowWeakCostForTests = 4, true
	n, err := Open(ctx, cfg, Options{Operators: []string{"trending"}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	now := time.Now()
	day := 24 * time.Hour
	reads := n.readStore()
	for _, name := range []string{"ann", "bob"} {
		u, err := n.auth.Register(ctx, name, "a long password")
		if err != nil {
			t.Fatal(err)
		}
		err = reads.MarkArticles(ctx, u.ID, true,
			readstate.Article{ID: "old", Published: now.Add(-100 * day).UnixMilli()},
			readstate.Article{ID: "new", Published: now.Add(-80 * day).UnixMilli()})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Defaults: articles 30 days, history 90 days: marks past 90 days go.
	if got, err := n.forgetReads(ctx, now); err != nil || got != 2 {
		t.Fatalf("forgetReads = %d, %v; want the 2 marks older than 90 days", got, err)
	}
	n.cfg.Retention.History = -1
	if got, err := n.forgetReads(ctx, now.Add(365*day)); err != nil || got != 0 {
		t.Fatalf("with history kept forever, forgetReads = %d, %v", got, err)
	}
}

// TestReadsMoveOutOfMeta: a data directory whose readers' state is in the
// metadata store, as releases before the readstate operator kept it, is
// moved into the operator when the node runs: the marks and stars read the
// same through the node's store, the metadata store holds none of them
// any more, and the node logs how many it moved.
func TestReadsMoveOutOfMeta(t *testing.T) {
	ctx := context.Background()
	cfg := Default()
	cfg.DataDir, cfg.Crawl.Enabled, cfg.Log.Partitions = t.TempDir(), false, 2
	cfg.Auth.BcryptCost, cfg.Auth.AllowWeakCostForTests = 4, true
	var logs lockedBuffer
	logger, err := newLogger(&logs, LoggingConfig{Level: "info", Format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := Open(ctx, cfg, Options{Logger: logger, Operators: []string{"trending", "readstate"}})
	if err != nil {
		t.Fatal(err)
	}
	u, err := n.auth.Register(ctx, "ann", "a long password")
	if err != nil {
		t.Fatal(err)
	}
	old := readstate.New(n.auth.Meta(), nil)
	if err := old.MarkArticles(ctx, u.ID, true, readstate.Article{ID: "a1", Published: 1}, readstate.Article{ID: "a2", Published: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := old.SetStar(ctx, u.ID, readstate.Article{ID: "a3", Published: 3}, true); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- n.Run(rctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("node Run: %v", err)
		}
		n.Close()
	}()
	testutil.Eventually(t, 20*time.Second, func() error {
		if !strings.Contains(logs.String(), "moved readers' state") {
			return errors.New("the node did not say it moved the readers' state")
		}
		return nil
	})
	st, err := n.readStore().Load(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	stars, err := n.readStore().Stars(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Starred("a3") || len(stars) != 1 {
		t.Errorf("after the move: starred a3 %v, stars %v", st.Starred("a3"), stars)
	}
	left, err := old.Load(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if left.Starred("a3") {
		t.Error("the metadata store still holds the star")
	}
	if !strings.Contains(logs.String(), `"keys":3`) {
		t.Errorf("log does not say 3 keys moved:\n%s", logs.String())
	}
}
