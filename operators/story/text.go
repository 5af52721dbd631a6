package story

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tokens appends the index terms of s to dst: lower-cased runs of letters
// and digits, without stop words, folded by a light English stemmer.
// Apostrophes inside words are dropped ("Dick's" → "dick").
func Tokens(dst []string, s string) []string {
	start := -1
	flush := func(end int) {
		if start < 0 {
			return
		}
		w := s[start:end]
		start = -1
		if t := normalize(w); t != "" {
			dst = append(dst, t)
		}
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if start < 0 {
				start = i
			}
		case (r == '\'' || r == '’') && start >= 0:
			// possessive or contraction: end the word here, skip the rest
			flush(i)
			j := i + size
			for j < len(s) {
				r2, s2 := utf8.DecodeRuneInString(s[j:])
				if !unicode.IsLetter(r2) {
					break
				}
				j += s2
			}
			i = j
			continue
		default:
			flush(i)
		}
		i += size
	}
	flush(len(s))
	return dst
}

func normalize(w string) string {
	w = strings.ToLower(w)
	if len(w) < 2 && !isDigits(w) {
		return ""
	}
	if _, stop := stopWords[w]; stop {
		return ""
	}
	return stem(w)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// stem folds plurals and a few inflections; it is deliberately light, since
// headline words are short and over-stemming merges unrelated names.
func stem(w string) string {
	n := len(w)
	switch {
	case n > 4 && strings.HasSuffix(w, "ies"):
		return w[:n-3] + "y"
	case n > 4 && (strings.HasSuffix(w, "sses") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "xes")):
		return w[:n-2]
	case n > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:n-1]
	}
	return w
}

var stopWords = func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are as at be because been
before being below between both but by can could did do does doing down during each few for from further had has
have having he her here hers herself him himself his how i if in into is it its itself just me more most my
myself no nor not now of off on once only or other our ours ourselves out over own same she should so some such
than that the their theirs them themselves then there these they this those through to too under until up very
was we were what when where which while who whom why will with would you your yours yourself yourselves
says say said new news update updated video watch report reports via amp vs s t`) {
		m[w] = struct{}{}
	}
	return m
}()

// genericWords are words that say little about which event a text is
// about: headline boilerplate ("live updates", "what we know", "explainer",
// "opinion") and common words whose rarity in short headlines gives them a
// weight they do not deserve. They are not dropped, since they still
// separate two texts that are otherwise alike, but weigh less and never
// count as shared evidence (Clusterer.sharedWords). Entries are index
// terms, as Tokens gives them: stemmed ("updates" → "update"), and not stop
// words ("what", "we", "news" are dropped before).
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
