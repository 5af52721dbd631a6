package embedded

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/newsflow/newsflow/engine/eventlog"
)

func randBytes(rng *rand.Rand, n int) []byte {
	switch rng.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, rng.IntN(n))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func randRecord(rng *rand.Rand) *eventlog.Record {
	r := &eventlog.Record{
		Key:       randBytes(rng, 40),
		Value:     randBytes(rng, 300),
		Timestamp: int64(rng.Uint64()),
	}
	for range rng.IntN(4) {
		r.Headers = append(r.Headers, eventlog.Header{Key: string(randBytes(rng, 10)), Value: randBytes(rng, 20)})
	}
	return r
}

// sameRecord compares the encoded fields, nil and empty apart.
func sameRecord(a, b *eventlog.Record) bool {
	eq := func(x, y []byte) bool { return (x == nil) == (y == nil) && bytes.Equal(x, y) }
	if !eq(a.Key, b.Key) || !eq(a.Value, b.Value) || a.Timestamp != b.Timestamp || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !eq(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

func TestRecordCodecRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		in := randRecord(rng)
		enc := appendRecord([]byte("prefix"), in)[len("prefix"):]
		if len(enc) != encodedLen(in) {
			t.Fatalf("record %d: encoded %d bytes, encodedLen says %d", i, len(enc), encodedLen(in))
		}
		var out eventlog.Record
		if err := decodeRecord(enc, &out); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if !sameRecord(in, &out) {
			t.Fatalf("record %d: got %#v, want %#v", i, out, *in)
		}
		if ts, err := decodeTimestamp(enc); err != nil || ts != in.Timestamp {
			t.Fatalf("record %d: decodeTimestamp = %d, %v", i, ts, err)
		}
	}
}

func TestIntervalCodecRoundTrip(t *testing.T) {
	for _, iv := range []interval{
		{start: 0, end: 1, maxTS: math.MinInt64, bytes: 0},
		{start: 1 << 40, end: 1<<40 + 1024, maxTS: 1700000000000, bytes: 1 << 20},
		{start: 5, end: 5, maxTS: -7, bytes: math.MaxInt64},
	} {
		got, err := decodeInterval(iv.end, encodeInterval(iv))
		if err != nil || got != iv {
			t.Fatalf("decodeInterval(encodeInterval(%+v)) = %+v, %v", iv, got, err)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		f.Add(appendRecord(nil, randRecord(rng)))
	}
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Add([]byte{0, 2, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{3, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var r eventlog.Record
		err := decodeRecord(bytes.Clone(data), &r)
		ts, tsErr := decodeTimestamp(data)
		if err != nil {
			return
		}
		if tsErr != nil || ts != r.Timestamp {
			t.Fatalf("decodeTimestamp = %d, %v; decodeRecord says %d", ts, tsErr, r.Timestamp)
		}
		// What decodes re-encodes to something that decodes the same.
		var again eventlog.Record
		if err := decodeRecord(appendRecord(nil, &r), &again); err != nil || !sameRecord(&r, &again) {
			t.Fatalf("re-encoded record decodes to %#v, %v; want %#v", again, err, r)
		}
		_, _ = decodeInterval(7, data)
	})
}
