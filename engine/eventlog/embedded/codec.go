package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/newsflow/newsflow/engine/eventlog"
)

// Key prefixes. See the package documentation for the layout.
const (
	prefixRecord byte = 'r'
	prefixIndex  byte = 'i'
	prefixMeta   byte = 'm'

	metaVersion byte = 'v'
	metaTopic   byte = 't'
	metaStart   byte = 's'

	formatVersion byte = 1

	// partKeyLen is the length of a record or index key.
	partKeyLen = 1 + 4 + 4 + 8
)

var (
	versionKey     = []byte{prefixMeta, metaVersion}
	topicKeyPrefix = []byte{prefixMeta, metaTopic}
)

// appendPartKey appends the record or index key of offset off in partition
// (tid, part) to dst.
func appendPartKey(dst []byte, prefix byte, tid, part uint32, off uint64) []byte {
	dst = append(dst, prefix)
	dst = binary.BigEndian.AppendUint32(dst, tid)
	dst = binary.BigEndian.AppendUint32(dst, part)
	return binary.BigEndian.AppendUint64(dst, off)
}

// keyOffset returns the offset of a record or index key.
func keyOffset(key []byte) (int64, error) {
	if len(key) != partKeyLen {
		return 0, fmt.Errorf("key %x has length %d, want %d", key, len(key), partKeyLen)
	}
	off := binary.BigEndian.Uint64(key[partKeyLen-8:])
	if off > math.MaxInt64 {
		return 0, fmt.Errorf("key %x: offset out of range", key)
	}
	return int64(off), nil
}

func topicKey(name string) []byte {
	return append(append([]byte(nil), topicKeyPrefix...), name...)
}

func encodeTopic(id uint32, partitions int32) []byte {
	v := binary.BigEndian.AppendUint32(nil, id)
	return binary.BigEndian.AppendUint32(v, uint32(partitions))
}

func decodeTopic(v []byte) (id uint32, partitions int32, err error) {
	if len(v) != 8 {
		return 0, 0, fmt.Errorf("topic value has length %d, want 8", len(v))
	}
	id = binary.BigEndian.Uint32(v)
	n := binary.BigEndian.Uint32(v[4:])
	if n == 0 || n > math.MaxInt32 {
		return 0, 0, fmt.Errorf("topic value: partition count %d out of range", n)
	}
	return id, int32(n), nil
}

func startKey(tid, part uint32) []byte {
	k := []byte{prefixMeta, metaStart}
	k = binary.BigEndian.AppendUint32(k, tid)
	return binary.BigEndian.AppendUint32(k, part)
}

// interval is a run of consecutive offsets [start, end) of one partition,
// the unit of retention and of the time index.
type interval struct {
	start, end int64
	maxTS      int64 // largest timestamp in the interval; math.MinInt64 if empty
	bytes      int64 // key and value bytes of its records in Pebble
}

// encodeInterval encodes an index entry's value; its end is in the key.
func encodeInterval(iv interval) []byte {
	v := make([]byte, 0, 3*binary.MaxVarintLen64)
	v = binary.AppendUvarint(v, uint64(iv.start))
	v = binary.AppendVarint(v, iv.maxTS)
	return binary.AppendUvarint(v, uint64(iv.bytes))
}

func decodeInterval(end int64, v []byte) (interval, error) {
	iv := interval{end: end}
	start, n := binary.Uvarint(v)
	if n <= 0 || start > uint64(end) {
		return iv, errors.New("index entry: bad start offset")
	}
	v = v[n:]
	maxTS, n := binary.Varint(v)
	if n <= 0 {
		return iv, errors.New("index entry: bad timestamp")
	}
	v = v[n:]
	size, n := binary.Uvarint(v)
	if n <= 0 || n != len(v) || size > math.MaxInt64 {
		return iv, errors.New("index entry: bad size")
	}
	iv.start, iv.maxTS, iv.bytes = int64(start), maxTS, int64(size)
	return iv, nil
}

// Record value flags.
const (
	flagNilKey   = 1 << 0
	flagNilValue = 1 << 1
	knownFlags   = flagNilKey | flagNilValue
)

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

func varintLen(x int64) int {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	return uvarintLen(ux)
}

