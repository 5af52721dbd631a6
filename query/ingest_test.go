package query_test

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
)

func TestShareAcceptedAndCounted(t *testing.T) {
	n := newTestNode(t)
	ts := n.clock.ms(-10 * time.Second)
	r := n.post(t, pathShare, share("e1", "a-1", ts, "category", "tech", "share_type", "email"))
	if r.status != fasthttp.StatusAccepted || string(r.body) != `{"accepted":1}` {
		t.Fatalf("POST share: %s, want 202 {\"accepted\":1}", r)
	}
	if ct := r.header["Content-Type"]; ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	if v, ok := r.header["Idempotent-Replayed"]; ok {
		t.Fatalf("first request marked as replayed: %q", v)
	}
	if got := n.appended(t); got != 1 {
		t.Fatalf("appended %d records, want 1", got)
	}

	n.waitShares(t, "a-1", counts(1, 1, 1))
	sh := n.shares(t, "a-1")
	if sh.ArticleID != "a-1" || sh.AsOf != ts {
		t.Fatalf("shares = %+v, want article a-1 as of %d", sh, ts)
	}
	for _, w := range []string{"1m", "1h", "24h"} {
		r := n.get(t, "/api/v1/articles/a-1/shares?window="+w)
		if r.status != fasthttp.StatusOK {
			t.Fatalf("window %s: %s", w, r)
		}
		got := decodeStrict[struct {
			ArticleID string `json:"article_id"`
			Window    string `json:"window"`
			Count     uint64 `json:"count"`
			AsOf      int64  `json:"as_of"`
		}](t, r.body)
		if got.ArticleID != "a-1" || got.Window != w || got.Count != 1 || got.AsOf != ts {
			t.Fatalf("window %s: %s", w, r.body)
		}
	}
	res := n.waitTrending(t, "?window=1h", "a-1:1")
	if res.Window != "1h" || res.AsOf != ts || res.Partial != nil {
		t.Fatalf("trending = %+v", res)
	}
	// The default window is 1h.
	res = n.waitTrending(t, "", "a-1:1")
	if res.Window != "1h" {
		t.Fatalf("default window %q, want 1h", res.Window)
	}
	n.waitTrending(t, "?window=1h&category=tech", "a-1:1")
}

