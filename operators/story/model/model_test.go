package model

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func defaultModelT(t *testing.T) *Model {
	t.Helper()
	m, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// base is 10 March 2014, 09:00 UTC, in ms.
var base = time.Date(2014, 3, 10, 9, 0, 0, 0, time.UTC).UnixMilli()

func at(hours float64) int64 { return base + int64(hours*hourMS) }

// warmUp is a stream of unrelated headlines before the cases, so that
// document frequencies are those of a stream, not of two texts.
func warmUp() []Doc {
	titles := []string{
		"Central bank holds interest rates as inflation eases",
		"Storm knocks out power to thousands along the coast",
		"Tech giant unveils new phone with larger screen",
		"Football club sacks manager after run of defeats",
		"Oil prices slip as stockpiles grow",
		"Scientists find water ice near the moon's south pole",
		"Airline cancels flights as pilots strike over pay",
		"City council approves budget for new tram line",
		"Film studio posts record quarter on streaming growth",
		"Hospital waiting lists reach new high, figures show",
	}
	var out []Doc
	for i, s := range titles {
		out = append(out, Doc{ID: fmt.Sprintf("w%d", i), Title: s, Time: at(-10 + float64(i)/2)})
	}
	return out
}

// stories runs docs through a fresh Clusterer and returns id → story.
func stories(m *Model, docs []Doc) map[string]string {
	c := NewClusterer(m)
	out := map[string]string{}
	for _, d := range docs {
		out[d.ID] = c.Add(d)
	}
	for id, s := range out {
		out[id] = c.Current(s)
	}
	return out
}

// Two coalition deals two hours apart, in different places and led by
// different people, share only coalition, pact, party, lawmakers, vote and
// Monday: they are two events.
func TestCoalitionsSharingNoNameStayApart(t *testing.T) {
	m := defaultModelT(t)
	docs := append(warmUp(),
		Doc{ID: "elwich", Time: at(0),
			Title: "Bridge Party joins Halcroft coalition over trawler licences",
			Body:  "Lawmakers in Elwich will vote on Monday on the coalition pact led by Florian Halcroft, after the Bridge Party won a deal on trawler licences."},
		Doc{ID: "belfold", Time: at(2),
			Title: "Coalition pact agreed in Belfold as lawmakers prepare Monday vote",
			Body:  "Yannick Crandale said his party and two smaller groups had sealed the coalition; lawmakers vote on the pact on Monday."},
	)
	got := stories(m, docs)
	if got["elwich"] == got["belfold"] {
		t.Errorf("the Elwich and Belfold coalition deals are in one story (%s)", got["elwich"])
	}
	// The same event told again with its names does join: the test above
	// is not passed by a model that never joins.
	docs = append(docs, Doc{ID: "elwich2", Time: at(3),
		Title: "Halcroft coalition wins Bridge Party backing on trawler licences",
		Body:  "Florian Halcroft secured the Bridge Party's support in Elwich ahead of Monday's vote."})
	got = stories(m, docs)
	if got["elwich2"] != got["elwich"] {
		t.Errorf("a second report of the Elwich deal founded story %s, want %s", got["elwich2"], got["elwich"])
	}
}

// Headlines about unrelated days share only "day": they must not chain into
// one story through it.
func TestDayHeadlinesDoNotChain(t *testing.T) {
	m := defaultModelT(t)
	docs := append(warmUp(),
		Doc{ID: "memorial", Time: at(0), Title: "National Memorial Day: ceremonies honour fallen firefighters"},
		Doc{ID: "sales", Time: at(0.5), Title: "Singles Day sales break records for online retailers"},
		Doc{ID: "film", Time: at(1), Title: "Opening day crowds pack cinemas for Starfall film"},
		Doc{ID: "memorial2", Time: at(1.5), Title: "Day of remembrance: what we know about the ceremonies"},
		Doc{ID: "sales2", Time: at(2), Title: "Live updates: day of deals as shoppers hunt bargains"},
	)
	got := stories(m, docs)
	ids := []string{"memorial", "sales", "film", "memorial2", "sales2"}
	for i, a := range ids {
		for _, b := range ids[i+1:] {
			if got[a] == got[b] {
				t.Errorf("%s and %s are in one story", a, b)
			}
		}
	}
}

// A generic word never counts as shared evidence, and an entity is found
// in a text in sentence case.
func TestExtract(t *testing.T) {
	x := NewExtractor()
	a := x.Extract(Doc{ID: "a", Title: "Live updates: what we know about the opinion day", Body: "An explainer."})
	if len(a.terms) != 0 {
		var ws []string
		for w, id := range x.ids {
			if slices.Contains(a.terms, id) {
				ws = append(ws, w)
			}
		}
		t.Errorf("boilerplate headline has evidence terms %q", ws)
	}
	ents := x.entities("Lawmakers in Elwich back Florian Halcroft's pact, a 5.5 percent rise; ECB waits on Monday")
	for _, want := range []string{"elwich", "florian_halcroft", "halcroft", "ecb", "#5.5 percent"} {
		if !slices.Contains(ents, want) {
			t.Errorf("entities %q lack %q", ents, want)
		}
	}
	for _, bad := range []string{"lawmakers", "monday"} {
		if slices.Contains(ents, bad) {
			t.Errorf("entities %q hold %q", ents, bad)
		}
	}
}

// synthetic returns n stories of k headlines each, every story about its
// own company, all sharing market words, in time order.
func synthetic(n, k int) []Labelled {
	verbs := []string{"shares jump after", "shares slide after", "investors weigh", "analysts cut targets after", "board backs"}
	things := []string{"earnings beat", "profit warning", "merger talks", "chief executive exit", "factory fire"}
	var out []Labelled
	for j := range k {
		for i := range n {
			name := []string{"Zorbax", "Quenlo", "Hartwick", "Ostrava Mining", "Pellin", "Vantor"}[i%6]
			title := fmt.Sprintf("%s %s %s %s", name, verbs[(i+j)%len(verbs)], name, things[i%len(things)])
			out = append(out, Labelled{Doc: Doc{ID: fmt.Sprintf("s%d-%d", i, j), Title: title, Time: at(float64(j) + float64(i)/10)}, Story: fmt.Sprint(i)})
		}
	}
	return out
}

// The same input gives the same stories, twice, and the same training data
// gives the same model file.
func TestDeterministic(t *testing.T) {
	docs := synthetic(6, 5)
	for _, d := range warmUp() {
		docs = append(docs, Labelled{Doc: d, Story: d.ID})
	}
	m1, err1 := Train(docs, TrainOptions{})
	m2, err2 := Train(docs, TrainOptions{})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	f1, _ := m1.Encode()
	f2, _ := m2.Encode()
	if string(f1) != string(f2) {
		t.Error("two trainings on the same data give different files")
	}
	for _, m := range []*Model{defaultModelT(t), m1} {
		a, b := Run(m, docs), Run(m, docs)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("two runs differ:\n%v\n%v", a, b)
		}
	}
}

