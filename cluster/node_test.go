package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/state"
)

const testSecret = "test-cluster-secret"

// testMember is a node with its own state DB, Raft dir and an HTTP server
// that serves the internal API, like a newsflow node's.
type testMember struct {
	id, dir, httpAddr, raftAddr string
	db                          *state.DB
	node                        *Node
	srv                         *http.Server
}

func startMember(t testing.TB, id, dir, httpAddr, raftAddr string, bootstrap bool, join ...string) *testMember {
	t.Helper()
	return startMemberWith(t, memberOptions{}, id, dir, httpAddr, raftAddr, bootstrap, join...)
}

// memberOptions are what a test changes in a member's Config.
type memberOptions struct {
	secret    string // default testSecret
	tls       TLSConfig
	plainTCP  bool
	downAfter time.Duration
}

func startMemberWith(t testing.TB, o memberOptions, id, dir, httpAddr, raftAddr string, bootstrap bool, join ...string) *testMember {
	t.Helper()
	var ln net.Listener
	var err error
	// A restarted member takes its old address back.
	testutil.Eventually(t, 5*time.Second, func() error {
		ln, err = net.Listen("tcp", httpAddr)
		return err
	})
	m := &testMember{id: id, dir: dir, httpAddr: ln.Addr().String()}
	if m.db, err = state.Open(filepath.Join(dir, "state"), state.Options{}); err != nil {
		t.Fatal(err)
	}
	// The node's public API, which has no part in the cluster's own
	// traffic (the internal API is on the Raft port).
	mux := http.NewServeMux()
	m.srv = &http.Server{Handler: mux}
	go m.srv.Serve(ln)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})).With("node", id)
	}
	m.node, err = Start(context.Background(), Config{
		ID: id, RaftAddr: raftAddr, HTTPAddr: m.httpAddr, Dir: filepath.Join(dir, "cluster"), Partitions: 8,
		Bootstrap: bootstrap, Join: join, Secret: cmp.Or(o.secret, testSecret), Logger: logger, Meta: meta.NewLocal(m.db),
		TLS: o.tls, plainTCP: o.plainTCP, DownAfter: o.downAfter,
	})
	if err != nil {
		t.Fatal(err)
	}
	m.raftAddr = m.node.raftAddr
	t.Cleanup(m.stop)
	return m
}

