// Package classify labels news articles with topics and a confidence for
// each.
//
// [Classifier] is the seam: the classify operator calls Classify on every
// article, and either implementation plugs in behind it. [New] builds one
// from [Options]: a trained [Model] when Options.ModelFile is set, else the
// keyword [Rules] of a YAML file (by default configs/topics.yaml). Both are
// immutable once built and safe for concurrent use; Classify allocates only
// the returned labels.
//
// # Tokens
//
// Rules and models match on the same normalized tokens, those of
// internal/text with accents and plurals folded and apostrophes joining:
// maximal runs of Unicode letters and digits (combining marks stay with
// their letter), lower-cased, with the accents of Latin letters removed
// ("Pokémon" → "pokemon", "ß" → "ss"), and each Han, Hiragana and Katakana
// rune a token by itself ("東京" → "東", "京"). An apostrophe between letters
// is dropped ("don't" → "dont"); any other character separates tokens, so
// "e-mail" is two tokens and "U.S." is "u", "s". English plurals and
// possessives are folded by a light, dictionary-free stemmer: "companies"
// → "company", "taxes" → "tax", "matches" → "match", "rates" → "rate",
// "BBC's" → "bbc"; words of up to three letters, words ending in "ss", "us"
// or "is" and a short list of exceptions ("news", "series", "physics", ...)
// are kept. Tokens longer than 64 bytes are dropped. Invalid UTF-8
// separates tokens.
//
// # Rules
//
// A rules file (see [ParseRules] for the format) lists per topic weighted
// terms (single tokens), phrases (several tokens, matched as a contiguous
// sequence) and negative entries. For each field of the document (title,
// summary, content, with field weights 3, 1.5 and 1 by default) an entry
// matched n times adds
//
//	weight × field weight × (1 + ln n)
//
// to its topic's score, a negative entry subtracts the same, and a topic's
// score s_t is at least 0. A phrase and the terms inside it both count. The
// confidence of topic t is
//
//	s_t / (prior + Σ_u s_u)
//
// so confidences are in [0, 1), sum to less than 1, grow with the amount of
// evidence (prior, 3 by default, acts as the score of "no topic"), and are
// shared between topics when the evidence is mixed: one title match of a
// weight-2 term gives 6 / (3 + 6) = 0.67. On BBC News the top label's
// accuracy rises with this confidence: about 0.55 below 0.4, 0.73 at
// 0.4–0.5, 0.9 at 0.5–0.7 and 0.99 above 0.7.
//
// # Model
//
// [Train] fits a multinomial Naive Bayes [Model] to labelled [Example]s:
// title tokens count TitleWeight times, Laplace smoothing, log-space
// scoring, optional bigram features; the confidence of a topic is its
// posterior probability. Posteriors of long documents are close to 0 or 1,
// so a model's confidence says little about its accuracy on text unlike
// what it was trained on. [Model.Save] writes a versioned JSON file (gzip it
// if you like: [LoadModel] reads both) with the counts, not the
// probabilities, so training is exactly reproducible: the same examples in
// the same order give a byte-identical file (and, with an integer title
// weight and without SublinearTF, where every count is a sum of integers, in
// any order).
//
// # Evaluation
//
// [ReadExamples] reads labelled NDJSON, and [Evaluate] scores any
// Classifier's top label against it (accuracy, per-topic precision and
// recall, confusion matrix); `newsflow topics train` and `newsflow topics
// eval` are built on them.
package classify
