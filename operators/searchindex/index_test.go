package searchindex

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Bleve's package-level analysis queue keeps its workers for the life
	// of the process.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"))
}

func TestOptionsValidate(t *testing.T) {
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("zero options: %v", err)
	}
	if err := DefaultOptions().Validate(); err != nil {
		t.Errorf("default options: %v", err)
	}
	for _, o := range []Options{{MaxQueryBytes: -1}, {FragmentSize: -1}} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v: no error", o)
		}
		if _, err := Open(t.TempDir(), o); err == nil {
			t.Errorf("open with %+v: no error", o)
		}
	}
}

func TestUpsertReplaces(t *testing.T) {
	ix, _ := newTestIndex(t, fixture)
	d := Doc{ID: "u1", Title: "Zebras escape from the zoo", Summary: "Keepers chased them.", Topics: []string{"odd"}, SourceID: "bbc", PublishedAt: at(40)}
	if err := ix.Apply([]Doc{d}, nil); err != nil {
		t.Fatal(err)
	}
	if res := mustSearch(t, ix, Request{Query: "zebra"}); !slices.Equal(ids(res.Hits), []string{"u1"}) {
		t.Fatalf("before edit: %v", ids(res.Hits))
	}
	n0 := count(t, ix)

	d.Title, d.Summary, d.Topics, d.SourceID = "Giraffes return to the zoo", "All is calm.", []string{"animals"}, "ft"
	if err := ix.Apply([]Doc{d}, nil); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string][]string{"zebra": nil, "keepers": nil, "giraffe": {"u1"}, "calm": {"u1"}} {
		if got := ids(mustSearch(t, ix, Request{Query: q}).Hits); !slices.Equal(got, want) {
			t.Errorf("after edit, %q: %v, want %v", q, got, want)
		}
	}
	// Keyword fields are replaced too.
	for _, tc := range []struct {
		r    Request
		want []string
	}{{Request{Topic: "odd"}, nil}, {Request{Topic: "animals"}, []string{"u1"}}, {Request{Topic: "animals", Source: "ft"}, []string{"u1"}}} {
		res := mustSearch(t, ix, tc.r)
		if got := ids(res.Hits); !slices.Equal(got, tc.want) || res.Total != uint64(len(tc.want)) {
			t.Errorf("after edit, %+v: %v total %d, want %v", tc.r, got, res.Total, tc.want)
		}
	}
	if n := count(t, ix); n != n0 {
		t.Errorf("count %d after upsert, want %d", n, n0)
	}

	// Within one batch the last upsert of an id wins.
	d2 := d
	d2.Title = "Penguins"
	d3 := d
	d3.Title = "Seals"
	if err := ix.Apply([]Doc{d2, d3}, nil); err != nil {
		t.Fatal(err)
	}
	if got := ids(mustSearch(t, ix, Request{Query: "penguin"}).Hits); len(got) != 0 {
		t.Fatalf("earlier upsert of the batch found: %v", got)
	}
	if got := mustSearch(t, ix, Request{Query: "seal"}).Hits; len(got) != 1 || got[0].Title != "Seals" {
		t.Errorf("hits %+v, want the last upsert", got)
	}
}

func TestDelete(t *testing.T) {
	ix, _ := newTestIndex(t, fixture)
	n0 := count(t, ix)
	if err := ix.Apply(nil, []string{"a03", "a01", "missing"}); err != nil {
		t.Fatal(err)
	}
	if got := ids(mustSearch(t, ix, Request{Query: "inflation"}).Hits); slices.Contains(got, "a01") || slices.Contains(got, "a03") || len(got) == 0 {
		t.Errorf("after delete: %v", got)
	}
	if n := count(t, ix); n != n0-2 {
		t.Errorf("count %d, want %d", n, n0-2)
	}
	// Totals (counted from the term's postings) leave deleted documents out.
	left := slices.DeleteFunc(slices.Clone(fixture), func(d Doc) bool { return d.ID == "a01" || d.ID == "a03" })
	for _, r := range []Request{{Topic: "economy"}, {Source: "bbc"}, {Topic: "economy", Source: "reuters"}} {
		if res, want := mustSearch(t, ix, r), expected(left, r); res.Total != uint64(len(want)) || !slices.Equal(ids(res.Hits), want) {
			t.Errorf("%+v after delete: %v total %d, want %v", r, ids(res.Hits), res.Total, want)
		}
	}
	// Upserts and deletes in one batch; the delete of an id wins.
	err := ix.Apply([]Doc{{ID: "n1", Title: "fresh inflation news", PublishedAt: at(50)}, {ID: "a02", Title: "gone", PublishedAt: at(2)}}, []string{"a02"})
	if err != nil {
		t.Fatal(err)
	}
	got := ids(mustSearch(t, ix, Request{Query: "inflation"}).Hits)
	if !slices.Contains(got, "n1") || slices.Contains(got, "a02") {
		t.Errorf("after mixed batch: %v", got)
	}
	if n := count(t, ix); n != n0-2 {
		t.Errorf("count %d, want %d", n, n0-2)
	}
}

