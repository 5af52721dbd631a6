package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/state"
	"golang.org/x/sync/errgroup"
)

// Standby copies (Spec.Standby). In a cluster, every node that does not
// run a partition of such a stage follows the partition's changelog into
// its local store, commit by commit, the way Kafka Streams keeps standby
// replicas:
//
//   - The copy is exactly the owner's committed state as of some commit:
//     the follower applies whole commits only (FollowChangelog), each in
//     one local batch together with the changelog position after it.
//   - The operator, if it is a Follower, is told of every applied commit
//     and may answer queries from the copy: every node answers them, at
//     most a commit behind the owner, and keeps answering while the owner
//     fails over.
//   - A node that gains the partition stops the follower first, then claims
//     the changelog as any owner does; its restore reads only the tail
//     committed since its copy (restoreChangelog starts from the local
//     position), so moving the task is a claim plus a short tail.
//
// Freshness says how current the state a node reads is: the task's own
// (this node runs it) or the standby copy's.

// Follower is implemented by operators whose Spec sets Standby and that
// answer queries from standby copies.
type Follower interface {
	// Follow is called after a commit of partition p's task was applied to
	// this node's standby copy; r reads the copy (it stays valid and reads
	// the latest applied commit). changes are the commit's state changes in
	// order; nil means the copy was loaded as a whole (the follower
	// started, or started over), so the operator must not rely on having
	// seen earlier changes. Follow is called from one goroutine per
	// partition and never while the partition's task runs on this node; an
	// error restarts the follower from its copy.
	Follow(p int32, r state.Reader, changes []eventlog.Change) error
}

// Freshness says how current the state of a stage partition that this node
// reads is.
type Freshness struct {
	// Source is "task" when this node runs the partition's task and
	// "standby" when it reads a standby copy.
	Source string `json:"source"`
	// Staleness is 0 when the state reflects every input record the log
	// held at the last check; otherwise how long ago the commit it
	// reflects was made. While the owner fails over it grows.
	Staleness time.Duration `json:"-"`
	// Committed is the wall time of the last commit the state reflects.
	Committed time.Time `json:"-"`
}

// freshness is what the task or the follower of one stage partition on
// this node last knew. Safe for concurrent use.
type freshness struct {
	source    atomic.Pointer[string] // nil: this node has no usable state
	committed atomic.Int64           // ms since the epoch
	current   atomic.Bool            // every input record reflected
}

var (
	sourceTask    = "task"
	sourceStandby = "standby"
)

func (f *freshness) set(source *string, committed time.Time, current bool) {
	f.committed.Store(committed.UnixMilli())
	f.current.Store(current)
	f.source.Store(source)
}

func (f *freshness) get(now time.Time) (Freshness, bool) {
	src := f.source.Load()
	if src == nil {
		return Freshness{}, false
	}
	fr := Freshness{Source: *src, Committed: time.UnixMilli(f.committed.Load())}
	if !f.current.Load() {
		fr.Staleness = max(0, now.Sub(fr.Committed))
	}
	return fr, true
}

// Freshness returns how current the state of partition p of stage is on
// this node, and false when the node has none it can read: it neither runs
// the task (restored) nor holds a loaded standby copy.
func (e *Engine) Freshness(stage string, p int32) (Freshness, bool) {
	if !e.built.Load() {
		return Freshness{}, false
	}
	for _, st := range e.stages {
		if st.name == stage && p >= 0 && p < st.partitions {
			return st.fresh[p].get(time.Now())
		}
	}
	return Freshness{}, false
}

// standby is the follower of one stage partition.
type standby struct {
	st     *stage
	p      int32
	cancel context.CancelFunc
	done   chan struct{}
	loaded atomic.Bool // caught up with the changelog once
}

type standbyKey struct {
	stage string
	p     int32
}

// syncStandbys starts a follower for every partition of a Standby stage
// whose engine partition this node does not run, and stops (and waits for)
// those of partitions it runs or is about to run (want). Called from
// runAssigned's goroutine only.
func (e *Engine) syncStandbys(ctx context.Context, run map[int32]bool) {
	for _, st := range e.stages {
		if !st.standby {
			continue
		}
		for sp := int32(0); sp < st.partitions; sp++ {
			k := standbyKey{st.name, sp}
			e.mu.Lock()
			sb := e.mu.standbys[k]
			e.mu.Unlock()
			switch {
			case run[sp%e.opts.Partitions] && sb != nil:
				sb.cancel()
				<-sb.done
				e.mu.Lock()
				delete(e.mu.standbys, k)
				e.mu.Unlock()
			case !run[sp%e.opts.Partitions] && sb == nil && ctx.Err() == nil:
				sctx, cancel := context.WithCancel(ctx)
				sb = &standby{st: st, p: sp, cancel: cancel, done: make(chan struct{})}
				e.mu.Lock()
				e.mu.standbys[k] = sb
				e.mu.Unlock()
				go e.runStandby(sctx, sb)
			}
		}
	}
}

// stopStandbys stops every follower and waits for them.
func (e *Engine) stopStandbys() {
	e.mu.Lock()
	all := e.mu.standbys
	e.mu.standbys = map[standbyKey]*standby{}
	e.mu.Unlock()
	for _, sb := range all {
		sb.cancel()
	}
	for _, sb := range all {
		<-sb.done
	}
}

