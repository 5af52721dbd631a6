package readerapi

import (
	"cmp"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mmcdole/gofeed/atom"
	"github.com/newsflow/newsflow/operators/readstate"
	"github.com/newsflow/newsflow/operators/searchindex"
	"github.com/newsflow/newsflow/operators/story"
)

// fakeStories holds articles, each its own story, numbered in order.
type fakeStories struct{ arts []story.ArticleRecord }

func (f *fakeStories) Article(id string) (story.ArticleRecord, string, bool) {
	for _, a := range f.arts {
		if a.ID == id {
			return a, "s-" + a.ID, true
		}
	}
	return story.ArticleRecord{}, "", false
}

func (f *fakeStories) ArticleByNum(num uint64) (story.ArticleRecord, string, bool) {
	for _, a := range f.arts {
		if a.Num == num {
			return a, "s-" + a.ID, true
		}
	}
	return story.ArticleRecord{}, "", false
}

func (f *fakeStories) Head(id string) (*story.Story, error) { return &story.Story{ID: id}, nil }

// search answers a newest-first listing of the articles of r.Sources, all
// at once.
func (f *fakeStories) search(_ context.Context, r searchindex.Request) ([]searchindex.Hit, *searchindex.Cursor, error) {
	var hits []searchindex.Hit
	for _, a := range f.arts {
		if slices.Contains(r.Sources, a.SourceID) {
			hits = append(hits, searchindex.Hit{ID: a.ID, SourceID: a.SourceID, PublishedAt: time.UnixMilli(a.Published)})
		}
	}
	slices.SortFunc(hits, func(x, y searchindex.Hit) int {
		return cmp.Or(y.PublishedAt.Compare(x.PublishedAt), cmp.Compare(x.ID, y.ID))
	})
	return hits, nil, nil
}

// grEnv is the reader APIs with entries: two sources of three and two
// articles, ann subscribed to both (daily in folder Tech), bob to none.
type grEnv struct {
	*apiEnv
	annAuth, bobAuth []string
	feeds            map[string]int64 // source → feed number
}

func newGREnv(t *testing.T) *grEnv {
	t.Helper()
	return newGREnvOf(t, []grArticle{{"wire", "wire", "Quake"}, {"daily", "daily", "Cup final"}, {"wire", "wire", "Rates"},
		{"daily", "daily", "Election"}, {"wire", "wire", "Chips"}})
}

// grArticle is an article of a grEnv: its source id, the source name it
// carries, and its title (its summary is the title and " <today>").
type grArticle struct{ src, source, title string }

// newGREnvOf is a grEnv whose articles are arts, numbered in order, one
// minute apart.
func newGREnvOf(t *testing.T, arts []grArticle) *grEnv {
	t.Helper()
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC).UnixMilli()
	fs := &fakeStories{}
	for i, a := range arts {
		fs.arts = append(fs.arts, story.ArticleRecord{Num: uint64(i), Article: story.Article{ID: fmt.Sprint("art", i), SourceID: a.src,
			Source: a.source, Title: a.title, Summary: a.title + " <today>", URL: "https://" + a.src + ".example/" + a.title,
			Published: t0 + int64(i)*60_000}})
	}
	feeds := map[string]int64{}
	api := newAPIEnvWith(t, func(e *apiEnv, d *Deps) {
		ctx := t.Context()
		d.Stories, d.Search = fs, fs.search
		tech, err := d.Reads.AddFolder(ctx, e.ann.ID, "Tech")
		if err != nil {
			t.Fatal(err)
		}
		for _, sub := range []readstate.Subscription{{SourceID: "wire"}, {SourceID: "daily", Folder: tech.ID}} {
			if _, err := d.Reads.Subscribe(ctx, e.ann.ID, sub); err != nil {
				t.Fatal(err)
			}
			if feeds[sub.SourceID], err = d.Reads.FeedNum(ctx, sub.SourceID); err != nil {
				t.Fatal(err)
			}
		}
	})
	e := &grEnv{apiEnv: api, feeds: feeds}
	e.annAuth = e.login("ann", e.annKey)
	e.bobAuth = e.login("bob", e.bobKey)
	return e
}

