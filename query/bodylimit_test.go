package query_test

import (
	"bufio"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// Eight clients that have not logged in post 30 MB login bodies at once:
// each is answered 413 after its headers and the first 64 KiB, before it
// has sent the rest, and the node's heap does not grow by the bodies.
func TestLoginBodyRefusedBeforeRead(t *testing.T) {
	n := newTestNode(t)
	const clients, size, sent = 8, 30 << 20, 64 << 10
	head := fmt.Sprintf("POST /api/v1/auth/login HTTP/1.1\r\nHost: newsflow\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
	chunk := []byte(`{"username":"` + strings.Repeat("a", sent-14))

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	results := make(chan string, clients)
	answered := make(chan struct{}, clients)
	release := make(chan struct{})
	for range clients {
		wg.Go(func() {
			conn, err := n.ln.Dial()
			if err != nil {
				results <- err.Error()
				return
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := conn.Write(append([]byte(head), chunk...)); err != nil {
				results <- "write: " + err.Error()
				return
			}
			// The rest of the 30 MB is never sent: an answer now was given
			// without it.
			var resp fasthttp.Response
			if err := resp.Read(bufio.NewReader(conn)); err != nil {
				results <- "no answer before the body was sent: " + err.Error()
				return
			}
			r := copyResponse(&resp)
			answered <- struct{}{}
			<-release // hold the connection open while the heap is measured
			switch {
			case r.status != fasthttp.StatusRequestEntityTooLarge || !strings.Contains(string(r.body), `"error"`):
				results <- "answer: " + r.String()
			case r.header["Connection"] != "close":
				results <- fmt.Sprintf("connection kept open after a refused body: %v", r.header)
			default:
				results <- ""
			}
		})
	}
	for range clients {
		select {
		case <-answered:
		case r := <-results:
			close(release)
			wg.Wait()
			t.Fatal(r)
		}
	}
	runtime.GC()
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	close(release)
	wg.Wait()
	close(results)
	for r := range results {
		if r != "" {
			t.Error(r)
		}
	}
	if grew := int64(during.HeapAlloc) - int64(before.HeapAlloc); grew > 8<<20 {
		t.Errorf("heap grew by %d MiB for %d refused login bodies", grew>>20, clients)
	}
}

// Each route has its limit: login 4 KiB (chunked bodies cut there too),
// a single event 1 MiB, a batch 32 MiB.
func TestBodyLimitsPerRoute(t *testing.T) {
	n := newTestNode(t)
	big := `{"username":"` + strings.Repeat("a", 5<<10) + `","password":"x"}`
	wantError(t, n.post(t, "/api/v1/auth/login", big), fasthttp.StatusRequestEntityTooLarge, "login, register and setup take at most 4096 bytes")
	wantError(t, n.post(t, "/api/v1/auth//register", big), fasthttp.StatusRequestEntityTooLarge)
	wantError(t, n.post(t, "/accounts/ClientLogin", "Email=ann&Passwd="+strings.Repeat("p", 5<<10), "Content-Type", "application/x-www-form-urlencoded"),
		fasthttp.StatusRequestEntityTooLarge)
	var chunked strings.Builder
	chunked.WriteString("POST /api/v1/auth/login HTTP/1.1\r\nHost: newsflow\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
	for i := 0; i < len(big); i += 1 << 10 {
		c := big[i:min(i+1<<10, len(big))]
		fmt.Fprintf(&chunked, "%x\r\n%s\r\n", len(c), c)
	}
	chunked.WriteString("0\r\n\r\n")
	wantError(t, n.rawRequest(t, chunked.String()), fasthttp.StatusRequestEntityTooLarge)
	// Under the limit, the login is read and answered.
	wantError(t, n.post(t, "/api/v1/auth/login", `{"username":"nobody","password":"wrong password"}`), fasthttp.StatusUnauthorized)

	var lines strings.Builder
	for i := 0; lines.Len() < 2<<20; i++ {
		lines.WriteString(share(fmt.Sprintf("lim-%06d", i), "limits", n.clock.ms(0)) + "\n")
	}
	// Refused on its Content-Length alone (the body is never sent).
	wantError(t, n.rawRequest(t, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: newsflow\r\nContent-Length: %d\r\n\r\n", pathShare, lines.Len())),
		fasthttp.StatusRequestEntityTooLarge, "other requests 1048576")
	if r := n.post(t, pathBatch, lines.String()); r.status != fasthttp.StatusAccepted {
		t.Fatalf("2 MiB batch: %.200s", r)
	}
}
