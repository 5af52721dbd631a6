package cluster

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"github.com/newsflow/newsflow/internal/meta"
)

// Member is a node of the cluster.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	// Up is false while the leader cannot reach the node; its partitions
	// are then owned by others.
	Up bool `json:"up"`
	// Leaving is set by newsflow leave: the node gives up its partitions.
	Leaving bool `json:"leaving,omitempty"`
}

// Owner is who processes a partition, and since which assignment epoch. A
// partition's epoch grows every time its owner changes, so a node that
// still acts on an older epoch is stale and must stop.
//
// A partition the balance moves away from a member that is up is handed
// off, not taken: Next names the member it goes to, Node still owns it but
// runs none of its tasks (OwnedBy leaves it out), and once Node reports
// that its tasks have stopped (OpRelease) the partition passes to Next
// with a new epoch. So the new owner's claim of the changelogs never
// fences a task that still runs. The leader completes a handoff that Node
// has not released within DownAfter itself; a partition of a member that
// is down or gone moves at once.
type Owner struct {
	Node  string `json:"node"`
	Epoch uint64 `json:"epoch"`
	Next  string `json:"next,omitempty"`
}

// target is where the partition is headed: Next while handed off, else
// Node.
func (o Owner) target() string {
	if o.Next != "" {
		return o.Next
	}
	return o.Node
}

// State is the replicated cluster state (the metadata key-value pairs live
// in the local metadata store and are not part of it).
type State struct {
	Partitions int32 `json:"partitions"`
	// Weights is each partition's relative load (nil: 1 each), set with
	// Partitions: the partition whose owner runs the singleton operators
	// weighs more, so that its owner gets fewer other partitions.
	Weights []int             `json:"weights,omitempty"`
	Members map[string]Member `json:"members"`
	Owners  []Owner           `json:"owners"`
	// EpochSeq is the last epoch handed out.
	EpochSeq uint64 `json:"epoch_seq"`
}

func (s *State) clone() State {
	c := State{Partitions: s.Partitions, Weights: slices.Clone(s.Weights), EpochSeq: s.EpochSeq, Members: make(map[string]Member, len(s.Members)), Owners: slices.Clone(s.Owners)}
	for k, v := range s.Members {
		c.Members[k] = v
	}
	return c
}

// Command is one replicated change.
type Command struct {
	Op string `json:"op"`
	// init
	Partitions int32 `json:"partitions,omitempty"`
	Weights    []int `json:"weights,omitempty"`
	// join, up, down, leave, remove, release
	Member *Member `json:"member,omitempty"`
	ID     string  `json:"id,omitempty"`
	// release: the partitions member ID hands off, each with the epoch it
	// owned it at (a release of another epoch, or of a partition not
	// handed off, changes nothing)
	Released map[int32]uint64 `json:"released,omitempty"`
	// meta_put, meta_create, meta_delete, meta_swap (Old: the value the
	// key must hold for the swap to happen)
	Collection string `json:"collection,omitempty"`
	Key        string `json:"key,omitempty"`
	Value      []byte `json:"value,omitempty"`
	Old        []byte `json:"old,omitempty"`
}

// Command operations.
const (
	OpInit       = "init"
	OpJoin       = "join"
	OpUp         = "up"
	OpDown       = "down"
	OpLeave      = "leave"
	OpRemove     = "remove"
	OpRelease    = "release"
	OpMetaPut    = "meta_put"
	OpMetaCreate = "meta_create"
	OpMetaDelete = "meta_delete"
	OpMetaSwap   = "meta_swap"
)

// ErrExists answers a meta_create of a key that exists; ErrConflict a
// meta_swap of a key that no longer holds the old value.
var (
	ErrExists   = meta.ErrExists
	ErrConflict = meta.ErrConflict
)

// fsm applies commands to the cluster state and the local metadata store.
type fsm struct {
	meta *meta.Local
	// onMeta, if set, is called after every metadata change (collection
	// and key; both empty after a snapshot replaced everything).
	onMeta func(collection, key string)
	// applied is the index of the last entry Apply finished.
	applied atomic.Uint64

	mu    sync.RWMutex
	state State
	// changed is closed and replaced whenever the cluster state changes.
	changed chan struct{}
}

func newFSM(m *meta.Local, onMeta func(collection, key string)) *fsm {
	return &fsm{meta: m, onMeta: onMeta, state: State{Members: map[string]Member{}}, changed: make(chan struct{})}
}

// snapshot returns a copy of the state and a channel closed at its next
// change.
func (f *fsm) snapshot() (State, <-chan struct{}) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state.clone(), f.changed
}

