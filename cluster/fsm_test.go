package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/state"
)

func newTestFSM(t *testing.T) *fsm {
	t.Helper()
	db, err := state.Open(t.TempDir(), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return newFSM(meta.NewLocal(db), nil)
}

func mustApply(t *testing.T, f *fsm, c Command) {
	t.Helper()
	if err := f.apply(c); err != nil {
		t.Fatalf("%+v: %v", c, err)
	}
}

func join(id string) Command {
	return Command{Op: OpJoin, Member: &Member{ID: id, RaftAddr: id + ":7000", HTTPAddr: id + ":8080"}}
}

// settle releases every partition handed off, as each owner does once its
// tasks have stopped.
func settle(t *testing.T, f *fsm) {
	t.Helper()
	st, _ := f.snapshot()
	for id := range st.Members {
		if parts := st.HandingOff(id); len(parts) > 0 {
			mustApply(t, f, Command{Op: OpRelease, ID: id, Released: parts})
		}
	}
	if st, _ := f.snapshot(); slices.ContainsFunc(st.Owners, func(o Owner) bool { return o.Next != "" }) {
		t.Fatalf("handoffs left after every owner released: %+v", st.Owners)
	}
}

// checkBalanced: every partition is headed to a live member (owned by it,
// or handed to it by a member that is up) and loads (partition weights, 1
// each by default) differ by at most the heaviest weight. It returns the
// loads.
func checkBalanced(t *testing.T, s State) map[string]int {
	t.Helper()
	count := map[string]int{}
	live := 0
	for _, m := range s.Members {
		if m.Up && !m.Leaving {
			count[m.ID] = 0
			live++
		}
	}
	for p, o := range s.Owners {
		if m, ok := s.Members[o.Node]; o.Next != "" && (!ok || !m.Up) {
			t.Fatalf("partition %d handed off by %q, not a member that is up (%+v)", p, o.Node, s.Members)
		}
		if _, ok := count[o.target()]; !ok {
			if live > 0 || o.Node != "" {
				t.Fatalf("partition %d headed to %q, not a live member (%+v)", p, o.target(), s.Members)
			}
			continue
		}
		count[o.target()] += s.weight(p)
	}
	lo, hi := int(s.Partitions), 0
	for _, c := range count {
		lo, hi = min(lo, c), max(hi, c)
	}
	heaviest := 1
	for p := range s.Owners {
		heaviest = max(heaviest, s.weight(p))
	}
	if live > 0 && hi-lo > heaviest {
		t.Fatalf("unbalanced: %v", count)
	}
	return count
}

func TestAssignmentBalancedStickyWithEpochs(t *testing.T) {
	f := newTestFSM(t)
	mustApply(t, f, Command{Op: OpInit, Partitions: 8})
	mustApply(t, f, join("a"))
	s1, _ := f.snapshot()
	if c := checkBalanced(t, s1); c["a"] != 8 {
		t.Fatalf("one node owns %v", c)
	}
	mustApply(t, f, join("b"))
	mustApply(t, f, join("c"))
	settle(t, f)
	s2, _ := f.snapshot()
	c := checkBalanced(t, s2)
	// Sticky: a kept its share; only what b and c took moved.
	moved := 0
	for p := range s2.Owners {
		if s2.Owners[p].Node != s1.Owners[p].Node {
			moved++
			if s2.Owners[p].Epoch <= s1.Owners[p].Epoch {
				t.Errorf("partition %d moved without a new epoch: %+v → %+v", p, s1.Owners[p], s2.Owners[p])
			}
		} else if s2.Owners[p].Epoch != s1.Owners[p].Epoch {
			t.Errorf("partition %d stayed but its epoch changed", p)
		}
	}
	if moved != c["b"]+c["c"] {
		t.Errorf("moved %d partitions for b and c owning %d", moved, c["b"]+c["c"])
	}

	// c goes down: its partitions go to a and b, nothing else moves.
	mustApply(t, f, Command{Op: OpDown, ID: "c"})
	s3, _ := f.snapshot()
	checkBalanced(t, s3)
	for p := range s3.Owners {
		if s2.Owners[p].Node != "c" && s3.Owners[p] != s2.Owners[p] {
			t.Errorf("partition %d of a live node moved: %+v → %+v", p, s2.Owners[p], s3.Owners[p])
		}
		if s2.Owners[p].Node == "c" && s3.Owners[p].Node == "c" {
			t.Errorf("partition %d still on the dead node", p)
		}
	}
	// Back up: it gets a share again; leave empties a node.
	mustApply(t, f, Command{Op: OpUp, ID: "c"})
	settle(t, f)
	s4, _ := f.snapshot()
	if c := checkBalanced(t, s4); c["c"] < 2 {
		t.Fatalf("c back with %v", c)
	}
	mustApply(t, f, Command{Op: OpLeave, ID: "a"})
	settle(t, f)
	s5, _ := f.snapshot()
	if c := checkBalanced(t, s5); c["a"] != 0 || c["b"]+c["c"] != 8 {
		t.Fatalf("after a leaves: %v", c)
	}
	// Epochs only grow.
	for p := range s5.Owners {
		if s5.Owners[p].Epoch < s4.Owners[p].Epoch {
			t.Fatalf("epoch of %d went back", p)
		}
	}
	// Nobody left: nothing owned, and ownership comes back with a member.
	mustApply(t, f, Command{Op: OpDown, ID: "b"})
	mustApply(t, f, Command{Op: OpDown, ID: "c"})
	s6, _ := f.snapshot()
	for p, o := range s6.Owners {
		if o.Node != "" {
			t.Fatalf("partition %d owned by %q with no live member", p, o.Node)
		}
	}
	mustApply(t, f, Command{Op: OpUp, ID: "b"})
	s7, _ := f.snapshot()
	if c := checkBalanced(t, s7); c["b"] != 8 {
		t.Fatalf("b alone: %v", c)
	}
}

// Random membership changes: always balanced, and every replica applying
// the same commands computes the same owners.
func TestAssignmentRandomChangesDeterministic(t *testing.T) {
	checkRandomChanges(t, Command{Op: OpInit, Partitions: 12}, 1)
}

// checkRandomChanges applies init and then 300 random membership changes
// to two replicas: after each, the assignment must be balanced and the
// same in both.
func checkRandomChanges(t *testing.T, init Command, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed+1))
	a, b := newTestFSM(t), newTestFSM(t)
	ids := []string{"n1", "n2", "n3", "n4", "n5"}
	cmds := []Command{init}
	for range 300 {
		id := ids[rng.IntN(len(ids))]
		cmds = append(cmds, []Command{join(id), {Op: OpDown, ID: id}, {Op: OpUp, ID: id}, {Op: OpRemove, ID: id}, {Op: OpRelease, ID: id}}[rng.IntN(5)])
	}
	for _, c := range cmds {
		if c.Op == OpRelease {
			// What the member hands off now (in both replicas, as they
			// agree), or a part of it.
			sa, _ := a.snapshot()
			c.Released = sa.HandingOff(c.ID)
			for p := range c.Released {
				if rng.IntN(3) == 0 {
					delete(c.Released, p)
				}
			}
		}
		ea, eb := a.apply(c), b.apply(c)
		if (ea == nil) != (eb == nil) {
			t.Fatalf("%+v: %v vs %v", c, ea, eb)
		}
		sa, _ := a.snapshot()
		sb, _ := b.snapshot()
		checkBalanced(t, sa)
		if fmt.Sprint(sa.Owners) != fmt.Sprint(sb.Owners) {
			t.Fatalf("replicas disagree after %+v:\n%v\n%v", c, sa.Owners, sb.Owners)
		}
	}
}

