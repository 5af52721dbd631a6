package schema

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fastjson"
)

func TestDecodeShare(t *testing.T) {
	var p fastjson.Parser
	good := `{"event_id":"e1","article_id":"a1","user_id":"u1","share_type":"email","category":"tech","timestamp":1763700000000}`
	s, err := DecodeShare(&p, []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	want := Share{EventID: "e1", ArticleID: "a1", UserID: "u1", ShareType: "email", Category: "tech", Timestamp: 1763700000000}
	if s != want {
		t.Fatalf("got %+v, want %+v", s, want)
	}
	s, err = DecodeShare(&p, []byte(`{"event_id":"e1","article_id":"a1","user_id":"u1","timestamp":"2025-11-21T04:40:00.5Z"}`))
	if err != nil || s.Timestamp != time.Date(2025, 11, 21, 4, 40, 0, 5e8, time.UTC).UnixMilli() {
		t.Fatalf("RFC 3339 timestamp: %+v, %v", s, err)
	}

	bad := []struct{ in, want string }{
		{`{"event_id":"e1"`, "malformed JSON"},
		{`[1,2]`, "not a JSON object"},
		{`{"article_id":"a1","user_id":"u1","timestamp":1763700000000}`, `"event_id": missing`},
		{`{"event_id":"e1","article_id":7,"user_id":"u1","timestamp":1763700000000}`, `"article_id": must be a string, got number`},
		{`{"event_id":"e1","article_id":"","user_id":"u1","timestamp":1763700000000}`, `"article_id": must not be empty`},
		{`{"event_id":"e1","article_id":"a1","user_id":"u1","timestamp":"yesterday"}`, `"timestamp": not an RFC 3339 time`},
		{`{"event_id":"e1","article_id":"a1","user_id":"u1","timestamp":1.5}`, `"timestamp": must be an integer`},
		{`{"event_id":"e1","article_id":"a1","user_id":"u1","timestamp":true}`, `got true`},
		{`{"event_id":"e1","article_id":"a1","user_id":"u1","timestamp":12}`, "out of range"},
		{`{"event_id":"e1","article_id":"a1","user_id":"u1"}`, `"timestamp": missing`},
		{`{"event_id":"e1","article_id":"a\u0001","user_id":"u1","timestamp":1763700000000}`, "control characters"},
		{`{"event_id":"e1","article_id":"` + strings.Repeat("x", 200) + `","user_id":"u1","timestamp":1763700000000}`, "longer than 128 bytes"},
	}
	for _, c := range bad {
		_, err := DecodeShare(&p, []byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("DecodeShare(%.60s) = %v, want error containing %q", c.in, err, c.want)
		}
	}
	_, err = DecodeShare(&p, []byte(`{"x":"`+strings.Repeat("y", 1<<20)+`"}`))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("1 MiB event: %v, want ErrTooLarge", err)
	}
}

func TestCheckTime(t *testing.T) {
	ref := int64(1763700000000)
	if err := CheckTime(ref-1000, ref, time.Hour, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := CheckTime(ref+2*time.Minute.Milliseconds(), ref, time.Hour, time.Minute); err == nil || !strings.Contains(err.Error(), "future") {
		t.Fatalf("future: %v", err)
	}
	if err := CheckTime(ref-2*time.Hour.Milliseconds(), ref, time.Hour, time.Minute); err == nil || !strings.Contains(err.Error(), "past") {
		t.Fatalf("past: %v", err)
	}
}

func FuzzDecodeShare(f *testing.F) {
	f.Add([]byte(`{"event_id":"e1","article_id":"a1","user_id":"u1","share_type":"email","category":"tech","timestamp":1763700000000}`))
	f.Add([]byte(`{"event_id":"e1","article_id":"a1","user_id":"u1","timestamp":"2025-11-21T04:40:00Z"}`))
	f.Add([]byte(`{"timestamp":1e30}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var p fastjson.Parser
		s, err := DecodeShare(&p, data)
		if err != nil {
			return
		}
		// Whatever decodes must satisfy the schema.
		if s.EventID == "" || s.ArticleID == "" || s.UserID == "" || len(s.ArticleID) > MaxIDBytes {
			t.Fatalf("accepted invalid share %+v", s)
		}
		if s.Timestamp < minTimestamp || s.Timestamp >= maxTimestamp {
			t.Fatalf("accepted timestamp %d", s.Timestamp)
		}
		if id, ok := ArticleIDOf(&p, data); !ok || id != s.ArticleID {
			t.Fatalf("ArticleIDOf = %q, %v; DecodeShare found %q", id, ok, s.ArticleID)
		}
	})
}

func TestArticleTopics(t *testing.T) {
	var p fastjson.Parser
	content := strings.Repeat("long text ", 2000) // articles are larger than events
	id, topics, err := ArticleTopics(&p, []byte(`{"id":"a1","title":"T","content":"`+content+`","topics":[{"topic":"science","confidence":0.7},{"topic":"tech","confidence":0.3},{"topic":"science","confidence":0.1}]}`))
	if err != nil || id != "a1" || strings.Join(topics, ",") != "science,tech" {
		t.Fatalf("got %q %v %v", id, topics, err)
	}
	for _, in := range []string{`{"id":"a2"}`, `{"id":"a2","topics":null}`, `{"id":"a2","topics":[]}`} {
		if id, topics, err := ArticleTopics(&p, []byte(in)); err != nil || id != "a2" || len(topics) != 0 {
			t.Errorf("%s: %q %v %v", in, id, topics, err)
		}
	}
	bad := []struct{ in, want string }{
		{`{"id":`, "malformed JSON"},
		{`"a1"`, "not a JSON object"},
		{`{"topics":[]}`, `"id": missing`},
		{`{"id":"a1","topics":{"topic":"x"}}`, `"topics": must be an array`},
		{`{"id":"a1","topics":["science"]}`, `"topics[0]": must be an object`},
		{`{"id":"a1","topics":[{"confidence":1}]}`, `topics[0]: field "topic": missing`},
		{`{"id":"a1","topics":[{"topic":"sci\u0000ence"}]}`, "control characters"},
		{`{"id":"a1","topics":[{"topic":"` + strings.Repeat("x", 65) + `"}]}`, "longer than 64 bytes"},
	}
	for _, c := range bad {
		if _, _, err := ArticleTopics(&p, []byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ArticleTopics(%.60s) = %v, want error containing %q", c.in, err, c.want)
		}
	}
	var many []string
	for i := range MaxArticleTopics + 3 {
		many = append(many, `{"topic":"t`+strings.Repeat("x", i)+`"}`)
	}
	if _, topics, err := ArticleTopics(&p, []byte(`{"id":"a1","topics":[`+strings.Join(many, ",")+`]}`)); err != nil || len(topics) != MaxArticleTopics {
		t.Fatalf("%d topics, %v", len(topics), err)
	}
}