// login is ClientLogin; it returns the Authorization header of its Auth.
func (e *grEnv) login(user, key string) []string {
	e.t.Helper()
	code, body, _ := e.call("POST", "/accounts/ClientLogin", url.Values{"Email": {user}, "Passwd": {key}, "service": {"reader"}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded")
	lines := strings.Split(body, "\n")
	if code != 200 || len(lines) < 3 || !strings.HasPrefix(lines[0], "SID=") || lines[1] != "LSID=null" || !strings.HasPrefix(lines[2], "Auth=") {
		e.t.Fatalf("ClientLogin: %d %q", code, body)
	}
	return []string{"Authorization", "GoogleLogin auth=" + strings.TrimPrefix(lines[2], "Auth=")}
}

// getJSON decodes a 200 answer into v, which it zeroes first.
func (e *grEnv) getJSON(hdr []string, path string, v any) {
	e.t.Helper()
	zero(v)
	code, body, _ := e.call("GET", path, "", hdr...)
	if code != 200 || json.Unmarshal([]byte(body), v) != nil {
		e.t.Fatalf("GET %s: %d %s", path, code, body)
	}
}

func (e *grEnv) post(hdr []string, path string, form url.Values) string {
	e.t.Helper()
	code, body, _ := e.call("POST", path, form.Encode(), append([]string{"Content-Type", "application/x-www-form-urlencoded"}, hdr...)...)
	if code != 200 {
		e.t.Fatalf("POST %s %v: %d %s", path, form, code, body)
	}
	return body
}

type grStreamJSON struct {
	ID    string `json:"id"`
	Items []struct {
		ID         string   `json:"id"`
		Title      string   `json:"title"`
		Published  int64    `json:"published"`
		Categories []string `json:"categories"`
		Canonical  []struct {
			Href string `json:"href"`
		} `json:"canonical"`
		Origin struct {
			StreamID string `json:"streamId"`
		} `json:"origin"`
		Summary struct {
			Content string `json:"content"`
		} `json:"summary"`
		StoryID string `json:"story_id"`
		Related []struct {
			Href string `json:"href"`
		} `json:"related"`
	} `json:"items"`
	Continuation string `json:"continuation"`
}

func (s grStreamJSON) titles() []string {
	var out []string
	for _, it := range s.Items {
		out = append(out, it.Title)
	}
	return out
}

// TestGReaderLoginAndLists: ClientLogin with an API key (and nothing
// else), the token, user-info, subscription/list and tag/list in the
// documented shapes; another reader's Auth sees none of it.
func TestGReaderLoginAndLists(t *testing.T) {
	e := newGREnv(t)
	for _, bad := range []url.Values{{"Email": {"ann"}, "Passwd": {"ann's long password"}}, {"Email": {"bob"}, "Passwd": {e.annKey}}, {}} {
		code, body, _ := e.call("POST", "/accounts/ClientLogin", bad.Encode(), "Content-Type", "application/x-www-form-urlencoded")
		if code != 401 || body != "Error=BadAuthentication\n" {
			t.Errorf("ClientLogin %v: %d %q", bad, code, body)
		}
	}
	if code, _, _ := e.call("GET", "/reader/api/0/user-info", ""); code != 401 {
		t.Errorf("user-info without auth: %d", code)
	}
	if code, _, _ := e.call("GET", "/reader/api/0/user-info", "", "Authorization", "GoogleLogin auth=nope"); code != 401 {
		t.Errorf("user-info with a bad auth: %d", code)
	}
	if code, body, _ := e.call("GET", "/reader/api/0/token", "", e.annAuth...); code != 200 || !strings.HasSuffix(body, "\n") || len(strings.TrimSpace(body)) == 0 {
		t.Errorf("token: %d %q", code, body)
	}
	var info map[string]string
	e.getJSON(e.annAuth, "/reader/api/0/user-info", &info)
	if info["userName"] != "ann" || info["userId"] == "" || info["userProfileId"] != info["userId"] {
		t.Errorf("user-info %v", info)
	}
	var subs struct {
		Subscriptions []struct {
			ID         string `json:"id"`
			Title      string `json:"title"`
			URL        string `json:"url"`
			HTMLURL    string `json:"htmlUrl"`
			Categories []struct{ ID, Label string }
		} `json:"subscriptions"`
	}
	e.getJSON(e.annAuth, "/reader/api/0/subscription/list?output=json", &subs)
	slices.SortFunc(subs.Subscriptions, func(a, b struct {
		ID         string `json:"id"`
		Title      string `json:"title"`
		URL        string `json:"url"`
		HTMLURL    string `json:"htmlUrl"`
		Categories []struct{ ID, Label string }
	}) int {
		return cmp.Compare(a.ID, b.ID)
	})
	got := fmt.Sprintf("%+v", subs.Subscriptions)
	want := fmt.Sprintf("[{ID:feed/%d Title:The Wire URL:https://wire.example/feed.xml HTMLURL:https://wire.example/ Categories:[]} {ID:feed/%d Title:Daily News URL:https://daily.example/rss HTMLURL: Categories:[{ID:user/-/label/Tech Label:Tech}]}]",
		e.feeds["wire"], e.feeds["daily"])
	if got != want {
		t.Errorf("subscriptions:\n%s\nwant\n%s", got, want)
	}
	var tags struct {
		Tags []map[string]string `json:"tags"`
	}
	e.getJSON(e.annAuth, "/reader/api/0/tag/list?output=json", &tags)
	if fmt.Sprint(tags.Tags) != "[map[id:user/-/state/com.google/starred] map[id:user/-/label/Tech type:folder]]" {
		t.Errorf("tags %v", tags.Tags)
	}
	e.getJSON(e.bobAuth, "/reader/api/0/subscription/list?output=json", &subs)
	if len(subs.Subscriptions) != 0 {
		t.Errorf("bob's subscriptions %+v", subs)
	}
}

// TestGReaderStreams: item ids and contents of streams with the
// documented parameters and continuations; edit-tag and mark-all-as-read
// change what they show, as do unread-count and the Atom stream; another
// reader can neither read nor change ann's.
func TestGReaderStreams(t *testing.T) {
	e := newGREnv(t)
	wire, daily := fmt.Sprint("feed/", e.feeds["wire"]), fmt.Sprint("feed/", e.feeds["daily"])
	var ids struct {
		ItemRefs []struct {
			ID string `json:"id"`
		} `json:"itemRefs"`
		Continuation string `json:"continuation"`
	}
	e.getJSON(e.annAuth, "/reader/api/0/stream/items/ids?output=json&s="+stateReadingList+"&n=3", &ids)
	if len(ids.ItemRefs) != 3 || ids.ItemRefs[0].ID != "4" || ids.Continuation == "" {
		t.Fatalf("items/ids page 1: %+v", ids)
	}
	first, c := slices.Clone(ids.ItemRefs), ids.Continuation
	ids.ItemRefs, ids.Continuation = nil, ""
	e.getJSON(e.annAuth, "/reader/api/0/stream/items/ids?output=json&s="+stateReadingList+"&n=3&c="+c, &ids)
	if len(ids.ItemRefs) != 2 || ids.ItemRefs[1].ID != "0" || ids.Continuation != "" {
		t.Fatalf("items/ids page 2 after %v: %+v", first, ids)
	}

	var s grStreamJSON
	e.getJSON(e.annAuth, "/reader/api/0/stream/contents/"+url.PathEscape(wire)+"?output=json", &s)
	if fmt.Sprint(s.titles()) != "[Chips Rates Quake]" || s.ID != wire {
		t.Fatalf("wire stream: %+v", s)
	}
	it := s.Items[0]
	if it.ID != itemPrefix+"0000000000000004" || it.Origin.StreamID != wire || it.Canonical[0].Href != "https://wire.example/Chips" ||
		it.Published != time.Date(2026, 11, 27, 9, 4, 0, 0, time.UTC).Unix() || it.Summary.Content != "<p>Chips &lt;today&gt;</p>" ||
		fmt.Sprint(it.Categories) != "[user/-/state/com.google/reading-list]" ||
		it.StoryID != "s-art4" || len(it.Related) != 1 || it.Related[0].Href != "http://reader.test/stories/s-art4" {
		t.Errorf("item %+v", it)
	}
	e.getJSON(e.annAuth, "/reader/api/0/stream/contents?s=user/-/label/Tech&r=o", &s)
	if fmt.Sprint(s.titles()) != "[Cup final Election]" {
		t.Errorf("label stream oldest first: %v", s.titles())
	}

	// edit-tag: read and starred by long and short ids, with and without T.
	if body := e.post(e.annAuth, "/reader/api/0/edit-tag", url.Values{"i": {itemPrefix + "0000000000000004", "2"},
		"a": {stateRead}, "r": {stateKeptUnread}, "ac": {"edit"}, "T": {"x"}}); body != "OK" {
		t.Fatalf("edit-tag read: %q", body)
	}
	if body := e.post(e.annAuth, "/reader/api/0/edit-tag", url.Values{"i": {"0"}, "a": {"user/1/state/com.google/starred"}}); body != "OK" {
		t.Fatalf("edit-tag star: %q", body)
	}
	e.getJSON(e.annAuth, "/reader/api/0/stream/contents/"+url.PathEscape(wire)+"?xt="+stateRead, &s)
	if fmt.Sprint(s.titles()) != "[Quake]" || !slices.Contains(s.Items[0].Categories, stateStarred) {
		t.Errorf("wire unread after marking two read: %+v", s)
	}
	e.getJSON(e.annAuth, "/reader/api/0/stream/contents/"+stateStarred, &s)
	if fmt.Sprint(s.titles()) != "[Quake]" {
		t.Errorf("starred: %v", s.titles())
	}
	var contents grStreamJSON
	code, body, _ := e.call("POST", "/reader/api/0/stream/items/contents", "i=4&i="+url.QueryEscape(itemPrefix+"0000000000000003"),
		append([]string{"Content-Type", "application/x-www-form-urlencoded"}, e.annAuth...)...)
	if code != 200 || json.Unmarshal([]byte(body), &contents) != nil || fmt.Sprint(contents.titles()) != "[Chips Election]" ||
		!slices.Contains(contents.Items[0].Categories, stateRead) || slices.Contains(contents.Items[1].Categories, stateRead) {
		t.Errorf("items/contents: %d %s", code, body)
	}
	// Unread again.
	e.post(e.annAuth, "/reader/api/0/edit-tag", url.Values{"i": {"2"}, "r": {stateRead}, "a": {stateKeptUnread}})

	var counts struct {
		Max    int `json:"max"`
		Counts []struct {
			ID     string `json:"id"`
			Count  int    `json:"count"`
			Newest string `json:"newestItemTimestampUsec"`
		} `json:"unreadcounts"`
	}
	e.getJSON(e.annAuth, "/reader/api/0/unread-count?output=json", &counts)
	byID := map[string]int{}
	for _, c := range counts.Counts {
		byID[c.ID] = c.Count
	}
	if byID[wire] != 2 || byID[daily] != 2 || byID["user/-/label/Tech"] != 2 || byID[stateReadingList] != 4 {
		t.Errorf("unread counts %+v", counts)
	}

	// Bob can neither read nor change ann's stream.
	if code, _, _ := e.call("GET", "/reader/api/0/stream/contents/"+url.PathEscape(wire), "", e.bobAuth...); code != 400 {
		t.Errorf("bob reads ann's feed: %d", code)
	}
	e.post(e.bobAuth, "/reader/api/0/edit-tag", url.Values{"i": {"1"}, "a": {stateRead}})
	if code, _, _ := e.call("POST", "/reader/api/0/mark-all-as-read", "s="+daily, append([]string{"Content-Type", "application/x-www-form-urlencoded"}, e.bobAuth...)...); code != 400 {
		t.Errorf("bob marks ann's feed read: %d", code)
	}
	e.getJSON(e.annAuth, "/reader/api/0/stream/contents/"+url.PathEscape(daily)+"?xt="+stateRead, &s)
	if len(s.Items) != 2 {
		t.Errorf("ann's daily after bob's edits: %v", s.titles())
	}

	// mark-all-as-read, then the Atom stream newsboat reads.
	if body := e.post(e.annAuth, "/reader/api/0/mark-all-as-read", url.Values{"s": {daily}, "T": {"x"}}); body != "OK" {
		t.Fatalf("mark-all-as-read: %q", body)
	}
	code, body, h := e.call("GET", "/reader/atom/"+url.PathEscape(daily)+"?n=50", "", e.annAuth...)
	var feed atomFeed
	if code != 200 || !strings.HasPrefix(h["Content-Type"], "application/atom+xml") || xml.Unmarshal([]byte(body), &feed) != nil {
		t.Fatalf("atom: %d %s", code, body)
	}
	if feed.Title != "Daily News" || len(feed.Entries) != 2 || feed.Entries[0].ID != itemPrefix+"0000000000000003" {
		t.Fatalf("atom feed %+v", feed)
	}
	for _, en := range feed.Entries {
		if !slices.ContainsFunc(en.Categories, func(c atomCategory) bool { return c.Label == "read" && c.Term == stateRead }) {
			t.Errorf("atom entry %s not read after mark-all-as-read: %+v", en.Title.Body, en.Categories)
		}
	}
	for _, bad := range []string{"/reader/api/0/stream/contents/feed%2F999", "/reader/api/0/stream/items/ids?s=user/-/label/Nope", "/reader/api/0/stream/items/ids?n=x",
		"/reader/api/0/stream/items/ids?c=-1"} {
		if code, _, _ := e.call("GET", bad, "", e.annAuth...); code != 400 {
			t.Errorf("%s: %d", bad, code)
		}
	}
}

// zero sets what v points to to its zero value.
func zero(v any) { reflect.ValueOf(v).Elem().SetZero() }

// TestGReaderSubscriptionEdit: quickadd and subscription/edit subscribe,
// rename, move between labels (created on the way) and unsubscribe; a URL
// no source has is refused without a policy that lets readers add
// sources.
func TestGReaderSubscriptionEdit(t *testing.T) {
	e := newGREnv(t)
	bob := e.bobAuth
	type subsJSON struct {
		Subscriptions []struct {
			ID         string `json:"id"`
			Title      string `json:"title"`
			Categories []struct{ ID, Label string }
		} `json:"subscriptions"`
	}
	list := func() string {
		var s subsJSON
		e.getJSON(bob, "/reader/api/0/subscription/list?output=json", &s)
		return fmt.Sprintf("%+v", s.Subscriptions)
	}
	var qa map[string]any
	code, body, _ := e.call("POST", "/reader/api/0/subscription/quickadd?quickadd="+url.QueryEscape("feed/https://wire.example/feed.xml"), "", bob...)
	wire := fmt.Sprint("feed/", e.feeds["wire"])
	if code != 200 || json.Unmarshal([]byte(body), &qa) != nil || qa["numResults"] != float64(1) || qa["streamId"] != wire || qa["streamName"] != "The Wire" {
		t.Fatalf("quickadd: %d %s", code, body)
	}
	code, body, _ = e.call("POST", "/reader/api/0/subscription/quickadd?quickadd="+url.QueryEscape("https://nowhere.example/feed"), "", bob...)
	if code != 200 || !strings.Contains(body, `"numResults":0`) || !strings.Contains(body, "ask an admin") {
		t.Errorf("quickadd of a URL no source has: %d %s", code, body)
	}
	if got := list(); got != "[{ID:"+wire+" Title:The Wire Categories:[]}]" {
		t.Fatalf("after quickadd: %s", got)
	}
	e.post(bob, "/reader/api/0/subscription/edit", url.Values{"ac": {"edit"}, "s": {wire}, "t": {"Wire!"}, "a": {"user/-/label/World"}})
	if got := list(); got != "[{ID:"+wire+" Title:Wire! Categories:[{ID:user/-/label/World Label:World}]}]" {
		t.Fatalf("after edit: %s", got)
	}
	e.post(bob, "/reader/api/0/subscription/edit", url.Values{"ac": {"edit"}, "s": {wire}, "r": {"user/-/label/World"}})
	if got := list(); got != "[{ID:"+wire+" Title:Wire! Categories:[]}]" {
		t.Fatalf("after removing the label: %s", got)
	}
	e.post(bob, "/reader/api/0/subscription/edit", url.Values{"ac": {"subscribe"}, "s": {"feed/https://daily.example/rss"}, "a": {"user/-/label/World"}})
	e.post(bob, "/reader/api/0/subscription/edit", url.Values{"ac": {"unsubscribe"}, "s": {wire}})
	if got := list(); got != fmt.Sprintf("[{ID:feed/%d Title:Daily News Categories:[{ID:user/-/label/World Label:World}]}]", e.feeds["daily"]) {
		t.Fatalf("after subscribing to daily and unsubscribing wire: %s", got)
	}
	for _, bad := range []url.Values{{"ac": {"edit"}, "s": {wire}}, {"ac": {"fly"}, "s": {wire}}, {"ac": {"subscribe"}, "s": {"feed/https://nowhere.example/x"}},
		{"ac": {"edit"}, "s": {"user/-/label/World"}}} {
		code, body, _ := e.call("POST", "/reader/api/0/subscription/edit", bad.Encode(), append([]string{"Content-Type", "application/x-www-form-urlencoded"}, bob...)...)
		if code != 400 {
			t.Errorf("subscription/edit %v: %d %s", bad, code, body)
		}
	}
	// Ann's subscriptions are untouched.
	var s subsJSON
	e.getJSON(e.annAuth, "/reader/api/0/subscription/list?output=json", &s)
	if len(s.Subscriptions) != 2 {
		t.Errorf("ann's subscriptions: %+v", s)
	}
}

// TestGReaderAtomTextFields: what a feed carries in its titles, names and
// summaries comes out of the Atom stream as the text it was, never as
// markup: an Atom parser gives back exactly the title, the source's name
// as the author, and a content without the markup of the summary.
func TestGReaderAtomTextFields(t *testing.T) {
	titles := []string{`<img src=x onerror=alert(1)>`, `Tom &amp; Jerry <b>bold</b> & "quotes"`}
	const source = `<script>alert("wire")</script>`
	e := newGREnvOf(t, []grArticle{{"wire", source, titles[0]}, {"wire", source, titles[1]}})
	wire := fmt.Sprint("feed/", e.feeds["wire"])
	code, body, _ := e.call("GET", "/reader/atom/"+url.PathEscape(wire)+"?n=50", "", e.annAuth...)
	if code != 200 {
		t.Fatalf("atom: %d %s", code, body)
	}
	var raw atomFeed
	if err := xml.Unmarshal([]byte(body), &raw); err != nil || len(raw.Entries) != len(titles) {
		t.Fatalf("atom: %v %s", err, body)
	}
	for _, en := range raw.Entries {
		if en.Title.Type != "text" {
			t.Errorf("entry %s: title type %q, want text", en.ID, en.Title.Type)
		}
	}
	feed, err := (&atom.Parser{}).Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range feed.Entries {
		got = append(got, en.Title)
		if len(en.Authors) != 1 || en.Authors[0].Name != source {
			t.Errorf("entry %q: authors %+v, want %q", en.Title, en.Authors, source)
		}
		if en.Content == nil || strings.Contains(en.Content.Value, "<b>") || strings.Contains(en.Content.Value, "<img") {
			t.Errorf("entry %q: content carries markup of the summary: %+v", en.Title, en.Content)
		}
	}
	slices.Reverse(got) // newest first
	if !slices.Equal(got, titles) {
		t.Errorf("titles read back %q, want %q", got, titles)
	}
}
