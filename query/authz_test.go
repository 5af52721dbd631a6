package query_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
)

// userID returns the id of the session's user.
func userID(t *testing.T, n *testNode, tok string) string {
	t.Helper()
	r := n.do(t, "GET", "/api/v1/me", nil, bearer(tok)...)
	var u struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(r.body, &u); err != nil || u.ID == "" {
		t.Fatalf("me: %s", r)
	}
	return u.ID
}

// readsOnLog returns the user ids of the reads on the reads topic.
func readsOnLog(t *testing.T, n *testNode) []string {
	t.Helper()
	var users []string
	for p := range n.eng.Partitions() {
		for _, rec := range readAll(t, n, eventlog.TopicPartition{Topic: schema.TopicReads, Partition: p}) {
			users = append(users, string(rec.Key))
		}
	}
	return users
}

// A read event is written by its reader's session or by a trusted service
// with the ingestion token; anyone else's is refused and reaches neither
// the log nor the reader's history.
func TestReadsNeedTheReader(t *testing.T) {
	n := newFixtureNode(t)
	var ids []string // known articles, so that reads are not parked
	for _, a := range assignmentsByID(t, n) {
		ids = append(ids, a.id)
	}
	a1, a2, a3 := ids[0], ids[1], ids[2]
	aliceTok := login(t, n, "/api/v1/auth/register", "alice", "correct horse battery")
	bobTok := login(t, n, "/api/v1/auth/register", "bob", "a long enough password")
	alice, bob := userID(t, n, aliceTok), userID(t, n, bobTok)
	ts := n.clock.ms(0)

	wantError(t, n.post(t, "/api/v1/events/read", read("x1", alice, a1, "s", ts), "X-Anonymous", "1"),
		fasthttp.StatusUnauthorized, "session", "ingestion token")
	wantError(t, n.post(t, "/api/v1/events/read/batch", read("x2", alice, a1, "s", ts), "X-Anonymous", "1"),
		fasthttp.StatusUnauthorized, "session")
	wantError(t, n.post(t, "/api/v1/events/read", read("x3", alice, a1, "s", ts), bearer(bobTok)...),
		fasthttp.StatusForbidden, alice, "not the logged-in user")
	// A wrong token is no session.
	wantError(t, n.post(t, "/api/v1/events/read", read("x4", alice, a1, "s", ts), bearer("guess")...), fasthttp.StatusUnauthorized)
	// In a batch, bob's own line is accepted and the one for alice refused.
	r := n.post(t, "/api/v1/events/read/batch", read("x5", alice, a1, "s", ts)+"\n"+read("b1", bob, a1, "s", ts), bearer(bobTok)...)
	res := decodeBatch(t, r)
	if r.status != fasthttp.StatusMultiStatus || *res.Accepted != 1 || len(res.Errors) != 1 || res.Errors[0].Line != 1 ||
		!strings.Contains(res.Errors[0].Error, "not the logged-in user") {
		t.Fatalf("bob's batch: %s", r)
	}
	// Her own session, and a trusted service, may write alice's reads.
	if r := n.post(t, "/api/v1/events/read", read("a-own", alice, a2, "s", ts), bearer(aliceTok)...); r.status != fasthttp.StatusAccepted {
		t.Fatalf("alice's own read: %s", r)
	}
	if r := n.post(t, "/api/v1/events/read", read("a-svc", alice, a3, "s", ts), "Authorization", "Bearer "+testIngestToken); r.status != fasthttp.StatusAccepted {
		t.Fatalf("read through the ingestion token: %s", r)
	}
	got := readsOnLog(t, n)
	if len(got) != 3 || strings.Count(strings.Join(got, ","), alice) != 2 {
		t.Fatalf("reads on the log by user %v, want alice twice and bob once", got)
	}
	// Her history holds her two reads and nothing bob tried.
	testutil.Eventually(t, 10*time.Second, func() error {
		r := n.do(t, "GET", "/api/v1/history", nil, bearer(aliceTok)...)
		var h struct {
			History []struct {
				ArticleID string `json:"article_id"`
			} `json:"history"`
		}
		if err := json.Unmarshal(r.body, &h); err != nil || r.status != fasthttp.StatusOK {
			return fmt.Errorf("history: %s", r)
		}
		if len(h.History) != 2 || h.History[0].ArticleID == a1 || h.History[1].ArticleID == a1 {
			return fmt.Errorf("alice's history %+v, want a2 and a3", h.History)
		}
		return nil
	})
}

