package query_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"
)

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

// FuzzShareBatch posts arbitrary bodies to the batch handler of one running
// node and checks the response against the event decoder: valid JSON, a
// known status, every non-blank line either accepted or listed as
// rejected, and exactly the accepted lines appended.
//
// It checks each property of an answer in turn (cyclomatic 27): one
// branch per property.
func FuzzShareBatch(f *testing.F) {
	n := newTestNode(f)
	h := n.srv.Handler()
	now := n.clock.ms(0)
	opts := query.DefaultOptions()

	valid := share("f1", "fz", now)
	f.Add([]byte(valid))
	f.Add([]byte(valid + "\n" + valid + "\n"))
	f.Add([]byte(valid + "\r\n\r\n{\"event_id\":1}\n" + share("f2", "fz2", baseTime.Format(time.RFC3339Nano))))
	f.Add([]byte(""))
	f.Add([]byte("\n \n\t"))
	f.Add([]byte("[]\nnull\n\"x\"\n{}"))
	f.Add([]byte(share("f3", "fz", now+(6*time.Minute).Milliseconds())))
	f.Add([]byte(share("f4", "fz", now-(25*time.Hour).Milliseconds())))
	f.Add([]byte("{\"event_id\":\"e\",\"article_id\":\"a\xff\",\"user_id\":\"u\",\"timestamp\":1763726400000}"))
	f.Add([]byte("{\"event_id\":\"<&>\",\"article_id\":\"\u2028\",\"user_id\":\"u\",\"timestamp\":1763726400000}\n<html>"))
	f.Add([]byte(strings.Repeat("\n", 1100) + strings.Repeat("x\n", 1100)))
	f.Add([]byte(`{"event_id":"e","article_id":"a","user_id":"u","timestamp":1763726400000,"pad":"` + strings.Repeat("p", 9<<10) + `"}`))

	var parser fastjson.Parser
	f.Fuzz(func(t *testing.T, body []byte) {
		before := n.appended(t)
		var req fasthttp.Request
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI(pathBatch)
		req.SetBody(body)
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, nil, discardLogger{})
		h(&ctx)
		status, out := ctx.Response.StatusCode(), ctx.Response.Body()

		if ct := string(ctx.Response.Header.ContentType()); ct != "application/json" {
			t.Fatalf("Content-Type %q", ct)
		}
		if !json.Valid(out) {
			t.Fatalf("response is not JSON: %q", out)
		}
		switch status {
		case fasthttp.StatusAccepted, fasthttp.StatusMultiStatus, fasthttp.StatusBadRequest:
		case fasthttp.StatusRequestEntityTooLarge, fasthttp.StatusServiceUnavailable:
			var e struct{ Error string }
			if json.Unmarshal(out, &e) != nil || e.Error == "" {
				t.Fatalf("%d without an error message: %s", status, out)
			}
			return
		default:
			t.Fatalf("status %d: %s", status, out)
		}

		// What the server should decide, line by line.
		var lines, nonBlank int
		var wantRejected []int
		for i, line := range bytes.Split(body, []byte("\n")) {
			lines = i + 1
			line = bytes.TrimSpace(line)
			if len(line) == 0 {
				continue
			}
			nonBlank++
			s, err := schema.DecodeShare(&parser, line)
			if err == nil {
				err = schema.CheckTime(s.Timestamp, now, opts.MaxPast, opts.MaxFuture)
			}
			if err != nil {
				wantRejected = append(wantRejected, i+1)
			}
		}
		if nonBlank == 0 {
			if status != fasthttp.StatusBadRequest || !bytes.Contains(out, []byte("empty batch")) {
				t.Fatalf("blank body: %d %s", status, out)
			}
			if got := n.appended(t); got != before {
				t.Fatalf("blank body appended %d records", got-before)
			}
			return
		}
		var res batchResult
		d := json.NewDecoder(bytes.NewReader(out))
		d.DisallowUnknownFields()
		if err := d.Decode(&res); err != nil || res.Accepted == nil || res.Rejected == nil {
			t.Fatalf("batch response %s: %v", out, err)
		}
		acc, rej := *res.Accepted, *res.Rejected
		if acc+rej != nonBlank {
			t.Fatalf("accepted %d + rejected %d != %d non-blank lines: %s", acc, rej, nonBlank, out)
		}
		if rej != len(wantRejected) {
			t.Fatalf("rejected %d lines, the decoder rejects %v", rej, wantRejected)
		}
		if (status == fasthttp.StatusAccepted) != (rej == 0) || (status == fasthttp.StatusMultiStatus) != (acc > 0 && rej > 0) {
			t.Fatalf("status %d with %d accepted and %d rejected", status, acc, rej)
		}
		if len(res.Errors) != rej {
			t.Fatalf("%d errors listed for %d rejected lines", len(res.Errors), rej)
		}
		for i, e := range res.Errors {
			if e.Line != wantRejected[i] || e.Line > lines || e.Error == "" {
				t.Fatalf("error %d = %+v, want line %d", i, e, wantRejected[i])
			}
		}
		if got := n.appended(t); got-before != int64(acc) {
			t.Fatalf("appended %d records for %d accepted lines", got-before, acc)
		}
	})
}

// TestHandlerDirect drives Handler the way FuzzShareBatch does, without a
// connection: what it accepts is counted by the running node.
func TestHandlerDirect(t *testing.T) {
	n := newTestNode(t)
	h := n.srv.Handler()
	for i := range 3 {
		var req fasthttp.Request
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI(pathBatch)
		req.SetBody([]byte(share(fmt.Sprint(i), "direct", n.clock.ms(0)) + "\nbad"))
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, nil, discardLogger{})
		h(&ctx)
		if ctx.Response.StatusCode() != fasthttp.StatusMultiStatus {
			t.Fatalf("%d %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
	n.waitShares(t, "direct", counts(3, 3, 3))
}
