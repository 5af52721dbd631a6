package classify

import "github.com/newsflow/newsflow/internal/text"

// maxTokenBytes bounds a token: longer runs of letters (unsegmented scripts,
// base64, URLs without separators) are dropped rather than matched.
const maxTokenBytes = 64

// tokenOptions are the normalization rules and models match on (see the
// package documentation).
var tokenOptions = text.Options{FoldAccents: true, FoldPlurals: true, JoinApostrophes: true, MaxBytes: maxTokenBytes}

// tokenize returns the tokens of s as rules and models see them.
func tokenize(s string) []string { return text.Tokenize(s, tokenOptions) }