// Apply implements raft.FSM. It returns nil or an error (ErrExists for a
// meta_create of an existing key; decoding errors for garbage).
func (f *fsm) Apply(l *raft.Log) any {
	defer f.applied.Store(l.Index)
	var c Command
	if err := json.Unmarshal(l.Data, &c); err != nil {
		return fmt.Errorf("cluster: undecodable command at %d: %w", l.Index, err)
	}
	return f.apply(c)
}

func (f *fsm) apply(c Command) error {
	ctx := context.Background()
	var err error
	switch c.Op {
	case OpMetaPut:
		err = f.meta.Put(ctx, c.Collection, c.Key, c.Value)
	case OpMetaDelete:
		err = f.meta.Delete(ctx, c.Collection, c.Key)
	case OpMetaCreate:
		err = f.meta.Create(ctx, c.Collection, c.Key, c.Value)
	case OpMetaSwap:
		err = f.meta.Swap(ctx, c.Collection, c.Key, c.Old, c.Value)
	default:
		return f.applyState(c)
	}
	if err == nil && f.onMeta != nil {
		f.onMeta(c.Collection, c.Key)
	}
	return err
}

// applyState applies a membership command and rebalances.
func (f *fsm) applyState(c Command) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &f.state
	switch c.Op {
	case OpInit:
		if s.Partitions == 0 && c.Partitions > 0 {
			s.Partitions = c.Partitions
			s.Owners = make([]Owner, c.Partitions)
			if len(c.Weights) == int(c.Partitions) && !slices.ContainsFunc(c.Weights, func(w int) bool { return w < 1 }) {
				s.Weights = slices.Clone(c.Weights)
			}
		}
	case OpJoin:
		if c.Member == nil || c.Member.ID == "" {
			return errors.New("cluster: join without a member")
		}
		m := *c.Member
		m.Up, m.Leaving = true, false
		s.Members[m.ID] = m
	case OpUp, OpDown, OpLeave:
		m, ok := s.Members[c.ID]
		if !ok {
			return fmt.Errorf("cluster: no member %q", c.ID)
		}
		switch c.Op {
		case OpUp:
			m.Up = true
		case OpDown:
			m.Up = false
		case OpLeave:
			m.Leaving = true
		}
		s.Members[c.ID] = m
	case OpRemove:
		delete(s.Members, c.ID)
	case OpRelease:
		// In partition order: every replica hands out the same epochs.
		for p, o := range s.Owners {
			if e, ok := c.Released[int32(p)]; ok && o.Node == c.ID && o.Epoch == e && o.Next != "" {
				s.EpochSeq++
				s.Owners[p] = Owner{Node: o.Next, Epoch: s.EpochSeq}
			}
		}
	default:
		return fmt.Errorf("cluster: unknown command %q", c.Op)
	}
	s.rebalance()
	close(f.changed)
	f.changed = make(chan struct{})
	return nil
}