func (m *testMember) stop() {
	if m.node != nil {
		m.node.Close()
		m.srv.Close()
		m.db.Close()
		m.node = nil
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// waitFor is testutil.Eventually with what is awaited in the failure.
func waitFor(t testing.TB, timeout time.Duration, what string, f func() error) time.Duration {
	t.Helper()
	return testutil.Eventually(t, timeout, func() error {
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}

// owners counts partitions per member as m sees them, and checks that
// every partition has an up owner.
func owners(m *testMember) (map[string]int, error) {
	st, _ := m.node.State()
	if st.Partitions != 8 || len(st.Owners) != 8 {
		return nil, fmt.Errorf("%s: %d partitions", m.id, st.Partitions)
	}
	c := map[string]int{}
	for p, o := range st.Owners {
		if mem, ok := st.Members[o.Node]; !ok || !mem.Up {
			return nil, fmt.Errorf("%s: partition %d owned by %q (%+v)", m.id, p, o.Node, st.Members)
		}
		c[o.Node]++
	}
	return c, nil
}

func leaderOf(ms ...*testMember) *testMember {
	for _, m := range ms {
		if m.node != nil && m.node.IsLeader() {
			return m
		}
	}
	return nil
}

// TestClusterJoinReplicateFailover is one scenario checked step by step (cyclomatic 32): the steps
// depend on each other's state, so they stay in order in one function.
func TestClusterJoinReplicateFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node Raft test")
	}
	a := startMember(t, "a", t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", true)
	b := startMember(t, "b", t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", false, a.raftAddr)
	c := startMember(t, "c", t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", false, b.raftAddr) // joins through a follower
	all := []*testMember{a, b, c}
	waitFor(t, 15*time.Second, "three members own 3/3/2 partitions", func() error {
		for _, m := range all {
			cnt, err := owners(m)
			if err != nil {
				return err
			}
			if len(cnt) != 3 || cnt["a"] < 2 || cnt["b"] < 2 || cnt["c"] < 2 {
				return fmt.Errorf("%s sees %v", m.id, cnt)
			}
		}
		return nil
	})

	// Metadata written through any node reaches every replica; a create of
	// an existing key fails everywhere.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.node.Apply(ctx, Command{Op: OpMetaCreate, Collection: "users", Key: "ann", Value: []byte("v1")}); err != nil {
		t.Fatal(err)
	}
	if err := b.node.Apply(ctx, Command{Op: OpMetaCreate, Collection: "users", Key: "ann", Value: []byte("v2")}); !errors.Is(err, ErrExists) {
		t.Fatalf("second create through b: %v", err)
	}
	waitFor(t, 5*time.Second, "replicated user", func() error {
		for _, m := range all {
			if v, ok, _ := meta.NewLocal(m.db).Get(ctx, "users", "ann"); !ok || string(v) != "v1" {
				return fmt.Errorf("%s has %q", m.id, v)
			}
		}
		return nil
	})
	// The internal API wants the secret.
	if status, _ := a.node.handle(PathApply, "Bearer wrong", []byte(`{"op":"meta_put"}`)); status != http.StatusUnauthorized {
		t.Fatalf("wrong secret: %d", status)
	}
	// Members send a token derived from the secret, never the secret,
	// which the internal API does not take either.
	if status, _ := a.node.handle(PathIndex, "Bearer "+testSecret, nil); status != http.StatusUnauthorized {
		t.Fatalf("the raw secret: %d", status)
	}
	if status, _ := a.node.handle(PathIndex, "Bearer "+internalToken(testSecret), nil); status != http.StatusOK {
		t.Fatalf("the internal token: %d", status)
	}

	// Kill a follower: its partitions move to the survivors.
	leader := leaderOf(all...)
	var follower *testMember
	for _, m := range all {
		if m != leader {
			follower = m
			break
		}
	}
	followerDir, followerAddr, followerRaft := follower.dir, follower.httpAddr, follower.raftAddr
	follower.stop()
	moved := waitFor(t, 10*time.Second, "the dead follower's partitions move", func() error {
		cnt, err := owners(leader)
		if err != nil {
			return err
		}
		if cnt[follower.id] != 0 || len(cnt) != 2 {
			return fmt.Errorf("owners %v", cnt)
		}
		return nil
	})
	t.Logf("follower killed: partitions reassigned in %s", moved)

	// Kill the leader: a new one is elected and takes over.
	var survivor *testMember
	for _, m := range all {
		if m != leader && m != follower {
			survivor = m
		}
	}
	// Bring the follower back first so a quorum survives the leader's death.
	// Away for 10 s, the leader's log replication to it backs off for
	// seconds while heartbeats resume at once: the leader must not give it
	// partitions before it has caught up, or they would run nowhere.
	time.Sleep(10 * time.Second)
	follower = startMember(t, follower.id, followerDir, followerAddr, followerRaft, false)
	waitFor(t, 30*time.Second, "the restarted follower owns partitions again", func() error {
		cnt, err := owners(leader)
		if err != nil {
			return err
		}
		if cnt[follower.id] < 2 {
			return fmt.Errorf("owners %v", cnt)
		}
		return nil
	})
	seen := waitFor(t, 5*time.Second, "the restarted follower sees its partitions", func() error {
		if cnt, err := owners(follower); err != nil || cnt[follower.id] < 2 {
			return fmt.Errorf("%v %v", cnt, err)
		}
		return nil
	})
	if seen > time.Second {
		t.Errorf("the restarted follower learned its partitions %s after the leader gave them", seen)
	}
	leaderID := leader.id
	leader.stop()
	killed := time.Now()
	elected := waitFor(t, 5*time.Second, "a new leader", func() error {
		if l := leaderOf(survivor, follower); l == nil {
			return errors.New("no leader")
		}
		return nil
	})
	t.Logf("leader killed: new leader in %s", elected)
	newLeader := leaderOf(survivor, follower)
	waitFor(t, 10*time.Second, "the dead leader's partitions move", func() error {
		cnt, err := owners(newLeader)
		if err != nil {
			return err
		}
		if cnt[leaderID] != 0 || cnt[survivor.id]+cnt[follower.id] != 8 {
			return fmt.Errorf("owners %v", cnt)
		}
		return nil
	})
	t.Logf("leader killed: partitions reassigned %s after the kill", time.Since(killed))
	// Writes still work with two of three.
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := survivor.node.Apply(ctx, Command{Op: OpMetaPut, Collection: "sources", Key: "s1", Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
}

// A joiner gets its share of partitions once their owner releases them,
// long before down_after; an owner that never releases them loses them
// when the leader completes the handoff after down_after.
func TestClusterHandoffOnRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node Raft test")
	}
	for _, releases := range []bool{true, false} {
		t.Run(fmt.Sprintf("releases=%v", releases), func(t *testing.T) {
			downAfter := 6 * time.Second
			a := startMemberWith(t, memberOptions{downAfter: downAfter}, "a", t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", true)
			waitFor(t, 10*time.Second, "a owns every partition", func() error {
				if cnt, err := owners(a); err != nil || cnt["a"] != 8 {
					return fmt.Errorf("%v %v", cnt, err)
				}
				return nil
			})
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					st, changed := a.node.State()
					if parts := st.HandingOff("a"); releases && len(parts) > 0 {
						ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
						if err := a.node.Release(ctx, parts); err != nil {
							t.Errorf("release: %v", err)
						}
						cancel()
					}
					select {
					case <-stop:
						return
					case <-changed:
					case <-time.After(100 * time.Millisecond):
					}
				}
			}()
			defer func() { close(stop); <-done }()
			before, _ := a.node.State()
			joined := time.Now()
			startMemberWith(t, memberOptions{downAfter: downAfter}, "b", t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", false, a.raftAddr)
			took := waitFor(t, 20*time.Second, "b owns 4 partitions", func() error {
				st, _ := a.node.State()
				if n := len(st.OwnedBy("b")); n != 4 {
					return fmt.Errorf("b owns %d (a hands off %v)", n, st.HandingOff("a"))
				}
				return nil
			})
			after, _ := a.node.State()
			for p, o := range after.Owners {
				if o.Node == "b" && o.Epoch <= before.Owners[p].Epoch {
					t.Errorf("partition %d passed to b without a new epoch: %+v → %+v", p, before.Owners[p], o)
				}
			}
			t.Logf("b owns its share %s after it started (releases: %v)", took.Round(time.Millisecond), releases)
			if releases && time.Since(joined) >= downAfter {
				t.Errorf("released partitions passed to b after %s, not before down_after %s", time.Since(joined), downAfter)
			}
			if !releases && time.Since(joined) < downAfter {
				t.Errorf("partitions never released passed to b after %s, before down_after %s", time.Since(joined), downAfter)
			}
		})
	}
}

// A user registered through one node logs in through another: the
// replicated store decides between concurrent creates and a read that
// misses catches up with the leader first.
func TestMetaStoreReadYourWritesAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node Raft test")
	}
	a := startMember(t, "a", t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", true)
	b := startMember(t, "b", t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", false, a.raftAddr)
	c := startMember(t, "c", t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", false, a.raftAddr)
	waitFor(t, 15*time.Second, "three members", func() error {
		if cnt, err := owners(a); err != nil || len(cnt) != 3 {
			return fmt.Errorf("owners %v %v", cnt, err)
		}
		return nil
	})
	ctx := context.Background()
	for i := range 50 {
		key := fmt.Sprintf("user-%d", i)
		writer, reader := []*testMember{a, b, c}[i%3], []*testMember{a, b, c}[(i+1)%3]
		if err := writer.node.Meta().Create(ctx, "usernames", key, []byte("x")); err != nil {
			t.Fatal(err)
		}
		if v, ok, err := reader.node.Meta().Get(ctx, "usernames", key); err != nil || !ok || string(v) != "x" {
			t.Fatalf("%s wrote %s through %s; %s reads %q %v %v", key, key, writer.id, reader.id, v, ok, err)
		}
	}
	// Concurrent creates of one key on three nodes: exactly one wins.
	members := []*testMember{a, b, c}
	oneWins(t, "creates of one key", meta.ErrExists, members, func(m *testMember) error {
		return m.node.Meta().Create(ctx, "usernames", "contested", []byte(m.id))
	})
	// Concurrent swaps from the value all three read: exactly one wins,
	// and then a swap from that value conflicts on every node.
	if err := a.node.Meta().Put(ctx, "usernames", "contested", []byte("x")); err != nil {
		t.Fatal(err)
	}
	oneWins(t, "swaps from one value", meta.ErrConflict, members, func(m *testMember) error {
		return m.node.Meta().Swap(ctx, "usernames", "contested", []byte("x"), []byte("swapped by "+m.id))
	})
	for _, m := range []*testMember{a, b, c} {
		if err := m.node.Meta().Swap(ctx, "usernames", "contested", []byte("x"), []byte("late")); !errors.Is(err, meta.ErrConflict) {
			t.Fatalf("swap through %s from a superseded value: %v", m.id, err)
		}
	}
}

// oneWins runs op on every member at once and checks that exactly one
// succeeds and the others fail with lost.
func oneWins(t *testing.T, what string, lost error, members []*testMember, op func(*testMember) error) {
	t.Helper()
	errs := make(chan error, len(members))
	for _, m := range members {
		go func() { errs <- op(m) }()
	}
	won := 0
	for range members {
		switch err := <-errs; {
		case err == nil:
			won++
		case !errors.Is(err, lost):
			t.Fatal(err)
		}
	}
	if won != 1 {
		t.Fatalf("%d %s succeeded, want 1", won, what)
	}
}

// TestApplyWithoutLeader: when the leader and a follower stop, the other
// follower has no leader; a write through it gives up with ErrNoLeader
// when its context ends (not later), and its replica still answers reads.
func TestApplyWithoutLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node Raft test")
	}
	a := startMember(t, "a", t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", true)
	b := startMember(t, "b", t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", false, a.raftAddr)
	c := startMember(t, "c", t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", false, a.raftAddr)
	all := []*testMember{a, b, c}
	waitFor(t, 15*time.Second, "three members", func() error {
		if cnt, err := owners(a); err != nil || len(cnt) != 3 {
			return fmt.Errorf("owners %v %v", cnt, err)
		}
		return nil
	})
	ctx := t.Context()
	if err := a.node.Meta().Put(ctx, "sources", "s1", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "replicated source", func() error {
		for _, m := range all {
			if v, ok, _ := meta.NewLocal(m.db).Get(ctx, "sources", "s1"); !ok || string(v) != "v1" {
				return fmt.Errorf("%s has %q", m.id, v)
			}
		}
		return nil
	})
	leader := leaderOf(all...)
	var survivor *testMember
	for _, m := range all {
		if m != leader && survivor == nil {
			survivor = m
			continue
		}
		m.stop()
	}
	const deadline = time.Second
	wctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	start := time.Now()
	err := survivor.node.Meta().Put(wctx, "sources", "s2", []byte("v2"))
	took := time.Since(start)
	if !errors.Is(err, ErrNoLeader) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write without a leader: %v, want ErrNoLeader and the deadline", err)
	}
	if took > deadline+500*time.Millisecond {
		t.Fatalf("write without a leader answered after %s, deadline %s", took, deadline)
	}
	rctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	if v, ok, err := survivor.node.Meta().Get(rctx, "sources", "s1"); err != nil || !ok || string(v) != "v1" {
		t.Fatalf("read without a leader: %q %v %v", v, ok, err)
	}
}
