package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/newsflow/newsflow/internal/meta"
)

// Config configures a node's part in the cluster.
type Config struct {
	// ID names the node; stable across restarts.
	ID string
	// RaftAddr is the Raft listen address (host:port); Advertise, if set,
	// is the address peers dial instead.
	RaftAddr, Advertise string
	// HTTPAddr is the node's API address as peers reach it (host:port).
	HTTPAddr string
	// Dir holds the Raft log, stable store and snapshots.
	Dir string
	// Partitions is the partition count the cluster assigns (set by the
	// bootstrapping node; the others take the cluster's).
	Partitions int32
	// Weights, if set, returns each partition's relative load for the
	// assignment (set by the bootstrapping node, as Partitions; without
	// it, 1 each). Until it returns non-nil, the cluster waits to assign.
	Weights func() []int
	// Bootstrap starts a new cluster with this node as its only voter
	// (ignored when the node has Raft state already).
	Bootstrap bool
	// Join lists Raft addresses of members to ask for admission (ignored
	// when the node has Raft state already).
	Join []string
	// Secret authenticates the nodes' internal requests to each other,
	// and, unless TLS names certificate files, the Raft transport: every
	// node derives the same CA from it (transport.go).
	Secret string
	// TLS, if it names files, gives the Raft transport the operator's
	// certificates instead of derived ones. Raft always runs over mutual
	// TLS.
	TLS TLSConfig
	// DownAfter is how long the leader waits without a heartbeat before it
	// moves a node's partitions (default 2s).
	DownAfter time.Duration
	Logger    *slog.Logger
	// Meta is the local replica of the metadata store.
	Meta *meta.Local
	// OnMeta, if set, is called after each change to the replica (with
	// the collection and key; both empty when a snapshot replaced it). It
	// runs in the state machine and must not block.
	OnMeta func(collection, key string)

	// plainTCP runs Raft over unauthenticated TCP; only this package's
	// tests and benchmarks set it (to compare, and to show what TLS
	// prevents).
	plainTCP bool
}

// Node is this process's member of the cluster.
type Node struct {
	cfg       Config
	raft      *raft.Raft
	fsm       *fsm
	store     *RaftStore
	transport *raft.NetworkTransport
	stream    *streamLayer
	internal  *http.Server // the internal API, on the Raft port
	client    *http.Client // to the other members' internal API
	log       *slog.Logger
	raftAddr  string // as peers dial it

	mu    sync.Mutex
	added map[string]time.Time // voters added recently, not yet members

	// synced is set once the replica has applied what the leader had
	// applied, since the node started or last lost contact (InSync).
	synced atomic.Bool

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Start opens the Raft store and starts Raft, bootstrapping or joining as
// configured. It returns once the node runs; membership may complete later
// (see WaitMember).
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.ID == "" || cfg.RaftAddr == "" || cfg.HTTPAddr == "" || cfg.Dir == "" || cfg.Meta == nil {
		return nil, errors.New("cluster: id, raft address, http address, dir and meta store are required")
	}
	if cfg.Secret == "" {
		return nil, errors.New("cluster: a secret is required (cluster.secret)")
	}
	if cfg.DownAfter <= 0 {
		cfg.DownAfter = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, fsm: newFSM(cfg.Meta, cfg.OnMeta),
		log: cfg.Logger.With("component", "cluster"), stop: make(chan struct{}), added: map[string]time.Time{}}
	var err error
	if n.store, err = OpenRaftStore(filepath.Join(cfg.Dir, "raft")); err != nil {
		return nil, err
	}
	hlog := raftLogger(n.log)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(cfg.Dir, "snapshots"), 2, hlog)
	if err != nil {
		n.store.Close()
		return nil, err
	}
	var advAddr net.Addr // nil: the listener's own address
	if cfg.Advertise != "" {
		if advAddr, err = net.ResolveTCPAddr("tcp", cfg.Advertise); err != nil {
			n.store.Close()
			return nil, fmt.Errorf("cluster: raft advertise address %q: %w", cfg.Advertise, err)
		}
	}
	if n.transport, err = n.newTransport(advAddr, hlog); err != nil {
		n.store.Close()
		return nil, err
	}
	n.raftAddr = string(n.transport.LocalAddr())
	n.startInternal()
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = hlog
	rc.HeartbeatTimeout = 1000 * time.Millisecond
	rc.ElectionTimeout = 1000 * time.Millisecond
	rc.LeaderLeaseTimeout = 500 * time.Millisecond
	rc.CommitTimeout = 20 * time.Millisecond
	rc.SnapshotThreshold = 4096
	rc.SnapshotInterval = 60 * time.Second
	rc.TrailingLogs = 2048
	existing, err := raft.HasExistingState(n.store, n.store, snaps)
	if err != nil {
		n.closeStores()
		return nil, err
	}
	if n.raft, err = raft.NewRaft(rc, n.fsm, n.store, n.store, snaps, n.transport); err != nil {
		n.closeStores()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if !existing && cfg.Bootstrap {
		f := n.raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: rc.LocalID, Address: n.transport.LocalAddr()}}})
		if err := f.Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			n.Close()
			return nil, fmt.Errorf("cluster: bootstrap: %w", err)
		}
	}
	n.wg.Add(1)
	go n.leaderDuties()
	if !existing && !cfg.Bootstrap {
		if len(cfg.Join) == 0 {
			n.Close()
			return nil, errors.New("cluster: a new node needs --bootstrap or --join")
		}
		n.wg.Add(1)
		go n.joinLoop(ctx)
	}
	return n, nil
}

