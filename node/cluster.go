package node

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/newsflow/newsflow/cluster"
	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/query"
	"github.com/newsflow/newsflow/state"
)

// startCluster starts the node's Raft member. The replicated metadata
// (sources, accounts, preferences, sessions) lives in the node's state
// store, written only by the Raft state machine; onMeta hears of every
// change to it.
func startCluster(ctx context.Context, cfg Config, db *state.DB, logger *slog.Logger, onMeta func(collection, key string), weights func() []int) (*cluster.Node, error) {
	cc := cfg.Cluster
	id := cc.ID
	if id == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			return nil, fmt.Errorf("config: cluster.id is empty and the host name is unknown: %v", err)
		}
		id = h
	}
	if left, err := os.ReadFile(filepath.Join(cfg.ClusterDir(), leftMarker)); err == nil {
		if !cc.Bootstrap && len(cc.Join) == 0 {
			return nil, fmt.Errorf("this node left its cluster (%s); to join again run it with --join ADDR", strings.TrimSpace(string(left)))
		}
		// A fresh member: no Raft state, and none of the metadata of the
		// cluster it left (a new log would not replace it).
		if err := os.RemoveAll(cfg.ClusterDir()); err != nil {
			return nil, err
		}
		if err := meta.NewLocal(db).DeleteAll(ctx); err != nil {
			return nil, err
		}
	}
	httpAddr := cc.HTTPAdvertise
	if httpAddr == "" {
		httpAddr = cfg.HTTP.Addr
	}
	n, err := cluster.Start(ctx, cluster.Config{
		ID: id, RaftAddr: cc.RaftAddr, Advertise: cc.Advertise, HTTPAddr: httpAddr, Dir: cfg.ClusterDir(),
		Partitions: cfg.Log.Partitions, Bootstrap: cc.Bootstrap, Join: cc.Join, Secret: cc.Secret, TLS: cc.TLS,
		DownAfter: cc.DownAfter, Logger: logger, Meta: meta.NewLocal(db), OnMeta: onMeta, Weights: weights,
	})
	if err != nil {
		return nil, err
	}
	raftTLS := "derived from cluster.secret"
	if cc.TLS.CertFile != "" {
		raftTLS = "cluster.tls files"
	}
	logger.Info("cluster member started", "id", id, "raft", cc.RaftAddr, "raft_tls", raftTLS, "http", httpAddr, "bootstrap", cc.Bootstrap, "join", cc.Join)
	return n, nil
}

// leftMarker is the file that replaces a node's Raft state once it left
// its cluster: started again, the node must be told to join (or bootstrap)
// rather than come back as a member nobody has.
const leftMarker = "LEFT"

// markLeft replaces the Raft state in dir with the left marker: the marker
// first (written whole, then renamed into place), so that a failure part
// way never leaves Raft state without it.
func markLeft(dir string) error {
	tmp := filepath.Join(dir, leftMarker+".tmp")
	if err := os.WriteFile(tmp, []byte("left at "+time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, leftMarker)); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != leftMarker {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// followAssignments gives the engine the partitions the cluster assigns to
// this node, while the node is in contact with the leader and its replica
// has caught up (cluster.Node.InSync). Out of contact (or in contact but
// behind), the node holds every stage (no commit, so nothing it does can
// conflict with a new owner) but keeps its partitions, whose state goes on
// answering reads, stale by the time since; a leader's failover (a lease
// or so) then costs no refused read. Once out of contact for down_after,
// when the cluster may have moved its partitions, it gives up all of them,
// and takes any again only once in sync. A node that starts runs nothing
// until it is in sync.
func (n *Node) followAssignments(ctx context.Context) {
	lease, downAfter := n.cfg.Cluster.Lease, n.cfg.Cluster.DownAfter
	t := time.NewTicker(lease / 5)
	defer t.Stop()
	var last map[int32]uint64
	var lost time.Time // when contact (or sync) was lost; zero while in sync
	first := true
	for {
		st, changed := n.cluster.State()
		inSync := n.cluster.InSync(lease)
		owned := map[int32]uint64{}
		switch {
		case st.Partitions != 0 && st.Partitions != n.engine.Partitions():
			n.logger.Error("the cluster has another partition count than this node; running none",
				"cluster", st.Partitions, "node", n.engine.Partitions())
		case inSync:
			owned = st.OwnedBy(n.cluster.ID())
			lost = time.Time{}
		case first:
		case lost.IsZero():
			lost = time.Now()
			n.engine.Hold("cluster", "out of contact with the cluster leader, or behind it")
			n.logger.Warn("out of contact with the cluster leader; holding every stage, reads go on", "lease", lease, "down_after", downAfter)
			owned = last
		case time.Since(lost) < downAfter:
			owned = last
		}
		if first || !maps.Equal(owned, last) {
			if !first && len(owned) == 0 && len(last) > 0 && !lost.IsZero() {
				n.logger.Warn("out of contact with the cluster leader for down_after; stopping all partitions", "down_after", downAfter)
			}
			n.engine.Assign(owned)
			n.logger.Info("partitions assigned", "count", len(owned))
			last, first = owned, false
			if n.crawler != nil {
				n.crawler.Kick()
			}
		}
		var stopping <-chan struct{}
		if inSync {
			// After Assign: a partition moved away meanwhile stops before
			// anything commits again.
			n.engine.Release("cluster")
			stopping = n.releaseHandedOff(ctx, st)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-t.C:
		case <-stopping:
		}
	}
}

// releaseHandedOff tells the cluster which of the partitions it hands off
// (st.HandingOff) this node's engine has stopped, so that they pass to
// their next owners; a partition moves only once its tasks here have
// returned, and the next owner's claim of its changelogs fences nothing
// that runs. It returns a channel closed when the engine's running tasks
// next change while some partition is still stopping (nil when none is).
func (n *Node) releaseHandedOff(ctx context.Context, st cluster.State) <-chan struct{} {
	var stopping <-chan struct{}
	released := map[int32]uint64{}
	for p, epoch := range st.HandingOff(n.cluster.ID()) {
		stopped, changed := n.engine.Stopped(p)
		if !stopped {
			stopping = changed
			continue
		}
		released[p] = epoch
	}
	if len(released) == 0 {
		return stopping
	}
	rctx, cancel := context.WithTimeout(ctx, n.cfg.Cluster.Lease)
	defer cancel()
	if err := n.cluster.Release(rctx, released); err != nil {
		n.logger.Warn("releasing handed-off partitions", "partitions", len(released), "error", err)
	} else {
		n.logger.Info("partitions released to their next owners", "count", len(released))
	}
	return stopping
}

// queryCluster keeps a nil *cluster.Node from becoming a non-nil interface.
func (n *Node) queryCluster() query.Cluster {
	if n.cluster == nil {
		return nil
	}
	return n.cluster
}
