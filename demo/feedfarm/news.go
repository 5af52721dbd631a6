package feedfarm

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"hash/fnv"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/newsflow/newsflow/internal/opml"
)

// The news world: a deterministic sequence of events, each covered by
// several outlets in their own words. Event k's topic, entities, key facts
// and coverage depend only on the seed and k; its publish time depends on
// the time of the generation that published it.

// Outlet is a news outlet of the world.
type Outlet struct {
	Name      string
	Domain    string
	Authority float64
}

// Outlet returns outlet n.
func (f *Farm) Outlet(n int) Outlet {
	name := ""
	if n < len(outletNames) {
		name = outletNames[n]
	} else {
		i := n - len(outletNames)
		np, nq := len(outletPlaces), len(outletPapers)
		name = "The " + outletPlaces[i%np] + " " + outletPapers[(i/np+4)%nq]
		if i >= np*nq {
			name += " " + strconv.Itoa(i/(np*nq)+1)
		}
	}
	var dom strings.Builder
	for _, w := range strings.Fields(strings.TrimPrefix(name, "The ")) {
		for _, r := range strings.ToLower(w) {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				dom.WriteRune(r)
			}
		}
	}
	dom.WriteString(".example")
	return Outlet{Name: name, Domain: dom.String(), Authority: outletAuthority[n%len(outletAuthority)]}
}

// Article is one outlet's article about an event.
type Article struct {
	Event     int
	Topic     string
	Outlet    int
	Title     string
	Summary   string
	Link      string
	GUID      string
	Published time.Time
}

// event is a news event: its kind, its filled-in entities and the outlets
// that cover it.
type event struct {
	k       int
	ki      int
	kind    *kind
	at      time.Time
	fill    *strings.Replacer
	outlets []int
	cycle   int // events of the kind before this one
}

// Events returns how many events generation g has published: event k of
// the world is published by every generation from (k-Base)/PerGeneration+1
// on (from 0 for k < Base).
func (f *Farm) Events(g int64) int { return f.opts.Base + int(g)*f.opts.PerGeneration }

// eventAt returns event k; times are the times of the generations up to
// the one that published it.
func (f *Farm) eventAt(k int, times []time.Time) *event {
	o := f.opts
	// Kinds come round in one order, so that two events of a kind are
	// always len(kinds) events apart.
	cycle := k / len(kinds)
	ki := newRNG(o.Seed, 1, 0).perm(len(kinds))[k%len(kinds)]
	kd := &kinds[ki]
	r := newRNG(o.Seed, 2, uint64(k))
	// draw returns the value event k takes as the j-th of the `per` values
	// it takes from a pool: a permutation of the pool, so that no value
	// comes back within len/per consecutive events.
	draw := func(pool facts, per, j int, salt uint64) string {
		return pool.at(permute(o.Seed, salt, pool.len(), per*k+j))
	}
	// A kind's facts change from one event of the kind to the next, each
	// slot in its own order.
	fact := func(pool facts, salt uint64) string {
		if pool.len() == 0 {
			return ""
		}
		return pool.at(permute(o.Seed, uint64(ki)<<8|salt, pool.len(), cycle))
	}
	given := list(firstNames...)
	ql := draw(product(nameStarts, "", surnameEnds), 2, 1, 1)
	p := draw(given, 2, 0, 0) + " " + draw(product(nameStarts, "", surnameEnds), 2, 0, 1)
	q := draw(given, 2, 1, 0) + " " + ql
	towns := product(nameStarts, "", placeEnds)
	c := draw(towns, 3, 0, 2)
	var org, org2 string
	switch kd.topic {
	case "politics":
		parties := product(partyWords, " ", partyKinds)
		org, org2 = draw(parties, 2, 0, 3), draw(parties, 2, 1, 3)
	case "world":
		countries := product(nameStarts, "", countryEnds)
		org, org2 = draw(countries, 2, 0, 4), draw(countries, 2, 1, 4)
	case "sports":
		teams := list(mascots...)
		org = draw(towns, 3, 1, 2) + " " + draw(teams, 2, 0, 5)
		org2 = draw(towns, 3, 2, 2) + " " + draw(teams, 2, 1, 5)
	case "science":
		org = draw(towns, 3, 1, 2) + " " + scienceHomes[r.intn(len(scienceHomes))]
	default:
		brands := product(nameStarts, "", brandEnds)
		org, org2 = draw(brands, 2, 0, 6), draw(brands, 2, 1, 6)
	}
	n := kd.n[0] + r.intn(kd.n[1]-kd.n[0]+1)
	m := kd.m[0] + r.intn(kd.m[1]-kd.m[0]+1)
	e := &event{
		k: k, ki: ki, kind: kd, at: f.eventTime(k, times), cycle: cycle,
		fill: strings.NewReplacer("{P}", p, "{L}", surname(p), "{QL}", ql, "{Q}", q, "{O2}", org2, "{O}", org,
			"{C}", c, "{T}", fact(kd.t, 1), "{U}", fact(kd.u, 2), "{V}", fact(kd.v, 3), "{N}", strconv.Itoa(n), "{M}", strconv.Itoa(m)),
	}
	// Two to eight outlets, three to five most often.
	cover := []int{2, 3, 3, 4, 4, 4, 5, 5, 6, 7, 8}[r.intn(11)]
	cover = min(cover, o.Outlets)
	e.outlets = r.perm(o.Outlets)[:cover]
	return e
}

