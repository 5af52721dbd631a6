package searchindex

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/registry"
)

var t0 = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

func at(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }

// fixture is a small corpus written for these tests: 30 articles, 5 topics,
// 4 sources, published an hour or more apart (two share a time, to test the
// ID tie-break).
var fixture = []Doc{
	{ID: "a01", Title: "Central bank raises interest rates to fight inflation", Summary: "The central bank lifted its benchmark rate by a quarter point on Thursday.", SourceID: "reuters", Source: "Reuters", Topics: []string{"economy"}, PublishedAt: at(1), URL: "https://example.com/a01", StoryID: "s1"},
	{ID: "a02", Title: "Markets rally as tech stocks rebound", Summary: "Investors shrugged off inflation fears as chipmakers led gains.", SourceID: "ft", Source: "Financial Times", Topics: []string{"economy", "tech"}, PublishedAt: at(2), URL: "https://example.com/a02", StoryID: "s2"},
	{ID: "a03", Title: "Inflation cools for a third straight month", Summary: "Consumer prices rose less than expected in February.", SourceID: "bbc", Source: "BBC News", Topics: []string{"economy"}, PublishedAt: at(3), URL: "https://example.com/a03", StoryID: "s3"},
	{ID: "a04", Title: "Election results delayed in key swing state", Summary: "Officials said counting would continue through the weekend.", SourceID: "reuters", Source: "Reuters", Topics: []string{"politics"}, PublishedAt: at(4), StoryID: "s4"},
	{ID: "a05", Title: "Marathon runner runs record time in Berlin", Summary: "The Kenyan athlete beat the previous best by forty seconds.", SourceID: "bbc", Source: "BBC Sport", Topics: []string{"sport"}, PublishedAt: at(5), StoryID: "s5"},
	{ID: "a06", Title: "Rates on hold while interest in bonds grows", Summary: "Bond yields fell as traders bet on a pause.", SourceID: "ft", Source: "Financial Times", Topics: []string{"economy"}, PublishedAt: at(6), StoryID: "s6"},
	{ID: "a07", Title: `Tom & Jerry's <b>cartoon</b> studio sold`, Summary: `The "classic" studio fetched <script>alert(1)</script> a record price.`, SourceID: "verge", Source: "The Verge", Topics: []string{"tech"}, PublishedAt: at(7), StoryID: "s7"},
	{ID: "a08", Title: "New smartphone chip promises longer battery life", Summary: "The processor uses a smaller manufacturing process.", SourceID: "verge", Source: "The Verge", Topics: []string{"tech"}, PublishedAt: at(8), StoryID: "s8"},
	{ID: "a09", Title: "Parliament debates new climate law", Summary: "Lawmakers argued over emission targets for 2035.", SourceID: "bbc", Source: "BBC News", Topics: []string{"politics"}, PublishedAt: at(9), StoryID: "s9"},
	{ID: "a10", Title: "Hospital waiting lists reach record high", Summary: "Health officials blamed staff shortages and winter pressures.", SourceID: "bbc", Source: "BBC News", Topics: []string{"health"}, PublishedAt: at(10), StoryID: "s10"},
	{ID: "a11", Title: "Football club appoints new manager", Summary: "The former player signed a three year contract.", SourceID: "bbc", Source: "BBC Sport", Topics: []string{"sport"}, PublishedAt: at(11), StoryID: "s11"},
	{ID: "a12", Title: "Election campaign enters final week", Summary: "Candidates crisscrossed the country in a last push for votes.", SourceID: "reuters", Source: "Reuters", Topics: []string{"politics"}, PublishedAt: at(12), StoryID: "s4"},
	{ID: "a13", Title: "Oil prices climb on supply worries", Summary: "Brent crude rose two percent after a pipeline outage.", SourceID: "reuters", Source: "Reuters", Topics: []string{"economy"}, PublishedAt: at(13), StoryID: "s13"},
	{ID: "a14", Title: "Vaccine trial shows strong results", Summary: "Researchers reported high efficacy against the new variant.", SourceID: "ft", Source: "Financial Times", Topics: []string{"health"}, PublishedAt: at(14), StoryID: "s14"},
	{ID: "a15", Title: "Startup raises funding for battery recycling", Summary: "The company plans to build a plant in Nevada.", SourceID: "verge", Source: "The Verge", Topics: []string{"tech", "economy"}, PublishedAt: at(15), StoryID: "s15"},
	{ID: "a16", Title: "Tennis star withdraws from open with injury", Summary: "The world number two cited a wrist problem.", SourceID: "bbc", Source: "BBC Sport", Topics: []string{"sport"}, PublishedAt: at(16), StoryID: "s16"},
	{ID: "a17", Title: "Government unveils housing plan", Summary: "Ministers promised a million new homes and lower interest costs for buyers.", SourceID: "ft", Source: "Financial Times", Topics: []string{"politics", "economy"}, PublishedAt: at(17), StoryID: "s17"},
	{ID: "a18", Title: "Heatwave warning issued for the south", Summary: "Temperatures could reach record levels this weekend.", SourceID: "bbc", Source: "BBC News", Topics: []string{"health"}, PublishedAt: at(18), StoryID: "s18"},
	{ID: "a19", Title: "Chipmaker shares jump after earnings beat", Summary: "Demand for AI processors drove revenue higher.", SourceID: "reuters", Source: "Reuters", Topics: []string{"tech", "economy"}, PublishedAt: at(19), StoryID: "s19"},
	{ID: "a20", Title: "Cyclists protest over road safety", Summary: "Hundreds rode through the city centre to demand bike lanes.", SourceID: "verge", Source: "The Verge", Topics: []string{"politics"}, PublishedAt: at(20), StoryID: "s20"},
	{ID: "a21", Title: "Runners brave the cold at city half marathon", Summary: "Thousands took part despite freezing temperatures.", SourceID: "bbc", Source: "BBC Sport", Topics: []string{"sport"}, PublishedAt: at(21), StoryID: "s5"},
	{ID: "a22", Title: "Regulators probe smartphone app store fees", Summary: "The inquiry will examine commissions charged to developers.", SourceID: "ft", Source: "Financial Times", Topics: []string{"tech", "politics"}, PublishedAt: at(22), StoryID: "s22"},
	{ID: "a23", Title: "Doctors warn about flu season", Summary: "Hospital admissions rose sharply in the last week.", SourceID: "reuters", Source: "Reuters", Topics: []string{"health"}, PublishedAt: at(23), StoryID: "s23"},
	{ID: "a24", Title: "Currency slides after surprise rate cut", Summary: "The decision by the central bank caught markets off guard.", SourceID: "reuters", Source: "Reuters", Topics: []string{"economy"}, PublishedAt: at(24), StoryID: "s24"},
	{ID: "a25", Title: "Electric car sales overtake diesel", Summary: "Battery prices fell, making models cheaper.", SourceID: "verge", Source: "The Verge", Topics: []string{"tech", "economy"}, PublishedAt: at(25), StoryID: "s25"},
	{ID: "a26", Title: "Minister resigns over expenses", Summary: "The resignation follows weeks of pressure from the opposition.", SourceID: "bbc", Source: "BBC News", Topics: []string{"politics"}, PublishedAt: at(26), StoryID: "s26"},
	{ID: "a27", Title: "Olympic committee picks host city", Summary: "The games will return to Europe in 2036.", SourceID: "reuters", Source: "Reuters", Topics: []string{"sport"}, PublishedAt: at(27), StoryID: "s27"},
	{ID: "a28", Title: "Study links sleep to heart health", Summary: "Adults who slept less than six hours had higher risk.", SourceID: "ft", Source: "Financial Times", Topics: []string{"health"}, PublishedAt: at(28), StoryID: "s28"},
	{ID: "a29", Title: "Quarterly report", Summary: "Short note.", Content: "Deep in the body the text mentions a zeppelin factory and the inflation outlook.", SourceID: "ft", Source: "Financial Times", Topics: []string{"economy"}, PublishedAt: at(28), StoryID: "s29"},
	{ID: "a30", Title: "Weather service upgrades supercomputer", Summary: "Forecasts will be more accurate, officials said.", SourceID: "verge", Source: "The Verge", Topics: nil, PublishedAt: at(30), StoryID: "s30"},
}

