// Package model is the learned story model: which open story an article
// belongs to, or whether it founds a new one.
//
// Each article becomes several sparse TF-IDF sub-vectors (Extractor): its
// title tokens, its body tokens, all its tokens, and an entity vector of
// capitalised names (multi-word names whole and by part), acronyms and
// numbers with their units. A candidate story is any open story that shares
// a term with the article; its features (Features) are one cosine per
// sub-vector against the story's time-decayed centroid, the best cosine
// against the story's newest members, how many distinct terms they share,
// Gaussians of the gaps between the article and the story's newest, oldest
// and mean times, and the story's size. A logistic ranker scores the
// candidates, and a second logistic decision says whether the article joins
// the best one or founds a story. Generic words (headline boilerplate such
// as "live updates", "what we know", "opinion", "explainer", "day") never
// count as shared evidence; an article never joins a story of up to three
// articles with which it shares a single word, nor, when both have names,
// a story whose names it shares none of.
//
// Both models are trained by Train from labelled articles in stream order
// (newsflow stories train) and stored as a small versioned JSON file with a
// hash of its content (Model.Encode, Decode). A Clusterer runs one pass over
// articles in arrival order; for the same articles in the same order it
// gives the same stories, since every iteration is over slices in a fixed
// order and term ids are given in order of first occurrence.
//
// Concurrency: an Extractor and a Clusterer are not safe for concurrent
// use; a Model is read-only once decoded and may be shared.
package model
