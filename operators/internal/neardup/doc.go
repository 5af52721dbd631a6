// Package neardup detects near-duplicate news articles: the same story
// republished with small edits (a new headline prefix, a changed word, a
// wire copy with another dateline).
//
// Three tools, from cheap to precise:
//
//   - Features and SimHash turn an article (title and summary) into a 64-bit
//     fingerprint; articles with similar words have fingerprints a few bits
//     apart (Hamming). Hasher does the same without allocating.
//   - Index stores fingerprints by id and finds, exactly, every stored
//     fingerprint within Hamming distance k ≤ 7 of a query, probing 4 bands
//     of 16 bits.
//   - MinHasher estimates the Jaccard similarity of the word shingles of two
//     texts (Shingles, Signature, Similarity).
//
// Detector combines them: fingerprints at most K bits apart are
// near-duplicates, fingerprints more than Borderline bits apart are not, and
// MinHash decides the pairs in between. The defaults were calibrated on the
// shared evaluation data; see DefaultOptions and eval_test.go.
//
// Everything is deterministic: hashes are xxhash64 and fixed mixes of it,
// MinHash permutations derive from an explicit seed, and SimHash sums
// fixed-point weights, so fingerprints and signatures can be stored and
// compared across processes and platforms. Changing the tokens (those of
// internal/text with the zero Options), the features or the weights changes
// fingerprints (TestGoldenFingerprints guards them), and stored ones must
// then be recomputed; so may a Go release that updates the Unicode tables,
// for text in newly assigned characters.
//
// Concurrency: Hasher and Detector hold scratch space and are not safe for
// concurrent use; MinHasher is. Index allows one writer or many readers at
// a time.
package neardup