// TestShareValidation posts every kind of invalid event: each gets a 400
// whose JSON message names the problem, and nothing reaches the log.
func TestShareValidation(t *testing.T) {
	n := newTestNode(t)
	now := n.clock.ms(0)
	big := strings.Repeat("y", 512<<10) // under the route's body limit (1 MiB): the event's own limit answers
	long := strings.Repeat("x", 129)
	obj := func(fields string) string {
		return `{` + fields + `}`
	}
	// all fields valid except those overridden: fields are written in order,
	// and the decoder takes the first occurrence of a key.
	ev := func(override string) string {
		base := fmt.Sprintf(`"event_id":"e1","article_id":"a1","user_id":"u1","timestamp":%d`, now)
		if override == "" {
			return obj(base)
		}
		return obj(override + "," + base)
	}
	cases := []struct {
		name, body string
		want       []string
	}{
		{"empty body", ``, []string{"malformed JSON"}},
		{"malformed JSON", `{"event_id":"e1"`, []string{"malformed JSON"}},
		{"trailing garbage", ev("") + `x`, []string{"malformed JSON"}},
		{"two objects", ev("") + ev(""), []string{"malformed JSON"}},
		{"array", `[1,2]`, []string{"not a JSON object"}},
		{"string", `"share"`, []string{"not a JSON object"}},
		{"null", `null`, []string{"not a JSON object"}},
		{"number", `42`, []string{"not a JSON object"}},
		{"missing event_id", fmt.Sprintf(`{"article_id":"a1","user_id":"u1","timestamp":%d}`, now), []string{`"event_id"`, "missing"}},
		{"missing article_id", fmt.Sprintf(`{"event_id":"e1","user_id":"u1","timestamp":%d}`, now), []string{`"article_id"`, "missing"}},
		{"missing user_id", fmt.Sprintf(`{"event_id":"e1","article_id":"a1","timestamp":%d}`, now), []string{`"user_id"`, "missing"}},
		{"missing timestamp", `{"event_id":"e1","article_id":"a1","user_id":"u1"}`, []string{`"timestamp"`, "missing"}},
		{"null article_id", ev(`"article_id":null`), []string{`"article_id"`, "missing"}},
		{"null timestamp", `{"event_id":"e1","article_id":"a1","user_id":"u1","timestamp":null}`, []string{`"timestamp"`, "missing"}},
		{"event_id number", ev(`"event_id":17`), []string{`"event_id"`, "must be a string", "number"}},
		{"article_id number", ev(`"article_id":7`), []string{`"article_id"`, "must be a string", "number"}},
		{"user_id object", ev(`"user_id":{}`), []string{`"user_id"`, "must be a string", "object"}},
		{"category array", ev(`"category":["tech"]`), []string{`"category"`, "must be a string", "array"}},
		{"share_type bool", ev(`"share_type":true`), []string{`"share_type"`, "must be a string"}},
		{"timestamp not RFC 3339", ev(`"timestamp":"yesterday"`), []string{`"timestamp"`, "RFC 3339"}},
		{"timestamp date only", ev(`"timestamp":"2025-11-21"`), []string{`"timestamp"`, "RFC 3339"}},
		{"timestamp digits in a string", ev(fmt.Sprintf(`"timestamp":"%d"`, now)), []string{`"timestamp"`, "RFC 3339"}},
		{"timestamp float", ev(`"timestamp":1.5`), []string{`"timestamp"`, "integer"}},
		{"timestamp float near now", ev(fmt.Sprintf(`"timestamp":%d.5`, now)), []string{`"timestamp"`, "integer"}},
		{"timestamp exponent", ev(`"timestamp":1.7637e12`), []string{`"timestamp"`, "integer"}},
		{"timestamp bool", ev(`"timestamp":true`), []string{`"timestamp"`, "true"}},
		{"timestamp object", ev(`"timestamp":{}`), []string{`"timestamp"`, "object"}},
		{"timestamp out of range", ev(`"timestamp":12`), []string{`"timestamp"`, "out of range"}},
		{"empty event_id", ev(`"event_id":""`), []string{`"event_id"`, "must not be empty"}},
		{"empty article_id", ev(`"article_id":""`), []string{`"article_id"`, "must not be empty"}},
		{"empty user_id", ev(`"user_id":""`), []string{`"user_id"`, "must not be empty"}},
		{"control character in article_id", ev(`"article_id":"a\u0001"`), []string{`"article_id"`, "control characters"}},
		{"tab in user_id", ev(`"user_id":"u\t1"`), []string{`"user_id"`, "control characters"}},
		{"DEL in event_id", ev(`"event_id":"e\u007f"`), []string{`"event_id"`, "control characters"}},
		{"newline in category", ev(`"category":"te\nch"`), []string{`"category"`, "control characters"}},
		{"invalid UTF-8 in article_id", ev("\"article_id\":\"a\xff\""), []string{`"article_id"`, "UTF-8"}},
		{"event_id too long", ev(`"event_id":"` + long + `"`), []string{`"event_id"`, "longer than 128 bytes"}},
		{"article_id too long", ev(`"article_id":"` + long + `"`), []string{`"article_id"`, "longer than 128 bytes"}},
		{"user_id too long", ev(`"user_id":"` + long + `"`), []string{`"user_id"`, "longer than 128 bytes"}},
		{"category too long", ev(`"category":"` + strings.Repeat("c", 65) + `"`), []string{`"category"`, "longer than 64 bytes"}},
		{"share_type too long", ev(`"share_type":"` + strings.Repeat("s", 65) + `"`), []string{`"share_type"`, "longer than 64 bytes"}},
		{"512 KiB extra field", ev(`"x":"` + big + `"`), []string{"larger than 8192 bytes"}},
		{"512 KiB article_id", ev(`"article_id":"` + big + `"`), []string{"larger than 8192 bytes"}},
		{"event just over 8 KiB", ev(`"x":"` + strings.Repeat("y", 8<<10) + `"`), []string{"larger than 8192 bytes"}},
		{"future", share("e1", "a1", now+(5*time.Minute).Milliseconds()+1), []string{`"timestamp"`, "in the future", "limit 5m0s"}},
		{"far future", share("e1", "a1", now+(24*time.Hour).Milliseconds()), []string{`"timestamp"`, "in the future"}},
		{"future RFC 3339", share("e1", "a1", baseTime.Add(time.Hour).Format(time.RFC3339)), []string{`"timestamp"`, "in the future"}},
		{"past", share("e1", "a1", now-(23*time.Hour+45*time.Minute).Milliseconds()-1), []string{`"timestamp"`, "in the past", "limit 23h45m0s"}},
		{"far past", share("e1", "a1", now-(30*24*time.Hour).Milliseconds()), []string{`"timestamp"`, "in the past"}},
		{"past RFC 3339", share("e1", "a1", baseTime.Add(-25*time.Hour).Format(time.RFC3339)), []string{`"timestamp"`, "in the past"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := n.post(t, pathShare, c.body)
			wantError(t, r, fasthttp.StatusBadRequest, c.want...)
			if len(decodeStrict[map[string]string](t, r.body)) != 1 {
				t.Fatalf("error body %s has fields other than error", r.body)
			}
		})
	}
	if got := n.appended(t); got != 0 {
		t.Fatalf("invalid events appended %d records", got)
	}
	m := n.metrics(t)
	if got := m[`newsflow_ingested_events_total{result="rejected",type="share"}`]; got != float64(len(cases)) {
		t.Fatalf("rejected events metric %v, want %d", got, len(cases))
	}
	if got := m[`newsflow_http_requests_total{code="400",route="ingest_share"}`]; got != float64(len(cases)) {
		t.Fatalf("400 responses metric %v, want %d", got, len(cases))
	}
	n.waitShares(t, "a1", counts(0, 0, 0))
}