func (n *Node) closeStores() {
	if n.internal != nil {
		n.internal.Close()
	}
	if n.transport != nil {
		n.transport.Close()
	}
	n.store.Close()
}

// Close stops Raft (without leaving the cluster: see Leave) and closes the
// stores.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.stop)
		n.closeErr = n.raft.Shutdown().Error()
		n.wg.Wait()
		n.closeStores()
	})
	return n.closeErr
}

// ID returns the node's id.
func (n *Node) ID() string { return n.cfg.ID }

// State returns the cluster state and a channel closed when it next
// changes.
func (n *Node) State() (State, <-chan struct{}) { return n.fsm.snapshot() }

// Leader returns the leader's id ("" while there is none).
func (n *Node) Leader() string {
	_, id := n.raft.LeaderWithID()
	return string(id)
}

// IsLeader reports whether this node leads.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Apply replicates a command through the leader (forwarding it when this
// node is a follower) and returns once it is committed and applied on the
// leader. It retries while there is no leader, until ctx ends; then it
// returns ErrNoLeader with ctx's error.
func (n *Node) Apply(ctx context.Context, c Command) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	for {
		err := n.applyOnce(ctx, data)
		var retry retryable
		if !errors.As(err, &retry) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: %s: %w: %w (last: %v)", c.Op, ErrNoLeader, ctx.Err(), err)
		case <-n.stop:
			return errors.New("cluster: node stopped")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ErrNoLeader is what Apply returns (with its context's error) when the
// context ends before a leader took the command: there is no leader, it
// changed, or it cannot be reached. The command may be retried; the
// replica's reads go on meanwhile.
var ErrNoLeader = errors.New("the cluster has no leader")

// retryable marks errors worth another attempt (no leader yet, leader
// changed, leader unreachable).
type retryable struct{ error }

func (r retryable) Unwrap() error { return r.error }

func (n *Node) applyOnce(ctx context.Context, data []byte) error {
	if n.IsLeader() {
		return n.applyLocal(ctx, data)
	}
	leader := n.leaderAddr()
	if leader == "" {
		return retryable{errors.New("no leader")}
	}
	status, body, err := n.post(ctx, leader, PathApply, data)
	if err != nil {
		return retryable{err}
	}
	switch status {
	case http.StatusOK:
		return nil
	case http.StatusConflict:
		return ErrExists
	case http.StatusPreconditionFailed:
		return ErrConflict
	case http.StatusServiceUnavailable, http.StatusMisdirectedRequest:
		return retryable{fmt.Errorf("leader %s: %s", leader, body)}
	}
	return fmt.Errorf("cluster: leader %s answered %d: %s", leader, status, body)
}

func (n *Node) applyLocal(ctx context.Context, data []byte) error {
	enqueue := 5 * time.Second
	if d, ok := ctx.Deadline(); ok {
		enqueue = max(min(enqueue, time.Until(d)), time.Millisecond)
	}
	f := n.raft.Apply(data, enqueue)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrEnqueueTimeout) {
			return retryable{err}
		}
		return err
	}
	if err, ok := f.Response().(error); ok {
		return err
	}
	return nil
}

