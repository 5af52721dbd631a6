package query_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

type unreadAnswer struct {
	Total struct {
		Stories  int `json:"stories"`
		Articles int `json:"articles"`
	} `json:"total"`
	Topics []struct {
		Topic    string `json:"topic"`
		Stories  int    `json:"stories"`
		Articles int    `json:"articles"`
	} `json:"topics"`
	Sources []struct {
		SourceID string `json:"source_id"`
		Articles int    `json:"articles"`
	} `json:"sources"`
	AsOf int64 `json:"as_of"`
}

func (u unreadAnswer) source(id string) int {
	for _, s := range u.Sources {
		if s.SourceID == id {
			return s.Articles
		}
	}
	return 0
}

type readerClient struct {
	t   *testing.T
	n   *testNode
	hdr []string
}

func (c readerClient) do(method, uri, body string) response {
	c.t.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	return c.n.do(c.t, method, uri, b, c.hdr...)
}

func (c readerClient) json(method, uri, body string, want int, v any) {
	c.t.Helper()
	r := c.do(method, uri, body)
	if r.status != want {
		c.t.Fatalf("%s %s %s: %s, want %d", method, uri, body, r, want)
	}
	if v != nil {
		if err := json.Unmarshal(r.body, v); err != nil {
			c.t.Fatalf("%s %s: %v in %s", method, uri, err, r)
		}
	}
}

func (c readerClient) unread() unreadAnswer {
	c.t.Helper()
	var u unreadAnswer
	c.json("GET", "/api/v1/me/unread", "", fasthttp.StatusOK, &u)
	return u
}

type storyState struct {
	Unread   *int `json:"unread"`
	Articles []struct {
		ID      string `json:"id"`
		Read    *bool  `json:"read"`
		Starred *bool  `json:"starred"`
	} `json:"articles"`
}

func (c readerClient) story(id string) storyState {
	c.t.Helper()
	var s storyState
	c.json("GET", "/api/v1/stories/"+id, "", fasthttp.StatusOK, &s)
	if s.Unread == nil {
		c.t.Fatalf("story %s for a logged-in reader has no unread count", id)
	}
	return s
}

// feedIDs lists the stories of the reader's feed (and their unread counts).
func (c readerClient) feedIDs(query string) map[string]int {
	c.t.Helper()
	var page struct {
		Stories []struct {
			ID     string `json:"id"`
			Unread *int   `json:"unread"`
		} `json:"stories"`
	}
	c.json("GET", "/api/v1/feed?limit=100"+query, "", fasthttp.StatusOK, &page)
	out := map[string]int{}
	for _, s := range page.Stories {
		if s.Unread == nil {
			c.t.Fatalf("feed story %s has no unread count", s.ID)
		}
		out[s.ID] = *s.Unread
	}
	return out
}