// TestShareValidEdgeCases posts events at the edges of what is valid.
func TestShareValidEdgeCases(t *testing.T) {
	n := newTestNode(t)
	now := n.clock.ms(0)
	id128 := strings.Repeat("i", 128)
	cases := []struct{ name, body string }{
		{"exactly 5m in the future", share("e1", "edge", now+(5*time.Minute).Milliseconds())},
		{"exactly 23h45m in the past", share("e2", "edge", now-(23*time.Hour+45*time.Minute).Milliseconds())},
		{"RFC 3339", share("e3", "edge", baseTime.Format(time.RFC3339))},
		{"RFC 3339 with fraction and offset", share("e4", "edge", baseTime.In(time.FixedZone("", 2*3600)).Format(time.RFC3339Nano))},
		{"128-byte ids", share(id128, id128, now, "user_id", id128)},
		{"64-byte labels", share("e6", "edge", now, "category", strings.Repeat("c", 64), "share_type", strings.Repeat("s", 64))},
		{"null optional fields", fmt.Sprintf(`{"event_id":"e7","article_id":"edge","user_id":"u","timestamp":%d,"category":null,"share_type":null}`, now)},
		{"unknown fields", fmt.Sprintf(`{"event_id":"e8","article_id":"edge","user_id":"u","timestamp":%d,"extra":{"x":[1,2]}}`, now)},
		{"surrounding whitespace", "\r\n\t " + share("e9", "edge", now) + "\n\n"},
		{"unicode ids", share("é-1", "статья-1", now, "category", "新闻")},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := n.post(t, pathShare, c.body)
			if r.status != fasthttp.StatusAccepted || string(r.body) != `{"accepted":1}` {
				t.Fatalf("%s", r)
			}
			if got := n.appended(t); got != int64(i+1) {
				t.Fatalf("appended %d records, want %d", got, i+1)
			}
		})
	}
	n.waitCaughtUp(t)
	if got := n.shares(t, id128).Counts["1h"]; got != 1 {
		t.Fatalf("128-byte article id counted %d times in 1h, want 1", got)
	}
	// Raw UTF-8 in the path (as curl sends it) finds the article.
	if got := n.shares(t, "статья-1").Counts["1h"]; got != 1 {
		t.Fatalf("unicode article id counted %d times in 1h, want 1", got)
	}
}

// batchResult is the body of a batch response.
type batchResult struct {
	Accepted *int `json:"accepted"`
	Rejected *int `json:"rejected"`
	Errors   []struct {
		Line  int    `json:"line"`
		Error string `json:"error"`
	} `json:"errors"`
	Truncated bool `json:"errors_truncated"`
}

func decodeBatch(t testing.TB, r response) batchResult {
	t.Helper()
	if ct := r.header["Content-Type"]; ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	b := decodeStrict[batchResult](t, r.body)
	if b.Accepted == nil || b.Rejected == nil {
		t.Fatalf("batch response %s lacks accepted or rejected", r.body)
	}
	return b
}

