package query

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/operators/idempotency"
)

// A request with an Idempotency-Key is appended with a marker record that
// the idempotency-keys operator keeps (operators/idempotency): the key's
// scope (idempotencyScope: a digest of the path, the caller and the key,
// never a raw token), the digest of the request and the response that was
// given. Before a key is taken for new, the node looks it up in its copy
// of the key's partition once that holds what the topic held (any node of
// a cluster keeps a copy of every partition), so a retry sent after the
// first answer came back is always recognised, whichever node answered.
// Two copies of one request sent to two nodes at the same instant can both
// be appended; the operators' event-id deduplication still applies their
// events once.

// maxStoredResponse bounds the stored response: a batch's line errors
// beyond it are cut, the response says so.
const maxStoredResponse = 1 << 10

// idempotencyCatchUp bounds the wait for the node's copy of a key's
// partition before a key is taken for new.
const idempotencyCatchUp = 2 * time.Second

// idempotencyKeys is the store of the keys (operators/idempotency);
// nil when the node runs no idempotency-keys operator.
type idempotencyKeys interface {
	Lookup(ctx context.Context, key string) (*idempotency.Response, error)
	Marker(key string, r idempotency.Response) (*eventlog.Record, error)
}

// errNoKeys answers a request with a key on a server without a store of
// keys.
var errNoKeys = errors.New("this node keeps no idempotency keys: send the request without " + HeaderIdempotencyKey)

// keyGuard takes keys for new or finds their responses, and keeps the
// keys of this node's requests in flight.
type keyGuard struct {
	keys   idempotencyKeys
	ttl    time.Duration
	now    func() time.Time
	logger *slog.Logger
	mu     struct {
		sync.Mutex
		inflight map[string]bool
	}
}

func newKeyGuard(keys idempotencyKeys, ttl time.Duration, now func() time.Time, logger *slog.Logger) *keyGuard {
	g := &keyGuard{keys: keys, ttl: ttl, now: now, logger: logger}
	g.mu.inflight = map[string]bool{}
	return g
}

// begin returns the response stored for key within the TTL, or marks key
// in flight. A store that does not answer in time (the partition is
// restoring, the log is slow) leaves the request to the event-id
// deduplication: the key is taken for new.
func (g *keyGuard) begin(key string) (*idempotency.Response, error) {
	if g.keys == nil {
		return nil, errNoKeys
	}
	ctx, cancel := context.WithTimeout(context.Background(), idempotencyCatchUp)
	prev, err := g.keys.Lookup(ctx, key)
	cancel()
	if err != nil {
		g.logger.Warn("idempotency key not looked up; taking it for new", "err", err)
		prev = nil
	}
	if prev != nil && time.Duration(g.now().UnixMilli()-prev.At)*time.Millisecond >= g.ttl {
		prev = nil // older than the TTL, not forgotten yet
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if prev != nil {
		return prev, nil
	}
	if g.mu.inflight[key] {
		return nil, errInFlight
	}
	g.mu.inflight[key] = true
	return nil, nil
}

// marker is the record that persists key's response to the request whose
// digest is sum; it is appended in the same call as the request's events.
func (g *keyGuard) marker(key string, sum []byte, status int, body []byte) (*eventlog.Record, error) {
	return g.keys.Marker(key, idempotency.Response{Status: status, Body: storableResponse(body), At: g.now().UnixMilli(), Sum: sum})
}

// done ends key's request, answered or not.
func (g *keyGuard) done(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.mu.inflight, key)
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
