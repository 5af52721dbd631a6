package schema

import (
	"strings"
	"testing"

	"github.com/valyala/fastjson"
)

func TestDecodeRead(t *testing.T) {
	var p fastjson.Parser
	r, err := DecodeRead(&p, []byte(`{"event_id":"e1","user_id":"u1","article_id":"a1","session_id":"s1","timestamp":"2026-03-01T10:00:00Z","dwell_ms":4200}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Read{EventID: "e1", UserID: "u1", ArticleID: "a1", SessionID: "s1", Timestamp: 1772359200000, DwellMS: 4200}
	if r != want {
		t.Fatalf("decoded %+v, want %+v", r, want)
	}
	if r, err := DecodeRead(&p, []byte(`{"event_id":"e","user_id":"u","article_id":"a","timestamp":1772359200000}`)); err != nil || r.SessionID != "" || r.DwellMS != 0 {
		t.Fatalf("optional fields: %+v %v", r, err)
	}
	for in, want := range map[string]string{
		`{"user_id":"u","article_id":"a","timestamp":1772359200000}`:                                  `"event_id": missing`,
		`{"event_id":"e","article_id":"a","timestamp":1772359200000}`:                                 `"user_id": missing`,
		`{"event_id":"e","user_id":"u","timestamp":1772359200000}`:                                    `"article_id": missing`,
		`{"event_id":"e","user_id":"u","article_id":"a"}`:                                             `"timestamp": missing`,
		`{"event_id":"e","user_id":"u","article_id":"a","timestamp":1772359200000,"dwell_ms":-1}`:     `"dwell_ms"`,
		`{"event_id":"e","user_id":"u","article_id":"a","timestamp":1772359200000,"dwell_ms":"long"}`: `"dwell_ms"`,
		`{"event_id":"e","user_id":"u","article_id":"a","timestamp":1772359200000,"session_id":7}`:    `"session_id": must be a string`,
		`{"event_id":"e","user_id":"u","article_id":"a","timestamp":12}`:                              `out of range`,
		`[]`: "not a JSON object",
		`{`:  "malformed JSON",
	} {
		if _, err := DecodeRead(&p, []byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", in, err, want)
		}
	}
	if id, ok := UserIDOf(&p, []byte(`{"user_id":"u9"}`)); !ok || id != "u9" {
		t.Errorf("UserIDOf = %q %v", id, ok)
	}
}

func FuzzDecodeRead(f *testing.F) {
	f.Add([]byte(`{"event_id":"e","user_id":"u","article_id":"a","session_id":"s","timestamp":1772359200000,"dwell_ms":5}`))
	f.Add([]byte(`{"dwell_ms":1e99}`))
	var p fastjson.Parser
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := DecodeRead(&p, in)
		if err != nil {
			return
		}
		if r.EventID == "" || r.UserID == "" || r.ArticleID == "" || r.DwellMS < 0 || r.DwellMS > MaxDwell {
			t.Fatalf("accepted %+v", r)
		}
	})
}
