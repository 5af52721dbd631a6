// Package story groups articles about the same event into stories.
//
// Near-copies of an article (syndicated wire copy, re-posts with a new
// URL) are found by the near-duplicate stage (package neardup) and join
// the story of the article they copy. Everything else goes through the
// story-level Clusterer: articles about one event from different outlets
// rarely share a SimHash neighbourhood, since their headlines differ, so
// the Clusterer compares an article's TF-IDF vector with the centroids of
// the stories still open, with a similarity that decays with the time
// between the article and the story's latest article. An article joins the
// most similar story above a threshold or founds a new one; when it is
// also close to a second story whose centroid is close to the first, the
// two stories merge and the older one survives.
//
// What is derived from an article's own text (its SimHash and MinHash
// signature, its index terms with their counts) comes with its record,
// computed by the articles operator (operators/internal/features); the
// stories task decodes it, or computes it for a record without it, with the
// same result either way. The IDF weights depend on the stream and are the
// Clusterer's.
//
// Everything is deterministic: the same articles in the same order give
// the same stories, whatever the map iteration order, and a Clusterer
// restored from its persisted state continues exactly as the original.
package story