// rebalance assigns every partition to a live member: balanced (by
// weight: members' loads differ by at most the heaviest partition's weight;
// with equal weights, their counts by at most one), sticky (a partition
// stays where it is, or where it is being handed to, unless that member is
// gone or over its share), deterministic (every replica computes the same
// owners from the same state). A partition whose owner is up is handed off
// (Owner.Next); any other changes owner at once. A partition whose owner
// changes gets a new epoch.
func (s *State) rebalance() {
	var live []string
	for id, m := range s.Members {
		if m.Up && !m.Leaving {
			live = append(live, id)
		}
	}
	load := map[string]int{}
	total := 0
	for p, o := range s.Owners {
		load[o.target()] += s.weight(p)
		total += s.weight(p)
	}
	// The members holding most now get the larger shares, so fewer move.
	slices.SortFunc(live, func(a, b string) int {
		if c := cmp.Compare(load[b], load[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	capacity := map[string]int{}
	if n := len(live); n > 0 {
		for i, id := range live {
			capacity[id] = total / n
			if i < total%n {
				capacity[id]++
			}
		}
	}
	// Heavier partitions are placed first, each group in index order.
	order := make([]int, len(s.Owners))
	for p := range order {
		order[p] = p
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(s.weight(b), s.weight(a)) })
	kept := map[string]int{}
	var moving []int
	for _, p := range order {
		t, w := s.Owners[p].target(), s.weight(p)
		if c, ok := capacity[t]; ok && kept[t]+w <= c {
			kept[t] += w
			continue
		}
		moving = append(moving, p)
	}
	for _, p := range moving {
		// The member with the most room takes it, even if the partition
		// does not fit (a heavy one among many members).
		best := ""
		for _, id := range live { // live is in a fixed order: ties go to the first
			if best == "" || capacity[id]-kept[id] > capacity[best]-kept[best] {
				best = id
			}
		}
		s.place(p, best)
		if best != "" {
			kept[best] += s.weight(p)
		}
	}
	// A handoff whose owner went down or away meanwhile completes at once:
	// nothing of it runs to wait for.
	for p, o := range s.Owners {
		if o.Next != "" && !s.handsOff(o.Node) {
			s.place(p, o.Next)
		}
	}
}

// place sends partition p to member to: it stays if to owns it (calling
// off a handoff), is handed off if its owner is up, and otherwise changes
// owner, with a new epoch.
func (s *State) place(p int, to string) {
	o := s.Owners[p]
	switch {
	case to == o.Node:
		s.Owners[p].Next = ""
	case to != "" && s.handsOff(o.Node):
		s.Owners[p].Next = to
	default:
		s.EpochSeq++
		s.Owners[p] = Owner{Node: to, Epoch: s.EpochSeq}
	}
}

// handsOff reports whether member id is up, so that it releases its
// partitions before they move (it may be leaving: it is still running).
func (s *State) handsOff(id string) bool {
	m, ok := s.Members[id]
	return ok && m.Up
}

// weight returns partition p's weight.
func (s *State) weight(p int) int {
	if p < len(s.Weights) {
		return s.Weights[p]
	}
	return 1
}

// Snapshot implements raft.FSM: the cluster state and every metadata
// pair, as JSON lines. It copies only the cluster state: the metadata is a
// point-in-time view of the store (meta.Snapshot), which Persist streams
// to the sink while Apply goes on.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	st, _ := f.snapshot()
	return &fsmSnapshot{state: st, meta: f.meta.Snapshot()}, nil
}

type fsmSnapshot struct {
	state State
	meta  *meta.Snapshot
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriter(sink)
	enc := json.NewEncoder(w)
	err := enc.Encode(s.state)
	if err == nil {
		err = s.meta.ScanAll(context.Background(), func(coll, key string, v []byte) error {
			return enc.Encode(Command{Op: OpMetaPut, Collection: coll, Key: key, Value: v})
		})
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() { s.meta.Close() }

// Restore implements raft.FSM: replaces the state and the metadata with a
// snapshot's. It does not empty the store first: it writes each pair of
// the snapshot over what is there, then deletes the pairs the snapshot
// does not hold, so the store never goes through a moment with nothing in
// it. It keeps the snapshot's keys in memory, not their values.
func (f *fsm) Restore(r io.ReadCloser) error {
	defer r.Close()
	dec := json.NewDecoder(bufio.NewReader(r))
	var st State
	if err := dec.Decode(&st); err != nil {
		return fmt.Errorf("cluster: snapshot: %w", err)
	}
	if st.Members == nil {
		st.Members = map[string]Member{}
	}
	ctx := context.Background()
	held := map[string]struct{}{}
	for {
		var c Command
		err := dec.Decode(&c)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("cluster: snapshot: %w", err)
		}
		if err := f.meta.PutLazy(ctx, c.Collection, c.Key, c.Value); err != nil {
			return err
		}
		held[c.Collection+"\x00"+c.Key] = struct{}{}
	}
	var stale [][2]string
	err := f.meta.ScanAll(ctx, func(coll, key string, _ []byte) error {
		if _, ok := held[coll+"\x00"+key]; !ok {
			stale = append(stale, [2]string{coll, key})
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range stale {
		if err := f.meta.Delete(ctx, k[0], k[1]); err != nil {
			return err
		}
	}
	f.mu.Lock()
	f.state = st
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	if f.onMeta != nil {
		f.onMeta("", "")
	}
	return nil
}

// OwnedBy returns the partitions node owns, with their epochs, but not
// those it hands off: their tasks are to stop.
func (s State) OwnedBy(node string) map[int32]uint64 {
	out := map[int32]uint64{}
	for p, o := range s.Owners {
		if o.Node == node && o.Next == "" {
			out[int32(p)] = o.Epoch
		}
	}
	return out
}

// HandingOff returns the partitions node owns and hands off, with their
// epochs: what it is to release (OpRelease) once their tasks stopped.
func (s State) HandingOff(node string) map[int32]uint64 {
	out := map[int32]uint64{}
	for p, o := range s.Owners {
		if o.Node == node && o.Next != "" {
			out[int32(p)] = o.Epoch
		}
	}
	return out
}

// Owner returns the member that owns partition p.
func (s State) Owner(p int32) (Member, bool) {
	if p < 0 || int(p) >= len(s.Owners) {
		return Member{}, false
	}
	m, ok := s.Members[s.Owners[p].Node]
	return m, ok
}