func TestBatchAllValid(t *testing.T) {
	n := newTestNode(t)
	var lines []string
	for i := range 5 {
		// b-0 gets one share, b-1 two, ... in one request.
		for j := range i + 1 {
			lines = append(lines, share(fmt.Sprintf("e%d-%d", i, j), fmt.Sprintf("b-%d", i), n.clock.ms(-time.Duration(j)*time.Second)))
		}
	}
	r := n.post(t, pathBatch, strings.Join(lines, "\n")+"\n")
	if r.status != fasthttp.StatusAccepted || string(r.body) != `{"accepted":15,"rejected":0}` {
		t.Fatalf("batch: %s", r)
	}
	if got := n.appended(t); got != 15 {
		t.Fatalf("appended %d, want 15", got)
	}
	n.waitCaughtUp(t)
	for i := range 5 {
		if got := n.shares(t, fmt.Sprintf("b-%d", i)).Counts; !maps.Equal(got, counts(uint64(i+1), uint64(i+1), uint64(i+1))) {
			t.Fatalf("b-%d counts %v, want %d", i, got, i+1)
		}
	}
	n.waitTrending(t, "?window=1m&k=3", "b-4:5 b-3:4 b-2:3")
}

func TestBatchMixed(t *testing.T) {
	n := newTestNode(t)
	now := n.clock.ms(0)
	body := strings.Join([]string{
		share("m1", "mix", now),      // 1
		`{"event_id":"m2",`,          // 2 malformed
		``,                           // 3 blank, ignored
		share("m3", "mix", now-1000), // 4
		`{"event_id":"m4","article_id":"mix","timestamp":1}`, // 5 missing user_id
		share("m5", "mix", now+time.Hour.Milliseconds()),     // 6 future
		"   \t",                          // 7 blank
		share("m6", "other", now) + "\r", // 8 CRLF line
		`[]`,                             // 9 not an object
		`{"event_id":"m7","article_id":"x","user_id":"u","timestamp":` + strings.Repeat("1", 9000) + `}`, // 10 > 8 KiB
		share("m8", "mix", baseTime.Add(-time.Second).Format(time.RFC3339)),                              // 11, no newline at the end
	}, "\n")
	r := n.post(t, pathBatch, body)
	if r.status != fasthttp.StatusMultiStatus {
		t.Fatalf("mixed batch: %s, want 207", r)
	}
	b := decodeBatch(t, r)
	if *b.Accepted != 4 || *b.Rejected != 5 {
		t.Fatalf("accepted %d rejected %d, want 4 and 5: %s", *b.Accepted, *b.Rejected, r.body)
	}
	wantErrs := []struct {
		line int
		want string
	}{
		{2, "malformed JSON"},
		{5, `"user_id": missing`},
		{6, "in the future"},
		{9, "not a JSON object"},
		{10, "larger than 8192 bytes"},
	}
	if len(b.Errors) != len(wantErrs) {
		t.Fatalf("errors %+v, want lines %v", b.Errors, wantErrs)
	}
	for i, w := range wantErrs {
		if b.Errors[i].Line != w.line || !strings.Contains(b.Errors[i].Error, w.want) {
			t.Errorf("error %d = %+v, want line %d mentioning %q", i, b.Errors[i], w.line, w.want)
		}
	}
	// The valid lines are appended, and counted exactly once.
	if got := n.appended(t); got != 4 {
		t.Fatalf("appended %d, want 4", got)
	}
	n.waitShares(t, "mix", counts(3, 3, 3))
	n.waitShares(t, "other", counts(1, 1, 1))
	n.waitShares(t, "x", counts(0, 0, 0))
	m := n.metrics(t)
	if m[`newsflow_ingested_events_total{result="accepted",type="share"}`] != 4 ||
		m[`newsflow_ingested_events_total{result="rejected",type="share"}`] != 5 {
		t.Fatalf("ingested metrics: %v", m)
	}
}

func TestBatchBlankLinesIgnored(t *testing.T) {
	n := newTestNode(t)
	now := n.clock.ms(0)
	body := "\n\n" + share("b1", "blank", now) + "\n \n\r\n\t\n" + share("b2", "blank", now) + "\n\n"
	r := n.post(t, pathBatch, body)
	if r.status != fasthttp.StatusAccepted || string(r.body) != `{"accepted":2,"rejected":0}` {
		t.Fatalf("%s", r)
	}
	// Line numbers count blank lines.
	r = n.post(t, pathBatch, "\n\n"+share("b3", "blank", now)+"\n\nnope\n")
	b := decodeBatch(t, r)
	if r.status != fasthttp.StatusMultiStatus || *b.Accepted != 1 || *b.Rejected != 1 || len(b.Errors) != 1 || b.Errors[0].Line != 5 {
		t.Fatalf("%s, want the error on line 5", r)
	}
	n.waitShares(t, "blank", counts(3, 3, 3))
}