// A reader's unread counts follow what they open and mark, per story,
// topic and source; stars have their own list; another reader's state is
// untouched.
//
// It is one scenario checked step by step (cyclomatic 47): the steps
// depend on each other's state, so they stay in order in one function.
func TestReadStateThroughTheAPI(t *testing.T) {
	n := newFixtureNode(t)
	idOf := articleIDsByURL(t, n)
	quake := idOf["https://wire.example/quake-lisbon"]
	quakeStory, _ := n.stories.StoryOfArticle(quake)
	ratesStory, _ := n.stories.StoryOfArticle(idOf["https://wire.example/ecb-rates"])
	if quakeStory == "" || ratesStory == "" || quakeStory == ratesStory {
		t.Fatalf("fixture stories: quake %q rates %q", quakeStory, ratesStory)
	}
	alice := readerClient{t, n, bearer(login(t, n, "/api/v1/auth/register", "alice", "a long enough password"))}
	bob := readerClient{t, n, bearer(login(t, n, "/api/v1/auth/register", "bobby", "another long password"))}

	u := alice.unread()
	if u.Total.Articles != len(articleFixture) || u.source("daily") != 4 || u.AsOf == 0 {
		t.Fatalf("fresh reader: %+v, want %d articles, 4 from daily", u, len(articleFixture))
	}
	if s := alice.story(quakeStory); *s.Unread != 4 || len(s.Articles) != 4 || s.Articles[0].Read == nil || *s.Articles[0].Read {
		t.Fatalf("quake story for a fresh reader: %+v", s)
	}

	// Opening one article.
	alice.json("POST", "/api/v1/me/read", `{"articles":["`+quake+`"]}`, fasthttp.StatusOK, nil)
	if got := alice.unread(); got.Total.Articles != len(articleFixture)-1 || got.source("wire") != u.source("wire")-1 {
		t.Errorf("after opening the wire quake article: %+v", got)
	}
	s := alice.story(quakeStory)
	if *s.Unread != 3 {
		t.Errorf("quake story unread %d, want 3", *s.Unread)
	}
	for _, a := range s.Articles {
		if *a.Read != (a.ID == quake) {
			t.Errorf("article %s read=%v", a.ID, *a.Read)
		}
	}
	if got := bob.unread(); got.Total.Articles != len(articleFixture) {
		t.Errorf("bob's unread changed with alice's read: %+v", got)
	}

	// A whole story, and the feed without read stories.
	alice.json("POST", "/api/v1/me/read", `{"stories":["`+ratesStory+`"]}`, fasthttp.StatusOK, nil)
	if f := alice.feedIDs(""); f[ratesStory] != 0 || f[quakeStory] != 3 {
		t.Errorf("feed unread counts %v: rates 0, quake 3 wanted", f)
	}
	if f := alice.feedIDs("&hide_read=1"); len(f) == 0 {
		t.Errorf("hide_read left nothing")
	} else if _, ok := f[ratesStory]; ok {
		t.Errorf("hide_read kept the read rates story: %v", f)
	}
	var list struct {
		Stories []struct {
			ID string `json:"id"`
		} `json:"stories"`
	}
	alice.json("GET", "/api/v1/stories?limit=100&hide_read=1", "", fasthttp.StatusOK, &list)
	for _, st := range list.Stories {
		if st.ID == ratesStory {
			t.Errorf("story list with hide_read lists the read rates story")
		}
	}
	if len(list.Stories) != len(alice.feedIDs(""))-1 {
		t.Errorf("story list with hide_read: %d stories", len(list.Stories))
	}

	// Stars.
	var star struct {
		ID        string `json:"id"`
		Title     string `json:"title"`
		StoryID   string `json:"story_id"`
		StarredAt int64  `json:"starred_at"`
	}
	alice.json("PUT", "/api/v1/me/starred/"+quake, "", fasthttp.StatusOK, &star)
	if star.ID != quake || star.Title != articleFixture[0].title || star.StoryID != quakeStory || star.StarredAt == 0 {
		t.Errorf("star answer %+v", star)
	}
	var stars struct {
		Articles []struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		} `json:"articles"`
	}
	alice.json("GET", "/api/v1/me/starred", "", fasthttp.StatusOK, &stars)
	if len(stars.Articles) != 1 || stars.Articles[0].ID != quake {
		t.Errorf("alice's starred: %+v", stars)
	}
	bob.json("GET", "/api/v1/me/starred", "", fasthttp.StatusOK, &stars)
	if len(stars.Articles) != 0 {
		t.Errorf("bob sees alice's stars: %+v", stars)
	}
	for _, a := range alice.story(quakeStory).Articles {
		if *a.Starred != (a.ID == quake) {
			t.Errorf("article %s starred=%v", a.ID, *a.Starred)
		}
	}
	alice.json("DELETE", "/api/v1/me/starred/"+quake, "", fasthttp.StatusNoContent, nil)
	alice.json("GET", "/api/v1/me/starred", "", fasthttp.StatusOK, &stars)
	if len(stars.Articles) != 0 {
		t.Errorf("unstarred article still listed: %+v", stars)
	}

	// A source, then everything; a story marked unread again.
	alice.json("POST", "/api/v1/me/read/all", `{"source":"daily"}`, fasthttp.StatusOK, nil)
	if got := alice.unread(); got.source("daily") != 0 || got.source("tech") != 1 {
		t.Errorf("after marking daily read: %+v", got)
	}
	alice.json("POST", "/api/v1/me/read/all", "", fasthttp.StatusOK, nil)
	if got := alice.unread(); got.Total.Articles != 0 || got.Total.Stories != 0 || len(got.Topics) != 0 {
		t.Errorf("after marking everything read: %+v", got)
	}
	alice.json("POST", "/api/v1/me/read", `{"stories":["`+quakeStory+`"],"read":false}`, fasthttp.StatusOK, nil)
	if got := alice.unread(); got.Total.Articles != 4 || got.Total.Stories != 1 {
		t.Errorf("quake story marked unread: %+v, want its 4 articles", got)
	}

	// Bad requests.
	for _, c := range []struct {
		method, uri, body string
		status            int
		says              string
	}{
		{"POST", "/api/v1/me/read", `{}`, fasthttp.StatusBadRequest, "ids"},
		{"POST", "/api/v1/me/read", `{"articles":["nope"]}`, fasthttp.StatusNotFound, "no such"},
		{"POST", "/api/v1/me/read", `{"articles":`, fasthttp.StatusBadRequest, "JSON"},
		{"POST", "/api/v1/me/read/all", `{"topic":"science","source":"daily"}`, fasthttp.StatusBadRequest, "not both"},
		{"PUT", "/api/v1/me/starred/nope", "", fasthttp.StatusNotFound, "no article"},
	} {
		r := alice.do(c.method, c.uri, c.body)
		if r.status != c.status || !strings.Contains(strings.ToLower(string(r.body)), strings.ToLower(c.says)) {
			t.Errorf("%s %s %s: %s, want %d saying %q", c.method, c.uri, c.body, r, c.status, c.says)
		}
	}
	if r := n.get(t, "/api/v1/me/unread"); r.status != fasthttp.StatusUnauthorized {
		t.Errorf("unread without a session: %s", r)
	}
	// Anonymous readers get no read state in the story.
	if r := n.get(t, "/api/v1/stories/"+quakeStory); strings.Contains(string(r.body), `"unread"`) || strings.Contains(string(r.body), `"read"`) {
		t.Errorf("anonymous story detail carries read state: %s", r)
	}
}