func TestApplyInvalid(t *testing.T) {
	ix, _ := newTestIndex(t, fixture)
	n0 := count(t, ix)
	for name, tc := range map[string]struct {
		up  []Doc
		del []string
	}{
		"empty id":      {up: []Doc{{ID: "ok1", Title: "x"}, {Title: "no id"}}},
		"long id":       {up: []Doc{{ID: strings.Repeat("f", maxIDBytes+1)}}},
		"bad utf8 id":   {up: []Doc{{ID: "\xff"}}},
		"empty delete":  {del: []string{""}},
		"long delete":   {up: []Doc{{ID: "ok2"}}, del: []string{strings.Repeat("f", maxIDBytes+1)}},
		"bad utf8 dele": {del: []string{"a\xfe"}},
	} {
		if err := ix.Apply(tc.up, tc.del); !errors.Is(err, ErrInvalidDoc) {
			t.Errorf("%s: error %v, want ErrInvalidDoc", name, err)
		}
	}
	if n := count(t, ix); n != n0 {
		t.Errorf("count %d after refused batches, want %d", n, n0)
	}
	if err := ix.Apply(nil, nil); err != nil {
		t.Errorf("empty batch: %v", err)
	}
}

func TestTextEdgeCases(t *testing.T) {
	ix, _ := newTestIndex(t, []Doc{
		{ID: "bad", Title: "broken \xff\xfe encoding headline", PublishedAt: at(1)},
		{ID: "long", Title: "long", Content: strings.Repeat("filler ", 100) + "needle", PublishedAt: at(2)},
		{ID: "nodate", Title: "undated piece"},
		{ID: "ancient", Title: "ancient piece", PublishedAt: time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{ID: "future", Title: "future piece", PublishedAt: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)},
	}, Options{MaxContentBytes: 200})
	if got := ids(mustSearch(t, ix, Request{Query: "encoding"}).Hits); !slices.Equal(got, []string{"bad"}) {
		t.Errorf("invalid UTF-8 title: %v", got)
	}
	// Content past MaxContentBytes is not indexed.
	if got := ids(mustSearch(t, ix, Request{Query: "needle"}).Hits); len(got) != 0 {
		t.Errorf("truncated content matched: %v", got)
	}
	if got := ids(mustSearch(t, ix, Request{Query: "filler"}).Hits); !slices.Equal(got, []string{"long"}) {
		t.Errorf("content prefix: %v", got)
	}
	// Newest first: clamped future, then dated, then the epoch, then the
	// clamped past.
	res := mustSearch(t, ix, Request{})
	if got := ids(res.Hits); !slices.Equal(got, []string{"future", "long", "bad", "nodate", "ancient"}) {
		t.Errorf("newest first: %v", got)
	}
	if !res.Hits[3].PublishedAt.Equal(time.Unix(0, 0)) || !res.Hits[0].PublishedAt.Equal(maxTime) || !res.Hits[4].PublishedAt.Equal(minTime) {
		t.Errorf("published times %v %v %v", res.Hits[0].PublishedAt, res.Hits[3].PublishedAt, res.Hits[4].PublishedAt)
	}
	// Pages through the extremes.
	all := searchAll(t, ix, Request{Limit: 1})
	if !slices.Equal(ids(all), ids(res.Hits)) {
		t.Errorf("pages %v, want %v", ids(all), ids(res.Hits))
	}
	// A short range across Unix time 0 (once pathologically slow in Bleve).
	start := time.Now()
	res = mustSearch(t, ix, Request{From: time.Unix(-90, 0), To: time.Unix(3600, 0)})
	if got := ids(res.Hits); !slices.Equal(got, []string{"nodate"}) {
		t.Errorf("range across the epoch: %v", got)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("range across the epoch took %v", d)
	}
}