func surname(full string) string { return full[strings.LastIndexByte(full, ' ')+1:] }

// permute maps i to a position in 0..n-1 by an affine permutation chosen
// by the seed and salt: consecutive i never map to the same position
// within n, and do not map to neighbouring ones.
func permute(seed, salt uint64, n, i int) int {
	r := newRNG(seed, 3, salt)
	a, b := 1, 0
	if n > 1 {
		a, b = 1+int(r.next()%uint64(n-1)), int(r.next()%uint64(n))
	}
	for gcd(a, n) != 1 {
		a++
	}
	return (i%n*a + b) % n
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// eventTime is when event k happened: events of generation 0 are Spacing
// apart up to the time of generation 0; those of a later generation are
// spread evenly after the previous generation's time up to its own.
func (f *Farm) eventTime(k int, times []time.Time) time.Time {
	o := f.opts
	if k < o.Base {
		return times[0].Add(-time.Duration(o.Base-1-k) * o.Spacing)
	}
	g, j := (k-o.Base)/o.PerGeneration+1, (k-o.Base)%o.PerGeneration
	prev, cur := times[g-1], times[g]
	return cur.Add(-time.Duration(o.PerGeneration-1-j) * cur.Sub(prev) / time.Duration(o.PerGeneration))
}

// article writes event e as outlet n, which covers it as its rank-th
// outlet: outlets use different headlines and leads while they last, and
// summaries of two or three sentences.
func (f *Farm) article(e *event, n, rank int) Article {
	kd := e.kind
	r := newRNG(f.opts.Seed, 5, uint64(e.k)<<16|uint64(n))
	h0 := newRNG(f.opts.Seed, 6, uint64(e.k)).next()
	title := e.write(kd.headlines[(int(h0%97)+rank)%len(kd.headlines)])
	sentences := []string{kd.leads[(int(h0%89)+rank)%len(kd.leads)]}
	switch r.intn(3) {
	case 0:
		sentences = append(sentences, kd.seconds[r.intn(len(kd.seconds))])
	case 1:
		sentences = append(sentences, kd.thirds[r.intn(len(kd.thirds))])
	default:
		sentences = append(sentences, kd.seconds[r.intn(len(kd.seconds))], kd.thirds[r.intn(len(kd.thirds))])
	}
	for i, s := range sentences {
		sentences[i] = e.write(s)
	}
	out := f.Outlet(n)
	return Article{
		Event: e.k, Topic: kd.topic, Outlet: n, Title: title, Summary: strings.Join(sentences, " "),
		Link:      "https://" + out.Domain + "/" + kd.topic + "/" + slug(title) + "-" + strconv.Itoa(e.k),
		GUID:      out.Domain + ":" + strconv.Itoa(e.k),
		Published: e.at.Add(-time.Duration(r.intn(180)) * time.Second).Truncate(time.Second),
	}
}

// write fills a template in with the event's words and entities. The
// words of a group [a|b|c] take turns from one event of a kind to the
// next, each group from its own start.
func (e *event) write(tmpl string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(tmpl, '[')
		j := strings.IndexByte(tmpl, ']')
		if i < 0 || j < i {
			break
		}
		group := tmpl[i+1 : j]
		words := strings.Split(group, "|")
		h := fnv.New64a()
		h.Write([]byte(strings.ToLower(group)))
		b.WriteString(tmpl[:i])
		b.WriteString(words[(e.cycle+int(h.Sum64()%uint64(len(words))))%len(words)])
		tmpl = tmpl[j+1:]
	}
	b.WriteString(tmpl)
	return upperFirst(tidy(e.fill.Replace(b.String())))
}

