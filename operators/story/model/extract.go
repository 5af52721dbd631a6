package model

import (
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/newsflow/newsflow/internal/text"
	"github.com/newsflow/newsflow/operators/internal/features"
)

// Doc is one article as the model sees it.
type Doc struct {
	ID          string
	Title, Body string
	// Time is the event time in ms since the epoch.
	Time int64
}

// The sub-vectors of an article.
const (
	subTitle = iota
	subBody
	subAll
	subEntity
	numSub
)

// entry is one weighted term of a sparse vector.
type entry struct {
	id int32
	w  float64
}

// vector is a sparse vector sorted by term id, of unit length (or empty).
type vector []entry

func (v vector) dot(u vector) float64 {
	var s float64
	i, j := 0, 0
	for i < len(v) && j < len(u) {
		switch {
		case v[i].id == u[j].id:
			s += v[i].w * u[j].w
			i++
			j++
		case v[i].id < u[j].id:
			i++
		default:
			j++
		}
	}
	return s
}

// Article is an article's extracted features.
type Article struct {
	Doc
	vec [numSub]vector
	// terms are the distinct non-generic words of the article (not its
	// entities, which repeat its words), sorted: what counts as shared
	// evidence.
	terms []int32
}

// Extractor turns documents into Articles. Term ids and document
// frequencies come from the stream it has seen, in order, so the same
// documents in the same order give the same vectors. It is not safe for
// concurrent use.
type Extractor struct {
	ids     map[string]int32
	generic []bool // by id
	df      []int32
	docs    int
	// lower counts, per lower-cased word, the texts that had it in lower
	// case: in a text in title case, a capitalised word seen in lower case
	// elsewhere is not a name.
	lower map[string]int
	tok   text.Tokenizer
}

// NewExtractor returns an Extractor that has seen nothing.
func NewExtractor() *Extractor {
	return &Extractor{ids: map[string]int32{}, lower: map[string]int{}, tok: text.NewTokenizer(features.TermOptions)}
}

func (x *Extractor) id(term string, gen bool) int32 {
	if id, ok := x.ids[term]; ok {
		return id
	}
	id := int32(len(x.df))
	x.ids[term] = id
	x.df = append(x.df, 0)
	x.generic = append(x.generic, gen)
	return id
}

// Extract returns the features of d and counts d in the stream's document
// frequencies.
func (x *Extractor) Extract(d Doc) *Article {
	a := &Article{Doc: d}
	var counts [numSub]map[int32]float64
	for i := range counts {
		counts[i] = map[int32]float64{}
	}
	var order []int32 // ids in order of first occurrence, for determinism
	seen := map[int32]bool{}
	add := func(sub int, id int32, n float64) {
		if !seen[id] {
			seen[id] = true
			order = append(order, id)
		}
		counts[sub][id] += n
	}
	for _, w := range x.words(d.Title) {
		id := x.id(w, Generic(w))
		add(subTitle, id, 1)
		add(subAll, id, 2) // title words count twice in all-text
	}
	for _, w := range x.words(d.Body) {
		id := x.id(w, Generic(w))
		add(subBody, id, 1)
		add(subAll, id, 1)
	}
	for _, e := range x.entities(d.Title + "\n" + d.Body) {
		add(subEntity, x.id("\x00"+e, false), 1)
	}
	x.docs++
	for _, id := range order {
		x.df[id]++
	}
	for sub := range counts {
		v := make(vector, 0, len(counts[sub]))
		var norm float64
		for _, id := range order {
			n, ok := counts[sub][id]
			if !ok {
				continue
			}
			w := (1 + math.Log(n)) * x.idf(id)
			if x.generic[id] {
				w *= genericWeight
			}
			v = append(v, entry{id, w})
			norm += w * w
		}
		if norm > 0 {
			norm = math.Sqrt(norm)
			for i := range v {
				v[i].w /= norm
			}
		}
		slices.SortFunc(v, func(a, b entry) int { return int(a.id - b.id) })
		a.vec[sub] = v
	}
	for _, id := range order {
		if !x.generic[id] && len(counts[subAll]) > 0 && counts[subAll][id] > 0 {
			a.terms = append(a.terms, id)
		}
	}
	slices.Sort(a.terms)
	x.learnCase(d.Title)
	x.learnCase(d.Body)
	return a
}

