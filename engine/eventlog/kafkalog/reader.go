package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/newsflow/newsflow/engine/eventlog"
)

// Reader is an [eventlog.Reader] backed by a consumer client of its own that
// fetches fixed partitions from exact offsets, outside any consumer group.
//
// Poll is for one goroutine at a time; Close and HighWatermarks may be
// called from any goroutine.
type Reader struct {
	cl     *kgo.Client // nil when the reader has no partitions
	log    *slog.Logger
	topics []string
	done   chan struct{} // closed by Close
	closed atomic.Bool
	once   sync.Once

	// Owned by the polling goroutine.
	buf    []*eventlog.Record                // converted records not yet returned
	err    error                             // fetch error to return once buf is empty
	next   map[eventlog.TopicPartition]int64 // lowest offset still to return
	seeded bool                              // high watermarks listed once

	mu struct {
		sync.Mutex
		hwm map[eventlog.TopicPartition]int64
	}
}

func newReader(opts Options, positions map[eventlog.TopicPartition]int64) (*Reader, error) {
	r := &Reader{
		log:  opts.Logger,
		done: make(chan struct{}),
		next: make(map[eventlog.TopicPartition]int64, len(positions)),
	}
	r.mu.hwm = make(map[eventlog.TopicPartition]int64, len(positions))
	if len(positions) == 0 {
		return r, nil
	}
	start := make(map[string]map[int32]kgo.Offset)
	for tp, off := range positions {
		ps := start[tp.Topic]
		if ps == nil {
			ps = make(map[int32]kgo.Offset)
			start[tp.Topic] = ps
			r.topics = append(r.topics, tp.Topic)
		}
		// An exact offset outside the log is bounded to it (kgo lists
		// the start and end first). Negative offsets mean "start" to
		// the eventlog but "end" and friends to kgo.
		if off < 0 {
			ps[tp.Partition] = kgo.NewOffset().AtStart()
		} else {
			ps[tp.Partition] = kgo.NewOffset().At(off)
		}
		r.next[tp] = off
	}
	cl, err := kgo.NewClient(opts.clientOpts(
		kgo.ConsumePartitions(start),
		// If retention deletes records under the reader, resume at the
		// new log start.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// A partition whose start offset had to be re-listed rejoins
		// fetching only after the fetch in flight returns; wait at most
		// as long as Kafka's Java consumer (fetch.max.wait.ms) does,
		// rather than kgo's 5s.
		kgo.FetchMaxWait(500*time.Millisecond),
	)...)
	if err != nil {
		return nil, fmt.Errorf("new reader: %w", err)
	}
	r.cl = cl
	return r, nil
}

// Poll returns up to max records, blocking until there is at least one or
// ctx is done. Records kgo hands over beyond what is returned stay buffered
// for the next Poll. A fetch error that kgo does not retry by itself (for
// example an authorization failure, or data loss detected on the broker) is
// returned once, after the records fetched before it; reading then goes on.
func (r *Reader) Poll(ctx context.Context, max int) ([]*eventlog.Record, error) {
	if max <= 0 {
		return nil, fmt.Errorf("poll: max %d must be positive", max)
	}
	for {
		if r.closed.Load() {
			return nil, eventlog.ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(r.buf) > 0 {
			return r.take(max), nil
		}
		if err := r.err; err != nil {
			r.err = nil
			return nil, err
		}
		if r.cl == nil {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-r.done:
				return nil, eventlog.ErrClosed
			}
		}
		if !r.seeded {
			if err := r.seedHighWatermarks(ctx); err != nil {
				return nil, err
			}
		}
		r.absorb(ctx, r.cl.PollRecords(ctx, max))
	}
}

// take removes and returns the first n <= max buffered records.
func (r *Reader) take(max int) []*eventlog.Record {
	n := min(max, len(r.buf))
	out := r.buf[:n:n]
	r.buf = r.buf[n:]
	if len(r.buf) == 0 {
		r.buf = nil
	}
	return out
}

