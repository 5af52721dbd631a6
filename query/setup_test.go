package query_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/crawl"
	"github.com/newsflow/newsflow/query"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/valyala/fasthttp"
)

const testSetupToken = "test-setup-token-0123456789"

func setupStatus(t *testing.T, n *testNode) query.SetupStatus {
	t.Helper()
	r := n.get(t, "/api/v1/setup")
	if r.status != fasthttp.StatusOK {
		t.Fatalf("GET /api/v1/setup: %s", r)
	}
	return decodeStrict[query.SetupStatus](t, r.body)
}

func setupAdmin(t *testing.T, n *testNode, token, user, password string) response {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"token": token, "username": user, "password": password})
	return n.do(t, fasthttp.MethodPost, "/api/v1/setup/admin", b)
}

func admins(t *testing.T, n *testNode) []string {
	t.Helper()
	users, err := n.auth.ListUsers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range users {
		if u.Role == auth.RoleAdmin {
			out = append(out, u.Username)
		}
	}
	return out
}

// The one-time setup token creates exactly one admin: a wrong token is
// refused, a refused password leaves the token alive, and once used the
// token is dead; the setup status says no admin before and one after.
func TestSetupTokenCreatesFirstAdmin(t *testing.T) {
	n := newTestNode(t, withQuery(query.Options{SetupToken: testSetupToken}))
	st := setupStatus(t, n)
	if !st.Accounts || st.AdminExists || !st.SetupTokenActive || st.Done || len(st.NextSteps) == 0 || st.NextSteps[0].ID != "create_admin" {
		t.Fatalf("before: %+v", st)
	}
	r := n.get(t, "/api/v1/setup")
	if strings.Contains(string(r.body), testSetupToken) {
		t.Fatalf("the setup status shows the token: %s", r.body)
	}

	wantError(t, setupAdmin(t, n, "wrong-token", "root", "a good long password"), fasthttp.StatusForbidden, "wrong setup token")
	wantError(t, setupAdmin(t, n, "", "root", "a good long password"), fasthttp.StatusForbidden)
	wantError(t, setupAdmin(t, n, testSetupToken, "root", "short"), fasthttp.StatusBadRequest, "weak password")
	if got := admins(t, n); len(got) != 0 {
		t.Fatalf("admins after refused attempts: %v", got)
	}

	r = setupAdmin(t, n, testSetupToken, "Root", "a good long password")
	if r.status != fasthttp.StatusCreated {
		t.Fatalf("setup with the token: %s", r)
	}
	var sess struct {
		User  auth.User `json:"user"`
		Token string    `json:"token"`
	}
	if err := json.Unmarshal(r.body, &sess); err != nil || sess.User.Role != auth.RoleAdmin || sess.User.Username != "root" || sess.Token == "" {
		t.Fatalf("session %s: %v", r.body, err)
	}
	// The new admin is logged in.
	if r := n.do(t, fasthttp.MethodGet, "/api/v1/admin/sources", nil, bearer(sess.Token)...); r.status != fasthttp.StatusOK {
		t.Fatalf("admin endpoint with the new admin's session: %s", r)
	}

	wantError(t, setupAdmin(t, n, testSetupToken, "second", "another good password"), fasthttp.StatusForbidden, "no setup token is active")
	if got := admins(t, n); len(got) != 1 || got[0] != "root" {
		t.Fatalf("admins: %v, want [root]", got)
	}
	st = setupStatus(t, n)
	if !st.AdminExists || st.SetupTokenActive {
		t.Fatalf("after: %+v", st)
	}
	for _, s := range st.NextSteps {
		if s.ID == "create_admin" {
			t.Fatalf("still asked to create an admin: %+v", st.NextSteps)
		}
	}
}

// Many requests with the token at once create one admin.
func TestSetupTokenConcurrentUse(t *testing.T) {
	n := newTestNode(t, withQuery(query.Options{SetupToken: testSetupToken}))
	const tries = 4
	statuses := make([]int, tries)
	var wg sync.WaitGroup
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _ := json.Marshal(map[string]string{"token": testSetupToken, "username": fmt.Sprint("admin", i), "password": "a good long password"})
			r, err := n.tryDo(fasthttp.MethodPost, "/api/v1/setup/admin", b)
			if err == nil {
				statuses[i] = r.status
			}
		}()
	}
	wg.Wait()
	created := 0
	for _, s := range statuses {
		if s == fasthttp.StatusCreated {
			created++
		} else if s != fasthttp.StatusForbidden {
			t.Errorf("status %d", s)
		}
	}
	if got := admins(t, n); created != 1 || len(got) != 1 {
		t.Fatalf("%d created (%v), admins %v", created, statuses, got)
	}
}