func TestBatchEmpty(t *testing.T) {
	n := newTestNode(t)
	for _, body := range []string{"", "\n", " \n\t\r\n\n   "} {
		r := n.post(t, pathBatch, body)
		wantError(t, r, fasthttp.StatusBadRequest, "empty batch")
	}
	// A POST without a body at all.
	r := n.do(t, fasthttp.MethodPost, pathBatch, nil)
	wantError(t, r, fasthttp.StatusBadRequest, "empty batch")
	if got := n.appended(t); got != 0 {
		t.Fatalf("appended %d", got)
	}
}

func TestBatchAllInvalid(t *testing.T) {
	n := newTestNode(t)
	// Every rejected line is listed, also beyond a thousand.
	lines := make([]string, 1200)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"event_id":"e%d"}`, i)
	}
	r := n.post(t, pathBatch, strings.Join(lines, "\n"))
	b := decodeBatch(t, r)
	if r.status != fasthttp.StatusBadRequest || *b.Accepted != 0 || *b.Rejected != 1200 {
		t.Fatalf("status %d accepted %d rejected %d", r.status, *b.Accepted, *b.Rejected)
	}
	if len(b.Errors) != 1200 || b.Truncated {
		t.Fatalf("%d errors listed (truncated %v), want all 1200", len(b.Errors), b.Truncated)
	}
	for i, e := range b.Errors {
		if e.Line != i+1 || !strings.Contains(e.Error, `"article_id": missing`) {
			t.Fatalf("error %d: %+v", i, e)
		}
	}
	if got := n.appended(t); got != 0 {
		t.Fatalf("appended %d", got)
	}
}

// TestBatchPartlyAcceptedListsEveryError: a batch of valid lines among
// thousands of invalid ones answers 207, counts the valid lines once,
// and lists every rejected line with its line number and reason, up to
// the documented 100,000; beyond that it says errors_truncated and still
// counts them all.
func TestBatchPartlyAcceptedListsEveryError(t *testing.T) {
	n := newTestNode(t)
	now := n.clock.ms(0)
	const listed = 100_000 // README: the most line errors a response lists
	var lines []string
	valid := map[int]bool{}
	for i := range listed + 7 {
		if i%25_000 == 3 {
			valid[len(lines)+1] = true
			lines = append(lines, share(fmt.Sprintf("p%d", i), "partly", now))
		}
		lines = append(lines, fmt.Sprintf(`{"event_id":"x%d","user_id":"u"}`, i))
	}
	r := n.post(t, pathBatch, strings.Join(lines, "\n"))
	b := decodeBatch(t, r)
	rejected := len(lines) - len(valid)
	if r.status != fasthttp.StatusMultiStatus || *b.Accepted != len(valid) || *b.Rejected != rejected {
		t.Fatalf("status %d accepted %d rejected %d, want 207, %d and %d", r.status, *b.Accepted, *b.Rejected, len(valid), rejected)
	}
	if len(b.Errors) != listed || !b.Truncated {
		t.Fatalf("%d errors listed (truncated %v), want %d and errors_truncated", len(b.Errors), b.Truncated, listed)
	}
	line := 0
	for i, e := range b.Errors {
		line++
		for valid[line] {
			line++
		}
		if e.Line != line || !strings.Contains(e.Error, `"article_id": missing`) {
			t.Fatalf("error %d: %+v, want line %d", i, e, line)
		}
	}
	if got := n.appended(t); got != int64(len(valid)) {
		t.Fatalf("appended %d, want the %d valid lines once", got, len(valid))
	}
	v := uint64(len(valid))
	n.waitShares(t, "partly", counts(v, v, v))

	// Fewer rejected lines than that: each is listed, nothing truncated.
	r = n.post(t, pathBatch, strings.Join([]string{share("q1", "partly2", now), "[]", share("q2", "partly2", now), `{"event_id":`}, "\n"))
	b = decodeBatch(t, r)
	if r.status != fasthttp.StatusMultiStatus || *b.Accepted != 2 || *b.Rejected != 2 || b.Truncated ||
		len(b.Errors) != 2 || b.Errors[0].Line != 2 || b.Errors[1].Line != 4 || !strings.Contains(b.Errors[1].Error, "malformed JSON") {
		t.Fatalf("small mixed batch: %s", r)
	}
	n.waitShares(t, "partly2", counts(2, 2, 2))
}

// oversizedRequests returns raw requests whose bodies are over limit: one
// that announces its size (the server can answer without reading it) for
// each ingestion path, and a chunked one that is cut off when it passes the
// limit.
func oversizedRequests(limit int, line string) map[string]string {
	body := strings.Repeat(line, limit/len(line)+1)
	out := map[string]string{}
	for _, path := range []string{pathBatch, pathShare} {
		out["Content-Length "+path] = fmt.Sprintf("POST %s HTTP/1.1\r\nHost: newsflow\r\nContent-Type: application/x-ndjson\r\nContent-Length: %d\r\n\r\n", path, len(body))
	}
	var chunked strings.Builder
	fmt.Fprintf(&chunked, "POST %s HTTP/1.1\r\nHost: newsflow\r\nTransfer-Encoding: chunked\r\n\r\n", pathBatch)
	for i := 0; i < len(body); i += 8 << 10 {
		c := body[i:min(i+8<<10, len(body))]
		fmt.Fprintf(&chunked, "%x\r\n%s\r\n", len(c), c)
	}
	chunked.WriteString("0\r\n\r\n")
	out["chunked"] = chunked.String()
	return out
}

// TestBodyTooLarge sends bodies over MaxBodyBytes: they are refused and
// nothing is appended. (The status is checked in TestServerErrorsAreJSON.)
func TestBodyTooLarge(t *testing.T) {
	const limit = 64 << 10
	n := newTestNode(t, withQuery(query.Options{MaxBodyBytes: limit}))
	line := share("e-big-00000", "big", n.clock.ms(0)) + "\n"

	// Just under the limit is fine (distinct event ids, so each counts).
	var under strings.Builder
	for i := range (limit - 1) / len(line) {
		under.WriteString(share(fmt.Sprintf("e-big-%05d", i), "big", n.clock.ms(0)) + "\n")
	}
	r := n.post(t, pathBatch, under.String())
	if r.status != fasthttp.StatusAccepted {
		t.Fatalf("batch under the limit: %s", r)
	}
	before := n.appended(t)
	for name, raw := range oversizedRequests(limit, line) {
		r := n.rawRequest(t, raw)
		if r.status < 400 || r.status >= 500 {
			t.Fatalf("%s: %s, want a 4xx", name, r)
		}
		if r.header["Connection"] != "close" {
			t.Fatalf("%s: connection not closed after refusing the body: %v", name, r.header)
		}
	}
	if got := n.appended(t); got != before {
		t.Fatalf("oversized bodies appended %d records", got-before)
	}
	b := uint64(before)
	n.waitShares(t, "big", counts(b, b, b))
}

// TestServerErrorsAreJSON checks what Options.MaxBodyBytes promises
// ("larger requests get 413") and the package's promise that every error is
// a JSON object, for requests fasthttp refuses before any handler runs.
func TestServerErrorsAreJSON(t *testing.T) {
	const limit = 4 << 10
	n := newTestNode(t, withQuery(query.Options{MaxBodyBytes: limit}))
	line := share("e-big", "big", n.clock.ms(0)) + "\n"
	for name, raw := range oversizedRequests(limit, line) {
		t.Run(name, func(t *testing.T) {
			wantError(t, n.rawRequest(t, raw), fasthttp.StatusRequestEntityTooLarge)
		})
	}
	t.Run("malformed request line", func(t *testing.T) {
		r := n.rawRequest(t, "GET /api/v1/trending?window=24 h HTTP/1.1\r\nHost: newsflow\r\n\r\n")
		wantError(t, r, fasthttp.StatusBadRequest)
	})
	t.Run("header too large", func(t *testing.T) {
		r := n.rawRequest(t, "GET /health/live HTTP/1.1\r\nHost: newsflow\r\nX-Big: "+strings.Repeat("h", 8<<10)+"\r\n\r\n")
		wantError(t, r, fasthttp.StatusRequestHeaderFieldsTooLarge)
	})
}

// TestIngestBeforeEngineReady ingests while the engine is not running: the
// events are durable in the log and counted once it runs.
func TestIngestBeforeEngineReady(t *testing.T) {
	dir := t.TempDir()
	clock := newTestClock()
	n := newTestNode(t, withDir(dir), withClock(clock), withoutEngine())
	r := n.post(t, pathBatch, share("e1", "early", clock.ms(0))+"\n"+share("e2", "early", clock.ms(0)))
	if r.status != fasthttp.StatusAccepted {
		t.Fatalf("%s", r)
	}
	n.stop()
	n = newTestNode(t, withDir(dir), withClock(clock))
	n.waitShares(t, "early", counts(2, 2, 2))
}