// Shares stay open to anonymous clients, but a session shares only as its
// user.
func TestSharesWithASessionAreTheUsers(t *testing.T) {
	n := newTestNode(t, withArticles())
	bobTok := login(t, n, "/api/v1/auth/register", "bob", "a long enough password")
	bob := userID(t, n, bobTok)
	ts := n.clock.ms(0)
	if r := n.post(t, pathShare, share("s1", "art", ts, "user_id", "someone")); r.status != fasthttp.StatusAccepted {
		t.Fatalf("anonymous share: %s", r)
	}
	wantError(t, n.post(t, pathShare, share("s2", "art", ts, "user_id", "alice"), bearer(bobTok)...),
		fasthttp.StatusForbidden, "not the logged-in user")
	if r := n.post(t, pathShare, share("s3", "art", ts, "user_id", bob), bearer(bobTok)...); r.status != fasthttp.StatusAccepted {
		t.Fatalf("bob's own share: %s", r)
	}
	if r := n.post(t, pathShare, share("s4", "art", ts, "user_id", "alice"), "Authorization", "Bearer "+testIngestToken); r.status != fasthttp.StatusAccepted {
		t.Fatalf("share through the ingestion token: %s", r)
	}
	n.waitShares(t, "art", counts(3, 3, 3))
}

// Articles reach every reader: the ingestion token or an admin only.
func TestArticlesNeedIngestOrAdmin(t *testing.T) {
	n := newTestNode(t, withArticles())
	bobTok := login(t, n, "/api/v1/auth/register", "bob", "a long enough password")
	body := `{"url":"https://example.com/a","source_id":"ex","title":"Volcano erupts near Reykjavik"}`
	wantError(t, n.post(t, "/api/v1/articles", body, "X-Anonymous", "1"), fasthttp.StatusUnauthorized, "ingestion token")
	wantError(t, n.post(t, "/api/v1/articles", body, bearer(bobTok)...), fasthttp.StatusForbidden, "bob is not an admin")
	if got := len(readAll(t, n, eventlog.TopicPartition{Topic: schema.TopicArticlesRaw, Partition: 0})); got != 0 {
		for p := range n.eng.Partitions() {
			got += len(readAll(t, n, eventlog.TopicPartition{Topic: schema.TopicArticlesRaw, Partition: p}))
		}
		t.Fatalf("refused articles appended %d records", got)
	}
	for _, tok := range []string{testIngestToken, testAdminToken} {
		if r := n.post(t, "/api/v1/articles", body, "Authorization", "Bearer "+tok); r.status != fasthttp.StatusAccepted {
			t.Fatalf("article with %s: %s", tok, r)
		}
	}
}

// A state-changing request authenticated by the session cookie is refused
// when the browser says it comes from another site; bearer tokens and the
// node's own pages are unaffected.
func TestCrossSiteCookieRequests(t *testing.T) {
	n := newTestNode(t, withQuery(query.Options{TrustedOrigins: []string{"https://reader.example"}, CookieSecure: true}))
	r := n.post(t, "/api/v1/auth/register", `{"username":"ann","password":"a long passphrase"}`)
	if !strings.Contains(strings.ToLower(r.header["Set-Cookie"]), "secure") {
		t.Fatalf("session cookie without Secure under cookie_secure: %q", r.header["Set-Cookie"])
	}
	tok := login(t, n, "/api/v1/auth/login", "ann", "a long passphrase")
	cookie := []string{"Cookie", query.SessionCookie + "=" + tok}
	put := func(topic string, hdr ...string) response {
		return n.do(t, "PUT", "/api/v1/preferences", []byte(`{"topics":["`+topic+`"]}`), append(hdr, cookie...)...)
	}
	for _, c := range []struct {
		name string
		hdr  []string
	}{
		{"evil origin", []string{"Origin", "http://evil.example"}},
		{"cross-site fetch", []string{"Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example"}},
		{"same-site fetch from a sibling", []string{"Sec-Fetch-Site", "same-site", "Origin", "http://other.newsflow"}},
		{"opaque origin", []string{"Origin", "null"}},
	} {
		wantError(t, put("sports", c.hdr...), fasthttp.StatusForbidden, "cross-site request refused")
	}
	if r := n.do(t, "GET", "/api/v1/preferences", nil, cookie...); !strings.Contains(string(r.body), `"topics":[]`) {
		t.Fatalf("preferences changed by a refused request: %s", r)
	}
	for i, hdr := range [][]string{
		{"Origin", "http://newsflow"}, // the node's own page (the test client's Host)
		{"Sec-Fetch-Site", "same-origin", "Origin", "http://newsflow"},
		{"Sec-Fetch-Site", "same-site", "Origin", "https://reader.example"}, // trusted
		{}, // a client that sends neither header
	} {
		if r := put(fmt.Sprint("science", i), hdr...); r.status != fasthttp.StatusOK {
			t.Fatalf("%v: %s", hdr, r)
		}
	}
	// A bearer token cannot be attached by another site's page.
	if r := n.do(t, "PUT", "/api/v1/preferences", []byte(`{"topics":["world"]}`), append(bearer(tok), "Origin", "http://evil.example")...); r.status != fasthttp.StatusOK {
		t.Fatalf("bearer request with a foreign Origin: %s", r)
	}
	// Logging out with the cookie from another site is refused too.
	wantError(t, n.do(t, "POST", "/api/v1/auth/logout", nil, append(cookie, "Origin", "http://evil.example")...), fasthttp.StatusForbidden)
	if r := n.do(t, "GET", "/api/v1/me", nil, cookie...); r.status != fasthttp.StatusOK {
		t.Fatalf("session revoked by a cross-site logout: %s", r)
	}
}