// The token dies when an admin exists (made another way), and attempts
// are limited like logins.
func TestSetupTokenDiesWithAnyAdminAndIsLimited(t *testing.T) {
	n := newTestNode(t, withQuery(query.Options{SetupToken: testSetupToken}))
	if _, err := n.auth.AddUser(context.Background(), "cli-admin", "a good long password", auth.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	wantError(t, setupAdmin(t, n, testSetupToken, "root", "a good long password"), fasthttp.StatusConflict, "admin account exists")
	wantError(t, setupAdmin(t, n, testSetupToken, "root", "a good long password"), fasthttp.StatusForbidden)
	if st := setupStatus(t, n); !st.AdminExists || st.SetupTokenActive {
		t.Fatalf("status: %+v", st)
	}

	// Without a token nothing opens; a stream of guesses is cut off.
	n = newTestNode(t)
	if st := setupStatus(t, n); st.SetupTokenActive || st.NextSteps[0].ID != "create_admin" || !strings.Contains(st.NextSteps[0].Command, "user add --admin") {
		t.Fatalf("without a token: %+v", st)
	}
	limited := false
	for range auth.DefaultUserBurst + 1 {
		r := setupAdmin(t, n, "guess", "root", "a good long password")
		if r.status == fasthttp.StatusTooManyRequests {
			limited = true
			break
		}
		wantError(t, r, fasthttp.StatusForbidden)
	}
	if !limited {
		t.Fatalf("%d guesses, none limited", auth.DefaultUserBurst+1)
	}
}

// The setup status counts sources, groups the failing ones by reason
// (with no error text, URL or host), and says what to do next.
//
// It is one scenario checked step by step (cyclomatic 31): the steps
// depend on each other's state, so they stay in order in one function.
func TestSetupStatusSources(t *testing.T) {
	n := newTestNode(t)
	st := setupStatus(t, n)
	if st.Sources.Total != 0 || st.Articles.Any || !hasStep(st, "add_source") || !hasStep(st, "demo") {
		t.Fatalf("empty node: %+v", st)
	}
	ctx := context.Background()
	fail := func(url, msg string) {
		s, err := n.sources.Add(ctx, crawl.Source{FeedURL: url})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.sources.Update(ctx, s.ID, func(s *crawl.Source) error {
			s.Crawl.ConsecutiveErrors, s.Crawl.LastError, s.Crawl.LastCrawl = 2, msg, time.Now()
			s.Crawl.LastResult = &crawl.CrawlRecord{Outcome: "error", Error: msg}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 7 {
		fail(fmt.Sprintf("https://feeds%d.secret-host.example/rss", i), fmt.Sprintf("fetch https://feeds%d.secret-host.example/rss: request: dial tcp: lookup feeds%d.secret-host.example on 10.0.0.53:53: no such host", i, i))
	}
	fail("https://slow.secret-host.example/rss", "fetch https://slow.secret-host.example/rss: request: timeout: i/o timeout")
	healthy, err := n.sources.Add(ctx, crawl.Source{FeedURL: "https://fine.example/rss"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.sources.Update(ctx, healthy.ID, func(s *crawl.Source) error {
		s.Crawl.LastCrawl, s.Crawl.LastResult = time.Now(), &crawl.CrawlRecord{Outcome: "not_modified"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	st = setupStatus(t, n)
	src := st.Sources
	if src.Total != 9 || src.Active != 9 || src.Failing != 8 || src.Crawled != 9 || src.OK != 1 || len(src.Reasons) != 2 {
		t.Fatalf("sources: %+v", src)
	}
	if r := src.Reasons[0]; r.Reason != "dns" || r.Sources != 7 || !strings.Contains(r.Message, "offline") {
		t.Fatalf("first reason: %+v", r)
	}
	if r := src.Reasons[1]; r.Reason != "timeout" || r.Sources != 1 {
		t.Fatalf("second reason: %+v", r)
	}
	if !hasStep(st, "fix_sources") || !hasStep(st, "wait") || hasStep(st, "offline") {
		t.Fatalf("steps: %+v", st.NextSteps)
	}
	if body := string(n.get(t, "/api/v1/setup").body); strings.Contains(body, "secret-host") || strings.Contains(body, "10.0.0.53") {
		t.Fatalf("the setup status leaks error text: %s", body)
	}

	// Every source failing, most to resolve host names: the machine is
	// offline.
	if err := n.sources.Delete(ctx, healthy.ID); err != nil {
		t.Fatal(err)
	}
	if st = setupStatus(t, n); len(st.NextSteps) != 2 || st.NextSteps[0].ID != "create_admin" || st.NextSteps[1].ID != "offline" || st.NextSteps[1].Command != "make demo" {
		t.Fatalf("offline: %+v", st.NextSteps)
	}
}

func hasStep(st query.SetupStatus, id string) bool {
	for _, s := range st.NextSteps {
		if s.ID == id {
			return true
		}
	}
	return false
}

// Admins create accounts of either role through the API.
func TestAdminAddsUser(t *testing.T) {
	n := newTestNode(t, withQuery(query.Options{SetupToken: testSetupToken}))
	body := `{"username":"Editor","password":"a good long password","role":"admin"}`
	wantError(t, n.post(t, "/api/v1/admin/users", body, "X-Anonymous", "1"), fasthttp.StatusUnauthorized)
	r := n.post(t, "/api/v1/admin/users", body)
	if r.status != fasthttp.StatusCreated {
		t.Fatalf("add user: %s", r)
	}
	if u := decodeStrict[auth.User](t, r.body); u.Username != "editor" || u.Role != auth.RoleAdmin {
		t.Fatalf("user %+v", u)
	}
	wantError(t, n.post(t, "/api/v1/admin/users", body), fasthttp.StatusConflict)
	wantError(t, n.post(t, "/api/v1/admin/users", `{"username":"x","password":"a good long password"}`), fasthttp.StatusBadRequest)
	wantError(t, n.post(t, "/api/v1/admin/users", `{"username":"bob","password":"a good long password","role":"root"}`), fasthttp.StatusBadRequest)
	if r := n.post(t, "/api/v1/admin/users", `{"username":"bob","password":"a good long password"}`); r.status != fasthttp.StatusCreated || !strings.Contains(string(r.body), `"role":"user"`) {
		t.Fatalf("add user without a role: %s", r)
	}
	// An admin exists now: the setup token is dead.
	if st := setupStatus(t, n); !st.AdminExists || st.SetupTokenActive {
		t.Fatalf("status: %+v", st)
	}
}