// admit adds a member: as a Raft voter (leader only) and to the replicated
// membership. A follower forwards the request to the leader.
func (n *Node) admit(ctx context.Context, m Member) error {
	if !n.IsLeader() {
		leader := n.leaderAddr()
		if leader == "" {
			return errors.New("no leader")
		}
		b, _ := json.Marshal(m)
		status, body, err := n.post(ctx, leader, PathJoin, b)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("leader %s: %d %s", leader, status, body)
		}
		return nil
	}
	n.mu.Lock()
	n.added[m.ID] = time.Now()
	n.mu.Unlock()
	if err := n.raft.AddVoter(raft.ServerID(m.ID), raft.ServerAddress(m.RaftAddr), 0, 5*time.Second).Error(); err != nil {
		return fmt.Errorf("add voter %s: %w", m.ID, err)
	}
	return n.Apply(ctx, Command{Op: OpJoin, Member: &m})
}

// joinLoop asks the configured members to admit this node until one does.
func (n *Node) joinLoop(ctx context.Context) {
	defer n.wg.Done()
	body, _ := json.Marshal(n.self())
	for attempt := 0; ; attempt++ {
		for _, addr := range n.cfg.Join {
			rctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			status, resp, err := n.post(rctx, addr, PathJoin, body)
			cancel()
			if err == nil && status == http.StatusOK {
				n.log.Info("joined the cluster", "via", addr)
				return
			}
			if attempt%10 == 0 {
				n.log.Warn("join attempt failed", "via", addr, "status", status, "error", err, "answer", strings.TrimSpace(string(resp)))
			}
		}
		select {
		case <-n.stop:
			return
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// leaderDuties runs while the node leads: it initialises the cluster,
// keeps its own membership current, and marks members down and up as
// their heartbeats fail and resume.
func (n *Node) leaderDuties() {
	defer n.wg.Done()
	obs := make(chan raft.Observation, 64)
	observer := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation, raft.LeaderObservation:
			return true
		}
		return false
	})
	n.raft.RegisterObserver(observer)
	defer n.raft.DeregisterObserver(observer)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	failing := map[string]time.Time{}   // peer → last contact, while heartbeats fail
	targets := map[string]uint64{}      // down peer → the index it must apply to be up
	handoffs := map[handoff]time.Time{} // handoff → when this leader first saw it
	for {
		select {
		case <-n.stop:
			return
		case o := <-obs:
			switch d := o.Data.(type) {
			case raft.FailedHeartbeatObservation:
				if _, ok := failing[string(d.PeerID)]; !ok {
					failing[string(d.PeerID)] = d.LastContact
				}
			case raft.ResumedHeartbeatObservation:
				// Up again once it has caught up (leaderTick).
				delete(failing, string(d.PeerID))
			case raft.LeaderObservation:
				clear(failing)
				clear(targets)
				clear(handoffs)
			}
		case <-tick.C:
			if !n.IsLeader() {
				continue
			}
			n.leaderTick(failing, targets)
			n.completeHandoffs(handoffs)
		}
	}
}

// initPartitions sets the cluster's partitions and their weights. It
// reports false if they are not set yet (weights not known, or the
// command failed): a later tick tries again.
func (n *Node) initPartitions(ctx context.Context) bool {
	var weights []int
	if n.cfg.Weights != nil {
		if weights = n.cfg.Weights(); weights == nil {
			return false
		}
	}
	if err := n.Apply(ctx, Command{Op: OpInit, Partitions: n.cfg.Partitions, Weights: weights}); err != nil {
		n.log.Warn("cluster init", "error", err)
		return false
	}
	return true
}