// genericWeight is the weight of a generic word relative to another word.
const genericWeight = 0.3

func (x *Extractor) idf(id int32) float64 {
	return math.Log(float64(x.docs+1)/float64(x.df[id]+1)) + 1
}

// words returns the index terms of s (the clusterer's tokens: folded, no
// stop words).
func (x *Extractor) words(s string) []string {
	var out []string
	x.tok.Reset(s)
	for x.tok.Next() {
		out = append(out, string(x.tok.Token()))
	}
	return out
}

// genericWords say little about which event a text is about: headline
// boilerplate, calendar words and common words that short headlines make
// look rare. They weigh less and never count as shared evidence.
var genericWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`live update know explainer explained analysis opinion editorial column
commentary letter podcast newsletter briefing recap roundup factbox timeline latest breaking exclusive
today tonight yesterday tomorrow week weekend morning evening night day year month time thing way need want
first last top big best world people man woman monday tuesday wednesday thursday friday saturday sunday
january february march april may june july august september october november december look here's
review photo picture gallery story full million billion percent`) {
		m[w] = true
	}
	return m
}()

// Generic reports whether an index term is a generic word.
func Generic(term string) bool { return genericWords[term] }

// word is a word of a text with its original case.
type word struct {
	s     string
	start bool // first word of a sentence or line
}

// rawWords splits s into words keeping case; punctuation other than
// inner apostrophes, hyphens, dots and digits separators ends a word, and
// ".", "!", "?", ":" or a line break starts a sentence.
func rawWords(s string) []word {
	var out []word
	start := true
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !startsWord(r) {
			if strings.ContainsRune(".!?:\n;|", r) {
				start = true
			}
			i += n
			continue
		}
		j := wordEnd(s, i)
		out = append(out, word{s: trimPossessive(s[i:j]), start: start})
		start = false
		i = j
	}
	return out
}

// startsWord reports whether r begins a word: a letter, a digit or a
// currency sign.
func startsWord(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '$' || r == '€' || r == '£'
}

// wordEnd returns the end of the word of s that starts at i: the runes
// that start words, and percent signs, with the inner punctuation that
// joins them (joinsWord).
func wordEnd(s string, i int) int {
	j := i
	for j < len(s) {
		r, n := utf8.DecodeRuneInString(s[j:])
		if !startsWord(r) && r != '%' && !joinsWord(s, i, j, r, n) {
			break
		}
		j += n
	}
	return j
}

// joinsWord reports whether r, the rune of n bytes at s[j:] after the
// word s[i:j], is punctuation inside the word, before a letter or a digit:
// an apostrophe or a hyphen; a dot or a comma between digits (a decimal
// point, a thousands separator); a dot between capitals (U.S).
func joinsWord(s string, i, j int, r rune, n int) bool {
	if !(r == '\'' || r == '-' || r == '.' || r == ',' || r == '’') || j+n >= len(s) {
		return false
	}
	next, _ := utf8.DecodeRuneInString(s[j+n:])
	if r == '.' || r == ',' {
		prev, _ := utf8.DecodeLastRuneInString(s[i:j])
		digits := unicode.IsDigit(prev) && unicode.IsDigit(next)
		capitals := r == '.' && unicode.IsUpper(prev) && unicode.IsUpper(next)
		if !digits && !capitals {
			return false
		}
	}
	return unicode.IsLetter(next) || unicode.IsDigit(next)
}

// trimPossessive drops a possessive "'s" or "’s" from the end of w.
func trimPossessive(w string) string {
	return strings.TrimSuffix(strings.TrimSuffix(w, "'s"), "’s")
}

func capitalised(w string) bool {
	r, _ := utf8.DecodeRuneInString(w)
	return unicode.IsUpper(r)
}

func acronym(w string) bool {
	letters := 0
	for _, r := range w {
		if unicode.IsLower(r) {
			return false
		}
		if unicode.IsLetter(r) {
			letters++
		}
	}
	return letters >= 2 && len(w) <= 8
}

func hasDigit(w string) bool { return strings.IndexFunc(w, unicode.IsDigit) >= 0 }