// absorb converts fetched records into r.buf and adds fetch errors to
// r.err. Errors that only say the poll was interrupted (ctx done,
// client closed) are left for Poll's checks.
func (r *Reader) absorb(ctx context.Context, fs kgo.Fetches) {
	var errs []error
	for i := range fs {
		for j := range fs[i].Topics {
			ft := &fs[i].Topics[j]
			for k := range ft.Partitions {
				fp := &ft.Partitions[k]
				tp := eventlog.TopicPartition{Topic: ft.Topic, Partition: fp.Partition}
				if fp.Err != nil {
					if err := r.fetchErr(ctx, tp, fp.Err); err != nil {
						errs = append(errs, err)
					}
				} else {
					r.observeHighWatermark(tp, fp.HighWatermark)
				}
				for _, kr := range fp.Records {
					// kgo may bound or reset a start offset at or
					// before one we already returned; never return
					// an offset twice or below the requested start.
					if kr.Offset < r.next[tp] {
						continue
					}
					r.next[tp] = kr.Offset + 1
					r.buf = append(r.buf, fromKgo(kr))
				}
			}
		}
	}
	if len(errs) > 0 {
		r.err = errors.Join(append([]error{r.err}, errs...)...)
	}
}

// fetchErr classifies a fetch error: nil for interruptions that Poll
// reports itself, the error to surface otherwise.
func (r *Reader) fetchErr(ctx context.Context, tp eventlog.TopicPartition, err error) error {
	switch {
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return nil
	case errors.Is(err, kgo.ErrClientClosed):
		if r.closed.Load() {
			return nil
		}
		return eventlog.ErrClosed
	}
	var loss *kgo.ErrDataLoss
	if errors.As(err, &loss) && r.log != nil {
		r.log.Warn("kafka: data loss under reader", "partition", tp.String(), "error", err)
	}
	if tp.Topic == "" {
		return fmt.Errorf("read: %w", mapErr(err, false))
	}
	return fmt.Errorf("read %s: %w", tp, mapErr(err, false))
}

// seedHighWatermarks lists the end offsets once, so that HighWatermarks is
// meaningful before the first record arrives. A failure other than ctx's is
// logged and skipped: fetches fill the watermarks in anyway.
func (r *Reader) seedHighWatermarks(ctx context.Context) error {
	lo, err := kadm.NewClient(r.cl).ListEndOffsets(ctx, r.topics...)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if r.closed.Load() {
			return eventlog.ErrClosed
		}
		if r.log != nil {
			r.log.Warn("kafka: list end offsets for reader", "error", err)
		}
	}
	lo.Each(func(o kadm.ListedOffset) {
		tp := eventlog.TopicPartition{Topic: o.Topic, Partition: o.Partition}
		if _, ok := r.next[tp]; ok && o.Err == nil {
			r.observeHighWatermark(tp, o.Offset)
		}
	})
	r.seeded = true
	return nil
}

func (r *Reader) observeHighWatermark(tp eventlog.TopicPartition, hwm int64) {
	if hwm < 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.mu.hwm[tp]; !ok || hwm > old {
		r.mu.hwm[tp] = hwm
	}
}

// HighWatermarks returns the end offset of each partition as last seen in a
// fetch (or listed when polling began). Partitions not yet seen are absent.
func (r *Reader) HighWatermarks() map[eventlog.TopicPartition]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[eventlog.TopicPartition]int64, len(r.mu.hwm))
	for tp, off := range r.mu.hwm {
		out[tp] = off
	}
	return out
}

// Close stops fetching and closes the reader's client. A Poll blocked in
// another goroutine returns an error wrapping [eventlog.ErrClosed]. Close is
// idempotent.
func (r *Reader) Close() error {
	r.once.Do(func() {
		r.closed.Store(true)
		close(r.done)
		if r.cl != nil {
			r.cl.Close()
		}
	})
	return nil
}

func fromKgo(kr *kgo.Record) *eventlog.Record {
	rec := &eventlog.Record{
		Topic:     kr.Topic,
		Partition: kr.Partition,
		Offset:    kr.Offset,
		Key:       kr.Key,
		Value:     kr.Value,
		Timestamp: kr.Timestamp.UnixMilli(),
	}
	if len(kr.Headers) > 0 {
		rec.Headers = make([]eventlog.Header, len(kr.Headers))
		for i, h := range kr.Headers {
			rec.Headers[i] = eventlog.Header{Key: h.Key, Value: h.Value}
		}
	}
	return rec
}
