package query_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
)

// withTCP serves the node on a loopback TCP listener, so that requests
// have an IP peer (the in-memory listener's has none).
func withTCP(t testing.TB) func(*nodeOptions) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return func(o *nodeOptions) { o.listener = ln }
}

func from(addr string) []string { return []string{"X-Forwarded-For", addr} }

// One client failing on a username again and again never keeps its owner
// out: the owner's correct password from another client works throughout,
// while the attacking client is backed off.
func TestLoginOwnerNotLockedOut(t *testing.T) {
	n := newTestNode(t, withTCP(t), withQuery(query.Options{TrustedProxies: []string{"127.0.0.1/32"}}))
	const owner, attacker = "203.0.113.10", "198.51.100.66"
	if r := n.post(t, "/api/v1/auth/register", `{"username":"carol","password":"carol's long password"}`, from(owner)...); r.status != fasthttp.StatusCreated {
		t.Fatalf("register: %s", r)
	}
	refused := 0
	for i := range 40 {
		r := n.post(t, "/api/v1/auth/login", fmt.Sprintf(`{"username":"carol","password":"wrong guess %d"}`, i), from(attacker)...)
		switch r.status {
		case fasthttp.StatusUnauthorized:
		case fasthttp.StatusTooManyRequests:
			refused++
		default:
			t.Fatalf("attacker's try %d: %s", i, r)
		}
		if i%4 == 0 {
			r := n.post(t, "/api/v1/auth/login", `{"username":"carol","password":"carol's long password"}`, from(owner)...)
			if r.status != fasthttp.StatusOK {
				t.Fatalf("the owner's login after %d wrong tries from another client: %s", i+1, r)
			}
		}
		n.clock.Advance(10 * time.Second) // 10s between tries: the address's bucket refills, the backoff does not
	}
	if refused < 30 {
		t.Fatalf("the attacking client was refused %d of 40 tries", refused)
	}
	// Even the right password waits from the attacking client.
	wantError(t, n.post(t, "/api/v1/auth/login", `{"username":"carol","password":"carol's long password"}`, from(attacker)...), fasthttp.StatusTooManyRequests)
}

// X-Forwarded-For counts only from a trusted proxy: without one, a client
// that writes a new address in every request is still one client.
func TestLoginForwardedForNotTrusted(t *testing.T) {
	n := newTestNode(t, withTCP(t))
	login(t, n, "/api/v1/auth/register", "dave", "dave's long password")
	for i := range 12 {
		r := n.post(t, "/api/v1/auth/login", fmt.Sprintf(`{"username":"dave","password":"wrong %d"}`, i), from(fmt.Sprintf("198.51.100.%d", i))...)
		if r.status == fasthttp.StatusTooManyRequests {
			return
		}
	}
	t.Fatal("12 wrong tries with a forged X-Forwarded-For each and no 429: the header was believed")
}

// Behind a trusted proxy, every limit counts the forwarded client: two
// anonymous clients have a share budget each, and a client cannot buy a
// new one by writing its own X-Forwarded-For entry.
func TestShareLimitPerForwardedClient(t *testing.T) {
	n := newTestNode(t, withTCP(t), withQuery(query.Options{TrustedProxies: []string{"127.0.0.1"},
		RateLimits: query.RateLimits{SharesPerIP: 0.001, BurstSharesIP: 3}}))
	now := n.clock.ms(0)
	post := func(id, xff string) int {
		return n.post(t, pathShare, share(id, "fwd", now), append(from(xff), "X-Anonymous", "1")...).status
	}
	for i := range 3 {
		if s := post(fmt.Sprintf("a%d", i), "198.51.100.1"); s != fasthttp.StatusAccepted {
			t.Fatalf("client A share %d: %d", i, s)
		}
	}
	if s := post("a-over", "198.51.100.1"); s != fasthttp.StatusTooManyRequests {
		t.Fatalf("client A over its budget: %d", s)
	}
	if s := post("a-forged", "6.6.6.6, 198.51.100.1"); s != fasthttp.StatusTooManyRequests {
		t.Fatalf("client A with its own X-Forwarded-For entry: %d", s)
	}
	for i := range 3 {
		if s := post(fmt.Sprintf("b%d", i), "203.0.113.2"); s != fasthttp.StatusAccepted {
			t.Fatalf("client B share %d: %d", i, s)
		}
	}
	n.waitShares(t, "fwd", counts(6, 6, 6))
}