func TestContentDisabled(t *testing.T) {
	ix, _ := newTestIndex(t, fixture, Options{MaxContentBytes: -1})
	if got := ids(mustSearch(t, ix, Request{Query: "zeppelin"}).Hits); len(got) != 0 {
		t.Errorf("content indexed: %v", got)
	}
}

func TestPersistence(t *testing.T) {
	ix, dir := newTestIndex(t, nil)
	if err := ix.Apply(fixture, nil); err != nil {
		t.Fatal(err)
	}
	if err := ix.Apply(nil, []string{"a05"}); err != nil {
		t.Fatal(err)
	}
	want := ids(mustSearch(t, ix, Request{Query: "record inflation", Limit: MaxLimit}).Hits)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Search(context.Background(), Request{}); !errors.Is(err, ErrClosed) {
		t.Errorf("search after close: %v", err)
	}
	if err := ix.Apply(fixture[:1], nil); !errors.Is(err, ErrClosed) {
		t.Errorf("apply after close: %v", err)
	}
	if _, err := ix.Count(); !errors.Is(err, ErrClosed) {
		t.Errorf("count after close: %v", err)
	}
	if err := ix.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}

	ix2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix2.Close()
	if n := count(t, ix2); n != uint64(len(fixture)-1) {
		t.Errorf("count after reopen %d, want %d", n, len(fixture)-1)
	}
	if got := ids(mustSearch(t, ix2, Request{Query: "record inflation", Limit: MaxLimit}).Hits); !slices.Equal(got, want) {
		t.Errorf("after reopen %v, want %v", got, want)
	}
	// Newest first finds everything after a restart too.
	left := slices.DeleteFunc(slices.Clone(fixture), func(d Doc) bool { return d.ID == "a05" })
	if got := ids(searchAll(t, ix2, Request{Limit: 3})); !slices.Equal(got, expected(left, Request{})) {
		t.Errorf("newest after reopen %v", got)
	}
	if err := ix2.Apply([]Doc{{ID: "z", Title: "after restart", PublishedAt: at(99)}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := ids(mustSearch(t, ix2, Request{Query: "restart"}).Hits); !slices.Equal(got, []string{"z"}) {
		t.Errorf("apply after reopen: %v", got)
	}
}

func TestDestroy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p0")
	ix, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Apply(fixture, nil); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Destroy(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dir after destroy: %v", err)
	}
	if err := Destroy(dir); err != nil {
		t.Errorf("destroy missing: %v", err)
	}
	ix, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, ix); n != 0 {
		t.Errorf("count after destroy %d", n)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}

	// Directories that are not indexes are left alone.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "precious"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Destroy(other); err == nil {
		t.Error("destroyed a directory that is not an index")
	}
	if _, err := Open(other, Options{}); err == nil {
		t.Error("opened a directory that is not an index")
	}
	if _, err := os.Stat(filepath.Join(other, "precious")); err != nil {
		t.Error(err)
	}
}