// encodedLen returns the exact length appendRecord adds for r.
func encodedLen(r *eventlog.Record) int {
	n := 1 + varintLen(r.Timestamp) + uvarintLen(uint64(len(r.Key))) + len(r.Key) +
		uvarintLen(uint64(len(r.Headers))) + len(r.Value)
	for _, h := range r.Headers {
		n += uvarintLen(uint64(len(h.Key))) + len(h.Key)
		n += uvarintLen(uint64(len(h.Value))+1) + len(h.Value)
	}
	return n
}

// appendRecord appends the value encoding of r (everything but topic,
// partition and offset) to dst.
func appendRecord(dst []byte, r *eventlog.Record) []byte {
	var flags byte
	if r.Key == nil {
		flags |= flagNilKey
	}
	if r.Value == nil {
		flags |= flagNilValue
	}
	dst = append(dst, flags)
	dst = binary.AppendVarint(dst, r.Timestamp)
	dst = binary.AppendUvarint(dst, uint64(len(r.Key)))
	dst = append(dst, r.Key...)
	dst = binary.AppendUvarint(dst, uint64(len(r.Headers)))
	for _, h := range r.Headers {
		dst = binary.AppendUvarint(dst, uint64(len(h.Key)))
		dst = append(dst, h.Key...)
		if h.Value == nil {
			dst = binary.AppendUvarint(dst, 0)
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(len(h.Value))+1)
		dst = append(dst, h.Value...)
	}
	return append(dst, r.Value...)
}

var errCorrupt = errors.New("corrupt record")

// decodeTimestamp returns the timestamp of an encoded record without
// decoding the rest.
func decodeTimestamp(b []byte) (int64, error) {
	if len(b) < 2 || b[0]&^knownFlags != 0 {
		return 0, errCorrupt
	}
	ts, n := binary.Varint(b[1:])
	if n <= 0 {
		return 0, errCorrupt
	}
	return ts, nil
}

// decodeRecord decodes an encoded record into r's Key, Value, Timestamp and
// Headers. The byte slices of r alias b (with capacity clipped, so appending
// to one never overwrites another); b must be owned by the caller.
func decodeRecord(b []byte, r *eventlog.Record) error {
	if len(b) < 1 || b[0]&^knownFlags != 0 {
		return errCorrupt
	}
	flags := b[0]
	b = b[1:]
	ts, n := binary.Varint(b)
	if n <= 0 {
		return errCorrupt
	}
	b = b[n:]
	key, b, ok := readBytes(b, false)
	if !ok {
		return errCorrupt
	}
	if flags&flagNilKey != 0 {
		if len(key) != 0 {
			return errCorrupt
		}
		key = nil
	} else if key == nil {
		key = []byte{}
	}
	nh, n := binary.Uvarint(b)
	if n <= 0 {
		return errCorrupt
	}
	b = b[n:]
	// Every header takes at least two bytes; this bounds the allocation.
	if nh > uint64(len(b)/2) {
		return errCorrupt
	}
	var headers []eventlog.Header
	if nh > 0 {
		headers = make([]eventlog.Header, nh)
		for i := range headers {
			var hk, hv []byte
			if hk, b, ok = readBytes(b, false); !ok {
				return errCorrupt
			}
			if hv, b, ok = readBytes(b, true); !ok {
				return errCorrupt
			}
			headers[i] = eventlog.Header{Key: string(hk), Value: hv}
		}
	}
	value := b[:len(b):len(b)]
	if flags&flagNilValue != 0 {
		if len(value) != 0 {
			return errCorrupt
		}
		value = nil
	}
	r.Timestamp, r.Key, r.Value, r.Headers = ts, key, value, headers
	return nil
}

// readBytes reads a uvarint length and that many bytes from b. With
// nullable, the length is stored plus one and 0 means nil. A non-nil empty
// result is returned as a non-nil empty slice.
func readBytes(b []byte, nullable bool) (field, rest []byte, ok bool) {
	l, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, nil, false
	}
	b = b[n:]
	if nullable {
		if l == 0 {
			return nil, b, true
		}
		l--
	}
	if l > uint64(len(b)) {
		return nil, nil, false
	}
	return b[:l:l], b[l:], true
}
