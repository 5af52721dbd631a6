// Package text is the one definition of words and of clean text that the
// article pipeline shares: the articles operator and the feed parser clean
// text with it, and the topic classifier, the near-duplicate detector and
// the story clusterer split text into tokens with it.
//
// # Clean text
//
// [Clean] turns an HTML fragment or plain text into the visible text, as
// valid UTF-8 of at most a given number of bytes (markup and invisible
// elements dropped, entities decoded, whitespace collapsed, mojibake
// repaired, cut at a word with "…"); [Collapse] does the same for text that
// is not markup.
//
// # Tokens
//
// A token is a maximal run of Unicode letters, digits and combining marks
// (marks keep decomposed accents and the vowel signs of Indic scripts in
// their word), lower-cased. Each Han, Hiragana and Katakana rune is a
// token by itself, since those scripts do not separate words with spaces;
// word n-grams over them are character n-grams. Everything else, including
// punctuation, apostrophes and invalid UTF-8, separates tokens: "e-mail" is
// "e", "mail", "U.S." is "u", "s" and "don't" is "don", "t".
//
// [Options] add, per consumer, what not all of them want: folding the
// accents of Latin letters ("Pokémon" → "pokemon", "Straße" → "strasse"),
// folding English plurals with a light, dictionary-free stemmer
// ("companies" → "company", "taxes" → "tax", "matches" → "match", with
// words of up to three letters, words ending in "ss", "us" or "is" and a
// short list of exceptions such as "news", "series" and "physics" kept),
// joining words at an apostrophe before a letter ("don't" → "dont",
// "BBC's" → "bbcs", which plural folding makes "bbc"), dropping tokens
// longer than a number of bytes, and dropping stop words ([StopWords],
// checked before plural folding). The zero Options only segment and
// lower-case.
//
// [Tokenizer] yields the tokens of a string without allocating once its
// buffer has grown; [Tokenize] returns them as strings.
//
// Tokens are stored: the near-duplicate detector keeps fingerprints of the
// tokens of the zero Options (operators/internal/neardup TestGoldenFingerprints pins
// them), the story clusterer keeps its vocabulary, and trained topic models
// keep their features. A change to the segmentation or the folding changes
// what those hold. Tokens also depend on the Unicode tables of the Go
// release, for text in newly assigned characters.
//
// # Concurrency
//
// Clean, Collapse and Tokenize are safe for concurrent use, as are Options
// and StopWords, which are immutable once built. A Tokenizer holds its
// position and buffer and is not: give each goroutine its own.
package text
