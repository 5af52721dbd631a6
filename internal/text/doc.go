// Package text is the one definition of clean text that the article
// pipeline shares: the articles operator and the feed parser clean text
// with it.
//
// [Clean] turns an HTML fragment or plain text into the visible text, as
// valid UTF-8 of at most a given number of bytes (markup and invisible
// elements dropped, entities decoded, whitespace collapsed, mojibake
// repaired, cut at a word with "…"); [Collapse] does the same for text that
// is not markup. Both are safe for concurrent use.
package text