// units follow a number in the same quantity.
var units = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`percent per cent million billion trillion bn mn km kg mph miles mile tonnes tons
barrels points point years year dollars euros pounds yen people dead killed megapixel gb tb mb ghz inch inches`) {
		m[w] = true
	}
	return m
}()

// titleCase reports whether most longer words of a text are capitalised,
// so that capitals do not mark names.
func titleCase(ws []word) bool {
	n, c := 0, 0
	for _, w := range ws {
		if utf8.RuneCountInString(w.s) < 4 || hasDigit(w.s) {
			continue
		}
		n++
		if capitalised(w.s) {
			c++
		}
	}
	return n >= 3 && float64(c) >= 0.7*float64(n)
}

// learnCase counts the words s has in lower case.
func (x *Extractor) learnCase(s string) {
	seen := map[string]bool{}
	for _, w := range rawWords(s) {
		if !capitalised(w.s) && !hasDigit(w.s) && !seen[w.s] {
			seen[w.s] = true
			x.lower[strings.ToLower(w.s)]++
		}
	}
}

// norm lower-cases and folds an entity word as the index terms are.
func (x *Extractor) norm(w string) string {
	ws := x.words(w)
	return strings.Join(ws, " ")
}

// entities returns the entity terms of s: runs of capitalised words (a name
// of several words whole, and each of its words), acronyms, and numbers
// with the unit that follows them. A capitalised word that starts a
// sentence is a name only inside a run or when it is an acronym; in a text
// in title case a capitalised word seen in lower case elsewhere is not one.
func (x *Extractor) entities(s string) []string {
	es := entitySet{seen: map[string]bool{}}
	for _, line := range strings.Split(s, "\n") {
		x.lineEntities(&es, line)
	}
	return es.out
}

// entitySet collects entity terms in the order first found, once each.
type entitySet struct {
	out  []string
	seen map[string]bool
}

func (es *entitySet) add(e string) {
	if e != "" && !es.seen[e] {
		es.seen[e] = true
		es.out = append(es.out, e)
	}
}

// lineEntities adds the entities of a line of text (see entities).
func (x *Extractor) lineEntities(es *entitySet, line string) {
	ws := rawWords(line)
	tc := titleCase(ws)
	for i := 0; i < len(ws); i++ {
		w := ws[i]
		if hasDigit(w.s) {
			e, n := numberEntity(ws, i)
			es.add(e)
			i += n - 1
			continue
		}
		if !x.nameWord(w, tc) {
			continue
		}
		j := i + 1
		for j < len(ws) && x.nameWord(ws[j], tc) && !ws[j].start {
			j++
		}
		run := ws[i:j]
		i = j - 1
		// A lone capital at a sentence start is not evidence of a name,
		// unless title case made the lexicon decide.
		if len(run) == 1 && w.start && !acronym(w.s) && !tc {
			continue
		}
		x.addName(es, run)
	}
}

// numberEntity returns the entity of the number ws[i], with the unit that
// follows it, and how many words it takes.
func numberEntity(ws []word, i int) (entity string, n int) {
	e := "#" + strings.ToLower(ws[i].s)
	if i+1 < len(ws) && units[strings.ToLower(ws[i+1].s)] {
		return e + " " + strings.ToLower(ws[i+1].s), 2
	}
	return e, 1
}

// nameWord reports whether w can be a word of a name: capitalised,
// without digits, not a generic word and, in a text in title case (tc),
// an acronym or a word not seen in lower case.
func (x *Extractor) nameWord(w word, tc bool) bool {
	if !capitalised(w.s) || hasDigit(w.s) {
		return false
	}
	n := x.norm(w.s)
	if n == "" || Generic(n) {
		return false
	}
	if acronym(w.s) {
		return true
	}
	if tc && x.lower[strings.ToLower(w.s)] > 0 {
		return false
	}
	return true
}

// addName adds each word of a name's run of words, and the name whole
// when it has several.
func (x *Extractor) addName(es *entitySet, run []word) {
	var parts []string
	for _, r := range run {
		if p := x.norm(r.s); p != "" {
			parts = append(parts, p)
			es.add(p)
		}
	}
	if len(parts) > 1 {
		es.add(strings.Join(parts, "_"))
	}
}