// tidy fixes what filling in can get wrong: "a" before a vowel sound
// ("an afrobeat record", "an 18% rise") and the possessive of names that
// end in s ("Thornings' name").
func tidy(s string) string {
	words := strings.Split(s, " ")
	for i, w := range words {
		if (w == "a" || w == "A") && i+1 < len(words) && anBefore(words[i+1]) {
			words[i] = w + "n"
		}
		if strings.HasSuffix(w, "s's") {
			words[i] = strings.TrimSuffix(w, "s") // Thornings's → Thornings'
		}
	}
	return strings.Join(words, " ")
}

// anBefore reports whether a word is read with a vowel sound first.
func anBefore(w string) bool {
	w = strings.ToLower(w)
	if w == "" {
		return false
	}
	if c := w[0]; c >= '0' && c <= '9' {
		digits := strings.TrimRightFunc(w, func(r rune) bool { return r < '0' || r > '9' })
		return c == '8' || digits == "11" || digits == "18"
	}
	for _, p := range []string{"uni", "use", "usu", "one", "eu"} {
		if strings.HasPrefix(w, p) {
			return false
		}
	}
	return strings.IndexByte("aeiou", w[0]) >= 0
}

func upperFirst(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[size:]
}

// slug is the first words of a title, lower case, joined by hyphens.
func slug(title string) string {
	words := strings.FieldsFunc(strings.ToLower(title), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
	return strings.Join(words[:min(len(words), 8)], "-")
}

// Articles returns the articles outlet n has published by generation g
// about the newest limit events it covers (all when limit ≤ 0), newest
// first.
func (f *Farm) Articles(n int, g int64, limit int) []Article {
	if n < 0 || n >= f.opts.Outlets {
		return nil
	}
	times := f.times(g)
	var out []Article
	for k := f.Events(g) - 1; k >= 0 && (limit <= 0 || len(out) < limit); k-- {
		e := f.eventAt(k, times)
		for rank, o := range e.outlets {
			if o == n {
				out = append(out, f.article(e, n, rank))
				break
			}
		}
	}
	// Outlets publish a little after one another, so close events can
	// come out of order.
	slices.SortStableFunc(out, func(a, b Article) int { return b.Published.Compare(a.Published) })
	return out
}

type rssDoc struct {
	XMLName xml.Name   `xml:"rss"`
	Version string     `xml:"version,attr"`
	Channel rssChannel `xml:"channel"`
}

type rssChannel struct {
	Title         string    `xml:"title"`
	Link          string    `xml:"link"`
	Description   string    `xml:"description"`
	Language      string    `xml:"language"`
	LastBuildDate string    `xml:"lastBuildDate"`
	Items         []rssItem `xml:"item"`
}

type rssItem struct {
	Title       string  `xml:"title"`
	Link        string  `xml:"link"`
	GUID        rssGUID `xml:"guid"`
	PubDate     string  `xml:"pubDate"`
	Category    string  `xml:"category"`
	Description string  `xml:"description"`
	// Enclosure is the lead image (with ArticlePages).
	Enclosure *rssEnclosure `xml:"enclosure,omitempty"`
}

type rssEnclosure struct {
	URL    string `xml:"url,attr"`
	Type   string `xml:"type,attr"`
	Length string `xml:"length,attr"`
}

type rssGUID struct {
	IsPermaLink string `xml:"isPermaLink,attr"`
	Value       string `xml:",chardata"`
}

// NewsFeed returns the RSS feed of outlet n at generation g: its newest
// Items articles, linked to their outlet's site.
func (f *Farm) NewsFeed(n int, g int64) ([]byte, error) { return f.newsFeed(n, g, "") }

// newsFeed returns the RSS feed of outlet n at generation g; with a base
// URL (Options.ArticlePages) its links point at the farm's article pages
// under base.
func (f *Farm) newsFeed(n int, g int64, base string) ([]byte, error) {
	if n < 0 || n >= f.opts.Outlets {
		return nil, fmt.Errorf("feedfarm: no outlet %d", n)
	}
	out := f.Outlet(n)
	doc := rssDoc{Version: "2.0", Channel: rssChannel{
		Title: out.Name, Link: pageURL(base, "https://"+out.Domain+"/"), Description: "News from " + out.Name, Language: "en",
		LastBuildDate: f.times(g)[g].Format(time.RFC1123Z),
	}}
	for _, a := range f.Articles(n, g, f.opts.Items) {
		it := rssItem{
			Title: a.Title, Link: pageURL(base, a.Link), GUID: rssGUID{IsPermaLink: "false", Value: a.GUID},
			PubDate: a.Published.Format(time.RFC1123Z), Category: a.Topic, Description: a.Summary,
		}
		if base != "" {
			it.Enclosure = &rssEnclosure{URL: imageURL(base, a.Event, n), Type: "image/png", Length: "0"}
		}
		doc.Channel.Items = append(doc.Channel.Items, it)
	}
	var b bytes.Buffer
	b.WriteString(xml.Header)
	enc := xml.NewEncoder(&b)
	enc.Indent("", " ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("feedfarm: encode feed %d: %w", n, err)
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// NewsOPML returns the list of the outlets' feeds, whose URLs start with
// base (e.g. "http://127.0.0.1:8090"); with Options.ArticlePages their
// homepages are the outlets' pages on the farm.
func (f *Farm) NewsOPML(base string) ([]byte, error) {
	base = strings.TrimSuffix(base, "/")
	entries := make([]opml.Entry, f.opts.Outlets)
	for n := range entries {
		out := f.Outlet(n)
		home := "https://" + out.Domain + "/"
		if f.opts.ArticlePages {
			home = pageURL(base, home)
		}
		entries[n] = opml.Entry{Title: out.Name, FeedURL: base + "/news/" + strconv.Itoa(n) + ".xml",
			Homepage: home, Category: "news", Authority: out.Authority}
	}
	var b bytes.Buffer
	if err := opml.Write(&b, "News world", entries); err != nil {
		return nil, fmt.Errorf("feedfarm: encode opml: %w", err)
	}
	return b.Bytes(), nil
}

func (f *Farm) serveNews(w http.ResponseWriter, r *http.Request, name string) {
	g := f.generation.Load()
	if name == "sources.opml" {
		b, err := f.NewsOPML(baseURL(r))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		serveBytes(w, r, b, "text/x-opml; charset=utf-8", f.times(0)[0])
		return
	}
	num, ok := strings.CutSuffix(name, ".xml")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n < 0 || n >= f.opts.Outlets {
		http.NotFound(w, r)
		return
	}
	base := ""
	if f.opts.ArticlePages {
		base = baseURL(r)
	}
	b, err := f.newsFeed(n, g, base)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	serveBytes(w, r, b, "application/rss+xml; charset=utf-8", f.times(g)[g])
}

// baseURL is the farm's own URL as the request reached it.
func baseURL(r *http.Request) string {
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// rng is SplitMix64: small, fast, and the same on every platform and Go
// version, so a seed always gives the same world.
type rng struct{ s uint64 }

func newRNG(seed, stream, n uint64) *rng {
	r := &rng{s: seed ^ stream*0xd1b54a32d192ed03}
	r.s ^= r.next() + n*0x9e3779b97f4a7c15
	return r
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

// perm returns a random permutation of 0..n-1.
func (r *rng) perm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := r.intn(i + 1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}