// newTestIndex opens an index in a new temporary directory, closed at the
// end of the test, and applies docs.
func newTestIndex(t testing.TB, docs []Doc, opts ...Options) (*Index, string) {
	t.Helper()
	dir := t.TempDir()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	ix, err := Open(dir, o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := ix.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if len(docs) > 0 {
		if err := ix.Apply(docs, nil); err != nil {
			t.Fatalf("apply: %v", err)
		}
	}
	return ix, dir
}

func mustSearch(t testing.TB, ix *Index, r Request) *Result {
	t.Helper()
	res, err := ix.Search(context.Background(), r)
	if err != nil {
		t.Fatalf("search %+v: %v", r, err)
	}
	return res
}

func ids(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

// searchAll follows Next from r until the last page.
func searchAll(t testing.TB, ix *Index, r Request) []Hit {
	t.Helper()
	var all []Hit
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatal("pagination does not end")
		}
		res := mustSearch(t, ix, r)
		limit := effectiveLimit(r.Limit)
		if len(res.Hits) > limit {
			t.Fatalf("page of %d hits, limit %d", len(res.Hits), limit)
		}
		all = append(all, res.Hits...)
		if res.Next == nil {
			return all
		}
		if len(res.Hits) != limit {
			t.Fatalf("short page of %d hits (limit %d) with a next cursor", len(res.Hits), limit)
		}
		r.After = res.Next
	}
}