// A heavy partition (the singletons' home) counts for its weight: its
// owner gets fewer other partitions, and alone when members are many.
func TestAssignmentWeighted(t *testing.T) {
	weights := []int{2, 1, 1, 1, 1, 1, 1, 1}
	f := newTestFSM(t)
	mustApply(t, f, Command{Op: OpInit, Partitions: 8, Weights: weights})
	others := func(s State) int {
		n := 0
		for _, o := range s.Owners[1:] {
			if o.Node == s.Owners[0].Node {
				n++
			}
		}
		return n
	}
	for i, id := range []string{"a", "b", "c"} {
		mustApply(t, f, join(id))
		settle(t, f)
		s, _ := f.snapshot()
		load := checkBalanced(t, s)
		// 9 units over i+1 members: p0's owner holds p0 and 7, 3, 1 more.
		if want := []int{7, 3, 1}[i]; others(s) != want {
			t.Fatalf("%d members: partition 0's owner has %d others, want %d (loads %v)", i+1, others(s), want, load)
		}
	}
	for _, id := range []string{"d", "e", "f", "g", "h", "i"} {
		mustApply(t, f, join(id))
	}
	settle(t, f)
	s, _ := f.snapshot()
	checkBalanced(t, s)
	if others(s) != 0 {
		t.Fatalf("9 members: partition 0's owner also has %d others: %v", others(s), s.Owners)
	}
	// Weights that do not match the partitions, or are not positive, are
	// ignored.
	for _, bad := range [][]int{{2, 1}, {0, 1, 1, 1}} {
		g := newTestFSM(t)
		mustApply(t, g, Command{Op: OpInit, Partitions: 4, Weights: bad})
		if st, _ := g.snapshot(); st.Weights != nil {
			t.Fatalf("init with weights %v kept %v", bad, st.Weights)
		}
	}
	// Random changes stay balanced by weight and deterministic.
	checkRandomChanges(t, Command{Op: OpInit, Partitions: 12, Weights: []int{3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}}, 3)
}