func TestOpenRecoversInterruptedCreate(t *testing.T) {
	dir := t.TempDir()
	ix, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	// Without its marker the index counts as never created.
	if err := os.Remove(filepath.Join(dir, markerFile)); err != nil {
		t.Fatal(err)
	}
	ix = mustOpen(t, dir)
	if err := ix.Apply(fixture[:2], nil); err != nil {
		t.Fatal(err)
	}
	if n := count(t, ix); n != 2 {
		t.Errorf("count %d", n)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}

	// Another schema version is refused.
	if err := os.WriteFile(filepath.Join(dir, markerFile), []byte(`{"schema":99}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrIncompatible) {
		t.Errorf("open other schema: %v, want ErrIncompatible", err)
	}
}

func mustOpen(t *testing.T, dir string) *Index {
	t.Helper()
	ix, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func count(t testing.TB, ix *Index) uint64 {
	t.Helper()
	n, err := ix.Count()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCrash kills a process that is applying batches (kill -9, no Close)
// and checks, after reopening, that every batch it reported applied is
// there and the batch in flight is there whole or not at all.
func TestCrash(t *testing.T) {
	const batchSize = 40
	if dir := os.Getenv("NEWSFLOW_SEARCH_CRASH_DIR"); dir != "" {
		crashChild(dir, batchSize)
		return
	}
	if testing.Short() {
		t.Skip("crash test runs a subprocess")
	}
	dir := filepath.Join(t.TempDir(), "idx")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrash$")
	cmd.Env = append(os.Environ(), "NEWSFLOW_SEARCH_CRASH_DIR="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	applied := -1
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if k, ok := strings.CutPrefix(sc.Text(), "applied "); ok {
			applied, _ = strconv.Atoi(k)
			if applied >= 4 {
				break
			}
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if applied < 4 {
		t.Fatalf("child reported %d batches before dying", applied+1)
	}

	ix, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	n := count(t, ix)
	for b := 0; ; b++ {
		res := mustSearch(t, ix, Request{Topic: fmt.Sprintf("batch%d", b), Limit: 1})
		switch {
		case b <= applied && res.Total != batchSize:
			t.Fatalf("batch %d, reported applied, has %d of %d docs", b, res.Total, batchSize)
		case b > applied && res.Total != 0 && res.Total != batchSize:
			t.Fatalf("batch %d in flight has %d of %d docs", b, res.Total, batchSize)
		}
		if res.Total == 0 {
			if n != uint64(b*batchSize) {
				t.Errorf("count %d, want %d", n, b*batchSize)
			}
			t.Logf("killed after %d batches reported, %d found", applied+1, b)
			return
		}
	}
}

// crashChild applies batches until it is killed, reporting each.
func crashChild(dir string, batchSize int) {
	ix, err := Open(dir, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for b := 0; b < 10000; b++ {
		docs := make([]Doc, batchSize)
		for i := range docs {
			docs[i] = Doc{
				ID:          fmt.Sprintf("b%d-%d", b, i),
				Title:       fmt.Sprintf("batch %d document %d about markets", b, i),
				Summary:     strings.Repeat("summary text ", 10),
				Topics:      []string{fmt.Sprintf("batch%d", b)},
				PublishedAt: at(b),
			}
		}
		if err := ix.Apply(docs, nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("applied %d\n", b)
	}
	os.Exit(3) // never closes the index
}

// TestPublishedBefore: the ids of exactly the documents published before
// a time, hours aligned or not, limited, and none before the first.
func TestPublishedBefore(t *testing.T) {
	ix, _ := newTestIndex(t, fixture)
	if got := ix.Newest(); !got.Equal(at(30)) {
		t.Errorf("newest %s, want %s", got, at(30))
	}
	for _, before := range []time.Time{at(1), at(5), at(5).Add(time.Minute), at(28), at(28).Add(time.Nanosecond), at(31)} {
		var want []string
		for _, d := range fixture {
			if d.PublishedAt.Before(before) {
				want = append(want, d.ID)
			}
		}
		got, more, err := ix.PublishedBefore(context.Background(), before, 1000)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) || more {
			t.Errorf("before %s: %v (more %v), want %v", before, got, more, want)
		}
	}
	got, more, err := ix.PublishedBefore(context.Background(), at(10), 3)
	if err != nil || len(got) != 3 || !more {
		t.Errorf("limit 3: %v, more %v, %v", got, more, err)
	}
	empty, _ := newTestIndex(t, nil)
	if !empty.Newest().IsZero() {
		t.Errorf("newest of an empty index: %s", empty.Newest())
	}
}

// TestSeenBefore: retention's query finds the documents first seen before
// a time, by their first-seen time whatever their publish date, and the
// documents without one (indexed before first-seen times) by their publish
// date; NewestSeen and the hits' FirstSeen follow the same rule, also
// after the index is opened again.
func TestSeenBefore(t *testing.T) {
	years := 3 * 365 * 24 * time.Hour
	docs := []Doc{
		{ID: "old-news", Title: "Archive", PublishedAt: at(1).Add(-years), FirstSeen: at(10)},
		{ID: "recent", Title: "Recent", PublishedAt: at(9), FirstSeen: at(12)},
		{ID: "legacy-old", Title: "Legacy", PublishedAt: at(2)},
		{ID: "legacy-new", Title: "Legacy", PublishedAt: at(20)},
	}
	ix, dir := newTestIndex(t, docs)
	check := func(ix *Index) {
		t.Helper()
		for _, tc := range []struct {
			before time.Time
			want   []string
		}{
			{at(2), nil},
			{at(3), []string{"legacy-old"}},
			{at(10).Add(time.Nanosecond), []string{"legacy-old", "old-news"}},
			{at(13), []string{"legacy-old", "old-news", "recent"}},
			{at(21), []string{"legacy-new", "legacy-old", "old-news", "recent"}},
		} {
			got, more, err := ix.SeenBefore(context.Background(), tc.before, 100)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) || more {
				t.Errorf("seen before %s: %v (more %v), want %v", tc.before, got, more, tc.want)
			}
		}
		if got := ix.NewestSeen(); !got.Equal(at(20)) {
			t.Errorf("newest seen %s, want %s (legacy-new's publish time)", got, at(20))
		}
		res, err := ix.Search(context.Background(), Request{Query: "archive"})
		if err != nil || len(res.Hits) != 1 {
			t.Fatalf("search: %+v, %v", res, err)
		}
		if h := res.Hits[0]; !h.FirstSeen.Equal(at(10)) || !h.PublishedAt.Equal(at(1).Add(-years)) {
			t.Errorf("hit first seen %s, published %s", h.FirstSeen, h.PublishedAt)
		}
	}
	check(ix)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	again := mustOpen(t, dir)
	defer again.Close()
	check(again)
}

// A document's trace context is stored, never indexed, and comes back on
// its hits by every search path, but not in their JSON.
func TestTraceParentStored(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ix, _ := newTestIndex(t, []Doc{
		{ID: "traced", Title: "Otters return to the river", PublishedAt: at(2), TraceParent: tp},
		{ID: "plain", Title: "Otters seen upstream", PublishedAt: at(1)},
	})
	check := func(what string, hits []Hit) {
		t.Helper()
		got := map[string]string{}
		for _, h := range hits {
			got[h.ID] = h.TraceParent
		}
		if len(got) != 2 || got["traced"] != tp || got["plain"] != "" {
			t.Errorf("%s: trace contexts %v", what, got)
		}
	}
	check("relevance", mustSearch(t, ix, Request{Query: "otters"}).Hits)
	check("newest", mustSearch(t, ix, Request{}).Hits)
	ix.bleveOnly = true
	check("relevance, Bleve's search", mustSearch(t, ix, Request{Query: "otters"}).Hits)
	if hits := mustSearch(t, ix, Request{Query: "4bf92f3577b34da6a3ce929d0e0e4736"}).Hits; len(hits) != 0 {
		t.Errorf("the trace id is searchable: %v", ids(hits))
	}
	b, err := json.Marshal(mustSearch(t, ix, Request{}).Hits[0])
	if err != nil || strings.Contains(string(b), "4bf92f") {
		t.Errorf("hit JSON %s, %v", b, err)
	}
}

// TestSeenBeforeLegacyEnds: documents without a first-seen time make
// SeenBefore look for them by their published time only until retention
// has deleted the last of them; the index remembers that across opens.
func TestSeenBeforeLegacyEnds(t *testing.T) {
	ix, dir := newTestIndex(t, []Doc{
		{ID: "legacy", Title: "Legacy", PublishedAt: at(2)},
		{ID: "new", Title: "New", PublishedAt: at(1), FirstSeen: at(30)},
	})
	if ix.legacyMax.Load() != at(2).UnixNano() {
		t.Fatalf("legacy max %d, want %d", ix.legacyMax.Load(), at(2).UnixNano())
	}
	ids, _, err := ix.SeenBefore(context.Background(), at(10), 10)
	if err != nil || !slices.Equal(ids, []string{"legacy"}) {
		t.Fatalf("seen before: %v, %v", ids, err)
	}
	if err := ix.Apply(nil, ids); err != nil {
		t.Fatal(err)
	}
	if got := ix.legacyMax.Load(); got != math.MinInt64 {
		t.Errorf("legacy max %d after the last legacy document went", got)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	again := mustOpen(t, dir)
	defer again.Close()
	if got := again.legacyMax.Load(); got != math.MinInt64 {
		t.Errorf("legacy max %d after reopening", got)
	}
	// A document given no first-seen time makes it legacy again.
	if err := again.Apply([]Doc{{ID: "bare", Title: "Bare", PublishedAt: at(5)}}, nil); err != nil {
		t.Fatal(err)
	}
	if ids, _, err := again.SeenBefore(context.Background(), at(6), 10); err != nil || !slices.Equal(ids, []string{"bare"}) {
		t.Errorf("seen before: %v, %v", ids, err)
	}
}
