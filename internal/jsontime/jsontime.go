// Package jsontime writes times in JSON as integer milliseconds since the
// Unix epoch, the one time format of newsflow's HTTP API and of the records
// it keeps in the metadata store, and reads both that and the RFC 3339
// strings that earlier versions wrote.
package jsontime

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"
)

// Millis is a time.Time that JSON encodes as an integer: milliseconds since
// the Unix epoch (sub-millisecond digits are dropped). It decodes such an
// integer, an RFC 3339 string (what earlier versions stored) or null, to
// the instant in UTC. The zero time encodes as null and decodes from null;
// a field tagged omitzero leaves it out.
//
// A struct whose time fields other packages compute with can keep them as
// time.Time and encode them through Millis in its MarshalJSON.
type Millis struct{ time.Time }

// Of is t as JSON will read it back: in UTC, to the millisecond. A time
// stamped with it is the same before it is stored and after.
func Of(t time.Time) Millis { return Millis{t.UTC().Truncate(time.Millisecond)} }

// MarshalJSON writes the time as ms since the epoch, or null if it is zero
// (to the millisecond).
func (m Millis) MarshalJSON() ([]byte, error) {
	if m.Truncate(time.Millisecond).IsZero() {
		return []byte("null"), nil
	}
	return strconv.AppendInt(nil, m.UnixMilli(), 10), nil
}

// errFormat is returned for JSON that is no time.
var errFormat = errors.New("a time must be ms since the epoch (an integer) or an RFC 3339 string")

// UnmarshalJSON reads ms since the epoch, an RFC 3339 string, or null (the
// zero time).
func (m *Millis) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		m.Time = time.Time{}
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return errFormat
		}
		m.Time = t.UTC()
		return nil
	}
	ms, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		// An integer written with a fraction or an exponent (1.7e12).
		f, ferr := strconv.ParseFloat(string(b), 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) >= 1<<63 {
			return errFormat
		}
		ms = int64(f)
	}
	m.Time = time.UnixMilli(ms).UTC()
	return nil
}
