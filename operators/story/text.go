package story

import (
	"strings"

	"github.com/newsflow/newsflow/internal/text"
)

// tokenOptions make the index terms of a text: the tokens of internal/text
// with accents and English plurals folded, without stop words.
var tokenOptions = text.Options{FoldAccents: true, FoldPlurals: true, Stop: stopWords}

// stopWords are function words, headline boilerplate that says nothing
// about the event, and every single letter (initials, the "s" of "U.S.").
var stopWords = text.NewStopWords(`a about above after again against all am an and any are as at be because been
before being below between both but by can could did do does doing down during each few for from further had has
have having he her here hers herself him himself his how i if in into is it its itself just me more most my
myself no nor not now of off on once only or other our ours ourselves out over own same she should so some such
than that the their theirs them themselves then there these they this those through to too under until up very
was we were what when where which while who whom why will with would you your yours yourself yourselves
says say said new news update updated video watch report reports via amp vs
b c d e f g h j k l m n o p q r s t u v w x y z`)

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