func TestModelFile(t *testing.T) {
	m := defaultModelT(t)
	c := *m
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(b); err != nil {
		t.Fatalf("decode of an encoded model: %v", err)
	}
	for name, edit := range map[string]func(string) string{
		"tampered weight": func(s string) string { return strings.Replace(s, `"threshold": `, `"threshold": 1`, 1) },
		"other version":   func(s string) string { return strings.Replace(s, `"version": 1`, `"version": 2`, 1) },
		"other format":    func(s string) string { return strings.Replace(s, Format, "x", 1) },
		"not JSON":        func(s string) string { return s[:10] },
	} {
		if _, err := Decode([]byte(edit(string(b)))); !errors.Is(err, ErrModel) {
			t.Errorf("%s: Decode = %v, want ErrModel", name, err)
		}
	}
}

// A long stream: pruning the closed stories changes no assignment, and
// the term index holds only what the open stories need.
func TestPruneLongStream(t *testing.T) {
	m := defaultModelT(t)
	var docs []Doc
	for day := range 30 {
		for i, d := range synthetic(6, 5) {
			d.ID = fmt.Sprintf("%d-%s", day, d.ID)
			// Each day its own companies: the words repeat, the events do not.
			d.Title = strings.ReplaceAll(d.Title, " ", fmt.Sprintf(" d%d ", day%7)) + fmt.Sprintf(" item%d", i%3)
			d.Time += int64(day) * 24 * int64(hourMS)
			docs = append(docs, d.Doc)
		}
	}
	run := func(every int) (map[string]string, int) {
		c := NewClusterer(m)
		c.pruneEvery = every
		out := map[string]string{}
		for _, d := range docs {
			out[d.ID] = c.Add(d)
		}
		for id, s := range out {
			out[id] = c.Current(s)
		}
		n := 0
		for _, l := range c.byTerm {
			n += len(l)
		}
		return out, n
	}
	pruned, nPruned := run(64)
	kept, nKept := run(0)
	if fmt.Sprint(pruned) != fmt.Sprint(kept) {
		t.Error("pruning changed the stories")
	}
	if nPruned*3 > nKept {
		t.Errorf("term index %d entries pruned, %d not: pruning keeps too much", nPruned, nKept)
	}
	t.Logf("term index entries after %d articles over 30 days: %d pruned, %d not", len(docs), nPruned, nKept)
}
