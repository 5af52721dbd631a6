package story

import (
	"strings"

	"github.com/newsflow/newsflow/operators/internal/features"
)

// tokenOptions make the index terms of a text (features.TermOptions: the
// tokens of internal/text with accents and English plurals folded, without
// stop words). The articles operator counts them for the record
// (features.TermCounter) and the clusterer for records without them.
var tokenOptions = features.TermOptions

// stopWords are the stop words of tokenOptions.
var stopWords = features.StopWords

// genericWords are words that say little about which event a text is
// about: headline boilerplate ("live updates", "what we know", "explainer",
// "opinion") and common words whose rarity in short headlines gives them a
// weight they do not deserve. They are not dropped, since they still
// separate two texts that are otherwise alike, but weigh less and never
// count as shared evidence (Clusterer.sharedWords). Entries are index
// terms, as tokenOptions make them: plurals folded ("updates" → "update"),
// and not stop words ("what", "we", "news" are dropped before).
var genericWords = func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, w := range strings.Fields(`live update know explainer explained analysis opinion editorial column
commentary letter podcast newsletter briefing recap roundup factbox timeline latest breaking exclusive
today tonight yesterday week weekend morning evening thing way need want`) {
		m[w] = struct{}{}
	}
	return m
}()

// generic reports whether an index term is a generic word.
func generic(term string) bool {
	_, ok := genericWords[term]
	return ok
}