// A partition moving away from a member that is up is handed off: the
// owner keeps it (running nothing of it) until it releases it at its
// epoch, and only then does the next member own it, at a new epoch. A
// handoff is called off when the next member goes down, and completes at
// once when the owner does.
func TestAssignmentHandoff(t *testing.T) {
	f := newTestFSM(t)
	mustApply(t, f, Command{Op: OpInit, Partitions: 8})
	mustApply(t, f, join("a"))
	s1, _ := f.snapshot()
	if n := len(s1.OwnedBy("a")); n != 8 {
		t.Fatalf("the first member owns %d partitions at once, want 8 (nobody to hand off from)", n)
	}
	mustApply(t, f, join("b"))
	s2, _ := f.snapshot()
	checkBalanced(t, s2)
	handed := s2.HandingOff("a")
	if len(handed) != 4 || len(s2.OwnedBy("a")) != 4 || len(s2.OwnedBy("b")) != 0 {
		t.Fatalf("after b joins: a hands off %v, owns %v; b owns %v (want 4, 4, 0)", handed, s2.OwnedBy("a"), s2.OwnedBy("b"))
	}
	for p, o := range s2.Owners {
		if o.Node != "a" || o.Epoch != s1.Owners[p].Epoch {
			t.Fatalf("partition %d changed owner or epoch before a release: %+v → %+v", p, s1.Owners[p], o)
		}
	}
	// Releases by another member, or at another epoch, change nothing.
	var first int32 = -1
	for p := range handed {
		first = max(first, p)
	}
	mustApply(t, f, Command{Op: OpRelease, ID: "b", Released: handed})
	mustApply(t, f, Command{Op: OpRelease, ID: "a", Released: map[int32]uint64{first: handed[first] + 100}})
	mustApply(t, f, Command{Op: OpRelease, ID: "a", Released: map[int32]uint64{1000: 1, -1: 1}})
	if s, _ := f.snapshot(); fmt.Sprint(s.Owners) != fmt.Sprint(s2.Owners) {
		t.Fatalf("a wrong release moved partitions:\n%v\n%v", s2.Owners, s.Owners)
	}
	// a releases one: it passes to b at a new epoch; the rest wait.
	mustApply(t, f, Command{Op: OpRelease, ID: "a", Released: map[int32]uint64{first: handed[first]}})
	s3, _ := f.snapshot()
	if o := s3.Owners[first]; o.Node != "b" || o.Next != "" || o.Epoch <= s2.EpochSeq {
		t.Fatalf("released partition %d: %+v, want b's at an epoch above %d", first, o, s2.EpochSeq)
	}
	if n := len(s3.HandingOff("a")); n != 3 {
		t.Fatalf("a still hands off %d, want 3", n)
	}
	// b goes down: the other three stay with a, at their epochs.
	mustApply(t, f, Command{Op: OpDown, ID: "b"})
	s4, _ := f.snapshot()
	checkBalanced(t, s4)
	for p, o := range s4.Owners {
		if o.Node != "a" || o.Next != "" {
			t.Fatalf("b down: partition %d is %+v, want a's", p, o)
		}
		if int32(p) != first && o.Epoch != s1.Owners[p].Epoch {
			t.Fatalf("b down: partition %d kept by a at a new epoch: %+v", p, o)
		}
	}
	// b back, a down with its handoffs pending: b owns everything at
	// once.
	mustApply(t, f, Command{Op: OpUp, ID: "b"})
	if s, _ := f.snapshot(); len(s.HandingOff("a")) != 4 {
		t.Fatalf("b back: a hands off %v, want 4", s.HandingOff("a"))
	}
	mustApply(t, f, Command{Op: OpDown, ID: "a"})
	s5, _ := f.snapshot()
	if owned := s5.OwnedBy("b"); len(owned) != 8 {
		t.Fatalf("a down: b owns %v, want all 8", owned)
	}
	for p, o := range s5.Owners {
		if o.Epoch <= s4.Owners[p].Epoch {
			t.Fatalf("partition %d moved to b without a new epoch: %+v → %+v", p, s4.Owners[p], o)
		}
	}
	// A released handoff is not released twice: a's old epochs are gone.
	mustApply(t, f, Command{Op: OpUp, ID: "a"})
	s6, _ := f.snapshot()
	mustApply(t, f, Command{Op: OpRelease, ID: "a", Released: maps.Clone(s2.HandingOff("a"))})
	if s, _ := f.snapshot(); fmt.Sprint(s.Owners) != fmt.Sprint(s6.Owners) {
		t.Fatalf("a stale release moved partitions:\n%v\n%v", s6.Owners, s.Owners)
	}
}