func (n *Node) leaderTick(failing map[string]time.Time, targets map[string]uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, _ := n.fsm.snapshot()
	if st.Partitions == 0 && n.cfg.Partitions > 0 && !n.initPartitions(ctx) {
		return
	}
	if m, ok := st.Members[n.cfg.ID]; !ok || !m.Up || m.HTTPAddr != n.cfg.HTTPAddr || m.RaftAddr != n.raftAddr {
		self := n.self()
		if err := n.Apply(ctx, Command{Op: OpJoin, Member: &self}); err != nil {
			n.log.Warn("cluster self-join", "error", err)
		}
	}
	// Members the Raft configuration has but whose heartbeats fail.
	for id, last := range failing {
		if m, ok := st.Members[id]; ok && m.Up && time.Since(last) > n.cfg.DownAfter {
			n.log.Warn("member unreachable; moving its partitions", "member", id, "last_contact", last)
			n.setUp(id, false)
		}
	}
	// A member that is down but not failing any more (it came back, or it
	// is the previous leader, now a follower) is up once it has applied
	// what this leader had applied when it was first seen back (a later
	// index could keep it down for good while writes keep coming).
	cfgF := n.raft.GetConfiguration()
	if cfgF.Error() != nil {
		return
	}
	for _, srv := range cfgF.Configuration().Servers {
		id := string(srv.ID)
		m, ok := st.Members[id]
		switch {
		case id == n.cfg.ID:
		case ok && !m.Up:
			target, seen := targets[id]
			switch _, bad := failing[id]; {
			case bad:
				delete(targets, id)
			case !seen:
				targets[id] = n.fsm.applied.Load()
			case n.appliedBy(id) >= target:
				delete(targets, id)
				n.setUp(id, true)
			}
		case !ok && !n.recentlyAdded(id):
			// Removed from the membership (newsflow leave): out of Raft too.
			if err := n.raft.RemoveServer(srv.ID, 0, 5*time.Second).Error(); err != nil {
				n.log.Warn("remove voter", "member", id, "error", err)
			}
		}
	}
}

// handoff is a partition handed off by its owner at an epoch.
type handoff struct {
	partition int
	epoch     uint64
}

// completeHandoffs releases, on their owners' behalf, the partitions they
// have handed off for DownAfter without releasing them (an owner whose
// tasks do not stop, or whose release was lost): the new owner's claim
// then fences whatever still runs, as when a member is down. seen holds
// when this leader first saw each handoff.
func (n *Node) completeHandoffs(seen map[handoff]time.Time) {
	st, _ := n.fsm.snapshot()
	late := map[string]map[int32]uint64{}
	pending := map[handoff]bool{}
	for p, o := range st.Owners {
		if o.Next == "" {
			continue
		}
		h := handoff{p, o.Epoch}
		pending[h] = true
		at, ok := seen[h]
		switch {
		case !ok:
			seen[h] = time.Now()
		case time.Since(at) > n.cfg.DownAfter:
			if late[o.Node] == nil {
				late[o.Node] = map[int32]uint64{}
			}
			late[o.Node][int32(p)] = o.Epoch
		}
	}
	for h := range seen {
		if !pending[h] {
			delete(seen, h)
		}
	}
	for id, parts := range late {
		n.log.Warn("member did not release handed-off partitions within down_after; moving them", "member", id, "partitions", len(parts))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := n.Apply(ctx, Command{Op: OpRelease, ID: id, Released: parts}); err != nil {
			n.log.Warn("cluster release", "member", id, "error", err)
		}
		cancel()
	}
}

// Release tells the cluster that this node's tasks of the partitions it
// hands off (State.HandingOff, with the epochs it owned them at) have
// stopped: each passes to the member it is handed to.
func (n *Node) Release(ctx context.Context, parts map[int32]uint64) error {
	return n.Apply(ctx, Command{Op: OpRelease, ID: n.cfg.ID, Released: parts})
}

func (n *Node) self() Member {
	return Member{ID: n.cfg.ID, RaftAddr: n.raftAddr, HTTPAddr: n.cfg.HTTPAddr}
}

func (n *Node) recentlyAdded(id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	at, ok := n.added[id]
	return ok && time.Since(at) < 30*time.Second
}

