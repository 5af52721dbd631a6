package query_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
)

// chunkedBatch renders a raw HTTP/1.1 request that posts body to the share
// batch route with chunked transfer encoding (no Content-Length).
func chunkedBatch(body string, headers ...string) string {
	var b strings.Builder
	b.WriteString("POST " + pathBatch + " HTTP/1.1\r\nHost: newsflow\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n")
	for i := 0; i+1 < len(headers); i += 2 {
		b.WriteString(headers[i] + ": " + headers[i+1] + "\r\n")
	}
	b.WriteString("\r\n")
	for i := 0; i < len(body); i += 16 << 10 {
		c := body[i:min(i+16<<10, len(body))]
		fmt.Fprintf(&b, "%x\r\n%s\r\n", len(c), c)
	}
	b.WriteString("0\r\n\r\n")
	return b.String()
}

// dialNode opens a connection to n's server, closed when the test ends,
// with a 30 s deadline.
func dialNode(t *testing.T, n *testNode) net.Conn {
	t.Helper()
	conn, err := n.ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestBatchStreamed: a share batch is decoded from the connection as it
// arrives: a line too long for the line buffer is rejected and the rest
// taken; a chunked body past the batch limit ends in 413 saying how much
// was appended, and resending what fits counts each event once; with an
// Idempotency-Key the body is read whole and replayed; and a batch's
// lines are appended before its client has sent the end of it.
func TestBatchStreamed(t *testing.T) {
	const limit = 1 << 20
	n := newTestNode(t, withQuery(query.Options{MaxBodyBytes: limit}))
	lines := func(prefix, article string, count int) string {
		var b strings.Builder
		for i := range count {
			b.WriteString(share(fmt.Sprintf("%s-%d", prefix, i), article, n.clock.ms(0)) + "\n")
		}
		return b.String()
	}

	long := share("long", "streamed", n.clock.ms(0), "category", strings.Repeat("c", 70<<10))
	r := n.rawRequest(t, chunkedBatch(lines("s", "streamed", 2)+long+"\n"+lines("t", "streamed", 2)))
	if r.status != fasthttp.StatusMultiStatus || !strings.Contains(string(r.body), `{"line":3,"error":"line longer than 65536 bytes"}`) ||
		!strings.Contains(string(r.body), `"accepted":4`) {
		t.Fatalf("batch with a 70 KiB line: %s", r)
	}
	n.waitShares(t, "streamed", counts(4, 4, 4))

	over := lines("o", "over", 20_000) // about 1.2 MiB
	r = n.rawRequest(t, chunkedBatch(over))
	wantError(t, r, fasthttp.StatusRequestEntityTooLarge, "batches 1048576", "accepted shares of this batch were appended", "resending the whole batch is safe")
	if r.header["Connection"] != "close" {
		t.Fatalf("413 in the middle of a body on a kept-alive connection: %v", r.header)
	}
	appended := n.shares(t, "over").Counts["24h"]
	fits := over[:strings.LastIndexByte(over[:limit], '\n')+1]
	wantFresh(t, n.post(t, pathBatch, fits), fasthttp.StatusAccepted)
	want := uint64(strings.Count(fits, "\n"))
	if appended > want {
		t.Fatalf("%d shares appended before the 413, more than the %d lines under the limit", appended, want)
	}
	n.waitShares(t, "over", counts(want, want, want))

	keyed := chunkedBatch(lines("k", "keyed-stream", 3), query.HeaderIdempotencyKey, "stream-1")
	wantFresh(t, n.rawRequest(t, keyed), fasthttp.StatusAccepted)
	wantReplay(t, n.rawRequest(t, keyed), n.rawRequest(t, keyed))
	n.waitShares(t, "keyed-stream", counts(3, 3, 3))

	// A batch's lines are appended while its client is still sending it:
	// the node holds neither the body nor a record per line until the end.
	conn := dialNode(t, n)
	raw := chunkedBatch(lines("h", "halves", 2*query.IngestChunkRecords))
	// Everything but the last chunk, which ends the body: a server that
	// read bodies whole would not call its handler before it.
	half := strings.LastIndex(raw, "\r\n0\r\n\r\n") + 2
	base := n.appended(t)
	if _, err := conn.Write([]byte(raw[:half])); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := n.appended(t) - base; got < int64(query.IngestChunkRecords) {
			return fmt.Errorf("%d shares of the unfinished batch appended", got)
		}
		return nil
	})
	if _, err := conn.Write([]byte(raw[half:])); err != nil {
		t.Fatal(err)
	}
	var resp fasthttp.Response
	if err := resp.Read(bufio.NewReader(conn)); err != nil {
		t.Fatal(err)
	}
	wantFresh(t, copyResponse(&resp), fasthttp.StatusAccepted)
	c := uint64(2 * query.IngestChunkRecords)
	n.waitShares(t, "halves", counts(c, c, c))
}

// switchDisk is a free-space guard a test fills and empties.
type switchDisk struct{ full atomic.Bool }

func (d *switchDisk) Allow(int) error {
	if d.full.Load() {
		return errors.New("disk nearly full (test)")
	}
	return nil
}

// TestBatchRefusedUnreadKeepsConnection: a streamed batch refused before
// its body is read (507: the disk is full) is answered after the rest of
// the body is read and dropped, so a client still sending it reads the
// answer, not a reset, and its connection serves the next batch; a body
// past the limit still closes it.
func TestBatchRefusedUnreadKeepsConnection(t *testing.T) {
	const limit = 1 << 20
	disk := &switchDisk{}
	n := newTestNode(t, withQuery(query.Options{MaxBodyBytes: limit}), withDisk(disk))
	lines := func(prefix string, count int) string {
		var b strings.Builder
		for i := range count {
			b.WriteString(share(fmt.Sprintf("%s-%d", prefix, i), "refused", n.clock.ms(0)) + "\n")
		}
		return b.String()
	}
	conn := dialNode(t, n)
	br := bufio.NewReader(conn)
	send := func(raw string) response {
		t.Helper()
		if _, err := conn.Write([]byte(raw)); err != nil {
			t.Fatalf("write: %v", err)
		}
		var resp fasthttp.Response
		if err := resp.Read(br); err != nil {
			t.Fatalf("read response: %v", err)
		}
		return copyResponse(&resp)
	}
	disk.full.Store(true)
	r := send(chunkedBatch(lines("a", 5_000))) // about 300 KiB
	wantError(t, r, fasthttp.StatusInsufficientStorage, "disk nearly full", "send it again later")
	if r.header["Connection"] == "close" {
		t.Fatalf("a 507 within the limit closed the connection: %v", r.header)
	}
	disk.full.Store(false)
	wantFresh(t, send(chunkedBatch(lines("b", 3))), fasthttp.StatusAccepted)
	n.waitShares(t, "refused", counts(3, 3, 3))

	disk.full.Store(true)
	r = n.rawRequest(t, chunkedBatch(lines("c", 20_000))) // about 1.2 MiB
	wantError(t, r, fasthttp.StatusInsufficientStorage, "disk nearly full")
	if r.header["Connection"] != "close" {
		t.Fatalf("a 507 on a body past the limit kept the connection: %v", r.header)
	}
}
