package query

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
)

// IdempotencyTopic holds one record per ingestion request that carried an
// Idempotency-Key, keyed by it, with the response that was given.
const IdempotencyTopic = "newsflow-ingest-idempotency"

type keyAt struct {
	key string
	at  int64
}

type storedResponse struct {
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
	At     int64           `json:"at"`
}

// idempotency remembers recent Idempotency-Keys and their responses. The
// keys are persisted in IdempotencyTopic, which every node reads on start
// and then follows, so a retry that reaches another node of a cluster finds
// the key too: before it decides that a key is new, a node reads the topic
// up to its end as of the request (catchUp), so a retry sent after the
// first answer came back is always recognised. Two copies of one request
// sent to two nodes at the same instant can both be appended; the
// operators' event-id deduplication still applies their events once.
type idempotency struct {
	log eventlog.Log
	ttl time.Duration
	now func() time.Time

	mu struct {
		sync.Mutex
		done     map[string]*storedResponse
		inflight map[string]bool
		// order lists done keys oldest first, for expiry.
		order []keyAt
		// next is the offset of the topic read next; read is closed and
		// replaced whenever it moves.
		next int64
		read chan struct{}
	}
}

func newIdempotency(l eventlog.Log, ttl time.Duration, now func() time.Time) *idempotency {
	i := &idempotency{log: l, ttl: ttl, now: now}
	i.mu.done = map[string]*storedResponse{}
	i.mu.inflight = map[string]bool{}
	i.mu.read = make(chan struct{})
	return i
}

// load reads the keys of the last TTL from the topic and returns a reader
// positioned after them, for follow.
func (i *idempotency) load(ctx context.Context) (eventlog.Reader, error) {
	if _, err := eventlog.EnsureTopic(ctx, i.log, IdempotencyTopic, 1); err != nil {
		return nil, err
	}
	tp := eventlog.TopicPartition{Topic: IdempotencyTopic}
	from, err := i.log.OffsetForTime(ctx, tp, i.now().Add(-i.ttl).UnixMilli())
	if err != nil {
		return nil, err
	}
	end, err := i.log.Offsets(ctx, tp)
	if err != nil {
		return nil, err
	}
	r, err := i.log.NewReader(map[eventlog.TopicPartition]int64{tp: from})
	if err != nil {
		return nil, err
	}
	for next := from; next < end.End; {
		recs, err := r.Poll(ctx, 10000)
		if err != nil {
			r.Close()
			return nil, err
		}
		i.remember(recs)
		next = recs[len(recs)-1].Offset + 1
	}
	i.mu.Lock()
	i.mu.next = max(i.mu.next, from) // records before from are older than the TTL
	i.mu.Unlock()
	return r, nil
}

// follow remembers the keys other nodes (and this one) append, until ctx
// is done; it closes r.
func (i *idempotency) follow(ctx context.Context, r eventlog.Reader) error {
	defer r.Close()
	for {
		recs, err := r.Poll(ctx, 10000)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("follow %s: %w", IdempotencyTopic, err)
		}
		i.remember(recs)
	}
}

func (i *idempotency) remember(recs []*eventlog.Record) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if len(recs) > 0 {
		i.mu.next = recs[len(recs)-1].Offset + 1
		close(i.mu.read)
		i.mu.read = make(chan struct{})
	}
	for _, rec := range recs {
		var sr storedResponse
		if json.Unmarshal(rec.Value, &sr) != nil {
			continue
		}
		key := string(rec.Key)
		if prev, ok := i.mu.done[key]; ok && prev.At == sr.At {
			continue // this node's own, remembered when it answered
		}
		i.rememberLocked(key, &sr)
	}
	i.expireLocked()
}

// catchUp waits until the keys appended to the topic before the call are
// remembered, or ctx ends (then a retry may be taken for new, as before
// the topic could be read).
func (i *idempotency) catchUp(ctx context.Context) error {
	end, err := i.log.Offsets(ctx, eventlog.TopicPartition{Topic: IdempotencyTopic})
	if err != nil {
		return err
	}
	for {
		i.mu.Lock()
		next, read := i.mu.next, i.mu.read
		i.mu.Unlock()
		if next >= end.End {
			return nil
		}
		select {
		case <-read:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// known reports whether key has a stored response.
func (i *idempotency) known(key string) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	_, ok := i.mu.done[key]
	return ok
}

// begin returns the stored response for key, or marks key in flight.
func (i *idempotency) begin(key string) (*storedResponse, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if sr, ok := i.mu.done[key]; ok {
		if time.Duration(i.now().UnixMilli()-sr.At)*time.Millisecond < i.ttl {
			return sr, nil
		}
		delete(i.mu.done, key)
	}
	if i.mu.inflight[key] {
		return nil, errInFlight
	}
	i.mu.inflight[key] = true
	return nil, nil
}

// marker is the record that persists key's response; it is appended in the
// same call as the request's events.
func (i *idempotency) marker(key string, status int, body []byte) (*eventlog.Record, *storedResponse) {
	sr := &storedResponse{Status: status, Body: body, At: i.now().UnixMilli()}
	v, _ := json.Marshal(sr)
	return &eventlog.Record{Topic: IdempotencyTopic, Partition: 0, Key: []byte(key), Value: v, Timestamp: sr.At}, sr
}

// finish records key's response sr (nil when nothing was appended: a
// request that appended nothing can be retried freely).
func (i *idempotency) finish(key string, sr *storedResponse) {
	i.mu.Lock()
	defer i.mu.Unlock()
	delete(i.mu.inflight, key)
	if sr != nil {
		i.rememberLocked(key, sr)
	}
	i.expireLocked()
}

func (i *idempotency) rememberLocked(key string, sr *storedResponse) {
	i.mu.done[key] = sr
	i.mu.order = append(i.mu.order, keyAt{key, sr.At})
}

func (i *idempotency) abort(key string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	delete(i.mu.inflight, key)
}

// expireLocked forgets keys older than the TTL, oldest first; amortised
// O(1) per key.
func (i *idempotency) expireLocked() {
	cut := i.now().Add(-i.ttl).UnixMilli()
	n := 0
	for ; n < len(i.mu.order) && i.mu.order[n].at < cut; n++ {
		k := i.mu.order[n]
		if sr, ok := i.mu.done[k.key]; ok && sr.At == k.at {
			delete(i.mu.done, k.key)
		}
	}
	if n > 0 {
		i.mu.order = append(i.mu.order[:0:0], i.mu.order[n:]...)
	}
}