// appliedBy asks a member's HTTP API how far it has applied the log (0 if
// it does not answer). A member that comes back is marked up, and so given
// partitions, only once it has caught up: Raft resumes its heartbeats to a
// peer that was away at once but its log replication only after a backoff
// that grows to seconds, and a member given partitions it cannot yet see
// would leave them unprocessed (and their sources uncrawled) that long.
func (n *Node) appliedBy(id string) uint64 {
	st, _ := n.fsm.snapshot()
	m, ok := st.Members[id]
	if !ok {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	status, body, err := n.post(ctx, m.RaftAddr, PathIndex, nil)
	if err != nil || status != http.StatusOK {
		return 0
	}
	var idx struct {
		Applied uint64 `json:"applied"`
	}
	if json.Unmarshal(body, &idx) != nil {
		return 0
	}
	return idx.Applied
}

func (n *Node) setUp(id string, up bool) {
	st, _ := n.fsm.snapshot()
	if m, ok := st.Members[id]; !ok || m.Up == up {
		return
	}
	op := OpDown
	if up {
		op = OpUp
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := n.Apply(ctx, Command{Op: op, ID: id}); err != nil {
		n.log.Warn("cluster member status", "member", id, "up", up, "error", err)
	}
}

// Leave gives up this node's partitions and removes it from the cluster.
func (n *Node) Leave(ctx context.Context) error {
	if err := n.Apply(ctx, Command{Op: OpLeave, ID: n.cfg.ID}); err != nil {
		return err
	}
	if n.IsLeader() {
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			n.log.Warn("leadership transfer", "error", err)
		}
	}
	return n.Apply(ctx, Command{Op: OpRemove, ID: n.cfg.ID})
}

// raftLogger returns the logger Raft writes to: its warnings and errors
// go to l at their level, with their fields; the rest is dropped. A line
// Raft repeats (a heartbeat to a member that is down fails every few
// hundred milliseconds) is logged once, then at most once per
// repeatInterval with the number of times it came since.
func raftLogger(l *slog.Logger) hclog.Logger {
	hl := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "raft", Level: hclog.Off, Output: io.Discard})
	hl.RegisterSink(&slogSink{l: l, now: time.Now, seen: map[string]*repeated{}})
	return hl
}

// repeatInterval is how often a repeated Raft log line is logged again.
const repeatInterval = 30 * time.Second

// slogSink forwards Raft's log lines at Warn and above to slog, each
// repeated line once per repeatInterval.
type slogSink struct {
	l   *slog.Logger
	now func() time.Time

	mu   sync.Mutex
	seen map[string]*repeated // by name and message
}

// repeated is a log line's last logging and the times it came since.
type repeated struct {
	logged time.Time
	count  int
}

// maxRepeated bounds the lines slogSink remembers; past it, it forgets.
const maxRepeated = 1024

func (s *slogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	var lv slog.Level
	switch {
	case level == hclog.Off || level < hclog.Warn:
		return
	case level >= hclog.Error:
		lv = slog.LevelError
	default:
		lv = slog.LevelWarn
	}
	line := name + ": " + msg
	now := s.now()
	s.mu.Lock()
	r := s.seen[line]
	switch {
	case r == nil:
		if len(s.seen) >= maxRepeated {
			clear(s.seen)
		}
		s.seen[line] = &repeated{logged: now}
	case now.Sub(r.logged) < repeatInterval:
		r.count++
		s.mu.Unlock()
		return
	default:
		if r.count > 0 {
			args = append(args, "repeated", r.count, "since", r.logged.UTC().Format(time.RFC3339))
		}
		r.logged, r.count = now, 0
	}
	s.mu.Unlock()
	s.l.Log(context.Background(), lv, line, args...)
}

// InContact reports whether the node may act on the partitions it owns: it
// leads (a leader that loses its quorum steps down), or it is a follower
// that heard from the leader within lease. A node cut off from the others
// stops in time when lease is shorter than DownAfter.
func (n *Node) InContact(lease time.Duration) bool {
	switch n.raft.State() {
	case raft.Leader:
		return true
	case raft.Follower:
		return time.Since(n.raft.LastContact()) < lease
	}
	return false
}

// InSync reports whether the node is in contact with the leader (within
// lease) and its replica has caught up with the leader since the node
// started or last lost contact. A follower that restarted, or comes back
// after being cut off, hears the leader's heartbeats at once but receives
// the log only after Raft's replication backoff (seconds): until then its
// state machine may still give it partitions the cluster has moved, and
// running them would claim them from their owners and answer queries from
// an old copy. While not in sync it asks the leader how far the log is
// applied (at most once a call, 1 s).
func (n *Node) InSync(lease time.Duration) bool {
	if !n.InContact(lease) {
		n.synced.Store(false)
		return false
	}
	if n.IsLeader() || n.synced.Load() {
		return true
	}
	leader := n.leaderAddr()
	if leader == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	status, body, err := n.post(ctx, leader, PathIndex, nil)
	if err != nil || status != http.StatusOK {
		return false
	}
	var idx struct {
		Applied uint64 `json:"applied"`
	}
	if json.Unmarshal(body, &idx) != nil || n.fsm.applied.Load() < idx.Applied {
		return false
	}
	n.synced.Store(true)
	return true
}
