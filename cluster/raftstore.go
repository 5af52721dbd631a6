package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

// RaftStore is Raft's durable log and stable store in one Pebble DB: every
// write is synced before it returns, as Raft requires.
//
// Keys: "l" + index (8 bytes, big-endian) for log entries, "s" + key for
// stable values.
type RaftStore struct {
	db *pebble.DB
}

var (
	_ raft.LogStore    = (*RaftStore)(nil)
	_ raft.StableStore = (*RaftStore)(nil)
)

// OpenRaftStore opens (creating if needed) the store in dir.
func OpenRaftStore(dir string) (*RaftStore, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		return nil, fmt.Errorf("raft store: %w", err)
	}
	return &RaftStore{db: db}, nil
}

// Close closes the store.
func (s *RaftStore) Close() error { return s.db.Close() }

func logKey(i uint64) []byte {
	k := make([]byte, 9)
	k[0] = 'l'
	binary.BigEndian.PutUint64(k[1:], i)
	return k
}

// FirstIndex implements raft.LogStore.
func (s *RaftStore) FirstIndex() (uint64, error) { return s.edgeIndex(false) }

// LastIndex implements raft.LogStore.
func (s *RaftStore) LastIndex() (uint64, error) { return s.edgeIndex(true) }

// edgeIndex returns the first or last log index, 0 when there is none.
func (s *RaftStore) edgeIndex(last bool) (uint64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logKey(0), UpperBound: []byte{'l' + 1}})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	ok := it.First()
	if last {
		ok = it.Last()
	}
	if !ok {
		return 0, it.Error()
	}
	return binary.BigEndian.Uint64(it.Key()[1:]), nil
}

// GetLog implements raft.LogStore.
func (s *RaftStore) GetLog(index uint64, l *raft.Log) error {
	v, closer, err := s.db.Get(logKey(index))
	if errors.Is(err, pebble.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return err
	}
	defer closer.Close()
	return decodeLog(index, v, l)
}

// StoreLog implements raft.LogStore.
func (s *RaftStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore: one synced batch.
func (s *RaftStore) StoreLogs(logs []*raft.Log) error {
	b := s.db.NewBatch()
	defer b.Close()
	for _, l := range logs {
		if err := b.Set(logKey(l.Index), encodeLog(l), nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

// DeleteRange implements raft.LogStore (min and max inclusive).
func (s *RaftStore) DeleteRange(lo, hi uint64) error {
	if hi < lo {
		return nil
	}
	end := logKey(hi + 1)
	if hi == ^uint64(0) {
		end = []byte{'l' + 1}
	}
	return s.db.DeleteRange(logKey(lo), end, pebble.Sync)
}

func stableKey(k []byte) []byte { return append([]byte{'s'}, k...) }

// Set implements raft.StableStore.
func (s *RaftStore) Set(k, v []byte) error { return s.db.Set(stableKey(k), v, pebble.Sync) }

// Get implements raft.StableStore; a missing key is an empty value.
func (s *RaftStore) Get(k []byte) ([]byte, error) {
	v, closer, err := s.db.Get(stableKey(k))
	if errors.Is(err, pebble.ErrNotFound) {
		return []byte{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append([]byte{}, v...), nil
}

// SetUint64 implements raft.StableStore.
func (s *RaftStore) SetUint64(k []byte, v uint64) error {
	return s.Set(k, binary.BigEndian.AppendUint64(nil, v))
}

// GetUint64 implements raft.StableStore; a missing key is 0.
func (s *RaftStore) GetUint64(k []byte) (uint64, error) {
	v, err := s.Get(k)
	if err != nil || len(v) == 0 {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raft store: value of %q is %d bytes, not 8", k, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// A log entry is term (8) | type (1) | appended at (8, unix ns) |
// len(data) (uvarint) | data | extensions.
func encodeLog(l *raft.Log) []byte {
	b := make([]byte, 0, 17+binary.MaxVarintLen64+len(l.Data)+len(l.Extensions))
	b = binary.BigEndian.AppendUint64(b, l.Term)
	b = append(b, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = binary.AppendUvarint(b, uint64(len(l.Data)))
	b = append(b, l.Data...)
	return append(b, l.Extensions...)
}

func decodeLog(index uint64, b []byte, l *raft.Log) error {
	if len(b) < 17 {
		return fmt.Errorf("raft store: entry %d is %d bytes", index, len(b))
	}
	*l = raft.Log{Index: index, Term: binary.BigEndian.Uint64(b), Type: raft.LogType(b[8])}
	if at := int64(binary.BigEndian.Uint64(b[9:])); at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	n, w := binary.Uvarint(b[17:])
	if w <= 0 || uint64(len(b)-17-w) < n {
		return fmt.Errorf("raft store: entry %d is corrupt", index)
	}
	rest := b[17+w:]
	l.Data = append([]byte(nil), rest[:n]...)
	if len(rest) > int(n) {
		l.Extensions = append([]byte(nil), rest[n:]...)
	}
	return nil
}

type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