// runStandby follows the changelog until ctx is done, starting over from
// the local copy after an error, with the tasks' backoff.
func (e *Engine) runStandby(ctx context.Context, sb *standby) {
	defer close(sb.done)
	log := e.opts.Logger.With("stage", sb.st.name, "partition", sb.p)
	backoff := e.opts.RestartBackoff
	for {
		err := e.followOnce(ctx, sb)
		if ctx.Err() != nil {
			return
		}
		log.Warn("standby copy restarting", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, e.opts.MaxRestartBackoff)
	}
}

// followOnce loads the local copy and applies the changelog to it until ctx
// is done or something fails.
func (e *Engine) followOnce(ctx context.Context, sb *standby) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	st, p := sb.st, sb.p
	ns := e.db.Namespace(namespaceName(st.name, p))
	from, written, fresh, err := readChangelogPos(ns, e.opts.ChangelogMaxAge)
	if err == nil && !fresh {
		err = ns.Clear()
		from = 0
	}
	if err != nil {
		return err
	}
	if st.follower != nil {
		if err := st.follower.Follow(p, ns, nil); err != nil {
			return fmt.Errorf("load standby copy: %w", err)
		}
	}
	if written.IsZero() {
		// No copy yet: until a commit comes, it is as stale as the time
		// since now.
		written = time.Now()
	}
	c := &copyInputs{e: e, fr: st.fresh[p], committed: written, next: map[eventlog.TopicPartition]int64{}}
	for _, in := range st.inputs[p] {
		if c.next[in.tp], err = readInt64(ns, offsetKey(in.tp), 0); err != nil {
			return err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-gctx.Done():
				return nil
			case <-t.C:
				if sb.loaded.Load() {
					c.check(gctx)
				}
			}
		}
	})
	g.Go(func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		tp := eventlog.TopicPartition{Topic: ChangelogTopic(st.name), Partition: p}
		cls := e.log.(eventlog.Changelogs)
		err = cls.FollowChangelog(gctx, tp, from, func(b eventlog.ChangelogBatch) error {
			if err := applyBatch(ns, b); err != nil {
				return err
			}
			c.applied(b)
			e.m.standbyChanges.WithLabelValues(st.name).Add(float64(len(b.Changes)))
			if st.follower != nil {
				if err := st.follower.Follow(p, ns, b.Changes); err != nil {
					return fmt.Errorf("follow: %w", err)
				}
			}
			if b.CaughtUp && !sb.loaded.Load() {
				sb.loaded.Store(true)
				e.opts.Logger.Info("standby copy caught up", "stage", st.name, "partition", p, "position", b.Next)
			}
			if sb.loaded.Load() {
				c.check(gctx)
			}
			return nil
		})
		if errors.Is(err, eventlog.ErrChangelogTruncated) {
			e.opts.Logger.Warn("changelog truncated below the standby copy's position; copying from the beginning", "stage", st.name, "partition", p)
			if cerr := ns.Clear(); cerr != nil {
				return cerr
			}
		}
		if err == nil && ctx.Err() == nil {
			err = gctx.Err()
		}
		return err
	})
	return g.Wait()
}

// applyBatch commits a changelog batch to the copy with the position after
// it, in one local batch.
func applyBatch(ns state.Namespace, cb eventlog.ChangelogBatch) error {
	b := ns.NewBatch()
	for _, ch := range cb.Changes {
		var err error
		if ch.Delete {
			err = b.Delete(ch.Key)
		} else {
			err = b.Set(ch.Key, ch.Value)
		}
		if err != nil {
			b.Discard()
			return err
		}
	}
	if err := setChangelogPos(b, cb.Next); err != nil {
		b.Discard()
		return err
	}
	return b.Commit()
}

// copyInputs tracks the input offsets a standby copy reflects, to tell
// whether it is current.
type copyInputs struct {
	e  *Engine
	fr *freshness

	mu        sync.Mutex
	committed time.Time
	next      map[eventlog.TopicPartition]int64
}

// applied records the input offsets and commit time of an applied batch.
func (c *copyInputs) applied(b eventlog.ChangelogBatch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range b.Changes {
		if ch.Delete || len(ch.Value) != 8 || !bytes.HasPrefix(ch.Key, keyOffsetPrefix) {
			continue
		}
		for tp := range c.next {
			if bytes.Equal(ch.Key, offsetKey(tp)) {
				c.next[tp] = int64(binary.BigEndian.Uint64(ch.Value))
			}
		}
	}
	if !b.Committed.IsZero() {
		c.committed = b.Committed
	}
}

// check compares the copy's input offsets with the inputs' ends and
// publishes the copy's freshness. A failed look-up leaves it as it was.
func (c *copyInputs) check(ctx context.Context) {
	c.mu.Lock()
	next, committed := make(map[eventlog.TopicPartition]int64, len(c.next)), c.committed
	for tp, o := range c.next {
		next[tp] = o
	}
	c.mu.Unlock()
	current := true
	for tp, o := range next {
		octx, cancel := context.WithTimeout(ctx, 2*time.Second)
		offs, err := c.e.log.Offsets(octx, tp)
		cancel()
		if err != nil {
			return
		}
		if o < offs.End {
			current = false
		}
	}
	c.fr.set(&sourceStandby, committed, current)
}
