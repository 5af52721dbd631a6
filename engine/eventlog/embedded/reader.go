package embedded

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/newsflow/newsflow/engine/eventlog"
)

// reader implements [eventlog.Reader].
type reader struct {
	l     *Log
	parts []*partition
	pos   []int64 // next offset to read, per partition
	hw    []int64 // end offsets as last seen, per partition
	rr    int     // partition the next Poll starts with (round robin)

	active []int  // scratch: partitions with records to read
	lo, hi []byte // scratch: iterator bounds

	kick      chan struct{} // buffered 1; appends to the partitions send on it
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

// NewReader implements [eventlog.Log]. Partitions are read in the order of
// topic and partition number, starting with a different one on every Poll.
// A position below the partition's start reads from the start; a negative
// position means the start.
func (l *Log) NewReader(positions map[eventlog.TopicPartition]int64) (eventlog.Reader, error) {
	if l.isClosed.Load() {
		return nil, eventlog.ErrClosed
	}
	tps := make([]eventlog.TopicPartition, 0, len(positions))
	for tp := range positions {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b eventlog.TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	r := &reader{
		l:     l,
		parts: make([]*partition, len(tps)),
		pos:   make([]int64, len(tps)),
		hw:    make([]int64, len(tps)),
		kick:  make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
	for i, tp := range tps {
		p, err := l.partition(tp)
		if err != nil {
			return nil, fmt.Errorf("new reader: %w", err)
		}
		r.parts[i] = p
		r.pos[i] = max(positions[tp], 0)
		r.hw[i] = p.end.Load()
	}
	for _, p := range r.parts {
		p.waiters.Lock()
		p.waiters.kicks[r.kick] = struct{}{}
		p.waiters.Unlock()
	}
	return r, nil
}

// Poll implements [eventlog.Reader]. It returns ctx.Err() if ctx is done,
// even when records are available, and an error wrapping
// [eventlog.ErrClosed] once the reader or the log is closed.
func (r *reader) Poll(ctx context.Context, max int) ([]*eventlog.Record, error) {
	if max <= 0 {
		return nil, fmt.Errorf("poll: max %d is not positive", max)
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		select {
		case <-r.done:
			return nil, fmt.Errorf("poll on closed reader: %w", eventlog.ErrClosed)
		case <-r.l.closedCh:
			return nil, eventlog.ErrClosed
		default:
		}
		recs, err := r.read(max)
		if err != nil || len(recs) > 0 {
			return recs, err
		}
		// An append that publishes after read looked at the end offsets
		// finds the kick channel empty or full, and either way wakes us.
		select {
		case <-r.kick:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-r.done:
			return nil, fmt.Errorf("poll on closed reader: %w", eventlog.ErrClosed)
		case <-r.l.closedCh:
			return nil, eventlog.ErrClosed
		}
	}
}

// read returns up to max committed records without blocking.
func (r *reader) read(max int) ([]*eventlog.Record, error) {
	r.active = r.active[:0]
	for i, p := range r.parts {
		// Records below end were committed before end was published, so the
		// iterator opened below sees them all.
		r.hw[i] = p.end.Load()
		if r.pos[i] < r.hw[i] {
			r.active = append(r.active, i)
		}
	}
	if len(r.active) == 0 {
		return nil, nil
	}

	l := r.l
	l.closeMu.RLock()
	defer l.closeMu.RUnlock()
	if l.closed {
		return nil, eventlog.ErrClosed
	}
	it, err := l.db.NewIter(&pebble.IterOptions{})
	if err != nil {
		return nil, fmt.Errorf("poll: %w", err)
	}
	defer func() { _ = it.Close() }()

	// First every partition with records gets an equal share, then the
	// partitions that had more fill what is left.
	n := len(r.active)
	first := r.rr % n
	r.rr++
	share := (max + n - 1) / n
	out := make([]*eventlog.Record, 0, min(max, 1024))
	for pass := 0; pass < 2 && len(out) < max; pass++ {
		for k := 0; k < n && len(out) < max; k++ {
			limit := max - len(out)
			if pass == 0 {
				limit = min(limit, share)
			}
			if out, err = r.readPartition(it, r.active[(first+k)%n], limit, out); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// readPartition appends up to limit records of partition i to out.
func (r *reader) readPartition(it *pebble.Iterator, i, limit int, out []*eventlog.Record) ([]*eventlog.Record, error) {
	p, pos, end := r.parts[i], r.pos[i], r.hw[i]
	if pos >= end {
		return out, nil
	}
	r.lo = p.recordKey(r.lo[:0], pos)
	r.hi = p.recordKey(r.hi[:0], end)
	it.SetBounds(r.lo, r.hi)
	n := 0
	for valid := it.First(); valid && n < limit; valid = it.Next() {
		off, err := keyOffset(it.Key())
		if err != nil {
			return nil, fmt.Errorf("poll %s: %w", p.tp, err)
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("poll %s@%d: %w", p.tp, off, err)
		}
		rec := &eventlog.Record{Topic: p.tp.Topic, Partition: p.tp.Partition, Offset: off}
		// Copy: Pebble's memory is only valid until the iterator moves.
		if err := decodeRecord(append([]byte(nil), v...), rec); err != nil {
			return nil, fmt.Errorf("poll %s@%d: %w", p.tp, off, err)
		}
		out = append(out, rec)
		pos = off + 1
		n++
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("poll %s: %w", p.tp, err)
	}
	if n == 0 {
		// Nothing is left of [pos, end): retention deleted it, and deleted
		// records never come back.
		pos = end
	}
	r.pos[i] = pos
	return out, nil
}

// HighWatermarks implements [eventlog.Reader].
func (r *reader) HighWatermarks() map[eventlog.TopicPartition]int64 {
	m := make(map[eventlog.TopicPartition]int64, len(r.parts))
	for i, p := range r.parts {
		m[p.tp] = r.hw[i]
	}
	return m
}

// Close implements [eventlog.Reader].
func (r *reader) Close() error {
	r.closeOnce.Do(func() {
		close(r.done)
		for _, p := range r.parts {
			p.waiters.Lock()
			delete(p.waiters.kicks, r.kick)
			p.waiters.Unlock()
		}
	})
	return nil
}
