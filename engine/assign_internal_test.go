package engine

import (
	"fmt"
	"testing"

	"github.com/newsflow/newsflow/state"
)

// A range delete reaches the changelog as one tombstone per key it removes:
// committed keys and keys set earlier in the same batch, nothing outside.
func TestCaptureWriterExpandsRangeDeletes(t *testing.T) {
	db, err := state.Open(t.TempDir(), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ns := db.Namespace("task/x/0")
	b := ns.NewBatch()
	for _, k := range []string{"a", "b1", "b2", "c"} {
		if err := b.Set([]byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b = ns.NewBatch()
	defer b.Discard()
	w := &captureWriter{b: b, ns: ns}
	key := []byte("b3")
	if err := w.Set(key, []byte("new")); err != nil {
		t.Fatal(err)
	}
	key[1] = '9' // callers may reuse their buffers
	if err := w.DeleteRange([]byte("b"), []byte("c")); err != nil {
		t.Fatal(err)
	}
	if err := w.Set([]byte("b4"), []byte("after")); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ch := range w.changes {
		if ch.Delete {
			got = append(got, "-"+string(ch.Key))
		} else {
			got = append(got, string(ch.Key)+"="+string(ch.Value))
		}
	}
	if want := "[b3=new -b1 -b2 -b3 b4=after]"; fmt.Sprint(got) != want {
		t.Fatalf("changes %v, want %s", got, want)
	}
}
