package embedded

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/newsflow/newsflow/engine/eventlog"
)

// appendReq is one Append call on its way to the appender.
type appendReq struct {
	parts   []*partition
	vals    [][]byte // encoded records
	ts      []int64
	bytes   int
	offsets []int64    // filled by the appender
	done    chan error // buffered; the appender never blocks on it
}

// Append implements [eventlog.Log]. Records are validated and encoded in
// the caller's goroutine, then committed by the appender together with
// whatever other Appends are queued. If ctx ends while the records are
// queued or being committed, Append returns ctx.Err() and the records may
// or may not be written; their Offset fields are then left unchanged.
func (l *Log) Append(ctx context.Context, recs []*eventlog.Record) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	topics := l.topicMap()
	req := &appendReq{
		parts:   make([]*partition, len(recs)),
		vals:    make([][]byte, len(recs)),
		ts:      make([]int64, len(recs)),
		offsets: make([]int64, len(recs)),
		done:    make(chan error, 1),
	}
	size := 0
	for i, r := range recs {
		if r == nil {
			return fmt.Errorf("append: record %d is nil", i)
		}
		t := topics[r.Topic]
		if t == nil {
			return fmt.Errorf("append to %s: %w", r.Topic, eventlog.ErrUnknownTopic)
		}
		if r.Partition < 0 || int(r.Partition) >= len(t.parts) {
			return fmt.Errorf("append to %s/%d (topic has %d partitions): %w",
				r.Topic, r.Partition, len(t.parts), eventlog.ErrInvalidPartition)
		}
		req.parts[i] = t.parts[r.Partition]
		req.ts[i] = r.Timestamp
		size += encodedLen(r)
	}
	buf := make([]byte, 0, size)
	for i, r := range recs {
		n := len(buf)
		buf = appendRecord(buf, r)
		req.vals[i] = buf[n:len(buf):len(buf)]
	}
	req.bytes = len(buf) + len(recs)*partKeyLen

	l.closeMu.RLock()
	if l.closed {
		l.closeMu.RUnlock()
		return eventlog.ErrClosed
	}
	select {
	case l.reqs <- req:
		l.closeMu.RUnlock()
	case <-ctx.Done():
		l.closeMu.RUnlock()
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		if err != nil {
			return err
		}
		for i, r := range recs {
			r.Offset = req.offsets[i]
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runAppender is the appender goroutine: it commits queued appends in
// batches and runs retention between them. It returns once Close has
// closed the queue and every queued append is answered.
func (l *Log) runAppender(retentionTick *time.Ticker) {
	defer close(l.appenderDone)
	var tick <-chan time.Time
	if retentionTick != nil {
		defer retentionTick.Stop()
		tick = retentionTick.C
	}
	var batch []*appendReq
	for {
		select {
		case req, ok := <-l.reqs:
			if !ok {
				return
			}
			batch = l.gather(append(batch[:0], req))
			l.commit(batch)
			clear(batch)
		case <-tick:
			if err := l.enforceRetention(); err != nil {
				l.log.Error("retention", "err", err)
			}
		case reply := <-l.retention:
			reply <- l.enforceRetention()
		}
	}
}

// gather adds queued requests to batch until the queue is empty or the
// batch is full.
func (l *Log) gather(batch []*appendReq) []*appendReq {
	n, size := len(batch[0].parts), batch[0].bytes
	for n < l.opts.MaxBatchRecords && size < l.opts.MaxBatchBytes {
		select {
		case req, ok := <-l.reqs:
			if !ok {
				return batch
			}
			batch = append(batch, req)
			n += len(req.parts)
			size += req.bytes
		default:
			return batch
		}
	}
	return batch
}

// commit assigns offsets to the batch's records, writes them and the index
// entries of the intervals they close in one Pebble batch, publishes the new
// end offsets and answers every request.
func (l *Log) commit(reqs []*appendReq) {
	a := &l.app
	if a.failed != nil {
		for _, req := range reqs {
			req.done <- a.failed
		}
		return
	}
	size := 0
	for _, req := range reqs {
		size += req.bytes + 8*len(req.parts)
	}
	b := l.db.NewBatchWithSize(size + 64)
	defer func() { _ = b.Close() }()

	a.gen++
	touched := a.touched[:0]
	for _, req := range reqs {
		for i, p := range req.parts {
			if p.gen != a.gen {
				p.gen = a.gen
				touched = append(touched, p)
			}
			off := p.next
			p.next++
			req.offsets[i] = off
			a.key = p.recordKey(a.key[:0], off)
			_ = b.Set(a.key, req.vals[i], nil) // errors only on a committed batch
			n := int64(len(a.key) + len(req.vals[i]))
			p.size += n
			p.open.bytes += n
			p.open.maxTS = max(p.open.maxTS, req.ts[i])
			if p.next-p.open.start >= int64(l.opts.IndexIntervalRecords) || p.open.bytes >= l.opts.IndexIntervalBytes {
				iv := p.open
				iv.end = p.next
				a.key = p.indexKey(a.key[:0], iv.end)
				_ = b.Set(a.key, encodeInterval(iv), nil)
				p.ivs = append(p.ivs, iv)
				p.open = interval{start: p.next, maxTS: math.MinInt64}
			}
		}
	}
	a.touched = touched

	if err := b.Commit(l.syncOpt); err != nil {
		// Offsets and intervals in memory have moved on and the batch may or
		// may not be on disk: fail every later append. Reopening recovers.
		a.failed = fmt.Errorf("commit appends: %w", err)
		l.log.Error("log failed; reopen to recover", "err", err)
		for _, req := range reqs {
			req.done <- a.failed
		}
		return
	}
	if l.opts.Fsync != FsyncAlways {
		l.unsynced.Add(1)
	}
	for _, p := range touched {
		p.publish()
	}
	clear(a.touched)
	for _, req := range reqs {
		req.done <- nil
	}
}

// enforceRetention deletes, in every partition, the whole intervals that
// retention no longer keeps, and advances the partitions' start offsets.
// It runs in the appender goroutine.
func (l *Log) enforceRetention() error {
	a := &l.app
	if a.failed != nil {
		return a.failed
	}
	byAge := l.opts.RetentionAge > 0
	var cutoff int64
	if byAge {
		cutoff = l.opts.Now().Add(-l.opts.RetentionAge).UnixMilli()
	}
	type cut struct {
		p        *partition
		n        int  // closed intervals to delete
		dropOpen bool // the open interval goes too
		newStart int64
		bytes    int64
	}
	var cuts []cut
	b := l.db.NewBatch()
	defer func() { _ = b.Close() }()
	for _, t := range l.topicMap() {
		for _, p := range t.parts {
			c := cut{p: p}
			if byAge {
				for c.n < len(p.ivs) && p.ivs[c.n].maxTS < cutoff {
					c.bytes += p.ivs[c.n].bytes
					c.n++
				}
				// Like Kafka, an idle partition whose records are all
				// expired is emptied; its end offset is kept in its start key.
				if c.n == len(p.ivs) && p.next > p.open.start && p.open.maxTS < cutoff {
					c.dropOpen = true
					c.bytes += p.open.bytes
				}
			}
			if l.opts.RetentionBytes > 0 && !c.dropOpen {
				for c.n < len(p.ivs) && p.size-c.bytes > l.opts.RetentionBytes {
					c.bytes += p.ivs[c.n].bytes
					c.n++
				}
			}
			switch {
			case c.dropOpen:
				c.newStart = p.next
			case c.n > 0:
				c.newStart = p.ivs[c.n-1].end
			default:
				continue
			}
			_ = b.DeleteRange(p.recordKey(nil, p.start.Load()), p.recordKey(nil, c.newStart), nil)
			_ = b.DeleteRange(p.indexKey(nil, 0), p.indexKey(nil, c.newStart+1), nil)
			_ = b.Set(startKey(p.tid, p.index), binary.BigEndian.AppendUint64(nil, uint64(c.newStart)), nil)
			cuts = append(cuts, c)
		}
	}
	if len(cuts) == 0 {
		return nil
	}
	// Not synced: if the deletion is lost in a crash, the next pass redoes it.
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("commit retention: %w", err)
	}
	l.unsynced.Add(1)
	for _, c := range cuts {
		p := c.p
		from := p.start.Load()
		p.ivs = p.ivs[c.n:]
		if c.dropOpen {
			p.open = interval{start: p.next, maxTS: math.MinInt64}
		}
		p.size -= c.bytes
		p.start.Store(c.newStart)
		p.publish()
		l.log.Debug("retention deleted records", "partition", p.tp.String(),
			"from", from, "to", c.newStart, "bytes", c.bytes)
	}
	return nil
}

// runRetention asks the appender to run a retention pass now and waits for
// it.
func (l *Log) runRetention(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case l.retention <- reply:
	case <-l.appenderDone:
		return eventlog.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
