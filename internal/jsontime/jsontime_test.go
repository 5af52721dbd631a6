package jsontime

import (
	"encoding/json"
	"testing"
	"time"
)

func TestUnmarshal(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{`1767323045678`, at},
		{`1.767323045678e12`, at},
		{`"2026-01-02T03:04:05.678Z"`, at},
		{`"2026-01-02T05:04:05.678+02:00"`, at},
		// What time.Time's MarshalJSON wrote before: nanoseconds kept.
		{`"2026-01-02T03:04:05.678901234Z"`, at.Add(901234)},
		{`"2026-01-02T03:04:05Z"`, at.Truncate(time.Second)},
		{`0`, time.Unix(0, 0)},
		{`-1000`, time.Unix(-1, 0)},
		{`null`, time.Time{}},
	} {
		var m Millis
		if err := json.Unmarshal([]byte(tc.in), &m); err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if !m.Equal(tc.want) || (!m.IsZero() && m.Location() != time.UTC) {
			t.Errorf("%s: got %v, want %v in UTC", tc.in, m.Time, tc.want)
		}
	}
	for _, in := range []string{`"yesterday"`, `"1767323045678"`, `1767323045678.5`, `1e30`, `true`, `{}`, `[]`, `""`} {
		var m Millis
		if err := json.Unmarshal([]byte(in), &m); err == nil {
			t.Errorf("%s: decoded to %v, want an error", in, m.Time)
		}
	}
}

func TestMarshal(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 678_901_234, time.FixedZone("CEST", 2*3600))
	for _, tc := range []struct {
		in   Millis
		want string
	}{
		{Millis{at}, `1767315845678`},
		{Millis{time.Unix(0, 0)}, `0`},
		{Millis{time.Unix(-1, 999_999_999)}, `-1`},
		{Millis{}, `null`},
		{Millis{time.Time{}.Add(time.Microsecond)}, `null`},
	} {
		b, err := json.Marshal(tc.in)
		if err != nil || string(b) != tc.want {
			t.Errorf("%v: got %s, %v; want %s", tc.in.Time, b, err, tc.want)
		}
	}
}

func TestOf(t *testing.T) {
	in := time.Date(2026, 1, 2, 5, 4, 5, 678_901_234, time.FixedZone("", 2*3600))
	m := Of(in)
	b, _ := json.Marshal(m)
	var back Millis
	if err := json.Unmarshal(b, &back); err != nil || back != m || !m.Equal(in.Truncate(time.Millisecond)) {
		t.Fatalf("Of(%v) = %v, which reads back as %v (%v)", in, m.Time, back.Time, err)
	}
}

// TestStruct checks what a record reads and writes: old records (RFC 3339)
// decode to the same instants, new ones are integers, a zero optional
// time stays absent, and a second round trip changes nothing.
func TestStruct(t *testing.T) {
	type record struct {
		Created Millis `json:"created_at"`
		Seen    Millis `json:"seen_at,omitzero"`
	}
	old := `{"created_at":"2026-01-02T03:04:05.678Z"}`
	var r record
	if err := json.Unmarshal([]byte(old), &r); err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC); !r.Created.Equal(want) || !r.Seen.IsZero() {
		t.Fatalf("old record decoded to %+v", r)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"created_at":1767323045678}`; string(b) != want {
		t.Fatalf("encoded %s, want %s", b, want)
	}
	var again record
	if err := json.Unmarshal(b, &again); err != nil {
		t.Fatal(err)
	}
	if b2, _ := json.Marshal(again); string(b2) != string(b) || again != r {
		t.Fatalf("second round trip: %s (%+v), want %s (%+v)", b2, again, b, r)
	}
	r.Seen = Millis{time.UnixMilli(1767323046000)}
	if b, _ := json.Marshal(r); string(b) != `{"created_at":1767323045678,"seen_at":1767323046000}` {
		t.Fatalf("encoded %s", b)
	}
	if b, _ := json.Marshal(record{}); string(b) != `{"created_at":null}` {
		t.Fatalf("zero record encoded %s", b)
	}
}

func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{`1767323045678`, `"2026-01-02T03:04:05.678901234Z"`, `null`, `-62135596800000`, `9223372036854775807`, `1e3`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var m Millis
		if json.Unmarshal([]byte(in), &m) != nil {
			return
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("%q decoded to %v, which does not encode: %v", in, m.Time, err)
		}
		var again Millis
		if err := json.Unmarshal(b, &again); err != nil {
			t.Fatalf("%q encoded as %s, which does not decode: %v", in, b, err)
		}
		if !again.Equal(m.Truncate(time.Millisecond)) {
			t.Fatalf("%q: %v, then %s, then %v", in, m.Time, b, again.Time)
		}
		if b2, _ := json.Marshal(again); string(b2) != string(b) {
			t.Fatalf("%q: encoded %s, then %s", in, b, b2)
		}
	})
}