func TestMetaCommandsAndSnapshotRestore(t *testing.T) {
	f := newTestFSM(t)
	var changed []string
	f.onMeta = func(c, k string) { changed = append(changed, c+"/"+k) }
	ctx := context.Background()
	mustApply(t, f, Command{Op: OpInit, Partitions: 4})
	mustApply(t, f, join("a"))
	mustApply(t, f, Command{Op: OpMetaCreate, Collection: "users", Key: "ann", Value: []byte("1")})
	if err := f.apply(Command{Op: OpMetaCreate, Collection: "users", Key: "ann", Value: []byte("2")}); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	mustApply(t, f, Command{Op: OpMetaPut, Collection: "prefs", Key: "ann", Value: []byte(`{"topics":["science"]}`)})
	mustApply(t, f, Command{Op: OpMetaPut, Collection: "sources", Key: "s1", Value: []byte("x")})
	mustApply(t, f, Command{Op: OpMetaSwap, Collection: "prefs", Key: "ann", Old: []byte(`{"topics":["science"]}`), Value: []byte(`{"topics":["sport"]}`)})
	if err := f.apply(Command{Op: OpMetaSwap, Collection: "prefs", Key: "ann", Old: []byte(`{"topics":["science"]}`), Value: []byte("stale")}); !errors.Is(err, ErrConflict) {
		t.Fatalf("swap from a superseded value: %v", err)
	}
	mustApply(t, f, Command{Op: OpMetaDelete, Collection: "sources", Key: "s1"})
	if want := []string{"users/ann", "prefs/ann", "sources/s1", "prefs/ann", "sources/s1"}; fmt.Sprint(changed) != fmt.Sprint(want) {
		t.Fatalf("changes reported %v, want %v", changed, want)
	}
	if v, ok, _ := f.meta.Get(ctx, "users", "ann"); !ok || string(v) != "1" {
		t.Fatalf("users/ann = %q %v", v, ok)
	}
	if _, ok, _ := f.meta.Get(ctx, "sources", "s1"); ok {
		t.Fatal("deleted key still there")
	}
	if err := f.apply(Command{Op: "bogus"}); err == nil {
		t.Fatal("unknown command applied")
	}

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// The snapshot is of the moment it was taken: what is applied while
	// it is persisted (as Raft does) is not in it.
	mustApply(t, f, Command{Op: OpMetaPut, Collection: "sources", Key: "s2", Value: []byte("later")})
	mustApply(t, f, Command{Op: OpMetaPut, Collection: "prefs", Key: "ann", Value: []byte("later")})
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	g := newTestFSM(t)
	mustApply(t, g, Command{Op: OpMetaPut, Collection: "junk", Key: "k", Value: []byte("gone after restore")})
	mustApply(t, g, Command{Op: OpMetaPut, Collection: "users", Key: "ann", Value: []byte("overwritten by the restore")})
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	fs, _ := f.snapshot()
	gs, _ := g.snapshot()
	if fmt.Sprint(fs) != fmt.Sprint(gs) {
		t.Fatalf("restored state %+v, want %+v", gs, fs)
	}
	var pairs []string
	g.meta.ScanAll(ctx, func(c, k string, v []byte) error {
		pairs = append(pairs, c+"/"+k+"="+string(v))
		return nil
	})
	if want := []string{`prefs/ann={"topics":["sport"]}`, "users/ann=1"}; fmt.Sprint(pairs) != fmt.Sprint(want) {
		t.Fatalf("restored metadata %v, want %v", pairs, want)
	}
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { return nil }

var _ raft.SnapshotSink = (*memSink)(nil)
