package story

import (
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/newsflow/newsflow/state"
	"github.com/newsflow/newsflow/state/statetest"
)

// checkNums checks the n index against the article records: every
// article's number names it, and every n entry names an article of that
// number (or one applied again since, under a later number: none here
// once retention ran). It returns how many articles there are.
func checkNums(t *testing.T, r state.Reader) int {
	t.Helper()
	arts := 0
	err := r.Scan([]byte("a"), []byte("b"), func(_, v []byte) error {
		var ar ArticleRecord
		if err := json.Unmarshal(v, &ar); err != nil {
			return err
		}
		arts++
		id, ok, err := r.Get(numKey(ar.Num))
		if err != nil || !ok || string(id) != ar.ID {
			t.Errorf("article %s number %d: n entry %q %v %v", ar.ID, ar.Num, id, ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Scan([]byte("n"), []byte("o"), func(k, id []byte) error {
		num := binary.BigEndian.Uint64(k[1:])
		raw, ok, err := r.Get(articleKey(string(id)))
		if err != nil {
			return err
		}
		var ar ArticleRecord
		if ok {
			err = json.Unmarshal(raw, &ar)
		}
		if err != nil || !ok || ar.Num < num {
			t.Errorf("n entry %d names %s: record %v (num %d) %v", num, id, ok, ar.Num, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return arts
}

// TestEntryNumbers: each article's entry number finds it through the
// operator (ArticleByNum), edits keep it, an article applied again after
// it left gets a new one (the old one finds nothing), retention deletes
// the entries with their articles, and state written before entry numbers
// is indexed at the next commit.
func TestEntryNumbers(t *testing.T) {
	for _, every := range []int{1, 7, 1000} {
		ns, _ := applyRetention(t, every, every == 7)
		if n := checkNums(t, ns); n == 0 {
			t.Fatalf("commit every %d: no article left", every)
		}
	}

	// Through the operator's reads, on state whose n entries are missing
	// (written before them) until the next commit indexes them.
	ns, _ := applyRetention(t, 5, false)
	o, err := New(OperatorOptions{Builder: retentionOpts}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	var r state.Reader = ns
	o.reader.Store(&r)
	var arts []ArticleRecord
	_ = ns.Scan([]byte("a"), []byte("b"), func(_, v []byte) error {
		var ar ArticleRecord
		_ = json.Unmarshal(v, &ar)
		arts = append(arts, ar)
		return nil
	})
	for _, ar := range arts {
		got, storyID, ok := o.ArticleByNum(ar.Num)
		if !ok || got.ID != ar.ID || storyID == "" {
			t.Fatalf("ArticleByNum(%d) = %s %q %v, want %s", ar.Num, got.ID, storyID, ok, ar.ID)
		}
	}
	if _, _, ok := o.ArticleByNum(1 << 40); ok {
		t.Error("an unknown number found an article")
	}
	// a1 was applied again (version 2, after it left the window): its
	// first number names nothing now.
	if a1, _, ok := o.Article("a1"); !ok || a1.Num == 0 {
		t.Fatalf("a1: %+v %v", a1, ok)
	} else if _, _, ok := o.ArticleByNum(0); ok {
		t.Error("a1's first number still finds it")
	}

	// Remove the index and mark the state as written before it.
	b := ns.NewBatch()
	_ = ns.Scan([]byte("n"), []byte("o"), func(k, _ []byte) error { return b.Delete(append([]byte(nil), k...)) })
	meta, _, _ := ns.Get(keyBuilderMeta)
	_, k := binary.Uvarint(meta)
	_, k2 := binary.Varint(meta[k:])
	_ = b.Set(keyBuilderMeta, binary.AppendUvarint(append([]byte(nil), meta[:k+k2]...), 1))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := o.ArticleByNum(arts[0].Num); ok {
		t.Fatal("found without the index")
	}
	rb, err := RestoreBuilder(retentionOpts, ns)
	if err != nil {
		t.Fatal(err)
	}
	statetest.Commit(t, builderFlusher{rb, ns}, ns)
	if n := checkNums(t, ns); n != len(arts) {
		t.Fatalf("after the backfill %d articles, want %d", n, len(arts))
	}
	if _, _, ok := o.ArticleByNum(arts[0].Num); !ok {
		t.Error("not found after the backfill")
	}
}
