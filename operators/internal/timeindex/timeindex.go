// Package timeindex keys a task's records by event time for retention:
// prefix, the time (8 bytes big-endian with the sign bit flipped, so that
// keys sort by time, negative times first), then the record's id. A task
// writes Key(prefix, t, id) next to the record and, at each flush, walks
// the keys older than its cutoff with Expired to delete both.
package timeindex

import (
	"encoding/binary"

	"github.com/newsflow/newsflow/state"
)

// Key returns the index key of the record id at time t (ms).
func Key(prefix byte, t int64, id string) []byte {
	return append(binary.BigEndian.AppendUint64([]byte{prefix}, uint64(t)^1<<63), id...)
}

// Parse returns the time and id of a key Key made.
func Parse(k []byte) (t int64, id string) {
	return int64(binary.BigEndian.Uint64(k[1:9]) ^ 1<<63), string(k[9:])
}

// Expired calls fn, in time order, with each key under prefix whose time
// is before cut, its time and its id. It stops at fn's first error.
func Expired(r state.Reader, prefix byte, cut int64, fn func(k []byte, t int64, id string) error) error {
	return r.Scan([]byte{prefix}, Key(prefix, cut, ""), func(k, _ []byte) error {
		if len(k) < 9 {
			return nil
		}
		t, id := Parse(k)
		return fn(k, t, id)
	})
}
