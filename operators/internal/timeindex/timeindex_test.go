package timeindex

import (
	"fmt"
	"math"
	"testing"

	"github.com/newsflow/newsflow/state/statetest"
)

func TestKeysSortByTime(t *testing.T) {
	ns := statetest.Open(t).Namespace("t")
	times := []int64{math.MinInt64 + 1, -5, 0, 3, 1_780_000_000_000, math.MaxInt64}
	b := ns.NewBatch()
	for i := len(times) - 1; i >= 0; i-- { // written in reverse
		if err := b.Set(Key('x', times[i], fmt.Sprint("id", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Set([]byte("y"), nil); err != nil { // another prefix
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := Expired(ns, 'x', 3, func(k []byte, at int64, id string) error {
		got = append(got, fmt.Sprint(at, id))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([]string{fmt.Sprint(times[0], "id0"), fmt.Sprint(-5, "id1"), fmt.Sprint(0, "id2")})
	if fmt.Sprint(got) != want {
		t.Fatalf("expired before 3: %v, want %v", got, want)
	}
	if at, id := Parse(Key('x', -5, "a")); at != -5 || id != "a" {
		t.Fatalf("Parse = %d %q", at, id)
	}
}