// Oracle: which documents should match, computed without the index.

var enAnalyzer = func() func(string) map[string]bool {
	a, err := registry.NewCache().AnalyzerNamed(en.AnalyzerName)
	if err != nil {
		panic(err)
	}
	return func(s string) map[string]bool {
		terms := map[string]bool{}
		for _, tok := range a.Analyze([]byte(s)) {
			terms[string(tok.Term)] = true
		}
		return terms
	}
}()

// textMatches reports whether d has every analyzed term of q (any term, if
// any is set) in its title, summary or (indexed part of its) content.
func textMatches(d Doc, q string, maxContent int, any bool) bool {
	content := d.Content
	if maxContent < 0 {
		content = ""
	} else if len(content) > maxContent {
		content = content[:maxContent]
	}
	dt := enAnalyzer(d.Title + " \n " + d.Summary + " \n " + content)
	qt := enAnalyzer(q)
	if len(qt) == 0 {
		return false
	}
	for term := range qt {
		if dt[term] == any {
			return any
		}
	}
	return !any
}

func filterMatches(d Doc, r Request) bool {
	if r.Topic != "" && !slices.Contains(d.Topics, r.Topic) {
		return false
	}
	if r.Source != "" && d.SourceID != r.Source {
		return false
	}
	if len(r.Sources) > 0 && !slices.Contains(r.Sources, d.SourceID) {
		return false
	}
	p := indexedTime(d.PublishedAt)
	if !r.From.IsZero() && p.Before(r.From) {
		return false
	}
	if !r.To.IsZero() && !p.Before(r.To) {
		return false
	}
	return true
}

// expected returns the ids of docs matching r (ignoring After); for requests
// without text they are in newest-first order.
func expected(docs []Doc, r Request) []string { return expectedOpts(docs, r, Options{}) }

func expectedOpts(docs []Doc, r Request, o Options) []string {
	o = o.withDefaults()
	var m []Doc
	for _, d := range docs {
		if !filterMatches(d, r) {
			continue
		}
		if q := strings.TrimSpace(r.Query); q != "" && !textMatches(d, q, o.MaxContentBytes, o.AnyTerm) {
			continue
		}
		m = append(m, d)
	}
	slices.SortFunc(m, func(a, b Doc) int {
		if c := indexedTime(b.PublishedAt).Compare(indexedTime(a.PublishedAt)); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	out := make([]string, len(m))
	for i, d := range m {
		out[i] = d.ID
	}
	return out
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// checkOrder fails unless hits are strictly increasing in order o.
func checkOrder(t testing.TB, o Order, hits []Hit) {
	t.Helper()
	for i := 1; i < len(hits); i++ {
		if compareHits(o, &hits[i-1], &hits[i]) >= 0 {
			t.Fatalf("hits %d (%s %v %v) and %d (%s %v %v) out of %s order", i-1, hits[i-1].ID, hits[i-1].Score, hits[i-1].PublishedAt,
				i, hits[i].ID, hits[i].Score, hits[i].PublishedAt, o)
		}
	}
}
