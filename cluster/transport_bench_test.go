package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
)

// transports are the two the benchmarks compare: the product's TLS one
// and plain TCP, which only tests can choose.
var transports = []struct {
	name string
	opts memberOptions
}{
	{"tls", memberOptions{}},
	{"plain", memberOptions{plainTCP: true}},
}

// startThree starts a three-node cluster and waits until every member
// owns partitions.
func startThree(b *testing.B, o memberOptions) []*testMember {
	b.Helper()
	a := startMemberWith(b, o, "a", b.TempDir(), "127.0.0.1:0", "127.0.0.1:0", true)
	m2 := startMemberWith(b, o, "b", b.TempDir(), "127.0.0.1:0", "127.0.0.1:0", false, a.raftAddr)
	m3 := startMemberWith(b, o, "c", b.TempDir(), "127.0.0.1:0", "127.0.0.1:0", false, a.raftAddr)
	all := []*testMember{a, m2, m3}
	waitFor(b, 30*time.Second, "three members own partitions", func() error {
		for _, m := range all {
			if cnt, err := owners(m); err != nil || len(cnt) != 3 {
				return fmt.Errorf("%s: owners %v %v", m.id, cnt, err)
			}
		}
		return nil
	})
	return all
}

// BenchmarkRaftApply is the latency of one small metadata write through
// the leader of a three-node cluster (committed by a quorum and applied
// on the leader), over TLS and over plain TCP.
func BenchmarkRaftApply(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr.name, func(b *testing.B) {
			all := startThree(b, tr.opts)
			leader := leaderOf(all...)
			if leader == nil {
				b.Fatal("no leader")
			}
			ctx := context.Background()
			i := 0
			for b.Loop() {
				i++
				if err := leader.node.Apply(ctx, Command{Op: OpMetaPut, Collection: "sources", Key: fmt.Sprintf("s%d", i%64), Value: []byte("https://example.org/feed.xml")}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRaftFailover is the time from shutting the leader of a
// three-node cluster down to a new leader accepting a metadata write, over
// TLS and over plain TCP (ns/op; failover-median-ms the median). The old
// leader is restarted and caught up between rounds, outside the timer.
func BenchmarkRaftFailover(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr.name, func(b *testing.B) {
			all := startThree(b, tr.opts)
			var times []time.Duration
			for b.Loop() {
				leader := leaderOf(all...)
				if leader == nil {
					b.Fatal("no leader")
				}
				var survivors []*testMember
				for _, m := range all {
					if m != leader {
						survivors = append(survivors, m)
					}
				}
				id, dir, httpAddr, raftAddr := leader.id, leader.dir, leader.httpAddr, leader.raftAddr
				start := time.Now()
				leader.stop()
				testutil.EventuallyEvery(b, 30*time.Second, 2*time.Millisecond, func() error {
					for _, s := range survivors {
						if s.node.IsLeader() {
							return s.node.applyLocal(context.Background(), mustJSON(b, Command{Op: OpMetaPut, Collection: "sources", Key: "failover", Value: []byte(id)}))
						}
					}
					return errors.New("no leader")
				})
				times = append(times, time.Since(start))

				b.StopTimer()
				back := startMemberWith(b, tr.opts, id, dir, httpAddr, raftAddr, false)
				all = append(survivors, back)
				waitFor(b, 60*time.Second, "the old leader back and in sync", func() error {
					l := leaderOf(all...)
					if l == nil {
						return errors.New("no leader")
					}
					st, _ := l.node.State()
					for _, m := range all {
						if mem, ok := st.Members[m.id]; !ok || !mem.Up {
							return fmt.Errorf("%s not up", m.id)
						}
						if !m.node.InSync(time.Second) {
							return fmt.Errorf("%s not in sync", m.id)
						}
					}
					return nil
				})
				b.StartTimer()
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "failover-median-ms")
		})
	}
}

func mustJSON(tb testing.TB, c Command) []byte {
	tb.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
