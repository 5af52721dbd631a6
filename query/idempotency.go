package query

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
)

// IdempotencyTopic holds one record per ingestion request that carried an
// Idempotency-Key, keyed by the key's scope (idempotencyScope: a digest of
// the path, the caller and the key, never a raw token), with the digest of
// the request and the response that was given.
const IdempotencyTopic = "newsflow-ingest-idempotency"

// Bounds of the remembered keys. A key costs its 32-byte scope, its
// request digest, the stored response (at most maxStoredResponse bytes: a
// batch's line errors beyond it are cut, the response says so) and about
// 150 bytes of map and list entries: at most about 1.2 KiB, so the default
// 50000 keys (Options.IdempotencyMaxKeys) hold at most about 60 MiB.
const (
	defaultIdempotencyMaxKeys = 50_000
	maxStoredResponse         = 1 << 10
)

type keyAt struct {
	key string
	at  int64
}

type storedResponse struct {
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
	At     int64           `json:"at"`
	// Sum is the digest of the request's path and body
	// (idempotencyRequestSum): a retry must repeat the request.
	Sum []byte `json:"sum"`
}

// idempotency remembers recent Idempotency-Keys and their responses. The
// keys are persisted in IdempotencyTopic, which every node reads on start
// and then follows, so a retry that reaches another node of a cluster finds
// the key too: before it decides that a key is new, a node reads the topic
// up to its end as of the request (catchUp), so a retry sent after the
// first answer came back is always recognised. Two copies of one request
// sent to two nodes at the same instant can both be appended; the
// operators' event-id deduplication still applies their events once.
//
// At most maxKeys keys are remembered, each for the TTL: when a new one
// would exceed the bound, the oldest is forgotten early, and a retry of it
// is then appended again, its events applied once by that deduplication
// (within its horizon) like a retry that reaches a node which could not
// read the topic.
type idempotency struct {
	log     eventlog.Log
	ttl     time.Duration
	now     func() time.Time
	maxKeys int

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

func newIdempotency(l eventlog.Log, ttl time.Duration, maxKeys int, now func() time.Time) *idempotency {
	i := &idempotency{log: l, ttl: ttl, now: now, maxKeys: cmp.Or(max(maxKeys, 0), defaultIdempotencyMaxKeys)}
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
		if len(rec.Key) != sha256.Size || json.Unmarshal(rec.Value, &sr) != nil || len(sr.Sum) != sha256.Size {
			continue // not a scoped key (one recorded by an older version)
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

// marker is the record that persists key's response to the request whose
// digest is sum; it is appended in the same call as the request's events.
func (i *idempotency) marker(key string, sum []byte, status int, body []byte) (*eventlog.Record, *storedResponse) {
	sr := &storedResponse{Status: status, Body: storableResponse(body), At: i.now().UnixMilli(), Sum: sum}
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
	// Beyond the bound the oldest keys go first (order may also list
	// keys remembered again since: those entries are skipped).
	n := 0
	for ; len(i.mu.done) > i.maxKeys && n < len(i.mu.order); n++ {
		k := i.mu.order[n]
		if sr, ok := i.mu.done[k.key]; ok && sr.At == k.at {
			delete(i.mu.done, k.key)
		}
	}
	if n > 0 {
		i.mu.order = append(i.mu.order[:0:0], i.mu.order[n:]...)
	}
}

// len returns the number of keys remembered.
func (i *idempotency) len() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return len(i.mu.done)
}

// idempotencyScope returns the key under which a caller's Idempotency-Key
// is remembered for path: a digest, so that no token is stored and every
// key costs the same.
func idempotencyScope(path []byte, caller, key string) string {
	h := sha256.New()
	for _, part := range [][]byte{path, []byte(caller), []byte(key)} {
		h.Write(binary.AppendUvarint(nil, uint64(len(part))))
		h.Write(part)
	}
	return string(h.Sum(nil))
}

// idempotencyRequestSum is the digest a retry must match: the request's
// path (with its query: ?batch=1 is another request) and body.
func idempotencyRequestSum(path, body []byte) []byte {
	h := sha256.New()
	h.Write(binary.AppendUvarint(nil, uint64(len(path))))
	h.Write(path)
	h.Write(body)
	return h.Sum(nil)
}

// storableResponse returns body, or when it is longer than
// maxStoredResponse the batch response it holds with as many line errors
// as fit and errors_truncated set.
func storableResponse(body []byte) []byte {
	if len(body) <= maxStoredResponse {
		return body
	}
	var res batchResult
	if json.Unmarshal(body, &res) != nil {
		b, _ := json.Marshal(errorBody{Error: "the response was too long to keep for a retry"})
		return b
	}
	res.Truncated = true
	for {
		b, _ := json.Marshal(res)
		if len(b) <= maxStoredResponse || len(res.Errors) == 0 {
			return b
		}
		res.Errors = res.Errors[:len(res.Errors)/2]
	}
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
