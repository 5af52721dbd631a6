package node

import (
	"context"
	"strings"
	"testing"
	"time"

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
